//! `cargo xtask bench paging`: the Heracles thesis's programs (McDonald 2001, ch. 12) under each
//! local paging hierarchy, in QEMU on the Deskstar disk model, next to what the thesis reports.
//!
//! Each run boots the `heracles` app with one program (`compress`, `matmul`, `filter`, at 1/16
//! of the thesis's sizes: `paging_programs`) in a stretch paged by the paged stretch driver to
//! its own session of the virtio-blk driver domain, on a sparse image of the Deskstar 34GXP
//! (`model = "deskstar-34gxp"`), under `-icount shift=0,sleep=off`: figures are virtual time,
//! and the CPU's part of them is instructions (1 ns each). The program's memory is the thesis's
//! at the same scale (compress and matmul 1 MiB, filter 512 KiB); a cache's bytes (the
//! compressed pool, the eviction and fetch areas) are taken out of it, so every hierarchy of a
//! program has the same memory. The host computes each program's checksum and the run must
//! agree.
//!
//! Per run: the run time, faults, disk reads and writes (device requests), the top cache's hit
//! rate, and each fault's cost split into:
//! - kernel: the fault's delivery and return, the round trip of a fault whose driver only maps
//!   a zeroed frame, measured in the same invocation (`tests/manifests/paging/bench-fault.toml`,
//!   as `bench fault`), plus the paged driver's own kernel calls (map, remap, protect, unmap),
//!   timed by the driver;
//! - compression: the compressed cache's codec, timed by the cache;
//! - disk: the time the faulting thread waited for its disk session (the driver domain's work
//!   and the modelled disk);
//! - driver: the rest of the time inside the driver (policy, cache bookkeeping, copies through
//!   the window).
//!
//! Written to `target/bench/paging.{md,json}`; the generated manifests are kept under
//! `target/bench/paging/`. Kept in the baseline ([`KEPT`]): compress's run time with
//! prefetching (its best, in the thesis), matmul's with a WKdm cache of half its memory (its
//! best), matmul's hit rate with a WKdm cache of an eighth (the thesis: 79%), the median
//! round trip of a fault served from the compressed cache. The report also shows what frame
//! loans save: filter's local paging run with loans (every page moved to or from the disk
//! lends its frame to the disk driver) and again with `loans=no` (every page copied through
//! the block session's data area), the paging domain's CPU per disk request beyond the
//! program's own all in memory (its CPU account less that run's), with loans, with copies, and
//! their ratio. Not kept: the domains' CPU accounts differ between boots by about 60 µs,
//! 1% of the figure.

use anyhow::{Context, Result, bail};
use paging_programs::{Program, Scale};
use serde::Serialize;

use crate::baseline::Table;
use crate::measure::Mode;
use qemu_run::log::field;
use qemu_run::qemu::{Ending, IcountBoot, Outcome};
use tool_base::artifacts::{self, Artifacts};
use tool_base::{Arch, util};

/// The seed of every run (the host's checksum uses it too).
pub(crate) const SEED: u64 = 1;

/// A run of `bench paging` or `bench remote`: one program under one configuration, booted
/// from a manifest of its own.
pub(crate) trait Run {
    /// The program it runs.
    fn program(&self) -> Program;
    /// How the reports name it.
    fn label(&self) -> String;
    /// Whether a kept figure needs it (the check boots only these).
    fn kept(&self) -> bool;
    /// Its manifest's path, relative to the repository's root.
    fn file(&self) -> String;
    /// Its manifest.
    fn manifest(&self) -> String;
}

/// The host's checksum of `program` at the default scale with [`SEED`], which every run of it
/// must print (each computed once).
pub(crate) fn host_checksum(program: Program) -> u64 {
    static SUMS: std::sync::OnceLock<Vec<(Program, u64)>> = std::sync::OnceLock::new();
    let sums = SUMS.get_or_init(|| {
        Program::ALL
            .iter()
            .map(|p| {
                let mut region = vec![0u8; p.bytes_needed(Scale::Default)];
                (*p, p.run(Scale::Default, &mut region, SEED).checksum)
            })
            .collect()
    });
    sums.iter().find(|(p, _)| *p == program).expect("every program").1
}

/// Boots on `arch` each of `runs` that `mode` measures (every one in [`Mode::Full`], those
/// [`Run::kept`] in the check), each from its manifest written under `target/bench/`, and
/// reads it with `read`, which is given the prepared boot (600 s at most) and the host's
/// checksum of its program.
pub(crate) fn boot_each<C: Run, R>(
    bench: &str,
    arch: Arch,
    a: &Artifacts,
    runs: &[C],
    mode: Mode,
    mut read: impl FnMut(&C, IcountBoot, u64) -> Result<R>,
) -> Result<Vec<R>> {
    let mut rows = Vec::new();
    for c in runs.iter().filter(|c| mode == Mode::Full || c.kept()) {
        eprintln!("bench {bench}: {} {} {}", arch.name(), c.program().name(), c.label());
        let rel = c.file();
        let path = util::root().join(&rel);
        std::fs::create_dir_all(path.parent().expect("a file in a directory"))?;
        std::fs::write(&path, c.manifest())?;
        let mut prepared =
            IcountBoot::new(a, &rel, "").with_context(|| format!("preparing {rel}"))?;
        prepared.boot.timeout = std::time::Duration::from_secs(600);
        rows.push(read(c, prepared, host_checksum(c.program()))?);
    }
    Ok(rows)
}

/// The log lines of `out`, a boot of `rel` running `program`, once the boot ended cleanly and
/// the program says it succeeded with the host's checksum `want`; else an error with the log.
pub(crate) fn finished_lines(
    out: &Outcome,
    rel: &str,
    program: Program,
    want: u64,
) -> Result<Vec<String>> {
    let failed = |what: String| anyhow::anyhow!("{rel}: {what}:\n{}", out.log_text());
    if out.ending != Ending::Kernel(0) {
        return Err(failed(format!("the boot ended {:?}", out.ending)));
    }
    let lines: Vec<String> = out.log.iter().map(|l| l.message.clone()).collect();
    let sum = lines
        .iter()
        .find(|l| l.contains(&format!("heracles: {} checksum=", program.name())))
        .ok_or_else(|| failed("no checksum line".into()))?;
    let got = sum
        .split("checksum=0x")
        .nth(1)
        .and_then(|s| u64::from_str_radix(s.split_whitespace().next()?, 16).ok())
        .ok_or_else(|| failed("a checksum that does not parse".into()))?;
    if got != want || !sum.contains("ok=true") {
        return Err(failed(format!(
            "the program's result is wrong: {sum} (the host computes {want:#018x})"
        )));
    }
    Ok(lines)
}

/// The fields of the first log line containing `prefix`.
pub(crate) fn numbers<'a>(
    lines: &'a [String],
    prefix: &str,
) -> Result<impl Fn(&str) -> Result<u64> + 'a> {
    let line =
        lines.iter().find(|l| l.contains(prefix)).with_context(|| format!("no line `{prefix}`"))?;
    Ok(move |k: &str| field(line, k).with_context(|| format!("no `{k}=` in `{line}`")))
}

/// One run: a program under a hierarchy, with the share of its memory given to the cache.
#[derive(Clone, Copy, Debug)]
struct Config {
    program: Program,
    hierarchy: &'static str,
    /// The compressed pool's share of the memory, in eighths (compressed hierarchies).
    cache_eighths: usize,
    /// The compressed pool's codec, `lz4` or `wkdm` (compressed hierarchies).
    codec: &'static str,
    /// Pages evicted at once when no frame is free.
    ahead: usize,
    /// Evictions between two harvests of the accessed bits (0: never).
    harvest: usize,
    /// Whether pages to and from the disk lend their frames to the disk driver (`loans=no`:
    /// copied through the block session's data area).
    loans: bool,
    /// Every page of the program in its frames: nothing paged (the program's own CPU, to
    /// subtract).
    resident: bool,
}

/// Pages of each of the eviction and fetch areas of the prefetching hierarchies.
const AREA_PAGES: usize = 8;

impl Config {
    const fn new(program: Program, hierarchy: &'static str, cache_eighths: usize) -> Config {
        Config {
            program,
            hierarchy,
            cache_eighths,
            codec: "lz4",
            ahead: 1,
            harvest: 0,
            loans: true,
            resident: false,
        }
    }

    /// `program` with every page in its frames.
    const fn resident(program: Program) -> Config {
        Config { resident: true, ..Config::new(program, "local", 0) }
    }

    /// The same, copying pages through the data area instead of lending their frames.
    const fn copies(self) -> Config {
        Config { loans: false, ..self }
    }

    /// The same, its clock harvesting the accessed bits every `evictions` evictions.
    const fn harvest(self, evictions: usize) -> Config {
        Config { harvest: evictions, ..self }
    }

    /// The same, evicting `pages` at once.
    const fn ahead(self, pages: usize) -> Config {
        Config { ahead: pages, ..self }
    }

    /// The same with the WKdm codec.
    const fn wkdm(self) -> Config {
        Config { codec: "wkdm", ..self }
    }

    fn memory(&self) -> usize {
        self.program.default_memory()
    }

    fn compressed(&self) -> bool {
        self.hierarchy.contains("compressed")
    }

    fn cache_bytes(&self) -> usize {
        if self.compressed() { self.memory() * self.cache_eighths / 8 } else { 0 }
    }

    /// The frames: the memory less the cache's bytes and areas (every page of the program
    /// when it runs all in memory).
    fn frames(&self) -> usize {
        if self.resident {
            return self.program.bytes_needed(Scale::Default).div_ceil(4096);
        }
        let areas = if self.hierarchy.starts_with("prefetching") { 2 * AREA_PAGES } else { 0 };
        (self.memory() - self.cache_bytes()) / 4096 - areas
    }

    fn spec(&self) -> String {
        let mut s = format!("hierarchy={},frames={}", self.hierarchy, self.frames());
        if self.compressed() {
            s.push_str(&format!(",cache={},codec={}", self.cache_bytes(), self.codec));
        }
        if self.hierarchy.starts_with("prefetching") {
            s.push_str(&format!(",evict={AREA_PAGES},fetch={AREA_PAGES}"));
        }
        s.push_str(",disk=pg");
        if self.ahead > 1 {
            s.push_str(&format!(",ahead={}", self.ahead));
        }
        if self.harvest > 0 {
            s.push_str(&format!(",harvest={}", self.harvest));
        }
        if !self.loans {
            s.push_str(",loans=no");
        }
        s
    }
}

/// The manifest of one paging run of `bench NAME`: `program` in the `heracles` domain under
/// `spec` (`label` says which), paging to its own session of the virtio-blk driver domain on
/// the Deskstar disk model, the pager domain's CPU slice `slice` of every 10 ms.
pub(crate) fn pager_manifest(
    bench: &str,
    program: &str,
    label: &str,
    memory: usize,
    spec: &str,
    slice: &str,
) -> String {
    format!(
        r#"# `cargo xtask bench {bench}`: {program} under {label}, {memory} KiB of memory.
[system]
memory = "64M"

[[system.disk]]
name = "swap"
size = "34243143680"
bus = "virtio"
model = "deskstar-34gxp"

[[domain]]
name = "blk"
app = "virtio-blk"
memory = {{ guaranteed = "4M" }}
cpu = {{ period = "10ms", slice = "3ms", extra = true, latency = "500us" }}
driver = true
devices = [{{ disk = "swap" }}]

[[domain]]
name = "pager"
app = "heracles"
args = ["--pager", "{spec}", "--program", "{program}", "--seed", "{SEED}"]
memory = {{ guaranteed = "8M" }}
cpu = {{ period = "10ms", slice = "{slice}", extra = true }}

[[channel]]
name = "pg-req"
from = "pager"
to = "blk"

[[channel]]
name = "pg-resp"
from = "blk"
to = "pager"
"#,
        memory = memory / 1024,
    )
}

/// The runs: each program under the four hierarchies, with the thesis's cache sizes (compress
/// 25% of its memory; matmul 50%, its best, and 12.5%, the thesis's 2 MB of 16 MB; filter
/// 12.5% and 25%, its 1 MB and 2 MB of 8 MB), the compressed ones with lz4 and with WKdm (the
/// thesis's codec); and compress's and matmul's caches evicting 16 pages at once, so that most
/// faults the cache answers find a free frame (the distribution of a hit's own cost, on text
/// and on integers); and a clock that harvests the hardware's accessed bits (a true
/// second-chance clock) against the default one that hears of faults only; and filter's local
/// paging copying its pages through the data area instead of lending their frames, with filter
/// all in memory beside them (what frame loans save per disk transfer).
const CONFIGS: [Config; 32] = [
    Config::new(Program::Compress, "local", 0),
    Config::new(Program::Compress, "compressed", 2),
    Config::new(Program::Compress, "compressed", 2).wkdm(),
    Config::new(Program::Compress, "compressed", 2).ahead(16),
    Config::new(Program::Compress, "compressed", 2).wkdm().ahead(16),
    Config::new(Program::Compress, "prefetching-compressed", 2),
    Config::new(Program::Compress, "prefetching-compressed", 2).wkdm(),
    Config::new(Program::Compress, "prefetching", 0),
    Config::new(Program::Compress, "prefetching", 0).harvest(32),
    Config::new(Program::Matmul, "local", 0),
    Config::new(Program::Matmul, "local", 0).harvest(32),
    Config::new(Program::Matmul, "compressed", 4),
    Config::new(Program::Matmul, "compressed", 4).wkdm(),
    Config::new(Program::Matmul, "compressed", 4).wkdm().harvest(32),
    Config::new(Program::Matmul, "compressed", 4).ahead(16),
    Config::new(Program::Matmul, "compressed", 4).wkdm().ahead(16),
    Config::new(Program::Matmul, "compressed", 1),
    Config::new(Program::Matmul, "compressed", 1).wkdm(),
    Config::new(Program::Matmul, "compressed", 1).wkdm().harvest(32),
    Config::new(Program::Matmul, "prefetching-compressed", 1),
    Config::new(Program::Matmul, "prefetching-compressed", 1).wkdm(),
    Config::new(Program::Matmul, "prefetching", 0),
    Config::new(Program::Filter, "local", 0),
    Config::new(Program::Filter, "compressed", 1),
    Config::new(Program::Filter, "compressed", 1).wkdm(),
    Config::new(Program::Filter, "compressed", 2),
    Config::new(Program::Filter, "compressed", 2).wkdm(),
    Config::new(Program::Filter, "prefetching-compressed", 2),
    Config::new(Program::Filter, "prefetching-compressed", 2).wkdm(),
    Config::new(Program::Filter, "prefetching", 0),
    Config::new(Program::Filter, "local", 0).copies(),
    Config::resident(Program::Filter),
];

/// The paging run whose faults `bench report` draws as the book's histogram of fault
/// latencies: its program, and its manifest's path and text.
pub(crate) struct Traced {
    /// The program it runs (its checksum is checked).
    pub program: Program,
    /// Its manifest's path, relative to the repository's root.
    pub file: String,
    /// Its manifest.
    pub manifest: String,
}

/// matmul with a WKdm cache of an eighth of its memory (the thesis's 2 MB of 16 MB), whose
/// faults are served from all three places: first touches zero-filled, pages from the cache
/// (83% of the fetches) and from the disk.
pub(crate) fn traced() -> Traced {
    let c = Config::new(Program::Matmul, "compressed", 1).wkdm();
    Traced { program: c.program, file: c.file(), manifest: c.manifest() }
}

/// What one run measured.
#[derive(Clone, Debug, Serialize)]
struct Row {
    program: &'static str,
    hierarchy: String,
    frames: usize,
    cache_bytes: usize,
    run_ns: u64,
    faults: u64,
    device_reads: u64,
    device_writes: u64,
    hits: u64,
    misses: u64,
    prefetch_hits: u64,
    /// Faults the top cache answered without the disk, and the driver's time in them
    /// (per mille ranks 500, 900, 990, and the longest).
    hit_faults: u64,
    hit_driver_ns: [u64; 4],
    /// Those hits by how the page was stored (zero, raw, compressed): the count and the
    /// median of the driver's time.
    hit_kinds: [(u64, u64); 3],
    kernel_ns_per_fault: f64,
    driver_ns_per_fault: f64,
    codec_ns_per_fault: f64,
    disk_ns_per_fault: f64,
    /// Pages the top cache stored compressed, their compressed bytes, and pages it stored
    /// raw (they did not compress by a sub-page).
    stored_compressed: u64,
    compressed_bytes: u64,
    stored_raw: u64,
    /// The pages fetched back and their reuse distance (the evictions after a page's own up
    /// to its fetch): least, greatest, sum.
    refetches: u64,
    reuse_min: u64,
    reuse_max: u64,
    reuse_sum: u64,
    /// The most pages the compressed pool held at once.
    pool_peak_pages: u64,
    /// Disk requests that moved a lent frame (no copy through the data area).
    lent: u64,
    /// CPU accounts, ns: the paging domain (the program, the paged driver, its disk
    /// session) and the disk driver domain.
    pager_cpu_ns: u64,
    blk_cpu_ns: u64,
}

impl Row {
    fn hit_percent(&self) -> Option<f64> {
        let asked = self.hits + self.misses;
        (asked > 0).then(|| self.hits as f64 * 100.0 / asked as f64)
    }

    /// The share of the fetches served without a disk read (by the pool or by the pages
    /// friends read beside a missed one), in percent.
    fn served_percent(&self) -> Option<f64> {
        let asked = self.hits + self.misses;
        (asked > 0).then(|| asked.saturating_sub(self.device_reads) as f64 * 100.0 / asked as f64)
    }

    /// The mean size of a page stored compressed, in bytes.
    fn compressed_mean(&self) -> Option<f64> {
        (self.stored_compressed > 0)
            .then(|| self.compressed_bytes as f64 / self.stored_compressed as f64)
    }

    /// The mean reuse distance of the pages fetched back.
    fn reuse_mean(&self) -> Option<f64> {
        (self.refetches > 0).then(|| self.reuse_sum as f64 / self.refetches as f64)
    }

    fn seconds(&self) -> f64 {
        self.run_ns as f64 / 1e9
    }

    /// Disk requests, read and write.
    fn transfers(&self) -> u64 {
        self.device_reads + self.device_writes
    }
}

/// How a hit's page was stored, as heracles names the kinds.
const HIT_KINDS: [&str; 3] = ["zero", "raw", "compressed"];

/// Reads `out`, a boot of `c` whose program's checksum must be `want`; `round_trip` is the
/// null fault's round trip.
fn read(c: &Config, out: &Outcome, round_trip: f64, want: u64) -> Result<Row> {
    let rel = c.file();
    let lines = finished_lines(out, &rel, c.program, want)?;
    let done = numbers(&lines, "heracles: done program=")?;
    let cache = numbers(&lines, "heracles: cache hits=")?;
    let disk = numbers(&lines, "heracles: disk device_reads=")?;
    let cost = numbers(&lines, "heracles: cost faults=")?;
    let hit = numbers(&lines, "heracles: hit faults=")?;
    let reuse = numbers(&lines, "heracles: reuse refetches=")?;
    let mut hit_kinds = [(0, 0); 3];
    for (kind, name) in hit_kinds.iter_mut().zip(HIT_KINDS) {
        let by = numbers(&lines, &format!("heracles: hit kind={name} faults="))?;
        *kind = (by("faults")?, by("p50_ns")?);
    }
    let faults = cost("faults")?.max(1) as f64;
    let (fault_ns, kernel_ns, codec_ns, disk_ns) =
        (cost("fault_ns")?, cost("kernel_ns")?, cost("codec_ns")?, cost("disk_ns")?);
    let driver_ns = fault_ns.saturating_sub(kernel_ns + codec_ns + disk_ns);
    let account = |domain: &str| {
        crate::measure::cpu_ns(out, domain)
            .with_context(|| format!("{rel}: no CPU account of domain {domain}"))
    };
    Ok(Row {
        program: c.program.name(),
        hierarchy: c.label(),
        frames: c.frames(),
        cache_bytes: c.cache_bytes(),
        run_ns: done("elapsed_ns")?,
        faults: cost("faults")?,
        device_reads: disk("device_reads")?,
        device_writes: disk("device_writes")?,
        hits: cache("hits")?,
        misses: cache("misses")?,
        prefetch_hits: cache("prefetch_hits")?,
        hit_faults: hit("faults")?,
        hit_driver_ns: [hit("p50_ns")?, hit("p90_ns")?, hit("p99_ns")?, hit("max_ns")?],
        hit_kinds,
        kernel_ns_per_fault: round_trip + kernel_ns as f64 / faults,
        driver_ns_per_fault: driver_ns as f64 / faults,
        codec_ns_per_fault: codec_ns as f64 / faults,
        disk_ns_per_fault: disk_ns as f64 / faults,
        stored_compressed: cache("compressed_pages")?,
        compressed_bytes: cache("compressed_bytes")?,
        stored_raw: cache("raw_pages")?,
        refetches: reuse("refetches")?,
        reuse_min: reuse("min")?,
        reuse_max: reuse("max")?,
        reuse_sum: reuse("sum")?,
        pool_peak_pages: reuse("pool_peak_pages")?,
        lent: disk("lent")?,
        pager_cpu_ns: account("pager")?,
        blk_cpu_ns: account("blk")?,
    })
}

/// What one architecture measured.
struct Measured {
    arch: Arch,
    round_trip: f64,
    rows: Vec<Row>,
}

/// The kept figures: key, and the run (by program and label) and figure they come from.
const KEPT: [(&str, Program, &str); 5] = [
    ("compress_prefetching_seconds", Program::Compress, "prefetching"),
    ("matmul_wkdm_half_seconds", Program::Matmul, "compressed wkdm (50% cache)"),
    ("matmul_wkdm_eighth_hit_percent", Program::Matmul, "compressed wkdm (12% cache)"),
    ("matmul_wkdm_hit_round_trip_p50", Program::Matmul, "compressed wkdm (50% cache, 16 ahead)"),
    ("compress_raw_hit_round_trip_p50", Program::Compress, "compressed wkdm (25% cache, 16 ahead)"),
];

/// The runs of the frame-loan figures, filter's: local paging lending frames to the disk
/// driver, the same copying pages through the data area, and the program all in memory.
const LOAN_RUNS: [&str; 3] = ["local", "local (copies instead of loans)", "all in memory"];

impl Run for Config {
    fn program(&self) -> Program {
        self.program
    }

    fn label(&self) -> String {
        let mut extra = String::new();
        if self.ahead > 1 {
            extra.push_str(&format!(", {} ahead", self.ahead));
        }
        if self.harvest > 0 {
            extra.push_str(&format!(", accessed bits every {}", self.harvest));
        }
        if !self.loans {
            extra.push_str(", copies instead of loans");
        }
        if self.resident {
            "all in memory".to_string()
        } else if self.compressed() {
            format!(
                "{} {} ({}% cache{extra})",
                self.hierarchy,
                self.codec,
                self.cache_eighths * 100 / 8
            )
        } else if extra.is_empty() {
            self.hierarchy.to_string()
        } else {
            format!("{} ({})", self.hierarchy, &extra[2..])
        }
    }

    fn kept(&self) -> bool {
        KEPT.iter().any(|(_, p, l)| *p == self.program && *l == self.label())
    }

    fn file(&self) -> String {
        format!(
            "target/bench/paging/{}-{}-{}-{}-{}-{}{}{}.toml",
            self.program.name(),
            self.hierarchy,
            self.cache_eighths,
            self.codec,
            self.ahead,
            self.harvest,
            if self.loans { "" } else { "-copies" },
            if self.resident { "-resident" } else { "" },
        )
    }

    fn manifest(&self) -> String {
        pager_manifest(
            "paging",
            self.program.name(),
            &self.label(),
            self.memory(),
            &self.spec(),
            "5ms",
        )
    }
}

/// The paging domain's instructions per disk request of `program`'s local paging beyond the
/// program's own (its CPU account less the all-in-memory run's), with frame loans and with
/// copies through the data area; `None` without the three runs.
fn loan_costs(m: &Measured, program: &str) -> Option<(f64, f64)> {
    let [loans, copies, resident] = LOAN_RUNS.map(|l| row(m, program, l));
    let resident = resident?.pager_cpu_ns as f64;
    let per = |r: &Row| (r.pager_cpu_ns as f64 - resident) / r.transfers().max(1) as f64;
    Some((per(loans?), per(copies?)))
}

/// [`loan_costs`] of filter, checked: the run with loans lent every disk request's frame, the
/// run with copies none, and the all-in-memory run used the disk not at all.
fn checked_loan_costs(m: &Measured) -> Result<(f64, f64)> {
    let [loans, copies, resident] =
        LOAN_RUNS.map(|l| row(m, "filter", l).with_context(|| format!("no run filter {l}")));
    let (loans, copies, resident) = (loans?, copies?, resident?);
    if loans.transfers() == 0 || loans.lent != loans.transfers() {
        bail!(
            "filter local: {} of {} disk requests lent their frame (all should)",
            loans.lent,
            loans.transfers()
        );
    }
    if copies.lent != 0 {
        bail!("filter local with loans=no: {} disk requests lent their frame", copies.lent);
    }
    if resident.transfers() != 0 {
        bail!("filter all in memory made {} disk requests", resident.transfers());
    }
    Ok(loan_costs(m, "filter").expect("the three runs"))
}

/// The kept figures of `m`.
fn kept_figures(m: &Measured) -> Result<Vec<(String, f64)>> {
    KEPT.iter()
        .map(|(key, p, label)| {
            let r = row(m, p.name(), label).with_context(|| format!("no run {label}"))?;
            let v = match *key {
                k if k.ends_with("_seconds") => r.run_ns as f64 / 1e9,
                k if k.ends_with("_hit_percent") => r.hit_percent().unwrap_or(0.0),
                // The hits on raw pages that found a free frame.
                k if k.ends_with("_raw_hit_round_trip_p50") => {
                    m.round_trip + r.hit_kinds[1].1 as f64
                }
                _ => m.round_trip + r.hit_driver_ns[0] as f64,
            };
            Ok((key.to_string(), v))
        })
        .collect()
}

fn measure_on(arch: Arch, mode: Mode) -> Result<(Measured, Table)> {
    let a = artifacts::build(arch)?;
    let null = IcountBoot::new(&a, "tests/manifests/paging/bench-fault.toml", "")?;
    let (round_trip, _) = super::fault::per_fault(&null.run(&a)?)?;
    let rows = boot_each("paging", arch, &a, &CONFIGS, mode, |c, boot, want| {
        read(c, &boot.run(&a)?, round_trip, want)
    })?;
    let m = Measured { arch, round_trip, rows };
    if mode == Mode::Full {
        checked_loan_costs(&m)?;
    }
    let kept = crate::measure::table(arch, "paging", kept_figures(&m)?);
    Ok((m, kept))
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1000.0)
}

fn table(m: &Measured) -> String {
    let mut md = format!(
        "## {}\n\nThe null fault's round trip (kernel part of every fault): {:.0} instructions.\n\n\
         | program | hierarchy | frames | run time (s) | faults | disk reads | disk writes | hit rate | prefetch hits | kernel µs/fault | driver | compression | disk |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        m.arch.name(),
        m.round_trip
    );
    for r in &m.rows {
        let hit = r.hit_percent().map_or("-".into(), |h| format!("{h:.0}%"));
        md.push_str(&format!(
            "| {} | {} | {} | {:.3} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.program,
            r.hierarchy,
            r.frames,
            r.run_ns as f64 / 1e9,
            r.faults,
            r.device_reads,
            r.device_writes,
            hit,
            r.prefetch_hits,
            us(r.kernel_ns_per_fault),
            us(r.driver_ns_per_fault),
            us(r.codec_ns_per_fault),
            us(r.disk_ns_per_fault),
        ));
    }
    md
}

/// The compressed-cache hits: the driver's time in them plus the null fault's round trip.
fn hits_table(m: &Measured) -> String {
    let mut md = format!(
        "\n### {}: faults served from the compressed cache\n\nRound trip = the null fault's \
         round trip ({:.0} instructions) + the driver's time in the fault (including any eviction \
         it made room with), per mille rank 500 / 900 / 990 / the longest, in instructions; \
         then the hits that found a free frame (evicted nothing: the hit's own cost) by how the \
         page was stored, each as its count and median round trip: a zero mark (the frame \
         zeroed), a raw page (copied), a compressed one (decompressed). The bar is {}.\n\n\
         | program | hierarchy | hits without the disk | p50 | p90 | p99 | max | zero | raw | compressed |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        m.arch.name(),
        m.round_trip,
        thousands(HIT_BAR)
    );
    for r in m.rows.iter().filter(|r| r.hit_faults > 0) {
        let rt = |ns: u64| format!("{:.0}", m.round_trip + ns as f64);
        let kind = |(count, p50): (u64, u64)| {
            if count == 0 { "-".to_string() } else { format!("{count} at {}", rt(p50)) }
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.program,
            r.hierarchy,
            r.hit_faults,
            rt(r.hit_driver_ns[0]),
            rt(r.hit_driver_ns[1]),
            rt(r.hit_driver_ns[2]),
            rt(r.hit_driver_ns[3]),
            kind(r.hit_kinds[0]),
            kind(r.hit_kinds[1]),
            kind(r.hit_kinds[2]),
        ));
    }
    md
}

/// What frame loans save: filter's local paging with loans and with copies, per disk request.
fn loans_table(m: &Measured) -> String {
    let (Some((loans, copies)), Some(resident)) =
        (loan_costs(m, "filter"), row(m, "filter", "all in memory"))
    else {
        return String::new();
    };
    let mut md = format!(
        "\n### {}: what frame loans save\n\nfilter under local paging, each page moved to or from \
         the disk lending its frame to the disk driver (the device reads or writes it in place), \
         against the same run copying every page through the block session's data area \
         (`loans=no`). Per disk request: the paging domain's instructions (the program, the \
         paged driver and its disk session) beyond the program's own all in memory ({} \
         instructions), and the disk driver domain's.\n\n\
         | filter, local paging | disk requests | lent | paging domain | disk driver |\n\
         |---|---:|---:|---:|---:|\n",
        m.arch.name(),
        thousands(resident.pager_cpu_ns as f64),
    );
    for (label, per) in [("local", loans), ("local (copies instead of loans)", copies)] {
        let Some(r) = row(m, "filter", label) else { continue };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.hierarchy,
            r.transfers(),
            r.lent,
            thousands(per),
            thousands(r.blk_cpu_ns as f64 / r.transfers().max(1) as f64),
        ));
    }
    md.push_str(&format!(
        "\nWith loans the paging domain spends {:.3}× the instructions per request it spends \
         copying: {} fewer.\n",
        loans / copies,
        thousands(copies - loans)
    ));
    md
}

/// The row of `program` under the hierarchy labelled `label`.
fn row<'a>(m: &'a Measured, program: &str, label: &str) -> Option<&'a Row> {
    m.rows.iter().find(|r| r.program == program && r.hierarchy == label)
}

/// The fastest hierarchy of `program`.
fn fastest<'a>(m: &'a Measured, program: &str) -> Option<&'a Row> {
    m.rows.iter().filter(|r| r.program == program).min_by_key(|r| r.run_ns)
}

/// The thesis's statements next to this run's figures.
fn claims(m: &Measured) -> String {
    let time = |p: &str, l: &str| row(m, p, l).map_or(f64::NAN, |r| r.run_ns as f64 / 1e9);
    let hit = |p: &str, l: &str| row(m, p, l).and_then(Row::hit_percent).unwrap_or(f64::NAN);
    let served = |p: &str, l: &str| row(m, p, l).and_then(Row::served_percent).unwrap_or(f64::NAN);
    let best = |p: &str| fastest(m, p).map_or("-".into(), |r| r.hierarchy.clone());
    let mut md = format!(
        "\n### {}: the thesis's findings\n\n| the thesis reports (McDonald 2001, §12, §9.3.1) | \
         this run |\n|---|---|\n",
        m.arch.name()
    );
    let lines = [
        (
            "compress is fastest with local disk and friends (prefetching)".to_string(),
            format!("fastest: {}", best("compress")),
        ),
        (
            "compress with a compressed cache is slower than plain local paging (+25% at 25% cache)"
                .into(),
            format!(
                "{:.2}× local's time",
                time("compress", "compressed wkdm (25% cache)") / time("compress", "local")
            ),
        ),
        (
            "matmul is fastest with a compressed cache of about half its memory".into(),
            format!(
                "fastest: {}; 50% cache {:.2}× local's time",
                best("matmul"),
                time("matmul", "compressed wkdm (50% cache)") / time("matmul", "local")
            ),
        ),
        (
            "a 2 MB compressed cache (12.5%) gives matmul a 79% hit rate".into(),
            format!("{:.0}%", hit("matmul", "compressed wkdm (12% cache)")),
        ),
        (
            "prefetching raises matmul's 2 MB cache from 79% to 98% hits".into(),
            format!(
                "{:.0}% from the pool, {:.0}% of fetches without a disk read",
                hit("matmul", "prefetching-compressed wkdm (12% cache)"),
                served("matmul", "prefetching-compressed wkdm (12% cache)")
            ),
        ),
        (
            "filter with a 1 MB cache (12.5%): 14% hits, 28% slower than local".into(),
            format!(
                "{:.0}% hits, {:.2}× local's time",
                hit("filter", "compressed wkdm (12% cache)"),
                time("filter", "compressed wkdm (12% cache)") / time("filter", "local")
            ),
        ),
        (
            "filter with a 2 MB cache (25%): 45% hits; with friends 85%".into(),
            format!(
                "{:.0}%; with friends {:.0}% from the pool, {:.0}% of fetches without a disk read",
                hit("filter", "compressed wkdm (25% cache)"),
                hit("filter", "prefetching-compressed wkdm (25% cache)"),
                served("filter", "prefetching-compressed wkdm (25% cache)")
            ),
        ),
    ];
    for (thesis, here) in lines {
        md.push_str(&format!("| {thesis} | {here} |\n"));
    }
    md
}

/// `v` rounded, with thousands separated by commas.
pub(crate) fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    if v < 0.0 && digits != "0" { format!("-{out}") } else { out }
}

/// `values`' least and greatest as "A" or "A to B", each through `show`.
fn range(values: impl IntoIterator<Item = f64>, show: impl Fn(f64) -> String) -> Option<String> {
    let v: Vec<f64> = values.into_iter().collect();
    let lo = v.iter().copied().reduce(f64::min)?;
    let hi = v.iter().copied().reduce(f64::max)?;
    Some(if show(lo) == show(hi) { show(lo) } else { format!("{} to {}", show(lo), show(hi)) })
}

/// What the compressed caches stored and whether their pages came back in time to hit: for
/// each run with a compressed pool, the pages stored compressed and raw, the mean compressed
/// size, the most pages the pool held and the reuse distance of the pages fetched back.
fn reuse_table(m: &Measured) -> String {
    let mut md = format!(
        "\n### {}: what the compressed pools held, and when pages came back\n\nStored: pages \
         the pool stored compressed / raw (they did not compress by a 512-byte sub-page); \
         mean: a compressed page's mean size in bytes; held: the most pages the pool held at \
         once; reuse: evictions between a page's own and its fetch back (the pages handed to \
         the pool since), least / mean / greatest over the pages fetched back. A pool that \
         expels its oldest pages first serves a page only if it holds more pages than its reuse \
         distance.\n\n\
         | program | hierarchy | stored | mean | held | fetched back | reuse | hit rate | compression µs/fault |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        m.arch.name()
    );
    for r in m.rows.iter().filter(|r| r.cache_bytes > 0) {
        let mean = r.compressed_mean().map_or("-".into(), thousands);
        let reuse = r.reuse_mean().map_or("-".into(), |mean| {
            format!("{} / {} / {}", r.reuse_min, thousands(mean), r.reuse_max)
        });
        md.push_str(&format!(
            "| {} | {} | {} / {} | {} | {} | {} | {} | {} | {} |\n",
            r.program,
            r.hierarchy,
            r.stored_compressed,
            r.stored_raw,
            mean,
            r.pool_peak_pages,
            r.refetches,
            reuse,
            r.hit_percent().map_or("-".into(), |h| format!("{h:.0}%")),
            us(r.codec_ns_per_fault),
        ));
    }
    md
}

/// Why filter's compressed caches hit as they do, from `m`'s figures.
fn filter_reasons(m: &Measured) -> String {
    let mut parts = Vec::new();
    for label in ["compressed wkdm (12% cache)", "compressed wkdm (25% cache)"] {
        let Some(r) = row(m, "filter", label) else { continue };
        let lz4 = row(m, "filter", &label.replace("wkdm", "lz4"));
        let stored = r.stored_compressed + r.stored_raw;
        let mut part = format!(
            "{}% cache: the pool held at most {} pages (WKdm stored {} of {stored} raw",
            r.cache_bytes * 100 / (r.cache_bytes + r.frames * 4096),
            r.pool_peak_pages,
            r.stored_raw,
        );
        if let Some(l) = lz4 {
            part.push_str(&format!(
                "; lz4 compressed {} of {}{}",
                l.stored_compressed,
                l.stored_compressed + l.stored_raw,
                l.compressed_mean()
                    .map_or(String::new(), |b| format!(", to {} bytes on average", thousands(b)))
            ));
        }
        let verdict = if r.refetches == 0 {
            "no page came back".to_string()
        } else if r.reuse_min >= r.pool_peak_pages {
            format!(
                "every page fetched back ({}) had left memory {} evictions earlier, more than \
                 the pool held, so none was still there: {:.0}% hits (to hold {} pages, the \
                 pool would have to store each in {} bytes, {:.1}:1)",
                r.refetches,
                range([r.reuse_min as f64, r.reuse_max as f64], thousands).unwrap_or_default(),
                r.hit_percent().unwrap_or(0.0),
                r.reuse_min + 1,
                thousands((r.cache_bytes as u64 / (r.reuse_min + 1)) as f64),
                4096.0 * (r.reuse_min + 1) as f64 / r.cache_bytes as f64,
            )
        } else {
            format!(
                "pages came back {} evictions after they left (mean {}), some within what the \
                 pool held: {:.0}% hits",
                range([r.reuse_min as f64, r.reuse_max as f64], thousands).unwrap_or_default(),
                r.reuse_mean().map_or("-".into(), thousands),
                r.hit_percent().unwrap_or(0.0)
            )
        };
        part.push_str(&format!("); {verdict}"));
        parts.push(part);
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{}: {}.", m.arch.name(), parts.join("; "))
    }
}

/// The range of round trips (the null fault's plus the driver's median) of the hits in `m`
/// on pages stored as `kind` (an index of [`HIT_KINDS`]), in rows whose label contains
/// `codec`.
fn hit_range(m: &Measured, kind: usize, codec: &str) -> Option<String> {
    range(
        m.rows
            .iter()
            .filter(|r| r.hierarchy.contains(codec) && r.hit_kinds[kind].0 > 0)
            .map(|r| m.round_trip + r.hit_kinds[kind].1 as f64),
        thousands,
    )
}

/// The bar a hit's round trip must meet, in instructions.
const HIT_BAR: f64 = 15_000.0;

/// The runs that harvest the accessed bits next to the same runs that do not, in `m`.
fn harvest_table(m: &Measured) -> String {
    let mut md = format!(
        "\n| {} | harvesting | run time (s) | faults | hit rate |\n|---|---|---:|---:|---:|\n",
        m.arch.name()
    );
    for c in CONFIGS.iter().filter(|c| c.harvest > 0) {
        let plain = Config { harvest: 0, ..*c };
        let (Some(with), Some(without)) =
            (row(m, c.program.name(), &c.label()), row(m, c.program.name(), &plain.label()))
        else {
            continue;
        };
        for (r, h) in [(without, "no"), (with, "yes")] {
            md.push_str(&format!(
                "| {} {} | {h} | {:.2} | {} | {} |\n",
                r.program,
                plain.label(),
                r.seconds(),
                r.faults,
                r.hit_percent().map_or("-".into(), |h| format!("{h:.0}%")),
            ));
        }
    }
    md
}

/// Where this run differs from the thesis, and why, every figure from `measured`.
fn divergences(measured: &[Measured]) -> String {
    let matmul = paging_programs::matmul::Params::DEFAULT;
    let b_bytes = matmul.x * matmul.y * 4;
    let mut md = String::from("\n## Where this differs from the thesis, and why\n\n");
    // matmul's B against the memory.
    let mut per_arch = Vec::new();
    for m in measured {
        let (Some(local), Some(half)) =
            (row(m, "matmul", "local"), row(m, "matmul", "compressed wkdm (50% cache)"))
        else {
            continue;
        };
        per_arch.push(format!(
            "{}: local paging {} faults in {:.2} s, the half WKdm cache {} faults ({:.0}% hits) \
             in {:.2} s, {:.2}× local's time",
            m.arch.name(),
            local.faults,
            local.seconds(),
            half.faults,
            half.hit_percent().unwrap_or(0.0),
            half.seconds(),
            half.seconds() / local.seconds(),
        ));
    }
    md.push_str(&format!(
        "- **matmul** at 1/16 of the thesis's size ({} × {} by {} × {}): B is {} KiB of {} KiB \
         of memory, so it can stay resident under local paging, while a compressed cache of \
         half the memory leaves room for less than B and sends it through the cache. {}.\n",
        matmul.x,
        matmul.y,
        matmul.y,
        matmul.x,
        b_bytes / 1024,
        Program::Matmul.default_memory() / 1024,
        per_arch.join("; ")
    ));
    // Codecs.
    let mut codecs = Vec::new();
    if let Some(m) = measured.first() {
        for (p, label) in [("matmul", "(50% cache)"), ("compress", "(25% cache)")] {
            let get = |codec: &str| row(m, p, &format!("compressed {codec} {label}"));
            if let (Some(l), Some(w)) = (get("lz4"), get("wkdm")) {
                let mean = |r: &Row| r.compressed_mean().map_or("-".into(), thousands);
                codecs.push(format!(
                    "{p}: lz4 stored {} of {} pages compressed ({} bytes on average), WKdm {} \
                     of {} ({} bytes)",
                    l.stored_compressed,
                    l.stored_compressed + l.stored_raw,
                    mean(l),
                    w.stored_compressed,
                    w.stored_compressed + w.stored_raw,
                    mean(w),
                ));
            }
        }
    }
    let mut codec_cost = Vec::new();
    for m in measured {
        let per = |codec: &str| {
            range(
                m.rows
                    .iter()
                    .filter(|r| r.hierarchy.starts_with(&format!("compressed {codec}")))
                    .map(|r| r.codec_ns_per_fault / 1000.0),
                |v| format!("{v:.1}"),
            )
        };
        if let (Some(l), Some(w)) = (per("lz4"), per("wkdm")) {
            codec_cost.push(format!("{}: lz4 {l}, WKdm {w}", m.arch.name()));
        }
    }
    md.push_str(&format!(
        "- **Codecs.** {} (the thesis's WKdm: about 1,500 bytes for matmul's pages, its \
         Fig. 5.7). Compression µs a fault: {}. WKdm compares words against recent words, so it \
         cannot shrink text; lz4 finds repeats anywhere in a page, at a higher cost (riscv64 \
         has no misaligned loads).\n",
        codecs.join("; "),
        codec_cost.join("; ")
    ));
    // filter.
    let filter = paging_programs::filter::Params::DEFAULT;
    md.push_str(&format!(
        "- **filter** generates its three {} × {} channels ({} KiB, {} KiB of memory), then \
         sharpens each in place in one sweep, so every page it fetches back comes back once, \
         after all the pages beyond memory have been evicted in between, and every page is \
         written, so the pool (which expels clean pages first, then the oldest) expels in the \
         order it took them. How the generated image (gradients with noise of ±8) compressed, \
         and when its pages came back: {} The thesis reports 14% hits with \
         1 MB and 45% with 2 MB (Fig. 12.7), which a single sweep through a pool that keeps \
         the pages last evicted cannot give unless the pool holds all the pages beyond memory: \
         the thesis's bitmap would have had to compress far better, or its program read pages \
         again sooner.\n",
        filter.width,
        filter.height,
        filter.bytes_needed() / 1024,
        Program::Filter.default_memory() / 1024,
        measured.iter().map(filter_reasons).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
    ));
    // A hit's round trip.
    let mut trips = Vec::new();
    for m in measured {
        let raw = hit_range(m, 1, "");
        let wkdm = hit_range(m, 2, "wkdm");
        let lz4 = hit_range(m, 2, "lz4");
        let compressed: Vec<f64> = m
            .rows
            .iter()
            .filter(|r| r.hit_kinds[2].0 > 0)
            .map(|r| m.round_trip + r.hit_kinds[2].1 as f64)
            .collect();
        let within = compressed.iter().filter(|v| **v <= HIT_BAR).count();
        trips.push(format!(
            "{}: raw pages {}, compressed ones {} with WKdm and {} with lz4 ({} of {} runs' \
             compressed medians within the bar)",
            m.arch.name(),
            raw.unwrap_or_else(|| "-".into()),
            wkdm.unwrap_or_else(|| "-".into()),
            lz4.unwrap_or_else(|| "-".into()),
            within,
            compressed.len()
        ));
    }
    md.push_str(&format!(
        "- **A hit's round trip** (median, instructions, of the hits that found a free frame; \
         the bar is {}): {}. A hit that finds a free frame costs the fault's round trip, two \
         kernel calls (its frame moved into place; the victim's moved out when it was evicted), \
         the pager's bookkeeping, and the page copied or decompressed straight into the frame.\n",
        thousands(HIT_BAR),
        trips.join("; ")
    ));
    // Accessed bits.
    md.push_str(
        "- **Accessed bits.** The thesis's clock may have evicted nearly in FIFO order; by \
         default this one hears of faults only and does the same. Harvesting the hardware's \
         accessed bits (`pager.harvest`, the rows so marked) makes it a true second-chance \
         clock, which keeps pages used again resident but scatters the groups friends stores. \
         Which clock suits a program is the program's to choose:\n",
    );
    for m in measured {
        md.push_str(&harvest_table(m));
    }
    md
}

/// The report after its heading: each architecture's tables, then where this run differs
/// from the thesis.
fn report(measured: &[Measured]) -> String {
    let mut md = String::from(
        "Virtual time under `-icount shift=0,sleep=off` on the Deskstar 34GXP model; per-fault \
         costs in µs of virtual time (the CPU's parts are thousands of instructions).\n\n",
    );
    for m in measured {
        md.push_str(&table(m));
        md.push_str(&hits_table(m));
        md.push_str(&reuse_table(m));
        md.push_str(&claims(m));
        md.push_str(&loans_table(m));
        md.push('\n');
    }
    md.push_str(&divergences(measured));
    md
}

/// Runs the bench on each of `arches` and writes its report (not in [`Mode::Check`], which
/// boots only the runs of the kept figures); returns the kept figures, a table per
/// architecture.
pub fn run(mode: Mode, arches: &[Arch]) -> Result<Vec<Table>> {
    let (measured, kept) = crate::measure::on_each(arches, mode, measure_on)?;
    let json = serde_json::json!(
        measured
            .iter()
            .map(|m| serde_json::json!({
                "arch": m.arch.name(),
                "null_fault_round_trip_instructions": m.round_trip,
                "runs": m.rows,
            }))
            .collect::<Vec<_>>()
    );
    crate::measure::finish("paging", mode, arches, kept, || Ok(report(&measured)), json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use paging_programs::Prng;

    /// Every run of both architectures, each figure drawn from `seed`.
    fn fabricated(seed: u64) -> Vec<Measured> {
        let mut rng = Prng::new(seed);
        let mut n = |lo: u32, hi: u32| u64::from(lo + rng.below(hi - lo));
        [Arch::Riscv64, Arch::X86_64]
            .into_iter()
            .map(|arch| Measured {
                arch,
                round_trip: n(2_000, 4_000) as f64,
                rows: CONFIGS
                    .iter()
                    .map(|c| Row {
                        program: c.program.name(),
                        hierarchy: c.label(),
                        frames: c.frames(),
                        cache_bytes: c.cache_bytes(),
                        // Local paging the fastest, so every render names the same runs.
                        run_ns: if c.hierarchy == "local" && c.harvest == 0 {
                            n(10_000_000, 90_000_000)
                        } else {
                            n(100_000_000, 3_000_000_000)
                        },
                        faults: n(100, 9_000),
                        device_reads: n(10, 9_000),
                        device_writes: n(10, 9_000),
                        hits: n(1, 5_000),
                        misses: n(1, 5_000),
                        prefetch_hits: n(0, 5_000),
                        hit_faults: n(1, 5_000),
                        hit_driver_ns: [n(3_000, 5_000), n(5_000, 7_000), n(7_000, 9_000), 9_999],
                        hit_kinds: [
                            (n(1, 99), n(3_000, 90_000)),
                            (n(1, 99), n(3_000, 90_000)),
                            (n(1, 99), n(3_000, 90_000)),
                        ],
                        kernel_ns_per_fault: n(1_000, 90_000) as f64,
                        driver_ns_per_fault: n(1_000, 90_000) as f64,
                        codec_ns_per_fault: n(1_000, 90_000) as f64,
                        disk_ns_per_fault: n(1_000, 900_000) as f64,
                        stored_compressed: n(1, 999),
                        compressed_bytes: n(1_000, 3_000_000),
                        stored_raw: n(1, 999),
                        refetches: n(10, 999),
                        // The pool never holds a page until it comes back, so every render
                        // takes the same sentences.
                        reuse_min: n(60, 100),
                        reuse_max: n(100, 200),
                        reuse_sum: n(10_000, 90_000),
                        pool_peak_pages: n(1, 50),
                        lent: n(10, 9_000),
                        // The program's own CPU below any paged run's, and loans cheaper
                        // than copies, so every render takes the same signs.
                        pager_cpu_ns: if c.resident {
                            n(1_000_000, 2_000_000)
                        } else if c.loans {
                            n(100_000_000, 200_000_000)
                        } else {
                            n(300_000_000, 900_000_000)
                        },
                        blk_cpu_ns: n(1_000_000, 90_000_000),
                    })
                    .collect(),
            })
            .collect()
    }

    /// `md` with each number written as `#`.
    fn skeleton(md: &str) -> String {
        let mut out = String::new();
        let mut run = String::new();
        for c in md.chars().chain(['\n']) {
            if c.is_ascii_digit() || c == ',' || c == '.' {
                run.push(c);
                continue;
            }
            if run.chars().any(|c| c.is_ascii_digit()) {
                out.push('#');
            } else {
                out.push_str(&run);
            }
            run.clear();
            out.push(c);
        }
        out
    }

    /// `md`'s numbers, in order ([`crate::measure::report_numbers`]).
    fn numbers(md: &str) -> Vec<String> {
        crate::measure::report_numbers(md)
    }

    #[test]
    fn every_number_in_the_report_comes_from_the_run_or_is_named() {
        let renders: Vec<String> = (1..=4).map(|seed| report(&fabricated(seed))).collect();
        let a = &renders[0];
        // Numbers that do not change with the measurements: each must be the configuration's
        // (labels, frames, cache sizes, the programs' sizes, the bar), the thesis's (in the
        // column and sentences that quote it), or a section or architecture's name.
        let mut named = String::new();
        for c in &CONFIGS {
            named.push_str(&format!(" {} {} {} ", c.label(), c.frames(), c.cache_bytes()));
        }
        let matmul = paging_programs::matmul::Params::DEFAULT;
        let filter = paging_programs::filter::Params::DEFAULT;
        named.push_str(&format!(
            " {} {} {} {} {} {} {} 15,000 riscv64 x86_64 1/16 ±8 512-byte Deskstar 34GXP \
             per mille rank 500 / 900 / 990 p50 p90 p99 {} runs ",
            matmul.x,
            matmul.y,
            matmul.x * matmul.y * 4 / 1024,
            filter.width,
            filter.height,
            filter.bytes_needed() / 1024,
            Program::Matmul.default_memory() / 1024,
            CONFIGS.len(),
        ));
        named.push_str(&format!(" {} ", Program::Filter.default_memory() / 1024));
        // The thesis's figures, each quoted where it is attributed to the thesis.
        let thesis = [
            "+25% at 25% cache",
            "§12, §9.3.1",
            "McDonald 2001",
            "a 2 MB compressed cache (12.5%) gives matmul a 79% hit rate",
            "from 79% to 98% hits",
            "filter with a 1 MB cache (12.5%): 14% hits, 28% slower than local",
            "filter with a 2 MB cache (25%): 45% hits; with friends 85%",
            "about 1,500 bytes for matmul's pages, its Fig. 5.7",
            "14% hits with 1 MB and 45% with 2 MB (Fig. 12.7)",
        ];
        for t in thesis {
            assert!(a.contains(t), "the report no longer quotes `{t}`");
            named.push_str(&format!(" {t} "));
        }
        let allowed = numbers(&named);
        // The renders say the same sentences, so their numbers pair up by position; one that
        // is the same in all four did not follow the measurements.
        let lists: Vec<Vec<String>> = renders.iter().map(|r| numbers(r)).collect();
        for (l, r) in lists.iter().zip(&renders) {
            let (x, y) = (skeleton(r), skeleton(a));
            let at = x.chars().zip(y.chars()).take_while(|(p, q)| p == q).count();
            let show =
                |s: &str| s.chars().skip(at.saturating_sub(200)).take(300).collect::<String>();
            assert!(x == y, "the renders differ in shape:\n{}\n----\n{}", show(&x), show(&y));
            assert_eq!(l.len(), lists[0].len());
        }
        let fixed: Vec<&String> = (0..lists[0].len())
            .filter(|&i| lists.iter().all(|l| l[i] == lists[0][i]))
            .map(|i| &lists[0][i])
            .filter(|n| !allowed.contains(n))
            .collect();
        assert!(fixed.is_empty(), "numbers that do not follow the measurements: {fixed:?}\n{a}");
    }

    #[test]
    fn the_filter_paragraph_shows_the_runs_reuse_and_pool() {
        let mut m = fabricated(3);
        let r = m[1]
            .rows
            .iter_mut()
            .find(|r| r.program == "filter" && r.hierarchy == "compressed wkdm (12% cache)")
            .unwrap();
        (r.pool_peak_pages, r.reuse_min, r.reuse_max, r.hits, r.misses) = (16, 80, 80, 0, 192);
        (r.refetches, r.stored_raw) = (192, 272);
        let md = report(&m);
        assert!(
            md.contains("x86_64: 12% cache: the pool held at most 16 pages (WKdm stored 272 of")
                && md.contains(
                    "every page fetched back (192) had left memory 80 evictions earlier, more than \
                 the pool held, so none was still there: 0% hits (to hold 81 pages, the pool \
                 would have to store each in 809 bytes, 5.1:1)"
                ),
            "{md}"
        );
    }
}
