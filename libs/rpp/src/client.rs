//! The client side of the data path: [`Transfer`], one page operation (read, write,
//! exchange, free, or a server's forwarding write) with one server, and [`Transfers`], many
//! of them in flight at once over several servers.
//!
//! Sans-IO: the caller passes the time (`now`, nanoseconds of any monotonic clock), hands in
//! the packets it receives, and sends the packets the state machine gives to its `out`
//! callback (each one whole UDP payload, to the transfer's server).
//!
//! Reliability (thesis §10.1, with the bitmap NACK): a write sends every chunk; the server
//! acknowledges the whole page once or names every missing chunk in a NACK, and only those are
//! sent again. A read asks for the page; when chunks are missing at the timeout (or when the
//! last chunk arrives with gaps) the client NACKs them all; when none came it asks again. Each
//! timeout doubles the next one (from the server's [`RttEstimator`]); after
//! [`Params::retries`] timeouts in a row without progress the server is unreachable. Only
//! operations never retransmitted give round-trip samples (Karn's rule).
//!
//! A page written may be shorter than the stream's page size (a compressed page: fewer
//! chunks). A read names the longest page it takes (the stream's page size) and ends with the
//! page at the length the server stored ([`Transfer::page`]).

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec;
use alloc::vec::Vec;

use crate::rtt::{RttConfig, RttEstimator};
use crate::wire::{
    ChunkSet, Code, Data, DataFlags, Header, MAX_CHUNK, MAX_CHUNKS, MAX_PACKET, Message, Packet,
    decode, encode,
};

/// The operation's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Payload bytes per data packet, 1 to [`crate::wire::MAX_CHUNK`].
    pub chunk: usize,
    /// Timeouts in a row without progress before the server is declared unreachable.
    pub retries: u32,
}

impl Default for Params {
    /// The largest chunk, 8 retries.
    fn default() -> Params {
        Params { chunk: crate::wire::MAX_CHUNK, retries: 8 }
    }
}

/// A client's stream at one server: what every packet's header carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StreamKey {
    /// The stream id the server gave.
    pub stream: u32,
    /// The stream's token.
    pub token: u64,
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The page is stored (write), read whole ([`Transfer::page`]), exchanged, or freed.
    Done,
    /// The server did not answer within the retries.
    Unreachable,
    /// The server refused for good ([`Code::NotHeld`], [`Code::Full`], [`Code::BadToken`],
    /// [`Code::BadRequest`]). For an exchange, [`Transfer::write_acked`] says whether the
    /// write part succeeded.
    Failed(Code),
}

/// Why an operation could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransferError {
    /// The chunk size is 0 or above [`crate::wire::MAX_CHUNK`].
    BadChunk,
    /// The page is empty, longer than `u32::MAX`, or needs more than
    /// [`crate::wire::MAX_CHUNKS`] chunks.
    BadPageSize,
}

/// Counts of one operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransferStats {
    /// Packets sent, retransmissions included.
    pub packets_sent: u64,
    /// Packets sent again (chunks a NACK named, requests repeated after a timeout).
    pub retransmits: u64,
    /// Timeouts.
    pub timeouts: u32,
}

/// What the operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    Write(DataFlags),
    Exchange { read_vpn: u64 },
    Free,
}

/// One page operation with one server: see the module documentation.
#[derive(Debug)]
pub struct Transfer {
    key: StreamKey,
    request: u32,
    vpn: u64,
    kind: Kind,
    params: Params,
    /// The page written, then (read, exchange) the page read, at its stored length.
    page: Vec<u8>,
    /// Bytes of the written page.
    write_len: u32,
    /// The longest page the read takes.
    read_max: u32,
    /// Chunks of the written page.
    tot: u16,
    write_acked: bool,
    /// The read's chunks received, their number once known, and their bytes.
    have: ChunkSet,
    read_tot: Option<u16>,
    read_bytes: usize,
    /// The fewest chunks a write's NACK has named (progress when it shrinks).
    fewest_missing: usize,
    /// When each chunk of the written page was last sent.
    sent_at: Vec<u64>,
    /// When the read's last NACK went out.
    nacked_at: Option<u64>,
    outcome: Option<Outcome>,
    started_at: u64,
    retransmitted: bool,
    /// Timeouts in a row without progress.
    attempts: u32,
    deadline: Option<u64>,
    stats: TransferStats,
}

impl Transfer {
    fn new(
        key: StreamKey,
        request: u32,
        vpn: u64,
        kind: Kind,
        page: Vec<u8>,
        read_max: u32,
        params: Params,
    ) -> Result<Transfer, TransferError> {
        if params.chunk == 0 || params.chunk > MAX_CHUNK {
            return Err(TransferError::BadChunk);
        }
        let chunks = page.len().div_ceil(params.chunk);
        let empty_ok = kind == Kind::Free;
        if page.is_empty() && !empty_ok || u32::try_from(page.len()).is_err() || chunks > MAX_CHUNKS
        {
            return Err(TransferError::BadPageSize);
        }
        Ok(Transfer {
            key,
            request,
            vpn,
            kind,
            params,
            write_len: page.len() as u32,
            read_max,
            page,
            tot: chunks as u16,
            write_acked: false,
            have: ChunkSet::EMPTY,
            read_tot: None,
            read_bytes: 0,
            fewest_missing: usize::MAX,
            sent_at: Vec::new(),
            nacked_at: None,
            outcome: None,
            started_at: 0,
            retransmitted: false,
            attempts: 0,
            deadline: None,
            stats: TransferStats::default(),
        })
    }

    /// Reads page `vpn` from the server: `page_size` is the stream's page size, the longest
    /// page taken; the page read is as long as the server stored it.
    pub fn read(
        key: StreamKey,
        request: u32,
        vpn: u64,
        page_size: u32,
        params: Params,
    ) -> Result<Transfer, TransferError> {
        let page = vec![0; page_size as usize];
        Transfer::new(key, request, vpn, Kind::Read, page, page_size, params)
    }

    /// Writes `page` as page `vpn`: the stream's page size, or fewer bytes (a compressed page),
    /// stored as sent.
    pub fn write(
        key: StreamKey,
        request: u32,
        vpn: u64,
        page: Vec<u8>,
        params: Params,
    ) -> Result<Transfer, TransferError> {
        Transfer::new(key, request, vpn, Kind::Write(DataFlags::NONE), page, 0, params)
    }

    /// A server forwarding a revoked client's page `vpn` to the client's stream `key` on a
    /// new server: a write whose chunks carry [`DataFlags::OFFLOAD`].
    pub fn offload(
        key: StreamKey,
        request: u32,
        vpn: u64,
        page: Vec<u8>,
        params: Params,
    ) -> Result<Transfer, TransferError> {
        Transfer::new(key, request, vpn, Kind::Write(DataFlags::OFFLOAD), page, 0, params)
    }

    /// Writes `page` as page `vpn` (as [`Transfer::write`]), then reads page `read_vpn` (at
    /// most `page_size` bytes, the stream's page size) into the same buffer
    /// ([`Transfer::page`]).
    pub fn exchange(
        key: StreamKey,
        request: u32,
        vpn: u64,
        page: Vec<u8>,
        read_vpn: u64,
        page_size: u32,
        params: Params,
    ) -> Result<Transfer, TransferError> {
        let kind = Kind::Exchange { read_vpn };
        Transfer::new(key, request, vpn, kind, page, page_size, params)
    }

    /// Frees page `vpn` on the server.
    pub fn free(
        key: StreamKey,
        request: u32,
        vpn: u64,
        params: Params,
    ) -> Result<Transfer, TransferError> {
        Transfer::new(key, request, vpn, Kind::Free, Vec::new(), 0, params)
    }

    /// The request id (every packet of the operation carries it).
    pub fn request(&self) -> u32 {
        self.request
    }

    /// The page written, freed or (for a read) read; for an exchange, the page written.
    pub fn vpn(&self) -> u64 {
        self.vpn
    }

    /// The page read, if the operation reads one.
    fn read_vpn(&self) -> Option<u64> {
        match self.kind {
            Kind::Read => Some(self.vpn),
            Kind::Exchange { read_vpn } => Some(read_vpn),
            Kind::Write(_) | Kind::Free => None,
        }
    }

    /// The written page's length (what its requests and chunks name as the page size).
    fn page_size(&self) -> u32 {
        self.write_len
    }

    /// Encodes `message` under this operation's header and sends it.
    fn send(&mut self, message: Message<'_>, out: &mut dyn FnMut(&[u8])) {
        let header =
            Header { stream: self.key.stream, token: self.key.token, request: self.request };
        let mut buf = [0u8; MAX_PACKET];
        if let Ok(n) = encode(&Packet { header, message }, &mut buf) {
            self.stats.packets_sent += 1;
            out(&buf[..n]);
        }
    }

    /// Sends chunk `num` of the page written.
    fn send_chunk(&mut self, now: u64, num: usize, out: &mut dyn FnMut(&[u8])) {
        let flags = match self.kind {
            Kind::Write(flags) => flags,
            _ => DataFlags::NONE,
        };
        if let Some(t) = self.sent_at.get_mut(num) {
            *t = now;
        }
        let off = num * self.params.chunk;
        let end = (off + self.params.chunk).min(self.page.len());
        let header =
            Header { stream: self.key.stream, token: self.key.token, request: self.request };
        let data = Data {
            vpn: self.vpn,
            page_size: self.page_size(),
            off: off as u32,
            tot: self.tot,
            num: num as u16,
            flags,
            payload: &self.page[off..end],
        };
        let mut buf = [0u8; MAX_PACKET];
        if let Ok(n) = encode(&Packet { header, message: Message::Data(data) }, &mut buf) {
            self.stats.packets_sent += 1;
            out(&buf[..n]);
        }
    }

    /// The read's chunks not yet received (all of them before the first).
    fn read_missing(&self) -> ChunkSet {
        let mut m = ChunkSet::first(self.read_tot.unwrap_or(0) as usize);
        for i in self.have.iter() {
            m.remove(i);
        }
        m
    }

    /// Sends the operation's first packets; its first deadline is `now` + the RTO.
    pub fn start(&mut self, now: u64, rtt: &RttEstimator, out: &mut dyn FnMut(&[u8])) {
        self.started_at = now;
        self.deadline = Some(now.saturating_add(rtt.rto()));
        let (vpn, page_size) = (self.vpn, self.page_size());
        match self.kind {
            Kind::Read => self.send(Message::Read { vpn, page_size }, out),
            Kind::Free => self.send(Message::Free { vpn }, out),
            Kind::Write(_) | Kind::Exchange { .. } => {
                if let Kind::Exchange { read_vpn } = self.kind {
                    let tot = self.tot;
                    self.send(Message::Exchange { vpn, page_size, tot, read_vpn }, out);
                }
                self.sent_at = vec![now; self.tot as usize];
                for num in 0..self.tot as usize {
                    self.send_chunk(now, num, out);
                }
            }
        }
    }

    fn finish(&mut self, outcome: Outcome, now: u64, rtt: &mut RttEstimator) {
        if outcome == Outcome::Done && !self.retransmitted {
            rtt.sample(now.saturating_sub(self.started_at));
        }
        self.outcome = Some(outcome);
        self.deadline = None;
    }

    /// Progress: the timeouts in a row start again from zero.
    fn progress(&mut self) {
        self.attempts = 0;
    }

    /// Takes a packet from the server. Returns false (and ignores it) when it is not for this
    /// operation (another stream or request id, another page) or the operation is over.
    /// A completion never retransmitted gives `rtt` a sample.
    pub fn on_packet(
        &mut self,
        now: u64,
        packet: &Packet<'_>,
        rtt: &mut RttEstimator,
        out: &mut dyn FnMut(&[u8]),
    ) -> bool {
        let h = packet.header;
        if self.outcome.is_some() || h.stream != self.key.stream || h.request != self.request {
            return false;
        }
        match packet.message {
            Message::Ack { vpn, code } if vpn == self.vpn && self.kind != Kind::Read => {
                if code != Code::None {
                    self.finish(Outcome::Failed(code), now, rtt);
                } else if let Kind::Exchange { .. } = self.kind {
                    if !self.write_acked {
                        self.write_acked = true;
                        self.progress();
                    }
                } else {
                    self.write_acked = self.kind != Kind::Free;
                    self.finish(Outcome::Done, now, rtt);
                }
                true
            }
            Message::Nack { vpn, code: Code::Missing, missing }
                if vpn == self.vpn
                    && !self.write_acked
                    && matches!(self.kind, Kind::Write(_) | Kind::Exchange { .. }) =>
            {
                let n = missing.len();
                if n < self.fewest_missing {
                    self.fewest_missing = n;
                    self.progress();
                }
                self.retransmitted = true;
                // A chunk sent again less than half a round trip ago is on its way: the NACK
                // is a duplicate, or crossed it.
                let fresh = rtt.srtt().unwrap_or(0) / 2;
                for num in 0..self.tot as usize {
                    let recent = self.sent_at.get(num).is_some_and(|&t| now - t.min(now) < fresh);
                    if missing.contains(num) && !recent {
                        self.stats.retransmits += 1;
                        self.send_chunk(now, num, out);
                    }
                }
                let backoff = now.saturating_add(rtt.rto_backoff(self.attempts));
                self.deadline = self.deadline.map(|d| d.max(backoff));
                true
            }
            Message::Nack { vpn, code, .. }
                if code != Code::Missing && (vpn == self.vpn || self.read_vpn() == Some(vpn)) =>
            {
                if let Kind::Exchange { read_vpn } = self.kind
                    && vpn == read_vpn
                    && code == Code::NotHeld
                {
                    // The read part fails only once the write is stored.
                    self.write_acked = true;
                }
                self.finish(Outcome::Failed(code), now, rtt);
                true
            }
            Message::Data(d) if Some(d.vpn) == self.read_vpn() => {
                self.on_data(now, &d, rtt, out);
                true
            }
            _ => false,
        }
    }

    fn on_data(
        &mut self,
        now: u64,
        d: &Data<'_>,
        rtt: &mut RttEstimator,
        out: &mut dyn FnMut(&[u8]),
    ) {
        // The read's length is the first chunk's page size (at most the stream's); every
        // later chunk must agree with it.
        let agrees = match self.read_tot {
            Some(tot) => tot == d.tot && d.page_size as usize == self.page.len(),
            None => (1..=self.read_max).contains(&d.page_size),
        };
        if !agrees {
            return;
        }
        if self.read_tot.is_none() {
            self.page.resize(d.page_size as usize, 0);
        }
        if let Kind::Exchange { .. } = self.kind {
            // Read data of an exchange is sent only once its write is stored.
            self.write_acked = true;
        }
        self.read_tot = Some(d.tot);
        let num = d.num as usize;
        if !self.have.contains(num) {
            self.have.insert(num);
            self.read_bytes += d.payload.len();
            let off = d.off as usize;
            self.page[off..off + d.payload.len()].copy_from_slice(d.payload);
            self.progress();
        }
        let missing = self.read_missing();
        if missing.is_empty() {
            let vpn = d.vpn;
            self.send(Message::Ack { vpn, code: Code::None }, out);
            let outcome = if self.read_bytes == self.page.len() {
                Outcome::Done
            } else {
                Outcome::Failed(Code::BadRequest)
            };
            self.finish(outcome, now, rtt);
        } else if num + 1 == d.tot as usize
            && self.nacked_at.is_none_or(|t| now - t.min(now) >= rtt.srtt().unwrap_or(0) / 2)
        {
            // The last chunk came with gaps before it: name them all at once (not again
            // within half a round trip, for a duplicate of the last chunk).
            self.retransmitted = true;
            self.nacked_at = Some(now);
            let vpn = d.vpn;
            self.send(Message::Nack { vpn, code: Code::Missing, missing }, out);
        }
    }

    /// Acts on a passed deadline (resends what is missing, or gives up); nothing before it.
    pub fn poll_timeout(&mut self, now: u64, rtt: &RttEstimator, out: &mut dyn FnMut(&[u8])) {
        match self.deadline {
            Some(d) if d <= now && self.outcome.is_none() => {}
            _ => return,
        }
        self.stats.timeouts += 1;
        self.attempts += 1;
        if self.attempts > self.params.retries {
            self.outcome = Some(Outcome::Unreachable);
            self.deadline = None;
            return;
        }
        self.retransmitted = true;
        self.stats.retransmits += 1;
        let (vpn, page_size, tot) = (self.vpn, self.page_size(), self.tot);
        match self.kind {
            Kind::Free => self.send(Message::Free { vpn }, out),
            Kind::Write(_) => self.send(Message::Write { vpn, page_size, tot }, out),
            Kind::Exchange { .. } if !self.write_acked => {
                self.send(Message::Write { vpn, page_size, tot }, out)
            }
            Kind::Read | Kind::Exchange { .. } => {
                let read_vpn = self.read_vpn().unwrap_or(vpn);
                if self.read_tot.is_none() {
                    match self.kind {
                        Kind::Exchange { read_vpn } => {
                            self.send(Message::Exchange { vpn, page_size, tot, read_vpn }, out)
                        }
                        _ => self.send(Message::Read { vpn, page_size }, out),
                    }
                } else {
                    let missing = self.read_missing();
                    self.nacked_at = Some(now);
                    self.send(Message::Nack { vpn: read_vpn, code: Code::Missing, missing }, out);
                }
            }
        }
        self.deadline = Some(now.saturating_add(rtt.rto_backoff(self.attempts)));
    }

    /// When [`Transfer::poll_timeout`] must next be called; `None` once over.
    pub fn next_deadline(&self) -> Option<u64> {
        self.deadline
    }

    /// How the operation ended; `None` while it runs.
    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome
    }

    /// Whether the server acknowledged the write (of a write, an offload or an exchange).
    pub fn write_acked(&self) -> bool {
        self.write_acked
    }

    /// The page buffer: the page read (at the length the server stored it) once a read or
    /// exchange is done; the page written otherwise (empty for a free) (partly overwritten
    /// while an exchange's read is under way).
    pub fn page(&self) -> &[u8] {
        &self.page
    }

    /// Gives the page buffer back (to reuse it).
    pub fn into_page(self) -> Vec<u8> {
        self.page
    }

    /// The operation's counts.
    pub fn stats(&self) -> TransferStats {
        self.stats
    }
}

/// A finished operation, from [`Transfers::take_finished`].
#[derive(Debug)]
pub struct Finished<P> {
    /// The server.
    pub peer: P,
    /// The operation (its [`Transfer::outcome`] is set).
    pub transfer: Transfer,
}

/// Counts of a [`Transfers`] (its operations' packets counted as they finish).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Packets sent.
    pub packets_sent: u64,
    /// Packets sent again.
    pub retransmits: u64,
    /// Packets received that decoded.
    pub packets_received: u64,
    /// Packets dropped as corrupted (checksum) or malformed.
    pub dropped_malformed: u64,
    /// Packets that decoded but matched no operation in flight (late duplicates, strays).
    pub unmatched: u64,
}

/// Many operations in flight over several servers `P` (any small copyable peer name, such as
/// an endpoint), each server with its own [`RttEstimator`]. Operations are told apart by
/// (server, request id): give each its own id ([`Transfers::next_request`]).
#[derive(Debug)]
pub struct Transfers<P> {
    rtt_config: RttConfig,
    peers: BTreeMap<P, RttEstimator>,
    live: BTreeMap<(P, u32), Transfer>,
    finished: VecDeque<Finished<P>>,
    next: u32,
    stats: ClientStats,
}

impl<P: Copy + Ord> Transfers<P> {
    /// No operation, no server.
    pub fn new(rtt: RttConfig) -> Transfers<P> {
        Transfers {
            rtt_config: rtt,
            peers: BTreeMap::new(),
            live: BTreeMap::new(),
            finished: VecDeque::new(),
            next: 0,
            stats: ClientStats::default(),
        }
    }

    /// A fresh request id (counting up, wrapping; never 0): use one per operation so that
    /// operations in flight never share an id.
    pub fn next_request(&mut self) -> u32 {
        self.next = self.next.wrapping_add(1).max(1);
        self.next
    }

    fn estimator(&mut self, peer: P) -> &mut RttEstimator {
        let config = self.rtt_config;
        self.peers.entry(peer).or_insert_with(|| RttEstimator::new(config))
    }

    /// Counts a finished operation's packets and files it.
    fn retire(&mut self, peer: P, transfer: Transfer) {
        let s = transfer.stats();
        self.stats.packets_sent += s.packets_sent;
        self.stats.retransmits += s.retransmits;
        self.finished.push_back(Finished { peer, transfer });
    }

    /// Starts `transfer` with `peer`; its packets go to `out` with the peer. An operation
    /// already in flight with the same peer and request id is replaced (and finished as
    /// unreachable).
    pub fn start(
        &mut self,
        now: u64,
        peer: P,
        mut transfer: Transfer,
        out: &mut dyn FnMut(P, &[u8]),
    ) {
        let rtt = *self.estimator(peer);
        transfer.start(now, &rtt, &mut |b| out(peer, b));
        if let Some(mut old) = self.live.insert((peer, transfer.request()), transfer) {
            old.outcome = Some(Outcome::Unreachable);
            old.deadline = None;
            self.retire(peer, old);
        }
    }

    /// Takes `bytes` received from `peer`. A data-path packet is given to its operation; a
    /// control message (a revocation, an offload's end) is returned for the caller; a
    /// corrupted or malformed one is counted and dropped.
    pub fn on_packet<'a>(
        &mut self,
        now: u64,
        peer: P,
        bytes: &'a [u8],
        out: &mut dyn FnMut(P, &[u8]),
    ) -> Option<Packet<'a>> {
        let Ok(packet) = decode(bytes) else {
            self.stats.dropped_malformed += 1;
            return None;
        };
        self.stats.packets_received += 1;
        if !packet.message.is_data_path() {
            return Some(packet);
        }
        let key = (peer, packet.header.request);
        let mut rtt = *self.estimator(peer);
        let taken = match self.live.get_mut(&key) {
            Some(t) => t.on_packet(now, &packet, &mut rtt, &mut |b| out(peer, b)),
            None => false,
        };
        self.peers.insert(peer, rtt);
        if !taken {
            self.stats.unmatched += 1;
        } else if self.live.get(&key).is_some_and(|t| t.outcome().is_some())
            && let Some(t) = self.live.remove(&key)
        {
            self.retire(peer, t);
        }
        None
    }

    /// Acts on every passed deadline.
    pub fn poll_timeout(&mut self, now: u64, out: &mut dyn FnMut(P, &[u8])) {
        let due: Vec<(P, u32)> = self
            .live
            .iter()
            .filter(|(_, t)| t.next_deadline().is_some_and(|d| d <= now))
            .map(|(&k, _)| k)
            .collect();
        for key in due {
            let rtt = *self.estimator(key.0);
            let Some(t) = self.live.get_mut(&key) else { continue };
            t.poll_timeout(now, &rtt, &mut |b| out(key.0, b));
            if t.outcome().is_some()
                && let Some(t) = self.live.remove(&key)
            {
                self.retire(key.0, t);
            }
        }
    }

    /// The earliest deadline of the operations in flight.
    pub fn next_deadline(&self) -> Option<u64> {
        self.live.values().filter_map(Transfer::next_deadline).min()
    }

    /// The oldest finished operation not yet taken, if any.
    pub fn take_finished(&mut self) -> Option<Finished<P>> {
        self.finished.pop_front()
    }

    /// Operations in flight (not yet finished).
    pub fn in_flight(&self) -> usize {
        self.live.len()
    }

    /// The round-trip estimator of `peer`, if it was ever used.
    pub fn rtt(&self, peer: P) -> Option<&RttEstimator> {
        self.peers.get(&peer)
    }

    /// Forgets `peer`'s round-trip estimate and finishes its operations as unreachable (a
    /// server given up on).
    pub fn forget(&mut self, peer: P) {
        self.peers.remove(&peer);
        let keys: Vec<(P, u32)> = self.live.keys().filter(|k| k.0 == peer).copied().collect();
        for key in keys {
            if let Some(mut t) = self.live.remove(&key) {
                t.outcome = Some(Outcome::Unreachable);
                t.deadline = None;
                self.retire(peer, t);
            }
        }
    }

    /// The counts (packets of operations in flight included).
    pub fn stats(&self) -> ClientStats {
        let mut s = self.stats;
        for t in self.live.values() {
            s.packets_sent += t.stats().packets_sent;
            s.retransmits += t.stats().retransmits;
        }
        s
    }
}
