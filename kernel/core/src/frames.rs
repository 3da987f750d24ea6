//! Frames for domains, through the platform's frame allocator: zeroed once, when they are
//! allocated, and returned as they are (see the kernel's `memory` module).

use frame_allocator::{FRAME_SIZE, Frame, FrameError, Owner};

use crate::Platform;

/// Allocates one frame for `owner` and zeroes it.
pub fn alloc_zeroed<P: Platform>(owner: Owner) -> Result<Frame, FrameError> {
    let frame = P::with_frames(|fa| fa.alloc(owner))?;
    P::zero_frame(frame);
    Ok(frame)
}

/// Allocates `count` physically contiguous frames for `owner` and zeroes them; the first.
pub fn alloc_zeroed_run<P: Platform>(count: u64, owner: Owner) -> Result<Frame, FrameError> {
    let first = P::with_frames(|fa| fa.alloc_contiguous(count, 1, owner))?;
    for i in 0..count {
        P::zero_frame(Frame::containing(first.addr() + i * FRAME_SIZE));
    }
    Ok(first)
}

/// Returns `frame`, held by `owner`, to the free pool as it is.
pub fn free<P: Platform>(frame: Frame, owner: Owner) -> Result<(), FrameError> {
    P::with_frames(|fa| fa.free(frame, owner))
}
