//! Trap entry and dispatch for S-mode.
//!
//! A trap from U-mode saves the domain's registers straight into its context (whose address
//! `sscratch` holds while the domain runs; the kernel keeps `sscratch` at 0), runs the handler
//! on the dedicated trap stack, and resumes whichever context the handler returns: a domain
//! switch copies no registers. A trap from S-mode saves a frame on the trap stack (below the
//! interrupted one if it came while handling a trap, at the top otherwise), so that a kernel
//! stack overflow into the guard page can still be reported. Handlers run with interrupts
//! off. Traps from user mode go to [`super::user`]. In the kernel: timer interrupts go to
//! [`super::timer`], other interrupts are counted and silenced
//! ([`super::interrupts::unexpected`]) and the kernel goes on; a fault at one of the probe
//! instructions ([`super::probe`]) resumes at the probe's fix-up; any other exception is
//! reported (cause, address, symbolized PC, backtrace) and ends the run with a failure status.
//!
//! Not here: the [`TrapFrame`] layout and the names of `scause` codes, in [`super::frame`],
//! which the user-mode path ([`super::user`]) and [`super::fp`] share without importing this
//! module.

use core::arch::global_asm;

use riscv::register::{scause, sscratch, stval, stvec};

use super::frame::{INTERRUPT, SUPERVISOR_TIMER, TrapFrame, exception_name};
use super::{entry, interrupts, probe, timer, user};

const TRAP_STACK_BYTES: usize = 16 * 1024;

global_asm!(
    r#"
    .section .bss.trap_stack, "aw", @nobits
    .balign 16
    .globl __trap_stack_bottom
__trap_stack_bottom:
    .space {stack}
    .globl __trap_stack_top
__trap_stack_top:

    # x1, x3, x4 and x6..x31 into the frame at sp (sp and t0 are saved apart).
    .macro save_registers
    sd      x1, 1*8(sp)
    sd      x3, 3*8(sp)
    sd      x4, 4*8(sp)
    sd      x6, 6*8(sp)
    sd      x7, 7*8(sp)
    sd      x8, 8*8(sp)
    sd      x9, 9*8(sp)
    sd      x10, 10*8(sp)
    sd      x11, 11*8(sp)
    sd      x12, 12*8(sp)
    sd      x13, 13*8(sp)
    sd      x14, 14*8(sp)
    sd      x15, 15*8(sp)
    sd      x16, 16*8(sp)
    sd      x17, 17*8(sp)
    sd      x18, 18*8(sp)
    sd      x19, 19*8(sp)
    sd      x20, 20*8(sp)
    sd      x21, 21*8(sp)
    sd      x22, 22*8(sp)
    sd      x23, 23*8(sp)
    sd      x24, 24*8(sp)
    sd      x25, 25*8(sp)
    sd      x26, 26*8(sp)
    sd      x27, 27*8(sp)
    sd      x28, 28*8(sp)
    sd      x29, 29*8(sp)
    sd      x30, 30*8(sp)
    sd      x31, 31*8(sp)
    .endm

    # x1 and x3..x31 from the frame at sp.
    .macro load_registers
    ld      x1, 1*8(sp)
    ld      x3, 3*8(sp)
    ld      x4, 4*8(sp)
    ld      x5, 5*8(sp)
    ld      x6, 6*8(sp)
    ld      x7, 7*8(sp)
    ld      x8, 8*8(sp)
    ld      x9, 9*8(sp)
    ld      x10, 10*8(sp)
    ld      x11, 11*8(sp)
    ld      x12, 12*8(sp)
    ld      x13, 13*8(sp)
    ld      x14, 14*8(sp)
    ld      x15, 15*8(sp)
    ld      x16, 16*8(sp)
    ld      x17, 17*8(sp)
    ld      x18, 18*8(sp)
    ld      x19, 19*8(sp)
    ld      x20, 20*8(sp)
    ld      x21, 21*8(sp)
    ld      x22, 22*8(sp)
    ld      x23, 23*8(sp)
    ld      x24, 24*8(sp)
    ld      x25, 25*8(sp)
    ld      x26, 26*8(sp)
    ld      x27, 27*8(sp)
    ld      x28, 28*8(sp)
    ld      x29, 29*8(sp)
    ld      x30, 30*8(sp)
    ld      x31, 31*8(sp)
    .endm

    .section .text
    .balign 4
    .globl __trap_entry
__trap_entry:
    csrrw   sp, sscratch, sp
    bnez    sp, __trap_from_user

    # From S-mode: sscratch held 0 and now holds the interrupted sp.
    csrrw   sp, sscratch, sp
    csrw    sscratch, t0
    la      t0, __trap_stack_bottom
    bltu    sp, t0, 1f
    la      t0, __trap_stack_top
    bltu    t0, sp, 1f
    # Already on the trap stack (a probe's fault while handling a trap): nest below.
    mv      t0, sp
    j       2f
1:
    # Elsewhere (the boot stack, perhaps overflowed): move to the trap stack.
    mv      t0, sp
    la      sp, __trap_stack_top
2:
    addi    sp, sp, -{frame}
    sd      t0, 2*8(sp)
    csrr    t0, sscratch
    sd      t0, 5*8(sp)
    csrw    sscratch, zero
    save_registers
    csrr    t0, sepc
    sd      t0, 32*8(sp)
    csrr    t0, sstatus
    sd      t0, 33*8(sp)
    mv      a0, sp
    call    {kernel_handler}
    ld      t0, 32*8(sp)
    csrw    sepc, t0
    ld      t0, 33*8(sp)
    csrw    sstatus, t0
    load_registers
    ld      sp, 2*8(sp)
    sret

    # From U-mode: sp holds the current domain's context, sscratch the domain's sp.
__trap_from_user:
    sd      x5, 5*8(sp)
    save_registers
    csrr    t0, sscratch
    sd      t0, 2*8(sp)
    csrw    sscratch, zero
    csrr    t0, sepc
    sd      t0, 32*8(sp)
    csrr    t0, sstatus
    sd      t0, 33*8(sp)
    mv      a0, sp
    la      sp, __trap_stack_top
    call    {user_handler}

    # Resumes the context at a0 in U-mode; sscratch holds it while the domain runs.
    .globl __user_resume
__user_resume:
    mv      sp, a0
    ld      t0, 32*8(sp)
    csrw    sepc, t0
    ld      t0, 33*8(sp)
    csrw    sstatus, t0
    csrw    sscratch, sp
    load_registers
    ld      sp, 2*8(sp)
    sret
    "#,
    stack = const TRAP_STACK_BYTES,
    frame = const core::mem::size_of::<TrapFrame>(),
    kernel_handler = sym kernel_trap,
    user_handler = sym user_trap,
);

unsafe extern "C" {
    fn __trap_entry();
    static __trap_stack_top: u8;
}

/// Installs the trap vector and the trap stack.
pub fn init() {
    let vector = __trap_entry as *const () as usize;
    // SAFETY: `__trap_entry` is 4-byte aligned trap code that saves and restores every register
    // it touches; `sscratch` is 0 while the kernel runs, which the entry reads as "from S-mode".
    unsafe {
        sscratch::write(0);
        stvec::write(stvec::Stvec::new(vector, stvec::TrapMode::Direct));
    }
}

/// A trap from U-mode: the registers are in the context at `ctx`; returns the context to
/// resume.
extern "C" fn user_trap(ctx: *mut TrapFrame) -> *mut TrapFrame {
    let (scause, stval) = (scause::read().bits(), stval::read());
    user::on_trap(ctx, scause, stval)
}

/// A trap from S-mode, its frame on the trap stack.
extern "C" fn kernel_trap(frame: &mut TrapFrame) {
    let (scause, stval) = (scause::read().bits(), stval::read());
    if scause == SUPERVISOR_TIMER {
        timer::on_interrupt();
        return;
    }
    if scause == INTERRUPT | interrupts::EXTERNAL {
        return interrupts::on_external();
    }
    if scause & INTERRUPT != 0 {
        return interrupts::unexpected(scause & !INTERRUPT, false);
    }
    if matches!(scause, 2 | 5 | 7 | 13 | 15)
        && let Some(fixup) = probe::fixup_for(frame.sepc)
    {
        frame.sepc = fixup;
        return;
    }
    report(frame, scause, stval)
}

fn report(frame: &TrapFrame, scause: usize, stval: usize) -> ! {
    defmt::error!(
        "trap: {=str} (scause {=u64:#x}) at address {=u64:#x}, pc={=u64:#x}",
        exception_name(scause),
        scause as u64,
        stval as u64,
        frame.sepc as u64
    );
    let (guard, _) = entry::boot_stack();
    if (guard..guard + 4096).contains(&stval) {
        defmt::error!("trap: the address is the boot stack's guard page: kernel stack overflow");
    }
    defmt::error!("backtrace:");
    defmt::error!("  #0 pc={=u64:#x}", frame.sepc as u64);
    let mut depth = 1usize;
    super::walk_frames(frame.regs[8], &mut |pc| {
        defmt::error!("  #{=usize} ret={=u64:#x}", depth, pc as u64);
        depth += 1;
    });
    crate::shutdown(crate::ExitCode::Panic)
}
