//! The interrupt descriptor table, the entry stubs of all 256 vectors and trap dispatch.
//!
//! Every vector has a small stub (no `extern "x86-interrupt"`, which needs a nightly compiler)
//! that pushes a zero in place of the error code where the CPU pushes none, then the vector
//! number, and jumps to one common path; that path saves the fifteen general registers, calls
//! [`trap`] with the [`TrapFrame`] they make on the stack, restores them (the handler may have
//! changed the frame) and returns with `iretq`. Gates are interrupt gates (interrupts stay off
//! in handlers). A trap in the kernel runs on the interrupted stack, except the double fault,
//! whose gate switches to its own stack (IST1, [`super::gdt`]), so that a kernel stack overflow
//! is reported rather than ending in a triple fault.
//!
//! Dispatch: the local APIC timer's vector goes to [`super::timer`]; any other interrupt is
//! counted and silenced by [`super::interrupts::unexpected`] and the interrupted code resumes;
//! a fault at one of the probe instructions ([`super::probe`]) resumes at the probe's fix-up;
//! a trap from user mode while a domain's context is current goes to [`super::user`], which
//! saves the registers into that context; any other trap from user mode ends the user-mode
//! excursion of [`run_user`]; any other exception is reported (its name,
//! vector, error code, the faulting address for a page fault, the symbolized instruction
//! pointer and a backtrace) and ends the run with a failure status. The breakpoint's gate may
//! be used from user mode (`int3`), like Linux's; every other gate only by the CPU.
//!
//! System calls (`syscall`) do not come through the IDT: their entry is in [`super::user`].
//!
//! Not here: the [`TrapFrame`] layout, the page-fault error bits and the exceptions' names
//! ([`super::frame`]), and the vectors the kernel assigns ([`super::vectors`]): leaves that
//! the modules this one dispatches to use without importing it.

use core::arch::global_asm;
use core::sync::atomic::{AtomicPtr, Ordering};

use ::x86_64::PrivilegeLevel;
use ::x86_64::VirtAddr;
use ::x86_64::registers::control::Cr2;
use ::x86_64::structures::idt::InterruptDescriptorTable;
use spin::Once;

use super::frame::{PF_PRESENT, PF_RESERVED, PF_USER, TrapFrame, exception_name};
use super::vectors::TIMER_VECTOR;
use super::{apic, boot, gdt, interrupts, probe, timer, user};

global_asm!(
    r#"
    .pushsection .text.trap_entry, "ax"
    .balign 16
__trap_common:
    pushq   %rax
    pushq   %rbx
    pushq   %rcx
    pushq   %rdx
    pushq   %rsi
    pushq   %rdi
    pushq   %rbp
    pushq   %r8
    pushq   %r9
    pushq   %r10
    pushq   %r11
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    cld
    movq    %rsp, %rdi
    call    {handler}
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %r11
    popq    %r10
    popq    %r9
    popq    %r8
    popq    %rbp
    popq    %rdi
    popq    %rsi
    popq    %rdx
    popq    %rcx
    popq    %rbx
    popq    %rax
    addq    $16, %rsp
    iretq

    /* One stub per vector, and a table of their addresses in .rodata. The CPU pushes an
       error code for vectors 8, 10-14, 17, 21, 29 and 30. */
    .pushsection .rodata.trap_stubs, "a"
    .balign 8
    .globl __trap_stub_table
__trap_stub_table:
    .popsection
    .set    trap_vector, 0
    .rept   256
    .balign 16
1:
    .if (trap_vector == 8) || (trap_vector == 10) || (trap_vector == 11) || (trap_vector == 12) || (trap_vector == 13) || (trap_vector == 14) || (trap_vector == 17) || (trap_vector == 21) || (trap_vector == 29) || (trap_vector == 30)
    .else
    pushq   $0
    .endif
    pushq   $trap_vector
    jmp     __trap_common
    .pushsection .rodata.trap_stubs, "a"
    .quad   1b
    .popsection
    .set    trap_vector, trap_vector + 1
    .endr
    .popsection
    "#,
    handler = sym trap,
    options(att_syntax)
);

unsafe extern "C" {
    static __trap_stub_table: [u64; 256];
}

static IDT: Once<InterruptDescriptorTable> = Once::new();

/// The address of vector `v`'s stub.
fn stub(v: usize) -> u64 {
    // SAFETY: the table is 256 addresses in `.rodata`, written by the assembler above and
    // never changed.
    let table = unsafe { &__trap_stub_table };
    table[v]
}

/// Builds the IDT (every vector to its stub; the double fault on IST1; the breakpoint usable
/// from user mode) and loads it.
pub fn init() {
    let idt = IDT.call_once(|| {
        let mut idt = InterruptDescriptorTable::new();
        // SAFETY: for each `set_handler_addr` and `set_stack_index` below, the addresses are
        // those of the entry stubs, which save every register they change, call the handler on
        // a 16-byte aligned stack and return with `iretq` to the frame the CPU pushed (minus
        // the two words they pushed themselves); IST1 is the double-fault stack the TSS names.
        unsafe {
            idt.divide_error.set_handler_addr(VirtAddr::new(stub(0)));
            idt.debug.set_handler_addr(VirtAddr::new(stub(1)));
            idt.non_maskable_interrupt.set_handler_addr(VirtAddr::new(stub(2)));
            idt.breakpoint
                .set_handler_addr(VirtAddr::new(stub(3)))
                .set_privilege_level(PrivilegeLevel::Ring3);
            idt.overflow.set_handler_addr(VirtAddr::new(stub(4)));
            idt.bound_range_exceeded.set_handler_addr(VirtAddr::new(stub(5)));
            idt.invalid_opcode.set_handler_addr(VirtAddr::new(stub(6)));
            idt.device_not_available.set_handler_addr(VirtAddr::new(stub(7)));
            idt.double_fault
                .set_handler_addr(VirtAddr::new(stub(8)))
                .set_stack_index(gdt::DOUBLE_FAULT_IST);
            idt.invalid_tss.set_handler_addr(VirtAddr::new(stub(10)));
            idt.segment_not_present.set_handler_addr(VirtAddr::new(stub(11)));
            idt.stack_segment_fault.set_handler_addr(VirtAddr::new(stub(12)));
            idt.general_protection_fault.set_handler_addr(VirtAddr::new(stub(13)));
            idt.page_fault.set_handler_addr(VirtAddr::new(stub(14)));
            idt.x87_floating_point.set_handler_addr(VirtAddr::new(stub(16)));
            idt.alignment_check.set_handler_addr(VirtAddr::new(stub(17)));
            idt.machine_check.set_handler_addr(VirtAddr::new(stub(18)));
            idt.simd_floating_point.set_handler_addr(VirtAddr::new(stub(19)));
            idt.virtualization.set_handler_addr(VirtAddr::new(stub(20)));
            idt.cp_protection_exception.set_handler_addr(VirtAddr::new(stub(21)));
            idt.hv_injection_exception.set_handler_addr(VirtAddr::new(stub(28)));
            idt.vmm_communication_exception.set_handler_addr(VirtAddr::new(stub(29)));
            idt.security_exception.set_handler_addr(VirtAddr::new(stub(30)));
            for v in 32..256 {
                idt[v as u8].set_handler_addr(VirtAddr::new(stub(v)));
            }
        }
        idt
    });
    idt.load();
}

/// The dispatcher every stub calls, with interrupts off.
extern "C" fn trap(frame: &mut TrapFrame) {
    let vector = frame.vector;
    if frame.cs & 3 == 3 && user::owns_user_traps() {
        user::on_trap(frame);
    }
    if vector == u64::from(TIMER_VECTOR) {
        apic::end_of_interrupt();
        timer::on_interrupt();
        return;
    }
    let from_user = frame.cs & 3 == 3;
    if interrupts::on_device(vector) || interrupts::on_released(vector) {
        return;
    }
    if vector >= 32 {
        interrupts::unexpected(vector as u8, from_user);
        return;
    }
    if from_user {
        return user_trap(frame);
    }
    if matches!(vector, 12..=14) && probe::fix_up(frame) {
        return;
    }
    report(frame)
}

fn report(frame: &TrapFrame) -> ! {
    let name = exception_name(frame.vector, frame.error);
    let cr2 = Cr2::read_raw();
    match frame.vector {
        14 => defmt::error!(
            "trap: {=str}, vector 14, error {=u64:#x} ({=str}, {=str}) at address {=u64:#x}, pc={=u64:#x}",
            name,
            frame.error,
            if frame.error & PF_RESERVED != 0 {
                "reserved bit set in an entry"
            } else if frame.error & PF_PRESENT != 0 {
                "protection"
            } else {
                "not present"
            },
            if frame.error & PF_USER != 0 { "user" } else { "supervisor" },
            cr2,
            frame.rip
        ),
        8 => defmt::error!(
            "trap: {=str}, vector 8, the last page fault at address {=u64:#x}, pc={=u64:#x}, rsp={=u64:#x}",
            name,
            cr2,
            frame.rip,
            frame.rsp
        ),
        v => defmt::error!(
            "trap: {=str}, vector {=u64}, error {=u64:#x}, pc={=u64:#x}, rsp={=u64:#x}",
            name,
            v,
            frame.error,
            frame.rip,
            frame.rsp
        ),
    }
    let (guard, _) = boot::boot_stack();
    let in_guard = |a: u64| (guard as u64..guard as u64 + 4096).contains(&a);
    if matches!(frame.vector, 8 | 14) && (in_guard(cr2) || in_guard(frame.rsp)) {
        defmt::error!("trap: the address is the boot stack's guard page: kernel stack overflow");
    }
    defmt::error!("backtrace:");
    defmt::error!("  #0 pc={=u64:#x}", frame.rip);
    let mut depth = 1usize;
    super::backtrace::walk_frames(frame.rbp as usize, &mut |pc| {
        defmt::error!("  #{=usize} ret={=u64:#x}", depth, pc as u64);
        depth += 1;
    });
    crate::shutdown(crate::ExitCode::Panic)
}

/// How a user-mode excursion of [`run_user`] ended.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UserExit {
    /// The vector of the trap that ended it.
    pub vector: u64,
    /// Its error code (0 if it has none).
    pub error: u64,
    /// The user instruction pointer the CPU saved.
    pub rip: u64,
    /// The code segment selector the CPU saved.
    pub cs: u64,
    /// CR2 at the trap (the faulting address, for a page fault).
    pub cr2: u64,
    /// Where the CPU put the trap frame (on the entry stack, TSS.RSP0).
    pub frame_at: u64,
}

impl defmt::Format for UserExit {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "vector {=u64} error {=u64:#x} at rip {=u64:#x} (cs {=u64:#x}), cr2 {=u64:#x}, frame at {=u64:#x}",
            self.vector,
            self.error,
            self.rip,
            self.cs,
            self.cr2,
            self.frame_at
        )
    }
}

/// The kernel's registers while user code runs: what [`run_user`] resumes with.
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
    exit: UserExit,
}

/// The context of the [`run_user`] call in progress, if any.
static USER_RETURN: AtomicPtr<KernelContext> = AtomicPtr::new(core::ptr::null_mut());

global_asm!(
    r#"
    .pushsection .text.trap_entry, "ax"
    /* rdi = user rip, rsi = user rsp, rdx = the KernelContext to save into. */
__enter_user:
    movq    %rbx, 0(%rdx)
    movq    %rbp, 8(%rdx)
    movq    %r12, 16(%rdx)
    movq    %r13, 24(%rdx)
    movq    %r14, 32(%rdx)
    movq    %r15, 40(%rdx)
    movq    %rsp, 48(%rdx)
    pushfq
    popq    56(%rdx)
    pushq   ${user_data}
    pushq   %rsi
    pushq   $0x2
    pushq   ${user_code}
    pushq   %rdi
    xorl    %eax, %eax
    xorl    %ebx, %ebx
    xorl    %ecx, %ecx
    xorl    %edx, %edx
    xorl    %esi, %esi
    xorl    %edi, %edi
    xorl    %ebp, %ebp
    xorl    %r8d, %r8d
    xorl    %r9d, %r9d
    xorl    %r10d, %r10d
    xorl    %r11d, %r11d
    xorl    %r12d, %r12d
    xorl    %r13d, %r13d
    xorl    %r14d, %r14d
    xorl    %r15d, %r15d
    iretq

    /* The trap handler resumes here, on the kernel stack, with the callee-saved registers
       and rflags of the call to __enter_user restored. */
__user_returned:
    movl    ${kernel_data}, %eax
    movl    %eax, %ds
    movl    %eax, %es
    ret
    .popsection
    "#,
    user_data = const gdt::USER_DATA,
    user_code = const gdt::USER_CODE,
    kernel_data = const gdt::KERNEL_DATA,
    options(att_syntax)
);

unsafe extern "C" {
    fn __enter_user(rip: u64, rsp: u64, ctx: *mut KernelContext);
    fn __user_returned();
}

/// Runs user code at `rip` with stack `rsp` (in ring 3, interrupts off, every register zero)
/// until its first trap, and returns how it ended. The pages must be mapped user-accessible in
/// the current tree, `rip`'s executable. Ring 3 cannot touch kernel pages, turn interrupts on
/// or reach I/O ports (IOPL is 0), so the code can harm nothing but the user pages it sees;
/// code that never traps keeps the CPU forever.
pub fn run_user(rip: u64, rsp: u64) -> UserExit {
    let mut ctx = KernelContext::default();
    let _interrupts = super::super::InterruptGuard::new();
    USER_RETURN.store(&raw mut ctx, Ordering::Release);
    // SAFETY: `__enter_user` saves the callee-saved registers, the stack pointer and rflags in
    // `ctx`, then enters ring 3 with `iretq`; the trap that ends the user code comes back
    // through `user_trap`, which resumes `__user_returned` with them, so for the compiler this
    // is an ordinary call that preserves what the C ABI says it preserves.
    unsafe { __enter_user(rip, rsp, &raw mut ctx) };
    USER_RETURN.store(core::ptr::null_mut(), Ordering::Release);
    ctx.exit
}

/// A trap taken in user mode: ends the [`run_user`] call in progress by resuming the kernel
/// where it entered user mode. With no such call, the trap is reported like a kernel fault.
fn user_trap(frame: &mut TrapFrame) {
    let ctx = USER_RETURN.swap(core::ptr::null_mut(), Ordering::AcqRel);
    if ctx.is_null() {
        report(frame);
    }
    // SAFETY: `run_user` stored a pointer to its own `KernelContext`, which lives until it
    // returns, and it cannot return before this trap resumes it; the swap above took the
    // pointer, so nothing else uses it.
    let ctx = unsafe { &mut *ctx };
    ctx.exit = UserExit {
        vector: frame.vector,
        error: frame.error,
        rip: frame.rip,
        cs: frame.cs,
        cr2: Cr2::read_raw(),
        frame_at: frame as *const TrapFrame as u64,
    };
    frame.rbx = ctx.rbx;
    frame.rbp = ctx.rbp;
    frame.r12 = ctx.r12;
    frame.r13 = ctx.r13;
    frame.r14 = ctx.r14;
    frame.r15 = ctx.r15;
    frame.rip = __user_returned as *const () as u64;
    frame.cs = u64::from(gdt::KERNEL_CODE);
    frame.rflags = ctx.rflags;
    frame.rsp = ctx.rsp;
    frame.ss = u64::from(gdt::KERNEL_DATA);
}

/// Executes `ud2`: an illegal instruction in the kernel, for `fault=illegal-instruction`.
pub fn illegal_instruction() {
    // SAFETY: `ud2` raises #UD, which the trap handler reports before ending the run; nothing
    // runs after it.
    unsafe { core::arch::asm!("ud2", options(nostack)) };
}

/// Executes `int3`: a breakpoint in the kernel, for `fault=breakpoint`.
pub fn breakpoint() {
    // SAFETY: `int3` raises #BP, which the trap handler reports (the kernel has no debugger)
    // before ending the run.
    unsafe { core::arch::asm!("int3", options(nostack)) };
}
