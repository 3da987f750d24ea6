//! Proportional share of disk time: Stride scheduling over service time, plain and relaxed.
//!
//! Each client has a weight (its share is its weight over the sum of the active clients'
//! weights) and a virtual clock. When one of its requests completes, its clock advances by
//! the request's service time divided by its weight; the client with the least clock among
//! those with requests pending is served next, its requests in arrival order. A client is
//! *active* while it has requests pending or at the disk; one that comes back after having had
//! nothing to do for [`LEAVE_AFTER_NS`] (it *left*) starts at the least clock of the active
//! clients (the global clock) if its own is behind, so time spent away earns no credit, while
//! a synchronous client's think time between requests keeps its place. Clocks are kept in units of 2^-16 ns at weight 1,
//! in 128 bits, so they never overflow in practice.
//!
//! With a window `tau` (in ns of service at weight 1), the policy is the relaxed Stride of the
//! combination heuristic: among the requests of clients whose clocks are within `tau` of the
//! least, the one the head reaches soonest; the prototype used one second.

use alloc::vec;
use alloc::vec::Vec;

use super::policy::{Full, Pending, Policy, Queue};
use super::positioning::Positioning;

/// Clock units per ns of service at weight 1.
const UNIT: u128 = 1 << 16;

/// How long a client must have had nothing to do to leave: when it comes back it starts at the
/// least clock of the others. Shorter gaps are a synchronous client's think time (at most
/// 15 ms to the anticipation heuristics), which must not cost it its place.
pub const LEAVE_AFTER_NS: u64 = 100_000_000;

/// Stride over disk service time.
#[derive(Clone, Debug)]
pub struct Stride<P: Positioning> {
    queue: Queue,
    weights: Vec<u32>,
    clocks: Vec<u128>,
    /// Requests of each client pending here or at the disk.
    active: Vec<u32>,
    /// When each client last ran out of requests.
    idle_since: Vec<u64>,
    /// The relaxation window and the estimate it chooses by, if relaxed.
    relaxed: Option<(u128, P)>,
}

impl<P: Positioning> Stride<P> {
    /// For at most `capacity` pending requests of clients `0..weights.len()`, client `c`
    /// weighing `weights[c]` (at least 1).
    pub fn new(capacity: usize, weights: &[u32]) -> Stride<P> {
        assert!(weights.iter().all(|&w| w > 0), "every weight is at least 1");
        let n = weights.len();
        Stride {
            queue: Queue::new(capacity),
            weights: weights.to_vec(),
            clocks: vec![0; n],
            active: vec![0; n],
            idle_since: vec![0; n],
            relaxed: None,
        }
    }

    /// The relaxed policy: among clients within `tau_ns` (of service at weight 1) of the least
    /// clock, the request the head reaches soonest by `positioning`.
    pub fn relaxed(capacity: usize, weights: &[u32], tau_ns: u64, positioning: P) -> Stride<P> {
        let mut s = Stride::new(capacity, weights);
        s.relaxed = Some((u128::from(tau_ns) * UNIT, positioning));
        s
    }

    /// Client `c`'s virtual clock, in ns of service at weight 1.
    pub fn clock_ns(&self, c: usize) -> u64 {
        (self.clocks[c] / UNIT) as u64
    }

    /// Client `c`'s virtual clock, in clock units.
    pub fn clock(&self, c: usize) -> u128 {
        self.clocks[c]
    }

    /// The relaxation window in clock units, if relaxed.
    pub fn tau(&self) -> Option<u128> {
        self.relaxed.as_ref().map(|(tau, _)| *tau)
    }

    /// The least clock among clients with requests pending here (not those only at the disk):
    /// the `minclock` of the anticipation heuristic, in clock units.
    pub fn min_pending_clock(&self) -> Option<u128> {
        self.queue.iter().map(|r| self.clocks[r.client]).min()
    }

    /// The least clock among active clients other than `except`.
    fn global_clock(&self, except: usize) -> Option<u128> {
        (0..self.clocks.len())
            .filter(|&c| c != except && self.active[c] > 0)
            .map(|c| self.clocks[c])
            .min()
    }
}

impl<P: Positioning> Policy for Stride<P> {
    fn enqueue(&mut self, r: Pending) -> Result<(), Full> {
        assert!(r.client < self.weights.len(), "a client the policy was made for");
        self.queue.push(r)?;
        let left = r.arrival_ns.saturating_sub(self.idle_since[r.client]) >= LEAVE_AFTER_NS;
        if self.active[r.client] == 0
            && left
            && let Some(global) = self.global_clock(r.client)
        {
            self.clocks[r.client] = self.clocks[r.client].max(global);
        }
        self.active[r.client] += 1;
        Ok(())
    }

    fn choose(&self, head: u64, _now_ns: u64) -> Option<Pending> {
        let min = self.min_pending_clock()?;
        match &self.relaxed {
            None => self.queue.min_by_key(|r| self.clocks[r.client]),
            Some((tau, p)) => self
                .queue
                .iter()
                .filter(|r| self.clocks[r.client] <= min + tau)
                .min_by_key(|r| p.positioning_ns(head, r.lbn))
                .copied(),
        }
    }

    fn dequeue(&mut self, id: u64, _now_ns: u64) -> Option<Pending> {
        // Still active until it completes.
        self.queue.remove(id)
    }

    fn finish(&mut self, r: &Pending, service_ns: u64, now_ns: u64) {
        let c = r.client;
        self.clocks[c] += u128::from(service_ns) * UNIT / u128::from(self.weights[c]);
        self.active[c] = self.active[c].saturating_sub(1);
        if self.active[c] == 0 {
            self.idle_since[c] = now_ns;
        }
    }

    fn len(&self) -> usize {
        self.queue.len()
    }
}
