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
//! `fault`: the user-level page fault round trip and self-paging (see [`fault`]).
//!
//! `all`: every bench for the architectures given, then one table of the kept figures against
//! the baseline (`--update-baseline` rewrites `bench/baseline.toml` and
//! `docs/performance.md` from this run). `check`: the deterministic figures only, measured
//! once, failing when one is worse than its baseline beyond its tolerance or is missing from
//! either side ([`baseline`], [`figures`]).

mod baseline;
mod fault;
mod figures;
mod performance_doc;
mod sched;

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use serde::Serialize;

use crate::artifacts;
use crate::log::Kernel;
use crate::qemu::{self, Boot, Ending};
use crate::{Arch, Bios, setup, util};

pub use baseline::Table;

/// The benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Name {
    /// Boot to shutdown.
    Boot,
    /// System-call and communication costs, in instructions under -icount.
    Ipc,
    /// CPU contracts: shares, per-period deviation, wake-up latency, switch cost.
    Sched,
    /// The user-level page fault round trip, and self-paging under CPU contracts.
    Fault,
    /// Every bench, then the kept figures against bench/baseline.toml.
    All,
    /// The kept (deterministic) figures against bench/baseline.toml; fails if one got worse.
    Check,
}

/// How a bench runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every figure, wall-clock ones too; reports written under `target/bench/`.
    Full,
    /// The kept figures only, each boot once: what `bench check` needs.
    Check,
}

/// What `cargo xtask bench` was asked for beside the bench's name.
pub struct Options {
    /// The architectures (`--arch`); empty: the default of the command.
    pub arches: Vec<Arch>,
    /// `--update-baseline` (with `all`).
    pub update_baseline: bool,
}

/// The benches that run on `arch`: all of them on RISC-V; boot alone on x86_64, which does not
/// boot domains yet.
fn benches_for(arch: Arch) -> &'static [Name] {
    match arch {
        Arch::Riscv64 => &[Name::Boot, Name::Ipc, Name::Sched, Name::Fault],
        Arch::X86_64 => &[Name::Boot],
    }
}

/// The architectures that boot domains: the default of `bench all`.
const DOMAIN_ARCHES: [Arch; 1] = [Arch::Riscv64];

/// Runs benchmark `name`; returns the exit status (1: `check` found a figure worse or missing).
pub fn run(name: Name, opts: Options) -> Result<u8> {
    setup::ensure(setup::Needs { gdb: false, qemu: true, dtc: false })?;
    if opts.update_baseline && name != Name::All {
        bail!("--update-baseline goes with `bench all`");
    }
    let root = util::root();
    let text = std::fs::read_to_string(root.join(baseline::PATH)).unwrap_or_default();
    let mut base = baseline::parse(baseline::PATH, &text).map_err(|e| anyhow::anyhow!("{e}"))?;
    match name {
        Name::All | Name::Check => {
            let arches = match (&opts.arches[..], name) {
                ([], Name::All) => DOMAIN_ARCHES.to_vec(),
                // The check covers every architecture the baseline keeps.
                ([], _) => [Arch::Riscv64, Arch::X86_64]
                    .into_iter()
                    .filter(|a| base.tables.iter().any(|t| t.arch == a.name()))
                    .collect(),
                (given, _) => given.to_vec(),
            };
            let mode = if name == Name::All { Mode::Full } else { Mode::Check };
            let mut tables = Vec::new();
            for bench in [Name::Boot, Name::Ipc, Name::Sched, Name::Fault] {
                let on: Vec<Arch> =
                    arches.iter().copied().filter(|a| benches_for(*a).contains(&bench)).collect();
                if !on.is_empty() {
                    eprintln!("bench {}: {}", bench_name(bench), names(&on));
                    tables.extend(one(bench, mode, &on)?);
                }
            }
            let arch_names: Vec<&str> = arches.iter().map(|a| a.name()).collect();
            let failed = report(&base, &tables, &arch_names, name == Name::Check);
            if opts.update_baseline {
                for t in tables {
                    base.replace(t);
                }
                std::fs::write(root.join(baseline::PATH), base.toml())?;
                std::fs::write(root.join(performance_doc::PATH), performance_doc::generate(&base))?;
                println!("\nwritten: {}, {}", baseline::PATH, performance_doc::PATH);
                return Ok(0);
            }
            Ok(if failed && name == Name::Check { 1 } else { 0 })
        }
        bench => {
            let arches = if opts.arches.is_empty() {
                match bench {
                    Name::Boot => vec![Arch::Riscv64, Arch::X86_64],
                    _ => DOMAIN_ARCHES.to_vec(),
                }
            } else {
                opts.arches.clone()
            };
            if let Some(a) = arches.iter().find(|a| !benches_for(**a).contains(&bench)) {
                bail!(
                    "bench {} needs domains, which {} does not boot yet",
                    bench_name(bench),
                    a.name()
                );
            }
            let tables = one(bench, Mode::Full, &arches)?;
            report(&base, &tables, &[], false);
            Ok(0)
        }
    }
}

fn bench_name(name: Name) -> &'static str {
    match name {
        Name::Boot => "boot",
        Name::Ipc => "ipc",
        Name::Sched => "sched",
        Name::Fault => "fault",
        Name::All => "all",
        Name::Check => "check",
    }
}

fn names(arches: &[Arch]) -> String {
    arches.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
}

/// Runs one bench on `arches` and returns its kept figures, a table per architecture.
fn one(bench: Name, mode: Mode, arches: &[Arch]) -> Result<Vec<Table>> {
    let tables = match bench {
        Name::Boot => boot(mode, arches)?,
        Name::Ipc => vec![ipc(mode)?],
        Name::Sched => vec![sched::run(mode)?],
        Name::Fault => vec![fault::run(mode)?],
        Name::All | Name::Check => unreachable!("not a single bench"),
    };
    Ok(tables)
}

/// A table of kept figures measured now, on `arch`, by `bench`.
fn table(arch: Arch, bench: &str, figures: Vec<(String, f64)>) -> Table {
    Table { arch: arch.name().into(), bench: bench.into(), commit: commit(), figures }
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

#[derive(Serialize)]
struct Environment {
    commit: String,
    qemu: String,
    host_cpu: String,
    host_cores: usize,
    date: String,
}

#[derive(Serialize)]
struct BootRow {
    arch: &'static str,
    firmware: &'static str,
    machine: &'static str,
    flags: String,
    wall_ms_median: f64,
    wall_ms_min: f64,
    wall_ms_max: f64,
    virtual_us_to_shutdown: u64,
    icount_flags: &'static str,
}

const RUNS: usize = 5;

/// The commit the tree is at, `-dirty` when it has changes.
fn commit() -> String {
    let commit = util::output(Command::new("git").current_dir(util::root()).args([
        "rev-parse",
        "--short",
        "HEAD",
    ]))
    .map(|s| s.trim().to_string())
    .unwrap_or_else(|_| "unknown".into());
    let dirty =
        util::output(Command::new("git").current_dir(util::root()).args(["status", "--porcelain"]))
            .map(|s| !s.trim().is_empty())
            .unwrap_or(false);
    if dirty { format!("{commit}-dirty") } else { commit }
}

fn environment(arch: Arch) -> Environment {
    let host_cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let date =
        util::output(Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ")).unwrap_or_default();
    Environment {
        commit: commit(),
        qemu: qemu::version(arch),
        host_cpu,
        host_cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        date: date.trim().to_string(),
    }
}

/// Seconds-with-decimals timestamp of the `shutdown:` record, in microseconds.
fn shutdown_us(out: &qemu::Outcome) -> Option<u64> {
    let t = out.line("shutdown: ")?.timestamp.as_ref()?;
    let secs: f64 = t.trim().parse().ok()?;
    Some((secs * 1e6).round() as u64)
}

#[derive(Serialize)]
struct IpcRow {
    operation: &'static str,
    instructions: f64,
    runs: usize,
    spread: f64,
    iterations: u64,
    flags: String,
}

/// `(calls, calls_ns, loop_ns)` from the `nullcall: N calls in T ns, empty loop L ns` line.
fn nullcall_figures(out: &qemu::Outcome) -> Option<(u64, u64, u64)> {
    let msg = &out.line(" calls in ")?.message;
    let n: Vec<u64> =
        msg.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    match n[..] {
        [calls, calls_ns, loop_ns] => Some((calls, calls_ns, loop_ns)),
        _ => None,
    }
}

/// One measured operation: the manifest to boot and how to read (instructions per operation,
/// operations) from the log.
struct Measure {
    /// The figure's key in the baseline.
    key: &'static str,
    operation: &'static str,
    manifest: &'static str,
    extract: fn(&qemu::Outcome) -> Option<(f64, u64)>,
}

const IPC: &[Measure] = &[
    Measure {
        key: "null_call",
        operation: "null system call (ecall, dispatch, return)",
        manifest: "manifests/bench-ipc.toml",
        extract: |out| {
            let (n, t, l) = nullcall_figures(out)?;
            Some(((t - l) as f64 / n as f64, n))
        },
    },
    Measure {
        key: "domain_switch",
        operation: "domain switch (yield to the other of two domains)",
        manifest: "manifests/bench-switch.toml",
        extract: |out| {
            let (n, t, l) = nullcall_figures(out)?;
            Some(((t - l) as f64 / (2 * n) as f64, 2 * n))
        },
    },
    Measure {
        key: "event_round_trip",
        operation: "event round trip between two domains (8-byte message over a channel and back)",
        manifest: "manifests/bench-pingpong.toml",
        extract: |out| {
            let msg = &out.line(" round trips in ")?.message;
            let n: Vec<u64> =
                msg.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
            match n[..] {
                [rounds, t, l] => Some(((t - l) as f64 / rounds as f64, rounds)),
                _ => None,
            }
        },
    },
    Measure {
        key: "channel_message",
        operation: "IO-channel message, 64 slots, both ends (send, receive, events, blocking)",
        manifest: "tests/manifests/channel.toml",
        extract: |out| {
            let seconds = |text: &str| -> Option<f64> {
                out.line(text)?.timestamp.as_ref()?.trim().parse().ok()
            };
            let start = seconds("domain consumer (id 1)")?;
            let end = seconds("chanpipe: received 100000 messages")?;
            Some(((end - start) * 1e9 / 100_000.0, 100_000))
        },
    },
];

/// Boots `m`'s manifest under `-icount shift=0,sleep=off` three times (the figure must come
/// out the same each time; once in [`Mode::Check`]) and returns its row.
fn measure(m: &Measure, mode: Mode) -> Result<IpcRow> {
    let a = artifacts::build(Arch::Riscv64)?;
    let prepared = crate::system::IcountBoot::new(&a, m.manifest, "")?;
    let b = &prepared.boot;
    let mut figures = Vec::new();
    let mut iterations = 0;
    for _ in 0..icount_runs(mode) {
        let out = prepared.run(&a)?;
        let (per_op, n) = (m.extract)(&out).with_context(|| {
            format!("{}: no figures in the log:\n{}", m.manifest, out.log_text())
        })?;
        iterations = n;
        figures.push(per_op);
    }
    let (min, max) = figures.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    if max != min {
        bail!("{}: the figure differs between boots under -icount: {figures:?}", m.manifest);
    }
    Ok(IpcRow {
        operation: m.operation,
        instructions: figures[0],
        runs: figures.len(),
        spread: max - min,
        iterations,
        flags: format!("{:?}", b.command(&a)).replace('"', ""),
    })
}

/// System-call and communication costs in instructions: each operation's manifest booted
/// under `-icount shift=0,sleep=off`, where a nanosecond of guest time is one instruction;
/// loop overhead timed in the same run is subtracted.
fn ipc(mode: Mode) -> Result<Table> {
    let rows = IPC.iter().map(|m| measure(m, mode)).collect::<Result<Vec<_>>>()?;
    let kept = table(
        Arch::Riscv64,
        "ipc",
        IPC.iter().zip(&rows).map(|(m, r)| (m.key.to_string(), r.instructions)).collect(),
    );
    if mode == Mode::Check {
        return Ok(kept);
    }
    let env = environment(Arch::Riscv64);
    let mut md = format!(
        "# bench ipc\n\ncommit {} · {} · host {} ({} cores) · {}\n\n",
        env.commit, env.qemu, env.host_cpu, env.host_cores, env.date
    );
    md.push_str(
        "| operation | instructions | runs | spread | iterations |\n|---|---:|---:|---:|---:|\n",
    );
    for row in &rows {
        md.push_str(&format!(
            "| {} | {:.1} | {} | {:.2} | {} |\n",
            row.operation, row.instructions, row.runs, row.spread, row.iterations
        ));
    }
    md.push_str("\nInstructions are guest nanoseconds under `-icount shift=0,sleep=off`, minus an empty loop of the same length timed in the same run (the channel row is the whole transfer divided by the messages, including the apps' own work: sequence numbers and checksums). For comparison, Linux in the same QEMU settings: futex round trip 10,088, thread switch 1,766 to 2,133.\n");
    print!("{md}");
    let dir = util::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("ipc.md"), &md)?;
    let json = serde_json::json!({ "benchmark": "ipc", "environment": env, "results": rows });
    std::fs::write(dir.join("ipc.json"), serde_json::to_string_pretty(&json)?)?;
    println!("\nwritten: {}, {}", dir.join("ipc.md").display(), dir.join("ipc.json").display());
    Ok(kept)
}

/// How many boots under `-icount` a figure is measured in: three (which must agree), or one
/// for the check.
fn icount_runs(mode: Mode) -> usize {
    match mode {
        Mode::Full => 3,
        Mode::Check => 1,
    }
}

/// The key of a boot configuration's virtual time in the baseline.
fn boot_key(arch: Arch, bios: Bios) -> &'static str {
    match (arch, bios) {
        (Arch::Riscv64, Bios::Rustsbi) => "virtual_us_rustsbi",
        (Arch::Riscv64, Bios::Opensbi) => "virtual_us_opensbi",
        (Arch::X86_64, _) => "virtual_us",
    }
}

fn boot(mode: Mode, arches: &[Arch]) -> Result<Vec<Table>> {
    let configs = [
        (Arch::Riscv64, Bios::Rustsbi),
        (Arch::Riscv64, Bios::Opensbi),
        (Arch::X86_64, Bios::Rustsbi),
    ];
    let mut rows = Vec::new();
    let mut kept: Vec<Table> = Vec::new();
    for (arch, bios) in configs.into_iter().filter(|(a, _)| arches.contains(a)) {
        let a = artifacts::build(arch)?;
        let kernel = Kernel::load(&a.kernel)?;
        let mut b = Boot::new(arch);
        b.bios = bios;
        b.timeout = Duration::from_secs(60);
        let mut walls = Vec::new();
        for _ in 0..if mode == Mode::Full { RUNS } else { 0 } {
            let out = qemu::boot(&b, &a, &kernel, None, &mut |_| {})?;
            if out.ending != Ending::Kernel(0) {
                bail!("{} boot ended {:?}:\n{}", arch.name(), out.ending, out.log_text());
            }
            walls.push(out.wall.as_secs_f64() * 1e3);
        }
        walls.sort_by(f64::total_cmp);
        b.icount = true;
        let mut virts = Vec::new();
        for _ in 0..icount_runs(mode) {
            let out = qemu::boot(&b, &a, &kernel, None, &mut |_| {})?;
            if out.ending != Ending::Kernel(0) {
                bail!("{} boot ended {:?}:\n{}", arch.name(), out.ending, out.log_text());
            }
            virts.push(shutdown_us(&out).context("no timestamp on the shutdown record")?);
        }
        let virt = virts[0];
        if virts.iter().any(|&v| v != virt) {
            bail!(
                "{} boot: virtual time to shutdown differs between boots: {virts:?}",
                arch.name()
            );
        }
        match kept.iter_mut().find(|t| t.arch == arch.name()) {
            Some(t) => t.figures.push((boot_key(arch, bios).into(), virt as f64)),
            None => {
                kept.push(table(arch, "boot", vec![(boot_key(arch, bios).into(), virt as f64)]))
            }
        }
        if mode == Mode::Check {
            continue;
        }
        let mut flags = format!("{:?}", b.command(&a));
        flags = flags.replace('"', "");
        rows.push(BootRow {
            arch: arch.name(),
            firmware: b.firmware_name(),
            machine: if arch == Arch::Riscv64 { "virt" } else { "q35" },
            flags,
            wall_ms_median: walls[RUNS / 2],
            wall_ms_min: walls[0],
            wall_ms_max: walls[RUNS - 1],
            virtual_us_to_shutdown: virt,
            icount_flags: "-icount shift=0,sleep=off",
        });
    }
    if mode == Mode::Check {
        return Ok(kept);
    }
    let env = environment(Arch::Riscv64);
    let mut md = String::new();
    md.push_str(&format!(
        "# bench boot\n\ncommit {} · {} · host {} ({} cores) · {}\n\n",
        env.commit, env.qemu, env.host_cpu, env.host_cores, env.date
    ));
    md.push_str("| arch | machine | firmware | wall ms (median of 5) | min | max | virtual µs to shutdown (icount) |\n");
    md.push_str("|---|---|---|---:|---:|---:|---:|\n");
    for r in &rows {
        md.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {} |\n",
            r.arch,
            r.machine,
            r.firmware,
            r.wall_ms_median,
            r.wall_ms_min,
            r.wall_ms_max,
            r.virtual_us_to_shutdown
        ));
    }
    print!("{md}");
    let dir = util::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("boot.md"), &md)?;
    let json = serde_json::json!({ "benchmark": "boot", "environment": env, "results": rows });
    std::fs::write(dir.join("boot.json"), serde_json::to_string_pretty(&json)?)?;
    println!("\nwritten: {}, {}", dir.join("boot.md").display(), dir.join("boot.json").display());
    Ok(kept)
}
