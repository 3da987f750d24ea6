//! The deliberate faults on RISC-V.

use core::arch::asm;

/// The kernel address the `kernel` kind reads (the kernel's image in the upper half).
pub const KERNEL_ADDRESS: usize = 0xffff_ffff_c020_0000;

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
