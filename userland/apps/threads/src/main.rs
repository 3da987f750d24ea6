//! `threads`: user-level threads keep the domain busy while one of them blocks.
//!
//! Usage: `threads [--workers N] [--rounds R]` (default 4 workers, 50 rounds). The first thread
//! spawns a sleeper, which sleeps 20 ms of guest time, and N workers, which each add 1 to a
//! mutex-protected counter R times, yielding while holding the lock every few rounds (so
//! others queue on it) and between rounds. It prints how far the workers got while the sleeper
//! slept, joins everyone and prints
//! `threads: N workers x R rounds = total T, progress while one slept P, sleeper woke after S ms,
//! A activations` (A: how many times the kernel entered the domain's activation handler).
//! Exits 0 when the total is exact, the workers progressed during the sleep, the sleep lasted
//! at least 20 ms, and the domain was activated at least once.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use tessera::thread::{self, Mutex};
use tessera::{Env, println};

tessera::main!(main);

static COUNTER: Mutex<u64> = Mutex::new(0);
static PROGRESS: AtomicU64 = AtomicU64::new(0);
static PROGRESS_DURING_SLEEP: AtomicU64 = AtomicU64::new(0);
static ROUNDS: AtomicU64 = AtomicU64::new(50);
const SLEEP_NS: u64 = 20_000_000;

fn sleeper(_: usize) -> usize {
    let before = PROGRESS.load(Ordering::Relaxed);
    let t0 = tessera::time_ns();
    thread::sleep(SLEEP_NS);
    let slept = tessera::time_ns() - t0;
    PROGRESS_DURING_SLEEP.store(PROGRESS.load(Ordering::Relaxed) - before, Ordering::Relaxed);
    slept as usize
}

fn worker(id: usize) -> usize {
    let rounds = ROUNDS.load(Ordering::Relaxed);
    for round in 0..rounds {
        let mut c = COUNTER.lock();
        *c += 1;
        if round % 4 == id as u64 % 4 {
            thread::yield_now();
        }
        drop(c);
        PROGRESS.fetch_add(1, Ordering::Relaxed);
        // Spread the work over the sleeper's 20 ms.
        let until = tessera::time_ns() + 200_000;
        while tessera::time_ns() < until {
            thread::yield_now();
        }
    }
    id
}

fn main(env: Env) -> i32 {
    let mut workers = 4usize;
    let mut args = env.args;
    while let Some(arg) = args.next() {
        match (arg, args.next().map(str::parse::<u64>)) {
            ("--workers", Some(Ok(n))) if (1..=12).contains(&n) => workers = n as usize,
            ("--rounds", Some(Ok(n))) => ROUNDS.store(n, Ordering::Relaxed),
            _ => {
                println!("threads: usage: threads [--workers N] [--rounds R]");
                return 2;
            }
        }
    }
    let Ok(s) = thread::spawn(sleeper, 0) else {
        println!("threads: could not spawn the sleeper");
        return 1;
    };
    let mut handles = [None; 12];
    for (i, h) in handles.iter_mut().enumerate().take(workers) {
        *h = thread::spawn(worker, i).ok();
    }
    let mut ok = true;
    for (i, h) in handles.iter().enumerate().take(workers) {
        match h {
            Some(h) => ok &= thread::join(*h) == i,
            None => ok = false,
        }
    }
    let slept_ns = thread::join(s) as u64;
    let total = *COUNTER.lock();
    let rounds = ROUNDS.load(Ordering::Relaxed);
    let during = PROGRESS_DURING_SLEEP.load(Ordering::Relaxed);
    let upcalls = tessera::dcb().upcalls.load(Ordering::Relaxed);
    println!(
        "threads: {} workers x {} rounds = total {}, progress while one slept {}, sleeper woke after {} ms, {} activations",
        workers,
        rounds,
        total,
        during,
        slept_ns / 1_000_000,
        upcalls
    );
    ok &= total == workers as u64 * rounds && during > 0 && slept_ns >= SLEEP_NS && upcalls > 0;
    if ok { 0 } else { 1 }
}
