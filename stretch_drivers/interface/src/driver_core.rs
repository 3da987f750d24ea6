//! [`DriverCore`]: the state and the bookkeeping every stretch driver shares, so that a driver
//! holds only its policy.
//!
//! A driver keeps the stretch it is bound to, a page table (the frame mapped at each page of
//! the stretch, and the kind of that frame), a lock mark a page, and its [`DriverStats`]; and
//! it does the same few things with them: refuse a second or malformed stretch at bind, find
//! the page a fault lies in, take frames (`n` guaranteed ones with rollback, for a pool or a
//! nailed stretch), map a frame at a page without leaking it when the kernel refuses, unmap a
//! page, and at unbind unmap every page and free every frame. `DriverCore` does those, counting
//! every frame taken and released and every page mapped in its stats, and the driver keeps its
//! policy around it: where a page's frame comes from, what fills it, what `revoke` gives back.
//!
//! A driver whose pages another structure tracks (the paged driver's pager) binds the core
//! with [`DriverCore::bind_untracked`]: it then holds the stretch, the stats and the frame
//! counts, and no page table.
//!
//! # Invariants
//!
//! - Bound, the page table has one entry a page of the stretch (none if untracked); an entry
//!   is `Some` exactly while the core has that page mapped, and holds the frame mapped there,
//!   which the domain holds.
//! - A lock mark is set only on a page the driver made resident on a frame `revoke` never
//!   takes (the driver's part: [`DriverCore::lock`] sets the mark after the driver's closure
//!   made the page so).
//! - Unbound, the core holds no frame it knows of: [`DriverCore::unbind`] unmaps and frees
//!   every page of the table, and clears the marks. Frames a driver keeps elsewhere (a pool of
//!   unused frames) are the driver's to free.

use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use crate::{
    DriverError, DriverStats, Fault, FaultError, Frame, FrameKind, MemError, MemoryKernel, Rights,
    StretchInfo,
};

/// A page of the stretch that is mapped: its frame and where the frame came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapped {
    /// The frame mapped at the page.
    pub frame: Frame,
    /// The part of the frames contract it came from.
    pub kind: FrameKind,
}

/// What every stretch driver keeps; see the [module](self) documentation.
#[derive(Debug, Default)]
pub struct DriverCore {
    stretch: Option<StretchInfo>,
    /// The frame mapped at each page of the stretch, while bound (empty if untracked).
    table: Vec<Option<Mapped>>,
    /// A lock mark a page of the stretch (empty if untracked).
    locked: Vec<bool>,
    /// What the driver has done (bindings do not reset it).
    pub stats: DriverStats,
}

/// The driver's error for a failed frame allocation.
#[inline]
pub const fn driver_error(e: MemError) -> DriverError {
    match e {
        MemError::NoFrames => DriverError::OutOfMemory,
        e => DriverError::Kernel(e),
    }
}

/// The thread's error for a failed kernel call in a fault.
#[inline]
pub const fn fault_error(e: MemError) -> FaultError {
    match e {
        MemError::NoFrames => FaultError::OutOfMemory,
        e => FaultError::Kernel(e),
    }
}

impl DriverCore {
    /// An unbound core.
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts managing `stretch`, with a page table and lock marks for its pages.
    ///
    /// Errors: [`DriverError::AlreadyBound`], [`DriverError::BadStretch`] (see
    /// [`StretchInfo::check`]).
    #[inline]
    pub fn bind(&mut self, stretch: StretchInfo) -> Result<(), DriverError> {
        self.bind_untracked(stretch)?;
        self.table = vec![None; stretch.pages];
        self.locked = vec![false; stretch.pages];
        Ok(())
    }

    /// Starts managing `stretch` without a page table: for a driver whose pages another
    /// structure tracks. The page-table calls then find no page mapped.
    ///
    /// Errors: those of [`DriverCore::bind`].
    #[inline]
    pub fn bind_untracked(&mut self, stretch: StretchInfo) -> Result<(), DriverError> {
        if self.stretch.is_some() {
            return Err(DriverError::AlreadyBound);
        }
        stretch.check()?;
        self.stretch = Some(stretch);
        Ok(())
    }

    /// Starts managing `stretch` as [`DriverCore::bind`] does, and takes `n` guaranteed frames
    /// onto `pool` ([`DriverCore::take_guaranteed`]); if they are not there, it gives back
    /// those it took and stays unbound.
    ///
    /// Errors: those of [`DriverCore::bind`] and [`DriverCore::take_guaranteed`].
    #[inline]
    pub fn bind_with_pool(
        &mut self,
        k: &mut dyn MemoryKernel,
        stretch: StretchInfo,
        n: usize,
        pool: &mut Vec<Frame>,
    ) -> Result<(), DriverError> {
        self.bind(stretch)?;
        self.take_guaranteed(k, n, pool).inspect_err(|_| {
            self.unbind(k);
        })
    }

    /// The stretch it manages, if bound.
    #[inline]
    pub fn stretch(&self) -> Option<StretchInfo> {
        self.stretch
    }

    /// The stretch it manages, or [`DriverError::NotBound`].
    #[inline]
    pub fn bound(&self) -> Result<StretchInfo, DriverError> {
        self.stretch.ok_or(DriverError::NotBound)
    }

    /// The stretch and the index of the page `fault` lies in.
    ///
    /// Errors: [`FaultError::NotBound`], [`FaultError::WrongStretch`] (the fault names another
    /// stretch, or its address lies outside this one).
    #[inline]
    pub fn page_of(&self, fault: &Fault) -> Result<(StretchInfo, usize), FaultError> {
        let stretch = self.stretch.ok_or(FaultError::NotBound)?;
        match stretch.page_index(fault.addr) {
            Some(index) if fault.stretch_base == stretch.base => Ok((stretch, index)),
            _ => Err(FaultError::WrongStretch),
        }
    }

    /// The start of every fault: counts it, and finds its stretch and page; `None` if the page
    /// is mapped already (another thread's fault got there first: nothing is left to do). A
    /// fault that fails here is counted as failed.
    ///
    /// Errors: those of [`DriverCore::page_of`], and [`FaultError::Denied`] (the stretch's
    /// rights do not allow the access).
    #[inline]
    pub fn begin_fault(
        &mut self,
        fault: &Fault,
    ) -> Result<Option<(StretchInfo, usize)>, FaultError> {
        self.stats.faults += 1;
        let found = self.page_of(fault).and_then(|(stretch, index)| {
            if !fault.access.allowed_by(stretch.page_rights()) {
                return Err(FaultError::Denied);
            }
            Ok((stretch, index))
        });
        match found {
            Ok((_, index)) if self.mapped(index).is_some() => Ok(None),
            Ok(found) => Ok(Some(found)),
            Err(e) => {
                self.stats.failures += 1;
                Err(e)
            }
        }
    }

    /// The stretch and the indices of the pages `range` covers ([`StretchInfo::pages_in`]).
    ///
    /// Errors: [`DriverError::NotBound`], [`DriverError::OutOfRange`].
    #[inline]
    pub fn pages_in(
        &self,
        range: Range<usize>,
    ) -> Result<(StretchInfo, Range<usize>), DriverError> {
        let stretch = self.bound()?;
        Ok((stretch, stretch.pages_in(range)?))
    }

    /// What is mapped at page `index`, if the core mapped it.
    #[inline]
    pub fn mapped(&self, index: usize) -> Option<Mapped> {
        self.table.get(index).copied().flatten()
    }

    /// How many pages are mapped.
    #[inline]
    pub fn resident(&self) -> usize {
        self.table.iter().flatten().count()
    }

    /// Takes a frame of `kind` from the contract, counting it.
    ///
    /// Errors: the kernel's ([`MemError::NoFrames`] when the contract has none left).
    #[inline]
    pub fn take_frame(
        &mut self,
        k: &mut dyn MemoryKernel,
        kind: FrameKind,
    ) -> Result<Frame, MemError> {
        let frame = k.frame_alloc(kind)?;
        self.stats.frames_allocated += 1;
        Ok(frame)
    }

    /// Takes `n` guaranteed frames onto `into`, all or none: if the contract has too few, the
    /// frames this call took are freed again and `into` is as it was.
    ///
    /// Errors: [`DriverError::OutOfMemory`], [`DriverError::Kernel`].
    #[inline]
    pub fn take_guaranteed(
        &mut self,
        k: &mut dyn MemoryKernel,
        n: usize,
        into: &mut Vec<Frame>,
    ) -> Result<(), DriverError> {
        let before = into.len();
        into.reserve(n);
        for _ in 0..n {
            match self.take_frame(k, FrameKind::Guaranteed) {
                Ok(frame) => into.push(frame),
                Err(e) => {
                    for frame in into.drain(before..) {
                        self.free(k, frame);
                    }
                    return Err(driver_error(e));
                }
            }
        }
        Ok(())
    }

    /// Gives a frame the driver holds and no page maps back to the kernel, counting it;
    /// whether the kernel took it.
    #[inline]
    pub fn free(&mut self, k: &mut dyn MemoryKernel, frame: Frame) -> bool {
        let ok = k.frame_free(frame).is_ok();
        self.stats.frames_released += u64::from(ok);
        ok
    }

    /// Maps `frame` (held by the driver, of `kind`) at page `index` with `rights`, and records
    /// it. If the kernel refuses, the frame stays the caller's, mapped nowhere.
    ///
    /// Errors: the kernel's ([`MemoryKernel::map`]).
    #[inline]
    pub fn map(
        &mut self,
        k: &mut dyn MemoryKernel,
        index: usize,
        mapped: Mapped,
        rights: Rights,
    ) -> Result<(), MemError> {
        let stretch = self.stretch.ok_or(MemError::NotManaged)?;
        k.map(stretch.page_addr(index), mapped.frame, rights)?;
        self.stats.maps += 1;
        if let Some(entry) = self.table.get_mut(index) {
            *entry = Some(mapped);
        }
        Ok(())
    }

    /// Maps a new guaranteed frame at page `index` with `rights` (the kernel hands it out
    /// zero-filled); if the kernel refuses the mapping, the frame is freed before the error is
    /// returned, so none leaks.
    ///
    /// Errors: those of [`MemoryKernel::frame_alloc`] and [`MemoryKernel::map`].
    #[inline]
    pub fn map_new(
        &mut self,
        k: &mut dyn MemoryKernel,
        index: usize,
        rights: Rights,
    ) -> Result<Frame, MemError> {
        let frame = self.take_frame(k, FrameKind::Guaranteed)?;
        let mapped = Mapped { frame, kind: FrameKind::Guaranteed };
        if let Err(e) = self.map(k, index, mapped, rights) {
            self.free(k, frame);
            return Err(e);
        }
        Ok(frame)
    }

    /// Unmaps page `index` and forgets it; returns what was mapped there, whose frame the
    /// driver still holds.
    ///
    /// Errors: [`MemError::NotMapped`] (the core has nothing mapped there), and the kernel's.
    #[inline]
    pub fn unmap(&mut self, k: &mut dyn MemoryKernel, index: usize) -> Result<Mapped, MemError> {
        let (stretch, mapped) = self.stretch.zip(self.mapped(index)).ok_or(MemError::NotMapped)?;
        k.unmap(stretch.page_addr(index))?;
        self.table[index] = None;
        Ok(mapped)
    }

    /// Unmaps page `index` and frees its frame; whether the frame went back to the kernel.
    #[inline]
    pub fn release(&mut self, k: &mut dyn MemoryKernel, index: usize) -> bool {
        match self.unmap(k, index) {
            Ok(mapped) => self.free(k, mapped.frame),
            Err(_) => false,
        }
    }

    /// Ends the binding: unmaps every page of the table and frees its frame, clears the lock
    /// marks, and returns the stretch it managed (`None`, doing nothing, if unbound).
    #[inline]
    pub fn unbind(&mut self, k: &mut dyn MemoryKernel) -> Option<StretchInfo> {
        self.stretch?;
        for index in 0..self.table.len() {
            self.release(k, index);
        }
        self.table.clear();
        self.locked.clear();
        self.stretch.take()
    }

    /// Whether page `index` is marked locked.
    #[inline]
    pub fn locked(&self, index: usize) -> bool {
        self.locked.get(index).copied().unwrap_or(false)
    }

    /// How many pages are marked locked.
    #[inline]
    pub fn locked_count(&self) -> usize {
        self.locked.iter().filter(|&&l| l).count()
    }

    /// Locks the pages of `range`: `make_resident(core, index)` makes each page not yet locked
    /// resident on a frame `revoke` never takes, and the page is marked. If it fails, the
    /// pages this call marked are unmarked again (they stay resident) and its error is
    /// returned, so a failed `lock` leaves no page newly locked, as
    /// [`crate::StretchDriver::lock`] requires.
    ///
    /// Errors: [`DriverError::NotBound`], [`DriverError::OutOfRange`], and `make_resident`'s.
    #[inline]
    pub fn lock(
        &mut self,
        range: Range<usize>,
        mut make_resident: impl FnMut(&mut Self, usize) -> Result<(), DriverError>,
    ) -> Result<(), DriverError> {
        let (_, pages) = self.pages_in(range)?;
        let mut newly: Vec<usize> = Vec::new();
        for index in pages {
            if self.locked(index) {
                continue;
            }
            if let Err(e) = make_resident(self, index) {
                for i in newly {
                    self.locked[i] = false;
                }
                return Err(e);
            }
            self.locked[index] = true;
            newly.push(index);
        }
        Ok(())
    }

    /// Clears the lock marks of the pages of `range`, calling `unlocked(index)` for each page
    /// that was marked.
    ///
    /// Errors: [`DriverError::NotBound`], [`DriverError::OutOfRange`].
    #[inline]
    pub fn unlock(
        &mut self,
        range: Range<usize>,
        mut unlocked: impl FnMut(usize),
    ) -> Result<(), DriverError> {
        let (_, pages) = self.pages_in(range)?;
        for index in pages {
            if let Some(mark) = self.locked.get_mut(index)
                && core::mem::take(mark)
            {
                unlocked(index);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
