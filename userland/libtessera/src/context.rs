//! Saving and loading the callee-saved registers of a user-level thread (the only `unsafe` of
//! the thread package, with the activation handler's entry).
//!
//! A thread switch happens inside a function call (`switch`), so only what the calling
//! convention says a callee preserves needs saving: `ra`, `sp`, `s0..s11`, `fs0..fs11`.

use core::arch::global_asm;

/// The callee-saved registers of a thread that is not running.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Context {
    /// `ra`, `sp`, `s0..s11`, then `fs0..fs11` (as bits).
    words: [u64; 26],
}

impl Context {
    /// No registers saved yet.
    pub const ZERO: Context = Context { words: [0; 26] };

    /// A context that starts `entry(a0 = arg)` on the stack whose top is `stack_top`.
    pub fn new(entry: extern "C" fn(usize) -> !, arg: usize, stack_top: usize) -> Self {
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
    handler = sym crate::thread::activated,
);

unsafe extern "C" {
    fn __tessera_continue_on(stack: usize, f: extern "C" fn(usize) -> !) -> !;
    fn __tessera_switch(save: *mut Context, load: *const Context);
    fn __tessera_thread_start();
    fn __tessera_activation();
}

/// The activation handler's entry point (for `activation_set`).
pub fn activation_entry() -> usize {
    __tessera_activation as *const () as usize
}

/// Saves the running thread's registers in `save` and continues the thread saved in `load`.
///
/// # Safety
/// `load` must hold a context saved by `switch` or made by [`Context::new`] whose stack is
/// still mapped and not in use by another running thread; `save` must stay valid until that
/// thread is switched back to.
pub unsafe fn switch(save: *mut Context, load: *const Context) {
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
pub unsafe fn continue_on(stack: usize, f: extern "C" fn(usize) -> !) -> ! {
    // SAFETY: the caller's contract; the assembly sets `sp` and jumps, clearing the frame
    // pointer and return address so that backtraces end there.
    unsafe { __tessera_continue_on(stack, f) }
}
