//! The frames a pager pages into, behind the small [`Frames`] trait: the paged stretch
//! driver implements it over the kernel's frames and mappings, the host tests with
//! [`MemFrames`], page buffers in a `Vec`.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::error::VmmError;
use crate::{PAGE_SIZE, Page};

/// The frames a pager pages into, numbered from 0 (the pager knows how many: it is made for
/// them), and the mapping of pages onto them. The pager does not own them: each call that
/// pages is handed them, so the paged stretch driver can build them around the kernel it is
/// given for that call. The pager fills a frame before mapping it, and unmaps a page before
/// saving its frame, so no thread sees a half-filled page or changes one being saved.
pub trait Frames {
    /// Fills `frame` with `data`.
    fn fill(&mut self, frame: usize, data: &Page) -> Result<(), VmmError>;

    /// Fills `frame` with zeros.
    fn zero(&mut self, frame: usize) -> Result<(), VmmError>;

    /// Copies `frame` into `out`.
    fn save(&mut self, frame: usize, out: &mut Page) -> Result<(), VmmError>;

    /// Maps `page` of the stretch onto `frame`, writable or read-only (a write to a
    /// read-only page faults again, which is how the pager learns it is dirty).
    fn map(&mut self, page: usize, frame: usize, writable: bool) -> Result<(), VmmError>;

    /// Unmaps `page`, which is mapped on `frame`.
    fn unmap(&mut self, page: usize, frame: usize) -> Result<(), VmmError>;

    /// Gives `frame` (unmapped) back: the pager never uses it again.
    fn release(&mut self, frame: usize) -> Result<(), VmmError>;
}

/// Frames as page buffers in memory, with the mapping recorded, for host tests.
#[derive(Clone, Debug)]
pub struct MemFrames {
    frames: Vec<Box<Page>>,
    released: Vec<bool>,
    /// Page to (frame, writable).
    mapped: BTreeMap<usize, (usize, bool)>,
}

impl MemFrames {
    /// `count` zeroed frames.
    pub fn new(count: usize) -> MemFrames {
        MemFrames {
            frames: (0..count).map(|_| Box::new([0u8; PAGE_SIZE])).collect(),
            released: alloc::vec![false; count],
            mapped: BTreeMap::new(),
        }
    }

    /// The contents of `frame`.
    pub fn frame(&self, frame: usize) -> &Page {
        &self.frames[frame]
    }

    /// The contents of `frame`, to change them (what a thread's stores do).
    pub fn frame_mut(&mut self, frame: usize) -> &mut Page {
        &mut self.frames[frame]
    }

    /// Where `page` is mapped: its frame and whether writable.
    pub fn mapping(&self, page: usize) -> Option<(usize, bool)> {
        self.mapped.get(&page).copied()
    }

    /// Frames released so far.
    pub fn released(&self) -> usize {
        self.released.iter().filter(|r| **r).count()
    }

    fn check(&self, frame: usize) -> Result<(), VmmError> {
        if frame < self.frames.len() && !self.released[frame] {
            Ok(())
        } else {
            Err(VmmError::Frames)
        }
    }
}

impl Frames for MemFrames {
    fn fill(&mut self, frame: usize, data: &Page) -> Result<(), VmmError> {
        self.check(frame)?;
        self.frames[frame].copy_from_slice(data);
        Ok(())
    }

    fn zero(&mut self, frame: usize) -> Result<(), VmmError> {
        self.check(frame)?;
        self.frames[frame].fill(0);
        Ok(())
    }

    fn save(&mut self, frame: usize, out: &mut Page) -> Result<(), VmmError> {
        self.check(frame)?;
        out.copy_from_slice(&self.frames[frame][..]);
        Ok(())
    }

    fn map(&mut self, page: usize, frame: usize, writable: bool) -> Result<(), VmmError> {
        self.check(frame)?;
        if self.mapped.iter().any(|(p, (f, _))| *f == frame && *p != page) {
            return Err(VmmError::Frames);
        }
        self.mapped.insert(page, (frame, writable));
        Ok(())
    }

    fn unmap(&mut self, page: usize, frame: usize) -> Result<(), VmmError> {
        match self.mapped.get(&page) {
            Some((f, _)) if *f == frame => {
                self.mapped.remove(&page);
                Ok(())
            }
            _ => Err(VmmError::Frames),
        }
    }

    fn release(&mut self, frame: usize) -> Result<(), VmmError> {
        self.check(frame)?;
        if self.mapped.values().any(|(f, _)| *f == frame) {
            return Err(VmmError::Frames);
        }
        self.released[frame] = true;
        Ok(())
    }
}
