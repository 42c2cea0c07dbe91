//! Result buffers that JavaScript has let go of, kept a moment for the next large result.
//!
//! A large result goes to JavaScript in a buffer of its own, which comes back only when V8
//! collects its Buffer. Freed, that memory often goes back to the system (glibc returns large
//! blocks), and the next result's buffer is faulted in and zeroed by the kernel page by page:
//! about a tenth of a reader's time on a 10k-row result. Kept here instead, the next result
//! is written into pages that are already resident (docs/experiments/038-result-buffer-pool.md).
//!
//! Bounds: `POOL_BYTES` in all, each buffer at most `KEEP_FOR` (a trimmer thread frees them as
//! they expire, and ends when none is left). Only while a front end has said that an
//! environment is running (`environment_started`); when its last one ends, everything is
//! freed and the trimmer is joined before that call returns, so no thread of this library
//! outlives the last environment that loaded it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The most capacity the process keeps (all buffers together).
pub const POOL_BYTES: usize = 64 * 1024 * 1024;
/// Smaller buffers are not kept: they are cheap to get, and small results are copied.
pub const MIN_POOLED_BYTES: usize = 64 * 1024;
/// How long a buffer stays unused before it is freed.
pub const KEEP_FOR: Duration = Duration::from_secs(1);
/// The trimmer thread's name (Linux keeps 15 bytes of a thread name).
pub const TRIMMER_NAME: &str = "quietsqlite-mem";

/// The process's pool: results go to JavaScript from every database, and their buffers come
/// back on the JavaScript thread of the environment that made them.
pub static RESULTS: Pool = Pool::new(POOL_BYTES, KEEP_FOR);

pub struct Pool {
    state: Mutex<State>,
    /// Wakes the trimmer early when the pool is emptied by `environment_ended`.
    wake: Condvar,
    max_bytes: usize,
    keep_for: Duration,
    /// Buffers handed out by `take` and by `take_largest` (tests and experiments).
    reused: [AtomicU64; 2],
}

struct State {
    /// In the order they came back (oldest first).
    bufs: Vec<(Vec<u8>, Instant)>,
    /// Their capacities, summed.
    held: usize,
    /// Front-end environments running (Node: the main thread and each Worker); buffers are
    /// kept only while there is one.
    environments: usize,
    /// Whether the trimmer of this generation runs. It runs while the pool holds any buffer.
    trimming: bool,
    /// Counts the times the last environment ended: a trimmer started before stops there,
    /// even when a new environment gives buffers before it sees the empty pool.
    generation: u64,
    /// The trimmer, running or finished; joined before another starts and when the last
    /// environment ends.
    trimmer: Option<JoinHandle<()>>,
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
        let state = State { bufs: Vec::new(), held: 0, environments: 0, trimming: false, generation: 0, trimmer: None };
        Pool { state: Mutex::new(state), wake: Condvar::new(), max_bytes, keep_for, reused: [AtomicU64::new(0), AtomicU64::new(0)] }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; were it poisoned, the state is still whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A front-end environment starts: buffers may be kept from now on.
    pub fn environment_started(&self) {
        self.lock().environments += 1;
    }

    /// A front-end environment ends. When it was the last, every kept buffer is freed and
    /// the trimmer is joined before this returns.
    pub fn environment_ended(&self) {
        if let Some((bufs, trimmer)) = self.end_environment() {
            drop(bufs);
            if let Some(t) = trimmer {
                // It sees the new generation and returns at once, whatever a new environment
                // has given meanwhile (that goes to a trimmer of its own). It never panics
                // (its loop has no panicking step); were it to, nothing is left to clean up.
                let _ = t.join();
            }
        }
    }

    /// The locked part of `environment_ended`: for the last environment, the buffers to free
    /// and the trimmer to join, both to be done without the lock.
    #[allow(clippy::type_complexity)]
    fn end_environment(&self) -> Option<(Vec<(Vec<u8>, Instant)>, Option<JoinHandle<()>>)> {
        let mut st = self.lock();
        st.environments = st.environments.saturating_sub(1);
        if st.environments > 0 {
            return None;
        }
        st.held = 0;
        st.generation += 1;
        st.trimming = false;
        self.wake.notify_all();
        Some((std::mem::take(&mut st.bufs), st.trimmer.take()))
    }

    /// Keeps `buf` if an environment is running, its capacity is at least
    /// `MIN_POOLED_BYTES` and the pool has room for it; frees it otherwise. Never panics (it
    /// runs in a Node finalizer).
    pub fn give(&'static self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        if !(MIN_POOLED_BYTES..=self.max_bytes).contains(&cap) {
            return;
        }
        buf.clear();
        let mut st = self.lock();
        if st.environments == 0 || st.held + cap > self.max_bytes {
            return;
        }
        if !st.trimming {
            // A handle left here is of a trimmer that ended itself: it has released the lock
            // for good and is returning, so joining it takes no longer than that.
            if let Some(done) = st.trimmer.take() {
                let _ = done.join();
            }
            // Started under the lock (it waits for it): about as costly as one large free,
            // once each time the pool fills again after being emptied.
            let generation = st.generation;
            let spawned = std::thread::Builder::new()
                .name(TRIMMER_NAME.into())
                .spawn(move || self.free_as_they_expire(generation));
            match spawned {
                Ok(handle) => st.trimmer = Some(handle),
                // Nobody would free it on time: free it now.
                Err(_) => return,
            }
            st.trimming = true;
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
        self.reused[0].fetch_add(1, Ordering::Relaxed);
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
        self.reused[1].fetch_add(1, Ordering::Relaxed);
        Some(st.remove(i))
    }

    /// The trimmer thread: frees each buffer `keep_for` after it came back; returns when none
    /// is left (the next `give` starts another), or when the last environment has ended.
    fn free_as_they_expire(&self, generation: u64) {
        let mut st = self.lock();
        while st.generation == generation {
            let Some(oldest) = st.bufs.first().map(|&(_, t)| t) else {
                st.trimming = false;
                return;
            };
            let now = Instant::now();
            let due = oldest + self.keep_for;
            if now < due {
                st = self.wake.wait_timeout(st, due - now).unwrap_or_else(|e| e.into_inner()).0;
                continue;
            }
            let n = st.bufs.partition_point(|(_, t)| *t + self.keep_for <= now);
            let expired: Vec<(Vec<u8>, Instant)> = st.bufs.drain(..n).collect();
            st.held -= expired.iter().map(|(b, _)| b.capacity()).sum::<usize>();
            // Freed without the lock: giving memory back to the system takes a while.
            drop(st);
            drop(expired);
            st = self.lock();
        }
    }

    /// (buffers kept, their capacity, whether the trimmer runs, buffers reused so far).
    pub fn stats(&self) -> (usize, usize, bool, u64) {
        let (exact, largest) = self.reused_by_kind();
        let st = self.lock();
        (st.bufs.len(), st.held, st.trimming, exact + largest)
    }

    /// Buffers reused so far: (by `take`, by `take_largest`).
    pub fn reused_by_kind(&self) -> (u64, u64) {
        (self.reused[0].load(Ordering::Relaxed), self.reused[1].load(Ordering::Relaxed))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A pool of its own for one test (the process's pool is shared by tests running in
    /// parallel), with an environment running.
    pub(crate) fn pool(max_bytes: usize, keep_for: Duration) -> &'static Pool {
        let p: &'static Pool = Box::leak(Box::new(Pool::new(max_bytes, keep_for)));
        p.environment_started();
        p
    }

    pub(crate) fn filled(cap: usize, byte: u8) -> Vec<u8> {
        let mut v = Vec::with_capacity(cap);
        v.resize(cap, byte);
        v
    }

    const LONG: Duration = Duration::from_secs(600);

    #[test]
    fn a_kept_buffer_is_the_same_memory_and_comes_back_empty() {
        let p = pool(1 << 20, LONG);
        let b = filled(100_000, 0xa5);
        let addr = b.as_ptr();
        p.give(b);
        assert_eq!(p.stats(), (1, 100_000, true, 0));
        let got = p.take(50_000, 200_000).expect("kept");
        assert_eq!(got.as_ptr(), addr);
        assert!(got.is_empty());
        assert_eq!(p.stats(), (0, 0, true, 1));
        assert!(p.take(0, usize::MAX).is_none());
    }

    #[test]
    fn small_buffers_and_buffers_past_the_bound_are_freed() {
        let p = pool(300_000, LONG);
        p.give(filled(MIN_POOLED_BYTES - 1, 1));
        assert_eq!(p.stats().0, 0);
        p.give(filled(300_001, 1));
        assert_eq!(p.stats().0, 0);
        p.give(filled(200_000, 1));
        p.give(filled(150_000, 1)); // 350,000 in all: over the bound
        p.give(filled(100_000, 1));
        assert_eq!(p.stats(), (2, 300_000, true, 0));
    }

    #[test]
    fn take_picks_the_smallest_that_fits_and_keeps_the_order() {
        let p = pool(1 << 20, LONG);
        for cap in [300_000, 100_000, 200_000] {
            p.give(filled(cap, 1));
        }
        assert_eq!(p.take(150_000, 400_000).unwrap().capacity(), 200_000);
        assert!(p.take(350_000, 400_000).is_none());
        assert!(p.take(80_000, 90_000).is_none());
        assert_eq!(p.take(0, usize::MAX).unwrap().capacity(), 100_000);
        assert_eq!(p.stats().0, 1);
        assert!(p.take_largest(300_001).is_none());
        p.give(filled(100_000, 1));
        assert_eq!(p.take_largest(0).unwrap().capacity(), 300_000);
        assert_eq!(p.stats(), (1, 100_000, true, 3));
    }

    /// Polls until the pool is empty and its trimmer has returned (it may be scheduled late).
    fn wait_until_empty(p: &Pool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while p.stats().0 > 0 || p.stats().2 {
            assert!(Instant::now() < deadline, "not freed: {:?}", p.stats());
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn buffers_are_freed_after_keep_for_oldest_first_and_the_trimmer_ends() {
        let keep = Duration::from_millis(100);
        let p = pool(1 << 20, keep);
        p.give(filled(100_000, 1));
        std::thread::sleep(keep / 2);
        p.give(filled(120_000, 1));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (n, bytes, _, _) = p.stats();
            if n == 1 {
                assert_eq!(bytes, 120_000, "the older one goes first");
            }
            if n == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "not freed: {:?}", p.stats());
            std::thread::sleep(Duration::from_millis(1));
        }
        wait_until_empty(p);
        // A later give starts a new trimmer, which frees that buffer too.
        p.give(filled(100_000, 1));
        wait_until_empty(p);
    }

    #[test]
    fn the_last_environment_ending_frees_everything_and_joins_the_trimmer() {
        let p = pool(1 << 20, LONG);
        p.environment_started(); // a second environment
        p.give(filled(100_000, 1));
        p.environment_ended();
        assert_eq!(p.stats(), (1, 100_000, true, 0), "one environment is left");
        p.environment_ended();
        assert_eq!((p.stats().0, p.stats().1), (0, 0));
        assert!(p.lock().trimmer.is_none(), "joined");
        wait_until_empty(p); // the trimmer marked itself done before it returned
        // With no environment, nothing is kept (and no trimmer starts).
        p.give(filled(100_000, 1));
        assert_eq!(p.stats(), (0, 0, false, 0));
    }

    #[test]
    fn a_trimmer_of_an_ended_generation_stops_even_when_a_new_environment_gives() {
        let p = pool(1 << 20, LONG);
        p.give(filled(100_000, 1));
        // The last environment ends; before its trimmer is joined, a new environment gives a
        // buffer. That buffer must go to a new trimmer: the old one must still stop at once
        // (if it took the buffer on, the join would wait out LONG).
        let (_, old) = p.end_environment().expect("the last environment");
        let old = old.expect("a trimmer");
        p.environment_started();
        p.give(filled(100_000, 1));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || done_tx.send(old.join().is_ok()).unwrap());
        assert_eq!(done_rx.recv_timeout(Duration::from_secs(20)), Ok(true), "the old trimmer stopped");
        assert_eq!(p.stats(), (1, 100_000, true, 0), "kept, by a trimmer of its own");
        p.environment_ended();
        assert_eq!((p.stats().0, p.stats().2), (0, false));
    }
}
