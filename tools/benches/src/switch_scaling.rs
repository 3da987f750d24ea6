//! The domain switch against the number of domains: `manifests/bench-switch.toml` booted with
//! other domains beside the two that switch, each under a CPU contract and blocked (asleep)
//! for the whole measurement. The switch must not grow with them: the scheduler and the
//! kernel visit a blocked domain only when one of its instants (a period's end, a deadline)
//! has come.
//!
//! A second manifest puts [`RUNNABLE_OTHERS`] (and [`MOST_OTHERS`]) domains beside the two that
//! switch which never block: each spins under a 10 µs / 1000 ms contract without slack time, so once its slice is
//! used it is runnable but out of slice for the whole measurement. The switch must not grow
//! with those either: the scheduler keeps them in a queue by deadline that a switch does not
//! look at ([`runnable_switch`]).

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};

use super::by_arch::ByArch;
use crate::measure::{Mode, icount_runs, nullcall_figures};
use system_image::many_domains;
use tool_base::{Arch, artifacts};

/// How many other domains the sweep puts beside the two that switch; the last two are kept
/// figures (64 domains in all, and 1,024, the most a manifest holds).
pub const OTHERS: &[usize] = &[0, 6, 30, 62, MOST_OTHERS];

pub use system_image::many_domains::MOST_OTHERS;

/// Instructions per domain switch on `arch` with `others` sleeping domains beside the two that
/// switch.
pub fn switch_with(others: usize, mode: Mode, arch: Arch) -> Result<f64> {
    measure(&many_domains::asleep(others)?, 2, mode, arch)
}

/// Instructions per timed wake-up on `arch` with `others` sleeping domains beside the one that
/// wakes ([`many_domains::waking`]).
pub fn wakeup_with(others: usize, mode: Mode, arch: Arch) -> Result<f64> {
    measure(&many_domains::waking(others)?, 1, mode, arch)
}

/// Instructions per operation in the manifest at `path` (`nullcall` domains that time `per`
/// operations a call, and others), the same in every boot: a switch is a call of each of two
/// `nullcall --yield` domains (`per` 2), a timed wake-up one call of `nullcall --sleep` (1).
fn measure(path: &std::path::Path, per: u64, mode: Mode, arch: Arch) -> Result<f64> {
    let a = artifacts::build(arch)?;
    let prepared = qemu_run::qemu::IcountBoot::new(&a, &path.to_string_lossy(), "")?;
    let mut figures = Vec::new();
    for _ in 0..icount_runs(mode) {
        let out = prepared.run(&a)?;
        let (n, t, l) = nullcall_figures(&out).with_context(|| {
            format!("{}: no figures in the log:\n{}", path.display(), out.log_text())
        })?;
        figures.push((t - l) as f64 / (per * n) as f64);
    }
    if figures.iter().any(|&f| f != figures[0]) {
        bail!("{}: the figure differs between boots under -icount: {figures:?}", path.display());
    }
    Ok(figures[0])
}

/// How many domains spin out of slice beside the two that switch in the runnable variant
/// (64 domains in all).
pub const RUNNABLE_OTHERS: usize = 62;

/// The most the switch with [`RUNNABLE_OTHERS`] spinning domains may cost, as a multiple of
/// the two-domain switch: beyond it `bench ipc` fails.
pub const RUNNABLE_BAR: f64 = 1.10;

/// Instructions per domain switch on `arch` with `others` domains spinning out of slice beside
/// the two that switch ([`RUNNABLE_OTHERS`] or [`MOST_OTHERS`]).
pub fn runnable_switch(others: usize, mode: Mode, arch: Arch) -> Result<f64> {
    measure(&many_domains::spinning(others)?, 2, mode, arch)
}

/// The sweep on `arch`: (domains in all, instructions per switch) for each of [`OTHERS`].
pub fn sweep(mode: Mode, arch: Arch) -> Result<Vec<(usize, f64)>> {
    OTHERS.iter().map(|&others| Ok((others + 2, switch_with(others, mode, arch)?))).collect()
}

/// The sweeps of `arches` (in order) side by side as a markdown table: per architecture, the
/// switch and its change from the two-domain switch.
pub fn table(arches: &[Arch], sweeps: &[Vec<(usize, f64)>]) -> String {
    let mut t = ByArch::new(&["domains"], arches, &["switch", "vs two domains"], &[]);
    for (i, &others) in OTHERS.iter().enumerate() {
        let groups: Vec<Vec<String>> = sweeps
            .iter()
            .map(|s| {
                let (two, f) = (s[0].1, s[i].1);
                vec![format!("{f:.1}"), format!("{:+.1}%", (f / two - 1.0) * 100.0)]
            })
            .collect();
        t.row(&[(others + 2).to_string()], &groups, &[]);
    }
    let mut md = t.finish();
    writeln!(
        md,
        "\nInstructions per switch. The other domains sleep under 50 µs / 100 ms contracts for the whole measurement."
    )
    .expect("writing to a String");
    md
}
