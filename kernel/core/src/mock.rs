//! A host model of the machine under the kernel core, for `cargo test`: [`Mock`] implements
//! [`Platform`] over state kept per test thread (libtest runs each test on its own thread, so
//! tests never see each other's frames, clock or memory).
//!
//! What it models: a frame allocator over [`FRAMES`] frames from [`RAM_BASE`], whose frames hold
//! bytes (a frame never written reads as zeroes); page tables ([`MockSpace`]) that charge one table
//! frame per 2 MiB region they map into, plus a root, to the space's owner, and translate user
//! addresses for the user copies through the space made current last
//! ([`AddressSpaceOps::activate`]); registers ([`MockContext`]) holding a system call's number,
//! arguments and results; a clock that the test moves ([`advance`]) and that waiting for an
//! interrupt moves to the armed timer; control blocks as objects of their own, not bytes of their
//! frames (writing one keeps its identity fields, `domain_id` and `timebase_hz`). What it does not:
//! devices (none are found), FP state, or kernel arenas that run out (a domain's kernel objects
//! come from the host heap and are charged nothing).

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::ptr::NonNull;

use abi::{PAGE_SIZE, Rights, page_state};
use allocator_api2::alloc::Global;
use frame_allocator::{FRAME_SIZE, Frame, FrameAllocator, FrameError, Owner};
use std::thread_local;

use crate::contract::{AddressSpaceOps, UserContextOps};
use crate::loose::LooseFrames;
use crate::platform::{Exit, Found, KernelArena, Platform, Routed};

/// The first frame's physical address.
pub const RAM_BASE: u64 = 0x8000_0000;
/// Frames of RAM.
pub const FRAMES: u64 = 4096;
/// Timer ticks per second (QEMU `virt`'s 10 MHz).
pub const HZ: u64 = 10_000_000;
/// Bytes one page table maps (a leaf table of Sv39 or x86_64).
const TABLE_SPAN: usize = 2 << 20;

/// What one test thread's machine holds.
struct State {
    frames: FrameAllocator<'static>,
    words: Option<(u64, &'static mut [u32])>,
    loose: Option<LooseFrames>,
    memory: BTreeMap<u64, Box<[u8]>>,
    dcbs: BTreeMap<u64, &'static abi::Dcb>,
    spaces: Vec<SpaceState>,
    current_space: Option<usize>,
    timer: Option<u64>,
    enabled_lines: BTreeSet<u32>,
    acked_lines: Vec<u32>,
    released_lines: Vec<u32>,
}

/// One address space's mappings and tables.
#[derive(Default)]
struct SpaceState {
    owner: Option<Owner>,
    /// Page → (frame address, rights, `page_state` bits but `MAPPED`).
    pages: BTreeMap<usize, (u64, Rights, u8)>,
    /// 2 MiB region → its table frame.
    tables: BTreeMap<usize, Frame>,
    root: Option<Frame>,
    batch: bool,
    /// Flushes done (one per change outside a batch, one per batch).
    flushes: u64,
}

impl State {
    fn new() -> Self {
        let owners: &'static mut [u32] =
            Vec::leak(vec![0; FrameAllocator::table_len(FRAMES * FRAME_SIZE)]);
        let words: &'static mut [u32] =
            Vec::leak(vec![0xdead_beef; FrameAllocator::table_len(FRAMES * FRAME_SIZE)]);
        let mut frames = FrameAllocator::new(RAM_BASE, owners).expect("aligned base");
        frames.add_free(RAM_BASE, RAM_BASE + FRAMES * FRAME_SIZE);
        State {
            frames,
            words: Some((RAM_BASE, words)),
            loose: None,
            memory: BTreeMap::new(),
            dcbs: BTreeMap::new(),
            spaces: Vec::new(),
            current_space: None,
            timer: None,
            enabled_lines: BTreeSet::new(),
            acked_lines: Vec::new(),
            released_lines: Vec::new(),
        }
    }
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::new());
    static NOW: Cell<u64> = const { Cell::new(0) };
}

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| f(&mut s.borrow_mut()))
}

/// Moves the clock on by `ticks`.
pub fn advance(ticks: u64) {
    NOW.with(|n| n.set(n.get() + ticks));
}

/// Free frames now.
pub fn free_frames() -> u64 {
    with(|s| s.frames.free_count())
}

/// Frames charged to domain `id` now.
pub fn charged(id: crate::DomainId) -> u64 {
    with(|s| s.frames.owned_by(id.owner()))
}

/// Writes `data` at user address `va` of space `space` (through its mappings).
pub fn poke(space: usize, va: usize, data: &[u8]) -> Result<(), usize> {
    with(|s| {
        for (i, b) in data.iter().enumerate() {
            let a = va + i;
            let (pa, _, _) = *s.spaces[space].pages.get(&(a & !(PAGE_SIZE - 1))).ok_or(a)?;
            let page = s.memory.entry(pa).or_insert_with(|| vec![0; PAGE_SIZE].into());
            page[a % PAGE_SIZE] = *b;
        }
        Ok(())
    })
}

/// The bytes at user address `va` of the current space.
fn peek(s: &mut State, va: usize, len: usize) -> Result<Vec<u8>, usize> {
    let space = s.current_space.ok_or(va)?;
    let mut out = Vec::with_capacity(len);
    for a in va..va + len {
        let (pa, _, _) = *s.spaces[space].pages.get(&(a & !(PAGE_SIZE - 1))).ok_or(a)?;
        out.push(s.memory.get(&pa).map_or(0, |p| p[a % PAGE_SIZE]));
    }
    Ok(out)
}

/// The model machine.
pub struct Mock;

/// A domain's registers: the call it made and the results it gets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MockContext {
    /// Program counter.
    pub pc: usize,
    /// Stack pointer.
    pub sp: usize,
    /// The system call's number.
    pub number: usize,
    /// Its arguments (and the entry arguments).
    pub args: [usize; 6],
    /// Its results (status, value).
    pub results: (usize, usize),
}

impl UserContextOps for MockContext {
    fn new_user(entry: usize, sp: usize, args: [usize; 4]) -> Self {
        MockContext {
            pc: entry,
            sp,
            args: [args[0], args[1], args[2], args[3], 0, 0],
            ..Default::default()
        }
    }
    fn call(&self) -> (usize, [usize; 6]) {
        (self.number, self.args)
    }
    fn set_result(&mut self, status: usize, value: usize) {
        self.results = (status, value);
    }
    fn results(&self) -> (usize, usize) {
        self.results
    }
    fn restart_call(&mut self) {
        self.pc -= 4;
    }
    fn pc(&self) -> usize {
        self.pc
    }
    fn saved(&self) -> abi::SavedContext {
        abi::SavedContext::default()
    }
    fn load_words(&mut self, words: &[u64; abi::SavedContext::WORDS]) {
        self.pc = words[0] as usize;
    }
    fn enter_handler(&mut self, entry: usize, stack: usize, args: [usize; 2]) {
        *self = MockContext { pc: entry, sp: stack, ..Default::default() };
        self.args[..2].copy_from_slice(&args);
    }
}

/// A protection domain: an index into the thread's spaces.
pub struct MockSpace(usize);

impl MockSpace {
    fn with<R>(&self, f: impl FnOnce(&mut SpaceState, &mut FrameAllocator<'static>) -> R) -> R {
        with(|s| f(&mut s.spaces[self.0], &mut s.frames))
    }

    /// The index of this space (for [`poke`]).
    pub fn index(&self) -> usize {
        self.0
    }

    /// The mapping of page `va`: frame address and rights.
    pub fn mapping(&self, va: usize) -> Option<(u64, Rights)> {
        self.with(|sp, _| sp.pages.get(&va).map(|&(pa, r, _)| (pa, r)))
    }

    /// Pages mapped.
    pub fn mapped(&self) -> usize {
        self.with(|sp, _| sp.pages.len())
    }

    /// Flushes done.
    pub fn flushes(&self) -> u64 {
        self.with(|sp, _| sp.flushes)
    }
}

impl SpaceState {
    fn table_for(&mut self, fa: &mut FrameAllocator<'static>, va: usize) -> Result<(), FrameError> {
        let region = va / TABLE_SPAN;
        if !self.tables.contains_key(&region) {
            let f = fa.alloc(self.owner.unwrap_or(Owner::Kernel))?;
            self.tables.insert(region, f);
        }
        Ok(())
    }

    fn flush(&mut self) {
        if !self.batch {
            self.flushes += 1;
        }
    }

    fn insert(
        &mut self,
        fa: &mut FrameAllocator<'static>,
        va: usize,
        pa: u64,
        rights: Rights,
        bits: u8,
    ) -> Result<(), FrameError> {
        self.table_for(fa, va)?;
        self.pages.insert(va, (pa, rights, bits));
        self.flush();
        Ok(())
    }

    fn free_table_if_empty(&mut self, fa: &mut FrameAllocator<'static>, region: usize) {
        let start = region * TABLE_SPAN;
        if self.pages.range(start..start + TABLE_SPAN).next().is_none()
            && let Some(f) = self.tables.remove(&region)
        {
            let _ = fa.free(f, self.owner.unwrap_or(Owner::Kernel));
        }
    }
}

impl AddressSpaceOps for MockSpace {
    const LEVELS: u64 = 2;
    type Error = FrameError;

    fn new(owner: Owner) -> Result<Self, FrameError> {
        with(|s| {
            let root = s.frames.alloc(owner)?;
            s.spaces.push(SpaceState {
                owner: Some(owner),
                root: Some(root),
                ..Default::default()
            });
            Ok(MockSpace(s.spaces.len() - 1))
        })
    }
    fn map(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), FrameError> {
        let bits = page_state::ACCESSED | page_state::DIRTY;
        self.with(|sp, fa| sp.insert(fa, va, pa, rights, bits))
    }
    fn map_device(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), FrameError> {
        self.map(va, pa, rights)
    }
    fn map_tracked(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), FrameError> {
        self.with(|sp, fa| sp.insert(fa, va, pa, rights, 0))
    }
    fn page_state(&self, va: usize) -> u8 {
        self.with(|sp, _| sp.pages.get(&va).map_or(0, |&(_, _, bits)| page_state::MAPPED | bits))
    }
    fn clear_page_state(&mut self, va: usize, clear: u8) {
        self.with(|sp, _| {
            if let Some(e) = sp.pages.get_mut(&va) {
                e.2 &= !clear;
                sp.flush();
            }
        })
    }
    fn protect(&mut self, va: usize, rights: Rights) -> Result<(), FrameError> {
        self.with(|sp, _| {
            let e = sp.pages.get_mut(&va).ok_or(FrameError::OutOfRange { addr: va as u64 })?;
            e.1 = rights;
            sp.flush();
            Ok(())
        })
    }
    fn unmap(&mut self, va: usize) {
        self.with(|sp, fa| {
            if sp.pages.remove(&va).is_some() {
                sp.flush();
            }
            sp.free_table_if_empty(fa, va / TABLE_SPAN);
        })
    }
    fn unmap_keeping_tables(&mut self, va: usize) {
        self.with(|sp, _| {
            if sp.pages.remove(&va).is_some() {
                sp.flush();
            }
        })
    }
    fn tables_missing(&mut self, start: usize, end: usize) -> Result<u64, FrameError> {
        Ok(self.with(|sp, _| {
            (start / TABLE_SPAN..end.div_ceil(TABLE_SPAN))
                .filter(|r| !sp.tables.contains_key(r))
                .count() as u64
        }))
    }
    fn tables_needed(&self, va: usize) -> u64 {
        self.with(|sp, _| u64::from(!sp.tables.contains_key(&(va / TABLE_SPAN))))
    }
    fn populate(&mut self, start: usize, end: usize) -> Result<u64, FrameError> {
        self.with(|sp, fa| {
            let mut made = 0;
            for region in start / TABLE_SPAN..end.div_ceil(TABLE_SPAN) {
                if !sp.tables.contains_key(&region) {
                    sp.table_for(fa, region * TABLE_SPAN)?;
                    made += 1;
                }
            }
            Ok(made)
        })
    }
    fn prune_range(&mut self, start: usize, end: usize) {
        self.with(|sp, fa| {
            for region in start / TABLE_SPAN..end.div_ceil(TABLE_SPAN) {
                sp.free_table_if_empty(fa, region);
            }
        })
    }
    fn begin_batch(&mut self) {
        self.with(|sp, _| sp.batch = true)
    }
    fn end_batch(&mut self) {
        self.with(|sp, _| {
            if sp.batch {
                sp.batch = false;
                sp.flushes += 1;
            }
        })
    }
    fn activate(&self) {
        with(|s| s.current_space = Some(self.0))
    }
    fn destroy(self) {
        self.with(|sp, fa| {
            let owner = sp.owner.unwrap_or(Owner::Kernel);
            for (_, f) in core::mem::take(&mut sp.tables) {
                let _ = fa.free(f, owner);
            }
            if let Some(root) = sp.root.take() {
                let _ = fa.free(root, owner);
            }
            sp.pages.clear();
        })
    }
}

impl KernelArena for Global {
    fn new_arena(_owner: u32) -> Self {
        Global
    }
    fn frames_needed(_layout: core::alloc::Layout) -> u64 {
        0
    }
    fn take_refused(&self) -> Option<core::alloc::Layout> {
        None
    }
    fn allow(&self, _frames: u64) {}
    fn end_allowance(&self) {}
    fn allowance(&self) -> u64 {
        0
    }
    fn frames(&self) -> u64 {
        0
    }
    fn release(&self) -> Result<u64, usize> {
        Ok(0)
    }
}

impl Platform for Mock {
    type Space = MockSpace;
    type Context = MockContext;
    type Fp = ();
    type Arena = Global;
    type Machine = ();
    type Function = ();

    const DEVICE_LINES: core::ops::Range<u32> = 32..48;

    fn now_ticks() -> u64 {
        NOW.with(Cell::get)
    }
    fn frequency() -> u64 {
        HZ
    }
    fn arm_timer(ticks: u64) {
        with(|s| s.timer = Some(ticks))
    }
    fn disarm_timer() {
        with(|s| s.timer = None)
    }
    fn quiesce_timer() {
        with(|s| s.timer = None)
    }
    fn wait_for_interrupt() {
        // The next interrupt is the timer's: the clock moves to it (or on by a millisecond).
        let now = Self::now_ticks();
        let at = with(|s| s.timer).filter(|&t| t > now).unwrap_or(now + HZ / 1000);
        advance(at - now);
    }
    fn enable_line(line: u32) -> bool {
        with(|s| s.enabled_lines.insert(line));
        true
    }
    fn ack_line(line: u32) {
        with(|s| s.acked_lines.push(line))
    }
    fn release_line(line: u32) {
        with(|s| s.released_lines.push(line))
    }
    fn msi_message(_line: u32) -> Option<(u64, u32)> {
        None
    }
    fn copy_from_user(dst: &mut [u8], src: usize) -> Result<(), usize> {
        let bytes = with(|s| peek(s, src, dst.len()))?;
        dst.copy_from_slice(&bytes);
        Ok(())
    }
    fn copy_words_from_user(dst: &mut [u64], src: usize) -> Result<(), usize> {
        let bytes = with(|s| peek(s, src, dst.len() * 8))?;
        for (w, b) in dst.iter_mut().zip(bytes.chunks(8)) {
            *w = u64::from_le_bytes(b.try_into().map_err(|_| src)?);
        }
        Ok(())
    }
    fn copy_to_user(src: &[u8], dst: usize) -> Result<(), usize> {
        with(|s| {
            let space = s.current_space.ok_or(dst)?;
            for (i, b) in src.iter().enumerate() {
                let a = dst + i;
                let (pa, _, _) = *s.spaces[space].pages.get(&(a & !(PAGE_SIZE - 1))).ok_or(a)?;
                s.memory.entry(pa).or_insert_with(|| vec![0; PAGE_SIZE].into())[a % PAGE_SIZE] = *b;
            }
            Ok(())
        })
    }
    fn save_fp(_ctx: &mut MockContext, _fp: &mut ()) {}
    fn restore_fp(_ctx: &mut MockContext, _fp: &()) {}
    fn enter_user(_ctx: NonNull<MockContext>) -> ! {
        panic!("the mock does not run user code")
    }
    fn exit(how: Exit) -> ! {
        panic!("run ended: {how:?}")
    }
    fn with_frames<R>(f: impl FnOnce(&mut FrameAllocator<'static>) -> R) -> R {
        with(|s| f(&mut s.frames))
    }
    fn with_loose<R>(f: impl FnOnce(&mut LooseFrames) -> R) -> R {
        let mut table = with(|s| {
            s.loose.take().unwrap_or_else(|| {
                let (base, words) = s.words.take().expect("frame words taken twice");
                LooseFrames::new(base, words)
            })
        });
        let r = f(&mut table);
        with(|s| s.loose = Some(table));
        r
    }
    fn zero_frame(frame: Frame) {
        with(|s| s.memory.remove(&frame.addr()));
    }
    fn write_frame(frame: Frame, data: &[u8]) {
        with(|s| {
            let page = s.memory.entry(frame.addr()).or_insert_with(|| vec![0; PAGE_SIZE].into());
            page[..data.len()].copy_from_slice(data);
        })
    }
    fn bytes(pa: u64, len: usize) -> &'static [u8] {
        let frame = pa & !(FRAME_SIZE - 1);
        let copy = with(|s| {
            let mut out = vec![0; len];
            if let Some(p) = s.memory.get(&frame) {
                let at = (pa - frame) as usize;
                let n = len.min(PAGE_SIZE - at);
                out[..n].copy_from_slice(&p[at..at + n]);
            }
            out
        });
        Vec::leak(copy)
    }
    fn dcb(frame: Frame) -> &'static abi::Dcb {
        with(|s| *s.dcbs.entry(frame.addr()).or_insert_with(|| Box::leak(Box::default())))
    }
    fn write_dcb(frame: Frame, dcb: &abi::Dcb) {
        // A new block with the fields the kernel writes before the domain runs (its atomics
        // start at zero, as in the kernel's).
        let fresh = abi::Dcb {
            domain_id: dcb.domain_id,
            timebase_hz: dcb.timebase_hz,
            ..Default::default()
        };
        with(|s| s.dcbs.insert(frame.addr(), Box::leak(Box::new(fresh))));
    }
    fn write_saved_context(_frame: Frame, _ctx: &abi::SavedContext) {}
    fn write_channel_slot(_frame: Frame, _index: usize, _slot: &abi::ChannelSlot) {}
    fn write_device_slot(_frame: Frame, _index: usize, _slot: &abi::DeviceSlot) {}
    fn heap_used() -> usize {
        0
    }
    fn find_device(_target: manifest::DeviceTarget<'_>, _machine: &()) -> Option<Found<()>> {
        None
    }
    fn route_msi(_function: &(), _message: (u64, u32)) -> Option<Routed> {
        None
    }
    fn quiesce_function(_function: &()) {}
}
