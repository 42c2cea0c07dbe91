//! Conversion at the boundary, and nothing else: JS parameters to core values, core
//! completions to JS values. Raw Node-API calls: this is the hottest code of the binding.

use napi::sys;
use quietsqlite_core::buffer_pool;
use quietsqlite_core::error::code_name;
use quietsqlite_core::{Error, Output, Params, Positional, ReadOutput, Value, MAX_PARAMETERS, MAX_VALUE_BYTES};
use std::ffi::c_void;
use std::ptr;

pub type NapiResult<T> = Result<T, sys::napi_status>;

// SAFETY (every `unsafe fn` of this module): called on the JS thread, inside a Node-API call
// or callback, with that call's `env` and values created in its scope. Sizes that come from
// JS are checked before they size an allocation or a slice (MAX_PARAMETERS, MAX_VALUE_BYTES).

/// A parameter that cannot be converted: the message names it.
pub enum ParamError {
    Type(String),
    Range(String),
    Napi(sys::napi_status),
}

impl From<sys::napi_status> for ParamError {
    fn from(s: sys::napi_status) -> Self {
        ParamError::Napi(s)
    }
}

pub(crate) fn ok(status: sys::napi_status) -> NapiResult<()> {
    crate::sink::check(status)
}

unsafe fn type_of(env: sys::napi_env, v: sys::napi_value) -> NapiResult<sys::napi_valuetype> {
    let mut t = 0;
    ok(sys::napi_typeof(env, v, &mut t))?;
    Ok(t)
}

/// A JS string as UTF-8 (lone surrogates become U+FFFD, as Node converts them). `name`
/// says which value, for the error when it is longer than SQLite stores.
pub unsafe fn get_string(env: sys::napi_env, v: sys::napi_value, name: &dyn Fn() -> String) -> Result<String, ParamError> {
    let mut len = 0usize;
    ok(sys::napi_get_value_string_utf8(env, v, ptr::null_mut(), 0, &mut len))?;
    // Checked before allocating: `len + 1` cannot overflow below this limit.
    if len > MAX_VALUE_BYTES {
        return Err(too_long(name));
    }
    // Fallible: a string within the limit may still not fit in this process's memory (or its
    // address-space limit), which must be an error, not an abort.
    let mut buf: Vec<u8> = Vec::new();
    buf.try_reserve_exact(len + 1).map_err(|_| out_of_memory(&name()))?;
    let mut written = 0usize;
    ok(sys::napi_get_value_string_utf8(env, v, buf.as_mut_ptr() as *mut _, len + 1, &mut written))?;
    // SAFETY: Node wrote `written` bytes (at most `len`, not counting the NUL it adds)
    // into the `len + 1` bytes reserved above.
    buf.set_len(written.min(len));
    // Validated, not assumed: a checked conversion costs little next to the Node-API call.
    Ok(String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// A parameter that is within SQLite's limits but cannot be copied: memory ran out.
fn out_of_memory(name: &str) -> ParamError {
    ParamError::Range(format!("{name} does not fit in memory"))
}

/// A copy of a BLOB parameter's bytes (checked against SQLite's limit by the caller), made
/// without aborting the process when memory runs out.
pub(crate) fn copy_bytes(bytes: &[u8], name: &dyn Fn() -> String) -> Result<Vec<u8>, ParamError> {
    let mut out = Vec::new();
    out.try_reserve_exact(bytes.len()).map_err(|_| out_of_memory(&name()))?;
    out.extend_from_slice(bytes);
    Ok(out)
}

/// One parameter value. `name` says which parameter, for error messages.
pub unsafe fn to_value(env: sys::napi_env, v: sys::napi_value, name: &dyn Fn() -> String) -> Result<Value, ParamError> {
    match type_of(env, v)? {
        sys::ValueType::napi_number => {
            let mut f = 0f64;
            ok(sys::napi_get_value_double(env, v, &mut f))?;
            Ok(quietsqlite_core::integer_of(f).map_or(Value::Real(f), Value::Integer))
        }
        sys::ValueType::napi_string => Ok(Value::Text(get_string(env, v, name)?)),
        sys::ValueType::napi_null | sys::ValueType::napi_undefined => Ok(Value::Null),
        sys::ValueType::napi_boolean => {
            let mut b = false;
            ok(sys::napi_get_value_bool(env, v, &mut b))?;
            Ok(Value::Integer(b as i64))
        }
        sys::ValueType::napi_bigint => {
            let mut i = 0i64;
            let mut lossless = false;
            ok(sys::napi_get_value_bigint_int64(env, v, &mut i, &mut lossless))?;
            if !lossless {
                return Err(ParamError::Range(format!(
                    "{} is a BigInt outside the 64-bit signed integer range",
                    name()
                )));
            }
            Ok(Value::Integer(i))
        }
        sys::ValueType::napi_object => {
            if let Some(bytes) = view_bytes(env, v, name)? {
                return Ok(Value::Blob(copy_bytes(bytes, name)?));
            }
            Err(ParamError::Type(format!(
                "{} has an unsupported type (object); use a number, bigint, string, boolean, null, Buffer or typed array",
                name()
            )))
        }
        other => {
            let t = match other {
                sys::ValueType::napi_function => "function",
                sys::ValueType::napi_symbol => "symbol",
                sys::ValueType::napi_external => "external",
                _ => "unknown",
            };
            Err(ParamError::Type(format!(
                "{} has an unsupported type ({t}); use a number, bigint, string, boolean, null, Buffer or typed array",
                name()
            )))
        }
    }
}

/// Bytes per element of a typed array kind (Node-API's `napi_typedarray_type`); `None` for
/// a kind this binding does not know, which is refused rather than guessed.
fn element_size(kind: sys::napi_typedarray_type) -> Option<usize> {
    use sys::TypedarrayType as T;
    /// `napi_float16_array` (Node 24+); not in the bindings' constants yet.
    const FLOAT16_ARRAY: sys::napi_typedarray_type = 11;
    match kind {
        T::int8_array | T::uint8_array | T::uint8_clamped_array => Some(1),
        T::int16_array | T::uint16_array | FLOAT16_ARRAY => Some(2),
        T::int32_array | T::uint32_array | T::float32_array => Some(4),
        T::float64_array | T::bigint64_array | T::biguint64_array => Some(8),
        _ => None,
    }
}

/// The bytes of a Buffer, typed array or DataView (exactly its byteLength); `None` for any
/// other object.
unsafe fn view_bytes<'a>(env: sys::napi_env, v: sys::napi_value, name: &dyn Fn() -> String) -> Result<Option<&'a [u8]>, ParamError> {
    let mut is = false;
    let (mut length, mut data, mut ab, mut offset) = (0usize, ptr::null_mut::<c_void>(), ptr::null_mut(), 0usize);
    ok(sys::napi_is_typedarray(env, v, &mut is))?;
    if is {
        let mut kind = 0;
        ok(sys::napi_get_typedarray_info(env, v, &mut kind, &mut length, &mut data, &mut ab, &mut offset))?;
        let Some(elem) = element_size(kind) else {
            return Err(ParamError::Type(format!("{} is a typed array of a kind quietsqlite does not know", name())));
        };
        length = length.checked_mul(elem).ok_or_else(|| too_long(name))?;
    } else {
        ok(sys::napi_is_dataview(env, v, &mut is))?;
        if !is {
            return Ok(None);
        }
        ok(sys::napi_get_dataview_info(env, v, &mut length, &mut data, &mut ab, &mut offset))?;
    }
    if length > MAX_VALUE_BYTES {
        return Err(too_long(name));
    }
    // Nothing to read. A length-tracking view left past the end of its shrunk buffer is
    // empty to JavaScript while Node-API still reports its old offset: empty, as elsewhere.
    if length == 0 {
        return Ok(Some(&[]));
    }
    // The view must lie inside its buffer (always true for a live view; this keeps a wrong
    // element size or a shrunk buffer from ever reading past it).
    let mut ab_data = ptr::null_mut();
    let mut ab_len = 0usize;
    match sys::napi_get_arraybuffer_info(env, ab, &mut ab_data, &mut ab_len) {
        sys::Status::napi_ok => {
            if offset.checked_add(length).is_none_or(|end| end > ab_len) {
                return Err(ParamError::Type(format!("{} is a view that reaches past its ArrayBuffer", name())));
            }
        }
        // A view over a SharedArrayBuffer: Node 20 answers only for an ArrayBuffer (Node 22
        // and later for both). A shared buffer can grow but never shrink or be detached, so
        // the view's bytes that V8 reported stay inside it; nothing to check.
        sys::Status::napi_invalid_arg => {}
        status => return Err(status.into()),
    }
    if data.is_null() {
        return Err(ParamError::Type(format!("{} is a view without memory (detached?)", name())));
    }
    // SAFETY: Node-API reports `data` as the view's first byte and the view spans `length`
    // bytes inside its ArrayBuffer (checked above; `length` <= MAX_VALUE_BYTES < isize::MAX).
    // The bytes are copied before control returns to JS, so the slice cannot outlive them.
    Ok(Some(std::slice::from_raw_parts(data as *const u8, length)))
}

pub(crate) fn too_long(name: &dyn Fn() -> String) -> ParamError {
    ParamError::Range(format!("{} is longer than SQLite's limit of {MAX_VALUE_BYTES} bytes", name()))
}

unsafe fn array_len(env: sys::napi_env, v: sys::napi_value) -> NapiResult<Option<u32>> {
    let mut is = false;
    ok(sys::napi_is_array(env, v, &mut is))?;
    if !is {
        return Ok(None);
    }
    let mut n = 0u32;
    ok(sys::napi_get_array_length(env, v, &mut n))?;
    Ok(Some(n))
}

/// Parameters: undefined/null (none), an array (positional) or a plain object (named).
pub unsafe fn to_params(env: sys::napi_env, v: sys::napi_value, label: &str) -> Result<Params, ParamError> {
    match type_of(env, v)? {
        sys::ValueType::napi_undefined | sys::ValueType::napi_null => return Ok(Params::None),
        sys::ValueType::napi_object => {}
        _ => return Err(ParamError::Type(format!("{label} must be an array or an object"))),
    }
    if let Some(n) = array_len(env, v)? {
        // The length is the caller's to choose ([] with length 2^32-1): checked before
        // anything is sized by it.
        if n > MAX_PARAMETERS {
            return Err(ParamError::Range(format!(
                "{label} has {n} elements; a statement takes at most {MAX_PARAMETERS} parameters"
            )));
        }
        let item = |i: u32| -> Result<Value, ParamError> {
            let mut item = ptr::null_mut();
            ok(sys::napi_get_element(env, v, i, &mut item))?;
            to_value(env, item, &|| format!("{label}[{i}]"))
        };
        if n == 1 {
            return Ok(Params::Positional(Positional::One(item(0)?)));
        }
        let mut values = Vec::with_capacity(n as usize);
        for i in 0..n {
            values.push(item(i)?);
        }
        return Ok(Params::Positional(Positional::Many(values)));
    }
    if view_bytes(env, v, &|| label.to_owned())?.is_some() {
        return Err(ParamError::Type(format!(
            "{label} must be an array or an object (a lone Buffer needs wrapping in an array)"
        )));
    }
    let mut keys = ptr::null_mut();
    ok(sys::napi_get_all_property_names(
        env,
        v,
        sys::KeyCollectionMode::own_only,
        sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
        sys::KeyConversion::numbers_to_strings,
        &mut keys,
    ))?;
    let mut n = 0u32;
    ok(sys::napi_get_array_length(env, keys, &mut n))?;
    if n > MAX_PARAMETERS {
        return Err(ParamError::Range(format!(
            "{label} has {n} keys; a statement takes at most {MAX_PARAMETERS} parameters"
        )));
    }
    let mut pairs = Vec::with_capacity(n as usize);
    for i in 0..n {
        let mut key = ptr::null_mut();
        ok(sys::napi_get_element(env, keys, i, &mut key))?;
        let mut item = ptr::null_mut();
        ok(sys::napi_get_property(env, v, key, &mut item))?;
        let name = get_string(env, key, &|| format!("a key of {label}"))?;
        let value = to_value(env, item, &|| {
            if quietsqlite_core::error::is_plain_name(&name) {
                format!("{label}.{name}")
            } else {
                format!("{label} key {}", quietsqlite_core::error::shown_name(&name))
            }
        })?;
        pairs.push((name, value));
    }
    Ok(Params::Named(pairs))
}

/// A request's parameters: packed by the JS side when the call was given `packed_text`
/// (`params` is then the layout, see `packed_params`), converted value by value otherwise.
pub unsafe fn request_params(env: sys::napi_env, params: sys::napi_value, packed_text: Option<sys::napi_value>) -> Result<Params, ParamError> {
    match packed_text {
        Some(text) => packed_params(env, params, text),
        None => to_params(env, params, "params"),
    }
}

/// Parameters packed by the JS side (src/params.ts `packParams`): `layout` a Float64Array
/// holding the count, then a tag and a number per value; `text` every TEXT value joined.
/// A handful of Node-API calls whatever the count, where `to_params` makes two to four per
/// value (docs/experiments/078-packed-request-parameters.md). Anything a direct caller of
/// the binding sends that does not describe `text` exactly is refused.
pub unsafe fn packed_params(env: sys::napi_env, layout: sys::napi_value, text: sys::napi_value) -> Result<Params, ParamError> {
    let bad = || ParamError::Type("packed parameters must be a Float64Array and a string that agree".into());
    let mut is = false;
    ok(sys::napi_is_typedarray(env, layout, &mut is))?;
    if !is {
        return Err(bad());
    }
    let (mut kind, mut length, mut data, mut ab, mut offset) = (0, 0usize, ptr::null_mut::<c_void>(), ptr::null_mut(), 0usize);
    ok(sys::napi_get_typedarray_info(env, layout, &mut kind, &mut length, &mut data, &mut ab, &mut offset))?;
    if kind != sys::TypedarrayType::float64_array || length == 0 || data.is_null() || !(data as usize).is_multiple_of(8) {
        return Err(bad());
    }
    // Only over an ArrayBuffer: another thread may write a SharedArrayBuffer while it is read.
    ok(sys::napi_is_arraybuffer(env, ab, &mut is))?;
    if !is {
        return Err(bad());
    }
    // SAFETY: a live Float64Array of `length` elements over an ArrayBuffer, which only this
    // thread can reach: V8 reported its data pointer, checked 8-byte aligned above, and the
    // array, an argument of this call, stays alive and unchanged until it returns (no
    // JavaScript runs before the cells are read).
    let cells = std::slice::from_raw_parts(data as *const f64, length);
    let count = cells[0];
    if !(0.0..=f64::from(MAX_PARAMETERS)).contains(&count) || count.fract() != 0.0 || 1 + 2 * (count as usize) > length {
        return Err(bad());
    }
    let count = count as usize;
    // SAFETY: `1 + 2 * count <= length` elements, checked above; (f64, f64) has f64's
    // alignment and no padding, so the pairs are the same memory read two at a time.
    let pairs = std::slice::from_raw_parts(cells.as_ptr().add(1) as *const (f64, f64), count);
    // The text's length in UTF-16 units (no pass over it) must be what the layout's TEXT
    // lengths add up to; `unpack_params` then checks each value's end. Its UTF-8 takes at
    // most 3 bytes per unit (a lone surrogate becomes the 3 bytes of U+FFFD), so one call
    // into a buffer of that size reads it whole.
    let mut units = 0usize;
    ok(sys::napi_get_value_string_utf16(env, text, ptr::null_mut(), 0, &mut units)).map_err(|_| bad())?;
    let claimed: f64 = pairs.iter().filter(|(tag, _)| *tag == f64::from(quietsqlite_core::value::PACKED_TEXT)).map(|(_, n)| *n).sum();
    if claimed != units as f64 {
        return Err(bad());
    }
    if units > MAX_VALUE_BYTES / 3 {
        return Err(ParamError::Range(format!("the packed parameters' text is longer than {} UTF-16 units", MAX_VALUE_BYTES / 3)));
    }
    let capacity = 3 * units + 1;
    PACKED_TEXT.with_borrow_mut(|buf| {
        let params = unpack_into(env, text, buf, capacity, pairs, bad);
        // Kept for the next call only while small, whatever the outcome.
        if buf.capacity() > PACKED_TEXT_KEPT {
            *buf = Vec::new();
        }
        params
    })
}

/// Reads `text` into `buf` (`capacity` bytes: enough for all of it) and makes the values.
unsafe fn unpack_into(
    env: sys::napi_env,
    text: sys::napi_value,
    buf: &mut Vec<u8>,
    capacity: usize,
    pairs: &[(f64, f64)],
    bad: impl Fn() -> ParamError,
) -> Result<Params, ParamError> {
    buf.clear();
    buf.try_reserve(capacity).map_err(|_| ParamError::Range("the packed parameters' text does not fit in memory".into()))?;
    let mut written = 0usize;
    ok(sys::napi_get_value_string_utf8(env, text, buf.as_mut_ptr() as *mut _, capacity, &mut written)).map_err(|_| bad())?;
    // SAFETY: Node wrote `written` bytes (fewer than `capacity`, which leaves room for its
    // NUL) into the `capacity` bytes reserved above.
    buf.set_len(written.min(capacity - 1));
    let text = std::str::from_utf8(buf).map_err(|_| bad())?;
    quietsqlite_core::unpack_params(pairs, text).map_err(|e| ParamError::Type(e.to_string()))
}

/// The most buffer `PACKED_TEXT` keeps between calls.
const PACKED_TEXT_KEPT: usize = 256 * 1024;

thread_local! {
    /// The text of the last packed parameters, kept for the next: read without allocating.
    static PACKED_TEXT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `executeBatch` parameter sets: an array of arrays or objects; those from index `from` up
/// to `to` (or its end), named by their index in the whole array. `to` bounds the work:
/// callers pass at most a part's size beyond `from`.
pub unsafe fn to_param_sets(env: sys::napi_env, v: sys::napi_value, from: u32, to: Option<u32>) -> Result<Vec<Params>, ParamError> {
    let Some(n) = array_len(env, v)? else {
        return Err(ParamError::Type("paramSets must be an array of arrays or objects".into()));
    };
    // A range is read as given: sets that went missing since the caller counted them (a
    // getter shortened the array) are not skipped, they are refused below as undefined.
    let to = to.unwrap_or(n);
    // A sparse array may claim 2^32-1 sets: grow with the sets actually converted.
    let mut sets = Vec::with_capacity((to.saturating_sub(from) as usize).min(1024));
    for i in from..to {
        let mut item = ptr::null_mut();
        ok(sys::napi_get_element(env, v, i, &mut item))?;
        match type_of(env, item)? {
            sys::ValueType::napi_object => {}
            _ => return Err(ParamError::Type(format!("paramSets[{i}] must be an array or an object"))),
        }
        sets.push(to_params(env, item, &format!("paramSets[{i}]"))?);
    }
    Ok(sets)
}

// ---- completions to JS ----

unsafe extern "C" fn free_vec(_env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is the Box `buffer` leaked for this external buffer; Node calls the
    // finalizer once, when nothing in JavaScript can reach the bytes any more, so they may be
    // written into again. `give` does not panic; were it to, the Vec is freed while
    // unwinding, and the unwind stops here, before Node.
    let bytes = *Box::from_raw(hint as *mut Vec<u8>);
    let _ = std::panic::catch_unwind(move || buffer_pool::RESULTS.give(bytes));
}

/// Runs once in each environment that loads the addon (the main thread, each Worker), after
/// napi-rs defined its exports; napi-rs takes one such hook per addon, so everything done at
/// load is here. It defines the two request calls (request_calls.rs), and starts the result
/// pool: the pool keeps buffers only while an environment is running, and when the last one
/// ends it frees them and joins its thread, before Node could unload the library (it unloads
/// an addon that only Workers loaded when the last of them ends, unless the library says no:
/// on Linux napi-build links ours with `-z nodelete`).
#[napi_derive::napi(module_exports)]
pub fn on_load(exports: napi::bindgen_prelude::Object<'_>, env: napi::Env) -> napi::Result<()> {
    crate::request_calls::export(env.raw(), napi::JsValue::raw(&exports))?;
    buffer_pool::RESULTS.environment_started();
    // A box of its own for each registration: a second identical (hook, argument) pair in
    // one environment, which loading the addon twice there would make, aborts the process.
    let arg = Box::into_raw(Box::new(0u8)) as *mut c_void;
    // SAFETY: on this environment's JS thread, with its env. Cleanup hooks run last added
    // first, so this one runs after the finalizers of the Buffers made later in it.
    let status = unsafe { sys::napi_add_env_cleanup_hook(env.raw(), Some(end_result_pool), arg) };
    if status != sys::Status::napi_ok {
        // SAFETY: `arg` was not registered; it is freed once, here.
        drop(unsafe { Box::from_raw(arg as *mut u8) });
        buffer_pool::RESULTS.environment_ended();
    }
    Ok(())
}

unsafe extern "C" fn end_result_pool(arg: *mut c_void) {
    // SAFETY: `arg` is the Box registered with this hook, which Node calls once.
    drop(Box::from_raw(arg as *mut u8));
    let _ = std::panic::catch_unwind(|| buffer_pool::RESULTS.environment_ended());
}

/// A Buffer with the bytes: small ones copied, large ones taken over without copying (a copy
/// where external buffers are refused: Electron).
/// Results up to this size are copied into an ordinary Buffer: cheaper than an external
/// buffer's finalizer and weak reference (docs/experiments/009-small-results-copied.md).
pub(crate) const COPY_AT_MOST: usize = 4096;

unsafe fn buffer(env: sys::napi_env, bytes: Vec<u8>) -> NapiResult<sys::napi_value> {
    let mut out = ptr::null_mut();
    if bytes.len() <= COPY_AT_MOST {
        let mut data = ptr::null_mut();
        ok(sys::napi_create_buffer_copy(env, bytes.len(), bytes.as_ptr() as *const c_void, &mut data, &mut out))?;
        return Ok(out);
    }
    let boxed = Box::new(bytes);
    let data = boxed.as_ptr() as *mut c_void;
    let len = boxed.len();
    let hint = Box::into_raw(boxed);
    // SAFETY: `data` stays valid until free_vec runs (the Vec's heap block does not move
    // when the Box moves). Only `napi_no_external_buffers_allowed` is returned before Node
    // takes the finalizer (Electron's sandbox): then the Box is taken back here, once, and
    // copied. On any other failure Node may already have run the finalizer (a length over
    // the largest Buffer makes Node free the data before it throws), so the Box is never
    // touched again: at worst it leaks, it is never freed twice.
    let status = sys::napi_create_external_buffer(env, len, data, Some(free_vec), hint as *mut c_void, &mut out);
    if status == sys::Status::napi_ok {
        return Ok(out);
    }
    if status == sys::Status::napi_no_external_buffers_allowed {
        let bytes = Box::from_raw(hint);
        let mut copy_data = ptr::null_mut();
        ok(sys::napi_create_buffer_copy(env, len, bytes.as_ptr() as *const c_void, &mut copy_data, &mut out))?;
        return Ok(out);
    }
    Err(status)
}

pub(crate) unsafe fn boolean(env: sys::napi_env, b: bool) -> NapiResult<sys::napi_value> {
    let mut out = ptr::null_mut();
    ok(sys::napi_get_boolean(env, b, &mut out))?;
    Ok(out)
}

pub(crate) unsafe fn number(env: sys::napi_env, f: f64) -> NapiResult<sys::napi_value> {
    let mut out = ptr::null_mut();
    ok(sys::napi_create_double(env, f, &mut out))?;
    Ok(out)
}

/// Whether a JS number holds `i` exactly (|i| <= 2^53 - 1, Number.MAX_SAFE_INTEGER).
pub(crate) fn is_safe_integer(i: i64) -> bool {
    i.unsigned_abs() < (1u64 << 53)
}

/// An i64 as a number when it is exact, else as a BigInt (the JS side applies intMode).
unsafe fn int64(env: sys::napi_env, i: i64) -> NapiResult<sys::napi_value> {
    if is_safe_integer(i) {
        return number(env, i as f64);
    }
    let mut out = ptr::null_mut();
    ok(sys::napi_create_bigint_int64(env, i, &mut out))?;
    Ok(out)
}

pub(crate) unsafe fn string(env: sys::napi_env, s: &str) -> NapiResult<sys::napi_value> {
    let mut out = ptr::null_mut();
    // A Rust string's length is at most isize::MAX; a string longer than V8 allows is an
    // error status (ERR_STRING_TOO_LONG), not a crash.
    ok(sys::napi_create_string_utf8(env, s.as_ptr() as *const _, s.len() as isize, &mut out))?;
    Ok(out)
}

pub(crate) unsafe fn set(env: sys::napi_env, array: sys::napi_value, i: u32, v: sys::napi_value) -> NapiResult<()> {
    ok(sys::napi_set_element(env, array, i, v))
}

/// Error kinds, as the JS side maps them to classes.
pub const ERR_SQLITE: f64 = 1.0;
pub const ERR_RANGE: f64 = 2.0;
pub const ERR_TYPE: f64 = 3.0;
pub const ERR_CLOSED: f64 = 4.0;
pub const ERR_TX_ENDED: f64 = 5.0;
pub const ERR_INTERNAL: f64 = 6.0;
/// A user-defined function threw: errno is the token of the JS error the JS side kept.
pub const ERR_THROWN: f64 = 7.0;

/// `[kind, message, codeName, errno, sql]`
pub unsafe fn error_to_js(env: sys::napi_env, e: &Error) -> NapiResult<sys::napi_value> {
    let mut arr = ptr::null_mut();
    ok(sys::napi_create_array_with_length(env, 5, &mut arr))?;
    let mut null = ptr::null_mut();
    ok(sys::napi_get_null(env, &mut null))?;
    let (kind, message, code, errno, sql) = match e {
        Error::Sqlite { code, message, sql } => {
            (ERR_SQLITE, message.clone(), Some(code_name(*code)), Some(*code), sql.as_deref())
        }
        Error::Range(m) => (ERR_RANGE, m.clone(), None, None, None),
        Error::Type(m) => (ERR_TYPE, m.clone(), None, None, None),
        Error::Closed(m) => (ERR_CLOSED, m.clone(), None, None, None),
        Error::TransactionEnded(m) => (ERR_TX_ENDED, m.clone(), None, None, None),
        Error::Thrown { message, token } => (ERR_THROWN, message.clone(), None, Some(*token as i32), None),
        other => (ERR_INTERNAL, other.to_string(), None, None, None),
    };
    set(env, arr, 0, number(env, kind)?)?;
    set(env, arr, 1, string(env, &message)?)?;
    set(env, arr, 2, match code { Some(c) => string(env, &c)?, None => null })?;
    set(env, arr, 3, match errno { Some(n) => number(env, n as f64)?, None => null })?;
    set(env, arr, 4, match sql { Some(s) => string(env, s)?, None => null })?;
    Ok(arr)
}

/// `db.diagnostics()`'s native part as an object (the JS layer adds what it knows itself).
unsafe fn diagnostics_to_js(env: sys::napi_env, d: &quietsqlite_core::Diagnostics) -> NapiResult<sys::napi_value> {
    let named = |obj: sys::napi_value, name: &std::ffi::CStr, v: sys::napi_value| -> NapiResult<()> {
        // SAFETY: on the JS thread with this delivery's env; `obj` and `v` were made in it.
        ok(unsafe { sys::napi_set_named_property(env, obj, name.as_ptr(), v) })
    };
    let mut obj = ptr::null_mut();
    ok(sys::napi_create_object(env, &mut obj))?;
    let mut version = ptr::null_mut();
    ok(sys::napi_create_string_utf8(env, d.sqlite_version.as_ptr().cast(), d.sqlite_version.len() as isize, &mut version))?;
    named(obj, c"sqliteVersion", version)?;
    for (name, v) in [
        (c"readers", d.readers as f64),
        (c"readersBusy", d.readers_busy as f64),
        (c"queuedReads", d.queued_reads as f64),
        (c"queuedWrites", d.queued_writes as f64),
        (c"pageSize", d.page_size as f64),
        (c"pageCount", d.page_count as f64),
        (c"freelistCount", d.freelist_count as f64),
        (c"walBytes", d.wal_bytes as f64),
        (c"cacheBytes", d.cache_bytes as f64),
        (c"statementBytes", d.statement_bytes as f64),
        (c"schemaBytes", d.schema_bytes as f64),
        (c"inlineReads", d.inline_reads as f64),
        (c"inlineFallbacks", d.inline_fallbacks as f64),
    ] {
        named(obj, name, number(env, v)?)?;
    }
    let mut live = ptr::null_mut();
    ok(sys::napi_create_object(env, &mut live))?;
    for (name, v) in [
        (c"groups", d.live_groups as f64),
        (c"subscribers", d.live_subscribers as f64),
        (c"reruns", d.live_reruns as f64),
        (c"skippedByHash", d.live_skipped_by_hash as f64),
    ] {
        named(live, name, number(env, v)?)?;
    }
    named(obj, c"liveQueries", live)?;
    Ok(obj)
}

/// Copies `bytes` into `target` when it is a Buffer (or other byte view) at least that long;
/// false (nothing written) otherwise.
pub(crate) unsafe fn copy_into(env: sys::napi_env, target: sys::napi_value, bytes: &[u8]) -> bool {
    let mut data = ptr::null_mut();
    let mut len = 0usize;
    if sys::napi_get_buffer_info(env, target, &mut data, &mut len) != sys::Status::napi_ok || data.is_null() || bytes.len() > len {
        return false;
    }
    // SAFETY: Node reports `data` valid for `len` bytes while `target` lives (it is a value
    // of the current call, and no JS runs before the copy ends); at most `len` bytes are
    // written, from a Rust slice that cannot overlap memory owned by V8.
    ptr::copy_nonoverlapping(bytes.as_ptr(), data.cast::<u8>(), bytes.len());
    true
}

/// A read's result as its completion delivers it (`read_inline` answers with the same).
pub(crate) unsafe fn read_output_to_js(env: sys::napi_env, out: quietsqlite_core::ReadOutput) -> NapiResult<sys::napi_value> {
    output_to_js(env, Output::Read(out))
}

/// A completion's value (batch.rs writes the others into the scratch).
pub(crate) unsafe fn output_to_js(env: sys::napi_env, out: Output) -> NapiResult<sys::napi_value> {
    match out {
        Output::Read(ReadOutput::Rows(rows)) | Output::Emission(rows) => buffer(env, rows.bytes),
        Output::Read(ReadOutput::Json(bytes)) => buffer(env, bytes),
        Output::Read(ReadOutput::Described(d)) => {
            // `[readonly, names, declared types]` (a type is null for an expression).
            let count = d.columns.len();
            let mut arr = ptr::null_mut();
            ok(sys::napi_create_array_with_length(env, 3, &mut arr))?;
            let mut readonly = ptr::null_mut();
            ok(sys::napi_get_boolean(env, d.readonly, &mut readonly))?;
            set(env, arr, 0, readonly)?;
            let mut names = ptr::null_mut();
            ok(sys::napi_create_array_with_length(env, count, &mut names))?;
            let mut types = ptr::null_mut();
            ok(sys::napi_create_array_with_length(env, count, &mut types))?;
            for (i, (name, decl)) in d.columns.iter().enumerate() {
                set(env, names, i as u32, string(env, name)?)?;
                let t = match decl {
                    Some(t) => string(env, t)?,
                    None => {
                        let mut null = ptr::null_mut();
                        ok(sys::napi_get_null(env, &mut null))?;
                        null
                    }
                };
                set(env, types, i as u32, t)?;
            }
            set(env, arr, 1, names)?;
            set(env, arr, 2, types)?;
            Ok(arr)
        }
        Output::Exec(e) => {
            let mut arr = ptr::null_mut();
            ok(sys::napi_create_array_with_length(env, 3, &mut arr))?;
            set(env, arr, 0, number(env, e.changes as f64)?)?;
            set(env, arr, 1, int64(env, e.last_insert_rowid)?)?;
            let rows = match e.rows {
                Some(r) => buffer(env, r.bytes)?,
                None => {
                    let mut null = ptr::null_mut();
                    ok(sys::napi_get_null(env, &mut null))?;
                    null
                }
            };
            set(env, arr, 2, rows)?;
            Ok(arr)
        }
        Output::Batch { changes } => number(env, changes as f64),
        Output::Chunk { rows, done } => {
            let mut arr = ptr::null_mut();
            ok(sys::napi_create_array_with_length(env, 2, &mut arr))?;
            set(env, arr, 0, buffer(env, rows.bytes)?)?;
            let mut flag = ptr::null_mut();
            ok(sys::napi_get_boolean(env, done, &mut flag))?;
            set(env, arr, 1, flag)?;
            Ok(arr)
        }
        Output::Diagnostics(d) => diagnostics_to_js(env, &d),
        Output::Bytes(bytes) => buffer(env, bytes),
        Output::Progress { remaining, total } => {
            let mut arr = ptr::null_mut();
            ok(sys::napi_create_array_with_length(env, 2, &mut arr))?;
            set(env, arr, 0, number(env, remaining as f64)?)?;
            set(env, arr, 1, number(env, total as f64)?)?;
            Ok(arr)
        }
        Output::Done => {
            let mut u = ptr::null_mut();
            ok(sys::napi_get_undefined(env, &mut u))?;
            Ok(u)
        }
    }
}
