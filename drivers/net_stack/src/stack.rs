//! The network domain's core: [`NetStack`].

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use atropos::{Contract, PeriodRecord};
use disk_sched::usd::Usd;
use disk_sched::{Decision, Pending};
use net_interface::frame::{ETH_HEADER, IPV4_UDP_HEADERS, MAX_UDP_PAYLOAD};
use net_interface::protocol::{RX_SLOT, Received};
use net_interface::{
    DeviceRange, Endpoint, Ipv4Addr, LinkState, LoanSend, MacAddr, NetContract, NetError, Nic,
    NicError, StreamAccounts,
};
use smoltcp::iface::{Config as IfaceConfig, Interface, SocketHandle, SocketSet};
use smoltcp::socket::{icmp, udp};
use smoltcp::wire::{
    EthernetAddress, HardwareAddress, Icmpv4Packet, Icmpv4Repr, IpAddress, IpCidr, IpEndpoint,
};

use crate::classify::{DropReason, Drops, Verdict, classify};
use crate::device::NicDevice;
use crate::link::LinkModel;

/// An instant of the caller's clock, in nanoseconds (the stack never reads a clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

impl Instant {
    /// The instant `ns` nanoseconds after the clock's origin.
    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }

    /// Nanoseconds since the clock's origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    fn smol(self) -> smoltcp::time::Instant {
        smoltcp::time::Instant::from_micros((self.0 / 1000) as i64)
    }
}

/// How a stack is set up.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// The host's IPv4 address.
    pub addr: Ipv4Addr,
    /// The length of its network's prefix (24 for a /24).
    pub prefix_len: u8,
    /// The link the transmit streams' contracts are in.
    pub link: LinkModel,
    /// How many datagrams a client may have queued to send.
    pub tx_queue: usize,
    /// At most how many received frames one [`NetStack::poll`] handles.
    pub rx_budget: usize,
}

/// A client's name in the stack (never reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u32);

/// One client: its endpoint, its transmit queue and stream, its receive slots.
struct Client<A> {
    port: u16,
    socket: SocketHandle,
    /// Its stream in the USD.
    stream: usize,
    contract: Contract,
    /// Queued sends: destination, length, slot in `tx_bytes`, and for a datagram of a
    /// SendLoan its tail in the lent frame (its bytes in the slot are then its head only).
    tx_queue: VecDeque<(Endpoint, usize, usize, Option<Tail>)>,
    tx_free: Vec<usize>,
    tx_bytes: Vec<u8>,
    /// The receive slots' storage, and which slots are taken.
    rx_area: A,
    rx_taken: Vec<bool>,
    /// Datagrams put in slots that the client has not been told of yet.
    rx_ready: VecDeque<Received>,
    /// The payload lengths of the datagrams handed to its smoltcp socket and not yet seen
    /// leaving it, oldest first, and since when the oldest has waited (its destination's
    /// hardware address unresolved).
    in_socket: VecDeque<usize>,
    stuck_since: Option<u64>,
    accounts: StreamAccounts,
}

/// A datagram's tail in a lent frame: where the device reads it, and the loan.
#[derive(Clone, Copy, Debug)]
struct Tail {
    range: DeviceRange,
    loan: u64,
}

/// A loan the stack holds for a SendLoan: its datagrams not yet done with (queued, or at the
/// device).
#[derive(Clone, Copy, Debug)]
struct LoanOut {
    loan: u64,
    client: ClientId,
    outstanding: u32,
}

/// How many neighbours' hardware addresses the stack remembers for SendLoan's frames, which
/// it builds itself (learnt from the UDP datagrams they send, the oldest forgotten first).
const NEIGHBOURS: usize = 16;

/// The IPv4 header of the frames the stack builds itself: version 4, 20 bytes, don't fragment,
/// TTL 64, UDP.
const IP_TTL: u8 = 64;

/// The first port an Open of port 0 may be given.
pub const EPHEMERAL_PORTS: u16 = 49152;

/// How many datagrams a client's smoltcp socket holds once dispatched: they wait there while
/// their destination's address is being resolved (beyond, a dispatch is counted as an error).
const SOCKET_TX_DATAGRAMS: usize = 4;

/// How long a datagram may wait in a client's smoltcp socket for its destination's hardware
/// address (smoltcp asks again every second: three ARP requests) before the socket's
/// datagrams are dropped and counted as errors. smoltcp sends a socket's datagrams in order,
/// so one waiting for a neighbour that never answers (a node that has ended) would otherwise
/// hold back every later datagram of the client, to any destination, and its Close, forever.
pub const UNRESOLVED_WAIT_NS: u64 = 3_000_000_000;

/// The ICMP identifier of the stack's own echo requests.
const PING_IDENT: u16 = 0x7e55;

/// The network domain's core over a NIC `N`, clients' receive slots in storage `A` (their data
/// areas, in the driver domain).
pub struct NetStack<N: Nic, A: AsMut<[u8]> + AsRef<[u8]> = Vec<u8>> {
    dev: NicDevice<N>,
    iface: Interface,
    sockets: SocketSet<'static>,
    ping: SocketHandle,
    config: Config,
    mac: MacAddr,
    clients: Vec<Option<Client<A>>>,
    /// Each USD stream's client, while it is open.
    stream_owner: Vec<Option<ClientId>>,
    usd: Usd<LinkModel>,
    /// When the frame the USD dispatched last stops holding the link.
    tx_end: Option<u64>,
    /// When the USD asked to be called again.
    wake: Option<u64>,
    next_pending: u64,
    drops: Drops,
    /// Frames received and handed to smoltcp (ARP, ICMP).
    to_stack: u64,
    /// The last poll left received frames on the NIC (its budget ran out).
    rx_more: bool,
    /// Hosts on the link and their hardware addresses, most recent last.
    neighbours: VecDeque<(Ipv4Addr, MacAddr)>,
    /// Loans held for SendLoans, and those done with, to be returned.
    loans: Vec<LoanOut>,
    returned: VecDeque<u64>,
    /// The identification of the next IPv4 header the stack builds.
    ip_ident: u16,
}

impl<N: Nic, A: AsMut<[u8]> + AsRef<[u8]>> NetStack<N, A> {
    /// A stack on `nic` at `now`.
    pub fn new(nic: N, config: Config, now: Instant) -> Self {
        let mac = nic.mac();
        let mut dev = NicDevice::new(nic);
        let mut ic = IfaceConfig::new(HardwareAddress::Ethernet(EthernetAddress(mac.0)));
        ic.random_seed =
            u64::from_le_bytes([mac.0[0], mac.0[1], mac.0[2], mac.0[3], mac.0[4], mac.0[5], 0, 0]);
        let mut iface = Interface::new(ic, &mut dev, now.smol());
        let a = config.addr.0;
        iface.update_ip_addrs(|addrs| {
            let cidr = IpCidr::new(IpAddress::v4(a[0], a[1], a[2], a[3]), config.prefix_len);
            // A new interface has no address, so the first always fits.
            let _ = addrs.push(cidr);
        });
        let mut sockets = SocketSet::new(Vec::new());
        let mut ping = icmp::Socket::new(
            icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 4], vec![0; 4 * 128]),
            icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 4], vec![0; 4 * 128]),
        );
        // A fresh socket binds to any identifier.
        let _ = ping.bind(icmp::Endpoint::Ident(PING_IDENT));
        let ping = sockets.add(ping);
        NetStack {
            dev,
            iface,
            sockets,
            ping,
            config,
            mac,
            clients: Vec::new(),
            stream_owner: Vec::new(),
            usd: Usd::new(config.link, false, 1, 0),
            tx_end: None,
            wake: None,
            next_pending: 0,
            drops: Drops::default(),
            to_stack: 0,
            rx_more: false,
            neighbours: VecDeque::with_capacity(NEIGHBOURS),
            loans: Vec::new(),
            returned: VecDeque::new(),
            ip_ident: 0,
        }
    }

    /// Turns the record of the transmit streams' periods on or off (off in a new stack): while
    /// it is on, every completed period is kept until [`NetStack::take_periods`] takes it, so
    /// a caller that turns it on takes them regularly (the driver's loop does, every pass).
    pub fn record_periods(&mut self, on: bool) {
        self.usd.atropos_mut().set_trace(on);
    }

    /// The transmit streams' periods completed since the last call while they were recorded
    /// ([`NetStack::record_periods`]), oldest first, each with its client: the link time
    /// each used in the period, guaranteed and extra, and whether it ended with slice left
    /// while the stream had datagrams waiting. The streams of closed clients are left out.
    pub fn take_periods(&mut self) -> Vec<(ClientId, PeriodRecord)> {
        let atropos = self.usd.atropos_mut();
        if !atropos.tracing() {
            // Nothing is recorded: the driver's every pass asks, at no cost.
            return Vec::new();
        }
        let records = atropos.take_records();
        let owners = &self.stream_owner;
        records
            .into_iter()
            .filter_map(|r| Some((owners.get(r.client).copied().flatten()?, r)))
            .collect()
    }

    /// How the stack was set up.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The NIC.
    pub fn nic(&self) -> &N {
        &self.dev.nic
    }

    /// The NIC, to tell it of its interrupt ([`Nic::interrupted`]) before the next poll.
    pub fn nic_mut(&mut self) -> &mut N {
        &mut self.dev.nic
    }

    /// The host's MAC address.
    pub fn mac(&self) -> MacAddr {
        self.mac
    }

    /// Frames dropped on receipt, by reason.
    pub fn drops(&self) -> Drops {
        self.drops
    }

    /// Received frames handed to smoltcp (ARP, ICMP).
    pub fn frames_to_stack(&self) -> u64 {
        self.to_stack
    }

    /// Frames the NIC refused after smoltcp built them.
    pub fn tx_refused(&self) -> u64 {
        self.dev.tx_refused
    }

    fn client(&self, c: ClientId) -> Result<&Client<A>, NetError> {
        self.clients.get(c.0 as usize).and_then(Option::as_ref).ok_or(NetError::UnknownClient)
    }

    fn client_mut(&mut self, c: ClientId) -> Result<&mut Client<A>, NetError> {
        self.clients.get_mut(c.0 as usize).and_then(Option::as_mut).ok_or(NetError::UnknownClient)
    }

    fn port_owner(&self, port: u16) -> Option<usize> {
        self.clients.iter().position(|c| c.as_ref().is_some_and(|c| c.port == port))
    }

    /// Opens a UDP endpoint on `port` (0: any free port from [`EPHEMERAL_PORTS`] on) under
    /// `contract`, admitted beside the open clients' contracts, its received datagrams put in
    /// `rx_area`'s slots of [`RX_SLOT`] bytes; the client and its port.
    pub fn open(
        &mut self,
        port: u16,
        contract: NetContract,
        rx_area: A,
        now: Instant,
    ) -> Result<(ClientId, u16), NetError> {
        let port = match port {
            0 => (EPHEMERAL_PORTS..=u16::MAX)
                .find(|p| self.port_owner(*p).is_none())
                .ok_or(NetError::NoFreePort)?,
            p if self.port_owner(p).is_some() => return Err(NetError::PortInUse),
            p => p,
        };
        let contract = Contract {
            period: contract.period_ns,
            slice: contract.slice_ns,
            extra: contract.extra,
            latency: if contract.latency_ns == 0 {
                contract.period_ns
            } else {
                contract.latency_ns
            },
        };
        let others = self.clients.iter().flatten().map(|c| &c.contract);
        atropos::admit(others.chain([&contract])).map_err(|_| NetError::NotAdmitted)?;
        let mut socket = udp::Socket::new(
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 1], Vec::new()),
            udp::PacketBuffer::new(
                vec![udp::PacketMetadata::EMPTY; SOCKET_TX_DATAGRAMS],
                vec![0; SOCKET_TX_DATAGRAMS * MAX_UDP_PAYLOAD],
            ),
        );
        socket.bind(port).map_err(|_| NetError::PortInUse)?;
        let socket = self.sockets.add(socket);
        let stream = self.usd.open(contract, now.0);
        let id = ClientId(self.clients.len() as u32);
        let slots = rx_area.as_ref().len() / RX_SLOT;
        let q = self.config.tx_queue;
        self.clients.push(Some(Client {
            port,
            socket,
            stream,
            contract,
            tx_queue: VecDeque::with_capacity(q),
            tx_free: (0..q).rev().collect(),
            tx_bytes: vec![0; q * MAX_UDP_PAYLOAD],
            rx_area,
            rx_taken: vec![false; slots],
            rx_ready: VecDeque::with_capacity(slots),
            in_socket: VecDeque::with_capacity(SOCKET_TX_DATAGRAMS),
            stuck_since: None,
            accounts: StreamAccounts::default(),
        }));
        if self.stream_owner.len() <= stream {
            self.stream_owner.resize(stream + 1, None);
        }
        self.stream_owner[stream] = Some(id);
        Ok((id, port))
    }

    /// Whether client `c` still has datagrams to send: queued for the link, or handed to
    /// smoltcp and not yet written to the NIC (their destination's address being resolved, for
    /// at most [`UNRESOLVED_WAIT_NS`]). A driver domain answers a client's Close once it has
    /// none (`net_server`), so a Close waits at most that long for an unresolved neighbour.
    pub fn unsent(&self, c: ClientId) -> Result<bool, NetError> {
        let client = self.client(c)?;
        let socket = self.sockets.get::<udp::Socket>(client.socket);
        Ok(!client.tx_queue.is_empty() || socket.send_queue() > 0)
    }

    /// Whether every frame given to the NIC has been reported transmitted.
    pub fn nic_idle(&self) -> bool {
        self.dev.nic.tx_in_flight() == 0
    }

    /// Closes client `c`'s endpoint at `now`: the datagrams it had queued to send and those
    /// received and not released are dropped and counted; its final accounts.
    pub fn close(&mut self, c: ClientId, now: Instant) -> Result<StreamAccounts, NetError> {
        self.client(c)?;
        let mut acc = self.accounts(c)?;
        let client = self.clients[c.0 as usize].take().ok_or(NetError::UnknownClient)?;
        acc.dropped_tx_closed += client.tx_queue.len() as u64;
        acc.dropped_rx_closed += client.rx_taken.iter().filter(|t| **t).count() as u64;
        for tail in client.tx_queue.iter().filter_map(|q| q.3) {
            self.loan_done(tail.loan);
        }
        self.sockets.remove(client.socket);
        // Its stream stays in the USD, blocked once its last pending datagram (if any) is
        // dispatched and skipped; it holds no contract any more.
        self.stream_owner[client.stream] = None;
        self.pump_tx(now);
        Ok(acc)
    }

    /// Queues a datagram of `payload` from client `c` to `to` at `now`. Refused (and the
    /// refusal counted) with [`NetError::Busy`] when the client's transmit queue is full.
    pub fn send(
        &mut self,
        c: ClientId,
        to: Endpoint,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), NetError> {
        let link = self.dev.nic.link();
        let client = self.client_mut(c)?;
        let a = to.addr.0;
        if to.port == 0 || to.addr == Ipv4Addr::UNSPECIFIED || a == [255; 4] || a[0] >= 224 {
            return Err(NetError::BadAddress);
        }
        if payload.len() > MAX_UDP_PAYLOAD {
            return Err(NetError::TooLarge);
        }
        if link == LinkState::Down {
            return Err(NetError::LinkDown);
        }
        let Some(slot) = client.tx_free.pop() else {
            client.accounts.dropped_tx_full += 1;
            return Err(NetError::Busy);
        };
        let at = slot * MAX_UDP_PAYLOAD;
        client.tx_bytes[at..at + payload.len()].copy_from_slice(payload);
        client.tx_queue.push_back((to, payload.len(), slot, None));
        if client.tx_queue.len() == 1 {
            let stream = client.stream;
            self.arrive(stream, payload.len(), now.0);
        }
        self.pump_tx(now);
        Ok(())
    }

    /// Queues the datagrams of a SendLoan from client `c` to `to` at `now`: `lent` cuts the
    /// `len` bytes at device address `frame + lent.at` on (a frame the client lent, whose
    /// handle is `lent.loan`) into datagrams, datagram `i`'s head the `lent.head` bytes at
    /// `i * lent.head` in `heads`. The NIC gathers each tail from the frame
    /// ([`Nic::transmit_lent`]); the stack builds the frames' headers itself (UDP checksum 0),
    /// so the destination must be a neighbour whose hardware address it has learnt from a
    /// datagram of its ([`NetError::Unresolved`] otherwise, and for this node's own address).
    /// Refused with [`NetError::Busy`] unless the client's queue has room for every datagram.
    /// Once accepted, the loan is held until every datagram is done with (sent, or dropped
    /// at a Close), then given by [`NetStack::take_returned`]; a refused request holds
    /// nothing. The request is assumed checked ([`SessionInfo::check_send_loan`]).
    ///
    /// [`SessionInfo::check_send_loan`]: net_interface::SessionInfo::check_send_loan
    #[allow(clippy::too_many_arguments)]
    pub fn send_lent(
        &mut self,
        c: ClientId,
        to: Endpoint,
        heads: &[u8],
        len: u32,
        lent: LoanSend,
        frame: u64,
        now: Instant,
    ) -> Result<(), NetError> {
        let link = self.dev.nic.link();
        let n = lent.datagrams(len);
        let head = usize::from(lent.head);
        if n == 0
            || heads.len() < n as usize * head
            || head + usize::from(lent.chunk) > MAX_UDP_PAYLOAD
        {
            return Err(NetError::TooLarge);
        }
        if link == LinkState::Down {
            return Err(NetError::LinkDown);
        }
        if to.addr == self.config.addr || self.neighbour(to.addr).is_none() {
            return Err(NetError::Unresolved);
        }
        let client = self.client_mut(c)?;
        if client.tx_free.len() < n as usize {
            client.accounts.dropped_tx_full += 1;
            return Err(NetError::Busy);
        }
        let was_empty = client.tx_queue.is_empty();
        for i in 0..n {
            let (at, piece) = lent.piece(len, i);
            let slot = client.tx_free.pop().expect("room was checked");
            let b = slot * MAX_UDP_PAYLOAD;
            let h = i as usize * head;
            client.tx_bytes[b..b + head].copy_from_slice(&heads[h..h + head]);
            let range = DeviceRange { addr: frame + u64::from(at), len: piece as usize };
            client.tx_queue.push_back((to, head, slot, Some(Tail { range, loan: lent.loan })));
        }
        let (stream, first) = (client.stream, head + lent.piece(len, 0).1 as usize);
        self.loans.push(LoanOut { loan: lent.loan, client: c, outstanding: n });
        if was_empty {
            self.arrive(stream, first, now.0);
        }
        self.pump_tx(now);
        Ok(())
    }

    /// A loan the stack holds for a SendLoan whose datagrams are all done with (sent, or
    /// dropped at a Close): the driver returns it to the kernel now.
    pub fn take_returned(&mut self) -> Option<u64> {
        self.returned.pop_front()
    }

    /// Returns loan `loan`, which a request refused after taking it, through
    /// [`NetStack::take_returned`].
    pub(crate) fn give_back(&mut self, loan: u64) {
        self.returned.push_back(loan);
    }

    /// Whether the stack holds loan `loan` for a SendLoan.
    pub fn holds_loan(&self, loan: u64) -> bool {
        self.loans.iter().any(|l| l.loan == loan)
    }

    /// How many loans the stack holds.
    pub fn loans_held(&self) -> usize {
        self.loans.len()
    }

    /// One datagram of loan `loan` is done with.
    fn loan_done(&mut self, loan: u64) {
        let Some(i) = self.loans.iter().position(|l| l.loan == loan) else { return };
        self.loans[i].outstanding -= 1;
        if self.loans[i].outstanding == 0 {
            let l = self.loans.swap_remove(i);
            self.returned.push_back(loan);
            if let Ok(c) = self.client_mut(l.client) {
                c.accounts.loans_done += 1;
            }
        }
    }

    /// The hardware address of neighbour `addr`, if known.
    fn neighbour(&self, addr: Ipv4Addr) -> Option<MacAddr> {
        self.neighbours.iter().rev().find(|(a, _)| *a == addr).map(|(_, m)| *m)
    }

    /// Puts the head of a stream's queue, of `len` payload bytes, in the USD.
    fn arrive(&mut self, stream: usize, len: usize, now_ns: u64) {
        let frame = ETH_HEADER + IPV4_UDP_HEADERS + len;
        let p = Pending {
            id: self.next_pending,
            client: stream,
            lbn: 0,
            sectors: frame as u32,
            read: false,
            arrival_ns: now_ns,
        };
        self.next_pending += 1;
        // The stream holds at most its head in the USD, so it has room for it.
        let _ = self.usd.arrive(p, now_ns);
    }

    /// The next datagram received for client `c` that it has not been told of: in the slot at
    /// `offset` of its receive area, until it releases it.
    pub fn next_received(&mut self, c: ClientId) -> Option<Received> {
        self.client_mut(c).ok()?.rx_ready.pop_front()
    }

    /// Client `c`'s receive area.
    pub fn rx_area(&self, c: ClientId) -> Option<&[u8]> {
        self.client(c).ok().map(|c| c.rx_area.as_ref())
    }

    /// The payload of `r`, received for client `c`.
    pub fn payload(&self, c: ClientId, r: &Received) -> Option<&[u8]> {
        let area = self.rx_area(c)?;
        let at = usize::try_from(r.offset).ok()?;
        area.get(at..at.checked_add(r.len as usize)?)
    }

    /// Client `c` has read the datagram in the slot at `offset`: the slot is free again.
    pub fn release(&mut self, c: ClientId, offset: u64) -> Result<(), NetError> {
        let client = self.client_mut(c)?;
        let slot = offset / RX_SLOT as u64;
        let taken = if offset.is_multiple_of(RX_SLOT as u64) {
            client.rx_taken.get_mut(slot as usize)
        } else {
            None
        };
        match taken {
            Some(t) if *t => {
                *t = false;
                Ok(())
            }
            _ => Err(NetError::OutsideDataArea),
        }
    }

    /// Client `c`'s accounts: its counters and the link time its stream used.
    pub fn accounts(&self, c: ClientId) -> Result<StreamAccounts, NetError> {
        let client = self.client(c)?;
        let mut a = client.accounts;
        if let Some(s) = self.usd.accounts(client.stream) {
            a.guaranteed_ns = s.guaranteed;
            a.extra_ns = s.extra;
            a.periods = s.periods;
            a.deadlines_missed = s.deadlines_missed;
        }
        Ok(a)
    }

    /// Sends an ICMP echo request with sequence number `seq` and `payload` to `to`.
    pub fn ping(
        &mut self,
        to: Ipv4Addr,
        seq: u16,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), NetError> {
        let repr = Icmpv4Repr::EchoRequest { ident: PING_IDENT, seq_no: seq, data: payload };
        let socket = self.sockets.get_mut::<icmp::Socket>(self.ping);
        let a = to.0;
        let buf = socket
            .send(repr.buffer_len(), IpAddress::v4(a[0], a[1], a[2], a[3]))
            .map_err(|_| NetError::Busy)?;
        let mut packet = Icmpv4Packet::new_unchecked(buf);
        repr.emit(&mut packet, &smoltcp::phy::ChecksumCapabilities::default());
        self.poll(now);
        Ok(())
    }

    /// The next echo reply received for [`NetStack::ping`]: who answered and the sequence
    /// number.
    pub fn pong(&mut self) -> Option<(Ipv4Addr, u16)> {
        let socket = self.sockets.get_mut::<icmp::Socket>(self.ping);
        while socket.can_recv() {
            let Ok((buf, from)) = socket.recv() else { break };
            let IpAddress::Ipv4(from) = from;
            let Ok(packet) = Icmpv4Packet::new_checked(buf) else { continue };
            if let Ok(Icmpv4Repr::EchoReply { ident: PING_IDENT, seq_no, .. }) =
                Icmpv4Repr::parse(&packet, &Default::default())
            {
                return Some((Ipv4Addr(from.octets()), seq_no));
            }
        }
        None
    }

    /// Does the stack's work at `now`: takes the NIC's completed transmissions and received
    /// frames (at most the configured budget), delivers datagrams, lets smoltcp answer, and
    /// sends what the transmit streams' contracts allow. Returns when it wants to be called
    /// again at the latest (besides on the NIC's interrupt and on new requests).
    pub fn poll(&mut self, now: Instant) -> Option<Instant> {
        while self.dev.nic.poll_transmit() {}
        while let Some(loan) = self.dev.nic.lent_done() {
            self.loan_done(loan);
        }
        self.rx_more = true;
        for _ in 0..self.config.rx_budget {
            if !self.receive_one(now) {
                self.rx_more = false;
                break;
            }
        }
        self.iface.poll(now.smol(), &mut self.dev, &mut self.sockets);
        self.expire_unresolved(now);
        self.pump_tx(now);
        self.poll_at(now)
    }

    /// Follows the datagrams in the clients' smoltcp sockets at `now` (smoltcp sends them in
    /// order, so the bytes left say which have left) and drops, counted as errors, those of
    /// a socket whose oldest has waited [`UNRESOLVED_WAIT_NS`] for its neighbour.
    fn expire_unresolved(&mut self, now: Instant) {
        for client in self.clients.iter_mut().flatten() {
            if client.in_socket.is_empty() {
                continue;
            }
            let socket = self.sockets.get_mut::<udp::Socket>(client.socket);
            let left = socket.send_queue();
            let before = client.in_socket.len();
            let mut queued: usize = client.in_socket.iter().sum();
            while queued > left || (left == 0 && !client.in_socket.is_empty()) {
                queued -= client.in_socket.pop_front().unwrap_or(0);
            }
            if client.in_socket.is_empty() {
                client.stuck_since = None;
                continue;
            }
            let since = match client.stuck_since {
                Some(t) if client.in_socket.len() == before => t,
                _ => {
                    client.stuck_since = Some(now.0);
                    continue;
                }
            };
            if now.0.saturating_sub(since) >= UNRESOLVED_WAIT_NS {
                // smoltcp can only empty a socket whole: reset it, bound to the same port.
                client.accounts.dropped_tx_error += client.in_socket.len() as u64;
                client.accounts.packets_sent =
                    client.accounts.packets_sent.saturating_sub(client.in_socket.len() as u64);
                client.accounts.bytes_sent =
                    client.accounts.bytes_sent.saturating_sub(queued as u64);
                client.in_socket.clear();
                client.stuck_since = None;
                socket.close();
                // The port was bound to this socket a moment ago: it binds again.
                let _ = socket.bind(client.port);
            }
        }
    }

    /// When the stack wants to be called again at the latest, as of `now`.
    pub fn poll_at(&mut self, now: Instant) -> Option<Instant> {
        let smol = self
            .iface
            .poll_at(now.smol(), &self.sockets)
            .map(|t| (t.total_micros().max(0) as u64).saturating_mul(1000));
        // Frames left on the NIC by the budget: at once.
        let more = self.rx_more.then_some(now.0);
        // A socket's datagrams waiting for a neighbour: dropped at the end of their wait.
        let stuck = self
            .clients
            .iter()
            .flatten()
            .filter_map(|c| c.stuck_since)
            .map(|t| t.saturating_add(UNRESOLVED_WAIT_NS))
            .min();
        [self.tx_end, self.wake, smol, more, stuck].into_iter().flatten().min().map(Instant)
    }

    /// Takes one received frame from the NIC and deals with it; `false` if there was none.
    fn receive_one(&mut self, now: Instant) -> bool {
        let (mac, ip) = (self.mac, self.config.addr);
        let prefix = self.config.prefix_len;
        let neighbours = &mut self.neighbours;
        let clients = &mut self.clients;
        let drops = &mut self.drops;
        let dev = &mut self.dev;
        let (staging, staged) = (&mut dev.staging, &mut dev.staged);
        let got = dev.nic.receive(|frame| match classify(frame, mac, ip) {
            Verdict::Stack => {
                // The classifier let through no frame longer than the staging buffer.
                staging[..frame.len()].copy_from_slice(frame);
                *staged = Some(frame.len());
                true
            }
            Verdict::Udp { from, port, start, len } => {
                learn(neighbours, from.addr, &frame[6..12], ip, prefix);
                let owner = clients.iter_mut().flatten().find(|c| c.port == port);
                match owner {
                    None => drops.count(DropReason::NoSuchPort),
                    Some(c) => {
                        if !deliver(c, from, &frame[start..start + len]) {
                            c.accounts.dropped_rx_full += 1;
                            drops.count(DropReason::RxFull);
                        }
                    }
                }
                false
            }
            Verdict::Drop(r) => {
                drops.count(r);
                false
            }
        });
        let Some(for_stack) = got else { return false };
        if for_stack {
            self.to_stack += 1;
            self.iface.poll(now.smol(), &mut self.dev, &mut self.sockets);
        }
        true
    }

    /// Sends what the transmit streams' contracts allow at `now`, one frame at a time, each
    /// holding the link for its modelled time.
    fn pump_tx(&mut self, now: Instant) {
        self.wake = None;
        loop {
            if let Some(end) = self.tx_end {
                if now.0 < end {
                    return;
                }
                self.usd.complete(end);
                self.tx_end = None;
            }
            if !self.dev.can_transmit() {
                return;
            }
            match self.usd.next(now.0) {
                Decision::Dispatch(p) => self.dispatch(p, now),
                Decision::Wait { until_ns } => {
                    self.wake = Some(until_ns);
                    return;
                }
                Decision::Hold | Decision::Idle => return,
            }
        }
    }

    /// Sends the head of the stream of `p`, which the USD chose at `now`.
    fn dispatch(&mut self, p: Pending, now: Instant) {
        let Some(Some(id)) = self.stream_owner.get(p.client).copied() else {
            // Its client closed: nothing to send, no link time used.
            self.usd.complete(now.0);
            return;
        };
        let Some(client) = self.clients.get_mut(id.0 as usize).and_then(Option::as_mut) else {
            self.usd.complete(now.0);
            return;
        };
        let Some((to, len, slot, tail)) = client.tx_queue.pop_front() else {
            self.usd.complete(now.0);
            return;
        };
        if let Some(tail) = tail {
            self.dispatch_lent(p, id, to, len, slot, tail, now);
            return;
        }
        let at = slot * MAX_UDP_PAYLOAD;
        let a = to.addr.0;
        if to.addr == self.config.addr {
            // Addressed to this node (another domain on it): smoltcp has no loopback on
            // Ethernet, so the datagram is given to the client on that port here, after the
            // same link time as a frame on the wire.
            let from = Endpoint { addr: self.config.addr, port: client.port };
            client.accounts.packets_sent += 1;
            client.accounts.bytes_sent += len as u64;
            client.tx_free.push(slot);
            let (next, stream) = (client.tx_queue.front().map(queued_len), client.stream);
            let mut datagram = [0u8; MAX_UDP_PAYLOAD];
            datagram[..len].copy_from_slice(&client.tx_bytes[at..at + len]);
            match self.clients.iter_mut().flatten().find(|c| c.port == to.port) {
                None => self.drops.count(DropReason::NoSuchPort),
                Some(c) => {
                    if !deliver(c, from, &datagram[..len]) {
                        c.accounts.dropped_rx_full += 1;
                        self.drops.count(DropReason::RxFull);
                    }
                }
            }
            self.tx_end = Some(now.0 + self.config.link.frame_ns(p.sectors as usize));
            if let Some(len) = next {
                self.arrive(stream, len, now.0);
            }
            return;
        }
        let endpoint = IpEndpoint::new(IpAddress::v4(a[0], a[1], a[2], a[3]), to.port);
        let socket = self.sockets.get_mut::<udp::Socket>(client.socket);
        match socket.send_slice(&client.tx_bytes[at..at + len], endpoint) {
            Ok(()) => {
                client.accounts.packets_sent += 1;
                client.accounts.bytes_sent += len as u64;
                client.in_socket.push_back(len);
            }
            Err(_) => client.accounts.dropped_tx_error += 1,
        }
        client.tx_free.push(slot);
        let next = client.tx_queue.front().map(queued_len);
        let stream = client.stream;
        self.tx_end = Some(now.0 + self.config.link.frame_ns(p.sectors as usize));
        if let Some(len) = next {
            self.arrive(stream, len, now.0);
        }
        self.iface.poll(now.smol(), &mut self.dev, &mut self.sockets);
        self.expire_unresolved(now);
    }

    /// Sends a SendLoan's datagram of client `id`: its Ethernet, IPv4 and UDP headers and its
    /// `head` bytes (in its slot) in a NIC buffer, its tail gathered from the lent frame.
    #[allow(clippy::too_many_arguments)]
    fn dispatch_lent(
        &mut self,
        p: Pending,
        id: ClientId,
        to: Endpoint,
        head: usize,
        slot: usize,
        tail: Tail,
        now: Instant,
    ) {
        let (src_mac, src_ip) = (self.mac, self.config.addr);
        let dst_mac = self.neighbour(to.addr);
        let ident = self.ip_ident;
        self.ip_ident = self.ip_ident.wrapping_add(1);
        let Some(client) = self.clients.get_mut(id.0 as usize).and_then(Option::as_mut) else {
            self.usd.complete(now.0);
            self.loan_done(tail.loan);
            return;
        };
        let at = slot * MAX_UDP_PAYLOAD;
        let from = Endpoint { addr: src_ip, port: client.port };
        let payload = head + tail.range.len;
        let sent = match dst_mac {
            // Forgotten since the request was taken (other neighbours learnt): lost, as on a
            // wire, and sent again by the protocol above.
            None => Err(NicError::Io),
            Some(dst_mac) => {
                let heads = &client.tx_bytes[at..at + head];
                let hdr = ETH_HEADER + IPV4_UDP_HEADERS;
                let fill = |buf: &mut [u8]| {
                    headers(buf, src_mac, dst_mac, from, to, payload, ident);
                    buf[hdr..].copy_from_slice(heads);
                };
                self.dev.nic.transmit_lent(hdr + head, fill, tail.range, tail.loan)
            }
        };
        match sent {
            Ok(()) => {
                client.accounts.packets_sent += 1;
                client.accounts.bytes_sent += payload as u64;
                client.accounts.lent_sent += 1;
            }
            Err(_) => client.accounts.dropped_tx_error += 1,
        }
        client.tx_free.push(slot);
        let next = client.tx_queue.front().map(queued_len);
        let stream = client.stream;
        self.tx_end = Some(now.0 + self.config.link.frame_ns(p.sectors as usize));
        if let Some(len) = next {
            self.arrive(stream, len, now.0);
        }
        if sent.is_err() {
            // The device never saw it: done with at once.
            self.loan_done(tail.loan);
        }
    }
}

/// The payload length of a queued datagram: its bytes in the slot, and its tail.
fn queued_len(q: &(Endpoint, usize, usize, Option<Tail>)) -> usize {
    q.1 + q.3.map_or(0, |t| t.range.len)
}

/// Remembers that neighbour `addr` has hardware address `mac` (a UDP datagram's source), if it
/// is on the link of `ip`/`prefix`.
fn learn(
    neighbours: &mut VecDeque<(Ipv4Addr, MacAddr)>,
    addr: Ipv4Addr,
    mac: &[u8],
    ip: Ipv4Addr,
    prefix: u8,
) {
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix.min(32))).unwrap_or(0);
    let on_link = u32::from_be_bytes(addr.0) & mask == u32::from_be_bytes(ip.0) & mask;
    let Ok(mac) = <[u8; 6]>::try_from(mac) else { return };
    if !on_link || mac[0] & 1 != 0 || addr == ip {
        return;
    }
    if let Some(i) = neighbours.iter().position(|(a, _)| *a == addr) {
        if neighbours[i].1 == MacAddr(mac) {
            return;
        }
        neighbours.remove(i);
    } else if neighbours.len() == NEIGHBOURS {
        neighbours.pop_front();
    }
    neighbours.push_back((addr, MacAddr(mac)));
}

/// Writes the Ethernet, IPv4 and UDP headers of a datagram of `payload` bytes from `from` to
/// `to` at the start of `buf`; the UDP checksum is 0 ("none": the payload's tail is never in
/// the driver's view).
fn headers(
    buf: &mut [u8],
    src: MacAddr,
    dst: MacAddr,
    from: Endpoint,
    to: Endpoint,
    payload: usize,
    ident: u16,
) {
    buf[0..6].copy_from_slice(&dst.0);
    buf[6..12].copy_from_slice(&src.0);
    buf[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut buf[ETH_HEADER..ETH_HEADER + 20];
    let total = (IPV4_UDP_HEADERS + payload) as u16;
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[4..6].copy_from_slice(&ident.to_be_bytes());
    ip[6..8].copy_from_slice(&[0x40, 0]);
    ip[8] = IP_TTL;
    ip[9] = 17;
    ip[10..12].fill(0);
    ip[12..16].copy_from_slice(&from.addr.0);
    ip[16..20].copy_from_slice(&to.addr.0);
    let mut sum: u32 = ip.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let udp = &mut buf[ETH_HEADER + 20..ETH_HEADER + IPV4_UDP_HEADERS];
    udp[0..2].copy_from_slice(&from.port.to_be_bytes());
    udp[2..4].copy_from_slice(&to.port.to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    udp[6..8].fill(0);
}

/// Copies a datagram's payload from `from` into a free receive slot of `c`; `false` if every
/// slot is taken.
fn deliver<A: AsMut<[u8]> + AsRef<[u8]>>(
    c: &mut Client<A>,
    from: Endpoint,
    payload: &[u8],
) -> bool {
    let Some(slot) = c.rx_taken.iter().position(|t| !*t) else {
        return false;
    };
    let at = slot * RX_SLOT;
    c.rx_area.as_mut()[at..at + payload.len()].copy_from_slice(payload);
    c.rx_taken[slot] = true;
    c.rx_ready.push_back(Received { from, offset: at as u64, len: payload.len() as u32 });
    c.accounts.packets_received += 1;
    c.accounts.bytes_received += payload.len() as u64;
    true
}
