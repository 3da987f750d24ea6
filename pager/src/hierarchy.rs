//! Building a [`Hierarchy`] (the cache part of the thesis's paging hierarchies, Heracles Fig
//! 8.2, as plain data in `pager_spec`) over its backing store ([`Below`]: the local disk, or
//! remote memory through a [`BackingStore`] over the disk and a remote store): its cache
//! managers, or a whole [`Pager`] ([`BuildHierarchy`]), so a manifest key or a few lines of
//! code choose one of the ten.
//!
//! Over the local disk alone the caches sit on a disk manager directly, with no backing store
//! manager between (nothing to route); over remote memory, on a [`BackingStore`] whose local
//! disk manager is a basic one (the prefetching hierarchies page only to the local disk).

use alloc::boxed::Box;

use crate::app::AppHandler;
use crate::backing::{Backing, BackingStore};
use crate::block::SyncDisk;
use crate::cache::{BasicCache, CacheManager, CompressedCache, CompressedConfig};
use crate::disk::{BasicDisk, DiskManager, PrefetchDisk};
use crate::error::PagerError;
use crate::pager::Pager;
use crate::remote::RemoteStore;
use crate::replace::ReplacementPolicy;

pub use pager_spec::{Combination, Hierarchy};

/// What a hierarchy's caches page to beside the local device: the backing store's mode, and
/// the remote store (the remote paging client) for a remote mode. A remote mode with no
/// remote store pages to the disk, as when no server can be had.
pub struct Below {
    /// The mode.
    pub backing: Backing,
    /// The remote store.
    pub remote: Option<Box<dyn RemoteStore>>,
}

impl Below {
    /// The local disk only.
    pub fn local() -> Below {
        Below { backing: Backing::Local, remote: None }
    }

    /// Remote memory in `backing`'s mode through `remote`, with the disk as fallback.
    pub fn remote(backing: Backing, remote: Option<Box<dyn RemoteStore>>) -> Below {
        Below { backing, remote }
    }
}

/// Builds a [`Hierarchy`]: its cache managers over a disk manager, or a whole [`Pager`].
pub trait BuildHierarchy {
    /// The cache manager stack of this hierarchy over a swap area on `device`; a compressed
    /// cache times its codec with `clock` if there is one.
    fn cache<D: SyncDisk + 'static>(
        &self,
        device: D,
        clock: Option<fn() -> u64>,
    ) -> Result<Box<dyn CacheManager>, PagerError> {
        self.cache_over(device, clock, Below::local())
    }

    /// The cache manager stack of this hierarchy over `below`, with a swap area on `device`
    /// (the fallback and the mirror of a remote store). [`PagerError::BadConfig`] for a
    /// prefetching hierarchy over remote memory.
    fn cache_over<D: SyncDisk + 'static>(
        &self,
        device: D,
        clock: Option<fn() -> u64>,
        below: Below,
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
        self.build_over(frame_count, device, Below::local(), pages, policy, app)
    }

    /// A pager for a stretch of `pages` pages on `frame_count` frames, paging to `below`
    /// with a swap area on `device`.
    fn build_over<D: SyncDisk + 'static>(
        &self,
        frame_count: usize,
        device: D,
        below: Below,
        pages: usize,
        policy: Box<dyn ReplacementPolicy>,
        app: Box<dyn AppHandler>,
    ) -> Result<Pager, PagerError> {
        let cache = self.cache_over(device, None, below)?;
        Ok(Pager::new(frame_count, pages, policy, cache, app))
    }
}

impl BuildHierarchy for Hierarchy {
    fn cache_over<D: SyncDisk + 'static>(
        &self,
        device: D,
        clock: Option<fn() -> u64>,
        below: Below,
    ) -> Result<Box<dyn CacheManager>, PagerError> {
        if below.backing.is_remote() {
            let disk: Box<dyn DiskManager> = Box::new(BasicDisk::new(device)?);
            let store = Box::new(BackingStore::new(below.backing, Some(disk), below.remote)?);
            let lower = BasicCache::pass_through(store);
            return Ok(match *self {
                Hierarchy::LocalPaging => Box::new(lower),
                Hierarchy::CompressedCache { pool_bytes, codec } => Box::new(CompressedCache::new(
                    Box::new(lower),
                    CompressedConfig { clock, codec, ..CompressedConfig::new(pool_bytes) },
                )),
                Hierarchy::PrefetchingCompressedCache { .. }
                | Hierarchy::PrefetchingCache { .. } => {
                    return Err(PagerError::BadConfig(
                        "a prefetching hierarchy pages only to the local disk",
                    ));
                }
            });
        }
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
