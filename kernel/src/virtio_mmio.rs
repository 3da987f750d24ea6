//! The one thing the kernel does to a virtio-mmio transport itself: reset it when the driver
//! domain it was granted to dies. A PCI function is stopped at the bus (bus mastering off,
//! [`crate::pci::quiesce`]); a virtio-mmio device has no bus to stop it, so without a reset it
//! keeps its queues and goes on writing received frames (or completing requests) into memory
//! the kernel has taken back from the dead driver. Writing 0 to the transport's `Status`
//! register resets the device (virtio 1.2 §4.2.2.1; the same offset in the legacy layout): it
//! forgets its queues, and DMA stops.

use crate::arch;

/// The `Status` register's offset in a virtio-mmio transport's window.
const STATUS: u64 = 0x70;

/// Resets the virtio-mmio transport whose register window starts at physical address `base`.
pub fn reset(base: u64) {
    let at = arch::phys_to_virt(base + STATUS) as *mut u32;
    // SAFETY: `base` is the window of a `virtio,mmio` node of the device tree, which the
    // direct map covers (device windows lie in the first 4 GiB); a 32-bit aligned volatile
    // write to its `Status` register is the reset the transport defines, and touches no memory.
    unsafe { at.write_volatile(0) };
}
