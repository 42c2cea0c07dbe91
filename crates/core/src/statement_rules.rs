//! What user SQL may do, decided once, at prepare time, by SQLite's authorizer.
//!
//! Every connection carries the same authorizer. It reads the rule of the request the
//! current thread is running (a thread-local: a connection is used by one thread at a time,
//! and the authorizer runs on the thread that prepares). Outside `under` the rule is
//! `Internal` and everything passes, so the core's own BEGIN/COMMIT/SAVEPOINT and pragmas
//! need no exemption.
//!
//! - `Write` (execute, executeBatch): no transaction control. BEGIN, COMMIT, ROLLBACK,
//!   SAVEPOINT, RELEASE and ROLLBACK TO belong to `db.transaction()`; a COMMIT inside a body
//!   would commit what the transaction may later roll back.
//! - `Read` (select, selectOne, selectBytes, live queries, `tx.select`): also nothing that
//!   changes the connection. A read runs on one of several connections (any reader), so a
//!   setting made by it would apply to one random connection. Pragmas only in their query
//!   form, or with an argument only when that argument names what to inspect; no ATTACH or
//!   DETACH; and no writes. Writes are also refused by `sqlite3_stmt_readonly` before a read
//!   runs, but that looks at the statement as first prepared: a statement SQLite prepares
//!   again while it runs (the schema changed on another connection) can become a write
//!   (`DROP TRIGGER IF EXISTS` once the trigger exists), and only the authorizer sees that.
//! - `Describe` (`stmt.columns()` on a reader): as `Read`, but a write may be described; a
//!   description never runs.

use crate::error::{Error, Result};
use rusqlite::{ffi, Connection};
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The core's own statements: everything passes.
    Internal,
    /// User SQL on the writer (execute, executeBatch).
    Write,
    /// User SQL that must only read (select and friends, live queries).
    Read,
    /// User SQL prepared to be described on a read connection, never run.
    Describe,
}

thread_local! {
    static RULE: Cell<Rule> = const { Cell::new(Rule::Internal) };
    /// Why the authorizer last refused a statement on this thread.
    static DENIED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Pragmas that take an argument naming what to inspect, and change nothing.
const INSPECTING_PRAGMAS: &[&str] = &[
    "table_info",
    "table_xinfo",
    "index_info",
    "index_xinfo",
    "index_list",
    "foreign_key_list",
    "foreign_key_check",
    "integrity_check",
    "quick_check",
];

/// Pragmas that act even in their bare form.
const ACTING_PRAGMAS: &[&str] = &["optimize", "shrink_memory", "wal_checkpoint", "incremental_vacuum"];

/// SQLite3 Multiple Ciphers' pragmas that set or change a key. Refused in user SQL and in
/// the `pragmas` option: the key belongs to `encryptionKey` (applied to every connection
/// and checked) and `rekey()` (which makes the readers follow); a key set on one
/// connection by SQL would leave the others, and maybe the file, in plaintext.
const KEY_PRAGMAS: &[&str] = &["key", "rekey", "hexkey", "hexrekey", "textkey", "textrekey"];

/// Why a read refuses a statement that writes. Its error is a `SqliteError` with the code a
/// read-only statement check gives (`SQLITE_READONLY`), not a `RangeError`.
pub(crate) const WRITE_IN_READ_REFUSED: &str =
    "reads (select, selectOne, selectBytes, iterate, live queries) run read-only statements only; use execute() for writes";

pub(crate) const KEY_PRAGMA_REFUSED: &str =
    "encryption keys cannot be set by pragma (key, rekey, hexkey, hexrekey): give the key with the \
     'encryptionKey' open option and change it with db.rekey()";

pub(crate) fn is_key_pragma(name: &str) -> bool {
    KEY_PRAGMAS.iter().any(|k| k.eq_ignore_ascii_case(name))
}

/// Installs the authorizer on `conn` (again, after something else replaced it).
pub fn install(conn: &Connection) {
    // SAFETY: the handle is valid while `conn` lives; the callback takes no context pointer
    // (its state is thread-local), so nothing it reads can dangle.
    unsafe {
        ffi::sqlite3_set_authorizer(conn.handle(), Some(authorize), std::ptr::null_mut());
    }
}

/// Runs `f` (which prepares and runs user SQL) under `rule`. A statement the rule refuses
/// fails to prepare; its error becomes a RangeError that says why.
pub fn under<T>(rule: Rule, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let _ = DENIED.try_with(|d| d.borrow_mut().take());
    let before = RULE.with(|r| r.replace(rule));
    let out = f();
    RULE.with(|r| r.set(before));
    let denied = DENIED.try_with(|d| d.borrow_mut().take()).ok().flatten();
    match (out, denied) {
        (Err(e), Some(why)) if why == WRITE_IN_READ_REFUSED => {
            let sql = match e {
                Error::Sqlite { sql, .. } => sql,
                _ => None,
            };
            Err(Error::Sqlite { code: ffi::SQLITE_READONLY, message: why, sql })
        }
        (Err(_), Some(why)) => Err(Error::Range(why)),
        (out, _) => out,
    }
}

/// Authorizer actions that change the database: a read refuses them.
fn writes(action: c_int) -> bool {
    matches!(
        action,
        ffi::SQLITE_INSERT
            | ffi::SQLITE_UPDATE
            | ffi::SQLITE_DELETE
            | ffi::SQLITE_CREATE_INDEX
            | ffi::SQLITE_CREATE_TABLE
            | ffi::SQLITE_CREATE_TEMP_INDEX
            | ffi::SQLITE_CREATE_TEMP_TABLE
            | ffi::SQLITE_CREATE_TEMP_TRIGGER
            | ffi::SQLITE_CREATE_TEMP_VIEW
            | ffi::SQLITE_CREATE_TRIGGER
            | ffi::SQLITE_CREATE_VIEW
            | ffi::SQLITE_CREATE_VTABLE
            | ffi::SQLITE_DROP_INDEX
            | ffi::SQLITE_DROP_TABLE
            | ffi::SQLITE_DROP_TEMP_INDEX
            | ffi::SQLITE_DROP_TEMP_TABLE
            | ffi::SQLITE_DROP_TEMP_TRIGGER
            | ffi::SQLITE_DROP_TEMP_VIEW
            | ffi::SQLITE_DROP_TRIGGER
            | ffi::SQLITE_DROP_VIEW
            | ffi::SQLITE_DROP_VTABLE
            | ffi::SQLITE_ALTER_TABLE
            | ffi::SQLITE_REINDEX
            | ffi::SQLITE_ANALYZE
    )
}

/// The verdict for one authorizer call; `None` allows it.
fn verdict(rule: Rule, action: c_int, arg1: Option<&str>, arg2: Option<&str>) -> Option<String> {
    if rule == Rule::Internal {
        return None;
    }
    match action {
        ffi::SQLITE_TRANSACTION | ffi::SQLITE_SAVEPOINT => Some(
            "transaction control (BEGIN, COMMIT, ROLLBACK, END, SAVEPOINT, RELEASE, ROLLBACK TO) \
             cannot be sent as SQL; use db.transaction() (nested calls make savepoints)"
                .into(),
        ),
        ffi::SQLITE_PRAGMA if arg1.is_some_and(is_key_pragma) => Some(KEY_PRAGMA_REFUSED.into()),
        _ if rule == Rule::Write => None,
        _ if rule == Rule::Read && writes(action) => Some(WRITE_IN_READ_REFUSED.into()),
        ffi::SQLITE_ATTACH | ffi::SQLITE_DETACH => Some(
            "select() cannot ATTACH or DETACH: reads run on any of several connections; \
             use execute() or the open options"
                .into(),
        ),
        ffi::SQLITE_PRAGMA => {
            let name = arg1.unwrap_or("").to_ascii_lowercase();
            let allowed = match arg2 {
                None => !ACTING_PRAGMAS.contains(&name.as_str()),
                Some(_) => INSPECTING_PRAGMAS.contains(&name.as_str()),
            };
            (!allowed).then(|| {
                format!(
                    "select() runs pragmas only in their query form (PRAGMA {name} here would change \
                     or act on one of several connections); use execute() or the 'pragmas' open option"
                )
            })
        }
        _ => None,
    }
}

/// The authorizer's answer under `rule`, recording why when it refuses. For callers that
/// install an authorizer of their own for a while (`deps`): they must apply the rule too,
/// since some pragmas act while they are prepared.
///
/// # Safety
/// `arg1` and `arg2` are NULL or NUL-terminated strings valid for the call, as SQLite passes them.
pub(crate) unsafe fn answer(rule: Rule, action: c_int, arg1: *const c_char, arg2: *const c_char) -> c_int {
    // SAFETY: forwarded from the caller's contract.
    let (a1, a2) = (text(arg1), text(arg2));
    match verdict(rule, action, a1, a2) {
        None => ffi::SQLITE_OK,
        Some(why) => {
            let _ = DENIED.try_with(|d| *d.borrow_mut() = Some(why));
            ffi::SQLITE_DENY
        }
    }
}

unsafe fn text<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        None
    } else {
        CStr::from_ptr(p).to_str().ok()
    }
}

unsafe extern "C" fn authorize(
    _ctx: *mut c_void,
    action: c_int,
    arg1: *const c_char,
    arg2: *const c_char,
    _schema: *const c_char,
    _trigger: *const c_char,
) -> c_int {
    // Called from C: nothing here may unwind (try_with, no indexing, no unwrap).
    let Ok(rule) = RULE.try_with(Cell::get) else { return ffi::SQLITE_OK };
    if rule == Rule::Internal {
        return ffi::SQLITE_OK;
    }
    // SAFETY: SQLite passes NUL-terminated strings (or NULL) valid for this call.
    answer(rule, action, arg1, arg2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        install(&c);
        c.execute_batch("CREATE TABLE t(x)").unwrap();
        c
    }

    fn prepare(c: &Connection, rule: Rule, sql: &str) -> Result<()> {
        under(rule, || c.prepare(sql).map(drop).map_err(Error::from))
    }

    #[test]
    fn transaction_control_is_refused_for_user_sql_only() {
        let c = conn();
        for sql in ["BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT a", "RELEASE a", "ROLLBACK TO a", "BEGIN IMMEDIATE"] {
            for rule in [Rule::Write, Rule::Read] {
                assert!(matches!(prepare(&c, rule, sql), Err(Error::Range(_))), "{sql} {rule:?}");
            }
            assert!(prepare(&c, Rule::Internal, sql).is_ok(), "{sql}");
        }
        // The rule ends with `under`.
        c.execute_batch("BEGIN; COMMIT").unwrap();
    }

    #[test]
    fn reads_may_not_change_the_connection() {
        let c = conn();
        for sql in ["PRAGMA foreign_keys = OFF", "PRAGMA cache_size = 10", "PRAGMA optimize", "ATTACH ':memory:' AS b", "DETACH b"] {
            assert!(matches!(prepare(&c, Rule::Read, sql), Err(Error::Range(_))), "{sql}");
        }
        for sql in ["PRAGMA foreign_keys", "PRAGMA table_info(t)", "PRAGMA main.user_version", "SELECT * FROM pragma_table_info('t')", "SELECT 1"] {
            assert!(prepare(&c, Rule::Read, sql).is_ok(), "{sql}");
        }
        assert!(prepare(&c, Rule::Write, "PRAGMA cache_size = 10").is_ok());
        assert!(prepare(&c, Rule::Write, "ATTACH ':memory:' AS b").is_ok());
    }

    #[test]
    fn reads_may_not_write_and_descriptions_may_name_writes() {
        let c = conn();
        for sql in ["INSERT INTO t VALUES (1)", "DELETE FROM t", "UPDATE t SET x = 1", "CREATE TABLE u(y)", "CREATE TEMP TABLE u(y)", "DROP TABLE t", "ALTER TABLE t ADD COLUMN y", "CREATE INDEX i ON t(x)"] {
            match prepare(&c, Rule::Read, sql) {
                Err(Error::Sqlite { code: ffi::SQLITE_READONLY, message, .. }) => assert_eq!(message, WRITE_IN_READ_REFUSED),
                other => panic!("{sql}: {other:?}"),
            }
            assert!(prepare(&c, Rule::Describe, sql).is_ok(), "{sql}");
            assert!(prepare(&c, Rule::Write, sql).is_ok(), "{sql}");
        }
        // Describing is still held to what a read may do to the connection.
        assert!(matches!(prepare(&c, Rule::Describe, "PRAGMA cache_size = 10"), Err(Error::Range(_))));
        assert!(prepare(&c, Rule::Read, "SELECT x FROM t WHERE x IN (SELECT x FROM t)").is_ok());
    }

    #[test]
    fn a_read_that_becomes_a_write_when_prepared_again_is_refused() {
        // Prepared while the trigger does not exist, `DROP TRIGGER IF EXISTS` writes nothing
        // (read-only); another connection then creates the trigger, and SQLite prepares the
        // statement again as it runs: now it would drop it.
        let dir = std::env::temp_dir().join(format!("qs-rules-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.db");
        let a = Connection::open(&path).unwrap();
        install(&a);
        a.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t(x)").unwrap();
        let b = Connection::open(&path).unwrap();
        let mut stmt = under(Rule::Read, || a.prepare("DROP TRIGGER IF EXISTS tr").map_err(Error::from)).unwrap();
        assert!(stmt.readonly());
        b.execute_batch("CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END").unwrap();
        let ran = under(Rule::Read, || stmt.raw_execute().map_err(Error::from));
        assert!(matches!(ran, Err(Error::Sqlite { code: ffi::SQLITE_READONLY, .. })), "{ran:?}");
        drop(stmt);
        let n: i64 = b.query_row("SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1, "the trigger is still there");
        drop((a, b));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
