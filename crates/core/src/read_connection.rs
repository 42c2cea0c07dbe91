//! A connection that serves reads, with its own cache of raw statements (`raw_statement`)
//! beside rusqlite's: readers, the inline connection and the writer's `tx.select` read
//! through it (experiment 030). On the writer, `execute` takes its statements from a second
//! cache of the same kind (experiment 097): a statement is only ever run under the rule it
//! was prepared under (`statement_rules`), so reads and writes of one text do not share one.

use crate::error::{Error, Result};
use crate::raw_statement::RawStatement;
use rusqlite::Connection;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// The statement that holds a snapshot: it reads the database header and stops at its one
/// row, so its read transaction stays open until it is reset.
const SNAPSHOT_SQL: &str = "PRAGMA schema_version";

pub struct ReadConnection {
    // Declared before `conn`: every statement is finalized before the connection closes.
    // SQLite refuses to close a connection with statements left, and rusqlite's drop then
    // ignores the failure: the connection, its file and its locks would stay open.
    statements: RefCell<StatementCache>,
    /// `execute`'s statements (the writer's only).
    writes: RefCell<StatementCache>,
    /// Prepared on the first `hold_snapshot`; stepped (not reset) while a snapshot is held.
    snapshot: RefCell<Option<RawStatement>>,
    holding: Cell<bool>,
    /// Why this connection must not serve anything (see `refuse`): its code and message.
    refused: Option<(i32, String)>,
    conn: Connection,
}

// SAFETY: the statements (cached, and the snapshot's) belong to `conn` and move with it;
// rusqlite's `Connection` is `Send` (opened without SQLite's mutex, used by one thread at a
// time), and the `RefCell`s keep this type `!Sync`, so the statements are never used from
// two threads at once.
unsafe impl Send for ReadConnection {}

impl ReadConnection {
    /// Keeps up to `capacity` statements (`OpenOptions::statement_cache`; 0 keeps none).
    pub fn new(conn: Connection, capacity: usize) -> Self {
        ReadConnection {
            statements: RefCell::new(StatementCache::new(capacity)),
            writes: RefCell::new(StatementCache::new(capacity)),
            snapshot: RefCell::new(None),
            holding: Cell::new(false),
            refused: None,
            conn,
        }
    }

    /// Marks this connection as one that must serve nothing: a reader that could not reopen
    /// after a rekey holds either the empty stand-in it closed into or its connection with
    /// the old key, and reads from either would succeed on the wrong database (no tables, a
    /// backup of an empty file). Every caller checks `check_usable` first.
    pub(crate) fn refuse(&mut self, why: &Error) {
        let (code, detail) = why.code_and_message(rusqlite::ffi::SQLITE_CANTOPEN);
        self.refused = Some((
            code,
            format!("this reader connection could not reopen the database after rekey() ({detail}); close and reopen the database"),
        ));
    }

    /// Fails when this connection was refused (`refuse`).
    pub(crate) fn check_usable(&self) -> Result<()> {
        match &self.refused {
            None => Ok(()),
            Some((code, message)) => Err(Error::sqlite(*code, message.clone())),
        }
    }

    /// Opens a read transaction that outlasts the statements run in it: until
    /// `release_snapshot`, every read sees the database as it was at this call, and pays for
    /// no transaction of its own (a lock and an unlock of the shared-memory file, and the
    /// file's size, each a system call; experiment 050). SQLite keeps an implicit read
    /// transaction while any statement of the connection is active, so one statement stopped
    /// at its row holds it. False when no snapshot could be taken: the caller's reads then
    /// run as they would without one, and meet the same failure themselves if it lasts.
    pub(crate) fn hold_snapshot(&self) -> bool {
        if self.holding.get() {
            return true;
        }
        let mut slot = self.snapshot.borrow_mut();
        if slot.is_none() {
            match RawStatement::prepare_persistent(&self.conn, SNAPSHOT_SQL) {
                Ok(stmt) => *slot = Some(stmt),
                Err(_) => return false,
            }
        }
        let Some(stmt) = slot.as_mut() else { return false };
        match stmt.step() {
            Ok(true) => {
                self.holding.set(true);
                true
            }
            _ => {
                stmt.reset();
                false
            }
        }
    }

    /// Ends the transaction `hold_snapshot` opened (once no other statement is active).
    pub(crate) fn release_snapshot(&self) {
        if self.holding.replace(false) {
            if let Some(stmt) = self.snapshot.borrow_mut().as_mut() {
                stmt.reset();
            }
        }
    }

    /// True between a successful `hold_snapshot` and `release_snapshot`.
    pub(crate) fn holds_snapshot(&self) -> bool {
        self.holding.get()
    }

    /// The statement for `sql`, from the cache or prepared now by `prepare`. It is out of the
    /// cache while the returned guard lives (a nested read of the same text prepares its own)
    /// and goes back, reset, when the guard drops.
    pub(crate) fn statement(
        &self,
        sql: &str,
        prepare: impl FnOnce(&Connection) -> Result<RawStatement>,
    ) -> Result<CachedRawStatement<'_>> {
        self.lend(&self.statements, sql, prepare)
    }

    /// `statement` for `execute`, from the cache of writes.
    pub(crate) fn write_statement(
        &self,
        sql: &str,
        prepare: impl FnOnce(&Connection) -> Result<RawStatement>,
    ) -> Result<CachedRawStatement<'_>> {
        self.lend(&self.writes, sql, prepare)
    }

    fn lend<'c>(
        &'c self,
        cache: &'c RefCell<StatementCache>,
        sql: &str,
        prepare: impl FnOnce(&Connection) -> Result<RawStatement>,
    ) -> Result<CachedRawStatement<'c>> {
        let cached = cache.borrow_mut().take(sql);
        let (key, stmt) = match cached {
            Some(hit) => hit,
            None => (sql.to_owned(), prepare(&self.conn)?),
        };
        Ok(CachedRawStatement { cache, lent: Some((key, stmt)) })
    }

    /// Statements held now, reads' and writes' (tests).
    pub fn cached_statements(&self) -> usize {
        self.statements.borrow().entries.len() + self.writes.borrow().entries.len()
    }
}

impl std::ops::Deref for ReadConnection {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.conn
    }
}

/// A statement lent by the cache; reset and returned on drop (also on error and unwind).
pub(crate) struct CachedRawStatement<'c> {
    /// The cache it goes back to.
    cache: &'c RefCell<StatementCache>,
    /// The SQL text it is cached under, and the statement; `None` only once dropped.
    lent: Option<(String, RawStatement)>,
}

impl std::ops::Deref for CachedRawStatement<'_> {
    type Target = RawStatement;
    fn deref(&self) -> &RawStatement {
        &self.lent.as_ref().expect("statement present until drop").1
    }
}

impl std::ops::DerefMut for CachedRawStatement<'_> {
    fn deref_mut(&mut self) -> &mut RawStatement {
        &mut self.lent.as_mut().expect("statement present until drop").1
    }
}

impl CachedRawStatement<'_> {
    /// Finalizes the statement instead of giving it back to the cache.
    pub(crate) fn discard(mut self) {
        self.lent = None;
    }
}

impl Drop for CachedRawStatement<'_> {
    fn drop(&mut self) {
        if let Some((key, mut stmt)) = self.lent.take() {
            stmt.reset();
            // A cache borrowed elsewhere (cannot happen: borrows end within `lend`)
            // would only cost this statement.
            if let Ok(mut cache) = self.cache.try_borrow_mut() {
                cache.put(key, stmt);
            }
        }
    }
}

/// Least recently used statements, by SQL text.
struct StatementCache {
    capacity: usize,
    entries: HashMap<String, (RawStatement, u64)>,
    clock: u64,
}

impl StatementCache {
    fn new(capacity: usize) -> Self {
        StatementCache { capacity, entries: HashMap::new(), clock: 0 }
    }

    fn take(&mut self, sql: &str) -> Option<(String, RawStatement)> {
        self.entries.remove_entry(sql).map(|(k, (s, _))| (k, s))
    }

    fn put(&mut self, key: String, stmt: RawStatement) {
        if self.capacity == 0 {
            return;
        }
        self.clock += 1;
        self.entries.insert(key, (stmt, self.clock));
        if self.entries.len() > self.capacity {
            // Only after a miss; a scan of at most `capacity` entries.
            let oldest = self.entries.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.entries.remove(&k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(capacity: usize) -> ReadConnection {
        ReadConnection::new(Connection::open_in_memory().unwrap(), capacity)
    }

    fn use_once(c: &ReadConnection, sql: &str) {
        let mut s = c.statement(sql, |conn| RawStatement::prepare_persistent(conn, sql)).unwrap();
        assert!(s.step().unwrap());
    }

    /// A file in WAL mode with one row in `t`: a writer, and a read-only connection that
    /// `prepare` may set up before it becomes a `ReadConnection`.
    fn wal_pair(dir: &std::path::Path, prepare: impl FnOnce(&mut Connection)) -> (Connection, ReadConnection) {
        let path = dir.join("s.db");
        let writer = Connection::open(&path).unwrap();
        writer.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1)").unwrap();
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(&path, flags).unwrap();
        prepare(&mut conn);
        (writer, ReadConnection::new(conn, 8))
    }

    fn count(c: &ReadConnection) -> Result<i64> {
        let sql = "SELECT count(*) FROM t";
        let mut s = c.statement(sql, |conn| RawStatement::prepare_persistent(conn, sql))?;
        s.step()?;
        match crate::raw_statement::ColumnValues::value(&*s, 0)? {
            rusqlite::types::ValueRef::Integer(n) => Ok(n),
            other => panic!("count(*) gave {other:?}"),
        }
    }

    #[test]
    fn statements_are_reused_and_the_least_recently_used_goes_first() {
        let c = reads(2);
        let prepared = std::cell::Cell::new(0);
        let get = |sql: &str| {
            drop(c.statement(sql, |conn| {
                prepared.set(prepared.get() + 1);
                RawStatement::prepare(conn, sql)
            }));
        };
        get("SELECT 1");
        get("SELECT 2");
        get("SELECT 1");
        assert_eq!(prepared.get(), 2);
        get("SELECT 3"); // evicts SELECT 2, the least recently used
        assert_eq!(c.cached_statements(), 2);
        get("SELECT 1");
        assert_eq!(prepared.get(), 3);
        get("SELECT 2");
        assert_eq!(prepared.get(), 4);
    }

    #[test]
    fn a_lent_statement_is_reset_when_it_comes_back() {
        let c = reads(4);
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)").unwrap();
        let sql = "SELECT x FROM t ORDER BY x";
        {
            let mut s = c.statement(sql, |conn| RawStatement::prepare(conn, sql)).unwrap();
            assert!(s.step().unwrap());
            // A nested use of the same text while it is lent gets a statement of its own.
            use_once(&c, sql);
        }
        let mut s = c.statement(sql, |conn| RawStatement::prepare(conn, sql)).unwrap();
        assert!(s.step().unwrap());
        assert!(matches!(crate::raw_statement::ColumnValues::value(&*s, 0).unwrap(), rusqlite::types::ValueRef::Integer(1)));
    }

    #[test]
    fn a_held_snapshot_hides_later_commits_until_released_and_closes_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, reader) = wal_pair(dir.path(), |_| {});
        assert!(reader.hold_snapshot());
        assert!(reader.holds_snapshot());
        writer.execute("INSERT INTO t VALUES (2)", []).unwrap();
        assert_eq!(count(&reader).unwrap(), 1, "a read inside the snapshot does not see a later commit");
        assert_eq!(count(&reader).unwrap(), 1, "nor does the next one: a statement reset does not end it");
        reader.release_snapshot();
        assert!(!reader.holds_snapshot());
        assert_eq!(count(&reader).unwrap(), 2, "released: the next read sees the commit");
        // Dropped while holding one: the statement goes before the connection, which closes,
        // so the writer is the last connection and takes the -wal file with it.
        assert!(reader.hold_snapshot());
        drop(reader);
        let wal = dir.path().join("s.db-wal");
        assert!(wal.exists());
        drop(writer);
        assert!(!wal.exists(), "every connection closed");
    }

    #[test]
    fn a_read_interrupted_inside_a_snapshot_fails_alone_and_the_snapshot_stays() {
        // Cancellation interrupts through the progress handler: for a read-only statement
        // SQLite ends that statement only, not the transaction the snapshot holds.
        let dir = tempfile::tempdir().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = stop.clone();
        let (writer, reader) = wal_pair(dir.path(), |conn| {
            conn.progress_handler(100, Some(move || seen.load(std::sync::atomic::Ordering::Relaxed))).unwrap();
        });
        assert!(reader.hold_snapshot());
        writer.execute("INSERT INTO t VALUES (2)", []).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let runaway = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT count(*) FROM c";
        let e = {
            let mut s = reader.statement(runaway, |conn| RawStatement::prepare(conn, runaway)).unwrap();
            s.step().unwrap_err()
        };
        assert!(matches!(e, crate::error::Error::Sqlite { code: rusqlite::ffi::SQLITE_INTERRUPT, .. }), "{e:?}");
        stop.store(false, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.holds_snapshot());
        assert_eq!(count(&reader).unwrap(), 1, "the next read runs, in the same snapshot");
        reader.release_snapshot();
        assert_eq!(count(&reader).unwrap(), 2);
    }

    #[test]
    fn capacity_zero_keeps_nothing_and_closing_with_statements_cached_is_clean() {
        let c = reads(0);
        use_once(&c, "SELECT 1");
        assert_eq!(c.cached_statements(), 0);
        // A file in WAL mode: SQLite deletes the -wal file when the last connection closes,
        // and a statement left alive would keep the connection open (and the file there).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1)").unwrap();
        let c = ReadConnection::new(conn, 8);
        use_once(&c, "SELECT x FROM t");
        assert_eq!(c.cached_statements(), 1);
        let wal = dir.path().join("c.db-wal");
        assert!(wal.exists());
        drop(c);
        assert!(!wal.exists(), "the connection closed");
    }
}
