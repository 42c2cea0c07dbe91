//! Native JSON for `selectBytes`: the whole result as a UTF-8 JSON array of objects, built
//! without creating a single JS object. Always valid JSON: non-finite reals become null,
//! BLOBs become base64 strings, invalid UTF-8 is replaced, control characters are escaped.

use crate::raw_statement::ColumnValues;
use base64::Engine as _;
use rusqlite::types::ValueRef;

pub struct JsonWriter {
    out: Vec<u8>,
    /// `{"name":` for the first column and `,"name":` for the others, escaped once.
    keys: Vec<Vec<u8>>,
    rows: u32,
}

impl JsonWriter {
    pub fn new<'a>(names: impl Iterator<Item = &'a str>) -> Self {
        let keys = names
            .enumerate()
            .map(|(i, n)| {
                let mut k = Vec::with_capacity(n.len() + 4);
                k.push(if i == 0 { b'{' } else { b',' });
                write_string(&mut k, n.as_bytes());
                k.push(b':');
                k
            })
            .collect();
        let mut out = Vec::with_capacity(4096);
        out.push(b'[');
        JsonWriter { out, keys, rows: 0 }
    }

    pub fn push_row<R: ColumnValues + ?Sized>(&mut self, row: &R) -> crate::error::Result<()> {
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

    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(b']');
        self.out
    }
}

pub fn write_value(out: &mut Vec<u8>, v: ValueRef<'_>) {
    match v {
        ValueRef::Null => out.extend_from_slice(b"null"),
        ValueRef::Integer(i) => out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes()),
        ValueRef::Real(f) => write_real(out, f),
        ValueRef::Text(t) => match std::str::from_utf8(t) {
            Ok(_) => write_string(out, t),
            Err(_) => write_string(out, String::from_utf8_lossy(t).as_bytes()),
        },
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
    // Integral reals print without an exponent or fraction where JS would, e.g. 3 not 3.0.
    if f == f.trunc() && f.abs() < 1e15 {
        // -0.0 prints as 0, as JSON.stringify(-0) does.
        out.extend_from_slice(itoa::Buffer::new().format(f as i64).as_bytes());
        return;
    }
    out.extend_from_slice(ryu::Buffer::new().format_finite(f).as_bytes());
}

/// True when any byte of the 8 needs escaping: < 0x20, '"' or '\\'.
#[inline]
fn needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    let quote = has_zero(word ^ (ONES * b'"' as u64));
    let backslash = has_zero(word ^ (ONES * b'\\' as u64));
    (below_space | quote | backslash) != 0
}

/// Writes a JSON string literal; `s` must be valid UTF-8.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let mut i = 0;
    let mut clean_from = 0;
    while i < s.len() {
        // Skip 8 clean bytes at a time: the common case is long runs with nothing to escape.
        if i + 8 <= s.len() {
            let word = u64::from_le_bytes(s[i..i + 8].try_into().unwrap());
            if !needs_escape(word) {
                i += 8;
                continue;
            }
        }
        let c = s[i];
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

    #[test]
    fn no_false_positives_in_the_word_check() {
        assert!(!needs_escape(u64::from_le_bytes(*b"abcdefgh")));
        assert!(!needs_escape(u64::from_le_bytes(*b"\xc3\xa9\xf0\x9f\x98\x80 ~")));
        assert!(needs_escape(u64::from_le_bytes(*b"abc\"efgh")));
        assert!(needs_escape(u64::from_le_bytes(*b"abcdefg\x1f")));
    }
}
