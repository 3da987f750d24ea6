//! An in-memory NIC pair for host tests: two [`MemNic`]s joined by a [`Wire`] that carries
//! every frame one NIC transmits to the other's receive ring, unless a filter drops it (loss)
//! or the receive ring is full (an overrun, counted). Frames can also be injected raw, as a
//! hostile or broken node would send them.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

use crate::frame::{MAX_FRAME, MTU, MacAddr};
use crate::nic::{DeviceRange, LinkState, Nic, NicError};

/// Which way a frame goes on a [`Wire`]: from the first NIC of [`pair`] to the second, or back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the first NIC to the second.
    AtoB,
    /// From the second NIC to the first.
    BtoA,
}

impl Direction {
    fn index(self) -> usize {
        match self {
            Direction::AtoB => 0,
            Direction::BtoA => 1,
        }
    }
}

/// A filter on a wire: `true` delivers the frame, `false` loses it.
pub type Filter = Box<dyn FnMut(Direction, &[u8]) -> bool>;

/// What a wire did with the frames given to it, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireCounts {
    /// Frames delivered to the receiving NIC's ring.
    pub delivered: u64,
    /// Frames the filter dropped.
    pub lost: u64,
    /// Frames dropped because the receiving ring was full.
    pub overruns: u64,
}

struct State {
    /// Frames waiting in each receiving NIC's ring, by the direction they travel.
    rings: [VecDeque<Vec<u8>>; 2],
    counts: [WireCounts; 2],
    filter: Option<Filter>,
    link: LinkState,
    rx_capacity: usize,
}

/// The wire between the two NICs of a [`pair`] (a handle: clones name the same wire).
#[derive(Clone)]
pub struct Wire(Rc<RefCell<State>>);

impl Wire {
    /// Sets the filter every frame given to the wire passes (`None`: deliver all).
    pub fn set_filter(&self, filter: Option<Filter>) {
        self.0.borrow_mut().filter = filter;
    }

    /// Takes the link down or up (down: both NICs drop what they are given).
    pub fn set_link(&self, link: LinkState) {
        self.0.borrow_mut().link = link;
    }

    /// Puts `frame` in the receive ring at the end of `dir`, as if the other end had sent it,
    /// bypassing the filter; `false` if the ring is full.
    pub fn inject(&self, dir: Direction, frame: &[u8]) -> bool {
        let mut s = self.0.borrow_mut();
        let cap = s.rx_capacity;
        let ring = &mut s.rings[dir.index()];
        if ring.len() >= cap {
            return false;
        }
        ring.push_back(frame.to_vec());
        true
    }

    /// What the wire did so far in `dir`.
    pub fn counts(&self, dir: Direction) -> WireCounts {
        self.0.borrow().counts[dir.index()]
    }

    /// Frames waiting in the receive ring at the end of `dir`.
    pub fn pending(&self, dir: Direction) -> usize {
        self.0.borrow().rings[dir.index()].len()
    }

    fn carry(&self, dir: Direction, frame: Vec<u8>) {
        let mut s = self.0.borrow_mut();
        let s = &mut *s;
        let i = dir.index();
        if s.link == LinkState::Down || s.filter.as_mut().is_some_and(|f| !f(dir, &frame)) {
            s.counts[i].lost += 1;
        } else if s.rings[i].len() >= s.rx_capacity {
            s.counts[i].overruns += 1;
        } else {
            s.counts[i].delivered += 1;
            s.rings[i].push_back(frame);
        }
    }
}

/// One end of an in-memory link. Its transmitted frames complete when polled, in the order
/// they were given. It gathers a frame's tail ([`Nic::transmit_lent`]) from its *device
/// memory*: byte ranges at device addresses that a test puts there ([`MemNic::set_memory`]),
/// standing for lent frames.
pub struct MemNic {
    mac: MacAddr,
    wire: Wire,
    /// The direction this NIC transmits in.
    out: Direction,
    tx_capacity: usize,
    /// The frames in flight, oldest first, with the tag of those with a lent tail.
    in_flight: VecDeque<Option<u64>>,
    /// The tags of lent tails the device is done with.
    done: VecDeque<u64>,
    /// Device memory: each range's device address and bytes.
    memory: Vec<(u64, Vec<u8>)>,
    /// Frames transmitted, ever.
    pub transmitted: u64,
    /// Of them, frames whose tail was gathered from device memory.
    pub gathered: u64,
}

impl MemNic {
    /// Puts `bytes` at device address `addr` (replacing a range there).
    pub fn set_memory(&mut self, addr: u64, bytes: &[u8]) {
        self.memory.retain(|(a, _)| *a != addr);
        self.memory.push((addr, bytes.to_vec()));
    }

    /// The bytes of device memory at `addr .. addr + len`, if one range holds them.
    fn memory_at(&self, addr: u64, len: usize) -> Option<&[u8]> {
        self.memory.iter().find_map(|(a, b)| {
            let at = usize::try_from(addr.checked_sub(*a)?).ok()?;
            b.get(at..at.checked_add(len)?)
        })
    }
}

/// Two NICs with MACs `a` and `b` joined by a wire, each with `tx_capacity` transmit buffers
/// and `rx_capacity` receive buffers.
pub fn pair(
    a: MacAddr,
    b: MacAddr,
    tx_capacity: usize,
    rx_capacity: usize,
) -> (MemNic, MemNic, Wire) {
    let wire = Wire(Rc::new(RefCell::new(State {
        rings: [VecDeque::new(), VecDeque::new()],
        counts: [WireCounts::default(); 2],
        filter: None,
        link: LinkState::Up,
        rx_capacity,
    })));
    let nic = |mac, out| MemNic {
        mac,
        wire: wire.clone(),
        out,
        tx_capacity,
        in_flight: VecDeque::new(),
        done: VecDeque::new(),
        memory: Vec::new(),
        transmitted: 0,
        gathered: 0,
    };
    (nic(a, Direction::AtoB), nic(b, Direction::BtoA), wire.clone())
}

impl Nic for MemNic {
    fn mac(&self) -> MacAddr {
        self.mac
    }

    fn mtu(&self) -> usize {
        MTU
    }

    fn link(&self) -> LinkState {
        self.wire.0.borrow().link
    }

    fn tx_capacity(&self) -> usize {
        self.tx_capacity
    }

    fn tx_in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn transmit<R>(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, NicError> {
        if len == 0 || len > MAX_FRAME {
            return Err(NicError::BadLength);
        }
        if self.in_flight.len() >= self.tx_capacity {
            return Err(NicError::Full);
        }
        let mut frame = vec![0; len];
        let r = fill(&mut frame);
        self.in_flight.push_back(None);
        self.transmitted += 1;
        self.wire.carry(self.out, frame);
        Ok(r)
    }

    fn poll_transmit(&mut self) -> bool {
        match self.in_flight.pop_front() {
            None => false,
            Some(tag) => {
                self.done.extend(tag);
                true
            }
        }
    }

    fn transmit_lent<R>(
        &mut self,
        head: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
        tail: DeviceRange,
        tag: u64,
    ) -> Result<R, NicError> {
        let len = head.saturating_add(tail.len);
        if head == 0 || len > MAX_FRAME {
            return Err(NicError::BadLength);
        }
        if self.in_flight.len() >= self.tx_capacity {
            return Err(NicError::Full);
        }
        // A device reading an address nothing is at fails the transmission.
        let bytes = self.memory_at(tail.addr, tail.len).ok_or(NicError::Io)?.to_vec();
        let mut frame = vec![0; head];
        let r = fill(&mut frame);
        frame.extend_from_slice(&bytes);
        self.in_flight.push_back(Some(tag));
        self.transmitted += 1;
        self.gathered += 1;
        self.wire.carry(self.out, frame);
        Ok(r)
    }

    fn lent_done(&mut self) -> Option<u64> {
        self.done.pop_front()
    }

    fn receive<R>(&mut self, read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let incoming = match self.out {
            Direction::AtoB => Direction::BtoA,
            Direction::BtoA => Direction::AtoB,
        };
        let frame = self.wire.0.borrow_mut().rings[incoming.index()].pop_front()?;
        Some(read(&frame))
    }
}
