//! The adapter from the NIC trait to smoltcp's `phy::Device`. smoltcp transmits straight into
//! the NIC's transmit buffers; it receives only the frames the stack has classified as its own
//! (ARP and ICMP), staged one at a time in a buffer of the adapter (the one copy on that path:
//! UDP datagrams never go through smoltcp's receive side).

use alloc::vec;
use alloc::vec::Vec;

use net_interface::Nic;
use net_interface::frame::MAX_FRAME;
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

/// A NIC as smoltcp's device.
pub struct NicDevice<N: Nic> {
    /// The NIC.
    pub nic: N,
    /// The frame staged for smoltcp's next receive, and its length.
    pub(crate) staging: Vec<u8>,
    pub(crate) staged: Option<usize>,
    scratch: Vec<u8>,
    /// Frames smoltcp built that the NIC refused (counted, not sent).
    pub tx_refused: u64,
}

impl<N: Nic> NicDevice<N> {
    /// The device over `nic`.
    pub fn new(nic: N) -> Self {
        NicDevice {
            nic,
            staging: vec![0; MAX_FRAME],
            staged: None,
            scratch: vec![0; MAX_FRAME],
            tx_refused: 0,
        }
    }

    /// Whether the NIC has a free transmit buffer.
    pub fn can_transmit(&self) -> bool {
        self.nic.tx_in_flight() < self.nic.tx_capacity()
    }
}

/// A staged frame for smoltcp.
pub struct RxToken<'a>(&'a [u8]);

/// A free transmit buffer for smoltcp.
pub struct TxToken<'a, N: Nic> {
    nic: &'a mut N,
    scratch: &'a mut Vec<u8>,
    refused: &'a mut u64,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.0)
    }
}

impl<N: Nic> phy::TxToken for TxToken<'_, N> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        // `f` is called exactly once: in the NIC's buffer, or, if the NIC refuses the frame
        // after all, in a scratch buffer (the frame is then counted and lost).
        let mut f = Some(f);
        let mut out = None;
        let sent = self.nic.transmit(len, |buf| out = f.take().map(|f| f(buf)));
        if let (Ok(()), Some(r)) = (sent, out) {
            return r;
        }
        *self.refused += 1;
        self.scratch.resize(len.max(self.scratch.len()), 0);
        let f = f.expect("the NIC refused the frame before filling it");
        f(&mut self.scratch[..len])
    }
}

impl<N: Nic> phy::Device for NicDevice<N> {
    type RxToken<'a>
        = RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = TxToken<'a, N>
    where
        Self: 'a;

    fn receive(&mut self, _now: Instant) -> Option<(RxToken<'_>, TxToken<'_, N>)> {
        let len = self.staged.take()?;
        let tx = TxToken {
            nic: &mut self.nic,
            scratch: &mut self.scratch,
            refused: &mut self.tx_refused,
        };
        Some((RxToken(&self.staging[..len]), tx))
    }

    fn transmit(&mut self, _now: Instant) -> Option<TxToken<'_, N>> {
        if !self.can_transmit() {
            return None;
        }
        Some(TxToken {
            nic: &mut self.nic,
            scratch: &mut self.scratch,
            refused: &mut self.tx_refused,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.nic.mtu().min(net_interface::frame::MTU) + 14;
        caps.max_burst_size = Some(1);
        caps
    }
}
