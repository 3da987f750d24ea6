//! Tessera's network client: what a client domain needs to use the network driver domain's
//! UDP endpoints (the protocol of `net_interface::protocol`).
//!
//! - [`session`]: [`Session`], one UDP endpoint: [`Session::open`] on a port,
//!   [`Session::send`] a datagram (its payload written into the data area's send bytes, then
//!   the Send request), [`Session::send_lent`] the range of a frame the domain has lent the
//!   driver (only the datagrams' heads written into the data area: the payload is never
//!   copied), [`Session::receive`] the next datagram, read in place in its receive
//!   slot and then given back (Release), or [`Session::receive_until`] the same with a
//!   deadline on the domain's clock (`Ok(None)` when it passes first, for a client that
//!   must not wait forever for a datagram that may be lost), [`Session::close`], and
//!   [`Session::accounts`], the
//!   stream's accounts. Errors are [`NetError`]s: the driver's answer, or
//!   [`NetError::Closed`] when the driver is gone, [`NetError::Malformed`] for a message that
//!   does not decode. Portable: it reaches the channels and the area through the
//!   [`Transport`] trait, and is tested on the host against `net_server`'s loop.
//! - [`accounts`]: the reader of the accounts the driver publishes (a sequence number, odd
//!   while the driver writes, then the words).
//! - `channel`: `ChannelTransport`, the [`Transport`] over the runtime's IO channels
//!   (`NAME-req`, `NAME-resp`) and the data area the Open granted, built for the targets only
//!   (`cfg(target_os = "none")`); its `unsafe` blocks reaching the driver's memory are the
//!   crate's only ones.
//!
//! # Invariants
//! - One request in flight at a time: every call sends one request and waits for the response
//!   that echoes its id; datagrams that arrive meanwhile are kept, in order, for
//!   [`Session::receive`] (at most the session's receive slots).
//! - A send is checked against the session ([`SessionInfo::check_send`]) before it costs a
//!   round trip; the data area is only reached inside its bounds.
//! - A receive slot is read only between its Received message and its Release.
//!
//! Not implemented: several requests in flight, a deadline on a call's response (the
//! driver domain is local and trusted), and a send
//! that names a payload already in the area (every send copies its payload there first).

#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

pub mod accounts;
#[cfg(target_os = "none")]
pub mod channel;
pub mod session;

#[cfg(test)]
mod tests;

#[cfg(target_os = "none")]
pub use channel::ChannelTransport;
pub use net_interface::{Endpoint, NetError, SessionInfo, StreamAccounts};
pub use session::{Datagram, Session, Transport};
