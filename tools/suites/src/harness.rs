//! What every QEMU test is made of: a [`QemuTest`] (a boot, the manifest it runs, the kernel
//! ERROR and WARN lines it may show, and its check) and the checks the tests share, which read
//! the boot's [`Outcome`]: its ending, a line of its decoded log, or a domain's ending from the
//! kernel's run summary records ([`expect_domain`]).

use qemu_run::expected::Expected;
use qemu_run::qemu::{Boot, Ending, Outcome};
use qemu_run::run::verdict::{self, DomainEnding};
use system_image::system::Spoil;

// ANCHOR: qemu_test
pub(crate) type Check = Box<dyn Fn(&Outcome) -> Result<(), String>>;

/// A QEMU test: one boot and what its log and ending must show.
pub(crate) struct QemuTest {
    pub(crate) name: String,
    pub(crate) boot: Boot,
    /// A manifest whose domains the boot runs (relative to the workspace), and how to spoil it.
    pub(crate) system: Option<(String, Spoil)>,
    /// The kernel's `ERROR` and `WARN` lines the boot may show; any other fails the test.
    pub(crate) expected: Expected,
    pub(crate) check: Check,
}
// ANCHOR_END: qemu_test

/// The last `n` lines of `text`.
pub(crate) fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

// ANCHOR: expect
pub(crate) fn expect_ending(out: &Outcome, want: Ending) -> Result<(), String> {
    if out.ending == want {
        Ok(())
    } else {
        let tail: Vec<_> = out.log.iter().rev().take(8).map(|l| l.to_string()).collect();
        Err(format!(
            "expected {want:?}, got {:?}; last lines:\n{}",
            out.ending,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ))
    }
}

pub(crate) fn expect_line(out: &Outcome, text: &str) -> Result<(), String> {
    if out.has(text) { Ok(()) } else { Err(format!("no log line contains `{text}`")) }
}
// ANCHOR_END: expect

/// Checks how domain `name` ended by the kernel's run summary: the typed record of each domain
/// after `run summary:` ([`verdict::endings`]), not a line of text anywhere in the log.
pub(crate) fn expect_domain(out: &Outcome, name: &str, want: DomainEnding) -> Result<(), String> {
    match verdict::endings(&out.log).into_iter().find(|(n, _)| n == name) {
        Some((_, ending)) if ending == want => Ok(()),
        Some((_, ending)) => {
            Err(format!("the run summary says {name} ended {ending:?}, want {want:?}"))
        }
        None => Err(format!("the run summary has no record of {name} (want {want:?})")),
    }
}

/// [`expect_domain`]: `name` exited with `status`.
pub(crate) fn expect_exit(out: &Outcome, name: &str, status: i32) -> Result<(), String> {
    expect_domain(out, name, DomainEnding::Exited(status))
}

/// [`expect_domain`]: `name` was terminated, for the reason `why`.
pub(crate) fn expect_terminated(out: &Outcome, name: &str, why: &str) -> Result<(), String> {
    expect_domain(out, name, DomainEnding::Terminated(why.to_string()))
}
