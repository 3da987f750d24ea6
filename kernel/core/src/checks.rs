//! The core's checks of domain teardown, memory contracts and scheduling corners, generic over
//! the platform: the kernel runs them on the machine (`test=domains::...`, over real frames
//! and page tables), the host tests run them against the mock.

use alloc::vec;
use alloc::vec::Vec;

use abi::{PAGE_SIZE, Rights, SysError};
use frame_allocator::Owner;

use crate::address::AddressQuota;
use crate::contract::{AddressSpaceOps, UserContextOps};
use crate::platform::KernelArena as _;
use crate::stretch::Kind;
use crate::{DomainId, Ending, Platform, World, frames, paging};

/// A check failed: the condition that did not hold (its message went to the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed(pub &'static str);

/// A check's result.
pub type Outcome = Result<(), Failed>;

/// Fails the check with a logged message when `cond` is false.
macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            error!("check failed: {=str}", stringify!($cond));
            error!($($msg)+);
            return Err(Failed(stringify!($cond)));
        }
    };
}

/// A private world (not the kernel's) with domain 0 called `name`, allowed `frames` frames.
fn world_with_one_domain<P: Platform>(
    name: &str,
    guaranteed: u64,
) -> Result<(World<P>, DomainId), Failed> {
    let mut w = World::<P>::new();
    let id = add::<P>(&mut w, name, guaranteed)?;
    Ok((w, id))
}

/// Adds a domain called `name`, allowed `guaranteed` frames, to `w`; its identifier.
fn add<P: Platform>(w: &mut World<P>, name: &str, guaranteed: u64) -> Result<DomainId, Failed> {
    let id = w.domains.next_id().ok_or(Failed("setup"))?;
    let space = P::Space::new(id.owner()).map_err(|_| Failed("setup"))?;
    let quota = w.region.share(1 << 30).ok_or(Failed("setup"))?;
    w.add_domain(name, space, guaranteed, 0, quota).ok_or(Failed("setup"))
}

/// A dead domain's frames are back in the free pool (freeing does not write them), its page
/// tables are freed too, and the next owner of its frames reads zeros: a frame is zeroed
/// once, when it is allocated.
pub fn scrub_on_death<P: Platform>() -> Outcome {
    let free_before = P::with_frames(|fa| fa.free_count());
    let (mut w, id) = world_with_one_domain::<P>("scrub-test", 64)?;
    let pattern = vec![0xa5u8; 8 * PAGE_SIZE];
    let base = abi::STRETCH_BASE;
    let made =
        w.create_stretch(id, base, 8, Rights::READ.union(Rights::WRITE), Kind::Dynamic, &pattern);
    check!(made.is_ok(), "create_stretch failed: {}", made);
    let frames: Vec<frame_allocator::Frame> =
        w.stretches[&base].frames.iter().flatten().copied().collect();
    let charged = P::with_frames(|fa| fa.owned_by(id.owner()));
    check!(charged > 8, "only {=u64} frames charged for 8 pages and tables", charged);
    let first = P::bytes(frames[0].addr(), PAGE_SIZE);
    check!(first.iter().all(|&b| b == 0xa5), "the stretch did not receive its contents");
    w.kill(id, Ending::Exited(0));
    check!(P::with_frames(|fa| fa.owned_by(id.owner())) == 0, "frames still charged");
    check!(P::with_frames(|fa| fa.free_count()) == free_before, "frames not all returned");
    for f in &frames {
        check!(P::with_frames(|fa| fa.owner(*f)) == Ok(Owner::Free), "a frame is not free");
    }
    // The next owner: every frame it gets reads zero, the dead domain's among them (the
    // allocator hands frames out next-fit, so this may take every free frame).
    let mut next = Vec::new();
    while !frames.iter().all(|f| next.contains(f)) {
        match frames::alloc_zeroed::<P>(Owner::Kernel) {
            Ok(f) => next.push(f),
            Err(_) => break,
        }
    }
    let reused = frames.iter().filter(|f| next.contains(f)).count();
    let clean = next.iter().all(|f| P::bytes(f.addr(), PAGE_SIZE).iter().all(|&b| b == 0));
    next.into_iter().for_each(|f| {
        let _ = frames::free::<P>(f, Owner::Kernel);
    });
    check!(reused == frames.len(), "only {=usize} of the dead domain's frames came back", reused);
    check!(clean, "a reused frame still held the dead domain's data");
    check!(P::with_frames(|fa| fa.free_count()) == free_before, "frames not all returned");
    Ok(())
}

/// Page tables follow what they map: creating and destroying stretches in ever new regions
/// of the address space (ranges are never reused) leaves the domain's charge where it was.
pub fn tables_follow_mappings<P: Platform>() -> Outcome {
    let (mut w, id) = world_with_one_domain::<P>("tables-test", 64)?;
    let rw = Rights::READ.union(Rights::WRITE);
    let first = w.domains[id].address.take(1).ok_or(Failed("setup"))?;
    let made = w.create_stretch(id, first, 1, rw, Kind::Dynamic, &[]);
    check!(made.is_ok(), "the first stretch failed: {}", made);
    let baseline = w.domains.charged(id);
    for i in 0..200usize {
        // 2 MiB apart: every stretch needs a fresh level-0 table, every 512 a level-1 one.
        let base = abi::STRETCH_BASE + (1 + i) * (2 << 20);
        let made = w.create_stretch(id, base, 1, rw, Kind::Dynamic, &[]);
        check!(made.is_ok(), "stretch {=usize} failed: {}", i, made);
        w.destroy_stretch(base);
    }
    let after = w.domains.charged(id);
    check!(after == baseline, "charge grew from {=u64} to {=u64} frames", baseline, after);
    w.kill(id, Ending::Exited(0));
    Ok(())
}

/// Contract enforcement: a stretch larger than the guarantee is refused with `NoMemory`
/// and leaves nothing behind; overlapping stretches are refused.
pub fn contract_and_overlap<P: Platform>() -> Outcome {
    let free_before = P::with_frames(|fa| fa.free_count());
    let (mut w, id) = world_with_one_domain::<P>("contract-test", 16)?;
    let rw = Rights::READ.union(Rights::WRITE);
    let base = abi::STRETCH_BASE;
    let big = w.create_stretch(id, base, 32, rw, Kind::Dynamic, &[]);
    check!(big == Err(SysError::NoMemory), "over-contract stretch gave {}", big);
    let ok = w.create_stretch(id, base, 4, rw, Kind::Dynamic, &[]);
    check!(ok.is_ok(), "a stretch within the contract failed: {}", ok);
    let overlap = w.create_stretch(id, base + PAGE_SIZE, 2, rw, Kind::Dynamic, &[]);
    check!(overlap == Err(SysError::InvalidArgument), "overlap gave {}", overlap);
    w.kill(id, Ending::Exited(0));
    check!(P::with_frames(|fa| fa.free_count()) == free_before, "frames not all returned");
    Ok(())
}

/// Kernel objects come from the domain's own frames: the record of a managed stretch
/// (larger than a frame) is made in the domain's arena, charged to it, and never in the
/// kernel heap; once the guarantee cannot hold another, the call fails with `NoMemory` and
/// leaves nothing behind; at death the arena's frames come back.
pub fn kernel_arena<P: Platform>() -> Outcome {
    let free_before = P::with_frames(|fa| fa.free_count());
    let (mut w, id) = world_with_one_domain::<P>("arena-test", 64)?;
    let heap_before = P::heap_used();
    let rw = Rights::READ.union(Rights::WRITE).0 as usize;
    // 4,096 pages: a record of about 68 KiB, 17 frames.
    let mut made = 0;
    let refused = loop {
        match w.create_managed_stretch(id, 4096 * PAGE_SIZE, rw) {
            Ok(_) => made += 1,
            Err(e) => break e,
        }
        check!(made < 8, "64 frames held the records of {=u32} managed stretches", made);
    };
    check!(made >= 2, "only {=u32} managed stretches of 4,096 pages in 64 frames", made);
    check!(
        matches!(refused, paging::Shortage::Fail(SysError::NoMemory)),
        "the stretch beyond the guarantee was not refused with NoMemory"
    );
    let arena = w.domains[id].arena.frames();
    check!(arena >= 17 * made as u64, "{=u64} arena frames for {=u32} records", arena, made);
    let used = w.domains.guaranteed_used(id);
    check!(used <= 64, "{=u64} frames held on a guarantee of 64", used);
    check!(P::heap_used() == heap_before, "records went to the kernel heap");
    w.kill(id, Ending::Exited(0));
    check!(w.domains[id].arena.frames() == 0, "the arena kept frames after death");
    check!(P::with_frames(|fa| fa.free_count()) == free_before, "frames not all returned");
    check!(P::heap_used() == heap_before, "the kernel heap changed");
    Ok(())
}

/// A revocation's deadline leaves a victim its CPU contract's time to release frames, and
/// a victim with a disk contract also the disk time to write them back, each bounded.
pub fn revocation_window() -> Outcome {
    use paging::{REVOCATION_BOUND_NS, REVOCATION_DISK_BOUND_NS, revocation_window};
    let cpu = atropos::Contract {
        period: 10_000_000,
        slice: 2_000_000,
        extra: false,
        latency: 10_000_000,
    };
    // 100 frames, 1 ms of CPU: one slice, one period more.
    check!(revocation_window(Some(cpu), None, 100) == 20_000_000, "cpu window");
    check!(revocation_window(Some(cpu), None, 1500) == REVOCATION_BOUND_NS, "cpu bound");
    // 10 frames, 10 ms of a disk contract of 50 ms every 100 ms: 200 ms, more than the CPU's.
    let disk = Some((100_000_000, 50_000_000));
    check!(revocation_window(Some(cpu), disk, 10) == 200_000_000, "disk window");
    let slow = Some((1_000_000_000, 100_000_000));
    check!(revocation_window(Some(cpu), slow, 1000) == REVOCATION_DISK_BOUND_NS, "disk bound");
    // A disk contract never shortens the CPU's window.
    check!(revocation_window(Some(cpu), Some((1_000_000, 1_000_000)), 1) >= 20_000_000, "max");
    check!(revocation_window(Some(cpu), Some((1, 0)), 100) == 20_000_000, "zero slice");
    Ok(())
}

/// A domain blocked in a memory call that waits for frames, woken by an event: it keeps
/// waiting for frames, and the event stays pending for its next `block` (which must not
/// sleep through it).
pub fn event_while_waiting_for_frames<P: Platform>() -> Outcome {
    let (mut w, id) = world_with_one_domain::<P>("pending-test", 16)?;
    let d = &mut w.domains[id];
    d.blocked = Some(u64::MAX);
    d.waiting_for_frames = true;
    w.wake(id);
    let d = &w.domains[id];
    check!(d.pending, "the event was lost: pending is not set");
    check!(d.waiting_for_frames, "the memory call no longer waits for frames");
    check!(d.blocked == Some(u64::MAX), "the domain was unblocked by the event");
    w.kill(id, Ending::Exited(0));
    Ok(())
}

/// When every domain is blocked for good, a memory call waiting for frames runs again
/// with its arguments untouched, while a `block` returns `WouldDeadlock`.
pub fn deadlock_leaves_restarted_calls_alone<P: Platform>() -> Outcome {
    let (mut w, id) = world_with_one_domain::<P>("deadlock-test", 16)?;
    let blocker_id = add::<P>(&mut w, "blocker", 16)?;
    let args = [0x1234, 0x5678, 3, 4];
    for (_, d) in w.domains.iter_mut() {
        *d.ctx = P::Context::new_user(0x1000, 0x2000, args);
        d.blocked = Some(u64::MAX);
    }
    w.domains[id].waiting_for_frames = true;
    w.break_deadlock();
    let (waiter, blocker) = (w.domains[id].ctx.call().1, w.domains[blocker_id].ctx.results());
    check!(
        waiter[..2] == [0x1234, 0x5678],
        "the restarted call's arguments were overwritten: {=usize:#x}, {=usize:#x}",
        waiter[0],
        waiter[1]
    );
    check!(!w.domains[id].waiting_for_frames, "the memory call still waits for frames");
    check!(
        blocker.0 == SysError::WouldDeadlock as usize,
        "block did not return WouldDeadlock: status {=usize:#x}",
        blocker.0
    );
    check!(w.domains.records().all(|d| d.blocked.is_none()), "a domain is still blocked");
    w.kill(blocker_id, Ending::Exited(0));
    w.kill(id, Ending::Exited(0));
    Ok(())
}

/// A domain's address space: ranges come with a guard page, are reused once given back
/// (merging with their neighbours), and the quota is a hard limit.
pub fn address_quota_reuse() -> Outcome {
    let mut q = AddressQuota::new(abi::STRETCH_BASE, 64 * PAGE_SIZE).ok_or(Failed("setup"))?;
    let a = q.take(10).ok_or(Failed("setup"))?;
    let b = q.take(10).ok_or(Failed("setup"))?;
    check!(a == abi::STRETCH_BASE + PAGE_SIZE, "the first range has no guard page below");
    check!(b == a + 11 * PAGE_SIZE, "ranges are not packed with one guard page between");
    check!(q.take(50).is_none(), "the quota handed out more than it holds");
    q.give_back(a, 10);
    check!(q.take(10) == Some(a), "a freed range was not reused");
    for _ in 0..10_000 {
        let c = q.take(30).ok_or(Failed("setup"))?;
        q.give_back(c, 30);
    }
    check!(
        q.unused() == 64 * PAGE_SIZE - 22 * PAGE_SIZE,
        "cycling leaked {=usize} bytes",
        42 * PAGE_SIZE - q.unused()
    );
    q.give_back(a, 10);
    q.give_back(b, 10);
    check!(
        q.unused() == 64 * PAGE_SIZE,
        "freed neighbours did not merge back: {=usize}",
        q.unused()
    );
    check!(q.take(63).is_some(), "the whole quota is not usable again");
    Ok(())
}
