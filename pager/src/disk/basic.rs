//! [`BasicDisk`]: one slot per page, written in place, one transfer per page.

use super::{DiskManager, DiskStats, Location, Prefetched, SlotStore, SwapSpace};
use crate::Page;
use crate::block::SyncDisk;
use crate::error::PagerError;

/// The basic disk manager: a table from page to slot; a write allocates a slot the first time
/// a page is stored and overwrites the page's own slot afterwards; a read reads that slot.
#[derive(Debug)]
pub struct BasicDisk<D> {
    store: SlotStore<D>,
}

impl<D: SyncDisk> BasicDisk<D> {
    /// A manager using all of `device` as its swap area.
    pub fn new(device: D) -> Result<BasicDisk<D>, PagerError> {
        Ok(BasicDisk { store: SlotStore::new(device)? })
    }

    /// The swap area (and through it the device).
    pub fn store(&self) -> &SlotStore<D> {
        &self.store
    }

    /// The swap area, to change the device.
    pub fn store_mut(&mut self) -> &mut SlotStore<D> {
        &mut self.store
    }
}

impl<D: SyncDisk> DiskManager for BasicDisk<D> {
    fn write_group(&mut self, pages: &[(usize, &Page)]) -> Result<(), PagerError> {
        self.store.check_fit(pages)?;
        let mut failed = None;
        for &(page, data) in pages {
            let (slot, new) = self.store.slot_for(page)?;
            match self.store.write_page(page, slot, data) {
                Ok(()) => {}
                // The slot is retired and the page forgotten; the others are still written.
                Err(e @ PagerError::WriteFailed { .. }) => {
                    failed.get_or_insert(e);
                }
                Err(e) => {
                    if new {
                        // The slot never received the page: it must not be read as its copy.
                        self.store.release(page);
                    }
                    return Err(e);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    fn read(
        &mut self,
        page: usize,
        buf: &mut Page,
        _max_pages: usize,
        _prefetched: &mut Prefetched,
    ) -> Result<(), PagerError> {
        self.store.read_page(page, buf)
    }

    fn location(&self, page: usize) -> Option<Location> {
        self.store.slot_of(page).map(Location::Slot)
    }

    fn free(&mut self, page: usize) {
        self.store.release(page);
    }

    fn flush(&mut self) -> Result<(), PagerError> {
        Ok(())
    }

    fn swap_space(&self) -> SwapSpace {
        self.store.swap_space()
    }

    fn stats(&self) -> DiskStats {
        self.store.stats
    }

    fn device_writes(&self) -> u64 {
        self.store.stats.device_writes
    }
}
