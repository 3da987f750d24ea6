//! Host tests: the recorder driver against the mock kernel.

use std::collections::BTreeMap;
use std::vec::Vec;

use stretch_driver::PAGE_SIZE;
use stretch_driver::mock::{MockKernel, Outcome};

use super::*;

const RW: Rights = Rights(Rights::READ.0 | Rights::WRITE.0);

// ANCHOR: setup
/// A domain with `guaranteed` frames, a read-write stretch of `pages` pages, and a recorder
/// with room for `capacity` records bound to it.
fn setup(
    guaranteed: usize,
    pages: usize,
    capacity: usize,
) -> (MockKernel, StretchInfo, RecorderDriver) {
    let mut k = MockKernel::new(guaranteed, 0);
    let s = k.create_stretch(pages, RW);
    let mut d = RecorderDriver::new(capacity);
    k.bind_driver(&mut d, s).unwrap();
    (k, s, d)
}
// ANCHOR_END: setup

// ANCHOR: sequential_test
#[test]
fn sequential_reads_then_writes() {
    let (mut k, s, mut d) = setup(8, 8, 64);
    // Read every page in order: each read faults and maps its page without write.
    for i in 0..8 {
        assert_eq!(k.access(&mut d, &s, s.page_addr(i), Access::Read), Outcome::Resolved);
        assert_eq!(k.mapping(s.page_addr(i)).unwrap().1, Rights::READ);
    }
    // Write the first half: each write faults again, and the driver adds the write right.
    for i in 0..4 {
        assert_eq!(k.access(&mut d, &s, s.page_addr(i) + 8, Access::Write), Outcome::Resolved);
        assert_eq!(k.mapping(s.page_addr(i)).unwrap().1, RW);
    }
    let first = Record { seq: 0, page: 0, access: Access::Read, event: Event::MappedReadOnly };
    let upgrade = Record { seq: 8, page: 0, access: Access::Write, event: Event::Upgraded };
    assert_eq!(d.trace().len(), 12);
    assert_eq!((d.trace()[0], d.trace()[8]), (first, upgrade));
    assert_eq!(
        d.pattern(),
        Pattern { touched: 8, read_only: 4, written: 4, upgrades: 4, sequential: true }
    );
    // One frame per page: an upgrade costs a `protect`, not a frame.
    assert_eq!(k.frames_held(), (8, 0));
    assert_eq!(k.calls().protect, 4);
}
// ANCHOR_END: sequential_test

/// A xorshift generator, so that the random pattern is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn a_random_pattern_is_recorded_exactly() {
    const PAGES: usize = 32;
    let (mut k, s, mut d) = setup(PAGES, PAGES, 1000);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // A model of what the driver should see and do.
    let mut mapping = [Mapping::Absent; PAGES];
    let mut upgraded = [false; PAGES];
    let mut faults = [(0u64, 0u64); PAGES];
    let mut order: Vec<usize> = Vec::new();
    let mut records: Vec<Record> = Vec::new();
    let mut words: BTreeMap<usize, u64> = BTreeMap::new();
    for n in 0..400 {
        let page = rng.below(PAGES);
        let va = s.page_addr(page) + 8 * rng.below(PAGE_SIZE / 8);
        let access = if rng.below(3) == 0 { Access::Write } else { Access::Read };
        let event = match (mapping[page], access) {
            (Mapping::Absent, Access::Write) => Some(Event::MappedWritable),
            (Mapping::Absent, _) => Some(Event::MappedReadOnly),
            (Mapping::ReadOnly, Access::Write) => Some(Event::Upgraded),
            _ => None,
        };
        let outcome = k.access(&mut d, &s, va, access);
        match event {
            None => assert_eq!(outcome, Outcome::Hit, "access {n}"),
            Some(event) => {
                assert_eq!(outcome, Outcome::Resolved, "access {n}");
                if !order.contains(&page) {
                    order.push(page);
                }
                let seq = records.len() as u64;
                records.push(Record { seq, page, access, event });
                if access == Access::Write {
                    faults[page].1 += 1;
                    upgraded[page] |= event == Event::Upgraded;
                    mapping[page] = Mapping::Writable;
                } else {
                    faults[page].0 += 1;
                    mapping[page] = Mapping::ReadOnly;
                }
            }
        }
        // Contents survive upgrades: every load sees the last store to its word.
        if access == Access::Write {
            let value = rng.next();
            k.store_u64(va, value).unwrap();
            words.insert(va, value);
        } else {
            assert_eq!(k.load_u64(va), Ok(words.get(&va).copied().unwrap_or(0)), "access {n}");
        }
    }

    assert_eq!(d.trace(), &records[..]);
    assert_eq!(d.dropped(), 0);
    for page in 0..PAGES {
        let want = PageSummary {
            first_touch: order.iter().position(|p| *p == page),
            read_faults: faults[page].0,
            write_faults: faults[page].1,
            execute_faults: 0,
            written: mapping[page] == Mapping::Writable,
            upgraded: upgraded[page],
            mapping: mapping[page],
            locked: false,
        };
        assert_eq!(d.page_summary(page), Some(want), "page {page}");
    }
    let count = |m| mapping.iter().filter(|x| **x == m).count();
    let sequential = order.windows(2).all(|w| w[1] == w[0] + 1);
    let want = Pattern {
        touched: order.len(),
        read_only: count(Mapping::ReadOnly),
        written: count(Mapping::Writable),
        upgrades: upgraded.iter().filter(|u| **u).count(),
        sequential,
    };
    assert_eq!(d.pattern(), want);
    assert!(!sequential, "a random order is not sequential");
    assert!(want.read_only > 0 && want.upgrades > 0 && want.written > want.upgrades);
    assert_eq!(k.frames_held(), (order.len(), 0));
    assert_eq!(d.stats().faults, records.len() as u64);
    assert_eq!(k.unbind_driver(&mut d, s), 0);
}

#[test]
fn a_full_trace_counts_what_it_drops() {
    let (mut k, s, mut d) = setup(10, 10, 4);
    for i in 0..10 {
        assert_eq!(k.access(&mut d, &s, s.page_addr(i), Access::Write), Outcome::Resolved);
    }
    assert_eq!(d.capacity(), 4);
    assert_eq!(d.trace().len(), 4);
    assert_eq!(d.dropped(), 6);
    let seqs: Vec<u64> = d.trace().iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3], "the trace keeps the first faults");
    // The counters do not depend on the trace.
    assert_eq!(d.page_summary(9).unwrap().first_touch, Some(9));
    assert_eq!(d.page_summary(9).unwrap().write_faults, 1);
    assert_eq!(
        d.pattern(),
        Pattern { touched: 10, read_only: 0, written: 10, upgrades: 0, sequential: true }
    );

    // A trace of no records drops every fault.
    let mut k = MockKernel::new(1, 0);
    let s = k.create_stretch(1, RW);
    let mut d = RecorderDriver::new(0);
    k.bind_driver(&mut d, s).unwrap();
    assert_eq!(k.access(&mut d, &s, s.base, Access::Read), Outcome::Resolved);
    assert!(d.trace().is_empty());
    assert_eq!(d.dropped(), 1);
    assert_eq!(d.pattern().read_only, 1);
}

// ANCHOR: read_only_test
#[test]
fn a_page_read_first_is_mapped_without_write_and_a_store_faults_again() {
    let (mut k, s, mut d) = setup(2, 2, 16);
    let va = s.page_addr(1);
    assert_eq!(k.access(&mut d, &s, va, Access::Read), Outcome::Resolved);
    assert_eq!(k.load_u64(va), Ok(0));
    let (frame, rights) = k.mapping(va).unwrap();
    assert!(!rights.contains(Rights::WRITE));

    // The CPU refuses the store and raises a write fault...
    let refused = k.store_u64(va, 7);
    assert_eq!(refused, Err(Fault { stretch_base: s.base, addr: va, access: Access::Write }));
    // ...which the driver resolves by adding the write right, on the same frame.
    assert_eq!(d.fault(&mut k, refused.unwrap_err()), Ok(()));
    assert_eq!(k.mapping(va), Some((frame, RW)));
    k.store_u64(va, 7).unwrap();
    assert_eq!(k.load_u64(va), Ok(7));

    assert_eq!(d.trace()[1].event, Event::Upgraded);
    let summary = d.page_summary(1).unwrap();
    assert_eq!((summary.read_faults, summary.write_faults), (1, 1));
    assert!(summary.written && summary.upgraded);
    assert_eq!(summary.mapping, Mapping::Writable);
    assert_eq!(d.page_summary(0).unwrap().first_touch, None, "page 0 was never touched");
    assert_eq!(d.page_summary(2), None, "the stretch has two pages");
}
// ANCHOR_END: read_only_test

#[test]
fn fetches_map_without_write_and_odd_stretches_keep_their_rights() {
    let rwx = RW.union(Rights::EXECUTE);
    let mut k = MockKernel::new(4, 0);
    let s = k.create_stretch(1, rwx);
    let mut d = RecorderDriver::new(8);
    k.bind_driver(&mut d, s).unwrap();
    assert_eq!(k.access(&mut d, &s, s.base, Access::Execute), Outcome::Resolved);
    assert_eq!(k.mapping(s.base).unwrap().1, Rights::READ.union(Rights::EXECUTE));
    assert_eq!(k.access(&mut d, &s, s.base, Access::Read), Outcome::Hit);
    assert_eq!(k.access(&mut d, &s, s.base, Access::Write), Outcome::Resolved);
    assert_eq!(k.mapping(s.base).unwrap().1, rwx);
    let summary = d.page_summary(0).unwrap();
    assert_eq!((summary.execute_faults, summary.write_faults), (1, 1));
    assert!(summary.upgraded);

    // A read-only stretch: pages are mapped read-only, and a store never reaches the driver.
    let ro = k.create_stretch(1, Rights::READ);
    let mut d = RecorderDriver::new(8);
    k.bind_driver(&mut d, ro).unwrap();
    assert_eq!(k.access(&mut d, &ro, ro.base, Access::Read), Outcome::Resolved);
    assert_eq!(k.mapping(ro.base).unwrap().1, Rights::READ);
    assert!(matches!(k.access(&mut d, &ro, ro.base, Access::Write), Outcome::Terminated(_)));
    assert_eq!(d.pattern().read_only, 1);

    // Write but not read: a page without write could not be read, so a load or a fetch maps
    // it writable.
    let wx = k.create_stretch(2, Rights::WRITE.union(Rights::EXECUTE));
    let mut d = RecorderDriver::new(8);
    k.bind_driver(&mut d, wx).unwrap();
    assert_eq!(k.access(&mut d, &wx, wx.base, Access::Read), Outcome::Resolved);
    assert_eq!(k.access(&mut d, &wx, wx.page_addr(1), Access::Execute), Outcome::Resolved);
    for page in 0..2 {
        assert_eq!(d.trace()[page].event, Event::MappedWritable);
        for access in [Access::Read, Access::Write, Access::Execute] {
            assert_eq!(k.access(&mut d, &wx, wx.page_addr(page), access), Outcome::Hit);
        }
    }
    let p = d.pattern();
    assert_eq!((p.touched, p.read_only, p.written), (2, 0, 0));
}

#[test]
fn unbind_frees_every_frame_and_keeps_the_record() {
    let (mut k, s, mut d) = setup(6, 8, 32);
    for i in 0..3 {
        assert_eq!(k.access(&mut d, &s, s.page_addr(i), Access::Read), Outcome::Resolved);
    }
    for i in 3..5 {
        assert_eq!(k.access(&mut d, &s, s.page_addr(i), Access::Write), Outcome::Resolved);
    }
    d.lock(&mut k, s.page_addr(6)..s.page_addr(7)).unwrap();
    assert_eq!(k.frames_held(), (6, 0));

    assert_eq!(k.unbind_driver(&mut d, s), 0, "no page left mapped");
    assert_eq!(k.frames_held(), (0, 0));
    let st = d.stats();
    assert_eq!((st.frames_allocated, st.frames_released, st.maps), (6, 6, 6));
    assert_eq!(k.calls().frame_free, 6);
    assert_eq!(d.stretch(), None);
    d.unbind(&mut k);
    assert_eq!(d.stats(), st, "unbinding an unbound driver does nothing");

    // The record of the binding outlives it...
    assert_eq!(
        d.pattern(),
        Pattern { touched: 5, read_only: 3, written: 2, upgrades: 0, sequential: true }
    );
    assert_eq!(d.trace().len(), 5);
    let summary = d.page_summary(6).unwrap();
    assert_eq!(
        (summary.mapping, summary.locked, summary.first_touch),
        (Mapping::Absent, false, None)
    );

    // ...until the next bind starts a new one; sequence numbers go on.
    k.bind_driver(&mut d, s).unwrap();
    assert!(d.trace().is_empty());
    assert_eq!(d.pattern().touched, 0);
    assert_eq!(k.access(&mut d, &s, s.base, Access::Read), Outcome::Resolved);
    assert_eq!(d.trace()[0].seq, 5);
    assert_eq!(k.load_u64(s.base), Ok(0));
}

#[test]
fn a_fault_fails_with_out_of_memory_when_the_guarantee_is_used_up() {
    let (mut k, s, mut d) = setup(2, 4, 16);
    for i in 0..2 {
        assert_eq!(k.access(&mut d, &s, s.page_addr(i), Access::Read), Outcome::Resolved);
    }
    let third = k.access(&mut d, &s, s.page_addr(2), Access::Read);
    assert_eq!(third, Outcome::Failed(FaultError::OutOfMemory));
    assert_eq!(d.trace()[2].event, Event::Failed(FaultError::OutOfMemory));
    assert_eq!(k.mapping(s.page_addr(2)), None);
    // An upgrade needs no frame: it still succeeds.
    assert_eq!(k.access(&mut d, &s, s.base, Access::Write), Outcome::Resolved);
    assert_eq!(d.trace()[3].event, Event::Upgraded);

    assert_eq!(d.stats().failures, 1);
    assert_eq!(k.frames_held(), (2, 0));
    let summary = d.page_summary(2).unwrap();
    assert_eq!((summary.first_touch, summary.read_faults), (Some(2), 1));
    assert_eq!(summary.mapping, Mapping::Absent);
    assert_eq!(
        d.pattern(),
        Pattern { touched: 3, read_only: 1, written: 1, upgrades: 1, sequential: true }
    );
}

#[test]
fn locked_pages_are_mapped_with_every_right_and_never_fault() {
    let (mut k, s, mut d) = setup(4, 4, 16);
    assert_eq!(k.access(&mut d, &s, s.page_addr(1), Access::Read), Outcome::Resolved);
    d.lock(&mut k, s.base..s.page_addr(2)).unwrap();
    for i in 0..2 {
        assert_eq!(k.touch(s.page_addr(i), Access::Write), Ok(()), "page {i}");
        let summary = d.page_summary(i).unwrap();
        assert_eq!((summary.mapping, summary.locked), (Mapping::Writable, true));
    }
    assert_eq!(d.trace().len(), 1, "locking is not a fault");
    assert!(!d.page_summary(1).unwrap().upgraded);
    assert_eq!(d.stats().faults, 1);

    assert_eq!(d.revoke(&mut k, 4), 0);
    assert_eq!(k.frames_held(), (2, 0));
    d.unlock(&mut k, s.base..s.end()).unwrap();
    assert!((0..4).all(|i| !d.page_summary(i).unwrap().locked));
    assert_eq!(d.lock(&mut k, s.base..s.end() + 1), Err(DriverError::OutOfRange));
    assert_eq!(d.unlock(&mut k, s.base - 1..s.base), Err(DriverError::OutOfRange));
}

#[test]
fn a_lock_that_runs_out_of_frames_locks_nothing_new() {
    let (mut k, s, mut d) = setup(2, 4, 16);
    d.lock(&mut k, s.base..s.base + 1).unwrap();
    assert_eq!(d.lock(&mut k, s.base..s.end()), Err(DriverError::OutOfMemory));
    let locked: Vec<bool> = (0..4).map(|i| d.page_summary(i).unwrap().locked).collect();
    assert_eq!(locked, [true, false, false, false]);
    assert_eq!(d.page_summary(1).unwrap().mapping, Mapping::Writable, "the page it mapped stays");
    assert_eq!(d.page_summary(2).unwrap().mapping, Mapping::Absent);
    assert_eq!(k.frames_held(), (2, 0));
}

#[test]
fn faults_it_cannot_resolve() {
    let mut k = MockKernel::new(2, 0);
    let s = k.create_stretch(2, Rights::READ);
    let mut d = RecorderDriver::new(8);
    let f = Fault { stretch_base: s.base, addr: s.base, access: Access::Read };
    assert_eq!(d.fault(&mut k, f), Err(FaultError::NotBound));
    assert_eq!(d.lock(&mut k, s.base..s.end()), Err(DriverError::NotBound));
    assert_eq!(d.unlock(&mut k, s.base..s.end()), Err(DriverError::NotBound));
    assert_eq!(d.revoke(&mut k, 1), 0);
    assert_eq!(d.page_summary(0), None);
    let unaligned = StretchInfo { base: s.base + 8, ..s };
    assert_eq!(d.bind(&mut k, unaligned), Err(DriverError::BadStretch));

    k.bind_driver(&mut d, s).unwrap();
    assert_eq!(d.bind(&mut k, s), Err(DriverError::AlreadyBound));
    assert_eq!(d.fault(&mut k, Fault { addr: s.end(), ..f }), Err(FaultError::WrongStretch));
    let write = Fault { access: Access::Write, ..f };
    assert_eq!(d.fault(&mut k, write), Err(FaultError::Denied));
    d.fault(&mut k, f).unwrap();
    d.fault(&mut k, f).unwrap();
    assert_eq!(k.calls().map, 1, "a second fault on a mapped page maps nothing");

    let events: Vec<(u64, Event)> = d.trace().iter().map(|r| (r.seq, r.event)).collect();
    let want = [
        (2, Event::Failed(FaultError::Denied)),
        (3, Event::MappedReadOnly),
        (4, Event::AlreadyMapped),
    ];
    assert_eq!(events, want, "faults outside the stretch are not recorded");
    assert_eq!(d.stats().failures, 3);
    assert_eq!(d.stats().faults, 5);
}
