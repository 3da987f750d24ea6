//! The AHCI controller's registers (the HBA memory registers behind ABAR, BAR 5): the generic
//! host control block (CAP, GHC, IS, PI) at the start of the window, then one block of
//! registers per port at `0x100 + 0x80 * port` (command list and received-FIS bases, interrupt
//! status and enable, command and status, task file, signature, SATA status, control and error,
//! active and issued commands).
//!
//! [`Hba`] reads and writes them with volatile accesses of 32 bits, the only width AHCI
//! defines; the constants name the registers' offsets and the bits the driver uses. Nothing
//! here knows about commands: that is [`crate::port`].

/// Offsets of the generic host control registers.
pub mod host {
    /// Host capabilities.
    pub const CAP: usize = 0x00;
    /// Global host control.
    pub const GHC: usize = 0x04;
    /// Interrupt status: one bit per port with an enabled interrupt pending (write 1 to clear).
    pub const IS: usize = 0x08;
    /// Ports implemented: one bit per port.
    pub const PI: usize = 0x0c;
}

/// Bits of CAP.
pub mod cap {
    /// Supports native command queuing.
    pub const SNCQ: u32 = 1 << 30;
    /// Supports 64-bit addressing.
    pub const S64A: u32 = 1 << 31;

    /// The number of command slots per port (CAP.NCS + 1).
    pub fn slots(cap: u32) -> usize {
        ((cap >> 8) & 0x1f) as usize + 1
    }
}

/// Bits of GHC.
pub mod ghc {
    /// HBA reset: set to reset the controller; reads 1 until the reset is done.
    pub const HR: u32 = 1 << 0;
    /// Interrupt enable: the controller raises its interrupt when IS is not zero.
    pub const IE: u32 = 1 << 1;
    /// AHCI enable: the controller speaks AHCI only (no legacy IDE registers).
    pub const AE: u32 = 1 << 31;
}

/// Offsets of a port's registers, from the port's block.
pub mod port {
    /// Command list base address (1 KiB aligned), low and high words.
    pub const CLB: usize = 0x00;
    /// High word of CLB.
    pub const CLBU: usize = 0x04;
    /// Received-FIS base address (256 bytes aligned), low and high words.
    pub const FB: usize = 0x08;
    /// High word of FB.
    pub const FBU: usize = 0x0c;
    /// Interrupt status (write 1 to clear).
    pub const IS: usize = 0x10;
    /// Interrupt enable.
    pub const IE: usize = 0x14;
    /// Command and status.
    pub const CMD: usize = 0x18;
    /// Task file data: the device's status (bits 7:0) and error (bits 15:8) registers.
    pub const TFD: usize = 0x20;
    /// Signature of the attached device.
    pub const SIG: usize = 0x24;
    /// SATA status (SStatus).
    pub const SSTS: usize = 0x28;
    /// SATA control (SControl).
    pub const SCTL: usize = 0x2c;
    /// SATA error (SError, write 1 to clear).
    pub const SERR: usize = 0x30;
    /// SATA active: the native-queued commands outstanding, one bit per slot (tag).
    pub const SACT: usize = 0x34;
    /// Command issue: the commands issued and not yet done, one bit per slot.
    pub const CI: usize = 0x38;
}

/// Bits of PxCMD.
pub mod cmd {
    /// Start: the port processes its command list.
    pub const ST: u32 = 1 << 0;
    /// Spin-up device.
    pub const SUD: u32 = 1 << 1;
    /// Power on device.
    pub const POD: u32 = 1 << 2;
    /// FIS receive enable.
    pub const FRE: u32 = 1 << 4;
    /// FIS receive running.
    pub const FR: u32 = 1 << 14;
    /// Command list running.
    pub const CR: u32 = 1 << 15;
}

/// Bits of PxIS and PxIE.
pub mod irq {
    /// A device-to-host register FIS arrived with its interrupt bit (a non-queued command
    /// done).
    pub const DHRS: u32 = 1 << 0;
    /// A set device bits FIS arrived with its interrupt bit (queued commands done).
    pub const SDBS: u32 = 1 << 3;
    /// An unknown FIS arrived.
    pub const UFS: u32 = 1 << 4;
    /// Overflow: the device sent more data than the command's buffers hold.
    pub const OFS: u32 = 1 << 24;
    /// Interface non-fatal error.
    pub const INFS: u32 = 1 << 26;
    /// Interface fatal error.
    pub const IFS: u32 = 1 << 27;
    /// Host bus data error.
    pub const HBDS: u32 = 1 << 28;
    /// Host bus fatal error.
    pub const HBFS: u32 = 1 << 29;
    /// Task file error: the device reported an error (TFD.ERR).
    pub const TFES: u32 = 1 << 30;
    /// The errors: any of them fails the commands at the port and makes the driver recover it.
    pub const ERRORS: u32 = OFS | INFS | IFS | HBDS | HBFS | TFES;
    /// What the driver enables: commands done, unknown FISes, and the errors.
    pub const ENABLED: u32 = DHRS | SDBS | UFS | ERRORS;
}

/// Bits of PxTFD's status byte.
pub mod tfd {
    /// Error.
    pub const ERR: u32 = 1 << 0;
    /// Data request.
    pub const DRQ: u32 = 1 << 3;
    /// Busy.
    pub const BSY: u32 = 1 << 7;
}

/// PxSCTL with transitions to the partial and slumber power states disabled (IPM = 3) and no
/// interface action requested (DET = 0).
pub const SCTL_NO_POWER_SAVING: u32 = 0x300;

/// PxSCTL.DET asking for a link reset (COMRESET) while it is held.
pub const SCTL_DET_RESET: u32 = 1;

/// The device detection field of PxSSTS: a device is present and communication established.
pub const SSTS_DET_PRESENT: u32 = 3;

/// The most ports a controller has.
pub const MAX_PORTS: usize = 32;

/// The controller's register window, mapped uncached into the domain.
#[derive(Clone, Copy, Debug)]
pub struct Hba {
    base: usize,
    /// The ports whose register blocks lie in the window are below this.
    ports: usize,
}

impl Hba {
    /// The controller whose ABAR (BAR 5) the kernel mapped in `slot`, if it did and the
    /// window holds at least the generic registers and port 0's block.
    pub fn of(slot: &abi::DeviceSlot) -> Option<Hba> {
        let w = slot.windows.iter().find(|w| w.base != 0 && w.index == 5)?;
        let ports = (w.len.saturating_sub(0x100) / 0x80).min(MAX_PORTS as u64) as usize;
        (ports > 0).then_some(Hba { base: w.base as usize, ports })
    }

    /// Reads the generic register at `offset` (one of [`host`]).
    pub fn read(&self, offset: usize) -> u32 {
        assert!(offset < 0x100 && offset.is_multiple_of(4));
        // SAFETY: `base` is the controller's register window the kernel mapped uncached into
        // this domain for its life (checked in `of` to hold the generic block); `offset` is a
        // word-aligned register of that block (asserted above).
        unsafe { ((self.base + offset) as *const u32).read_volatile() }
    }

    /// Writes `value` to the generic register at `offset` (one of [`host`]).
    pub fn write(&self, offset: usize, value: u32) {
        assert!(offset < 0x100 && offset.is_multiple_of(4));
        // SAFETY: as in `read`; writing the controller's registers is what the domain is
        // granted the window for, and touches no memory of the domain.
        unsafe { ((self.base + offset) as *mut u32).write_volatile(value) }
    }

    /// Reads register `offset` (one of [`port`]) of port `n`.
    pub fn port_read(&self, n: usize, offset: usize) -> u32 {
        assert!(n < self.ports && offset < 0x80 && offset.is_multiple_of(4));
        // SAFETY: the port's block lies in the mapped window (`n` is below `ports`, asserted
        // above); `offset` is a word-aligned register of the block.
        unsafe { ((self.base + 0x100 + 0x80 * n + offset) as *const u32).read_volatile() }
    }

    /// Writes `value` to register `offset` (one of [`port`]) of port `n`.
    pub fn port_write(&self, n: usize, offset: usize, value: u32) {
        assert!(n < self.ports && offset < 0x80 && offset.is_multiple_of(4));
        // SAFETY: as in `port_read`; the write reaches only the controller.
        unsafe { ((self.base + 0x100 + 0x80 * n + offset) as *mut u32).write_volatile(value) }
    }
}
