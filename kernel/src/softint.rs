//! Software interrupts on a schedule, for testing how the kernel handles interrupts it does
//! not expect (`softint=TIME,...` on the command line).
//!
//! This module keeps the schedule: up to four instants, in ticks of the arch's clock, and the
//! next one due. The arch raises the interrupt itself, in the way its interrupt controller
//! allows (`arch::interrupts::allow_software` once a schedule is set, then
//! `arch::interrupts::raise_software` when [`due`] says so on a timer interrupt taken from user
//! mode), so that the interrupt is taken in user mode.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::arch;

/// How many instants are kept.
const SLOTS: usize = 4;

/// Instants (in ticks) at which to raise a software interrupt, in order; `u64::MAX` ends the
/// list.
static AT: [AtomicU64; SLOTS] = [const { AtomicU64::new(u64::MAX) }; SLOTS];
/// The index in [`AT`] of the next one.
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// The instant of the next one (`u64::MAX`: none), so that the timer path tests one word.
static DUE: AtomicU64 = AtomicU64::new(u64::MAX);

/// Raises a software interrupt at each of `instants_ns` (nanoseconds since boot, ascending; at
/// most four are kept), from the first timer interrupt taken from user mode at or after each.
pub fn schedule(instants_ns: &[u64]) {
    let hz = arch::time::frequency() as u128;
    for (slot, ns) in AT.iter().zip(instants_ns) {
        let ticks = (*ns as u128 * hz / 1_000_000_000).min(u64::MAX as u128 - 1) as u64;
        slot.store(ticks, Ordering::Relaxed);
    }
    NEXT.store(0, Ordering::Relaxed);
    DUE.store(AT[0].load(Ordering::Relaxed), Ordering::Relaxed);
    if !instants_ns.is_empty() {
        arch::interrupts::allow_software();
    }
}

/// On a timer interrupt taken from user mode: whether a software interrupt is due; if so, the
/// next instant becomes the one awaited, and the caller raises it. One load and one compare
/// when none is scheduled.
#[inline]
pub fn due() -> bool {
    DUE.load(Ordering::Relaxed) != u64::MAX && due_slow()
}

#[cold]
fn due_slow() -> bool {
    if arch::time::now_ticks() < DUE.load(Ordering::Relaxed) {
        return false;
    }
    let next = NEXT.load(Ordering::Relaxed) + 1;
    NEXT.store(next, Ordering::Relaxed);
    let due = AT.get(next).map_or(u64::MAX, |t| t.load(Ordering::Relaxed));
    DUE.store(due, Ordering::Relaxed);
    true
}
