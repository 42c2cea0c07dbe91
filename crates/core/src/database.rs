//! A database: one writer thread, N reader threads, and the queues in front of them.
//! Everything here returns at once; outcomes arrive through the `CompletionSink`.

use crate::cancel::{CancelOutcome, Cancellation, Watch};
use crate::completion::{Completion, CompletionSink, Countdown, Output, RequestId};
use crate::connection::{open_reader, open_writer, Location, OpenOptions};
use crate::error::{Error, Result};
use crate::live::LiveQueries;
use crate::reader::{self, ReadJob, ReaderMsg, SendClock};
use crate::reader_queues::{ReaderQueues, ReaderReceivers};
use crate::value::Params;
use std::time::Duration;
use crate::batch_parts::OpenBatch;
use crate::query::BatchSets;
use crate::writer::{ChangeListener, TxId, WriteJob, WriteKind, Writer, WriterMsg};
use crossbeam_channel::{unbounded, Receiver, Sender};
use rusqlite::Connection;
use crate::iterate::{IterateJob, Iterators};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub struct Database {
    readers: ReaderQueues,
    /// The writer thread's queue; on a read-only database that thread only handles close.
    writer: Sender<WriterMsg>,
    readonly: bool,
    closed: AtomicBool,
    /// The close requests made: every one completes, the ones after the first with it.
    closes: Arc<Mutex<Closes>>,
    sink: Arc<dyn CompletionSink>,
    live: LiveQueries,
    location: Location,
    abandoner: Abandoner,
    cancellation: Arc<Cancellation>,
    iterators: Arc<Iterators>,
    /// Stamps reads as they are sent (see `reader::SendClock`).
    send_clock: Arc<SendClock>,
    /// Writes sent and not yet started (diagnostics), and sent and not yet completed.
    writes: WriteGauges,
    /// The key the file is encrypted with now (for backups; see backup.rs).
    key: crate::backup::KeySlot,
    catalog: Arc<crate::functions::Catalog>,
    /// How inline readers open (the readers' options without the key), and their counts.
    inline_opts: OpenOptions,
    inline_counts: Arc<crate::inline::InlineCounts>,
}

/// Ends a database whose owner is gone without `close()` (a terminated Worker's env
/// teardown, or the front end's object collected). Cloneable so a front end can keep one
/// where it learns of the teardown; only the first call acts.
#[derive(Clone)]
pub struct Abandoner {
    writer: Sender<WriterMsg>,
    done: Arc<AtomicBool>,
    /// Reader threads, the spare included.
    reader_threads: usize,
    location: Location,
    live: LiveQueries,
    cancellation: Arc<Cancellation>,
    iterators: Arc<Iterators>,
    open_batch: OpenBatch,
}

impl Abandoner {
    /// Rolls back a transaction holding the writer (nobody can end it any more), stops the
    /// threads and closes every connection. Returns at once.
    pub fn abandon(&self) {
        if self.done.swap(true, Ordering::AcqRel) {
            return;
        }
        self.live.stop();
        // A batch whose parts were still being sent must not keep the writer waiting for more.
        self.open_batch.end(false);
        // A reader held by an iterator must come back to its queue to stop.
        self.iterators.end_all(Error::Closed("the database was closed while this iterator was open".into()));
        // A statement that would never end (a runaway query) must not keep the threads.
        self.cancellation.stop_all();
        let location = self.location.clone();
        let countdown = Countdown::new(1 + self.reader_threads, move || location.remove_temporary());
        if let Err(crossbeam_channel::SendError(WriterMsg::Abandon(c))) = self.writer.send(WriterMsg::Abandon(countdown)) {
            c.finish_now();
        }
    }
}

impl Database {
    /// Starts the threads. Connections open on the writer thread (the writer first: it
    /// creates the file and switches it to WAL), never on the caller's; `open_id`
    /// completes when every connection is open, or with the first error.
    pub fn open(opts: OpenOptions, sink: Arc<dyn CompletionSink>, open_id: RequestId) -> Result<Database> {
        Database::open_with(opts, None, sink, open_id)
    }

    /// Opens a copy of a serialized database (`serialize()`'s bytes): they are written to a
    /// private file, as `:memory:` uses, on the writer thread before any connection opens,
    /// and the file is deleted when the database closes. `opts.path` is not used.
    pub fn deserialize(bytes: Vec<u8>, opts: OpenOptions, sink: Arc<dyn CompletionSink>, open_id: RequestId) -> Result<Database> {
        crate::backup::check_serialized(&bytes)?;
        Database::open_with(OpenOptions { path: ":memory:".into(), ..opts }, Some(bytes), sink, open_id)
    }

    fn open_with(opts: OpenOptions, bytes: Option<Vec<u8>>, sink: Arc<dyn CompletionSink>, open_id: RequestId) -> Result<Database> {
        if opts.readers == 0 {
            return Err(Error::Range("readers must be at least 1".into()));
        }
        let (writer_tx, writer_rx) = unbounded::<WriterMsg>();
        let readonly = opts.readonly;
        let tracking = Arc::new(AtomicBool::new(false));
        let cancellation = Arc::new(Cancellation::default());
        let thread_cancellation = cancellation.clone();
        let iterators = Arc::new(Iterators::default());
        let thread_iterators = iterators.clone();
        let (reader_tx, reader_rx) = ReaderQueues::new(opts.readers);
        let send_clock = Arc::new(SendClock::default());
        let thread_clock = send_clock.clone();
        let writes = WriteGauges::default();
        let thread_writes = writes.clone();
        let catalog = opts.catalog.clone();
        let inline_opts = OpenOptions { encryption: None, ..opts.clone() };
        // Refused before anything is created (`:memory:`'s private file is made by `resolve`).
        for (name, value) in &opts.pragmas {
            crate::connection::check_pragma(name, value)?;
        }
        let location = Location::resolve(&opts.path)?;
        location.check_shareable()?;
        location.check_file_kind()?;
        let key: crate::backup::KeySlot = Arc::new(std::sync::Mutex::new(opts.encryption.clone()));
        let thread_key = key.clone();
        let poll_target = match (&location.temporary, readonly) {
            (None, true) => Some((location.clone(), opts.clone())),
            _ => None,
        };
        let live = LiveQueries::new(
            sink.clone(),
            reader_tx.clone(),
            tracking.clone(),
            (!readonly).then(|| writer_tx.clone()),
            poll_target,
        );
        let listener: Arc<dyn ChangeListener> = Arc::new(live.clone());
        let thread_sink = sink.clone();
        let thread_location = location.clone();
        let thread_live = live.clone();
        let thread_readers = reader_tx.clone();
        std::thread::Builder::new()
            .name("quietsqlite-writer".into())
            .spawn(move || {
                let loc = thread_location;
                let mut opts = opts;
                if let Some(bytes) = bytes {
                    if let Err(e) = crate::backup::fill(&loc, &bytes) {
                        loc.remove_temporary();
                        thread_sink.complete(Completion { id: open_id, result: Err(e) });
                        return;
                    }
                }
                let started = start(&loc, &opts, &thread_readers, reader_rx, thread_sink.clone(), &thread_cancellation, &thread_clock);
                // Every reader thread runs (a failed start may have spawned some of them).
                let readers_run = started.is_ok();
                let writer = match started {
                    Ok(None) => {
                        thread_sink.complete(Completion { id: open_id, result: Ok(Output::Done) });
                        return run_readonly_control(writer_rx, thread_readers);
                    }
                    Ok(Some(conn)) => {
                        let reopen = (loc.clone(), opts.clone());
                        // Every connection is open: the options keep no key (the writer
                        // finds it in the key slot).
                        opts.encryption = None;
                        Writer::new(
                            conn,
                            thread_sink.clone(),
                            listener,
                            tracking,
                            thread_readers.clone(),
                            thread_cancellation,
                            opts.external_checkpoints,
                            reopen,
                            thread_iterators,
                            thread_key,
                        )
                        .map(|w| w.with_gauges(thread_writes))
                    }
                    Err(e) => Err(e),
                };
                match writer {
                    Ok(w) => {
                        thread_sink.complete(Completion { id: open_id, result: Ok(Output::Done) });
                        w.run(writer_rx);
                    }
                    Err(e) => {
                        thread_live.stop();
                        // Reader threads that started wait for work until told to stop: their
                        // queue is also held by the database object, which the front end keeps
                        // until it is collected. They stop now, and when all of them run, the
                        // open fails once they have closed their connections (a failed open
                        // leaves no thread and no descriptor behind).
                        let (closed_tx, closed) = crossbeam_channel::bounded::<()>(1);
                        let each = Countdown::new(thread_readers.threads(), move || {
                            let _ = closed_tx.send(());
                        });
                        let not_sent = thread_readers.send_to_each(|| ReaderMsg::Stop(each.clone()));
                        (0..not_sent).for_each(|_| each.done());
                        drop(each);
                        if readers_run {
                            let _ = closed.recv();
                        }
                        loc.remove_temporary();
                        thread_sink.complete(Completion { id: open_id, result: Err(e) });
                    }
                }
            })
            .map_err(|e| Error::Internal(format!("could not start the writer thread: {e}")))?;
        let reader_threads = reader_tx.threads();
        let abandoner = Abandoner {
            writer: writer_tx.clone(),
            done: Arc::new(AtomicBool::new(false)),
            reader_threads,
            location: location.clone(),
            live: live.clone(),
            cancellation: cancellation.clone(),
            iterators: iterators.clone(),
            open_batch: OpenBatch::default(),
        };
        Ok(Database {
            readers: reader_tx,
            writer: writer_tx,
            readonly,
            closed: AtomicBool::new(false),
            closes: Arc::default(),
            sink,
            live,
            location,
            abandoner,
            cancellation,
            iterators,
            send_clock,
            writes,
            key,
            catalog,
            inline_opts,
            inline_counts: Arc::default(),
        })
    }

    /// A connection for bounded inline reads on the caller's thread (see `inline`), opened
    /// at its first read with the key the file has then. `budget` is clamped to
    /// `inline::MAX_BUDGET_US`.
    pub fn inline_reader(&self, budget: Duration) -> crate::inline::InlineReader {
        let budget = budget.min(Duration::from_micros(crate::inline::MAX_BUDGET_US.into()));
        crate::inline::InlineReader::new(
            self.location.clone(),
            self.inline_opts.clone(),
            self.key.clone(),
            budget,
            self.inline_counts.clone(),
        )
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            Err(Error::Closed("the database is closed".into()))
        } else {
            Ok(())
        }
    }

    /// Queues a read on the reader threads.
    pub fn read(&self, job: ReadJob) -> Result<()> {
        self.check_open()?;
        let ticket = job.cancellable.then(|| self.cancellation.register(job.id));
        let id = job.id;
        let stamp = self.send_clock.stamp();
        self.readers.send_read(ReaderMsg::Read(job, ticket, stamp)).map_err(|e| {
            if let ReaderMsg::Read(_, Some(t), _) = e.0 {
                self.cancellation.unregister(id, &t);
            }
            closed_by_failure()
        })
    }

    /// Queues a batch (`tx`: its transaction, if any) whose parts after `first` follow with
    /// `batch_part` and `end_batch` (see batch_parts.rs).
    pub fn write_batch_in_parts(&self, id: RequestId, tx: Option<TxId>, sql: String, first: BatchSets, cancellable: bool) -> Result<()> {
        let later = Some(self.abandoner.open_batch.open()?);
        let job = WriteJob { id, tx, kind: WriteKind::Batch { sql, sets: first, later }, cancellable };
        self.write(job).inspect_err(|_| self.abandoner.open_batch.end(false))
    }

    /// The next part of the batch sent with `write_batch_in_parts`.
    pub fn batch_part(&self, sets: BatchSets) -> Result<()> {
        self.abandoner.open_batch.send(sets)
    }

    /// Ends the batch sent with `write_batch_in_parts`: `complete`, every part was sent and it
    /// may commit; otherwise it rolls back, and completes with nothing (its caller has its answer).
    pub fn end_batch(&self, complete: bool) {
        self.abandoner.open_batch.end(complete);
    }

    /// Queues a request on the writer. While closing, requests of a transaction that is
    /// running or was queued before close() still pass: close() waits for them.
    pub fn write(&self, job: WriteJob) -> Result<()> {
        if job.tx.is_none() || matches!(job.kind, WriteKind::Begin { .. }) {
            self.check_open()?;
        }
        if self.readonly {
            let sql = match &job.kind {
                WriteKind::Execute { sql, .. } | WriteKind::Read { sql, .. } => Some(sql.to_string()),
                WriteKind::Batch { sql, .. } => Some(sql.clone()),
                _ => None,
            };
            return Err(Error::Sqlite {
                code: rusqlite::ffi::SQLITE_READONLY,
                message: "the database was opened read-only".into(),
                sql,
            });
        }
        let ticket = job.cancellable.then(|| self.cancellation.register(job.id));
        let id = job.id;
        // Counted before it can be seen by the writer, which counts it down as it starts it.
        self.writes.waiting.fetch_add(1, Ordering::AcqRel);
        self.writes.unfinished.fetch_add(1, Ordering::AcqRel);
        self.writer.send(WriterMsg::Job(job, ticket)).map_err(|e| {
            self.writes.waiting.fetch_sub(1, Ordering::AcqRel);
            self.writes.unfinished.fetch_sub(1, Ordering::AcqRel);
            if let WriterMsg::Job(_, Some(t)) = e.0 {
                self.cancellation.unregister(id, &t);
            }
            closed_by_failure()
        })
    }

    /// Cancels a request sent as cancellable: a queued one never runs (and completes with
    /// nothing); a running one is interrupted and completes with SQLITE_INTERRUPT, unless it
    /// finished first.
    pub fn cancel(&self, id: RequestId) -> CancelOutcome {
        self.cancellation.cancel(id)
    }

    /// Opens an iterator: a reader steps its first chunk, then one more each time
    /// `iterate_next` asks; chunks arrive as `Output::Chunk` completions with the job's id.
    /// Refused (RangeError) when it would leave no reader free for other reads.
    pub fn iterate(&self, job: IterateJob) -> Result<()> {
        self.check_open()?;
        let id = job.id;
        let _submitting = self.iterators.submitting();
        let queued = crate::iterate::queue(job, &self.iterators, self.readers.shared_readers(), &self.cancellation)?;
        let ticket = queued.ticket.clone();
        self.readers.send(ReaderMsg::Iterate(Box::new(queued))).map_err(|_| {
            self.iterators.end(id);
            self.cancellation.unregister(id, &ticket);
            closed_by_failure()
        })
    }

    /// Copies the main database (a snapshot) on a reader thread: to a file, or to bytes.
    /// Progress reports arrive with `job.progress_id`, the outcome with `job.id`.
    pub fn backup(&self, job: crate::backup::BackupJob) -> Result<()> {
        self.check_open()?;
        let ticket = job.cancellable.then(|| self.cancellation.register(job.id));
        let id = job.id;
        let stops = crate::backup::Stops { ticket: ticket.clone(), cancellation: self.cancellation.clone() };
        let slot = self.key.clone();
        let sink = self.sink.clone();
        // The key is read when the backup runs, not when it is asked for: a rekey() between
        // the two has changed the file (readers reopen before they take later tasks).
        let task: reader::ReaderTask =
            Box::new(move |conn| crate::backup::run(conn, job, crate::backup::current_key(&slot), stops, &*sink));
        self.readers.send(ReaderMsg::Task(task, None)).map_err(|_| {
            if let Some(t) = &ticket {
                self.cancellation.unregister(id, t);
            }
            closed_by_failure()
        })
    }

    /// The front end started handing out the last chunk: step the next one.
    pub fn iterate_next(&self, id: RequestId) {
        self.iterators.next(id);
    }

    /// Ends an iterator early (break, return(), abort, collected): a chunk being stepped is
    /// interrupted, the statement and its read transaction end, the reader is free again.
    pub fn iterate_end(&self, id: RequestId) {
        self.iterators.end(id);
    }

    /// Rows stepped so far by open iterator `id` (tests: the backpressure is observable).
    pub fn iterate_stepped(&self, id: RequestId) -> Option<u64> {
        self.iterators.stepped(id)
    }

    /// Completes `id` with `Output::Diagnostics`: the counts as they are now, and the file's
    /// numbers measured by a reader (queued like a read; never waits for the writer).
    pub fn diagnostics(&self, id: RequestId) -> Result<()> {
        self.check_open()?;
        let (groups, subscribers, reruns, skipped) = self.live.counts();
        let base = crate::diagnostics::Diagnostics {
            readers: self.readers.shared_readers() as u32,
            readers_busy: self.readers.busy() as u32,
            queued_reads: self.readers.len() as u32,
            // Waiting in the channel, or set aside by the writer behind a transaction.
            queued_writes: self.writes.waiting.load(Ordering::Acquire) as u32,
            live_groups: groups as u32,
            live_subscribers: subscribers as u32,
            live_reruns: reruns,
            live_skipped_by_hash: skipped,
            inline_reads: self.inline_counts.reads.load(Ordering::Relaxed),
            inline_fallbacks: self.inline_counts.fallbacks.load(Ordering::Relaxed),
            ..Default::default()
        };
        let sink = self.sink.clone();
        let task: reader::ReaderTask = Box::new(move |conn| {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                conn.check_usable()?;
                crate::diagnostics::measure(conn, base)
            }))
                .unwrap_or_else(|p| Err(Error::Internal(crate::completion::panic_message(p))));
            sink.complete(Completion { id, result: result.map(|d| Output::Diagnostics(Box::new(d))) });
        });
        // Short, like a point read: the spare may take it (see reader_queues.rs).
        self.readers.send_read(ReaderMsg::Task(task, None)).map_err(|_| closed_by_failure())
    }

    /// Subscribes to a live query; emissions and errors arrive with `id`.
    pub fn subscribe(&self, id: RequestId, sql: String, params: Params, max_delay: Duration) -> Result<()> {
        self.check_open()?;
        self.live.subscribe(id, sql, params, max_delay);
        Ok(())
    }

    /// The front end consumed an emission of subscription `id`.
    pub fn acknowledge(&self, id: RequestId) {
        self.live.acknowledge(id);
    }

    pub fn unsubscribe(&self, id: RequestId) {
        self.live.unsubscribe(id);
    }

    pub fn live(&self) -> &LiveQueries {
        &self.live
    }

    /// Test hook: how many readers (the spare not counted) are in a long job now.
    pub fn long_readers_for_tests(&self) -> usize {
        self.readers.long_shared_readers()
    }

    /// Test hook: a reader panics while serving request `id`.
    pub fn panic_for_tests(&self, id: RequestId) -> Result<()> {
        self.check_open()?;
        self.readers.send(ReaderMsg::Panic(id)).map_err(|_| closed_by_failure())
    }

    /// For a forced close (before or after `close`): running statements are interrupted and
    /// queued requests fail as closed without running, so the close finishes even behind a
    /// statement that would never end. A transaction holding the writer is rolled back when
    /// its front end ends it.
    pub fn stop_all(&self) {
        self.cancellation.stop_all();
    }

    /// Stops accepting requests; what is queued still runs (and a transaction holding the
    /// writer is waited for). `id` completes once every thread has closed its connection.
    pub fn close(&self, id: RequestId) {
        self.closed.store(true, Ordering::Release);
        {
            let mut closes = self.closes.lock().unwrap_or_else(|p| p.into_inner());
            match &mut *closes {
                Closes::None => *closes = Closes::UnderWay(vec![id]),
                // Its threads were told to stop once; a second `Stop` would be dropped
                // unread with the writer's queue, and this close would never complete.
                Closes::UnderWay(waiting) => {
                    waiting.push(id);
                    return;
                }
                Closes::Done => {
                    drop(closes);
                    self.sink.complete(Completion { id, result: Ok(Output::Done) });
                    return;
                }
            }
        }
        let sink = self.sink.clone();
        let location = self.location.clone();
        let key = self.key.clone();
        let closes = self.closes.clone();
        let countdown = Countdown::new(1 + self.readers.threads() + crate::live::CLOSE_THREADS, move || {
            // Every thread is done, backups queued before close() included: the key goes.
            *key.lock().unwrap_or_else(|p| p.into_inner()) = None;
            location.remove_temporary();
            let waiting = std::mem::replace(&mut *closes.lock().unwrap_or_else(|p| p.into_inner()), Closes::Done);
            if let Closes::UnderWay(ids) = waiting {
                for id in ids {
                    sink.complete(Completion { id, result: Ok(Output::Done) });
                }
            }
        });
        self.live.stop_for_close(countdown.clone());
        // Readers held by iterators come back to their queue (and take their Stop there).
        self.iterators.end_all(Error::Closed("the database was closed while this iterator was open".into()));
        if let Err(crossbeam_channel::SendError(WriterMsg::Stop(c))) =
            self.writer.send(WriterMsg::Stop(countdown))
        {
            // The threads are already gone (failed open): nothing to wait for.
            c.finish_now();
        }
    }
}

/// Where a database's close requests stand.
#[derive(Default)]
enum Closes {
    #[default]
    None,
    /// The first has stopped the threads; these complete when they have ended.
    UnderWay(Vec<RequestId>),
    Done,
}

impl Database {
    /// Its user-defined functions and extensions: a function added here applies to every
    /// connection before its next job.
    pub fn catalog(&self) -> &Arc<crate::functions::Catalog> {
        &self.catalog
    }

    /// What ends this database if its owner disappears (see `Abandoner`).
    pub fn abandoner(&self) -> Abandoner {
        self.abandoner.clone()
    }
}

/// Counts of the writes sent to the writer, kept where both threads see them.
#[derive(Clone, Default)]
pub(crate) struct WriteGauges {
    /// Sent and not yet started: counted up before the send, down as the writer starts it
    /// (`diagnostics().queuedWrites`).
    pub waiting: Arc<AtomicUsize>,
    /// Sent and not yet completed.
    pub unfinished: Arc<AtomicUsize>,
}

impl Database {
    /// Whether a write is queued or running: a wait for a result may then be a wait for the
    /// writer (see spin.rs).
    pub fn writes_unfinished(&self) -> bool {
        self.writes.unfinished.load(Ordering::Acquire) > 0
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // Dropped: nobody can send requests any more, least of all the ones a transaction
        // holding the writer waits for. Queued work ahead of it still runs unless a
        // transaction holds the writer; that one is rolled back. After a close() this only
        // matters if the close could not finish (it waits for a transaction).
        self.closed.store(true, Ordering::Release);
        self.abandoner.abandon();
    }
}

fn closed_by_failure() -> Error {
    Error::Closed("the database is not open (it failed to open or was closed)".into())
}

/// Opens every connection and starts the readers (the spare last); returns the writer's
/// connection.
fn start(
    loc: &Location,
    opts: &OpenOptions,
    queues: &ReaderQueues,
    receivers: ReaderReceivers,
    sink: Arc<dyn CompletionSink>,
    cancellation: &Arc<Cancellation>,
    clock: &Arc<SendClock>,
) -> Result<Option<Connection>> {
    let writer = if opts.readonly { None } else { Some(open_writer(loc, opts)?) };
    let readers = (0..queues.threads()).map(|_| open_reader(loc, opts)).collect::<Result<Vec<_>>>()?;
    let spare_index = opts.readers;
    for (i, mut conn) in readers.into_iter().enumerate() {
        let spare = i == spare_index;
        let rx = if spare { receivers.spare.clone() } else { receivers.shared.clone() };
        let s = sink.clone();
        let b = queues.busy_counter(spare);
        let c = clock.clone();
        let watch = Watch::install(&mut conn, cancellation.clone(), Some(queues.reader_state(spare)))?;
        let catalog = opts.catalog.clone();
        let conn = crate::read_connection::ReadConnection::new(conn, opts.statement_cache);
        let name = if spare { "quietsqlite-reader-spare".to_string() } else { format!("quietsqlite-reader-{i}") };
        std::thread::Builder::new()
            .name(name)
            .spawn(move || reader::run(conn, watch, rx, s, b, catalog, c))
            .map_err(|e| Error::Internal(format!("could not start a reader thread: {e}")))?;
    }
    Ok(writer)
}

fn run_readonly_control(control: Receiver<WriterMsg>, readers: ReaderQueues) {
    while let Ok(msg) = control.recv() {
        if let WriterMsg::Stop(c) | WriterMsg::Abandon(c) = msg {
            readers.send_to_each(|| ReaderMsg::Stop(c.clone()));
            c.done();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::TxMode;
    use crossbeam_channel::{unbounded, Receiver, Sender};
    use std::time::Duration;

    struct ChannelSink(Sender<Completion>);
    impl CompletionSink for ChannelSink {
        fn complete(&self, c: Completion) {
            let _ = self.0.send(c);
        }
    }

    fn open(path: &std::path::Path) -> (Database, Receiver<Completion>) {
        let (tx, rx) = unbounded();
        let mut opts = OpenOptions::new(path.to_string_lossy());
        opts.readers = 1;
        let db = Database::open(opts, Arc::new(ChannelSink(tx)), 1).unwrap();
        assert!(wait(&rx, 1).is_ok());
        (db, rx)
    }

    fn wait(rx: &Receiver<Completion>, id: RequestId) -> Result<Output> {
        let c = rx.recv_timeout(Duration::from_secs(5)).expect("a completion");
        assert_eq!(c.id, id);
        c.result
    }

    fn job(id: RequestId, tx: Option<u32>, kind: WriteKind) -> WriteJob {
        WriteJob { id, tx, kind, cancellable: false }
    }

    fn exec(sql: &str) -> WriteKind {
        WriteKind::Execute { sql: sql.into(), params: Params::None }
    }

    #[test]
    fn a_dropped_database_rolls_back_its_open_transaction_and_frees_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let (db, rx) = open(&path);
        db.write(job(2, None, exec("CREATE TABLE t(v)"))).unwrap();
        wait(&rx, 2).unwrap();
        db.write(job(3, Some(7), WriteKind::Begin { mode: TxMode::Immediate, silent: false })).unwrap();
        wait(&rx, 3).unwrap();
        db.write(job(4, Some(7), exec("INSERT INTO t VALUES (1)"))).unwrap();
        wait(&rx, 4).unwrap();
        // A request of someone else waits behind the transaction; nobody will end it.
        db.write(job(5, None, exec("INSERT INTO t VALUES (2)"))).unwrap();
        drop(db);
        let other = Connection::open(&path).unwrap();
        other.busy_timeout(Duration::from_secs(3)).unwrap();
        other.execute_batch("INSERT INTO t VALUES (3)").unwrap();
        let values: Vec<i64> =
            other.prepare("SELECT v FROM t").unwrap().query_map([], |r| r.get(0)).unwrap().map(|v| v.unwrap()).collect();
        assert_eq!(values, vec![3]);
    }

    #[test]
    fn a_transaction_sqlite_rolled_back_itself_runs_and_commits_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let (db, rx) = open(&dir.path().join("b.db"));
        db.write(job(2, None, exec("CREATE TABLE t(v UNIQUE ON CONFLICT ROLLBACK)"))).unwrap();
        wait(&rx, 2).unwrap();
        db.write(job(3, Some(1), WriteKind::Begin { mode: TxMode::Immediate, silent: false })).unwrap();
        wait(&rx, 3).unwrap();
        for id in 4..=5 {
            db.write(job(id, Some(1), exec("INSERT INTO t VALUES (1)"))).unwrap();
        }
        wait(&rx, 4).unwrap();
        assert!(wait(&rx, 5).is_err());
        db.write(job(6, Some(1), exec("INSERT INTO t VALUES (2)"))).unwrap();
        let code = |r: Result<Output>| match r {
            Err(Error::Sqlite { code, .. }) => code,
            other => panic!("{other:?}"),
        };
        assert_eq!(code(wait(&rx, 6)), rusqlite::ffi::SQLITE_ABORT_ROLLBACK);
        db.write(job(7, Some(1), WriteKind::Commit)).unwrap();
        assert_eq!(code(wait(&rx, 7)), rusqlite::ffi::SQLITE_ABORT_ROLLBACK);
        // The writer is free again, and nothing of the transaction stayed.
        db.write(job(8, None, exec("SELECT count(*) FROM t"))).unwrap();
        match wait(&rx, 8).unwrap() {
            Output::Exec(out) => assert_eq!(out.rows.map(|r| r.rows), Some(1)),
            other => panic!("{other:?}"),
        }
        db.write(job(9, None, exec("INSERT INTO t VALUES (3)"))).unwrap();
        wait(&rx, 9).unwrap();
    }
}
