//! The writer thread: owns the read-write connection that runs every write. Requests run in
//! FIFO order; an interactive transaction holds the queue from BEGIN to COMMIT/ROLLBACK, and
//! requests of anyone else wait, in order, until it ends. Committed changes are published to
//! the change listener (live queries); checkpoints start when the writer is idle, and run on
//! the checkpoint thread (checkpointer.rs) while it goes on.

use crate::cancel::{Cancellation, Start, Ticket, Watch};
use crate::completion::{panic_message, Completion, CompletionSink, Countdown, Output, RequestId};
use crate::error::{Error, Result};
use crate::hooks::{ChangeSet, ChangeTracker};
use crate::query::{self, ReadFormat};
use crate::connection::{Cipher, Key, Location, OpenOptions};
use crate::read_connection::ReadConnection;
use crate::reader::{poll, ReaderMsg, RekeyGate};
use crate::statements::SqlText;
use crate::value::Params;
use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use rusqlite::Connection;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub type TxId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxMode {
    Deferred,
    Immediate,
    Exclusive,
}

#[derive(Debug)]
pub enum WriteKind {
    Execute { sql: SqlText, params: Params },
    /// A read on the writer connection (inside a transaction it sees uncommitted writes).
    Read { sql: SqlText, params: Params, format: ReadFormat },
    /// `later`: the parts after `sets`, when the batch crosses in parts (batch_parts.rs).
    Batch { sql: String, sets: crate::query::BatchSets, later: Option<crate::batch_parts::LaterParts> },
    /// With `silent`, the caller went on without waiting for it (docs/experiments/058-silent-begin.md):
    /// it completes with nothing when it works. When it fails, the transaction holds the
    /// writer all the same and every later request of it fails with its error (its COMMIT
    /// too; its ROLLBACK ends it quietly).
    Begin { mode: TxMode, silent: bool },
    Commit,
    Rollback,
    /// A nested transaction of depth `depth` (1 for the first level) begins: a savepoint.
    /// Nested bodies of one parent run one after another, so one name per depth suffices.
    Savepoint { depth: u32 },
    /// The nested transaction of depth `depth` ends well: its savepoint is released.
    Release { depth: u32 },
    /// The nested transaction of depth `depth` failed: everything since its savepoint is
    /// undone and the savepoint is released; with `keep`, it stays open (SQL's `ROLLBACK
    /// TO`, for a handle's `rollbackTo()`: one request, so that nothing sent meanwhile can
    /// land between the rollback and a new savepoint).
    RollbackTo { depth: u32, keep: bool },
    /// Changes the encryption key (`None`: decrypts); the readers reopen with the new key.
    Rekey { key: Option<Arc<Key>> },
    /// Loads an extension here, then (if that worked) on every other connection before its
    /// next job and on every connection opened later.
    LoadExtension { extension: crate::extensions::Extension },
}

#[derive(Debug)]
pub struct WriteJob {
    pub id: RequestId,
    /// The transaction this request belongs to; `Begin` names the one it starts.
    pub tx: Option<TxId>,
    pub kind: WriteKind,
    /// Registers a ticket so `Database::cancel(id)` can drop or interrupt it.
    pub cancellable: bool,
}

pub(crate) enum WriterMsg {
    Job(WriteJob, Option<Arc<Ticket>>),
    /// Live queries exist: look for commits made by other connections (other processes).
    CheckExternalChanges,
    Stop(Arc<Countdown>),
    /// The owner is gone (Worker terminated, database collected): nobody can send the
    /// requests of a transaction holding the queue any more. Jumps ahead of waiting work,
    /// rolls back, and stops like `Stop`.
    Abandon(Arc<Countdown>),
}

/// How a rekey() failure begins when the file was re-keyed all the same: the caller must use
/// the new key (the JS layer looks for it to know the file's encryption).
pub const REKEY_DONE: &str = "the database now has the new key (rekey() changed it)";

/// What follows `REKEY_DONE` when the file could not go back to WAL mode.
const REKEY_DONE_NOT_WAL: &str = "but it could not go back to WAL mode at once; it stays in rollback-journal \
     mode until a later write, or the next open, switches it back";

/// What follows `REKEY_DONE` when a reader then failed to reopen.
const REKEY_DONE_READER_FAILED: &str =
    "but a reader connection could not reopen with it; reads on that reader fail until the database is reopened";

/// Told about every committed transaction that changed something.
pub trait ChangeListener: Send + Sync {
    /// After every commit of our writer (`changes` is empty while tracking is off).
    fn committed(&self, changes: ChangeSet, schema_changed: bool);
    /// Another connection or process committed; what it changed is unknown.
    fn external_change(&self);
    /// A request of the writer is about to complete: from the moment it settles, a live
    /// query that starts must not be handed a result from before it.
    fn request_completing(&self) {}
}

/// WAL pages after which the writer checkpoints once it is idle (its queue empty for
/// `CHECKPOINT_QUIET`), after which it does so at any gap between requests, and after which
/// it does so even when busy (after a request, whatever is queued).
const CHECKPOINT_IDLE_PAGES: i32 = 1000;
const CHECKPOINT_GAP_PAGES: i32 = 4000;
const CHECKPOINT_BUSY_PAGES: i32 = 20_000;
/// How long the queue must stay empty before the writer counts as idle. Its poll after a
/// request (`WRITER_SPIN`) is far shorter: a client writing in a loop with a little work
/// between writes would otherwise get a checkpoint between two writes, and the second would
/// wait for its syncs (docs/experiments/052-checkpoint-after-a-quiet-writer.md).
const CHECKPOINT_QUIET: std::time::Duration = std::time::Duration::from_millis(5);
/// What the writer copies itself after the checkpoint thread's rounds (see `idle_checkpoint`):
/// at most this many frames, or whatever is left after this many rounds.
const FINISH_PAGES: i32 = 1000;
const FINISH_ROUNDS: u32 = 4;

pub(crate) struct Writer {
    // Declared before `conn`: the checkpoint thread's connection closes first (the last
    // connection to close removes the WAL, and only if it may write).
    checkpointer: crate::checkpointer::Checkpointer,
    // Declared before `conn`: the hooks are unregistered before the connection closes.
    tracker: ChangeTracker,
    conn: ReadConnection,
    sink: Arc<dyn CompletionSink>,
    listener: Arc<dyn ChangeListener>,
    /// The readers' queues, for the messages every reader takes one of (stop, rekey).
    readers: crate::reader_queues::ReaderQueues,
    held_by: Option<TxId>,
    /// A silent BEGIN that failed, and why: its transaction holds the writer all the same,
    /// and its requests fail with that error until its COMMIT or ROLLBACK arrives.
    failed_begin: Option<(TxId, Error)>,
    /// The job just handled posts no completion (a batch abandoned by its sender).
    complete_silently: bool,
    watch: Arc<Watch>,
    deferred: VecDeque<WriterMsg>,
    /// Jobs sent and not yet started, for `diagnostics().queuedWrites`: `Database::write`
    /// counts one up before it sends, the writer counts it down as it starts the job. (The
    /// channel's length plus `deferred.len()` misses a job between the two.)
    waiting: Arc<std::sync::atomic::AtomicUsize>,
    /// Jobs sent and not yet completed: while there are any, the JS thread's wait for a result
    /// begins with a yield (see spin.rs).
    unfinished: Arc<std::sync::atomic::AtomicUsize>,
    schema_version: i64,
    /// The writer's `PRAGMA data_version`: it moves only when another connection commits.
    data_version: Option<i64>,
    /// Checkpoints are left to another process (OpenOptions::external_checkpoints).
    external_checkpoints: bool,
    /// Rounds the checkpoint thread was asked for since the WAL crossed a threshold, while
    /// what they leave is not yet copied (see `idle_checkpoint`); and the frames copied as
    /// of the last round.
    checkpoint_rounds: Option<u32>,
    copied_before: i64,
    /// How the readers open (for a rekey), without the key (`key_slot` has it).
    reopen: (Location, OpenOptions),
    /// Whether the file is encrypted now, and with which cipher.
    encrypted: bool,
    cipher: Cipher,
    /// Open iterators hold readers; a rekey ends them first (a parked reader holds nothing).
    iterators: Arc<crate::iterate::Iterators>,
    /// A rekey could not put the file back in WAL mode (why): tried again before each write.
    not_wal: Option<Error>,
    /// A failed rekey left `conn` unfit to write (`AfterRekey::Unusable`), and a new one
    /// could not be opened (why): tried again before each request, which fails until then.
    unusable: Option<Error>,
    /// The key the file has now: backups read it (see backup.rs), and readers that closed
    /// for a rekey that failed reopen with it.
    key_slot: crate::backup::KeySlot,
}

/// How long the writer polls its queue after a request before it parks, as the readers do
/// (docs/experiments/003-reader-spin.md): the next statement of a transaction body, or the
/// next insert of an awaited loop, then finds it awake (docs/experiments/016-writer-spin.md).
const WRITER_SPIN: std::time::Duration = std::time::Duration::from_micros(30);

impl Writer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mut conn: Connection,
        sink: Arc<dyn CompletionSink>,
        listener: Arc<dyn ChangeListener>,
        tracking: Arc<AtomicBool>,
        readers: crate::reader_queues::ReaderQueues,
        cancellation: Arc<Cancellation>,
        external_checkpoints: bool,
        reopen: (Location, OpenOptions),
        iterators: Arc<crate::iterate::Iterators>,
        key_slot: crate::backup::KeySlot,
    ) -> Result<Self> {
        let (location, mut opts) = reopen;
        let encrypted = opts.encryption.is_some();
        let cipher = opts.encryption.as_ref().map_or(Cipher::ChaCha20, |k| k.cipher);
        opts.encryption = None;
        let watch = Watch::install(&mut conn, cancellation, None)?;
        let tracker = ChangeTracker::install(&conn, tracking);
        let schema_version = conn.query_row("PRAGMA schema_version", [], |r| r.get(0))?;
        // The baseline for noticing other processes' commits: from the start, so a commit
        // right after a live query's first run is not missed.
        let data_version = conn.query_row("PRAGMA data_version", [], |r| r.get(0))?;
        Ok(Writer {
            checkpointer: Default::default(),
            tracker,
            conn: ReadConnection::new(conn, opts.statement_cache),
            sink,
            listener,
            readers,
            held_by: None,
            failed_begin: None,
            complete_silently: false,
            watch,
            deferred: VecDeque::new(),
            waiting: Default::default(),
            unfinished: Default::default(),
            schema_version,
            data_version: Some(data_version),
            external_checkpoints,
            checkpoint_rounds: None,
            copied_before: -1,
            reopen: (location, opts),
            encrypted,
            cipher,
            iterators,
            key_slot,
            not_wal: None,
            unusable: None,
        })
    }

    /// The counts of jobs sent and not yet started (see `waiting`), and not yet completed.
    pub(crate) fn with_gauges(mut self, gauges: crate::database::WriteGauges) -> Self {
        self.waiting = gauges.waiting;
        self.unfinished = gauges.unfinished;
        self
    }

    pub fn run(mut self, queue: Receiver<WriterMsg>) {
        while let Some(msg) = self.next(&queue) {
            match msg {
                WriterMsg::Job(job, ticket) => {
                    self.waiting.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    let id = job.id;
                    let silent_begin = match job.kind {
                        WriteKind::Begin { silent: true, .. } => job.tx,
                        _ => None,
                    };
                    let watch = self.watch.clone();
                    let result = match watch.start(id, ticket) {
                        Start::Skip => {
                            // Cancelled while queued: it completed without running.
                            self.unfinished.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                            continue;
                        }
                        Start::Stopped => self.refuse_for_stop(job),
                        Start::Run(running) => {
                            let result = catch_unwind(AssertUnwindSafe(|| {
                                // Only statements that can call a function need the catalog; a
                                // failure to apply it must never keep a COMMIT or ROLLBACK from
                                // ending its transaction (that would hold the writer forever).
                                if matches!(
                                    job.kind,
                                    WriteKind::Execute { .. } | WriteKind::Read { .. } | WriteKind::Batch { .. }
                                ) {
                                    self.reopen.1.catalog.sync(&self.conn)?;
                                }
                                self.handle(job)
                            }))
                                .unwrap_or_else(|p| Err(Error::Internal(panic_message(p))));
                            crate::error::explain_interrupt(result, running.stopped())
                        }
                    };
                    // The request resolves before any live query can emit its effect.
                    // Counted down first: whoever sees the completion sees the count without it.
                    self.unfinished.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    if let Some(tx) = silent_begin {
                        // Nobody waits for it: a failure is told by the transaction's requests.
                        // The transaction holds the writer all the same, until its COMMIT or
                        // ROLLBACK: its body runs, and to the front end it is the running
                        // transaction (a close waits for it, a forced close ends it, the
                        // next transaction waits its turn).
                        if let Err(e) = result {
                            if self.held_by.is_none() {
                                self.held_by = Some(tx);
                            }
                            self.failed_begin = Some((tx, e));
                        }
                        continue;
                    }
                    if std::mem::take(&mut self.complete_silently) {
                        continue;
                    }
                    self.listener.request_completing();
                    self.sink.complete(Completion { id, result });
                    self.publish_changes();
                }
                WriterMsg::CheckExternalChanges => self.check_external_changes(),
                WriterMsg::Stop(countdown) | WriterMsg::Abandon(countdown) => {
                    self.held_by = None;
                    self.failed_begin = None;
                    let dropped = self.deferred.drain(..).filter(|m| matches!(m, WriterMsg::Job(..))).count();
                    self.waiting.fetch_sub(dropped, std::sync::atomic::Ordering::AcqRel);
                    self.unfinished.fetch_sub(dropped, std::sync::atomic::Ordering::AcqRel);
                    if !self.conn.is_autocommit() {
                        let _ = self.conn.execute_batch("ROLLBACK");
                    }
                    // After the checkpoint it runs: the writer's own then copies the rest.
                    self.checkpointer.stop();
                    if !self.external_checkpoints {
                        let _ = self.conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)");
                    }
                    // The readers close first: SQLite removes the `-wal` and `-shm` files when
                    // the last connection to the file closes, and only if that one may write.
                    // Closed after the readers, the writer is that one (unless another
                    // process has the file open); closed before them, the files stayed.
                    let (closed_tx, readers_closed) = crossbeam_channel::bounded::<()>(1);
                    let each_reader = Countdown::new(self.readers.threads(), move || {
                        let _ = closed_tx.send(());
                    });
                    let not_sent = self.readers.send_to_each(|| ReaderMsg::Stop(each_reader.clone()));
                    // No reader thread is left to take those: nothing to wait for.
                    (0..not_sent).for_each(|_| each_reader.done());
                    drop(each_reader);
                    let _ = readers_closed.recv();
                    drop(self);
                    countdown.finish_now();
                    return;
                }
            }
        }
    }

    /// The next message to run: while a transaction holds the queue, only its own requests;
    /// everything else waits in `deferred`, in arrival order.
    fn next(&mut self, queue: &Receiver<WriterMsg>) -> Option<WriterMsg> {
        if let Some(tx) = self.held_by {
            let mine = |m: &WriterMsg| matches!(m, WriterMsg::Job(j, _) if j.tx == Some(tx));
            if let Some(pos) = self.deferred.iter().position(mine) {
                return self.deferred.remove(pos);
            }
            loop {
                let m = match poll(queue, WRITER_SPIN, true) {
                    Ok(m) => m,
                    Err(TryRecvError::Disconnected) => return None,
                    Err(TryRecvError::Empty) => queue.recv().ok()?,
                };
                if mine(&m) || matches!(m, WriterMsg::Abandon(_)) {
                    return Some(m);
                }
                self.deferred.push_back(m);
            }
        }
        if let Some(m) = self.deferred.pop_front() {
            return Some(m);
        }
        match poll(queue, WRITER_SPIN, true) {
            Ok(m) => Some(m),
            Err(TryRecvError::Disconnected) => None,
            Err(TryRecvError::Empty) => {
                // Writes that never pause for CHECKPOINT_QUIET still get a checkpoint at a gap
                // once the WAL holds CHECKPOINT_GAP_PAGES, before it grows to the busy threshold.
                if self.checkpoint_due(CHECKPOINT_IDLE_PAGES) && !self.checkpoint_due(CHECKPOINT_GAP_PAGES) {
                    match queue.recv_timeout(CHECKPOINT_QUIET) {
                        Ok(m) => return Some(m),
                        Err(RecvTimeoutError::Disconnected) => return None,
                        Err(RecvTimeoutError::Timeout) => {}
                    }
                }
                self.idle_checkpoint(CHECKPOINT_IDLE_PAGES);
                // Rounds of the checkpoint thread go on while the queue stays empty: the writer
                // looks at each as it ends, and finishes the last one while nothing waits.
                while self.checkpoint_rounds.is_some() {
                    match queue.recv_timeout(CHECKPOINT_QUIET) {
                        Ok(m) => return Some(m),
                        Err(RecvTimeoutError::Disconnected) => return None,
                        Err(RecvTimeoutError::Timeout) => self.idle_checkpoint(CHECKPOINT_IDLE_PAGES),
                    }
                }
                queue.recv().ok()
            }
        }
    }

    /// A forced close: nothing more runs. The transaction holding the writer (if any) is
    /// rolled back when its end arrives, so the close queued behind it can proceed.
    fn refuse_for_stop(&mut self, job: WriteJob) -> Result<Output> {
        let ends_holder = matches!(job.kind, WriteKind::Commit | WriteKind::Rollback) && job.tx == self.held_by;
        if ends_holder && self.held_by.is_some() {
            self.held_by = None;
            self.failed_begin = None;
            if !self.conn.is_autocommit() {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
            if matches!(job.kind, WriteKind::Rollback) {
                return Ok(Output::Done);
            }
        }
        Err(crate::error::closed_by_force())
    }

    /// Whether a checkpoint is this writer's to run now: a WAL (the main database's or an
    /// attached one's) holds `threshold` pages or more, no transaction is open, and
    /// checkpoints are not left to another process.
    fn checkpoint_due(&self, threshold: i32) -> bool {
        let pages = self.tracker.wal_pages().max(self.tracker.attached_wal_pages());
        !self.external_checkpoints && pages >= threshold && self.conn.is_autocommit()
    }

    /// At a gap between requests: the checkpoint thread copies the WAL while the writer goes
    /// on (see checkpointer.rs). What was committed during a round is the next round's, until
    /// what is left is at most FINISH_PAGES, or after FINISH_ROUNDS rounds: the writer copies
    /// that itself, at a gap or while idle (see `next`), so that the WAL starts over at the
    /// next write. Left to the thread alone, a checkpoint would never find a WAL with no
    /// commit since its start under steady writes, and the WAL would grow to
    /// CHECKPOINT_BUSY_PAGES (docs/experiments/091-checkpoints-off-the-writer.md). The writer
    /// runs the whole checkpoint itself only when the thread cannot.
    fn idle_checkpoint(&mut self, threshold: i32) {
        if let Some(rounds) = self.checkpoint_rounds {
            if self.checkpointer.busy() || !self.conn.is_autocommit() {
                return;
            }
            let Some((log, copied)) = self.checkpointer.outcome() else {
                // The round failed (its connection did not open, an I/O error): the writer
                // checkpoints, as it would without the thread.
                self.checkpoint_rounds = None;
                self.checkpoint_here();
                return;
            };
            // The WAL holds what the round saw, or more if a commit came since (its hook
            // counts again from the hand-off); less only after it started over.
            let left = i64::from(self.tracker.wal_pages()).max(log) - copied;
            let progressed = copied > self.copied_before;
            self.copied_before = copied;
            if left <= 0 || !progressed {
                // Copied whole, or held back by a reader's snapshot: nothing to finish now,
                // unless an attached database's WAL grew meanwhile (only the writer copies it).
                self.checkpoint_rounds = None;
                if self.tracker.attached_wal_pages() >= FINISH_PAGES {
                    self.checkpoint_here();
                }
            } else if left <= i64::from(FINISH_PAGES) || rounds >= FINISH_ROUNDS {
                self.checkpoint_rounds = None;
                self.checkpoint_here();
            } else if self.hand_off_checkpoint() {
                self.checkpoint_rounds = Some(rounds + 1);
            } else {
                self.checkpoint_rounds = None;
                self.checkpoint_here();
            }
            return;
        }
        if !self.checkpoint_due(threshold) {
            return;
        }
        // The thread's connection has only the main database: an attached database's WAL is
        // copied here, as before (with the main one's).
        if self.tracker.attached_wal_pages() >= threshold {
            self.checkpoint_here();
            return;
        }
        if self.hand_off_checkpoint() {
            self.copied_before = -1;
            self.checkpoint_rounds = Some(1);
        } else {
            self.checkpoint_here();
        }
    }

    /// Asks the checkpoint thread for a round; false when it cannot run one.
    fn hand_off_checkpoint(&mut self) -> bool {
        // Cloned only when the thread is to start (at the first round, and after a rekey).
        let (reopen, key_slot) = (&self.reopen, &self.key_slot);
        let handed_off = self.checkpointer.request(|| {
            let ((loc, mut opts), key_slot) = (reopen.clone(), key_slot.clone());
            Box::new(move || {
                // The key the file has when the thread opens (a rekey stops the thread first).
                opts.encryption = crate::backup::current_key(&key_slot);
                crate::connection::open_checkpointer(&loc, &opts)
            })
        });
        if handed_off {
            // From here the WAL hook counts the WAL's frames at the next commit.
            self.tracker.reset_main_wal_pages();
        }
        handed_off
    }

    /// On the writer, waiting for it: the bound on the WAL of a writer that is never idle.
    fn busy_checkpoint(&mut self) {
        if self.checkpoint_due(CHECKPOINT_BUSY_PAGES) {
            self.checkpoint_here();
        }
    }

    /// A PASSIVE checkpoint of every database of the writer's connection. It never waits
    /// for readers: what it cannot copy now it copies next time. When another connection
    /// holds the checkpoint lock (the thread's round, another process), it copies nothing
    /// and answers busy: the counts stay, so a gap tries again while they are over a
    /// threshold.
    fn checkpoint_here(&mut self) {
        let busy = self.conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(0));
        if busy == Ok(0) {
            self.tracker.reset_wal_pages();
        }
    }

    fn handle(&mut self, job: WriteJob) -> Result<Output> {
        if let Some(e) = &self.unusable {
            let e = e.clone();
            match self.replace_connection() {
                Ok(()) => self.unusable = None,
                Err(_) => return Err(e),
            }
        }
        if self.not_wal.is_some() && self.held_by.is_none() && self.conn.is_autocommit() {
            self.retry_wal();
        }
        if let Some((failed, err)) = &self.failed_begin {
            if job.tx == Some(*failed) {
                let err = err.clone();
                if matches!(job.kind, WriteKind::Commit | WriteKind::Rollback) {
                    self.failed_begin = None;
                    self.held_by = None;
                }
                return match job.kind {
                    WriteKind::Rollback => Ok(Output::Done),
                    _ => Err(err),
                };
            }
        }
        match (&job.kind, job.tx, self.held_by) {
            (WriteKind::Begin { .. }, Some(_), None) => {}
            (WriteKind::Begin { .. }, _, _) => {
                return Err(Error::Internal("BEGIN while a transaction holds the writer".into()))
            }
            (_, Some(t), held) if held != Some(t) => {
                return Err(Error::TransactionEnded(
                    "this transaction has already ended; use the database instead".into(),
                ))
            }
            (WriteKind::Rollback, Some(_), Some(_)) => {}
            (_, Some(_), Some(_)) if self.conn.is_autocommit() => {
                // SQLite ended the transaction itself (a write in it was interrupted, ON
                // CONFLICT ROLLBACK, RAISE(ROLLBACK), some I/O errors): what it wrote is gone,
                // and anything run now would commit on its own. Refuse until it is ended.
                if matches!(job.kind, WriteKind::Commit) {
                    self.held_by = None;
                }
                return Err(Error::Sqlite {
                    code: rusqlite::ffi::SQLITE_ABORT_ROLLBACK,
                    message: "the transaction was rolled back by SQLite after an earlier error \
                              (an interrupted write, ON CONFLICT ROLLBACK, ...); nothing of it was committed"
                        .into(),
                    sql: None,
                });
            }
            (WriteKind::Savepoint { .. } | WriteKind::Release { .. } | WriteKind::RollbackTo { .. }, None, _) => {
                return Err(Error::Internal("a savepoint outside a transaction".into()))
            }
            _ => {}
        }
        let in_tx = self.held_by.is_some();
        let out = match job.kind {
            WriteKind::Execute { sql, params } => {
                // SQLite keeps the last inserted rowid per connection: a statement that
                // inserted nothing itself reports 0, not another request's insert (or one
                // that intMode 'number' cannot give, failing every later statement). The
                // connection's value stays as it is for SQL's last_insert_rowid(). The rowid
                // is the statement's own when it changed, or when the statement itself (not
                // a trigger) inserted that very rowid again (delete and insert, REPLACE).
                // Inserts into a WITHOUT ROWID table or a virtual table's shadow tables call
                // the hook but leave the value alone: they count only by that rowid.
                let rowid = self.conn.last_insert_rowid();
                self.tracker.watch_rowid(rowid);
                let out = query::execute(&self.conn, &sql, &params).map(|mut e| {
                    let own = e.last_insert_rowid != rowid || self.tracker.watched_rowid_inserted();
                    if !own {
                        e.last_insert_rowid = 0;
                    }
                    Output::Exec(e)
                });
                if !in_tx && !self.conn.is_autocommit() {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    return Err(Error::Range(
                        "execute() may not leave a transaction open; use db.transaction()".into(),
                    ));
                }
                out
            }
            WriteKind::Read { sql, params, format } => {
                query::read_on_writer(&self.conn, &sql, &params, format).map(Output::Read)
            }
            WriteKind::Batch { sql, sets, later } => {
                let out = query::execute_batch(&self.conn, &sql, &sets, later.as_ref());
                // Its caller already has its answer, or is gone (see LaterParts::abandoned).
                self.complete_silently = later.is_some_and(|l| l.abandoned());
                out.map(|changes| Output::Batch { changes })
            }
            WriteKind::Begin { mode, .. } => {
                let sql = match mode {
                    TxMode::Deferred => "BEGIN DEFERRED",
                    TxMode::Immediate => "BEGIN IMMEDIATE",
                    TxMode::Exclusive => "BEGIN EXCLUSIVE",
                };
                self.conn.execute_batch(sql)?;
                self.held_by = job.tx;
                Ok(Output::Done)
            }
            WriteKind::Commit => {
                self.held_by = None;
                if self.conn.is_autocommit() {
                    return Ok(Output::Done);
                }
                match self.conn.execute_batch("COMMIT") {
                    Ok(()) => Ok(Output::Done),
                    Err(e) => {
                        // A failed COMMIT (deferred constraint) leaves the transaction open:
                        // roll it back so the next transaction starts clean.
                        if !self.conn.is_autocommit() {
                            let _ = self.conn.execute_batch("ROLLBACK");
                        }
                        Err(e.into())
                    }
                }
            }
            WriteKind::Rollback => {
                self.held_by = None;
                if !self.conn.is_autocommit() {
                    self.conn.execute_batch("ROLLBACK")?;
                }
                Ok(Output::Done)
            }
            WriteKind::Savepoint { depth } => {
                self.conn.execute_batch(&format!("SAVEPOINT quietsqlite_sp_{depth}"))?;
                Ok(Output::Done)
            }
            WriteKind::Release { depth } => {
                self.conn.execute_batch(&format!("RELEASE quietsqlite_sp_{depth}"))?;
                Ok(Output::Done)
            }
            WriteKind::Rekey { key } => self.rekey(key).map(|()| Output::Done),
            WriteKind::LoadExtension { extension } => {
                self.reopen.1.catalog.load_extension(&self.conn, extension).map(|()| Output::Done)
            }
            WriteKind::RollbackTo { depth, keep } => {
                self.conn.execute_batch(&format!("ROLLBACK TO quietsqlite_sp_{depth}"))?;
                if !keep {
                    self.conn.execute_batch(&format!("RELEASE quietsqlite_sp_{depth}"))?;
                }
                Ok(Output::Done)
            }
        };
        if self.held_by.is_none() {
            self.busy_checkpoint();
        }
        out
    }

    /// The rekey itself, with every reader parked (and closed when the file is rewritten).
    fn rekey_alone(&mut self, key: Option<&Key>) -> Result<()> {
        use crate::connection::AfterRekey;
        // A file an earlier rekey left out of WAL mode goes back first: leaving rollback-
        // journal mode proves no other connection has the file open (leaving it for DELETE
        // proves nothing then).
        if self.not_wal.is_some() {
            if crate::connection::back_to_wal(&self.conn).is_err() {
                return Err(crate::connection::not_alone());
            }
            self.not_wal = None;
        }
        // Never interrupted, not even by a forced close (see `Watch::shielded`).
        let watch = self.watch.clone();
        let (outcome, after) = watch.shielded(|| crate::connection::rekey(&self.conn, key, self.encrypted));
        match after {
            AfterRekey::Wal => {}
            // Tried again before the next write.
            AfterRekey::NotWal(e) => self.not_wal = Some(e),
            AfterRekey::Unusable => {
                if let Err(e) = self.replace_connection() {
                    let (code, message) = e.code_and_message(rusqlite::ffi::SQLITE_CANTOPEN);
                    self.unusable = Some(Error::sqlite(
                        code,
                        format!("the writer could not reopen after a failed rekey() (the file keeps its key): {message}"),
                    ));
                }
            }
        }
        outcome
    }

    /// Replaces the writer's connection with a new one, opened with the key the file has
    /// (`AfterRekey::Unusable`). Only while no transaction runs and the readers are closed or
    /// idle. The old connection closes first (it writes nothing as it closes: out of WAL mode,
    /// no transaction), so that any lock it still holds is gone; a private in-memory one stands
    /// in until the new one opens (`unusable` keeps every request off it meanwhile).
    fn replace_connection(&mut self) -> Result<()> {
        let statement_cache = self.reopen.1.statement_cache;
        let stand_in = Connection::open_in_memory()?;
        self.swap_connection(stand_in, statement_cache);
        let (loc, mut opts) = self.reopen.clone();
        opts.encryption = self.key_slot.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut conn = crate::connection::open_writer(&loc, &opts)?;
        self.watch.attach(&mut conn)?;
        self.schema_version = conn.query_row("PRAGMA schema_version", [], |r| r.get(0))?;
        self.data_version = Some(conn.query_row("PRAGMA data_version", [], |r| r.get(0))?);
        self.swap_connection(conn, statement_cache);
        self.not_wal = None;
        Ok(())
    }

    /// Puts `conn` in place of the writer's connection, with a change tracker of its own (the
    /// old tracker's hooks go before its connection closes).
    fn swap_connection(&mut self, conn: Connection, statement_cache: usize) {
        let tracker = ChangeTracker::install(&conn, self.tracker.tracking());
        drop(std::mem::replace(&mut self.tracker, tracker));
        drop(std::mem::replace(&mut self.conn, ReadConnection::new(conn, statement_cache)));
    }

    /// Switches the file back to WAL mode after a rekey could not, without waiting for locks:
    /// a write must not wait `busyTimeout` for each try.
    fn retry_wal(&mut self) {
        use std::time::Duration;
        // sqlite3_busy_timeout only returns SQLITE_OK: nothing to handle.
        let _ = self.conn.busy_timeout(Duration::ZERO);
        if crate::connection::back_to_wal(&self.conn).is_ok() {
            self.not_wal = None;
        }
        let _ = self.conn.busy_timeout(Duration::from_millis(u64::from(self.reopen.1.busy_timeout_ms)));
    }

    /// Parks every reader (each finishes what it runs; none holds a read), closing its
    /// connection when the file is to be rewritten, changes the key, then has each reader
    /// reopen with the key the file has: the new one, or on failure the old one.
    fn rekey(&mut self, key: Option<Arc<Key>>) -> Result<()> {
        if self.held_by.is_some() || !self.conn.is_autocommit() {
            return Err(Error::Internal("rekey inside a transaction".into()));
        }
        if let Some(k) = &key {
            if k.cipher != self.cipher && self.encrypted {
                return Err(Error::Internal("rekey with another cipher than the database's".into()));
            }
        }
        // A rekey that rewrites the file leaves WAL mode for a moment, which only a connection
        // alone with the file can do: the readers close first (connection::rekey), and the
        // checkpoint thread (a later checkpoint starts it again, with the key the file has).
        // The old handle stops its thread as it drops; a new one forgets that a thread could
        // not open, and tries again. A rekey that rewrites the file leaves the WAL empty, and
        // one that fails leaves it to the next commit's count.
        self.checkpointer = Default::default();
        self.checkpoint_rounds = None;
        self.tracker.reset_wal_pages();
        let rewrites = key.is_some() || self.encrypted;
        let gate = Arc::new(RekeyGate::new(rewrites));
        // A reader held by an iterator would never take its gate message: the iterators end
        // (their read transactions could not survive the reopen anyway).
        let pausing = self.iterators.pausing();
        self.iterators.end_all(Error::Sqlite {
            code: rusqlite::ffi::SQLITE_ABORT,
            message: "rekey() ended this iterator: the readers reopen with the new key".into(),
            sql: None,
        });
        if self.readers.send_to_each(|| ReaderMsg::Rekey(gate.clone())) > 0 {
            return Err(crate::error::closed_by_force());
        }
        drop(pausing);
        gate.wait_parked(self.readers.threads());
        let outcome = match gate.take_failure() {
            // A reader could not step aside: the file is left as it is.
            Some(e) => Err(e),
            None => self.rekey_alone(key.as_deref()),
        };
        let reopen = match (&outcome, rewrites) {
            (Ok(()), _) => {
                let (loc, mut opts) = self.reopen.clone();
                opts.encryption = key.clone();
                Some((loc, opts))
            }
            // Closed readers reopen as before, with the key the file still has.
            (Err(_), true) => {
                let (loc, mut opts) = self.reopen.clone();
                opts.encryption = self.key_slot.lock().unwrap_or_else(|p| p.into_inner()).clone();
                Some((loc, opts))
            }
            (Err(_), false) => None,
        };
        // Backups read the slot when they run, on a reader: set it before the readers go on.
        if outcome.is_ok() {
            *self.key_slot.lock().unwrap_or_else(|p| p.into_inner()) = key.clone();
        }
        let reader_failure = gate.release(reopen, self.readers.threads());
        outcome?;
        self.encrypted = key.is_some();
        if let Some(k) = &key {
            self.cipher = k.cipher;
        }
        // The file has the new key whatever a reader or the journal mode says: a caller who
        // took this failure for "nothing changed" would keep the old key and lock itself out.
        match (reader_failure, &self.not_wal) {
            (Some(e), _) if rewrites => {
                let (code, message) = e.code_and_message(rusqlite::ffi::SQLITE_CANTOPEN);
                Err(Error::sqlite(code, format!("{REKEY_DONE}, {REKEY_DONE_READER_FAILED}: {message}")))
            }
            (Some(e), _) => Err(e),
            (None, Some(e)) => {
                let (code, message) = e.code_and_message(rusqlite::ffi::SQLITE_BUSY);
                Err(Error::sqlite(code, format!("{REKEY_DONE}, {REKEY_DONE_NOT_WAL}: {message}")))
            }
            (None, None) => Ok(()),
        }
    }

    fn check_external_changes(&mut self) {
        let version = self
            .conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)));
        let Ok(version) = version else { return };
        let before = self.data_version.replace(version);
        if before.is_some_and(|b| b != version) {
            // Another process may have changed the schema too.
            self.conn.flush_prepared_statement_cache();
            if let Ok(v) = self.conn.query_row("PRAGMA schema_version", [], |r| r.get(0)) {
                self.schema_version = v;
            }
            self.listener.external_change();
        }
    }

    fn publish_changes(&mut self) {
        let committed = self.tracker.take_committed();
        // A VACUUM commits without the commit hook, and may give rows new rowids. One that
        // rewrote the file changed the schema's version, and is published as a schema change
        // (every live query re-runs); `VACUUM INTO` and a VACUUM that failed did not.
        let vacuumed = crate::statement_rules::take_vacuum_ran();
        if committed.is_none() && !vacuumed {
            return;
        }
        let version: i64 = self
            .conn
            .prepare_cached("PRAGMA schema_version")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .unwrap_or(self.schema_version);
        let schema_changed = version != self.schema_version;
        let Some(changes) = committed.or_else(|| schema_changed.then(Default::default)) else { return };
        self.schema_version = version;
        if schema_changed {
            // Statements prepared against the old schema re-prepare themselves; rusqlite's
            // cache is flushed so column lists are read afresh. The raw caches of reads and of
            // `execute` (`ReadConnection`) are kept: both take column names after their first
            // step.
            self.conn.flush_prepared_statement_cache();
        }
        self.listener.committed(changes, schema_changed);
    }
}

