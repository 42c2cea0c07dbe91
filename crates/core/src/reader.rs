//! Reader threads: each owns one read-only connection (and its statement cache) for its
//! whole life and takes requests from one shared queue, so a request goes to whichever
//! reader is free without a lock per query.

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
}

/// Work that needs a reader connection but is not a plain request (live-query re-runs).
pub type ReaderTask = Box<dyn FnOnce(&Connection) + Send>;

pub(crate) enum ReaderMsg {
    Read(ReadJob),
    Task(ReaderTask),
    /// Test hook: proves a panic becomes an error, not a crash.
    Panic(RequestId),
    Stop(Arc<Countdown>),
}

pub(crate) fn run(conn: Connection, queue: Receiver<ReaderMsg>, sink: Arc<dyn CompletionSink>) {
    while let Ok(msg) = queue.recv() {
        match msg {
            ReaderMsg::Read(job) => {
                let id = job.id;
                let result = catch_unwind(AssertUnwindSafe(|| {
                    query::read(&conn, &job.sql, &job.params, job.format).map(Output::Read)
                }))
                .unwrap_or_else(|p| Err(Error::Internal(panic_message(p))));
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
