//! Host tests, end to end: `net_client` sessions against this loop over in-memory channels,
//! two stacks joined by `net_interface::mem::pair` (stack A serves two clients, stack B one or
//! two), every NIC's interrupt an event count of the frames its wire delivered to it.

extern crate std;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::fmt;
use core::sync::atomic::AtomicU64;
use std::format;

use net_client::{Session, Transport};
use net_interface::mem::{self, Direction, MemNic, Wire};
use net_interface::protocol::{ACCOUNT_WORDS, RX_SLOT};
use net_interface::{
    Endpoint, Ipv4Addr, LoanSend, MacAddr, NetContract, NetError, Request, SessionInfo,
    StreamAccounts,
};
use net_stack::{Area, Config, Instant, LinkModel, NetStack};

use crate::{
    Channels, Client, DataArea, Lent, NetDomain, NetServer, SendError, ServeOptions, publish, serve,
};

const MS: u64 = 1_000_000;
const A: Ipv4Addr = Ipv4Addr([10, 0, 0, 1]);
const B: Ipv4Addr = Ipv4Addr([10, 0, 0, 2]);
/// The send bytes before the receive slots.
const TX: u32 = 2048;
const SLOTS: usize = 4;

/// One client's channel pair: requests one way, messages the other.
#[derive(Default)]
struct Chan {
    req: VecDeque<Vec<u8>>,
    resp: VecDeque<Vec<u8>>,
    /// How many messages the message ring holds.
    room: usize,
    /// The client's domain died.
    dead: bool,
}

/// The driver's end of a [`Chan`].
struct ServerEnd(Rc<RefCell<Chan>>);

impl Channels for ServerEnd {
    type Error = ();

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ()> {
        Ok(self.0.borrow_mut().req.pop_front().map(|m| {
            buf[..m.len()].copy_from_slice(&m);
            m.len()
        }))
    }

    fn sender_gone(&self) -> bool {
        self.0.borrow().dead
    }

    fn try_send(&mut self, msg: &[u8]) -> Result<bool, SendError<()>> {
        let mut c = self.0.borrow_mut();
        if c.dead {
            return Err(SendError::Closed);
        }
        if c.resp.len() >= c.room {
            return Ok(false);
        }
        c.resp.push_back(msg.to_vec());
        Ok(true)
    }
}

/// A client's data area in the driver: its send bytes, its slots (made at each Open), its
/// accounts' words.
struct HostArea {
    tx: Vec<u8>,
    words: &'static [AtomicU64],
}

impl DataArea for HostArea {
    type Rx = Vec<u8>;

    fn area(&self) -> Area {
        let len = u64::from(TX) + (SLOTS * RX_SLOT) as u64;
        Area { base: 0x4000_0000, len, rx_offset: TX }
    }

    fn tx(&self) -> &[u8] {
        &self.tx
    }

    fn rx(&self) -> Vec<u8> {
        vec![0; SLOTS * RX_SLOT]
    }

    fn accounts(&self) -> Option<&[AtomicU64]> {
        Some(self.words)
    }
}

fn words() -> &'static [AtomicU64] {
    Box::leak((0..ACCOUNT_WORDS).map(|_| AtomicU64::new(0)).collect::<Vec<_>>().into_boxed_slice())
}

/// A driver domain: the shared clock, its NIC's interrupt (frames delivered to it), a console.
struct Dom {
    now: Rc<Cell<u64>>,
    wire: Wire,
    toward: Direction,
    lines: Vec<String>,
    acks: u64,
    blocks: u64,
    /// A client whose domain dies while this domain blocks with no instant to wake at.
    dies_in_wait: Option<Rc<RefCell<Chan>>>,
    /// The kernel's loans to this domain: handle, lender, the frame's device address.
    loans: Vec<(u64, u32, u64)>,
    /// The loans returned, in order.
    returned: Vec<u64>,
}

impl NetDomain for Dom {
    fn now_ns(&self) -> u64 {
        self.now.get()
    }
    fn interrupts(&self) -> u64 {
        self.wire.counts(self.toward).delivered
    }
    fn ack_interrupt(&mut self) {
        self.acks += 1;
    }
    fn block(&mut self, until_ns: u64) {
        self.blocks += 1;
        assert!(until_ns > self.now.get(), "blocked until the past: polling");
        assert!(self.blocks < 100, "the loop does not end");
        match &self.dies_in_wait {
            // Nothing to wait for but the client: it dies meanwhile.
            Some(chan) if until_ns == u64::MAX => chan.borrow_mut().dead = true,
            _ => {
                assert!(until_ns != u64::MAX, "blocked forever with a client waiting");
                self.now.set(until_ns);
            }
        }
    }
    fn print(&mut self, line: fmt::Arguments<'_>) {
        self.lines.push(format!("{line}"));
    }
    fn loan_address(&mut self, lender: u32, loan: u64, len: u32) -> Result<u64, NetError> {
        match self.loans.iter().find(|l| l.0 == loan && l.1 == lender) {
            Some(l) if len <= 4096 => Ok(l.2),
            _ => Err(NetError::BadLoan),
        }
    }
    fn loan_return(&mut self, loan: u64) {
        let i = self.loans.iter().position(|l| l.0 == loan).expect("a loan returned twice");
        self.loans.remove(i);
        self.returned.push(loan);
    }
}

type Server = NetServer<MemNic, ServerEnd, HostArea>;

/// Two driver domains and their servers on one wire, one clock.
struct World {
    servers: Vec<Server>,
    doms: Vec<Dom>,
    now: Rc<Cell<u64>>,
    steps: u64,
    /// Times every server was idle and the clock jumped to the earliest instant one asked for.
    idle_jumps: u64,
}

impl World {
    /// One pass of each server; if none moved, the clock jumps to the earliest instant asked
    /// for (a server that asks for none and has a client waiting is a hang: the test fails).
    fn step(&mut self) {
        self.step_before(u64::MAX);
    }

    /// [`step`](Self::step) for a client that waits until `deadline`: if no server moved, the
    /// clock jumps to the earliest instant one asked for or to `deadline`, whichever is first.
    fn step_before(&mut self, deadline: u64) {
        let mut moved = false;
        let mut next: Option<u64> = None;
        for (s, d) in self.servers.iter_mut().zip(&mut self.doms) {
            let p = s.pass(d);
            moved |= p.moved;
            next = match (next, p.next_ns) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        self.steps += 1;
        assert!(self.steps < 200_000, "the servers never settle");
        if !moved {
            let t = match next {
                Some(t) => t.min(deadline),
                None if deadline != u64::MAX => deadline,
                None => panic!("a client waits and no server has anything to wait for"),
            };
            assert!(t > self.now.get(), "idle servers asked to be called in the past");
            self.now.set(t);
            self.idle_jumps += 1;
        }
    }
}

/// A client's end: its channels, and the world (to run the servers while it waits, and to
/// reach its data area in the driver).
struct HostTransport {
    world: Rc<RefCell<World>>,
    chan: Rc<RefCell<Chan>>,
    server: usize,
    client: usize,
}

impl Transport for HostTransport {
    fn send(&mut self, msg: &[u8]) -> Result<(), NetError> {
        self.chan.borrow_mut().req.push_back(msg.to_vec());
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, NetError> {
        loop {
            if let Some(m) = self.chan.borrow_mut().resp.pop_front() {
                buf[..m.len()].copy_from_slice(&m);
                return Ok(m.len());
            }
            let mut w = self.world.borrow_mut();
            if !w.servers[self.server].clients()[self.client].is_open() {
                return Err(NetError::Closed);
            }
            w.step();
        }
    }

    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> Result<Option<usize>, NetError> {
        loop {
            if let Some(m) = self.chan.borrow_mut().resp.pop_front() {
                buf[..m.len()].copy_from_slice(&m);
                return Ok(Some(m.len()));
            }
            let mut w = self.world.borrow_mut();
            if !w.servers[self.server].clients()[self.client].is_open() {
                return Err(NetError::Closed);
            }
            if w.now.get() >= deadline_ns {
                return Ok(None);
            }
            w.step_before(deadline_ns);
        }
    }

    fn write(&mut self, _info: &SessionInfo, offset: u64, bytes: &[u8]) {
        let mut w = self.world.borrow_mut();
        let area = &mut w.servers[self.server].clients_mut()[self.client].area;
        area.tx[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
    }

    fn read<R>(
        &mut self,
        info: &SessionInfo,
        offset: u64,
        len: u32,
        read: impl FnOnce(&[u8]) -> R,
    ) -> R {
        let w = self.world.borrow();
        let s = &w.servers[self.server];
        let id = s.clients()[self.client].session().client.expect("open");
        let rx = s.stack().rx_area(id).expect("open");
        let at = (offset - u64::from(info.rx_offset)) as usize;
        read(&rx[at..at + len as usize])
    }

    fn accounts(&mut self, _info: &SessionInfo) -> Option<StreamAccounts> {
        let w = self.world.borrow();
        net_client::accounts::read(w.servers[self.server].clients()[self.client].area.words)
    }
}

fn config(addr: Ipv4Addr) -> Config {
    Config { addr, prefix_len: 24, link: LinkModel::FAST_ETHERNET, tx_queue: 8, rx_budget: 64 }
}

fn contract() -> NetContract {
    NetContract { period_ns: 10 * MS, slice_ns: 2 * MS, extra: true, latency_ns: 0 }
}

/// Two stacks, A with clients `a` channels, B with `b`, each client's message ring holding
/// `room` messages: the world and each client's channels (A's first).
fn world(a: usize, b: usize, room: usize) -> (Rc<RefCell<World>>, Vec<Rc<RefCell<Chan>>>) {
    let (na, nb, wire) = mem::pair(MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]), 8, 64);
    let now = Rc::new(Cell::new(0));
    let mut chans = Vec::new();
    let mut clients = |n: usize, side: &str| {
        (0..n)
            .map(|i| {
                let chan = Rc::new(RefCell::new(Chan { room, ..Chan::default() }));
                chans.push(chan.clone());
                let area = HostArea { tx: vec![0; TX as usize], words: words() };
                Client::new(&format!("{side}{i}-req"), ServerEnd(chan), area, contract())
                    .with_lender(40 + i as u32)
            })
            .collect::<Vec<_>>()
    };
    let (ca, cb) = (clients(a, "a"), clients(b, "b"));
    let servers = vec![
        NetServer::new("net-a", NetStack::new(na, config(A), Instant(0)), ca),
        NetServer::new("net-b", NetStack::new(nb, config(B), Instant(0)), cb),
    ];
    let dom = |toward| Dom {
        now: now.clone(),
        wire: wire.clone(),
        toward,
        lines: Vec::new(),
        acks: 0,
        blocks: 0,
        dies_in_wait: None,
        loans: Vec::new(),
        returned: Vec::new(),
    };
    let doms = vec![dom(Direction::BtoA), dom(Direction::AtoB)];
    let w = World { servers, doms, now, steps: 0, idle_jumps: 0 };
    (Rc::new(RefCell::new(w)), chans)
}

fn session(
    w: &Rc<RefCell<World>>,
    chan: &Rc<RefCell<Chan>>,
    server: usize,
    client: usize,
) -> Session<HostTransport> {
    Session::new(HostTransport { world: w.clone(), chan: chan.clone(), server, client })
}

/// The payload of datagram `seq` of stream `stream`, `len` bytes.
fn payload(stream: u8, seq: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as usize * 31 + i * 7 + usize::from(stream) * 101) as u8).collect()
}

/// Receives one datagram: its sender and payload.
fn recv(s: &mut Session<HostTransport>) -> (Endpoint, Vec<u8>) {
    s.receive(|d| (d.from, d.payload.to_vec())).expect("receive")
}

/// Runs the servers until client `client` of server `server` has received `n` datagrams.
fn run_until_received(w: &Rc<RefCell<World>>, server: usize, client: usize, n: u64) {
    let received = |w: &World| {
        let s = &w.servers[server];
        let id = s.clients()[client].session().client.unwrap();
        s.stack().accounts(id).unwrap().packets_received
    };
    while received(&w.borrow()) < n {
        w.borrow_mut().step();
    }
}

fn at(addr: Ipv4Addr, port: u16) -> Endpoint {
    Endpoint { addr, port }
}

#[test]
fn two_clients_ping_pong_across_two_stacks_with_every_payload_checked() {
    // Rings of one message: B's echo client is sent more than that at once, so messages are
    // held and sent later, never lost.
    let (w, ch) = world(2, 1, 1);
    let mut a0 = session(&w, &ch[0], 0, 0);
    let mut a1 = session(&w, &ch[1], 0, 1);
    let mut b = session(&w, &ch[2], 1, 0);
    assert_eq!(b.open(7000).unwrap().local, at(B, 7000));
    let i0 = a0.open(5000).unwrap();
    let i1 = a1.open(0).unwrap();
    assert_eq!(i0.local, at(A, 5000));
    assert_eq!(i1.local.addr, A);
    assert_eq!((i0.rx_offset, i0.rx_slots as usize), (TX, SLOTS));
    let mut sent = [(0u64, 0u64); 2];
    for round in 0..40u32 {
        let len = if round % 2 == 0 { 64 } else { 1472 };
        let p0 = payload(0, round, len);
        let p1 = payload(1, round, len);
        a0.send(at(B, 7000), &p0).unwrap();
        a1.send(at(B, 7000), &p1).unwrap();
        for (i, p) in [&p0, &p1].into_iter().enumerate() {
            sent[i].0 += 1;
            sent[i].1 += p.len() as u64;
        }
        // Both reach B before it reads (its ring holds one message: the other is held), and
        // B echoes both, in the order they came.
        run_until_received(&w, 1, 0, 2 * u64::from(round + 1));
        for _ in 0..2 {
            let (from, p) = recv(&mut b);
            let expect = if from == i0.local { &p0 } else { &p1 };
            assert!(from == i0.local || from == i1.local, "from {from:?}");
            assert_eq!(&p, expect, "round {round}: payload at B");
            b.send(from, &p).unwrap();
        }
        assert_eq!(recv(&mut a0), (at(B, 7000), p0), "round {round}: echo to a0");
        assert_eq!(recv(&mut a1), (at(B, 7000), p1), "round {round}: echo to a1");
    }
    // The accounts each client reads are the server's counts, and count what was sent.
    for (i, s) in [&mut a0, &mut a1].into_iter().enumerate() {
        let read = s.accounts().expect("accounts published");
        let wb = w.borrow();
        let server = &wb.servers[0];
        let id = server.clients()[i].session().client.unwrap();
        assert_eq!(read, server.stack().accounts(id).unwrap(), "client {i}");
        assert_eq!((read.packets_sent, read.bytes_sent), sent[i], "client {i}");
        assert_eq!((read.packets_received, read.bytes_received), sent[i], "client {i}");
        assert_eq!(read.dropped_rx_full + read.dropped_tx_full + read.dropped_tx_error, 0);
    }
    let rb = b.accounts().unwrap();
    assert_eq!(rb.packets_received, 80);
    assert_eq!(rb.packets_sent, 80);
    {
        let wb = w.borrow();
        assert!(wb.servers[1].stats().held > 0, "no message was ever held");
        assert!(wb.doms.iter().all(|d| d.acks > 0), "no interrupt was taken");
        assert_eq!(wb.servers[0].stack().drops().total(), 0);
        assert_eq!(wb.servers[1].stack().drops().total(), 0);
    }
    for s in [&mut a0, &mut a1, &mut b] {
        s.close().unwrap();
    }
    assert_eq!(a0.send(at(B, 7000), &[1]), Err(NetError::UnknownClient));
}

#[test]
fn a_receive_with_a_deadline_waits_until_it_and_takes_a_datagram_that_comes_before() {
    let (w, ch) = world(1, 1, 4);
    let mut a = session(&w, &ch[0], 0, 0);
    let mut b = session(&w, &ch[1], 1, 0);
    a.open(5000).unwrap();
    b.open(7000).unwrap();
    let now = || w.borrow().now.get();
    // Nothing comes: the wait lasts until the deadline, not beyond.
    let deadline = now() + 5 * MS;
    assert_eq!(b.receive_until(deadline, |d| d.payload.to_vec()), Ok(None));
    assert_eq!(now(), deadline);
    // A datagram sent meanwhile comes before the next deadline, and the wait ends with it.
    let p = payload(0, 1, 64);
    a.send(at(B, 7000), &p).unwrap();
    let deadline = now() + 50 * MS;
    let got = b.receive_until(deadline, |d| (d.from, d.payload.to_vec())).unwrap();
    assert_eq!(got, Some((at(A, 5000), p)));
    assert!(now() < deadline, "the wait outlasted the datagram: {} of {deadline}", now());
    // A deadline already past returns at once.
    assert_eq!(a.receive_until(0, |_| ()), Ok(None));
}

#[test]
fn a_client_that_dies_mid_stream_loses_only_its_own_datagrams() {
    let (w, ch) = world(2, 2, 8);
    let mut a0 = session(&w, &ch[0], 0, 0);
    let mut a1 = session(&w, &ch[1], 0, 1);
    let mut b0 = session(&w, &ch[2], 1, 0);
    let mut b1 = session(&w, &ch[3], 1, 1);
    b0.open(7000).unwrap();
    b1.open(7001).unwrap();
    a0.open(5000).unwrap();
    a1.open(5001).unwrap();
    // a1 gets two datagrams it never reads, then queues a burst and dies.
    b1.send(at(A, 5001), &payload(9, 0, 100)).unwrap();
    b1.send(at(A, 5001), &payload(9, 1, 100)).unwrap();
    run_until_received(&w, 0, 1, 2);
    let mut a1_sent = 0u64;
    for seq in 0..8 {
        match a1.send(at(B, 7001), &payload(1, seq, 1472)) {
            Ok(()) => a1_sent += 1,
            Err(e) => panic!("a1's send {seq}: {e}"),
        }
    }
    ch[1].borrow_mut().dead = true;
    drop(a1);
    // a0's stream goes on: every datagram of it arrives and comes back intact.
    for seq in 0..20 {
        let p = payload(0, seq, if seq % 2 == 0 { 64 } else { 1472 });
        a0.send(at(B, 7000), &p).unwrap();
        let (from, got) = recv(&mut b0);
        assert_eq!(got, p);
        b0.send(from, &got).unwrap();
        assert_eq!(recv(&mut a0).1, p);
    }
    let wb = w.borrow();
    let server = &wb.servers[0];
    assert!(!server.clients()[1].is_open());
    let last = net_client::accounts::read(server.clients()[1].area.words).unwrap();
    let stats = server.stats();
    assert_eq!(stats.clients_gone, 1);
    assert!(last.dropped_tx_closed > 0, "a1 died with nothing queued: not mid-stream");
    assert_eq!(last.dropped_rx_closed, 2, "its two unread datagrams");
    assert_eq!((stats.dropped_tx_closed, stats.dropped_rx_closed), (last.dropped_tx_closed, 2));
    assert_eq!(last.packets_sent + last.dropped_tx_closed, a1_sent);
    // Exactly what a1 had sent before it died reached B.
    let b1_id = wb.servers[1].clients()[1].session().client.unwrap();
    assert_eq!(wb.servers[1].stack().accounts(b1_id).unwrap().packets_received, last.packets_sent);
    // a0 lost nothing.
    let a0_id = server.clients()[0].session().client.unwrap();
    let acc = server.stack().accounts(a0_id).unwrap();
    assert_eq!((acc.packets_sent, acc.packets_received), (20, 20));
    assert_eq!(acc.dropped_tx_closed + acc.dropped_rx_full + acc.dropped_tx_full, 0);
    assert!(
        wb.doms[0].lines.iter().any(|l| l.contains("client a1-req gone")),
        "{:?}",
        wb.doms[0].lines
    );
}

#[test]
fn a_close_is_answered_once_the_clients_queued_datagrams_have_left() {
    let (w, ch) = world(1, 1, 8);
    let mut a0 = session(&w, &ch[0], 0, 0);
    let mut b0 = session(&w, &ch[1], 1, 0);
    b0.open(7000).unwrap();
    a0.open(5000).unwrap();
    // As many full frames as b0's receive slots hold queue behind the link model (each holds
    // it about 120 us); the Close comes at once, with most of them still queued.
    let sent: Vec<Vec<u8>> = (0..SLOTS as u32).map(|seq| payload(3, seq, 1472)).collect();
    for p in &sent {
        a0.send(at(B, 7000), p).unwrap();
    }
    let queued = {
        let wb = w.borrow();
        let id = wb.servers[0].clients()[0].session().client.unwrap();
        wb.servers[0].stack().unsent(id).unwrap()
    };
    assert!(queued, "nothing was queued when the Close came: the test shows nothing");
    a0.close().unwrap();
    // Every datagram left before the Close was answered: all arrive, in order, intact.
    for p in &sent {
        assert_eq!(&recv(&mut b0).1, p);
    }
    let wb = w.borrow();
    let last = net_client::accounts::read(wb.servers[0].clients()[0].area.words).unwrap();
    assert_eq!((last.packets_sent, last.dropped_tx_closed), (SLOTS as u64, 0));
    assert_eq!(wb.servers[0].stats().dropped_tx_closed, 0);
}

#[test]
fn a_request_with_bad_arguments_gets_its_error_and_changes_nothing() {
    let (w, ch) = world(2, 1, 8);
    let mut a0 = session(&w, &ch[0], 0, 0);
    let mut a1 = session(&w, &ch[1], 0, 1);
    let mut b = session(&w, &ch[2], 1, 0);
    b.open(7000).unwrap();
    // Before an Open: no endpoint.
    assert_eq!(
        a0.call(Request::send(0, at(B, 7000), 0, 8)).unwrap().status,
        Err(NetError::UnknownClient)
    );
    a0.open(5000).unwrap();
    assert_eq!(a1.open(5000), Err(NetError::PortInUse));
    a1.open(5001).unwrap();
    a0.send(at(B, 7000), &payload(0, 0, 64)).unwrap();
    let (from, p) = recv(&mut b);
    b.send(from, &p).unwrap();
    b.send(from, &p).unwrap();
    // a0 has two datagrams waiting; note everything before the bad requests.
    let state = |w: &Rc<RefCell<World>>| {
        let wb = w.borrow();
        let s = &wb.servers[0];
        let acc: Vec<_> = (0..2)
            .map(|i| s.stack().accounts(s.clients()[i].session().client.unwrap()).unwrap())
            .collect();
        (acc, s.stack().drops(), wb.servers[1].stack().drops())
    };
    // Let both echoes arrive.
    run_until_received(&w, 0, 0, 2);
    let first = recv(&mut a0);
    assert_eq!(first.1, p);
    let before = state(&w);
    let info = a0.info().unwrap();
    let bad = [
        (Request::send(0, at(B, 7000), u64::from(TX) - 8, 64), NetError::OutsideDataArea),
        (Request::send(0, at(B, 7000), u64::MAX - 4, 8), NetError::OutsideDataArea),
        (Request::send(0, at(B, 0), 0, 8), NetError::BadAddress),
        (Request::send(0, at(Ipv4Addr([255; 4]), 7000), 0, 8), NetError::BadAddress),
        (Request::send(0, at(B, 7000), 0, 1473), NetError::TooLarge),
        (Request::release(0, u64::from(TX) + 1), NetError::OutsideDataArea),
        // A slot that is not held (a0's only held slot is the second echo's).
        (Request::release(0, u64::from(TX) + 3 * RX_SLOT as u64), NetError::OutsideDataArea),
        (Request::release(0, 0), NetError::OutsideDataArea),
        (Request::open(0, 6000), NetError::PortInUse),
    ];
    for (req, err) in bad {
        let r = a0.call(req).unwrap();
        assert_eq!(r.status, Err(err), "{req:?}");
        assert_eq!(r.info, SessionInfo::default());
    }
    // Bytes that are no request at all: Malformed, naming the id they carry.
    let mut junk = [0u8; 32];
    junk[..8].copy_from_slice(&77u64.to_le_bytes());
    junk[8] = 9;
    a0.transport().send(&junk).unwrap();
    a0.transport().send(&[1, 2, 3]).unwrap();
    let mut buf = [0u8; 64];
    for id in [77, 0] {
        let n = a0.transport().recv(&mut buf).unwrap();
        match net_interface::ServerMessage::decode(&buf[..n]).unwrap() {
            net_interface::ServerMessage::Response(r) => {
                assert_eq!((r.id, r.status), (id, Err(NetError::Malformed)));
            }
            m => panic!("{m:?}"),
        }
    }
    // Nothing else came and nothing changed: the second echo is still a0's to take.
    assert!(ch[0].borrow().resp.is_empty());
    assert_eq!(state(&w), before);
    assert_eq!(a0.info(), Some(info));
    assert_eq!(a0.waiting(), 1);
    assert_eq!(recv(&mut a0).1, p);
    let wb = w.borrow();
    assert_eq!(wb.servers[0].stats().rejected, 13);
}

#[test]
fn an_idle_server_blocks_with_no_deadline_and_ends_when_its_clients_are_gone() {
    let (w, ch) = world(1, 0, 8);
    let mut a = session(&w, &ch[0], 0, 0);
    a.open(5000).unwrap();
    let mut wb = w.borrow_mut();
    let World { servers, doms, .. } = &mut *wb;
    let server = servers.remove(0);
    let dom = &mut doms[0];
    dom.dies_in_wait = Some(ch[0].clone());
    let (blocks, now) = (dom.blocks, dom.now.get());
    assert_eq!(
        serve(server, dom, ServeOptions { end_when_clients_gone: true, die_after: None }),
        0
    );
    // Idle, with the client open and nothing due, the loop blocked with no deadline (`block`
    // asserts it is never asked to wait for the past), once; the client died meanwhile.
    assert!(ch[0].borrow().dead, "the loop never blocked without a deadline");
    assert_eq!(dom.blocks - blocks, 1);
    assert_eq!(dom.now.get(), now, "the loop woke on a timer while idle");
    assert!(dom.lines.iter().any(|l| l.contains("client a0-req gone")), "{:?}", dom.lines);
    assert!(dom.lines.iter().any(|l| l.contains("every client gone")), "{:?}", dom.lines);
}

/// Serves one client that opened its endpoint (one request answered) with `die_after`, until
/// it dies in the loop's first wait.
fn serve_one_open_client(die_after: Option<u64>) -> Vec<String> {
    let (w, ch) = world(1, 0, 8);
    let mut a = session(&w, &ch[0], 0, 0);
    a.open(5000).unwrap();
    let mut wb = w.borrow_mut();
    let World { servers, doms, .. } = &mut *wb;
    let server = servers.remove(0);
    assert_eq!(server.stats().requests, 1);
    let dom = &mut doms[0];
    dom.dies_in_wait = Some(ch[0].clone());
    let options = ServeOptions { end_when_clients_gone: true, die_after };
    assert_eq!(serve(server, dom, options), 0);
    dom.lines.clone()
}

#[test]
#[should_panic(expected = "the driver dies on purpose")]
fn a_driver_told_to_die_after_n_requests_dies_once_it_has_answered_them() {
    serve_one_open_client(Some(1));
}

#[test]
fn a_driver_told_to_die_after_more_requests_serves_to_the_end() {
    let lines = serve_one_open_client(Some(2));
    assert!(!lines.iter().any(|l| l.contains("dying")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("no port 0, slots full 0")), "{lines:?}");
}

#[test]
fn published_accounts_carry_an_even_sequence_number() {
    let words = words();
    let a = StreamAccounts { packets_sent: 3, bytes_sent: 99, ..StreamAccounts::default() };
    publish(words, &a);
    publish(words, &a);
    assert_eq!(words[0].load(core::sync::atomic::Ordering::Relaxed), 4);
    assert_eq!(net_client::accounts::read(words), Some(a));
    words[0].store(5, core::sync::atomic::Ordering::Relaxed);
    assert_eq!(net_client::accounts::read(words), None, "read while being written");
}

#[test]
fn lent_slots_come_back_when_the_stack_drops_them() {
    let mem: &'static mut [u8] = Box::leak(vec![0u8; 2 * RX_SLOT].into_boxed_slice());
    let home: &'static Cell<Option<&'static mut [u8]>> = Box::leak(Box::new(Cell::new(Some(mem))));
    let mut first = Lent::take(home);
    first.as_mut()[0] = 7;
    assert_eq!(Lent::take(home).as_ref().len(), 0, "lent twice at once");
    drop(first);
    let again = Lent::take(home);
    assert_eq!((again.as_ref().len(), again.as_ref()[0]), (2 * RX_SLOT, 7));
}

#[test]
fn a_contracted_stream_prints_its_periods_and_an_open_beyond_the_link_is_refused() {
    let (w, ch) = world(2, 1, 4);
    {
        let mut wb = w.borrow_mut();
        let s = &mut wb.servers[0];
        let own = |slice_ms| NetContract {
            period_ns: 10 * MS,
            slice_ns: slice_ms * MS,
            extra: false,
            latency_ns: 0,
        };
        s.clients_mut()[0].contract = own(2);
        s.clients_mut()[0].records = true;
        s.clients_mut()[1].contract = own(8);
        s.stack_mut().record_periods(true);
    }
    let mut a0 = session(&w, &ch[0], 0, 0);
    let mut a1 = session(&w, &ch[1], 0, 1);
    let mut b = session(&w, &ch[2], 1, 0);
    b.open(7000).unwrap();
    a0.open(5000).unwrap();
    // 2 ms and 8 ms of every 10: more than the 90% of the link.
    assert_eq!(a1.open(5001).err(), Some(NetError::NotAdmitted));
    let refused = "net-a: client a1-req: its link-time contract (8000 us every 10000 us, extra \
                   false) does not fit beside the open streams' (or is invalid): Open refused";
    assert!(
        w.borrow().doms[0].lines.iter().any(|l| l == refused),
        "{:?}",
        w.borrow().doms[0].lines
    );
    // 60 frames of 1,514 bytes at 2 ms of every 10 ms: 16 a period, four periods.
    let mut seq = 0;
    while seq < 60 {
        match a0.send(at(B, 7000), &payload(0, seq, 1472)) {
            Ok(()) => seq += 1,
            Err(NetError::Busy) => w.borrow_mut().step(),
            Err(e) => panic!("{e:?}"),
        }
    }
    // Until the last is sent and the servers have nothing left to do (B's four slots
    // overflow: it does not read).
    loop {
        let mut guard = w.borrow_mut();
        let wb = &mut *guard;
        let (mut moved, mut next) = (false, u64::MAX);
        for (s, d) in wb.servers.iter_mut().zip(&mut wb.doms) {
            let p = s.pass(d);
            moved |= p.moved;
            next = next.min(p.next_ns.unwrap_or(u64::MAX));
        }
        if !moved {
            if next == u64::MAX {
                break;
            }
            wb.now.set(next);
        }
    }
    let lines = w.borrow().doms[0].lines.clone();
    let periods: Vec<_> = lines.iter().filter(|l| l.starts_with("net period: ")).collect();
    assert!(periods.len() >= 3, "{lines:?}");
    let frame = LinkModel::FAST_ETHERNET.frame_ns(1514);
    for l in &periods {
        assert!(l.starts_with("net period: stream=a0 start="), "{l}");
        let field = |k: &str| -> u64 {
            let v = l.split(' ').find_map(|f| f.strip_prefix(k)).unwrap();
            v.parse().unwrap()
        };
        let (start, end, g) = (field("start="), field("end="), field("guaranteed="));
        assert_eq!((end - start, field("extra=")), (10 * MS, 0), "{l}");
        assert!(g <= 2 * MS, "{l}");
    }
    // Two full periods of 16 frames each.
    let full = periods.iter().filter(|l| l.contains(&format!("guaranteed={} ", 16 * frame)));
    assert!(full.count() >= 2, "{periods:?}");
}

/// A page lent by client a0 (domain 40) to driver A as loan `loan` at device address `addr`.
fn lend_page(w: &Rc<RefCell<World>>, loan: u64, addr: u64) -> Vec<u8> {
    let page: Vec<u8> = (0..4096).map(|i| (i * 29 + loan as usize) as u8).collect();
    let mut w = w.borrow_mut();
    w.servers[0].stack_mut().nic_mut().set_memory(addr, &page);
    w.doms[0].loans.push((loan, 40, addr));
    page
}

/// Runs the servers until driver A holds no loan (a hang fails in `World::step`).
fn step_until_returned(w: &Rc<RefCell<World>>) {
    while !w.borrow().doms[0].loans.is_empty() {
        w.borrow_mut().step();
    }
}

const CUT: LoanSend = LoanSend { loan: 0, at: 0, head: 28, chunk: 1421 };

#[test]
fn a_lent_page_crosses_from_its_frame_and_every_loan_taken_is_returned_once() {
    let (w, ch) = world(1, 1, 8);
    let mut a0 = session(&w, &ch[0], 0, 0);
    let mut b0 = session(&w, &ch[1], 1, 0);
    a0.open(5000).unwrap();
    b0.open(7000).unwrap();
    let heads: Vec<u8> = (0..84).collect();
    // A loan that is not a0's: refused, nothing taken.
    let foreign = LoanSend { loan: 99, ..CUT };
    assert_eq!(a0.send_lent(at(B, 7000), &heads, 4096, foreign), Err(NetError::BadLoan));
    // B is not known yet: the loan is taken, the request refused, the loan given back.
    let page = lend_page(&w, 1, 0x8000_1000);
    let lent = LoanSend { loan: 1, ..CUT };
    assert_eq!(a0.send_lent(at(B, 7000), &heads, 4096, lent), Err(NetError::Unresolved));
    assert_eq!(w.borrow().doms[0].returned, [1]);
    // After a datagram from B, the page goes, from its frame.
    b0.send(at(A, 5000), b"hello").unwrap();
    assert_eq!(recv(&mut a0).1, b"hello");
    let page = {
        let _ = page;
        lend_page(&w, 2, 0x8000_2000)
    };
    let lent = LoanSend { loan: 2, ..CUT };
    a0.send_lent(at(B, 7000), &heads, 4096, lent).unwrap();
    for i in 0..3u32 {
        let (from, got) = recv(&mut b0);
        let (start, len) = lent.piece(4096, i);
        assert_eq!(from, at(A, 5000));
        assert_eq!(&got[..28], &heads[i as usize * 28..][..28]);
        assert_eq!(&got[28..], &page[start as usize..(start + len) as usize], "datagram {i}");
    }
    // Each loan returned once (the test kernel panics at a second return), none left out.
    step_until_returned(&w);
    let wb = w.borrow();
    assert_eq!(wb.doms[0].returned, [1, 2]);
    assert!(wb.doms[0].loans.is_empty());
    let s = wb.servers[0].stats();
    assert_eq!((s.loans_taken, s.loans_returned), (2, 2));
    let id = wb.servers[0].clients()[0].session().client.unwrap();
    assert_eq!(wb.servers[0].stack().accounts(id).unwrap().lent_sent, 3);
}

#[test]
fn a_client_that_dies_with_pages_queued_gets_its_loans_back() {
    let (w, ch) = world(1, 1, 8);
    let mut a0 = session(&w, &ch[0], 0, 0);
    let mut b0 = session(&w, &ch[1], 1, 0);
    a0.open(5000).unwrap();
    b0.open(7000).unwrap();
    b0.send(at(A, 5000), b"hello").unwrap();
    recv(&mut a0);
    let heads = vec![7u8; 84];
    // A full page of big datagrams ahead of two lent pages, then the client dies.
    for seq in 0..2 {
        a0.send(at(B, 7000), &payload(1, seq, 1472)).unwrap();
    }
    for loan in [3, 4] {
        lend_page(&w, loan, 0x8000_0000 + loan * 0x1000);
        a0.send_lent(at(B, 7000), &heads, 4096, LoanSend { loan, ..CUT }).unwrap();
    }
    ch[0].borrow_mut().dead = true;
    drop(a0);
    step_until_returned(&w);
    let wb = w.borrow();
    let mut returned = wb.doms[0].returned.clone();
    returned.sort();
    assert_eq!(returned, [3, 4]);
    assert!(wb.doms[0].loans.is_empty());
    let s = wb.servers[0].stats();
    assert_eq!((s.clients_gone, s.loans_taken, s.loans_returned), (1, 2, 2));
    assert!(s.dropped_tx_closed > 0, "nothing was queued when the client died");
}
