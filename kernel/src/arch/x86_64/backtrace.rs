//! Walking a stack through frame pointers (the kernel is built with
//! `-C force-frame-pointers=yes`): `[rbp]` is the caller's `rbp`, `[rbp + 8]` the return address.
//! The records are read with probes ([`super::probe`]), so a corrupt frame pointer ends the walk
//! instead of faulting.

use super::probe;

/// At most this many frames are reported.
const MAX_FRAMES: usize = 32;

unsafe extern "C" {
    static __text_start: u8;
    static __text_end: u8;
}

/// Calls `f` with each return address on the current stack, innermost first, starting with
/// the caller of `backtrace`.
#[inline(never)]
pub fn backtrace(f: &mut dyn FnMut(usize)) {
    let fp: usize;
    // SAFETY: reads this function's frame pointer; no memory is touched.
    unsafe {
        core::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    walk_frames(fp, f);
}

/// Walks frame records from `fp`; stops at a null or misaligned frame pointer, at a record that
/// cannot be read, at a return address outside the kernel's code, at a frame that is not
/// further out than the last, or after 32 frames.
pub(crate) fn walk_frames(mut fp: usize, f: &mut dyn FnMut(usize)) {
    let text = (&raw const __text_start) as usize..(&raw const __text_end) as usize;
    for _ in 0..MAX_FRAMES {
        if fp == 0 || !fp.is_multiple_of(8) {
            break;
        }
        let (Some(next), Some(ret)) = (probe::read_u64(fp), probe::read_u64(fp + 8)) else {
            break;
        };
        let (next, ret) = (next as usize, ret as usize);
        if !text.contains(&ret) {
            break;
        }
        f(ret);
        // Frames live at higher addresses the further out they are; anything else is corrupt.
        if next <= fp {
            break;
        }
        fp = next;
    }
}
