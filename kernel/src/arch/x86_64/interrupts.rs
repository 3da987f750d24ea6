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
//! resumes (a domain in ring 3 included: it is neither terminated nor charged a switch). The
//! counts are logged when the kernel shuts down.
//!
//! For tests, `softint=TIME,...` on the command line ([`crate::softint`], which keeps the
//! schedule) raises software interrupts: on the first timer interrupt taken from user mode at or after each instant, the
//! trap path sends this CPU a self-IPI on [`SOFTWARE_VECTOR`], once the domain's handler
//! is done and just before it resumes ring 3 (the handler may idle with interrupts on, where
//! the IPI would be taken in the kernel). Interrupts stay off until the resume enters ring 3,
//! so the IPI is taken there, with the domain's registers saved like any trap's.

use core::sync::atomic::{AtomicU64, Ordering};

use ::x86_64::instructions::{interrupts, port::Port};

use super::apic;
use super::vectors::{APIC_ERROR_VECTOR, PIC_VECTOR_BASE, SOFTWARE_VECTOR, SPURIOUS_VECTOR};

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

/// The vectors device interrupts may be bound to (a driver domain's device signals one with a
/// message-signalled interrupt; the vector is its line number).
pub const DEVICE_LINES: core::ops::Range<u32> = 0x60..0xe0;

/// Which device vectors are bound to a driver domain: bit `v % 64` of word `v / 64`.
static BOUND: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// Which device vectors were released (their driver domain died) and not bound again: a
/// message its device had sent before it was stopped may still arrive, and is no surprise.
static RELEASED: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// Messages that arrived on released vectors ([`RELEASED`]).
static LATE: AtomicU64 = AtomicU64::new(0);

fn bound(vector: u32) -> bool {
    BOUND[vector as usize / 64].load(Ordering::Relaxed) & (1 << (vector % 64)) != 0
}

fn released(vector: u32) -> bool {
    RELEASED[vector as usize / 64].load(Ordering::Relaxed) & (1 << (vector % 64)) != 0
}

/// Lets device vector `line` through to the driver domain it is bound to; false outside
/// [`DEVICE_LINES`]. Its device is then programmed with [`msi_message`].
pub fn enable_line(line: u32) -> bool {
    if !DEVICE_LINES.contains(&line) {
        return false;
    }
    BOUND[line as usize / 64].fetch_or(1 << (line % 64), Ordering::Relaxed);
    RELEASED[line as usize / 64].fetch_and(!(1 << (line % 64)), Ordering::Relaxed);
    true
}

/// The driver domain served line `line`'s device. Message-signalled interrupts are edges, each
/// acknowledged at the local APIC when it arrives: nothing is left to release.
pub fn ack_line(_line: u32) {}

/// Line `line` is bound to nobody (any more); the device's messages are turned off in its
/// configuration space by the caller. A message the device sent before that may still
/// arrive: it is acknowledged and counted as late ([`on_released`]), not taken as unexpected.
pub fn release_line(line: u32) {
    if DEVICE_LINES.contains(&line) {
        BOUND[line as usize / 64].fetch_and(!(1 << (line % 64)), Ordering::Relaxed);
        RELEASED[line as usize / 64].fetch_or(1 << (line % 64), Ordering::Relaxed);
    }
}

/// The message (address, data) a PCI function writes to raise device vector `line` on this
/// CPU: fixed delivery, edge-triggered, physical destination mode; `None` for a vector that
/// is not a device line.
pub fn msi_message(line: u32) -> Option<(u64, u32)> {
    DEVICE_LINES.contains(&line).then(|| (0xfee0_0000 | u64::from(apic::id()) << 12, line))
}

/// An interrupt on `vector`: if its line was released and not bound again, acknowledges it
/// at the local APIC and counts it (a message its device sent before it was stopped);
/// whether it was one. Checked after [`on_device`].
pub(super) fn on_released(vector: u64) -> bool {
    let Ok(v) = u32::try_from(vector) else { return false };
    if !DEVICE_LINES.contains(&v) || bound(v) || !released(v) {
        return false;
    }
    apic::end_of_interrupt();
    LATE.fetch_add(1, Ordering::Relaxed);
    true
}

/// An interrupt on `vector`: if a driver domain's device is bound to it, acknowledges it at
/// the local APIC and raises it for delivery; whether it was one.
pub(super) fn on_device(vector: u64) -> bool {
    let Ok(v) = u32::try_from(vector) else { return false };
    if !DEVICE_LINES.contains(&v) || !bound(v) {
        return false;
    }
    apic::end_of_interrupt();
    crate::domain::raise_interrupt(v);
    true
}

/// Nothing to enable for [`crate::softint`]'s schedule: the self-IPI's vector is always
/// open.
pub fn allow_software() {}

/// Sends this CPU a software interrupt: a self-IPI on [`SOFTWARE_VECTOR`]. It waits in
/// the local APIC while interrupts are off and is taken as soon as they are on: for the trap
/// path, which calls this with interrupts off just before it resumes a domain, in ring 3.
#[cold]
pub(super) fn raise_software() {
    apic::send_self(SOFTWARE_VECTOR);
}

/// Moves both 8259 PICs to vectors 0x20..0x30, masks every line, and stops PIT channel 0.
/// Before the IDT exists an interrupt would triple-fault the machine, and with the BIOS's
/// vectors a PIC interrupt would look like a CPU exception.
pub(super) fn quiet_legacy_devices() {
    let base = PIC_VECTOR_BASE;
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
        SPURIOUS_VECTOR => "local APIC spurious interrupt",
        APIC_ERROR_VECTOR => "local APIC error interrupt",
        SOFTWARE_VECTOR => "software interrupt",
        v if (PIC_VECTOR_BASE..PIC_VECTOR_BASE + 16).contains(&v) => "legacy PIC interrupt",
        _ => "interrupt",
    }
}

/// Handles an interrupt the kernel does not expect, on `vector`, taken in user mode if
/// `from_user`: counts it, logs the first of its vector, and acknowledges it at the local APIC
/// if the APIC has it in service (a spurious interrupt and a masked PIC's are not in service).
/// The caller then resumes the interrupted code.
pub(super) fn unexpected(vector: u8, from_user: bool) {
    let seen = UNEXPECTED[vector as usize].fetch_add(1, Ordering::Relaxed);
    if vector == APIC_ERROR_VECTOR {
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

/// Logs how many unexpected interrupts of each vector were taken, and how many late messages
/// of released device lines, if any.
pub(super) fn report_unexpected() {
    let late = LATE.load(Ordering::Relaxed);
    if late > 0 {
        defmt::info!(
            "interrupts: {=u64} late message(s) of devices stopped when their driver died",
            late
        );
    }
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
