//! Tessera's remote paging control plane as plain logic (Heracles, McDonald 2001, §10.2–10.5):
//! everything a paging server, a trader and a remote paging client decide, without their I/O.
//! Time is a `u64` of nanoseconds the caller passes in; nothing here reads a clock, sends a
//! packet or allocates without bound, so every rule is tested on the host on hand-made cases and
//! behaves the same on every run.
//!
//! - [`advertiser`]: [`Advertiser`], the server's advertising threshold algorithm (Fig 10.4):
//!   at every poll it grows, shrinks or backs off the memory it advertises to its traders so
//!   that committed plus advertised memory stays near `THRESHOLD` and never above
//!   `THRESHOLD + 10%`, backs off at once when it admits a client, re-sends to a trader that
//!   did not answer, and asks for a revocation only when committed memory passes
//!   `MAX_THRESHOLD`, which only local domains can make it do.
//! - [`trader`]: [`TraderTable`], a trader's current adverts ordered by memory: a query for
//!   X bytes is answered with up to five servers advertising at least X; stale adverts expire.
//! - [`admission`]: [`Admission`], the server's record of its clients and their commitments:
//!   a new client is checked against memory, CPU and network; more memory for an existing
//!   client against memory only (§10.3).
//! - [`victim`]: [`choose_victims`], the five rounds of §10.5 that pick which clients to
//!   revoke until enough memory is free.
//! - [`select`]: [`Selection`], the client's choice of servers (§10.4): its static servers,
//!   then the trader's candidates one by one, the trader asked once more, then giving up (the
//!   backing store manager pages locally).
//! - [`revoke`]: the revocation state machines of active participation (§10.5): the server
//!   revoking ([`ServerRevocation`]), the client moving its pages ([`ClientRevocation`]), and
//!   the new server's rule that pages the client sent beat pages forwarded by the old server
//!   ([`ForwardFilter`]).
//!
//!
//! The messages of the control plane (the remote paging protocol's `Advert`, `TraderQuery` and
//! `TraderAnswer`, `rpp::wire`) are spoken by two sans-IO layers over these policies:
//! [`service`] ([`TraderService`], the trader's answers, bytes in and bytes out) and [`link`]
//! ([`AdvertLink`], a server's adverts to its traders with their acknowledgements;
//! [`TraderAsk`], a client's query to one trader with its retries).
//!
//! Where the thesis leaves a quantity open, the choice made here is written in the module that
//! makes it (the percentages of Fig 10.4 are fractions of `THRESHOLD`; `THRESHOLD` is 89% of
//! `MAX_THRESHOLD`; a revocation's notice is re-sent and then given up on).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod admission;
pub mod advertiser;
pub mod link;
pub mod revoke;
pub mod select;
pub mod service;
pub mod trader;
pub mod victim;

pub use admission::{Admission, ClientRecord, Refusal, Request, Role};
pub use advertiser::{Advertiser, AdvertiserConfig, Poll, Sample};
pub use link::{AdvertLink, TraderAsk};
pub use revoke::{ClientRevocation, ForwardFilter, ServerRevocation};
pub use select::{Selection, Step};
pub use service::TraderService;
pub use trader::TraderTable;
pub use victim::{Candidate, choose_victims};

/// A page number, as the remote paging protocol names pages.
pub type Vpn = u64;

/// A client's identity on a server.
pub type ClientId = u64;

/// Nanoseconds per second, for the defaults.
pub const SECOND: u64 = 1_000_000_000;
