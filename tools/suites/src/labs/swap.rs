//! The swap lab's QEMU test (`docs/labs/swap.md`): the swap driver in a domain.

use crate::harness::{QemuTest, expect_ending, expect_exit};
use qemu_run::log::field;
use qemu_run::qemu::{Boot, Ending, Outcome};
use system_image::system::Spoil;
use tool_base::Arch;

/// `qemu::riscv64::lab_swap_in_a_domain`: `swapdemo` (`tests/manifests/labs/swap.toml`) pages a
/// stretch of 32 pages on the driver's 8 frames, writes every word and reads it back: every
/// word right, and the counts of a first-in-first-out driver over two sweeps (64 faults, seen
/// by the driver and by the kernel, 56 evictions, 32 swap-ins).
pub(crate) fn qemu_tests(arch: Arch) -> Vec<QemuTest> {
    if arch != Arch::Riscv64 {
        return Vec::new();
    }
    vec![QemuTest {
        name: format!("qemu::{}::lab_swap_in_a_domain", arch.name()),
        boot: Boot::new(arch),
        system: Some(("tests/manifests/labs/swap.toml".into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(in_a_domain),
    }]
}

fn in_a_domain(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let Some(line) = out.line("swapdemo: ok ").map(|l| l.message.as_str()) else {
        // The app's own report of what went wrong, if it made one.
        let report =
            ["swapdemo: page ", "swapdemo: bind failed", "swapdemo: the driver", "panicked at"]
                .iter()
                .find_map(|t| out.line(t))
                .map_or("no report: did the domain end in a fault?", |l| l.message.as_str());
        return Err(format!("swapdemo printed no `ok` line: {report}"));
    };
    let want = [
        ("pages", 32),
        ("frames", 8),
        ("faults", 64),
        ("kernel_faults", 64),
        ("evictions", 56),
        ("swap_ins", 32),
    ];
    for (k, v) in want {
        if field(line, k) != Some(v) {
            return Err(format!("{k} should be {v} (the reference driver's): {line}"));
        }
    }
    expect_exit(out, "swapdemo", 0)
}
