//! A batch that crosses in parts (batch_parts.rs): one job, one transaction, one completion,
//! however its parts arrive, end, or stop arriving.

mod common;
use common::*;
use quietsqlite_core::query::BatchSets;
use quietsqlite_core::{Error, Output, Params, TxMode, Value, WriteKind};
use std::time::Duration;

const INSERT: &str = "INSERT INTO t(x) VALUES (?)";

fn sets(from: i64, to: i64) -> BatchSets {
    BatchSets::Each((from..to).map(|i| Params::Positional(vec![Value::Integer(i)].into())).collect())
}

fn count(h: &Harness) -> String {
    h.writer_json(None, "SELECT count(*) AS n, coalesce(sum(x), 0) AS s FROM t")
}

#[test]
fn the_parts_of_a_batch_commit_together_with_one_completion() {
    let h = open(1);
    h.exec("CREATE TABLE t(x INTEGER)");
    let id = h.id();
    h.db().write_batch_in_parts(id, None, INSERT.into(), sets(0, 10), false).unwrap();
    // The writer may already run the first part: nothing of it is visible to a reader yet.
    h.db().batch_part(sets(10, 30)).unwrap();
    assert_eq!(h.read_json("SELECT count(*) AS n FROM t"), r#"[{"n":0}]"#);
    h.db().batch_part(sets(30, 100)).unwrap();
    h.db().end_batch(true);
    assert!(matches!(h.wait(id), Ok(Output::Batch { changes: 100 })));
    assert_eq!(count(&h), r#"[{"n":100,"s":4950}]"#);
    h.close();
}

#[test]
fn a_failure_in_a_later_part_names_its_set_in_the_whole_batch_and_undoes_every_part() {
    let h = open(1);
    h.exec("CREATE TABLE t(x INTEGER UNIQUE)");
    let id = h.id();
    h.db().write_batch_in_parts(id, None, INSERT.into(), sets(0, 10), false).unwrap();
    h.db().batch_part(sets(10, 20)).unwrap();
    // Set 25 of the batch repeats the value of set 0.
    h.db().batch_part(sets(20, 25)).unwrap();
    h.db().batch_part(sets(0, 1)).unwrap();
    // Parts after the failing one are dropped; they must not be run or block anything.
    h.db().batch_part(sets(1000, 1010)).unwrap();
    h.db().end_batch(true);
    match h.wait(id) {
        Err(Error::Sqlite { code, .. }) => assert_eq!(code & 0xff, rusqlite::ffi::SQLITE_CONSTRAINT),
        other => panic!("expected a constraint error, got {other:?}"),
    }
    // A set with too few values, the second of the batch (the first of its second part).
    let id = h.id();
    h.db().write_batch_in_parts(id, None, INSERT.into(), sets(5000, 5001), false).unwrap();
    h.db().batch_part(BatchSets::Each(vec![Params::Positional(vec![].into())])).unwrap();
    h.db().end_batch(true);
    match h.wait(id) {
        Err(Error::Range(m)) => assert!(m.starts_with("parameter set 1:"), "{m}"),
        other => panic!("expected a parameter count error, got {other:?}"),
    }
    assert_eq!(count(&h), r#"[{"n":0,"s":0}]"#);
    h.close();
}

#[test]
fn an_abandoned_batch_rolls_back_posts_nothing_and_frees_the_writer() {
    let h = open(1);
    h.exec("CREATE TABLE t(x INTEGER)");
    let id = h.id();
    h.db().write_batch_in_parts(id, None, INSERT.into(), sets(0, 10), false).unwrap();
    h.db().batch_part(sets(10, 20)).unwrap();
    h.db().end_batch(false);
    h.exec("INSERT INTO t VALUES (1000)");
    assert!(h.try_wait(id, Duration::from_millis(50)).is_none(), "an abandoned batch completed");
    assert_eq!(count(&h), r#"[{"n":1,"s":1000}]"#);

    // Inside a transaction, only the batch's savepoint is undone.
    h.begin(4);
    h.wait(h.send_exec(Some(4), "INSERT INTO t VALUES (1)")).unwrap();
    h.db().write_batch_in_parts(h.id(), Some(4), INSERT.into(), sets(0, 10), false).unwrap();
    h.db().end_batch(false);
    h.wait(h.send_write(Some(4), WriteKind::Commit)).unwrap();
    assert_eq!(count(&h), r#"[{"n":2,"s":1001}]"#);
    h.close();
}

#[test]
fn a_batch_waiting_for_parts_does_not_keep_a_dropped_database_alive() {
    let baseline = core_threads();
    let mut h = open(2);
    h.exec("CREATE TABLE t(x INTEGER)");
    let id = h.id();
    h.db().write_batch_in_parts(id, None, INSERT.into(), sets(0, 10), false).unwrap();
    // The writer now waits for the next part, which never comes: the owner is gone.
    h.db = None;
    assert!(eventually(|| core_threads() <= baseline), "threads left after the drop");
    assert_eq!(count_rows(&h.path, "SELECT count(*) FROM t"), 0);
}

#[test]
fn a_batch_in_parts_waits_for_the_transaction_holding_the_writer() {
    let h = open(1);
    h.exec("CREATE TABLE t(x INTEGER)");
    h.send_write(Some(9), WriteKind::Begin { mode: TxMode::Immediate, silent: true });
    let id = h.id();
    h.db().write_batch_in_parts(id, None, INSERT.into(), sets(0, 10), false).unwrap();
    h.db().batch_part(sets(10, 20)).unwrap();
    h.db().end_batch(true);
    // Sent after the batch, but by the transaction that holds the writer: it runs first.
    h.wait(h.send_exec(Some(9), "INSERT INTO t VALUES (-1)")).unwrap();
    assert!(h.try_wait(id, Duration::from_millis(50)).is_none(), "the batch ran inside another transaction");
    h.wait(h.send_write(Some(9), WriteKind::Commit)).unwrap();
    assert!(matches!(h.wait(id), Ok(Output::Batch { changes: 20 })));
    assert_eq!(count(&h), r#"[{"n":21,"s":189}]"#);
    h.close();
}
