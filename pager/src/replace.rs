//! Page replacement: which resident page to evict. The pager tells a [`ReplacementPolicy`]
//! what happens to its resident pages (page numbers within the stretch) and asks it for a
//! victim when every frame is in use. A locked page is never a victim.
//!
//! - [`Clock`]: second-chance FIFO with a single hand, the default. The reference bit is set
//!   when the pager sees an access: a fault on the page, or an access the hardware marked in
//!   the page tables, which the pager harvests before it chooses victims (frames that keep
//!   accessed bits, [`crate::plan::FrameOp::Harvest`]).
//! - [`Lru`]: least recently used, by a logical clock stamped at each reported access.
//! - An application supplies its own policy by implementing the trait and handing it to
//!   [`crate::pager::Pager::new`].

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

// ANCHOR: policy
/// A page-replacement policy over the resident pages of one stretch.
pub trait ReplacementPolicy {
    /// `page` became resident.
    fn mapped(&mut self, page: usize);

    /// `page`, resident, was accessed.
    fn accessed(&mut self, page: usize);

    /// `page` is no longer resident.
    fn unmapped(&mut self, page: usize);

    /// `page`, resident, must not be chosen until [`ReplacementPolicy::unlocked`].
    fn locked(&mut self, page: usize);

    /// `page` may be chosen again.
    fn unlocked(&mut self, page: usize);

    /// The resident, unlocked page to evict next, or `None` if there is none. The page stays
    /// resident until the pager calls [`ReplacementPolicy::unmapped`].
    fn victim(&mut self) -> Option<usize>;

    /// At most `frames` pages of the stretch's `pages` will be resident at once: room for them
    /// may be made now, so that tracking them never allocates while paging (the pager calls
    /// this once, when it is made).
    fn reserve(&mut self, frames: usize, pages: usize) {
        let _ = (frames, pages);
    }
}
// ANCHOR_END: policy

pub use pager_spec::PolicyKind;

/// Builds the built-in policy a [`PolicyKind`] names: [`Clock`] or [`Lru`].
pub trait BuildPolicy {
    /// A new policy of this kind.
    fn build(self) -> alloc::boxed::Box<dyn ReplacementPolicy>;
}

impl BuildPolicy for PolicyKind {
    fn build(self) -> alloc::boxed::Box<dyn ReplacementPolicy> {
        match self {
            PolicyKind::Clock => alloc::boxed::Box::new(Clock::new()),
            PolicyKind::Lru => alloc::boxed::Box::new(Lru::new()),
        }
    }
}

/// The clock's state of one page of the stretch.
#[derive(Clone, Copy, Debug, Default)]
struct ClockEntry {
    /// Which of the ring's entries for the page is live (0: none, the page is not resident).
    generation: u32,
    referenced: bool,
    locked: bool,
}

/// Second-chance FIFO with a single-hand clock. The ring is kept as a queue whose front is
/// under the hand: a referenced or locked page at the hand loses its reference bit and moves
/// to the back (its second chance); the first unreferenced, unlocked page is the victim.
/// Newly mapped pages join at the back, referenced. A page's bits are found by its number in
/// constant time (8 bytes a page of the stretch), so reporting the accesses the hardware
/// marked costs little; a page that leaves other than as the victim leaves a stale entry in
/// the ring, which the hand skips.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// Pages and generations, the hand at the front.
    ring: VecDeque<(u32, u32)>,
    /// By page.
    pages: Vec<ClockEntry>,
    resident: usize,
    generation: u32,
}

impl Clock {
    /// An empty clock.
    pub fn new() -> Clock {
        Clock::default()
    }

    fn entry(&mut self, page: usize) -> Option<&mut ClockEntry> {
        self.pages.get_mut(page).filter(|e| e.generation != 0)
    }

    fn live(&self, (page, generation): (u32, u32)) -> bool {
        self.pages.get(page as usize).is_some_and(|e| e.generation == generation)
    }
}

impl ReplacementPolicy for Clock {
    fn mapped(&mut self, page: usize) {
        if page >= self.pages.len() {
            self.pages.resize(page + 1, ClockEntry::default());
        }
        // Generation 0 marks a page that is not resident.
        self.generation = self.generation.checked_add(1).unwrap_or(1);
        self.pages[page] =
            ClockEntry { generation: self.generation, referenced: true, locked: false };
        self.resident += 1;
        if self.ring.len() > 2 * self.resident + 16 {
            let pages = &self.pages;
            self.ring.retain(|&(p, g)| pages.get(p as usize).is_some_and(|e| e.generation == g));
        }
        self.ring.push_back((page as u32, self.generation));
    }

    fn accessed(&mut self, page: usize) {
        if let Some(e) = self.entry(page) {
            e.referenced = true;
        }
    }

    fn unmapped(&mut self, page: usize) {
        if let Some(e) = self.entry(page) {
            *e = ClockEntry::default();
            self.resident -= 1;
            if self.ring.front().is_some_and(|f| f.0 as usize == page) {
                self.ring.pop_front();
            }
        }
    }

    fn locked(&mut self, page: usize) {
        if let Some(e) = self.entry(page) {
            e.locked = true;
        }
    }

    fn unlocked(&mut self, page: usize) {
        if let Some(e) = self.entry(page) {
            e.locked = false;
        }
    }

    fn reserve(&mut self, frames: usize, pages: usize) {
        self.ring.reserve_exact((2 * frames + 17).saturating_sub(self.ring.len()));
        self.pages.resize(pages.max(self.pages.len()), ClockEntry::default());
    }

    fn victim(&mut self) -> Option<usize> {
        // Two sweeps clear every reference bit, so an unlocked page is found by then.
        let mut live_seen = 0;
        while live_seen < 2 * self.resident {
            let front = *self.ring.front()?;
            if !self.live(front) {
                self.ring.pop_front();
                continue;
            }
            let e = &mut self.pages[front.0 as usize];
            if !e.locked && !e.referenced {
                return Some(front.0 as usize);
            }
            e.referenced = false;
            self.ring.rotate_left(1);
            live_seen += 1;
        }
        None
    }
}

/// Least recently used: each reported access stamps the page with the next tick of a logical
/// clock; the victim is the unlocked page with the oldest stamp.
#[derive(Clone, Debug, Default)]
pub struct Lru {
    tick: u64,
    /// Page to its stamp and lock.
    stamps: BTreeMap<usize, (u64, bool)>,
    /// Stamp to page, for the unlocked and locked pages alike.
    by_age: BTreeMap<u64, usize>,
}

impl Lru {
    /// An empty LRU list.
    pub fn new() -> Lru {
        Lru::default()
    }

    fn touch(&mut self, page: usize) {
        self.tick += 1;
        let locked = match self.stamps.get(&page) {
            Some(&(old, locked)) => {
                self.by_age.remove(&old);
                locked
            }
            None => false,
        };
        self.stamps.insert(page, (self.tick, locked));
        self.by_age.insert(self.tick, page);
    }

    fn set_locked(&mut self, page: usize, locked: bool) {
        if let Some(entry) = self.stamps.get_mut(&page) {
            entry.1 = locked;
        }
    }
}

impl ReplacementPolicy for Lru {
    fn mapped(&mut self, page: usize) {
        self.touch(page);
    }

    fn accessed(&mut self, page: usize) {
        if self.stamps.contains_key(&page) {
            self.touch(page);
        }
    }

    fn unmapped(&mut self, page: usize) {
        if let Some((stamp, _)) = self.stamps.remove(&page) {
            self.by_age.remove(&stamp);
        }
    }

    fn locked(&mut self, page: usize) {
        self.set_locked(page, true);
    }

    fn unlocked(&mut self, page: usize) {
        self.set_locked(page, false);
    }

    fn victim(&mut self) -> Option<usize> {
        self.by_age.values().copied().find(|p| !self.stamps[p].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_gives_referenced_pages_a_second_chance() {
        let mut c = Clock::new();
        for p in [10, 11, 12] {
            c.mapped(p);
        }
        // All referenced: the sweep clears them and comes back to the oldest.
        assert_eq!(c.victim(), Some(10));
        // 10 was not evicted; touching it again saves it, 11 goes next.
        c.accessed(10);
        assert_eq!(c.victim(), Some(11));
        c.unmapped(11);
        c.mapped(13);
        // 12 lost its bit in the first sweep; 10 had it set again.
        assert_eq!(c.victim(), Some(12));
    }

    #[test]
    fn clock_is_fifo_without_references() {
        let mut c = Clock::new();
        for p in 0..4 {
            c.mapped(p);
        }
        let mut order = alloc::vec::Vec::new();
        while let Some(v) = c.victim() {
            order.push(v);
            c.unmapped(v);
        }
        assert_eq!(order, [0, 1, 2, 3]);
    }

    #[test]
    fn clock_skips_locked_pages_and_gives_none_when_all_are_locked() {
        let mut c = Clock::new();
        c.mapped(1);
        c.mapped(2);
        c.locked(1);
        assert_eq!(c.victim(), Some(2));
        c.locked(2);
        assert_eq!(c.victim(), None);
        c.unlocked(1);
        assert_eq!(c.victim(), Some(1));
    }

    #[test]
    fn lru_evicts_the_least_recently_accessed() {
        let mut l = Lru::new();
        for p in [5, 6, 7] {
            l.mapped(p);
        }
        l.accessed(5);
        assert_eq!(l.victim(), Some(6));
        l.accessed(6);
        assert_eq!(l.victim(), Some(7));
        l.unmapped(7);
        assert_eq!(l.victim(), Some(5));
    }

    #[test]
    fn lru_skips_locked_pages() {
        let mut l = Lru::new();
        l.mapped(1);
        l.mapped(2);
        l.locked(1);
        assert_eq!(l.victim(), Some(2));
        l.locked(2);
        assert_eq!(l.victim(), None);
        l.unlocked(2);
        // Accessing a locked page keeps its lock.
        l.accessed(1);
        assert_eq!(l.victim(), Some(2));
        l.accessed(99); // not resident: ignored
        l.unmapped(2);
        assert_eq!(l.victim(), None);
    }
}
