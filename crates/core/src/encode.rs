//! The row result encoding: one owned byte buffer per result, laid out so the JavaScript
//! side can build rows with a handful of typed-array reads and ONE string decode for all
//! text of the result (see docs/experiments/001-result-path.md).
//!
//! Layout (little endian; every section the JS side views as a typed array starts on an
//! 8-byte boundary):
//!
//! ```text
//! header   8 x u32   version, rows, cols, flags, names_len, text_len, blob_len, bigint_count
//! nums     f64 x cells   INTEGER (safe) / REAL value; for TEXT the end offset of the cell in
//!                        the decoded text string (UTF-16 units); for BLOB the end byte offset
//! bigs     i64 x bigint_count   integers outside +-(2^53 - 1), in cell order
//! tags     u8 x cells    one of the TAG_* constants
//! names    column names, UTF-8, each followed by a NUL
//! text     all TEXT cells, valid UTF-8, back to back
//! blobs    all BLOB cells, back to back
//! ```

use rusqlite::types::ValueRef;

pub const FORMAT_VERSION: u32 = 1;
pub const HEADER_BYTES: usize = 32;
pub const FLAG_ASCII_TEXT: u32 = 1;

pub const TAG_NULL: u8 = 0;
pub const TAG_REAL: u8 = 1;
pub const TAG_TEXT: u8 = 2;
pub const TAG_BLOB: u8 = 3;
pub const TAG_BIGINT: u8 = 4;
pub const TAG_INT: u8 = 5;

/// Largest integer a JS number holds exactly.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// An encoded result, owned: the front end takes the bytes over without copying.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct EncodedRows {
    pub bytes: Vec<u8>,
    pub rows: u32,
}

/// Collects rows of one result set.
pub struct RowEncoder {
    cols: usize,
    names: Vec<u8>,
    tags: Vec<u8>,
    nums: Vec<f64>,
    bigs: Vec<i64>,
    text: Vec<u8>,
    text_units: u64,
    ascii: bool,
    blobs: Vec<u8>,
    rows: u32,
}

impl RowEncoder {
    pub fn new<'a>(names: impl Iterator<Item = &'a str>) -> Self {
        let mut buf = Vec::new();
        let mut cols = 0;
        for n in names {
            buf.extend_from_slice(n.as_bytes());
            buf.push(0);
            cols += 1;
        }
        RowEncoder {
            cols,
            names: buf,
            tags: Vec::new(),
            nums: Vec::new(),
            bigs: Vec::new(),
            text: Vec::new(),
            text_units: 0,
            ascii: true,
            blobs: Vec::new(),
            rows: 0,
        }
    }

    pub fn columns(&self) -> usize {
        self.cols
    }

    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Adds one row from a stepped statement.
    pub fn push_row(&mut self, row: &rusqlite::Row<'_>) {
        for i in 0..self.cols {
            self.push_value(row.get_ref_unwrap(i));
        }
        self.rows += 1;
    }

    pub fn push_value(&mut self, v: ValueRef<'_>) {
        match v {
            ValueRef::Null => {
                self.tags.push(TAG_NULL);
                self.nums.push(0.0);
            }
            ValueRef::Integer(i) => {
                if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&i) {
                    self.tags.push(TAG_INT);
                    self.nums.push(i as f64);
                } else {
                    self.tags.push(TAG_BIGINT);
                    self.nums.push(0.0);
                    self.bigs.push(i);
                }
            }
            ValueRef::Real(f) => {
                self.tags.push(TAG_REAL);
                self.nums.push(f);
            }
            ValueRef::Text(bytes) => {
                self.push_text(bytes);
                self.tags.push(TAG_TEXT);
                self.nums.push(self.text_units as f64);
            }
            ValueRef::Blob(bytes) => {
                self.blobs.extend_from_slice(bytes);
                self.tags.push(TAG_BLOB);
                self.nums.push(self.blobs.len() as f64);
            }
        }
    }

    fn push_text(&mut self, bytes: &[u8]) {
        if bytes.is_ascii() {
            self.text.extend_from_slice(bytes);
            self.text_units += bytes.len() as u64;
            return;
        }
        self.ascii = false;
        // Invalid UTF-8 (e.g. CAST(x'ff' AS TEXT)) becomes U+FFFD, as the JS side would do.
        let s = String::from_utf8_lossy(bytes);
        self.text_units += utf16_len(&s);
        self.text.extend_from_slice(s.as_bytes());
    }

    pub fn finish(self) -> EncodedRows {
        let cells = self.tags.len();
        let mut len = HEADER_BYTES + cells * 8 + self.bigs.len() * 8;
        len += cells + self.names.len() + self.text.len() + self.blobs.len();
        let mut out = Vec::with_capacity(len);
        let header = [
            FORMAT_VERSION,
            self.rows,
            self.cols as u32,
            if self.ascii { FLAG_ASCII_TEXT } else { 0 },
            self.names.len() as u32,
            self.text.len() as u32,
            self.blobs.len() as u32,
            self.bigs.len() as u32,
        ];
        for h in header {
            out.extend_from_slice(&h.to_le_bytes());
        }
        for n in &self.nums {
            out.extend_from_slice(&n.to_le_bytes());
        }
        for b in &self.bigs {
            out.extend_from_slice(&b.to_le_bytes());
        }
        out.extend_from_slice(&self.tags);
        out.extend_from_slice(&self.names);
        out.extend_from_slice(&self.text);
        out.extend_from_slice(&self.blobs);
        debug_assert_eq!(out.len(), len);
        EncodedRows { bytes: out, rows: self.rows }
    }
}

/// Length of a string in UTF-16 code units, which is how JS measures and slices strings.
pub fn utf16_len(s: &str) -> u64 {
    s.chars().map(|c| c.len_utf16() as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(bytes: &[u8], i: usize) -> u32 {
        u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap())
    }

    #[test]
    fn encodes_every_kind_of_value() {
        let mut e = RowEncoder::new(["a", "b"].into_iter());
        e.push_value(ValueRef::Integer(7));
        e.push_value(ValueRef::Text(b"h\xc3\xa9"));
        e.push_value(ValueRef::Integer(i64::MAX));
        e.push_value(ValueRef::Blob(&[1, 2, 3]));
        e.rows = 2;
        let r = e.finish();
        let b = &r.bytes;
        assert_eq!(header(b, 1), 2);
        assert_eq!(header(b, 2), 2);
        assert_eq!(header(b, 3) & FLAG_ASCII_TEXT, 0);
        assert_eq!(header(b, 5), 3); // "hé" is 3 bytes
        assert_eq!(header(b, 7), 1);
        let num = |i: usize| f64::from_le_bytes(b[32 + i * 8..40 + i * 8].try_into().unwrap());
        assert_eq!(num(0), 7.0);
        assert_eq!(num(1), 2.0); // 2 UTF-16 units
        assert_eq!(num(3), 3.0);
        let big = i64::from_le_bytes(b[64..72].try_into().unwrap());
        assert_eq!(big, i64::MAX);
        assert_eq!(&b[72..76], &[TAG_INT, TAG_TEXT, TAG_BIGINT, TAG_BLOB]);
    }

    #[test]
    fn replaces_invalid_utf8_and_counts_astral_characters() {
        let mut e = RowEncoder::new(["t"].into_iter());
        e.push_value(ValueRef::Text(b"\xff"));
        e.push_value(ValueRef::Text("😀".as_bytes()));
        let r = e.finish();
        // U+FFFD is one unit, the emoji two.
        let num = |i: usize| f64::from_le_bytes(r.bytes[32 + i * 8..40 + i * 8].try_into().unwrap());
        assert_eq!(num(0), 1.0);
        assert_eq!(num(1), 3.0);
    }
}
