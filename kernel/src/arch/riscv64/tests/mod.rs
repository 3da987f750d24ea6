//! The kernel tests only RISC-V has, and what the portable tests need from its page tables.
//!
//! [`KERNEL_TESTS`] lists the tests of ASID recycling (`paging::asid_recycling`) and of the
//! SBI console (`sbi::console`); `crate::tests` runs them with the portable ones. RISC-V has no
//! deliberate faults of its own ([`FAULTS`] is empty).

use crate::ktest::KernelTest;

mod asid;
mod sbi;

/// The kernel tests of this architecture alone.
pub const KERNEL_TESTS: &[KernelTest] = &[
    KernelTest { name: "paging::asid_recycling", run: asid::recycling },
    KernelTest { name: "sbi::console", run: sbi::console },
];

/// The deliberate faults of this architecture alone, by kind: none.
pub const FAULTS: &[(&str, fn())] = &[];

/// The rights and the flush of the kernel's page tables (Sv39), as the portable `paging::`
/// tests use them.
pub mod kernel_pages {
    pub use crate::arch::sv39::{MapError, flush};
    use crate::arch::sv39::{PTE_R, PTE_W};
    /// Rights of a read-write kernel data page.
    pub const READ_WRITE: u64 = PTE_R | PTE_W;
    /// Rights of a read-only kernel data page.
    pub const READ_ONLY: u64 = PTE_R;
}
