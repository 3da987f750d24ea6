//! The core of Tessera's network domain: everything between a NIC driver (the [`Nic`] trait of
//! `net_interface`) and the client domains' UDP endpoints, host-tested. The driver domain owns
//! the device and the channels; it calls [`NetStack::poll`] on the device's interrupt, on a
//! client's request and at the instant `poll` returned, and turns clients' requests into
//! [`NetStack::open`], [`NetStack::send`], [`NetStack::release`] and [`NetStack::close`], or
//! hands their encoded requests to [`NetStack::handle`] and sends what
//! [`NetStack::next_message`] gives back ([`serve`]); `net_server`'s loop does exactly that.
//!
//! - **IP through smoltcp**: an [`Interface`](smoltcp::iface::Interface) on the NIC
//!   ([`device::NicDevice`], smoltcp's `phy::Device` over the NIC trait) resolves addresses
//!   with ARP and answers ICMP echo itself; [`NetStack::ping`] sends echo requests.
//! - **Every frame classified before smoltcp** ([`classify`]): ARP and ICMP for this host go to
//!   smoltcp; a UDP datagram for a port a client holds is copied from the NIC's receive buffer
//!   straight into one of the client's receive slots (its data area in the driver domain): one
//!   copy, and smoltcp's receive side never sees it; everything else is dropped and counted
//!   under one reason ([`Drops`]: runts, oversize, other hosts, unknown ethertype, malformed IP,
//!   bad IP, UDP or ICMP checksums, fragments, unknown protocols, no such port, receive slots
//!   full). Nothing a frame holds can make the stack panic.
//! - **Transmit streams under contracts**: each client has a bounded transmit queue and a
//!   stream in disk_sched's USD, scheduled under its `(period, slice, extra)` contract by EDF
//!   over *link time*: a datagram is charged the time its frame holds the link by the
//!   [`link::LinkModel`] (rate, Ethernet's overhead, a per-frame cost), and is only started in
//!   guaranteed time if it fits the stream's slice. One frame holds the modelled link at a time;
//!   the stream's next one starts when the model says the link is free (so the contracts hold
//!   in modelled time, whatever the NIC's ring depth). Contracts are admitted with Atropos's
//!   admission test. Each stream's completed periods (link time guaranteed and extra, a
//!   missed deadline) are recorded on request ([`NetStack::record_periods`],
//!   [`NetStack::take_periods`]).
//! - **Pages from lent frames** ([`NetStack::send_lent`], a client's SendLoan): the stack
//!   builds the Ethernet, IPv4 and UDP headers itself (UDP checksum 0), to a neighbour whose
//!   hardware address it learnt from a datagram of its (else `Unresolved`), and the NIC
//!   gathers each datagram's payload from the lent frame: no copy and no smoltcp on that path.
//!   The loan is held until every datagram of it is done with (sent, or dropped at a Close),
//!   then given back by [`NetStack::take_returned`] for the driver to return.
//! - **A bounded wait for neighbours**: smoltcp sends a UDP socket's datagrams in order, so
//!   one whose destination does not answer ARP holds back the client's later datagrams to
//!   every destination. After [`UNRESOLVED_WAIT_NS`] (three ARP requests) the socket's
//!   datagrams are dropped and counted (`dropped_tx_error`), as on a wire, for the protocol
//!   above to send again; a Close waits for unsent datagrams at most that long.
//! - **Time is the caller's**: every call takes an [`Instant`]; nothing reads a clock.
//!
//! # Invariants
//! - A client's stream has exactly one datagram in the USD while its queue is non-empty, none
//!   otherwise; the USD's dispatch order within a stream is the queue's (first in, first out).
//! - Every received frame is counted exactly once: delivered to a client, handed to smoltcp
//!   ([`NetStack::frames_to_stack`]) or dropped under one reason.
//! - A client closed with datagrams queued either way loses exactly those, counted in its
//!   final accounts; no other client's datagrams are touched.
//!
//! # Not implemented yet
//! TCP, IPv6, IP fragments (dropped and counted), receive-side contracts (a flood to one port
//! fills that client's slots only, but classifying it costs the domain CPU time), a datagram
//! that waits for ARP is charged link time when handed to smoltcp, not when it leaves, and the
//! Send path copies twice (the client's bytes into its queue, then into smoltcp's socket
//! buffer, which smoltcp writes into the NIC's buffer; SendLoan copies none). A closed client's USD stream stays
//! (blocked, no contract): the USD has no way to remove one.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod classify;
pub mod device;
pub mod link;
pub mod serve;
mod stack;

#[cfg(test)]
mod tests;

pub use classify::{DropReason, Drops};
pub use link::LinkModel;
pub use net_interface::Nic;
pub use serve::{Area, Session};
pub use stack::{ClientId, Config, EPHEMERAL_PORTS, Instant, NetStack, UNRESOLVED_WAIT_NS};
