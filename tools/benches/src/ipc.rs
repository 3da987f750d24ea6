//! `cargo xtask bench ipc`: system-call and communication costs in instructions, on each
//! architecture side by side.
//!
//! Each operation's manifest is booted under `-icount shift=0,sleep=off`, where a nanosecond of
//! guest time is one instruction; the loop overhead timed in the same run is subtracted. The
//! domain switch is also measured with up to 1,022 other domains asleep beside the two that
//! switch ([`super::switch_scaling`]), and with 62 and 1,022 other domains spinning out of
//! slice: those may cost at most 10% more than the two-domain switch, or the bench fails. A
//! timed wake-up is measured alone and beside 1,022 sleeping domains (at most 50% more, or the
//! bench fails: [`WAKEUP_BAR`]).

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::by_arch::ByArch;
use super::figures;
use super::switch_scaling;
use crate::baseline::Table;
use crate::measure::{Mode, environment, icount_runs, nullcall_figures, table, write_report};
use qemu_run::qemu;
use tool_base::{Arch, artifacts};

#[derive(Serialize)]
pub(super) struct IpcRow {
    arch: &'static str,
    operation: &'static str,
    pub(super) instructions: f64,
    runs: usize,
    spread: f64,
    iterations: u64,
    flags: String,
}

/// One measured operation: the manifest to boot and how to read (instructions per operation,
/// operations) from the log.
pub(super) struct Measure {
    /// The figure's key in the baseline.
    key: &'static str,
    operation: &'static str,
    manifest: &'static str,
    extract: fn(&qemu::Outcome) -> Option<(f64, u64)>,
}

pub(super) const IPC: &[Measure] = &[
    Measure {
        key: "null_call",
        operation: "null system call (trap, dispatch, return)",
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

/// Boots `m`'s manifest on `arch` under `-icount shift=0,sleep=off` three times (the figure
/// must come out the same each time; once in [`Mode::Check`]) and returns its row.
pub(super) fn measure(m: &Measure, mode: Mode, arch: Arch) -> Result<IpcRow> {
    let a = artifacts::build(arch)?;
    let prepared = qemu_run::qemu::IcountBoot::new(&a, m.manifest, "")?;
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
        arch: arch.name(),
        operation: m.operation,
        instructions: figures[0],
        runs: figures.len(),
        spread: max - min,
        iterations,
        flags: format!("{:?}", b.command(&a)).replace('"', ""),
    })
}

/// The kept figure of the switch with 62 other domains beside the two that switch.
const SWITCH_64: &str = "domain_switch_64_domains";

/// The kept figure of the switch with 62 other domains spinning out of slice beside the two.
const SWITCH_64_RUNNABLE: &str = "domain_switch_64_runnable";

/// The kept figure of the switch with 1,022 other domains asleep beside the two that switch.
const SWITCH_1024: &str = "domain_switch_1024_domains";

/// The kept figure of the switch with 1,022 other domains spinning out of slice beside the two.
const SWITCH_1024_RUNNABLE: &str = "domain_switch_1024_runnable";

/// The kept figure of a timed wake-up (a `block` whose deadline has passed: the pass that finds
/// the domain due, its wake-up, the dispatch) with no other domain.
const WAKEUP: &str = "timed_wakeup";

/// The kept figure of a timed wake-up beside 1,022 domains asleep with instants ahead.
const WAKEUP_1024: &str = "timed_wakeup_1024_domains";

/// The most a timed wake-up beside 1,022 sleeping domains may cost, as a multiple of one alone:
/// the kernel's queue of timed instants is a binary heap, so a wake-up takes a domain in and out
/// of ten levels (log2 of 1,024) instead of none; a pass over every domain, as the kernel made
/// before, costs seventy times the wake-up alone.
const WAKEUP_BAR: f64 = 1.5;

/// A timed wake-up alone and beside 1,022 sleeping domains on `arch`: fails if the second
/// costs more than [`WAKEUP_BAR`] times the first.
fn timed_wakeups(mode: Mode, arch: Arch) -> Result<(f64, f64)> {
    let alone = switch_scaling::wakeup_with(0, mode, arch)?;
    let others = switch_scaling::MOST_OTHERS;
    let crowded = switch_scaling::wakeup_with(others, mode, arch)?;
    let what = format!("timed wake-up beside {others} sleeping domains");
    within_bar(arch, &what, crowded, ("the wake-up alone", alone), WAKEUP_BAR)?;
    Ok((alone, crowded))
}

/// Prints figure `f` of `what` on `arch` against the base figure it is held to, and fails if
/// it is more than `bar` times the base.
fn within_bar(
    arch: Arch,
    what: &str,
    f: f64,
    (base_name, base): (&str, f64),
    bar: f64,
) -> Result<()> {
    let most = base * bar;
    println!(
        "{}: {what}: {f:.1} instructions, {:+.1}% vs {base_name} ({base:.1}), at most {most:.1}",
        arch.name(),
        (f / base - 1.0) * 100.0
    );
    if f > most {
        bail!(
            "{}: the {what} costs {f:.1} instructions, more than {:.0}% above {base_name}'s {base:.1}",
            arch.name(),
            (bar - 1.0) * 100.0
        );
    }
    Ok(())
}

/// The switch with `others` domains spinning out of slice beside the two that switch, checked
/// against the two-domain switch `two` on `arch`: fails beyond [`switch_scaling::RUNNABLE_BAR`].
fn runnable_switch(others: usize, two: f64, mode: Mode, arch: Arch) -> Result<f64> {
    let f = switch_scaling::runnable_switch(others, mode, arch)?;
    let what = format!("domain switch with {others} others spinning out of slice");
    within_bar(arch, &what, f, ("the two-domain switch", two), switch_scaling::RUNNABLE_BAR)?;
    Ok(f)
}

/// Measures every operation on each of `arches`; prints and writes the report (not in
/// [`Mode::Check`]); returns the kept figures, a table per architecture.
pub(super) fn run(mode: Mode, arches: &[Arch]) -> Result<Vec<Table>> {
    let mut kept = Vec::new();
    let mut rows = Vec::new();
    let mut sweeps = Vec::new();
    for &arch in arches {
        let measured = IPC.iter().map(|m| measure(m, mode, arch)).collect::<Result<Vec<_>>>()?;
        let mut figures: Vec<(String, f64)> =
            IPC.iter().zip(&measured).map(|(m, r)| (m.key.to_string(), r.instructions)).collect();
        let sweep = match mode {
            Mode::Check => [switch_scaling::RUNNABLE_OTHERS, switch_scaling::MOST_OTHERS]
                .into_iter()
                .map(|others| Ok((others + 2, switch_scaling::switch_with(others, mode, arch)?)))
                .collect::<Result<Vec<_>>>()?,
            Mode::Full => switch_scaling::sweep(mode, arch)?,
        };
        let asleep = |domains: usize| {
            sweep.iter().find(|(n, _)| *n == domains).map(|s| s.1).context("a sweep")
        };
        figures.push((SWITCH_64.into(), asleep(switch_scaling::RUNNABLE_OTHERS + 2)?));
        figures.push((SWITCH_1024.into(), asleep(switch_scaling::MOST_OTHERS + 2)?));
        let two = figures.iter().find(|(k, _)| k == "domain_switch").expect("measured").1;
        for (others, key) in [
            (switch_scaling::RUNNABLE_OTHERS, SWITCH_64_RUNNABLE),
            (switch_scaling::MOST_OTHERS, SWITCH_1024_RUNNABLE),
        ] {
            figures.push((key.into(), runnable_switch(others, two, mode, arch)?));
        }
        let (alone, crowded) = timed_wakeups(mode, arch)?;
        figures.push((WAKEUP.into(), alone));
        figures.push((WAKEUP_1024.into(), crowded));
        kept.push(table(arch, "ipc", figures));
        rows.push(measured);
        sweeps.push(sweep);
    }
    if mode == Mode::Check {
        return Ok(kept);
    }
    let env = environment(arches);
    let mut md = env.heading("ipc");
    md.push_str("Instructions per operation.\n\n");
    let mut t = ByArch::new(&["operation"], arches, &["instructions"], &["Linux 6.1, x86_64"]);
    for (i, m) in IPC.iter().enumerate() {
        let cells: Vec<Vec<String>> =
            rows.iter().map(|r| vec![format!("{:.1}", r[i].instructions)]).collect();
        let anchor = figures::lookup(arches[0].name(), "ipc", m.key).map_or("", |s| s.anchor);
        t.row(&[m.operation.to_string()], &cells, &[anchor.to_string()]);
    }
    md.push_str(&t.finish());
    md.push_str("\n## The domain switch against the number of domains\n\n");
    md.push_str(&switch_scaling::table(arches, &sweeps));
    let runnable: Vec<String> = kept
        .iter()
        .map(|t| {
            let get = |k: &str| t.figures.iter().find(|(n, _)| n == k).map_or(0.0, |f| f.1);
            let two = get("domain_switch");
            let (f, g) = (get(SWITCH_64_RUNNABLE), get(SWITCH_1024_RUNNABLE));
            format!(
                "{} {f:.1} ({:+.1}%) and {g:.1} ({:+.1}%)",
                t.arch,
                (f / two - 1.0) * 100.0,
                (g / two - 1.0) * 100.0
            )
        })
        .collect();
    md.push_str(&format!(
        "\nWith {} and {} other domains spinning out of slice (10 µs every 1000 ms, no slack time) instead of asleep: {}; at most {:.0}% above the two-domain switch, or the bench fails.\n",
        switch_scaling::RUNNABLE_OTHERS,
        switch_scaling::MOST_OTHERS,
        runnable.join(", "),
        (switch_scaling::RUNNABLE_BAR - 1.0) * 100.0
    ));
    let wakeups: Vec<String> = kept
        .iter()
        .map(|t| {
            let get = |k: &str| t.figures.iter().find(|(n, _)| n == k).map_or(0.0, |f| f.1);
            let (alone, crowded) = (get(WAKEUP), get(WAKEUP_1024));
            format!(
                "{} {alone:.1} and {crowded:.1} ({:+.1}%)",
                t.arch,
                (crowded / alone - 1.0) * 100.0
            )
        })
        .collect();
    md.push_str(&format!(
        "\nA timed wake-up (`nullcall --sleep`: a `block` until an instant that has passed, the kernel's pass that finds the domain due and wakes it, the dispatch), alone and beside {} domains asleep with instants ahead: {}; at most {:.0}% above alone, or the bench fails.\n",
        switch_scaling::MOST_OTHERS,
        wakeups.join(", "),
        (WAKEUP_BAR - 1.0) * 100.0
    ));
    md.push_str("\nInstructions are guest nanoseconds under `-icount shift=0,sleep=off`, minus an empty loop of the same length timed in the same run; every figure came out the same in each of its boots. The channel row is the whole transfer divided by the messages, including the apps' own work: sequence numbers and checksums. Linux's figures are from the same QEMU settings.\n");
    let results: Vec<&IpcRow> = rows.iter().flatten().collect();
    let json = serde_json::json!({ "benchmark": "ipc", "environment": env, "results": results });
    write_report("ipc", &md, json)?;
    Ok(kept)
}
