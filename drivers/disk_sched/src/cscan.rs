//! Circular scan (C-LOOK): the head sweeps upwards serving requests in sector order, then
//! returns to the lowest pending request and sweeps again.

use super::policy::{Full, Pending, Policy, Queue};

/// C-LOOK: the request with the lowest first sector at or beyond the head, else the lowest of
/// all (the oldest among equals).
#[derive(Clone, Debug)]
pub struct Cscan {
    queue: Queue,
}

impl Cscan {
    /// For at most `capacity` pending requests.
    pub fn new(capacity: usize) -> Cscan {
        Cscan { queue: Queue::new(capacity) }
    }
}

impl Policy for Cscan {
    fn enqueue(&mut self, r: Pending) -> Result<(), Full> {
        self.queue.push(r)
    }

    fn choose(&self, head: u64, _now_ns: u64) -> Option<Pending> {
        // Ahead of the head first (false sorts before true), then by sector.
        self.queue.min_by_key(|r| (r.lbn < head, r.lbn))
    }

    fn dequeue(&mut self, id: u64, _now_ns: u64) -> Option<Pending> {
        self.queue.remove(id)
    }

    fn len(&self) -> usize {
        self.queue.len()
    }
}
