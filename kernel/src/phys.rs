//! Access to physical memory through the arch direct map: the only place outside `arch` where
//! the portable kernel turns a physical address into a pointer.

use frame_allocator::{FRAME_SIZE, Frame};

use crate::arch;

/// Fills `frame` with zeroes. The caller owns the frame (it was just allocated, or is being
/// handed over), so nothing else relies on its contents.
pub fn zero_frame(frame: Frame) {
    let page = arch::phys_to_virt(frame.addr()) as *mut u8;
    // SAFETY: the direct map covers all RAM and `frame` is a RAM frame that the caller owns, so
    // the 4 KiB behind `page` are valid, writable and relied on by nobody else.
    unsafe { core::ptr::write_bytes(page, 0, FRAME_SIZE as usize) };
}

/// The `u32` array of `len` entries at physical address `pa`, for the kernel's lifetime.
///
/// # Safety
/// `[pa, pa + 4 * len)` must be RAM that nothing else uses now or will ever be handed (the
/// caller reserves it in the frame allocator), 4-byte aligned.
pub unsafe fn claim_u32s(pa: u64, len: usize) -> &'static mut [u32] {
    // SAFETY: guaranteed by the caller: the range is exclusively ours, mapped by the direct map
    // and aligned.
    unsafe { core::slice::from_raw_parts_mut(arch::phys_to_virt(pa) as *mut u32, len) }
}
