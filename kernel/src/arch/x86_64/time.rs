//! Time from the TSC: the count, and its frequency once known.
//!
//! Not here: finding the frequency at boot (CPUID or a PIT gate), which
//! [`super::calibrate`] does together with measuring the local APIC timer's rate, and hands
//! over through [`set_frequency`].

use core::arch::x86_64::_rdtsc;
use core::sync::atomic::{AtomicU64, Ordering};

/// TSC ticks per second; 0 until [`set_frequency`] has run.
static TSC_HZ: AtomicU64 = AtomicU64::new(0);

fn rdtsc() -> u64 {
    // SAFETY: RDTSC exists on every x86_64 CPU and only reads the time-stamp counter.
    unsafe { _rdtsc() }
}

/// Ticks (of the TSC) per second.
pub fn frequency() -> u64 {
    TSC_HZ.load(Ordering::Relaxed)
}

/// TSC ticks since the machine started: the same count a domain reads with `rdtsc` (which
/// CR4.TSD, left clear, lets ring 3 run), so that the kernel's clock and the domains' agree,
/// as the `time` CSR makes them agree on RISC-V.
pub fn now_ticks() -> u64 {
    rdtsc()
}

/// Microseconds since the machine started; 0 until the TSC frequency is known.
pub fn now_us() -> u64 {
    let hz = TSC_HZ.load(Ordering::Relaxed);
    if hz == 0 {
        return 0;
    }
    let t = now_ticks();
    t / hz * 1_000_000 + t % hz * 1_000_000 / hz
}

/// Records the TSC's frequency, found at boot ([`super::calibrate::init`]).
pub(super) fn set_frequency(hz: u64) {
    TSC_HZ.store(hz, Ordering::Relaxed);
}
