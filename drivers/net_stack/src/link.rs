//! The link's cost model: how long a frame holds the link, which the transmit streams'
//! contracts are in. It is the disk's service-time estimate for the USD: a datagram is a
//! [`Pending`] whose `sectors` field holds the frame's length in bytes, every position is 0
//! and no frame needs positioning.

use disk_sched::usd::ServiceBound;
use disk_sched::{Pending, Positioning};

/// Ethernet's per-frame overhead on the wire beyond the frame: preamble and start delimiter
/// (8), frame check sequence (4), inter-frame gap (12).
pub const WIRE_OVERHEAD: u64 = 24;

/// Ethernet's shortest frame without its check sequence (shorter ones are padded).
pub const MIN_FRAME: u64 = 60;

/// A link of `bits_per_s`, each frame also costing `per_frame_ns` (the driver's and the
/// device's work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkModel {
    /// The link's rate.
    pub bits_per_s: u64,
    /// A fixed cost per frame, in nanoseconds.
    pub per_frame_ns: u64,
}

impl LinkModel {
    /// A 100 Mbit/s link with no per-frame cost beyond Ethernet's.
    pub const FAST_ETHERNET: LinkModel = LinkModel { bits_per_s: 100_000_000, per_frame_ns: 0 };

    /// How long a frame of `len` bytes (without its check sequence) holds the link, rounded up.
    pub fn frame_ns(&self, len: usize) -> u64 {
        let bytes = (len as u64).max(MIN_FRAME) + WIRE_OVERHEAD;
        let bits = u128::from(bytes) * 8 * 1_000_000_000;
        let rate = u128::from(self.bits_per_s.max(1));
        self.per_frame_ns + bits.div_ceil(rate) as u64
    }
}

impl Positioning for LinkModel {
    fn positioning_ns(&self, _from: u64, _to: u64) -> u64 {
        0
    }
}

impl ServiceBound for LinkModel {
    fn service_bound_ns(&self, _head: u64, r: &Pending) -> u64 {
        self.frame_ns(r.sectors as usize)
    }
}
