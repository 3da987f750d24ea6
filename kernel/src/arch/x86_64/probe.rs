//! Probes: loads, stores and a call that report a fault instead of taking the kernel down.
//!
//! Each probe is a single instruction at a known address; the trap handler sees a page fault,
//! a general-protection fault (a non-canonical address) or a stack-segment fault at that
//! address and resumes at the probe's fix-up, which returns "faulted". [`exec_ret`] calls an
//! address: if fetching the instruction there faults, the fault's instruction pointer is the
//! target, not the probe, so the handler also recognises the probe's return address on top of
//! the stack. The kernel's tests use probes to check that an address is (un)mapped and what
//! rights it has; [`last_fault`] tells them how the last caught fault was reported. The plain
//! loads, stores and copies are wrapped by the architectures' common
//! [`super::super::probe_access`]; the SMAP-open read and the call are x86_64's own.

use core::arch::global_asm;
use core::sync::atomic::{AtomicU64, Ordering};

use super::frame::{PF_INSTRUCTION, TrapFrame};

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

    .globl __probe_write_u8
__probe_write_u8:
    xorl    %eax, %eax
__probe_write_u8_insn:
    movb    %sil, (%rdi)
    ret
__probe_write_u8_fixup:
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

    /* The same load with RFLAGS.AC set, which lets the kernel read user pages under SMAP. */
    .globl __probe_read_u8_ac
__probe_read_u8_ac:
    xorl    %edx, %edx
    stac
__probe_read_u8_ac_insn:
    movzbl  (%rdi), %eax
    clac
    ret
__probe_read_u8_ac_fixup:
    clac
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

    .globl __probe_exec
__probe_exec:
__probe_exec_insn:
    call    *%rdi
__probe_exec_return:
    xorl    %eax, %eax
    ret
__probe_exec_fixup:
    movl    $1, %eax
    ret

    /* A lone `ret` in the kernel's text, for tests of what may be executed. */
    .globl __probe_text_ret
__probe_text_ret:
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
    .quad __probe_exec_insn, __probe_exec_fixup
    .quad __probe_read_u8_ac_insn, __probe_read_u8_ac_fixup
    .quad __probe_write_u8_insn, __probe_write_u8_fixup
    .globl __probe_exec_ret
__probe_exec_ret:
    .quad __probe_exec_return, __probe_exec_fixup
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
    fn __probe_read_u8_ac(addr: usize) -> ReadResult;
    fn __probe_exec(addr: usize) -> u64;
    static __probe_table: [[u64; 2]; 7];
    static __probe_exec_ret: [u64; 2];
    static __probe_text_ret: u8;
}

pub use super::super::probe_access::{copy_words, read_u8, read_u64, write_u8, write_u64};

/// The address of a `ret` in the kernel's text.
pub fn ret_in_text() -> usize {
    &raw const __probe_text_ret as usize
}

/// Reads the byte at `addr` as the kernel may once it has opened SMAP (RFLAGS.AC set, where
/// CR4.SMAP is on): user pages included. `None` if the access faults.
pub fn read_u8_any(addr: usize) -> Option<u8> {
    use ::x86_64::registers::control::{Cr4, Cr4Flags};
    // No interrupt handler runs with AC set.
    let _interrupts = super::super::InterruptGuard::new();
    if Cr4::read().contains(Cr4Flags::SUPERVISOR_MODE_ACCESS_PREVENTION) {
        // SAFETY: as for `read_u64`; `stac` exists because SMAP is on, and both the probe and
        // its fix-up clear AC again before returning.
        let r = unsafe { __probe_read_u8_ac(addr) };
        (r.faulted == 0).then_some(r.value as u8)
    } else {
        read_u8(addr)
    }
}

/// The `ret` instruction's encoding.
pub const RET: u8 = 0xc3;

/// Calls `addr` if the byte there is a `ret`, or cannot be read at all: `Some(true)` if the
/// `ret` ran, `Some(false)` if fetching it (or the call) faulted, `None` (and nothing is
/// called) if the byte is anything else.
pub fn exec_ret(addr: usize) -> Option<bool> {
    match read_u8_any(addr) {
        Some(RET) | None => {}
        Some(_) => return None,
    }
    // SAFETY: the byte at `addr` is `ret`, which returns at once and changes no register the
    // probe relies on; or the kernel cannot read it even with SMAP open, and then the fetch
    // faults too (x86_64 pages are readable wherever they are present and executable, and CR4's
    // protection keys are off), which the trap handler turns into a return with 1.
    Some(unsafe { __probe_exec(addr) } == 0)
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

/// If `frame` is a fault at a probe instruction (or at the target of [`exec_ret`]), points it at
/// the probe's fix-up, records the fault for [`last_fault`] and returns `true`.
pub(super) fn fix_up(frame: &mut TrapFrame) -> bool {
    // SAFETY: both tables are immutable, in `.rodata`, defined above.
    let (table, exec_return) = unsafe { (&__probe_table, &__probe_exec_ret) };
    let fixup = if let Some(e) = table.iter().find(|e| e[0] == frame.rip) {
        e[1]
    } else if frame.error & PF_INSTRUCTION != 0
        && frame.vector == 14
        && read_u64(frame.rsp as usize) == Some(exec_return[0])
    {
        // An instruction fetch at the target of `exec_ret`: drop the return address the call
        // pushed, as the target's `ret` would have.
        frame.rsp += 8;
        exec_return[1]
    } else {
        return false;
    };
    LAST_VECTOR.store(frame.vector, Ordering::Relaxed);
    LAST_ERROR.store(frame.error, Ordering::Relaxed);
    LAST_ADDRESS.store(::x86_64::registers::control::Cr2::read_raw(), Ordering::Relaxed);
    frame.rip = fixup;
    true
}
