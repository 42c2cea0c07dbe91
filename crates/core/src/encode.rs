//! The row result encoding: one owned byte buffer per result, laid out so the JavaScript
//! side can build rows with a handful of typed-array reads and one string decode per text
//! CHUNK (see docs/experiments/001-result-path.md and 010-chunked-text.md).
//!
//! The text of a result is cut into chunks. The JS side decodes one chunk into one string
//! and slices the fields out of it, so a field kept after its result is gone keeps at most
//! its chunk alive (V8 slices reference their parent), and no string it makes is longer
//! than a chunk. Chunks normally end between rows, once they hold TEXT_CHUNK_BYTES: the
//! decoder then switches strings once per row, outside the per-column code (a branch taken
//! at a different column in each result would deoptimize the generated row builder). A
//! row whose text would take a chunk past TEXT_CHUNK_MAX_BYTES is cut inside the row, before
//! the value that would; that value's cell is tagged TAG_TEXT_CHUNK. So a chunk holds at
//! most TEXT_CHUNK_MAX_BYTES, or exactly one value that is larger on its own (its first).
//!
//! Layout (little endian; every section the JS side views as a typed array starts on an
//! 8-byte boundary):
//!
//! ```text
//! header   10 x u32  version, rows, cols, flags, names_len, row_chunks, cell_chunks,
//!                    bigint_count, names_hash (FNV-1a of the names section), 0
//! nums     f64 x cells   INTEGER (safe) / REAL value; for TEXT the end offset of the cell in
//!                        its chunk's decoded string (UTF-16 units); for BLOB the end byte
//!                        offset in the blob section
//! bigs     i64 x bigint_count   integers outside +-(2^53 - 1), in cell order
//! row chunks   f64 x 3 x row_chunks   chunks entered at the start of a row, in order:
//!                                     first row, start and end byte in the text section
//! cell chunks  f64 x 2 x cell_chunks  chunks entered at a TAG_TEXT_CHUNK cell, in cell
//!                                     order: start and end byte in the text section
//! tags     u8 x cells    one of the TAG_* constants
//! names    column names, UTF-8, each followed by a NUL
//! text     all TEXT cells, valid UTF-8, back to back (its length: the largest chunk end)
//! blobs    all BLOB cells, back to back, to the end of the buffer
//! ```
//!
//! Section lengths that can pass 4 GiB (text, blobs) are not in the header.

use rusqlite::types::ValueRef;
use crate::raw_statement::ColumnValues;

pub const FORMAT_VERSION: u32 = 3;
pub const HEADER_BYTES: usize = 40;
pub const FLAG_ASCII_TEXT: u32 = 1;

/// A chunk ends with the first row that brings it to this many bytes of text. Chosen by
/// measurement in docs/experiments/010-chunked-text.md.
pub const TEXT_CHUNK_BYTES: usize = 64 * 1024;
/// No chunk holds more bytes of text than this, unless one value is larger on its own: the
/// bound on what a kept field retains.
pub const TEXT_CHUNK_MAX_BYTES: usize = 4 * TEXT_CHUNK_BYTES;

pub const TAG_NULL: u8 = 0;
pub const TAG_REAL: u8 = 1;
pub const TAG_TEXT: u8 = 2;
pub const TAG_BLOB: u8 = 3;
pub const TAG_BIGINT: u8 = 4;
pub const TAG_INT: u8 = 5;
/// A TEXT cell that starts a chunk inside a row (its offset is relative to that chunk).
pub const TAG_TEXT_CHUNK: u8 = 6;

/// 32-bit FNV-1a of a names section: cheap, and only a hint (see `RowEncoder::names_hash`).
pub fn names_hash(names: &[u8]) -> u32 {
    names.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// Writes `names` as the names section holds them, each followed by a NUL; returns how many.
fn push_names(section: &mut Vec<u8>, names: impl IntoIterator<Item = impl AsRef<str>>) -> usize {
    let mut count = 0;
    for n in names {
        section.extend_from_slice(n.as_ref().as_bytes());
        section.push(0);
        count += 1;
    }
    count
}

/// A result's column names as the names section holds them, with their `names_hash`: made
/// once for a statement and kept with it, rather than read from SQLite for every result.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnNames {
    section: Vec<u8>,
    count: usize,
    hash: u32,
}

impl ColumnNames {
    pub fn new(names: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        let mut section = Vec::new();
        let count = push_names(&mut section, names);
        ColumnNames { hash: names_hash(&section), section, count }
    }

    /// The names, in order. (A name holds no NUL: SQLite's names are C strings.)
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.section
            .split(|&b| b == 0)
            .take(self.count)
            // Each piece is a whole `str` pushed by `new` (NUL is never inside a UTF-8
            // sequence), so this never falls back.
            .map(|piece| std::str::from_utf8(piece).unwrap_or_default())
    }
}

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
    /// `names_hash` of the names section: lets the JS side find the row builder of a column
    /// list it has seen without decoding the names (it compares the bytes before it trusts a
    /// match).
    names_hash: u32,
    /// The growing sections, from this thread's spares (given back on drop).
    sections: Sections,
    /// The open chunk, if any: where it starts in `text`, and the row it is entered at
    /// (None: entered at a cell).
    open: Option<(usize, Option<u32>)>,
    /// UTF-16 units of the open chunk so far.
    text_units: u64,
    ascii: bool,
    rows: u32,
}

impl RowEncoder {
    /// An encoder for a result with these column names. Its buffers, the names' too, come
    /// from this thread's spares: a small result makes no allocation but its own buffer.
    pub fn new(names: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        let mut sections = Sections::take();
        let cols = push_names(&mut sections.names, names);
        let names_hash = names_hash(&sections.names);
        Self::with_sections(sections, cols, names_hash)
    }

    /// `new`, with names made once and kept (a statement's, see `RawStatement::names`).
    pub fn with_names(names: &ColumnNames) -> Self {
        let mut sections = Sections::take();
        sections.names.extend_from_slice(&names.section);
        Self::with_sections(sections, names.count, names.hash)
    }

    fn with_sections(sections: Sections, cols: usize, names_hash: u32) -> Self {
        RowEncoder { cols, names_hash, sections, open: None, text_units: 0, ascii: true, rows: 0 }
    }

    pub fn columns(&self) -> usize {
        self.cols
    }

    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// About how many bytes the encoding holds so far (what a chunk's size is measured by).
    pub fn approx_bytes(&self) -> usize {
        let s = &self.sections;
        s.tags.len() + 8 * (s.nums.len() + s.bigs.len()) + s.text.len() + s.blobs.len()
    }

    /// Adds one row from a stepped statement.
    pub fn push_row<R: ColumnValues + ?Sized>(&mut self, row: &R) -> crate::error::Result<()> {
        for i in 0..self.cols {
            self.push_value(row.value(i)?);
        }
        self.end_row();
        Ok(())
    }

    /// Ends the row whose values were pushed; closes the open chunk once it is full.
    pub fn end_row(&mut self) {
        self.rows += 1;
        if matches!(self.open, Some((start, _)) if self.sections.text.len() - start >= TEXT_CHUNK_BYTES) {
            self.close_chunk();
        }
    }

    pub fn push_value(&mut self, v: ValueRef<'_>) {
        match v {
            ValueRef::Null => {
                self.sections.tags.push(TAG_NULL);
                self.sections.nums.push(0.0);
            }
            ValueRef::Integer(i) => {
                if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&i) {
                    self.sections.tags.push(TAG_INT);
                    self.sections.nums.push(i as f64);
                } else {
                    self.sections.tags.push(TAG_BIGINT);
                    self.sections.nums.push(0.0);
                    self.sections.bigs.push(i);
                }
            }
            ValueRef::Real(f) => {
                self.sections.tags.push(TAG_REAL);
                self.sections.nums.push(f);
            }
            ValueRef::Text(bytes) => {
                let tag = self.push_text(bytes);
                self.sections.tags.push(tag);
                self.sections.nums.push(self.text_units as f64);
            }
            ValueRef::Blob(bytes) => {
                self.sections.blobs.extend_from_slice(bytes);
                self.sections.tags.push(TAG_BLOB);
                self.sections.nums.push(self.sections.blobs.len() as f64);
            }
        }
    }

    /// Appends one TEXT value and returns its tag: TAG_TEXT_CHUNK when it starts a chunk.
    fn push_text(&mut self, bytes: &[u8]) -> u8 {
        if is_ascii(bytes) {
            let tag = self.chunk_for(bytes.len());
            self.sections.text.extend_from_slice(bytes);
            self.text_units += bytes.len() as u64;
            return tag;
        }
        self.ascii = false;
        // Invalid UTF-8 (e.g. CAST(x'ff' AS TEXT)) becomes U+FFFD, as the JS side would do.
        let s = String::from_utf8_lossy(bytes);
        let tag = self.chunk_for(s.len());
        self.text_units += utf16_len(&s);
        self.sections.text.extend_from_slice(s.as_bytes());
        tag
    }

    /// Makes room for a value of `len` bytes: opens a chunk entered at this row when none is
    /// open, or cuts the open one here (a TAG_TEXT_CHUNK cell) when the value would take it
    /// past TEXT_CHUNK_MAX_BYTES. So a chunk larger than the bound holds exactly one value,
    /// its first (the JS side names that value's column when it cannot become a string).
    fn chunk_for(&mut self, len: usize) -> u8 {
        match self.open {
            None => {
                self.open = Some((self.sections.text.len(), Some(self.rows)));
                self.text_units = 0;
                TAG_TEXT
            }
            Some((start, _)) if self.sections.text.len() - start + len <= TEXT_CHUNK_MAX_BYTES => TAG_TEXT,
            Some(_) => {
                self.close_chunk();
                self.open = Some((self.sections.text.len(), None));
                self.text_units = 0;
                TAG_TEXT_CHUNK
            }
        }
    }

    fn close_chunk(&mut self) {
        let Some((start, row)) = self.open.take() else { return };
        let (start, end) = (start as f64, self.sections.text.len() as f64);
        match row {
            Some(row) => self.sections.row_chunks.extend_from_slice(&[row as f64, start, end]),
            None => self.sections.cell_chunks.extend_from_slice(&[start, end]),
        }
    }

    pub fn finish(self) -> EncodedRows {
        self.finish_in(&crate::buffer_pool::RESULTS)
    }

    /// `finish`, with the result buffer from `pool` when it holds one that fits.
    pub fn finish_in(mut self, pool: &crate::buffer_pool::Pool) -> EncodedRows {
        self.close_chunk();
        let cells = self.sections.tags.len();
        let chunk_table = (self.sections.row_chunks.len() + self.sections.cell_chunks.len()) * 8;
        let mut len = HEADER_BYTES + cells * 8 + self.sections.bigs.len() * 8 + chunk_table;
        len += cells + self.sections.names.len() + self.sections.text.len() + self.sections.blobs.len();
        // A kept buffer is already resident (at most a quarter larger than the result, which
        // holds on to it). A new one gets a sixteenth more, so that when it comes back it can
        // serve a slightly larger result. Small results (most of them) do not look: the pool
        // holds nothing that small.
        let large = len + len / 4 >= crate::buffer_pool::MIN_POOLED_BYTES;
        let kept = if large { pool.take(len, len + len / 4) } else { None };
        let mut out = kept.unwrap_or_else(|| Vec::with_capacity(if large { len + len / 16 } else { len }));
        let header = [
            FORMAT_VERSION,
            self.rows,
            self.cols as u32,
            if self.ascii { FLAG_ASCII_TEXT } else { 0 },
            self.sections.names.len() as u32,
            (self.sections.row_chunks.len() / 3) as u32,
            (self.sections.cell_chunks.len() / 2) as u32,
            self.sections.bigs.len() as u32,
            self.names_hash,
            0,
        ];
        for h in header {
            out.extend_from_slice(&h.to_le_bytes());
        }
        extend_le(&mut out, &self.sections.nums);
        extend_le(&mut out, &self.sections.bigs);
        extend_le(&mut out, &self.sections.row_chunks);
        extend_le(&mut out, &self.sections.cell_chunks);
        out.extend_from_slice(&self.sections.tags);
        out.extend_from_slice(&self.sections.names);
        out.extend_from_slice(&self.sections.text);
        out.extend_from_slice(&self.sections.blobs);
        debug_assert_eq!(out.len(), len);
        EncodedRows { bytes: out, rows: self.rows }
    }
}

impl Drop for RowEncoder {
    /// Hands the section buffers back to this thread for its next result (also when a
    /// result ends in an error).
    fn drop(&mut self) {
        std::mem::take(&mut self.sections).give_back();
    }
}

/// The most section capacity one thread keeps between results. Large results would
/// otherwise take fresh memory from the system for every result and fault each page in
/// again (docs/experiments/027-encoder-buffer-reuse.md); this bounds what a thread holds
/// on to (readers, the writer, the JS thread for inline reads).
pub const RETAINED_SECTION_BYTES: usize = 4 * 1024 * 1024;

/// A RowEncoder's growable sections, kept per thread between results.
#[derive(Default)]
struct Sections {
    /// The column names, each followed by a NUL.
    names: Vec<u8>,
    tags: Vec<u8>,
    nums: Vec<f64>,
    bigs: Vec<i64>,
    text: Vec<u8>,
    /// Closed chunks entered at a row start: (first row, start byte, end byte).
    row_chunks: Vec<f64>,
    /// Closed chunks entered at a TAG_TEXT_CHUNK cell: (start byte, end byte).
    cell_chunks: Vec<f64>,
    blobs: Vec<u8>,
}

thread_local! {
    static SPARE_SECTIONS: std::cell::Cell<Option<Sections>> = const { std::cell::Cell::new(None) };
}

impl Sections {
    /// This thread's spare sections (empty), or new ones: a second encoder open on the same
    /// thread at once gets new ones.
    fn take() -> Sections {
        SPARE_SECTIONS.try_with(|s| s.take()).ok().flatten().unwrap_or_default()
    }

    fn capacity_bytes(&self) -> usize {
        self.names.capacity()
            + self.tags.capacity()
            + 8 * (self.nums.capacity() + self.bigs.capacity())
            + 8 * (self.row_chunks.capacity() + self.cell_chunks.capacity())
            + self.text.capacity()
            + self.blobs.capacity()
    }

    /// Emptied and kept for this thread's next result, unless larger than the bound.
    fn give_back(mut self) {
        if self.capacity_bytes() > RETAINED_SECTION_BYTES {
            return;
        }
        self.names.clear();
        self.tags.clear();
        self.nums.clear();
        self.bigs.clear();
        self.text.clear();
        self.row_chunks.clear();
        self.cell_chunks.clear();
        self.blobs.clear();
        // During thread exit the slot may be gone: the buffers are then just freed.
        let _ = SPARE_SECTIONS.try_with(|s| s.set(Some(self)));
    }
}

/// The high bit of each byte of a word.
pub(crate) const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// `bytes.is_ascii()`, eight bytes at a time to the end. The standard library's check reads
/// the tail past its last 64-byte block one byte at a time, which for the texts of a typical
/// row (tens of bytes) was about 7% of a reader's time (experiment 082).
#[inline]
fn is_ascii(bytes: &[u8]) -> bool {
    let (words, rest) = bytes.as_chunks::<8>();
    let mut seen = words.iter().fold(0u64, |seen, w| seen | u64::from_ne_bytes(*w));
    match bytes.last_chunk::<8>() {
        // The last eight bytes, overlapping what the fold read: they cover `rest`.
        Some(last) if !rest.is_empty() => seen |= u64::from_ne_bytes(*last),
        Some(_) => {}
        None => seen |= rest.iter().fold(0u64, |seen, &b| seen | u64::from(b)),
    }
    seen & HIGH_BITS == 0
}

/// Eight-byte numbers whose little-endian bytes are what the result layout holds.
///
/// # Safety
///
/// Implementors are 8 bytes with no padding and every byte initialized, so that a slice of
/// them may be read as bytes (`extend_le`).
unsafe trait LittleEndianWord: Copy {
    // Called by the portable path of `extend_le`.
    #[cfg_attr(target_endian = "little", allow(dead_code))]
    fn le_bytes(self) -> [u8; 8];
}

// SAFETY: an f64 is 8 bytes, all of them its value.
unsafe impl LittleEndianWord for f64 {
    fn le_bytes(self) -> [u8; 8] {
        self.to_le_bytes()
    }
}

// SAFETY: an i64 is 8 bytes, all of them its value.
unsafe impl LittleEndianWord for i64 {
    fn le_bytes(self) -> [u8; 8] {
        self.to_le_bytes()
    }
}

/// Appends `values` as little-endian bytes: one copy on a little-endian target, where a loop
/// of `extend_from_slice` kept the length in memory and ran at a few bytes per cycle
/// (experiment 082).
fn extend_le<T: LittleEndianWord>(out: &mut Vec<u8>, values: &[T]) {
    #[cfg(target_endian = "little")]
    {
        // SAFETY: `LittleEndianWord` promises 8 bytes per value, no padding, all initialized,
        // so the slice's memory is `size_of_val(values)` readable bytes for as long as
        // `values` is borrowed; u8 needs no alignment. On a little-endian target these bytes
        // are each value's `le_bytes`.
        let bytes = unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) };
        out.extend_from_slice(bytes);
    }
    #[cfg(not(target_endian = "little"))]
    for &v in values {
        out.extend_from_slice(&v.le_bytes());
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

    fn f64_at(bytes: &[u8], at: usize) -> f64 {
        f64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn is_ascii_passes_ascii_bytes_and_fails_a_high_byte_anywhere() {
        for len in 0..80 {
            // Across the lengths, every byte value from 0 to 0x7f: a check that tested a
            // bit other than the high one would fail on some of them.
            let plain: Vec<u8> = (0..len).map(|i| ((i * 37 + len) % 128) as u8).collect();
            assert!(is_ascii(&plain), "{len}");
            for at in 0..len {
                for high in [0x80u8, 0xc3, 0xff] {
                    let mut v = plain.clone();
                    v[at] = high;
                    assert!(!is_ascii(&v), "{len} {at} {high:#x}");
                }
            }
        }
    }

    #[test]
    fn extend_le_writes_each_value_little_endian_after_what_is_there() {
        let nums = [0.0, -1.5, f64::MAX, f64::NAN, 1e-310];
        let bigs = [0, -1, i64::MIN, i64::MAX, 1 << 53];
        let mut out = vec![7u8];
        extend_le(&mut out, &nums);
        extend_le(&mut out, &bigs);
        extend_le::<f64>(&mut out, &[]);
        let mut expected = vec![7u8];
        nums.iter().for_each(|n| expected.extend_from_slice(&n.to_le_bytes()));
        bigs.iter().for_each(|b| expected.extend_from_slice(&b.to_le_bytes()));
        assert_eq!(out, expected);
    }

    #[test]
    fn encodes_every_kind_of_value() {
        let mut e = RowEncoder::new(["a", "b"].into_iter());
        e.push_value(ValueRef::Integer(7));
        e.push_value(ValueRef::Text(b"h\xc3\xa9"));
        e.end_row();
        e.push_value(ValueRef::Integer(i64::MAX));
        e.push_value(ValueRef::Blob(&[1, 2, 3]));
        e.end_row();
        let r = e.finish();
        let b = &r.bytes;
        assert_eq!(header(b, 1), 2);
        assert_eq!(header(b, 2), 2);
        assert_eq!(header(b, 3) & FLAG_ASCII_TEXT, 0);
        assert_eq!((header(b, 5), header(b, 6)), (1, 0)); // one chunk, entered at a row
        assert_eq!(header(b, 7), 1);
        assert_eq!((header(b, 8), header(b, 9)), (names_hash(b"a\0b\0"), 0));
        const H: usize = HEADER_BYTES;
        let num = |i: usize| f64_at(b, H + i * 8);
        assert_eq!(num(0), 7.0);
        assert_eq!(num(1), 2.0); // 2 UTF-16 units
        assert_eq!(num(3), 3.0);
        let big = i64::from_le_bytes(b[H + 32..H + 40].try_into().unwrap());
        assert_eq!(big, i64::MAX);
        assert_eq!([f64_at(b, H + 40), f64_at(b, H + 48), f64_at(b, H + 56)], [0.0, 0.0, 3.0]); // row 0, bytes 0..3
        assert_eq!(&b[H + 64..H + 68], &[TAG_INT, TAG_TEXT, TAG_BIGINT, TAG_BLOB]);
        assert_eq!(&b[H + 68..H + 72], b"a\0b\0");
        assert_eq!(&b[H + 72..H + 75], "hé".as_bytes());
        assert_eq!(&b[H + 75..], &[1, 2, 3]);
    }

    #[test]
    fn replaces_invalid_utf8_and_counts_astral_characters() {
        let mut e = RowEncoder::new(["t"].into_iter());
        e.push_value(ValueRef::Text(b"\xff"));
        e.push_value(ValueRef::Text("😀".as_bytes()));
        let r = e.finish();
        // U+FFFD is one unit, the emoji two.
        let num = |i: usize| f64_at(&r.bytes, HEADER_BYTES + i * 8);
        assert_eq!(num(0), 1.0);
        assert_eq!(num(1), 3.0);
    }

    /// test/11-values.test.mjs decodes these two one-column lists one after the other to
    /// show that a hash match is not taken for the same list.
    #[test]
    fn the_names_the_collision_test_uses_hash_alike() {
        assert_eq!(names_hash(b"yaczf\0"), names_hash(b"glbpp\0"));
        let (a, b) = (RowEncoder::new(["yaczf"].into_iter()), RowEncoder::new(["glbpp"].into_iter()));
        assert_eq!(header(&a.finish().bytes, 8), header(&b.finish().bytes, 8));
    }

    /// The chunk tables and the (tag, offset) of every cell, as the JS side reads them.
    struct Chunks {
        rows: Vec<[usize; 3]>,
        cells: Vec<[usize; 2]>,
        tags: Vec<(u8, f64)>,
    }

    fn chunks_of(r: &EncodedRows) -> Chunks {
        let b = &r.bytes;
        let cells = header(b, 1) as usize * header(b, 2) as usize;
        let (rc, cc) = (header(b, 5) as usize, header(b, 6) as usize);
        let at = HEADER_BYTES + cells * 8 + header(b, 7) as usize * 8;
        let v = |i: usize| f64_at(b, at + i * 8) as usize;
        let rows = (0..rc).map(|k| [v(3 * k), v(3 * k + 1), v(3 * k + 2)]).collect();
        let cells_t = (0..cc).map(|k| [v(3 * rc + 2 * k), v(3 * rc + 2 * k + 1)]).collect();
        let tags_at = at + (3 * rc + 2 * cc) * 8;
        let tags = (0..cells).map(|i| (b[tags_at + i], f64_at(b, HEADER_BYTES + i * 8))).collect();
        Chunks { rows, cells: cells_t, tags }
    }

    #[test]
    fn chunks_end_between_rows_once_full() {
        let mut e = RowEncoder::new(["a", "b"].into_iter());
        let value = vec![b'a'; 1000];
        // 33 rows of 2 x 1000 bytes: the row that reaches 65,536 bytes (the 33rd) ends the chunk.
        for _ in 0..40 {
            e.push_value(ValueRef::Text(&value));
            e.push_value(ValueRef::Text(&value));
            e.end_row();
        }
        let r = e.finish();
        let c = chunks_of(&r);
        assert_eq!(c.rows, vec![[0, 0, 66_000], [33, 66_000, 80_000]]);
        assert!(c.cells.is_empty());
        assert!(c.tags.iter().all(|&(t, _)| t == TAG_TEXT));
        assert_eq!(c.tags[65], (TAG_TEXT, 66_000.0));
        assert_eq!(c.tags[66], (TAG_TEXT, 1000.0)); // offsets restart in each chunk
    }

    #[test]
    fn a_row_that_outgrows_the_bound_is_cut_inside() {
        let mut e = RowEncoder::new(["a", "b", "c", "d"].into_iter());
        let quarter = vec![b'q'; TEXT_CHUNK_BYTES];
        let big = vec![b'b'; TEXT_CHUNK_MAX_BYTES + 1];
        // Row 0: four quarters fit exactly; row 1: a small value, then one larger than the
        // bound (a chunk of its own, cut before it and after it), then two small ones.
        for _ in 0..4 {
            e.push_value(ValueRef::Text(&quarter));
        }
        e.end_row();
        e.push_value(ValueRef::Text(b"x"));
        e.push_value(ValueRef::Text(&big));
        e.push_value(ValueRef::Text(b""));
        e.push_value(ValueRef::Text(b"yz"));
        e.end_row();
        let r = e.finish();
        let c = chunks_of(&r);
        let (m, b1) = (TEXT_CHUNK_MAX_BYTES, big.len());
        assert_eq!(c.rows, vec![[0, 0, m], [1, m, m + 1]]);
        assert_eq!(c.cells, vec![[m + 1, m + 1 + b1], [m + 1 + b1, m + 3 + b1]]);
        let tags: Vec<u8> = c.tags.iter().map(|t| t.0).collect();
        assert_eq!(tags, [TAG_TEXT, TAG_TEXT, TAG_TEXT, TAG_TEXT, TAG_TEXT, TAG_TEXT_CHUNK, TAG_TEXT_CHUNK, TAG_TEXT]);
        assert_eq!(c.tags[5].1, b1 as f64);
        assert_eq!((c.tags[6].1, c.tags[7].1), (0.0, 2.0));
    }

    #[test]
    fn chunks_cover_the_text_and_stay_within_the_bound() {
        // Mixed lengths and non-ASCII text (offsets in UTF-16 units, bounds in bytes); the
        // chunks, in the order the decoder enters them, tile the text section.
        let mut e = RowEncoder::new(["a", "b", "c"].into_iter());
        let mut values = Vec::new();
        for i in 0..3000usize {
            let len = (i * 7919) % (if i % 100 == 0 { 300_000 } else { 40_000 });
            values.push(if i % 3 == 0 { "é".repeat(len / 2) } else { "x".repeat(len) });
        }
        for (i, v) in values.iter().enumerate() {
            e.push_value(ValueRef::Text(v.as_bytes()));
            if i % 3 == 2 {
                e.end_row();
            }
        }
        let r = e.finish();
        let c = chunks_of(&r);
        let (mut next_row, mut next_cell, mut at, mut units) = (0, 0, 0, 0.0);
        let mut values_in_chunk = 0;
        let mut chunk = [0usize; 2];
        for (i, v) in values.iter().enumerate() {
            let starts_row = next_row < c.rows.len() && c.rows[next_row][0] == i / 3 && i % 3 == 0;
            let cut = c.tags[i].0 == TAG_TEXT_CHUNK;
            if starts_row || cut {
                assert!(chunk[1] - chunk[0] <= TEXT_CHUNK_MAX_BYTES || values_in_chunk == 1);
                chunk = if cut {
                    next_cell += 1;
                    c.cells[next_cell - 1]
                } else {
                    next_row += 1;
                    [c.rows[next_row - 1][1], c.rows[next_row - 1][2]]
                };
                assert_eq!(chunk[0], at);
                units = 0.0;
                values_in_chunk = 0;
            }
            values_in_chunk += 1;
            units += utf16_len(v) as f64;
            at += v.len();
            assert!(at <= chunk[1]);
            assert_eq!(c.tags[i].1, units, "value {i}");
        }
        assert_eq!((next_row, next_cell), (c.rows.len(), c.cells.len()));
        assert!(c.cells.len() > 0);
        assert_eq!(at, chunk[1]);
    }

    #[test]
    fn a_result_without_text_has_no_chunks() {
        let mut e = RowEncoder::new(["n"].into_iter());
        e.push_value(ValueRef::Integer(1));
        e.end_row();
        let r = e.finish();
        assert_eq!((header(&r.bytes, 5), header(&r.bytes, 6)), (0, 0));
        assert_eq!(r.bytes.len(), HEADER_BYTES + 8 + 1 + 2);
    }

    fn spare_text_capacity() -> Option<usize> {
        SPARE_SECTIONS.with(|s| {
            let spare = s.take();
            let cap = spare.as_ref().map(|x| x.text.capacity());
            s.set(spare);
            cap
        })
    }

    #[test]
    fn a_thread_reuses_its_sections_within_the_bound() {
        std::thread::spawn(|| {
            assert_eq!(spare_text_capacity(), None);
            let mut e = RowEncoder::new(["t"].into_iter());
            e.push_value(ValueRef::Text(&[b'a'; 1000]));
            e.end_row();
            let first = e.finish();
            // Kept, empty, for the next result, which starts from that capacity.
            let kept = spare_text_capacity().expect("sections kept");
            assert!(kept >= 1000);
            let mut e = RowEncoder::new(["t"].into_iter());
            assert_eq!(spare_text_capacity(), None, "taken by the open encoder");
            assert!(e.sections.text.is_empty() && e.sections.text.capacity() == kept);
            e.push_value(ValueRef::Text(b"b"));
            e.end_row();
            let second = e.finish();
            assert_ne!(first.bytes, second.bytes);
            // An encoder dropped on an error path gives its sections back too.
            drop(RowEncoder::new(["t"].into_iter()));
            assert!(spare_text_capacity().is_some());
            // Past the bound, nothing is kept.
            let mut e = RowEncoder::new(["t"].into_iter());
            let big = vec![b'c'; RETAINED_SECTION_BYTES + 1];
            e.push_value(ValueRef::Text(&big));
            e.end_row();
            drop(e.finish());
            assert_eq!(spare_text_capacity(), None);
        })
        .join()
        .unwrap();
    }

    /// 40 rows that use every section: NULL, INT, BIGINT, REAL, BLOB, and text that closes
    /// row chunks and, every tenth row, is cut into a chunk of its own (TAG_TEXT_CHUNK).
    fn every_section() -> EncodedRows {
        every_section_encoder().finish()
    }

    fn every_section_encoder() -> RowEncoder {
        let long = vec![b'z'; TEXT_CHUNK_MAX_BYTES - 10];
        let mut e = RowEncoder::new(["n", "i", "big", "r", "b", "t"].into_iter());
        for k in 0..40i64 {
            e.push_value(ValueRef::Null);
            e.push_value(ValueRef::Integer(k));
            e.push_value(ValueRef::Integer(i64::MAX - k));
            e.push_value(ValueRef::Real(k as f64 / 3.0));
            e.push_value(ValueRef::Blob(&[k as u8, 1, 2]));
            e.push_value(ValueRef::Text(if k % 10 == 9 { &long } else { "h\u{e9}llo".as_bytes() }));
            e.end_row();
        }
        e
    }

    #[test]
    fn reused_sections_encode_exactly_what_fresh_ones_do() {
        std::thread::spawn(|| {
            let fresh = every_section();
            let h = |i: usize| header(&fresh.bytes, i);
            assert!(h(5) > 0 && h(6) > 0 && h(7) > 0, "row chunks, cell chunks and bigints all used");
            assert!(spare_text_capacity().is_some_and(|c| c > 0), "its sections were kept");
            assert_eq!(every_section().bytes, fresh.bytes, "with the kept sections");
            // And with new ones, while another encoder holds the kept set.
            let holder = RowEncoder::new(["x"].into_iter());
            assert_eq!(every_section().bytes, fresh.bytes, "beside an open encoder");
            drop(holder);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn names_in_kept_sections_are_only_this_results() {
        let one = |names: &[&str]| {
            let mut e = RowEncoder::new(names.iter().copied());
            for _ in names {
                e.push_value(ValueRef::Integer(1));
            }
            e.end_row();
            e.finish().bytes
        };
        let fresh = std::thread::spawn(move || one(&["x"])).join().unwrap();
        std::thread::spawn(move || {
            drop(one(&["a_longer_column_name", "b"]));
            assert!(spare_text_capacity().is_some(), "sections kept, names and all");
            assert_eq!(one(&["x"]), fresh);
            assert_eq!(header(&fresh, 4), 2, "x and its NUL");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_result_written_into_a_kept_buffer_is_exactly_what_a_new_one_holds() {
        use crate::buffer_pool::tests::{filled, pool};
        let fresh = every_section();
        let len = fresh.bytes.len();
        assert!(len >= crate::buffer_pool::MIN_POOLED_BYTES, "large enough to come from the pool");
        let p = pool(16 << 20, std::time::Duration::from_secs(600));
        // Kept buffers full of other bytes: one too small, one too large, one that fits.
        for cap in [len - 1, len * 2, len + 100] {
            p.give(filled(cap, 0x5a));
        }
        let fits = p.take(len + 100, len + 100).unwrap();
        let addr = fits.as_ptr();
        p.give(fits);
        let reused = every_section_encoder().finish_in(p);
        assert_eq!(reused.bytes.as_ptr(), addr, "written into the kept buffer that fits");
        assert_eq!(reused.bytes, fresh.bytes);
        assert_eq!(p.stats().0, 2, "the others stay");
    }
}
