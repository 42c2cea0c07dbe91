//! Reader threads: parallel reads, panics become errors, writes refused.

mod common;
use common::*;
use quietsqlite_core::{Error, RequestId};

const SLOW: &str =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000) SELECT count(*) AS n FROM c";

/// The order in which completions arrived, and the place of one request in it.
fn arrival_order(h: &Harness) -> (Vec<RequestId>, impl Fn(RequestId) -> usize) {
    let order = h.arrivals.borrow().clone();
    let place = order.clone();
    (order, move |id| place.iter().position(|&x| x == id).unwrap())
}

/// Waits until `n` readers (the spare not counted) are in a long job.
fn until_long(h: &Harness, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while h.db().long_readers_for_tests() != n {
        assert!(std::time::Instant::now() < deadline, "{n} readers never were in a long job");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn readers_run_in_parallel() {
    let h = open(2);
    let slow = h.send_read(SLOW);
    // Give the slow read time to be taken by a reader (ordering, not speed, is asserted).
    std::thread::sleep(std::time::Duration::from_millis(20));
    let fast = h.send_read("SELECT 42 AS v");
    assert_eq!(json(h.wait(fast).unwrap()), r#"[{"v":42}]"#);
    h.wait(slow).unwrap();
    let (order, pos) = arrival_order(&h);
    assert!(
        pos(fast) < pos(slow),
        "the second reader served the fast read meanwhile: {order:?}"
    );
    h.close();
}

#[test]
fn a_fast_read_passes_a_long_one_on_the_spare() {
    // One reader, in a long statement: the spare serves the fast read meanwhile.
    let h = open(1);
    let slow = h.send_read(SLOW);
    until_long(&h, 1);
    let fast = h.send_read("SELECT 42 AS v");
    assert_eq!(json(h.wait(fast).unwrap()), r#"[{"v":42}]"#);
    h.wait(slow).unwrap();
    let (order, pos) = arrival_order(&h);
    assert!(pos(fast) < pos(slow), "the spare served the fast read: {order:?}");
    h.close();
}

#[test]
fn a_read_long_when_it_last_ran_leaves_the_spare_to_a_fast_one() {
    // One reader, in a long statement. The same statement sent again waits for that reader
    // rather than taking the spare, so the spare is free for the fast read.
    let h = open(1);
    let slow = h.send_read(SLOW);
    until_long(&h, 1);
    let slow_again = h.send_read(SLOW);
    let fast = h.send_read("SELECT 42 AS v");
    assert_eq!(json(h.wait(fast).unwrap()), r#"[{"v":42}]"#);
    h.wait(slow).unwrap();
    h.wait(slow_again).unwrap();
    let (order, pos) = arrival_order(&h);
    assert!(pos(fast) < pos(slow).min(pos(slow_again)), "the spare served the fast read: {order:?}");
    h.close();
}

#[test]
fn a_fast_read_waits_when_the_spare_is_in_a_long_statement_too() {
    // The control case: the spare is one more reader, not a way round every long read. A read
    // not known to be long, sent while the reader is long, goes to the spare; once the spare
    // is long as well, a fast read queues for the first of them to end.
    let h = open(1);
    let slow = h.send_read(SLOW);
    until_long(&h, 1);
    let slow_on_spare = h.send_read(&SLOW.replace("5000000", "5000001"));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let fast = h.send_read("SELECT 42 AS v");
    h.wait(fast).unwrap();
    h.wait(slow).unwrap();
    h.wait(slow_on_spare).unwrap();
    let (order, pos) = arrival_order(&h);
    assert!(pos(fast) > pos(slow).min(pos(slow_on_spare)), "{order:?}");
    h.close();
}

#[test]
fn a_reader_panic_becomes_an_error_and_the_reader_lives_on() {
    let h = open(1);
    let id = h.id();
    h.db().panic_for_tests(id).unwrap();
    match h.wait(id) {
        Err(Error::Internal(msg)) => assert!(msg.contains("panic"), "{msg}"),
        other => panic!("expected an internal error, got {other:?}"),
    }
    // The only reader survived and still serves.
    assert_eq!(h.read_json("SELECT 1 AS one"), r#"[{"one":1}]"#);
    h.close();
}

#[test]
fn readers_refuse_writes_and_see_commits() {
    let h = open(2);
    h.exec("CREATE TABLE t(x)");
    let id = h.send_read("INSERT INTO t VALUES (1)");
    assert!(matches!(h.wait(id), Err(Error::Sqlite { .. })));
    h.exec("INSERT INTO t VALUES (2)");
    for _ in 0..4 {
        assert_eq!(h.read_json("SELECT sum(x) AS s FROM t"), r#"[{"s":2}]"#);
    }
    h.close();
}

#[test]
fn many_concurrent_reads_all_complete() {
    let h = open(3);
    let ids: Vec<_> = (0..500)
        .map(|i| h.send_read(&format!("SELECT {i} AS v")))
        .collect();
    for (i, id) in ids.into_iter().enumerate() {
        assert_eq!(json(h.wait(id).unwrap()), format!(r#"[{{"v":{i}}}]"#));
    }
    h.close();
}
