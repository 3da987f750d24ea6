//! The recorder stretch driver: demand-zero pages on guaranteed frames that records how the
//! stretch is touched.
//!
//! It pages like the template driver (nothing is mapped at bind, the first touch of a page
//! maps a fresh guaranteed frame, which the kernel hands out zero-filled), and it keeps a
//! record of every fault in its stretch: the page, the access and a sequence number go into a
//! bounded trace, and per-page counters keep the order in which pages were first touched and
//! how many read, write and execute faults each took. To tell the pages that were only read
//! from the pages that were written, a read (or an instruction fetch) that faults on an absent
//! page maps it *without* the write right; the first write to it then faults again, and the
//! driver adds the write right with [`MemoryKernel::protect`] and records the page as upgraded.
//! [`RecorderDriver::pattern`] sums it up: pages only read, pages written, upgrades, and
//! whether the first touches went through the stretch in ascending order, page after page.
//! Use it to learn how a program uses a stretch before choosing a driver for it: pages that
//! are only read never need saving, and a sequential pattern rewards reading ahead.
//!
//! The trace holds at most the capacity given to [`RecorderDriver::new`], whose memory is
//! taken there: recording a fault never allocates. When the trace is full, later faults are
//! counted in [`RecorderDriver::dropped`] instead; the per-page counters and the pattern stay
//! exact. `bind` clears the trace and the counters; `unbind` keeps them, so they describe the
//! current binding, or the last one until the next `bind`.
//!
//! All frames are guaranteed: when the guarantee is used up, a fault that needs a frame fails
//! with [`FaultError::OutOfMemory`] (an upgrade needs none and still succeeds). Guaranteed
//! frames are never revoked, so **`revoke` releases nothing**. `lock` maps the absent pages of
//! its range and gives every page of it all the stretch's rights, since a locked page must
//! never fault (the fault handler's own memory may be locked); accesses to a locked page are
//! therefore not seen.
//!
//! # Invariants
//!
//! - A page has a frame in the [`DriverCore`]'s page table exactly when it is mapped, and the
//!   frame is guaranteed and mapped nowhere else.
//! - A mapped page that is not writable is mapped with the stretch's page rights minus
//!   [`Rights::WRITE`], which allow every access the stretch allows but writes; a writable one
//!   with all of them. A locked page is mapped with all of them.
//! - The trace never holds more records than its capacity and never reallocates; every fault
//!   inside the stretch is either in the trace or counted as dropped.
//!
//! # Not implemented
//!
//! Optimistic frames, eviction and a backing store (see the physical driver for the first).
//! Faults outside the stretch, or delivered while unbound, fail without a record (they have
//! no page) but use up a sequence number. A stretch that grants write but not read cannot have
//! a readable page without write (write implies read), so a load or fetch maps such a page
//! writable, and the page counts as neither read-only nor written. The trace keeps the first
//! faults, not the latest.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

use alloc::vec::Vec;
use core::ops::Range;

use stretch_driver::driver_core::{driver_error, fault_error};
use stretch_driver::{
    Access, DriverCore, DriverError, Fault, FaultError, MemError, MemoryKernel, Rights,
    StretchDriver, StretchInfo,
};

// ANCHOR: record
/// What the driver did about one fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A read or fetch on an absent page: mapped without the write right.
    MappedReadOnly,
    /// A write on an absent page (or a load or fetch in a stretch that grants write but not
    /// read): mapped writable.
    MappedWritable,
    /// A write on a page mapped without write: the write right was added.
    Upgraded,
    /// The page was mapped with the access allowed already: nothing to do.
    AlreadyMapped,
    /// The fault failed with this error; the faulting thread got it.
    Failed(FaultError),
}

/// One fault in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// The fault's number among all faults delivered to the driver since it was created,
    /// from 0: `seq + 1` is what [`DriverStats::faults`] said just after it.
    pub seq: u64,
    /// The index of the page in the stretch.
    pub page: usize,
    /// What the thread tried to do.
    pub access: Access,
    /// What the driver did.
    pub event: Event,
}
// ANCHOR_END: record

/// How a page is mapped now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// Not mapped: its next touch faults.
    Absent,
    /// Mapped without the write right.
    ReadOnly,
    /// Mapped with the write right.
    Writable,
}

/// What the driver knows of one page of the stretch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageSummary {
    /// Its place in the order of first touches (0 for the first page to fault), if it faulted.
    pub first_touch: Option<usize>,
    /// Faults by loads.
    pub read_faults: u64,
    /// Faults by stores.
    pub write_faults: u64,
    /// Faults by instruction fetches.
    pub execute_faults: u64,
    /// Whether a write fault made it writable (at its first touch or by an upgrade).
    pub written: bool,
    /// Whether it was mapped without write at first and a later write added the right.
    pub upgraded: bool,
    /// How it is mapped now ([`Mapping::Absent`] for every page after `unbind`).
    pub mapping: Mapping,
    /// Whether it is locked.
    pub locked: bool,
}

/// The access pattern of the stretch, as its faults show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// Pages that faulted at least once.
    pub touched: usize,
    /// Pages a load or fetch mapped without write and that no write has faulted on since.
    pub read_only: usize,
    /// Pages a write fault made writable.
    pub written: usize,
    /// Pages mapped without write by a load or fetch and made writable by a later write (they
    /// are among `written`).
    pub upgrades: usize,
    /// Whether the pages, in the order of their first touches, are consecutive ascending
    /// indices (each one more than the one before). Trivially true for fewer than two pages.
    pub sequential: bool,
}

/// The driver's state of one page (its frame and lock mark are the core's).
#[derive(Clone, Copy, Debug, Default)]
struct Page {
    /// Mapped with the write right.
    writable: bool,
    first_touch: Option<usize>,
    read_faults: u64,
    write_faults: u64,
    execute_faults: u64,
    /// A load or fetch mapped it without write.
    mapped_read_only: bool,
    written: bool,
    upgraded: bool,
}

impl Page {
    /// The rights it is mapped with, if it is mapped.
    fn rights(&self, stretch: StretchInfo) -> Rights {
        if self.writable { stretch.page_rights() } else { read_only_rights(stretch) }
    }
}

/// The rights a page mapped without write has: the stretch's page rights without write.
fn read_only_rights(stretch: StretchInfo) -> Rights {
    stretch.page_rights().difference(Rights::WRITE)
}

/// The rights a load or fetch maps an absent page with: without write, unless that would
/// take reading away (a stretch that grants write but not read, since write implies read).
fn first_read_rights(stretch: StretchInfo) -> Rights {
    let read_only = read_only_rights(stretch);
    let readable = |rights| Access::Read.allowed_by(rights);
    if readable(read_only) == readable(stretch.page_rights()) {
        read_only
    } else {
        stretch.page_rights()
    }
}

/// The recorder driver. See the crate documentation.
#[derive(Debug)]
pub struct RecorderDriver {
    /// The stretch we manage, the frame mapped at each page, the lock marks, the stats.
    core: DriverCore,
    /// One entry per page of the current stretch, or of the last one after `unbind`.
    pages: Vec<Page>,
    /// The first `capacity` faults of the binding.
    trace: Vec<Record>,
    capacity: usize,
    /// Faults of the binding that found the trace full.
    dropped: u64,
    /// Pages of the binding that faulted at least once.
    touched: usize,
}

impl RecorderDriver {
    /// An unbound driver whose trace holds up to `capacity` records (taken now).
    pub fn new(capacity: usize) -> Self {
        RecorderDriver {
            core: DriverCore::new(),
            pages: Vec::new(),
            trace: Vec::with_capacity(capacity),
            capacity,
            dropped: 0,
            touched: 0,
        }
    }

    /// How many records the trace holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The stretch it manages, if bound.
    pub fn stretch(&self) -> Option<StretchInfo> {
        self.core.stretch()
    }

    /// The faults recorded since the last `bind`, oldest first.
    pub fn trace(&self) -> &[Record] {
        &self.trace
    }

    /// How many faults since the last `bind` found the trace full and were not recorded.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// What the driver knows of page `index` of the current (or last) stretch; `None` if the
    /// stretch has no such page or the driver was never bound.
    pub fn page_summary(&self, index: usize) -> Option<PageSummary> {
        let page = self.pages.get(index)?;
        let mapping = match (self.core.mapped(index), page.writable) {
            (None, _) => Mapping::Absent,
            (Some(_), false) => Mapping::ReadOnly,
            (Some(_), true) => Mapping::Writable,
        };
        Some(PageSummary {
            first_touch: page.first_touch,
            read_faults: page.read_faults,
            write_faults: page.write_faults,
            execute_faults: page.execute_faults,
            written: page.written,
            upgraded: page.upgraded,
            mapping,
            locked: self.core.locked(index),
        })
    }

    /// The access pattern of the current (or last) binding, from the per-page counters: exact
    /// even when the trace dropped faults.
    pub fn pattern(&self) -> Pattern {
        let mut p = Pattern {
            touched: self.touched,
            read_only: 0,
            written: 0,
            upgrades: 0,
            sequential: true,
        };
        for (index, page) in self.pages.iter().enumerate() {
            p.read_only += usize::from(page.mapped_read_only && !page.written);
            p.written += usize::from(page.written);
            p.upgrades += usize::from(page.upgraded);
            // ANCHOR: sequential
            // Every touched page but the first must have been first touched right after its
            // lower neighbour: then the order of first touches is i, i + 1, i + 2, ...
            if let Some(order) = page.first_touch
                && order > 0
            {
                let before = index.checked_sub(1).and_then(|i| self.pages[i].first_touch);
                if before != Some(order - 1) {
                    p.sequential = false;
                }
            }
            // ANCHOR_END: sequential
        }
        p
    }

    /// Maps a new guaranteed frame at page `index` with `rights` (the core frees it if the
    /// kernel refuses the mapping).
    fn map_new(
        &mut self,
        k: &mut dyn MemoryKernel,
        index: usize,
        rights: Rights,
    ) -> Result<(), MemError> {
        self.core.map_new(k, index, rights)?;
        self.pages[index].writable = rights.contains(Rights::WRITE);
        Ok(())
    }

    // ANCHOR: resolve
    /// Resolves a fault on page `index` of `stretch` and says how.
    fn resolve(
        &mut self,
        k: &mut dyn MemoryKernel,
        stretch: StretchInfo,
        index: usize,
        access: Access,
    ) -> Result<Event, FaultError> {
        if !access.allowed_by(stretch.page_rights()) {
            return Err(FaultError::Denied);
        }
        let page = self.pages[index];
        if self.core.mapped(index).is_some() {
            if access.allowed_by(page.rights(stretch)) {
                return Ok(Event::AlreadyMapped); // Another fault got there first.
            }
            // Mapped without write, and this is a write: add the right. No frame needed.
            let va = stretch.page_addr(index);
            k.protect(va, stretch.page_rights()).map_err(FaultError::Kernel)?;
            let page = &mut self.pages[index];
            page.writable = true;
            page.written = true;
            page.upgraded = true;
            return Ok(Event::Upgraded);
        }
        // Absent: a load or fetch maps it without write (if the stretch allows that).
        if access != Access::Write {
            let rights = first_read_rights(stretch);
            self.map_new(k, index, rights).map_err(fault_error)?;
            if rights.contains(Rights::WRITE) {
                return Ok(Event::MappedWritable);
            }
            self.pages[index].mapped_read_only = true;
            return Ok(Event::MappedReadOnly);
        }
        self.map_new(k, index, stretch.page_rights()).map_err(fault_error)?;
        self.pages[index].written = true;
        Ok(Event::MappedWritable)
    }
    // ANCHOR_END: resolve

    // ANCHOR: note
    /// Counts a fault on page `index` and puts it in the trace, or counts it as dropped.
    fn note(&mut self, seq: u64, index: usize, access: Access, event: Event) {
        let page = &mut self.pages[index];
        match access {
            Access::Read => page.read_faults += 1,
            Access::Write => page.write_faults += 1,
            Access::Execute => page.execute_faults += 1,
        }
        if page.first_touch.is_none() {
            page.first_touch = Some(self.touched);
            self.touched += 1;
        }
        if self.trace.len() < self.capacity {
            self.trace.push(Record { seq, page: index, access, event });
        } else {
            self.dropped += 1;
        }
    }
    // ANCHOR_END: note
}

/// `unlock` and `stats` are the core's provided methods.
impl StretchDriver for RecorderDriver {
    /// Checks the stretch and clears the trace and the counters; maps nothing.
    fn bind(&mut self, _k: &mut dyn MemoryKernel, stretch: StretchInfo) -> Result<(), DriverError> {
        self.core.bind(stretch)?;
        self.pages.clear();
        self.pages.resize(stretch.pages, Page::default());
        self.trace.clear();
        self.dropped = 0;
        self.touched = 0;
        Ok(())
    }

    // ANCHOR: fault
    /// Maps the page on a new guaranteed frame (without write, for a load or fetch) or adds
    /// the write right to it, and records the fault.
    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        let seq = self.core.stats.faults;
        self.core.stats.faults += 1;
        let r = self.core.page_of(&fault).and_then(|(stretch, index)| {
            let r = self.resolve(k, stretch, index, fault.access);
            let event = r.unwrap_or_else(Event::Failed);
            self.note(seq, index, fault.access, event);
            r.map(|_| ())
        });
        if r.is_err() {
            self.core.stats.failures += 1;
        }
        r
    }
    // ANCHOR_END: fault

    /// Maps the absent pages of the range on guaranteed frames and gives every page of it all
    /// the stretch's rights, then locks them. On failure no page is newly locked; the pages
    /// the call mapped or made writable stay so.
    fn lock(&mut self, k: &mut dyn MemoryKernel, range: Range<usize>) -> Result<(), DriverError> {
        let pages = &mut self.pages;
        self.core.lock(range, |core, index| {
            let stretch = core.bound()?;
            let rights = stretch.page_rights();
            let page = &mut pages[index];
            if core.mapped(index).is_none() {
                core.map_new(k, index, rights).map_err(driver_error)?;
            } else if page.rights(stretch) != rights {
                k.protect(stretch.page_addr(index), rights).map_err(DriverError::Kernel)?;
            }
            page.writable = true;
            Ok(())
        })
    }

    /// Unmaps every page and frees its frame; keeps the trace and the counters.
    fn unbind(&mut self, k: &mut dyn MemoryKernel) {
        if self.core.unbind(k).is_none() {
            return;
        }
        for page in &mut self.pages {
            page.writable = false;
        }
    }

    fn core(&self) -> &DriverCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut DriverCore {
        &mut self.core
    }
}

#[cfg(test)]
mod tests;
