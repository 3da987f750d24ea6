//! The frames a pager pages into, behind the small [`Frames`] trait: the paged stretch
//! driver implements it over the kernel's frames and mappings, the host tests with
//! [`MemFrames`], page buffers in a `Vec`.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::error::PagerError;
use crate::{PAGE_SIZE, Page};

/// The frames a pager pages into, numbered from 0 (the pager knows how many: it is made for
/// them), and the mapping of pages onto them. The pager does not own them: each call that
/// pages is handed them, so the paged stretch driver can build them around the kernel it is
/// given for that call. The pager fills a frame before mapping it, and unmaps a page before
/// saving its frame, so no thread sees a half-filled page or changes one being saved.
///
/// Frames whose mappings keep the hardware's accessed and dirty bits say so
/// ([`Frames::tracks_dirty`], [`Frames::referenced`]): the pager then maps clean pages
/// writable and learns at eviction whether they were written, instead of taking a protection
/// fault on the first write, and its replacement policy hears of accesses that never faulted.
pub trait Frames {
    /// Fills `frame` out of view: runs `fill` on its contents (which it must overwrite whole),
    /// in place, so a page decompressed or read from disk is written once.
    fn fill(
        &mut self,
        frame: usize,
        fill: &mut dyn FnMut(&mut Page) -> Result<(), PagerError>,
    ) -> Result<(), PagerError>;

    /// Fills `frame` with zeros.
    fn zero(&mut self, frame: usize) -> Result<(), PagerError>;

    /// Runs `save` on the contents of `frame` (whose page the pager has unmapped), in place.
    fn save(
        &mut self,
        frame: usize,
        save: &mut dyn FnMut(&Page) -> Result<(), PagerError>,
    ) -> Result<(), PagerError>;

    /// Maps `page` of the stretch onto `frame`, writable or read-only (a write to a
    /// read-only page faults again, which is how the pager learns it is dirty unless the
    /// frames track dirty bits).
    fn map(&mut self, page: usize, frame: usize, writable: bool) -> Result<(), PagerError>;

    /// Unmaps `page`, which is mapped on `frame`, and says whether it was written while it was
    /// mapped writable, as the hardware's dirty bit tells (always `false` for frames that do
    /// not [track dirty bits](Frames::tracks_dirty)).
    fn unmap(&mut self, page: usize, frame: usize) -> Result<bool, PagerError>;

    /// Gives `frame` (unmapped) back: the pager never uses it again.
    fn release(&mut self, frame: usize) -> Result<(), PagerError>;

    /// Whether [`Frames::unmap`] reports the hardware's dirty bit: if so, the pager maps
    /// clean pages writable.
    fn tracks_dirty(&self) -> bool {
        false
    }

    /// Calls `found` with each of the `resident` pages (mapped, in ascending order, as the
    /// pager holds them) that the hardware marked accessed since the last call, and clears the
    /// marks. Frames without accessed bits report nothing.
    fn referenced(
        &mut self,
        resident: &mut dyn Iterator<Item = usize>,
        found: &mut dyn FnMut(usize),
    ) -> Result<(), PagerError> {
        let _ = (resident, found);
        Ok(())
    }
}

/// Frames as page buffers in memory, with the mapping recorded, for host tests. Made with
/// [`MemFrames::with_bits`], they keep accessed and dirty bits as a page table would: an
/// access through [`MemFrames::access`] or [`MemFrames::frame_mut`] marks the frame.
#[derive(Clone, Debug)]
pub struct MemFrames {
    frames: Vec<Box<Page>>,
    released: Vec<bool>,
    /// Page to (frame, writable).
    mapped: BTreeMap<usize, (usize, bool)>,
    /// Accessed and dirty bits by frame, if kept.
    bits: Option<Vec<(bool, bool)>>,
}

impl MemFrames {
    /// `count` zeroed frames, without accessed or dirty bits.
    pub fn new(count: usize) -> MemFrames {
        MemFrames {
            frames: (0..count).map(|_| Box::new([0u8; PAGE_SIZE])).collect(),
            released: alloc::vec![false; count],
            mapped: BTreeMap::new(),
            bits: None,
        }
    }

    /// `count` zeroed frames that keep accessed and dirty bits.
    pub fn with_bits(count: usize) -> MemFrames {
        MemFrames { bits: Some(alloc::vec![(false, false); count]), ..MemFrames::new(count) }
    }

    /// The contents of `frame`.
    pub fn frame(&self, frame: usize) -> &Page {
        &self.frames[frame]
    }

    /// The contents of `frame`, to change them (what a thread's stores do: the frame is marked
    /// accessed and dirty).
    pub fn frame_mut(&mut self, frame: usize) -> &mut Page {
        if let Some(bits) = &mut self.bits {
            bits[frame] = (true, true);
        }
        &mut self.frames[frame]
    }

    /// What the hardware does on an access to `page`: the frame it is mapped on, marked
    /// accessed (and dirty for a write), or `None` if the access faults (not mapped, or a write
    /// to a read-only page).
    pub fn access(&mut self, page: usize, write: bool) -> Option<usize> {
        let (frame, writable) = self.mapping(page)?;
        if write && !writable {
            return None;
        }
        if let Some(bits) = &mut self.bits {
            bits[frame].0 = true;
            bits[frame].1 |= write;
        }
        Some(frame)
    }

    /// Where `page` is mapped: its frame and whether writable.
    pub fn mapping(&self, page: usize) -> Option<(usize, bool)> {
        self.mapped.get(&page).copied()
    }

    /// Frames released so far.
    pub fn released(&self) -> usize {
        self.released.iter().filter(|r| **r).count()
    }

    fn check(&self, frame: usize) -> Result<(), PagerError> {
        if frame < self.frames.len() && !self.released[frame] {
            Ok(())
        } else {
            Err(PagerError::Frames)
        }
    }
}

impl Frames for MemFrames {
    fn fill(
        &mut self,
        frame: usize,
        fill: &mut dyn FnMut(&mut Page) -> Result<(), PagerError>,
    ) -> Result<(), PagerError> {
        self.check(frame)?;
        fill(&mut self.frames[frame])
    }

    fn zero(&mut self, frame: usize) -> Result<(), PagerError> {
        self.check(frame)?;
        self.frames[frame].fill(0);
        Ok(())
    }

    fn save(
        &mut self,
        frame: usize,
        save: &mut dyn FnMut(&Page) -> Result<(), PagerError>,
    ) -> Result<(), PagerError> {
        self.check(frame)?;
        save(&self.frames[frame])
    }

    fn map(&mut self, page: usize, frame: usize, writable: bool) -> Result<(), PagerError> {
        self.check(frame)?;
        if self.mapped.iter().any(|(p, (f, _))| *f == frame && *p != page) {
            return Err(PagerError::Frames);
        }
        if let Some(bits) = &mut self.bits
            && self.mapped.get(&page).is_none_or(|(f, _)| *f != frame)
        {
            bits[frame] = (false, false);
        }
        self.mapped.insert(page, (frame, writable));
        Ok(())
    }

    fn unmap(&mut self, page: usize, frame: usize) -> Result<bool, PagerError> {
        match self.mapped.get(&page) {
            Some((f, _)) if *f == frame => {
                self.mapped.remove(&page);
                Ok(self.bits.as_mut().is_some_and(|bits| core::mem::take(&mut bits[frame]).1))
            }
            _ => Err(PagerError::Frames),
        }
    }

    fn release(&mut self, frame: usize) -> Result<(), PagerError> {
        self.check(frame)?;
        if self.mapped.values().any(|(f, _)| *f == frame) {
            return Err(PagerError::Frames);
        }
        self.released[frame] = true;
        Ok(())
    }

    fn tracks_dirty(&self) -> bool {
        self.bits.is_some()
    }

    fn referenced(
        &mut self,
        resident: &mut dyn Iterator<Item = usize>,
        found: &mut dyn FnMut(usize),
    ) -> Result<(), PagerError> {
        if let Some(bits) = &mut self.bits {
            for page in resident {
                let (frame, _) = *self.mapped.get(&page).ok_or(PagerError::Frames)?;
                if core::mem::take(&mut bits[frame].0) {
                    found(page);
                }
            }
        }
        Ok(())
    }
}
