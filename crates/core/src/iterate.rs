//! Streaming a query's rows in chunks (`db.iterate`). One reader thread holds the statement
//! for the iterator's whole life, so every row comes from one read transaction (one
//! snapshot). It steps a chunk only when the front end asks (`Control::Next`); the front end
//! asks for chunk k+1 when it starts handing out chunk k, so at most one chunk is ahead of
//! the consumer and memory stays bounded whatever the result size.
//!
//! An iterator ends by itself (last chunk, an error), at the front end's request (`break`,
//! `return()`, abort, collected) or from outside: `close()`, an abandoned database and a
//! rekey end every open iterator (`Iterators::end_all`), so a reader parked in an iterator
//! never keeps a close or a rekey waiting.

use crate::cancel::{Cancellation, Ticket};
use crate::completion::{Completion, CompletionSink, Output, RequestId};
use crate::encode::RowEncoder;
use crate::raw_statement::column_names_of;
use crate::error::{Error, Result};
use crate::statement_rules::{under, Rule};
use crate::value::Params;
use crossbeam_channel::{unbounded, Receiver, Sender};
use rusqlite::Connection;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Rows per chunk when the caller gives no `chunkSize` (docs/experiments/021-iterate-chunks.md).
pub const DEFAULT_CHUNK_ROWS: u32 = 256;
/// The largest `chunkSize` accepted.
pub const MAX_CHUNK_ROWS: u32 = 65_536;
/// A chunk also ends once its encoding holds about this many bytes (wide or large rows), so
/// a chunk of big blobs does not hold `chunkSize` of them.
pub const CHUNK_BYTES: usize = 1 << 20;

/// What the front end tells the reader that holds an iterator.
pub(crate) enum Control {
    /// Step the next chunk.
    Next,
    /// Finish now; with an error, send it as the iterator's last completion.
    End(Option<Error>),
}

struct Entry {
    control: Sender<Control>,
    /// Cancelling it interrupts a chunk being stepped (or drops a job still queued).
    ticket: Arc<Ticket>,
    /// Rows stepped so far (diagnostics and tests: proves the backpressure).
    stepped: Arc<AtomicU64>,
}

/// The open iterators of one database: each holds one reader until it ends.
#[derive(Default)]
pub struct Iterators {
    open: Mutex<HashMap<RequestId, Entry>>,
    /// Orders new iterators against a rekey: an iterator is registered and queued under the
    /// read side; the rekey ends the open ones and queues its gate messages under the write
    /// side. So a new iterator is either ended by the rekey or queued behind every gate
    /// message, never ahead of one (a reader serving it would never park: a deadlock).
    submit: std::sync::RwLock<()>,
}

impl Iterators {
    /// Held while an iterator is registered and sent to the readers.
    pub(crate) fn submitting(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.submit.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Held by a rekey while it ends the open iterators and queues its gate messages.
    pub(crate) fn pausing(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.submit.write().unwrap_or_else(|p| p.into_inner())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Entry>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many iterators hold (or are about to hold) a reader.
    pub fn count(&self) -> usize {
        self.lock().len()
    }

    /// Registers iterator `id` unless that would leave no reader free for other reads;
    /// the first chunk is asked for at once.
    pub(crate) fn open(&self, id: RequestId, readers: usize, ticket: Arc<Ticket>) -> Result<(Receiver<Control>, Arc<AtomicU64>)> {
        let mut open = self.lock();
        // One reader always stays free: a loop body that awaits a select() (or a live query
        // re-run) must find a reader, or it would wait for the iterator that waits for it
        // (docs/decisions.md, "iterate and the reader pool").
        if open.len() + 1 >= readers {
            return Err(Error::Range(if readers == 1 {
                "iterate() needs a reader of its own while one stays free for other reads: open the \
                 database with readers >= 2"
                    .into()
            } else {
                format!(
                    "iterate(): {} iterators are open and hold {} of the {readers} readers; one reader \
                     always stays free for other reads: finish an iterator first, or open with more readers",
                    open.len(),
                    open.len()
                )
            }));
        }
        let (tx, rx) = unbounded();
        let _ = tx.send(Control::Next);
        let stepped = Arc::new(AtomicU64::new(0));
        open.insert(id, Entry { control: tx, ticket, stepped: stepped.clone() });
        Ok((rx, stepped))
    }

    /// The front end took the previous chunk: step the next one.
    pub(crate) fn next(&self, id: RequestId) {
        if let Some(e) = self.lock().get(&id) {
            let _ = e.control.send(Control::Next);
        }
    }

    /// Ends iterator `id` (the front end no longer wants it); nothing more is sent for it.
    /// A chunk being stepped is interrupted; a job still queued is dropped.
    pub(crate) fn end(&self, id: RequestId) {
        if let Some(e) = self.lock().remove(&id) {
            let _ = e.control.send(Control::End(None));
            e.ticket.cancel();
        }
    }

    /// Ends every open iterator with `error` as its last completion, interrupting chunks
    /// being stepped (a slow query must not keep a close or a rekey waiting).
    pub(crate) fn end_all(&self, error: Error) {
        for (_, e) in self.lock().drain() {
            let _ = e.control.send(Control::End(Some(error.clone())));
            e.ticket.cancel();
        }
    }

    /// The reader finished iterator `id` by itself (its last chunk, or an error).
    fn finished(&self, id: RequestId) {
        self.lock().remove(&id);
    }

    /// Rows stepped so far by open iterator `id`.
    pub fn stepped(&self, id: RequestId) -> Option<u64> {
        self.lock().get(&id).map(|e| e.stepped.load(Ordering::Acquire))
    }
}

/// An iterator's request, as a reader takes it from the queue.
pub struct IterateJob {
    pub id: RequestId,
    pub sql: String,
    pub params: Params,
    /// Rows per chunk (1..=MAX_CHUNK_ROWS).
    pub chunk_rows: u32,
}

pub(crate) struct Queued {
    pub job: IterateJob,
    pub control: Receiver<Control>,
    pub stepped: Arc<AtomicU64>,
    pub ticket: Arc<Ticket>,
    pub registry: Arc<Iterators>,
}

/// Opens an iterator: registers it, and queues it for a reader.
pub(crate) fn queue(
    job: IterateJob,
    registry: &Arc<Iterators>,
    readers: usize,
    cancellation: &Cancellation,
) -> Result<Queued> {
    if job.chunk_rows == 0 || job.chunk_rows > MAX_CHUNK_ROWS {
        return Err(Error::Range(format!("chunkSize must be an integer from 1 to {MAX_CHUNK_ROWS}")));
    }
    let ticket = cancellation.register(job.id);
    let (control, stepped) = registry.open(job.id, readers, ticket.clone()).inspect_err(|_| {
        cancellation.unregister(job.id, &ticket);
    })?;
    Ok(Queued { job, control, stepped, ticket, registry: registry.clone() })
}

/// Runs an iterator on the reader that took it, until it ends. `interrupted` tells whether
/// an interruption came from a forced close.
pub(crate) fn serve(conn: &Connection, q: &Queued, sink: &Arc<dyn CompletionSink>, forced: impl Fn() -> bool) {
    let id = q.job.id;
    let outcome = run(conn, q, sink);
    q.registry.finished(id);
    if let Err(e) = outcome {
        // Interrupted because something ended the iterator: report that, not the interrupt.
        let e = match outcome_of_end(q) {
            Some(Some(reason)) => reason,
            Some(None) => return,
            None => crate::error::explain_interrupt(Err::<(), _>(e), forced()).unwrap_err(),
        };
        sink.complete(Completion { id, result: Err(e) });
    }
}

/// A job dropped from the queue before a reader took it: if something other than the front
/// end ended it (close, rekey), the front end still waits to hear why.
pub(crate) fn skipped(q: &Queued, sink: &Arc<dyn CompletionSink>) {
    if let Some(Some(reason)) = outcome_of_end(q) {
        sink.complete(Completion { id: q.job.id, result: Err(reason) });
    }
}

/// How the iterator was ended, if it was: `Some(None)` by the front end, `Some(Some(e))`
/// from outside with `e`.
fn outcome_of_end(q: &Queued) -> Option<Option<Error>> {
    q.control.try_iter().find_map(|c| match c {
        Control::End(reason) => Some(reason),
        Control::Next => None,
    })
}

/// Steps chunks as asked; returns Err for an error to report (the statement's, or the one
/// an outside end gave).
fn run(conn: &Connection, q: &Queued, sink: &Arc<dyn CompletionSink>) -> Result<()> {
    let sql = q.job.sql.as_str();
    let mut stmt = under(Rule::Read, || crate::query::prepare(conn, sql))?;
    if !stmt.readonly() {
        return Err(Error::Sqlite {
            code: rusqlite::ffi::SQLITE_READONLY,
            message: "iterate() runs read-only statements only; use execute() for writes".into(),
            sql: Some(sql.to_owned()),
        });
    }
    crate::bind::bind(&mut *stmt, &q.job.params).map_err(|e| e.with_sql(sql))?;
    let mut rows = stmt.raw_query();
    let mut names: Option<Vec<String>> = None;
    loop {
        match q.control.recv() {
            Ok(Control::Next) => {}
            Ok(Control::End(None)) | Err(_) => return Ok(()),
            Ok(Control::End(Some(e))) => return Err(e),
        }
        let mut enc: Option<RowEncoder> = None;
        let mut done = false;
        let stepped = under(Rule::Read, || -> Result<()> {
            loop {
                let Some(row) = rows.next().map_err(|e| Error::from(e).with_sql(sql).without_values(q.job.params.values()))? else {
                    done = true;
                    return Ok(());
                };
                // Column names are read after the first step (a re-prepare may change them).
                let names = match &mut names {
                    Some(n) => n,
                    None => names.insert(column_names_of(conn, sql, row.as_ref())?),
                };
                let e = enc.get_or_insert_with(|| RowEncoder::new(names.iter().map(String::as_str)));
                e.push_row(row)?;
                q.stepped.fetch_add(1, Ordering::AcqRel);
                if e.rows() >= q.job.chunk_rows || e.approx_bytes() >= CHUNK_BYTES {
                    return Ok(());
                }
            }
        });
        stepped?;
        let enc = match enc {
            Some(e) => e,
            None => {
                let names = match &names {
                    Some(n) => n.clone(),
                    None => match rows.as_ref() {
                        // Under the read rule: the names may be read from the SQL prepared again.
                        Some(stmt) => under(Rule::Read, || column_names_of(conn, sql, stmt))?,
                        None => Vec::new(),
                    },
                };
                RowEncoder::new(names.iter().map(String::as_str))
            }
        };
        if done {
            // The slot is free before the front end hears of the end: it may open the next
            // iterator at once.
            q.registry.finished(q.job.id);
        }
        sink.complete(Completion { id: q.job.id, result: Ok(Output::Chunk { rows: enc.finish(), done }) });
        if done {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reader_always_stays_free() {
        let r = Iterators::default();
        let t = || Arc::new(Ticket::default());
        assert!(matches!(r.open(1, 1, t()), Err(Error::Range(_))));
        assert!(r.open(1, 2, t()).is_ok());
        assert!(matches!(r.open(2, 2, t()), Err(Error::Range(_))));
        r.end(1);
        assert!(r.open(2, 2, t()).is_ok());
        assert_eq!(r.count(), 1);
    }

    #[test]
    fn end_all_reaches_every_open_iterator_once() {
        let r = Iterators::default();
        let (a, _) = r.open(1, 4, Arc::new(Ticket::default())).unwrap();
        let (b, _) = r.open(2, 4, Arc::new(Ticket::default())).unwrap();
        r.end_all(Error::Closed("closed".into()));
        for rx in [a, b] {
            assert!(matches!(rx.recv(), Ok(Control::Next)));
            assert!(matches!(rx.recv(), Ok(Control::End(Some(Error::Closed(_))))));
        }
        assert_eq!(r.count(), 0);
        // Ending an iterator that already ended does nothing.
        r.end(1);
    }
}
