//! The row result encoding: one owned byte buffer per result, laid out so the JavaScript
//! side can build rows with a handful of typed-array reads and one string decode per text
//! CHUNK (see docs/experiments/001-result-path.md and 010-chunked-text.md).
//!
//! The text of a result is cut into chunks at value boundaries: a chunk holds at most
//! `TEXT_CHUNK_BYTES` bytes, or exactly one value that is larger on its own. The JS side
//! decodes one chunk into one string and slices the fields out of it, so a field kept
//! after its result is gone keeps at most its chunk alive (V8 slices reference their
//! parent), and no string it makes is longer than one chunk.
//!
//! Layout (little endian; every section the JS side views as a typed array starts on an
//! 8-byte boundary):
//!
//! ```text
//! header   8 x u32   version, rows, cols, flags, names_len, chunk_count, 0, bigint_count
//! nums     f64 x cells   INTEGER (safe) / REAL value; for TEXT the end offset of the cell in
//!                        its chunk's decoded string (UTF-16 units); for BLOB the end byte
//!                        offset in the blob section
//! bigs     i64 x bigint_count   integers outside +-(2^53 - 1), in cell order
//! chunks   f64 x chunk_count    end byte offset of each text chunk in the text section
//! tags     u8 x cells    one of the TAG_* constants; the first TEXT cell of each chunk is
//!                        TAG_TEXT_CHUNK instead of TAG_TEXT
//! names    column names, UTF-8, each followed by a NUL
//! text     all TEXT cells, valid UTF-8, back to back
//! blobs    all BLOB cells, back to back
//! ```

use rusqlite::types::ValueRef;

pub const FORMAT_VERSION: u32 = 2;
pub const HEADER_BYTES: usize = 32;
pub const FLAG_ASCII_TEXT: u32 = 1;

/// Most bytes of text one chunk holds (unless a single value is larger): the bound on what
/// a kept field retains, and the size of each string decode. Chosen by measurement in
/// docs/experiments/010-chunked-text.md.
pub const TEXT_CHUNK_BYTES: usize = 64 * 1024;

pub const TAG_NULL: u8 = 0;
pub const TAG_REAL: u8 = 1;
pub const TAG_TEXT: u8 = 2;
pub const TAG_BLOB: u8 = 3;
pub const TAG_BIGINT: u8 = 4;
pub const TAG_INT: u8 = 5;
/// A TEXT cell that starts a new chunk (its offset is relative to that chunk).
pub const TAG_TEXT_CHUNK: u8 = 6;

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
    /// End byte offset in `text` of each closed chunk; the open chunk runs to `text.len()`.
    chunk_ends: Vec<f64>,
    /// Where the open chunk starts in `text`, if one is open.
    chunk_start: Option<usize>,
    /// UTF-16 units of the open chunk so far.
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
            chunk_ends: Vec::new(),
            chunk_start: None,
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
                let tag = self.push_text(bytes);
                self.tags.push(tag);
                self.nums.push(self.text_units as f64);
            }
            ValueRef::Blob(bytes) => {
                self.blobs.extend_from_slice(bytes);
                self.tags.push(TAG_BLOB);
                self.nums.push(self.blobs.len() as f64);
            }
        }
    }

    /// Appends one TEXT value and returns its tag: TAG_TEXT_CHUNK when it starts a chunk.
    fn push_text(&mut self, bytes: &[u8]) -> u8 {
        if bytes.is_ascii() {
            let tag = self.chunk_for(bytes.len());
            self.text.extend_from_slice(bytes);
            self.text_units += bytes.len() as u64;
            return tag;
        }
        self.ascii = false;
        // Invalid UTF-8 (e.g. CAST(x'ff' AS TEXT)) becomes U+FFFD, as the JS side would do.
        let s = String::from_utf8_lossy(bytes);
        let tag = self.chunk_for(s.len());
        self.text_units += utf16_len(&s);
        self.text.extend_from_slice(s.as_bytes());
        tag
    }

    /// Opens a new chunk for a value of `len` bytes when the open one would outgrow
    /// TEXT_CHUNK_BYTES (a value larger than that gets a chunk of its own).
    fn chunk_for(&mut self, len: usize) -> u8 {
        match self.chunk_start {
            // No exception for an open chunk that is still empty: a chunk larger than the
            // bound must hold exactly one value, whose length the JS side then knows.
            Some(start) if self.text.len() - start + len <= TEXT_CHUNK_BYTES => TAG_TEXT,
            open => {
                if open.is_some() {
                    self.chunk_ends.push(self.text.len() as f64);
                }
                self.chunk_start = Some(self.text.len());
                self.text_units = 0;
                TAG_TEXT_CHUNK
            }
        }
    }

    pub fn finish(mut self) -> EncodedRows {
        if self.chunk_start.is_some() {
            self.chunk_ends.push(self.text.len() as f64);
        }
        let cells = self.tags.len();
        let mut len = HEADER_BYTES + cells * 8 + self.bigs.len() * 8 + self.chunk_ends.len() * 8;
        len += cells + self.names.len() + self.text.len() + self.blobs.len();
        let mut out = Vec::with_capacity(len);
        // Section lengths that can pass 4 GiB (text, blobs) are not in the header: the text
        // ends at the last chunk end and the blobs run to the end of the buffer.
        let header = [
            FORMAT_VERSION,
            self.rows,
            self.cols as u32,
            if self.ascii { FLAG_ASCII_TEXT } else { 0 },
            self.names.len() as u32,
            self.chunk_ends.len() as u32,
            0,
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
        for c in &self.chunk_ends {
            out.extend_from_slice(&c.to_le_bytes());
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
        assert_eq!(header(b, 5), 1); // one text chunk
        assert_eq!(header(b, 7), 1);
        let num = |i: usize| f64::from_le_bytes(b[32 + i * 8..40 + i * 8].try_into().unwrap());
        assert_eq!(num(0), 7.0);
        assert_eq!(num(1), 2.0); // 2 UTF-16 units
        assert_eq!(num(3), 3.0);
        let big = i64::from_le_bytes(b[64..72].try_into().unwrap());
        assert_eq!(big, i64::MAX);
        let chunk_end = f64::from_le_bytes(b[72..80].try_into().unwrap());
        assert_eq!(chunk_end, 3.0); // "hé" is 3 bytes
        assert_eq!(&b[80..84], &[TAG_INT, TAG_TEXT_CHUNK, TAG_BIGINT, TAG_BLOB]);
        assert_eq!(&b[84..88], b"a\0b\0");
        assert_eq!(&b[88..91], "hé".as_bytes());
        assert_eq!(&b[91..], &[1, 2, 3]);
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

    /// Decodes the chunk table and the (tag, chunk, offset) of every cell, for the tests.
    fn chunks_of(r: &EncodedRows) -> (Vec<usize>, Vec<(u8, f64)>) {
        let b = &r.bytes;
        let cells = header(b, 1) as usize * header(b, 2) as usize;
        let at = HEADER_BYTES + cells * 8 + header(b, 7) as usize * 8;
        let ends = (0..header(b, 5) as usize)
            .map(|k| f64::from_le_bytes(b[at + k * 8..at + k * 8 + 8].try_into().unwrap()) as usize)
            .collect();
        let tags_at = at + header(b, 5) as usize * 8;
        let cells = (0..cells)
            .map(|i| (b[tags_at + i], f64::from_le_bytes(b[HEADER_BYTES + i * 8..HEADER_BYTES + i * 8 + 8].try_into().unwrap())))
            .collect();
        (ends, cells)
    }

    #[test]
    fn cuts_text_into_chunks_at_value_boundaries() {
        let mut e = RowEncoder::new(["t"].into_iter());
        let small = vec![b'a'; 1000];
        let big = vec![b'b'; TEXT_CHUNK_BYTES * 2];
        // 65 values of 1000 bytes fill a chunk (65,000 <= 65,536); the 66th opens the next.
        for _ in 0..66 {
            e.push_value(ValueRef::Text(&small));
        }
        e.push_value(ValueRef::Text(&big)); // larger than a chunk: a chunk of its own
        e.push_value(ValueRef::Text(b"")); // starts the chunk after the big value
        e.push_value(ValueRef::Text(&small));
        e.rows = 69;
        let r = e.finish();
        let (ends, cells) = chunks_of(&r);
        assert_eq!(ends, vec![65_000, 66_000, 66_000 + TEXT_CHUNK_BYTES * 2, 66_000 + TEXT_CHUNK_BYTES * 2 + 1000]);
        assert_eq!(cells[0], (TAG_TEXT_CHUNK, 1000.0));
        assert_eq!(cells[64], (TAG_TEXT, 65_000.0));
        assert_eq!(cells[65], (TAG_TEXT_CHUNK, 1000.0)); // offsets restart in each chunk
        assert_eq!(cells[66], (TAG_TEXT_CHUNK, (TEXT_CHUNK_BYTES * 2) as f64));
        assert_eq!(cells[67], (TAG_TEXT_CHUNK, 0.0));
        assert_eq!(cells[68], (TAG_TEXT, 1000.0));
    }

    #[test]
    fn a_chunk_never_outgrows_its_bound_unless_one_value_does() {
        // Mixed lengths and non-ASCII text (offsets in UTF-16 units, bounds in bytes).
        let mut e = RowEncoder::new(["t"].into_iter());
        let mut values = Vec::new();
        for i in 0..5000usize {
            let len = (i * 7919) % 40_000;
            values.push(if i % 3 == 0 { "é".repeat(len / 2) } else { "x".repeat(len) });
        }
        for v in &values {
            e.push_value(ValueRef::Text(v.as_bytes()));
        }
        e.rows = values.len() as u32;
        let r = e.finish();
        let (ends, cells) = chunks_of(&r);
        let mut start = 0;
        let mut k = 0;
        let mut values_in_chunk = 0;
        let mut units = 0.0;
        for (i, v) in values.iter().enumerate() {
            if cells[i].0 == TAG_TEXT_CHUNK {
                if i > 0 {
                    assert!(ends[k] - start <= TEXT_CHUNK_BYTES || values_in_chunk == 1);
                    start = ends[k];
                    k += 1;
                }
                values_in_chunk = 0;
                units = 0.0;
            } else {
                assert_eq!(cells[i].0, TAG_TEXT);
            }
            values_in_chunk += 1;
            units += utf16_len(v) as f64;
            assert_eq!(cells[i].1, units);
        }
        assert_eq!(k + 1, ends.len());
        assert_eq!(*ends.last().unwrap(), values.iter().map(String::len).sum::<usize>());
    }

    #[test]
    fn a_result_without_text_has_no_chunks() {
        let mut e = RowEncoder::new(["n"].into_iter());
        e.push_value(ValueRef::Integer(1));
        e.rows = 1;
        let r = e.finish();
        assert_eq!(header(&r.bytes, 5), 0);
        assert_eq!(r.bytes.len(), HEADER_BYTES + 8 + 1 + 2);
    }
}
