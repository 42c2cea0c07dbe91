//! Online backup and serialization. Both copy the main database with SQLite's backup API
//! from a reader connection that holds ONE read transaction for the whole copy: in WAL mode
//! that transaction is a snapshot, so commits made meanwhile by the writer neither show up
//! in the copy nor make the backup restart (SQLite restarts a backup when the source pager
//! resets its cache, which happens only when a new read transaction starts after a change).
//! The copy is written to a new file next to the destination and renamed over it at the end,
//! so `destPath` holds either nothing new or a complete backup.

use crate::cancel::Ticket;
use crate::completion::{Completion, CompletionSink, Output, RequestId};
use crate::connection::{Key, Location};
use crate::error::{Error, Result};
use rusqlite::{ffi, Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The key the database is encrypted with now, kept so a backup can encrypt its copy with
/// it. The writer updates it after a successful rekey.
pub(crate) type KeySlot = Arc<Mutex<Option<Arc<Key>>>>;

pub(crate) fn current_key(slot: &KeySlot) -> Option<Arc<Key>> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Where the copy goes.
#[derive(Debug, Clone)]
pub enum BackupTarget {
    /// A file, replaced atomically when the copy is complete.
    File(PathBuf),
    /// Bytes returned to the caller (`serialize`): refused before copying when the database
    /// is larger than `max_bytes` (the front end's largest buffer).
    Bytes { max_bytes: u64 },
}

#[derive(Debug, Clone)]
pub struct BackupJob {
    pub id: RequestId,
    pub target: BackupTarget,
    /// Pages copied per step (at least 1); between steps cancellation is looked at and
    /// progress may be reported.
    pub pages_per_step: u32,
    /// The id progress reports are sent with (`Output::Progress`), if the caller wants them.
    pub progress_id: Option<RequestId>,
    pub cancellable: bool,
}

/// At most one progress report per this interval (plus the final one): enough for a
/// progress bar, and a fast backup with one page per step does not flood the JS thread.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(50);

/// What stops a running backup: its own cancellation, or a forced close.
pub(crate) struct Stops {
    pub ticket: Option<Arc<Ticket>>,
    pub cancellation: Arc<crate::cancel::Cancellation>,
}

impl Stops {
    fn check(&self) -> Result<()> {
        if self.cancellation.is_stopping() {
            return Err(crate::error::closed_by_force());
        }
        if self.ticket.as_ref().is_some_and(|t| t.is_cancelled()) {
            return Err(Error::sqlite(ffi::SQLITE_INTERRUPT, "the backup was cancelled"));
        }
        Ok(())
    }
}

/// Runs `job` on `conn` (a reader, holding no transaction) and reports its outcome.
pub(crate) fn run(conn: &crate::read_connection::ReadConnection, job: BackupJob, key: Option<Arc<Key>>, stops: Stops, sink: &dyn CompletionSink) {
    if let Some(t) = &stops.ticket {
        if !t.begin() {
            // Cancelled while queued: the front end has settled it; nothing is sent.
            return;
        }
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // A stand-in for a reader that could not reopen would copy an empty database.
        conn.check_usable()?;
        in_read_transaction(conn, || copy(conn, &job, key.as_deref(), &stops, sink))
    }))
    .unwrap_or_else(|p| Err(Error::Internal(crate::completion::panic_message(p))));
    if let Some(t) = &stops.ticket {
        t.finish();
    }
    sink.complete(Completion { id: job.id, result });
}

/// Runs `f` inside one read transaction of `conn` (a snapshot for its whole duration).
fn in_read_transaction<T>(conn: &Connection, f: impl FnOnce() -> Result<T>) -> Result<T> {
    conn.execute_batch("BEGIN DEFERRED")?;
    // BEGIN takes no snapshot by itself; the first read does, and holds it until the end.
    let started = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0));
    let out = match started {
        Ok(_) => f(),
        Err(e) => Err(e.into()),
    };
    // A read transaction changes nothing: ending it cannot lose work, and a failure to end
    // it would show on the connection's next use.
    let _ = conn.execute_batch("COMMIT");
    out
}

/// The file a database connection has open as `main`.
fn main_file(conn: &Connection) -> Option<PathBuf> {
    conn.path().filter(|p| !p.is_empty()).map(PathBuf::from)
}

fn copy(conn: &Connection, job: &BackupJob, key: Option<&Key>, stops: &Stops, sink: &dyn CompletionSink) -> Result<Output> {
    let (file, temporary) = match &job.target {
        BackupTarget::File(dest) => {
            check_destination(conn, dest)?;
            (create_beside(dest)?, None)
        }
        BackupTarget::Bytes { max_bytes } => {
            let size: i64 = conn.query_row(
                "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size",
                [],
                |r| r.get(0),
            )?;
            if size as u64 > *max_bytes {
                return Err(Error::Range(format!(
                    "the database is {size} bytes, more than a Buffer can hold ({max_bytes}); use backup() to copy it to a file"
                )));
            }
            // A private file in RAM-backed storage, as for ':memory:'.
            let loc = Location::resolve(":memory:")?;
            let path = loc.temporary.clone().expect(":memory: resolves to a temporary file");
            (path, Some(loc))
        }
    };
    let copied = copy_into(conn, &file, job, key, stops, sink);
    let finished = copied.and_then(|()| match &job.target {
        BackupTarget::File(dest) => publish(&file, dest).map(|()| Output::Done),
        BackupTarget::Bytes { max_bytes } => read_bytes(&file, *max_bytes).map(Output::Bytes),
    });
    match temporary {
        Some(loc) => loc.remove_temporary(),
        None if finished.is_err() => crate::scratch_files::remove(&file),
        // Renamed into place: the destination now.
        None => crate::scratch_files::untrack(&file),
    }
    finished
}

/// Refuses the database's own file as the destination (the rename would replace the
/// database under its open connections).
fn check_destination(conn: &Connection, dest: &Path) -> Result<()> {
    let Some(source) = main_file(conn) else { return Ok(()) };
    // A destination that does not exist yet (a `-wal` between checkpoints) is compared
    // through its directory's real path.
    let target = std::fs::canonicalize(dest).or_else(|_| {
        let dir = dest.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::canonicalize(dir).map(|d| d.join(dest.file_name().unwrap_or_default()))
    });
    let Ok(target) = target else { return Ok(()) };
    let source = std::fs::canonicalize(&source).unwrap_or(source);
    let with = |path: &Path, suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    };
    let side_files = ["-wal", "-shm", "-journal"];
    // The destination is the database or one of its side files; or the database is one of
    // the destination's side files, which the backup deletes once the copy is in place (a
    // database opened as `app.db-wal`, backed up to `app.db`, was deleted).
    let is_own = target == source
        || side_files.iter().any(|s| target == with(&source, s) || with(&target, s) == source);
    if is_own {
        return Err(Error::Range(
            "the backup destination is the database itself, one of its -wal, -shm or -journal files, \
             or a file whose -wal, -shm or -journal the database is; give backup() another path"
                .into(),
        ));
    }
    // The copy is renamed over the destination: a FIFO, socket or device there (`/dev/null`)
    // would be replaced by a regular file.
    crate::connection::refuse_special_file(dest, "the backup destination")
}

/// A new, empty file in the destination's directory (a rename within one file system is
/// atomic), named so it cannot clash with another backup or someone else's file.
fn create_beside(dest: &Path) -> Result<PathBuf> {
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut last = None;
    for _ in 0..4 {
        let file = dir.join(format!(".{name}.quietsqlite-backup-{}", crate::connection::unpredictable_name()));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&file) {
            Ok(_) => {
                crate::scratch_files::track(&file);
                return Ok(file);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(destination_error(&dir, e)),
        }
    }
    Err(destination_error(&dir, last.expect("the loop ran")))
}

fn destination_error(dir: &Path, e: std::io::Error) -> Error {
    Error::sqlite(
        ffi::SQLITE_CANTOPEN,
        format!("could not write the backup in {}: {e}", dir.display()),
    )
}

/// The error a backup call reported on the destination connection.
fn dest_error(dest: &Connection, rc: i32) -> Error {
    // SAFETY: the handle is valid while `dest` lives; sqlite3_errmsg returns a
    // NUL-terminated string owned by the connection, copied before the next call on it.
    let msg = unsafe { std::ffi::CStr::from_ptr(ffi::sqlite3_errmsg(dest.handle())) }.to_string_lossy().into_owned();
    Error::sqlite(rc, format!("backup failed: {msg}"))
}

/// Owns an `sqlite3_backup` handle; finishing it releases the destination's lock.
struct Handle(*mut ffi::sqlite3_backup);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from sqlite3_backup_init and is finished exactly once (here).
        unsafe { ffi::sqlite3_backup_finish(self.0) };
    }
}

fn copy_into(
    conn: &Connection,
    file: &Path,
    job: &BackupJob,
    key: Option<&Key>,
    stops: &Stops,
    sink: &dyn CompletionSink,
) -> Result<()> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_EXRESCODE;
    let dest = Connection::open_with_flags(file, flags)?;
    // The copy is encrypted as the database is: same cipher, same key (a new salt).
    crate::connection::unlock(&dest, key, false)?;
    // The file is renamed into place only when complete: a crash leaves a stray temporary
    // file, never a half-written destination, so no journal is needed.
    dest.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF")?;
    // SAFETY: both handles are valid while `dest` and `conn` live, which outlive `handle`
    // (dropped at the end of this function); the names are NUL-terminated statics.
    let raw = unsafe { ffi::sqlite3_backup_init(dest.handle(), c"main".as_ptr(), conn.handle(), c"main".as_ptr()) };
    if raw.is_null() {
        // SAFETY: as above.
        let rc = unsafe { ffi::sqlite3_extended_errcode(dest.handle()) };
        return Err(dest_error(&dest, rc));
    }
    let handle = Handle(raw);
    let step = i32::try_from(job.pages_per_step.max(1)).unwrap_or(i32::MAX);
    let mut reported = None::<Instant>;
    let report = |remaining: i32, total: i32| {
        if let Some(pid) = job.progress_id {
            let (remaining, total) = (remaining.max(0) as u32, total.max(0) as u32);
            sink.complete(Completion { id: pid, result: Ok(Output::Progress { remaining, total }) });
        }
    };
    loop {
        stops.check()?;
        // SAFETY: `handle.0` is a live backup handle (finished only by `handle`'s drop).
        let rc = unsafe { ffi::sqlite3_backup_step(handle.0, step) };
        // SAFETY: as above.
        let (remaining, total) = unsafe { (ffi::sqlite3_backup_remaining(handle.0), ffi::sqlite3_backup_pagecount(handle.0)) };
        match rc & 0xff {
            ffi::SQLITE_DONE => {
                report(0, total);
                break;
            }
            ffi::SQLITE_OK => {
                if reported.is_none_or(|at| at.elapsed() >= PROGRESS_INTERVAL) {
                    report(remaining, total);
                    reported = Some(Instant::now());
                }
            }
            // Only our own destination connection writes the new file; a lock there would be
            // someone else's, and waiting a little is what SQLite's documentation advises.
            ffi::SQLITE_BUSY | ffi::SQLITE_LOCKED => std::thread::sleep(Duration::from_millis(5)),
            _ => return Err(dest_error(&dest, rc)),
        }
    }
    drop(handle);
    // SAFETY: `dest` is valid; the finished backup left its outcome on it.
    let rc = unsafe { ffi::sqlite3_extended_errcode(dest.handle()) };
    if rc != ffi::SQLITE_OK && rc != ffi::SQLITE_DONE {
        return Err(dest_error(&dest, rc));
    }
    dest.close().map_err(|(_, e)| Error::from(e))?;
    Ok(())
}

/// Makes the finished copy durable and moves it to `dest`. A stale `-wal` of an earlier
/// database at `dest` would be replayed into the new file when it is opened: it goes first.
fn publish(file: &Path, dest: &Path) -> Result<()> {
    let io = |e: std::io::Error| Error::sqlite(ffi::SQLITE_IOERR, format!("could not finish the backup file: {e}"));
    std::fs::File::open(file).and_then(|f| f.sync_all()).map_err(io)?;
    if dest.is_dir() {
        return Err(Error::sqlite(ffi::SQLITE_CANTOPEN, "could not finish the backup file: the destination is a directory"));
    }
    // A WAL or rollback journal left by the old destination would be applied to the new
    // file when it opens: they go, but only once the new file is in place. Until then they
    // are set aside, and put back if the rename fails, so that a failed backup leaves the
    // destination as it was (deleting them first lost the commits in its WAL).
    let aside = crate::connection::unpredictable_name();
    let mut moved: Vec<(std::ffi::OsString, std::ffi::OsString)> = Vec::new();
    let restore = |moved: &[(std::ffi::OsString, std::ffi::OsString)]| {
        for (from, to) in moved.iter().rev() {
            let _ = std::fs::rename(to, from);
        }
    };
    for suffix in ["-wal", "-journal"] {
        let mut p = dest.as_os_str().to_owned();
        p.push(suffix);
        let mut q = p.clone();
        q.push(format!(".{aside}"));
        match std::fs::rename(&p, &q) {
            Ok(()) => moved.push((p, q)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                restore(&moved);
                return Err(io(e));
            }
        }
    }
    if let Err(e) = std::fs::rename(file, dest) {
        restore(&moved);
        return Err(io(e));
    }
    for (_, q) in &moved {
        let _ = std::fs::remove_file(q);
    }
    // The rename itself becomes durable with the directory.
    if let Some(dir) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

fn read_bytes(file: &Path, max_bytes: u64) -> Result<Vec<u8>> {
    let io = |e: std::io::Error| Error::sqlite(ffi::SQLITE_IOERR, format!("could not read the serialized database: {e}"));
    let len = std::fs::metadata(file).map_err(io)?.len();
    if len > max_bytes {
        return Err(Error::Range(format!(
            "the database is {len} bytes, more than a Buffer can hold ({max_bytes}); use backup() to copy it to a file"
        )));
    }
    std::fs::read(file).map_err(io)
}

/// The smallest database file: one page of the smallest page size.
pub const MIN_DATABASE_BYTES: usize = 512;

/// Writes `bytes` (a serialized database) into the private file of a deserialized
/// database, before any connection opens it.
pub(crate) fn fill(loc: &Location, bytes: &[u8]) -> Result<()> {
    let file = loc.temporary.as_ref().ok_or_else(|| Error::Internal("deserialize needs a private file".into()))?;
    std::fs::write(file, bytes).map_err(|e| {
        Error::sqlite(ffi::SQLITE_IOERR, format!("could not write the deserialized database to {}: {e}", file.display()))
    })
}

/// Checks bytes given to `deserialize` before anything is allocated or written for them.
pub fn check_serialized(bytes: &[u8]) -> Result<()> {
    if bytes.len() < MIN_DATABASE_BYTES {
        return Err(Error::sqlite(
            ffi::SQLITE_NOTADB,
            format!(
                "the bytes are not a database: {} bytes, less than the smallest database ({MIN_DATABASE_BYTES} bytes)",
                bytes.len()
            ),
        ));
    }
    Ok(())
}
