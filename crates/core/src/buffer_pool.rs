//! Result buffers that JavaScript has let go of, kept a moment for the next large result.
//!
//! A result handed to JavaScript must be new memory (it comes back only when V8 collects its
//! Buffer), and the kernel zeroes every page of new memory on first touch: about a tenth of
//! a reader's time on a 10k-row result. A buffer whose Buffer was collected is still
//! resident, so the next result written into it skips those faults. V8 collects results in
//! batches, one batch per collection, so the pool must hold about a batch to help, and it
//! gives everything back to the allocator within `KEEP_FOR` of receiving it
//! (docs/experiments/038-result-buffer-pool.md).

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The most capacity the process keeps (all buffers together).
pub const POOL_BYTES: usize = 64 * 1024 * 1024;
/// Smaller buffers are not kept: they are cheap to get, and small results are copied.
pub const MIN_POOLED_BYTES: usize = 64 * 1024;
/// How long a buffer stays unused before it is freed.
pub const KEEP_FOR: Duration = Duration::from_secs(1);

/// The process's pool: results go to JavaScript from every database and come back on
/// whichever thread V8 frees them.
static RESULTS: Pool = Pool::new(POOL_BYTES, KEEP_FOR);

/// Keeps `buf` for a later result (see `Pool::give`).
pub fn give(buf: Vec<u8>) {
    RESULTS.give(buf)
}

/// An empty kept buffer with a capacity in `min..=max` (see `Pool::take`).
pub fn take(min: usize, max: usize) -> Option<Vec<u8>> {
    RESULTS.take(min, max)
}

/// The largest empty kept buffer, if it holds at least `min` (see `Pool::take_largest`).
pub fn take_largest(min: usize) -> Option<Vec<u8>> {
    RESULTS.take_largest(min)
}

pub struct Pool {
    state: Mutex<State>,
    max_bytes: usize,
    keep_for: Duration,
}

struct State {
    /// In the order they came back (oldest first).
    bufs: Vec<(Vec<u8>, Instant)>,
    /// Their capacities, summed.
    held: usize,
    /// Whether a thread is freeing the buffers as they expire. It runs while the pool holds
    /// any, and ends when it is empty.
    trimmer: bool,
}

impl State {
    fn remove(&mut self, i: usize) -> Vec<u8> {
        // `remove`, not `swap_remove`: the rest stay oldest first.
        let (buf, _) = self.bufs.remove(i);
        self.held -= buf.capacity();
        buf
    }
}

impl Pool {
    pub const fn new(max_bytes: usize, keep_for: Duration) -> Pool {
        Pool { state: Mutex::new(State { bufs: Vec::new(), held: 0, trimmer: false }), max_bytes, keep_for }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; were it poisoned, the state is still whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `buf` if its capacity is at least `MIN_POOLED_BYTES` and the pool has room for
    /// it; frees it otherwise. Never panics (it runs in a Node finalizer).
    pub fn give(&'static self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        if !(MIN_POOLED_BYTES..=self.max_bytes).contains(&cap) {
            return;
        }
        buf.clear();
        let mut st = self.lock();
        if st.held + cap > self.max_bytes {
            return;
        }
        if !st.trimmer {
            let spawned = std::thread::Builder::new()
                .name("quietsqlite-pool".into())
                .spawn(move || self.free_as_they_expire());
            if spawned.is_err() {
                // Nobody would free it on time: free it now.
                return;
            }
            st.trimmer = true;
        }
        st.held += cap;
        st.bufs.push((buf, Instant::now()));
    }

    /// The smallest kept buffer with a capacity in `min..=max`, empty, if there is one: for
    /// a result whose size is known.
    pub fn take(&self, min: usize, max: usize) -> Option<Vec<u8>> {
        let mut st = self.lock();
        let fits = st.bufs.iter().enumerate().filter(|(_, (b, _))| (min..=max).contains(&b.capacity()));
        let i = fits.min_by_key(|(_, (b, _))| b.capacity())?.0;
        Some(st.remove(i))
    }

    /// The largest kept buffer, empty, if its capacity is at least `min`: for a result whose
    /// size is not known yet, so that it rarely outgrows the buffer.
    pub fn take_largest(&self, min: usize) -> Option<Vec<u8>> {
        let mut st = self.lock();
        let (i, (b, _)) = st.bufs.iter().enumerate().max_by_key(|(_, (b, _))| b.capacity())?;
        if b.capacity() < min {
            return None;
        }
        Some(st.remove(i))
    }

    /// The trimmer thread: frees each buffer `keep_for` after it came back; ends when none
    /// is left (the next `give` starts another).
    fn free_as_they_expire(&self) {
        let mut st = self.lock();
        while let Some(oldest) = st.bufs.first().map(|&(_, t)| t) {
            let now = Instant::now();
            let due = oldest + self.keep_for;
            if now < due {
                drop(st);
                std::thread::sleep(due - now);
            } else {
                let n = st.bufs.partition_point(|(_, t)| *t + self.keep_for <= now);
                let expired: Vec<(Vec<u8>, Instant)> = st.bufs.drain(..n).collect();
                st.held -= expired.iter().map(|(b, _)| b.capacity()).sum::<usize>();
                // Freed without the lock: giving memory back to the system takes a while.
                drop(st);
                drop(expired);
            }
            st = self.lock();
        }
        st.trimmer = false;
    }

    /// (buffers kept, their capacity, whether a trimmer runs): for tests and diagnostics.
    pub fn held(&self) -> (usize, usize, bool) {
        let st = self.lock();
        (st.bufs.len(), st.held, st.trimmer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(max_bytes: usize, keep_for: Duration) -> &'static Pool {
        Box::leak(Box::new(Pool::new(max_bytes, keep_for)))
    }

    fn filled(cap: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(cap);
        v.resize(cap, 0xa5);
        v
    }

    #[test]
    fn a_kept_buffer_is_the_same_memory_and_comes_back_empty() {
        let p = pool(1 << 20, Duration::from_secs(60));
        let b = filled(100_000);
        let addr = b.as_ptr();
        p.give(b);
        assert_eq!(p.held(), (1, 100_000, true));
        let got = p.take(50_000, 200_000).expect("kept");
        assert_eq!(got.as_ptr(), addr);
        assert!(got.is_empty());
        assert_eq!(p.held().0, 0);
        assert!(p.take(0, usize::MAX).is_none());
    }

    #[test]
    fn small_buffers_and_buffers_past_the_bound_are_freed() {
        let p = pool(300_000, Duration::from_secs(60));
        p.give(filled(MIN_POOLED_BYTES - 1));
        assert_eq!(p.held().0, 0);
        p.give(filled(300_001));
        assert_eq!(p.held().0, 0);
        p.give(filled(200_000));
        p.give(filled(150_000)); // 350,000 in all: over the bound
        p.give(filled(100_000));
        assert_eq!(p.held(), (2, 300_000, true));
    }

    #[test]
    fn take_picks_the_smallest_that_fits_and_keeps_the_order() {
        let p = pool(1 << 20, Duration::from_secs(60));
        for cap in [300_000, 100_000, 200_000] {
            p.give(filled(cap));
        }
        assert_eq!(p.take(150_000, 400_000).unwrap().capacity(), 200_000);
        assert!(p.take(350_000, 400_000).is_none());
        assert!(p.take(80_000, 90_000).is_none());
        assert_eq!(p.take(0, usize::MAX).unwrap().capacity(), 100_000);
        assert_eq!(p.held(), (1, 300_000, true));
        assert!(p.take_largest(300_001).is_none());
        p.give(filled(100_000));
        assert_eq!(p.take_largest(0).unwrap().capacity(), 300_000);
        assert_eq!(p.held(), (1, 100_000, true));
    }

    #[test]
    fn buffers_are_freed_after_keep_for_and_the_trimmer_ends() {
        let keep = Duration::from_millis(50);
        let p = pool(1 << 20, keep);
        p.give(filled(100_000));
        std::thread::sleep(keep / 2);
        p.give(filled(120_000));
        // Poll rather than sleep a fixed time: the trimmer may be scheduled late.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (n, bytes, trimmer) = p.held();
            if n == 1 {
                assert_eq!(bytes, 120_000, "the older one goes first");
            }
            if n == 0 {
                assert_eq!(bytes, 0);
                if !trimmer {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "not freed: {:?}", p.held());
            std::thread::sleep(Duration::from_millis(1));
        }
        // A later give starts a new trimmer.
        p.give(filled(100_000));
        assert_eq!(p.held(), (1, 100_000, true));
    }
}
