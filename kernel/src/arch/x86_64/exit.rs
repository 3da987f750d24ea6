//! Leaving QEMU through the `isa-debug-exit` device (`-device isa-debug-exit,iobase=0xf4,iosize=0x04`).
//!
//! Only the device: what the kernel reports as it shuts down (FP loads, unexpected interrupts)
//! is logged by the caller, `arch::exit`, before it comes here.

use ::x86_64::instructions::{hlt, port::Port};

/// The device's I/O port.
pub(super) const PORT: u16 = 0xf4;

/// Ends the run: writes `0x10 + code` to the device, so QEMU exits with status
/// `((0x10 + code) << 1) | 1` (33 for success). Halts forever if the device is absent.
/// Called with interrupts off.
pub(super) fn leave(code: crate::ExitCode) -> ! {
    // SAFETY: port 0xf4 belongs to isa-debug-exit (or to nothing, and the write is ignored);
    // the write ends the virtual machine and touches no memory.
    unsafe { Port::<u32>::new(PORT).write(0x10 + code as u32) };
    loop {
        ::x86_64::instructions::interrupts::disable();
        hlt();
    }
}
