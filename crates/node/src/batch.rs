//! How a batch of completions reaches JavaScript (docs/experiments/042-completion-scratch.md).
//! The JS side keeps one Buffer per database, its scratch. A batch writes a table of its
//! completions there, and the small results themselves, which the JS side decodes before it
//! takes the next batch: they cost no JS value of their own. Only other payloads (errors,
//! JSON, live-query emissions, iterator chunks, large results) become values, in an array.
//!
//! The scratch, in little-endian u32 words:
//! - word 0: the batch's entries; word 1: 1 when completions are still queued (the table
//!   was full: the JS side takes again).
//! - from byte `TABLE_AT`, four words per completion: id, kind, a, b.
//!   - `ENTRY_VALUE`: succeeded; its value is element `a` of the array.
//!   - `ENTRY_ERROR`: failed; element `a` is its error (`values::error_to_js`).
//!   - `ENTRY_DONE`: succeeded with nothing to report.
//!   - `ENTRY_ROWS`: its rows (crates/core/src/encode.rs) are at byte `a`, `b` bytes.
//!   - `ENTRY_EXEC`: a write's outcome is at byte `a`, `b` bytes: changes and lastInsertRowid
//!     as float64s, then its RETURNING rows when `b` > `EXEC_HEADER_BYTES`.
//!   - `ENTRY_LOST`: its outcome could not be made into a JS value (memory ran out).
//!
//! Results start 8-byte aligned (float64 views), from `DATA_AT` on, and end within
//! `SCRATCH_BYTES`. src/requests.ts mirrors these constants; test/44 checks that both agree.

use crate::sink::check;
use crate::values::{self, NapiResult};
use napi::sys;
use quietsqlite_core::{Completion, Error, Output, ReadOutput};
use std::cell::RefCell;
use std::ptr;

pub const SCRATCH_BYTES: usize = 64 * 1024;
pub const TABLE_AT: usize = 8;
pub const MAX_ENTRIES: usize = 512;
pub const DATA_AT: usize = TABLE_AT + MAX_ENTRIES * 16;
pub const EXEC_HEADER_BYTES: usize = 16;
pub const ENTRY_VALUE: u32 = 0;
pub const ENTRY_ERROR: u32 = 1;
pub const ENTRY_DONE: u32 = 2;
pub const ENTRY_ROWS: u32 = 3;
pub const ENTRY_EXEC: u32 = 4;
pub const ENTRY_LOST: u32 = 5;

const _: () = assert!(DATA_AT < SCRATCH_BYTES && DATA_AT % 8 == 0 && SCRATCH_BYTES % 8 == 0);

/// Test hook (`test-hooks` builds): the next completion's conversion panics.
#[cfg(feature = "test-hooks")]
pub static PANIC_IN_NEXT_DELIVERY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

thread_local! {
    /// Where a batch is written first (one per JS thread: the main thread, each Worker). Making
    /// a JS value can run JS (a setter a program put on `Object.prototype` runs when an
    /// element is set), which could detach the scratch; so the scratch is written only once
    /// every value of the batch exists, from its memory as Node reports it then.
    static STAGING: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A batch being written: its bytes (the scratch's layout) and the array of its other payloads.
struct Writer<'a> {
    env: sys::napi_env,
    bytes: &'a mut [u8],
    entries: usize,
    /// Where the next result may start (8-byte aligned).
    data_end: usize,
    values: sys::napi_value,
    value_count: u32,
}

impl Writer<'_> {
    fn put_u32(&mut self, at: usize, v: u32) {
        self.bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn entry(&mut self, id: u32, kind: u32, a: u32, b: u32) {
        // The caller takes at most MAX_ENTRIES completions (`write` checks).
        let at = TABLE_AT + self.entries * 16;
        self.put_u32(at, id);
        self.put_u32(at + 4, kind);
        self.put_u32(at + 8, a);
        self.put_u32(at + 12, b);
        self.entries += 1;
    }

    /// Room for `len` bytes of result: their offset, or None (larger than results written
    /// here get, or no room is left).
    fn reserve(&mut self, len: usize) -> Option<usize> {
        if len > values::COPY_AT_MOST {
            return None;
        }
        let at = self.data_end;
        let end = at + len;
        if end > self.bytes.len() {
            return None;
        }
        // The next result starts 8-byte aligned (within SCRATCH_BYTES, a multiple of 8).
        self.data_end = (end + 7) & !7;
        Some(at)
    }

    /// Appends `v` to the values array (made at the first): its index.
    unsafe fn value(&mut self, v: sys::napi_value) -> NapiResult<u32> {
        if self.values.is_null() {
            check(sys::napi_create_array(self.env, &mut self.values))?;
        }
        let i = self.value_count;
        values::set(self.env, self.values, i, v)?;
        self.value_count += 1;
        Ok(i)
    }

    /// Writes one completion: into the bytes when it is small rows, a write's outcome or
    /// nothing; otherwise as a value.
    unsafe fn completion(&mut self, c: Completion) -> NapiResult<()> {
        let id = c.id;
        let out = match c.result {
            Err(e) => return self.error(id, &e),
            Ok(out) => out,
        };
        match out {
            Output::Done => self.entry(id, ENTRY_DONE, 0, 0),
            Output::Read(ReadOutput::Rows(rows)) => {
                let len = rows.bytes.len();
                let Some(at) = self.reserve(len) else {
                    return self.as_value(id, Output::Read(ReadOutput::Rows(rows)));
                };
                self.bytes[at..at + len].copy_from_slice(&rows.bytes);
                self.entry(id, ENTRY_ROWS, at as u32, len as u32);
            }
            Output::Exec(e) if values::is_safe_integer(e.last_insert_rowid) => {
                let rows_len = e.rows.as_ref().map_or(0, |r| r.bytes.len());
                let Some(at) = self.reserve(EXEC_HEADER_BYTES + rows_len) else {
                    return self.as_value(id, Output::Exec(e));
                };
                // A change count beyond 2^53 would round, as the JS number it becomes anyway.
                self.bytes[at..at + 8].copy_from_slice(&(e.changes as f64).to_le_bytes());
                self.bytes[at + 8..at + 16].copy_from_slice(&(e.last_insert_rowid as f64).to_le_bytes());
                if let Some(r) = &e.rows {
                    self.bytes[at + EXEC_HEADER_BYTES..at + EXEC_HEADER_BYTES + rows_len].copy_from_slice(&r.bytes);
                }
                self.entry(id, ENTRY_EXEC, at as u32, (EXEC_HEADER_BYTES + rows_len) as u32);
            }
            other => return self.as_value(id, other),
        }
        Ok(())
    }

    unsafe fn as_value(&mut self, id: u32, out: Output) -> NapiResult<()> {
        let v = values::output_to_js(self.env, out)?;
        let i = self.value(v)?;
        self.entry(id, ENTRY_VALUE, i, 0);
        Ok(())
    }

    unsafe fn error(&mut self, id: u32, e: &Error) -> NapiResult<()> {
        let v = values::error_to_js(self.env, e)?;
        let i = self.value(v)?;
        self.entry(id, ENTRY_ERROR, i, 0);
        Ok(())
    }

    /// A completion whose conversion failed rejects with `e`, or, when even that cannot be
    /// made, as lost: every request settles.
    unsafe fn failed(&mut self, id: u32, e: Error) {
        clear_exception(self.env);
        if self.error(id, &e).is_err() {
            clear_exception(self.env);
            self.entry(id, ENTRY_LOST, 0, 0);
        }
    }
}

/// A failed Node-API call may leave an exception pending, which fails every later call.
unsafe fn clear_exception(env: sys::napi_env) {
    let mut exception = ptr::null_mut();
    sys::napi_get_and_clear_last_exception(env, &mut exception);
}

/// Whether no batch is being written on this thread (`write` is not re-entrant).
pub fn can_write() -> bool {
    STAGING.with(|staging| staging.try_borrow_mut().is_ok())
}

/// Writes `batch` (at most `MAX_ENTRIES`) into `scratch`, a Buffer of `SCRATCH_BYTES` or more,
/// and returns the array of its other payloads, or null when it has none; `batch` is left
/// empty, its capacity kept for the next batch. `more`: completions are still queued. When
/// the scratch is no longer such a Buffer by the time it is written
/// (a program detached it), the batch comes in a new one instead, and the answer is
/// `{ scratch, values }`: the caller keeps that Buffer as its scratch. Err only when Node
/// cannot make a value (memory ran out), or when called inside a `write` (see `can_write`).
///
/// # Safety
/// On the JS thread, with its env; `scratch` is a value of the current call.
pub unsafe fn write(env: sys::napi_env, scratch: sys::napi_value, batch: &mut Vec<Completion>, more: bool) -> NapiResult<sys::napi_value> {
    assert!(batch.len() <= MAX_ENTRIES, "a batch holds at most MAX_ENTRIES completions");
    STAGING.with(|staging| {
        let mut bytes = staging.try_borrow_mut().map_err(|_| sys::Status::napi_generic_failure)?;
        if bytes.len() < SCRATCH_BYTES {
            bytes.resize(SCRATCH_BYTES, 0);
        }
        let mut w = Writer {
            env,
            bytes: &mut bytes[..SCRATCH_BYTES],
            entries: 0,
            data_end: DATA_AT,
            values: ptr::null_mut(),
            value_count: 0,
        };
        for c in batch.drain(..) {
            let id = c.id;
            // A panic converting one completion rejects that request alone (every promise
            // settles); the others are still delivered.
            let converted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                #[cfg(feature = "test-hooks")]
                if PANIC_IN_NEXT_DELIVERY.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    panic!("a test panic while converting a completion");
                }
                // SAFETY: as this function's.
                unsafe { w.completion(c) }
            }));
            match converted {
                Ok(Ok(())) => {}
                Err(_) => w.failed(id, Error::Internal("quietsqlite panicked (a bug) while converting this result".into())),
                // Node could not create this result's value (larger than its largest Buffer,
                // as on Node 20 past 4 GiB, or out of memory): that request rejects with a
                // clear error and the rest of the batch is still delivered.
                Ok(Err(_)) => w.failed(
                    id,
                    Error::Range(
                        "the result is too large for Node.js to hold in one Buffer (see buffer.constants.MAX_LENGTH) \
                         or memory ran out: select fewer rows or columns"
                            .into(),
                    ),
                ),
            }
        }
        let (entries, data_end, values) = (w.entries, w.data_end, w.values);
        w.put_u32(0, entries as u32);
        w.put_u32(4, u32::from(more));
        let values = if values.is_null() {
            let mut null = ptr::null_mut();
            check(sys::napi_get_null(env, &mut null))?;
            null
        } else {
            values
        };
        // From here to the copy no JS runs: nothing can detach the memory once looked up.
        let mut data = ptr::null_mut();
        let mut len = 0usize;
        let usable = sys::napi_get_buffer_info(env, scratch, &mut data, &mut len) == sys::Status::napi_ok
            && !data.is_null()
            && len >= SCRATCH_BYTES;
        let mut replacement = ptr::null_mut();
        if !usable {
            clear_exception(env);
            check(sys::napi_create_buffer(env, SCRATCH_BYTES, &mut data, &mut replacement))?;
        }
        // SAFETY: `data` is valid for SCRATCH_BYTES bytes: Node reported at least that many
        // for the scratch (a value of this call), or just made a Buffer that long, and no JS
        // runs before the copy ends. Both ranges end within SCRATCH_BYTES, and the staging is
        // memory of its own.
        let target = std::slice::from_raw_parts_mut(data.cast::<u8>(), SCRATCH_BYTES);
        let table_end = TABLE_AT + entries * 16;
        target[..table_end].copy_from_slice(&bytes[..table_end]);
        target[DATA_AT..data_end].copy_from_slice(&bytes[DATA_AT..data_end]);
        if usable {
            return Ok(values);
        }
        // Defined, not set: no setter a program put on `Object.prototype` runs.
        let property = |name: &'static std::ffi::CStr, value| sys::napi_property_descriptor {
            utf8name: name.as_ptr(),
            name: ptr::null_mut(),
            method: None,
            getter: None,
            setter: None,
            value,
            attributes: sys::PropertyAttributes::enumerable,
            data: ptr::null_mut(),
        };
        let properties = [property(c"scratch", replacement), property(c"values", values)];
        let mut answer = ptr::null_mut();
        check(sys::napi_create_object(env, &mut answer))?;
        check(sys::napi_define_properties(env, answer, properties.len(), properties.as_ptr()))?;
        Ok(answer)
    })
}
