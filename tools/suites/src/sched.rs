//! CPU-contract scenarios: the manifests in `tests/manifests/sched/`, booted under
//! `-icount shift=0,sleep=off`, and what each must show. The QEMU suite (`qemu::ARCH::sched`)
//! checks them; `cargo xtask bench sched` reports their figures.
//!
//! Shares are measured by work: the iterations each `spin` domain completed, divided by the
//! iterations of the same app alone on the CPU with slack time (`alone.toml`), booted in the same
//! invocation. The kernel's own accounting is not used for shares; per-period figures come from
//! the apps' own clock readings.

use std::collections::HashMap;
use std::ops::RangeInclusive;

use anyhow::{Context, Result};

use qemu_run::cpu::{self, SpinReport};
use qemu_run::expected::Expected;
use qemu_run::qemu::{self, Ending, Outcome};
use tool_base::artifacts::Artifacts;

/// How far a period's CPU may be from the slice: 10 µs.
pub const PERIOD_TOLERANCE_NS: u64 = 10_000;
/// How far a share may be from its contract, in points.
pub const SHARE_TOLERANCE: f64 = 1.0;
/// How unevenly two `extra = true` domains may split slack time, in points.
pub const SLACK_TOLERANCE: f64 = 5.0;
/// How much a domain's death may move the others' shares, in points.
pub const DEATH_TOLERANCE: f64 = 0.5;
/// How late after its latency hint a woken thread may run.
pub const WAKEUP_SLACK_NS: u64 = 50_000;
/// How much a faulting neighbour may change a domain's completed work, in percent.
pub const SELF_PAGING_TOLERANCE: f64 = 1.0;
/// How far doubling the slice of a faulting domain may be from doubling its fault rate, in
/// percent.
pub const FAULT_RATE_TOLERANCE: f64 = 10.0;

/// A manifest and the kernel command line to boot it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Run {
    /// The manifest, relative to the workspace.
    pub manifest: &'static str,
    /// The kernel command line.
    pub append: &'static str,
    /// The kernel's `ERROR` and `WARN` lines the boot may show; any other fails every test
    /// that uses the boot.
    pub expected: Expected,
}

/// The baseline: one `spin` alone with slack time.
pub const ALONE: Run =
    Run { manifest: "tests/manifests/sched/alone.toml", append: "", expected: &[] };
/// Slices of 1, 2 and 5 ms of 10 ms, no slack.
pub const FIXED: Run =
    Run { manifest: "tests/manifests/sched/fixed.toml", append: "", expected: &[] };
/// 1 of 5 ms, 10 of 100 ms, 15 of 50 ms, no slack.
pub const MIXED: Run =
    Run { manifest: "tests/manifests/sched/mixed.toml", append: "", expected: &[] };
/// FIXED with slack for the first two.
pub const SLACK: Run =
    Run { manifest: "tests/manifests/sched/slack.toml", append: "", expected: &[] };
/// A domain spinning forever (stopped after a second).
pub const FOREVER: Run =
    Run { manifest: "tests/manifests/sched/forever.toml", append: "stop=1s", expected: &[] };
/// FIXED plus a domain that faults after 300 ms.
pub const DEATH: Run = Run {
    manifest: "tests/manifests/sched/death.toml",
    append: "",
    expected: &[
        "domain victim: store page fault at address 0x10, pc=0x*",
        "domain victim: the address is outside the user half",
        "domain victim terminated: store page fault",
    ],
};
/// Wake-up latency of a thread woken by a channel's event.
pub const WAKEUP: Run =
    Run { manifest: "tests/manifests/sched/wakeup.toml", append: "", expected: &[] };

/// Self-paging baseline: `pager` spins (no faults) next to `neighbour`, 2 of 10 ms each.
pub const PAGING_BASE: Run =
    Run { manifest: "tests/manifests/sched/paging-base.toml", append: "", expected: &[] };
/// `pager` faults continuously, its driver running on its own slice.
pub const PAGING_FAULTS: Run =
    Run { manifest: "tests/manifests/sched/paging-faults.toml", append: "", expected: &[] };
/// PAGING_FAULTS with `pager`'s slice doubled.
pub const PAGING_DOUBLE: Run =
    Run { manifest: "tests/manifests/sched/paging-double.toml", append: "", expected: &[] };

/// Paging isolation baseline: the neighbour spins beside an idle block driver and three
/// pagers that do not page.
pub const DISK_PAGING_BASE: Run =
    Run { manifest: "tests/manifests/sched/disk-paging-base.toml", append: "", expected: &[] };
/// Three domains page heavily to one modelled disk under disk contracts, beside the neighbour.
pub const DISK_PAGING: Run =
    Run { manifest: "tests/manifests/sched/disk-paging-paging.toml", append: "", expected: &[] };

/// Every scenario.
pub const ALL: [Run; 12] = [
    ALONE,
    FIXED,
    MIXED,
    SLACK,
    FOREVER,
    DEATH,
    WAKEUP,
    PAGING_BASE,
    PAGING_FAULTS,
    PAGING_DOUBLE,
    DISK_PAGING_BASE,
    DISK_PAGING,
];

/// Boots of scenarios, each booted at most once per invocation.
pub struct Runs<'a> {
    artifacts: &'a Artifacts,
    done: HashMap<Run, Outcome>,
    /// The runs asked for since [`Runs::take_used`], in order.
    used: Vec<Run>,
}

impl<'a> Runs<'a> {
    /// No boots yet; they will use the kernel and firmware of `artifacts`.
    pub fn new(artifacts: &'a Artifacts) -> Self {
        Runs { artifacts, done: HashMap::new(), used: Vec::new() }
    }

    /// The outcome of `run`, booting it the first time.
    pub fn get(&mut self, run: Run) -> Result<&Outcome> {
        if !self.used.contains(&run) {
            self.used.push(run);
        }
        if !self.done.contains_key(&run) {
            let out = boot(self.artifacts, run)?;
            self.done.insert(run, out);
        }
        Ok(&self.done[&run])
    }

    /// The outcome of `run` if it was booted.
    pub fn outcome(&self, run: Run) -> Option<&Outcome> {
        self.done.get(&run)
    }

    /// The runs asked for since the last call (whose boots a test used), booted or not.
    pub fn take_used(&mut self) -> Vec<Run> {
        std::mem::take(&mut self.used)
    }

    /// The baseline's iterations (work per second alone).
    pub fn alone_iterations(&mut self) -> Result<u64> {
        let out = self.get(ALONE)?;
        let r = cpu::spin_reports(out);
        let alone = r.first().context("the baseline boot printed no spin report")?;
        Ok(alone.iterations)
    }
}

/// Boots `run` under `-icount shift=0,sleep=off`.
pub fn boot(a: &Artifacts, run: Run) -> Result<Outcome> {
    qemu::IcountBoot::new(a, run.manifest, run.append)?.run(a)
}

/// One domain's measured figures in a scenario.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Share {
    /// The domain.
    pub domain: String,
    /// Its contract's slice / period, in percent.
    pub contract: f64,
    /// Its work relative to the baseline, in percent.
    pub measured: f64,
    /// Complete periods it saw, and the largest distance of one period's CPU from the slice.
    pub periods: u64,
    /// See `periods`.
    pub deviation_us: f64,
}

/// The shares of every `spin` domain of `out` against `alone` iterations.
pub fn shares(out: &Outcome, alone: u64) -> Vec<Share> {
    cpu::spin_reports(out)
        .into_iter()
        .map(|r: SpinReport| Share {
            contract: r.slice_ns as f64 * 100.0 / r.period_ns.max(1) as f64,
            measured: r.iterations as f64 * 100.0 / alone.max(1) as f64
                * (1e9 / r.elapsed_ns.max(1) as f64),
            periods: r.windows,
            deviation_us: r.deviation_ns() as f64 / 1000.0,
            domain: r.domain,
        })
        .collect()
}

fn share_of<'s>(shares: &'s [Share], domain: &str) -> Result<&'s Share, String> {
    shares.iter().find(|s| s.domain == domain).ok_or(format!("no spin report from `{domain}`"))
}

fn ended_well(out: &Outcome) -> Result<(), String> {
    if out.ending == Ending::Kernel(0) {
        Ok(())
    } else {
        Err(format!("the boot ended {:?}", out.ending))
    }
}

/// Each domain's share is its contract within [`SHARE_TOLERANCE`], and it got its slice in
/// every complete period within [`PERIOD_TOLERANCE_NS`].
fn contracts_held(
    shares: &[Share],
    names: &[&str],
    periods: RangeInclusive<u64>,
) -> Result<(), String> {
    for name in names {
        let s = share_of(shares, name)?;
        if (s.measured - s.contract).abs() > SHARE_TOLERANCE {
            return Err(format!(
                "{name}: {:.2}% of the CPU for a contract of {:.2}%",
                s.measured, s.contract
            ));
        }
        check_periods(s, periods.clone())?;
    }
    Ok(())
}

fn check_periods(s: &Share, periods: RangeInclusive<u64>) -> Result<(), String> {
    if !periods.contains(&s.periods) {
        return Err(format!("{}: {} complete periods, not {periods:?}", s.domain, s.periods));
    }
    if s.deviation_us * 1000.0 > PERIOD_TOLERANCE_NS as f64 {
        return Err(format!(
            "{}: a period's CPU was {:.1} us away from the slice",
            s.domain, s.deviation_us
        ));
    }
    Ok(())
}

/// How long the `spin` domains of the scenarios run (`--for 1000`), in ms.
const SPIN_RUN_MS: u64 = 1000;

/// How many complete periods of `period_ms` a `spin` domain sees in [`SPIN_RUN_MS`]: as many
/// as fit, or one fewer when its run does not start on a period's boundary.
fn periods_of(period_ms: u64) -> RangeInclusive<u64> {
    let fit = SPIN_RUN_MS / period_ms;
    fit - 1..=fit
}

/// A scenario's check.
pub type Check = fn(&mut Runs<'_>) -> Result<(), String>;

/// The scenarios the suite checks, by test name.
pub const SCENARIOS: &[(&str, Check)] = &[
    ("fixed_shares", fixed_shares),
    ("mixed_periods", mixed_periods),
    ("slack_split_evenly", slack_split_evenly),
    ("spinning_forever_gets_its_slice", spinning_forever),
    ("death_leaves_shares", death_leaves_shares),
    ("wakeup_within_latency", wakeup_within_latency),
    ("self_paging_leaves_neighbour_work", self_paging_leaves_neighbour_work),
    ("fault_rate_follows_slice", fault_rate_follows_slice),
    ("disk_paging_isolation", disk_paging_isolation),
];

fn err(e: anyhow::Error) -> String {
    format!("{e:#}")
}

fn fixed_shares(runs: &mut Runs<'_>) -> Result<(), String> {
    let alone = runs.alone_iterations().map_err(err)?;
    let out = runs.get(FIXED).map_err(err)?;
    ended_well(out)?;
    contracts_held(&shares(out, alone), &["one", "two", "five"], periods_of(10))
}

fn mixed_periods(runs: &mut Runs<'_>) -> Result<(), String> {
    let alone = runs.alone_iterations().map_err(err)?;
    let out = runs.get(MIXED).map_err(err)?;
    ended_well(out)?;
    let shares = shares(out, alone);
    contracts_held(&shares, &["fast"], periods_of(5))?;
    contracts_held(&shares, &["medium"], periods_of(50))?;
    contracts_held(&shares, &["slow"], periods_of(100))?;
    let accounts = cpu::summary_accounts(out);
    if accounts.len() != 3 {
        return Err(format!("{} domains in the run summary's accounts", accounts.len()));
    }
    match accounts.iter().find(|a| a.missed > 0) {
        Some(a) => Err(format!("{} missed {} deadlines", a.domain, a.missed)),
        None => Ok(()),
    }
}

fn slack_split_evenly(runs: &mut Runs<'_>) -> Result<(), String> {
    let alone = runs.alone_iterations().map_err(err)?;
    let out = runs.get(SLACK).map_err(err)?;
    ended_well(out)?;
    let shares = shares(out, alone);
    contracts_held(&shares, &["five"], periods_of(10))?;
    let extra = |name| share_of(&shares, name).map(|s| s.measured - s.contract);
    let (one, two) = (extra("one")?, extra("two")?);
    // Slices of 1, 2 and 5 ms of every 10 leave 20 points of slack time; each gets a fair
    // part of it, and together no more than there is.
    let fair = (one - two).abs() <= SLACK_TOLERANCE && one >= 5.0 && two >= 5.0;
    if !fair || one + two > 20.0 + 2.0 * SHARE_TOLERANCE {
        return Err(format!("slack split {one:.2} / {two:.2} points (20 to share)"));
    }
    Ok(())
}

fn spinning_forever(runs: &mut Runs<'_>) -> Result<(), String> {
    let out = runs.get(FOREVER).map_err(err)?;
    ended_well(out)?;
    if !out.has("stop: the time given by stop= has come") {
        return Err("the run did not end at stop=1s".into());
    }
    let hog = cpu::spin_reports(out)
        .into_iter()
        .find(|r| r.domain == "hog")
        .ok_or("no report from `hog`")?;
    // stop=1s: at most 100 periods of 10 ms fit; the first and the reports' cut lose some.
    if !(80..=100).contains(&hog.windows) {
        return Err(format!("hog: {} complete periods reported, not 80..=100", hog.windows));
    }
    if hog.max_ns > hog.slice_ns + PERIOD_TOLERANCE_NS || hog.deviation_ns() > PERIOD_TOLERANCE_NS {
        return Err(format!(
            "hog: between {} and {} ns in a period for a slice of {} ns",
            hog.min_ns, hog.max_ns, hog.slice_ns
        ));
    }
    Ok(())
}

fn death_leaves_shares(runs: &mut Runs<'_>) -> Result<(), String> {
    let alone = runs.alone_iterations().map_err(err)?;
    let before = shares(runs.get(FIXED).map_err(err)?, alone);
    let out = runs.get(DEATH).map_err(err)?;
    ended_well(out)?;
    if !out.has("domain victim terminated") {
        return Err("the victim was not terminated".into());
    }
    let after = shares(out, alone);
    for name in ["one", "two", "five"] {
        let (b, a) = (share_of(&before, name)?, share_of(&after, name)?);
        if (a.measured - b.measured).abs() > DEATH_TOLERANCE {
            return Err(format!(
                "{name}: {:.2}% with a dying neighbour, {:.2}% without",
                a.measured, b.measured
            ));
        }
        check_periods(a, periods_of(10))?;
    }
    Ok(())
}

fn wakeup_within_latency(runs: &mut Runs<'_>) -> Result<(), String> {
    let out = runs.get(WAKEUP).map_err(err)?;
    ended_well(out)?;
    let w = cpu::wakeup_report(out).ok_or("no wakeup report")?;
    // One sample a message: at most the 200 sent, and nearly all of them (a message that
    // arrives while the thread is not waiting is no sample).
    if !(190..=200).contains(&w.samples) {
        return Err(format!("{} samples, not 190..=200", w.samples));
    }
    // A sample runs from the sender's clock reading before the send to the woken thread's
    // first instruction: a system call and a domain switch lie between, so never 0.
    if w.min_ns == 0 {
        return Err("a woken thread ran no later than the send".into());
    }
    if w.max_ns > w.latency_ns + WAKEUP_SLACK_NS {
        return Err(format!(
            "a woken thread ran {} ns after the send, for a latency hint of {} ns",
            w.max_ns, w.latency_ns
        ));
    }
    Ok(())
}

/// The iterations `domain`'s `spin` completed in `out`.
fn spin_iterations(out: &Outcome, domain: &str) -> Result<u64, String> {
    cpu::spin_reports(out)
        .into_iter()
        .find(|r| r.domain == domain)
        .map(|r| r.iterations)
        .ok_or(format!("no spin report from `{domain}`"))
}

/// `pager`'s fault rate in `out`, in faults per second of the clock.
pub fn fault_rate(out: &Outcome) -> Result<f64, String> {
    let line = out.line("[pager] faulter: faults=").ok_or("no faulter report")?;
    let field = |k: &str| qemu_run::log::field(&line.message, k).ok_or(format!("no {k}="));
    let (faults, elapsed) = (field("faults")?, field("elapsed_ns")?);
    if faults == 0 || elapsed == 0 {
        return Err(format!("no faults measured: {}", line.message));
    }
    Ok(faults as f64 * 1e9 / elapsed as f64)
}

/// The neighbour's work next to a domain that faults continuously, against its work next to
/// the same domain spinning, in percent.
pub fn neighbour_change(runs: &mut Runs<'_>) -> Result<f64, String> {
    let base = runs.get(PAGING_BASE).map_err(err)?;
    ended_well(base)?;
    let before = spin_iterations(base, "neighbour")?;
    let faults = runs.get(PAGING_FAULTS).map_err(err)?;
    ended_well(faults)?;
    let after = spin_iterations(faults, "neighbour")?;
    Ok((after as f64 - before as f64) * 100.0 / before.max(1) as f64)
}

fn self_paging_leaves_neighbour_work(runs: &mut Runs<'_>) -> Result<(), String> {
    let change = neighbour_change(runs)?;
    fault_rate(runs.get(PAGING_FAULTS).map_err(err)?)?;
    if change.abs() > SELF_PAGING_TOLERANCE {
        return Err(format!(
            "the neighbour's work changed by {change:.3}% next to a faulting domain"
        ));
    }
    Ok(())
}

/// `pager`'s fault rate with its slice doubled over its rate with the slice as given.
pub fn fault_rate_ratio(runs: &mut Runs<'_>) -> Result<f64, String> {
    let single = fault_rate(runs.get(PAGING_FAULTS).map_err(err)?)?;
    let out = runs.get(PAGING_DOUBLE).map_err(err)?;
    ended_well(out)?;
    Ok(fault_rate(out)? / single)
}

fn fault_rate_follows_slice(runs: &mut Runs<'_>) -> Result<(), String> {
    let ratio = fault_rate_ratio(runs)?;
    if (ratio - 2.0).abs() * 50.0 > FAULT_RATE_TOLERANCE {
        return Err(format!("doubling the slice multiplied the fault rate by {ratio:.3}"));
    }
    Ok(())
}

/// The paging streams of [`DISK_PAGING`]: name and disk slice in each 1 s period (ns).
const PAGING_STREAMS: [(&str, u64); 3] =
    [("pa", 500_000_000), ("pb", 250_000_000), ("pc", 100_000_000)];

/// Paging isolation: three domains paging heavily to one disk each get their disk contract's
/// share and no more (pc, which evicts and fetches 64 pages at a time, included), pa's paging
/// rate follows its share (about twice pb's), no byte is lost, and the neighbour's CPU work
/// (fixed slice) changes by at most [`SELF_PAGING_TOLERANCE`] from the baseline without
/// paging.
fn disk_paging_isolation(runs: &mut Runs<'_>) -> Result<(), String> {
    let base = runs.get(DISK_PAGING_BASE).map_err(err)?;
    ended_well(base)?;
    let before = spin_iterations(base, "neighbour")?;
    let out = runs.get(DISK_PAGING).map_err(err)?;
    ended_well(out)?;
    let after = spin_iterations(out, "neighbour")?;
    let change = (after as f64 - before as f64) * 100.0 / before.max(1) as f64;
    if change.abs() > SELF_PAGING_TOLERANCE {
        return Err(format!("the neighbour's work changed by {change:.3}% beside the pagers"));
    }
    let periods = qemu_run::disk_trace::periods(&out.log);
    let mut steps = Vec::new();
    for (name, slice) in PAGING_STREAMS {
        // The first three complete periods: every pager pages through them (3 s each).
        let mine: Vec<_> = periods.iter().filter(|p| p.stream == name).take(3).collect();
        if mine.len() < 3 {
            return Err(format!("{name}: {} disk periods recorded, not 3", mine.len()));
        }
        for p in &mine {
            if p.extra != 0 || p.guaranteed > slice {
                return Err(format!("{name} took more than its slice of {slice} ns: {p:?}"));
            }
            // pa and pb are never idle: they get their share (within a request's time).
            if name != "pc" && p.guaranteed < slice * 9 / 10 {
                return Err(format!("{name} got less than 90% of its slice: {p:?}"));
            }
        }
        let line = out
            .line(&format!("[{name}] heracles: random pages="))
            .ok_or(format!("no report from {name}"))?;
        let field = |k: &str| qemu_run::log::field(&line.message, k).ok_or(format!("no {k}="));
        if field("mismatches")? != 0 {
            return Err(format!("{name} lost data: {}", line.message));
        }
        steps.push(field("steps")?);
    }
    // Equal pagers, one with twice the other's disk share: twice the paging in the same time.
    let ratio = steps[0] as f64 / steps[1].max(1) as f64;
    if !(1.6..=2.4).contains(&ratio) {
        return Err(format!("pa paged {ratio:.2}x what pb did in 3 s; its share is 2x"));
    }
    Ok(())
}
