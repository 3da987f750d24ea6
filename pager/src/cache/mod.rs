//! Cache managers: the layer between the pager and the backing store. The pager hands a
//! cache manager every page it evicts ([`CacheManager::put`]) and asks it for every page it
//! faults in that has content ([`CacheManager::fetch`]); the cache keeps what it can and
//! passes the rest down.
//!
//! Caching is *exclusive*: a page is never both resident and cached. A fetch that hits removes
//! the page from the cache, and pages read beside a fetched one (prefetched) are kept only if
//! they are neither resident nor held higher up. `dirty` on a page means the backing store may
//! not hold its current contents; a clean page is always held there, so dropping it loses
//! nothing, and a dirty page fetched back from a cache stays dirty (the thesis's `clean` result
//! of `CacheManager.Read`).
//!
//! - [`BasicCache`]: an eviction area written out as one group when full, and a fetch area
//!   filled by group reads. With both areas empty it passes pages straight through: the
//!   "no cache" of plain local paging.
//! - [`CompressedCache`]: a bounded pool of pages compressed by lz4 or [`wkdm`] ([`Codec`]),
//!   zero pages as marks, over a lower cache; [`CompressedCache::extended`] puts it over a [`BasicCache`] with fetch and
//!   eviction areas, the thesis's extended compressed cache. Which entry a full pool expels
//!   is [`expel::choose_victim`]'s choice (clean FIFO), the compressed-cache lab's file.

mod basic;
mod compressed;
pub mod expel;
pub mod wkdm;

use crate::Page;
use crate::disk::StoreStats;
use crate::disk::{DiskStats, SwapSpace};
use crate::error::PagerError;
use crate::plan::Found;

pub use basic::BasicCache;
pub use compressed::{Codec, CompressedCache, CompressedConfig, Incompressible, SUB_PAGE};

/// What a fetch found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// The cache held the page (else it came from below).
    pub hit: bool,
    /// Where it was: in this cache, or in which place below.
    pub found: Found,
    /// The backing store may not hold these contents: the pager must keep the page dirty.
    pub dirty: bool,
}

/// A cache manager's counts. Ratios are in per mille: no floating point in a pager.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Fetches asked of this cache.
    pub fetches: u64,
    /// Fetches it served itself.
    pub hits: u64,
    /// Fetches it passed down.
    pub misses: u64,
    /// Of the hits, those on pages stored as a zero mark.
    pub zero_hits: u64,
    /// Of the hits, those on pages stored uncompressed.
    pub raw_hits: u64,
    /// Hits on pages that were prefetched.
    pub prefetch_hits: u64,
    /// Pages put into it.
    pub puts: u64,
    /// Clean pages it dropped because the backing store holds them.
    pub clean_dropped: u64,
    /// Pages it expelled to the layer below to make room.
    pub expelled: u64,
    /// Of those, pages the layer below took compressed (remote memory: sent as they were).
    pub expelled_compressed: u64,
    /// Group writes it issued to the backing store.
    pub group_writes: u64,
    /// Pages kept after being read beside a fetched one.
    pub prefetched: u64,
    /// Pages stored as a zero mark.
    pub zero_pages: u64,
    /// Pages stored uncompressed because they did not compress well enough.
    pub raw_pages: u64,
    /// Pages stored compressed.
    pub compressed_pages: u64,
    /// Compressed bytes of those pages (before rounding to sub-pages).
    pub compressed_bytes: u64,
    /// The most pages it held at once (a compressed cache's pool, zero marks included).
    pub peak_pages: usize,
    /// Bytes of the cache in use now.
    pub used_bytes: usize,
    /// The cache's size in bytes.
    pub capacity_bytes: usize,
    /// Time spent compressing and decompressing, by the configured clock (0 without one).
    pub codec_ns: u64,
}

impl CacheStats {
    /// Hits per thousand fetches (0 before any fetch).
    pub fn hit_permille(&self) -> u64 {
        (self.hits * 1000).checked_div(self.fetches).unwrap_or(0)
    }

    /// Compressed bytes per thousand page bytes, over the pages stored compressed.
    pub fn compression_permille(&self) -> u64 {
        (self.compressed_bytes * 1000)
            .checked_div(self.compressed_pages * crate::PAGE_SIZE as u64)
            .unwrap_or(0)
    }
}

/// A cache manager.
pub trait CacheManager {
    /// Takes `page`, just evicted (no longer resident), with `dirty` as defined in the module
    /// documentation. On an error the cache holds no copy of the page and the pager keeps it
    /// resident.
    fn put(&mut self, page: usize, data: &Page, dirty: bool) -> Result<(), PagerError>;

    /// Takes `page`, just expelled from a compressed cache above, as its WKdm-compressed bytes:
    /// `Ok(true)` once taken, `Ok(false)` (the default) if the caller must give it whole to
    /// [`CacheManager::put`]. A cache that passes pages straight through hands them to its
    /// backing store ([`crate::disk::DiskManager::write_compressed`]), so that a compressed
    /// cache over remote memory sends its pages compressed.
    fn put_compressed(
        &mut self,
        page: usize,
        wkdm: &[u8],
        dirty: bool,
    ) -> Result<bool, PagerError> {
        let _ = (page, wkdm, dirty);
        Ok(false)
    }

    /// Fills `buf` with `page`'s contents, from the cache or from below. `skip` names pages
    /// that must not be kept if they are read beside it (resident, or held higher up).
    fn fetch(
        &mut self,
        page: usize,
        buf: &mut Page,
        skip: &dyn Fn(usize) -> bool,
    ) -> Result<Fetched, PagerError>;

    /// Whether this cache, or a cache below it, holds `page`.
    fn holds(&self, page: usize) -> bool;

    /// Empties the cache into the backing store and flushes that.
    fn flush(&mut self) -> Result<(), PagerError>;

    /// Changes the cache's size to `bytes`, expelling pages if it shrinks.
    fn resize(&mut self, bytes: usize) -> Result<(), PagerError>;

    /// This cache's counts.
    fn stats(&self) -> CacheStats;

    /// The cache below this one, if any.
    fn lower(&self) -> Option<&dyn CacheManager>;

    /// The swap space of the backing store.
    fn swap_space(&self) -> SwapSpace;

    /// The disk manager's counts.
    fn disk_stats(&self) -> DiskStats;

    /// The disk manager's device writes so far (its [`DiskStats::device_writes`]), without
    /// copying its other counts: a fault that evicts reads it twice. Pages written to a
    /// remote store count too ([`crate::disk::DiskManager::device_writes`]).
    fn device_writes(&self) -> u64 {
        self.disk_stats().device_writes
    }

    /// The backing store manager's counts, if the disk manager below is one.
    fn store_stats(&self) -> StoreStats {
        StoreStats::default()
    }
}
