//! Values crossing the API boundary: parameters going in.

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
    Positional(Vec<Value>),
    /// Names as the caller wrote them, without the `:`/`@`/`$` prefix (a prefix is accepted too).
    Named(Vec<(String, Value)>),
}

impl Params {
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
