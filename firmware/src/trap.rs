//! The M-mode trap vector and its dispatch.
//!
//! `mscratch` holds the top of the M-mode stack while the supervisor runs, and 0 while M-mode
//! code runs. The vector swaps it with `sp`: a non-zero result means the trap came from S/U-mode
//! and `sp` is now the M-mode stack; zero means the firmware itself trapped, and the vector swaps
//! back and stays on the current stack (the handler then reports and exits). All 31 GPRs are
//! saved in a [`TrapFrame`] and restored from it, so the handler may change any of them (the SBI
//! return values in `a0`/`a1`).

use crate::csr::{self, Mode};
use crate::frame::TrapFrame;
use crate::{fatal, sbi};
use core::arch::global_asm;

/// The frame size; a multiple of 16 keeps `sp` aligned.
const FRAME_SIZE: usize = core::mem::size_of::<TrapFrame>();
const _: () = assert!(FRAME_SIZE.is_multiple_of(16));

global_asm!(
    r#"
    .section .text.trap, "ax"
    .balign 4
    .globl _trap_vector
_trap_vector:
    csrrw   sp, mscratch, sp
    bnez    sp, 1f
    /* From M-mode: mscratch was 0. Get sp back (mscratch = 0 again) and stay on this stack. */
    csrrw   sp, mscratch, sp
1:  addi    sp, sp, -{frame}
    sd      x1, 1*8(sp)
    sd      x3, 3*8(sp)
    sd      x4, 4*8(sp)
    sd      x5, 5*8(sp)
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
    /* The interrupted sp (0 from M-mode); mscratch = 0 while the handler runs. */
    csrrw   t0, mscratch, zero
    sd      t0, 2*8(sp)
    mv      a0, sp
    call    {handler}
    /* Back to the supervisor: the M-mode stack top goes back into mscratch. */
    addi    t0, sp, {frame}
    csrw    mscratch, t0
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
    ld      sp, 2*8(sp)
    mret
    "#,
    frame = const FRAME_SIZE,
    handler = sym trap_handler,
);

/// `mcause` bit that marks an interrupt.
const INTERRUPT: usize = 1 << (usize::BITS - 1);
/// Machine timer interrupt.
const MACHINE_TIMER: usize = INTERRUPT | 7;
/// Environment call from S-mode.
const ECALL_FROM_S: usize = 9;

/// Called by the vector with the interrupted registers. Returns only for traps from S/U-mode
/// that were handled; `mret` then resumes at `mepc`.
extern "C" fn trap_handler(frame: &mut TrapFrame) {
    let cause = csr::mcause();
    let from = csr::previous_mode();
    match (cause, from) {
        (_, Mode::Machine) => report(frame, cause, from),
        (MACHINE_TIMER, _) => {
            // The deadline has passed, so no host timer is left: masking the interrupt is
            // enough.
            csr::set_mtie(false);
            csr::set_stip();
        }
        (ECALL_FROM_S, Mode::Supervisor) => {
            sbi::handle_ecall(frame);
            // `ecall` is always 4 bytes long.
            csr::set_mepc(csr::mepc() + 4);
        }
        _ => report(frame, cause, from),
    }
}

/// Reports a trap the firmware does not handle and leaves QEMU with a failure status.
fn report(frame: &TrapFrame, cause: usize, from: Mode) -> ! {
    // A trap from M-mode stayed on the M-mode stack, right above the frame.
    let sp = match from {
        Mode::Machine => frame as *const TrapFrame as usize + FRAME_SIZE,
        _ => frame.regs[2],
    };
    fatal(format_args!(
        "unexpected {} (mcause {:#x}) from {:?} mode: mepc {:#x}, mtval {:#x}, ra {:#x}, sp {:#x}, \
         a0 {:#x}, a7 {:#x}",
        describe(cause),
        cause,
        from,
        csr::mepc(),
        csr::mtval(),
        frame.regs[1],
        sp,
        frame.a(0),
        frame.a(7),
    ))
}

/// A name for an `mcause` value.
fn describe(cause: usize) -> &'static str {
    if cause & INTERRUPT != 0 {
        return match cause & !INTERRUPT {
            1 => "supervisor software interrupt",
            3 => "machine software interrupt",
            5 => "supervisor timer interrupt",
            7 => "machine timer interrupt",
            9 => "supervisor external interrupt",
            11 => "machine external interrupt",
            _ => "interrupt",
        };
    }
    match cause {
        0 => "instruction address misaligned",
        1 => "instruction access fault",
        2 => "illegal instruction",
        3 => "breakpoint",
        4 => "load address misaligned",
        5 => "load access fault",
        6 => "store/AMO address misaligned",
        7 => "store/AMO access fault",
        8 => "ecall from U-mode",
        9 => "ecall from S-mode",
        11 => "ecall from M-mode",
        12 => "instruction page fault",
        13 => "load page fault",
        15 => "store/AMO page fault",
        _ => "exception",
    }
}
