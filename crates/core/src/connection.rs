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
    /// The writer never checkpoints: another process (a replicator such as Litestream) does.
    pub external_checkpoints: bool,
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
            external_checkpoints: false,
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

/// 128 bits no other user can predict: std's `RandomState` keys come from the operating
/// system's random source (once per thread, then varied per instance); hashing a counter
/// and the time with two of them gives a fresh name each call without a new dependency.
fn unpredictable_name() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let n = MEMORY_DB_COUNTER.fetch_add(1, Ordering::Relaxed);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut parts = [0u64; 2];
    for (i, part) in parts.iter_mut().enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u128(now);
        h.write_usize(i);
        *part = h.finish();
    }
    format!("{:016x}{:016x}", parts[0], parts[1])
}

/// Creates the file behind a `:memory:` database: new (never an existing file or a link
/// someone planted), readable by this user only. SQLite gives the -wal and -shm files the
/// main file's permissions.
fn create_private_file(dir: &Path) -> Result<PathBuf> {
    let mut last = None;
    for _ in 0..16 {
        let file = dir.join(format!("quietsqlite-memory-{}.db", unpredictable_name()));
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        match o.open(&file) {
            Ok(_) => return Ok(file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(memory_file_error(dir, e)),
        }
    }
    Err(memory_file_error(dir, last.expect("the loop ran")))
}

fn memory_file_error(dir: &Path, e: std::io::Error) -> Error {
    Error::sqlite(
        rusqlite::ffi::SQLITE_CANTOPEN,
        format!("could not create the file behind ':memory:' in {}: {e}", dir.display()),
    )
}

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
    /// That file is created here, before SQLite opens it (see `create_private_file`).
    pub fn resolve(path: &str) -> Result<Location> {
        if path == ":memory:" {
            let shm = Path::new("/dev/shm");
            let dir = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
            let file = create_private_file(&dir)?;
            let uri = format!("file:{}", uri_escape(&file.to_string_lossy()));
            return Ok(Location { uri, temporary: Some(file) });
        }
        if path.starts_with("file:") {
            return Ok(Location { uri: path.to_owned(), temporary: None });
        }
        Ok(Location { uri: format!("file:{}", uri_escape(path)), temporary: None })
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
    // Messages never repeat the value: a pragma value may be a secret (an encryption key).
    if value.contains(';') || value.contains('\0') {
        return Err(Error::Type(format!("invalid value for pragma '{name}': it may not contain ';' or NUL")));
    }
    let sql = format!("PRAGMA {name} = {value}");
    // SQLite's own message may quote the value ("near ...: syntax error"): report the
    // code's generic text, with the pragma's name and no SQL.
    let fail = |e: rusqlite::Error| match Error::from(e) {
        Error::Sqlite { code, .. } => Error::Sqlite {
            code,
            message: format!("pragma '{name}' could not be set: {}", crate::error::code_message(code)),
            sql: None,
        },
        other => other,
    };
    // Some pragmas answer with a row (journal_mode), others with none.
    let mut stmt = conn.prepare(&sql).map_err(fail)?;
    let mut rows = stmt.raw_query();
    while rows.next().map_err(fail)?.is_some() {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn memory_files_are_private_new_and_unpredictable() {
        use std::os::unix::fs::PermissionsExt;
        let a = Location::resolve(":memory:").unwrap();
        let b = Location::resolve(":memory:").unwrap();
        let (fa, fb) = (a.temporary.clone().unwrap(), b.temporary.clone().unwrap());
        assert_ne!(fa, fb);
        let mode = std::fs::metadata(&fa).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let name = fa.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.contains(&std::process::id().to_string()), "{name}");
        assert_eq!(name.len(), "quietsqlite-memory-.db".len() + 32);
        // The WAL and shared-memory files SQLite creates take the main file's mode.
        let conn = open_writer(&a, &OpenOptions::new(":memory:")).unwrap();
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1)").unwrap();
        for suffix in ["-wal", "-shm"] {
            let mut p = fa.clone().into_os_string();
            p.push(suffix);
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{suffix}");
        }
        drop(conn);
        a.remove_temporary();
        b.remove_temporary();
        assert!(!fa.exists() && !fb.exists());
    }

    #[test]
    fn pragma_errors_do_not_repeat_the_value() {
        let conn = Connection::open_in_memory().unwrap();
        for value in ["'s3cret'; DROP TABLE x", "s3cret garbage here"] {
            let e = apply_pragma(&conn, "user_version", value).unwrap_err();
            assert!(!e.to_string().contains("s3cret"), "{e}");
            if let Error::Sqlite { sql, .. } = &e {
                assert!(sql.is_none());
            }
        }
    }
}
