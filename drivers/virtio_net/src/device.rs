//! The virtio-net device behind `net_interface`'s [`Nic`] trait, on the device's queues
//! ([`crate::raw`], `virtio-drivers`' `VirtQueue`: no buffer management, no allocation).
//!
//! The driver owns [`TX_BUFFERS`] transmit and [`RX_BUFFERS`] receive buffers of [`BUFFER`]
//! bytes in one DMA stretch; each holds the device's header (`virtio_net_hdr`, 12 bytes
//! with `VERSION_1`) and then the frame. A transmission writes the device's header into a free
//! buffer and lets the caller write the frame straight behind it, then hands the buffer to the
//! transmit queue; [`Nic::poll_transmit`] takes it back once the device has sent it. Every
//! receive buffer is posted to the receive queue at start; [`Nic::receive`] lets the caller
//! read a received frame in place and then posts its buffer again. Each queue has [`QUEUE`]
//! receive descriptors, one per buffer, and the transmit queue two per buffer, so neither ever
//! refuses a buffer the driver has free.
//!
//! **Gathered frames** ([`Nic::transmit_lent`]): the headers go in a transmit buffer as above,
//! and the payload is a second descriptor of the chain, at the device address of a frame a
//! client lent the driver. The driver has no mapping of that frame: the descriptor is made
//! through the buffer's *stand-in* page (`virtio_hal::dma::lend_through`, one per transmit
//! buffer), which the HAL translates to the lent frame for this transmission only. Once the
//! device has used the chain, the stand-in is unbound and the transmission's tag is kept for
//! [`Nic::lent_done`]: the loan can be returned, the device no longer reads the frame.
//!
//! The trait has no way to report a transmission or receive that the device failed (the
//! queue's own error, which a working device never gives): such a buffer is freed or posted
//! again, the frame is lost, and [`VirtioNic::faults`] counts it for the domain to report.

use alloc::collections::VecDeque;
use core::ptr::NonNull;

use net_interface::frame::{ETH_HEADER, MAX_FRAME, MTU};
use net_interface::{DeviceRange, LinkState, MacAddr, Nic, NicError};
use virtio_drivers::transport::Transport;
use virtio_hal::dma;

use crate::raw::{MIN_RX_BUFFER, NetQueues, QueueError};

/// Receive descriptors (one per receive buffer).
pub const QUEUE: usize = 16;
/// Transmit buffers (frames in flight to the device at once).
pub const TX_BUFFERS: usize = QUEUE;
/// Transmit descriptors: two per buffer, for a gathered frame's chain.
pub const TX_QUEUE: usize = 2 * TX_BUFFERS;
/// Receive buffers posted to the device.
pub const RX_BUFFERS: usize = QUEUE;
/// One buffer: at least the 1,526 bytes a receive buffer needs.
pub const BUFFER: usize = 2048;

const _: () = assert!(BUFFER >= MIN_RX_BUFFER && TX_BUFFERS <= dma::STAND_INS);

/// A transmission at the device: its token, and for a gathered frame its payload's stand-in
/// (the buffer's own) and length, and its tag.
#[derive(Clone, Copy)]
struct InFlight {
    token: u16,
    lent: Option<(NonNull<[u8]>, u64)>,
}

/// A virtio-net device with its buffers.
pub struct VirtioNic<T: Transport> {
    net: NetQueues<T, QUEUE, TX_QUEUE>,
    /// The buffers: transmit ones first, then receive ones.
    buffers: &'static mut [u8],
    /// Each transmit buffer's transmission at the device.
    tx: [Option<InFlight>; TX_BUFFERS],
    /// The device's token of each receive buffer posted to it.
    rx: [Option<u16>; RX_BUFFERS],
    /// The tags of gathered frames the device is done with.
    lent_done: VecDeque<u64>,
    /// Transmissions and receives the device failed, and buffers it would not take back.
    faults: u64,
}

impl<T: Transport> VirtioNic<T> {
    /// Brings the device up over transport `t`, with interrupts on and every receive buffer
    /// posted, and a stand-in page for each transmit buffer.
    pub fn new(t: T) -> Result<Self, &'static str> {
        let mut net = NetQueues::new(t).map_err(|_| "the device would not start")?;
        net.enable_interrupts();
        let (buffers, _) = tessera::dma::alloc_buffer((TX_BUFFERS + RX_BUFFERS) * BUFFER)
            .map_err(|_| "no DMA memory for buffers")?;
        dma::init_stand_ins(TX_BUFFERS).map_err(|_| "no DMA memory for stand-in pages")?;
        let mut nic = VirtioNic {
            net,
            buffers,
            tx: [None; TX_BUFFERS],
            rx: [None; RX_BUFFERS],
            lent_done: VecDeque::with_capacity(TX_BUFFERS),
            faults: 0,
        };
        for i in 0..RX_BUFFERS {
            nic.post(i).map_err(|_| "the receive queue refused a buffer")?;
        }
        Ok(nic)
    }

    /// How many receive buffers the device has.
    pub fn rx_capacity(&self) -> usize {
        RX_BUFFERS
    }

    /// Transmissions and receives the device failed since it started (each a lost frame), and
    /// receive buffers it would not take back.
    pub fn faults(&self) -> u64 {
        self.faults
    }

    /// The bytes of buffer `i` (transmit buffers from 0, then receive buffers).
    fn buffer(&mut self, i: usize) -> &mut [u8] {
        &mut self.buffers[i * BUFFER..(i + 1) * BUFFER]
    }

    /// Sends a frame of `len` bytes, which `fill` writes, of any length from 1 byte to what a
    /// buffer holds behind the device's header (2,036 bytes): [`Nic::transmit`] without its
    /// check of Ethernet's lengths, for the hostile sender's runts and oversize frames.
    pub fn transmit_any<R>(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, NicError> {
        self.start(len, fill, None)
    }

    /// Starts a transmission in a free buffer: the device's header, then `len` bytes that
    /// `fill` writes, then, with `lent`, the lent range (through the buffer's stand-in) and
    /// the transmission's tag.
    fn start<R>(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
        lent: Option<(DeviceRange, u64)>,
    ) -> Result<R, NicError> {
        let i = self.tx.iter().position(Option::is_none).ok_or(NicError::Full)?;
        let header = {
            let net = &self.net;
            let buf = &mut self.buffers[i * BUFFER..(i + 1) * BUFFER];
            net.fill_header(buf).ok_or(NicError::Io)?
        };
        if len == 0 || header + len > BUFFER {
            return Err(NicError::BadLength);
        }
        // The buffer's stand-in, bound to the lent range for this transmission.
        let stand_in = match lent {
            None => None,
            Some((range, tag)) => {
                let s = dma::lend_through(i, range.addr, range.len).ok_or(NicError::Io)?;
                Some((s, tag))
            }
        };
        let buf = self.buffer(i);
        let r = fill(&mut buf[header..header + len]);
        let head: *const [u8] = &buf[..header + len];
        let started = match stand_in {
            // SAFETY: the buffer is DMA memory of this driver, untouched until the device
            // returns it (`poll_transmit` takes it back by this token).
            None => unsafe { self.net.transmit_begin(&[&*head]) },
            // SAFETY: as above; the stand-in is a page of this driver's DMA memory, bound to
            // the lent frame (which the kernel keeps lent to this domain until the loan is
            // returned, after `poll_transmit` has taken the chain back and unbound it), of
            // which the device only reads.
            Some((s, _)) => unsafe { self.net.transmit_begin(&[&*head, s.as_ref()]) },
        };
        let token = match started {
            Ok(token) => token,
            Err(e) => {
                if stand_in.is_some() {
                    dma::end_lent(i);
                }
                return Err(if e == QueueError::Full { NicError::Full } else { NicError::Io });
            }
        };
        self.tx[i] = Some(InFlight { token, lent: stand_in });
        Ok(r)
    }

    /// The longest frame [`VirtioNic::transmit_any`] sends: a buffer behind the device's
    /// header.
    pub fn max_frame_any(&self) -> usize {
        let mut header = [0u8; 16];
        BUFFER - self.net.fill_header(&mut header).unwrap_or(0)
    }

    /// Posts receive buffer `i` to the device.
    fn post(&mut self, i: usize) -> Result<(), NicError> {
        let buf: *mut [u8] = self.buffer(TX_BUFFERS + i);
        // SAFETY: the buffer is DMA memory of this driver, and nothing reads or writes it
        // until the device has returned it (`receive` takes it back by this token).
        let token = unsafe { self.net.receive_begin(&mut *buf) }.map_err(|_| NicError::Io)?;
        self.rx[i] = Some(token);
        Ok(())
    }
}

impl<T: Transport> Nic for VirtioNic<T> {
    fn mac(&self) -> MacAddr {
        MacAddr(self.net.mac())
    }

    fn mtu(&self) -> usize {
        MTU
    }

    fn link(&self) -> LinkState {
        // `virtio-drivers` does not read the status field; QEMU's NICs, a hub's included,
        // start with their link up, and nothing here takes it down.
        LinkState::Up
    }

    fn tx_capacity(&self) -> usize {
        TX_BUFFERS
    }

    fn tx_in_flight(&self) -> usize {
        self.tx.iter().filter(|t| t.is_some()).count()
    }

    fn transmit<R>(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, NicError> {
        if !(ETH_HEADER..=MAX_FRAME).contains(&len) {
            return Err(NicError::BadLength);
        }
        self.transmit_any(len, fill)
    }

    fn poll_transmit(&mut self) -> bool {
        let Some(token) = self.net.poll_transmit() else {
            return false;
        };
        let Some(i) = self.tx.iter().position(|t| t.is_some_and(|t| t.token == token)) else {
            // A token the driver never had: nothing to free.
            self.faults += 1;
            return false;
        };
        let lent = self.tx[i].take().and_then(|t| t.lent);
        let buf: *const [u8] = self.buffer(i);
        let done = match lent {
            // SAFETY: the same buffer as `transmit_begin` was given with this token (its
            // length does not matter to the queue, which returns the descriptors it made).
            None => unsafe { self.net.transmit_complete(token, &[&*buf]) },
            // SAFETY: as above, with the same stand-in, still bound to the lent frame.
            Some((s, _)) => unsafe { self.net.transmit_complete(token, &[&*buf, s.as_ref()]) },
        };
        if done.is_err() {
            self.faults += 1;
        }
        if let Some((_, tag)) = lent {
            // The device is done with the lent frame: the loan may go back.
            dma::end_lent(i);
            self.lent_done.push_back(tag);
        }
        true
    }

    fn transmit_lent<R>(
        &mut self,
        head: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
        tail: DeviceRange,
        tag: u64,
    ) -> Result<R, NicError> {
        let len = head.saturating_add(tail.len);
        if !(ETH_HEADER..=MAX_FRAME).contains(&len) || head == 0 || tail.len == 0 {
            return Err(NicError::BadLength);
        }
        self.start(head, fill, Some((tail, tag)))
    }

    fn lent_done(&mut self) -> Option<u64> {
        self.lent_done.pop_front()
    }

    fn receive<R>(&mut self, read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let mut read = Some(read);
        loop {
            let token = self.net.poll_receive()?;
            let Some(i) = self.rx.iter().position(|t| *t == Some(token)) else {
                self.faults += 1;
                return None;
            };
            self.rx[i] = None;
            let buf: *mut [u8] = self.buffer(TX_BUFFERS + i);
            // SAFETY: the same buffer as `receive_begin` was given with this token.
            let done = unsafe { self.net.receive_complete(token, &mut *buf) };
            let r = match done {
                Ok((offset, len)) if offset + len <= BUFFER => {
                    let start = (TX_BUFFERS + i) * BUFFER + offset;
                    read.take().map(|read| read(&self.buffers[start..start + len]))
                }
                _ => {
                    // The frame is lost; its buffer goes back to the device all the same.
                    self.faults += 1;
                    None
                }
            };
            if self.post(i).is_err() {
                self.faults += 1;
            }
            if let Some(r) = r {
                return Some(r);
            }
        }
    }

    fn interrupted(&mut self) {
        // Reads and clears the interrupt status (the MMIO transport's line stays raised until
        // then; with MSI-X it is a harmless read).
        self.net.ack_interrupt();
    }
}
