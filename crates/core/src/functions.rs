//! User-defined functions and loaded extensions, on every connection of a database.
//!
//! A `Catalog` is shared by all connections of one database: an append-only list of function
//! definitions and one of extensions, each with a count. A connection remembers how many of
//! each it has applied (in SQLite's per-connection client data, so the record follows the
//! connection through a reopen); before each job its thread compares the counts, one atomic
//! load each, and applies only what was added since. No lock is taken per query.
//!
//! A function's body lives in the front end (JavaScript): the connection thread hands the
//! call to an `Invoke` and blocks until it answers. When a call fails, the front end's error
//! is kept on this thread (`FAILURE`) and replaces SQLite's generic copy of its message where
//! the statement's error is converted (`Error::from_rusqlite`), so the caller sees the
//! original error.

use crate::error::{Error, Result};
use crate::extensions::Extension;
use crate::value::Value;
use rusqlite::functions::{Aggregate, Context, FunctionFlags, WindowAggregate};
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What a call asks of the front end. The numbers cross the boundary (the front end's
/// dispatcher switches on them); the binding exports them from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Op {
    /// A scalar function: its result.
    Scalar = 0,
    /// An aggregate takes one more row into accumulator `state`.
    Step = 1,
    /// A window function drops one row from accumulator `state`.
    Inverse = 2,
    /// A window function's current result; `state` lives on.
    Value = 3,
    /// The final result; `state` ends (0: no row was stepped).
    Final = 4,
}

/// One call of a user-defined function.
#[derive(Debug)]
pub struct Call<'a> {
    pub op: Op,
    pub function: u32,
    /// The function's SQL name, for error messages.
    pub name: &'a str,
    /// The accumulator of an aggregate invocation (0 for scalars).
    pub state: u64,
    pub args: Vec<Value>,
}

/// The front end that runs function bodies. `invoke` runs on a connection thread and blocks
/// until the answer is there, or fails when the front end can no longer answer.
pub trait Invoke: Send + Sync {
    fn invoke(&self, call: Call<'_>) -> Result<Value>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Scalar,
    Aggregate,
    /// An aggregate that can also drop rows: usable as a window function.
    Window,
}

/// A function as registered.
pub struct Definition {
    pub name: String,
    /// -1: any number of arguments.
    pub arity: i32,
    pub kind: Kind,
    pub deterministic: bool,
    pub direct_only: bool,
    /// The front end's number for the body.
    pub id: u32,
    pub invoker: Arc<dyn Invoke>,
}

/// The longest function name SQLite accepts, and the most arguments a fixed-arity function
/// may declare (SQLite's portable minimum of SQLITE_MAX_FUNCTION_ARG).
pub const MAX_NAME_BYTES: usize = 255;
pub const MAX_ARITY: i32 = 127;

impl Definition {
    /// Checks what SQLite would refuse later, on a connection thread, where nobody could
    /// be told.
    pub fn check(&self) -> Result<()> {
        if self.name.is_empty() || self.name.len() > MAX_NAME_BYTES || self.name.contains('\0') {
            return Err(Error::Type(format!(
                "a function name must be 1 to {MAX_NAME_BYTES} bytes of UTF-8 without NUL"
            )));
        }
        if self.arity < -1 || self.arity > MAX_ARITY {
            return Err(Error::Range(format!(
                "a function takes at most {MAX_ARITY} declared arguments (use varargs for more)"
            )));
        }
        Ok(())
    }

    fn flags(&self) -> FunctionFlags {
        let mut f = FunctionFlags::SQLITE_UTF8;
        if self.deterministic {
            f |= FunctionFlags::SQLITE_DETERMINISTIC;
        }
        if self.direct_only {
            f |= FunctionFlags::SQLITE_DIRECTONLY;
        }
        f
    }

    fn install(self: &Arc<Self>, conn: &Connection) -> Result<()> {
        let flags = self.flags();
        match self.kind {
            Kind::Scalar => {
                let def = self.clone();
                conn.create_scalar_function(self.name.as_str(), self.arity, flags, move |ctx| {
                    call(&def, Op::Scalar, 0, args_of(ctx)).map(to_sql)
                })?
            }
            Kind::Aggregate => conn.create_aggregate_function(self.name.as_str(), self.arity, flags, Accumulate(self.clone()))?,
            Kind::Window => conn.create_window_function(self.name.as_str(), self.arity, flags, Accumulate(self.clone()))?,
        }
        Ok(())
    }
}

impl std::fmt::Debug for Definition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Definition({:?}, {}, {:?})", self.name, self.arity, self.kind)
    }
}

/// An append-only list whose length can be read without its lock.
struct Log<T> {
    items: Mutex<Vec<T>>,
    len: AtomicUsize,
}

impl<T: Clone> Log<T> {
    fn new() -> Self {
        Log { items: Mutex::new(Vec::new()), len: AtomicUsize::new(0) }
    }

    /// Appends `item`; returns its index.
    fn push(&self, item: T) -> usize {
        let mut items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        items.push(item);
        self.len.store(items.len(), Ordering::Release);
        items.len() - 1
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// The items from `from` on (copied out: applying them must not hold the lock).
    fn since(&self, from: usize) -> Vec<T> {
        let items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        items.get(from..).map(<[T]>::to_vec).unwrap_or_default()
    }
}

/// A function or an extension, in the order they were added.
#[derive(Clone)]
enum Entry {
    Function(Arc<Definition>),
    Extension(Arc<Extension>),
}

/// The functions and extensions of one database (shared by its connections), in one log:
/// every connection applies them in the order they were added, so a name that both a
/// function and an extension define means the later one everywhere. (With a log each, the
/// readers applied every extension before every function and the writer in call order:
/// the same SQL gave one result on the writer and another on the readers.)
pub struct Catalog {
    entries: Log<Entry>,
    functions: AtomicUsize,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog { entries: Log::new(), functions: AtomicUsize::new(0) }
    }
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let functions = self.functions.load(Ordering::Acquire);
        write!(f, "Catalog({functions} functions, {} extensions)", self.entries.len().saturating_sub(functions))
    }
}

/// What one connection has applied (its client data): the first `applied` entries.
#[derive(Default)]
struct Applied {
    applied: usize,
}

const CLIENT_DATA_KEY: &std::ffi::CStr = c"quietsqlite.catalog";

unsafe extern "C" fn free_applied(p: *mut c_void) {
    // SAFETY: `p` is the Box `applied` leaked; SQLite calls this once, when the connection
    // closes or the entry is replaced. Dropping it cannot panic.
    drop(Box::from_raw(p as *mut Applied));
}

/// Runs `f` with the connection's record, created on first use.
fn with_applied<R>(conn: &Connection, f: impl FnOnce(&mut Applied) -> R) -> Result<R> {
    // SAFETY: the handle is valid while `conn` lives; the record is only touched by the
    // thread that owns the connection (connections are never shared), through this
    // function, and the borrow handed to `f` ends before it returns; SQLite frees the
    // record only when the connection closes, which cannot happen while `conn` is borrowed.
    unsafe {
        let db = conn.handle();
        let mut p = rusqlite::ffi::sqlite3_get_clientdata(db, CLIENT_DATA_KEY.as_ptr()) as *mut Applied;
        if p.is_null() {
            p = Box::into_raw(Box::<Applied>::default());
            let rc = rusqlite::ffi::sqlite3_set_clientdata(db, CLIENT_DATA_KEY.as_ptr(), p.cast(), Some(free_applied));
            if rc != rusqlite::ffi::SQLITE_OK {
                // SQLite calls the destructor itself when it cannot store the entry.
                return Err(Error::sqlite(rc, "could not record the functions applied to a connection"));
            }
        }
        Ok(f(&mut *p))
    }
}

impl Catalog {
    /// Adds a function for every connection (each applies it before its next job).
    pub fn add_function(&self, def: Definition) -> Result<()> {
        def.check()?;
        self.functions.fetch_add(1, Ordering::AcqRel);
        self.entries.push(Entry::Function(Arc::new(def)));
        Ok(())
    }

    /// Loads `ext` on `conn` (the writer), then adds it for every other connection (each
    /// loads it before its next job) and every connection opened later. A path that fails
    /// fails here, and nothing is added. Only one thread adds extensions (the writer).
    pub fn load_extension(&self, conn: &Connection, ext: Extension) -> Result<()> {
        self.sync(conn)?;
        ext.load(conn)?;
        let at = self.entries.push(Entry::Extension(Arc::new(ext)));
        // Counted as applied here unless a function was added between the sync and the push
        // (from the JS thread): the next sync then applies both in order (loading this
        // extension once more, after that function, as the readers will).
        with_applied(conn, |done| {
            if done.applied == at {
                done.applied = at + 1;
            }
        })?;
        Ok(())
    }

    /// An extension for connections not open yet (`extensions` at open).
    pub fn add_extension(&self, ext: Extension) {
        self.entries.push(Entry::Extension(Arc::new(ext)));
    }

    pub fn has_functions(&self) -> bool {
        self.functions.load(Ordering::Acquire) > 0
    }

    /// No function and no extension (one atomic load).
    pub fn is_empty(&self) -> bool {
        self.entries.len() == 0
    }

    /// Applies to `conn` what was added since it last looked, in the order it was added (a
    /// later definition of a name replaces an earlier one, whichever kind each is). Costs an
    /// atomic load when nothing changed.
    pub fn sync(&self, conn: &Connection) -> Result<()> {
        self.sync_with(conn, || {})
    }

    /// `sync`, calling `before_applying` first when there is something to apply (a reader
    /// ends its snapshot there: SQLite refuses to replace a function while a statement is
    /// active). Decided on the same counts as the applying, so an addition made meanwhile
    /// by another thread cannot slip between the two.
    pub(crate) fn sync_with(&self, conn: &Connection, before_applying: impl FnOnce()) -> Result<()> {
        let n = self.entries.len();
        if n == 0 {
            return Ok(());
        }
        with_applied(conn, |done| -> Result<()> {
            if done.applied >= n {
                return Ok(());
            }
            before_applying();
            for entry in self.entries.since(done.applied) {
                // Counted even when it fails: the job reports the failure once, and the
                // connection does not retry it before every job.
                done.applied += 1;
                match entry {
                    Entry::Extension(ext) => ext.load(conn)?,
                    Entry::Function(def) => def.install(conn)?,
                }
            }
            Ok(())
        })??;
        Ok(())
    }
}

// ---- calls ----

thread_local! {
    /// The first error of a function call that failed in the statement this thread runs now
    /// (`forget_failures` empties it as each statement starts). The first, not the last:
    /// once a call fails, SQLite cleans the statement up, and an aggregate's result() called
    /// then may fail too, with an error that is not the statement's.
    static FAILURE: RefCell<Option<Error>> = const { RefCell::new(None) };
}

/// A statement of user SQL starts on this thread (`statement_rules::under`): no failure of an
/// earlier one (a read interrupted while SQLite cleaned it up, say, whose error was never
/// converted) may be taken for one of its own.
pub(crate) fn forget_failures() {
    let _ = FAILURE.try_with(|f| f.borrow_mut().take());
}

/// The failed call's own error, if SQLite's message `message` is the copy of it that the
/// function reported. Taken once.
pub(crate) fn take_failure(message: &str) -> Option<Error> {
    FAILURE.with(|f| f.borrow_mut().take().filter(|e| failure_text(e) == message))
}

/// The text SQLite keeps for a failed call (what `take_failure` compares).
fn failure_text(e: &Error) -> String {
    let text = match e {
        Error::Thrown { message, .. } => message.clone(),
        other => other.to_string(),
    };
    // SQLite takes the message as a C string.
    text.replace('\0', " ")
}

/// SQLite's message for a failed call: the error itself (the original replaces it when the
/// statement's error is converted).
#[derive(Debug)]
struct Failed(String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

fn call(def: &Definition, op: Op, state: u64, args: Vec<Value>) -> rusqlite::Result<Value> {
    // Cancelled (or force-closed) since the progress handler last looked: the statement ends
    // here, as that handler would end it, without calling into JavaScript again. The code
    // alone (no message) keeps SQLITE_INTERRUPT as the statement's error. An aggregate's
    // final call still goes through: SQLite makes it as it tears the statement down, and
    // it is what lets the front end drop the group's accumulator.
    if op != Op::Final && crate::cancel::interrupt_pending() {
        return Err(rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_INTERRUPT), None));
    }
    let outcome = def.invoker.invoke(Call { op, function: def.id, name: &def.name, state, args });
    outcome.map_err(|e| {
        let text = failure_text(&e);
        FAILURE.with(|f| {
            f.borrow_mut().get_or_insert(e);
        });
        rusqlite::Error::UserFunctionError(Box::new(Failed(text)))
    })
}

fn args_of(ctx: &Context<'_>) -> Vec<Value> {
    (0..ctx.len())
        .map(|i| match ctx.get_raw(i) {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(n) => Value::Integer(n),
            ValueRef::Real(f) => Value::Real(f),
            ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        })
        .collect()
}

fn to_sql(v: Value) -> rusqlite::types::Value {
    match v {
        Value::Null => rusqlite::types::Value::Null,
        Value::Integer(n) => rusqlite::types::Value::Integer(n),
        Value::Real(f) => rusqlite::types::Value::Real(f),
        Value::Text(s) => rusqlite::types::Value::Text(s),
        Value::Blob(b) => rusqlite::types::Value::Blob(b),
    }
}

/// Accumulator numbers, unique in the process: the front end keeps each accumulator under it.
static NEXT_STATE: AtomicU64 = AtomicU64::new(1);

/// An aggregate (or window) function: the accumulator lives in the front end, SQLite's
/// aggregate context holds its number.
struct Accumulate(Arc<Definition>);

impl Aggregate<u64, rusqlite::types::Value> for Accumulate {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<u64> {
        Ok(NEXT_STATE.fetch_add(1, Ordering::Relaxed))
    }

    fn step(&self, ctx: &mut Context<'_>, state: &mut u64) -> rusqlite::Result<()> {
        call(&self.0, Op::Step, *state, args_of(ctx)).map(drop)
    }

    fn finalize(&self, _: &mut Context<'_>, state: Option<u64>) -> rusqlite::Result<rusqlite::types::Value> {
        call(&self.0, Op::Final, state.unwrap_or(0), Vec::new()).map(to_sql)
    }
}

impl WindowAggregate<u64, rusqlite::types::Value> for Accumulate {
    fn value(&self, state: Option<&mut u64>) -> rusqlite::Result<rusqlite::types::Value> {
        call(&self.0, Op::Value, state.map_or(0, |s| *s), Vec::new()).map(to_sql)
    }

    fn inverse(&self, ctx: &mut Context<'_>, state: &mut u64) -> rusqlite::Result<()> {
        call(&self.0, Op::Inverse, *state, args_of(ctx)).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers in Rust: doubles integers, fails on text, sums for aggregates.
    struct Fake(Mutex<std::collections::HashMap<u64, i64>>);

    impl Invoke for Fake {
        fn invoke(&self, call: Call<'_>) -> Result<Value> {
            let mut sums = self.0.lock().unwrap();
            match (call.op, call.args.first()) {
                (Op::Scalar, Some(Value::Integer(n))) => Ok(Value::Integer(n * 2)),
                (Op::Scalar, _) => Err(Error::Thrown { message: "no text here".into(), token: 7 }),
                (Op::Step, Some(Value::Integer(n))) => {
                    *sums.entry(call.state).or_default() += n;
                    Ok(Value::Null)
                }
                (Op::Final, _) => match sums.remove(&call.state).unwrap_or(0) {
                    n if n < 0 => Err(Error::Thrown { message: "no negative totals".into(), token: 8 }),
                    n => Ok(Value::Integer(n)),
                },
                _ => Ok(Value::Null),
            }
        }
    }

    fn def(name: &str, kind: Kind, id: u32, invoker: &Arc<Fake>) -> Definition {
        Definition { name: name.into(), arity: 1, kind, deterministic: true, direct_only: false, id, invoker: invoker.clone() }
    }

    #[test]
    fn a_function_added_while_a_snapshot_is_held_is_applied_after_ending_it() {
        // A reader holding a snapshot has a statement active, and SQLite refuses to replace
        // a function then; `sync_with` ends the snapshot first, decided on the counts it
        // applies (a function added between a check and the sync would otherwise meet it).
        let fake = Arc::new(Fake(Mutex::default()));
        let catalog = Catalog::default();
        catalog.add_function(def("twice", Kind::Scalar, 1, &fake)).unwrap();
        let reads = |catalog: &Catalog| {
            let conn = crate::read_connection::ReadConnection::new(Connection::open_in_memory().unwrap(), 4);
            conn.execute_batch("CREATE TABLE t(x)").unwrap();
            catalog.sync(&conn).unwrap();
            assert!(conn.hold_snapshot());
            conn
        };
        let (plain, releasing) = (reads(&catalog), reads(&catalog));
        // The same name and arity again: a replacement.
        catalog.add_function(def("twice", Kind::Scalar, 3, &fake)).unwrap();
        let e = catalog.sync(&plain).unwrap_err();
        assert!(matches!(e, Error::Sqlite { code: rusqlite::ffi::SQLITE_BUSY, .. }), "{e:?}");
        let mut ended = false;
        catalog
            .sync_with(&releasing, || {
                ended = true;
                releasing.release_snapshot();
            })
            .unwrap();
        assert!(ended && !releasing.holds_snapshot());
        assert_eq!(releasing.query_row("SELECT twice(4)", [], |r| r.get::<_, i64>(0)).unwrap(), 8);
        // Nothing to apply: the snapshot is left alone.
        assert!(releasing.hold_snapshot());
        catalog.sync_with(&releasing, || panic!("nothing to apply")).unwrap();
        assert!(releasing.holds_snapshot());
    }

    /// A failure no error took (a read interrupted while SQLite cleaned it up) is forgotten
    /// when the next statement starts: one failing with the same message gets its own error.
    #[test]
    fn a_failure_left_by_an_earlier_statement_is_not_taken_by_a_later_one() {
        FAILURE.with(|f| *f.borrow_mut() = Some(Error::Thrown { message: "malformed JSON".into(), token: 9 }));
        let conn = Connection::open_in_memory().unwrap();
        let rule = crate::statement_rules::Rule::Read;
        let e = crate::statement_rules::under(rule, || {
            conn.query_row("SELECT json('x')", [], |r| r.get::<_, String>(0)).map_err(Error::from)
        })
        .unwrap_err();
        assert!(matches!(&e, Error::Sqlite { message, .. } if message == "malformed JSON"), "{e:?}");
    }

    #[test]
    fn functions_added_later_reach_a_connection_and_failures_keep_their_error() {
        let conn = Connection::open_in_memory().unwrap();
        let catalog = Catalog::default();
        let fake = Arc::new(Fake(Mutex::default()));
        catalog.sync(&conn).unwrap();
        catalog.add_function(def("twice", Kind::Scalar, 1, &fake)).unwrap();
        catalog.add_function(def("total", Kind::Aggregate, 2, &fake)).unwrap();
        catalog.sync(&conn).unwrap();
        assert_eq!(conn.query_row("SELECT twice(21)", [], |r| r.get::<_, i64>(0)).unwrap(), 42);
        let sum = "WITH v(x) AS (VALUES (1), (2), (3)) SELECT total(x) FROM v";
        assert_eq!(conn.query_row(sum, [], |r| r.get::<_, i64>(0)).unwrap(), 6);
        let e = Error::from(conn.query_row("SELECT twice('a')", [], |r| r.get::<_, i64>(0)).unwrap_err());
        assert_eq!(e, Error::Thrown { message: "no text here".into(), token: 7 });
        // A failure while SQLite cleans up after the first (the aggregate's final call, which
        // fails too) neither replaces the first nor stays behind for a later statement.
        let both = "WITH v(x) AS (VALUES (-1), ('a')) SELECT total(twice(x)) FROM v";
        let e = Error::from(conn.query_row(both, [], |r| r.get::<_, i64>(0)).unwrap_err());
        assert_eq!(e, Error::Thrown { message: "no text here".into(), token: 7 });
        assert_eq!(take_failure("no negative totals"), None);
        // Nothing new: a sync is a no-op, and the record survives.
        catalog.sync(&conn).unwrap();
        assert_eq!(with_applied(&conn, |a| a.applied).unwrap(), 2);
        assert!(catalog.add_function(def("", Kind::Scalar, 3, &fake)).is_err());
    }
}
