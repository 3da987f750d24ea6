//! Frames for the host tests: [`MemFrames`], page buffers in a `Vec` with their mapping
//! recorded, which do what a pager asks ([`crate::plan::FrameOp`]) through the small
//! [`Frames`] trait. The pager itself never calls them: it returns its steps.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::error::PagerError;
use crate::pager::Pager;
use crate::plan::{FrameOp, Outcome, Step};
use crate::{PAGE_SIZE, Page};

/// Frames that do what a pager asks ([`FrameOp`]), for the host tests: [`MemFrames`], and
/// wrappers around it that inject failures. [`Frames::run`] does a call's steps until it is
/// answered. (The paged stretch driver does the same over the kernel's frames, with its own
/// loop.)
pub trait Frames {
    /// Runs [`Pager::fill`] on the contents of `frame`, in place, and says what it said:
    /// whether to map the page writable.
    fn fill(&mut self, frame: usize, pager: &mut Pager) -> Result<bool, PagerError>;

    /// Fills `frame` with zeros.
    fn zero(&mut self, frame: usize) -> Result<(), PagerError>;

    /// Runs [`Pager::save`] on the contents of `frame`, in place, telling it whether the page
    /// was `written`.
    fn save(&mut self, frame: usize, pager: &mut Pager, written: bool) -> Result<(), PagerError>;

    /// Maps `page` onto `frame` ([`FrameOp::Map`]).
    fn map(&mut self, page: usize, frame: usize, writable: bool) -> Result<(), PagerError>;

    /// Unmaps `page` from `frame` and says whether it was written.
    fn unmap(&mut self, page: usize, frame: usize) -> Result<bool, PagerError>;

    /// Gives `frame` back ([`FrameOp::Release`]).
    fn release(&mut self, frame: usize) -> Result<(), PagerError>;

    /// Whether [`Frames::unmap`] reports a dirty bit ([`Pager::set_tracks_dirty`]).
    fn tracks_dirty(&self) -> bool {
        false
    }

    /// Tells `pager` of the resident pages marked accessed, and clears the marks
    /// ([`FrameOp::Harvest`]); frames without accessed bits tell of none.
    fn harvest(&mut self, pager: &mut Pager) -> Result<(), PagerError> {
        let _ = pager;
        Ok(())
    }

    /// Evicts `page` from `frame` ([`FrameOp::Evict`]): unmaps it, saves the frame if it was
    /// written or `keep`, and maps it again (`writable`) if the save fails.
    fn evict(
        &mut self,
        pager: &mut Pager,
        page: usize,
        frame: usize,
        keep: bool,
        writable: bool,
    ) -> Result<bool, PagerError> {
        let written = self.unmap(page, frame)?;
        if (written || keep)
            && let Err(e) = self.save(frame, pager, written)
        {
            self.map(page, frame, writable)?;
            return Err(e);
        }
        Ok(written)
    }

    /// Does `step` and those that follow it until the call is answered.
    fn run(&mut self, pager: &mut Pager, step: Step) -> Result<Outcome, PagerError> {
        let mut step = step;
        loop {
            let op = match step {
                Step::Done(done) => return done,
                Step::Do(op) => op,
            };
            let answer = match op {
                FrameOp::Map { page, frame, writable } => self.map(page, frame, writable),
                FrameOp::Evict { page, frame, keep, writable } => {
                    let written = self.evict(pager, page, frame, keep, writable);
                    step = pager.resume(written);
                    continue;
                }
                FrameOp::Fill { page, frame } => {
                    self.fill(frame, pager).and_then(|writable| self.map(page, frame, writable))
                }
                FrameOp::Zero { page, frame, writable } => {
                    self.zero(frame).and_then(|()| self.map(page, frame, writable))
                }
                FrameOp::Save { frame } => self.save(frame, pager, false),
                FrameOp::Harvest => self.harvest(pager),
                FrameOp::Release { frame } => self.release(frame),
            };
            step = pager.resume(answer.map(|()| false));
        }
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
    fn fill(&mut self, frame: usize, pager: &mut Pager) -> Result<bool, PagerError> {
        self.check(frame)?;
        pager.fill(&mut self.frames[frame])
    }

    fn zero(&mut self, frame: usize) -> Result<(), PagerError> {
        self.check(frame)?;
        self.frames[frame].fill(0);
        Ok(())
    }

    fn save(&mut self, frame: usize, pager: &mut Pager, written: bool) -> Result<(), PagerError> {
        self.check(frame)?;
        pager.save(&self.frames[frame], written)
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

    fn harvest(&mut self, pager: &mut Pager) -> Result<(), PagerError> {
        if let Some(bits) = &mut self.bits {
            let resident: Vec<usize> = pager.resident_pages().collect();
            for page in resident {
                let (frame, _) = *self.mapped.get(&page).ok_or(PagerError::Frames)?;
                if core::mem::take(&mut bits[frame].0) {
                    pager.accessed(page);
                }
            }
        }
        Ok(())
    }
}
