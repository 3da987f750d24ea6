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

use alloc::vec::Vec;

use crate::rtt::RttEstimator;
use crate::wire::{Code, Packet};

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

/// One page operation with one server: see the module documentation.
#[derive(Debug)]
pub struct Transfer {
    _todo: Vec<u8>,
}

impl Transfer {
    /// Reads page `vpn` (of `page_size` bytes) from the server.
    pub fn read(
        key: StreamKey,
        request: u32,
        vpn: u64,
        page_size: u32,
        params: Params,
    ) -> Result<Transfer, TransferError> {
        let _ = (key, request, vpn, page_size, params);
        todo!()
    }

    /// Writes `page` (its length is the page size) as page `vpn`.
    pub fn write(
        key: StreamKey,
        request: u32,
        vpn: u64,
        page: Vec<u8>,
        params: Params,
    ) -> Result<Transfer, TransferError> {
        let _ = (key, request, vpn, page, params);
        todo!()
    }

    /// A server forwarding a revoked client's page `vpn` to the client's stream `key` on a
    /// new server: a write whose chunks carry [`crate::wire::DataFlags::OFFLOAD`].
    pub fn offload(
        key: StreamKey,
        request: u32,
        vpn: u64,
        page: Vec<u8>,
        params: Params,
    ) -> Result<Transfer, TransferError> {
        let _ = (key, request, vpn, page, params);
        todo!()
    }

    /// Writes `page` as page `vpn`, then reads page `read_vpn` (same size) into the same
    /// buffer ([`Transfer::page`]).
    pub fn exchange(
        key: StreamKey,
        request: u32,
        vpn: u64,
        page: Vec<u8>,
        read_vpn: u64,
        params: Params,
    ) -> Result<Transfer, TransferError> {
        let _ = (key, request, vpn, page, read_vpn, params);
        todo!()
    }

    /// Frees page `vpn` on the server.
    pub fn free(
        key: StreamKey,
        request: u32,
        vpn: u64,
        params: Params,
    ) -> Result<Transfer, TransferError> {
        let _ = (key, request, vpn, params);
        todo!()
    }

    /// The request id (every packet of the operation carries it).
    pub fn request(&self) -> u32 {
        todo!()
    }

    /// The page written or freed (for a read, the page read).
    pub fn vpn(&self) -> u64 {
        todo!()
    }

    /// Sends the operation's first packets; its first deadline is `now` + the RTO.
    pub fn start(&mut self, now: u64, rtt: &RttEstimator, out: &mut dyn FnMut(&[u8])) {
        let _ = (now, rtt, out);
        todo!()
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
        let _ = (now, packet, rtt, out);
        todo!()
    }

    /// Acts on a passed deadline (resends what is missing, or gives up); nothing before it.
    pub fn poll_timeout(&mut self, now: u64, rtt: &RttEstimator, out: &mut dyn FnMut(&[u8])) {
        let _ = (now, rtt, out);
        todo!()
    }

    /// When [`Transfer::poll_timeout`] must next be called; `None` once over.
    pub fn next_deadline(&self) -> Option<u64> {
        todo!()
    }

    /// How the operation ended; `None` while it runs.
    pub fn outcome(&self) -> Option<Outcome> {
        todo!()
    }

    /// Whether the server acknowledged the write (of a write, an offload or an exchange).
    pub fn write_acked(&self) -> bool {
        todo!()
    }

    /// The page buffer: the page read once a read or exchange is done; the page written
    /// otherwise.
    pub fn page(&self) -> &[u8] {
        todo!()
    }

    /// Gives the page buffer back (to reuse it).
    pub fn into_page(self) -> Vec<u8> {
        todo!()
    }

    /// The operation's counts.
    pub fn stats(&self) -> TransferStats {
        todo!()
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

/// Counts of a [`Transfers`].
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
/// an endpoint), each server with its own [`RttEstimator`].
#[derive(Debug)]
pub struct Transfers<P> {
    _todo: Vec<P>,
}

impl<P: Copy + Ord> Transfers<P> {
    /// No operation, no server.
    pub fn new(rtt: crate::rtt::RttConfig) -> Transfers<P> {
        let _ = rtt;
        todo!()
    }

    /// A fresh request id (counting up, wrapping; never 0): use one per operation so that
    /// operations in flight never share an id.
    pub fn next_request(&mut self) -> u32 {
        todo!()
    }

    /// Starts `transfer` with `peer`; its packets go to `out` with the peer.
    pub fn start(&mut self, now: u64, peer: P, transfer: Transfer, out: &mut dyn FnMut(P, &[u8])) {
        let _ = (now, peer, transfer, out);
        todo!()
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
        let _ = (now, peer, bytes, out);
        todo!()
    }

    /// Acts on every passed deadline.
    pub fn poll_timeout(&mut self, now: u64, out: &mut dyn FnMut(P, &[u8])) {
        let _ = (now, out);
        todo!()
    }

    /// The earliest deadline of the operations in flight.
    pub fn next_deadline(&self) -> Option<u64> {
        todo!()
    }

    /// A finished operation, if any (in no particular order).
    pub fn take_finished(&mut self) -> Option<Finished<P>> {
        todo!()
    }

    /// Operations in flight (not yet taken by [`Transfers::take_finished`]).
    pub fn in_flight(&self) -> usize {
        todo!()
    }

    /// The round-trip estimator of `peer`, if it was ever used.
    pub fn rtt(&self, peer: P) -> Option<&RttEstimator> {
        let _ = peer;
        todo!()
    }

    /// The counts.
    pub fn stats(&self) -> ClientStats {
        todo!()
    }
}
