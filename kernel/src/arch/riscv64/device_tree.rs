//! Reads the flattened device tree the firmware hands over into a [`BootInfo`].
//!
//! Memory: every `memory` node's `reg` is usable RAM, except what lies beyond the kernel's
//! direct map ([`DIRECT_MAP_BYTES`]), which is left out with a warning. Reserved: the firmware
//! below the kernel, the kernel image, the device tree and the boot image are listed in
//! [`BootInfo::reserved`]; the ranges the device tree itself reserves (its memory reservation
//! block and the `reg` of every `/reserved-memory` child), however many, are visited by
//! [`for_each_reserved`] (which [`BootInfo::reserved_elsewhere`] names), so none is ever
//! dropped: up to [`CACHED`] of them are kept from the one pass over the tree at boot, and a
//! tree that reserves more is read again whenever they are asked for.

use fdt::Fdt;
use fdt::node::FdtNode;
use spin::Mutex;

use super::layout::{DIRECT_MAP_BYTES, KERNEL_PHYS, KERNEL_VIRT};
use super::{console, sbi};
use crate::boot_info::{
    BootInfo, CMDLINE_BYTES, Device, InterruptController, PciHost, PhysRange, fixed,
};

/// How many of the device tree's reserved ranges are kept after boot; with more, they are read
/// from the tree each time (a walk over every node).
pub const CACHED: usize = 8;

/// The device tree's physical address, and its reserved ranges if there are at most [`CACHED`]
/// (`None`: read them from the tree).
static RESERVED: Mutex<(u64, Option<heapless::Vec<PhysRange, CACHED>>)> = Mutex::new((0, None));

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
    let (dtb, cached) = RESERVED.lock().clone();
    if let Some(ranges) = cached {
        return ranges.iter().copied().for_each(f);
    }
    let Ok(fdt) = open(dtb) else { return };
    reservation_block(&fdt, f);
    if let Some(node) = fdt.all_nodes().find(|n| n.name == "reserved-memory") {
        reserved_children(&node, f);
    }
}

/// Calls `f` with each non-empty entry of the memory reservation block (`/memreserve/`).
fn reservation_block(fdt: &Fdt<'_>, f: &mut dyn FnMut(PhysRange)) {
    for r in fdt.memory_reservations() {
        let start = r.address() as u64;
        if r.size() > 0 {
            f(PhysRange { start, end: start.saturating_add(r.size() as u64) });
        }
    }
}

/// Calls `f` with each non-empty `reg` range of each child of the `/reserved-memory` node.
fn reserved_children(node: &FdtNode<'_, '_>, f: &mut dyn FnMut(PhysRange)) {
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
    boot.timebase_hz = fdt
        .cpus()
        .next()
        .map(|c| c.timebase_frequency() as u64)
        .filter(|&hz| hz > 0)
        .unwrap_or(10_000_000);

    // One pass over the nodes: RAM, the reserved ranges, the devices.
    let mut cache = heapless::Vec::<PhysRange, CACHED>::new();
    let mut fits = true;
    let mut keep = |r: PhysRange| fits &= cache.push(r).is_ok();
    reservation_block(&fdt, &mut keep);
    let mut devices_full = false;
    for node in fdt.all_nodes() {
        if node.name == "memory" || node.name.starts_with("memory@") {
            node.reg().into_iter().flatten().for_each(|r| add_memory(&mut boot, r));
            continue;
        }
        if node.name == "reserved-memory" {
            reserved_children(&node, &mut keep);
            continue;
        }
        let Some(compatible) = node.compatible().map(|c| c.first()) else { continue };
        if compatible == "pci-host-ecam-generic" {
            boot.pci = pci_host(&node);
        }
        if PLIC_COMPATIBLE.contains(&compatible)
            && let Some(plic) = plic(&node)
            && boot.interrupt_controllers.push(plic).is_err()
        {
            defmt::warn!("device tree: more interrupt controllers than the kernel tracks");
        }
        let Some(reg) = node.reg().and_then(|mut r| r.next()) else { continue };
        if devices_full || node.name.starts_with("cpu") {
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
            devices_full = true;
        }
    }
    *RESERVED.lock() = (dtb, fits.then_some(cache));

    let kernel_start = &raw const __kernel_start as u64 - KERNEL_VIRT + KERNEL_PHYS;
    let kernel_end = &raw const __kernel_end as u64 - KERNEL_VIRT + KERNEL_PHYS;
    let ram_start = boot.memory.iter().map(|r| r.start).min().unwrap_or(kernel_start);
    let dtb_end = dtb + fdt.total_size() as u64;
    // The firmware below the kernel, the kernel image, the device tree itself, the boot image;
    // the device tree's own reservations come from `for_each_reserved`.
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
    boot
}

/// Adds the RAM region `r` of a memory node to `boot`, less what lies beyond the direct map
/// (left out with a warning).
/// The ECAM window and bus range of a `pci-host-ecam-generic` node (the `bus-range` property
/// defaults to every bus the window covers).
fn pci_host(node: &FdtNode<'_, '_>) -> Option<PciHost> {
    let reg = node.reg()?.next()?;
    let start = reg.starting_address as u64;
    let end = start + reg.size? as u64;
    let buses = ((end - start) >> 20).clamp(1, 256) as u32;
    let (first, last) = match node.property("bus-range").map(|p| p.value) {
        Some([a0, a1, a2, a3, b0, b1, b2, b3]) => {
            (u32::from_be_bytes([*a0, *a1, *a2, *a3]), u32::from_be_bytes([*b0, *b1, *b2, *b3]))
        }
        _ => (0, buses - 1),
    };
    let last = last.min(buses - 1).min(255);
    Some(PciHost {
        ecam: PhysRange { start, end },
        first_bus: first.min(last) as u8,
        last_bus: last as u8,
    })
}

/// The `compatible` strings of a PLIC.
pub const PLIC_COMPATIBLE: [&str; 2] = ["sifive,plic-1.0.0", "riscv,plic0"];

/// The register window and number of sources of a PLIC node (`riscv,ndev`).
fn plic(node: &FdtNode<'_, '_>) -> Option<InterruptController> {
    let reg = node.reg()?.next()?;
    let start = reg.starting_address as u64;
    let sources = match node.property("riscv,ndev").map(|p| p.value) {
        Some(&[a, b, c, d]) => Some(u32::from_be_bytes([a, b, c, d])),
        _ => None,
    };
    Some(InterruptController {
        kind: fixed(node.compatible()?.first()),
        regs: PhysRange { start, end: start + reg.size? as u64 },
        first_input: 1,
        inputs: sources,
        id: 0,
    })
}

fn add_memory(boot: &mut BootInfo, r: fdt::standard_nodes::MemoryRegion) {
    let start = r.starting_address as u64;
    let mut end = start.saturating_add(r.size.unwrap_or(0) as u64);
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
