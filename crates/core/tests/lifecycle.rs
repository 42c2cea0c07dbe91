//! Database lifecycle: every thread and file descriptor ends with its owner, whether the
//! database is closed or just dropped. One test function: thread and descriptor counts are
//! process-wide, so scenarios run one after another, never beside other tests.

mod common;
use common::*;
use quietsqlite_core::WriteKind;

thread_local! {
    /// All threads of the process when the running scenario began.
    static PROCESS_BASELINE: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// The database's threads once they are gone. A thread just spawned carries its parent's name
/// until it first runs (std names it from inside), so a count by name alone could see none
/// left and then one more: the process's count must be back too.
fn settle_threads(baseline: usize) -> usize {
    eventually(|| core_threads() <= baseline && process_threads() <= PROCESS_BASELINE.get());
    core_threads()
}

/// Runs each scenario even when an earlier one failed (a leak in one must not hide the
/// others); each measures against the threads alive when it starts.
fn scenario(failures: &mut Vec<String>, name: &str, f: impl FnOnce(usize)) {
    let baseline = core_threads();
    PROCESS_BASELINE.set(process_threads());
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(baseline))) {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
        failures.push(format!("{name}: {}", msg.unwrap_or_default()));
    }
}

#[test]
fn threads_and_files_end_with_their_database() {
    let mut failures = Vec::new();

    scenario(&mut failures, "close", |baseline| {
        for _ in 0..20 {
            let h = open(3);
            h.exec("CREATE TABLE IF NOT EXISTS t(x)");
            h.exec("INSERT INTO t VALUES (1)");
            assert!(
                core_threads() >= baseline + 4,
                "writer, readers and live scheduler run"
            );
            assert!(fds_under(h.dir.path()) > 0);
            h.close();
            assert_eq!(settle_threads(baseline), baseline, "threads after close()");
            assert!(
                eventually(|| fds_under(h.dir.path()) == 0),
                "descriptors after close()"
            );
        }
    });

    // Dropped without close(): the threads still drain and exit.
    scenario(&mut failures, "drop", |baseline| {
        for _ in 0..20 {
            let mut h = open(2);
            h.exec("CREATE TABLE IF NOT EXISTS t(x)");
            let _queued = h.send_exec(None, "INSERT INTO t VALUES (2)");
            drop(h.db.take());
            assert_eq!(settle_threads(baseline), baseline, "threads after drop");
            assert!(
                eventually(|| fds_under(h.dir.path()) == 0),
                "descriptors after drop"
            );
        }
    });

    // Dropped while a transaction holds the writer: the lock must not outlive the owner.
    scenario(&mut failures, "drop in transaction", |baseline| {
        let mut h = open(1);
        h.exec("CREATE TABLE t(x)");
        h.begin(1);
        h.wait(h.send_exec(Some(1), "INSERT INTO t VALUES ('never committed')"))
            .unwrap();
        drop(h.db.take());
        assert_eq!(
            settle_threads(baseline),
            baseline,
            "threads after dropping an open transaction"
        );
        let conn = rusqlite::Connection::open(&h.path).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        conn.execute("INSERT INTO t VALUES ('later')", [])
            .expect("the file is writable again");
        let n: i64 = conn
            .query_row(
                "SELECT count(*) FROM t WHERE x = 'never committed'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0, "the dropped transaction was rolled back");
        drop(conn);
    });

    // A failed open leaves nothing behind.
    scenario(&mut failures, "failed open", |baseline| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("junk.db"), vec![0x42u8; 8192]).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = std::sync::Arc::new(ChannelSink(std::sync::Mutex::new(tx)));
        let mut opts = quietsqlite_core::OpenOptions::new(
            dir.path().join("junk.db").to_string_lossy().into_owned(),
        );
        opts.readers = 2;
        let db = quietsqlite_core::Database::open(opts, sink, 0).expect("threads start");
        let c = rx.recv_timeout(HANG).expect("open completes");
        assert!(
            c.result.is_err(),
            "a file that is not a database fails to open"
        );
        drop(db);
        assert_eq!(
            settle_threads(baseline),
            baseline,
            "threads after a failed open"
        );
        assert!(
            eventually(|| fds_under(dir.path()) == 0),
            "descriptors after a failed open"
        );
    });

    // Stop after commit: a Commit queued just before close is honoured.
    scenario(&mut failures, "commit then close", |baseline| {
        let h = open(1);
        h.exec("CREATE TABLE t(x)");
        h.begin(9);
        h.send_exec(Some(9), "INSERT INTO t VALUES (1)");
        let commit = h.send_write(Some(9), WriteKind::Commit);
        h.close();
        h.wait(commit).expect("commit ran before the stop");
        assert_eq!(count_rows(&h.path, "SELECT count(*) FROM t"), 1);
        assert_eq!(settle_threads(baseline), baseline);
    });

    assert!(
        failures.is_empty(),
        "failed scenarios:\n{}",
        failures.join("\n")
    );
}
