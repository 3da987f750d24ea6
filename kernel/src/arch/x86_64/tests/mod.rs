//! The kernel tests only x86_64 has, and what the portable tests need from its page tables.
//!
//! [`KERNEL_TESTS`] lists the tests of the page-table rights (NX, SMEP, SMAP), of user mode
//! through the GDT and TSS, of user mode for domains (`syscall`, contexts, lazy FP state, copies
//! from user memory), of mappings read through a running address space and the PCID gate, and
//! of the local APIC timer; `crate::tests` runs them with the portable ones, under the same
//! names as ever (`paging::`, `traps::`, `space::`, `user::`, `timer::`). [`FAULTS`] are the
//! deliberate faults (`fault=KIND`) only this architecture commits.

use crate::ktest::KernelTest;

mod paging;
mod space;
mod timer;
mod traps;
mod user;

/// The kernel tests of this architecture alone.
pub const KERNEL_TESTS: &[KernelTest] = &[
    KernelTest { name: "paging::image_rights", run: paging::image_rights },
    KernelTest { name: "paging::smep_smap", run: paging::smep_smap },
    KernelTest { name: "traps::user_round_trip", run: traps::user_round_trip },
    KernelTest { name: "traps::unexpected_interrupt", run: traps::unexpected_interrupt },
    KernelTest { name: "space::map_protect_unmap", run: space::map_protect_unmap },
    KernelTest { name: "space::switching", run: space::switching },
    KernelTest { name: "user::syscall_round_trip", run: user::syscall_round_trip },
    KernelTest { name: "user::restart_call", run: user::restart_call },
    KernelTest { name: "user::iret_keeps_every_register", run: user::iret_keeps_every_register },
    KernelTest { name: "user::faults_and_timer", run: user::faults_and_timer },
    KernelTest { name: "user::fp_lazy_restore", run: user::fp_lazy_restore },
    KernelTest { name: "user::copy_from_user", run: user::copy_from_user },
    KernelTest { name: "user::load_words_sanitizes", run: user::load_words_sanitizes },
    KernelTest { name: "user::user_ac_does_not_open_smap", run: user::user_ac_does_not_open_smap },
    KernelTest { name: "timer::apic_calibration", run: timer::apic_calibration },
];

/// The deliberate faults of this architecture alone, by kind: `ud2` and `int3` in the kernel.
pub const FAULTS: &[(&str, fn())] = &[
    ("illegal-instruction", super::trap::illegal_instruction),
    ("breakpoint", super::trap::breakpoint),
];

/// The rights and the flush of the kernel's page tables, as the portable `paging::` tests use
/// them.
pub mod kernel_pages {
    use crate::arch::paging::PageTableFlags as F;
    pub use crate::arch::paging::{MapError, flush};
    /// Rights of a read-write kernel data page.
    pub const READ_WRITE: F = F::WRITABLE.union(F::NO_EXECUTE);
    /// Rights of a read-only kernel data page.
    pub const READ_ONLY: F = F::NO_EXECUTE;
}
