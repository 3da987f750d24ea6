//! The interface of Tessera's network path: what a client domain and the network driver domain
//! agree on, and what a NIC driver implements. The network domain's core (`net_stack`: smoltcp,
//! the demultiplexing by port, the transmit streams under contracts) is built on these types.
//!
//! # The NIC
//! [`nic::Nic`] is the one NIC trait of the tree: a device with transmit and receive rings,
//! several frames in flight each way, a MAC address, an MTU and a link state. A frame to send
//! is written straight into one of the device's transmit buffers (no staging copy); a received
//! frame is read in place in its receive buffer, which goes back to the device afterwards. The
//! virtio-net driver domain implements it over `virtio-drivers`' raw net device; on the host,
//! [`mem::MemNic`] pairs joined by an in-memory [`mem::Wire`] (with a loss filter) stand in.
//!
//! # The protocol
//! As on the block path, a client has a request channel to the driver and a message channel
//! back, and the driver grants the client a *data area*. The client opens a UDP endpoint on a
//! port, sends datagrams whose payload it has written in its data area, receives datagrams that
//! the driver has copied into receive slots of its data area (the one copy between the NIC's
//! buffer and the client), gives each slot back once read, and closes. A page a client has
//! lent the driver (the kernel's `frame_lend`) it sends with SendLoan, without a copy: the NIC
//! gathers each datagram's head from the data area and its payload from the lent frame
//! ([`nic::Nic::transmit_lent`]), and the driver returns the loan once the device is done.
//! Requests carry client-chosen ids that responses echo. The wire format, fixed-size little-endian messages
//! that fit one 64-byte slot, is in [`protocol`]; errors, with stable codes, are
//! [`protocol::NetError`]; a stream's accounts (packets and bytes each way, drops by cause,
//! link time used under its contract), which the driver publishes after the data area, are
//! [`protocol::StreamAccounts`]; a client's network contract is [`protocol::NetContract`],
//! the same `(period, slice, extra)` as the disk's, over link time.
//! The mechanics the block protocol shares (codes generated from one list, little-endian
//! fields, words published under a sequence number) are the `io_protocol` crate's.
//!
//! # Invariants
//! - Decoding never panics on any bytes; whatever decodes re-encodes to the same bytes.
//! - Error and op codes are stable (they are on the wire).
//! - [`protocol::SessionInfo::check_send`] and [`protocol::SessionInfo::check_send_loan`]
//!   check a send the same way on both sides.
//!
//! The crate is `no_std` with `alloc` (for [`mem`] only), has no `unsafe` code and no system
//! calls. Not implemented: TCP, IPv6, IP fragments, a receive into a lent frame, and checksum
//! offload.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod frame;
pub mod mem;
pub mod nic;
pub mod protocol;

#[cfg(test)]
mod tests;

pub use frame::{Endpoint, Ipv4Addr, MacAddr};
pub use nic::{DeviceRange, LinkState, Nic, NicError};
pub use protocol::{
    LoanSend, NetContract, NetError, Op, Received, Request, Response, ServerMessage, SessionInfo,
    StreamAccounts,
};
