//! Unit tests, and a model TLB that checks the scheme end to end: address spaces switched,
//! accessed and changed at random, with as few identifiers as 1, must always see their own
//! current mappings.

use std::collections::BTreeMap;
use std::vec::Vec;

use super::*;

#[test]
fn identifiers_are_handed_out_in_order_and_kept() {
    let mut a = AsidAllocator::new(8);
    let (mut x, mut y) = (Tag::NONE, Tag::NONE);
    assert_eq!(x.asid(), None);
    assert_eq!(a.switch_to(&mut x), Switch { asid: 1, flush: Flush::Asid(1) });
    assert_eq!(a.switch_to(&mut y), Switch { asid: 2, flush: Flush::Asid(2) });
    assert_eq!(a.switch_to(&mut x), Switch { asid: 1, flush: Flush::None });
    assert_eq!(a.switch_to(&mut y), Switch { asid: 2, flush: Flush::None });
    assert_eq!((x.asid(), y.asid()), (Some(1), Some(2)));
    assert_eq!((a.live(x), a.live(y)), (Some(1), Some(2)));
    assert_eq!(a.live(Tag::NONE), None);
    assert_eq!(a.generation(), 1);
}

#[test]
fn running_out_starts_a_generation_with_a_full_flush() {
    let mut a = AsidAllocator::new(4);
    let mut tags = [Tag::NONE; 4];
    for (i, t) in tags.iter_mut().take(3).enumerate() {
        assert_eq!(a.switch_to(t).asid, i as u16 + 1);
    }
    // The fourth space finds identifiers 1..=3 taken: a new generation, identifier 1 again.
    assert_eq!(a.switch_to(&mut tags[3]), Switch { asid: 1, flush: Flush::All });
    assert_eq!(a.generation(), 2);
    assert_eq!(a.live(tags[0]), None, "the old holder of 1 is stale");
    assert_eq!(a.live(tags[3]), Some(1));
    // The stale spaces get fresh identifiers of the new generation when they run again.
    assert_eq!(a.switch_to(&mut tags[0]), Switch { asid: 2, flush: Flush::Asid(2) });
    assert_eq!(a.switch_to(&mut tags[3]), Switch { asid: 1, flush: Flush::None });
}

#[test]
fn the_kernel_identifier_is_never_handed_out() {
    for count in [2, 3, 5, 16] {
        let mut a = AsidAllocator::new(count);
        let mut tags = [Tag::NONE; 40];
        for round in 0..5 {
            for (i, t) in tags.iter_mut().enumerate() {
                if (i + round) % 3 != 0 {
                    let s = a.switch_to(t);
                    assert_ne!(s.asid, KERNEL, "count {count}");
                    assert!(u32::from(s.asid) < count);
                }
            }
        }
    }
}

#[test]
fn live_tags_never_share_an_identifier() {
    let mut a = AsidAllocator::new(5);
    let mut tags = [Tag::NONE; 9];
    let mut rng = Rng(0x1234_5678);
    for _ in 0..10_000 {
        let i = rng.below(tags.len() as u64) as usize;
        a.switch_to(&mut tags[i]);
        let mut live: Vec<u16> = tags.iter().filter_map(|t| a.live(*t)).collect();
        let n = live.len();
        live.sort_unstable();
        live.dedup();
        assert_eq!(live.len(), n, "two live tags share an identifier");
        assert!(n <= 4);
    }
}

#[test]
fn without_identifiers_every_other_space_flushes_everything() {
    let mut a = AsidAllocator::from_bits(0);
    assert_eq!(a.count(), 1);
    let (mut x, mut y) = (Tag::NONE, Tag::NONE);
    assert_eq!(a.switch_to(&mut x), Switch { asid: 0, flush: Flush::All });
    assert_eq!(a.switch_to(&mut x), Switch { asid: 0, flush: Flush::None });
    assert_eq!(a.switch_to(&mut y), Switch { asid: 0, flush: Flush::All });
    assert_eq!(a.live(x), None);
    assert_eq!(a.switch_to(&mut x), Switch { asid: 0, flush: Flush::All });
}

#[test]
fn counts_are_clamped_and_bits_converted() {
    assert_eq!(AsidAllocator::new(0).count(), 1);
    assert_eq!(AsidAllocator::new(1 << 20).count(), MAX_COUNT);
    assert_eq!(AsidAllocator::from_bits(9).count(), 512);
    assert_eq!(AsidAllocator::from_bits(16).count(), 65_536);
    assert_eq!(AsidAllocator::from_bits(40).count(), 65_536);
    // With all 65,536, identifier 65,535 is handed out, then a new generation begins.
    let mut a = AsidAllocator::from_bits(16);
    let mut t = Tag::NONE;
    for _ in 1..65_535 {
        t = Tag::NONE;
        a.switch_to(&mut t);
    }
    assert_eq!(t.asid(), Some(65_534));
    let mut last = Tag::NONE;
    assert_eq!(a.switch_to(&mut last), Switch { asid: 65_535, flush: Flush::Asid(65_535) });
    let mut next = Tag::NONE;
    assert_eq!(a.switch_to(&mut next), Switch { asid: 1, flush: Flush::All });
}

#[test]
fn restart_makes_every_tag_stale() {
    let mut a = AsidAllocator::new(16);
    let mut t = Tag::NONE;
    a.switch_to(&mut t);
    assert_eq!(a.restart(3), Flush::All);
    assert_eq!(a.count(), 3);
    assert_eq!(a.live(t), None);
    assert_eq!(a.generation(), 2);
    assert_eq!(a.switch_to(&mut t), Switch { asid: 1, flush: Flush::Asid(1) });
}

/// xorshift64: deterministic pseudo-random numbers for the model runs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the kernel does, with switches for the mistakes the model must catch.
#[derive(Clone, Copy)]
struct Policy {
    /// Run the flush [`AsidAllocator::switch_to`] asks for.
    flush_on_switch: bool,
    /// Flush a live space's changed page by identifier and address.
    flush_changes: bool,
}

const CORRECT: Policy = Policy { flush_on_switch: true, flush_changes: true };

/// Pages per space in the model.
const PAGES: u8 = 6;

/// A model machine: address spaces with page tables, and a TLB that caches every walk it makes,
/// the absence of a mapping included (the most the hardware may cache).
struct Model {
    alloc: AsidAllocator,
    policy: Policy,
    tables: Vec<[Option<u32>; PAGES as usize]>,
    tags: Vec<Tag>,
    tlb: BTreeMap<(u16, u8), Option<u32>>,
    running: Option<(usize, u16)>,
}

impl Model {
    fn new(count: u32, spaces: usize, policy: Policy) -> Self {
        Model {
            alloc: AsidAllocator::new(count),
            policy,
            tables: std::vec![[None; PAGES as usize]; spaces],
            tags: std::vec![Tag::NONE; spaces],
            tlb: BTreeMap::new(),
            running: None,
        }
    }

    fn flush(&mut self, f: Flush) {
        match f {
            Flush::None => {}
            Flush::Asid(a) => self.tlb.retain(|(asid, _), _| *asid != a),
            Flush::All => self.tlb.clear(),
        }
    }

    fn switch(&mut self, space: usize) {
        let s = self.alloc.switch_to(&mut self.tags[space]);
        self.running = Some((space, s.asid));
        if self.policy.flush_on_switch {
            self.flush(s.flush);
        }
    }

    /// An access by the running space: what the TLB (or a walk that fills it) yields.
    fn access(&mut self, page: u8) -> Option<u32> {
        let (space, asid) = self.running.expect("a space runs");
        let walked = self.tables[space][page as usize];
        *self.tlb.entry((asid, page)).or_insert(walked)
    }

    /// Maps, remaps or unmaps `page` of `space` (running or not).
    fn change(&mut self, space: usize, page: u8, to: Option<u32>) {
        self.tables[space][page as usize] = to;
        if self.policy.flush_changes
            && let Some(asid) = self.alloc.live(self.tags[space])
        {
            self.tlb.remove(&(asid, page));
        }
    }

    /// Runs `steps` random steps; returns the first step at which a space saw a translation
    /// that is not its own current one.
    fn run(&mut self, seed: u64, steps: u32) -> Option<u32> {
        let mut rng = Rng(seed);
        let spaces = self.tables.len() as u64;
        self.switch(0);
        for step in 0..steps {
            match rng.below(10) {
                0..=2 => self.switch(rng.below(spaces) as usize),
                3..=6 => {
                    let page = rng.below(u64::from(PAGES)) as u8;
                    let (space, _) = self.running.unwrap();
                    if self.access(page) != self.tables[space][page as usize] {
                        return Some(step);
                    }
                }
                _ => {
                    let space = rng.below(spaces) as usize;
                    let page = rng.below(u64::from(PAGES)) as u8;
                    // Frame numbers unique to the space, so another space's entry shows.
                    let to =
                        (rng.below(3) != 0).then(|| (space as u32) << 16 | rng.below(4) as u32);
                    self.change(space, page, to);
                }
            }
        }
        None
    }
}

#[test]
fn the_model_sees_only_current_translations_with_any_count() {
    for count in [1, 2, 3, 4, 7, 64, MAX_COUNT] {
        for seed in 1..=8u64 {
            let mut m = Model::new(count, 7, CORRECT);
            let bad = m.run(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), 20_000);
            assert_eq!(bad, None, "count {count}, seed {seed}: a stale translation was seen");
            if count <= 4 {
                assert!(m.alloc.generation() > 100, "count {count}: too few generations");
            }
        }
    }
}

#[test]
fn the_model_catches_a_missing_switch_flush() {
    let policy = Policy { flush_on_switch: false, ..CORRECT };
    let caught = (1..=8u64).any(|seed| Model::new(3, 7, policy).run(seed, 20_000).is_some());
    assert!(caught, "recycling without the flush went unnoticed: the model proves nothing");
}

#[test]
fn the_model_catches_a_missing_change_flush() {
    let policy = Policy { flush_changes: false, ..CORRECT };
    let caught = (1..=8u64).any(|seed| Model::new(64, 7, policy).run(seed, 20_000).is_some());
    assert!(caught, "changes without a flush went unnoticed: the model proves nothing");
}
