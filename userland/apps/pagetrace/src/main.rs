//! `pagetrace`: the recorder stretch driver (the example of `docs/stretch-driver-tutorial.md`)
//! in a domain.
//!
//! It binds a [`RecorderDriver`] to a read-write managed stretch of 64 pages and runs a known
//! access pattern over it: it reads pages 0 to 31 in order, then writes pages 0 to 15 (each
//! write upgrades a read-only page) and pages 32 to 47 (each write maps a fresh page
//! writable); pages 48 to 63 are never touched. It then prints what the driver saw:
//!
//! `pagetrace: touched=T read_only=R written=W upgrades=U sequential=S faults=F kernel_faults=K dropped=D`
//!
//! and exits 0 if that matches the pattern (48 pages touched, 16 read-only, 32 written, 16
//! upgrades, first touches in ascending order, 64 faults seen by the driver and by the kernel,
//! none dropped).

#![no_std]
#![no_main]

extern crate alloc;

use core::sync::atomic::Ordering;

use recorder_driver::RecorderDriver;
use tessera::{Env, PAGE_SIZE, Rights, dcb, paging, println};

tessera::main!(main);

/// Pages of the stretch.
const PAGES: usize = 64;

fn read(base: usize, page: usize) -> u64 {
    // SAFETY: a page of the managed stretch bound in `main`, readable by this domain; the
    // first access faults to the recorder, which maps the page.
    unsafe { ((base + page * PAGE_SIZE) as *const u64).read_volatile() }
}

fn write(base: usize, page: usize, value: u64) {
    // SAFETY: as for `read`, with write access.
    unsafe { ((base + page * PAGE_SIZE) as *mut u64).write_volatile(value) }
}

fn main(_env: Env) -> i32 {
    // ANCHOR: bind
    let driver = alloc::boxed::Box::leak(alloc::boxed::Box::new(RecorderDriver::new(256)));
    let rw = Rights::READ.union(Rights::WRITE);
    let stretch = match paging::bind(driver, PAGES * PAGE_SIZE, rw) {
        Ok(stretch) => stretch,
        Err(e) => {
            println!("pagetrace: bind failed: {}", e);
            return 1;
        }
    };
    // ANCHOR_END: bind
    let kernel_before = dcb().frames.faults.load(Ordering::Acquire);
    let mut sum = 0;
    for page in 0..32 {
        sum += read(stretch.base, page);
    }
    for page in (0..16).chain(32..48) {
        write(stretch.base, page, page as u64);
    }
    let kernel_faults = dcb().frames.faults.load(Ordering::Acquire) - kernel_before;
    // ANCHOR: report
    let seen = paging::with_driver(stretch.base, |d: &mut RecorderDriver, _| {
        (d.pattern(), d.trace().len(), d.dropped())
    });
    let Some((pattern, faults, dropped)) = seen else {
        println!("pagetrace: the driver is busy");
        return 1;
    };
    // ANCHOR_END: report
    println!(
        "pagetrace: touched={} read_only={} written={} upgrades={} sequential={} faults={} kernel_faults={} dropped={} sum={}",
        pattern.touched,
        pattern.read_only,
        pattern.written,
        pattern.upgrades,
        pattern.sequential,
        faults,
        kernel_faults,
        dropped,
        sum
    );
    let expected = pattern.touched == 48
        && pattern.read_only == 16
        && pattern.written == 32
        && pattern.upgrades == 16
        && pattern.sequential
        && faults == 64
        && kernel_faults == 64
        && dropped == 0
        && sum == 0;
    if expected { 0 } else { 1 }
}
