//! The swap lab's graded tests (`docs/labs/swap.md`): the swap driver against the host mock of
//! the kernel. Each test says, when it fails, what it expected and what the driver did.

mod lab_swap {
    use stretch_driver::mock::{MockKernel, Outcome};
    use stretch_driver::{
        Access, DriverError, Fault, FaultError, MemoryKernel, PAGE_SIZE, Rights, StretchDriver,
        StretchInfo,
    };
    use swap_driver::SwapDriver;

    const RW: Rights = Rights(Rights::READ.0 | Rights::WRITE.0);
    /// Words a page.
    const WORDS: usize = PAGE_SIZE / 8;

    // ANCHOR: setup
    /// A domain whose contract holds `contract` guaranteed frames, a read-write stretch of
    /// `pages` pages, and a swap driver with a budget of `frames` frames and `slots` slots
    /// bound to it.
    fn setup(
        contract: usize,
        frames: usize,
        slots: usize,
        pages: usize,
    ) -> (MockKernel, StretchInfo, SwapDriver) {
        let mut k = MockKernel::new(contract, 0);
        let s = k.create_stretch(pages, RW);
        let mut d = SwapDriver::new(frames, slots);
        k.bind_driver(&mut d, s).expect("bind a swap driver with frames in the contract");
        (k, s, d)
    }
    // ANCHOR_END: setup

    /// Touches `va` with `access` through the fault path, and panics with what went wrong
    /// unless the access succeeds.
    fn touch(k: &mut MockKernel, d: &mut SwapDriver, s: &StretchInfo, va: usize, access: Access) {
        match k.access(d, s, va, access) {
            Outcome::Hit | Outcome::Resolved => {}
            Outcome::Failed(e) => {
                panic!("a {access:?} of page {} failed with `{e}`", (va - s.base) / PAGE_SIZE)
            }
            Outcome::Refaulted(_) => panic!(
                "fault() returned Ok for a {access:?} of page {}, but the page is still not \
                 mapped with that access: map the faulting page before returning Ok",
                (va - s.base) / PAGE_SIZE
            ),
            Outcome::Terminated(_) => unreachable!("the stretch is bound and allows the access"),
        }
    }

    /// Stores `value` at `va`, faulting the page in first if it has to.
    fn store(k: &mut MockKernel, d: &mut SwapDriver, s: &StretchInfo, va: usize, value: u64) {
        touch(k, d, s, va, Access::Write);
        k.store_u64(va, value).expect("the page was just made writable");
    }

    /// Loads the word at `va`, faulting the page in first if it has to.
    fn load(k: &mut MockKernel, d: &mut SwapDriver, s: &StretchInfo, va: usize) -> u64 {
        touch(k, d, s, va, Access::Read);
        k.load_u64(va).expect("the page was just made readable")
    }

    /// What the test writes at word `word` of page `page` in round `round`: never 0, and
    /// different for every word, page and round.
    fn pattern(page: usize, word: usize, round: u64) -> u64 {
        let x = (page as u64) << 32 | (word as u64) << 8 | round;
        x.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
    }

    /// A checksum of page `page`'s every word, read through the fault path.
    fn checksum(k: &mut MockKernel, d: &mut SwapDriver, s: &StretchInfo, page: usize) -> u64 {
        let base = s.page_addr(page);
        touch(k, d, s, base, Access::Read);
        (0..WORDS).fold(0u64, |sum, w| {
            let word = k.load_u64(base + 8 * w).expect("the page is resident while it is read");
            sum.rotate_left(5) ^ word
        })
    }

    /// What `checksum` gives for a page whose words are `word(w)`.
    fn expected_checksum(word: impl Fn(usize) -> u64) -> u64 {
        (0..WORDS).fold(0u64, |sum, w| sum.rotate_left(5) ^ word(w))
    }

    /// A small deterministic random sequence (xorshift64).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    #[test]
    fn every_byte_survives_eviction() {
        // 8 frames for 32 pages: four times the budget, every page written whole, then read
        // back whole; then random reads and writes of single words against a model.
        const FRAMES: usize = 8;
        const PAGES: usize = 4 * FRAMES;
        let (mut k, s, mut d) = setup(FRAMES, FRAMES, PAGES, PAGES);
        for page in 0..PAGES {
            for w in 0..WORDS {
                store(&mut k, &mut d, &s, s.page_addr(page) + 8 * w, pattern(page, w, 1));
            }
        }
        for page in 0..PAGES {
            let got = checksum(&mut k, &mut d, &s, page);
            let want = expected_checksum(|w| pattern(page, w, 1));
            if got != want {
                let first = (0..WORDS)
                    .map(|w| (w, k.load_u64(s.page_addr(page) + 8 * w).unwrap()))
                    .find(|&(w, v)| v != pattern(page, w, 1));
                panic!(
                    "page {page} came back wrong after being evicted (checksum {got:#x}, \
                     expected {want:#x}); first wrong word (index, value): {first:x?}: save a \
                     victim's bytes to its slot before its frame is reused, and copy them back \
                     when the page is faulted in again"
                );
            }
        }
        let mut model: Vec<Vec<u64>> =
            (0..PAGES).map(|p| (0..WORDS).map(|w| pattern(p, w, 1)).collect()).collect();
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for round in 2..3000u64 {
            let (page, w) = (rng.below(PAGES), rng.below(WORDS));
            let va = s.page_addr(page) + 8 * w;
            if rng.below(3) == 0 {
                store(&mut k, &mut d, &s, va, pattern(page, w, round));
                model[page][w] = pattern(page, w, round);
            } else {
                let got = load(&mut k, &mut d, &s, va);
                assert_eq!(
                    got, model[page][w],
                    "step {round}: word {w} of page {page} reads {got:#x}, but {:#x} was written \
                     there last",
                    model[page][w]
                );
            }
        }
        for (page, words) in model.iter().enumerate() {
            let got = checksum(&mut k, &mut d, &s, page);
            assert_eq!(
                got,
                expected_checksum(|w| words[w]),
                "page {page}'s checksum after 3,000 random reads and writes is wrong"
            );
        }
        assert!(
            d.swap_stats().evictions >= (PAGES - FRAMES) as u64,
            "32 pages were used on 8 frames, yet only {} evictions were counted",
            d.swap_stats().evictions
        );
    }

    #[test]
    fn a_page_never_written_reads_as_zeros() {
        // Pages 0-3 written on the 4 frames; pages 4-11 then read: each needs a frame a
        // written page had, and must read as zeros all the same.
        let (mut k, s, mut d) = setup(4, 4, 12, 12);
        for page in 0..4 {
            for w in 0..WORDS {
                store(&mut k, &mut d, &s, s.page_addr(page) + 8 * w, pattern(page, w, 1));
            }
        }
        for page in 4..12 {
            touch(&mut k, &mut d, &s, s.page_addr(page), Access::Read);
            for w in 0..WORDS {
                let got = k.load_u64(s.page_addr(page) + 8 * w).unwrap();
                assert_eq!(
                    got, 0,
                    "page {page} was never written, but its word {w} reads {got:#x}: its frame \
                     was taken from an evicted page and still holds that page's bytes; fill a \
                     page that has no slot with zeros"
                );
            }
        }
        // And the written pages are still whole.
        for page in 0..4 {
            assert_eq!(
                checksum(&mut k, &mut d, &s, page),
                expected_checksum(|w| pattern(page, w, 1)),
                "page {page}, written and then evicted, came back wrong"
            );
        }
    }

    #[test]
    fn eviction_only_when_frames_are_short() {
        const FRAMES: usize = 6;
        let (mut k, s, mut d) = setup(FRAMES, FRAMES, 16, 16);
        // As many pages as frames: every fault finds a free frame; nothing is evicted.
        for page in 0..FRAMES {
            store(&mut k, &mut d, &s, s.page_addr(page), pattern(page, 0, 1));
            assert_eq!(
                (d.swap_stats().evictions, k.calls().unmap, d.swapped_out()),
                (0, 0, 0),
                "after {} pages touched on {FRAMES} frames, the driver evicted (evictions, \
                 unmaps, pages in the swap area): evict only when no frame is free",
                page + 1
            );
        }
        // A second touch of a resident page does not fault at all.
        let faults = k.calls().faults;
        for page in 0..FRAMES {
            assert_eq!(
                load(&mut k, &mut d, &s, s.page_addr(page)),
                pattern(page, 0, 1),
                "page {page} reads back wrong"
            );
        }
        assert_eq!(k.calls().faults, faults, "resident pages faulted again");
        // From then on, each new page costs exactly one eviction.
        for (n, page) in (FRAMES..16).enumerate() {
            store(&mut k, &mut d, &s, s.page_addr(page), pattern(page, 0, 1));
            let evictions = d.swap_stats().evictions;
            assert_eq!(
                evictions,
                n as u64 + 1,
                "page {page} was the {}th page touched on {FRAMES} frames, so {} evictions were \
                 due, but the driver counts {evictions}: evict one page a fault that finds no \
                 free frame (and count it in swap_stats.evictions)",
                page + 1,
                n + 1
            );
            assert_eq!(
                (d.resident(), d.swapped_out()),
                (FRAMES, n + 1),
                "after page {page}: (resident pages, pages in the swap area)"
            );
        }
        // The victim is the page resident longest: page 0, then 1, ...
        for page in 0..16 - FRAMES {
            assert!(
                d.is_swapped(page),
                "page {page} was among the first mapped, so it should have been evicted first"
            );
        }
        // A page brought back gives its slot back.
        assert_eq!(
            load(&mut k, &mut d, &s, s.page_addr(0)),
            pattern(0, 0, 1),
            "page 0 came back from its slot wrong"
        );
        assert!(!d.is_swapped(0), "page 0 is resident again, but still holds a slot");
        assert_eq!(d.swap_stats().swap_ins, 1, "one page came back from the swap area");
        assert_eq!(d.swapped_out(), 16 - FRAMES, "one slot freed, one taken by the new victim");
    }

    #[test]
    fn never_more_frames_than_its_budget() {
        // The contract would give 64 frames; the driver's budget is 5, and it must live on them.
        const BUDGET: usize = 5;
        let (mut k, s, mut d) = setup(64, BUDGET, 40, 40);
        let held = k.frames_held().0;
        assert_eq!(
            held, BUDGET,
            "the driver holds {held} frames after bind; its budget is {BUDGET}"
        );
        let mut rng = Rng(7);
        for round in 1..1500u64 {
            let page = rng.below(40);
            store(&mut k, &mut d, &s, s.page_addr(page) + 8 * rng.below(WORDS), round);
            let held = k.frames_held();
            assert!(
                held.0 <= BUDGET && held.1 == 0,
                "after {round} writes the driver holds {held:?} (guaranteed, optimistic) frames; \
                 its budget is {BUDGET} guaranteed: evict to reuse a frame, never take a new one"
            );
        }
        assert_eq!(
            k.peak_held(),
            (BUDGET, 0),
            "the most frames ever held (guaranteed, optimistic)"
        );
        assert_eq!(k.calls().frame_alloc, BUDGET as u64, "frame_alloc calls: the budget, at bind");
        assert!(
            k.mapped_pages() <= BUDGET,
            "{} pages mapped on a budget of {BUDGET}",
            k.mapped_pages()
        );
        // Unbinding gives every frame back and leaves nothing mapped.
        assert_eq!(k.unbind_driver(&mut d, s), 0, "pages left mapped after unbind");
        assert_eq!(k.frames_held(), (0, 0), "frames held after unbind");
    }

    #[test]
    fn a_bad_access_is_refused() {
        let (mut k, s, mut d) = setup(2, 2, 7, 8);
        // A fault the driver must refuse, and what it must answer.
        let other = k.create_stretch(1, RW);
        let cases = [
            (
                "a fault naming another stretch",
                Fault { stretch_base: other.base, addr: other.base, access: Access::Write },
                FaultError::WrongStretch,
            ),
            (
                "a fault past the stretch's end",
                Fault { stretch_base: s.base, addr: s.end(), access: Access::Read },
                FaultError::WrongStretch,
            ),
            (
                "an execute fault in a stretch without execute",
                Fault { stretch_base: s.base, addr: s.base, access: Access::Execute },
                FaultError::Denied,
            ),
        ];
        for (what, fault, want) in cases {
            let got = d.fault(&mut k, fault);
            assert_eq!(got, Err(want), "{what}: fault() should fail with {want:?}");
        }
        assert_eq!(k.mapped_pages(), 0, "a refused fault mapped a page");
        assert_eq!(d.stats().failures, 3, "refused faults are counted as failures");
        // The same driver still serves good faults.
        store(&mut k, &mut d, &s, s.page_addr(7), 7);
        assert_eq!(load(&mut k, &mut d, &s, s.page_addr(7)), 7, "page 7 after refused faults");
        // A stretch with more pages than the budget and the slots can hold (with a slot to
        // spare), and one that cannot be written, are refused at bind, holding nothing.
        let mut k2 = MockKernel::new(8, 0);
        let mut d2 = SwapDriver::new(2, 8);
        let big = k2.create_stretch(10, RW);
        assert_eq!(k2.bind_driver(&mut d2, big), Err(DriverError::BadStretch), "10 pages, 2 + 8");
        let read_only = k2.create_stretch(2, Rights::READ);
        assert_eq!(k2.bind_driver(&mut d2, read_only), Err(DriverError::BadStretch), "read-only");
        assert_eq!(k2.frames_held(), (0, 0), "frames held after refused binds");
        // An unbound driver refuses every fault.
        k.unbind_driver(&mut d, s);
        let unbound =
            d.fault(&mut k, Fault { stretch_base: s.base, addr: s.base, access: Access::Read });
        assert_eq!(unbound, Err(FaultError::NotBound), "a fault on an unbound driver");
    }

    #[test]
    fn a_locked_page_is_never_evicted() {
        let (mut k, s, mut d) = setup(3, 3, 16, 16);
        store(&mut k, &mut d, &s, s.page_addr(1), 0x1111);
        d.lock(&mut k, s.page_addr(0)..s.page_addr(2)).expect("lock pages 0 and 1");
        let frames = [k.mapping(s.page_addr(0)), k.mapping(s.page_addr(1))];
        assert!(frames.iter().all(Option::is_some), "locked pages are resident");
        for round in 0..4 {
            for page in 2..16 {
                store(&mut k, &mut d, &s, s.page_addr(page), pattern(page, 0, round));
                let now = [k.mapping(s.page_addr(0)), k.mapping(s.page_addr(1))];
                assert_eq!(
                    now, frames,
                    "page {page} was faulted in and a locked page (0 or 1) lost its frame: \
                     choose the oldest resident page that is not locked"
                );
            }
        }
        assert_eq!(load(&mut k, &mut d, &s, s.page_addr(1)), 0x1111, "locked page 1 reads wrong");
        // With every frame locked, a fault finds nothing to evict: an error, not a panic.
        d.lock(&mut k, s.page_addr(2)..s.page_addr(3)).expect("lock page 2");
        let refused = k.access(&mut d, &s, s.page_addr(9), Access::Read);
        assert_eq!(
            refused,
            Outcome::Failed(FaultError::OutOfMemory),
            "every frame holds a locked page: the fault should fail with OutOfMemory"
        );
        // Unlocked, they can go again.
        d.unlock(&mut k, s.page_addr(0)..s.page_addr(3)).unwrap();
        assert_eq!(
            load(&mut k, &mut d, &s, s.page_addr(9)),
            pattern(9, 0, 3),
            "page 9, once its frames are unlocked, reads back wrong"
        );
        assert_eq!(d.lock(&mut k, s.end()..s.end() + 1), Err(DriverError::OutOfRange));
    }
}
