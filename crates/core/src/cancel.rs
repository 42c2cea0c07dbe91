//! Cancelling requests. A request sent as cancellable gets a `Ticket`, found by its id. A
//! ticket cancelled while its request waits in a queue makes the thread skip it when dequeued
//! (no completion is sent: the front end has already settled it). A ticket cancelled while
//! its request runs is seen by the connection's progress handler, which interrupts the
//! statement. The handler reads only the ticket of the request it is running, so a
//! cancellation can never reach another request, whatever the timing (docs/decisions.md).
//! A forced close stops every connection through the same handler.

use crate::completion::RequestId;
use rusqlite::Connection;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
/// Cancelled before a thread took it: it never runs.
const DROPPED: u8 = 2;
/// Cancelled while running: the progress handler interrupts it.
const INTERRUPTING: u8 = 3;
const DONE: u8 = 4;

/// Virtual-machine instructions between two looks at the cancel flags: a few microseconds of
/// work, so an interrupt lands quickly, and a point query (a few dozen instructions) almost
/// never calls the handler (docs/experiments/011-cancellation-cost.md).
pub const PROGRESS_OPS: i32 = 1000;

/// The cancellation state of one request.
#[derive(Debug, Default)]
pub struct Ticket {
    state: AtomicU8,
}

impl Ticket {
    /// A thread takes the request; false when it was cancelled while queued.
    pub(crate) fn begin(&self) -> bool {
        self.state.compare_exchange(QUEUED, RUNNING, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.load(Ordering::Acquire) == INTERRUPTING
    }

    fn is_over(&self) -> bool {
        matches!(self.state.load(Ordering::Acquire), DONE | DROPPED)
    }

    pub(crate) fn finish(&self) {
        self.state.store(DONE, Ordering::Release);
    }

    pub(crate) fn cancel(&self) -> CancelOutcome {
        let mut seen = self.state.load(Ordering::Acquire);
        loop {
            let (next, outcome) = match seen {
                QUEUED => (DROPPED, CancelOutcome::Dropped),
                RUNNING => (INTERRUPTING, CancelOutcome::Interrupting),
                DROPPED => return CancelOutcome::Dropped,
                INTERRUPTING => return CancelOutcome::Interrupting,
                _ => return CancelOutcome::Finished,
            };
            match self.state.compare_exchange(seen, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return outcome,
                Err(now) => seen = now,
            }
        }
    }
}

/// What `Cancellation::cancel` did. The numbers cross to the front end (`cancel()` returns them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum CancelOutcome {
    /// Unknown id, or the request already finished: its completion is on its way.
    Finished = 0,
    /// It was still queued: it will never run and no completion will come.
    Dropped = 1,
    /// It is running: it is being interrupted; its completion follows shortly.
    Interrupting = 2,
}

/// The tickets of one database's cancellable requests, and its forced-stop flag.
///
/// Only the submitting side (the JS thread) touches the map; the threads that run requests
/// change tickets' atomic states and never take its lock, so a submit never waits for a
/// thread that holds the lock and was descheduled. Tickets of finished requests are purged
/// lazily, when the map has doubled since the last purge (amortised O(1) per request).
#[derive(Debug, Default)]
pub struct Cancellation {
    tickets: Mutex<Book>,
    stopping: AtomicBool,
}

#[derive(Debug, Default)]
struct Book {
    map: HashMap<RequestId, Arc<Ticket>>,
    purge_at: usize,
}

/// The smallest map size at which finished tickets are purged.
const MIN_PURGE: usize = 64;

impl Cancellation {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        // The map stays consistent even if a holder panicked: every operation is one call.
        self.tickets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ticket for request `id`, findable by `cancel(id)` until the request ends.
    pub fn register(&self, id: RequestId) -> Arc<Ticket> {
        let t = Arc::new(Ticket::default());
        let mut book = self.book();
        if book.map.len() >= book.purge_at.max(MIN_PURGE) {
            book.map.retain(|_, t| !t.is_over());
            book.purge_at = book.map.len() * 2;
        }
        book.map.insert(id, t.clone());
        t
    }

    /// Forgets a ticket whose request could not be queued.
    pub fn unregister(&self, id: RequestId, ticket: &Arc<Ticket>) {
        let mut book = self.book();
        if book.map.get(&id).is_some_and(|t| Arc::ptr_eq(t, ticket)) {
            book.map.remove(&id);
        }
    }

    /// Cancels request `id`: drops it from its queue or interrupts it where it runs.
    pub fn cancel(&self, id: RequestId) -> CancelOutcome {
        let mut book = self.book();
        let Some(ticket) = book.map.get(&id) else { return CancelOutcome::Finished };
        let outcome = ticket.cancel();
        if outcome != CancelOutcome::Interrupting {
            // Dropped or finished: nobody needs it any more.
            book.map.remove(&id);
        }
        outcome
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.book().map.len()
    }

    /// Forced close: every running statement is interrupted and nothing queued runs.
    pub fn stop_all(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }
}

/// What a thread does with a dequeued request.
pub(crate) enum Start<'a> {
    /// Run it; the guard ends the request's watch when dropped.
    Run(Running<'a>),
    /// It was cancelled while queued: skip it and send nothing.
    Skip,
    /// The database is being closed with force: answer with a closed error, do not run it.
    Stopped,
}

/// One connection's view for its progress handler: the ticket of the request it runs.
pub(crate) struct Watch {
    cancellation: Arc<Cancellation>,
    /// A reader's state, for sending reads (see reader_queues.rs).
    reader: Option<Arc<crate::long_reads::ReaderState>>,
    /// True while `current` holds a ticket: the handler takes no lock otherwise.
    armed: AtomicBool,
    /// True while work that must not be cut off runs (`shielded`): nothing interrupts it.
    shielded: AtomicBool,
    current: Mutex<Option<(RequestId, Arc<Ticket>)>>,
}

impl Watch {
    /// Creates the watch and installs the progress handler that consults it on `conn`.
    pub(crate) fn install(
        conn: &mut Connection,
        cancellation: Arc<Cancellation>,
        reader: Option<Arc<crate::long_reads::ReaderState>>,
    ) -> rusqlite::Result<Arc<Watch>> {
        let watch = Arc::new(Watch {
            cancellation,
            reader,
            armed: AtomicBool::new(false),
            shielded: AtomicBool::new(false),
            current: Mutex::new(None),
        });
        watch.attach(conn)?;
        Ok(watch)
    }

    /// Installs the same watch on a connection that replaces the one it was installed on.
    pub(crate) fn attach(self: &Arc<Self>, conn: &mut Connection) -> rusqlite::Result<()> {
        let seen = self.clone();
        let mut turns = crate::turns::Turns::new();
        let mut long = self.reader.clone().map(crate::long_reads::LongWatch::new);
        conn.progress_handler(
            PROGRESS_OPS,
            Some(move || {
                let now = std::time::Instant::now();
                if let Some(long) = &mut long {
                    long.tick(now);
                }
                turns.tick(now);
                seen.should_interrupt()
            }),
        )
    }

    /// Runs `f` with no interruption, not even a forced close's: a rekey interrupted half-way
    /// is rolled back by SQLite3MC with the wrong cipher, which writes plaintext pages into an
    /// encrypted file.
    pub(crate) fn shielded<T>(&self, f: impl FnOnce() -> T) -> T {
        struct Unshield<'a>(&'a AtomicBool);
        impl Drop for Unshield<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        self.shielded.store(true, Ordering::Release);
        let _unshield = Unshield(&self.shielded);
        f()
    }

    fn should_interrupt(&self) -> bool {
        if self.shielded.load(Ordering::Acquire) {
            return false;
        }
        if self.cancellation.is_stopping() {
            return true;
        }
        if !self.armed.load(Ordering::Acquire) {
            return false;
        }
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        current.as_ref().is_some_and(|(_, t)| t.is_cancelled())
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.cancellation.is_stopping()
    }

    /// A reader's job runs the statement `key` (see long_reads.rs).
    pub(crate) fn runs(&self, key: crate::long_reads::StatementKey) {
        if let Some(reader) = &self.reader {
            reader.runs(key);
        }
    }

    /// The reader's job ended (`completed`: without an error).
    pub(crate) fn job_ended(&self, completed: bool) {
        if let Some(reader) = &self.reader {
            reader.job_ended(completed);
        }
    }

    /// Decides whether a dequeued request runs; a request without ticket always does
    /// (unless the database is being force-closed).
    pub(crate) fn start(self: &Arc<Self>, id: RequestId, ticket: Option<Arc<Ticket>>) -> Start<'_> {
        if let Some(t) = &ticket {
            if !t.begin() {
                return Start::Skip;
            }
        }
        if self.is_stopping() {
            if let Some(t) = ticket {
                t.finish();
            }
            return Start::Stopped;
        }
        if let Some(t) = ticket {
            *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some((id, t));
            self.armed.store(true, Ordering::Release);
        }
        // A thread serves one connection's watch: set once, not per request (whether a
        // request runs is the watch's own `armed`).
        RUNNING_HERE.with(|r| {
            let mut here = r.borrow_mut();
            if !here.as_ref().is_some_and(|w| Arc::ptr_eq(w, self)) {
                *here = Some(self.clone());
            }
        });
        Start::Run(Running { watch: self })
    }
}

thread_local! {
    /// The watch of the connection whose requests this thread runs, for what SQLite calls
    /// back into while one runs (user-defined functions: see `interrupt_pending`).
    static RUNNING_HERE: std::cell::RefCell<Option<Arc<Watch>>> = const { std::cell::RefCell::new(None) };
}

/// Whether the request this thread runs is to be interrupted (cancelled, or the database
/// force-closed; false on a thread that runs no requests). The progress handler looks every `PROGRESS_OPS` instructions; a statement
/// that calls a user-defined function on each row asks before each call, so that no call
/// runs once it was cancelled (246 more ran after an abort, with the read's promise settled).
pub(crate) fn interrupt_pending() -> bool {
    RUNNING_HERE.try_with(|r| r.borrow().as_ref().is_some_and(|w| w.should_interrupt())).unwrap_or(false)
}

/// A request running under a watch; dropping it ends the request's ticket.
pub(crate) struct Running<'a> {
    watch: &'a Watch,
}

impl Running<'_> {
    /// True when the database is being force-closed (an interruption is then its doing).
    pub(crate) fn stopped(&self) -> bool {
        self.watch.is_stopping()
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if !self.watch.armed.swap(false, Ordering::AcqRel) {
            return;
        }
        let taken = self.watch.current.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((_, t)) = taken {
            t.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNAWAY: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c";

    fn connection() -> (Connection, Arc<Cancellation>, Arc<Watch>) {
        let mut conn = Connection::open_in_memory().unwrap();
        let c = Arc::new(Cancellation::default());
        let w = Watch::install(&mut conn, c.clone(), None).unwrap();
        (conn, c, w)
    }

    #[test]
    fn a_ticket_cancelled_while_queued_is_skipped_and_forgotten() {
        let (_conn, c, w) = connection();
        let t = c.register(7);
        assert_eq!(c.cancel(7), CancelOutcome::Dropped);
        assert!(matches!(w.start(7, Some(t)), Start::Skip));
        assert_eq!(c.cancel(7), CancelOutcome::Finished, "the ticket is gone");
        assert_eq!(c.held(), 0);
    }

    #[test]
    fn a_running_request_is_interrupted_and_the_next_one_is_not() {
        let (conn, c, w) = connection();
        let t = c.register(1);
        let Start::Run(running) = w.start(1, Some(t)) else { panic!("must run") };
        let canceller = {
            let c = c.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                c.cancel(1)
            })
        };
        let err = conn.query_row(RUNAWAY, [], |r| r.get::<_, i64>(0)).unwrap_err();
        assert_eq!(err.sqlite_error_code(), Some(rusqlite::ErrorCode::OperationInterrupted));
        assert_eq!(canceller.join().unwrap(), CancelOutcome::Interrupting);
        drop(running);
        assert_eq!(c.cancel(1), CancelOutcome::Finished, "a finished request cannot be cancelled");
        // The next request, cancellable or not, runs to its end.
        let t2 = c.register(2);
        let Start::Run(next) = w.start(2, Some(t2)) else { panic!("must run") };
        let n: i64 = conn
            .query_row("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 100000) SELECT count(*) FROM c", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 100000);
        drop(next);
        assert_eq!(c.cancel(2), CancelOutcome::Finished);
        assert_eq!(c.held(), 0);
    }

    #[test]
    fn cancelling_after_the_end_does_nothing_to_later_requests() {
        let (conn, c, w) = connection();
        for id in 0..200 {
            let t = c.register(id);
            let Start::Run(r) = w.start(id, Some(t)) else { panic!() };
            let _: i64 = conn.query_row("SELECT count(*) FROM (SELECT 1 UNION ALL SELECT 2)", [], |r| r.get(0)).unwrap();
            drop(r);
            assert_eq!(c.cancel(id), CancelOutcome::Finished);
        }
        let n: i64 = conn
            .query_row("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 50000) SELECT count(*) FROM c", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 50000);
    }

    #[test]
    fn finished_tickets_are_purged_as_the_map_grows() {
        let (_conn, c, w) = connection();
        for id in 0..10_000 {
            let t = c.register(id);
            let Start::Run(r) = w.start(id, Some(t)) else { panic!() };
            drop(r);
        }
        assert!(c.held() <= 2 * MIN_PURGE, "finished tickets pile up: {}", c.held());
        // Tickets of requests still queued are never purged.
        let queued: Vec<_> = (20_000..20_500).map(|id| c.register(id)).collect();
        for id in 30_000..40_000 {
            let t = c.register(id);
            let Start::Run(r) = w.start(id, Some(t)) else { panic!() };
            drop(r);
        }
        assert!(c.held() >= queued.len());
        for id in 20_000..20_500 {
            assert_eq!(c.cancel(id), CancelOutcome::Dropped);
        }
    }

    #[test]
    fn stopping_interrupts_what_runs_and_refuses_what_is_queued() {
        let (conn, c, w) = connection();
        let Start::Run(running) = w.start(1, None) else { panic!() };
        let stopper = {
            let c = c.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                c.stop_all();
            })
        };
        let err = conn.query_row(RUNAWAY, [], |r| r.get::<_, i64>(0)).unwrap_err();
        assert_eq!(err.sqlite_error_code(), Some(rusqlite::ErrorCode::OperationInterrupted));
        assert!(running.stopped());
        drop(running);
        stopper.join().unwrap();
        let t = c.register(2);
        assert!(matches!(w.start(2, Some(t)), Start::Stopped));
        assert!(matches!(w.start(3, None), Start::Stopped));
        assert_eq!(c.cancel(2), CancelOutcome::Finished);
    }
}
