//! quietsqlite's Node-API binding. Thin by design: JS values in (`values`), completions
//! out (`sink`, written by `batch`); every rule about SQL, threads and caching lives in
//! quietsqlite-core.

mod allocator;
mod batch;
#[cfg(feature = "test-hooks")]
mod experiments;
mod functions;
mod handles;
mod request_calls;
mod sink;
mod values;

/// Small blocks from mimalloc, large ones from the system (allocator.rs).
#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use quietsqlite_core::connection::{Cipher, Key, OpenOptions};
use quietsqlite_core::extensions::Extension;
use quietsqlite_core::functions::{Definition, Kind, Op};
use quietsqlite_core::{
    BatchSets, Database, Error as CoreError, Inline, InlineReader, IterateJob, Params, ReadFormat, ReadJob, ReadOutput,
    SqlText, Statements, TxMode, WriteJob, WriteKind,
};
use sink::NodeSink;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use values::ParamError;

/// Throws a TypeError/RangeError (or the pending napi failure) and tells napi-rs not to
/// throw again.
fn throw(env: &Env, e: ParamError) -> napi::Error {
    let raw = env.raw();
    // SAFETY: on the JS thread, with the env of the current call.
    unsafe {
        match e {
            ParamError::Type(m) => throw_msg(raw, m, sys::napi_throw_type_error),
            ParamError::Range(m) => throw_msg(raw, m, sys::napi_throw_range_error),
            ParamError::Napi(status) => {
                // A JS exception raised while converting (a throwing getter) is the caller's
                // error as it is. Any other failure of Node-API is ours: an error that says so,
                // not a bare status code with an empty message.
                let mut pending = false;
                sys::napi_is_exception_pending(raw, &mut pending);
                if !pending {
                    let c = std::ffi::CString::new(format!("Node-API failed ({status}) while converting a value (a bug)"))
                        .unwrap_or_default();
                    sys::napi_throw_error(raw, c"ERR_QUIETSQLITE_INTERNAL".as_ptr(), c.as_ptr());
                }
            }
        }
    }
    napi::Error::from_status(Status::PendingException)
}

unsafe fn throw_msg(
    env: sys::napi_env,
    msg: String,
    f: unsafe extern "C" fn(sys::napi_env, *const std::ffi::c_char, *const std::ffi::c_char) -> sys::napi_status,
) {
    let c = std::ffi::CString::new(msg.replace('\0', "\\0")).unwrap_or_default();
    f(env, std::ptr::null(), c.as_ptr());
}

/// A core error raised synchronously (closed database, read-only) as a JS error the TS
/// layer recognises: `[kind, message, code, errno, sql]` on `err.quietsqlite`.
fn core_error(env: &Env, e: CoreError) -> napi::Error {
    // SAFETY: on the JS thread, with the env of the current call; `text` outlives the call
    // that copies it, and its length is that of a Rust string (below isize::MAX).
    unsafe {
        let raw = env.raw();
        let mut msg = std::ptr::null_mut();
        let text = e.to_string();
        sys::napi_create_string_utf8(raw, text.as_ptr() as *const _, text.len() as isize, &mut msg);
        let mut err = std::ptr::null_mut();
        sys::napi_create_error(raw, std::ptr::null_mut(), msg, &mut err);
        if let Ok(detail) = values::error_to_js(raw, &e) {
            sys::napi_set_named_property(raw, err, c"quietsqlite".as_ptr(), detail);
        }
        sys::napi_throw(raw, err);
    }
    napi::Error::from_status(Status::PendingException)
}

/// Runs an exported method's body so that a panic in it throws a JS error with code
/// ERR_QUIETSQLITE_INTERNAL instead of unwinding into Node-API (which aborts the process).
fn guard<T>(env: &Env, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(throw_panic(env, payload.as_ref())),
    }
}

pub(crate) fn throw_panic(env: &Env, payload: &(dyn std::any::Any + Send)) -> napi::Error {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    let raw = env.raw();
    // SAFETY: called on the JS thread with the env of the current call.
    unsafe {
        let mut pending = false;
        sys::napi_is_exception_pending(raw, &mut pending);
        if !pending {
            let c = std::ffi::CString::new(format!("quietsqlite panicked (a bug): {what}").replace('\0', " "))
                .unwrap_or_default();
            sys::napi_throw_error(raw, c"ERR_QUIETSQLITE_INTERNAL".as_ptr(), c.as_ptr());
        }
    }
    napi::Error::from_status(Status::PendingException)
}

/// Pages per step of `serialize` (4 MiB at 4096-byte pages).
const SERIALIZE_PAGES_PER_STEP: u32 = 1024;

/// The most parameters one statement takes: the JS layer refuses longer lists with it.
#[napi]
pub const MAX_PARAMETERS: u32 = quietsqlite_core::MAX_PARAMETERS;

/// The longest TEXT or BLOB value (SQLite's limit): the JS layer refuses a longer BLOB in a
/// packed batch with it, before anything is copied.
#[napi]
pub const MAX_VALUE_BYTES: u32 = quietsqlite_core::MAX_VALUE_BYTES as u32;

/// Added to a read's `format`: its parameters are the ones its inline attempt converted
/// before it declined (`read_inline`), not the value given, whose getters would run again.
#[napi]
pub const READ_PARKED_PARAMS: u32 = 0x100;

/// `iterate()`'s rows per chunk when `chunkSize` is not given.
#[napi]
pub const DEFAULT_CHUNK_ROWS: u32 = quietsqlite_core::iterate::DEFAULT_CHUNK_ROWS;

/// The largest `chunkSize` `iterate()` takes.
#[napi]
pub const MAX_CHUNK_ROWS: u32 = quietsqlite_core::iterate::MAX_CHUNK_ROWS;
/// The largest `inlineReads.budgetUs` (the JS layer refuses larger ones with it).
#[napi]
pub const MAX_INLINE_BUDGET_US: u32 = quietsqlite_core::inline::MAX_BUDGET_US;
/// How a rekey() failure begins when the file has the new key all the same.
#[napi]
pub const REKEY_DONE: &str = quietsqlite_core::writer::REKEY_DONE;

/// What a call of the function dispatcher asks (`op`, its first argument): the numbers of
/// quietsqlite_core::functions::Op.
#[napi]
pub const FUNCTION_OP_SCALAR: u32 = Op::Scalar as u32;
#[napi]
pub const FUNCTION_OP_STEP: u32 = Op::Step as u32;
#[napi]
pub const FUNCTION_OP_INVERSE: u32 = Op::Inverse as u32;
#[napi]
pub const FUNCTION_OP_VALUE: u32 = Op::Value as u32;
#[napi]
pub const FUNCTION_OP_FINAL: u32 = Op::Final as u32;

#[napi(object)]
pub struct NativeOpenOptions {
    pub readers: u32,
    pub readonly: bool,
    pub busy_timeout: u32,
    /// `[name, value]` pairs, values already rendered as SQL.
    pub pragmas: Vec<Vec<String>>,
    /// `checkpoints: 'external'`: the writer never checkpoints.
    pub external_checkpoints: Option<bool>,
    /// The encryption key's bytes (a passphrase's UTF-8, or a raw key); the JS layer wipes
    /// its copy after the call.
    pub encryption_key: Option<Buffer>,
    /// `encryption_key` is a raw key (a Buffer was given), not a passphrase.
    pub raw_key: Option<bool>,
    pub cipher: Option<String>,
    /// Extension files every connection loads when it opens.
    pub extensions: Option<Vec<String>>,
    /// `inlineReads`: the budget of a read run on the JS thread, in microseconds; absent: off.
    pub inline_budget_us: Option<u32>,
}

/// The key the core applies: `cipher` by its option name (the JS layer checked it).
fn make_key(bytes: &[u8], raw: bool, cipher: Option<&str>) -> std::result::Result<Key, CoreError> {
    let name = cipher.unwrap_or("chacha20");
    let cipher = Cipher::from_name(name).ok_or_else(|| CoreError::Type(format!("unknown cipher '{name}'")))?;
    if raw {
        Key::raw(cipher, bytes)
    } else {
        Key::passphrase(cipher, bytes)
    }
}

#[napi]
pub struct NativeDatabase {
    /// What every call uses; shared with this thread's table of open databases, through
    /// which the calls made per request reach it without the class receiver (handles.rs).
    state: Rc<DatabaseState>,
    /// This database's number in that table.
    handle: u32,
    cleanup: sink::CleanupHook,
}

/// A database's state, for the class's methods (through `Deref`) and for the calls made per
/// request (`db*` functions, by handle).
pub struct DatabaseState {
    /// `inlineReads`: the JS thread's own read connection (`read_inline`); used and dropped
    /// on the JS thread only. First, so that it closes first however the state is dropped
    /// (see `NativeDatabase`'s drop).
    inline: std::cell::RefCell<Option<InlineReader>>,
    /// The parameters an inline read converted before it declined: the reader path takes
    /// them (`read` with `READ_PARKED_PARAMS`) rather than read the caller's again, whose
    /// getters would run twice. The JS thread only.
    parked_params: std::cell::RefCell<Option<quietsqlite_core::Params>>,
    db: Database,
    sink: Arc<NodeSink>,
    /// Prepared statements: the SQL of each id (`prepare_statement`).
    statements: Statements,
    /// Carries user-defined function calls to JS; made by the first `define_function`.
    caller: std::sync::OnceLock<Arc<functions::Caller>>,
}

impl std::ops::Deref for NativeDatabase {
    type Target = DatabaseState;

    fn deref(&self) -> &DatabaseState {
        &self.state
    }
}

fn tx_of(tx: u32) -> Option<u32> {
    (tx != 0).then_some(tx)
}

fn read_format(format: u32) -> ReadFormat {
    match format {
        1 => ReadFormat::Rows { max_rows: Some(1) },
        2 => ReadFormat::Json,
        3 => ReadFormat::Describe,
        _ => ReadFormat::Rows { max_rows: None },
    }
}

#[napi]
impl NativeDatabase {
    /// Starts the threads; `open_id` completes through `on_complete` once connections are open.
    #[napi(constructor)]
    pub fn new(
        env: Env,
        path: String,
        options: NativeOpenOptions,
        on_complete: Unknown,
        open_id: u32,
    ) -> Result<Self> {
        guard(&env, || {
            NativeDatabase::start(&env, path, options, on_complete, |opts, sink| Database::open(opts, sink, open_id))
        })
    }

    /// Opens a copy of serialized database `bytes` (see `Database::deserialize`); `open_id`
    /// completes like the constructor's.
    #[napi(factory)]
    pub fn deserialize(
        env: Env,
        bytes: Buffer,
        options: NativeOpenOptions,
        on_complete: Unknown,
        open_id: u32,
    ) -> Result<Self> {
        guard(&env, || {
            // Checked before the copy is allocated.
            quietsqlite_core::backup::check_serialized(&bytes).map_err(|e| core_error(&env, e))?;
            let copy = bytes.to_vec();
            NativeDatabase::start(&env, ":memory:".into(), options, on_complete, |opts, sink| {
                Database::deserialize(copy, opts, sink, open_id)
            })
        })
    }

    /// Copies the database (a snapshot) to `dest` on a reader thread; `progress_id`, if
    /// given, receives `[remaining, total]` reports; `id` completes when the file is in place.
    #[napi]
    pub fn backup(
        &self,
        env: Env,
        id: u32,
        dest: String,
        pages_per_step: u32,
        progress_id: Option<u32>,
        cancellable: Option<bool>,
    ) -> Result<()> {
        guard(&env, || {
            let job = quietsqlite_core::BackupJob {
                id,
                target: quietsqlite_core::BackupTarget::File(dest.into()),
                pages_per_step,
                progress_id,
                cancellable: cancellable.unwrap_or(false),
            };
            self.db.backup(job).map_err(|e| core_error(&env, e))
        })
    }

    /// The main database's bytes (a snapshot, as on disk: encrypted if the file is);
    /// refused when larger than `max_bytes` (the largest Buffer).
    #[napi]
    pub fn serialize(&self, env: Env, id: u32, max_bytes: f64, cancellable: Option<bool>) -> Result<()> {
        guard(&env, || {
            let job = quietsqlite_core::BackupJob {
                id,
                target: quietsqlite_core::BackupTarget::Bytes { max_bytes: max_bytes.max(0.0) as u64 },
                // Large steps (nothing reports progress); cancellation is looked at between them.
                pages_per_step: SERIALIZE_PAGES_PER_STEP,
                progress_id: None,
                cancellable: cancellable.unwrap_or(false),
            };
            self.db.backup(job).map_err(|e| core_error(&env, e))
        })
    }

    /// `executeBatch` with sets converted value by value. With `first_part_end`, this is a
    /// large batch's first part, its sets before that index: the others follow with
    /// `batch_part`/`batch_part_packed`, then `end_batch` (docs/experiments/060-batch-in-parts.md).
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn execute_batch(
        &self,
        env: Env,
        id: u32,
        tx: u32,
        sql: Unknown,
        param_sets: Unknown,
        cancellable: Option<bool>,
        first_part_end: Option<u32>,
    ) -> Result<()> {
        guard(&env, || {
            // The SQL first, as `read` takes it.
            let sql = self.sql_of(&env, sql)?;
            let sets = sets_of(&env, param_sets, 0, first_part_end)?;
            self.send_batch(&env, id, tx, sql, sets, cancellable, first_part_end.is_some())
        })
    }

    /// `executeBatch` with positional sets packed by the JS side (experiment 005): a few
    /// copies instead of one conversion per value; the JS side has validated every value.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn execute_batch_packed(
        &self,
        env: Env,
        id: u32,
        tx: u32,
        sql: Unknown,
        set_lens: Uint32Array,
        tags: Uint8Array,
        nums: Float64Array,
        bigs: BigInt64Array,
        text: String,
        blobs: Buffer,
        cancellable: Option<bool>,
        in_parts: Option<bool>,
    ) -> Result<()> {
        guard(&env, || {
            let sql = self.sql_of(&env, sql)?;
            let sets = packed_of(&env, set_lens, tags, nums, bigs, text, blobs)?;
            self.send_batch(&env, id, tx, sql, sets, cancellable, in_parts == Some(true))
        })
    }

    /// The next part of the batch being sent in parts: `param_sets[from..to)`, converted
    /// value by value.
    #[napi]
    pub fn batch_part(&self, env: Env, param_sets: Unknown, from: u32, to: u32) -> Result<()> {
        guard(&env, || {
            let sets = sets_of(&env, param_sets, from, Some(to))?;
            self.db.batch_part(sets).map_err(|e| core_error(&env, e))
        })
    }

    /// The next part of the batch being sent in parts, packed.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn batch_part_packed(
        &self,
        env: Env,
        set_lens: Uint32Array,
        tags: Uint8Array,
        nums: Float64Array,
        bigs: BigInt64Array,
        text: String,
        blobs: Buffer,
    ) -> Result<()> {
        guard(&env, || {
            let sets = packed_of(&env, set_lens, tags, nums, bigs, text, blobs)?;
            self.db.batch_part(sets).map_err(|e| core_error(&env, e))
        })
    }

    /// Ends the batch being sent in parts: `complete`, every part was sent; otherwise (a part
    /// could not be prepared) it rolls back and posts no completion.
    #[napi]
    pub fn end_batch(&self, env: Env, complete: bool) -> Result<()> {
        guard(&env, || {
            self.db.end_batch(complete);
            Ok(())
        })
    }

    /// A nested transaction's savepoint at `depth` (1 = first level). `op` (`SavepointOp` in
    /// src/transaction.ts): 0 begins it, 1 releases it, 2 rolls back to it and releases it,
    /// 3 rolls back to it and keeps it open.
    #[napi]
    pub fn savepoint(&self, env: Env, id: u32, tx: u32, op: u32, depth: u32) -> Result<()> {
        guard(&env, || {
            let kind = match op {
                0 => WriteKind::Savepoint { depth },
                1 => WriteKind::Release { depth },
                2 => WriteKind::RollbackTo { depth, keep: false },
                3 => WriteKind::RollbackTo { depth, keep: true },
                _ => return Err(Error::new(Status::InvalidArg, "unknown savepoint operation")),
            };
            self.submit(&env, id, tx, kind, None)
        })
    }

    /// Cancels a request sent with `cancellable`. Returns 0: it already finished (its
    /// completion is on its way); 1: it was queued and never runs (no completion follows);
    /// 2: it is running and is being interrupted (its completion follows).
    /// Changes the encryption key on the writer (`key` None: decrypts); the readers follow.
    /// `cipher` is the database's (the JS layer keeps it).
    #[napi]
    pub fn rekey(&self, env: Env, id: u32, key: Option<Buffer>, raw: bool, cipher: Option<String>) -> Result<()> {
        guard(&env, || {
            let key = match &key {
                Some(bytes) => Some(Arc::new(make_key(bytes, raw, cipher.as_deref()).map_err(|e| core_error(&env, e))?)),
                None => None,
            };
            // The writer may need the file to itself (leaving WAL mode); the JS layer sends
            // no inline read until the rekey settled, and the next one reopens with the key.
            if let Some(inline) = self.inline.borrow_mut().as_mut() {
                inline.close_connection();
            }
            self.submit(&env, id, 0, WriteKind::Rekey { key }, Some(false))
        })
    }

    /// Registers a user-defined function on every connection (open ones before their next
    /// job). `kind`: 0 scalar, 1 aggregate, 2 window. `flags`: 1 deterministic, 2 direct
    /// only. `dispatcher(op, id, state, args)` runs every call (the first one given is kept);
    /// `int_mode`: 0 auto, 1 number, 2 bigint.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn define_function(
        &self,
        env: Env,
        name: String,
        id: u32,
        arity: i32,
        kind: u32,
        flags: u32,
        dispatcher: Unknown,
        int_mode: u32,
    ) -> Result<()> {
        guard(&env, || {
            let caller = match self.caller.get() {
                Some(c) => c.clone(),
                None => {
                    // SAFETY: the JS thread, this call's env, and a value of this call.
                    let c = unsafe { functions::Caller::new(env.raw(), dispatcher.raw(), int_mode) }
                        .map_err(|s| napi::Error::from_status(Status::from(s)))?;
                    let _ = self.caller.set(c.clone());
                    c
                }
            };
            let kind = match kind {
                0 => Kind::Scalar,
                1 => Kind::Aggregate,
                _ => Kind::Window,
            };
            let def = Definition {
                name,
                arity,
                kind,
                deterministic: flags & 1 != 0,
                direct_only: flags & 2 != 0,
                id,
                invoker: caller,
            };
            self.db.catalog().add_function(def).map_err(|e| core_error(&env, e))
        })
    }

    /// Loads an extension on the writer, then on every other connection (open ones before
    /// their next job, later ones when they open).
    #[napi]
    pub fn load_extension(&self, env: Env, id: u32, path: String, entry_point: Option<String>) -> Result<()> {
        guard(&env, || {
            let extension = Extension::new(path, entry_point).map_err(|e| core_error(&env, e))?;
            self.submit(&env, id, 0, WriteKind::LoadExtension { extension }, Some(false))
        })
    }

    #[napi]
    pub fn cancel(&self, env: Env, id: u32) -> Result<u32> {
        guard(&env, || Ok(self.db.cancel(id) as u32))
    }

    /// Stops accepting requests; `id` completes when every connection is closed.
    #[napi]
    pub fn close(&self, env: Env, id: u32) -> Result<()> {
        guard(&env, || {
            if let Some(inline) = self.inline.borrow_mut().as_mut() {
                inline.shut();
            }
            self.db.close(id);
            Ok(())
        })
    }

    /// For `close({ force: true })`: interrupts running statements; queued requests fail as
    /// closed without running.
    #[napi]
    pub fn stop_all(&self, env: Env) -> Result<()> {
        guard(&env, || {
            self.db.stop_all();
            Ok(())
        })
    }

    /// Stops delivering completions (after the close completion arrived).
    #[napi]
    pub fn dispose(&mut self, env: Env) -> Result<()> {
        guard(&env, || {
            self.sink.release();
            self.cleanup.remove();
            if let Some(c) = self.caller.get() {
                c.release();
            }
            Ok(())
        })
    }

    /// This database's number for the `db*` functions (handles.rs).
    #[napi(getter)]
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Opens an iterator (`db.iterate`): its chunks arrive as `[rows, done]` completions
    /// with `id`; `chunk_rows` rows at most per chunk.
    #[napi]
    pub fn iterate(&self, env: Env, id: u32, sql: String, params: Unknown, chunk_rows: u32) -> Result<()> {
        guard(&env, || {
            // SAFETY: the JS thread, this call's env, and a value of this call.
            let params = unsafe { values::to_params(env.raw(), params.raw(), "params") }.map_err(|e| throw(&env, e))?;
            self.db.iterate(IterateJob { id, sql, params, chunk_rows }).map_err(|e| core_error(&env, e))
        })
    }

    /// The iterator started handing out its last chunk: the reader steps the next one.
    #[napi]
    pub fn iterate_next(&self, env: Env, id: u32) -> Result<()> {
        guard(&env, || {
            self.db.iterate_next(id);
            Ok(())
        })
    }

    /// Ends an iterator early; its reader is released.
    #[napi]
    pub fn iterate_end(&self, env: Env, id: u32) -> Result<()> {
        guard(&env, || {
            self.db.iterate_end(id);
            Ok(())
        })
    }

    /// `id` completes with the diagnostics object (see `db.diagnostics()`).
    #[napi]
    pub fn diagnostics(&self, env: Env, id: u32) -> Result<()> {
        guard(&env, || self.db.diagnostics(id).map_err(|e| core_error(&env, e)))
    }

    /// Subscribes a live query; emissions arrive as completions with `id` until unsubscribed.
    #[napi]
    pub fn subscribe(&self, env: Env, id: u32, sql: Unknown, params: Unknown, max_delay_ms: u32) -> Result<()> {
        guard(&env, || {
            // The SQL first, as `read` takes it.
            let sql = self.sql_of(&env, sql)?;
            // SAFETY: the JS thread, this call's env, and a value of this call.
            let params = unsafe { values::to_params(env.raw(), params.raw(), "params") }.map_err(|e| throw(&env, e))?;
            self.db
                .subscribe(id, sql, params, Duration::from_millis(max_delay_ms as u64))
                .map_err(|e| core_error(&env, e))
        })
    }

    /// The emission last delivered to subscription `id` was consumed.
    #[napi]
    pub fn acknowledge(&self, env: Env, id: u32) -> Result<()> {
        guard(&env, || {
            self.db.acknowledge(id);
            Ok(())
        })
    }

    #[napi]
    pub fn unsubscribe(&self, env: Env, id: u32) -> Result<()> {
        guard(&env, || {
            self.db.unsubscribe(id);
            Ok(())
        })
    }

    /// Registers a prepared statement's SQL; the returned id stands for it in every method
    /// that takes `sql`. The text is checked when first used, as the same text given
    /// directly would be.
    #[napi]
    pub fn prepare_statement(&self, env: Env, sql: String) -> Result<u32> {
        guard(&env, || self.statements.register(sql).map_err(|e| core_error(&env, e)))
    }

    /// Forgets a prepared statement (closed, or its object collected). Requests already
    /// sent with its id have their SQL and are not affected.
    #[napi]
    pub fn release_statement(&self, env: Env, id: u32) -> Result<()> {
        guard(&env, || {
            self.statements.release(id);
            Ok(())
        })
    }
}

/// Deletes the files quietsqlite made for its own use and has not deleted yet (behind
/// `:memory:` databases, backups under way): the process is exiting.
#[napi]
pub fn remove_scratch_files(env: Env) -> Result<()> {
    guard(&env, || {
        quietsqlite_core::scratch_files::remove_all();
        Ok(())
    })
}

/// What names the file `path` names (see `Location::file_identities`).
#[napi]
pub fn database_file_identities(env: Env, path: String) -> Result<Vec<String>> {
    guard(&env, || Ok(quietsqlite_core::connection::Location::file_identities(&path)))
}

/// Test and experiment entry points: built only with the `test-hooks` feature (`npm test`
/// builds it), never into the published addon (docs/decisions.md).
#[cfg(feature = "test-hooks")]
#[napi]
impl NativeDatabase {
    /// `[groups, reruns]`: live-query statistics, for tests and benchmarks.
    #[napi]
    pub fn live_stats(&self) -> Vec<f64> {
        let (groups, runs) = self.db.live().stats();
        vec![groups as f64, runs as f64]
    }

    /// Rows stepped so far by open iterator `id` (-1 when it is not open).
    #[napi]
    pub fn iterate_stepped(&self, id: u32) -> f64 {
        self.db.iterate_stepped(id).map_or(-1.0, |n| n as f64)
    }

    /// EXPERIMENT (docs/experiments/001-result-path.md): rows built with Node-API calls.
    #[napi]
    pub fn experiment_native_rows(&self, env: Env, encoded: Buffer) -> Result<Unknown<'_>> {
        let _ = self;
        guard(&env, || {
            // SAFETY: called on the JS thread with this call's env; the value returned by
            // rows_from_encoding was created in that env and is returned at once.
            unsafe {
                let v = experiments::rows_from_encoding(env.raw(), &encoded)
                    .map_err(|s| napi::Error::from_status(Status::from(s)))?;
                Ok(Unknown::from_raw_unchecked(env.raw(), v))
            }
        })
    }

    /// `[kept, bytes, reused by size, reused largest]` of the process's result pool (proves
    /// results are written into collected results' memory).
    #[napi]
    pub fn result_pool_stats(&self) -> Vec<f64> {
        let pool = &quietsqlite_core::buffer_pool::RESULTS;
        let (kept, bytes, _, _) = pool.stats();
        let (by_size, largest) = pool.reused_by_kind();
        vec![kept as f64, bytes as f64, by_size as f64, largest as f64]
    }

    /// How many prepared statements are registered (proves collected ones are freed).
    #[napi]
    pub fn statement_count(&self) -> u32 {
        self.statements.count() as u32
    }

    /// A reader thread panics while serving request `id`.
    #[napi]
    pub fn panic_for_tests(&self, env: Env, id: u32) -> Result<()> {
        guard(&env, || self.db.panic_for_tests(id).map_err(|e| core_error(&env, e)))
    }

    /// Panics on the JS thread inside this exported method (`place` 0), or (`place` 1) in
    /// the conversion of the next completion delivered to JS.
    #[napi]
    pub fn panic_on_js_thread(&self, env: Env, place: u32) -> Result<()> {
        guard(&env, || {
            if place == 1 {
                batch::PANIC_IN_NEXT_DELIVERY.store(true, std::sync::atomic::Ordering::SeqCst);
                return Ok(());
            }
            panic!("panic_on_js_thread: a test panic in an exported method")
        })
    }
}

impl Drop for NativeDatabase {
    fn drop(&mut self) {
        handles::remove(self.handle);
        // Collected without close(): the core drains and stops its threads; nothing more
        // may reach JS. Runs in a finalizer: a panic must not unwind into Node.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // The inline connection closes first, here on the JS thread: the files of a
            // `:memory:` database are removed once the threads' connections are closed.
            if let Ok(mut inline) = self.inline.try_borrow_mut() {
                *inline = None;
            }
            self.sink.release();
            self.cleanup.remove();
            if let Some(c) = self.caller.get() {
                c.release();
            }
        }));
    }
}

impl NativeDatabase {
    /// What the constructor and `deserialize` share: the completion channel, the options,
    /// then `open` (which starts the threads).
    fn start(
        env: &Env,
        path: String,
        options: NativeOpenOptions,
        on_complete: Unknown,
        open: impl FnOnce(OpenOptions, Arc<NodeSink>) -> std::result::Result<Database, CoreError>,
    ) -> Result<Self> {
        // SAFETY: the JS thread, this call's env, and a callback value of this call.
        let sink = unsafe { NodeSink::new(env.raw(), on_complete.raw()) }
            .map_err(|s| napi::Error::from_status(Status::from(s)))?;
        let inline_budget_us = options.inline_budget_us;
        // A failure from here on returns no object whose drop would release the sink: it is
        // released here, or its threadsafe function (and the callback it holds) would stay.
        let db = match Self::open_with(env, path, options, &sink, open) {
            Ok(db) => db,
            Err(e) => {
                sink.release();
                return Err(e);
            }
        };
        let cleanup = sink::CleanupHook::add(env.raw(), &sink, db.abandoner());
        let inline = inline_budget_us
            .filter(|&us| us > 0)
            .map(|us| db.inline_reader(Duration::from_micros(us.into())));
        let state = Rc::new(DatabaseState {
            db,
            sink,
            statements: Statements::default(),
            caller: std::sync::OnceLock::new(),
            inline: std::cell::RefCell::new(inline),
            parked_params: std::cell::RefCell::new(None),
        });
        let handle = handles::add(env.raw(), state.clone());
        Ok(NativeDatabase { state, handle, cleanup })
    }

    /// `start`'s part after the completion channel: the options, keys, then `open`.
    fn open_with(
        env: &Env,
        path: String,
        options: NativeOpenOptions,
        sink: &Arc<NodeSink>,
        open: impl FnOnce(OpenOptions, Arc<NodeSink>) -> std::result::Result<Database, CoreError>,
    ) -> Result<Database> {
        let mut opts = OpenOptions::new(path);
        opts.readers = options.readers as usize;
        opts.readonly = options.readonly;
        opts.busy_timeout_ms = options.busy_timeout;
        opts.external_checkpoints = options.external_checkpoints.unwrap_or(false);
        opts.pragmas = options
            .pragmas
            .into_iter()
            .filter_map(|p| match <[String; 2]>::try_from(p) {
                Ok([k, v]) => Some((k, v)),
                Err(_) => None,
            })
            .collect();
        for path in options.extensions.unwrap_or_default() {
            opts.catalog.add_extension(Extension::new(path, None).map_err(|e| core_error(env, e))?);
        }
        if let Some(bytes) = &options.encryption_key {
            let key = make_key(bytes, options.raw_key.unwrap_or(false), options.cipher.as_deref())
                .map_err(|e| core_error(env, e))?;
            opts.encryption = Some(Arc::new(key));
        }
        open(opts, sink.clone()).map_err(|e| core_error(env, e))
    }
}

impl DatabaseState {
    /// A read on the reader threads. `format`: 0 rows, 1 first row only, 2 JSON.
    /// `cancellable`: `cancel(id)` may be called for it (see `cancel`).
    #[allow(clippy::too_many_arguments)]
    pub fn read(&self, env: Env, id: u32, sql: Unknown, params: Unknown, format: u32, cancellable: Option<bool>, packed_text: Option<sys::napi_value>) -> Result<()> {
        guard(&env, || {
            // The SQL first: a getter of the parameters may close a statement, whose number
            // then goes to the next one registered (the text taken here is kept).
            let sql = self.sql_text_of(&env, sql)?;
            let params = if format & READ_PARKED_PARAMS != 0 {
                self.parked_params
                    .borrow_mut()
                    .take()
                    .ok_or_else(|| Error::new(Status::GenericFailure, "no parameters were kept for this read"))?
            } else {
                // Kept parameters that no read took (the request was refused before it was
                // sent) go now, not at the next inline read.
                if let Ok(mut kept) = self.parked_params.try_borrow_mut() {
                    kept.take();
                }
                // SAFETY: the JS thread, this call's env, and values of this call.
                unsafe { values::request_params(env.raw(), params.raw(), packed_text) }.map_err(|e| throw(&env, e))?
            };
            self.db
                .read(ReadJob { id, sql, params, format: read_format(format & !READ_PARKED_PARAMS), cancellable: cancellable.unwrap_or(false) })
                .map_err(|e| core_error(&env, e))
        })
    }

    /// `inlineReads`: runs a read here, on the JS thread, under the budget. Returns the
    /// result as the completion of `read` would deliver it, or null: not eligible, over
    /// budget, or failed (then `read` runs it on a reader, which reports any error itself).
    /// Rows that fit in `scratch` (a Buffer the caller keeps and decodes at once) are
    /// copied there and their length returned instead: no new Buffer per read (022).
    /// Parameters are converted as `read` converts them (and fail the same way). `true`:
    /// declined after the parameters were converted; they are kept for the `read` that
    /// follows (with `READ_PARKED_PARAMS`).
    pub fn read_inline(
        &self,
        env: Env,
        sql: Unknown,
        params: Unknown,
        format: u32,
        scratch: Unknown,
    ) -> Result<Option<Unknown<'static>>> {
        guard(&env, || {
            let format = read_format(format);
            // The connection is not borrowed while the parameters are converted: their getters
            // are JavaScript, which may close the database or rekey it (both take the
            // connection; a borrow held here made them panic). A nested read just declines.
            let sql = self.sql_text_of(&env, sql)?;
            let closes = {
                let Ok(mut slot) = self.inline.try_borrow_mut() else { return Ok(None) };
                let Some(inline) = slot.as_mut() else { return Ok(None) };
                if self.db.is_closed() || !inline.wants(&sql, format) {
                    return Ok(None);
                }
                inline.closes()
            };
            // SAFETY: the JS thread, this call's env, and a value of this call.
            let params = unsafe { values::to_params(env.raw(), params.raw(), "params") }.map_err(|e| throw(&env, e))?;
            let declined = |params| -> Result<Option<Unknown<'static>>> {
                *self.parked_params.borrow_mut() = Some(params);
                // SAFETY: the JS thread and this call's env; the value is returned at once.
                unsafe {
                    let v = values::boolean(env.raw(), true).map_err(|s| napi::Error::from_status(Status::from(s)))?;
                    Ok(Some(Unknown::from_raw_unchecked(env.raw(), v)))
                }
            };
            let Ok(mut slot) = self.inline.try_borrow_mut() else { return declined(params) };
            let Some(inline) = slot.as_mut() else { return declined(params) };
            // Closed or re-keyed by a getter: the reader path decides (and reports it).
            if self.db.is_closed() || inline.closes() != closes {
                drop(slot);
                return declined(params);
            }
            let out = match inline.run(&sql, &params, format) {
                Ok(Inline::Done(out)) => out,
                Ok(Inline::OverBudget | Inline::NotEligible) | Err(_) => {
                    drop(slot);
                    return declined(params);
                }
            };
            // SAFETY: the JS thread, this call's env and values of this call; the value made
            // is returned at once.
            unsafe {
                let v = match out {
                    ReadOutput::Rows(rows) if values::copy_into(env.raw(), scratch.raw(), &rows.bytes) => {
                        values::number(env.raw(), rows.bytes.len() as f64)
                    }
                    // JSON is handed to the caller: always a Buffer of its own.
                    other => values::read_output_to_js(env.raw(), other),
                }
                .map_err(|s| napi::Error::from_status(Status::from(s)))?;
                Ok(Some(Unknown::from_raw_unchecked(env.raw(), v)))
            }
        })
    }

    /// A read on the writer connection (inside a transaction: sees its uncommitted writes).
    #[allow(clippy::too_many_arguments)]
    pub fn writer_read(
        &self,
        env: Env,
        id: u32,
        tx: u32,
        sql: Unknown,
        params: Unknown,
        format: u32,
        cancellable: Option<bool>,
        packed_text: Option<sys::napi_value>,
    ) -> Result<()> {
        guard(&env, || {
            // The SQL first, as `read` takes it.
            let sql = self.sql_text_of(&env, sql)?;
            // SAFETY: the JS thread, this call's env, and values of this call.
            let params = unsafe { values::request_params(env.raw(), params.raw(), packed_text) }.map_err(|e| throw(&env, e))?;
            self.submit(&env, id, tx, WriteKind::Read { sql, params, format: read_format(format) }, cancellable)
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub fn execute(&self, env: Env, id: u32, tx: u32, sql: Unknown, params: Unknown, cancellable: Option<bool>, packed_text: Option<sys::napi_value>) -> Result<()> {
        guard(&env, || {
            // The SQL first, as `read` takes it.
            let sql = self.sql_text_of(&env, sql)?;
            // SAFETY: the JS thread, this call's env, and values of this call.
            let params = unsafe { values::request_params(env.raw(), params.raw(), packed_text) }.map_err(|e| throw(&env, e))?;
            self.submit(&env, id, tx, WriteKind::Execute { sql, params }, cancellable)
        })
    }

    /// `mode`: 0 deferred, 1 immediate, 2 exclusive. `silent`: no completion when it works
    /// (see `WriteKind::Begin`).
    pub fn begin(&self, env: Env, id: u32, tx: u32, mode: u32, silent: bool) -> Result<()> {
        guard(&env, || {
            let mode = match mode {
                0 => TxMode::Deferred,
                2 => TxMode::Exclusive,
                _ => TxMode::Immediate,
            };
            self.submit(&env, id, tx, WriteKind::Begin { mode, silent }, None)
        })
    }

    pub fn commit(&self, env: Env, id: u32, tx: u32) -> Result<()> {
        guard(&env, || {
            self.submit(&env, id, tx, WriteKind::Commit, None)
        })
    }

    pub fn rollback(&self, env: Env, id: u32, tx: u32) -> Result<()> {
        guard(&env, || {
            self.submit(&env, id, tx, WriteKind::Rollback, None)
        })
    }

    /// Writes the completions that arrive within `max_micros` (at most 1000) into `scratch`
    /// (batch.rs) and returns the array of their other payloads, null when there are none,
    /// or undefined when nothing came (`{ scratch, values }` when the batch had to go into
    /// a new Buffer, see `batch::write`). The JS thread waits briefly for a result it expects
    /// soon instead of sleeping in the event loop (experiment 019), and takes with 0 when
    /// the completion callback wakes it.
    pub fn take_completions(&self, env: Env, max_micros: u32, scratch: Unknown) -> Result<Unknown<'static>> {
        guard(&env, || {
            let max = Duration::from_micros(u64::from(max_micros.min(1000)));
            // A write in flight: the result may come from the writer (see core's spin.rs).
            let yield_first = max_micros > 0 && self.db.writes_unfinished();
            // SAFETY: the JS thread, with this call's env and a value of this call.
            let taken = unsafe { self.sink.take_within(env.raw(), max, yield_first, scratch.raw()) }
                .map_err(|status| napi::Error::from_status(Status::from(status)))?;
            let raw = match taken {
                Some(values) => values,
                None => {
                    let mut undefined = std::ptr::null_mut();
                    // SAFETY: the JS thread, with this call's env.
                    unsafe { sys::napi_get_undefined(env.raw(), &mut undefined) };
                    undefined
                }
            };
            // SAFETY: a value created in this call's scope.
            Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), raw) })
        })
    }

    /// `sql_text_of` as a `String` of its own, for the requests that keep one.
    fn sql_of(&self, env: &Env, sql: Unknown) -> Result<String> {
        self.sql_text_of(env, sql).map(SqlText::into_string)
    }

    /// `sql` as the JS layer sends it: SQL text, or the number of a registered statement
    /// (made by `prepare`, or for a text sent before: src/sql-texts.ts), whose text is
    /// shared, not copied. Text is read straight away (no type check first: the hot path of
    /// every query); only when Node-API says it is not a string is it taken as a number.
    fn sql_text_of(&self, env: &Env, sql: Unknown) -> Result<SqlText> {
        // SAFETY: the JS thread, this call's env, and a value of this call.
        match unsafe { values::get_string(env.raw(), sql.raw(), &|| "the SQL text".to_string()) } {
            Ok(text) => Ok(SqlText::Own(text)),
            Err(ParamError::Napi(sys::Status::napi_string_expected)) => {
                let mut id = 0u32;
                // SAFETY: as above; `id` is a valid out-pointer.
                let status = unsafe { sys::napi_get_value_uint32(env.raw(), sql.raw(), &mut id) };
                if status != sys::Status::napi_ok {
                    return Err(throw(env, ParamError::Type("sql must be a string".into())));
                }
                self.statements.sql(id).map(SqlText::Registered).map_err(|e| core_error(env, e))
            }
            Err(e) => Err(throw(env, e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn send_batch(&self, env: &Env, id: u32, tx: u32, sql: String, sets: BatchSets, cancellable: Option<bool>, in_parts: bool) -> Result<()> {
        if in_parts {
            return self
                .db
                .write_batch_in_parts(id, tx_of(tx), sql, sets, cancellable.unwrap_or(false))
                .map_err(|e| core_error(env, e));
        }
        self.submit(env, id, tx, WriteKind::Batch { sql, sets, later: None }, cancellable)
    }

    fn submit(&self, env: &Env, id: u32, tx: u32, kind: WriteKind, cancellable: Option<bool>) -> Result<()> {
        let job = WriteJob { id, tx: tx_of(tx), kind, cancellable: cancellable.unwrap_or(false) };
        self.db.write(job).map_err(|e| core_error(env, e))
    }
}

/// `executeBatch`'s sets from index `from` up to `to` (or the end), converted value by value.
fn sets_of(env: &Env, param_sets: Unknown, from: u32, to: Option<u32>) -> Result<BatchSets> {
    // SAFETY: the JS thread, this call's env, and a value of this call.
    let sets: Vec<Params> =
        unsafe { values::to_param_sets(env.raw(), param_sets.raw(), from, to) }.map_err(|e| throw(env, e))?;
    Ok(BatchSets::Each(sets))
}

/// `executeBatch`'s sets as the JS side packed them, checked for consistency.
fn packed_of(
    env: &Env,
    set_lens: Uint32Array,
    tags: Uint8Array,
    nums: Float64Array,
    bigs: BigInt64Array,
    text: String,
    blobs: Buffer,
) -> Result<BatchSets> {
    let packed = quietsqlite_core::PackedSets {
        set_lens: set_lens.to_vec(),
        tags: tags.to_vec(),
        nums: nums.to_vec(),
        bigs: bigs.to_vec(),
        text: text.into_bytes(),
        // Each BLOB was checked against SQLite's limit by the JS side, naming it, and again
        // by `check`; the copy of them all is made without aborting when memory runs out.
        blobs: values::copy_bytes(&blobs, &|| "the BLOBs of paramSets".to_string()).map_err(|e| throw(env, e))?,
    };
    packed.check().map_err(|e| core_error(env, e))?;
    Ok(BatchSets::Packed(packed))
}

// The calls made for every request go through these functions, by the database's number,
// and not through the class's methods: napi-rs checks a method's receiver by locking a
// process-wide table of borrows, which cost ~470 ns per call here against ~200 ns for the
// whole call of a function (docs/experiments/046-calls-by-handle.md).

// `dbRead`, `dbWriterRead`, `dbExecute` and `dbTakeCompletions`, made for every request,
// skip napi-rs's wrappers altogether: see request_calls.rs.

/// `inlineReads`: a read run here, on the JS thread, under the budget (see
/// `DatabaseState::read_inline`).
#[napi]
pub fn db_read_inline(env: Env, handle: u32, sql: Unknown, params: Unknown, format: u32, scratch: Unknown) -> Result<Option<Unknown<'static>>> {
    handles::get(&env, handle)?.read_inline(env, sql, params, format, scratch)
}

/// BEGIN of transaction `tx` (`mode`: 0 deferred, 1 immediate, 2 exclusive). With `silent`,
/// it completes with nothing when it works, and a failure is the error of the transaction's
/// next request (the caller does not wait for it; `id` is then unused).
#[napi]
pub fn db_begin(env: Env, handle: u32, id: u32, tx: u32, mode: u32, silent: bool) -> Result<()> {
    handles::get(&env, handle)?.begin(env, id, tx, mode, silent)
}

/// COMMIT of transaction `tx`.
#[napi]
pub fn db_commit(env: Env, handle: u32, id: u32, tx: u32) -> Result<()> {
    handles::get(&env, handle)?.commit(env, id, tx)
}

/// ROLLBACK of transaction `tx`.
#[napi]
pub fn db_rollback(env: Env, handle: u32, id: u32, tx: u32) -> Result<()> {
    handles::get(&env, handle)?.rollback(env, id, tx)
}

