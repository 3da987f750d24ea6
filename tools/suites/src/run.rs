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
//! - `default_trace`, `demand_zero_trace`, `anticipation_trace`: `--trace FILE.json` of the
//!   default manifest, of `tests/manifests/paging/demand-zero.toml` (thousands of page faults)
//!   and of `tests/manifests/drivers/anticipation-trace.toml` (two disk readers under an
//!   anticipating scheduler) writes a timeline whose structure [`qemu_run::timeline::check`]
//!   accepts (every event's fields and types, every track named, timestamps monotone and
//!   complete events nested per track, flows matched and bound to slices), with a process
//!   named after every domain of the manifest holding its CPU periods (as many as the run
//!   summary counts, give or take one), running slices that add up to its CPU time in the run
//!   summary (within [`RUNNING_SLACK_US`] or [`RUNNING_SLACK_SHARE`]) and every page fault the
//!   run summary reports for the domain; activations where a domain has a handler (one per
//!   fault and more on dispatches), none where none has; as many event flows over each IO channel of the manifest as its
//!   receiver's endpoint counted; and as many disk requests and anticipation waits of each
//!   ending as the block driver counted.
//! - `hang_ends_at_timeout`: a run that never ends (a domain that spins forever, no `stop=`)
//!   is stopped by `--timeout 10`, no sooner, with [`TIMED_OUT`] and a message saying so.
//!
//! Every child runs with a `--timeout` ([`RUN_TIMEOUT_S`] unless the test sets its own), so a
//! run that hangs fails its test instead of holding up the suite; and the harness stops a
//! child that outlives even that by [`GUARD_S`].

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::harness::last_lines;
use crate::sched::PERIOD_TOLERANCE_NS;
use qemu_run::cpu;
use qemu_run::expected::Expected;
use qemu_run::log::LogLine;
use qemu_run::qemu::{Ending, Outcome};
use qemu_run::run::verdict::{DOMAIN_FAILED, DomainEnding, TIMED_OUT, endings, late_periods};
use qemu_run::timeline;
use tool_base::{Arch, util};

/// The `--timeout` of every `cargo xtask run` child whose test sets none, in seconds: the
/// longest run here takes a few seconds of the host's time even on a busy host.
const RUN_TIMEOUT_S: u64 = 300;

/// How long the harness waits for a child beyond its `--timeout` before it stops the child
/// itself, in seconds: the child builds the apps before QEMU starts, and its timeout counts
/// from then.
const GUARD_S: u64 = 600;

/// What a `cargo xtask run` child did.
struct RunOutput {
    status: Option<i32>,
    stdout: String,
    stderr: String,
    /// From its start to its exit, on the host's clock.
    wall: Duration,
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

    /// Runs this xtask binary as `cargo xtask run --arch ARCH --timeout RUN_TIMEOUT_S ARGS`.
    fn run(&mut self, args: &[&str]) -> Result<RunOutput, String> {
        self.run_for(RUN_TIMEOUT_S, args)
    }

    /// Runs this xtask binary as `cargo xtask run --arch ARCH --timeout TIMEOUT_S ARGS`.
    fn run_for(&mut self, timeout_s: u64, args: &[&str]) -> Result<RunOutput, String> {
        let timeout = timeout_s.to_string();
        let mut all = vec!["--arch", self.arch.name(), "--timeout", &timeout];
        all.extend_from_slice(args);
        let out = xtask_run(&all, Duration::from_secs(timeout_s + GUARD_S))?;
        self.outcomes.push(out.outcome());
        Ok(out)
    }
}

/// Runs this xtask binary as `cargo xtask run ARGS`, and stops it if it has not ended after
/// `guard`.
fn xtask_run(args: &[&str], guard: Duration) -> Result<RunOutput, String> {
    let exe = std::env::current_exe().map_err(|e| format!("no xtask binary: {e}"))?;
    let start = Instant::now();
    let mut child = Command::new(exe)
        .current_dir(util::root())
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start xtask run: {e}"))?;
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped")));
    let status = loop {
        match child.try_wait().map_err(|e| format!("waiting for xtask run: {e}"))? {
            Some(status) => break Some(status),
            None if start.elapsed() > guard => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let wall = start.elapsed();
    let out = RunOutput {
        status: status.and_then(|s| s.code()),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
        wall,
    };
    match status {
        Some(_) => Ok(out),
        None => Err(format!(
            "xtask run {} outlived its --timeout by {} s and was stopped\n{}",
            args.join(" "),
            GUARD_S,
            out.describe()
        )),
    }
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
    ("hang_ends_at_timeout", hang_ends_at_timeout, &[]),
    ("default_trace", default_trace, &[]),
    ("demand_zero_trace", demand_zero_trace, &[]),
    ("anticipation_trace", anticipation_trace, &[]),
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

/// How long `hang_ends_at_timeout` lets its run go on, in seconds.
const HANG_TIMEOUT_S: u64 = 10;

fn hang_ends_at_timeout(children: &mut Children) -> Result<(), String> {
    // Two domains that spin forever, and no `stop=`: the kernel never ends the run.
    let manifest = "tests/manifests/sched/forever.toml";
    let out = children.run_for(HANG_TIMEOUT_S, &["--manifest", manifest])?;
    let fail = |why: &str| Err(format!("{why}\n{}", out.describe()));
    if out.status != Some(TIMED_OUT.into()) {
        return fail(&format!("want exit status {TIMED_OUT}"));
    }
    let said = format!("run: timed out: no end after {HANG_TIMEOUT_S} s (--timeout)");
    if !out.stderr.contains(&said) {
        return fail(&format!("stderr does not say `{said}`"));
    }
    // Stopped by the timeout and not before it: the guest was running, not yet ended, and the
    // child lived at least that long (its timeout counts from QEMU's start, after the build).
    let run = out.outcome();
    if !run.has("[hog] spin: report") {
        return fail("the domains never reported: the run did not get going");
    }
    if run.has("run summary: ") || run.has("shutdown: ") {
        return fail("the kernel ended the run itself");
    }
    if out.wall < Duration::from_secs(HANG_TIMEOUT_S) {
        return fail(&format!("ended after {:.1?}, before its timeout", out.wall));
    }
    Ok(())
}

/// Runs `manifest` with `--trace` and checks the timeline against the manifest and the run
/// summary (see the module's docs); `handlers`: whether a domain of it has an activation
/// handler.
fn trace_of(children: &mut Children, manifest: &str, handlers: bool) -> Result<(), String> {
    let stem = Path::new(manifest).file_stem().and_then(|s| s.to_str()).unwrap_or("run");
    let path = util::root().join(format!("target/trace/{}-{stem}.json", children.arch.name()));
    let _ = std::fs::remove_file(&path);
    let file = path.to_string_lossy().into_owned();
    let out = children.run(&["--manifest", manifest, "--trace", &file])?;
    let fail = |why: String| Err(format!("{why}\n{}", out.describe()));
    if out.status != Some(0) {
        return fail(format!("the run of {manifest} with --trace did not exit 0"));
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => return fail(format!("no timeline at {file}: {e}")),
    };
    let summary = match timeline::check(&text) {
        Ok(s) => s,
        Err(e) => return fail(format!("{file}: {e:#}")),
    };
    let run = out.outcome();
    let text = std::fs::read_to_string(util::root().join(manifest))
        .map_err(|e| format!("reading {manifest}: {e}"))?;
    let apps = system_image::apps::app_names();
    let apps: Vec<&str> = apps.iter().map(String::as_str).collect();
    let m = manifest::parse(manifest, &text, &apps).map_err(|e| format!("{manifest}: {e}"))?;
    let accounts = cpu::summary_accounts(&run);
    for d in &m.domains {
        let Some(a) = accounts.iter().find(|a| a.domain == d.name) else {
            return fail(format!("no CPU accounts for {} in the run summary", d.name));
        };
        if summary.pid(&d.name).is_none() {
            return fail(format!("{file}: no process named {}", d.name));
        }
        // A domain that ends before its first period does (hello) has none.
        let n = summary.count(&d.name, "period") as u64;
        if (n == 0 && a.periods > 0) || n + 1 < a.periods || n > a.periods + 1 {
            return fail(format!(
                "{file}: {n} CPU periods of {}, the run summary counts {}",
                d.name, a.periods
            ));
        }
    }
    let faults = timeline::reported_faults(&run.log);
    for (name, n) in &faults {
        let got = summary.count(name, "page fault") as u64;
        if got != *n {
            return fail(format!(
                "{file}: {got} page faults of {name}, the run summary reports {n}"
            ));
        }
    }
    let total: u64 = summary
        .complete
        .iter()
        .filter(|((_, name), _)| name == "page fault")
        .map(|(_, n)| *n as u64)
        .sum();
    if total != faults.values().sum::<u64>() {
        return fail(format!(
            "{file}: {total} page faults in all, the run summary reports {faults:?}"
        ));
    }
    if manifest.contains("demand-zero") && faults.values().sum::<u64>() < 1000 {
        return fail(format!("the run summary reports too few page faults: {faults:?}"));
    }
    // Who ran when: each domain's running slices add up to the CPU time the run summary gives
    // it (kernel work done for it while another domain had the CPU, and the µs the summary
    // rounds away, make the difference).
    for d in &m.domains {
        let Some(a) = accounts.iter().find(|a| a.domain == d.name) else { continue };
        let cpu_us = (a.guaranteed_us + a.extra_us) as f64;
        let ran = summary.duration_us(&d.name, "running");
        let bound = RUNNING_SLACK_US.max(cpu_us * RUNNING_SLACK_SHARE);
        if (ran - cpu_us).abs() > bound {
            return fail(format!(
                "{file}: {} ran {ran:.1} us by its running slices, the run summary counts {cpu_us} us (at most {bound:.1} us apart)",
                d.name
            ));
        }
    }
    // Activations: a pager's handler is entered at each fault's delivery, and again when it is
    // dispatched with its activations on; domains without a handler (the default manifest's,
    // the disk readers) have none.
    let activations: usize =
        summary.instants.iter().filter(|((_, n), _)| n == "activation").map(|(_, n)| *n).sum();
    let fault_count = faults.values().sum::<u64>() as usize;
    let good = if handlers { activations > fault_count } else { activations == 0 };
    if !good {
        return fail(format!(
            "{file}: {activations} activations with {fault_count} page faults: want {}",
            if handlers { "an activation per fault and some on dispatches" } else { "none" }
        ));
    }
    // Events between domains: every event sent over each channel of the manifest, as many as
    // the receiver's endpoint counted.
    let channels: Vec<timeline::Channel> = run.log.iter().filter_map(timeline::channel).collect();
    let received: Vec<timeline::Received> = run.log.iter().filter_map(timeline::received).collect();
    for c in &m.channels {
        let Some(k) = channels.iter().find(|k| k.name == c.name) else {
            return fail(format!("no `event channel` record of {}", c.name));
        };
        let flows = summary.flows.get(&c.name).copied().unwrap_or(0) as u64;
        let counted: u64 =
            received.iter().filter(|r| (r.domain, r.ep) == (k.to, k.data)).map(|r| r.count).sum();
        if flows == 0 || flows != counted {
            return fail(format!(
                "{file}: {flows} event flows over channel {}, its receiver counted {counted}",
                c.name
            ));
        }
    }
    disk_in_trace(&run, &summary, manifest)
        .map_err(|why| format!("{file}: {why}\n{}", out.describe()))
}

/// How far apart a domain's running slices and its CPU time in the run summary may be: this
/// many µs, or this share of its CPU time if more.
const RUNNING_SLACK_US: f64 = 1_000.0;
/// See [`RUNNING_SLACK_US`].
const RUNNING_SLACK_SHARE: f64 = 0.01;

/// The disk's requests and anticipation waits in the timeline against the block driver's own
/// statistics (`disk scheduler: ... requests=N`, `disk waits: count=N anticipated=N
/// timed_out=N abandoned=N`), if it printed them; a manifest named `*anticipation*` must have
/// requests and waits that came.
fn disk_in_trace(run: &Outcome, summary: &timeline::Summary, manifest: &str) -> Result<(), String> {
    let stat = |mark: &str| {
        run.log.iter().find_map(|l| {
            let at = l.message.find(mark)?;
            Some(cpu::numbers(&l.message[at + mark.len()..]))
        })
    };
    let requests = summary.count("disk", "request") as u64;
    if let Some(n) = stat("disk scheduler: ") {
        let want = n.get("requests").copied().unwrap_or(0);
        if requests != want {
            return Err(format!("{requests} disk requests, the driver dispatched {want}"));
        }
    }
    let mut came = 0;
    if let Some(n) = stat("disk waits: ") {
        for (key, name) in [
            ("anticipated", "wait: came"),
            ("timed_out", "wait: timed out"),
            ("abandoned", "wait: abandoned"),
        ] {
            let got = summary.count("disk", name) as u64;
            let want = n.get(key).copied().unwrap_or(0);
            if got != want {
                return Err(format!("{got} `{name}` waits, the driver counts {key}={want}"));
            }
        }
        came = n.get("anticipated").copied().unwrap_or(0);
    }
    if manifest.contains("anticipation") && (requests == 0 || came == 0) {
        return Err(format!("{requests} disk requests and {came} waits that came: want some"));
    }
    Ok(())
}

fn default_trace(children: &mut Children) -> Result<(), String> {
    trace_of(children, "manifests/default.toml", false)
}

fn demand_zero_trace(children: &mut Children) -> Result<(), String> {
    trace_of(children, "tests/manifests/paging/demand-zero.toml", true)
}

fn anticipation_trace(children: &mut Children) -> Result<(), String> {
    trace_of(children, "tests/manifests/drivers/anticipation-trace.toml", false)
}
