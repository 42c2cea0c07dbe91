//! A second thread for large `selectBytes` results: once a result's JSON passes
//! `SPLIT_AT_BYTES`, the reader only steps and copies each row's values into a batch, and a
//! helper thread writes the batches as JSON while the reader steps on
//! (docs/experiments/036-json-helper-thread.md). Each reader owns one helper, started on
//! first use and ended (joined) with the reader. A result is split only when each busy
//! reader of the database could have a CPU for its helper too: with fewer CPUs the copy
//! into batches would only add work. A helper that cannot be started leaves the result
//! with the reader.
//!
//! The writer moves to the helper for the rest of the result and comes back when the reader
//! says the rows are done, so the output is one buffer in row order. At most `BATCHES`
//! batches exist per helper: the reader waits for a spare one when all are out, which bounds
//! the memory between the two threads. Every wait ends: a helper that stopped drops its ends
//! of the channels, and the reader then fails the request instead of waiting.

use crate::completion::panic_message;
use crate::error::{Error, Result};
use crate::json::JsonWriter;
use crate::raw_statement::{ColumnValues, RawStatement};
use crossbeam_channel::{Receiver, Sender};
use rusqlite::types::ValueRef;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A result whose JSON has reached this size goes on with the helper. Smaller results (and
/// the start of every result) are written by the reader alone and never wake the helper.
pub const SPLIT_AT_BYTES: usize = 64 * 1024;
/// A batch is handed over once its values hold this many bytes of text and BLOBs, or
/// `BATCH_CELLS` values.
const BATCH_BYTES: usize = 64 * 1024;
const BATCH_CELLS: usize = 4096;
/// Batches per helper: one filling, one being written, one waiting.
const BATCHES: usize = 3;
/// A batch that grew past this (a very large value) gives its buffer back to the allocator
/// instead of keeping it for the next batch.
const KEEP_BATCH_BYTES: usize = 1024 * 1024;

/// One value of a row, copied out of SQLite. Text and BLOBs are ranges of the batch's bytes.
#[derive(Debug, Clone, Copy)]
enum Cell {
    Null,
    Integer(i64),
    Real(f64),
    Text(usize, usize),
    Blob(usize, usize),
}

/// Rows of one result, copied out of SQLite for the helper.
#[derive(Default)]
struct Batch {
    cells: Vec<Cell>,
    bytes: Vec<u8>,
}

impl Batch {
    fn push_row<R: ColumnValues + ?Sized>(&mut self, row: &R, cols: usize) -> Result<()> {
        for i in 0..cols {
            let cell = match row.value(i)? {
                ValueRef::Null => Cell::Null,
                ValueRef::Integer(v) => Cell::Integer(v),
                ValueRef::Real(v) => Cell::Real(v),
                ValueRef::Text(t) => {
                    let start = self.bytes.len();
                    self.bytes.extend_from_slice(t);
                    Cell::Text(start, self.bytes.len())
                }
                ValueRef::Blob(b) => {
                    let start = self.bytes.len();
                    self.bytes.extend_from_slice(b);
                    Cell::Blob(start, self.bytes.len())
                }
            };
            self.cells.push(cell);
        }
        Ok(())
    }

    fn full(&self) -> bool {
        self.bytes.len() >= BATCH_BYTES || self.cells.len() >= BATCH_CELLS
    }

    /// Writes the batch's rows (`cols` values each; `cols` > 0) to `out`.
    fn write_to(&self, out: &mut JsonWriter, cols: usize) -> Result<()> {
        if self.cells.len() % cols != 0 {
            return Err(Error::Internal("a batch ends inside a row".into()));
        }
        for cells in self.cells.chunks_exact(cols) {
            out.push_row(&BatchRow { cells, bytes: &self.bytes })?;
        }
        Ok(())
    }

    fn clear(&mut self) {
        self.cells.clear();
        if self.bytes.capacity() > KEEP_BATCH_BYTES {
            self.bytes = Vec::new();
        } else {
            self.bytes.clear();
        }
    }
}

struct BatchRow<'a> {
    cells: &'a [Cell],
    bytes: &'a [u8],
}

impl ColumnValues for BatchRow<'_> {
    fn value(&self, col: usize) -> Result<ValueRef<'_>> {
        let cell = self.cells.get(col).ok_or_else(|| Error::Internal("column outside the batch's row".into()))?;
        Ok(match *cell {
            Cell::Null => ValueRef::Null,
            Cell::Integer(v) => ValueRef::Integer(v),
            Cell::Real(v) => ValueRef::Real(v),
            Cell::Text(start, end) => ValueRef::Text(&self.bytes[start..end]),
            Cell::Blob(start, end) => ValueRef::Blob(&self.bytes[start..end]),
        })
    }
}

enum Job {
    /// The writer of a result, and its number of columns (> 0).
    Start(JsonWriter, usize),
    Rows(Batch),
    /// The rows are done: send the writer back.
    Finish,
}

/// The reader's ends of a running helper. Dropping it closes the job channel, which ends the
/// helper's loop, and joins the thread.
struct Running {
    jobs: Option<Sender<Job>>,
    spares: Receiver<Batch>,
    done: Receiver<Result<JsonWriter>>,
    /// Batches that exist: with the reader, queued, being written or spare.
    batches: usize,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(t) = self.thread.take() {
            // A helper that panicked has already failed its request; nothing more to report.
            let _ = t.join();
        }
    }
}

/// A reader's helper thread, started on first use.
pub struct JsonHelper {
    running: Option<Running>,
    /// Readers of the database busy with a request, this one included.
    busy_readers: Arc<AtomicUsize>,
}

impl JsonHelper {
    pub(crate) fn new(busy_readers: Arc<AtomicUsize>) -> JsonHelper {
        JsonHelper { running: None, busy_readers }
    }

    /// Whether a CPU is left for the helper now: each busy reader (this one included) may
    /// have its helper at work, so two CPUs for each.
    pub(crate) fn has_a_cpu(&self) -> bool {
        2 * self.busy_readers.load(Ordering::Acquire) <= crate::spin::cpus()
    }

    /// Starts the helper thread if it is not running; false when it cannot be started (the
    /// result then stays with the reader).
    pub(crate) fn start(&mut self) -> bool {
        if self.running.is_none() {
            self.running = spawn().ok();
        }
        self.running.is_some()
    }

    /// Writes the rest of `stmt`'s rows, its current row first, after what `writer` holds,
    /// and returns the writer; call `start` first. On an error (from SQLite while stepping,
    /// or a helper that stopped) the result is dropped, and the helper is ready for the next
    /// one.
    pub(crate) fn write_rest(&mut self, writer: JsonWriter, stmt: &mut RawStatement, cols: usize) -> Result<JsonWriter> {
        if cols == 0 {
            return Err(Error::Internal("a result without columns cannot be split".into()));
        }
        let running = self.running.as_mut().ok_or_else(helper_stopped)?;
        let outcome = catch_unwind(AssertUnwindSafe(|| stream(running, writer, stmt, cols)));
        match outcome {
            Ok(Ok(w)) => Ok(w),
            Ok(Err(e)) => {
                if matches!(e, Error::Internal(_)) {
                    // The helper is gone or out of step: start afresh next time.
                    self.running = None;
                }
                Err(e)
            }
            Err(panic) => {
                // The helper may hold a half-written result: end it before unwinding on.
                self.running = None;
                resume_unwind(panic)
            }
        }
    }
}

fn helper_stopped() -> Error {
    Error::Internal("the JSON helper thread stopped".into())
}

fn spawn() -> Result<Running> {
    let (jobs, job_queue) = crossbeam_channel::unbounded::<Job>();
    let (spare_tx, spares) = crossbeam_channel::unbounded::<Batch>();
    let (done_tx, done) = crossbeam_channel::bounded::<Result<JsonWriter>>(1);
    let thread = std::thread::Builder::new()
        .name("quietsqlite-json".into())
        .spawn(move || serve(job_queue, spare_tx, done_tx))
        .map_err(|e| Error::Internal(format!("could not start the JSON helper thread: {e}")))?;
    Ok(Running { jobs: Some(jobs), spares, done, batches: 0, thread: Some(thread) })
}

/// The helper's loop: one result at a time, batches in the order sent.
fn serve(jobs: Receiver<Job>, spares: Sender<Batch>, done: Sender<Result<JsonWriter>>) {
    let mut current: Option<(JsonWriter, usize, Result<()>)> = None;
    while let Ok(job) = jobs.recv() {
        match job {
            Job::Start(w, cols) => current = Some((w, cols, Ok(()))),
            Job::Rows(mut batch) => {
                if let Some((w, cols, outcome)) = current.as_mut() {
                    if outcome.is_ok() {
                        // A panic fails this result with its message; the loop stays in step.
                        *outcome = catch_unwind(AssertUnwindSafe(|| batch.write_to(w, *cols)))
                            .unwrap_or_else(|p| Err(Error::Internal(panic_message(p))));
                    }
                }
                batch.clear();
                // The reader may have stopped waiting for spares (it failed): fine.
                let _ = spares.send(batch);
            }
            Job::Finish => {
                let result = match current.take() {
                    Some((w, _, Ok(()))) => Ok(w),
                    Some((_, _, Err(e))) => Err(e),
                    None => Err(Error::Internal("the JSON helper was asked to finish no result".into())),
                };
                if done.send(result).is_err() {
                    return;
                }
            }
        }
    }
}

/// The reader's side of one result: step, copy, hand over; then collect the writer.
fn stream(running: &mut Running, writer: JsonWriter, stmt: &mut RawStatement, cols: usize) -> Result<JsonWriter> {
    let jobs = running.jobs.as_ref().ok_or_else(helper_stopped)?;
    jobs.send(Job::Start(writer, cols)).map_err(|_| helper_stopped())?;
    let mut stepped = Ok(());
    let mut batch = take_batch(running)?;
    loop {
        if let Err(e) = batch.push_row(stmt, cols) {
            stepped = Err(e);
            break;
        }
        if batch.full() {
            send(running, batch)?;
            batch = take_batch(running)?;
        }
        match stmt.step() {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                stepped = Err(e);
                break;
            }
        }
    }
    // Even a failed result is finished, so the helper is back in step for the next one.
    send(running, batch)?;
    let jobs = running.jobs.as_ref().ok_or_else(helper_stopped)?;
    jobs.send(Job::Finish).map_err(|_| helper_stopped())?;
    let written = running.done.recv().map_err(|_| helper_stopped())?;
    stepped?;
    written
}

fn send(running: &Running, batch: Batch) -> Result<()> {
    let jobs = running.jobs.as_ref().ok_or_else(helper_stopped)?;
    jobs.send(Job::Rows(batch)).map_err(|_| helper_stopped())
}

/// A spare batch, a new one while fewer than `BATCHES` exist, or else the next one the
/// helper gives back.
fn take_batch(running: &mut Running) -> Result<Batch> {
    if let Ok(b) = running.spares.try_recv() {
        return Ok(b);
    }
    if running.batches < BATCHES {
        running.batches += 1;
        return Ok(Batch::default());
    }
    running.spares.recv().map_err(|_| helper_stopped())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    fn helper() -> JsonHelper {
        JsonHelper::new(Arc::new(AtomicUsize::new(1)))
    }

    fn json_of(conn: &Connection, sql: &str, split_after_rows: Option<usize>, helper: &mut JsonHelper) -> Result<String> {
        let mut stmt = RawStatement::prepare(conn, sql)?;
        let mut more = stmt.step()?;
        let names = stmt.column_names()?;
        let mut w = JsonWriter::new(names.iter().map(String::as_str));
        let mut rows = 0;
        while more {
            if split_after_rows == Some(rows) {
                assert!(helper.start());
                w = helper.write_rest(w, &mut stmt, names.len())?;
                break;
            }
            w.push_row(&stmt)?;
            rows += 1;
            more = stmt.step()?;
        }
        Ok(String::from_utf8(w.finish()).unwrap())
    }

    fn table() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n);
             WITH RECURSIVE k(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM k WHERE x < 20000)
             INSERT INTO t SELECT x, x / 8.0, printf('row \"%d\" é', x), randomblob(x % 5), NULL FROM k;
             INSERT INTO t VALUES (1, 1.0, CAST(x'ff41' AS TEXT), x'00', NULL);
             INSERT INTO t VALUES (2, 2.0, zeroblob(3 * 1024 * 1024), zeroblob(2 * 1024 * 1024), 7);",
        )
        .unwrap();
        conn
    }

    #[test]
    fn a_split_result_is_the_same_json_as_one_written_alone() {
        let conn = table();
        let mut helper = helper();
        let sql = "SELECT * FROM t ORDER BY rowid";
        let alone = json_of(&conn, sql, None, &mut helper).unwrap();
        // Split at the first row, inside, and at the last row; one helper for all.
        for at in [0, 1, 5000, 20001] {
            assert_eq!(json_of(&conn, sql, Some(at), &mut helper).unwrap(), alone, "split at {at}");
        }
        assert!(helper.running.is_some());
        check_shape(&alone);
    }

    /// The output parses as JSON with as many objects as rows (a cheap structural check:
    /// every row starts with `{"i":`).
    fn check_shape(json: &str) {
        assert!(json.starts_with("[{\"i\":") && json.ends_with("}]"));
        assert_eq!(json.matches("{\"i\":").count(), 20002);
    }

    #[test]
    fn an_error_while_stepping_fails_the_result_and_leaves_the_helper_ready() {
        let conn = table();
        let mut helper = helper();
        // abs() of the smallest integer overflows: an error from SQLite after 20,000 rows.
        let failing = "SELECT i, CASE WHEN i = 20000 THEN abs(-9223372036854775807 - 1) ELSE s END FROM t ORDER BY rowid";
        let r = json_of(&conn, failing, Some(10), &mut helper);
        assert!(matches!(r, Err(Error::Sqlite { .. })), "{:?}", r.map(|s| s.len()));
        let thread = |h: &JsonHelper| h.running.as_ref().unwrap().thread.as_ref().unwrap().thread().id();
        let before = thread(&helper);
        let sql = "SELECT * FROM t ORDER BY rowid";
        assert_eq!(json_of(&conn, sql, Some(3), &mut helper).unwrap(), json_of(&conn, sql, None, &mut helper).unwrap());
        assert_eq!(thread(&helper), before, "the same helper went on after the error");
    }

    #[test]
    fn a_result_is_split_only_while_a_cpu_is_free() {
        let busy = Arc::new(AtomicUsize::new(1));
        let helper = JsonHelper::new(busy.clone());
        assert_eq!(helper.has_a_cpu(), crate::spin::cpus() > 1);
        busy.store(crate::spin::cpus() / 2 + 1, Ordering::Release);
        assert!(!helper.has_a_cpu());
    }

    #[test]
    fn a_panic_in_the_helper_fails_its_result_with_the_message_and_no_other() {
        let conn = table();
        let mut helper = helper();
        assert!(helper.start());
        let running = helper.running.as_mut().unwrap();
        let jobs = running.jobs.as_ref().unwrap();
        // A column count of zero panics in the helper; one that does not divide the batch
        // would drop values: both must come back as errors.
        for cols in [0, 99] {
            let mut batch = Batch::default();
            let mut stmt = RawStatement::prepare(&conn, "SELECT i, s FROM t").unwrap();
            assert!(stmt.step().unwrap());
            batch.push_row(&stmt, 2).unwrap();
            jobs.send(Job::Start(JsonWriter::new(["i", "s"].into_iter()), cols)).unwrap();
            jobs.send(Job::Rows(batch)).unwrap();
            jobs.send(Job::Finish).unwrap();
            match running.done.recv().unwrap() {
                Err(Error::Internal(m)) => assert!(!m.is_empty(), "cols {cols}"),
                other => panic!("cols {cols}: {:?}", other.map(|w| w.rows())),
            }
        }
        let sql = "SELECT * FROM t ORDER BY rowid";
        assert_eq!(json_of(&conn, sql, Some(3), &mut helper).unwrap(), json_of(&conn, sql, None, &mut helper).unwrap());
    }

    #[test]
    fn a_helper_ends_with_its_owner() {
        let conn = table();
        let mut helper = helper();
        json_of(&conn, "SELECT * FROM t", Some(1), &mut helper).unwrap();
        let running = helper.running.take().unwrap();
        let thread = running.thread.as_ref().unwrap().thread().clone();
        assert_eq!(thread.name(), Some("quietsqlite-json"));
        let done = running.done.clone();
        drop(running);
        // Joined on drop: the thread has already ended, so its end of the channel is gone.
        assert!(matches!(done.try_recv(), Err(crossbeam_channel::TryRecvError::Disconnected)));
    }
}
