//! A connection that serves reads, with its own cache of raw statements (`raw_statement`)
//! beside rusqlite's: readers, the inline connection and the writer's `tx.select` read
//! through it (experiment 030).

use crate::error::Result;
use crate::raw_statement::RawStatement;
use rusqlite::Connection;
use std::cell::RefCell;
use std::collections::HashMap;

pub struct ReadConnection {
    // Declared before `conn`: every statement is finalized before the connection closes.
    // SQLite refuses to close a connection with statements left, and rusqlite's drop then
    // ignores the failure: the connection, its file and its locks would stay open.
    statements: RefCell<StatementCache>,
    conn: Connection,
}

// SAFETY: the statements belong to `conn` and move with it; rusqlite's `Connection` is
// `Send` (opened without SQLite's mutex, used by one thread at a time), and the `RefCell`
// keeps this type `!Sync`, so the statements are never used from two threads at once.
unsafe impl Send for ReadConnection {}

impl ReadConnection {
    /// Keeps up to `capacity` statements (`OpenOptions::statement_cache`; 0 keeps none).
    pub fn new(conn: Connection, capacity: usize) -> Self {
        ReadConnection { statements: RefCell::new(StatementCache::new(capacity)), conn }
    }

    /// The statement for `sql`, from the cache or prepared now by `prepare`. It is out of the
    /// cache while the returned guard lives (a nested read of the same text prepares its own)
    /// and goes back, reset, when the guard drops.
    pub(crate) fn statement(
        &self,
        sql: &str,
        prepare: impl FnOnce(&Connection) -> Result<RawStatement>,
    ) -> Result<CachedRawStatement<'_>> {
        let cached = self.statements.borrow_mut().take(sql);
        let (key, stmt) = match cached {
            Some(hit) => hit,
            None => (sql.to_owned(), prepare(&self.conn)?),
        };
        Ok(CachedRawStatement { owner: self, lent: Some((key, stmt)) })
    }

    /// Statements held now (tests).
    pub fn cached_statements(&self) -> usize {
        self.statements.borrow().entries.len()
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
    owner: &'c ReadConnection,
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

impl Drop for CachedRawStatement<'_> {
    fn drop(&mut self) {
        if let Some((key, mut stmt)) = self.lent.take() {
            stmt.reset();
            // A cache borrowed elsewhere (cannot happen: borrows end within `statement`)
            // would only cost this statement.
            if let Ok(mut cache) = self.owner.statements.try_borrow_mut() {
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
