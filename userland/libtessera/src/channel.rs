//! IO channels: one-way rings of fixed-size message slots in memory shared by two domains,
//! declared in the manifest (`[[channel]] name, from, to, slots, slot_size`) and described by
//! the kernel in each end's control block ([`abi::ChannelSlot`]).
//!
//! Open an end by the channel's name with `open_sender` or `open_receiver`; a domain holds
//! at most one `Sender` or `Receiver` per channel end at a time (dropping it frees the end).
//!
//! # Protocol
//! The shared memory is a 64-byte header (`head: u64` at offset 0, written only by the sender;
//! `tail: u64` at offset 8, written only by the receiver) and `slots` slots of `slot_size` bytes
//! (`slots` a power of two). Both counters only grow (wrapping at 2^64): `head` counts messages
//! published, `tail` messages consumed; message `n` lives in slot `n % slots`, so the ring holds
//! `head - tail` messages, never more than `slots`.
//!
//! A slot carries its message's length as a little-endian `u32` in its first 4 bytes, then 4
//! reserved bytes, then the message (8-byte aligned), so a message is 0 to `slot_size - 8`
//! bytes.
//!
//! - Sending: while `head - tail == slots` (`tail` loaded with Acquire) the ring is full and the
//!   sender waits on its own endpoint (`local_event`). Otherwise it writes slot `head % slots`
//!   and stores `head + 1` with Release (publishing the slot). If the ring was empty before it
//!   (`tail`, loaded again after the store, equals the old `head`), the receiver may be
//!   waiting, and the sender signals the receiver's endpoint
//!   (`event_send(peer_domain, peer_event)`).
//! - Receiving: while `head == tail` (`head` loaded with Acquire) the ring is empty and the
//!   receiver waits on its own endpoint. Otherwise it copies slot `tail % slots` out and stores
//!   `tail + 1` with Release (giving the slot back). If the ring was full before it (`head`,
//!   loaded again after the store, is `slots` past the old `tail`), the sender may be waiting,
//!   and the receiver signals the sender's endpoint.
//! - So a message costs one `event_send` only when its receiver may be waiting for it, and a
//!   slot given back costs one only when the ring was full: a round trip over two channels is
//!   two events, not four, and a busy pipeline sends few.
//! - No wake-up is lost: each side reads its endpoint's value *before* looking at the ring and
//!   then waits for the value to move past it (`events::wait`), and the peer
//!   changes the ring *before* deciding whether to signal. A side that finds the ring empty
//!   (full) saw the old counter; the peer's second load, after its own store and a full fence,
//!   sees that the ring was empty (full) before its change unless the waiting side had already
//!   seen the change.
//! - Death: when the sender dies the kernel closes the receiver's endpoint; the receiver drains
//!   what was published and then gets [`ChannelError::Closed`]. When the receiver dies the
//!   sender's endpoint is closed and every later send returns [`ChannelError::Closed`].
//! - Nothing from the peer is trusted: counters that put more than `slots` messages in the ring
//!   and lengths longer than a slot are [`ChannelError::Corrupt`].
//!
//! Each end keeps its own counter privately (the sender `head`, the receiver `tail`) and only
//! publishes it, so a peer scribbling on the header cannot make it read or write outside the
//! ring.
//!
//! The ring logic ([`find`], and the non-blocking halves behind `Sender` and `Receiver`) is
//! portable and tested on the host; the blocking ends exist only on the target.

use core::fmt;
use core::sync::atomic::{Ordering, fence};

use abi::{ChannelRole, Dcb, SysError};

use crate::shared::Ring;

/// Why a channel operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelError {
    /// The message is longer than a slot holds (`slot_size - 8`), or the receive buffer is
    /// shorter than the next message (which stays in the ring).
    TooLarge,
    /// The peer died: for a sender, nobody will read; for a receiver, the ring is empty and
    /// nobody will write.
    Closed,
    /// The peer broke the protocol: the counters or a message length are out of range.
    Corrupt,
    /// Every live domain is blocked without a deadline: the peer can never answer.
    Deadlock,
    /// A system call failed unexpectedly (for `event_send`: the message was already
    /// published).
    Sys(SysError),
}

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ChannelError::TooLarge => f.write_str("message larger than a slot or the buffer"),
            ChannelError::Closed => f.write_str("channel closed: the peer died"),
            ChannelError::Corrupt => f.write_str("the peer broke the ring protocol"),
            ChannelError::Deadlock => f.write_str("every domain is blocked without a deadline"),
            ChannelError::Sys(e) => write!(f, "system call failed with error {}", e as usize),
        }
    }
}

/// Does the NUL-padded `stored` name equal `name`?
fn name_matches(stored: &[u8; 32], name: &str) -> bool {
    let name = name.as_bytes();
    match stored.get(..name.len()) {
        Some(prefix) => prefix == name && stored.get(name.len()).is_none_or(|&b| b == 0),
        None => false,
    }
}

/// The index in `dcb.channels` of the channel end named `name` with role `role`.
pub fn find(dcb: &Dcb, name: &str, role: ChannelRole) -> Option<usize> {
    if name.is_empty() || role == ChannelRole::None {
        return None;
    }
    dcb.channels.iter().position(|c| c.role == role as u16 && name_matches(&c.name, name))
}

/// The non-blocking half of a sending end: the private `head` and the ring.
#[cfg_attr(
    not(target_os = "none"),
    allow(dead_code, reason = "used by the runtime's ends; on the host only by the tests")
)]
#[derive(Debug)]
pub(crate) struct Writer {
    ring: Ring,
    head: u64,
    /// The last message went into an empty ring: the receiver may be waiting for it.
    wake_receiver: bool,
}

#[cfg_attr(
    not(target_os = "none"),
    allow(dead_code, reason = "used by the runtime's ends; on the host only by the tests")
)]
impl Writer {
    /// Takes over the sending end of `ring`, continuing from its published `head`.
    pub(crate) fn new(ring: Ring) -> Writer {
        let head = ring.head().load(Ordering::Relaxed);
        Writer { ring, head, wake_receiver: false }
    }

    /// Publishes `msg` if there is room: `Ok(true)` if it was, `Ok(false)` if the ring is full.
    #[inline(always)]
    pub(crate) fn try_write(&mut self, msg: &[u8]) -> Result<bool, ChannelError> {
        if msg.len() > self.ring.max_message() {
            return Err(ChannelError::TooLarge);
        }
        let tail = self.ring.tail().load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        if used > self.ring.slots() {
            return Err(ChannelError::Corrupt);
        }
        if used == self.ring.slots() {
            return Ok(false);
        }
        self.ring.write(self.head, msg);
        let before = self.head;
        self.head = self.head.wrapping_add(1);
        self.ring.head().store(self.head, Ordering::Release);
        fence(Ordering::SeqCst);
        self.wake_receiver = self.ring.tail().load(Ordering::Acquire) == before;
        Ok(true)
    }

    /// Did the last message written go into an empty ring (so the receiver must be signalled)?
    #[inline(always)]
    pub(crate) fn receiver_may_wait(&self) -> bool {
        self.wake_receiver
    }
}

/// The non-blocking half of a receiving end: the private `tail` and the ring.
#[cfg_attr(
    not(target_os = "none"),
    allow(dead_code, reason = "used by the runtime's ends; on the host only by the tests")
)]
#[derive(Debug)]
pub(crate) struct Reader {
    ring: Ring,
    tail: u64,
    /// The last message was taken from a full ring: the sender may be waiting for the slot.
    wake_sender: bool,
}

#[cfg_attr(
    not(target_os = "none"),
    allow(dead_code, reason = "used by the runtime's ends; on the host only by the tests")
)]
impl Reader {
    /// Takes over the receiving end of `ring`, continuing from its published `tail`.
    pub(crate) fn new(ring: Ring) -> Reader {
        let tail = ring.tail().load(Ordering::Relaxed);
        Reader { ring, tail, wake_sender: false }
    }

    /// Takes the next message into `buf` if there is one: `Ok(Some(len))`, or `Ok(None)` if
    /// the ring is empty.
    #[inline(always)]
    pub(crate) fn try_read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ChannelError> {
        let head = self.ring.head().load(Ordering::Acquire);
        let ready = head.wrapping_sub(self.tail);
        if ready > self.ring.slots() {
            return Err(ChannelError::Corrupt);
        }
        if ready == 0 {
            return Ok(None);
        }
        let len = self.ring.len(self.tail) as usize;
        if len > self.ring.max_message() {
            return Err(ChannelError::Corrupt);
        }
        let Some(buf) = buf.get_mut(..len) else {
            return Err(ChannelError::TooLarge);
        };
        self.ring.read(self.tail, buf);
        let before = self.tail;
        self.tail = self.tail.wrapping_add(1);
        self.ring.tail().store(self.tail, Ordering::Release);
        fence(Ordering::SeqCst);
        let head = self.ring.head().load(Ordering::Acquire);
        self.wake_sender = head.wrapping_sub(before) == self.ring.slots();
        Ok(Some(len))
    }

    /// Was the last message read taken from a full ring (so the sender must be signalled)?
    #[inline(always)]
    pub(crate) fn sender_may_wait(&self) -> bool {
        self.wake_sender
    }
}

#[cfg(target_os = "none")]
pub use runtime::{Receiver, Sender, open_receiver, open_sender};

/// The blocking ends, on the control block's channels, events and `event_send`.
#[cfg(target_os = "none")]
mod runtime {
    use core::sync::atomic::{AtomicU32, Ordering};

    use abi::{ChannelRole, ChannelSlot, EventSlot, SysError};

    use super::{ChannelError, Reader, Writer, find};
    use crate::events::{self, WaitError};
    use crate::shared::Ring;
    use crate::{dcb, syscall};

    /// Channel ends (control-block indices, one bit each) currently held by a `Sender` or
    /// `Receiver`.
    static CLAIMED: AtomicU32 = AtomicU32::new(0);

    /// What both kinds of end share: the control-block entry, its index, its local endpoint
    /// (looked up once, at open) and the block count.
    #[derive(Debug)]
    struct End {
        index: usize,
        desc: ChannelSlot,
        event: &'static EventSlot,
        blocks: u64,
    }

    impl End {
        /// Claims channel end `name` with role `role`, and its ring.
        fn open(name: &str, role: ChannelRole) -> Option<(End, Ring)> {
            let index = find(dcb(), name, role)?;
            let desc = dcb().channels[index];
            let local = Some(usize::from(desc.local_event)).filter(|&ep| ep < abi::MAX_EVENTS)?;
            let ring = Ring::of_channel(index)?;
            let bit = 1u32 << index;
            if CLAIMED.fetch_or(bit, Ordering::Relaxed) & bit != 0 {
                return None;
            }
            Some((End { index, desc, event: events::slot(local), blocks: 0 }, ring))
        }

        fn local(&self) -> usize {
            self.desc.local_event as usize
        }

        /// The local endpoint's value: read it before looking at the ring, then wait for it to
        /// move past that.
        #[inline(always)]
        fn value(&self) -> u64 {
            self.event.value.load(Ordering::Acquire)
        }

        /// Is the local endpoint closed (the peer died)?
        #[inline(always)]
        fn closed(&self) -> bool {
            self.event.closed.load(Ordering::Acquire) != 0
        }

        /// Waits for the local endpoint to move past `seen`, counting the `block` calls.
        fn wait(&mut self, seen: u64) -> Result<(), ChannelError> {
            self.wait_until(seen, u64::MAX).map(|_| ())
        }

        /// Waits for the local endpoint to move past `seen` or the clock to reach
        /// `deadline_ns` (`u64::MAX`: never), counting the `block` calls: `false` if the
        /// deadline passed first.
        fn wait_until(&mut self, seen: u64, deadline_ns: u64) -> Result<bool, ChannelError> {
            let before = events::blocks();
            let r = events::wait_slot(self.event, seen, deadline_ns);
            self.blocks += events::blocks() - before;
            match r {
                Ok(_) | Err(WaitError::Closed) => Ok(true),
                Err(WaitError::Timeout) => Ok(false),
                Err(WaitError::Deadlock) => Err(ChannelError::Deadlock),
                Err(WaitError::Sys(e)) => Err(ChannelError::Sys(e)),
            }
        }

        /// Signals the peer's endpoint. A dead peer is not an error here: its death closed our
        /// endpoint, which the next operation reports.
        #[inline(always)]
        fn signal(&self) -> Result<(), ChannelError> {
            let (domain, ep) = (self.desc.peer_domain as usize, self.desc.peer_event as usize);
            match syscall::event_send(domain, ep) {
                Ok(()) | Err(SysError::NotFound) => Ok(()),
                Err(e) => Err(ChannelError::Sys(e)),
            }
        }
    }

    impl Drop for End {
        fn drop(&mut self) {
            CLAIMED.fetch_and(!(1u32 << self.index), Ordering::Relaxed);
        }
    }

    /// The sending end of an IO channel.
    #[derive(Debug)]
    pub struct Sender {
        end: End,
        writer: Writer,
    }

    /// The receiving end of an IO channel.
    #[derive(Debug)]
    pub struct Receiver {
        end: End,
        reader: Reader,
    }

    /// The sending end of the channel `name` of the manifest, if this domain is its sender and
    /// does not hold it already.
    pub fn open_sender(name: &str) -> Option<Sender> {
        let (end, ring) = End::open(name, ChannelRole::Sender)?;
        Some(Sender { end, writer: Writer::new(ring) })
    }

    /// The receiving end of the channel `name` of the manifest, if this domain is its receiver
    /// and does not hold it already.
    pub fn open_receiver(name: &str) -> Option<Receiver> {
        let (end, ring) = End::open(name, ChannelRole::Receiver)?;
        Some(Receiver { end, reader: Reader::new(ring) })
    }

    impl Sender {
        /// The receiving domain and its endpoint this end signals: what names it to the kernel
        /// (`event_send`, `frame_lend`).
        pub fn peer(&self) -> (usize, usize) {
            (self.end.desc.peer_domain as usize, self.end.desc.peer_event as usize)
        }

        /// Sends `msg` (at most [`max_message`](Sender::max_message) bytes), waiting while the
        /// ring is full. Errors: [`ChannelError::TooLarge`], [`ChannelError::Closed`] (the
        /// receiver died; nothing is sent), [`ChannelError::Corrupt`],
        /// [`ChannelError::Deadlock`], [`ChannelError::Sys`].
        pub fn send(&mut self, msg: &[u8]) -> Result<(), ChannelError> {
            loop {
                if self.end.closed() {
                    return Err(ChannelError::Closed);
                }
                let seen = self.end.value();
                if self.writer.try_write(msg)? {
                    return match self.writer.receiver_may_wait() {
                        true => self.end.signal(),
                        false => Ok(()),
                    };
                }
                self.end.wait(seen)?;
            }
        }

        /// Sends `msg` if the ring has room, without waiting: `Ok(false)` if it is full (the
        /// receiver has not caught up), for a sender that serves several receivers and must
        /// not wait for any one of them. Errors as for [`Sender::send`].
        pub fn try_send(&mut self, msg: &[u8]) -> Result<bool, ChannelError> {
            if self.end.closed() {
                return Err(ChannelError::Closed);
            }
            if !self.writer.try_write(msg)? {
                return Ok(false);
            }
            if self.writer.receiver_may_wait() {
                self.end.signal()?;
            }
            Ok(true)
        }

        /// Number of slots in the ring: how many messages may wait unread.
        pub fn slots(&self) -> u64 {
            u64::from(self.end.desc.slots)
        }

        /// The longest message: the slot size less the 8-byte length prefix.
        pub fn max_message(&self) -> usize {
            self.end.desc.slot_size as usize - crate::shared::SLOT_PREFIX
        }

        /// How many times this end called `block` while the ring was full.
        pub fn blocks(&self) -> u64 {
            self.end.blocks
        }
    }

    impl Receiver {
        /// Receives the next message into `buf`, waiting while the ring is empty; returns its
        /// length. Errors: [`ChannelError::TooLarge`] (`buf` is shorter than the message, which
        /// stays in the ring), [`ChannelError::Closed`] (the sender died and every message it
        /// published has been received), [`ChannelError::Corrupt`], [`ChannelError::Deadlock`],
        /// [`ChannelError::Sys`].
        pub fn recv(&mut self, buf: &mut [u8]) -> Result<usize, ChannelError> {
            loop {
                let seen = self.end.value();
                if let Some(len) = self.reader.try_read(buf)? {
                    self.given_back()?;
                    return Ok(len);
                }
                if self.end.closed() {
                    // The sender may have published between the look at the ring and its
                    // death: look once more now that it can publish nothing else.
                    return match self.reader.try_read(buf)? {
                        Some(len) => self.given_back().map(|()| len),
                        None => Err(ChannelError::Closed),
                    };
                }
                self.end.wait(seen)?;
            }
        }

        /// [`recv`](Receiver::recv) with a deadline: waits while the ring is empty until the
        /// clock ([`time_ns`](crate::time_ns)) reaches `deadline_ns`, then returns `Ok(None)`
        /// if no message came (`u64::MAX`: no deadline). Errors as for
        /// [`recv`](Receiver::recv).
        pub fn recv_until(
            &mut self,
            buf: &mut [u8],
            deadline_ns: u64,
        ) -> Result<Option<usize>, ChannelError> {
            loop {
                let seen = self.end.value();
                if let Some(len) = self.reader.try_read(buf)? {
                    self.given_back()?;
                    return Ok(Some(len));
                }
                if self.end.closed() {
                    return match self.reader.try_read(buf)? {
                        Some(len) => self.given_back().map(|()| Some(len)),
                        None => Err(ChannelError::Closed),
                    };
                }
                if !self.end.wait_until(seen, deadline_ns)? {
                    // A message may have come with the deadline: take it rather than drop
                    // the chance.
                    return self.try_recv(buf);
                }
            }
        }

        /// Receives the next message into `buf` if there is one, without waiting: `Ok(None)`
        /// when the ring is empty. For code that waits in its own way, e.g. a user-level
        /// thread waiting on [`event`](Receiver::event) with `thread::wait_event`. Errors as
        /// for [`recv`](Receiver::recv), except that an empty ring of a dead sender is
        /// `Ok(None)` (the endpoint's `closed` flag says so).
        pub fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ChannelError> {
            let got = self.reader.try_read(buf)?;
            if got.is_some() {
                self.given_back()?;
            }
            Ok(got)
        }

        /// The sending domain's identifier.
        pub fn peer_domain(&self) -> u32 {
            self.end.desc.peer_domain
        }

        /// Whether the sender is gone (its endpoint closed): once [`try_recv`](Self::try_recv)
        /// finds the ring empty, nothing more will come.
        pub fn is_closed(&self) -> bool {
            self.end.closed()
        }

        /// After a message was taken: signals the sender if it may be waiting for the slot.
        fn given_back(&self) -> Result<(), ChannelError> {
            match self.reader.sender_may_wait() {
                true => self.end.signal(),
                false => Ok(()),
            }
        }

        /// The event endpoint the sender signals when a message goes into an empty ring (after
        /// finding the ring empty, wait for it to move past the value read before looking).
        pub fn event(&self) -> usize {
            self.end.local()
        }

        /// Number of slots in the ring: how many messages may wait unread.
        pub fn slots(&self) -> u64 {
            u64::from(self.end.desc.slots)
        }

        /// The longest message: the slot size less the 8-byte length prefix.
        pub fn max_message(&self) -> usize {
            self.end.desc.slot_size as usize - crate::shared::SLOT_PREFIX
        }

        /// How many times this end called `block` while the ring was empty.
        pub fn blocks(&self) -> u64 {
            self.end.blocks
        }
    }
}

#[cfg(test)]
mod tests {
    use abi::ChannelSlot;

    use super::*;
    use crate::shared::leaked_ring;

    fn named(name: &str, role: ChannelRole) -> ChannelSlot {
        let mut slot = ChannelSlot { role: role as u16, ..Default::default() };
        slot.name[..name.len()].copy_from_slice(name.as_bytes());
        slot
    }

    #[test]
    fn signals_only_when_the_peer_may_wait() {
        let ring = leaked_ring(2, 16, 0);
        let (mut w, mut r) = (Writer::new(ring.clone()), Reader::new(ring));
        let mut buf = [0u8; 8];
        assert_eq!(w.try_write(b"a"), Ok(true));
        assert!(w.receiver_may_wait(), "into an empty ring: the receiver may wait");
        assert_eq!(w.try_write(b"b"), Ok(true));
        assert!(!w.receiver_may_wait(), "the ring held a message already");
        assert_eq!(w.try_write(b"c"), Ok(false), "full");
        assert_eq!(r.try_read(&mut buf), Ok(Some(1)));
        assert!(r.sender_may_wait(), "from a full ring: the sender may wait");
        assert_eq!(r.try_read(&mut buf), Ok(Some(1)));
        assert!(!r.sender_may_wait(), "the ring was not full");
        assert_eq!(w.try_write(b"d"), Ok(true));
        assert!(w.receiver_may_wait(), "emptied again: the receiver may wait once more");
    }

    #[test]
    fn ends_are_found_by_name_and_role() {
        let mut dcb = Dcb::default();
        let long = "a-name-of-exactly-thirty-two-byt";
        assert_eq!(long.len(), 32);
        dcb.channels[0] = named("numbers", ChannelRole::Sender);
        dcb.channels[1] = named("num", ChannelRole::Receiver);
        dcb.channels[2] = named("numbers", ChannelRole::Receiver);
        dcb.channels[5] = named(long, ChannelRole::Sender);
        assert_eq!(find(&dcb, "numbers", ChannelRole::Sender), Some(0));
        assert_eq!(find(&dcb, "numbers", ChannelRole::Receiver), Some(2));
        assert_eq!(find(&dcb, "num", ChannelRole::Receiver), Some(1));
        assert_eq!(find(&dcb, "num", ChannelRole::Sender), None, "a prefix is not a name");
        assert_eq!(find(&dcb, "numbersx", ChannelRole::Sender), None);
        assert_eq!(find(&dcb, long, ChannelRole::Sender), Some(5));
        assert_eq!(find(&dcb, &std::format!("{long}x"), ChannelRole::Sender), None);
        assert_eq!(find(&dcb, "", ChannelRole::None), None, "unused slots are not ends");
        assert_eq!(find(&dcb, "", ChannelRole::Sender), None);
    }

    #[test]
    fn a_full_ring_refuses_until_a_slot_is_consumed() {
        let ring = leaked_ring(4, 16, 0);
        let (mut w, mut r) = (Writer::new(ring.clone()), Reader::new(ring));
        let mut buf = [0u8; 8];
        assert_eq!(r.try_read(&mut buf), Ok(None));
        for i in 0..4u8 {
            assert_eq!(w.try_write(&[i; 3]), Ok(true));
        }
        assert_eq!(w.try_write(b"x"), Ok(false));
        assert_eq!(r.try_read(&mut buf), Ok(Some(3)));
        assert_eq!(buf[..3], [0; 3]);
        assert_eq!(w.try_write(b"x"), Ok(true));
        for i in 1..4u8 {
            assert_eq!(r.try_read(&mut buf), Ok(Some(3)));
            assert_eq!(buf[..3], [i; 3]);
        }
        assert_eq!(r.try_read(&mut buf), Ok(Some(1)));
        assert_eq!(&buf[..1], b"x");
        assert_eq!(r.try_read(&mut buf), Ok(None));
    }

    #[test]
    fn counters_wrap_around() {
        let ring = leaked_ring(4, 16, u64::MAX - 5);
        let (mut w, mut r) = (Writer::new(ring.clone()), Reader::new(ring.clone()));
        let mut buf = [0u8; 8];
        for n in 0..40u64 {
            assert_eq!(w.try_write(&n.to_le_bytes()), Ok(true));
            if n % 3 == 0 {
                assert_eq!(w.try_write(&(n + 1000).to_le_bytes()), Ok(true));
                assert_eq!(r.try_read(&mut buf), Ok(Some(8)));
                assert_eq!(u64::from_le_bytes(buf), n);
                assert_eq!(r.try_read(&mut buf), Ok(Some(8)));
                assert_eq!(u64::from_le_bytes(buf), n + 1000);
            } else {
                assert_eq!(r.try_read(&mut buf), Ok(Some(8)));
                assert_eq!(u64::from_le_bytes(buf), n);
            }
        }
        assert_eq!(ring.head().load(Ordering::Relaxed), (u64::MAX - 5).wrapping_add(54));
        assert_eq!(ring.tail().load(Ordering::Relaxed), ring.head().load(Ordering::Relaxed));
    }

    #[test]
    fn lengths_are_checked() {
        let ring = leaked_ring(2, 24, 0);
        let (mut w, mut r) = (Writer::new(ring.clone()), Reader::new(ring));
        assert_eq!(w.try_write(&[7; 17]), Err(ChannelError::TooLarge));
        assert_eq!(w.try_write(&[]), Ok(true));
        assert_eq!(w.try_write(&[7; 16]), Ok(true));
        let mut buf = [0u8; 16];
        assert_eq!(r.try_read(&mut []), Ok(Some(0)));
        assert_eq!(r.try_read(&mut buf[..15]), Err(ChannelError::TooLarge));
        assert_eq!(r.try_read(&mut buf), Ok(Some(16)), "a refused message stays");
        assert_eq!(buf, [7; 16]);
    }

    #[test]
    fn a_misbehaving_peer_is_detected() {
        let ring = leaked_ring(4, 16, 100);
        let (mut w, mut r) = (Writer::new(ring.clone()), Reader::new(ring.clone()));
        let mut buf = [0u8; 8];
        // A tail ahead of the head, or a head more than a ring ahead of the tail.
        ring.tail().store(101, Ordering::Relaxed);
        assert_eq!(w.try_write(b"x"), Err(ChannelError::Corrupt));
        ring.tail().store(100, Ordering::Relaxed);
        ring.head().store(105, Ordering::Relaxed);
        assert_eq!(r.try_read(&mut buf), Err(ChannelError::Corrupt));
        // The writer trusts its own head, not the scribbled one.
        assert_eq!(w.try_write(b"ok"), Ok(true));
        ring.head().store(101, Ordering::Relaxed);
        assert_eq!(r.try_read(&mut buf), Ok(Some(2)));
        // A length longer than a slot is refused and left alone.
        assert_eq!(w.try_write(b"x"), Ok(true));
        ring.set_len(101, 9);
        assert_eq!(r.try_read(&mut buf), Err(ChannelError::Corrupt));
        ring.set_len(101, 1);
        assert_eq!(r.try_read(&mut buf), Ok(Some(1)));
        assert_eq!(r.try_read(&mut buf), Ok(None));
    }

    #[test]
    fn two_threads_pass_every_message_in_order() {
        const COUNT: u64 = 200_000;
        let ring = leaked_ring(8, 32, u64::MAX - 1000);
        let mut w = Writer::new(ring.clone());
        let mut r = Reader::new(ring);
        let producer = std::thread::spawn(move || {
            let mut full = 0u64;
            for n in 0..COUNT {
                let mut msg = [0u8; 24];
                msg[..8].copy_from_slice(&n.to_le_bytes());
                msg[8..16].copy_from_slice(&(!n).to_le_bytes());
                msg[16..].copy_from_slice(&n.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
                let len = 8 + (n % 17) as usize;
                while !w.try_write(&msg[..len]).unwrap() {
                    full += 1;
                    std::thread::yield_now();
                }
            }
            full
        });
        let mut buf = [0u8; 24];
        let mut n = 0;
        while n < COUNT {
            match r.try_read(&mut buf).unwrap() {
                None => std::thread::yield_now(),
                Some(len) => {
                    assert_eq!(len, 8 + (n % 17) as usize);
                    assert_eq!(u64::from_le_bytes(buf[..8].try_into().unwrap()), n);
                    if len >= 16 {
                        assert_eq!(u64::from_le_bytes(buf[8..16].try_into().unwrap()), !n);
                    }
                    n += 1;
                }
            }
        }
        let full = producer.join().unwrap();
        std::println!("the producer found the ring full {full} times");
        assert_eq!(r.try_read(&mut buf), Ok(None));
    }

    #[test]
    fn errors_display() {
        use std::string::ToString;
        assert_eq!(ChannelError::Closed.to_string(), "channel closed: the peer died");
        assert_eq!(
            ChannelError::Sys(SysError::PermissionDenied).to_string(),
            "system call failed with error 6"
        );
    }
}
