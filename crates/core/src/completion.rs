//! How results leave the core: every request carries an id, and its outcome is handed to a
//! `CompletionSink` from whichever thread ran it. The Node binding's sink batches them into
//! one wake-up of the JS thread.

use crate::encode::EncodedRows;
use crate::error::Result;
use crate::query::{ExecOutcome, ReadOutput};

pub type RequestId = u32;

#[derive(Debug)]
pub enum Output {
    Read(ReadOutput),
    Exec(ExecOutcome),
    Batch { changes: u64 },
    /// A request with nothing to report (open, close, begin, commit, ...).
    Done,
    /// New rows for a live query (`id` is the stream's subscription id).
    Emission(EncodedRows),
    /// One chunk of an iterator's rows; `done`: it was the last.
    Chunk { rows: EncodedRows, done: bool },
    /// What `Database::diagnostics` reports.
    Diagnostics(Box<crate::diagnostics::Diagnostics>),
    /// Bytes handed over as they are (`serialize`).
    Bytes(Vec<u8>),
    /// How far a backup is (sent with the backup's progress id, several times).
    Progress { remaining: u32, total: u32 },
}

#[derive(Debug)]
pub struct Completion {
    pub id: RequestId,
    pub result: Result<Output>,
}

pub trait CompletionSink: Send + Sync + 'static {
    fn complete(&self, completion: Completion);
}

/// Runs `then` once `count` parties have called `done`.
pub(crate) struct Countdown {
    remaining: std::sync::atomic::AtomicUsize,
    then: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Countdown {
    pub fn new(count: usize, then: impl FnOnce() + Send + 'static) -> std::sync::Arc<Self> {
        let c = std::sync::Arc::new(Countdown {
            remaining: std::sync::atomic::AtomicUsize::new(count),
            then: std::sync::Mutex::new(Some(Box::new(then))),
        });
        if count == 0 {
            c.fire();
        }
        c
    }

    pub fn done(&self) {
        if self.remaining.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            self.fire();
        }
    }

    /// Runs `then` without waiting for the others (they are known to be gone).
    pub fn finish_now(&self) {
        self.fire();
    }

    fn fire(&self) {
        let f = self.then.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(f) = f {
            f();
        }
    }
}

/// Turns a caught panic payload into an error message.
pub(crate) fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("internal error (a bug in quietsqlite, please report it): {text}")
}
