//! `nullcall`: measures the bare system-call path, or the domain switch.
//!
//! Usage: `nullcall [--calls N] [--yield | --sleep]` (default 100000 calls of `null`), or
//! `nullcall --idle MS [--every US]`. It times N
//! iterations of an empty loop, then N system calls, with the kernel's clock, and prints
//! `nullcall: N calls in T ns, empty loop L ns`. Under `-icount shift=0,sleep=off` one
//! nanosecond of guest time is one instruction, so `(T - L) / N` is the instructions one null
//! call costs (entry, dispatch, return); `cargo xtask bench ipc` computes it. With `--yield`
//! the calls are `yield`: with two such domains every call switches to the other, so
//! `(T - L) / (2 N)` is one domain switch (including the `yield` call that causes it).
//! With `--sleep` the calls are `block` until the instant the call reads from the clock, which
//! has passed when the kernel looks: one timed wake-up of the kernel's (the block, the pass
//! that finds the domain's instant due and wakes it, the dispatch), `(T - L) / N`.
//! With `--idle MS` it only sleeps for `MS` milliseconds and exits: a domain under a
//! contract that is blocked while others are measured (`bench ipc` runs the switch beside
//! up to 62 of them). With `--every US` it sleeps in steps of `US` microseconds instead, waking
//! after each (a timed wake-up of the kernel's every `US`) until `MS` milliseconds have passed
//! since it started: the sleepers beside `bench canary`'s canary.

#![no_std]
#![no_main]

use core::hint::black_box;

use tessera::{Env, println};

tessera::main!(main);

fn main(env: Env) -> i32 {
    let mut calls: u64 = 100_000;
    let mut switch = false;
    let mut sleep = false;
    let mut args = env.args;
    while let Some(arg) = args.next() {
        if arg == "--yield" {
            switch = true;
            continue;
        }
        if arg == "--sleep" {
            sleep = true;
            continue;
        }
        if arg == "--idle" {
            let Some(Ok(ms)) = args.next().map(str::parse::<u64>) else {
                println!("nullcall: usage: nullcall --idle MS [--every US]");
                return 2;
            };
            let every = match (args.next(), args.next().map(str::parse::<u64>)) {
                (None, _) => None,
                (Some("--every"), Some(Ok(us))) if us > 0 => Some(us * 1_000),
                _ => {
                    println!("nullcall: usage: nullcall --idle MS [--every US]");
                    return 2;
                }
            };
            let Some(step) = every else {
                tessera::thread::sleep(ms * 1_000_000);
                return 0;
            };
            let end = tessera::time_ns().saturating_add(ms * 1_000_000);
            loop {
                let now = tessera::time_ns();
                if now >= end {
                    return 0;
                }
                tessera::thread::sleep(step.min(end - now));
            }
        }
        match (arg, args.next().map(str::parse)) {
            ("--calls", Some(Ok(n))) if n > 0 => calls = n,
            _ => {
                println!(
                    "nullcall: usage: nullcall [--calls N] [--yield | --sleep] | nullcall --idle MS [--every US]"
                );
                return 2;
            }
        }
    }
    let t0 = tessera::time_ns();
    for i in 0..calls {
        black_box(i);
    }
    let t1 = tessera::time_ns();
    for i in 0..calls {
        black_box(i);
        if switch {
            tessera::yield_now();
        } else if sleep {
            if tessera::syscall::block(tessera::time_ns()).is_err() {
                println!("nullcall: the block call failed");
                return 1;
            }
        } else if tessera::null().is_err() {
            println!("nullcall: the null call failed");
            return 1;
        }
    }
    let t2 = tessera::time_ns();
    println!("nullcall: {} calls in {} ns, empty loop {} ns", calls, t2 - t1, t1 - t0);
    0
}
