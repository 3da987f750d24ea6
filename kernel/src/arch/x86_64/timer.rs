//! One-shot timer interrupts (no periodic tick) from the local APIC timer: in TSC-deadline
//! mode when CPUID reports it (the deadline is written to IA32_TSC_DEADLINE as a TSC value),
//! else in one-shot mode, counting down the deadline's distance converted to APIC ticks by the
//! rate measured at boot. QEMU's TCG has no TSC-deadline mode, so there the one-shot mode is
//! what runs.
//!
//! [`arm`] programs one interrupt at an absolute time (TSC ticks since boot, as
//! `time::now_ticks`); when it fires the timer is disarmed and the installed handler runs (in
//! the trap handler, interrupts off), which may arm the next one. A one-shot count that ends
//! before the deadline (the rate is measured, so it may be a little fast; a count beyond the
//! 32-bit counter is cut) starts again for what is left, so the handler never runs early.

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use ::x86_64::registers::model_specific::Msr;

use super::{apic, time};

/// IA32_TSC_DEADLINE.
const TSC_DEADLINE_MSR: u32 = 0x6e0;

/// Whether the APIC timer runs in TSC-deadline mode (chosen by [`init`]).
static TSC_DEADLINE: AtomicBool = AtomicBool::new(false);

/// The armed deadline; `u64::MAX` when disarmed.
static DEADLINE: AtomicU64 = AtomicU64::new(u64::MAX);

/// Handler called on each timer interrupt with the current time in ticks.
pub type Handler = fn(now: u64);

static HANDLER: AtomicUsize = AtomicUsize::new(0);

/// Installs `handler` (or none) for timer interrupts.
pub fn set_handler(handler: Option<Handler>) {
    HANDLER.store(handler.map_or(0, |h| h as *const () as usize), Ordering::Release);
}

/// Requests one interrupt at absolute time `deadline` (ticks), replacing any earlier request.
pub fn arm(deadline: u64) {
    DEADLINE.store(deadline, Ordering::Relaxed);
    program(deadline);
}

/// Cancels a pending request.
pub fn disarm() {
    DEADLINE.store(u64::MAX, Ordering::Relaxed);
    if TSC_DEADLINE.load(Ordering::Relaxed) {
        // SAFETY: writing 0 to IA32_TSC_DEADLINE (which CPUID reported) disarms the timer.
        unsafe { Msr::new(TSC_DEADLINE_MSR).write(0) };
    } else {
        apic::start_one_shot(0);
    }
}

/// Cancels a pending request and leaves no deadline behind: the same as [`disarm`], since the
/// stopped local APIC timer leaves QEMU no host timer (see the RISC-V `quiesce`).
pub fn quiesce() {
    disarm();
}

/// Programs the hardware for `deadline`.
fn program(deadline: u64) {
    if TSC_DEADLINE.load(Ordering::Relaxed) {
        let tsc = deadline.max(1);
        // SAFETY: CPUID reported TSC-deadline mode and `init` selected it in the APIC's timer
        // entry; writing the MSR only sets when the timer interrupt is raised (a past value
        // raises it at once).
        unsafe { Msr::new(TSC_DEADLINE_MSR).write(tsc) };
    } else {
        let ticks = apic::ticks_for(deadline.saturating_sub(time::now_ticks()));
        apic::start_one_shot(ticks.clamp(1, u64::from(u32::MAX)) as u32);
    }
}

/// Chooses the timer's mode (TSC-deadline where CPUID reports it) and routes it to its vector,
/// disarmed.
pub(super) fn init() {
    let deadline_mode = super::cpu::Features::read().tsc_deadline;
    TSC_DEADLINE.store(deadline_mode, Ordering::Relaxed);
    apic::set_timer_mode(deadline_mode);
    disarm();
}

/// Whether the timer runs in TSC-deadline mode.
pub fn tsc_deadline_mode() -> bool {
    TSC_DEADLINE.load(Ordering::Relaxed)
}

/// For a timer interrupt taken in ring 3 while a domain runs: whether the armed deadline has
/// come (the timer is then disarmed, and the trap goes to the domain's handler, which arms the
/// next); if it has not, the timer is programmed again for it.
pub(super) fn due_from_user() -> bool {
    let deadline = DEADLINE.load(Ordering::Relaxed);
    if deadline == u64::MAX {
        return false;
    }
    if time::now_ticks() < deadline {
        program(deadline);
        return false;
    }
    DEADLINE.store(u64::MAX, Ordering::Relaxed);
    true
}

pub(super) fn on_interrupt() {
    let deadline = DEADLINE.load(Ordering::Relaxed);
    if deadline == u64::MAX {
        // Raised just before a disarm or a new arm took effect.
        return;
    }
    let now = time::now_ticks();
    if now < deadline {
        program(deadline);
        return;
    }
    DEADLINE.store(u64::MAX, Ordering::Relaxed);
    let h = HANDLER.load(Ordering::Acquire);
    if h != 0 {
        // SAFETY: `HANDLER` only ever holds 0 or a value stored from a `Handler` in
        // `set_handler`, so a non-zero value is a valid function pointer of that type.
        let handler: Handler = unsafe { core::mem::transmute::<usize, Handler>(h) };
        handler(now);
    }
}
