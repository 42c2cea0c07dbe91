//! The readers' queues. The readers share one queue and whichever is free takes from it; one
//! more reader, the spare, has a queue of its own and gets a read only when, as it is sent,
//! no other reader is free for it, one of them is in a long statement, and the read's own
//! statement was not long the last time it ran. So a point read need not wait behind large
//! reads for one of them to end, and a large read does not take the spare from it. A read
//! stays in the queue it was sent to (docs/experiments/063-a-spare-reader.md,
//! 064-the-spare-keeps-to-short-reads.md).

use crate::reader::ReaderMsg;
use crossbeam_channel::{unbounded, Receiver, SendError, Sender};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which readers are in a long statement now. Written only when a statement turns long or a
/// long one ends, read on every send: aligned so that no other data shares its cache line.
#[repr(align(128))]
#[derive(Default)]
struct LongNow {
    /// Readers of the shared queue.
    shared: AtomicUsize,
    spare: AtomicBool,
}

/// Statements that were long the last time a reader ran them, one bit per hash of their
/// text. A collision only keeps a short read from the spare. Read when a read could go to the
/// spare, written when a statement's answer changes.
struct KnownLong {
    bits: [AtomicU64; KNOWN_WORDS],
}

const KNOWN_WORDS: usize = 64;

impl Default for KnownLong {
    fn default() -> Self {
        KnownLong { bits: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

/// A statement's bit in `KnownLong`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct SqlSlot(u64);

impl SqlSlot {
    fn of(sql: &str) -> SqlSlot {
        SqlSlot(xxhash_rust::xxh3::xxh3_64(sql.as_bytes()) % (KNOWN_WORDS as u64 * 64))
    }

    fn word(self) -> usize {
        (self.0 / 64) as usize
    }

    fn mask(self) -> u64 {
        1 << (self.0 % 64)
    }
}

impl KnownLong {
    fn get(&self, slot: SqlSlot) -> bool {
        self.bits[slot.word()].load(Ordering::Relaxed) & slot.mask() != 0
    }

    fn set(&self, slot: SqlSlot, long: bool) {
        // Most runs change nothing: a load first keeps the line shared.
        if self.get(slot) != long {
            if long {
                self.bits[slot.word()].fetch_or(slot.mask(), Ordering::Relaxed);
            } else {
                self.bits[slot.word()].fetch_and(!slot.mask(), Ordering::Relaxed);
            }
        }
    }
}

#[derive(Default)]
struct LongStatements {
    now: LongNow,
    known: KnownLong,
}

/// The queues, cloned by everyone who sends to the readers.
#[derive(Clone)]
pub(crate) struct ReaderQueues {
    shared: Sender<ReaderMsg>,
    spare: Sender<ReaderMsg>,
    /// How many readers take from `shared`.
    shared_readers: usize,
    long: Arc<LongStatements>,
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

    /// The count one reader keeps of itself while it runs a job (`spare`: the spare).
    pub(crate) fn busy_count(&self, spare: bool) -> Arc<AtomicUsize> {
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

    /// A read (or a short task: a live query's re-run, diagnostics) goes to the spare when a
    /// reader of the shared queue is in a long statement, the spare is not, no reader of the
    /// shared queue is left free for it (each runs a job or has one waiting for it), and its
    /// statement was not long when it last ran; to the shared queue otherwise. Point reads
    /// alone never reach the spare: the first test fails at once.
    pub(crate) fn send_read(&self, msg: ReaderMsg) -> Result<(), SendError<ReaderMsg>> {
        let to_spare = self.long.now.shared.load(Ordering::Acquire) > 0
            && !self.long.now.spare.load(Ordering::Acquire)
            && self.busy_shared.load(Ordering::Acquire) + self.shared.len() >= self.shared_readers
            && !matches!(&msg, ReaderMsg::Read(job, ..) if self.long.known.get(SqlSlot::of(&job.sql)));
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
        Arc::new(ReaderState {
            long: AtomicBool::new(false),
            ran_long: AtomicBool::new(false),
            statement: AtomicU64::new(NO_STATEMENT),
            jobs_ended: AtomicU64::new(0),
            spare,
            states: self.long.clone(),
        })
    }
}

/// `ReaderState::statement` when the job is not a read.
const NO_STATEMENT: u64 = u64::MAX;

/// Whether one reader is in a long statement. Its jobs are numbered as they end. A read whose
/// statement was long when it last ran marks it long as it starts; otherwise its progress
/// handler does once the job has run for `LONG` (`LongWatch`), and then records the
/// statement as long. The reader unmarks itself when the job ends, and a read that ended
/// short records its statement as short. All of this runs on the reader's own thread, so a
/// plain load and store do; the shared counts change only when the answer does.
pub(crate) struct ReaderState {
    long: AtomicBool,
    /// The progress handler found this job long (not only its statement's record).
    ran_long: AtomicBool,
    /// The read's `SqlSlot` (`NO_STATEMENT` for other jobs).
    statement: AtomicU64,
    jobs_ended: AtomicU64,
    spare: bool,
    states: Arc<LongStatements>,
}

impl ReaderState {
    /// A read of `sql` starts.
    pub(crate) fn read_started(&self, sql: &str) {
        let slot = SqlSlot::of(sql);
        self.statement.store(slot.0, Ordering::Relaxed);
        if self.states.known.get(slot) {
            self.set_long(true);
        }
    }

    fn statement(&self) -> Option<SqlSlot> {
        let slot = self.statement.load(Ordering::Relaxed);
        (slot != NO_STATEMENT).then_some(SqlSlot(slot))
    }

    fn mark_long(&self) {
        if !self.ran_long.load(Ordering::Relaxed) {
            self.ran_long.store(true, Ordering::Relaxed);
            if let Some(slot) = self.statement() {
                self.states.known.set(slot, true);
            }
        }
        self.set_long(true);
    }

    /// The job ended (before its completion is sent, so a read sent in answer sees it).
    pub(crate) fn job_ended(&self) {
        self.jobs_ended.store(self.jobs_ended.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        if let Some(slot) = self.statement() {
            if !self.ran_long.load(Ordering::Relaxed) {
                self.states.known.set(slot, false);
            }
            self.statement.store(NO_STATEMENT, Ordering::Relaxed);
        }
        self.ran_long.store(false, Ordering::Relaxed);
        self.set_long(false);
    }

    /// Changes the shared counts only when this reader's answer changes.
    fn set_long(&self, long: bool) {
        if self.long.load(Ordering::Relaxed) == long {
            return;
        }
        self.long.store(long, Ordering::Relaxed);
        let now = &self.states.now;
        match (self.spare, long) {
            (true, _) => now.spare.store(long, Ordering::Release),
            (false, true) => drop(now.shared.fetch_add(1, Ordering::AcqRel)),
            (false, false) => drop(now.shared.fetch_sub(1, Ordering::AcqRel)),
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
        let (queues, rx) = ReaderQueues::new(2);
        let busy = queues.busy_count(false);
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
        queues.busy_count(true).store(1, Ordering::SeqCst);
        assert!(!send_to_spare(), "one is free, whatever the spare does");
        queues.busy_count(true).store(0, Ordering::SeqCst);
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
    fn a_statement_that_was_long_when_it_last_ran_does_not_take_the_spare() {
        const LARGE: &str = "SELECT * FROM items";
        const POINT: &str = "SELECT * FROM items WHERE id = ?";
        let (queues, rx) = ReaderQueues::new(2);
        let (a, b) = (queues.reader_state(false), queues.reader_state(false));
        queues.busy_count(false).store(2, Ordering::SeqCst);
        let goes_to_spare = |sql| {
            queues.send_read(read(sql)).unwrap();
            match (rx.shared.try_recv().is_ok(), rx.spare.try_recv().is_ok()) {
                (false, true) => true,
                (true, false) => false,
                other => panic!("one queue, one message: {other:?}"),
            }
        };
        // Reader a runs LARGE past `LONG`: the statement is known long from then on.
        a.read_started(LARGE);
        a.mark_long();
        assert!(!goes_to_spare(LARGE), "known long: it waits for a reader of the shared queue");
        assert!(goes_to_spare(POINT));
        a.job_ended();
        assert!(!goes_to_spare(POINT), "nobody is long");
        // Reader b starts LARGE: long at once, before its progress handler says so.
        b.read_started(LARGE);
        assert!(goes_to_spare(POINT));
        // This time LARGE ended short: it may take the spare again.
        b.job_ended();
        a.read_started("SELECT * FROM other");
        a.mark_long();
        assert!(goes_to_spare(LARGE), "LARGE was short when it last ran");
        b.read_started(LARGE);
        b.mark_long();
        b.job_ended();
        // A job that is not a read (a task) changes no statement's record.
        b.job_ended();
        assert!(!goes_to_spare(LARGE));
        assert!(goes_to_spare(POINT));
        assert!(rx.shared.is_empty() && rx.spare.is_empty());
    }

    #[test]
    fn a_reader_is_long_once_one_job_has_run_for_a_turn() {
        let (queues, _rx) = ReaderQueues::new(2);
        let state = queues.reader_state(false);
        let mut watch = LongWatch::new(state.clone());
        let t0 = Instant::now();
        let step = Duration::from_micros(10);
        let long = || queues.long.now.shared.load(Ordering::SeqCst);
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
        let (queues, rx) = ReaderQueues::new(3);
        assert_eq!(queues.threads(), 4);
        let countdown = Countdown::new(4, || {});
        assert_eq!(queues.send_to_each(|| ReaderMsg::Stop(countdown.clone())), 0);
        assert_eq!((rx.shared.len(), rx.spare.len(), queues.len()), (3, 1, 4));
        drop(rx);
        assert_eq!(queues.send_to_each(|| ReaderMsg::Stop(countdown.clone())), 4);
    }
}
