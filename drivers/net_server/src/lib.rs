//! The serving loop of Tessera's network driver domain: the NIC's interrupts, the clients'
//! requests and the stack's timers (`net_stack`) in one loop, over the channels and the
//! kernel a [`NetDomain`] stands for, so that it runs (and is tested) on the host as it runs in
//! a domain. A NIC driver domain builds its NIC and calls `domain::serve` (built for the
//! targets only), which finds the clients the manifest connects to it, gives each a data area
//! of DMA memory, builds the stack and runs [`serve`] over the runtime's channels and kernel.
//!
//! A client is a pair of IO channels from the manifest (`NAME-req` to the driver, `NAME-resp`
//! back), seen through block_server's [`Channels`] trait, which is not block-specific and is
//! reused as is; its data area ([`DataArea`]): the payloads of its sends, then its receive
//! slots (handed to the stack at its Open), then a page where its stream's accounts are
//! published. The domain side is this crate's own small [`NetDomain`] trait: blk_server's
//! `DriverDomain` speaks of a disk model's busy flag and the disk scheduler's clock, which the
//! network has no use for.
//!
//! # One pass ([`NetServer::pass`])
//! 1. If the interrupt's event count moved: the NIC is told ([`net_interface::Nic::interrupted`])
//!    and the interrupt acknowledged.
//! 2. Each open client's requests go through [`NetStack::handle`] and its responses back. A
//!    Close that comes while the client still has datagrams to send ([`NetStack::unsent`]) is
//!    kept and answered at the first pass after they have left (each in its turn under the
//!    client's contract), as a socket that lingers; the client's later requests wait behind it.
//!    A SendLoan's loan is checked with the kernel ([`NetDomain::loan_address`], as the
//!    client's domain's) after the request's own checks.
//! 3. The stack is polled ([`NetStack::poll`]): transmissions completed, frames received and
//!    demultiplexed, smoltcp's ARP and ICMP, the transmit streams' dispatches.
//! 4. The loans the stack is done with ([`NetStack::take_returned`]: every datagram of the
//!    request sent, or dropped, or the request refused after its loan was taken) are returned
//!    ([`NetDomain::loan_return`]).
//! 5. Each client's received datagrams ([`NetStack::next_message`]) are sent to it.
//! 6. The completed periods of the streams of clients with a contract of their own
//!    ([`Client::with_records`]) are printed, one line each:
//!    `net period: stream=NAME start=NS end=NS guaranteed=NS extra=NS missed=BOOL` (NAME the
//!    client's channel prefix; times in link time, by the domain's clock), which
//!    `cargo xtask run --net-out` and `--net-svg` collect.
//! 7. Each stream's accounts are published where its client reads them, with a sequence number
//!    (odd while written), whenever they changed.
//!
//! [`serve`] repeats passes and, when a pass moved nothing, blocks until an endpoint changes
//! (the interrupt, a client's channel) or the stack's next instant ([`NetStack::poll`]'s
//! answer): idle is waiting, never polling. With [`ServeOptions::end_when_clients_gone`] it
//! ends once every client is gone and the NIC has sent every frame it was given (at most
//! [`LAST_FRAMES_NS`] later), so that a client's last datagrams leave before the kernel stops
//! the device.
//!
//! # Invariants
//! - Nothing is lost on a full message ring: a message a client's ring did not take is held
//!   (one per client) and sent first at the next pass; meanwhile the loop takes neither that
//!   client's requests nor its datagrams (they wait in the stack's receive slots, bounded).
//!   A client that does not read stalls only itself.
//! - A datagram a client was told was sent (its Send answered) leaves unless the client dies:
//!   its Close waits for it, and so does the end of the loop.
//! - A client that dies (its request channel's sender gone, its ring drained, or a ring that
//!   fails) is closed in the stack: the datagrams it had queued either way are dropped and
//!   counted in its final published accounts and in [`ServeStats`]; no other client's
//!   datagrams, slots or accounts are touched.
//! - Every loan taken is returned exactly once, whatever becomes of its request and its
//!   client (a client that dies is closed in the stack, whose queued datagrams of a loan are
//!   dropped and the loan given back; those at the device are waited for).
//! - A request with bad arguments gets its error code in its response and changes nothing;
//!   an Open whose contract the stack does not admit ([`NetError::NotAdmitted`]) is also
//!   printed, with the contract.
//!
//! `no_std` with `alloc`, no `unsafe` code; system calls only in `domain`, through the runtime.
//! [`ServeOptions::die_after`] makes the driver die on purpose once it has answered so many
//! requests (as blk_server's `die_after`): a test of what its clients see (`NetError::Closed`).
//!
//! At its end the loop prints its [`ServeStats`] and the frames the stack dropped, by reason
//! (`net_stack::Drops`), on two lines that tests read.
//!
//! Not implemented: a client that reconnects after its domain died (its channel index stays
//! closed), and TCP (the stack has none).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::vec::Vec;
use core::cell::Cell;
use core::fmt;
use core::sync::atomic::AtomicU64;

pub use blk_server::serve::{Channels, SendError};
use net_interface::protocol::{ACCOUNT_WORDS, RESPONSE_LEN};
use net_interface::{
    NetContract, NetError, Nic, Op, Request, Response, ServerMessage, StreamAccounts,
};
use net_stack::{Area, Instant, NetStack, Session};

#[cfg(target_os = "none")]
pub mod domain;
#[cfg(test)]
mod tests;

/// What the loop asks of the driver's domain: its clock, the NIC's interrupt, blocking, and
/// its console.
pub trait NetDomain {
    /// The domain's clock, in nanoseconds.
    fn now_ns(&self) -> u64;
    /// The interrupt's event count (it changes at every interrupt).
    fn interrupts(&self) -> u64;
    /// Acknowledges the interrupt, so that the line may interrupt again.
    fn ack_interrupt(&mut self);
    /// Blocks until an endpoint changes (the interrupt, a client's channel) or `until_ns` (by
    /// the domain's clock); returns at once if one changed since the last `block` returned.
    fn block(&mut self, until_ns: u64);
    /// Prints a line.
    fn print(&mut self, line: fmt::Arguments<'_>);
    /// The device address of the frame `lender` (a client's domain) lent this domain as
    /// `loan`, of which a request reaches the first `len` bytes (the kernel's
    /// `loan_address`); [`NetError::BadLoan`] if it is no such loan. The default takes no
    /// loans.
    fn loan_address(&mut self, lender: u32, loan: u64, len: u32) -> Result<u64, NetError> {
        let _ = (lender, loan, len);
        Err(NetError::BadLoan)
    }
    /// Returns `loan` (the kernel's `frame_return`): the device is done with its frame.
    fn loan_return(&mut self, loan: u64) {
        let _ = loan;
    }
    /// Ends the domain at once, as a fault would ([`ServeOptions::die_after`]: a test of what
    /// the clients and the other domains see). A domain faults; the default panics (the host).
    fn die(&mut self) -> ! {
        panic!("the driver dies on purpose")
    }
}

/// A client's data area, as the driver domain granted it.
pub trait DataArea {
    /// The receive slots' storage handed to the stack at an Open (dropped at its Close).
    type Rx: AsMut<[u8]> + AsRef<[u8]>;
    /// Where the area is and where its receive slots start.
    fn area(&self) -> Area;
    /// Its bytes before the receive slots: the payloads of the client's sends.
    fn tx(&self) -> &[u8];
    /// Its receive slots, for an Open (the stack holds them until the Close, so that at most
    /// one is alive at a time).
    fn rx(&self) -> Self::Rx;
    /// The [`ACCOUNT_WORDS`] words where the client reads its stream's accounts, if any.
    fn accounts(&self) -> Option<&[AtomicU64]>;
}

/// Publishes `a` in `words` with a sequence number, odd while the words are written.
pub fn publish(words: &[AtomicU64], a: &StreamAccounts) {
    if words.len() >= ACCOUNT_WORDS {
        io_protocol::published::publish(&words[..ACCOUNT_WORDS], &a.words());
    }
}

/// Receive slots lent to the stack for one session: memory that goes back to its `home` when
/// the stack drops it (at the Close), so that the next Open gets it again.
pub struct Lent {
    mem: Option<&'static mut [u8]>,
    home: &'static Cell<Option<&'static mut [u8]>>,
}

impl Lent {
    /// The memory in `home`, lent (none, if it is lent already).
    pub fn take(home: &'static Cell<Option<&'static mut [u8]>>) -> Lent {
        Lent { mem: home.take(), home }
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(mem) = self.mem.take() {
            self.home.set(Some(mem));
        }
    }
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        self.mem.as_deref().unwrap_or_default()
    }
}

impl AsMut<[u8]> for Lent {
    fn as_mut(&mut self) -> &mut [u8] {
        self.mem.as_deref_mut().unwrap_or_default()
    }
}

/// A client the loop serves.
pub struct Client<C, D> {
    name: [u8; 32],
    channels: C,
    /// Its data area.
    pub area: D,
    /// Its network contract, from its manifest.
    pub contract: NetContract,
    /// Whether its stream's completed periods are printed (a contract of its own).
    records: bool,
    /// Its domain, which lends frames for SendLoan.
    lender: u32,
    session: Session,
    open: bool,
    /// A message its ring did not take, sent first.
    held: Option<[u8; RESPONSE_LEN]>,
    /// Its Close, taken while it still had datagrams to send: answered once they have left.
    closing: Option<([u8; 64], usize)>,
    published: Option<StreamAccounts>,
}

impl<C: Channels, D: DataArea> Client<C, D> {
    /// The client whose request channel is `name` (`NAME-req`), over `channels`, with `area`,
    /// under `contract`.
    pub fn new(name: &str, channels: C, area: D, contract: NetContract) -> Client<C, D> {
        let mut n = [0u8; 32];
        let len = name.len().min(32);
        n[..len].copy_from_slice(&name.as_bytes()[..len]);
        Client {
            name: n,
            channels,
            area,
            contract,
            records: false,
            lender: 0,
            session: Session::default(),
            open: true,
            held: None,
            closing: None,
            published: None,
        }
    }

    /// The client, its stream's completed periods printed (`net period: ...`, see the
    /// [crate] documentation) if `on`: for a client with a contract of its own.
    pub fn with_records(mut self, on: bool) -> Client<C, D> {
        self.records = on;
        self
    }

    /// The client, its domain `lender` (whose loans its SendLoans name).
    pub fn with_lender(mut self, lender: u32) -> Client<C, D> {
        self.lender = lender;
        self
    }

    /// Its stream's name: its request channel's without `-req`.
    pub fn stream(&self) -> &str {
        self.name().strip_suffix("-req").unwrap_or(self.name())
    }

    /// Its request channel's name.
    pub fn name(&self) -> &str {
        let len = self.name.iter().position(|&b| b == 0).unwrap_or(32);
        core::str::from_utf8(&self.name[..len]).unwrap_or("?")
    }

    /// Its channels.
    pub fn channels(&self) -> &C {
        &self.channels
    }

    /// Its channels, mutably (tests feed them).
    pub fn channels_mut(&mut self) -> &mut C {
        &mut self.channels
    }

    /// Its session: its endpoint in the stack while it is open.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Whether it is still served.
    pub fn is_open(&self) -> bool {
        self.open
    }
}

/// What the loop has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Requests answered.
    pub requests: u64,
    /// Requests answered with an error.
    pub rejected: u64,
    /// Datagrams received handed to clients (messages sent).
    pub delivered: u64,
    /// Interrupts seen.
    pub interrupts: u64,
    /// Clients that died (or whose rings failed) and were closed.
    pub clients_gone: u64,
    /// Datagrams those clients had queued to send when closed.
    pub dropped_tx_closed: u64,
    /// Datagrams received for them and not released when closed.
    pub dropped_rx_closed: u64,
    /// Times a message did not fit its client's ring and was held.
    pub held: u64,
    /// Loans taken for SendLoans (the kernel's `loan_address` accepted them).
    pub loans_taken: u64,
    /// Loans returned (`frame_return`): every one taken, once the device is done with it.
    pub loans_returned: u64,
}

/// What one pass did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// Whether anything moved (a request, a message, an interrupt, the stack due now).
    pub moved: bool,
    /// When the stack wants the next pass at the latest (besides endpoint changes).
    pub next_ns: Option<u64>,
}

/// The network domain's server: the stack and its clients.
pub struct NetServer<N: Nic, C, D: DataArea> {
    stack: NetStack<N, D::Rx>,
    clients: Vec<Client<C, D>>,
    irq_seen: Option<u64>,
    stats: ServeStats,
    driver: &'static str,
}

impl<N: Nic, C: Channels, D: DataArea> NetServer<N, C, D> {
    /// A server of `clients` on `stack`, printing as `driver`.
    pub fn new(
        driver: &'static str,
        stack: NetStack<N, D::Rx>,
        clients: Vec<Client<C, D>>,
    ) -> Self {
        let mut stack = stack;
        stack.record_periods(clients.iter().any(|c| c.records));
        NetServer { stack, clients, irq_seen: None, stats: ServeStats::default(), driver }
    }

    /// The stack.
    pub fn stack(&self) -> &NetStack<N, D::Rx> {
        &self.stack
    }

    /// The stack, mutably.
    pub fn stack_mut(&mut self) -> &mut NetStack<N, D::Rx> {
        &mut self.stack
    }

    /// The clients.
    pub fn clients(&self) -> &[Client<C, D>] {
        &self.clients
    }

    /// The clients, mutably.
    pub fn clients_mut(&mut self) -> &mut [Client<C, D>] {
        &mut self.clients
    }

    /// What the loop has done.
    pub fn stats(&self) -> ServeStats {
        self.stats
    }

    /// Whether every client is gone.
    pub fn all_gone(&self) -> bool {
        self.clients.iter().all(|c| !c.open)
    }

    /// One pass of the loop (see the [crate] documentation); never blocks.
    pub fn pass<P: NetDomain>(&mut self, domain: &mut P) -> Pass {
        let now = Instant(domain.now_ns());
        let mut moved = false;
        let irq = domain.interrupts();
        if self.irq_seen != Some(irq) {
            if self.irq_seen.is_some() {
                self.stats.interrupts += 1;
            }
            self.irq_seen = Some(irq);
            self.stack.nic_mut().interrupted();
            domain.ack_interrupt();
            moved = true;
        }
        for i in 0..self.clients.len() {
            moved |= self.requests(i, now, domain);
        }
        let next = self.stack.poll(now);
        moved |= self.return_loans(domain);
        for i in 0..self.clients.len() {
            moved |= self.messages(i, domain);
        }
        self.print_periods(domain);
        self.publish_all();
        let next_ns = next.map(Instant::as_nanos);
        moved |= next_ns.is_some_and(|t| t <= now.as_nanos());
        Pass { moved, next_ns }
    }

    /// Takes and answers client `i`'s requests; whether any moved. A Close that comes while
    /// the client still has datagrams to send is answered once they have left (each in its
    /// turn under the client's contract); meanwhile the client's next requests wait.
    fn requests<P: NetDomain>(&mut self, i: usize, now: Instant, domain: &mut P) -> bool {
        let mut moved = false;
        let mut buf = [0u8; 64];
        while self.clients[i].open && self.flush_held(i, domain) {
            let unsent = |stack: &NetStack<N, D::Rx>, c: &Client<C, D>| {
                c.session.client.is_some_and(|id| stack.unsent(id).unwrap_or(false))
            };
            let c = &mut self.clients[i];
            let got = match c.closing {
                Some(_) if unsent(&self.stack, c) => break,
                Some((close, n)) => {
                    buf = close;
                    c.closing = None;
                    Ok(Some(n))
                }
                None => c.channels.try_recv(&mut buf),
            };
            match got {
                Ok(Some(n)) => {
                    moved = true;
                    let msg = &buf[..n.min(buf.len())];
                    if c.closing.is_none()
                        && Request::op_of(msg) == Some(Op::Close)
                        && unsent(&self.stack, c)
                    {
                        c.closing = Some((buf, n));
                        continue;
                    }
                    let (area, data, lender) = (c.area.area(), &c.area, c.lender);
                    let mut taken = false;
                    let response = self.stack.handle(
                        &mut c.session,
                        msg,
                        c.contract,
                        area,
                        data.tx(),
                        || data.rx(),
                        |loan, len| {
                            let a = domain.loan_address(lender, loan, len);
                            taken = a.is_ok();
                            a
                        },
                        now,
                    );
                    self.stats.loans_taken += u64::from(taken);
                    self.stats.requests += 1;
                    if response[10..12] != [0, 0] {
                        self.stats.rejected += 1;
                        refused_open(self.driver, c, msg, &response, domain);
                    }
                    // A SendLoan refused after its loan was taken gives it back before the
                    // client hears of it.
                    self.return_loans(domain);
                    self.send(i, response, domain);
                }
                Ok(None) if !c.channels.sender_gone() => break,
                // Its sender died and everything it published has been taken, or its ring is
                // unreadable.
                Ok(None) | Err(_) => {
                    moved = true;
                    self.gone(i, domain, "gone");
                }
            }
        }
        moved
    }

    /// Returns the loans the stack is done with; whether any.
    fn return_loans<P: NetDomain>(&mut self, domain: &mut P) -> bool {
        let mut moved = false;
        while let Some(loan) = self.stack.take_returned() {
            domain.loan_return(loan);
            self.stats.loans_returned += 1;
            moved = true;
        }
        moved
    }

    /// Sends client `i` the datagrams received for it; whether any moved.
    fn messages<P: NetDomain>(&mut self, i: usize, domain: &mut P) -> bool {
        let mut moved = false;
        while self.clients[i].open && self.flush_held(i, domain) {
            let Some(msg) = self.stack.next_message(&self.clients[i].session) else { break };
            moved = true;
            self.stats.delivered += 1;
            self.send(i, msg, domain);
        }
        moved
    }

    /// Sends client `i`'s held message if it has one; whether none is held any more.
    fn flush_held<P: NetDomain>(&mut self, i: usize, domain: &mut P) -> bool {
        match self.clients[i].held.take() {
            None => true,
            Some(msg) => {
                self.send(i, msg, domain);
                self.clients[i].held.is_none()
            }
        }
    }

    /// Sends `msg` to client `i`, holding it if the ring is full, closing the client if the
    /// ring is gone or unusable.
    fn send<P: NetDomain>(&mut self, i: usize, msg: [u8; RESPONSE_LEN], domain: &mut P) {
        let c = &mut self.clients[i];
        if !c.open {
            return;
        }
        match c.channels.try_send(&msg) {
            Ok(true) => {}
            Ok(false) => {
                self.stats.held += 1;
                c.held = Some(msg);
            }
            Err(SendError::Closed) => self.gone(i, domain, "gone"),
            Err(SendError::Other(_)) => self.gone(i, domain, "message ring unusable: closed"),
        }
    }

    /// Closes client `i`, which died: its queued datagrams dropped and counted.
    fn gone<P: NetDomain>(&mut self, i: usize, domain: &mut P, why: &str) {
        let driver = self.driver;
        let c = &mut self.clients[i];
        c.open = false;
        c.held = None;
        c.closing = None;
        self.stats.clients_gone += 1;
        let Some(id) = c.session.client.take() else {
            domain.print(format_args!("{driver}: client {} {why}", c.name()));
            return;
        };
        let now = Instant(domain.now_ns());
        if let Ok(a) = self.stack.close(id, now) {
            self.stats.dropped_tx_closed += a.dropped_tx_closed;
            self.stats.dropped_rx_closed += a.dropped_rx_closed;
            if let Some(words) = c.area.accounts() {
                publish(words, &a);
            }
            c.published = Some(a);
            domain.print(format_args!(
                "{driver}: client {} {why}: dropped {} queued to send, {} received unread ({} sent, {} received before)",
                c.name(),
                a.dropped_tx_closed,
                a.dropped_rx_closed,
                a.packets_sent,
                a.packets_received
            ));
        }
    }

    /// Prints the completed periods of the streams whose clients have records on.
    fn print_periods<P: NetDomain>(&mut self, domain: &mut P) {
        for (id, r) in self.stack.take_periods() {
            let Some(c) = self.clients.iter().find(|c| c.session.client == Some(id)) else {
                continue;
            };
            if c.records {
                domain.print(format_args!(
                    "net period: stream={} start={} end={} guaranteed={} extra={} missed={}",
                    c.stream(),
                    r.start,
                    r.end,
                    r.guaranteed,
                    r.extra,
                    r.missed
                ));
            }
        }
    }

    /// Publishes the accounts of every open stream that changed.
    fn publish_all(&mut self) {
        for c in &mut self.clients {
            let Some(id) = c.session.client else { continue };
            let Ok(a) = self.stack.accounts(id) else { continue };
            if c.published != Some(a) {
                if let Some(words) = c.area.accounts() {
                    publish(words, &a);
                }
                c.published = Some(a);
            }
        }
    }
}

/// Prints why client `c`'s Open `msg` was refused, if it was an Open refused for its
/// contract (`response` is its encoded answer).
fn refused_open<C: Channels, D: DataArea, P: NetDomain>(
    driver: &str,
    c: &Client<C, D>,
    msg: &[u8],
    response: &[u8],
    domain: &mut P,
) {
    let open = Request::decode(msg).is_ok_and(|r| r.op == Op::Open);
    let refused = matches!(
        ServerMessage::decode(response),
        Ok(ServerMessage::Response(Response { status: Err(NetError::NotAdmitted), .. }))
    );
    if open && refused {
        let k = c.contract;
        domain.print(format_args!(
            "{driver}: client {}: its link-time contract ({} us every {} us, extra {}) does not fit beside the open streams' (or is invalid): Open refused",
            c.name(),
            k.slice_ns / 1000,
            k.period_ns / 1000,
            k.extra
        ));
    }
}

/// How long [`serve`] waits, once every client is gone, for the NIC to send the frames it was
/// given before the loop ends.
pub const LAST_FRAMES_NS: u64 = 100_000_000;

/// How [`serve`] serves.
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// Whether the loop ends once every client is gone (else it goes on answering ARP and
    /// ICMP echo for other nodes).
    pub end_when_clients_gone: bool,
    /// With `Some(n)`, the driver dies ([`NetDomain::die`]) once it has answered `n` requests,
    /// with its clients' sessions open: a test of what they and the other domains see.
    pub die_after: Option<u64>,
}

/// Serves `server`'s clients and the network in `domain` (see the [crate]
/// documentation); with [`ServeOptions::end_when_clients_gone`], returns the exit status once
/// every client is gone.
pub fn serve<N: Nic, C: Channels, D: DataArea, P: NetDomain>(
    mut server: NetServer<N, C, D>,
    domain: &mut P,
    options: ServeOptions,
) -> i32 {
    let mut last_frames = None;
    loop {
        let pass = server.pass(domain);
        if options.die_after.is_some_and(|n| server.stats().requests >= n) {
            domain.print(format_args!(
                "{}: dying on purpose after {} requests, its clients' sessions open",
                server.driver,
                server.stats().requests
            ));
            domain.die();
        }
        if options.end_when_clients_gone && server.all_gone() && !server.stack().nic_idle() {
            // The frames given to the NIC are sent before the domain ends (its device is
            // stopped then): checked every millisecond, for at most LAST_FRAMES_NS.
            let now = domain.now_ns();
            let until = *last_frames.get_or_insert(now + LAST_FRAMES_NS);
            if now < until {
                domain.block((now + 1_000_000).min(until));
                continue;
            }
        }
        if options.end_when_clients_gone && server.all_gone() {
            let s = server.stats();
            let d = server.stack().drops();
            domain.print(format_args!(
                "{}: every client gone: {} requests ({} rejected), {} datagrams delivered, {} interrupts, {} frames dropped, clients closed dropping {} to send and {} received, {} loans taken and {} returned",
                server.driver,
                s.requests,
                s.rejected,
                s.delivered,
                s.interrupts,
                d.total(),
                s.dropped_tx_closed,
                s.dropped_rx_closed,
                s.loans_taken,
                s.loans_returned
            ));
            domain.print(format_args!("{}: frames dropped: {d}", server.driver));
            return 0;
        }
        if !pass.moved {
            domain.block(pass.next_ns.unwrap_or(u64::MAX));
        }
    }
}
