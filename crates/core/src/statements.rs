//! Prepared statements: a registry that maps a statement id to its SQL text, so a front end
//! sends the text across its boundary once and a small integer on every call after. Each
//! connection keeps the compiled `sqlite3_stmt` for that text in its own statement caches
//! (the raw caches of `read_connection` for reads and `execute`, rusqlite's for the rest),
//! and SQLite re-prepares it by itself after a schema change.
//!
//! `describe` reports what a statement is (read-only or not, its columns and their declared
//! types) without running it.

use crate::error::{Error, Result};
use crate::raw_statement::RawStatement;
use rusqlite::{ffi, Connection};
use std::ffi::CStr;
use std::sync::{Arc, Mutex, MutexGuard};

/// The SQL text of a request: a copy of its own, or a registered statement's text, shared
/// with the registry (no copy made on the JS thread, none freed on the reader's).
#[derive(Debug, Clone)]
pub enum SqlText {
    Own(String),
    Registered(Arc<str>),
}

impl SqlText {
    pub fn into_string(self) -> String {
        match self {
            SqlText::Own(s) => s,
            SqlText::Registered(s) => s.to_string(),
        }
    }
}

impl std::ops::Deref for SqlText {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            SqlText::Own(s) => s,
            SqlText::Registered(s) => s,
        }
    }
}

impl From<String> for SqlText {
    fn from(s: String) -> SqlText {
        SqlText::Own(s)
    }
}

impl From<&str> for SqlText {
    fn from(s: &str) -> SqlText {
        SqlText::Own(s.to_string())
    }
}

/// Statement ids to SQL. Shared by the threads of one front end; a lookup is one index into
/// a slot table under an uncontended lock (no hashing: it is on every call's path).
#[derive(Default)]
pub struct Statements {
    inner: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    /// Slot `id - 1` holds statement `id`.
    slots: Vec<Option<Arc<str>>>,
    /// Empty slots, reused before the table grows.
    free: Vec<u32>,
    count: usize,
}

/// More open statements than any program needs; past it `register` refuses.
const MAX_STATEMENTS: usize = 1 << 24;

impl Statements {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        // A panic while holding the lock leaves a plain table behind, still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `sql` and returns its id (never 0). The text is checked when first used,
    /// exactly as the same text given directly would be.
    pub fn register(&self, sql: String) -> Result<u32> {
        let mut r = self.lock();
        let sql: Arc<str> = Arc::from(sql);
        let id = match r.free.pop() {
            Some(id) => {
                r.slots[id as usize - 1] = Some(sql);
                id
            }
            None => {
                if r.slots.len() >= MAX_STATEMENTS {
                    return Err(Error::Range(format!("more than {MAX_STATEMENTS} prepared statements are open")));
                }
                r.slots.push(Some(sql));
                r.slots.len() as u32
            }
        };
        r.count += 1;
        Ok(id)
    }

    /// The SQL of statement `id`; a closed error once it was released.
    pub fn sql(&self, id: u32) -> Result<Arc<str>> {
        let r = self.lock();
        let slot = (id as usize).checked_sub(1).and_then(|i| r.slots.get(i));
        slot.and_then(Clone::clone).ok_or_else(|| Error::Closed("the statement is closed".into()))
    }

    /// Forgets statement `id`; false if it was not registered.
    pub fn release(&self, id: u32) -> bool {
        let mut r = self.lock();
        let Some(slot) = (id as usize).checked_sub(1).and_then(|i| r.slots.get_mut(i)) else { return false };
        if slot.take().is_none() {
            return false;
        }
        r.free.push(id);
        r.count -= 1;
        true
    }

    /// How many statements are registered.
    pub fn count(&self) -> usize {
        self.lock().count
    }
}

/// What a statement is, found by preparing it (never stepping it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    /// `sqlite3_stmt_readonly` of the statement; false for text holding several statements.
    pub readonly: bool,
    /// Result columns of the (first) statement: name and declared type (None for an
    /// expression).
    pub columns: Vec<(String, Option<String>)>,
}

/// Prepares the first statement of `sql` outside the statement cache (a cached statement
/// would skip the authorizer on later runs) and describes it. Reports the prepare error the
/// same text reports when it runs, with the SQL attached.
pub fn describe(conn: &Connection, sql: &str) -> Result<Description> {
    crate::query::require_statement(sql)?;
    if !inside_transaction_without_snapshot(conn) {
        refresh_schema(conn, sql)?;
    }
    let raw = RawStatement::prepare(conn, sql).map_err(|e| e.with_sql(sql))?;
    let stmt = raw.handle();
    if stmt.is_null() {
        return Err(Error::Range("the SQL text holds no statement".into()));
    }
    let several = !crate::query::is_blank_sql(&sql.as_bytes()[raw.tail..]);
    // SAFETY: `stmt` is a live statement owned by `raw` (finalized when it drops, after
    // this block), used on this thread only; the strings SQLite returns are NUL-terminated
    // and copied before the next call on the statement.
    let (readonly, columns) = unsafe {
        let readonly = ffi::sqlite3_stmt_readonly(stmt) != 0;
        let n = ffi::sqlite3_column_count(stmt).max(0);
        let mut columns = Vec::with_capacity(n as usize);
        for i in 0..n {
            let name = ffi::sqlite3_column_name(stmt, i);
            if name.is_null() {
                return Err(Error::sqlite(ffi::SQLITE_NOMEM, "out of memory while naming a column"));
            }
            let name = CStr::from_ptr(name).to_string_lossy().into_owned();
            let decl = ffi::sqlite3_column_decltype(stmt, i);
            let decl = (!decl.is_null()).then(|| CStr::from_ptr(decl).to_string_lossy().into_owned());
            columns.push((name, decl));
        }
        (readonly, columns)
    };
    Ok(Description { readonly: readonly && !several, columns })
}

/// A connection learns of a schema change another connection made when a statement of its
/// own runs (its read transaction compares the schema cookie and reloads the schema); a
/// prepare that succeeds does not look. So a reader that ran nothing since an `ALTER TABLE` on
/// the writer would describe the old columns. Reading `sqlite_schema` makes the comparison
/// (without a result row), so what `describe` prepares next sees the schema as of now.
/// In a `DEFERRED` transaction that has not read yet, reading `sqlite_schema` would start its
/// snapshot here instead of at its first statement: the write that follows would then fail
/// with `SQLITE_BUSY` (or `SQLITE_BUSY_SNAPSHOT`) where, begun by itself, it waits for the
/// busy timeout and succeeds. The description is then made against the schema the connection
/// last saw; the statement itself is checked against the current one when it runs. Once the
/// transaction holds a snapshot, its schema is the snapshot's, and the read costs nothing.
fn inside_transaction_without_snapshot(conn: &Connection) -> bool {
    !conn.is_autocommit() && matches!(conn.transaction_state(Some(rusqlite::MAIN_DB)), Ok(rusqlite::TransactionState::None))
}

/// A failure (a wrong key, I/O, a file that is not a database) is reported with `sql`, the
/// caller's text: that is what failed, and the check's own text would mean nothing to them.
pub(crate) fn refresh_schema(conn: &Connection, sql: &str) -> Result<()> {
    const CHECK: &str = "SELECT 1 FROM sqlite_schema LIMIT 0";
    let run = || -> rusqlite::Result<()> {
        let mut stmt = conn.prepare(CHECK)?;
        let mut rows = stmt.query([])?;
        rows.next()?;
        Ok(())
    };
    run().map_err(|e| Error::from(e).with_sql(sql))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_released_ids_fail_as_closed() {
        let s = Statements::default();
        let a = s.register("SELECT 1".into()).unwrap();
        let b = s.register("SELECT 2".into()).unwrap();
        assert_ne!(a, b);
        assert_ne!(a, 0);
        assert_eq!(&*s.sql(b).unwrap(), "SELECT 2");
        assert_eq!(s.count(), 2);
        assert!(s.release(a));
        assert!(!s.release(a));
        assert!(matches!(s.sql(a), Err(Error::Closed(_))));
        assert!(matches!(s.sql(0), Err(Error::Closed(_))));
        assert!(matches!(s.sql(u32::MAX), Err(Error::Closed(_))));
        assert!(!s.release(0) && !s.release(u32::MAX));
        assert_eq!(s.count(), 1);
        // A released slot is reused; the live statement keeps its text.
        let c = s.register("SELECT 3".into()).unwrap();
        assert_eq!(c, a);
        assert_eq!(&*s.sql(c).unwrap(), "SELECT 3");
        assert_eq!(&*s.sql(b).unwrap(), "SELECT 2");
    }

    #[test]
    fn describes_without_running() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(a INTEGER, b TEXT)").unwrap();
        let d = describe(&conn, "SELECT a, b AS bee, a + 1 AS c FROM t").unwrap();
        assert!(d.readonly);
        let want = vec![
            ("a".to_string(), Some("INTEGER".to_string())),
            ("bee".to_string(), Some("TEXT".to_string())),
            ("c".to_string(), None),
        ];
        assert_eq!(d.columns, want);
        let d = describe(&conn, "INSERT INTO t(a) VALUES (?) RETURNING a").unwrap();
        assert!(!d.readonly);
        assert_eq!(d.columns.len(), 1);
        let n: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0, "describe never steps");
        assert!(!describe(&conn, "SELECT 1; SELECT 2").unwrap().readonly);
        match describe(&conn, "SELECT * FROM missing") {
            Err(Error::Sqlite { sql: Some(_), message, .. }) => assert!(message.contains("missing")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(describe(&conn, " -- nothing"), Err(Error::Range(_))));
    }

    #[test]
    fn describes_the_schema_another_connection_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.db");
        let writer = Connection::open(&path).unwrap();
        writer.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t(a)").unwrap();
        let reader = Connection::open(&path).unwrap();
        let names = |d: Description| d.columns.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(names(describe(&reader, "SELECT * FROM t").unwrap()), ["a"]);
        // The reader runs nothing between the change and the next description.
        writer.execute_batch("ALTER TABLE t ADD COLUMN b TEXT").unwrap();
        assert_eq!(names(describe(&reader, "SELECT * FROM t").unwrap()), ["a", "b"]);
        writer.execute_batch("DROP TABLE t; CREATE TABLE t(c, d, e)").unwrap();
        assert_eq!(names(describe(&reader, "SELECT * FROM t").unwrap()), ["c", "d", "e"]);
    }

    #[test]
    fn describing_in_a_deferred_transaction_leaves_its_snapshot_unstarted() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(a); BEGIN DEFERRED").unwrap();
        describe(&conn, "INSERT INTO t VALUES (1)").unwrap();
        assert_eq!(conn.transaction_state(Some(rusqlite::MAIN_DB)).unwrap(), rusqlite::TransactionState::None);
        conn.execute_batch("SELECT * FROM t").unwrap();
        assert_eq!(conn.transaction_state(Some(rusqlite::MAIN_DB)).unwrap(), rusqlite::TransactionState::Read);
        conn.execute_batch("ROLLBACK").unwrap();
    }

    #[test]
    fn a_failed_schema_read_names_the_callers_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not-a-database.db");
        std::fs::write(&path, vec![0x5a; 8192]).unwrap();
        let conn = Connection::open(&path).unwrap();
        match describe(&conn, "SELECT 42") {
            Err(Error::Sqlite { code, sql, .. }) => {
                assert_eq!(code, ffi::SQLITE_NOTADB);
                assert_eq!(sql.as_deref(), Some("SELECT 42"));
            }
            other => panic!("{other:?}"),
        }
    }
}
