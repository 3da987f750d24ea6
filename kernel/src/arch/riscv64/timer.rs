//! One-shot timer interrupts through the SBI timer (no periodic tick).
//!
//! [`arm`] programs one interrupt at an absolute time; when it fires the timer is disarmed and
//! the installed handler runs (in the trap handler, interrupts off), which may arm the next one.

use core::sync::atomic::{AtomicUsize, Ordering};

use super::sbi;

/// Handler called on each timer interrupt with the current time in ticks.
pub type Handler = fn(now: u64);

static HANDLER: AtomicUsize = AtomicUsize::new(0);

/// Installs `handler` (or none) for timer interrupts.
pub fn set_handler(handler: Option<Handler>) {
    HANDLER.store(handler.map_or(0, |h| h as *const () as usize), Ordering::Release);
}

/// Requests one interrupt at absolute time `deadline` (ticks).
pub fn arm(deadline: u64) {
    sbi::set_timer(deadline);
}

/// Cancels a pending request.
pub fn disarm() {
    sbi::set_timer(u64::MAX);
}

/// Enables supervisor timer interrupts (`sie.STIE`).
pub fn init() {
    disarm();
    // SAFETY: setting STIE only lets timer interrupts through once `sstatus.SIE` is on, and the
    // trap vector is installed before this is called.
    unsafe { core::arch::asm!("csrs sie, {0}", in(reg) 1usize << 5) };
}

pub(super) fn on_interrupt() {
    disarm();
    let h = HANDLER.load(Ordering::Acquire);
    if h != 0 {
        // SAFETY: `HANDLER` only ever holds 0 or a value stored from a `Handler` in
        // `set_handler`, so a non-zero value is a valid function pointer of that type.
        let handler: Handler = unsafe { core::mem::transmute::<usize, Handler>(h) };
        handler(super::time::now_ticks());
    }
}
