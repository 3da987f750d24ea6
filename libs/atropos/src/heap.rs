//! An indexed binary min-heap of clients by `(instant, client)`: the scheduler's queues.
//!
//! Each client is in a heap at most once, at a position the heap remembers, so setting a
//! client's instant (inserting it or moving it) and taking it out cost `O(log N)`, and the
//! head is read in `O(1)`. Ties are broken by the smaller client index. The heap's storage is
//! sized for every client when the client is added ([`Heap::grow`]); after that no operation
//! allocates.

use alloc::collections::TryReserveError;
use alloc::vec::Vec;

use crate::Nanos;

/// Not in the heap.
const NOWHERE: usize = usize::MAX;

#[derive(Clone, Debug, Default)]
pub(crate) struct Heap {
    /// `(instant, client)` in heap order: each entry is no later than its two children.
    entries: Vec<(Nanos, usize)>,
    /// For each client, its position in `entries`, or [`NOWHERE`].
    position: Vec<usize>,
}

impl Heap {
    /// Makes room for clients `0..clients`, so that no later operation allocates.
    pub(crate) fn grow(&mut self, clients: usize) -> Result<(), TryReserveError> {
        self.entries.try_reserve(clients.saturating_sub(self.entries.len()))?;
        self.position.try_reserve(clients.saturating_sub(self.position.len()))?;
        if self.position.len() < clients {
            self.position.resize(clients, NOWHERE);
        }
        Ok(())
    }

    /// The earliest `(instant, client)`.
    #[inline]
    pub(crate) fn first(&self) -> Option<(Nanos, usize)> {
        self.entries.first().copied()
    }

    /// The earliest instant, or `Nanos::MAX` when the heap is empty.
    #[inline]
    pub(crate) fn first_instant(&self) -> Nanos {
        self.entries.first().map_or(Nanos::MAX, |e| e.0)
    }

    /// Puts `client` in the heap at `instant`, or moves it there.
    #[inline]
    pub(crate) fn set(&mut self, client: usize, instant: Nanos) {
        let at = self.position[client];
        if at == NOWHERE {
            let at = self.entries.len();
            debug_assert!(at < self.entries.capacity(), "the heap was not grown for the client");
            self.entries.push((instant, client));
            self.position[client] = at;
            self.up(at);
        } else {
            let old = self.entries[at].0;
            self.entries[at].0 = instant;
            if instant < old {
                self.up(at);
            } else if instant > old {
                self.down(at);
            }
        }
    }

    /// Takes `client` out of the heap (nothing if it is not in it).
    #[inline]
    pub(crate) fn remove(&mut self, client: usize) {
        let Some(&at) = self.position.get(client) else { return };
        if at == NOWHERE {
            return;
        }
        self.position[client] = NOWHERE;
        let last = self.entries.len() - 1;
        if at != last {
            self.entries.swap(at, last);
            self.entries.pop();
            self.position[self.entries[at].1] = at;
            self.down(at);
            self.up(at);
        } else {
            self.entries.pop();
        }
    }

    /// Takes out and returns the earliest client if its instant is at or before `now`.
    #[inline]
    pub(crate) fn pop_due(&mut self, now: Nanos) -> Option<usize> {
        let (instant, client) = self.first()?;
        if instant > now {
            return None;
        }
        self.remove(client);
        Some(client)
    }

    #[inline]
    fn swap(&mut self, a: usize, b: usize) {
        self.entries.swap(a, b);
        self.position[self.entries[a].1] = a;
        self.position[self.entries[b].1] = b;
    }

    #[inline]
    fn up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.entries[at] >= self.entries[parent] {
                break;
            }
            self.swap(at, parent);
            at = parent;
        }
    }

    #[inline]
    fn down(&mut self, mut at: usize) {
        loop {
            let (left, right) = (2 * at + 1, 2 * at + 2);
            let mut least = at;
            if left < self.entries.len() && self.entries[left] < self.entries[least] {
                least = left;
            }
            if right < self.entries.len() && self.entries[right] < self.entries[least] {
                least = right;
            }
            if least == at {
                break;
            }
            self.swap(at, least);
            at = least;
        }
    }
}
