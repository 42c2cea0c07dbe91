//! The readers' queues. The readers share one queue and whichever is free takes from it; one
//! more reader, the spare, has a queue of its own and gets a read only when, as it is sent,
//! no other reader is free for it, one of them is in a long job, and the read's own
//! statement was not long the last time it ran (long_reads.rs). So a point read need not wait
//! behind large reads for one of them to end, and a large read does not take the spare from
//! it. A read stays in the queue it was sent to (docs/experiments/063-a-spare-reader.md,
//! 064-the-spare-keeps-to-short-reads.md).

use crate::long_reads::{LongReads, ReaderState, StatementKey};
use crate::reader::ReaderMsg;
use crossbeam_channel::{unbounded, Receiver, SendError, Sender};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The queues, cloned by everyone who sends to the readers.
#[derive(Clone)]
pub(crate) struct ReaderQueues {
    shared: Sender<ReaderMsg>,
    spare: Sender<ReaderMsg>,
    /// How many readers take from `shared`.
    shared_readers: usize,
    long: Arc<LongReads>,
    /// Readers of the shared queue running a job now, and the spare (0 or 1).
    busy_shared: Arc<AtomicUsize>,
    busy_spare: Arc<AtomicUsize>,
}

/// The receiving ends: `shared` for each of the readers, `spare` for the spare.
pub(crate) struct ReaderReceivers {
    pub shared: Receiver<ReaderMsg>,
    pub spare: Receiver<ReaderMsg>,
}

impl ReaderQueues {
    pub(crate) fn new(shared_readers: usize) -> (ReaderQueues, ReaderReceivers) {
        let (shared, shared_rx) = unbounded();
        let (spare, spare_rx) = unbounded();
        let queues = ReaderQueues {
            shared,
            spare,
            shared_readers,
            long: Arc::default(),
            busy_shared: Arc::default(),
            busy_spare: Arc::default(),
        };
        (queues, ReaderReceivers { shared: shared_rx, spare: spare_rx })
    }

    /// Readers of the shared queue: `readers` as opened.
    pub(crate) fn shared_readers(&self) -> usize {
        self.shared_readers
    }

    /// The counter one reader keeps of itself while it runs a job (`spare`: the spare's).
    pub(crate) fn busy_counter(&self, spare: bool) -> Arc<AtomicUsize> {
        if spare { self.busy_spare.clone() } else { self.busy_shared.clone() }
    }

    /// Readers running a job now, the spare included (`diagnostics().readersBusy`).
    pub(crate) fn busy(&self) -> usize {
        self.busy_shared.load(Ordering::Acquire) + self.busy_spare.load(Ordering::Acquire)
    }

    /// Reader threads in all, the spare included: each takes one `Stop` or `Rekey`.
    pub(crate) fn threads(&self) -> usize {
        self.shared_readers + 1
    }

    /// Work for the readers of the shared queue only (iterators, backups, tests' panics).
    pub(crate) fn send(&self, msg: ReaderMsg) -> Result<(), SendError<ReaderMsg>> {
        self.shared.send(msg)
    }

    /// A read (or a task: a live query's re-run, diagnostics) goes to the spare when a reader
    /// of the shared queue is in a long job, the spare is not, no reader of the shared queue
    /// is left free for it (each runs a job or has one waiting for it), and its statement was
    /// not long when it last ran; to the shared queue otherwise. Point reads alone never
    /// reach the spare: the first test fails at once.
    pub(crate) fn send_read(&self, msg: ReaderMsg) -> Result<(), SendError<ReaderMsg>> {
        let to_spare = self.long.shared_readers() > 0
            && !self.long.spare()
            && self.busy_shared.load(Ordering::Acquire) + self.shared.len() >= self.shared_readers
            && !self.known_long(&msg);
        if to_spare {
            self.spare.send(msg)
        } else {
            self.shared.send(msg)
        }
    }

    fn known_long(&self, msg: &ReaderMsg) -> bool {
        match msg {
            ReaderMsg::Read(job, ..) => self.long.known_long(StatementKey::of(&job.sql)),
            ReaderMsg::Task(_, Some(key)) => self.long.known_long(*key),
            _ => false,
        }
    }

    /// Sends one message made by `make` to every reader thread; returns how many could not
    /// be sent (their threads are gone).
    pub(crate) fn send_to_each(&self, mut make: impl FnMut() -> ReaderMsg) -> usize {
        let shared = (0..self.shared_readers).filter(|_| self.shared.send(make()).is_err()).count();
        shared + usize::from(self.spare.send(make()).is_err())
    }

    /// Messages waiting in both queues.
    pub(crate) fn len(&self) -> usize {
        self.shared.len() + self.spare.len()
    }

    /// Readers of the shared queue in a long job now.
    pub(crate) fn long_shared_readers(&self) -> usize {
        self.long.shared_readers()
    }

    /// The state of one reader of the shared queue (`spare`: of the spare).
    pub(crate) fn reader_state(&self, spare: bool) -> Arc<ReaderState> {
        self.long.reader_state(spare)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::completion::Countdown;

    /// Sends `msg` with `send_read`; true when it went to the spare.
    fn goes_to_spare(queues: &ReaderQueues, rx: &ReaderReceivers, msg: ReaderMsg) -> bool {
        queues.send_read(msg).unwrap();
        match (rx.shared.try_recv().is_ok(), rx.spare.try_recv().is_ok()) {
            (true, false) => false,
            (false, true) => true,
            other => panic!("one queue, one message: {other:?}"),
        }
    }

    fn read(sql: &str) -> ReaderMsg {
        let job = crate::reader::ReadJob {
            id: 1,
            sql: sql.into(),
            params: Default::default(),
            format: crate::query::ReadFormat::Json,
            cancellable: false,
        };
        ReaderMsg::Read(job, None, 0)
    }

    #[test]
    fn a_read_goes_to_the_spare_only_when_no_reader_is_free_and_one_is_long() {
        let (queues, rx) = ReaderQueues::new(2);
        let busy = queues.busy_counter(false);
        let (a, b, spare) = (queues.reader_state(false), queues.reader_state(false), queues.reader_state(true));
        let send_to_spare = || goes_to_spare(&queues, &rx, ReaderMsg::Panic(1));
        assert!(!send_to_spare(), "every reader is free");
        busy.store(2, Ordering::SeqCst);
        assert!(!send_to_spare(), "both are busy, with short jobs");
        a.found_long();
        a.found_long(); // counted once
        assert!(send_to_spare(), "both busy, one long");
        busy.store(1, Ordering::SeqCst);
        assert!(!send_to_spare(), "one is free");
        queues.busy_counter(true).store(1, Ordering::SeqCst);
        assert!(!send_to_spare(), "one is free, whatever the spare does");
        queues.busy_counter(true).store(0, Ordering::SeqCst);
        // A read waiting in the shared queue takes the free one.
        queues.send_read(ReaderMsg::Panic(1)).unwrap();
        queues.send_read(ReaderMsg::Panic(1)).unwrap();
        assert!(rx.spare.try_recv().is_ok(), "the read before took the free reader");
        assert!(rx.shared.try_recv().is_ok());
        busy.store(2, Ordering::SeqCst);
        spare.found_long();
        assert!(!send_to_spare(), "the spare is long too");
        spare.job_ended(true);
        a.job_ended(true);
        a.job_ended(true);
        assert!(!send_to_spare(), "nobody is long");
        b.found_long();
        assert!(send_to_spare());
        assert!(rx.shared.is_empty() && rx.spare.is_empty());
    }

    #[test]
    fn a_statement_that_was_long_when_it_last_ran_does_not_take_the_spare() {
        const LARGE: &str = "SELECT * FROM items";
        const POINT: &str = "SELECT * FROM items WHERE id = ?";
        let (queues, rx) = ReaderQueues::new(2);
        let (a, b) = (queues.reader_state(false), queues.reader_state(false));
        queues.busy_counter(false).store(2, Ordering::SeqCst);
        // Reader a runs LARGE past the long mark: the statement is known long from then on.
        a.runs(StatementKey::of(LARGE));
        a.found_long();
        assert!(!goes_to_spare(&queues, &rx, read(LARGE)), "known long: it waits for a reader of the shared queue");
        assert!(goes_to_spare(&queues, &rx, read(POINT)));
        // A live query's re-run is a task that carries its statement's key.
        let task = |sql| ReaderMsg::Task(Box::new(|_| {}), Some(StatementKey::of(sql)));
        assert!(!goes_to_spare(&queues, &rx, task(LARGE)));
        assert!(goes_to_spare(&queues, &rx, task(POINT)));
        assert!(goes_to_spare(&queues, &rx, ReaderMsg::Task(Box::new(|_| {}), None)), "diagnostics");
        a.job_ended(true);
        assert!(!goes_to_spare(&queues, &rx, read(POINT)), "nobody is long");
        // Reader b starts LARGE: long at once, before its progress handler says so.
        b.runs(StatementKey::of(LARGE));
        assert!(goes_to_spare(&queues, &rx, read(POINT)));
    }

    #[test]
    fn every_thread_gets_one_control_message() {
        let (queues, rx) = ReaderQueues::new(3);
        assert_eq!(queues.threads(), 4);
        let countdown = Countdown::new(4, || {});
        assert_eq!(queues.send_to_each(|| ReaderMsg::Stop(countdown.clone())), 0);
        assert_eq!((rx.shared.len(), rx.spare.len(), queues.len()), (3, 1, 4));
        drop(rx);
        assert_eq!(queues.send_to_each(|| ReaderMsg::Stop(countdown.clone())), 4);
    }
}
