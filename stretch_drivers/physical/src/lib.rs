//! The physical stretch driver: pages are zero-filled on demand and live only in physical
//! memory.
//!
//! Nothing is mapped at bind. The first touch of a page faults, and the driver maps a frame
//! for it: a frame from its pool if one is left, else a new guaranteed frame, else an
//! optimistic one; if the contract has no frame at all the fault fails with
//! [`FaultError::OutOfMemory`] and the faulting thread gets that error. The pool is a number of
//! guaranteed frames taken at bind ([`PhysicalDriver::with_pool`]; none by default), which
//! reserves memory for the stretch that other stretches of the domain cannot take.
//!
//! **There is no backing store.** When the kernel asks for frames back, `revoke` unmaps pages
//! that sit on optimistic frames and frees those frames, then frees unused pool frames; the
//! contents of a revoked page are lost, and its next touch faults and finds a zeroed page
//! again. That is the contract of this driver: use it for memory the program can recompute or
//! does not mind losing beyond its guarantee (caches, scratch space), or lock the pages that
//! matter. Pages on guaranteed frames are never released by `revoke`.
//!
//! `lock` makes pages resident on guaranteed frames: an absent page is mapped, and a page on an
//! optimistic frame is moved to a guaranteed one (its contents copied). Locked pages are
//! therefore never revocable. `unlock` only clears the mark.
//!
//! # Invariants
//!
//! - Every frame the driver holds is either in the pool (guaranteed, unused, still zero-filled:
//!   pool frames are never mapped and returned) or mapped at exactly one page of the stretch.
//! - A locked page is mapped on a guaranteed frame.
//! - Pages are mapped with the stretch's page rights; the driver frees a frame only after
//!   unmapping it.
//!
//! # Not implemented
//!
//! No eviction between pages of its own: when the contract is used up, faults fail rather
//! than recycling a resident page (that is what a paged driver with a backing store does).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use stretch_driver::{
    DriverError, DriverStats, Fault, FaultError, Frame, FrameKind, MemError, MemoryKernel,
    PAGE_SIZE, Rights, StretchDriver, StretchInfo,
};

/// A resident page.
#[derive(Clone, Copy, Debug)]
struct Page {
    frame: Frame,
    kind: FrameKind,
    locked: bool,
}

/// The physical driver. See the crate documentation.
#[derive(Debug, Default)]
pub struct PhysicalDriver {
    pool_size: usize,
    stretch: Option<StretchInfo>,
    /// One entry per page of the stretch while bound.
    pages: Vec<Option<Page>>,
    /// Unused guaranteed frames.
    pool: Vec<Frame>,
    stats: DriverStats,
}

impl PhysicalDriver {
    /// An unbound driver with no pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// An unbound driver that takes `frames` guaranteed frames into its pool at bind.
    pub fn with_pool(frames: usize) -> Self {
        PhysicalDriver { pool_size: frames, ..Self::default() }
    }

    /// The stretch it manages, if bound.
    pub fn stretch(&self) -> Option<StretchInfo> {
        self.stretch
    }

    /// How many pages are resident.
    pub fn resident(&self) -> usize {
        self.pages.iter().flatten().count()
    }

    /// Whether page `index` is resident, and on which kind of frame.
    pub fn residence(&self, index: usize) -> Option<FrameKind> {
        self.pages.get(index).copied().flatten().map(|p| p.kind)
    }

    /// How many pages are locked.
    pub fn locked(&self) -> usize {
        self.pages.iter().flatten().filter(|p| p.locked).count()
    }

    /// How many pool frames are left.
    pub fn pool_left(&self) -> usize {
        self.pool.len()
    }

    /// A frame for a page: from the pool, else a new guaranteed frame, else (if `optimistic`)
    /// an optimistic one. `Ok(None)` when the contract has none.
    fn take_frame(
        &mut self,
        k: &mut dyn MemoryKernel,
        optimistic: bool,
    ) -> Result<Option<(Frame, FrameKind)>, MemError> {
        if let Some(frame) = self.pool.pop() {
            return Ok(Some((frame, FrameKind::Guaranteed)));
        }
        let kinds: &[FrameKind] = if optimistic {
            &[FrameKind::Guaranteed, FrameKind::Optimistic]
        } else {
            &[FrameKind::Guaranteed]
        };
        for &kind in kinds {
            match k.frame_alloc(kind) {
                Ok(frame) => {
                    self.stats.frames_allocated += 1;
                    return Ok(Some((frame, kind)));
                }
                Err(MemError::NoFrames) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Frees a frame the driver holds and no page maps.
    fn free(&mut self, k: &mut dyn MemoryKernel, frame: Frame) -> bool {
        let ok = k.frame_free(frame).is_ok();
        if ok {
            self.stats.frames_released += 1;
        }
        ok
    }

    /// Maps `frame` at page `index`, or gives it back (to the pool if it is unused and
    /// guaranteed, since it is still zero-filled) when the kernel refuses.
    fn map_page(
        &mut self,
        k: &mut dyn MemoryKernel,
        stretch: StretchInfo,
        index: usize,
        (frame, kind): (Frame, FrameKind),
    ) -> Result<(), MemError> {
        if let Err(e) = k.map(stretch.page_addr(index), frame, stretch.page_rights()) {
            match kind {
                FrameKind::Guaranteed => self.pool.push(frame),
                FrameKind::Optimistic => {
                    self.free(k, frame);
                }
            }
            return Err(e);
        }
        self.stats.maps += 1;
        self.pages[index] = Some(Page { frame, kind, locked: false });
        Ok(())
    }

    /// The work of `fault`.
    fn resolve(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        let stretch = self.stretch.ok_or(FaultError::NotBound)?;
        let index = match stretch.page_index(fault.addr) {
            Some(i) if fault.stretch_base == stretch.base => i,
            _ => return Err(FaultError::WrongStretch),
        };
        if !fault.access.allowed_by(stretch.page_rights()) {
            return Err(FaultError::Denied);
        }
        if self.pages[index].is_some() {
            // Mapped with every right the stretch allows: another fault got here first.
            return Ok(());
        }
        let frame =
            self.take_frame(k, true).map_err(FaultError::Kernel)?.ok_or(FaultError::OutOfMemory)?;
        self.map_page(k, stretch, index, frame).map_err(FaultError::Kernel)
    }

    /// Makes page `index` resident on a guaranteed frame and locks it.
    fn lock_page(
        &mut self,
        k: &mut dyn MemoryKernel,
        stretch: StretchInfo,
        index: usize,
    ) -> Result<(), DriverError> {
        let old = self.pages[index];
        if let Some(Page { kind: FrameKind::Guaranteed, .. }) = old {
            self.pages[index].as_mut().expect("resident").locked = true;
            return Ok(());
        }
        let new = self
            .take_frame(k, false)
            .map_err(DriverError::Kernel)?
            .ok_or(DriverError::OutOfMemory)?;
        let va = stretch.page_addr(index);
        if let Some(old) = old {
            // Move the page off its optimistic frame. Without the write right nobody could
            // have written it, so it is all zeros and there is nothing to copy.
            let copy = stretch.page_rights().contains(Rights::WRITE);
            let mut data = if copy { vec![0u8; PAGE_SIZE] } else { Vec::new() };
            let moved = k.read(va, &mut data).and_then(|()| k.unmap(va));
            if let Err(e) = moved {
                self.pool.push(new.0);
                return Err(DriverError::Kernel(e));
            }
            self.pages[index] = None;
            self.free(k, old.frame);
            self.map_page(k, stretch, index, new).map_err(DriverError::Kernel)?;
            k.write(va, &data).map_err(DriverError::Kernel)?;
        } else {
            self.map_page(k, stretch, index, new).map_err(DriverError::Kernel)?;
        }
        self.pages[index].as_mut().expect("resident").locked = true;
        Ok(())
    }
}

impl StretchDriver for PhysicalDriver {
    /// Takes the pool's guaranteed frames; maps nothing.
    ///
    /// Errors: [`DriverError::OutOfMemory`] when the contract has too few guaranteed frames
    /// for the pool.
    fn bind(&mut self, k: &mut dyn MemoryKernel, stretch: StretchInfo) -> Result<(), DriverError> {
        if self.stretch.is_some() {
            return Err(DriverError::AlreadyBound);
        }
        stretch.check()?;
        for _ in 0..self.pool_size {
            match k.frame_alloc(FrameKind::Guaranteed) {
                Ok(frame) => {
                    self.stats.frames_allocated += 1;
                    self.pool.push(frame);
                }
                Err(e) => {
                    while let Some(frame) = self.pool.pop() {
                        self.free(k, frame);
                    }
                    return Err(match e {
                        MemError::NoFrames => DriverError::OutOfMemory,
                        e => DriverError::Kernel(e),
                    });
                }
            }
        }
        self.pages = vec![None; stretch.pages];
        self.stretch = Some(stretch);
        Ok(())
    }

    /// Maps a zero-filled frame at the faulting page: pool, guaranteed, optimistic, in that
    /// order of preference.
    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        self.stats.faults += 1;
        let r = self.resolve(k, fault);
        if r.is_err() {
            self.stats.failures += 1;
        }
        r
    }

    /// Makes the pages resident on guaranteed frames and locks them. On failure the pages this
    /// call locked are unlocked again (they stay resident).
    fn lock(&mut self, k: &mut dyn MemoryKernel, range: Range<usize>) -> Result<(), DriverError> {
        let stretch = self.stretch.ok_or(DriverError::NotBound)?;
        let pages = stretch.pages_in(range)?;
        let mut newly: Vec<usize> = Vec::new();
        for index in pages {
            if self.pages[index].is_some_and(|p| p.locked) {
                continue;
            }
            if let Err(e) = self.lock_page(k, stretch, index) {
                for i in newly {
                    if let Some(p) = self.pages[i].as_mut() {
                        p.locked = false;
                    }
                }
                return Err(e);
            }
            newly.push(index);
        }
        Ok(())
    }

    fn unlock(
        &mut self,
        _k: &mut dyn MemoryKernel,
        range: Range<usize>,
    ) -> Result<(), DriverError> {
        let stretch = self.stretch.ok_or(DriverError::NotBound)?;
        for page in self.pages[stretch.pages_in(range)?].iter_mut().flatten() {
            page.locked = false;
        }
        Ok(())
    }

    /// Unmaps and frees pages on optimistic frames (their contents are lost), then frees
    /// pool frames. Pages on guaranteed frames stay.
    fn revoke(&mut self, k: &mut dyn MemoryKernel, frames_wanted: usize) -> usize {
        let Some(stretch) = self.stretch else { return 0 };
        let mut released = 0;
        for index in 0..self.pages.len() {
            if released == frames_wanted {
                return released;
            }
            let Some(page) = self.pages[index] else { continue };
            if page.kind != FrameKind::Optimistic || page.locked {
                continue;
            }
            if k.unmap(stretch.page_addr(index)).is_ok() {
                self.pages[index] = None;
                if self.free(k, page.frame) {
                    released += 1;
                }
            }
        }
        while released < frames_wanted {
            let Some(frame) = self.pool.pop() else { break };
            if self.free(k, frame) {
                released += 1;
            }
        }
        released
    }

    fn unbind(&mut self, k: &mut dyn MemoryKernel) {
        let Some(stretch) = self.stretch.take() else { return };
        for index in 0..self.pages.len() {
            if let Some(page) = self.pages[index].take()
                && k.unmap(stretch.page_addr(index)).is_ok()
            {
                self.free(k, page.frame);
            }
        }
        self.pages.clear();
        while let Some(frame) = self.pool.pop() {
            self.free(k, frame);
        }
    }

    fn stats(&self) -> DriverStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;
