//! `pingpong`: measures the round trip of a small message over two IO channels.
//!
//! Usage:
//! - `pingpong ping --channel-out A --channel-in B --rounds N` sends the round number (8 bytes)
//!   on `A` and waits for it to come back on `B`, N times. It times an empty loop of N
//!   iterations, then the N round trips, with the kernel's clock, and prints
//!   `pingpong: N round trips in T ns, empty loop L ns`, then
//!   `pingpong: ping blocked B times, woken W times`.
//! - `pingpong pong --channel-in A --channel-out B --rounds N` answers N messages, each with
//!   the same 8 bytes, then prints `pingpong: pong answered N rounds, blocked B times`.
//!
//! A round trip is two messages, two `event_send`s and, since each side waits for the other,
//! normally two `block`s and two domain switches. Under `-icount shift=0,sleep=off` one
//! nanosecond of guest time is one instruction, so `(T - L) / N` is the instructions of one
//! round trip.
//!
//! Exit codes: 0 success, 1 a channel failed or a reply was wrong, 2 bad arguments.

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use core::hint::black_box;

use tessera::channel::{self, Receiver, Sender};
use tessera::{Env, events, println, time_ns};

tessera::main!(main);

/// What the arguments ask for.
struct Options {
    ping: bool,
    out: &'static str,
    input: &'static str,
    rounds: u64,
}

fn main(env: Env) -> i32 {
    let Some(opts) = parse(env.args) else {
        println!(
            "pingpong: usage: pingpong ping --channel-out A --channel-in B --rounds N | pingpong \
             pong --channel-in A --channel-out B --rounds N"
        );
        return 2;
    };
    let Some(mut tx) = channel::open_sender(opts.out) else {
        println!("pingpong: this domain sends on no channel `{}`", opts.out);
        return 1;
    };
    let Some(mut rx) = channel::open_receiver(opts.input) else {
        println!("pingpong: this domain receives on no channel `{}`", opts.input);
        return 1;
    };
    if opts.ping {
        ping(&mut tx, &mut rx, opts.rounds)
    } else {
        pong(&mut tx, &mut rx, opts.rounds)
    }
}

/// Parses the arguments; `None` if they are malformed.
fn parse(mut args: tessera::Args) -> Option<Options> {
    let ping = match args.next()? {
        "ping" => true,
        "pong" => false,
        _ => return None,
    };
    let mut opts = Options { ping, out: "", input: "", rounds: 0 };
    while let Some(arg) = args.next() {
        match arg {
            "--channel-out" => opts.out = args.next()?,
            "--channel-in" => opts.input = args.next()?,
            "--rounds" => opts.rounds = args.next()?.parse().ok().filter(|&n| n > 0)?,
            _ => return None,
        }
    }
    (!opts.out.is_empty() && !opts.input.is_empty() && opts.rounds > 0).then_some(opts)
}

fn ping(tx: &mut Sender, rx: &mut Receiver, rounds: u64) -> i32 {
    let t0 = time_ns();
    for i in 0..rounds {
        black_box(i);
    }
    let t1 = time_ns();
    let mut buf = [0u8; 8];
    for round in 0..rounds {
        if let Err(e) = tx.send(&round.to_le_bytes()) {
            println!("pingpong: send of round {round} failed: {e}");
            return 1;
        }
        match rx.recv(&mut buf) {
            Ok(8) if u64::from_le_bytes(buf) == round => {}
            Ok(len) => {
                println!("pingpong: round {round}: wrong reply of {len} bytes");
                return 1;
            }
            Err(e) => {
                println!("pingpong: reply of round {round} failed: {e}");
                return 1;
            }
        }
    }
    let t2 = time_ns();
    println!("pingpong: {rounds} round trips in {} ns, empty loop {} ns", t2 - t1, t1 - t0);
    println!(
        "pingpong: ping blocked {} times, woken {} times",
        tx.blocks() + rx.blocks(),
        events::wakeups()
    );
    0
}

fn pong(tx: &mut Sender, rx: &mut Receiver, rounds: u64) -> i32 {
    let mut buf = [0u8; 8];
    for round in 0..rounds {
        let len = match rx.recv(&mut buf) {
            Ok(len) => len,
            Err(e) => {
                println!("pingpong: receive of round {round} failed: {e}");
                return 1;
            }
        };
        if let Err(e) = tx.send(&buf[..len]) {
            println!("pingpong: answer of round {round} failed: {e}");
            return 1;
        }
    }
    println!(
        "pingpong: pong answered {rounds} rounds, blocked {} times",
        tx.blocks() + rx.blocks()
    );
    0
}
