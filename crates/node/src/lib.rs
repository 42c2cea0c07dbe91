//! quietsqlite's Node-API binding. Thin by design: JS values in (`values`), completions
//! out (`sink`); every rule about SQL, threads and caching lives in quietsqlite-core.

mod experiments;
mod sink;
mod values;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use quietsqlite_core::connection::OpenOptions;
use quietsqlite_core::{
    BatchSets, Database, Error as CoreError, Params, ReadFormat, ReadJob, TxMode, WriteJob, WriteKind,
};
use sink::NodeSink;
use std::sync::Arc;
use std::time::Duration;
use values::ParamError;

/// Throws a TypeError/RangeError (or the pending napi failure) and tells napi-rs not to
/// throw again.
fn throw(env: &Env, e: ParamError) -> napi::Error {
    let raw = env.raw();
    unsafe {
        match e {
            ParamError::Type(m) => throw_msg(raw, m, sys::napi_throw_type_error),
            ParamError::Range(m) => throw_msg(raw, m, sys::napi_throw_range_error),
            ParamError::Napi(status) => return napi::Error::from_status(Status::from(status)),
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

#[napi(object)]
pub struct NativeOpenOptions {
    pub readers: u32,
    pub readonly: bool,
    pub busy_timeout: u32,
    /// `[name, value]` pairs, values already rendered as SQL.
    pub pragmas: Vec<Vec<String>>,
}

#[napi]
pub struct NativeDatabase {
    db: Database,
    sink: Arc<NodeSink>,
    cleanup: sink::CleanupHook,
}

fn tx_of(tx: u32) -> Option<u32> {
    (tx != 0).then_some(tx)
}

fn read_format(format: u32) -> ReadFormat {
    match format {
        1 => ReadFormat::Rows { max_rows: Some(1) },
        2 => ReadFormat::Json,
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
        let sink = unsafe { NodeSink::new(env.raw(), on_complete.raw()) }
            .map_err(|s| napi::Error::from_status(Status::from(s)))?;
        let mut opts = OpenOptions::new(path);
        opts.readers = options.readers as usize;
        opts.readonly = options.readonly;
        opts.busy_timeout_ms = options.busy_timeout;
        opts.pragmas = options
            .pragmas
            .into_iter()
            .filter_map(|p| match <[String; 2]>::try_from(p) {
                Ok([k, v]) => Some((k, v)),
                Err(_) => None,
            })
            .collect();
        let db = Database::open(opts, sink.clone(), open_id).map_err(|e| core_error(&env, e))?;
        let cleanup = sink::CleanupHook::add(env.raw(), &sink, db.abandoner());
        Ok(NativeDatabase { db, sink, cleanup })
    }

    /// A read on the reader threads. `format`: 0 rows, 1 first row only, 2 JSON.
    /// `cancellable`: `cancel(id)` may be called for it (see `cancel`).
    #[napi]
    pub fn read(&self, env: Env, id: u32, sql: String, params: Unknown, format: u32, cancellable: Option<bool>) -> Result<()> {
        let params = unsafe { values::to_params(env.raw(), params.raw(), "params") }.map_err(|e| throw(&env, e))?;
        let cancellable = cancellable.unwrap_or(false);
        self.db
            .read(ReadJob { id, sql, params, format: read_format(format), cancellable })
            .map_err(|e| core_error(&env, e))
    }

    /// A read on the writer connection (inside a transaction: sees its uncommitted writes).
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn writer_read(
        &self,
        env: Env,
        id: u32,
        tx: u32,
        sql: String,
        params: Unknown,
        format: u32,
        cancellable: Option<bool>,
    ) -> Result<()> {
        let params = unsafe { values::to_params(env.raw(), params.raw(), "params") }.map_err(|e| throw(&env, e))?;
        self.submit(&env, id, tx, WriteKind::Read { sql, params, format: read_format(format) }, cancellable)
    }

    #[napi]
    pub fn execute(&self, env: Env, id: u32, tx: u32, sql: String, params: Unknown, cancellable: Option<bool>) -> Result<()> {
        let params = unsafe { values::to_params(env.raw(), params.raw(), "params") }.map_err(|e| throw(&env, e))?;
        self.submit(&env, id, tx, WriteKind::Execute { sql, params }, cancellable)
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn execute_batch(
        &self,
        env: Env,
        id: u32,
        tx: u32,
        sql: String,
        param_sets: Unknown,
        cancellable: Option<bool>,
    ) -> Result<()> {
        let sets: Vec<Params> =
            unsafe { values::to_param_sets(env.raw(), param_sets.raw()) }.map_err(|e| throw(&env, e))?;
        self.submit(&env, id, tx, WriteKind::Batch { sql, sets: BatchSets::Each(sets) }, cancellable)
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
        sql: String,
        set_lens: Uint32Array,
        tags: Uint8Array,
        nums: Float64Array,
        bigs: BigInt64Array,
        text: String,
        blobs: Vec<Buffer>,
        cancellable: Option<bool>,
    ) -> Result<()> {
        let packed = quietsqlite_core::PackedSets {
            set_lens: set_lens.to_vec(),
            tags: tags.to_vec(),
            nums: nums.to_vec(),
            bigs: bigs.to_vec(),
            text: text.into_bytes(),
            blobs: blobs.iter().map(|b| b.to_vec()).collect(),
        };
        self.submit(&env, id, tx, WriteKind::Batch { sql, sets: BatchSets::Packed(packed) }, cancellable)
    }

    /// `mode`: 0 deferred, 1 immediate, 2 exclusive.
    #[napi]
    pub fn begin(&self, env: Env, id: u32, tx: u32, mode: u32) -> Result<()> {
        let mode = match mode {
            0 => TxMode::Deferred,
            2 => TxMode::Exclusive,
            _ => TxMode::Immediate,
        };
        self.submit(&env, id, tx, WriteKind::Begin { mode }, None)
    }

    #[napi]
    pub fn commit(&self, env: Env, id: u32, tx: u32) -> Result<()> {
        self.submit(&env, id, tx, WriteKind::Commit, None)
    }

    #[napi]
    pub fn rollback(&self, env: Env, id: u32, tx: u32) -> Result<()> {
        self.submit(&env, id, tx, WriteKind::Rollback, None)
    }

    /// Cancels a request sent with `cancellable`. Returns 0: it already finished (its
    /// completion is on its way); 1: it was queued and never runs (no completion follows);
    /// 2: it is running and is being interrupted (its completion follows).
    #[napi]
    pub fn cancel(&self, id: u32) -> u32 {
        self.db.cancel(id) as u32
    }

    /// A nested transaction's savepoint at `depth` (1 = first level). `op`: 0 begins it,
    /// 1 releases it, 2 rolls back to it (and releases it).
    #[napi]
    pub fn savepoint(&self, env: Env, id: u32, tx: u32, op: u32, depth: u32) -> Result<()> {
        let kind = match op {
            0 => WriteKind::Savepoint { depth },
            1 => WriteKind::Release { depth },
            _ => WriteKind::RollbackTo { depth },
        };
        self.submit(&env, id, tx, kind)
    }

    /// Stops accepting requests; `id` completes when every connection is closed.
    #[napi]
    pub fn close(&self, id: u32) {
        self.db.close(id);
    }

    /// For `close({ force: true })`: interrupts running statements; queued requests fail as
    /// closed without running.
    #[napi]
    pub fn stop_all(&self) {
        self.db.stop_all();
    }

    /// Stops delivering completions (after the close completion arrived).
    #[napi]
    pub fn dispose(&mut self) {
        self.sink.release();
        self.cleanup.remove();
    }

    /// Keeps the process alive while work is in flight, and lets it exit when idle.
    #[napi]
    pub fn keep_alive(&self, env: Env, on: bool) {
        unsafe { self.sink.set_ref(env.raw(), on) }
    }

    /// Subscribes a live query; emissions arrive as completions with `id` until unsubscribed.
    #[napi]
    pub fn subscribe(&self, env: Env, id: u32, sql: String, params: Unknown, max_delay_ms: u32) -> Result<()> {
        let params = unsafe { values::to_params(env.raw(), params.raw(), "params") }.map_err(|e| throw(&env, e))?;
        self.db
            .subscribe(id, sql, params, Duration::from_millis(max_delay_ms as u64))
            .map_err(|e| core_error(&env, e))
    }

    /// The emission last delivered to subscription `id` was consumed.
    #[napi]
    pub fn acknowledge(&self, id: u32) {
        self.db.acknowledge(id);
    }

    #[napi]
    pub fn unsubscribe(&self, id: u32) {
        self.db.unsubscribe(id);
    }

    /// The private file behind a `:memory:` database, if this is one.
    #[napi]
    pub fn temporary_path(&self) -> Option<String> {
        self.db.temporary_path().map(|p| p.to_string_lossy().into_owned())
    }

    /// `[groups, reruns]`: live-query statistics, for tests and benchmarks.
    #[napi]
    pub fn live_stats(&self) -> Vec<f64> {
        let (groups, runs) = self.db.live().stats();
        vec![groups as f64, runs as f64]
    }

    /// EXPERIMENT (docs/experiments/001-result-path.md): rows built with Node-API calls.
    #[napi]
    pub fn experiment_native_rows(&self, env: Env, encoded: Buffer) -> Result<Unknown<'_>> {
        let _ = self;
        unsafe {
            let v = experiments::rows_from_encoding(env.raw(), &encoded).map_err(|s| napi::Error::from_status(Status::from(s)))?;
            Ok(Unknown::from_raw_unchecked(env.raw(), v))
        }
    }

    #[napi]
    pub fn panic_for_tests(&self, env: Env, id: u32) -> Result<()> {
        self.db.panic_for_tests(id).map_err(|e| core_error(&env, e))
    }
}

impl Drop for NativeDatabase {
    fn drop(&mut self) {
        // Collected without close(): the core drains and stops its threads; nothing more
        // may reach JS.
        self.sink.release();
        self.cleanup.remove();
    }
}

impl NativeDatabase {
    fn submit(&self, env: &Env, id: u32, tx: u32, kind: WriteKind, cancellable: Option<bool>) -> Result<()> {
        let job = WriteJob { id, tx: tx_of(tx), kind, cancellable: cancellable.unwrap_or(false) };
        self.db.write(job).map_err(|e| core_error(env, e))
    }
}
