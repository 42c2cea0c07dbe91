//! Cancellation through a whole `Database`: queued requests dropped, running ones
//! interrupted (and only those), interrupted writes leaving nothing, forced close.

use quietsqlite_core::{
    CancelOutcome, Completion, CompletionSink, Database, Error, OpenOptions, Output, Params, ReadFormat, ReadJob,
    RequestId, WriteJob, WriteKind,
};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const RUNAWAY: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c";
/// Another text that never ends either. A statement that ran long before never goes to the
/// spare reader, so a test that holds the spare with a runaway sends it this one.
const RUNAWAY_FOR_SPARE: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT max(x) FROM c";

struct Sink(Mutex<Sender<Completion>>);

impl CompletionSink for Sink {
    fn complete(&self, completion: Completion) {
        let _ = self.0.lock().unwrap().send(completion);
    }
}

fn open(readers: usize) -> (tempfile::TempDir, Database, Receiver<Completion>) {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx) = channel();
    let mut opts = OpenOptions::new(dir.path().join("c.db").to_string_lossy().into_owned());
    opts.readers = readers;
    let db = Database::open(opts, Arc::new(Sink(Mutex::new(tx))), 0).unwrap();
    let opened = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(opened.result.is_ok());
    (dir, db, rx)
}

fn read(db: &Database, id: RequestId, sql: &str, cancellable: bool) {
    let job = ReadJob { id, sql: sql.into(), params: Params::None, format: ReadFormat::Rows { max_rows: None }, cancellable };
    db.read(job).unwrap();
}

fn execute(db: &Database, id: RequestId, sql: &str, cancellable: bool) {
    let kind = WriteKind::Execute { sql: sql.into(), params: Params::None };
    db.write(WriteJob { id, tx: None, kind, cancellable }).unwrap();
}

fn next(rx: &Receiver<Completion>) -> Completion {
    rx.recv_timeout(Duration::from_secs(5)).expect("a completion within 5 s")
}

fn is_interrupt(r: &quietsqlite_core::Result<Output>) -> bool {
    matches!(r, Err(Error::Sqlite { code, .. }) if code & 0xff == rusqlite::ffi::SQLITE_INTERRUPT)
}

#[test]
fn queued_requests_are_dropped_and_running_ones_interrupted() {
    let (_dir, db, rx) = open(1);
    read(&db, 1, RUNAWAY, true);
    std::thread::sleep(Duration::from_millis(30));
    // The reader is in a long statement: this one goes to the spare, which then is too.
    read(&db, 4, RUNAWAY_FOR_SPARE, true);
    std::thread::sleep(Duration::from_millis(30));
    read(&db, 2, "SELECT 2", true);
    read(&db, 3, "SELECT 3", false);
    assert_eq!(db.cancel(2), CancelOutcome::Dropped);
    assert_eq!(db.cancel(2), CancelOutcome::Finished, "dropped tickets are forgotten");
    assert_eq!(db.cancel(1), CancelOutcome::Interrupting);
    let first = next(&rx);
    assert_eq!(first.id, 1);
    assert!(is_interrupt(&first.result), "{:?}", first.result);
    // Request 2 never ran and sends nothing; request 3 runs normally.
    let third = next(&rx);
    assert_eq!(third.id, 3);
    assert!(third.result.is_ok());
    assert_eq!(db.cancel(4), CancelOutcome::Interrupting);
    let on_spare = next(&rx);
    assert_eq!(on_spare.id, 4);
    assert!(is_interrupt(&on_spare.result), "{:?}", on_spare.result);
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "no completion for the dropped request");
    // A finished request cannot be cancelled, and the id is unknown again.
    assert_eq!(db.cancel(1), CancelOutcome::Finished);
}

#[test]
fn an_interrupted_write_leaves_nothing() {
    let (_dir, db, rx) = open(1);
    execute(&db, 1, "CREATE TABLE t(v)", false);
    assert!(next(&rx).result.is_ok());
    execute(
        &db,
        2,
        "INSERT INTO t(v) SELECT x FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c)",
        true,
    );
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(db.cancel(2), CancelOutcome::Interrupting);
    assert!(is_interrupt(&next(&rx).result));
    let direct = rusqlite::Connection::open(_dir.path().join("c.db")).unwrap();
    let n: i64 = direct.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 0, "nothing of the interrupted INSERT remains");
    // The writer takes the next write.
    execute(&db, 3, "INSERT INTO t(v) VALUES (1)", true);
    assert!(next(&rx).result.is_ok());
    let n: i64 = direct.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 1);
}

#[test]
fn many_cancellations_never_reach_other_requests() {
    let (_dir, db, rx) = open(2);
    let medium = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 20000) SELECT count(*) FROM c";
    let n = 400u32;
    for id in 1..=n {
        read(&db, id, medium, id % 2 == 0);
    }
    let mut dropped = std::collections::HashSet::new();
    for id in (2..=n).step_by(2) {
        if id % 4 == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        if db.cancel(id) == CancelOutcome::Dropped {
            dropped.insert(id);
        }
    }
    let mut seen = 0;
    while seen + dropped.len() < n as usize {
        let c = next(&rx);
        seen += 1;
        assert!(!dropped.contains(&c.id), "dropped request {} ran", c.id);
        if c.id % 2 == 1 {
            assert!(c.result.is_ok(), "request {} was never cancelled but got {:?}", c.id, c.result);
        } else {
            assert!(c.result.is_ok() || is_interrupt(&c.result), "{:?}", c.result);
        }
    }
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
}

#[test]
fn stop_all_lets_close_finish_behind_runaway_statements() {
    let (_dir, db, rx) = open(2);
    execute(&db, 1, "CREATE TABLE t(v)", false);
    assert!(next(&rx).result.is_ok());
    read(&db, 2, RUNAWAY, false);
    read(&db, 3, RUNAWAY, false);
    std::thread::sleep(Duration::from_millis(30));
    // Both readers are in long statements: this one goes to the spare reader, so that the
    // read after it can only wait in the queue.
    read(&db, 7, RUNAWAY_FOR_SPARE, false);
    std::thread::sleep(Duration::from_millis(30));
    execute(&db, 4, &format!("INSERT INTO t(v) {RUNAWAY}"), false);
    read(&db, 5, "SELECT 1", false);
    std::thread::sleep(Duration::from_millis(30));
    db.close(6);
    db.stop_all();
    let mut ids = Vec::new();
    for _ in 0..6 {
        let c = next(&rx);
        if c.id != 6 {
            assert!(matches!(c.result, Err(Error::Closed(_))), "{}: {:?}", c.id, c.result);
        }
        ids.push(c.id);
    }
    ids.sort();
    assert_eq!(ids, vec![2, 3, 4, 5, 6, 7]);
}

/// Experiment 011 (docs/experiments/011-cancellation-cost.md), a measurement, not an
/// assertion: point queries on one connection without and with the progress handler that
/// cancellation installs. Run with
/// `cargo test --release -p quietsqlite-core --test cancel -- --ignored --nocapture`.
#[test]
#[ignore]
fn progress_handler_cost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL)").unwrap();
        c.execute_batch("BEGIN").unwrap();
        for i in 1..=10_000 {
            c.execute("INSERT INTO items VALUES (?, ?, ?)", rusqlite::params![i, format!("item {i}"), i as f64 / 3.0]).unwrap();
        }
        c.execute_batch("COMMIT").unwrap();
    }
    // CPU time of this thread (ns), so that time spent descheduled on a loaded machine does
    // not count.
    fn cpu_ns() -> u64 {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
        s.split_whitespace().next().unwrap().parse().unwrap()
    }
    let mut x = 1u64;
    let mut run = |conn: &rusqlite::Connection, n: u64| {
        let t = cpu_ns();
        for _ in 0..n {
            x = (x * 48271) % 2147483647;
            let id = (x % 10_000 + 1) as i64;
            let mut s = conn.prepare_cached("SELECT * FROM items WHERE id = ?").unwrap();
            let name: String = s.query_row([id], |r| r.get(1)).unwrap();
            std::hint::black_box(name);
        }
        cpu_ns() - t
    };
    let plain = rusqlite::Connection::open(&path).unwrap();
    let mut watched = rusqlite::Connection::open(&path).unwrap();
    // The same work as the real handler when nothing is cancelled: two atomic loads.
    let (stopping, armed) = (std::sync::atomic::AtomicBool::new(false), std::sync::atomic::AtomicBool::new(false));
    let acquire = std::sync::atomic::Ordering::Acquire;
    watched
        .progress_handler(quietsqlite_core::cancel::PROGRESS_OPS, Some(move || stopping.load(acquire) || armed.load(acquire)))
        .unwrap();
    run(&plain, 50_000);
    run(&watched, 50_000);
    // Interleaved in chunks, so drifts of the machine's load hit both alike.
    let chunk = 50_000;
    for round in 1..=5 {
        let (mut a, mut b) = (0u64, 0u64);
        for _ in 0..10 {
            a += run(&plain, chunk);
            b += run(&watched, chunk);
        }
        let n = (10 * chunk) as f64;
        let (a, b) = (a as f64 / n, b as f64 / n);
        println!("round {round}: without handler {a:.0} ns/query, with handler {b:.0} ns/query ({:+.1}%)", (b / a - 1.0) * 100.0);
    }
}
