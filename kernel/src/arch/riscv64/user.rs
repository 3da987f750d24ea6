//! User mode: domains' saved contexts, their traps, entering them, and reaching their memory.
//!
//! A trap from U-mode lands on the trap stack like any other; [`on_trap`] classifies it and
//! hands it to the portable kernel ([`crate::domain::on_user_trap`]) together with the trap
//! frame, which *is* the interrupted domain's [`UserContext`]. The kernel may overwrite the frame
//! with another domain's context (and switch address spaces); the trap return path then resumes
//! that domain instead.

use core::arch::global_asm;

use abi::Rights;
use frame_allocator::Owner;

use super::sv39::{self, MapError, PTE_R, PTE_U, PTE_W, PTE_X, PageTable};
use super::trap::{self, INTERRUPT, SUPERVISOR_TIMER, TrapFrame};
use super::{probe, timer};

/// A domain's saved registers (the trap frame layout).
pub type UserContext = TrapFrame;

const SSTATUS_SPIE: usize = 1 << 5;
const SSTATUS_SUM: usize = 1 << 18;

impl TrapFrame {
    /// A context that starts at `entry` with stack pointer `sp` and arguments `a0..a2`, in
    /// U-mode with interrupts enabled.
    pub fn new_user(entry: usize, sp: usize, args: [usize; 3]) -> Self {
        let mut regs = [0usize; 32];
        regs[2] = sp;
        regs[10..13].copy_from_slice(&args);
        TrapFrame { regs, sepc: entry, sstatus: SSTATUS_SPIE }
    }

    /// The interrupted program counter.
    pub fn pc(&self) -> usize {
        self.sepc
    }

    /// Sets a system call's results: `a0` = status (0 or an error code), `a1` = value.
    pub fn set_result(&mut self, status: usize, value: usize) {
        self.regs[10] = status;
        self.regs[11] = value;
    }
}

/// Why a domain entered the kernel.
#[derive(Clone, Copy, Debug)]
pub enum UserTrap {
    /// `ecall`: the call number and six arguments (the PC already points past the `ecall`).
    SystemCall {
        /// `a7`.
        number: usize,
        /// `a0..a5`.
        args: [usize; 6],
    },
    /// The timer interrupt armed by the scheduler.
    Timer,
    /// A fault the kernel does not resolve for the domain.
    Fault {
        /// What happened (`load page fault`, `illegal instruction`, ...).
        cause: &'static str,
        /// The faulting address (`stval`), or the instruction bits for illegal instructions.
        addr: usize,
    },
}

pub(super) fn on_trap(frame: &mut TrapFrame, scause: usize, stval: usize) {
    let trap = if scause == SUPERVISOR_TIMER {
        timer::disarm();
        UserTrap::Timer
    } else if scause == 8 {
        frame.sepc += 4;
        let r = &frame.regs;
        UserTrap::SystemCall { number: r[17], args: [r[10], r[11], r[12], r[13], r[14], r[15]] }
    } else if scause & INTERRUPT != 0 {
        UserTrap::Fault { cause: "unexpected interrupt", addr: scause }
    } else {
        UserTrap::Fault { cause: trap::exception_name(scause), addr: stval }
    };
    crate::domain::on_user_trap(frame, trap);
}

global_asm!(
    r#"
    .section .text
    .globl __enter_user
__enter_user:
    mv      sp, a0
    j       __trap_restore
    "#
);

unsafe extern "C" {
    fn __enter_user(frame: *const TrapFrame) -> !;
}

/// Leaves the kernel's boot context for good and runs `ctx` in U-mode, in the address space
/// the caller activated. From here on the kernel runs only in trap handlers.
pub fn enter_user(ctx: &UserContext) -> ! {
    let slot = (trap::stack_top() - core::mem::size_of::<TrapFrame>()) as *mut TrapFrame;
    super::interrupts::disable();
    // SAFETY: `slot` is the frame position at the top of the trap stack, which nothing uses
    // while the kernel runs on its boot stack; `__enter_user` restores every register from it
    // and returns to U-mode with `sscratch` pointing at the trap stack's top again.
    unsafe {
        slot.write(TrapFrame { regs: ctx.regs, sepc: ctx.sepc, sstatus: ctx.sstatus });
        __enter_user(slot)
    }
}

/// A protection domain's view of the single address space: one Sv39 tree that shares the
/// kernel half and maps, in the user half, exactly the stretches the domain may access, with
/// its rights.
pub struct AddressSpace {
    table: PageTable,
}

impl AddressSpace {
    /// An empty user half, its tables charged to `owner`, tagged with `asid`.
    pub fn new(owner: Owner, asid: u16) -> Result<Self, MapError> {
        let table = super::with_kernel_table(|k| PageTable::new_sharing_kernel(k, owner, asid))?;
        Ok(AddressSpace { table })
    }

    /// Maps the user page `va` to frame `pa` with `rights` (write implies read: Sv39 has no
    /// write-only pages). `Rights::NONE` maps nothing.
    pub fn map(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), MapError> {
        let mut flags = PTE_U;
        if rights.contains(Rights::READ) || rights.contains(Rights::WRITE) {
            flags |= PTE_R;
        }
        if rights.contains(Rights::WRITE) {
            flags |= PTE_W;
        }
        if rights.contains(Rights::EXECUTE) {
            flags |= PTE_X;
        }
        if flags == PTE_U {
            return Ok(());
        }
        self.table.map(va as u64, pa, flags)
    }

    /// Removes the mapping of `va`, if any, and flushes it.
    pub fn unmap(&mut self, va: usize) {
        if self.table.unmap(va as u64).is_ok() {
            sv39::flush(va as u64);
        }
    }

    /// Makes this the current address space.
    pub fn activate(&self) {
        sv39::activate(&self.table);
    }

    /// Frees the tables (not the mapped frames) and forgets cached translations. The CPU moves
    /// to the kernel's own tables first, in case this space is the current one.
    pub fn destroy(self) {
        super::with_kernel_table(|k| sv39::activate(k));
        let asid = self.table.asid();
        self.table.destroy();
        sv39::flush_asid(asid);
    }
}

/// Copies `dst.len()` bytes from the user address `src` of the current address space into
/// `dst`. The caller has checked that the domain may read the range; a fault on the way (the
/// check notwithstanding) yields `Err(faulting address)` instead of a kernel trap.
pub fn copy_from_user(dst: &mut [u8], src: usize) -> Result<(), usize> {
    // SAFETY: setting SUM lets S-mode loads reach U pages; it is cleared again below, and every
    // load goes through a probe, so an unmapped page yields an error, not a trap.
    unsafe { core::arch::asm!("csrs sstatus, {0}", in(reg) SSTATUS_SUM) };
    let mut result = Ok(());
    for (i, byte) in dst.iter_mut().enumerate() {
        match probe::read_u8(src + i) {
            Some(b) => *byte = b,
            None => {
                result = Err(src + i);
                break;
            }
        }
    }
    // SAFETY: clears SUM again.
    unsafe { core::arch::asm!("csrc sstatus, {0}", in(reg) SSTATUS_SUM) };
    result
}
