//! A database: one writer thread, N reader threads, and the queues in front of them.
//! Everything here returns at once; outcomes arrive through the `CompletionSink`.

use crate::completion::{Completion, CompletionSink, Countdown, Output, RequestId};
use crate::connection::{open_reader, open_writer, Location, OpenOptions};
use crate::error::{Error, Result};
use crate::live::LiveQueries;
use crate::reader::{self, ReadJob, ReaderMsg};
use crate::value::Params;
use std::time::Duration;
use crate::writer::{ChangeListener, WriteJob, WriteKind, Writer, WriterMsg};
use crossbeam_channel::{unbounded, Receiver, Sender};
use rusqlite::Connection;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct Database {
    readers: Sender<ReaderMsg>,
    /// The writer thread's queue; on a read-only database that thread only handles close.
    writer: Sender<WriterMsg>,
    readonly: bool,
    reader_count: usize,
    closed: AtomicBool,
    sink: Arc<dyn CompletionSink>,
    live: LiveQueries,
    location: Location,
}

impl Database {
    /// Starts the threads. Connections open on the writer thread (the writer first: it
    /// creates the file and switches it to WAL), never on the caller's; `open_id`
    /// completes when every connection is open, or with the first error.
    pub fn open(opts: OpenOptions, sink: Arc<dyn CompletionSink>, open_id: RequestId) -> Result<Database> {
        if opts.readers == 0 {
            return Err(Error::Range("readers must be at least 1".into()));
        }
        let (reader_tx, reader_rx) = unbounded::<ReaderMsg>();
        let (writer_tx, writer_rx) = unbounded::<WriterMsg>();
        let readonly = opts.readonly;
        let opts_readers = opts.readers;
        let tracking = Arc::new(AtomicBool::new(false));
        let location = Location::resolve(&opts.path)?;
        location.check_shareable()?;
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
                let started = start(&loc, &opts, reader_rx, thread_sink.clone());
                let writer = match started {
                    Ok(None) => {
                        thread_sink.complete(Completion { id: open_id, result: Ok(Output::Done) });
                        return run_readonly_control(writer_rx, thread_readers, opts.readers);
                    }
                    Ok(Some(conn)) => Writer::new(
                        conn,
                        thread_sink.clone(),
                        listener,
                        tracking,
                        thread_readers,
                        opts.readers,
                    ),
                    Err(e) => Err(e),
                };
                match writer {
                    Ok(w) => {
                        thread_sink.complete(Completion { id: open_id, result: Ok(Output::Done) });
                        w.run(writer_rx);
                    }
                    Err(e) => {
                        // Reader threads that did start stop when `thread_readers` drops.
                        thread_live.stop();
                        loc.remove_temporary();
                        thread_sink.complete(Completion { id: open_id, result: Err(e) });
                    }
                }
            })
            .map_err(|e| Error::Internal(format!("could not start the writer thread: {e}")))?;
        let reader_count = opts_readers;
        Ok(Database {
            readers: reader_tx,
            writer: writer_tx,
            readonly,
            reader_count,
            closed: AtomicBool::new(false),
            sink,
            live,
            location,
        })
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
        self.readers.send(ReaderMsg::Read(job)).map_err(|_| closed_by_failure())
    }

    /// Queues a request on the writer. While closing, requests of a transaction that is
    /// running or was queued before close() still pass: close() waits for them.
    pub fn write(&self, job: WriteJob) -> Result<()> {
        if job.tx.is_none() || matches!(job.kind, WriteKind::Begin { .. }) {
            self.check_open()?;
        }
        if self.readonly {
            let sql = match &job.kind {
                WriteKind::Execute { sql, .. } | WriteKind::Batch { sql, .. } | WriteKind::Read { sql, .. } => {
                    Some(sql.clone())
                }
                _ => None,
            };
            return Err(Error::Sqlite {
                code: rusqlite::ffi::SQLITE_READONLY,
                message: "the database was opened read-only".into(),
                sql,
            });
        }
        self.writer.send(WriterMsg::Job(job)).map_err(|_| closed_by_failure())
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

    /// The file behind a `:memory:` database (deleted when the database closes).
    pub fn temporary_path(&self) -> Option<&std::path::Path> {
        self.location.temporary.as_deref()
    }

    pub fn live(&self) -> &LiveQueries {
        &self.live
    }

    /// Test hook: a reader panics while serving request `id`.
    pub fn panic_for_tests(&self, id: RequestId) -> Result<()> {
        self.check_open()?;
        self.readers.send(ReaderMsg::Panic(id)).map_err(|_| closed_by_failure())
    }

    /// Stops accepting requests; what is queued still runs (and a transaction holding the
    /// writer is waited for). `id` completes once every thread has closed its connection.
    pub fn close(&self, id: RequestId) {
        self.closed.store(true, Ordering::Release);
        self.live.stop();
        let sink = self.sink.clone();
        let location = self.location.clone();
        let countdown = Countdown::new(1 + self.reader_count, move || {
            location.remove_temporary();
            sink.complete(Completion { id, result: Ok(Output::Done) });
        });
        if let Err(crossbeam_channel::SendError(WriterMsg::Stop(c))) =
            self.writer.send(WriterMsg::Stop(countdown))
        {
            // The threads are already gone (failed open): nothing to wait for.
            c.finish_now();
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        self.live.stop();
        if !self.closed.swap(true, Ordering::AcqRel) {
            // Dropped without close(): let the threads drain and exit on their own.
            let location = self.location.clone();
            let countdown = Countdown::new(1 + self.reader_count, move || location.remove_temporary());
            let _ = self.writer.send(WriterMsg::Stop(countdown));
        }
    }
}

fn closed_by_failure() -> Error {
    Error::Closed("the database is not open (it failed to open or was closed)".into())
}

/// Opens every connection and starts the readers; returns the writer's connection.
fn start(
    loc: &Location,
    opts: &OpenOptions,
    reader_rx: Receiver<ReaderMsg>,
    sink: Arc<dyn CompletionSink>,
) -> Result<Option<Connection>> {
    let writer = if opts.readonly { None } else { Some(open_writer(loc, opts)?) };
    let readers = (0..opts.readers).map(|_| open_reader(loc, opts)).collect::<Result<Vec<_>>>()?;
    for (i, conn) in readers.into_iter().enumerate() {
        let rx = reader_rx.clone();
        let s = sink.clone();
        std::thread::Builder::new()
            .name(format!("quietsqlite-reader-{i}"))
            .spawn(move || reader::run(conn, rx, s))
            .map_err(|e| Error::Internal(format!("could not start a reader thread: {e}")))?;
    }
    Ok(writer)
}

fn run_readonly_control(control: Receiver<WriterMsg>, readers: Sender<ReaderMsg>, count: usize) {
    while let Ok(msg) = control.recv() {
        if let WriterMsg::Stop(c) = msg {
            for _ in 0..count {
                let _ = readers.send(ReaderMsg::Stop(c.clone()));
            }
            c.done();
            return;
        }
    }
}
