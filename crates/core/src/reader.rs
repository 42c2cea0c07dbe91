//! Reader threads: each owns one read-only connection (and its statement cache) for its
//! whole life and takes requests from one shared queue, so a request goes to whichever
//! reader is free without a lock per query.

use crate::cancel::{Start, Ticket, Watch};
use crate::completion::{panic_message, Completion, CompletionSink, Countdown, Output, RequestId};
use crate::connection::{Location, OpenOptions};
use crate::error::Error;
use crate::query::{self, ReadFormat};
use crate::value::Params;
use crossbeam_channel::Receiver;
use crate::read_connection::ReadConnection;
use rusqlite::Connection;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

pub struct ReadJob {
    pub id: RequestId,
    pub sql: crate::statements::SqlText,
    pub params: Params,
    pub format: ReadFormat,
    /// Registers a ticket so `Database::cancel(id)` can drop or interrupt it.
    pub cancellable: bool,
}

/// Work that needs a reader connection but is not a plain request (live-query re-runs).
pub type ReaderTask = Box<dyn FnOnce(&ReadConnection) + Send>;

pub(crate) enum ReaderMsg {
    /// A request, its ticket, and its stamp from the `SendClock`.
    Read(ReadJob, Option<Arc<Ticket>>, u64),
    /// A task, and the key of the statement it runs, if it runs one (a live query's re-run):
    /// a statement known to be long keeps it off the spare, and its run is recorded.
    Task(ReaderTask, Option<crate::long_reads::StatementKey>),
    /// An iterator: holds this reader until it ends (see `iterate`).
    Iterate(Box<crate::iterate::Queued>),
    /// Test hook: proves a panic becomes an error, not a crash.
    Panic(RequestId),
    Stop(Arc<Countdown>),
    /// The writer changes the key: park (no read open) until it is done, then reopen with
    /// the new key. Each reader takes exactly one: a parked reader takes nothing else.
    Rekey(Arc<RekeyGate>),
}

/// Where the writer and the readers meet around a rekey.
pub(crate) struct RekeyGate {
    /// Readers close their connection before parking (the writer must leave WAL mode,
    /// which needs the file to itself), and always reopen.
    close_first: bool,
    state: std::sync::Mutex<GateState>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct GateState {
    parked: usize,
    /// Set by the writer when the key changed (`Some`: reopen so) or not (`None`: keep the
    /// connection as it is); readers wait for it.
    released: Option<Option<(Location, OpenOptions)>>,
    done: usize,
    failure: Option<Error>,
}

impl RekeyGate {
    pub(crate) fn new(close_first: bool) -> RekeyGate {
        RekeyGate { close_first, state: Default::default(), changed: Default::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait_until(&self, ready: impl Fn(&GateState) -> bool) -> std::sync::MutexGuard<'_, GateState> {
        let mut st = self.lock();
        while !ready(&st) {
            st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st
    }

    /// Writer: waits until `count` readers are parked.
    pub(crate) fn wait_parked(&self, count: usize) {
        drop(self.wait_until(|st| st.parked >= count));
    }

    /// Writer: a failure of a reader while parking.
    pub(crate) fn take_failure(&self) -> Option<Error> {
        self.lock().failure.take()
    }

    /// Writer: lets the readers go (reopening with `reopen` if given) and waits until
    /// `count` of them are done; returns the first reader's failure to reopen.
    pub(crate) fn release(&self, reopen: Option<(Location, OpenOptions)>, count: usize) -> Option<Error> {
        self.lock().released = Some(reopen);
        self.changed.notify_all();
        let mut st = self.wait_until(|st| st.done >= count);
        // The options hold the key: drop them with the gate's last use.
        st.released = None;
        st.failure.take()
    }

    /// Reader: parks, then reopens `conn` if the writer says so.
    fn pass(&self, conn: &mut ReadConnection, watch: &Arc<Watch>) {
        if self.close_first {
            // A private in-memory connection stands in until the reopen (it touches no file).
            match Connection::open_in_memory() {
                Ok(placeholder) => drop(std::mem::replace(conn, ReadConnection::new(placeholder, 0))),
                Err(e) => {
                    let mut st = self.lock();
                    st.failure.get_or_insert(Error::from(e));
                }
            }
        }
        {
            let mut st = self.lock();
            st.parked += 1;
        }
        self.changed.notify_all();
        let reopen = self.wait_until(|st| st.released.is_some()).released.clone().flatten();
        let failure = reopen.and_then(|(loc, opts)| match crate::connection::open_reader(&loc, &opts) {
            Ok(mut fresh) => match watch.attach(&mut fresh) {
                Ok(()) => {
                    *conn = ReadConnection::new(fresh, opts.statement_cache);
                    None
                }
                Err(e) => Some(Error::from(e)),
            },
            Err(e) => Some(e),
        });
        if let Some(e) = &failure {
            // Neither the stand-in nor a connection with the old key may serve anything now:
            // every request on this reader fails, saying why, until the database reopens.
            conn.refuse(e);
        }
        let mut st = self.lock();
        st.done += 1;
        if st.failure.is_none() {
            st.failure = failure;
        }
        drop(st);
        self.changed.notify_all();
    }
}

/// Stamps read requests as they are sent. A reader that takes a snapshot for the requests
/// waiting in its queue notes the clock first: a request stamped below that was sent before
/// the snapshot began, so the snapshot shows every write that completed before it was sent,
/// as a transaction of its own would (experiment 050).
#[derive(Default)]
pub(crate) struct SendClock(AtomicU64);

impl SendClock {
    /// The stamp of a request being sent.
    pub(crate) fn stamp(&self) -> u64 {
        // SeqCst: the sender's stamp and a reader's `now` must be ordered with each other.
        self.0.fetch_add(1, Ordering::SeqCst)
    }

    /// Every request stamped below this was sent before this call.
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// How long one snapshot may serve queued reads. It saves a few system calls per read, which
/// only matter for small reads, while an open read transaction keeps a checkpoint from
/// copying pages past it: bounded so a backlog of long reads cannot hold one for long.
const SNAPSHOT_SPAN: std::time::Duration = std::time::Duration::from_millis(1);

/// How long a reader polls its queue after a job before it parks: a request that follows
/// within this window is taken without waking a parked thread (docs/experiments/003-reader-spin.md).
const SPIN_WINDOW: std::time::Duration = std::time::Duration::from_micros(30);

/// The next message: poll for `spin` first (a request that follows quickly is then taken
/// without the cost of waking a parked thread), then block.
fn next_message(queue: &Receiver<ReaderMsg>, spin: std::time::Duration) -> Option<ReaderMsg> {
    match poll(queue, spin, false) {
        Ok(m) => Some(m),
        Err(crossbeam_channel::TryRecvError::Disconnected) => None,
        Err(crossbeam_channel::TryRecvError::Empty) => queue.recv().ok(),
    }
}

/// Polls `queue` for up to `spin` (at least once): the readers' and the writer's wait before
/// they park. With `yield_first`, a first poll that finds nothing is followed by one yield of
/// the CPU (see spin.rs). On a single CPU it only polls once, and never yields: spinning there
/// would keep the thread that sends the next request from running.
pub(crate) fn poll<T>(
    queue: &Receiver<T>,
    spin: std::time::Duration,
    yield_first: bool,
) -> Result<T, crossbeam_channel::TryRecvError> {
    static SEVERAL_CPUS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let several = *SEVERAL_CPUS.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1));
    let window = if several { spin } else { std::time::Duration::ZERO };
    crate::spin::spin_until(window, yield_first && several, || match queue.try_recv() {
        Err(crossbeam_channel::TryRecvError::Empty) => None,
        other => Some(other),
    })
    .unwrap_or(Err(crossbeam_channel::TryRecvError::Empty))
}

/// Counts a reader as busy while it holds a job: `diagnostics().readersBusy`, and whether a
/// read may go to the spare (reader_queues.rs).
struct Busy<'a>(&'a AtomicUsize);

impl<'a> Busy<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::AcqRel);
        Busy(n)
    }

    /// Counts the reader busy if `msg` is a job (control messages are not).
    fn for_job(msg: &ReaderMsg, n: &'a AtomicUsize) -> Option<Self> {
        matches!(msg, ReaderMsg::Read(..) | ReaderMsg::Task(..) | ReaderMsg::Iterate(_)).then(|| Busy::new(n))
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(crate) fn run(
    mut conn: ReadConnection,
    watch: Arc<Watch>,
    queue: Receiver<ReaderMsg>,
    sink: Arc<dyn CompletionSink>,
    busy: Arc<AtomicUsize>,
    catalog: Arc<crate::functions::Catalog>,
    clock: Arc<SendClock>,
) {
    // While `conn` holds a snapshot: the clock and the time when it was taken. Only requests
    // stamped below that clock run inside it, and only for `SNAPSHOT_SPAN`; anything else
    // releases it first.
    let mut held: Option<(u64, std::time::Instant)> = None;
    // A message taken while deciding whether the snapshot goes on, counted busy from then.
    let mut taken: Option<(ReaderMsg, Option<Busy>)> = None;
    loop {
        watch.job_ended(false);
        // The count ends with the job; a read ends it before its completion is sent (see
        // serve_read).
        let (msg, busy_now) = match taken.take() {
            Some(t) => t,
            None => {
                let Some(msg) = next_message(&queue, SPIN_WINDOW) else { break };
                let b = Busy::for_job(&msg, &busy);
                (msg, b)
            }
        };
        match msg {
            ReaderMsg::Read(job, ticket, _) => {
                // Others wait behind this one: one snapshot serves them all.
                if held.is_none() && !queue.is_empty() {
                    let now = clock.now();
                    if conn.hold_snapshot() {
                        held = Some((now, std::time::Instant::now()));
                    }
                }
                serve_read(&conn, &watch, &sink, &catalog, job, ticket, busy_now);
                if !conn.holds_snapshot() {
                    // Ended while it ran, to apply a function or extension (`sync_with`).
                    held = None;
                }
                if let Some((horizon, since)) = held {
                    let next = queue.try_recv().ok().map(|m| {
                        let b = Busy::for_job(&m, &busy);
                        (m, b)
                    });
                    let goes_on = matches!(&next, Some((ReaderMsg::Read(_, _, stamp), _))
                        if *stamp < horizon && since.elapsed() < SNAPSHOT_SPAN);
                    if !goes_on {
                        conn.release_snapshot();
                        held = None;
                    }
                    // Nothing (or disconnected): the next receive waits or ends the loop.
                    taken = next;
                }
            }
            ReaderMsg::Iterate(q) => {
                let id = q.job.id;
                let running = match watch.start(id, Some(q.ticket.clone())) {
                    Start::Run(r) => r,
                    // Ended while queued: nothing ran.
                    Start::Skip => {
                        crate::iterate::skipped(&q, &sink);
                        continue;
                    }
                    Start::Stopped => {
                        q.registry.end(id);
                        sink.complete(Completion { id, result: Err(crate::error::closed_by_force()) });
                        continue;
                    }
                };
                let panicked = catch_unwind(AssertUnwindSafe(|| match conn.check_usable().and_then(|()| catalog.sync(&conn)) {
                    Ok(()) => crate::iterate::serve(&conn, &q, &sink, || running.stopped()),
                    // A function or extension that failed to apply fails the iterator.
                    Err(e) => {
                        q.registry.end(id);
                        sink.complete(Completion { id, result: Err(e) });
                    }
                }));
                if let Err(p) = panicked {
                    q.registry.end(id);
                    sink.complete(Completion { id, result: Err(Error::Internal(panic_message(p))) });
                }
                drop(running);
            }
            ReaderMsg::Task(task, statement) => {
                if let Some(key) = statement {
                    watch.runs(key);
                }
                // A task reports its own outcome; a panic in it must not kill the reader. A
                // function or extension that failed to apply fails the task's query itself.
                let ran = catch_unwind(AssertUnwindSafe(|| {
                    let _ = catalog.sync(&conn);
                    task(&conn)
                }));
                watch.job_ended(ran.is_ok());
            }
            ReaderMsg::Panic(id) => {
                let result = catch_unwind(|| -> crate::Result<Output> {
                    panic!("deliberate panic requested by a test")
                })
                .unwrap_or_else(|p| Err(Error::Internal(panic_message(p))));
                sink.complete(Completion { id, result });
            }
            ReaderMsg::Rekey(gate) => gate.pass(&mut conn, &watch),
            ReaderMsg::Stop(countdown) => {
                drop(conn);
                countdown.done();
                return;
            }
        }
    }
}

/// Runs one read request and sends its completion (unless it was cancelled while queued).
fn serve_read(
    conn: &ReadConnection,
    watch: &Arc<Watch>,
    sink: &Arc<dyn CompletionSink>,
    catalog: &crate::functions::Catalog,
    job: ReadJob,
    ticket: Option<Arc<Ticket>>,
    busy: Option<Busy<'_>>,
) {
    let id = job.id;
    let running = match watch.start(id, ticket) {
        Start::Run(r) => r,
        Start::Skip => return,
        Start::Stopped => {
            sink.complete(Completion { id, result: Err(crate::error::closed_by_force()) });
            return;
        }
    };
    watch.runs(crate::long_reads::StatementKey::of(&job.sql));
    let result = catch_unwind(AssertUnwindSafe(|| {
        conn.check_usable()?;
        catalog.sync_with(conn, || conn.release_snapshot())?;
        query::read(conn, &job.sql, &job.params, job.format).map(Output::Read)
    }))
    .unwrap_or_else(|p| Err(Error::Internal(panic_message(p))));
    let result = crate::error::explain_interrupt(result, running.stopped());
    drop(running);
    // Free before the completion: a read sent in answer to it may count on this reader.
    watch.job_ended(result.is_ok());
    drop(busy);
    sink.complete(Completion { id, result });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records, for each completion, how many readers counted themselves busy as it was sent.
    struct BusyAtCompletion {
        busy: Arc<AtomicUsize>,
        seen: Mutex<Vec<(RequestId, usize)>>,
    }

    impl CompletionSink for BusyAtCompletion {
        fn complete(&self, completion: Completion) {
            self.seen.lock().unwrap().push((completion.id, self.busy.load(Ordering::SeqCst)));
        }
    }

    #[test]
    fn a_reader_is_free_before_its_completion_is_sent() {
        let mut conn = Connection::open_in_memory().unwrap();
        let watch = Watch::install(&mut conn, Arc::default(), None).unwrap();
        let busy = Arc::new(AtomicUsize::new(0));
        let sink = Arc::new(BusyAtCompletion { busy: busy.clone(), seen: Mutex::default() });
        let (tx, rx) = crossbeam_channel::unbounded();
        let read = |id| {
            let job = ReadJob { id, sql: "SELECT 1".into(), params: Params::None, format: ReadFormat::Json, cancellable: false };
            ReaderMsg::Read(job, None, 0)
        };
        tx.send(read(1)).unwrap();
        tx.send(read(2)).unwrap();
        let stopped = Countdown::new(1, || {});
        tx.send(ReaderMsg::Stop(stopped)).unwrap();
        let conn = ReadConnection::new(conn, 8);
        let (s, b) = (sink.clone(), busy.clone());
        std::thread::spawn(move || run(conn, watch, rx, s, b, Arc::default(), Arc::default())).join().unwrap();
        assert_eq!(*sink.seen.lock().unwrap(), vec![(1, 0), (2, 0)]);
        assert_eq!(busy.load(Ordering::SeqCst), 0);
    }
}
