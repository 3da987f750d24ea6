//! The QEMU tests of the course labs (`labs/NAME/lab.toml`, `docs/labs/`), named
//! `qemu::riscv64::lab_NAME_...`: each lab's in its own module, for what only a real boot
//! shows (the labs' other tests run on the host); the labs grade on riscv64.

use tool_base::Arch;

use crate::harness::QemuTest;

mod clock;

/// Every lab's QEMU tests on `arch`.
pub(crate) fn qemu_tests(arch: Arch) -> Vec<QemuTest> {
    let mut tests = Vec::new();
    tests.extend(clock::qemu_tests(arch));
    tests
}
