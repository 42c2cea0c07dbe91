//! `db.diagnostics()`: counts the database keeps in atomics (taken on the caller's thread
//! when asked) and the file's numbers, measured by a reader (queued like a read: it never
//! waits for the writer, and sees the last committed state).

use crate::error::{Error, Result};
use rusqlite::{ffi, Connection};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diagnostics {
    pub sqlite_version: String,
    pub readers: u32,
    /// Readers running something (a read, an iterator, a live-query re-run) when asked.
    pub readers_busy: u32,
    /// Reads and reader tasks waiting for a reader when asked.
    pub queued_reads: u32,
    /// Requests waiting for the writer when asked.
    pub queued_writes: u32,
    pub page_size: i64,
    pub page_count: i64,
    pub freelist_count: i64,
    /// Size of the `-wal` file (0 when there is none).
    pub wal_bytes: u64,
    /// Of the reader connection that measured (every connection has its own).
    pub cache_bytes: i64,
    pub statement_bytes: i64,
    pub schema_bytes: i64,
    pub live_groups: u32,
    pub live_subscribers: u32,
    pub live_reruns: u64,
    pub live_skipped_by_hash: u64,
    /// Reads answered inline, and reads that went over the inline budget (`inlineReads`).
    pub inline_reads: u64,
    pub inline_fallbacks: u64,
}

/// `sqlite3_db_status` current value of `op` on `conn`.
fn db_status(conn: &Connection, op: i32) -> Result<i64> {
    let (mut cur, mut high) = (0, 0);
    // SAFETY: the handle is valid while `conn` is borrowed and used on this thread only (the
    // connection's own reader thread); the out-pointers are valid locals.
    let rc = unsafe { ffi::sqlite3_db_status(conn.handle(), op, &mut cur, &mut high, 0) };
    if rc != ffi::SQLITE_OK {
        return Err(Error::sqlite(rc, "sqlite3_db_status failed"));
    }
    Ok(i64::from(cur))
}

/// Completes `base` (the counts) with the file's and this connection's numbers.
pub(crate) fn measure(conn: &Connection, mut base: Diagnostics) -> Result<Diagnostics> {
    let pragma = |name: &str| -> Result<i64> { Ok(conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))?) };
    base.sqlite_version = rusqlite::version().to_owned();
    base.page_size = pragma("page_size")?;
    base.page_count = pragma("page_count")?;
    base.freelist_count = pragma("freelist_count")?;
    base.wal_bytes = conn
        .path()
        .filter(|p| !p.is_empty())
        .and_then(|p| std::fs::metadata(format!("{p}-wal")).ok())
        .map_or(0, |m| m.len());
    base.cache_bytes = db_status(conn, ffi::SQLITE_DBSTATUS_CACHE_USED)?;
    base.statement_bytes = db_status(conn, ffi::SQLITE_DBSTATUS_STMT_USED)?;
    base.schema_bytes = db_status(conn, ffi::SQLITE_DBSTATUS_SCHEMA_USED)?;
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_connection() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("d.db")).unwrap();
        conn.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1)").unwrap();
        let d = measure(&conn, Diagnostics::default()).unwrap();
        assert!(d.page_count >= 2 && d.page_size > 0, "{d:?}");
        assert!(d.wal_bytes > 0 && d.schema_bytes > 0 && d.cache_bytes > 0, "{d:?}");
        assert!(d.sqlite_version.starts_with('3'));
    }
}
