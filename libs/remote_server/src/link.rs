//! The server's link, as its clients' network contracts are measured: how long a reply holds
//! the link, and how far the server may send ahead of it.
//!
//! A reply of `n` bytes of UDP payload is a frame of `n` + 42 bytes (Ethernet, IPv4 and UDP
//! headers), padded to Ethernet's 60, plus 24 bytes of preamble, check sequence and
//! inter-frame gap; at `bits_per_s` that is its link time. This is the model `net_stack`'s
//! transmit streams are charged by (`net_stack::LinkModel`), applied before the datagram
//! reaches the driver, so that the server decides which client's reply goes next rather than
//! the driver's queue, where every client's replies share the server's one session.

use net_interface::frame::{ETH_HEADER, IPV4_UDP_HEADERS};

/// Ethernet's per-frame overhead on the wire beyond the frame: preamble and start delimiter
/// (8), frame check sequence (4), inter-frame gap (12).
const WIRE_OVERHEAD: u64 = 24;

/// Ethernet's shortest frame without its check sequence (shorter ones are padded).
const MIN_FRAME: u64 = 60;

/// The server's link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// Its rate.
    pub bits_per_s: u64,
    /// How much link time the server may hand the driver ahead of the link (the driver's
    /// queue, which keeps the link busy between two turns of the server's loop): a client's
    /// reply waits at most this long behind other clients' replies already handed over.
    pub window_ns: u64,
}

impl Link {
    /// A 100 Mbit/s link (the hub's model), with 0.5 ms (about 4 full frames) handed ahead.
    pub const FAST_ETHERNET: Link = Link { bits_per_s: 100_000_000, window_ns: 500_000 };

    /// How long a datagram of `payload` bytes holds the link, rounded up.
    pub fn frame_ns(&self, payload: usize) -> u64 {
        let frame = (payload + ETH_HEADER + IPV4_UDP_HEADERS) as u64;
        let bits = u128::from(frame.max(MIN_FRAME) + WIRE_OVERHEAD) * 8 * 1_000_000_000;
        bits.div_ceil(u128::from(self.bits_per_s.max(1))) as u64
    }
}

impl Default for Link {
    fn default() -> Link {
        Link::FAST_ETHERNET
    }
}
