//! Another process against a rekey. A rekey that failed half-way (another process took a
//! lock while the file was out of WAL mode) left SQLite3MC's write cipher off: the writer's
//! connection then wrote plaintext pages into the encrypted file, which opened with neither
//! key afterwards.

mod common;
use common::*;
use quietsqlite_core::writer::REKEY_DONE;
use quietsqlite_core::connection::{open_reader, Location};
use quietsqlite_core::{Cipher, Error, Key, OpenOptions, WriteKind};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// SQLite's lock bytes in the database file (os_unix.c): SHARED takes a read lock on
/// `SHARED_FIRST..+SHARED_SIZE`, EXCLUSIVE a write lock on it.
const PENDING_BYTE: i64 = 0x4000_0000;
const SHARED_FIRST: i64 = PENDING_BYTE + 2;
const SHARED_SIZE: i64 = 510;

/// Another process (this test binary again, running `raw_shared_lock`) that waits until the
/// rekey's rollback journal appears (it has left WAL mode and is rewriting the file), then
/// holds a read lock on the SHARED bytes for `hold`, as a reader of another SQLite would:
/// the rekey cannot take the exclusive lock it needs to commit. (In this process it could
/// not: POSIX locks of one process never conflict.)
fn lock_when_rewriting(path: &std::path::Path, hold: Duration) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "raw_shared_lock", "--include-ignored", "--nocapture", "--test-threads=1"])
        .env("QS_LOCK_PATH", path)
        .env("QS_LOCK_MS", hold.as_millis().to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
#[ignore = "run by lock_when_rewriting, in a process of its own"]
fn raw_shared_lock() {
    let (Some(path), Some(ms)) = (std::env::var_os("QS_LOCK_PATH"), std::env::var("QS_LOCK_MS").ok()) else { return };
    let mut journal = path.clone();
    journal.push("-journal");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(&journal).is_err() && Instant::now() < deadline {}
    let file = std::fs::File::open(&path).unwrap();
    let lock = |kind: i32| {
        // SAFETY: a plain struct of integers; every field is set below or zero.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = kind as _;
        fl.l_whence = libc::SEEK_SET as _;
        fl.l_start = SHARED_FIRST as _;
        fl.l_len = SHARED_SIZE as _;
        // SAFETY: the descriptor is open for the call; `fl` is a valid flock.
        unsafe { libc::fcntl(std::os::unix::io::AsRawFd::as_raw_fd(&file), libc::F_SETLK, &fl) == 0 }
    };
    while !lock(libc::F_RDLCK) && Instant::now() < deadline {}
    std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
    lock(libc::F_UNLCK);
}

/// A read-only connection to the file, keyed as quietsqlite keys its own.
fn open_file(path: &std::path::Path, key: Option<&[u8]>) -> quietsqlite_core::Result<rusqlite::Connection> {
    let loc = Location::resolve(&path.to_string_lossy())?;
    let mut opts = OpenOptions::new(path.to_string_lossy());
    opts.encryption = key.map(|k| Arc::new(Key::passphrase(Cipher::ChaCha20, k).unwrap()));
    open_reader(&loc, &opts)
}

/// The rows and `integrity_check` of the file, opened with `key` (None: without one).
fn contents(path: &std::path::Path, key: Option<&[u8]>) -> Option<(i64, String)> {
    let c = open_file(path, key).ok()?;
    let n = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).ok()?;
    let check = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).ok()?;
    Some((n, check))
}

#[test]
fn another_process_cannot_cut_a_rekey_half_way() {
    // The rekey holds the exclusive lock it took to leave WAL mode until it is done (exclusive
    // locking mode): the other process's read lock waits for it, and the key changes whole.
    // Before, the lock got in and the rekey failed half-way in about one try of six.
    for _ in 0..4 {
        let h = open_with(1, |o| {
            o.encryption = Some(Arc::new(Key::passphrase(Cipher::ChaCha20, b"k1").unwrap()));
            o.busy_timeout_ms = 100;
            // No cache spill: the rekey would take its exclusive lock only to commit.
            o.pragmas.push(("cache_size".into(), "-100000".into()));
        });
        h.exec("CREATE TABLE t(x); WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 3000) INSERT INTO t SELECT randomblob(1000) FROM c");
        let mut locker = lock_when_rewriting(&h.path, Duration::from_millis(400));
        let id = h.send_write(None, WriteKind::Rekey { key: None });
        let outcome = h.wait(id);
        locker.wait().unwrap();
        // Done, or done and not back in WAL mode yet (the lock came right after): the new key.
        if let Err(e) = &outcome {
            assert!(matches!(e, Error::Sqlite { message, .. } if message.starts_with(REKEY_DONE)), "{e}");
        }
        h.exec("INSERT INTO t VALUES (1)");
        let path = h.path.clone();
        h.close();
        assert_eq!(contents(&path, None), Some((3001, "ok".into())));
        assert_eq!(contents(&path, Some(b"k1")), None, "the old key no longer opens it");
    }
}
