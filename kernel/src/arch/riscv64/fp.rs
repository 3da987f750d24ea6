//! Domains' floating-point state, restored lazily.
//!
//! The FP registers (`f0..f31`, `fcsr`) hold one domain's state at a time: the *holder*'s
//! (the loaded block of [`HOLDER`], a [`FpHolder`] shared by the architectures). When the portable kernel switches to a domain ([`restore_fp`]):
//! - if the domain is the holder, its frame resumes with `sstatus.FS` = Clean and nothing is
//!   loaded;
//! - otherwise its frame resumes with FS = Off, and nothing is loaded either. Its first FP
//!   instruction (or `fcsr` access) then traps as an illegal instruction; [`on_first_use`]
//!   loads its state, makes it the holder, sets FS = Clean in its frame and returns to the same
//!   instruction, which now runs. An instruction that is illegal for another reason traps again
//!   with FS on and is reported like any illegal instruction.
//!
//! When a domain stops running with FS = Dirty (it changed its FP registers), [`save_fp`]
//! stores them at once, so the holder's state is always saved before another domain's can be
//! loaded over it: [`on_first_use`] never has anything to save first. A domain that never
//! touches the FP unit costs a switch neither loads nor stores.
//!
//! A domain's saved state lives in its own heap block ([`FpState`] owns it), so it keeps its
//! address while the portable kernel moves the `FpState` around; [`HOLDER`] names blocks by
//! address, and a block's owner makes it forget the block when it is dropped.

use alloc::boxed::Box;

use crate::arch::fp_holder::FpHolder;

use riscv::register::sstatus::{self, FS};

use super::frame::TrapFrame;

const SSTATUS_FS: usize = 3 << 13;
const FS_OFF: usize = 0;
const FS_CLEAN: usize = 2 << 13;
const FS_DIRTY: usize = 3 << 13;

/// The saved registers: 32 doubles, then `fcsr` (the layout the assembly below uses).
#[repr(C)]
#[derive(Clone, Default)]
struct Registers {
    f: [u64; 32],
    fcsr: u64,
}

/// A domain's floating-point registers (`f0..f31`) and `fcsr`, saved while they are not in the
/// FP unit. A new one holds zeros; a clone has its own block, so it is never the holder.
#[derive(Clone, Default)]
pub struct FpState(Box<Registers>);

impl Drop for FpState {
    fn drop(&mut self) {
        HOLDER.forget(self.block());
    }
}

impl FpState {
    fn block(&self) -> *mut Registers {
        &*self.0 as *const Registers as *mut Registers
    }
}

/// Whose state the FP registers hold, and whose domain runs.
static HOLDER: FpHolder<Registers> = FpHolder::new();

/// How many times a domain's state was loaded on first use since boot.
pub fn loads() -> u64 {
    HOLDER.loads()
}

/// Called when the domain that ran in `frame` stops running: saves its FP registers into `fp`
/// if it changed them since they were loaded (`sstatus.FS` is Dirty), and marks them Clean.
/// `fp` is the state [`restore_fp`] was last given for this domain.
pub fn save_fp(frame: &mut TrapFrame, fp: &mut FpState) {
    if frame.sstatus & SSTATUS_FS != FS_DIRTY {
        return;
    }
    let p = &mut *fp.0 as *mut Registers as usize;
    // SAFETY: FS is Dirty, so the FP unit is on (the hart's `sstatus.FS` is still the domain's);
    // `p` points at a writable `Registers` whose layout (32 doubles, then fcsr) matches the
    // stores.
    unsafe {
        core::arch::asm!(
            "fsd f0, 0({p})", "fsd f1, 8({p})", "fsd f2, 16({p})", "fsd f3, 24({p})",
            "fsd f4, 32({p})", "fsd f5, 40({p})", "fsd f6, 48({p})", "fsd f7, 56({p})",
            "fsd f8, 64({p})", "fsd f9, 72({p})", "fsd f10, 80({p})", "fsd f11, 88({p})",
            "fsd f12, 96({p})", "fsd f13, 104({p})", "fsd f14, 112({p})", "fsd f15, 120({p})",
            "fsd f16, 128({p})", "fsd f17, 136({p})", "fsd f18, 144({p})", "fsd f19, 152({p})",
            "fsd f20, 160({p})", "fsd f21, 168({p})", "fsd f22, 176({p})", "fsd f23, 184({p})",
            "fsd f24, 192({p})", "fsd f25, 200({p})", "fsd f26, 208({p})", "fsd f27, 216({p})",
            "fsd f28, 224({p})", "fsd f29, 232({p})", "fsd f30, 240({p})", "fsd f31, 248({p})",
            "frcsr {t}", "sd {t}, 256({p})",
            p = in(reg) p, t = out(reg) _,
            options(nostack),
        );
    }
    frame.sstatus = (frame.sstatus & !SSTATUS_FS) | FS_CLEAN;
}

/// Called when the domain whose state is `fp` is about to resume with `frame`: if the FP
/// registers hold `fp` already, the domain resumes with them (FS Clean); otherwise with the FP
/// unit off (FS Off), and its state is loaded when it first uses the unit ([`on_first_use`]).
/// Either way it sees its own values, never another domain's.
pub fn restore_fp(frame: &mut TrapFrame, fp: &FpState) {
    let fs = if HOLDER.switch_to(fp.block()) { FS_CLEAN } else { FS_OFF };
    frame.sstatus = (frame.sstatus & !SSTATUS_FS) | fs;
}

/// For an illegal-instruction trap from U-mode: if the running domain's FP unit was off
/// because its state is not loaded, loads it, turns the unit on (FS Clean) in `frame` and
/// returns `true`: the instruction runs again when the domain resumes. `false`: the
/// instruction is illegal in its own right.
#[inline(never)]
pub fn on_first_use(frame: &mut TrapFrame) -> bool {
    if frame.sstatus & SSTATUS_FS != FS_OFF {
        return false;
    }
    let Some(current) = HOLDER.current() else { return false };
    // SAFETY: `current` is the block of the running domain's `FpState`, set by `restore_fp`
    // when the domain was switched to; the `FpState` is alive (its drop would have cleared
    // it as current) and, because the block is on the heap, still at that address wherever the
    // `FpState` itself went. Nothing else uses it while this trap handler runs.
    let regs = unsafe { &*current };
    load(regs);
    HOLDER.loaded(current);
    frame.sstatus = (frame.sstatus & !SSTATUS_FS) | FS_CLEAN;
    true
}

/// Loads `regs` into the FP registers.
fn load(regs: &Registers) {
    // SAFETY: turning the FP unit on in the kernel's own `sstatus` lets the loads below run;
    // the domain's FS comes back from its frame on `sret`, and the kernel itself never uses
    // the FP registers.
    unsafe { sstatus::set_fs(FS::Initial) };
    let p = regs as *const Registers as usize;
    // SAFETY: the FP unit is on; `p` points at a readable `Registers` whose layout matches the
    // loads.
    unsafe {
        core::arch::asm!(
            "fld f0, 0({p})", "fld f1, 8({p})", "fld f2, 16({p})", "fld f3, 24({p})",
            "fld f4, 32({p})", "fld f5, 40({p})", "fld f6, 48({p})", "fld f7, 56({p})",
            "fld f8, 64({p})", "fld f9, 72({p})", "fld f10, 80({p})", "fld f11, 88({p})",
            "fld f12, 96({p})", "fld f13, 104({p})", "fld f14, 112({p})", "fld f15, 120({p})",
            "fld f16, 128({p})", "fld f17, 136({p})", "fld f18, 144({p})", "fld f19, 152({p})",
            "fld f20, 160({p})", "fld f21, 168({p})", "fld f22, 176({p})", "fld f23, 184({p})",
            "fld f24, 192({p})", "fld f25, 200({p})", "fld f26, 208({p})", "fld f27, 216({p})",
            "fld f28, 224({p})", "fld f29, 232({p})", "fld f30, 240({p})", "fld f31, 248({p})",
            "ld {t}, 256({p})", "fscsr {t}",
            p = in(reg) p, t = out(reg) _,
            options(nostack, readonly),
        );
    }
}
