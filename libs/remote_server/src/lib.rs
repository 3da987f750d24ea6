//! The remote paging server's core (Heracles §10.3, §10.6), apart from the domain that runs it
//! (`userland/apps/paging_server`).
//!
//! - [`sched`]: the server's CPU among its clients, EDF over their contracts, each charged
//!   the time the server measured serving it.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod sched;

#[cfg(test)]
mod tests;
