//! Waiting by polling: a thread that expects its next message within microseconds checks for
//! it instead of parking, and is spared the wake-up (docs/experiments/003, 016, 019).
//!
//! A wait may give the CPU away once (`sched_yield`) after a first look finds nothing. When
//! the thread it waits for shares this CPU (another process keeps the other cores busy), a
//! plain spin would hold the CPU that thread needs until the scheduler preempts it; with a
//! CPU to itself the yield returns at once. Only waits on the writer do so: a read wakes a
//! parked reader that then takes the yielded CPU for nothing (docs/experiments/025-spin-yield.md).

use std::time::{Duration, Instant};

/// Calls `probe` until it returns `Some`, for up to `max` (at least once); with `yield_first`,
/// gives the CPU away once after the first probe that finds nothing.
pub fn spin_until<T>(
    max: Duration,
    yield_first: bool,
    mut probe: impl FnMut() -> Option<T>,
) -> Option<T> {
    let start = Instant::now();
    let mut yielded = !yield_first;
    loop {
        if let Some(found) = probe() {
            return Some(found);
        }
        if start.elapsed() >= max {
            return None;
        }
        if yielded {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
            yielded = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn returns_what_the_probe_finds_and_gives_up_after_max() {
        let flag = Arc::new(AtomicBool::new(false));
        let setter = {
            let flag = flag.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                flag.store(true, Ordering::Release);
            })
        };
        let found = spin_until(Duration::from_secs(5), true, || {
            flag.load(Ordering::Acquire).then_some(7)
        });
        assert_eq!(found, Some(7));
        setter.join().unwrap();
        let start = Instant::now();
        assert_eq!(
            spin_until(Duration::from_millis(2), false, || None::<()>),
            None
        );
        assert!(start.elapsed() >= Duration::from_millis(2));
        // A zero window still probes once.
        let mut probes = 0;
        assert_eq!(
            spin_until(Duration::ZERO, true, || {
                probes += 1;
                None::<()>
            }),
            None
        );
        assert_eq!(probes, 1);
    }
}
