//! The interface every base policy offers, the pending request it schedules, and the bounded
//! queue the policies keep their requests in.

use alloc::vec::Vec;

/// A request waiting for the disk, as the scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The caller's name for it (unique among pending requests).
    pub id: u64,
    /// The client (stream) it belongs to, below the number of clients the policy was made for.
    pub client: usize,
    /// Its first sector.
    pub lbn: u64,
    /// Its length in sectors.
    pub sectors: u32,
    /// A read (else a write).
    pub read: bool,
    /// When it arrived.
    pub arrival_ns: u64,
}

impl Pending {
    /// The sector after its last: where the head is once it is served.
    pub fn end(&self) -> u64 {
        self.lbn + u64::from(self.sectors)
    }
}

/// The policy holds as many requests as it was made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// A base scheduling policy: it orders the pending requests, knowing nothing of anticipation.
pub trait Policy {
    /// Adds a request; [`Full`] if the policy holds its most already (nothing changes then).
    fn enqueue(&mut self, r: Pending) -> Result<(), Full>;

    /// The request it would serve next with the head at `head` (the sector after the last one
    /// served) at time `now_ns`, without removing it; `None` if nothing is pending.
    fn choose(&self, head: u64, now_ns: u64) -> Option<Pending>;

    /// Removes the pending request `id` (the one chosen, to be dispatched at `now_ns`); `None`
    /// if there is no such request.
    fn dequeue(&mut self, id: u64, now_ns: u64) -> Option<Pending>;

    /// Request `r`, dispatched earlier, completed at `now_ns` after `service_ns` of disk time.
    fn finish(&mut self, r: &Pending, service_ns: u64, now_ns: u64) {
        let _ = (r, service_ns, now_ns);
    }

    /// How many requests are pending.
    fn len(&self) -> usize;

    /// Whether nothing is pending.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The pending requests of a policy, in arrival order, at most `capacity` of them.
#[derive(Clone, Debug)]
pub struct Queue {
    items: Vec<Pending>,
    capacity: usize,
}

impl Queue {
    /// An empty queue for `capacity` requests (allocated now, never grown).
    pub fn new(capacity: usize) -> Queue {
        Queue { items: Vec::with_capacity(capacity), capacity }
    }

    /// Appends `r`.
    pub fn push(&mut self, r: Pending) -> Result<(), Full> {
        if self.items.len() == self.capacity {
            return Err(Full);
        }
        self.items.push(r);
        Ok(())
    }

    /// Removes request `id`, keeping the others in order.
    pub fn remove(&mut self, id: u64) -> Option<Pending> {
        let at = self.items.iter().position(|r| r.id == id)?;
        Some(self.items.remove(at))
    }

    /// The requests, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Pending> {
        self.items.iter()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The oldest request.
    pub fn first(&self) -> Option<Pending> {
        self.items.first().copied()
    }

    /// The request with the least `key`, the oldest among equals.
    pub fn min_by_key<K: Ord>(&self, mut key: impl FnMut(&Pending) -> K) -> Option<Pending> {
        let mut best: Option<(K, Pending)> = None;
        for r in &self.items {
            let k = key(r);
            if best.as_ref().is_none_or(|(b, _)| k < *b) {
                best = Some((k, *r));
            }
        }
        best.map(|(_, r)| r)
    }
}
