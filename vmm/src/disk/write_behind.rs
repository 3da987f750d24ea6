//! [`WriteBehindDisk`]: the asynchronous disk manager. Writes are copied into a bounded queue
//! and reach the device when the queue fills or on [`DiskManager::flush`]; reads look in the
//! queue first.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::{DiskManager, DiskStats, Location, Prefetched, SlotStore, SwapSpace};
use crate::block::BlockDevice;
use crate::error::VmmError;
use crate::{PAGE_SIZE, Page};

/// The write-behind disk manager. A page's slot is reserved when the page is queued, so a full
/// swap area is reported by the write that caused it, never later by a flush. A flush writes
/// the queued pages in slot order, one transfer per run of adjacent slots.
#[derive(Debug)]
pub struct WriteBehindDisk<D> {
    store: SlotStore<D>,
    queue: VecDeque<(usize, Box<Page>)>,
    queue_pages: usize,
}

impl<D: BlockDevice> WriteBehindDisk<D> {
    /// A manager over all of `device` whose queue holds up to `queue_pages` pages (at least 1).
    pub fn new(device: D, queue_pages: usize) -> Result<WriteBehindDisk<D>, VmmError> {
        if queue_pages == 0 {
            return Err(VmmError::BadConfig("the write-behind queue needs at least one page"));
        }
        Ok(WriteBehindDisk { store: SlotStore::new(device)?, queue: VecDeque::new(), queue_pages })
    }

    /// The swap area (and through it the device).
    pub fn store(&self) -> &SlotStore<D> {
        &self.store
    }

    /// Pages waiting in the queue.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    fn write_queue(&mut self) -> Result<(), VmmError> {
        let mut batch: Vec<(usize, usize)> = self
            .queue
            .iter()
            .enumerate()
            .map(|(i, (page, _))| (self.store.slot_of(*page).expect("queued pages have slots"), i))
            .collect();
        batch.sort_unstable();
        let mut run: Vec<u8> = Vec::new();
        let mut first = 0;
        for (n, &(slot, i)) in batch.iter().enumerate() {
            if n == 0 || slot != first + run.len() / PAGE_SIZE {
                if !run.is_empty() {
                    self.store.write_run(first, &run)?;
                    run.clear();
                }
                first = slot;
            }
            run.extend_from_slice(&self.queue[i].1[..]);
        }
        if !run.is_empty() {
            self.store.write_run(first, &run)?;
        }
        // Only now, every page written, is the queue emptied: a failed flush keeps it.
        self.queue.clear();
        Ok(())
    }
}

impl<D: BlockDevice> DiskManager for WriteBehindDisk<D> {
    fn write_group(&mut self, pages: &[(usize, &Page)]) -> Result<(), VmmError> {
        self.store.check_fit(pages)?;
        for &(page, data) in pages {
            if let Some(entry) = self.queue.iter_mut().find(|(p, _)| *p == page) {
                entry.1.copy_from_slice(data);
                continue;
            }
            self.store.slot_for(page)?;
            self.queue.push_back((page, Box::new(*data)));
            if self.queue.len() >= self.queue_pages {
                self.write_queue()?;
            }
        }
        Ok(())
    }

    fn read(
        &mut self,
        page: usize,
        buf: &mut Page,
        _max_pages: usize,
        _prefetched: &mut Prefetched,
    ) -> Result<(), VmmError> {
        if let Some((_, data)) = self.queue.iter().find(|(p, _)| *p == page) {
            buf.copy_from_slice(&data[..]);
            self.store.stats.queue_hits += 1;
            return Ok(());
        }
        self.store.read_page(page, buf)
    }

    fn location(&self, page: usize) -> Option<Location> {
        let slot = self.store.slot_of(page)?;
        if self.queue.iter().any(|(p, _)| *p == page) {
            Some(Location::Queued(slot))
        } else {
            Some(Location::Slot(slot))
        }
    }

    fn free(&mut self, page: usize) {
        self.queue.retain(|(p, _)| *p != page);
        self.store.release(page);
    }

    fn flush(&mut self) -> Result<(), VmmError> {
        self.write_queue()
    }

    fn swap_space(&self) -> SwapSpace {
        self.store.swap_space()
    }

    fn stats(&self) -> DiskStats {
        self.store.stats
    }
}
