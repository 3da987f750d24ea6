//! [`Pager`]: the composition. It owns the frames, a replacement policy, a cache manager (and
//! through it the backing store and disk manager) and the application's handler, and answers
//! faults, locks, cache resizes and revocations for one stretch.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use crate::Page;
use crate::app::{AppHandler, GuaranteeChange};
use crate::cache::{CacheManager, CacheStats};
use crate::disk::{DiskStats, SwapSpace};
use crate::error::PagerError;
use crate::frames::Frames;
use crate::replace::ReplacementPolicy;

/// A resident page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resident {
    /// The frame it is on.
    pub frame: usize,
    /// Written since it was last stored (or fetched dirty from a cache).
    pub dirty: bool,
    /// Locked: never evicted or revoked.
    pub locked: bool,
    /// Mapped writable.
    pub writable: bool,
}

/// The pager's counts, with those of its top cache and disk manager.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PagerStats {
    /// Faults answered (including writes to resident read-only pages).
    pub faults: u64,
    /// Faults on pages with no content yet, answered with a zeroed frame.
    pub zero_fills: u64,
    /// Faults answered from the cache manager (hits and misses).
    pub fetches: u64,
    /// Pages evicted.
    pub evictions: u64,
    /// Of those, dirty ones (handed down to be stored).
    pub dirty_evictions: u64,
    /// Frames usable now.
    pub frames: usize,
    /// Frames released to revocations.
    pub frames_revoked: usize,
    /// Evictions that failed because the disk kept failing a write (another victim was
    /// chosen, the page kept resident and dirty).
    pub failed_evictions: u64,
    /// Pages lost: the disk kept failing the read of their only copy.
    pub lost_pages: u64,
    /// Fetches of pages the pager had evicted (their reuse distance is known).
    pub refetches: u64,
    /// The reuse distance of a page fetched back: the evictions made after its own, up to and
    /// including the one that made room for it (the pages handed to the caches since it was);
    /// the least, the greatest and the sum over the [`PagerStats::refetches`]. A cache that
    /// keeps the pages last handed to it serves a page only if it holds more pages than that.
    pub reuse_min: u64,
    /// See [`PagerStats::reuse_min`].
    pub reuse_max: u64,
    /// See [`PagerStats::reuse_min`].
    pub reuse_sum: u64,
    /// The top cache manager's counts.
    pub cache: CacheStats,
    /// The disk manager's counts.
    pub disk: DiskStats,
}

/// A pager for one stretch of `pages` pages.
///
/// A page's contents are in exactly one of three places: resident on a frame, held by the
/// cache manager or the backing store below it, or nowhere (a page never written reads as
/// zero). Eviction unmaps the victim, saves its frame and hands it down: dirty victims as
/// dirty; clean ones as clean, which a cache may keep and otherwise drops because the backing
/// store already holds them; clean victims with no content (zero, never written) are simply
/// forgotten.
///
/// The disk's failures: a victim whose contents cannot be stored because the disk kept failing
/// a write ([`PagerError::WriteFailed`], for it or for a page a cache pushed down to make room)
/// stays resident and dirty, and another victim is chosen, up to [`MAX_VICTIMS`] per frame
/// wanted; the page is written to another slot when next evicted. A page whose only copy the
/// disk cannot read ([`PagerError::PageLost`]) is lost: the application's handler hears of it
/// ([`AppHandler::page_lost`]), [`Pager::lost_pages`] names it, and it reads as zeros from
/// then on, as a page never written; every other page stays intact.
pub struct Pager {
    policy: Box<dyn ReplacementPolicy>,
    cache: Box<dyn CacheManager>,
    app: Box<dyn AppHandler>,
    pages: usize,
    resident: BTreeMap<usize, Resident>,
    free: Vec<usize>,
    /// Whether a page's contents are stored below (else it is zero or resident only).
    has_content: Vec<bool>,
    /// The eviction that stored each page, counted from 1 and truncated to 32 bits (0: none),
    /// for its reuse distance when it is fetched back.
    evicted_at: Vec<u32>,
    stats: PagerStats,
    evict_ahead: usize,
    /// Evictions between two harvests of the hardware's accessed bits, and since the last.
    harvest_every: usize,
    since_harvest: usize,
    /// Pages lost, in the order they were lost.
    lost: Vec<usize>,
}

/// Victims an eviction tries, at most, before it fails because the disk keeps failing writes.
pub const MAX_VICTIMS: usize = 8;

impl Pager {
    /// A pager for a stretch of `pages` pages over `frame_count` frames, numbered
    /// `0..frame_count`, which every call that pages is handed as a [`Frames`].
    pub fn new(
        frame_count: usize,
        pages: usize,
        policy: Box<dyn ReplacementPolicy>,
        cache: Box<dyn CacheManager>,
        app: Box<dyn AppHandler>,
    ) -> Pager {
        let count = frame_count;
        let mut policy = policy;
        policy.reserve(count, pages);
        Pager {
            policy,
            cache,
            app,
            pages,
            resident: BTreeMap::new(),
            free: (0..count).rev().collect(),
            has_content: vec![false; pages],
            evicted_at: vec![0; pages],
            stats: PagerStats { frames: count, ..PagerStats::default() },
            evict_ahead: 1,
            harvest_every: 0,
            since_harvest: usize::MAX,
            lost: Vec::new(),
        }
    }

    /// The cache manager.
    pub fn cache(&self) -> &dyn CacheManager {
        &*self.cache
    }

    /// The stretch's length in pages.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// Only frames `0..count` exist after all (fewer were found than the pager was made for):
    /// the others leave the free list. Call before any fault.
    pub fn limit_frames(&mut self, count: usize) {
        self.free.retain(|f| *f < count);
        self.stats.frames = self.stats.frames.min(count);
    }

    /// `page`'s residency, if it is resident.
    pub fn resident(&self, page: usize) -> Option<Resident> {
        self.resident.get(&page).copied()
    }

    /// The resident pages, in page order.
    pub fn resident_pages(&self) -> impl Iterator<Item = usize> + '_ {
        self.resident.keys().copied()
    }

    /// The pages lost (their numbers within the stretch), in the order they were lost.
    pub fn lost_pages(&self) -> &[usize] {
        &self.lost
    }

    /// The swap space of the backing store.
    pub fn swap_space(&self) -> SwapSpace {
        self.cache.swap_space()
    }

    /// Makes `page` resident (and dirty and writable if `write`) and returns its frame,
    /// evicting a victim if every frame is in use. On an error the page is not resident and
    /// nothing stored is lost.
    pub fn fault(
        &mut self,
        frames: &mut dyn Frames,
        page: usize,
        write: bool,
    ) -> Result<usize, PagerError> {
        if page >= self.pages {
            return Err(PagerError::PageOutOfRange { page, pages: self.pages });
        }
        self.stats.faults += 1;
        if let Some(r) = self.resident.get_mut(&page) {
            self.policy.accessed(page);
            if write && !r.writable {
                frames.map(page, r.frame, true)?;
                r.writable = true;
            }
            r.dirty |= write;
            return Ok(r.frame);
        }
        let frame = match self.free.pop() {
            Some(frame) => frame,
            None => self.evict_ahead(frames)?,
        };
        if let Err(e) = self.load(frames, page, frame, write) {
            self.free.push(frame);
            return Err(e);
        }
        Ok(frame)
    }

    /// Fills `frame` with `page` (fetched straight into the frame), maps it and makes it
    /// resident. Contents fetched from the cache manager are handed back to it if the frame
    /// cannot be mapped.
    fn load(
        &mut self,
        frames: &mut dyn Frames,
        page: usize,
        frame: usize,
        write: bool,
    ) -> Result<(), PagerError> {
        let fetched = self.has_content[page];
        let mut stored_dirty = None;
        let mut lost = false;
        if fetched {
            let (resident, cache) = (&self.resident, &mut self.cache);
            let mut fetch = |buf: &mut Page| {
                stored_dirty = Some(cache.fetch(page, buf, &|p| resident.contains_key(&p))?.dirty);
                Ok(())
            };
            match frames.fill(frame, &mut fetch) {
                Ok(()) => {
                    self.stats.fetches += 1;
                    self.note_reuse(page);
                }
                // Nothing holds the page any more: it goes on as a page never written.
                Err(PagerError::PageLost { page: p }) if p == page => {
                    self.has_content[page] = false;
                    self.evicted_at[page] = 0;
                    self.stats.lost_pages += 1;
                    self.lost.push(page);
                    self.app.page_lost(page);
                    lost = true;
                }
                Err(e) => {
                    self.hand_back(frames, page, frame, stored_dirty)?;
                    return Err(e);
                }
            }
        }
        if !fetched || lost {
            frames.zero(frame)?;
            self.stats.zero_fills += u64::from(!lost);
        }
        let dirty = write || stored_dirty == Some(true);
        // A dirty page is mapped writable at once: there is nothing more to learn from a
        // write. So is every page when the frames keep dirty bits.
        let writable = dirty || frames.tracks_dirty();
        if let Err(e) = frames.map(page, frame, writable) {
            self.hand_back(frames, page, frame, stored_dirty)?;
            return Err(e);
        }
        self.resident.insert(page, Resident { frame, dirty, locked: false, writable });
        self.policy.mapped(page);
        Ok(())
    }

    /// Counts `page`'s reuse distance, fetched back now, if its eviction was recorded.
    fn note_reuse(&mut self, page: usize) {
        let at = core::mem::take(&mut self.evicted_at[page]);
        if at == 0 {
            return;
        }
        let s = &mut self.stats;
        let distance = u64::from((s.evictions as u32).wrapping_sub(at));
        s.reuse_min = if s.refetches == 0 { distance } else { s.reuse_min.min(distance) };
        s.reuse_max = s.reuse_max.max(distance);
        s.reuse_sum += distance;
        s.refetches += 1;
    }

    /// Gives `page`'s contents, fetched into `frame` (if `stored_dirty` says they were), back
    /// to the cache manager as they came, after a failed load.
    fn hand_back(
        &mut self,
        frames: &mut dyn Frames,
        page: usize,
        frame: usize,
        stored_dirty: Option<bool>,
    ) -> Result<(), PagerError> {
        let Some(dirty) = stored_dirty else { return Ok(()) };
        let cache = &mut self.cache;
        frames.save(frame, &mut |data| cache.put(page, data, dirty))
    }

    /// Evicts [`Pager::set_evict_ahead`] victims (at least one) and returns the first's frame;
    /// the others' frames join the free list. Only the first eviction's error is the fault's.
    fn evict_ahead(&mut self, frames: &mut dyn Frames) -> Result<usize, PagerError> {
        self.harvest(frames)?;
        let frame = self.evict_one(frames)?;
        for _ in 1..self.evict_ahead {
            match self.evict_one(frames) {
                Ok(f) => self.free.push(f),
                Err(_) => break,
            }
        }
        Ok(frame)
    }

    /// Tells the replacement policy of the accesses the hardware marked since the last
    /// harvest (frames that keep accessed bits), before it chooses victims: at most once every
    /// [`Pager::set_harvest_every`] evictions, as reading the bits costs a kernel call for
    /// every run of resident pages.
    fn harvest(&mut self, frames: &mut dyn Frames) -> Result<(), PagerError> {
        if self.harvest_every == 0 || self.since_harvest < self.harvest_every {
            return Ok(());
        }
        self.since_harvest = 0;
        let (policy, resident) = (&mut self.policy, &self.resident);
        frames.referenced(&mut resident.keys().copied(), &mut |page| policy.accessed(page))
    }

    /// Sets how many evictions pass between two harvests of the accessed bits; 0 (the
    /// default), never. Harvesting makes the clock a true second-chance clock; without it the
    /// policy hears of faults only and the clock evicts nearly in FIFO order, as the thesis's
    /// did, which keeps pages evicted together in the program's order (what the friends disk
    /// manager stores and reads back as a group). `cargo xtask bench paging` measures both.
    pub fn set_harvest_every(&mut self, evictions: usize) {
        self.harvest_every = evictions;
    }

    /// Sets how many pages a fault that finds no free frame evicts (at least one): the extra
    /// frames serve the next faults, which then skip eviction, and its compression or write.
    pub fn set_evict_ahead(&mut self, pages: usize) {
        self.evict_ahead = pages.max(1);
    }

    /// Evicts the policy's victim and returns its frame. A victim that cannot be stored
    /// because the disk kept failing a write stays resident and dirty (the policy hears of it
    /// as accessed, so it is not chosen again at once) and another is tried, up to
    /// [`MAX_VICTIMS`] (or every resident page); the last such error if none could be.
    fn evict_one(&mut self, frames: &mut dyn Frames) -> Result<usize, PagerError> {
        let mut tried = 0;
        loop {
            match self.evict_victim(frames) {
                Err(e @ PagerError::WriteFailed { .. }) => {
                    self.stats.failed_evictions += 1;
                    tried += 1;
                    if tried >= MAX_VICTIMS.min(self.resident.len()) {
                        return Err(e);
                    }
                }
                other => return other,
            }
        }
    }

    /// Evicts the policy's victim and returns its frame; on an error it stays resident.
    fn evict_victim(&mut self, frames: &mut dyn Frames) -> Result<usize, PagerError> {
        if self.resident.is_empty() {
            return Err(PagerError::NoFrames);
        }
        let page = self.policy.victim().ok_or(PagerError::AllFramesLocked)?;
        let r = *self
            .resident
            .get(&page)
            .ok_or(PagerError::BadConfig("the policy chose a page that is not resident"))?;
        if r.locked {
            return Err(PagerError::BadConfig("the policy chose a locked page"));
        }
        let written = frames.unmap(page, r.frame)?;
        let dirty = r.dirty || written;
        if dirty || self.has_content[page] {
            let cache = &mut self.cache;
            if let Err(e) = frames.save(r.frame, &mut |data| cache.put(page, data, dirty)) {
                frames.map(page, r.frame, r.writable)?;
                if let Some(r) = self.resident.get_mut(&page) {
                    r.dirty = dirty;
                }
                self.policy.accessed(page);
                return Err(e);
            }
            self.has_content[page] = true;
            self.evicted_at[page] = (self.stats.evictions + 1) as u32;
        }
        if dirty {
            self.stats.dirty_evictions += 1;
        }
        self.stats.evictions += 1;
        self.since_harvest = self.since_harvest.saturating_add(1);
        self.resident.remove(&page);
        self.policy.unmapped(page);
        Ok(r.frame)
    }

    /// Makes `page` resident and locked: it is never evicted or revoked until unlocked.
    pub fn lock(&mut self, frames: &mut dyn Frames, page: usize) -> Result<usize, PagerError> {
        let frame = self.fault(frames, page, false)?;
        if let Some(r) = self.resident.get_mut(&page) {
            r.locked = true;
        }
        self.policy.locked(page);
        Ok(frame)
    }

    /// Lets a locked page be evicted again.
    pub fn unlock(&mut self, page: usize) {
        if let Some(r) = self.resident.get_mut(&page) {
            r.locked = false;
            self.policy.unlocked(page);
        }
    }

    /// Resizes the cache to `bytes`.
    pub fn resize_cache(&mut self, bytes: usize) -> Result<(), PagerError> {
        self.cache.resize(bytes)
    }

    /// Empties the caches into the backing store (resident pages stay resident).
    pub fn flush_cache(&mut self) -> Result<(), PagerError> {
        self.cache.flush()
    }

    /// Answers a revocation of `wanted` frames: free frames go first, then victims are
    /// evicted (dirty ones stored) and their frames released. Returns the frames released,
    /// fewer than `wanted` if only locked pages remain or a page could not be stored. The
    /// application hears of it through its handler, and may resize its cache in answer.
    pub fn revoke(&mut self, frames: &mut dyn Frames, wanted: usize) -> Result<usize, PagerError> {
        let mut released = 0;
        let mut failure = None;
        if self.free.len() < wanted {
            self.harvest(frames)?;
        }
        while released < wanted {
            let frame = match self.free.pop() {
                Some(frame) => frame,
                None if self.resident.is_empty() => break,
                None => match self.evict_one(frames) {
                    Ok(frame) => frame,
                    Err(PagerError::AllFramesLocked) => break,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                },
            };
            frames.release(frame)?;
            released += 1;
        }
        self.stats.frames -= released;
        self.stats.frames_revoked += released;
        let change = GuaranteeChange::FramesRevoked { released, frames_now: self.stats.frames };
        if let Some(bytes) = self.app.guarantees_changed(change) {
            self.cache.resize(bytes)?;
        }
        match failure {
            Some(e) if released == 0 => Err(e),
            _ => Ok(released),
        }
    }

    /// The cache manager, to drive it directly (tests).
    #[cfg(test)]
    pub(crate) fn cache_mut_for_test(&mut self) -> &mut dyn CacheManager {
        &mut *self.cache
    }

    /// The pager's counts.
    pub fn stats(&self) -> PagerStats {
        PagerStats { cache: self.cache.stats(), disk: self.cache.disk_stats(), ..self.stats }
    }
}
