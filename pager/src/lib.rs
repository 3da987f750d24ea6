//! The Heracles pager hierarchy for Tessera's paged stretch drivers: the components a domain
//! composes to page one stretch to its own disk stream (or to other nodes' memory, through a
//! remote store) and its own compressed cache, as
//! traits with implementations. The crate is `no_std` (with `alloc`), has no `unsafe` code,
//! no threads, no floating point and no clock, so it is deterministic and tested whole on the
//! host against an in-memory block device; the paged stretch driver (`stretch_drivers/paged`)
//! runs it in a domain.
//!
//! # Layers, top to bottom
//! - [`pager::Pager`]: decides for its frames and holds none: `fault`, `lock` and `revoke`
//!   return the frame operations they need one [`plan::Step`] at a time, which the caller does
//!   and answers ([`pager::Pager::resume`]), and end in a typed [`plan::Outcome`] (a fault's
//!   [`plan::FaultOutcome`]: where the page came from, the evictions done). It owns a
//!   replacement policy, a cache manager and the application's [`app::AppHandler`]; answers
//!   `unlock`, `resize_cache` and `stats` directly. [`hierarchy::BuildHierarchy`] builds the
//!   thesis's ten hierarchies (Fig 8.2) in one call.
//! - [`replace`]: [`replace::ReplacementPolicy`]; second-chance FIFO clock (default), LRU, or
//!   the application's own.
//! - [`cache`]: [`cache::CacheManager`]; basic (eviction and fetch areas), compressed (lz4 or
//!   WKdm), extended (compressed pool over eviction and fetch areas). Caching is exclusive.
//! - [`backing`]: [`backing::BackingStore`], the backing store manager: a disk manager to the
//!   caches that routes pages between a local disk manager and a [`remote::RemoteStore`] (the
//!   remote paging client) by mode (local, remote, remote mirrored to another server or to the
//!   disk), knows where each page's latest copy is, falls back to the disk, and brings pages
//!   back to it after a revocation; [`remote::MemRemoteStore`] for tests.
//! - [`disk`]: [`disk::DiskManager`]; basic, write-behind, prefetching (friends).
//! - [`spec`]: [`spec::PagerSpec`], a paged stretch's configuration as one line of text, with
//!   [`hierarchy::Hierarchy`], [`replace::PolicyKind`] and [`cache::Codec`]: plain data from the
//!   `pager_spec` crate (re-exported here), which the manifest's front end uses without the
//!   pager; [`hierarchy::BuildHierarchy`] and [`replace::BuildPolicy`] build them.
//! - [`frames`]: [`frames::MemFrames`], frames in memory that do a pager's steps, for tests.
//! - [`block`]: [`block::SyncDisk`], the pager's synchronous view of its disk, and
//!   [`block::MemBlockDevice`] for tests, with faults injected ([`block::Injected`]).
//!
//! # Invariants
//! - A page's current contents are in exactly one place: resident, in one cache area, or
//!   (for clean pages also) in the backing store; never resident and cached at once.
//! - A live swap slot is never written for another page; a full swap area is a
//!   [`PagerError::SwapFull`] before anything is written, and what was stored stays readable.
//! - A component that returns an error has lost nothing: an eviction that cannot be stored
//!   leaves the victim resident. The one exception is the disk's: a page whose only copy the
//!   device keeps failing to read is lost ([`PagerError::PageLost`]), alone, and the pager
//!   tells the application ([`app::AppHandler::page_lost`]).
//! - A retired swap slot (one whose write or read kept failing) is never used again.
//!
//! # Disk errors
//! A failed transfer is retried ([`disk::ATTEMPTS`] tries, waiting on the device's clock
//! between them, [`block::SyncDisk::wait`]); a write that keeps failing retires its slot and
//! is a [`PagerError::WriteFailed`] naming the page written, which stays where it was (a victim
//! resident and dirty, while the pager tries another victim); see [`disk`] and
//! [`pager::Pager`].
//! - Everything is bounded by its configuration: frames, cache pool bytes, eviction and fetch
//!   areas, the write-behind queue, the swap area.
//!
//! # Choices
//! - Incompressible pages (compressed size, rounded to 512-byte sub-pages, over
//!   `PAGE_SIZE - 512`) are stored raw in the compressed pool by default, so their faults
//!   cost a copy; [`cache::Incompressible::Bypass`] sends them below instead. Zero pages are
//!   a mark with no bytes.
//! - The compressed pool expels clean pages first (oldest clean, else oldest).
//! - Prefetched pages stay in the fetch area until fetched, put again, or pushed out by newer
//!   prefetches; a miss does not empty the area.
//! - Clean pages whose contents the backing store holds are dropped, not rewritten, when they
//!   leave a cache, so groups on disk hold the dirty pages evicted together.
//! - lz4 is `lz4_flex`'s block format with its safe encoder and decoder and no `std`; the
//!   hash table is allocated once per cache, not on the stack per page.
//! - The compressed cache's codec is lz4 by default, or WKdm ([`cache::wkdm`], Wilson and
//!   Kaplan's word-based compressor, the thesis's), chosen per cache for its life
//!   ([`cache::Codec`], the spec's `codec` key). WKdm is several times faster and shrinks
//!   word data (small integers, pointers) more, but not text, which it leaves incompressible.
//!   Its working memory is allocated once per cache, like lz4's.
//!
//! # Not yet
//! - Filling a new server from the disk after every server was lost, and switching back to
//!   it: the pages stay on the disk, and new evictions go to the remote store again once it
//!   takes them ([`backing`]).
//! - Compressed pages on disk: the disk managers store whole pages, so the extended cache's
//!   fetch and eviction areas hold pages uncompressed.
//! - The compressed pool as one contiguous stretch with an address-ordered free list; its
//!   bytes are heap allocations counted in sub-pages.
//! - Disk QoS negotiation: the swap area is the whole [`block::SyncDisk`], whose stream
//!   carries the contract.
//! - Weighted clean FIFO in the compressed pool; a write-behind queue drained by a thread.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod app;
pub mod backing;
pub mod block;
pub mod cache;
pub mod disk;
pub mod error;
pub mod frames;
pub mod hierarchy;
pub mod pager;
pub mod plan;
pub mod remote;
pub mod replace;

#[cfg(test)]
mod tests;

// The lab `clock`'s graded tests (`docs/labs/clock.md`), in a file of their own.
#[cfg(test)]
#[path = "lab_clock_tests.rs"]
mod lab_clock;

pub use abi::PAGE_SIZE;
pub use error::PagerError;
pub use pager_spec::spec;

/// One page of contents.
pub type Page = [u8; PAGE_SIZE];
