//! Leaving QEMU through the `isa-debug-exit` device (`-device isa-debug-exit,iobase=0xf4,iosize=0x04`).

use ::x86_64::instructions::{hlt, interrupts, port::Port};

/// The device's I/O port.
pub(super) const PORT: u16 = 0xf4;

/// Ends the run: writes `0x10 + code` to the device, so QEMU exits with status
/// `((0x10 + code) << 1) | 1` (33 for success). Halts forever if the device is absent.
pub fn exit(code: crate::ExitCode) -> ! {
    interrupts::disable();
    let loads = super::fp::loads();
    if loads > 0 {
        defmt::info!("fp: {=u64} floating-point state loads on first use", loads);
    }
    super::interrupts::report_unexpected();
    // SAFETY: port 0xf4 belongs to isa-debug-exit (or to nothing, and the write is ignored);
    // the write ends the virtual machine and touches no memory.
    unsafe { Port::<u32>::new(PORT).write(0x10 + code as u32) };
    loop {
        interrupts::disable();
        hlt();
    }
}
