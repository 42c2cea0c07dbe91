//! Opening connections: the writer (read-write, creates the file, sets WAL) and the readers
//! (read-only), with the project's default pragmas and the caller's own.

use crate::error::{Error, Result};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct OpenOptions {
    pub path: String,
    pub readers: usize,
    pub readonly: bool,
    pub busy_timeout_ms: u32,
    /// Applied to every connection after the defaults, in order.
    pub pragmas: Vec<(String, String)>,
    /// Prepared statements kept per connection.
    pub statement_cache: usize,
}

impl OpenOptions {
    pub fn new(path: impl Into<String>) -> Self {
        OpenOptions {
            path: path.into(),
            readers: default_readers(),
            readonly: false,
            busy_timeout_ms: 5000,
            pragmas: Vec::new(),
            statement_cache: 128,
        }
    }
}

/// clamp(cores - 1, 2, 4): leave a core for the JS thread, but never fewer than two readers
/// so one slow query cannot block every other read.
pub fn default_readers() -> usize {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    cores.saturating_sub(1).clamp(2, 4)
}

static MEMORY_DB_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Where the connections of one database open.
#[derive(Debug, Clone)]
pub struct Location {
    pub uri: String,
    /// For `:memory:`: the private file that holds it, deleted when the database closes.
    pub temporary: Option<PathBuf>,
}

impl Location {
    /// `:memory:` becomes a private database file in RAM-backed storage (`/dev/shm` where it
    /// exists), so the writer and every reader share it with WAL's concurrency: SQLite's own
    /// shared in-memory databases block every reader while a write transaction is open.
    pub fn resolve(path: &str) -> Location {
        if path == ":memory:" {
            let n = MEMORY_DB_COUNTER.fetch_add(1, Ordering::Relaxed);
            let shm = Path::new("/dev/shm");
            let dir = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
            let file = dir.join(format!("quietsqlite-memory-{}-{n}.db", std::process::id()));
            let uri = format!("file:{}", uri_escape(&file.to_string_lossy()));
            return Location { uri, temporary: Some(file) };
        }
        if path.starts_with("file:") {
            return Location { uri: path.to_owned(), temporary: None };
        }
        Location { uri: format!("file:{}", uri_escape(path)), temporary: None }
    }

    /// The URI for read-only connections: a `mode=rw`/`mode=rwc` query parameter would
    /// contradict their read-only open flag (SQLITE_PERM), so it becomes `mode=ro`.
    pub fn reader_uri(&self) -> String {
        let Some((path, query)) = self.uri.split_once('?') else { return self.uri.clone() };
        let params: Vec<&str> = query
            .split('&')
            .map(|p| if p == "mode=rw" || p == "mode=rwc" { "mode=ro" } else { p })
            .collect();
        format!("{path}?{}", params.join("&"))
    }

    /// In-memory URIs give every connection its own private database, which cannot work
    /// with separate reader connections.
    pub fn check_shareable(&self) -> Result<()> {
        let uri = self.uri.to_ascii_lowercase();
        if self.temporary.is_none() && (uri.starts_with("file::memory:") || uri.contains("mode=memory")) {
            return Err(Error::Type(
                "in-memory URIs are private to one connection; open ':memory:' instead".into(),
            ));
        }
        Ok(())
    }

    /// Deletes a temporary database's files (after every connection closed).
    pub fn remove_temporary(&self) {
        if let Some(file) = &self.temporary {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut p = file.clone().into_os_string();
                p.push(suffix);
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// Percent-escapes the characters that would end or alter a URI path.
fn uri_escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            '%' | '?' | '#' => out.push_str(&format!("%{:02X}", c as u32)),
            _ => out.push(c),
        }
    }
    out
}

pub fn open_writer(loc: &Location, opts: &OpenOptions) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_EXRESCODE;
    let conn = Connection::open_with_flags(&loc.uri, flags)?;
    conn.busy_timeout(Duration::from_millis(opts.busy_timeout_ms as u64))?;
    {
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::sqlite(
                rusqlite::ffi::SQLITE_ERROR,
                format!("could not switch the database to WAL mode (it reports '{mode}')"),
            ));
        }
    }
    conn.execute_batch(
        "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
    )?;
    let opts_for_writer = opts;
    // Checkpoints are scheduled by the writer when it is idle, not run on the commit path.
    conn.execute_batch("PRAGMA wal_autocheckpoint = 0")?;
    finish_open(&conn, opts_for_writer, false)?;
    crate::statement_rules::install(&conn);
    Ok(conn)
}

pub fn open_reader(loc: &Location, opts: &OpenOptions) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_EXRESCODE;
    let conn = Connection::open_with_flags(&loc.reader_uri(), flags)?;
    conn.busy_timeout(Duration::from_millis(opts.busy_timeout_ms as u64))?;
    conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;")?;
    finish_open(&conn, opts, true)?;
    crate::statement_rules::install(&conn);
    Ok(conn)
}

fn finish_open(conn: &Connection, opts: &OpenOptions, reader: bool) -> Result<()> {
    conn.set_prepared_statement_cache_capacity(opts.statement_cache);
    for (name, value) in &opts.pragmas {
        match apply_pragma(conn, name, value) {
            // A pragma that writes the database (user_version, page_size, ...) was applied
            // by the writer; a read-only reader cannot and need not repeat it.
            Err(Error::Sqlite { code, .. }) if reader && code & 0xff == rusqlite::ffi::SQLITE_READONLY => {}
            other => other?,
        }
    }
    Ok(())
}

/// Runs `PRAGMA name = value`. The name must be a plain identifier (optionally
/// `schema.name`); the value is passed through as SQL so numbers, keywords and quoted
/// strings all work, but it may not smuggle in a second statement.
pub fn apply_pragma(conn: &Connection, name: &str, value: &str) -> Result<()> {
    let valid_name = !name.is_empty()
        && name.split('.').all(|p| {
            !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
    if !valid_name {
        return Err(Error::Type(format!("invalid pragma name '{name}'")));
    }
    if value.contains(';') {
        return Err(Error::Type(format!("invalid value for pragma '{name}': '{value}'")));
    }
    let sql = format!("PRAGMA {name} = {value}");
    // Some pragmas answer with a row (journal_mode), others with none.
    let mut stmt = conn.prepare(&sql).map_err(|e| Error::from(e).with_sql(&sql))?;
    let mut rows = stmt.raw_query();
    while rows.next().map_err(|e| Error::from(e).with_sql(&sql))?.is_some() {}
    Ok(())
}
