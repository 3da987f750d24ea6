//! The virtio-net device behind `net_interface`'s [`Nic`] trait, on `virtio-drivers`' raw
//! device (`VirtIONetRaw`: no buffer management of its own, no allocation).
//!
//! The driver owns [`TX_BUFFERS`] transmit and [`RX_BUFFERS`] receive buffers of [`BUFFER`]
//! bytes in one DMA stretch; each holds the device's header (`virtio_net_hdr`, 12 bytes
//! with `VERSION_1`) and then the frame. A transmission writes the device's header into a free
//! buffer and lets the caller write the frame straight behind it, then hands the buffer to the
//! transmit queue; [`Nic::poll_transmit`] takes it back once the device has sent it. Every
//! receive buffer is posted to the receive queue at start; [`Nic::receive`] lets the caller
//! read a received frame in place and then posts its buffer again. Each queue has [`QUEUE`]
//! descriptors, one per buffer (a buffer is one descriptor), so neither ever refuses a buffer
//! the driver has free.
//!
//! The trait has no way to report a transmission or receive that the device failed (the
//! queue's own error, which a working device never gives): such a buffer is freed or posted
//! again, the frame is lost, and [`VirtioNic::faults`] counts it for the domain to report.

use net_interface::frame::{ETH_HEADER, MAX_FRAME, MTU};
use net_interface::{LinkState, MacAddr, Nic, NicError};
use virtio_drivers::device::net::VirtIONetRaw;
use virtio_drivers::transport::Transport;
use virtio_hal::dma::TesseraHal;

/// Descriptors per queue.
pub const QUEUE: usize = 16;
/// Transmit buffers (frames in flight to the device at once).
pub const TX_BUFFERS: usize = QUEUE;
/// Receive buffers posted to the device.
pub const RX_BUFFERS: usize = QUEUE;
/// One buffer: at least the 1,526 bytes `virtio-drivers` asks of a receive buffer.
pub const BUFFER: usize = 2048;

/// A virtio-net device with its buffers.
pub struct VirtioNic<T: Transport> {
    net: VirtIONetRaw<TesseraHal, T, QUEUE>,
    /// The buffers: transmit ones first, then receive ones.
    buffers: &'static mut [u8],
    /// The device's token of each transmit buffer at the device.
    tx: [Option<u16>; TX_BUFFERS],
    /// The device's token of each receive buffer posted to it.
    rx: [Option<u16>; RX_BUFFERS],
    /// Transmissions and receives the device failed, and buffers it would not take back.
    faults: u64,
}

impl<T: Transport> VirtioNic<T> {
    /// Brings the device up over transport `t`, with interrupts on and every receive buffer
    /// posted.
    pub fn new(t: T) -> Result<Self, &'static str> {
        let mut net = VirtIONetRaw::<TesseraHal, T, QUEUE>::new(t)
            .map_err(|_| "the device would not start")?;
        net.enable_interrupts();
        let (buffers, _) = tessera::dma::alloc_buffer((TX_BUFFERS + RX_BUFFERS) * BUFFER)
            .map_err(|_| "no DMA memory for buffers")?;
        let mut nic =
            VirtioNic { net, buffers, tx: [None; TX_BUFFERS], rx: [None; RX_BUFFERS], faults: 0 };
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
        let i = self.tx.iter().position(Option::is_none).ok_or(NicError::Full)?;
        let header = {
            let net = &self.net;
            let buf = &mut self.buffers[i * BUFFER..(i + 1) * BUFFER];
            net.fill_buffer_header(buf).map_err(|_| NicError::Io)?
        };
        if len == 0 || header + len > BUFFER {
            return Err(NicError::BadLength);
        }
        let buf = self.buffer(i);
        let r = fill(&mut buf[header..header + len]);
        let buf: *const [u8] = &buf[..header + len];
        // SAFETY: the buffer is DMA memory of this driver, untouched until the device returns
        // it (`poll_transmit` takes it back by this token).
        let token = unsafe { self.net.transmit_begin(&*buf) }.map_err(|_| NicError::Io)?;
        self.tx[i] = Some(token);
        Ok(r)
    }

    /// The longest frame [`VirtioNic::transmit_any`] sends: a buffer behind the device's
    /// header.
    pub fn max_frame_any(&self) -> usize {
        let mut header = [0u8; 16];
        BUFFER - self.net.fill_buffer_header(&mut header).unwrap_or(0)
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
        MacAddr(self.net.mac_address())
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
        let Some(i) = self.tx.iter().position(|t| *t == Some(token)) else {
            // A token the driver never had: nothing to free.
            self.faults += 1;
            return false;
        };
        self.tx[i] = None;
        let buf: *const [u8] = self.buffer(i);
        // SAFETY: the same buffer as `transmit_begin` was given with this token (its length
        // does not matter to the queue, which returns the descriptor it made).
        if unsafe { self.net.transmit_complete(token, &*buf) }.is_err() {
            self.faults += 1;
        }
        true
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
