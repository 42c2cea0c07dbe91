//! Statements prepared straight from SQLite, outside rusqlite: for walking multi-statement
//! text one statement at a time, and for reads, whose values are taken with one
//! `sqlite3_column_value` each instead of rusqlite's three column calls (experiment 030).

use crate::encode::ColumnNames;
use crate::error::{Error, Result};
use rusqlite::ffi;
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use std::ffi::{c_int, CStr};

/// One prepared statement of one connection; finalized on drop. Not `Send`: it is used on
/// the thread that owns the connection, and dropped before the connection (the owners
/// borrow the connection or, as `ReadConnection`, declare their statements first).
pub(crate) struct RawStatement {
    db: *mut ffi::sqlite3,
    /// Null when the text held only white space or comments.
    stmt: *mut ffi::sqlite3_stmt,
    /// Byte offset in the text where the next statement starts.
    pub(crate) tail: usize,
    /// The result's column names as last read, and SQLite's count of this statement's
    /// re-preparations when they were read (see `names`).
    names: Option<(c_int, ColumnNames)>,
    /// What the text and blobs bound since the values were last cleared hold (see
    /// `KEEP_BINDINGS_AT_MOST`).
    bound_bytes: usize,
}

/// `reset` leaves bound values in place until the text and blobs bound since they were last
/// cleared pass this many bytes. Clearing them costs more than the memory: it expires the
/// plan of any statement with a parameter whose value SQLite marked as one the plan may
/// depend on (a `LIMIT ?` always; with `sqlite_stat4` statistics, a compared column too),
/// and every run compiled the statement again (experiment 093). Rebinding an equal integer
/// keeps the plan. Every run binds every parameter anew (`bind` refuses fewer values before
/// anything steps), so a kept value is never read again. Counted from one clearing to the
/// next, not per run, so that runs whose binding failed part way cannot pile values up.
const KEEP_BINDINGS_AT_MOST: usize = 4096;

impl RawStatement {
    /// Prepares the first statement of `sql`.
    pub(crate) fn prepare(conn: &Connection, sql: &str) -> Result<RawStatement> {
        Self::prepare_with(conn, sql, 0)
    }

    /// Prepares a statement meant to be kept (a cache): SQLite then keeps it out of the
    /// connection's small lookaside memory, as rusqlite's cache asks too.
    pub(crate) fn prepare_persistent(conn: &Connection, sql: &str) -> Result<RawStatement> {
        Self::prepare_with(conn, sql, ffi::SQLITE_PREPARE_PERSISTENT as u32)
    }

    fn prepare_with(conn: &Connection, sql: &str, flags: u32) -> Result<RawStatement> {
        let len = i32::try_from(sql.len())
            .map_err(|_| Error::sqlite(ffi::SQLITE_TOOBIG, "the SQL text is too long"))?;
        // SAFETY: the handle is valid while `conn` is borrowed; it is only used on this
        // thread, and for statements finalized before `conn` is dropped (see the type).
        let db = unsafe { conn.handle() };
        let mut stmt = std::ptr::null_mut();
        let mut tail: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: `sql` is valid for `len` bytes (SQLite reads no further, and the text needs
        // no NUL terminator when a length is given); `stmt` and `tail` are valid out-pointers.
        let rc = unsafe { ffi::sqlite3_prepare_v3(db, sql.as_ptr().cast(), len, flags, &mut stmt, &mut tail) };
        if rc != ffi::SQLITE_OK {
            // SAFETY: on failure SQLite set `stmt` to null, or it is a statement to release.
            unsafe { ffi::sqlite3_finalize(stmt) };
            return Err(last_error(db, rc));
        }
        // SQLite's tail points into `sql` (at most one past its end) or is null.
        let tail = if tail.is_null() { sql.len() } else { (tail as usize).saturating_sub(sql.as_ptr() as usize).min(sql.len()) };
        Ok(RawStatement { db, stmt, tail, names: None, bound_bytes: 0 })
    }

    /// The statement (null when the text held no statement); owned by `self`.
    pub(crate) fn handle(&self) -> *mut ffi::sqlite3_stmt {
        self.stmt
    }

    /// Steps once: true when a row is ready to read. Takes `&mut self`: values and names
    /// borrowed from the statement must be let go first (a step frees them).
    pub(crate) fn step(&mut self) -> Result<bool> {
        if self.stmt.is_null() {
            return Ok(false);
        }
        // SAFETY: `stmt` is a live statement of `db`, used on this thread only.
        match unsafe { ffi::sqlite3_step(self.stmt) } {
            ffi::SQLITE_ROW => Ok(true),
            ffi::SQLITE_DONE => Ok(false),
            rc => Err(last_error(self.db, rc)),
        }
    }

    /// Steps the statement to its end, discarding rows.
    pub(crate) fn run(&mut self) -> Result<()> {
        while self.step()? {}
        Ok(())
    }

    /// Back to the start, ready to be run again; the parameters are unbound once the values
    /// bound since they last were hold more than `KEEP_BINDINGS_AT_MOST` bytes.
    pub(crate) fn reset(&mut self) {
        // sqlite3_clear_bindings reads through a null statement unless SQLite is built with
        // API armor: checked here, as `step` does, rather than left to a compile option.
        if self.stmt.is_null() {
            return;
        }
        // SAFETY: as in `step`. The codes returned repeat the last step's error, which its
        // caller has already seen.
        unsafe { ffi::sqlite3_reset(self.stmt) };
        if self.bound_bytes > KEEP_BINDINGS_AT_MOST {
            self.bound_bytes = 0;
            // SAFETY: as above.
            unsafe { ffi::sqlite3_clear_bindings(self.stmt) };
        }
    }

    /// Does the statement leave the database as it is?
    pub(crate) fn readonly(&self) -> bool {
        // SAFETY: as in `step`; a null statement is read-only (SQLite answers 1 for it).
        unsafe { ffi::sqlite3_stmt_readonly(self.stmt) != 0 }
    }

    pub(crate) fn column_count(&self) -> usize {
        // SAFETY: as in `step` (0 for a null statement).
        unsafe { ffi::sqlite3_column_count(self.stmt) as usize }
    }

    /// The result's column names, read from SQLite once per preparation of the statement
    /// rather than for every result (a few percent of a point query's reader time). Only a
    /// re-preparation (SQLite's own, in a step after a schema change, a DETACH or a pragma
    /// that expires statements) can change them, and SQLite counts those. (So can
    /// `sqlite3_stmt_explain` when it switches a statement's mode without preparing it
    /// again, uncounted: nothing here calls it.) Called after the first step, as
    /// `column_names`.
    pub(crate) fn names(&mut self) -> Result<&ColumnNames> {
        let prepared = if self.stmt.is_null() {
            0
        } else {
            // SAFETY: as in `step`; reading a counter changes nothing.
            unsafe { ffi::sqlite3_stmt_status(self.stmt, ffi::SQLITE_STMTSTATUS_REPREPARE, 0) }
        };
        if !matches!(&self.names, Some((at, _)) if *at == prepared) {
            let names = ColumnNames::new(self.column_names()?);
            self.names = Some((prepared, names));
        }
        Ok(&self.names.as_ref().expect("set just above").1)
    }

    /// The result's column names, borrowed from the statement: no copy per name. Read after
    /// the first step (a re-prepare may change them); the borrow ends before the next step,
    /// which may free them.
    pub(crate) fn column_names(&self) -> Result<impl Iterator<Item = std::borrow::Cow<'_, str>> + '_> {
        let name = |i: c_int| {
            // SAFETY: `i` is a column of the statement (below its count), on the thread that
            // owns it. Null means SQLite ran out of memory.
            unsafe { ffi::sqlite3_column_name(self.stmt, i) }
        };
        let count = self.column_count() as c_int;
        // Checked first, so that the names handed out are all there.
        if (0..count).any(|i| name(i).is_null()) {
            return Err(Error::sqlite(ffi::SQLITE_NOMEM, "out of memory reading a column name"));
        }
        Ok((0..count).map(move |i| {
            let p = name(i);
            if p.is_null() {
                // Not seen: SQLite keeps a UTF-8 name once made, and the check above made them
                // all. Were it to fail now, an empty name beats reading through null.
                debug_assert!(false, "a column name vanished between two calls");
                return std::borrow::Cow::Borrowed("");
            }
            // SAFETY: not null, NUL-terminated, and valid while `self` is borrowed: only a
            // step (`&mut self`, which may re-prepare), the finalize on drop, or a call of
            // `sqlite3_column_name16` on the handle (not made anywhere) frees it.
            unsafe { CStr::from_ptr(p) }.to_string_lossy()
        }))
    }
}

/// A row's values by column index (a stepped statement, or rusqlite's row).
pub trait ColumnValues {
    fn value(&self, col: usize) -> Result<ValueRef<'_>>;
}

impl ColumnValues for rusqlite::Row<'_> {
    fn value(&self, col: usize) -> Result<ValueRef<'_>> {
        Ok(self.get_ref(col)?)
    }
}

impl ColumnValues for RawStatement {
    /// The value of column `col` of the current row. The slices borrow SQLite's copy, valid
    /// until the statement steps, resets or is finalized: all need the borrow to end first.
    /// Callers pass columns below `column_count()`; SQLite answers NULL for any other.
    /// Always inlined: as a call, its `Result` went back through memory for every value,
    /// and a 10k-row select took about 9% more reader time (experiment 049).
    #[inline(always)]
    fn value(&self, col: usize) -> Result<ValueRef<'_>> {
        let col = c_int::try_from(col).unwrap_or(c_int::MAX);
        // SAFETY: the statement is live; SQLite checks `col` and the row itself (a static NULL
        // when either is missing). `sqlite3_column_value` gives an unprotected value,
        // which may be read with the `sqlite3_value_*` calls here because this connection is
        // only ever used by one thread at a time. Text is read before its length, as SQLite
        // asks; a null pointer for a non-empty value means SQLite ran out of memory.
        unsafe {
            let v = ffi::sqlite3_column_value(self.stmt, col);
            Ok(match ffi::sqlite3_value_type(v) {
                ffi::SQLITE_INTEGER => ValueRef::Integer(ffi::sqlite3_value_int64(v)),
                ffi::SQLITE_FLOAT => ValueRef::Real(ffi::sqlite3_value_double(v)),
                ffi::SQLITE_TEXT => ValueRef::Text(bytes(ffi::sqlite3_value_text(v), v)?),
                ffi::SQLITE_BLOB => ValueRef::Blob(bytes(ffi::sqlite3_value_blob(v).cast(), v)?),
                _ => ValueRef::Null,
            })
        }
    }
}

/// The bytes of a text or blob value whose pointer `p` was just taken.
///
/// SAFETY: `p` and `v` come from the same value of a statement stepped to a row; the slice
/// lives as long as the caller's borrow of that statement.
#[inline]
unsafe fn bytes<'s>(p: *const u8, v: *mut ffi::sqlite3_value) -> Result<&'s [u8]> {
    let len = unsafe { ffi::sqlite3_value_bytes(v) };
    match (p.is_null(), usize::try_from(len)) {
        (_, Ok(0)) => Ok(&[]),
        (false, Ok(len)) => Ok(unsafe { std::slice::from_raw_parts(p, len) }),
        _ => Err(Error::sqlite(ffi::SQLITE_NOMEM, "out of memory reading a value")),
    }
}

impl crate::bind::Parameters for RawStatement {
    fn parameter_count(&self) -> usize {
        // SAFETY: as in `step`.
        unsafe { ffi::sqlite3_bind_parameter_count(self.stmt) as usize }
    }

    fn parameter_name(&self, index: usize) -> Option<&str> {
        // SAFETY: as in `step`; any index is allowed (null when out of range or nameless).
        // The name is NUL-terminated and lives as long as the statement.
        let p = unsafe { ffi::sqlite3_bind_parameter_name(self.stmt, index as c_int) };
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().ok()).flatten()
    }

    fn parameter_index(&self, name: &str) -> Result<Option<usize>> {
        let name = std::ffi::CString::new(name).map_err(|e| Error::from(rusqlite::Error::NulError(e)))?;
        // SAFETY: as in `step`; `name` is NUL-terminated.
        let i = unsafe { ffi::sqlite3_bind_parameter_index(self.stmt, name.as_ptr()) };
        Ok((i > 0).then_some(i as usize))
    }

    fn bind_value(&mut self, index: usize, value: ValueRef<'_>) -> Result<()> {
        let i = index as c_int;
        let too_big = || Error::sqlite(ffi::SQLITE_TOOBIG, "a parameter value is too large");
        // SAFETY: as in `step`. Text and blobs are copied by SQLite (SQLITE_TRANSIENT), so
        // the borrowed bytes need not outlive this call.
        let rc = unsafe {
            match value {
                ValueRef::Null => ffi::sqlite3_bind_null(self.stmt, i),
                ValueRef::Integer(n) => ffi::sqlite3_bind_int64(self.stmt, i, n),
                ValueRef::Real(f) => ffi::sqlite3_bind_double(self.stmt, i, f),
                ValueRef::Text(t) => {
                    let len = c_int::try_from(t.len()).map_err(|_| too_big())?;
                    self.bound_bytes = self.bound_bytes.saturating_add(held_bytes(t.len()));
                    ffi::sqlite3_bind_text(self.stmt, i, t.as_ptr().cast(), len, ffi::SQLITE_TRANSIENT())
                }
                ValueRef::Blob(b) => {
                    let len = c_int::try_from(b.len()).map_err(|_| too_big())?;
                    self.bound_bytes = self.bound_bytes.saturating_add(held_bytes(b.len()));
                    ffi::sqlite3_bind_blob(self.stmt, i, b.as_ptr().cast(), len, ffi::SQLITE_TRANSIENT())
                }
            }
        };
        if rc != ffi::SQLITE_OK {
            return Err(last_error(self.db, rc));
        }
        Ok(())
    }
}

/// About what SQLite allocates for its copy of a bound text or blob of `len` bytes: at least
/// 32 bytes, even for an empty one. (Text bound to a UTF-16 database is converted, about
/// twice as large: the bound there is loose by that much.)
fn held_bytes(len: usize) -> usize {
    len.saturating_add(32)
}

impl Drop for RawStatement {
    fn drop(&mut self) {
        // SAFETY: `stmt` is null or a statement this value owns; finalized exactly once.
        unsafe { ffi::sqlite3_finalize(self.stmt) };
    }
}

/// The connection's latest error, for a call that returned `rc`.
pub(crate) fn last_error(db: *mut ffi::sqlite3, rc: i32) -> Error {
    // SAFETY: `db` is a live connection; SQLite's message is NUL-terminated and copied here
    // before any other call on the connection can change it.
    unsafe {
        let code = ffi::sqlite3_extended_errcode(db);
        let code = if code & 0xff == rc & 0xff { code } else { rc };
        let msg = ffi::sqlite3_errmsg(db);
        let message = if msg.is_null() {
            crate::error::code_message(code)
        } else {
            CStr::from_ptr(msg).to_string_lossy().into_owned()
        };
        if code == ffi::SQLITE_ERROR {
            if let Some(original) = crate::functions::take_failure(&message) {
                return original;
            }
        }
        Error::sqlite(code, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names kept with a statement follow a schema change made by another connection,
    /// even one that keeps the number of columns (a renamed column), one made on the
    /// statement's own connection, and a pragma that changes how names are made; and are
    /// the same object while nothing changed.
    #[test]
    fn kept_names_follow_schema_changes_and_naming_pragmas() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("names.db");
        let writer = Connection::open(&path).unwrap();
        writer.execute_batch("CREATE TABLE t(a, b); INSERT INTO t VALUES (1, 2);").unwrap();
        let reader = Connection::open(&path).unwrap();
        let mut stmt = RawStatement::prepare_persistent(&reader, "SELECT * FROM t").unwrap();
        let run = |stmt: &mut RawStatement| {
            assert!(stmt.step().unwrap());
            let names: Vec<String> = stmt.names().unwrap().iter().map(str::to_owned).collect();
            stmt.reset();
            names
        };
        assert_eq!(run(&mut stmt), ["a", "b"]);
        // Where the kept names' bytes are: names read again are made while the old ones are
        // still held, so they would be elsewhere.
        let kept = |stmt: &mut RawStatement| stmt.names().unwrap().iter().next().unwrap().as_ptr();
        let first = kept(&mut stmt);
        assert_eq!(run(&mut stmt), ["a", "b"]);
        assert_eq!(kept(&mut stmt), first, "read again though nothing changed");
        writer.execute_batch("ALTER TABLE t RENAME COLUMN b TO c").unwrap();
        assert_eq!(run(&mut stmt), ["a", "c"]);
        writer.execute_batch("ALTER TABLE t ADD COLUMN d").unwrap();
        assert_eq!(run(&mut stmt), ["a", "c", "d"]);
        assert_eq!(stmt.names().unwrap(), &ColumnNames::new(["a", "c", "d"]));
        // A change made on the statement's own connection, and a pragma that expires it.
        reader.execute_batch("ALTER TABLE t RENAME COLUMN a TO z").unwrap();
        assert_eq!(run(&mut stmt), ["z", "c", "d"]);
        let mut qualified = RawStatement::prepare_persistent(&reader, "SELECT t.z AS z, c FROM t").unwrap();
        assert_eq!(run(&mut qualified), ["z", "c"]);
        reader.execute_batch("PRAGMA full_column_names = 1").unwrap();
        assert_eq!(run(&mut qualified), ["z", "t.c"]);
    }

    /// Every kind of value reads the same through `sqlite3_column_value` as through
    /// rusqlite's `get_ref`, in a UTF-8 and a UTF-16 database.
    #[test]
    fn values_read_as_rusqlite_reads_them() {
        let sql = "SELECT NULL, 0, -1, 9007199254740993, -9223372036854775808, 1.5, -0.0, \
                   '', 'ascii', 'é ✓ 😀', x'', x'00ff10', CAST('t' AS BLOB)";
        for encoding in ["UTF-8", "UTF-16le", "UTF-16be"] {
            let conn = Connection::open_in_memory().unwrap();
            conn.pragma_update(None, "encoding", encoding).unwrap();
            let actual: String = conn.query_row("PRAGMA encoding", [], |r| r.get(0)).unwrap();
            assert!(actual.eq_ignore_ascii_case(encoding), "{actual}");
            let mut theirs = conn.prepare(sql).unwrap();
            let mut rows = theirs.query([]).unwrap();
            let row = rows.next().unwrap().unwrap();
            let mut ours = RawStatement::prepare(&conn, sql).unwrap();
            assert!(ours.step().unwrap());
            assert_eq!(ours.column_count(), 13);
            for i in 0..13 {
                match (ours.value(i).unwrap(), row.get_ref(i).unwrap()) {
                    // Bits, so that -0.0 is not taken for 0.0.
                    (ValueRef::Real(a), ValueRef::Real(b)) => assert_eq!(a.to_bits(), b.to_bits(), "column {i}"),
                    (a, b) => assert_eq!(a, b, "{encoding}, column {i}"),
                }
            }
            assert_eq!(ours.value(99).unwrap(), ValueRef::Null, "out of range reads as NULL");
            assert!(!ours.step().unwrap());
        }
    }

    #[test]
    fn parameters_bind_by_index_and_name() {
        use crate::bind::Parameters;
        let conn = Connection::open_in_memory().unwrap();
        let mut s = RawStatement::prepare(&conn, "SELECT :a, ?2, @c").unwrap();
        assert_eq!(s.parameter_count(), 3);
        assert_eq!(s.parameter_name(1), Some(":a"));
        assert_eq!(s.parameter_name(2), Some("?2"));
        assert_eq!(s.parameter_name(9), None);
        assert_eq!(s.parameter_index("@c").unwrap(), Some(3));
        assert_eq!(s.parameter_index("@zz").unwrap(), None);
        assert!(matches!(s.parameter_index("a\0b"), Err(Error::Type(_))), "as rusqlite reports it");
        s.bind_value(1, ValueRef::Text("x".as_bytes())).unwrap();
        s.bind_value(2, ValueRef::Blob(&[1, 2])).unwrap();
        s.bind_value(3, ValueRef::Real(2.5)).unwrap();
        let range = s.bind_value(4, ValueRef::Null);
        assert!(matches!(range, Err(Error::Sqlite { code: ffi::SQLITE_RANGE, .. })), "{range:?}");
        assert!(s.step().unwrap());
        assert_eq!(s.value(0).unwrap(), ValueRef::Text(b"x"));
        assert_eq!(s.value(1).unwrap(), ValueRef::Blob(&[1, 2]));
        assert_eq!(s.value(2).unwrap(), ValueRef::Real(2.5));
    }

    /// The SQL with its bound values written in (NULL for unbound ones).
    fn expanded(s: &RawStatement) -> String {
        // SAFETY: a live statement; SQLite's string, checked for null, is freed here, once.
        unsafe {
            let p = ffi::sqlite3_expanded_sql(s.handle());
            assert!(!p.is_null(), "sqlite3_expanded_sql ran out of memory");
            let text = CStr::from_ptr(p).to_string_lossy().into_owned();
            ffi::sqlite3_free(p.cast());
            text
        }
    }

    #[test]
    fn reset_unbinds_once_the_values_bound_since_pass_the_kept_bytes() {
        use crate::bind::Parameters;
        let conn = Connection::open_in_memory().unwrap();
        let mut s = RawStatement::prepare(&conn, "SELECT ?, ?").unwrap();
        // One value held at exactly the limit stays; the next, however small, passes it.
        s.bind_value(1, ValueRef::Text(&vec![b'a'; KEEP_BINDINGS_AT_MOST - 32])).unwrap();
        s.reset();
        assert!(expanded(&s).starts_with("SELECT 'aaaa"), "at the limit, kept");
        s.bind_value(2, ValueRef::Blob(b"b")).unwrap();
        s.reset();
        assert_eq!(expanded(&s), "SELECT NULL, NULL", "past it, unbound");
        // Runs that bind only some parameters (a binding that failed part way) cannot pile
        // values up: the count runs from one clearing to the next, not per run.
        let most = vec![b'c'; KEEP_BINDINGS_AT_MOST * 3 / 4];
        s.bind_value(1, ValueRef::Text(&most)).unwrap();
        s.reset();
        s.bind_value(2, ValueRef::Text(&most)).unwrap();
        s.reset();
        assert_eq!(expanded(&s), "SELECT NULL, NULL", "two runs' values together passed it");
        // An empty value still costs SQLite an allocation, and is counted as one.
        let fits = KEEP_BINDINGS_AT_MOST / 32;
        for _ in 0..fits {
            s.bind_value(1, ValueRef::Text(b"")).unwrap();
            s.reset();
        }
        assert_eq!(expanded(&s), "SELECT '', NULL");
        s.bind_value(1, ValueRef::Text(b"")).unwrap();
        s.reset();
        assert_eq!(expanded(&s), "SELECT NULL, NULL");
    }

    /// SQLite marks a `LIMIT ?` parameter as one a new value may change the plan of (as it
    /// does a compared column's with `sqlite_stat4` statistics), and clearing the bindings
    /// expires the plan of any statement with such a parameter: when every reset cleared
    /// them, every run compiled the statement again. Rebinding an equal integer does not.
    #[test]
    fn a_range_read_run_again_keeps_its_plan() {
        use crate::bind::Parameters;
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
             INSERT INTO items SELECT i, 'n' || i FROM n;",
        )
        .unwrap();
        let mut s = RawStatement::prepare_persistent(&conn, "SELECT * FROM items WHERE id > ? ORDER BY id LIMIT ?").unwrap();
        for run in 0..10 {
            s.bind_value(1, ValueRef::Integer(run * 100)).unwrap();
            s.bind_value(2, ValueRef::Integer(5)).unwrap();
            let mut rows = 0;
            while s.step().unwrap() {
                rows += 1;
            }
            assert_eq!(rows, 5);
            s.reset();
        }
        // SAFETY: a live statement.
        let prepared_again = unsafe { ffi::sqlite3_stmt_status(s.handle(), ffi::SQLITE_STMTSTATUS_REPREPARE, 0) };
        assert!(prepared_again <= 1, "prepared again {prepared_again} times in 10 runs");
    }
}

/// The column names of a rusqlite statement (after its first step, as for `names`).
/// rusqlite panics on a name that is not UTF-8, and a crafted schema can hold one (a file
/// from `deserialize`): such names are read from the same SQL prepared again on `conn`, made
/// valid (U+FFFD) as every other path makes them.
pub(crate) fn column_names_of(conn: &Connection, sql: &str, stmt: &rusqlite::Statement<'_>) -> Result<Vec<String>> {
    let read = crate::quiet_panic::catch_quietly(|| stmt.column_names().into_iter().map(str::to_owned).collect());
    match read {
        Ok(names) => Ok(names),
        Err(_) => {
            let again = RawStatement::prepare(conn, sql)?;
            let names = again.column_names()?.map(std::borrow::Cow::into_owned).collect();
            Ok(names)
        }
    }
}
