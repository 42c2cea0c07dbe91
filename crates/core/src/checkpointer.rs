//! Checkpoints off the writer thread: a thread of its own, with a read-write connection of
//! its own, copies the WAL back into the database file when the writer asks, while the
//! writer goes on writing. A checkpoint is mostly its two syncs (tens of milliseconds on a
//! cloud disk); run on the writer, every write sent meanwhile waited for them
//! (docs/experiments/091-checkpoints-off-the-writer.md). A PASSIVE checkpoint takes no lock a
//! writer needs, so SQLite lets the two run at once.
//!
//! The thread starts at the first request and opens its connection itself (a key
//! derivation is not the writer's to wait for either). When it cannot start or open, the
//! request says so and the writer checkpoints as it did before. It stops, and its connection
//! closes, when the writer stops it (before a rekey, which must be alone with the file, and
//! before the writer closes, which must be the last connection to remove the WAL) or drops it.

use rusqlite::Connection;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Opens the checkpointer's connection, on its thread.
pub(crate) type Open = Box<dyn FnOnce() -> crate::error::Result<Connection> + Send>;

#[derive(Debug, Default)]
struct State {
    /// A checkpoint was asked for and has not begun.
    wanted: bool,
    /// A checkpoint runs now.
    running: bool,
    /// The writer stops the thread.
    stop: bool,
    /// The thread could not open its connection: the writer checkpoints itself from now on.
    unavailable: bool,
    /// What the last one answered: the WAL's frames, and how many of them are in the
    /// database file now. None when it failed.
    outcome: Option<(i64, i64)>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing runs under the lock that can panic; a poisoned lock still holds plain flags.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The writer's handle on its checkpoint thread.
#[derive(Default)]
pub(crate) struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Asks for a checkpoint without waiting for it; `open` makes the connection if the
    /// thread is not running yet. False when the thread cannot take it (it could not start
    /// or open its connection): the caller checkpoints itself. A request made while one is
    /// asked for and has not begun is that request; one made while a checkpoint runs asks for
    /// the next.
    pub fn request(&mut self, open: impl FnOnce() -> Open) -> bool {
        if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
            // It ended on its own: only when it could not open, or on a panic.
            self.stop();
        }
        {
            let mut state = self.shared.lock();
            if state.unavailable {
                drop(state);
                // It is ending, if it has not ended: nothing is left of it after this.
                self.stop();
                return false;
            }
            if self.thread.is_some() {
                state.wanted = true;
                self.shared.changed.notify_all();
                return true;
            }
            state.wanted = true;
        }
        let shared = self.shared.clone();
        let open = open();
        let spawned = std::thread::Builder::new()
            .name("quietsqlite-checkpoint".into())
            .spawn(move || run(shared, open));
        match spawned {
            Ok(t) => {
                self.thread = Some(t);
                true
            }
            Err(_) => {
                let mut state = self.shared.lock();
                state.wanted = false;
                state.unavailable = true;
                false
            }
        }
    }

    /// A checkpoint was asked for and has not ended.
    pub fn busy(&self) -> bool {
        let state = self.shared.lock();
        state.wanted || state.running
    }

    /// What the last checkpoint answered (see `State::outcome`).
    pub fn outcome(&self) -> Option<(i64, i64)> {
        self.shared.lock().outcome
    }

    /// Stops the thread, after the checkpoint it runs, and closes its connection. A later
    /// request starts a new one (after a rekey: with the new key), unless the thread could
    /// not open (a new Checkpointer forgets that).
    pub fn stop(&mut self) {
        let Some(thread) = self.thread.take() else { return };
        {
            let mut state = self.shared.lock();
            state.stop = true;
            self.shared.changed.notify_all();
        }
        // Its work runs under catch_unwind: a join error would be a panic outside it, after
        // which there is nothing left to close.
        let _ = thread.join();
        let mut state = self.shared.lock();
        state.stop = false;
        state.wanted = false;
        state.running = false;
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: Arc<Shared>, open: Open) {
    let conn = match catch_unwind(AssertUnwindSafe(open)) {
        Ok(Ok(conn)) => conn,
        _ => {
            let mut state = shared.lock();
            state.unavailable = true;
            // Not busy: the writer's next look finds the round failed (no outcome).
            state.wanted = false;
            state.outcome = None;
            return;
        }
    };
    loop {
        {
            let mut state = shared.lock();
            while !state.wanted && !state.stop {
                state = shared.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            if state.stop {
                return;
            }
            state.wanted = false;
            state.running = true;
        }
        // PASSIVE never waits for the writer or a reader: what it cannot copy now (frames
        // a reader still needs, or written meanwhile) it copies next time. A failure (an I/O
        // error) is the next checkpoint's to retry, as it was on the writer.
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)))
        }));
        let mut state = shared.lock();
        // -1 for both when the file is not in WAL mode: nothing to copy.
        state.outcome = match outcome {
            Ok(Ok((log, copied))) if log >= 0 && copied >= 0 => Some((log, copied)),
            _ => None,
        };
        state.running = false;
        shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn wal_db(dir: &std::path::Path) -> (std::path::PathBuf, Connection) {
        let path = dir.join("c.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(b BLOB);
             WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200)
             INSERT INTO t SELECT randomblob(3000) FROM c;",
        )
        .unwrap();
        (path, conn)
    }

    /// Waits for the round just asked for (`request` marks it wanted before it returns).
    fn wait_round(c: &Checkpointer) {
        let start = Instant::now();
        while c.busy() {
            assert!(start.elapsed() < Duration::from_secs(10), "no checkpoint ran");
            std::thread::sleep(Duration::from_millis(1));
        }
        // A thread that could not open ends the round with no outcome.
        assert!(c.outcome().is_some(), "the round ran a checkpoint");
    }

    #[test]
    fn copies_the_wal_on_its_own_thread_and_stops_with_its_connection() {
        let dir = tempfile::tempdir().unwrap();
        let (path, writer) = wal_db(dir.path());
        let before = std::fs::metadata(&path).unwrap().len();
        let mut c = Checkpointer::default();
        let p = path.clone();
        assert!(c.request(move || Box::new(move || Ok(Connection::open(p)?))));
        wait_round(&c);
        assert!(std::fs::metadata(&path).unwrap().len() > before + 200 * 3000, "the rows reached the file");
        // The writer goes on meanwhile and after: the WAL restarts at its next write.
        writer.execute_batch("INSERT INTO t VALUES (x'00')").unwrap();
        assert!(c.request(|| unreachable!("the running thread takes it")));
        wait_round(&c);
        c.stop();
        assert!(c.thread.is_none());
        // A later request starts a new thread (after a rekey: with the new key).
        let p = path.clone();
        assert!(c.request(move || Box::new(move || Ok(Connection::open(p)?))));
        wait_round(&c);
    }

    #[test]
    fn a_thread_that_cannot_open_hands_checkpoints_back() {
        let mut c = Checkpointer::default();
        assert!(c.request(|| Box::new(|| Err(crate::error::Error::Internal("no".into())))));
        let start = Instant::now();
        while !c.shared.lock().unavailable {
            assert!(start.elapsed() < Duration::from_secs(10), "the thread never gave up");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!c.busy(), "a round that never ran is not waited for");
        assert_eq!(c.outcome(), None);
        assert!(!c.request(|| unreachable!("never opened again")), "the writer checkpoints itself");
        assert!(c.thread.is_none(), "the thread that gave up was joined");
        // Only a new handle (after a rekey) tries to open again.
        assert!(!c.request(|| unreachable!("never opened again")));
    }
}
