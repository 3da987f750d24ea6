//! Physical frame allocation with a per-frame owner table.
//!
//! Every 4 KiB frame of physical memory that the allocator covers has exactly one [`Owner`]:
//! it is free, reserved (firmware, the kernel image, boot tables: never handed out), held by
//! the kernel, or held by a domain. The table is the single source of truth: the free count is
//! kept in step with it, and [`FrameAllocator::check`] verifies that it is.
//!
//! Invariants:
//! - an allocation returns only frames that were `Free`, and marks them with their new owner;
//! - a frame is freed only by its owner (otherwise [`FrameError::NotOwner`]); freeing a free
//!   frame is [`FrameError::DoubleFree`]; reserved frames can never be freed;
//! - exhaustion is an error naming what was asked for and what was left, never a panic.
//!
//! The owner table's storage is supplied by the caller (the kernel carves it out of RAM at boot),
//! so this crate needs no allocator. Frames held by each of the first [`COUNTED_DOMAINS`] domains
//! are also counted as they change hands, so [`FrameAllocator::owned_by`] answers in constant
//! time for them (the kernel checks frames contracts with it on every allocation); other owners
//! are counted by scanning the table. Frames contracts themselves are the kernel's business.

#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

use core::fmt;

/// Size of one frame in bytes.
pub const FRAME_SIZE: u64 = 4096;

/// Domains `0..COUNTED_DOMAINS` have their frames counted as they change hands: as many as a
/// manifest may declare (the kernel checks that at compile time), so that no frame allocation
/// scans the table.
pub const COUNTED_DOMAINS: usize = 1024;

/// A physical frame, named by its first byte's address (always `FRAME_SIZE`-aligned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Frame(u64);

impl Frame {
    /// The frame containing physical address `addr`.
    pub const fn containing(addr: u64) -> Frame {
        Frame(addr & !(FRAME_SIZE - 1))
    }
    /// Physical address of the frame's first byte.
    pub const fn addr(self) -> u64 {
        self.0
    }
    /// The frame `n` frames further on.
    pub const fn add(self, n: u64) -> Frame {
        Frame(self.0 + n * FRAME_SIZE)
    }
}

/// Who holds a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Owner {
    /// Available for allocation.
    Free,
    /// Not RAM the allocator may hand out: firmware, the kernel image, boot structures, holes.
    Reserved,
    /// Kernel memory that is not charged to any domain (heap, kernel page tables).
    Kernel,
    /// Held by (and charged to) the domain with this identifier.
    Domain(u32),
}

impl Owner {
    const FREE: u32 = 0;
    const RESERVED: u32 = 1;
    const KERNEL: u32 = 2;
    const DOMAIN_BASE: u32 = 3;
    /// The largest domain identifier the table can record.
    pub const MAX_DOMAIN: u32 = u32::MAX - Self::DOMAIN_BASE;

    fn encode(self) -> u32 {
        match self {
            Owner::Free => Self::FREE,
            Owner::Reserved => Self::RESERVED,
            Owner::Kernel => Self::KERNEL,
            Owner::Domain(id) => {
                assert!(id <= Self::MAX_DOMAIN, "domain id out of range");
                id + Self::DOMAIN_BASE
            }
        }
    }

    fn decode(word: u32) -> Owner {
        match word {
            Self::FREE => Owner::Free,
            Self::RESERVED => Owner::Reserved,
            Self::KERNEL => Owner::Kernel,
            d => Owner::Domain(d - Self::DOMAIN_BASE),
        }
    }
}

/// Why a frame operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FrameError {
    /// The address is not in the range the allocator covers.
    OutOfRange {
        /// The offending address.
        addr: u64,
    },
    /// The address is not frame-aligned.
    Misaligned {
        /// The offending address.
        addr: u64,
    },
    /// The frame is already free.
    DoubleFree {
        /// The frame.
        frame: Frame,
    },
    /// The frame belongs to someone other than the caller claims.
    NotOwner {
        /// The frame.
        frame: Frame,
        /// Its actual owner.
        owner: Owner,
    },
    /// Not enough free frames (or no contiguous run long enough).
    Exhausted {
        /// Frames asked for.
        requested: u64,
        /// Frames free at the time.
        free: u64,
    },
    /// An argument makes no sense (zero frames, alignment not a power of two, owner `Free`).
    Invalid,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::OutOfRange { addr } => write!(f, "address {addr:#x} is not managed"),
            FrameError::Misaligned { addr } => write!(f, "address {addr:#x} is not frame-aligned"),
            FrameError::DoubleFree { frame } => write!(f, "frame {:#x} is already free", frame.0),
            FrameError::NotOwner { frame, owner } => {
                write!(f, "frame {:#x} belongs to {owner:?}", frame.0)
            }
            FrameError::Exhausted { requested, free } => {
                write!(f, "out of frames: {requested} requested, {free} free")
            }
            FrameError::Invalid => write!(f, "invalid argument"),
        }
    }
}

/// The frame allocator: a contiguous window of physical memory and its owner table.
pub struct FrameAllocator<'t> {
    base: u64,
    owners: &'t mut [u32],
    free: u64,
    /// Frames held by each of the first [`COUNTED_DOMAINS`] domains.
    held: [u64; COUNTED_DOMAINS],
    /// Index where the next single-frame search starts (a roving pointer).
    hint: usize,
}

/// The counter slot of `owner`, if it is counted.
fn counted(owner: Owner) -> Option<usize> {
    match owner {
        Owner::Domain(id) if (id as usize) < COUNTED_DOMAINS => Some(id as usize),
        _ => None,
    }
}

impl<'t> FrameAllocator<'t> {
    /// An allocator for the `owners.len()` frames starting at physical address `base`
    /// (frame-aligned). Every frame starts [`Owner::Reserved`]; hand usable RAM over with
    /// [`FrameAllocator::add_free`].
    pub fn new(base: u64, owners: &'t mut [u32]) -> Result<Self, FrameError> {
        if !base.is_multiple_of(FRAME_SIZE) {
            return Err(FrameError::Misaligned { addr: base });
        }
        owners.fill(Owner::RESERVED);
        Ok(FrameAllocator { base, owners, free: 0, held: [0; COUNTED_DOMAINS], hint: 0 })
    }

    /// Number of table entries needed to cover `bytes` of physical memory.
    pub const fn table_len(bytes: u64) -> usize {
        bytes.div_ceil(FRAME_SIZE) as usize
    }

    /// Frames covered (free, reserved and held).
    pub fn total(&self) -> u64 {
        self.owners.len() as u64
    }

    /// Frames currently free.
    pub fn free_count(&self) -> u64 {
        self.free
    }

    /// Frames currently held by `owner`.
    pub fn owned_by(&self, owner: Owner) -> u64 {
        if let Some(slot) = counted(owner) {
            return self.held[slot];
        }
        let w = owner.encode();
        self.owners.iter().filter(|&&o| o == w).count() as u64
    }

    fn index(&self, addr: u64) -> Result<usize, FrameError> {
        if !addr.is_multiple_of(FRAME_SIZE) {
            return Err(FrameError::Misaligned { addr });
        }
        let i = addr.checked_sub(self.base).ok_or(FrameError::OutOfRange { addr })? / FRAME_SIZE;
        if i >= self.owners.len() as u64 {
            return Err(FrameError::OutOfRange { addr });
        }
        Ok(i as usize)
    }

    fn frame_at(&self, i: usize) -> Frame {
        Frame(self.base + i as u64 * FRAME_SIZE)
    }

    /// Marks the frames wholly inside `[start, end)` free (boot-time hand-over of usable RAM;
    /// partial frames at either end stay reserved). Frames already free are left alone.
    pub fn add_free(&mut self, start: u64, end: u64) {
        self.set_range(start.next_multiple_of(FRAME_SIZE), end & !(FRAME_SIZE - 1), Owner::Free);
    }

    /// Marks every frame touching `[start, end)` reserved, taking free ones out of circulation.
    pub fn reserve(&mut self, start: u64, end: u64) {
        self.set_range(
            start & !(FRAME_SIZE - 1),
            end.next_multiple_of(FRAME_SIZE),
            Owner::Reserved,
        );
    }

    fn set_range(&mut self, start: u64, end: u64, to: Owner) {
        let lo = start.max(self.base);
        let hi = end.min(self.base + self.total() * FRAME_SIZE);
        let mut a = lo;
        while a < hi {
            let i = ((a - self.base) / FRAME_SIZE) as usize;
            let was = Owner::decode(self.owners[i]);
            if was == Owner::Free && to != Owner::Free {
                self.free -= 1;
            } else if was != Owner::Free && to == Owner::Free {
                self.free += 1;
            }
            self.recount(was, to, 1);
            self.owners[i] = to.encode();
            a += FRAME_SIZE;
        }
    }

    /// Allocates one frame for `owner`.
    pub fn alloc(&mut self, owner: Owner) -> Result<Frame, FrameError> {
        self.alloc_contiguous(1, 1, owner)
    }

    /// Allocates `count` physically contiguous frames whose first frame number is a multiple of
    /// `align` (a power of two, in frames), for `owner`. Returns the first frame.
    pub fn alloc_contiguous(
        &mut self,
        count: u64,
        align: u64,
        owner: Owner,
    ) -> Result<Frame, FrameError> {
        if count == 0 || !align.is_power_of_two() || matches!(owner, Owner::Free | Owner::Reserved)
        {
            return Err(FrameError::Invalid);
        }
        if let Owner::Domain(id) = owner
            && id > Owner::MAX_DOMAIN
        {
            return Err(FrameError::Invalid);
        }
        let exhausted = FrameError::Exhausted { requested: count, free: self.free };
        if count > self.free {
            return Err(exhausted);
        }
        let n = self.owners.len();
        let count = count as usize;
        // Search from the roving hint, then wrap around once.
        let start_hint = if count == 1 { self.hint } else { 0 };
        let mut tried = 0usize;
        let mut i = start_hint;
        while tried < n {
            if i >= n {
                i = 0;
            }
            let pfn = self.base / FRAME_SIZE + i as u64;
            let misalign = (pfn % align) as usize;
            if misalign != 0 {
                let skip = align as usize - misalign;
                tried += skip;
                i += skip;
                continue;
            }
            if i + count > n {
                tried += n - i;
                i = n;
                continue;
            }
            match self.owners[i..i + count].iter().rposition(|&o| o != Owner::FREE) {
                None => {
                    self.owners[i..i + count].fill(owner.encode());
                    self.free -= count as u64;
                    self.recount(Owner::Free, owner, count as u64);
                    self.hint = i + count;
                    return Ok(self.frame_at(i));
                }
                Some(busy) => {
                    tried += busy + 1;
                    i += busy + 1;
                }
            }
        }
        Err(exhausted)
    }

    /// Returns `frame` to the free pool; `owner` must be its current owner.
    pub fn free(&mut self, frame: Frame, owner: Owner) -> Result<(), FrameError> {
        self.free_contiguous(frame, 1, owner)
    }

    /// Frees `count` contiguous frames starting at `first`, all held by `owner`. Nothing is
    /// freed unless every frame passes the checks.
    pub fn free_contiguous(
        &mut self,
        first: Frame,
        count: u64,
        owner: Owner,
    ) -> Result<(), FrameError> {
        if count == 0 {
            return Err(FrameError::Invalid);
        }
        let i = self.index(first.0)?;
        let end = i.checked_add(count as usize).filter(|&e| e <= self.owners.len()).ok_or(
            FrameError::OutOfRange {
                addr: first.0.saturating_add(count.saturating_mul(FRAME_SIZE)),
            },
        )?;
        for j in i..end {
            let actual = Owner::decode(self.owners[j]);
            if actual == Owner::Free {
                return Err(FrameError::DoubleFree { frame: self.frame_at(j) });
            }
            if actual != owner {
                return Err(FrameError::NotOwner { frame: self.frame_at(j), owner: actual });
            }
        }
        self.owners[i..end].fill(Owner::FREE);
        self.free += count;
        self.recount(owner, Owner::Free, count);
        Ok(())
    }

    /// Hands `frame` from `from` to `to` (for instance from the kernel to a domain).
    pub fn transfer(&mut self, frame: Frame, from: Owner, to: Owner) -> Result<(), FrameError> {
        if matches!(to, Owner::Free | Owner::Reserved) {
            return Err(FrameError::Invalid);
        }
        let i = self.index(frame.0)?;
        let actual = Owner::decode(self.owners[i]);
        if actual != from || actual == Owner::Free {
            return Err(FrameError::NotOwner { frame, owner: actual });
        }
        self.owners[i] = to.encode();
        self.recount(from, to, 1);
        Ok(())
    }

    /// Moves `n` frames from `from`'s count to `to`'s.
    fn recount(&mut self, from: Owner, to: Owner, n: u64) {
        if let Some(slot) = counted(from) {
            self.held[slot] -= n;
        }
        if let Some(slot) = counted(to) {
            self.held[slot] += n;
        }
    }

    /// The owner of `frame`.
    pub fn owner(&self, frame: Frame) -> Result<Owner, FrameError> {
        Ok(Owner::decode(self.owners[self.index(frame.0)?]))
    }

    /// Verifies that the free count and the per-domain counts match the owner table; on a
    /// mismatch returns the kept count and the table's.
    pub fn check(&self) -> Result<(), (u64, u64)> {
        let scan = |w: u32| self.owners.iter().filter(|&&o| o == w).count() as u64;
        let counted = scan(Owner::FREE);
        if counted != self.free {
            return Err((self.free, counted));
        }
        for (id, &kept) in self.held.iter().enumerate() {
            let table = scan(Owner::Domain(id as u32).encode());
            if table != kept {
                return Err((kept, table));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
