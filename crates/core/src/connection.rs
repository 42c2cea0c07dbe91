//! Opening connections: the writer (read-write, creates the file, sets WAL) and the readers
//! (read-only), with the project's default pragmas and the caller's own.

use crate::error::{Error, Result};
use rusqlite::{Connection, OpenFlags};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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
    /// The encryption key and cipher, applied to every connection right after it opens.
    /// Shared, never copied: the last owner's drop wipes it (`Key`).
    pub encryption: Option<Arc<Key>>,
    /// User-defined functions and extensions, shared by every connection (see `functions`).
    pub catalog: Arc<crate::functions::Catalog>,
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
            encryption: None,
            catalog: Arc::default(),
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
pub(crate) fn unpredictable_name() -> String {
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
            Ok(_) => {
                crate::scratch_files::track(&file);
                return Ok(file);
            }
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
        // Paths are made absolute once, here: connections opened later (a reader after
        // rekey(), the inline connection at its first read) must open this file even if the
        // process changed its working directory meanwhile.
        if let Some(rest) = path.strip_prefix("file:") {
            // A relative URI path (`file:data.db?mode=rwc`) gets the directory in front, as
            // a URI path: escaped, the caller's own escapes and query kept as they are.
            // `file:/...`, `file://host/...`, `file::memory:` and, on Windows, paths with a
            // root or a drive (`file:C:/data/app.db`) are left to SQLite.
            let path_part = rest.split(['?', '#']).next().unwrap_or("");
            // SQLite decodes `%00` and ends the file name there: another file than the one named.
            if path_part.contains("%00") {
                return Err(Error::Type("the database URI's path contains %00 (a NUL character)".into()));
            }
            let rooted = Path::new(path_part).has_root()
                || matches!(Path::new(path_part).components().next(), Some(std::path::Component::Prefix(_)));
            if path_part.is_empty() || rooted || rest.starts_with(['/', ':']) {
                return Ok(Location { uri: path.to_owned(), temporary: None });
            }
            let dir = std::env::current_dir().map_err(|e| {
                Error::sqlite(rusqlite::ffi::SQLITE_CANTOPEN, format!("could not resolve the database path: {e}"))
            })?;
            let dir = uri_escape(&dir.to_string_lossy());
            let prefix = if dir.starts_with('/') { "file://" } else { "file:" };
            let sep = if dir.ends_with('/') { "" } else { "/" };
            return Ok(Location { uri: format!("{prefix}{dir}{sep}{rest}"), temporary: None });
        }
        let absolute = std::path::absolute(path).map_err(|e| {
            Error::sqlite(rusqlite::ffi::SQLITE_CANTOPEN, format!("could not resolve the database path: {e}"))
        })?;
        let absolute = absolute.to_string_lossy();
        // `file://` and an empty authority: a path that itself begins with `//` stays a path.
        let prefix = if absolute.starts_with('/') { "file://" } else { "file:" };
        Ok(Location { uri: format!("{prefix}{}", uri_escape(&absolute)), temporary: None })
    }

    /// The URI for read-only connections: a `mode=rw`/`mode=rwc` query parameter would
    /// contradict their read-only open flag (SQLITE_PERM), so it becomes `mode=ro`.
    pub fn reader_uri(&self) -> String {
        self.uri_with_mode(&["mode=rw", "mode=rwc"], "mode=ro")
    }

    /// The URI for the checkpoint thread's connection, which opens a file the writer made:
    /// without SQLITE_OPEN_CREATE, `mode=rwc` would be refused (SQLITE_PERM).
    pub fn checkpointer_uri(&self) -> String {
        self.uri_with_mode(&["mode=rwc"], "mode=rw")
    }

    fn uri_with_mode(&self, from: &[&str], to: &str) -> String {
        let Some((path, query)) = self.uri.split_once('?') else { return self.uri.clone() };
        let params: Vec<&str> = query.split('&').map(|p| if from.contains(&p) { to } else { p }).collect();
        format!("{path}?{}", params.join("&"))
    }

    /// In-memory URIs give every connection its own private database, which cannot work
    /// with separate reader connections; shared-cache mode makes the readers share the
    /// writer's table locks, so a read outside a running transaction fails
    /// (`SQLITE_LOCKED_SHAREDCACHE`) instead of reading the last commit.
    pub fn check_shareable(&self) -> Result<()> {
        let uri = self.uri.to_ascii_lowercase();
        // Only the query names a mode: a file name may contain "mode=memory" (escaped paths
        // have no query).
        let params = uri_query(&uri);
        let query = |name: &str, value: &str| params.iter().any(|(n, v)| n == name && v == value);
        if self.temporary.is_none() && (uri.starts_with("file::memory:") || query("mode", "memory")) {
            return Err(Error::Type(
                "in-memory URIs are private to one connection; open ':memory:' instead".into(),
            ));
        }
        if query("cache", "shared") {
            return Err(Error::Type(
                "cache=shared would make reads wait on the writer's locks and fail while a transaction \
                 writes; open the file without it (each reader has a snapshot of its own)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Refuses a FIFO, socket or device where the database file should be: SQLite opens
    /// a FIFO and a read-only open waits for a writer to appear, forever.
    pub fn check_file_kind(&self) -> Result<()> {
        let Some(path) = self.file_path() else { return Ok(()) };
        refuse_special_file(&path, "the database path")
    }

    /// What names the file `path` (as `open` takes it): its directory's `device:inode` with
    /// its name, and, once the file exists, its own `device:inode` (a hard link or another
    /// path to it has the same). Empty for `:memory:` or on a platform without inodes. Two
    /// copies of this library in one process must not open one file (docs/reliability.md);
    /// the JS layer compares these before it opens anything, also a file not created yet.
    pub fn file_identities(path: &str) -> Vec<String> {
        if path == ":memory:" {
            return Vec::new();
        }
        let Some(file) = Location::resolve(path).ok().and_then(|l| l.file_path()) else { return Vec::new() };
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let mut keys = Vec::new();
            if let (Some(dir), Some(name)) = (file.parent(), file.file_name()) {
                if let Ok(meta) = std::fs::metadata(dir) {
                    keys.push(format!("{}:{}/{}", meta.dev(), meta.ino(), name.to_string_lossy()));
                }
            }
            if let Ok(meta) = std::fs::metadata(&file) {
                keys.push(format!("{}:{}", meta.dev(), meta.ino()));
            }
            keys
        }
        #[cfg(not(unix))]
        {
            let _ = file;
            Vec::new()
        }
    }

    /// The file a `file:` URI names on this machine (`file:/p`, `file:///p`,
    /// `file://localhost/p`), its escapes decoded; `None` for anything else.
    fn file_path(&self) -> Option<PathBuf> {
        let rest = self.uri.strip_prefix("file:")?;
        let rest = match rest.strip_prefix("//") {
            Some(after) => {
                let slash = after.find('/')?;
                if !(slash == 0 || after[..slash].eq_ignore_ascii_case("localhost")) {
                    return None;
                }
                &after[slash..]
            }
            None if rest.starts_with('/') => rest,
            None => return None,
        };
        let bytes = percent_decoded(rest.split(['?', '#']).next().unwrap_or(""));
        #[cfg(unix)]
        let path = PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(bytes));
        #[cfg(not(unix))]
        let path = PathBuf::from(String::from_utf8_lossy(&bytes).into_owned());
        Some(path)
    }

    /// Deletes a temporary database's files (after every connection closed).
    pub fn remove_temporary(&self) {
        if let Some(file) = &self.temporary {
            crate::scratch_files::remove(file);
        }
    }
}

/// The query parameters of a `file:` URI, as SQLite reads them: the URI ends at `#`,
/// parameters are separated by `&`, `%HH` is decoded in names and values, and a name or value
/// ends at a decoded NUL (a check of the raw text missed `cach%65=shared`, `cache=shared#`
/// and `cache=shared%00x`).
fn uri_query(uri: &str) -> Vec<(String, String)> {
    let before_fragment = uri.split('#').next().unwrap_or("");
    let Some((_, query)) = before_fragment.split_once('?') else { return Vec::new() };
    let decode = |s: &str| {
        let mut out = percent_decoded(s);
        if let Some(nul) = out.iter().position(|&c| c == 0) {
            out.truncate(nul);
        }
        String::from_utf8_lossy(&out).to_ascii_lowercase()
    };
    query
        .split('&')
        .map(|p| {
            let (name, value) = p.split_once('=').unwrap_or((p, ""));
            (decode(name), decode(value))
        })
        .collect()
}

/// `%HH` decoded as SQLite decodes a URI (anything else is kept as it is).
fn percent_decoded(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
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
    // SQLite opens a file it may not write read-only, silently: every write would fail later.
    if conn.is_readonly(rusqlite::MAIN_DB)? {
        return Err(Error::sqlite(
            rusqlite::ffi::SQLITE_READONLY,
            "the database cannot be written through this connection (the file's permissions, or a read-only URI such as \
             mode=ro or immutable=1): open it with readonly: true to read it",
        ));
    }
    // Before the first read (in `unlock`): rusqlite's own default is 5 s.
    conn.busy_timeout(Duration::from_millis(opts.busy_timeout_ms as u64))?;
    unlock(&conn, opts.encryption.as_deref(), true)?;
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
    opts.catalog.sync(&conn)?;
    Ok(conn)
}

pub fn open_reader(loc: &Location, opts: &OpenOptions) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_EXRESCODE;
    let conn = Connection::open_with_flags(&loc.reader_uri(), flags)?;
    // Without a key, the writer's check covers the file (a read-only database has none).
    conn.busy_timeout(Duration::from_millis(opts.busy_timeout_ms as u64))?;
    unlock(&conn, opts.encryption.as_deref(), opts.encryption.is_some() || opts.readonly)?;
    conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;")?;
    finish_open(&conn, opts, true)?;
    if !opts.readonly {
        crate::statement_rules::mark_checks_left_out(&conn);
    }
    crate::statement_rules::install(&conn);
    opts.catalog.sync(&conn)?;
    Ok(conn)
}

/// The checkpoint thread's connection (checkpointer.rs): read-write (a checkpoint writes the
/// database file), and never used for anything but checkpoints, so of the caller's pragmas
/// only those that decide how a checkpoint syncs apply (others, such as `user_version`, would
/// write the database a second time).
pub fn open_checkpointer(loc: &Location, opts: &OpenOptions) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_EXRESCODE;
    let conn = Connection::open_with_flags(loc.checkpointer_uri(), flags)?;
    conn.busy_timeout(Duration::from_millis(opts.busy_timeout_ms as u64))?;
    unlock(&conn, opts.encryption.as_deref(), false)?;
    conn.execute_batch("PRAGMA synchronous = NORMAL;")?;
    for (name, value) in &opts.pragmas {
        let bare = name.rsplit('.').next().unwrap_or(name).to_ascii_lowercase();
        if matches!(bare.as_str(), "synchronous" | "fullfsync" | "checkpoint_fullfsync") {
            apply_pragma(&conn, name, value)?;
        }
    }
    // A connection that has read nothing has not opened the WAL yet, and SQLite would
    // checkpoint nothing: reading the header opens it.
    conn.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0))?;
    Ok(conn)
}

/// The ciphers of SQLite3 Multiple Ciphers quietsqlite offers, by the name the options use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    Aes128Cbc,
    Aes256Cbc,
    ChaCha20,
    SqlCipher,
    Ascon128,
}

impl Cipher {
    pub fn from_name(name: &str) -> Option<Cipher> {
        Some(match name {
            "aes128cbc" => Cipher::Aes128Cbc,
            "aes256cbc" => Cipher::Aes256Cbc,
            "chacha20" => Cipher::ChaCha20,
            "sqlcipher" => Cipher::SqlCipher,
            "ascon128" => Cipher::Ascon128,
            _ => return None,
        })
    }

    /// SQLite3MC's name for the cipher (`sqlite3mc_cipher_index` looks it up).
    fn mc_name(self) -> &'static CStr {
        match self {
            Cipher::Aes128Cbc => c"aes128cbc",
            Cipher::Aes256Cbc => c"aes256cbc",
            Cipher::ChaCha20 => c"chacha20",
            Cipher::SqlCipher => c"sqlcipher",
            Cipher::Ascon128 => c"ascon128",
        }
    }

    /// The length of a raw key, for the ciphers that accept one (SQLite3MC's
    /// `raw:` form); the AES ciphers always derive their key from a passphrase.
    pub fn raw_key_len(self) -> Option<usize> {
        match self {
            Cipher::ChaCha20 | Cipher::SqlCipher | Cipher::Ascon128 => Some(32),
            Cipher::Aes128Cbc | Cipher::Aes256Cbc => None,
        }
    }
}

/// An encryption key: what is handed to SQLite3MC (a passphrase, or `raw:` and the key
/// bytes), with its cipher. Its Debug never shows the bytes, and dropping it overwrites them.
pub struct Key {
    pub cipher: Cipher,
    secret: Vec<u8>,
}

impl Key {
    /// A passphrase (SQLite3MC derives the key from it with the cipher's KDF).
    pub fn passphrase(cipher: Cipher, text: &[u8]) -> Result<Key> {
        if text.is_empty() {
            return Err(Error::Range("the encryption key may not be empty".into()));
        }
        Ok(Key { cipher, secret: text.to_vec() })
    }

    /// Raw key bytes: used as the key itself, no derivation.
    pub fn raw(cipher: Cipher, bytes: &[u8]) -> Result<Key> {
        let Some(len) = cipher.raw_key_len() else {
            return Err(Error::Type(format!(
                "a Buffer (raw) key needs cipher 'chacha20', 'sqlcipher' or 'ascon128': cipher '{}' only \
                 derives its key from a passphrase (give a string)",
                cipher.mc_name().to_string_lossy()
            )));
        };
        if bytes.len() != len {
            return Err(Error::Range(format!(
                "a Buffer (raw) key must be {len} bytes long for cipher '{}' (got {})",
                cipher.mc_name().to_string_lossy(),
                bytes.len()
            )));
        }
        let mut secret = Vec::with_capacity(4 + len);
        secret.extend_from_slice(b"raw:");
        secret.extend_from_slice(bytes);
        Ok(Key { cipher, secret })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.secret
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({:?}, ..)", self.cipher)
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        for b in self.secret.iter_mut() {
            // SAFETY: `b` is a valid, exclusive reference into the vector; a volatile write
            // keeps the compiler from dropping the wipe of memory about to be freed.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

// SQLite3 Multiple Ciphers' C API, compiled into quietsqlite's SQLite (crates/sqlite).
extern "C" {
    fn sqlite3mc_config(db: *mut rusqlite::ffi::sqlite3, param: *const c_char, value: c_int) -> c_int;
    fn sqlite3mc_cipher_index(name: *const c_char) -> c_int;
    fn sqlite3mc_config_cipher(db: *mut rusqlite::ffi::sqlite3, cipher: *const c_char, param: *const c_char, value: c_int) -> c_int;
    fn sqlite3_key_v2(db: *mut rusqlite::ffi::sqlite3, schema: *const c_char, key: *const c_void, n: c_int) -> c_int;
    fn sqlite3_rekey_v2(db: *mut rusqlite::ffi::sqlite3, schema: *const c_char, key: *const c_void, n: c_int) -> c_int;
}

/// What a wrong or missing key looks like: SQLite reads the first page as garbage.
fn key_error() -> Error {
    Error::sqlite(
        rusqlite::ffi::SQLITE_NOTADB,
        "the database could not be read: the encryption key is wrong, or missing (the file is encrypted \
         and no encryptionKey was given), or the file is not a database",
    )
}

/// Selects the cipher on `conn` for the next key or rekey.
fn select_cipher(conn: &Connection, cipher: Cipher) -> Result<()> {
    // SAFETY: the handle is valid while `conn` lives; both strings are NUL-terminated statics.
    let rc = unsafe {
        let id = sqlite3mc_cipher_index(cipher.mc_name().as_ptr());
        if id < 0 {
            id
        } else {
            sqlite3mc_config(conn.handle(), c"cipher".as_ptr(), id)
        }
    };
    if rc < 0 {
        return Err(Error::Internal(format!("SQLite3 Multiple Ciphers has no cipher '{}'", cipher.mc_name().to_string_lossy())));
    }
    if cipher == Cipher::SqlCipher {
        // SQLite3MC's own 'sqlcipher' scheme (legacy 0) keeps bytes 16-23 of page 1 in
        // plaintext, which SQLCipher cannot read; legacy 4 is SQLCipher 4's format and defaults.
        // SAFETY: as above.
        let v = unsafe { sqlite3mc_config_cipher(conn.handle(), c"sqlcipher".as_ptr(), c"legacy".as_ptr(), 4) };
        if v != 4 {
            return Err(Error::Internal("could not select SQLCipher 4 compatibility".into()));
        }
    }
    Ok(())
}

/// Refuses a FIFO, socket or device at `path` (`what` names it in the message): SQLite would
/// open a FIFO and wait on it, and a copy renamed over one would replace it with a file.
pub(crate) fn refuse_special_file(path: &std::path::Path, what: &str) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() && !meta.is_dir() => {
            Err(Error::sqlite(rusqlite::ffi::SQLITE_CANTOPEN, format!("{what} names a FIFO, socket or device, not a file")))
        }
        _ => Ok(()),
    }
}

/// How many times an open reads the schema to check its key, at most (see `unlock`).
const KEY_CHECKS: usize = 3;

/// The first bytes of the database file: the key-derivation salt of the ciphers that keep
/// one (SQLite3MC writes it in place of "SQLite format 3"), the page size and the journal
/// mode's bytes. A rekey changes them; a wrong key does not. None if it cannot be read.
fn file_start(conn: &Connection) -> Option<[u8; 24]> {
    use std::io::Read;
    let path = conn.path().filter(|p| !p.is_empty())?;
    let mut start = [0u8; 24];
    std::fs::File::open(path).ok()?.read_exact(&mut start).ok()?;
    Some(start)
}

/// Applies the key (if any) to a connection just opened, before anything else runs on it,
/// then (if `check`) reads the schema: a wrong or missing key fails here, with a message
/// about the key (never the key itself).
pub(crate) fn unlock(conn: &Connection, key: Option<&Key>, check: bool) -> Result<()> {
    let apply_key = || -> Result<()> {
        let Some(key) = key else { return Ok(()) };
        select_cipher(conn, key.cipher)?;
        let secret = key.bytes();
        let len = c_int::try_from(secret.len()).map_err(|_| Error::Range("the encryption key is too long".into()))?;
        // SAFETY: the handle is valid while `conn` lives; `secret` is valid for `len` bytes
        // for the call (SQLite3MC derives its cipher state and keeps no pointer to it).
        let rc = unsafe { sqlite3_key_v2(conn.handle(), c"main".as_ptr(), secret.as_ptr().cast(), len) };
        if rc != rusqlite::ffi::SQLITE_OK {
            return Err(Error::sqlite(rc, "the encryption key could not be set"));
        }
        Ok(())
    };
    // Read before the key is applied: SQLite3MC derives the key from the file's salt then.
    let mut before = if check && key.is_some() { file_start(conn) } else { None };
    apply_key()?;
    if !check {
        return Ok(());
    }
    // A key derived from the salt of a file that another connection's rekey then rewrote
    // fails with the new key as with the old: when the file's first bytes changed since the
    // key was applied, the key is applied again (from the new salt) and the check repeated.
    // A wrong key leaves the file as it was and is not tried again.
    let check = || conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0));
    let mut checked = check();
    for _ in 1..KEY_CHECKS {
        let not_a_database = matches!(&checked, Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase));
        let now = if not_a_database { file_start(conn) } else { None };
        if now.is_none() || before.is_none() || now == before {
            break;
        }
        before = now;
        apply_key()?;
        checked = check();
    }
    match checked {
        Ok(_) => Ok(()),
        Err(e) => {
            // Closing as the last connection would checkpoint the WAL left by an earlier
            // one: with a wrong key (a cipher without authentication decrypts garbage
            // silently) that would rewrite the file. A failed open must not change it.
            let _ = conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true);
            match Error::from(e) {
                Error::Sqlite { code, .. } if code & 0xff == rusqlite::ffi::SQLITE_NOTADB => Err(key_error()),
                other => Err(other),
            }
        }
    }
}

/// What is left of the writer's connection after `rekey`.
pub(crate) enum AfterRekey {
    /// In WAL mode, usable.
    Wal,
    /// Usable, but the file could not go back to WAL mode (why): it is in rollback-journal mode.
    NotWal(Error),
    /// The rewrite failed: nothing may be written through this connection again. SQLite3MC
    /// does not put its ciphers back when a rekey fails (to decrypt, it switches the write
    /// cipher off), so the next page it writes (going back to WAL mode writes page 1) can go
    /// out with the wrong cipher. The caller replaces the connection.
    Unusable,
}

/// Every connection open on the file would keep the key it had: one that later reads or
/// checkpoints the new key's pages with the old key corrupts the file (AES-CBC cannot tell a
/// wrong key from data). So a rekey needs the file to itself.
pub(crate) fn not_alone() -> Error {
    Error::sqlite(
        rusqlite::ffi::SQLITE_BUSY,
        "rekey() needs the database to itself: another connection (another Database, or another process) has it open",
    )
}

/// Changes the key of the file `conn` (the writer) has open (`None`: decrypts; a key on a
/// plaintext file encrypts it). The caller closes its other connections first. The result is
/// the rekey's (`Err`: the file keeps its key); the second value says what the connection is
/// fit for afterwards.
pub(crate) fn rekey(conn: &Connection, key: Option<&Key>, was_encrypted: bool) -> (Result<()>, AfterRekey) {
    // Leaving WAL mode needs the file to itself (every other WAL connection holds a shared
    // lock on it), so it proves that no other connection is open. In exclusive locking mode
    // the lock it takes for that is kept until the rekey is over: no connection (another
    // Database of this process, which shares SQLite's locks, included) opens the file in
    // between, with the old key.
    let leave_wal = key.is_some() || was_encrypted;
    if !leave_wal {
        return (change_key(conn, key), AfterRekey::Wal);
    }
    if let Err(e) = conn.execute_batch("PRAGMA locking_mode = EXCLUSIVE") {
        return (Err(e.into()), AfterRekey::Wal);
    }
    let left = match conn.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get::<_, String>(0)) {
        Ok(mode) if mode.eq_ignore_ascii_case("delete") => Ok(()),
        Ok(_) => Err(not_alone()),
        Err(e) => Err(match Error::from(e) {
            Error::Sqlite { code, .. } if code & 0xff == rusqlite::ffi::SQLITE_BUSY => not_alone(),
            other => other,
        }),
    };
    let (outcome, after) = match left {
        Err(e) => (Err(e), AfterRekey::Wal),
        Ok(()) => match change_key(conn, key) {
            Err(e) => (Err(e), AfterRekey::Unusable),
            Ok(()) => (Ok(()), AfterRekey::Wal),
        },
    };
    if matches!(after, AfterRekey::Unusable) {
        // Its locks go when the caller closes it: nothing more runs on it.
        return (outcome, after);
    }
    // The lock goes with the next access after NORMAL: going back to WAL mode.
    let released = conn.execute_batch("PRAGMA locking_mode = NORMAL").map_err(Error::from).and_then(|()| back_to_wal(conn));
    // Also after a refusal: leaving WAL mode may have got as far as closing the WAL.
    match released {
        Err(e) => (outcome, AfterRekey::NotWal(e)),
        Ok(()) => (outcome, AfterRekey::Wal),
    }
}

fn change_key(conn: &Connection, key: Option<&Key>) -> Result<()> {
    let (ptr, len) = match key {
        Some(k) => {
            select_cipher(conn, k.cipher)?;
            let len = c_int::try_from(k.bytes().len()).map_err(|_| Error::Range("the encryption key is too long".into()))?;
            (k.bytes().as_ptr(), len)
        }
        None => (std::ptr::null(), 0),
    };
    // SAFETY: the handle is valid while `conn` lives; `ptr` is NULL (len 0) or valid for
    // `len` bytes for the call, and SQLite3MC keeps no pointer to it.
    let rc = unsafe { sqlite3_rekey_v2(conn.handle(), c"main".as_ptr(), ptr.cast(), len) };
    if rc == rusqlite::ffi::SQLITE_OK {
        Ok(())
    } else {
        // SQLite3MC's own message names what failed and never the key; some failures leave
        // none ("not an error"), and the code's text says more.
        // SAFETY: the handle is valid; sqlite3_errmsg returns a NUL-terminated string.
        let msg = unsafe { CStr::from_ptr(rusqlite::ffi::sqlite3_errmsg(conn.handle())) }.to_string_lossy().into_owned();
        let msg = if msg == "not an error" { crate::error::code_message(rc) } else { msg };
        Err(Error::sqlite(rc, format!("rekey failed: {msg}")))
    }
}

/// Switches the file back to WAL mode (after a rekey left it).
pub(crate) fn back_to_wal(conn: &Connection) -> Result<()> {
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::sqlite(
            rusqlite::ffi::SQLITE_BUSY,
            format!("could not switch the database back to WAL mode (it reports '{mode}')"),
        ));
    }
    Ok(())
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

/// Runs `PRAGMA name = value`, under `check_pragma`'s rules: the name must be a plain
/// identifier (optionally `schema.name`); the value is passed through as SQL so numbers,
/// keywords and quoted strings all work, but it may not smuggle in a second statement.
pub fn apply_pragma(conn: &Connection, name: &str, value: &str) -> Result<()> {
    check_pragma(name, value)?;
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

/// The pragmas `apply_pragma` refuses, refused without a connection: an open checks them all
/// before it creates or changes the file.
pub fn check_pragma(name: &str, value: &str) -> Result<()> {
    let valid_name = !name.is_empty()
        && name.split('.').all(|p| {
            !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
    if !valid_name {
        return Err(Error::Type(format!("invalid pragma name '{name}'")));
    }
    let bare = name.rsplit('.').next().unwrap_or(name);
    if crate::statement_rules::is_key_pragma(bare) {
        return Err(Error::Type(crate::statement_rules::KEY_PRAGMA_REFUSED.into()));
    }
    if crate::statement_rules::is_cipher_pragma(bare) {
        return Err(Error::Type(crate::statement_rules::CIPHER_PRAGMA_REFUSED.into()));
    }
    // Messages never repeat the value: a pragma value may be a secret (an encryption key).
    if value.contains(';') || value.contains('\0') {
        return Err(Error::Type(format!("invalid value for pragma '{name}': it may not contain ';' or NUL")));
    }
    if crate::statement_rules::is_mode_pragma(name.split_once('.').map(|(schema, _)| schema), bare, value) {
        return Err(Error::Type(crate::statement_rules::MODE_PRAGMA_REFUSED.into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_file_uris_are_made_absolute_and_keep_their_escapes_and_query() {
        let dir = std::env::current_dir().unwrap();
        let dir = uri_escape(&dir.to_string_lossy());
        let loc = Location::resolve("file:a%20b.db?mode=rwc&cache=private").unwrap();
        assert_eq!(loc.uri, format!("file://{dir}/a%20b.db?mode=rwc&cache=private"));
        for left in ["file:/abs/x.db?mode=ro", "file:///abs/x.db", "file://localhost/x.db", "file::memory:", "file:?mode=ro"] {
            assert_eq!(Location::resolve(left).unwrap().uri, left);
        }
        assert!(Location::resolve("file:x.db?mode=memory").unwrap().check_shareable().is_err());
    }

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

    #[test]
    fn keys_stay_out_of_debug_output_and_key_pragmas_are_refused() {
        let key = Key::passphrase(Cipher::ChaCha20, b"hunter2-secret").unwrap();
        let mut opts = OpenOptions::new("x.db");
        opts.encryption = Some(Arc::new(key));
        assert!(!format!("{opts:?}").contains("hunter2"));
        assert!(Key::passphrase(Cipher::ChaCha20, b"").is_err());
        assert!(Key::raw(Cipher::ChaCha20, &[1; 31]).is_err());
        assert!(Key::raw(Cipher::Aes256Cbc, &[1; 32]).is_err());
        let conn = Connection::open_in_memory().unwrap();
        for name in ["key", "main.rekey", "HEXKEY", "hexrekey"] {
            let e = apply_pragma(&conn, name, "'hunter2-secret'").unwrap_err();
            assert!(e.to_string().contains("encryptionKey") && !e.to_string().contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn a_wrong_key_is_refused_and_rekey_changes_it() {
        let dir = std::env::temp_dir().join(format!("quietsqlite-key-{}", unpredictable_name()));
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("k.db");
        let loc = Location::resolve(&path.to_string_lossy()).unwrap();
        let mut opts = OpenOptions::new(path.to_string_lossy());
        opts.encryption = Some(Arc::new(Key::passphrase(Cipher::ChaCha20, b"one").unwrap()));
        let w = open_writer(&loc, &opts).unwrap();
        w.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (42)").unwrap();
        let two = Key::passphrase(Cipher::ChaCha20, b"two").unwrap();
        let (outcome, after) = rekey(&w, Some(&two), true);
        outcome.unwrap();
        assert!(matches!(after, AfterRekey::Wal), "back in WAL mode");
        assert_eq!(w.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0)).unwrap(), "wal");
        drop(w);
        let e = open_reader(&loc, &opts).unwrap_err();
        assert!(matches!(e, Error::Sqlite { code: rusqlite::ffi::SQLITE_NOTADB, .. }), "{e}");
        opts.encryption = None;
        assert!(open_writer(&loc, &opts).is_err());
        opts.encryption = Some(Arc::new(two));
        let r = open_reader(&loc, &opts).unwrap();
        assert_eq!(r.query_row("SELECT x FROM t", [], |row| row.get::<_, i64>(0)).unwrap(), 42);
        drop(r);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
