//! The swap driver: a stretch larger than its frames, whose evicted pages are kept in memory.
//!
//! The driver takes a fixed number of guaranteed frames at bind (its *budget*) and manages a
//! stretch that may have many more pages. Pages appear on first touch, zero-filled. When a
//! fault finds no free frame, the driver *evicts* the page resident longest (first in, first
//! out, skipping locked pages): it copies the page into a free slot of its *swap area*, unmaps
//! it and maps its frame at the faulting page. A later touch of the evicted page faults, and
//! the driver brings it back from its slot, which is then free again. So a program sees its
//! every byte kept, in a stretch as large as budget plus slots, on the frames of the budget.
//!
//! A stretch of `pages` pages needs `pages < frames + slots`: every page a place, a frame or a
//! slot, and one slot to spare, where the victim of a fault on a page that is out in a slot
//! goes before that page's slot is free. `bind` refuses a larger stretch.
//!
//! The swap area is the domain's own memory: a fixed array of page buffers allocated when the
//! driver is made ([`SwapDriver::new`]), on the heap, which is nailed, so no fault is needed
//! to reach it and a fault never allocates. It plays the part a disk plays for the paged
//! driver (`stretch_drivers/paged`), without the disk: what is learnt here (a victim, its
//! contents saved before its frame is reused, a frame filled before the page is used) is what a
//! pager does.
//!
//! This crate is the swap lab of Tessera's book (`docs/labs/swap.md`): the fault path and the
//! eviction live in `src/fault.rs`, the file a student writes; this file holds the state and
//! the calls around them. Its graded tests are `tests/lab_swap.rs`.
//!
//! # Invariants
//!
//! - Page `i` is resident (the core maps a frame of the budget there) or not; a resident page
//!   is queued in `fifo` exactly once, and has no slot.
//! - A page that is not resident holds its contents in slot `swapped[i]`, or, with no slot,
//!   reads as zeros (never written out: never touched, or touched only in a failed fault).
//! - Every frame of the budget is either mapped at a resident page or in `free`: the driver
//!   holds exactly its budget while bound, and never takes another frame.
//! - A locked page is resident and is never evicted.
//!
//! # Not implemented
//!
//! A page is mapped before it is filled (with [`MemoryKernel::write`]), so a second thread of
//! the domain could see it half filled; the paged driver fills a frame through a window page
//! and moves it into place with [`MemoryKernel::remap`]. Eviction saves every victim, written
//! or not (the accessed and dirty bits of [`MemoryKernel::page_state`] are not used), and the
//! victim is the oldest resident page, not the least recently used. The stretch must be
//! readable and writable (the driver copies pages in and out through their mappings); frames
//! are guaranteed only, so `revoke` releases nothing.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod fault;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use stretch_driver::{
    DriverCore, DriverError, Fault, FaultError, Frame, MemoryKernel, PAGE_SIZE, Rights,
    StretchDriver, StretchInfo,
};

/// A page's worth of bytes.
pub type Page = [u8; PAGE_SIZE];

/// The swap area: a fixed number of page buffers (slots), each free or holding one evicted
/// page.
#[derive(Debug)]
pub struct SwapArea {
    slots: Box<[Page]>,
    /// Slots that hold no page, the lowest last (taken first).
    free: Vec<usize>,
    /// The most slots in use at once.
    peak: usize,
}

impl SwapArea {
    /// An area of `slots` free page buffers.
    pub fn new(slots: usize) -> Self {
        SwapArea {
            slots: vec![[0u8; PAGE_SIZE]; slots].into_boxed_slice(),
            free: (0..slots).rev().collect(),
            peak: 0,
        }
    }

    /// Takes a free slot, or `None` if every slot holds a page.
    pub fn take(&mut self) -> Option<usize> {
        let slot = self.free.pop()?;
        self.peak = self.peak.max(self.used());
        Some(slot)
    }

    /// Gives slot `slot` back: it holds no page any more.
    pub fn give_back(&mut self, slot: usize) {
        debug_assert!(slot < self.slots.len() && !self.free.contains(&slot));
        self.free.push(slot);
    }

    /// The bytes of slot `slot`.
    pub fn slot(&self, slot: usize) -> &Page {
        &self.slots[slot]
    }

    /// The bytes of slot `slot`, to write a page into.
    pub fn slot_mut(&mut self, slot: usize) -> &mut Page {
        &mut self.slots[slot]
    }

    /// Slots in the area.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Slots that hold a page now.
    pub fn used(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Makes every slot free again.
    fn clear(&mut self) {
        self.free = (0..self.slots.len()).rev().collect();
    }
}

/// What the driver did besides the core's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwapStats {
    /// Pages copied out to a slot and unmapped to free their frame.
    pub evictions: u64,
    /// Pages brought back from a slot.
    pub swap_ins: u64,
    /// The most slots in use at once.
    pub peak_slots: usize,
}

// ANCHOR: state
/// The swap driver. See the crate documentation.
#[derive(Debug)]
pub struct SwapDriver {
    /// How many guaranteed frames it takes at bind: all it ever holds.
    budget: usize,
    /// The stretch, the frame mapped at each resident page, the lock marks, the stats.
    pub(crate) core: DriverCore,
    /// Frames of the budget that no page maps.
    pub(crate) free: Vec<Frame>,
    /// Resident pages, in the order they were mapped (the oldest first).
    pub(crate) fifo: VecDeque<usize>,
    /// For each page of the stretch that is not resident: the slot holding its contents, or
    /// `None` if it reads as zeros.
    pub(crate) swapped: Vec<Option<usize>>,
    /// Where evicted pages are kept.
    pub(crate) area: SwapArea,
    /// Evictions and swap-ins.
    pub(crate) swap_stats: SwapStats,
}
// ANCHOR_END: state

impl SwapDriver {
    /// An unbound driver that will take `frames` guaranteed frames at bind and keeps up to
    /// `slots` evicted pages. The slots are allocated now.
    pub fn new(frames: usize, slots: usize) -> Self {
        SwapDriver {
            budget: frames,
            core: DriverCore::new(),
            free: Vec::new(),
            fifo: VecDeque::new(),
            swapped: Vec::new(),
            area: SwapArea::new(slots),
            swap_stats: SwapStats::default(),
        }
    }

    /// How many guaranteed frames it takes at bind.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Evictions and swap-ins so far, and the most slots used at once.
    pub fn swap_stats(&self) -> SwapStats {
        SwapStats { peak_slots: self.area.peak, ..self.swap_stats }
    }

    /// Pages resident now.
    pub fn resident(&self) -> usize {
        self.core.resident()
    }

    /// Pages held in the swap area now.
    pub fn swapped_out(&self) -> usize {
        self.area.used()
    }

    /// Whether page `index` is in the swap area.
    pub fn is_swapped(&self, index: usize) -> bool {
        self.swapped.get(index).copied().flatten().is_some()
    }
}

/// The error a failed fault's cause gives `lock`.
fn lock_error(e: FaultError) -> DriverError {
    match e {
        FaultError::Kernel(e) => DriverError::Kernel(e),
        FaultError::NotBound => DriverError::NotBound,
        _ => DriverError::OutOfMemory,
    }
}

impl StretchDriver for SwapDriver {
    // ANCHOR: bind
    fn bind(&mut self, k: &mut dyn MemoryKernel, stretch: StretchInfo) -> Result<(), DriverError> {
        // Pages are copied in and out through their mappings: the stretch must allow both.
        if !stretch.page_rights().contains(Rights::READ.union(Rights::WRITE)) {
            return Err(DriverError::BadStretch);
        }
        // Every page of the stretch must have a place: a frame or a slot, and a slot to
        // spare, which the victim of a fault on a page out in a slot goes to before that
        // page's slot is free.
        if stretch.pages >= self.budget.saturating_add(self.area.capacity()) {
            return Err(DriverError::BadStretch);
        }
        self.core.bind_with_pool(k, stretch, self.budget, &mut self.free)?;
        self.fifo.clear();
        self.swapped = vec![None; stretch.pages];
        self.area.clear();
        Ok(())
    }
    // ANCHOR_END: bind

    // ANCHOR: fault
    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        // The lab's fault path: src/fault.rs.
        self.swap_fault(k, fault)
    }
    // ANCHOR_END: fault

    /// Brings each page of `range` in (from its slot, or zero-filled) and marks it locked, so
    /// that eviction passes it by. A failed lock unmarks the pages it marked (they stay
    /// resident).
    fn lock(&mut self, k: &mut dyn MemoryKernel, range: Range<usize>) -> Result<(), DriverError> {
        let (stretch, pages) = self.core.pages_in(range)?;
        let mut newly = Vec::new();
        for index in pages {
            if self.core.locked(index) {
                continue;
            }
            let resident = match self.core.mapped(index) {
                Some(_) => Ok(()),
                None => self.page_in(k, stretch, index).map_err(lock_error),
            };
            let page = stretch.page_addr(index);
            let marked = resident.and_then(|()| self.core.lock(page..page + 1, |_, _| Ok(())));
            if let Err(e) = marked {
                for i in newly {
                    let page = stretch.page_addr(i);
                    let _ = self.core.unlock(page..page + 1, |_| ());
                }
                return Err(e);
            }
            newly.push(index);
        }
        Ok(())
    }

    /// Unmaps every resident page and frees every frame of the budget; the swap area's pages
    /// are dropped.
    fn unbind(&mut self, k: &mut dyn MemoryKernel) {
        if self.core.unbind(k).is_none() {
            return;
        }
        for frame in core::mem::take(&mut self.free) {
            self.core.free(k, frame);
        }
        self.fifo.clear();
        self.swapped.clear();
        self.area.clear();
    }

    fn core(&self) -> &DriverCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut DriverCore {
        &mut self.core
    }
}
