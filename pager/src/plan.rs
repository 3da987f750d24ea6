//! What the pager asks of its frames, and what it tells of a call it answered.
//!
//! The pager holds no frames and calls no one to reach them: a call that pages
//! ([`Pager::fault`](crate::pager::Pager::fault), `lock`, `revoke`) returns a [`Step`], either
//! a [`FrameOp`] for whoever holds the frames (the paged stretch driver over the kernel's
//! frames; [`MemFrames`](crate::frames::MemFrames) in the host tests) to do and answer with
//! [`Pager::resume`](crate::pager::Pager::resume), or the call's [`Outcome`]. The pager fills a
//! frame before it is mapped, and a page is unmapped before its frame is saved (one
//! [`FrameOp::Evict`]), so no thread sees a half-filled page or changes one being saved.
//! Contents cross in place: to do a [`FrameOp::Fill`], an [`FrameOp::Evict`] or a
//! [`FrameOp::Save`], the holder of the frames runs [`Pager::fill`](crate::pager::Pager::fill)
//! or [`Pager::save`](crate::pager::Pager::save) on the frame's contents, so a page decompressed or read from disk is written once.

use crate::error::PagerError;

/// A frame operation the pager asks for. Frames are numbered from 0 (the pager knows how
/// many: it is made for them); pages are numbered within the stretch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameOp {
    /// Map `page` on `frame`, writable or read-only (a write to a read-only page faults again,
    /// which is how the pager learns it is dirty unless the frames track dirty bits). `page`
    /// may be mapped on `frame` already: its rights change.
    Map {
        /// The page.
        page: usize,
        /// Its frame.
        frame: usize,
        /// Mapped writable.
        writable: bool,
    },
    /// Evict `page`, which is mapped on `frame`: unmap it, learning whether it was written
    /// while it was mapped writable, as the hardware's dirty bit tells (never, for frames
    /// that do not track dirty bits); then, if it was written or `keep` says its contents are
    /// wanted, run [`Pager::save`](crate::pager::Pager::save) on the frame's contents, in
    /// place, telling it whether the page was written. Answer whether it was written. If the
    /// save (or anything after the unmap) fails, map `page` on `frame` again, writable or not
    /// as `writable` says, keeping what the dirty bit told, and answer with the failure: a
    /// failed eviction leaves its page mapped as it was.
    Evict {
        /// The page.
        page: usize,
        /// Its frame.
        frame: usize,
        /// Save its contents even if it was not written.
        keep: bool,
        /// It is mapped writable (to map it again after a failure).
        writable: bool,
    },
    /// Fill `frame` out of view, then map `page` on it: run
    /// [`Pager::fill`](crate::pager::Pager::fill) on the frame's contents, in place, which says
    /// whether to map it writable; answer with the first failure.
    Fill {
        /// The page.
        page: usize,
        /// Its frame.
        frame: usize,
    },
    /// Fill `frame` with zeros, then map `page` on it, writable or read-only.
    Zero {
        /// The page.
        page: usize,
        /// Its frame.
        frame: usize,
        /// Mapped writable.
        writable: bool,
    },
    /// Run [`Pager::save`](crate::pager::Pager::save) on the contents of `frame` (whose page
    /// is unmapped: contents fetched into it that could not be mapped), in place, as not
    /// written, and answer with what it returned.
    Save {
        /// The frame.
        frame: usize,
    },
    /// Tell the pager ([`Pager::accessed`](crate::pager::Pager::accessed)) of each resident page
    /// ([`Pager::resident_pages`](crate::pager::Pager::resident_pages)) the hardware marked
    /// accessed since the last harvest, and clear the marks. Frames without accessed bits
    /// tell of none.
    Harvest,
    /// Give `frame` (unmapped) back: the pager never uses it again.
    Release {
        /// The frame.
        frame: usize,
    },
}

/// The answer to a [`FrameOp`]: whether an evicted page was written ([`FrameOp::Evict`];
/// `false` for the others), or why the operation failed.
pub type Answer = Result<bool, PagerError>;

/// What a call that pages needs next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Do this, then answer with [`Pager::resume`](crate::pager::Pager::resume).
    Do(FrameOp),
    /// The call is answered.
    Done(Result<Outcome, PagerError>),
}

/// What a call that pages did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A fault (or a lock) made its page resident.
    Fault(FaultOutcome),
    /// A revocation released this many frames.
    Revoked(usize),
}

/// What a fault did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultOutcome {
    /// The frame the page is on.
    pub frame: usize,
    /// Where its contents came from.
    pub source: Source,
    /// Pages evicted to make room (none if a frame was free).
    pub evicted: u32,
    /// Of those, the dirty ones (handed down to be stored).
    pub evicted_dirty: u32,
    /// Device writes the evictions made (a cache below writing a group, or a page written
    /// through).
    pub disk_writes: u64,
}

/// Where a faulted page's contents came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// It was resident: a write to a page mapped read-only, which is now writable (or a lock).
    Resident,
    /// It had no contents yet: a zeroed frame.
    ZeroFill,
    /// Its only copy was lost (the disk kept failing its read): a zeroed frame.
    Lost,
    /// A cache held it.
    Hit {
        /// The top cache manager held it (not one below).
        top: bool,
        /// Where.
        found: Found,
    },
    /// Read from the disk: every cache missed.
    Miss,
}

/// Where a cache manager found a fetched page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// In a compressed cache's pool, stored as this.
    Pool(HitKind),
    /// In an eviction area, waiting to be written.
    EvictionArea,
    /// In a fetch area, read beside another page.
    FetchArea,
    /// On the disk: every cache missed.
    Disk,
}

/// How the page of a compressed pool's hit was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitKind {
    /// A zero mark: the frame is zeroed.
    Zero,
    /// Uncompressed (it did not compress well enough): the page is copied.
    Raw,
    /// Compressed: the page is decompressed.
    Compressed,
}

impl HitKind {
    /// Every kind.
    pub const ALL: [HitKind; 3] = [HitKind::Zero, HitKind::Raw, HitKind::Compressed];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            HitKind::Zero => "zero",
            HitKind::Raw => "raw",
            HitKind::Compressed => "compressed",
        }
    }
}
