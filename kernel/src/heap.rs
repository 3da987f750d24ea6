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

/// Bytes of the heap not allocated.
#[cfg_attr(
    target_arch = "x86_64",
    expect(dead_code, reason = "used by domains, which x86_64 gains with its port")
)]
pub fn free() -> usize {
    let heap = HEAP.lock();
    heap.stats_total_bytes() - heap.stats_alloc_actual()
}

/// Bytes currently allocated from the heap.
pub fn used() -> usize {
    HEAP.lock().stats_alloc_actual()
}
