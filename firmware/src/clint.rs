//! The CLINT's machine timer on QEMU `virt` (fixed addresses: `mtimecmp` at `0x0200_4000 +
//! 8 * hart`, `mtime` at `0x0200_bff8`).

/// `mtimecmp` of hart 0; hart `n`'s is `n` words further.
const MTIMECMP_BASE: usize = 0x0200_4000;
/// `mtime`.
const MTIME: usize = 0x0200_bff8;
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

/// `mtime`, the machine timer's clock.
pub fn now() -> u64 {
    // SAFETY: `mtime` is the CLINT's 64-bit clock register on QEMU `virt`; reading it has no
    // side effect.
    unsafe { (MTIME as *const u64).read_volatile() }
}

/// Stops `hart`'s machine timer: masks its interrupt and moves its deadline to the next tick,
/// never to the end of time. QEMU keeps one host timer per `mtimecmp` and only moves it when a
/// future deadline is written; a deadline of `u64::MAX` becomes a host timer at the end of
/// time, and under `-icount` with nothing else armed an idle hart's clock jumps there. The next
/// tick's deadline replaces any earlier one, fires once (masked) and leaves no timer behind.
pub fn disarm(hart: usize) {
    crate::csr::set_mtie(false);
    set_deadline(hart, now() + 1);
}
