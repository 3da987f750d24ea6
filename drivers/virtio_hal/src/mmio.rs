//! The MMIO transport over the register window the kernel mapped for the granted device.

use core::ptr::NonNull;

use virtio_drivers::transport::mmio::{MmioTransport, VirtIOHeader};

/// The transport of the virtio device whose registers are the slot's first window, if one is
/// there (a `virt` MMIO slot with no device behind it reads as device 0).
pub fn transport(slot: &abi::DeviceSlot) -> Option<MmioTransport<'static>> {
    let w = slot.windows[0];
    let header = NonNull::new(w.base as *mut VirtIOHeader)?;
    // SAFETY: the kernel mapped the device's whole register window (`len` bytes, uncached) at
    // `base` for this domain alone, for its life; nothing else in the domain refers to it.
    unsafe { MmioTransport::new(header, w.len as usize) }.ok()
}
