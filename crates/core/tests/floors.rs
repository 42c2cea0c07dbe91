//! Measurements behind experiments 005 and 006 (`docs/experiments/`), not assertions: the
//! cost of SQLite itself under our batch and read paths. Ignored by default; run with
//! `cargo test --release -p quietsqlite-core --test floors -- --ignored --nocapture`.

use quietsqlite_core::query::{execute_batch, read, BatchSets, ReadFormat};
use quietsqlite_core::{Params, Value};
use rusqlite::Connection;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

fn rows(n: i64) -> Vec<Params> {
    (0..n)
        .map(|i| {
            Params::Positional(vec![
                Value::Integer(i),
                Value::Text(format!("item {i}")),
                Value::Text(format!("{:x<90}", "description of the item ")),
                Value::Real(i as f64 / 7.0),
                Value::Text(format!("cat{}", i % 20)),
                Value::Integer(1_700_000_000 + i),
            ]
            .into())
        })
        .collect()
}

fn fresh() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join("b.db")).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
         CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, description TEXT, price REAL, category TEXT, created_at INTEGER)",
    )
    .unwrap();
    (dir, conn)
}

const INSERT: &str = "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)";

/// Experiment 005: plain rusqlite bind + execute vs our batch path, without and with hooks.
#[test]
#[ignore]
fn batch_floor() {
    let sets = rows(100_000);
    for round in 0..3 {
        let (_d, conn) = fresh();
        let t = Instant::now();
        conn.execute_batch("BEGIN").unwrap();
        {
            let mut stmt = conn.prepare(INSERT).unwrap();
            for p in &sets {
                quietsqlite_core::bind::bind(&mut stmt, p).unwrap();
                stmt.raw_execute().unwrap();
            }
        }
        conn.execute_batch("COMMIT").unwrap();
        let raw = t.elapsed();

        let batch = BatchSets::Each(sets.clone());
        let (_d, conn) = fresh();
        let t = Instant::now();
        execute_batch(&conn, INSERT, &batch, None).unwrap();
        let ours = t.elapsed();

        let (_d, conn) = fresh();
        let tracker = quietsqlite_core::hooks::ChangeTracker::install(&conn, Arc::new(AtomicBool::new(false)));
        let t = Instant::now();
        execute_batch(&conn, INSERT, &batch, None).unwrap();
        let hooked = t.elapsed();
        drop(tracker);
        println!("round {round}: bind+raw_execute {raw:?}; query::execute_batch {ours:?}; with hooks {hooked:?}");
    }
}

/// Experiment 006: stepping 1k rows vs our row encoding vs our JSON, on one connection.
#[test]
#[ignore]
fn read_floor() {
    let (_d, conn) = fresh();
    let batch = BatchSets::Each(rows(1000));
    execute_batch(&conn, INSERT, &batch, None).unwrap();
    let conn = quietsqlite_core::read_connection::ReadConnection::new(conn, 16);
    let sql = "SELECT * FROM items";
    for round in 0..3 {
        let n = 300;
        let t = Instant::now();
        for _ in 0..n {
            let mut stmt = conn.prepare_cached(sql).unwrap();
            let mut rows = stmt.raw_query();
            let mut bytes = 0usize;
            while let Some(r) = rows.next().unwrap() {
                for i in 0..6 {
                    if let rusqlite::types::ValueRef::Text(t) = r.get_ref_unwrap(i) {
                        bytes += t.len();
                    }
                }
            }
            assert!(bytes > 0);
        }
        let step = t.elapsed() / n;
        let t = Instant::now();
        for _ in 0..n {
            read(&conn, sql, &Params::None, ReadFormat::Rows { max_rows: None }).unwrap();
        }
        let encoded = t.elapsed() / n;
        let t = Instant::now();
        for _ in 0..n {
            read(&conn, sql, &Params::None, ReadFormat::Json).unwrap();
        }
        let json = t.elapsed() / n;
        println!("round {round}: step+read cells {step:?}; encode rows {encoded:?}; json {json:?}");
    }
}
