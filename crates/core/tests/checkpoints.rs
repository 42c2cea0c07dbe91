//! Checkpoints run beside the writer (checkpointer.rs): a write never waits for one.
//!
//! A checkpoint is mostly its syncs. A VFS of this test's own ("gated": the default VFS
//! with every xSync held at a gate the test closes) makes a checkpoint's sync last as long
//! as the test wants, so whether a write waits for it is a fact, not a timing.

mod common;
use common::*;
use quietsqlite_core::{Cipher, Key, WriteKind};
use rusqlite::ffi;
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Whether syncs may go on, and how many wait at the gate now.
static GATE: Mutex<(bool, usize)> = Mutex::new((true, 0));
static GATE_CHANGED: Condvar = Condvar::new();

fn set_gate(open: bool) {
    GATE.lock().unwrap().0 = open;
    GATE_CHANGED.notify_all();
}

fn wait_at_gate() {
    let mut g = GATE.lock().unwrap();
    g.1 += 1;
    GATE_CHANGED.notify_all();
    while !g.0 {
        g = GATE_CHANGED.wait(g).unwrap();
    }
    g.1 -= 1;
}

/// Waits until `n` syncs wait at the gate; false after 10 s.
fn waiting_at_gate(n: usize) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut g = GATE.lock().unwrap();
    while g.1 < n {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        g = GATE_CHANGED.wait_timeout(g, left).unwrap().0;
    }
    true
}

/// While set, the gated VFS refuses every open made on the checkpoint thread, and counts them.
static REFUSE_CHECKPOINT_THREAD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static REFUSED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A file of the gated VFS: its methods, then the default VFS's file it forwards to.
#[repr(C)]
struct GatedFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
}

/// The default VFS, which the gated one wraps.
struct Inner(*mut ffi::sqlite3_vfs);
// SAFETY: SQLite's VFS objects live for the process and are safe to use from any thread.
unsafe impl Send for Inner {}
unsafe impl Sync for Inner {}
static INNER: OnceLock<Inner> = OnceLock::new();

/// The file `f` forwards to, and its methods.
///
/// SAFETY: `f` is a GatedFile that `gated_open` set up (SQLite calls these methods only on
/// files whose pMethods is GATED_IO, which only a successful open sets).
unsafe fn real(f: *mut ffi::sqlite3_file) -> (*mut ffi::sqlite3_file, &'static ffi::sqlite3_io_methods) {
    let r = (*f.cast::<GatedFile>()).real;
    (r, &*(*r).pMethods)
}

macro_rules! forward {
    ($name:ident, $field:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty) => {
        unsafe extern "C" fn $name(f: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> $ret {
            // SAFETY: see `real`; the default VFS's files have every method of version 3.
            unsafe {
                let (r, m) = real(f);
                (m.$field.unwrap())(r $(, $arg)*)
            }
        }
    };
}

forward!(x_close, xClose() -> c_int);
forward!(x_read, xRead(buf: *mut c_void, n: c_int, off: i64) -> c_int);
forward!(x_write, xWrite(buf: *const c_void, n: c_int, off: i64) -> c_int);
forward!(x_truncate, xTruncate(size: i64) -> c_int);
forward!(x_file_size, xFileSize(size: *mut i64) -> c_int);
forward!(x_lock, xLock(level: c_int) -> c_int);
forward!(x_unlock, xUnlock(level: c_int) -> c_int);
forward!(x_check_reserved_lock, xCheckReservedLock(out: *mut c_int) -> c_int);
forward!(x_file_control, xFileControl(op: c_int, arg: *mut c_void) -> c_int);
forward!(x_sector_size, xSectorSize() -> c_int);
forward!(x_device_characteristics, xDeviceCharacteristics() -> c_int);
forward!(x_shm_map, xShmMap(region: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int);
forward!(x_shm_lock, xShmLock(offset: c_int, n: c_int, flags: c_int) -> c_int);
forward!(x_shm_barrier, xShmBarrier() -> ());
forward!(x_shm_unmap, xShmUnmap(delete: c_int) -> c_int);
forward!(x_fetch, xFetch(off: i64, n: c_int, out: *mut *mut c_void) -> c_int);
forward!(x_unfetch, xUnfetch(off: i64, p: *mut c_void) -> c_int);
forward!(x_sync_now, xSync(flags: c_int) -> c_int);

unsafe extern "C" fn x_sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    wait_at_gate();
    // SAFETY: as for every forwarded method.
    unsafe { x_sync_now(f, flags) }
}

static GATED_IO: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};

unsafe extern "C" fn gated_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    f: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    if REFUSE_CHECKPOINT_THREAD.load(std::sync::atomic::Ordering::SeqCst)
        && std::thread::current().name().is_some_and(|n| n.starts_with("quietsqlite-checkpoint"))
    {
        REFUSED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: SQLite gives `f` szOsFile bytes; a failed open leaves pMethods null.
        unsafe { (*f).pMethods = std::ptr::null() };
        return ffi::SQLITE_CANTOPEN;
    }
    // SAFETY: SQLite gives `f` szOsFile bytes: a GatedFile, then the default VFS's file.
    unsafe {
        let inner = INNER.get().unwrap().0;
        let real = f.cast::<u8>().add(std::mem::size_of::<GatedFile>()).cast::<ffi::sqlite3_file>();
        (*f.cast::<GatedFile>()).real = real;
        (*f).pMethods = std::ptr::null();
        let rc = ((*inner).xOpen.unwrap())(inner, name, real, flags, out_flags);
        if rc == ffi::SQLITE_OK && !(*real).pMethods.is_null() {
            (*f).pMethods = &GATED_IO;
        }
        rc
    }
}

fn register_gated_vfs() {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        // SAFETY: the default VFS lives for the process; the copy is leaked, so it does too,
        // and SQLite only reads it.
        unsafe {
            let inner = ffi::sqlite3_vfs_find(std::ptr::null());
            assert!(!inner.is_null());
            INNER.set(Inner(inner)).ok().unwrap();
            let mut vfs: ffi::sqlite3_vfs = std::ptr::read(inner);
            vfs.zName = c"gated".as_ptr();
            vfs.szOsFile = (*inner).szOsFile + std::mem::size_of::<GatedFile>() as c_int;
            vfs.xOpen = Some(gated_open);
            vfs.pNext = std::ptr::null_mut();
            assert_eq!(ffi::sqlite3_vfs_register(Box::into_raw(Box::new(vfs)), 0), ffi::SQLITE_OK);
        }
    });
}

/// Threads of this process named like the checkpoint thread (Linux only; elsewhere 0).
fn checkpoint_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("quietsqlite-che"))
        .count()
}

/// Waits until the database file holds at least `size` bytes (a checkpoint copied pages into
/// it); fails with `what` after 10 s.
fn wait_for_size(path: &std::path::Path, size: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(path).unwrap().len() < size {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Enough 3000-byte rows for more than 4000 WAL pages: at the writer's next gap, a
/// checkpoint begins whatever the queue does next.
const MANY_PAGES: &str = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 4500) \
                          INSERT INTO t(b) SELECT randomblob(3000) FROM c";

/// A database in a new directory, opened through the gated VFS; and its file's path.
fn open_gated(name: &str) -> (Harness, std::path::PathBuf) {
    register_gated_vfs();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let uri = format!("file:{}?vfs=gated", path.display());
    (open_at(dir, path.clone(), 1, |o| o.path = uri), path)
}

/// One test at a time: each counts the checkpoint threads of the process at its end.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn a_write_does_not_wait_for_a_checkpoints_sync() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (h, path) = open_gated("g.db");
    // The WAL's first frame syncs its header: before the gate closes.
    h.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)");
    set_gate(false);
    h.exec(MANY_PAGES);
    let began = waiting_at_gate(1);
    // Whatever happens below, the gate opens again before the test ends, or the thread held
    // there would keep the close from ending.
    struct Reopen;
    impl Drop for Reopen {
        fn drop(&mut self) {
            set_gate(true);
        }
    }
    let _reopen = Reopen;
    assert!(began, "no checkpoint began after 4500 pages and a gap");
    let size_during = std::fs::metadata(&path).unwrap().len();
    // The checkpoint waits in its first sync: a write goes on all the same.
    let id = h.send_exec(None, "INSERT INTO t(b) VALUES (x'01')");
    let write = h.try_wait(id, Duration::from_secs(10));
    assert!(write.is_some(), "the write waited for the checkpoint's sync");
    write.unwrap().expect("the write");
    assert_eq!(h.read_json("SELECT count(*) AS n FROM t"), r#"[{"n":4501}]"#);
    set_gate(true);
    // The checkpoint then copies the pages into the file.
    wait_for_size(&path, size_during + 4000 * 3000, "the checkpoint never finished");
    h.close();
    assert!(!path.with_extension("db-wal").exists(), "the writer closed last and removed the WAL");
    if cfg!(target_os = "linux") {
        assert_eq!(checkpoint_threads(), 0, "a checkpoint thread outlived its database");
    }
}

#[test]
fn a_rekey_and_a_close_end_the_checkpoint_thread() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Both need the writer alone with the file: the checkpoint thread's connection closes
    // first (a rekey that found it open would fail, SQLITE_BUSY).
    let h = open_with(1, |o| {
        o.encryption = Some(Arc::new(Key::passphrase(Cipher::ChaCha20, b"k1").unwrap()));
    });
    h.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)");
    let before = std::fs::metadata(&h.path).unwrap().len();
    h.exec(MANY_PAGES);
    wait_for_size(&h.path, before + 4000 * 3000, "no checkpoint ran");
    let key = Arc::new(Key::passphrase(Cipher::ChaCha20, b"k2").unwrap());
    let id = h.send_write(None, WriteKind::Rekey { key: Some(key) });
    h.wait(id).expect("rekey with the checkpoint thread's connection closed");
    // After the rekey a checkpoint opens a new thread with the new key.
    let grown = std::fs::metadata(&h.path).unwrap().len();
    h.exec(MANY_PAGES);
    wait_for_size(&h.path, grown + 1, "no checkpoint after the rekey");
    if cfg!(target_os = "linux") {
        assert_eq!(checkpoint_threads(), 1, "the checkpoint after the rekey ran on a new thread");
    }
    assert_eq!(h.read_json("SELECT count(*) AS n FROM t"), r#"[{"n":9000}]"#);
    h.close();
    if cfg!(target_os = "linux") {
        assert_eq!(checkpoint_threads(), 0, "a checkpoint thread outlived its database");
    }
}

#[test]
fn a_database_dropped_without_close_ends_its_checkpoint_thread() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut h = open(1);
    h.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)");
    let before = std::fs::metadata(&h.path).unwrap().len();
    h.exec(MANY_PAGES);
    wait_for_size(&h.path, before + 4000 * 3000, "no checkpoint ran");
    if cfg!(target_os = "linux") {
        assert_eq!(checkpoint_threads(), 1, "the checkpoint ran on its own thread");
    }
    drop(h.db.take());
    // The writer ends on its own thread after the drop: poll for the checkpoint thread's end.
    let deadline = Instant::now() + Duration::from_secs(10);
    while checkpoint_threads() > 0 {
        assert!(Instant::now() < deadline, "a checkpoint thread outlived its dropped database");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn an_attached_databases_wal_is_copied_by_the_writer() {
    // The checkpoint thread's connection has only the main database.
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let h = open(1);
    let aux = h.dir.path().join("aux.db");
    h.exec(&format!("ATTACH DATABASE '{}' AS aux", aux.display()));
    h.exec("PRAGMA aux.journal_mode = WAL");
    h.exec("CREATE TABLE aux.t(id INTEGER PRIMARY KEY, b BLOB)");
    let before = std::fs::metadata(&aux).unwrap().len();
    h.exec(&MANY_PAGES.replace("INSERT INTO t(b)", "INSERT INTO aux.t(b)"));
    wait_for_size(&aux, before + 4000 * 3000, "the attached database's WAL was not copied");
    h.close();
}

#[test]
fn a_mode_rwc_uri_opens_the_checkpoint_thread_too() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rwc.db");
    let uri = format!("file:{}?mode=rwc", path.display());
    let h = open_at(dir, path.clone(), 1, |o| o.path = uri);
    h.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)");
    let before = std::fs::metadata(&path).unwrap().len();
    h.exec(MANY_PAGES);
    wait_for_size(&path, before + 4000 * 3000, "no checkpoint ran");
    if cfg!(target_os = "linux") {
        assert_eq!(checkpoint_threads(), 1, "the checkpoint ran on its own thread");
    }
    h.close();
}

#[test]
fn when_the_checkpoint_thread_cannot_open_the_writer_checkpoints() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (h, path) = open_gated("refused.db");
    struct Allow;
    impl Drop for Allow {
        fn drop(&mut self) {
            REFUSE_CHECKPOINT_THREAD.store(false, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let _allow = Allow;
    REFUSE_CHECKPOINT_THREAD.store(true, std::sync::atomic::Ordering::SeqCst);
    h.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)");
    let before = std::fs::metadata(&path).unwrap().len();
    // No request follows: the writer, idle, sees the round fail and checkpoints itself.
    h.exec(MANY_PAGES);
    wait_for_size(&path, before + 4000 * 3000, "nothing was checkpointed");
    assert!(REFUSED.load(std::sync::atomic::Ordering::SeqCst) > 0, "the checkpoint thread tried to open");
    h.close();
}
