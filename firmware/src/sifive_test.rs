//! QEMU's `sifive_test` device at `0x10_0000` (the "finisher"): one register whose writes end
//! or reset the emulation.

/// The finisher register.
const FINISHER: *mut u32 = 0x10_0000 as *mut u32;
/// Exit with status 0.
const PASS: u32 = 0x5555;
/// Exit with the status in bits 16..32.
const FAIL: u32 = 0x3333;
/// Reset the machine.
const RESET: u32 = 0x7777;

/// Writes `value` to the finisher register, which does not return.
fn finish(value: u32) -> ! {
    // SAFETY: `FINISHER` is the `sifive_test` register on QEMU `virt`, an aligned 32-bit MMIO
    // register that M-mode may write. QEMU acts on the write at once (exit or reset), so nothing
    // runs after it.
    unsafe { FINISHER.write_volatile(value) };
    // Not reached under QEMU; park if the device ever ignores the write.
    loop {
        core::hint::spin_loop();
    }
}

/// Leaves QEMU with exit status `code` (0 is success).
pub fn exit(code: u8) -> ! {
    match code {
        0 => finish(PASS),
        code => finish(u32::from(code) << 16 | FAIL),
    }
}

/// Resets the whole machine (QEMU runs the firmware again from the reset vector).
pub fn reset() -> ! {
    finish(RESET)
}
