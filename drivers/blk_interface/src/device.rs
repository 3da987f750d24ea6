//! The block-device trait that the driver side (`blk_server`) drives: virtio-blk and AHCI
//! implement it in their driver domains, `blk_workloads::MemDisk` on the host.
//!
//! A device takes several requests at once ([`BlockDevice::max_in_flight`]), names each by a
//! [`Tag`] (its slot), and completes them in any order; the driver polls
//! [`BlockDevice::complete`] after the device's interrupt. Nothing blocks.

use core::fmt;

/// What the device is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceOp {
    /// Device to memory.
    Read,
    /// Memory to device.
    Write,
    /// Make every write completed before this request was submitted durable. The buffer is
    /// empty.
    Flush,
}

/// A buffer in the driver's DMA memory, by address only: the device reaches it at `phys`
/// (the device-visible, physical address), the driver at `virt`. Both name the same `len`
/// bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Buffer {
    /// The device-visible (physical) address.
    pub phys: u64,
    /// The driver's (virtual) address.
    pub virt: u64,
    /// Length in bytes, a multiple of the sector size (0 for a flush).
    pub len: u32,
}

/// One request to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceRequest {
    /// What to do.
    pub op: DeviceOp,
    /// The first sector (0 for a flush).
    pub sector: u64,
    /// Where the data is.
    pub buffer: Buffer,
}

/// The device's name for a request in flight: its slot, below
/// [`BlockDevice::max_in_flight`]. A tag is reused once its request has completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(pub u16);

/// Why the device did not do a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceError {
    /// No free slot: submit again after a completion.
    Full,
    /// The device rejected the request (bad range or buffer).
    Invalid,
    /// The device failed the transfer (media or transport error).
    Io,
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceError::Full => "device full",
            DeviceError::Invalid => "request rejected by the device",
            DeviceError::Io => "device I/O error",
        })
    }
}

/// A block device with several requests in flight.
pub trait BlockDevice {
    /// Bytes per sector (a power of two, at least 512).
    fn sector_size(&self) -> u32;

    /// Capacity in sectors.
    fn capacity(&self) -> u64;

    /// How many requests the device holds at once; tags are below this.
    fn max_in_flight(&self) -> usize;

    /// Starts a request and returns its tag, or [`DeviceError::Full`] when every slot is taken
    /// (or another error if the device refuses it outright). Never blocks.
    fn submit(&mut self, req: DeviceRequest) -> Result<Tag, DeviceError>;

    /// One completed request, with its outcome, or `None` if none has completed since the
    /// last call. Polled after the device's interrupt; never blocks.
    fn complete(&mut self) -> Option<(Tag, Result<(), DeviceError>)>;

    /// The device's interrupt arrived: a device that must read or clear an interrupt status
    /// before it may interrupt again does so here, before its completions are taken.
    fn interrupted(&mut self) {}
}
