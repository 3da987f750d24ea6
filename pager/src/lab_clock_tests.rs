//! The lab `clock`'s graded tests on hand-made cases (`docs/labs/clock.md`): the clock
//! (`pager/src/replace/clock.rs`) told of pages mapped, accessed, locked and unmapped as the
//! pager tells it, and asked for victims. Each case says what the pager did and which victim
//! a second-chance clock must choose.

use alloc::vec::Vec;

use crate::replace::{Clock, ReplacementPolicy};

/// A clock with `pages` mapped in this order (each referenced, as a page just mapped is).
fn clock_with(pages: impl IntoIterator<Item = usize>) -> Clock {
    let mut c = Clock::new();
    for p in pages {
        c.mapped(p);
    }
    c
}

/// The victims in order while every victim is unmapped at once, as the pager does, until
/// there is none.
fn drain(c: &mut Clock) -> Vec<usize> {
    let mut order = Vec::new();
    while let Some(v) = c.victim() {
        order.push(v);
        c.unmapped(v);
        assert!(order.len() <= 64, "the clock keeps choosing victims: {order:?}");
    }
    order
}

#[test]
fn with_no_references_the_clock_evicts_in_fifo_order() {
    let mut c = clock_with(0..4);
    // The first victim's sweep clears the bits the pages were mapped with.
    assert_eq!(
        drain(&mut c),
        [0, 1, 2, 3],
        "pages 0, 1, 2, 3 mapped in this order and never accessed again leave in that order"
    );
    assert_eq!(c.victim(), None, "no page is resident: there is no victim");
}

#[test]
fn when_every_page_is_referenced_the_sweep_wraps_and_takes_the_first() {
    let mut c = clock_with([10, 11, 12]);
    assert_eq!(
        c.victim(),
        Some(10),
        "pages 10, 11, 12 were mapped (so referenced): the hand clears every bit in one turn \
         and comes back to 10, the first"
    );
    assert_eq!(
        c.victim(),
        Some(10),
        "asked again before 10 left, the clock chooses 10 again: the hand stays on its victim"
    );
    c.unmapped(10);
    assert_eq!(
        c.victim(),
        Some(11),
        "the first sweep cleared 11's bit, so once 10 is gone 11 is the victim"
    );
    for p in [11, 12] {
        c.accessed(p);
    }
    assert_eq!(
        c.victim(),
        Some(11),
        "11 and 12 both accessed again: the sweep clears both and wraps round to 11"
    );
}

#[test]
fn a_referenced_page_gets_a_second_chance_and_loses_its_bit() {
    let mut c = clock_with([10, 11, 12]);
    assert_eq!(c.victim(), Some(10), "the first sweep clears every bit and takes 10");
    c.accessed(10);
    assert_eq!(
        c.victim(),
        Some(11),
        "10 was accessed after the sweep: it gets a second chance and 11, unreferenced, goes"
    );
    c.unmapped(11);
    c.mapped(13);
    assert_eq!(
        c.victim(),
        Some(12),
        "12 lost its bit in the first sweep and the hand is on it: 12 goes (13, just mapped, \
         is behind the hand)"
    );
    c.unmapped(12);
    assert_eq!(
        c.victim(),
        Some(10),
        "the hand passed 10 once (its second chance) and cleared its bit; once 12 left, the \
         hand came round to 10, now the victim (13, just mapped, is behind it)"
    );
}

// ANCHOR: hand
#[test]
fn the_hand_keeps_its_place_between_calls() {
    let mut c = clock_with(0..4);
    assert_eq!(c.victim(), Some(0), "the first sweep clears every bit and takes 0");
    c.accessed(0);
    assert_eq!(c.victim(), Some(1), "0 gets a second chance; 1 goes");
    c.unmapped(1);
    assert_eq!(
        c.victim(),
        Some(2),
        "the hand moved past 0 (clearing its bit) to 1, and from 1 to 2 when 1 left: the next \
         victim is 2, not 0 (a sweep that starts again from the oldest page would take 0)"
    );
    c.unmapped(2);
    assert_eq!(c.victim(), Some(3), "then 3");
    c.unmapped(3);
    assert_eq!(c.victim(), Some(0), "and only then 0, its second chance used");
}
// ANCHOR_END: hand

#[test]
fn new_pages_join_behind_the_hand() {
    let mut c = clock_with(0..4);
    assert_eq!(c.victim(), Some(0), "the first sweep clears every bit and takes 0");
    c.unmapped(0);
    c.mapped(4);
    c.mapped(5);
    assert_eq!(
        drain(&mut c),
        [1, 2, 3, 4, 5],
        "with the hand on 1, pages 4 then 5 were mapped: they join the ring just behind the \
         hand (the last pages it reaches, in the order they came), so 1, 2, 3 leave first, \
         then 4 and 5 lose their bits and leave in their order"
    );
}

#[test]
fn removing_the_page_under_the_hand_moves_the_hand_on() {
    let mut c = clock_with(0..4);
    assert_eq!(c.victim(), Some(0), "the first sweep clears every bit and takes 0");
    c.unmapped(2);
    assert_eq!(
        c.victim(),
        Some(0),
        "page 2 left (not the one under the hand): the hand stays on 0, still the victim"
    );
    c.unmapped(0);
    assert_eq!(c.victim(), Some(1), "0 left from under the hand: the hand moves on to 1");
    c.unmapped(3);
    c.unmapped(1);
    assert_eq!(c.victim(), None, "every page left: there is no victim");
    c.mapped(7);
    assert_eq!(
        c.victim(),
        Some(7),
        "after the ring emptied, page 7 was mapped: it is the only page, so the victim"
    );
}

#[test]
fn locked_pages_are_skipped_and_none_when_all_are_locked() {
    let mut c = clock_with([1, 2]);
    c.locked(1);
    assert_eq!(c.victim(), Some(2), "page 1 is locked: never a victim, so 2 goes");
    c.locked(2);
    assert_eq!(
        c.victim(),
        None,
        "every resident page is locked: there is no victim (and the sweep must stop)"
    );
    c.unlocked(1);
    assert_eq!(c.victim(), Some(1), "page 1 was unlocked: it may be chosen again");
}
