//! The deliberate faults. Each function (but `stack_pointer`) is meant to make the kernel end
//! this domain; if one returns, the fault did not happen and the caller says so.

use core::arch::asm;
use core::hint::black_box;

/// Executes `unimp`, an illegal instruction.
pub fn illegal_instruction() {
    // SAFETY: deliberately faulting: `unimp` raises an illegal-instruction trap and the kernel
    // ends the domain. It reads and writes no memory or registers.
    unsafe { asm!("unimp", options(nomem, nostack)) }
}

/// Jumps to `addr` (another domain's code, which this domain may not execute).
pub fn jump(addr: usize) -> ! {
    // SAFETY: deliberately faulting: the fetch at `addr` raises an instruction page fault and
    // the kernel ends the domain; nothing after the jump runs (`noreturn`).
    unsafe { asm!("jr {addr}", addr = in(reg) addr, options(noreturn, nostack)) }
}

/// Writes a word to `addr` (another domain's stretch, which this domain may not write).
pub fn write(addr: usize) {
    // SAFETY: deliberately faulting: the store raises a store page fault and the kernel ends
    // the domain. Should the kernel wrongly allow it, the word lands outside any Rust object of
    // this program (the address is not one of ours), so this program's state stays intact.
    unsafe {
        asm!("sd {value}, 0({addr})", addr = in(reg) addr, value = in(reg) 0x0bad_f00d_usize,
             options(nostack))
    }
}

/// Reads a word from `addr` (memory this domain may not read).
pub fn read(addr: usize) -> usize {
    let value: usize;
    // SAFETY: deliberately faulting: the load raises a load page fault and the kernel ends the
    // domain. A load changes no memory.
    unsafe {
        asm!("ld {value}, 0({addr})", addr = in(reg) addr, value = lateout(reg) value,
             options(nostack, readonly))
    }
    value
}

/// The current stack pointer (harmless; used to report where the stack is).
pub fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: copies `sp` into a register; touches no memory.
    unsafe { asm!("mv {sp}, sp", sp = out(reg) sp, options(nomem, nostack, preserves_flags)) }
    sp
}

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
