//! The backing store manager: where pages go below the caches. [`BackingStore`] is the route
//! a cache manager sees; [`LocalBacking`] sends every page to one local [`DiskManager`].
//! Remote paging (Heracles's remote-only and mirrored modes) will be another implementation
//! of the trait, or a router over a disk manager and a remote paging client, with more
//! [`StoreLocation`] variants; the caches above do not change.

use alloc::boxed::Box;

use crate::Page;
use crate::disk::{DiskManager, DiskStats, Location, Prefetched, SwapSpace};
use crate::error::PagerError;

/// Where a page's copy in the backing store lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    /// On the local disk, where its disk manager put it.
    LocalDisk(Location),
}

/// A backing store: pages by number, read and written in groups.
pub trait BackingStore {
    /// Stores `pages`, written together (one group for a grouping disk manager).
    fn write_group(&mut self, pages: &[(usize, &Page)]) -> Result<(), PagerError>;

    /// Reads `page` into `buf`; up to `max_pages - 1` others read with it are pushed onto
    /// `prefetched`.
    fn read(
        &mut self,
        page: usize,
        buf: &mut Page,
        max_pages: usize,
        prefetched: &mut Prefetched,
    ) -> Result<(), PagerError>;

    /// Where the store keeps `page`, if it holds it.
    fn location(&self, page: usize) -> Option<StoreLocation>;

    /// Whether the store holds a copy of `page`.
    fn holds(&self, page: usize) -> bool {
        self.location(page).is_some()
    }

    /// Forgets `page`.
    fn free(&mut self, page: usize);

    /// Writes out anything buffered below.
    fn flush(&mut self) -> Result<(), PagerError>;

    /// The swap space behind the store.
    fn swap_space(&self) -> SwapSpace;

    /// The disk manager's counts.
    fn disk_stats(&self) -> DiskStats;
}

/// Local paging: every page goes to one disk manager.
pub struct LocalBacking {
    disk: Box<dyn DiskManager>,
}

impl LocalBacking {
    /// A store over `disk`.
    pub fn new(disk: Box<dyn DiskManager>) -> LocalBacking {
        LocalBacking { disk }
    }

    /// The disk manager.
    pub fn disk(&self) -> &dyn DiskManager {
        &*self.disk
    }
}

impl BackingStore for LocalBacking {
    fn write_group(&mut self, pages: &[(usize, &Page)]) -> Result<(), PagerError> {
        self.disk.write_group(pages)
    }

    fn read(
        &mut self,
        page: usize,
        buf: &mut Page,
        max_pages: usize,
        prefetched: &mut Prefetched,
    ) -> Result<(), PagerError> {
        self.disk.read(page, buf, max_pages, prefetched)
    }

    fn location(&self, page: usize) -> Option<StoreLocation> {
        self.disk.location(page).map(StoreLocation::LocalDisk)
    }

    fn free(&mut self, page: usize) {
        self.disk.free(page);
    }

    fn flush(&mut self) -> Result<(), PagerError> {
        self.disk.flush()
    }

    fn swap_space(&self) -> SwapSpace {
        self.disk.swap_space()
    }

    fn disk_stats(&self) -> DiskStats {
        self.disk.stats()
    }
}
