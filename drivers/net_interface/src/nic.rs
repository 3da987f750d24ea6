//! The NIC trait that the network domain's core (`net_stack`) drives: the virtio-net driver
//! domain implements it, [`MemNic`](crate::mem::MemNic) on the host.
//!
//! A NIC has a transmit ring and a receive ring, each with several frames in flight. To send,
//! the core asks for a transmit buffer of the frame's length and writes the frame into it
//! ([`Nic::transmit`]); the device sends it and the buffer comes back when
//! [`Nic::poll_transmit`] reports it. Received frames are read in place ([`Nic::receive`]),
//! after which their buffer goes back to the device. Nothing blocks: the core polls after the
//! device's interrupt.
//!
//! A NIC may also *gather* a frame ([`Nic::transmit_lent`]): its head from one of its transmit
//! buffers, its tail straight from a frame a client lent the driver, by the frame's device
//! address (the driver has no mapping of it). Such a transmission carries a tag that
//! [`Nic::lent_done`] gives back once the device has finished reading the frame, so that the
//! loan can be returned then and not before.

use core::fmt;

use crate::frame::MacAddr;

/// Whether the link carries frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Frames go out and come in.
    Up,
    /// No carrier: frames given to the device are dropped by it.
    Down,
}

/// Why a NIC did not take a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicError {
    /// Every transmit buffer is in flight: try again after [`Nic::poll_transmit`] returns one.
    Full,
    /// The frame is longer than the device's largest (or empty).
    BadLength,
    /// The device failed (transport error).
    Io,
    /// The NIC does not gather frames from lent memory ([`Nic::transmit_lent`]).
    NoGather,
}

/// Bytes of a lent frame as the device reaches them: a device address and a length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceRange {
    /// The first byte's device address.
    pub addr: u64,
    /// How many bytes.
    pub len: usize,
}

impl fmt::Display for NicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NicError::Full => "transmit ring full",
            NicError::BadLength => "frame length refused by the device",
            NicError::Io => "device I/O error",
            NicError::NoGather => "the device does not gather from lent memory",
        })
    }
}

/// A NIC with transmit and receive rings.
pub trait Nic {
    /// The device's MAC address.
    fn mac(&self) -> MacAddr;

    /// The IP MTU: frames are at most `mtu() + ETH_HEADER` bytes.
    fn mtu(&self) -> usize;

    /// Whether the link is up.
    fn link(&self) -> LinkState;

    /// How many frames the transmit ring holds in flight at once.
    fn tx_capacity(&self) -> usize;

    /// How many transmitted frames are in flight now (taken, not yet reported by
    /// [`Nic::poll_transmit`]).
    fn tx_in_flight(&self) -> usize;

    /// Takes a free transmit buffer of `len` bytes, lets `fill` write the frame into it and
    /// starts its transmission; `fill`'s result. [`NicError::Full`] when every buffer is in
    /// flight (then `fill` is not called). Never blocks.
    fn transmit<R>(&mut self, len: usize, fill: impl FnOnce(&mut [u8]) -> R)
    -> Result<R, NicError>;

    /// Reports one transmitted frame whose buffer is free again; `false` if none has completed
    /// since the last call.
    fn poll_transmit(&mut self) -> bool;

    /// Takes a free transmit buffer for the frame's first `head` bytes, lets `fill` write them
    /// and starts the transmission of those bytes followed by the `tail` bytes the device reads
    /// at their device address (a lent frame's): `head + tail.len` bytes on the wire, the tail
    /// never copied. `tag` comes back from [`Nic::lent_done`] once the device has finished with
    /// the tail (after the [`Nic::poll_transmit`] that reports the frame). [`NicError::Full`]
    /// when every buffer is in flight, [`NicError::BadLength`] for a frame of the wrong length
    /// (then `fill` is not called). A NIC that cannot gather says [`NicError::NoGather`] (the
    /// default).
    fn transmit_lent<R>(
        &mut self,
        head: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
        tail: DeviceRange,
        tag: u64,
    ) -> Result<R, NicError> {
        let _ = (head, fill, tail, tag);
        Err(NicError::NoGather)
    }

    /// The tag of a frame given to [`Nic::transmit_lent`] that the device has finished with
    /// (reported by [`Nic::poll_transmit`] already), if any; each is given once.
    fn lent_done(&mut self) -> Option<u64> {
        None
    }

    /// Takes one received frame, lets `read` look at it in place, then gives its buffer back to
    /// the device; `None` if no frame has arrived.
    fn receive<R>(&mut self, read: impl FnOnce(&[u8]) -> R) -> Option<R>;

    /// The device's interrupt arrived: a device that must acknowledge it before it may
    /// interrupt again does so here, before its rings are polled.
    fn interrupted(&mut self) {}
}
