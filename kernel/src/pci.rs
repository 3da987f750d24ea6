//! PCI: the devices behind the host bridge, found through its ECAM window.
//!
//! At boot the kernel walks the configuration space from the host bridge's first bus, into the
//! bus behind every PCI-to-PCI bridge it meets, and lists each function in the boot log
//! (`pci BB:DD.F VVVV:DDDD class CC.SS.PP (what it is)`), as the device tree's devices are
//! listed. The reading itself is `virtio-drivers`' `PciRoot` over the ECAM window (the same code
//! on both architectures; the window comes from [`PciHost`]). Nothing is configured yet: BARs,
//! interrupts (INTx, MSI) and handing a device to a driver domain come with user-level drivers.

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
