//! The machine-mode CSRs the firmware reads and writes, through the `riscv` crate's register
//! modules (`menvcfg`, which the crate lacks, by number).
//!
//! Every function here runs in M-mode (the firmware never leaves it except through `mret`), where
//! all of these CSRs exist on QEMU's `rv64` CPU. Reading a CSR has no side effects.

use core::arch::asm;

use riscv::register::{
    mcause, mcounteren, medeleg, mepc, mhartid, mideleg, mie, mip, mstatus, mtval, pmpaddr0,
    pmpcfg0,
};
/// Supervisor software interrupt (`mip`/`mie`/`mideleg` bit).
const SSIP: usize = 1 << 1;
/// Supervisor timer interrupt (`mip`/`mie`/`mideleg` bit).
const STIP: usize = 1 << 5;
/// Supervisor external interrupt (`mip`/`mie`/`mideleg` bit).
const SEIP: usize = 1 << 9;
/// The machine timer interrupt enable (`mie.MTIE`).
const MTIE: usize = 1 << 7;

/// The exceptions the kernel handles itself: instruction, load and store/AMO misaligned and
/// access faults, illegal instruction, breakpoint, `ecall` from U-mode, and the three page faults.
const DELEGATED_EXCEPTIONS: usize = (1 << 0)
    | (1 << 1)
    | (1 << 2)
    | (1 << 3)
    | (1 << 4)
    | (1 << 5)
    | (1 << 6)
    | (1 << 7)
    | (1 << 8)
    | (1 << 12)
    | (1 << 13)
    | (1 << 15);

/// A privilege mode as encoded in `mstatus.MPP`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// U-mode (0).
    User,
    /// S-mode (1).
    Supervisor,
    /// M-mode (3).
    Machine,
}

/// Sets up the machine for a supervisor: PMP entry 0 grants S/U-mode read, write and execute
/// on all of memory, the supervisor's interrupts and usual exceptions are delegated to it, all
/// counters are readable from S-mode and S-mode may program its own timer (`stimecmp`, where the
/// hart has Sstc). The machine timer interrupt stays masked until the supervisor sets a timer
/// ([`set_mtie`]; it is only taken while the hart is in S- or U-mode, where M-mode interrupts
/// are always on).
pub fn init_machine() {
    // SAFETY: M-mode CSR writes that only widen what S/U-mode may do (PMP, counters) or pick who
    // handles which trap; the firmware's own code and data are not affected (PMP does not apply
    // to M-mode without a locked entry, and no entry is locked). `sfence.vma` after the PMP
    // change is what the privileged spec asks for; it has no other effect here (satp is 0).
    unsafe {
        // NAPOT over 2^56 bytes: everything.
        pmpaddr0::write(usize::MAX >> 10);
        // R | W | X | A=NAPOT.
        pmpcfg0::write(0x1f);
        riscv::asm::sfence_vma_all();
        medeleg::write(medeleg::Medeleg::from_bits(DELEGATED_EXCEPTIONS));
        mideleg::write(mideleg::Mideleg::from_bits(SSIP | STIP | SEIP));
        mcounteren::write(mcounteren::Mcounteren::from_bits(usize::MAX));
        mie::write(mie::Mie::from_bits(0));
    }
    // SAFETY: menvcfg.STCE lets S-mode use `stimecmp` (Sstc); where Sstc is absent the bit is
    // ignored. The `riscv` crate has no `menvcfg` register, hence the CSR by number.
    unsafe { asm!("csrs 0x30a, {stce}", stce = in(reg) 1usize << 63, options(nomem, nostack)) };
}

/// Makes the next `mret` enter S-mode at `entry` with `mstatus.MIE` staying 0.
pub fn prepare_mret_to_supervisor(entry: usize) {
    // SAFETY: sets `mepc` and `mstatus.MPP = S`, `MPIE = 0`; these only matter to the next
    // `mret`, and M-mode keeps running with interrupts off (`MIE` is untouched and 0).
    unsafe {
        mepc::write(entry);
        let mut status = mstatus::read();
        status.set_mpie(false);
        status.set_mpp(mstatus::MPP::Supervisor);
        mstatus::write(status);
    }
}

/// This hart's id.
pub fn mhartid() -> usize {
    mhartid::read()
}

/// Why the current trap was taken.
pub fn mcause() -> usize {
    mcause::read().bits()
}

/// Where the current trap was taken (and where `mret` returns to).
pub fn mepc() -> usize {
    mepc::read()
}

/// The faulting address or instruction of the current trap, if the cause sets one.
pub fn mtval() -> usize {
    mtval::read()
}

/// The privilege mode the current trap came from.
pub fn previous_mode() -> Mode {
    match mstatus::read().mpp() {
        mstatus::MPP::User => Mode::User,
        mstatus::MPP::Supervisor => Mode::Supervisor,
        mstatus::MPP::Machine => Mode::Machine,
    }
}

/// Sets where `mret` returns to.
pub fn set_mepc(pc: usize) {
    // SAFETY: `mepc` only matters to the next `mret`; the trap handler sets it to the
    // instruction after the supervisor's `ecall`, which is where the supervisor expects to go on.
    unsafe { mepc::write(pc) }
}

/// Unmasks (`on`) or masks the machine timer interrupt (`mie.MTIE`).
pub fn set_mtie(on: bool) {
    // SAFETY: `mie.MTIE` only decides whether the machine timer interrupt, which the firmware
    // handles by raising the supervisor's, is taken.
    unsafe {
        if on {
            asm!("csrs mie, {0}", in(reg) MTIE, options(nomem, nostack));
        } else {
            asm!("csrc mie, {0}", in(reg) MTIE, options(nomem, nostack));
        }
    }
}

/// Raises the supervisor timer interrupt (`mip.STIP`); it stays pending until
/// [`clear_stip`].
pub fn set_stip() {
    // SAFETY: `mip.STIP` is writable from M-mode (Sstc is off) and only makes the delegated
    // supervisor timer interrupt pending, which is what the SBI timer promises.
    unsafe { mip::set_stimer() }
}

/// Withdraws the supervisor timer interrupt (`mip.STIP`).
pub fn clear_stip() {
    // SAFETY: as for `set_stip`; clearing it is what SBI `set_timer` does before arming.
    unsafe { mip::clear_stimer() }
}
