//! The NIC a network stack sits on: frames handed to the device to transmit, receive buffers
//! posted to it, and their completions taken after its interrupt. The driver domain's device
//! ([`crate::device::VirtioNic`]) implements it; the self-test ([`crate::self_test`]) uses
//! nothing else.
//!
//! This trait will move to the `net_interface` crate, where the smoltcp stack of the network
//! domain finds it; until then it lives here, with the only driver that has it.

/// An Ethernet (MAC) address.
pub type Mac = [u8; 6];

/// The longest frame a NIC sends or receives without its frame check sequence: a 14-byte
/// Ethernet header and a 1,500-byte payload (the MTU).
pub const MAX_FRAME: usize = 1514;
/// The shortest frame on the wire without its frame check sequence (shorter ones are padded
/// to it by real hardware; a virtio-net device leaves them as they are).
pub const MIN_FRAME: usize = 60;

/// Why a NIC refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicError {
    /// Every transmit buffer is at the device: take a completion first.
    Full,
    /// A frame longer than [`MAX_FRAME`] or shorter than an Ethernet header.
    BadLength,
    /// The device refused or failed the request.
    Device,
}

/// A received frame: its buffer stays the caller's until it gives it back with
/// [`Nic::post_receive`].
#[derive(Debug, PartialEq, Eq)]
pub struct RxFrame {
    /// Which receive buffer holds it.
    pub buffer: u16,
    /// Where the frame starts in it (after the device's header), and its length.
    pub offset: u16,
    /// The frame's length in bytes.
    pub len: u16,
}

/// A network interface: several frames in flight each way, completions taken after its
/// interrupt, never by polling an idle device.
pub trait Nic {
    /// Its MAC address.
    fn mac(&self) -> Mac;
    /// Its MTU: the longest payload of a frame (frames are at most `mtu() + 14` bytes).
    fn mtu(&self) -> usize;
    /// Whether its link is up.
    fn link_up(&self) -> bool;
    /// How many frames it takes to transmit at once, and how many receive buffers it has.
    fn depth(&self) -> (usize, usize);
    /// Copies `frame` (Ethernet header onwards, without frame check sequence) into a free
    /// transmit buffer and hands it to the device.
    fn transmit(&mut self, frame: &[u8]) -> Result<(), NicError>;
    /// Takes one finished transmission, freeing its buffer: the bytes the device took, or
    /// `None` if none has finished.
    fn transmitted(&mut self) -> Option<Result<usize, NicError>>;
    /// Takes the next received frame, if one has arrived.
    fn received(&mut self) -> Option<Result<RxFrame, NicError>>;
    /// The bytes of received frame `rx`.
    fn frame(&self, rx: &RxFrame) -> &[u8];
    /// Gives receive buffer `rx` back to the device for another frame.
    fn post_receive(&mut self, rx: RxFrame) -> Result<(), NicError>;
    /// Acknowledges the device's interrupt (before the kernel's `irq_ack`).
    fn interrupted(&mut self);
}
