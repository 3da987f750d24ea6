//! One-shot timer interrupts, counted by the interrupt handler.
//!
//! The handler re-arms the timer at absolute deadlines `start + k * period`, so the count over
//! one second does not drift; it counts the interrupts of deadlines up to the end of the second
//! and re-arms past it too, so that an idle CPU is woken after the second's last interrupt
//! (whose deadline may fall short of the end when the clock's frequency is not a multiple of
//! the rate). Under `-icount shift=0,sleep=off` time is virtual and the count is exact to
//! within one, whether the CPU spins or sleeps in `wfi` or `hlt`.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::arch::{self, time, timer};
use crate::check;
use crate::ktest::Outcome;

/// Interrupts per second the tests configure.
pub const RATE_HZ: u64 = 1000;

static COUNT: AtomicU64 = AtomicU64::new(0);
static NEXT: AtomicU64 = AtomicU64::new(0);
static PERIOD: AtomicU64 = AtomicU64::new(0);
static END: AtomicU64 = AtomicU64::new(0);

fn on_tick(_now: u64) {
    let due = NEXT.load(Ordering::Relaxed);
    if due <= END.load(Ordering::Relaxed) {
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
    let next = due + PERIOD.load(Ordering::Relaxed);
    NEXT.store(next, Ordering::Relaxed);
    timer::arm(next);
}

fn count_for_one_second(idle: bool) -> u64 {
    let hz = time::frequency();
    let period = hz / RATE_HZ;
    COUNT.store(0, Ordering::Relaxed);
    PERIOD.store(period, Ordering::Relaxed);
    timer::set_handler(Some(on_tick));
    let start = time::now_ticks();
    let end = start + hz;
    END.store(end, Ordering::Relaxed);
    NEXT.store(start + period, Ordering::Relaxed);
    timer::arm(start + period);
    let mut spins = 0u64;
    while time::now_ticks() < end {
        if idle {
            arch::wait_for_interrupt();
        } else {
            spins = core::hint::black_box(spins + 1);
        }
    }
    timer::disarm();
    timer::set_handler(None);
    COUNT.load(Ordering::Relaxed)
}

fn check_rate(idle: bool) -> Outcome {
    let n = count_for_one_second(idle);
    defmt::info!(
        "timer: {=u64} interrupts in one second at {=u64} Hz ({=str})",
        n,
        RATE_HZ,
        if idle { "idle" } else { "busy" }
    );
    check!(n.abs_diff(RATE_HZ) <= 1, "expected {=u64} +- 1 interrupts, counted {=u64}", RATE_HZ, n);
    Ok(())
}

/// The configured rate is met while the CPU spins.
pub fn rate_busy() -> Outcome {
    check_rate(false)
}

/// The configured rate is met while the CPU sleeps between interrupts.
pub fn rate_idle() -> Outcome {
    check_rate(true)
}
