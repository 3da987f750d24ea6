//! The deliberate faults on x86_64.

use core::arch::asm;

/// The kernel address the `kernel` kind reads (the kernel's image in the top 2 GiB: its
/// link address plus the 1 MiB it is loaded at).
pub const KERNEL_ADDRESS: usize = 0xffff_ffff_8010_0000;

/// Executes `ud2`, an undefined instruction.
pub fn illegal_instruction() {
    // SAFETY: deliberately faulting: `ud2` raises an invalid-opcode exception and the kernel
    // ends the domain. It reads and writes no memory or registers.
    unsafe { asm!("ud2", options(nomem, nostack)) }
}

/// Jumps to `addr` (another domain's code, which this domain may not execute).
pub fn jump(addr: usize) -> ! {
    // SAFETY: deliberately faulting: the fetch at `addr` raises a page fault and the kernel
    // ends the domain; nothing after the jump runs (`noreturn`).
    unsafe { asm!("jmp {addr}", addr = in(reg) addr, options(noreturn, nostack)) }
}

/// Writes a word to `addr` (another domain's stretch, which this domain may not write).
pub fn write(addr: usize) {
    // SAFETY: deliberately faulting: the store raises a page fault and the kernel ends the
    // domain. Should the kernel wrongly allow it, the word lands outside any Rust object of
    // this program (the address is not one of ours), so this program's state stays intact.
    unsafe {
        asm!("mov qword ptr [{addr}], {value}", addr = in(reg) addr,
             value = in(reg) 0x0bad_f00d_usize, options(nostack))
    }
}

/// Reads a word from `addr` (memory this domain may not read).
pub fn read(addr: usize) -> usize {
    let value: usize;
    // SAFETY: deliberately faulting: the load raises a page fault and the kernel ends the
    // domain. A load changes no memory.
    unsafe {
        asm!("mov {value}, qword ptr [{addr}]", addr = in(reg) addr, value = lateout(reg) value,
             options(nostack, readonly))
    }
    value
}

/// The current stack pointer (harmless; used to report where the stack is).
pub fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: copies `rsp` into a register; touches no memory.
    unsafe { asm!("mov {sp}, rsp", sp = out(reg) sp, options(nomem, nostack, preserves_flags)) }
    sp
}
