//! Walking the current stack through frame pointers (the kernel is built with
//! `-C force-frame-pointers=yes`): `[rbp]` is the caller's `rbp`, `[rbp + 8]` the return address.

use super::{DIRECT_MAP_BASE, DIRECT_MAP_SIZE, KERNEL_VMA};

/// At most this many frames are reported.
const MAX_FRAMES: usize = 32;

unsafe extern "C" {
    static __text_start: u8;
    static __text_end: u8;
}

/// Whether a frame record of 16 bytes at `fp` lies in memory the boot page tables map for the
/// kernel (the image window or the direct map).
fn frame_is_mapped(fp: usize) -> bool {
    let in_window = |base: usize, size: usize| fp >= base && fp - base <= size - 16;
    fp.is_multiple_of(8)
        && (in_window(KERNEL_VMA, 2 << 30) || in_window(DIRECT_MAP_BASE, DIRECT_MAP_SIZE as usize))
}

/// Calls `f` with each return address on the current stack, innermost first, starting with
/// the caller of `backtrace`; stops at a null frame pointer, at a frame outside kernel memory,
/// at a return address outside the kernel's code, or after 32 frames.
#[inline(never)]
pub fn backtrace(f: &mut dyn FnMut(usize)) {
    let text = (&raw const __text_start) as usize..(&raw const __text_end) as usize;
    let mut fp: usize;
    // SAFETY: reads this function's frame pointer; no memory is touched.
    unsafe {
        core::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    for _ in 0..MAX_FRAMES {
        if fp == 0 || !frame_is_mapped(fp) {
            break;
        }
        // SAFETY: `fp` is 8-aligned and the 16 bytes at it are mapped (checked above); they are
        // a frame record pushed by a function prologue on the current stack.
        let (next, ret) = unsafe {
            let rec = fp as *const usize;
            (rec.read(), rec.add(1).read())
        };
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
