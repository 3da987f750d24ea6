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
//! best), matmul's hit rate with a WKdm cache of an eighth (the thesis: 79%), and the median
//! round trip of a fault served from the compressed cache.

use anyhow::{Context, Result, bail};
use paging_programs::{Program, Scale};
use serde::Serialize;

use super::{Mode, Table, environment, write_report};
use crate::artifacts::{self, Artifacts};
use crate::log::field;
use crate::qemu::Ending;
use crate::system::IcountBoot;
use crate::{Arch, util};

/// The seed of every run (the host's checksum uses it too).
const SEED: u64 = 1;

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
}

/// Pages of each of the eviction and fetch areas of the prefetching hierarchies.
const AREA_PAGES: usize = 8;

impl Config {
    const fn new(program: Program, hierarchy: &'static str, cache_eighths: usize) -> Config {
        Config { program, hierarchy, cache_eighths, codec: "lz4", ahead: 1, harvest: 0 }
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

    /// The frames: the memory less the cache's bytes and areas.
    fn frames(&self) -> usize {
        let areas = if self.hierarchy.starts_with("prefetching") { 2 * AREA_PAGES } else { 0 };
        (self.memory() - self.cache_bytes()) / 4096 - areas
    }

    fn label(&self) -> String {
        let mut extra = String::new();
        if self.ahead > 1 {
            extra.push_str(&format!(", {} ahead", self.ahead));
        }
        if self.harvest > 0 {
            extra.push_str(&format!(", accessed bits every {}", self.harvest));
        }
        if self.compressed() {
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
        s
    }

    fn file(&self) -> String {
        format!(
            "target/bench/paging/{}-{}-{}-{}-{}-{}.toml",
            self.program.name(),
            self.hierarchy,
            self.cache_eighths,
            self.codec,
            self.ahead,
            self.harvest
        )
    }

    fn manifest(&self) -> String {
        format!(
            r#"# `cargo xtask bench paging`: {program} under {label}, {memory} KiB of memory.
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
cpu = {{ period = "10ms", slice = "5ms", extra = true }}

[[channel]]
name = "pg-req"
from = "pager"
to = "blk"

[[channel]]
name = "pg-resp"
from = "blk"
to = "pager"
"#,
            program = self.program.name(),
            label = self.label(),
            memory = self.memory() / 1024,
            spec = self.spec(),
        )
    }
}

/// The runs: each program under the four hierarchies, with the thesis's cache sizes (compress
/// 25% of its memory; matmul 50%, its best, and 12.5%, the thesis's 2 MB of 16 MB; filter
/// 12.5% and 25%, its 1 MB and 2 MB of 8 MB), the compressed ones with lz4 and with WKdm (the
/// thesis's codec); and compress's and matmul's caches evicting 16 pages at once, so that most
/// faults the cache answers find a free frame (the distribution of a hit's own cost, on text
/// and on integers); and a clock that harvests the hardware's accessed bits (a true
/// second-chance clock) against the default one that hears of faults only.
const CONFIGS: [Config; 30] = [
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
];

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
}

impl Row {
    fn hit_percent(&self) -> Option<f64> {
        let asked = self.hits + self.misses;
        (asked > 0).then(|| self.hits as f64 * 100.0 / asked as f64)
    }
}

/// How a hit's page was stored, as heracles names the kinds.
const HIT_KINDS: [&str; 3] = ["zero", "raw", "compressed"];

/// The fields of the first log line containing `prefix`.
fn numbers<'a>(lines: &'a [String], prefix: &str) -> Result<impl Fn(&str) -> Result<u64> + 'a> {
    let line =
        lines.iter().find(|l| l.contains(prefix)).with_context(|| format!("no line `{prefix}`"))?;
    Ok(move |k: &str| field(line, k).with_context(|| format!("no `{k}=` in `{line}`")))
}

/// Boots `c` once and reads its figures; `round_trip` is the null fault's round trip.
fn boot(a: &Artifacts, c: &Config, round_trip: f64, want: u64) -> Result<Row> {
    let rel = c.file();
    let path = util::root().join(&rel);
    std::fs::create_dir_all(path.parent().expect("a file in a directory"))?;
    std::fs::write(&path, c.manifest())?;
    let mut prepared = IcountBoot::new(a, &rel, "").with_context(|| format!("preparing {rel}"))?;
    prepared.boot.timeout = std::time::Duration::from_secs(600);
    let out = prepared.run(a)?;
    if out.ending != Ending::Kernel(0) {
        bail!("{rel}: the boot ended {:?}:\n{}", out.ending, out.log_text());
    }
    let lines: Vec<String> = out.log.iter().map(|l| l.message.clone()).collect();
    let sum = lines
        .iter()
        .find(|l| l.contains(&format!("heracles: {} checksum=", c.program.name())))
        .context("no checksum line")?;
    let got = sum
        .split("checksum=0x")
        .nth(1)
        .and_then(|s| u64::from_str_radix(s.split_whitespace().next()?, 16).ok())
        .context("a checksum that does not parse")?;
    if got != want || !sum.contains("ok=true") {
        bail!("{rel}: the program's result is wrong: {sum} (the host computes {want:#018x})");
    }
    let done = numbers(&lines, "heracles: done program=")?;
    let cache = numbers(&lines, "heracles: cache hits=")?;
    let disk = numbers(&lines, "heracles: disk device_reads=")?;
    let cost = numbers(&lines, "heracles: cost faults=")?;
    let hit = numbers(&lines, "heracles: hit faults=")?;
    let mut hit_kinds = [(0, 0); 3];
    for (kind, name) in hit_kinds.iter_mut().zip(HIT_KINDS) {
        let by = numbers(&lines, &format!("heracles: hit kind={name} faults="))?;
        *kind = (by("faults")?, by("p50_ns")?);
    }
    let faults = cost("faults")?.max(1) as f64;
    let (fault_ns, kernel_ns, codec_ns, disk_ns) =
        (cost("fault_ns")?, cost("kernel_ns")?, cost("codec_ns")?, cost("disk_ns")?);
    let driver_ns = fault_ns.saturating_sub(kernel_ns + codec_ns + disk_ns);
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

/// Whether `c` makes a kept figure.
fn kept(c: &Config) -> bool {
    KEPT.iter().any(|(_, p, l)| *p == c.program && *l == c.label())
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

fn measure_on(arch: Arch, checksums: &[(Program, u64)], mode: Mode) -> Result<Measured> {
    let a = artifacts::build(arch)?;
    let null = IcountBoot::new(&a, "tests/manifests/paging/bench-fault.toml", "")?;
    let (round_trip, _) = super::fault::per_fault(&null.run(&a)?)?;
    let mut rows = Vec::new();
    for c in CONFIGS.iter().filter(|c| mode == Mode::Full || kept(c)) {
        eprintln!("bench paging: {} {} {}", arch.name(), c.program.name(), c.label());
        let want = checksums.iter().find(|(p, _)| *p == c.program).expect("every program").1;
        rows.push(boot(&a, c, round_trip, want)?);
    }
    Ok(Measured { arch, round_trip, rows })
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
         zeroed), a raw page (copied), a compressed one (decompressed). The bar is 15,000.\n\n\
         | program | hierarchy | hits without the disk | p50 | p90 | p99 | max | zero | raw | compressed |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        m.arch.name(),
        m.round_trip
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
    let best = |p: &str| fastest(m, p).map_or("-".into(), |r| r.hierarchy.clone());
    let mut md = format!(
        "\n### {}: the thesis's findings\n\n| thesis (§12, §9.3.1) | here |\n|---|---|\n",
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
            format!("{:.0}%", hit("matmul", "prefetching-compressed wkdm (12% cache)")),
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
                "{:.0}%; with friends {:.0}%",
                hit("filter", "compressed wkdm (25% cache)"),
                hit("filter", "prefetching-compressed wkdm (25% cache)")
            ),
        ),
    ];
    for (thesis, here) in lines {
        md.push_str(&format!("| {thesis} | {here} |\n"));
    }
    md
}

/// Why the figures differ from the thesis's, where they do.
const DIVERGENCES: &str = "\n## Where this differs from the thesis, and why\n\n\
- **matmul** at 1/16 of the thesis's 1000 x 2000 in 1 MiB: B (500 KB) fits in memory, so \
local paging rarely evicts it (308 faults), while a compressed cache of half the memory sends B \
through the cache (4,121 faults, every one a hit). The WKdm half cache then beats local paging \
on x86_64 and is within a few percent of it on riscv64, where its codec costs more; the \
thesis's configuration paged B. A larger matrix pages B here too, at a cost in boot time the \
bench does not pay.\n\
- **Codecs.** lz4 stores matmul's integer pages in 2,765 bytes, WKdm in 2,016 (the thesis's \
WKdm: about 1,500); lz4 on riscv64 without misaligned loads costs well over 100,000 \
instructions a page, so its rows are the slowest. WKdm cannot shrink text (compress's pages \
are stored raw), so compress's compressed caches hit less with WKdm than with lz4.\n\
- **filter** filters each channel in place, in one pass: a page evicted while the image is \
made comes back once, long after the pool expelled it, so the compressed caches see no hits \
(the thesis: 14% with 1 MB, 45% with 2 MB); prefetching (friends) serves 88% of its faults.\n\
- **A hit's round trip** (the table above). A hit that finds a free frame (evicting 16 ahead) \
costs the fault's round trip, two kernel calls (its frame, waiting at the driver's window, \
moved into place; the victim's moved out when it was evicted), the pager's bookkeeping, and the \
page copied or decompressed straight into the frame. Pages stored raw (compress's text, which \
WKdm cannot shrink) and pages of the fetch area come back in 6,700 to 8,700 instructions on \
x86_64 and 10,600 to 14,600 on riscv64, within the issue's 15,000; a compressed page costs its \
decompression on top (the difference from a raw page's median): WKdm 22,000 to 24,500 (31,200 \
and 32,600 in all), lz4 24,000 (text) to 47,500 (matmul) on x86_64 and 77,500 to 159,000 on \
riscv64, which splits misaligned loads. No codec here decompresses a page in the 4,000 to \
8,000 instructions the bar leaves, so compressed pages miss it.\n\
- **Accessed bits.** The thesis's clock may have evicted nearly in FIFO order; by default this \
one hears of faults only and does the same. Reading the hardware's accessed bits every 32 \
evictions (`harvest=32`, the rows so marked) makes it a true second-chance clock, which \
scatters the groups friends stores: compress with prefetching takes 1.76 s instead of 0.66 \
(61% of its faults served by prefetching, not 87%), matmul under local paging 1.41 s instead of \
1.00 (riscv64), and matmul's eighth WKdm cache hits 67% instead of 83% (in fewer faults, 436 \
instead of 554, so in about the same time). But it keeps more of matmul's B resident beside a \
half cache (2,447 faults instead of 4,121): 0.27 s instead of 0.36 on x86_64, 0.93 instead of \
1.02 on riscv64. Which clock suits a program is the program's to choose (`pager.harvest`).\n";

/// Runs the bench on each of `arches` and writes its report (not in [`Mode::Check`], which
/// boots only the runs of the kept figures); returns the kept figures, a table per
/// architecture.
pub fn run(mode: Mode, arches: &[Arch]) -> Result<Vec<Table>> {
    let checksums: Vec<(Program, u64)> = Program::ALL
        .iter()
        .map(|p| {
            let mut region = vec![0u8; p.bytes_needed(Scale::Default)];
            (*p, p.run(Scale::Default, &mut region, SEED).checksum)
        })
        .collect();
    let measured =
        arches.iter().map(|a| measure_on(*a, &checksums, mode)).collect::<Result<Vec<_>>>()?;
    let kept = measured
        .iter()
        .map(|m| Ok(super::table(m.arch, "paging", kept_figures(m)?)))
        .collect::<Result<Vec<_>>>()?;
    if mode == Mode::Check {
        return Ok(kept);
    }
    let env = environment(arches);
    let mut md = env.heading("paging");
    md.push_str(
        "Virtual time under `-icount shift=0,sleep=off` on the Deskstar 34GXP model; per-fault \
         costs in µs of virtual time (the CPU's parts are thousands of instructions).\n\n",
    );
    for m in &measured {
        md.push_str(&table(m));
        md.push_str(&hits_table(m));
        md.push_str(&claims(m));
        md.push('\n');
    }
    md.push_str(DIVERGENCES);
    let json = serde_json::json!({
        "benchmark": "paging",
        "environment": env,
        "architectures": measured.iter().map(|m| serde_json::json!({
            "arch": m.arch.name(),
            "null_fault_round_trip_instructions": m.round_trip,
            "runs": m.rows,
        })).collect::<Vec<_>>(),
    });
    write_report("paging", &md, json)?;
    Ok(kept)
}
