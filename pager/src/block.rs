//! The disk as the pager's disk managers see it, [`SyncDisk`]: synchronous, whole sectors, one
//! call per contiguous run. It is not a block device in the driver's sense (that is
//! `blk_interface::BlockDevice`, with requests in flight completed in any order): it is what a
//! client of a block driver makes of one. In a domain `blk_client`'s `StreamDisk` implements
//! it over the domain's block session (the domain's own USD stream); on the host
//! [`MemBlockDevice`] does, counting every transfer and failing on request: every transfer, or
//! those of one kind touching a range of sectors, always or a given number of times
//! ([`Injected`]).

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// Why the device did not do a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceError {
    /// The range lies outside the device or is not a whole number of sectors.
    OutOfRange,
    /// The device failed the transfer.
    Io,
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceError::OutOfRange => "transfer outside the device or not whole sectors",
            DeviceError::Io => "I/O error",
        })
    }
}

/// A synchronous disk: reads and writes runs of whole sectors, each call returning when done.
pub trait SyncDisk {
    /// Bytes per sector (a power of two dividing the page size).
    fn sector_size(&self) -> usize;

    /// Capacity in sectors.
    fn capacity(&self) -> u64;

    /// Reads `buf.len()` bytes (whole sectors) starting at sector `sector`.
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), DeviceError>;

    /// Writes `data` (whole sectors) starting at sector `sector`.
    fn write(&mut self, sector: u64, data: &[u8]) -> Result<(), DeviceError>;

    /// Waits `ns` nanoseconds of the domain's own clock before a failed transfer is retried
    /// (in a domain, the faulting thread sleeps while the domain's other threads run). The
    /// default returns at once.
    fn wait(&mut self, ns: u64) {
        let _ = ns;
    }
}

/// Which transfers an [`Injected`] fault fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Reads.
    Read,
    /// Writes.
    Write,
}

/// A fault injected into a [`MemBlockDevice`]: transfers of kind `op` that touch a sector of
/// `sectors` fail with [`DeviceError::Io`], the first `times` of them (`None`: all of them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Injected {
    /// The kind of transfer failed.
    pub op: Op,
    /// The sectors whose transfers fail.
    pub sectors: core::ops::Range<u64>,
    /// How many more transfers fail (`None`: every one).
    pub times: Option<u32>,
}

/// Transfers a [`MemBlockDevice`] has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounts {
    /// Read calls that succeeded.
    pub reads: u64,
    /// Write calls that succeeded.
    pub writes: u64,
    /// Sectors read.
    pub sectors_read: u64,
    /// Sectors written.
    pub sectors_written: u64,
    /// Transfers failed by an injected fault or a switch.
    pub failed: u64,
    /// Nanoseconds waited before retries ([`SyncDisk::wait`]).
    pub waited_ns: u64,
    /// Waits asked for.
    pub waits: u64,
}

/// An in-memory [`SyncDisk`] for tests: a `Vec` of sectors, with counts of the transfers
/// and switches that make reads or writes fail.
#[derive(Clone, Debug)]
pub struct MemBlockDevice {
    sector_size: usize,
    bytes: Vec<u8>,
    counts: DeviceCounts,
    fail_reads: bool,
    fail_writes: bool,
    injected: Vec<Injected>,
}

impl MemBlockDevice {
    /// A zeroed device of `sectors` sectors of `sector_size` bytes.
    pub fn new(sector_size: usize, sectors: u64) -> MemBlockDevice {
        MemBlockDevice {
            sector_size,
            bytes: vec![0; sector_size * sectors as usize],
            counts: DeviceCounts::default(),
            fail_reads: false,
            fail_writes: false,
            injected: Vec::new(),
        }
    }

    /// A device of 512-byte sectors holding `pages` pages.
    pub fn with_pages(pages: usize) -> MemBlockDevice {
        MemBlockDevice::new(512, (pages * crate::PAGE_SIZE / 512) as u64)
    }

    /// The transfers done so far.
    pub fn counts(&self) -> DeviceCounts {
        self.counts
    }

    /// Makes every later read fail with [`DeviceError::Io`] (or succeed again).
    pub fn fail_reads(&mut self, fail: bool) {
        self.fail_reads = fail;
    }

    /// Makes every later write fail with [`DeviceError::Io`] (or succeed again).
    pub fn fail_writes(&mut self, fail: bool) {
        self.fail_writes = fail;
    }

    /// Fails transfers as `fault` says, from now on (added to those injected before).
    pub fn inject(&mut self, fault: Injected) {
        self.injected.push(fault);
    }

    /// The contents of sectors `sectors`, as stored (tests look at what reached the disk).
    pub fn sectors(&self, sectors: core::ops::Range<u64>) -> &[u8] {
        let ss = self.sector_size as u64;
        &self.bytes[(sectors.start * ss) as usize..(sectors.end * ss) as usize]
    }

    /// Whether a transfer of kind `op` of `len` bytes at `sector` fails, counting it against
    /// the first injected fault it meets.
    fn fails(&mut self, op: Op, sector: u64, len: usize) -> bool {
        let end = sector + (len / self.sector_size) as u64;
        let switch = match op {
            Op::Read => self.fail_reads,
            Op::Write => self.fail_writes,
        };
        let hit = self.injected.iter_mut().find(|f| {
            f.op == op
                && f.sectors.start < end
                && sector < f.sectors.end
                && f.times.is_none_or(|t| t > 0)
        });
        let fails = match hit {
            Some(f) => {
                if let Some(t) = &mut f.times {
                    *t -= 1;
                }
                true
            }
            None => switch,
        };
        self.counts.failed += u64::from(fails);
        fails
    }

    /// The byte range of `len` bytes at `sector`, if it is whole sectors inside the device.
    fn range(&self, sector: u64, len: usize) -> Result<core::ops::Range<usize>, DeviceError> {
        let start = (sector as usize).checked_mul(self.sector_size);
        let end = start.and_then(|s| s.checked_add(len));
        match (start, end) {
            (Some(s), Some(e)) if e <= self.bytes.len() && len.is_multiple_of(self.sector_size) => {
                Ok(s..e)
            }
            _ => Err(DeviceError::OutOfRange),
        }
    }
}

impl SyncDisk for MemBlockDevice {
    fn sector_size(&self) -> usize {
        self.sector_size
    }

    fn capacity(&self) -> u64 {
        (self.bytes.len() / self.sector_size) as u64
    }

    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let range = self.range(sector, buf.len())?;
        if self.fails(Op::Read, sector, buf.len()) {
            return Err(DeviceError::Io);
        }
        buf.copy_from_slice(&self.bytes[range]);
        self.counts.reads += 1;
        self.counts.sectors_read += (buf.len() / self.sector_size) as u64;
        Ok(())
    }

    fn write(&mut self, sector: u64, data: &[u8]) -> Result<(), DeviceError> {
        let range = self.range(sector, data.len())?;
        if self.fails(Op::Write, sector, data.len()) {
            return Err(DeviceError::Io);
        }
        self.bytes[range].copy_from_slice(data);
        self.counts.writes += 1;
        self.counts.sectors_written += (data.len() / self.sector_size) as u64;
        Ok(())
    }

    fn wait(&mut self, ns: u64) {
        self.counts.waits += 1;
        self.counts.waited_ns += ns;
    }
}
