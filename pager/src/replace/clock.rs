//! The clock: second-chance replacement with a single hand, the pager's default policy.
//!
//! The resident pages of the stretch stand in a ring, in the order they became resident, and
//! the hand points at one of them. Asked for a victim, the hand sweeps the ring: a page whose
//! reference bit is set (it was accessed since the hand last passed it) gets a second chance
//! (its bit is cleared and the hand moves on); the first page found with its bit clear is the
//! victim, and the hand stays on it until it leaves. A page that becomes resident joins the
//! ring just behind the hand, so it is the last the hand reaches, with its bit set. A locked
//! page is never a victim: the hand passes it (clearing its bit too).
//!
//! The pager sets a page's bit on every fault on it and, when its driver harvests the
//! hardware's accessed bits (`pager.harvest`), on every access the hardware marked. Without
//! harvesting, the clock hears of faults only and evicts nearly in FIFO order.
//!
//! The ring is a doubly linked list threaded through a table indexed by page number, so every
//! call takes constant time (a victim: at most two turns of the ring) and nothing allocates
//! once [`ReplacementPolicy::reserve`] has sized the table for the stretch: 12 bytes a page of
//! the stretch.
//!
//! This file is the lab `clock` (`docs/labs/clock.md`): the hand-out cuts out the regions
//! between the `LAB(clock)` markers.

// LAB(clock) BEGIN
// LAB(clock) HANDOUT
// // The ring's helpers and fields stay unused until the clock is written.
// #![allow(dead_code)]
// LAB(clock) END

use alloc::vec::Vec;

use super::ReplacementPolicy;

// ANCHOR: state
/// No page: the link of a page that is not resident.
const NONE: u32 = u32::MAX;

/// The clock's state of one page of the stretch.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The page after this one in the ring (the one the hand reaches next), or [`NONE`] if
    /// this page is not resident. A page alone in the ring is its own next and previous.
    next: u32,
    /// The page before this one in the ring, or [`NONE`] if this page is not resident.
    prev: u32,
    /// The reference bit: the page was accessed since the hand last passed it.
    referenced: bool,
    /// The pager locked the page: never a victim until unlocked.
    locked: bool,
}

impl Default for Slot {
    fn default() -> Slot {
        Slot { next: NONE, prev: NONE, referenced: false, locked: false }
    }
}

/// Second-chance replacement with a single clock hand over the stretch's resident pages.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// Each page's slot, by page number; pages beyond the table are not resident.
    slots: Vec<Slot>,
    /// The page under the hand, or `None` when no page is resident.
    hand: Option<usize>,
    /// How many pages are resident (in the ring).
    resident: usize,
}

impl Clock {
    /// An empty clock.
    pub fn new() -> Clock {
        Clock::default()
    }

    /// Whether `page` is resident (in the ring).
    fn is_resident(&self, page: usize) -> bool {
        self.slots.get(page).is_some_and(|s| s.next != NONE)
    }

    /// The page after `page` in the ring: the one the hand reaches next. `page` must be
    /// resident.
    fn next_of(&self, page: usize) -> usize {
        self.slots[page].next as usize
    }

    /// Links `page`, not resident, into the ring just before `at`, a resident page (or alone,
    /// if `at` is `None`: the ring was empty), and counts it resident. Its bits are left as
    /// they are.
    fn link_before(&mut self, page: usize, at: Option<usize>) {
        if page >= self.slots.len() {
            self.slots.resize(page + 1, Slot::default());
        }
        let p = page as u32;
        match at {
            None => (self.slots[page].next, self.slots[page].prev) = (p, p),
            Some(at) => {
                let prev = self.slots[at].prev;
                self.slots[page].next = at as u32;
                self.slots[page].prev = prev;
                self.slots[prev as usize].next = p;
                self.slots[at].prev = p;
            }
        }
        self.resident += 1;
    }

    /// Unlinks `page`, resident, from the ring, clears its bits and counts it gone. The hand
    /// is left as it is: if it was on `page`, it must be moved first.
    fn unlink(&mut self, page: usize) {
        let Slot { next, prev, .. } = self.slots[page];
        self.slots[prev as usize].next = next;
        self.slots[next as usize].prev = prev;
        self.slots[page] = Slot::default();
        self.resident -= 1;
    }
}
// ANCHOR_END: state

impl ReplacementPolicy for Clock {
    fn mapped(&mut self, page: usize) {
        if self.is_resident(page) {
            // Mapped again without leaving: only an access.
            self.accessed(page);
            return;
        }
        // LAB(clock) BEGIN
        // Just behind the hand: the last page it reaches. Accessed now, so referenced.
        self.link_before(page, self.hand);
        self.slots[page].referenced = true;
        if self.hand.is_none() {
            self.hand = Some(page);
        }
        // LAB(clock) HANDOUT
        // todo!(
        //     "lab clock: Clock::mapped({page}): link the page into the ring just behind the \
        //      hand (link_before), with its reference bit set; the hand starts on the first \
        //      page"
        // )
        // LAB(clock) END
    }

    fn accessed(&mut self, page: usize) {
        if !self.is_resident(page) {
            return;
        }
        // LAB(clock) BEGIN
        self.slots[page].referenced = true;
        // LAB(clock) HANDOUT
        // todo!("lab clock: Clock::accessed({page}): remember that the page was used")
        // LAB(clock) END
    }

    fn unmapped(&mut self, page: usize) {
        if !self.is_resident(page) {
            return;
        }
        // LAB(clock) BEGIN
        // The hand leaves a page that leaves for the next one, which it would have reached
        // next anyway; the ring's last page takes the hand with it.
        if self.hand == Some(page) {
            self.hand = if self.resident == 1 { None } else { Some(self.next_of(page)) };
        }
        self.unlink(page);
        // LAB(clock) HANDOUT
        // todo!(
        //     "lab clock: Clock::unmapped({page}): unlink the page from the ring; if the hand \
        //      is on it, move the hand to the next page first"
        // )
        // LAB(clock) END
    }

    fn locked(&mut self, page: usize) {
        if self.is_resident(page) {
            self.slots[page].locked = true;
        }
    }

    fn unlocked(&mut self, page: usize) {
        if self.is_resident(page) {
            self.slots[page].locked = false;
        }
    }

    fn reserve(&mut self, frames: usize, pages: usize) {
        let _ = frames;
        self.slots.resize(pages.max(self.slots.len()), Slot::default());
    }

    fn victim(&mut self) -> Option<usize> {
        // LAB(clock) BEGIN
        // Two turns clear every reference bit, so an unlocked page is found by then; none
        // after two turns means every page is locked.
        let mut hand = self.hand?;
        for _ in 0..2 * self.resident {
            let slot = &mut self.slots[hand];
            if !slot.locked && !slot.referenced {
                self.hand = Some(hand);
                return Some(hand);
            }
            // A second chance: the bit is cleared and the hand moves on.
            slot.referenced = false;
            hand = self.next_of(hand);
        }
        self.hand = Some(hand);
        None
        // LAB(clock) HANDOUT
        // todo!(
        //     "lab clock: Clock::victim: sweep the ring from the hand, giving each referenced \
        //      page a second chance, and return the first unreferenced, unlocked page"
        // )
        // LAB(clock) END
    }
}
