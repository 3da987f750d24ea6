//! The QEMU tests of the course labs (`labs/NAME/lab.toml`), named `qemu::ARCH::lab_NAME_...`:
//! each lab's in its own module, for what only a real boot shows (the labs' other tests run
//! on the host). Their checks, `host::labs::NAME`, are `lab_grader::check_lab`.

use tool_base::Arch;

use crate::harness::QemuTest;

mod clock;
mod swap;
mod syscall;

/// Every lab's QEMU tests on `arch`.
pub(crate) fn qemu_tests(arch: Arch) -> Vec<QemuTest> {
    let mut tests = Vec::new();
    tests.extend(syscall::qemu_tests(arch));
    tests.extend(clock::qemu_tests(arch));
    tests.extend(swap::qemu_tests(arch));
    tests
}
