//! The driver against the mock kernel: every hierarchy and policy keeps every byte of a
//! stretch four times larger than its frames; frames are filled out of view; revocation gives
//! back optimistic frames, writing dirty pages back first; a full swap area fails the fault
//! and loses nothing; an application's policy is the one used.

use alloc::boxed::Box;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;

use pager::block::MemBlockDevice;
use pager::cache::Codec;
use pager::hierarchy::Hierarchy;
use pager::replace::{Clock, PolicyKind, ReplacementPolicy};
use stretch_driver::mock::{MockKernel, Outcome};
use stretch_driver::{
    Access, FaultError, MemoryKernel, PAGE_SIZE, Rights, StretchDriver, StretchInfo,
};

use crate::{
    FaultSource, HitKind, LATENCY_BINS, PagedConfig, PagedDriver, latency_bin, latency_edge,
};

const FRAMES: usize = 16;
const PAGES: usize = 4 * FRAMES;
const RW: Rights = Rights(Rights::READ.0 | Rights::WRITE.0);

/// Every hierarchy, those with a compressed cache once with each codec.
fn hierarchies() -> [Hierarchy; 6] {
    let compressed = |codec| Hierarchy::CompressedCache { pool_bytes: 6 * PAGE_SIZE, codec };
    let prefetching_compressed = |codec| Hierarchy::PrefetchingCompressedCache {
        pool_bytes: 4 * PAGE_SIZE,
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

/// A domain with `guaranteed` + `optimistic` frames for the driver, its window and the stretch.
struct Domain {
    k: MockKernel,
    driver: PagedDriver<MemBlockDevice>,
    stretch: StretchInfo,
}

impl Domain {
    fn new(config: PagedConfig, swap_pages: usize, guaranteed: usize, optimistic: usize) -> Self {
        Self::with(config, swap_pages, guaranteed, optimistic, |d| d)
    }

    fn with(
        config: PagedConfig,
        swap_pages: usize,
        guaranteed: usize,
        optimistic: usize,
        f: impl FnOnce(PagedDriver<MemBlockDevice>) -> PagedDriver<MemBlockDevice>,
    ) -> Self {
        Self::on(config, MemBlockDevice::with_pages(swap_pages), guaranteed, optimistic, f)
    }

    /// A domain paging to `device`.
    fn on(
        config: PagedConfig,
        device: MemBlockDevice,
        guaranteed: usize,
        optimistic: usize,
        f: impl FnOnce(PagedDriver<MemBlockDevice>) -> PagedDriver<MemBlockDevice>,
    ) -> Self {
        // The guarantee holds the driver's frames and the heap's reserve, which bind leaves.
        let reserve = crate::heap_reserve_frames(
            &config.hierarchy,
            crate::Backing::Local,
            config.frames,
            PAGES,
        );
        let mut k = MockKernel::new(guaranteed + reserve, optimistic);
        let window = k.create_managed_stretch(config.window_pages(), RW);
        let driver = f(PagedDriver::new(config, device, window.base));
        let stretch = k.create_stretch(PAGES, RW);
        let mut d = Domain { k, driver, stretch };
        d.k.bind_driver(&mut d.driver, stretch).expect("bind");
        d
    }

    fn va(&self, page: usize, word: usize) -> usize {
        self.stretch.page_addr(page) + word * 8
    }

    /// Stores `value` at word `word` of `page`, faulting as the CPU would.
    fn store(&mut self, page: usize, word: usize, value: u64) -> Result<(), FaultError> {
        let va = self.va(page, word);
        match self.k.access(&mut self.driver, &self.stretch, va, Access::Write) {
            Outcome::Hit | Outcome::Resolved => {}
            Outcome::Failed(e) => return Err(e),
            other => panic!("store at page {page}: {other:?}"),
        }
        self.k.store_u64(va, value).expect("mapped writable");
        Ok(())
    }

    /// Loads word `word` of `page`, faulting as the CPU would.
    fn load(&mut self, page: usize, word: usize) -> u64 {
        let va = self.va(page, word);
        match self.k.access(&mut self.driver, &self.stretch, va, Access::Read) {
            Outcome::Hit | Outcome::Resolved => {}
            other => panic!("load at page {page}: {other:?}"),
        }
        self.k.load_u64(va).expect("mapped readable")
    }

    /// Checks that no page of the stretch is mapped writable unless the driver knows it dirty,
    /// and that the window holds no page of the stretch: mapped pages are at most the frames.
    fn check_mapped(&self) {
        let mapped = (0..PAGES).filter(|p| self.k.mapping(self.va(*p, 0)).is_some()).count();
        assert!(mapped <= FRAMES, "{mapped} pages mapped on {FRAMES} frames");
    }
}

const WORDS: usize = PAGE_SIZE / 8;

/// A page's words as a shadow keeps them.
type Shadow = Vec<Vec<u64>>;

/// A seeded run of loads and stores: some pages filled with random words (incompressible),
/// some with a pattern, some left zero; returns the shadow.
fn random_run(d: &mut Domain, seed: u64, steps: usize) -> Shadow {
    let mut rng = Rng::new(seed);
    let mut shadow: Shadow = vec![vec![0; WORDS]; PAGES];
    for _ in 0..steps {
        let page = rng.below(PAGES);
        match rng.below(8) {
            0 => {
                // Incompressible: every word random.
                for (w, word) in shadow[page].iter_mut().enumerate() {
                    let v = rng.next();
                    d.store(page, w, v).expect("store");
                    *word = v;
                }
            }
            1 | 2 => {
                let (w, v) = (rng.below(WORDS), rng.next() % 16);
                d.store(page, w, v).expect("store");
                shadow[page][w] = v;
            }
            _ => {
                let w = rng.below(WORDS);
                assert_eq!(d.load(page, w), shadow[page][w], "page {page} word {w}");
            }
        }
        d.check_mapped();
    }
    shadow
}

fn verify(d: &mut Domain, shadow: &Shadow) {
    for (page, words) in shadow.iter().enumerate() {
        for (w, want) in words.iter().enumerate() {
            assert_eq!(d.load(page, w), *want, "page {page} word {w}");
        }
    }
}

fn config(hierarchy: Hierarchy, policy: PolicyKind) -> PagedConfig {
    PagedConfig { hierarchy, policy, frames: FRAMES, ahead: 1, harvest: 0 }
}

#[test]
fn every_hierarchy_and_policy_keeps_every_byte_of_a_stretch_four_times_its_frames() {
    for h in hierarchies() {
        for policy in [PolicyKind::Clock, PolicyKind::Lru] {
            let mut d = Domain::new(config(h, policy), 2 * PAGES, FRAMES, 0);
            let shadow = random_run(&mut d, 9, 1500);
            verify(&mut d, &shadow);
            let s = d.driver.pager_stats().unwrap();
            assert!(s.evictions > 0 && s.disk.device_writes > 0, "{}: {s:?}", h.name());
            assert!(s.zero_fills > 0 && s.fetches > 0, "{}: {s:?}", h.name());
            let (fills, saves, _) = d.driver.window_copies();
            assert!(fills > 0 && saves > 0);
            // The driver holds its frames; the heap's reserve was taken at bind and given back.
            let reserve = crate::heap_reserve_frames(&h, crate::Backing::Local, FRAMES, PAGES);
            assert_eq!(d.k.peak_held(), (FRAMES + reserve, 0), "{}", h.name());
            assert_eq!(d.k.frames_held(), (FRAMES, 0), "{}", h.name());
        }
    }
}

#[test]
fn pages_are_mapped_writable_and_the_dirty_bit_says_which_to_write_back() {
    let mut d =
        Domain::new(config(Hierarchy::LocalPaging, PolicyKind::Clock), 2 * PAGES, FRAMES, 0);
    assert_eq!(d.load(3, 0), 0);
    let (_, rights) = d.k.mapping(d.va(3, 0)).unwrap();
    assert_eq!(rights, RW, "mapped writable at once");
    // Written with no second fault: only the page table knows.
    d.store(3, 0, 7).unwrap();
    d.store(5, 0, 9).unwrap();
    assert_eq!(d.driver.stats().faults, 2);
    let evict_all = |d: &mut Domain| {
        for page in PAGES - FRAMES..PAGES {
            d.load(page, 0);
        }
    };
    // Both written pages are stored when evicted (the untouched zero pages are forgotten).
    evict_all(&mut d);
    let s = d.driver.pager_stats().unwrap();
    assert_eq!((s.dirty_evictions, s.disk.device_writes), (2, 2), "{s:?}");
    // Page 5 comes back clean; read only, it is dropped when evicted again, not rewritten.
    assert_eq!(d.load(5, 0), 9);
    evict_all(&mut d);
    let s = d.driver.pager_stats().unwrap();
    assert_eq!((s.dirty_evictions, s.disk.device_writes), (2, 2), "{s:?}");
    assert_eq!((d.load(3, 0), d.load(5, 0)), (7, 9));
}

#[test]
fn unbind_gives_back_every_frame() {
    let mut d =
        Domain::new(config(Hierarchy::LocalPaging, PolicyKind::Clock), 2 * PAGES, FRAMES, 0);
    random_run(&mut d, 3, 200);
    let left = d.k.unbind_driver(&mut d.driver, d.stretch);
    assert_eq!(left, 0);
    // The window's page-table pages are not frames: only the driver's frames were held.
    assert_eq!(d.k.frames_held(), (0, 0));
}

#[test]
fn revocation_gives_back_optimistic_frames_writing_dirty_pages_back() {
    for h in hierarchies() {
        // Half the frames guaranteed, half optimistic (the guarantee also has the heap's
        // reserve, which bind leaves alone).
        let mut d = Domain::new(config(h, PolicyKind::Clock), 2 * PAGES, FRAMES / 2, FRAMES / 2);
        assert_eq!(d.driver.frames_held(), (FRAMES / 2, FRAMES / 2));
        let shadow = random_run(&mut d, 21, 1200);
        let written = d.driver.pager_stats().unwrap().disk.device_writes;
        let mut driver = core::mem::replace(
            &mut d.driver,
            PagedDriver::new(config(h, PolicyKind::Clock), MemBlockDevice::with_pages(1), 0),
        );
        let released = driver.revoke(&mut d.k, 5);
        d.driver = driver;
        assert_eq!(released, 5, "{}", h.name());
        assert_eq!(d.k.frames_held(), (FRAMES / 2, FRAMES / 2 - 5), "{}", h.name());
        assert_eq!(d.driver.frames_held(), (FRAMES / 2, FRAMES / 2 - 5));
        // Asking for more than the optimistic frames held gives back only those.
        let mut driver = core::mem::replace(
            &mut d.driver,
            PagedDriver::new(config(h, PolicyKind::Clock), MemBlockDevice::with_pages(1), 0),
        );
        assert_eq!(driver.revoke(&mut d.k, 100), FRAMES / 2 - 5);
        d.driver = driver;
        assert_eq!(d.k.frames_held(), (FRAMES / 2, 0), "{}", h.name());
        verify(&mut d, &shadow);
        let s = d.driver.pager_stats().unwrap();
        assert!(s.disk.device_writes >= written, "{}", h.name());
        assert_eq!(s.frames, FRAMES / 2);
    }
}

#[test]
fn a_full_swap_area_fails_the_fault_and_loses_nothing() {
    // Room on disk for 8 pages only; the stretch has 64.
    let mut d = Domain::new(config(Hierarchy::LocalPaging, PolicyKind::Clock), 8, FRAMES, 0);
    let mut shadow: Shadow = vec![vec![0; WORDS]; PAGES];
    let mut failed = None;
    for (page, words) in shadow.iter_mut().enumerate() {
        let v = page as u64 + 1;
        match d.store(page, 0, v) {
            Ok(()) => words[0] = v,
            Err(e) => {
                assert_eq!(e, FaultError::Backing("the swap area is full"));
                failed = Some(page);
                break;
            }
        }
    }
    let failed = failed.expect("the swap area fills");
    assert_eq!(failed, FRAMES + 8);
    for (page, words) in shadow.iter().enumerate().take(failed) {
        // A read is answered, or refused cleanly when it would need a slot to evict into.
        let va = d.va(page, 0);
        match d.k.access(&mut d.driver, &d.stretch, va, Access::Read) {
            Outcome::Hit | Outcome::Resolved => {
                assert_eq!(d.k.load_u64(va).unwrap(), words[0], "page {page}");
            }
            Outcome::Failed(FaultError::Backing(_)) => {}
            other => panic!("page {page}: {other:?}"),
        }
    }
}

/// A policy that counts its victim choices and otherwise is the clock.
struct Counting {
    inner: Clock,
    victims: Rc<Cell<usize>>,
}

impl ReplacementPolicy for Counting {
    fn mapped(&mut self, page: usize) {
        self.inner.mapped(page)
    }
    fn accessed(&mut self, page: usize) {
        self.inner.accessed(page)
    }
    fn unmapped(&mut self, page: usize) {
        self.inner.unmapped(page)
    }
    fn locked(&mut self, page: usize) {
        self.inner.locked(page)
    }
    fn unlocked(&mut self, page: usize) {
        self.inner.unlocked(page)
    }
    fn victim(&mut self) -> Option<usize> {
        self.victims.set(self.victims.get() + 1);
        self.inner.victim()
    }
}

#[test]
fn an_applications_policy_is_the_one_used() {
    let victims = Rc::new(Cell::new(0));
    let policy = Counting { inner: Clock::new(), victims: victims.clone() };
    let mut d = Domain::with(
        config(
            Hierarchy::CompressedCache { pool_bytes: 4 * PAGE_SIZE, codec: Codec::Lz4 },
            PolicyKind::Lru,
        ),
        2 * PAGES,
        FRAMES,
        0,
        |driver| driver.with_policy(Box::new(policy)),
    );
    let shadow = random_run(&mut d, 5, 600);
    verify(&mut d, &shadow);
    let evictions = d.driver.pager_stats().unwrap().evictions;
    assert!(evictions > 0);
    assert_eq!(victims.get() as u64, evictions);
}

#[test]
fn locked_pages_stay_resident() {
    let mut d =
        Domain::new(config(Hierarchy::LocalPaging, PolicyKind::Clock), 2 * PAGES, FRAMES, 0);
    let base = d.stretch.base;
    let mut driver = core::mem::replace(
        &mut d.driver,
        PagedDriver::new(
            config(Hierarchy::LocalPaging, PolicyKind::Clock),
            MemBlockDevice::with_pages(1),
            0,
        ),
    );
    driver.lock(&mut d.k, base..base + 4 * PAGE_SIZE).unwrap();
    d.driver = driver;
    random_run(&mut d, 8, 400);
    for page in 0..4 {
        assert!(d.k.mapping(d.va(page, 0)).is_some(), "page {page}");
    }
}

/// A clock that moves one tick each time it is read.
fn ticking_clock() -> u64 {
    use core::sync::atomic::{AtomicU64, Ordering};
    static TICKS: AtomicU64 = AtomicU64::new(0);
    TICKS.fetch_add(1, Ordering::Relaxed)
}

#[test]
fn latency_bins_are_quarter_decades_from_one_microsecond() {
    assert_eq!((0..5).map(latency_edge).collect::<Vec<_>>(), [1000, 1778, 3162, 5623, 10_000]);
    assert_eq!((latency_bin(0), latency_bin(1_777), latency_bin(1_778)), (0, 0, 1));
    assert_eq!((latency_bin(9_999), latency_bin(10_000), latency_bin(3_000_000)), (3, 4, 13));
    assert_eq!(latency_bin(u64::MAX), LATENCY_BINS - 1);
    assert_eq!(latency_edge(24), 1_000_000_000);
}

#[test]
fn a_clock_times_faults_kernel_calls_and_the_codec() {
    let h = Hierarchy::CompressedCache { pool_bytes: 6 * PAGE_SIZE, codec: Codec::Wkdm };
    let mut d = Domain::with(config(h, PolicyKind::Clock), 2 * PAGES, FRAMES, 0, |driver| {
        driver.with_clock(ticking_clock)
    });
    let shadow = random_run(&mut d, 2, 300);
    verify(&mut d, &shadow);
    let c = d.driver.costs();
    assert_eq!(c.faults, d.driver.stats().faults);
    assert!(c.kernel_calls >= c.faults, "{c:?}");
    // Each fault reads the clock at least twice around everything else it timed.
    assert!(c.fault_ns > c.kernel_ns + c.codec_ns, "{c:?}");
    assert!(c.kernel_ns > 0 && c.codec_ns > 0, "{c:?}");
    // Every fault that brought a page in is in one bin of its source's latencies: the run
    // zero-fills and hits the pool.
    let bins = d.driver.fault_latencies();
    let by_source: Vec<u64> = bins.iter().map(|b| b.iter().sum()).collect();
    assert!(by_source.iter().sum::<u64>() <= c.faults && by_source.iter().sum::<u64>() > 0);
    assert!(by_source[FaultSource::Zero as usize] > 0, "{by_source:?}");
    assert!(by_source[FaultSource::Cache as usize] > 0, "{by_source:?}");
    // Without a clock nothing is timed.
    let mut plain = Domain::new(config(h, PolicyKind::Clock), 2 * PAGES, FRAMES, 0);
    random_run(&mut plain, 2, 100);
    let c = plain.driver.costs();
    assert_eq!((c.fault_ns, c.kernel_ns, c.codec_ns), (0, 0, 0));
}

#[test]
fn bind_takes_what_the_contract_grants_up_to_the_frames_asked() {
    // 16 asked, 6 guaranteed (beside the heap's reserve) and 4 optimistic in the contract: 10
    // taken, the reserve left to the heap, and paging works.
    let mut d = Domain::new(config(Hierarchy::LocalPaging, PolicyKind::Clock), 2 * PAGES, 6, 4);
    assert_eq!(d.driver.frames_held(), (6, 4));
    assert_eq!(d.k.frames_held(), (6, 4));
    assert_eq!(
        d.k.peak_held().0,
        6 + crate::heap_reserve_frames(
            &Hierarchy::LocalPaging,
            crate::Backing::Local,
            FRAMES,
            PAGES
        )
    );
    let shadow = random_run(&mut d, 4, 300);
    verify(&mut d, &shadow);
    // None at all: the bind fails and holds nothing.
    let mut k = MockKernel::new(0, 0);
    let local = config(Hierarchy::LocalPaging, PolicyKind::Clock);
    let window = k.create_managed_stretch(local.window_pages(), RW);
    let mut driver = PagedDriver::new(local, MemBlockDevice::with_pages(8), window.base);
    let stretch = k.create_stretch(8, RW);
    assert!(k.bind_driver(&mut driver, stretch).is_err());
    assert_eq!(k.frames_held(), (0, 0));
}

#[test]
fn revocation_of_most_frames_when_all_are_optimistic() {
    for h in hierarchies() {
        let mut d = Domain::new(config(h, PolicyKind::Clock), 2 * PAGES, 0, FRAMES);
        assert_eq!(d.driver.frames_held(), (0, FRAMES));
        let shadow = random_run(&mut d, 6, 800);
        let mut driver = core::mem::replace(
            &mut d.driver,
            PagedDriver::new(config(h, PolicyKind::Clock), MemBlockDevice::with_pages(1), 0),
        );
        let released = driver.revoke(&mut d.k, FRAMES - 2);
        d.driver = driver;
        assert_eq!(released, FRAMES - 2, "{}", h.name());
        assert_eq!(d.k.frames_held(), (0, 2), "{}", h.name());
        verify(&mut d, &shadow);
    }
}

#[test]
fn hit_costs_count_the_faults_a_cache_answered_without_the_disk() {
    let h = hierarchies()[1];
    // Evicting ahead, most hits find a free frame: their own cost is recorded by kind.
    let ahead = PagedConfig { ahead: 4, ..config(h, PolicyKind::Clock) };
    let mut d =
        Domain::with(ahead, 2 * PAGES, FRAMES, 0, |driver| driver.with_clock(ticking_clock));
    let shadow = random_run(&mut d, 12, 600);
    verify(&mut d, &shadow);
    let hits = d.driver.hit_costs();
    let s = d.driver.pager_stats().unwrap();
    assert!(hits.count() > 0 && hits.count() <= s.cache.hits, "{hits:?} {s:?}");
    let p50 = hits.percentile_ns(500).unwrap();
    assert!(p50 <= hits.percentile_ns(990).unwrap_or(u64::MAX));
    assert!(hits.max_ns() > 0);
    // Those that evicted nothing, by how the page was stored: some of each, no more than the
    // cache's counts.
    let by_kind = |k| d.driver.hit_costs_of(k).count();
    assert!(HitKind::ALL.map(by_kind).iter().sum::<u64>() < hits.count());
    assert!(
        by_kind(HitKind::Zero) <= s.cache.zero_hits && by_kind(HitKind::Raw) <= s.cache.raw_hits
    );
    assert!(HitKind::ALL.iter().all(|&k| by_kind(k) > 0), "{s:?}");
}

#[test]
fn evicting_ahead_frees_frames_for_the_next_faults() {
    for h in hierarchies() {
        let mut d = Domain::new(config(h, PolicyKind::Clock), 2 * PAGES, FRAMES, 0);
        let mut ahead = Domain::new(
            PagedConfig { ahead: 4, ..config(h, PolicyKind::Clock) },
            2 * PAGES,
            FRAMES,
            0,
        );
        // The same seeded run on both (each load checked against the shadow as it goes), then
        // every byte checked on both.
        let plain = random_run(&mut d, 31, 800);
        let shadow = random_run(&mut ahead, 31, 800);
        verify(&mut d, &plain);
        verify(&mut ahead, &shadow);
        let (p, a) = (d.driver.pager_stats().unwrap(), ahead.driver.pager_stats().unwrap());
        // Evicting ahead evicts at least as many pages: some it evicted early come back.
        assert!(a.evictions >= p.evictions, "{}: {a:?} {p:?}", h.name());
    }
}

#[test]
fn a_fault_costs_two_kernel_calls_when_evicting_ahead() {
    for h in [hierarchies()[0], hierarchies()[1]] {
        let ahead = PagedConfig { ahead: 8, harvest: 2, ..config(h, PolicyKind::Clock) };
        let mut d = Domain::new(ahead, 2 * PAGES, FRAMES, 0);
        let shadow = random_run(&mut d, 41, 800);
        verify(&mut d, &shadow);
        let (c, s) = (d.k.calls(), d.driver.pager_stats().unwrap());
        // One remap takes each victim out of view; its frame waits at the window, where the
        // next fault fills it and moves it into place with one more; should the window be
        // full, one batch clears it. No page is unmapped alone.
        assert!(c.map_batch * 8 <= s.evictions + 8, "{}: {c:?} {s:?}", h.name());
        assert_eq!(c.unmap, 0, "{}: {c:?}", h.name());
        // The clock harvests the accessed bits, asked to every other eviction.
        assert!(c.page_state > 0 && c.page_state * 2 <= s.evictions, "{c:?} {s:?}");
        let calls = c.map + c.remap + c.protect + c.map_batch + c.page_state;
        let per_fault = calls as f64 / s.faults as f64;
        assert!(per_fault < 2.5, "{}: {per_fault} calls a fault, {c:?} {s:?}", h.name());
    }
}

/// The sectors of swap slots `slots`.
fn slot_sectors(slots: core::ops::Range<u64>) -> core::ops::Range<u64> {
    let per = (PAGE_SIZE / 512) as u64;
    slots.start * per..slots.end * per
}

/// An application handler that records the pages it is told were lost.
struct Lost(Rc<core::cell::RefCell<Vec<usize>>>);

impl pager::app::AppHandler for Lost {
    fn page_lost(&mut self, page: usize) {
        self.0.borrow_mut().push(page);
    }
}

#[test]
fn a_disk_that_fails_reads_and_writes_costs_only_the_page_it_cannot_read() {
    use pager::block::{Injected, Op};
    for h in hierarchies() {
        let mut dev = MemBlockDevice::with_pages(2 * PAGES);
        // A read that fails once, a write that fails once, a run of writes that always fail
        // (slots 6 to 8), and slot 3, where page 3 goes, unreadable.
        dev.inject(Injected { op: Op::Read, sectors: slot_sectors(1..2), times: Some(1) });
        dev.inject(Injected { op: Op::Write, sectors: slot_sectors(2..3), times: Some(1) });
        dev.inject(Injected { op: Op::Write, sectors: slot_sectors(6..9), times: None });
        dev.inject(Injected { op: Op::Read, sectors: slot_sectors(3..4), times: None });
        let lost = Rc::new(core::cell::RefCell::new(Vec::new()));
        let app = Box::new(Lost(lost.clone()));
        let config = config(h, PolicyKind::Clock);
        let mut d = Domain::on(config, dev, FRAMES, 0, |d| d.with_app(app));
        // Every page written whole, in order, with incompressible words.
        let mut rng = Rng::new(5);
        let mut shadow: Shadow = vec![vec![0; WORDS]; PAGES];
        for (page, words) in shadow.iter_mut().enumerate() {
            for (w, word) in words.iter_mut().enumerate() {
                *word = rng.next();
                d.store(page, w, *word).expect("store");
            }
        }
        d.driver.flush_cache().expect("flush");
        for (page, words) in shadow.iter().enumerate() {
            for (w, want) in words.iter().enumerate() {
                let want = if page == 3 { 0 } else { *want };
                assert_eq!(d.load(page, w), want, "{}: page {page} word {w}", h.name());
            }
        }
        assert_eq!(*lost.borrow(), [3], "{}", h.name());
        let lost_at: Vec<usize> = d.driver.lost_pages().collect();
        assert_eq!(lost_at, [d.stretch.page_addr(3)], "{}", h.name());
        let s = d.driver.pager_stats().unwrap();
        assert_eq!((s.lost_pages, s.disk.retired_slots), (1, 4), "{}: {s:?}", h.name());
        assert!(s.failed_evictions > 0 && s.disk.retries > 0, "{}: {s:?}", h.name());
        assert_eq!(d.driver.stats().failures, 0);
    }
}

#[test]
fn a_fault_no_victim_can_be_written_for_names_the_page_written() {
    let mut dev = MemBlockDevice::with_pages(2 * PAGES);
    dev.fail_writes(true);
    let mut d =
        Domain::on(config(Hierarchy::LocalPaging, PolicyKind::Clock), dev, FRAMES, 0, |d| d);
    for page in 0..FRAMES {
        d.store(page, 0, page as u64 + 1).unwrap();
    }
    let Err(FaultError::WriteBack { addr }) = d.store(FRAMES, 0, 1) else { panic!("no failure") };
    let written = (addr - d.stretch.base) / PAGE_SIZE;
    assert!(written < FRAMES, "names page {written}, a resident page, not the faulting one");
    for page in 0..FRAMES {
        assert_eq!(d.load(page, 0), page as u64 + 1);
    }
}

/// A domain whose driver pages to remote memory through `remote` in `backing`'s mode, with a
/// swap area of twice the stretch.
fn remote_domain(
    config: PagedConfig,
    backing: crate::Backing,
    remote: Option<Box<dyn crate::RemoteStore>>,
) -> Result<Domain, stretch_driver::DriverError> {
    let reserve = crate::heap_reserve_frames(&config.hierarchy, backing, config.frames, PAGES);
    let mut k = MockKernel::new(config.frames + reserve, 0);
    let window = k.create_managed_stretch(config.window_pages(), RW);
    let device = MemBlockDevice::with_pages(2 * PAGES);
    let driver = PagedDriver::new(config, device, window.base).with_store(backing, remote);
    let stretch = k.create_stretch(PAGES, RW);
    let mut d = Domain { k, driver, stretch };
    d.k.bind_driver(&mut d.driver, stretch)?;
    Ok(d)
}

#[test]
fn every_remote_hierarchy_keeps_every_byte_through_the_remote_store() {
    use pager::backing::{Backing, Mirror};
    use pager::hierarchy::Combination;
    use pager::remote::MemRemoteStore;
    for c in Combination::ALL.into_iter().filter(|c| c.parts().1.is_remote()) {
        let (name, backing) = c.parts();
        let h = match name {
            "local" => Hierarchy::LocalPaging,
            _ => Hierarchy::CompressedCache { pool_bytes: 6 * PAGE_SIZE, codec: Codec::Lz4 },
        };
        let store = match backing.mirror() {
            Mirror::Server => MemRemoteStore::mirrored(),
            _ => MemRemoteStore::new(),
        };
        let config = config(h, PolicyKind::Clock);
        let mut d = remote_domain(config, backing, Some(Box::new(store))).expect("bind");
        assert_eq!(d.driver.backing(), backing);
        let shadow = random_run(&mut d, 9, 1500);
        verify(&mut d, &shadow);
        d.driver.flush_cache().unwrap();
        verify(&mut d, &shadow);
        let s = d.driver.pager_stats().unwrap();
        let st = s.store;
        assert!(st.remote_writes > 0 && st.remote_reads > 0, "{}: {st:?}", c.title());
        assert_eq!((st.fallbacks, s.lost_pages, s.disk.device_reads), (0, 0, 0), "{}", c.title());
        let mirrored_to_disk = backing == Backing::Remote { mirror: Mirror::Disk };
        assert_eq!(s.disk.device_writes > 0, mirrored_to_disk, "{}: {s:?}", c.title());
        let reserve = crate::heap_reserve_frames(&h, backing, FRAMES, PAGES);
        assert_eq!(d.k.peak_held(), (FRAMES + reserve, 0), "{}", c.title());
    }
}

#[test]
fn a_remote_mode_with_no_remote_store_pages_to_the_disk_and_prefetching_is_refused() {
    use pager::backing::{Backing, Mirror};
    let backing = Backing::Remote { mirror: Mirror::None };
    let mut d = remote_domain(config(Hierarchy::LocalPaging, PolicyKind::Clock), backing, None)
        .expect("bind");
    let shadow = random_run(&mut d, 4, 1000);
    verify(&mut d, &shadow);
    let s = d.driver.pager_stats().unwrap();
    assert!(s.disk.device_writes > 0 && s.disk.device_reads > 0, "{s:?}");
    assert_eq!(s.store.remote_writes, 0);
    let prefetching = Hierarchy::PrefetchingCache { evict_pages: 4, fetch_pages: 4 };
    let store = Box::new(pager::remote::MemRemoteStore::new());
    let r = remote_domain(config(prefetching, PolicyKind::Clock), backing, Some(store));
    assert_eq!(r.err(), Some(stretch_driver::DriverError::BadStretch));
}
