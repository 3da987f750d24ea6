//! Host tests of the whole hierarchy: seeded random runs against a shadow copy, swap
//! exhaustion, custom policies, revocation, and the friends disk manager's group reads.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::app::{AppHandler, GuaranteeChange, NoAppHandler};
use crate::block::{MemBlockDevice, SyncDisk};
use crate::cache::{BasicCache, CacheManager, Codec, CompressedCache, CompressedConfig};
use crate::disk::{BasicDisk, DiskManager, PrefetchDisk, WriteBehindDisk};
use crate::error::PagerError;
use crate::frames::{Frames, MemFrames};
use crate::hierarchy::{BuildHierarchy, Hierarchy};
use crate::pager::{Pager, PagerStats};
use crate::plan::{FaultOutcome, Found, HitKind, Outcome, Source};
use crate::replace::{BuildPolicy, Clock, PolicyKind, ReplacementPolicy};
use crate::{PAGE_SIZE, Page};

mod remote;

use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{Rng as _, SeedableRng};

/// SplitMix64 (`rand_xoshiro`'s), seeded: the state starts at the seed.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(SplitMix64::seed_from_u64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// FNV-1a over a page.
fn checksum(page: &[u8]) -> u64 {
    page.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// New page contents: zero, random (incompressible), or compressible (small integers).
fn contents(rng: &mut Rng, out: &mut Page) {
    match rng.below(3) {
        0 => out.fill(0),
        1 => out.iter_mut().for_each(|b| *b = rng.next() as u8),
        _ => {
            let base = rng.next() as u8;
            for (i, chunk) in out.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&((i as u32 / 8) ^ base as u32).to_le_bytes());
            }
        }
    }
}

const FRAMES: usize = 16;
const PAGES: usize = 4 * FRAMES + 8;

/// Every hierarchy, those with a compressed cache once with each codec.
fn hierarchies() -> [Hierarchy; 6] {
    let compressed = |codec| Hierarchy::CompressedCache { pool_bytes: 8 * PAGE_SIZE, codec };
    let prefetching_compressed = |codec| Hierarchy::PrefetchingCompressedCache {
        pool_bytes: 6 * PAGE_SIZE,
        codec,
        evict_pages: 4,
        fetch_pages: 4,
    };
    [
        Hierarchy::LocalPaging,
        compressed(Codec::Lz4),
        prefetching_compressed(Codec::Lz4),
        Hierarchy::PrefetchingCache { evict_pages: 4, fetch_pages: 4 },
        compressed(Codec::Wkdm),
        prefetching_compressed(Codec::Wkdm),
    ]
}

/// A pager with its frames, as the paged stretch driver holds them, so tests call it as one.
/// Every fault's outcome is checked against the pager's counts and kept.
struct Paged<F> {
    pager: Pager,
    frames: F,
    outcomes: Vec<FaultOutcome>,
}

/// Checks that a fault's outcome says what the pager's counts say it did, `before` and
/// `after` the fault.
fn check_outcome(o: &FaultOutcome, before: &PagerStats, after: &PagerStats) {
    let d = |f: fn(&PagerStats) -> u64| f(after) - f(before);
    assert_eq!(u64::from(o.evicted), d(|s| s.evictions), "{o:?}");
    assert_eq!(u64::from(o.evicted_dirty), d(|s| s.dirty_evictions), "{o:?}");
    // Transfers to the backing store: the disk's, and pages to and from a remote store (not
    // counting the pages a revocation brings back from it, which any call may move: one
    // device write each here, with no write failing).
    let populated = d(|s| s.store.populated);
    let writes = d(|s| s.disk.device_writes) + d(|s| s.store.remote_writes) - populated;
    assert_eq!(o.disk_writes, writes, "{o:?}");
    let remote_reads = d(|s| s.store.remote_reads) - populated;
    // Nor the disk reads of pages refilled to a remote store (one each).
    let disk_reads = d(|s| s.disk.device_reads) - d(|s| s.store.refilled);
    let (top_hits, reads) = (d(|s| s.cache.hits), disk_reads + remote_reads);
    let fetched = d(|s| s.fetches);
    match o.source {
        Source::Resident => assert_eq!((fetched, d(|s| s.zero_fills)), (0, 0), "{o:?}"),
        Source::ZeroFill => assert_eq!((fetched, d(|s| s.zero_fills)), (0, 1), "{o:?}"),
        Source::Lost => assert_eq!((fetched, d(|s| s.lost_pages)), (0, 1), "{o:?}"),
        Source::Hit { top, found } => {
            assert_eq!((fetched, top_hits, reads), (1, u64::from(top), 0), "{o:?}");
            let kind = |k| u64::from(found == Found::Pool(k));
            assert_eq!(d(|s| s.cache.zero_hits), kind(HitKind::Zero), "{o:?}");
            assert_eq!(d(|s| s.cache.raw_hits), kind(HitKind::Raw), "{o:?}");
        }
        Source::Miss => assert_eq!((fetched, top_hits), (1, 0), "{o:?}"),
    }
    // What the paged driver counted as a hit when it read the counts around each fault.
    let counted_hit = top_hits > 0 && reads == 0 && o.disk_writes == 0;
    let hit = matches!(o.source, Source::Hit { top: true, .. }) && o.disk_writes == 0;
    assert_eq!(counted_hit, hit, "{o:?}");
}

impl<F: Frames> Paged<F> {
    fn new(mut pager: Pager, frames: F) -> Paged<F> {
        pager.set_tracks_dirty(frames.tracks_dirty());
        Paged { pager, frames, outcomes: Vec::new() }
    }

    /// Faults `page` in and says what the fault did.
    fn fault_outcome(&mut self, page: usize, write: bool) -> Result<FaultOutcome, PagerError> {
        let before = self.pager.stats();
        let step = self.pager.fault(page, write);
        let outcome = match self.frames.run(&mut self.pager, step)? {
            Outcome::Fault(outcome) => outcome,
            Outcome::Revoked(_) => unreachable!("a fault answered as a revocation"),
        };
        check_outcome(&outcome, &before, &self.pager.stats());
        self.outcomes.push(outcome);
        Ok(outcome)
    }

    fn fault(&mut self, page: usize, write: bool) -> Result<usize, PagerError> {
        self.fault_outcome(page, write).map(|o| o.frame)
    }

    fn lock(&mut self, page: usize) -> Result<usize, PagerError> {
        let step = self.pager.lock(page);
        match self.frames.run(&mut self.pager, step)? {
            Outcome::Fault(outcome) => Ok(outcome.frame),
            Outcome::Revoked(_) => unreachable!("a lock answered as a revocation"),
        }
    }

    fn revoke(&mut self, wanted: usize) -> Result<usize, PagerError> {
        let step = self.pager.revoke(wanted);
        match self.frames.run(&mut self.pager, step)? {
            Outcome::Revoked(released) => Ok(released),
            Outcome::Fault(_) => unreachable!("a revocation answered as a fault"),
        }
    }

    fn frames(&self) -> &F {
        &self.frames
    }

    fn frames_mut(&mut self) -> &mut F {
        &mut self.frames
    }
}

impl<F> core::ops::Deref for Paged<F> {
    type Target = Pager;
    fn deref(&self) -> &Pager {
        &self.pager
    }
}

impl<F> core::ops::DerefMut for Paged<F> {
    fn deref_mut(&mut self) -> &mut Pager {
        &mut self.pager
    }
}

fn pager(h: Hierarchy, policy: Box<dyn ReplacementPolicy>, swap_pages: usize) -> Paged<MemFrames> {
    let pager = h
        .build(
            FRAMES,
            MemBlockDevice::with_pages(swap_pages),
            PAGES,
            policy,
            Box::new(NoAppHandler),
        )
        .expect("pager");
    Paged::new(pager, MemFrames::new(FRAMES))
}

/// Checks the exclusive-caching invariant: no resident page is held by a cache.
fn check_exclusive(p: &Pager) {
    for page in p.resident_pages() {
        assert!(!p.cache().holds(page), "page {page} is both resident and cached");
    }
}

/// A seeded run of reads and writes; returns the shadow copy. Every access asks the pager.
fn random_run(p: &mut Paged<MemFrames>, seed: u64, steps: usize) -> Vec<Box<Page>> {
    random_steps(p, seed, steps, false)
}

/// A seeded run of reads and writes through a page table that keeps accessed and dirty bits:
/// only accesses the hardware would refuse (an unmapped page, a write to a read-only one)
/// reach the pager. Returns the shadow copy.
fn random_run_with_bits(p: &mut Paged<MemFrames>, seed: u64, steps: usize) -> Vec<Box<Page>> {
    random_steps(p, seed, steps, true)
}

/// The runs above: `through_page_table` says whether accesses to mapped pages skip the pager.
fn random_steps(
    p: &mut Paged<MemFrames>,
    seed: u64,
    steps: usize,
    through_page_table: bool,
) -> Vec<Box<Page>> {
    let mut rng = Rng::new(seed);
    let mut shadow: Vec<Box<Page>> = (0..PAGES).map(|_| Box::new([0u8; PAGE_SIZE])).collect();
    for _ in 0..steps {
        // Mostly a sliding hot region, sometimes anywhere: faults hit caches and the disk.
        let page =
            if rng.below(4) == 0 { rng.below(PAGES) } else { (rng.below(FRAMES * 2)) % PAGES };
        let write = rng.below(3) == 0;
        let mapped = if through_page_table { p.frames_mut().access(page, write) } else { None };
        let frame = match mapped {
            Some(frame) => frame,
            None => {
                let frame = p.fault(page, write).expect("fault");
                if through_page_table {
                    p.frames_mut().access(page, write).expect("mapped for the access");
                }
                frame
            }
        };
        if write {
            if rng.below(2) == 0 {
                contents(&mut rng, &mut shadow[page]);
            } else {
                let at = rng.below(PAGE_SIZE);
                shadow[page][at] = rng.next() as u8;
            }
            p.frames_mut().frame_mut(frame).copy_from_slice(&shadow[page][..]);
        } else {
            assert_eq!(
                checksum(p.frames().frame(frame)),
                checksum(&shadow[page][..]),
                "page {page}"
            );
        }
        check_exclusive(p);
    }
    shadow
}

fn verify_all(p: &mut Paged<MemFrames>, shadow: &[Box<Page>]) {
    for (page, want) in shadow.iter().enumerate() {
        let frame = p.fault(page, false).expect("fault");
        assert_eq!(checksum(p.frames().frame(frame)), checksum(&want[..]), "page {page}");
        check_exclusive(p);
    }
}

#[test]
fn every_hierarchy_and_policy_keeps_every_byte() {
    for h in hierarchies() {
        for kind in [PolicyKind::Clock, PolicyKind::Lru] {
            let mut p = pager(h, kind.build(), 2 * PAGES);
            let shadow = random_run(&mut p, 7, 4000);
            verify_all(&mut p, &shadow);
            p.flush_cache().expect("flush");
            verify_all(&mut p, &shadow);
            let s = p.stats();
            assert!(s.evictions > 0 && s.disk.device_writes > 0, "{}: {s:?}", h.name());
            assert!(s.disk.device_reads > 0, "{}: {s:?}", h.name());
        }
    }
}

#[test]
fn a_fault_says_where_its_page_came_from_and_what_it_evicted() {
    for h in hierarchies() {
        let mut p = pager(h, PolicyKind::Clock.build(), 2 * PAGES);
        p.set_evict_ahead(3);
        random_run(&mut p, 5, 3000);
        let seen = |f: &dyn Fn(&FaultOutcome) -> bool| p.outcomes.iter().any(f);
        assert!(seen(&|o| o.source == Source::ZeroFill && o.evicted == 0), "{}", h.name());
        assert!(seen(&|o| o.source == Source::Resident), "{}", h.name());
        assert!(seen(&|o| o.source == Source::Miss && o.disk_writes == 0), "{}", h.name());
        assert!(seen(&|o| o.evicted == 3 && o.evicted_dirty > 0), "{}", h.name());
        assert!(seen(&|o| o.disk_writes > 0), "{}", h.name());
        if h != Hierarchy::LocalPaging {
            assert!(seen(&|o| matches!(o.source, Source::Hit { top: true, .. })), "{}", h.name());
        }
        for kind in HitKind::ALL.into_iter().filter(|_| h.codec().is_some()) {
            let pool = Source::Hit { top: true, found: Found::Pool(kind) };
            assert!(seen(&|o| o.source == pool), "{}: {kind:?}", h.name());
        }
        if let Hierarchy::PrefetchingCompressedCache { .. } = h {
            assert!(seen(&|o| matches!(o.source, Source::Hit { top: false, .. })), "{}", h.name());
        }
    }
}

#[test]
fn compressed_caches_hit_and_store_zero_and_raw_pages() {
    for h in hierarchies().into_iter().filter(|h| h.codec().is_some()) {
        let mut p = pager(h, PolicyKind::Clock.build(), 2 * PAGES);
        random_run(&mut p, 11, 3000);
        let s = p.stats().cache;
        assert!(
            s.hits > 0 && s.zero_pages > 0 && s.raw_pages > 0 && s.compressed_pages > 0,
            "{s:?}"
        );
        assert!(s.compression_permille() < 1000, "{s:?}");
        assert!(s.used_bytes <= s.capacity_bytes);
    }
}

/// Two linear sweeps writing `sweep` pages of incompressible contents (so every page is
/// dirty, and the pool expels in the order it took them, as it does the filter's) through a compressed pool of `pool_pages` pages over [`FRAMES`] frames: the pager's counts.
fn two_sweeps(sweep: usize, pool_pages: usize) -> crate::pager::PagerStats {
    let h = Hierarchy::CompressedCache { pool_bytes: pool_pages * PAGE_SIZE, codec: Codec::Lz4 };
    let mut p = pager(h, PolicyKind::Clock.build(), 2 * PAGES);
    let mut rng = Rng::new(5);
    for page in 0..sweep {
        let frame = p.fault(page, true).unwrap();
        p.frames_mut().frame_mut(frame).iter_mut().for_each(|b| *b = rng.next() as u8);
    }
    for page in 0..sweep {
        p.fault(page, true).unwrap();
    }
    p.stats()
}

#[test]
fn a_sweep_comes_back_after_as_many_evictions_as_it_has_pages_beyond_the_frames() {
    // Every page of the second sweep was evicted `sweep - FRAMES` evictions before it is
    // fetched back: a pool of fewer (raw) pages never serves one, a pool of more serves all.
    let sweep = 40;
    let distance = (sweep - FRAMES) as u64;
    let small = two_sweeps(sweep, 8);
    assert_eq!(small.refetches, sweep as u64, "{small:?}");
    assert_eq!((small.reuse_min, small.reuse_max), (distance, distance), "{small:?}");
    assert_eq!(small.reuse_sum, distance * sweep as u64);
    assert_eq!((small.cache.hits, small.cache.peak_pages), (0, 8), "{small:?}");
    let large = two_sweeps(sweep, sweep - FRAMES + 1);
    assert_eq!((large.reuse_min, large.reuse_max), (distance, distance), "{large:?}");
    assert_eq!(large.cache.hits, sweep as u64, "{large:?}");
    assert_eq!(large.cache.peak_pages, sweep - FRAMES + 1, "{large:?}");
}

#[test]
fn prefetching_hierarchies_prefetch() {
    for h in hierarchies().into_iter().filter(|h| h.name().starts_with("prefetching")) {
        let mut p = pager(h, PolicyKind::Clock.build(), 2 * PAGES);
        random_run(&mut p, 5, 3000);
        let s = p.stats();
        assert!(s.disk.prefetched > 0, "{}: {s:?}", h.name());
    }
}

#[test]
fn write_behind_disk_under_a_pager_keeps_every_byte() {
    let disk = WriteBehindDisk::new(MemBlockDevice::with_pages(2 * PAGES), 3).expect("disk");
    let cache = BasicCache::pass_through(Box::new(disk));
    let pager =
        Pager::new(FRAMES, PAGES, Box::new(Clock::new()), Box::new(cache), Box::new(NoAppHandler));
    let mut p = Paged::new(pager, MemFrames::new(FRAMES));
    let shadow = random_run(&mut p, 3, 3000);
    verify_all(&mut p, &shadow);
    assert!(p.stats().disk.queue_hits > 0);
}

#[test]
fn a_full_swap_area_is_an_error_and_never_corruption() {
    for h in hierarchies() {
        // Room for 8 pages on disk: writing many distinct dirty pages must run out.
        let mut p = pager(h, PolicyKind::Clock.build(), 8);
        let mut shadow: Vec<Box<Page>> = (0..PAGES).map(|_| Box::new([0u8; PAGE_SIZE])).collect();
        let mut rng = Rng::new(1);
        let mut failed = None;
        for (page, want) in shadow.iter_mut().enumerate() {
            match p.fault(page, true) {
                Ok(frame) => {
                    // Random contents: incompressible, so caches fill and spill to disk.
                    want.iter_mut().for_each(|b| *b = rng.next() as u8);
                    p.frames_mut().frame_mut(frame).copy_from_slice(&want[..]);
                }
                Err(e) => {
                    failed = Some((page, e));
                    break;
                }
            }
        }
        let (failed_page, err) = failed.expect("the swap area must fill");
        assert!(matches!(err, PagerError::SwapFull { .. }), "{}: {err}", h.name());
        assert!(alloc::format!("{err}").contains("swap area full"));
        // Every page written before the failure is still intact: resident ones in place, the
        // rest by giving frames back (no new dirty pages need storing to read them).
        for page in p.resident_pages().collect::<Vec<_>>() {
            let frame = p.resident(page).unwrap().frame;
            assert_eq!(checksum(p.frames().frame(frame)), checksum(&shadow[page][..]));
        }
        assert!(p.resident(failed_page).is_none());
        for (page, want) in shadow.iter().enumerate().take(failed_page) {
            if p.resident(page).is_none() {
                let mut buf = Box::new([0u8; PAGE_SIZE]);
                // Read below the pager: whatever stored a page must return it.
                let found = p.cache_fetch_for_test(page, &mut buf);
                assert_eq!(
                    checksum(&buf[..]),
                    checksum(&want[..]),
                    "{}: page {page}: {found:?}",
                    h.name()
                );
            }
        }
    }
}

impl Pager {
    /// Reads a stored page straight from the cache manager (the test puts it back).
    fn cache_fetch_for_test(&mut self, page: usize, buf: &mut Page) -> Result<(), PagerError> {
        let found = self.cache_mut_for_test().fetch(page, buf, &|_| true)?;
        self.cache_mut_for_test().put(page, buf, found.dirty)
    }
}

/// A policy that always evicts the highest resident, unlocked page, and counts its choices.
#[derive(Default)]
struct HighestFirst {
    resident: alloc::collections::BTreeSet<usize>,
    locked: alloc::collections::BTreeSet<usize>,
    chosen: alloc::rc::Rc<core::cell::RefCell<Vec<usize>>>,
}

impl ReplacementPolicy for HighestFirst {
    fn mapped(&mut self, page: usize) {
        self.resident.insert(page);
    }
    fn accessed(&mut self, _page: usize) {}
    fn unmapped(&mut self, page: usize) {
        self.resident.remove(&page);
    }
    fn locked(&mut self, page: usize) {
        self.locked.insert(page);
    }
    fn unlocked(&mut self, page: usize) {
        self.locked.remove(&page);
    }
    fn victim(&mut self) -> Option<usize> {
        let v = self.resident.iter().rev().find(|p| !self.locked.contains(p)).copied();
        if let Some(v) = v {
            self.chosen.borrow_mut().push(v);
        }
        v
    }
}

#[test]
fn a_custom_replacement_policy_is_the_one_used() {
    let policy = HighestFirst::default();
    let chosen = policy.chosen.clone();
    let mut p = pager(Hierarchy::LocalPaging, Box::new(policy), 2 * PAGES);
    for page in 0..FRAMES {
        p.fault(page, true).unwrap();
    }
    // Full: the next fault evicts the highest page, FRAMES - 1, which a clock would not pick.
    p.fault(40, false).unwrap();
    assert_eq!(*chosen.borrow(), [FRAMES - 1]);
    assert!(p.resident(FRAMES - 1).is_none() && p.resident(0).is_some());
    p.fault(41, false).unwrap();
    assert_eq!(*chosen.borrow(), [FRAMES - 1, 40]);
}

#[test]
fn locked_pages_are_never_evicted() {
    for codec in [Codec::Lz4, Codec::Wkdm] {
        locked_pages_stay(Hierarchy::CompressedCache { pool_bytes: 4 * PAGE_SIZE, codec });
    }
}

fn locked_pages_stay(h: Hierarchy) {
    let mut p = pager(h, PolicyKind::Clock.build(), 2 * PAGES);
    p.lock(3).unwrap();
    for page in 10..10 + 3 * FRAMES {
        p.fault(page, true).unwrap();
        assert!(p.resident(3).is_some_and(|r| r.locked));
    }
    p.unlock(3);
    for page in 0..FRAMES {
        p.lock(page).unwrap();
    }
    assert_eq!(p.fault(60, false), Err(PagerError::AllFramesLocked));
    assert_eq!(p.revoke(2), Ok(0));
}

struct ShrinkOnRevoke(alloc::rc::Rc<core::cell::Cell<usize>>);

impl AppHandler for ShrinkOnRevoke {
    fn guarantees_changed(&mut self, change: GuaranteeChange) -> Option<usize> {
        let GuaranteeChange::FramesRevoked { frames_now, .. } = change;
        self.0.set(frames_now);
        Some(2 * PAGE_SIZE)
    }
}

#[test]
fn revoke_writes_back_dirty_pages_and_loses_nothing() {
    for h in hierarchies() {
        let mut p = pager(h, PolicyKind::Clock.build(), 2 * PAGES);
        let shadow = random_run(&mut p, 9, 2000);
        let dirty_before = p.stats().dirty_evictions;
        let released = p.revoke(FRAMES / 2).unwrap();
        assert_eq!(released, FRAMES / 2);
        assert_eq!(p.frames().released(), FRAMES / 2);
        assert_eq!(p.stats().frames, FRAMES / 2);
        assert!(p.resident_pages().count() <= FRAMES / 2);
        assert!(p.stats().dirty_evictions >= dirty_before);
        verify_all(&mut p, &shadow);
        assert!(p.resident_pages().count() <= FRAMES / 2);
    }
}

#[test]
fn the_app_handler_hears_of_revocation_and_resizes_its_cache() {
    for codec in [Codec::Lz4, Codec::Wkdm] {
        app_handler_hears_of_revocation(Hierarchy::CompressedCache {
            pool_bytes: 8 * PAGE_SIZE,
            codec,
        });
    }
}

fn app_handler_hears_of_revocation(h: Hierarchy) {
    let seen = alloc::rc::Rc::new(core::cell::Cell::new(0));
    let pager = h
        .build(
            FRAMES,
            MemBlockDevice::with_pages(2 * PAGES),
            PAGES,
            PolicyKind::Clock.build(),
            Box::new(ShrinkOnRevoke(seen.clone())),
        )
        .unwrap();
    let mut p = Paged::new(pager, MemFrames::new(FRAMES));
    let shadow = random_run(&mut p, 4, 1000);
    assert_eq!(p.revoke(4), Ok(4));
    assert_eq!(seen.get(), FRAMES - 4);
    assert_eq!(p.stats().cache.capacity_bytes, 2 * PAGE_SIZE);
    assert!(p.stats().cache.used_bytes <= 2 * PAGE_SIZE);
    p.resize_cache(16 * PAGE_SIZE).unwrap();
    verify_all(&mut p, &shadow);
}

fn page_of(byte: u8) -> Box<Page> {
    Box::new([byte; PAGE_SIZE])
}

#[test]
fn prefetching_disk_reads_groups_in_one_transfer() {
    let mut d = PrefetchDisk::new(MemBlockDevice::with_pages(32)).unwrap();
    let pages: Vec<Box<Page>> = (0..4).map(|i| page_of(i as u8 + 1)).collect();
    let group: Vec<(usize, &Page)> =
        pages.iter().enumerate().map(|(i, d)| (10 + i, &**d)).collect();
    d.write_group(&group).unwrap();
    assert_eq!(d.store().device().counts().writes, 1);
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    let mut pre = Vec::new();
    d.read(11, &mut buf, 8, &mut pre).unwrap();
    assert_eq!(buf[0], 2);
    assert_eq!(d.store().device().counts().reads, 1);
    let mut got: Vec<(usize, u8)> = pre.iter().map(|(p, d)| (*p, d[0])).collect();
    got.sort_unstable();
    assert_eq!(got, [(10, 1), (12, 3), (13, 4)]);
    // A read area smaller than the group takes the pages nearest the faulting one.
    pre.clear();
    d.read(12, &mut buf, 2, &mut pre).unwrap();
    assert_eq!(buf[0], 3);
    assert_eq!(pre.len(), 1);
    assert_eq!(d.store().device().counts().reads, 2);
    // Page 11 leaves for a new group: the middle of 10..=13 breaks away.
    let new = page_of(9);
    d.write_group(&[(11, &*new)]).unwrap();
    assert_eq!(d.group_of(10), [10]);
    assert_eq!(d.group_of(12), [12, 13]);
    assert_eq!(d.group_of(11), [11]);
    pre.clear();
    d.read(12, &mut buf, 8, &mut pre).unwrap();
    assert_eq!(pre.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [13]);
    d.read(11, &mut buf, 8, &mut pre).unwrap();
    assert_eq!(buf[0], 9);
}

#[test]
fn full_disks_refuse_new_pages_and_keep_old_ones() {
    let mut managers: Vec<Box<dyn DiskManager>> = vec![
        Box::new(BasicDisk::new(MemBlockDevice::with_pages(4)).unwrap()),
        Box::new(WriteBehindDisk::new(MemBlockDevice::with_pages(4), 2).unwrap()),
        Box::new(PrefetchDisk::new(MemBlockDevice::with_pages(4)).unwrap()),
    ];
    for d in &mut managers {
        let pages: Vec<Box<Page>> = (0..4).map(|i| page_of(i as u8 + 1)).collect();
        let group: Vec<(usize, &Page)> = pages.iter().enumerate().map(|(i, d)| (i, &**d)).collect();
        d.write_group(&group).unwrap();
        let extra = page_of(99);
        assert_eq!(
            d.write_group(&[(4, &extra), (1, &extra)]),
            Err(PagerError::SwapFull { needed: 1, free: 0 })
        );
        // Rewriting stored pages needs no new slot.
        let again = page_of(7);
        d.write_group(&[(2, &again)]).unwrap();
        d.flush().unwrap();
        let mut buf = Box::new([0u8; PAGE_SIZE]);
        for (page, want) in [(0, 1), (1, 2), (2, 7), (3, 4)] {
            d.read(page, &mut buf, 1, &mut Vec::new()).unwrap();
            assert!(buf.iter().all(|b| *b == want), "page {page}");
        }
        assert!(d.location(4).is_none());
        assert_eq!(d.swap_space().free(), 0);
        d.free(3);
        assert_eq!(d.swap_space().free(), 1);
        d.write_group(&[(4, &extra)]).unwrap();
    }
}

#[test]
fn write_behind_serves_queued_pages_and_flushes_runs() {
    let mut d = WriteBehindDisk::new(MemBlockDevice::with_pages(16), 4).unwrap();
    let a = page_of(1);
    let b = page_of(2);
    d.write_group(&[(5, &a), (6, &b)]).unwrap();
    assert_eq!(d.queued(), 2);
    assert_eq!(d.store().device().counts().writes, 0);
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    d.read(6, &mut buf, 1, &mut Vec::new()).unwrap();
    assert_eq!(buf[0], 2);
    assert_eq!(d.stats().queue_hits, 1);
    assert_eq!(d.location(5), Some(crate::disk::Location::Queued(0)));
    d.write_group(&[(7, &a), (8, &b)]).unwrap();
    // Full at four: written in one transfer, the slots being adjacent.
    assert_eq!(d.queued(), 0);
    assert_eq!(d.store().device().counts().writes, 1);
    assert_eq!(d.stats().pages_written, 4);
    d.read(6, &mut buf, 1, &mut Vec::new()).unwrap();
    assert_eq!(buf[0], 2);
    assert_eq!(d.store().device().counts().reads, 1);
}

#[test]
fn device_errors_are_reported_and_nothing_is_claimed_stored() {
    let mut d = BasicDisk::new(MemBlockDevice::with_pages(4)).unwrap();
    d.store_mut().device_mut().fail_writes(true);
    let a = page_of(1);
    assert_eq!(d.write_group(&[(0, &a)]), Err(PagerError::WriteFailed { page: 0 }));
    assert!(d.location(0).is_none());
    d.store_mut().device_mut().fail_writes(false);
    d.write_group(&[(0, &a)]).unwrap();
    d.store_mut().device_mut().fail_reads(true);
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    assert_eq!(d.read(0, &mut buf, 1, &mut Vec::new()), Err(PagerError::PageLost { page: 0 }));
    assert!(d.location(0).is_none());
}

/// The sectors of swap slot `slot` (512-byte sectors).
fn slot_sectors(slots: core::ops::Range<u64>) -> core::ops::Range<u64> {
    let per = (PAGE_SIZE / 512) as u64;
    slots.start * per..slots.end * per
}

#[test]
fn a_failed_transfer_is_retried_after_a_wait_on_the_device_clock() {
    use crate::block::{Injected, Op};
    use crate::disk::{ATTEMPTS, RETRY_WAIT_NS};
    let mut dev = MemBlockDevice::with_pages(8);
    dev.inject(Injected { op: Op::Write, sectors: slot_sectors(0..1), times: Some(1) });
    dev.inject(Injected { op: Op::Read, sectors: slot_sectors(0..1), times: Some(2) });
    let mut d = BasicDisk::new(dev).unwrap();
    let a = page_of(7);
    d.write_group(&[(5, &a)]).unwrap();
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    d.read(5, &mut buf, 1, &mut Vec::new()).unwrap();
    assert_eq!(buf[..], a[..]);
    let c = d.store().device().counts();
    // One wait before the write's retry, two (the second twice as long) before the read's.
    assert_eq!((c.failed, c.waits), (3, 3));
    assert_eq!(c.waited_ns, RETRY_WAIT_NS + RETRY_WAIT_NS + 2 * RETRY_WAIT_NS);
    let s = d.stats();
    assert_eq!((s.retries, s.retired_slots, s.lost_pages), (3, 0, 0));
    assert_eq!(d.location(5), Some(crate::disk::Location::Slot(0)));
    // A transfer failing every try is tried ATTEMPTS times, with a wait before each retry.
    let mut dev = MemBlockDevice::with_pages(8);
    dev.inject(Injected { op: Op::Write, sectors: slot_sectors(0..1), times: None });
    let mut d = BasicDisk::new(dev).unwrap();
    assert_eq!(d.write_group(&[(5, &a)]), Err(PagerError::WriteFailed { page: 5 }));
    let c = d.store().device().counts();
    assert_eq!((c.failed, c.waits), (u64::from(ATTEMPTS), u64::from(ATTEMPTS - 1)));
}

#[test]
fn a_slot_whose_write_keeps_failing_is_retired_and_never_used_again() {
    use crate::block::{Injected, Op};
    for prefetching in [false, true] {
        let mut dev = MemBlockDevice::with_pages(8);
        dev.inject(Injected { op: Op::Write, sectors: slot_sectors(1..3), times: None });
        let mut d: Box<dyn DiskManager> = if prefetching {
            Box::new(PrefetchDisk::new(dev).unwrap())
        } else {
            Box::new(BasicDisk::new(dev).unwrap())
        };
        let pages: Vec<Box<Page>> = (0..4).map(|i| page_of(10 + i as u8)).collect();
        let group: Vec<(usize, &Page)> = pages.iter().enumerate().map(|(i, p)| (i, &**p)).collect();
        // Slots 1 and 2 fail: the pages sent there are not stored, the others are.
        let failed = d.write_group(&group).unwrap_err();
        assert!(matches!(failed, PagerError::WriteFailed { .. }), "{failed:?}");
        let stored: Vec<usize> = (0..4).filter(|p| d.location(*p).is_some()).collect();
        assert_eq!(stored.len(), 2, "prefetching {prefetching}: {stored:?}");
        assert_eq!(d.swap_space().retired, 2);
        assert_eq!(d.swap_space().free(), 8 - 2 - 2);
        // Written again, they go elsewhere; nothing is ever written to the retired slots.
        d.write_group(&group).unwrap();
        let mut buf = Box::new([0u8; PAGE_SIZE]);
        for (page, want) in pages.iter().enumerate() {
            assert!(!matches!(d.location(page), Some(crate::disk::Location::Slot(1 | 2))));
            d.read(page, &mut buf, 1, &mut Vec::new()).unwrap();
            assert_eq!(buf[..], want[..], "page {page}");
        }
        assert_eq!(d.stats().retired_slots, 2);
    }
}

/// A device the test keeps a handle on, to make it fail or heal while a pager owns it.
#[derive(Clone)]
struct Shared(alloc::rc::Rc<core::cell::RefCell<MemBlockDevice>>);

impl Default for Shared {
    fn default() -> Shared {
        let dev = MemBlockDevice::with_pages(2 * PAGES);
        Shared(alloc::rc::Rc::new(core::cell::RefCell::new(dev)))
    }
}

impl SyncDisk for Shared {
    fn sector_size(&self) -> usize {
        self.0.borrow().sector_size()
    }
    fn capacity(&self) -> u64 {
        self.0.borrow().capacity()
    }
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), crate::block::DeviceError> {
        self.0.borrow_mut().read(sector, buf)
    }
    fn write(&mut self, sector: u64, data: &[u8]) -> Result<(), crate::block::DeviceError> {
        self.0.borrow_mut().write(sector, data)
    }
}

/// An application handler that records the pages it is told were lost.
struct LostPages(alloc::rc::Rc<core::cell::RefCell<Vec<usize>>>);

impl AppHandler for LostPages {
    fn page_lost(&mut self, page: usize) {
        self.0.borrow_mut().push(page);
    }
}

/// Incompressible contents for page `page`.
fn pattern(page: usize) -> Box<Page> {
    let mut rng = Rng::new(page as u64 + 1);
    let mut p = Box::new([0u8; PAGE_SIZE]);
    p.iter_mut().for_each(|b| *b = rng.next() as u8);
    p
}

#[test]
fn a_failed_read_a_failed_write_and_a_run_of_failed_writes_lose_nothing() {
    use crate::block::{Injected, Op};
    for h in hierarchies() {
        let mut dev = MemBlockDevice::with_pages(2 * PAGES);
        dev.inject(Injected { op: Op::Read, sectors: slot_sectors(1..2), times: Some(1) });
        dev.inject(Injected { op: Op::Write, sectors: slot_sectors(2..3), times: Some(1) });
        dev.inject(Injected { op: Op::Write, sectors: slot_sectors(6..9), times: None });
        let pager = h
            .build(FRAMES, dev, PAGES, PolicyKind::Clock.build(), Box::new(NoAppHandler))
            .expect("pager");
        let mut p = Paged::new(pager, MemFrames::new(FRAMES));
        let shadow = random_run(&mut p, 7, 4000);
        verify_all(&mut p, &shadow);
        p.flush_cache().expect("flush");
        verify_all(&mut p, &shadow);
        let s = p.stats();
        assert_eq!(s.lost_pages, 0, "{}: {s:?}", h.name());
        assert!(p.lost_pages().is_empty());
        assert_eq!(s.disk.retired_slots, 3, "{}: {s:?}", h.name());
        assert!(s.disk.retries > 3 * u64::from(crate::disk::ATTEMPTS - 1), "{}: {s:?}", h.name());
        assert!(s.failed_evictions > 0, "{}: {s:?}", h.name());
        assert_eq!(p.swap_space().retired, 3);
    }
}

#[test]
fn a_page_whose_only_copy_is_unreadable_is_lost_alone_and_named() {
    use crate::block::{Injected, Op};
    for h in hierarchies() {
        let mut dev = MemBlockDevice::with_pages(2 * PAGES);
        // Slot 3, where page 3 is written (pages leave in the order they were written).
        dev.inject(Injected { op: Op::Read, sectors: slot_sectors(3..4), times: None });
        let lost = alloc::rc::Rc::new(core::cell::RefCell::new(Vec::new()));
        let app = Box::new(LostPages(lost.clone()));
        let pager = h.build(FRAMES, dev, PAGES, PolicyKind::Clock.build(), app).expect("pager");
        let mut p = Paged::new(pager, MemFrames::new(FRAMES));
        for page in 0..PAGES {
            let frame = p.fault(page, true).expect("fault");
            p.frames_mut().frame_mut(frame).copy_from_slice(&pattern(page)[..]);
        }
        p.flush_cache().expect("flush");
        for page in 0..PAGES {
            let frame = p.fault(page, false).expect("a lost page is no failed fault");
            let got = p.frames().frame(frame);
            if page == 3 {
                assert!(got.iter().all(|&b| b == 0), "{}: a lost page reads zeros", h.name());
            } else {
                assert_eq!(checksum(got), checksum(&pattern(page)[..]), "{}: {page}", h.name());
            }
        }
        assert_eq!(p.lost_pages(), [3], "{}", h.name());
        assert_eq!(*lost.borrow(), [3], "{}", h.name());
        assert_eq!(p.stats().lost_pages, 1);
        // Written again, the page is kept like any other (elsewhere: its slot is retired).
        let frame = p.fault(3, true).unwrap();
        p.frames_mut().frame_mut(frame).copy_from_slice(&pattern(3)[..]);
        for page in (0..PAGES).chain(0..PAGES) {
            let frame = p.fault(page, false).unwrap();
            assert_eq!(checksum(p.frames().frame(frame)), checksum(&pattern(page)[..]));
        }
        assert_eq!(p.lost_pages(), [3], "{}", h.name());
        assert_eq!(p.swap_space().retired, 1);
    }
}

#[test]
fn an_eviction_the_disk_keeps_failing_names_the_page_written_and_loses_nothing() {
    use crate::pager::MAX_VICTIMS;
    for h in hierarchies() {
        let dev = Shared::default();
        // Every write fails, until the disk is healed.
        dev.0.borrow_mut().fail_writes(true);
        let pager = h
            .build(FRAMES, dev.clone(), PAGES, PolicyKind::Clock.build(), Box::new(NoAppHandler))
            .expect("pager");
        let mut p = Paged::new(pager, MemFrames::new(FRAMES));
        let mut failed = None;
        for page in 0..PAGES {
            match p.fault(page, true) {
                Ok(frame) => p.frames_mut().frame_mut(frame).copy_from_slice(&pattern(page)[..]),
                Err(e) => {
                    failed = Some((page, e));
                    break;
                }
            }
        }
        let (faulting, e) = failed.expect("a fault fails while every write fails");
        let PagerError::WriteFailed { page: written } = e else { panic!("{}: {e:?}", h.name()) };
        assert!(written < faulting, "{}: names page {written}, faulting {faulting}", h.name());
        assert!(p.stats().failed_evictions >= MAX_VICTIMS as u64, "{}", h.name());
        dev.0.borrow_mut().fail_writes(false);
        for page in faulting..PAGES {
            let frame = p.fault(page, true).expect("the disk works again");
            p.frames_mut().frame_mut(frame).copy_from_slice(&pattern(page)[..]);
        }
        for page in 0..PAGES {
            let frame = p.fault(page, false).unwrap();
            assert_eq!(checksum(p.frames().frame(frame)), checksum(&pattern(page)[..]), "{page}");
        }
        assert!(p.lost_pages().is_empty());
    }
}

#[test]
fn basic_cache_writes_its_eviction_area_as_one_group() {
    let disk = PrefetchDisk::new(MemBlockDevice::with_pages(32)).unwrap();
    let mut c = BasicCache::new(Box::new(disk), 4, 4);
    for i in 0..4u8 {
        c.put(i as usize, &page_of(i + 1), true).unwrap();
    }
    assert_eq!(c.stats().group_writes, 1);
    assert_eq!(c.disk_stats().device_writes, 1);
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    let f = c.fetch(0, &mut buf, &|_| false).unwrap();
    assert!(!f.hit && !f.dirty && buf[0] == 1);
    // The rest of the group came with it.
    for i in 1..4u8 {
        assert!(c.holds(i as usize));
        let f = c.fetch(i as usize, &mut buf, &|_| false).unwrap();
        assert!(f.hit && buf[0] == i + 1);
    }
    assert_eq!(c.disk_stats().device_reads, 1);
    assert_eq!(c.stats().prefetch_hits, 3);
    // A clean page the disk holds is dropped, not written.
    c.put(2, &page_of(3), false).unwrap();
    assert_eq!(c.stats().clean_dropped, 1);
}

#[test]
fn compressed_cache_stores_marks_raw_and_compressed_and_is_exclusive() {
    // A page of equal bytes: lz4 makes a few bytes of it, WKdm a tag for each word.
    for (codec, size) in [(Codec::Lz4, SUB), (Codec::Wkdm, 2 * SUB)] {
        compressed_cache_is_exclusive(codec, size);
    }
}

fn compressed_cache_is_exclusive(codec: Codec, size: usize) {
    let disk = BasicDisk::new(MemBlockDevice::with_pages(8)).unwrap();
    let lower = BasicCache::pass_through(Box::new(disk));
    let config = CompressedConfig { codec, ..CompressedConfig::new(2 * PAGE_SIZE) };
    let mut c = CompressedCache::new(Box::new(lower), config);
    let zero = page_of(0);
    let mut rng = Rng::new(2);
    let mut random = Box::new([0u8; PAGE_SIZE]);
    random.iter_mut().for_each(|b| *b = rng.next() as u8);
    c.put(1, &zero, true).unwrap();
    c.put(2, &page_of(5), true).unwrap();
    c.put(3, &random, true).unwrap();
    let s = c.stats();
    assert_eq!((s.zero_pages, s.compressed_pages, s.raw_pages), (1, 1, 1));
    assert_eq!(s.used_bytes, size + PAGE_SIZE, "{codec:?}");
    // A second random page does not fit beside the first: the oldest sized entry goes to disk.
    c.put(4, &random, false).unwrap();
    assert_eq!(c.stats().expelled, 1);
    assert!(!c.in_pool(2) && c.holds(1) && c.in_pool(3) && c.in_pool(4));
    let mut buf = Box::new([1u8; PAGE_SIZE]);
    for (page, want) in [(1, &zero), (2, &page_of(5)), (3, &random)] {
        let f = c.fetch(page, &mut buf, &|_| false).unwrap();
        // Page 2 was written to disk when expelled: it comes back clean, from below.
        assert_eq!((f.hit, f.dirty), (page != 2, page != 2), "page {page}");
        assert_eq!(&buf[..], &want[..]);
        assert!(!c.holds(page));
    }
    // The zero mark and the raw page were hits of their kinds; page 2 was no hit.
    let s = c.stats();
    assert_eq!((s.hits, s.zero_hits, s.raw_hits), (2, 1, 1));
}

const SUB: usize = crate::cache::SUB_PAGE;

/// Frames whose `map` can be told to fail, as a kernel's might, and that count the harvests
/// of their accessed bits.
struct TestFrames {
    inner: MemFrames,
    fail_map: bool,
    harvests: usize,
}

impl TestFrames {
    fn new(inner: MemFrames) -> TestFrames {
        TestFrames { inner, fail_map: false, harvests: 0 }
    }
}

impl Frames for TestFrames {
    fn fill(&mut self, frame: usize, pager: &mut Pager) -> Result<bool, PagerError> {
        self.inner.fill(frame, pager)
    }
    fn zero(&mut self, frame: usize) -> Result<(), PagerError> {
        self.inner.zero(frame)
    }
    fn save(&mut self, frame: usize, pager: &mut Pager, written: bool) -> Result<(), PagerError> {
        self.inner.save(frame, pager, written)
    }
    fn map(&mut self, page: usize, frame: usize, writable: bool) -> Result<(), PagerError> {
        if self.fail_map {
            return Err(PagerError::Frames);
        }
        self.inner.map(page, frame, writable)
    }
    fn unmap(&mut self, page: usize, frame: usize) -> Result<bool, PagerError> {
        self.inner.unmap(page, frame)
    }
    fn release(&mut self, frame: usize) -> Result<(), PagerError> {
        self.inner.release(frame)
    }
    fn tracks_dirty(&self) -> bool {
        self.inner.tracks_dirty()
    }
    fn harvest(&mut self, pager: &mut Pager) -> Result<(), PagerError> {
        self.harvests += 1;
        self.inner.harvest(pager)
    }
}

#[test]
fn a_failed_map_loses_no_fetched_page() {
    for h in hierarchies() {
        let frames = TestFrames::new(MemFrames::new(FRAMES));
        let device = MemBlockDevice::with_pages(2 * PAGES);
        let pager = h
            .build(FRAMES, device, PAGES, PolicyKind::Clock.build(), Box::new(NoAppHandler))
            .unwrap();
        let mut p = Paged::new(pager, frames);
        for page in 0..2 * FRAMES {
            let frame = p.fault(page, true).unwrap();
            p.frames_mut().inner.frame_mut(frame).fill(page as u8 + 1);
        }
        p.frames_mut().fail_map = true;
        assert_eq!(p.fault(0, false), Err(PagerError::Frames));
        assert!(p.resident(0).is_none());
        check_exclusive(&p);
        p.frames_mut().fail_map = false;
        for page in 0..2 * FRAMES {
            let frame = p.fault(page, false).unwrap();
            assert!(
                p.frames().inner.frame(frame).iter().all(|b| *b == page as u8 + 1),
                "{}: page {page}",
                h.name()
            );
        }
    }
}

#[test]
fn evicting_ahead_evicts_in_batches_and_loses_nothing() {
    for h in hierarchies() {
        let mut p = pager(h, PolicyKind::Clock.build(), 2 * PAGES);
        p.set_evict_ahead(4);
        for page in 0..FRAMES {
            p.fault(page, true).unwrap();
        }
        assert_eq!(p.stats().evictions, 0);
        // The next fault evicts four; the three after it find free frames.
        p.fault(FRAMES, false).unwrap();
        assert_eq!(p.stats().evictions, 4, "{}", h.name());
        for page in FRAMES + 1..FRAMES + 4 {
            p.fault(page, false).unwrap();
        }
        assert_eq!(p.stats().evictions, 4, "{}", h.name());
        p.fault(FRAMES + 4, false).unwrap();
        assert_eq!(p.stats().evictions, 8, "{}", h.name());
        let shadow = random_run(&mut p, 17, 1500);
        verify_all(&mut p, &shadow);
    }
}

#[test]
fn with_dirty_bits_every_hierarchy_keeps_every_byte_without_protection_faults() {
    for h in hierarchies() {
        for kind in [PolicyKind::Clock, PolicyKind::Lru] {
            let pager = h
                .build(
                    FRAMES,
                    MemBlockDevice::with_pages(2 * PAGES),
                    PAGES,
                    kind.build(),
                    Box::new(NoAppHandler),
                )
                .expect("pager");
            let mut p = Paged::new(pager, MemFrames::with_bits(FRAMES));
            let shadow = random_run_with_bits(&mut p, 21, 4000);
            let s = p.stats();
            // Every fault brought a page in: none was a write to a clean resident page.
            assert_eq!(s.faults, s.fetches + s.zero_fills, "{}: {s:?}", h.name());
            // Pages written only through the hardware were found dirty and stored; clean
            // ones were dropped, not rewritten.
            assert!(s.dirty_evictions > 0 && s.evictions > s.dirty_evictions, "{s:?}");
            // Every page is mapped writable: the dirty bit, not a fault, tells a write.
            for page in p.resident_pages().collect::<Vec<_>>() {
                assert!(p.frames().mapping(page).is_some_and(|(_, w)| w), "page {page}");
            }
            verify_all(&mut p, &shadow);
            p.flush_cache().expect("flush");
            verify_all(&mut p, &shadow);
        }
    }
}

#[test]
fn the_clock_gives_pages_the_hardware_marked_accessed_a_second_chance() {
    for bits in [false, true] {
        let frames = if bits { MemFrames::with_bits(4) } else { MemFrames::new(4) };
        let pager = Hierarchy::LocalPaging
            .build(
                4,
                MemBlockDevice::with_pages(16),
                16,
                PolicyKind::Clock.build(),
                Box::new(NoAppHandler),
            )
            .expect("pager");
        let mut p = Paged::new(pager, frames);
        p.set_harvest_every(1);
        for page in 0..5 {
            p.fault(page, false).unwrap();
        }
        // The first sweep cleared every reference bit and took page 0.
        assert!(p.resident(0).is_none());
        // Page 1 is read without a fault: only the page table knows.
        p.frames_mut().access(1, false).expect("page 1 is mapped");
        p.fault(5, false).unwrap();
        let (survivor, victim) = if bits { (1, 2) } else { (2, 1) };
        assert!(p.resident(survivor).is_some(), "bits {bits}: page {survivor} evicted");
        assert!(p.resident(victim).is_none(), "bits {bits}: page {victim} kept");
    }
}

#[test]
fn accessed_bits_are_harvested_once_every_so_many_evictions() {
    let pager = Hierarchy::LocalPaging
        .build(
            FRAMES,
            MemBlockDevice::with_pages(PAGES),
            PAGES,
            PolicyKind::Clock.build(),
            Box::new(NoAppHandler),
        )
        .expect("pager");
    let frames = TestFrames::new(MemFrames::with_bits(FRAMES));
    let mut p = Paged::new(pager, frames);
    for page in 0..FRAMES {
        p.fault(page, false).unwrap();
    }
    // Never, unless asked for.
    p.fault(FRAMES + 20, false).unwrap();
    assert_eq!(p.frames().harvests, 0, "harvested though never asked");
    p.set_harvest_every(2);
    // Two evictions between harvests; the first eviction asked for harvests.
    for page in FRAMES..FRAMES + 10 {
        p.fault(page, false).unwrap();
    }
    assert_eq!((p.stats().evictions, p.frames().harvests), (11, 5));
    p.set_harvest_every(1);
    p.fault(FRAMES + 10, false).unwrap();
    p.fault(FRAMES + 11, false).unwrap();
    assert_eq!(p.frames().harvests, 7);
}

/// A local-paging pager over a device on which every write to swap slot 0 fails.
fn pager_whose_slot_0_writes_fail() -> Pager {
    use crate::block::{Injected, Op};
    let mut dev = MemBlockDevice::with_pages(2 * PAGES);
    dev.inject(Injected { op: Op::Write, sectors: slot_sectors(0..1), times: None });
    Hierarchy::LocalPaging
        .build(FRAMES, dev, PAGES, PolicyKind::Clock.build(), Box::new(NoAppHandler))
        .expect("pager")
}

/// Touches every page twice over: pages `0..=FRAMES` hold their pattern, the rest zeroes.
fn every_page_kept(p: &mut Paged<MemFrames>) {
    for page in (0..PAGES).chain(0..PAGES) {
        let frame = p.fault(page, false).unwrap();
        let want = if page <= FRAMES { pattern(page) } else { Box::new([0; PAGE_SIZE]) };
        assert_eq!(checksum(p.frames().frame(frame)), checksum(&want[..]), "{page}");
    }
}

#[test]
fn a_victim_whose_write_keeps_failing_stays_resident_and_dirty_and_another_is_chosen() {
    let pager = pager_whose_slot_0_writes_fail();
    let mut p = Paged::new(pager, MemFrames::new(FRAMES));
    for page in 0..=FRAMES {
        let frame = p.fault(page, true).expect("fault");
        p.frames_mut().frame_mut(frame).copy_from_slice(&pattern(page)[..]);
    }
    // Page 0, the first victim, went to slot 0, which failed: it stays, dirty; page 1 went.
    assert_eq!(p.resident(0).map(|r| r.dirty), Some(true));
    assert!(p.resident(1).is_none());
    let s = p.stats();
    assert_eq!((s.failed_evictions, s.evictions, s.disk.retired_slots), (1, 1, 1));
    // Page 0 is written elsewhere when next evicted, and every byte is kept.
    every_page_kept(&mut p);
    assert_eq!(p.swap_space().retired, 1);
}

#[test]
fn a_victim_the_dirty_bit_says_was_written_stays_dirty_when_its_write_fails() {
    let pager = pager_whose_slot_0_writes_fail();
    // Frames with dirty bits: read faults map pages writable, and only the bit tells the
    // pager that a page was written.
    let mut p = Paged::new(pager, MemFrames::with_bits(FRAMES));
    for page in 0..=FRAMES {
        let frame = p.fault(page, false).expect("fault");
        p.frames_mut().frame_mut(frame).copy_from_slice(&pattern(page)[..]);
    }
    // Page 0's write failed: it was mapped again, and the pager kept what its bit said.
    assert_eq!(p.resident(0).map(|r| r.dirty), Some(true));
    assert_eq!(p.stats().failed_evictions, 1);
    every_page_kept(&mut p);
}

#[test]
fn write_behind_keeps_pages_whose_slots_fail_queued_and_loses_nothing() {
    use crate::block::{Injected, Op};
    let mut dev = MemBlockDevice::with_pages(2 * PAGES);
    dev.inject(Injected { op: Op::Write, sectors: slot_sectors(2..5), times: None });
    dev.inject(Injected { op: Op::Read, sectors: slot_sectors(0..1), times: Some(1) });
    let disk = WriteBehindDisk::new(dev, 3).expect("disk");
    let cache = BasicCache::pass_through(Box::new(disk));
    let pager =
        Pager::new(FRAMES, PAGES, Box::new(Clock::new()), Box::new(cache), Box::new(NoAppHandler));
    let mut p = Paged::new(pager, MemFrames::new(FRAMES));
    let shadow = random_run(&mut p, 3, 3000);
    verify_all(&mut p, &shadow);
    p.flush_cache().expect("flush");
    verify_all(&mut p, &shadow);
    let s = p.stats();
    assert_eq!((s.disk.retired_slots, s.lost_pages), (3, 0), "{s:?}");
    assert!(s.disk.retries > 0 && s.disk.write_failures == 3, "{s:?}");
}
