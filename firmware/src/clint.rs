//! The CLINT's machine timer on QEMU `virt` (fixed addresses: `mtimecmp` at `0x0200_4000 +
//! 8 * hart`, `mtime` at `0x0200_bff8`).

/// `mtimecmp` of hart 0; hart `n`'s is `n` words further.
const MTIMECMP_BASE: usize = 0x0200_4000;
/// The harts QEMU `virt` can have (its CLINT has this many `mtimecmp` registers).
const MAX_HARTS: usize = 512;

/// Arms `hart`'s machine timer: the interrupt is pending once `mtime >= deadline`.
pub fn set_deadline(hart: usize, deadline: u64) {
    assert!(hart < MAX_HARTS, "hart {hart} has no mtimecmp");
    let mtimecmp = (MTIMECMP_BASE + 8 * hart) as *mut u64;
    // SAFETY: `mtimecmp` is this hart's CLINT register on QEMU `virt` (in range by the assert),
    // an aligned 64-bit MMIO register that M-mode may write; writing it has no effect beyond
    // the timer interrupt condition.
    unsafe { mtimecmp.write_volatile(deadline) }
}

/// Stops `hart`'s machine timer (the deadline moves to the end of time), which also withdraws a
/// pending machine timer interrupt.
pub fn disarm(hart: usize) {
    set_deadline(hart, u64::MAX);
}
