//! `chanpipe`: pushes numbered, checksummed messages through an IO channel and checks that
//! every one arrives, in order and intact.
//!
//! Usage:
//! - `chanpipe send --channel NAME --count N [--die-after K]` sends messages 0..N on channel
//!   `NAME`, then prints `chanpipe: sent N messages, blocked B times` (B: how often the ring was
//!   full and the sender blocked) and exits with 0. With `--die-after K` (K < N) it stops after
//!   K messages and exits with 0 without closing anything, to show the receiver a dead peer.
//! - `chanpipe recv --channel NAME --count N [--expect-closed]` receives N messages and prints
//!   `chanpipe: received R messages, L lost, O reordered, C corrupt, blocked B times`. It exits
//!   with 0 only if all N arrived intact and in order. With `--expect-closed` the sender is
//!   expected to die: the receiver reads until the channel reports it closed (after up to N
//!   messages), prints `chanpipe: channel closed after R messages` first, and exits with 0 if
//!   what arrived before was intact and in order.
//!
//! Each message is a [`tessera::record`] of 6 words and its checksum (56 bytes): the sequence
//! number `seq`, then 5 words derived from it (so a message with a good checksum but the wrong
//! contents is caught too). A message that is not 56 bytes, fails its checksum or holds the
//! wrong words counts as corrupt; a sequence number past the expected one counts the skipped
//! ones as lost; one before it counts as reordered.
//!
//! Exit codes: 0 success, 1 a check failed or the channel misbehaved, 2 bad arguments.

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use tessera::channel::{self, ChannelError};
use tessera::{Env, println, record};

tessera::main!(main);

/// Words of a message before its checksum: the sequence number and the payload.
const WORDS: usize = 6;
/// Encoded size of a message.
const MESSAGE: usize = record::encoded_len(WORDS);

/// What the arguments ask for.
struct Options {
    send: bool,
    channel: &'static str,
    count: u64,
    die_after: Option<u64>,
    expect_closed: bool,
}

fn main(env: Env) -> i32 {
    let Some(opts) = parse(env.args) else {
        println!(
            "chanpipe: usage: chanpipe send --channel NAME --count N [--die-after K] | chanpipe \
             recv --channel NAME --count N [--expect-closed]"
        );
        return 2;
    };
    if opts.send { send(&opts) } else { recv(&opts) }
}

/// Parses the arguments; `None` if they are malformed.
fn parse(mut args: tessera::Args) -> Option<Options> {
    let send = match args.next()? {
        "send" => true,
        "recv" => false,
        _ => return None,
    };
    let mut opts = Options { send, channel: "", count: 0, die_after: None, expect_closed: false };
    while let Some(arg) = args.next() {
        match arg {
            "--channel" => opts.channel = args.next()?,
            "--count" => opts.count = args.next()?.parse().ok()?,
            "--die-after" if send => opts.die_after = Some(args.next()?.parse().ok()?),
            "--expect-closed" if !send => opts.expect_closed = true,
            _ => return None,
        }
    }
    (!opts.channel.is_empty()).then_some(opts)
}

/// Word `i` (0..5) of message `seq`'s payload: a SplitMix64 step of `seq` and `i`.
/// Written out rather than drawn from `rand_xoshiro::SplitMix64::seed_from_u64(8 seq + i)`,
/// which gives the same words but costs the measured channel transfer about 190 more
/// instructions a message (`cargo xtask bench ipc`).
fn payload(seq: u64, i: usize) -> u64 {
    let mut z = seq.wrapping_mul(8).wrapping_add(i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The words of message `seq`.
fn words(seq: u64) -> [u64; WORDS] {
    let mut w = [seq; WORDS];
    for (i, word) in w[1..].iter_mut().enumerate() {
        *word = payload(seq, i);
    }
    w
}

fn send(opts: &Options) -> i32 {
    let Some(mut tx) = channel::open_sender(opts.channel) else {
        println!("chanpipe: this domain sends on no channel `{}`", opts.channel);
        return 1;
    };
    if tx.max_message() < MESSAGE {
        println!("chanpipe: slots of {} bytes are too small for {MESSAGE}", tx.max_message());
        return 1;
    }
    let limit = opts.die_after.map_or(opts.count, |k| k.min(opts.count));
    let mut buf = [0u8; MESSAGE];
    for seq in 0..limit {
        let len = record::encode(&words(seq), &mut buf).unwrap_or(0);
        if let Err(e) = tx.send(&buf[..len]) {
            println!("chanpipe: send failed after {seq} messages: {e}");
            return 1;
        }
    }
    println!("chanpipe: sent {limit} messages, blocked {} times", tx.blocks());
    if opts.die_after.is_some() {
        println!("chanpipe: dying without closing the channel");
    }
    0
}

/// What the receiver saw.
#[derive(Default)]
struct Tally {
    received: u64,
    lost: u64,
    reordered: u64,
    corrupt: u64,
    /// The sequence number expected next.
    next: u64,
}

impl Tally {
    /// Checks one message.
    fn check(&mut self, msg: &[u8]) {
        self.received += 1;
        let mut w = [0u64; WORDS];
        if record::decode(msg, &mut w).is_err() || w != words(w[0]) {
            self.corrupt += 1;
            return;
        }
        let seq = w[0];
        if seq < self.next {
            self.reordered += 1;
        } else {
            self.lost += seq - self.next;
            self.next = seq + 1;
        }
    }

    fn intact(&self) -> bool {
        self.lost == 0 && self.reordered == 0 && self.corrupt == 0
    }
}

fn recv(opts: &Options) -> i32 {
    let Some(mut rx) = channel::open_receiver(opts.channel) else {
        println!("chanpipe: this domain receives on no channel `{}`", opts.channel);
        return 1;
    };
    let mut t = Tally::default();
    let mut buf = [0u8; 256];
    let mut closed = false;
    let mut failure = None;
    // With `--expect-closed`, one receive more than the count must report the closing.
    let attempts = if opts.expect_closed { opts.count.saturating_add(1) } else { opts.count };
    for _ in 0..attempts {
        match rx.recv(&mut buf) {
            Ok(len) => t.check(&buf[..len]),
            Err(ChannelError::Closed) => {
                closed = true;
                break;
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if closed {
        println!("chanpipe: channel closed after {} messages", t.received);
    }
    if let Some(e) = failure {
        println!("chanpipe: receive failed after {} messages: {}", t.received, e);
    }
    println!(
        "chanpipe: received {} messages, {} lost, {} reordered, {} corrupt, blocked {} times",
        t.received,
        t.lost,
        t.reordered,
        t.corrupt,
        rx.blocks()
    );
    let complete = if opts.expect_closed {
        closed && t.received <= opts.count
    } else {
        !closed && t.received == opts.count
    };
    if failure.is_none() && complete && t.intact() {
        0
    } else {
        if opts.expect_closed && !closed && failure.is_none() {
            println!("chanpipe: the channel was not closed after {} messages", opts.count);
        }
        1
    }
}
