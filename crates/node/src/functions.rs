//! User-defined functions: a connection thread's call runs on the JavaScript thread while
//! that connection thread waits. One threadsafe function per database carries the calls to
//! one JS dispatcher (src/functions.ts), which finds the body and the accumulator.
//!
//! Nothing here can leave a connection thread waiting forever: a call that cannot be queued
//! (the threadsafe function is released or closing) fails at once; a call queued when Node
//! tears the threadsafe function down is answered with an error (Node hands it to `call_js`
//! without an env); and a waiting thread looks at the `closed` flag at least every
//! `RECHECK`, so a call whose answer can no longer come (env torn down) ends too.

use crate::sink::{check, threadsafe_function};
use crate::values::{self, NapiResult, ParamError};
use napi::sys;
use quietsqlite_core::functions::{Call, Invoke, Op};
use quietsqlite_core::{Error, Value};
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How often a waiting connection thread checks that an answer can still come.
const RECHECK: Duration = Duration::from_millis(100);

/// How integers reach a function: as the database's `intMode` says (0 auto, 1 number,
/// 2 bigint; the JS layer passes the number).
#[derive(Clone, Copy, PartialEq, Eq)]
enum IntMode {
    Auto,
    Number,
    BigInt,
}

pub struct Caller {
    tsfn: sys::napi_threadsafe_function,
    /// Set once the threadsafe function may no longer be called; the lock is held around
    /// every call so a release never races one.
    released: Mutex<bool>,
    /// No answer can come any more (released, or Node finalized the threadsafe function).
    closed: AtomicBool,
    int_mode: IntMode,
}

// The raw tsfn handle may be called from any thread; every call holds `released`'s lock and
// checks it first.
unsafe impl Send for Caller {}
unsafe impl Sync for Caller {}

/// One call waiting for its answer.
struct Pending {
    op: Op,
    function: u32,
    name: String,
    state: u64,
    args: Vec<Value>,
    answer: Mutex<Option<quietsqlite_core::Result<Value>>>,
    ready: Condvar,
}

impl Pending {
    fn answer(&self, a: quietsqlite_core::Result<Value>) {
        *self.answer.lock().unwrap_or_else(|p| p.into_inner()) = Some(a);
        self.ready.notify_one();
    }
}

fn gone() -> Error {
    Error::Closed(
        "a user-defined function could not run: its JavaScript environment is gone or the database was disposed".into(),
    )
}

impl Caller {
    /// Creates the threadsafe function around `dispatcher(op, function, state, args)`,
    /// unref'd: it never keeps the process alive by itself.
    ///
    /// # Safety
    /// On the JS thread, with the env of the current call and a function value of it.
    pub unsafe fn new(env: sys::napi_env, dispatcher: sys::napi_value, int_mode: u32) -> NapiResult<Arc<Caller>> {
        let int_mode = match int_mode {
            1 => IntMode::Number,
            2 => IntMode::BigInt,
            _ => IntMode::Auto,
        };
        let caller = Arc::new(Caller {
            tsfn: ptr::null_mut(),
            released: Mutex::new(false),
            closed: AtomicBool::new(false),
            int_mode,
        });
        let tsfn = threadsafe_function(env, dispatcher, c"quietsqlite-function", &caller, finalize_tsfn, call_js)?;
        // SAFETY: no other thread has the caller yet (it reaches the catalog only after this
        // returns), and Node calls call_js only from the event loop, after this call.
        let raw = Arc::as_ptr(&caller) as *mut Caller;
        (*raw).tsfn = tsfn;
        Ok(caller)
    }

    /// No more calls: later ones fail at once, waiting ones within `RECHECK`.
    pub fn release(&self) {
        let mut released = self.released.lock().unwrap_or_else(|p| p.into_inner());
        self.closed.store(true, Ordering::Release);
        if *released {
            return;
        }
        *released = true;
        // SAFETY: not released before (checked under the lock), so released exactly once.
        unsafe {
            sys::napi_release_threadsafe_function(self.tsfn, sys::ThreadsafeFunctionReleaseMode::release);
        }
    }
}

impl Invoke for Caller {
    fn invoke(&self, call: Call<'_>) -> quietsqlite_core::Result<Value> {
        let pending = Arc::new(Pending {
            op: call.op,
            function: call.function,
            name: call.name.to_owned(),
            state: call.state,
            args: call.args,
            answer: Mutex::new(None),
            ready: Condvar::new(),
        });
        {
            let released = self.released.lock().unwrap_or_else(|p| p.into_inner());
            if *released {
                return Err(gone());
            }
            let data = Arc::into_raw(pending.clone()) as *mut c_void;
            // SAFETY: the tsfn is alive (not released: checked under the lock held across
            // the call). Nonblocking on an unbounded queue: it never waits here.
            let status = unsafe {
                sys::napi_call_threadsafe_function(self.tsfn, data, sys::ThreadsafeFunctionCallMode::nonblocking)
            };
            if status != sys::Status::napi_ok {
                // Not queued (napi_closing: the env is going): the reference comes back here.
                // SAFETY: made by Arc::into_raw just above and not handed to Node.
                drop(unsafe { Arc::from_raw(data as *const Pending) });
                return Err(gone());
            }
        }
        let mut answer = pending.answer.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(a) = answer.take() {
                return a;
            }
            if self.closed.load(Ordering::Acquire) {
                return Err(gone());
            }
            answer = pending.ready.wait_timeout(answer, RECHECK).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

unsafe extern "C" fn call_js(env: sys::napi_env, dispatcher: sys::napi_value, context: *mut c_void, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the reference `invoke` leaked for this call; Node passes each item to
    // this function exactly once (with a null env when tearing down).
    let pending = Arc::from_raw(data as *const Pending);
    // Called by Node: a panic unwinding out of here would abort the process.
    let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if env.is_null() || context.is_null() {
            return Err(gone());
        }
        // SAFETY: the context is the caller, kept alive by the reference finalize_tsfn frees.
        let caller = &*(context as *const Caller);
        if caller.closed.load(Ordering::Acquire) {
            return Err(gone());
        }
        // SAFETY: Node calls this on the JS thread with the tsfn's env and dispatcher.
        run(env, dispatcher, caller.int_mode, &pending)
    }))
    .unwrap_or_else(|_| Err(Error::Internal("quietsqlite panicked (a bug) while calling a user-defined function".into())));
    pending.answer(answer);
}

/// Calls the dispatcher with `(op, function, state, args)` and converts its answer.
unsafe fn run(env: sys::napi_env, dispatcher: sys::napi_value, int_mode: IntMode, p: &Pending) -> quietsqlite_core::Result<Value> {
    // A pending exception here means JS cannot run any more (a terminating Worker): the
    // environment is going, not a bug.
    let napi = |s: sys::napi_status| {
        if s == sys::Status::napi_pending_exception {
            gone()
        } else {
            Error::Internal(format!("Node-API failed ({s}) while calling function '{}'", p.name))
        }
    };
    let mut args = ptr::null_mut();
    check(sys::napi_create_array_with_length(env, p.args.len(), &mut args)).map_err(napi)?;
    for (i, v) in p.args.iter().enumerate() {
        let js = match arg_to_js(env, v, int_mode) {
            Ok(Some(js)) => js,
            Ok(None) => {
                return Err(Error::Range(format!(
                    "argument {} of function '{}' is an integer beyond 2^53, which a JS number cannot hold \
                     exactly (intMode is 'number'); use intMode 'auto' or 'bigint'",
                    i + 1,
                    p.name
                )))
            }
            Err(s) => return Err(napi(s)),
        };
        values::set(env, args, i as u32, js).map_err(napi)?;
    }
    let argv = [
        values::number(env, p.op as u32 as f64).map_err(napi)?,
        values::number(env, p.function as f64).map_err(napi)?,
        // Accumulator numbers count up from 1: exact as a double for 2^53 calls.
        values::number(env, p.state as f64).map_err(napi)?,
        args,
    ];
    let mut undefined = ptr::null_mut();
    check(sys::napi_get_undefined(env, &mut undefined)).map_err(napi)?;
    let mut result = ptr::null_mut();
    let status = sys::napi_call_function(env, undefined, dispatcher, argv.len(), argv.as_ptr(), &mut result);
    if status == sys::Status::napi_ok {
        let name = || format!("the value function '{}' returned", p.name);
        return values::to_value(env, result, &name).map_err(|e| match e {
            ParamError::Type(m) => Error::Type(m),
            ParamError::Range(m) => Error::Range(m),
            ParamError::Napi(s) => napi(s),
        });
    }
    // The dispatcher throws only its own marker `{ token, message }` (the user's error stays
    // in JS under `token`); anything else means JS could not run (a terminating Worker).
    let mut exception = ptr::null_mut();
    if sys::napi_get_and_clear_last_exception(env, &mut exception) == sys::Status::napi_ok && !exception.is_null() {
        if let Some(thrown) = marker(env, exception) {
            return Err(thrown);
        }
    }
    Err(gone())
}

/// `{ token: number, message: string }` as the dispatcher throws it.
unsafe fn marker(env: sys::napi_env, v: sys::napi_value) -> Option<Error> {
    let mut t = 0;
    if sys::napi_typeof(env, v, &mut t) != sys::Status::napi_ok || t != sys::ValueType::napi_object {
        return None;
    }
    let mut token = ptr::null_mut();
    let mut message = ptr::null_mut();
    if sys::napi_get_named_property(env, v, c"token".as_ptr(), &mut token) != sys::Status::napi_ok
        || sys::napi_get_named_property(env, v, c"message".as_ptr(), &mut message) != sys::Status::napi_ok
    {
        return None;
    }
    let mut n = 0u32;
    if sys::napi_get_value_uint32(env, token, &mut n) != sys::Status::napi_ok {
        return None;
    }
    let message = values::get_string(env, message, &|| "a thrown error's message".into()).ok()?;
    Some(Error::Thrown { message, token: n })
}

/// One argument as JS sees it; `None` for an integer 'number' mode cannot hold.
unsafe fn arg_to_js(env: sys::napi_env, v: &Value, int_mode: IntMode) -> NapiResult<Option<sys::napi_value>> {
    let mut out = ptr::null_mut();
    match v {
        Value::Null => check(sys::napi_get_null(env, &mut out))?,
        Value::Real(f) => return values::number(env, *f).map(Some),
        Value::Text(s) => return values::string(env, s).map(Some),
        Value::Blob(b) => {
            let mut data = ptr::null_mut();
            check(sys::napi_create_buffer_copy(env, b.len(), b.as_ptr() as *const c_void, &mut data, &mut out))?;
        }
        Value::Integer(i) => {
            let safe = values::is_safe_integer(*i);
            match (int_mode, safe) {
                (IntMode::BigInt, _) | (IntMode::Auto, false) => check(sys::napi_create_bigint_int64(env, *i, &mut out))?,
                (_, true) => return values::number(env, *i as f64).map(Some),
                (IntMode::Number, false) => return Ok(None),
            }
        }
    }
    Ok(Some(out))
}

unsafe extern "C" fn finalize_tsfn(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `data` is the reference Caller::new leaked for the tsfn; Node calls this
        // finalizer once, so it is released exactly once.
        let caller = unsafe { Arc::from_raw(data as *const Caller) };
        // Node frees the tsfn now (env teardown or after our release): no call may reach it.
        *caller.released.lock().unwrap_or_else(|p| p.into_inner()) = true;
        caller.closed.store(true, Ordering::Release);
    });
}
