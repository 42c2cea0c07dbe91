//! One error type for the crate. Front ends map each kind to their own error classes.

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
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn sqlite(code: i32, message: impl Into<String>) -> Self {
        Error::Sqlite { code, message: message.into(), sql: None }
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

    pub fn from_rusqlite(err: rusqlite::Error) -> Self {
        match err {
            rusqlite::Error::SqliteFailure(e, msg) => Error::Sqlite {
                code: e.extended_code,
                message: msg.unwrap_or_else(|| code_message(e.extended_code)),
                sql: None,
            },
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
    unsafe {
        let p = rusqlite::ffi::sqlite3_errstr(code);
        if p.is_null() {
            return format!("SQLite error {code}");
        }
        std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// The symbolic name of an extended result code, e.g. `SQLITE_CONSTRAINT_UNIQUE`.
pub fn code_name(code: i32) -> String {
    use rusqlite::ffi::*;
    let name = match code {
        SQLITE_OK => "SQLITE_OK",
        SQLITE_ERROR => "SQLITE_ERROR",
        SQLITE_INTERNAL => "SQLITE_INTERNAL",
        SQLITE_PERM => "SQLITE_PERM",
        SQLITE_ABORT => "SQLITE_ABORT",
        SQLITE_BUSY => "SQLITE_BUSY",
        SQLITE_LOCKED => "SQLITE_LOCKED",
        SQLITE_NOMEM => "SQLITE_NOMEM",
        SQLITE_READONLY => "SQLITE_READONLY",
        SQLITE_INTERRUPT => "SQLITE_INTERRUPT",
        SQLITE_IOERR => "SQLITE_IOERR",
        SQLITE_CORRUPT => "SQLITE_CORRUPT",
        SQLITE_NOTFOUND => "SQLITE_NOTFOUND",
        SQLITE_FULL => "SQLITE_FULL",
        SQLITE_CANTOPEN => "SQLITE_CANTOPEN",
        SQLITE_PROTOCOL => "SQLITE_PROTOCOL",
        SQLITE_EMPTY => "SQLITE_EMPTY",
        SQLITE_SCHEMA => "SQLITE_SCHEMA",
        SQLITE_TOOBIG => "SQLITE_TOOBIG",
        SQLITE_CONSTRAINT => "SQLITE_CONSTRAINT",
        SQLITE_MISMATCH => "SQLITE_MISMATCH",
        SQLITE_MISUSE => "SQLITE_MISUSE",
        SQLITE_NOLFS => "SQLITE_NOLFS",
        SQLITE_AUTH => "SQLITE_AUTH",
        SQLITE_FORMAT => "SQLITE_FORMAT",
        SQLITE_RANGE => "SQLITE_RANGE",
        SQLITE_NOTADB => "SQLITE_NOTADB",
        SQLITE_NOTICE => "SQLITE_NOTICE",
        SQLITE_WARNING => "SQLITE_WARNING",
        SQLITE_ERROR_MISSING_COLLSEQ => "SQLITE_ERROR_MISSING_COLLSEQ",
        SQLITE_ERROR_RETRY => "SQLITE_ERROR_RETRY",
        SQLITE_ERROR_SNAPSHOT => "SQLITE_ERROR_SNAPSHOT",
        SQLITE_IOERR_READ => "SQLITE_IOERR_READ",
        SQLITE_IOERR_SHORT_READ => "SQLITE_IOERR_SHORT_READ",
        SQLITE_IOERR_WRITE => "SQLITE_IOERR_WRITE",
        SQLITE_IOERR_FSYNC => "SQLITE_IOERR_FSYNC",
        SQLITE_IOERR_TRUNCATE => "SQLITE_IOERR_TRUNCATE",
        SQLITE_IOERR_NOMEM => "SQLITE_IOERR_NOMEM",
        SQLITE_IOERR_LOCK => "SQLITE_IOERR_LOCK",
        SQLITE_IOERR_SHMOPEN => "SQLITE_IOERR_SHMOPEN",
        SQLITE_IOERR_SHMSIZE => "SQLITE_IOERR_SHMSIZE",
        SQLITE_IOERR_SHMMAP => "SQLITE_IOERR_SHMMAP",
        SQLITE_LOCKED_SHAREDCACHE => "SQLITE_LOCKED_SHAREDCACHE",
        SQLITE_BUSY_RECOVERY => "SQLITE_BUSY_RECOVERY",
        SQLITE_BUSY_SNAPSHOT => "SQLITE_BUSY_SNAPSHOT",
        SQLITE_BUSY_TIMEOUT => "SQLITE_BUSY_TIMEOUT",
        SQLITE_CANTOPEN_NOTEMPDIR => "SQLITE_CANTOPEN_NOTEMPDIR",
        SQLITE_CANTOPEN_ISDIR => "SQLITE_CANTOPEN_ISDIR",
        SQLITE_CANTOPEN_FULLPATH => "SQLITE_CANTOPEN_FULLPATH",
        SQLITE_CORRUPT_VTAB => "SQLITE_CORRUPT_VTAB",
        SQLITE_READONLY_RECOVERY => "SQLITE_READONLY_RECOVERY",
        SQLITE_READONLY_CANTLOCK => "SQLITE_READONLY_CANTLOCK",
        SQLITE_READONLY_ROLLBACK => "SQLITE_READONLY_ROLLBACK",
        SQLITE_READONLY_DBMOVED => "SQLITE_READONLY_DBMOVED",
        SQLITE_READONLY_CANTINIT => "SQLITE_READONLY_CANTINIT",
        SQLITE_READONLY_DIRECTORY => "SQLITE_READONLY_DIRECTORY",
        SQLITE_ABORT_ROLLBACK => "SQLITE_ABORT_ROLLBACK",
        SQLITE_CONSTRAINT_CHECK => "SQLITE_CONSTRAINT_CHECK",
        SQLITE_CONSTRAINT_COMMITHOOK => "SQLITE_CONSTRAINT_COMMITHOOK",
        SQLITE_CONSTRAINT_FOREIGNKEY => "SQLITE_CONSTRAINT_FOREIGNKEY",
        SQLITE_CONSTRAINT_FUNCTION => "SQLITE_CONSTRAINT_FUNCTION",
        SQLITE_CONSTRAINT_NOTNULL => "SQLITE_CONSTRAINT_NOTNULL",
        SQLITE_CONSTRAINT_PRIMARYKEY => "SQLITE_CONSTRAINT_PRIMARYKEY",
        SQLITE_CONSTRAINT_TRIGGER => "SQLITE_CONSTRAINT_TRIGGER",
        SQLITE_CONSTRAINT_UNIQUE => "SQLITE_CONSTRAINT_UNIQUE",
        SQLITE_CONSTRAINT_VTAB => "SQLITE_CONSTRAINT_VTAB",
        SQLITE_CONSTRAINT_ROWID => "SQLITE_CONSTRAINT_ROWID",
        SQLITE_CONSTRAINT_PINNED => "SQLITE_CONSTRAINT_PINNED",
        SQLITE_CONSTRAINT_DATATYPE => "SQLITE_CONSTRAINT_DATATYPE",
        SQLITE_NOTICE_RECOVER_WAL => "SQLITE_NOTICE_RECOVER_WAL",
        SQLITE_NOTICE_RECOVER_ROLLBACK => "SQLITE_NOTICE_RECOVER_ROLLBACK",
        SQLITE_WARNING_AUTOINDEX => "SQLITE_WARNING_AUTOINDEX",
        SQLITE_AUTH_USER => "SQLITE_AUTH_USER",
        SQLITE_OK_LOAD_PERMANENTLY => "SQLITE_OK_LOAD_PERMANENTLY",
        _ => return code_name(code & 0xff).to_string() + &format!("_{}", code >> 8),
    };
    name.to_string()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Sqlite { code, message, .. } => write!(f, "{message} ({})", code_name(*code)),
            Error::Range(m)
            | Error::Type(m)
            | Error::Closed(m)
            | Error::TransactionEnded(m)
            | Error::Internal(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_extended_codes() {
        assert_eq!(code_name(2067), "SQLITE_CONSTRAINT_UNIQUE");
        assert_eq!(code_name(1), "SQLITE_ERROR");
        assert_eq!(code_name(787), "SQLITE_CONSTRAINT_FOREIGNKEY");
    }
}
