//! The PCI transport (q35's virtio-blk-pci and virtio-net-pci) over what the kernel gave the driver domain: the
//! function's configuration space mapped read-only, its register BARs mapped uncached, and
//! its MSI-X table kept by the kernel, which routed every entry to the interrupt's endpoint.
//!
//! `virtio-drivers` reads the configuration space through [`Snapshot`], which turns the
//! writes it would make (sizing BARs, switching decoding off and on) into reads of what the
//! control block already says; and its transport is wrapped in [`MsixTransport`], which points
//! each queue at MSI-X entry 0 before the queue is enabled (with MSI-X on, a virtio device
//! signals nothing for a queue without a vector).

use virtio_drivers::transport::pci::PciTransport;
use virtio_drivers::transport::pci::bus::{ConfigurationAccess, DeviceFunction, PciRoot};
use virtio_drivers::transport::{DeviceStatus, DeviceType, InterruptStatus, Transport};
use virtio_drivers::{PhysAddr, Result};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// The first BAR register's offset in configuration space.
const BAR0: u8 = 0x10;
/// Vendor-specific capability id, and virtio's common configuration structure type.
const CAP_VENDOR: u8 = 0x09;
const COMMON_CFG: u8 = 1;
/// Offsets in the common configuration structure.
const MSIX_CONFIG: usize = 0x10;
const QUEUE_SELECT: usize = 0x16;
const QUEUE_MSIX_VECTOR: usize = 0x1a;
/// "No vector".
const NO_VECTOR: u16 = 0xffff;

/// The read-only configuration space, with BAR sizing answered from the control block.
#[derive(Clone, Copy)]
pub struct Snapshot {
    config: usize,
    windows: [abi::DeviceWindow; abi::MAX_WINDOWS],
    /// Which BAR registers were last written all ones (being sized).
    sizing: u8,
}

impl Snapshot {
    /// Reads the configuration word at `offset`.
    fn word(&self, offset: u8) -> u32 {
        let at = (self.config + usize::from(offset & !3)) as *const u32;
        // SAFETY: the kernel mapped the function's 4 KiB of configuration space read-only at
        // `config` for this domain's life; `offset` is below 256 and word-aligned.
        unsafe { at.read_volatile() }
    }

    /// The size of BAR `bar` (0 if the kernel did not map it).
    fn bar_size(&self, bar: u8) -> u64 {
        self.windows.iter().find(|w| w.base != 0 && w.index == u64::from(bar)).map_or(0, |w| w.len)
    }
}

impl ConfigurationAccess for Snapshot {
    fn read_word(&self, _df: DeviceFunction, offset: u8) -> u32 {
        let value = self.word(offset);
        let reg = offset.wrapping_sub(BAR0) / 4;
        if (BAR0..BAR0 + 24).contains(&offset) && self.sizing & 1 << reg != 0 {
            // The lower word of a BAR being sized answers its size mask with its type bits; the
            // upper word of a 64-bit BAR, the mask's upper half.
            let upper = reg > 0 && self.word(BAR0 + 4 * (reg - 1)) & 0b110 == 0b100;
            let lower_of = if upper { reg - 1 } else { reg };
            let mask = !(self.bar_size(lower_of).max(16) - 1);
            return if upper { (mask >> 32) as u32 } else { mask as u32 | (value & 0xf) };
        }
        value
    }

    fn write_word(&mut self, _df: DeviceFunction, offset: u8, data: u32) {
        if (BAR0..BAR0 + 24).contains(&offset) {
            let bit = 1 << ((offset - BAR0) / 4);
            if data == u32::MAX { self.sizing |= bit } else { self.sizing &= !bit }
        }
        // Anything else (the command register) is the kernel's: dropped.
    }

    unsafe fn unsafe_clone(&self) -> Self {
        *self
    }
}

/// The transport of the PCI function in `slot`, its queues pointed at MSI-X entry 0.
pub fn transport(slot: &abi::DeviceSlot) -> Option<MsixTransport> {
    let snapshot = Snapshot { config: slot.config as usize, windows: slot.windows, sizing: 0 };
    let df = DeviceFunction {
        bus: (slot.pci_location >> 16) as u8,
        device: (slot.pci_location >> 8) as u8,
        function: slot.pci_location as u8,
    };
    let common = common_cfg(&snapshot, slot)?;
    let mut root = PciRoot::new(snapshot);
    let inner = PciTransport::new::<crate::dma::TesseraHal, _>(&mut root, df).ok()?;
    let mut t = MsixTransport { inner, common, msix: slot.interrupt == abi::interrupt_kind::MSIX };
    t.write16(MSIX_CONFIG, NO_VECTOR);
    Some(t)
}

/// The address of the function's virtio common configuration in its mapped BAR.
fn common_cfg(s: &Snapshot, slot: &abi::DeviceSlot) -> Option<usize> {
    let mut at = (s.word(0x34) & 0xfc) as u8;
    while at != 0 {
        let head = s.word(at);
        if head as u8 == CAP_VENDOR && (head >> 24) as u8 == COMMON_CFG {
            let bar = s.word(at + 4) as u8;
            let offset = s.word(at + 8) as u64;
            let w = slot.windows.iter().find(|w| w.base != 0 && w.index == u64::from(bar))?;
            return Some((w.base + offset) as usize);
        }
        at = (head >> 8) as u8 & 0xfc;
    }
    None
}

/// [`PciTransport`] that gives each queue MSI-X entry 0 before enabling it.
pub struct MsixTransport {
    inner: PciTransport,
    common: usize,
    msix: bool,
}

impl MsixTransport {
    fn write16(&mut self, offset: usize, value: u16) {
        // SAFETY: `common` is the device's common configuration structure in a BAR the kernel
        // mapped for this domain; `offset` is one of its 16-bit registers.
        unsafe { ((self.common + offset) as *mut u16).write_volatile(value) }
    }
}

impl Transport for MsixTransport {
    fn device_type(&self) -> DeviceType {
        self.inner.device_type()
    }
    fn read_device_features(&mut self) -> u64 {
        self.inner.read_device_features()
    }
    fn write_driver_features(&mut self, driver_features: u64) {
        self.inner.write_driver_features(driver_features)
    }
    fn max_queue_size(&mut self, queue: u16) -> u32 {
        self.inner.max_queue_size(queue)
    }
    fn notify(&mut self, queue: u16) {
        self.inner.notify(queue)
    }
    fn get_status(&self) -> DeviceStatus {
        self.inner.get_status()
    }
    fn set_status(&mut self, status: DeviceStatus) {
        self.inner.set_status(status)
    }
    fn set_guest_page_size(&mut self, guest_page_size: u32) {
        self.inner.set_guest_page_size(guest_page_size)
    }
    fn requires_legacy_layout(&self) -> bool {
        self.inner.requires_legacy_layout()
    }
    fn queue_set(
        &mut self,
        queue: u16,
        size: u32,
        descriptors: PhysAddr,
        driver_area: PhysAddr,
        device_area: PhysAddr,
    ) {
        if self.msix {
            self.write16(QUEUE_SELECT, queue);
            self.write16(QUEUE_MSIX_VECTOR, 0);
        }
        self.inner.queue_set(queue, size, descriptors, driver_area, device_area)
    }
    fn queue_unset(&mut self, queue: u16) {
        self.inner.queue_unset(queue)
    }
    fn queue_used(&mut self, queue: u16) -> bool {
        self.inner.queue_used(queue)
    }
    fn ack_interrupt(&mut self) -> InterruptStatus {
        self.inner.ack_interrupt()
    }
    fn read_config_generation(&self) -> u32 {
        self.inner.read_config_generation()
    }
    fn read_config_space<T: FromBytes + IntoBytes>(&self, offset: usize) -> Result<T> {
        self.inner.read_config_space(offset)
    }
    fn write_config_space<T: IntoBytes + Immutable>(
        &mut self,
        offset: usize,
        value: T,
    ) -> Result<()> {
        self.inner.write_config_space(offset, value)
    }
}
