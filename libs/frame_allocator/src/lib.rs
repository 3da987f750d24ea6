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
//! so this crate needs no allocator. The table is set up lazily, so that the work at boot does
//! not grow with RAM: only entries `0..ready` are written (see [`FrameAllocator::ready`]); the
//! owner of every frame past them is what the [`FrameAllocator::add_free`] and
//! [`FrameAllocator::reserve`] calls that reached past `ready` say, kept as a short list of
//! ranges (the last range covering a frame decides; none: reserved) until an allocation that
//! finds nothing in `0..ready` sets up the next [`CHUNK`] entries (bounded work per step). Those
//! frames can only be free or reserved, and the free count includes the free ones, so counts
//! and checks answer as if the whole table were written.
//!
//! Frames held by each of the first [`COUNTED_DOMAINS`] domains are also counted as they change
//! hands, so [`FrameAllocator::owned_by`] answers in constant time for them (the kernel checks frames contracts with it on every allocation); other owners
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

/// Table entries set up per step of the lazy set-up (32 MiB of RAM, 32 KiB of table).
pub const CHUNK: usize = 8192;

/// Ranges past the set-up entries that the allocator remembers; when more come, the table is
/// set up eagerly up to the new range's end.
pub const MAX_PENDING: usize = 16;

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
    /// Entries `0..ready` of `owners` are set up; the rest are described by `pending`.
    ready: usize,
    /// Ranges of entries (`start..end`, free or not) past `ready`, oldest first.
    pending: [(usize, usize, bool); MAX_PENDING],
    /// Ranges in use in `pending`.
    pending_len: usize,
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
    /// [`FrameAllocator::add_free`]. `owners` may hold anything: nothing of it is read before
    /// it is written, and nothing is written here (constant time).
    pub fn new(base: u64, owners: &'t mut [u32]) -> Result<Self, FrameError> {
        if !base.is_multiple_of(FRAME_SIZE) {
            return Err(FrameError::Misaligned { addr: base });
        }
        Ok(FrameAllocator {
            base,
            owners,
            free: 0,
            held: [0; COUNTED_DOMAINS],
            hint: 0,
            ready: 0,
            pending: [(0, 0, false); MAX_PENDING],
            pending_len: 0,
        })
    }

    /// Entries of the owner table set up so far (the rest are set up on need).
    pub fn ready(&self) -> usize {
        self.ready
    }

    /// Sets up the next `CHUNK` entries (fewer at the end); whether there were any.
    pub fn set_up_chunk(&mut self) -> bool {
        self.set_up_to(self.ready.saturating_add(CHUNK))
    }

    /// Sets up the entries up to `to` (capped at the table's end); whether there were any.
    /// Each entry is written once: the pending ranges' ends cut the entries into pieces of one
    /// owner each.
    fn set_up_to(&mut self, to: usize) -> bool {
        let (from, to) = (self.ready, to.min(self.owners.len()));
        if from >= to {
            return false;
        }
        let (points, len) = self.pieces(from, to);
        for w in points[..len].windows(2).filter(|w| w[0] < w[1]) {
            let owner = self.pending_owner(w[0]).encode();
            self.owners[w[0]..w[1]].fill(owner);
        }
        self.ready = to;
        // Ranges now wholly set up are dropped.
        let mut kept = 0;
        for k in 0..self.pending_len {
            if self.pending[k].1 > to {
                self.pending[kept] = self.pending[k];
                kept += 1;
            }
        }
        self.pending_len = kept;
        true
    }

    /// The ends of the pending ranges inside `from..to`, with `from` and `to`, sorted: between
    /// two neighbours every entry has the same pending owner. The points, and how many.
    fn pieces(&self, from: usize, to: usize) -> ([usize; 2 * MAX_PENDING + 2], usize) {
        let mut points = [0usize; 2 * MAX_PENDING + 2];
        points[0] = from;
        points[1] = to;
        let mut len = 2;
        for &(s, e, _) in &self.pending[..self.pending_len] {
            points[len] = s.clamp(from, to);
            points[len + 1] = e.clamp(from, to);
            len += 2;
        }
        points[..len].sort_unstable();
        (points, len)
    }

    /// Owner of entry `i` past `ready`, by the pending ranges.
    fn pending_owner(&self, i: usize) -> Owner {
        let covering = self.pending[..self.pending_len].iter().rev().find(|r| r.0 <= i && i < r.1);
        match covering {
            Some(&(_, _, true)) => Owner::Free,
            _ => Owner::Reserved,
        }
    }

    /// Free frames past `ready` (by the pending ranges; work bounded by [`MAX_PENDING`]).
    fn pending_free(&self) -> u64 {
        let (points, len) = self.pieces(self.ready, self.owners.len());
        points[..len]
            .windows(2)
            .filter(|w| w[0] < w[1] && self.pending_owner(w[0]) == Owner::Free)
            .map(|w| (w[1] - w[0]) as u64)
            .sum()
    }

    /// The owner of entry `i`.
    fn owner_at(&self, i: usize) -> Owner {
        if i < self.ready { Owner::decode(self.owners[i]) } else { self.pending_owner(i) }
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
        let set_up = self.owners[..self.ready].iter().filter(|&&o| o == w).count() as u64;
        let past = (self.owners.len() - self.ready) as u64;
        set_up
            + match owner {
                Owner::Free => self.pending_free(),
                Owner::Reserved => past - self.pending_free(),
                _ => 0,
            }
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
        if lo >= hi {
            return;
        }
        let (lo, hi) =
            (((lo - self.base) / FRAME_SIZE) as usize, ((hi - self.base) / FRAME_SIZE) as usize);
        if hi > self.ready {
            // The part past `ready` is remembered as a range (its frames are free or reserved,
            // so only the free count changes); with no room left, the table is set up that far.
            if self.pending_len < MAX_PENDING {
                let before = self.pending_free();
                self.pending[self.pending_len] = (lo.max(self.ready), hi, to == Owner::Free);
                self.pending_len += 1;
                self.free = self.free - before + self.pending_free();
            } else {
                self.set_up_to(hi);
            }
        }
        for i in lo..hi.min(self.ready) {
            let was = Owner::decode(self.owners[i]);
            if was == Owner::Free && to != Owner::Free {
                self.free -= 1;
            } else if was != Owner::Free && to == Owner::Free {
                self.free += 1;
            }
            self.recount(was, to, 1);
            self.owners[i] = to.encode();
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
        let count = count as usize;
        // Search the set-up entries from the roving hint, then wrap around once; then set up
        // a chunk at a time, searching only where a run could now fit.
        let start_hint = if count == 1 { self.hint } else { 0 };
        let mut found = self.search(0, self.ready, start_hint, count, align);
        while found.is_none() {
            let from = self.ready.saturating_sub(count - 1);
            if !self.set_up_to(self.ready.saturating_add(CHUNK.max(count))) {
                break;
            }
            found = self.search(from, self.ready, from, count, align);
        }
        let Some(i) = found else {
            return Err(exhausted);
        };
        self.owners[i..i + count].fill(owner.encode());
        self.free -= count as u64;
        self.recount(Owner::Free, owner, count as u64);
        self.hint = i + count;
        Ok(self.frame_at(i))
    }

    /// The first entry of `count` free, `align`-aligned entries in `lo..hi` (set up), searching
    /// from `start` and wrapping round to `lo` once.
    fn search(
        &self,
        lo: usize,
        hi: usize,
        start: usize,
        count: usize,
        align: u64,
    ) -> Option<usize> {
        let n = hi - lo;
        let mut tried = 0usize;
        let mut i = start.clamp(lo, hi);
        while tried < n {
            if i >= hi {
                i = lo;
            }
            let pfn = self.base / FRAME_SIZE + i as u64;
            let misalign = (pfn % align) as usize;
            if misalign != 0 {
                let skip = align as usize - misalign;
                tried += skip;
                i += skip;
                continue;
            }
            if i + count > hi {
                tried += hi - i;
                i = hi;
                continue;
            }
            match self.owners[i..i + count].iter().rposition(|&o| o != Owner::FREE) {
                None => return Some(i),
                Some(busy) => {
                    tried += busy + 1;
                    i += busy + 1;
                }
            }
        }
        None
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
            let actual = self.owner_at(j);
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
        let actual = self.owner_at(i);
        // Frames past the set-up entries are free or reserved: none can change hands.
        if actual != from || actual == Owner::Free || i >= self.ready {
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
        Ok(self.owner_at(self.index(frame.0)?))
    }

    /// Verifies that the free count and the per-domain counts match the owner table; on a
    /// mismatch returns the kept count and the table's.
    pub fn check(&self) -> Result<(), (u64, u64)> {
        let scan = |w: u32| self.owners[..self.ready].iter().filter(|&&o| o == w).count() as u64;
        let counted = scan(Owner::FREE) + self.pending_free();
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
