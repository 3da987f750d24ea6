//! `netping`: UDP ping-pong over the network driver domain, through `net_client`.
//!
//! `netping --net NAME --port P --echo N` opens UDP port P on the driver reached by the
//! channels `NAME-req`/`NAME-resp` and sends every datagram it receives back to its sender,
//! N datagrams in all, then closes. `netping --net NAME --port P --to A.B.C.D:Q --rounds N`
//! waits [`START_NS`] (for the echoing peer to open its port), then plays N rounds, each a ping
//! of 64 bytes and one of 1,472 (the largest UDP payload of one frame), waiting for each
//! answer before the next ping; with `--size BYTES` (8 to 1,472) every ping has that size
//! instead, two per round. A ping's payload is its sequence number, its length and bytes
//! drawn from the sequence number; every answer is checked byte for byte. An answer to an
//! earlier ping than the one awaited is a duplicate; one to a later ping counts the pings in
//! between as lost. Both print a summary line, which a test reads; the pinger fails unless
//! every ping was answered, none twice and none damaged.

#![no_std]
#![no_main]

use net_client::{ChannelTransport, Session};
use net_interface::frame::MAX_UDP_PAYLOAD;
use net_interface::{Endpoint, Ipv4Addr};
use tessera::{Env, println};

tessera::main!(main);

/// How long the pinger waits before its first ping.
const START_NS: u64 = 50_000_000;
/// The two sizes of ping, in bytes of UDP payload.
const SIZES: [usize; 2] = [64, MAX_UDP_PAYLOAD];

const USAGE: &str =
    "usage: netping --net NAME --port P (--echo N | --to A.B.C.D:Q --rounds N [--size BYTES])";

/// What the domain is asked to do.
enum Role {
    /// Answer this many datagrams.
    Echo(u32),
    /// Ping this peer for this many rounds, with pings of these two sizes.
    Ping(Endpoint, u32, [usize; 2]),
}

fn main(env: Env) -> i32 {
    let (mut net, mut port, mut echo, mut to, mut rounds) = (None, None, None, None, None);
    let mut size = None;
    let mut args = env.args;
    while let Some(a) = args.next() {
        let v = args.next();
        match a {
            "--net" => net = v,
            "--port" => port = v.and_then(|p| p.parse::<u16>().ok()),
            "--echo" => echo = v.and_then(|n| n.parse::<u32>().ok()),
            "--to" => to = v.and_then(parse_endpoint),
            "--rounds" => rounds = v.and_then(|n| n.parse::<u32>().ok()),
            "--size" => match v.and_then(|n| n.parse::<usize>().ok()) {
                Some(s) if (8..=MAX_UDP_PAYLOAD).contains(&s) => size = Some(s),
                _ => return usage("--size takes 8 to 1472 bytes"),
            },
            _ => return usage("unknown option"),
        }
    }
    let (Some(net), Some(port)) = (net, port) else {
        return usage("--net and --port are needed");
    };
    let role = match (echo, to, rounds) {
        (Some(n), None, None) if size.is_none() => Role::Echo(n),
        (None, Some(to), Some(n)) => Role::Ping(to, n, size.map_or(SIZES, |s| [s, s])),
        _ => return usage("either --echo N or both --to and --rounds"),
    };
    let Some(transport) = ChannelTransport::connect(net) else {
        println!("netping: no channels {net}-req and {net}-resp");
        return 1;
    };
    let mut session = Session::new(transport);
    if let Err(e) = session.open(port) {
        println!("netping: open of port {port} failed: {e:?}");
        return 1;
    }
    let status = match role {
        Role::Echo(n) => echo_loop(&mut session, n),
        Role::Ping(to, n, sizes) => ping(&mut session, to, n, sizes),
    };
    if let Err(e) = session.close() {
        println!("netping: close failed: {e:?}");
        return 1;
    }
    status
}

fn usage(why: &str) -> i32 {
    println!("netping: {why}; {USAGE}");
    2
}

/// `A.B.C.D:Q`.
fn parse_endpoint(s: &str) -> Option<Endpoint> {
    let (addr, port) = s.split_once(':')?;
    let mut octets = [0u8; 4];
    let mut parts = addr.split('.');
    for o in &mut octets {
        *o = parts.next()?.parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(Endpoint { addr: Ipv4Addr(octets), port: port.parse().ok()? })
}

/// Answers `n` datagrams.
fn echo_loop(session: &mut Session<ChannelTransport>, n: u32) -> i32 {
    let mut buf = [0u8; MAX_UDP_PAYLOAD];
    let mut bytes = 0u64;
    for _ in 0..n {
        let got = session.receive(|d| {
            let len = d.payload.len().min(buf.len());
            buf[..len].copy_from_slice(&d.payload[..len]);
            (d.from, len)
        });
        let (from, len) = match got {
            Ok(g) => g,
            Err(e) => {
                println!("netping: echo: receive failed: {e:?}");
                return 1;
            }
        };
        if let Err(e) = session.send(from, &buf[..len]) {
            println!("netping: echo: send failed: {e:?}");
            return 1;
        }
        bytes += len as u64;
    }
    println!("netping: echo: answered {n} datagrams ({bytes} bytes)");
    0
}

/// Byte `i` of ping `seq`'s payload after its 8-byte header.
fn pattern(seq: u32, i: usize) -> u8 {
    (seq.wrapping_mul(0x9e37_79b9) >> 24) as u8 ^ (i as u8).wrapping_mul(31)
}

/// Writes ping `seq` of `len` bytes into `buf`.
fn fill(buf: &mut [u8], seq: u32) {
    buf[..4].copy_from_slice(&seq.to_be_bytes());
    let len = buf.len() as u32;
    buf[4..8].copy_from_slice(&len.to_be_bytes());
    for (i, b) in buf[8..].iter_mut().enumerate() {
        *b = pattern(seq, i);
    }
}

/// The sequence number of an answer, if it is an intact ping of one of `sizes` (even
/// sequence numbers the first, odd ones the second).
fn check(payload: &[u8], sizes: [usize; 2]) -> Option<u32> {
    if payload.len() < 8 {
        return None;
    }
    let seq = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
    let len = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
    let intact = len as usize == payload.len()
        && payload.len() == sizes[seq as usize % 2]
        && payload[8..].iter().enumerate().all(|(i, &b)| b == pattern(seq, i));
    intact.then_some(seq)
}

/// Plays `rounds` rounds of pings of `sizes` against the echoing peer `to`.
fn ping(
    session: &mut Session<ChannelTransport>,
    to: Endpoint,
    rounds: u32,
    sizes: [usize; 2],
) -> i32 {
    tessera::thread::sleep(START_NS);
    let mut buf = [0u8; MAX_UDP_PAYLOAD];
    let pings = rounds * 2;
    let (mut answered, mut lost, mut duplicates, mut bad, mut bytes) =
        (0u32, 0u32, 0u32, 0u32, 0u64);
    let start = tessera::time_ns();
    let mut seq = 0;
    while seq < pings {
        let len = sizes[seq as usize % 2];
        fill(&mut buf[..len], seq);
        if let Err(e) = session.send(to, &buf[..len]) {
            println!("netping: send of ping {seq} failed: {e:?}");
            return 1;
        }
        loop {
            let got = match session.receive(|d| (d.from == to).then(|| check(d.payload, sizes))) {
                Ok(g) => g,
                Err(e) => {
                    println!("netping: receive failed: {e:?}");
                    return 1;
                }
            };
            match got {
                Some(Some(s)) if s == seq => {
                    answered += 1;
                    bytes += len as u64;
                    break;
                }
                Some(Some(s)) if s < seq => duplicates += 1,
                Some(Some(s)) if s < pings => {
                    // The pings between were lost; this one is answered.
                    lost += s - seq;
                    answered += 1;
                    seq = s;
                    break;
                }
                _ => bad += 1,
            }
        }
        seq += 1;
    }
    let us = (tessera::time_ns() - start) / 1_000;
    println!(
        "netping: {rounds} rounds to {}.{}.{}.{}:{}: {pings} pings of {} and {} bytes, {answered} answered ({bytes} bytes), {lost} lost, {duplicates} duplicates, {bad} bad, {us} us",
        to.addr.0[0], to.addr.0[1], to.addr.0[2], to.addr.0[3], to.port, sizes[0], sizes[1]
    );
    if answered == pings && lost == 0 && duplicates == 0 && bad == 0 { 0 } else { 1 }
}
