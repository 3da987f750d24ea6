//! Host tests: the physical driver against the mock kernel.

use std::vec;

use stretch_driver::mock::{MockKernel, Outcome};
use stretch_driver::{Access, PAGE_SIZE};

use super::*;

const RW: Rights = Rights(Rights::READ.0 | Rights::WRITE.0);

/// A mock with the contract, a read-write stretch of `pages` pages and a bound driver.
fn setup(
    guaranteed: usize,
    optimistic: usize,
    pages: usize,
    pool: usize,
) -> (MockKernel, StretchInfo, PhysicalDriver) {
    let mut k = MockKernel::new(guaranteed, optimistic);
    let s = k.create_stretch(pages, RW);
    let mut d = PhysicalDriver::with_pool(pool);
    k.bind_driver(&mut d, s).unwrap();
    (k, s, d)
}

fn page_is_zero(k: &mut MockKernel, va: usize) -> bool {
    let mut buf = vec![0xa5u8; PAGE_SIZE];
    k.read(va, &mut buf).unwrap();
    buf.iter().all(|b| *b == 0)
}

fn pattern(page: usize, word: usize) -> u64 {
    ((page as u64) << 32) | (word as u64 ^ 0x5a5a)
}

#[test]
fn a_thousand_pages_fault_once_each() {
    let (mut k, s, mut d) = setup(600, 400, 1000, 0);
    for i in 0..1000 {
        let va = s.page_addr(i);
        assert_eq!(k.access(&mut d, &s, va + 8 * (i % 512), Access::Read), Outcome::Resolved);
        assert!(page_is_zero(&mut k, va), "page {i} is zero before it is written");
        for word in [0, i % 512, 511] {
            k.store_u64(va + 8 * word, pattern(i, word)).unwrap();
        }
        let (g, o) = k.frames_held();
        assert!(g <= 600 && o <= 400);
    }
    for i in 0..1000 {
        let va = s.page_addr(i);
        assert_eq!(k.access(&mut d, &s, va, Access::Write), Outcome::Hit);
        for word in [0, i % 512, 511] {
            assert_eq!(k.load_u64(va + 8 * word), Ok(pattern(i, word)));
        }
        assert_eq!(k.load_u64(va + 8), Ok(if i % 512 == 1 { pattern(i, 1) } else { 0 }));
    }
    let st = d.stats();
    assert_eq!(st.faults, 1000);
    assert_eq!(st.maps, 1000);
    assert_eq!(st.failures, 0);
    assert_eq!(k.calls().map, 1000);
    assert_eq!(k.calls().faults, 1000);
    assert_eq!(k.frames_held(), (600, 400));
    assert_eq!(k.peak_held(), (600, 400));
    assert_eq!(d.resident(), 1000);
}

#[test]
fn guaranteed_then_optimistic_then_the_fault_fails() {
    let (mut k, s, mut d) = setup(3, 2, 6, 0);
    for i in 0..5 {
        assert_eq!(k.access(&mut d, &s, s.page_addr(i), Access::Write), Outcome::Resolved);
        let kind = k.frame_kind(k.mapping(s.page_addr(i)).unwrap().0).unwrap();
        let want = if i < 3 { FrameKind::Guaranteed } else { FrameKind::Optimistic };
        assert_eq!(kind, want, "page {i}");
    }
    assert_eq!(
        k.access(&mut d, &s, s.page_addr(5), Access::Write),
        Outcome::Failed(FaultError::OutOfMemory)
    );
    assert_eq!(k.frames_held(), (3, 2));
    assert_eq!(d.stats().failures, 1);
    assert_eq!(d.stats().faults, 6);
}

#[test]
fn revoke_releases_optimistic_frames_first_and_their_pages_come_back_zeroed() {
    let (mut k, s, mut d) = setup(2, 3, 5, 0);
    for i in 0..5 {
        assert_eq!(k.access(&mut d, &s, s.page_addr(i), Access::Write), Outcome::Resolved);
        k.store_u64(s.page_addr(i), 100 + i as u64).unwrap();
    }
    assert_eq!(d.revoke(&mut k, 2), 2);
    assert_eq!(k.frames_held(), (2, 1));
    // Pages 2 and 3 were on optimistic frames: they fault again and read zero.
    for i in [2, 3] {
        assert!(k.touch(s.page_addr(i), Access::Read).is_err(), "page {i} was revoked");
        assert_eq!(k.access(&mut d, &s, s.page_addr(i), Access::Read), Outcome::Resolved);
        assert_eq!(k.load_u64(s.page_addr(i)), Ok(0));
    }
    for i in [0, 1, 4] {
        assert_eq!(k.load_u64(s.page_addr(i)), Ok(100 + i as u64), "page {i} kept its contents");
    }
    // Asking for more than there is releases every optimistic frame and nothing else.
    assert_eq!(d.revoke(&mut k, 10), 3);
    assert_eq!(k.frames_held(), (2, 0));
    assert_eq!(d.resident(), 2);
    assert_eq!(d.revoke(&mut k, 10), 0, "guaranteed pages stay");
    assert_eq!(d.stats().frames_released, 5);
    assert_eq!(d.stats().faults, 7);
}

#[test]
fn the_pool_is_used_first_and_revoked_after_optimistic_pages() {
    let (mut k, s, mut d) = setup(4, 1, 8, 3);
    assert_eq!(k.frames_held(), (3, 0));
    assert_eq!(d.pool_left(), 3);
    for i in 0..2 {
        assert_eq!(k.access(&mut d, &s, s.page_addr(i), Access::Read), Outcome::Resolved);
        assert!(page_is_zero(&mut k, s.page_addr(i)));
    }
    assert_eq!(d.stats().frames_allocated, 3, "faults took pool frames");
    assert_eq!(d.pool_left(), 1);
    k.access(&mut d, &s, s.page_addr(2), Access::Read);
    k.access(&mut d, &s, s.page_addr(3), Access::Read);
    k.access(&mut d, &s, s.page_addr(4), Access::Read);
    assert_eq!(k.frames_held(), (4, 1));
    assert_eq!(d.pool_left(), 0);
    // One optimistic page and no pool frame left to release.
    assert_eq!(d.revoke(&mut k, 3), 1);

    let (mut k, s, mut d) = setup(4, 1, 8, 3);
    assert_eq!(k.access(&mut d, &s, s.base, Access::Read), Outcome::Resolved);
    assert_eq!(d.revoke(&mut k, 5), 2, "the unused pool frames");
    assert_eq!(k.frames_held(), (1, 0));
    assert_eq!(k.unbind_driver(&mut d, s), 0);
    assert_eq!(k.frames_held(), (0, 0));
}

#[test]
fn bind_fails_cleanly_when_the_pool_does_not_fit() {
    let mut k = MockKernel::new(2, 10);
    let s = k.create_stretch(4, RW);
    let mut d = PhysicalDriver::with_pool(3);
    assert_eq!(k.bind_driver(&mut d, s), Err(DriverError::OutOfMemory));
    assert_eq!(k.frames_held(), (0, 0));
    assert_eq!(d.stretch(), None);
    let mut d = PhysicalDriver::new();
    k.bind_driver(&mut d, s).unwrap();
    assert_eq!(d.bind(&mut k, s), Err(DriverError::AlreadyBound));
}

#[test]
fn lock_moves_pages_to_guaranteed_frames_and_keeps_them() {
    let (mut k, s, mut d) = setup(3, 2, 4, 0);
    k.access(&mut d, &s, s.page_addr(0), Access::Write);
    k.access(&mut d, &s, s.page_addr(1), Access::Write);
    // Hold the last guaranteed frame so that page 2 lands on an optimistic one.
    let held = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    k.access(&mut d, &s, s.page_addr(2), Access::Write);
    k.store_u64(s.page_addr(2) + 16, 77).unwrap();
    let kind = |k: &MockKernel, va| k.frame_kind(k.mapping(va).unwrap().0).unwrap();
    assert_eq!(kind(&k, s.page_addr(2)), FrameKind::Optimistic);
    assert_eq!(d.lock(&mut k, s.page_addr(2)..s.page_addr(2) + 1), Err(DriverError::OutOfMemory));
    assert_eq!(d.locked(), 0);

    k.frame_free(held).unwrap();
    d.lock(&mut k, s.page_addr(2)..s.page_addr(3)).unwrap();
    assert_eq!(kind(&k, s.page_addr(2)), FrameKind::Guaranteed);
    assert_eq!(k.load_u64(s.page_addr(2) + 16), Ok(77), "the contents moved with the page");
    assert_eq!(k.frames_held(), (3, 0));
    assert_eq!(d.locked(), 1);
    assert_eq!(d.revoke(&mut k, 4), 0);
    assert_eq!(k.load_u64(s.page_addr(2) + 16), Ok(77));
    d.unlock(&mut k, s.base..s.end()).unwrap();
    assert_eq!(d.locked(), 0);
    assert_eq!(d.lock(&mut k, s.base..s.end() + 1), Err(DriverError::OutOfRange));
}

#[test]
fn a_failed_lock_unlocks_what_it_locked() {
    let (mut k, s, mut d) = setup(1, 4, 4, 0);
    assert_eq!(d.lock(&mut k, s.base..s.page_addr(2)), Err(DriverError::OutOfMemory));
    assert_eq!(d.locked(), 0);
    assert_eq!(d.resident(), 1, "the page it mapped stays");
    d.lock(&mut k, s.base..s.base + 8).unwrap();
    assert_eq!(d.locked(), 1);
    assert_eq!(d.stats().faults, 0, "locking maps without faults");
}

#[test]
fn fault_errors() {
    let mut k = MockKernel::new(2, 0);
    let s = k.create_stretch(2, RW);
    let mut d = PhysicalDriver::new();
    let f = Fault { stretch_base: s.base, addr: s.base, access: Access::Read };
    assert_eq!(d.fault(&mut k, f), Err(FaultError::NotBound));
    assert_eq!(d.lock(&mut k, s.base..s.end()), Err(DriverError::NotBound));
    k.bind_driver(&mut d, s).unwrap();
    let outside = Fault { addr: s.end(), ..f };
    assert_eq!(d.fault(&mut k, outside), Err(FaultError::WrongStretch));
    let exec = Fault { access: Access::Execute, ..f };
    assert_eq!(d.fault(&mut k, exec), Err(FaultError::Denied));
    d.fault(&mut k, f).unwrap();
    d.fault(&mut k, f).unwrap();
    assert_eq!(k.calls().map, 1, "a second fault on a mapped page maps nothing");
    assert_eq!(d.stats().failures, 3);
}

#[test]
fn unbind_releases_everything() {
    let (mut k, s, mut d) = setup(3, 3, 10, 2);
    for i in 0..6 {
        k.access(&mut d, &s, s.page_addr(i), Access::Write);
    }
    assert_eq!(k.frames_held(), (3, 3));
    assert_eq!(k.unbind_driver(&mut d, s), 0);
    assert_eq!(k.frames_held(), (0, 0));
    assert_eq!(d.resident(), 0);
    assert_eq!(d.stretch(), None);
    assert_eq!(d.revoke(&mut k, 1), 0);
    k.bind_driver(&mut d, s).unwrap();
    assert_eq!(k.access(&mut d, &s, s.base, Access::Read), Outcome::Resolved);
    assert!(page_is_zero(&mut k, s.base), "a new binding starts from zeroed pages");
}
