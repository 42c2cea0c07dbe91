//! This thread's open databases by number, for the calls made per request (`db_read`,
//! `db_execute`, `db_take_completions`, ...). Those are functions taking the number rather
//! than methods of `NativeDatabase`: napi-rs checks a method's receiver through a
//! process-wide table of borrows under a lock, which cost more than the rest of the call
//! (docs/experiments/046-calls-by-handle.md). A database is used only on the thread of the
//! env that made it, so the table is per thread and needs no lock; each entry holds the
//! state alive for the length of a call, even if the class object is collected during it.

use crate::DatabaseState;
use napi::{sys, Error, Result, Status};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

thread_local! {
    static OPEN: RefCell<Table> = RefCell::new(Table { next: 1, open: HashMap::new() });
}

struct Table {
    next: u32,
    /// The env each database was made in, and its state.
    open: HashMap<u32, (usize, Rc<DatabaseState>)>,
}

impl Drop for Table {
    /// The thread is ending (`process.exit()` runs the main thread's thread-local
    /// destructors without running finalizers): what is still open is left as it was before
    /// this table existed, not closed here in an order `NativeDatabase`'s drop does not
    /// choose.
    fn drop(&mut self) {
        for (_, (_, state)) in self.open.drain() {
            std::mem::forget(state);
        }
    }
}

/// Enters `state`, made in `env`, and returns its number: never 0, and never one in use.
pub fn add(env: sys::napi_env, state: Rc<DatabaseState>) -> u32 {
    OPEN.with(|t| {
        let mut t = t.borrow_mut();
        let mut handle = t.next;
        while handle == 0 || t.open.contains_key(&handle) {
            handle = handle.wrapping_add(1);
        }
        t.next = handle.wrapping_add(1);
        t.open.insert(handle, (env as usize, state));
        handle
    })
}

/// Removes `handle` (its `NativeDatabase` was dropped).
pub fn remove(handle: u32) {
    // During thread teardown the table may be gone already: nothing to remove then.
    let _ = OPEN.try_with(|t| t.borrow_mut().open.remove(&handle));
}

/// The state of `handle` if this thread has a database of that number made in `env`, or
/// an error (thrown in JS).
pub fn get(env: &napi::Env, handle: u32) -> Result<Rc<DatabaseState>> {
    OPEN.with(|t| match t.borrow().open.get(&handle) {
        Some((made_in, state)) if *made_in == env.raw() as usize => Some(state.clone()),
        _ => None,
    })
    .ok_or_else(|| Error::new(Status::InvalidArg, "quietsqlite: no open database has this handle".to_owned()))
}
