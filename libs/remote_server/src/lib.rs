//! The remote paging server's core (Heracles §10.3, §10.6), apart from the domain that runs it
//! (`userland/apps/paging_server`): clients' streams of pages in a bounded amount of the
//! server's memory, served over the remote paging protocol (`rpp`), each client charged the
//! server's CPU time spent on it and served by its contract.
//!
//! [`Server`] is sans-IO: the domain hands it each datagram received
//! ([`Server::receive`]), lets it serve queued work one packet at a time
//! ([`Server::serve`]), and sends the replies [`Server::transmit`] releases to `out`.
//!
//! - **Streams.** A `CreateStream` (stream 0 in its header) is admitted by [`Server::admit`]
//!   (the one place where a new stream is judged: memory, then CPU; the trader's admission
//!   rules extend it) and answered `StreamCreated` with a new stream number and a random
//!   64-bit token, or `Refused` with the reason. A retransmitted `CreateStream` (same sender,
//!   same request id) gets the same answer again, so a lost answer creates no second stream.
//!   Each stream reserves the pages it asked for; all reservations together stay within the
//!   memory the server offers ([`Server::new`]), and a stream's pages are allocated from the
//!   heap on their first write, fallibly (a failed allocation answers `Full`, never panics).
//!   `Release` frees every page of the stream and closes it; `SwitchMirror` makes a mirror
//!   stream primary; `Heartbeat` is answered `Alive`.
//! - **Checks.** Every packet's stream and token are checked before anything else (the data
//!   path's own check, [`rpp::PageServer::authenticates`]): a packet that names an unknown
//!   stream or carries a wrong token is refused with `BadToken` at once, never queued behind
//!   the stream it names (a hostile client cannot spend another's slice), touches no page, and
//!   is counted: in all, and against the stream it named if that stream exists.
//! - **CPU.** Authenticated packets wait in their stream's queue (bounded: beyond
//!   [`QUEUE`] packets they are dropped and counted, and the client's retransmission brings
//!   them back). [`Server::serve`] takes the next packet of the client [`sched::Scheduler`]
//!   picks (EDF over the clients' `(period, slice, extra)` CPU contracts from their
//!   `CreateStream`, slack time to clients whose contract says `extra`) and charges that client
//!   the CPU the server's clock measured handling it. A client over its slice waits for its
//!   next period ([`Server::next_wakeup`]). The receive work of an authenticated packet
//!   (decoding, the token check, queueing; from the domain's copy out of the driver's slot
//!   with [`Server::receive_since`]) is charged to its client too; a packet that fails before
//!   a client is known is the server's own ([`Counts::unattributed_ns`]).
//! - **Network.** Replies wait in their client's bounded send queue ([`SEND_QUEUE`]);
//!   [`Server::transmit`] releases them by a second EDF, over the clients' network contracts,
//!   charged in link time ([`link::Link`]: the reply's frame at the link's rate), while the
//!   link is busy less than a window (0.5 ms) ahead. All replies share the server's one
//!   session at the driver, which schedules sessions, not the clients behind one; so the server
//!   decides whose reply goes next, and the driver's queue holds at most the window.
//! - **Control plane.** A new client is checked against the network beside memory and CPU (the
//!   link share of its `CreateStream` beside the others', [`Server::admit_net`]); `AddResources`
//!   against memory only;
//!   the memory offered follows the advertising algorithm ([`Server::set_offer`], the domain's
//!   `control` module). [`Server::revoke`] takes memory back from clients with their active
//!   participation ([`revoke`]: victims by `remote_control`'s five rounds, their pages forwarded
//!   to the new servers they name).
//! - **Reports.** [`Server::reports`] gives, per client (open or released), its pages, reads,
//!   writes, frees, CPU charged (the part in slack time, the receive work), periods throttled,
//!   replies sent and their link time (the part in slack time, periods throttled, send queue
//!   drops), refused packets and queue drops.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod link;
pub mod revoke;
pub mod sched;

#[cfg(test)]
mod tests;

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use net_interface::Endpoint;
use rpp::server::{DropReason, PageServer, PageStore, ServerStats, StoreError, Verdict};
use rpp::wire::{self, Code, Header, Message, Packet, Qos, RefuseReason, Role};

use link::Link;
use sched::{Contract, Scheduler};

/// Packets a stream may have queued for service.
pub const QUEUE: usize = 64;

/// Replies a stream may have waiting for the link (a read's page is 3 of them).
pub const SEND_QUEUE: usize = 4 * QUEUE;

/// The largest page size a stream may ask for.
pub const MAX_PAGE_SIZE: u32 = 64 * 1024;

/// What a server counted of one client's stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientReport {
    /// The client's endpoint (where its `CreateStream` came from).
    pub client: Endpoint,
    /// Its stream number.
    pub stream: u32,
    /// Its stream's role on this server (now).
    pub role: Role,
    /// Whether it told the server it has a local disk.
    pub local_disk: bool,
    /// Pages reserved.
    pub reserved: u64,
    /// Pages held now (0 once released).
    pub pages: u64,
    /// The most pages held at once.
    pub peak: u64,
    /// Bytes of the pages held now: a page the client compressed takes its compressed length
    /// (the reservation counts whole pages).
    pub bytes: u64,
    /// Bytes of the pages stored, all writes together.
    pub bytes_written: u64,
    /// Pages stored (whole writes).
    pub writes: u64,
    /// Pages read out (a read asked again, its answer lost, counts again).
    pub reads: u64,
    /// Pages freed.
    pub frees: u64,
    /// Server CPU charged, ns.
    pub cpu_ns: u64,
    /// Of which in slack time.
    pub extra_ns: u64,
    /// Periods in which it waited, its slice spent, with work queued.
    pub throttled: u64,
    /// Packets that named this stream with a wrong token, refused.
    pub refused: u64,
    /// Packets dropped as its queue was full.
    pub queue_drops: u64,
    /// Of `cpu_ns`, the receive work (decoding, the token check, queueing) of its packets.
    pub receive_ns: u64,
    /// Replies sent to it.
    pub sent: u64,
    /// Link time its replies took, ns.
    pub net_ns: u64,
    /// Of which in the link's slack time.
    pub net_extra_ns: u64,
    /// Periods in which its replies waited, its link time spent, for its next period.
    pub net_throttled: u64,
    /// Replies dropped as its send queue was full (its retransmission asks again).
    pub send_drops: u64,
    /// Whether it released its stream.
    pub released: bool,
    /// Its CPU contract.
    pub cpu: Qos,
    /// Its network contract.
    pub net: Qos,
}

/// A server's own counts, beyond the data path's ([`ServerStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Streams created.
    pub created: u64,
    /// Streams refused, by reason: memory, CPU, the network, a bad request.
    pub refused_memory: u64,
    /// See [`Counts::refused_memory`].
    pub refused_cpu: u64,
    /// See [`Counts::refused_memory`].
    pub refused_net: u64,
    /// See [`Counts::refused_memory`].
    pub refused_bad: u64,
    /// Packets refused for an unknown stream or a wrong token.
    pub bad_token: u64,
    /// Packets that did not decode.
    pub malformed: u64,
    /// Control messages a server does not take (or not from a stream), dropped.
    pub unexpected: u64,
    /// CPU spent on packets of no stream (creations, refusals, packets that did not decode
    /// or failed their token check, answers to forwarded pages), the server's own, ns.
    pub unattributed_ns: u64,
    /// Link time of the server's own sends (answers to creations, refusals, replies to a
    /// stream that has closed), ns.
    pub unattributed_net_ns: u64,
}

/// One stream's pages and counts.
struct Stream {
    report: ClientReport,
    /// Its token (for the server's own messages to the client: revocation).
    token: u64,
    /// When its client last sent an authenticated packet.
    last_contact: u64,
    pages: BTreeMap<u64, Vec<u8>>,
    page_size: u32,
    queue: VecDeque<(Endpoint, Vec<u8>)>,
    /// Its replies waiting for the link, released under its network contract.
    send: VecDeque<(Endpoint, Vec<u8>)>,
}

/// The memory the server gives its clients' pages: [`PageStore`] over the open streams.
struct Memory {
    streams: BTreeMap<u32, Stream>,
    /// Bytes of pages held.
    used: u64,
}

impl PageStore for Memory {
    fn get(&mut self, stream: u32, vpn: u64, buf: &mut [u8]) -> Result<usize, StoreError> {
        let s = self.streams.get_mut(&stream).ok_or(StoreError::NotHeld)?;
        let page = s.pages.get(&vpn).ok_or(StoreError::NotHeld)?;
        let n = page.len();
        if n > buf.len() {
            return Err(StoreError::NotHeld);
        }
        buf[..n].copy_from_slice(page);
        s.report.reads += 1;
        Ok(n)
    }

    /// A page is kept at the length it was sent (a compressed page in fewer bytes): its
    /// bytes count in [`ClientReport::bytes`] and [`Server::memory`], while the client's
    /// reservation counts whole pages (a page of any length takes one).
    fn put(&mut self, stream: u32, vpn: u64, data: &[u8]) -> Result<(), StoreError> {
        let s = self.streams.get_mut(&stream).ok_or(StoreError::Full)?;
        if data.is_empty() || data.len() > s.page_size as usize {
            return Err(StoreError::Full);
        }
        let mut page = Vec::new();
        page.try_reserve_exact(data.len()).map_err(|_| StoreError::Full)?;
        page.extend_from_slice(data);
        let new = data.len() as u64;
        match s.pages.insert(vpn, page) {
            Some(old) => {
                s.report.bytes = s.report.bytes - old.len() as u64 + new;
                self.used = self.used - old.len() as u64 + new;
            }
            None => {
                if s.report.pages >= s.report.reserved {
                    s.pages.remove(&vpn);
                    return Err(StoreError::Full);
                }
                s.report.pages += 1;
                s.report.peak = s.report.peak.max(s.report.pages);
                s.report.bytes += new;
                self.used += new;
            }
        }
        s.report.writes += 1;
        s.report.bytes_written += new;
        Ok(())
    }

    fn free(&mut self, stream: u32, vpn: u64) {
        let Some(s) = self.streams.get_mut(&stream) else { return };
        if let Some(page) = s.pages.remove(&vpn) {
            s.report.pages -= 1;
            s.report.frees += 1;
            s.report.bytes -= page.len() as u64;
            self.used -= page.len() as u64;
        }
    }

    fn holds(&self, stream: u32, vpn: u64) -> bool {
        self.streams.get(&stream).is_some_and(|s| s.pages.contains_key(&vpn))
    }
}

/// The server: see the [crate] documentation.
pub struct Server {
    memory_bytes: u64,
    reserved_bytes: u64,
    data: PageServer,
    mem: Memory,
    sched: Scheduler,
    /// The link among the clients: the same EDF over their network contracts, in link time.
    net: Scheduler,
    link: Link,
    /// When the link is done with what the server has sent so far.
    link_free: u64,
    /// Whether the last [`Server::transmit`] stopped at the window with replies waiting.
    link_blocked: bool,
    /// The server's own replies waiting for the link (to streams that have closed).
    loose: VecDeque<(Endpoint, Vec<u8>)>,
    /// Answers to creations, by (sender, request id), for retransmitted `CreateStream`s.
    created: BTreeMap<(Endpoint, u32), Vec<u8>>,
    /// Released streams' reports.
    done: Vec<ClientReport>,
    next_stream: u32,
    rng: u64,
    counts: Counts,
    buf: Vec<u8>,
    /// Clients being revoked ([`revoke`]).
    revocations: revoke::Revocations,
}

impl Server {
    /// A server offering `memory_bytes` of its memory, drawing tokens from `seed` (mixed with
    /// the clock at each creation).
    pub fn new(memory_bytes: u64, seed: u64) -> Server {
        Server {
            memory_bytes,
            reserved_bytes: 0,
            data: PageServer::new(wire::MAX_CHUNK),
            mem: Memory { streams: BTreeMap::new(), used: 0 },
            sched: Scheduler::default(),
            net: Scheduler::default(),
            link: Link::default(),
            link_free: 0,
            link_blocked: false,
            loose: VecDeque::new(),
            created: BTreeMap::new(),
            done: Vec::new(),
            next_stream: 1,
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
            counts: Counts::default(),
            buf: alloc::vec![0; wire::MAX_PACKET],
            revocations: revoke::Revocations::default(),
        }
    }

    /// A random 64-bit token (SplitMix64 over the seed, the clock and the stream).
    fn token(&mut self, now: u64, stream: u32) -> u64 {
        self.rng =
            self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15 ^ now.rotate_left(17) ^ u64::from(stream));
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let t = z ^ (z >> 31);
        t.max(1)
    }

    /// Sets the link the clients' network contracts are measured on (by default
    /// [`Link::FAST_ETHERNET`]).
    pub fn set_link(&mut self, link: Link) {
        self.link = link;
    }

    /// Takes one datagram from `from` at `now`: a creation is answered at once, a packet
    /// that fails its stream's check is refused at once, anything else waits in its
    /// stream's queue for [`Server::serve`]. `cpu` is the server's clock: what the receive
    /// work cost is charged to the stream the packet was for, or to the server itself if it
    /// names none or fails its check.
    pub fn receive(
        &mut self,
        now: u64,
        cpu: &mut dyn FnMut() -> u64,
        from: Endpoint,
        bytes: &[u8],
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) {
        let start = cpu();
        self.receive_since(now, start, cpu, from, bytes, out);
    }

    /// [`Server::receive`] for work that began at `start` by `cpu`'s clock (the domain's
    /// copy of the datagram out of its receive slot), which is charged with it.
    pub fn receive_since(
        &mut self,
        now: u64,
        start: u64,
        cpu: &mut dyn FnMut() -> u64,
        from: Endpoint,
        bytes: &[u8],
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) {
        // What the server sends at once is its own link time.
        let link = self.link;
        let mut own_ns = 0;
        let mut out = |to: Endpoint, b: &[u8]| {
            own_ns += link.frame_ns(b.len());
            out(to, b)
        };
        self.receive_inner(now, start, cpu, from, bytes, &mut out);
        self.link_free = self.link_free.max(now).saturating_add(own_ns);
        self.counts.unattributed_net_ns += own_ns;
    }

    fn receive_inner(
        &mut self,
        now: u64,
        start: u64,
        cpu: &mut dyn FnMut() -> u64,
        from: Endpoint,
        bytes: &[u8],
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) {
        let header = match wire::decode(bytes) {
            Ok(p) => p.header,
            Err(_) => {
                self.counts.malformed += 1;
                self.counts.unattributed_ns += cpu().saturating_sub(start);
                return;
            }
        };
        // A new server's answer to a page this server forwards for a revoked client.
        if self.offload_answer(now, from, bytes, out) {
            self.counts.unattributed_ns += cpu().saturating_sub(start);
            return;
        }
        if header.stream == 0 {
            self.control_unauthenticated(now, from, bytes, out);
        } else if self.data.authenticates(header.stream, header.token) {
            let s = self.mem.streams.get_mut(&header.stream).expect("open streams are in memory");
            s.last_contact = s.last_contact.max(now);
            if s.queue.len() >= QUEUE {
                s.report.queue_drops += 1;
            } else {
                s.queue.push_back((from, bytes.to_vec()));
                self.sched.set_ready(header.stream as usize, true);
            }
            self.revoked_contact(now, header.stream);
            // The receive work is the client's.
            let spent = cpu().saturating_sub(start);
            self.sched.charge_work(header.stream as usize, spent);
            if let Some(s) = self.mem.streams.get_mut(&header.stream) {
                s.report.receive_ns += spent;
            }
            return;
        } else {
            // Refused by the data path itself (BadToken), touching nothing.
            let verdict = self.data.on_packet(&mut self.mem, bytes, &mut |b| out(from, b));
            debug_assert!(matches!(verdict, Verdict::Dropped(DropReason::BadToken)));
            self.counts.bad_token += 1;
            if let Some(s) = self.mem.streams.get_mut(&header.stream) {
                s.report.refused += 1;
            }
        }
        self.counts.unattributed_ns += cpu().saturating_sub(start);
    }

    /// A control message of no stream (a creation), or refused.
    fn control_unauthenticated(
        &mut self,
        now: u64,
        from: Endpoint,
        bytes: &[u8],
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) {
        let Ok(p) = wire::decode(bytes) else { return };
        match p.message {
            Message::CreateStream { pages, page_size, role, has_local_disk, cpu, net } => {
                if let Some(answer) = self.created.get(&(from, p.header.request)) {
                    out(from, answer);
                    return;
                }
                // The network beside the CPU (§10.3: a new client is checked against memory,
                // CPU and network).
                let admitted = self
                    .admit(pages, page_size, cpu)
                    .and_then(|c| self.admit_net(net).map(|n| (c, n)));
                let message = match admitted {
                    Ok((contract, net_contract)) => {
                        let stream = self.next_stream;
                        self.next_stream += 1;
                        let token = self.token(now, stream);
                        self.open(
                            now,
                            from,
                            stream,
                            token,
                            pages,
                            page_size,
                            role,
                            has_local_disk,
                            (cpu, contract),
                            (net, net_contract),
                        );
                        Message::StreamCreated { stream, token, pages, data_port: 0 }
                    }
                    Err(reason) => {
                        match reason {
                            RefuseReason::Memory => self.counts.refused_memory += 1,
                            RefuseReason::Cpu => self.counts.refused_cpu += 1,
                            RefuseReason::Net => self.counts.refused_net += 1,
                            _ => self.counts.refused_bad += 1,
                        }
                        Message::Refused { reason }
                    }
                };
                let header = Header { stream: 0, token: 0, request: p.header.request };
                if let Ok(len) = wire::encode(&Packet { header, message }, &mut self.buf) {
                    let answer = self.buf[..len].to_vec();
                    out(from, &answer);
                    if matches!(message, Message::StreamCreated { .. }) {
                        self.created.insert((from, p.header.request), answer);
                    }
                }
            }
            Message::Heartbeat => self.answer(from, p.header, Message::Alive, out),
            _ => self.counts.unexpected += 1,
        }
    }

    /// Whether a new stream of `pages` pages of `page_size` bytes under the CPU contract
    /// `cpu` may be admitted: the memory it reserves fits beside the other streams' within
    /// what the server offers, and its CPU share beside theirs within the whole. This is
    /// where admission decides; a refusal names its reason.
    pub fn admit(&self, pages: u64, page_size: u32, cpu: Qos) -> Result<Contract, RefuseReason> {
        if pages == 0
            || !(512..=MAX_PAGE_SIZE).contains(&page_size)
            || cpu.period_ns == 0
            || cpu.slice_ns > cpu.period_ns
        {
            return Err(RefuseReason::BadRequest);
        }
        let bytes = pages.checked_mul(u64::from(page_size)).ok_or(RefuseReason::Memory)?;
        if self.reserved_bytes.saturating_add(bytes) > self.memory_bytes {
            return Err(RefuseReason::Memory);
        }
        let contract =
            Contract { period_ns: cpu.period_ns, slice_ns: cpu.slice_ns, extra: cpu.extra };
        if self.sched.committed_ppm() + contract.ppm() > 1_000_000 {
            return Err(RefuseReason::Cpu);
        }
        Ok(contract)
    }

    /// Whether a new stream under the network contract `net` may be admitted: its share of
    /// the link beside the other streams' within the whole.
    pub fn admit_net(&self, net: Qos) -> Result<Contract, RefuseReason> {
        if net.period_ns == 0 || net.slice_ns > net.period_ns {
            return Err(RefuseReason::BadRequest);
        }
        let contract =
            Contract { period_ns: net.period_ns, slice_ns: net.slice_ns, extra: net.extra };
        if self.net.committed_ppm() + contract.ppm() > 1_000_000 {
            return Err(RefuseReason::Net);
        }
        Ok(contract)
    }

    #[allow(clippy::too_many_arguments)]
    fn open(
        &mut self,
        now: u64,
        client: Endpoint,
        stream: u32,
        token: u64,
        pages: u64,
        page_size: u32,
        role: Role,
        local_disk: bool,
        (cpu, contract): (Qos, Contract),
        (net, net_contract): (Qos, Contract),
    ) {
        self.data.open_stream(stream, token, page_size);
        self.sched.admit(stream as usize, contract, now);
        self.net.admit(stream as usize, net_contract, now);
        self.reserved_bytes += pages * u64::from(page_size);
        self.counts.created += 1;
        let report = ClientReport {
            client,
            stream,
            role,
            local_disk,
            reserved: pages,
            cpu,
            net,
            ..ClientReport::default()
        };
        self.mem.streams.insert(
            stream,
            Stream {
                report,
                token,
                last_contact: now,
                pages: BTreeMap::new(),
                page_size,
                queue: VecDeque::new(),
                send: VecDeque::new(),
            },
        );
    }

    fn answer(
        &mut self,
        to: Endpoint,
        h: Header,
        message: Message<'_>,
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) {
        let header = Header { stream: h.stream, token: h.token, request: h.request };
        if let Ok(len) = wire::encode(&Packet { header, message }, &mut self.buf) {
            out(to, &self.buf[..len]);
        }
    }

    /// Serves the next queued packet of the client the scheduler picks at `now`, charging it
    /// the time `cpu` measured. Its replies wait in the client's send queue for
    /// [`Server::transmit`]. False if no client may be served now.
    pub fn serve(&mut self, now: u64, cpu: &mut dyn FnMut() -> u64) -> bool {
        let Some((i, grant)) = self.sched.pick(now) else { return false };
        let stream = i as u32;
        let start = cpu();
        let Some((from, bytes)) =
            self.mem.streams.get_mut(&stream).and_then(|s| s.queue.pop_front())
        else {
            self.sched.set_ready(i, false);
            return true;
        };
        let mut replies: Vec<(Endpoint, Vec<u8>)> = Vec::new();
        let mut out = |to: Endpoint, b: &[u8]| replies.push((to, b.to_vec()));
        let verdict = self.data.on_packet(&mut self.mem, &bytes, &mut |b| out(from, b));
        if let Verdict::Control { packet, authenticated: true } = verdict {
            self.control(now, from, packet, &mut out);
        } else if let Verdict::Control { .. } | Verdict::Dropped(DropReason::Unexpected) = verdict {
            self.counts.unexpected += 1;
        }
        match self.mem.streams.get_mut(&stream) {
            Some(s) => {
                for r in replies {
                    if s.send.len() >= SEND_QUEUE {
                        s.report.send_drops += 1;
                    } else {
                        s.send.push_back(r);
                        self.net.set_ready(i, true);
                    }
                }
            }
            // Released: its last answers are the server's own.
            None => self.loose.extend(replies),
        }
        let spent = cpu().saturating_sub(start);
        self.sched.charge(i, spent, grant);
        let empty = self.mem.streams.get(&stream).is_none_or(|s| s.queue.is_empty());
        if empty {
            self.sched.set_ready(i, false);
        }
        true
    }

    /// Hands `out` the replies that may leave at `now`: while the link is busy less than the
    /// window ahead of `now`, the next reply of the client the network scheduler picks (EDF
    /// over the clients' network contracts, charged the reply's link time; the server's own
    /// replies first). How many it sent; what waits is told by [`Server::next_wakeup`].
    pub fn transmit(&mut self, now: u64, out: &mut dyn FnMut(Endpoint, &[u8])) -> usize {
        let mut sent = 0;
        self.link_blocked = false;
        loop {
            if self.link_free > now.saturating_add(self.link.window_ns) {
                self.link_blocked = !self.loose.is_empty() || self.has_replies();
                return sent;
            }
            let (to, bytes) = if let Some(r) = self.loose.pop_front() {
                self.counts.unattributed_net_ns += self.link.frame_ns(r.1.len());
                r
            } else {
                let Some((i, grant)) = self.net.pick(now) else { return sent };
                let Some(s) = self.mem.streams.get_mut(&(i as u32)) else {
                    self.net.set_ready(i, false);
                    continue;
                };
                let Some(r) = s.send.pop_front() else {
                    self.net.set_ready(i, false);
                    continue;
                };
                s.report.sent += 1;
                if s.send.is_empty() {
                    self.net.set_ready(i, false);
                }
                self.net.charge(i, self.link.frame_ns(r.1.len()), grant);
                r
            };
            out(to, &bytes);
            self.link_free =
                self.link_free.max(now).saturating_add(self.link.frame_ns(bytes.len()));
            sent += 1;
        }
    }

    /// Whether any stream has replies waiting for the link.
    fn has_replies(&self) -> bool {
        self.mem.streams.values().any(|s| !s.send.is_empty())
    }

    /// A control message on an open stream, its token checked.
    fn control(
        &mut self,
        now: u64,
        from: Endpoint,
        p: Packet<'_>,
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) {
        let stream = p.header.stream;
        match p.message {
            Message::Release => {
                self.revoked_released(stream);
                self.close(stream);
                self.answer(from, p.header, Message::Ack { vpn: 0, code: Code::None }, out);
            }
            Message::SwitchMirror => {
                if let Some(s) = self.mem.streams.get_mut(&stream) {
                    s.report.role = Role::Primary;
                }
                self.answer(from, p.header, Message::Ack { vpn: 0, code: Code::None }, out);
            }
            Message::Heartbeat => self.answer(from, p.header, Message::Alive, out),
            Message::RevokeReply { answer } => {
                self.revoke_reply(now, stream, answer);
                self.answer(from, p.header, Message::Ack { vpn: 0, code: Code::None }, out);
            }
            // The client's word that its old server forwarded every page here: nothing to
            // change (forwarded pages never replaced its own), acknowledged. On a stream being
            // revoked in part: the client moved the pages wanted, the reservation shrinks.
            Message::OffloadDone { .. } => {
                self.partial_moved(stream);
                self.answer(from, p.header, Message::Ack { vpn: 0, code: Code::None }, out)
            }
            Message::AddResources { pages } => {
                let message = self.add_resources(stream, pages);
                self.answer(from, p.header, message, out);
            }
            _ => self.counts.unexpected += 1,
        }
    }

    /// More memory for an open stream, checked against memory only (§10.3).
    fn add_resources(&mut self, stream: u32, pages: u64) -> Message<'static> {
        let Some(s) = self.mem.streams.get_mut(&stream) else {
            return Message::Refused { reason: RefuseReason::BadRequest };
        };
        let bytes = pages.saturating_mul(u64::from(s.page_size));
        if pages == 0 || self.reserved_bytes.saturating_add(bytes) > self.memory_bytes {
            self.counts.refused_memory += 1;
            return Message::Refused { reason: RefuseReason::Memory };
        }
        s.report.reserved += pages;
        self.reserved_bytes += bytes;
        Message::StreamCreated { stream, token: s.token, pages: s.report.reserved, data_port: 0 }
    }

    /// The link time committed to the open streams' network contracts, ppm.
    pub fn net_committed_ppm(&self) -> u64 {
        self.net.committed_ppm()
    }

    /// Sets the memory offered to clients' reservations (the advertising algorithm's room
    /// beside what is reserved): later admissions are judged against it; reservations already
    /// made stand.
    pub fn set_offer(&mut self, memory_bytes: u64) {
        self.memory_bytes = memory_bytes;
    }

    /// The memory offered to clients' reservations.
    pub fn offer(&self) -> u64 {
        self.memory_bytes
    }

    /// The server's CPU committed to its clients' contracts, ppm.
    pub fn cpu_committed_ppm(&self) -> u64 {
        self.sched.committed_ppm()
    }

    /// Closes `stream`: its pages freed, its reservation returned, its report kept.
    fn close(&mut self, stream: u32) {
        let Some(mut s) = self.mem.streams.remove(&stream) else { return };
        self.data.close_stream(stream);
        self.mem.used -= s.report.bytes;
        self.reserved_bytes -= s.report.reserved * u64::from(s.page_size);
        if let Some(c) = self.sched.remove(stream as usize) {
            s.report.cpu_ns = c.cpu_ns;
            s.report.extra_ns = c.extra_ns;
            s.report.throttled = c.throttled;
        }
        if let Some(c) = self.net.remove(stream as usize) {
            s.report.net_ns = c.cpu_ns;
            s.report.net_extra_ns = c.extra_ns;
            s.report.net_throttled = c.throttled;
        }
        // Its replies not yet sent leave as the server's own.
        self.loose.extend(s.send.drain(..));
        s.report.pages = 0;
        s.report.bytes = 0;
        s.report.released = true;
        self.done.push(s.report);
    }

    /// When a client that waits for its next period of the CPU or of the link may be served,
    /// or the link has room for replies that wait for it (none: no such client or reply).
    pub fn next_wakeup(&self) -> Option<u64> {
        // Replies held back by the link wait for it alone (the network scheduler's periods
        // were last brought up to date before the link stopped it).
        let net = match self.link_blocked {
            true => Some(self.link_free.saturating_sub(self.link.window_ns)),
            false => self.net.next_start(),
        };
        [self.sched.next_start(), net].into_iter().flatten().min()
    }

    /// Whether any stream has packets queued, or replies waiting for the link.
    pub fn has_work(&self) -> bool {
        !self.loose.is_empty()
            || self.mem.streams.values().any(|s| !s.queue.is_empty() || !s.send.is_empty())
    }

    /// Streams open now.
    pub fn open_streams(&self) -> usize {
        self.mem.streams.len()
    }

    /// Bytes of pages held now, and reserved.
    pub fn memory(&self) -> (u64, u64) {
        (self.mem.used, self.reserved_bytes)
    }

    /// Every client's report: the released ones, then the open ones.
    pub fn reports(&self) -> Vec<ClientReport> {
        let mut all = self.done.clone();
        for s in self.mem.streams.values() {
            let mut r = s.report;
            if let Some(c) = self.sched.charged(s.report.stream as usize) {
                r.cpu_ns = c.cpu_ns;
                r.extra_ns = c.extra_ns;
                r.throttled = c.throttled;
            }
            if let Some(c) = self.net.charged(s.report.stream as usize) {
                r.net_ns = c.cpu_ns;
                r.net_extra_ns = c.extra_ns;
                r.net_throttled = c.throttled;
            }
            all.push(r);
        }
        all
    }

    /// The server's own counts.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The data path's counts.
    pub fn data_stats(&self) -> ServerStats {
        self.data.stats()
    }
}
