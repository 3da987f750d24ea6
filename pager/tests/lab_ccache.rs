//! The compressed-cache lab's graded tests (`docs/labs/ccache.md`): `choose_victim` on
//! hand-made pools, and a program's trace through a pager with a compressed cache, whose disk
//! traffic and hits must land near the reference policy's.

mod lab_ccache {
    use pager::block::MemBlockDevice;
    use pager::cache::expel::{Candidate, choose_victim};
    use pager::cache::{Codec, SUB_PAGE};
    use pager::frames::{Frames, MemFrames};
    use pager::hierarchy::{BuildHierarchy, Hierarchy};
    use pager::pager::{Pager, PagerStats};
    use pager::plan::Outcome;
    use pager::replace::{BuildPolicy, PolicyKind};
    use pager::{PAGE_SIZE, Page, app::NoAppHandler};

    /// A clean entry of `size` bytes holding `page`.
    fn clean(page: usize, size: usize) -> Candidate {
        Candidate { page, dirty: false, size }
    }

    /// A dirty entry of `size` bytes holding `page`.
    fn dirty(page: usize, size: usize) -> Candidate {
        Candidate { page, dirty: true, size }
    }

    /// `choose_victim` on `pool` (oldest first), with what it chose described for a message.
    fn choose(pool: &[Candidate], for_space: bool) -> Option<usize> {
        choose_victim(pool.iter().copied(), for_space)
    }

    #[test]
    fn a_clean_entry_goes_before_a_dirty_one() {
        let pool =
            [dirty(1, SUB_PAGE), dirty(2, 2 * SUB_PAGE), clean(3, SUB_PAGE), clean(4, PAGE_SIZE)];
        for for_space in [true, false] {
            let got = choose(&pool, for_space);
            assert_eq!(
                got,
                Some(3),
                "pool (oldest first) {pool:?}, for_space {for_space}: expected page 3, the oldest \
                 clean entry (the disk holds it: expelling it costs no write), got {got:?}"
            );
        }
        // Among clean entries, the oldest.
        let pool = [clean(7, SUB_PAGE), dirty(8, SUB_PAGE), clean(9, SUB_PAGE)];
        let got = choose(&pool, true);
        assert_eq!(
            got,
            Some(7),
            "pool {pool:?}: expected the oldest clean entry, page 7, got {got:?}"
        );
    }

    #[test]
    fn with_every_entry_dirty_the_oldest_goes() {
        let pool = [dirty(5, 3 * SUB_PAGE), dirty(6, SUB_PAGE), dirty(2, PAGE_SIZE)];
        for for_space in [true, false] {
            let got = choose(&pool, for_space);
            assert_eq!(
                got,
                Some(5),
                "pool (oldest first) {pool:?}, every entry dirty, for_space {for_space}: \
                 expected the oldest, page 5, got {got:?}"
            );
        }
        let got = choose(&[dirty(11, SUB_PAGE)], true);
        assert_eq!(got, Some(11), "a pool of one entry: it goes, got {got:?}");
    }

    #[test]
    fn a_zero_mark_is_not_expelled_to_make_room() {
        // Zero marks take no bytes: expelling one to make room frees nothing.
        let pool = [clean(1, 0), dirty(2, 0), dirty(3, SUB_PAGE), clean(4, 0)];
        let got = choose(&pool, true);
        assert_eq!(
            got,
            Some(3),
            "pool {pool:?}, for_space: the zero marks (size 0) free no room, so the only entry \
             that may go is page 3; got {got:?}"
        );
        // A flush takes every entry, marks too: clean first.
        let got = choose(&pool, false);
        assert_eq!(
            got,
            Some(1),
            "pool {pool:?}, a flush (not for_space): expected page 1, the oldest clean entry, got {got:?}"
        );
    }

    #[test]
    fn nothing_to_choose_gives_none() {
        let got = choose(&[], true);
        assert_eq!(got, None, "an empty pool has nothing to expel, got {got:?}");
        let got = choose(&[], false);
        assert_eq!(got, None, "an empty pool has nothing to expel (flush), got {got:?}");
        let marks = [clean(1, 0), dirty(2, 0)];
        let got = choose(&marks, true);
        assert_eq!(
            got, None,
            "a pool of zero marks {marks:?} frees no room: expected None, got {got:?}"
        );
    }

    // ANCHOR: workload
    /// Frames for the program's stretch.
    const FRAMES: usize = 16;
    /// The program's table: pages written once, then only read.
    const TABLE: usize = 32;
    /// Its work area: pages read and written over and over.
    const WORK: usize = 32;
    /// The compressed pool: 12 pages' bytes.
    const POOL_BYTES: usize = 12 * PAGE_SIZE;

    /// A program's trace through a pager (16 frames, the clock policy) with a compressed cache
    /// (lz4, 12 pages' bytes) over a disk: it fills a table and then, 4,000 times, reads the
    /// next page of the table (round and round) and updates a page of its work area, chosen
    /// at random near the one before. Returns the pager's counts, after checking every page's
    /// contents against a model.
    fn program() -> PagerStats {
        let h = Hierarchy::CompressedCache { pool_bytes: POOL_BYTES, codec: Codec::Lz4 };
        let device = MemBlockDevice::with_pages(4 * (TABLE + WORK));
        let policy = PolicyKind::Clock.build();
        let mut p = h
            .build(FRAMES, device, TABLE + WORK, policy, Box::new(NoAppHandler))
            .expect("a pager with a compressed cache");
        let mut f = MemFrames::with_bits(FRAMES);
        p.set_tracks_dirty(f.tracks_dirty());
        let mut model = vec![0u64; TABLE + WORK];
        for page in 0..TABLE {
            write(&mut p, &mut f, &mut model, page, 1);
        }
        let mut rng = 0x853c_49e6_748f_ea9b_u64;
        let (mut table_at, mut work_at) = (TABLE - 1, TABLE);
        for step in 0..4000u64 {
            table_at = (table_at + 1) % TABLE;
            read(&mut p, &mut f, &model, table_at);
            work_at = near(&mut rng, work_at, TABLE, TABLE + WORK);
            write(&mut p, &mut f, &mut model, work_at, step + 2);
        }
        for page in 0..TABLE + WORK {
            read(&mut p, &mut f, &model, page);
        }
        p.stats()
    }
    // ANCHOR_END: workload

    /// [`program`]'s counts: both tests of the program read one run.
    fn run_program() -> PagerStats {
        static RUN: std::sync::OnceLock<PagerStats> = std::sync::OnceLock::new();
        *RUN.get_or_init(program)
    }

    /// The next page in `lo..hi` after `at`: one of the 8 pages around it 7 times in 8, else
    /// any.
    fn near(rng: &mut u64, at: usize, lo: usize, hi: usize) -> usize {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let r = (*rng >> 8) as usize;
        if !r.is_multiple_of(8) {
            lo + (at - lo + r / 8 % 8 + hi - lo - 4) % (hi - lo)
        } else {
            lo + r / 8 % (hi - lo)
        }
    }

    /// Page `page`'s contents at `version`, different for every page and version: a quarter
    /// of random words, the rest a few repeated ones, so that lz4 makes about a quarter of a
    /// page of it.
    fn contents(page: usize, version: u64, out: &mut Page) {
        let mut x = (page as u64) << 32 ^ version ^ 0x9e37_79b9_7f4a_7c15;
        for (i, word) in out.chunks_exact_mut(8).enumerate() {
            x = x.wrapping_mul(0x5851_f42d_4c95_7f2d).wrapping_add(1442695040888963407);
            let v = if i % 4 == 0 { x } else { (page as u64) << 32 | version };
            word.copy_from_slice(&v.to_le_bytes());
        }
    }

    /// Makes `page` resident through the fault path (for `write`, writable) and returns its
    /// frame.
    fn touch(p: &mut Pager, f: &mut MemFrames, page: usize, write: bool) -> usize {
        if let Some(frame) = f.access(page, write) {
            return frame;
        }
        let step = p.fault(page, write);
        match f.run(p, step) {
            Ok(Outcome::Fault(_)) => {}
            Ok(Outcome::Revoked(_)) => unreachable!("a fault answered as a revocation"),
            Err(e) => panic!("the fault on page {page} failed: {e:?}"),
        }
        f.access(page, write).expect("the faulted page is mapped")
    }

    fn write(p: &mut Pager, f: &mut MemFrames, model: &mut [u64], page: usize, version: u64) {
        let frame = touch(p, f, page, true);
        contents(page, version, f.frame_mut(frame));
        model[page] = version;
    }

    fn read(p: &mut Pager, f: &mut MemFrames, model: &[u64], page: usize) {
        let frame = touch(p, f, page, false);
        let mut want = [0u8; PAGE_SIZE];
        if model[page] != 0 {
            contents(page, model[page], &mut want);
        }
        assert!(f.frame(frame)[..] == want[..], "page {page} came back with the wrong contents");
    }

    /// Checks that `got` lies within `slack` per cent of the reference's `reference`; `more`
    /// and `fewer` say what a count above or below the bounds suggests.
    fn near_reference(what: &str, got: u64, reference: u64, slack: u64, more: &str, fewer: &str) {
        let (lo, hi) = (reference * (100 - slack) / 100, reference * (100 + slack) / 100);
        let why = if got > hi { more } else { fewer };
        assert!(
            (lo..=hi).contains(&got),
            "{what}: {got}, but the reference policy gives {reference} (allowed {lo}-{hi}): {why}"
        );
    }

    #[test]
    fn a_program_writes_to_disk_as_little_as_the_reference() {
        let s = run_program();
        eprintln!(
            "disk writes {} reads {}; pool hits {} of {} fetches, expelled {}",
            s.disk.device_writes,
            s.disk.device_reads,
            s.cache.hits,
            s.cache.fetches,
            s.cache.expelled,
        );
        near_reference(
            "pages written to disk",
            s.disk.device_writes,
            REFERENCE.writes,
            10,
            "a clean entry's contents are on disk already: expel clean entries first, and a \
             dirty one only when no clean one is left",
            "fewer than the reference: does the policy keep dirty entries past the oldest one \
             when no clean entry is left? The lab's policy expels the oldest entry then",
        );
    }

    #[test]
    fn a_program_reads_from_disk_and_hits_the_pool_as_the_reference() {
        let s = run_program();
        near_reference(
            "pages read from disk",
            s.disk.device_reads,
            REFERENCE.reads,
            10,
            "more than the reference: the pool lost pages the program came back to; among \
             clean entries (and, with none, among all) expel the oldest, not the newest",
            "fewer than the reference: does the policy expel dirty entries before clean ones? \
             A dirty entry costs a disk write; a clean one is expelled first",
        );
        near_reference(
            "faults served by the compressed pool",
            s.cache.hits,
            REFERENCE.hits,
            10,
            "more than the reference: does the policy expel dirty entries before clean ones?",
            "fewer than the reference: the pool lost pages the program came back to; expel the \
             oldest clean entry, else the oldest entry",
        );
    }

    /// The reference policy's counts on [`run_program`].
    struct Reference {
        writes: u64,
        reads: u64,
        hits: u64,
    }

    const REFERENCE: Reference = Reference { writes: 987, reads: 4047, hits: 2547 };
}
