//! [`Hierarchy`]: the thesis's local paging hierarchies (Heracles Fig 8.2, 1-4) as plain data,
//! each built into a [`Pager`] by [`Hierarchy::build`], so a manifest key or a few lines of
//! code choose one.

use alloc::boxed::Box;

use crate::app::AppHandler;
use crate::backing::LocalBacking;
use crate::block::SyncDisk;
use crate::cache::{BasicCache, CacheManager, Codec, CompressedCache, CompressedConfig};
use crate::disk::{BasicDisk, PrefetchDisk};
use crate::error::PagerError;
use crate::pager::Pager;
use crate::replace::ReplacementPolicy;

/// A local paging hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    /// Local paging: no cache, a basic disk manager.
    LocalPaging,
    /// Local paging with a compressed cache of `pool_bytes`, a basic disk manager.
    CompressedCache {
        /// The compressed pool's size in bytes.
        pool_bytes: usize,
        /// The pool's compressor.
        codec: Codec,
    },
    /// Local paging with a prefetching compressed cache: the extended compressed cache over
    /// a prefetching disk manager.
    PrefetchingCompressedCache {
        /// The compressed pool's size in bytes.
        pool_bytes: usize,
        /// The pool's compressor.
        codec: Codec,
        /// Eviction area, pages (written as one group).
        evict_pages: usize,
        /// Fetch area, pages (read with a miss).
        fetch_pages: usize,
    },
    /// Local paging with a prefetching non-compressed cache: the basic cache's eviction and
    /// fetch areas over a prefetching disk manager.
    PrefetchingCache {
        /// Eviction area, pages.
        evict_pages: usize,
        /// Fetch area, pages.
        fetch_pages: usize,
    },
}

impl Hierarchy {
    /// The compressed pool's codec, if it has a compressed pool.
    pub fn codec(&self) -> Option<Codec> {
        match *self {
            Hierarchy::CompressedCache { codec, .. }
            | Hierarchy::PrefetchingCompressedCache { codec, .. } => Some(codec),
            Hierarchy::LocalPaging | Hierarchy::PrefetchingCache { .. } => None,
        }
    }

    /// Its name, as a manifest would spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Hierarchy::LocalPaging => "local",
            Hierarchy::CompressedCache { .. } => "compressed",
            Hierarchy::PrefetchingCompressedCache { .. } => "prefetching-compressed",
            Hierarchy::PrefetchingCache { .. } => "prefetching",
        }
    }

    /// The cache manager stack of this hierarchy over a swap area on `device`; a compressed
    /// cache times its codec with `clock` if there is one.
    pub fn cache<D: SyncDisk + 'static>(
        &self,
        device: D,
        clock: Option<fn() -> u64>,
    ) -> Result<Box<dyn CacheManager>, PagerError> {
        let compressed = |pool_bytes, codec| CompressedConfig {
            clock,
            codec,
            ..CompressedConfig::new(pool_bytes)
        };
        Ok(match *self {
            Hierarchy::LocalPaging => {
                let backing = LocalBacking::new(Box::new(BasicDisk::new(device)?));
                Box::new(BasicCache::pass_through(Box::new(backing)))
            }
            Hierarchy::CompressedCache { pool_bytes, codec } => {
                let backing = LocalBacking::new(Box::new(BasicDisk::new(device)?));
                let lower = BasicCache::pass_through(Box::new(backing));
                Box::new(CompressedCache::new(Box::new(lower), compressed(pool_bytes, codec)))
            }
            Hierarchy::PrefetchingCompressedCache {
                pool_bytes,
                codec,
                evict_pages,
                fetch_pages,
            } => {
                let backing = LocalBacking::new(Box::new(PrefetchDisk::new(device)?));
                Box::new(CompressedCache::extended(
                    Box::new(backing),
                    compressed(pool_bytes, codec),
                    evict_pages,
                    fetch_pages,
                ))
            }
            Hierarchy::PrefetchingCache { evict_pages, fetch_pages } => {
                let backing = LocalBacking::new(Box::new(PrefetchDisk::new(device)?));
                Box::new(BasicCache::new(Box::new(backing), evict_pages, fetch_pages))
            }
        })
    }

    /// A pager for a stretch of `pages` pages on `frame_count` frames, paging to `device`.
    pub fn build<D: SyncDisk + 'static>(
        &self,
        frame_count: usize,
        device: D,
        pages: usize,
        policy: Box<dyn ReplacementPolicy>,
        app: Box<dyn AppHandler>,
    ) -> Result<Pager, PagerError> {
        Ok(Pager::new(frame_count, pages, policy, self.cache(device, None)?, app))
    }
}
