//! The clock without a system call: RISC-V's `time` CSR, which the kernel lets user mode read,
//! scaled by the timebase the kernel writes into the control block. It is the same clock the
//! `time` call reads, at its full resolution (100 ns on QEMU's `virt` machine), for a few
//! instructions instead of a trap.
//!
//! `unsafe` here: the `rdtime` instruction.

/// The clock's raw count (ticks since boot).
pub fn ticks() -> u64 {
    let t: u64;
    // SAFETY: `rdtime` reads the `time` CSR, which the kernel enables for user mode
    // (`scounteren.TM`); it has no side effects and touches no memory.
    unsafe { core::arch::asm!("rdtime {0}", out(reg) t, options(nomem, nostack)) };
    t
}

/// Clock ticks per second.
pub fn hz() -> u64 {
    crate::dcb().timebase_hz
}

/// Ticks to nanoseconds.
pub fn ns_from_ticks(ticks: u64) -> u64 {
    ((u128::from(ticks) * 1_000_000_000) / u128::from(hz().max(1))) as u64
}

/// Nanoseconds since boot.
pub fn now_ns() -> u64 {
    ns_from_ticks(ticks())
}
