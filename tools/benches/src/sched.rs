//! `cargo xtask bench sched`: the CPU-contract scenarios of [`test_suites::sched`] measured, on each
//! architecture side by side.
//!
//! Every figure comes from boots under `-icount shift=0,sleep=off` in this invocation:
//! - share error: each `spin` domain's work divided by the work of the same app alone with slack
//!   time, against its contract (`slice / period`);
//! - per-period deviation: the largest distance between the CPU a domain saw in one of its
//!   periods (by its own clock) and its slice;
//! - wake-up latency: from a send on a channel to the first instruction of the thread it wakes;
//! - domain switch cost: `yield` between two domains, in instructions (as in `bench ipc`);
//! - an SVG per traced scenario and architecture of each domain's CPU per period (the kernel's `trace=sched`
//!   records, from separate boots so tracing does not disturb the measured ones).

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::by_arch::{ByArch, Figure};
use super::ipc::{IPC, measure};
use crate::baseline::Table;
use crate::measure::{Mode, environment, on_each, table, write_report};
use qemu_run::cpu::{self, Period};
use qemu_run::qemu::Outcome;
use test_suites::sched::{self as scenarios, Run, Runs, Share};
use tool_base::{Arch, artifacts, util};

#[derive(Serialize)]
struct ShareRow {
    scenario: &'static str,
    #[serde(flatten)]
    share: Share,
    error_points: f64,
}

#[derive(Serialize)]
struct Latency {
    samples: u64,
    hint_us: f64,
    min_us: f64,
    median_us: f64,
    p99_us: f64,
    max_us: f64,
    histogram: Vec<(String, usize)>,
}

/// Scenarios whose shares are reported: label, key in the baseline, run.
const SHARED: [(&str, &str, Run); 5] = [
    ("fixed 1/2/5 of 10 ms", "fixed", scenarios::FIXED),
    ("mixed periods", "mixed", scenarios::MIXED),
    ("slack to one and two", "slack", scenarios::SLACK),
    ("fixed, a fourth dies at 300 ms", "death", scenarios::DEATH),
    ("spinning forever (to 1 s)", "forever", scenarios::FOREVER),
];

/// Scenarios plotted from traced boots: (file stem, title, run with `trace=sched`).
pub(crate) const PLOTS: [(&str, &str, Run); 2] = [
    (
        "sched-slack",
        "CPU per period: one (1 of 10 ms, extra), two (2 of 10 ms, extra), five (5 of 10 ms)",
        Run { manifest: "tests/manifests/sched/slack.toml", append: "trace=sched", expected: &[] },
    ),
    (
        "sched-mixed",
        "CPU per period: fast (1 of 5 ms), slow (10 of 100 ms), medium (15 of 50 ms)",
        Run { manifest: "tests/manifests/sched/mixed.toml", append: "trace=sched", expected: &[] },
    ),
];

/// What one architecture measured.
struct Measured {
    alone: f64,
    rows: Vec<ShareRow>,
    latency: Latency,
    switch: f64,
    plots: Vec<std::path::PathBuf>,
}

/// Measures on `arch`: the kept figures (share errors, per-period deviations, deadlines missed
/// per scenario, wake-up latencies) and, in [`Mode::Full`], the rest of the report (the switch
/// cost, kept by `ipc`, and the plots).
fn measure_on(arch: Arch, mode: Mode) -> Result<(Measured, Table)> {
    let a = artifacts::build(arch)?;
    let mut runs = Runs::new(&a);
    let alone = runs.alone_iterations()?;
    let mut rows = Vec::new();
    let mut kept = Vec::new();
    for (label, key, run) in SHARED {
        let out = runs.get(run)?;
        if !out.has("shutdown: Success") {
            bail!("{}: {} did not end cleanly:\n{}", arch.name(), run.manifest, out.log_text());
        }
        let missed: u64 = cpu::summary_accounts(out).iter().map(|a| a.missed).sum();
        for share in scenarios::shares(out, alone) {
            // The forever scenario has no work figure for a full second: report periods only.
            let error =
                if run == scenarios::FOREVER || run == scenarios::SLACK && share.domain != "five" {
                    f64::NAN
                } else {
                    share.measured - share.contract
                };
            if !error.is_nan() {
                kept.push((format!("{key}_{}_share_error", share.domain), error));
            }
            // With slack time the deviation is the slack received: not a figure to keep.
            if !(run == scenarios::SLACK && share.domain != "five") {
                kept.push((format!("{key}_{}_deviation_us", share.domain), share.deviation_us));
            }
            rows.push(ShareRow { scenario: label, share, error_points: error });
        }
        kept.push((format!("{key}_missed"), missed as f64));
    }
    let wake = cpu::wakeup_report(runs.get(scenarios::WAKEUP)?).context("no wakeup report")?;
    let latency = latency(&wake);
    kept.push(("wakeup_median_us".into(), latency.median_us));
    kept.push(("wakeup_p99_us".into(), latency.p99_us));
    kept.push(("wakeup_max_us".into(), latency.max_us));
    let kept = table(arch, "sched", kept);
    let (switch, plots) = match mode {
        Mode::Check => (f64::NAN, Vec::new()),
        Mode::Full => (measure(&IPC[1], mode, arch)?.instructions, plot(&a)?),
    };
    Ok((Measured { alone: alone as f64, rows, latency, switch, plots }, kept))
}

/// Boots the traced scenarios of [`PLOTS`] with the kernel of `a` and plots each domain's CPU
/// per period, to `target/bench/STEM-ARCH.svg`; their paths.
fn plot(a: &artifacts::Artifacts) -> Result<Vec<std::path::PathBuf>> {
    let dir = util::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    let mut plots = Vec::new();
    for (stem, title, run) in PLOTS {
        let out = scenarios::boot(a, run)?;
        let periods = cpu::periods(&out);
        if periods.is_empty() {
            bail!("{}: no period records with trace=sched", run.manifest);
        }
        let path = dir.join(format!("{stem}-{}.svg", a.arch.name()));
        let title = format!("{title} ({})", a.arch.name());
        std::fs::write(&path, qemu_run::plot::cpu_svg(&title, &domain_names(&out), &periods))?;
        plots.push(path);
        missed_summary(&periods, run.manifest)?;
    }
    Ok(plots)
}

/// Runs the bench on each of `arches`; returns its kept figures, a table per architecture.
/// [`Mode::Check`] stops there: no switch cost, no plots, no report.
pub(super) fn run(mode: Mode, arches: &[Arch]) -> Result<Vec<Table>> {
    let (measured, kept) = on_each(arches, mode, measure_on)?;
    if mode == Mode::Check {
        return Ok(kept);
    }
    let env = environment(arches);
    let mut md = env.heading("sched");
    let alone: Vec<String> =
        arches.iter().zip(&measured).map(|(a, m)| format!("{} {:.0}", a.name(), m.alone)).collect();
    md.push_str(&format!(
        "All boots under `-icount shift=0,sleep=off`; shares are work (loop iterations) relative to the same app alone with slack time (iterations per second: {}); per-period CPU is measured by each domain's own clock.\n\n",
        alone.join(", ")
    ));
    let mut t = ByArch::new(
        &["scenario", "domain", "contract %"],
        arches,
        &["measured %", "error (points)", "periods", "max per-period deviation (µs)"],
        &[],
    );
    for (i, r) in measured[0].rows.iter().enumerate() {
        let groups: Vec<Vec<String>> = measured
            .iter()
            .map(|m| {
                let r = &m.rows[i];
                let error = if r.error_points.is_nan() {
                    "-".to_string()
                } else {
                    format!("{:+.2}", r.error_points)
                };
                let measured = if r.scenario.starts_with("spinning") {
                    "-".to_string()
                } else {
                    format!("{:.2}", r.share.measured)
                };
                vec![
                    measured,
                    error,
                    r.share.periods.to_string(),
                    format!("{:.1}", r.share.deviation_us),
                ]
            })
            .collect();
        let lead =
            [r.scenario.to_string(), r.share.domain.clone(), format!("{:.2}", r.share.contract)];
        t.row(&lead, &groups, &[]);
    }
    md.push_str(&t.finish());
    md.push_str("\nFor domains with slack time (`extra = true`) the per-period deviation is the slack they received on top of their slice.\n");
    let hint = measured[0].latency.hint_us;
    md.push_str(&format!(
        "\nWake-up latency: from a send on a channel to the woken thread's first instruction, under load; latency hint {hint:.0} µs.\n\n"
    ));
    let mut t = ByArch::new(&["latency"], arches, &["µs or samples"], &[]);
    let figures: [Figure<Measured>; 5] = [
        ("samples", |m| m.latency.samples.to_string()),
        ("min", |m| format!("{:.1}", m.latency.min_us)),
        ("median", |m| format!("{:.1}", m.latency.median_us)),
        ("99th percentile", |m| format!("{:.1}", m.latency.p99_us)),
        ("max", |m| format!("{:.1}", m.latency.max_us)),
    ];
    t.figure_rows(&measured, &figures);
    for (i, (bucket, _)) in measured[0].latency.histogram.iter().enumerate() {
        let groups: Vec<Vec<String>> =
            measured.iter().map(|m| vec![m.latency.histogram[i].1.to_string()]).collect();
        t.row(&[format!("samples in {bucket}")], &groups, &[]);
    }
    md.push_str(&t.finish());
    let switches: Vec<String> = arches
        .iter()
        .zip(&measured)
        .map(|(a, m)| format!("{} {:.1}", a.name(), m.switch))
        .collect();
    let plots: Vec<String> =
        measured.iter().flat_map(|m| &m.plots).map(|p| p.display().to_string()).collect();
    md.push_str(&format!(
        "\nDomain switch (`yield` between two domains, including the call), in instructions: {}.\n\nLinux 6.1 in the same QEMU settings (x86_64; SCHED_DEADLINE, 1/2/5 ms of 10 ms): shares within 0.1 point and per-period deviation of 7-9 µs only with HRTICK_DL, about 3,000 µs with the default tick; sched_yield switch 1,766-2,133 instructions.\n\nPlots: {}\n",
        switches.join(", "),
        plots.join(", ")
    ));
    let json_arches: Vec<_> = arches
        .iter()
        .zip(&measured)
        .map(|(a, m)| {
            serde_json::json!({
                "arch": a.name(),
                "alone_iterations": m.alone,
                "shares": m.rows,
                "wakeup_latency": m.latency,
                "domain_switch_instructions": m.switch,
            })
        })
        .collect();
    let json = serde_json::json!({ "benchmark": "sched", "environment": env, "architectures": json_arches });
    write_report("sched", &md, json)?;
    Ok(kept)
}

fn latency(w: &cpu::WakeupReport) -> Latency {
    let bounds = [15.0, 50.0, 100.0, 200.0, 250.0];
    let mut histogram = Vec::new();
    let mut low = 0.0;
    for high in bounds {
        let n = w.all_us.iter().filter(|&&x| x >= low && x < high).count();
        histogram.push((format!("{low:.0}-{high:.0} µs"), n));
        low = high;
    }
    histogram.push((format!("≥ {low:.0} µs"), w.all_us.iter().filter(|&&x| x >= low).count()));
    Latency {
        samples: w.samples,
        hint_us: w.latency_ns as f64 / 1000.0,
        min_us: w.min_ns as f64 / 1000.0,
        median_us: w.median_ns as f64 / 1000.0,
        p99_us: w.p99_ns as f64 / 1000.0,
        max_us: w.max_ns as f64 / 1000.0,
        histogram,
    }
}

/// Domain names by index, from the kernel's `domain NAME (id I)` lines.
fn domain_names(out: &Outcome) -> Vec<String> {
    let mut names = Vec::new();
    for line in &out.log {
        let Some(rest) = line.message.strip_prefix("domain ") else { continue };
        let Some((name, after)) = rest.split_once(" (id ") else { continue };
        let Some(id) = after.split(')').next().and_then(|i| i.parse::<usize>().ok()) else {
            continue;
        };
        if names.len() <= id {
            names.resize(id + 1, String::new());
        }
        names[id] = name.to_string();
    }
    names
}

/// Fails if a traced scenario missed a deadline (the plots would show it in red too).
fn missed_summary(periods: &[Period], manifest: &str) -> Result<()> {
    let missed = periods.iter().filter(|p| p.missed).count();
    if missed > 0 {
        bail!("{manifest}: {missed} periods missed their deadline with trace=sched");
    }
    Ok(())
}
