//! A simulated network for host tests: a [`Transport`] per endpoint that plays the network
//! driver's part of the protocol (Open, Send, Release, Close, datagrams Received into slots of
//! a data area), a wire that loses, duplicates and reorders datagrams by a seeded generator,
//! and peers served in-process (a paging server as a [`Peer`]) that answer when the clock
//! reaches their datagrams. Time is the net's: it moves only when a client waits.

extern crate std;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};

use net_client::Transport;
use net_interface::protocol::{RX_SLOT, Received};
use net_interface::{
    Endpoint, Ipv4Addr, NetError, Op, Request, Response, ServerMessage, SessionInfo, StreamAccounts,
};

std::thread_local! {
    static NOW: Cell<u64> = const { Cell::new(0) };
}

/// The simulated clock of this thread's net, for a client's `fn() -> u64`.
pub fn now() -> u64 {
    NOW.with(Cell::get)
}

/// The send bytes before the receive slots.
const SEND_BYTES: usize = 2048;
/// Receive slots per endpoint.
const SLOTS: usize = 8;

/// Something served in-process on the net: it answers datagrams and has timers.
pub trait Peer {
    /// A datagram from `from` arrived at `now`; replies go to `out`.
    fn datagram(
        &mut self,
        now: u64,
        from: Endpoint,
        payload: &[u8],
        out: &mut Vec<(Endpoint, Vec<u8>)>,
    );
    /// The clock reached `now`: timers due fire, their datagrams to `out`.
    fn poll(&mut self, now: u64, out: &mut Vec<(Endpoint, Vec<u8>)>);
    /// When the peer next wants [`Peer::poll`], if ever.
    fn next_poll(&self) -> Option<u64>;
    /// The peer itself, to look at in a test.
    fn as_any(&mut self) -> &mut dyn core::any::Any;
}

/// The wire's faults, per thousand datagrams, and its timing.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    /// Datagrams lost.
    pub loss: u32,
    /// Datagrams delivered twice.
    pub dup: u32,
    /// Datagrams held back by up to `jitter_ns` more (reordered).
    pub reorder: u32,
    /// One-way latency.
    pub latency_ns: u64,
    /// The most a reordered datagram is held back.
    pub jitter_ns: u64,
}

impl Faults {
    /// A perfect wire with 50 µs of latency.
    pub const NONE: Faults =
        Faults { loss: 0, dup: 0, reorder: 0, latency_ns: 50_000, jitter_ns: 0 };
}

struct InFlight {
    at: u64,
    seq: u64,
    from: Endpoint,
    to: Endpoint,
    bytes: Vec<u8>,
}

struct Local {
    addr: Endpoint,
    area: Vec<u8>,
    free: Vec<bool>,
    /// Messages for the client: responses and Received.
    inbox: VecDeque<Vec<u8>>,
    /// Datagrams waiting for a free slot.
    backlog: VecDeque<(Endpoint, Vec<u8>)>,
    /// Pages the client may lend: their addresses and bytes ([`Net::lendable`]).
    lendable: Vec<(usize, Vec<u8>)>,
    /// Loans out: handle and the page's address; the next handle.
    loans: Vec<(u64, usize)>,
    next_loan: u64,
    /// SendLoans done with, and their datagrams.
    loans_done: u64,
    lent_sent: u64,
    /// The driver's transmit queue is full until the clock reaches this: Sends are refused
    /// `Busy` ([`Net::busy_until`]).
    busy_until: u64,
    /// Sends refused `Busy` in a row, and in all.
    busy_in_a_row: u64,
    busy_refused: u64,
}

/// Sends refused `Busy` in a row after which the sim says the client spins: it asks again and
/// again without letting time pass, so the queue it waits on never empties.
const SPINNING: u64 = 100_000;

struct Remote {
    addr: Endpoint,
    peer: Box<dyn Peer>,
    /// Killed: it neither answers nor hears.
    dead: bool,
}

/// The net: endpoints of clients, peers, and the wire between them.
pub struct Net {
    now: u64,
    seq: u64,
    rng: u64,
    /// Faults applied to every datagram.
    pub faults: Faults,
    wire: Vec<InFlight>,
    locals: Vec<Local>,
    remotes: Vec<Remote>,
    /// Datagrams sent onto the wire, lost, duplicated.
    pub sent: u64,
    /// Datagrams the wire lost.
    pub lost: u64,
    /// Datagrams the wire duplicated.
    pub duplicated: u64,
    /// Datagrams that reached a peer.
    pub to_peers: u64,
}

/// A shared net.
pub type SharedNet = Rc<RefCell<Net>>;

impl Net {
    /// An empty net whose wire draws from `seed`.
    pub fn new(seed: u64, faults: Faults) -> SharedNet {
        NOW.with(|n| n.set(0));
        Rc::new(RefCell::new(Net {
            now: 0,
            seq: 0,
            rng: seed | 1,
            faults,
            wire: Vec::new(),
            locals: Vec::new(),
            remotes: Vec::new(),
            sent: 0,
            lost: 0,
            duplicated: 0,
            to_peers: 0,
        }))
    }

    /// Adds a peer at `addr`.
    pub fn add_peer(net: &SharedNet, addr: Endpoint, peer: Box<dyn Peer>) {
        net.borrow_mut().remotes.push(Remote { addr, peer, dead: false });
    }

    /// A transport for a client endpoint at address `addr` (its port comes with the Open).
    pub fn transport(net: &SharedNet, addr: Ipv4Addr) -> SimTransport {
        let mut n = net.borrow_mut();
        n.locals.push(Local {
            addr: Endpoint { addr, port: 0 },
            area: vec![0; SEND_BYTES + SLOTS * RX_SLOT],
            free: vec![true; SLOTS],
            inbox: VecDeque::new(),
            backlog: VecDeque::new(),
            lendable: Vec::new(),
            loans: Vec::new(),
            next_loan: 1,
            loans_done: 0,
            lent_sent: 0,
            busy_until: 0,
            busy_in_a_row: 0,
            busy_refused: 0,
        });
        SimTransport { net: net.clone(), me: n.locals.len() - 1 }
    }

    /// Lets the client of `t` lend the page at `va`, whose bytes are `bytes` (a frame its
    /// driver reads by address, in this net: its bytes as they are now).
    pub fn lendable(net: &SharedNet, t: usize, va: usize, bytes: &[u8]) {
        let l = &mut net.borrow_mut().locals[t];
        l.lendable.retain(|(a, _)| *a != va);
        l.lendable.push((va, bytes.to_vec()));
    }

    /// The client of `t` may no longer lend the page at `va`.
    pub fn not_lendable(net: &SharedNet, t: usize, va: usize) {
        net.borrow_mut().locals[t].lendable.retain(|(a, _)| *a != va);
    }

    /// SendLoans done with for the client of `t`, and their datagrams.
    pub fn lent(net: &SharedNet, t: usize) -> (u64, u64) {
        let l = &net.borrow().locals[t];
        (l.loans_done, l.lent_sent)
    }

    /// The transmit queue of the client of `t` is full until the clock reaches `at`: its Sends
    /// are refused `Busy` until then (the driver empties the queue as time passes, and time
    /// passes only while the client waits or pauses).
    pub fn busy_until(net: &SharedNet, t: usize, at: u64) {
        net.borrow_mut().locals[t].busy_until = at;
    }

    /// Sends of the client of `t` refused `Busy`.
    pub fn busy_refused(net: &SharedNet, t: usize) -> u64 {
        net.borrow().locals[t].busy_refused
    }

    /// Kills the peer at `addr`: from now on it neither hears nor answers.
    pub fn kill(&mut self, addr: Endpoint) {
        for r in self.remotes.iter_mut().filter(|r| r.addr == addr) {
            r.dead = true;
        }
    }

    /// The peer at `addr`, to look at.
    pub fn peer(&mut self, addr: Endpoint) -> Option<&mut Box<dyn Peer>> {
        self.remotes.iter_mut().find(|r| r.addr == addr).map(|r| &mut r.peer)
    }

    fn random(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn chance(&mut self, permille: u32) -> bool {
        permille > 0 && (self.random() % 1000) < u64::from(permille)
    }

    /// Puts a datagram on the wire, with the wire's faults.
    pub fn put(&mut self, from: Endpoint, to: Endpoint, bytes: Vec<u8>) {
        self.sent += 1;
        if self.chance(self.faults.loss) {
            self.lost += 1;
            return;
        }
        let copies = if self.chance(self.faults.dup) {
            self.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut at = self.now + self.faults.latency_ns;
            if self.faults.jitter_ns > 0 && self.chance(self.faults.reorder) {
                at += self.random() % self.faults.jitter_ns;
            }
            self.seq += 1;
            let seq = self.seq;
            self.wire.push(InFlight { at, seq, from, to, bytes: bytes.clone() });
        }
    }

    /// Delivers everything due by the clock, and polls the peers.
    fn deliver(&mut self) {
        loop {
            let now = self.now;
            let mut out = Vec::new();
            for r in self.remotes.iter_mut().filter(|r| !r.dead) {
                if r.peer.next_poll().is_some_and(|t| t <= now) {
                    let mut o = Vec::new();
                    r.peer.poll(now, &mut o);
                    out.extend(o.into_iter().map(|(to, b)| (r.addr, to, b)));
                }
            }
            let due = self
                .wire
                .iter()
                .enumerate()
                .filter(|(_, f)| f.at <= now)
                .min_by_key(|(_, f)| (f.at, f.seq))
                .map(|(i, _)| i);
            let any = !out.is_empty();
            for (from, to, b) in out {
                self.put(from, to, b);
            }
            let Some(i) = due else {
                if any {
                    continue;
                }
                break;
            };
            let f = self.wire.swap_remove(i);
            if let Some(r) = self.remotes.iter_mut().find(|r| r.addr == f.to) {
                if r.dead {
                    continue;
                }
                self.to_peers += 1;
                let mut o = Vec::new();
                r.peer.datagram(now, f.from, &f.bytes, &mut o);
                let from = r.addr;
                for (to, b) in o {
                    self.put(from, to, b);
                }
            } else if let Some(l) = self.locals.iter_mut().find(|l| l.addr == f.to) {
                l.backlog.push_back((f.from, f.bytes));
            }
            // Anything else: no such port, dropped.
        }
        for l in &mut self.locals {
            while let Some(slot) = l.free.iter().position(|f| *f) {
                let Some((from, bytes)) = l.backlog.pop_front() else { break };
                l.free[slot] = false;
                let offset = SEND_BYTES + slot * RX_SLOT;
                l.area[offset..offset + bytes.len()].copy_from_slice(&bytes);
                let r = Received { from, offset: offset as u64, len: bytes.len() as u32 };
                l.inbox.push_back(ServerMessage::Received(r).encode().to_vec());
            }
        }
    }

    /// The next instant something happens on its own.
    fn next_event(&self) -> Option<u64> {
        let wire = self.wire.iter().map(|f| f.at).min();
        let polls =
            self.remotes.iter().filter(|r| !r.dead).filter_map(|r| r.peer.next_poll()).min();
        match (wire, polls) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn set_now(&mut self, t: u64) {
        self.now = self.now.max(t);
        NOW.with(|n| n.set(self.now));
    }
}

/// A client's [`Transport`] on the simulated net.
pub struct SimTransport {
    net: SharedNet,
    me: usize,
}

fn info(addr: Endpoint) -> SessionInfo {
    SessionInfo {
        local: addr,
        area_base: 0,
        area_len: (SEND_BYTES + SLOTS * RX_SLOT) as u64,
        rx_offset: SEND_BYTES as u32,
        rx_slots: SLOTS as u32,
        max_payload: net_interface::frame::MAX_UDP_PAYLOAD as u32,
        max_in_flight: 8,
    }
}

impl Transport for SimTransport {
    fn send(&mut self, msg: &[u8]) -> Result<(), NetError> {
        let req = Request::decode(msg)?;
        let mut n = self.net.borrow_mut();
        let me = self.me;
        let mut reply = Response::plain(req.id, Ok(()));
        match req.op {
            Op::Open => {
                let l = &mut n.locals[me];
                l.addr.port =
                    if req.remote.port == 0 { 40_000 + me as u16 } else { req.remote.port };
                reply.info = info(l.addr);
            }
            Op::Send | Op::SendLoan if n.now < n.locals[me].busy_until => {
                let l = &mut n.locals[me];
                l.busy_refused += 1;
                l.busy_in_a_row += 1;
                assert!(l.busy_in_a_row < SPINNING, "the client spins on a full transmit queue");
                reply.status = Err(NetError::Busy);
            }
            Op::Send => {
                let (from, bytes) = {
                    let l = &n.locals[me];
                    (l.addr, l.area[req.offset as usize..][..req.len as usize].to_vec())
                };
                n.put(from, req.remote, bytes);
            }
            Op::Release => {
                let slot = (req.offset as usize - SEND_BYTES) / RX_SLOT;
                n.locals[me].free[slot] = true;
                n.deliver();
            }
            Op::Close => {}
            Op::SendLoan => {
                let l = &mut n.locals[me];
                let page = l.loans.iter().position(|(h, _)| *h == req.lent.loan).and_then(|i| {
                    let (_, va) = l.loans.swap_remove(i);
                    l.lendable.iter().find(|(a, _)| *a == va).map(|(_, b)| b.clone())
                });
                match page {
                    None => reply.status = Err(NetError::BadLoan),
                    Some(page) => {
                        let from = l.addr;
                        let (lent, head) = (req.lent, usize::from(req.lent.head));
                        let mut datagrams = Vec::new();
                        for i in 0..lent.datagrams(req.len) {
                            let (at, len) = lent.piece(req.len, i);
                            let h = req.offset as usize + i as usize * head;
                            let mut d = l.area[h..h + head].to_vec();
                            d.extend_from_slice(&page[at as usize..(at + len) as usize]);
                            datagrams.push(d);
                        }
                        l.loans_done += 1;
                        l.lent_sent += datagrams.len() as u64;
                        for d in datagrams {
                            n.put(from, req.remote, d);
                        }
                    }
                }
            }
        }
        if reply.status != Err(NetError::Busy) {
            n.locals[me].busy_in_a_row = 0;
        }
        n.locals[me].inbox.push_front(ServerMessage::Response(reply).encode().to_vec());
        Ok(())
    }

    /// The client waits a little (20 µs, as on the target): the clock moves on.
    fn pause(&mut self) {
        let mut n = self.net.borrow_mut();
        let t = n.now + 20_000;
        n.set_now(t);
        n.deliver();
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, NetError> {
        self.recv_until(buf, u64::MAX)?.ok_or(NetError::Closed)
    }

    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> Result<Option<usize>, NetError> {
        let mut n = self.net.borrow_mut();
        loop {
            n.deliver();
            if let Some(m) = n.locals[self.me].inbox.pop_front() {
                buf[..m.len()].copy_from_slice(&m);
                return Ok(Some(m.len()));
            }
            match n.next_event() {
                Some(t) if t <= deadline_ns => {
                    let t = t.max(n.now);
                    n.set_now(t);
                }
                None if deadline_ns == u64::MAX => return Err(NetError::Closed),
                _ => {
                    n.set_now(deadline_ns);
                    n.deliver();
                    if let Some(m) = n.locals[self.me].inbox.pop_front() {
                        buf[..m.len()].copy_from_slice(&m);
                        return Ok(Some(m.len()));
                    }
                    return Ok(None);
                }
            }
        }
    }

    fn write(&mut self, _: &SessionInfo, offset: u64, bytes: &[u8]) {
        let mut n = self.net.borrow_mut();
        n.locals[self.me].area[offset as usize..][..bytes.len()].copy_from_slice(bytes);
    }

    fn read<R>(
        &mut self,
        _: &SessionInfo,
        offset: u64,
        len: u32,
        read: impl FnOnce(&[u8]) -> R,
    ) -> R {
        let bytes =
            self.net.borrow().locals[self.me].area[offset as usize..][..len as usize].to_vec();
        read(&bytes)
    }

    fn accounts(&mut self, _: &SessionInfo) -> Option<StreamAccounts> {
        let n = self.net.borrow();
        let l = &n.locals[self.me];
        Some(StreamAccounts {
            loans_done: l.loans_done,
            lent_sent: l.lent_sent,
            ..Default::default()
        })
    }

    fn lend(&mut self, va: usize) -> Option<u64> {
        let mut n = self.net.borrow_mut();
        let l = &mut n.locals[self.me];
        let lendable = l.lendable.iter().any(|(a, _)| *a == va);
        if !lendable || l.loans.iter().any(|(_, a)| *a == va) {
            return None;
        }
        let h = l.next_loan;
        l.next_loan += 1;
        l.loans.push((h, va));
        Some(h)
    }

    fn take_back(&mut self, loan: u64) {
        self.net.borrow_mut().locals[self.me].loans.retain(|(h, _)| *h != loan);
    }
}
