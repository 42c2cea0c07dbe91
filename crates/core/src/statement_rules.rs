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
//!   DETACH. Writes are refused separately (`sqlite3_stmt_readonly`).
//! - Both: no change of the locking or journal mode of the main database. The readers share
//!   it with the writer through WAL; `locking_mode = EXCLUSIVE` on the writer locked them out
//!   and, once they held their shared locks, failed every later write with SQLITE_BUSY.
//!
//! A VACUUM runs statements of SQLite's own while it steps, beginning with a BEGIN: while the
//! user's VACUUM statement steps, transaction control passes (`running_vacuum`), and every
//! other rule holds.

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
    /// A read prepared only to describe it (a prepared statement's first call on a reader,
    /// `columns()`): `Read`'s rules, since some pragmas act while they are prepared, but not
    /// what only running it on a reader would get wrong (an integrity check).
    Describe,
}

thread_local! {
    static RULE: Cell<Rule> = const { Cell::new(Rule::Internal) };
    /// Why the authorizer last refused a statement on this thread.
    static DENIED: RefCell<Option<String>> = const { RefCell::new(None) };
    /// A VACUUM is stepping on this thread: what is prepared now is SQLite's own.
    static IN_VACUUM: Cell<bool> = const { Cell::new(false) };
    /// A VACUUM ran on this thread since `take_vacuum_ran` last looked.
    static VACUUM_RAN: Cell<bool> = const { Cell::new(false) };
}

/// Steps a VACUUM statement (`f`), already prepared under the caller's rule: the transaction
/// control SQLite prepares for it meanwhile passes.
pub(crate) fn running_vacuum<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = IN_VACUUM.try_with(|v| v.set(self.0));
        }
    }
    let _restore = Restore(IN_VACUUM.with(|v| v.replace(true)));
    let _ = VACUUM_RAN.try_with(|v| v.set(true));
    f()
}

/// Whether a VACUUM ran (or was tried) on this thread since the last call. VACUUM rewrites
/// every table (a table without an INTEGER PRIMARY KEY gets new rowids) and commits without
/// SQLite's commit hook: the writer learns of it here, and looks at the schema's version.
pub(crate) fn take_vacuum_ran() -> bool {
    VACUUM_RAN.try_with(|v| v.replace(false)).unwrap_or(false)
}

/// A VACUUM is stepping on this thread (for the preupdate hook, which runs inside it).
pub(crate) fn vacuum_running() -> bool {
    IN_VACUUM.try_with(Cell::get).unwrap_or(false)
}

/// True when `sql` (one statement) is a VACUUM: its first word, after blanks and comments.
pub(crate) fn is_vacuum(sql: &str) -> bool {
    let s = crate::query::skip_blank(sql.as_bytes());
    s.get(..6).is_some_and(|w| w.eq_ignore_ascii_case(b"vacuum"))
        && s.get(6).is_none_or(|&c| !(c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80))
}

/// `locking_mode` and `journal_mode` set on the main database (or on every database, which
/// is what they do without a schema). The modes in use (NORMAL, WAL) pass: setting them
/// changes nothing.
fn changes_main_mode(name: &str, value: Option<&str>, schema: Option<&str>) -> bool {
    let Some(value) = value else { return false };
    if schema.is_some_and(|s| !s.eq_ignore_ascii_case("main")) {
        return false;
    }
    let value = value.trim_matches(|c| c == '\'' || c == '"');
    (name.eq_ignore_ascii_case("locking_mode") && !value.eq_ignore_ascii_case("normal"))
        || (name.eq_ignore_ascii_case("journal_mode") && !value.eq_ignore_ascii_case("wal"))
}

pub(crate) const MODE_PRAGMA_REFUSED: &str =
    "the locking and journal modes cannot be changed (PRAGMA locking_mode other than NORMAL, \
     PRAGMA journal_mode other than WAL): the reader connections share the database with the \
     writer through WAL in normal locking mode";

/// Also for the `pragmas` open option: true when `schema.name = value` would change a mode
/// the reader connections rely on.
pub(crate) fn is_mode_pragma(schema: Option<&str>, name: &str, value: &str) -> bool {
    changes_main_mode(name, Some(value), schema)
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

pub(crate) const KEY_PRAGMA_REFUSED: &str =
    "encryption keys cannot be set by pragma (key, rekey, hexkey, hexrekey): give the key with the \
     'encryptionKey' open option and change it with db.rekey()";

pub(crate) fn is_key_pragma(name: &str) -> bool {
    KEY_PRAGMAS.iter().any(|k| k.eq_ignore_ascii_case(name))
}

/// SQLite3 Multiple Ciphers' pragmas that choose the cipher or its parameters for the next
/// key or rekey. Refused like the key pragmas: set on the writer only, they made `rekey()`
/// encrypt the file with parameters no connection opened with `encryptionKey` and `cipher`
/// uses, so the file opened with neither key afterwards. `cipher` chooses them at open.
const CIPHER_PRAGMAS: &[&str] = &[
    "cipher",
    "legacy",
    "legacy_page_size",
    "kdf_iter",
    "fast_kdf_iter",
    "kdf_algorithm",
    "hmac_use",
    "hmac_pgno",
    "hmac_salt_mask",
    "hmac_algorithm",
    "hmac_algorithm_compat",
    "hmac_check",
    "plaintext_header_size",
    "algorithm",
    "tcost",
    "mcost",
    "pcost",
    "mc_legacy_wal",
];

pub(crate) const CIPHER_PRAGMA_REFUSED: &str =
    "cipher settings cannot be set by pragma (cipher, kdf_iter, legacy, hmac_*, ...): choose the \
     cipher with the 'cipher' open option; its parameters are the library's defaults";

/// Also every `cipher_*` pragma (the SQLCipher-compatible names: `cipher_page_size`,
/// `cipher_use_hmac`, `cipher_compatibility`, `cipher_salt`, ...).
pub(crate) fn is_cipher_pragma(name: &str) -> bool {
    CIPHER_PRAGMAS.iter().any(|k| k.eq_ignore_ascii_case(name))
        || name.get(..7).is_some_and(|p| p.eq_ignore_ascii_case("cipher_"))
}

/// SQLite3 Multiple Ciphers' SQL functions (`sqlite3mc_config`, `sqlite3mc_codec_data`, ...)
/// set the same parameters as its pragmas: refused for the same reason.
fn is_cipher_function(name: &str) -> bool {
    name.get(..10).is_some_and(|p| p.eq_ignore_ascii_case("sqlite3mc_"))
}

const CIPHER_FUNCTION_REFUSED: &str =
    "SQLite3 Multiple Ciphers' functions (sqlite3mc_config, ...) cannot be called: choose the \
     cipher with the 'cipher' open option; its parameters are the library's defaults";

/// The name under which a reader of a writable database is marked (SQLite's client data).
const CHECKS_LEFT_OUT: &CStr = c"quietsqlite.checks_left_out";

/// Marks `conn`, a read-only connection to a database the writer writes: SQLite leaves out
/// CHECK constraints when it reads the schema on a read-only connection, so an integrity
/// check there passes rows that break them, where the writer's finds them. A database opened
/// with `readonly` has no other connection to send the check to, and is not marked.
pub fn mark_checks_left_out(conn: &Connection) {
    // SAFETY: the handle is valid while `conn` lives; the name is a static NUL-terminated
    // string; the value is a non-null tag that nothing dereferences, so it needs no destructor.
    unsafe {
        ffi::sqlite3_set_clientdata(conn.handle(), CHECKS_LEFT_OUT.as_ptr(), CHECKS_LEFT_OUT_TAG, None);
    }
}

/// Whether `conn` was marked by `mark_checks_left_out`.
pub(crate) fn checks_left_out(conn: &Connection) -> bool {
    // SAFETY: the handle is valid while `conn` lives; the name is a static NUL-terminated string.
    unsafe { !ffi::sqlite3_get_clientdata(conn.handle(), CHECKS_LEFT_OUT.as_ptr()).is_null() }
}

/// The authorizer's context pointer for a connection marked by `mark_checks_left_out` (a tag
/// compared, never dereferenced); other connections' is null.
const CHECKS_LEFT_OUT_TAG: *mut c_void = std::ptr::dangling_mut::<u8>() as *mut c_void;

/// Installs the authorizer on `conn` (again, after something else replaced it).
pub fn install(conn: &Connection) {
    let ctx = if checks_left_out(conn) { CHECKS_LEFT_OUT_TAG } else { std::ptr::null_mut() };
    // SAFETY: the handle is valid while `conn` lives; the callback's state is thread-local
    // and its context pointer only a tag, so nothing it reads can dangle.
    unsafe {
        ffi::sqlite3_set_authorizer(conn.handle(), Some(authorize), ctx);
    }
}

pub(crate) const INTEGRITY_CHECK_ON_READER: &str =
    "PRAGMA integrity_check and quick_check cannot run on a reader: its connection is read-only, \
     and SQLite leaves out CHECK constraints there, so the check would pass rows that break them; \
     run it with execute()";

/// Runs `f` (which prepares and runs user SQL) under `rule`. A statement the rule refuses
/// fails to prepare; its error becomes a RangeError that says why.
pub fn under<T>(rule: Rule, f: impl FnOnce() -> Result<T>) -> Result<T> {
    /// Puts the rule back also when `f` panics: a panic caught further up (a request's
    /// `catch_unwind`) left the writer's thread under `Rule::Write`, which then refused its
    /// own BEGIN for the rest of the database's life.
    struct Restore(Rule);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = RULE.try_with(|r| r.set(self.0));
        }
    }
    let _ = DENIED.try_with(|d| d.borrow_mut().take());
    // Every statement of user SQL starts here: a function's failure left by an earlier one
    // is not this one's.
    crate::functions::forget_failures();
    let restore = Restore(RULE.with(|r| r.replace(rule)));
    let out = f();
    drop(restore);
    let denied = DENIED.try_with(|d| d.borrow_mut().take()).ok().flatten();
    match (out, denied) {
        (Err(_), Some(why)) => Err(Error::Range(why)),
        (out, _) => out,
    }
}

/// The verdict for one authorizer call; `None` allows it.
fn verdict(
    rule: Rule,
    action: c_int,
    arg1: Option<&str>,
    arg2: Option<&str>,
    schema: Option<&str>,
    checks_left_out: bool,
) -> Option<String> {
    if rule == Rule::Internal {
        return None;
    }
    match action {
        // The BEGIN a VACUUM runs for itself. Nothing else is exempt: whatever else is
        // prepared while it steps (the user's own statement again, if the schema changed; a
        // trigger VACUUM replays into its copy) is judged as always.
        ffi::SQLITE_TRANSACTION | ffi::SQLITE_SAVEPOINT if vacuum_running() => None,
        ffi::SQLITE_TRANSACTION | ffi::SQLITE_SAVEPOINT => Some(
            "transaction control (BEGIN, COMMIT, ROLLBACK, END, SAVEPOINT, RELEASE, ROLLBACK TO) \
             cannot be sent as SQL; use db.transaction() (nested calls make savepoints)"
                .into(),
        ),
        ffi::SQLITE_PRAGMA if arg1.is_some_and(is_key_pragma) => Some(KEY_PRAGMA_REFUSED.into()),
        ffi::SQLITE_PRAGMA if arg1.is_some_and(is_cipher_pragma) => Some(CIPHER_PRAGMA_REFUSED.into()),
        ffi::SQLITE_PRAGMA if changes_main_mode(arg1.unwrap_or(""), arg2, schema) => Some(MODE_PRAGMA_REFUSED.into()),
        ffi::SQLITE_FUNCTION if arg2.is_some_and(is_cipher_function) => Some(CIPHER_FUNCTION_REFUSED.into()),
        _ if rule == Rule::Write => None,
        ffi::SQLITE_ATTACH | ffi::SQLITE_DETACH => Some(
            "select() cannot ATTACH or DETACH: reads run on any of several connections; \
             use execute() or the open options"
                .into(),
        ),
        ffi::SQLITE_PRAGMA
            if checks_left_out
                && rule == Rule::Read
                && arg1.is_some_and(|n| n.eq_ignore_ascii_case("integrity_check") || n.eq_ignore_ascii_case("quick_check")) =>
        {
            Some(INTEGRITY_CHECK_ON_READER.into())
        }
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
/// `checks_left_out`: the connection was marked by `mark_checks_left_out`.
///
/// # Safety
/// `arg1`, `arg2` and `schema` are NULL or NUL-terminated strings valid for the call, as
/// SQLite passes them.
pub(crate) unsafe fn answer(
    rule: Rule,
    action: c_int,
    arg1: *const c_char,
    arg2: *const c_char,
    schema: *const c_char,
    checks_left_out: bool,
) -> c_int {
    // SAFETY: forwarded from the caller's contract.
    let (a1, a2, db) = (text(arg1), text(arg2), text(schema));
    match verdict(rule, action, a1, a2, db, checks_left_out) {
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
    ctx: *mut c_void,
    action: c_int,
    arg1: *const c_char,
    arg2: *const c_char,
    schema: *const c_char,
    _trigger: *const c_char,
) -> c_int {
    // Called from C: nothing here may unwind (try_with, no indexing, no unwrap).
    let Ok(rule) = RULE.try_with(Cell::get) else { return ffi::SQLITE_OK };
    if rule == Rule::Internal {
        return ffi::SQLITE_OK;
    }
    // SAFETY: SQLite passes NUL-terminated strings (or NULL) valid for this call.
    answer(rule, action, arg1, arg2, schema, ctx == CHECKS_LEFT_OUT_TAG)
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
    fn a_panic_under_a_rule_puts_the_rule_back() {
        let c = conn();
        let caught = std::panic::catch_unwind(|| under(Rule::Write, || -> Result<()> { panic!("in a request") }));
        assert!(caught.is_err());
        assert_eq!(RULE.with(Cell::get), Rule::Internal);
        // The connection's own transaction control passes again.
        c.execute_batch("BEGIN; COMMIT").unwrap();
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
    fn a_reader_of_a_writable_database_refuses_integrity_checks() {
        let c = conn();
        let checks = ["PRAGMA integrity_check", "PRAGMA main.quick_check(5)", "PRAGMA integrity_check(t)"];
        for sql in checks {
            assert!(prepare(&c, Rule::Read, sql).is_ok(), "unmarked: {sql}");
        }
        mark_checks_left_out(&c);
        assert!(checks_left_out(&c));
        // Marked after install: the authorizer learns of it when installed again (as at open).
        install(&c);
        for sql in checks {
            match prepare(&c, Rule::Read, sql) {
                Err(Error::Range(m)) => assert_eq!(m, INTEGRITY_CHECK_ON_READER, "{sql}"),
                other => panic!("{sql}: {other:?}"),
            }
        }
        // Described only (a prepared statement's columns): nothing runs, nothing to refuse.
        for sql in checks {
            assert!(prepare(&c, Rule::Describe, sql).is_ok(), "described: {sql}");
        }
        assert!(matches!(prepare(&c, Rule::Describe, "PRAGMA cache_size = 10"), Err(Error::Range(_))));
        // The table-valued form prepares the pragma as it runs.
        let stepped = under(Rule::Read, || {
            let mut s = c.prepare("SELECT * FROM pragma_quick_check")?;
            let mut rows = s.raw_query();
            rows.next().map(|_| ()).map_err(Error::from)
        });
        assert!(matches!(stepped, Err(Error::Range(ref m)) if m == INTEGRITY_CHECK_ON_READER), "{stepped:?}");
        assert!(prepare(&c, Rule::Read, "PRAGMA table_info(t)").is_ok());
    }

    #[test]
    fn the_modes_the_readers_rely_on_stay() {
        let c = conn();
        c.execute_batch("ATTACH ':memory:' AS aux").unwrap();
        for sql in [
            "PRAGMA locking_mode = EXCLUSIVE",
            "PRAGMA main.locking_mode = exclusive",
            "PRAGMA journal_mode = DELETE",
            "PRAGMA MAIN.journal_mode = 'off'",
            "PRAGMA journal_mode = memory",
        ] {
            for rule in [Rule::Write, Rule::Read] {
                match prepare(&c, rule, sql) {
                    Err(Error::Range(m)) => assert!(m.contains("locking and journal modes"), "{sql} {rule:?}: {m}"),
                    other => panic!("{sql} {rule:?}: {other:?}"),
                }
            }
        }
        for sql in ["PRAGMA locking_mode", "PRAGMA journal_mode", "PRAGMA journal_mode = WAL", "PRAGMA locking_mode = 'normal'", "PRAGMA aux.journal_mode = DELETE"] {
            assert!(prepare(&c, Rule::Write, sql).is_ok(), "{sql}");
        }
        assert!(is_mode_pragma(None, "locking_mode", "EXCLUSIVE"));
        assert!(is_mode_pragma(Some("main"), "journal_mode", "'delete'"));
        assert!(!is_mode_pragma(None, "journal_mode", "'WAL'"));
        assert!(!is_mode_pragma(None, "cache_size", "10"));
    }

    #[test]
    fn vacuum_is_told_by_its_first_word() {
        for sql in ["VACUUM", "  vacuum;", "/* x */ -- y\n Vacuum main", "VACUUM INTO 'a.db'", "vacuum\tinto ?"] {
            assert!(is_vacuum(sql), "{sql}");
        }
        for sql in ["SELECT 1", "vacuumx", "vacuum_db", "EXPLAIN VACUUM", "-- VACUUM\nSELECT 1", "VACUU"] {
            assert!(!is_vacuum(sql), "{sql}");
        }
    }

    #[test]
    fn a_vacuum_runs_its_own_statements_and_only_while_it_steps() {
        let c = conn();
        let mut stmt = under(Rule::Write, || c.prepare("VACUUM").map_err(Error::from)).unwrap();
        // Without the exemption, SQLite's own BEGIN inside the VACUUM is refused.
        let refused = under(Rule::Write, || stmt.raw_execute().map_err(Error::from));
        assert!(matches!(refused, Err(Error::Range(_))), "{refused:?}");
        under(Rule::Write, || running_vacuum(|| stmt.raw_execute().map_err(Error::from))).unwrap();
        assert!(matches!(prepare(&c, Rule::Write, "BEGIN"), Err(Error::Range(_))));
        // Only transaction control: the other rules hold while a VACUUM steps.
        for sql in ["PRAGMA key = 'x'", "PRAGMA kdf_iter = 1", "PRAGMA locking_mode = EXCLUSIVE", "SELECT sqlite3mc_config('cipher')"] {
            let refused = under(Rule::Write, || running_vacuum(|| c.prepare(sql).map(drop).map_err(Error::from)));
            assert!(matches!(refused, Err(Error::Range(_))), "{sql}: {refused:?}");
        }
    }
}
