//! Host tests of the kernel core against the mock machine ([`crate::mock`]): system-call
//! dispatch and its errors, the paging calls, kernel jobs, events, revocation and death, and
//! the checks the kernel also runs on the machine ([`crate::checks`]).

use abi::{Call, PAGE_SIZE, PageOp, Rights, SysError, frame_kind, page_op};
use alloc::vec::Vec;

use crate::contract::{AddressSpaceOps, Resume, UserContextOps, UserTrap};
use crate::jobs::CHUNK_PAGES;
use crate::mock::{self, HZ, Mock, MockSpace};
use crate::stretch::Kind;
use crate::syscall::{self, CONSOLE_MAX, Next, STRETCH_MAX};
use crate::{DomainId, Ending, Platform, Termination, World, checks};

// The graded tests of the course lab `syscall` (`labs/syscall/lab.toml`).
mod lab_syscall;

type W = World<Mock>;

/// The first three domains of a test's world.
const D0: DomainId = DomainId::from_index(0);
const D1: DomainId = DomainId::from_index(1);
const D2: DomainId = DomainId::from_index(2);

const RW: Rights = Rights::READ.union(Rights::WRITE);

/// A CPU contract every test domain gets: 2 ms every 10 ms, with slack time.
const CPU: atropos::Contract =
    atropos::Contract { period: 10_000_000, slice: 2_000_000, extra: true, latency: 10_000_000 };

/// A world of domains with `(guaranteed, optimistic)` frames each, made as the loader makes
/// them (a protection domain, a share of the stretch region, a CPU contract, a control block).
fn world(domains: &[(u64, u64)]) -> W {
    let mut w = W::new();
    for (i, &(guaranteed, optimistic)) in domains.iter().enumerate() {
        let id = DomainId::from_index(i);
        let space = MockSpace::new(id.owner()).unwrap();
        let quota = w.region.share(1 << 30).unwrap();
        assert_eq!(w.add_domain("test", space, guaranteed, optimistic, quota), Some(id));
        w.sched.policy.try_add(CPU, 0).unwrap();
        let dcb_at = w.domains[id].address.take(1).unwrap();
        w.create_stretch(id, dcb_at, 1, RW, Kind::ControlBlock, &[]).unwrap();
        let frame = w.stretches[&dcb_at].frames[0].unwrap();
        Mock::write_dcb(frame, &abi::Dcb { domain_id: u64::from(id.raw()), ..Default::default() });
        w.domains[id].dcb = Some(frame);
        w.domains[id].dcb_va = dcb_at;
    }
    w.sched.policy.restart(0);
    w
}

/// Runs call `call` of domain `id` as the dispatcher does (a job it starts runs to the end).
fn call(w: &mut W, id: DomainId, call: Call, args: &[usize]) -> Result<usize, SysError> {
    let mut a = [0; 6];
    a[..args.len()].copy_from_slice(args);
    let next = syscall::dispatch(w, id, call as usize, a);
    outcome(w, id, next)
}

/// The result a caller would see of `next` (a job runs to its end; waiting is `NoMemory`).
fn outcome(w: &mut W, id: DomainId, next: Next) -> Result<usize, SysError> {
    match next {
        Next::Return(r) => r,
        Next::Refused(e, _) => Err(e),
        Next::Job(job) => {
            w.domains[id].job = Some(job);
            bounded("the job", || w.run_job(id, 0));
            let (status, value) = w.domains[id].ctx.results();
            if status == 0 { Ok(value) } else { Err(SysError::from_code(status).unwrap()) }
        }
        Next::WaitForFrames => Err(SysError::NoMemory),
        Next::Yield | Next::Block(_) | Next::Resumed | Next::Exit(_) => Ok(0),
    }
}

/// Calls `step` until it returns `true`; fails the test if it has not after more steps than
/// the machine has frames (every loop here ends within that many), rather than hang.
fn bounded(what: &str, mut step: impl FnMut() -> bool) {
    for _ in 0..=mock::FRAMES {
        if step() {
            return;
        }
    }
    panic!("{what} did not end within {} steps", mock::FRAMES + 1);
}

/// Loose frames of `kind` taken by domain `id` until it is refused; their frame numbers.
fn take_all(w: &mut W, id: DomainId, kind: usize) -> Vec<usize> {
    let mut taken = Vec::new();
    bounded("taking frames", || match call(w, id, Call::FrameAlloc, &[kind]) {
        Ok(f) => {
            taken.push(f);
            false
        }
        Err(_) => true,
    });
    taken
}

/// Domain `id`'s protection domain.
fn space(w: &W, id: DomainId) -> &MockSpace {
    w.domains[id].space.as_ref().unwrap()
}

/// Makes domain `id` the one on the CPU (its space current) and runs its system call through
/// the trap entry, as the trap path does; the results it resumes with.
fn trap(w: &mut W, id: DomainId, number: usize, args: [usize; 6]) -> (usize, usize) {
    w.sched.current = id;
    space(w, id).activate();
    let ctx = &mut w.domains[id].ctx;
    ctx.number = number;
    ctx.args = args;
    match crate::on_user_trap(w, UserTrap::SystemCall) {
        Resume::Results(status, value) => (status, value),
        Resume::Context(_) => w.domains[id].ctx.results(),
    }
}

#[test]
fn unknown_calls_and_bad_arguments_get_error_codes() {
    let mut w = world(&[(64, 0), (64, 0)]);
    space(&w, D0).activate();
    for number in [0, 99, usize::MAX] {
        let next = syscall::dispatch(&mut w, D0, number, [0; 6]);
        assert!(matches!(next, Next::Return(Err(SysError::NoSuchCall))), "call {number}");
    }
    let wrong = |r: Result<usize, SysError>, e: SysError| assert_eq!(r, Err(e));
    wrong(
        call(&mut w, D0, Call::ConsoleWrite, &[0x1000, CONSOLE_MAX + 1]),
        SysError::InvalidArgument,
    );
    wrong(call(&mut w, D0, Call::ConsoleWrite, &[0x10, 8]), SysError::BadAddress);
    wrong(call(&mut w, D0, Call::ConsoleWrite, &[usize::MAX - 2, 8]), SysError::BadAddress);
    wrong(call(&mut w, D0, Call::StretchCreate, &[0, RW.0 as usize]), SysError::InvalidArgument);
    wrong(
        call(&mut w, D0, Call::StretchCreate, &[STRETCH_MAX + 1, RW.0 as usize]),
        SysError::InvalidArgument,
    );
    wrong(call(&mut w, D0, Call::StretchCreate, &[PAGE_SIZE, 0xff00]), SysError::InvalidArgument);
    wrong(call(&mut w, D0, Call::StretchCreate, &[1 << 20, RW.0 as usize]), SysError::NoMemory);
    wrong(call(&mut w, D0, Call::StretchDestroy, &[0x1234]), SysError::NotFound);
    let base = call(&mut w, D0, Call::StretchCreate, &[PAGE_SIZE, RW.0 as usize]).unwrap();
    wrong(call(&mut w, D0, Call::StretchRights, &[base, 7, RW.0 as usize]), SysError::NotFound);
    wrong(call(&mut w, D0, Call::StretchRights, &[base, usize::MAX, 1]), SysError::NotFound);
    wrong(
        call(&mut w, D1, Call::StretchRights, &[base, 1, RW.0 as usize]),
        SysError::PermissionDenied,
    );
    wrong(call(&mut w, D1, Call::StretchDestroy, &[base]), SysError::PermissionDenied);
    wrong(call(&mut w, D0, Call::FrameAlloc, &[7]), SysError::InvalidArgument);
    wrong(call(&mut w, D0, Call::FrameFree, &[usize::MAX]), SysError::NotFound);
    wrong(call(&mut w, D0, Call::FrameFree, &[12]), SysError::NotFound);
    assert!(call(&mut w, D0, Call::Map, &[base, 12, RW.0 as usize]).is_err());
    assert!(call(&mut w, D0, Call::Unmap, &[usize::MAX]).is_err());
    assert!(call(&mut w, D0, Call::Protect, &[base, 0xffff]).is_err());
    wrong(call(&mut w, D0, Call::Resume, &[base + 1]), SysError::InvalidArgument);
    wrong(call(&mut w, D0, Call::Resume, &[0x8]), SysError::BadAddress);
    wrong(call(&mut w, D0, Call::EventSend, &[9, 0]), SysError::NotFound);
    wrong(call(&mut w, D0, Call::TimerSet, &[40, 0]), SysError::NotFound);
    wrong(call(&mut w, D0, Call::DmaAlloc, &[PAGE_SIZE]), SysError::PermissionDenied);
    wrong(call(&mut w, D0, Call::DmaAddress, &[base]), SysError::PermissionDenied);
    wrong(call(&mut w, D0, Call::IrqAck, &[5]), SysError::NotFound);
    wrong(call(&mut w, D0, Call::ActivationSet, &[base + 1, 0]), SysError::InvalidArgument);
    wrong(call(&mut w, D0, Call::ActivationSet, &[0x1000, 0x2000]), SysError::BadAddress);
    assert!(call(&mut w, D0, Call::MapBatch, &[base, abi::MAP_BATCH_MAX + 1]).is_err());
    assert!(call(&mut w, D0, Call::PageState, &[base, usize::MAX, 0, 0]).is_err());
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The system-call fuzz target: 20,000 calls of domain D0 from seed `seed`, numbers around
/// the calls' range and arguments from values that matter and values seen, none of which may
/// panic; then both domains die and every frame comes back.
fn fuzzed_calls(seed: u64) {
    let free_before = mock::free_frames();
    let mut w = world(&[(256, 64), (64, 0)]);
    space(&w, D0).activate();
    let mut rng = Rng(seed);
    let mut seen: Vec<usize> = Vec::new();
    for _ in 0..20_000 {
        // Numbers around the calls' range; arguments from values that matter and values seen.
        let number = (rng.next() % 28) as usize;
        if [Call::Exit, Call::Block, Call::Yield, Call::Resume]
            .map(|c| c as usize)
            .contains(&number)
        {
            continue;
        }
        let mut a = [0usize; 6];
        for x in &mut a {
            *x = match rng.next() % 8 {
                0 => 0,
                1 => usize::MAX,
                2 => (rng.next() % 64) as usize,
                3 => (rng.next() % 0x3_0000) as usize,
                4 if !seen.is_empty() => seen[rng.next() as usize % seen.len()],
                5 if !seen.is_empty() => seen[rng.next() as usize % seen.len()] + PAGE_SIZE,
                6 => RW.0 as usize,
                _ => rng.next() as usize,
            };
        }
        let next = syscall::dispatch(&mut w, D0, number, a);
        if let Ok(v) = outcome(&mut w, D0, next)
            && v != 0
            && seen.len() < 64
        {
            seen.push(v);
        }
    }
    assert!(seen.len() > 4, "the fuzzer made too few calls succeed: {seen:?}");
    let held = mock::charged(D0);
    w.kill(D0, Ending::Exited(0));
    assert_eq!(mock::charged(D0), 0, "frames still charged after death (of {held})");
    w.kill(D1, Ending::Exited(0));
    assert_eq!(mock::free_frames(), free_before, "frames not all returned");
}

#[test]
fn fuzzed_calls_never_panic_and_death_returns_every_frame() {
    fuzzed_calls(0x5eed);
}

/// The system-call fuzz target for longer: rounds of [`fuzzed_calls`] for `KERNEL_FUZZ_SECONDS`
/// (default 60), seeds from `KERNEL_FUZZ_SEED` (default 1) on (`cargo xtask fuzz syscalls`).
#[test]
#[ignore]
fn fuzzed_calls_long() {
    let var = |name: &str, default: u64| {
        std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
    };
    let (seconds, first) = (var("KERNEL_FUZZ_SECONDS", 60), var("KERNEL_FUZZ_SEED", 1));
    let start = std::time::Instant::now();
    let mut seed = first;
    while start.elapsed().as_secs() < seconds {
        // Xorshift never leaves 0.
        fuzzed_calls(seed.max(1));
        seed += 1;
    }
    std::println!(
        "kernel fuzz: {} rounds of 20000 calls in {seconds} s from seed {first}, no failure",
        seed - first
    );
}

/// A managed stretch of `pages` pages of domain `id` and a guaranteed loose frame per page.
fn managed(w: &mut W, id: DomainId, pages: usize) -> (usize, Vec<usize>) {
    let base =
        call(w, id, Call::StretchCreateManaged, &[pages * PAGE_SIZE, RW.0 as usize]).unwrap();
    let frames = (0..pages)
        .map(|_| call(w, id, Call::FrameAlloc, &[frame_kind::GUARANTEED]).unwrap())
        .collect();
    (base, frames)
}

#[test]
fn map_unmap_protect_and_remap() {
    let mut w = world(&[(64, 0)]);
    let (base, f) = managed(&mut w, D0, 4);
    let rw = RW.0 as usize;
    assert_eq!(call(&mut w, D0, Call::Map, &[base, f[0], rw]), Ok(0));
    assert_eq!(space(&w, D0).mapping(base), Some(((f[0] * PAGE_SIZE) as u64, RW)));
    assert_eq!(call(&mut w, D0, Call::Map, &[base, f[1], rw]), Err(SysError::AlreadyMapped));
    assert_eq!(call(&mut w, D0, Call::Map, &[base + PAGE_SIZE, f[0], rw]), Err(SysError::InUse));
    assert_eq!(call(&mut w, D0, Call::FrameFree, &[f[0]]), Err(SysError::InUse));
    assert_eq!(call(&mut w, D0, Call::Map, &[base + 1, f[1], rw]), Err(SysError::InvalidArgument));
    assert_eq!(call(&mut w, D0, Call::Protect, &[base, Rights::READ.0 as usize]), Ok(0));
    assert_eq!(space(&w, D0).mapping(base), Some(((f[0] * PAGE_SIZE) as u64, Rights::READ)));
    // Remap: the frame moves from one page to another in one step, with the old page's state.
    let to = base + 2 * PAGE_SIZE;
    assert_eq!(call(&mut w, D0, Call::Remap, &[base, base, rw]), Err(SysError::InvalidArgument));
    let state = call(&mut w, D0, Call::Remap, &[base, to, rw]);
    assert_eq!(state.map(|s| s as u8 & abi::page_state::MAPPED), Ok(abi::page_state::MAPPED));
    assert_eq!(space(&w, D0).mapping(base), None);
    assert_eq!(space(&w, D0).mapping(to), Some(((f[0] * PAGE_SIZE) as u64, RW)));
    assert_eq!(call(&mut w, D0, Call::Remap, &[base, to, rw]), Err(SysError::NotMapped));
    assert_eq!(call(&mut w, D0, Call::FrameFree, &[f[0]]), Err(SysError::InUse));
    assert_eq!(call(&mut w, D0, Call::Unmap, &[to]), Ok(f[0]));
    assert_eq!(space(&w, D0).mapping(to), None);
    assert_eq!(call(&mut w, D0, Call::FrameFree, &[f[0]]), Ok(0));
    assert_eq!(call(&mut w, D0, Call::Unmap, &[to]), Err(SysError::NotMapped));
    // A page outside every managed stretch of the caller's.
    let nailed = call(&mut w, D0, Call::StretchCreate, &[PAGE_SIZE, rw]).unwrap();
    assert!(call(&mut w, D0, Call::Map, &[nailed, f[2], rw]).is_err());
}

/// Writes `ops` at `at` in domain `id`'s memory.
fn write_ops(w: &W, id: DomainId, at: usize, ops: &[PageOp]) {
    let bytes: Vec<u8> = ops
        .iter()
        .flat_map(|o| [o.op, o.va, o.frame, o.rights])
        .flat_map(u64::to_le_bytes)
        .collect();
    mock::poke(space(w, id).index(), at, &bytes).unwrap();
}

#[test]
fn map_batch_is_all_or_nothing_and_flushes_once() {
    let mut w = world(&[(64, 0)]);
    let (base, f) = managed(&mut w, D0, 4);
    let buf = call(&mut w, D0, Call::StretchCreate, &[PAGE_SIZE, RW.0 as usize]).unwrap();
    space(&w, D0).activate();
    let op = |op, i: usize, frame: usize| PageOp {
        op,
        va: (base + i * PAGE_SIZE) as u64,
        frame: frame as u64,
        rights: u64::from(RW.0),
    };
    // The third entry maps a frame the first already maps: refused at index 2, nothing done.
    write_ops(
        &w,
        D0,
        buf,
        &[op(page_op::MAP, 0, f[0]), op(page_op::MAP, 1, f[1]), op(page_op::MAP, 2, f[0])],
    );
    let next = syscall::dispatch(&mut w, D0, Call::MapBatch as usize, [buf, 3, 0, 0, 0, 0]);
    assert!(matches!(next, Next::Refused(_, 2)), "a bad third entry was not refused at 2");
    for i in 0..3 {
        assert_eq!(space(&w, D0).mapping(base + i * PAGE_SIZE), None, "a refused batch mapped {i}");
    }
    let ops: Vec<PageOp> = (0..4).map(|i| op(page_op::MAP, i, f[i])).collect();
    write_ops(&w, D0, buf, &ops);
    let flushes = space(&w, D0).flushes();
    let mapped = space(&w, D0).mapped();
    assert_eq!(call(&mut w, D0, Call::MapBatch, &[buf, 4]), Ok(0));
    assert_eq!(space(&w, D0).mapped(), mapped + 4);
    assert_eq!(space(&w, D0).flushes(), flushes + 1, "a batch flushes once");
    for (i, frame) in f.iter().enumerate() {
        assert_eq!(
            space(&w, D0).mapping(base + i * PAGE_SIZE),
            Some(((frame * PAGE_SIZE) as u64, RW))
        );
    }
    write_ops(&w, D0, buf, &[op(page_op::UNMAP, 0, 0), op(page_op::PROTECT, 1, 0)]);
    assert_eq!(call(&mut w, D0, Call::MapBatch, &[buf, 2]), Ok(0));
    assert_eq!(space(&w, D0).mapping(base), None);
    // The batch itself must be readable where it is said to be.
    assert_eq!(call(&mut w, D0, Call::MapBatch, &[0x1000, 2]), Err(SysError::BadAddress));
}

#[test]
fn large_stretches_are_filled_and_emptied_by_jobs() {
    let free_before = mock::free_frames();
    let mut w = world(&[(4 * CHUNK_PAGES as u64, 0)]);
    let charged = mock::charged(D0);
    let pages = 2 * CHUNK_PAGES + 3;
    let a = [pages * PAGE_SIZE, RW.0 as usize, 0, 0, 0, 0];
    let Next::Job(job) = syscall::dispatch(&mut w, D0, Call::StretchCreate as usize, a) else {
        panic!("a large stretch was not made by a job")
    };
    assert!(w.stretches.values().any(|s| s.busy), "the stretch is not busy while it is filled");
    w.domains[D0].job = Some(job);
    let mut chunks = 0;
    bounded("the fill", || {
        chunks += 1;
        w.run_job(D0, 0)
    });
    chunks -= 1;
    assert!(chunks >= 2, "a job of {pages} pages ran in {chunks} chunks");
    let (status, base) = w.domains[D0].ctx.results();
    assert_eq!(status, 0);
    let s = w.stretches.get(&base).unwrap();
    assert!(!s.busy && s.frames.iter().all(Option::is_some));
    assert!(mock::charged(D0) >= charged + pages as u64);
    assert_eq!(call(&mut w, D0, Call::StretchDestroy, &[base]), Ok(0));
    assert!(w.stretches.get(&base).is_none());
    assert_eq!(mock::charged(D0), charged, "destroying the stretch left frames charged");
    w.kill(D0, Ending::Exited(0));
    assert_eq!(mock::free_frames(), free_before);
}

#[test]
fn events_reach_only_allowed_endpoints_and_wake_the_receiver() {
    let mut w = world(&[(64, 0), (64, 0)]);
    // An endpoint of domain 1 that domain 0 may signal, as a channel makes it.
    let ep = w.alloc_endpoint(D1, D0.raw()).unwrap();
    let own = call(&mut w, D1, Call::TimerAlloc, &[]).unwrap();
    assert_eq!(call(&mut w, D0, Call::EventSend, &[1, own]), Err(SysError::PermissionDenied));
    assert_eq!(call(&mut w, D0, Call::EventSend, &[1, ep + 100]), Err(SysError::InvalidArgument));
    assert_eq!(call(&mut w, D0, Call::EventSend, &[5, ep]), Err(SysError::NotFound));
    w.domains[D1].blocked = Some(u64::MAX);
    assert_eq!(call(&mut w, D0, Call::EventSend, &[1, ep]), Ok(0));
    let dcb = Mock::dcb(w.domains[D1].dcb.unwrap());
    assert_eq!(dcb.events[ep].value.load(core::sync::atomic::Ordering::Acquire), 1);
    assert!(w.domains[D1].blocked.is_none(), "the receiver was not woken");
    // Sent to while it runs: its next block returns at once.
    assert_eq!(call(&mut w, D0, Call::EventSend, &[1, ep]), Ok(0));
    assert!(w.domains[D1].pending);
    assert_eq!(dcb.events[ep].value.load(core::sync::atomic::Ordering::Acquire), 2);
    assert!(matches!(
        syscall::dispatch(&mut w, D1, Call::Block as usize, [usize::MAX, 0, 0, 0, 0, 0]),
        Next::Return(Ok(0))
    ));
    // A timer endpoint fires once its deadline passes.
    let now_ns = crate::clock::now_ns::<Mock>();
    assert_eq!(call(&mut w, D1, Call::TimerSet, &[own, (now_ns + 1_000_000) as usize]), Ok(0));
    mock::advance(HZ / 100);
    let _ = trap(&mut w, D0, Call::Null as usize, [0; 6]);
    let _ = crate::on_user_trap(&mut w, UserTrap::Timer);
    assert_eq!(dcb.events[own].value.load(core::sync::atomic::Ordering::Acquire), 1);
}

#[test]
fn the_trap_entry_returns_results_and_errors() {
    let mut w = world(&[(64, 0), (64, 0)]);
    assert_eq!(trap(&mut w, D0, Call::Null as usize, [0; 6]), (0, 0));
    assert_eq!(trap(&mut w, D0, 12345, [0; 6]), (SysError::NoSuchCall as usize, 0));
    let (status, base) = trap(&mut w, D1, Call::StretchCreate as usize, [PAGE_SIZE, 3, 0, 0, 0, 0]);
    assert_eq!(status, 0);
    assert!(w.stretches.get(&base).is_some_and(|s| s.owner == D1));
}

/// A domain number from user space that names no live domain (past the last domain, past
/// `u32`, or a dead domain's) gets `NotFound` from the calls that take one (`event_send`,
/// `stretch_rights`), through the trap entry, and changes nothing.
#[test]
fn forged_domain_numbers_get_not_found() {
    let mut w = world(&[(64, 0), (64, 0), (64, 0)]);
    let rw = RW.0 as usize;
    let not_found = (SysError::NotFound as usize, 0);
    // An endpoint of domain 2 that domain 0 may signal, and a stretch of domain 0's.
    let ep = w.alloc_endpoint(D2, D0.raw()).unwrap();
    let (status, base) =
        trap(&mut w, D0, Call::StretchCreate as usize, [PAGE_SIZE, rw, 0, 0, 0, 0]);
    assert_eq!(status, 0);
    assert_eq!(trap(&mut w, D0, Call::EventSend as usize, [2, ep, 0, 0, 0, 0]), (0, 0));
    w.kill(D2, Ending::Exited(0));
    let past = [3, 4, u32::MAX as usize, u32::MAX as usize + 1, usize::MAX];
    // Domain 2 is dead: its number names a record, but no live domain.
    for forged in past.into_iter().chain([2]) {
        let send = [forged, ep, 0, 0, 0, 0];
        let rights = [base, forged, rw, 0, 0, 0];
        assert_eq!(trap(&mut w, D0, Call::EventSend as usize, send), not_found, "{forged:#x}");
        assert_eq!(
            trap(&mut w, D0, Call::StretchRights as usize, rights),
            not_found,
            "{forged:#x}"
        );
    }
    let holders: Vec<DomainId> = w.stretches[&base].rights.iter().map(|&(d, _)| d).collect();
    assert_eq!(holders, [D0], "a refused call changed the stretch's rights");
    // A live domain's number still works.
    assert_eq!(trap(&mut w, D0, Call::StretchRights as usize, [base, 1, rw, 0, 0, 0]), (0, 0));
}

#[test]
fn revocation_kills_a_domain_that_ignores_its_deadline() {
    let free_before = mock::free_frames();
    // Domain 0 takes every optimistic frame it can; domain 1 then needs guaranteed ones.
    let mut w = world(&[(64, mock::FRAMES), (2048, 0), (64, 0)]);
    let optimistic = take_all(&mut w, D0, frame_kind::OPTIMISTIC).len();
    assert!(optimistic > 1000, "only {optimistic} optimistic frames");
    let mut next = Next::Yield;
    for _ in 0..2048 {
        next = syscall::dispatch(
            &mut w,
            D1,
            Call::FrameAlloc as usize,
            [frame_kind::GUARANTEED, 0, 0, 0, 0, 0],
        );
        if !matches!(next, Next::Return(Ok(_))) {
            break;
        }
    }
    assert!(matches!(next, Next::WaitForFrames), "the guaranteed allocation did not wait");
    let r = w.domains[D0].revocation.as_ref().expect("no revocation sent to the optimistic holder");
    let (wanted, deadline_ns) = (r.wanted, r.deadline_ns);
    assert!(wanted > 0);
    let dcb = Mock::dcb(w.domains[D0].dcb.unwrap());
    assert_eq!(dcb.revocation.frames_wanted.load(core::sync::atomic::Ordering::Acquire), wanted);
    // Domain 1's call waits, through the trap entry (which makes it run again once woken);
    // domain 2 runs meanwhile.
    w.domains[D1].ctx.pc = 0x1004;
    let _ = trap(&mut w, D1, Call::FrameAlloc as usize, [frame_kind::GUARANTEED, 0, 0, 0, 0, 0]);
    assert!(w.domains[D1].waiting_for_frames);
    // Before the deadline: nothing happens to the holder.
    mock::advance(crate::clock::ticks_from_ns::<Mock>(deadline_ns / 2));
    let _ = trap(&mut w, D2, Call::Null as usize, [0; 6]);
    let _ = crate::on_user_trap(&mut w, UserTrap::Timer);
    assert!(w.domains[D0].ending.is_none(), "the holder was killed before its deadline");
    // Past it: killed, its frames taken back, the waiter woken to run its call again.
    mock::advance(crate::clock::ticks_from_ns::<Mock>(deadline_ns));
    for _ in 0..1000 {
        let _ = crate::on_user_trap(&mut w, UserTrap::Timer);
        mock::advance(HZ / 1000);
        if w.domains[D0].job.is_none() && w.domains[D0].ending.is_some() {
            break;
        }
    }
    assert_eq!(w.domains[D0].ending, Some(Ending::Terminated(Termination::RevocationIgnored)));
    assert_eq!(mock::charged(D0), 0, "the killed holder's frames are still charged");
    assert!(!w.domains[D1].waiting_for_frames && w.domains[D1].blocked.is_none());
    assert_eq!(w.domains[D1].ctx.pc, 0x1000, "the waiting call was not made to run again");
    w.kill(D1, Ending::Exited(0));
    w.kill(D2, Ending::Exited(0));
    assert_eq!(mock::free_frames(), free_before);
}

#[test]
fn a_holder_that_complies_keeps_running() {
    let mut w = world(&[(64, mock::FRAMES), (2048, 0)]);
    let held = take_all(&mut w, D0, frame_kind::OPTIMISTIC);
    take_all(&mut w, D1, frame_kind::GUARANTEED);
    let wanted = w.domains[D0].revocation.as_ref().expect("no revocation").wanted;
    for f in held.iter().take(wanted as usize) {
        assert_eq!(call(&mut w, D0, Call::FrameFree, &[*f]), Ok(0));
    }
    assert!(w.domains[D0].revocation.is_none(), "the notice outlived its answer");
    mock::advance(10 * HZ);
    let _ = trap(&mut w, D1, Call::Null as usize, [0; 6]);
    let _ = crate::on_user_trap(&mut w, UserTrap::Timer);
    assert!(w.domains[D0].ending.is_none(), "a holder that complied was killed");
    assert!(call(&mut w, D1, Call::FrameAlloc, &[frame_kind::GUARANTEED]).is_ok());
}

#[test]
fn exit_takes_a_domain_apart_and_returns_every_frame() {
    let free_before = mock::free_frames();
    let mut w = world(&[(256, 16), (64, 0)]);
    // Stretches, a shared one, a managed one with mapped loose frames, optimistic frames.
    let rw = RW.0 as usize;
    let charged_1 = mock::charged(D1);
    let shared = call(&mut w, D0, Call::StretchCreate, &[3 * PAGE_SIZE, rw]).unwrap();
    assert_eq!(call(&mut w, D0, Call::StretchRights, &[shared, 1, rw]), Ok(0));
    assert!(space(&w, D1).mapping(shared).is_some());
    let (base, f) = managed(&mut w, D0, 3);
    for (i, frame) in f.iter().enumerate() {
        assert_eq!(call(&mut w, D0, Call::Map, &[base + i * PAGE_SIZE, *frame, rw]), Ok(0));
    }
    for _ in 0..5 {
        call(&mut w, D0, Call::FrameAlloc, &[frame_kind::OPTIMISTIC]).unwrap();
    }
    let _ = call(&mut w, D0, Call::StretchCreate, &[(CHUNK_PAGES + 5) * PAGE_SIZE, rw]).unwrap();
    // The exit, through the trap entry; the teardown runs on the switches that follow.
    let _ = trap(&mut w, D0, Call::Exit as usize, [7, 0, 0, 0, 0, 0]);
    for _ in 0..1000 {
        if w.domains[D0].job.is_none() {
            break;
        }
        mock::advance(HZ / 1000);
        let _ = crate::on_user_trap(&mut w, UserTrap::Timer);
    }
    assert_eq!(w.domains[D0].ending, Some(Ending::Exited(7)));
    assert_eq!(mock::charged(D0), 0, "frames still charged after the teardown");
    assert!(space(&w, D1).mapping(shared).is_none(), "the dead domain's stretch is still mapped");
    assert_eq!(mock::charged(D1), charged_1, "the tables mapping the shared stretch stayed");
    assert_eq!(call(&mut w, D1, Call::StretchDestroy, &[shared]), Err(SysError::NotFound));
    w.kill(D1, Ending::Exited(0));
    assert_eq!(mock::free_frames(), free_before, "frames not all returned");
}

#[test]
fn the_machine_checks_pass_on_the_mock() {
    // `kernel_arena` needs arenas that hold frames, which the mock does not model.
    assert_eq!(checks::scrub_on_death::<Mock>(), Ok(()));
    assert_eq!(checks::tables_follow_mappings::<Mock>(), Ok(()));
    assert_eq!(checks::contract_and_overlap::<Mock>(), Ok(()));
    assert_eq!(checks::revocation_window(), Ok(()));
    assert_eq!(checks::event_while_waiting_for_frames::<Mock>(), Ok(()));
    assert_eq!(checks::deadlock_leaves_restarted_calls_alone::<Mock>(), Ok(()));
    assert_eq!(checks::address_quota_reuse(), Ok(()));
}

/// A world of a client (domain 0) with a managed page mapped, a driver domain (1) the client
/// has a channel to (an endpoint of the driver's it may signal), and a third domain (2): the
/// page, its frame number and the driver's endpoint.
fn lending_world() -> (W, usize, usize, usize) {
    let mut w = world(&[(64, 0), (64, 0), (64, 0)]);
    w.domains[D1].driver = true;
    let ep = w.alloc_endpoint(D1, D0.raw()).unwrap();
    let (base, f) = managed(&mut w, D0, 2);
    assert_eq!(call(&mut w, D0, Call::Map, &[base, f[0], RW.0 as usize]), Ok(0));
    (w, base, f[0], ep)
}

const READS: usize = abi::loan_access::DEVICE_READS;
const WRITES: usize = abi::loan_access::DEVICE_WRITES;

#[test]
fn a_lent_frame_is_never_writable_by_both_and_comes_back_at_return() {
    let (mut w, page, frame, ep) = lending_world();
    let pa = (frame * PAGE_SIZE) as u64;
    // Lent for the device to write: the client's entry goes, the driver learns the address.
    let loan = call(&mut w, D0, Call::FrameLend, &[page, 1, ep, WRITES]).unwrap();
    assert_eq!(abi::loan_lender(loan as u64), D0.raw());
    assert_eq!(
        space(&w, D0).mapping(page),
        None,
        "the lender still sees a frame lent to be written"
    );
    assert_eq!(call(&mut w, D1, Call::LoanAddress, &[loan, 0, PAGE_SIZE]), Ok(pa as usize));
    // While lent the page cannot change, nor be lent again, nor its stretch go.
    let rw = RW.0 as usize;
    assert_eq!(call(&mut w, D0, Call::Unmap, &[page]), Err(SysError::InUse));
    assert_eq!(call(&mut w, D0, Call::Protect, &[page, rw]), Err(SysError::InUse));
    assert_eq!(call(&mut w, D0, Call::Remap, &[page, page + PAGE_SIZE, rw]), Err(SysError::InUse));
    assert_eq!(call(&mut w, D0, Call::FrameFree, &[frame]), Err(SysError::InUse));
    assert_eq!(call(&mut w, D0, Call::FrameLend, &[page, 1, ep, READS]), Err(SysError::InUse));
    assert_eq!(call(&mut w, D0, Call::StretchDestroy, &[page]), Err(SysError::InUse));
    // The lender may not take back a loan the driver has used.
    assert_eq!(call(&mut w, D0, Call::FrameReturn, &[loan]), Err(SysError::InUse));
    // Returned: the mapping and its rights are back; the handle names nothing any more.
    assert_eq!(call(&mut w, D1, Call::FrameReturn, &[loan]), Ok(0));
    assert_eq!(space(&w, D0).mapping(page), Some((pa, RW)));
    assert_eq!(call(&mut w, D1, Call::LoanAddress, &[loan, 0, PAGE_SIZE]), Err(SysError::NotFound));
    assert_eq!(call(&mut w, D1, Call::FrameReturn, &[loan]), Err(SysError::NotFound));
    // Lent for the device to read: read-only for the lender meanwhile.
    let loan = call(&mut w, D0, Call::FrameLend, &[page, 1, ep, READS]).unwrap();
    assert_eq!(space(&w, D0).mapping(page), Some((pa, Rights::READ)));
    // Unused, the lender may take it back (the driver refused the request).
    assert_eq!(call(&mut w, D0, Call::FrameReturn, &[loan]), Ok(0));
    assert_eq!(space(&w, D0).mapping(page), Some((pa, RW)));
    assert_eq!(call(&mut w, D0, Call::Unmap, &[page]), Ok(frame));
}

#[test]
fn lending_refuses_what_is_not_the_lenders_and_whom_it_has_no_channel_to() {
    let (mut w, page, _, ep) = lending_world();
    // A domain with no channel to the driver (no endpoint of its that it may signal).
    let (other, of) = managed(&mut w, D2, 1);
    assert_eq!(call(&mut w, D2, Call::Map, &[other, of[0], RW.0 as usize]), Ok(0));
    assert_eq!(
        call(&mut w, D2, Call::FrameLend, &[other, 1, ep, READS]),
        Err(SysError::PermissionDenied)
    );
    // Another's page, an unmapped page, a nailed page, a bad address.
    let ep_of_2 = w.alloc_endpoint(D1, D2.raw()).unwrap();
    assert_eq!(
        call(&mut w, D2, Call::FrameLend, &[page, 1, ep_of_2, READS]),
        Err(SysError::BadAddress)
    );
    assert_eq!(
        call(&mut w, D0, Call::FrameLend, &[page + PAGE_SIZE, 1, ep, READS]),
        Err(SysError::NotMapped)
    );
    let nailed = call(&mut w, D0, Call::StretchCreate, &[PAGE_SIZE, RW.0 as usize]).unwrap();
    assert_eq!(
        call(&mut w, D0, Call::FrameLend, &[nailed, 1, ep, READS]),
        Err(SysError::NotManaged)
    );
    assert_eq!(
        call(&mut w, D0, Call::FrameLend, &[page + 8, 1, ep, READS]),
        Err(SysError::InvalidArgument)
    );
    // A bad access, endpoint or domain.
    assert_eq!(
        call(&mut w, D0, Call::FrameLend, &[page, 1, ep, 7]),
        Err(SysError::InvalidArgument)
    );
    assert_eq!(
        call(&mut w, D0, Call::FrameLend, &[page, 1, ep + 9, READS]),
        Err(SysError::InvalidArgument)
    );
    assert_eq!(call(&mut w, D0, Call::FrameLend, &[page, 99, ep, READS]), Err(SysError::NotFound));
    // A domain it has a channel to that is not a driver.
    let ep2 = w.alloc_endpoint(D2, D0.raw()).unwrap();
    assert_eq!(
        call(&mut w, D0, Call::FrameLend, &[page, 2, ep2, READS]),
        Err(SysError::PermissionDenied)
    );
    // A read-only page is not lent to be written.
    assert_eq!(call(&mut w, D0, Call::Protect, &[page, Rights::READ.0 as usize]), Ok(0));
    assert_eq!(
        call(&mut w, D0, Call::FrameLend, &[page, 1, ep, WRITES]),
        Err(SysError::PermissionDenied)
    );
    let loan = call(&mut w, D0, Call::FrameLend, &[page, 1, ep, READS]).unwrap();
    // Only the borrower learns the address, for this lender, within the page.
    assert_eq!(call(&mut w, D2, Call::LoanAddress, &[loan, 0, PAGE_SIZE]), Err(SysError::NotFound));
    assert_eq!(
        call(&mut w, D1, Call::LoanAddress, &[loan, 2, PAGE_SIZE]),
        Err(SysError::PermissionDenied)
    );
    assert_eq!(
        call(&mut w, D1, Call::LoanAddress, &[loan, 0, PAGE_SIZE + 1]),
        Err(SysError::InvalidArgument)
    );
    assert_eq!(call(&mut w, D1, Call::LoanAddress, &[loan, 0, 0]), Err(SysError::InvalidArgument));
    assert_eq!(call(&mut w, D2, Call::FrameReturn, &[loan]), Err(SysError::NotFound));
    assert_eq!(
        call(&mut w, D1, Call::LoanAddress, &[loan ^ 0x100, 0, 512]),
        Err(SysError::NotFound)
    );
    assert_eq!(call(&mut w, D1, Call::FrameReturn, &[loan]), Ok(0));
}

#[test]
fn loans_are_bounded_and_charged_to_the_lender() {
    let mut w = world(&[(256, 0), (64, 0)]);
    w.domains[D1].driver = true;
    let ep = w.alloc_endpoint(D1, D0.raw()).unwrap();
    let (base, f) = managed(&mut w, D0, abi::MAX_LOANS + 1);
    for (i, frame) in f.iter().enumerate() {
        assert_eq!(
            call(&mut w, D0, Call::Map, &[base + i * PAGE_SIZE, *frame, RW.0 as usize]),
            Ok(0)
        );
    }
    let loans: Vec<usize> = (0..abi::MAX_LOANS)
        .map(|i| call(&mut w, D0, Call::FrameLend, &[base + i * PAGE_SIZE, 1, ep, READS]).unwrap())
        .collect();
    let last = base + abi::MAX_LOANS * PAGE_SIZE;
    assert_eq!(call(&mut w, D0, Call::FrameLend, &[last, 1, ep, READS]), Err(SysError::NoMemory));
    // The records live in the lender's arena (on the machine, frames charged to it; see the
    // kernel test `domains::loans`).
    assert_eq!(w.domains[D0].loans.len(), abi::MAX_LOANS);
    for loan in loans {
        assert_eq!(call(&mut w, D1, Call::FrameReturn, &[loan]), Ok(0));
    }
    assert!(call(&mut w, D0, Call::FrameLend, &[last, 1, ep, READS]).is_ok());
}

#[test]
fn a_dying_driver_gives_back_what_it_borrowed() {
    let (mut w, page, frame, ep) = lending_world();
    let pa = (frame * PAGE_SIZE) as u64;
    let loan = call(&mut w, D0, Call::FrameLend, &[page, 1, ep, WRITES]).unwrap();
    assert_eq!(call(&mut w, D1, Call::LoanAddress, &[loan, 0, PAGE_SIZE]), Ok(pa as usize));
    w.kill(D1, Ending::Exited(0));
    assert_eq!(space(&w, D0).mapping(page), Some((pa, RW)), "the frame did not come back");
    assert_eq!(call(&mut w, D0, Call::FrameReturn, &[loan]), Err(SysError::NotFound));
    assert_eq!(call(&mut w, D0, Call::Unmap, &[page]), Ok(frame));
    assert_eq!(call(&mut w, D0, Call::FrameFree, &[frame]), Ok(0));
}

#[test]
fn a_frame_lent_by_a_dead_domain_is_freed_only_when_the_loan_ends() {
    let free_before = mock::free_frames();
    let (mut w, page, frame, ep) = lending_world();
    let loan = call(&mut w, D0, Call::FrameLend, &[page, 1, ep, WRITES]).unwrap();
    assert_eq!(call(&mut w, D1, Call::LoanAddress, &[loan, 0, PAGE_SIZE]), Ok(frame * PAGE_SIZE));
    w.kill(D0, Ending::Exited(0));
    // The device may still write it: the frame is still the dead lender's.
    assert_eq!(mock::charged(D0), 1, "the lent frame was freed under the device");
    assert_eq!(call(&mut w, D1, Call::FrameReturn, &[loan]), Ok(0));
    assert_eq!(mock::charged(D0), 0, "the lent frame was not freed when the loan ended");
    w.kill(D1, Ending::Exited(0));
    w.kill(D2, Ending::Exited(0));
    assert_eq!(mock::free_frames(), free_before, "frames not all returned");
}
