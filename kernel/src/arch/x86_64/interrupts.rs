//! A critical section on this CPU through RFLAGS.IF; the legacy interrupt controller and
//! timer the firmware left running; and the interrupts the kernel does not expect.
//!
//! The kernel expects one interrupt, the local APIC timer's ([`super::timer`]). The legacy
//! 8259 PICs are moved to vectors 0x20..0x30 (away from the CPU's exceptions, where the BIOS
//! leaves them) and masked, and the PIT's channel 0, which SeaBIOS leaves ticking at 18.2 Hz,
//! is stopped (under `-icount` every idle `hlt` would otherwise stretch to its next edge).
//! Any other interrupt is still the kernel's business, never a fault of the code it
//! interrupted: [`unexpected`] counts it by vector, logs the first of each vector once (a
//! WARN), acknowledges it at the local APIC if the APIC delivered it, and the interrupted code
//! resumes. The counts are logged when the kernel shuts down.

use core::sync::atomic::{AtomicU64, Ordering};

use ::x86_64::instructions::{interrupts, port::Port};

use super::{apic, trap};

/// Turns interrupts off; returns whether they were on.
pub fn disable() -> bool {
    let was_on = interrupts::are_enabled();
    if was_on {
        interrupts::disable();
    }
    was_on
}

/// Turns interrupts back on if `was_on` (the value [`disable`] returned).
pub fn restore(was_on: bool) {
    if was_on {
        enable();
    }
}

/// Turns interrupts on.
pub fn enable() {
    interrupts::enable();
}

/// The command line's `softint=` instants: a RISC-V test of supervisor software interrupts,
/// which x86_64 has no counterpart of; logs that it is not supported (if any are given).
pub fn raise_software_at(instants_ns: &[u64]) {
    if !instants_ns.is_empty() {
        defmt::warn!("command line: softint= is not supported on {=str}", super::NAME);
    }
}

/// Moves both 8259 PICs to vectors 0x20..0x30, masks every line, and stops PIT channel 0.
/// Before the IDT exists an interrupt would triple-fault the machine, and with the BIOS's
/// vectors a PIC interrupt would look like a CPU exception.
pub(super) fn quiet_legacy_devices() {
    let base = trap::PIC_VECTOR_BASE;
    let writes: [(u16, u8); 10] = [
        (0x20, 0x11),     // master ICW1: initialise, ICW4 follows
        (0xa0, 0x11),     // slave ICW1
        (0x21, base),     // master ICW2: vector base
        (0xa1, base + 8), // slave ICW2
        (0x21, 0x04),     // master ICW3: slave on line 2
        (0xa1, 0x02),     // slave ICW3: its cascade identity
        (0x21, 0x01),     // master ICW4: 8086 mode
        (0xa1, 0x01),     // slave ICW4
        (0x21, 0xff),     // master OCW1: mask every line
        (0xa1, 0xff),     // slave OCW1
    ];
    for (port, value) in writes {
        // SAFETY: 0x20/0x21 and 0xa0/0xa1 are the two PICs' command and data ports on every PC
        // platform; this is their documented initialisation sequence, and it ends with every
        // line masked. No memory is touched.
        unsafe { Port::<u8>::new(port).write(value) };
    }
    // SAFETY: 0x43 is the PIT's mode register and 0x40 its channel 0; mode 0 with a count of
    // 1 makes the channel count out once and then stay silent (its IRQ 0 is masked anyway).
    // Channel 2, which `time` uses for calibration, is not affected.
    unsafe {
        Port::<u8>::new(0x43).write(0b0011_0000); // channel 0, lobyte/hibyte, mode 0, binary
        Port::<u8>::new(0x40).write(1);
        Port::<u8>::new(0x40).write(0);
    }
}

/// Unexpected interrupts seen, by vector.
static UNEXPECTED: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];

/// The interrupt's name, by vector.
fn name(vector: u8) -> &'static str {
    match vector {
        trap::SPURIOUS_VECTOR => "local APIC spurious interrupt",
        trap::APIC_ERROR_VECTOR => "local APIC error interrupt",
        v if (trap::PIC_VECTOR_BASE..trap::PIC_VECTOR_BASE + 16).contains(&v) => {
            "legacy PIC interrupt"
        }
        _ => "interrupt",
    }
}

/// Handles an interrupt the kernel does not expect, on `vector`, taken in user mode if
/// `from_user`: counts it, logs the first of its vector, and acknowledges it at the local APIC
/// if the APIC has it in service (a spurious interrupt and a masked PIC's are not in service).
/// The caller then resumes the interrupted code.
pub(super) fn unexpected(vector: u8, from_user: bool) {
    let seen = UNEXPECTED[vector as usize].fetch_add(1, Ordering::Relaxed);
    if vector == trap::APIC_ERROR_VECTOR {
        apic::clear_errors();
    }
    let acknowledged = apic::in_service(vector);
    if acknowledged {
        apic::end_of_interrupt();
    }
    if seen == 0 {
        defmt::warn!(
            "interrupt: unexpected {=str} (vector {=u8:#x}) taken in {=str} mode, {=str}; counted, not logged again",
            name(vector),
            vector,
            if from_user { "user" } else { "kernel" },
            if acknowledged { "acknowledged at the local APIC" } else { "not in service" }
        );
    }
}

/// How many unexpected interrupts were taken on `vector`.
pub fn unexpected_count(vector: u8) -> u64 {
    UNEXPECTED[vector as usize].load(Ordering::Relaxed)
}

/// Logs how many unexpected interrupts of each vector were taken, if any.
pub(super) fn report_unexpected() {
    for (vector, count) in UNEXPECTED.iter().enumerate() {
        let n = count.load(Ordering::Relaxed);
        if n > 0 {
            defmt::info!(
                "interrupts: {=u64} unexpected {=str}(s) (vector {=u8:#x})",
                n,
                name(vector as u8),
                vector as u8
            );
        }
    }
}
