//! One-shot timer interrupts (no periodic tick): through the `stimecmp` register where the CPU
//! has the Sstc extension and the firmware opened it to S-mode, else through the SBI timer
//! call. Sstc makes arming the timer one CSR write instead of a call into the firmware, which
//! matters because the scheduler arms it on every switch.
//!
//! [`arm`] programs one interrupt at an absolute time and unmasks it (`sie.STIE`); when it
//! fires the timer is disarmed and the installed handler runs (in the trap handler, interrupts
//! off), which may arm the next one. [`disarm`] masks the interrupt and leaves the deadline
//! alone: cheap, and enough wherever another deadline is armed soon. [`quiesce`] also replaces
//! the deadline by the next tick's, which fires once, masked, and leaves QEMU no host timer:
//! under `-icount` a hart idle with no timer keeps its clock still, while with a stale deadline
//! armed it would jump to it, and a deadline of `u64::MAX` sends it to the end of time.

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::{probe, sbi};

/// Whether `stimecmp` works (found by [`init`]).
static SSTC: AtomicBool = AtomicBool::new(false);

/// Handler called on each timer interrupt with the current time in ticks.
pub type Handler = fn(now: u64);

static HANDLER: AtomicUsize = AtomicUsize::new(0);

/// Installs `handler` (or none) for timer interrupts.
pub fn set_handler(handler: Option<Handler>) {
    HANDLER.store(handler.map_or(0, |h| h as *const () as usize), Ordering::Release);
}

/// Requests one interrupt at absolute time `deadline` (ticks).
#[inline]
pub fn arm(deadline: u64) {
    if SSTC.load(Ordering::Relaxed) {
        // SAFETY: `init` found that `stimecmp` can be written; writing it only sets when the
        // supervisor timer interrupt is raised. The `riscv` crate has no `stimecmp` (Sstc)
        // register, hence the CSR by number.
        unsafe { core::arch::asm!("csrw 0x14d, {0}", in(reg) deadline, options(nostack)) };
    } else {
        sbi::set_timer(deadline);
    }
    // SAFETY: setting STIE only lets the timer interrupt through once `sstatus.SIE` is on; the
    // trap vector is installed before any timer is armed.
    unsafe { riscv::register::sie::set_stimer() };
}

/// Cancels a pending request: the interrupt is masked until the next [`arm`].
#[inline]
pub fn disarm() {
    // SAFETY: clearing STIE only masks the supervisor timer interrupt.
    unsafe { riscv::register::sie::clear_stimer() };
}

/// Cancels a pending request and leaves no deadline behind (see the [module](self)).
pub fn quiesce() {
    disarm();
    let next = super::time::now_ticks() + 1;
    if SSTC.load(Ordering::Relaxed) {
        // SAFETY: as in `arm`; the interrupt it raises a tick later stays masked.
        unsafe { core::arch::asm!("csrw 0x14d, {0}", in(reg) next, options(nostack)) };
    } else {
        sbi::set_timer(u64::MAX);
    }
}

/// Chooses the timer (`stimecmp` if it can be written), with nothing armed.
pub fn init() {
    // The firmware's timer stays disarmed whichever is used.
    sbi::set_timer(u64::MAX);
    let sstc = probe::write_stimecmp(super::time::now_ticks() + 1);
    SSTC.store(sstc, Ordering::Relaxed);
    defmt::info!("timer: {=str}", if sstc { "stimecmp (Sstc)" } else { "SBI set_timer" });
    disarm();
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
