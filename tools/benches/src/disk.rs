//! `cargo xtask bench disk`: the anticipatory-scheduling experiments of Iyer & Druschel (SOSP
//! 2001) on Tessera, each booted in QEMU under `-icount shift=0,sleep=off` over the mechanical
//! model of the paper's disk (the IBM Deskstar 34GXP, `model = "deskstar-34gxp"`), with and
//! without anticipation, on virtio-blk (both architectures) and AHCI (x86_64); next to the
//! same configuration simulated on the host with the driver's own scheduling code, the paper's
//! figure and, where Tessera's differs, why.
//!
//! Experiments ([`experiments::plan`]): (a) sequential readers, (b) random readers, (c) a
//! think-time sweep (plotted), (d) the adversary, (e) a 1:2 Stride contract, (f) 2 to 8
//! sequential readers, (g) isolation under the USD (each stream's disk time per period
//! plotted), (h) the scheduler's cost per request: the driver's own (instructions under
//! `-icount`) and the host's ns per request. Bars Tessera must meet are checked on every device
//! and on the host, and print pass/FAIL.
//!
//! `--quick` boots fewer sweep points; `--host-only` boots nothing (the simulation and the
//! host cost only). Boots run one after the other, as in the other benches. The report is
//! written to `target/bench/disk.{md,json}`, the plots and manifests under
//! `target/bench/disk/`. Kept in the baseline: the figures of [`KEPT_RUNS`] on virtio-blk on each
//! architecture (deterministic under `-icount`), which `bench check` boots alone.

mod experiments;
mod host;
mod lines;
mod manifests;
mod report;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use disk_sched::heuristics::Weigh;

use crate::baseline::Table;
use crate::measure::{Mode, environment, write_report};
use experiments::{Run, Size};
use lines::Measured;
use manifests::Device;
use qemu_run::qemu::Ending;
use qemu_run::qemu::IcountBoot;
use report::Source;
pub(crate) use report::{THINK_TITLE, ThinkPoint, think_svg};
use tool_base::{Arch, artifacts, util};

/// What `bench disk` was asked for beside the architectures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskOptions {
    /// Fewer sweep points and readers.
    pub quick: bool,
    /// No boots: the host simulation and cost only.
    pub host_only: bool,
}

/// The name of the host simulation with the paper's weighing of a wait (shown, not checked).
const PAPER_RULE: &str = "host sim, the paper's rule";

/// A boot's longest wall time.
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);

/// Boots `run` on `dev` and reads what it measured.
fn boot(a: &artifacts::Artifacts, run: &Run, dev: &Device) -> Result<Measured> {
    let rel = manifests::path(run, dev);
    let path = util::root().join(&rel);
    std::fs::create_dir_all(path.parent().expect("a file in a directory"))?;
    std::fs::write(&path, manifests::manifest(run, dev))?;
    let mut prepared = IcountBoot::new(a, &rel, "").with_context(|| format!("preparing {rel}"))?;
    prepared.boot.timeout = BOOT_TIMEOUT;
    let out = prepared.run(a)?;
    if out.ending != Ending::Kernel(0) {
        bail!("{rel}: the boot ended {:?}:\n{}", out.ending, out.log_text());
    }
    let m = Measured::from_lines(out.log.iter().map(|l| l.message.as_str()));
    if m.clients.len() != run.clients.len() {
        bail!(
            "{rel}: {} of {} clients reported `diskread NAME: done`:\n{}",
            m.clients.len(),
            run.clients.len(),
            out.log_text()
        );
    }
    Ok(m)
}

/// A device's source name.
fn source_name(arch: Arch, dev: &Device) -> String {
    format!("{} {}", arch.name(), dev.key)
}

/// The runs whose figures are kept, booted on virtio-blk on each architecture: two
/// sequential readers with and without anticipation, and the USD's isolated stream.
const KEPT_RUNS: [&str; 3] = ["a-two-with", "a-two-without", "g-usd-with"];

/// The kept figures of `arch` from its virtio-blk runs `results`, if all of [`KEPT_RUNS`] ran.
fn kept(arch: Arch, results: &BTreeMap<String, Measured>) -> Option<Table> {
    let [with, without, usd] = KEPT_RUNS.map(|k| results.get(k));
    let (with, without, usd) = (with?, without?, usd?);
    let instr = |m: &Measured| m.sched.as_ref().map(|s| s.per_request_ns as f64);
    let exceeded: u64 =
        [with, usd].iter().filter_map(|m| m.waits.as_ref()).map(|w| w.exceeded).sum();
    Some(crate::measure::table(
        arch,
        "disk",
        vec![
            ("two_readers_with_mbps".into(), round2(with.total_mbps())),
            ("two_readers_without_mbps".into(), round2(without.total_mbps())),
            ("usd_stream_mbps".into(), round2(usd.client_mbps(0)?)),
            ("scheduler_instructions_aged_sptf".into(), instr(with)?),
            ("scheduler_instructions_usd".into(), instr(usd)?),
            ("waits_past_timeout".into(), exceeded as f64),
        ],
    ))
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// `bench check`: only the kept runs, on virtio-blk on each of `arches`.
fn check(arches: &[Arch]) -> Result<Vec<Table>> {
    let (runs, _) = experiments::plan(Size::Quick);
    let dev = &manifests::DEVICES[0];
    let mut tables = Vec::new();
    for &arch in arches {
        let a = artifacts::build(arch)?;
        let mut results = BTreeMap::new();
        for key in KEPT_RUNS {
            let run = runs.iter().find(|r| r.key == key).expect("a planned run");
            results.insert(key.to_string(), boot(&a, run, dev)?);
        }
        tables.extend(kept(arch, &results));
    }
    Ok(tables)
}

/// The think-time sweep (experiment c, every think time) booted on `arch`'s virtio-blk and
/// simulated on the host (with Tessera's weighing of a wait, and with the paper's), as the
/// points of its plot: what `bench report` draws for the book.
pub(crate) fn think_sweep(arch: Arch) -> Result<Vec<ThinkPoint>> {
    let (runs, experiments) = experiments::plan(Size::Full);
    let e = experiments.iter().find(|e| e.key == "c-think").context("no think-time sweep")?;
    let keys: Vec<&String> = e.rows.iter().flat_map(|r| r.with.iter().chain(&r.without)).collect();
    let a = artifacts::build(arch)?;
    let dev = &manifests::DEVICES[0];
    let (mut booted, mut host, mut paper) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for (i, &key) in keys.iter().enumerate() {
        let run = runs.iter().find(|r| &r.key == key).context("an unplanned run")?;
        eprintln!("bench report: {} {key} ({}/{})", source_name(arch, dev), i + 1, keys.len());
        booted.insert(key.clone(), boot(&a, run, dev)?);
        host.insert(key.clone(), host::simulate(run));
        paper.insert(key.clone(), host::simulate_weighing(run, Weigh::Paper));
    }
    let sources = [
        Source { name: source_name(arch, dev), runs: &booted, checked: true },
        Source { name: report::NOTE_SOURCE.into(), runs: &host, checked: true },
        Source { name: PAPER_RULE.into(), runs: &paper, checked: false },
    ];
    Ok(report::think_points(e, &sources))
}

/// Runs the bench on `arches`; writes its report and plots, and returns the kept figures
/// ([`KEPT_RUNS`] on virtio-blk); fails after the report if a boot failed. In
/// [`Mode::Check`] it boots only the kept runs and writes no report.
pub fn run(mode: Mode, arches: &[Arch], opts: DiskOptions) -> Result<Vec<Table>> {
    if mode == Mode::Check {
        return check(arches);
    }
    let size = if opts.quick { Size::Quick } else { Size::Full };
    let (runs, experiments) = experiments::plan(size);

    eprintln!("bench disk: simulating {} runs on the host", runs.len());
    let host_runs: BTreeMap<String, Measured> =
        runs.iter().map(|r| (r.key.clone(), host::simulate(r))).collect();
    // The paper's weighing, for comparison, where it differs from Tessera's: the think-time
    // sweep and the adversary.
    let paper_runs: BTreeMap<String, Measured> = experiments
        .iter()
        .filter(|e| e.key == "c-think" || e.key == "d-adversary")
        .flat_map(|e| e.rows.iter().flat_map(|r| r.with.iter().chain(&r.without)))
        .filter_map(|k| runs.iter().find(|r| &r.key == k))
        .map(|r| (r.key.clone(), host::simulate_weighing(r, Weigh::Paper)))
        .collect();
    eprintln!("bench disk: timing the schedulers on the host");
    let mut host_costs = Vec::new();
    for s in experiments::Scheduler::ALL {
        for on in [true, false] {
            // FCFS has no heuristic: it never anticipates.
            if !(on && s == experiments::Scheduler::Fcfs) {
                host_costs.push(host::cost(s, on, 3));
            }
        }
    }

    // Boots: every run on every device of every architecture.
    let mut measured: Vec<(String, BTreeMap<String, Measured>)> = Vec::new();
    let mut failures = Vec::new();
    let mut kept_tables = Vec::new();
    if !opts.host_only {
        for &arch in arches {
            let a = artifacts::build(arch)?;
            for dev in manifests::DEVICES.iter().filter(|d| d.on(arch)) {
                let name = source_name(arch, dev);
                let mut results = BTreeMap::new();
                let booted: Vec<&Run> = runs.iter().filter(|r| !r.host_only).collect();
                for (i, run) in booted.iter().enumerate() {
                    eprintln!("bench disk: {name} {} ({}/{})", run.key, i + 1, booted.len());
                    match boot(&a, run, dev) {
                        Ok(m) => {
                            results.insert(run.key.clone(), m);
                        }
                        Err(e) => {
                            eprintln!("bench disk: {name} {}: {e:#}", run.key);
                            failures.push(format!("{name} {}", run.key));
                            // The first run failing says the device's setup does: skip it.
                            if results.is_empty() {
                                break;
                            }
                        }
                    }
                }
                if dev.key == "virtio" {
                    kept_tables.extend(kept(arch, &results));
                }
                measured.push((name, results));
            }
        }
    }

    let mut sources: Vec<Source<'_>> = measured
        .iter()
        .map(|(name, runs)| Source { name: name.clone(), runs, checked: true })
        .collect();
    sources.push(Source { name: report::NOTE_SOURCE.into(), runs: &host_runs, checked: true });
    sources.push(Source { name: PAPER_RULE.into(), runs: &paper_runs, checked: false });

    let env = environment(arches);
    let mut md = env.heading("disk");
    md.push_str(&format!(
        "The paper's experiments on the Deskstar 34GXP model, {} KiB synchronous reads, \
         Aged-SPTF ({} s bound, turns of {} s) unless said. `with`/`without`: anticipation \
         on/off. QEMU runs under `-icount shift=0,sleep=off` (deterministic); `host sim`: the \
         same configuration in `disk_sched::sim` with the driver's scheduling code, each reader \
         thinking {} µs more (its CPU time); the notes' figures are the host simulation's.\n",
        experiments::READ_BYTES / 1024,
        disk_sched::scheduler::AGED_BOUND_NS as f64 / 1e9,
        disk_sched::scheduler::AGED_TURN_NS as f64 / 1e9,
        host::CLIENT_CPU_NS / 1000,
    ));
    let mut all_pass = true;
    for e in &experiments {
        all_pass &= report::experiment(&mut md, e, &runs, &sources);
    }
    report::costs(&mut md, &runs, &sources, &host_costs);
    all_pass &= report::waits(&mut md, &sources);

    // Plots.
    let dir = util::target_dir().join("bench").join("disk");
    std::fs::create_dir_all(&dir)?;
    let mut written = Vec::new();
    for e in experiments.iter().filter(|e| e.plot.is_some()) {
        let plot = e.plot.expect("filtered");
        if plot == "think-time" {
            let p = dir.join("think-time.svg");
            std::fs::write(&p, report::think_plot(e, &sources))?;
            written.push(p);
        } else {
            // Each source's run with anticipation: the stream's disk time per period.
            let Some(key) = e.rows.first().and_then(|r| r.with.clone()) else { continue };
            let run = runs.iter().find(|r| r.key == key).expect("planned");
            for s in &sources {
                let Some(m) = s.runs.get(&key) else { continue };
                let file = format!("{plot}-{}.svg", s.name.replace(' ', "-"));
                let title = format!("Disk time per period under the USD ({}, {key})", s.name);
                let p = dir.join(file);
                std::fs::write(&p, report::periods_plot(&title, run, m))?;
                written.push(p);
            }
        }
    }
    md.push_str("\nPlots:\n");
    for p in &written {
        md.push_str(&format!("- {}\n", p.display()));
    }
    md.push_str(&format!(
        "\nBars: {}.\n",
        if all_pass { "every bar checked passed" } else { "some bar FAILED (see above)" }
    ));
    if !failures.is_empty() {
        md.push_str(&format!(
            "\nBoots that failed ({}): {}\n",
            failures.len(),
            failures.join(", ")
        ));
    }

    let json = serde_json::json!({
        "benchmark": "disk",
        "environment": env,
        "quick": opts.quick,
        "sources": sources.iter().map(|s| serde_json::json!({
            "name": s.name,
            "runs": s.runs.iter().map(|(k, m)| serde_json::json!({
                "run": k,
                "mb_per_s": m.total_mbps(),
                "clients": m.clients.iter().map(|c| serde_json::json!({
                    "name": c.name, "bytes": c.bytes, "reads": c.reads,
                    "first_ns": c.first_ns, "last_ns": c.last_ns,
                    "mean_latency_ns": c.mean_latency_ns, "max_latency_ns": c.max_latency_ns,
                })).collect::<Vec<_>>(),
                "waits": m.waits.map(|w| serde_json::json!({
                    "count": w.count, "anticipated": w.anticipated, "timed_out": w.timed_out,
                    "abandoned": w.abandoned, "exceeded": w.exceeded, "late_max_ns": w.late_max_ns,
                    "longest_ns": w.longest_ns,
                })),
                "scheduler_per_request": m.sched.as_ref().map(|c| c.per_request_ns),
                "periods": m.periods.iter().map(|p| serde_json::json!({
                    "stream": p.stream, "start": p.start, "end": p.end,
                    "guaranteed": p.guaranteed, "extra": p.extra, "missed": p.missed,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "host_cost_ns_per_request": host_costs.iter().map(|c| serde_json::json!({
            "scheduler": c.scheduler.name(), "anticipation": c.anticipation,
            "ns": c.per_request_ns, "requests": c.requests,
        })).collect::<Vec<_>>(),
    });
    write_report("disk", &md, json)?;
    if !failures.is_empty() {
        bail!("{} boot(s) of bench disk failed: {}", failures.len(), failures.join(", "));
    }
    Ok(kept_tables)
}
