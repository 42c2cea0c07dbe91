//! Live queries. Identical (sql, params) subscriptions share one *group*; a group re-runs
//! on a reader only when a committed change touches what it reads (its dependencies, from
//! the authorizer, matched against the preupdate hook's record of changed rows/columns).
//! A re-run whose result hashes the same as the last one sends nothing. Each subscriber has
//! at most one emission in flight: until the front end acknowledges it, nothing more is
//! sent, and a subscriber is then sent the newest result only if it differs from the rows
//! it holds. An unread stream costs nothing; a slow one never builds a backlog.

use crate::completion::{Completion, CompletionSink, Output};
use crate::connection::{open_reader, Location, OpenOptions};
use crate::read_connection::ReadConnection;
use crate::deps::{dependencies, Dependencies, ANY_STATE, ANY_TABLE};
use crate::encode::EncodedRows;
use crate::error::{Error, Result};
use crate::hooks::ChangeSet;
use crate::query::{self, ReadFormat, ReadOutput};
use crate::reader::ReaderMsg;
use crate::reader_queues::ReaderQueues;
use crate::value::Params;
use crate::writer::{ChangeListener, WriterMsg};
use crossbeam_channel::Sender;
use rusqlite::Connection;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub type SubscriptionId = u32;
type GroupId = u64;

/// What a subscriber holds, for the check that sends nothing unchanged. The encoding carries
/// the column names, which only rows show: every empty result is the same one (a schema
/// change re-ran `SELECT *` over an empty table and sent `[]` again).
fn result_hash(rows: &EncodedRows) -> u64 {
    if rows.rows == 0 {
        0
    } else {
        xxhash_rust::xxh3::xxh3_64(&rows.bytes)
    }
}

/// Re-runs shorter than this are never delayed.
const THROTTLE_FLOOR: Duration = Duration::from_millis(1);
/// How often another process's commits are looked for while live queries exist.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

struct Last {
    hash: u64,
    rows: u32,
    bytes: Arc<Vec<u8>>,
}

struct Subscriber {
    id: SubscriptionId,
    /// The front end can take an emission (it acknowledged the previous one).
    ready: bool,
    /// It has received its first emission (rows or error).
    has_first: bool,
    /// Hash of the rows it was sent last: it is sent rows only when they differ (a result
    /// that changed and changed back while it was not reading is nothing new to it).
    sent: Option<u64>,
    /// `Shared::completed_writes` when it subscribed: its first emission comes from a run
    /// started at that count or later, so it holds every write that had settled.
    min_epoch: u64,
    max_delay: Duration,
}

struct Group {
    key: Vec<u8>,
    sql: String,
    params: Params,
    subs: Vec<Subscriber>,
    deps: Option<Dependencies>,
    running: bool,
    dirty: bool,
    timer_pending: bool,
    last: Option<Last>,
    last_run: Duration,
    /// `Shared::completed_writes` when the running (or last) run was started: `last` is the
    /// result as of then, and holds for a new subscriber only while no write has completed
    /// since (the writer counts before the write's promise can settle).
    run_epoch: u64,
    last_epoch: u64,
}

impl Group {
    fn wanted(&self) -> bool {
        self.subs.iter().any(|s| s.ready || !s.has_first)
    }

    fn max_delay(&self) -> Duration {
        self.subs.iter().map(|s| s.max_delay).min().unwrap_or(Duration::ZERO)
    }
}

#[derive(Default)]
struct State {
    groups: HashMap<GroupId, Group>,
    by_key: HashMap<Vec<u8>, GroupId>,
    subs: HashMap<SubscriptionId, GroupId>,
    by_table: HashMap<String, HashSet<GroupId>>,
    timers: BinaryHeap<Reverse<(Instant, GroupId)>>,
    next_group: GroupId,
    stopped: bool,
    /// The closes waiting for the scheduler to close its poller connection: each is `done`
    /// once it has.
    closing: Vec<Arc<crate::completion::Countdown>>,
    /// The scheduler thread has returned (or never started).
    exited: bool,
    /// Re-runs started, for tests and statistics.
    runs: u64,
    /// Re-runs whose rows hashed the same as the last result (nothing new was sent).
    skipped_by_hash: u64,
    /// Schema changes seen (`committed` with `schema_changed`): dependencies derived across
    /// one may describe the old schema.
    schema_changes: u64,
}

enum Delivery {
    Rows(SubscriptionId, Arc<Vec<u8>>, u32),
    Failure(SubscriptionId, Error),
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    tracking: Arc<AtomicBool>,
    sink: Arc<dyn CompletionSink>,
    readers: ReaderQueues,
    /// Asked every POLL_INTERVAL to look for other processes' commits.
    writer: Option<Sender<WriterMsg>>,
    /// Where a read-only database polls (None for in-memory databases: nobody else writes).
    poll_target: Option<(Location, OpenOptions)>,
    /// Writer requests completed so far (`request_completing`).
    completed_writes: std::sync::atomic::AtomicU64,
}

/// The live-query registry of one database. Cheap to clone.
#[derive(Clone)]
pub struct LiveQueries {
    shared: Arc<Shared>,
}

/// How many threads `stop_for_close` waits for: the scheduler.
pub(crate) const CLOSE_THREADS: usize = 1;

impl LiveQueries {
    pub(crate) fn new(
        sink: Arc<dyn CompletionSink>,
        readers: ReaderQueues,
        tracking: Arc<AtomicBool>,
        writer: Option<Sender<WriterMsg>>,
        poll_target: Option<(Location, OpenOptions)>,
    ) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            tracking,
            sink,
            readers,
            writer,
            poll_target,
            completed_writes: std::sync::atomic::AtomicU64::new(0),
        });
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("quietsqlite-live".into())
            .spawn(move || scheduler(s));
        if spawned.is_err() {
            shared.lock().exited = true;
        }
        LiveQueries { shared }
    }

    /// Adds a subscriber; its first emission is the current result (or the error).
    pub fn subscribe(&self, id: SubscriptionId, sql: String, params: Params, max_delay: Duration) {
        let mut key = Vec::with_capacity(sql.len() + 16);
        key.extend_from_slice(&(sql.len() as u64).to_le_bytes());
        key.extend_from_slice(sql.as_bytes());
        params.append_key(&mut key);
        let min_epoch = self.shared.completed_writes.load(Ordering::Acquire);
        let sub = Subscriber { id, ready: true, has_first: false, sent: None, max_delay, min_epoch };
        let mut deliveries = Vec::new();
        {
            let mut st = self.shared.lock();
            if st.stopped {
                drop(st);
                self.shared.send(vec![Delivery::Failure(id, Error::Closed("the database is closed".into()))]);
                return;
            }
            let gid = match st.by_key.get(&key) {
                Some(&g) => g,
                None => {
                    let g = st.next_group;
                    st.next_group += 1;
                    st.by_key.insert(key.clone(), g);
                    let group = Group {
                        key,
                        sql,
                        params,
                        subs: Vec::new(),
                        deps: None,
                        running: false,
                        dirty: true,
                        timer_pending: false,
                        last: None,
                        last_run: Duration::ZERO,
                        run_epoch: 0,
                        last_epoch: 0,
                    };
                    st.groups.insert(g, group);
                    g
                }
            };
            st.subs.insert(id, gid);
            self.shared.tracking.store(true, Ordering::Relaxed);
            let group = st.groups.get_mut(&gid).expect("group just found");
            group.subs.push(sub);
            // A write that completed after the group's last run started may not be in its
            // result: the new subscriber waits for a run started after it subscribed (a run
            // in flight may be too old as well: see `finish`).
            let up_to_date = !group.running && !group.dirty && !group.timer_pending && group.last_epoch >= min_epoch;
            match (&group.last, up_to_date) {
                (Some(last), true) => {
                    // Share the result the group already has.
                    let s = group.subs.last_mut().expect("just pushed");
                    s.ready = false;
                    s.has_first = true;
                    s.sent = Some(last.hash);
                    deliveries.push(Delivery::Rows(id, last.bytes.clone(), last.rows));
                }
                _ => {
                    group.dirty = true;
                    self.shared.start_if_idle(&mut st, gid);
                }
            }
        }
        self.shared.send(deliveries);
        self.shared.wake.notify_all();
    }

    /// The front end consumed the last emission of `id`: it may take the next one.
    pub fn acknowledge(&self, id: SubscriptionId) {
        let mut deliveries = Vec::new();
        {
            let mut st = self.shared.lock();
            let Some(&gid) = st.subs.get(&id) else { return };
            let group = st.groups.get_mut(&gid).expect("subscription without group");
            let Some(sub) = group.subs.iter_mut().find(|s| s.id == id) else { return };
            sub.ready = true;
            // Only a result that is still current: while a write has made the group dirty
            // (its re-run waiting for a ready subscriber or for its throttle), the last
            // result is an intermediate one, and the re-run brings the current state.
            let current = !group.running && !group.dirty && !group.timer_pending;
            if let (Some(last), true) = (&group.last, current) {
                if sub.has_first && sub.sent != Some(last.hash) {
                    sub.ready = false;
                    sub.sent = Some(last.hash);
                    deliveries.push(Delivery::Rows(id, last.bytes.clone(), last.rows));
                }
            }
            if group.dirty {
                self.shared.start_if_idle(&mut st, gid);
            }
        }
        self.shared.send(deliveries);
    }

    /// Removes a subscriber; the last one of a group frees the group and its dependencies.
    pub fn unsubscribe(&self, id: SubscriptionId) {
        let mut st = self.shared.lock();
        let Some(gid) = st.subs.remove(&id) else { return };
        let empty = {
            let group = st.groups.get_mut(&gid).expect("subscription without group");
            group.subs.retain(|s| s.id != id);
            group.subs.is_empty()
        };
        if empty {
            let group = st.groups.remove(&gid).expect("group exists");
            st.by_key.remove(&group.key);
            unregister(&mut st, gid, group.deps.as_ref());
            if st.groups.is_empty() {
                self.shared.tracking.store(false, Ordering::Relaxed);
            }
        }
    }

    /// Ends everything (database closing).
    pub fn stop(&self) {
        self.stop_with(None);
    }

    /// Ends everything for close(): `countdown` is done once the scheduler thread has closed
    /// its connection (a read-only database's poller) and returned.
    pub(crate) fn stop_for_close(&self, countdown: Arc<crate::completion::Countdown>) {
        self.stop_with(Some(countdown));
    }

    fn stop_with(&self, countdown: Option<Arc<crate::completion::Countdown>>) {
        let mut st = self.shared.lock();
        // With the scheduler gone, nothing is left to wait for: done once the lock is let go.
        let done_now = match countdown {
            Some(c) if st.exited => Some(c),
            Some(c) => {
                st.closing.push(c);
                None
            }
            None => None,
        };
        st.stopped = true;
        st.groups.clear();
        st.by_key.clear();
        st.subs.clear();
        st.by_table.clear();
        st.timers.clear();
        self.shared.tracking.store(false, Ordering::Relaxed);
        drop(st);
        self.shared.wake.notify_all();
        if let Some(c) = done_now {
            c.done();
        }
    }

    /// `(groups, subscribers, re-runs started, re-runs skipped by hash)` (diagnostics).
    pub fn counts(&self) -> (usize, usize, u64, u64) {
        let st = self.shared.lock();
        (st.groups.len(), st.subs.len(), st.runs, st.skipped_by_hash)
    }

    /// Number of live groups and re-runs started so far (for tests).
    pub fn stats(&self) -> (usize, u64) {
        let st = self.shared.lock();
        (st.groups.len(), st.runs)
    }
}

impl ChangeListener for LiveQueries {
    fn external_change(&self) {
        // Unknown tables, and possibly a new schema: re-derive everything.
        self.committed(ChangeSet::default(), true);
    }

    fn request_completing(&self) {
        self.shared.completed_writes.fetch_add(1, Ordering::AcqRel);
    }

    fn committed(&self, changes: ChangeSet, schema_changed: bool) {
        let mut st = self.shared.lock();
        if st.groups.is_empty() {
            return;
        }
        if schema_changed {
            st.schema_changes += 1;
        }
        let affected: Vec<GroupId> = if schema_changed {
            // Statements, column lists and dependencies may all have changed.
            let all: Vec<GroupId> = st.groups.keys().copied().collect();
            for gid in &all {
                let deps = st.groups.get_mut(gid).and_then(|g| g.deps.take());
                unregister(&mut st, *gid, deps.as_ref());
            }
            all
        } else {
            let mut hit = HashSet::new();
            if !changes.is_empty() {
                if let Some(gids) = st.by_table.get(ANY_TABLE) {
                    hit.extend(gids.iter().copied());
                }
            }
            // Pragma values change in commits that change no row.
            if let Some(gids) = st.by_table.get(ANY_STATE) {
                hit.extend(gids.iter().copied());
            }
            for (table, change) in &changes.tables {
                let Some(gids) = st.by_table.get(table) else { continue };
                for gid in gids {
                    let dep = st.groups.get(gid).and_then(|g| g.deps.as_ref()).and_then(|d| d.get(table));
                    if dep.is_some_and(|d| d.affected_by(change)) {
                        hit.insert(*gid);
                    }
                }
            }
            hit.into_iter().collect()
        };
        for gid in affected {
            if let Some(g) = st.groups.get_mut(&gid) {
                g.dirty = true;
            }
            self.shared.start_if_idle(&mut st, gid);
        }
    }
}

fn unregister(st: &mut State, gid: GroupId, deps: Option<&Dependencies>) {
    let Some(deps) = deps else { return };
    for table in deps.keys() {
        if let Some(set) = st.by_table.get_mut(table) {
            set.remove(&gid);
            if set.is_empty() {
                st.by_table.remove(table);
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn send(&self, deliveries: Vec<Delivery>) {
        for d in deliveries {
            let completion = match d {
                Delivery::Rows(id, bytes, rows) => Completion {
                    id,
                    result: Ok(Output::Emission(EncodedRows { bytes: (*bytes).clone(), rows })),
                },
                Delivery::Failure(id, e) => Completion { id, result: Err(e) },
            };
            self.sink.complete(completion);
        }
    }

    fn invalidate_all(self: &Arc<Self>, st: &mut State) {
        let all: Vec<GroupId> = st.groups.keys().copied().collect();
        for gid in all {
            if let Some(g) = st.groups.get_mut(&gid) {
                g.dirty = true;
            }
            self.start_if_idle(st, gid);
        }
    }

    /// Starts a re-run of a dirty group unless one is running or scheduled, or nobody
    /// could take its result now.
    fn start_if_idle(self: &Arc<Self>, st: &mut State, gid: GroupId) {
        let Some(g) = st.groups.get_mut(&gid) else { return };
        if g.running || g.timer_pending || !g.dirty || !g.wanted() {
            return;
        }
        g.running = true;
        g.dirty = false;
        g.run_epoch = self.completed_writes.load(Ordering::Acquire);
        let sql = g.sql.clone();
        let params = g.params.clone();
        let need_deps = g.deps.is_none();
        st.runs += 1;
        let shared = self.clone();
        let key = crate::long_reads::StatementKey::of(&sql);
        let task = Box::new(move |conn: &ReadConnection| shared.run(conn, gid, &sql, &params, need_deps));
        // A re-run is a read: the spare may take it unless its statement ran long (see
        // reader_queues.rs).
        if self.readers.send_read(ReaderMsg::Task(task, Some(key))).is_err() {
            if let Some(g) = st.groups.get_mut(&gid) {
                g.running = false;
            }
        }
    }

    /// On a reader thread: (dependencies, then) the query, then the bookkeeping, which runs
    /// even if the query panicked: a group left "running" would never run again.
    fn run(self: &Arc<Self>, conn: &ReadConnection, gid: GroupId, sql: &str, params: &Params, need_deps: bool) {
        let started = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.query(conn, gid, sql, params, need_deps)))
            .unwrap_or_else(|p| Some(Err(Error::Internal(crate::completion::panic_message(p)))));
        if let Some(outcome) = outcome {
            self.finish(gid, outcome, started.elapsed());
        }
    }

    /// None when the group went away meanwhile.
    fn query(self: &Arc<Self>, conn: &ReadConnection, gid: GroupId, sql: &str, params: &Params, need_deps: bool) -> Option<Result<EncodedRows>> {
        if let Err(e) = conn.check_usable() {
            return Some(Err(e));
        }
        let mut outcome: Result<EncodedRows> = Ok(EncodedRows::default());
        if need_deps {
            let schema_before = self.lock().schema_changes;
            match dependencies(conn, sql) {
                Ok(deps) => {
                    // Registered before the query runs: a commit after this point
                    // invalidates the group; one before it is in the query's snapshot.
                    let mut st = self.lock();
                    // A schema change committed while they were derived (it found no
                    // dependencies to forget) may have left them describing the old schema:
                    // they are dropped, and the group, marked dirty, runs again and derives
                    // them anew.
                    if st.schema_changes != schema_before {
                        match st.groups.get_mut(&gid) {
                            Some(g) => g.dirty = true,
                            None => return None,
                        }
                    } else {
                        for table in deps.keys() {
                            st.by_table.entry(table.clone()).or_default().insert(gid);
                        }
                        match st.groups.get_mut(&gid) {
                            Some(g) => g.deps = Some(deps),
                            None => return None,
                        }
                    }
                }
                Err(e) => outcome = Err(e),
            }
        }
        if outcome.is_ok() {
            outcome = query::read(conn, sql, params, ReadFormat::Rows { max_rows: None }).map(|o| match o {
                ReadOutput::Rows(r) => r,
                ReadOutput::Json(_) | ReadOutput::Described(_) => unreachable!("asked for rows"),
            });
        }
        Some(outcome)
    }

    fn finish(self: &Arc<Self>, gid: GroupId, outcome: Result<EncodedRows>, took: Duration) {
        let mut deliveries = Vec::new();
        let mut st = self.lock();
        let mut skipped = false;
        let Some(g) = st.groups.get_mut(&gid) else { return };
        g.running = false;
        g.last_run = took;
        g.last_epoch = g.run_epoch;
        match outcome {
            Ok(rows) => {
                let hash = result_hash(&rows);
                let same = g.last.as_ref().is_some_and(|l| l.hash == hash && l.rows == rows.rows);
                if same {
                    skipped = true;
                } else {
                    g.last = Some(Last { hash, rows: rows.rows, bytes: Arc::new(rows.bytes) });
                }
                let last = g.last.as_ref().expect("set above");
                for s in g.subs.iter_mut() {
                    // A first emission only from a run that started after the subscriber came
                    // (else the group is dirty, and the next run brings it).
                    let current_for_it = s.has_first || g.run_epoch >= s.min_epoch;
                    if s.ready && current_for_it && (!s.has_first || s.sent != Some(last.hash)) {
                        deliveries.push(Delivery::Rows(s.id, last.bytes.clone(), last.rows));
                        s.ready = false;
                        s.has_first = true;
                        s.sent = Some(last.hash);
                    }
                }
            }
            Err(e) => {
                g.last = None;
                // As with rows, not to a subscriber that came after the run started: the
                // failure may predate a write it must see (the group is dirty, and the next
                // run brings its first emission).
                let run_epoch = g.run_epoch;
                for s in g.subs.iter_mut().filter(|s| s.has_first || run_epoch >= s.min_epoch) {
                    deliveries.push(Delivery::Failure(s.id, e.clone()));
                    // Like rows, a failure waits for the consumer to ask for more: a stream
                    // nobody reads (a for-await loop that ended with this error) runs no more.
                    s.ready = false;
                    s.has_first = true;
                    // After an error, the next good result is news even if it equals the old.
                    s.sent = None;
                }
            }
        }
        if g.dirty && g.wanted() {
            // Under sustained writes, space re-runs by their own cost (at most half a
            // reader's time for this query), but never longer than the allowed delay.
            let delay = g.last_run.min(g.max_delay());
            if delay >= THROTTLE_FLOOR {
                g.timer_pending = true;
                st.timers.push(Reverse((Instant::now() + delay, gid)));
                self.wake.notify_all();
            } else {
                self.start_if_idle(&mut st, gid);
            }
        }
        if skipped {
            st.skipped_by_hash += 1;
        }
        drop(st);
        self.send(deliveries);
    }
}

/// The scheduler thread: starts delayed re-runs when due, and while live queries exist,
/// polls `PRAGMA data_version` to notice commits by other connections or processes.
fn scheduler(shared: Arc<Shared>) {
    // Declared first, so dropped last: after the poller connection, on a return and on a
    // panic alike, every close() waiting for this thread is told.
    let _exit = SchedulerExit(shared.clone());
    let mut poller: Option<Connection> = None;
    let mut last_version: Option<i64> = None;
    let mut next_poll = Instant::now() + POLL_INTERVAL;
    let mut st = shared.lock();
    loop {
        if st.stopped {
            return;
        }
        let now = Instant::now();
        while let Some(Reverse((when, gid))) = st.timers.peek().copied() {
            if when > now {
                break;
            }
            st.timers.pop();
            if let Some(g) = st.groups.get_mut(&gid) {
                g.timer_pending = false;
            }
            shared.start_if_idle(&mut st, gid);
        }
        let polling = (shared.writer.is_some() || shared.poll_target.is_some()) && !st.groups.is_empty();
        if polling && now >= next_poll {
            next_poll = now + POLL_INTERVAL;
            match &shared.writer {
                // The writer's own data_version moves only for other connections' commits.
                Some(w) => {
                    let _ = w.send(WriterMsg::CheckExternalChanges);
                }
                None => {
                    drop(st);
                    let had_baseline = last_version.is_some();
                    let external = poll_readonly(&shared, &mut poller, &mut last_version);
                    st = shared.lock();
                    // A commit between a live query's first run and the first baseline would go
                    // unseen: re-run once when the baseline is taken (silent if nothing changed).
                    if external || (!had_baseline && last_version.is_some()) {
                        shared.invalidate_all(&mut st);
                    }
                }
            }
            continue;
        }
        if !polling {
            last_version = None;
        }
        let mut wait = st.timers.peek().map(|Reverse((w, _))| w.saturating_duration_since(now));
        if polling {
            let until_poll = next_poll.saturating_duration_since(now);
            wait = Some(wait.map_or(until_poll, |w| w.min(until_poll)));
        }
        st = match wait {
            Some(w) => shared.wake.wait_timeout(st, w).unwrap_or_else(|p| p.into_inner()).0,
            None => shared.wake.wait(st).unwrap_or_else(|p| p.into_inner()),
        };
    }
}

/// Marks the scheduler gone and completes the closes waiting for it, when dropped.
struct SchedulerExit(Arc<Shared>);

impl Drop for SchedulerExit {
    fn drop(&mut self) {
        let closing = {
            let mut st = self.0.lock();
            st.exited = true;
            std::mem::take(&mut st.closing)
        };
        for c in closing {
            c.done();
        }
    }
}

/// Read-only databases have no writer to ask: any change of `data_version` on a connection
/// of our own is another process's commit.
fn poll_readonly(shared: &Shared, poller: &mut Option<Connection>, last_version: &mut Option<i64>) -> bool {
    if poller.is_none() {
        let Some((loc, opts)) = shared.poll_target.as_ref() else { return false };
        *poller = open_reader(loc, opts).ok();
    }
    let Some(conn) = poller.as_ref() else { return false };
    let Ok(version) = conn.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0)) else {
        return false;
    };
    let changed = last_version.is_some_and(|v| v != version);
    *last_version = Some(version);
    changed
}
