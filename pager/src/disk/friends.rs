//! [`PrefetchDisk`]: the prefetching disk manager and its *friends* algorithm (Heracles
//! §9.3.1): pages evicted together are used together.
//!
//! A group write is stored in a run of contiguous free slots, all marked with a new group
//! number. A page rewritten later joins its new group and frees its old slot: at the edge of
//! its old group this trims the group; in the middle it splits the group in two (the
//! *breakaway* group), because a group is exactly a maximal run of adjacent slots with the
//! same group number and the freed slot breaks the run. A read of a page reads, in one
//! transfer, the run of its group's slots around it, up to the size asked for: the whole group
//! if it fits, else the pages nearest the faulting page (alternating after and before it).
//!
//! When no run of free slots is long enough the group is split in halves, each stored as its
//! own group; when the free slots are fewer than the group but enough for the pages not yet
//! stored, pages already stored are rewritten in their own slots (keeping their old groups)
//! and the rest go to single free slots.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use super::{DiskManager, DiskStats, Location, Prefetched, SlotStore, SwapSpace};
use crate::block::{DeviceError, SyncDisk};
use crate::error::PagerError;
use crate::{PAGE_SIZE, Page};

/// The prefetching disk manager.
#[derive(Debug)]
pub struct PrefetchDisk<D> {
    store: SlotStore<D>,
}

impl<D: SyncDisk> PrefetchDisk<D> {
    /// A manager using all of `device` as its swap area.
    pub fn new(device: D) -> Result<PrefetchDisk<D>, PagerError> {
        Ok(PrefetchDisk { store: SlotStore::new(device)? })
    }

    /// The swap area (and through it the device).
    pub fn store(&self) -> &SlotStore<D> {
        &self.store
    }

    /// The pages of `page`'s group, in slot order (empty if it is not stored).
    pub fn group_of(&self, page: usize) -> Vec<usize> {
        let Some(slot) = self.store.slot_of(page) else { return Vec::new() };
        let (lo, hi) = self.group_run(slot, usize::MAX);
        (lo..hi).filter_map(|s| self.store.owner(s).map(|o| o.page)).collect()
    }

    /// The slots `lo..hi` of the run of `slot`'s group around it, at most `max` long.
    fn group_run(&self, slot: usize, max: usize) -> (usize, usize) {
        let group = self.store.owner(slot).map(|o| o.group);
        let same = |s: usize| self.store.owner(s).map(|o| o.group) == group;
        let slots = self.store.swap_space().slots;
        let (mut lo, mut hi) = (slot, slot + 1);
        loop {
            let mut grew = false;
            if hi - lo < max && hi < slots && same(hi) {
                hi += 1;
                grew = true;
            }
            if hi - lo < max && lo > 0 && same(lo - 1) {
                lo -= 1;
                grew = true;
            }
            if !grew {
                return (lo, hi);
            }
        }
    }

    fn store_group(&mut self, pages: &[(usize, &Page)]) -> Result<(), PagerError> {
        if let Some(first) = self.store.find_run(pages.len()) {
            let mut run = Vec::with_capacity(pages.len() * PAGE_SIZE);
            for (_, data) in pages {
                run.extend_from_slice(&data[..]);
            }
            match self.store.write_run(first, &run) {
                Ok(()) => {}
                Err(PagerError::Device(DeviceError::Io)) if pages.len() > 1 => {
                    return self.store_each(pages);
                }
                Err(PagerError::Device(DeviceError::Io)) => {
                    return Err(self.store.write_failed(pages[0].0, first));
                }
                Err(e) => return Err(e),
            }
            let group = self.store.new_group();
            for (i, &(page, _)) in pages.iter().enumerate() {
                self.store.assign(first + i, page, group);
            }
            return Ok(());
        }
        if pages.len() > 1 && self.store.swap_space().free() >= pages.len() {
            let (a, b) = pages.split_at(pages.len() / 2);
            self.store_group(a)?;
            return self.store_group(b);
        }
        let mut failed = None;
        for &(page, data) in pages {
            let stored = match self.store.slot_of(page) {
                Some(slot) => self.store.write_page(page, slot, data),
                None => self.store_group(&[(page, data)]),
            };
            match stored {
                Ok(()) => {}
                Err(e @ PagerError::WriteFailed { .. }) => {
                    failed.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// After the device kept failing a group's run: each page in a run of its own, so only
    /// the slots that fail are retired. Every page is tried; the first failure is returned.
    fn store_each(&mut self, pages: &[(usize, &Page)]) -> Result<(), PagerError> {
        let mut failed = None;
        for &(page, data) in pages {
            if let Err(e) = self.store_group(&[(page, data)]) {
                failed.get_or_insert(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

impl<D: SyncDisk> DiskManager for PrefetchDisk<D> {
    fn write_group(&mut self, pages: &[(usize, &Page)]) -> Result<(), PagerError> {
        self.store.check_fit(pages)?;
        self.store_group(pages)
    }

    fn read(
        &mut self,
        page: usize,
        buf: &mut Page,
        max_pages: usize,
        prefetched: &mut Prefetched,
    ) -> Result<(), PagerError> {
        let slot = self.store.slot_of(page).ok_or(PagerError::NotStored { page })?;
        let (lo, hi) = self.group_run(slot, max_pages.max(1));
        let mut run = vec![0u8; (hi - lo) * PAGE_SIZE];
        match self.store.read_run(lo, &mut run) {
            Ok(()) => {}
            // The group's run kept failing: the page alone, so only it can be lost.
            Err(PagerError::Device(DeviceError::Io)) if hi - lo > 1 => {
                return self.store.read_page(page, buf);
            }
            Err(PagerError::Device(DeviceError::Io)) => return Err(self.store.lose(page)),
            Err(e) => return Err(e),
        }
        for (i, chunk) in run.chunks_exact(PAGE_SIZE).enumerate() {
            let owner = self.store.owner(lo + i).expect("a group's slots are live");
            if owner.page == page {
                buf.copy_from_slice(chunk);
            } else {
                let mut other = Box::new([0u8; PAGE_SIZE]);
                other.copy_from_slice(chunk);
                prefetched.push((owner.page, other));
                self.store.stats.prefetched += 1;
            }
        }
        Ok(())
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
