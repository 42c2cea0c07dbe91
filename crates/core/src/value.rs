//! Values crossing the API boundary: parameters going in.

/// The most parameters one statement can take (SQLITE_MAX_VARIABLE_NUMBER of the bundled
/// SQLite). Front ends refuse longer parameter lists before allocating anything for them.
pub const MAX_PARAMETERS: u32 = 32766;

/// The longest TEXT or BLOB value SQLite stores (SQLITE_MAX_LENGTH): front ends refuse a
/// longer value before copying it.
pub const MAX_VALUE_BYTES: usize = 1_000_000_000;

/// One SQLite value as bound to a statement parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// Statement parameters: positional (`?`, `?NNN`) or named (`:a`, `@a`, `$a`).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Params {
    #[default]
    None,
    Positional(Positional),
    /// Names as the caller wrote them, without the `:`/`@`/`$` prefix (a prefix is accepted too).
    Named(Vec<(String, Value)>),
}

/// The values of positional parameters. A single one (a lookup by key, the commonest case)
/// is kept inline: for a number or null the JS thread allocates nothing, and the reader
/// frees nothing.
#[derive(Debug, Clone)]
pub enum Positional {
    One(Value),
    Many(Vec<Value>),
}

impl std::ops::Deref for Positional {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        match self {
            Positional::One(v) => std::slice::from_ref(v),
            Positional::Many(vs) => vs,
        }
    }
}

/// The same values are equal however they are kept.
impl PartialEq for Positional {
    fn eq(&self, other: &Positional) -> bool {
        **self == **other
    }
}

impl From<Vec<Value>> for Positional {
    fn from(values: Vec<Value>) -> Positional {
        match <[Value; 1]>::try_from(values) {
            Ok([v]) => Positional::One(v),
            Err(values) => Positional::Many(values),
        }
    }
}

impl Value {
    /// The value as rusqlite binds it, borrowed.
    pub fn as_value_ref(&self) -> rusqlite::types::ValueRef<'_> {
        use rusqlite::types::ValueRef;
        match self {
            Value::Null => ValueRef::Null,
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }
    }
}

impl Params {
    /// Every value, for keeping them out of error messages (`Error::without_values`).
    pub fn values(&self) -> impl Iterator<Item = rusqlite::types::ValueRef<'_>> + '_ {
        let (positional, named): (&[Value], &[(String, Value)]) = match self {
            Params::None => (&[], &[]),
            Params::Positional(p) => (p, &[]),
            Params::Named(n) => (&[], n),
        };
        positional.iter().chain(named.iter().map(|(_, v)| v)).map(Value::as_value_ref)
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Params::None => true,
            Params::Positional(v) => v.is_empty(),
            Params::Named(v) => v.is_empty(),
        }
    }

    /// A structural key for sharing work between identical queries: equal parameters give
    /// equal bytes, and different parameters never do (type tags and lengths are included).
    pub fn append_key(&self, out: &mut Vec<u8>) {
        fn value(out: &mut Vec<u8>, v: &Value) {
            match v {
                Value::Null => out.push(0),
                Value::Integer(i) => {
                    out.push(1);
                    out.extend_from_slice(&i.to_le_bytes());
                }
                Value::Real(f) => {
                    out.push(2);
                    out.extend_from_slice(&f.to_bits().to_le_bytes());
                }
                Value::Text(s) => {
                    out.push(3);
                    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
                    out.extend_from_slice(s.as_bytes());
                }
                Value::Blob(b) => {
                    out.push(4);
                    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
                    out.extend_from_slice(b);
                }
            }
        }
        match self {
            Params::None => out.push(0),
            Params::Positional(vs) => {
                out.push(1);
                out.extend_from_slice(&(vs.len() as u64).to_le_bytes());
                vs.iter().for_each(|v| value(out, v));
            }
            Params::Named(vs) => {
                out.push(2);
                let mut sorted: Vec<_> = vs.iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(&b.0));
                out.extend_from_slice(&(sorted.len() as u64).to_le_bytes());
                for (k, v) in sorted {
                    out.extend_from_slice(&(k.len() as u64).to_le_bytes());
                    out.extend_from_slice(k.as_bytes());
                    value(out, v);
                }
            }
        }
    }
}

/// Positional parameter sets packed by the front end (see docs/experiments/005-batch-params.md):
/// numbers and tags in flat arrays and all text in one UTF-8 buffer, so a large batch
/// crosses into native code with a few copies instead of one conversion per value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PackedSets {
    /// Number of values of each set.
    pub set_lens: Vec<u32>,
    /// One `PACKED_*` tag per value.
    pub tags: Vec<u8>,
    /// Per value: the number (INTEGER as an exact f64, REAL), or for TEXT its length in UTF-16
    /// units, or for BLOB its length in bytes.
    pub nums: Vec<f64>,
    /// BIGINT values, in order.
    pub bigs: Vec<i64>,
    /// All TEXT values, back to back.
    pub text: Vec<u8>,
    /// All BLOB values, back to back: one copy for a batch's BLOBs, not one each.
    pub blobs: Vec<u8>,
}

pub const PACKED_NULL: u8 = 0;
pub const PACKED_INTEGER: u8 = 1;
pub const PACKED_REAL: u8 = 2;
pub const PACKED_TEXT: u8 = 3;
pub const PACKED_BLOB: u8 = 4;
pub const PACKED_BIGINT: u8 = 5;

impl PackedSets {
    /// Checks that the arrays agree with each other (one known tag and number per value,
    /// every BIGINT present, the BLOB lengths adding up to their bytes and the TEXT lengths
    /// within the text, no set over the parameter limit), so walking them cannot index out of
    /// bounds whatever a caller sent.
    pub fn check(&self) -> crate::Result<()> {
        let bad = |what: &str| Err(crate::Error::Type(format!("packed parameter sets are inconsistent: {what}")));
        if let Some(i) = self.set_lens.iter().position(|&n| n > MAX_PARAMETERS) {
            return Err(crate::Error::Range(format!(
                "paramSets[{i}] has more than {MAX_PARAMETERS} values, the most a statement takes"
            )));
        }
        let values: u64 = self.set_lens.iter().map(|&n| n as u64).sum();
        if values != self.tags.len() as u64 || values != self.nums.len() as u64 {
            return bad("value counts differ");
        }
        let bigints = self.tags.iter().filter(|&&t| t == PACKED_BIGINT).count();
        if bigints != self.bigs.len() {
            return bad("BigInt count differs");
        }
        // One pass over the tags, none over the text: this runs on the JS thread.
        let is_length = |n: f64| n >= 0.0 && n.fract() == 0.0 && n <= MAX_VALUE_BYTES as f64;
        let (mut blob_bytes, mut text_units) = (0u64, 0u64);
        for (&t, &n) in self.tags.iter().zip(&self.nums) {
            match t {
                PACKED_NULL | PACKED_INTEGER | PACKED_REAL | PACKED_BIGINT => {}
                PACKED_BLOB | PACKED_TEXT if !is_length(n) => return bad("a length is not a length"),
                PACKED_BLOB => blob_bytes += n as u64,
                PACKED_TEXT => text_units += n as u64,
                _ => return bad("an unknown value tag"),
            }
        }
        if blob_bytes != self.blobs.len() as u64 {
            return bad("the BLOB lengths do not add up to the BLOB bytes");
        }
        // A UTF-16 unit takes at least one byte of UTF-8: within this, ASCII text (walked by
        // sums) stays inside the text; other text is walked character by character, and
        // `utf8_walk` stops at its end.
        if text_units > self.text.len() as u64 {
            return bad("the TEXT lengths run past the text");
        }
        Ok(())
    }

    /// Walks the sets in order, handing each one's values to `f` as borrowed SQLite values.
    pub fn for_each_set<E>(
        &self,
        mut f: impl FnMut(usize, &[rusqlite::types::ValueRef<'_>]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        use rusqlite::types::ValueRef;
        let ascii = self.text.is_ascii();
        let (mut v, mut tp, mut bp, mut blob_at) = (0usize, 0usize, 0usize, 0usize);
        let mut values: Vec<ValueRef<'_>> = Vec::new();
        for (set, &len) in self.set_lens.iter().enumerate() {
            values.clear();
            for _ in 0..len {
                let n = self.nums[v];
                values.push(match self.tags[v] {
                    PACKED_INTEGER => ValueRef::Integer(n as i64),
                    PACKED_REAL => ValueRef::Real(n),
                    PACKED_TEXT => {
                        let units = n as usize;
                        let end = if ascii { tp + units } else { utf8_end(&self.text, tp, units) };
                        let t = &self.text[tp..end];
                        tp = end;
                        ValueRef::Text(t)
                    }
                    PACKED_BLOB => {
                        let end = blob_at + n as usize;
                        let b = &self.blobs[blob_at..end];
                        blob_at = end;
                        ValueRef::Blob(b)
                    }
                    PACKED_BIGINT => {
                        bp += 1;
                        ValueRef::Integer(self.bigs[bp - 1])
                    }
                    _ => ValueRef::Null,
                });
                v += 1;
            }
            f(set, &values)?;
        }
        Ok(())
    }
}

/// The INTEGER a JavaScript number binds as: an integral number inside int64 (2^63 itself
/// does not fit); any other number binds as a REAL. The one rule for both ways parameters
/// arrive (value by value, and packed).
pub fn integer_of(f: f64) -> Option<i64> {
    (f.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f)).then_some(f as i64)
}

/// One request's parameters as the JS side packs them (src/params.ts, `packParams`): per
/// value a `PACKED_*` tag and a number (the INTEGER as an exact f64, the REAL, or a TEXT's
/// length in UTF-16 units), and every TEXT value back to back in `text`. Only NULL, INTEGER,
/// REAL and TEXT are packed this way (docs/experiments/078-packed-request-parameters.md).
/// Refuses cells that do not describe `text` exactly, whatever a caller sent.
pub fn unpack_params(cells: &[(f64, f64)], text: &str) -> crate::Result<Params> {
    let bad = |what: &str| Err(crate::Error::Type(format!("packed parameters are inconsistent: {what}")));
    if cells.len() > MAX_PARAMETERS as usize {
        return bad("too many values");
    }
    let bytes = text.as_bytes();
    let ascii = text.is_ascii();
    let mut at = 0usize;
    let mut values = Vec::with_capacity(cells.len());
    for &(tag, n) in cells {
        values.push(match tag {
            t if t == f64::from(PACKED_NULL) => Value::Null,
            // Only what the packer makes: an integral number inside int64.
            t if t == f64::from(PACKED_INTEGER) => match integer_of(n) {
                Some(i) => Value::Integer(i),
                None => return bad("an INTEGER"),
            },
            t if t == f64::from(PACKED_REAL) => Value::Real(n),
            t if t == f64::from(PACKED_TEXT) && n >= 0.0 && n <= bytes.len() as f64 && n.fract() == 0.0 => {
                let units = n as usize;
                let end = if ascii { Some(at + units) } else { utf8_end_exact(bytes, at, units) };
                let Some((end, value)) = end.and_then(|end| Some((end, text.get(at..end)?))) else { return bad("a TEXT length") };
                at = end;
                Value::Text(value.to_owned())
            }
            _ => return bad("a tag"),
        });
    }
    if at != bytes.len() {
        return bad("text left over");
    }
    Ok(Params::Positional(Positional::from(values)))
}

/// `utf8_end`, only when exactly `units` units end there: not inside a character that takes
/// two (a surrogate pair), nor past the text.
fn utf8_end_exact(text: &[u8], start: usize, units: usize) -> Option<usize> {
    let (end, seen) = utf8_walk(text, start, units);
    (seen == units).then_some(end)
}

/// The byte offset `units` UTF-16 code units after `start` in valid UTF-8 text.
fn utf8_end(text: &[u8], start: usize, units: usize) -> usize {
    utf8_walk(text, start, units).0
}

/// Walks whole characters from `start` until `units` UTF-16 units or the text's end: the
/// byte offset reached and the units walked (one more than asked when the last character
/// takes two).
fn utf8_walk(text: &[u8], start: usize, units: usize) -> (usize, usize) {
    let mut i = start;
    let mut seen = 0;
    while seen < units && i < text.len() {
        let b = text[i];
        let (bytes, u) = match b {
            0x00..=0x7f => (1, 1),
            0xc0..=0xdf => (2, 1),
            0xe0..=0xef => (3, 1),
            _ => (4, 2),
        };
        i += bytes;
        seen += u;
    }
    // A last character cut short (bytes that are not UTF-8): the text's end, not past it.
    (i.min(text.len()), seen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::types::ValueRef;

    #[test]
    fn one_positional_value_is_kept_inline_and_equals_the_same_in_a_vector() {
        let text = || Value::Text("héllo".into());
        let one = Positional::One(text());
        assert!(matches!(Positional::from(vec![text()]), Positional::One(Value::Text(ref s)) if s == "héllo"));
        assert!(matches!(Positional::from(vec![]), Positional::Many(ref v) if v.is_empty()));
        let two: Positional = vec![Value::Integer(1), Value::Null].into();
        assert_eq!(&*two, &[Value::Integer(1), Value::Null]);
        assert_eq!(one, Positional::Many(vec![text()]));
        assert_ne!(one, two);
        // Live queries share work by this key: however the value is kept, the key is the same.
        let key = |p: Params| {
            let mut out = Vec::new();
            p.append_key(&mut out);
            out
        };
        assert_eq!(key(Params::Positional(one)), key(Params::Positional(Positional::Many(vec![text()]))));
        assert_ne!(key(Params::Positional(Positional::One(Value::Integer(1)))), key(Params::Positional(two)));
    }

    #[test]
    fn packed_parameters_unpack_to_their_values_and_inconsistent_ones_are_refused() {
        let (t, i, r, n) = (f64::from(PACKED_TEXT), f64::from(PACKED_INTEGER), f64::from(PACKED_REAL), f64::from(PACKED_NULL));
        // "é😀" is 3 UTF-16 units in 6 bytes of UTF-8; "x" follows it.
        let params = unpack_params(&[(t, 3.0), (i, -7.0), (r, 0.5), (n, 99.0), (t, 1.0), (t, 0.0)], "é😀x").unwrap();
        let Params::Positional(values) = params else { panic!("positional") };
        assert_eq!(
            &*values,
            &[
                Value::Text("é😀".into()),
                Value::Integer(-7),
                Value::Real(0.5),
                Value::Null,
                Value::Text("x".into()),
                Value::Text(String::new())
            ]
        );
        // One value is kept inline, as `to_params` keeps it.
        assert!(matches!(unpack_params(&[(i, 1.0)], ""), Ok(Params::Positional(Positional::One(Value::Integer(1))))));
        for (cells, text) in [
            (vec![(t, 2.0)], "abc"),                  // text left over
            (vec![(t, 4.0)], "abc"),                  // past the text
            (vec![(t, 2.0)], "😀x"),                  // 2 units: the emoji, then "x" left over
            (vec![(t, 1.0), (t, 1.0)], "😀"),        // each half of a surrogate pair
            (vec![(t, 1.0)], "中abc"),               // text left over after a wide character
            (vec![(t, 0.5), (t, 0.5)], "a"),
            (vec![(t, -1.0)], ""),
            (vec![(t, f64::NAN)], ""),
            (vec![(f64::from(PACKED_BLOB), 0.0)], ""), // never packed
            (vec![(1.5, 0.0)], ""),
            (vec![(i, 1.5)], ""),                     // an INTEGER that is not integral
            (vec![(i, f64::NAN)], ""),
            (vec![(i, 9.223_372_036_854_776e18)], ""), // 2^63
        ] {
            assert!(matches!(unpack_params(&cells, text), Err(crate::Error::Type(_))), "{cells:?} {text:?}");
        }
        let too_many = vec![(n, 0.0); MAX_PARAMETERS as usize + 1];
        assert!(unpack_params(&too_many, "").is_err());
    }

    #[test]
    fn inconsistent_packed_sets_are_refused_before_they_are_walked() {
        let good = PackedSets {
            set_lens: vec![2],
            tags: vec![PACKED_BLOB, PACKED_BIGINT],
            nums: vec![1.0, 0.0],
            bigs: vec![1],
            text: vec![],
            blobs: vec![1],
        };
        assert!(good.check().is_ok());
        let mut more_values = good.clone();
        more_values.set_lens = vec![3];
        let mut no_big = good.clone();
        no_big.bigs.clear();
        let mut long_blob = good.clone();
        long_blob.nums[0] = 5.0;
        let mut odd_length = good.clone();
        odd_length.nums[0] = 0.5;
        let mut too_many = good.clone();
        too_many.set_lens = vec![MAX_PARAMETERS + 1];
        let text = |tags: Vec<u8>, nums: Vec<f64>, text: &str| PackedSets {
            set_lens: vec![tags.len() as u32],
            tags,
            nums,
            bigs: vec![],
            text: text.as_bytes().to_vec(),
            blobs: vec![],
        };
        assert!(text(vec![PACKED_TEXT, PACKED_TEXT], vec![1.0, 2.0], "a😀").check().is_ok());
        let long_text = text(vec![PACKED_TEXT], vec![1000.0], "ab");
        let huge_text = text(vec![PACKED_TEXT], vec![1e300], "ab");
        let unknown_tag = text(vec![9], vec![0.0], "");
        // Inconsistent but inside the text: refused or not, walking it stays in bounds.
        for odd in [text(vec![PACKED_TEXT, PACKED_TEXT], vec![2.0, 1.0], "a😀"), text(vec![PACKED_TEXT], vec![1.0], "ab")] {
            if odd.check().is_ok() {
                odd.for_each_set(|_, _| -> std::result::Result<(), ()> { Ok(()) }).unwrap();
            }
        }
        let mut cut = text(vec![PACKED_TEXT], vec![2.0], "");
        cut.text = vec![b'a', 0xf0];
        if cut.check().is_ok() {
            cut.for_each_set(|_, _| -> std::result::Result<(), ()> { Ok(()) }).unwrap();
        }
        for bad in [more_values, no_big, long_blob, odd_length, too_many, long_text, huge_text, unknown_tag] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn packed_sets_unpack_text_of_any_width() {
        let p = PackedSets {
            set_lens: vec![2, 2],
            tags: vec![PACKED_TEXT, PACKED_INTEGER, PACKED_TEXT, PACKED_BIGINT],
            nums: vec![3.0, 7.0, 1.0, 0.0],
            bigs: vec![i64::MAX],
            text: "h😀x".as_bytes().to_vec(),
            blobs: vec![],
        };
        let mut seen = Vec::new();
        p.for_each_set(|i, vals| -> std::result::Result<(), ()> {
            seen.push((i, format!("{vals:?}")));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen[0].1, format!("{:?}", [ValueRef::Text("h😀".as_bytes()), ValueRef::Integer(7)]));
        assert_eq!(seen[1].1, format!("{:?}", [ValueRef::Text(b"x"), ValueRef::Integer(i64::MAX)]));
    }
}
