//! Disk managers: they own the swap area on a [`SyncDisk`], place pages on it in page-sized
//! *slots*, and move pages between memory and the device.
//!
//! The swap area is the whole device, cut into slots of one page each. A slot is *live* while
//! it holds the current copy of a page, and a live slot is never written for another page:
//! a write that needs more free slots than there are fails with [`PagerError::SwapFull`] before
//! anything is written, and every page stored before stays readable.
//!
//! The device's failures: a failed transfer is retried a bounded number of times, with a
//! wait on the device's clock between tries ([`ATTEMPTS`] tries, [`RETRY_WAIT_NS`] first). A write that keeps
//! failing retires its slot (never used again) and is [`PagerError::WriteFailed`] for the page
//! written: the store no longer holds that page, whose contents stay with the caller (the
//! pager keeps it resident and dirty, a cache keeps it cached) and go to another slot the
//! next time they are stored. A read that keeps failing retires the slot too, and the page,
//! whose only copy that was, is [`PagerError::PageLost`]: the store forgets it. A group read
//! that fails is retried as the requested page alone, so only that page can be lost.
//!
//! - [`BasicDisk`]: one slot per page, read and written on request, one page per transfer.
//! - [`WriteBehindDisk`]: the asynchronous manager; writes wait in a bounded queue that is
//!   written out when it fills or on [`DiskManager::flush`], and a read of a page still queued
//!   is served from the queue. (Tessera's drivers have no threads of their own in a fault, so
//!   "asynchronous" means write-behind: the queue is flushed by the calls, not a thread.)
//! - [`PrefetchDisk`]: the thesis's *friends*: the pages of one group write are stored in
//!   contiguous slots and read back together.

mod basic;
mod friends;
mod slots;
mod write_behind;

use alloc::boxed::Box;
use alloc::vec::Vec;

pub use basic::BasicDisk;
pub use friends::PrefetchDisk;
pub use slots::{ATTEMPTS, RETRY_WAIT_NS, SlotStore};
pub use write_behind::WriteBehindDisk;

use crate::Page;
#[cfg(doc)]
use crate::block::SyncDisk;
use crate::error::PagerError;
use crate::remote::RemoteStats;
use pager_spec::Backing;

/// Where a disk manager keeps a page's current copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// In this slot of the swap area.
    Slot(usize),
    /// In the write-behind queue, with this slot reserved for it.
    Queued(usize),
    /// In a remote store only ([`crate::backing::BackingStore`]).
    Remote,
}

/// The size and use of a swap area, in page slots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwapSpace {
    /// Slots in the area.
    pub slots: usize,
    /// Slots holding (or reserved for) a page.
    pub used: usize,
    /// Slots retired because the device kept failing them.
    pub retired: usize,
}

impl SwapSpace {
    /// Slots free.
    pub fn free(&self) -> usize {
        self.slots - self.used - self.retired
    }
}

/// What a disk manager has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Read transfers issued to the device.
    pub device_reads: u64,
    /// Write transfers issued to the device.
    pub device_writes: u64,
    /// Pages read from the device (the faulting pages and the prefetched ones).
    pub pages_read: u64,
    /// Pages written to the device.
    pub pages_written: u64,
    /// Pages handed back as prefetched beside a requested one.
    pub prefetched: u64,
    /// Reads served from the write-behind queue.
    pub queue_hits: u64,
    /// Transfers retried after the device failed them (each retry counted).
    pub retries: u64,
    /// Slots retired because the device kept failing them.
    pub retired_slots: u64,
    /// Page writes the device kept failing ([`PagerError::WriteFailed`]).
    pub write_failures: u64,
    /// Pages lost because the device kept failing the read of their only copy
    /// ([`PagerError::PageLost`]).
    pub lost_pages: u64,
}

/// What a backing store manager ([`crate::backing::BackingStore`]) has done
/// ([`crate::pager::PagerStats::store`]); all zero for
/// a hierarchy that pages to the local disk with no manager.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// The mode.
    pub backing: Backing,
    /// Whether new pages go to the remote store now.
    pub remote_now: bool,
    /// Pages written to the remote store.
    pub remote_writes: u64,
    /// Of those, pages a compressed cache gave compressed and the remote store took so
    /// ([`DiskManager::write_compressed`]).
    pub compressed_writes: u64,
    /// Pages read from the remote store (population included).
    pub remote_reads: u64,
    /// Pages the local disk stored (mirror copies, fallbacks and population included).
    pub local_writes: u64,
    /// Reads asked of the local disk.
    pub local_reads: u64,
    /// Of the local writes, copies mirroring a remote one.
    pub mirror_writes: u64,
    /// Pages meant for the remote store that the local disk took because the remote store
    /// failed (no server, or unreachable).
    pub fallbacks: u64,
    /// Pages brought back from the remote store to the disk after a revocation.
    pub populated: u64,
    /// Pages copied from the disk to the remote store once it took pages again after a
    /// fallback or the loss of every server (each one disk read, no eviction's).
    pub refilled: u64,
    /// Pages whose only copy was remote, lost with their servers (each reported lost).
    pub lost_remote: u64,
    /// Older copies freed because a newer one was written elsewhere.
    pub stale_freed: u64,
    /// Revocations without a replacement server heard of.
    pub revocations: u64,
    /// Losses of every server heard of.
    pub servers_lost: u64,
    /// Pages whose current copy the remote store holds now.
    pub remote_pages: usize,
    /// The remote store's own counts.
    pub remote: RemoteStats,
}

/// Pages read beside a requested one: `(page, contents)`.
pub type Prefetched = Vec<(usize, Box<Page>)>;

/// A disk manager: stores pages under their page numbers in a swap area.
pub trait DiskManager {
    /// Stores `pages` (page number, contents), written together: they form one group for a
    /// manager that groups. Fails with [`PagerError::SwapFull`], writing nothing, if the pages
    /// not yet stored do not fit; with [`PagerError::WriteFailed`] naming a page whose write the
    /// device kept failing (every page of `pages` was tried; those stored are held).
    fn write_group(&mut self, pages: &[(usize, &Page)]) -> Result<(), PagerError>;

    /// Stores `page` given as its WKdm-compressed bytes, if this manager takes compressed
    /// pages: `Ok(true)` once stored, `Ok(false)` (the default: a disk stores whole pages) if
    /// the caller must decompress it and [`DiskManager::write_group`] it. A backing store
    /// manager passes it to its remote store ([`crate::remote::RemoteStore::write_compressed`]).
    fn write_compressed(&mut self, page: usize, wkdm: &[u8]) -> Result<bool, PagerError> {
        let _ = (page, wkdm);
        Ok(false)
    }

    /// Reads `page` into `buf`. A prefetching manager may read up to `max_pages` pages in all
    /// and pushes the others onto `prefetched`; the others never do. [`PagerError::PageLost`]
    /// if the device kept failing the read of the page (then no longer held).
    fn read(
        &mut self,
        page: usize,
        buf: &mut Page,
        max_pages: usize,
        prefetched: &mut Prefetched,
    ) -> Result<(), PagerError>;

    /// Where `page`'s current copy is, if it is stored.
    fn location(&self, page: usize) -> Option<Location>;

    /// Forgets `page` and frees its slot.
    fn free(&mut self, page: usize);

    /// Writes out anything buffered.
    fn flush(&mut self) -> Result<(), PagerError>;

    /// The swap area's size and use.
    fn swap_space(&self) -> SwapSpace;

    /// Counts of what the manager has done.
    fn stats(&self) -> DiskStats;

    /// Its [`DiskStats::device_writes`], without copying its other counts; a backing store
    /// manager adds the pages it wrote to its remote store (every transfer to the backing
    /// store counts).
    fn device_writes(&self) -> u64 {
        self.stats().device_writes
    }

    /// A backing store manager's counts (all zero for a disk manager).
    fn store_stats(&self) -> StoreStats {
        StoreStats::default()
    }
}
