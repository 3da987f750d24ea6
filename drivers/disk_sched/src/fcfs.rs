//! The two simplest policies: first come, first served, and shortest seek (LBN distance) first.

use super::policy::{Full, Pending, Policy, Queue};

/// First come, first served.
#[derive(Clone, Debug)]
pub struct Fcfs {
    queue: Queue,
}

impl Fcfs {
    /// For at most `capacity` pending requests.
    pub fn new(capacity: usize) -> Fcfs {
        Fcfs { queue: Queue::new(capacity) }
    }
}

impl Policy for Fcfs {
    fn enqueue(&mut self, r: Pending) -> Result<(), Full> {
        self.queue.push(r)
    }

    fn choose(&self, _head: u64, _now_ns: u64) -> Option<Pending> {
        self.queue.first()
    }

    fn dequeue(&mut self, id: u64, _now_ns: u64) -> Option<Pending> {
        self.queue.remove(id)
    }

    fn len(&self) -> usize {
        self.queue.len()
    }
}

/// Shortest seek first: the request whose first sector is nearest the head (the oldest among
/// equals).
#[derive(Clone, Debug)]
pub struct Sstf {
    queue: Queue,
}

impl Sstf {
    /// For at most `capacity` pending requests.
    pub fn new(capacity: usize) -> Sstf {
        Sstf { queue: Queue::new(capacity) }
    }
}

impl Policy for Sstf {
    fn enqueue(&mut self, r: Pending) -> Result<(), Full> {
        self.queue.push(r)
    }

    fn choose(&self, head: u64, _now_ns: u64) -> Option<Pending> {
        self.queue.min_by_key(|r| r.lbn.abs_diff(head))
    }

    fn dequeue(&mut self, id: u64, _now_ns: u64) -> Option<Pending> {
        self.queue.remove(id)
    }

    fn len(&self) -> usize {
        self.queue.len()
    }
}
