//! A stretch driver that recycles a fixed set of guaranteed frames: the frames are taken at
//! bind; a fault maps a free one, or, when none is free, takes the one of the page resident
//! longest (first in, first out) after unmapping it. Its pages' contents are not kept (there
//! is no backing store): a page that is evicted and touched again is mapped afresh. With
//! `zero`, the driver zero-fills every page it maps (a recycled frame holds the previous page's
//! bytes); without, it maps the frame as it is, which measures the bare fault path.
//!
//! Locked pages are never evicted. Guaranteed frames are never revoked, so `revoke` releases
//! nothing.

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use stretch_driver::{
    DriverError, DriverStats, Fault, FaultError, Frame, FrameKind, MemoryKernel, PAGE_SIZE,
    StretchDriver, StretchInfo,
};

/// See the module documentation.
pub struct RecyclingDriver {
    frames: usize,
    zero: bool,
    stretch: Option<StretchInfo>,
    /// The frame of each resident page.
    pages: Vec<Option<Frame>>,
    locked: Vec<bool>,
    /// Frames not mapped.
    free: Vec<Frame>,
    /// Resident, unlocked pages, oldest first.
    fifo: VecDeque<usize>,
    stats: DriverStats,
}

static ZEROS: [u8; PAGE_SIZE] = [0; PAGE_SIZE];

impl RecyclingDriver {
    /// A driver that will take `frames` guaranteed frames at bind.
    pub fn new(frames: usize, zero: bool) -> Self {
        RecyclingDriver {
            frames,
            zero,
            stretch: None,
            pages: Vec::new(),
            locked: Vec::new(),
            free: Vec::new(),
            fifo: VecDeque::new(),
            stats: DriverStats::default(),
        }
    }

    /// A frame for a new page: a free one, or the oldest resident page's.
    fn frame(&mut self, k: &mut dyn MemoryKernel, s: StretchInfo) -> Result<Frame, FaultError> {
        if let Some(f) = self.free.pop() {
            return Ok(f);
        }
        let victim = self.fifo.pop_front().ok_or(FaultError::OutOfMemory)?;
        let frame = k.unmap(s.page_addr(victim)).map_err(FaultError::Kernel)?;
        self.pages[victim] = None;
        Ok(frame)
    }

    fn map(
        &mut self,
        k: &mut dyn MemoryKernel,
        s: StretchInfo,
        index: usize,
    ) -> Result<(), FaultError> {
        let frame = self.frame(k, s)?;
        if let Err(e) = k.map(s.page_addr(index), frame, s.page_rights()) {
            self.free.push(frame);
            return Err(FaultError::Kernel(e));
        }
        if self.zero {
            k.write(s.page_addr(index), &ZEROS).map_err(FaultError::Kernel)?;
        }
        self.pages[index] = Some(frame);
        self.fifo.push_back(index);
        self.stats.maps += 1;
        Ok(())
    }
}

impl StretchDriver for RecyclingDriver {
    fn bind(&mut self, k: &mut dyn MemoryKernel, s: StretchInfo) -> Result<(), DriverError> {
        if self.stretch.is_some() {
            return Err(DriverError::AlreadyBound);
        }
        s.check()?;
        for _ in 0..self.frames {
            match k.frame_alloc(FrameKind::Guaranteed) {
                Ok(f) => self.free.push(f),
                Err(_) => {
                    for f in self.free.drain(..) {
                        let _ = k.frame_free(f);
                    }
                    return Err(DriverError::OutOfMemory);
                }
            }
        }
        self.stats.frames_allocated += self.frames as u64;
        self.pages = vec![None; s.pages];
        self.locked = vec![false; s.pages];
        self.stretch = Some(s);
        Ok(())
    }

    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        self.stats.faults += 1;
        let s = self.stretch.ok_or(FaultError::NotBound)?;
        let index = s.page_index(fault.addr).ok_or(FaultError::WrongStretch)?;
        if !fault.access.allowed_by(s.rights) {
            self.stats.failures += 1;
            return Err(FaultError::Denied);
        }
        if self.pages[index].is_some() {
            return Ok(());
        }
        self.map(k, s, index).inspect_err(|_| self.stats.failures += 1)
    }

    fn lock(&mut self, k: &mut dyn MemoryKernel, range: Range<usize>) -> Result<(), DriverError> {
        let s = self.stretch.ok_or(DriverError::NotBound)?;
        let pages = s.pages_in(range)?;
        let unlocked = self.locked[pages.clone()].iter().filter(|l| !**l).count();
        if unlocked + self.locked.iter().filter(|l| **l).count() >= self.frames {
            return Err(DriverError::OutOfMemory);
        }
        for index in pages {
            if self.pages[index].is_none() {
                self.map(k, s, index).map_err(|_| DriverError::OutOfMemory)?;
            }
            self.fifo.retain(|&p| p != index);
            self.locked[index] = true;
        }
        Ok(())
    }

    fn unlock(
        &mut self,
        _k: &mut dyn MemoryKernel,
        range: Range<usize>,
    ) -> Result<(), DriverError> {
        let s = self.stretch.ok_or(DriverError::NotBound)?;
        for index in s.pages_in(range)? {
            if core::mem::take(&mut self.locked[index]) {
                self.fifo.push_back(index);
            }
        }
        Ok(())
    }

    fn revoke(&mut self, _k: &mut dyn MemoryKernel, _frames_wanted: usize) -> usize {
        0
    }

    fn unbind(&mut self, k: &mut dyn MemoryKernel) {
        let Some(s) = self.stretch.take() else { return };
        for (index, page) in self.pages.iter_mut().enumerate() {
            if let Some(f) = page.take()
                && k.unmap(s.page_addr(index)).is_ok()
            {
                self.free.push(f);
            }
        }
        for f in self.free.drain(..) {
            if k.frame_free(f).is_ok() {
                self.stats.frames_released += 1;
            }
        }
        self.fifo.clear();
        self.locked.clear();
    }

    fn stats(&self) -> DriverStats {
        self.stats
    }
}
