//! What a query reads, from SQLite's authorizer: preparing a statement reports every
//! (schema, table, column) it reads, through joins, views, subqueries and CTEs.

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
}

/// Eponymous virtual tables that report the database's state (pragma functions, `dbstat`),
/// which no write names: see `ANY_STATE`. (json_each, generate_series and the like are
/// functions of their arguments, whose own sources report themselves.)
fn reads_state(table: &str) -> bool {
    let t = table.as_bytes();
    (t.len() > 7 && t[..7].eq_ignore_ascii_case(b"pragma_")) || table.eq_ignore_ascii_case("dbstat")
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
    if action == ffi::SQLITE_READ || action == ffi::SQLITE_PRAGMA {
        // SAFETY: `ctx` is the collector `dependencies` registered, alive (on its stack) until
        // it unregisters the authorizer; called on that thread during its prepare.
        let c = &mut *(ctx as *mut Collector);
        if action == ffi::SQLITE_PRAGMA {
            c.pragma = true;
        } else {
            c.reads.push((opt_str(schema), opt_str(table), opt_str(column)));
        }
    }
    // This stands in for the statement rules while it is installed: a live query is a read,
    // and some pragmas act while they are prepared.
    // SAFETY: the arguments come from SQLite as it passes them to authorizers.
    crate::statement_rules::answer(crate::statement_rules::Rule::Read, action, table, column, schema)
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
    let mut collector = Collector { reads: Vec::new(), pragma: false };
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

    let mut columns_of: HashMap<String, Option<Option<Vec<String>>>> = HashMap::new();
    let mut deps = Dependencies::new();
    if collector.pragma {
        deps.entry(ANY_STATE.to_owned()).or_default().any_column = true;
    }
    for (schema, table, column) in collector.reads {
        if reads_state(&table) {
            deps.entry(ANY_STATE.to_owned()).or_default().any_column = true;
            continue;
        }
        let schema = if schema.is_empty() { "main".to_owned() } else { schema };
        // SQLite's own tables (sqlite_sequence, sqlite_stat1, ...) change without the
        // preupdate hook: any write may have changed them.
        if table.len() >= 7 && table[..7].eq_ignore_ascii_case("sqlite_") {
            deps.entry(ANY_TABLE.to_owned()).or_default().any_column = true;
            continue;
        }
        let key = table_key(&schema, &table);
        let names = columns_of
            .entry(key.clone())
            .or_insert_with(|| table_columns(conn, &schema, &table));
        // Not a stored table (a CTE or a subquery's name): its real sources report themselves.
        let Some(names) = names else { continue };
        let Some(names) = names.as_ref() else {
            deps.entry(ANY_TABLE.to_owned()).or_default().any_column = true;
            continue;
        };
        let dep = deps.entry(key).or_default();
        if column.is_empty() {
            // count(*) and the like read no column: only INSERT and DELETE matter.
            continue;
        }
        match names.iter().position(|n| n.eq_ignore_ascii_case(&column)) {
            Some(i) => {
                // The first column read of the table: the keys of its indexes are read too.
                if dep.columns.is_empty() && !dep.any_column {
                    add_index_keys(conn, &schema, &table, dep);
                }
                if !dep.columns.contains(&i) {
                    dep.columns.push(i);
                }
            }
            None => dep.any_column = true,
        }
    }
    Ok(deps)
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
