//! Completions to JavaScript: threads push onto one queue; a push wakes the JS thread (a
//! threadsafe function call) unless a call is queued already whose callback has not yet
//! looked at the queue; that callback takes everything queued by then in ONE call
//! (batch.rs), so many completions share one wake-up. The JS thread's polls take
//! completions too, without any call.

use crate::batch;
use crate::values::NapiResult;
use napi::sys;
use quietsqlite_core::{Completion, CompletionSink};
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Queue {
    items: Vec<Completion>,
    /// Set once the threadsafe function may no longer be called (closed or env teardown).
    released: bool,
    /// A threadsafe call is queued whose callback has not yet looked at the queue: whatever
    /// is pushed meanwhile is taken by that callback, so it needs no call of its own. (One
    /// call per completion pushed after a poll drained the queue cost the producing thread
    /// a call and the JS thread a callback each, almost all of which found nothing.)
    wake_queued: bool,
}

pub struct NodeSink {
    queue: Mutex<Queue>,
    /// Mirrors `!queue.items.is_empty()` (set under the lock): lets the JS thread poll for a
    /// completion without taking the lock the producing threads need (`take_within`).
    queued: AtomicBool,
    /// The vector of the last batch, emptied, for the next `drain` (JS thread only; no
    /// larger than a batch).
    emptied: Mutex<Vec<Completion>>,
    tsfn: sys::napi_threadsafe_function,
}

// The raw tsfn handle is designed to be called from any thread; every call is guarded by
// the queue's mutex and the `released` flag.
unsafe impl Send for NodeSink {}
unsafe impl Sync for NodeSink {}

impl NodeSink {
    /// Creates the threadsafe function around `callback()`; starts unref'd so an idle
    /// database never keeps the process alive.
    pub unsafe fn new(env: sys::napi_env, callback: sys::napi_value) -> NapiResult<Arc<NodeSink>> {
        // Two-phase init: the tsfn needs the sink's address as context, the sink the tsfn.
        let sink = Arc::new(NodeSink {
            queue: Mutex::new(Queue { items: Vec::new(), released: false, wake_queued: false }),
            queued: AtomicBool::new(false),
            emptied: Mutex::new(Vec::new()),
            tsfn: ptr::null_mut(),
        });
        let tsfn = threadsafe_function(env, callback, c"quietsqlite", &sink, finalize_tsfn, call_js)?;
        // SAFETY: nobody else can observe the sink yet (no thread has it, and Node calls
        // call_js only after this function returns to the JS thread's event loop).
        let raw = Arc::as_ptr(&sink) as *mut NodeSink;
        (*raw).tsfn = tsfn;
        Ok(sink)
    }

    pub unsafe fn set_ref(&self, env: sys::napi_env, keep_alive: bool) {
        let q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.released {
            return;
        }
        if keep_alive {
            sys::napi_ref_threadsafe_function(env, self.tsfn);
        } else {
            sys::napi_unref_threadsafe_function(env, self.tsfn);
        }
    }

    /// Stops all further calls into JS and lets Node free the threadsafe function.
    pub fn release(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.released {
            return;
        }
        q.released = true;
        q.items.clear();
        self.queued.store(false, Ordering::Relaxed);
        // SAFETY: the tsfn is alive until this release (guarded by `released`, set once
        // under the lock, so it is released exactly once).
        unsafe {
            sys::napi_release_threadsafe_function(self.tsfn, sys::ThreadsafeFunctionReleaseMode::release);
        }
    }

    /// Marks the sink unusable without touching the tsfn (Node is freeing it already).
    fn mark_released(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.released = true;
        q.items.clear();
        self.queued.store(false, Ordering::Relaxed);
    }

    /// Takes up to `MAX_ENTRIES` queued completions; `more`: some are left. The queue gets
    /// the emptied vector of the previous batch in exchange, so that pushing into it
    /// allocates nothing (one allocation per batch on the producing thread, freed on this
    /// one, cost a reader a few percent of its time with many small reads in flight).
    fn drain(&self) -> (Vec<Completion>, bool) {
        let emptied = std::mem::take(&mut *self.emptied.lock().unwrap_or_else(|p| p.into_inner()));
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let batch = if q.items.len() <= batch::MAX_ENTRIES {
            std::mem::replace(&mut q.items, emptied)
        } else {
            q.items.drain(..batch::MAX_ENTRIES).collect()
        };
        let more = !q.items.is_empty();
        self.queued.store(more, Ordering::Relaxed);
        (batch, more)
    }

    /// Polls for completions for up to `max` and writes what is queued by then into
    /// `scratch` (see batch.rs), returning the array of its other payloads or null; `None`:
    /// nothing came. The JS thread calls this when a request it just sent is likely to
    /// finish within `max` (taking the result here costs less than going to sleep in the
    /// event loop and being woken by the threadsafe call, experiment 019), and with `max` 0
    /// when the threadsafe call woke it.
    ///
    /// # Safety
    /// On the JS thread, with the env of the current call; `scratch` is a value of that call.
    pub unsafe fn take_within(
        &self,
        env: sys::napi_env,
        max: Duration,
        yield_first: bool,
        scratch: sys::napi_value,
    ) -> NapiResult<Option<sys::napi_value>> {
        if quietsqlite_core::spin::spin_until(max, yield_first, || self.queued.load(Ordering::Acquire).then_some(())).is_none() {
            return Ok(None);
        }
        // A take inside a take (from a setter that ran while the outer one made a value)
        // takes nothing: the outer one's loop takes the rest.
        if !batch::can_write() {
            return Ok(None);
        }
        let (mut taken, more) = self.drain();
        if taken.is_empty() {
            return Ok(None);
        }
        let written = batch::write(env, scratch, &mut taken, more);
        if taken.capacity() <= batch::MAX_ENTRIES {
            taken.clear();
            *self.emptied.lock().unwrap_or_else(|p| p.into_inner()) = taken;
        }
        if written.is_err() && more {
            // This batch is lost (Node could not make a value even to report it: memory ran
            // out); the completions behind it must still wake the JS thread.
            self.wake_again();
        }
        written.map(Some)
    }

    /// Queues a threadsafe call whatever the queue holds.
    fn wake_again(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if !q.released {
            self.queue_wake(&mut q);
        }
    }

    /// Queues a threadsafe call; under the queue's lock, with the sink not released.
    fn queue_wake(&self, q: &mut Queue) {
        // Non-blocking on an unbounded queue: napi_ok, or napi_closing during teardown (when
        // nothing is delivered any more; the next completion would try again).
        // SAFETY: callable from any thread while not released (the caller checked, under
        // the lock it holds).
        let status = unsafe {
            sys::napi_call_threadsafe_function(self.tsfn, ptr::null_mut(), sys::ThreadsafeFunctionCallMode::nonblocking)
        };
        q.wake_queued = status == sys::Status::napi_ok;
    }
}

impl CompletionSink for NodeSink {
    fn complete(&self, completion: Completion) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.released {
            return;
        }
        q.items.push(completion);
        self.queued.store(true, Ordering::Release);
        if !q.wake_queued {
            self.queue_wake(&mut q);
        }
    }
}

/// Creates an unref'd threadsafe function (it never keeps the process alive by itself) that
/// calls `js_fn` through `call_js`. Its context, given to `call_js` and `finalize`, is one
/// strong count of `owner` made by `Arc::into_raw`, which `finalize` gives back.
///
/// # Safety
/// On the JS thread, with the env of the current call and a function value of it; `call_js`
/// and `finalize` treat their context as a `*const T` from `Arc::into_raw`.
pub unsafe fn threadsafe_function<T>(
    env: sys::napi_env,
    js_fn: sys::napi_value,
    name: &std::ffi::CStr,
    owner: &Arc<T>,
    finalize: unsafe extern "C" fn(sys::napi_env, *mut c_void, *mut c_void),
    call_js: unsafe extern "C" fn(sys::napi_env, sys::napi_value, *mut c_void, *mut c_void),
) -> NapiResult<sys::napi_threadsafe_function> {
    let mut js_name = ptr::null_mut();
    check(sys::napi_create_string_utf8(env, name.as_ptr(), name.to_bytes().len() as isize, &mut js_name))?;
    let context = Arc::into_raw(owner.clone()) as *mut c_void;
    let mut tsfn = ptr::null_mut();
    let status = sys::napi_create_threadsafe_function(
        env,
        js_fn,
        ptr::null_mut(),
        js_name,
        0,
        1,
        context,
        Some(finalize),
        context,
        Some(call_js),
        &mut tsfn,
    );
    if status != sys::Status::napi_ok {
        // Never created: nothing will call finalize, so the count comes back here.
        drop(Arc::from_raw(context as *const T));
        return Err(status);
    }
    check(sys::napi_unref_threadsafe_function(env, tsfn))?;
    Ok(tsfn)
}

pub fn check(status: sys::napi_status) -> NapiResult<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(status)
    }
}

unsafe extern "C" fn call_js(env: sys::napi_env, callback: sys::napi_value, context: *mut c_void, _data: *mut c_void) {
    // Called by Node: a panic unwinding out of here would abort the process.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: Node calls this on the JS thread with the tsfn's env, callback and context
        // (the sink, kept alive by the reference finalize_tsfn releases).
        unsafe { wake(env, callback, context) }
    }));
}

/// Calls the JS callback, which takes the queued completions with its scratch
/// (`take_within`), unless a poll took them first.
unsafe fn wake(env: sys::napi_env, callback: sys::napi_value, context: *mut c_void) {
    if env.is_null() || context.is_null() {
        return;
    }
    let sink = &*(context as *const NodeSink);
    // From here on a completion pushed makes a call of its own; one pushed before is taken
    // by the callback below (or was taken by a poll already).
    let pending = {
        let mut q = sink.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.wake_queued = false;
        !q.items.is_empty()
    };
    if !pending {
        return;
    }
    let mut undefined = ptr::null_mut();
    sys::napi_get_undefined(env, &mut undefined);
    let mut result = ptr::null_mut();
    sys::napi_call_function(env, undefined, callback, 0, ptr::null(), &mut result);
}

unsafe extern "C" fn finalize_tsfn(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `data` is the reference NodeSink::new leaked for the tsfn; Node calls this
        // finalizer once, so it is released exactly once.
        let sink = unsafe { Arc::from_raw(data as *const NodeSink) };
        sink.mark_released();
    });
}

/// What the env cleanup hook of one database holds.
struct HookState {
    sink: Arc<NodeSink>,
    abandoner: quietsqlite_core::Abandoner,
}

/// Env teardown (a Worker terminated, the process exiting): stop calling into JS, and end
/// the database, rolling back a transaction its body can no longer finish (otherwise the
/// writer would hold the write lock on the file until the process exits).
unsafe extern "C" fn on_env_cleanup(arg: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `arg` is the HookState leaked in `CleanupHook::add`; it is freed only by
        // `remove`, which unregisters this hook first, so it is alive whenever Node calls it.
        let state = unsafe { &*(arg as *const HookState) };
        state.sink.mark_released();
        state.abandoner.abandon();
    });
}

/// The env cleanup hook of one database; removed when the database is disposed, so
/// opening and closing many databases leaves nothing behind.
pub struct CleanupHook {
    env: sys::napi_env,
    arg: *mut c_void,
}

impl CleanupHook {
    pub fn add(env: sys::napi_env, sink: &Arc<NodeSink>, abandoner: quietsqlite_core::Abandoner) -> CleanupHook {
        let arg = Box::into_raw(Box::new(HookState { sink: sink.clone(), abandoner })) as *mut c_void;
        // SAFETY: on the JS thread with its env; `arg` stays allocated until `remove`.
        unsafe { sys::napi_add_env_cleanup_hook(env, Some(on_env_cleanup), arg) };
        CleanupHook { env, arg }
    }

    /// Unregisters the hook and drops its reference (once).
    pub fn remove(&mut self) {
        if self.arg.is_null() {
            return;
        }
        // SAFETY: the reference `add` leaked, dropped once (arg is nulled after).
        unsafe {
            sys::napi_remove_env_cleanup_hook(self.env, Some(on_env_cleanup), self.arg);
            // SAFETY: made by Box::into_raw in `add`; the null check above makes this once.
            drop(Box::from_raw(self.arg as *mut HookState));
        }
        self.arg = std::ptr::null_mut();
    }
}
