//! `netping`: UDP ping-pong over the network driver domain, through `net_client`, counting
//! what is lost, late, duplicated and damaged.
//!
//! Both roles open UDP port P on the driver reached by the channels `NAME-req`/`NAME-resp`
//! (`--net NAME --port P`) and print a summary line, which tests read.
//!
//! **Echo** (`--echo N`, `--idle MS`, or both): sends every datagram it receives back to its
//! sender, until it has received N pings (probes, below, do not count), or until nothing came
//! for MS ms of the domain's clock (counted from the open, then from each datagram). It counts
//! what it received and answered, in all and per sender (up to [`MAX_PEERS`] senders; more are
//! counted in the totals only); a datagram it cannot send back (the driver refuses the Send,
//! e.g. its transmit queue is full) is counted unanswered.
//!
//! **Ping** (`--to A.B.C.D:Q --rounds N`): waits [`START_NS`], then sends probes (8 bytes, a
//! sequence number no ping has) every timeout until the peer answers one, for at most `--wait
//! MS` (default [`WAIT_MS`]): the peer's node may still be booting, and the first datagram to
//! a host waits for its address to be resolved. Probes are not counted. Then it plays N rounds,
//! each a ping of 64 bytes and one of 1,472 (the largest UDP payload of one frame), or with
//! `--size BYTES` (8 to 1,472) two of that size. A ping's payload is its sequence number, its
//! length and bytes drawn from the sequence number; every answer is checked byte for byte.
//! Each ping waits for its answer until `--timeout MS` (default [`TIMEOUT_MS`]) of the
//! domain's clock has passed since it was sent, then counts as **lost** and the next ping goes
//! out. So `answered + lost == pings` always. An answer to an earlier ping is **late** if that
//! ping was counted lost and nothing had been heard from it (it stays lost: lost means not
//! answered within the timeout; `lost - late` were not answered at all), a **duplicate** if
//! that ping was heard already; an answer that is not an intact ping sent so far, or that
//! comes from another sender, is **bad**. After the last ping, if some lost ones were not
//! heard, it listens one more timeout for late answers. After `--give-up K` lost pings in a row
//! (default [`GIVE_UP`]; 0: never) the peer is **unreachable**: the pinger stops and counts the
//! pings it did not send as lost, and says so on a line of its own
//! (`netping: peer A:Q unreachable after ping S (the last K unanswered): L lost, U of them not
//! sent`), as it does when no probe was answered. `--interval MS` sends a ping at most every
//! MS ms (by default each as soon as the one before is answered or lost). `--mark S` prints
//! `netping: ping S of N to A:Q` as ping S goes out, a line a cluster scenario can act on.
//!
//! The pinger exits 0 when no answer was bad and at most `--max-loss PERCENT` of the pings were
//! lost and `--max-dup PERCENT` answered twice (both 0 by default), 1 otherwise; the echo
//! exits 0 unless its session failed. Bad arguments exit 2.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;

use net_client::{ChannelTransport, NetError, Session};
use net_interface::Endpoint;
use net_interface::frame::MAX_UDP_PAYLOAD;
use tessera::{Env, println};

tessera::main!(main);

/// How long the pinger waits before its first probe.
const START_NS: u64 = 50_000_000;
/// The two sizes of ping, in bytes of UDP payload.
const SIZES: [usize; 2] = [64, MAX_UDP_PAYLOAD];
/// How long a ping waits for its answer by default, in ms.
const TIMEOUT_MS: u64 = 200;
/// How long the pinger probes for its peer by default, in ms.
const WAIT_MS: u64 = 10_000;
/// Lost pings in a row after which the peer is unreachable, by default.
const GIVE_UP: u32 = 10;
/// The most pings of one run.
const MAX_PINGS: u32 = 200_000;
/// The sequence number of a probe, which no ping has.
const PROBE: u32 = u32::MAX;
/// The length of a probe.
const PROBE_LEN: usize = 8;
/// Senders the echo counts one by one.
const MAX_PEERS: usize = 8;

const USAGE: &str = "usage: netping --net NAME --port P (--echo N [--idle MS] | --idle MS | \
     --to A.B.C.D:Q --rounds N [--size BYTES] [--timeout MS] [--wait MS] [--give-up K] \
     [--max-loss PERCENT] [--max-dup PERCENT] [--interval MS] [--mark SEQ])";

/// What the pinger is asked to do.
struct PingArgs {
    to: Endpoint,
    rounds: u32,
    sizes: [usize; 2],
    timeout_ns: u64,
    wait_ns: u64,
    give_up: u32,
    max_loss: u64,
    max_dup: u64,
    mark: Option<u32>,
    interval_ns: u64,
}

/// What the domain is asked to do.
enum Role {
    /// Answer until this many pings came (`None`: no limit) or nothing came for this many ns.
    Echo(Option<u32>, Option<u64>),
    /// Ping a peer.
    Ping(PingArgs),
}

fn main(env: Env) -> i32 {
    match parse(env) {
        Ok((net, port, role)) => run(net, port, role),
        Err(why) => {
            println!("netping: {why}; {USAGE}");
            2
        }
    }
}

/// The arguments: the channels' name, the port and the role.
fn parse(env: Env) -> Result<(&'static str, u16, Role), &'static str> {
    let (mut net, mut port, mut echo, mut idle, mut to, mut rounds) =
        (None, None, None, None, None, None);
    let (mut size, mut timeout, mut wait, mut give_up) = (None, None, None, None);
    let (mut max_loss, mut max_dup, mut mark, mut interval) = (None, None, None, None);
    let mut args = env.args;
    while let Some(a) = args.next() {
        let v = args.next().ok_or("an option without its value")?;
        let num = |what| v.parse::<u64>().map_err(|_| what);
        match a {
            "--net" => net = Some(v),
            "--port" => port = Some(v.parse::<u16>().map_err(|_| "--port takes 0 to 65535")?),
            "--echo" => echo = Some(v.parse::<u32>().map_err(|_| "--echo takes a count")?),
            "--idle" => idle = Some(num("--idle takes milliseconds")?),
            "--to" => to = Some(Endpoint::parse(v).ok_or("--to takes A.B.C.D:PORT")?),
            "--rounds" => match v.parse::<u32>() {
                Ok(n) if (1..=MAX_PINGS / 2).contains(&n) => rounds = Some(n),
                _ => return Err("--rounds takes 1 to 100000"),
            },
            "--size" => match v.parse::<usize>() {
                Ok(s) if (8..=MAX_UDP_PAYLOAD).contains(&s) => size = Some(s),
                _ => return Err("--size takes 8 to 1472 bytes"),
            },
            "--timeout" => match num("--timeout takes milliseconds")? {
                ms @ 1..=60_000 => timeout = Some(ms),
                _ => return Err("--timeout takes 1 to 60000 ms"),
            },
            "--wait" => wait = Some(num("--wait takes milliseconds")?),
            "--give-up" => give_up = Some(v.parse::<u32>().map_err(|_| "--give-up takes a count")?),
            "--max-loss" => match num("--max-loss takes a percentage")? {
                p @ 0..=100 => max_loss = Some(p),
                _ => return Err("--max-loss takes 0 to 100"),
            },
            "--max-dup" => match num("--max-dup takes a percentage")? {
                p @ 0..=100 => max_dup = Some(p),
                _ => return Err("--max-dup takes 0 to 100"),
            },
            "--mark" => mark = Some(v.parse::<u32>().map_err(|_| "--mark takes a ping's number")?),
            "--interval" => interval = Some(num("--interval takes milliseconds")?),
            _ => return Err("unknown option"),
        }
    }
    let (Some(net), Some(port)) = (net, port) else {
        return Err("--net and --port are needed");
    };
    let ping_only = size.is_some()
        || timeout.is_some()
        || wait.is_some()
        || give_up.is_some()
        || max_loss.is_some()
        || max_dup.is_some()
        || mark.is_some()
        || interval.is_some();
    let role = match (echo, idle, to, rounds) {
        (Some(_), _, None, None) | (None, Some(_), None, None) if !ping_only => {
            Role::Echo(echo, idle.map(|ms| ms.saturating_mul(1_000_000)))
        }
        (None, None, Some(to), Some(rounds)) => Role::Ping(PingArgs {
            to,
            rounds,
            sizes: size.map_or(SIZES, |s| [s, s]),
            timeout_ns: timeout.unwrap_or(TIMEOUT_MS) * 1_000_000,
            wait_ns: wait.unwrap_or(WAIT_MS).saturating_mul(1_000_000),
            give_up: give_up.unwrap_or(GIVE_UP),
            max_loss: max_loss.unwrap_or(0),
            max_dup: max_dup.unwrap_or(0),
            mark,
            interval_ns: interval.unwrap_or(0).saturating_mul(1_000_000),
        }),
        _ => return Err("either --echo N and/or --idle MS, or both --to and --rounds"),
    };
    Ok((net, port, role))
}

fn run(net: &str, port: u16, role: Role) -> i32 {
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
        Role::Echo(count, idle_ns) => echo_loop(&mut session, count, idle_ns),
        Role::Ping(args) => ping(&mut session, &args),
    };
    if let Err(e) = session.close() {
        println!("netping: close failed: {e:?}");
        return 1;
    }
    status
}

/// What the echo counts, in all or of one sender.
#[derive(Clone, Copy, Default)]
struct Counts {
    /// Pings (datagrams other than probes) received.
    received: u64,
    /// Their bytes.
    bytes: u64,
    /// Pings sent back.
    answered: u64,
    /// Probes received (and sent back if they could be).
    probes: u64,
    /// Datagrams the driver would not send back.
    unanswered: u64,
}

impl Counts {
    fn add(&mut self, len: usize, probe: bool, sent: bool) {
        match probe {
            true => self.probes += 1,
            false => {
                self.received += 1;
                self.bytes += len as u64;
                self.answered += u64::from(sent);
            }
        }
        self.unanswered += u64::from(!sent);
    }
}

/// Answers until `count` pings came or nothing came for `idle_ns`.
fn echo_loop(
    session: &mut Session<ChannelTransport>,
    count: Option<u32>,
    idle_ns: Option<u64>,
) -> i32 {
    let mut buf = [0u8; MAX_UDP_PAYLOAD];
    let mut all = Counts::default();
    let mut peers: [(Endpoint, Counts); MAX_PEERS] =
        [(Endpoint::default(), Counts::default()); MAX_PEERS];
    let mut known = 0;
    let mut last = tessera::time_ns();
    let why = loop {
        if let Some(n) = count
            && all.received >= u64::from(n)
        {
            break "enough pings";
        }
        let deadline = idle_ns.map_or(u64::MAX, |idle| last.saturating_add(idle));
        let got = session.receive_until(deadline, |d| {
            let len = d.payload.len().min(buf.len());
            buf[..len].copy_from_slice(&d.payload[..len]);
            (d.from, len)
        });
        let (from, len) = match got {
            Ok(Some(g)) => g,
            Ok(None) => break "idle",
            Err(e) => {
                println!("netping: echo: receive failed: {e:?}");
                return 1;
            }
        };
        last = tessera::time_ns();
        let sent = match session.send(from, &buf[..len]) {
            Ok(()) => true,
            Err(NetError::Closed) => {
                println!("netping: echo: send failed: the driver is gone");
                return 1;
            }
            Err(_) => false,
        };
        let probe = is_probe(&buf[..len]);
        all.add(len, probe, sent);
        let peer = match peers[..known].iter().position(|(e, _)| *e == from) {
            Some(i) => Some(i),
            None if known < MAX_PEERS => {
                peers[known].0 = from;
                known += 1;
                Some(known - 1)
            }
            None => None,
        };
        if let Some(i) = peer {
            peers[i].1.add(len, probe, sent);
        }
    };
    println!(
        "netping: echo: answered {} datagrams ({} bytes) of {} received, {} probes, {} unanswered, from {known} senders; ended: {why}",
        all.answered, all.bytes, all.received, all.probes, all.unanswered
    );
    for (from, c) in &peers[..known] {
        println!(
            "netping: echo: from {from}: {} received ({} bytes), {} answered, {} probes, {} unanswered",
            c.received, c.bytes, c.answered, c.probes, c.unanswered
        );
    }
    0
}

/// Byte `i` of ping `seq`'s payload after its 8-byte header.
fn pattern(seq: u32, i: usize) -> u8 {
    (seq.wrapping_mul(0x9e37_79b9) >> 24) as u8 ^ (i as u8).wrapping_mul(31)
}

/// Writes ping `seq` of `len` bytes into `buf` (a probe: [`PROBE`], 8 bytes).
fn fill(buf: &mut [u8], seq: u32) {
    buf[..4].copy_from_slice(&seq.to_be_bytes());
    let len = buf.len() as u32;
    buf[4..8].copy_from_slice(&len.to_be_bytes());
    for (i, b) in buf[8..].iter_mut().enumerate() {
        *b = pattern(seq, i);
    }
}

/// Whether `payload` is a probe.
fn is_probe(payload: &[u8]) -> bool {
    let mut probe = [0u8; PROBE_LEN];
    fill(&mut probe, PROBE);
    payload == probe
}

/// An answer as the pinger reads it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// An intact ping with this sequence number.
    Ping(u32),
    /// A probe.
    Probe,
    /// Anything else: damaged, or from another sender.
    Bad,
}

/// What `payload` is, if it is an intact ping of one of `sizes` (even sequence numbers the
/// first, odd ones the second) or a probe.
fn check(payload: &[u8], sizes: [usize; 2]) -> Answer {
    if is_probe(payload) {
        return Answer::Probe;
    }
    if payload.len() < 8 {
        return Answer::Bad;
    }
    let seq = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
    let len = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
    let intact = len as usize == payload.len()
        && payload.len() == sizes[seq as usize % 2]
        && payload[8..].iter().enumerate().all(|(i, &b)| b == pattern(seq, i));
    if intact { Answer::Ping(seq) } else { Answer::Bad }
}

/// The pinger's counts.
#[derive(Default)]
struct Tally {
    answered: u32,
    bytes: u64,
    lost: u32,
    late: u32,
    duplicates: u32,
    bad: u32,
    unsent: u32,
    /// Pings some answer was heard from, one bit each.
    heard: Vec<u64>,
}

impl Tally {
    fn heard(&self, seq: u32) -> bool {
        self.heard[seq as usize / 64] & (1 << (seq % 64)) != 0
    }

    fn hear(&mut self, seq: u32) {
        self.heard[seq as usize / 64] |= 1 << (seq % 64);
    }

    /// Counts an answer to an earlier ping than `seq` (the one awaited, or all of them sent
    /// when `seq` is the number of pings): late or a duplicate; or a bad one.
    fn earlier(&mut self, answer: Answer, seq: u32) {
        match answer {
            Answer::Probe => {}
            Answer::Ping(s) if s < seq && self.heard(s) => self.duplicates += 1,
            Answer::Ping(s) if s < seq => {
                self.late += 1;
                self.hear(s);
            }
            _ => self.bad += 1,
        }
    }
}

/// Receives until `deadline_ns`: `Ok(None)` when it passed, else what came (`Answer::Bad` if
/// from another sender than `to`).
fn next_answer(
    session: &mut Session<ChannelTransport>,
    to: Endpoint,
    sizes: [usize; 2],
    deadline_ns: u64,
) -> Result<Option<Answer>, NetError> {
    session.receive_until(deadline_ns, |d| match d.from == to {
        true => check(d.payload, sizes),
        false => Answer::Bad,
    })
}

/// Probes `to` until it answers or `wait_ns` passes: how many probes went out, and whether one
/// was answered; `Err` if the session failed.
fn probe(
    session: &mut Session<ChannelTransport>,
    a: &PingArgs,
    tally: &mut Tally,
) -> Result<(u32, bool), NetError> {
    let mut buf = [0u8; PROBE_LEN];
    fill(&mut buf, PROBE);
    let end = tessera::time_ns().saturating_add(a.wait_ns);
    let mut probes = 0;
    loop {
        let now = tessera::time_ns();
        if now >= end {
            return Ok((probes, false));
        }
        match session.send(a.to, &buf) {
            Ok(()) => probes += 1,
            Err(NetError::Closed) => return Err(NetError::Closed),
            // The driver refused it (its queue full, the link down): try again later.
            Err(_) => {}
        }
        let deadline = now.saturating_add(a.timeout_ns).min(end);
        while let Some(answer) = next_answer(session, a.to, a.sizes, deadline)? {
            match answer {
                Answer::Probe => return Ok((probes, true)),
                _ => tally.bad += 1,
            }
        }
    }
}

/// Pings `a.to`: see the [crate] documentation.
fn ping(session: &mut Session<ChannelTransport>, a: &PingArgs) -> i32 {
    tessera::thread::sleep(START_NS);
    let pings = a.rounds * 2;
    let mut t = Tally { heard: vec![0; pings.div_ceil(64) as usize], ..Tally::default() };
    let fail = |e: NetError| {
        println!("netping: the session failed: {e:?}");
        1
    };
    let (probes, reached) = match probe(session, a, &mut t) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let mut buf = [0u8; MAX_UDP_PAYLOAD];
    let start = tessera::time_ns();
    let mut in_a_row = 0;
    let mut seq = 0;
    let mut gave_up = !reached;
    while seq < pings && reached {
        if a.mark == Some(seq) {
            println!("netping: ping {seq} of {pings} to {}", a.to);
        }
        let len = a.sizes[seq as usize % 2];
        fill(&mut buf[..len], seq);
        let sent_at = tessera::time_ns();
        match session.send(a.to, &buf[..len]) {
            Ok(()) => {
                let deadline = tessera::time_ns().saturating_add(a.timeout_ns);
                let got = loop {
                    match next_answer(session, a.to, a.sizes, deadline) {
                        Ok(Some(Answer::Ping(s))) if s == seq => break true,
                        Ok(Some(answer)) => t.earlier(answer, seq),
                        Ok(None) => break false,
                        Err(e) => return fail(e),
                    }
                };
                if got {
                    t.answered += 1;
                    t.bytes += len as u64;
                    t.hear(seq);
                    in_a_row = 0;
                } else {
                    t.lost += 1;
                    in_a_row += 1;
                }
            }
            Err(NetError::Closed) => return fail(NetError::Closed),
            // The driver refused it: lost without being sent.
            Err(_) => {
                t.lost += 1;
                t.unsent += 1;
                in_a_row += 1;
            }
        }
        seq += 1;
        if a.give_up > 0 && in_a_row >= a.give_up && seq < pings {
            gave_up = true;
            break;
        }
        let next = sent_at.saturating_add(a.interval_ns);
        let now = tessera::time_ns();
        if seq < pings && next > now {
            tessera::thread::sleep(next - now);
        }
    }
    if gave_up {
        let rest = pings - seq;
        t.lost += rest;
        t.unsent += rest;
    } else if t.lost > t.late {
        // Some lost pings were not heard at all: their answers may still come.
        let deadline = tessera::time_ns().saturating_add(a.timeout_ns);
        loop {
            match next_answer(session, a.to, a.sizes, deadline) {
                Ok(Some(answer)) => t.earlier(answer, pings),
                Ok(None) => break,
                Err(e) => return fail(e),
            }
        }
    }
    let us = (tessera::time_ns() - start) / 1_000;
    println!(
        "netping: {} rounds to {}: {pings} pings of {} and {} bytes, {} answered ({} bytes), {} lost, {} duplicates, {} bad, {us} us, {} late, {} not sent, timeout {} ms",
        a.rounds,
        a.to,
        a.sizes[0],
        a.sizes[1],
        t.answered,
        t.bytes,
        t.lost,
        t.duplicates,
        t.bad,
        t.late,
        t.unsent,
        a.timeout_ns / 1_000_000
    );
    match (gave_up, reached) {
        (true, false) => println!(
            "netping: peer {} unreachable: none of {probes} probes answered in {} ms: {} lost, {} of them not sent",
            a.to,
            a.wait_ns / 1_000_000,
            t.lost,
            t.unsent
        ),
        (true, true) => println!(
            "netping: peer {} unreachable after ping {} (the last {} unanswered): {} lost, {} of them not sent",
            a.to,
            seq - 1,
            a.give_up,
            t.lost,
            t.unsent
        ),
        _ => {}
    }
    let within = |n: u32, percent: u64| u64::from(n) * 100 <= percent * u64::from(pings);
    if t.bad == 0 && within(t.lost, a.max_loss) && within(t.duplicates, a.max_dup) { 0 } else { 1 }
}
