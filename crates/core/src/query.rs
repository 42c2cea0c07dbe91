//! Running one request's SQL on a connection: prepare (cached), bind, step to the end,
//! encode. Errors raised while stepping always reach the caller, with the SQL attached.

use crate::bind::bind;
use crate::encode::{ColumnNames, EncodedRows, RowEncoder};
use crate::batch_parts::LaterParts;
use crate::error::{Error, Result};
use crate::json::JsonWriter;
use crate::raw_statement::{ColumnValues, RawStatement};
use crate::read_connection::ReadConnection;
use crate::statement_rules::{under, Rule};
use crate::value::Params;
use rusqlite::Connection;

/// What `execute` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecOutcome {
    pub changes: u64,
    pub last_insert_rowid: i64,
    /// Rows produced by the statement (RETURNING), encoded; `None` when it produced none.
    pub rows: Option<EncodedRows>,
}

/// How a read reports its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFormat {
    /// The row encoding (see `encode`), at most `max_rows` rows when given.
    Rows { max_rows: Option<u32> },
    /// UTF-8 JSON (see `json`).
    Json,
    /// Nothing runs: the statement is prepared and described (`statements::describe`).
    Describe,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ReadOutput {
    Rows(EncodedRows),
    Json(Vec<u8>),
    Described(crate::statements::Description),
}

pub(crate) fn prepare<'c>(conn: &'c Connection, sql: &str) -> Result<rusqlite::CachedStatement<'c>> {
    require_statement(sql)?;
    require_one_statement(conn, sql)?;
    conn.prepare_cached(sql).map_err(|e| Error::from(e).with_sql(sql))
}

/// Fails with a RangeError when `sql` holds more than one statement. Text that rusqlite
/// prepares passes here first: rusqlite's `prepare` looks for a second statement by calling
/// itself on the rest of the text, once per statement, and a script of a few thousand
/// statements overflows the thread's stack. (rusqlite's own look then catches what the scan
/// below lets through.)
pub fn require_one_statement(conn: &Connection, sql: &str) -> Result<()> {
    if several_statements(conn, sql)? {
        return Err(Error::from(rusqlite::Error::MultipleStatement));
    }
    Ok(())
}

/// True when text that is not white space, `;` or a comment follows the first statement.
/// Text without such a `;` (nearly all of it) is decided by one byte scan; otherwise the
/// first statement alone is prepared (a `;` may sit in a literal or a trigger body), which
/// reports that statement's own error if it has one. The scan can miss a second statement
/// when the first `;` sits in a literal and what follows it looks like a comment (`'a;
/// --'`): a caller that prepares the text itself looks at SQLite's tail instead
/// (`single_statement`).
fn several_statements(conn: &Connection, sql: &str) -> Result<bool> {
    let Some(semi) = sql.bytes().position(|b| b == b';') else { return Ok(false) };
    if is_blank_sql(&sql.as_bytes()[semi + 1..]) {
        return Ok(false);
    }
    let first = RawStatement::prepare(conn, sql).map_err(|e| e.with_sql(sql))?;
    Ok(!is_blank_sql(&sql.as_bytes()[first.tail..]))
}

/// Whether the text `sql` that `stmt` was prepared from holds nothing after it: SQLite's tail
/// says where the statement ended, whatever its literals and comments hold.
fn single_statement(stmt: &RawStatement, sql: &str) -> bool {
    is_blank_sql(sql.as_bytes().get(stmt.tail..).unwrap_or_default())
}

/// SQL made only of white space and comments has no statement to run: say so, rather than
/// let SQLite step nothing (SQLITE_MISUSE). Costs one byte comparison for ordinary SQL.
pub(crate) fn require_statement(sql: &str) -> Result<()> {
    // SQLite stops reading at a NUL: the text after it would silently not run. (The JS
    // layer says so first; this keeps every other caller of the core honest too.)
    if sql.as_bytes().contains(&0) {
        return Err(Error::Type("SQL text contains a NUL character".into()));
    }
    if is_blank_sql(sql.as_bytes()) {
        Err(Error::Range("the SQL text holds no statement".into()))
    } else {
        Ok(())
    }
}

/// Runs a query that must not write or change its connection (see `statement_rules`).
/// Used by readers (read-only connections), live queries and the inline connection.
pub fn read(conn: &ReadConnection, sql: &str, params: &Params, format: ReadFormat) -> Result<ReadOutput> {
    if format == ReadFormat::Describe {
        return describe_under(Rule::Describe, conn, sql);
    }
    under(Rule::Read, || {
        let mut stmt = conn.statement(sql, |c| prepare_raw(c, sql, true))?;
        read_prepared(&mut stmt, sql, params, format)
    })
}

/// Describes `sql` under `rule`: SQLite carries out some pragmas while it prepares them (the
/// cipher's `key`, `cache_size = N`, ...), so preparing one only to describe it is held to
/// the rule of the call it stands for, as its run would be.
fn describe_under(rule: Rule, conn: &ReadConnection, sql: &str) -> Result<ReadOutput> {
    under(rule, || crate::statements::describe(conn, sql)).map(ReadOutput::Described)
}

/// Prepares one statement of user text for the read path, with `prepare`'s checks; `kept`:
/// for the cache.
fn prepare_raw(conn: &Connection, sql: &str, kept: bool) -> Result<RawStatement> {
    require_statement(sql)?;
    let stmt = if kept { RawStatement::prepare_persistent(conn, sql) } else { RawStatement::prepare(conn, sql) };
    let stmt = stmt.map_err(|e| e.with_sql(sql))?;
    if !single_statement(&stmt, sql) {
        return Err(Error::from(rusqlite::Error::MultipleStatement));
    }
    Ok(stmt)
}

/// `read` on the writer (`tx.select`). Its cached statements are met by the authorizer
/// only when prepared. Plain queries (SELECT, WITH, VALUES) cannot change a connection
/// (writes are refused by `readonly()` on every run), so they keep the cache; anything else
/// (PRAGMA, ATTACH, EXPLAIN, ...) is prepared afresh under the read rule.
pub fn read_on_writer(conn: &ReadConnection, sql: &str, params: &Params, format: ReadFormat) -> Result<ReadOutput> {
    if format == ReadFormat::Describe {
        // Described where `execute` runs it (the writer), so under execute's rule.
        return describe_under(Rule::Write, conn, sql);
    }
    if starts_with_query(sql.as_bytes()) {
        return read(conn, sql, params, format);
    }
    // Whether such a text writes can depend on the schema (`DROP TRIGGER IF EXISTS` writes
    // only while the trigger exists), and the writer may not have seen another connection's
    // change yet: prepared against the old schema it passes the read-only check, and SQLite,
    // preparing it again as it runs, would write. Looked at first, inside the transaction,
    // the schema cannot change under this statement (its snapshot is fixed from here on).
    // Readers need no such step: their connections are read-only.
    crate::statements::refresh_schema(conn, sql)?;
    under(Rule::Read, || {
        let mut stmt = prepare_raw(conn, sql, false)?;
        read_prepared(&mut stmt, sql, params, format)
    })
}

/// Does the first statement of `sql` start with SELECT, WITH or VALUES?
fn starts_with_query(sql: &[u8]) -> bool {
    let s = skip_blank(sql);
    let word_len = s.iter().take_while(|c| c.is_ascii_alphabetic()).count();
    let word = &s[..word_len];
    ["select", "with", "values"].iter().any(|k| word.eq_ignore_ascii_case(k.as_bytes()))
}

fn read_prepared(stmt: &mut RawStatement, sql: &str, params: &Params, format: ReadFormat) -> Result<ReadOutput> {
    if !stmt.readonly() {
        return Err(Error::Sqlite {
            code: rusqlite::ffi::SQLITE_READONLY,
            message: "select() runs read-only statements only; use execute() for writes".into(),
            sql: Some(sql.to_owned()),
        });
    }
    bind(stmt, params).map_err(|e| e.with_sql(sql))?;
    step_read(stmt, format).map_err(|e| e.with_sql(sql).without_values(params.values()))
}

/// What rows are collected into.
trait RowSink {
    fn push_row<R: ColumnValues + ?Sized>(&mut self, row: &R) -> Result<()>;
    fn rows(&self) -> u32;
}

impl RowSink for RowEncoder {
    fn push_row<R: ColumnValues + ?Sized>(&mut self, row: &R) -> Result<()> {
        RowEncoder::push_row(self, row)
    }
    fn rows(&self) -> u32 {
        RowEncoder::rows(self)
    }
}

impl RowSink for JsonWriter {
    fn push_row<R: ColumnValues + ?Sized>(&mut self, row: &R) -> Result<()> {
        JsonWriter::push_row(self, row)
    }
    fn rows(&self) -> u32 {
        JsonWriter::rows(self)
    }
}

/// Steps `stmt` to the end (or `limit` rows) into a sink made from the column names. The
/// names are looked at after the first step: a statement prepared before a schema change is
/// re-prepared by that step and may come back with other columns (`SELECT *` after
/// `ALTER TABLE ... ADD COLUMN`), which `RawStatement::names` sees. Also the rows an
/// `execute` statement returns (RETURNING).
fn collect<S: RowSink>(
    stmt: &mut RawStatement,
    limit: u32,
    make: impl FnOnce(&ColumnNames) -> S,
) -> Result<S> {
    let more = stmt.step()?;
    let mut sink = make(stmt.names()?);
    if more && limit > 0 {
        sink.push_row(stmt)?;
        while sink.rows() < limit && stmt.step()? {
            sink.push_row(stmt)?;
        }
    }
    Ok(sink)
}

fn step_read(stmt: &mut RawStatement, format: ReadFormat) -> Result<ReadOutput> {
    match format {
        ReadFormat::Rows { max_rows } => {
            let enc = collect(stmt, max_rows.unwrap_or(u32::MAX), RowEncoder::with_names)?;
            Ok(ReadOutput::Rows(enc.finish()))
        }
        ReadFormat::Json => {
            let w = collect(stmt, u32::MAX, |n| JsonWriter::new(n.iter()))?;
            Ok(ReadOutput::Json(w.finish()))
        }
        ReadFormat::Describe => Err(Error::Internal("describe reached the row path".into())),
    }
}

/// White space, semicolons and comments only.
pub(crate) fn is_blank_sql(s: &[u8]) -> bool {
    skip_blank(s).is_empty()
}

/// SQLite's white space (`sqlite3Isspace`): Rust's ASCII set and the vertical tab.
fn is_sqlite_space(c: u8) -> bool {
    c.is_ascii_whitespace() || c == 0x0b
}

/// `s` after its leading white space, semicolons and comments.
pub(crate) fn skip_blank(mut s: &[u8]) -> &[u8] {
    loop {
        match s {
            [c, rest @ ..] if is_sqlite_space(*c) || *c == b';' => s = rest,
            [b'-', b'-', rest @ ..] => {
                s = rest.iter().position(|&c| c == b'\n').map_or(&[][..], |i| &rest[i + 1..]);
            }
            [b'/', b'*', rest @ ..] => {
                s = rest.windows(2).position(|w| w == b"*/").map_or(&[][..], |i| &rest[i + 2..]);
            }
            _ => return s,
        }
    }
}

/// Runs one statement, or with no parameters, every statement of `sql`, under the write
/// rule (no transaction control: see `statement_rules`).
pub fn execute(conn: &ReadConnection, sql: &str, params: &Params) -> Result<ExecOutcome> {
    under(Rule::Write, || execute_unchecked(conn, sql, params))
}

fn execute_unchecked(conn: &ReadConnection, sql: &str, params: &Params) -> Result<ExecOutcome> {
    // Trimmed, as rusqlite's cache (used here before) trimmed what it prepared, so that
    // `execute` reads a statement as it always has: SQLite's tokenizer refuses a vertical tab,
    // and takes a no-break space for part of a name, where Rust's `trim` takes both off.
    // A script runs as it always did too, untrimmed. Errors name the text as it was given.
    let text = sql.trim();
    require_statement(text)?;
    // Our cache, not rusqlite's: rusqlite clears a statement's bindings each time it takes
    // it back, and SQLite then compiles a statement whose plan it made with a bound value
    // (a `LIMIT ?`) again on every run (experiment 097; docs/decisions.md, "Small bound
    // values stay with a cached statement").
    let mut stmt = conn
        .write_statement(text, |c| RawStatement::prepare_persistent(c, text))
        .map_err(|e| e.with_sql(sql))?;
    // A text of several statements is not kept, so a cached one is a single statement.
    if !single_statement(&stmt, text) {
        stmt.discard();
        if !params.is_empty() {
            return Err(Error::Range(
                "the SQL text holds several statements; parameters need exactly one".into(),
            ));
        }
        return execute_script(conn, sql);
    }
    bind(&mut *stmt, params).map_err(|e| e.with_sql(sql))?;
    let returned = |stmt: &mut RawStatement| collect(stmt, u32::MAX, RowEncoder::with_names);
    if crate::statement_rules::is_vacuum(text) {
        vacuum(conn, || returned(&mut stmt)).map_err(|e| e.with_sql(sql).without_values(params.values()))?;
        return Ok(ExecOutcome { changes: 0, last_insert_rowid: 0, rows: None });
    }
    let before = conn.total_changes();
    let enc = returned(&mut stmt).map_err(|e| e.with_sql(sql).without_values(params.values()))?;
    let changed = conn.total_changes() != before;
    Ok(ExecOutcome {
        changes: if changed { conn.changes() } else { 0 },
        last_insert_rowid: conn.last_insert_rowid(),
        rows: (enc.rows() > 0).then(|| enc.finish()),
    })
}

/// Runs every statement of `sql` in order, each prepared only when the ones before it have
/// run (`DROP TABLE t; CREATE TABLE t(...)`) and stepped to its end. A loop over SQLite's
/// tail pointer: the number of statements costs no stack.
fn execute_script(conn: &Connection, sql: &str) -> Result<ExecOutcome> {
    let before = conn.total_changes();
    let mut at = 0;
    while !is_blank_sql(&sql.as_bytes()[at..]) {
        // SQLite's tokenizer refuses a vertical tab, which `sqlite3_exec` skips after each
        // statement as white space: skip it here too (before the first statement as well),
        // with the rest of the white space.
        at += sql.as_bytes()[at..].iter().take_while(|&&c| is_sqlite_space(c)).count();
        // SQLite's tail follows a `;` or ends the text, and ASCII was skipped: always a
        // character boundary.
        let rest = sql.get(at..).ok_or_else(|| Error::Internal("statement tail inside a character".into()))?;
        let mut stmt = RawStatement::prepare(conn, rest).map_err(|e| e.with_sql(sql))?;
        if crate::statement_rules::is_vacuum(rest) {
            vacuum(conn, || stmt.run()).map_err(|e| e.with_sql(sql))?;
        } else {
            stmt.run().map_err(|e| e.with_sql(sql))?;
        }
        if stmt.tail == 0 {
            break;
        }
        at += stmt.tail;
    }
    Ok(ExecOutcome {
        changes: conn.total_changes() - before,
        last_insert_rowid: conn.last_insert_rowid(),
        rows: None,
    })
}

/// Steps a VACUUM (`step`): the BEGIN it runs passes the statement rules, and the rows it
/// inserts into its copy (the schema's) are not the caller's last insert: the connection's
/// last rowid is put back, for `last_insert_rowid()` and `lastInsertRowid`, and the
/// preupdate hook does not count them (`vacuum_running`). (SQLite itself puts back the
/// count of changes.)
fn vacuum<T>(conn: &Connection, step: impl FnOnce() -> Result<T>) -> Result<T> {
    let rowid = conn.last_insert_rowid();
    let out = crate::statement_rules::running_vacuum(step);
    // SAFETY: the handle is valid while `conn` lives, and this thread is the only one using
    // the connection now.
    unsafe { rusqlite::ffi::sqlite3_set_last_insert_rowid(conn.handle(), rowid) };
    out
}

/// Parameter sets of `executeBatch`.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchSets {
    Each(Vec<Params>),
    Packed(crate::value::PackedSets),
}

impl BatchSets {
    /// How many parameter sets.
    pub fn len(&self) -> usize {
        match self {
            BatchSets::Each(each) => each.len(),
            BatchSets::Packed(packed) => packed.set_lens.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Vec<Params>> for BatchSets {
    fn from(v: Vec<Params>) -> Self {
        BatchSets::Each(v)
    }
}

/// Prepares once and runs every parameter set, all or nothing: a transaction when none is
/// open, a savepoint inside one. `later`: the parts that follow `sets` (see batch_parts.rs).
pub fn execute_batch(conn: &Connection, sql: &str, sets: &BatchSets, later: Option<&LaterParts>) -> Result<u64> {
    let outer = conn.is_autocommit();
    conn.execute_batch(if outer { "BEGIN IMMEDIATE" } else { "SAVEPOINT quietsqlite_batch" })?;
    // Only the caller's statement is under the write rule; the BEGIN/SAVEPOINT around it are ours.
    let result = under(Rule::Write, || run_sets(conn, sql, sets, later));
    let end = match (&result, outer) {
        (Ok(_), true) => conn.execute_batch("COMMIT"),
        (Ok(_), false) => conn.execute_batch("RELEASE quietsqlite_batch"),
        (Err(_), true) => conn.execute_batch("ROLLBACK"),
        (Err(_), false) => {
            conn.execute_batch("ROLLBACK TO quietsqlite_batch; RELEASE quietsqlite_batch")
        }
    };
    match (result, end) {
        (Err(e), _) => {
            if outer && !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            Err(e)
        }
        (Ok(_), Err(e)) => {
            if outer && !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            Err(e.into())
        }
        (Ok(n), Ok(())) => Ok(n),
    }
}

fn run_sets(conn: &Connection, sql: &str, first: &BatchSets, later: Option<&LaterParts>) -> Result<u64> {
    let mut stmt = prepare(conn, sql)?;
    let writes = !stmt.readonly();
    let mut changes = 0;
    // The index of the part's first set in the whole batch, for errors.
    let mut base = 0;
    let mut part = Some(std::borrow::Cow::Borrowed(first));
    while let Some(sets) = part {
        run_part(conn, sql, &mut stmt, writes, &sets, base, &mut changes)?;
        base += sets.len();
        part = match later {
            Some(later) => later.next()?.map(std::borrow::Cow::Owned),
            None => None,
        };
    }
    Ok(changes)
}

/// Runs one part's sets; `base` is the index of its first set in the batch.
fn run_part(
    conn: &Connection,
    sql: &str,
    stmt: &mut rusqlite::Statement<'_>,
    writes: bool,
    sets: &BatchSets,
    base: usize,
    changes: &mut u64,
) -> Result<()> {
    let mut run = |i: usize, stmt: &mut rusqlite::Statement<'_>, bound: Result<()>| -> Result<()> {
        let i = base + i;
        let at = |e: Error| match e {
            Error::Range(m) => Error::Range(format!("parameter set {i}: {m}")),
            other => other.with_sql(sql),
        };
        bound.map_err(at)?;
        let mut rows = stmt.raw_query();
        while rows.next().map_err(|e| at(e.into()))?.is_some() {}
        drop(rows);
        if writes {
            *changes += conn.changes();
        }
        Ok(())
    };
    match sets {
        BatchSets::Each(each) => {
            for (i, params) in each.iter().enumerate() {
                let bound = bind(&mut *stmt, params);
                run(i, &mut *stmt, bound).map_err(|e| e.without_values(params.values()))?;
            }
        }
        BatchSets::Packed(packed) => {
            // Packed sets are arrays: `:b, :a` bound by position swapped the values silently.
            if !packed.set_lens.is_empty() {
                crate::bind::refuse_named(&*stmt, stmt.parameter_count()).map_err(|e| match e {
                    Error::Range(m) => Error::Range(format!("parameter set {base}: {m}")),
                    other => other,
                })?;
            }
            packed.for_each_set(|i, values| {
                let bound = crate::bind::bind_refs(&mut *stmt, values);
                run(i, &mut *stmt, bound).map_err(|e| {
                    e.without_values(values.iter().copied())
                })
            })?
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_scripts_whose_later_statements_depend_on_earlier_ones() {
        let conn = ReadConnection::new(Connection::open_in_memory().unwrap(), 16);
        execute(&conn, "CREATE TABLE a(x)", &Params::None).unwrap();
        execute(&conn, "DROP TABLE IF EXISTS a; CREATE TABLE a(y); -- done\n", &Params::None).unwrap();
        assert!(several_statements(&conn, "SELECT 1; SELECT 2").unwrap());
        assert!(!several_statements(&conn, "SELECT 1; -- c\n /* d */ ;").unwrap());
        assert!(!several_statements(&conn, "SELECT ';x'").unwrap());
        for blank in ["", "  ", ";", "/* c */", "-- nothing"] {
            assert!(matches!(execute(&conn, blank, &Params::None), Err(Error::Range(_))), "{blank:?}");
        }
        let with_params = execute(&conn, "INSERT INTO a VALUES (?); SELECT 1", &Params::Positional(vec![crate::Value::Integer(1)].into()));
        assert!(matches!(with_params, Err(Error::Range(_))));
    }

    #[test]
    fn only_plain_queries_take_the_cached_path_on_the_writer() {
        for sql in ["SELECT 1", " /* c */ -- d\n with x as (select 1) select * from x", "VALUES (1)", "select"] {
            assert!(starts_with_query(sql.as_bytes()), "{sql:?}");
        }
        for sql in ["PRAGMA x = 1", "EXPLAIN SELECT 1", "ATTACH 'a' AS b", "SELECTX", "", "/* SELECT */ PRAGMA a"] {
            assert!(!starts_with_query(sql.as_bytes()), "{sql:?}");
        }
        // A state-changing read is refused on the writer even once execute() cached it.
        let conn = ReadConnection::new(Connection::open_in_memory().unwrap(), 16);
        crate::statement_rules::install(&conn);
        execute(&conn, "PRAGMA cache_size = 7", &Params::None).unwrap();
        let read = read_on_writer(&conn, "PRAGMA cache_size = 7", &Params::None, ReadFormat::Json);
        assert!(matches!(read, Err(Error::Range(_))), "{read:?}");
        assert!(read_on_writer(&conn, "SELECT 1", &Params::None, ReadFormat::Json).is_ok());
    }

    /// How often SQLite compiled the statement of `conn` whose text is `sql` again
    /// (`sqlite3_next_stmt` walks every statement of the connection, cached ones too).
    fn times_prepared_again(conn: &Connection, sql: &str) -> i32 {
        // SAFETY: the handle is valid while `conn` is borrowed, and this thread alone uses
        // it; the statements walked belong to it and live on while nothing else runs; their
        // SQL is null (out of memory) or NUL-terminated text SQLite owns.
        unsafe {
            let db = conn.handle();
            let mut stmt = rusqlite::ffi::sqlite3_next_stmt(db, std::ptr::null_mut());
            while !stmt.is_null() {
                let text = rusqlite::ffi::sqlite3_sql(stmt);
                if !text.is_null() && std::ffi::CStr::from_ptr(text).to_bytes() == sql.as_bytes() {
                    return rusqlite::ffi::sqlite3_stmt_status(stmt, rusqlite::ffi::SQLITE_STMTSTATUS_REPREPARE, 0);
                }
                stmt = rusqlite::ffi::sqlite3_next_stmt(db, stmt);
            }
        }
        panic!("no statement of the connection has the text {sql:?}")
    }

    /// SQLite compiles a `LIMIT ?` with the value bound to it, and compiles the statement
    /// again when that parameter is cleared, or bound to another value: a cached write must
    /// keep its bindings between runs as a cached read does (experiment 097). Here a queue is
    /// worked off in batches of a fixed size, the limit the same on every run.
    #[test]
    fn a_cached_write_with_a_limit_is_not_compiled_again_on_each_run() {
        let conn = ReadConnection::new(Connection::open_in_memory().unwrap(), 16);
        conn.execute_batch(
            "CREATE TABLE jobs(id INTEGER PRIMARY KEY, what TEXT);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)
             INSERT INTO jobs(what) SELECT 'job ' || i FROM n;",
        )
        .unwrap();
        let sql = "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs ORDER BY id LIMIT ?)";
        for _ in 0..10 {
            let params = Params::Positional(vec![crate::Value::Integer(5)].into());
            assert_eq!(execute(&conn, sql, &params).unwrap().changes, 5);
        }
        let again = times_prepared_again(&conn, sql);
        assert!(again <= 1, "compiled again {again} times in 10 runs");
    }

    /// White space SQLite does not know, around a statement, as rusqlite's cache took it off.
    #[test]
    fn execute_takes_off_white_space_sqlite_would_refuse() {
        let conn = ReadConnection::new(Connection::open_in_memory().unwrap(), 16);
        // With the rules in place, a VACUUM's own BEGIN passes only when it is seen as one.
        crate::statement_rules::install(&conn);
        for sql in ["\u{0b}CREATE TABLE t(x)\u{0b}", "\u{a0}INSERT INTO t VALUES (1)\u{2003}", "\u{a0}VACUUM"] {
            execute(&conn, sql, &Params::None).unwrap_or_else(|e| panic!("{sql:?}: {e:?}"));
        }
        let n: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1);
    }

    /// A `;` in a literal, followed by what looks like a comment, ends no statement: SQLite's
    /// tail decides, not a scan of the text. Such a script runs whole through `execute` (not
    /// just its first statement), and `select` refuses it.
    #[test]
    fn a_semicolon_in_a_literal_does_not_hide_the_statements_after_it() {
        let conn = ReadConnection::new(Connection::open_in_memory().unwrap(), 16);
        crate::statement_rules::install(&conn);
        execute(&conn, "CREATE TABLE t(x)", &Params::None).unwrap();
        for script in ["INSERT INTO t VALUES ('a; -- x'); INSERT INTO t VALUES ('b')", "INSERT INTO t VALUES ('c;/*'); INSERT INTO t VALUES ('d')"] {
            assert_eq!(execute(&conn, script, &Params::None).unwrap().changes, 2, "{script:?}");
            let with_params = execute(&conn, script, &Params::Positional(vec![crate::Value::Integer(1)].into()));
            assert!(matches!(with_params, Err(Error::Range(_))), "{with_params:?}");
        }
        let n: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 4);
        for reads in ["SELECT 'a; -- x'; SELECT 2", "SELECT 'a;/*'; DELETE FROM t"] {
            let r = read(&conn, reads, &Params::None, ReadFormat::Json);
            assert!(matches!(r, Err(Error::Range(_))), "{reads:?}: {r:?}");
        }
    }

    /// Text that is only white space once trimmed holds no statement, as blank text.
    #[test]
    fn execute_refuses_text_that_is_blank_once_trimmed() {
        let conn = ReadConnection::new(Connection::open_in_memory().unwrap(), 16);
        for sql in ["\u{a0}", "\u{3000}-- note", "\u{0b};"] {
            assert!(matches!(execute(&conn, sql, &Params::None), Err(Error::Range(_))), "{sql:?}");
        }
    }

    /// The rows a cached write returns follow its table's columns after ALTER TABLE.
    #[test]
    fn returning_star_follows_a_new_column() {
        let conn = ReadConnection::new(Connection::open_in_memory().unwrap(), 16);
        execute(&conn, "CREATE TABLE t(x)", &Params::None).unwrap();
        let sql = "INSERT INTO t(x) VALUES (1) RETURNING *";
        let columns = |conn: &ReadConnection| {
            let rows = execute(conn, sql, &Params::None).unwrap().rows.expect("one row returned");
            u32::from_le_bytes(rows.bytes[8..12].try_into().unwrap())
        };
        assert_eq!(columns(&conn), 1);
        execute(&conn, "ALTER TABLE t ADD COLUMN y", &Params::None).unwrap();
        assert_eq!(columns(&conn), 2);
    }

    /// `execute` keeps a single statement's text in its cache, never a script's (its first
    /// statement alone would run from the cache), and keeps nothing with a capacity of 0.
    #[test]
    fn execute_caches_single_statements_only_and_none_at_capacity_zero() {
        let conn = ReadConnection::new(Connection::open_in_memory().unwrap(), 16);
        execute(&conn, "CREATE TABLE t(x)", &Params::None).unwrap();
        let cached = conn.cached_statements();
        let script = "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)";
        for _ in 0..2 {
            assert_eq!(execute(&conn, script, &Params::None).unwrap().changes, 2);
        }
        assert_eq!(conn.cached_statements(), cached, "the script was cached");
        execute(&conn, "INSERT INTO t VALUES (3)", &Params::None).unwrap();
        assert_eq!(conn.cached_statements(), cached + 1);

        let none = ReadConnection::new(Connection::open_in_memory().unwrap(), 0);
        execute(&none, "CREATE TABLE t(x)", &Params::None).unwrap();
        for i in 0..3 {
            let params = Params::Positional(vec![crate::Value::Integer(i)].into());
            execute(&none, "INSERT INTO t VALUES (?)", &params).unwrap();
        }
        assert_eq!(none.cached_statements(), 0);
        let sum: i64 = none.query_row("SELECT sum(x) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(sum, 3);
    }

    /// Run on a thread with a small stack: rusqlite's recursive prepare overflowed 2 MiB
    /// with ~7,000 statements; walking the text must not grow the stack at all.
    fn on_small_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new().stack_size(256 * 1024).spawn(f).unwrap().join().unwrap();
    }

    #[test]
    fn long_scripts_run_without_recursion() {
        on_small_stack(|| {
            let conn = ReadConnection::new(Connection::open_in_memory().unwrap(), 16);
            execute(&conn, "CREATE TABLE t(x)", &Params::None).unwrap();
            let script = "INSERT INTO t VALUES (1);".repeat(20_000);
            assert_eq!(execute(&conn, &script, &Params::None).unwrap().changes, 20_000);
            let selects = "SELECT 1;".repeat(20_000);
            assert_eq!(execute(&conn, &selects, &Params::None).unwrap().changes, 0);
            for r in [
                read(&conn, &selects, &Params::None, ReadFormat::Json).map(drop),
                execute_batch(&conn, &selects, &BatchSets::Each(vec![Params::None]), None).map(drop),
            ] {
                assert!(matches!(r, Err(Error::Range(_))), "{r:?}");
            }
        });
    }

    /// SQLite's tokenizer refuses a vertical tab, but its own script runner (`sqlite3_exec`)
    /// skips one after each statement as white space: a script with one runs whole (here
    /// also with one before its first statement).
    #[test]
    fn a_vertical_tab_between_statements_is_white_space() {
        let conn = ReadConnection::new(Connection::open_in_memory().unwrap(), 16);
        execute(&conn, "CREATE TABLE t(x)", &Params::None).unwrap();
        for sql in ["INSERT INTO t VALUES (1);\u{0b}INSERT INTO t VALUES (2)", "\u{0b}INSERT INTO t VALUES (3); \u{0b}\n\u{0b}INSERT INTO t VALUES (4);\u{0b}"] {
            execute(&conn, sql, &Params::None).unwrap_or_else(|e| panic!("{sql:?}: {e:?}"));
        }
        let n: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 4);
    }

    #[test]
    fn a_failing_statement_in_a_script_stops_it_with_its_error() {
        let conn = ReadConnection::new(Connection::open_in_memory().unwrap(), 16);
        let r = execute(&conn, "CREATE TABLE t(x UNIQUE); INSERT INTO t VALUES (1); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)", &Params::None);
        match r {
            Err(Error::Sqlite { code, sql: Some(_), .. }) => assert_eq!(code, rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE),
            other => panic!("{other:?}"),
        }
        let n: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1, "statements after the failing one did not run");
        assert!(matches!(execute(&conn, "SELECT 1\0; DROP TABLE t", &Params::None), Err(Error::Type(_))));
    }
}
