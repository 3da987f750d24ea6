//! `syscheck`: calls every system call with bad arguments and checks that each is refused with
//! the error `docs/syscalls.md` lists, then checks the good paths of the stretch calls and of
//! the self-paging calls (a frame mapped, written, unmapped, mapped elsewhere and read back;
//! a frame filled through a window page and moved into place with `remap`; `map_batch`
//! mapping, protecting and unmapping many pages at once, all or nothing, with the TLB flushed
//! page by page and whole; `page_state` reporting the hardware's accessed and dirty bits as
//! pages are read, written, cleared, protected and moved, refusing bad arguments, and a write
//! to a read-only page still faulting to its driver;
//! a managed stretch destroyed with a page mapped; `map` refused with `NoMemory` once a page
//! table it needs went with a neighbouring stretch and the guarantee is full).
//!
//! Prints `syscheck: ok <what>` per check, `syscheck: FAILED <what>: got <result>` on a
//! mismatch, and finally `syscheck: N checks, M failed`; exits with the number of failures.
//! The raw calls with bad pointers are in `raw_calls`; the only other unsafe code reads and
//! writes pages the self-paging checks mapped themselves.

#![no_std]
#![no_main]

extern crate alloc;

mod page_states;
mod raw_calls;

use tessera::{Env, Rights, SysError, println};

tessera::main!(main);

struct Tally {
    checks: u32,
    failed: u32,
}

impl Tally {
    fn expect(&mut self, what: &str, got: Result<usize, SysError>, want: Result<(), SysError>) {
        self.checks += 1;
        let ok = match (got, want) {
            (Ok(_), Ok(())) => true,
            (Err(g), Err(w)) => g == w,
            _ => false,
        };
        if ok {
            println!("syscheck: ok {}", what);
        } else {
            self.failed += 1;
            println!(
                "syscheck: FAILED {}: got {}, want {}",
                what,
                name(got.map(|_| ())),
                name(want)
            );
        }
    }
}

/// `domain_info`: this domain's record, printed for the host to compare with the manifest,
/// and the call refused for a short buffer, a read-only one and a kernel address.
fn domain_info_checks(t: &mut Tally, env: &Env) {
    use SysError::*;
    let size = tessera::DomainInfo::SIZE;
    match tessera::domain_info() {
        Ok(info) => {
            println!(
                "syscheck: domain_info id={} name={} guaranteed={} optimistic={} held={} faults={}",
                info.id,
                info.name(),
                info.guaranteed_frames,
                info.optimistic_frames,
                info.frames_held,
                info.faults
            );
            let own = if info.id as usize == env.domain_id { Ok(0) } else { Err(NotFound) };
            t.expect("domain_info copies this domain's record", own, Ok(()));
        }
        Err(e) => t.expect("domain_info copies this domain's record", Err(e), Ok(())),
    }
    match tessera::stretch_create(tessera::PAGE_SIZE, Rights::READ) {
        Ok(ro) => {
            t.expect(
                "domain_info into a read-only buffer",
                raw_calls::domain_info(ro, size),
                Err(BadAddress),
            );
            t.expect(
                "domain_info into a buffer too short",
                raw_calls::domain_info(ro, size - 1),
                Err(InvalidArgument),
            );
            let _ = raw_calls::destroy(ro);
        }
        Err(e) => t.expect("a read-only stretch", Err(e), Ok(())),
    }
    t.expect(
        "domain_info into the kernel",
        raw_calls::domain_info(0xffff_ffff_c020_0000, size),
        Err(BadAddress),
    );
}

/// A result's name.
fn name(r: Result<(), SysError>) -> &'static str {
    r.err().map_or("Ok", SysError::name)
}

fn main(env: Env) -> i32 {
    let mut t = Tally { checks: 0, failed: 0 };
    let rw = Rights::READ.union(Rights::WRITE);
    use SysError::*;

    t.expect("unknown call number", raw_calls::call(999, [0; 6]), Err(NoSuchCall));
    t.expect(
        "console_write from a kernel address",
        raw_calls::console(0xffff_ffff_c020_0000, 8),
        Err(BadAddress),
    );
    t.expect(
        "console_write from an unmapped address",
        raw_calls::console(0x10, 8),
        Err(BadAddress),
    );
    t.expect(
        "console_write with an overflowing length",
        raw_calls::console(0x1_0000_0000, usize::MAX),
        Err(InvalidArgument),
    );
    t.expect(
        "console_write over 1024 bytes",
        raw_calls::console(0x1_0000_0000, 1025),
        Err(InvalidArgument),
    );
    let bad_utf8 = [0xffu8, 0xfe, 0xfd];
    t.expect(
        "console_write of invalid UTF-8",
        raw_calls::console(bad_utf8.as_ptr() as usize, 3),
        Err(InvalidArgument),
    );
    t.expect(
        "stretch_create of 0 bytes",
        raw_calls::create(0, rw.0 as usize),
        Err(InvalidArgument),
    );
    t.expect(
        "stretch_create with unknown rights",
        raw_calls::create(4096, 0x10),
        Err(InvalidArgument),
    );
    t.expect(
        "stretch_create over 64 MiB",
        raw_calls::create(usize::MAX, rw.0 as usize),
        Err(InvalidArgument),
    );
    t.expect(
        "stretch_create beyond the contract",
        raw_calls::create(8 << 20, rw.0 as usize),
        Err(NoMemory),
    );
    t.expect(
        "stretch_destroy of nothing",
        raw_calls::destroy(0x20_0000_0000 - 4096),
        Err(NotFound),
    );
    t.expect(
        "stretch_destroy of a kernel address",
        raw_calls::destroy(0xffff_ffff_c020_0000),
        Err(NotFound),
    );
    let own_image = 0x1_0000_0000 + env.domain_id * 0x4000_0000;
    t.expect(
        "stretch_destroy of the own image",
        raw_calls::destroy(own_image),
        Err(PermissionDenied),
    );
    t.expect("stretch_rights on nothing", raw_calls::rights(12345, 0, 1), Err(NotFound));

    // The good paths, and the checks that need a stretch.
    let base = tessera::stretch_create(3 * 4096, rw);
    t.expect("stretch_create of 3 pages", base, Ok(()));
    if let Ok(base) = base {
        let words = base as *mut u64;
        let sum = raw_calls::fill_and_sum(words, 3 * 512);
        t.expect(
            "the new stretch is zeroed and writable",
            if sum == 0 { Ok(0) } else { Err(InvalidArgument) },
            Ok(()),
        );
        t.expect(
            "stretch_rights with unknown bits",
            raw_calls::rights(base, env.domain_id, 0x30),
            Err(InvalidArgument),
        );
        t.expect(
            "stretch_rights for no such domain",
            raw_calls::rights(base, 4096, 1),
            Err(NotFound),
        );
        t.expect(
            "stretch_rights for a huge domain id",
            raw_calls::rights(base, usize::MAX, 1),
            Err(NotFound),
        );
        t.expect("console_write from the stretch", raw_calls::console(base, 0), Ok(()));
        t.expect("stretch_destroy of the stretch", raw_calls::destroy(base), Ok(()));
        t.expect("stretch_destroy twice", raw_calls::destroy(base), Err(NotFound));
        t.expect(
            "console_write from the destroyed stretch",
            raw_calls::console(base, 8),
            Err(BadAddress),
        );
    }
    self_paging(&mut t, env.domain_id, own_image);
    // A kernel timer event: signalled once the clock passes its deadline, not before.
    t.expect("timer_set on no endpoint", tessera::timer_set(31, 0).map(|()| 0), Err(NotFound));
    match tessera::timer_alloc() {
        Ok(ep) => {
            t.expect("timer_alloc", Ok(ep), Ok(()));
            let slot = &tessera::dcb().events[ep];
            let value = || slot.value.load(core::sync::atomic::Ordering::Acquire);
            let deadline = tessera::time_ns() + 2_000_000;
            t.expect("timer_set", tessera::timer_set(ep, deadline).map(|()| 0), Ok(()));
            let early = value();
            while value() == 0 && tessera::time_ns() < deadline + 50_000_000 {
                let _ = tessera::block(deadline + 50_000_000);
            }
            let fired_at = tessera::time_ns();
            let ok = early == 0 && value() == 1 && fired_at >= deadline;
            t.expect(
                "the timer event fires once, after its deadline",
                if ok { Ok(0) } else { Err(InvalidArgument) },
                Ok(()),
            );
        }
        Err(e) => t.expect("timer_alloc", Err(e), Ok(())),
    }
    t.expect("time", Ok(tessera::time_ns() as usize), Ok(()));
    t.expect("null", tessera::null().map(|()| 0), Ok(()));
    domain_info_checks(&mut t, &env);
    println!("syscheck: {} checks, {} failed", t.checks, t.failed);
    t.failed as i32
}

/// What one page table maps: a managed stretch's tables are shared with its neighbours within
/// such a region.
const REGION: usize = 2 << 20;
/// The largest managed stretch (`docs/syscalls.md`: "over 256 MiB").
const MANAGED_MAX: usize = 256 << 20;

/// Ok if `good`, else an error to report.
fn holds(good: bool) -> Result<usize, SysError> {
    if good { Ok(0) } else { Err(SysError::InvalidArgument) }
}

/// `r` without its value.
fn done<T>(r: Result<T, SysError>) -> Result<usize, SysError> {
    r.map(|_| 0)
}

/// The self-paging calls: their boundary errors, then a managed stretch with a loose frame
/// mapped, read, written, protected, unmapped, mapped elsewhere and freed; a managed stretch
/// destroyed with a page mapped; `map` needing a page table while the guarantee is full.
fn self_paging(t: &mut Tally, me: usize, own_image: usize) {
    use SysError::*;
    use tessera::syscall::{frame_alloc, frame_free, map, protect, stretch_create_managed, unmap};
    let (r, rw) = (Rights::READ, Rights::READ.union(Rights::WRITE));
    let kernel = 0xffff_ffff_c020_0000;
    t.expect(
        "stretch_create_managed of 0 bytes",
        stretch_create_managed(0, rw),
        Err(InvalidArgument),
    );
    t.expect(
        "stretch_create_managed just over 256 MiB",
        stretch_create_managed(MANAGED_MAX + 1, rw),
        Err(InvalidArgument),
    );
    t.expect(
        "stretch_create_managed of usize::MAX bytes",
        stretch_create_managed(usize::MAX, rw),
        Err(InvalidArgument),
    );
    t.expect(
        "stretch_create_managed with no page right",
        stretch_create_managed(4096, Rights::META),
        Err(InvalidArgument),
    );
    t.expect(
        "stretch_create_managed with no rights",
        stretch_create_managed(4096, Rights::NONE),
        Err(InvalidArgument),
    );
    t.expect(
        "stretch_create_managed with unknown rights",
        stretch_create_managed(4096, Rights(0x11)),
        Err(InvalidArgument),
    );
    t.expect(
        "stretch_create_managed of 256 MiB, whose records exceed the guarantee",
        stretch_create_managed(MANAGED_MAX, r),
        Err(NoMemory),
    );
    t.expect("frame_alloc of an unknown kind", frame_alloc(2), Err(InvalidArgument));
    t.expect("frame_alloc of kind usize::MAX", frame_alloc(usize::MAX), Err(InvalidArgument));
    t.expect("frame_alloc beyond the optimistic contract", frame_alloc(1), Err(NoMemory));
    t.expect("frame_free of a frame not held", done(frame_free(1)), Err(NotFound));
    t.expect("frame_free of frame usize::MAX", done(frame_free(usize::MAX)), Err(NotFound));
    t.expect("unmap in the own image", unmap(own_image), Err(NotManaged));
    t.expect("unmap outside the own memory", unmap(0x8020_0000), Err(BadAddress));
    t.expect("unmap of a kernel address", unmap(kernel), Err(BadAddress));
    t.expect("map outside the own memory", done(map(0x8020_0000, 1, r)), Err(BadAddress));
    t.expect("protect of a kernel address", done(protect(kernel, r)), Err(BadAddress));
    if let Ok(nailed) = tessera::stretch_create(4096, rw) {
        t.expect("map in a nailed stretch", done(map(nailed, 1, r)), Err(NotManaged));
        t.expect("protect in a nailed stretch", done(protect(nailed, r)), Err(NotManaged));
        t.expect("unmap in a nailed stretch", unmap(nailed), Err(NotManaged));
        t.expect("stretch_destroy of the nailed stretch", raw_calls::destroy(nailed), Ok(()));
    } else {
        t.expect("stretch_create of a page", Err(NoMemory), Ok(()));
    }
    round_trip(t, me);
    remap_moves(t);
    batches(t);
    destroy_mapped(t);
    table_gone(t);
    page_states::page_states(t, own_image);
}

/// A frame mapped read-only, then read-write, written, unmapped, mapped at another page and
/// read back, protected, unmapped and freed, with the boundary errors on the way.
fn round_trip(t: &mut Tally, me: usize) {
    use SysError::*;
    use tessera::syscall::{frame_alloc, frame_free, map, protect, stretch_create_managed, unmap};
    let (r, rw) = (Rights::READ, Rights::READ.union(Rights::WRITE));
    let Ok(base) = stretch_create_managed(2 * 4096, r) else {
        t.expect("stretch_create_managed of 2 pages", Err(NoMemory), Ok(()));
        return;
    };
    t.expect("stretch_create_managed of 2 pages", Ok(base), Ok(()));
    t.expect(
        "stretch_rights on a managed stretch",
        raw_calls::rights(base, me, (Rights::READ.0 | Rights::META.0) as usize),
        Err(PermissionDenied),
    );
    let Ok(frame) = frame_alloc(0) else {
        t.expect("frame_alloc of a guaranteed frame", Err(NoMemory), Ok(()));
        return;
    };
    t.expect("frame_alloc of a guaranteed frame", Ok(frame), Ok(()));
    t.expect("map at an unaligned address", done(map(base + 8, frame, r)), Err(InvalidArgument));
    t.expect("map with no rights", done(map(base, frame, Rights::NONE)), Err(InvalidArgument));
    t.expect("map with the meta right", done(map(base, frame, Rights(9))), Err(InvalidArgument));
    t.expect("map with unknown rights", done(map(base, frame, Rights(0x11))), Err(InvalidArgument));
    t.expect("map beyond the stretch's rights", done(map(base, frame, rw)), Err(PermissionDenied));
    t.expect("map of a frame not held", done(map(base, 1, r)), Err(NotFound));
    t.expect("map of frame usize::MAX", done(map(base, usize::MAX, r)), Err(NotFound));
    t.expect("map", done(map(base, frame, r)), Ok(()));
    // SAFETY: the page was just mapped readable with a zero-filled frame.
    let word = unsafe { (base as *const u64).read_volatile() };
    t.expect("the mapped frame reads zero", holds(word == 0), Ok(()));
    t.expect("map of a mapped frame", done(map(base + 4096, frame, r)), Err(InUse));
    if let Ok(other) = frame_alloc(0) {
        t.expect("map at a mapped page", done(map(base, other, r)), Err(AlreadyMapped));
        t.expect("frame_free of an unmapped frame", done(frame_free(other)), Ok(()));
    }
    t.expect("frame_free of a mapped frame", done(frame_free(frame)), Err(InUse));
    t.expect("protect at an unaligned address", done(protect(base + 1, r)), Err(InvalidArgument));
    t.expect("protect with no rights", done(protect(base, Rights::NONE)), Err(InvalidArgument));
    t.expect(
        "protect with the meta right",
        done(protect(base, Rights::META)),
        Err(InvalidArgument),
    );
    t.expect("protect beyond the stretch's rights", done(protect(base, rw)), Err(PermissionDenied));
    t.expect("protect of an unmapped page", done(protect(base + 4096, r)), Err(NotMapped));
    t.expect("protect", done(protect(base, r)), Ok(()));
    t.expect("unmap at an unaligned address", unmap(base + 4095), Err(InvalidArgument));
    let same = |f: usize| if f == frame { Ok(f) } else { Err(InvalidArgument) };
    t.expect("unmap returns the frame", unmap(base).and_then(same), Ok(()));
    t.expect("unmap twice", unmap(base), Err(NotMapped));
    t.expect("stretch_destroy of the managed stretch", raw_calls::destroy(base), Ok(()));
    t.expect("unmap in the destroyed stretch", unmap(base), Err(BadAddress));

    // The frame keeps what was written into it from one page to another.
    let Ok(base) = stretch_create_managed(2 * 4096, rw) else {
        t.expect("stretch_create_managed of 2 read-write pages", Err(NoMemory), Ok(()));
        return;
    };
    let second = base + 4096;
    let pattern = 0x7e55_e4a0_0000_0000 | frame as u64;
    t.expect("map read-write", done(map(base, frame, rw)), Ok(()));
    // SAFETY: the page was just mapped read-write with a frame this domain holds; nothing else
    // refers to it.
    unsafe { (base as *mut u64).write_volatile(pattern) };
    t.expect("unmap the written page", unmap(base).and_then(same), Ok(()));
    t.expect("map the frame at another page", done(map(second, frame, r)), Ok(()));
    // SAFETY: the frame is now mapped readable at `second`.
    let word = unsafe { (second as *const u64).read_volatile() };
    t.expect("the frame kept what was written", holds(word == pattern), Ok(()));
    t.expect("protect read-write", done(protect(second, rw)), Ok(()));
    t.expect("unmap the other page", unmap(second).and_then(same), Ok(()));
    t.expect("frame_free", done(frame_free(frame)), Ok(()));
    t.expect("frame_free twice", done(frame_free(frame)), Err(NotFound));
    t.expect("map of a freed frame", done(map(base, frame, r)), Err(NotFound));
    t.expect("stretch_destroy of the read-write stretch", raw_calls::destroy(base), Ok(()));
}

/// `remap`: a frame filled through a window page and moved into place in one step, keeping
/// its contents; the boundary errors on the way, each leaving both pages as they were.
fn remap_moves(t: &mut Tally) {
    use SysError::*;
    use tessera::syscall::{frame_alloc, frame_free, map, remap, stretch_create_managed, unmap};
    let (r, rw) = (Rights::READ, Rights::READ.union(Rights::WRITE));
    let Ok(base) = stretch_create_managed(3 * 4096, rw) else {
        t.expect("stretch_create_managed of 3 pages", Err(NoMemory), Ok(()));
        return;
    };
    let (window, target, other) = (base, base + 4096, base + 2 * 4096);
    let (Ok(frame), Ok(second)) = (frame_alloc(0), frame_alloc(0)) else {
        t.expect("frame_alloc of two frames", Err(NoMemory), Ok(()));
        return;
    };
    t.expect("map the window", done(map(window, frame, rw)), Ok(()));
    let pattern = 0x4e3a_9000_0000_0000 | frame as u64;
    // SAFETY: the window was just mapped read-write with a frame this domain holds; nothing
    // else refers to it.
    unsafe { (window as *mut u64).write_volatile(pattern) };
    t.expect("remap to the same page", done(remap(window, window, r)), Err(InvalidArgument));
    t.expect(
        "remap to an unaligned page",
        done(remap(window, target + 8, r)),
        Err(InvalidArgument),
    );
    t.expect(
        "remap with no rights",
        done(remap(window, target, Rights::NONE)),
        Err(InvalidArgument),
    );
    t.expect("remap of an unmapped page", done(remap(target, other, r)), Err(NotMapped));
    t.expect("remap outside the own memory", done(remap(window, 0x8020_0000, r)), Err(BadAddress));
    t.expect("map the other page", done(map(other, second, r)), Ok(()));
    t.expect("remap onto a mapped page", done(remap(window, other, r)), Err(AlreadyMapped));
    t.expect("remap into place", done(remap(window, target, r)), Ok(()));
    // SAFETY: the frame is now mapped readable at `target`.
    let word = unsafe { (target as *const u64).read_volatile() };
    t.expect("the frame kept what was written", holds(word == pattern), Ok(()));
    t.expect("the window is empty again", unmap(window), Err(NotMapped));
    let same = |f: usize| if f == frame { Ok(f) } else { Err(InvalidArgument) };
    t.expect("unmap at the target returns the frame", unmap(target).and_then(same), Ok(()));
    t.expect("unmap the other page", done(unmap(other).map(|_| ())), Ok(()));
    t.expect("frame_free", done(frame_free(frame)), Ok(()));
    t.expect("frame_free of the second", done(frame_free(second)), Ok(()));
    t.expect("stretch_destroy of the window's stretch", raw_calls::destroy(base), Ok(()));
}

/// Pages of the larger `map_batch` check: more than the kernel flushes page by page.
const BATCH_PAGES: usize = 24;
/// Pages of the smaller one, flushed page by page.
const SMALL_BATCH: usize = 4;

/// `r` as a tally result, with `Err(InvalidArgument)` for an error at another index than
/// `index`.
fn at(r: Result<(), (usize, SysError)>, index: usize) -> Result<usize, SysError> {
    match r {
        Ok(()) => Ok(0),
        Err((i, e)) if i == index => Err(e),
        Err(_) => Err(SysError::NoSuchCall),
    }
}

/// `map_batch`: its boundary errors (each with the refused entry's index, each leaving every
/// page unmapped); a batch that maps [`BATCH_PAGES`] pages, which are then written and read
/// back; one that protects them all; then the TLB: the pages, read through their mappings,
/// are unmapped and mapped to fresh frames in two batches (of [`SMALL_BATCH`] pages, flushed
/// page by page, and of the rest, flushed whole), and must read the new frames' zeros.
fn batches(t: &mut Tally) {
    use SysError::*;
    use abi::{MAP_BATCH_MAX, PageOp};
    use tessera::syscall::{frame_alloc, frame_free, map_batch, stretch_create_managed, unmap};
    let rw = Rights::READ.union(Rights::WRITE);
    let Ok(base) = stretch_create_managed(BATCH_PAGES * 4096, rw) else {
        t.expect("stretch_create_managed for map_batch", Err(NoMemory), Ok(()));
        return;
    };
    let page = |i: usize| base + i * 4096;
    let mut frames = [0usize; 2 * BATCH_PAGES];
    for f in frames.iter_mut() {
        match frame_alloc(0) {
            Ok(n) => *f = n,
            Err(e) => {
                t.expect("frame_alloc for map_batch", Err(e), Ok(()));
                return;
            }
        }
    }
    let (first, second) = frames.split_at(BATCH_PAGES);
    let mut ops = [PageOp::default(); MAP_BATCH_MAX + 1];
    for (i, op) in ops.iter_mut().enumerate().take(BATCH_PAGES) {
        *op = PageOp::map(page(i), first[i], rw);
    }
    // Refused batches: nothing changes.
    let last = BATCH_PAGES - 1;
    let mut bad = ops;
    bad[last].va += 8;
    t.expect(
        "map_batch with a misaligned last page",
        at(map_batch(&bad[..BATCH_PAGES]), last),
        Err(InvalidArgument),
    );
    bad[last] = PageOp::map(page(0), first[last], rw);
    t.expect(
        "map_batch with a page twice",
        at(map_batch(&bad[..BATCH_PAGES]), last),
        Err(InvalidArgument),
    );
    bad[last] = PageOp::map(page(last), first[0], rw);
    t.expect("map_batch with a frame twice", at(map_batch(&bad[..BATCH_PAGES]), last), Err(InUse));
    bad[last] = PageOp::map(page(last), 1, rw);
    t.expect(
        "map_batch with a frame not held",
        at(map_batch(&bad[..BATCH_PAGES]), last),
        Err(NotFound),
    );
    bad[last] = PageOp::unmap(page(last));
    t.expect(
        "map_batch unmapping an unmapped page",
        at(map_batch(&bad[..BATCH_PAGES]), last),
        Err(NotMapped),
    );
    bad[last] = PageOp::map(0x8020_0000, first[last], rw);
    t.expect(
        "map_batch outside the own memory",
        at(map_batch(&bad[..BATCH_PAGES]), last),
        Err(BadAddress),
    );
    bad[last] = PageOp { op: 3, ..ops[last] };
    t.expect(
        "map_batch with an unknown operation",
        at(map_batch(&bad[..BATCH_PAGES]), last),
        Err(InvalidArgument),
    );
    bad[last] = PageOp::map(page(last), first[last], Rights::EXECUTE.union(rw));
    t.expect(
        "map_batch with rights beyond the stretch's",
        at(map_batch(&bad[..BATCH_PAGES]), last),
        Err(PermissionDenied),
    );
    let over = MAP_BATCH_MAX + 1;
    let array = ops.as_ptr() as usize;
    let r = raw_calls::map_batch(array, over);
    t.expect("map_batch of 65 entries", at(r, over), Err(InvalidArgument));
    let r = raw_calls::map_batch(array, 0);
    t.expect("map_batch of no entry", at(r, 0), Err(InvalidArgument));
    let r = raw_calls::map_batch(array + 4, 1);
    t.expect("map_batch of a misaligned array", at(r, 1), Err(InvalidArgument));
    let r = raw_calls::map_batch(0x8020_0000, 2);
    t.expect("map_batch of an array outside the own memory", at(r, 2), Err(BadAddress));
    let none = (0..BATCH_PAGES).all(|i| unmap(page(i)) == Err(NotMapped));
    t.expect("refused batches mapped nothing", holds(none), Ok(()));
    // A good batch, then every page written and read back.
    t.expect("map_batch of 24 pages", at(map_batch(&ops[..BATCH_PAGES]), 0), Ok(()));
    let pattern = |i: usize| 0x6d61_7062_0000_0000 | i as u64;
    let mut good = true;
    for i in 0..BATCH_PAGES {
        let word = page(i) as *mut u64;
        // SAFETY: the page was just mapped read-write with a frame this domain holds; nothing
        // else refers to it.
        unsafe {
            good &= word.read_volatile() == 0;
            word.write_volatile(pattern(i));
            good &= word.read_volatile() == pattern(i);
        }
    }
    t.expect("map_batch's pages read zero, then what was written", holds(good), Ok(()));
    for (i, op) in ops.iter_mut().enumerate().take(BATCH_PAGES) {
        *op = PageOp::protect(page(i), Rights::READ);
    }
    t.expect("map_batch protecting 24 pages", at(map_batch(&ops[..BATCH_PAGES]), 0), Ok(()));
    // SAFETY: the pages are mapped readable.
    let kept =
        (0..BATCH_PAGES).all(|i| unsafe { (page(i) as *const u64).read_volatile() } == pattern(i));
    t.expect("protected pages keep their contents", holds(kept), Ok(()));
    // The TLB: each page was just read through its mapping; unmapped and mapped to a fresh
    // frame, it must read the new frame, in a small batch and a large one.
    for range in [0..SMALL_BATCH, SMALL_BATCH..BATCH_PAGES] {
        let n = range.len();
        for (op, i) in ops.iter_mut().zip(range.clone()) {
            *op = PageOp::unmap(page(i));
        }
        t.expect("map_batch unmapping pages", at(map_batch(&ops[..n]), 0), Ok(()));
        for (op, i) in ops.iter_mut().zip(range.clone()) {
            *op = PageOp::map(page(i), second[i], Rights::READ);
        }
        t.expect("map_batch mapping fresh frames there", at(map_batch(&ops[..n]), 0), Ok(()));
        // SAFETY: the pages were just mapped readable with fresh (zero-filled) frames.
        let fresh = range.clone().all(|i| unsafe { (page(i) as *const u64).read_volatile() } == 0);
        let what = if n > 16 {
            "map_batch's whole flush shows the fresh frames"
        } else {
            "map_batch's page flushes show the fresh frames"
        };
        t.expect(what, holds(fresh), Ok(()));
    }
    for (i, op) in ops.iter_mut().enumerate().take(BATCH_PAGES) {
        *op = PageOp::unmap(page(i));
    }
    t.expect("map_batch unmapping 24 pages", at(map_batch(&ops[..BATCH_PAGES]), 0), Ok(()));
    let freed = frames.iter().all(|&f| frame_free(f).is_ok());
    t.expect("frame_free of map_batch's frames", holds(freed), Ok(()));
    t.expect("stretch_destroy of map_batch's stretch", raw_calls::destroy(base), Ok(()));
}

/// Destroying a managed stretch with a page mapped unmaps the page; the frame stays the
/// domain's, unmapped.
fn destroy_mapped(t: &mut Tally) {
    use tessera::syscall::{frame_alloc, frame_free, map, stretch_create_managed};
    let r = Rights::READ;
    let (base, frame) = match (stretch_create_managed(4096, r), frame_alloc(0)) {
        (Ok(base), Ok(frame)) => (base, frame),
        (Err(e), _) | (_, Err(e)) => {
            t.expect("a managed stretch of a page and a frame", Err(e), Ok(()));
            return;
        }
    };
    t.expect("map in a stretch about to go", done(map(base, frame, r)), Ok(()));
    t.expect("stretch_destroy with a page mapped", raw_calls::destroy(base), Ok(()));
    t.expect("frame_free of its frame, unmapped with it", done(frame_free(frame)), Ok(()));
}

/// `map` needs a page table that went with a neighbouring stretch while the guarantee is
/// full: `NoMemory`; once frames are back it makes the table again.
///
/// A 4 MiB managed stretch and a 2 MiB one right after it: the second's first page shares its
/// table only with the first (when the table's 2 MiB starts inside the first; if another
/// domain took the range in between, the pair is made again). Destroying the first frees the
/// table; guaranteed frames then fill the guarantee.
fn table_gone(t: &mut Tally) {
    use SysError::*;
    use tessera::syscall::{frame_alloc, frame_free, map, stretch_create_managed, unmap};
    let r = Rights::READ;
    let mut squeezed = None;
    for _ in 0..3 {
        let pair = (stretch_create_managed(2 * REGION, r), stretch_create_managed(REGION, r));
        let (first, second) = match pair {
            (Ok(first), Ok(second)) => (first, second),
            (Err(e), _) | (_, Err(e)) => {
                t.expect("two managed stretches of 4 and 2 MiB", Err(e), Ok(()));
                return;
            }
        };
        // Counted once, for the pair that is used.
        let gone = raw_calls::destroy(first);
        if gone.is_err() || second & !(REGION - 1) < first + 2 * REGION {
            t.expect("stretch_destroy of the neighbour", gone, Ok(()));
            squeezed = Some(second);
            break;
        }
        if let Err(e) = raw_calls::destroy(second) {
            t.expect("stretch_destroy of a misplaced stretch", Err(e), Ok(()));
        }
    }
    let Some(page) = squeezed else {
        t.expect("two managed stretches that share a page table", holds(false), Ok(()));
        return;
    };
    let mut frames = [0usize; 128];
    let mut n = 0;
    let last = loop {
        match frame_alloc(0) {
            Ok(f) if n < frames.len() => {
                frames[n] = f;
                n += 1;
            }
            Ok(f) => {
                let _ = frame_free(f);
                break Ok(f);
            }
            Err(e) => break Err(e),
        }
    };
    t.expect("frame_alloc of guaranteed frames until the guarantee is full", last, Err(NoMemory));
    if n == 0 {
        t.expect("frame_alloc of a guaranteed frame", Err(NoMemory), Ok(()));
        return;
    }
    t.expect(
        "map that needs a page table, the guarantee full",
        done(map(page, frames[0], r)),
        Err(NoMemory),
    );
    let freed = frames[..n].iter().filter(|&&f| frame_free(f).is_ok()).count() == n;
    t.expect("frame_free of the frames that filled the guarantee", holds(freed), Ok(()));
    match frame_alloc(0) {
        Ok(frame) => {
            t.expect("map that makes its page table again", done(map(page, frame, r)), Ok(()));
            t.expect("unmap", unmap(page), Ok(()));
            t.expect("frame_free", done(frame_free(frame)), Ok(()));
        }
        Err(e) => t.expect("frame_alloc once frames are back", Err(e), Ok(())),
    }
    t.expect("stretch_destroy of the second stretch", raw_calls::destroy(page), Ok(()));
}
