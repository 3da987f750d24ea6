//! `cargo xtask bench boot`: boot to shutdown for each firmware and architecture, as wall-clock
//! time (median of 5 runs, with min and max) and as virtual time under `-icount
//! shift=0,sleep=off` (the kernel's own timestamp on its shutdown record; deterministic).
//! With Tessera's firmware (riscv64) and on x86_64 it also boots with 16 GiB of RAM instead of
//! 128 MiB, once under `-icount`, and fails if that boot takes more than 10% longer in virtual
//! time: the kernel's set-up of physical memory must not grow with RAM. Last, the boot with
//! 1,024 domains, to the moment the first of them runs ([`many_domains_us`]).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::baseline::Table;
use crate::measure::{Mode, RUNS, environment, icount_runs, table, write_report};
use qemu_run::log::Kernel;
use qemu_run::qemu::{self, Boot, Ending};
use system_image::many_domains;
use tool_base::{Arch, Bios, artifacts};

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

/// Seconds-with-decimals timestamp of the `shutdown:` record, in microseconds.
fn shutdown_us(out: &qemu::Outcome) -> Option<u64> {
    let t = out.line("shutdown: ")?.timestamp.as_ref()?;
    let secs: f64 = t.trim().parse().ok()?;
    Some((secs * 1e6).round() as u64)
}

/// RAM of the large boot, in MiB.
const LARGE_MIB: u32 = 16384;

/// How much longer in virtual time the large boot may take than the 128 MiB one.
const LARGE_BAR: f64 = 1.10;

/// The key of the large boot's virtual time in the baseline (`None`: not measured).
fn large_key(arch: Arch, bios: Bios) -> Option<&'static str> {
    match (arch, bios) {
        (Arch::Riscv64, Bios::Rustsbi) => Some("virtual_us_16g"),
        (Arch::Riscv64, Bios::Opensbi) => None,
        (Arch::X86_64, _) => Some("virtual_us_16g"),
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

/// Boots each configuration of `arches` to shutdown; prints and writes the report (not in
/// [`Mode::Check`]); returns the kept figures (virtual time), a table per architecture.
pub(super) fn run(mode: Mode, arches: &[Arch]) -> Result<Vec<Table>> {
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
        let mut figures = vec![(boot_key(arch, bios).into(), virt as f64)];
        if let Some(key) = large_key(arch, bios) {
            let mut large = b.clone();
            large.memory = LARGE_MIB;
            let out = qemu::boot(&large, &a, &kernel, None, &mut |_| {})?;
            if out.ending != Ending::Kernel(0) {
                bail!(
                    "{} boot with {LARGE_MIB} MiB ended {:?}:\n{}",
                    arch.name(),
                    out.ending,
                    out.log_text()
                );
            }
            let large_virt = shutdown_us(&out).context("no timestamp on the shutdown record")?;
            println!(
                "{} boot: {virt} µs with {} MiB, {large_virt} µs with {LARGE_MIB} MiB (virtual)",
                arch.name(),
                b.memory
            );
            if large_virt as f64 > virt as f64 * LARGE_BAR {
                bail!(
                    "{} boot with {LARGE_MIB} MiB takes {large_virt} µs of virtual time, more than \
                     {:.0}% over the {virt} µs with {} MiB: boot must not grow with RAM",
                    arch.name(),
                    (LARGE_BAR - 1.0) * 100.0,
                    b.memory
                );
            }
            figures.push((key.into(), large_virt as f64));
        }
        match kept.iter_mut().find(|t| t.arch == arch.name()) {
            Some(t) => t.figures.extend(figures),
            None => kept.push(table(arch, "boot", figures)),
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
    let mut many = Vec::new();
    for &arch in arches {
        let us = many_domains_us(arch, mode)?;
        let t = kept.iter_mut().find(|t| t.arch == arch.name()).context("a boot table")?;
        t.figures.push((MANY_DOMAINS_KEY.into(), us as f64));
        many.push((arch, us));
    }
    if mode == Mode::Check {
        return Ok(kept);
    }
    let env = environment(arches);
    let mut md = env.heading("boot");
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
    md.push_str(&format!(
        "\nWith {} domains (`{}`), virtual µs from reset until the first domain runs, all of them made: {}. About half of it checks the boot image's checksum (a copy of the app per domain).\n",
        manifest::MAX_DOMAINS,
        "many_domains::asleep",
        many.iter()
            .map(|(a, us)| format!("{} {us}", a.name()))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let many_json: Vec<_> = many
        .iter()
        .map(|(a, us)| serde_json::json!({ "arch": a.name(), "domains": manifest::MAX_DOMAINS, "virtual_us_to_first_domain": us }))
        .collect();
    let json = serde_json::json!({ "benchmark": "boot", "environment": env, "results": rows, "many_domains": many_json });
    write_report("boot", &md, json)?;
    Ok(kept)
}

/// The key of the boot with the most domains in the baseline.
const MANY_DOMAINS_KEY: &str = "virtual_us_1024_domains";

/// Virtual µs from reset until the first domain runs (the kernel's `kernel heap: ... used at
/// boot` record, made once every domain exists), booting the manifest with
/// [`manifest::MAX_DOMAINS`] domains ([`many_domains::asleep`]) on `arch`; the same in every
/// boot.
fn many_domains_us(arch: Arch, mode: Mode) -> Result<u64> {
    let a = artifacts::build(arch)?;
    let path = many_domains::asleep(many_domains::MOST_OTHERS)?;
    let prepared = qemu_run::qemu::IcountBoot::new(&a, &path.to_string_lossy(), "")?;
    let mut figures = Vec::new();
    for _ in 0..icount_runs(mode) {
        let out = prepared.run(&a)?;
        let line = out.line("used at boot").with_context(|| {
            format!("{}: no heap record at boot:\n{}", path.display(), out.log_text())
        })?;
        let secs: f64 = line
            .timestamp
            .as_deref()
            .and_then(|t| t.trim().parse().ok())
            .context("no timestamp on the heap record at boot")?;
        figures.push((secs * 1e6).round() as u64);
    }
    if figures.iter().any(|&f| f != figures[0]) {
        bail!("{}: the boot differs between boots under -icount: {figures:?}", path.display());
    }
    Ok(figures[0])
}
