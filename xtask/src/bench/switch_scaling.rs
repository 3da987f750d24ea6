//! The domain switch against the number of domains: `manifests/bench-switch.toml` booted with
//! other domains beside the two that switch, each under a CPU contract and blocked (asleep)
//! for the whole measurement. The switch must not grow with them: the scheduler and the
//! kernel visit a blocked domain only when one of its instants (a period's end, a deadline)
//! has come.

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};

use super::{Mode, icount_runs, nullcall_figures};
use crate::{Arch, artifacts, util};

/// How many other domains the sweep puts beside the two that switch; the last is the kept
/// figure (64 domains in all, the most a manifest holds).
pub const OTHERS: &[usize] = &[0, 6, 30, 62];

/// The two-domain switch manifest with `others` sleeping domains added, written under
/// `target/bench/`; its path.
fn manifest(others: usize) -> Result<std::path::PathBuf> {
    let mut text = std::fs::read_to_string(util::root().join("manifests/bench-switch.toml"))?;
    for i in 0..others {
        write!(
            text,
            "\n[[domain]]\nname = \"idle-{i}\"\napp = \"nullcall\"\nargs = [\"--idle\", \"5000\"]\n\
             memory = {{ guaranteed = \"256K\" }}\ncpu = {{ period = \"100ms\", slice = \"1ms\" }}\n"
        )?;
    }
    let dir = util::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("switch-with-{others}-others.toml"));
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Instructions per domain switch with `others` sleeping domains beside the two that switch.
pub fn switch_with(others: usize, mode: Mode) -> Result<f64> {
    let a = artifacts::build(Arch::Riscv64)?;
    let path = manifest(others)?;
    let prepared = crate::system::IcountBoot::new(&a, &path.to_string_lossy(), "")?;
    let mut figures = Vec::new();
    for _ in 0..icount_runs(mode) {
        let out = prepared.run(&a)?;
        let (n, t, l) = nullcall_figures(&out).with_context(|| {
            format!("{}: no figures in the log:\n{}", path.display(), out.log_text())
        })?;
        figures.push((t - l) as f64 / (2 * n) as f64);
    }
    if figures.iter().any(|&f| f != figures[0]) {
        bail!("{}: the figure differs between boots under -icount: {figures:?}", path.display());
    }
    Ok(figures[0])
}

/// The sweep as a markdown table, and the figure with the most domains.
pub fn sweep(mode: Mode) -> Result<(String, f64)> {
    let mut md = String::from(
        "\n| domains | domain switch (instructions) | vs two domains |\n|---:|---:|---:|\n",
    );
    let mut two = None;
    let mut last = 0.0;
    for &others in OTHERS {
        let f = switch_with(others, mode)?;
        let base = *two.get_or_insert(f);
        writeln!(md, "| {} | {:.1} | {:+.1}% |", others + 2, f, (f / base - 1.0) * 100.0)?;
        last = f;
    }
    md.push_str(
        "\nThe other domains sleep under 1 ms / 100 ms contracts for the whole measurement.\n",
    );
    Ok((md, last))
}
