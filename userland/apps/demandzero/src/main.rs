//! `demandzero`: touches every page of a managed stretch once through the physical stretch
//! driver and checks what self-paging promises.
//!
//! Usage: `demandzero [--pages N] [--unbound | --activations-off]`.
//!
//! It binds a [`PhysicalDriver`] to a read-write managed stretch of `N` pages (default 10,000)
//! and visits the pages in order: each page is read whole (the read faults, the driver maps a
//! zero-filled frame, and every byte must read zero), then stamped with a pattern of its index.
//! Every 500 pages it checks that the frames it holds stay within its frames contract. After
//! the last page it checks every stamp again, then prints
//!
//! `demandzero: pages=N kernel_faults=K driver_faults=D nonzero_pages=Z bad_stamps=B max_held=M contract=C`
//!
//! where `K` counts the faults the kernel delivered (from the control block) and `D` those the
//! driver resolved; it exits 0 if `K` = `D` = `N`, `Z` = `B` = 0 and `M` ≤ `C`, 1 otherwise.
//!
//! With `--unbound` it creates a managed stretch without binding a driver and reads it: the
//! fault reaches the runtime, which finds no driver, reports it and ends the domain with
//! status 105 (`EXIT_FAULT`). With `--activations-off` it binds the driver, then turns
//! activations off (as inside its own fault handling) and touches a page: the kernel cannot
//! deliver the fault and terminates the domain with a report.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use core::sync::atomic::Ordering;

use physical_driver::PhysicalDriver;
use tessera::{Env, PAGE_SIZE, Rights, dcb, paging, println};

tessera::main!(main);

/// Words stamped into each page (spread over it).
const STAMPS: usize = 8;

fn stamp(page: usize, word: usize) -> u64 {
    (page as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ word as u64
}

fn held() -> u64 {
    let f = &dcb().frames;
    f.guaranteed_held.load(Ordering::Acquire) + f.optimistic_held.load(Ordering::Acquire)
}

fn main(env: Env) -> i32 {
    let mut pages = 10_000usize;
    let mut unbound = false;
    let mut activations_off = false;
    let mut args = env.args;
    while let Some(arg) = args.next() {
        match (arg, args.clone().next().and_then(|v| v.parse::<usize>().ok())) {
            ("--pages", Some(n)) if n > 0 => {
                pages = n;
                args.next();
            }
            ("--unbound", _) => unbound = true,
            ("--activations-off", _) => activations_off = true,
            _ => {
                println!(
                    "demandzero: usage: demandzero [--pages N] [--unbound | --activations-off]"
                );
                return 2;
            }
        }
    }
    let rw = Rights::READ.union(Rights::WRITE);
    if unbound {
        let base = match tessera::syscall::stretch_create_managed(PAGE_SIZE, rw) {
            Ok(base) => base,
            Err(e) => {
                println!("demandzero: stretch_create_managed failed (error {})", e as usize);
                return 1;
            }
        };
        tessera::thread::init_activations();
        println!("demandzero: reading unbound managed stretch {:#x}", base);
        // SAFETY: the address is the first word of a stretch this domain owns with read
        // rights; the read faults to the runtime, which ends the domain.
        let value = unsafe { core::ptr::read_volatile(base as *const u64) };
        println!("demandzero: the read returned {} (it should not have)", value);
        return 1;
    }
    let contract = {
        let f = &dcb().frames;
        f.guaranteed.load(Ordering::Acquire) + f.optimistic.load(Ordering::Acquire)
    };
    let driver: &'static mut PhysicalDriver = Box::leak(Box::new(PhysicalDriver::new()));
    let info = match paging::bind(driver, pages * PAGE_SIZE, rw) {
        Ok(info) => info,
        Err(e) => {
            println!("demandzero: bind failed: {}", e);
            return 1;
        }
    };
    if activations_off {
        dcb().activations.store(0, Ordering::Release);
        println!("demandzero: touching {:#x} with activations off", info.base);
        // SAFETY: a page of the stretch bound above, read-write for this domain; with
        // activations off the kernel terminates the domain instead of completing the write.
        unsafe { (info.base as *mut u64).write_volatile(1) };
        println!("demandzero: the write completed (it should not have)");
        return 1;
    }
    let kernel_before = dcb().frames.faults.load(Ordering::Acquire);
    let (mut nonzero, mut bad, mut max_held) = (0usize, 0usize, held());
    for page in 0..pages {
        let words = info.page_addr(page) as *mut u64;
        // SAFETY: `words` is a page of the stretch bound above, read-write for this domain;
        // its first access faults and the driver maps it before the access completes.
        let zero = (0..PAGE_SIZE / 8).all(|w| unsafe { words.add(w).read_volatile() } == 0);
        nonzero += usize::from(!zero);
        for w in 0..STAMPS {
            // SAFETY: as above; the page is mapped read-write now.
            unsafe { words.add(w * (PAGE_SIZE / 8 / STAMPS)).write_volatile(stamp(page, w)) };
        }
        if page % 500 == 499 {
            max_held = max_held.max(held());
        }
    }
    max_held = max_held.max(held());
    for page in 0..pages {
        let words = info.page_addr(page) as *const u64;
        for w in 0..STAMPS {
            // SAFETY: as above.
            let v = unsafe { words.add(w * (PAGE_SIZE / 8 / STAMPS)).read_volatile() };
            bad += usize::from(v != stamp(page, w));
        }
    }
    let kernel = dcb().frames.faults.load(Ordering::Acquire) - kernel_before;
    let driver_faults = paging::driver_stats(info.base).map_or(0, |(s, _)| s.faults);
    println!(
        "demandzero: pages={} kernel_faults={} driver_faults={} nonzero_pages={} bad_stamps={} max_held={} contract={}",
        pages, kernel, driver_faults, nonzero, bad, max_held, contract
    );
    let ok = kernel == pages as u64
        && driver_faults == pages as u64
        && nonzero == 0
        && bad == 0
        && max_held <= contract;
    if ok { 0 } else { 1 }
}
