//! Page replacement: which resident page to evict. The pager tells a [`ReplacementPolicy`]
//! what happens to its resident pages (page numbers within the stretch) and asks it for a
//! victim when every frame is in use. A locked page is never a victim.
//!
//! - [`Clock`]: second-chance FIFO with a single hand, the default. The reference bit is set
//!   when the pager sees an access: a fault on the page, or an access the hardware marked in
//!   the page tables, which the pager harvests before it chooses victims (frames that keep
//!   accessed bits, [`crate::plan::FrameOp::Harvest`]). It has a file of its own
//!   (`replace/clock.rs`), the lab `clock` (`docs/labs/clock.md`), whose graded tests are
//!   `pager/src/lab_clock_tests.rs` and `stretch_drivers/paged/src/lab_clock_tests.rs`.
//! - [`Lru`]: least recently used, by a logical clock stamped at each reported access.
//! - An application supplies its own policy by implementing the trait and handing it to
//!   [`crate::pager::Pager::new`].

use alloc::collections::BTreeMap;

mod clock;

pub use clock::Clock;

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
