//! Interrupt control (`sstatus.SIE`), and the interrupts the kernel does not expect.
//!
//! The kernel expects one interrupt, the supervisor timer's ([`super::timer`]). Any other is
//! still the kernel's business, never a fault of the code it interrupted: [`unexpected`]
//! counts it by cause, logs the first of each cause once (a WARN), silences its source so that
//! it cannot storm, and the interrupted code resumes (a domain in user mode included: it is
//! neither terminated nor charged a switch). A supervisor software interrupt is cleared in
//! `sip`; any other cause, whose pending bit S-mode cannot clear, is masked in `sie`. The counts
//! are logged when the kernel shuts down.
//!
//! For tests, `softint=TIME,...` on the command line ([`crate::softint`], which keeps the
//! schedule) raises supervisor software interrupts: `sie.SSIE` is enabled ([`allow_software`]),
//! and the first timer interrupt taken from user mode at or after each instant sets `sip.SSIP`
//! ([`raise_software`]), so the interrupt is taken in user mode as soon as a domain resumes.

use core::sync::atomic::{AtomicU64, Ordering};

use riscv::register::{sie, sip, sstatus};

/// Disables interrupts; returns whether they were enabled.
pub fn disable() -> bool {
    let was_on = sstatus::read().sie();
    // SAFETY: clearing SIE only defers interrupts. An interrupt taken between the read and the
    // clear returns with SIE as it found it, so `was_on` stays right.
    unsafe { sstatus::clear_sie() };
    was_on
}

/// Re-enables interrupts if `was_on`.
pub fn restore(was_on: bool) {
    if was_on {
        enable();
    }
}

/// Enables interrupts.
pub fn enable() {
    // SAFETY: the trap vector is installed before anything enables interrupts.
    unsafe { sstatus::set_sie() };
}

/// The supervisor external interrupt's cause: a PLIC source is pending.
pub(super) const EXTERNAL: usize = 9;

/// Lets device interrupt line `line` (a PLIC source) interrupt the kernel, which delivers it
/// to the driver domain it is bound to; false if the PLIC has no such source.
pub fn enable_line(line: u32) -> bool {
    if !super::plic::enable(line) {
        return false;
    }
    // SAFETY: setting `sie.SEIE` lets PLIC sources interrupt; the trap handlers claim them.
    unsafe { sie::set_sext() };
    true
}

/// Device lines are PLIC sources, fixed by the platform (the device tree): none is handed out
/// for message-signalled interrupts.
pub const DEVICE_LINES: core::ops::Range<u32> = 0..0;

/// Message-signalled interrupts need the AIA's IMSIC, which `virt` has only with
/// `aia=aplic-imsic`: none here.
pub fn msi_message(_line: u32) -> Option<(u64, u32)> {
    None
}

/// The driver domain served line `line`'s device: completes the source, so it may interrupt
/// again.
pub fn ack_line(line: u32) {
    super::plic::complete(line);
}

/// Line `line` is bound to nobody (any more): disabled, and completed if it was claimed.
pub fn release_line(line: u32) {
    super::plic::disable(line);
    super::plic::complete(line);
}

/// A supervisor external interrupt: claims every pending PLIC source and raises it for
/// delivery; each stays claimed (the PLIC does not deliver it again) until acknowledged.
pub(super) fn on_external() {
    while let Some(source) = super::plic::claim() {
        crate::domain::raise_interrupt(source);
    }
}

/// Causes counted one by one; higher ones share the last slot.
const CAUSES: usize = 64;

/// Unexpected interrupts seen, by cause.
static UNEXPECTED: [AtomicU64; CAUSES] = [const { AtomicU64::new(0) }; CAUSES];

/// The interrupt's name, by cause (the exception code of `scause`).
fn name(code: usize) -> &'static str {
    match code {
        1 => "supervisor software interrupt",
        5 => "supervisor timer interrupt",
        9 => "supervisor external interrupt",
        13 => "counter-overflow interrupt",
        _ => "platform interrupt",
    }
}

/// Handles an interrupt the kernel does not expect, with cause `code` (`scause` without its
/// interrupt bit), taken in user mode if `from_user`: counts it, logs the first of its cause,
/// and silences its source. The caller then resumes the interrupted code.
pub(super) fn unexpected(code: usize, from_user: bool) {
    let seen = UNEXPECTED[code.min(CAUSES - 1)].fetch_add(1, Ordering::Relaxed);
    let silenced = if code == 1 {
        // SAFETY: clearing `sip.SSIP` only withdraws the pending software interrupt.
        unsafe { sip::clear_ssoft() };
        "cleared in sip"
    } else if code < CAUSES {
        let enabled = sie::read().bits() & !(1 << code);
        // SAFETY: clearing an enable bit only keeps that interrupt from being taken.
        unsafe { sie::write(sie::Sie::from_bits(enabled)) };
        "masked in sie"
    } else {
        "left as it is"
    };
    if seen == 0 {
        defmt::warn!(
            "interrupt: unexpected {=str} (cause {=usize}) taken in {=str} mode, {=str}; counted, not logged again",
            name(code),
            code,
            if from_user { "user" } else { "supervisor" },
            silenced
        );
    }
}

/// Logs how many unexpected interrupts of each cause were taken, if any.
pub(super) fn report_unexpected() {
    for (code, count) in UNEXPECTED.iter().enumerate() {
        let n = count.load(Ordering::Relaxed);
        if n > 0 {
            defmt::info!(
                "interrupts: {=u64} unexpected {=str}(s) (cause {=usize})",
                n,
                name(code),
                code
            );
        }
    }
}

/// Lets supervisor software interrupts through (`sie.SSIE`), once [`crate::softint`] has a
/// schedule: they are taken (as unexpected interrupts) in user mode, and in the kernel once
/// SIE is on.
pub fn allow_software() {
    // SAFETY: enabling SSIE lets software interrupts through; the trap handler takes them as
    // unexpected interrupts.
    unsafe { sie::set_ssoft() };
}

/// Makes a supervisor software interrupt pending (`sip.SSIP`), for [`crate::softint`]: it is
/// taken once SIE allows it (in user mode, always).
#[cold]
pub(super) fn raise_software() {
    // SAFETY: setting `sip.SSIP` makes a software interrupt pending, which is the point.
    unsafe { sip::set_ssoft() };
}
