//! What a query reads: SQLite's authorizer reports, as a statement is prepared, every
//! (schema, table, column) it names, through joins, views, subqueries and CTEs; the compiled
//! program adds what SQLite reads without naming it (see `program_reads`).

use crate::error::{Error, Result};
use crate::hooks::{table_key, TableChange};
use rusqlite::{ffi, Connection};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};

/// What a query reads of one table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableDep {
    /// Column indexes (as the preupdate hook numbers them) the query reads.
    pub columns: Vec<usize>,
    /// A read SQLite could not name as a table column (e.g. rowid): any UPDATE counts.
    pub any_column: bool,
}

impl TableDep {
    /// Does this committed change of the table affect a query with this dependency?
    /// INSERT and DELETE always do; an UPDATE only through a column the query reads.
    pub fn affected_by(&self, change: &TableChange) -> bool {
        change.whole_rows
            || (self.any_column && change.columns.iter().any(|w| *w != 0))
            || self.columns.iter().any(|&c| change.column_changed(c))
    }
}

/// Tables (keyed `schema.table`, lower case) a query reads.
pub type Dependencies = HashMap<String, TableDep>;

/// The key of a dependency on every table: virtual tables (FTS5, R*Tree, ...) write through
/// tables of their own and the preupdate hook does not see them, so a query that reads one
/// re-runs on every commit (and its result hash keeps it silent when nothing changed).
pub const ANY_TABLE: &str = "*";

/// The key of a dependency on the database's state beyond its rows: a pragma's value
/// (`PRAGMA user_version`, `pragma_page_count`, `dbstat`). Writes that change those name no
/// table (`PRAGMA user_version = 2` changes no row), so a query that reads one re-runs on
/// every commit, empty ones too.
pub const ANY_STATE: &str = "**";

struct Collector {
    reads: Vec<(String, String, String)>,
    /// The statement is a pragma (its query form): it reads state, not rows.
    pragma: bool,
    /// The connection leaves out CHECK constraints (statement_rules::mark_checks_left_out).
    checks_left_out: bool,
}

/// Eponymous virtual tables that report the database's state (pragma functions, `dbstat`),
/// which no write names: see `ANY_STATE`. (json_each, generate_series and the like are
/// functions of their arguments, whose own sources report themselves.)
fn reads_state(table: &str) -> bool {
    (table.len() > 7 && has_prefix(table, "pragma_")) || table.eq_ignore_ascii_case("dbstat")
}

unsafe fn opt_str(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: SQLite passes NUL-terminated names valid during the authorizer call.
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

unsafe extern "C" fn collect(
    ctx: *mut c_void,
    action: c_int,
    table: *const c_char,
    column: *const c_char,
    schema: *const c_char,
    _accessor: *const c_char,
) -> c_int {
    // SAFETY: `ctx` is the collector `dependencies` registered, alive (on its stack) until
    // it unregisters the authorizer; called on that thread during its prepare.
    let c = &mut *(ctx as *mut Collector);
    if action == ffi::SQLITE_READ || action == ffi::SQLITE_PRAGMA {
        if action == ffi::SQLITE_PRAGMA {
            c.pragma = true;
        } else {
            c.reads.push((opt_str(schema), opt_str(table), opt_str(column)));
        }
    }
    // This stands in for the statement rules while it is installed: a live query is a read,
    // and some pragmas act while they are prepared.
    // SAFETY: the arguments come from SQLite as it passes them to authorizers.
    crate::statement_rules::answer(crate::statement_rules::Rule::Read, action, table, column, schema, c.checks_left_out)
}

/// Prepares `sql` (not through the statement cache: a cached statement would not call the
/// authorizer again) and returns what it reads.
pub fn dependencies(conn: &Connection, sql: &str) -> Result<Dependencies> {
    // Preparing uses the connection's cached schema, which may predate a schema change made
    // by another connection; reading the schema table checks the schema cookie and reloads.
    conn.prepare_cached("SELECT 1 FROM sqlite_schema LIMIT 1")
        .and_then(|mut s| s.raw_query().next().map(|_| ()))
        .map_err(Error::from)?;
    // Before rusqlite's prepare sees the text: it recurses once per extra statement.
    crate::query::require_one_statement(conn, sql)?;
    let mut collector = Collector { reads: Vec::new(), pragma: false, checks_left_out: crate::statement_rules::checks_left_out(conn) };
    // SAFETY: the handle is valid while `conn` is borrowed; the collector outlives the
    // authorizer's registration (removed below before `collector` goes out of scope).
    let db = unsafe { conn.handle() };
    unsafe {
        ffi::sqlite3_set_authorizer(db, Some(collect), &mut collector as *mut Collector as *mut c_void);
    }
    let prepared = crate::statement_rules::under(crate::statement_rules::Rule::Read, || {
        conn.prepare(sql).map(drop).map_err(|e| Error::from(e).with_sql(sql))
    });
    // Back to the statement rules every connection carries.
    crate::statement_rules::install(conn);
    prepared?;

    let mut deps = Dependencies::new();
    if collector.pragma {
        deps.entry(ANY_STATE.to_owned()).or_default().any_column = true;
    }
    let mut columns_of: HashMap<String, Option<Option<Vec<String>>>> = HashMap::new();
    for (schema, table, column) in collector.reads {
        let read = if column.is_empty() { ColumnRead::Nothing } else { ColumnRead::Named(column) };
        add_read(conn, &mut deps, &mut columns_of, schema, &table, read);
    }
    match program_reads(conn, sql) {
        Some(reads) => {
            for (schema, table, read) in reads {
                add_read(conn, &mut deps, &mut columns_of, schema, &table, read);
            }
        }
        // A program that cannot be listed: any commit may have changed what it reads.
        None => deps.entry(ANY_TABLE.to_owned()).or_default().any_column = true,
    }
    Ok(deps)
}

/// What a query reads of a table's columns.
enum ColumnRead {
    /// The table's rows, none of its columns (`count(*)`).
    Nothing,
    /// A column by name, as the authorizer reports it.
    Named(String),
    /// A column by its index in the table (`pragma_table_xinfo`'s order, the preupdate
    /// hook's).
    Index(usize),
    /// Something of the row that cannot be named: any UPDATE counts.
    Any,
}

/// ASCII-case-insensitive `starts_with`, on bytes: a table's name may have a multibyte
/// character where the prefix ends.
fn has_prefix(name: &str, prefix: &str) -> bool {
    name.len() >= prefix.len() && name.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

fn add_read(
    conn: &Connection,
    deps: &mut Dependencies,
    columns_of: &mut HashMap<String, Option<Option<Vec<String>>>>,
    schema: String,
    table: &str,
    read: ColumnRead,
) {
    if reads_state(table) {
        deps.entry(ANY_STATE.to_owned()).or_default().any_column = true;
        return;
    }
    let schema = if schema.is_empty() { "main".to_owned() } else { schema };
    // SQLite's own tables (sqlite_sequence, sqlite_stat1, ...) change without the
    // preupdate hook: any write may have changed them.
    if has_prefix(table, "sqlite_") {
        deps.entry(ANY_TABLE.to_owned()).or_default().any_column = true;
        return;
    }
    let key = table_key(&schema, table);
    let names = columns_of.entry(key.clone()).or_insert_with(|| table_columns(conn, &schema, table));
    // Not a stored table (a CTE or a subquery's name): its real sources report themselves.
    let Some(names) = names else { return };
    let Some(names) = names.as_ref() else {
        deps.entry(ANY_TABLE.to_owned()).or_default().any_column = true;
        return;
    };
    let index = match read {
        // count(*) and the like read no column: only INSERT and DELETE matter.
        ColumnRead::Nothing => {
            deps.entry(key).or_default();
            return;
        }
        ColumnRead::Named(column) => names.iter().position(|n| n.eq_ignore_ascii_case(&column)),
        ColumnRead::Index(i) => (i < names.len()).then_some(i),
        ColumnRead::Any => None,
    };
    let dep = deps.entry(key).or_default();
    match index {
        Some(i) => {
            // The first column read of the table: the keys of its indexes are read too.
            if dep.columns.is_empty() && !dep.any_column {
                add_index_keys(conn, &schema, table, dep);
            }
            if !dep.columns.contains(&i) {
                dep.columns.push(i);
            }
        }
        None => dep.any_column = true,
    }
}

/// The tables and columns the compiled program of `sql` reads from b-trees, from its
/// `EXPLAIN` listing: its `OpenRead` cursors (a table's or an index's root page) and the
/// `Column` reads on them. The authorizer misses some: SQLite builds a `USING` or `NATURAL`
/// join's condition without it, so `SELECT a.x FROM a JOIN b USING (k)` reports neither `k`
/// nor `b`. A column read by its position in a b-tree (an index's, or a table's storage
/// order, which is not the table's for a WITHOUT ROWID table or past a VIRTUAL generated
/// column) is mapped to the table's column; a seek adds the b-tree's key columns. Virtual
/// tables have no b-tree here; the authorizer reports them. None if the listing cannot be
/// had.
fn program_reads(conn: &Connection, sql: &str) -> Option<Vec<(String, String, ColumnRead)>> {
    const OPFLAG_P2ISREG: i64 = 0x10;
    let mut cursors: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
    let mut column_reads: Vec<(i64, i64)> = Vec::new();
    let mut sought: Vec<i64> = Vec::new();
    let listed = crate::statement_rules::under(crate::statement_rules::Rule::Read, || {
        let mut stmt = conn.prepare(&format!("EXPLAIN {sql}"))?;
        // Not bound: a listing needs no values, and `query([])` refuses a statement that has
        // parameters (every live query with parameters then depended on every table).
        let mut rows = stmt.raw_query();
        while let Some(r) = rows.next()? {
            let opcode: String = r.get(1)?;
            let (p1, p2, p3, p5): (i64, i64, i64, i64) = (r.get(2)?, r.get(3)?, r.get(4)?, r.get(6)?);
            match opcode.as_str() {
                "OpenRead" | "ReopenIdx" if p5 & OPFLAG_P2ISREG == 0 => cursors.entry(p1).or_default().push((p3, p2)),
                // A root page in a register: which b-tree is not known here.
                "OpenRead" | "ReopenIdx" => return Err(Error::Internal("a root page in a register".into())),
                "Column" => column_reads.push((p1, p2)),
                // Comparing a cursor's key with a value: an index's key columns decide
                // which rows a seek finds (`JOIN r USING (k)` through an index on `r(k)`
                // reads no column of `r`).
                op if op.starts_with("Seek") || (op.starts_with("Idx") && op != "IdxRowid") || matches!(op, "Found" | "NotFound" | "NoConflict" | "IfNoHope") => {
                    sought.push(p1)
                }
                _ => {}
            }
        }
        Ok(())
    });
    listed.ok()?;

    let schemas: HashMap<i64, String> = {
        let mut stmt = conn.prepare("SELECT seq, name FROM pragma_database_list").ok()?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))).ok()?;
        rows.collect::<rusqlite::Result<_>>().ok()?
    };
    let mut trees: HashMap<(i64, i64), Option<Tree>> = HashMap::new();
    let mut reads = Vec::new();
    for (&cursor, opened) in &cursors {
        for &(db, root) in opened {
            let tree = trees.entry((db, root)).or_insert_with(|| Tree::of(conn, schemas.get(&db)?, root));
            // A b-tree that cannot be named: any commit may have changed it.
            let tree = tree.as_ref()?;
            reads.push((tree.schema.clone(), tree.table.clone(), ColumnRead::Nothing));
            let keys = if sought.contains(&cursor) { 0..tree.key_columns } else { 0..0 };
            let columns = column_reads.iter().filter(|(c, _)| *c == cursor).map(|&(_, column)| column);
            for column in keys.chain(columns) {
                let Some(read) = tree.column(column) else { continue };
                reads.push((tree.schema.clone(), tree.table.clone(), read));
            }
        }
    }
    Some(reads)
}

/// A b-tree a program reads: a table's, or one of its indexes'.
struct Tree {
    schema: String,
    table: String,
    /// The table's column index (`cid`) of each of the b-tree's columns, by position (as
    /// a program's `Column` reads number them): -1 for the rowid, -2 for an expression.
    /// None if not known. A rowid table stores its columns in the table's order less its
    /// VIRTUAL generated ones; a WITHOUT ROWID table stores them in its primary key
    /// index's order.
    cids: Option<Vec<i64>>,
    /// How many of the b-tree's first columns are its key, which a seek compares: an
    /// index's, a WITHOUT ROWID table's primary key (0 for a rowid table, sought by rowid).
    key_columns: i64,
}

impl Tree {
    fn of(conn: &Connection, schema: &str, root: i64) -> Option<Tree> {
        let (table, index) = b_tree(conn, schema, root)?;
        let columns = match &index {
            Some(index) => index_columns(conn, schema, index),
            None => table_storage(conn, schema, &table),
        };
        let (cids, key_columns) = columns.map_or((None, 0), |(c, k)| (Some(c), k));
        Some(Tree { schema: schema.to_owned(), table, cids, key_columns })
    }

    /// What reading column `n` of this b-tree reads of its table; None for the rowid, which
    /// changes only with whole rows.
    fn column(&self, n: i64) -> Option<ColumnRead> {
        let cid = usize::try_from(n).ok().and_then(|n| self.cids.as_ref()?.get(n).copied());
        match cid {
            Some(-1) => None,
            Some(cid) => Some(usize::try_from(cid).map_or(ColumnRead::Any, ColumnRead::Index)),
            None => Some(ColumnRead::Any),
        }
    }
}

/// The table a root page belongs to, and the index's name if it is an index's.
fn b_tree(conn: &Connection, schema: &str, root: i64) -> Option<(String, Option<String>)> {
    if root == 1 {
        return Some(("sqlite_schema".to_owned(), None));
    }
    let sql = format!("SELECT type, name, tbl_name FROM \"{}\".sqlite_schema WHERE rootpage = ?1", schema.replace('"', "\"\""));
    let (kind, name, table): (String, String, String) =
        conn.query_row(&sql, [root], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).ok()?;
    Some((table, (kind == "index").then_some(name)))
}

/// An index's columns by position (`pragma_index_xinfo`'s `seqno`) as the table's column
/// indexes, and how many of them are its key.
fn index_columns(conn: &Connection, schema: &str, index: &str) -> Option<(Vec<i64>, i64)> {
    let mut stmt = conn.prepare("SELECT cid, key FROM pragma_index_xinfo(?1, ?2) ORDER BY seqno").ok()?;
    let rows = stmt.query_map([index, schema], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, bool>(1)?))).ok()?;
    let columns = rows.collect::<rusqlite::Result<Vec<(i64, bool)>>>().ok()?;
    let keys = columns.iter().filter(|c| c.1).count() as i64;
    Some((columns.into_iter().map(|c| c.0).collect(), keys))
}

/// A table's columns in the order its own b-tree stores them, as the table's column indexes,
/// and how many of them are the key a seek compares (a WITHOUT ROWID table's b-tree is its
/// primary key's index, which `sqlite_schema` lists with the table's root page).
fn table_storage(conn: &Connection, schema: &str, table: &str) -> Option<(Vec<i64>, i64)> {
    let without_rowid: bool = conn
        .query_row("SELECT wr FROM pragma_table_list(?1) WHERE schema = ?2 COLLATE NOCASE", [table, schema], |r| r.get(0))
        .ok()?;
    if without_rowid {
        let pk = "SELECT name FROM pragma_index_list(?1, ?2) WHERE origin = 'pk'";
        let pk: String = conn.query_row(pk, [table, schema], |r| r.get(0)).ok()?;
        return index_columns(conn, schema, &pk);
    }
    // hidden 2: a VIRTUAL generated column, computed rather than stored.
    let sql = "SELECT cid FROM pragma_table_xinfo(?1, ?2) WHERE hidden <> 2 ORDER BY cid";
    let mut stmt = conn.prepare(sql).ok()?;
    let rows = stmt.query_map([table, schema], |r| r.get::<_, i64>(0)).ok()?;
    rows.collect::<rusqlite::Result<Vec<i64>>>().ok().map(|cids| (cids, 0))
}

/// Adds the key columns of the table's indexes (its primary key's, for a WITHOUT ROWID
/// table) to what a query that reads some of its columns reads. Without a full `ORDER BY`,
/// rows come in the order of whichever index SQLite scans, and a `LIMIT` keeps the first
/// ones: `SELECT a FROM c LIMIT 1` answered from an index on `(b, a)` changes when `b` does,
/// though it names no `b`. Every index counts, not only the one the plan uses now: a plan
/// may change (statistics, a re-preparation), and the dependencies are derived once. A
/// query that reads no column of the table (`count(*)`) sees no order. An index on an
/// expression makes any UPDATE count, as a read SQLite cannot name does.
fn add_index_keys(conn: &Connection, schema: &str, table: &str, dep: &mut TableDep) {
    let Some(keys) = index_keys(conn, schema, table) else {
        dep.any_column = true;
        return;
    };
    for cid in keys {
        match usize::try_from(cid) {
            Ok(c) => {
                if !dep.columns.contains(&c) {
                    dep.columns.push(c);
                }
            }
            // The rowid (-1) changes only with whole rows; an expression (-2) may read any
            // column.
            Err(_) if cid == -1 => {}
            Err(_) => dep.any_column = true,
        }
    }
}

/// The key columns (`cid`s) of every index of a table; None if SQLite could not list them.
fn index_keys(conn: &Connection, schema: &str, table: &str) -> Option<Vec<i64>> {
    let sql = "SELECT x.cid FROM pragma_index_list(?1, ?2) AS l, pragma_index_xinfo(l.name, ?2) AS x WHERE x.key";
    let mut stmt = conn.prepare(sql).ok()?;
    let rows = stmt.query_map([table, schema], |r| r.get::<_, i64>(0)).ok()?;
    rows.collect::<rusqlite::Result<Vec<i64>>>().ok()
}

/// Column names of a stored table in storage order; `Some(None)` for a virtual table; None
/// if no such table exists.
fn table_columns(conn: &Connection, schema: &str, table: &str) -> Option<Option<Vec<String>>> {
    let quoted_schema = schema.replace('"', "\"\"");
    let kind_sql = format!("SELECT sql FROM \"{quoted_schema}\".sqlite_schema WHERE type = 'table' AND name = ?1 COLLATE NOCASE");
    if let Ok(Some(create)) = conn.query_row(&kind_sql, [table], |r| r.get::<_, Option<String>>(0)) {
        if create.trim_start().get(..14).is_some_and(|p| p.eq_ignore_ascii_case("create virtual")) {
            return Some(None);
        }
    }
    stored_columns(conn, schema, table).map(Some)
}

fn stored_columns(conn: &Connection, schema: &str, table: &str) -> Option<Vec<String>> {
    let sql = format!("PRAGMA \"{}\".table_xinfo(\"{}\")", schema.replace('"', "\"\""), table.replace('"', "\"\""));
    let mut stmt = conn.prepare(&sql).ok()?;
    let names: Vec<String> = stmt.query_map([], |r| r.get::<_, String>(1)).ok()?.filter_map(|r| r.ok()).collect();
    (!names.is_empty()).then_some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE a(id INTEGER PRIMARY KEY, x, y);
             CREATE TABLE b(id INTEGER PRIMARY KEY, a_id, z);
             CREATE TABLE c(q);
             CREATE VIEW v AS SELECT a.x, b.z FROM a JOIN b ON b.a_id = a.id;",
        )
        .unwrap();
        c
    }

    #[test]
    fn finds_tables_and_columns_through_joins_views_subqueries_and_ctes() {
        let c = conn();
        let d = dependencies(&c, "SELECT x FROM a WHERE id IN (SELECT a_id FROM b)").unwrap();
        assert_eq!(d["main.a"].columns.iter().copied().collect::<std::collections::BTreeSet<_>>(), [0, 1].into());
        assert!(d.contains_key("main.b"));
        assert!(!d.contains_key("main.c"));
        let d = dependencies(&c, "SELECT * FROM v").unwrap();
        assert!(d.contains_key("main.a") && d.contains_key("main.b"));
        let d = dependencies(&c, "WITH w AS (SELECT z FROM b) SELECT * FROM w").unwrap();
        assert_eq!(d.keys().collect::<Vec<_>>(), ["main.b"]);
    }

    #[test]
    fn a_virtual_table_depends_on_everything() {
        let c = conn();
        c.execute_batch("CREATE VIRTUAL TABLE docs USING fts5(body)").unwrap();
        let d = dependencies(&c, "SELECT body FROM docs WHERE docs MATCH 'x'").unwrap();
        assert!(d.contains_key(ANY_TABLE), "{d:?}");
    }

    /// Without a full ORDER BY, rows come in an index's order, and a LIMIT keeps the first:
    /// an index's key columns count as read by a query that reads the table's columns.
    #[test]
    fn the_key_columns_of_a_tables_indexes_count_as_read() {
        let c = conn();
        c.execute_batch(
            "CREATE TABLE o(a, b, pad); CREATE INDEX o_ba ON o(b, a);
             CREATE TABLE w(k PRIMARY KEY, v) WITHOUT ROWID;
             CREATE TABLE e(x, y, z); CREATE INDEX e_lower ON e(lower(y));",
        )
        .unwrap();
        let cols = |sql: &str, table: &str| {
            let d = dependencies(&c, sql).unwrap();
            let dep = &d[table];
            (dep.columns.iter().copied().collect::<std::collections::BTreeSet<_>>(), dep.any_column)
        };
        assert_eq!(cols("SELECT a FROM o LIMIT 1", "main.o"), ([0, 1].into(), false));
        assert_eq!(cols("SELECT v FROM w", "main.w"), ([0, 1].into(), false));
        assert_eq!(cols("SELECT x FROM e", "main.e"), ([0].into(), true));
        // count(*) reads no column and sees no order: only INSERT and DELETE re-run it.
        assert_eq!(cols("SELECT count(*) FROM o", "main.o"), ([].into(), false));
    }

    /// SQLite builds a USING or NATURAL join's condition without the authorizer: the
    /// program's reads name the join column, and a table read only through it.
    #[test]
    fn a_using_or_natural_joins_columns_count_as_read() {
        let c = conn();
        c.execute_batch(
            "CREATE TABLE p(k, x); CREATE TABLE q(k, y);
             CREATE TABLE r(k, j, z); CREATE INDEX r_k ON r(k);
             CREATE VIEW pq AS SELECT x, y FROM p JOIN q USING (k);",
        )
        .unwrap();
        let cols = |sql: &str, table: &str| {
            let d = dependencies(&c, sql).unwrap();
            let dep = d.get(table).unwrap_or_else(|| panic!("{table} not in {d:?} for {sql}"));
            (dep.columns.iter().copied().collect::<std::collections::BTreeSet<_>>(), dep.any_column)
        };
        assert_eq!(cols("SELECT p.x FROM p JOIN q USING (k)", "main.p"), ([0, 1].into(), false));
        assert_eq!(cols("SELECT p.x FROM p JOIN q USING (k)", "main.q"), ([0].into(), false));
        assert_eq!(cols("SELECT x, y FROM p NATURAL JOIN q", "main.q"), ([0, 1].into(), false));
        assert_eq!(cols("SELECT * FROM pq", "main.q"), ([0, 1].into(), false));
        // Read through an index: the index's column is the table's.
        assert_eq!(cols("SELECT x FROM p LEFT JOIN r USING (k)", "main.r").0, [0].into());
        // Sought by a WITHOUT ROWID table's primary key, whose index is the table's b-tree.
        c.execute_batch("CREATE TABLE w(j, k, v, PRIMARY KEY (k, j)) WITHOUT ROWID").unwrap();
        assert_eq!(cols("SELECT p.x FROM p JOIN w USING (k)", "main.w").0, [0, 1].into());
    }

    /// The program of a statement with parameters is listed too (unbound), not given up on.
    #[test]
    fn a_query_with_parameters_depends_on_what_it_reads_only() {
        let c = conn();
        for sql in ["SELECT x FROM a WHERE id = ?", "SELECT x FROM a WHERE id = :id", "SELECT z FROM a JOIN b USING (id) WHERE x = ?1"] {
            let d = dependencies(&c, sql).unwrap();
            assert!(!d.contains_key(ANY_TABLE), "{sql}: {d:?}");
            assert!(d.contains_key("main.a"), "{sql}: {d:?}");
        }
    }

    /// A name with a multibyte character where "sqlite_" or "pragma_" would end.
    #[test]
    fn a_table_name_with_a_multibyte_character_is_read_like_any_other() {
        let c = conn();
        c.execute_batch("CREATE TABLE \"ユーザー\"(x); CREATE TABLE \"abcdef☃\"(y)").unwrap();
        let d = dependencies(&c, "SELECT x, y FROM \"ユーザー\", \"abcdef☃\"").unwrap();
        assert_eq!(d["main.ユーザー"].columns, [0]);
        assert_eq!(d["main.abcdef☃"].columns, [0]);
    }

    #[test]
    fn column_level_matching() {
        let c = conn();
        let d = dependencies(&c, "SELECT x FROM a").unwrap();
        let dep = &d["main.a"];
        let mut only_y = TableChange::default();
        only_y.columns = vec![1 << 2];
        assert!(!dep.affected_by(&only_y));
        let mut x = TableChange::default();
        x.columns = vec![1 << 1];
        assert!(dep.affected_by(&x));
        assert!(dep.affected_by(&TableChange { whole_rows: true, columns: vec![] }));
    }
}
