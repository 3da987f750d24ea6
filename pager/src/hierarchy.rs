//! Building a [`Hierarchy`] (the thesis's local paging hierarchies, Heracles Fig 8.2, 1-4, as
//! plain data in `pager_spec`): its cache managers over a disk manager, or a whole [`Pager`]
//! ([`BuildHierarchy`]), so a manifest key or a few lines of code choose one.

use alloc::boxed::Box;

use crate::app::AppHandler;
use crate::block::SyncDisk;
use crate::cache::{BasicCache, CacheManager, CompressedCache, CompressedConfig};
use crate::disk::{BasicDisk, PrefetchDisk};
use crate::error::PagerError;
use crate::pager::Pager;
use crate::replace::ReplacementPolicy;

pub use pager_spec::Hierarchy;

/// Builds a [`Hierarchy`]: its cache managers over a disk manager, or a whole [`Pager`].
pub trait BuildHierarchy {
    /// The cache manager stack of this hierarchy over a swap area on `device`; a compressed
    /// cache times its codec with `clock` if there is one.
    fn cache<D: SyncDisk + 'static>(
        &self,
        device: D,
        clock: Option<fn() -> u64>,
    ) -> Result<Box<dyn CacheManager>, PagerError>;

    /// A pager for a stretch of `pages` pages on `frame_count` frames, paging to `device`.
    fn build<D: SyncDisk + 'static>(
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

impl BuildHierarchy for Hierarchy {
    fn cache<D: SyncDisk + 'static>(
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
                Box::new(BasicCache::pass_through(Box::new(BasicDisk::new(device)?)))
            }
            Hierarchy::CompressedCache { pool_bytes, codec } => {
                let lower = BasicCache::pass_through(Box::new(BasicDisk::new(device)?));
                Box::new(CompressedCache::new(Box::new(lower), compressed(pool_bytes, codec)))
            }
            Hierarchy::PrefetchingCompressedCache {
                pool_bytes,
                codec,
                evict_pages,
                fetch_pages,
            } => Box::new(CompressedCache::extended(
                Box::new(PrefetchDisk::new(device)?),
                compressed(pool_bytes, codec),
                evict_pages,
                fetch_pages,
            )),
            Hierarchy::PrefetchingCache { evict_pages, fetch_pages } => Box::new(BasicCache::new(
                Box::new(PrefetchDisk::new(device)?),
                evict_pages,
                fetch_pages,
            )),
        })
    }
}
