//! The clock without a system call: the counter the kernel lets user mode read (the
//! architecture's, `arch`), scaled by the timebase the kernel writes into the control
//! block (`Dcb::timebase_hz`). It is the same clock the `time` call reads, at its full
//! resolution, for a few instructions instead of a trap.

/// The clock's raw count (ticks since boot).
pub fn ticks() -> u64 {
    crate::arch::ticks()
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
