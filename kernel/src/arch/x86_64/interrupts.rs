//! A critical section on this CPU through RFLAGS.IF, and masking of the legacy interrupt
//! controllers the firmware left running.

use ::x86_64::instructions::{interrupts, port::Port};

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
        interrupts::enable();
    }
}

/// Masks every line of both 8259 PICs. SeaBIOS leaves the PIT's IRQ 0 unmasked, and there is
/// no IDT yet, so an interrupt taken now would triple-fault the machine.
pub(super) fn mask_legacy_pic() {
    for port in [0x21u16, 0xa1] {
        // SAFETY: 0x21 and 0xa1 are the PICs' interrupt mask registers; writing 0xff masks all
        // lines and touches no memory.
        unsafe { Port::<u8>::new(port).write(0xff) };
    }
}
