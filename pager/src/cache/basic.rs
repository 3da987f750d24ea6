//! [`BasicCache`]: uncompressed pages in an eviction area and a fetch area.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::{CacheManager, CacheStats, Fetched};
use crate::disk::{DiskManager, DiskStats, SwapSpace};
use crate::error::PagerError;
use crate::plan::Found;
use crate::{PAGE_SIZE, Page};

/// The basic cache manager.
///
/// - *Eviction area* (`evict_pages`): dirty pages put into the cache wait here; when it is
///   full, all of them are written to the backing store as one group (contiguous on a
///   prefetching disk). A fetch of a page waiting here is a hit and takes it out (dirty).
/// - *Fetch area* (`fetch_pages`): a miss reads the page and up to `fetch_pages` of its group
///   in one request; the others wait here (clean) until fetched, put again, or pushed out
///   by newer prefetches (oldest first). Earlier prefetches are kept across misses: reading
///   the thesis literally (a miss empties the area) loses one stream's prefetches whenever a
///   program faults on two streams in turn.
/// - Clean pages put into the cache are dropped: the backing store already holds them.
///
/// With both areas empty the cache holds nothing and every page goes straight to the backing
/// store, one page per request.
pub struct BasicCache {
    disk: Box<dyn DiskManager>,
    evict: Vec<(usize, Box<Page>)>,
    evict_pages: usize,
    fetch: VecDeque<(usize, Box<Page>)>,
    fetch_pages: usize,
    stats: CacheStats,
}

impl BasicCache {
    /// A cache over `disk` with the two areas' sizes in pages.
    pub fn new(disk: Box<dyn DiskManager>, evict_pages: usize, fetch_pages: usize) -> BasicCache {
        BasicCache {
            disk,
            evict: Vec::new(),
            evict_pages,
            fetch: VecDeque::new(),
            fetch_pages,
            stats: CacheStats::default(),
        }
    }

    /// A cache that holds nothing: pages go straight to `disk`.
    pub fn pass_through(disk: Box<dyn DiskManager>) -> BasicCache {
        BasicCache::new(disk, 0, 0)
    }

    /// The disk manager below.
    pub fn disk(&self) -> &dyn DiskManager {
        &*self.disk
    }

    fn write_evict_area(&mut self) -> Result<(), PagerError> {
        if self.evict.is_empty() {
            return Ok(());
        }
        let group: Vec<(usize, &Page)> = self.evict.iter().map(|(p, d)| (*p, &**d)).collect();
        self.disk.write_group(&group)?;
        self.stats.group_writes += 1;
        self.evict.clear();
        Ok(())
    }

    fn remove_from_fetch_area(&mut self, page: usize) -> Option<Box<Page>> {
        let i = self.fetch.iter().position(|(p, _)| *p == page)?;
        self.fetch.remove(i).map(|(_, d)| d)
    }

    fn trim_fetch_area(&mut self) {
        while self.fetch.len() > self.fetch_pages {
            self.fetch.pop_front();
        }
    }
}

impl CacheManager for BasicCache {
    fn put(&mut self, page: usize, data: &Page, dirty: bool) -> Result<(), PagerError> {
        self.stats.puts += 1;
        // Any copy waiting in the fetch area is the same as the backing store's, or older.
        self.remove_from_fetch_area(page);
        if !dirty && self.disk.location(page).is_some() {
            self.stats.clean_dropped += 1;
            return Ok(());
        }
        if self.evict_pages == 0 {
            self.disk.write_group(&[(page, data)])?;
            self.stats.group_writes += 1;
            return Ok(());
        }
        if let Some((_, d)) = self.evict.iter_mut().find(|(p, _)| *p == page) {
            d.copy_from_slice(data);
            return Ok(());
        }
        self.evict.push((page, Box::new(*data)));
        if self.evict.len() >= self.evict_pages
            && let Err(e) = self.write_evict_area()
        {
            // The page was not taken: the pager keeps it resident.
            self.evict.pop();
            return Err(e);
        }
        Ok(())
    }

    /// Only passing through (no eviction area) and only a dirty page: a clean one is dropped
    /// by [`CacheManager::put`] as the backing store holds it.
    fn put_compressed(
        &mut self,
        page: usize,
        wkdm: &[u8],
        dirty: bool,
    ) -> Result<bool, PagerError> {
        if self.evict_pages != 0 || !dirty {
            return Ok(false);
        }
        self.remove_from_fetch_area(page);
        if !self.disk.write_compressed(page, wkdm)? {
            return Ok(false);
        }
        self.stats.puts += 1;
        self.stats.group_writes += 1;
        Ok(true)
    }

    fn fetch(
        &mut self,
        page: usize,
        buf: &mut Page,
        skip: &dyn Fn(usize) -> bool,
    ) -> Result<Fetched, PagerError> {
        self.stats.fetches += 1;
        if let Some(i) = self.evict.iter().position(|(p, _)| *p == page) {
            let (_, data) = self.evict.swap_remove(i);
            buf.copy_from_slice(&data[..]);
            self.stats.hits += 1;
            return Ok(Fetched { hit: true, found: Found::EvictionArea, dirty: true });
        }
        if let Some(data) = self.remove_from_fetch_area(page) {
            buf.copy_from_slice(&data[..]);
            self.stats.hits += 1;
            self.stats.prefetch_hits += 1;
            return Ok(Fetched { hit: true, found: Found::FetchArea, dirty: false });
        }
        self.stats.misses += 1;
        let mut prefetched = Vec::new();
        self.disk.read(page, buf, 1 + self.fetch_pages, &mut prefetched)?;
        for (p, data) in prefetched {
            let held =
                self.evict.iter().any(|(q, _)| *q == p) || self.fetch.iter().any(|(q, _)| *q == p);
            if self.fetch_pages > 0 && !held && !skip(p) {
                self.fetch.push_back((p, data));
                self.stats.prefetched += 1;
            }
        }
        self.trim_fetch_area();
        Ok(Fetched { hit: false, found: Found::Disk, dirty: false })
    }

    fn holds(&self, page: usize) -> bool {
        self.evict.iter().any(|(p, _)| *p == page) || self.fetch.iter().any(|(p, _)| *p == page)
    }

    fn flush(&mut self) -> Result<(), PagerError> {
        self.write_evict_area()?;
        self.fetch.clear();
        self.disk.flush()
    }

    fn resize(&mut self, bytes: usize) -> Result<(), PagerError> {
        // The eviction area is fixed (as in the thesis); the fetch area takes the rest.
        self.fetch_pages = (bytes / PAGE_SIZE).saturating_sub(self.evict_pages);
        self.trim_fetch_area();
        Ok(())
    }

    fn stats(&self) -> CacheStats {
        CacheStats {
            used_bytes: (self.evict.len() + self.fetch.len()) * PAGE_SIZE,
            capacity_bytes: (self.evict_pages + self.fetch_pages) * PAGE_SIZE,
            ..self.stats
        }
    }

    fn lower(&self) -> Option<&dyn CacheManager> {
        None
    }

    fn swap_space(&self) -> SwapSpace {
        self.disk.swap_space()
    }

    fn disk_stats(&self) -> DiskStats {
        self.disk.stats()
    }

    fn device_writes(&self) -> u64 {
        self.disk.device_writes()
    }

    fn store_stats(&self) -> crate::disk::StoreStats {
        self.disk.store_stats()
    }
}
