//! The portable half of Tessera's block path: the block-device trait that disk drivers
//! implement, the block protocol a client domain speaks to a block driver domain over a pair
//! of IO channels, the protocol's driver side and client side, and an in-memory disk. The
//! crate is `no_std` (with `alloc`), has no `unsafe` code and makes no system calls, so all of
//! it is tested on the host; the driver domains (virtio-blk, AHCI) wrap it with their channels,
//! their DMA memory and their device.
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
//! stable codes, are [`protocol::BlkError`].
//!
//! # Invariants
//! - The device only ever sees requests inside the disk and inside the requesting client's
//!   data area, with lengths that are positive sector multiples no longer than the driver's
//!   largest transfer.
//! - Everything is bounded: per-client requests in flight, the driver's queue, the device's
//!   slots and the client's table are fixed at creation; nothing grows per request.
//! - A closed session's requests are never answered, and never to a later session; the other
//!   clients are not disturbed.
//! - Decoding never panics on any bytes.
//!
//! # Modules
//! - [`device`]: the [`device::BlockDevice`] trait (submit, complete, several in flight).
//! - [`protocol`]: requests, responses, errors and their encodings.
//! - [`server`]: the driver side ([`server::Server`]).
//! - [`client`]: the client side ([`client::Client`]).
//! - [`disk_model`]: [`disk_model::DiskModel`], a mechanical disk model (zones, skews, seek
//!   curve, rotation, read-ahead segment) with the paper's two drives, deterministic, for the
//!   driver domains and host runs of the schedulers.
//! - [`mem_disk`]: [`mem_disk::MemDisk`], an in-memory device with seeded out-of-order
//!   completion, for tests and host benches.
//! - [`reader`]: the access patterns of the `diskread` benchmark client (sequential,
//!   alternate, random, bursts, the hog): each request's place, kind and think time.
//! - [`sched`]: disk scheduling's base policies (FCFS, SSTF, SPTF, Aged-SPTF, C-LOOK, Stride
//!   over service time, relaxed Stride) behind one interface.
//! - [`usd`]: the user-safe disk: streams under disk-time contracts (EDF by Atropos), the
//!   stream holding the disk kept for it by anticipation, slices never overrun.
//! - [`workload`]: a client's seeded transfers and the disk contents they leave, shared by the
//!   client app and the host's check of the disk image.
//!
//! # Who runs it
//! The virtio-blk and AHCI driver domains (`drivers/virtio_blk`, `drivers/ahci`, through the
//! serving loop of `drivers/blk_domain`) serve this protocol. Without a scheduling stage the
//! server sends requests to the device first come, first served, with a bounded queue in front
//! of it; with one ([`server::stage`]), the user-safe disk ([`usd`]) picks the stream and the
//! anticipation-wrapped policy of [`sched`] the request, and with a disk `model` in the manifest
//! each request completes after the [`disk_model`]'s service time.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod client;
pub mod device;
pub mod disk_model;
pub mod mem_disk;
pub mod protocol;
pub mod reader;
pub mod sched;
pub mod server;
pub mod usd;
pub mod workload;

#[cfg(test)]
mod tests;

pub use client::{Client, Completion, ResponseError};
pub use device::{BlockDevice, Buffer, DeviceError, DeviceOp, DeviceRequest, Tag};
pub use mem_disk::{DmaMemory, MemDisk};
pub use protocol::{BlkError, Op, Request, Response, SessionInfo};
pub use server::{ClientId, Config, DataArea, Server};
