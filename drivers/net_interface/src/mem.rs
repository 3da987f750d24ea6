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
use crate::nic::{LinkState, Nic, NicError};

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

/// One end of an in-memory link. Its transmitted frames complete when polled.
pub struct MemNic {
    mac: MacAddr,
    wire: Wire,
    /// The direction this NIC transmits in.
    out: Direction,
    tx_capacity: usize,
    tx_in_flight: usize,
    /// Frames transmitted, ever.
    pub transmitted: u64,
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
        tx_in_flight: 0,
        transmitted: 0,
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
        self.tx_in_flight
    }

    fn transmit<R>(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, NicError> {
        if len == 0 || len > MAX_FRAME {
            return Err(NicError::BadLength);
        }
        if self.tx_in_flight >= self.tx_capacity {
            return Err(NicError::Full);
        }
        let mut frame = vec![0; len];
        let r = fill(&mut frame);
        self.tx_in_flight += 1;
        self.transmitted += 1;
        self.wire.carry(self.out, frame);
        Ok(r)
    }

    fn poll_transmit(&mut self) -> bool {
        if self.tx_in_flight == 0 {
            return false;
        }
        self.tx_in_flight -= 1;
        true
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
