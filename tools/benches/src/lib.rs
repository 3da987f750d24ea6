//! `cargo xtask bench NAME`: measurements, written as a markdown table and JSON under
//! `target/bench/`, each recording the commit, QEMU version, host, firmware and flags; and the
//! kept figures, guarded by a committed baseline.
//!
//! `boot`: boot to shutdown, for each firmware and architecture, as wall-clock time (median of
//! 5 runs, with min and max) and as virtual time under `-icount shift=0,sleep=off` (the kernel's
//! own timestamp on its shutdown record; deterministic).
//!
//! `ipc`: system-call and communication costs in instructions under `-icount`.
//!
//! `sched`: CPU contracts (see [`sched`]): share error, per-period deviation, wake-up latency
//! and domain switch cost, with an SVG of each domain's CPU per period.
//!
//! `canary`: a CPU-bound canary's work beside system-call fuzzers and sleepers in 64 domains,
//! against its work alone (see [`canary`]).
//!
//! `fault`: the user-level page fault round trip and self-paging (see [`fault`]); with
//! `--manifest M`, also the round trip of the app M boots (your own driver).
//!
//! `disk-raw`: the raw block path through a driver domain, per device and workload, in
//! instructions per request (split into driver, kernel and client) and IOPS (see [`disk_raw`]).
//!
//! `disk`: the anticipatory-scheduling experiments of Iyer & Druschel on the mechanical disk
//! model, in QEMU with and without anticipation, next to the host simulation and the paper
//! (see [`disk`]; `--quick`, `--host-only`). Kept: two sequential readers with and without
//! anticipation and the USD's isolated stream (MB/s), and the scheduler's instructions per
//! request, on virtio-blk.
//!
//! `net`: the network path between two virtio-net driver domains of one machine: instructions
//! per UDP round trip (split into the drivers, the clients and the kernel) and the driver's
//! idle CPU (see [`net`]).
//!
//! `paging`: the Heracles thesis's programs under each local paging hierarchy, on the disk
//! model, next to the thesis's findings (see [`paging`]).
//!
//! `remote`: the same programs paging to another node's memory (paging servers behind a
//! second network driver domain of one hub), against the local disk and the compressed
//! cache, with mirroring's cost and the client's and the server's CPU per remote fault (see
//! [`remote`]).
//!
//! Every bench runs on both architectures unless `--arch` names some, and prints their figures
//! side by side, one column per architecture.
//!
//! `report` (also `bench --report`): the book's plots from real runs, written to `docs/plots/`
//! beside the data each is drawn from (see [`plots`]): CPU per period against the contracts,
//! page fault latencies, throughput against think time; on riscv64 unless `--arch` names
//! another.
//!
//! `all`: every bench for the architectures given, then one table of the kept figures against
//! the baseline (`--update-baseline` rewrites `bench/baseline.toml` and
//! `docs/performance.md` from this run). `check`: the deterministic figures only, measured
//! once, failing when one is worse than its baseline beyond its tolerance or is missing from
//! either side ([`baseline`], [`figures`]).
//!
//! Invariants: a bench measures, it never passes or fails a test; the deterministic figures are
//! counted in instructions or virtual time under `-icount`, and wall-clock figures are reported
//! with their spread, never held to a baseline; every report records the commit it measured,
//! and the baseline is rewritten only from a committed tree. The CPU-contract scenarios are the
//! suites' (`test_suites::sched`); the boots and records are `qemu_run`'s.

mod baseline;
mod boot;
mod by_arch;
mod canary;
mod disk;
mod disk_raw;
mod fault;
mod figures;
mod ipc;
mod measure;
mod net;
mod paging;
mod performance_doc;
pub mod plots;
mod remote;
mod sched;
mod switch_scaling;

use std::process::Command;

use anyhow::{Result, bail};
use clap::ValueEnum;

use tool_base::{Arch, setup, util};

pub use baseline::Table;
pub use disk::DiskOptions;
pub use measure::Mode;
use measure::commit;

/// The benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Name {
    /// Boot to shutdown.
    Boot,
    /// System-call and communication costs, in instructions under -icount.
    Ipc,
    /// CPU contracts: shares, per-period deviation, wake-up latency, switch cost.
    Sched,
    /// A CPU-bound canary's work beside system-call fuzzers in 64 domains, against alone.
    Canary,
    /// The user-level page fault round trip, and self-paging under CPU contracts.
    Fault,
    /// The raw block path: virtio-blk and AHCI through a driver domain, per request.
    DiskRaw,
    /// The network path: instructions per UDP round trip, the driver's idle CPU.
    Net,
    /// Anticipatory disk scheduling: the paper's experiments on the Deskstar model.
    Disk,
    /// The Heracles thesis's programs under each local paging hierarchy.
    Paging,
    /// The same programs paging to another node's memory, against the disk and the cache.
    Remote,
    /// Every bench, then the kept figures against bench/baseline.toml.
    All,
    /// The kept (deterministic) figures against bench/baseline.toml; fails if one got worse.
    Check,
    /// The book's plots from real runs, with their data, into docs/plots (one architecture).
    Report,
}

/// What `cargo xtask bench` was asked for beside the bench's name.
pub struct Options {
    /// The architectures (`--arch`); empty: the default of the command.
    pub arches: Vec<Arch>,
    /// `--update-baseline` (with `all`).
    pub update_baseline: bool,
    /// `--quick` and `--host-only` (`disk`).
    pub disk: disk::DiskOptions,
    /// `--manifest` (`fault`): a manifest whose app reports `APP: bench faults=N fault_ns=T
    /// touch_ns=U`, measured beside the built-in round trips (your own driver).
    pub fault_manifest: Option<String>,
}

/// The architectures every bench runs on unless `--arch` names some.
const ARCHES: [Arch; 2] = [Arch::Riscv64, Arch::X86_64];

/// Runs benchmark `name`; returns the exit status (1: `check` found a figure worse or missing).
pub fn run(name: Name, opts: Options) -> Result<u8> {
    setup::ensure(setup::Needs { gdb: false, qemu: !opts.disk.host_only, dtc: false, vde: false })?;
    if opts.update_baseline && matches!(name, Name::Check | Name::Report) {
        bail!("--update-baseline goes with `bench all` or one bench, not `{}`", bench_name(name));
    }
    if name == Name::Report {
        return plots::run(&opts.arches);
    }
    if opts.update_baseline {
        let status = util::output(
            Command::new("git").current_dir(util::root()).args(["status", "--porcelain"]),
        )?;
        baseline::refuse_dirty(&status).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let root = util::root();
    let text = std::fs::read_to_string(root.join(baseline::PATH)).unwrap_or_default();
    let mut base = baseline::parse(baseline::PATH, &text).map_err(|e| anyhow::anyhow!("{e}"))?;
    match name {
        Name::All | Name::Check => {
            let arches = match (&opts.arches[..], name) {
                ([], Name::All) => ARCHES.to_vec(),
                // The check covers every architecture the baseline keeps.
                ([], _) => ARCHES
                    .into_iter()
                    .filter(|a| base.tables.iter().any(|t| t.arch == a.name()))
                    .collect(),
                (given, _) => given.to_vec(),
            };
            let mode = if name == Name::All { Mode::Full } else { Mode::Check };
            let mut tables = Vec::new();
            for bench in [
                Name::Boot,
                Name::Ipc,
                Name::Sched,
                Name::Canary,
                Name::Fault,
                Name::DiskRaw,
                Name::Net,
                Name::Disk,
                Name::Paging,
                Name::Remote,
            ] {
                eprintln!("bench {}: {}", bench_name(bench), names(&arches));
                let measured = one(bench, mode, &arches, &opts)?;
                if opts.update_baseline {
                    repeated(bench, &measured, || one(bench, Mode::Check, &arches, &opts))?;
                }
                tables.extend(measured);
            }
            let arch_names: Vec<&str> = arches.iter().map(|a| a.name()).collect();
            let failed = report(&base, &tables, &arch_names, name == Name::Check);
            if opts.update_baseline {
                update_baseline(&mut base, tables)?;
                return Ok(0);
            }
            Ok(if failed && name == Name::Check { 1 } else { 0 })
        }
        bench => {
            let arches = if opts.arches.is_empty() { ARCHES.to_vec() } else { opts.arches.clone() };
            let tables = one(bench, Mode::Full, &arches, &opts)?;
            report(&base, &tables, &[], false);
            if opts.update_baseline {
                repeated(bench, &tables, || one(bench, Mode::Check, &arches, &opts))?;
                update_baseline(&mut base, tables)?;
            }
            Ok(0)
        }
    }
}

/// Replaces `base`'s tables by `tables` (those measured) and writes the baseline and
/// `docs/performance.md`.
fn update_baseline(base: &mut baseline::Baseline, tables: Vec<Table>) -> Result<()> {
    // The tree was clean when the bench started; a change made while it ran (the tables then
    // say `-dirty`, or name another commit) would leave figures that no commit measured.
    let now = commit();
    if let Some(t) = tables.iter().find(|t| t.commit != now || t.commit.ends_with("-dirty")) {
        bail!(
            "the tree changed while the bench ran ({} when measured, {} now): the baseline is not written; commit or stash, and run it again",
            t.commit,
            now
        );
    }
    for t in tables {
        base.replace(t);
    }
    let root = util::root();
    std::fs::write(root.join(baseline::PATH), base.toml())?;
    std::fs::write(root.join(performance_doc::PATH), performance_doc::generate(base))?;
    println!("\nwritten: {}, {}", baseline::PATH, performance_doc::PATH);
    Ok(())
}

fn bench_name(name: Name) -> &'static str {
    match name {
        Name::Boot => "boot",
        Name::Ipc => "ipc",
        Name::Sched => "sched",
        Name::Canary => "canary",
        Name::Fault => "fault",
        Name::DiskRaw => "disk-raw",
        Name::Net => "net",
        Name::Disk => "disk",
        Name::Paging => "paging",
        Name::Remote => "remote",
        Name::All => "all",
        Name::Check => "check",
        Name::Report => "report",
    }
}

fn names(arches: &[Arch]) -> String {
    arches.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
}

/// Runs one bench on `arches` and returns its kept figures, a table per architecture.
fn one(bench: Name, mode: Mode, arches: &[Arch], opts: &Options) -> Result<Vec<Table>> {
    let tables = match bench {
        Name::Boot => boot::run(mode, arches)?,
        Name::Ipc => ipc::run(mode, arches)?,
        Name::Sched => sched::run(mode, arches)?,
        Name::Canary => canary::run(mode, arches)?,
        Name::Fault => fault::run(mode, arches, opts.fault_manifest.as_deref())?,
        Name::DiskRaw => disk_raw::run(mode, arches)?,
        Name::Net => net::run(mode, arches)?,
        Name::Disk => disk::run(mode, arches, opts.disk)?,
        Name::Paging => paging::run(mode, arches)?,
        Name::Remote => remote::run(mode, arches)?,
        Name::All | Name::Check | Name::Report => unreachable!("not a single bench"),
    };
    Ok(tables)
}

/// The benches whose kept figures come from one boot each: `--update-baseline` measures them
/// a second time and keeps them only if both agree (the others repeat their boots themselves,
/// [`icount_runs`], or keep a median).
const BOOTED_ONCE: [Name; 5] = [Name::Sched, Name::Canary, Name::Disk, Name::Paging, Name::Remote];

/// `tables` measured again by `again` (in [`Mode::Check`]), when `bench` is one of
/// [`BOOTED_ONCE`] and figures are to be kept: an error if a figure differs between the two.
fn repeated(
    bench: Name,
    tables: &[Table],
    again: impl FnOnce() -> Result<Vec<Table>>,
) -> Result<()> {
    if !BOOTED_ONCE.contains(&bench) {
        return Ok(());
    }
    let again = again()?;
    baseline::agree(tables, &again).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Prints the kept figures of `tables` against `base`: figure, unit, baseline, now, change.
/// With `strict`, also every table of the baseline for `arches` that was not measured. Returns
/// whether any figure fails the check.
fn report(base: &baseline::Baseline, tables: &[Table], arches: &[&str], strict: bool) -> bool {
    let mut compared: Vec<(&str, &str, Vec<baseline::Comparison>)> = Vec::new();
    for t in tables {
        let c = baseline::compare(base.table(&t.arch, &t.bench), t, |k| {
            figures::lookup(&t.arch, &t.bench, k)
        });
        compared.push((&t.arch, &t.bench, c));
    }
    if strict {
        for b in &base.tables {
            let measured = tables.iter().any(|t| t.arch == b.arch && t.bench == b.bench);
            if arches.contains(&b.arch.as_str()) && !measured {
                let empty = Table { figures: Vec::new(), ..b.clone() };
                let c =
                    baseline::compare(Some(b), &empty, |k| figures::lookup(&b.arch, &b.bench, k));
                compared.push((&b.arch, &b.bench, c));
            }
        }
    }
    println!("\n# kept figures against {}\n", baseline::PATH);
    println!("| figure | unit | baseline | now | change | |\n|---|---|---:|---:|---:|---|");
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    let mut failed = Vec::new();
    let mut better = Vec::new();
    for (arch, bench, cs) in &compared {
        for c in cs {
            let mark = match c.verdict {
                baseline::Verdict::Within => "",
                baseline::Verdict::Worse => "WORSE",
                baseline::Verdict::Better => "better",
                baseline::Verdict::NotInBaseline => "not in baseline",
                baseline::Verdict::NotMeasured => "not measured",
            };
            let change = match (c.change(), c.baseline) {
                (Some(d), Some(b)) if b != 0.0 => format!("{d:+.2} ({:+.2}%)", d * 100.0 / b.abs()),
                (Some(d), _) => format!("{d:+.2}"),
                _ => "-".into(),
            };
            println!(
                "| {arch}.{bench}.{} | {} | {} | {} | {change} | {mark} |",
                c.key,
                c.spec.unit,
                show(c.baseline),
                show(c.now)
            );
            if c.fails() {
                failed.push(c.describe(arch, bench));
            } else if c.verdict == baseline::Verdict::Better {
                better.push(c.describe(arch, bench));
            }
        }
    }
    if !better.is_empty() {
        println!(
            "\nBetter than the baseline beyond tolerance (update it: `cargo xtask bench all --update-baseline`):"
        );
        for b in &better {
            println!("  {b}");
        }
    }
    if !failed.is_empty() {
        println!("\nWorse than the baseline beyond tolerance, or on one side only:");
        for f in &failed {
            println!("  {f}");
        }
    }
    !failed.is_empty()
}
