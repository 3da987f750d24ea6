//! The interface of Tessera's block path: what a client domain and a block driver domain agree
//! on, and what a disk driver implements. Everything else on the path (the server, the
//! schedulers, the client) is built on these types.
//!
//! # The protocol
//! A client has a request channel to the driver and a response channel back. The driver owns
//! the memory the data moves through: for each client it takes a *data area*, a range of its
//! own DMA stretch (which the device reaches directly), and grants the client read-write
//! rights to it. The client's Open request returns the area's address and length and the
//! disk's geometry ([`protocol::SessionInfo`]); afterwards each Read or Write names a sector
//! range and an `(offset, len)` range of the area, so bulk data never goes through the ring
//! slots and is never copied by the driver. Requests carry client-chosen ids that responses
//! echo; several are in flight at once and complete in any order. The wire format, fixed-size
//! little-endian messages that fit one 64-byte slot, is in [`protocol`]; the errors, with
//! stable codes, are [`protocol::BlkError`]; a stream's disk-time accounts, which the driver
//! publishes after the data area, are [`protocol::StreamAccounts`].
//! The mechanics the network protocol shares (codes generated from one list, little-endian
//! fields, words published under a sequence number) are the `io_protocol` crate's.
//!
//! # The device
//! [`device::BlockDevice`] is the one block-device trait of the tree: a device with several
//! requests in flight, each named by a tag, completed in any order, polled after its
//! interrupt. The virtio-blk and AHCI driver domains implement it, and so does the in-memory
//! disk of `blk_workloads` on the host.
//!
//! # Invariants
//! - Decoding never panics on any bytes; whatever decodes re-encodes to the same bytes.
//! - Error and op codes are stable (they are on the wire).
//! - A [`protocol::SessionInfo`] checks a transfer the same way on both sides
//!   ([`protocol::SessionInfo::check_transfer`]), so a client refuses locally what the driver
//!   would refuse.
//!
//! The crate is `no_std`, has no `unsafe` code, no allocation and no system calls. Not
//! implemented: a variable-size message (scatter-gather lists), and requests that name the
//! client's own memory instead of the data area.

#![no_std]
#![forbid(unsafe_code)]

pub mod device;
pub mod protocol;

#[cfg(test)]
mod tests;

pub use device::{BlockDevice, Buffer, DeviceError, DeviceOp, DeviceRequest, Tag};
pub use protocol::{BlkError, Op, Request, Response, SessionInfo, StreamAccounts};
