//! The labs' QEMU tests (`labs/NAME/lab.toml`, `docs/labs/`): each lab with one keeps it in
//! `labs/NAME.rs` as `qemu_tests(arch)`, named `qemu::riscv64::lab_NAME_...`; the labs grade
//! on riscv64. Most labs are graded by host tests only.

use crate::harness::QemuTest;
use tool_base::Arch;

mod swap;

/// Every lab's QEMU tests for `arch`.
pub(crate) fn qemu_tests(arch: Arch) -> Vec<QemuTest> {
    let mut tests = Vec::new();
    tests.extend(swap::qemu_tests(arch));
    tests
}
