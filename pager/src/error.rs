//! The one error type of the pager components, [`PagerError`], with a message for each case.

use core::fmt;

use crate::block::DeviceError;
use crate::remote::RemoteError;

/// Why a pager component could not do what it was asked. Every component leaves its state
/// consistent when it returns an error: nothing stored before is lost or overwritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PagerError {
    /// The swap area has no free slot for pages that are not stored yet; nothing was written
    /// and what was stored before stays readable.
    SwapFull {
        /// Slots the write needed.
        needed: usize,
        /// Slots that were free.
        free: usize,
    },
    /// The block device refused a transfer (outside the device, or not whole sectors).
    Device(DeviceError),
    /// The device kept failing the write of `page` (every retry): the slot it was written to
    /// is retired, and the page's contents are kept where they were (resident, or in a
    /// cache), to be written elsewhere.
    WriteFailed {
        /// The page being written (not necessarily the one whose fault caused the write).
        page: usize,
    },
    /// The device kept failing the read of `page`, whose only copy was on the disk: the page
    /// is lost, its slot retired and the store no longer holds it.
    PageLost {
        /// The page lost.
        page: usize,
    },
    /// The remote store could not store `page` and there is no local disk to fall back to:
    /// the page's contents stay where they were (resident, or in a cache).
    Remote {
        /// The page being written.
        page: usize,
        /// Why the remote store refused it.
        error: RemoteError,
    },
    /// A page was asked for that no component holds.
    NotStored {
        /// The page (within the stretch).
        page: usize,
    },
    /// A page number beyond the stretch.
    PageOutOfRange {
        /// The page asked for.
        page: usize,
        /// The stretch's length in pages.
        pages: usize,
    },
    /// Every frame the pager holds is locked, so no page can be evicted.
    AllFramesLocked,
    /// The pager holds no frames (all were revoked).
    NoFrames,
    /// Compressed bytes did not decompress to a whole page: the cache's own state is broken.
    Corrupt {
        /// The page whose bytes were bad.
        page: usize,
    },
    /// A component was configured with sizes it cannot work with.
    BadConfig(&'static str),
    /// The frames (the driver's memory) refused an operation.
    Frames,
}

impl From<DeviceError> for PagerError {
    fn from(e: DeviceError) -> PagerError {
        PagerError::Device(e)
    }
}

impl fmt::Display for PagerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PagerError::SwapFull { needed, free } => write!(
                f,
                "swap area full: {needed} page slot(s) needed, {free} free; nothing was overwritten"
            ),
            PagerError::Device(e) => write!(f, "block device: {e}"),
            PagerError::WriteFailed { page } => {
                write!(f, "the disk kept failing the write of page {page}; it is kept in memory")
            }
            PagerError::PageLost { page } => {
                write!(f, "the disk kept failing the read of page {page}, its only copy: lost")
            }
            PagerError::Remote { page, error } => {
                write!(f, "page {page} could not be stored remotely ({error}) and there is no disk")
            }
            PagerError::NotStored { page } => write!(f, "page {page} is not stored anywhere"),
            PagerError::PageOutOfRange { page, pages } => {
                write!(f, "page {page} is outside the stretch of {pages} pages")
            }
            PagerError::AllFramesLocked => f.write_str("every frame holds a locked page"),
            PagerError::NoFrames => f.write_str("the pager holds no frames"),
            PagerError::Corrupt { page } => write!(f, "compressed copy of page {page} is corrupt"),
            PagerError::BadConfig(why) => write!(f, "bad pager configuration: {why}"),
            PagerError::Frames => f.write_str("the frames refused an operation"),
        }
    }
}
