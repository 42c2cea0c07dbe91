//! The readers' queues. The readers share one queue and whichever is free takes from it; one
//! more reader, the spare, has a queue of its own and gets a read only when, as it is sent,
//! no other reader is free for it and one of them has been on one job for 250 µs. So a point
//! read need not wait behind large reads for one of them to end. A read stays in the queue it
//! was sent to (docs/experiments/063-a-spare-reader.md).

use crate::reader::ReaderMsg;
use crossbeam_channel::{unbounded, Receiver, SendError, Sender};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which readers are in a long statement now. Written only when a statement turns long or a
/// long one ends, read on every send: aligned so that no other data shares its cache line.
#[repr(align(128))]
#[derive(Default)]
struct LongStatements {
    /// Readers of the shared queue.
    shared: AtomicUsize,
    spare: AtomicBool,
}

/// The queues, cloned by everyone who sends to the readers.
#[derive(Clone)]
pub(crate) struct ReaderQueues {
    shared: Sender<ReaderMsg>,
    spare: Sender<ReaderMsg>,
    /// How many readers take from `shared`.
    shared_readers: usize,
    long: Arc<LongStatements>,
    /// Readers running a job now, the spare included (`diagnostics().readersBusy`).
    busy: Arc<AtomicUsize>,
}

/// The receiving ends: `shared` for each of the readers, `spare` for the spare.
pub(crate) struct ReaderReceivers {
    pub shared: Receiver<ReaderMsg>,
    pub spare: Receiver<ReaderMsg>,
}

impl ReaderQueues {
    pub(crate) fn new(shared_readers: usize, busy: Arc<AtomicUsize>) -> (ReaderQueues, ReaderReceivers) {
        let (shared, shared_rx) = unbounded();
        let (spare, spare_rx) = unbounded();
        let queues = ReaderQueues { shared, spare, shared_readers, long: Arc::default(), busy };
        (queues, ReaderReceivers { shared: shared_rx, spare: spare_rx })
    }

    /// Readers of the shared queue: `readers` as opened.
    pub(crate) fn shared_readers(&self) -> usize {
        self.shared_readers
    }

    /// The count of readers running a job, which each reader keeps.
    pub(crate) fn busy(&self) -> &Arc<AtomicUsize> {
        &self.busy
    }

    /// Reader threads in all, the spare included: each takes one `Stop` or `Rekey`.
    pub(crate) fn threads(&self) -> usize {
        self.shared_readers + 1
    }

    /// Work for the readers of the shared queue only (iterators, backups, tests' panics).
    pub(crate) fn send(&self, msg: ReaderMsg) -> Result<(), SendError<ReaderMsg>> {
        self.shared.send(msg)
    }

    /// A read (or a short task: a live query's re-run, diagnostics) goes to the spare when a
    /// reader of the shared queue is in a long statement, the spare is not, and no reader is
    /// left free for it (each runs a job or has one waiting for it); to the shared queue
    /// otherwise. Point reads alone never reach the spare: the first test fails at once.
    pub(crate) fn send_read(&self, msg: ReaderMsg) -> Result<(), SendError<ReaderMsg>> {
        let to_spare = self.long.shared.load(Ordering::Acquire) > 0
            && !self.long.spare.load(Ordering::Acquire)
            // `busy` may count the spare: then a free reader is missed, and the read waits
            // for the spare's short job instead.
            && self.busy.load(Ordering::Acquire) + self.shared.len() >= self.shared_readers;
        if to_spare {
            self.spare.send(msg)
        } else {
            self.shared.send(msg)
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

    /// The state of one reader of the shared queue (`spare`: of the spare).
    pub(crate) fn reader_state(&self, spare: bool) -> Arc<ReaderState> {
        Arc::new(ReaderState { long: AtomicBool::new(false), jobs_ended: AtomicU64::new(0), spare, states: self.long.clone() })
    }
}

/// Whether one reader is in a long statement. Its jobs are numbered as they end; its progress
/// handler marks it long (`LongWatch`), the reader unmarks it when the job ends. Both run on
/// the reader's own thread, so a plain load and store do; the shared counts change only when
/// the answer does.
pub(crate) struct ReaderState {
    long: AtomicBool,
    jobs_ended: AtomicU64,
    spare: bool,
    states: Arc<LongStatements>,
}

impl ReaderState {
    fn mark_long(&self) {
        self.set_long(true);
    }

    /// The job ended (before its completion is sent, so a read sent in answer sees it).
    pub(crate) fn job_ended(&self) {
        self.jobs_ended.store(self.jobs_ended.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        self.set_long(false);
    }

    /// Changes the shared counts only when this reader's answer changes.
    fn set_long(&self, long: bool) {
        if self.long.load(Ordering::Relaxed) == long {
            return;
        }
        self.long.store(long, Ordering::Relaxed);
        match (self.spare, long) {
            (true, _) => self.states.spare.store(long, Ordering::Release),
            (false, true) => drop(self.states.shared.fetch_add(1, Ordering::AcqRel)),
            (false, false) => drop(self.states.shared.fetch_sub(1, Ordering::AcqRel)),
        }
    }
}

/// How long one job runs before its reader counts as in a long statement: as long as a turn
/// (see turns.rs). Shorter jobs are over before a read sent to the spare would gain much.
const LONG: Duration = crate::turns::TURN;

/// Kept by a reader's progress handler: marks the reader long once the progress handler has
/// been called within one job for `LONG`. (SQLite counts a statement's instructions over all
/// its runs, so a cached point query calls the handler too, once in many runs; one call per
/// job never marks it.)
pub(crate) struct LongWatch {
    state: Arc<ReaderState>,
    job: u64,
    since: Instant,
}

impl LongWatch {
    pub(crate) fn new(state: Arc<ReaderState>) -> LongWatch {
        LongWatch { job: state.jobs_ended.load(Ordering::Relaxed).wrapping_sub(1), state, since: Instant::now() }
    }

    pub(crate) fn tick(&mut self, now: Instant) {
        let job = self.state.jobs_ended.load(Ordering::Relaxed);
        if job != self.job {
            self.job = job;
            self.since = now;
        } else if now.saturating_duration_since(self.since) >= LONG {
            self.state.mark_long();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::completion::Countdown;

    fn is_on(rx: &Receiver<ReaderMsg>) -> bool {
        matches!(rx.try_recv(), Ok(ReaderMsg::Panic(_)))
    }

    #[test]
    fn a_read_goes_to_the_spare_only_when_no_reader_is_free_and_one_is_long() {
        let busy = Arc::new(AtomicUsize::new(0));
        let (queues, rx) = ReaderQueues::new(2, busy.clone());
        let (a, b, spare) = (queues.reader_state(false), queues.reader_state(false), queues.reader_state(true));
        let read = || ReaderMsg::Panic(1);
        let send_to_spare = || {
            queues.send_read(read()).unwrap();
            match (is_on(&rx.shared), is_on(&rx.spare)) {
                (true, false) => false,
                (false, true) => true,
                other => panic!("one queue, one message: {other:?}"),
            }
        };
        assert!(!send_to_spare(), "every reader is free");
        busy.store(2, Ordering::SeqCst);
        assert!(!send_to_spare(), "both are busy, with short statements");
        a.mark_long();
        a.mark_long(); // counted once
        assert!(send_to_spare(), "both busy, one long");
        busy.store(1, Ordering::SeqCst);
        assert!(!send_to_spare(), "one is free");
        // A read waiting in the shared queue takes the free one.
        queues.send_read(read()).unwrap();
        queues.send_read(read()).unwrap();
        assert!(is_on(&rx.spare), "the read before took the free reader");
        assert!(is_on(&rx.shared));
        busy.store(2, Ordering::SeqCst);
        spare.mark_long();
        assert!(!send_to_spare(), "the spare is long too");
        spare.job_ended();
        a.job_ended();
        a.job_ended();
        assert!(!send_to_spare(), "nobody is long");
        b.mark_long();
        assert!(send_to_spare());
        assert!(rx.shared.is_empty() && rx.spare.is_empty());
    }

    #[test]
    fn a_reader_is_long_once_one_job_has_run_for_a_turn() {
        let (queues, _rx) = ReaderQueues::new(2, Arc::default());
        let state = queues.reader_state(false);
        let mut watch = LongWatch::new(state.clone());
        let t0 = Instant::now();
        let step = Duration::from_micros(10);
        let long = || queues.long.shared.load(Ordering::SeqCst);
        // A cached point query calls the handler once in many runs: one call per job.
        for i in 0..100u32 {
            watch.tick(t0 + step * i);
            state.job_ended();
        }
        assert_eq!(long(), 0, "point queries are never long");
        // One job calling it every 10 µs: long at `LONG`, counted once.
        let t1 = t0 + step * 100;
        let calls = (LONG.as_micros() / 10) as u32;
        for i in 0..calls {
            watch.tick(t1 + step * i);
            assert_eq!(long(), 0, "call {i}");
        }
        watch.tick(t1 + step * calls);
        watch.tick(t1 + step * (calls + 1));
        assert_eq!(long(), 1);
        state.job_ended();
        assert_eq!(long(), 0, "the job ended");
        watch.tick(t1 + step * (calls + 2));
        assert_eq!(long(), 0, "the next job starts afresh");
    }

    #[test]
    fn every_thread_gets_one_control_message() {
        let (queues, rx) = ReaderQueues::new(3, Arc::default());
        assert_eq!(queues.threads(), 4);
        let countdown = Countdown::new(4, || {});
        assert_eq!(queues.send_to_each(|| ReaderMsg::Stop(countdown.clone())), 0);
        assert_eq!((rx.shared.len(), rx.spare.len(), queues.len()), (3, 1, 4));
        drop(rx);
        assert_eq!(queues.send_to_each(|| ReaderMsg::Stop(countdown.clone())), 4);
    }
}
