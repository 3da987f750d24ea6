//! Reads the flattened device tree the firmware hands over into a [`BootInfo`].
//!
//! Memory: every `memory` node's `reg` is usable RAM, except what lies beyond the kernel's
//! direct map ([`DIRECT_MAP_BYTES`]), which is left out with a warning. Reserved: the firmware
//! below the kernel, the kernel image, the device tree and the boot image are listed in
//! [`BootInfo::reserved`]; the ranges the device tree itself reserves (its memory reservation
//! block and the `reg` of every `/reserved-memory` child), however many, are not copied but
//! read from the device tree again whenever they are asked for ([`for_each_reserved`], which
//! [`BootInfo::reserved_elsewhere`] names), so none is ever dropped.

use core::sync::atomic::{AtomicU64, Ordering};

use fdt::Fdt;

use super::layout::{DIRECT_MAP_BYTES, KERNEL_PHYS, KERNEL_VIRT};
use super::{console, sbi};
use crate::boot_info::{BootInfo, CMDLINE_BYTES, Device, PhysRange, fixed};

/// The device tree's physical address, for [`for_each_reserved`].
static DTB: AtomicU64 = AtomicU64::new(0);

/// The device tree at physical address `dtb`.
fn open(dtb: u64) -> Result<Fdt<'static>, fdt::FdtError> {
    // SAFETY: `dtb` is the physical address of the flattened device tree the firmware passed,
    // which the direct map covers (at boot the boot page table's, which maps the first 4 GiB,
    // where QEMU puts it) and which is reserved, so nothing ever overwrites it; `from_ptr`
    // checks the header's magic and bounds before reading further.
    unsafe { Fdt::from_ptr(super::phys_to_virt(dtb) as *const u8) }
}

/// Calls `f` with every range the device tree reserves: each entry of its memory reservation
/// block and each `reg` range of each `/reserved-memory` child. Empty ranges are skipped.
pub fn for_each_reserved(f: &mut dyn FnMut(PhysRange)) {
    let Ok(fdt) = open(DTB.load(Ordering::Relaxed)) else { return };
    for r in fdt.memory_reservations() {
        let start = r.address() as u64;
        if r.size() > 0 {
            f(PhysRange { start, end: start.saturating_add(r.size() as u64) });
        }
    }
    if let Some(node) = fdt.find_node("/reserved-memory") {
        for child in node.children() {
            for r in child.reg().into_iter().flatten() {
                let start = r.starting_address as u64;
                let size = r.size.unwrap_or(0) as u64;
                if size > 0 {
                    f(PhysRange { start, end: start.saturating_add(size) });
                }
            }
        }
    }
}

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
    let fdt = match open(dtb) {
        Ok(fdt) => fdt,
        Err(e) => {
            panic!("hart {} booted with an unreadable device tree at {:#x}: {:?}", hart, dtb, e)
        }
    };
    DTB.store(dtb, Ordering::Relaxed);

    if let Some(uart) = fdt.find_compatible(&["ns16550a", "ns16550"])
        && let Some(reg) = uart.reg().and_then(|mut r| r.next())
    {
        console::set_base(reg.starting_address as u64);
    }

    boot.firmware = sbi::describe_firmware();
    if let Some(args) = fdt.chosen().bootargs() {
        boot.cmdline = fixed(args);
        if boot.cmdline.len() < args.len() {
            defmt::warn!(
                "device tree: the command line is longer than {=usize} bytes and was cut",
                CMDLINE_BYTES
            );
        }
    }
    boot.initrd = initrd(&fdt);
    let memory_nodes =
        fdt.all_nodes().filter(|n| n.name == "memory" || n.name.starts_with("memory@"));
    for region in memory_nodes.filter_map(|n| n.reg()).flatten() {
        let start = region.starting_address as u64;
        let mut end = start.saturating_add(region.size.unwrap_or(0) as u64);
        if end > DIRECT_MAP_BYTES {
            defmt::warn!(
                "device tree: RAM {=u64:#x}..{=u64:#x} beyond the direct map ({=u64} GiB) is left out",
                start.max(DIRECT_MAP_BYTES),
                end,
                DIRECT_MAP_BYTES >> 30
            );
            end = DIRECT_MAP_BYTES;
        }
        if end > start && boot.memory.push(PhysRange { start, end }).is_err() {
            defmt::warn!("device tree: more memory regions than the kernel tracks; ignoring some");
        }
    }
    let kernel_start = &raw const __kernel_start as u64 - KERNEL_VIRT + KERNEL_PHYS;
    let kernel_end = &raw const __kernel_end as u64 - KERNEL_VIRT + KERNEL_PHYS;
    let ram_start = boot.memory.iter().map(|r| r.start).min().unwrap_or(kernel_start);
    let dtb_end = dtb + fdt.total_size() as u64;
    // The firmware below the kernel, the kernel image, the device tree itself, the boot image;
    // the device tree's own reservations are read from it when needed.
    let listed = [
        Some(PhysRange { start: ram_start, end: kernel_start }),
        Some(PhysRange { start: kernel_start, end: kernel_end }),
        Some(PhysRange { start: dtb, end: dtb_end }),
        boot.initrd,
    ];
    for r in listed.into_iter().flatten() {
        boot.reserved.push(r).expect("the reserved list holds the four boot ranges");
    }
    boot.reserved_elsewhere = Some(for_each_reserved);

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
