//! The kernel heap: a buddy allocator over frames owned by the kernel.

use buddy_system_allocator::LockedHeap;

#[global_allocator]
static HEAP: LockedHeap<32> = LockedHeap::empty();

/// Hands `[start, start + bytes)` (virtual, direct-mapped kernel frames) to the heap.
pub fn init(start: usize, bytes: usize) {
    // SAFETY: `memory::init` passes a run of frames it just allocated to the kernel and that
    // nothing else references, mapped read-write through the direct map.
    unsafe { HEAP.lock().init(start, bytes) };
}

/// Bytes currently allocated from the heap.
pub fn used() -> usize {
    HEAP.lock().stats_alloc_actual()
}
