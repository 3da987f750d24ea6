//! ACPI tables, read with the `acpi` crate through the direct map: the PCI host bridge's ECAM
//! window comes from the MCFG table; the local APIC's address, the I/O APICs and the routes of
//! ISA interrupts from the MADT.
//!
//! Only the tables the kernel uses are read (no AML, which the crate offers only with `alloc` on
//! nightly Rust).

use core::ptr::NonNull;

use acpi::madt::{Madt, MadtEntry};
use acpi::mcfg::Mcfg;
use acpi::{AcpiHandler, AcpiTables, PhysicalMapping};

use crate::boot_info::{BootInfo, InterruptController, PciHost, PhysRange, fixed};

/// Reaches ACPI tables through the direct map (which the boot tables already provide).
#[derive(Clone, Copy)]
struct DirectMap;

impl AcpiHandler for DirectMap {
    unsafe fn map_physical_region<T>(&self, pa: usize, size: usize) -> PhysicalMapping<Self, T> {
        let va = super::phys_to_virt(pa as u64) as *mut T;
        let va = NonNull::new(va).expect("the direct map does not map address 0");
        // SAFETY: the direct map maps every physical address below its size at `phys_to_virt`,
        // for the kernel's lifetime, so the region needs no mapping of its own; the caller
        // promises a valid `T` of `size` bytes there.
        unsafe { PhysicalMapping::new(pa, va, size, size, *self) }
    }

    fn unmap_physical_region<T>(_: &PhysicalMapping<Self, T>) {}
}

/// An ISA interrupt that reaches another I/O APIC input than its own number, or with another
/// polarity or trigger than ISA's (active high, edge), as the MADT's interrupt source
/// overrides say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, defmt::Format)]
pub struct IsaRoute {
    /// The ISA interrupt (IRQ 0 to 15).
    pub irq: u8,
    /// The global system interrupt it arrives at.
    pub gsi: u32,
    /// Active low (else high).
    pub active_low: bool,
    /// Level-triggered (else edge).
    pub level: bool,
}

/// The routes of ISA interrupts the MADT overrides (read at boot by [`read`]).
pub static ISA_ROUTES: spin::Once<heapless::Vec<IsaRoute, 16>> = spin::Once::new();

/// Reads the tables the RSDP at `rsdp` leads to into `boot`: the PCI host bridge (MCFG) and the
/// I/O APICs (MADT); keeps the ISA routes in [`ISA_ROUTES`] and checks the local APIC's address
/// against the one the CPU reports.
pub fn read(rsdp: u64, boot: &mut BootInfo) {
    // SAFETY: `rsdp` is the RSDP's address as the PVH start info gives it; the crate checks its
    // signature and checksum before it trusts it.
    let tables = match unsafe { AcpiTables::from_rsdp(DirectMap, rsdp as usize) } {
        Ok(tables) => tables,
        Err(e) => {
            defmt::warn!("acpi: no usable tables: {}", defmt::Debug2Format(&e));
            return;
        }
    };
    boot.pci = pci_host(&tables);
    match tables.find_table::<Madt>() {
        Ok(madt) => read_madt(madt.get(), boot),
        Err(e) => defmt::warn!("acpi: no MADT: {}", defmt::Debug2Format(&e)),
    }
}

/// The I/O APICs and ISA routes of `madt`.
fn read_madt(madt: core::pin::Pin<&Madt>, boot: &mut BootInfo) {
    let mut lapic = u64::from(madt.local_apic_address);
    let mut routes = heapless::Vec::<IsaRoute, 16>::new();
    for entry in madt.entries() {
        match entry {
            MadtEntry::IoApic(e) => {
                let start = u64::from(e.io_apic_address);
                let controller = InterruptController {
                    kind: fixed("ioapic"),
                    // IOREGSEL at 0x00 and IOWIN at 0x10: one 4 KiB page.
                    regs: PhysRange { start, end: start + 0x1000 },
                    first_input: e.global_system_interrupt_base,
                    inputs: None,
                    id: e.io_apic_id,
                };
                if boot.interrupt_controllers.push(controller).is_err() {
                    defmt::warn!("acpi: more I/O APICs than the kernel tracks; ignoring the rest");
                }
            }
            MadtEntry::InterruptSourceOverride(e) => {
                // MPS INTI flags: polarity in bits 0-1 (3: active low), trigger in bits 2-3
                // (3: level); 0 means "as the bus says", which for ISA is high and edge.
                let flags = e.flags;
                let route = IsaRoute {
                    irq: e.irq,
                    gsi: e.global_system_interrupt,
                    active_low: flags & 0b11 == 0b11,
                    level: (flags >> 2) & 0b11 == 0b11,
                };
                if e.bus == 0 && routes.push(route).is_err() {
                    defmt::warn!("acpi: more ISA routes than the kernel tracks");
                }
            }
            MadtEntry::LocalApicAddressOverride(e) => lapic = e.local_apic_address,
            _ => {}
        }
    }
    if lapic != super::apic::phys_base() {
        defmt::warn!(
            "acpi: the MADT puts the local APIC at {=u64:#x}, the CPU at {=u64:#x}; using the CPU's",
            lapic,
            super::apic::phys_base()
        );
    }
    for r in &routes {
        defmt::info!(
            "acpi: ISA IRQ {=u8} -> GSI {=u32} ({=str}, {=str})",
            r.irq,
            r.gsi,
            if r.active_low { "active low" } else { "active high" },
            if r.level { "level" } else { "edge" }
        );
    }
    ISA_ROUTES.call_once(|| routes);
}

/// The ECAM window of PCI segment 0, from the MCFG table.
fn pci_host(tables: &AcpiTables<DirectMap>) -> Option<PciHost> {
    let mcfg = tables.find_table::<Mcfg>().ok()?;
    let entry = mcfg.entries().iter().find(|e| e.pci_segment_group == 0)?;
    let (first, last) = (entry.bus_number_start, entry.bus_number_end);
    // The entry's base is bus 0's configuration space, whatever its first bus.
    let start = entry.base_address;
    let end = start + ((u64::from(last) + 1) << 20);
    Some(PciHost { ecam: PhysRange { start, end }, first_bus: first, last_bus: last })
}
