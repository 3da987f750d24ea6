//! [`SlotStore`]: the swap area shared by the disk managers, a device cut into page slots with
//! an owner (page and group) per slot and a table from page to slot.
//!
//! A transfer the device fails is tried [`ATTEMPTS`] times in all, waiting
//! [`RETRY_WAIT_NS`] (then twice as long each time) on the device's clock before each retry
//! ([`SyncDisk::wait`]). A slot whose write or read keeps failing is *retired*: never
//! given to a page again, and no longer counted free.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use super::{DiskStats, SwapSpace};
use crate::block::{DeviceError, SyncDisk};
use crate::error::PagerError;

/// Tries of a transfer the device fails, the first included.
pub const ATTEMPTS: u32 = 4;

/// The wait before the first retry, doubled before each later one.
pub const RETRY_WAIT_NS: u64 = 1_000_000;
use crate::{PAGE_SIZE, Page};

/// Who holds a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotOwner {
    /// The page whose current copy the slot holds.
    pub page: usize,
    /// The group it was written with (pages written together share one).
    pub group: u64,
}

/// A swap area: the device, its slots and their owners, and transfer counts.
#[derive(Debug)]
pub struct SlotStore<D> {
    device: D,
    sectors_per_slot: u64,
    owners: Vec<Option<SlotOwner>>,
    /// Slots retired after the device kept failing them.
    retired: Vec<bool>,
    retired_count: usize,
    by_page: BTreeMap<usize, usize>,
    used: usize,
    next_group: u64,
    pub(crate) stats: DiskStats,
}

impl<D: SyncDisk> SlotStore<D> {
    /// The whole of `device` as a swap area. Fails unless its sectors divide a page.
    pub fn new(device: D) -> Result<SlotStore<D>, PagerError> {
        let sector = device.sector_size();
        if sector == 0 || !PAGE_SIZE.is_multiple_of(sector) {
            return Err(PagerError::BadConfig("sector size must divide the page size"));
        }
        let sectors_per_slot = (PAGE_SIZE / sector) as u64;
        let slots = (device.capacity() / sectors_per_slot) as usize;
        Ok(SlotStore {
            device,
            sectors_per_slot,
            owners: vec![None; slots],
            retired: vec![false; slots],
            retired_count: 0,
            by_page: BTreeMap::new(),
            used: 0,
            next_group: 0,
            stats: DiskStats::default(),
        })
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The device, to change it (a test makes it fail).
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// The area's size and use.
    pub fn swap_space(&self) -> SwapSpace {
        SwapSpace { slots: self.owners.len(), used: self.used, retired: self.retired_count }
    }

    pub(crate) fn slot_of(&self, page: usize) -> Option<usize> {
        self.by_page.get(&page).copied()
    }

    pub(crate) fn owner(&self, slot: usize) -> Option<SlotOwner> {
        self.owners.get(slot).copied().flatten()
    }

    /// A group number not used before.
    pub(crate) fn new_group(&mut self) -> u64 {
        self.next_group += 1;
        self.next_group
    }

    /// Fails with [`PagerError::SwapFull`] unless the pages of `pages` not stored yet fit in the
    /// free slots: what every manager checks before it writes anything.
    pub(crate) fn check_fit(&self, pages: &[(usize, &Page)]) -> Result<(), PagerError> {
        let needed = pages.iter().filter(|(p, _)| self.slot_of(*p).is_none()).count();
        let free = self.swap_space().free();
        if needed > free { Err(PagerError::SwapFull { needed, free }) } else { Ok(()) }
    }

    /// `page`'s slot, or a free one given to it as a group of its own; whether it is new.
    pub(crate) fn slot_for(&mut self, page: usize) -> Result<(usize, bool), PagerError> {
        if let Some(slot) = self.slot_of(page) {
            return Ok((slot, false));
        }
        let slot = self.find_run(1).ok_or(PagerError::SwapFull { needed: 1, free: 0 })?;
        let group = self.new_group();
        self.assign(slot, page, group);
        Ok((slot, true))
    }

    /// Reads stored `page` into `buf`; [`PagerError::NotStored`] if it has no slot. If the
    /// device keeps failing the read, the page is lost ([`SlotStore::lose`]).
    pub(crate) fn read_page(&mut self, page: usize, buf: &mut Page) -> Result<(), PagerError> {
        let slot = self.slot_of(page).ok_or(PagerError::NotStored { page })?;
        match self.read_run(slot, buf) {
            Err(PagerError::Device(DeviceError::Io)) => Err(self.lose(page)),
            other => other,
        }
    }

    /// `page`, whose slot the device kept failing to read, is lost: its slot is retired and
    /// the store forgets it. Returns the error that says so.
    pub(crate) fn lose(&mut self, page: usize) -> PagerError {
        if let Some(slot) = self.slot_of(page) {
            self.retire(slot);
        }
        self.stats.lost_pages += 1;
        PagerError::PageLost { page }
    }

    /// Writes `page` to `slot`; if the device keeps failing the write, the slot is retired,
    /// the store forgets the page (whatever copy it had is no longer trusted) and the error is
    /// [`PagerError::WriteFailed`] for `page`.
    pub(crate) fn write_page(
        &mut self,
        page: usize,
        slot: usize,
        data: &Page,
    ) -> Result<(), PagerError> {
        match self.write_run(slot, data) {
            Err(PagerError::Device(DeviceError::Io)) => Err(self.write_failed(page, slot)),
            other => other,
        }
    }

    /// The device kept failing the write of `page` to `slot`: retires the slot, forgets the
    /// page, and returns the error that says so.
    pub(crate) fn write_failed(&mut self, page: usize, slot: usize) -> PagerError {
        self.retire(slot);
        self.release(page);
        self.stats.write_failures += 1;
        PagerError::WriteFailed { page }
    }

    /// Retires `slot`: it is never given to a page again (its page, if any, loses it).
    pub(crate) fn retire(&mut self, slot: usize) {
        if self.retired[slot] {
            return;
        }
        if let Some(owner) = self.owners[slot].take() {
            self.by_page.remove(&owner.page);
            self.used -= 1;
        }
        self.retired[slot] = true;
        self.retired_count += 1;
        self.stats.retired_slots += 1;
    }

    /// Whether `slot` is retired.
    pub fn is_retired(&self, slot: usize) -> bool {
        self.retired.get(slot).copied().unwrap_or(false)
    }

    /// The first run of `n` free slots (retired slots are never free).
    pub(crate) fn find_run(&self, n: usize) -> Option<usize> {
        let mut run = 0;
        for (i, owner) in self.owners.iter().enumerate() {
            run = if owner.is_none() && !self.retired[i] { run + 1 } else { 0 };
            if run == n {
                return Some(i + 1 - n);
            }
        }
        None
    }

    /// Makes `slot` (free) hold `page` in `group`, and frees the page's old slot.
    pub(crate) fn assign(&mut self, slot: usize, page: usize, group: u64) {
        debug_assert!(self.owners[slot].is_none(), "a live slot is never reassigned");
        debug_assert!(!self.retired[slot], "a retired slot is never reassigned");
        if let Some(old) = self.by_page.insert(page, slot) {
            self.owners[old] = None;
        } else {
            self.used += 1;
        }
        self.owners[slot] = Some(SlotOwner { page, group });
    }

    /// Frees `page`'s slot, if it has one.
    pub(crate) fn release(&mut self, page: usize) {
        if let Some(slot) = self.by_page.remove(&page) {
            self.owners[slot] = None;
            self.used -= 1;
        }
    }

    /// Runs `transfer` until it succeeds, up to [`ATTEMPTS`] times, waiting on the device's
    /// clock before each retry; a refusal ([`DeviceError::OutOfRange`]) is not retried. The
    /// last error if every try failed.
    fn retrying(
        &mut self,
        mut transfer: impl FnMut(&mut D) -> Result<(), DeviceError>,
    ) -> Result<(), PagerError> {
        let mut wait = RETRY_WAIT_NS;
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                self.device.wait(wait);
                wait = wait.saturating_mul(2);
                self.stats.retries += 1;
            }
            match transfer(&mut self.device) {
                Ok(()) => return Ok(()),
                Err(DeviceError::Io) => {}
                Err(e) => return Err(PagerError::Device(e)),
            }
        }
        Err(PagerError::Device(DeviceError::Io))
    }

    /// Writes `data` (whole pages) to the slots from `first` on, in one transfer (retried);
    /// [`PagerError::Device`] if the device kept failing it.
    pub(crate) fn write_run(&mut self, first: usize, data: &[u8]) -> Result<(), PagerError> {
        let sector = first as u64 * self.sectors_per_slot;
        self.retrying(|d| d.write(sector, data))?;
        self.stats.device_writes += 1;
        self.stats.pages_written += (data.len() / PAGE_SIZE) as u64;
        Ok(())
    }

    /// Reads whole pages from the slots from `first` on into `buf`, in one transfer
    /// (retried); [`PagerError::Device`] if the device kept failing it.
    pub(crate) fn read_run(&mut self, first: usize, buf: &mut [u8]) -> Result<(), PagerError> {
        let sector = first as u64 * self.sectors_per_slot;
        self.retrying(|d| d.read(sector, buf))?;
        self.stats.device_reads += 1;
        self.stats.pages_read += (buf.len() / PAGE_SIZE) as u64;
        Ok(())
    }
}
