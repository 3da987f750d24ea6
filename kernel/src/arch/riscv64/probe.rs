//! Probes: loads, stores and a CSR write that report a fault instead of taking the kernel down.
//!
//! Each probe is a single instruction at a known address; the trap handler sees a fault at that
//! address and resumes at the probe's fix-up, which returns "faulted". This is the mechanism the
//! kernel's tests use to check that an address is (un)mapped, and the basis for copying from
//! and to domains safely. The loads, stores and copies are wrapped by the architectures' common
//! [`super::super::probe_access`]; the `stimecmp` write is RISC-V's own.

use core::arch::global_asm;

global_asm!(
    r#"
    .section .text
    .globl __probe_read_u64
__probe_read_u64:
    mv      a1, zero
__probe_read_insn:
    ld      a0, 0(a0)
    ret
__probe_read_fixup:
    li      a1, 1
    ret

    .globl __probe_write_u64
__probe_write_u64:
    mv      a2, a0
    mv      a0, zero
__probe_write_insn:
    sd      a1, 0(a2)
    ret
__probe_write_fixup:
    li      a0, 1
    ret

    .globl __probe_write_u8
__probe_write_u8:
    mv      a2, a0
    mv      a0, zero
__probe_write_u8_insn:
    sb      a1, 0(a2)
    ret
__probe_write_u8_fixup:
    li      a0, 1
    ret

    .globl __probe_read_u8
__probe_read_u8:
    mv      a1, zero
__probe_read_u8_insn:
    lbu     a0, 0(a0)
    ret
__probe_read_u8_fixup:
    li      a1, 1
    ret

    .globl __probe_copy_words
__probe_copy_words:
    beqz    a2, 2f
1:
__probe_copy_insn:
    ld      t0, 0(a1)
    sd      t0, 0(a0)
    addi    a0, a0, 8
    addi    a1, a1, 8
    addi    a2, a2, -1
    bnez    a2, 1b
2:
    mv      a0, zero
    ret
__probe_copy_fixup:
    li      a0, 1
    ret

    .globl __probe_write_stimecmp
__probe_write_stimecmp:
    mv      a1, a0
    mv      a0, zero
__probe_stimecmp_insn:
    csrw    0x14d, a1
    ret
__probe_stimecmp_fixup:
    li      a0, 1
    ret

    .section .rodata
    .balign 8
    .globl __probe_table
__probe_table:
    .quad __probe_read_insn, __probe_read_fixup
    .quad __probe_write_insn, __probe_write_fixup
    .quad __probe_read_u8_insn, __probe_read_u8_fixup
    .quad __probe_stimecmp_insn, __probe_stimecmp_fixup
    .quad __probe_copy_insn, __probe_copy_fixup
    .quad __probe_write_u8_insn, __probe_write_u8_fixup
    "#
);

unsafe extern "C" {
    fn __probe_write_stimecmp(value: u64) -> u64;
    static __probe_table: [[usize; 2]; 6];
}

pub use super::super::probe_access::{copy_words, read_u8, read_u64, write_u8, write_u64};

/// Writes `value` to the `stimecmp` CSR (the Sstc extension's supervisor timer compare
/// register); `false` if the instruction traps because the CPU has no such register or the
/// firmware has not opened it to S-mode (`menvcfg.STCE`).
pub fn write_stimecmp(value: u64) -> bool {
    // SAFETY: one CSR write; an illegal-instruction trap is caught and reported. Writing
    // `stimecmp` only decides when the supervisor timer interrupt is raised.
    unsafe { __probe_write_stimecmp(value) == 0 }
}

/// The fix-up address for a fault at `pc`, if `pc` is a probe instruction.
pub(super) fn fixup_for(pc: usize) -> Option<usize> {
    // SAFETY: `__probe_table` is an immutable table in `.rodata` defined above.
    let table = unsafe { &__probe_table };
    table.iter().find(|e| e[0] == pc).map(|e| e[1])
}
