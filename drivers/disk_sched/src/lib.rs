//! Tessera's disk schedulers: which pending request the disk serves next, with the user-safe
//! disk ([`usd`]) among them. `no_std` (with `alloc`), no `unsafe` code, no system calls: all
//! of it is tested on the host, and the block server (`blk_server`) drives it through
//! [`Scheduler`].
//!
//! The framework of the anticipatory-scheduling work (Iyer and Druschel, SOSP 2001, and Iyer's
//! thesis) has three parts; this module has the first, the base policies, each unaware of
//! anticipation behind one interface ([`Policy`]: `enqueue`, `choose` without dequeuing,
//! `dequeue`, `finish`):
//! - [`Fcfs`]: first come, first served;
//! - [`Sstf`]: shortest seek (smallest LBN distance from the head) first;
//! - [`Sptf`]: shortest positioning time first, by a [`Positioning`] estimate;
//! - [`AgedSptf`]: SPTF, except that a request pending longer than a bound is served first
//!   (oldest first), which bounds every request's latency;
//! - [`Cscan`]: circular scan (C-LOOK): the nearest request at or beyond the head, else the
//!   lowest one;
//! - [`Stride`]: proportional share of disk *service time*: each client's virtual clock
//!   advances on completion by the request's service time over its share; the client with the
//!   least clock among those with pending requests is served (its requests in arrival order);
//!   a client that comes back after having had nothing to do for a while starts at the least
//!   clock of the others, so idling earns no credit. With a window `tau`, it is the relaxed Stride of the
//!   combination heuristic: among clients whose clocks lie within `tau` of the least, the
//!   request with the shortest positioning time.
//!
//! Every policy holds at most the number of requests it was made for ([`Full`] beyond), so
//! nothing grows per request. Times are nanoseconds of the caller's clock, positions are
//! logical block numbers (sectors).
//!
//! The second and third parts: [`Anticipation`], the core (IDLE, BUSY, WAIT; one timeout,
//! never extended; the short-circuit when the last client is blocked on the disk), and
//! [`heuristics`], one rule per kind of policy, over each client's [`stats`] (think-time
//! histogram, expected positioning time, seek direction).
//!
//! [`sim`] runs synchronous readers against a simulated disk through the core, for the tests
//! and the experiments of the paper.
//!
//! [`scheduler`] puts a policy wrapped in the core, or USD's streams ([`usd`]), behind
//! the one interface the block server drives ([`Scheduler`]), built by name.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod anticipation;
mod cscan;
mod fcfs;
pub mod heuristics;
mod policy;
mod positioning;
pub mod scheduler;
pub mod sim;
mod sptf;
pub mod stats;
pub mod stride;
pub mod usd;

pub use anticipation::{
    Anticipation, Decision, Heuristic, LATE_ALLOWANCE_NS, WaitEnd, WaitRecord, WaitTotals,
    WaitTrace, Weighing,
};
pub use cscan::Cscan;
pub use fcfs::{Fcfs, Sstf};
pub use policy::{Full, Pending, Policy, Queue};
pub use positioning::{LbnCurve, Positioning};
pub use scheduler::{FcfsQueue, PolicyName, Scheduler};
pub use sptf::{AgedSptf, Sptf};
pub use stride::Stride;

#[cfg(test)]
mod tests;

/// The graded tests of the lab `disk` (`labs/disk/lab.toml`, docs/labs/disk.md).
#[cfg(test)]
#[path = "lab_disk_tests.rs"]
mod lab_disk;
