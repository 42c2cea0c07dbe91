//! Long statements take turns with the rest of the process: a connection that has run SQL for
//! `TURN` without a pause gives its CPU away once (`sched_yield`), and again after each further
//! `TURN`.
//!
//! With more runnable threads than CPUs (readers stepping large reads, the JS thread, the
//! other programs of the machine), the scheduler lets a running thread use up its slice,
//! milliseconds, before a thread that has just woken gets its CPU. A point read on another
//! reader, or the JS thread that must answer it, then waits for that slice. A yield ends the
//! slice early when another thread is waiting for the CPU, and returns at once when none is
//! (docs/experiments/062-long-statements-take-turns.md).
//!
//! The clock is the progress handler, called every `PROGRESS_OPS` instructions. SQLite counts
//! a statement's instructions over all its runs, so a cached point query calls it too, once in
//! many runs: a reader kept busy by point queries without a pause of `PAUSE` is
//! one stretch, and yields like a long statement.

use std::time::{Duration, Instant};

/// How long a connection runs SQL without a pause before it yields: 250 µs in experiment 062;
/// 100 µs since 065 (under large reads, point reads' p50 0.70 -> 0.40 ms, p99 4.6 -> 3.0 ms).
pub(crate) const TURN: Duration = Duration::from_micros(100);

/// A gap between two ticks longer than this is a pause, and starts a new stretch: while a
/// statement runs, the progress handler is called microseconds apart.
const PAUSE: Duration = Duration::from_micros(100);

/// The turn of one connection; ticked by its progress handler.
pub(crate) struct Turns {
    last_tick: Instant,
    turn_began: Instant,
}

impl Turns {
    pub(crate) fn new() -> Turns {
        let now = Instant::now();
        Turns { last_tick: now, turn_began: now }
    }

    /// Gives the CPU away when the turn is over.
    pub(crate) fn tick(&mut self, now: Instant) {
        if self.turn_over(now) {
            std::thread::yield_now();
            // The next turn begins when this thread has the CPU again.
            self.turn_began = Instant::now();
        }
    }

    /// True when a whole turn has passed since the turn began, without a pause.
    fn turn_over(&mut self, now: Instant) -> bool {
        let paused = now.saturating_duration_since(self.last_tick) > PAUSE;
        self.last_tick = now;
        if paused {
            self.turn_began = now;
            return false;
        }
        if now.saturating_duration_since(self.turn_began) >= TURN {
            self.turn_began = now;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_yields_after_each_turn_and_a_new_one_starts_afresh() {
        let mut turns = Turns::new();
        let t0 = turns.last_tick + Duration::from_secs(1);
        let step = Duration::from_micros(10);
        // A statement after a pause: its first tick starts its turn.
        assert!(!turns.turn_over(t0));
        let mut yields = Vec::new();
        let per_turn = (TURN.as_micros() / 10) as u32;
        for i in 1..=per_turn * 5 / 2 {
            if turns.turn_over(t0 + step * i) {
                yields.push(i);
            }
        }
        // Ticks every 10 µs for two turns and a half: a yield at the end of each whole turn.
        assert_eq!(yields, vec![per_turn, 2 * per_turn]);
        // A short statement after a gap never yields, however long the thread was busy before.
        let t1 = t0 + step * per_turn * 3 + Duration::from_millis(1);
        for i in 0..per_turn - 1 {
            assert!(!turns.turn_over(t1 + step * i), "tick {i}");
        }
        // Ticks that come further apart than the gap are separate statements.
        let t2 = t1 + Duration::from_millis(5);
        for i in 0..10u32 {
            assert!(!turns.turn_over(t2 + Duration::from_micros(150) * i), "tick {i}");
        }
    }
}
