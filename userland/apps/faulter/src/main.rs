//! `faulter`: page faults resolved by the domain's own stretch driver, without end or counted.
//!
//! Usage: `faulter --for MS [--zero]` or `faulter --bench N [--zero]`.
//!
//! Both bind a [`RecyclingDriver`] to a read-write managed stretch. With `--for`, the stretch
//! has 4,096 pages and the driver 64 frames; the app writes one word to each page in turn,
//! round and round, so every write faults and the driver evicts the oldest page to map the
//! new one, for `MS` milliseconds of the clock. It then prints
//! `faulter: faults=F elapsed_ns=E` (the faults the kernel delivered and the time taken).
//!
//! With `--bench N` the driver has `N` frames for `N` pages, so no fault evicts: the app times
//! the first write to each page (a fault: the trap, the activation, the driver mapping a frame,
//! the resumption) and then a second round of writes (no faults), and prints
//! `faulter: bench faults=N fault_ns=T touch_ns=U`: the total time of each round, whose
//! difference divided by `N` is the cost of one fault round trip. Under
//! `-icount shift=0,sleep=off` a nanosecond is one instruction. `--zero` makes the driver
//! zero-fill each page it maps.

#![no_std]
#![no_main]

extern crate alloc;

mod recycling;

use alloc::boxed::Box;
use core::sync::atomic::Ordering;

use recycling::RecyclingDriver;
use tessera::{Env, PAGE_SIZE, Rights, dcb, paging, println};

tessera::main!(main);

fn kernel_faults() -> u64 {
    dcb().frames.faults.load(Ordering::Acquire)
}

fn main(env: Env) -> i32 {
    let (mut duration_ms, mut bench, mut zero) = (None, None, false);
    let mut args = env.args;
    while let Some(arg) = args.next() {
        match arg {
            "--zero" => zero = true,
            "--for" | "--bench" => {
                let Some(n) = args.next().and_then(|v| v.parse::<u64>().ok()) else {
                    return usage();
                };
                if arg == "--for" {
                    duration_ms = Some(n);
                } else {
                    bench = Some(n as usize);
                }
            }
            _ => return usage(),
        }
    }
    match (duration_ms, bench) {
        (Some(ms), None) => forever(ms, zero),
        (None, Some(n)) if n > 0 => measure(n, zero),
        _ => usage(),
    }
}

fn usage() -> i32 {
    println!("faulter: usage: faulter --for MS [--zero] | --bench N [--zero]");
    2
}

/// Binds a recycling driver with `frames` frames to a stretch of `pages` pages.
fn bind(pages: usize, frames: usize, zero: bool) -> Option<usize> {
    let driver = Box::leak(Box::new(RecyclingDriver::new(frames, zero)));
    match paging::bind(driver, pages * PAGE_SIZE, Rights::READ.union(Rights::WRITE)) {
        Ok(info) => Some(info.base),
        Err(e) => {
            println!("faulter: bind failed: {}", e);
            None
        }
    }
}

fn touch(base: usize, page: usize, value: u64) {
    // SAFETY: a page of the managed stretch bound in `bind`, read-write for this domain; if it
    // is not resident the write faults and the driver maps it first.
    unsafe { ((base + page * PAGE_SIZE) as *mut u64).write_volatile(value) };
}

fn forever(ms: u64, zero: bool) -> i32 {
    const PAGES: usize = 4096;
    let Some(base) = bind(PAGES, 64, zero) else { return 1 };
    let before = kernel_faults();
    let start = tessera::clock::now_ns();
    let end = start + ms * 1_000_000;
    let mut page = 0;
    let mut now = start;
    while now < end {
        touch(base, page, now);
        page = (page + 1) % PAGES;
        now = tessera::clock::now_ns();
    }
    println!("faulter: faults={} elapsed_ns={}", kernel_faults() - before, now - start);
    0
}

fn measure(n: usize, zero: bool) -> i32 {
    let Some(base) = bind(n, n, zero) else { return 1 };
    let before = kernel_faults();
    let t0 = tessera::clock::now_ns();
    for page in 0..n {
        touch(base, page, 1);
    }
    let t1 = tessera::clock::now_ns();
    for page in 0..n {
        touch(base, page, 2);
    }
    let t2 = tessera::clock::now_ns();
    let faults = kernel_faults() - before;
    println!("faulter: bench faults={} fault_ns={} touch_ns={}", faults, t1 - t0, t2 - t1);
    if faults == n as u64 { 0 } else { 1 }
}
