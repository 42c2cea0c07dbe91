//! Catching a panic that is expected and handled, without the report the default panic hook
//! prints to stderr. Only rusqlite's column names need it (see
//! `raw_statement::column_names_of`); every other panic is reported as before.

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    /// This thread is inside `catch_quietly`: its panics are caught, and not reported.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

/// Runs `f`, catching a panic as `catch_unwind` does, and keeps the panic hook from
/// reporting it. The hook put in place (once, for this library's copy of std only) passes
/// every other panic to the hook it replaced.
pub(crate) fn catch_quietly<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    let was = QUIET.with(|q| q.replace(true));
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    out
}
