//! The in-kernel test runner.
//!
//! A kernel test is a plain function returning [`Outcome`]; the list lives in `ALL` in
//! [`crate::tests`] (the portable tests and the architecture's `arch::tests::KERNEL_TESTS`). The command line selects tests (`test=all`, `test=a,b`), the runner
//! reports each as a defmt record (`test NAME ... ok` / `... FAILED`) and the run's verdict
//! becomes the QEMU exit status, which `cargo xtask test` reads.

use crate::ExitCode;

/// A test's result: `Err` carries nothing because the failing check has already logged why.
pub type Outcome = Result<(), Failed>;

/// Marker for a failed test.
#[derive(Debug)]
pub struct Failed;

/// A registered kernel test.
pub struct KernelTest {
    /// Name, `module::what` (reported as `qemu::kernel::NAME` by xtask).
    pub name: &'static str,
    /// The test body.
    pub run: fn() -> Outcome,
}

/// Fails the current test with a logged message when `cond` is false.
#[macro_export]
macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            defmt::error!("check failed: {=str}", stringify!($cond));
            defmt::error!($($msg)+);
            return Err($crate::ktest::Failed);
        }
    };
}

/// Runs the tests named by `selection` from the lists `lists`, in their order.
pub fn run(lists: &[&[KernelTest]], selection: &str) -> ExitCode {
    let tests = || lists.iter().flat_map(|l| l.iter());
    if selection == "list" {
        for t in tests() {
            defmt::info!("test available: {=str}", t.name);
        }
        return ExitCode::Success;
    }
    let mut passed = 0usize;
    let mut failed = 0usize;
    for name in selection.split(',') {
        let chosen = tests().filter(|t| name == "all" || t.name == name);
        let mut found = false;
        for t in chosen {
            found = true;
            defmt::info!("test {=str} ...", t.name);
            match (t.run)() {
                Ok(()) => {
                    passed += 1;
                    defmt::info!("test {=str} ... ok", t.name);
                }
                Err(Failed) => {
                    failed += 1;
                    defmt::error!("test {=str} ... FAILED", t.name);
                }
            }
        }
        if !found {
            failed += 1;
            defmt::error!("test {=str} ... FAILED (no such test)", name);
        }
    }
    defmt::info!("kernel tests: {=usize} passed, {=usize} failed", passed, failed);
    if failed == 0 { ExitCode::Success } else { ExitCode::TestFailure }
}
