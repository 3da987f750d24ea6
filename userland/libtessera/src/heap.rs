//! The domain's heap: the global allocator of every app, so apps and stretch drivers may use
//! `alloc` (`Vec`, `Box`).
//!
//! A buddy allocator (`buddy_system_allocator`) over nailed stretches of the domain. The heap
//! starts empty; when an allocation does not fit, it grows by one new read-write stretch of
//! `max(GROWTH_BYTES, 2 * b)` bytes, `b` being the allocation's size (or alignment, if larger)
//! rounded up to a power of two: always a power of two, at least 64 KiB. The stretch is charged
//! to the domain's guarantee like any nailed stretch (its frames and its page tables), and
//! `stretch_create` may wait while the kernel revokes another domain's optimistic frames. When
//! the kernel refuses the stretch (the guarantee is full, for instance, or it would exceed the
//! 64 MiB `stretch_create` allows, as for any allocation over 32 MiB), the allocation fails and
//! `alloc` reports it (the domain panics with the allocation error).
//!
//! Stretch drivers: heap memory never faults and the allocator never touches a managed stretch,
//! so a page fault never interrupts the allocator, and a driver's `fault` may allocate. Growth
//! there, though, takes guaranteed frames the driver may need for pages, and a full guarantee
//! then ends the domain rather than failing the fault: a driver that must keep working when its
//! contract is used up reserves its memory before the first fault. A driver's `revoke` must
//! neither allocate nor free: it runs on whichever thread the revocation notice interrupted,
//! which may hold this heap's lock (`docs/stretch-driver-tutorial.md`, "What a driver may do in
//! a domain").
//!
//! Invariants: heap memory is always nailed; stretches given to the heap are never destroyed.
//! The heap's lock is a spin lock. Threads never contend for it (they switch only
//! cooperatively, never inside the allocator); one thread would take it twice only if code the
//! runtime runs on an interrupted thread allocated while the thread held it, which the
//! activation handler never does and a revocation waits for.

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

/// Whether the heap's lock is held: by the interrupted flow of control, since threads switch
/// only cooperatively (the activation handler reads it to put a revocation off).
pub(crate) fn locked() -> bool {
    HEAP.is_locked()
}

/// Bytes the heap has handed out and holds in all (for reports).
pub fn usage() -> (usize, usize) {
    let heap = HEAP.lock();
    (heap.stats_alloc_actual(), heap.stats_total_bytes())
}
