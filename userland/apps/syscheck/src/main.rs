//! `syscheck`: calls every system call with bad arguments and checks that each is refused with
//! the error `docs/syscalls.md` lists, then checks the good paths of the stretch calls.
//!
//! Prints `syscheck: ok <what>` per check, `syscheck: FAILED <what>: got <result>` on a
//! mismatch, and finally `syscheck: N checks, M failed`; exits with the number of failures.
//! The raw calls with bad pointers are in `raw_calls`, the only unsafe code.

#![no_std]
#![no_main]

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
    self_paging(&mut t, own_image);
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
    println!("syscheck: {} checks, {} failed", t.checks, t.failed);
    t.failed as i32
}

/// The self-paging calls: a managed stretch, a loose frame mapped, read, protected, unmapped
/// and freed, with the boundary errors on the way.
fn self_paging(t: &mut Tally, own_image: usize) {
    use SysError::*;
    use tessera::syscall::{frame_alloc, frame_free, map, protect, stretch_create_managed, unmap};
    let (r, rw) = (Rights::READ, Rights::READ.union(Rights::WRITE));
    let ok = |r: Result<(), SysError>| r.map(|()| 0);
    t.expect(
        "stretch_create_managed of 0 bytes",
        stretch_create_managed(0, rw),
        Err(InvalidArgument),
    );
    t.expect(
        "stretch_create_managed with no page right",
        stretch_create_managed(4096, Rights::META),
        Err(InvalidArgument),
    );
    t.expect("frame_alloc of an unknown kind", frame_alloc(2), Err(InvalidArgument));
    t.expect("frame_alloc beyond the optimistic contract", frame_alloc(1), Err(NoMemory));
    t.expect("frame_free of a frame not held", ok(frame_free(1)), Err(NotFound));
    t.expect("unmap in the own image", unmap(own_image), Err(NotManaged));
    t.expect("unmap outside the own memory", unmap(0x8020_0000), Err(BadAddress));
    let Ok(base) = stretch_create_managed(2 * 4096, r) else {
        t.expect("stretch_create_managed of 2 pages", Err(NoMemory), Ok(()));
        return;
    };
    t.expect("stretch_create_managed of 2 pages", Ok(base), Ok(()));
    let Ok(frame) = frame_alloc(0) else {
        t.expect("frame_alloc of a guaranteed frame", Err(NoMemory), Ok(()));
        return;
    };
    t.expect("frame_alloc of a guaranteed frame", Ok(frame), Ok(()));
    t.expect("map at an unaligned address", ok(map(base + 8, frame, r)), Err(InvalidArgument));
    t.expect("map beyond the stretch's rights", ok(map(base, frame, rw)), Err(PermissionDenied));
    t.expect("map of a frame not held", ok(map(base, 1, r)), Err(NotFound));
    t.expect("map", ok(map(base, frame, r)), Ok(()));
    // SAFETY: the page was just mapped readable with a zero-filled frame.
    let word = unsafe { (base as *const u64).read_volatile() };
    t.expect(
        "the mapped frame reads zero",
        if word == 0 { Ok(0) } else { Err(InvalidArgument) },
        Ok(()),
    );
    t.expect("map of a mapped frame", ok(map(base + 4096, frame, r)), Err(InUse));
    if let Ok(other) = frame_alloc(0) {
        t.expect("map at a mapped page", ok(map(base, other, r)), Err(AlreadyMapped));
        t.expect("frame_free of an unmapped frame", ok(frame_free(other)), Ok(()));
    }
    t.expect("frame_free of a mapped frame", ok(frame_free(frame)), Err(InUse));
    t.expect("protect beyond the stretch's rights", ok(protect(base, rw)), Err(PermissionDenied));
    t.expect("protect of an unmapped page", ok(protect(base + 4096, r)), Err(NotMapped));
    t.expect("protect", ok(protect(base, r)), Ok(()));
    let same = |f: usize| if f == frame { Ok(f) } else { Err(InvalidArgument) };
    t.expect("unmap returns the frame", unmap(base).and_then(same), Ok(()));
    t.expect("unmap twice", unmap(base), Err(NotMapped));
    t.expect("frame_free", ok(frame_free(frame)), Ok(()));
    t.expect("frame_free twice", ok(frame_free(frame)), Err(NotFound));
    t.expect("stretch_destroy of the managed stretch", raw_calls::destroy(base), Ok(()));
}
