//! Frame allocator and heap, as the running kernel sees them.

use alloc::vec::Vec;

use frame_allocator::{FRAME_SIZE, Frame, FrameError, Owner};

use crate::boot_info::PhysRange;
use crate::check;
use crate::ktest::Outcome;
use crate::memory::{self, HEAP_BYTES, with_frames};

/// Allocating and freeing through the global allocator keeps the owner table consistent, and a
/// double free is refused.
pub fn owner_table() -> Outcome {
    let before = with_frames(|fa| fa.free_count());
    let frames: Vec<_> = (0..64).map(|_| memory::alloc_zeroed_kernel_frame()).collect();
    check!(frames.iter().all(Result::is_ok), "allocating 64 frames failed");
    let after_alloc = with_frames(|fa| fa.free_count());
    check!(
        after_alloc == before - 64,
        "free count {=u64} after 64 allocations from {=u64}",
        after_alloc,
        before
    );
    for f in &frames {
        let f = *f.as_ref().unwrap();
        check!(with_frames(|fa| fa.owner(f)) == Ok(Owner::Kernel), "frame not owned by the kernel");
        check!(with_frames(|fa| fa.free(f, Owner::Kernel)).is_ok(), "free failed");
    }
    let f = *frames[0].as_ref().unwrap();
    let again = with_frames(|fa| fa.free(f, Owner::Kernel));
    check!(again == Err(FrameError::DoubleFree { frame: f }), "double free not refused: {}", again);
    check!(with_frames(|fa| fa.free_count()) == before, "frames leaked");
    check!(with_frames(|fa| fa.check()).is_ok(), "owner table and free count disagree");
    Ok(())
}

/// The heap serves allocations and gets its memory back.
pub fn heap() -> Outcome {
    let base = crate::heap::used();
    let mut v: Vec<u64> = Vec::new();
    for i in 0..10_000u64 {
        v.push(i * i);
    }
    check!(v.iter().enumerate().all(|(i, &x)| x == (i * i) as u64), "heap contents corrupted");
    check!(crate::heap::used() > base, "heap usage did not grow");
    drop(v);
    check!(crate::heap::used() == base, "heap usage did not return to {=usize}", base);
    let big: Result<Vec<u8>, _> = try_alloc(HEAP_BYTES as usize * 2);
    check!(big.is_err(), "an allocation larger than the heap succeeded");
    Ok(())
}

fn try_alloc(bytes: usize) -> Result<Vec<u8>, alloc::collections::TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(bytes)?;
    Ok(v)
}

/// No frame that touches a reserved range (firmware, kernel image, device tree, boot image, and
/// every range the device tree reserves) is ever handed out: every free frame, allocated one by
/// one until none is left, lies clear of them all, and every frame of them that the allocator
/// covers is marked reserved in the owner table.
pub fn reserved_never_handed_out() -> Outcome {
    let free_before = with_frames(|fa| fa.free_count());
    let mut ranges: Vec<PhysRange> = Vec::new();
    memory::for_each_reserved(&mut |r| ranges.push(r));
    let touches =
        |f: &Frame| ranges.iter().find(|r| f.addr() < r.end && r.start < f.addr() + FRAME_SIZE);
    let mut taken: Vec<Frame> = Vec::with_capacity(free_before as usize);
    with_frames(|fa| {
        while let Ok(f) = fa.alloc(Owner::Kernel) {
            taken.push(f);
        }
    });
    let bad = taken.iter().find_map(|f| touches(f).map(|r| (f.addr(), *r)));
    let freed = with_frames(|fa| taken.iter().all(|f| fa.free(*f, Owner::Kernel).is_ok()));
    check!(freed, "freeing the frames taken failed");
    check!(
        taken.len() as u64 == free_before,
        "{=usize} frames allocated of {=u64} free",
        taken.len(),
        free_before
    );
    if let Some((addr, r)) = bad {
        check!(false, "frame {=u64:#x} was handed out, inside reserved {}", addr, r);
    }
    let mut marked = 0u64;
    for r in &ranges {
        let mut a = r.start & !(FRAME_SIZE - 1);
        while a < r.end {
            if let Ok(owner) = with_frames(|fa| fa.owner(Frame::containing(a))) {
                check!(owner == Owner::Reserved, "frame {=u64:#x} of {} is {}", a, *r, owner);
                marked += 1;
            }
            a += FRAME_SIZE;
        }
    }
    check!(with_frames(|fa| fa.free_count()) == free_before, "frames leaked");
    defmt::info!(
        "frames: {=usize} reserved ranges ({=u64} frames) clear of all {=u64} free frames",
        ranges.len(),
        marked,
        free_before
    );
    Ok(())
}
