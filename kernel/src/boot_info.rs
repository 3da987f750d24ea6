//! What the arch boot code learned about the machine, in a portable form.
//!
//! The boot code fills a [`BootInfo`] before the heap exists, so it holds fixed-capacity
//! collections. Addresses are physical.

use heapless::{String, Vec};

pub use kernel_core::PhysRange;

/// A device found at boot (from the device tree on RISC-V, from fixed platform knowledge on x86).
#[derive(Clone, Debug, defmt::Format)]
pub struct Device {
    /// The device tree's `compatible` string or a platform name.
    pub kind: String<32>,
    /// Register window.
    pub regs: PhysRange,
    /// Interrupt number at the platform's interrupt controller, if any.
    pub irq: Option<u32>,
}

/// A PCI host bridge's configuration space, mapped by the Enhanced Configuration Access
/// Mechanism (from the device tree's `pci-host-ecam-generic` node on RISC-V, from the ACPI MCFG
/// table on x86_64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, defmt::Format)]
pub struct PciHost {
    /// The ECAM window (4 KiB per function, 1 MiB per bus), starting at bus 0's.
    pub ecam: PhysRange,
    /// The first bus it decodes.
    pub first_bus: u8,
    /// The last bus it decodes.
    pub last_bus: u8,
}

/// A controller that routes devices' interrupts to this CPU: the PLIC on RISC-V `virt` (from
/// the device tree), each I/O APIC on x86_64 (from the ACPI MADT). The arch code masks every
/// input at boot; binding one to a driver domain comes with user-level drivers.
#[derive(Clone, Debug, PartialEq, Eq, defmt::Format)]
pub struct InterruptController {
    /// The device tree's `compatible` string, or `ioapic`.
    pub kind: String<32>,
    /// Register window.
    pub regs: PhysRange,
    /// The platform's number of its first input: an I/O APIC's first global system interrupt,
    /// the PLIC's source 1 (source 0 means "none").
    pub first_input: u32,
    /// How many inputs it has, when the firmware says (the PLIC's `riscv,ndev`); otherwise the
    /// arch code reads it from the controller.
    pub inputs: Option<u32>,
    /// The controller's own identifier (an I/O APIC's id; 0 for the PLIC).
    pub id: u8,
}

impl InterruptController {
    /// Logs the controller once the arch code masked its `inputs` inputs at boot: one line if
    /// all read back masked, a warning naming how many (`open`) did not.
    pub fn report_masked(&self, inputs: u32, open: usize) {
        let last = self.first_input + inputs.saturating_sub(1);
        if open == 0 {
            defmt::info!(
                "interrupt controller: {=str} @ {=u64:#x} (id {=u8}), inputs {=u32}..={=u32}, all masked",
                self.kind.as_str(),
                self.regs.start,
                self.id,
                self.first_input,
                last
            );
        } else {
            defmt::warn!(
                "interrupt controller: {=str} @ {=u64:#x} (id {=u8}): {=usize} of {=u32} inputs stay unmasked",
                self.kind.as_str(),
                self.regs.start,
                self.id,
                open,
                inputs
            );
        }
    }
}

/// The longest kernel command line kept (the boot code warns when it cuts one).
pub const CMDLINE_BYTES: usize = 1024;

/// A function that calls back with each of a set of ranges.
pub type VisitRanges = fn(&mut dyn FnMut(PhysRange));

/// Everything the portable kernel needs to know about the machine it booted on.
pub struct BootInfo {
    /// Which firmware started us, e.g. `RustSBI 0.4.1 (SBI 2.0)`.
    pub firmware: String<64>,
    /// The kernel command line (`-append` in QEMU), at most [`CMDLINE_BYTES`] long.
    pub cmdline: String<CMDLINE_BYTES>,
    /// Usable RAM.
    pub memory: Vec<PhysRange, 8>,
    /// Parts of RAM that are not free that the boot code lists itself: the kernel image,
    /// firmware, device tree, boot image, boot tables.
    pub reserved: Vec<PhysRange, 8>,
    /// More parts of RAM that are not free, as many as the firmware describes: this function
    /// calls back with each, reading them from the firmware's own description every time (on
    /// RISC-V the device tree's reservations), so that no list has to hold them.
    pub reserved_elsewhere: Option<VisitRanges>,
    /// Devices found.
    pub devices: Vec<Device, 32>,
    /// The PCI host bridge, if the machine has one.
    pub pci: Option<PciHost>,
    /// The controllers of devices' interrupts.
    pub interrupt_controllers: Vec<InterruptController, 4>,
    /// Timer ticks per second.
    pub timebase_hz: u64,
    /// The boot image (QEMU `-initrd`), if one was loaded.
    pub initrd: Option<PhysRange>,
}

impl Default for BootInfo {
    fn default() -> Self {
        Self::new()
    }
}

impl BootInfo {
    /// An empty description, for the boot code to fill.
    pub const fn new() -> Self {
        BootInfo {
            firmware: String::new(),
            cmdline: String::new(),
            memory: Vec::new(),
            reserved: Vec::new(),
            reserved_elsewhere: None,
            devices: Vec::new(),
            pci: None,
            interrupt_controllers: Vec::new(),
            timebase_hz: 0,
            initrd: None,
        }
    }

    /// Calls `f` with every reserved range: [`BootInfo::reserved`], then those of
    /// [`BootInfo::reserved_elsewhere`].
    pub fn for_each_reserved(&self, f: &mut dyn FnMut(PhysRange)) {
        self.reserved.iter().copied().for_each(&mut *f);
        if let Some(elsewhere) = self.reserved_elsewhere {
            elsewhere(f);
        }
    }

    /// Total usable RAM in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory.iter().map(PhysRange::len).sum()
    }

    /// Logs what was found: the boot banner's body.
    pub fn report(&self) {
        defmt::info!(
            "memory: {=u64} MiB in {=usize} region(s), timer {=u64} Hz",
            self.memory_bytes() >> 20,
            self.memory.len(),
            self.timebase_hz
        );
        for r in &self.memory {
            defmt::info!("  ram {=u64:#x}..{=u64:#x}", r.start, r.end);
        }
        self.for_each_reserved(&mut |r| {
            defmt::info!("  reserved {=u64:#x}..{=u64:#x}", r.start, r.end);
        });
        defmt::info!("devices: {=usize} found", self.devices.len());
        for d in &self.devices {
            match d.irq {
                Some(irq) => defmt::info!(
                    "  {=str} @ {=u64:#x} (+{=u64:#x}) irq {=u32}",
                    d.kind.as_str(),
                    d.regs.start,
                    d.regs.len(),
                    irq
                ),
                None => defmt::info!(
                    "  {=str} @ {=u64:#x} (+{=u64:#x})",
                    d.kind.as_str(),
                    d.regs.start,
                    d.regs.len()
                ),
            }
        }
        if !self.cmdline.is_empty() {
            defmt::info!("command line: {=str}", self.cmdline.as_str());
        }
    }
}

/// Copies `s` into a fixed-capacity string, cutting it at a character boundary if it is long.
pub fn fixed<const N: usize>(s: &str) -> String<N> {
    let mut out = String::new();
    for c in s.chars() {
        if out.push(c).is_err() {
            break;
        }
    }
    out
}
