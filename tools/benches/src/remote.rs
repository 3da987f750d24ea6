//! `cargo xtask bench remote`: the Heracles thesis's programs paging to another node's memory
//! (McDonald 2001, ch. 12), against the modelled local disk and the compressed cache, on one
//! machine per architecture under `-icount shift=0,sleep=off`.
//!
//! Each run boots the `heracles` app with one program (`compress`, `matmul`, `filter`, at the
//! scale of `bench paging`: 1/16 of the thesis's sizes, the thesis's memory at that scale) in a
//! stretch paged by the paged stretch driver. Its local disk is its own session of the
//! virtio-blk driver domain on the Deskstar 34GXP model, as in `bench paging`. Its remote
//! memory is one or two `paging-server` domains behind a second virtio-net driver domain: the
//! client's driver (10.0.0.1) and the servers' (10.0.0.2) are on two NICs of one QEMU hub, as
//! in `bench net`, both under the stack's 100 Mbit/s link model, the cards moving frames at
//! points of virtual time. Every part of a remote fault (the client, both drivers, the server)
//! runs on the one deterministic clock, so the figures are instructions and virtual time, and
//! repeat from boot to boot. The host computes each program's checksum and the run must agree;
//! a remote run must have paged to its servers only (no fallback to the disk, nothing lost).
//!
//! The runs of each program ([`CONFIGS`]): all in memory (the program's own CPU, to subtract);
//! the local disk; remote (one server); remote mirrored to a second server (`mirror=server`)
//! and to the local disk (`mirror=disk`); remote with the client compressing every page it
//! sends (`netc=yes`, the thesis's `netc`); and a small WKdm compressed cache (the thesis's
//! Fig. 12.5 to 12.7 sizes: compress a quarter of its memory, matmul and filter an eighth) over
//! the local disk and over remote memory, where the cache's pages go to the server compressed,
//! as they are in the pool.
//!
//! Per run: the run time by the program's clock, the faults, the pages fetched from below
//! memory, the driver's time per fault, the disk's requests and the remote pages and packets;
//! and per remote fault (a fault that read its page from a server, with its share of the
//! evictions' writes) the page bytes sent per page written and the share sent compressed; and
//! per remote fault: the client's CPU (the `heracles` domain's CPU account less the all-in-
//! memory run's, over the faults beyond that run's), both network drivers' CPU accounts, and
//! the server's CPU as the server charges its clients (`paging-server`'s `cpu_ns` per client)
//! beside the server domain's CPU account. Then the thesis's findings beside this run's, and
//! where they differ, why, from this run's figures.
//!
//! Written to `target/bench/remote.{md,json}`; the generated manifests are kept under
//! `target/bench/remote/`. Kept in the baseline ([`KEPT`]): filter's run time remote, mirrored
//! to a server, and over a small compressed cache over remote memory, the client's and the
//! server's instructions per remote fault of filter's remote run, and the packets per page
//! moved of matmul's runs with `netc` and with its small cache over remote memory (matmul's
//! pages are the ones WKdm compresses, so these show the compressed pages on the wire).

use anyhow::{Context, Result};
use paging_programs::{Program, Scale};
use serde::Serialize;

use crate::baseline::Table;
use crate::measure::Mode;
use crate::paging::{Run, boot_each, finished_lines, numbers, thousands};
use qemu_run::log::field;
use qemu_run::qemu::Outcome;
use tool_base::Arch;
use tool_base::artifacts;

/// The memory each server offers its client's pages (the largest program, compress, needs
/// 2.6 MiB).
const SERVER_MEMORY: &str = "4M";

/// Where a run's pages go below its memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Below {
    /// Nowhere: every page of the program fits in its frames.
    Resident,
    /// The modelled local disk.
    Disk,
    /// One server.
    Remote,
    /// Two servers, each page on both.
    MirrorServer,
    /// One server and the local disk.
    MirrorDisk,
}

impl Below {
    fn remote(self) -> bool {
        matches!(self, Below::Remote | Below::MirrorServer | Below::MirrorDisk)
    }

    fn servers(self) -> usize {
        match self {
            Below::MirrorServer => 2,
            b if b.remote() => 1,
            _ => 0,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Below::Resident => "all in memory",
            Below::Disk => "local disk",
            Below::Remote => "remote",
            Below::MirrorServer => "remote, mirror=server",
            Below::MirrorDisk => "remote, mirror=disk",
        }
    }
}

/// One run: a program, where its pages go, the share of its memory given to a WKdm
/// compressed cache (in eighths; 0: none), and whether the remote client compresses the pages
/// it sends (`netc=yes`).
#[derive(Clone, Copy, Debug)]
struct Config {
    program: Program,
    below: Below,
    cache_eighths: usize,
    netc: bool,
}

impl Config {
    const fn new(program: Program, below: Below) -> Config {
        Config { program, below, cache_eighths: 0, netc: false }
    }

    const fn cached(program: Program, below: Below, eighths: usize) -> Config {
        Config { program, below, cache_eighths: eighths, netc: false }
    }

    const fn netc(program: Program, below: Below) -> Config {
        Config { program, below, cache_eighths: 0, netc: true }
    }

    fn memory(&self) -> usize {
        self.program.default_memory()
    }

    fn cache_bytes(&self) -> usize {
        self.memory() * self.cache_eighths / 8
    }

    /// The frames: the program's memory less the cache's bytes, or every page of the program
    /// when it runs all in memory.
    fn frames(&self) -> usize {
        match self.below {
            Below::Resident => self.program.bytes_needed(Scale::Default) / 4096,
            _ => (self.memory() - self.cache_bytes()) / 4096,
        }
    }

    fn spec(&self) -> String {
        let mut s = if self.cache_eighths > 0 {
            format!(
                "hierarchy=compressed,frames={},cache={},codec=wkdm",
                self.frames(),
                self.cache_bytes()
            )
        } else {
            format!("hierarchy=local,frames={}", self.frames())
        };
        s.push_str(",disk=pg");
        let servers = ["10.0.0.2:7100", "10.0.0.2:7101"];
        if self.below.remote() {
            let mirror = match self.below {
                Below::MirrorServer => "server",
                Below::MirrorDisk => "disk",
                _ => "none",
            };
            s.push_str(&format!(
                ",store=remote,mirror={mirror},net=rn,servers={}",
                servers[..self.below.servers()].join("+")
            ));
            if self.netc {
                s.push_str(",netc=yes");
            }
        }
        s
    }
}

/// The runs: each program all in memory, on the local disk, remote, remote mirrored to a
/// server and to the disk, remote with `netc`, and with a small WKdm compressed cache
/// (compress 25%, matmul and filter 12.5%: the thesis's Fig. 12.5 to 12.7) over the local disk
/// and over remote memory.
const CONFIGS: [Config; 24] = {
    use Below::*;
    use Program::*;
    [
        Config::new(Compress, Resident),
        Config::new(Compress, Disk),
        Config::new(Compress, Remote),
        Config::new(Compress, MirrorServer),
        Config::new(Compress, MirrorDisk),
        Config::netc(Compress, Remote),
        Config::cached(Compress, Disk, 2),
        Config::cached(Compress, Remote, 2),
        Config::new(Matmul, Resident),
        Config::new(Matmul, Disk),
        Config::new(Matmul, Remote),
        Config::new(Matmul, MirrorServer),
        Config::new(Matmul, MirrorDisk),
        Config::netc(Matmul, Remote),
        Config::cached(Matmul, Disk, 1),
        Config::cached(Matmul, Remote, 1),
        Config::new(Filter, Resident),
        Config::new(Filter, Disk),
        Config::new(Filter, Remote),
        Config::new(Filter, MirrorServer),
        Config::new(Filter, MirrorDisk),
        Config::netc(Filter, Remote),
        Config::cached(Filter, Disk, 1),
        Config::cached(Filter, Remote, 1),
    ]
};

/// What one run measured.
#[derive(Clone, Debug, Default, Serialize)]
struct Row {
    program: &'static str,
    label: String,
    below: &'static str,
    cache_eighths: usize,
    netc: bool,
    frames: usize,
    run_ns: u64,
    faults: u64,
    zero_fills: u64,
    fetches: u64,
    evictions: u64,
    hits: u64,
    misses: u64,
    /// The driver's time in faults by its clock.
    fault_ns: u64,
    /// The time the driver waited for its disk session.
    disk_ns: u64,
    device_reads: u64,
    device_writes: u64,
    /// The backing store's pages to and from the servers, and to and from the disk.
    remote_writes: u64,
    remote_reads: u64,
    local_writes: u64,
    local_reads: u64,
    mirror_writes: u64,
    /// The remote client's pages and packets (a mirrored page counts once per server).
    pages_written: u64,
    pages_read: u64,
    packets_sent: u64,
    packets_received: u64,
    retransmits: u64,
    /// Of the pages written, those sent compressed (by `netc` or as the cache held them), and
    /// the bytes of the pages sent (each server's copy counted).
    compressed_writes: u64,
    page_bytes_written: u64,
    /// CPU accounts, ns: the client's domain, both network drivers, the servers' domains, the
    /// disk driver.
    client_cpu_ns: u64,
    drivers_cpu_ns: u64,
    server_domains_cpu_ns: u64,
    blk_cpu_ns: u64,
    /// What the servers charged this client (`cpu_ns` summed over the servers).
    server_charged_ns: u64,
}

impl Row {
    fn seconds(&self) -> f64 {
        self.run_ns as f64 / 1e9
    }

    fn hit_percent(&self) -> Option<f64> {
        let asked = self.hits + self.misses;
        (asked > 0).then(|| self.hits as f64 * 100.0 / asked as f64)
    }

    /// The driver's mean time in a fault, µs.
    fn us_per_fault(&self) -> f64 {
        self.fault_ns as f64 / self.faults.max(1) as f64 / 1000.0
    }

    /// Packets each way per remote page moved.
    fn packets_per_page(&self) -> Option<f64> {
        let pages = self.pages_written + self.pages_read;
        (pages > 0).then(|| (self.packets_sent + self.packets_received) as f64 / pages as f64)
    }

    /// Bytes sent per page written to a server.
    fn bytes_per_page(&self) -> Option<f64> {
        (self.pages_written > 0).then(|| self.page_bytes_written as f64 / self.pages_written as f64)
    }

    /// The share of the pages written that went compressed, %.
    fn compressed_percent(&self) -> Option<f64> {
        (self.pages_written > 0)
            .then(|| self.compressed_writes as f64 * 100.0 / self.pages_written as f64)
    }
}

/// Domain `name`'s CPU account in ns (0 if it has none).
fn cpu_ns(out: &Outcome, name: &str) -> u64 {
    crate::measure::cpu_ns(out, name).unwrap_or(0)
}

/// Reads one boot of `c`: fails unless the program's checksum is `want` and, for a remote
/// run, every page went to the servers and every server served and released its stream.
fn read(c: &Config, out: &Outcome, want: u64) -> Result<Row> {
    let rel = c.file();
    let failed = |what: String| anyhow::anyhow!("{rel}: {what}:\n{}", out.log_text());
    let lines = finished_lines(out, &rel, c.program, want)?;
    let done = numbers(&lines, "heracles: done program=")?;
    let cache = numbers(&lines, "heracles: cache hits=")?;
    let disk = numbers(&lines, "heracles: disk device_reads=")?;
    let cost = numbers(&lines, "heracles: cost faults=")?;
    let mut row = Row {
        program: c.program.name(),
        label: c.label(),
        below: c.below.name(),
        cache_eighths: c.cache_eighths,
        netc: c.netc,
        frames: c.frames(),
        run_ns: done("elapsed_ns")?,
        faults: done("faults")?,
        zero_fills: done("zero_fills")?,
        fetches: done("fetches")?,
        evictions: done("evictions")?,
        hits: cache("hits")?,
        misses: cache("misses")?,
        fault_ns: cost("fault_ns")?,
        disk_ns: cost("disk_ns")?,
        device_reads: disk("device_reads")?,
        device_writes: disk("device_writes")?,
        client_cpu_ns: cpu_ns(out, "pager"),
        blk_cpu_ns: cpu_ns(out, "blk"),
        ..Row::default()
    };
    if !c.below.remote() {
        return Ok(row);
    }
    let remote = numbers(&lines, "heracles: remote program=")?;
    let store = numbers(&lines, "heracles: store combination=")?;
    let events = numbers(&lines, "heracles: store events ")?;
    (row.pages_written, row.pages_read) = (remote("pages_written")?, remote("pages_read")?);
    (row.packets_sent, row.packets_received) =
        (remote("packets_sent")?, remote("packets_received")?);
    row.retransmits = remote("retransmits")?;
    let wire = numbers(&lines, "heracles: remote wire ")?;
    (row.compressed_writes, row.page_bytes_written) =
        (wire("compressed_writes")?, wire("page_bytes_written")?);
    let netc_said = lines.iter().any(|l| l.contains("heracles: remote wire netc=yes "));
    if netc_said != c.netc {
        return Err(failed(format!("the client's netc is not the run's ({})", c.netc)));
    }
    (row.remote_writes, row.remote_reads) = (store("remote_writes")?, store("remote_reads")?);
    (row.local_writes, row.local_reads) = (store("local_writes")?, store("local_reads")?);
    row.mirror_writes = store("mirror_writes")?;
    let (fallbacks, lost) = (store("fallbacks")?, events("lost_remote")?);
    if fallbacks != 0 || lost != 0 || row.local_reads != 0 || row.remote_writes == 0 {
        return Err(failed(format!(
            "not a remote run: {fallbacks} fallbacks to the disk, {lost} remote pages lost, {} \
             pages read from the disk, {} written to the servers",
            row.local_reads, row.remote_writes
        )));
    }
    let served: Vec<&String> = lines.iter().filter(|l| l.contains("server: client ")).collect();
    if served.len() != c.below.servers() || served.iter().any(|l| !l.contains("released=true")) {
        return Err(failed(format!(
            "{} of {} servers reported a released stream",
            served.len(),
            c.below.servers()
        )));
    }
    for l in served {
        row.server_charged_ns +=
            field(l, "cpu_ns").with_context(|| format!("no `cpu_ns=` in `{l}`"))?;
    }
    row.drivers_cpu_ns = cpu_ns(out, "drv-a") + cpu_ns(out, "drv-b");
    row.server_domains_cpu_ns =
        (1..=c.below.servers()).map(|n| cpu_ns(out, &format!("srv-{n}"))).sum();
    Ok(row)
}

/// What one architecture measured.
#[derive(Serialize)]
struct Measured {
    arch: &'static str,
    rows: Vec<Row>,
}

/// The row of `program` labelled `label`.
fn row<'a>(m: &'a Measured, program: &str, label: &str) -> Option<&'a Row> {
    m.rows.iter().find(|r| r.program == program && r.label == label)
}

/// Per remote fault (a fault that read its page from a server): the client's CPU beyond the
/// program's own (its all-in-memory run's), the drivers', the server's as charged and its
/// domain's, in instructions.
#[derive(Clone, Copy, Debug, Default, Serialize)]
struct PerRemoteFault {
    client: f64,
    drivers: f64,
    server_charged: f64,
    server_domain: f64,
}

fn per_remote_fault(m: &Measured, r: &Row) -> Option<PerRemoteFault> {
    if r.remote_reads == 0 {
        return None;
    }
    let resident = row(m, r.program, Below::Resident.name())?;
    let n = r.remote_reads as f64;
    Some(PerRemoteFault {
        client: (r.client_cpu_ns as f64 - resident.client_cpu_ns as f64) / n,
        drivers: r.drivers_cpu_ns as f64 / n,
        server_charged: r.server_charged_ns as f64 / n,
        server_domain: r.server_domains_cpu_ns as f64 / n,
    })
}

/// The kept figures: key, and the run (by program and label) they come from.
const KEPT: [(&str, Program, &str); 7] = [
    ("filter_remote_seconds", Program::Filter, "remote"),
    ("filter_mirror_server_seconds", Program::Filter, "remote, mirror=server"),
    ("filter_compressed_remote_seconds", Program::Filter, "compressed 12% over remote"),
    ("matmul_netc_packets_per_page", Program::Matmul, "remote, netc"),
    ("matmul_compressed_remote_packets_per_page", Program::Matmul, "compressed 12% over remote"),
    ("filter_client_instructions_per_remote_fault", Program::Filter, "remote"),
    ("filter_server_instructions_per_remote_fault", Program::Filter, "remote"),
];

impl Run for Config {
    fn program(&self) -> Program {
        self.program
    }

    fn label(&self) -> String {
        if self.cache_eighths > 0 {
            format!("compressed {}% over {}", self.cache_eighths * 100 / 8, self.below.name())
        } else if self.netc {
            format!("{}, netc", self.below.name())
        } else {
            self.below.name().to_string()
        }
    }

    /// Needed for a kept figure (the all-in-memory run of a program with one, too).
    fn kept(&self) -> bool {
        KEPT.iter().any(|(key, p, l)| {
            *p == self.program
                && (*l == self.label()
                    || (key.contains("per_remote_fault") && self.below == Below::Resident))
        })
    }

    fn file(&self) -> String {
        format!(
            "target/bench/remote/{}-{}-{}.toml",
            self.program.name(),
            self.label().replace([' ', ',', '='], "-").replace('%', ""),
            self.cache_eighths
        )
    }

    fn manifest(&self) -> String {
        let mut m = crate::paging::pager_manifest(
            "remote",
            self.program.name(),
            &self.label(),
            self.memory(),
            &self.spec(),
            "2ms",
        );
        if !self.below.remote() {
            return m;
        }
        m.push_str(
            r#"
[[system.nic]]
name = "net-a"

[[system.nic]]
name = "net-b"

[[domain]]
name = "drv-a"
app = "virtio-net"
args = ["--ip", "10.0.0.1/24"]
memory = { guaranteed = "2M" }
cpu = { period = "10ms", slice = "1ms", extra = true, latency = "1ms" }
driver = true
devices = [{ nic = "net-a" }]

[[domain]]
name = "drv-b"
app = "virtio-net"
args = ["--ip", "10.0.0.2/24"]
memory = { guaranteed = "2M" }
cpu = { period = "10ms", slice = "1ms", extra = true, latency = "1ms" }
driver = true
devices = [{ nic = "net-b" }]

[[channel]]
name = "rn-req"
from = "pager"
to = "drv-a"

[[channel]]
name = "rn-resp"
from = "drv-a"
to = "pager"
"#,
        );
        for n in 1..=self.below.servers() {
            m.push_str(&format!(
                r#"
[[domain]]
name = "srv-{n}"
app = "paging-server"
args = ["--net", "s{n}", "--port", "{port}", "--memory", "{SERVER_MEMORY}", "--clients", "1"]
memory = {{ guaranteed = "8M" }}
cpu = {{ period = "10ms", slice = "1ms", extra = true, latency = "1ms" }}

[[channel]]
name = "s{n}-req"
from = "srv-{n}"
to = "drv-b"

[[channel]]
name = "s{n}-resp"
from = "drv-b"
to = "srv-{n}"
"#,
                port = 7099 + n,
            ));
        }
        m
    }
}

fn kept_figures(m: &Measured) -> Result<Vec<(String, f64)>> {
    KEPT.iter()
        .map(|(key, p, label)| {
            let r = row(m, p.name(), label).with_context(|| format!("no run {label}"))?;
            let per = || per_remote_fault(m, r).context("no all-in-memory run");
            let v = match *key {
                k if k.ends_with("_seconds") => r.seconds(),
                k if k.ends_with("_packets_per_page") => {
                    r.packets_per_page().context("no remote pages moved")?
                }
                k if k.contains("_client_") => per()?.client,
                _ => per()?.server_charged,
            };
            Ok((key.to_string(), v))
        })
        .collect()
}

fn measure_on(arch: Arch, mode: Mode) -> Result<(Measured, Table)> {
    let a = artifacts::build(arch)?;
    let rows = boot_each("remote", arch, &a, &CONFIGS, mode, |c, mut boot, want| {
        boot.boot.nics_on_virtual_time = true;
        read(c, &boot.run(&a)?, want)
    })?;
    let m = Measured { arch: arch.name(), rows };
    let kept = crate::measure::table(arch, "remote", kept_figures(&m)?);
    Ok((m, kept))
}

fn table(m: &Measured) -> String {
    let mut md = format!(
        "## {}\n\n| program | below memory | frames | run time (s) | faults | fetched | hit rate | \
         µs/fault | disk reads | disk writes | disk µs/request | remote reads | remote writes | \
         packets/page | bytes/page sent | sent compressed | resent |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        m.arch
    );
    for r in &m.rows {
        let requests = r.device_reads + r.device_writes;
        let disk_us = if requests > 0 {
            format!("{:.0}", r.disk_ns as f64 / requests as f64 / 1000.0)
        } else {
            "-".into()
        };
        md.push_str(&format!(
            "| {} | {} | {} | {:.3} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | \
             {} |\n",
            r.program,
            r.label,
            r.frames,
            r.seconds(),
            r.faults,
            r.fetches,
            r.hit_percent().map_or("-".into(), |h| format!("{h:.0}%")),
            r.us_per_fault(),
            r.device_reads,
            r.device_writes,
            disk_us,
            r.remote_reads,
            r.remote_writes,
            r.packets_per_page().map_or("-".into(), |p| format!("{p:.2}")),
            r.bytes_per_page().map_or("-".into(), thousands),
            r.compressed_percent().map_or("-".into(), |p| format!("{p:.0}%")),
            r.retransmits,
        ));
    }
    md.push_str(&format!(
        "\n### {}: CPU per remote fault (instructions)\n\nA remote fault: a fault that read its \
         page from a server, with its share of the evictions' writes (remote writes per remote \
         read in the column). Client: the `heracles` domain's CPU account less its all-in-memory \
         run's (the program's own work), over the remote faults; drivers: both virtio-net \
         driver domains' accounts (smoltcp, the link model, the cards); server, charged: what \
         the paging servers charged this client (`cpu_ns`, their clock while serving it); \
         server domain: the servers' CPU accounts (also their network sessions and idle \
         loops).\n\n\
         | program | below memory | remote faults | writes/read | client | drivers | server, charged | server domain |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
        m.arch
    ));
    for r in &m.rows {
        let Some(p) = per_remote_fault(m, r) else { continue };
        md.push_str(&format!(
            "| {} | {} | {} | {:.2} | {} | {} | {} | {} |\n",
            r.program,
            r.label,
            r.remote_reads,
            r.remote_writes as f64 / r.remote_reads as f64,
            thousands(p.client),
            thousands(p.drivers),
            thousands(p.server_charged),
            thousands(p.server_domain),
        ));
    }
    md
}

/// `a`'s run time over `b`'s, of `program`.
fn ratio(m: &Measured, program: &str, a: &str, b: &str) -> f64 {
    match (row(m, program, a), row(m, program, b)) {
        (Some(a), Some(b)) => a.seconds() / b.seconds(),
        _ => f64::NAN,
    }
}

/// A ratio of run times as the time taken and how much less or more it is.
fn faster(r: f64) -> String {
    if r.is_nan() {
        "-".into()
    } else if r <= 1.0 {
        format!("{r:.2}× the time ({:.0}% less)", (1.0 - r) * 100.0)
    } else {
        format!("{r:.2}× the time ({:.0}% more)", (r - 1.0) * 100.0)
    }
}

/// Run `c`, which sends pages compressed, against `r`, which does not: packets per page moved,
/// bytes per page sent, the share sent compressed, the link time the bytes not sent would
/// have taken at 100 Mbit/s, the client's CPU beyond `r`'s, and the run times.
fn on_the_wire(c: &Row, r: &Row) -> String {
    let saved_bytes = (c.pages_written * 4096).saturating_sub(c.page_bytes_written);
    let link_ms = saved_bytes as f64 * 8.0 / 100e6 * 1e3;
    let cpu_ms = (c.client_cpu_ns as f64 - r.client_cpu_ns as f64) / 1e6;
    format!(
        "{} packets a page moved against {}, {} bytes a page sent ({} of the pages sent \
         compressed), about {link_ms:.1} ms of link time saved on writes against {cpu_ms:+.1} \
         ms of the client's CPU; run time {}",
        c.packets_per_page().map_or("-".into(), |p| format!("{p:.2}")),
        r.packets_per_page().map_or("-".into(), |p| format!("{p:.2}")),
        c.bytes_per_page().map_or("-".into(), thousands),
        c.compressed_percent().map_or("-".into(), |p| format!("{p:.0}%")),
        faster(c.seconds() / r.seconds()),
    )
}

/// The thesis's statements beside this run's figures.
fn claims(m: &Measured) -> String {
    let (local, remote) = (Below::Disk.name(), Below::Remote.name());
    let cached = |p: &str, below: &str| {
        m.rows
            .iter()
            .find(|r| r.program == p && r.cache_eighths > 0 && r.below == below)
            .map_or(String::new(), |r| r.label.clone())
    };
    let mut md = format!(
        "\n### {}: the thesis's findings\n\n| the thesis reports (McDonald 2001, §12) | this \
         run |\n|---|---|\n",
        m.arch
    );
    let lines = [
        (
            "filter pages about 70% faster remote than to the local disk (Fig. 12.2)".to_string(),
            format!("remote: {} of the local disk's", faster(ratio(m, "filter", remote, local))),
        ),
        (
            "remote paging improves all three programs (Fig. 12.2); against the local disk:".into(),
            ["compress", "matmul", "filter"]
                .iter()
                .map(|p| format!("{p} {}", faster(ratio(m, p, remote, local))))
                .collect::<Vec<_>>()
                .join("; "),
        ),
        (
            "remote paging mirrored to another host still beats the local disk (Fig. 12.3); \
             against the local disk:"
                .into(),
            ["compress", "matmul", "filter"]
                .iter()
                .map(|p| {
                    format!(
                        "{p}: mirror=server {}, mirror=disk {}",
                        faster(ratio(m, p, Below::MirrorServer.name(), local)),
                        faster(ratio(m, p, Below::MirrorDisk.name(), local))
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        ),
        (
            "filter with a 1 MB cache (12.5%): about 28% slower locally, 15% faster remotely, \
             14% hits (Fig. 12.7)"
                .into(),
            format!(
                "locally {}, remotely {} (each against no cache); {} hits; remotely {} packets \
                 a page moved (without the cache {})",
                faster(ratio(m, "filter", &cached("filter", local), local)),
                faster(ratio(m, "filter", &cached("filter", remote), remote)),
                row(m, "filter", &cached("filter", remote))
                    .and_then(Row::hit_percent)
                    .map_or("-".into(), |h| format!("{h:.0}%")),
                row(m, "filter", &cached("filter", remote))
                    .and_then(Row::packets_per_page)
                    .map_or("-".into(), |v| format!("{v:.2}")),
                row(m, "filter", remote)
                    .and_then(Row::packets_per_page)
                    .map_or("-".into(), |v| format!("{v:.2}")),
            ),
        ),
        (
            "the client compressing the pages it sends (`netc`, §3.6): a page compressed 2:1 is 2 \
             packets instead of 3, send and ACK twice as fast on 100 Mbit/s Ethernet"
                .into(),
            ["compress", "matmul", "filter"]
                .iter()
                .map(|p| {
                    let netc = row(m, p, &format!("{remote}, netc"));
                    format!(
                        "{p}: {} packets a page (without {}), {} bytes a page sent, {} of plain \
                         remote's",
                        netc.and_then(Row::packets_per_page)
                            .map_or("-".into(), |v| format!("{v:.2}")),
                        row(m, p, remote)
                            .and_then(Row::packets_per_page)
                            .map_or("-".into(), |v| format!("{v:.2}")),
                        netc.and_then(Row::bytes_per_page).map_or("-".into(), thousands),
                        faster(ratio(m, p, &format!("{remote}, netc"), remote)),
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        ),
        (
            "compress with a compressed cache is worse, locally and remotely (Fig. 12.5; \
             Table 12.1: 14.6% and 1.8% slower)"
                .into(),
            format!(
                "locally {}, remotely {} (each against no cache)",
                faster(ratio(m, "compress", &cached("compress", local), local)),
                faster(ratio(m, "compress", &cached("compress", remote), remote)),
            ),
        ),
        (
            "matmul with a 2 MB cache (12.5%) beats disk-only and remote-only, 79% hits \
             (Fig. 12.6)"
                .into(),
            format!(
                "locally {}, remotely {} (each against no cache); {} hits",
                faster(ratio(m, "matmul", &cached("matmul", local), local)),
                faster(ratio(m, "matmul", &cached("matmul", remote), remote)),
                row(m, "matmul", &cached("matmul", remote))
                    .and_then(Row::hit_percent)
                    .map_or("-".into(), |h| format!("{h:.0}%")),
            ),
        ),
    ];
    for (thesis, here) in lines {
        md.push_str(&format!("| {thesis} | {here} |\n"));
    }
    md
}

/// Why this run's figures stand where they do against the thesis's, from `m`'s figures.
fn divergences(m: &Measured) -> String {
    let mut md = format!("\n### {}: why\n\n", m.arch);
    let (local, remote) = (Below::Disk.name(), Below::Remote.name());
    // The disk model's request time against a remote page's.
    let mut per = Vec::new();
    for p in ["compress", "matmul", "filter"] {
        let (Some(d), Some(r)) = (row(m, p, local), row(m, p, remote)) else { continue };
        let requests = (d.device_reads + d.device_writes).max(1);
        per.push(format!(
            "{p}: the disk {} requests of {:.0} µs on average ({:.0} µs a fault), remote {:.0} µs \
             a fault",
            requests,
            d.disk_ns as f64 / requests as f64 / 1000.0,
            d.us_per_fault(),
            r.us_per_fault(),
        ));
    }
    md.push_str(&format!(
        "- **The disk model against the link model.** A page to or from the Deskstar model \
         costs a seek and half a rotation unless it follows the last request; a page to a \
         server costs its packets on a 100 Mbit/s link (about 0.34 ms for 4 KiB and the \
         headers) and the client's, the drivers' and the server's CPU. {}. The thesis's disk \
         (an ATA disk with a write cache, 1.4 ms a page written) was far quicker against its \
         network than the model's seeks are against this link, so remote paging gains more \
         here than the thesis's 70% wherever the disk seeks.\n",
        per.join("; ")
    ));
    // Compressed pages on the wire: which pages shrink, netc, and the compressed cache's pages.
    let shrink: Vec<String> = ["compress", "matmul", "filter"]
        .iter()
        .filter_map(|p| {
            let n = row(m, p, &format!("{remote}, netc"))?;
            Some(format!(
                "{p} {} of its pages written compressed, {} bytes a page",
                n.compressed_percent().map_or("-".into(), |v| format!("{v:.0}%")),
                n.bytes_per_page().map_or("-".into(), thousands),
            ))
        })
        .collect();
    md.push_str(&format!(
        "- **Which pages WKdm shrinks.** WKdm reads a page as 32-bit words and saves only on \
         words that are zero or share their upper 22 bits with a recent word. With `netc`: {}. \
         compress's buffers are text and filter's channels are bytes with ±8 of noise, so \
         their words seldom repeat their upper bits and a page does not shrink (it goes whole, \
         as it would without `netc`); matmul's matrices are small numbers, a word each, and \
         go about 2:1, as the thesis's pages did.\n",
        shrink.join("; ")
    ));
    let mut netc = Vec::new();
    for p in ["compress", "matmul", "filter"] {
        let (Some(n), Some(r)) = (row(m, p, &format!("{remote}, netc")), row(m, p, remote)) else {
            continue;
        };
        netc.push(format!("{p}: {}", on_the_wire(n, r)));
    }
    md.push_str(&format!(
        "- **`netc`: the client compresses what it sends.** The thesis: a page compressed 2:1 \
         is 2 packets instead of 3, and sending it with its ACK about twice as fast on 100 \
         Mbit/s Ethernet, for the client's CPU (§3.6). Against plain remote paging: {}. Where \
         pages shrink the link saves a packet a page each way (a page read back compressed is \
         decompressed by the client); where they do not, `netc` costs the client a failed \
         compression per page and saves nothing.\n",
        netc.join("; ")
    ));
    let mut cache = Vec::new();
    for p in ["matmul", "filter"] {
        let (Some(c), Some(r)) = (
            m.rows.iter().find(|r| r.program == p && r.cache_eighths > 0 && r.below == remote),
            row(m, p, remote),
        ) else {
            continue;
        };
        cache.push(format!(
            "{p}: {}; {} hits, {} faults against {} without the cache",
            on_the_wire(c, r),
            c.hit_percent().map_or("-".into(), |h| format!("{h:.0}%")),
            c.faults,
            r.faults,
        ));
    }
    md.push_str(&format!(
        "- **The small cache's pages on the wire.** The thesis's compressed cache sent its \
         pages compressed (two packets instead of three), which made filter's small cache 15% \
         faster remotely. Here the pool's WKdm pages go to the server as they are (never \
         decompressed to be sent) and come back so. Against remote paging without the cache: \
         {}. filter's pages do not shrink and its cache hits nothing (it sweeps each channel \
         once), so the cache saves neither packets nor fetches and pays its compression: \
         still slower. matmul's pages go compressed and most fetches hit, but its pool takes \
         frames from B, so it faults more than without the cache. Remotely the cache loses \
         less than locally (the table above): a miss costs far less there, and its pages \
         cross the link compressed; but it is not a gain.\n",
        cache.join("; ")
    ));
    // What the small caches and matmul's scale leave to measure.
    let mut small = Vec::new();
    for p in ["matmul", "filter"] {
        let (Some(d), Some(c)) = (
            row(m, p, local),
            m.rows.iter().find(|r| r.program == p && r.cache_eighths > 0 && r.below == local),
        ) else {
            continue;
        };
        small.push(format!(
            "{p}: {} pages fetched back without a cache, {} with it ({} hits)",
            d.fetches,
            c.fetches,
            c.hit_percent().map_or("-".into(), |h| format!("{h:.0}%")),
        ));
    }
    md.push_str(&format!(
        "- **What the programs fetch back at this scale** ({}). matmul's B fits in its memory \
         under plain paging, so it only writes its evicted pages and fetches none back: its \
         remote gain is the writes alone, and its cache, which takes frames from B, makes it \
         fault on B and loses. filter sweeps each channel once, so the pages it fetches back \
         left memory longer ago than an eighth's pool holds them (`bench paging` shows the \
         reuse distances): its small cache hits nothing and costs its compression, locally \
         as remotely.\n",
        small.join("; ")
    ));
    // Mirroring.
    let mut mirror = Vec::new();
    for p in ["compress", "matmul", "filter"] {
        let (Some(r), Some(s), Some(d)) = (
            row(m, p, remote),
            row(m, p, Below::MirrorServer.name()),
            row(m, p, Below::MirrorDisk.name()),
        ) else {
            continue;
        };
        mirror.push(format!(
            "{p}: mirror=server {:+.0}% ({} pages written for {} evicted), mirror=disk {:+.0}% \
             ({} disk writes)",
            (s.seconds() / r.seconds() - 1.0) * 100.0,
            s.pages_written,
            s.remote_writes,
            (d.seconds() / r.seconds() - 1.0) * 100.0,
            d.device_writes,
        ));
    }
    md.push_str(&format!(
        "- **The cost of mirroring** (against plain remote paging's run time): {}. A server \
         mirror sends each evicted page to both servers together, so the fault waits for the \
         slower of two transfers on one link; a disk mirror waits for the disk's write too, \
         so it costs about what the local disk costs for writes (every page evicted goes to \
         the disk) and saves only the disk's reads. The thesis mirrored to another host \
         (Fig. 12.3), like mirror=server here.\n",
        mirror.join("; ")
    ));
    md
}

fn report(measured: &[Measured]) -> String {
    let mut md = String::from(
        "Virtual time under `-icount shift=0,sleep=off`: the Deskstar 34GXP model below the \
         disk, the 100 Mbit/s link model between two virtio-net driver domains of one hub \
         below remote memory; CPU in instructions (1 ns each). `fetched`: faults that read \
         their page from below memory (the disk, a server or the compressed cache); \
         `µs/fault`: the paged driver's mean time in a fault by its clock (the kernel's \
         delivery left out); `disk µs/request`: the time the driver waited for its disk \
         session per device request; `packets/page`: packets both ways per remote page \
         moved; `resent`: retransmissions.\n\n",
    );
    for m in measured {
        md.push_str(&table(m));
        md.push_str(&claims(m));
        md.push_str(&divergences(m));
        md.push('\n');
    }
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
                "arch": m.arch,
                "runs": m.rows,
                "per_remote_fault": m.rows.iter().filter_map(|r| {
                    per_remote_fault(m, r).map(|p| serde_json::json!({
                        "program": r.program, "label": r.label, "instructions": p,
                    }))
                }).collect::<Vec<_>>(),
            }))
            .collect::<Vec<_>>()
    );
    crate::measure::finish("remote", mode, arches, kept, || Ok(report(&measured)), json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use qemu_run::log::LogLine;
    use qemu_run::qemu::Ending;

    fn outcome(lines: &[String]) -> Outcome {
        Outcome {
            ending: Ending::Kernel(0),
            log: lines
                .iter()
                .map(|m| LogLine {
                    level: "INFO".into(),
                    timestamp: Some("0.100000".into()),
                    message: m.clone(),
                })
                .collect(),
            stderr: String::new(),
            wall: std::time::Duration::ZERO,
        }
    }

    /// The log of filter's remote run, as heracles, the server and the kernel print it.
    fn remote_log() -> Vec<String> {
        [
            "[pager] heracles: filter checksum=0x00000000000000ab ok=true",
            "[pager] heracles: done program=filter hierarchy=local frames=128 elapsed_ns=256289800 faults=384 zero_fills=192 fetches=192 evictions=256 dirty_evictions=256",
            "[pager] heracles: cache hits=0 misses=192 hit_permille=0 prefetch_hits=0 compressed_pages=0 compressed_bytes=0 raw_pages=0 zero_pages=0",
            "[pager] heracles: disk device_reads=0 device_writes=0 pages_read=0 pages_written=0 prefetched=0 requests=0 wait_ns=0",
            "[pager] heracles: cost faults=384 fault_ns=191881700 kernel_calls=640 kernel_ns=755800 codec_ns=0 disk_ns=0",
            "[pager] heracles: remote program=filter mirror=none servers=1 pages_written=256 pages_read=192 packets_sent=1153 packets_received=833 retransmits=0 failovers=0 revocations=0 strays=0 control_ignored=0",
            "[pager] heracles: remote wire netc=no compressed_writes=0 page_bytes_written=1048576",
            "[pager] heracles: store combination=5 store=remote mirror=none remote_now=true remote_writes=256 remote_reads=192 local_writes=0 local_reads=0 mirror_writes=0 fallbacks=0",
            "[pager] heracles: store events populated=0 lost_remote=0 stale_freed=0 revocations=0 servers_lost=0 remote_pages=192 servers=1 failovers=0 retransmits=0",
            "[srv-1] paging-server: client 10.0.0.1:49152 stream=1 role=primary disk=yes reserved=192 pages=0 peak=192 reads=192 writes=256 frees=0 cpu_ns=22127600 extra_ns=0 throttled=0 refused=0 queue_drops=0 bytes_written=1048576 released=true",
            "  drv-a: cpu 24237 us guaranteed + 11033 us extra, 24 periods of 10000 us, 0 deadlines missed, 0 periods ended late (contract: slice 1000 us, extra true)",
            "  drv-b: cpu 24237 us guaranteed + 9863 us extra, 24 periods of 10000 us, 0 deadlines missed, 0 periods ended late (contract: slice 1000 us, extra true)",
            "  srv-1: cpu 24094 us guaranteed + 17091 us extra, 24 periods of 10000 us, 0 deadlines missed, 0 periods ended late (contract: slice 1000 us, extra true)",
            "  pager: cpu 52004 us guaranteed + 54644 us extra, 25 periods of 10000 us, 0 deadlines missed, 0 periods ended late (contract: slice 2000 us, extra true)",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    #[test]
    fn a_remote_run_is_read_only_if_it_paged_remotely_and_its_result_is_right() {
        let c = Config::new(Program::Filter, Below::Remote);
        let r = read(&c, &outcome(&remote_log()), 0xab).unwrap();
        assert_eq!(
            (r.run_ns, r.faults, r.remote_reads, r.remote_writes),
            (256289800, 384, 192, 256)
        );
        assert_eq!((r.packets_sent, r.packets_received), (1153, 833));
        assert_eq!((r.compressed_writes, r.bytes_per_page()), (0, Some(4096.0)));
        assert_eq!(r.server_charged_ns, 22127600);
        assert_eq!(r.client_cpu_ns, 106_648_000);
        assert_eq!(r.drivers_cpu_ns, (24237 + 11033 + 24237 + 9863) * 1000);
        assert_eq!(r.server_domains_cpu_ns, (24094 + 17091) * 1000);
        // Another checksum, a program that says it failed, a boot that failed.
        assert!(read(&c, &outcome(&remote_log()), 0xac).is_err());
        let bad: Vec<String> =
            remote_log().iter().map(|l| l.replace("ok=true", "ok=false")).collect();
        assert!(read(&c, &outcome(&bad), 0xab).is_err());
        let mut failed = outcome(&remote_log());
        failed.ending = Ending::Kernel(1);
        assert!(read(&c, &failed, 0xab).is_err());
        // Pages that went to the disk instead, or were lost; a server that did not report,
        // or whose stream was not released.
        for (from, to) in [
            ("fallbacks=0", "fallbacks=1"),
            ("lost_remote=0", "lost_remote=2"),
            ("local_reads=0", "local_reads=5"),
            ("remote_writes=256", "remote_writes=0"),
            ("released=true", "released=false"),
            ("paging-server: client", "paging-server: klient"),
        ] {
            let log: Vec<String> = remote_log().iter().map(|l| l.replace(from, to)).collect();
            assert!(read(&c, &outcome(&log), 0xab).is_err(), "{to}");
        }
        // A run with netc needs a client that said so, and the other way round.
        let c = Config::netc(Program::Filter, Below::Remote);
        assert!(read(&c, &outcome(&remote_log()), 0xab).is_err());
        let netc: Vec<String> =
            remote_log().iter().map(|l| l.replace(" netc=no ", " netc=yes ")).collect();
        assert!(read(&c, &outcome(&netc), 0xab).is_ok());
        let c = Config::new(Program::Filter, Below::Remote);
        assert!(read(&c, &outcome(&netc), 0xab).is_err());
        // A run mirrored to a second server needs both servers' reports.
        let c = Config::new(Program::Filter, Below::MirrorServer);
        assert!(read(&c, &outcome(&remote_log()), 0xab).is_err());
    }

    #[test]
    fn the_client_cpu_per_remote_fault_is_beyond_the_programs_own() {
        let c = Config::new(Program::Filter, Below::Remote);
        let remote = read(&c, &outcome(&remote_log()), 0xab).unwrap();
        let resident = Row {
            program: "filter",
            label: Below::Resident.name().into(),
            client_cpu_ns: 10_648_000,
            ..Row::default()
        };
        let m = Measured { arch: "riscv64", rows: vec![resident, remote.clone()] };
        let p = per_remote_fault(&m, &remote).unwrap();
        assert_eq!(p.client, 96_000_000.0 / 192.0);
        assert_eq!(p.server_charged, 22_127_600.0 / 192.0);
        let figures = kept_figures(&Measured {
            arch: "riscv64",
            rows: CONFIGS
                .iter()
                .filter(|c| c.program != Program::Compress)
                .map(|c| Row {
                    program: c.program.name(),
                    label: c.label(),
                    remote_reads: 1,
                    ..remote.clone()
                })
                .collect(),
        })
        .unwrap();
        assert_eq!(figures.len(), KEPT.len());
    }

    #[test]
    fn the_manifests_are_valid_and_each_run_its_own() {
        let apps = ["virtio-blk", "virtio-net", "heracles", "paging-server"];
        let mut files = Vec::new();
        for c in &CONFIGS {
            let parsed = manifest::parse(&c.file(), &c.manifest(), &apps)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", c.file(), c.manifest()));
            let servers = parsed.domains.iter().filter(|d| d.name.starts_with("srv-")).count();
            assert_eq!(servers, c.below.servers(), "{}", c.file());
            assert!(!files.contains(&c.file()), "{}", c.file());
            files.push(c.file());
        }
        let m = Config::new(Program::Filter, Below::MirrorServer).manifest();
        assert!(
            m.contains("store=remote,mirror=server,net=rn,servers=10.0.0.2:7100+10.0.0.2:7101")
        );
        let m = Config::netc(Program::Filter, Below::Remote).manifest();
        assert!(m.contains("store=remote,mirror=none,net=rn,servers=10.0.0.2:7100,netc=yes\""));
        let m = Config::cached(Program::Filter, Below::Disk, 1).manifest();
        assert!(
            m.contains("hierarchy=compressed,frames=112,cache=65536,codec=wkdm,disk=pg\""),
            "{m}"
        );
        // Every kept figure's run is among the runs, with the all-in-memory run beside it.
        for (_, p, label) in KEPT {
            assert!(CONFIGS.iter().any(|c| c.program == p && c.label() == label && c.kept()));
        }
        assert!(CONFIGS.iter().any(|c| c.below == Below::Resident && c.kept()));
    }
}
