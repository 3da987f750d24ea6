//! `cargo xtask bench fault`: the user-level page fault round trip and self-paging under CPU
//! contracts, on each architecture side by side.
//!
//! The round trip (a store to an unmapped page of a managed stretch traps; the kernel saves the
//! context and enters the domain's activation handler; the runtime runs the stretch driver as
//! the faulting thread; the driver maps a frame with `map`; the thread resumes and the store
//! completes) is timed by the `faulter` app over 2,000 faults, minus the same stores once the
//! pages are resident: in instructions under `-icount shift=0,sleep=off` (three boots, which
//! must agree) and in wall time (median of five boots, with min and max), without and with the
//! driver zero-filling each page (its frames were zeroed by the kernel when it took them, so
//! the zero-filling variant measures the cost of a driver that must clear recycled frames).
//!
//! The self-paging figures come from the scenarios of [`test_suites::sched`]: the change in a
//! neighbour's work while a domain faults continuously, and the fault rate's response to
//! doubling the faulting domain's slice.

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::by_arch::{ByArch, Figure};
use super::figures;
use crate::baseline::Table;
use crate::measure::{Mode, RUNS, environment, icount_runs, on_each, table, write_report};
use qemu_run::qemu::IcountBoot;
use qemu_run::qemu::{Ending, Outcome};
use test_suites::sched::{self, Runs};
use tool_base::{Arch, artifacts};

/// The variants of the round trip: name, key in the baseline, manifest.
const VARIANTS: [(&str, &str, &str); 2] = [
    (
        "fault, driver maps a zeroed frame, resume",
        "round_trip",
        "tests/manifests/paging/bench-fault.toml",
    ),
    (
        "fault, driver maps and zero-fills the page, resume",
        "round_trip_zero_fill",
        "tests/manifests/paging/bench-fault-zero.toml",
    ),
];

#[derive(Serialize)]
struct Row {
    variant: String,
    instructions: f64,
    icount_runs: usize,
    icount_spread: f64,
    wall_ns_median: f64,
    wall_ns_min: f64,
    wall_ns_max: f64,
    wall_runs: usize,
    faults: u64,
}

/// Nanoseconds per fault from the `APP: bench faults=` line (`faulter`'s, or the demo app of
/// `cargo xtask new-driver`): the faulting round minus the resident round, divided by the
/// faults.
pub(super) fn per_fault(out: &Outcome) -> Result<(f64, u64)> {
    if out.ending != Ending::Kernel(0) {
        bail!("the boot ended {:?}:\n{}", out.ending, out.log_text());
    }
    let line = out.line(": bench faults=").context("no `APP: bench faults=` report")?;
    let get = |k| qemu_run::log::field(&line.message, k).with_context(|| format!("no {k}="));
    let (faults, fault_ns, touch_ns) = (get("faults")?, get("fault_ns")?, get("touch_ns")?);
    Ok(((fault_ns.saturating_sub(touch_ns)) as f64 / faults.max(1) as f64, faults))
}

fn spread(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)))
}

fn measure(variant: &str, manifest: &str, a: &artifacts::Artifacts, mode: Mode) -> Result<Row> {
    let mut prepared = IcountBoot::new(a, manifest, "")?;
    let mut icount = Vec::new();
    let mut faults = 0;
    for _ in 0..icount_runs(mode) {
        let (ns, n) = per_fault(&prepared.run(a)?)?;
        icount.push(ns);
        faults = n;
    }
    let (lo, hi) = spread(&icount);
    if hi != lo {
        bail!("{manifest}: the figure differs between boots under -icount: {icount:?}");
    }
    prepared.boot.icount = false;
    let mut wall = Vec::new();
    for _ in 0..if mode == Mode::Full { RUNS } else { 0 } {
        wall.push(per_fault(&prepared.run(a)?)?.0);
    }
    wall.sort_by(f64::total_cmp);
    let wall = if wall.is_empty() { vec![f64::NAN] } else { wall };
    Ok(Row {
        variant: variant.to_string(),
        instructions: icount[0],
        icount_runs: icount.len(),
        icount_spread: hi - lo,
        wall_ns_median: wall[wall.len() / 2],
        wall_ns_min: wall[0],
        wall_ns_max: wall[wall.len() - 1],
        wall_runs: wall.len(),
        faults,
    })
}

/// What one architecture measured.
struct Measured {
    rows: Vec<Row>,
    change: f64,
    rate: f64,
    ratio: f64,
}

/// Measures on `arch`; returns the figures and the kept table.
fn measure_on(arch: Arch, mode: Mode) -> Result<(Measured, Table)> {
    let a = artifacts::build(arch)?;
    let rows =
        VARIANTS.iter().map(|(v, _, m)| measure(v, m, &a, mode)).collect::<Result<Vec<_>>>()?;
    let mut runs = Runs::new(&a);
    let change = sched::neighbour_change(&mut runs).map_err(anyhow::Error::msg)?;
    let ratio = sched::fault_rate_ratio(&mut runs).map_err(anyhow::Error::msg)?;
    let rate = sched::fault_rate(runs.get(sched::PAGING_FAULTS)?).map_err(anyhow::Error::msg)?;
    let mut kept: Vec<(String, f64)> =
        VARIANTS.iter().zip(&rows).map(|((_, k, _), r)| (k.to_string(), r.instructions)).collect();
    kept.push(("neighbour_change".into(), change));
    kept.push(("fault_rate".into(), rate));
    kept.push(("fault_rate_ratio".into(), ratio));
    Ok((Measured { rows, change, rate, ratio }, table(arch, "fault", kept)))
}

/// Runs the benchmark on each of `arches` and writes `target/bench/fault.{md,json}` (not in
/// [`Mode::Check`]); returns its kept figures, a table per architecture.
pub fn run(mode: Mode, arches: &[Arch], user: Option<&str>) -> Result<Vec<Table>> {
    let (mut measured, kept) = on_each(arches, mode, measure_on)?;
    if mode == Mode::Check {
        return Ok(kept);
    }
    // Your own driver's round trip, measured the same way, beside the built-in ones.
    if let Some(manifest) = user {
        for (arch, m) in arches.iter().zip(&mut measured) {
            let a = artifacts::build(*arch)?;
            let variant = format!("your driver: `{manifest}`");
            m.rows.push(measure(&variant, manifest, &a, mode)?);
        }
    }
    let env = environment(arches);
    let mut md = env.heading("fault");
    md.push_str("## User-level fault round trip\n\n");
    let mut t = ByArch::new(
        &["round trip"],
        arches,
        &["instructions", "wall ns (min-max)"],
        &["Linux 6.1, x86_64"],
    );
    // Row `i` of every architecture: instructions, and wall time with its range.
    let groups = |i: usize| -> Vec<Vec<String>> {
        measured
            .iter()
            .map(|m| {
                let r = &m.rows[i];
                vec![
                    format!("{:.0}", r.instructions),
                    format!("{:.0} ({:.0}-{:.0})", r.wall_ns_median, r.wall_ns_min, r.wall_ns_max),
                ]
            })
            .collect()
    };
    for (i, (variant, key, _)) in VARIANTS.iter().enumerate() {
        let anchor = figures::lookup(arches[0].name(), "fault", key).map_or("", |s| s.anchor);
        t.row(&[variant.to_string()], &groups(i), &[anchor.to_string()]);
    }
    if user.is_some() {
        let i = VARIANTS.len();
        t.row(&[measured[0].rows[i].variant.clone()], &groups(i), &[String::new()]);
    }
    md.push_str(&t.finish());
    let first = &measured[0].rows[0];
    md.push_str(&format!(
        "\nPer fault, over {} faults, minus the same stores to resident pages; instructions are guest nanoseconds under `-icount shift=0,sleep=off` ({} boots, which agree), wall time is the app's clock without `-icount` (median of {} boots). Every boot has 512 MiB of RAM; on x86_64 these are the settings of the Linux figures (`-machine q35 -cpu max -m 512M`).\n",
        first.faults, first.icount_runs, first.wall_runs
    ));
    md.push_str("\n## Self-paging under CPU contracts\n\n");
    let mut t = ByArch::new(&["measure"], arches, &["value"], &[]);
    let measures: [Figure<Measured>; 3] = [
        (
            "change in the neighbour's work while `pager` faults continuously (2 of 10 ms each, no slack)",
            |m| format!("{:+.4}%", m.change),
        ),
        ("`pager`'s fault rate (zero-filling recycling driver, 2 of 10 ms)", |m| {
            format!("{:.0} faults/s", m.rate)
        }),
        ("fault rate with the slice doubled / fault rate", |m| format!("{:.3}", m.ratio)),
    ];
    t.figure_rows(&measured, &measures);
    md.push_str(&t.finish());
    let json_arches: Vec<_> = arches
        .iter()
        .zip(&measured)
        .map(|(a, m)| {
            serde_json::json!({
                "arch": a.name(),
                "round_trip": m.rows,
                "self_paging": {
                    "neighbour_work_change_percent": m.change,
                    "fault_rate_per_s": m.rate,
                    "fault_rate_ratio_doubled_slice": m.ratio,
                },
            })
        })
        .collect();
    let json = serde_json::json!({
        "benchmark": "fault",
        "environment": env,
        "architectures": json_arches,
    });
    write_report("fault", &md, json)?;
    Ok(kept)
}
