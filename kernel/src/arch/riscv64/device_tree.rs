//! Reads the flattened device tree the firmware hands over into a [`BootInfo`].

use fdt::Fdt;

use super::layout::{KERNEL_PHYS, KERNEL_VIRT};
use super::{console, sbi};
use crate::boot_info::{BootInfo, Device, PhysRange, fixed};

unsafe extern "C" {
    static __kernel_start: u8;
    static __kernel_end: u8;
}

/// The boot image's range from `/chosen` (`linux,initrd-start`, `linux,initrd-end`, 32- or
/// 64-bit cells).
fn initrd(fdt: &Fdt<'_>) -> Option<PhysRange> {
    let chosen = fdt.find_node("/chosen")?;
    let read = |name: &str| {
        let p = chosen.property(name)?;
        match p.value.len() {
            4 => Some(u32::from_be_bytes(p.value.try_into().ok()?) as u64),
            8 => Some(u64::from_be_bytes(p.value.try_into().ok()?)),
            _ => None,
        }
    };
    let (start, end) = (read("linux,initrd-start")?, read("linux,initrd-end")?);
    (end > start).then_some(PhysRange { start, end })
}

/// Builds the boot information from the device tree at physical address `dtb`.
pub fn boot_info(hart: usize, dtb: u64) -> BootInfo {
    let mut boot = BootInfo::new();
    // SAFETY: the firmware passes the physical address of a valid flattened device tree, which
    // the boot page table's direct map covers (it lies in the first 4 GiB); `from_ptr` checks
    // the header's magic and bounds before reading further.
    let fdt = match unsafe { Fdt::from_ptr(super::phys_to_virt(dtb) as *const u8) } {
        Ok(fdt) => fdt,
        Err(e) => {
            panic!("hart {} booted with an unreadable device tree at {:#x}: {:?}", hart, dtb, e)
        }
    };

    if let Some(uart) = fdt.find_compatible(&["ns16550a", "ns16550"])
        && let Some(reg) = uart.reg().and_then(|mut r| r.next())
    {
        console::set_base(reg.starting_address as u64);
    }

    boot.firmware = sbi::describe_firmware();
    if let Some(args) = fdt.chosen().bootargs() {
        boot.cmdline = fixed(args);
    }
    boot.initrd = initrd(&fdt);
    for region in fdt.memory().regions() {
        let start = region.starting_address as u64;
        let end = start + region.size.unwrap_or(0) as u64;
        if end > start && boot.memory.push(PhysRange { start, end }).is_err() {
            defmt::warn!("device tree: more memory regions than the kernel tracks; ignoring some");
        }
    }
    let kernel_start = &raw const __kernel_start as u64 - KERNEL_VIRT + KERNEL_PHYS;
    let kernel_end = &raw const __kernel_end as u64 - KERNEL_VIRT + KERNEL_PHYS;
    let ram_start = boot.memory.iter().map(|r| r.start).min().unwrap_or(kernel_start);
    let dtb_end = dtb + fdt.total_size() as u64;
    let mut reserved = heapless::Vec::<PhysRange, 8>::new();
    // The firmware below the kernel, the kernel image, the device tree itself.
    let _ = reserved.push(PhysRange { start: ram_start, end: kernel_start });
    let _ = reserved.push(PhysRange { start: kernel_start, end: kernel_end });
    let _ = reserved.push(PhysRange { start: dtb, end: dtb_end });
    if let Some(r) = boot.initrd {
        let _ = reserved.push(r);
    }
    if let Some(node) = fdt.find_node("/reserved-memory") {
        for child in node.children() {
            for r in child.reg().into_iter().flatten() {
                let start = r.starting_address as u64;
                let _ = reserved.push(PhysRange { start, end: start + r.size.unwrap_or(0) as u64 });
            }
        }
    }
    boot.reserved = reserved;

    boot.timebase_hz = fdt
        .cpus()
        .next()
        .map(|c| c.timebase_frequency() as u64)
        .filter(|&hz| hz > 0)
        .unwrap_or(10_000_000);

    for node in fdt.all_nodes() {
        let Some(compatible) = node.compatible().map(|c| c.first()) else { continue };
        let Some(reg) = node.reg().and_then(|mut r| r.next()) else { continue };
        if node.name.starts_with("memory") || node.name.starts_with("cpu") {
            continue;
        }
        let start = reg.starting_address as u64;
        let irq = node.interrupts().and_then(|mut i| i.next()).map(|i| i as u32);
        let device = Device {
            kind: fixed(compatible),
            regs: PhysRange { start, end: start + reg.size.unwrap_or(0) as u64 },
            irq,
        };
        if boot.devices.push(device).is_err() {
            defmt::warn!("device tree: more devices than the kernel tracks; ignoring the rest");
            break;
        }
    }
    boot
}
