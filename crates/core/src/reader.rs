//! Reader threads: each owns one read-only connection (and its statement cache) for its
//! whole life and takes requests from one shared queue, so a request goes to whichever
//! reader is free without a lock per query.

use crate::cancel::{Start, Ticket, Watch};
use crate::completion::{panic_message, Completion, CompletionSink, Countdown, Output, RequestId};
use crate::error::Error;
use crate::query::{self, ReadFormat};
use crate::value::Params;
use crossbeam_channel::Receiver;
use rusqlite::Connection;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

pub struct ReadJob {
    pub id: RequestId,
    pub sql: String,
    pub params: Params,
    pub format: ReadFormat,
    /// Registers a ticket so `Database::cancel(id)` can drop or interrupt it.
    pub cancellable: bool,
}

/// Work that needs a reader connection but is not a plain request (live-query re-runs).
pub type ReaderTask = Box<dyn FnOnce(&Connection) + Send>;

pub(crate) enum ReaderMsg {
    Read(ReadJob, Option<Arc<Ticket>>),
    Task(ReaderTask),
    /// Test hook: proves a panic becomes an error, not a crash.
    Panic(RequestId),
    Stop(Arc<Countdown>),
}

/// How long a reader polls its queue after a job before it parks: a request that follows
/// within this window is taken without waking a parked thread (docs/experiments/003-reader-spin.md).
const SPIN_WINDOW: std::time::Duration = std::time::Duration::from_micros(30);

/// The next message: poll for `spin` first (a request that follows quickly is then taken
/// without the cost of waking a parked thread), then block.
fn next_message(queue: &Receiver<ReaderMsg>, spin: std::time::Duration) -> Option<ReaderMsg> {
    if !spin.is_zero() {
        let until = std::time::Instant::now() + spin;
        loop {
            match queue.try_recv() {
                Ok(m) => return Some(m),
                Err(crossbeam_channel::TryRecvError::Disconnected) => return None,
                Err(crossbeam_channel::TryRecvError::Empty) => {}
            }
            if std::time::Instant::now() >= until {
                break;
            }
            std::hint::spin_loop();
        }
    }
    queue.recv().ok()
}

pub(crate) fn run(conn: Connection, watch: Arc<Watch>, queue: Receiver<ReaderMsg>, sink: Arc<dyn CompletionSink>) {
    while let Some(msg) = next_message(&queue, SPIN_WINDOW) {
        match msg {
            ReaderMsg::Read(job, ticket) => {
                let id = job.id;
                let running = match watch.start(id, ticket) {
                    Start::Run(r) => r,
                    Start::Skip => continue,
                    Start::Stopped => {
                        sink.complete(Completion { id, result: Err(crate::error::closed_by_force()) });
                        continue;
                    }
                };
                let result = catch_unwind(AssertUnwindSafe(|| {
                    query::read(&conn, &job.sql, &job.params, job.format).map(Output::Read)
                }))
                .unwrap_or_else(|p| Err(Error::Internal(panic_message(p))));
                let result = crate::error::explain_interrupt(result, running.stopped());
                drop(running);
                sink.complete(Completion { id, result });
            }
            ReaderMsg::Task(task) => {
                // A task reports its own outcome; a panic in it must not kill the reader.
                let _ = catch_unwind(AssertUnwindSafe(|| task(&conn)));
            }
            ReaderMsg::Panic(id) => {
                let result = catch_unwind(|| -> crate::Result<Output> {
                    panic!("deliberate panic requested by a test")
                })
                .unwrap_or_else(|p| Err(Error::Internal(panic_message(p))));
                sink.complete(Completion { id, result });
            }
            ReaderMsg::Stop(countdown) => {
                drop(conn);
                countdown.done();
                return;
            }
        }
    }
}
