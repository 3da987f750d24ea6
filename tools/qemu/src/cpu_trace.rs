//! The kernel's per-period CPU records (`trace=sched`) during `cargo xtask run`: a live line per
//! interval with each domain's share of the CPU, and every record written out at the end as
//! CSV, JSON or an SVG plot.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use manifest::Manifest;
use serde::Serialize;

use crate::cpu::{self, Period};
use crate::log::LogLine;
pub use crate::records::Format;
use crate::records::{self, csv_field, write};

/// The kernel command-line word that turns the records on.
pub const TRACE_WORD: &str = "trace=sched";

/// The kernel command line `append` with [`TRACE_WORD`] added (once).
pub fn with_trace(append: &str) -> String {
    if append.split_whitespace().any(|w| w == TRACE_WORD) {
        append.to_string()
    } else if append.trim().is_empty() {
        TRACE_WORD.to_string()
    } else {
        format!("{} {TRACE_WORD}", append.trim_end())
    }
}

/// What `cargo xtask run` does with the records.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Print a summary line every this many nanoseconds of kernel time (`--cpu`).
    pub every_ns: Option<u64>,
    /// Write every record here when the run ends, CSV or JSON by extension (`--cpu-out`).
    pub out: Option<PathBuf>,
    /// Plot every record here when the run ends (`--cpu-svg`).
    pub svg: Option<PathBuf>,
}

impl Options {
    /// Is anything asked for (and so `trace=sched` needed)?
    pub fn wanted(&self) -> bool {
        self.every_ns.is_some() || self.out.is_some() || self.svg.is_some()
    }

    /// Checks the output file names, before anything is built or booted.
    pub fn check(&self) -> Result<()> {
        if let Some(out) = &self.out {
            Format::of(out).context("--cpu-out")?;
        }
        Ok(())
    }
}

/// A domain as the written records describe it: its index, name and CPU contract.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DomainInfo {
    /// The domain's index in the manifest (the `domain` of its records).
    pub index: usize,
    /// Its name.
    pub name: String,
    /// Its contract: period, slice, extra time and latency hint.
    pub period_ns: u64,
    /// See `period_ns`.
    pub slice_ns: u64,
    /// See `period_ns`.
    pub extra: bool,
    /// See `period_ns`.
    pub latency_ns: u64,
}

impl DomainInfo {
    /// The domains of `m`, in index order.
    pub fn from_manifest(m: &Manifest) -> Vec<DomainInfo> {
        m.domains
            .iter()
            .enumerate()
            .map(|(index, d)| DomainInfo {
                index,
                name: d.name.clone(),
                period_ns: d.cpu.period_ns,
                slice_ns: d.cpu.slice_ns,
                extra: d.cpu.extra,
                latency_ns: d.cpu.latency_ns,
            })
            .collect()
    }

    fn unnamed(index: usize) -> DomainInfo {
        DomainInfo {
            index,
            name: format!("#{index}"),
            period_ns: 0,
            slice_ns: 0,
            extra: false,
            latency_ns: 0,
        }
    }
}

/// `domains` completed with an unnamed entry for every other domain `periods` mention, so that
/// each domain index has an entry, in index order.
pub fn complete(domains: &[DomainInfo], periods: &[Period]) -> Vec<DomainInfo> {
    let mut all: BTreeMap<usize, DomainInfo> =
        domains.iter().map(|d| (d.index, d.clone())).collect();
    for p in periods {
        all.entry(p.domain).or_insert_with(|| DomainInfo::unnamed(p.domain));
    }
    if let Some(&last) = all.keys().next_back() {
        for i in 0..last {
            all.entry(i).or_insert_with(|| DomainInfo::unnamed(i));
        }
    }
    all.into_values().collect()
}

/// The records as CSV, one line per period after a header line.
pub fn csv(domains: &[DomainInfo], periods: &[Period]) -> String {
    let names = names(domains, periods);
    records::csv("domain,name", periods, |p| {
        format!("{},{}", p.domain, csv_field(&names[p.domain]))
    })
}

/// The records as JSON: `{"domains": [DomainInfo...], "periods": [Period...]}`.
pub fn json(domains: &[DomainInfo], periods: &[Period]) -> String {
    records::json("domains", &complete(domains, periods), periods)
}

/// Every domain's name by index (`#i` for domains without one).
pub fn names(domains: &[DomainInfo], periods: &[Period]) -> Vec<String> {
    complete(domains, periods).into_iter().map(|d| d.name).collect()
}

/// CPU used by one domain in one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Used {
    guaranteed: u64,
    extra: u64,
    missed: u64,
}

/// The periods that ended in one interval `(from, to]` of the kernel's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    /// Start and end of the interval, ns since boot.
    pub from: u64,
    /// See `from`.
    pub to: u64,
    used: BTreeMap<usize, Used>,
}

impl Interval {
    /// The summary line: each domain's share of the interval, guaranteed + extra, and its
    /// missed deadlines; every domain of `domains` is listed, and any other that ran.
    pub fn line(&self, domains: &[DomainInfo]) -> LogLine {
        let span = self.to.saturating_sub(self.from).max(1) as f64;
        let pct = |ns: u64| ns as f64 * 100.0 / span;
        let mut indices: Vec<usize> = domains.iter().map(|d| d.index).collect();
        indices.extend(self.used.keys().copied());
        indices.sort_unstable();
        indices.dedup();
        let mut parts = Vec::new();
        let mut total = 0;
        for i in indices {
            let u = self.used.get(&i).copied().unwrap_or_default();
            let name = domains
                .iter()
                .find(|d| d.index == i)
                .map_or_else(|| format!("#{i}"), |d| d.name.clone());
            let mut part = format!(
                "{name} {:.1}% ({:.1}+{:.1})",
                pct(u.guaranteed + u.extra),
                pct(u.guaranteed),
                pct(u.extra)
            );
            if u.missed > 0 {
                part.push_str(&format!(" {} missed", u.missed));
            }
            parts.push(part);
            total += u.guaranteed + u.extra;
        }
        LogLine {
            level: "CPU".into(),
            timestamp: Some(format!(
                "{}.{:06}",
                self.to / 1_000_000_000,
                self.to % 1_000_000_000 / 1000
            )),
            message: format!(
                "over {} ms: {}; all {:.1}%",
                ms(self.to - self.from),
                parts.join(", "),
                pct(total)
            ),
        }
    }
}

/// `ns` in ms, with one decimal if it is not whole.
fn ms(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000) {
        format!("{}", ns / 1_000_000)
    } else {
        format!("{:.1}", ns as f64 / 1e6)
    }
}

/// Cuts the records into intervals of the kernel's clock by the end of each period. The
/// intervals follow each other from the start of the first period recorded (when the domains'
/// time starts), so that periods dividing the interval fall whole into each.
#[derive(Clone, Debug)]
pub struct Intervals {
    every: u64,
    origin: Option<u64>,
    /// The interval being filled, by its number from the origin.
    current: Option<(u64, Interval)>,
    /// The lowest number the next interval may have (those before it were returned).
    next: u64,
}

impl Intervals {
    /// Intervals of `every_ns`.
    pub fn new(every_ns: u64) -> Self {
        Intervals { every: every_ns.max(1), origin: None, current: None, next: 0 }
    }

    /// Counts `p` in the interval its end falls in; returns the interval before it if `p` is
    /// the first record after it (intervals without records are skipped). A record that ends
    /// in an interval already returned counts in the current one.
    pub fn add(&mut self, p: &Period) -> Option<Interval> {
        let origin = *self.origin.get_or_insert(p.start);
        let k = (p.end.saturating_sub(origin).saturating_sub(1) / self.every).max(self.next);
        let mut done = None;
        if self.current.as_ref().is_none_or(|(c, _)| k > *c) {
            let from = origin + k * self.every;
            let fresh = Interval { from, to: from + self.every, used: BTreeMap::new() };
            done = self.current.replace((k, fresh)).map(|(_, i)| i);
            self.next = k;
        }
        let (_, interval) = self.current.as_mut().expect("an interval");
        let u = interval.used.entry(p.domain).or_default();
        u.guaranteed += p.guaranteed;
        u.extra += p.extra;
        u.missed += u64::from(p.missed);
        done
    }

    /// Returns the current interval if the kernel's clock is past its end at `now_ns` (as the
    /// timestamp of another line says), so that it is shown before what follows it.
    pub fn close_by(&mut self, now_ns: u64) -> Option<Interval> {
        let (k, _) = self.current.as_ref().filter(|(_, i)| i.to < now_ns)?;
        self.next = k + 1;
        self.current.take().map(|(_, i)| i)
    }

    /// The last interval, cut short at the latest period end in it, if it has records.
    pub fn finish(&mut self, latest_end: u64) -> Option<Interval> {
        let (k, mut last) = self.current.take()?;
        self.next = k + 1;
        last.to = latest_end.clamp(last.from + 1, last.to);
        Some(last)
    }
}

/// A log line's timestamp (seconds since boot with a fraction) in nanoseconds.
pub(crate) fn timestamp_ns(line: &LogLine) -> Option<u64> {
    let t = line.timestamp.as_deref()?;
    let (secs, frac) = t.split_once('.').unwrap_or((t, ""));
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_ns = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32)
    };
    secs.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// The records of one run, the domains they belong to, and what to do with them.
pub struct Recorder {
    options: Options,
    domains: Vec<DomainInfo>,
    /// Whether `domains` came from a manifest (else from the kernel's boot lines).
    from_manifest: bool,
    periods: Vec<Period>,
    live: Option<Intervals>,
}

impl Recorder {
    /// A recorder for a boot of `manifest`'s domains (`None`: names come from the kernel's
    /// `domain NAME (id I)` lines).
    pub fn new(options: Options, manifest: Option<&Manifest>) -> Self {
        Recorder {
            live: options.every_ns.map(Intervals::new),
            options,
            domains: manifest.map(DomainInfo::from_manifest).unwrap_or_default(),
            from_manifest: manifest.is_some(),
            periods: Vec::new(),
        }
    }

    /// Takes one line of the log: a period record is kept, and replaced on screen by the
    /// summary of the interval it closes (with `--cpu`); anything else is shown as it is, after
    /// the summary of an interval that ended before its timestamp.
    pub fn feed(&mut self, line: &LogLine, show: &mut dyn FnMut(&LogLine)) {
        let Some(p) = cpu::period(line) else {
            if !self.from_manifest {
                self.learn(line);
            }
            let now = timestamp_ns(line);
            if let Some(done) = self.live.as_mut().zip(now).and_then(|(l, t)| l.close_by(t)) {
                show(&done.line(&self.domains));
            }
            show(line);
            return;
        };
        if let Some(done) = self.live.as_mut().and_then(|l| l.add(&p)) {
            show(&done.line(&self.domains));
        }
        self.periods.push(p);
    }

    /// At the end of the run: shows the summary of the last, partial interval.
    pub fn finish(&mut self, show: &mut dyn FnMut(&LogLine)) {
        let latest = self.periods.iter().map(|p| p.end).max().unwrap_or(0);
        if let Some(last) = self.live.as_mut().and_then(|l| l.finish(latest)) {
            show(&last.line(&self.domains));
        }
    }

    /// Writes the files asked for (`--cpu-out`, `--cpu-svg`); `title` heads the plot.
    pub fn save(&self, title: &str) -> Result<()> {
        if self.periods.is_empty() {
            eprintln!("cpu: the kernel sent no period records ({TRACE_WORD})");
        }
        if let Some(path) = &self.options.out {
            let text = match Format::of(path)? {
                Format::Csv => csv(&self.domains, &self.periods),
                Format::Json => json(&self.domains, &self.periods),
            };
            write(path, &text)?;
            eprintln!("cpu: {} period records written to {}", self.periods.len(), path.display());
        }
        if let Some(path) = &self.options.svg {
            let names = names(&self.domains, &self.periods);
            write(path, &crate::plot::cpu_svg(title, &names, &self.periods))?;
            eprintln!("cpu: plot written to {}", path.display());
        }
        Ok(())
    }

    /// Learns a domain's name and contract from the kernel's boot lines.
    fn learn(&mut self, line: &LogLine) {
        let Some(rest) = line.message.strip_prefix("domain ") else { return };
        if let Some((name, after)) = rest.split_once(" (id ")
            && let Some(Ok(index)) = after.split(')').next().map(str::parse::<usize>)
        {
            if !self.domains.iter().any(|d| d.index == index) {
                let d = DomainInfo { name: name.to_string(), ..DomainInfo::unnamed(index) };
                self.domains.push(d);
                self.domains.sort_by_key(|d| d.index);
            }
        } else if let Some((name, contract)) = rest.split_once(": cpu contract: ")
            && let Some(d) = self.domains.iter_mut().find(|d| d.name == name)
        {
            // `slice S us every P us, extra B, latency L us`
            let words: Vec<&str> = contract
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|w| !w.is_empty())
                .collect();
            let after =
                |key: &str| words.iter().position(|w| *w == key).and_then(|i| words.get(i + 1));
            let us =
                |key: &str| after(key).and_then(|v| v.parse::<u64>().ok()).map_or(0, |v| v * 1000);
            d.slice_ns = us("slice");
            d.period_ns = us("every");
            d.latency_ns = us("latency");
            d.extra = after("extra").is_some_and(|v| *v == "true");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn domains() -> Vec<DomainInfo> {
        vec![
            DomainInfo {
                index: 0,
                name: "one".into(),
                period_ns: 10_000_000,
                slice_ns: 1_000_000,
                extra: false,
                latency_ns: 0,
            },
            DomainInfo {
                index: 1,
                name: "two".into(),
                period_ns: 20_000_000,
                slice_ns: 4_000_000,
                extra: true,
                latency_ns: 500_000,
            },
        ]
    }

    fn period(
        domain: usize,
        start_ms: u64,
        len_ms: u64,
        guaranteed_us: u64,
        extra_us: u64,
    ) -> Period {
        Period {
            domain,
            start: start_ms * 1_000_000,
            end: (start_ms + len_ms) * 1_000_000,
            guaranteed: guaranteed_us * 1000,
            extra: extra_us * 1000,
            missed: false,
        }
    }

    fn two_records() -> Vec<Period> {
        let mut missed = period(1, 0, 20, 3_000, 0);
        missed.missed = true;
        vec![period(0, 0, 10, 1_000, 0), missed]
    }

    fn line(message: &str) -> LogLine {
        LogLine { level: "INFO".into(), timestamp: Some("0.1".into()), message: message.into() }
    }

    #[test]
    fn csv_has_a_header_and_a_line_per_period() {
        assert_eq!(
            csv(&domains(), &two_records()),
            "domain,name,start_ns,end_ns,guaranteed_ns,extra_ns,missed\n\
             0,one,0,10000000,1000000,0,false\n\
             1,two,0,20000000,3000000,0,true\n"
        );
        // A domain the records mention but nothing names.
        let odd = [period(2, 0, 10, 5, 0)];
        assert!(csv(&domains(), &odd).ends_with("\n2,#2,0,10000000,5000,0,false\n"));
        assert_eq!(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
    }

    #[test]
    fn json_has_the_domains_and_the_periods() {
        let text = json(&domains(), &two_records());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["domains"][1],
            serde_json::json!({"index": 1, "name": "two", "period_ns": 20_000_000,
                "slice_ns": 4_000_000, "extra": true, "latency_ns": 500_000})
        );
        assert_eq!(v["domains"].as_array().unwrap().len(), 2);
        assert_eq!(
            v["periods"],
            serde_json::json!([
                {"domain": 0, "start": 0, "end": 10_000_000, "guaranteed": 1_000_000, "extra": 0, "missed": false},
                {"domain": 1, "start": 0, "end": 20_000_000, "guaranteed": 3_000_000, "extra": 0, "missed": true},
            ])
        );
        assert!(text.ends_with("}\n"));
    }

    #[test]
    fn formats_follow_the_extension() {
        assert_eq!(Format::of(Path::new("/tmp/x.csv")).unwrap(), Format::Csv);
        assert_eq!(Format::of(Path::new("x.JSON")).unwrap(), Format::Json);
        let e = Format::of(Path::new("x.txt")).unwrap_err().to_string();
        assert!(e.contains("x.txt") && e.contains("*.csv"), "{e}");
        assert!(Format::of(Path::new("csv")).is_err());
        let bad = Options { out: Some("out.xml".into()), ..Options::default() };
        assert!(bad.wanted() && bad.check().is_err());
    }

    #[test]
    fn the_trace_word_is_added_once() {
        assert_eq!(with_trace(""), "trace=sched");
        assert_eq!(with_trace("test=all "), "test=all trace=sched");
        assert_eq!(with_trace("trace=sched stop=1s"), "trace=sched stop=1s");
    }

    #[test]
    fn intervals_start_with_the_first_period_and_close_on_a_later_end() {
        let mut iv = Intervals::new(100_000_000);
        // Domains start at 5 ms: 10 periods of `one` (1 ms each) end in (5, 105] ms.
        for k in 0..10 {
            assert_eq!(iv.add(&period(0, 5 + 10 * k, 10, 1_000, 0)), None);
        }
        assert_eq!(iv.add(&period(1, 5, 100, 30_000, 2_500)), None);
        let mut missed = period(1, 85, 20, 0, 0);
        missed.missed = true;
        assert_eq!(iv.add(&missed), None);
        // The first period ending after 105 ms closes the interval.
        let done = iv.add(&period(0, 105, 10, 1_000, 0)).expect("an interval");
        assert_eq!((done.from, done.to), (5_000_000, 105_000_000));
        let shown = done.line(&domains());
        assert_eq!(shown.timestamp.as_deref(), Some("0.105000"));
        assert_eq!(
            shown.message,
            "over 100 ms: one 10.0% (10.0+0.0), two 32.5% (30.0+2.5) 1 missed; all 42.5%"
        );
        assert_eq!(shown.to_string(), format!("{:>12} CPU   {}", "0.105000", shown.message));
        // A jump skips empty intervals; the last one is cut at the latest end.
        assert!(iv.add(&period(0, 400, 10, 2_000, 0)).is_some());
        let last = iv.finish(410_000_000).unwrap();
        assert_eq!((last.from, last.to), (405_000_000, 410_000_000));
        assert_eq!(
            last.line(&domains()).message,
            "over 5 ms: one 40.0% (40.0+0.0), two 0.0% (0.0+0.0); all 40.0%"
        );
        assert_eq!(iv.finish(0), None);
        // An interval is closed by a line from after its end; a late record counts in the next.
        assert_eq!(iv.add(&period(0, 590, 10, 1_000, 0)), None);
        assert_eq!(iv.close_by(605_000_000), None);
        let closed = iv.close_by(605_000_001).expect("closed");
        assert_eq!((closed.from, closed.to), (505_000_000, 605_000_000));
        assert_eq!(iv.add(&period(1, 580, 20, 1_000, 0)), None);
        let late = iv.finish(705_000_000).unwrap();
        assert_eq!((late.from, late.to), (605_000_000, 705_000_000));
        assert_eq!(late.used.keys().collect::<Vec<_>>(), [&1]);
    }

    #[test]
    fn timestamps_are_read_to_the_nanosecond() {
        let at = |t: &str| LogLine { timestamp: Some(t.into()), ..line("") };
        assert_eq!(timestamp_ns(&at("1.004346")), Some(1_004_346_000));
        assert_eq!(timestamp_ns(&at("0.1")), Some(100_000_000));
        assert_eq!(timestamp_ns(&at("12")), Some(12_000_000_000));
        assert_eq!(timestamp_ns(&at("x.1")), None);
        assert_eq!(timestamp_ns(&LogLine { timestamp: None, ..line("") }), None);
    }

    #[test]
    fn the_recorder_hides_records_and_learns_names_without_a_manifest() {
        let options = Options { every_ns: Some(10_000_000), ..Options::default() };
        let mut r = Recorder::new(options, None);
        let mut shown = Vec::new();
        let log = [
            "domain hog (id 0): app spin at 0x4000000, 3 of 64 frames used",
            "domain hog: cpu contract: slice 2000 us every 10000 us, extra true, latency 100 us",
            "sched period: domain=0 start=0 end=10000000 guaranteed=2000000 extra=500000 missed=false",
            "sched period: domain=0 start=10000000 end=20000000 guaranteed=2000000 extra=0 missed=false",
            "[hog] done",
        ];
        for l in log {
            r.feed(&line(l), &mut |l| shown.push(l.message.clone()));
        }
        r.finish(&mut |l| shown.push(l.message.clone()));
        assert_eq!(
            shown,
            [
                log[0],
                log[1],
                "over 10 ms: hog 25.0% (20.0+5.0); all 25.0%",
                // Shown before a line from after its end.
                "over 10 ms: hog 20.0% (20.0+0.0); all 20.0%",
                "[hog] done",
            ]
        );
        assert_eq!(r.periods.len(), 2);
        assert_eq!(
            r.domains,
            [DomainInfo {
                index: 0,
                name: "hog".into(),
                period_ns: 10_000_000,
                slice_ns: 2_000_000,
                extra: true,
                latency_ns: 100_000
            }]
        );
    }
}
