//! Frame allocator and heap, as the running kernel sees them.

use alloc::vec::Vec;

use frame_allocator::{FrameError, Owner};

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
