//! x86_64 (`x86_64-unknown-none`: System V ABI, no red zone, no SSE in compiled code): the
//! `syscall` instruction, the time-stamp counter, the program entry, and saving and loading
//! the callee-saved registers of user-level threads.
//!
//! System calls: the number in `rax`, the arguments in `rdi`, `rsi`, `rdx`, `r10`, `r8`, `r9`;
//! the kernel returns the status in `rax` and the value in `rdx`, the instruction itself
//! overwrites `rcx` and `r11` (the return address and the flags), and every other register is
//! preserved. The entry and the activation handler receive their arguments in `rdi`, `rsi`,
//! `rdx`, `rcx` (`abi::ENTRY_ARGUMENTS`).
//!
//! A thread switch happens inside a function call (`switch`), so only what the calling
//! convention says a callee preserves needs saving: `rsp`, `rbx`, `rbp`, `r12..r15` and where
//! to continue. The ABI has no callee-saved vector registers. It makes the control bits of
//! `mxcsr` and the x87 control word callee-saved too; nothing in a domain changes them (the
//! target compiles floating point to integer code), so the switch leaves them alone and never
//! touches the vector unit: a domain whose code does not use it never makes the kernel load
//! its vector registers.
//!
//! No red zone: the target does not let code keep data below `rsp` (and xtask builds the apps
//! with `-C no-redzone=yes` as well), so the runtime may write an upcall record below an
//! interrupted thread's stack pointer (`paging`), as the kernel may below the stack it enters
//! the handler on.

use core::arch::{asm, global_asm};

use abi::Call;

/// Makes system call `number` with `args` in `rdi`, `rsi`, `rdx`, `r10`, `r8`, `r9`; returns
/// `(rax, rdx)`: the status and the value.
///
/// # Safety
/// As for [`crate::syscall::raw`]: the call must not unmap or remove access to memory that
/// Rust code still references.
#[inline(always)]
pub(crate) unsafe fn syscall(number: usize, args: [usize; 6]) -> (usize, usize) {
    let status: usize;
    let value: usize;
    // SAFETY: `syscall` enters the kernel, which reads `rax` and the six argument registers,
    // may read (never write) caller memory named by the arguments, writes only `rax` and
    // `rdx`, and leaves the stack alone (`nostack`; it runs on its own stack); the instruction
    // overwrites `rcx` and `r11`, declared clobbered. The memory effects of the particular
    // call are the caller's obligation (this function's contract).
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") number => status,
            in("rdi") args[0],
            in("rsi") args[1],
            inlateout("rdx") args[2] => value,
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
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
    // continues there, every register loaded from it; it returns to this code only with an
    // error status in `rax`, `rdx` written and `rcx`, `r11` overwritten by the instruction.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") Call::Resume as usize => status,
            in("rdi") ctx as usize,
            lateout("rdx") _,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    status
}

/// The time-stamp counter (`rdtsc`): ticks since the machine started, at `Dcb::timebase_hz`.
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: `rdtsc` reads the time-stamp counter, which the kernel lets user mode read
    // (`CR4.TSD` clear); it writes only `edx:eax` and touches no memory.
    unsafe {
        asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags))
    };
    (u64::from(hi) << 32) | u64::from(lo)
}

// The kernel enters at `_start` with rdi = domain id, rsi/rdx = argument block, rcx = control
// block, rsp = a stack top as after a call (8 below a multiple of 16); they are already where
// `start` takes its arguments. Clearing `rbp` ends frame-pointer backtraces here; `rsp` is
// aligned down to 16 whatever the kernel passed, so that `call` gives `start` the alignment
// the ABI promises, and the direction flag is cleared as the ABI requires. Nothing is zeroed: `.bss` is mapped zero-filled by the kernel. `start`
// never returns; `ud2` traps if it somehow did.
#[cfg(target_os = "none")]
global_asm!(
    ".pushsection .text._start, \"ax\", @progbits",
    ".globl _start",
    ".type _start, @function",
    "_start:",
    "    xor ebp, ebp",
    "    and rsp, -16",
    "    cld",
    "    call {start}",
    "    ud2",
    ".size _start, . - _start",
    ".popsection",
    start = sym crate::entry::start,
);

/// The callee-saved registers of a thread that is not running.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Context {
    /// Where to continue (the return address of `switch`), `rsp` after that return, then
    /// `rbx`, `rbp`, `r12`, `r13`, `r14`, `r15`.
    words: [u64; 8],
}

impl Context {
    /// No registers saved yet.
    pub(crate) const ZERO: Context = Context { words: [0; 8] };

    /// A context that starts `entry(rdi = arg)` on the stack whose top is `stack_top`.
    pub(crate) fn new(entry: extern "C" fn(usize) -> !, arg: usize, stack_top: usize) -> Self {
        let mut words = [0u64; 8];
        words[0] = __tessera_thread_start as *const () as u64;
        words[1] = (stack_top & !15) as u64;
        words[4] = entry as *const () as u64; // r12: the function
        words[5] = arg as u64; // r13: its argument
        Context { words }
    }
}

// `__tessera_switch(save = rdi, load = rsi)`: pops its return address, saves it, `rsp` and the
// callee-saved registers in `save`, loads those of `load` and jumps to its saved address, as
// the `ret` of the `switch` that saved it would have.
//
// `__tessera_thread_start` (a new thread's first address) and `__tessera_continue_on(stack =
// rdi, f = rsi)` enter a function as a `call` would (`rsp` 8 below a multiple of 16), with a
// zero return address and `rbp` so that backtraces end there.
global_asm!(
    r#"
    .pushsection .text.__tessera_switch, "ax", @progbits
    .p2align 4
    .globl __tessera_switch
__tessera_switch:
    pop rax
    mov [rdi], rax
    mov [rdi + 8], rsp
    mov [rdi + 16], rbx
    mov [rdi + 24], rbp
    mov [rdi + 32], r12
    mov [rdi + 40], r13
    mov [rdi + 48], r14
    mov [rdi + 56], r15
    mov rsp, [rsi + 8]
    mov rbx, [rsi + 16]
    mov rbp, [rsi + 24]
    mov r12, [rsi + 32]
    mov r13, [rsi + 40]
    mov r14, [rsi + 48]
    mov r15, [rsi + 56]
    jmp [rsi]

    .globl __tessera_thread_start
__tessera_thread_start:
    mov rdi, r13
    xor ebp, ebp
    push 0
    jmp r12

    .globl __tessera_continue_on
__tessera_continue_on:
    mov rsp, rdi
    xor ebp, ebp
    push 0
    jmp rsi
    .popsection
    "#
);

// `__tessera_activation`: the kernel enters it with rdi = reason bits, rsi = control block, rsp
// = the handler's stack top; like `_start` it clears `rbp`, aligns `rsp` and clears the
// direction flag, and calls `activation::activated`, which never returns.
//
// Its section is 16-byte aligned, like the compiler's functions: without the `.p2align` it
// would be byte-aligned and follow whatever code the linker put before it, so the entry could
// be odd, which `activation_set` refuses (`docs/syscalls.md`), leaving the domain without a
// handler. `cargo xtask` checks every app's entry (`tools/image/src/apps.rs`, `check_app`).
#[cfg(target_os = "none")]
global_asm!(
    r#"
    .pushsection .text.__tessera_activation, "ax", @progbits
    .p2align 4
    .globl __tessera_activation
__tessera_activation:
    xor ebp, ebp
    and rsp, -16
    cld
    call {handler}
    ud2
    .popsection
    "#,
    handler = sym crate::activation::activated,
);

unsafe extern "C" {
    fn __tessera_continue_on(stack: usize, f: extern "C" fn(usize) -> !) -> !;
    fn __tessera_switch(save: *mut Context, load: *const Context);
    fn __tessera_thread_start();
    #[cfg(target_os = "none")]
    fn __tessera_activation();
}

/// The activation handler's entry point (for `activation_set`): the kernel enters it with
/// `rdi` = the reason bits, `rsi` = the control block, `rsp` = the handler's stack top.
#[cfg(target_os = "none")]
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
    // continues at the loaded context's address, as a return from its own `switch`.
    unsafe { __tessera_switch(save, load) }
}

/// Leaves the current stack for good: continues in `f(stack)` with the stack pointer at
/// `stack` (16-byte aligned; `f` receives it as its argument).
///
/// # Safety
/// The memory below `stack` must be a mapped, writable stack that nothing else uses, and
/// nothing may refer to the current stack's frames afterwards (it is abandoned).
pub(crate) unsafe fn continue_on(stack: usize, f: extern "C" fn(usize) -> !) -> ! {
    // SAFETY: the caller's contract; the assembly sets `rsp`, pushes a zero return address
    // (the 8 bytes below `stack`, part of the stack the contract hands over) and jumps,
    // clearing the frame pointer so that backtraces end there.
    unsafe { __tessera_continue_on(stack, f) }
}

/// The parts that run on an x86_64 host: Linux's system calls take the same registers as
/// Tessera's (number in `rax`, arguments in `rdi`, `rsi`, `rdx`, `r10`, `r8`, `r9`, the result
/// in `rax`), the time-stamp counter is readable, and threads switch as in a domain.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use core::cell::UnsafeCell;
    use std::vec;
    use std::vec::Vec;

    use super::*;

    #[test]
    fn a_six_argument_call_passes_every_register() {
        // mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0): the
        // flags travel in r10, the descriptor in r8 and the offset in r9; a wrong register
        // makes Linux refuse the call.
        const MMAP: usize = 9;
        const MUNMAP: usize = 11;
        let args = [0, 4096, 0x3, 0x22, usize::MAX, 0];
        // SAFETY: maps a fresh anonymous page, touching no memory of this program.
        let (addr, _) = unsafe { syscall(MMAP, args) };
        assert!(addr != 0 && addr.is_multiple_of(4096) && addr < usize::MAX - 4095, "{addr:#x}");
        // SAFETY: the page was just mapped read-write for this test alone.
        unsafe {
            (addr as *mut u64).write(0x7e55e7a);
            assert_eq!((addr as *const u64).read(), 0x7e55e7a);
        }
        // SAFETY: unmaps the page, which nothing refers to any more.
        let (status, _) = unsafe { syscall(MUNMAP, [addr, 4096, 0, 0, 0, 0]) };
        assert_eq!(status, 0);
        // getpid: no arguments, the number in and the result out of rax.
        // SAFETY: getpid changes nothing.
        let (pid, _) = unsafe { syscall(39, [0; 6]) };
        assert_eq!(pid, std::process::id() as usize);
    }

    #[test]
    fn the_clock_moves_forward() {
        let a = ticks();
        assert!((0..1_000_000).any(|_| ticks() > a), "the counter stays at {a}");
    }

    /// What the test threads share with the test.
    struct Shared {
        main: Context,
        thread: Context,
        /// The argument each thread entry received, then its steps and results.
        seen: Vec<usize>,
        /// The stacks the threads run on.
        stacks: Vec<Vec<u128>>,
    }

    struct Cell(UnsafeCell<Shared>);
    // SAFETY: only one test uses it, and its threads run one at a time on its OS thread.
    unsafe impl Sync for Cell {}
    static SHARED: Cell = Cell(UnsafeCell::new(Shared {
        main: Context::ZERO,
        thread: Context::ZERO,
        seen: Vec::new(),
        stacks: Vec::new(),
    }));

    /// Runs `f` on the shared state; no reference to it outlives `f`, and `f` never switches.
    fn with<R>(f: impl FnOnce(&mut Shared) -> R) -> R {
        // SAFETY: the test and its thread never run at once, and no other reference to the
        // state exists while `f` runs (nothing holds one across a switch).
        f(unsafe { &mut *SHARED.0.get() })
    }

    /// Saves the running side in `from` (the test's or the thread's slot) and continues the
    /// other.
    fn switch_to_other(from_main: bool) {
        let s = SHARED.0.get();
        // SAFETY: both contexts live in a static, reached without making references; the one
        // loaded was saved by `switch` or made by `Context::new` on a stack the test keeps
        // alive, and nothing else runs on it.
        unsafe {
            let (main, thread) = (&raw mut (*s).main, &raw mut (*s).thread);
            let (save, load) = if from_main { (main, thread) } else { (thread, main) };
            switch(save, load)
        }
    }

    /// A local the ABI aligns to 16: its address shows whether the stack was aligned at entry.
    #[repr(align(16))]
    struct Aligned([u8; 16]);

    fn aligned_here() -> bool {
        let a = core::hint::black_box(Aligned([1; 16]));
        (&a as *const Aligned as usize).is_multiple_of(16) && a.0[15] == 1
    }

    /// Runs as a thread: records its argument, then counts three steps, switching back to the
    /// test after each, and then continues on the second stack in `on_second_stack`.
    extern "C" fn thread_entry(arg: usize) -> ! {
        with(|s| s.seen.push(arg));
        assert!(aligned_here(), "a new thread starts with the stack aligned as after a call");
        // Values live across the switches, in callee-saved registers or on this stack.
        let (mut x, mut y) = (arg.wrapping_mul(3), arg ^ 0x55);
        for step in 1..=3usize {
            with(|s| s.seen.push(step));
            x = x.wrapping_add(step);
            y = y.rotate_left(3);
            switch_to_other(false);
        }
        with(|s| s.seen.push(x ^ y));
        let second = with(|s| s.stacks[1].as_mut_ptr_range().end as usize);
        // SAFETY: the second stack is the test's, unused by anything else, and this thread's
        // frames are not referred to again.
        unsafe { continue_on(second, on_second_stack) }
    }

    /// Continues a thread on another stack: checks where it runs, records the stack it was
    /// given, and switches back to the test for good.
    extern "C" fn on_second_stack(stack: usize) -> ! {
        let here = core::hint::black_box(&stack) as *const usize as usize;
        assert!(here < stack && here > stack - 4096, "runs on the stack it was given");
        assert!(aligned_here(), "continue_on enters with the stack aligned as after a call");
        with(|s| s.seen.push(stack));
        switch_to_other(false);
        unreachable!("the test does not switch back");
    }

    #[test]
    fn threads_switch_and_keep_their_registers() {
        let second = with(|s| {
            s.stacks = vec![vec![0u128; 1024]; 2];
            // A top 8 bytes short of a multiple of 16 is rounded down.
            let top = s.stacks[0].as_mut_ptr_range().end as usize - 8;
            s.thread = Context::new(thread_entry, 0x1234, top);
            s.stacks[1].as_mut_ptr_range().end as usize
        });
        let (mut a, mut b) = (7u64, 11u64);
        for round in 0..3 {
            switch_to_other(true);
            a = a.wrapping_mul(31).wrapping_add(round);
            b = b.rotate_left(5) ^ a;
        }
        switch_to_other(true);
        let (x, y) = (0x1234usize.wrapping_mul(3) + 6, (0x1234usize ^ 0x55).rotate_left(9));
        assert_eq!(with(|s| s.seen.clone()), [0x1234, 1, 2, 3, x ^ y, second]);
        // The test's own values survived four switches away and back.
        let (mut ea, mut eb) = (7u64, 11u64);
        for round in 0..3 {
            ea = ea.wrapping_mul(31).wrapping_add(round);
            eb = eb.rotate_left(5) ^ ea;
        }
        assert_eq!((a, b), (ea, eb));
    }
}
