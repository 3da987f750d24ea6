//! The domain's heap: the global allocator of every app, so apps and stretch drivers may use
//! `alloc` (`Vec`, `Box`).
//!
//! A buddy allocator (`buddy_system_allocator`) over nailed stretches of the domain: the heap
//! starts empty, and when an allocation does not fit, it grows by a new read-write stretch of
//! at least [`GROWTH_BYTES`] (or twice the request rounded up to a power of two), charged to the domain's guarantee like any
//! stretch. When the contract has no room left the allocation fails, and `alloc` reports it
//! (the domain panics with the allocation error).
//!
//! Invariants: heap memory is always nailed (a heap access never faults to a stretch driver, so
//! drivers may allocate while resolving faults); stretches given to the heap are never
//! destroyed. The heap's lock is a spin lock: threads switch only cooperatively and the
//! activation handler never allocates, so it is never contended.

use core::alloc::Layout;

use buddy_system_allocator::{Heap, LockedHeapWithRescue};

/// The smallest stretch the heap grows by.
pub const GROWTH_BYTES: usize = 64 * 1024;

/// Orders of the buddy allocator: blocks up to 2^31 bytes.
const ORDER: usize = 32;

#[global_allocator]
static HEAP: LockedHeapWithRescue<ORDER> = LockedHeapWithRescue::new(grow);

/// Adds a stretch large enough for `layout` to the heap (does nothing if the contract is full:
/// the allocation then fails).
fn grow(heap: &mut Heap<ORDER>, layout: &Layout) {
    // Buddy blocks are aligned to their size and a stretch only to a page, so a block of the
    // size needed surely fits in a stretch twice as large.
    let block = layout.size().max(layout.align()).next_power_of_two();
    let bytes = (block * 2).max(GROWTH_BYTES);
    let rw = abi::Rights::READ.union(abi::Rights::WRITE);
    if let Ok(base) = crate::syscall::stretch_create(bytes, rw) {
        // SAFETY: the stretch was just created for the heap alone: `[base, base + bytes)` is
        // mapped read-write for the domain's lifetime (the heap never destroys it), and nothing
        // else refers to it.
        unsafe { heap.add_to_heap(base, base + bytes) };
    }
}

/// Bytes the heap has handed out and holds in all (for reports).
pub fn usage() -> (usize, usize) {
    let heap = HEAP.lock();
    (heap.stats_alloc_actual(), heap.stats_total_bytes())
}
