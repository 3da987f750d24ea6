//! A client and servers over a simulated network (virtual time, fixed seeds): loss,
//! duplication, reordering and corruption, alone and together; every page read back and
//! compared; packets and virtual time bounded.

mod common;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use common::{MemStore, Rng};
use rpp::client::{Finished, Params, StreamKey, Transfer, Transfers};
use rpp::wire::{ChunkSet, Code, Header, MAX_CHUNK, Message, Op, Packet, decode, encode};
use rpp::{Outcome, PageServer, RttConfig};

const PAGE: usize = 4096;

/// The network's faults: each packet is lost, duplicated, corrupted with these probabilities,
/// and delayed by `delay_ns` plus up to `jitter_ns` (a jitter longer than the gap between
/// packets reorders them).
#[derive(Clone, Copy, Debug)]
struct Faults {
    loss: f64,
    dup: f64,
    corrupt: f64,
    delay_ns: u64,
    jitter_ns: u64,
}

const CLEAN: Faults = Faults { loss: 0.0, dup: 0.0, corrupt: 0.0, delay_ns: 50_000, jitter_ns: 0 };

/// Where a packet goes: a server, or the client (from a server).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum To {
    Server(u8),
    Client(u8),
}

/// Packets on their way: (arrival, sequence, destination, bytes), earliest first.
type Queue = BinaryHeap<Reverse<(u64, u64, To, Vec<u8>)>>;

struct Net {
    rng: Rng,
    faults: Faults,
    queue: Queue,
    seq: u64,
    /// Packets sent by anyone (before the faults).
    sent: u64,
    /// Every packet sent, decoded, in order (for tests that count them).
    log: Vec<(To, Vec<u8>)>,
}

impl Net {
    fn new(seed: u64, faults: Faults) -> Net {
        Net {
            rng: Rng::new(seed),
            faults,
            queue: BinaryHeap::new(),
            seq: 0,
            sent: 0,
            log: Vec::new(),
        }
    }

    fn send(&mut self, now: u64, to: To, bytes: &[u8]) {
        self.sent += 1;
        self.log.push((to, bytes.to_vec()));
        let f = self.faults;
        if self.rng.chance(f.loss) {
            return;
        }
        let copies = if self.rng.chance(f.dup) { 2 } else { 1 };
        for _ in 0..copies {
            let mut b = bytes.to_vec();
            if self.rng.chance(f.corrupt) {
                let i = self.rng.below(b.len() as u64) as usize;
                b[i] ^= 1 + self.rng.below(255) as u8;
            }
            let at =
                now + f.delay_ns + if f.jitter_ns > 0 { self.rng.below(f.jitter_ns) } else { 0 };
            self.seq += 1;
            self.queue.push(Reverse((at, self.seq, to, b)));
        }
    }
}

struct Server {
    data: PageServer,
    store: MemStore,
}

/// A client with several servers over one simulated network.
struct World {
    now: u64,
    net: Net,
    client: Transfers<u8>,
    servers: Vec<Server>,
    done: Vec<Finished<u8>>,
}

const TOKEN: u64 = 0x5eed_0000_1234_abcd;

impl World {
    /// `servers` servers, each with stream 1 (token [`TOKEN`], 4 KiB pages) open, sending
    /// chunks of `server_chunk`.
    fn new(seed: u64, faults: Faults, servers: usize, server_chunk: usize) -> World {
        let servers = (0..servers)
            .map(|_| {
                let mut data = PageServer::new(server_chunk);
                data.open_stream(1, TOKEN, PAGE as u32);
                Server { data, store: MemStore::new(100_000) }
            })
            .collect();
        World {
            now: 0,
            net: Net::new(seed, faults),
            client: Transfers::new(RttConfig::LAN),
            servers,
            done: Vec::new(),
        }
    }

    fn start(&mut self, peer: u8, t: Transfer) {
        let (now, net) = (self.now, &mut self.net);
        self.client.start(now, peer, t, &mut |p, b| net.send(now, To::Server(p), b));
    }

    /// Runs until nothing is in flight and the network is empty (panics past virtual time
    /// `limit`).
    fn run(&mut self, limit: u64) {
        while !self.net.queue.is_empty() || self.client.in_flight() > 0 {
            self.step(limit);
        }
    }

    /// Runs `ops` (peer, transfer) with at most `window` in flight; returns them finished, in
    /// the order given.
    fn run_ops(
        &mut self,
        ops: Vec<(u8, Transfer)>,
        window: usize,
        limit: u64,
    ) -> Vec<Finished<u8>> {
        let order: Vec<(u8, u32)> = ops.iter().map(|(p, t)| (*p, t.request())).collect();
        let mut pending = ops.into_iter();
        let mut finished = BTreeMap::new();
        loop {
            while self.client.in_flight() < window {
                match pending.next() {
                    Some((p, t)) => self.start(p, t),
                    None => break,
                }
            }
            if self.client.in_flight() == 0 {
                break;
            }
            // Run until one finishes (or everything is idle).
            let before = self.done.len();
            while self.done.len() == before && self.client.in_flight() > 0 {
                self.step(limit);
            }
            for f in self.done.drain(..) {
                finished.insert((f.peer, f.transfer.request()), f);
            }
        }
        // Let the last answers and duplicates drain.
        self.run(limit);
        for f in self.done.drain(..) {
            finished.insert((f.peer, f.transfer.request()), f);
        }
        order.iter().map(|k| finished.remove(k).expect("every operation finishes")).collect()
    }

    /// One event.
    fn step(&mut self, limit: u64) {
        let next_packet = self.net.queue.peek().map(|Reverse((t, ..))| *t);
        let Some(next) = [next_packet, self.client.next_deadline()].into_iter().flatten().min()
        else {
            return;
        };
        assert!(next <= limit, "virtual time {next} past the limit {limit}");
        self.now = self.now.max(next);
        let now = self.now;
        let net = &mut self.net;
        if next_packet == Some(next) {
            let Reverse((_, _, to, bytes)) = net.queue.pop().unwrap();
            match to {
                To::Server(i) => {
                    let s = &mut self.servers[i as usize];
                    s.data
                        .on_packet(&mut s.store, &bytes, &mut |b| net.send(now, To::Client(i), b));
                }
                To::Client(i) => {
                    let c = self
                        .client
                        .on_packet(now, i, &bytes, &mut |p, b| net.send(now, To::Server(p), b));
                    assert!(c.is_none());
                }
            }
        }
        self.client.poll_timeout(now, &mut |p, b| net.send(now, To::Server(p), b));
        while let Some(f) = self.client.take_finished() {
            self.done.push(f);
        }
    }
}

fn key() -> StreamKey {
    StreamKey { stream: 1, token: TOKEN }
}

fn params(chunk: usize) -> Params {
    Params { chunk, retries: 10 }
}

/// What a workload did: packets sent (by client and servers), virtual time, and the packets
/// the same operations take on a network without faults.
#[derive(Debug)]
struct Run {
    packets: u64,
    time_ns: u64,
    ideal: u64,
}

/// The pages' lengths: every page whole, or pages shorter than the stream's page size (as a
/// compressing client sends them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lengths {
    Whole,
    Short,
}

/// Lengths at the chunks' edges, then any from 1 byte to a whole page.
const EDGES: [usize; 9] = [1, 100, MAX_CHUNK, MAX_CHUNK + 1, 2048, 2 * MAX_CHUNK, 2843, 4095, 4096];

impl Lengths {
    fn pick(self, r: &mut Rng, i: u64) -> usize {
        match self {
            Lengths::Whole => PAGE,
            Lengths::Short => match EDGES.get(i as usize) {
                Some(&n) => n,
                None => 1 + r.below(PAGE as u64) as usize,
            },
        }
    }
}

/// The workload with whole pages: see [`workload_of`].
fn workload(seed: u64, faults: Faults, pages: u64, chunk: usize, server_chunk: usize) -> Run {
    let run = workload_of(seed, faults, pages, chunk, server_chunk, Lengths::Whole);
    assert_eq!(run.ideal, ideal_packets(pages, chunk, server_chunk));
    run
}

/// The workload: `pages` pages of random contents (and lengths, with [`Lengths::Short`])
/// written, half of them exchanged (a new version written, another page read), a few freed,
/// every page read back; each result compared with a model, lengths included. Panics on any
/// lost or corrupted page.
fn workload_of(
    seed: u64,
    faults: Faults,
    pages: u64,
    chunk: usize,
    server_chunk: usize,
    lengths: Lengths,
) -> Run {
    let mut w = World::new(seed, faults, 1, server_chunk);
    let mut r = Rng::new(seed ^ 0xdead);
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let limit = 60_000_000_000;
    let (out, back) =
        (|n: usize| n.div_ceil(chunk) as u64, |n: usize| n.div_ceil(server_chunk) as u64);
    let mut ideal = 0;

    // Write every page.
    let mut writes = Vec::new();
    for vpn in 0..pages {
        let len = lengths.pick(&mut r, vpn);
        let page = r.bytes(len);
        ideal += out(len) + 1;
        model.insert(vpn, page.clone());
        let req = w.client.next_request();
        writes.push((0, Transfer::write(key(), req, vpn, page, params(chunk)).unwrap()));
    }
    for f in w.run_ops(writes, 16, limit) {
        assert_eq!(f.transfer.outcome(), Some(Outcome::Done), "write of {}", f.transfer.vpn());
        assert!(f.transfer.write_acked());
    }

    // Exchange: write a new version of page i, read page pages-1-i.
    let mut exchanges = Vec::new();
    for vpn in 0..pages / 2 {
        let len = lengths.pick(&mut r, pages / 2 - 1 - vpn);
        let page = r.bytes(len);
        let req = w.client.next_request();
        let read = pages - 1 - vpn;
        ideal += 1 + out(len) + back(model[&read].len()) + 1;
        exchanges.push((
            0,
            Transfer::exchange(key(), req, vpn, page.clone(), read, PAGE as u32, params(chunk))
                .unwrap(),
        ));
        model.insert(vpn, page);
    }
    for f in w.run_ops(exchanges, 16, limit) {
        let t = &f.transfer;
        assert_eq!(t.outcome(), Some(Outcome::Done), "exchange of {}", t.vpn());
        assert!(t.write_acked());
        assert!(
            t.page() == model[&(pages - 1 - t.vpn())],
            "exchange read of {}",
            pages - 1 - t.vpn()
        );
    }

    // Free every seventh page.
    let mut frees = Vec::new();
    for vpn in (0..pages).step_by(7) {
        let req = w.client.next_request();
        frees.push((0, Transfer::free(key(), req, vpn, params(chunk)).unwrap()));
        model.remove(&vpn);
        ideal += 2;
    }
    for f in w.run_ops(frees, 16, limit) {
        assert_eq!(f.transfer.outcome(), Some(Outcome::Done), "free of {}", f.transfer.vpn());
    }

    // Read everything back.
    let mut reads = Vec::new();
    for vpn in 0..pages {
        let req = w.client.next_request();
        reads.push((0, Transfer::read(key(), req, vpn, PAGE as u32, params(chunk)).unwrap()));
        ideal += model.get(&vpn).map_or(2, |p| 1 + back(p.len()) + 1);
    }
    for f in w.run_ops(reads, 16, limit) {
        let t = &f.transfer;
        match model.get(&t.vpn()) {
            Some(page) => {
                assert_eq!(t.outcome(), Some(Outcome::Done), "read of {}", t.vpn());
                assert!(t.page() == &page[..], "page {} corrupted", t.vpn());
            }
            None => {
                assert_eq!(t.outcome(), Some(Outcome::Failed(Code::NotHeld)), "freed {}", t.vpn())
            }
        }
    }
    // The server's memory holds exactly the model.
    let store = &w.servers[0].store;
    assert_eq!(store.pages.len(), model.len());
    for (vpn, page) in &model {
        assert!(store.pages[&(1, *vpn)] == *page, "stored page {vpn}");
    }
    if std::env::var("RPP_SIM_DEBUG").is_ok() {
        let mut h: BTreeMap<String, u64> = BTreeMap::new();
        for (to, b) in &w.net.log {
            let op = rpp::wire::decode(b).unwrap().message.op();
            *h.entry(format!("{to:?} {}", op.name()).replace(|c: char| c.is_ascii_digit(), ""))
                .or_default() += 1;
        }
        println!("{h:?} client {:?} server {:?}", w.client.stats(), w.servers[0].data.stats());
    }
    Run { packets: w.net.sent, time_ns: w.now, ideal }
}

/// Packets of the workload without faults: a write is its chunks and one ACK, a read its
/// request, chunks and ACK, an exchange its request, both pages' chunks and one ACK, a free
/// the request and its ACK.
fn ideal_packets(pages: u64, chunk: usize, server_chunk: usize) -> u64 {
    let out = PAGE.div_ceil(chunk) as u64;
    let back = PAGE.div_ceil(server_chunk) as u64;
    let frees = pages.div_ceil(7);
    // A read of a freed page is its request and a NACK.
    pages * (out + 1)
        + pages / 2 * (1 + out + back + 1)
        + frees * 2
        + (pages - frees) * (1 + back + 1)
        + frees * 2
}

#[test]
fn clean_network_costs_the_ideal_packets() {
    let run = workload(1, CLEAN, 64, MAX_CHUNK, MAX_CHUNK);
    assert_eq!(run.packets, ideal_packets(64, MAX_CHUNK, MAX_CHUNK), "{run:?}");
    let run = workload(1, CLEAN, 64, 512, 1000);
    assert_eq!(run.packets, ideal_packets(64, 512, 1000), "{run:?}");
}

/// The faults together at 10% each, and reordering; several seeds; the packets at most twice
/// the ideal (a packet is lost or corrupted one time in five, and the reordering makes the
/// receiver of a page's last chunk NACK chunks that are only late) and at most 1 s of
/// virtual time.
#[test]
fn pages_intact_under_loss_duplication_reordering_and_corruption() {
    let faults = Faults { loss: 0.1, dup: 0.1, corrupt: 0.1, delay_ns: 50_000, jitter_ns: 200_000 };
    for seed in 1..=4 {
        let run = workload(seed, faults, 96, MAX_CHUNK, MAX_CHUNK);
        let ideal = ideal_packets(96, MAX_CHUNK, MAX_CHUNK);
        println!("seed {seed}: {run:?}, ideal {ideal} packets");
        assert!(run.packets <= ideal * 2, "seed {seed}: {run:?}, ideal {ideal}");
        assert!(run.time_ns <= 1_000_000_000, "seed {seed}: {run:?}");
    }
}

/// The same with small chunks (8 per page out, 5 back), so that NACK bitmaps name several;
/// the same bounds.
#[test]
fn pages_intact_under_faults_with_small_chunks() {
    let faults = Faults { loss: 0.1, dup: 0.1, corrupt: 0.1, delay_ns: 50_000, jitter_ns: 200_000 };
    for seed in 11..=12 {
        let run = workload(seed, faults, 64, 512, 1000);
        let ideal = ideal_packets(64, 512, 1000);
        println!("seed {seed}: {run:?}, ideal {ideal} packets");
        assert!(run.packets <= ideal * 2, "seed {seed}: {run:?}, ideal {ideal}");
        assert!(run.time_ns <= 1_000_000_000, "seed {seed}: {run:?}");
    }
}

/// Each fault alone at 10% (reordering: a jitter four times the delay); at most 1.5 times
/// the ideal packets and 1 s of virtual time.
#[test]
fn pages_intact_under_each_fault_alone() {
    let cases = [
        ("loss", Faults { loss: 0.1, ..CLEAN }),
        ("duplication", Faults { dup: 0.1, ..CLEAN }),
        ("corruption", Faults { corrupt: 0.1, ..CLEAN }),
        ("reordering", Faults { jitter_ns: 200_000, ..CLEAN }),
    ];
    for (name, faults) in cases {
        let run = workload(21, faults, 64, MAX_CHUNK, MAX_CHUNK);
        let ideal = ideal_packets(64, MAX_CHUNK, MAX_CHUNK);
        println!("{name}: {run:?}, ideal {ideal} packets");
        assert!(run.packets <= ideal * 3 / 2, "{name}: {run:?}, ideal {ideal}");
        assert!(run.time_ns <= 1_000_000_000, "{name}: {run:?}");
    }
}

#[test]
fn short_pages_cost_their_chunks_on_a_clean_network() {
    let run = workload_of(2, CLEAN, 64, MAX_CHUNK, MAX_CHUNK, Lengths::Short);
    assert_eq!(run.packets, run.ideal, "{run:?}");
    let whole = workload(2, CLEAN, 64, MAX_CHUNK, MAX_CHUNK);
    assert!(run.ideal < whole.ideal, "{run:?} against {whole:?}");
    let run = workload_of(2, CLEAN, 64, 512, 1000, Lengths::Short);
    assert_eq!(run.packets, run.ideal, "{run:?}");
}

/// Short pages (compressed ones: 1 byte to a whole page, the chunks' edges first) under each
/// fault alone and all together, with large and small chunks: every page back at its length
/// and contents, within twice the ideal packets and 1 s of virtual time.
#[test]
fn short_pages_intact_under_loss_duplication_and_reordering() {
    let all = Faults { loss: 0.1, dup: 0.1, corrupt: 0.1, delay_ns: 50_000, jitter_ns: 200_000 };
    let cases = [
        ("loss", Faults { loss: 0.1, ..CLEAN }),
        ("duplication", Faults { dup: 0.1, ..CLEAN }),
        ("reordering", Faults { jitter_ns: 200_000, ..CLEAN }),
        ("all", all),
    ];
    for (name, faults) in cases {
        for (seed, chunk, server_chunk) in [(31, MAX_CHUNK, MAX_CHUNK), (32, 512, 1000)] {
            let run = workload_of(seed, faults, 64, chunk, server_chunk, Lengths::Short);
            println!("{name}, chunks {chunk}/{server_chunk}: {run:?}");
            assert!(run.packets <= run.ideal * 2, "{name}: {run:?}");
            assert!(run.time_ns <= 1_000_000_000, "{name}: {run:?}");
        }
    }
}

/// Mirroring: every page written to two servers at once (two operations in flight per page),
/// under the faults together; then every page read back from each server and compared.
#[test]
fn mirrored_writes_reach_both_servers() {
    let faults = Faults { loss: 0.1, dup: 0.1, corrupt: 0.1, delay_ns: 50_000, jitter_ns: 200_000 };
    let mut w = World::new(31, faults, 2, MAX_CHUNK);
    let mut r = Rng::new(32);
    let limit = 1_000_000_000;
    let pages: Vec<Vec<u8>> = (0..48).map(|_| r.bytes(PAGE)).collect();
    let mut writes = Vec::new();
    for (vpn, page) in pages.iter().enumerate() {
        for server in 0..2 {
            let req = w.client.next_request();
            let t = Transfer::write(key(), req, vpn as u64, page.clone(), params(MAX_CHUNK));
            writes.push((server, t.unwrap()));
        }
    }
    for f in w.run_ops(writes, 16, limit) {
        assert_eq!(f.transfer.outcome(), Some(Outcome::Done));
    }
    for server in 0..2 {
        let mut reads = Vec::new();
        for vpn in 0..pages.len() as u64 {
            let req = w.client.next_request();
            reads.push((
                server,
                Transfer::read(key(), req, vpn, PAGE as u32, params(MAX_CHUNK)).unwrap(),
            ));
        }
        for f in w.run_ops(reads, 16, limit) {
            assert_eq!(f.transfer.outcome(), Some(Outcome::Done));
            assert!(f.transfer.page() == pages[f.transfer.vpn() as usize], "server {server}");
        }
        assert_eq!(w.servers[server as usize].store.pages.len(), pages.len());
    }
}

/// 100% loss: every kind of operation ends unreachable, after exactly `retries` repeats,
/// at the instant the backed-off timeouts add up to (no sooner, no later).
#[test]
fn total_loss_is_unreachable_in_bounded_time() {
    let mut w = World::new(41, Faults { loss: 1.0, ..CLEAN }, 1, MAX_CHUNK);
    let p = params(MAX_CHUNK);
    let page = vec![5u8; PAGE];
    let ops = vec![
        (0, Transfer::write(key(), 1, 1, page.clone(), p).unwrap()),
        (0, Transfer::read(key(), 2, 2, PAGE as u32, p).unwrap()),
        (0, Transfer::exchange(key(), 3, 3, page, 4, PAGE as u32, p).unwrap()),
        (0, Transfer::free(key(), 4, 5, p).unwrap()),
    ];
    // RttConfig::LAN: 100 ms before any sample, doubled per timeout up to 2 s; 11 timeouts.
    assert_eq!(p.retries, 10);
    let give_up: u64 = [100, 200, 400, 800, 1600, 2000, 2000, 2000, 2000, 2000, 2000]
        .iter()
        .map(|ms| ms * 1_000_000)
        .sum();
    let done = w.run_ops(ops, 4, give_up);
    for f in &done {
        assert_eq!(f.transfer.outcome(), Some(Outcome::Unreachable), "{:?}", f.transfer);
        assert_eq!(f.transfer.stats().timeouts, p.retries + 1);
    }
    assert_eq!(w.now, give_up);
    // First packets (3 chunks; a request; a request and 3 chunks; a request), then one repeat
    // per timeout but the last.
    let first = 3 + 1 + 4 + 1;
    assert_eq!(w.net.sent, first + 4 * p.retries as u64);
    assert!(w.servers[0].store.pages.is_empty());
}

/// A hostile client that knows another client's stream id but not its token reads nothing of
/// its pages and overwrites or frees none of them; with its own stream it sees only its own
/// pages.
#[test]
fn a_wrong_token_never_reads_or_overwrites_another_streams_page() {
    let mut w = World::new(51, CLEAN, 1, MAX_CHUNK);
    w.servers[0].data.open_stream(2, 0x0bad, PAGE as u32);
    let mut r = Rng::new(52);
    let p = params(MAX_CHUNK);
    let pages: Vec<Vec<u8>> = (0..4).map(|_| r.bytes(PAGE)).collect();
    let writes = (0..4)
        .map(|v| {
            (0, Transfer::write(key(), 100 + v as u32, v, pages[v as usize].clone(), p).unwrap())
        })
        .collect();
    for f in w.run_ops(writes, 4, 1_000_000_000) {
        assert_eq!(f.transfer.outcome(), Some(Outcome::Done));
    }
    let puts = w.servers[0].store.puts;

    let forged = StreamKey { stream: 1, token: TOKEN ^ 1 };
    let own = StreamKey { stream: 2, token: 0x0bad };
    let junk = vec![0xee; PAGE];
    let hostile = vec![
        (0, Transfer::read(forged, 200, 0, PAGE as u32, p).unwrap()),
        (0, Transfer::write(forged, 201, 1, junk.clone(), p).unwrap()),
        (0, Transfer::exchange(forged, 202, 2, junk.clone(), 3, PAGE as u32, p).unwrap()),
        (0, Transfer::free(forged, 203, 3, p).unwrap()),
        (0, Transfer::offload(forged, 204, 0, junk.clone(), p).unwrap()),
        (0, Transfer::read(own, 205, 0, PAGE as u32, p).unwrap()),
        (0, Transfer::write(own, 206, 1, junk.clone(), p).unwrap()),
    ];
    let done = w.run_ops(hostile, 8, 1_000_000_000);
    for f in &done[..5] {
        assert_eq!(f.transfer.outcome(), Some(Outcome::Failed(Code::BadToken)), "{:?}", f.transfer);
    }
    assert_eq!(done[5].transfer.outcome(), Some(Outcome::Failed(Code::NotHeld)));
    assert_eq!(done[6].transfer.outcome(), Some(Outcome::Done));
    assert_eq!(w.servers[0].store.puts, puts + 1, "only the hostile's own page stored");
    // A forged NACK asking for every chunk of a page and a forged write probe get no data.
    let mut stolen = Vec::new();
    for message in [
        Message::Nack { vpn: 0, code: Code::Missing, missing: ChunkSet::first(3) },
        Message::Write { vpn: 0, page_size: PAGE as u32, tot: 3 },
        Message::Exchange { vpn: 9, page_size: PAGE as u32, tot: 3, read_vpn: 0 },
        Message::Read { vpn: 0, page_size: PAGE as u32 },
    ] {
        let header = Header { stream: 1, token: 0, request: 300 };
        let mut buf = [0u8; 1472];
        let n = encode(&Packet { header, message }, &mut buf).unwrap();
        let s = &mut w.servers[0];
        s.data.on_packet(&mut s.store, &buf[..n], &mut |b| {
            stolen.push(decode(b).unwrap().message.op())
        });
    }
    assert_eq!(stolen, [Op::Nack; 4], "refusals only");
    let s = w.servers[0].data.stats();
    // Every forged packet: read 1, write 3 chunks, exchange 1 + 3, free 1, offload 3, and the 4.
    assert_eq!(s.bad_token, 1 + 3 + 4 + 1 + 3 + 4, "{s:?}");
    // The victim's pages are intact.
    let reads = (0..4)
        .map(|v| (0, Transfer::read(key(), 400 + v as u32, v, PAGE as u32, p).unwrap()))
        .collect();
    for f in w.run_ops(reads, 4, 2_000_000_000) {
        assert_eq!(f.transfer.outcome(), Some(Outcome::Done));
        assert!(f.transfer.page() == pages[f.transfer.vpn() as usize]);
    }
}
