//! The remote paging server's core (Heracles §10.3, §10.6), apart from the domain that runs it
//! (`userland/apps/paging_server`): clients' streams of pages in a bounded amount of the
//! server's memory, served over the remote paging protocol (`rpp`), each client charged the
//! server's CPU time spent on it and served by its contract.
//!
//! [`Server`] is sans-IO: the domain hands it each datagram received
//! ([`Server::receive`]), lets it serve queued work one packet at a time
//! ([`Server::serve`]), and sends what it gives to `out`.
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
//!   picks (EDF over the clients' `(period, slice)` contracts from their `CreateStream`, slack
//!   time to clients that may use it) and charges that client the CPU the server's clock
//!   measured handling it. A client over its slice waits for its next period
//!   ([`Server::next_wakeup`]).
//! - **Control plane.** A new client is checked against the network beside memory and CPU (the
//!   link time of its `CreateStream` beside the others'); `AddResources` against memory only;
//!   the memory offered follows the advertising algorithm ([`Server::set_offer`], the domain's
//!   `control` module). [`Server::revoke`] takes memory back from clients with their active
//!   participation ([`revoke`]: victims by `remote_control`'s five rounds, their pages forwarded
//!   to the new servers they name).
//! - **Reports.** [`Server::reports`] gives, per client (open or released), its pages, reads,
//!   writes, frees, CPU charged (and the part in slack time), periods throttled, refused
//!   packets and queue drops.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod revoke;
pub mod sched;

#[cfg(test)]
mod tests;

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use net_interface::Endpoint;
use rpp::server::{DropReason, PageServer, PageStore, ServerStats, StoreError, Verdict};
use rpp::wire::{self, Code, Header, Message, Packet, Qos, RefuseReason, Role};

use sched::{Contract, Scheduler};

/// Packets a stream may have queued for service.
pub const QUEUE: usize = 64;

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
    /// Whether it released its stream.
    pub released: bool,
    /// Its contract.
    pub cpu: Qos,
}

/// A server's own counts, beyond the data path's ([`ServerStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Streams created.
    pub created: u64,
    /// Streams refused, by reason: memory, CPU, a bad request.
    pub refused_memory: u64,
    /// See [`Counts::refused_memory`].
    pub refused_cpu: u64,
    /// See [`Counts::refused_memory`].
    pub refused_bad: u64,
    /// Packets refused for an unknown stream or a wrong token.
    pub bad_token: u64,
    /// Packets that did not decode.
    pub malformed: u64,
    /// Control messages a server does not take (or not from a stream), dropped.
    pub unexpected: u64,
    /// CPU spent on packets of no stream (creations, refusals), ns.
    pub unattributed_ns: u64,
}

/// One stream's pages and counts.
struct Stream {
    report: ClientReport,
    /// Its token (for the server's own messages to the client: revocation).
    token: u64,
    /// When its client last sent an authenticated packet.
    last_contact: u64,
    /// Its share of the server's network time, ppm.
    net_ppm: u64,
    pages: BTreeMap<u64, Vec<u8>>,
    page_size: u32,
    queue: VecDeque<(Endpoint, Vec<u8>)>,
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

    /// Takes one datagram from `from` at `now`: a creation is answered at once, a packet
    /// that fails its stream's check is refused at once, anything else waits in its
    /// stream's queue for [`Server::serve`]. `cpu` is the server's clock for what the
    /// immediate answers cost.
    pub fn receive(
        &mut self,
        now: u64,
        cpu: &mut dyn FnMut() -> u64,
        from: Endpoint,
        bytes: &[u8],
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) {
        let start = cpu();
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
                let net_ppm = net.slice_ns.saturating_mul(1_000_000) / net.period_ns.max(1);
                let admitted = self.admit(pages, page_size, cpu).and_then(|c| {
                    // The network beside the CPU (§10.3: a new client is checked against
                    // memory, CPU and network).
                    match self.net_committed().saturating_add(net_ppm) > 1_000_000 {
                        true => Err(RefuseReason::Net),
                        false => Ok(c),
                    }
                });
                let message = match admitted {
                    Ok(contract) => {
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
                            cpu,
                            contract,
                        );
                        if let Some(s) = self.mem.streams.get_mut(&stream) {
                            s.net_ppm = net_ppm;
                        }
                        Message::StreamCreated { stream, token, pages, data_port: 0 }
                    }
                    Err(reason) => {
                        match reason {
                            RefuseReason::Memory => self.counts.refused_memory += 1,
                            RefuseReason::Cpu => self.counts.refused_cpu += 1,
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
        let contract = Contract { period_ns: cpu.period_ns, slice_ns: cpu.slice_ns, extra: true };
        if self.sched.committed_ppm() + contract.ppm() > 1_000_000 {
            return Err(RefuseReason::Cpu);
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
        cpu: Qos,
        contract: Contract,
    ) {
        self.data.open_stream(stream, token, page_size);
        self.sched.admit(stream as usize, contract, now);
        self.reserved_bytes += pages * u64::from(page_size);
        self.counts.created += 1;
        let report = ClientReport {
            client,
            stream,
            role,
            local_disk,
            reserved: pages,
            cpu,
            ..ClientReport::default()
        };
        self.mem.streams.insert(
            stream,
            Stream {
                report,
                token,
                last_contact: now,
                net_ppm: 0,
                pages: BTreeMap::new(),
                page_size,
                queue: VecDeque::new(),
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
    /// the time `cpu` measured; answers to `out`. False if no client may be served now.
    pub fn serve(
        &mut self,
        now: u64,
        cpu: &mut dyn FnMut() -> u64,
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) -> bool {
        let Some((i, grant)) = self.sched.pick(now) else { return false };
        let stream = i as u32;
        let start = cpu();
        let Some((from, bytes)) =
            self.mem.streams.get_mut(&stream).and_then(|s| s.queue.pop_front())
        else {
            self.sched.set_ready(i, false);
            return true;
        };
        let verdict = self.data.on_packet(&mut self.mem, &bytes, &mut |b| out(from, b));
        if let Verdict::Control { packet, authenticated: true } = verdict {
            self.control(now, from, packet, out);
        } else if let Verdict::Control { .. } | Verdict::Dropped(DropReason::Unexpected) = verdict {
            self.counts.unexpected += 1;
        }
        let spent = cpu().saturating_sub(start);
        self.sched.charge(i, spent, grant);
        let empty = self.mem.streams.get(&stream).is_none_or(|s| s.queue.is_empty());
        if empty {
            self.sched.set_ready(i, false);
        }
        true
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

    /// Network time committed to the open streams, ppm.
    fn net_committed(&self) -> u64 {
        self.mem.streams.values().map(|s| s.net_ppm).sum()
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
        s.report.pages = 0;
        s.report.bytes = 0;
        s.report.released = true;
        self.done.push(s.report);
    }

    /// When a client that waits for its next period may be served (none: no such client).
    pub fn next_wakeup(&self) -> Option<u64> {
        self.sched.next_start()
    }

    /// Whether any stream has packets queued.
    pub fn has_work(&self) -> bool {
        self.mem.streams.values().any(|s| !s.queue.is_empty())
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
