//! The lab `syscall` on the machine: `syscheck` calls `domain_info` and prints the record it
//! got; the record must be its own as the manifest describes it (its name, its identifier,
//! its guarantee in frames), with frames held within it, and the calls with a read-only
//! buffer, a short one and a kernel address must be refused.

use qemu_run::qemu::{Boot, Ending};
use system_image::system::Spoil;
use tool_base::Arch;

use crate::harness::{QemuTest, expect_ending, expect_exit, expect_line};

/// The manifest the test boots, and what it says of `syscheck` (domain 0): 512 KiB
/// guaranteed, no optimistic frames.
const MANIFEST: &str = "tests/manifests/syscheck.toml";
const GUARANTEED_FRAMES: u64 = 512 * 1024 / 4096;

/// The `key=value` words of the record line `syscheck` prints.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

pub(crate) fn qemu_tests(arch: Arch) -> Vec<QemuTest> {
    if arch != Arch::Riscv64 {
        return Vec::new();
    }
    vec![QemuTest {
        name: format!("qemu::{}::lab_syscall_domain_info", arch.name()),
        boot: Boot::new(arch),
        system: Some((MANIFEST.into(), Spoil::Nothing)),
        expected: &[],
        check: Box::new(|out| {
            expect_ending(out, Ending::Kernel(0))?;
            let line = out.line("syscheck: domain_info id=").ok_or(
                "syscheck printed no record: tessera::domain_info() failed (look for \
                 `syscheck: FAILED domain_info` in the log)",
            )?;
            let text = line.message.as_str();
            let number = |key: &str| {
                field(text, key)
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or(format!("the record line has no number `{key}=`: {text}"))
            };
            let want = |what: &str, got: String, want: String| {
                if got == want {
                    Ok(())
                } else {
                    Err(format!("the record's {what} is {got}, want {want} (line: {text})"))
                }
            };
            want("id", number("id")?.to_string(), "0".into())?;
            want("name", field(text, "name").unwrap_or("").into(), "syscheck".into())?;
            want(
                "guaranteed frames",
                number("guaranteed")?.to_string(),
                GUARANTEED_FRAMES.to_string(),
            )?;
            want("optimistic frames", number("optimistic")?.to_string(), "0".into())?;
            let held = number("held")?;
            if held == 0 || held > GUARANTEED_FRAMES {
                return Err(format!(
                    "the record says {held} frames held: a running domain holds some, and no more \
                     than its guarantee of {GUARANTEED_FRAMES} (line: {text})"
                ));
            }
            for what in [
                "domain_info copies this domain's record",
                "domain_info into a read-only buffer",
                "domain_info into a buffer too short",
                "domain_info into the kernel",
            ] {
                expect_line(out, &format!("syscheck: ok {what}")).map_err(|e| {
                    format!("{e} (syscheck's check `{what}` failed or did not run)")
                })?;
            }
            expect_exit(out, "syscheck", 0)
        }),
    }]
}
