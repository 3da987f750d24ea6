//! Probes: loads, stores and a call that report a fault instead of taking the kernel down.
//!
//! Each probe is a single instruction at a known address; the trap handler sees a page fault,
//! a general-protection fault (a non-canonical address) or a stack-segment fault at that
//! address and resumes at the probe's fix-up, which returns "faulted". The kernel's tests use
//! probes to check that an address is (un)mapped and what rights it has; [`last_fault`] tells
//! them how the last caught fault was reported.

use core::arch::global_asm;
use core::sync::atomic::{AtomicU64, Ordering};

use super::trap::TrapFrame;

global_asm!(
    r#"
    .pushsection .text.probes, "ax"
    .globl __probe_read_u64
__probe_read_u64:
    xorl    %edx, %edx
__probe_read_insn:
    movq    (%rdi), %rax
    ret
__probe_read_fixup:
    movl    $1, %edx
    ret

    .globl __probe_write_u64
__probe_write_u64:
    xorl    %eax, %eax
__probe_write_insn:
    movq    %rsi, (%rdi)
    ret
__probe_write_fixup:
    movl    $1, %eax
    ret

    .globl __probe_read_u8
__probe_read_u8:
    xorl    %edx, %edx
__probe_read_u8_insn:
    movzbl  (%rdi), %eax
    ret
__probe_read_u8_fixup:
    movl    $1, %edx
    ret

    .globl __probe_copy_words
__probe_copy_words:
    testq   %rdx, %rdx
    jz      2f
1:
__probe_copy_insn:
    movq    (%rsi), %rax
    movq    %rax, (%rdi)
    addq    $8, %rdi
    addq    $8, %rsi
    decq    %rdx
    jnz     1b
2:
    xorl    %eax, %eax
    ret
__probe_copy_fixup:
    movl    $1, %eax
    ret

    .popsection

    .pushsection .rodata.probes, "a"
    .balign 8
    .globl __probe_table
__probe_table:
    .quad __probe_read_insn, __probe_read_fixup
    .quad __probe_write_insn, __probe_write_fixup
    .quad __probe_read_u8_insn, __probe_read_u8_fixup
    .quad __probe_copy_insn, __probe_copy_fixup
    .popsection
    "#,
    options(att_syntax)
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
    fn __probe_copy_words(dst: *mut u64, src: usize, words: usize) -> u64;
    static __probe_table: [[u64; 2]; 4];
}

/// Reads the `u64` at `addr`, or `None` if the access faults.
pub fn read_u64(addr: usize) -> Option<u64> {
    // SAFETY: the probe performs one load; a fault is caught by the trap handler and turned
    // into `faulted = 1`, so no address can harm the kernel. Reading device registers is the
    // caller's concern, hence the function is only used on memory.
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

/// Copies `dst.len()` words from address `src` into `dst`, one probed load each; `false` if a
/// load faults (`dst` is then partly written).
pub fn copy_words(dst: &mut [u64], src: usize) -> bool {
    // SAFETY: the loop loads from `src` only through the probe instruction (a fault is caught
    // and reported) and stores only into `dst`, which it may write, `dst.len()` words.
    unsafe { __probe_copy_words(dst.as_mut_ptr(), src, dst.len()) == 0 }
}

/// How the last fault a probe caught was reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, defmt::Format)]
pub struct Fault {
    /// The exception's vector (14 for a page fault).
    pub vector: u64,
    /// Its error code.
    pub error: u64,
    /// CR2 (the faulting address of a page fault).
    pub address: u64,
}

static LAST_VECTOR: AtomicU64 = AtomicU64::new(u64::MAX);
static LAST_ERROR: AtomicU64 = AtomicU64::new(0);
static LAST_ADDRESS: AtomicU64 = AtomicU64::new(0);

/// The last fault a probe caught, if any.
pub fn last_fault() -> Option<Fault> {
    let vector = LAST_VECTOR.load(Ordering::Relaxed);
    (vector != u64::MAX).then(|| Fault {
        vector,
        error: LAST_ERROR.load(Ordering::Relaxed),
        address: LAST_ADDRESS.load(Ordering::Relaxed),
    })
}

/// If `frame` is a fault at a probe instruction, points it at the probe's fix-up, records the
/// fault for [`last_fault`] and returns `true`.
pub(super) fn fix_up(frame: &mut TrapFrame) -> bool {
    // SAFETY: the table is immutable, in `.rodata`, defined above.
    let table = unsafe { &__probe_table };
    let Some(fixup) = table.iter().find(|e| e[0] == frame.rip).map(|e| e[1]) else {
        return false;
    };
    LAST_VECTOR.store(frame.vector, Ordering::Relaxed);
    LAST_ERROR.store(frame.error, Ordering::Relaxed);
    LAST_ADDRESS.store(::x86_64::registers::control::Cr2::read_raw(), Ordering::Relaxed);
    frame.rip = fixup;
    true
}
