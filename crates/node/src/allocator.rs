//! The addon's memory allocator: blocks under `LARGE_BYTES` come from mimalloc, larger ones
//! from the system's allocator (docs/experiments/048-mimalloc.md).
//!
//! Every request allocates small blocks on one thread and frees them on another (its SQL
//! and parameters, made on the JS thread and dropped by a reader; its result, the other way
//! round), which glibc's allocator serves through locked arenas. mimalloc frees a block of
//! another thread without a lock. Large blocks (results of many rows, the result pool's
//! buffers) stay with the system's allocator, with which the memory targets were measured.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes go to the system allocator.
const LARGE_BYTES: usize = 64 * 1024;
// Every buffer the result pool keeps is then the system's, as when the pool was measured.
const _: () = assert!(LARGE_BYTES <= quietsqlite_core::buffer_pool::MIN_POOLED_BYTES);

pub struct Allocator;

/// The allocator that serves blocks of `size` bytes.
fn allocator_for(size: usize) -> &'static dyn GlobalAlloc {
    if size >= LARGE_BYTES {
        &System
    } else {
        &mimalloc::MiMalloc
    }
}

unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract (a non-zero-size layout) is passed on unchanged.
        unsafe { allocator_for(layout.size()).alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { allocator_for(layout.size()).alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated with `layout`, hence by the allocator its size picks.
        unsafe { allocator_for(layout.size()).dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (was_large, large) = (layout.size() >= LARGE_BYTES, new_size >= LARGE_BYTES);
        // SAFETY: `ptr` was allocated with `layout` by the allocator its size picks; the
        // caller guarantees that `new_size`, rounded up to the alignment, does not overflow.
        unsafe {
            match (was_large, large) {
                (true, true) | (false, false) => {
                    allocator_for(new_size).realloc(ptr, layout, new_size)
                }
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
