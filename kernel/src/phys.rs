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

/// Copies `data` (at most one frame) to the start of `frame`.
pub fn write_frame(frame: Frame, data: &[u8]) {
    assert!(data.len() <= FRAME_SIZE as usize, "write_frame: more than a frame of data");
    let page = arch::phys_to_virt(frame.addr()) as *mut u8;
    // SAFETY: as for `zero_frame`: the caller owns the RAM frame, the direct map covers it, and
    // `data` fits in it.
    unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), page, data.len()) };
}

/// The `len` bytes of physical memory at `pa` (the boot image), read-only, for the kernel's
/// lifetime. The range is reserved in the frame allocator, so it never changes owner.
pub fn bytes(pa: u64, len: usize) -> &'static [u8] {
    // SAFETY: callers pass a range the boot code found (the initrd) and reserved; the direct
    // map covers it and nothing writes it.
    unsafe { core::slice::from_raw_parts(arch::phys_to_virt(pa) as *const u8, len) }
}

/// The control block in `frame`, as the kernel sees it: only its atomic fields may be changed
/// through this reference (the domain may write the page at any time too; the kernel never
/// trusts what it reads there).
pub fn dcb(frame: Frame) -> &'static abi::Dcb {
    const { assert!(core::mem::size_of::<abi::Dcb>() <= FRAME_SIZE as usize) };
    // SAFETY: a control-block frame is a whole, page-aligned RAM frame owned by a live domain
    // (callers drop it when the domain dies), reached through the direct map; `Dcb` fits in it
    // and is made of atomics and plain integers, valid for any bit pattern.
    unsafe { &*(arch::phys_to_virt(frame.addr()) as *const abi::Dcb) }
}

/// Writes `value` as the initial contents of the control block in `frame`.
pub fn write_dcb(frame: Frame, value: &abi::Dcb) {
    let bytes = value as *const abi::Dcb as *const u8;
    // SAFETY: `value` is a live `Dcb` of `size_of::<Dcb>()` bytes, all initialised (integers and
    // atomics, no padding: every field is 8-byte sized or a byte array of 32).
    let bytes = unsafe { core::slice::from_raw_parts(bytes, core::mem::size_of::<abi::Dcb>()) };
    write_frame(frame, bytes);
}

/// Writes `ctx` into the `saved` field of the control block in `frame`.
pub fn write_saved_context(frame: Frame, ctx: &abi::SavedContext) {
    let at = core::mem::offset_of!(abi::Dcb, saved);
    let dst = (arch::phys_to_virt(frame.addr()) + at) as *mut abi::SavedContext;
    // SAFETY: the control block frame is a whole RAM frame owned by a live domain; `saved` lies
    // inside it (the `Dcb` fits in a frame) at its field offset, which is 8-byte aligned.
    unsafe { dst.write_volatile(*ctx) };
}

/// Writes `slot` into entry `index` of the `channels` of the control block in `frame` (before
/// its domain runs); an index past the table is ignored.
pub fn write_channel_slot(frame: Frame, index: usize, slot: &abi::ChannelSlot) {
    if index >= abi::MAX_CHANNELS {
        return;
    }
    let at = core::mem::offset_of!(abi::Dcb, channels)
        + index * core::mem::size_of::<abi::ChannelSlot>();
    let dst = (arch::phys_to_virt(frame.addr()) + at) as *mut abi::ChannelSlot;
    // SAFETY: the control block frame is a whole RAM frame owned by a live domain; entry
    // `index` (checked above) of `channels` lies inside it (the `Dcb` fits in a frame), at an
    // 8-byte aligned offset (`ChannelSlot` is made of `u64`s and a byte array).
    unsafe { dst.write_volatile(*slot) };
}

/// Writes `slot` as entry `index` of the `devices` of the control block in `frame`.
pub fn write_device_slot(frame: Frame, index: usize, slot: &abi::DeviceSlot) {
    if index >= abi::MAX_DEVICES {
        return;
    }
    let at =
        core::mem::offset_of!(abi::Dcb, devices) + index * core::mem::size_of::<abi::DeviceSlot>();
    let dst = (arch::phys_to_virt(frame.addr()) + at) as *mut abi::DeviceSlot;
    // SAFETY: the control block frame is a whole RAM frame owned by a live domain; entry
    // `index` (checked above) of `devices` lies inside it (the `Dcb` fits in a frame), at an
    // 8-byte aligned offset (`DeviceSlot` is made of `u64`s).
    unsafe { dst.write_volatile(*slot) };
}
