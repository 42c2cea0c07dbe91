//! Native JSON for `selectBytes`: the whole result as a UTF-8 JSON array of objects, built
//! without creating a single JS object. Always valid JSON: non-finite reals become null,
//! BLOBs become base64 strings, invalid UTF-8 is replaced, control characters are escaped.

use crate::buffer_pool::{self, Pool};
use crate::encode::HIGH_BITS;
use crate::raw_statement::ColumnValues;
use base64::Engine as _;
use rusqlite::types::ValueRef;

/// Room checked for before each row; a larger row grows the output as any Vec does.
const ROW_HEADROOM: usize = 4096;
/// The largest result `finish` copies into new memory to give a much larger buffer back.
const COPY_OUT_AT_MOST: usize = 1024 * 1024;

pub struct JsonWriter {
    out: Vec<u8>,
    /// Where the output grows into and what a copied-out buffer goes back to.
    pool: &'static Pool,
    /// `{"name":` for the first column and `,"name":` for the others, escaped once.
    keys: Vec<Vec<u8>>,
    rows: u32,
}

impl JsonWriter {
    pub fn new(names: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        Self::new_in(names, &buffer_pool::RESULTS)
    }

    pub fn new_in(names: impl IntoIterator<Item = impl AsRef<str>>, pool: &'static Pool) -> Self {
        let keys = names
            .into_iter()
            .enumerate()
            .map(|(i, n)| {
                let n = n.as_ref();
                let mut k = Vec::with_capacity(n.len() + 4);
                k.push(if i == 0 { b'{' } else { b',' });
                write_string(&mut k, n.as_bytes());
                k.push(b':');
                k
            })
            .collect();
        let mut out = Vec::with_capacity(2 * ROW_HEADROOM);
        out.push(b'[');
        JsonWriter { out, pool, keys, rows: 0 }
    }

    pub fn push_row<R: ColumnValues + ?Sized>(&mut self, row: &R) -> crate::error::Result<()> {
        if self.out.capacity() - self.out.len() < ROW_HEADROOM {
            self.grow();
        }
        if self.rows > 0 {
            self.out.push(b',');
        }
        if self.keys.is_empty() {
            self.out.extend_from_slice(b"{}");
        }
        for i in 0..self.keys.len() {
            self.out.extend_from_slice(&self.keys[i]);
            write_value(&mut self.out, row.value(i)?);
        }
        if !self.keys.is_empty() {
            self.out.push(b'}');
        }
        self.rows += 1;
        Ok(())
    }

    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Doubles the output, or moves it into the largest kept buffer if that is at least as
    /// large: its pages are already resident. The final size is not known yet, and the
    /// largest one is the least likely to be outgrown (`finish` moves a result much smaller
    /// than its buffer out).
    #[cold]
    fn grow(&mut self) {
        let want = (self.out.capacity() * 2).max(2 * ROW_HEADROOM);
        if want >= buffer_pool::MIN_POOLED_BYTES {
            if let Some(mut b) = self.pool.take_largest(want) {
                b.extend_from_slice(&self.out);
                self.pool.give(std::mem::replace(&mut self.out, b));
                return;
            }
        }
        self.out.reserve(want - self.out.len());
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(b']');
        let (len, cap) = (self.out.len(), self.out.capacity());
        if cap < buffer_pool::MIN_POOLED_BYTES {
            return self.out;
        }
        // A result less than half its buffer's size (a large kept buffer, or one doubled just
        // before the end) moves to a buffer of about its size: a kept one that fits, or, for
        // a small result, a new one. The large buffer goes back to the pool.
        if cap / 2 > len {
            let moved = match self.pool.take(len, len + len / 4) {
                Some(mut fits) => {
                    fits.extend_from_slice(&self.out);
                    Some(fits)
                }
                None if len < COPY_OUT_AT_MOST => Some(self.out.as_slice().to_vec()),
                // New memory for a large result costs the page faults the pool saves: cut
                // the buffer instead (below).
                None => None,
            };
            if let Some(moved) = moved {
                self.pool.give(std::mem::replace(&mut self.out, moved));
                return self.out;
            }
        }
        // Otherwise the unused end goes (glibc cuts the block in place, without a copy), so
        // that the pool holds more buffers within its bound, each about a result's size.
        if cap - len > len / 8 {
            self.out.shrink_to(len + len / 16);
        }
        self.out
    }
}

// Marked for inlining into the row loop, as `value` is (experiment 049).
#[inline]
pub fn write_value(out: &mut Vec<u8>, v: ValueRef<'_>) {
    match v {
        ValueRef::Null => out.extend_from_slice(b"null"),
        ValueRef::Integer(i) => out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes()),
        ValueRef::Real(f) => write_real(out, f),
        ValueRef::Text(t) => write_text(out, t),
        ValueRef::Blob(b) => {
            out.push(b'"');
            let start = out.len();
            let enc_len = b.len().div_ceil(3) * 4;
            out.resize(start + enc_len, 0);
            let n = base64::engine::general_purpose::STANDARD
                .encode_slice(b, &mut out[start..])
                .expect("base64 output sized exactly");
            out.truncate(start + n);
            out.push(b'"');
        }
    }
}

fn write_real(out: &mut Vec<u8>, f: f64) {
    if !f.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    // Integral reals print without an exponent or fraction, e.g. 3 not 3.0, below 1e16: ryu
    // would print 1e15 as 1000000000000000.0, and from 1e16 on its exponent form is shorter.
    if f == f.trunc() && f.abs() < 1e16 {
        // -0.0 prints as 0, as JSON.stringify(-0) does.
        out.extend_from_slice(itoa::Buffer::new().format(f as i64).as_bytes());
        return;
    }
    if let Some(h) = hundredths(f) {
        write_hundredths(out, h);
        return;
    }
    out.extend_from_slice(ryu::Buffer::new().format_finite(f).as_bytes());
}

/// `f` as a whole number of hundredths, when `f` is the double nearest to that decimal and
/// below 2^31 in size. Then no other decimal of at most two places is nearest to `f` (a
/// double there is finer than 1e-6), so that decimal, its trailing zero dropped, is the
/// shortest text that reads back as `f`: what ryu and `JSON.stringify` print, found without
/// ryu's general search. Prices and other values kept to cents are most reals in practice.
fn hundredths(f: f64) -> Option<i64> {
    if !(f.abs() < 2_147_483_648.0) {
        return None;
    }
    let h = (f * 100.0).round();
    // Division is correctly rounded: equality means `f` is the double nearest to h / 100.
    (h / 100.0 == f).then_some(h as i64)
}

/// Writes `h` hundredths as a decimal; `h` is not a multiple of 100 (integral reals are
/// written as integers before this).
fn write_hundredths(out: &mut Vec<u8>, h: i64) {
    if h < 0 {
        out.push(b'-');
    }
    let h = h.unsigned_abs();
    out.extend_from_slice(itoa::Buffer::new().format(h / 100).as_bytes());
    let (tenths, rest) = ((h % 100) / 10, h % 10);
    out.push(b'.');
    out.push(b'0' + tenths as u8);
    if rest != 0 {
        out.push(b'0' + rest as u8);
    }
}

/// True when any byte of the 8 needs escaping: < 0x20, '"' or '\\'.
#[inline]
fn needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH_BITS;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH_BITS;
    let quote = has_zero(word ^ (ONES * b'"' as u64));
    let backslash = has_zero(word ^ (ONES * b'\\' as u64));
    (below_space | quote | backslash) != 0
}

/// The bytes of `s` from `i` (1 to 7 of them) as one little-endian word, the rest of it
/// spaces. Made with shifts: copying the bytes into a padded array and loading that as a
/// word stalled the load (store forwarding) at the end of every value (experiment 049).
#[inline]
fn tail_word(s: &[u8], i: usize) -> u64 {
    let rest = s.len() - i;
    debug_assert!((1..8).contains(&rest));
    let spaces = u64::from_le_bytes([b' '; 8]) << (8 * rest);
    match s.len().checked_sub(8) {
        // The last 8 bytes, which overlap bytes already checked, shifted down to the rest.
        Some(last_at) => {
            let last = u64::from_le_bytes(s[last_at..].try_into().unwrap());
            (last >> (8 * (8 - rest))) | spaces
        }
        None => s[i..].iter().enumerate().fold(spaces, |w, (k, &b)| w | (u64::from(b) << (8 * k))),
    }
}

/// Writes TEXT as a JSON string. ASCII text, the common case, takes one pass; other text
/// is validated after it is written, and rewritten with U+FFFD when it is not UTF-8.
fn write_text(out: &mut Vec<u8>, t: &[u8]) {
    let start = out.len();
    if write_string(out, t) || std::str::from_utf8(t).is_ok() {
        return;
    }
    out.truncate(start);
    write_string(out, String::from_utf8_lossy(t).as_bytes());
}

/// Writes a JSON string literal of `s`, escaping what JSON requires and copying every byte
/// from 0x80 up as it is (`s` must be valid UTF-8 for the output to be). Returns whether `s`
/// is all ASCII.
fn write_string(out: &mut Vec<u8>, s: &[u8]) -> bool {
    out.reserve(s.len() + 2);
    out.push(b'"');
    // Every byte checked, ORed together: a high bit anywhere means non-ASCII text.
    let mut seen = 0u64;
    let mut i = 0;
    let mut clean_from = 0;
    while i < s.len() {
        // Check 8 bytes at a time: the common case is long runs with nothing to escape. The
        // last few bytes are checked as one word padded with spaces (never escaped), so short
        // values and ends of values do not go byte by byte.
        let word = match s.get(i..i + 8) {
            Some(w) => u64::from_le_bytes(w.try_into().unwrap()),
            None => tail_word(s, i),
        };
        if !needs_escape(word) {
            seen |= word;
            i += 8;
            continue;
        }
        let c = s[i];
        seen |= u64::from(c);
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            c if c < 0x20 => b"",
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&s[clean_from..i]);
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(c >> 4) as usize]);
            out.push(HEX[(c & 15) as usize]);
        } else {
            out.extend_from_slice(esc);
        }
        i += 1;
        clean_from = i;
    }
    out.extend_from_slice(&s[clean_from..]);
    out.push(b'"');
    seen & HIGH_BITS == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: ValueRef<'_>) -> String {
        let mut out = Vec::new();
        write_value(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn writes_values_as_valid_json() {
        assert_eq!(s(ValueRef::Null), "null");
        assert_eq!(s(ValueRef::Integer(i64::MIN)), "-9223372036854775808");
        assert_eq!(s(ValueRef::Real(f64::NAN)), "null");
        assert_eq!(s(ValueRef::Real(f64::INFINITY)), "null");
        assert_eq!(s(ValueRef::Real(1.5)), "1.5");
        assert_eq!(s(ValueRef::Real(3.0)), "3");
        assert_eq!(s(ValueRef::Blob(&[0xde, 0xad, 0xbe, 0xef])), "\"3q2+7w==\"");
        assert_eq!(s(ValueRef::Text(b"\xff")), "\"\u{fffd}\"");
    }

    #[test]
    fn escapes_in_and_out_of_the_fast_path() {
        let long = "abcdefgh\"ijklmnop\\qrstuvwx\u{1}yz\n";
        assert_eq!(
            s(ValueRef::Text(long.as_bytes())),
            "\"abcdefgh\\\"ijklmnop\\\\qrstuvwx\\u0001yz\\n\""
        );
        for c in 0u8..0x20 {
            let text = [b'a'; 9].iter().copied().chain([c]).collect::<Vec<u8>>();
            let out = s(ValueRef::Text(&text));
            assert!(!out.bytes().any(|b| b < 0x20), "raw control byte {c} leaked");
        }
    }

    struct Row(Vec<rusqlite::types::Value>);

    impl ColumnValues for Row {
        fn value(&self, col: usize) -> crate::error::Result<ValueRef<'_>> {
            Ok(ValueRef::from(&self.0[col]))
        }
    }

    /// `rows` rows of two columns written by `w`, and the JSON they must make.
    fn write_rows(w: &mut JsonWriter, rows: i64) -> String {
        use rusqlite::types::Value as V;
        let mut expected = String::from("[");
        for i in 0..rows {
            let t = format!("row {i} {}", "x".repeat((i % 50) as usize));
            w.push_row(&Row(vec![V::Integer(i), V::Text(t.clone())])).unwrap();
            if i > 0 {
                expected.push(',');
            }
            expected.push_str(&format!("{{\"id\":{i},\"t\":\"{t}\"}}"));
        }
        expected.push(']');
        expected
    }

    #[test]
    fn output_grown_into_kept_buffers_is_exactly_what_was_written() {
        use crate::buffer_pool::tests::{filled, pool};
        let p = pool(16 << 20, std::time::Duration::from_secs(600));
        // Kept buffers full of other bytes; the output (~1.1 MB) outgrows the larger one.
        p.give(filled(200 * 1024, b'#'));
        p.give(filled(1 << 20, b'#'));
        let mut w = JsonWriter::new_in(["id", "t"].into_iter(), p);
        let expected = write_rows(&mut w, 20_000);
        let out = w.finish();
        assert!(out.len() > 1 << 20);
        // Doubled to 2 MiB past the kept buffer, then cut to about its length.
        assert!(out.capacity() <= out.len() + out.len() / 8, "{} for {} bytes", out.capacity(), out.len());
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        let (kept, _, _, reused) = p.stats();
        assert_eq!(reused, 1, "the output moved into the largest kept buffer");
        assert_eq!(kept, 1, "the 200 KiB one is still kept");
    }

    #[test]
    fn a_result_much_smaller_than_its_kept_buffer_is_copied_out_and_the_buffer_kept() {
        use crate::buffer_pool::tests::{filled, pool};
        let p = pool(16 << 20, std::time::Duration::from_secs(600));
        p.give(filled(1 << 20, b'#'));
        let mut w = JsonWriter::new_in(["id", "t"].into_iter(), p);
        let expected = write_rows(&mut w, 1_000); // ~40 KB: past 28 KiB, it takes the buffer
        let out = w.finish();
        assert_eq!(String::from_utf8(out.clone()).unwrap(), expected);
        assert_eq!(p.stats().3, 1, "it was written into the kept buffer");
        assert!(out.capacity() < 2 * out.len(), "holds {} for {} bytes", out.capacity(), out.len());
        assert_eq!((p.stats().0, p.stats().1), (1, 1 << 20), "the buffer is back");
    }

    #[test]
    fn a_result_much_smaller_than_its_buffer_moves_into_a_kept_one_that_fits() {
        use crate::buffer_pool::tests::{filled, pool};
        let len = {
            let mut w = JsonWriter::new_in(["id", "t"].into_iter(), pool(0, std::time::Duration::ZERO));
            write_rows(&mut w, 3_000);
            w.finish().len()
        };
        assert!(len > crate::buffer_pool::MIN_POOLED_BYTES);
        let p = pool(16 << 20, std::time::Duration::from_secs(600));
        p.give(filled(4 << 20, b'#'));
        p.give(filled(len + 10, b'#'));
        let fits = p.take(len + 10, len + 10).unwrap();
        let addr = fits.as_ptr();
        p.give(fits);
        let mut w = JsonWriter::new_in(["id", "t"].into_iter(), p);
        let expected = write_rows(&mut w, 3_000);
        let out = w.finish();
        assert_eq!(out.as_ptr(), addr, "moved into the kept buffer of its size");
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        assert_eq!((p.stats().0, p.stats().1), (1, 4 << 20), "the large buffer is back");
    }

    #[test]
    fn a_large_result_in_a_much_larger_buffer_is_cut_not_copied() {
        use crate::buffer_pool::tests::{filled, pool};
        let p = pool(64 << 20, std::time::Duration::from_secs(600));
        p.give(filled(16 << 20, b'#'));
        let mut w = JsonWriter::new_in(["id", "t"].into_iter(), p);
        let expected = write_rows(&mut w, 30_000); // ~1.7 MB: more than is copied out
        let out = w.finish();
        assert!(out.len() > COPY_OUT_AT_MOST);
        assert_eq!(p.stats().0, 0, "the buffer stayed with the result");
        assert!(out.capacity() <= out.len() + out.len() / 8, "{} for {} bytes", out.capacity(), out.len());
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    /// What `write_value` must produce for TEXT, written the slow way: invalid UTF-8
    /// replaced, then each character escaped on its own.
    fn reference(t: &[u8]) -> String {
        let mut o = String::from("\"");
        for ch in String::from_utf8_lossy(t).chars() {
            match ch {
                '"' => o.push_str("\\\""),
                '\\' => o.push_str("\\\\"),
                '\n' => o.push_str("\\n"),
                '\r' => o.push_str("\\r"),
                '\t' => o.push_str("\\t"),
                '\u{8}' => o.push_str("\\b"),
                '\u{c}' => o.push_str("\\f"),
                c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
                c => o.push(c),
            }
        }
        o.push('"');
        o
    }

    #[test]
    fn text_of_every_length_matches_the_reference_wherever_the_odd_byte_sits() {
        // Each odd piece at each position of 0 to 24 ASCII bytes, so that it falls in a full
        // word, in the padded last word, and across the two. The last pieces put a byte from
        // 0x80 up in the same word as an escape, where only the byte-by-byte path sees it.
        let pieces: [&[u8]; 14] = [
            b"\"", b"\\", b"\n", b"\x01", b"\x1f", b"\x7f",
            "é".as_bytes(), "😀".as_bytes(), b"\xff", b"\xe2\x82",
            b"\xff\"", b"a\xff\n", "é\\".as_bytes(), b"\x01\xc3",
        ];
        for piece in pieces {
            for len in 0..=24 {
                for at in 0..=len {
                    let mut t = vec![b'a'; len];
                    t.splice(at..at, piece.iter().copied());
                    assert_eq!(s(ValueRef::Text(&t)), reference(&t), "{t:?}");
                }
            }
        }
        for t in [&b""[..], b"a", b"abcdefg", b"abcdefgh", b"abcdefghi", "é ✓".as_bytes()] {
            assert_eq!(s(ValueRef::Text(t)), reference(t), "{t:?}");
        }
    }

    #[test]
    fn write_string_says_whether_it_saw_only_ascii() {
        let cases: [(&[u8], bool); 11] = [
            (b"", true),
            (b"plain text, longer than a word", true),
            (b"a\"b\n", true),
            ("caf\u{e9}".as_bytes(), false),
            ("\u{e9} then a long ascii tail".as_bytes(), false),
            (b"\x80", false),
            (b"\xff\"", false),
            (b"abcdefgh\xff\\", false),
            ("\u{e9}\"".as_bytes(), false),
            // Non-ASCII only in the last word, with nothing to escape: seen in the tail word.
            ("abcdefgh\u{e9}".as_bytes(), false),
            ("abcdefghijklm\u{e9}".as_bytes(), false),
        ];
        for (t, ascii) in cases {
            assert_eq!(write_string(&mut Vec::new(), t), ascii, "{t:?}");
        }
    }

    /// The last word is the bytes left, then spaces, as a copy into a padded array gives
    /// it. A word that differs only by a byte that needs escaping would still give right
    /// output (that word goes byte by byte), so the output tests cannot see all mistakes.
    #[test]
    fn the_tail_word_is_the_bytes_left_padded_with_spaces() {
        let s: Vec<u8> = (1..=24u8).map(|b| b.wrapping_mul(37) | 0x40).collect();
        for len in 1..=s.len() {
            let s = &s[..len];
            for i in len.saturating_sub(7)..len {
                let mut padded = [b' '; 8];
                padded[..len - i].copy_from_slice(&s[i..]);
                assert_eq!(tail_word(s, i), u64::from_le_bytes(padded), "len {len}, from {i}");
            }
        }
    }

    /// Reals print as ryu prints them (integral ones as integers), whether or not they take
    /// the hundredths path.
    #[test]
    fn reals_print_as_ryu_prints_them() {
        let ryu_way = |f: f64| {
            if f == f.trunc() && f.abs() < 1e16 {
                itoa::Buffer::new().format(f as i64).to_string()
            } else {
                ryu::Buffer::new().format_finite(f).to_string()
            }
        };
        let check = |f: f64| {
            if f.is_finite() {
                assert_eq!(s(ValueRef::Real(f)), ryu_way(f), "{f:e} ({:#x})", f.to_bits());
            }
        };
        // The shortest text of the integral reals where ryu would add a fraction.
        assert_eq!(s(ValueRef::Real(1e15)), "1000000000000000");
        assert_eq!(s(ValueRef::Real(4503599627370496.0)), "4503599627370496");
        assert_eq!(s(ValueRef::Real(-9999999999999998.0)), "-9999999999999998");
        assert_eq!(s(ValueRef::Real(1e16)), "1e16");
        for h in -200_000i64..=200_000 {
            let f = h as f64 / 100.0;
            check(f);
            // The neighbouring doubles are not that decimal and must not print as it.
            check(f64::from_bits(f.to_bits() + 1));
            check(f64::from_bits(f.to_bits().wrapping_sub(1)));
        }
        let chosen = [
            0.1 + 0.2, 1.0 / 3.0, 2_147_483_647.99, -2_147_483_647.99, 2_147_483_648.5,
            21_474_836.47, 0.005, 1e-7, 123_456.785,
        ];
        for f in chosen {
            check(f);
        }
        // Scattered doubles of every size, from a fixed-seed generator.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            check(f64::from_bits(x));
            check((x % 1_000_000_000) as f64 / 100.0);
        }
    }

    #[test]
    fn no_false_positives_in_the_word_check() {
        assert!(!needs_escape(u64::from_le_bytes(*b"abcdefgh")));
        assert!(!needs_escape(u64::from_le_bytes(*b"\xc3\xa9\xf0\x9f\x98\x80 ~")));
        assert!(needs_escape(u64::from_le_bytes(*b"abc\"efgh")));
        assert!(needs_escape(u64::from_le_bytes(*b"abcdefg\x1f")));
    }
}
