//! `cargo xtask bench report` (or `bench --report`): the book's plots from real runs, written
//! to `docs/plots/NAME.svg` beside the data each is drawn from, `docs/plots/data/NAME.csv`.
//!
//! The plots ([`PLOTS`], each shown by a chapter of the book):
//! - `cpu-slack`, `cpu-mixed` (cpu.md): the sched bench's scenarios booted with `trace=sched`,
//!   each domain's CPU per period (the kernel's `sched period` records) against its contract;
//! - `fault-latency` (memory.md): a histogram of page-fault latencies, the paged driver's time
//!   in each fault by where the page came from (zero-filled, the compressed cache, the disk),
//!   from matmul paging with a WKdm cache of an eighth of its memory (the `heracles` app's
//!   `heracles: latency` lines; the kernel's `fault served` records end at the handler's first
//!   `resume`, which for a fault that waits for the disk is the switch to another thread);
//! - `think-time` (disk-scheduling.md): the anticipatory scheduler's think-time sweep, two
//!   sequential readers booted on virtio-blk and simulated on the host, with and without
//!   anticipation.
//!
//! A data file is CSV after `#` lines naming what it is (`# title:` is the plot's title) and
//! what measured it (`# command:`, `# commit:`, `# arch:`); [`draw`] makes a plot from its data
//! alone, so the test [`tests::committed_plots_are_drawn_from_their_data`] redraws every
//! committed plot and fails when one differs (the plotting code changed and the plots were
//! not regenerated), when a plot or its data is missing, or when its chapter does not show
//! it. The runs are booted on one architecture (riscv64 unless `--arch` names another) from a
//! committed tree, and every figure is virtual time under `-icount shift=0,sleep=off`: the same
//! commit draws the same plots on every host.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};

use crate::disk::{self, ThinkPoint};
use crate::measure::commit;
use crate::paging;
use qemu_run::cpu::{self, Period};
use qemu_run::plot::{self, histogram};
use qemu_run::qemu::{Ending, IcountBoot};
use system_image::system;
use test_suites::sched as scenarios;
use tool_base::{Arch, artifacts, util};

/// Where the plots go, relative to the repository's root.
pub const DIR: &str = "docs/plots";

/// What a plot shows, which says how its data is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Each domain's CPU per period against its contract.
    Cpu,
    /// A histogram of fault latencies per kind of fault.
    FaultLatency,
    /// Throughput against think time, with and without anticipation.
    ThinkTime,
}

/// One of the book's plots.
#[derive(Clone, Copy, Debug)]
pub struct Plot {
    /// Its file names: `docs/plots/STEM.svg`, `docs/plots/data/STEM.csv`.
    pub stem: &'static str,
    /// The chapter that shows it (under `docs/`).
    pub chapter: &'static str,
    /// What it shows.
    pub kind: Kind,
}

/// The book's plots.
pub const PLOTS: [Plot; 4] = [
    Plot { stem: "cpu-slack", chapter: "cpu.md", kind: Kind::Cpu },
    Plot { stem: "cpu-mixed", chapter: "cpu.md", kind: Kind::Cpu },
    Plot { stem: "fault-latency", chapter: "memory.md", kind: Kind::FaultLatency },
    Plot { stem: "think-time", chapter: "disk-scheduling.md", kind: Kind::ThinkTime },
];

/// The CPU scenarios plotted, by stem: the sched bench's traced scenarios.
const CPU_RUNS: [(&str, &str); 2] = [("cpu-slack", "sched-slack"), ("cpu-mixed", "sched-mixed")];

/// The histogram's x axis.
const FAULT_AXIS: &str = "the paged driver's time in a fault (virtual time)";

/// A plot's data: what it is, what measured it, and its rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Data {
    /// What the data is, for people (the file's first line).
    pub about: String,
    /// The plot's title.
    pub title: String,
    /// The command that measured it.
    pub command: String,
    /// The commit it was measured at.
    pub commit: String,
    /// The architecture it was measured on.
    pub arch: String,
    /// The CSV header's column names.
    pub columns: Vec<String>,
    /// The rows, a field per column.
    pub rows: Vec<Vec<String>>,
}

/// `field` as a CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// The fields of one CSV line (quoted fields as [`csv_field`] writes them).
fn csv_fields(line: &str) -> Result<Vec<String>> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (false, ',') => fields.push(std::mem::take(&mut field)),
            (false, '"') if field.is_empty() => quoted = true,
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (_, c) => field.push(c),
        }
    }
    ensure!(!quoted, "an unterminated quoted field in `{line}`");
    fields.push(field);
    Ok(fields)
}

impl Data {
    /// The data file's text.
    pub fn text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "# {}", self.about);
        for (key, value) in [
            ("title", &self.title),
            ("command", &self.command),
            ("commit", &self.commit),
            ("arch", &self.arch),
        ] {
            let _ = writeln!(t, "# {key}: {value}");
        }
        let line = |fields: &[String]| -> String {
            fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(",")
        };
        let _ = writeln!(t, "{}", line(&self.columns));
        for row in &self.rows {
            let _ = writeln!(t, "{}", line(row));
        }
        t
    }

    /// Reads a data file's text.
    pub fn parse(text: &str) -> Result<Data> {
        let mut lines = text.lines();
        let mut comments = Vec::new();
        let header = loop {
            let line = lines.next().context("no CSV header")?;
            match line.strip_prefix("# ") {
                Some(c) => comments.push(c),
                None => break line,
            }
        };
        let (about, meta) = comments.split_first().context("no `# ` line saying what it is")?;
        let get = |key: &str| -> Result<String> {
            meta.iter()
                .find_map(|c| c.strip_prefix(key)?.strip_prefix(": "))
                .map(str::to_string)
                .with_context(|| format!("no `# {key}: ` line"))
        };
        let columns = csv_fields(header)?;
        let mut rows = Vec::new();
        for (i, line) in lines.enumerate() {
            let row = csv_fields(line)?;
            ensure!(
                row.len() == columns.len(),
                "row {}: {} fields, the header has {}",
                i + 1,
                row.len(),
                columns.len()
            );
            rows.push(row);
        }
        Ok(Data {
            about: about.to_string(),
            title: get("title")?,
            command: get("command")?,
            commit: get("commit")?,
            arch: get("arch")?,
            columns,
            rows,
        })
    }

    /// Every row's field in column `name`, parsed.
    fn column<T: std::str::FromStr>(&self, name: &str) -> Result<Vec<T>> {
        let at = self.columns.iter().position(|c| c == name).with_context(|| {
            format!("no column `{name}` (the header has {})", self.columns.join(","))
        })?;
        self.rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                r[at]
                    .parse()
                    .ok()
                    .with_context(|| format!("row {}: `{name}` is `{}`", i + 1, r[at]))
            })
            .collect()
    }
}

/// The plot of `data`, drawn as a `kind` plot.
pub fn draw(kind: Kind, data: &Data) -> Result<String> {
    Ok(match kind {
        Kind::Cpu => {
            let domain: Vec<usize> = data.column("domain")?;
            let name: Vec<String> = data.column("name")?;
            let (period, slice): (Vec<u64>, Vec<u64>) =
                (data.column("period_ns")?, data.column("slice_ns")?);
            let (start, end): (Vec<u64>, Vec<u64>) =
                (data.column("start_ns")?, data.column("end_ns")?);
            let (guaranteed, extra): (Vec<u64>, Vec<u64>) =
                (data.column("guaranteed_ns")?, data.column("extra_ns")?);
            let missed: Vec<bool> = data.column("missed")?;
            let mut domains: Vec<plot::Domain> = Vec::new();
            let mut periods = Vec::new();
            for i in 0..data.rows.len() {
                let d = domain[i];
                if domains.len() <= d {
                    domains.resize(d + 1, plot::Domain { name: String::new(), contract: None });
                }
                domains[d] = plot::Domain {
                    name: name[i].clone(),
                    contract: (period[i] > 0).then(|| slice[i] as f64 / period[i] as f64),
                };
                periods.push(Period {
                    domain: d,
                    start: start[i],
                    end: end[i],
                    guaranteed: guaranteed[i],
                    extra: extra[i],
                    missed: missed[i],
                });
            }
            plot::cpu_contract_svg(&data.title, &domains, &periods)
        }
        Kind::FaultLatency => {
            let name: Vec<String> = data.column("series")?;
            let bin: Vec<usize> = data.column("bin")?;
            let faults: Vec<u64> = data.column("faults")?;
            let mut series: Vec<histogram::Series> = Vec::new();
            for i in 0..data.rows.len() {
                let at = match series.iter().position(|s| s.name == name[i]) {
                    Some(at) => at,
                    None => {
                        series.push(histogram::Series {
                            name: name[i].clone(),
                            counts: BTreeMap::new(),
                        });
                        series.len() - 1
                    }
                };
                *series[at].counts.entry(bin[i]).or_insert(0) += faults[i];
            }
            histogram::histogram(&data.title, FAULT_AXIS, &series)
        }
        Kind::ThinkTime => {
            let source: Vec<String> = data.column("source")?;
            let anticipation: Vec<String> = data.column("anticipation")?;
            let (think, mbps): (Vec<f64>, Vec<f64>) =
                (data.column("think_ms")?, data.column("mb_per_s")?);
            let mut points = Vec::new();
            for i in 0..data.rows.len() {
                let with = match anticipation[i].as_str() {
                    "with" => true,
                    "without" => false,
                    other => bail!("row {}: anticipation `{other}`, not with or without", i + 1),
                };
                points.push(ThinkPoint {
                    source: source[i].clone(),
                    with,
                    think_ms: think[i],
                    mbps: mbps[i],
                });
            }
            disk::think_svg(&data.title, &points)
        }
    })
}

/// What measured the data: the command, the commit and the architecture.
struct Measured {
    command: String,
    commit: String,
    arch: Arch,
}

impl Measured {
    fn data(&self, about: String, title: String, columns: &[&str], rows: Vec<Vec<String>>) -> Data {
        Data {
            about,
            title,
            command: self.command.clone(),
            commit: self.commit.clone(),
            arch: self.arch.name().to_string(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows,
        }
    }
}

/// The CPU scenario `run` booted with `trace=sched`: each domain's periods and contract.
fn cpu_data(
    m: &Measured,
    a: &artifacts::Artifacts,
    title: &str,
    run: scenarios::Run,
) -> Result<Data> {
    let out = scenarios::boot(a, run)?;
    if out.ending != Ending::Kernel(0) {
        bail!("{}: the boot ended {:?}:\n{}", run.manifest, out.ending, out.log_text());
    }
    let periods = cpu::periods(&out);
    ensure!(!periods.is_empty(), "{}: no period records with trace=sched", run.manifest);
    let manifest = system::load_manifest(&util::root().join(run.manifest), m.arch)?;
    let domains = qemu_run::cpu_trace::DomainInfo::from_manifest(&manifest);
    let mut rows = Vec::new();
    for p in &periods {
        let d = domains.get(p.domain).with_context(|| {
            format!("{}: a period of domain {}, which it does not have", run.manifest, p.domain)
        })?;
        rows.push(vec![
            p.domain.to_string(),
            d.name.clone(),
            d.period_ns.to_string(),
            d.slice_ns.to_string(),
            d.extra.to_string(),
            p.start.to_string(),
            p.end.to_string(),
            p.guaranteed.to_string(),
            p.extra.to_string(),
            p.missed.to_string(),
        ]);
    }
    Ok(m.data(
        format!("Each domain's CPU per period, {} booted with trace=sched", run.manifest),
        format!("{title} ({})", m.arch.name()),
        &[
            "domain",
            "name",
            "period_ns",
            "slice_ns",
            "extra",
            "start_ns",
            "end_ns",
            "guaranteed_ns",
            "extra_ns",
            "missed",
        ],
        rows,
    ))
}

/// The series of the fault-latency histogram: the `heracles: latency source=` line's source,
/// and its name in the plot.
const SOURCES: [(&str, &str); 3] = [
    ("zero", "zero-filled (first touch)"),
    ("cache", "from the WKdm cache"),
    ("store", "from the disk"),
];

/// The faults of `lines` (the `heracles` app's report) by source and latency bin: the
/// `heracles: latency source=S BIN=FAULTS ...` lines.
fn latency_bins(lines: &[String]) -> Result<Vec<(&'static str, BTreeMap<usize, u64>)>> {
    let mut series = Vec::new();
    for (source, name) in SOURCES {
        let prefix = format!("heracles: latency source={source}");
        let line = lines
            .iter()
            .find_map(|l| l.split_once(&prefix).map(|(_, rest)| rest))
            .with_context(|| format!("no `{prefix}` line"))?;
        let mut counts = BTreeMap::new();
        for word in line.split_whitespace() {
            let parsed = word
                .split_once('=')
                .and_then(|(b, n)| Some((b.parse::<usize>().ok()?, n.parse::<u64>().ok()?)));
            let (bin, n) = parsed.with_context(|| format!("`{word}` in `{prefix}{line}`"))?;
            counts.insert(bin, n);
        }
        series.push((name, counts));
    }
    Ok(series)
}

/// The fault-latency histogram's data: [`paging::traced`]'s run, each fault's time in the
/// paged driver by where its page came from.
fn fault_data(m: &Measured, a: &artifacts::Artifacts) -> Result<Data> {
    let t = paging::traced();
    eprintln!("bench report: {} {}", m.arch.name(), t.file);
    let path = util::root().join(&t.file);
    std::fs::create_dir_all(path.parent().context("a file in a directory")?)?;
    std::fs::write(&path, &t.manifest)?;
    let mut prepared =
        IcountBoot::new(a, &t.file, "").with_context(|| format!("preparing {}", t.file))?;
    prepared.boot.timeout = std::time::Duration::from_secs(600);
    let out = prepared.run(a)?;
    let lines = paging::finished_lines(&out, &t.file, t.program, paging::host_checksum(t.program))?;
    let series = latency_bins(&lines)?;
    let faults: u64 = series.iter().flat_map(|(_, c)| c.values()).sum();
    ensure!(faults > 0, "{}: no faults timed:\n{}", t.file, out.log_text());
    let mut rows = Vec::new();
    for (name, counts) in &series {
        for (&bin, &n) in counts {
            rows.push(vec![
                name.to_string(),
                bin.to_string(),
                histogram::edge(bin).to_string(),
                histogram::edge(bin + 1).to_string(),
                n.to_string(),
            ]);
        }
    }
    Ok(m.data(
        format!(
            "Page faults of matmul ({}) by the paged driver's time in each, by its clock, and \
             where the page came from, in quarter-decade bins: bin, its edges in ns, faults",
            t.file
        ),
        format!(
            "Page fault latency: matmul, WKdm cache of an eighth of its memory ({})",
            m.arch.name()
        ),
        &["series", "bin", "low_ns", "high_ns", "faults"],
        rows,
    ))
}

/// The think-time sweep's data ([`disk::think_sweep`]).
fn think_data(m: &Measured) -> Result<Data> {
    let rows = disk::think_sweep(m.arch)?
        .into_iter()
        .map(|p| {
            vec![
                p.source,
                if p.with { "with" } else { "without" }.to_string(),
                format!("{}", p.think_ms),
                format!("{:.3}", p.mbps),
            ]
        })
        .collect();
    Ok(m.data(
        "Two sequential readers' total MB/s against their think time, with and without \
         anticipation: booted on virtio-blk over the Deskstar model, and in the host simulation"
            .to_string(),
        format!("{} ({})", disk::THINK_TITLE, m.arch.name()),
        &["source", "anticipation", "think_ms", "mb_per_s"],
        rows,
    ))
}

/// Writes `data` and its plot under `dir`: `data/STEM.csv` and `STEM.svg`; the plot's path.
fn write(dir: &Path, plot: &Plot, data: &Data) -> Result<PathBuf> {
    // Drawn from the text written, as the test redraws it.
    let text = data.text();
    let svg = draw(plot.kind, &Data::parse(&text)?)?;
    std::fs::create_dir_all(dir.join("data"))?;
    std::fs::write(dir.join("data").join(format!("{}.csv", plot.stem)), text)?;
    let path = dir.join(format!("{}.svg", plot.stem));
    std::fs::write(&path, svg)?;
    Ok(path)
}

/// Runs what the plots need on `arches` (one architecture; none: riscv64) and writes every plot
/// and its data under [`DIR`]. Refuses a tree with changes: the data names the commit.
pub fn run(arches: &[Arch]) -> Result<u8> {
    let arch = match arches {
        [] => Arch::Riscv64,
        [one] => *one,
        _ => bail!("bench report draws the book's plots from one architecture: give one --arch"),
    };
    let status = util::output(
        std::process::Command::new("git").current_dir(util::root()).args(["status", "--porcelain"]),
    )?;
    if !status.trim().is_empty() {
        bail!(
            "bench report draws the book's plots only from a committed tree (the data names the commit); commit or stash first:\n{status}"
        );
    }
    let started = Instant::now();
    let m = Measured {
        command: format!("cargo xtask bench report --arch {}", arch.name()),
        commit: commit(),
        arch,
    };
    let a = artifacts::build(arch)?;
    let mut data: BTreeMap<&str, Data> = BTreeMap::new();
    for (stem, bench_stem) in CPU_RUNS {
        let (_, title, run) = crate::sched::PLOTS
            .iter()
            .find(|(s, _, _)| *s == bench_stem)
            .with_context(|| format!("no traced scenario {bench_stem}"))?;
        eprintln!("bench report: {} {}", arch.name(), run.manifest);
        data.insert(stem, cpu_data(&m, &a, title, *run)?);
    }
    data.insert("fault-latency", fault_data(&m, &a)?);
    data.insert("think-time", think_data(&m)?);
    // The tree must still be the commit the data names.
    if commit() != m.commit {
        bail!(
            "the tree changed while bench report ran ({} then, {} now): nothing written",
            m.commit,
            commit()
        );
    }
    let dir = util::root().join(DIR);
    for plot in &PLOTS {
        let d = data.get(plot.stem).with_context(|| format!("no data for {}", plot.stem))?;
        let path = write(&dir, plot, d)?;
        println!("written: {} ({} rows)", path.display(), d.rows.len());
    }
    println!(
        "bench report: {} plots from {} at {} in {:.0} s; commit them with their data",
        PLOTS.len(),
        arch.name(),
        m.commit,
        started.elapsed().as_secs_f64()
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn latency_lines_give_each_source_its_bins() {
        let lines: Vec<String> = [
            "heracles: latency source=zero 1=300 2=8",
            "heracles: latency source=cache",
            "heracles: latency source=store 13=40 14=2",
        ]
        .map(String::from)
        .to_vec();
        let s = latency_bins(&lines).unwrap();
        assert_eq!(s[0], (SOURCES[0].1, BTreeMap::from([(1, 300), (2, 8)])));
        assert_eq!(s[1], (SOURCES[1].1, BTreeMap::new()));
        assert_eq!(s[2], (SOURCES[2].1, BTreeMap::from([(13, 40), (14, 2)])));
        assert!(latency_bins(&lines[..2]).is_err(), "a source missing");
        let bad = vec![
            "heracles: latency source=zero 1=x".to_string(),
            lines[1].clone(),
            lines[2].clone(),
        ];
        assert!(latency_bins(&bad).is_err());
    }

    #[test]
    fn csv_fields_round_trip_with_quotes() {
        for fields in [
            vec!["a".to_string(), "b c".into(), "".into()],
            vec!["host sim, the paper's rule".into(), "say \"hi\"".into(), "1".into()],
        ] {
            let line = fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(",");
            assert_eq!(csv_fields(&line).unwrap(), fields, "{line}");
        }
        assert!(csv_fields("\"open").is_err());
    }

    #[test]
    fn data_files_read_back_what_was_written() {
        let d = Data {
            about: "what".into(),
            title: "a, b".into(),
            command: "cargo xtask bench report --arch riscv64".into(),
            commit: "abc1234".into(),
            arch: "riscv64".into(),
            columns: vec!["source".into(), "x".into()],
            rows: vec![vec!["host sim, the paper's rule".into(), "1.5".into()]],
        };
        let text = d.text();
        assert!(text.starts_with("# what\n# title: a, b\n# command: cargo xtask"), "{text}");
        assert_eq!(Data::parse(&text).unwrap(), d);
        assert_eq!(d.column::<f64>("x").unwrap(), [1.5]);
        assert!(d.column::<f64>("source").is_err() && d.column::<f64>("y").is_err());
        // A row short of a field, and a file without its commit, are errors.
        assert!(Data::parse(&format!("{text}only\n")).is_err());
        assert!(Data::parse(&text.replace("# commit: abc1234\n", "")).is_err());
    }

    #[test]
    fn each_kind_draws_from_its_columns() {
        let data = |columns: &str, rows: &[&str]| Data {
            about: "t".into(),
            title: "t".into(),
            command: "c".into(),
            commit: "abc1234".into(),
            arch: "riscv64".into(),
            columns: csv_fields(columns).unwrap(),
            rows: rows.iter().map(|r| csv_fields(r).unwrap()).collect(),
        };
        let cpu = data(
            "domain,name,period_ns,slice_ns,extra,start_ns,end_ns,guaranteed_ns,extra_ns,missed",
            &["0,one,10000000,1000000,true,0,10000000,1000000,500000,false"],
        );
        let svg = draw(Kind::Cpu, &cpu).unwrap();
        assert!(svg.contains(">one</text>") && svg.contains(">contract (slice)</text>"));
        let faults = data(
            "series,bin,low_ns,high_ns,faults",
            &["zero,4,10000,17780,3", "\"disk, local\",13,1778000,3162000,1"],
        );
        let svg = draw(Kind::FaultLatency, &faults).unwrap();
        assert!(svg.contains(">the paged driver&apos;s time in a fault (virtual time)</text>"));
        assert!(svg.contains(">3 samples</text>") && svg.contains(">disk, local</text>"));
        let think = data(
            "source,anticipation,think_ms,mb_per_s",
            &["host sim,with,0,20.5", "host sim,without,0,6.6", "host sim,with,2,15"],
        );
        let svg = draw(Kind::ThinkTime, &think).unwrap();
        assert!(svg.contains(">host sim, with</text>") && svg.contains(">host sim, without<"));
        let wrong = data("source,anticipation,think_ms,mb_per_s", &["h,maybe,0,1"]);
        assert!(draw(Kind::ThinkTime, &wrong).is_err());
        assert!(draw(Kind::Cpu, &think).is_err(), "the columns of another kind");
    }

    /// Every plot of the book is committed, redrawn from its committed data by today's code
    /// byte for byte, measured at a commit (not a tree with changes), and shown by its chapter;
    /// and `docs/plots` holds no plot the book does not know.
    #[test]
    fn committed_plots_are_drawn_from_their_data() {
        let dir = root().join(DIR);
        let mut problems = Vec::new();
        for plot in &PLOTS {
            let csv = format!("{DIR}/data/{}.csv", plot.stem);
            let svg = format!("{DIR}/{}.svg", plot.stem);
            let (Ok(text), Ok(committed)) = (
                std::fs::read_to_string(root().join(&csv)),
                std::fs::read_to_string(root().join(&svg)),
            ) else {
                problems.push(format!("{svg} or {csv} is missing"));
                continue;
            };
            match Data::parse(&text).and_then(|d| Ok((draw(plot.kind, &d)?, d))) {
                Ok((drawn, d)) => {
                    if drawn != committed {
                        problems.push(format!("{svg} is not what its data draws today"));
                    }
                    if d.commit.ends_with("-dirty") || d.commit == "unknown" {
                        problems.push(format!("{csv}: measured at `{}`, not a commit", d.commit));
                    }
                }
                Err(e) => problems.push(format!("{csv}: {e:#}")),
            }
            let chapter =
                std::fs::read_to_string(root().join("docs").join(plot.chapter)).unwrap_or_default();
            if !chapter.contains(&format!("](plots/{}.svg)", plot.stem)) {
                problems
                    .push(format!("docs/{} does not show plots/{}.svg", plot.chapter, plot.stem));
            }
        }
        for sub in ["", "data"] {
            for entry in std::fs::read_dir(dir.join(sub)).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let stem = name.strip_suffix(".svg").or_else(|| name.strip_suffix(".csv"));
                if entry.path().is_file()
                    && !stem.is_some_and(|s| PLOTS.iter().any(|p| p.stem == s))
                {
                    let path = Path::new(DIR).join(sub).join(&name);
                    problems.push(format!("{}: not a plot of the book", path.display()));
                }
            }
        }
        assert!(
            problems.is_empty(),
            "the book's plots are stale or missing (regenerate them with `cargo xtask bench report` on a committed tree, and commit them):\n{}",
            problems.join("\n")
        );
    }
}
