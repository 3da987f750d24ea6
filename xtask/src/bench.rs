//! `cargo xtask bench NAME`: measurements, written as a markdown table and JSON under
//! `target/bench/`, each recording the commit, QEMU version, host, firmware and flags.
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

mod fault;
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

/// The benchmarks.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Name {
    /// Boot to shutdown.
    Boot,
    /// System-call and communication costs, in instructions under -icount.
    Ipc,
    /// CPU contracts: shares, per-period deviation, wake-up latency, switch cost.
    Sched,
    /// The user-level page fault round trip, and self-paging under CPU contracts.
    Fault,
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

/// Runs benchmark `name`.
pub fn run(name: Name) -> Result<()> {
    setup::ensure(setup::Needs { gdb: false, qemu: true })?;
    match name {
        Name::Boot => boot(),
        Name::Ipc => ipc(),
        Name::Sched => sched::run(),
        Name::Fault => fault::run(),
    }
}

fn environment(arch: Arch) -> Environment {
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
        commit: if dirty { format!("{commit}-dirty") } else { commit },
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
    operation: &'static str,
    manifest: &'static str,
    extract: fn(&qemu::Outcome) -> Option<(f64, u64)>,
}

const IPC: &[Measure] = &[
    Measure {
        operation: "null system call (ecall, dispatch, return)",
        manifest: "manifests/bench-ipc.toml",
        extract: |out| {
            let (n, t, l) = nullcall_figures(out)?;
            Some(((t - l) as f64 / n as f64, n))
        },
    },
    Measure {
        operation: "domain switch (yield to the other of two domains)",
        manifest: "manifests/bench-switch.toml",
        extract: |out| {
            let (n, t, l) = nullcall_figures(out)?;
            Some(((t - l) as f64 / (2 * n) as f64, 2 * n))
        },
    },
    Measure {
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
/// out the same each time) and returns its row.
fn measure(m: &Measure) -> Result<IpcRow> {
    let a = artifacts::build(Arch::Riscv64)?;
    let prepared = crate::system::IcountBoot::new(&a, m.manifest, "")?;
    let b = &prepared.boot;
    let mut figures = Vec::new();
    let mut iterations = 0;
    for _ in 0..3 {
        let out = prepared.run(&a)?;
        let (per_op, n) = (m.extract)(&out).with_context(|| {
            format!("{}: no figures in the log:\n{}", m.manifest, out.log_text())
        })?;
        iterations = n;
        figures.push(per_op);
    }
    let (min, max) = figures.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
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
fn ipc() -> Result<()> {
    let rows = IPC.iter().map(measure).collect::<Result<Vec<_>>>()?;
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
    Ok(())
}

fn boot() -> Result<()> {
    let configs = [
        (Arch::Riscv64, Bios::Rustsbi),
        (Arch::Riscv64, Bios::Opensbi),
        (Arch::X86_64, Bios::Rustsbi),
    ];
    let mut rows = Vec::new();
    for (arch, bios) in configs {
        let a = artifacts::build(arch)?;
        let kernel = Kernel::load(&a.kernel)?;
        let mut b = Boot::new(arch);
        b.bios = bios;
        b.timeout = Duration::from_secs(60);
        let mut walls = Vec::new();
        for _ in 0..RUNS {
            let out = qemu::boot(&b, &a, &kernel, None, &mut |_| {})?;
            if out.ending != Ending::Kernel(0) {
                bail!("{} boot ended {:?}:\n{}", arch.name(), out.ending, out.log_text());
            }
            walls.push(out.wall.as_secs_f64() * 1e3);
        }
        walls.sort_by(f64::total_cmp);
        b.icount = true;
        let out = qemu::boot(&b, &a, &kernel, None, &mut |_| {})?;
        let virt = shutdown_us(&out).context("no timestamp on the shutdown record")?;
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
    Ok(())
}
