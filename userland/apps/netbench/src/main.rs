//! `netbench`: streams of UDP datagrams over the network driver domain, through `net_client`,
//! every payload checked at the far end.
//!
//! `netbench --net NAME --port P --to A.B.C.D:Q --size BYTES --rate DATAGRAMS_PER_S|max
//! --count N` opens UDP port P on the driver reached by the channels `NAME-req`/`NAME-resp`,
//! waits [`START_NS`] (for the sink to open its port), then sends N datagrams of BYTES bytes
//! (8 to 1,472) to A.B.C.D:Q: at the given rate, datagram `k` no earlier than `k / RATE`
//! seconds after the first, or with `max` as fast as the driver takes them (a send the driver
//! refuses because the stream's queue is full is retried after [`BUSY_WAIT_NS`]). A datagram's
//! payload is its sequence number and its length (big-endian `u32`s) and bytes drawn from the
//! sequence number. Then it sends the end marker ([`MARKERS`] datagram of sequence number
//! `u32::MAX` carrying the count sent; a sink that has all N stops before it), waits until the driver has sent everything (its
//! stream's accounts), prints a summary line (datagrams, bytes, the virtual time from the
//! first send to the last one leaving, the refused sends, and the accounts: link time
//! guaranteed and extra, periods, missed deadlines) and closes.
//!
//! `netbench --net NAME --port P --sink N` receives until it has N distinct datagrams or an
//! end marker, and checks every payload: a datagram whose length, header or bytes are not its
//! sequence number's is damaged; one seen before is a duplicate; one earlier than the highest
//! seen so far (and not seen before) is reordered; the sequence numbers below N (or the
//! marker's count) never seen are lost. It prints a summary line (datagrams, bytes, the
//! virtual time from the first to the last, and the four counts), and fails unless all N
//! arrived, none lost, duplicated, reordered or damaged.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;

use net_client::{ChannelTransport, Session};
use net_interface::frame::MAX_UDP_PAYLOAD;
use net_interface::{Endpoint, Ipv4Addr, NetError};
use tessera::{Env, println};

tessera::main!(main);

/// How long the sender waits before its first datagram.
const START_NS: u64 = 50_000_000;
/// How long the sender waits before it retries a send the driver refused as busy.
const BUSY_WAIT_NS: u64 = 200_000;
/// How many end markers the sender sends.
const MARKERS: u32 = 1;
/// The end marker's sequence number.
const END: u32 = u32::MAX;
/// The header of every payload: sequence number and length.
const HEADER: usize = 8;

const USAGE: &str = "usage: netbench --net NAME --port P (--to A.B.C.D:Q --size BYTES \
                     --rate DATAGRAMS_PER_S|max --count N | --sink N)";

/// A sender's stream.
struct Stream {
    to: Endpoint,
    size: usize,
    /// Datagrams per second; `None`: as fast as the driver takes them.
    rate: Option<u64>,
    count: u32,
}

fn main(env: Env) -> i32 {
    let (mut net, mut port, mut to, mut size, mut rate, mut count, mut sink) =
        (None, None, None, None, None, None, None);
    let mut args = env.args;
    while let Some(a) = args.next() {
        let v = args.next();
        match a {
            "--net" => net = v,
            "--port" => port = v.and_then(|p| p.parse::<u16>().ok()),
            "--to" => to = v.and_then(Endpoint::parse),
            "--size" => size = v.and_then(|n| n.parse::<usize>().ok()),
            "--rate" => {
                rate = v.and_then(|r| match r {
                    "max" => Some(None),
                    r => r.parse::<u64>().ok().filter(|&r| r > 0).map(Some),
                })
            }
            "--count" => count = v.and_then(|n| n.parse::<u32>().ok()),
            "--sink" => sink = v.and_then(|n| n.parse::<u32>().ok()),
            _ => return usage("unknown option"),
        }
    }
    let (Some(net), Some(port)) = (net, port) else {
        return usage("--net and --port are needed");
    };
    let stream = match (to, size, rate, count, sink) {
        (None, None, None, None, Some(_)) => None,
        (Some(to), Some(size), Some(rate), Some(count), None) => {
            if !(HEADER..=MAX_UDP_PAYLOAD).contains(&size) {
                return usage("--size is 8 to 1472 bytes");
            }
            if count == END {
                return usage("--count is below 4294967295");
            }
            Some(Stream { to, size, rate, count })
        }
        _ => return usage("either --sink N or all of --to, --size, --rate and --count"),
    };
    let Some(transport) = ChannelTransport::connect(net) else {
        println!("netbench: no channels {net}-req and {net}-resp");
        return 1;
    };
    let mut session = Session::new(transport);
    if let Err(e) = session.open(port) {
        println!("netbench: open of port {port} failed: {e:?}");
        return 1;
    }
    let status = match (stream, sink) {
        (Some(s), _) => send(&mut session, &s),
        (None, Some(n)) => receive(&mut session, n),
        (None, None) => 2,
    };
    if let Err(e) = session.close() {
        println!("netbench: close failed: {e:?}");
        return 1;
    }
    status
}

fn usage(why: &str) -> i32 {
    println!("netbench: {why}; {USAGE}");
    2
}

/// Byte `i` of datagram `seq`'s payload after its header.
fn pattern(seq: u32, i: usize) -> u8 {
    (seq.wrapping_mul(0x9e37_79b9) >> 24) as u8 ^ (i as u8).wrapping_mul(31)
}

/// Writes datagram `seq` (its length `buf.len()`) into `buf`; `word` is the header's second
/// word (the length, or an end marker's count).
fn fill(buf: &mut [u8], seq: u32, word: u32) {
    buf[..4].copy_from_slice(&seq.to_be_bytes());
    buf[4..8].copy_from_slice(&word.to_be_bytes());
    for (i, b) in buf[HEADER..].iter_mut().enumerate() {
        *b = pattern(seq, i);
    }
}

/// What a received payload is.
enum Got {
    /// Datagram `seq`, intact.
    Data(u32),
    /// An end marker: the count sent.
    End(u32),
    /// Not what any datagram of the stream is.
    Damaged,
}

fn check(payload: &[u8]) -> Got {
    if payload.len() < HEADER {
        return Got::Damaged;
    }
    let seq = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
    let word = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
    if payload[HEADER..].iter().enumerate().any(|(i, &b)| b != pattern(seq, i)) {
        return Got::Damaged;
    }
    match seq {
        END if payload.len() == HEADER => Got::End(word),
        END => Got::Damaged,
        seq if word as usize == payload.len() => Got::Data(seq),
        _ => Got::Damaged,
    }
}

/// Sends `payload` to `to`, retrying while the driver's queue is full; the refusals.
fn send_one(
    session: &mut Session<ChannelTransport>,
    to: Endpoint,
    payload: &[u8],
) -> Result<u64, NetError> {
    let mut busy = 0;
    loop {
        match session.send(to, payload) {
            Ok(()) => return Ok(busy),
            Err(NetError::Busy) => {
                busy += 1;
                tessera::thread::sleep(BUSY_WAIT_NS);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Sends the stream `s`, then its end markers, and waits until all have left.
fn send(session: &mut Session<ChannelTransport>, s: &Stream) -> i32 {
    tessera::thread::sleep(START_NS);
    let mut buf = [0u8; MAX_UDP_PAYLOAD];
    let mut busy = 0;
    let start = tessera::time_ns();
    for seq in 0..s.count {
        if let Some(rate) = s.rate {
            let due = start + u64::from(seq) * 1_000_000_000 / rate;
            let now = tessera::time_ns();
            if due > now {
                tessera::thread::sleep(due - now);
            }
        }
        fill(&mut buf[..s.size], seq, s.size as u32);
        match send_one(session, s.to, &buf[..s.size]) {
            Ok(b) => busy += b,
            Err(e) => {
                println!("netbench: send of datagram {seq} failed: {e:?}");
                return 1;
            }
        }
    }
    for _ in 0..MARKERS {
        fill(&mut buf[..HEADER], END, s.count);
        if let Err(e) = send_one(session, s.to, &buf[..HEADER]) {
            println!("netbench: send of the end marker failed: {e:?}");
            return 1;
        }
    }
    // Closing drops what the driver has not sent yet: wait until everything has left.
    let all = u64::from(s.count + MARKERS);
    let accounts = loop {
        match session.accounts() {
            Some(a) if a.packets_sent + a.dropped_tx_error >= all => break a,
            _ => tessera::thread::sleep(BUSY_WAIT_NS),
        }
    };
    let us = (tessera::time_ns() - start) / 1_000;
    let to = s.to;
    println!(
        "netbench: sent {} datagrams of {} bytes ({} bytes) to {}.{}.{}.{}:{} in {us} us, {busy} refused as busy; link time {} us guaranteed + {} us extra over {} periods, {} deadlines missed, {} send errors",
        s.count,
        s.size,
        u64::from(s.count) * s.size as u64,
        to.addr.0[0],
        to.addr.0[1],
        to.addr.0[2],
        to.addr.0[3],
        to.port,
        accounts.guaranteed_ns / 1_000,
        accounts.extra_ns / 1_000,
        accounts.periods,
        accounts.deadlines_missed,
        accounts.dropped_tx_error,
    );
    if accounts.dropped_tx_error == 0 { 0 } else { 1 }
}

/// Receives `n` datagrams (or until an end marker), checking every one.
fn receive(session: &mut Session<ChannelTransport>, n: u32) -> i32 {
    let mut seen = vec![false; n as usize];
    let (mut received, mut distinct, mut bytes) = (0u64, 0u32, 0u64);
    let (mut duplicates, mut reordered, mut damaged) = (0u64, 0u64, 0u64);
    let mut highest: Option<u32> = None;
    let mut expected = n;
    let mut from = None;
    let (mut first, mut last) = (0, 0);
    while distinct < n {
        let got = session.receive(|d| (d.from, d.payload.len(), check(d.payload)));
        let (sender, len, got) = match got {
            Ok(g) => g,
            Err(e) => {
                println!("netbench: sink: receive failed: {e:?}");
                return 1;
            }
        };
        let now = tessera::time_ns();
        if received == 0 {
            first = now;
        }
        last = now;
        from.get_or_insert(sender);
        match got {
            Got::End(count) => {
                expected = count;
                break;
            }
            Got::Damaged => damaged += 1,
            Got::Data(seq) => match seen.get_mut(seq as usize) {
                None => damaged += 1,
                Some(true) => duplicates += 1,
                Some(s) => {
                    *s = true;
                    distinct += 1;
                    if highest.is_some_and(|h| seq < h) {
                        reordered += 1;
                    }
                    highest = Some(highest.map_or(seq, |h| h.max(seq)));
                }
            },
        }
        received += 1;
        bytes += len as u64;
    }
    let lost = u64::from(expected.max(n) - distinct);
    let us = (last - first) / 1_000;
    let from = from.unwrap_or(Endpoint { addr: Ipv4Addr([0; 4]), port: 0 });
    println!(
        "netbench: sink: received {received} datagrams ({bytes} bytes) from {}.{}.{}.{}:{} in {us} us: {lost} lost, {duplicates} duplicates, {reordered} reordered, {damaged} damaged",
        from.addr.0[0], from.addr.0[1], from.addr.0[2], from.addr.0[3], from.port
    );
    let clean = lost == 0 && duplicates == 0 && reordered == 0 && damaged == 0;
    if clean && distinct == n { 0 } else { 1 }
}
