//! [`WriteBehindDisk`]: the asynchronous disk manager. Writes are copied into a bounded queue
//! and reach the device when the queue fills or on [`DiskManager::flush`]; reads look in the
//! queue first.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::{DiskManager, DiskStats, Location, Prefetched, SlotStore, SwapSpace};
use crate::block::{DeviceError, SyncDisk};
use crate::error::PagerError;
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

impl<D: SyncDisk> WriteBehindDisk<D> {
    /// A manager over all of `device` whose queue holds up to `queue_pages` pages (at least 1).
    pub fn new(device: D, queue_pages: usize) -> Result<WriteBehindDisk<D>, PagerError> {
        if queue_pages == 0 {
            return Err(PagerError::BadConfig("the write-behind queue needs at least one page"));
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

    /// Writes the queue out, one transfer per run of adjacent slots. A run the device kept
    /// failing is written page by page; a page whose write keeps failing has its slot retired
    /// and stays queued with a new slot (if one is free), and the first such page is the
    /// error. The pages written leave the queue.
    fn write_queue(&mut self) -> Result<(), PagerError> {
        let mut batch: Vec<(usize, usize)> = self
            .queue
            .iter()
            .enumerate()
            .filter_map(|(i, (page, _))| Some((self.store.slot_of(*page)?, i)))
            .collect();
        batch.sort_unstable();
        let mut written = alloc::vec![false; self.queue.len()];
        let mut failed = None;
        let mut n = 0;
        while n < batch.len() {
            let first = batch[n].0;
            let mut len = 1;
            while n + len < batch.len() && batch[n + len].0 == first + len {
                len += 1;
            }
            let run = &batch[n..n + len];
            let mut data: Vec<u8> = Vec::with_capacity(len * PAGE_SIZE);
            for &(_, i) in run {
                data.extend_from_slice(&self.queue[i].1[..]);
            }
            match self.store.write_run(first, &data) {
                Ok(()) => run.iter().for_each(|&(_, i)| written[i] = true),
                Err(PagerError::Device(DeviceError::Io)) => {
                    for &(slot, i) in run {
                        let page = self.queue[i].0;
                        if len > 1 && self.store.write_run(slot, &self.queue[i].1[..]).is_ok() {
                            written[i] = true;
                            continue;
                        }
                        self.store.retire(slot);
                        self.store.stats.write_failures += 1;
                        failed.get_or_insert(PagerError::WriteFailed { page });
                    }
                }
                Err(e) => return Err(e),
            }
            n += len;
        }
        let mut i = 0;
        self.queue.retain(|_| {
            i += 1;
            !written[i - 1]
        });
        // Pages still queued without a slot (retired) get a new one if one is free.
        for k in 0..self.queue.len() {
            let page = self.queue[k].0;
            if self.store.slot_of(page).is_none()
                && let Err(e) = self.store.slot_for(page)
            {
                failed.get_or_insert(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

impl<D: SyncDisk> DiskManager for WriteBehindDisk<D> {
    fn write_group(&mut self, pages: &[(usize, &Page)]) -> Result<(), PagerError> {
        self.store.check_fit(pages)?;
        for &(page, data) in pages {
            if let Some(entry) = self.queue.iter_mut().find(|(p, _)| *p == page) {
                entry.1.copy_from_slice(data);
                continue;
            }
            let (_, new) = self.store.slot_for(page)?;
            self.queue.push_back((page, Box::new(*data)));
            if self.queue.len() >= self.queue_pages
                && let Err(e) = self.write_queue()
            {
                // The page is not taken (the caller keeps it); the others stay queued.
                if self.queue.iter().any(|(p, _)| *p == page) {
                    self.queue.retain(|(p, _)| *p != page);
                    if new {
                        self.store.release(page);
                    }
                }
                return Err(e);
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
    ) -> Result<(), PagerError> {
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

    fn flush(&mut self) -> Result<(), PagerError> {
        self.write_queue()
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
