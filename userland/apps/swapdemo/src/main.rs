//! `swapdemo`: the swap driver (the swap lab's, `docs/labs/swap.md`) in a domain.
//!
//! It binds a [`SwapDriver`] with a budget of 8 frames and 32 slots to a read-write managed
//! stretch of 32 pages, writes every word of every page in order (each page's first store
//! faults; from the ninth page on, each fault evicts the oldest page to a slot), then reads
//! every word back in the same order (every page faults again: first in, first out over a sweep
//! larger than the frames keeps none of the pages the sweep comes to). It prints
//!
//! `swapdemo: ok pages=32 frames=8 faults=F kernel_faults=K evictions=E swap_ins=S`
//!
//! and exits 0 when every word holds what was written; otherwise it names the first word that
//! does not and exits 1. With the reference driver: 64 faults, seen by the driver and by the
//! kernel, 56 evictions and 32 swap-ins (`qemu::riscv64::lab_swap_in_a_domain` checks them).

#![no_std]
#![no_main]

extern crate alloc;

use core::sync::atomic::Ordering;

use swap_driver::SwapDriver;
use tessera::{Env, PAGE_SIZE, Rights, dcb, paging, println};

tessera::main!(main);

/// Pages of the stretch.
const PAGES: usize = 32;
/// Frames the driver may use.
const FRAMES: usize = 8;
/// Slots of its swap area.
const SLOTS: usize = 32;
/// Words a page.
const WORDS: usize = PAGE_SIZE / 8;

/// What word `word` of page `page` holds: never 0, different for every word.
fn pattern(page: usize, word: usize) -> u64 {
    ((page as u64) << 32 | word as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
}

fn main(_env: Env) -> i32 {
    let driver = alloc::boxed::Box::leak(alloc::boxed::Box::new(SwapDriver::new(FRAMES, SLOTS)));
    let rw = Rights::READ.union(Rights::WRITE);
    let stretch = match paging::bind(driver, PAGES * PAGE_SIZE, rw) {
        Ok(stretch) => stretch,
        Err(e) => {
            println!("swapdemo: bind failed: {}", e);
            return 1;
        }
    };
    let word = |page: usize, w: usize| (stretch.base + page * PAGE_SIZE + 8 * w) as *mut u64;
    let kernel_before = dcb().frames.faults.load(Ordering::Acquire);
    for page in 0..PAGES {
        for w in 0..WORDS {
            // SAFETY: a word of the managed stretch bound above, read-write for this domain;
            // the first store to each page faults to the swap driver, which maps the page.
            unsafe { word(page, w).write_volatile(pattern(page, w)) };
        }
    }
    for page in 0..PAGES {
        for w in 0..WORDS {
            // SAFETY: as for the stores.
            let got = unsafe { word(page, w).read_volatile() };
            if got != pattern(page, w) {
                println!(
                    "swapdemo: page {} word {} reads {:#x}, expected {:#x}",
                    page,
                    w,
                    got,
                    pattern(page, w)
                );
                return 1;
            }
        }
    }
    let kernel_faults = dcb().frames.faults.load(Ordering::Acquire) - kernel_before;
    let swap = paging::with_driver(stretch.base, |d: &mut SwapDriver, _| d.swap_stats());
    let faults = paging::driver_stats(stretch.base).map(|(stats, _)| stats.faults);
    let (Some(swap), Some(faults)) = (swap, faults) else {
        println!("swapdemo: the driver is busy");
        return 1;
    };
    println!(
        "swapdemo: ok pages={} frames={} faults={} kernel_faults={} evictions={} swap_ins={}",
        PAGES, FRAMES, faults, kernel_faults, swap.evictions, swap.swap_ins
    );
    0
}
