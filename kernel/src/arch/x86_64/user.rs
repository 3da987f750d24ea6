//! User mode: domains' saved contexts, their entries into the kernel (`syscall`, interrupts and
//! exceptions from ring 3), resuming them (`sysretq` or `iretq`), and reaching their memory.
//!
//! While a domain runs, a static pointer ([`current`]) names its [`UserContext`] (boxed by the
//! portable kernel, so it stays put): this single CPU's way of finding it, the role `sscratch`
//! plays on RISC-V. No `swapgs` is needed: the entry code reaches that pointer and a scratch
//! word RIP-relative, and the kernel uses neither FS nor GS.
//!
//! - **`syscall`** (EFER.SCE, STAR, LSTAR, SFMASK set by [`init`]; SFMASK clears IF, DF, TF,
//!   AC and NT, so the kernel runs with interrupts off and a sane flags register): the entry
//!   saves every user register straight into the current context (`rip` from `rcx`, `rflags`
//!   from `r11`), moves to the entry stack (TSS.RSP0) and calls the trap handler.
//! - **Interrupts and exceptions from ring 3** land on the entry stack through the IDT stubs
//!   of [`super::trap`], which hands them here ([`on_trap`]); RFLAGS.AC is cleared (a domain
//!   may set it, which would open SMAP) and the registers are copied from the trap frame into
//!   the current context. The timer (when its deadline has come) becomes
//!   [`UserTrap::Timer`]; #NM loads the domain's FP state ([`super::fp`]) and retries; #PF
//!   becomes [`UserFault::Page`] (CR2, the access from the error code), #UD
//!   `IllegalInstruction`, #BP `Breakpoint`, #GP `Refused`, every other exception `Other`;
//!   other interrupts are counted and silenced and the domain resumes. A software interrupt
//!   due by `softint=` is raised on the timer's way back to ring 3 (see [`interrupts`]).
//!
//! Each trap goes to the handler installed with [`set_handler`] (by default the portable
//! kernel's `domain::on_user_trap`; kernel tests install their own), which
//! returns the [`Resume`] to continue with, or `None` to end a kernel test's [`run`].
//! Resuming a context uses `sysretq` when its `rcx` and `r11` already hold its `rip` and
//! `rflags` (a system call returning to the instruction after it, results set) and `iretq`
//! otherwise, so `rcx` and `r11` always come back as saved. Either way the `rip` is below
//! `abi::USER_END` (the resume path puts it there otherwise): returning cannot fault in ring 0
//! on a non-canonical address.
//!
//! Copies from and to user memory ([`copy_from_user`], [`copy_words_from_user`],
//! [`copy_to_user`]) open SMAP (`stac`, with interrupts off) around probed loads and stores
//! ([`super::probe`]): a fault yields `Err`.
//!
//! Not implemented here: more than one CPU (then the current-context pointer and the scratch
//! word become per-CPU data reached through `swapgs`); the AVX state (see [`super::fp`]); NMIs (they
//! would need their own IST stack: the entry and exit paths briefly run in ring 0 on the
//! domain's context or stack with interrupts off).

use core::arch::global_asm;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use ::x86_64::registers::control::{Cr2, Cr4, Cr4Flags};
use ::x86_64::registers::model_specific::{Efer, EferFlags, Msr};

use super::frame::{PF_INSTRUCTION, PF_WRITE, TrapFrame, exception_name};
use super::vectors::TIMER_VECTOR;
use super::{apic, fp, gdt, interrupts, probe, timer};
use crate::arch::contract::{UserContextOps, UserFault, UserTrap};

/// Index of each register in [`UserContext::regs`] (the encoding order, as in
/// `abi::arch::x86_64::SavedContext`).
pub mod reg {
    /// rax.
    pub const RAX: usize = 0;
    /// rcx.
    pub const RCX: usize = 1;
    /// rdx.
    pub const RDX: usize = 2;
    /// rbx.
    pub const RBX: usize = 3;
    /// rsp.
    pub const RSP: usize = 4;
    /// rbp.
    pub const RBP: usize = 5;
    /// rsi.
    pub const RSI: usize = 6;
    /// rdi.
    pub const RDI: usize = 7;
    /// r8.
    pub const R8: usize = 8;
    /// r9.
    pub const R9: usize = 9;
    /// r10.
    pub const R10: usize = 10;
    /// r11.
    pub const R11: usize = 11;
    /// r12.
    pub const R12: usize = 12;
    /// r13.
    pub const R13: usize = 13;
    /// r14.
    pub const R14: usize = 14;
    /// r15.
    pub const R15: usize = 15;
}
use reg::*;

/// A domain's saved ring-3 registers: the sixteen general registers in their encoding order,
/// then `rip` and `rflags` (the layout of `abi::arch::x86_64::SavedContext`, which the
/// entry and exit code below rely on). The segments are not saved: a domain always runs with
/// the user code and data segments of [`gdt`].
#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserContext {
    /// The general registers, indexed by [`reg`].
    pub regs: [u64; 16],
    /// The instruction pointer.
    pub rip: u64,
    /// The flags.
    pub rflags: u64,
}

const RIP_OFFSET: usize = 16 * 8;
const RFLAGS_OFFSET: usize = 17 * 8;
const _: () = assert!(core::mem::size_of::<UserContext>() == abi::SavedContext::WORDS * 8);
const _: () = assert!(core::mem::offset_of!(UserContext, rip) == RIP_OFFSET);
const _: () = assert!(core::mem::offset_of!(UserContext, rflags) == RFLAGS_OFFSET);

/// RFLAGS.IF.
const RFLAGS_IF: u64 = 1 << 9;
/// RFLAGS bit 1, which always reads as 1.
const RFLAGS_FIXED: u64 = 1 << 1;
/// The flags a domain's saved context may set: CF, PF, AF, ZF, SF, DF and OF (not TF, IOPL,
/// NT, RF, AC or the rest).
const RFLAGS_USER: u64 = 0x1 | 0x4 | 0x10 | 0x40 | 0x80 | 0x400 | 0x800;
/// What SFMASK clears on `syscall`: TF, IF, DF, NT and AC.
const SFMASK: u64 = (1 << 8) | RFLAGS_IF | (1 << 10) | (1 << 14) | (1 << 18);

const MSR_STAR: u32 = 0xc000_0081;
const MSR_LSTAR: u32 = 0xc000_0082;
const MSR_SFMASK: u32 = 0xc000_0084;

/// The first address above the user half as a 64-bit value.
const USER_END: u64 = abi::USER_END as u64;

/// `addr` if it lies below `abi::USER_END`, else `abi::USER_END` itself: a canonical address
/// no domain maps, so that a domain given an address outside the user half faults there in
/// ring 3 (and the fault names `USER_END`) instead of the kernel faulting on its way out.
fn user_half(addr: u64) -> u64 {
    addr.min(USER_END)
}

impl UserContextOps for UserContext {
    /// A context that starts at `entry` with arguments in `rdi`, `rsi`, `rdx`, `rcx` and `rsp`
    /// 8 below `sp` rounded down to 16 (as after a `call`; the return-address slot is not
    /// written), in ring 3 with interrupts enabled and every other register zero.
    fn new_user(entry: usize, sp: usize, args: [usize; 4]) -> Self {
        let mut regs = [0u64; 16];
        regs[RSP] = ((sp & !15) as u64).wrapping_sub(8);
        regs[RDI] = args[0] as u64;
        regs[RSI] = args[1] as u64;
        regs[RDX] = args[2] as u64;
        regs[RCX] = args[3] as u64;
        UserContext { regs, rip: entry as u64, rflags: RFLAGS_IF | RFLAGS_FIXED }
    }

    /// The system call made at a trap: its number (`rax`) and six arguments (`rdi`, `rsi`,
    /// `rdx`, `r10`, `r8`, `r9`).
    #[inline(always)]
    fn call(&self) -> (usize, [usize; 6]) {
        let r = &self.regs;
        let a = |i: usize| r[i] as usize;
        (a(RAX), [a(RDI), a(RSI), a(RDX), a(R10), a(R8), a(R9)])
    }

    /// Sets a system call's results: `rax` = status (0 or an error code), `rdx` = value.
    fn set_result(&mut self, status: usize, value: usize) {
        self.regs[RAX] = status as u64;
        self.regs[RDX] = value as u64;
    }

    /// What a system call returns, as set by [`UserContext::set_result`]: status, value.
    fn results(&self) -> (usize, usize) {
        (self.regs[RAX] as usize, self.regs[RDX] as usize)
    }

    /// Makes the system call that trapped here run again when the context resumes: `rip` goes
    /// back over the two bytes of `syscall` (the context then resumes with `iretq`, its `rcx`
    /// and `r11` as the instruction left them).
    fn restart_call(&mut self) {
        self.rip = self.rip.wrapping_sub(2);
    }

    /// The interrupted instruction pointer.
    fn pc(&self) -> usize {
        self.rip as usize
    }

    /// The registers, `rip` and `rflags`, as an activation handler sees them.
    fn saved(&self) -> abi::SavedContext {
        let mut w = [0u64; abi::SavedContext::WORDS];
        w[..16].copy_from_slice(&self.regs);
        w[16] = self.rip;
        w[17] = self.rflags;
        abi::SavedContext::from_words(&w)
    }

    /// Loads the registers, `rip` and `rflags` from the words of an `abi::SavedContext`,
    /// sanitized: of the flags only CF, PF, AF, ZF, SF, DF and OF are taken (IF is set, IOPL
    /// is 0, TF, NT, AC and the rest are clear), and a `rip` or `rsp` not below
    /// `abi::USER_END` is replaced by `abi::USER_END` (canonical, mapped by no domain: the
    /// domain faults there in ring 3).
    fn load_words(&mut self, words: &[u64; abi::SavedContext::WORDS]) {
        self.regs.copy_from_slice(&words[..16]);
        self.regs[RSP] = user_half(self.regs[RSP]);
        self.rip = user_half(words[16]);
        self.rflags = (words[17] & RFLAGS_USER) | RFLAGS_IF | RFLAGS_FIXED;
    }

    /// Enters an activation handler at `entry` with `rdi`, `rsi` = `args` and `rsp` 8 below
    /// `stack` (as after a `call`; the slot is not written); every other register is cleared
    /// and the flags hold only IF.
    fn enter_handler(&mut self, entry: usize, stack: usize, args: [usize; 2]) {
        self.regs = [0; 16];
        self.regs[RSP] = (stack as u64).wrapping_sub(8);
        self.regs[RDI] = args[0] as u64;
        self.regs[RSI] = args[1] as u64;
        self.rip = entry as u64;
        self.rflags = RFLAGS_IF | RFLAGS_FIXED;
    }
}

/// What the trap path resumes after the handler dealt with a trap from ring 3.
pub type Resume = crate::arch::contract::Resume<UserContext>;

/// Handles a trap from ring 3 (the registers are in [`current`]'s context): returns what to
/// resume, or `None` to return from the kernel test's [`run`] in progress.
pub type Handler = fn(UserTrap) -> Option<Resume>;

/// The handler a kernel test's [`run`] installs for its length, as a function pointer's
/// address; 0 (always, outside kernel tests) hands traps from ring 3 straight to the portable
/// kernel's domains ([`crate::domain::on_user_trap`]), as on RISC-V: the system-call path reads
/// one word and takes no lock.
static RUN_HANDLER: AtomicUsize = AtomicUsize::new(0);

/// The context of the domain that runs or trapped (null while none does). The entry code
/// reads it by name.
#[unsafe(no_mangle)]
static __user_current: AtomicPtr<UserContext> = AtomicPtr::new(core::ptr::null_mut());

/// Where `syscall`'s entry keeps the user `rsp` until it has found the context.
#[unsafe(no_mangle)]
static __user_scratch: AtomicU64 = AtomicU64::new(0);

/// The context of the domain that runs or last trapped, if any.
pub fn current() -> Option<NonNull<UserContext>> {
    NonNull::new(__user_current.load(Ordering::Relaxed))
}

/// Runs `f` on the current context: for trap handlers, while the domain it belongs to is
/// stopped in the kernel (nothing else refers to it then). `None` if no context is current.
pub fn with_current<R>(f: impl FnOnce(&mut UserContext) -> R) -> Option<R> {
    let ctx = __user_current.load(Ordering::Relaxed);
    // SAFETY: a current context is alive (its owner keeps it while it may run or trap), and
    // while a trap handler runs the domain is stopped and its context borrowed nowhere else;
    // the borrow ends with `f`.
    (!ctx.is_null()).then(|| f(unsafe { &mut *ctx }))
}

/// Whether a trap from ring 3 belongs to a domain (a context is current), rather than to
/// [`super::trap::run_user`]'s excursions.
pub(super) fn owns_user_traps() -> bool {
    !__user_current.load(Ordering::Relaxed).is_null()
}

/// Resumes by `sysretq` and by `iretq`, counted by the resume path (one CPU, interrupts off:
/// a plain `incq`, no locked bus cycle on the system call's way back).
static SYSRETS: AtomicU64 = AtomicU64::new(0);
static IRETS: AtomicU64 = AtomicU64::new(0);

/// How many times a context was resumed with `sysretq` and with `iretq` since boot.
pub fn exits() -> (u64, u64) {
    (SYSRETS.load(Ordering::Relaxed), IRETS.load(Ordering::Relaxed))
}

/// Turns on `syscall`: EFER.SCE; STAR with the kernel's segments for `syscall` and the user
/// segments for `sysretq` (user data at STAR[63:48] + 8, user code at + 16, as [`gdt`] orders
/// them); LSTAR, the entry; SFMASK. Also sets up the FP unit ([`fp::init`]).
pub fn init() {
    let star = ((u64::from(gdt::USER_DATA & !3) - 8) << 48) | (u64::from(gdt::KERNEL_CODE) << 32);
    // SAFETY: the MSRs exist on every x86_64 CPU. STAR names the GDT's kernel code and data
    // segments (KERNEL_CODE, KERNEL_CODE + 8) for `syscall` and its user data and 64-bit code
    // segments for `sysretq`; LSTAR is the entry below, which saves the user's registers
    // before touching any, and runs on the entry stack; SFMASK makes it run with interrupts
    // off and the direction flag clear. Turning SCE on only makes `syscall` usable.
    unsafe {
        Msr::new(MSR_STAR).write(star);
        Msr::new(MSR_LSTAR).write(__syscall_entry as *const () as u64);
        Msr::new(MSR_SFMASK).write(SFMASK);
        Efer::update(|e| *e |= EferFlags::SYSTEM_CALL_EXTENSIONS);
    }
    fp::init();
}

const _: () = assert!(gdt::KERNEL_DATA == gdt::KERNEL_CODE + 8);
const _: () = assert!(gdt::USER_CODE == gdt::USER_DATA + 8);

global_asm!(
    r#"
    .pushsection .text.user_entry, "ax"
    .balign 16
    .globl __syscall_entry
__syscall_entry:
    movq    %rsp, {scratch}(%rip)
    movq    {current}(%rip), %rsp
    testq   %rsp, %rsp
    jz      1f
    movq    %rax, 0*8(%rsp)
    movq    %rcx, 1*8(%rsp)
    movq    %rdx, 2*8(%rsp)
    movq    %rbx, 3*8(%rsp)
    movq    %rbp, 5*8(%rsp)
    movq    %rsi, 6*8(%rsp)
    movq    %rdi, 7*8(%rsp)
    movq    %r8, 8*8(%rsp)
    movq    %r9, 9*8(%rsp)
    movq    %r10, 10*8(%rsp)
    movq    %r11, 11*8(%rsp)
    movq    %r12, 12*8(%rsp)
    movq    %r13, 13*8(%rsp)
    movq    %r14, 14*8(%rsp)
    movq    %r15, 15*8(%rsp)
    movq    %rcx, {rip}(%rsp)
    movq    %r11, {rflags}(%rsp)
    movq    {scratch}(%rip), %rax
    movq    %rax, 4*8(%rsp)
    movq    %rsp, %rdi
    leaq    __entry_stack_top(%rip), %rsp
    xorl    %ebp, %ebp
    call    {on_syscall}
    movq    %rax, %rdi
    jmp     __user_resume
1:
    /* No context is current: report it from the entry stack. */
    leaq    __entry_stack_top(%rip), %rsp
    xorl    %ebp, %ebp
    call    {orphan}
    ud2

    /* Loads every register of the context at rdi but rsp and rdi itself. */
    .macro load_user_registers
    movq    0*8(%rdi), %rax
    movq    1*8(%rdi), %rcx
    movq    2*8(%rdi), %rdx
    movq    3*8(%rdi), %rbx
    movq    5*8(%rdi), %rbp
    movq    6*8(%rdi), %rsi
    movq    8*8(%rdi), %r8
    movq    9*8(%rdi), %r9
    movq    10*8(%rdi), %r10
    movq    11*8(%rdi), %r11
    movq    12*8(%rdi), %r12
    movq    13*8(%rdi), %r13
    movq    14*8(%rdi), %r14
    movq    15*8(%rdi), %r15
    .endm

    /* Resumes the context at rdi in ring 3 (interrupts off until then). */
    .globl __user_resume
__user_resume:
    movq    %rdi, {current}(%rip)
    movq    {rip}(%rdi), %rax
    cmpq    %rax, 1*8(%rdi)
    jne     2f
    movq    {rflags}(%rdi), %rax
    cmpq    %rax, 11*8(%rdi)
    jne     2f
    /* sysretq: rcx and r11 already hold rip and rflags. */
    incq    {sysrets}(%rip)
    load_user_registers
    movq    4*8(%rdi), %rsp
    movq    7*8(%rdi), %rdi
    sysretq
2:
    incq    {irets}(%rip)
    pushq   ${user_data}
    pushq   4*8(%rdi)
    pushq   {rflags}(%rdi)
    pushq   ${user_code}
    pushq   {rip}(%rdi)
    load_user_registers
    movq    7*8(%rdi), %rdi
    iretq

    /* rdi = the context to run, rsi = the KernelContext to save the caller's registers in. */
    .globl __user_run
__user_run:
    movq    %rbx, 0(%rsi)
    movq    %rbp, 8(%rsi)
    movq    %r12, 16(%rsi)
    movq    %r13, 24(%rsi)
    movq    %r14, 32(%rsi)
    movq    %r15, 40(%rsi)
    movq    %rsp, 48(%rsi)
    pushfq
    popq    56(%rsi)
    jmp     __user_resume

    /* rdi = the KernelContext saved by __user_run: returns from that call. */
    .globl __user_leave
__user_leave:
    movl    ${kernel_data}, %eax
    movl    %eax, %ds
    movl    %eax, %es
    movq    0(%rdi), %rbx
    movq    8(%rdi), %rbp
    movq    16(%rdi), %r12
    movq    24(%rdi), %r13
    movq    32(%rdi), %r14
    movq    40(%rdi), %r15
    movq    48(%rdi), %rsp
    pushq   56(%rdi)
    popfq
    ret
    .popsection
    "#,
    scratch = sym __user_scratch,
    current = sym __user_current,
    sysrets = sym SYSRETS,
    irets = sym IRETS,
    rip = const RIP_OFFSET,
    rflags = const RFLAGS_OFFSET,
    on_syscall = sym on_syscall,
    orphan = sym orphan_syscall,
    user_data = const gdt::USER_DATA,
    user_code = const gdt::USER_CODE,
    kernel_data = const gdt::KERNEL_DATA,
    options(att_syntax)
);

/// The kernel's callee-saved registers, stack pointer and flags while a [`run`] is in
/// progress.
#[repr(C)]
#[derive(Default)]
struct KernelContext {
    rbx: u64,
    rbp: u64,
    r12: u64,
    r13: u64,
    r14: u64,
    r15: u64,
    rsp: u64,
    rflags: u64,
}

unsafe extern "C" {
    fn __syscall_entry();
    fn __user_resume(ctx: *mut UserContext) -> !;
    fn __user_run(ctx: *mut UserContext, kernel: *mut KernelContext);
    fn __user_leave(kernel: *mut KernelContext) -> !;
}

/// The [`run`] in progress, if any.
static RUN_RETURN: AtomicPtr<KernelContext> = AtomicPtr::new(core::ptr::null_mut());

/// Resumes the context at `ctx` in ring 3 (it becomes the current one).
fn resume(ctx: *mut UserContext) -> ! {
    // SAFETY: `ctx` is a domain's context, which lives for as long as the domain (the
    // portable kernel boxes it; a test's outlives its `run`); nothing refers to it mutably
    // now. Its `rip` is clamped into the user half, so `sysretq` or `iretq` cannot fault in
    // ring 0; the segments are the GDT's user segments; the flags come from the context with
    // IOPL 0, VM clear and IF set, and ring 3 cannot use the others to gain anything.
    unsafe {
        (*ctx).rip = user_half((*ctx).rip);
        (*ctx).rflags = ((*ctx).rflags & !((3 << 12) | (1 << 17))) | RFLAGS_IF | RFLAGS_FIXED;
        __user_resume(ctx)
    }
}

/// Leaves the kernel's boot context for good and runs the context at `ctx` (a domain's, which
/// stays where it is for as long as the domain exists) in ring 3, in the address space the
/// caller activated. From here on the kernel runs only in trap handlers.
pub fn enter_user(ctx: NonNull<UserContext>) -> ! {
    interrupts::disable();
    resume(ctx.as_ptr())
}

/// Runs the context at `ctx` in ring 3 with `handler` handling its traps, until the handler
/// returns `None`; then returns here (for kernel tests: the kernel goes on as after a call).
/// The handler installed before is installed again afterwards, and no context is current.
pub fn run(ctx: NonNull<UserContext>, handler: Handler) {
    let _interrupts = super::super::InterruptGuard::new();
    let before = RUN_HANDLER.swap(handler as *const () as usize, Ordering::AcqRel);
    let mut kernel = KernelContext::default();
    RUN_RETURN.store(&raw mut kernel, Ordering::Release);
    // SAFETY: `__user_run` saves the callee-saved registers, the stack pointer (at the return
    // address) and the flags in `kernel`, then resumes `ctx` like `resume`; a trap whose
    // handler returns `None` comes back through `__user_leave`, which restores them and
    // returns to this call, so for the compiler this is an ordinary call that preserves what
    // the C ABI says it preserves. `kernel` outlives the call, and `ctx` is alive (the
    // caller's).
    unsafe { __user_run(ctx.as_ptr(), &raw mut kernel) };
    RUN_RETURN.store(core::ptr::null_mut(), Ordering::Release);
    __user_current.store(core::ptr::null_mut(), Ordering::Relaxed);
    RUN_HANDLER.store(before, Ordering::Release);
}

/// `syscall` from ring 3: the registers are in the context at `ctx`; returns the context to
/// resume.
extern "C" fn on_syscall(ctx: *mut UserContext) -> *mut UserContext {
    dispatch(ctx, UserTrap::SystemCall)
}

/// `syscall` with no current context (user code run by [`super::trap::run_user`]).
extern "C" fn orphan_syscall() -> ! {
    panic!("syscall from ring 3 with no current context");
}

/// Passes `what` to the portable kernel's domains, or to the handler of the kernel test's
/// [`run`] in progress, and returns the context to resume, or returns from that [`run`].
#[inline(always)]
fn dispatch(ctx: *mut UserContext, what: UserTrap) -> *mut UserContext {
    let test = RUN_HANDLER.load(Ordering::Acquire);
    let resume = if test == 0 {
        Some(crate::domain::on_user_trap(what))
    } else {
        // SAFETY: `RUN_HANDLER` only ever holds 0 or a value stored from a `Handler` in
        // `run`, so a non-zero value is a valid function pointer of that type.
        let handler: Handler = unsafe { core::mem::transmute::<usize, Handler>(test) };
        handler(what)
    };
    match resume {
        Some(Resume::Results(status, value)) => {
            // SAFETY: `ctx` is the current domain's context; the handler, which had it, has
            // returned, so nothing else refers to it.
            unsafe { (*ctx).set_result(status, value) };
            ctx
        }
        Some(Resume::Context(other)) => other,
        None => {
            let kernel = RUN_RETURN.swap(core::ptr::null_mut(), Ordering::AcqRel);
            assert!(!kernel.is_null(), "a trap handler ended user mode outside a run");
            // SAFETY: `run` stored its own `KernelContext`, which lives until it returns, and
            // it cannot return before this resumes it; the swap took the pointer.
            unsafe { __user_leave(kernel) }
        }
    }
}

/// A trap from ring 3 through the IDT while a context is current: saves the registers from
/// `frame` into it, hands the trap to the handler and resumes what it says.
pub(super) fn on_trap(frame: &TrapFrame) -> ! {
    close_smap();
    let ctx = __user_current.load(Ordering::Relaxed);
    // SAFETY: `ctx` is the current domain's context (non-null: the caller checked), alive
    // while the domain is; the domain is stopped and nothing else refers to it.
    let c = unsafe { &mut *ctx };
    c.regs = [
        frame.rax, frame.rcx, frame.rdx, frame.rbx, frame.rsp, frame.rbp, frame.rsi, frame.rdi,
        frame.r8, frame.r9, frame.r10, frame.r11, frame.r12, frame.r13, frame.r14, frame.r15,
    ];
    c.rip = frame.rip;
    c.rflags = frame.rflags;
    let vector = frame.vector;
    let next = if vector == u64::from(TIMER_VECTOR) {
        apic::end_of_interrupt();
        let raise = crate::softint::due();
        let next = if timer::due_from_user() { dispatch(ctx, UserTrap::Timer) } else { ctx };
        if raise {
            // Only now, after the handler (which may idle with interrupts on, where the IPI
            // would be taken in the kernel): it stays pending until `resume` enters ring 3,
            // and is taken there.
            interrupts::raise_software();
        }
        next
    } else if vector >= 32 {
        if interrupts::on_device(vector) {
            dispatch(ctx, UserTrap::Device)
        } else if interrupts::on_released(vector) {
            // A message of a device stopped when its driver died: acknowledged, counted.
            ctx
        } else {
            // The kernel's business, not the domain's: counted and silenced, and the domain
            // resumes where it was interrupted.
            interrupts::unexpected(vector as u8, true);
            ctx
        }
    } else if vector == 7 && fp::on_first_use() {
        // The domain's FP state is loaded now: its instruction runs again.
        ctx
    } else {
        let fault = user_fault(vector, frame.error, Cr2::read_raw(), frame.rip);
        dispatch(ctx, UserTrap::Fault(fault))
    };
    resume(next)
}

/// Clears RFLAGS.AC, which an interrupt or exception from ring 3 leaves as the domain had it
/// (`popfq` lets ring 3 set it): with AC set, SMAP would not stop the kernel's accesses to
/// user pages. (`syscall` clears it through SFMASK; the domain gets its own flags back when it
/// resumes.)
fn close_smap() {
    use ::x86_64::registers::rflags::{self, RFlags};
    let flags = rflags::read();
    if flags.contains(RFlags::ALIGNMENT_CHECK) {
        // SAFETY: clears only AC, which no kernel code relies on being set here.
        unsafe { rflags::write(flags - RFlags::ALIGNMENT_CHECK) };
    }
}

/// The arch-neutral form of exception `vector` with error code `error` (and CR2 `cr2`) taken
/// at `rip`.
fn user_fault(vector: u64, error: u64, cr2: u64, rip: u64) -> UserFault {
    use abi::Access::{Execute, Read, Write};
    match vector {
        14 => UserFault::Page {
            addr: cr2 as usize,
            access: if error & PF_INSTRUCTION != 0 {
                Execute
            } else if error & PF_WRITE != 0 {
                Write
            } else {
                Read
            },
        },
        6 => UserFault::IllegalInstruction { bits: opcode_bytes(rip as usize) },
        3 => UserFault::Breakpoint,
        13 => UserFault::Refused { addr: 0, access: Read },
        v => UserFault::Other { name: exception_name(v, error), code: v as usize },
    }
}

/// The first two bytes at `addr` in the current address space as a little-endian number (`ud2`
/// is 0x0b0f), or the one byte before the end of what is readable; `None` if none is readable.
/// Two bytes name the opcode of every instruction that raises #UD on purpose (`ud0`, `ud1`,
/// `ud2`) without reaching into the next instruction.
fn opcode_bytes(addr: usize) -> Option<u64> {
    let mut two = [0u8; 2];
    if copy_from_user(&mut two, addr).is_ok() {
        return Some(u64::from(u16::from_le_bytes(two)));
    }
    let mut one = [0u8; 1];
    copy_from_user(&mut one, addr).ok().map(|()| u64::from(one[0]))
}

/// Runs `f` with SMAP open (RFLAGS.AC set, where CR4.SMAP is on) and interrupts off.
fn with_user_access<R>(f: impl FnOnce() -> R) -> R {
    let _interrupts = super::super::InterruptGuard::new();
    let smap = Cr4::read().contains(Cr4Flags::SUPERVISOR_MODE_ACCESS_PREVENTION);
    if smap {
        // SAFETY: `stac` exists (SMAP is on) and only lets the kernel's accesses reach user
        // pages until the `clac` below; no interrupt handler runs meanwhile, and `f` reaches
        // user memory only through probes.
        unsafe { core::arch::asm!("stac", options(nomem, nostack)) };
    }
    let r = f();
    if smap {
        // SAFETY: closes SMAP again.
        unsafe { core::arch::asm!("clac", options(nomem, nostack)) };
    }
    r
}

/// Copies `dst.len()` words from the 8-byte aligned user address `src` of the current address
/// space into `dst`, in one probed loop. The caller has checked that the domain may read the
/// range; a fault on the way (or a misaligned `src`) yields `Err(src)` instead of a kernel
/// trap.
pub fn copy_words_from_user(dst: &mut [u64], src: usize) -> Result<(), usize> {
    let end = dst.len().checked_mul(8).and_then(|n| src.checked_add(n));
    if !src.is_multiple_of(8) || end.is_none_or(|e| e > abi::USER_END) {
        return Err(src);
    }
    if with_user_access(|| probe::copy_words(dst, src)) { Ok(()) } else { Err(src) }
}

/// Copies `dst.len()` bytes from the user address `src` of the current address space into
/// `dst`. The caller has checked that the domain may read the range; a fault on the way (the
/// check notwithstanding) yields `Err(faulting address)` instead of a kernel trap.
pub fn copy_from_user(dst: &mut [u8], src: usize) -> Result<(), usize> {
    with_user_access(|| {
        // Whole aligned words where possible (one probe each), single bytes at the edges.
        let mut i = 0;
        while i < dst.len() {
            let at = src.wrapping_add(i);
            if at >= abi::USER_END {
                return Err(at);
            }
            if at.is_multiple_of(8) && dst.len() - i >= 8 {
                let w = probe::read_u64(at).ok_or(at)?;
                dst[i..i + 8].copy_from_slice(&w.to_le_bytes());
                i += 8;
            } else {
                dst[i] = probe::read_u8(at).ok_or(at)?;
                i += 1;
            }
        }
        Ok(())
    })
}

/// Copies `src` to the user address `dst` of the current address space, byte by byte. The
/// caller has checked that the domain may write the range; a fault on the way (the check
/// notwithstanding: an unmapped page, or a read-only one, CR0.WP being on) yields
/// `Err(faulting address)` instead of a kernel trap, with the bytes before it written.
pub fn copy_to_user(src: &[u8], dst: usize) -> Result<(), usize> {
    with_user_access(|| {
        for (i, &b) in src.iter().enumerate() {
            let at = dst.wrapping_add(i);
            if at >= abi::USER_END || !probe::write_u8(at, b) {
                return Err(at);
            }
        }
        Ok(())
    })
}
