//! The virtio-net device's two queues, driven directly on `virtio-drivers`' [`VirtQueue`]: the
//! crate's `VirtIONetRaw` adds one buffer per transmission, and a frame gathered from two
//! places (its headers in a buffer of the driver, its payload in a frame a client lent) needs
//! a chain of two descriptors ([`NetQueues::transmit_gather`]). What it does besides is what
//! `VirtIONetRaw` does: feature negotiation (MAC, STATUS, EVENT_IDX, VERSION_1), the MAC from
//! the configuration space, the device's header ahead of every frame (12 bytes with
//! VERSION_1, 10 without), and interrupt acknowledgement.
//!
//! The transmit queue has two descriptors per transmit buffer, so a free buffer always finds
//! room for its chain.

use virtio_drivers::queue::VirtQueue;
use virtio_drivers::transport::{DeviceStatus, Transport};
use virtio_hal::dma::TesseraHal;

/// The receive queue's index, and the transmit queue's.
const QUEUE_RECEIVE: u16 = 0;
const QUEUE_TRANSMIT: u16 = 1;

/// Feature bits (virtio 1.2, 5.1.3): the device has a MAC; it has a status field; the event
/// index; version 1.
const MAC: u64 = 1 << 5;
const STATUS: u64 = 1 << 16;
const RING_EVENT_IDX: u64 = 1 << 29;
const VERSION_1: u64 = 1 << 32;
const SUPPORTED: u64 = MAC | STATUS | RING_EVENT_IDX | VERSION_1;

/// The device's header: with VERSION_1 `virtio_net_hdr` has `num_buffers`, without it not.
const HEADER: usize = 12;
const LEGACY_HEADER: usize = 10;

/// The smallest receive buffer the device may fill (a header and a 1,514-byte frame).
pub const MIN_RX_BUFFER: usize = 1526;

/// Why a queue operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueError {
    /// The queue had no descriptors free.
    Full,
    /// The device or the queue failed (a working device never does).
    Io,
}

/// The device's queues over transport `T`: `RX` receive descriptors, `TX` transmit ones.
pub struct NetQueues<T: Transport, const RX: usize, const TX: usize> {
    transport: T,
    mac: [u8; 6],
    rx: VirtQueue<TesseraHal, RX>,
    tx: VirtQueue<TesseraHal, TX>,
    header: usize,
}

fn queue_error(e: virtio_drivers::Error) -> QueueError {
    match e {
        virtio_drivers::Error::QueueFull => QueueError::Full,
        _ => QueueError::Io,
    }
}

impl<T: Transport, const RX: usize, const TX: usize> NetQueues<T, RX, TX> {
    /// Brings the device up over `transport` (virtio 1.2, 3.1.1) with its queues set.
    pub fn new(mut transport: T) -> Result<Self, QueueError> {
        transport.set_status(DeviceStatus::empty());
        transport.set_status(DeviceStatus::ACKNOWLEDGE | DeviceStatus::DRIVER);
        let features = transport.read_device_features() & SUPPORTED;
        transport.write_driver_features(features);
        transport.set_status(
            DeviceStatus::ACKNOWLEDGE | DeviceStatus::DRIVER | DeviceStatus::FEATURES_OK,
        );
        transport.set_guest_page_size(virtio_drivers::PAGE_SIZE as u32);
        let mac = transport
            .read_consistent(|| transport.read_config_space::<[u8; 6]>(0))
            .map_err(|_| QueueError::Io)?;
        let event_idx = features & RING_EVENT_IDX != 0;
        let rx =
            VirtQueue::new(&mut transport, QUEUE_RECEIVE, false, event_idx).map_err(queue_error)?;
        let tx = VirtQueue::new(&mut transport, QUEUE_TRANSMIT, false, event_idx)
            .map_err(queue_error)?;
        transport.finish_init();
        let header = if features & VERSION_1 != 0 { HEADER } else { LEGACY_HEADER };
        Ok(NetQueues { transport, mac, rx, tx, header })
    }

    /// The device's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Lets the device interrupt when it has used a buffer.
    pub fn enable_interrupts(&mut self) {
        self.tx.set_dev_notify(true);
        self.rx.set_dev_notify(true);
    }

    /// Acknowledges the interrupt (reads and clears its status).
    pub fn ack_interrupt(&mut self) {
        self.transport.ack_interrupt();
    }

    /// Writes the device's header (all zero: no offloads) at the start of `buf`; its length.
    pub fn fill_header(&self, buf: &mut [u8]) -> Option<usize> {
        buf.get_mut(..self.header)?.fill(0);
        Some(self.header)
    }

    /// Starts the transmission of the buffers `parts` in order, as one frame (the first starts
    /// with the device's header); its token.
    ///
    /// # Safety
    /// Every part stays valid and untouched until [`NetQueues::transmit_complete`] is given the
    /// same parts with this token.
    pub unsafe fn transmit_begin(&mut self, parts: &[&[u8]]) -> Result<u16, QueueError> {
        // SAFETY: the caller keeps the parts as they are until the transmission completes.
        let token = unsafe { self.tx.add(parts, &mut []) }.map_err(queue_error)?;
        if self.tx.should_notify() {
            self.transport.notify(QUEUE_TRANSMIT);
        }
        Ok(token)
    }

    /// The token of the next completed transmission, if any (not taken yet).
    pub fn poll_transmit(&self) -> Option<u16> {
        self.tx.peek_used()
    }

    /// Takes back the completed transmission `token`.
    ///
    /// # Safety
    /// `parts` are the ones [`NetQueues::transmit_begin`] was given for `token`.
    pub unsafe fn transmit_complete(
        &mut self,
        token: u16,
        parts: &[&[u8]],
    ) -> Result<(), QueueError> {
        // SAFETY: the caller passes the parts the chain was made of.
        unsafe { self.tx.pop_used(token, parts, &mut []) }.map(|_| ()).map_err(queue_error)
    }

    /// Posts `buf` (at least [`MIN_RX_BUFFER`] bytes) for the device to receive a frame into;
    /// its token.
    ///
    /// # Safety
    /// `buf` stays valid and untouched until [`NetQueues::receive_complete`] is given it with
    /// this token.
    pub unsafe fn receive_begin(&mut self, buf: &mut [u8]) -> Result<u16, QueueError> {
        if buf.len() < MIN_RX_BUFFER {
            return Err(QueueError::Io);
        }
        // SAFETY: the caller keeps the buffer as it is until the receive completes.
        let token = unsafe { self.rx.add(&[], &mut [buf]) }.map_err(queue_error)?;
        if self.rx.should_notify() {
            self.transport.notify(QUEUE_RECEIVE);
        }
        Ok(token)
    }

    /// The token of the next completed receive, if any (not taken yet).
    pub fn poll_receive(&self) -> Option<u16> {
        self.rx.peek_used()
    }

    /// Takes back the completed receive `token`: where the frame starts in `buf` (after the
    /// device's header) and its length.
    ///
    /// # Safety
    /// `buf` is the one [`NetQueues::receive_begin`] was given for `token`.
    pub unsafe fn receive_complete(
        &mut self,
        token: u16,
        buf: &mut [u8],
    ) -> Result<(usize, usize), QueueError> {
        // SAFETY: the caller passes the buffer the receive was posted with.
        let len = unsafe { self.rx.pop_used(token, &[], &mut [buf]) }.map_err(queue_error)?;
        let frame = (len as usize).checked_sub(self.header).ok_or(QueueError::Io)?;
        Ok((self.header, frame))
    }
}

impl<T: Transport, const RX: usize, const TX: usize> Drop for NetQueues<T, RX, TX> {
    fn drop(&mut self) {
        // The device must not reach the queues' memory once they are gone.
        self.transport.queue_unset(QUEUE_RECEIVE);
        self.transport.queue_unset(QUEUE_TRANSMIT);
    }
}
