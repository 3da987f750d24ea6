//! `cargo xtask bench canary`: a CPU-bound canary's work under hostile load, against its work
//! alone.
//!
//! The canary is `spin` under a contract of 500 µs of every 10 ms without slack time
//! (`extra = false`), counting the work it does in its own slices for one second of whole
//! periods. Beside it, in 64 domains in all ([`manifest`], written under `target/bench/`):
//! - [`FUZZERS`] neighbours run the seeded system-call fuzzer (`fuzz --seed i --calls-per
//!   [`CALLS_PER`] --domains 64`: every call of the ABI but `exit` and `block`, and an unknown
//!   one ([`FUZZED_KINDS`], 29 today), so 29,000 calls each and 232,000 in all,
//!   with domain ids drawn among the 64), each under 50 µs of every 1 ms with slack time: they
//!   arm timers due within 40 µs, take and free memory, grant stretches to the others, and exit
//!   near the end of the canary's second;
//! - the other 55 domains sleep in steps of [`SLEEP_STEP_US`] for the canary's second
//!   (`nullcall --idle 1000 --every 2000`, 100 µs of every 100 ms): a timed wake-up each every
//!   2 ms, and targets of the fuzzers' grants.
//!
//! The kept figure is the canary's work (loop iterations) under this load as a percentage of its
//! work in the same manifest with the canary alone (`canary_work_percent`, goal at least 99): the
//! kernel work done while it runs for other domains (their timers and wake-ups, the
//! replenishment of their periods, revocations, exits) must be charged to them, not taken out
//! of its slice. Both boots are under `-icount shift=0,sleep=off`, so the figure is the same on
//! every host; the bench fails when it is below [`BAR`].

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};

use super::by_arch::ByArch;
use crate::baseline::Table;
use crate::measure::{Mode, environment, on_each, table, write_report};
use qemu_run::cpu;
use qemu_run::qemu::{Ending, Outcome};
use tool_base::{Arch, artifacts};

/// Neighbours running the fuzzer.
pub const FUZZERS: usize = 8;
/// Domains in all: the canary, the fuzzers and sleepers.
pub const DOMAINS: usize = 64;
/// The kinds of call each fuzzer makes: every call of the ABI and an unknown one, but `exit`
/// and `block`, which it never fuzzes (it would end or stop its own run).
const FUZZED_KINDS: u64 = abi::Call::ALL.len() as u64 + 1 - 2;

/// Calls of each kind each fuzzer makes.
pub const CALLS_PER: u64 = 1000;
/// How long the canary counts its work, and the sleepers sleep, in ms.
pub const RUN_MS: u64 = 1000;
/// The sleepers' step, in µs.
pub const SLEEP_STEP_US: u64 = 2000;
/// The least canary work under load, as a fraction of its work alone, that passes.
pub const BAR: f64 = 0.99;

/// The canary's domain.
fn canary() -> String {
    format!(
        "[[domain]]\nname = \"canary\"\napp = \"spin\"\nargs = [\"--for\", \"{RUN_MS}\"]\n\
         memory = {{ guaranteed = \"256K\" }}\n\
         cpu = {{ period = \"10ms\", slice = \"500us\", extra = false }}\n"
    )
}

/// The manifest of the canary under load (`alone`: the canary alone), written under
/// `target/bench/`; its path.
pub fn manifest(alone: bool) -> Result<std::path::PathBuf> {
    let mut text = format!(
        "# Written by `cargo xtask bench canary` (tools/benches/src/canary.rs).\n\
         [system]\nmemory = \"128M\"\n\n{}",
        canary()
    );
    if !alone {
        for i in 0..FUZZERS {
            write!(
                text,
                "\n[[domain]]\nname = \"fuzz-{i}\"\napp = \"fuzz\"\n\
                 args = [\"--seed\", \"{}\", \"--calls-per\", \"{CALLS_PER}\", \"--domains\", \"{DOMAINS}\"]\n\
                 memory = {{ guaranteed = \"2M\" }}\n\
                 cpu = {{ period = \"1ms\", slice = \"50us\", extra = true }}\n",
                i + 1
            )?;
        }
        for i in 0..DOMAINS - 1 - FUZZERS {
            write!(
                text,
                "\n[[domain]]\nname = \"sleeper-{i}\"\napp = \"nullcall\"\n\
                 args = [\"--idle\", \"{RUN_MS}\", \"--every\", \"{SLEEP_STEP_US}\"]\n\
                 memory = {{ guaranteed = \"256K\" }}\n\
                 cpu = {{ period = \"100ms\", slice = \"100us\" }}\n"
            )?;
        }
    }
    let name = if alone { "canary-alone.toml" } else { "canary-under-load.toml" };
    system_image::many_domains::written(name, &text)
}

/// The canary's work (loop iterations) in the boot `out` of `path`; fails unless the boot
/// ended cleanly and the canary completed its run.
fn canary_work(out: &Outcome, path: &std::path::Path) -> Result<u64> {
    if out.ending != Ending::Kernel(0) || !out.has("shutdown: Success") {
        bail!("{}: the boot did not end cleanly:\n{}", path.display(), out.log_text());
    }
    let reports = cpu::spin_reports(out);
    let r = reports
        .iter()
        .find(|r| r.domain == "canary")
        .with_context(|| format!("{}: no spin report from the canary", path.display()))?;
    Ok(r.iterations)
}

/// What one architecture measured.
struct Measured {
    alone: u64,
    loaded: u64,
    ratio: f64,
    fuzzer_calls: u64,
}

/// The calls the fuzzers report (`fuzz: N calls, ...`), summed.
fn fuzzer_calls(out: &Outcome) -> u64 {
    out.log
        .iter()
        .filter_map(|l| {
            l.message.split_once("fuzz: ")?.1.split_once(" calls, ")?.0.parse::<u64>().ok()
        })
        .sum()
}

fn measure_on(arch: Arch, _mode: Mode) -> Result<(Measured, Table)> {
    let a = artifacts::build(arch)?;
    let mut works = Vec::new();
    let mut calls = 0;
    for alone in [true, false] {
        let path = manifest(alone)?;
        let out = qemu_run::qemu::IcountBoot::new(&a, &path.to_string_lossy(), "")?.run(&a)?;
        works.push(canary_work(&out, &path)?);
        if !alone {
            calls = fuzzer_calls(&out);
            let expected = FUZZERS as u64 * CALLS_PER * FUZZED_KINDS;
            if calls != expected {
                bail!(
                    "{}: the fuzzers made {calls} calls, not {expected}:\n{}",
                    path.display(),
                    out.log_text()
                );
            }
        }
    }
    let (alone, loaded) = (works[0], works[1]);
    let ratio = loaded as f64 / alone as f64;
    let kept = table(arch, "canary", vec![("canary_work_percent".into(), ratio * 100.0)]);
    Ok((Measured { alone, loaded, ratio, fuzzer_calls: calls }, kept))
}

/// Runs the bench on each of `arches`; returns its kept figures, a table per architecture.
/// Fails when the canary's work under load is below [`BAR`] of its work alone.
pub(super) fn run(mode: Mode, arches: &[Arch]) -> Result<Vec<Table>> {
    let (measured, kept) = on_each(arches, mode, measure_on)?;
    if mode == Mode::Full {
        let env = environment(arches);
        let mut md = env.heading("canary");
        md.push_str(&format!(
            "A `spin` canary (500 µs of every 10 ms, no slack) counts its work for {RUN_MS} ms beside {FUZZERS} system-call fuzzers (50 µs of every 1 ms with slack, {CALLS_PER} calls of each kind each) and {} sleepers waking every {SLEEP_STEP_US} µs, {DOMAINS} domains in all; against the same canary alone. Boots under `-icount shift=0,sleep=off`.\n\n",
            DOMAINS - 1 - FUZZERS
        ));
        let mut t = ByArch::new(&["measure"], arches, &["value"], &[]);
        let figures: [super::by_arch::Figure<Measured>; 4] = [
            ("canary's work alone (iterations)", |m| m.alone.to_string()),
            ("canary's work under load (iterations)", |m| m.loaded.to_string()),
            ("under load / alone", |m| format!("{:.4}", m.ratio)),
            ("the fuzzers' calls", |m| m.fuzzer_calls.to_string()),
        ];
        t.figure_rows(&measured, &figures);
        md.push_str(&t.finish());
        let json_arches: Vec<_> = arches
            .iter()
            .zip(&measured)
            .map(|(a, m)| {
                serde_json::json!({
                    "arch": a.name(),
                    "alone_iterations": m.alone,
                    "loaded_iterations": m.loaded,
                    "canary_work_percent": m.ratio * 100.0,
                    "fuzzer_calls": m.fuzzer_calls,
                })
            })
            .collect();
        let json = serde_json::json!({ "benchmark": "canary", "environment": env, "architectures": json_arches });
        write_report("canary", &md, json)?;
    }
    let low: Vec<String> = arches
        .iter()
        .zip(&measured)
        .filter(|(_, m)| m.ratio < BAR)
        .map(|(a, m)| format!("{} {:.4}", a.name(), m.ratio))
        .collect();
    if !low.is_empty() {
        bail!("the canary's work under load is below {BAR} of its work alone: {}", low.join(", "));
    }
    Ok(kept)
}
