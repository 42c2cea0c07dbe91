//! The calls made for every request, `dbRead`, `dbWriterRead`, `dbExecute` and
//! `dbTakeCompletions`, and the event loop's hold, `dbKeepAlive`, as plain Node-API
//! callbacks. napi-rs's generated wrapper opens a borrow scope for each call it makes (an
//! `Arc` allocated and freed, thread-local pushes and pops): about 7% of the JS thread's
//! samples with 64 point queries in flight (docs/experiments/069-plain-callbacks-for-requests.md;
//! the writer's two since 079). The hold was a method of the database object, which adds
//! napi-rs's class checks to that (experiment 086). The other calls, made once per
//! transaction or less, keep the generated wrappers. Their TypeScript types are written out
//! in src/native.ts.

use crate::handles;
use napi::bindgen_prelude::Unknown;
use napi::{sys, Env, JsError, JsValue};
use std::ffi::CStr;
use std::ptr;

/// Defines the five functions on the addon's exports.
pub(crate) fn export(env: sys::napi_env, exports: sys::napi_value) -> napi::Result<()> {
    let calls: [(&CStr, unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value); 5] = [
        (c"dbRead", db_read),
        (c"dbWriterRead", db_writer_read),
        (c"dbExecute", db_execute),
        (c"dbTakeCompletions", db_take_completions),
        (c"dbKeepAlive", db_keep_alive),
    ];
    for (name, call) in calls {
        let mut function = ptr::null_mut();
        // SAFETY: on the JS thread of the environment loading the addon, with its env and
        // its exports object; `name` is NUL-terminated (length -1: up to the NUL).
        unsafe {
            check(sys::napi_create_function(env, name.as_ptr(), -1, Some(call), ptr::null_mut(), &mut function))?;
            check(sys::napi_set_named_property(env, exports, name.as_ptr(), function))?;
        }
    }
    Ok(())
}

fn check(status: sys::napi_status) -> napi::Result<()> {
    crate::sink::check(status).map_err(|s| napi::Error::from_status(napi::Status::from(s)))
}

/// `read` of database `handle`: a read on the reader threads. Arguments: handle, id, sql
/// (text or a prepared statement's number), params, format (0 rows, 1 first row only,
/// 2 JSON, 3 describe), cancellable (`cancel(id)` may be called for it; optional),
/// packedText (given only when `params` is the packed layout; `values::request_params`).
unsafe extern "C" fn db_read(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: Node calls this on the JS thread with the env and callback info of this call.
    call(env, info, |env, [handle, id, sql, params, format, cancellable, packed_text]: [sys::napi_value; 7], given| {
        let handle = uint32(env, handle, "handle")?;
        let id = uint32(env, id, "id")?;
        let format = uint32(env, format, "format")?;
        let cancellable = optional_bool(env, cancellable, "cancellable")?;
        // SAFETY: values of this call, on its thread.
        let [sql, params] = [sql, params].map(|v| unsafe { Unknown::from_raw_unchecked(env.raw(), v) });
        let packed_text = (given > 6).then_some(packed_text);
        handles::get(&env, handle)?.read(env, id, sql, params, format, cancellable, packed_text)?;
        Ok(ptr::null_mut())
    })
}

/// `writer_read` of database `handle`: a read on the writer connection (inside transaction
/// `tx`, or 0 for none: sees its uncommitted writes). Arguments: handle, id, tx, sql,
/// params, format, cancellable, packedText (as for `dbRead`).
unsafe extern "C" fn db_writer_read(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: as in `db_read`.
    call(env, info, |env, [handle, id, tx, sql, params, format, cancellable, packed_text]: [sys::napi_value; 8], given| {
        let handle = uint32(env, handle, "handle")?;
        let id = uint32(env, id, "id")?;
        let tx = uint32(env, tx, "tx")?;
        let format = uint32(env, format, "format")?;
        let cancellable = optional_bool(env, cancellable, "cancellable")?;
        // SAFETY: values of this call, on its thread.
        let [sql, params] = [sql, params].map(|v| unsafe { Unknown::from_raw_unchecked(env.raw(), v) });
        let packed_text = (given > 7).then_some(packed_text);
        handles::get(&env, handle)?.writer_read(env, id, tx, sql, params, format, cancellable, packed_text)?;
        Ok(ptr::null_mut())
    })
}

/// `execute` of database `handle`: one statement on the writer (in transaction `tx`, or 0
/// for none). Arguments: handle, id, tx, sql, params, cancellable, packedText (as for
/// `dbRead`).
unsafe extern "C" fn db_execute(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: as in `db_read`.
    call(env, info, |env, [handle, id, tx, sql, params, cancellable, packed_text]: [sys::napi_value; 7], given| {
        let handle = uint32(env, handle, "handle")?;
        let id = uint32(env, id, "id")?;
        let tx = uint32(env, tx, "tx")?;
        let cancellable = optional_bool(env, cancellable, "cancellable")?;
        // SAFETY: values of this call, on its thread.
        let [sql, params] = [sql, params].map(|v| unsafe { Unknown::from_raw_unchecked(env.raw(), v) });
        let packed_text = (given > 6).then_some(packed_text);
        handles::get(&env, handle)?.execute(env, id, tx, sql, params, cancellable, packed_text)?;
        Ok(ptr::null_mut())
    })
}

/// Takes the completions of database `handle` (see `DatabaseState::take_completions`).
/// Arguments: handle, maxMicros, scratch (a Buffer).
unsafe extern "C" fn db_take_completions(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: as in `db_read`.
    call(env, info, |env, [handle, max_micros, scratch]: [sys::napi_value; 3], _| {
        let handle = uint32(env, handle, "handle")?;
        let max_micros = uint32(env, max_micros, "maxMicros")?;
        // SAFETY: a value of this call, on its thread.
        let scratch = unsafe { Unknown::from_raw_unchecked(env.raw(), scratch) };
        Ok(handles::get(&env, handle)?.take_completions(env, max_micros, scratch)?.raw())
    })
}

/// Holds the event loop open for database `handle` while it has work in flight (`on` true),
/// and lets it go when idle (the completion channel's reference; `NodeSink::set_ref`).
/// Arguments: handle, on. Made once each way per stretch of work: for requests that come
/// one at a time with idle time between them, twice per request (experiment 086).
unsafe extern "C" fn db_keep_alive(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: as in `db_read`.
    call(env, info, |env, [handle, on]: [sys::napi_value; 2], _| {
        let handle = uint32(env, handle, "handle")?;
        let on = required_bool(env, on, "on")?;
        let state = handles::get(&env, handle)?;
        // SAFETY: the JS thread, with the env the database was made in (`handles::get`
        // checked it), which is the env of its threadsafe function.
        unsafe { state.sink.set_ref(env.raw(), on) };
        Ok(ptr::null_mut())
    })
}

/// Runs `body` with the call's first `N` arguments (`undefined` for those not given) and the
/// number given. An error becomes the call's exception as napi-rs's wrappers make it
/// (`JsError::from`), and one already pending is left as it is; a panic becomes the internal
/// error of `guard`, and never unwinds into Node.
///
/// # Safety
/// On the JS thread, with the env and callback info Node gave the current call.
unsafe fn call<const N: usize>(
    raw_env: sys::napi_env,
    info: sys::napi_callback_info,
    body: impl FnOnce(Env, [sys::napi_value; N], usize) -> napi::Result<sys::napi_value>,
) -> sys::napi_value {
    let env = Env::from_raw(raw_env);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut argc = N;
        let mut argv = [ptr::null_mut(); N];
        // SAFETY: the env and callback info of this call; `argv` holds `argc` values. Node
        // fills the slots past the arguments given with `undefined`.
        check(unsafe { sys::napi_get_cb_info(raw_env, info, &mut argc, argv.as_mut_ptr(), ptr::null_mut(), ptr::null_mut()) })?;
        body(env, argv, argc)
    }));
    match outcome {
        Ok(Ok(value)) => value,
        Ok(Err(e)) => {
            let mut pending = false;
            // SAFETY: the env of this call, on its thread; `pending` is a valid out-pointer.
            sys::napi_is_exception_pending(raw_env, &mut pending);
            if !pending {
                // SAFETY: as above; nothing is pending, so this is the call's one exception.
                JsError::from(e).throw_into(raw_env);
            }
            ptr::null_mut()
        }
        Err(payload) => {
            crate::throw_panic(&env, payload.as_ref());
            ptr::null_mut()
        }
    }
}

fn uint32(env: Env, value: sys::napi_value, what: &str) -> napi::Result<u32> {
    let mut out = 0u32;
    // SAFETY: a value of this call, on its thread; `out` is a valid out-pointer.
    let status = unsafe { sys::napi_get_value_uint32(env.raw(), value, &mut out) };
    if status == sys::Status::napi_ok {
        Ok(out)
    } else {
        Err(napi::Error::new(napi::Status::NumberExpected, format!("{what} must be a number")))
    }
}

/// A boolean; `undefined`, `null` and every other value are refused.
fn required_bool(env: Env, value: sys::napi_value, what: &str) -> napi::Result<bool> {
    optional_bool(env, value, what)?
        .ok_or_else(|| napi::Error::new(napi::Status::BooleanExpected, format!("{what} must be a boolean")))
}

/// A boolean, or `None` for `undefined` or `null`.
fn optional_bool(env: Env, value: sys::napi_value, what: &str) -> napi::Result<Option<bool>> {
    let mut kind = 0;
    // SAFETY: as in `uint32`.
    check(unsafe { sys::napi_typeof(env.raw(), value, &mut kind) })?;
    if kind == sys::ValueType::napi_undefined || kind == sys::ValueType::napi_null {
        return Ok(None);
    }
    let mut out = false;
    // SAFETY: as in `uint32`.
    if unsafe { sys::napi_get_value_bool(env.raw(), value, &mut out) } == sys::Status::napi_ok {
        Ok(Some(out))
    } else {
        Err(napi::Error::new(napi::Status::BooleanExpected, format!("{what} must be a boolean")))
    }
}
