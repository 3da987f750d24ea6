//! `memhog`: the three parts of the revocation scenarios.
//!
//! Usage: `memhog --fill PAGES --hold MS [--stubborn]`, `memhog --claim BYTES --after MS`,
//! `memhog --guard BYTES --hold MS`, or `memhog --nailed BYTES`.
//!
//! - `--fill` binds the physical driver to a managed stretch of `PAGES` pages and stamps every
//!   page: the driver backs them with guaranteed frames while the guarantee lasts, then with
//!   optimistic ones. It prints `memhog: filled pages=P guaranteed=G optimistic=O`, then
//!   sleeps for `--hold` ms, during which the kernel may send it a revocation notice (the
//!   runtime runs the driver's `revoke`, which gives back optimistic pages; their contents are
//!   lost, as the physical driver's contract says). Afterwards it checks every page still
//!   resident and prints `memhog: held notices=N released=R resident=X corrupt=C
//!   guaranteed_lost=L`; it exits 0 if no resident page lost its stamp and every page that was
//!   on a guaranteed frame still is (`C` = `L` = 0). With `--stubborn` its driver ignores
//!   revocation (releases nothing), so the kernel terminates the domain at the deadline.
//! - `--claim` sleeps `--after` ms, then creates a nailed stretch of `BYTES` (within its
//!   guarantee) and fills it; if memory is short, the call waits while the kernel revokes
//!   optimistic frames. It prints `memhog: claimed bytes=B waited_us=W`.
//! - `--guard` fills a nailed stretch of `BYTES` with a pattern, checksums it, sleeps `--hold`
//!   ms and checksums it again: `memhog: guard before=X after=Y` (exit 0 if equal).
//! - `--nailed` creates a nailed stretch of `BYTES` (the kernel zeroes and maps every page),
//!   destroys it, creates it again and exits holding it (the kernel takes it apart): the kernel
//!   work of the largest stretch its contract allows, three times. It prints
//!   `memhog: nailed bytes=B create_us=C destroy_us=D again_us=A` (its own clock) and exits 0,
//!   or 1 if a call failed.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ops::Range;
use core::sync::atomic::Ordering;

use physical_driver::PhysicalDriver;
use stretch_driver::{
    DriverCore, DriverError, Fault, FaultError, FrameKind, MemoryKernel, StretchDriver, StretchInfo,
};
use tessera::{Env, PAGE_SIZE, Rights, dcb, paging, println, thread};

tessera::main!(main);

/// The physical driver, optionally deaf to revocation.
struct Hog {
    inner: PhysicalDriver,
    stubborn: bool,
}

impl StretchDriver for Hog {
    fn bind(&mut self, k: &mut dyn MemoryKernel, s: StretchInfo) -> Result<(), DriverError> {
        self.inner.bind(k, s)
    }
    fn fault(&mut self, k: &mut dyn MemoryKernel, f: Fault) -> Result<(), FaultError> {
        self.inner.fault(k, f)
    }
    fn lock(&mut self, k: &mut dyn MemoryKernel, r: Range<usize>) -> Result<(), DriverError> {
        self.inner.lock(k, r)
    }
    fn revoke(&mut self, k: &mut dyn MemoryKernel, frames_wanted: usize) -> usize {
        if self.stubborn { 0 } else { self.inner.revoke(k, frames_wanted) }
    }
    fn unbind(&mut self, k: &mut dyn MemoryKernel) {
        self.inner.unbind(k)
    }
    fn core(&self) -> &DriverCore {
        self.inner.core()
    }
    fn core_mut(&mut self) -> &mut DriverCore {
        self.inner.core_mut()
    }
}

fn stamp(page: usize) -> u64 {
    (page as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn sleep_ms(ms: u64) {
    thread::sleep(ms * 1_000_000);
}

enum Mode {
    Fill { pages: usize, hold: u64, stubborn: bool },
    Claim { bytes: usize, after: u64 },
    Guard { bytes: usize, hold: u64 },
    Nailed { bytes: usize },
}

fn options(env: Env) -> Option<Mode> {
    let mut args = env.args;
    let (mut fill, mut claim, mut guard, mut hold, mut after, mut stubborn) =
        (None, None, None, 0, 0, false);
    let mut nailed = None;
    while let Some(arg) = args.next() {
        if arg == "--stubborn" {
            stubborn = true;
            continue;
        }
        let n: usize = args.next()?.parse().ok()?;
        match arg {
            "--fill" => fill = Some(n),
            "--claim" => claim = Some(n),
            "--guard" => guard = Some(n),
            "--nailed" => nailed = Some(n),
            "--hold" => hold = n as u64,
            "--after" => after = n as u64,
            _ => return None,
        }
    }
    match (fill, claim, guard, nailed) {
        (Some(pages), None, None, None) => Some(Mode::Fill { pages, hold, stubborn }),
        (None, Some(bytes), None, None) => Some(Mode::Claim { bytes, after }),
        (None, None, Some(bytes), None) => Some(Mode::Guard { bytes, hold }),
        (None, None, None, Some(bytes)) => Some(Mode::Nailed { bytes }),
        _ => None,
    }
}

fn main(env: Env) -> i32 {
    match options(env) {
        Some(Mode::Fill { pages, hold, stubborn }) => fill(pages, hold, stubborn),
        Some(Mode::Claim { bytes, after }) => claim(bytes, after),
        Some(Mode::Guard { bytes, hold }) => guard(bytes, hold),
        Some(Mode::Nailed { bytes }) => nailed(bytes),
        None => {
            println!(
                "memhog: usage: memhog --fill PAGES --hold MS [--stubborn] | --claim BYTES --after MS | --guard BYTES --hold MS | --nailed BYTES"
            );
            2
        }
    }
}

fn fill(pages: usize, hold: u64, stubborn: bool) -> i32 {
    let hog = Box::leak(Box::new(Hog { inner: PhysicalDriver::new(), stubborn }));
    let rw = Rights::READ.union(Rights::WRITE);
    let info = match paging::bind(hog, pages * PAGE_SIZE, rw) {
        Ok(info) => info,
        Err(e) => {
            println!("memhog: bind failed: {}", e);
            return 1;
        }
    };
    for page in 0..pages {
        // SAFETY: a page of the stretch bound above, read-write for this domain; the first
        // touch faults and the driver maps it.
        unsafe { (info.page_addr(page) as *mut u64).write_volatile(stamp(page)) };
    }
    let kinds: Vec<Option<FrameKind>> = paging::with_driver(info.base, |h: &mut Hog, _| {
        (0..pages).map(|i| h.inner.residence(i)).collect()
    })
    .unwrap_or_default();
    let count = |k: FrameKind| kinds.iter().filter(|r| **r == Some(k)).count();
    println!(
        "memhog: filled pages={} guaranteed={} optimistic={}",
        pages,
        count(FrameKind::Guaranteed),
        count(FrameKind::Optimistic)
    );
    sleep_ms(hold);
    let now: Vec<Option<FrameKind>> = paging::with_driver(info.base, |h: &mut Hog, _| {
        (0..pages).map(|i| h.inner.residence(i)).collect()
    })
    .unwrap_or_default();
    let (mut resident, mut corrupt, mut guaranteed_lost) = (0, 0, 0);
    for page in 0..pages {
        let on_guaranteed = kinds.get(page) == Some(&Some(FrameKind::Guaranteed));
        if now.get(page).copied().flatten().is_none() {
            guaranteed_lost += usize::from(on_guaranteed);
            continue;
        }
        resident += 1;
        // SAFETY: the page is resident (mapped read-write by the driver), so the read does
        // not fault.
        let v = unsafe { (info.page_addr(page) as *const u64).read_volatile() };
        if v != stamp(page) {
            corrupt += 1;
            guaranteed_lost += usize::from(on_guaranteed);
        }
    }
    let released = paging::driver_stats(info.base).map_or(0, |(s, _)| s.frames_released);
    println!(
        "memhog: held notices={} released={} resident={} corrupt={} guaranteed_lost={}",
        dcb().revocation.notices.load(Ordering::Acquire),
        released,
        resident,
        corrupt,
        guaranteed_lost
    );
    if corrupt == 0 && guaranteed_lost == 0 { 0 } else { 1 }
}

fn claim(bytes: usize, after: u64) -> i32 {
    sleep_ms(after);
    let start = tessera::time_ns();
    let rw = Rights::READ.union(Rights::WRITE);
    let base = match tessera::stretch_create(bytes, rw) {
        Ok(base) => base,
        Err(e) => {
            println!("memhog: claim of {} bytes failed: {}", bytes, e.name());
            return 1;
        }
    };
    let waited = (tessera::time_ns() - start) / 1000;
    for page in 0..bytes / PAGE_SIZE {
        // SAFETY: a page of the nailed read-write stretch just created.
        unsafe { ((base + page * PAGE_SIZE) as *mut u64).write_volatile(stamp(page)) };
    }
    println!("memhog: claimed bytes={} waited_us={}", bytes, waited);
    0
}

fn checksum(base: usize, bytes: usize) -> u64 {
    (0..bytes / 8).fold(0xcbf2_9ce4_8422_2325u64, |h, i| {
        // SAFETY: inside the nailed stretch `guard` created.
        let w = unsafe { ((base + i * 8) as *const u64).read_volatile() };
        (h ^ w).wrapping_mul(0x100_0000_01b3)
    })
}

fn guard(bytes: usize, hold: u64) -> i32 {
    let rw = Rights::READ.union(Rights::WRITE);
    let Ok(base) = tessera::stretch_create(bytes, rw) else {
        println!("memhog: guard stretch refused");
        return 1;
    };
    for i in 0..bytes / 8 {
        // SAFETY: inside the nailed read-write stretch just created.
        unsafe { ((base + i * 8) as *mut u64).write_volatile(stamp(i)) };
    }
    let before = checksum(base, bytes);
    sleep_ms(hold);
    let after = checksum(base, bytes);
    println!("memhog: guard before={:#x} after={:#x}", before, after);
    if before == after { 0 } else { 1 }
}

/// `--nailed`: create, destroy, create again, and exit holding the stretch.
fn nailed(bytes: usize) -> i32 {
    let rw = Rights::READ.union(Rights::WRITE);
    let timed = |f: &mut dyn FnMut() -> Result<(), tessera::SysError>| {
        let start = tessera::time_ns();
        f().map(|()| (tessera::time_ns() - start) / 1000)
    };
    let mut base = 0;
    let created = timed(&mut || tessera::stretch_create(bytes, rw).map(|b| base = b));
    let destroyed = created.and_then(|_| timed(&mut || tessera::stretch_destroy(base)));
    let again =
        destroyed.and_then(|_| timed(&mut || tessera::stretch_create(bytes, rw).map(|_| ())));
    match (created, destroyed, again) {
        (Ok(c), Ok(d), Ok(a)) => {
            println!(
                "memhog: nailed bytes={} create_us={} destroy_us={} again_us={}",
                bytes, c, d, a
            );
            0
        }
        (c, d, a) => {
            let e = c.and(d).and(a).err().map_or("?", |e| e.name());
            println!("memhog: nailed bytes={} failed: {}", bytes, e);
            1
        }
    }
}
