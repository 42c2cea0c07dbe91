//! Change tracking on the writer connection: SQLite's preupdate hook records which tables
//! and columns a transaction changed, the commit hook marks the moment it becomes visible,
//! and the rollback hook drops what a failed transaction recorded. The WAL hook counts
//! pages so checkpoints can run when the writer is idle.

use rusqlite::ffi;
use rusqlite::Connection;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What one committed transaction changed in one table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableChange {
    /// An INSERT or DELETE happened (or a rowid changed): every reader of the table is affected.
    pub whole_rows: bool,
    /// Columns (by index in the table) an UPDATE really changed, as a bit set.
    pub columns: Vec<u64>,
}

impl TableChange {
    fn mark_column(&mut self, i: usize) {
        let word = i / 64;
        if self.columns.len() <= word {
            self.columns.resize(word + 1, 0);
        }
        self.columns[word] |= 1 << (i % 64);
    }

    pub fn column_changed(&self, i: usize) -> bool {
        self.columns.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
}

/// Changes of one committed transaction, keyed by `schema.table` in lower case.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChangeSet {
    pub tables: HashMap<String, TableChange>,
}

impl ChangeSet {
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

pub fn table_key(schema: &str, table: &str) -> String {
    let mut k = String::with_capacity(schema.len() + table.len() + 1);
    k.push_str(&schema.to_ascii_lowercase());
    k.push('.');
    k.push_str(&table.to_ascii_lowercase());
    k
}

struct HookState {
    /// Changes of the transaction in progress.
    pending: ChangeSet,
    /// Changes of transactions that committed since the last `take_committed`. Kept apart
    /// from `pending`: in a script, a later statement's rollback must not erase them.
    committed: Option<ChangeSet>,
    /// Frames in the main database's WAL after the last commit to it.
    wal_pages: c_int,
    /// The same for attached databases in WAL mode (the largest), which only a checkpoint on
    /// the writer's connection copies.
    attached_wal_pages: c_int,
    /// While no live query exists, UPDATEs are recorded per table only (no column
    /// comparison): cheap, and still correct for a live query that starts mid-transaction.
    tracking: Arc<AtomicBool>,
    /// The key of the table changed last, so consecutive rows need no allocation.
    last_key: String,
    /// `pending` marks that table's whole rows changed: nothing more to record for it until
    /// `pending` is taken or cleared (every row of a bulk insert after its first).
    last_whole: bool,
    /// How the writer tells a statement's own insert of the rowid the connection already
    /// reports (delete and insert again, REPLACE) from no insert at all: the rowid to watch
    /// for (`watch_rowid`), and whether a row with it was inserted by a statement itself, not
    /// by one of its triggers (`sqlite3_preupdate_depth` 0).
    watched_rowid: i64,
    watched_hit: bool,
}

impl ChangeSet {
    fn merge(&mut self, other: ChangeSet) {
        for (table, change) in other.tables {
            let into = self.tables.entry(table).or_default();
            into.whole_rows |= change.whole_rows;
            if into.columns.len() < change.columns.len() {
                into.columns.resize(change.columns.len(), 0);
            }
            for (i, w) in change.columns.into_iter().enumerate() {
                into.columns[i] |= w;
            }
        }
    }
}

/// Does `key` ("schema.table", lower case) name this schema and table?
fn key_matches(key: &str, schema: &[u8], table: &[u8]) -> bool {
    let k = key.as_bytes();
    k.len() == schema.len() + 1 + table.len()
        && k[schema.len()] == b'.'
        && k[..schema.len()].iter().zip(schema).all(|(a, b)| *a == b.to_ascii_lowercase())
        && k[schema.len() + 1..].iter().zip(table).all(|(a, b)| *a == b.to_ascii_lowercase())
}

/// Owns the hook registrations of one connection; unregisters them on drop.
pub struct ChangeTracker {
    db: *mut ffi::sqlite3,
    state: Box<HookState>,
}

// The tracker lives and dies on the writer thread with its connection.
unsafe impl Send for ChangeTracker {}

impl ChangeTracker {
    /// # Safety of use
    /// The tracker must be dropped before `conn` is closed.
    pub fn install(conn: &Connection, tracking: Arc<AtomicBool>) -> Self {
        let mut state = Box::new(HookState {
            pending: ChangeSet::default(),
            committed: None,
            wal_pages: 0,
            attached_wal_pages: 0,
            tracking,
            last_key: String::new(),
            last_whole: false,
            watched_rowid: 0,
            watched_hit: false,
        });
        // SAFETY: the handle is valid while `conn` lives, which the caller guarantees beyond
        // the tracker's drop (see above).
        let db = unsafe { conn.handle() };
        let p = &mut *state as *mut HookState as *mut c_void;
        // SAFETY: `p` points into the boxed state, which does not move and outlives the
        // hooks: Drop unregisters them before the box is freed.
        unsafe {
            ffi::sqlite3_preupdate_hook(db, Some(on_preupdate), p);
            ffi::sqlite3_commit_hook(db, Some(on_commit), p);
            ffi::sqlite3_rollback_hook(db, Some(on_rollback), p);
            ffi::sqlite3_wal_hook(db, Some(on_wal), p);
        }
        ChangeTracker { db, state }
    }

    /// The changes of a transaction that committed since the last call, if any.
    pub fn take_committed(&mut self) -> Option<ChangeSet> {
        self.state.committed.take()
    }

    /// Starts watching for an insert of `rowid` by a statement itself (not a trigger).
    pub fn watch_rowid(&mut self, rowid: i64) {
        self.state.watched_rowid = rowid;
        self.state.watched_hit = false;
    }

    /// Whether such an insert happened since `watch_rowid`.
    pub fn watched_rowid_inserted(&self) -> bool {
        self.state.watched_hit
    }

    /// Pages in the WAL after the last commit.
    pub fn wal_pages(&self) -> c_int {
        self.state.wal_pages
    }

    pub fn attached_wal_pages(&self) -> c_int {
        self.state.attached_wal_pages
    }

    /// After a checkpoint of every database of the connection.
    pub fn reset_wal_pages(&mut self) {
        self.state.wal_pages = 0;
        self.state.attached_wal_pages = 0;
    }

    /// After a checkpoint of the main database alone (the checkpoint thread's).
    pub fn reset_main_wal_pages(&mut self) {
        self.state.wal_pages = 0;
    }
}

impl ChangeTracker {
    /// The flag this tracker reads (for a tracker installed on a replacing connection).
    pub fn tracking(&self) -> Arc<AtomicBool> {
        self.state.tracking.clone()
    }
}

impl Drop for ChangeTracker {
    fn drop(&mut self) {
        // SAFETY: `db` is still open (the tracker is dropped before its connection).
        unsafe {
            ffi::sqlite3_preupdate_hook(self.db, None, std::ptr::null_mut());
            ffi::sqlite3_commit_hook(self.db, None, std::ptr::null_mut());
            ffi::sqlite3_rollback_hook(self.db, None, std::ptr::null_mut());
            ffi::sqlite3_wal_hook(self.db, None, std::ptr::null_mut());
        }
    }
}

unsafe fn cstr<'a>(p: *const c_char) -> &'a str {
    if p.is_null() {
        ""
    } else {
        // SAFETY: SQLite passes NUL-terminated names valid for the duration of the hook.
        CStr::from_ptr(p).to_str().unwrap_or("")
    }
}

/// Equal SQLite values: same storage class and same content.
unsafe fn same_value(a: *mut ffi::sqlite3_value, b: *mut ffi::sqlite3_value) -> bool {
    let ta = ffi::sqlite3_value_type(a);
    if ta != ffi::sqlite3_value_type(b) {
        return false;
    }
    match ta {
        ffi::SQLITE_NULL => true,
        ffi::SQLITE_INTEGER => ffi::sqlite3_value_int64(a) == ffi::sqlite3_value_int64(b),
        ffi::SQLITE_FLOAT => {
            ffi::sqlite3_value_double(a).to_bits() == ffi::sqlite3_value_double(b).to_bits()
        }
        _ => {
            let pa = ffi::sqlite3_value_blob(a) as *const u8;
            let na = ffi::sqlite3_value_bytes(a) as usize;
            let pb = ffi::sqlite3_value_blob(b) as *const u8;
            let nb = ffi::sqlite3_value_bytes(b) as usize;
            // SAFETY: SQLite's value pointers are valid for the reported byte counts until
            // the hook returns; null (out of memory) with bytes counts as a change.
            na == nb
                && (na == 0
                    || (!pa.is_null() && !pb.is_null() && std::slice::from_raw_parts(pa, na) == std::slice::from_raw_parts(pb, nb)))
        }
    }
}

unsafe extern "C" fn on_preupdate(
    ctx: *mut c_void,
    db: *mut ffi::sqlite3,
    op: c_int,
    schema: *const c_char,
    table: *const c_char,
    key1: i64,
    key2: i64,
) {
    // SAFETY: `ctx` is the tracker's boxed state (registered in install, unregistered
    // before it is freed); SQLite calls hooks on the connection's thread only.
    let state = &mut *(ctx as *mut HookState);
    // A panic must not cross into C: record conservatively instead of unwinding.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // A VACUUM's copy of the schema's rows is not the statement's own insert.
        if op == ffi::SQLITE_INSERT
            && ffi::sqlite3_preupdate_depth(db) == 0
            && key2 == state.watched_rowid
            && !crate::statement_rules::vacuum_running()
        {
            state.watched_hit = true;
        }
        let (schema, table) = (cstr(schema).as_bytes(), cstr(table).as_bytes());
        if !key_matches(&state.last_key, schema, table) {
            // SAFETY: both byte strings come from `cstr`, which returns validated `&str`s.
            state.last_key = table_key(std::str::from_utf8_unchecked(schema), std::str::from_utf8_unchecked(table));
            state.last_whole = false;
        }
        if state.last_whole {
            return;
        }
        let change = match state.pending.tables.get_mut(state.last_key.as_str()) {
            Some(c) => c,
            None => state.pending.tables.entry(state.last_key.clone()).or_default(),
        };
        if change.whole_rows {
            state.last_whole = true;
            return;
        }
        if op != ffi::SQLITE_UPDATE || key1 != key2 || !state.tracking.load(Ordering::Relaxed) {
            change.whole_rows = true;
            state.last_whole = true;
            return;
        }
        let n = ffi::sqlite3_preupdate_count(db);
        for i in 0..n {
            if change.column_changed(i as usize) {
                continue;
            }
            let mut old = std::ptr::null_mut();
            let mut new = std::ptr::null_mut();
            let ok = ffi::sqlite3_preupdate_old(db, i, &mut old) == ffi::SQLITE_OK
                && ffi::sqlite3_preupdate_new(db, i, &mut new) == ffi::SQLITE_OK;
            if !ok || old.is_null() || new.is_null() || !same_value(old, new) {
                change.mark_column(i as usize);
            }
        }
    }));
}

unsafe extern "C" fn on_commit(ctx: *mut c_void) -> c_int {
    // SAFETY: as in on_preupdate.
    let state = &mut *(ctx as *mut HookState);
    let done = std::mem::take(&mut state.pending);
    state.last_whole = false;
    state.committed.get_or_insert_with(ChangeSet::default).merge(done);
    0
}

unsafe extern "C" fn on_rollback(ctx: *mut c_void) {
    // SAFETY: as in on_preupdate.
    let state = &mut *(ctx as *mut HookState);
    state.pending = ChangeSet::default();
    state.last_whole = false;
}

unsafe extern "C" fn on_wal(ctx: *mut c_void, _db: *mut ffi::sqlite3, name: *const c_char, pages: c_int) -> c_int {
    // SAFETY: as in on_preupdate; `name` is the schema's NUL-terminated name (cstr).
    let state = &mut *(ctx as *mut HookState);
    if cstr(name) == "main" {
        state.wal_pages = pages;
    } else {
        state.attached_wal_pages = state.attached_wal_pages.max(pages);
    }
    ffi::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (Connection, ChangeTracker) {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(a, b, c)").unwrap();
        let tracker = ChangeTracker::install(&conn, Arc::new(AtomicBool::new(true)));
        (conn, tracker)
    }

    #[test]
    fn records_inserts_and_really_changed_columns() {
        let (conn, mut tr) = setup();
        conn.execute("INSERT INTO t VALUES (1, 'x', 2)", []).unwrap();
        let cs = tr.take_committed().unwrap();
        assert!(cs.tables["main.t"].whole_rows);
        conn.execute("UPDATE t SET a = a, b = 'y'", []).unwrap();
        let cs = tr.take_committed().unwrap();
        let t = &cs.tables["main.t"];
        assert!(!t.whole_rows);
        assert!(!t.column_changed(0));
        assert!(t.column_changed(1));
        assert!(!t.column_changed(2));
        assert!(tr.take_committed().is_none());
    }

    #[test]
    fn a_rollback_drops_the_changes() {
        let (conn, mut tr) = setup();
        conn.execute_batch("BEGIN; INSERT INTO t VALUES (1,2,3); ROLLBACK").unwrap();
        assert!(tr.take_committed().is_none());
        conn.execute_batch("BEGIN; INSERT INTO t VALUES (1,2,3); COMMIT").unwrap();
        assert!(tr.take_committed().unwrap().tables.contains_key("main.t"));
    }

    #[test]
    fn a_whole_rows_mark_stays_with_its_table_and_transaction() {
        let (conn, mut tr) = setup();
        conn.execute_batch("CREATE TABLE u(x, y); INSERT INTO u VALUES (1, 2)").unwrap();
        tr.take_committed();
        // Rows of `t` inserted, then `u` updated: the mark of `t` says nothing about `u`.
        conn.execute_batch("BEGIN; INSERT INTO t VALUES (1,2,3); INSERT INTO t VALUES (4,5,6); UPDATE u SET y = 3; COMMIT").unwrap();
        let cs = tr.take_committed().unwrap();
        assert!(cs.tables["main.t"].whole_rows);
        assert!(!cs.tables["main.u"].whole_rows && cs.tables["main.u"].column_changed(1), "{cs:?}");
        // Nor does it outlive a rollback: the next update of `t` is recorded by column.
        conn.execute_batch("BEGIN; INSERT INTO t VALUES (7,8,9); ROLLBACK; UPDATE t SET c = 0 WHERE a = 1").unwrap();
        let cs = tr.take_committed().unwrap();
        assert!(!cs.tables["main.t"].whole_rows && cs.tables["main.t"].column_changed(2), "{cs:?}");
    }

    #[test]
    fn a_later_statement_rolling_back_keeps_what_committed_before() {
        let (conn, mut tr) = setup();
        conn.execute_batch("CREATE TABLE u(x UNIQUE); INSERT INTO u VALUES (1)").unwrap();
        tr.take_committed();
        let script = conn.execute_batch("INSERT INTO t VALUES (1,2,3); INSERT INTO u VALUES (1)");
        assert!(script.is_err());
        let cs = tr.take_committed().unwrap();
        assert!(cs.tables.contains_key("main.t"), "{cs:?}");
    }

    #[test]
    fn without_tracking_updates_count_per_table() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(a, b)").unwrap();
        let mut tr = ChangeTracker::install(&conn, Arc::new(AtomicBool::new(false)));
        conn.execute("INSERT INTO t VALUES (1, 2)", []).unwrap();
        tr.take_committed();
        conn.execute("UPDATE t SET a = a", []).unwrap();
        assert!(tr.take_committed().unwrap().tables["main.t"].whole_rows);
    }

    #[test]
    fn a_noop_update_changes_nothing() {
        let (conn, mut tr) = setup();
        conn.execute("INSERT INTO t VALUES (1, 'x', 2)", []).unwrap();
        tr.take_committed();
        conn.execute("UPDATE t SET a = a, b = b, c = c", []).unwrap();
        let cs = tr.take_committed().unwrap();
        let t = &cs.tables["main.t"];
        assert!(!t.whole_rows && t.columns.iter().all(|w| *w == 0));
    }
}
