//! `cargo xtask fuzz [TARGET] [--seconds N] [--seed S]`: the host fuzz targets run for longer
//! than the suite runs them. Each target is an ignored test that fuzzes for the seconds and
//! from the seed its environment gives, in a release build, and fails on the first input that
//! breaks it; the suite runs the same targets bounded (rpp's decoder 300,000 inputs, the
//! kernel's dispatch 20,000 calls). Every target is run in turn unless one is named.

use anyhow::{Result, bail};
use tool_base::util;

/// One fuzz target: its name on the command line, what it fuzzes, and the ignored test that
/// runs it for longer.
#[derive(Debug)]
pub struct Target {
    /// Its name (`cargo xtask fuzz NAME`).
    pub name: &'static str,
    /// What it fuzzes.
    pub what: &'static str,
    /// The package, and the test target's arguments to `cargo test` (`--lib` or `--test X`).
    package: &'static str,
    tests: &'static [&'static str],
    /// The ignored test's name, and the environment variables it reads for its seconds and
    /// its seed.
    test: &'static str,
    seconds_var: &'static str,
    seed_var: &'static str,
}

/// Every fuzz target in the tree.
pub const TARGETS: [Target; 2] = [
    Target {
        name: "rpp",
        what: "the remote paging protocol's decoder, a server and a client with operations in \
               flight, fed mutated valid packets",
        package: "rpp",
        tests: &["--test", "wire"],
        test: "fuzz_decoder_long",
        seconds_var: "RPP_FUZZ_SECONDS",
        seed_var: "RPP_FUZZ_SEED",
    },
    Target {
        name: "syscalls",
        what: "the kernel's system-call dispatch on the mock machine, rounds of 20,000 calls \
               of random numbers and arguments, every frame back after death",
        package: "kernel_core",
        tests: &["--lib"],
        test: "fuzzed_calls_long",
        seconds_var: "KERNEL_FUZZ_SECONDS",
        seed_var: "KERNEL_FUZZ_SEED",
    },
];

/// The targets `name` names: that one, or every one without a name.
pub fn chosen(name: Option<&str>) -> Result<Vec<&'static Target>> {
    match name {
        None => Ok(TARGETS.iter().collect()),
        Some(n) => match TARGETS.iter().find(|t| t.name == n) {
            Some(t) => Ok(vec![t]),
            None => {
                let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
                bail!("no fuzz target `{n}`: the targets are {}", names.join(", "))
            }
        },
    }
}

/// Runs the targets `name` names for `seconds` each from `seed`; 0 when none failed, 1 naming
/// those that did.
pub fn run(name: Option<&str>, seconds: u64, seed: u64) -> Result<u8> {
    if seconds == 0 {
        bail!("--seconds must be at least 1");
    }
    let mut failed = Vec::new();
    for t in chosen(name)? {
        eprintln!("fuzz {}: {} for {seconds} s from seed {seed}", t.name, t.what);
        let status = util::cargo()
            .args(["test", "--release", "-p", t.package])
            .args(t.tests)
            .args([t.test, "--", "--ignored", "--nocapture"])
            .env(t.seconds_var, seconds.to_string())
            .env(t.seed_var, seed.to_string())
            .status()?;
        if !status.success() {
            failed.push(t.name);
        }
    }
    if failed.is_empty() {
        Ok(0)
    } else {
        eprintln!("fuzz: failed: {}", failed.join(", "));
        Ok(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_chosen_by_its_name_or_all_are() {
        let names =
            |n: Option<&str>| -> Vec<&str> { chosen(n).unwrap().iter().map(|t| t.name).collect() };
        assert_eq!(names(None), ["rpp", "syscalls"]);
        assert_eq!(names(Some("syscalls")), ["syscalls"]);
        let e = chosen(Some("rp")).unwrap_err().to_string();
        assert_eq!(e, "no fuzz target `rp`: the targets are rpp, syscalls");
        assert!(run(Some("rpp"), 0, 1).is_err(), "0 seconds");
    }

    #[test]
    fn every_target_names_an_ignored_test_that_reads_its_variables() {
        for t in &TARGETS {
            let file = match t.package {
                "rpp" => "libs/rpp/tests/wire.rs",
                "kernel_core" => "kernel/core/src/tests.rs",
                other => panic!("a target of an unknown package {other}"),
            };
            let text = std::fs::read_to_string(util::root().join(file)).unwrap();
            let at = text.find(&format!("fn {}()", t.test)).unwrap_or_else(|| panic!("{}", t.test));
            let before = &text[..at];
            let attributes = &before[before.rfind("\n\n").unwrap()..];
            assert!(attributes.contains("#[ignore]"), "{} is not ignored", t.test);
            let body = &text[at..];
            let body = &body[..body.find("\n}\n").unwrap()];
            for var in [t.seconds_var, t.seed_var] {
                assert!(body.contains(&format!("\"{var}\"")), "{} does not read {var}", t.test);
            }
        }
    }
}
