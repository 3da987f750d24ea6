//! Host tests of the stretch helpers and of the mock kernel's checks, with a toy driver.

use std::string::ToString;
use std::vec::Vec;

use super::mock::{MockKernel, Outcome};
use super::*;

const RW: Rights = Rights(Rights::READ.0 | Rights::WRITE.0);

/// A toy driver: on a fault it maps a fresh guaranteed frame, fails, or claims success
/// without mapping anything.
#[derive(Default)]
struct Toy {
    core: DriverCore,
    behaviour: Behaviour,
}

#[derive(Default, Clone, Copy)]
enum Behaviour {
    #[default]
    Map,
    Fail,
    Lie,
}

impl StretchDriver for Toy {
    fn bind(&mut self, _k: &mut dyn MemoryKernel, stretch: StretchInfo) -> Result<(), DriverError> {
        // Untracked: the toy maps behind the core's back, and its pages stay at unbind.
        self.core.bind_untracked(stretch)
    }
    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        let s = self.core.stretch().ok_or(FaultError::NotBound)?;
        match self.behaviour {
            Behaviour::Map => {
                let frame = k.frame_alloc(FrameKind::Guaranteed).map_err(FaultError::Kernel)?;
                k.map(fault.page(), frame, s.page_rights()).map_err(FaultError::Kernel)
            }
            Behaviour::Fail => Err(FaultError::OutOfMemory),
            Behaviour::Lie => Ok(()),
        }
    }
    fn core(&self) -> &DriverCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut DriverCore {
        &mut self.core
    }
}

/// A mock with a bound read-write stretch of `pages` pages.
fn bound(pages: usize, guaranteed: usize, optimistic: usize) -> (MockKernel, StretchInfo, Toy) {
    let mut k = MockKernel::new(guaranteed, optimistic);
    let s = k.create_stretch(pages, RW);
    let mut d = Toy::default();
    k.bind_driver(&mut d, s).unwrap();
    (k, s, d)
}

#[test]
fn stretch_helpers() {
    let s = StretchInfo { base: 0x10_0000, pages: 4, rights: Rights(0xf) };
    assert_eq!(s.end(), 0x10_4000);
    assert!(s.contains(0x10_3fff) && !s.contains(0x10_4000) && !s.contains(0xf_ffff));
    assert_eq!(s.page_index(0x10_1234), Some(1));
    assert_eq!(s.page_index(0x10_4000), None);
    assert_eq!(s.page_addr(3), 0x10_3000);
    assert_eq!(s.page_rights(), Rights(7));
    assert_eq!(s.check(), Ok(()));
    assert_eq!(s.pages_in(0x10_0001..0x10_1001), Ok(0..2));
    assert_eq!(s.pages_in(0x10_1000..0x10_1000), Ok(1..1));
    assert_eq!(s.pages_in(0x10_0000..0x10_4000), Ok(0..4));
    assert_eq!(s.pages_in(0x10_0000..0x10_4001), Err(DriverError::OutOfRange));
    assert_eq!(s.pages_in(0xf_f000..0x10_1000), Err(DriverError::OutOfRange));
    let bad = |base, pages, rights| StretchInfo { base, pages, rights }.check();
    assert_eq!(bad(0x10_0001, 1, RW), Err(DriverError::BadStretch));
    assert_eq!(bad(0x10_0000, 0, RW), Err(DriverError::BadStretch));
    assert_eq!(bad(usize::MAX - 0xfff, 2, RW), Err(DriverError::BadStretch));
    assert_eq!(bad(0x10_0000, 1, Rights::META), Err(DriverError::BadStretch));
}

#[test]
fn access_rights_and_fault_page() {
    assert!(Access::Read.allowed_by(Rights::WRITE), "write implies read");
    assert!(!Access::Write.allowed_by(Rights::READ));
    assert!(!Access::Execute.allowed_by(RW));
    let f = Fault { stretch_base: 0, addr: 0x1234, access: Access::Read };
    assert_eq!(f.page(), 0x1000);
}

#[test]
fn errors_display() {
    assert_eq!(MemError::AlreadyMapped.to_string(), "page is mapped already");
    assert_eq!(
        DriverError::Kernel(MemError::NoFrames).to_string(),
        "kernel refused: no frame left in the contract"
    );
    assert_eq!(FaultError::Unexpected.to_string(), "fault in a stretch that never faults");
}

#[test]
fn contract_limits() {
    let mut k = MockKernel::new(2, 1);
    let g1 = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    let _g2 = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    assert_eq!(k.frame_alloc(FrameKind::Guaranteed), Err(MemError::NoFrames));
    let o = k.frame_alloc(FrameKind::Optimistic).unwrap();
    assert_eq!(k.frame_alloc(FrameKind::Optimistic), Err(MemError::NoFrames));
    assert_eq!(k.frames_held(), (2, 1));
    assert_eq!(k.frame_kind(o), Some(FrameKind::Optimistic));
    k.frame_free(g1).unwrap();
    assert_eq!(k.frames_held(), (1, 1));
    assert_eq!(k.frame_free(g1), Err(MemError::BadFrame), "a freed frame is not held");
    let g3 = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    assert_ne!(g3, g1, "frame numbers are not reused");
    assert_eq!(k.peak_held(), (2, 1));
    assert_eq!(k.contract(), (2, 1));
    assert_eq!(k.calls().frame_alloc, 6);
    assert_eq!(k.calls().frame_free, 2);
}

#[test]
fn frames_come_zero_filled() {
    let (mut k, s, _d) = bound(1, 1, 0);
    let f = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    k.map(s.base, f, RW).unwrap();
    let mut buf = [0xffu8; PAGE_SIZE];
    k.read(s.base, &mut buf).unwrap();
    assert!(buf.iter().all(|b| *b == 0));
}

#[test]
fn double_map_refused() {
    let (mut k, s, _d) = bound(2, 3, 0);
    let a = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    let b = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    k.map(s.base, a, RW).unwrap();
    assert_eq!(k.map(s.base, b, RW), Err(MemError::AlreadyMapped));
    assert_eq!(k.map(s.page_addr(1), a, RW), Err(MemError::FrameInUse));
    assert_eq!(k.frame_free(a), Err(MemError::FrameInUse));
    assert_eq!(k.mapping(s.base), Some((a, RW)));
    assert_eq!(k.mapped_pages(), 1);
}

#[test]
fn unmap_returns_the_frame() {
    let (mut k, s, _d) = bound(1, 1, 0);
    let a = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    k.map(s.base, a, RW).unwrap();
    k.store_u64(s.base + 8, 42).unwrap();
    assert_eq!(k.unmap(s.base), Ok(a));
    assert_eq!(k.unmap(s.base), Err(MemError::NotMapped));
    assert_eq!(k.frames_held(), (1, 0), "the domain still holds the frame");
    k.map(s.base, a, RW).unwrap();
    assert_eq!(k.load_u64(s.base + 8), Ok(42), "the frame kept its contents");
    k.unmap(s.base).unwrap();
    k.frame_free(a).unwrap();
    assert_eq!(k.map(s.base, a, RW), Err(MemError::BadFrame));
}

#[test]
fn remap_moves_a_page_in_one_step() {
    let (mut k, s, _d) = bound(3, 3, 0);
    let a = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    let b = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    // Filled through a window page, then moved into place.
    let (window, target) = (s.page_addr(2), s.base);
    k.map(window, a, RW).unwrap();
    k.store_u64(window + 16, 7).unwrap();
    k.remap(window, target, Rights::READ).unwrap();
    assert_eq!(k.mapping(target), Some((a, Rights::READ)));
    assert_eq!(k.mapping(window), None, "the window is empty again");
    assert_eq!(k.load_u64(target + 16), Ok(7), "the contents moved with the frame");
    assert_eq!(k.calls().remap, 1);
    // Refused calls move nothing.
    k.map(window, b, RW).unwrap();
    assert_eq!(k.remap(window, target, RW), Err(MemError::AlreadyMapped));
    assert_eq!(k.remap(s.page_addr(1), target, RW), Err(MemError::NotMapped));
    assert_eq!(k.remap(window, window, RW), Err(MemError::BadAddress));
    assert_eq!(k.remap(window, s.page_addr(1) + 8, RW), Err(MemError::BadAddress));
    assert_eq!(k.remap(window, s.page_addr(1), Rights::NONE), Err(MemError::BadRights));
    let unbound = k.create_stretch(1, RW);
    assert_eq!(k.remap(window, unbound.base, RW), Err(MemError::NotManaged));
    assert_eq!(k.mapping(window), Some((b, RW)));
    assert_eq!(k.mapping(target), Some((a, Rights::READ)));
    assert_eq!(k.mapped_pages(), 2);
}

#[test]
fn map_batch_applies_every_entry_in_one_call() {
    let (mut k, s, _d) = bound(8, 8, 0);
    let frames: Vec<Frame> =
        (0..4).map(|_| k.frame_alloc(FrameKind::Guaranteed).unwrap()).collect();
    k.map(s.page_addr(4), frames[3], RW).unwrap();
    k.store_u64(s.page_addr(4), 9).unwrap();
    let ops = [
        PageOp::map(s.page_addr(0), frames[0].0 as usize, RW),
        PageOp::map(s.page_addr(1), frames[1].0 as usize, Rights::READ),
        PageOp::map(s.page_addr(2), frames[2].0 as usize, RW),
        PageOp::protect(s.page_addr(4), Rights::READ),
    ];
    let before = k.calls();
    assert_eq!(k.map_batch(&ops), Ok(()));
    let after = k.calls();
    assert_eq!(after.map_batch, before.map_batch + 1, "one call");
    assert_eq!((after.map, after.protect), (before.map, before.protect), "no single calls");
    assert_eq!(k.mapping(s.page_addr(1)), Some((frames[1], Rights::READ)));
    assert_eq!(k.mapping(s.page_addr(4)), Some((frames[3], Rights::READ)));
    assert_eq!(k.load_u64(s.page_addr(4)), Ok(9));
    assert_eq!(k.mapped_pages(), 4);
    // Unmaps: the frames stay the domain's, mapped nowhere, and may be freed.
    let ops = [PageOp::unmap(s.page_addr(0)), PageOp::unmap(s.page_addr(4))];
    assert_eq!(k.map_batch(&ops), Ok(()));
    assert_eq!(k.mapped_pages(), 2);
    assert_eq!(k.frame_free(frames[3]), Ok(()));
    assert_eq!(k.map_batch(&[]), Ok(()), "an empty batch does nothing");
    assert_eq!(k.calls().map_batch, after.map_batch + 1);
}

#[test]
fn map_batch_is_all_or_nothing() {
    let (mut k, s, _d) = bound(8, 8, 0);
    let a = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    let b = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    let c = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    k.map(s.page_addr(5), c, RW).unwrap();
    let good = [
        PageOp::map(s.page_addr(0), a.0 as usize, RW),
        PageOp::map(s.page_addr(1), b.0 as usize, RW),
        PageOp::protect(s.page_addr(5), Rights::READ),
    ];
    let unbound = k.create_stretch(1, RW);
    let cases: [(usize, PageOp, MemError); 11] = [
        (2, PageOp::map(s.page_addr(2) + 8, c.0 as usize, RW), MemError::BadAddress),
        (1, PageOp::map(unbound.base, c.0 as usize, RW), MemError::NotManaged),
        (0, PageOp::map(0x1000, c.0 as usize, RW), MemError::NotOwned),
        (2, PageOp::map(s.page_addr(2), c.0 as usize, RW), MemError::FrameInUse),
        (1, PageOp::map(s.page_addr(2), 7, RW), MemError::BadFrame),
        (2, PageOp::map(s.page_addr(5), 0, Rights::NONE), MemError::BadRights),
        (2, PageOp::protect(s.page_addr(5), Rights(Rights::META.0)), MemError::BadRights),
        (1, PageOp::unmap(s.page_addr(3)), MemError::NotMapped),
        (2, PageOp { op: 9, ..PageOp::unmap(s.page_addr(3)) }, MemError::BadBatch),
        (3, PageOp::map(s.page_addr(6), a.0 as usize, RW), MemError::FrameInUse),
        (3, PageOp::map(s.page_addr(5), a.0 as usize, RW), MemError::AlreadyMapped),
    ];
    for (at, bad, error) in cases {
        let mut ops = good.to_vec();
        ops.insert(at, bad);
        assert_eq!(k.map_batch(&ops), Err((at, error)), "{bad:?} at {at}");
        assert_eq!(k.mapped_pages(), 1, "{bad:?}: nothing changed");
        assert_eq!(k.mapping(s.page_addr(5)), Some((c, RW)));
    }
    // Two entries on one page, even a protect and an unmap that would pass one after the other.
    let twice = [PageOp::protect(s.page_addr(5), Rights::READ), PageOp::unmap(s.page_addr(5))];
    assert_eq!(k.map_batch(&twice), Err((1, MemError::BadBatch)));
    // Every entry is checked against the state before the batch: an unmap does not free its
    // frame for a map in the same batch.
    let moved = [PageOp::unmap(s.page_addr(5)), PageOp::map(s.page_addr(6), c.0 as usize, RW)];
    assert_eq!(k.map_batch(&moved), Err((1, MemError::FrameInUse)));
    // Longer than the kernel takes.
    let long: Vec<PageOp> =
        (0..=MAP_BATCH_MAX).map(|i| PageOp::unmap(s.base + i * PAGE_SIZE)).collect();
    assert_eq!(k.map_batch(&long), Err((MAP_BATCH_MAX + 1, MemError::BadBatch)));
    assert_eq!(k.mapped_pages(), 1);
    assert_eq!(k.map_batch(&good), Ok(()));
    assert_eq!(k.mapped_pages(), 3);
}

/// A kernel without the batch call: [`MemoryKernel::map_batch`]'s default implementation.
struct Singles(MockKernel);

impl MemoryKernel for Singles {
    fn frame_alloc(&mut self, kind: FrameKind) -> Result<Frame, MemError> {
        self.0.frame_alloc(kind)
    }
    fn frame_free(&mut self, frame: Frame) -> Result<(), MemError> {
        self.0.frame_free(frame)
    }
    fn map(&mut self, va: usize, frame: Frame, rights: Rights) -> Result<(), MemError> {
        self.0.map(va, frame, rights)
    }
    fn unmap(&mut self, va: usize) -> Result<Frame, MemError> {
        self.0.unmap(va)
    }
    fn protect(&mut self, va: usize, rights: Rights) -> Result<(), MemError> {
        self.0.protect(va, rights)
    }
    fn remap(&mut self, from: usize, to: usize, rights: Rights) -> Result<u8, MemError> {
        self.0.remap(from, to, rights)
    }
    fn page_state(&mut self, va: usize, states: &mut [u8], clear: u8) -> Result<(), MemError> {
        self.0.page_state(va, states, clear)
    }
    fn write(&mut self, va: usize, data: &[u8]) -> Result<(), MemError> {
        self.0.write(va, data)
    }
    fn read(&mut self, va: usize, buf: &mut [u8]) -> Result<(), MemError> {
        self.0.read(va, buf)
    }
    fn frames_held(&self) -> (usize, usize) {
        self.0.frames_held()
    }
}

#[test]
fn map_batch_default_makes_the_single_calls() {
    let (k, s, _d) = bound(4, 4, 0);
    let mut k = Singles(k);
    let a = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    let b = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    let ops = [
        PageOp::map(s.page_addr(0), a.0 as usize, RW),
        PageOp::protect(s.page_addr(0), Rights::READ),
        PageOp::map(s.page_addr(1), b.0 as usize, RW),
    ];
    assert_eq!(k.map_batch(&ops), Ok(()));
    let calls = k.0.calls();
    assert_eq!((calls.map, calls.protect, calls.map_batch), (2, 1, 0));
    assert_eq!(k.0.mapping(s.page_addr(0)), Some((a, Rights::READ)));
    // It stops at the first refused entry; those before it stay applied.
    let ops = [PageOp::unmap(s.page_addr(1)), PageOp::unmap(s.page_addr(2))];
    assert_eq!(k.map_batch(&ops), Err((1, MemError::NotMapped)));
    assert_eq!(k.0.mapping(s.page_addr(1)), None);
}

const MAPPED: u8 = page_state::MAPPED;
const ACCESSED: u8 = page_state::ACCESSED;
const DIRTY: u8 = page_state::DIRTY;

/// The state of the one page `va`, read without clearing anything.
fn state_of(k: &mut MockKernel, va: usize) -> u8 {
    let mut state = [0xff];
    k.page_state(va, &mut state, 0).unwrap();
    state[0]
}

#[test]
fn page_state_follows_the_accesses() {
    let (mut k, s, _d) = bound(4, 4, 0);
    let a = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    let b = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    k.map(s.page_addr(0), a, RW).unwrap();
    k.map(s.page_addr(2), b, Rights::READ).unwrap();
    let mut states = [0xff; 4];
    assert_eq!(k.page_state(s.base, &mut states, 0), Ok(()));
    assert_eq!(states, [MAPPED, 0, MAPPED, 0], "fresh maps are clean and unaccessed");
    // A read sets the accessed bit, a write both; a faulting access neither.
    assert_eq!(k.load_u64(s.page_addr(0)), Ok(0));
    assert_eq!(state_of(&mut k, s.page_addr(0)), MAPPED | ACCESSED);
    assert_eq!(k.store_u64(s.page_addr(0) + 8, 5), Ok(()));
    assert_eq!(state_of(&mut k, s.page_addr(0)), MAPPED | ACCESSED | DIRTY);
    assert!(k.store_u64(s.page_addr(2), 5).is_err());
    assert_eq!(state_of(&mut k, s.page_addr(2)), MAPPED);
    assert_eq!(k.touch(s.page_addr(2) + 1, Access::Read), Ok(()));
    assert_eq!(state_of(&mut k, s.page_addr(2)), MAPPED | ACCESSED);
    // The copies too, on every page they touch.
    k.protect(s.page_addr(2), RW).unwrap();
    assert_eq!(state_of(&mut k, s.page_addr(2)), MAPPED | ACCESSED, "protect keeps the bits");
    k.write(s.page_addr(2) + PAGE_SIZE - 2, &[1]).unwrap();
    assert_eq!(state_of(&mut k, s.page_addr(2)), MAPPED | ACCESSED | DIRTY);
    // Clearing: the bits asked for, in every mapped page; the state read is the one before.
    let before = k.calls().page_state;
    assert_eq!(k.page_state(s.base, &mut states, DIRTY), Ok(()));
    assert_eq!(k.calls().page_state, before + 1, "one call");
    assert_eq!(states, [MAPPED | ACCESSED | DIRTY, 0, MAPPED | ACCESSED | DIRTY, 0]);
    assert_eq!(k.page_state(s.base, &mut states, ACCESSED | DIRTY), Ok(()));
    assert_eq!(states, [MAPPED | ACCESSED, 0, MAPPED | ACCESSED, 0]);
    assert_eq!(k.page_state(s.base, &mut states, 0), Ok(()));
    assert_eq!(states, [MAPPED, 0, MAPPED, 0]);
    // A read after the clearing sets the accessed bit again; a read copy does not dirty.
    let mut word = [0u8; 8];
    k.read(s.page_addr(2), &mut word).unwrap();
    assert_eq!(state_of(&mut k, s.page_addr(2)), MAPPED | ACCESSED);
    // An unmapped page forgets its bits; mapped again, it starts clean.
    assert_eq!(k.unmap(s.page_addr(2)), Ok(b));
    assert_eq!(state_of(&mut k, s.page_addr(2)), 0);
    k.map(s.page_addr(2), b, RW).unwrap();
    assert_eq!(state_of(&mut k, s.page_addr(2)), MAPPED);
}

#[test]
fn remap_returns_the_bits_and_starts_the_new_page_clean() {
    let (mut k, s, _d) = bound(4, 4, 0);
    let a = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    k.map(s.page_addr(0), a, RW).unwrap();
    k.store_u64(s.page_addr(0), 7).unwrap();
    // Out of view and asked in one step: nothing can dirty it in between.
    let state = k.remap(s.page_addr(0), s.page_addr(3), RW).unwrap();
    assert_eq!(state, MAPPED | ACCESSED | DIRTY);
    assert_eq!(state_of(&mut k, s.page_addr(3)), MAPPED, "the new page starts clean");
    assert_eq!(state_of(&mut k, s.page_addr(0)), 0);
    // Written at its new page (as a driver fills a frame at its window), then moved: the
    // bits returned are those of the fill, and the page moved into place is clean.
    k.store_u64(s.page_addr(3), 8).unwrap();
    assert_eq!(k.remap(s.page_addr(3), s.page_addr(1), RW), Ok(MAPPED | ACCESSED | DIRTY));
    assert_eq!(state_of(&mut k, s.page_addr(1)), MAPPED);
    assert_eq!(k.load_u64(s.page_addr(1)), Ok(8));
    assert_eq!(k.remap(s.page_addr(1), s.page_addr(2), RW), Ok(MAPPED | ACCESSED));
    // map_batch's maps start clean as well.
    let b = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    k.map_batch(&[PageOp::map(s.page_addr(0), b.0 as usize, RW)]).unwrap();
    assert_eq!(state_of(&mut k, s.page_addr(0)), MAPPED);
}

#[test]
fn page_state_checks_everything_first() {
    let (mut k, s, _d) = bound(4, 4, 0);
    let a = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    k.map(s.page_addr(3), a, RW).unwrap();
    k.store_u64(s.page_addr(3), 1).unwrap();
    let unbound = k.create_stretch(2, RW);
    let mut long = [0u8; MAP_BATCH_MAX + 1];
    let mut one = [0u8; 1];
    let all = ACCESSED | DIRTY;
    assert_eq!(k.page_state(s.base, &mut [], all), Err(MemError::BadBatch));
    assert_eq!(k.page_state(s.base, &mut long, all), Err(MemError::BadBatch));
    assert_eq!(k.page_state(s.base, &mut long[..MAP_BATCH_MAX], all), Err(MemError::NotOwned));
    for bits in [MAPPED, 8, 0x80, MAPPED | all] {
        assert_eq!(k.page_state(s.base, &mut one, bits), Err(MemError::BadBits), "{bits}");
    }
    assert_eq!(k.page_state(s.base + 8, &mut one, all), Err(MemError::BadAddress));
    assert_eq!(k.page_state(unbound.base, &mut one, all), Err(MemError::NotManaged));
    assert_eq!(k.page_state(0x1000, &mut one, all), Err(MemError::NotOwned));
    // A range that runs off the stretch's end, or off the address space.
    let mut five = [0xee; 5];
    assert_eq!(k.page_state(s.base, &mut five, all), Err(MemError::NotOwned));
    assert_eq!(five, [0xee; 5], "nothing written");
    let top = usize::MAX & !(PAGE_SIZE - 1);
    assert_eq!(k.page_state(top, &mut [0; 2], all), Err(MemError::NotOwned));
    assert_eq!(k.page_bits(s.page_addr(3)), MAPPED | ACCESSED | DIRTY, "nothing cleared");
    let mut four = [0; 4];
    assert_eq!(k.page_state(s.base, &mut four, all), Ok(()));
    assert_eq!(four, [0, 0, 0, MAPPED | ACCESSED | DIRTY]);
}

#[test]
fn mapping_only_where_the_domain_manages() {
    let mut k = MockKernel::new(4, 0);
    let f = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    let unbound = k.create_stretch(1, RW);
    assert_eq!(k.map(unbound.base, f, RW), Err(MemError::NotManaged));
    assert_eq!(k.map(unbound.end(), f, RW), Err(MemError::NotOwned), "the gap after it");
    let ro = k.create_stretch(1, Rights::READ);
    let mut d = Toy::default();
    k.bind_driver(&mut d, ro).unwrap();
    assert_eq!(k.map(ro.base + 8, f, Rights::READ), Err(MemError::BadAddress));
    assert_eq!(k.map(ro.base, f, Rights::NONE), Err(MemError::BadRights));
    assert_eq!(
        k.map(ro.base, f, Rights(Rights::READ.0 | Rights::META.0)),
        Err(MemError::BadRights)
    );
    assert_eq!(k.map(ro.base, f, RW), Err(MemError::Denied));
    assert_eq!(k.map(ro.base, Frame(1), Rights::READ), Err(MemError::BadFrame));
    k.map(ro.base, f, Rights::READ).unwrap();
    assert_eq!(k.protect(ro.base, RW), Err(MemError::Denied));
    assert_eq!(k.unbind_driver(&mut d, ro), 1, "the toy driver leaks its page");
    assert_eq!(k.unmap(ro.base), Err(MemError::NotManaged));
}

#[test]
fn touch_and_fault_semantics() {
    let mut k = MockKernel::new(4, 0);
    let s = k.create_stretch(2, Rights(7));
    let mut d = Toy::default();
    k.bind_driver(&mut d, s).unwrap();
    let va = s.base + 0x10;
    assert_eq!(
        k.touch(va, Access::Read),
        Err(Fault { stretch_base: s.base, addr: va, access: Access::Read })
    );
    let f = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    k.map(s.base, f, Rights::READ).unwrap();
    assert_eq!(k.touch(va, Access::Read), Ok(()));
    assert_eq!(k.load_u64(va), Ok(0));
    let write = Fault { stretch_base: s.base, addr: va, access: Access::Write };
    assert_eq!(k.touch(va, Access::Write), Err(write), "write to a read-only mapping");
    assert_eq!(k.store_u64(va, 7), Err(write));
    assert_eq!(k.touch(va, Access::Execute).unwrap_err().access, Access::Execute);
    k.protect(s.base, Rights::WRITE).unwrap();
    assert_eq!(k.touch(va, Access::Read), Ok(()), "write implies read");
    k.store_u64(va, 7).unwrap();
    assert_eq!(k.load_u64(va), Ok(7));
    assert_eq!(k.touch(s.page_addr(1), Access::Read).unwrap_err().addr, s.page_addr(1));
    assert_eq!(k.protect(s.page_addr(1), Rights::READ), Err(MemError::NotMapped));
}

#[test]
#[should_panic(expected = "is in no stretch")]
fn touch_outside_every_stretch_panics() {
    let k = MockKernel::new(0, 0);
    let _ = k.touch(abi::STRETCH_BASE, Access::Read);
}

#[test]
fn copies_cross_pages_and_check_every_page() {
    let (mut k, s, _d) = bound(3, 3, 0);
    for i in 0..2 {
        let f = k.frame_alloc(FrameKind::Guaranteed).unwrap();
        k.map(s.page_addr(i), f, RW).unwrap();
    }
    let data: std::vec::Vec<u8> = (0..100u8).collect();
    let va = s.page_addr(1) - 50;
    k.write(va, &data).unwrap();
    let mut back = [0u8; 100];
    k.read(va, &mut back).unwrap();
    assert_eq!(&back[..], &data[..]);
    assert_eq!(k.write(s.page_addr(2) - 1, &[1, 2]), Err(MemError::NotMapped));
    assert_eq!(k.read(s.page_addr(2) - 1, &mut [0; 1]), Ok(()));
    assert_eq!(k.load_u64(s.page_addr(2) - 8), Ok(0), "a failed write writes nothing");
    assert_eq!(k.write(usize::MAX, &[1, 2]), Err(MemError::BadAddress));
    k.protect(s.base, Rights::READ).unwrap();
    assert_eq!(k.write(s.base, &[1]), Err(MemError::Denied));
    assert_eq!(k.write(s.base, &[]), Ok(()));
    assert_eq!(k.calls().write, 5);
    assert_eq!(k.calls().read, 2);
}

#[test]
fn the_harness_runs_the_fault_path() {
    let (mut k, s, mut d) = bound(2, 1, 0);
    assert_eq!(k.access(&mut d, &s, s.base + 3, Access::Write), Outcome::Resolved);
    assert_eq!(k.access(&mut d, &s, s.base + 3, Access::Read), Outcome::Hit);
    assert_eq!(
        k.access(&mut d, &s, s.page_addr(1), Access::Read),
        Outcome::Failed(FaultError::Kernel(MemError::NoFrames)),
        "the contract has one frame"
    );
    assert_eq!(k.calls().faults, 2);
    d.behaviour = Behaviour::Fail;
    assert_eq!(
        k.access(&mut d, &s, s.page_addr(1), Access::Read),
        Outcome::Failed(FaultError::OutOfMemory)
    );
    d.behaviour = Behaviour::Lie;
    assert!(matches!(k.access(&mut d, &s, s.page_addr(1), Access::Read), Outcome::Refaulted(_)));
    assert!(
        matches!(k.access(&mut d, &s, s.base, Access::Execute), Outcome::Terminated(_)),
        "the stretch's rights do not allow execution"
    );
    assert_eq!(k.calls().faults, 4);
}

#[test]
fn the_harness_terminates_on_an_unbound_stretch() {
    let mut k = MockKernel::new(1, 0);
    let s = k.create_stretch(1, RW);
    let mut d = Toy::default();
    assert!(matches!(k.access(&mut d, &s, s.base, Access::Read), Outcome::Terminated(_)));
    assert_eq!(k.calls().faults, 0);
}

#[test]
fn a_failed_bind_leaves_the_stretch_unmanaged() {
    let mut k = MockKernel::new(1, 0);
    let s = k.create_stretch(1, Rights::META);
    let mut d = Toy::default();
    assert_eq!(k.bind_driver(&mut d, s), Err(DriverError::BadStretch));
    let f = k.frame_alloc(FrameKind::Guaranteed).unwrap();
    assert_eq!(k.map(s.base, f, Rights::READ), Err(MemError::NotManaged));
}
