//! `wakeup`: measures how soon a domain runs the user-level thread an event wakes.
//!
//! Usage:
//! - `wakeup send --channel C --count N [--interval-us U]` sends N messages on channel `C`,
//!   each holding the clock's reading just before the send, at pseudo-random intervals of
//!   U/2 to 3U/2 microseconds (default U = 2700), sleeping in between.
//! - `wakeup recv --channel C --count N` runs a user-level thread that waits on `C`'s event
//!   endpoint (so the whole domain blocks when it waits), and on every wake-up reads the clock
//!   as its first action, then the message. For each message that arrived while the thread
//!   waited, `woken - sent` is one sample: from the sender's reading before the send to the
//!   woken thread's first instruction. It prints
//!   `wakeup: samples=S min_ns=A median_ns=M p99_ns=P max_ns=X latency_ns=L`
//!   (`L`: the domain's latency hint) and the samples in microseconds, ten to a line.
//!
//! Exit codes: 0 success, 1 a channel failed, 2 bad arguments.

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering};

use tessera::channel::{self, ChannelError};
use tessera::thread::{self, Mutex};
use tessera::{Env, clock, events, println};

tessera::main!(main);

/// Most samples kept.
const MAX_SAMPLES: usize = 1024;

static CHANNEL: Mutex<&'static str> = Mutex::new("");
static COUNT: AtomicU64 = AtomicU64::new(0);

fn main(env: Env) -> i32 {
    let mut args = env.args;
    let role = args.next();
    let (mut name, mut count, mut interval_us) = (None, None, 2700u64);
    while let Some(arg) = args.next() {
        let value = args.next();
        match (arg, value) {
            ("--channel", Some(v)) => name = Some(v),
            ("--count", Some(v)) => count = v.parse::<u64>().ok().filter(|&n| n > 0),
            ("--interval-us", Some(v)) => match v.parse::<u64>() {
                Ok(n) if n >= 2 => interval_us = n,
                _ => return usage(),
            },
            _ => return usage(),
        }
    }
    let (Some(name), Some(count)) = (name, count) else { return usage() };
    match role {
        Some("send") => send(name, count, interval_us),
        Some("recv") => {
            *CHANNEL.lock() = name;
            COUNT.store(count, Ordering::Relaxed);
            match thread::spawn(receiver, 0) {
                Ok(h) => thread::join(h) as i32,
                Err(_) => {
                    println!("wakeup: could not start the receiving thread");
                    1
                }
            }
        }
        _ => usage(),
    }
}

fn usage() -> i32 {
    println!(
        "wakeup: usage: wakeup send --channel C --count N [--interval-us U] | wakeup recv --channel C --count N"
    );
    2
}

fn send(name: &str, count: u64, interval_us: u64) -> i32 {
    let Some(mut tx) = channel::open_sender(name) else {
        println!("wakeup: this domain sends on no channel `{}`", name);
        return 1;
    };
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..count {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let wait_ns = (interval_us / 2 + (seed >> 33) % interval_us) * 1000;
        let until = tessera::time_ns() + wait_ns;
        while tessera::time_ns() < until {
            if tessera::block(until).is_err() {
                break;
            }
        }
        let sent = clock::now_ns();
        if let Err(e) = tx.send(&sent.to_le_bytes()) {
            println!("wakeup: send failed: {}", e);
            return 1;
        }
    }
    println!("wakeup: sent {} messages", count);
    0
}

fn receiver(_: usize) -> usize {
    let name = *CHANNEL.lock();
    let count = COUNT.load(Ordering::Relaxed);
    let Some(mut rx) = channel::open_receiver(name) else {
        println!("wakeup: this domain receives on no channel `{}`", name);
        return 1;
    };
    let ep = rx.event();
    let mut samples = [0u32; MAX_SAMPLES];
    let mut n = 0usize;
    let mut received = 0u64;
    let mut buf = [0u8; 8];
    let mut woken: Option<u64> = None;
    while received < count {
        let seen = events::value(ep);
        match rx.try_recv(&mut buf) {
            Ok(Some(8)) => {
                received += 1;
                let sent = u64::from_le_bytes(buf);
                if let Some(w) = woken.take()
                    && n < MAX_SAMPLES
                    && w >= sent
                {
                    samples[n] = (w - sent).min(u64::from(u32::MAX)) as u32;
                    n += 1;
                }
            }
            Ok(Some(_)) | Err(ChannelError::TooLarge) => {
                println!("wakeup: a message of the wrong size");
                return 1;
            }
            Ok(None) => {
                if thread::wait_event(ep, seen, u64::MAX).is_err() {
                    println!("wakeup: the sender is gone after {} messages", received);
                    return 1;
                }
                woken = Some(clock::now_ns());
            }
            Err(e) => {
                println!("wakeup: receive failed: {}", e);
                return 1;
            }
        }
    }
    report(&mut samples[..n]);
    0
}

fn report(samples: &mut [u32]) {
    sort(samples);
    let at = |q: usize| samples.get((samples.len() * q / 100).min(samples.len().saturating_sub(1)));
    let latency = tessera::dcb().cpu.latency_ns.load(Ordering::Relaxed);
    println!(
        "wakeup: samples={} min_ns={} median_ns={} p99_ns={} max_ns={} latency_ns={}",
        samples.len(),
        samples.first().copied().unwrap_or(0),
        at(50).copied().unwrap_or(0),
        at(99).copied().unwrap_or(0),
        samples.last().copied().unwrap_or(0),
        latency
    );
    for chunk in samples.chunks(10) {
        println!("wakeup: samples us:{}", Line { values: chunk });
    }
}

/// Insertion sort (the core library's sorts are not position-independent code, which apps
/// must be; a thousand samples sort quickly enough this way).
fn sort(v: &mut [u32]) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j - 1] > v[j] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

struct Line<'a> {
    values: &'a [u32],
}

impl core::fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for v in self.values {
            write!(f, " {}.{}", v / 1000, v % 1000 / 100)?;
        }
        Ok(())
    }
}
