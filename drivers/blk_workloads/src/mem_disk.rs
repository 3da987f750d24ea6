//! An in-memory [`BlockDevice`] for host tests and benches (and later no_std + alloc apps):
//! the disk is a `Vec`, and so is the DMA memory its buffers live in ([`DmaMemory`]), which the
//! disk owns and the test reaches through [`MemDisk::memory`] and [`MemDisk::memory_mut`].
//!
//! Requests take effect when they complete, not when they are submitted, and complete in an
//! order drawn from a seeded generator: deterministic, and out of order whenever more than one
//! is in flight. Sectors can be marked bad ([`MemDisk::fail_sector`]) so that any request
//! touching them completes with [`DeviceError::Io`].

use alloc::vec;
use alloc::vec::Vec;

use blk_interface::device::{BlockDevice, Buffer, DeviceError, DeviceOp, DeviceRequest, Tag};
use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{Rng as _, SeedableRng};

/// A small deterministic generator: SplitMix64 (`rand_xoshiro`'s), whose state starts at the
/// seed, so that a seed names the same sequence on the host and in an app.
#[derive(Clone, Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::seed_from_u64(seed))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// DMA memory as a test sees it: `bytes` are at driver-virtual address `virt_base` and at
/// device-visible address `phys_base`.
#[derive(Clone, Debug)]
pub struct DmaMemory {
    virt_base: u64,
    phys_base: u64,
    bytes: Vec<u8>,
}

impl DmaMemory {
    /// `len` zero bytes at `virt_base` (driver) and `phys_base` (device).
    pub fn new(virt_base: u64, phys_base: u64, len: usize) -> DmaMemory {
        DmaMemory { virt_base, phys_base, bytes: vec![0; len] }
    }

    /// The driver-virtual address of the first byte.
    pub fn virt_base(&self) -> u64 {
        self.virt_base
    }

    /// The device-visible address of the first byte.
    pub fn phys_base(&self) -> u64 {
        self.phys_base
    }

    /// The offset of `[virt, virt + len)` in the memory, if it lies inside.
    fn offset_of(&self, virt: u64, len: u64) -> Option<usize> {
        let off = virt.checked_sub(self.virt_base)?;
        let end = off.checked_add(len)?;
        (end <= self.bytes.len() as u64).then_some(off as usize)
    }

    /// The `len` bytes at driver-virtual address `virt`, if they lie inside.
    pub fn get(&self, virt: u64, len: usize) -> Option<&[u8]> {
        let off = self.offset_of(virt, len as u64)?;
        self.bytes.get(off..off + len)
    }

    /// The `len` bytes at driver-virtual address `virt`, writable, if they lie inside.
    pub fn get_mut(&mut self, virt: u64, len: usize) -> Option<&mut [u8]> {
        let off = self.offset_of(virt, len as u64)?;
        self.bytes.get_mut(off..off + len)
    }

    /// The offset of a device buffer, if both its addresses name the same bytes inside.
    fn resolve(&self, buf: &Buffer) -> Option<usize> {
        if buf.virt == 0 {
            // A frame lent to the driver, which has no mapping of it: by its device address.
            let off = buf.phys.checked_sub(self.phys_base)?;
            return self.offset_of(self.virt_base.checked_add(off)?, u64::from(buf.len));
        }
        let off = self.offset_of(buf.virt, u64::from(buf.len))?;
        (buf.phys.checked_sub(self.phys_base) == Some(off as u64)).then_some(off)
    }
}

/// Counts of what a [`MemDisk`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemDiskStats {
    /// Reads completed (successfully or not).
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// Requests completed with an error.
    pub errors: u64,
    /// Completions that were not the oldest request in flight.
    pub out_of_order: u64,
    /// The most requests in flight at once.
    pub max_depth: usize,
}

/// An in-memory disk with seeded out-of-order completion; see the [module](self).
#[derive(Debug)]
pub struct MemDisk {
    sector_size: u32,
    data: Vec<u8>,
    memory: DmaMemory,
    /// Per tag: the request and its submission number.
    slots: Vec<Option<(DeviceRequest, u64)>>,
    submitted: u64,
    rng: Rng,
    bad: Vec<u64>,
    stats: MemDiskStats,
}

impl MemDisk {
    /// A zeroed disk of `capacity` sectors of `sector_size` bytes, holding `max_in_flight`
    /// requests at once, completing them in an order drawn from `seed`, with its buffers in
    /// `memory`.
    ///
    /// # Panics
    /// If the sector size is not a power of two, `max_in_flight` is zero or above 65536, or the
    /// disk does not fit in memory.
    pub fn new(
        sector_size: u32,
        capacity: u64,
        max_in_flight: usize,
        seed: u64,
        memory: DmaMemory,
    ) -> MemDisk {
        assert!(sector_size.is_power_of_two() && max_in_flight > 0);
        assert!(max_in_flight <= 1 << 16);
        let bytes = capacity
            .checked_mul(u64::from(sector_size))
            .and_then(|b| usize::try_from(b).ok())
            .expect("disk too large");
        MemDisk {
            sector_size,
            data: vec![0; bytes],
            memory,
            slots: vec![None; max_in_flight],
            submitted: 0,
            rng: Rng::new(seed),
            bad: Vec::new(),
            stats: MemDiskStats::default(),
        }
    }

    /// The DMA memory the buffers live in.
    pub fn memory(&self) -> &DmaMemory {
        &self.memory
    }

    /// The DMA memory, writable (a test filling a client's data area).
    pub fn memory_mut(&mut self) -> &mut DmaMemory {
        &mut self.memory
    }

    /// The disk's contents.
    pub fn contents(&self) -> &[u8] {
        &self.data
    }

    /// Makes every later request that touches `sector` complete with [`DeviceError::Io`].
    pub fn fail_sector(&mut self, sector: u64) {
        self.bad.push(sector);
    }

    /// Forgets the sectors marked bad.
    pub fn heal(&mut self) {
        self.bad.clear();
    }

    /// What the disk did so far.
    pub fn stats(&self) -> MemDiskStats {
        self.stats
    }

    /// How many requests are in flight.
    pub fn in_flight(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// Carries out `req` now.
    fn execute(&mut self, req: &DeviceRequest) -> Result<(), DeviceError> {
        let ss = u64::from(self.sector_size);
        let count = u64::from(req.buffer.len) / ss;
        if self.bad.iter().any(|&b| b >= req.sector && b - req.sector < count) {
            return Err(DeviceError::Io);
        }
        if req.op == DeviceOp::Flush {
            return Ok(());
        }
        let len = req.buffer.len as usize;
        let off = self.memory.resolve(&req.buffer).ok_or(DeviceError::Invalid)?;
        let start = req.sector.checked_mul(ss).ok_or(DeviceError::Invalid)?;
        let start = usize::try_from(start).map_err(|_| DeviceError::Invalid)?;
        let end = start.checked_add(len).ok_or(DeviceError::Invalid)?;
        let disk = self.data.get_mut(start..end).ok_or(DeviceError::Invalid)?;
        let mem = self.memory.bytes.get_mut(off..off + len).ok_or(DeviceError::Invalid)?;
        match req.op {
            DeviceOp::Read => mem.copy_from_slice(disk),
            DeviceOp::Write => disk.copy_from_slice(mem),
            DeviceOp::Flush => {}
        }
        Ok(())
    }
}

impl BlockDevice for MemDisk {
    fn sector_size(&self) -> u32 {
        self.sector_size
    }

    fn capacity(&self) -> u64 {
        self.data.len() as u64 / u64::from(self.sector_size)
    }

    fn max_in_flight(&self) -> usize {
        self.slots.len()
    }

    fn submit(&mut self, req: DeviceRequest) -> Result<Tag, DeviceError> {
        let ss = self.sector_size;
        let valid = match req.op {
            DeviceOp::Flush => req.buffer.len == 0,
            DeviceOp::Read | DeviceOp::Write => {
                req.buffer.len != 0 && req.buffer.len.is_multiple_of(ss)
            }
        };
        if !valid {
            return Err(DeviceError::Invalid);
        }
        let slot = self.slots.iter().position(Option::is_none).ok_or(DeviceError::Full)?;
        self.slots[slot] = Some((req, self.submitted));
        self.submitted += 1;
        self.stats.max_depth = self.stats.max_depth.max(self.in_flight());
        Ok(Tag(slot as u16))
    }

    fn complete(&mut self) -> Option<(Tag, Result<(), DeviceError>)> {
        let busy = self.in_flight() as u64;
        if busy == 0 {
            return None;
        }
        let nth = self.rng.below(busy) as usize;
        let (slot, _) = self.slots.iter().enumerate().filter(|(_, s)| s.is_some()).nth(nth)?;
        let (req, number) = self.slots[slot].take()?;
        if self.slots.iter().flatten().any(|&(_, n)| n < number) {
            self.stats.out_of_order += 1;
        }
        let result = self.execute(&req);
        match req.op {
            DeviceOp::Read => self.stats.reads += 1,
            DeviceOp::Write => self.stats.writes += 1,
            DeviceOp::Flush => self.stats.flushes += 1,
        }
        if result.is_err() {
            self.stats.errors += 1;
        }
        Some((Tag(slot as u16), result))
    }
}
