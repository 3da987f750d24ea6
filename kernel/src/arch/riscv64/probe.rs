//! Probes: loads, stores and a CSR write that report a fault instead of taking the kernel down.
//!
//! Each probe is a single instruction at a known address; the trap handler sees a fault at that
//! address and resumes at the probe's fix-up, which returns "faulted". This is the mechanism the
//! kernel's tests use to check that an address is (un)mapped, and later the basis for copying
//! from and to domains safely.

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

#[repr(C)]
struct ReadResult {
    value: u64,
    faulted: u64,
}

unsafe extern "C" {
    fn __probe_read_u64(addr: usize) -> ReadResult;
    fn __probe_write_u64(addr: usize, value: u64) -> u64;
    fn __probe_read_u8(addr: usize) -> ReadResult;
    fn __probe_write_u8(addr: usize, value: u8) -> u64;
    fn __probe_write_stimecmp(value: u64) -> u64;
    fn __probe_copy_words(dst: *mut u64, src: usize, words: usize) -> u64;
    static __probe_table: [[usize; 2]; 6];
}

/// Reads the `u64` at `addr`, or `None` if the access faults.
pub fn read_u64(addr: usize) -> Option<u64> {
    // SAFETY: the probe performs one aligned load; a fault is caught by the trap handler and
    // turned into `faulted = 1`, so no address can harm the kernel. Reading device registers is
    // the caller's concern, hence the function is only used on memory.
    let r = unsafe { __probe_read_u64(addr) };
    (r.faulted == 0).then_some(r.value)
}

/// Reads the byte at `addr`, or `None` if the access faults.
pub fn read_u8(addr: usize) -> Option<u8> {
    // SAFETY: as for `read_u64`: one load, a fault is caught and reported.
    let r = unsafe { __probe_read_u8(addr) };
    (r.faulted == 0).then_some(r.value as u8)
}

/// Writes `value` to `addr`; `false` if the access faults.
pub fn write_u64(addr: usize, value: u64) -> bool {
    // SAFETY: as for `read_u64`; the caller chooses an address it is entitled to write (the
    // tests only write their own mappings), and a fault is caught.
    unsafe { __probe_write_u64(addr, value) == 0 }
}

/// Writes the byte `value` to `addr`; `false` if the access faults.
pub fn write_u8(addr: usize, value: u8) -> bool {
    // SAFETY: as for `write_u64`: one store, a fault is caught and reported; the caller
    // chooses an address it is entitled to write.
    unsafe { __probe_write_u8(addr, value) == 0 }
}

/// Copies `dst.len()` words from the aligned address `src` into `dst`, one probed load each;
/// `false` if a load faults (`dst` is then partly written).
pub fn copy_words(dst: &mut [u64], src: usize) -> bool {
    // SAFETY: the loop loads from `src` only through the probe instruction (a fault is caught
    // and reported) and stores only into `dst`, which it may write, `dst.len()` words.
    unsafe { __probe_copy_words(dst.as_mut_ptr(), src, dst.len()) == 0 }
}

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
