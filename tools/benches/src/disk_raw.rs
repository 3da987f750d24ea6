//! `cargo xtask bench disk-raw`: the raw block path, one client domain (`blkbench`) through a
//! driver domain to the disk, on each device Tessera drives: virtio-blk on both architectures,
//! AHCI on x86_64.
//!
//! Workloads: 4 KiB random and 64 KiB sequential reads and writes, each at queue depth 1 and 8,
//! over an 8 MiB region (filled first for the reads, so that every block read is checked
//! against data, not zeros). For each:
//! - **Instructions per request** under `-icount shift=0,sleep=off`, split into the driver
//!   domain, the client and the kernel. Two boots differ only in the number of transfers
//!   ([`FEW`] and [`MANY`]); each figure is the difference of the two boots' totals over the
//!   difference of their transfers, so boot, start-up and shut-down cancel out. The domains'
//!   shares are their CPU accounts (the kernel's run summary: their own code and the system
//!   calls they make); the kernel's is the rest of the busy time: the run's virtual time less
//!   the kernel's idle time (also in the summary), less the domains'. Busy time, because a guest
//!   that halts while QEMU does the device's work sees its clock jump to its next timer: the
//!   Linux figures count the same way. The client makes and checks no data in these boots
//!   (`blkbench --no-verify`), as `fio` checks none in the Linux figures: the figure is the
//!   path's cost, not the workload's.
//! - **IOPS and MB/s** by the client's clock over its workload alone, in a boot without
//!   `-icount`, every block written made and every block read checked ([`Mode::Full`] only;
//!   wall-clock figures are never kept).
//!
//! Kept: the 4 KiB random read at depth 1 on each device, the median of [`PAIRS`] pairs of
//! boots. At depth 8 how many completions one interrupt brings depends on when QEMU's threads
//! finish the requests, so the figures move by a quarter from one run to the next: shown, not
//! kept.

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::by_arch::ByArch;
use super::figures;
use crate::baseline::Table;
use crate::measure::{Mode, environment, table, write_report};
use qemu_run::qemu::IcountBoot;
use qemu_run::qemu::{Ending, Outcome};
use tool_base::{Arch, artifacts, util};

/// The transfers of the shorter and the longer boot.
pub const FEW: u64 = 200;
/// See [`FEW`].
pub const MANY: u64 = 1200;

/// A workload: its key, what it is for people, and `blkbench`'s shape arguments.
struct Workload {
    key: &'static str,
    label: &'static str,
    args: &'static [&'static str],
}

impl Workload {
    /// Whether it reads (then the region is filled first, so that reads find data).
    fn reads(&self) -> bool {
        self.args.windows(2).any(|w| w == ["--mix", "read"])
    }
}

const WORKLOADS: [Workload; 4] = [
    Workload {
        key: "rand4k_read",
        label: "4 KiB random read",
        args: &["--pattern", "random", "--mix", "read", "--size", "4096"],
    },
    Workload {
        key: "rand4k_write",
        label: "4 KiB random write",
        args: &["--pattern", "random", "--mix", "write", "--size", "4096"],
    },
    Workload {
        key: "seq64k_read",
        label: "64 KiB sequential read",
        args: &["--pattern", "sequential", "--mix", "read", "--size", "65536"],
    },
    Workload {
        key: "seq64k_write",
        label: "64 KiB sequential write",
        args: &["--pattern", "sequential", "--mix", "write", "--size", "65536"],
    },
];

/// Queue depths.
const DEPTHS: [u32; 2] = [1, 8];

/// A device: its key, its manifest bus, its driver domain's app, and whether `arch` has it.
struct Device {
    key: &'static str,
    bus: &'static str,
    app: &'static str,
}

const DEVICES: [Device; 2] = [
    Device { key: "virtio", bus: "virtio", app: "virtio-blk" },
    Device { key: "ahci", bus: "ahci", app: "ahci" },
];

impl Device {
    fn on(&self, arch: Arch) -> bool {
        self.bus != "ahci" || arch == Arch::X86_64
    }
}

/// The region the client works in: 8 MiB.
const REGION_SECTORS: u64 = 16384;

/// The manifest of one configuration, written under `target/bench/disk-raw/`; its path
/// relative to the workspace.
fn manifest(
    dev: &Device,
    w: &Workload,
    depth: u32,
    transfers: u64,
    verify: bool,
) -> Result<String> {
    let mut args: Vec<String> = [
        "--channel",
        "bench",
        "--transfers",
        &transfers.to_string(),
        "--region",
        &format!("0:{REGION_SECTORS}"),
        "--depth",
        &depth.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(w.args.iter().map(|s| s.to_string()));
    if w.reads() {
        args.push("--prefill".into());
    }
    if !verify {
        args.push("--no-verify".into());
    }
    let args = args.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", ");
    let (bus, app) = (dev.bus, dev.app);
    let text = format!(
        "# `cargo xtask bench disk-raw`: {} at queue depth {depth}, {transfers} transfers.\n\
         [system]\nmemory = \"64M\"\n\n\
         [[system.disk]]\nname = \"data\"\nsize = \"9M\"\nbus = \"{bus}\"\n\n\
         [[domain]]\nname = \"driver\"\napp = \"{app}\"\nmemory = {{ guaranteed = \"4M\" }}\n\
         cpu = {{ period = \"10ms\", slice = \"4ms\", extra = true, latency = \"500us\" }}\n\
         driver = true\ndevices = [{{ disk = \"data\" }}]\n\n\
         [[domain]]\nname = \"bench\"\napp = \"blkbench\"\nargs = [{args}]\n\
         memory = {{ guaranteed = \"2M\" }}\ncpu = {{ period = \"10ms\", slice = \"4ms\", extra = true }}\n\n\
         [[channel]]\nname = \"bench-req\"\nfrom = \"bench\"\nto = \"driver\"\n\n\
         [[channel]]\nname = \"bench-resp\"\nfrom = \"driver\"\nto = \"bench\"\n",
        w.label
    );
    let checked = if verify { "-verified" } else { "" };
    let rel =
        format!("target/bench/disk-raw/{}-{}-qd{depth}-{transfers}{checked}.toml", dev.key, w.key);
    let path = util::root().join(&rel);
    std::fs::create_dir_all(path.parent().expect("a file in a directory"))?;
    std::fs::write(&path, text)?;
    Ok(rel)
}

/// What one boot's log says: virtual time since boot, the kernel's idle time, the driver's
/// and the client's CPU (all in ns), and the client's workload (bytes, elapsed ns by its clock).
#[derive(Clone, Copy, Debug, Default)]
struct Boot {
    total: f64,
    idle: f64,
    driver: f64,
    client: f64,
    bytes: u64,
    elapsed: u64,
}

fn read_boot(out: &Outcome, manifest: &str) -> Result<Boot> {
    if out.ending != Ending::Kernel(0) {
        bail!("{manifest}: the boot ended {:?}:\n{}", out.ending, out.log_text());
    }
    let failed = |what: &str| format!("{manifest}: {what}:\n{}", out.log_text());
    out.line("[bench] blkbench: done").with_context(|| failed("the client did not finish"))?;
    let measured =
        out.line("blkbench: measured ").with_context(|| failed("no measured workload"))?;
    let field = |k| qemu_run::log::field(&measured.message, k).with_context(|| failed("no {k}="));
    let (bytes, elapsed) = (field("bytes")?, field("elapsed_ns")?);
    let idle_line = out.line("kernel: idle ").with_context(|| failed("no idle time"))?;
    let n: Vec<u64> = idle_line
        .message
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let [idle, total] = n[..] else { bail!(failed("an unreadable idle line")) };
    let accounts = qemu_run::cpu::summary_accounts(out);
    let cpu = |name: &str| -> Result<f64> {
        let a = accounts
            .iter()
            .find(|a| a.domain == name)
            .with_context(|| failed(&format!("no CPU account of {name}")))?;
        Ok(((a.guaranteed_us + a.extra_us) * 1000) as f64)
    };
    Ok(Boot {
        total: total as f64,
        idle: idle as f64,
        driver: cpu("driver")?,
        client: cpu("bench")?,
        bytes,
        elapsed,
    })
}

/// One configuration's figures: instructions per request (busy, and its split), and the
/// wall-clock rate (NaN when not measured).
#[derive(Clone, Debug, Serialize)]
struct Row {
    device: &'static str,
    workload: &'static str,
    depth: u32,
    instructions: f64,
    /// The largest less the smallest of the pairs' figures.
    spread: f64,
    driver: f64,
    kernel: f64,
    client: f64,
    iops: f64,
    mb_per_s: f64,
}

/// Boots of each pair under `-icount`: the device's completions land at points of virtual
/// time that vary a little from boot to boot (QEMU does the device's work on its own threads,
/// on the host's clock), so the figure is the median pair's.
const PAIRS: usize = 5;

fn measure(
    a: &artifacts::Artifacts,
    dev: &'static Device,
    w: &'static Workload,
    depth: u32,
    mode: Mode,
) -> Result<Row> {
    let few_manifest = manifest(dev, w, depth, FEW, false)?;
    let many_manifest = manifest(dev, w, depth, MANY, false)?;
    let (few_boot, many_boot) =
        (IcountBoot::new(a, &few_manifest, "")?, IcountBoot::new(a, &many_manifest, "")?);
    let n = (MANY - FEW) as f64;
    let mut pairs = Vec::new();
    for _ in 0..PAIRS {
        let few = read_boot(&few_boot.run(a)?, &few_manifest)?;
        let many = read_boot(&many_boot.run(a)?, &many_manifest)?;
        let busy = ((many.total - many.idle) - (few.total - few.idle)) / n;
        let driver = (many.driver - few.driver) / n;
        let client = (many.client - few.client) / n;
        pairs.push((busy, driver, client));
    }
    pairs.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (busy, driver, client) = pairs[PAIRS / 2];
    let spread = pairs[PAIRS - 1].0 - pairs[0].0;
    let (mut iops, mut mb_per_s) = (f64::NAN, f64::NAN);
    if mode == Mode::Full {
        let m = manifest(dev, w, depth, MANY, true)?;
        let mut prepared = IcountBoot::new(a, &m, "")?;
        prepared.boot.icount = false;
        let wall = read_boot(&prepared.run(a)?, &m)?;
        let secs = wall.elapsed as f64 / 1e9;
        iops = MANY as f64 / secs;
        mb_per_s = wall.bytes as f64 / secs / 1e6;
    }
    Ok(Row {
        device: dev.key,
        workload: w.key,
        depth,
        instructions: busy,
        spread,
        driver,
        kernel: busy - driver - client,
        client,
        iops,
        mb_per_s,
    })
}

/// The key of a kept figure.
fn key(r: &Row) -> String {
    format!("{}_{}_qd{}", r.device, r.workload, r.depth)
}

/// Measures on `arch`: every row (the kept ones only in [`Mode::Check`]) and the kept table.
fn measure_on(arch: Arch, mode: Mode) -> Result<(Vec<Row>, Table)> {
    let a = artifacts::build(arch)?;
    let mut rows = Vec::new();
    for dev in DEVICES.iter().filter(|d| d.on(arch)) {
        for w in &WORKLOADS {
            for depth in DEPTHS {
                if mode == Mode::Check && (w.key != "rand4k_read" || depth != 1) {
                    continue;
                }
                eprintln!("bench disk-raw: {} {} {} qd{depth}", arch.name(), dev.key, w.key);
                rows.push(measure(&a, dev, w, depth, mode)?);
            }
        }
    }
    let kept = rows
        .iter()
        .filter(|r| r.workload == "rand4k_read" && r.depth == 1)
        .map(|r| (key(r), r.instructions))
        .collect();
    Ok((rows, table(arch, "disk_raw", kept)))
}

/// Runs the benchmark on each of `arches` and writes `target/bench/disk-raw.{md,json}` (not in
/// [`Mode::Check`]); returns its kept figures, a table per architecture.
pub fn run(mode: Mode, arches: &[Arch]) -> Result<Vec<Table>> {
    let mut measured = Vec::new();
    let mut kept = Vec::new();
    for &arch in arches {
        let (rows, t) = measure_on(arch, mode)?;
        measured.push(rows);
        kept.push(t);
    }
    if mode == Mode::Check {
        return Ok(kept);
    }
    let env = environment(arches);
    let mut md = env.heading("disk-raw");
    let mut t = ByArch::new(
        &["device", "workload", "depth"],
        arches,
        &["instr/req", "spread", "driver", "kernel", "client", "IOPS", "MB/s"],
        &["Linux 6.1, x86_64"],
    );
    for dev in &DEVICES {
        for w in &WORKLOADS {
            for depth in DEPTHS {
                let groups: Vec<Vec<String>> = measured
                    .iter()
                    .map(|rows| {
                        rows.iter()
                            .find(|r| {
                                r.device == dev.key && r.workload == w.key && r.depth == depth
                            })
                            .map_or_else(
                                || vec!["-".to_string(); 7],
                                |r| {
                                    vec![
                                        format!("{:.0}", r.instructions),
                                        format!("±{:.0}", r.spread / 2.0),
                                        format!("{:.0}", r.driver),
                                        format!("{:.0}", r.kernel),
                                        format!("{:.0}", r.client),
                                        format!("{:.0}", r.iops),
                                        format!("{:.1}", r.mb_per_s),
                                    ]
                                },
                            )
                    })
                    .collect();
                let k = format!("{}_{}_qd{depth}", dev.key, w.key);
                let anchor = figures::lookup("x86_64", "disk_raw", &k).map_or("", |s| s.anchor);
                t.row(
                    &[dev.key.to_string(), w.label.to_string(), depth.to_string()],
                    &groups,
                    &[anchor.to_string()],
                );
            }
        }
    }
    md.push_str(&t.finish());
    writeln!(
        md,
        "\nInstructions per request: guest nanoseconds of busy time under `-icount shift=0,sleep=off` \
         (the run's time less the kernel's idle time), the difference of a {MANY}-transfer and a \
         {FEW}-transfer boot over {} transfers (the median of {PAIRS} pairs; `spread`: half their range), the client making and checking no data \
         (`blkbench --no-verify`: the path alone); split into the driver domain's and the \
         client's CPU accounts (their code and their system calls) and the rest (the kernel: \
         scheduling, interrupt delivery, switches). IOPS and MB/s: the client's clock over its {MANY} transfers \
         in a boot without `-icount`, every block written made and every block read checked. One client, an 8 MiB region (filled first for the reads, \
         every block read checked).",
        MANY - FEW
    )?;
    let json = serde_json::json!({
        "benchmark": "disk-raw",
        "environment": env,
        "architectures": arches.iter().zip(&measured).map(|(a, rows)| serde_json::json!({
            "arch": a.name(),
            "rows": rows,
        })).collect::<Vec<_>>(),
    });
    write_report("disk-raw", &md, json)?;
    Ok(kept)
}
