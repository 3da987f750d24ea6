//! The deliberate faults. Each function (but `stack_pointer`) is meant to make the kernel end
//! this domain; if one returns, the fault did not happen and the caller says so. The
//! instructions are each architecture's (`riscv64.rs`, `x86_64.rs`: the same functions and
//! `KERNEL_ADDRESS`); the stack overflow is portable.

use core::hint::black_box;

#[cfg(target_arch = "riscv64")]
mod riscv64;
#[cfg(target_arch = "riscv64")]
pub use riscv64::*;

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
pub use x86_64::*;

/// Recurses with a 4 KiB frame per level until the stack runs into its guard page (the depth
/// limit is never reached; it only keeps the recursion from being unconditional).
#[inline(never)]
pub fn recurse(depth: u64) -> u64 {
    let mut frame = [0u8; 4096];
    // The compiler must assume the frame is written and read, so every level stores into it.
    black_box(&mut frame);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1).wrapping_add(u64::from(frame[(depth % 4096) as usize]))
}
