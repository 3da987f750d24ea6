//! Disk scheduling: which pending request the disk serves next.
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
//!   a client that comes back after having nothing pending starts at the least clock of the
//!   others, so idling earns no credit. With a window `tau`, it is the relaxed Stride of the
//!   combination heuristic: among clients whose clocks lie within `tau` of the least, the
//!   request with the shortest positioning time.
//!
//! Every policy holds at most the number of requests it was made for ([`Full`] beyond), so
//! nothing grows per request. Times are nanoseconds of the caller's clock, positions are
//! logical block numbers (sectors).
//!
//! Not yet here: the anticipation core (IDLE, BUSY, WAIT) and its per-policy heuristics and
//! per-client statistics, and USD's streams with their disk-time contracts.

mod cscan;
mod fcfs;
mod policy;
mod positioning;
mod sptf;
mod stride;

pub use cscan::Cscan;
pub use fcfs::{Fcfs, Sstf};
pub use policy::{Full, Pending, Policy, Queue};
pub use positioning::{LbnCurve, Positioning};
pub use sptf::{AgedSptf, Sptf};
pub use stride::Stride;

#[cfg(test)]
mod tests;
