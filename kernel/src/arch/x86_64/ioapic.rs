//! The I/O APICs: where devices' interrupt lines (ISA's, and PCI's INTx) enter on x86_64, found
//! in the ACPI MADT ([`super::acpi`]).
//!
//! At boot every input's redirection entry is masked, so that no device interrupts the kernel;
//! routing an input to a vector and binding it to a driver domain's event comes with user-level
//! drivers (MSI and MSI-X, which PCI devices prefer, bypass the I/O APIC).

use crate::boot_info::BootInfo;

/// Register select (write the index of the register to reach through [`IOWIN`]).
const IOREGSEL: usize = 0x00;
/// The selected register's value.
const IOWIN: usize = 0x10;
/// Version register: bits 16-23 hold the index of the last redirection entry.
const VERSION: u32 = 0x01;
/// Redirection entry `n`: its low word at `0x10 + 2n`, its high word (destination) after it.
const REDIRECTION: u32 = 0x10;
/// A redirection entry's mask bit (low word).
const MASKED: u32 = 1 << 16;

/// One I/O APIC, through the kernel's direct map (its page lies below 4 GiB, which the direct
/// map covers whole; the firmware's MTRRs make it uncached).
struct IoApic {
    base: usize,
}

impl IoApic {
    fn read(&self, reg: u32) -> u32 {
        // SAFETY: `base` maps the I/O APIC's register page (the MADT's address, through the
        // direct map); IOREGSEL and IOWIN are 32-bit registers inside it, and selecting then
        // reading has no other effect. One CPU, interrupts off at boot: nothing interleaves.
        unsafe {
            ((self.base + IOREGSEL) as *mut u32).write_volatile(reg);
            ((self.base + IOWIN) as *const u32).read_volatile()
        }
    }

    fn write(&self, reg: u32, value: u32) {
        // SAFETY: as for `read`; the registers written are redirection entries, which only
        // decide where the device's interrupt goes.
        unsafe {
            ((self.base + IOREGSEL) as *mut u32).write_volatile(reg);
            ((self.base + IOWIN) as *mut u32).write_volatile(value);
        }
    }

    /// How many inputs (redirection entries) it has.
    fn inputs(&self) -> u32 {
        ((self.read(VERSION) >> 16) & 0xff) + 1
    }

    /// Whether input `n` is masked.
    fn masked(&self, n: u32) -> bool {
        self.read(REDIRECTION + 2 * n) & MASKED != 0
    }

    /// Masks input `n` (and clears its vector and destination).
    fn mask(&self, n: u32) {
        self.write(REDIRECTION + 2 * n, MASKED);
        self.write(REDIRECTION + 2 * n + 1, 0);
    }
}

/// Masks every input of every I/O APIC in `boot` and logs each: its id, address, inputs (as
/// global system interrupts) and whether all of them read back masked.
pub fn init(boot: &BootInfo) {
    for c in boot.interrupt_controllers.iter().filter(|c| c.kind == "ioapic") {
        let apic = IoApic { base: super::phys_to_virt(c.regs.start) };
        let inputs = apic.inputs();
        (0..inputs).for_each(|n| apic.mask(n));
        let open = (0..inputs).filter(|&n| !apic.masked(n)).count();
        c.report_masked(inputs, open);
    }
}
