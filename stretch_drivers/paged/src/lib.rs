//! The paged stretch driver: a stretch paged by the Heracles hierarchy ([`pager`]) to the
//! domain's own disk stream, or to other nodes' memory, in the domain that owns it.
//!
//! [`PagedDriver`] takes its frames from the domain's contract when it binds (guaranteed ones
//! first, then optimistic ones, up to [`PagedConfig::frames`]), builds the chosen
//! [`Hierarchy`] over the block device it was given (in a domain, the domain's own session of
//! the block protocol, so paging is charged to the domain's own disk contract), or, given a
//! remote store ([`PagedDriver::with_store`]: the remote paging client, and the mode: remote,
//! mirrored to another server or to the disk), over a backing store manager
//! ([`pager::backing::BackingStore`]) routing pages between the remote store and the device
//! (the fallback, and the mirror), and answers:
//! - `fault`: the pager makes the page resident, evicting a victim of the replacement policy
//!   if every frame is in use (several, with `ahead`); pages are mapped writable, and the
//!   `remap` that takes a victim out of view returns its dirty bit, so a clean page is dropped,
//!   not rewritten, and a first write costs no fault; if asked (`harvest`), the clock also
//!   hears of the accesses the hardware marked (the accessed bits, read with `page_state`);
//! - `lock` / `unlock`: pages made resident and kept so, or let go;
//! - `revoke`: frames given back, free ones first, then evicted pages (dirty ones written
//!   back first), always optimistic kernel frames (a page on an optimistic frame moves onto a
//!   guaranteed one the pager frees).
//!
//! The disk's failures are the pager's to absorb ([`pager::pager::Pager`]): transfers are
//! retried after a wait on the device's clock ([`SyncDisk::wait`]: in a domain the
//! faulting thread sleeps); a victim whose write-back keeps failing stays resident and
//! another is chosen, and only when none can be stored does the fault fail, with
//! [`FaultError::WriteBack`] naming the page whose write failed; a page whose only copy cannot
//! be read is lost alone: the application's handler hears of it
//! ([`AppHandler::page_lost`]), [`PagedDriver::lost_pages`] names its address, and it is
//! mapped zero-filled, so the faulting access completes.
//! The remote store's failures are the backing store manager's: pages go to the device when
//! no server takes them, a page lost with its servers is lost like one the disk cannot read
//! (the handler hears of it, and it reads as zeros), and after a revocation with no other
//! server the pages come back to the device a few per fault
//! ([`pager::backing`]; [`PagedDriver::flush_cache`] finishes the move).
//!
//! The pager decides and the driver does: each call that pages returns the frame operations
//! the pager needs one at a time ([`pager::plan::Step`]), which [`frames::KernelFrames::run`]
//! does over the kernel's frames and answers, and a fault ends in its outcome (where the page
//! came from, the evictions done), from which the driver records its hit costs
//! ([`PagedDriver::hit_costs`]) and every fault's time by where its page came from
//! ([`PagedDriver::fault_latencies`]). The pager never calls the driver.
//!
//! Frames are filled and saved out of view through a window of managed pages the domain gives
//! the driver ([`frames`]), so no thread sees a half-filled page or changes a page being
//! written back; a frame evicted waits at its window page to be filled again, so a fault
//! costs one `remap` to evict and one to map, and a full window one `map_batch` more. The
//! application composes its own hierarchy ([`PagedConfig`]), supplies its own replacement
//! policy ([`PagedDriver::with_policy`]) and AppHandler ([`PagedDriver::with_app`]), and
//! resizes its cache at run time ([`PagedDriver::resize_cache`]).
//!
//! # Invariants
//! - Every frame the driver holds is in its [`frames::FrameTable`], at one place: unmapped,
//!   at one window page (which holds no other), or at the one page the pager has resident on
//!   it.
//! - A page the kernel saw written (its dirty bit, returned by the `remap` that moves it) is
//!   stored when evicted: the bit is kept in the table while the page moves between frames.
//! - A page's contents are where the pager says (resident, cached, stored, or zero): the
//!   driver never maps a frame the pager has not filled.
//!
//! Pages go to and from the disk without a copy: a page read from disk is read straight into
//! its frame at the window page, and one written back leaves from its frame there, the frame
//! lent to the disk driver for the request (`blk_client::StreamDisk` lends every whole window
//! page it is given, unless the spec says `loans=no`; the kernel's `frame_lend`). A page decompressed from the compressed cache
//! is written once, into its frame; pages the compressed pool or the prefetching disk manager
//! keep in buffers of their own still cross the block session's data area by one copy.
//!
//! # Not implemented
//! Unbind writing the stretch back (unbind drops everything, as the stretch is destroyed with
//! it, and does not release the remote store's pages: the store does when it is dropped, if it
//! does); filling a new server from the disk after every server was lost (pages stay on the
//! disk, new evictions go to the remote store again once it takes them); pages to the network
//! without a copy (the remote paging client copies a page into its UDP session's slots).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod frames;

#[cfg(test)]
mod tests;

// The lab `clock`'s graded test on an access trace (`docs/labs/clock.md`).
#[cfg(test)]
#[path = "lab_clock_tests.rs"]
mod lab_clock;

use alloc::boxed::Box;
use core::ops::Range;

use pager::PagerError;
use pager::app::{AppHandler, NoAppHandler};
pub use pager::backing::Backing;
use pager::block::SyncDisk;
use pager::hierarchy::{Below, BuildHierarchy, Hierarchy};
use pager::pager::{Pager, PagerStats};
pub use pager::plan::HitKind;
use pager::plan::{FaultOutcome, Found, Outcome, Source};
pub use pager::remote::RemoteStore;
use pager::replace::{BuildPolicy, PolicyKind, ReplacementPolicy};
use stretch_driver::{
    DriverCore, DriverError, Fault, FaultError, FrameKind, MemError, MemoryKernel, Rights,
    StretchDriver, StretchInfo,
};

use crate::frames::{FrameTable, KernelFrames, Place, Slot};

/// How a paged stretch is paged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagedConfig {
    /// The hierarchy below the frames.
    pub hierarchy: Hierarchy,
    /// The replacement policy (unless the application supplies its own).
    pub policy: PolicyKind,
    /// Frames to page into, taken at bind: guaranteed ones while the guarantee lasts, then
    /// optimistic ones while the kernel grants them, up to this many (at least one, or the
    /// bind fails). [`PagedDriver::frames_held`] says how many it got.
    pub frames: usize,
    /// Pages evicted at once when no frame is free ([`Pager::set_evict_ahead`]).
    pub ahead: usize,
    /// Evictions between two harvests of the accessed bits for the replacement policy (0:
    /// never; [`Pager::set_harvest_every`]).
    pub harvest: usize,
}

impl PagedConfig {
    /// The pages of the window the driver needs ([`PagedDriver::new`]): one for each page
    /// evicted at once, and two more.
    pub fn window_pages(&self) -> usize {
        frames::window_pages(self.ahead)
    }
}

/// The paged stretch driver; see the [crate](self) documentation.
pub struct PagedDriver<D: SyncDisk + 'static> {
    config: PagedConfig,
    device: Option<D>,
    policy: Option<Box<dyn ReplacementPolicy>>,
    app: Option<Box<dyn AppHandler>>,
    /// The backing store's mode, and its remote store until bind.
    backing: Backing,
    remote: Option<Box<dyn RemoteStore>>,
    table: FrameTable,
    /// The stretch (its pages are the pager's to track) and the stats.
    core: DriverCore,
    /// The pager, while bound.
    pager: Option<Pager>,
    clock: Option<fn() -> u64>,
    fault_ns: u64,
    hit_costs: HitCosts,
    hit_costs_by_kind: [HitCosts; 3],
    latencies: [[u64; LATENCY_BINS]; 3],
}

/// Bins of [`PagedDriver::fault_latencies`]: quarter decades of ns from 1 µs (bin 0 holds
/// everything under 1.78 µs, the last everything from 5.6 s), as the book's histograms bin.
pub const LATENCY_BINS: usize = 28;

/// Where the page of a timed fault came from ([`PagedDriver::fault_latencies`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultSource {
    /// No contents yet (or lost): a zeroed frame.
    Zero = 0,
    /// A cache manager held it.
    Cache = 1,
    /// Read from the backing store: every cache missed.
    Store = 2,
}

impl FaultSource {
    /// Every source, in index order.
    pub const ALL: [FaultSource; 3] = [FaultSource::Zero, FaultSource::Cache, FaultSource::Store];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultSource::Zero => "zero",
            FaultSource::Cache => "cache",
            FaultSource::Store => "store",
        }
    }
}

/// The lower edge of latency bin `k` in ns: 10^(k/4) µs, rounded.
pub fn latency_edge(k: usize) -> u64 {
    const STEPS: [u64; 4] = [1000, 1778, 3162, 5623];
    let k = k.min(LATENCY_BINS);
    10u64.pow((k / 4) as u32) * STEPS[k % 4]
}

/// The latency bin of `ns`: the last whose lower edge is at most `ns`.
pub fn latency_bin(ns: u64) -> usize {
    (1..LATENCY_BINS).take_while(|&k| latency_edge(k) <= ns).last().unwrap_or(0)
}

/// The distribution of the driver's time in faults its top cache answered without the disk,
/// by its clock ([`PagedDriver::with_clock`]): a histogram of [`HitCosts::BUCKET_NS`]-wide
/// buckets up to [`HitCosts::BUCKETS`] of them, and a count beyond.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HitCosts {
    counts: alloc::vec::Vec<u32>,
    over: u32,
    max_ns: u64,
}

impl HitCosts {
    /// The width of a bucket.
    pub const BUCKET_NS: u64 = 500;
    /// The buckets (up to 1 ms).
    pub const BUCKETS: usize = 2000;

    fn record(&mut self, ns: u64) {
        if self.counts.is_empty() {
            self.counts = alloc::vec![0; Self::BUCKETS];
        }
        match self.counts.get_mut((ns / Self::BUCKET_NS) as usize) {
            Some(c) => *c += 1,
            None => self.over += 1,
        }
        self.max_ns = self.max_ns.max(ns);
    }

    /// Faults recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|&c| u64::from(c)).sum::<u64>() + u64::from(self.over)
    }

    /// The longest recorded.
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// The upper edge of the bucket holding the `permille`-th per mille of the faults (`None`
    /// if none were recorded); the longest recorded if it lies beyond the buckets.
    pub fn percentile_ns(&self, permille: u64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = (n * permille).div_ceil(1000).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                return Some((i as u64 + 1) * Self::BUCKET_NS);
            }
        }
        Some(self.max_ns)
    }
}

/// Where the driver's time went, by its clock ([`PagedDriver::with_clock`]); all zero without
/// one. Under `-icount` nanoseconds are instructions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCosts {
    /// Faults the driver answered.
    pub faults: u64,
    /// Time inside `fault`, everything below included.
    pub fault_ns: u64,
    /// Kernel calls made (map, unmap, remap, protect, frame_free).
    pub kernel_calls: u64,
    /// Time in those calls.
    pub kernel_ns: u64,
    /// Time compressing and decompressing (the compressed cache's codec).
    pub codec_ns: u64,
}

impl<D: SyncDisk + 'static> PagedDriver<D> {
    /// A driver that will page with `config` to `device`, filling frames through the
    /// [`PagedConfig::window_pages`] managed pages at `window` (a managed stretch of the
    /// domain's own that nothing else touches: `paging::create_window` in libtessera makes
    /// one).
    pub fn new(config: PagedConfig, device: D, window: usize) -> Self {
        PagedDriver {
            config,
            device: Some(device),
            policy: None,
            app: None,
            backing: Backing::Local,
            remote: None,
            table: FrameTable::new(window, config.window_pages()),
            core: DriverCore::new(),
            pager: None,
            clock: None,
            fault_ns: 0,
            hit_costs: HitCosts::default(),
            hit_costs_by_kind: Default::default(),
            latencies: [[0; LATENCY_BINS]; 3],
        }
    }

    /// The driver's time in each fault by its clock, by where the fault's page came from
    /// (indexed by [`FaultSource`]), in [`LATENCY_BINS`] bins ([`latency_bin`]): a fault that
    /// waited for the disk (its read, or the write-back of the page it evicted) counts that
    /// wait. Faults on resident pages (a write to a read-only page) are not counted.
    pub fn fault_latencies(&self) -> &[[u64; LATENCY_BINS]; 3] {
        &self.latencies
    }

    /// The driver's time in compressed-cache hits (faults the top cache answered without the
    /// disk), by its clock.
    pub fn hit_costs(&self) -> &HitCosts {
        &self.hit_costs
    }

    /// Those of [`PagedDriver::hit_costs`] that found a free frame (evicted nothing: the
    /// hit's own cost) on pages stored as `kind`.
    pub fn hit_costs_of(&self, kind: HitKind) -> &HitCosts {
        &self.hit_costs_by_kind[kind as usize]
    }

    /// Times faults, kernel calls and the compressed cache's codec with `clock`
    /// ([`PagedDriver::costs`]). Takes effect at bind.
    pub fn with_clock(mut self, clock: fn() -> u64) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Where the driver's time went.
    pub fn costs(&self) -> FaultCosts {
        FaultCosts {
            faults: self.core.stats.faults,
            fault_ns: self.fault_ns,
            kernel_calls: self.table.kernel_calls,
            kernel_ns: self.table.kernel_ns,
            codec_ns: self.pager_stats().map_or(0, |s| s.cache.codec_ns),
        }
    }

    /// Pages to remote memory in `backing`'s mode through `remote` (the remote paging
    /// client), with the device as fallback, and as mirror with
    /// [`Mirror::Disk`](pager::backing::Mirror::Disk): the hierarchy's caches sit on a
    /// [`pager::backing::BackingStore`]. With [`Backing::Local`], or no remote store (no
    /// server could be had), pages go to the device. A prefetching hierarchy over remote
    /// memory fails to bind. Takes effect at bind.
    pub fn with_store(mut self, backing: Backing, remote: Option<Box<dyn RemoteStore>>) -> Self {
        self.backing = backing;
        self.remote = remote;
        self
    }

    /// The backing store's mode ([`PagedDriver::with_store`]).
    pub fn backing(&self) -> Backing {
        self.backing
    }

    /// Uses the application's own replacement policy instead of [`PagedConfig::policy`].
    pub fn with_policy(mut self, policy: Box<dyn ReplacementPolicy>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Tells the application's handler of changes to its guarantees (revocations).
    pub fn with_app(mut self, app: Box<dyn AppHandler>) -> Self {
        self.app = Some(app);
        self
    }

    /// The configuration.
    pub fn config(&self) -> PagedConfig {
        self.config
    }

    /// The pager's counts (faults, evictions, cache and disk), if bound.
    pub fn pager_stats(&self) -> Option<PagerStats> {
        self.pager.as_ref().map(|p| p.stats())
    }

    /// The addresses of the pages lost (the disk kept failing the read of their only copy),
    /// in the order they were lost; each now reads as zeros until written again. The
    /// application's handler heard of each when it was lost ([`AppHandler::page_lost`]).
    pub fn lost_pages(&self) -> impl Iterator<Item = usize> + '_ {
        let stretch = self.core.stretch();
        let lost = self.pager.iter().flat_map(|p| p.lost_pages().iter());
        lost.filter_map(move |&page| stretch.map(|s| s.page_addr(page)))
    }

    /// Whether page `page` of the stretch is resident (mapped on a frame).
    pub fn resident(&self, page: usize) -> bool {
        self.pager.as_ref().is_some_and(|p| p.resident(page).is_some())
    }

    /// Copies through the window: `(fills, saves, moves)`.
    pub fn window_copies(&self) -> (u64, u64, u64) {
        (self.table.fills, self.table.saves, self.table.moves)
    }

    /// Frames held now, `(guaranteed, optimistic)`.
    pub fn frames_held(&self) -> (usize, usize) {
        let held = |kind| {
            self.table.slots.iter().filter(|s| s.kind == kind && s.place != Place::Released).count()
        };
        (held(FrameKind::Guaranteed), held(FrameKind::Optimistic))
    }

    /// Resizes the cache (the compressed pool, or the eviction area) to `bytes`.
    pub fn resize_cache(&mut self, bytes: usize) -> Result<(), PagerError> {
        let pager = self.pager.as_mut().ok_or(PagerError::BadConfig("the driver is not bound"))?;
        pager.resize_cache(bytes)
    }

    /// Writes every cached page down to the backing store (resident pages stay).
    pub fn flush_cache(&mut self) -> Result<(), PagerError> {
        let pager = self.pager.as_mut().ok_or(PagerError::BadConfig("the driver is not bound"))?;
        pager.flush_cache()
    }

    /// Answers one fault (see [`StretchDriver::fault`]), saying what the pager did.
    fn resolve(
        &mut self,
        k: &mut dyn MemoryKernel,
        fault: Fault,
    ) -> Result<FaultOutcome, FaultError> {
        let (stretch, page) = self.core.page_of(&fault)?;
        let pager = self.pager.as_mut().ok_or(FaultError::NotBound)?;
        let write = fault.access == stretch_driver::Access::Write;
        if write && stretch.rights.0 & Rights::WRITE.0 == 0 {
            return Err(FaultError::Denied);
        }
        self.table.last_error = None;
        let mut frames = Self::frames(&mut self.table, k, stretch, self.clock);
        let step = pager.fault(page, write);
        match frames.run(pager, step) {
            Ok(Outcome::Fault(outcome)) => {
                self.core.stats.maps += 1;
                Ok(outcome)
            }
            Ok(Outcome::Revoked(_)) => Err(FaultError::Backing("the pager answered a fault amiss")),
            Err(e) => {
                self.core.stats.failures += 1;
                Err(fault_error(e, self.table.last_error, &stretch))
            }
        }
    }

    /// Frees every frame in the table (after a failed bind, or at unbind).
    fn free_all(&mut self, k: &mut dyn MemoryKernel) {
        let window = self.table.window;
        self.table.at_window.fill(None);
        for slot in core::mem::take(&mut self.table.slots) {
            let freed = match slot.place {
                Place::Released => false,
                Place::Unmapped => k.frame_free(slot.frame).is_ok(),
                Place::Window(w) => {
                    let va = window + w * stretch_driver::PAGE_SIZE;
                    k.unmap(va).is_ok() && k.frame_free(slot.frame).is_ok()
                }
                Place::Page(_) => false, // unbind unmapped the stretch's pages first
            };
            self.core.stats.frames_released += u64::from(freed);
        }
    }

    /// The frames of a call.
    fn frames<'a>(
        table: &'a mut FrameTable,
        k: &'a mut dyn MemoryKernel,
        stretch: StretchInfo,
        clock: Option<fn() -> u64>,
    ) -> KernelFrames<'a> {
        KernelFrames { k, table, stretch, clock }
    }
}

/// Guaranteed frames bind leaves for the heap to grow into while paging: the cache's pool and
/// areas, the pager's maps (resident pages, the policy's entries, where each page is stored:
/// about 96 bytes a frame and 64 a page of the stretch, doubled for vectors that grow by
/// doubling and for the heap's power-of-two blocks; over remote memory, the backing store
/// manager's map of where each page is, 64 bytes a page more) and 64 KiB more.
pub(crate) fn heap_reserve_frames(
    h: &Hierarchy,
    backing: Backing,
    frames: usize,
    pages: usize,
) -> usize {
    let bytes = match *h {
        Hierarchy::LocalPaging => 0,
        Hierarchy::CompressedCache { pool_bytes, .. } => pool_bytes,
        Hierarchy::PrefetchingCompressedCache { pool_bytes, evict_pages, fetch_pages, .. } => {
            pool_bytes + (evict_pages + fetch_pages) * pager::PAGE_SIZE
        }
        Hierarchy::PrefetchingCache { evict_pages, fetch_pages } => {
            (evict_pages + fetch_pages) * pager::PAGE_SIZE
        }
    };
    let per_page = if backing.is_remote() { 128 } else { 64 };
    (bytes + (64 << 10) + 2 * (96 * frames + per_page * pages)).div_ceil(pager::PAGE_SIZE)
}

/// The thread's error for a pager error; `kernel` is the kernel's refusal behind
/// [`PagerError::Frames`]; a page a failure names is an address of `stretch`.
fn fault_error(e: PagerError, kernel: Option<MemError>, stretch: &StretchInfo) -> FaultError {
    match e {
        PagerError::WriteFailed { page } => FaultError::WriteBack { addr: stretch.page_addr(page) },
        PagerError::PageLost { .. } => FaultError::Backing("the backing store lost a page"),
        PagerError::Remote { .. } => {
            FaultError::Backing("no remote server took a page and there is no disk")
        }
        PagerError::NoFrames | PagerError::AllFramesLocked => FaultError::OutOfMemory,
        PagerError::Frames => kernel.map_or(FaultError::OutOfMemory, FaultError::Kernel),
        PagerError::SwapFull { .. } => FaultError::Backing("the swap area is full"),
        PagerError::Device(_) => FaultError::Backing("the disk failed a transfer"),
        PagerError::NotStored { .. } | PagerError::Corrupt { .. } => {
            FaultError::Backing("a stored page was lost")
        }
        PagerError::PageOutOfRange { .. } => FaultError::WrongStretch,
        PagerError::BadConfig(why) => FaultError::Backing(why),
    }
}

impl<D: SyncDisk + 'static> PagedDriver<D> {
    /// The work of `bind` once the core holds the stretch: the hierarchy, the frames, the
    /// pager.
    fn start(
        &mut self,
        k: &mut dyn MemoryKernel,
        stretch: StretchInfo,
    ) -> Result<Pager, DriverError> {
        if self.config.frames == 0 {
            return Err(DriverError::OutOfMemory);
        }
        // The hierarchy first: what it allocates up front comes from the heap, before the
        // frames take the guarantee. A device too small or sizes that do not fit fail here.
        let device = self.device.take().ok_or(DriverError::AlreadyBound)?;
        let below = Below::remote(self.backing, self.remote.take());
        let cache = self
            .config
            .hierarchy
            .cache_over(device, self.clock, below)
            .map_err(|_| DriverError::BadStretch)?;
        // Guaranteed frames while the guarantee lasts, less what the heap grows into while
        // paging (the cache's pool and areas, the pager's maps: taken, then given back), then
        // optimistic ones while the kernel grants them, up to the configured number.
        let reserve = heap_reserve_frames(
            &self.config.hierarchy,
            self.backing,
            self.config.frames,
            stretch.pages,
        );
        let take = |kind,
                    until: usize,
                    table: &mut FrameTable,
                    core: &mut DriverCore,
                    k: &mut dyn MemoryKernel| {
            while table.slots.len() < until {
                let Ok(frame) = core.take_frame(k, kind) else { break };
                table.slots.push(Slot {
                    frame,
                    kind,
                    place: Place::Unmapped,
                    fresh: true,
                    writable: false,
                    written: false,
                });
            }
        };
        let (table, core) = (&mut self.table, &mut self.core);
        take(FrameKind::Guaranteed, self.config.frames + reserve, table, core, k);
        let mut given_back = 0;
        while given_back < reserve
            && let Some(slot) = table.slots.pop()
        {
            // Never fails: the frame was just taken and is mapped nowhere.
            core.free(k, slot.frame);
            given_back += 1;
        }
        // The pager (its maps sized for every frame asked for) comes from the guarantee before
        // optimistic frames take the free memory: the kernel grants those only while some
        // memory stays free (`OPTIMISTIC_FLOOR`), enough for the heap's later small growths,
        // but a large one could find none (a guaranteed allocation revokes other domains'
        // optimistic frames, never the caller's own).
        let policy = self.policy.take().unwrap_or_else(|| self.config.policy.build());
        let app = self.app.take().unwrap_or_else(|| Box::new(NoAppHandler));
        let mut pager = Pager::new(self.config.frames, stretch.pages, policy, cache, app);
        take(FrameKind::Optimistic, self.config.frames, &mut self.table, &mut self.core, k);
        if self.table.slots.is_empty() {
            return Err(DriverError::OutOfMemory);
        }
        pager.limit_frames(self.table.slots.len());
        pager.set_evict_ahead(self.config.ahead);
        pager.set_harvest_every(self.config.harvest);
        // The kernel keeps the dirty bits: `remap` returns them as a page leaves the stretch.
        pager.set_tracks_dirty(true);
        Ok(pager)
    }
}

impl<D: SyncDisk + 'static> StretchDriver for PagedDriver<D> {
    fn bind(&mut self, k: &mut dyn MemoryKernel, stretch: StretchInfo) -> Result<(), DriverError> {
        self.core.bind_untracked(stretch)?;
        match self.start(k, stretch) {
            Ok(pager) => {
                self.pager = Some(pager);
                Ok(())
            }
            Err(e) => {
                self.core.unbind(k);
                Err(e)
            }
        }
    }

    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        self.core.stats.faults += 1;
        let Some(clock) = self.clock else { return self.resolve(k, fault).map(|_| ()) };
        let start = clock();
        let result = self.resolve(k, fault);
        let spent = clock() - start;
        self.fault_ns += spent;
        let outcome = result?;
        let source = match outcome.source {
            Source::ZeroFill | Source::Lost => Some(FaultSource::Zero),
            Source::Hit { .. } => Some(FaultSource::Cache),
            Source::Miss => Some(FaultSource::Store),
            Source::Resident => None,
        };
        if let Some(source) = source {
            self.latencies[source as usize][latency_bin(spent)] += 1;
        }
        // A fault the top cache answered with no disk transfer: a compressed-cache hit.
        if let Source::Hit { top: true, found } = outcome.source
            && outcome.disk_writes == 0
        {
            self.hit_costs.record(spent);
            if outcome.evicted == 0 {
                // A hit in a basic cache's area counts with the compressed pages.
                let kind = match found {
                    Found::Pool(kind) => kind,
                    Found::EvictionArea | Found::FetchArea | Found::Disk => HitKind::Compressed,
                };
                self.hit_costs_by_kind[kind as usize].record(spent);
            }
        }
        Ok(())
    }

    fn lock(&mut self, k: &mut dyn MemoryKernel, range: Range<usize>) -> Result<(), DriverError> {
        let (stretch, pages) = self.core.pages_in(range)?;
        let pager = self.pager.as_mut().ok_or(DriverError::NotBound)?;
        for page in pages.clone() {
            let mut frames = Self::frames(&mut self.table, k, stretch, self.clock);
            let step = pager.lock(page);
            if frames.run(pager, step).is_err() {
                // Locks nothing newly: those locked by this call are let go again.
                for p in pages.start..page {
                    pager.unlock(p);
                }
                return Err(DriverError::OutOfMemory);
            }
        }
        Ok(())
    }

    fn unlock(
        &mut self,
        _k: &mut dyn MemoryKernel,
        range: Range<usize>,
    ) -> Result<(), DriverError> {
        let (_, pages) = self.core.pages_in(range)?;
        let pager = self.pager.as_mut().ok_or(DriverError::NotBound)?;
        for page in pages {
            pager.unlock(page);
        }
        Ok(())
    }

    fn revoke(&mut self, k: &mut dyn MemoryKernel, frames_wanted: usize) -> usize {
        let (Some(stretch), Some(pager)) = (self.core.stretch(), self.pager.as_mut()) else {
            return 0;
        };
        let optimistic = self
            .table
            .slots
            .iter()
            .filter(|s| s.kind == FrameKind::Optimistic && s.place != Place::Released);
        // Only optimistic frames count for the kernel: never give back more than are held.
        let wanted = frames_wanted.min(optimistic.count());
        let mut frames = Self::frames(&mut self.table, k, stretch, self.clock);
        let step = pager.revoke(wanted);
        let released = match frames.run(pager, step) {
            Ok(Outcome::Revoked(released)) => released,
            Ok(Outcome::Fault(_)) | Err(_) => 0,
        };
        self.core.stats.frames_released += released as u64;
        released
    }

    fn unbind(&mut self, k: &mut dyn MemoryKernel) {
        let Some(stretch) = self.core.unbind(k) else { return };
        self.pager = None;
        for slot in &mut self.table.slots {
            if let Place::Page(page) = slot.place
                && k.unmap(stretch.page_addr(page)).is_ok()
            {
                slot.place = Place::Unmapped;
            }
        }
        self.free_all(k);
    }

    fn core(&self) -> &DriverCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut DriverCore {
        &mut self.core
    }
}
