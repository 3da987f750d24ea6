//! PCI: the devices behind the host bridge, found through its ECAM window.
//!
//! At boot the kernel walks the configuration space from the host bridge's first bus, into the
//! bus behind every PCI-to-PCI bridge it meets, and lists each function in the boot log
//! (`pci BB:DD.F VVVV:DDDD class CC.SS.PP (what it is)`), as the device tree's devices are
//! listed. The reading itself is `virtio-drivers`' `PciRoot` over the ECAM window (the same code
//! on both architectures; the window comes from [`PciHost`]).
//!
//! A function granted to a driver domain is configured for it ([`windows`], [`route_msi`]):
//! its memory BARs as the firmware assigned them (RISC-V `virt`'s firmware assigns none, so
//! PCI devices there are not given to drivers yet: `virt`'s disks are virtio-mmio), memory
//! decoding and bus mastering on, INTx off, and MSI-X (every table entry) or MSI sending the
//! message of the device line it is bound to. [`quiesce`] undoes it when the driver dies.

use frame_allocator::FRAME_SIZE;
use virtio_drivers::transport::pci::bus::{
    ConfigurationAccess, DeviceFunction, HeaderType, PciRoot,
};

use crate::arch;
use crate::boot_info::PciHost;

/// Deepest nesting of PCI-to-PCI bridges the walk follows.
const MAX_DEPTH: usize = 8;

/// A function found on the bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function {
    /// Where it is.
    pub bus: u8,
    /// Its device number.
    pub device: u8,
    /// Its function number.
    pub function: u8,
    /// Vendor and device identifiers.
    pub id: (u16, u16),
    /// Class, subclass and programming interface.
    pub class: (u8, u8, u8),
}

/// Configuration space through an ECAM window mapped at `base` (bus 0's first register).
#[derive(Clone, Copy)]
struct Ecam {
    base: *mut u32,
}

impl Ecam {
    fn register(&self, df: DeviceFunction, offset: u8) -> *mut u32 {
        let bdf =
            (usize::from(df.bus) << 8) | (usize::from(df.device) << 3) | usize::from(df.function);
        self.base.wrapping_byte_add((bdf << 12) | usize::from(offset & !3))
    }
}

impl ConfigurationAccess for Ecam {
    fn read_word(&self, df: DeviceFunction, offset: u8) -> u32 {
        // SAFETY: `walk` made `base` point at a mapped ECAM window covering every bus it visits;
        // the register is word-aligned and inside the function's 4 KiB.
        unsafe { self.register(df, offset).read_volatile() }
    }

    fn write_word(&mut self, df: DeviceFunction, offset: u8, data: u32) {
        // SAFETY: as for `read_word`.
        unsafe { self.register(df, offset).write_volatile(data) }
    }

    unsafe fn unsafe_clone(&self) -> Self {
        *self
    }
}

/// The walk's state: the root, a writer for bridges' bus numbers, the next free bus number.
struct Walk<'f> {
    root: PciRoot<Ecam>,
    writer: Ecam,
    last_bus: u8,
    next_bus: u8,
    count: usize,
    f: &'f mut dyn FnMut(Function),
}

impl Walk<'_> {
    /// Lists bus `bus` and, depth first, the buses behind its bridges: a bridge the firmware
    /// left without bus numbers (RISC-V `virt` firmware assigns none) gets the next free one.
    fn bus(&mut self, bus: u8, depth: usize) {
        for (df, info) in self.root.enumerate_bus(bus) {
            self.count += 1;
            (self.f)(Function {
                bus: df.bus,
                device: df.device,
                function: df.function,
                id: (info.vendor_id, info.device_id),
                class: (info.class, info.subclass, info.prog_if),
            });
            if info.header_type != HeaderType::PciPciBridge {
                continue;
            }
            if depth == MAX_DEPTH || self.next_bus >= self.last_bus {
                defmt::warn!(
                    "pci: the bus behind bridge {=u8:02x}:{=u8:02x}.{=u8} is not listed",
                    df.bus,
                    df.device,
                    df.function
                );
                continue;
            }
            // Bus numbers register: primary, secondary, subordinate, secondary latency timer.
            let numbers = self.writer.read_word(df, BUS_NUMBERS);
            let secondary = (numbers >> 8) as u8;
            if secondary > self.last_bus {
                defmt::warn!(
                    "pci: bridge {=u8:02x}:{=u8:02x}.{=u8} leads to bus {=u8}, outside the window",
                    df.bus,
                    df.device,
                    df.function,
                    secondary
                );
                continue;
            }
            if secondary > bus {
                self.next_bus = self.next_bus.max((numbers >> 16) as u8);
                self.bus(secondary, depth + 1);
                continue;
            }
            self.next_bus += 1;
            let secondary = self.next_bus;
            let keep = numbers & 0xff00_0000;
            let set =
                |sub: u8| keep | u32::from(sub) << 16 | u32::from(secondary) << 8 | u32::from(bus);
            self.writer.write_word(df, BUS_NUMBERS, set(self.last_bus));
            self.bus(secondary, depth + 1);
            self.writer.write_word(df, BUS_NUMBERS, set(self.next_bus));
        }
    }
}

/// A PCI-to-PCI bridge's bus numbers register.
const BUS_NUMBERS: u8 = 0x18;

/// Calls `f` with every function behind `host`, giving bridges that have none their bus
/// numbers; the number of functions.
pub fn walk(host: &PciHost, f: &mut dyn FnMut(Function)) -> usize {
    if host.ecam.len() < (u64::from(host.last_bus) + 1) << 20
        || !host.ecam.start.is_multiple_of(FRAME_SIZE)
    {
        defmt::warn!(
            "pci: the ECAM window {=u64:#x}..{=u64:#x} does not cover its buses",
            host.ecam.start,
            host.ecam.end
        );
        return 0;
    }
    // The window is the host bridge's configuration space as the firmware describes it,
    // mapped by the kernel's direct map and referenced by nothing else.
    let ecam = Ecam { base: arch::phys_to_virt(host.ecam.start) as *mut u32 };
    let mut walk = Walk {
        root: PciRoot::new(ecam),
        writer: ecam,
        last_bus: host.last_bus,
        next_bus: host.first_bus,
        count: 0,
        f,
    };
    walk.bus(host.first_bus, 0);
    walk.count
}

/// Lists the functions behind `host` in the boot log.
pub fn report(host: &PciHost) {
    defmt::info!(
        "pci: ECAM {=u64:#x}..{=u64:#x}, buses {=u8}..={=u8}",
        host.ecam.start,
        host.ecam.end,
        host.first_bus,
        host.last_bus
    );
    let count = walk(host, &mut |f| {
        defmt::info!(
            "  pci {=u8:02x}:{=u8:02x}.{=u8} {=u16:04x}:{=u16:04x} class {=u8:02x}.{=u8:02x}.{=u8:02x} ({=str})",
            f.bus,
            f.device,
            f.function,
            f.id.0,
            f.id.1,
            f.class.0,
            f.class.1,
            f.class.2,
            class_name(f.class.0, f.class.1)
        )
    });
    defmt::info!("pci: {=usize} function(s)", count);
}

/// What a class and subclass are, in words.
pub fn class_name(class: u8, subclass: u8) -> &'static str {
    match (class, subclass) {
        (0x01, 0x00) => "SCSI storage",
        (0x01, 0x01) => "IDE storage",
        (0x01, 0x06) => "SATA storage",
        (0x01, 0x08) => "NVMe storage",
        (0x01, _) => "storage",
        (0x02, _) => "network",
        (0x03, _) => "display",
        (0x06, 0x00) => "host bridge",
        (0x06, 0x01) => "ISA bridge",
        (0x06, 0x04) => "PCI bridge",
        (0x06, _) => "bridge",
        (0x0c, 0x05) => "SMBus",
        (0x0c, _) => "serial bus",
        (0x00, 0xff) | (0xff, _) => "unclassified",
        (0x00, _) => "legacy device",
        _ => "other",
    }
}

/// A function's memory-mapped register window (one memory BAR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The BAR's index.
    pub bar: u8,
    /// Its physical addresses.
    pub regs: crate::boot_info::PhysRange,
}

/// How a function's interrupt was routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, defmt::Format)]
pub enum Routed {
    /// Every MSI-X table entry sends the message (its table stays the kernel's: the BAR that
    /// holds it is not given to the driver).
    MsiX {
        /// The table's entries.
        vectors: u16,
        /// The BAR that holds the table.
        bar: u8,
    },
    /// MSI sends the message.
    Msi,
}

/// Capability ids.
const CAP_MSI: u8 = 0x05;
const CAP_MSIX: u8 = 0x11;

/// The configuration space of `host`, for configuring granted functions.
fn root(host: &PciHost) -> PciRoot<Ecam> {
    PciRoot::new(Ecam { base: arch::phys_to_virt(host.ecam.start) as *mut u32 })
}

fn df(f: &Function) -> DeviceFunction {
    DeviceFunction { bus: f.bus, device: f.device, function: f.function }
}

/// The memory BARs of function `f` that the firmware assigned (an address of 0 is
/// unassigned), and turns on its memory decoding and bus mastering (so it can do DMA).
pub fn windows(host: &PciHost, f: &Function) -> heapless::Vec<Window, 6> {
    use virtio_drivers::transport::pci::bus::{BarInfo, Command};
    let mut root = root(host);
    let mut out = heapless::Vec::new();
    if let Ok(bars) = root.bars(df(f)) {
        for (i, bar) in bars.iter().enumerate() {
            if let Some(BarInfo::Memory { address, size, .. }) = bar
                && *address != 0
                && *size != 0
            {
                let regs = crate::boot_info::PhysRange { start: *address, end: address + size };
                let _ = out.push(Window { bar: i as u8, regs });
            }
        }
    }
    let (_, command) = root.get_status_command(df(f));
    root.set_command(df(f), command | Command::MEMORY_SPACE | Command::BUS_MASTER);
    out
}

/// Routes function `f`'s interrupt to the message `(address, data)`: MSI-X if it has it (every
/// table entry sends the message, unmasked), else MSI (one vector); `None` if it has neither.
/// Its legacy INTx is disabled.
pub fn route_msi(host: &PciHost, f: &Function, (address, data): (u64, u32)) -> Option<Routed> {
    use virtio_drivers::transport::pci::bus::Command;
    let mut root = root(host);
    let d = df(f);
    let caps: heapless::Vec<(u8, u8), 16> =
        root.capabilities(d).map(|c| (c.id, c.offset)).take(16).collect();
    let access = Ecam { base: arch::phys_to_virt(host.ecam.start) as *mut u32 };
    let mut writer = access;
    let (_, command) = root.get_status_command(d);
    root.set_command(d, command | Command::INTERRUPT_DISABLE);
    if let Some(&(_, at)) = caps.iter().find(|(id, _)| *id == CAP_MSIX) {
        let control = (access.read_word(d, at) >> 16) as u16;
        let vectors = (control & 0x7ff) + 1;
        let table = access.read_word(d, at + 4);
        let (bar, offset) = ((table & 7) as u8, u64::from(table & !7));
        let windows = windows(host, f);
        let window = windows.iter().find(|w| w.bar == bar)?;
        let entries = arch::phys_to_virt(window.regs.start + offset) as *mut u32;
        for i in 0..usize::from(vectors) {
            let words = [address as u32, (address >> 32) as u32, data, 0];
            for (j, w) in words.into_iter().enumerate() {
                // SAFETY: the table lies in the function's BAR `bar` (its offset as the
                // capability gives it, `vectors` entries of four words), reached through the
                // direct map, which covers the PCI memory window below 4 GiB; writing an entry
                // only sets where the function's interrupt goes.
                unsafe { entries.add(i * 4 + j).write_volatile(w) };
            }
        }
        // Message control: enable (bit 15), function mask off (bit 14).
        let control = (control | 1 << 15) & !(1 << 14);
        let word = access.read_word(d, at) & 0xffff | u32::from(control) << 16;
        writer.write_word(d, at, word);
        return Some(Routed::MsiX { vectors, bar });
    }
    let &(_, at) = caps.iter().find(|(id, _)| *id == CAP_MSI)?;
    let control = (access.read_word(d, at) >> 16) as u16;
    let wide = control & 1 << 7 != 0;
    writer.write_word(d, at + 4, address as u32);
    let data_at = if wide {
        writer.write_word(d, at + 8, (address >> 32) as u32);
        at + 12
    } else {
        at + 8
    };
    let keep = access.read_word(d, data_at) & 0xffff_0000;
    writer.write_word(d, data_at, keep | (data & 0xffff));
    // One message (multiple-message enable 0), enabled.
    let control = (control & !(0b111 << 4)) | 1;
    let word = access.read_word(d, at) & 0xffff | u32::from(control) << 16;
    writer.write_word(d, at, word);
    Some(Routed::Msi)
}

/// Stops function `f` from interrupting and from mastering the bus (its driver domain died):
/// MSI and MSI-X off, INTx off, bus mastering off.
pub fn quiesce(host: &PciHost, f: &Function) {
    use virtio_drivers::transport::pci::bus::Command;
    let mut root = root(host);
    let d = df(f);
    let caps: heapless::Vec<(u8, u8), 16> =
        root.capabilities(d).map(|c| (c.id, c.offset)).take(16).collect();
    let access = Ecam { base: arch::phys_to_virt(host.ecam.start) as *mut u32 };
    let mut writer = access;
    for (id, at) in caps {
        let enable = match id {
            CAP_MSIX => 1 << 31,
            CAP_MSI => 1 << 16,
            _ => continue,
        };
        let word = access.read_word(d, at);
        writer.write_word(d, at, word & !enable);
    }
    let (_, command) = root.get_status_command(d);
    root.set_command(d, (command | Command::INTERRUPT_DISABLE) & !Command::BUS_MASTER);
}

/// The BAR that holds function `f`'s MSI-X table, if it has MSI-X.
pub fn msix_bar(host: &PciHost, f: &Function) -> Option<u8> {
    let root = root(host);
    let cap = root.capabilities(df(f)).find(|c| c.id == CAP_MSIX)?;
    let access = Ecam { base: arch::phys_to_virt(host.ecam.start) as *mut u32 };
    Some((access.read_word(df(f), cap.offset + 4) & 7) as u8)
}

/// Function `f`'s 4 KiB of configuration space in the ECAM window.
pub fn config_space(host: &PciHost, f: &Function) -> crate::boot_info::PhysRange {
    let bdf = u64::from(f.bus) << 8 | u64::from(f.device) << 3 | u64::from(f.function);
    let start = host.ecam.start + (bdf << 12);
    crate::boot_info::PhysRange { start, end: start + FRAME_SIZE }
}
