//! `qemu::ARCH::run::*`: `cargo xtask run --arch ARCH` itself, as a user runs it: this xtask binary
//! started as a child process, judged by its exit status, its first line and the log it shows.
//!
//! - `default_busy_host`: with both host cores kept busy by spinning threads, the default
//!   manifest runs in virtual time (the first line says so), every contract is kept (no
//!   deadline missed, no period seen late) and each `spin` domain measured its slice in every
//!   period by its own clock, within 10 µs.
//! - `failing_domain_exit_status`: a domain that exits with status 1 makes the run exit with
//!   [`DOMAIN_FAILED`], naming it; `--allow-failures` makes the same run exit 0.
//! - `expected_failure_exits_0`: a fault demo, its faulty domain marked `expect_failure`,
//!   exits 0 while the domain is terminated.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::last_lines;
use crate::cpu;
use crate::expected::Expected;
use crate::log::LogLine;
use crate::qemu::{Ending, Outcome};
use crate::run::verdict::{DOMAIN_FAILED, DomainEnding, endings, late_periods};
use crate::sched::PERIOD_TOLERANCE_NS;
use crate::{Arch, util};

/// What a `cargo xtask run` child did.
struct RunOutput {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

impl RunOutput {
    /// The decoded log on stdout, parsed back from `TIMESTAMP LEVEL MESSAGE` lines (the
    /// level padded to five characters), as a boot's outcome.
    fn outcome(&self) -> Outcome {
        let log = self
            .stdout
            .lines()
            .filter_map(|l| {
                let (timestamp, rest) = l.trim_start().split_once(' ')?;
                let level = rest.get(..5)?.trim().to_string();
                let message = rest.get(6..)?.to_string();
                Some(LogLine { level, timestamp: Some(timestamp.to_string()), message })
            })
            .collect();
        let ending = match self.status {
            Some(0) => Ending::Kernel(0),
            other => Ending::Other(other),
        };
        Outcome { ending, log, stderr: self.stderr.clone(), wall: Duration::ZERO }
    }

    fn describe(&self) -> String {
        format!(
            "exit status {:?}\n--- stdout (last lines)\n{}\n--- stderr\n{}",
            self.status,
            last_lines(&self.stdout, 25),
            last_lines(&self.stderr, 25)
        )
    }
}

/// The `cargo xtask run` children a test started, kept for the harness's check of their logs.
pub(super) struct Children {
    /// The architecture they run.
    arch: Arch,
    /// Each child's decoded log, as a boot's outcome.
    pub(super) outcomes: Vec<Outcome>,
}

impl Children {
    /// No children yet; they will run `arch`.
    pub(super) fn new(arch: Arch) -> Self {
        Children { arch, outcomes: Vec::new() }
    }

    /// Runs this xtask binary as `cargo xtask run --arch ARCH ARGS`.
    fn run(&mut self, args: &[&str]) -> Result<RunOutput, String> {
        let mut all = vec!["--arch", self.arch.name()];
        all.extend_from_slice(args);
        let out = xtask_run(&all)?;
        self.outcomes.push(out.outcome());
        Ok(out)
    }
}

/// Runs this xtask binary as `cargo xtask run ARGS`.
fn xtask_run(args: &[&str]) -> Result<RunOutput, String> {
    let exe = std::env::current_exe().map_err(|e| format!("no xtask binary: {e}"))?;
    let out = Command::new(exe)
        .current_dir(util::root())
        .arg("run")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("could not start xtask run: {e}"))?;
    Ok(RunOutput {
        status: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Keeps every host core busy while it lives.
struct BusyHost {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyHost {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        BusyHost { stop, threads }
    }
}

impl Drop for BusyHost {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One test: a check that runs `cargo xtask run` itself, through `Children`.
type RunTest = fn(&mut Children) -> Result<(), String>;

/// The tests, by name, with the kernel's `ERROR` and `WARN` lines their runs may show.
pub(super) const RUN_TESTS: &[(&str, RunTest, Expected)] = &[
    ("default_busy_host", default_busy_host, &[]),
    ("failing_domain_exit_status", failing_domain_exit_status, &[]),
    ("expected_failure_exits_0", expected_failure_exits_0, super::domains::FAULT_WRITE),
];

fn default_busy_host(children: &mut Children) -> Result<(), String> {
    let out = {
        let _busy = BusyHost::start();
        children.run(&[])?
    };
    let fail = |why: String| Err(format!("{why}\n{}", out.describe()));
    if out.status != Some(0) {
        return fail("the default run did not exit 0".into());
    }
    if !out.stdout.lines().next().unwrap_or("").starts_with("run: deterministic virtual time") {
        return fail("the first line does not say the run is in virtual time".into());
    }
    let run = out.outcome();
    let log = &run.log;
    let accounts = cpu::summary_accounts(&run);
    let reports = cpu::spin_reports(&run);
    let contracted = ["gold", "silver", "bronze"];
    // The domains live until the run summary at the latest: no more periods than fit before it.
    let Some(end_ns) = log
        .iter()
        .find(|l| l.message.starts_with("run summary: "))
        .and_then(|l| l.timestamp.as_deref()?.trim().parse::<f64>().ok())
        .map(|s| (s * 1e9) as u64)
    else {
        return fail("no time on the run summary".into());
    };
    for name in contracted {
        let Some(a) = accounts.iter().find(|a| a.domain == name) else {
            return fail(format!("no CPU accounts for {name}"));
        };
        let Some(r) = reports.iter().find(|r| r.domain == name) else {
            return fail(format!("no spin report from {name}"));
        };
        let most = end_ns / r.period_ns.max(1);
        if a.missed != 0 || !(25..=most).contains(&a.periods) {
            return fail(format!(
                "{name}: {} deadlines missed in {} periods (25..={most} expected)",
                a.missed, a.periods
            ));
        }
    }
    let late = late_periods(log);
    if !late.is_empty() {
        return fail(format!("periods seen late: {late:?}"));
    }
    // Each domain's own clock: its CPU in every complete period is its slice.
    for name in contracted {
        let Some(r) = reports.iter().find(|r| r.domain == name) else {
            return fail(format!("no spin report from {name}"));
        };
        // No more complete periods than fit in the time it measured.
        let most = r.elapsed_ns / r.period_ns.max(1);
        if !(20..=most).contains(&r.windows) {
            return fail(format!(
                "{name}: {} complete periods measured in {} ns (20..={most} expected)",
                r.windows, r.elapsed_ns
            ));
        }
        // Slack-time domains get more than the slice, and no period holds more than itself.
        let extra = name == "bronze";
        let low = r.slice_ns.saturating_sub(PERIOD_TOLERANCE_NS);
        let high = if extra { r.period_ns } else { r.slice_ns + PERIOD_TOLERANCE_NS };
        if r.min_ns < low || r.max_ns > high {
            return fail(format!(
                "{name}: CPU per period {}..{} ns by its own clock, slice {} ns",
                r.min_ns, r.max_ns, r.slice_ns
            ));
        }
    }
    Ok(())
}

fn failing_domain_exit_status(children: &mut Children) -> Result<(), String> {
    let manifest = "tests/manifests/exit-failure.toml";
    let out = children.run(&["--manifest", manifest])?;
    if out.status != Some(DOMAIN_FAILED.into()) {
        return Err(format!("want exit status {DOMAIN_FAILED}\n{}", out.describe()));
    }
    if !out.stderr.contains("domains failed: quitter exited with status 1") {
        return Err(format!("the failing domain is not named\n{}", out.describe()));
    }
    let ends = endings(&out.outcome().log);
    if !ends.contains(&("steady".to_string(), DomainEnding::Exited(0))) {
        return Err(format!("the neighbour did not exit 0\n{}", out.describe()));
    }
    let allowed = children.run(&["--manifest", manifest, "--allow-failures"])?;
    if allowed.status != Some(0) {
        return Err(format!("--allow-failures: want exit status 0\n{}", allowed.describe()));
    }
    Ok(())
}

fn expected_failure_exits_0(children: &mut Children) -> Result<(), String> {
    let out = children.run(&["--manifest", "tests/manifests/fault-write.toml"])?;
    let ends = endings(&out.outcome().log);
    let terminated =
        ends.iter().any(|(n, e)| n == "faulty" && matches!(e, DomainEnding::Terminated(_)));
    if out.status != Some(0) || !terminated {
        return Err(format!(
            "want exit status 0 with `faulty` terminated (expect_failure)\n{}",
            out.describe()
        ));
    }
    Ok(())
}
