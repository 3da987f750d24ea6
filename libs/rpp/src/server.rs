//! The server side of the data path: [`PageServer`], over the server domain's memory
//! ([`PageStore`]).
//!
//! The server only reacts (no clock): each packet it is given produces zero or more packets
//! back to its sender. It checks the stream's token on every packet (a wrong one is counted
//! and refused with [`crate::wire::Code::BadToken`]; nothing is read or touched); reassembles a write's
//! chunks in a buffer and stores the page only once it is whole, then ACKs it; NACKs the
//! missing chunks of a write when its last chunk arrives with gaps or when the client asks
//! ([`crate::wire::Message::Write`]); sends a read's chunks, and again the chunks a client's
//! NACK names. Writes are idempotent by request id: a duplicate chunk of a stored write is
//! answered with the ACK again, and a write older (by request id) than the last write or free
//! of its page is acknowledged but not stored, so a late duplicate never overwrites newer data.
//! A forwarded page ([`crate::wire::DataFlags::OFFLOAD`]) is stored only if the client has
//! not written or freed that page on this server itself (the client's copy is the newer).

use alloc::vec::Vec;

use crate::wire::{DecodeError, Packet};

/// Why a store refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreError {
    /// No such page.
    NotHeld,
    /// No room for another page.
    Full,
}

/// The server domain's memory for its clients' pages, per (stream, page number).
pub trait PageStore {
    /// Copies page `vpn` of `stream` into `buf` (its length is the stream's page size).
    fn get(&mut self, stream: u32, vpn: u64, buf: &mut [u8]) -> Result<(), StoreError>;
    /// Stores `data` (the stream's page size) as page `vpn` of `stream`, replacing any copy.
    fn put(&mut self, stream: u32, vpn: u64, data: &[u8]) -> Result<(), StoreError>;
    /// Forgets page `vpn` of `stream` (nothing if not held).
    fn free(&mut self, stream: u32, vpn: u64);
    /// Whether page `vpn` of `stream` is held.
    fn holds(&self, stream: u32, vpn: u64) -> bool;
}

/// What became of a packet given to [`PageServer::on_packet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// A data-path packet, handled (answers, if any, went out).
    Handled,
    /// A control message for the server domain: `authenticated` when its header names an
    /// open stream with its right token (stream 0 messages, such as a CreateStream, are not).
    Control {
        /// The packet.
        packet: Packet<'a>,
        /// Whether the header's stream and token were checked and right.
        authenticated: bool,
    },
    /// Dropped, counted.
    Dropped(DropReason),
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// It did not decode (a bad checksum is a corrupted packet).
    Malformed(DecodeError),
    /// Unknown stream or wrong token (refused with [`crate::wire::Code::BadToken`]).
    BadToken,
    /// A message a server does not take (a TraderAnswer, an Alive on the data path).
    Unexpected,
}

/// A server's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Packets given to the server.
    pub packets_received: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Packets dropped for a bad checksum (corrupted).
    pub corrupted: u64,
    /// Packets dropped as malformed otherwise.
    pub malformed: u64,
    /// Packets refused for an unknown stream or a wrong token.
    pub bad_token: u64,
    /// Pages stored (whole writes).
    pub pages_written: u64,
    /// Pages sent for reads (chunks resent for a NACK not counted).
    pub pages_read: u64,
    /// Chunks sent again for a client's NACK.
    pub chunks_resent: u64,
    /// Data chunks that were duplicates (of a chunk held, or of a stored write).
    pub duplicates: u64,
    /// Writes acknowledged but not stored as older than the page's last write or free, and
    /// forwarded pages not stored as the client's own copy was there.
    pub stale_writes: u64,
}

/// The data path of one server: see the module documentation.
#[derive(Debug)]
pub struct PageServer {
    _todo: Vec<u8>,
}

impl PageServer {
    /// A server sending chunks of `chunk` bytes (1 to [`crate::wire::MAX_CHUNK`]), with no
    /// stream open.
    pub fn new(chunk: usize) -> PageServer {
        let _ = chunk;
        todo!()
    }

    /// Opens `stream` with its `token` and page size (after the control path admitted it).
    /// Replaces any stream of that id.
    pub fn open_stream(&mut self, stream: u32, token: u64, page_size: u32) {
        let _ = (stream, token, page_size);
        todo!()
    }

    /// Closes `stream`: its writes in progress are dropped. The pages in the store are the
    /// caller's to free.
    pub fn close_stream(&mut self, stream: u32) {
        let _ = stream;
        todo!()
    }

    /// Whether `stream` is open with `token`.
    pub fn authenticates(&self, stream: u32, token: u64) -> bool {
        let _ = (stream, token);
        todo!()
    }

    /// Takes one received UDP payload; answers go to `out` (to the packet's sender).
    pub fn on_packet<'a, S: PageStore + ?Sized>(
        &mut self,
        store: &mut S,
        bytes: &'a [u8],
        out: &mut dyn FnMut(&[u8]),
    ) -> Verdict<'a> {
        let _ = (store, bytes, out);
        todo!()
    }

    /// The counts.
    pub fn stats(&self) -> ServerStats {
        todo!()
    }
}
