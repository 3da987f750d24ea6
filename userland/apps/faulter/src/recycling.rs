//! A stretch driver that recycles a fixed set of guaranteed frames: the frames are taken at
//! bind; a fault maps a free one, or, when none is free, takes the one of the page resident
//! longest (first in, first out) after unmapping it. Its pages' contents are not kept (there
//! is no backing store): a page that is evicted and touched again is mapped afresh. With
//! `zero`, the driver zero-fills every page it maps (a recycled frame holds the previous page's
//! bytes); without, it maps the frame as it is, which measures the bare fault path.
//!
//! Locked pages are never evicted. Guaranteed frames are never revoked, so `revoke` releases
//! nothing.

use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use stretch_driver::{
    DriverCore, DriverError, Fault, FaultError, Frame, FrameKind, Mapped, MemoryKernel, PAGE_SIZE,
    StretchDriver, StretchInfo,
};

/// See the module documentation.
pub struct RecyclingDriver {
    frames: usize,
    zero: bool,
    /// The stretch, the frame of each resident page, and the lock marks.
    core: DriverCore,
    /// Frames not mapped.
    free: Vec<Frame>,
    /// Resident, unlocked pages, oldest first.
    fifo: Fifo,
}

/// Pages in the order they are queued: a ring with room for one page a frame, which is never
/// short of room, since each queued page is resident on a frame of its own. It is filled on
/// every fault, so its `push_back` is small enough to inline there (`VecDeque`'s is a call).
#[derive(Default)]
struct Fifo {
    ring: Vec<usize>,
    /// Where the oldest page is.
    head: usize,
    len: usize,
}

impl Fifo {
    /// An empty queue with room for `room` pages.
    fn with_room(room: usize) -> Self {
        Fifo { ring: vec![0; room], head: 0, len: 0 }
    }

    /// Queues `page` last; a page past the room is not queued (no caller queues one).
    #[inline(always)]
    fn push_back(&mut self, page: usize) {
        let room = self.ring.len();
        if self.len == room {
            return;
        }
        let at = self.head + self.len;
        let at = if at >= room { at - room } else { at };
        if let Some(slot) = self.ring.get_mut(at) {
            *slot = page;
            self.len += 1;
        }
    }

    /// Takes the oldest page off the queue.
    #[inline]
    fn pop_front(&mut self) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let page = self.ring.get(self.head).copied()?;
        self.head = if self.head + 1 == self.ring.len() { 0 } else { self.head + 1 };
        self.len -= 1;
        Some(page)
    }

    /// The queued pages, oldest first.
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let (back, front) = self.ring.split_at(self.head);
        front.iter().chain(back).take(self.len).copied()
    }

    /// Whether `page` is queued.
    fn contains(&self, page: usize) -> bool {
        self.iter().any(|p| p == page)
    }

    /// Keeps only the pages `keep` says to, in their order.
    fn retain(&mut self, keep: impl Fn(usize) -> bool) {
        let kept: Vec<usize> = self.iter().filter(|&p| keep(p)).collect();
        self.ring[..kept.len()].copy_from_slice(&kept);
        (self.head, self.len) = (0, kept.len());
    }

    /// Empties the queue.
    fn clear(&mut self) {
        (self.head, self.len) = (0, 0);
    }
}

static ZEROS: [u8; PAGE_SIZE] = [0; PAGE_SIZE];

/// A frame for a new page: a free one, or the oldest resident page's.
#[inline(always)]
fn frame(
    core: &mut DriverCore,
    free: &mut Vec<Frame>,
    fifo: &mut Fifo,
    k: &mut dyn MemoryKernel,
) -> Result<Frame, FaultError> {
    if let Some(f) = free.pop() {
        return Ok(f);
    }
    let victim = fifo.pop_front().ok_or(FaultError::OutOfMemory)?;
    core.unmap(k, victim).map(|m| m.frame).map_err(FaultError::Kernel)
}

impl RecyclingDriver {
    /// A driver that will take `frames` guaranteed frames at bind.
    pub fn new(frames: usize, zero: bool) -> Self {
        RecyclingDriver {
            frames,
            zero,
            core: DriverCore::new(),
            free: Vec::new(),
            fifo: Fifo::default(),
        }
    }

    /// Maps a frame at page `index` (zero-filled if asked) and queues the page for eviction.
    fn map(
        &mut self,
        k: &mut dyn MemoryKernel,
        s: StretchInfo,
        index: usize,
    ) -> Result<(), FaultError> {
        let (core, free, fifo) = (&mut self.core, &mut self.free, &mut self.fifo);
        map(core, free, fifo, self.zero, k, s, index)?;
        fifo.push_back(index);
        Ok(())
    }
}

/// Maps a free or recycled frame at page `index` (zero-filling it with `zero`).
#[inline(always)]
fn map(
    core: &mut DriverCore,
    free: &mut Vec<Frame>,
    fifo: &mut Fifo,
    zero: bool,
    k: &mut dyn MemoryKernel,
    s: StretchInfo,
    index: usize,
) -> Result<(), FaultError> {
    let frame = frame(core, free, fifo, k)?;
    let mapped = Mapped { frame, kind: FrameKind::Guaranteed };
    if let Err(e) = core.map(k, index, mapped, s.page_rights()) {
        free.push(frame);
        return Err(FaultError::Kernel(e));
    }
    if zero {
        k.write(s.page_addr(index), &ZEROS).map_err(FaultError::Kernel)?;
    }
    Ok(())
}

/// `stats` is the core's provided method.
impl StretchDriver for RecyclingDriver {
    fn bind(&mut self, k: &mut dyn MemoryKernel, s: StretchInfo) -> Result<(), DriverError> {
        self.core.bind_with_pool(k, s, self.frames, &mut self.free)?;
        self.fifo = Fifo::with_room(self.frames);
        Ok(())
    }

    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        let Some((s, index)) = self.core.begin_fault(&fault)? else { return Ok(()) };
        self.map(k, s, index).inspect_err(|_| self.core.stats.failures += 1)
    }

    fn lock(&mut self, k: &mut dyn MemoryKernel, range: Range<usize>) -> Result<(), DriverError> {
        let (s, pages) = self.core.pages_in(range.clone())?;
        let unlocked = pages.clone().filter(|&i| !self.core.locked(i)).count();
        if unlocked + self.core.locked_count() >= self.frames {
            return Err(DriverError::OutOfMemory);
        }
        let (free, fifo, zero) = (&mut self.free, &mut self.fifo, self.zero);
        let r = self.core.lock(range, |core, index| {
            if core.mapped(index).is_none() {
                map(core, free, fifo, zero, k, s, index).map_err(|_| DriverError::OutOfMemory)?;
            }
            fifo.retain(|p| p != index);
            Ok(())
        });
        if r.is_err() {
            // The pages the call made resident or took off the queue and did not lock can be
            // evicted again.
            for index in pages {
                if self.core.mapped(index).is_some()
                    && !self.core.locked(index)
                    && !self.fifo.contains(index)
                {
                    self.fifo.push_back(index);
                }
            }
        }
        r
    }

    fn unlock(
        &mut self,
        _k: &mut dyn MemoryKernel,
        range: Range<usize>,
    ) -> Result<(), DriverError> {
        let fifo = &mut self.fifo;
        self.core.unlock(range, |index| fifo.push_back(index))
    }

    fn unbind(&mut self, k: &mut dyn MemoryKernel) {
        if self.core.unbind(k).is_none() {
            return;
        }
        for f in core::mem::take(&mut self.free) {
            self.core.free(k, f);
        }
        self.fifo.clear();
    }

    fn core(&self) -> &DriverCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut DriverCore {
        &mut self.core
    }
}
