//! Bounded inline reads (`inlineReads`): a read runs on a connection owned by the caller's
//! thread (the JS thread), under a budget of VM time that SQLite's progress handler
//! enforces. Past the budget the statement is interrupted and the caller hands the read to
//! a reader thread as usual: reads are idempotent, so nothing is lost but the budget.
//! See docs/experiments/022-inline-reads.md.

use crate::backup::KeySlot;
use crate::connection::{Key, Location, OpenOptions};
use crate::read_connection::ReadConnection;
use crate::error::Result;
use crate::query::{self, ReadFormat, ReadOutput};
use crate::value::Params;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The largest budget `inlineReads` accepts, in microseconds (the JS layer checks it).
pub const MAX_BUDGET_US: u32 = 10_000;

/// VM instructions between two looks at the clock: a point query finishes before the first
/// look; a long statement overshoots its budget by at most a few microseconds.
const PROGRESS_OPS: i32 = 256;

/// Calls of a statement that went over budget sent straight to a reader before it is tried
/// inline again (a heavy query does not pay the wasted budget each call).
const SKIP_CALLS: u32 = 64;

/// Statements remembered as over budget; the memory is forgotten whole when full.
const MAX_REMEMBERED: usize = 256;

/// The inline connection's page cache (`PRAGMA cache_size`, negative: KiB) unless the
/// caller's pragmas set one. A page it misses is read from the file on the JS thread, so it
/// gets about better-sqlite3's default (16,000 KiB) rather than SQLite's 2 MB; it fills only
/// as pages are read. See docs/experiments/028-inline-page-cache.md.
pub const INLINE_CACHE_KIB: i64 = 16 * 1024;

/// Does a pragma of the caller's set the main database's page cache (`cache_size` or
/// `main.cache_size`; another schema's leaves it alone)?
fn sets_main_cache_size(name: &str) -> bool {
    name.eq_ignore_ascii_case("cache_size") || name.eq_ignore_ascii_case("main.cache_size")
}

/// How reads ended inline (`diagnostics()`): shared with the database.
#[derive(Debug, Default)]
pub struct InlineCounts {
    /// Answered inline.
    pub reads: AtomicU64,
    /// Went over budget (then ran on a reader).
    pub fallbacks: AtomicU64,
}

/// The outcome of one inline attempt.
#[derive(Debug)]
pub enum Inline {
    Done(ReadOutput),
    /// Interrupted at the budget: nothing is kept; run it on a reader.
    OverBudget,
    /// Not tried (closed, functions or extensions, recently over budget, describe).
    NotEligible,
}

/// The deadline the progress handler compares with, shared with the handler's closure.
struct Deadline {
    base: Instant,
    /// Nanoseconds after `base`; `u64::MAX` while no inline read runs.
    until: AtomicU64,
    fired: AtomicBool,
}

impl Deadline {
    fn over(&self) -> bool {
        let now = self.base.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        if now > self.until.load(Ordering::Relaxed) {
            self.fired.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }
}

struct Open {
    conn: ReadConnection,
    /// The page cache has its inline size (or the caller chose one). Set inside the first
    /// budgeted read: the pragma loads the schema, which is SQLite work like any other.
    cache_sized: bool,
    /// The key the connection was opened with: another key in the slot means a rekey ran.
    key: Option<Arc<Key>>,
    deadline: Arc<Deadline>,
}

/// One database's inline connection: opened on first use, on the thread that uses it.
pub struct InlineReader {
    location: Location,
    /// The readers' options, without the key (read from `key` when opening).
    opts: OpenOptions,
    key: KeySlot,
    budget: Duration,
    counts: Arc<InlineCounts>,
    open: Option<Open>,
    skips: HashMap<String, u32>,
    shut: bool,
    /// Counts closes: a read that let JavaScript run (its parameters' getters) and finds
    /// another count afterwards must not go on (a rekey or close happened meanwhile).
    closes: u64,
}

/// Gives the connection its inline page cache once (see INLINE_CACHE_KIB).
fn size_cache(open: &mut Open) -> Result<()> {
    if !open.cache_sized {
        open.conn.pragma_update(None, "cache_size", -INLINE_CACHE_KIB)?;
        open.cache_sized = true;
    }
    Ok(())
}

fn same_key(a: &Option<Arc<Key>>, b: &Option<Arc<Key>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

impl InlineReader {
    pub(crate) fn new(location: Location, opts: OpenOptions, key: KeySlot, budget: Duration, counts: Arc<InlineCounts>) -> Self {
        InlineReader { location, opts, key, budget, counts, open: None, skips: HashMap::new(), shut: false, closes: 0 }
    }

    /// Closes the connection; the next read reopens it (a rekey is about to change the file).
    pub fn close_connection(&mut self) {
        self.open = None;
        self.closes += 1;
    }

    /// Closes the connection for good (the database is closing).
    pub fn shut(&mut self) {
        self.open = None;
        self.shut = true;
        self.closes += 1;
    }

    /// How many times the connection was closed (see `closes`).
    pub fn closes(&self) -> u64 {
        self.closes
    }

    /// Is a connection open now (tests)?
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Should `sql` be tried inline? Counts down a statement remembered as over budget.
    /// Cheap, and called before the parameters are converted.
    pub fn wants(&mut self, sql: &str, format: ReadFormat) -> bool {
        if !self.wants_unchecked(format) {
            return false;
        }
        if let Some(left) = self.skips.get_mut(sql) {
            if *left > 0 {
                *left -= 1;
                return false;
            }
            self.skips.remove(sql);
        }
        true
    }

    /// Runs a read inline under the budget. An error is the statement's own (the caller may
    /// run it on a reader to report it from the one usual place).
    pub fn run(&mut self, sql: &str, params: &Params, format: ReadFormat) -> Result<Inline> {
        if !self.wants_unchecked(format) {
            return Ok(Inline::NotEligible);
        }
        let budget = self.budget;
        let open = self.connection()?;
        let deadline = open.deadline.clone();
        deadline.fired.store(false, Ordering::Relaxed);
        let until = deadline.base.elapsed().saturating_add(budget).as_nanos().min(u64::MAX as u128 - 1) as u64;
        deadline.until.store(until, Ordering::Relaxed);
        // A failure here (busy, over budget) fails this read like its own error would: a
        // reader runs it, and the next inline read sets the cache again.
        let result = size_cache(open).and_then(|()| query::read(&open.conn, sql, params, format));
        deadline.until.store(u64::MAX, Ordering::Relaxed);
        match result {
            Ok(out) => {
                self.counts.reads.fetch_add(1, Ordering::Relaxed);
                Ok(Inline::Done(out))
            }
            Err(_) if deadline.fired.load(Ordering::Relaxed) => {
                // The statement was reset when its rows were dropped: no read stays open.
                self.counts.fallbacks.fetch_add(1, Ordering::Relaxed);
                if self.skips.len() >= MAX_REMEMBERED {
                    self.skips.clear();
                }
                self.skips.insert(sql.to_owned(), SKIP_CALLS);
                Ok(Inline::OverBudget)
            }
            Err(e) => Err(e),
        }
    }

    /// Functions call back into JS and wait: on the JS thread that would never end; an
    /// extension may do anything. A describe has nothing to run.
    fn wants_unchecked(&self, format: ReadFormat) -> bool {
        !self.shut && format != ReadFormat::Describe && self.opts.catalog.is_empty()
    }

    /// The open connection, (re)opened with the key the file has now.
    fn connection(&mut self) -> Result<&mut Open> {
        let key = crate::backup::current_key(&self.key);
        if self.open.as_ref().is_some_and(|o| !same_key(&o.key, &key)) {
            self.open = None;
        }
        if self.open.is_none() {
            let opts = OpenOptions { encryption: key.clone(), ..self.opts.clone() };
            let mut conn = crate::connection::open_reader(&self.location, &opts)?;
            // A lock held elsewhere (a WAL recovery) is not waited for on this thread: the
            // read fails and a reader runs it, waiting as usual.
            conn.busy_timeout(Duration::ZERO)?;
            let cache_sized = self.opts.pragmas.iter().any(|(name, _)| sets_main_cache_size(name));
            let deadline = Arc::new(Deadline { base: Instant::now(), until: AtomicU64::new(u64::MAX), fired: AtomicBool::new(false) });
            let seen = deadline.clone();
            conn.progress_handler(PROGRESS_OPS, Some(move || seen.over()))?;
            let conn = ReadConnection::new(conn, self.opts.statement_cache);
            self.open = Some(Open { conn, cache_sized, key, deadline });
        }
        Ok(self.open.as_mut().expect("opened above"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;
    use rusqlite::Connection;

    fn reader(dir: &std::path::Path, budget: Duration) -> (Connection, InlineReader) {
        let path = dir.join("i.db");
        let writer = Connection::open(&path).unwrap();
        writer.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)").unwrap();
        let opts = OpenOptions::new(path.to_string_lossy());
        let loc = Location::resolve(&opts.path).unwrap();
        let slot: KeySlot = Arc::new(std::sync::Mutex::new(None));
        (writer, InlineReader::new(loc, opts, slot, budget, Arc::default()))
    }

    #[test]
    fn a_statement_over_budget_is_interrupted_and_the_connection_stays_usable() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, mut inline) = reader(dir.path(), Duration::from_micros(50));
        let heavy = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000000) SELECT count(*) FROM c";
        assert!(matches!(inline.run(heavy, &Params::None, ReadFormat::Json).unwrap(), Inline::OverBudget));
        assert_eq!(inline.counts.fallbacks.load(Ordering::Relaxed), 1);
        // Remembered: the next calls go to a reader without trying.
        assert!(!inline.wants(heavy, ReadFormat::Json));
        // No read transaction was left open: a write and a checkpoint pass, and the next
        // inline read sees the write.
        writer.execute_batch("INSERT INTO t VALUES (3)").unwrap();
        writer.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0).map(|busy| assert_eq!(busy, 0))).unwrap();
        let sql = "SELECT count(*) AS n FROM t WHERE x > ?";
        match inline.run(sql, &Params::Positional(vec![Value::Integer(0)].into()), ReadFormat::Json).unwrap() {
            Inline::Done(ReadOutput::Json(bytes)) => assert_eq!(bytes, br#"[{"n":3}]"#),
            other => panic!("{other:?}"),
        }
        assert_eq!(inline.counts.reads.load(Ordering::Relaxed), 1);
        // Errors are the statement's own, not a budget's.
        assert!(inline.run("SELECT * FROM nowhere", &Params::None, ReadFormat::Json).is_err());
        assert_eq!(inline.counts.fallbacks.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_remembered_statement_is_tried_again_after_its_skipped_calls() {
        let dir = tempfile::tempdir().unwrap();
        let (_writer, mut inline) = reader(dir.path(), Duration::from_micros(1));
        inline.skips.insert("SELECT 1".into(), 2);
        assert!(!inline.wants("SELECT 1", ReadFormat::Json));
        assert!(!inline.wants("SELECT 1", ReadFormat::Json));
        assert!(inline.wants("SELECT 1", ReadFormat::Json));
        assert!(!inline.wants("SELECT 1", ReadFormat::Describe));
        inline.shut();
        assert!(!inline.wants("SELECT 2", ReadFormat::Json));
        assert!(matches!(inline.run("SELECT 2", &Params::None, ReadFormat::Json).unwrap(), Inline::NotEligible));
        assert!(!inline.is_open());
    }

    #[test]
    fn the_page_cache_is_larger_unless_the_caller_chose_one() {
        let dir = tempfile::tempdir().unwrap();
        // Set by the first inline read (which must succeed), read back after it.
        let cache_after_a_read = |inline: &mut InlineReader| -> i64 {
            assert!(matches!(inline.run("SELECT 1", &Params::None, ReadFormat::Json).unwrap(), Inline::Done(_)));
            inline.connection().unwrap().conn.query_row("PRAGMA cache_size", [], |r| r.get(0)).unwrap()
        };
        let (_writer, mut inline) = reader(dir.path(), Duration::from_millis(50));
        assert_eq!(cache_after_a_read(&mut inline), -INLINE_CACHE_KIB);
        for (name, kept) in [("Cache_Size", true), ("main.cache_size", true), ("MAIN.CACHE_SIZE", true), ("temp.cache_size", false)] {
            let other = tempfile::tempdir().unwrap();
            let (_writer, mut chosen) = reader(other.path(), Duration::from_millis(50));
            chosen.opts.pragmas.push((name.into(), "-500".into()));
            let expected = if kept { -500 } else { -INLINE_CACHE_KIB };
            assert_eq!(cache_after_a_read(&mut chosen), expected, "{name}");
        }
    }
}
