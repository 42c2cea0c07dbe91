//! Shared by the integration tests: a Database opened in a temporary directory whose
//! completions arrive on a channel, so a test can wait for one request and see the order
//! in which requests finished.
#![allow(dead_code)]

use quietsqlite_core::query::ReadFormat;
use quietsqlite_core::{
    Completion, CompletionSink, Database, OpenOptions, Output, Params, ReadOutput, RequestId, TxId,
    TxMode, WriteJob, WriteKind,
};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest any single completion may take before the test fails (a hang, not a speed limit).
pub const HANG: Duration = Duration::from_secs(15);

pub struct ChannelSink(pub Mutex<Sender<Completion>>);

impl CompletionSink for ChannelSink {
    fn complete(&self, completion: Completion) {
        // The receiver may be gone when a test ends early; losing the message is fine then.
        let _ = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(completion);
    }
}

pub struct Harness {
    pub db: Option<Database>,
    pub rx: Receiver<Completion>,
    /// Completions received while waiting for another id.
    pending: RefCell<HashMap<RequestId, quietsqlite_core::Result<Output>>>,
    /// Every id in the order its completion arrived.
    pub arrivals: RefCell<Vec<RequestId>>,
    next: Cell<RequestId>,
    pub path: std::path::PathBuf,
    pub dir: tempfile::TempDir,
}

pub fn open_with(readers: usize, configure: impl FnOnce(&mut OpenOptions)) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    open_at(dir, path, readers, configure)
}

pub fn open(readers: usize) -> Harness {
    open_with(readers, |_| {})
}

pub fn open_at(
    dir: tempfile::TempDir,
    path: std::path::PathBuf,
    readers: usize,
    configure: impl FnOnce(&mut OpenOptions),
) -> Harness {
    let (tx, rx) = channel();
    let sink = Arc::new(ChannelSink(Mutex::new(tx)));
    let mut opts = OpenOptions::new(path.to_string_lossy().into_owned());
    opts.readers = readers;
    configure(&mut opts);
    let db = Database::open(opts, sink, 0).expect("open");
    let h = Harness {
        db: Some(db),
        rx,
        pending: RefCell::new(HashMap::new()),
        arrivals: RefCell::new(Vec::new()),
        next: Cell::new(1),
        path,
        dir,
    };
    h.wait(0).expect("open completes");
    h
}

impl Harness {
    pub fn db(&self) -> &Database {
        self.db.as_ref().expect("database present")
    }

    pub fn id(&self) -> RequestId {
        let id = self.next.get();
        self.next.set(id + 1);
        id
    }

    fn receive(&self) -> Completion {
        let c = self
            .rx
            .recv_timeout(HANG)
            .expect("a completion within the hang limit");
        self.arrivals.borrow_mut().push(c.id);
        c
    }

    /// Waits for the completion of `id` (others that arrive first are kept).
    pub fn wait(&self, id: RequestId) -> quietsqlite_core::Result<Output> {
        if let Some(r) = self.pending.borrow_mut().remove(&id) {
            return r;
        }
        loop {
            let c = self.receive();
            if c.id == id {
                return c.result;
            }
            self.pending.borrow_mut().insert(c.id, c.result);
        }
    }

    /// Takes the next completion for `id` if one arrives within `within`.
    pub fn try_wait(
        &self,
        id: RequestId,
        within: Duration,
    ) -> Option<quietsqlite_core::Result<Output>> {
        if let Some(r) = self.pending.borrow_mut().remove(&id) {
            return Some(r);
        }
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let c = self.rx.recv_timeout(left).ok()?;
            self.arrivals.borrow_mut().push(c.id);
            if c.id == id {
                return Some(c.result);
            }
            self.pending.borrow_mut().insert(c.id, c.result);
        }
    }

    pub fn send_write(&self, tx: Option<TxId>, kind: WriteKind) -> RequestId {
        let id = self.id();
        self.db().write(WriteJob { id, tx, kind, cancellable: false }).expect("queued");
        id
    }

    pub fn send_exec(&self, tx: Option<TxId>, sql: &str) -> RequestId {
        self.send_write(
            tx,
            WriteKind::Execute {
                sql: sql.into(),
                params: Params::None,
            },
        )
    }

    /// Runs `sql` on the writer (outside any transaction) and waits for it.
    pub fn exec(&self, sql: &str) {
        let id = self.send_exec(None, sql);
        self.wait(id).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }

    pub fn begin(&self, tx: TxId) {
        let id = self.send_write(
            Some(tx),
            WriteKind::Begin {
                mode: TxMode::Immediate,
                silent: false,
            },
        );
        self.wait(id).expect("begin");
    }

    pub fn send_read(&self, sql: &str) -> RequestId {
        let id = self.id();
        self.db()
            .read(quietsqlite_core::ReadJob {
                id,
                sql: sql.into(),
                params: Params::None,
                format: ReadFormat::Json,
                cancellable: false,
            })
            .expect("queued");
        id
    }

    /// A read on a reader thread, as JSON text.
    pub fn read_json(&self, sql: &str) -> String {
        let id = self.send_read(sql);
        json(self.wait(id).unwrap_or_else(|e| panic!("{sql}: {e:?}")))
    }

    /// A read on the writer connection (inside `tx` when given), as JSON text.
    pub fn writer_json(&self, tx: Option<TxId>, sql: &str) -> String {
        let id = self.send_write(
            tx,
            WriteKind::Read {
                sql: sql.into(),
                params: Params::None,
                format: ReadFormat::Json,
            },
        );
        json(self.wait(id).unwrap_or_else(|e| panic!("{sql}: {e:?}")))
    }

    /// close() and wait for it to complete.
    pub fn close(&self) {
        let id = self.id();
        self.db().close(id);
        self.wait(id).expect("close completes");
    }
}

pub fn json(out: Output) -> String {
    match out {
        Output::Read(ReadOutput::Json(bytes)) => String::from_utf8(bytes).expect("utf-8 JSON"),
        other => panic!("expected JSON rows, got {other:?}"),
    }
}

/// Opens `path` with plain rusqlite (another connection, as a later process would).
pub fn count_rows(path: &std::path::Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Threads of this process whose name starts with `quietsqlite` (Linux only).
pub fn core_threads() -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(|e| e.ok())
        .filter(|e| {
            std::fs::read_to_string(e.path().join("comm"))
                .map(|c| c.starts_with("quietsqlite"))
                .unwrap_or(false)
        })
        .count()
}

/// All threads of this process (Linux only).
pub fn process_threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |dir| dir.count())
}

/// Open file descriptors of this process that point into `dir`.
pub fn fds_under(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            std::fs::read_link(e.path())
                .map(|t| t.starts_with(dir))
                .unwrap_or(false)
        })
        .count()
}

/// Polls `f` until it returns true or the hang limit passes; returns the last answer.
pub fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + HANG;
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
