//! Host tests: two stacks joined by an in-memory wire.

extern crate std;

use alloc::boxed::Box;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{Rng as _, SeedableRng};

use net_interface::frame::MAX_UDP_PAYLOAD;
use net_interface::mem::{self, Direction, MemNic, Wire};
use net_interface::protocol::RX_SLOT;
use net_interface::{Endpoint, Ipv4Addr, LoanSend, MacAddr, NetContract, NetError};
use smoltcp::wire::{EthernetFrame, Ipv4Packet};

use crate::{ClientId, Config, Drops, Instant, LinkModel, NetStack};

const MS: u64 = 1_000_000;
const A: Ipv4Addr = Ipv4Addr([10, 0, 0, 1]);
const B: Ipv4Addr = Ipv4Addr([10, 0, 0, 2]);
const MAC_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const MAC_B: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

/// SplitMix64 (`rand_xoshiro`'s), seeded: the state starts at the seed (fixed seeds: the tests
/// are deterministic).
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(SplitMix64::seed_from_u64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn config(addr: Ipv4Addr) -> Config {
    Config { addr, prefix_len: 24, link: LinkModel::FAST_ETHERNET, tx_queue: 16, rx_budget: 64 }
}

/// A contract for `slice_ms` of every 10 ms.
fn contract(slice_ms: u64, extra: bool) -> NetContract {
    NetContract { period_ns: 10 * MS, slice_ns: slice_ms * MS, extra, latency_ns: 0 }
}

/// A receive area of `slots` slots.
fn area(slots: usize) -> Vec<u8> {
    vec![0; slots * RX_SLOT]
}

/// The payload of datagram `seq` of stream `stream`, `len` bytes (the sequence number first).
fn payload(stream: u8, seq: u32, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> =
        (0..len).map(|i| (seq as usize * 31 + i * 7 + usize::from(stream)) as u8).collect();
    let n = len.min(4);
    p[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
    p
}

/// Two stacks joined by a wire, and the modelled clock.
struct Net {
    a: NetStack<MemNic>,
    b: NetStack<MemNic>,
    wire: Wire,
    now: u64,
}

impl Net {
    fn new() -> Net {
        let (na, nb, wire) = mem::pair(MAC_A, MAC_B, 8, 256);
        let a = NetStack::new(na, config(A), Instant(0));
        let b = NetStack::new(nb, config(B), Instant(0));
        Net { a, b, wire, now: 0 }
    }

    /// Polls both stacks at the current instant until no frame is on the wire.
    fn settle(&mut self) {
        for _ in 0..1000 {
            self.a.poll(Instant(self.now));
            self.b.poll(Instant(self.now));
            if self.wire.pending(Direction::AtoB) == 0 && self.wire.pending(Direction::BtoA) == 0 {
                return;
            }
        }
        panic!("the wire never went quiet");
    }

    /// Settles, then moves the clock to the earliest instant either stack asked for, `until`
    /// at the latest.
    fn step(&mut self, until: u64) {
        self.settle();
        let now = Instant(self.now);
        let next = [self.a.poll_at(now), self.b.poll_at(now)]
            .into_iter()
            .flatten()
            .map(|t| t.0.max(self.now + 1))
            .min()
            .unwrap_or(until);
        self.now = next.min(until).max(self.now);
    }

    fn run_until(&mut self, until: u64) {
        while self.now < until {
            self.step(until);
        }
        self.settle();
    }
}

/// Every datagram received by client `c` of `s`, payloads copied out, slots released.
fn drain(s: &mut NetStack<MemNic>, c: ClientId) -> Vec<(Endpoint, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(r) = s.next_received(c) {
        out.push((r.from, s.payload(c, &r).unwrap().to_vec()));
        s.release(c, r.offset).unwrap();
    }
    out
}

/// Records every frame's ethertype and direction on `wire`.
fn log_ethertypes(wire: &Wire) -> Rc<Cell<[u32; 4]>> {
    let log = Rc::new(Cell::new([0u32; 4]));
    let l = log.clone();
    wire.set_filter(Some(Box::new(move |dir, f| {
        let arp = EthernetFrame::new_checked(f).map(|e| u16::from(e.ethertype())) == Ok(0x0806);
        let mut v = l.get();
        v[(dir == Direction::BtoA) as usize * 2 + arp as usize] += 1;
        l.set(v);
        true
    })));
    log
}

#[test]
fn udp_datagrams_cross_the_wire_with_every_payload_checked() {
    for len in [64, MAX_UDP_PAYLOAD] {
        let mut net = Net::new();
        let (ca, pa) = net.a.open(0, contract(5, true), area(8), Instant(0)).unwrap();
        let (cb, pb) = net.b.open(7000, contract(5, true), area(8), Instant(0)).unwrap();
        assert!(pa >= crate::EPHEMERAL_PORTS);
        assert_eq!(pb, 7000);
        let (mut got_b, mut got_a) = (Vec::new(), Vec::new());
        for seq in 0..200u32 {
            net.a
                .send(ca, Endpoint { addr: B, port: pb }, &payload(1, seq, len), Instant(net.now))
                .unwrap();
            net.b
                .send(cb, Endpoint { addr: A, port: pa }, &payload(2, seq, len), Instant(net.now))
                .unwrap();
            net.run_until(net.now + MS);
            got_b.extend(drain(&mut net.b, cb));
            got_a.extend(drain(&mut net.a, ca));
        }
        assert_eq!(got_b.len(), 200, "{len} B");
        assert_eq!(got_a.len(), 200, "{len} B");
        for (seq, ((from_a, pb_), (from_b, pa_))) in got_b.iter().zip(&got_a).enumerate() {
            assert_eq!(*from_a, Endpoint { addr: A, port: pa });
            assert_eq!(*from_b, Endpoint { addr: B, port: pb });
            assert_eq!(*pb_, payload(1, seq as u32, len), "{len} B, datagram {seq}");
            assert_eq!(*pa_, payload(2, seq as u32, len), "{len} B, datagram {seq}");
        }
        for (s, c) in [(&net.a, ca), (&net.b, cb)] {
            let acc = s.accounts(c).unwrap();
            assert_eq!((acc.packets_sent, acc.packets_received), (200, 200));
            assert_eq!((acc.bytes_sent, acc.bytes_received), (200 * len as u64, 200 * len as u64));
            assert_eq!(s.drops(), Drops::default());
        }
    }
}

#[test]
fn a_datagram_to_the_nodes_own_address_reaches_its_client_there() {
    let mut net = Net::new();
    let (ca, pa) = net.a.open(0, contract(2, true), area(8), Instant(0)).unwrap();
    let (cb, pb) = net.a.open(7000, contract(2, true), area(8), Instant(0)).unwrap();
    for seq in 0..20u32 {
        let len = [64, MAX_UDP_PAYLOAD][seq as usize % 2];
        net.a
            .send(ca, Endpoint { addr: A, port: pb }, &payload(1, seq, len), Instant(net.now))
            .unwrap();
        net.run_until(net.now + MS);
        let got = drain(&mut net.a, cb);
        assert_eq!(got, [(Endpoint { addr: A, port: pa }, payload(1, seq, len))], "datagram {seq}");
    }
    // Nothing went on the wire; a port nobody has is a drop.
    assert_eq!(net.wire.pending(Direction::AtoB), 0);
    net.a.send(ca, Endpoint { addr: A, port: 9 }, &payload(1, 0, 64), Instant(net.now)).unwrap();
    net.run_until(net.now + MS);
    assert_eq!(net.a.drops().total(), 1);
    assert_eq!(net.a.accounts(ca).unwrap().packets_sent, 21);
    assert_eq!(net.a.accounts(cb).unwrap().packets_received, 20);
}

#[test]
fn arp_resolves_and_ping_is_answered() {
    let mut net = Net::new();
    let log = log_ethertypes(&net.wire);
    net.a.ping(B, 1, b"tessera", Instant(0)).unwrap();
    net.run_until(MS);
    assert_eq!(net.a.pong(), Some((B, 1)));
    // One ARP request and its reply, then the echo request and its reply.
    assert_eq!(log.get(), [1, 1, 1, 1], "[A->B IP, A->B ARP, B->A IP, B->A ARP]");
    // Resolved: the next ping needs no ARP.
    net.a.ping(B, 2, b"again", Instant(net.now)).unwrap();
    net.run_until(net.now + MS);
    assert_eq!(net.a.pong(), Some((B, 2)));
    assert_eq!(net.a.pong(), None);
    assert_eq!(log.get(), [2, 1, 2, 1]);
    assert_eq!(net.b.frames_to_stack(), 3);
}

/// Every frame A sent to B while it pinged B, then sent a UDP datagram of `len` bytes from its
/// client on port 5000 to B's on port 7000 (an ARP request, an echo request, the datagram).
fn captured_frames(len: usize) -> (Net, ClientId, Vec<Vec<u8>>) {
    let mut net = Net::new();
    let (ca, _) = net.a.open(5000, contract(5, true), area(4), Instant(0)).unwrap();
    let (cb, _) = net.b.open(7000, contract(5, true), area(4), Instant(0)).unwrap();
    let frames = Rc::new(core::cell::RefCell::new(Vec::new()));
    let f = frames.clone();
    net.wire.set_filter(Some(Box::new(move |dir, frame| {
        if dir == Direction::AtoB {
            f.borrow_mut().push(frame.to_vec());
        }
        true
    })));
    net.a.ping(B, 1, b"fuzz", Instant(0)).unwrap();
    net.run_until(MS);
    assert_eq!(net.a.pong(), Some((B, 1)));
    net.a
        .send(ca, Endpoint { addr: B, port: 7000 }, &payload(1, 1, len), Instant(net.now))
        .unwrap();
    net.run_until(2 * MS);
    assert_eq!(drain(&mut net.b, cb).len(), 1);
    net.wire.set_filter(None);
    let frames = frames.borrow().clone();
    assert_eq!(frames.len(), 3);
    (net, cb, frames)
}

/// A valid UDP frame from A's client to B's port 7000, captured on the wire.
fn captured_udp_frame(len: usize) -> (Net, ClientId, Vec<u8>) {
    let (net, cb, frames) = captured_frames(len);
    let udp = frames.iter().find(|f| f.len() == 42 + len).unwrap().clone();
    (net, cb, udp)
}

/// Recomputes the IPv4 header checksum of an Ethernet frame.
fn fix_ip_checksum(frame: &mut [u8]) {
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..]);
    ip.fill_checksum();
}

#[test]
fn malformed_frames_are_dropped_and_counted_one_reason_each() {
    let (mut net, cb, udp) = captured_udp_frame(100);
    let before = net.b.drops();
    let inject = |net: &mut Net, f: &[u8]| {
        assert!(net.wire.inject(Direction::AtoB, f));
        net.settle();
    };
    // Runts: shorter than an Ethernet header, than an IPv4 header, than IPv4's total length.
    inject(&mut net, &udp[..10]);
    inject(&mut net, &udp[..30]);
    inject(&mut net, &udp[..udp.len() - 1]);
    // Oversize.
    let mut big = udp.clone();
    big.resize(1515, 0);
    inject(&mut net, &big);
    // Bad IP checksum; bad UDP checksum (a payload byte changed).
    let mut bad = udp.clone();
    bad[24] ^= 0x40;
    inject(&mut net, &bad);
    let mut bad = udp.clone();
    bad[60] ^= 1;
    inject(&mut net, &bad);
    // Unknown ethertypes: IPv6, and something else.
    for et in [[0x86, 0xdd], [0x12, 0x34]] {
        let mut f = udp.clone();
        f[12..14].copy_from_slice(&et);
        inject(&mut net, &f);
    }
    // An unknown IP protocol (TCP), a fragment, another host's address, another MAC.
    let mut f = udp.clone();
    f[14 + 9] = 6;
    fix_ip_checksum(&mut f);
    inject(&mut net, &f);
    let mut f = udp.clone();
    f[14 + 6] |= 0x20;
    fix_ip_checksum(&mut f);
    inject(&mut net, &f);
    let mut f = udp.clone();
    f[14 + 19] = 99;
    fix_ip_checksum(&mut f);
    inject(&mut net, &f);
    let mut f = udp.clone();
    f[5] = 0x77;
    inject(&mut net, &f);
    // No such port (the UDP checksum zeroed: none).
    let mut f = udp.clone();
    f[36..38].copy_from_slice(&7001u16.to_be_bytes());
    f[40..42].copy_from_slice(&[0, 0]);
    inject(&mut net, &f);
    // An IPv4 header of version 6.
    let mut f = udp.clone();
    f[14] = 0x65;
    inject(&mut net, &f);
    let d = net.b.drops();
    assert_eq!(before, Drops::default());
    let want = Drops {
        runt: 3,
        oversize: 1,
        not_for_us: 2,
        unknown_ethertype: 2,
        malformed_ip: 1,
        bad_ip_checksum: 1,
        fragment: 1,
        unknown_protocol: 1,
        bad_udp_checksum: 1,
        bad_icmp_checksum: 0,
        no_such_port: 1,
        rx_full: 0,
    };
    assert_eq!(d, want);
    assert!(drain(&mut net.b, cb).is_empty());
    // The original still goes through.
    inject(&mut net, &udp);
    assert_eq!(drain(&mut net.b, cb), [(Endpoint { addr: A, port: 5000 }, payload(1, 1, 100))]);
}

#[test]
fn random_frames_never_panic_and_each_is_counted_once() {
    let (mut net, cb, seeds) = captured_frames(200);
    let mut rng = Rng::new(0x5eed);
    let mut delivered = 0u64;
    let (to_stack, drops) = (net.b.frames_to_stack(), net.b.drops().total());
    let from_a = net.wire.counts(Direction::AtoB).delivered;
    let n = 20_000;
    for _ in 0..n {
        let f: Vec<u8> = match rng.below(3) {
            // Random bytes of any length up to beyond the largest frame.
            0 => (0..rng.below(1600)).map(|_| rng.next() as u8).collect(),
            // A valid frame (ARP, ICMP, UDP) with a few bytes changed, maybe truncated.
            _ => {
                let mut f = seeds[rng.below(3) as usize].clone();
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(f.len() as u64) as usize;
                    f[i] = rng.next() as u8;
                }
                if rng.below(4) == 0 {
                    f.truncate(rng.below(f.len() as u64) as usize);
                }
                f
            }
        };
        assert!(net.wire.inject(Direction::AtoB, &f));
        net.settle();
        delivered += drain(&mut net.b, cb).len() as u64;
    }
    let d = net.b.drops();
    let handled = delivered + (net.b.frames_to_stack() - to_stack) + (d.total() - drops);
    // The frames injected, and those A sent B meanwhile (answers to B's answers).
    let from_a = net.wire.counts(Direction::AtoB).delivered - from_a;
    std::println!(
        "{n} random frames into B, {from_a} more from A: {delivered} delivered, {} to smoltcp, {d:?}",
        net.b.frames_to_stack() - to_stack
    );
    assert_eq!(handled, n + from_a, "{d:?}");
    // The mutations reached every check.
    assert!(d.runt > 0 && d.bad_ip_checksum > 0 && d.bad_udp_checksum > 0, "{d:?}");
    assert!(d.unknown_ethertype > 0 && d.not_for_us > 0 && d.malformed_ip > 0, "{d:?}");
    assert!(d.bad_icmp_checksum > 0 && net.b.frames_to_stack() - to_stack > 1000, "{d:?}");
}

#[test]
fn losses_on_a_lossy_wire_are_counted_exactly_by_ping_pong() {
    let mut net = Net::new();
    let (ca, _) = net.a.open(5000, contract(5, true), area(8), Instant(0)).unwrap();
    let (cb, _) = net.b.open(6000, contract(5, true), area(8), Instant(0)).unwrap();
    // Addresses resolved first, without loss.
    net.a.ping(B, 0, b"", Instant(0)).unwrap();
    net.run_until(MS);
    assert_eq!(net.a.pong(), Some((B, 0)));
    // Then every frame is lost with probability 1/10, by a fixed seed.
    let lost_non_udp = Rc::new(Cell::new(0u32));
    let l = lost_non_udp.clone();
    let mut rng = Rng::new(10);
    net.wire.set_filter(Some(Box::new(move |_, f| {
        let keep = rng.below(10) != 0;
        if !keep && f.get(23) != Some(&17) {
            l.set(l.get() + 1);
        }
        keep
    })));
    // The ping-pong: A sends round n and waits up to 2 ms for its echo; B echoes everything.
    let rounds = 2000u32;
    let (mut answered, mut lost, mut duplicates, mut late) = (0u32, 0u32, 0u32, 0u32);
    for n in 0..rounds {
        let to = Endpoint { addr: B, port: 6000 };
        net.a.send(ca, to, &payload(1, n, 64), Instant(net.now)).unwrap();
        let deadline = net.now + 2 * MS;
        let mut got = false;
        while net.now < deadline && !got {
            net.step(deadline);
            for (from, p) in drain(&mut net.b, cb) {
                net.b.send(cb, from, &p, Instant(net.now)).unwrap();
            }
            for (_, p) in drain(&mut net.a, ca) {
                let seq = u32::from_le_bytes(p[..4].try_into().unwrap());
                assert_eq!(p, payload(1, seq, 64));
                match seq.cmp(&n) {
                    core::cmp::Ordering::Equal if !got => got = true,
                    core::cmp::Ordering::Equal => duplicates += 1,
                    _ => late += 1,
                }
            }
        }
        if got { answered += 1 } else { lost += 1 }
    }
    let wire_lost = net.wire.counts(Direction::AtoB).lost + net.wire.counts(Direction::BtoA).lost;
    let frames = wire_lost
        + net.wire.counts(Direction::AtoB).delivered
        + net.wire.counts(Direction::BtoA).delivered;
    std::println!(
        "{rounds} rounds: {answered} answered, {lost} lost; {wire_lost} of {frames} frames lost on the wire"
    );
    assert_eq!(lost_non_udp.get(), 0);
    assert_eq!((duplicates, late), (0, 0));
    assert_eq!(answered + lost, rounds);
    // A round is lost exactly when its request or its echo is.
    assert_eq!(u64::from(lost), wire_lost);
    assert!((8..=12).contains(&(wire_lost * 100 / frames)), "{wire_lost} of {frames}");
}

#[test]
fn a_closed_client_loses_its_queued_datagrams_and_nobody_elses() {
    let mut net = Net::new();
    let (c1, _) = net.a.open(5001, contract(2, true), area(4), Instant(0)).unwrap();
    let (c2, _) = net.a.open(5002, contract(2, true), area(4), Instant(0)).unwrap();
    let (d1, _) = net.b.open(6001, contract(2, true), area(16), Instant(0)).unwrap();
    let (d2, _) = net.b.open(6002, contract(2, true), area(16), Instant(0)).unwrap();
    net.a.ping(B, 0, b"", Instant(0)).unwrap();
    net.run_until(MS);
    // Both of A's clients queue 10 at the same instant: the link takes one frame at a time.
    let t = Instant(net.now);
    for seq in 0..10 {
        net.a.send(c1, Endpoint { addr: B, port: 6001 }, &payload(1, seq, 1000), t).unwrap();
        net.a.send(c2, Endpoint { addr: B, port: 6002 }, &payload(2, seq, 1000), t).unwrap();
    }
    // B's second client receives, but never releases its slots, then closes with them.
    let sent = net.a.accounts(c1).unwrap().packets_sent;
    let acc = net.a.close(c1, t).unwrap();
    assert_eq!(acc.dropped_tx_closed, 10 - sent);
    assert!(acc.dropped_tx_closed >= 9, "{acc:?}");
    assert_eq!(
        net.a.send(c1, Endpoint { addr: B, port: 6001 }, b"x", t),
        Err(NetError::UnknownClient)
    );
    net.run_until(net.now + 10 * MS);
    let got1 = drain(&mut net.b, d1);
    assert_eq!(got1.len() as u64, sent);
    let mut n2 = 0;
    while net.b.next_received(d2).is_some() {
        n2 += 1;
    }
    assert_eq!(n2, 10);
    let acc2 = net.a.accounts(c2).unwrap();
    assert_eq!((acc2.packets_sent, acc2.dropped_tx_closed, acc2.dropped_tx_error), (10, 0, 0));
    let accd2 = net.b.close(d2, Instant(net.now)).unwrap();
    assert_eq!((accd2.packets_received, accd2.dropped_rx_closed), (10, 10));
    // The other receiver is untouched, and its port now belongs to nobody.
    assert_eq!(net.b.accounts(d1).unwrap().dropped_rx_closed, 0);
    net.a.send(c2, Endpoint { addr: B, port: 6002 }, b"late", Instant(net.now)).unwrap();
    net.run_until(net.now + MS);
    assert_eq!(net.b.drops().no_such_port, 1);
    assert_eq!(net.b.drops().total(), 1);
}

#[test]
fn two_saturating_streams_under_1_to_2_contracts_share_the_link_1_to_2() {
    let mut net = Net::new();
    // 30% and 60% of the link in every 10 ms, no slack time.
    let (c1, _) = net.a.open(5001, contract(3, false), area(4), Instant(0)).unwrap();
    let (c2, _) = net.a.open(5002, contract(6, false), area(4), Instant(0)).unwrap();
    let (d, _) = net.b.open(6000, contract(1, true), area(64), Instant(0)).unwrap();
    net.a.ping(B, 0, b"", Instant(0)).unwrap();
    net.run_until(MS);
    let start = net.now;
    let run = 1000 * MS;
    let mut bytes = [0u64; 2];
    let mut seq = [0u32; 2];
    while net.now < start + run {
        // Both queues kept full.
        for (k, c) in [c1, c2].into_iter().enumerate() {
            while net
                .a
                .send(
                    c,
                    Endpoint { addr: B, port: 6000 },
                    &payload(k as u8, seq[k], MAX_UDP_PAYLOAD),
                    Instant(net.now),
                )
                .is_ok()
            {
                seq[k] += 1;
            }
        }
        net.step(start + run);
        for (from, p) in drain(&mut net.b, d) {
            bytes[usize::from(from.port - 5001)] += p.len() as u64;
        }
    }
    let link_ns: Vec<u64> =
        [c1, c2].iter().map(|c| net.a.accounts(*c).unwrap().guaranteed_ns).collect();
    let ratio = bytes[1] as f64 / bytes[0] as f64;
    std::println!(
        "1:2 contracts over {} ms: {} and {} bytes received (ratio {ratio:.4}); link time {} and {} ms",
        run / MS,
        bytes[0],
        bytes[1],
        link_ns[0] / MS,
        link_ns[1] / MS
    );
    // Tolerance: 1% on the share; each stream within a frame per period of its slices.
    assert!((ratio - 2.0).abs() < 0.02, "{ratio}");
    let frame = LinkModel::FAST_ETHERNET.frame_ns(1514);
    for (k, slice) in [(0, 3 * MS), (1, 6 * MS)] {
        let want = slice * 100;
        assert!(link_ns[k] <= want && link_ns[k] + 100 * frame >= want, "{k}: {}", link_ns[k]);
        assert_eq!(net.a.accounts([c1, c2][k]).unwrap().extra_ns, 0);
    }
    assert_eq!(net.b.drops(), Drops::default());
}

#[test]
fn period_records_give_each_saturating_stream_its_slice() {
    let mut net = Net::new();
    let (c1, _) = net.a.open(5001, contract(1, false), area(4), Instant(0)).unwrap();
    let (c2, _) = net.a.open(5002, contract(2, false), area(4), Instant(0)).unwrap();
    let (d, _) = net.b.open(6000, contract(1, true), area(64), Instant(0)).unwrap();
    net.a.ping(B, 0, b"", Instant(0)).unwrap();
    net.run_until(MS);
    assert!(net.a.take_periods().is_empty(), "not recorded until asked");
    net.a.record_periods(true);
    let start = net.now;
    let mut seq = 0u32;
    let mut records = Vec::new();
    while net.now < start + 200 * MS {
        for c in [c1, c2] {
            let to = Endpoint { addr: B, port: 6000 };
            while net.a.send(c, to, &payload(0, seq, MAX_UDP_PAYLOAD), Instant(net.now)).is_ok() {
                seq += 1;
            }
        }
        net.step(start + 200 * MS);
        drain(&mut net.b, d);
        records.extend(net.a.take_periods());
    }
    let frame = LinkModel::FAST_ETHERNET.frame_ns(1514);
    for (c, slice) in [(c1, MS), (c2, 2 * MS)] {
        let mine: Vec<_> = records.iter().filter(|(id, _)| *id == c).map(|(_, r)| r).collect();
        // The first period may have started before the streams were saturated.
        assert!(mine.len() >= 18, "{c:?}: {} periods", mine.len());
        for r in &mine[1..] {
            assert_eq!((r.end - r.start, r.extra), (10 * MS, 0), "{c:?}: {r:?}");
            assert!(r.guaranteed <= slice && r.guaranteed + frame > slice, "{c:?}: {r:?}");
        }
    }
    // A closed client's periods are no one's.
    net.a.close(c1, Instant(net.now)).unwrap();
    net.run_until(net.now + 50 * MS);
    assert!(net.a.take_periods().iter().all(|(id, _)| *id == c2));
}

#[test]
fn full_queues_refuse_or_drop_and_count() {
    let mut net = Net::new();
    let (ca, _) = net.a.open(5000, contract(2, true), area(2), Instant(0)).unwrap();
    let (cb, _) = net.b.open(6000, contract(2, true), area(2), Instant(0)).unwrap();
    let (other, _) = net.b.open(6001, contract(2, true), area(8), Instant(0)).unwrap();
    net.a.ping(B, 0, b"", Instant(0)).unwrap();
    net.run_until(MS);
    // 20 sends at one instant into a queue of 16 (the first leaves it at once for the link).
    let t = Instant(net.now);
    let to = Endpoint { addr: B, port: 6000 };
    let ok = (0..20).filter(|seq| net.a.send(ca, to, &payload(1, *seq, 500), t).is_ok()).count();
    let acc = net.a.accounts(ca).unwrap();
    assert_eq!(ok as u64, 16 + acc.packets_sent);
    assert_eq!(acc.dropped_tx_full, 20 - ok as u64);
    assert_eq!(net.a.send(ca, to, b"", t), Err(NetError::Busy));
    // B's client never releases its two slots: the rest are dropped and counted.
    net.run_until(net.now + 10 * MS);
    let acc = net.b.accounts(cb).unwrap();
    assert_eq!((acc.packets_received, acc.dropped_rx_full), (2, ok as u64 - 2));
    assert_eq!(net.b.drops().rx_full, ok as u64 - 2);
    // Its neighbour on B is unaffected.
    net.a.send(ca, Endpoint { addr: B, port: 6001 }, b"hello", Instant(net.now)).unwrap();
    net.run_until(net.now + MS);
    assert_eq!(drain(&mut net.b, other), [(Endpoint { addr: A, port: 5000 }, b"hello".to_vec())]);
    // Releasing a slot twice, or one that is not a slot, is refused.
    let r = net.b.next_received(cb).unwrap();
    assert_eq!(net.b.release(cb, r.offset), Ok(()));
    assert_eq!(net.b.release(cb, r.offset), Err(NetError::OutsideDataArea));
    assert_eq!(net.b.release(cb, 1), Err(NetError::OutsideDataArea));
    assert_eq!(net.b.release(cb, 99 * RX_SLOT as u64), Err(NetError::OutsideDataArea));
    // Bad sends, and a link that is down.
    let now = Instant(net.now);
    let big = [0; MAX_UDP_PAYLOAD + 1];
    assert_eq!(net.a.send(ca, to, &big, now), Err(NetError::TooLarge));
    for bad in [Ipv4Addr([0; 4]), Ipv4Addr([255; 4]), Ipv4Addr([239, 1, 1, 1])] {
        assert_eq!(
            net.a.send(ca, Endpoint { addr: bad, port: 1 }, b"", now),
            Err(NetError::BadAddress)
        );
    }
    assert_eq!(net.a.send(ca, Endpoint { addr: B, port: 0 }, b"", now), Err(NetError::BadAddress));
    net.wire.set_link(net_interface::LinkState::Down);
    assert_eq!(net.a.send(ca, to, b"", now), Err(NetError::LinkDown));
    // Ports: taken, and the contracts' admission.
    assert_eq!(net.b.open(6000, contract(1, true), area(1), now).err(), Some(NetError::PortInUse));
    assert_eq!(net.b.open(0, contract(9, true), area(1), now).err(), Some(NetError::NotAdmitted));
    assert_eq!(net.b.accounts(ClientId(99)).err(), Some(NetError::UnknownClient));
}

#[test]
fn a_poll_takes_at_most_its_budget_of_frames_and_asks_to_come_back_at_once() {
    let (mut net, cb, udp) = captured_udp_frame(100);
    for _ in 0..200 {
        assert!(net.wire.inject(Direction::AtoB, &udp));
    }
    let now = Instant(net.now);
    assert_eq!(net.b.poll(now), Some(now));
    assert_eq!(net.wire.pending(Direction::AtoB), 200 - 64);
    net.settle();
    assert_eq!(net.wire.pending(Direction::AtoB), 0);
    assert_ne!(net.b.poll(now), Some(now));
    let acc = net.b.accounts(cb).unwrap();
    assert_eq!((acc.packets_received, acc.dropped_rx_full), (1 + 4, 196));
}

#[test]
fn a_client_speaks_the_protocol_in_encoded_messages() {
    use crate::{Area, Session};
    use net_interface::{Request, Response, ServerMessage};
    let mut net = Net::new();
    let (cb, _) = net.b.open(7000, contract(2, true), area(4), Instant(0)).unwrap();
    let area_ = Area { base: 0x4000_0000, len: 8 * 4096, rx_offset: 4 * 4096 };
    let mut tx = vec![0u8; 4 * 4096];
    let mut session = Session::default();
    let c = contract(2, true);
    let call = |net: &mut Net, s: &mut Session, msg: &[u8], tx: &[u8]| {
        let now = Instant(net.now);
        let r = net.a.handle(s, msg, c, area_, tx, || area(10), |_, _| Err(NetError::BadLoan), now);
        match ServerMessage::decode(&r) {
            Ok(ServerMessage::Response(r)) => r,
            other => panic!("{other:?}"),
        }
    };
    // Nothing before Open; garbage is answered, by its id.
    let to = Endpoint { addr: B, port: 7000 };
    assert_eq!(
        call(&mut net, &mut session, &Request::send(1, to, 0, 4).encode(), &tx),
        Response::plain(1, Err(NetError::UnknownClient))
    );
    let mut junk = Request::close(2).encode();
    junk[9] = 1;
    assert_eq!(
        call(&mut net, &mut session, &junk, &tx),
        Response::plain(2, Err(NetError::Malformed))
    );
    // Open: the session says where everything is.
    let open = call(&mut net, &mut session, &Request::open(3, 5000).encode(), &tx);
    assert_eq!(open.status, Ok(()));
    let info = open.info;
    assert_eq!(
        (info.local, info.area_base, info.area_len),
        (Endpoint { addr: A, port: 5000 }, 0x4000_0000, 8 * 4096)
    );
    assert_eq!(
        (info.rx_offset, info.rx_slots, info.max_payload, info.max_in_flight),
        (4 * 4096, 10, 1472, 16)
    );
    assert_eq!(
        call(&mut net, &mut session, &Request::open(4, 5001).encode(), &tx).status,
        Err(NetError::PortInUse)
    );
    // Send from the area; outside it, refused.
    tx[100..1100].copy_from_slice(&payload(1, 7, 1000));
    assert_eq!(
        call(&mut net, &mut session, &Request::send(5, to, 100, 1000).encode(), &tx).status,
        Ok(())
    );
    let outside = Request::send(6, to, 4 * 4096 - 10, 11).encode();
    assert_eq!(call(&mut net, &mut session, &outside, &tx).status, Err(NetError::OutsideDataArea));
    net.run_until(net.now + MS);
    let got = drain(&mut net.b, cb);
    assert_eq!(got, [(Endpoint { addr: A, port: 5000 }, payload(1, 7, 1000))]);
    // A datagram back: a message naming its slot in the area, released once read.
    net.b
        .send(cb, Endpoint { addr: A, port: 5000 }, &payload(2, 8, 300), Instant(net.now))
        .unwrap();
    net.run_until(net.now + MS);
    let m = net.a.next_message(&session).unwrap();
    let Ok(ServerMessage::Received(r)) = ServerMessage::decode(&m) else { panic!("{m:?}") };
    assert_eq!((r.from, r.offset, r.len), (Endpoint { addr: B, port: 7000 }, 4 * 4096, 300));
    let rel = r.offset as usize - 4 * 4096;
    assert_eq!(
        net.a.rx_area(session.client.unwrap()).unwrap()[rel..rel + 300],
        payload(2, 8, 300)[..]
    );
    assert_eq!(net.a.next_message(&session), None);
    // A second one, in the next slot.
    net.b.send(cb, Endpoint { addr: A, port: 5000 }, b"two", Instant(net.now)).unwrap();
    net.run_until(net.now + MS);
    let m = net.a.next_message(&session).unwrap();
    let Ok(ServerMessage::Received(r2)) = ServerMessage::decode(&m) else { panic!("{m:?}") };
    assert_eq!((r2.offset, r2.len), (4 * 4096 + RX_SLOT as u64, 3));
    let release = |id, off| Request::release(id, off).encode();
    assert_eq!(call(&mut net, &mut session, &release(6, r2.offset), &tx).status, Ok(()));
    assert_eq!(call(&mut net, &mut session, &release(7, r.offset), &tx).status, Ok(()));
    assert_eq!(
        call(&mut net, &mut session, &release(8, r.offset), &tx).status,
        Err(NetError::OutsideDataArea)
    );
    assert_eq!(
        call(&mut net, &mut session, &release(9, r.offset + 1), &tx).status,
        Err(NetError::OutsideDataArea)
    );
    // Close, after which the session is gone.
    assert_eq!(call(&mut net, &mut session, &Request::close(10).encode(), &tx).status, Ok(()));
    assert_eq!(
        call(&mut net, &mut session, &Request::close(11).encode(), &tx).status,
        Err(NetError::UnknownClient)
    );
}

#[test]
fn drops_are_listed_by_reason_in_order_and_total_every_reason() {
    let mut d = crate::Drops::default();
    for (i, r) in crate::DropReason::ALL.iter().enumerate() {
        for _ in 0..i {
            d.count(*r);
        }
    }
    assert_eq!(
        alloc::format!("{d}"),
        "runt 0, oversize 1, other host 2, ethertype 3, malformed IP 4, IP checksum 5, \
         fragment 6, protocol 7, UDP checksum 8, ICMP checksum 9, no port 10, slots full 11"
    );
    assert_eq!(d.total(), 66);
    assert_eq!(d.of(crate::DropReason::RxFull), 11);
}

/// A page as a lent frame at device address `FRAME` of A's NIC: byte `i` is `i * 13 + 5`.
const FRAME: u64 = 0x8000_3000;

fn lent_page() -> Vec<u8> {
    (0..4096).map(|i| (i * 13 + 5) as u8).collect()
}

/// RPP's cut of a page: three datagrams of a 28-byte head and up to 1,421 bytes of the page.
const PAGE_CUT: LoanSend = LoanSend { loan: 0x77_0000_0105, at: 0, head: 28, chunk: 1421 };

#[test]
fn a_lent_page_leaves_from_its_frame_and_its_loan_comes_back_only_once_sent() {
    let mut net = Net::new();
    net.a.nic_mut().set_memory(FRAME, &lent_page());
    let (ca, pa) = net.a.open(5000, contract(5, true), area(4), Instant(0)).unwrap();
    let (cb, pb) = net.b.open(7000, contract(5, true), area(8), Instant(0)).unwrap();
    let to = Endpoint { addr: B, port: pb };
    let heads: Vec<u8> = (0..3 * 28).map(|i| 200 - i as u8).collect();
    // B's hardware address is not known yet: refused, and nothing held.
    let r = net.a.send_lent(ca, to, &heads, 4096, PAGE_CUT, FRAME, Instant(0));
    assert_eq!(r, Err(NetError::Unresolved));
    // B's datagram teaches A its address.
    net.b.send(cb, Endpoint { addr: A, port: pa }, b"hello", Instant(0)).unwrap();
    net.run_until(MS);
    assert_eq!(drain(&mut net.a, ca).len(), 1);
    net.a.send_lent(ca, to, &heads, 4096, PAGE_CUT, FRAME, Instant(net.now)).unwrap();
    assert_eq!(net.a.loans_held(), 1);
    assert!(net.a.holds_loan(PAGE_CUT.loan));
    // The first frame is at the device; the loan stays out until the device is done with all.
    assert_eq!(net.a.take_returned(), None);
    net.run_until(net.now + 5 * MS);
    assert_eq!(net.a.take_returned(), Some(PAGE_CUT.loan));
    assert_eq!((net.a.take_returned(), net.a.loans_held()), (None, 0));
    // B got the three datagrams, each its head then its piece of the page, checksum 0 taken.
    let got = drain(&mut net.b, cb);
    let page = lent_page();
    assert_eq!(got.len(), 3);
    for (i, (from, bytes)) in got.iter().enumerate() {
        let (at, len) = PAGE_CUT.piece(4096, i as u32);
        assert_eq!(*from, Endpoint { addr: A, port: pa });
        assert_eq!(&bytes[..28], &heads[i * 28..(i + 1) * 28], "datagram {i}");
        assert_eq!(&bytes[28..], &page[at as usize..(at + len) as usize], "datagram {i}");
    }
    assert_eq!(net.b.drops(), Drops::default());
    let acc = net.a.accounts(ca).unwrap();
    assert_eq!((acc.packets_sent, acc.lent_sent, acc.bytes_sent), (3, 3, 3 * 28 + 4096));
    assert_eq!(net.a.nic().gathered, 3);
}

#[test]
fn a_lent_send_refused_or_dropped_at_a_close_gives_its_loan_back() {
    let mut net = Net::new();
    net.a.nic_mut().set_memory(FRAME, &lent_page());
    let (ca, pa) = net.a.open(5000, contract(5, true), area(4), Instant(0)).unwrap();
    let (cb, pb) = net.b.open(7000, contract(5, true), area(32), Instant(0)).unwrap();
    net.b.send(cb, Endpoint { addr: A, port: pa }, b"hello", Instant(0)).unwrap();
    net.run_until(MS);
    drain(&mut net.a, ca);
    let to = Endpoint { addr: B, port: pb };
    let heads = vec![1u8; 3 * 28];
    // Too few heads, and the node's own address: refused before anything is held.
    let r = net.a.send_lent(ca, to, &heads[..50], 4096, PAGE_CUT, FRAME, Instant(net.now));
    assert_eq!(r, Err(NetError::TooLarge));
    let me = Endpoint { addr: A, port: pa };
    let r = net.a.send_lent(ca, me, &heads, 4096, PAGE_CUT, FRAME, Instant(net.now));
    assert_eq!(r, Err(NetError::Unresolved));
    assert_eq!((net.a.loans_held(), net.a.take_returned()), (0, None));
    // A queue without room for all three datagrams takes none.
    let mut queued = 0;
    while net.a.send(ca, to, &payload(1, queued, 64), Instant(net.now)).is_ok() {
        queued += 1;
    }
    net.a.send(ca, to, &payload(1, queued, 64), Instant(net.now)).unwrap_err();
    assert!(queued >= 16, "{queued}");
    let r = net.a.send_lent(ca, to, &heads, 4096, PAGE_CUT, FRAME, Instant(net.now));
    assert_eq!(r, Err(NetError::Busy));
    assert_eq!((net.a.loans_held(), net.a.take_returned()), (0, None));
    net.run_until(net.now + 5 * MS);
    assert_eq!(drain(&mut net.b, cb).len(), queued as usize);
    // A page behind another client's in the queue, closed before it leaves: its loan comes back.
    let (cc, _) = net.a.open(5001, contract(2, true), area(4), Instant(0)).unwrap();
    for seq in 0..8 {
        net.a.send(cc, to, &payload(3, seq, MAX_UDP_PAYLOAD), Instant(net.now)).unwrap();
    }
    for seq in 0..8 {
        net.a.send(ca, to, &payload(1, seq, MAX_UDP_PAYLOAD), Instant(net.now)).unwrap();
    }
    net.a.send_lent(ca, to, &heads, 4096, PAGE_CUT, FRAME, Instant(net.now)).unwrap();
    // The same loan again, while held: refused by the protocol's server side (see `handle`).
    assert!(net.a.holds_loan(PAGE_CUT.loan));
    let acc = net.a.close(ca, Instant(net.now)).unwrap();
    assert!(acc.dropped_tx_closed >= 3, "{acc:?}");
    assert_eq!(acc.lent_sent, 0);
    assert_eq!((net.a.take_returned(), net.a.loans_held()), (Some(PAGE_CUT.loan), 0));
    net.run_until(net.now + 5 * MS);
    assert_eq!(net.a.nic().gathered, 0);
}

#[test]
fn a_neighbour_that_never_answers_holds_a_clients_datagrams_back_for_a_bounded_time() {
    use crate::UNRESOLVED_WAIT_NS;
    let mut net = Net::new();
    let (c, _) = net.a.open(5001, contract(2, true), area(4), Instant(0)).unwrap();
    let (d, _) = net.b.open(6001, contract(2, true), area(16), Instant(0)).unwrap();
    net.a.ping(B, 0, b"", Instant(0)).unwrap();
    net.run_until(MS);
    // Nobody is at 10.0.0.3 (a node that has ended): its datagram waits for ARP in the
    // client's socket, and the three to B behind it (smoltcp sends a socket's in order).
    let gone = Endpoint { addr: Ipv4Addr([10, 0, 0, 3]), port: 7100 };
    let to_b = Endpoint { addr: B, port: 6001 };
    let t0 = net.now;
    net.a.send(c, gone, b"create", Instant(t0)).unwrap();
    for seq in 0..3 {
        net.a.send(c, to_b, &payload(1, seq, 100), Instant(t0)).unwrap();
    }
    net.run_until(t0 + UNRESOLVED_WAIT_NS / 2);
    assert!(drain(&mut net.b, d).is_empty());
    assert_eq!(net.a.unsent(c), Ok(true));
    // At the end of the wait the socket's four are dropped and counted, and nothing is left
    // to send (a Close would be answered).
    net.run_until(t0 + UNRESOLVED_WAIT_NS + MS);
    assert_eq!(net.a.unsent(c), Ok(false), "still waiting at {} ns", net.now - t0);
    let acc = net.a.accounts(c).unwrap();
    assert_eq!((acc.dropped_tx_error, acc.packets_sent), (4, 0), "{acc:?}");
    // The client's next datagrams to B leave (within smoltcp's one second of silence).
    let t1 = net.now;
    for seq in 3..6 {
        net.a.send(c, to_b, &payload(1, seq, 100), Instant(t1)).unwrap();
    }
    net.run_until(t1 + 1_100 * MS);
    let got: Vec<_> = drain(&mut net.b, d).into_iter().map(|(_, p)| p).collect();
    assert_eq!(got, (3..6).map(|s| payload(1, s, 100)).collect::<Vec<_>>());
    assert_eq!(net.a.accounts(c).unwrap().packets_sent, 3);
}
