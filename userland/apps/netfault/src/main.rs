//! `netfault`: a UDP client of the network driver domain (through `net_client`) for the
//! network's fault tests. Every mode opens port P on the driver reached by the channels
//! `NAME-req`/`NAME-resp` (`--net NAME --port P`), may first sleep (`--after MS`), and prints a
//! summary line, which a test reads.
//!
//! - `--sink N --hello A.B.C.D:Q [--think-us U]`: the victim of a hostile node's flood
//!   (`virtio-net --hostile N`). It says HELLO to the hostile at A.B.C.D:Q, then takes the
//!   datagrams that arrive, sleeping U µs after each (a slow reader, so that its receive slots
//!   fill), and checks every payload: 200 bytes, a sequence number below N seen once, and the
//!   bytes the hostile draws from it ([`flood_byte`]). Its stream's accounts count the
//!   datagrams the driver dropped with its slots full; it ends once the datagrams it took and
//!   those drops add up to N, closes, and fails unless every one it took was intact.
//! - `--die --to A.B.C.D:Q --answers W --queue K --queue-to A.B.C.D:R`: a client that dies
//!   with datagrams in flight both ways. It sends W datagrams to an echoing peer at `--to`,
//!   one at a time, each time waiting (by its accounts, without reading them) until the answer
//!   is in its receive slots, queues K sends of 1,472 bytes to `--queue-to` (faster than the link model lets
//!   them leave), reads its accounts once more, and faults without closing. The driver closes
//!   it and counts what it dropped.
//! - `--until-closed [--to A.B.C.D:Q] [--every-us U]`: a client whose driver dies. With
//!   `--to` it sends a 64-byte datagram there every U µs (default 1,000), else it waits to
//!   receive; either way until the session says [`NetError::Closed`], which it reports, then
//!   exits with status 0 (any other error: 1).

#![no_std]
#![no_main]

use net_client::{ChannelTransport, NetError, Session};
use net_interface::Endpoint;
use net_interface::frame::MAX_UDP_PAYLOAD;
use tessera::{Env, println};

tessera::main!(main);

/// The flood's payload bytes (`virtio-net --hostile`'s).
const FLOOD_PAYLOAD: usize = 200;
/// The most flood datagrams the sink tracks.
const MAX_FLOOD: u32 = 16_384;
/// How long the dying client waits for its answers, at most.
const ANSWERS_WITHIN_NS: u64 = 1_000_000_000;

const USAGE: &str = "usage: netfault --net NAME --port P [--after MS] (--sink N --hello A.B.C.D:Q [--think-us U] | --die --to A.B.C.D:Q --answers W --queue K --queue-to A.B.C.D:R | --until-closed [--to A.B.C.D:Q] [--every-us U])";

/// Byte `i` of the payload of flood datagram `seq` after its 4-byte sequence number: the rule
/// of `virtio-net --hostile` (`drivers/virtio_net/src/hostile.rs`).
fn flood_byte(seq: u32, i: usize) -> u8 {
    (seq.wrapping_mul(0x9e37_79b9) >> 24) as u8 ^ (i as u8).wrapping_mul(61) ^ 0xa5
}

/// What the domain is asked to do.
enum Mode {
    Sink { flood: u32, hello: Endpoint, think_ns: u64 },
    Die { to: Endpoint, answers: u32, queue: u32, queue_to: Endpoint },
    UntilClosed { to: Option<Endpoint>, every_ns: u64 },
}

/// The options, as given.
#[derive(Default)]
struct Options<'a> {
    net: Option<&'a str>,
    port: Option<u16>,
    after_ms: u64,
    sink: Option<u32>,
    hello: Option<Endpoint>,
    think_us: u64,
    die: bool,
    to: Option<Endpoint>,
    answers: Option<u32>,
    queue: Option<u32>,
    queue_to: Option<Endpoint>,
    until_closed: bool,
    every_us: Option<u64>,
}

fn parse(mut args: tessera::Args) -> Result<(Options<'static>, Mode), &'static str> {
    let mut o = Options::default();
    while let Some(a) = args.next() {
        match a {
            "--die" => o.die = true,
            "--until-closed" => o.until_closed = true,
            _ => {
                let v = args.next().ok_or("an option without its value")?;
                let n = || v.parse::<u64>().map_err(|_| "a number that does not parse");
                let ep = || Endpoint::parse(v).ok_or("an endpoint that is not A.B.C.D:Q");
                match a {
                    "--net" => o.net = Some(v),
                    "--port" => o.port = Some(v.parse().map_err(|_| "a bad port")?),
                    "--after" => o.after_ms = n()?,
                    "--sink" => o.sink = Some(v.parse().map_err(|_| "a bad --sink")?),
                    "--hello" => o.hello = Some(ep()?),
                    "--think-us" => o.think_us = n()?,
                    "--to" => o.to = Some(ep()?),
                    "--answers" => o.answers = Some(v.parse().map_err(|_| "a bad --answers")?),
                    "--queue" => o.queue = Some(v.parse().map_err(|_| "a bad --queue")?),
                    "--queue-to" => o.queue_to = Some(ep()?),
                    "--every-us" => o.every_us = Some(n()?),
                    _ => return Err("unknown option"),
                }
            }
        }
    }
    let mode = match (o.sink, o.die, o.until_closed) {
        (Some(flood), false, false) => Mode::Sink {
            flood: if flood <= MAX_FLOOD { flood } else { return Err("--sink N above 16384") },
            hello: o.hello.ok_or("--sink needs --hello")?,
            think_ns: o.think_us.saturating_mul(1000),
        },
        (None, true, false) => Mode::Die {
            to: o.to.ok_or("--die needs --to")?,
            answers: o.answers.ok_or("--die needs --answers")?,
            queue: o.queue.ok_or("--die needs --queue")?,
            queue_to: o.queue_to.ok_or("--die needs --queue-to")?,
        },
        (None, false, true) => Mode::UntilClosed {
            to: o.to,
            every_ns: o.every_us.unwrap_or(1000).saturating_mul(1000),
        },
        _ => return Err("exactly one of --sink, --die and --until-closed"),
    };
    Ok((o, mode))
}

fn main(env: Env) -> i32 {
    let (o, mode) = match parse(env.args) {
        Ok(p) => p,
        Err(why) => {
            println!("netfault: {why}; {USAGE}");
            return 2;
        }
    };
    let (Some(net), Some(port)) = (o.net, o.port) else {
        println!("netfault: --net and --port are needed; {USAGE}");
        return 2;
    };
    let Some(transport) = ChannelTransport::connect(net) else {
        println!("netfault: no channels {net}-req and {net}-resp");
        return 1;
    };
    let mut session = Session::new(transport);
    if let Err(e) = session.open(port) {
        println!("netfault: open of port {port} failed: {e:?}");
        return 1;
    }
    if o.after_ms > 0 {
        tessera::thread::sleep(o.after_ms.saturating_mul(1_000_000));
    }
    match mode {
        Mode::Sink { flood, hello, think_ns } => sink(&mut session, flood, hello, think_ns),
        Mode::Die { to, answers, queue, queue_to } => {
            die(&mut session, to, answers, queue, queue_to)
        }
        Mode::UntilClosed { to, every_ns } => until_closed(&mut session, to, every_ns),
    }
}

/// The sequence number of a flood datagram, if it is intact.
fn check_flood(payload: &[u8], flood: u32) -> Option<u32> {
    if payload.len() != FLOOD_PAYLOAD {
        return None;
    }
    let seq = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
    let intact =
        seq < flood && payload[4..].iter().enumerate().all(|(i, &b)| b == flood_byte(seq, i));
    intact.then_some(seq)
}

/// The flood's victim; see the [crate] documentation.
fn sink(
    session: &mut Session<ChannelTransport>,
    flood: u32,
    hello: Endpoint,
    think_ns: u64,
) -> i32 {
    if let Err(e) = session.send(hello, b"HELLO from the sink") {
        println!("netfault: sink: HELLO failed: {e:?}");
        return 1;
    }
    let mut seen = [0u64; MAX_FLOOD as usize / 64];
    let (mut intact, mut duplicates, mut bad, mut dropped) = (0u32, 0u32, 0u32, 0u64);
    while u64::from(intact + duplicates + bad) + dropped < u64::from(flood) {
        match session.receive(|d| check_flood(d.payload, flood)) {
            Ok(Some(seq)) => {
                let (word, bit) = (seq as usize / 64, 1u64 << (seq % 64));
                if seen[word] & bit != 0 {
                    duplicates += 1;
                } else {
                    seen[word] |= bit;
                    intact += 1;
                }
            }
            Ok(None) => bad += 1,
            Err(e) => {
                println!("netfault: sink: receive failed: {e:?}");
                return 1;
            }
        }
        if think_ns > 0 {
            tessera::thread::sleep(think_ns);
        }
        // The Release that ended the receive was answered after the driver published every
        // drop up to the datagram's delivery.
        dropped = session.accounts().map_or(dropped, |a| a.dropped_rx_full);
    }
    println!(
        "netfault: sink: a flood of {flood} datagrams: {intact} received intact, {dropped} dropped with the receive slots full, {duplicates} duplicates, {bad} bad"
    );
    if let Err(e) = session.close() {
        println!("netfault: sink: close failed: {e:?}");
        return 1;
    }
    if duplicates == 0 && bad == 0 && u64::from(intact) + dropped == u64::from(flood) {
        0
    } else {
        1
    }
}

/// The client that dies with datagrams in flight; see the [crate] documentation.
fn die(
    session: &mut Session<ChannelTransport>,
    to: Endpoint,
    answers: u32,
    queue: u32,
    queue_to: Endpoint,
) -> i32 {
    let buf = [0x5au8; MAX_UDP_PAYLOAD];
    // One at a time: an echo that closes once it has answered drops an answer still queued.
    for i in 0..answers {
        if let Err(e) = session.send(to, &buf[..64]) {
            println!("netfault: die: send {i} failed: {e:?}");
            return 1;
        }
        let deadline = tessera::time_ns() + ANSWERS_WITHIN_NS;
        while session.accounts().is_none_or(|a| a.packets_received <= u64::from(i)) {
            if tessera::time_ns() > deadline {
                println!("netfault: die: answer {i} did not come");
                return 1;
            }
            tessera::thread::sleep(100_000);
        }
    }
    for i in 0..queue {
        if let Err(e) = session.send(queue_to, &buf) {
            println!("netfault: die: queued send {i} failed: {e:?}");
            return 1;
        }
    }
    let a = session.accounts().unwrap_or_default();
    println!(
        "netfault: die: dying with {} datagrams received unread and {} sends made, {} sent by the last accounts",
        a.packets_received,
        answers + queue,
        a.packets_sent
    );
    tessera::fault::now()
}

/// The client whose driver dies; see the [crate] documentation.
fn until_closed(
    session: &mut Session<ChannelTransport>,
    to: Option<Endpoint>,
    every_ns: u64,
) -> i32 {
    let buf = [0xc3u8; 64];
    let mut done = 0u64;
    let e = loop {
        let r = match to {
            Some(to) => session.send(to, &buf),
            None => session.receive(|_| ()),
        };
        if let Err(e) = r {
            break e;
        }
        done += 1;
        if to.is_some() {
            tessera::thread::sleep(every_ns);
        }
    };
    let what = if to.is_some() { "sent" } else { "received" };
    if e == NetError::Closed {
        println!("netfault: the driver is gone (Closed) after {done} datagrams {what}");
        0
    } else {
        println!("netfault: {e:?} after {done} datagrams {what}");
        1
    }
}
