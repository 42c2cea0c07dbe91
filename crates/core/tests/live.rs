//! The live-query registry: first emission, emission on a relevant commit, unchanged
//! results suppressed, shared groups, unsubscribe frees the group.

mod common;
use common::*;
use quietsqlite_core::{Output, Params};
use std::time::Duration;

fn emission_rows(h: &Harness, id: u32) -> u32 {
    match h.wait(id) {
        Ok(Output::Emission(rows)) => rows.rows,
        other => panic!("expected an emission for {id}, got {other:?}"),
    }
}

#[test]
fn subscribe_emit_suppress_unsubscribe() {
    let h = open(2);
    h.exec("CREATE TABLE t(v INTEGER)");
    // The writer completes a write before it tells the live queries of it; the next write's
    // completion means the schema change has been told (the writer is FIFO). Without it, the
    // subscription below could see that schema change late, and drop the dependencies its
    // re-run derives while the insert further down commits (a review found the race).
    h.exec("DELETE FROM t");
    let live = h.db().live();
    let sub = 1000;
    h.db()
        .subscribe(
            sub,
            "SELECT v FROM t WHERE v > 100".into(),
            Params::None,
            Duration::from_millis(10),
        )
        .unwrap();
    assert_eq!(
        emission_rows(&h, sub),
        0,
        "the first emission is the current (empty) result"
    );
    assert_eq!(live.stats().0, 1);
    h.db().acknowledge(sub);

    // A write the query reads but whose result does not change: a re-run, no emission.
    let runs = live.stats().1;
    h.exec("INSERT INTO t VALUES (1)");
    assert!(
        eventually(|| live.stats().1 > runs),
        "the write triggered a re-run"
    );
    // Then a change it must see; the next emission must be that one (1 row), proving that
    // nothing was sent for the unchanged re-run.
    h.exec("INSERT INTO t VALUES (500)");
    assert_eq!(emission_rows(&h, sub), 1);
    h.db().acknowledge(sub);

    // A table it does not read: no re-run at all. The schema change may re-run the query
    // first (counted when queued); once the count is steady, a write to `other` adds none.
    h.exec("CREATE TABLE other(x)");
    let runs = steady(|| live.stats().1);
    h.exec("INSERT INTO other VALUES (1)");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(live.stats().1, runs, "a write to a table it does not read re-ran it");
    // (A re-run queued but not yet started also covers later commits: the insert into t may
    // be served by a run counted before it, so only the emission is checked here.)
    h.exec("INSERT INTO t VALUES (600)");
    assert_eq!(emission_rows(&h, sub), 2);
    h.db().acknowledge(sub);

    h.db().unsubscribe(sub);
    assert_eq!(live.stats().0, 0, "the last unsubscribe frees the group");
    h.exec("INSERT INTO t VALUES (700)");
    assert!(
        h.try_wait(sub, Duration::from_millis(200)).is_none(),
        "nothing after unsubscribe"
    );
    h.close();
}

#[test]
fn identical_queries_share_one_group() {
    let h = open(2);
    h.exec("CREATE TABLE t(v INTEGER)");
    let live = h.db().live();
    let p = || Params::Positional(vec![quietsqlite_core::Value::Integer(0)].into());
    h.db()
        .subscribe(
            1,
            "SELECT v FROM t WHERE v > ?".into(),
            p(),
            Duration::from_millis(5),
        )
        .unwrap();
    h.db()
        .subscribe(
            2,
            "SELECT v FROM t WHERE v > ?".into(),
            p(),
            Duration::from_millis(5),
        )
        .unwrap();
    h.db()
        .subscribe(
            3,
            "SELECT v FROM t WHERE v > ?".into(),
            Params::Positional(vec![quietsqlite_core::Value::Integer(5)].into()),
            Duration::from_millis(5),
        )
        .unwrap();
    for id in [1, 2, 3] {
        assert_eq!(emission_rows(&h, id), 0);
        h.db().acknowledge(id);
    }
    assert_eq!(
        live.stats().0,
        2,
        "same sql and params share a group; other params do not"
    );
    h.exec("INSERT INTO t VALUES (3)");
    assert_eq!(emission_rows(&h, 1), 1);
    assert_eq!(emission_rows(&h, 2), 1);
    h.db().unsubscribe(1);
    assert_eq!(live.stats().0, 2, "a group with a subscriber left stays");
    h.db().unsubscribe(2);
    h.db().unsubscribe(3);
    assert_eq!(live.stats().0, 0);
    h.close();
}

#[test]
fn a_slow_consumer_gets_the_latest_result_not_a_backlog() {
    let h = open(2);
    h.exec("CREATE TABLE t(v INTEGER)");
    let sub = 77;
    h.db()
        .subscribe(
            sub,
            "SELECT v FROM t".into(),
            Params::None,
            Duration::from_millis(1),
        )
        .unwrap();
    assert_eq!(emission_rows(&h, sub), 0);
    h.db().acknowledge(sub);
    h.exec("INSERT INTO t VALUES (1)");
    assert_eq!(emission_rows(&h, sub), 1);
    // Not acknowledged: these writes collapse into one pending result.
    for i in 2..=20 {
        h.exec(&format!("INSERT INTO t VALUES ({i})"));
    }
    let live = h.db().live();
    let settled = eventually(|| {
        let before = live.stats().1;
        std::thread::sleep(Duration::from_millis(50));
        live.stats().1 == before
    });
    assert!(settled);
    assert!(
        h.try_wait(sub, Duration::from_millis(100)).is_none(),
        "nothing sent before the acknowledgement"
    );
    h.db().acknowledge(sub);
    assert_eq!(
        emission_rows(&h, sub),
        20,
        "the acknowledgement brings the newest rows"
    );
    h.db().acknowledge(sub);
    h.db().unsubscribe(sub);
    h.close();
}

#[test]
fn a_failing_first_run_reports_the_error() {
    let h = open(1);
    h.db()
        .subscribe(
            5,
            "SELECT * FROM missing_table".into(),
            Params::None,
            Duration::from_millis(5),
        )
        .unwrap();
    assert!(h.wait(5).is_err());
    h.db().unsubscribe(5);
    assert_eq!(h.db().live().stats().0, 0);
    h.close();
}

#[test]
fn close_ends_subscriptions() {
    let h = open(1);
    h.exec("CREATE TABLE t(v)");
    h.db()
        .subscribe(
            9,
            "SELECT v FROM t".into(),
            Params::None,
            Duration::from_millis(5),
        )
        .unwrap();
    emission_rows(&h, 9);
    h.close();
    assert_eq!(h.db().live().stats().0, 0);
}

/// The value of `f` once it stopped changing for 100 ms.
fn steady(mut f: impl FnMut() -> u64) -> u64 {
    let mut last = f();
    let mut since = std::time::Instant::now();
    while since.elapsed() < Duration::from_millis(100) {
        std::thread::sleep(Duration::from_millis(10));
        let now = f();
        if now != last {
            last = now;
            since = std::time::Instant::now();
        }
    }
    last
}
