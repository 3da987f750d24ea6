//! The lab `clock`'s graded test on a real access trace (`docs/labs/clock.md`): a stretch
//! paged by the paged driver against the mock kernel, whose accesses set the accessed bits as
//! the hardware does, with the clock (`pager/src/replace/clock.rs`) harvesting them at every
//! eviction; the same trace under FIFO, for comparison. Every byte is checked.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use pager::block::MemBlockDevice;
use pager::hierarchy::Hierarchy;
use pager::replace::{PolicyKind, ReplacementPolicy};
use stretch_driver::mock::{MockKernel, Outcome};
use stretch_driver::{Access, Rights, StretchInfo};

use crate::{PagedConfig, PagedDriver};

// ANCHOR: trace
/// The frames the stretch is paged on.
const FRAMES: usize = 16;
/// The stretch's pages.
const PAGES: usize = 64;
/// The hot set: pages `0..HOT`, used all the time.
const HOT: usize = 4;
/// The loop: pages `HOT..HOT + LOOP`, each written once a round; more than the frames hold.
const LOOP: usize = 24;
/// Rounds of the loop.
const ROUNDS: u64 = 12;
/// The faults of the trace under the reference clock, harvesting at every eviction.
const CLOCK_FAULTS: u64 = 316;
/// The faults of the trace under FIFO.
const FIFO_FAULTS: u64 = 396;

// ANCHOR_END: trace

/// First in, first out: the victim is the page resident longest, whatever its accesses.
#[derive(Default)]
struct Fifo {
    pages: VecDeque<usize>,
    locked: Vec<usize>,
}

impl ReplacementPolicy for Fifo {
    fn mapped(&mut self, page: usize) {
        self.pages.push_back(page);
    }
    fn accessed(&mut self, _page: usize) {}
    fn unmapped(&mut self, page: usize) {
        self.pages.retain(|&p| p != page);
    }
    fn locked(&mut self, page: usize) {
        self.locked.push(page);
    }
    fn unlocked(&mut self, page: usize) {
        self.locked.retain(|&p| p != page);
    }
    fn victim(&mut self) -> Option<usize> {
        self.pages.iter().copied().find(|p| !self.locked.contains(p))
    }
}

/// The mock kernel, the driver and its stretch.
struct Run {
    k: MockKernel,
    driver: PagedDriver<MemBlockDevice>,
    stretch: StretchInfo,
}

impl Run {
    /// The stretch paged with local paging on [`FRAMES`] frames, harvesting the accessed bits
    /// at every eviction, under `policy` (the clock if `None`).
    fn new(policy: Option<Box<dyn ReplacementPolicy>>) -> Run {
        let rw = Rights(Rights::READ.0 | Rights::WRITE.0);
        let config = PagedConfig {
            hierarchy: Hierarchy::LocalPaging,
            policy: PolicyKind::Clock,
            frames: FRAMES,
            ahead: 1,
            harvest: 1,
        };
        // Enough guaranteed frames for the driver's and its heap's reserve.
        let mut k = MockKernel::new(FRAMES + 64, 0);
        let window = k.create_managed_stretch(config.window_pages(), rw);
        let mut driver = PagedDriver::new(config, MemBlockDevice::with_pages(PAGES), window.base);
        if let Some(policy) = policy {
            driver = driver.with_policy(policy);
        }
        let stretch = k.create_stretch(PAGES, rw);
        let mut run = Run { k, driver, stretch };
        run.k.bind_driver(&mut run.driver, stretch).expect("bind");
        run
    }

    /// Makes an access to word 0 of `page` as the CPU would (faulting if it is not mapped).
    fn touch(&mut self, page: usize, access: Access) -> usize {
        let va = self.stretch.page_addr(page);
        match self.k.access(&mut self.driver, &self.stretch, va, access) {
            Outcome::Hit | Outcome::Resolved => va,
            other => panic!("an access to page {page} failed: {other:?}"),
        }
    }

    fn store(&mut self, page: usize, value: u64) {
        let va = self.touch(page, Access::Write);
        self.k.store_u64(va, value).expect("mapped writable");
    }

    fn load(&mut self, page: usize) -> u64 {
        let va = self.touch(page, Access::Read);
        self.k.load_u64(va).expect("mapped readable")
    }

    /// The trace: a hot set of [`HOT`] pages used between every two pages of a loop of
    /// [`LOOP`] pages, which together are more than the frames; every value read is checked,
    /// then every page. Returns the faults, and the pages whose value was wrong.
    fn trace(&mut self) -> (u64, Vec<usize>) {
        let mut want = vec![0u64; PAGES];
        let mut wrong = Vec::new();
        let mut check = |page: usize, got: u64, want: &[u64]| {
            if got != want[page] && !wrong.contains(&page) {
                wrong.push(page);
            }
        };
        for round in 0..ROUNDS {
            for (i, page) in (HOT..HOT + LOOP).enumerate() {
                let value = (round << 32) | page as u64;
                self.store(page, value);
                want[page] = value;
                // Two hot pages after each page of the loop: every hot page twice in four.
                for hot in [(2 * i) % HOT, (2 * i + 1) % HOT] {
                    let got = self.load(hot);
                    check(hot, got, &want);
                    if i % 3 == 0 {
                        want[hot] += 1;
                        self.store(hot, want[hot]);
                    }
                }
            }
        }
        for page in 0..HOT + LOOP {
            let got = self.load(page);
            check(page, got, &want);
        }
        (self.driver.pager_stats().expect("bound").faults, wrong)
    }
}

#[test]
fn a_hot_set_beside_a_loop_faults_less_than_under_fifo() {
    let (fifo, wrong) = Run::new(Some(Box::<Fifo>::default())).trace();
    assert!(wrong.is_empty(), "FIFO read wrong values from pages {wrong:?}");
    assert_eq!(fifo, FIFO_FAULTS, "the trace under FIFO changed");
    let (clock, wrong) = Run::new(None).trace();
    assert!(
        wrong.is_empty(),
        "under your clock the stretch read wrong values from pages {wrong:?}: the clock chose a \
         victim that was not resident or was locked, or forgot a page"
    );
    let hint = if clock == fifo {
        "as many as FIFO: do referenced pages get their second chance?"
    } else if clock > fifo {
        "more than FIFO, which ignores the accessed bits: does the hand skip the pages it should \
         take, or keep the referenced ones?"
    } else {
        "fewer than FIFO, but not the second-chance clock's count: check where new pages join \
         the ring and where the hand goes when its page leaves"
    };
    assert_eq!(
        clock, CLOCK_FAULTS,
        "{HOT} hot pages used between every two of a loop over {LOOP} pages, on {FRAMES} frames, \
         for {ROUNDS} rounds: the second-chance clock, told of the accessed bits at every \
         eviction, keeps the hot pages resident and takes {CLOCK_FAULTS} faults, and FIFO \
         {FIFO_FAULTS}; your clock took {clock}, {hint}"
    );
}
