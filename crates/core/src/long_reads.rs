//! Which readers are in a long job now, and which statements were long when they last ran:
//! what a sender looks at to decide whether a read may go to the spare reader
//! (reader_queues.rs; docs/experiments/063-a-spare-reader.md and
//! 064-the-spare-keeps-to-short-reads.md).
//!
//! A job is long once its reader's progress handler has been called within it for `LONG`
//! (`LongWatch`), or from its start when it runs a statement that was long when it last ran.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one job runs before its reader counts as in a long job (experiment 063, where it
/// was one turn of turns.rs). Shorter jobs are over before a read sent to the spare would
/// gain much.
const LONG: Duration = Duration::from_micros(250);

/// What every sender and every reader of one database share.
#[derive(Default)]
pub(crate) struct LongReads {
    now: LongReaders,
    statements: StatementRecord,
}

impl LongReads {
    /// Readers of the shared queue in a long job.
    pub(crate) fn shared_readers(&self) -> usize {
        self.now.shared.load(Ordering::Acquire)
    }

    pub(crate) fn spare(&self) -> bool {
        self.now.spare.load(Ordering::Acquire)
    }

    /// True when the statement `key` was long when it last ran.
    pub(crate) fn known_long(&self, key: StatementKey) -> bool {
        self.statements.is_long(key)
    }

    /// The state of one reader of the shared queue (`spare`: of the spare).
    pub(crate) fn reader_state(self: &Arc<Self>, spare: bool) -> Arc<ReaderState> {
        Arc::new(ReaderState {
            long: AtomicBool::new(false),
            found_long: AtomicBool::new(false),
            statement: AtomicU64::new(NO_STATEMENT),
            jobs_ended: AtomicU64::new(0),
            spare,
            shared: self.clone(),
        })
    }
}

/// Which readers are in a long job now. Written only when a job turns long or a long one
/// ends, read on every send: aligned so that no other data shares its cache line.
#[repr(align(128))]
#[derive(Default)]
struct LongReaders {
    /// Readers of the shared queue.
    shared: AtomicUsize,
    spare: AtomicBool,
}

/// A statement by its SQL text: a 64-bit hash of it, never `NO_STATEMENT`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct StatementKey(u64);

const NO_STATEMENT: u64 = 0;

impl StatementKey {
    pub(crate) fn of(sql: &str) -> StatementKey {
        StatementKey(xxhash_rust::xxh3::xxh3_64(sql.as_bytes()).max(1))
    }
}

/// The statements that were long when they last ran: a fixed table of slots, each holding
/// the key of one such statement. Two statements of one slot evict each other's record, and
/// one is then taken for short: it may go to the spare, as before this record existed. A
/// short statement never reads or clears the record of another.
struct StatementRecord {
    slots: [AtomicU64; SLOTS],
}

const SLOTS: usize = 1024;

impl Default for StatementRecord {
    fn default() -> Self {
        StatementRecord { slots: std::array::from_fn(|_| AtomicU64::new(NO_STATEMENT)) }
    }
}

impl StatementRecord {
    fn slot(&self, key: StatementKey) -> &AtomicU64 {
        &self.slots[(key.0 % SLOTS as u64) as usize]
    }

    fn is_long(&self, key: StatementKey) -> bool {
        self.slot(key).load(Ordering::Relaxed) == key.0
    }

    fn ran_long(&self, key: StatementKey) {
        // Most runs change nothing: a load first keeps the line shared.
        if !self.is_long(key) {
            self.slot(key).store(key.0, Ordering::Relaxed);
        }
    }

    fn ran_short(&self, key: StatementKey) {
        if self.is_long(key) {
            let _ = self.slot(key).compare_exchange(key.0, NO_STATEMENT, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
}

/// One reader's part. Its jobs are numbered as they end. A read of a statement known to be
/// long marks it long as it starts; otherwise its progress handler does once the job has run
/// for `LONG` (`LongWatch`). When the job ends the reader is unmarked and the statement's
/// record updated: long when the job was found long, short when it completed short (a read
/// that failed or was cancelled early says nothing of its statement). `long`, `found_long`
/// and `statement` are used by the reader's own thread only, so plain loads and stores do;
/// the shared counts change only when the reader's answer does.
pub(crate) struct ReaderState {
    long: AtomicBool,
    /// The progress handler found this job long (not only its statement's record).
    found_long: AtomicBool,
    /// The key of the statement the job runs (`NO_STATEMENT` for jobs that run none).
    statement: AtomicU64,
    jobs_ended: AtomicU64,
    spare: bool,
    shared: Arc<LongReads>,
}

impl ReaderState {
    /// The job runs the statement `key`.
    pub(crate) fn runs(&self, key: StatementKey) {
        self.statement.store(key.0, Ordering::Relaxed);
        if self.shared.known_long(key) {
            self.set_long(true);
        }
    }

    fn statement(&self) -> Option<StatementKey> {
        let key = self.statement.load(Ordering::Relaxed);
        (key != NO_STATEMENT).then_some(StatementKey(key))
    }

    /// The job has run long (`LongWatch`).
    pub(crate) fn found_long(&self) {
        if !self.found_long.load(Ordering::Relaxed) {
            self.found_long.store(true, Ordering::Relaxed);
            if let Some(key) = self.statement() {
                self.shared.statements.ran_long(key);
            }
        }
        self.set_long(true);
    }

    /// The job ended (`completed`: without an error), before its completion is sent, so a
    /// read sent in answer sees this reader free.
    pub(crate) fn job_ended(&self, completed: bool) {
        self.jobs_ended.store(self.jobs_ended.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        if let Some(key) = self.statement() {
            // Written again at the end: another reader may have run the same statement
            // meanwhile and recorded the opposite.
            if self.found_long.load(Ordering::Relaxed) {
                self.shared.statements.ran_long(key);
            } else if completed {
                self.shared.statements.ran_short(key);
            }
            self.statement.store(NO_STATEMENT, Ordering::Relaxed);
        }
        self.found_long.store(false, Ordering::Relaxed);
        self.set_long(false);
    }

    /// Changes the shared counts only when this reader's answer changes.
    fn set_long(&self, long: bool) {
        if self.long.load(Ordering::Relaxed) == long {
            return;
        }
        self.long.store(long, Ordering::Relaxed);
        let now = &self.shared.now;
        match (self.spare, long) {
            (true, _) => now.spare.store(long, Ordering::Release),
            (false, true) => drop(now.shared.fetch_add(1, Ordering::AcqRel)),
            (false, false) => drop(now.shared.fetch_sub(1, Ordering::AcqRel)),
        }
    }
}

/// Kept by a reader's progress handler: finds the job long once the handler has been called
/// within it for `LONG`. (SQLite counts a statement's instructions over all its runs, so a
/// cached point query calls the handler too, once in many runs; one call per job never
/// finds it long.)
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
            self.state.found_long();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn longs(reads: &LongReads) -> usize {
        reads.shared_readers()
    }

    #[test]
    fn a_reader_is_long_once_one_job_has_run_for_long() {
        let reads = Arc::new(LongReads::default());
        let state = reads.reader_state(false);
        let mut watch = LongWatch::new(state.clone());
        let t0 = Instant::now();
        let step = Duration::from_micros(10);
        // A cached point query calls the handler once in many runs: one call per job.
        for i in 0..100u32 {
            watch.tick(t0 + step * i);
            state.job_ended(true);
        }
        assert_eq!(longs(&reads), 0, "point queries are never long");
        // One job calling it every 10 µs: long at `LONG`, counted once.
        let t1 = t0 + step * 100;
        let calls = (LONG.as_micros() / 10) as u32;
        for i in 0..calls {
            watch.tick(t1 + step * i);
            assert_eq!(longs(&reads), 0, "call {i}");
        }
        watch.tick(t1 + step * calls);
        watch.tick(t1 + step * (calls + 1));
        assert_eq!(longs(&reads), 1);
        state.job_ended(true);
        assert_eq!(longs(&reads), 0, "the job ended");
        watch.tick(t1 + step * (calls + 2));
        assert_eq!(longs(&reads), 0, "the next job starts afresh");
    }

    #[test]
    fn a_statement_is_recorded_as_it_last_ran() {
        let reads = Arc::new(LongReads::default());
        let (a, b) = (reads.reader_state(false), reads.reader_state(false));
        let large = StatementKey::of("SELECT * FROM items");
        // Found long: recorded at once, and a reader that starts it is long from its start.
        a.runs(large);
        a.found_long();
        assert!(reads.known_long(large));
        b.runs(large);
        assert_eq!(longs(&reads), 2);
        // b's run ends short, while a's goes on: the one that ends last is recorded.
        b.job_ended(true);
        assert!(!reads.known_long(large));
        a.job_ended(true);
        assert!(reads.known_long(large), "a's run ended long, after b's");
        // A run that fails or is cancelled early says nothing.
        b.runs(large);
        b.job_ended(false);
        assert!(reads.known_long(large));
        // A job that runs no statement (a task, an iterator) records nothing when long.
        a.found_long();
        a.job_ended(true);
        assert_eq!(longs(&reads), 0);
        b.runs(large);
        b.job_ended(true);
        assert!(!reads.known_long(large));
    }

    #[test]
    fn statements_of_one_slot_never_pass_for_each_other() {
        let reads = Arc::new(LongReads::default());
        let state = reads.reader_state(false);
        let large = StatementKey(7);
        let short = StatementKey(7 + SLOTS as u64);
        state.runs(large);
        state.found_long();
        state.job_ended(true);
        assert!(!reads.known_long(short), "a short statement of the same slot is not taken for long");
        state.runs(short);
        assert_eq!(longs(&reads), 0, "nor does it start long");
        state.job_ended(true);
        assert!(reads.known_long(large), "and its short run leaves the other's record alone");
        // Two long ones evict each other: the evicted one passes for short.
        state.runs(short);
        state.found_long();
        state.job_ended(true);
        assert!(reads.known_long(short) && !reads.known_long(large));
    }
}
