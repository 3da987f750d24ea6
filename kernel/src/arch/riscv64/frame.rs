//! What a trap leaves for its handlers: the [`TrapFrame`] the entry saves (on the trap stack,
//! or, for a trap from U-mode, in the domain's context, which is a `TrapFrame`), the `scause`
//! codes the dispatch tests, and the names of the standard exceptions.
//!
//! A leaf: it imports nothing from its siblings, so the trap entry ([`super::trap`]), the
//! user-mode path ([`super::user`]) and the FP state ([`super::fp`]) all build on it without
//! importing one another in a circle.

/// Registers saved on trap entry.
#[repr(C)]
#[derive(Clone, Debug)]
pub struct TrapFrame {
    /// x0..x31 (x0 is unused; x2 is the interrupted `sp`).
    pub regs: [usize; 32],
    /// Interrupted PC.
    pub sepc: usize,
    /// Interrupted `sstatus`.
    pub sstatus: usize,
}

// The trap entry stores `sepc` and `sstatus` at words 32 and 33.
const _: () = assert!(core::mem::size_of::<TrapFrame>() == 34 * 8);

/// `scause`: the cause is an interrupt (the top bit).
pub(super) const INTERRUPT: usize = 1 << 63;
/// `scause` of the supervisor timer interrupt.
pub(super) const SUPERVISOR_TIMER: usize = INTERRUPT | 5;

/// Standard exception names, by `scause` code.
pub(super) fn exception_name(code: usize) -> &'static str {
    match code {
        0 => "instruction address misaligned",
        1 => "instruction access fault",
        2 => "illegal instruction",
        3 => "breakpoint",
        4 => "load address misaligned",
        5 => "load access fault",
        6 => "store address misaligned",
        7 => "store access fault",
        8 => "environment call from U-mode",
        9 => "environment call from S-mode",
        12 => "instruction page fault",
        13 => "load page fault",
        15 => "store page fault",
        _ => "unknown exception",
    }
}
