//! The kernel's clock for the domains: nanoseconds since boot, and their conversion to and
//! from the timer's ticks.

use atropos::Nanos;

use crate::Platform;

/// Nanoseconds per timer tick when that is a whole number (100 on QEMU's 10 MHz `virt` clock),
/// which makes every conversion below one multiplication or division of `u64`s; 0 otherwise.
#[inline]
fn whole_ns_per_tick<P: Platform>() -> u64 {
    let hz = P::frequency();
    if hz != 0 && 1_000_000_000 % hz == 0 { 1_000_000_000 / hz } else { 0 }
}

/// Nanoseconds since boot to timer ticks, rounded down (saturating: `u64::MAX` stays "never").
#[inline]
pub fn ticks_from_ns<P: Platform>(ns: u64) -> u64 {
    if ns == u64::MAX {
        return u64::MAX;
    }
    match whole_ns_per_tick::<P>() {
        0 => {
            ((ns as u128 * P::frequency() as u128) / 1_000_000_000).min(u64::MAX as u128 - 1) as u64
        }
        k => ns / k,
    }
}

/// Nanoseconds to timer ticks, rounded up: a timer armed for the result fires no earlier than
/// `ns`.
#[inline]
pub fn ticks_from_ns_up<P: Platform>(ns: u64) -> u64 {
    match whole_ns_per_tick::<P>() {
        0 => {
            (ns as u128 * P::frequency() as u128).div_ceil(1_000_000_000).min(u64::MAX as u128 - 1)
                as u64
        }
        k => ns.div_ceil(k),
    }
}

/// Timer ticks to nanoseconds since boot.
#[inline]
pub fn ns_from_ticks<P: Platform>(ticks: u64) -> Nanos {
    match whole_ns_per_tick::<P>() {
        0 => ((ticks as u128 * 1_000_000_000) / P::frequency() as u128) as u64,
        k => ticks.saturating_mul(k),
    }
}

/// The kernel's clock in nanoseconds since boot.
#[inline]
pub fn now_ns<P: Platform>() -> Nanos {
    ns_from_ticks::<P>(P::now_ticks())
}
