use std::vec;
use std::vec::Vec;

use super::*;

const BASE: u64 = 0x8000_0000;

fn with_allocator(frames: usize, f: impl FnOnce(&mut FrameAllocator<'_>)) {
    let mut table = vec![0u32; frames];
    let mut fa = FrameAllocator::new(BASE, &mut table).unwrap();
    fa.add_free(BASE, BASE + frames as u64 * FRAME_SIZE);
    f(&mut fa);
    fa.check().unwrap();
}

#[test]
fn starts_reserved_until_memory_is_added() {
    let mut table = vec![0u32; 8];
    let mut fa = FrameAllocator::new(BASE, &mut table).unwrap();
    assert_eq!(fa.free_count(), 0);
    assert_eq!(fa.owned_by(Owner::Reserved), 8);
    assert_eq!(fa.alloc(Owner::Kernel), Err(FrameError::Exhausted { requested: 1, free: 0 }));
    // Partial frames at the edges stay reserved.
    fa.add_free(BASE + 100, BASE + 4 * FRAME_SIZE + 100);
    assert_eq!(fa.free_count(), 3);
    fa.check().unwrap();
}

#[test]
fn allocate_and_free_every_frame() {
    with_allocator(16, |fa| {
        let frames: Vec<_> = (0..16).map(|_| fa.alloc(Owner::Domain(7)).unwrap()).collect();
        let mut sorted = frames.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 16, "no frame handed out twice");
        assert!(frames.iter().all(|f| f.addr() % FRAME_SIZE == 0));
        assert_eq!(fa.owned_by(Owner::Domain(7)), 16);
        assert_eq!(fa.free_count(), 0);
        for f in frames {
            fa.free(f, Owner::Domain(7)).unwrap();
        }
        assert_eq!(fa.free_count(), 16);
    });
}

#[test]
fn double_free_is_rejected() {
    with_allocator(4, |fa| {
        let f = fa.alloc(Owner::Kernel).unwrap();
        fa.free(f, Owner::Kernel).unwrap();
        assert_eq!(fa.free(f, Owner::Kernel), Err(FrameError::DoubleFree { frame: f }));
        assert_eq!(fa.free_count(), 4);
    });
}

#[test]
fn exhaustion_is_reported_with_counts() {
    with_allocator(4, |fa| {
        for _ in 0..3 {
            fa.alloc(Owner::Kernel).unwrap();
        }
        assert_eq!(
            fa.alloc_contiguous(2, 1, Owner::Kernel),
            Err(FrameError::Exhausted { requested: 2, free: 1 })
        );
        fa.alloc(Owner::Kernel).unwrap();
        assert_eq!(fa.alloc(Owner::Kernel), Err(FrameError::Exhausted { requested: 1, free: 0 }));
    });
}

#[test]
fn only_the_owner_may_free() {
    with_allocator(4, |fa| {
        let f = fa.alloc(Owner::Domain(1)).unwrap();
        assert_eq!(
            fa.free(f, Owner::Domain(2)),
            Err(FrameError::NotOwner { frame: f, owner: Owner::Domain(1) })
        );
        assert_eq!(fa.owner(f), Ok(Owner::Domain(1)));
        fa.free(f, Owner::Domain(1)).unwrap();
    });
}

#[test]
fn reserved_frames_are_never_handed_out_or_freed() {
    with_allocator(8, |fa| {
        fa.reserve(BASE + 2 * FRAME_SIZE, BASE + 3 * FRAME_SIZE + 1);
        assert_eq!(fa.free_count(), 6);
        let reserved = Frame::containing(BASE + 2 * FRAME_SIZE);
        assert_eq!(
            fa.free(reserved, Owner::Kernel),
            Err(FrameError::NotOwner { frame: reserved, owner: Owner::Reserved })
        );
        let got: Vec<_> = (0..6).map(|_| fa.alloc(Owner::Kernel).unwrap()).collect();
        assert!(!got.contains(&reserved));
        assert!(!got.contains(&reserved.add(1)));
    });
}

#[test]
fn contiguous_allocation_respects_alignment_and_holes() {
    with_allocator(64, |fa| {
        let single = fa.alloc(Owner::Kernel).unwrap();
        assert_eq!(single.addr(), BASE);
        let run = fa.alloc_contiguous(8, 8, Owner::Kernel).unwrap();
        assert_eq!((run.addr() / FRAME_SIZE) % 8, 0);
        assert_eq!(run.addr(), BASE + 8 * FRAME_SIZE, "skips the partly used first block");
        for k in 0..8 {
            assert_eq!(fa.owner(run.add(k)), Ok(Owner::Kernel));
        }
        fa.free_contiguous(run, 8, Owner::Kernel).unwrap();
        assert_eq!(fa.alloc_contiguous(0, 1, Owner::Kernel), Err(FrameError::Invalid));
        assert_eq!(fa.alloc_contiguous(1, 3, Owner::Kernel), Err(FrameError::Invalid));
        assert_eq!(fa.alloc(Owner::Free), Err(FrameError::Invalid));
    });
}

#[test]
fn failed_multi_free_frees_nothing() {
    with_allocator(8, |fa| {
        let run = fa.alloc_contiguous(4, 1, Owner::Domain(3)).unwrap();
        fa.transfer(run.add(2), Owner::Domain(3), Owner::Domain(4)).unwrap();
        let before = fa.free_count();
        assert!(matches!(
            fa.free_contiguous(run, 4, Owner::Domain(3)),
            Err(FrameError::NotOwner { owner: Owner::Domain(4), .. })
        ));
        assert_eq!(fa.free_count(), before);
        assert_eq!(fa.owned_by(Owner::Domain(3)), 3);
    });
}

#[test]
fn out_of_range_and_misaligned_addresses_are_rejected() {
    with_allocator(4, |fa| {
        let outside = Frame::containing(BASE + 4 * FRAME_SIZE);
        assert_eq!(
            fa.free(outside, Owner::Kernel),
            Err(FrameError::OutOfRange { addr: outside.addr() })
        );
        assert_eq!(
            fa.owner(Frame::containing(BASE - FRAME_SIZE)),
            Err(FrameError::OutOfRange { addr: BASE - FRAME_SIZE })
        );
        let f = fa.alloc(Owner::Kernel).unwrap();
        assert!(fa.free_contiguous(f, u64::MAX / 2, Owner::Kernel).is_err());
        assert!(FrameAllocator::new(BASE + 1, &mut [0; 1]).is_err());
    });
}

#[test]
fn owner_table_stays_consistent_under_random_churn() {
    // A fixed-seed xorshift drives allocations and frees; after every step the owner table and
    // the free count must agree, and every held frame must belong to whoever we think holds it.
    let mut table = vec![0u32; 256];
    let mut fa = FrameAllocator::new(BASE, &mut table).unwrap();
    fa.add_free(BASE, BASE + 256 * FRAME_SIZE);
    let mut held: Vec<(Frame, u64, Owner)> = Vec::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..5000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let owner = Owner::Domain((x % 5) as u32);
        if !x.is_multiple_of(3) || held.is_empty() {
            let n = 1 + (x >> 8) % 4;
            if let Ok(f) = fa.alloc_contiguous(n, 1, owner) {
                held.push((f, n, owner));
            }
        } else {
            let (f, n, o) = held.swap_remove((x >> 16) as usize % held.len());
            fa.free_contiguous(f, n, o).unwrap();
        }
        fa.check().unwrap();
    }
    for (f, n, o) in &held {
        for k in 0..*n {
            assert_eq!(fa.owner(f.add(k)), Ok(*o));
        }
    }
    let held_total: u64 = held.iter().map(|h| h.1).sum();
    assert_eq!(fa.free_count() + held_total, 256);
}

#[test]
fn domain_counts_follow_every_change_of_hands() {
    let mut table = [0u32; 64];
    let mut fa = FrameAllocator::new(0x8000_0000, &mut table).unwrap();
    fa.add_free(0x8000_0000, 0x8000_0000 + 64 * FRAME_SIZE);
    let a = Owner::Domain(3);
    let far = Owner::Domain(COUNTED_DOMAINS as u32 + 5);
    let f1 = fa.alloc(a).unwrap();
    let run = fa.alloc_contiguous(4, 4, a).unwrap();
    let f2 = fa.alloc(far).unwrap();
    assert_eq!(fa.owned_by(a), 5);
    assert_eq!(fa.owned_by(far), 1);
    fa.transfer(f2, far, a).unwrap();
    fa.transfer(f1, a, Owner::Kernel).unwrap();
    assert_eq!(fa.owned_by(a), 5);
    assert_eq!(fa.owned_by(far), 0);
    fa.free_contiguous(run, 4, a).unwrap();
    assert_eq!(fa.owned_by(a), 1);
    fa.reserve(f2.addr(), f2.addr() + FRAME_SIZE);
    assert_eq!(fa.owned_by(a), 0);
    fa.check().unwrap();
}

/// xorshift64, for the randomised tests.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[test]
fn lazy_table_matches_a_reference_under_random_churn() {
    // A table of garbage, several chunks long, handed free and reserved ranges (more than the
    // allocator remembers, some of a frame or two), then random allocations and frees, checked after every step against
    // a fully written reference table: no reserved frame is handed out, and every owner and
    // count agrees with the reference.
    let frames = 5 * CHUNK + 123;
    let mut table = vec![0xdead_beefu32; frames];
    let mut fa = FrameAllocator::new(BASE, &mut table).unwrap();
    let mut reference = vec![Owner::Reserved; frames];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let at = |i: usize| BASE + i as u64 * FRAME_SIZE;
    fa.add_free(at(0), at(frames));
    reference.fill(Owner::Free);
    for k in 0..(2 * MAX_PENDING) {
        let s = next(&mut x) as usize % frames;
        // Some a frame or two long, so that the set-up meets pieces of one entry.
        let longest = if k % 4 == 1 { 3 } else { 2 * CHUNK };
        let e = (s + 1 + next(&mut x) as usize % longest).min(frames);
        if k % 3 == 2 {
            fa.add_free(at(s), at(e));
            reference[s..e].fill(Owner::Free);
        } else {
            fa.reserve(at(s), at(e));
            reference[s..e].fill(Owner::Reserved);
        }
        let free = reference.iter().filter(|&&o| o == Owner::Free).count() as u64;
        assert_eq!(fa.free_count(), free);
    }
    assert!(fa.ready() < frames, "the table was not set up eagerly");
    let reserved = reference.iter().filter(|&&o| o == Owner::Reserved).count() as u64;
    assert_eq!(fa.owned_by(Owner::Reserved), reserved);
    fa.check().unwrap();
    let mut held: Vec<(usize, usize, Owner)> = Vec::new();
    let mut free = reference.iter().filter(|&&o| o == Owner::Free).count() as u64;
    for step in 0..3000 {
        let r = next(&mut x);
        let owner = Owner::Domain((r % 5) as u32);
        if !r.is_multiple_of(3) || held.is_empty() {
            let n = 1 + ((r >> 8) % if step % 50 == 0 { 3000 } else { 4 }) as usize;
            if let Ok(f) = fa.alloc_contiguous(n as u64, 1 << ((r >> 20) % 3), owner) {
                let i = ((f.addr() - BASE) / FRAME_SIZE) as usize;
                assert!(
                    reference[i..i + n].iter().all(|&o| o == Owner::Free),
                    "handed out a held or reserved frame"
                );
                reference[i..i + n].fill(owner);
                free -= n as u64;
                held.push((i, n, owner));
            }
        } else {
            let (i, n, o) = held.swap_remove((r >> 16) as usize % held.len());
            fa.free_contiguous(Frame(at(i)), n as u64, o).unwrap();
            reference[i..i + n].fill(Owner::Free);
            free += n as u64;
        }
        if step % 100 == 0 {
            fa.check().unwrap();
        }
        assert_eq!(fa.free_count(), free);
        let probe = next(&mut x) as usize % frames;
        assert_eq!(fa.owner(Frame(at(probe))), Ok(reference[probe]));
    }
    assert_eq!(fa.owned_by(Owner::Domain(7)), 0);
    for (i, &o) in reference.iter().enumerate() {
        assert_eq!(fa.owner(Frame(at(i))), Ok(o), "frame {i}");
    }
}

#[test]
fn frames_past_the_set_up_table_cannot_change_hands() {
    let frames = 3 * CHUNK;
    let mut table = vec![0u32; frames];
    let mut fa = FrameAllocator::new(BASE, &mut table).unwrap();
    fa.add_free(BASE, BASE + frames as u64 * FRAME_SIZE);
    assert_eq!(fa.free_count(), frames as u64);
    let last = Frame(BASE + (frames as u64 - 1) * FRAME_SIZE);
    assert_eq!(fa.owner(last), Ok(Owner::Free));
    assert_eq!(fa.free(last, Owner::Kernel), Err(FrameError::DoubleFree { frame: last }));
    assert!(fa.transfer(last, Owner::Free, Owner::Kernel).is_err());
    // The whole table is reached when asked for.
    assert!(fa.alloc_contiguous(frames as u64, 1, Owner::Kernel).is_ok());
    assert_eq!(fa.ready(), frames);
    fa.check().unwrap();
}
