//! The lab `clock` on the machine: `heracles` runs matmul in a stretch paged by the paged
//! driver under the clock, harvesting the accessed bits every 32 evictions
//! (`labs/clock/matmul-harvest.toml`, the chapter's run). Every byte of its result must be
//! right (the checksum the host computes) and the faults exactly the reference clock's.

use qemu_run::qemu::{Boot, Ending};
use system_image::system::Spoil;
use tool_base::Arch;

use crate::harness::{QemuTest, expect_ending, expect_exit};

const MANIFEST: &str = "labs/clock/matmul-harvest.toml";
/// matmul's checksum at the default scale with seed 1, as the host computes it
/// (`paging_programs`; `cargo xtask bench paging` checks its runs against the same).
const CHECKSUM: &str = "checksum=0x297b0387cc19f2f3";
/// The faults of the run under the reference clock (`docs/labs/clock.md`); FIFO takes 4,121.
const FAULTS: u64 = 2447;

pub(crate) fn qemu_tests(arch: Arch) -> Vec<QemuTest> {
    if arch != Arch::Riscv64 {
        return Vec::new();
    }
    let mut boot = Boot::new(arch);
    // Virtual time: the run is the same on every host.
    boot.icount = true;
    vec![QemuTest {
        name: format!("qemu::{}::lab_clock_matmul_harvest", arch.name()),
        boot,
        system: Some((MANIFEST.into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            let sum = out.line("heracles: matmul checksum=").ok_or(
                "matmul did not finish: look for the pager domain's report (a panic in the \
                 clock, or a fault the driver could not serve) in the log",
            )?;
            if !sum.message.contains(CHECKSUM) {
                return Err(format!(
                    "matmul's result is wrong: `{}`, want {CHECKSUM}: the paging lost or mixed \
                     up pages (did the clock choose a page that was not resident?)",
                    sum.message
                ));
            }
            let done = out
                .line("heracles: done program=matmul")
                .ok_or("no `heracles: done` line with the run's counts")?;
            let faults = done
                .message
                .split_whitespace()
                .find_map(|w| w.strip_prefix("faults=")?.parse::<u64>().ok())
                .ok_or(format!("no faults= in `{}`", done.message))?;
            if faults != FAULTS {
                return Err(format!(
                    "matmul took {faults} faults under your clock; the reference clock, told of \
                     the accessed bits every 32 evictions, takes exactly {FAULTS} (FIFO 4121)"
                ));
            }
            expect_exit(out, "pager", 0)
        }),
    }]
}
