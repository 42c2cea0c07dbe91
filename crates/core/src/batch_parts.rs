//! A batch that crosses in parts (docs/experiments/060-batch-in-parts.md). The front end
//! sends a large batch's first part as the writer job and the others through a channel, in
//! one go, while the writer already runs the first: preparing the values on the caller's
//! thread and running them on the writer overlap. The parts are one job: one transaction
//! (or savepoint), one completion, one cancellation.

use crate::error::{Error, Result};
use crate::query::BatchSets;
use crossbeam_channel::{unbounded, Receiver, Sender};
use std::cell::Cell;
use std::sync::{Arc, Mutex};

#[derive(Debug)]
enum Part {
    Sets(BatchSets),
    /// Every part was sent: the batch may commit.
    End,
}

/// The writer's end: the parts after the first, in order.
#[derive(Debug)]
pub struct LaterParts {
    parts: Receiver<Part>,
    abandoned: Cell<bool>,
}

impl LaterParts {
    /// The next part; `None` after the last. The wait is bounded: the front end sends every
    /// part in one synchronous run, then ends the batch, and a front end that goes away
    /// mid-run (a terminated Worker) has its sender dropped by the `Abandoner`.
    pub(crate) fn next(&self) -> Result<Option<BatchSets>> {
        match self.parts.recv() {
            Ok(Part::Sets(sets)) => Ok(Some(sets)),
            Ok(Part::End) => Ok(None),
            Err(_) => {
                self.abandoned.set(true);
                Err(Error::Closed("the batch was abandoned before its last part was sent".into()))
            }
        }
    }

    /// The parts stopped coming before the last: the caller already has its answer (it
    /// failed while preparing a part) or is gone, so the batch rolls back with no completion.
    pub(crate) fn abandoned(&self) -> bool {
        self.abandoned.get()
    }
}

/// The sending end of the batch being sent, if any. A front end sends one batch's parts at a
/// time (synchronously, one after another), so one slot suffices; a second batch opened
/// before the first ended (from a getter run while a part is prepared) is refused, so that
/// no part can land in another batch.
#[derive(Clone, Default)]
pub(crate) struct OpenBatch(Arc<Mutex<Option<Sender<Part>>>>);

impl OpenBatch {
    pub(crate) fn open(&self) -> Result<LaterParts> {
        let mut slot = self.slot();
        if slot.is_some() {
            return Err(Error::Internal("a batch was sent in parts while another one was being sent".into()));
        }
        let (sender, parts) = unbounded();
        *slot = Some(sender);
        Ok(LaterParts { parts, abandoned: Cell::new(false) })
    }

    /// Sends the next part. When the writer has already dropped the batch (it failed, was
    /// cancelled while queued, or the database was force-closed), the part is dropped: the
    /// batch's completion tells why.
    pub(crate) fn send(&self, sets: BatchSets) -> Result<()> {
        match self.slot().as_ref() {
            Some(sender) => {
                let _ = sender.send(Part::Sets(sets));
                Ok(())
            }
            None => Err(Error::Internal("a batch part was sent with no batch open".into())),
        }
    }

    /// Ends the open batch: `complete`, every part was sent; otherwise it is abandoned.
    pub(crate) fn end(&self, complete: bool) {
        if let Some(sender) = self.slot().take() {
            if complete {
                let _ = sender.send(Part::End);
            }
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Sender<Part>>> {
        // Nothing panics while holding it; a poisoned slot still holds a valid Option.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
