//! Test support for Tessera's block path: what drives and checks it from outside the driver.
//!
//! - [`mem_disk`]: [`MemDisk`], an in-memory [`blk_interface::BlockDevice`] whose requests
//!   complete in a seeded, out-of-order sequence, with bad sectors on request: the device of
//!   the server's host tests and host benches.
//! - [`workload`]: a client's seeded transfers and the disk contents they leave, shared by the
//!   `blkbench` client app and the host's check of the disk image after a QEMU run.
//! - [`reader`]: the access patterns of the `diskread` benchmark client (sequential,
//!   alternate, random, bursts, the hog): each request's place, kind and think time.
//! - [`Rng`]: the seeded generator (SplitMix64) all of them draw from.
//!
//! Invariants: everything is deterministic from its seed (a run, a disk image and its check
//! agree); nothing here makes a system call. The crate is `no_std` (with `alloc`) with no
//! `unsafe` code, so the client apps link it as they are and the host tests it. Not
//! implemented: a device that models time (that is `disk_model`'s job, in the server).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod mem_disk;
pub mod reader;
pub mod workload;

#[cfg(test)]
mod tests;

pub use mem_disk::{DmaMemory, MemDisk, Rng};
