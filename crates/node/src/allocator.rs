//! The addon's memory allocator: blocks under `LARGE_BYTES` come from mimalloc, larger ones
//! from the system's allocator (docs/experiments/048-mimalloc.md).
//!
//! Every request allocates small blocks on one thread and frees them on another (its SQL
//! and parameters, made on the JS thread and dropped by a reader; its result, the other way
//! round), which glibc's allocator serves through locked arenas. mimalloc frees a block of
//! another thread without a lock. Large blocks (results of many rows) stay with the system:
//! mimalloc kept more of them resident, which raised peak RSS over repeated large reads.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes go to the system allocator.
const LARGE_BYTES: usize = 64 * 1024;

pub struct Allocator;

fn is_large(size: usize) -> bool {
    size >= LARGE_BYTES
}

// SAFETY: every block is freed (and reallocated) by the allocator that made it: Rust passes
// `dealloc` and `realloc` the layout the block was allocated with, and the size in it picks
// the same allocator as at allocation. A reallocation that crosses the line moves the block
// to the other allocator by hand (allocate, copy, free).
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract (a non-zero-size layout) is passed on unchanged.
        unsafe {
            if is_large(layout.size()) {
                System.alloc(layout)
            } else {
                mimalloc::MiMalloc.alloc(layout)
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if is_large(layout.size()) {
                System.alloc_zeroed(layout)
            } else {
                mimalloc::MiMalloc.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated with `layout`, hence by the allocator its size picks.
        unsafe {
            if is_large(layout.size()) {
                System.dealloc(ptr, layout)
            } else {
                mimalloc::MiMalloc.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (was_large, large) = (is_large(layout.size()), is_large(new_size));
        // SAFETY: `ptr` was allocated with `layout` by the allocator its size picks; the
        // caller guarantees that `new_size`, rounded up to the alignment, does not overflow.
        unsafe {
            match (was_large, large) {
                (true, true) => System.realloc(ptr, layout, new_size),
                (false, false) => mimalloc::MiMalloc.realloc(ptr, layout, new_size),
                _ => {
                    let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                    let moved = self.alloc(new_layout);
                    if !moved.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    moved
                }
            }
        }
    }
}
