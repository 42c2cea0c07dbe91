//! One error type for the crate. Front ends map each kind to their own error classes.

use rusqlite::types::ValueRef;
use std::borrow::Cow;
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// An error reported by SQLite: `code` is the extended result code.
    Sqlite { code: i32, message: String, sql: Option<String> },
    /// Misuse with a value out of range: wrong parameter count, unknown name, several
    /// statements where one is required.
    Range(String),
    /// Misuse with a value of the wrong type.
    Type(String),
    /// The database is closed or closing.
    Closed(String),
    /// A transaction handle used outside its lifetime.
    TransactionEnded(String),
    /// A bug: a panic caught at a thread boundary.
    Internal(String),
    /// A user-defined function threw: `token` names the front end's own error object (it
    /// keeps it), `message` is its text.
    Thrown { message: String, token: u32 },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn sqlite(code: i32, message: impl Into<String>) -> Self {
        Error::Sqlite { code, message: message.into(), sql: None }
    }

    /// Its SQLite code and message, for an error reported again inside another one (a
    /// reader that could not reopen); `code` for the kinds SQLite did not raise.
    pub fn code_and_message(&self, code: i32) -> (i32, String) {
        match self {
            Error::Sqlite { code, message, .. } => (*code, message.clone()),
            other => (code, other.to_string()),
        }
    }

    /// Attaches the SQL text to a SQLite error that does not carry one yet.
    pub fn with_sql(self, text: &str) -> Self {
        match self {
            Error::Sqlite { code, message, sql: None } => {
                Error::Sqlite { code, message, sql: Some(text.to_owned()) }
            }
            other => other,
        }
    }

    /// Leaves the caller's values out of SQLite's own message, which repeats some of them: a
    /// bad JSON path quoted (`bad JSON path: '...'`), a file it cannot open bare
    /// (`VACUUM INTO ?`, `ATTACH ?`). Each value of at least four characters becomes `?`:
    /// - where the message quotes it as SQLite quotes (between `'` or `"`, the quote doubled
    ///   inside);
    /// - where it stands bare after `: ` (where SQLite names what it could not use, as in
    ///   `unable to open database: <file>`), with no name character right after it, if it is
    ///   not a name itself (it holds something other than letters, digits and `_`): a
    ///   parameter equal to a table's name must not cut the name out of
    ///   `UNIQUE constraint failed: users.email`, nor one equal to words of the message
    ///   (`NOT NULL`) cut them out elsewhere.
    ///
    /// Looked for: texts, BLOBs whose bytes are UTF-8, integers in decimal, each up to a NUL
    /// (SQLite's C strings end there); longest first, so that a shorter value inside a longer
    /// one cannot leave part of it. Not found: reals (their digits are SQLite's formatting),
    /// values SQLite changed before writing them (`upper(?)`), and parts of a value (FTS5
    /// repeats the word of a `MATCH` query it could not parse). Only failing statements pay.
    pub fn without_values<'v>(self, values: impl IntoIterator<Item = ValueRef<'v>>) -> Self {
        match self {
            Error::Sqlite { code, mut message, sql } => {
                let mut shown: Vec<Cow<'v, str>> = values
                    .into_iter()
                    .filter_map(|v| match v {
                        ValueRef::Text(b) | ValueRef::Blob(b) => {
                            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                            std::str::from_utf8(&b[..end]).ok().map(Cow::Borrowed)
                        }
                        ValueRef::Integer(i) => Some(Cow::Owned(i.to_string())),
                        ValueRef::Real(_) | ValueRef::Null => None,
                    })
                    .filter(|t| t.chars().nth(3).is_some())
                    .collect();
                shown.sort_by_key(|t| std::cmp::Reverse(t.len()));
                for value in &shown {
                    for quote in ['\'', '"'] {
                        let doubled = format!("{quote}{quote}");
                        let quoted = format!("{quote}{}{quote}", value.replace(quote, &doubled));
                        if message.contains(&quoted) {
                            message = message.replace(&quoted, "?");
                        }
                    }
                    if !value.chars().all(is_name_char) {
                        message = without_bare(&message, value);
                    }
                }
                Error::Sqlite { code, message, sql }
            }
            other => other,
        }
    }

    pub fn from_rusqlite(err: rusqlite::Error) -> Self {
        match err {
            rusqlite::Error::SqliteFailure(e, msg) => {
                let message = msg.unwrap_or_else(|| code_message(e.extended_code));
                // A user-defined function's failure: its own error, not SQLite's copy.
                if e.extended_code == rusqlite::ffi::SQLITE_ERROR {
                    if let Some(original) = crate::functions::take_failure(&message) {
                        return original;
                    }
                }
                Error::Sqlite { code: e.extended_code, message, sql: None }
            }
            rusqlite::Error::SqlInputError { error, msg, sql, .. } => Error::Sqlite {
                code: error.extended_code,
                message: msg,
                sql: Some(sql),
            },
            rusqlite::Error::MultipleStatement => Error::Range(
                "the SQL text holds more than one statement; this call takes exactly one".into(),
            ),
            rusqlite::Error::InvalidParameterName(name) => {
                Error::Range(format!("unknown named parameter '{name}'"))
            }
            rusqlite::Error::InvalidParameterCount(given, expected) => Error::Range(format!(
                "the statement takes {expected} parameter(s) but {given} were given"
            )),
            rusqlite::Error::NulError(e) => Error::Type(format!("SQL text contains a NUL byte: {e}")),
            other => Error::Internal(other.to_string()),
        }
    }
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `message` with each occurrence of `value` right after `: ` and not followed by a name
/// character replaced by `?`.
fn without_bare(message: &str, value: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(value) {
        out.push_str(&rest[..at]);
        let after = rest[at + value.len()..].chars().next();
        if !out.ends_with(": ") || after.is_some_and(is_name_char) {
            // Not where SQLite names an operand, or part of a longer word: keep its first
            // character and look on from the next.
            let first = value.chars().next().map_or(0, char::len_utf8);
            out.push_str(&rest[at..at + first]);
            rest = &rest[at + first..];
        } else {
            out.push('?');
            rest = &rest[at + value.len()..];
        }
    }
    out.push_str(rest);
    out
}

/// What a request the forced close kept from running, or interrupted, rejects with.
pub(crate) fn closed_by_force() -> Error {
    Error::Closed("the database was closed with force before this request finished".into())
}

/// An interruption caused by a forced close reads as such; any other interruption comes from
/// the request's own cancellation, which the front end reports in its own terms.
pub(crate) fn explain_interrupt<T>(result: Result<T>, stopped: bool) -> Result<T> {
    match result {
        Err(Error::Sqlite { code, .. }) if stopped && code & 0xff == rusqlite::ffi::SQLITE_INTERRUPT => {
            Err(closed_by_force())
        }
        other => other,
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::from_rusqlite(e)
    }
}

/// SQLite's English text for a result code.
pub fn code_message(code: i32) -> String {
    // SAFETY: sqlite3_errstr returns a static NUL-terminated string (or null) for any code.
    unsafe {
        let p = rusqlite::ffi::sqlite3_errstr(code);
        if p.is_null() {
            return format!("SQLite error {code}");
        }
        std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Every result code SQLite 3.54 defines (primary and extended), by number, sorted: the
/// names of sqlite3.h. Written out as numbers so a code the Rust bindings do not export
/// (`SQLITE_IOERR_FSTAT` is 7 << 8 | 10) is named all the same.
const CODE_NAMES: &[(i32, &str)] = &[
    (0, "SQLITE_OK"),
    (1, "SQLITE_ERROR"),
    (2, "SQLITE_INTERNAL"),
    (3, "SQLITE_PERM"),
    (4, "SQLITE_ABORT"),
    (5, "SQLITE_BUSY"),
    (6, "SQLITE_LOCKED"),
    (7, "SQLITE_NOMEM"),
    (8, "SQLITE_READONLY"),
    (9, "SQLITE_INTERRUPT"),
    (10, "SQLITE_IOERR"),
    (11, "SQLITE_CORRUPT"),
    (12, "SQLITE_NOTFOUND"),
    (13, "SQLITE_FULL"),
    (14, "SQLITE_CANTOPEN"),
    (15, "SQLITE_PROTOCOL"),
    (16, "SQLITE_EMPTY"),
    (17, "SQLITE_SCHEMA"),
    (18, "SQLITE_TOOBIG"),
    (19, "SQLITE_CONSTRAINT"),
    (20, "SQLITE_MISMATCH"),
    (21, "SQLITE_MISUSE"),
    (22, "SQLITE_NOLFS"),
    (23, "SQLITE_AUTH"),
    (24, "SQLITE_FORMAT"),
    (25, "SQLITE_RANGE"),
    (26, "SQLITE_NOTADB"),
    (27, "SQLITE_NOTICE"),
    (28, "SQLITE_WARNING"),
    (100, "SQLITE_ROW"),
    (101, "SQLITE_DONE"),
    (256, "SQLITE_OK_LOAD_PERMANENTLY"),
    (257, "SQLITE_ERROR_MISSING_COLLSEQ"),
    (261, "SQLITE_BUSY_RECOVERY"),
    (262, "SQLITE_LOCKED_SHAREDCACHE"),
    (264, "SQLITE_READONLY_RECOVERY"),
    (266, "SQLITE_IOERR_READ"),
    (267, "SQLITE_CORRUPT_VTAB"),
    (270, "SQLITE_CANTOPEN_NOTEMPDIR"),
    (275, "SQLITE_CONSTRAINT_CHECK"),
    (279, "SQLITE_AUTH_USER"),
    (283, "SQLITE_NOTICE_RECOVER_WAL"),
    (284, "SQLITE_WARNING_AUTOINDEX"),
    (512, "SQLITE_OK_SYMLINK"),
    (513, "SQLITE_ERROR_RETRY"),
    (516, "SQLITE_ABORT_ROLLBACK"),
    (517, "SQLITE_BUSY_SNAPSHOT"),
    (518, "SQLITE_LOCKED_VTAB"),
    (520, "SQLITE_READONLY_CANTLOCK"),
    (522, "SQLITE_IOERR_SHORT_READ"),
    (523, "SQLITE_CORRUPT_SEQUENCE"),
    (526, "SQLITE_CANTOPEN_ISDIR"),
    (531, "SQLITE_CONSTRAINT_COMMITHOOK"),
    (539, "SQLITE_NOTICE_RECOVER_ROLLBACK"),
    (769, "SQLITE_ERROR_SNAPSHOT"),
    (773, "SQLITE_BUSY_TIMEOUT"),
    (776, "SQLITE_READONLY_ROLLBACK"),
    (778, "SQLITE_IOERR_WRITE"),
    (779, "SQLITE_CORRUPT_INDEX"),
    (782, "SQLITE_CANTOPEN_FULLPATH"),
    (787, "SQLITE_CONSTRAINT_FOREIGNKEY"),
    (795, "SQLITE_NOTICE_RBU"),
    (1025, "SQLITE_ERROR_RESERVESIZE"),
    (1032, "SQLITE_READONLY_DBMOVED"),
    (1034, "SQLITE_IOERR_FSYNC"),
    (1038, "SQLITE_CANTOPEN_CONVPATH"),
    (1043, "SQLITE_CONSTRAINT_FUNCTION"),
    (1281, "SQLITE_ERROR_KEY"),
    (1288, "SQLITE_READONLY_CANTINIT"),
    (1290, "SQLITE_IOERR_DIR_FSYNC"),
    (1294, "SQLITE_CANTOPEN_DIRTYWAL"),
    (1299, "SQLITE_CONSTRAINT_NOTNULL"),
    (1537, "SQLITE_ERROR_UNABLE"),
    (1544, "SQLITE_READONLY_DIRECTORY"),
    (1546, "SQLITE_IOERR_TRUNCATE"),
    (1550, "SQLITE_CANTOPEN_SYMLINK"),
    (1555, "SQLITE_CONSTRAINT_PRIMARYKEY"),
    (1802, "SQLITE_IOERR_FSTAT"),
    (1811, "SQLITE_CONSTRAINT_TRIGGER"),
    (2058, "SQLITE_IOERR_UNLOCK"),
    (2067, "SQLITE_CONSTRAINT_UNIQUE"),
    (2314, "SQLITE_IOERR_RDLOCK"),
    (2323, "SQLITE_CONSTRAINT_VTAB"),
    (2570, "SQLITE_IOERR_DELETE"),
    (2579, "SQLITE_CONSTRAINT_ROWID"),
    (2826, "SQLITE_IOERR_BLOCKED"),
    (2835, "SQLITE_CONSTRAINT_PINNED"),
    (3082, "SQLITE_IOERR_NOMEM"),
    (3091, "SQLITE_CONSTRAINT_DATATYPE"),
    (3338, "SQLITE_IOERR_ACCESS"),
    (3594, "SQLITE_IOERR_CHECKRESERVEDLOCK"),
    (3850, "SQLITE_IOERR_LOCK"),
    (4106, "SQLITE_IOERR_CLOSE"),
    (4362, "SQLITE_IOERR_DIR_CLOSE"),
    (4618, "SQLITE_IOERR_SHMOPEN"),
    (4874, "SQLITE_IOERR_SHMSIZE"),
    (5130, "SQLITE_IOERR_SHMLOCK"),
    (5386, "SQLITE_IOERR_SHMMAP"),
    (5642, "SQLITE_IOERR_SEEK"),
    (5898, "SQLITE_IOERR_DELETE_NOENT"),
    (6154, "SQLITE_IOERR_MMAP"),
    (6410, "SQLITE_IOERR_GETTEMPPATH"),
    (6666, "SQLITE_IOERR_CONVPATH"),
    (6922, "SQLITE_IOERR_VNODE"),
    (7178, "SQLITE_IOERR_AUTH"),
    (7434, "SQLITE_IOERR_BEGIN_ATOMIC"),
    (7690, "SQLITE_IOERR_COMMIT_ATOMIC"),
    (7946, "SQLITE_IOERR_ROLLBACK_ATOMIC"),
    (8202, "SQLITE_IOERR_DATA"),
    (8458, "SQLITE_IOERR_CORRUPTFS"),
    (8714, "SQLITE_IOERR_IN_PAGE"),
    (8970, "SQLITE_IOERR_BADKEY"),
    (9226, "SQLITE_IOERR_CODEC"),
];

/// The symbolic name of a result code, e.g. `SQLITE_CONSTRAINT_UNIQUE`. A code this table
/// does not know (a newer SQLite) is named by its primary code and extended number.
pub fn code_name(code: i32) -> String {
    if let Ok(i) = CODE_NAMES.binary_search_by_key(&code, |&(c, _)| c) {
        return CODE_NAMES[i].1.to_string();
    }
    match CODE_NAMES.binary_search_by_key(&(code & 0xff), |&(c, _)| c) {
        Ok(i) => format!("{}_{}", CODE_NAMES[i].1, code >> 8),
        Err(_) => format!("SQLITE_UNKNOWN_{code}"),
    }
}

/// Short, and made of the characters of parameter names (`shown_name`).
pub fn is_plain_name(name: &str) -> bool {
    name.chars().count() <= 64 && name.chars().all(|c| c.is_alphanumeric() || "_$:@?".contains(c))
}

/// A parameter name or key as an error message shows it: quoted when it is short and made
/// of name characters, otherwise only its length. A key is the caller's data: it may be
/// long (a 100,000-character key was echoed whole) or carry text that is not a name.
pub fn shown_name(name: &str) -> String {
    if is_plain_name(name) {
        format!("'{name}'")
    } else {
        format!("(a name of {} characters, not shown)", name.chars().count())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Sqlite { code, message, .. } => write!(f, "{message} ({})", code_name(*code)),
            Error::Range(m)
            | Error::Type(m)
            | Error::Closed(m)
            | Error::TransactionEnded(m)
            | Error::Internal(m)
            | Error::Thrown { message: m, .. } => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    fn hidden(message: &str, texts: &[&str]) -> String {
        without(message, &texts.iter().map(|t| ValueRef::Text(t.as_bytes())).collect::<Vec<_>>())
    }

    fn without(message: &str, values: &[ValueRef<'_>]) -> String {
        let e = Error::Sqlite { code: 1, message: message.into(), sql: None };
        match e.without_values(values.iter().copied()) {
            Error::Sqlite { message, .. } => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn quoted_parameter_texts_leave_messages_and_nothing_else_does() {
        assert_eq!(hidden("bad JSON path: 'hunter2-SECRET'", &["hunter2-SECRET"]), "bad JSON path: ?");
        // Quoted as SQLite quotes: the apostrophe doubled.
        assert_eq!(hidden("bad JSON path: 'it''s-secret'", &["it's-secret"]), "bad JSON path: ?");
        // A shorter text inside a longer one leaves no part of it behind.
        assert_eq!(hidden("bad JSON path: 'sk_live_9f8e'", &["live", "sk_live_9f8e"]), "bad JSON path: ?");
        // Bare, a text that could be a name stays: it may be a word of the message.
        assert_eq!(
            hidden("UNIQUE constraint failed: users.email", &["users", "constraint", "email"]),
            "UNIQUE constraint failed: users.email"
        );
        // Quoted up to its NUL.
        assert_eq!(hidden("bad JSON path: 'sk_live_SECRET'", &["sk_live_SECRET\0x"]), "bad JSON path: ?");
        // Shorter than four characters: left.
        assert_eq!(hidden("bad JSON path: 'abc'", &["abc"]), "bad JSON path: 'abc'");
    }

    #[test]
    fn bare_values_that_are_not_names_leave_messages() {
        // `VACUUM INTO ?` and `ATTACH ?` name the file they could not open.
        let path = "/no-such-dir/customer-4711-export.db";
        assert_eq!(hidden(&format!("unable to open database: {path}"), &[path]), "unable to open database: ?");
        assert_eq!(hidden(&format!("a: {path}: b: {path}"), &[path]), "a: ?: b: ?");
        // Not after `: `, or followed by a name character: left.
        assert_eq!(hidden("no such table: xa-b-c", &["a-b-c"]), "no such table: xa-b-c");
        assert_eq!(hidden("no such table: a-b-c_1, a-b-c", &["a-b-c"]), "no such table: a-b-c_1, a-b-c");
        assert_eq!(hidden("NOT NULL constraint failed: t.x", &["NOT NULL", "constraint failed"]), "NOT NULL constraint failed: t.x");
        // Non-ASCII around and inside.
        assert_eq!(hidden("é: ü-ö-ä.db", &["ü-ö-ä.db"]), "é: ?");
        assert_eq!(hidden("é: ü-ö-ä.dbé", &["ü-ö-ä.db"]), "é: ü-ö-ä.dbé");
    }

    #[test]
    fn blobs_and_integers_leave_messages_and_reals_are_not_looked_for() {
        assert_eq!(
            without("bad JSON path: '4111111111111111'", &[ValueRef::Integer(4111111111111111)]),
            "bad JSON path: ?"
        );
        assert_eq!(without("bad JSON path: '-123'", &[ValueRef::Integer(-123)]), "bad JSON path: ?");
        // Digits alone could be a number of the message: bare, they stay.
        assert_eq!(without("at most 4096 columns", &[ValueRef::Integer(4096)]), "at most 4096 columns");
        assert_eq!(without("bad JSON path: 'hunter2secret'", &[ValueRef::Blob(b"hunter2secret\0tail")]), "bad JSON path: ?");
        // Not UTF-8: SQLite could not have written it as it is.
        assert_eq!(without("bad JSON path: 'ab\u{fffd}d'", &[ValueRef::Blob(b"ab\xffd")]), "bad JSON path: 'ab\u{fffd}d'");
        assert_eq!(without("bad JSON path: '1.5'", &[ValueRef::Real(1.5), ValueRef::Null]), "bad JSON path: '1.5'");
    }

    #[test]
    fn names_extended_codes() {
        assert_eq!(code_name(2067), "SQLITE_CONSTRAINT_UNIQUE");
        assert_eq!(code_name(1), "SQLITE_ERROR");
        assert_eq!(code_name(787), "SQLITE_CONSTRAINT_FOREIGNKEY");
        // A database file deleted while open (issue 8).
        assert_eq!(code_name(7 << 8 | 10), "SQLITE_IOERR_FSTAT");
        assert_eq!(code_name(99 << 8 | 10), "SQLITE_IOERR_99");
    }

    #[test]
    fn the_code_table_is_sorted_complete_and_consistent() {
        use rusqlite::ffi;
        assert!(CODE_NAMES.windows(2).all(|w| w[0].0 < w[1].0), "sorted, no duplicates");
        // 31 primary codes (with ROW and DONE) and the 82 extended codes of SQLite 3.54.
        assert_eq!(CODE_NAMES.len(), 31 + 82);
        for &(code, name) in CODE_NAMES {
            // An extended code's name begins with its primary code's name.
            if code > 0xff {
                let primary = code_name(code & 0xff);
                assert!(name.starts_with(&format!("{primary}_")), "{name} vs {primary}");
            }
        }
        // Spot checks against the constants the bindings do export.
        for (code, name) in [
            (ffi::SQLITE_IOERR_SHORT_READ, "SQLITE_IOERR_SHORT_READ"),
            (ffi::SQLITE_IOERR_FSTAT, "SQLITE_IOERR_FSTAT"),
            (ffi::SQLITE_IOERR_DELETE_NOENT, "SQLITE_IOERR_DELETE_NOENT"),
            (ffi::SQLITE_CANTOPEN_SYMLINK, "SQLITE_CANTOPEN_SYMLINK"),
            (ffi::SQLITE_CONSTRAINT_DATATYPE, "SQLITE_CONSTRAINT_DATATYPE"),
            (ffi::SQLITE_OK_SYMLINK, "SQLITE_OK_SYMLINK"),
            (ffi::SQLITE_DONE, "SQLITE_DONE"),
        ] {
            assert_eq!(code_name(code), name);
        }
        // Every code SQLite itself has a distinct text for is named (sqlite3_errstr knows the
        // primary codes and SQLITE_ABORT_ROLLBACK; "unknown error" for the rest).
        let unknown = code_message(0xff);
        for code in 0..=0xffff {
            let text = code_message(code);
            if code <= 0xff && text != unknown {
                assert!(!code_name(code).starts_with("SQLITE_UNKNOWN"), "{code}: {text}");
            }
        }
    }
}
