//! Tessera's block client: everything a client domain needs to use a block driver domain.
//!
//! - [`client`]: [`Client`], the protocol's client state: request ids, the requests in flight
//!   (bounded), responses matched to them, transfers checked against the session before they
//!   cost a round trip. Portable.
//! - `session`: `Session`, a domain's end of a session. The manifest gives a client domain
//!   two IO channels to a block driver domain, `NAME-req` and `NAME-resp`; a session opens
//!   them, keeps a [`Client`] and, once the driver answered the Open, the `DataArea` it
//!   granted: transfers move through that area, at the offsets the requests name. It sends
//!   with the channel's waiting `send` and receives with its waiting `recv`: the calling thread
//!   waits, the domain's other threads run. Requests in flight at once are bounded by the
//!   depth given to `Session::connect` and by the driver's limit.
//! - [`accounts`]: the stream's disk-time accounts, read from where the driver publishes them
//!   after the data area.
//! - `stream_disk`: `StreamDisk`, the pager's disk (`pager::block::SyncDisk`) over this
//!   domain's own session, so that every page the pager moves is scheduled and charged as the
//!   domain's disk stream.
//!
//! `session`, `area` and `stream_disk` reach the kernel through `libtessera`, so they are built
//! for the targets only (`cfg(target_os = "none")`; the userland clippy checks them); the rest
//! is tested on the host, [`client`] against the server in `blk_server`'s tests.
//!
//! The apps that use a disk (`blkbench`, `diskread`) and the paged stretch driver's disk
//! (`heracles`) all open their sessions here, so the channels' names, the request-response
//! step and the `unsafe` blocks that reach the driver's memory (the data area, `area`, and
//! the accounts after it) live in one place; the crate denies `unsafe` everywhere else.
//!
//! Invariants: a response is accepted only for a request in flight, once; a session never has
//! more requests in flight than the driver's limit; the data area is only reached inside its
//! bounds. Whole pages of the pager's window go to the driver without the data area: `stream_disk`
//! lends their frames (the kernel's `frame_lend`) for ReadLoan and WriteLoan requests. Not
//! implemented: sessions with no wait (polling the response channel).

#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

pub mod accounts;
#[cfg(target_os = "none")]
pub mod area;
pub mod client;
#[cfg(target_os = "none")]
pub mod session;
#[cfg(target_os = "none")]
pub mod stream_disk;

pub use client::{Client, Completion, ResponseError};
#[cfg(target_os = "none")]
pub use {
    area::DataArea,
    session::{Closed, Session, SessionError},
    stream_disk::{StreamCounts, StreamDisk},
};
