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
    DriverCore, DriverError, Fault, FaultError, Frame, FrameKind, Mapped, MemError, MemoryKernel,
    PAGE_SIZE, Rights, StretchDriver, StretchInfo,
};

/// The physical driver. See the crate documentation.
#[derive(Debug, Default)]
pub struct PhysicalDriver {
    pool_size: usize,
    /// The stretch, the frame (and its kind) of each resident page, and the lock marks.
    core: DriverCore,
    /// Unused guaranteed frames.
    pool: Vec<Frame>,
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
        self.core.stretch()
    }

    /// How many pages are resident.
    pub fn resident(&self) -> usize {
        self.core.resident()
    }

    /// Whether page `index` is resident, and on which kind of frame.
    pub fn residence(&self, index: usize) -> Option<FrameKind> {
        self.core.mapped(index).map(|m| m.kind)
    }

    /// How many pages are locked.
    pub fn locked(&self) -> usize {
        self.core.locked_count()
    }

    /// How many pool frames are left.
    pub fn pool_left(&self) -> usize {
        self.pool.len()
    }
}

/// A frame for a page: from the pool, else a new guaranteed frame, else (if `optimistic`) an
/// optimistic one. `Ok(None)` when the contract has none.
fn take_frame(
    core: &mut DriverCore,
    pool: &mut Vec<Frame>,
    k: &mut dyn MemoryKernel,
    optimistic: bool,
) -> Result<Option<Mapped>, MemError> {
    if let Some(frame) = pool.pop() {
        return Ok(Some(Mapped { frame, kind: FrameKind::Guaranteed }));
    }
    let kinds: &[FrameKind] = if optimistic {
        &[FrameKind::Guaranteed, FrameKind::Optimistic]
    } else {
        &[FrameKind::Guaranteed]
    };
    for &kind in kinds {
        match core.take_frame(k, kind) {
            Ok(frame) => return Ok(Some(Mapped { frame, kind })),
            Err(MemError::NoFrames) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Maps `new` at page `index` with the stretch's page rights, or gives it back (to the pool
/// if it is guaranteed, since it is still zero-filled) when the kernel refuses.
fn map_page(
    core: &mut DriverCore,
    pool: &mut Vec<Frame>,
    k: &mut dyn MemoryKernel,
    index: usize,
    new: Mapped,
) -> Result<(), MemError> {
    let rights = core.bound().map_err(|_| MemError::NotManaged)?.page_rights();
    core.map(k, index, new, rights).inspect_err(|_| match new.kind {
        FrameKind::Guaranteed => pool.push(new.frame),
        FrameKind::Optimistic => {
            core.free(k, new.frame);
        }
    })
}

/// Makes page `index` resident on a guaranteed frame (the driver's part of `lock`).
fn make_guaranteed(
    core: &mut DriverCore,
    pool: &mut Vec<Frame>,
    k: &mut dyn MemoryKernel,
    index: usize,
) -> Result<(), DriverError> {
    let old = core.mapped(index);
    if old.is_some_and(|m| m.kind == FrameKind::Guaranteed) {
        return Ok(());
    }
    let stretch = core.bound()?;
    let new = take_frame(core, pool, k, false)
        .map_err(DriverError::Kernel)?
        .ok_or(DriverError::OutOfMemory)?;
    let va = stretch.page_addr(index);
    if old.is_some() {
        // Move the page off its optimistic frame. Without the write right nobody could
        // have written it, so it is all zeros and there is nothing to copy.
        let copy = stretch.page_rights().contains(Rights::WRITE);
        let mut data = if copy { vec![0u8; PAGE_SIZE] } else { Vec::new() };
        let moved = k.read(va, &mut data).and_then(|()| core.unmap(k, index));
        let old = match moved {
            Ok(old) => old,
            Err(e) => {
                pool.push(new.frame);
                return Err(DriverError::Kernel(e));
            }
        };
        core.free(k, old.frame);
        map_page(core, pool, k, index, new).map_err(DriverError::Kernel)?;
        k.write(va, &data).map_err(DriverError::Kernel)?;
    } else {
        map_page(core, pool, k, index, new).map_err(DriverError::Kernel)?;
    }
    Ok(())
}

impl StretchDriver for PhysicalDriver {
    /// Takes the pool's guaranteed frames; maps nothing.
    ///
    /// Errors: [`DriverError::OutOfMemory`] when the contract has too few guaranteed frames
    /// for the pool.
    fn bind(&mut self, k: &mut dyn MemoryKernel, stretch: StretchInfo) -> Result<(), DriverError> {
        self.core.bind_with_pool(k, stretch, self.pool_size, &mut self.pool)
    }

    /// Maps a zero-filled frame at the faulting page: pool, guaranteed, optimistic, in that
    /// order of preference.
    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        // A page mapped already has every right the stretch allows: another fault got there
        // first.
        let Some((_, index)) = self.core.begin_fault(&fault)? else { return Ok(()) };
        let (core, pool) = (&mut self.core, &mut self.pool);
        let r = take_frame(core, pool, k, true)
            .map_err(FaultError::Kernel)
            .and_then(|frame| frame.ok_or(FaultError::OutOfMemory))
            .and_then(|frame| map_page(core, pool, k, index, frame).map_err(FaultError::Kernel));
        if r.is_err() {
            self.core.stats.failures += 1;
        }
        r
    }

    /// Makes the pages resident on guaranteed frames and locks them. On failure the pages this
    /// call locked are unlocked again (they stay resident).
    fn lock(&mut self, k: &mut dyn MemoryKernel, range: Range<usize>) -> Result<(), DriverError> {
        let pool = &mut self.pool;
        self.core.lock(range, |core, index| make_guaranteed(core, pool, k, index))
    }

    /// Unmaps and frees pages on optimistic frames (their contents are lost), then frees
    /// pool frames. Pages on guaranteed frames stay.
    fn revoke(&mut self, k: &mut dyn MemoryKernel, frames_wanted: usize) -> usize {
        let Some(stretch) = self.core.stretch() else { return 0 };
        let mut released = 0;
        for index in 0..stretch.pages {
            if released == frames_wanted {
                return released;
            }
            let optimistic =
                self.core.mapped(index).is_some_and(|m| m.kind == FrameKind::Optimistic);
            if optimistic && !self.core.locked(index) && self.core.release(k, index) {
                released += 1;
            }
        }
        while released < frames_wanted {
            let Some(frame) = self.pool.pop() else { break };
            if self.core.free(k, frame) {
                released += 1;
            }
        }
        released
    }

    fn unbind(&mut self, k: &mut dyn MemoryKernel) {
        if self.core.unbind(k).is_none() {
            return;
        }
        while let Some(frame) = self.pool.pop() {
            self.core.free(k, frame);
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
