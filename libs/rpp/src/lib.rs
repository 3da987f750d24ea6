//! The remote paging protocol (RPP) of Heracles (thesis §10.1), by which Tessera nodes keep
//! pages in each other's spare memory: whole pages read, written and exchanged over UDP, with
//! reliability added per page, and the control messages of the trader, the servers and the
//! clients (§10.2 to §10.7).
//!
//! The crate is the protocol only, with no I/O and no clock: [`wire`] encodes and decodes
//! every message; [`client`] and [`server`] are sans-IO state machines of the data path (the
//! caller passes the time in nanoseconds, hands in each received UDP payload and sends the
//! packets they give back); [`rtt`] estimates round trips. The remote paging client, the
//! paging server domain and the trader are built on it elsewhere.
//!
//! # The data path
//! A page is split into chunks of at most [`wire::MAX_CHUNK`] (1,421) bytes, so that a packet
//! fits one Ethernet frame's UDP payload (1,472 bytes): a 4 KiB page is 3 data packets, as in
//! the thesis. Every packet of one operation carries the same request id.
//!
//! A page written may be shorter than the stream's page size: a client that compresses its
//! pages (Heracles §3.6) sends the compressed bytes, in fewer chunks (a 4 KiB page compressed
//! 2:1 is 2 packets). Requests and chunks name the length sent as their `page size`; the
//! server stores what it was sent and answers a read (which names the stream's page size, the
//! longest it takes) at the stored length. The bytes' meaning is the client's.
//! - **Write**: the client sends every chunk ([`wire::Message::Data`]). The server reassembles
//!   the page in a buffer and stores it only once whole, then sends one ACK: one ACK per page.
//!   When the page's last chunk arrives with gaps before it, the server sends a NACK whose
//!   bitmap names *every* missing chunk (the thesis's suggested improvement over one NACK per
//!   missing packet), and the client resends those only. If nothing comes back in time, the
//!   client asks ([`wire::Message::Write`]) and the server answers with the ACK or the NACK.
//! - **Read**: the client asks ([`wire::Message::Read`]); the server sends every chunk, or a
//!   NACK if it does not hold the page; the client ACKs the whole page. When the last chunk
//!   arrives with gaps, or at the timeout, the client NACKs every missing chunk; when nothing
//!   came, it asks again.
//! - **Exchange**: a write and then a read of another page, in one operation: the client sends
//!   [`wire::Message::Exchange`] and the written page's chunks; once the write is stored the
//!   server sends the other page, whose chunks carry [`wire::DataFlags::WRITE_ACK`] (the
//!   write's ACK piggy-backed).
//! - **Free** is answered by an ACK. **Offload** (a revoking server forwarding a client's
//!   pages to the client's new server) is a write flagged [`wire::DataFlags::OFFLOAD`].
//!
//! Timeouts come from the server's round trips ([`rtt::RttEstimator`]: Jacobson/Karels, RTO =
//! SRTT + 4·RTTVAR clamped, Karn's rule, doubling per timeout); after
//! [`client::Params::retries`] timeouts in a row without progress the server is unreachable.
//!
//! # Wire format
//! Every field big-endian. The header (28 bytes):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 2 | magic `"RP"` |
//! | 2 | 1 | version (1) |
//! | 3 | 1 | op ([`wire::Op`]) |
//! | 4 | 2 | body length (bytes after the header; the datagram is exactly header + body) |
//! | 6 | 2 | reserved, zero |
//! | 8 | 4 | CRC-32 (IEEE) of the whole packet with this field zero |
//! | 12 | 4 | stream: the client's stream at the server (0 before one exists) |
//! | 16 | 8 | token: the stream's secret, checked by the server on every packet |
//! | 24 | 4 | request id: one per operation, the same on its retries |
//!
//! The bodies (`u8`..`u64` integers; an endpoint is 4 address bytes and a 2-byte port):
//!
//! | op | code | body |
//! |---|---|---|
//! | Read | 1 | vpn u64, page size u32 |
//! | Write | 2 | vpn u64, page size u32, tot u16 |
//! | Exchange | 3 | vpn u64, page size u32, tot u16, read vpn u64 |
//! | Data | 4 | vpn u64, page size u32, off u32, size u16, tot u16, num u16, flags u8, payload (size bytes) |
//! | Ack | 5 | vpn u64, code u16 ([`wire::Code`]) |
//! | Nack | 6 | vpn u64, code u16, n u8 (≤ 32), bitmap n bytes (chunk 8i+j is bit j of byte i; no trailing zero byte) |
//! | Free | 7 | vpn u64 |
//! | Advert | 16 | server endpoint, bytes u64, flags u8 (1: CPU committable, 2: network committable) |
//! | TraderQuery | 17 | bytes u64 |
//! | TraderAnswer | 18 | n u8 (≤ 5), n × (endpoint, bytes u64) |
//! | CreateStream | 19 | pages u64, page size u32, role u8 (0 primary, 1 mirror), has local disk u8, CPU period u64, slice u64, network period u64, slice u64 |
//! | StreamCreated | 20 | stream u32, token u64, pages u64, data port u16 |
//! | Refused | 21 | reason u16 ([`wire::RefuseReason`]) |
//! | AddResources | 22 | pages u64 |
//! | Release | 23 | (none) |
//! | RevokeNotice | 24 | pages u64 |
//! | RevokeReply | 25 | kind u8 (0 no server, 1 hold, 2 hold with target), target: endpoint, stream u32, token u64 |
//! | OffloadStart | 26 | pages u64 |
//! | OffloadDone | 27 | pages u64 |
//! | SwitchMirror | 28 | (none) |
//! | Heartbeat | 29 | (none) |
//! | Alive | 30 | (none) |
//!
//! A data chunk obeys `1 <= tot <= 256`, `num < tot`, `off + size <= page size` and
//! `size <= 1421`. The `page size` of a Write, an Exchange and a data chunk is the length of
//! the page sent (1 to the stream's page size); a Read's is the stream's page size. The checksum is CRC-32 (`crc32fast`): UDP's own checksum is optional and
//! the tests corrupt packets above UDP, so RPP checks its own; a corrupted packet is dropped
//! and counted like a lost one.
//!
//! # Invariants
//! - [`wire::decode`] never panics; the encoding is canonical: whatever decodes re-encodes to
//!   the same bytes, and [`wire::encode`] refuses a message that would not decode.
//! - A server touches a stream's pages only for packets carrying the stream's token; anything
//!   else is counted and refused with [`wire::Code::BadToken`], and nothing is read back.
//! - A server stores a page only whole; a write older (by request id, wrapping) than the
//!   page's last write or free is acknowledged and not stored, so duplicates and late
//!   retransmissions never overwrite newer data; a forwarded page never replaces a page the
//!   client wrote (or freed) on that server itself.
//! - Each operation ends: done, failed with the server's code, or unreachable after its
//!   retries, at a deadline bounded by the sum of its backed-off timeouts.
//!
//! Not implemented here: the control path's behaviour (admission, adverts, revocation,
//! offloading, mirroring: the trader, server and client crates do it with these messages);
//! flow control within a page operation (a page's chunks go out at once; operations in flight
//! are the caller's window); IP fragments (every packet fits one frame); authentication
//! stronger than a secret token (no defence against a host that sees the token on the wire,
//! as in the thesis).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod client;
pub mod rtt;
pub mod server;
pub mod wire;

pub use client::{Outcome, Params, StreamKey, Transfer, Transfers};
pub use rtt::{RttConfig, RttEstimator};
pub use server::{PageServer, PageStore, StoreError};
pub use wire::{
    Code, Data, DataFlags, DecodeError, EncodeError, Header, Message, Packet, decode, encode,
};
