//! Host tests of [`DriverCore`] against the mock kernel.

use std::vec;
use std::vec::Vec;

use super::*;
use crate::mock::MockKernel;
use crate::{Access, PAGE_SIZE};

const RW: Rights = Rights(Rights::READ.0 | Rights::WRITE.0);

/// A domain with `guaranteed` frames and a core bound to a managed read-write stretch of
/// `pages` pages.
fn bound(guaranteed: usize, pages: usize) -> (MockKernel, StretchInfo, DriverCore) {
    let mut k = MockKernel::new(guaranteed, 0);
    let s = k.create_managed_stretch(pages, RW);
    let mut core = DriverCore::new();
    core.bind(s).unwrap();
    (k, s, core)
}

#[test]
fn bind_refuses_a_second_stretch_and_a_malformed_one() {
    let mut k = MockKernel::new(1, 0);
    let s = k.create_managed_stretch(2, RW);
    let mut core = DriverCore::new();
    assert_eq!(core.bound(), Err(DriverError::NotBound));
    let empty = StretchInfo { pages: 0, ..s };
    assert_eq!(core.bind(empty), Err(DriverError::BadStretch));
    assert_eq!(core.stretch(), None);
    core.bind(s).unwrap();
    assert_eq!(core.bind(s), Err(DriverError::AlreadyBound));
    assert_eq!(core.bound(), Ok(s));
    assert_eq!(core.pages_in(s.base..s.end() + 1), Err(DriverError::OutOfRange));
    assert_eq!(core.pages_in(s.base + 1..s.page_addr(1) + 1), Ok((s, 0..2)));
}

#[test]
fn a_fault_names_its_page_only_in_the_bound_stretch() {
    let mut k = MockKernel::new(1, 0);
    let s = k.create_managed_stretch(2, RW);
    let mut core = DriverCore::new();
    let fault = Fault { stretch_base: s.base, addr: s.page_addr(1) + 8, access: Access::Read };
    assert_eq!(core.page_of(&fault), Err(FaultError::NotBound));
    core.bind(s).unwrap();
    assert_eq!(core.page_of(&fault), Ok((s, 1)));
    let outside = Fault { addr: s.end(), ..fault };
    assert_eq!(core.page_of(&outside), Err(FaultError::WrongStretch));
    let other = Fault { stretch_base: s.end() + PAGE_SIZE, ..fault };
    assert_eq!(core.page_of(&other), Err(FaultError::WrongStretch));
}

#[test]
fn begin_fault_counts_the_fault_and_says_whether_it_is_left_to_do() {
    let mut k = MockKernel::new(1, 0);
    let s = k.create_managed_stretch(2, Rights::READ);
    let mut core = DriverCore::new();
    let read = Fault { stretch_base: s.base, addr: s.page_addr(1), access: Access::Read };
    assert_eq!(core.begin_fault(&read), Err(FaultError::NotBound));
    core.bind(s).unwrap();
    assert_eq!(core.begin_fault(&read), Ok(Some((s, 1))));
    let write = Fault { access: Access::Write, ..read };
    assert_eq!(core.begin_fault(&write), Err(FaultError::Denied));
    core.map_new(&mut k, 1, Rights::READ).unwrap();
    assert_eq!(core.begin_fault(&read), Ok(None), "mapped already");
    assert_eq!((core.stats.faults, core.stats.failures), (4, 2));
}

#[test]
fn bind_with_pool_takes_the_pool_or_stays_unbound() {
    let mut k = MockKernel::new(3, 0);
    let s = k.create_managed_stretch(2, RW);
    let (mut core, mut pool) = (DriverCore::new(), vec![]);
    assert_eq!(core.bind_with_pool(&mut k, s, 4, &mut pool), Err(DriverError::OutOfMemory));
    assert_eq!((core.stretch(), pool.len(), k.frames_held()), (None, 0, (0, 0)));
    core.bind_with_pool(&mut k, s, 3, &mut pool).unwrap();
    assert_eq!((core.stretch(), pool.len(), k.frames_held()), (Some(s), 3, (3, 0)));
}

#[test]
fn map_new_maps_a_zeroed_guaranteed_frame_and_leaks_none_when_refused() {
    let (mut k, s, mut core) = bound(2, 2);
    let frame = core.map_new(&mut k, 0, RW).unwrap();
    assert_eq!(k.mapping(s.base), Some((frame, RW)));
    assert_eq!(k.load_u64(s.base), Ok(0));
    assert_eq!(core.mapped(0), Some(Mapped { frame, kind: FrameKind::Guaranteed }));
    assert_eq!(core.resident(), 1);
    // Page 0 is mapped already: the kernel refuses, and the new frame goes back.
    assert_eq!(core.map_new(&mut k, 0, RW), Err(MemError::AlreadyMapped));
    assert_eq!(k.frames_held(), (1, 0));
    let st = core.stats;
    assert_eq!((st.frames_allocated, st.frames_released, st.maps), (2, 1, 1));
    // The contract's last frame, then none.
    core.map_new(&mut k, 1, Rights::READ).unwrap();
    core.unmap(&mut k, 1).unwrap();
    assert_eq!(core.map_new(&mut k, 1, RW), Err(MemError::NoFrames));
}

#[test]
fn take_guaranteed_is_all_or_none() {
    let (mut k, _, mut core) = bound(5, 1);
    let mut pool = vec![];
    core.take_guaranteed(&mut k, 3, &mut pool).unwrap();
    assert_eq!(pool.len(), 3);
    // Three more do not fit in the two left: those taken are freed, the first three stay.
    assert_eq!(core.take_guaranteed(&mut k, 3, &mut pool), Err(DriverError::OutOfMemory));
    assert_eq!(pool.len(), 3);
    assert_eq!(k.frames_held(), (3, 0));
    assert_eq!((core.stats.frames_allocated, core.stats.frames_released), (5, 2));
    for frame in pool.drain(..) {
        assert!(core.free(&mut k, frame));
    }
    assert_eq!(k.frames_held(), (0, 0));
}

#[test]
fn unmap_keeps_the_frame_and_unbind_gives_everything_back() {
    let (mut k, s, mut core) = bound(4, 4);
    for i in 0..3 {
        core.map_new(&mut k, i, RW).unwrap();
    }
    let mapped = core.unmap(&mut k, 1).unwrap();
    assert_eq!(core.unmap(&mut k, 1), Err(MemError::NotMapped));
    assert_eq!(k.mapping(s.page_addr(1)), None);
    assert_eq!(k.frames_held(), (3, 0), "an unmapped frame is still held");
    core.map(&mut k, 3, mapped, RW).unwrap();
    assert_eq!(k.mapping(s.page_addr(3)), Some((mapped.frame, RW)));
    core.lock(s.base..s.end(), |_, _| Ok(())).unwrap();
    assert_eq!(core.unbind(&mut k), Some(s));
    assert_eq!((k.mapped_pages(), k.frames_held()), (0, (0, 0)));
    assert_eq!((core.stretch(), core.locked_count(), core.resident()), (None, 0, 0));
    assert_eq!(core.stats.frames_released, 3);
    assert_eq!(core.unbind(&mut k), None);
    // It binds again.
    core.bind(s).unwrap();
}

#[test]
fn a_failed_lock_leaves_no_page_newly_locked() {
    let (mut k, s, mut core) = bound(8, 6);
    core.lock(s.page_addr(1)..s.page_addr(2), |_, _| Ok(())).unwrap();
    let mut asked: Vec<usize> = Vec::new();
    // The fourth page cannot be made resident.
    let r = core.lock(s.base..s.end(), |core, index| {
        asked.push(index);
        if index == 4 {
            return Err(DriverError::OutOfMemory);
        }
        core.map_new(&mut k, index, RW).map(|_| ()).map_err(driver_error)
    });
    assert_eq!(r, Err(DriverError::OutOfMemory));
    assert_eq!(asked, [0, 2, 3, 4], "a locked page is not made resident again");
    assert_eq!(core.locked_count(), 1, "only the page locked before");
    assert!(core.locked(1));
    assert_eq!(core.resident(), 3, "the pages made resident stay so");

    let mut unlocked = Vec::new();
    core.unlock(s.base..s.end(), |i| unlocked.push(i)).unwrap();
    assert_eq!((unlocked, core.locked_count()), (vec![1], 0));
    assert_eq!(core.unlock(s.base..s.end() + 1, |_| ()), Err(DriverError::OutOfRange));
}

#[test]
fn an_untracked_core_holds_the_stretch_and_no_table() {
    let mut k = MockKernel::new(2, 1);
    let s = k.create_managed_stretch(3, RW);
    let mut core = DriverCore::new();
    core.bind_untracked(s).unwrap();
    assert_eq!(core.bind(s), Err(DriverError::AlreadyBound));
    let frame = core.take_frame(&mut k, FrameKind::Optimistic).unwrap();
    assert_eq!(k.frame_kind(frame), Some(FrameKind::Optimistic));
    assert_eq!((core.resident(), core.mapped(0)), (0, None));
    assert!(core.free(&mut k, frame));
    assert_eq!(core.unbind(&mut k), Some(s));
    assert_eq!((core.stats.frames_allocated, core.stats.frames_released), (1, 1));
}
