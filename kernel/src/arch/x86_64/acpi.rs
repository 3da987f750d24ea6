//! ACPI tables, read with the `acpi` crate through the direct map: the PCI host bridge's ECAM
//! window comes from the MCFG table.
//!
//! Only the tables the kernel uses are read (no AML, which the crate offers only with `alloc` on
//! nightly Rust): today the MCFG; the MADT (interrupt controllers) comes with the x86_64 port's
//! interrupt work.

use core::ptr::NonNull;

use acpi::mcfg::Mcfg;
use acpi::{AcpiHandler, AcpiTables, PhysicalMapping};

use crate::boot_info::{PciHost, PhysRange};

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

/// The ECAM window of PCI segment 0, from the MCFG table the RSDP at `rsdp` leads to.
pub fn pci_host(rsdp: u64) -> Option<PciHost> {
    // SAFETY: `rsdp` is the RSDP's address as the PVH start info gives it; the crate checks its
    // signature and checksum before it trusts it.
    let tables = unsafe { AcpiTables::from_rsdp(DirectMap, rsdp as usize) }
        .inspect_err(|e| defmt::warn!("acpi: no usable tables: {}", defmt::Debug2Format(e)))
        .ok()?;
    let mcfg = tables.find_table::<Mcfg>().ok()?;
    let entry = mcfg.entries().iter().find(|e| e.pci_segment_group == 0)?;
    let (first, last) = (entry.bus_number_start, entry.bus_number_end);
    // The entry's base is bus 0's configuration space, whatever its first bus.
    let start = entry.base_address;
    let end = start + ((u64::from(last) + 1) << 20);
    Some(PciHost { ecam: PhysRange { start, end }, first_bus: first, last_bus: last })
}
