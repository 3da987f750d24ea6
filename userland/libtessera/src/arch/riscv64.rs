//! RISC-V (riscv64gc, `lp64d`): the `ecall` instruction, the `time` CSR, the program entry,
//! and saving and loading the callee-saved registers of user-level threads.
//!
//! System calls: the number in `a7`, the arguments in `a0..a5`; the kernel returns the status
//! in `a0` and the value in `a1` and changes no other register. The entry and the activation
//! handler receive their arguments in `a0..a3` (`abi::ENTRY_ARGUMENTS`) with `sp` 16-byte
//! aligned. A thread switch happens inside a function call (`switch`), so only what the calling
//! convention says a callee preserves needs saving: `ra`, `sp`, `s0..s11`, `fs0..fs11`.

use core::arch::{asm, global_asm};

use abi::Call;

/// Makes system call `number` with `args` in `a0..a5`; returns `(a0, a1)`: the status and the
/// value.
///
/// # Safety
/// As for [`crate::syscall::raw`]: the call must not unmap or remove access to memory that
/// Rust code still references.
#[inline(always)]
pub(crate) unsafe fn syscall(number: usize, args: [usize; 6]) -> (usize, usize) {
    let status: usize;
    let value: usize;
    // SAFETY: `ecall` traps to the kernel, which reads `a0..a5` and `a7`, may read (never
    // write) caller memory named by the arguments, writes only `a0` and `a1`, and leaves the
    // stack alone (`nostack`). The memory effects of the particular call are the caller's
    // obligation (this function's contract).
    unsafe {
        asm!(
            "ecall",
            inlateout("a0") args[0] => status,
            inlateout("a1") args[1] => value,
            in("a2") args[2],
            in("a3") args[3],
            in("a4") args[4],
            in("a5") args[5],
            in("a7") number,
            options(nostack),
        );
    }
    (status, value)
}

/// The `resume` call on the context at `ctx`; returns only if the kernel refuses it, with the
/// error status.
///
/// # Safety
/// `ctx` must point to a readable `abi::SavedContext`; the domain continues there.
#[inline(always)]
pub(crate) unsafe fn resume(ctx: *const abi::SavedContext) -> usize {
    let status: usize;
    // SAFETY: `resume` reads the context at `ctx` (readable: this function's contract) and
    // continues there; it returns to this code only with an error status in `a0`.
    unsafe {
        asm!(
            "ecall",
            inlateout("a0") ctx as usize => status,
            in("a7") Call::Resume as usize,
            out("a1") _,
            options(nostack),
        );
    }
    status
}

/// The `time` CSR: ticks since boot, at `Dcb::timebase_hz`.
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    let t: u64;
    // SAFETY: `rdtime` reads the `time` CSR, which the kernel enables for user mode
    // (`scounteren.TM`); it has no side effects and touches no memory.
    unsafe { asm!("rdtime {0}", out(reg) t, options(nomem, nostack)) };
    t
}

// The kernel enters at `_start` with a0 = domain id, a1/a2 = argument block, a3 = control
// block, sp = a 16-byte aligned stack top; `call` leaves a0..a3 for `start`. Clearing `fp` (s0)
// and `ra` ends frame-pointer backtraces here. Nothing is zeroed: `.bss` is mapped zero-filled
// by the kernel. `start` never returns; `unimp` traps if it somehow did.
global_asm!(
    ".pushsection .text._start, \"ax\", @progbits",
    ".globl _start",
    ".type _start, @function",
    "_start:",
    "    li fp, 0",
    "    li ra, 0",
    "    call {start}",
    "    unimp",
    ".size _start, . - _start",
    ".popsection",
    start = sym crate::entry::start,
);

/// The callee-saved registers of a thread that is not running.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Context {
    /// `ra`, `sp`, `s0..s11`, then `fs0..fs11` (as bits).
    words: [u64; 26],
}

impl Context {
    /// No registers saved yet.
    pub(crate) const ZERO: Context = Context { words: [0; 26] };

    /// A context that starts `entry(a0 = arg)` on the stack whose top is `stack_top`.
    pub(crate) fn new(entry: extern "C" fn(usize) -> !, arg: usize, stack_top: usize) -> Self {
        let mut words = [0u64; 26];
        words[0] = __tessera_thread_start as *const () as u64;
        words[1] = (stack_top & !15) as u64;
        words[3] = entry as *const () as u64; // s1: the function
        words[4] = arg as u64; // s2: its argument
        Context { words }
    }
}

global_asm!(
    r#"
    .option push
    .option arch, +d
    .pushsection .text.__tessera_switch, "ax", @progbits
    .globl __tessera_switch
__tessera_switch:
    sd ra, 0(a0)
    sd sp, 8(a0)
    sd s0, 16(a0)
    sd s1, 24(a0)
    sd s2, 32(a0)
    sd s3, 40(a0)
    sd s4, 48(a0)
    sd s5, 56(a0)
    sd s6, 64(a0)
    sd s7, 72(a0)
    sd s8, 80(a0)
    sd s9, 88(a0)
    sd s10, 96(a0)
    sd s11, 104(a0)
    fsd fs0, 112(a0)
    fsd fs1, 120(a0)
    fsd fs2, 128(a0)
    fsd fs3, 136(a0)
    fsd fs4, 144(a0)
    fsd fs5, 152(a0)
    fsd fs6, 160(a0)
    fsd fs7, 168(a0)
    fsd fs8, 176(a0)
    fsd fs9, 184(a0)
    fsd fs10, 192(a0)
    fsd fs11, 200(a0)
    ld ra, 0(a1)
    ld sp, 8(a1)
    ld s0, 16(a1)
    ld s1, 24(a1)
    ld s2, 32(a1)
    ld s3, 40(a1)
    ld s4, 48(a1)
    ld s5, 56(a1)
    ld s6, 64(a1)
    ld s7, 72(a1)
    ld s8, 80(a1)
    ld s9, 88(a1)
    ld s10, 96(a1)
    ld s11, 104(a1)
    fld fs0, 112(a1)
    fld fs1, 120(a1)
    fld fs2, 128(a1)
    fld fs3, 136(a1)
    fld fs4, 144(a1)
    fld fs5, 152(a1)
    fld fs6, 160(a1)
    fld fs7, 168(a1)
    fld fs8, 176(a1)
    fld fs9, 184(a1)
    fld fs10, 192(a1)
    fld fs11, 200(a1)
    ret

    .globl __tessera_thread_start
__tessera_thread_start:
    mv a0, s2
    li fp, 0
    li ra, 0
    jr s1

    .globl __tessera_continue_on
__tessera_continue_on:
    mv sp, a0
    li fp, 0
    li ra, 0
    jr a1
    .popsection

    .pushsection .text.__tessera_activation, "ax", @progbits
    .globl __tessera_activation
__tessera_activation:
    li fp, 0
    li ra, 0
    call {handler}
    unimp
    .popsection
    .option pop
    "#,
    handler = sym crate::activation::activated,
);

unsafe extern "C" {
    fn __tessera_continue_on(stack: usize, f: extern "C" fn(usize) -> !) -> !;
    fn __tessera_switch(save: *mut Context, load: *const Context);
    fn __tessera_thread_start();
    fn __tessera_activation();
}

/// The activation handler's entry point (for `activation_set`): the kernel enters it with
/// `a0` = the reason bits, `a1` = the control block, `sp` = the handler's stack top.
pub(crate) fn activation_entry() -> usize {
    __tessera_activation as *const () as usize
}

/// Saves the running thread's registers in `save` and continues the thread saved in `load`.
///
/// # Safety
/// `load` must hold a context saved by `switch` or made by [`Context::new`] whose stack is
/// still mapped and not in use by another running thread; `save` must stay valid until that
/// thread is switched back to.
pub(crate) unsafe fn switch(save: *mut Context, load: *const Context) {
    // SAFETY: the caller's contract; the assembly saves exactly the callee-saved registers and
    // returns into the loaded context.
    unsafe { __tessera_switch(save, load) }
}

/// Leaves the current stack for good: continues in `f(stack)` with the stack pointer at
/// `stack` (16-byte aligned; `f` receives it as its argument).
///
/// # Safety
/// The memory below `stack` must be a mapped, writable stack that nothing else uses, and
/// nothing may refer to the current stack's frames afterwards (it is abandoned).
pub(crate) unsafe fn continue_on(stack: usize, f: extern "C" fn(usize) -> !) -> ! {
    // SAFETY: the caller's contract; the assembly sets `sp` and jumps, clearing the frame
    // pointer and return address so that backtraces end there.
    unsafe { __tessera_continue_on(stack, f) }
}
