//! The virtio-net device behind the [`Nic`] trait, on `virtio-drivers`' raw device
//! (`VirtIONetRaw`: no buffer management of its own, no allocation).
//!
//! The driver owns [`TX_BUFFERS`] transmit and [`RX_BUFFERS`] receive buffers of [`BUFFER`]
//! bytes in one DMA stretch; each holds the device's header (`virtio_net_hdr`, 12 bytes
//! with `VERSION_1`) and then the frame. A transmission copies the frame behind a header into a
//! free buffer and hands it to the transmit queue; every receive buffer is posted to the
//! receive queue at start, and again when the caller gives it back. Each queue has
//! [`QUEUE`] descriptors, one per buffer (a buffer is one descriptor), so neither ever
//! refuses a buffer the driver has free.

use virtio_drivers::device::net::VirtIONetRaw;
use virtio_drivers::transport::Transport;
use virtio_hal::dma::TesseraHal;

use crate::nic::{MAX_FRAME, Mac, Nic, NicError, RxFrame};

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
        let mut nic = VirtioNic { net, buffers, tx: [None; TX_BUFFERS], rx: [None; RX_BUFFERS] };
        for i in 0..RX_BUFFERS {
            nic.post(i)?;
        }
        Ok(nic)
    }

    /// The bytes of buffer `i` (transmit buffers from 0, then receive buffers).
    fn buffer(&mut self, i: usize) -> &mut [u8] {
        &mut self.buffers[i * BUFFER..(i + 1) * BUFFER]
    }

    /// Posts receive buffer `i` to the device.
    fn post(&mut self, i: usize) -> Result<(), &'static str> {
        let buf: *mut [u8] = self.buffer(TX_BUFFERS + i);
        // SAFETY: the buffer is DMA memory of this driver, and nothing reads or writes it
        // until the device has returned it (`received` takes it back by this token).
        let token = unsafe { self.net.receive_begin(&mut *buf) }
            .map_err(|_| "the receive queue refused a buffer")?;
        self.rx[i] = Some(token);
        Ok(())
    }
}

impl<T: Transport> Nic for VirtioNic<T> {
    fn mac(&self) -> Mac {
        self.net.mac_address()
    }

    fn mtu(&self) -> usize {
        MAX_FRAME - 14
    }

    fn link_up(&self) -> bool {
        // `virtio-drivers` does not read the status field; QEMU's NICs, a hub's included,
        // start with their link up, and nothing here takes it down.
        true
    }

    fn depth(&self) -> (usize, usize) {
        (TX_BUFFERS, RX_BUFFERS)
    }

    fn transmit(&mut self, frame: &[u8]) -> Result<(), NicError> {
        if frame.len() < 14 || frame.len() > MAX_FRAME {
            return Err(NicError::BadLength);
        }
        let i = self.tx.iter().position(Option::is_none).ok_or(NicError::Full)?;
        let header = {
            let net = &self.net;
            let buf = &mut self.buffers[i * BUFFER..(i + 1) * BUFFER];
            net.fill_buffer_header(buf).map_err(|_| NicError::Device)?
        };
        let buf = self.buffer(i);
        buf[header..header + frame.len()].copy_from_slice(frame);
        let buf: *const [u8] = &buf[..header + frame.len()];
        // SAFETY: the buffer is DMA memory of this driver, untouched until the device returns
        // it (`transmitted` takes it back by this token).
        let token = unsafe { self.net.transmit_begin(&*buf) }.map_err(|_| NicError::Device)?;
        self.tx[i] = Some(token);
        Ok(())
    }

    fn transmitted(&mut self) -> Option<Result<usize, NicError>> {
        let token = self.net.poll_transmit()?;
        let Some(i) = self.tx.iter().position(|t| *t == Some(token)) else {
            return Some(Err(NicError::Device));
        };
        self.tx[i] = None;
        let buf: *const [u8] = self.buffer(i);
        // SAFETY: the same buffer as `transmit_begin` was given with this token (its length
        // does not matter to the queue, which returns the descriptor it made).
        let done = unsafe { self.net.transmit_complete(token, &*buf) };
        Some(done.map_err(|_| NicError::Device))
    }

    fn received(&mut self) -> Option<Result<RxFrame, NicError>> {
        let token = self.net.poll_receive()?;
        let Some(i) = self.rx.iter().position(|t| *t == Some(token)) else {
            return Some(Err(NicError::Device));
        };
        self.rx[i] = None;
        let buf: *mut [u8] = self.buffer(TX_BUFFERS + i);
        // SAFETY: the same buffer as `receive_begin` was given with this token.
        let done = unsafe { self.net.receive_complete(token, &mut *buf) };
        Some(match done {
            Ok((offset, len)) if offset + len <= BUFFER => {
                Ok(RxFrame { buffer: i as u16, offset: offset as u16, len: len as u16 })
            }
            _ => {
                // The buffer goes back to the device; the frame is lost.
                let _ = self.post(i);
                Err(NicError::Device)
            }
        })
    }

    fn frame(&self, rx: &RxFrame) -> &[u8] {
        let start = (TX_BUFFERS + usize::from(rx.buffer)) * BUFFER + usize::from(rx.offset);
        &self.buffers[start..start + usize::from(rx.len)]
    }

    fn post_receive(&mut self, rx: RxFrame) -> Result<(), NicError> {
        let i = usize::from(rx.buffer);
        if i >= RX_BUFFERS || self.rx[i].is_some() {
            return Err(NicError::Device);
        }
        self.post(i).map_err(|_| NicError::Device)
    }

    fn interrupted(&mut self) {
        // Reads and clears the interrupt status (the MMIO transport's line stays raised until
        // then; with MSI-X it is a harmless read).
        self.net.ack_interrupt();
    }
}
