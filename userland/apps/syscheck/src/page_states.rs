//! `page_state`: the hardware's accessed and dirty bits of managed pages, as the kernel reports
//! them, on both architectures; its boundary errors, each changing nothing; and a write to a
//! read-only page, which still faults to the stretch's driver.

use core::sync::atomic::{AtomicU32, Ordering};

use abi::page_state::{ACCESSED, DIRTY, MAPPED};
use stretch_driver::{
    DriverCore, DriverError, Fault, FaultError, FrameKind, MemoryKernel, StretchDriver, StretchInfo,
};
use tessera::syscall::{
    frame_alloc, frame_free, map, page_state, protect, remap, stretch_create_managed, unmap,
};
use tessera::{Rights, SysError};

use crate::{Tally, done, holds, raw_calls};

const PAGE: usize = 4096;

/// The state of the one page `va`, read without clearing anything (`u8::MAX` if refused).
fn state(va: usize) -> u8 {
    let mut s = [u8::MAX];
    page_state(va, &mut s, 0).map_or(u8::MAX, |()| s[0])
}

/// `Ok` if the page `va` is in `want`, else an error to report (the state is printed).
fn is(va: usize, want: u8) -> Result<usize, SysError> {
    let got = state(va);
    if got != want {
        tessera::println!("syscheck: page {:#x} reads state {:#x}, want {:#x}", va, got, want);
    }
    holds(got == want)
}

/// Reads the word at `va`.
fn read(va: usize) -> u64 {
    // SAFETY: the callers pass pages they mapped readable with frames this domain holds, which
    // nothing else refers to.
    unsafe { (va as *const u64).read_volatile() }
}

/// Writes the word at `va`.
fn write(va: usize, value: u64) {
    // SAFETY: the callers pass pages they mapped read-write with frames this domain holds,
    // which nothing else refers to.
    unsafe { (va as *mut u64).write_volatile(value) }
}

/// The bits through the page tables: a fresh map, a read, a write, clearing them (a read and a
/// write afterwards set them again, so the clearing reached the TLB), `protect` keeping them,
/// `remap` returning them and starting the new page clean; then every boundary error.
pub fn page_states(t: &mut Tally, own_image: usize) {
    let rw = Rights::READ.union(Rights::WRITE);
    let Ok(base) = stretch_create_managed(4 * PAGE, rw) else {
        t.expect("stretch_create_managed for page_state", Err(SysError::NoMemory), Ok(()));
        return;
    };
    let page = |i: usize| base + i * PAGE;
    let (Ok(a), Ok(b)) = (frame_alloc(0), frame_alloc(0)) else {
        t.expect("frame_alloc for page_state", Err(SysError::NoMemory), Ok(()));
        return;
    };
    t.expect("map read-write for page_state", done(map(page(0), a, rw)), Ok(()));
    t.expect("map read-only for page_state", done(map(page(2), b, Rights::READ)), Ok(()));
    let mut four = [0xee; 4];
    let r = done(page_state(base, &mut four, 0));
    t.expect("page_state of four pages", r, Ok(()));
    t.expect(
        "page_state: freshly mapped pages report mapped only, unmapped ones 0",
        holds(four == [MAPPED, 0, MAPPED, 0]),
        Ok(()),
    );
    t.expect("the fresh frame reads zero", holds(read(page(0)) == 0), Ok(()));
    t.expect("page_state: a read sets accessed", is(page(0), MAPPED | ACCESSED), Ok(()));
    write(page(0), 0x5eed);
    t.expect("page_state: a write sets dirty", is(page(0), MAPPED | ACCESSED | DIRTY), Ok(()));
    t.expect("the read-only frame reads zero", holds(read(page(2)) == 0), Ok(()));
    t.expect("page_state: a read-only page read", is(page(2), MAPPED | ACCESSED), Ok(()));
    // Clearing: the call reports the state before it.
    let mut one = [0];
    let r = done(page_state(page(0), &mut one, ACCESSED | DIRTY));
    t.expect("page_state clearing accessed and dirty", r, Ok(()));
    let before = one[0] == MAPPED | ACCESSED | DIRTY;
    t.expect("page_state reports the state before it clears", holds(before), Ok(()));
    t.expect("page_state: after clearing, neither bit", is(page(0), MAPPED), Ok(()));
    // The page was in the TLB, accessed and dirty: only a flush makes the next accesses set
    // the bits again.
    t.expect("the page kept what was written", holds(read(page(0)) == 0x5eed), Ok(()));
    t.expect(
        "page_state: a read after clearing sets accessed again",
        is(page(0), MAPPED | ACCESSED),
        Ok(()),
    );
    write(page(0), 0x5eee);
    t.expect(
        "page_state: a write after clearing sets dirty again",
        is(page(0), MAPPED | ACCESSED | DIRTY),
        Ok(()),
    );
    let r = done(page_state(page(0), &mut one, DIRTY));
    t.expect("page_state clearing dirty only", r, Ok(()));
    t.expect("page_state: dirty cleared, accessed kept", is(page(0), MAPPED | ACCESSED), Ok(()));
    write(page(0), 0x5eef);
    t.expect("protect read-only for page_state", done(protect(page(0), Rights::READ)), Ok(()));
    t.expect("page_state: protect keeps the bits", is(page(0), MAPPED | ACCESSED | DIRTY), Ok(()));
    // Out of view and asked in one step: remap returns the bits, the new page starts clean.
    let moved = remap(page(0), page(1), rw);
    t.expect("remap for page_state", done(moved), Ok(()));
    let dirty = moved == Ok(MAPPED | ACCESSED | DIRTY);
    t.expect("page_state: remap returns dirty", holds(dirty), Ok(()));
    t.expect("page_state: remap starts the new page clean", is(page(1), MAPPED), Ok(()));
    t.expect("page_state: the page remapped from is unmapped", is(page(0), 0), Ok(()));
    t.expect("the remapped page kept what was written", holds(read(page(1)) == 0x5eef), Ok(()));
    let moved = remap(page(1), page(3), rw);
    t.expect("remap of a page only read", done(moved), Ok(()));
    let read_only = moved == Ok(MAPPED | ACCESSED);
    t.expect("page_state: remap returns accessed, not dirty", holds(read_only), Ok(()));
    t.expect("page_state: the page moved again is clean", is(page(3), MAPPED), Ok(()));
    // Where the next checks need a dirty page: bad calls must not clear it.
    write(page(3), 0x5ef0);
    bad_arguments(t, base, page(3), page(2), own_image);
    t.expect(
        "page_state: refused calls cleared nothing",
        is(page(3), MAPPED | ACCESSED | DIRTY),
        Ok(()),
    );
    let freed = unmap(page(2)).is_ok() && unmap(page(3)).is_ok();
    t.expect("unmap page_state's pages", holds(freed), Ok(()));
    let freed = frame_free(a).is_ok() && frame_free(b).is_ok();
    t.expect("frame_free of page_state's frames", holds(freed), Ok(()));
    t.expect("stretch_destroy of page_state's stretch", raw_calls::destroy(base), Ok(()));
    write_fault(t);
}

/// Every boundary error of `page_state` on the four pages at `base` (`dirty` mapped, accessed
/// and dirty; `read_only` mapped read-only), each asking to clear both bits; none may write
/// its states.
fn bad_arguments(t: &mut Tally, base: usize, dirty: usize, read_only: usize, own_image: usize) {
    use SysError::*;
    let both = usize::from(ACCESSED | DIRTY);
    let kernel = 0xffff_ffff_c020_0000;
    let mut out = [0xeeu8; 66];
    let at = out.as_mut_ptr() as usize;
    let code = page_states as fn(&mut Tally, usize) as usize;
    let call = |t: &mut Tally, what: &str, va: usize, count: usize, to: usize, clear, want| {
        t.expect(what, done(raw_calls::page_state(va, count, to, clear)), Err(want));
    };
    call(t, "page_state at an unaligned page", dirty + 8, 1, at, both, InvalidArgument);
    call(t, "page_state of no page", dirty, 0, at, both, InvalidArgument);
    call(t, "page_state of 65 pages", dirty, 65, at, both, InvalidArgument);
    call(t, "page_state of usize::MAX pages", dirty, usize::MAX, at, both, InvalidArgument);
    call(t, "page_state clearing the mapped bit", dirty, 1, at, 1, InvalidArgument);
    call(t, "page_state clearing an unknown bit", dirty, 1, at, 8, InvalidArgument);
    call(t, "page_state clearing every bit", dirty, 1, at, usize::MAX, InvalidArgument);
    call(t, "page_state past the stretch's end", base + 3 * PAGE, 2, at, both, BadAddress);
    call(t, "page_state outside the own memory", 0x8020_0000, 1, at, both, BadAddress);
    call(t, "page_state of a kernel address", kernel, 1, at, both, BadAddress);
    call(t, "page_state in the own image", own_image, 1, at, both, NotManaged);
    call(t, "page_state into an unmapped page", dirty, 1, base + PAGE, both, BadAddress);
    call(t, "page_state into an unmapped address", dirty, 1, 0x10, both, BadAddress);
    call(t, "page_state into a kernel address", dirty, 1, kernel, both, BadAddress);
    call(t, "page_state into a read-only page", dirty, 1, read_only, both, BadAddress);
    call(t, "page_state into the own code", dirty, 1, code, both, BadAddress);
    // The last byte of the dirty page, the last of its stretch, then the unmapped gap.
    call(
        t,
        "page_state into memory running past a stretch",
        dirty,
        2,
        dirty + PAGE - 1,
        both,
        BadAddress,
    );
    t.expect("page_state wrote nothing before the gap", holds(read(dirty + PAGE - 8) == 0), Ok(()));
    if let Ok(nailed) = tessera::stretch_create(PAGE, Rights::READ.union(Rights::WRITE)) {
        call(t, "page_state in a nailed stretch", nailed, 1, at, both, NotManaged);
        t.expect("stretch_destroy of the nailed stretch", raw_calls::destroy(nailed), Ok(()));
    }
    t.expect(
        "page_state: refused calls wrote nothing",
        holds(out.iter().all(|&b| b == 0xee)),
        Ok(()),
    );
}

/// Write faults the [`Upgrader`] saw.
static WRITE_FAULTS: AtomicU32 = AtomicU32::new(0);

/// A driver for the write-fault check: maps a fresh frame read-only on a read fault, makes
/// the page writable on a write fault at a mapped page, and counts those.
struct Upgrader {
    /// The stretch, untracked: the driver maps behind the core's back.
    core: DriverCore,
}

impl StretchDriver for Upgrader {
    fn bind(&mut self, _k: &mut dyn MemoryKernel, s: StretchInfo) -> Result<(), DriverError> {
        self.core.bind_untracked(s)
    }
    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        let page = fault.page();
        let mut s = [0];
        k.page_state(page, &mut s, 0).map_err(FaultError::Kernel)?;
        if s[0] & MAPPED == 0 {
            let frame = k.frame_alloc(FrameKind::Guaranteed).map_err(FaultError::Kernel)?;
            return k.map(page, frame, Rights::READ).map_err(FaultError::Kernel);
        }
        WRITE_FAULTS.fetch_add(1, Ordering::Relaxed);
        k.protect(page, Rights::READ.union(Rights::WRITE)).map_err(FaultError::Kernel)
    }
    fn core(&self) -> &DriverCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut DriverCore {
        &mut self.core
    }
}

/// A write to a read-only page of a bound stretch faults to its driver as before (which makes
/// it writable), and the retried write dirties it.
fn write_fault(t: &mut Tally) {
    let driver: &'static mut Upgrader =
        alloc::boxed::Box::leak(alloc::boxed::Box::new(Upgrader { core: DriverCore::new() }));
    let rw = Rights::READ.union(Rights::WRITE);
    let info = match tessera::paging::bind(driver, PAGE, rw) {
        Ok(info) => info,
        Err(_) => {
            t.expect("bind a driver for the write fault", Err(SysError::NoMemory), Ok(()));
            return;
        }
    };
    let va = info.base;
    t.expect("a read fault maps the page read-only", holds(read(va) == 0), Ok(()));
    t.expect("page_state: read-only after a read fault", is(va, MAPPED | ACCESSED), Ok(()));
    write(va, 0x600d);
    let faults = WRITE_FAULTS.load(Ordering::Relaxed);
    t.expect("a write to a read-only page faults to its driver", holds(faults == 1), Ok(()));
    t.expect("the retried write landed", holds(read(va) == 0x600d), Ok(()));
    t.expect(
        "page_state: the retried write dirtied the page",
        is(va, MAPPED | ACCESSED | DIRTY),
        Ok(()),
    );
}
