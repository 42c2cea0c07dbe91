//! Binding parameters to a prepared statement, with the checks a caller deserves: wrong
//! counts, unknown and missing names are errors, never silent NULLs.

use crate::error::{Error, Result};
use crate::value::Params;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::Statement;

/// A statement's parameters: rusqlite's statements and ours (`raw_statement`) bind alike.
pub trait Parameters {
    fn parameter_count(&self) -> usize;
    /// The name of parameter `index` (from 1) with its prefix, or None for a bare `?`.
    fn parameter_name(&self, index: usize) -> Option<&str>;
    fn parameter_index(&self, name: &str) -> Result<Option<usize>>;
    fn bind_value(&mut self, index: usize, value: ValueRef<'_>) -> Result<()>;
}

impl Parameters for Statement<'_> {
    fn parameter_count(&self) -> usize {
        Statement::parameter_count(self)
    }
    fn parameter_name(&self, index: usize) -> Option<&str> {
        Statement::parameter_name(self, index)
    }
    fn parameter_index(&self, name: &str) -> Result<Option<usize>> {
        Ok(Statement::parameter_index(self, name)?)
    }
    fn bind_value(&mut self, index: usize, value: ValueRef<'_>) -> Result<()> {
        Ok(self.raw_bind_parameter(index, ToSqlOutput::Borrowed(value))?)
    }
}

/// Values given by position (an array) bind only `?` and `?NNN` parameters: a named one
/// would take whichever value sits at its index. (`bind_refs` leaves this to its caller,
/// which checks once per statement.)
pub(crate) fn refuse_named<S: Parameters + ?Sized>(stmt: &S, expected: usize) -> Result<()> {
    match (1..=expected).find_map(|i| stmt.parameter_name(i).filter(|n| !n.starts_with('?')).map(str::to_owned)) {
        Some(name) => Err(Error::Range(format!(
            "the statement uses named parameter {}: pass an object, not an array",
            crate::error::shown_name(&name)
        ))),
        None => Ok(()),
    }
}

pub fn bind<S: Parameters + ?Sized>(stmt: &mut S, params: &Params) -> Result<()> {
    let expected = stmt.parameter_count();
    match params {
        Params::None => {
            if expected > 0 {
                return Err(Error::Range(format!(
                    "the statement takes {expected} parameter(s) but none were given"
                )));
            }
        }
        Params::Positional(values) => {
            if values.len() != expected {
                return Err(Error::Range(format!(
                    "the statement takes {expected} parameter(s) but {} were given",
                    values.len()
                )));
            }
            refuse_named(stmt, expected)?;
            for (i, v) in values.iter().enumerate() {
                stmt.bind_value(i + 1, v.as_value_ref())?;
            }
        }
        Params::Named(pairs) => {
            let mut bound = vec![false; expected + 1];
            for (key, v) in pairs {
                if key.contains('\0') {
                    return Err(Error::Range("a key of params contains a NUL character: it names no parameter".into()));
                }
                let index = find_named(stmt, key)?.ok_or_else(|| {
                    Error::Range(format!("unknown named parameter {}", crate::error::shown_name(key)))
                })?;
                if bound[index] {
                    // `{a: 1, ':a': 2}`: two keys for one parameter; neither may win silently.
                    let n = stmt.parameter_name(index).unwrap_or("?");
                    return Err(Error::Range(format!(
                        "named parameter {} is given twice (key {} names it again)",
                        crate::error::shown_name(n),
                        crate::error::shown_name(key)
                    )));
                }
                bound[index] = true;
                stmt.bind_value(index, v.as_value_ref())?;
            }
            if let Some(missing) = (1..=expected).find(|&i| !bound[i]) {
                return Err(match stmt.parameter_name(missing) {
                    Some(n) if !n.starts_with('?') => {
                        Error::Range(format!("missing named parameter {}", crate::error::shown_name(&n[1..])))
                    }
                    _ => Error::Range(format!(
                        "parameter {missing} is positional: pass an array, not an object"
                    )),
                });
            }
        }
    }
    Ok(())
}

fn find_named<S: Parameters + ?Sized>(stmt: &S, key: &str) -> Result<Option<usize>> {
    if key.starts_with([':', '@', '$']) {
        return stmt.parameter_index(key);
    }
    for prefix in [":", "@", "$"] {
        if let Some(i) = stmt.parameter_index(&format!("{prefix}{key}"))? {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// Binds already-borrowed positional values (a packed batch set), with the count check.
pub fn bind_refs<S: Parameters + ?Sized>(stmt: &mut S, values: &[ValueRef<'_>]) -> Result<()> {
    let expected = stmt.parameter_count();
    if values.len() != expected {
        return Err(Error::Range(format!(
            "the statement takes {expected} parameter(s) but {} were given",
            values.len()
        )));
    }
    for (i, v) in values.iter().enumerate() {
        stmt.bind_value(i + 1, *v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;
    use rusqlite::Connection;

    #[test]
    fn two_keys_for_one_parameter_are_refused_by_name_not_value() {
        let conn = Connection::open_in_memory().unwrap();
        let mut stmt = conn.prepare("SELECT :a").unwrap();
        let twice = Params::Named(vec![
            ("a".into(), Value::Text("s3cret".into())),
            (":a".into(), Value::Text("s3cret".into())),
        ]);
        match bind(&mut stmt, &twice) {
            Err(Error::Range(m)) => {
                assert!(m.contains("':a' is given twice"), "{m}");
                assert!(!m.contains("s3cret"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        assert!(bind(&mut stmt, &Params::Named(vec![("a".into(), Value::Integer(1))])).is_ok());
    }

    /// A long name is the caller's data as much as a long key: the statement's own copy of
    /// it was shown whole when the key's was not.
    #[test]
    fn a_long_parameter_name_is_not_shown_from_the_statements_side_either() {
        let conn = Connection::open_in_memory().unwrap();
        let name = format!("SECRET_{}", "k".repeat(80));
        let mut stmt = conn.prepare(&format!("SELECT :{name}, :b")).unwrap();
        let twice = Params::Named(vec![(name.clone(), Value::Integer(1)), (format!(":{name}"), Value::Integer(1))]);
        let missing = Params::Named(vec![("b".into(), Value::Integer(1))]);
        let positional = Params::Positional(vec![Value::Integer(1), Value::Integer(1)].into());
        for params in [twice, missing, positional] {
            match bind(&mut stmt, &params) {
                Err(Error::Range(m)) => assert!(!m.contains("SECRET"), "{m}"),
                other => panic!("{other:?}"),
            }
        }
    }
}
