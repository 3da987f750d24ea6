//! What every bench shares: how it runs ([`Mode`]), how many boots measure a figure
//! ([`RUNS`], [`icount_runs`]), the environment a report records ([`environment`]), the report
//! written under `target/bench/` ([`write_report`]) and the table of kept figures a bench hands
//! to the baseline ([`table`], [`on_each`]).

use std::process::Command;

use anyhow::Result;
use serde::Serialize;

use crate::baseline::Table;
use qemu_run::qemu;
use tool_base::{Arch, util};

/// How a bench runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every figure, wall-clock ones too; reports written under `target/bench/`.
    Full,
    /// The kept figures only, each boot once: what `bench check` needs.
    Check,
}

/// A table of kept figures measured now, on `arch`, by `bench`.
pub(crate) fn table(arch: Arch, bench: &str, figures: Vec<(String, f64)>) -> Table {
    Table { arch: arch.name().into(), bench: bench.into(), commit: commit(), figures }
}

#[derive(Serialize)]
pub(crate) struct Environment {
    commit: String,
    qemu: String,
    host_cpu: String,
    host_cores: usize,
    date: String,
}

/// Boots of each configuration timed on the host's clock (wall time).
pub(crate) const RUNS: usize = 5;

/// The commit the tree is at, `-dirty` when it has changes.
pub(crate) fn commit() -> String {
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

/// Where this run happens: the commit, each architecture's QEMU, the host, the date.
pub(crate) fn environment(arches: &[Arch]) -> Environment {
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
    let qemu: Vec<String> =
        arches.iter().map(|a| format!("{}: {}", a.name(), qemu::version(*a))).collect();
    Environment {
        commit: commit(),
        qemu: qemu.join("; "),
        host_cpu,
        host_cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        date: date.trim().to_string(),
    }
}

impl Environment {
    /// The heading of bench `name`'s report: its title and this environment.
    pub(crate) fn heading(&self, name: &str) -> String {
        format!(
            "# bench {name}\n\ncommit {} · {} · host {} ({} cores) · {}\n\n",
            self.commit, self.qemu, self.host_cpu, self.host_cores, self.date
        )
    }
}

/// Prints bench `name`'s report and writes it under `target/bench/` as `NAME.md` and, with
/// `json`'s results, `NAME.json`.
pub(crate) fn write_report(name: &str, md: &str, json: serde_json::Value) -> Result<()> {
    print!("{md}");
    let dir = util::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    let (md_path, json_path) = (dir.join(format!("{name}.md")), dir.join(format!("{name}.json")));
    std::fs::write(&md_path, md)?;
    std::fs::write(&json_path, serde_json::to_string_pretty(&json)?)?;
    println!("\nwritten: {}, {}", md_path.display(), json_path.display());
    Ok(())
}

/// The end of bench `name`'s run on `arches`: its kept figures, and outside [`Mode::Check`]
/// its report written ([`write_report`]): the environment's heading and `report`'s markdown,
/// and as JSON the environment beside `architectures`, what each architecture measured.
pub(crate) fn finish(
    name: &str,
    mode: Mode,
    arches: &[Arch],
    kept: Vec<Table>,
    report: impl FnOnce() -> Result<String>,
    architectures: serde_json::Value,
) -> Result<Vec<Table>> {
    if mode == Mode::Check {
        return Ok(kept);
    }
    let env = environment(arches);
    let md = env.heading(name) + &report()?;
    let json = serde_json::json!({
        "benchmark": name,
        "environment": env,
        "architectures": architectures,
    });
    write_report(name, &md, json)?;
    Ok(kept)
}

/// How many boots under `-icount` a figure is measured in: three (which must agree), or one
/// for the check.
pub(crate) fn icount_runs(mode: Mode) -> usize {
    match mode {
        Mode::Full => 3,
        Mode::Check => 1,
    }
}

/// Domain `name`'s CPU in ns, from the run summary's accounts (whole µs).
pub(crate) fn cpu_ns(out: &qemu::Outcome, name: &str) -> Option<u64> {
    let a = qemu_run::cpu::summary_accounts(out).into_iter().find(|a| a.domain == name)?;
    Some((a.guaranteed_us + a.extra_us) * 1000)
}

/// `(calls, calls_ns, loop_ns)` from the `nullcall: N calls in T ns, empty loop L ns` line.
pub(crate) fn nullcall_figures(out: &qemu::Outcome) -> Option<(u64, u64, u64)> {
    let msg = &out.line(" calls in ")?.message;
    let n: Vec<u64> =
        msg.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    match n[..] {
        [calls, calls_ns, loop_ns] => Some((calls, calls_ns, loop_ns)),
        _ => None,
    }
}

/// Measures with `measure` on each of `arches`: what each measured and its kept figures, in
/// the order of `arches`.
pub(crate) fn on_each<M>(
    arches: &[Arch],
    mode: Mode,
    measure: fn(Arch, Mode) -> Result<(M, Table)>,
) -> Result<(Vec<M>, Vec<Table>)> {
    let mut measured = Vec::new();
    let mut kept = Vec::new();
    for &arch in arches {
        let (m, t) = measure(arch, mode)?;
        measured.push(m);
        kept.push(t);
    }
    Ok((measured, kept))
}

/// The numbers written in a report's markdown `md`, in order: runs of digits with the
/// separators between them. The report tests render a report from fabricated runs and check
/// that every number in it follows them.
#[cfg(test)]
pub(crate) fn report_numbers(md: &str) -> Vec<String> {
    md.split(|c: char| !(c.is_ascii_digit() || c == ',' || c == '.'))
        .map(|t| t.trim_matches(|c| c == ',' || c == '.'))
        .filter(|t| t.chars().any(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}
