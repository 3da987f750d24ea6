//! The arch contract: what the portable kernel needs from an architecture to run domains, in
//! arch-neutral terms. The traits and types are the kernel core's
//! ([`kernel_core::contract`]); the kernel's platform ([`crate::domain::Machine`]) hands the
//! arch items below to the core.
//!
//! The portable kernel (`kernel/src/` outside `arch/`) names no architecture. It sees a
//! domain's registers only through [`UserContextOps`], a protection domain only through
//! [`AddressSpaceOps`], and a trap from user mode as a [`UserTrap`], its faults typed as
//! [`UserFault`]; it tells the trap path what to resume with a [`Resume`]. Each architecture
//! module implements the traits for its `UserContext` and `AddressSpace` and provides the
//! free items the table in [`super`] lists; `const` checks at the end of this file make the
//! compiler hold every architecture to the same signatures.
//!
//! What is implemented: RISC-V (Sv39 with ASIDs, `ecall`, the `sstatus` FP state, the SBI
//! timer) and x86_64 (4-level tables with PCIDs where CPUID reports them, `UserContext` with
//! `syscall`, `sysretq` and `iretq`, the lazily restored FXSAVE state, copies from user memory
//! under SMAP, the local APIC timer); both run domains.

pub use kernel_core::contract::{
    AddressSpaceOps, BATCH_PAGE_FLUSHES, DEFERRED, DeferredFlush, Resume, UserContextOps,
    UserFault, UserTrap,
};

// The free items every architecture provides, with the signatures the portable kernel uses.
const _: &str = super::NAME;
const _: fn(&[u8]) = super::console::write;
const _: fn() -> bool = super::interrupts::disable;
const _: fn(bool) = super::interrupts::restore;
const _: fn() -> u64 = super::time::now_ticks;
const _: fn() -> u64 = super::time::now_us;
const _: fn(crate::ExitCode) -> ! = super::exit;
const _: fn(&crate::BootInfo) = super::init_platform;
const _: fn(u64) -> usize = super::phys_to_virt;
const _: fn() = super::wait_for_interrupt;
const _: fn(&mut dyn FnMut(usize)) = super::backtrace;
const _: fn() -> u64 = super::time::frequency;
const _: fn(u64) = super::timer::arm;
const _: fn() = super::timer::disarm;
const _: fn() = super::timer::quiesce;
const _: fn(usize) -> u64 = super::virt_to_phys;
const _: fn(u32) -> bool = super::interrupts::enable_line;
const _: fn(u32) = super::interrupts::ack_line;
const _: fn(u32) = super::interrupts::release_line;
const _: fn(u32) -> Option<(u64, u32)> = super::interrupts::msi_message;
const _: core::ops::Range<u32> = super::interrupts::DEVICE_LINES;
const _: fn() = super::interrupts::allow_software;

/// A protection domain's address space, on both architectures.
mod address_space {
    const fn implements<A: super::AddressSpaceOps>() {}
    const _: () = implements::<super::super::AddressSpace>();
}

/// The user-mode items that running domains need, with their signatures, on both
/// architectures.
mod user_items {
    use super::super::{FpState, UserContext};
    use super::UserContextOps;

    const fn implements<C: UserContextOps>() {}
    const _: () = implements::<UserContext>();
    const _: fn(&mut UserContext, &mut FpState) = super::super::save_fp;
    const _: fn(&mut UserContext, &FpState) = super::super::restore_fp;
    const _: fn(core::ptr::NonNull<UserContext>) -> ! = super::super::enter_user;
    const _: fn(&mut [u64], usize) -> Result<(), usize> = super::super::copy_words_from_user;
    const _: fn(&mut [u8], usize) -> Result<(), usize> = super::super::copy_from_user;
    const _: fn(&[u8], usize) -> Result<(), usize> = super::super::copy_to_user;
}
