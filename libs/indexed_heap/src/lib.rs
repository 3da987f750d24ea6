//! An indexed binary min-heap of clients (small integer ids) by `(instant, client)`: the
//! queues of the CPU scheduler (`atropos`) and the kernel's queue of domains' timed instants.
//!
//! Each client is in a heap at most once, at a position the heap remembers, so setting a
//! client's instant (inserting it or moving it) and taking it out cost `O(log N)`, and the
//! head is read in `O(1)`. Ties are broken by the smaller client index. The heap's storage is
//! sized for every client when the client is added ([`Heap::grow`]); after that no operation
//! allocates, so a kernel may use it on any path.
//!
//! Invariants: `entries` is in heap order by `(instant, client)`; `position[c]` is the index
//! of `c`'s entry, or none, for every client `c` below the size given to [`Heap::grow`].

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::collections::TryReserveError;
use alloc::vec::Vec;

/// An instant (nanoseconds, or any ordered `u64` clock).
pub type Instant = u64;

/// Not in the heap.
const NOWHERE: usize = usize::MAX;

/// The heap: see the crate documentation.
#[derive(Clone, Debug, Default)]
pub struct Heap {
    /// `(instant, client)` in heap order: each entry is no later than its two children.
    entries: Vec<(Instant, usize)>,
    /// For each client, its position in `entries`, or [`NOWHERE`].
    position: Vec<usize>,
}

impl Heap {
    /// Makes room for clients `0..clients`, so that no later operation allocates.
    pub fn grow(&mut self, clients: usize) -> Result<(), TryReserveError> {
        self.entries.try_reserve(clients.saturating_sub(self.entries.len()))?;
        self.position.try_reserve(clients.saturating_sub(self.position.len()))?;
        if self.position.len() < clients {
            self.position.resize(clients, NOWHERE);
        }
        Ok(())
    }

    /// An empty heap for no clients; [`Heap::grow`] makes room.
    pub const fn new() -> Self {
        Heap { entries: Vec::new(), position: Vec::new() }
    }

    /// The instant of `client`, if it is in the heap.
    pub fn get(&self, client: usize) -> Option<Instant> {
        let at = *self.position.get(client)?;
        (at != NOWHERE).then(|| self.entries[at].0)
    }

    /// How many clients are in the heap.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no client is in the heap.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The earliest `(instant, client)`.
    #[inline]
    pub fn first(&self) -> Option<(Instant, usize)> {
        self.entries.first().copied()
    }

    /// The earliest instant, or `Instant::MAX` when the heap is empty.
    #[inline]
    pub fn first_instant(&self) -> Instant {
        self.entries.first().map_or(Instant::MAX, |e| e.0)
    }

    /// Puts `client` in the heap at `instant`, or moves it there.
    #[inline]
    pub fn set(&mut self, client: usize, instant: Instant) {
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
    pub fn remove(&mut self, client: usize) {
        let Some(&at) = self.position.get(client) else { return };
        if at == NOWHERE {
            return;
        }
        self.position[client] = NOWHERE;
        let last = self.entries.pop().expect("a client in the heap has an entry");
        if at < self.entries.len() {
            // The last entry fills the hole and moves whichever way it must.
            self.entries[at] = last;
            self.position[last.1] = at;
            if at > 0 && last < self.entries[(at - 1) / 2] {
                self.up(at);
            } else {
                self.down(at);
            }
        }
    }

    /// Takes out and returns the earliest client if its instant is at or before `now`.
    #[inline]
    pub fn pop_due(&mut self, now: Instant) -> Option<usize> {
        let (instant, client) = self.first()?;
        if instant > now {
            return None;
        }
        self.remove(client);
        Some(client)
    }

    /// Moves the entry at `at` towards the root until its parent is no later, carrying it in
    /// hand and moving each later parent down one place (one write of an entry and its position
    /// a level, not a swap).
    #[inline]
    fn up(&mut self, mut at: usize) {
        let moving = self.entries[at];
        while at > 0 {
            let parent = (at - 1) / 2;
            let above = self.entries[parent];
            if moving >= above {
                break;
            }
            self.entries[at] = above;
            self.position[above.1] = at;
            at = parent;
        }
        self.entries[at] = moving;
        self.position[moving.1] = at;
    }

    /// Moves the entry at `at` towards the leaves until no child is earlier, carrying it in hand
    /// and moving the earlier child up one place each level.
    #[inline]
    fn down(&mut self, mut at: usize) {
        let moving = self.entries[at];
        let len = self.entries.len();
        loop {
            let left = 2 * at + 1;
            if left >= len {
                break;
            }
            let right = left + 1;
            let child =
                if right < len && self.entries[right] < self.entries[left] { right } else { left };
            let below = self.entries[child];
            if below >= moving {
                break;
            }
            self.entries[at] = below;
            self.position[below.1] = at;
            at = child;
        }
        self.entries[at] = moving;
        self.position[moving.1] = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeSet;

    /// A small deterministic generator (xorshift64*), so that the test needs no crate.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    /// Random sets, removals and pops against an ordered set of `(instant, client)`: the same
    /// head, the same instants, the same clients popped, on every step.
    #[test]
    fn matches_an_ordered_set() {
        for seed in 1..=50u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let clients = 1 + (rng.next() % 200) as usize;
            let mut heap = Heap::new();
            heap.grow(clients).unwrap();
            let mut model: BTreeSet<(Instant, usize)> = BTreeSet::new();
            let mut at: Vec<Option<Instant>> = alloc::vec![None; clients];
            for _ in 0..2_000 {
                let c = (rng.next() % clients as u64) as usize;
                match rng.next() % 4 {
                    0 | 1 => {
                        // Few distinct instants, so that ties are common.
                        let t = rng.next() % 64;
                        if let Some(old) = at[c] {
                            model.remove(&(old, c));
                        }
                        model.insert((t, c));
                        at[c] = Some(t);
                        heap.set(c, t);
                    }
                    2 => {
                        if let Some(old) = at[c].take() {
                            model.remove(&(old, c));
                        }
                        heap.remove(c);
                    }
                    _ => {
                        let now = rng.next() % 64;
                        let want = model.first().copied().filter(|&(t, _)| t <= now);
                        let got = heap.pop_due(now);
                        assert_eq!(got, want.map(|(_, c)| c), "seed {seed}");
                        if let Some(e) = want {
                            model.remove(&e);
                            at[e.1] = None;
                        }
                    }
                }
                assert_eq!(heap.first(), model.first().copied(), "seed {seed}");
                assert_eq!(heap.len(), model.len());
                assert_eq!(heap.get(c), at[c]);
            }
        }
    }

    #[test]
    fn empty_heap_and_unknown_clients() {
        let mut heap = Heap::new();
        assert_eq!(heap.first(), None);
        assert_eq!(heap.first_instant(), Instant::MAX);
        assert_eq!(heap.pop_due(u64::MAX), None);
        heap.remove(7);
        assert_eq!(heap.get(7), None);
        assert!(heap.is_empty());
    }
}
