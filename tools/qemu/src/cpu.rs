//! Reading CPU figures out of a boot's log: the `spin` and `wakeup` apps' reports, the
//! kernel's per-period records (`trace=sched`) and its run-summary accounts.

use std::collections::BTreeMap;

use crate::log::LogLine;
use crate::qemu::Outcome;

/// The `key=value` words of `text` whose value is a number.
pub fn numbers(text: &str) -> BTreeMap<&str, u64> {
    text.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
        .collect()
}

/// The domain a line of app output is tagged with (`[name] ...`) and the rest of it.
fn tagged(line: &LogLine) -> Option<(&str, &str)> {
    let rest = line.message.strip_prefix('[')?;
    let (domain, text) = rest.split_once("] ")?;
    Some((domain, text))
}

/// A `spin` summary: the work it did and the CPU it saw per period.
#[derive(Clone, Debug, PartialEq)]
pub struct SpinReport {
    /// The domain.
    pub domain: String,
    /// Iterations of its loop.
    pub iterations: u64,
    /// Clock time it ran for.
    pub elapsed_ns: u64,
    /// Complete periods seen.
    pub windows: u64,
    /// The least and the most CPU in one period.
    pub min_ns: u64,
    /// See `min_ns`.
    pub max_ns: u64,
    /// Its contract's period and slice.
    pub period_ns: u64,
    /// See `period_ns`.
    pub slice_ns: u64,
}

impl SpinReport {
    /// The largest difference between the CPU of one period and the slice.
    pub fn deviation_ns(&self) -> u64 {
        self.slice_ns.abs_diff(self.min_ns).max(self.slice_ns.abs_diff(self.max_ns))
    }
}

/// The last `spin:` summary (or `spin: report`) of each domain, in order of appearance.
pub fn spin_reports(out: &Outcome) -> Vec<SpinReport> {
    let mut by_domain: Vec<SpinReport> = Vec::new();
    for line in &out.log {
        let Some((domain, text)) = tagged(line) else { continue };
        if !text.starts_with("spin: iterations=") && !text.starts_with("spin: report iterations=") {
            continue;
        }
        let n = numbers(text);
        let get = |k: &str| n.get(k).copied();
        let Some(report) = (|| {
            Some(SpinReport {
                domain: domain.to_string(),
                iterations: get("iterations")?,
                elapsed_ns: get("elapsed_ns")?,
                windows: get("windows")?,
                min_ns: get("min_ns")?,
                max_ns: get("max_ns")?,
                period_ns: get("period_ns")?,
                slice_ns: get("slice_ns")?,
            })
        })() else {
            continue;
        };
        match by_domain.iter_mut().find(|r| r.domain == domain) {
            Some(r) => *r = report,
            None => by_domain.push(report),
        }
    }
    by_domain
}

/// A `wakeup` receiver's latency figures.
#[derive(Clone, Debug, PartialEq)]
pub struct WakeupReport {
    /// Samples taken.
    pub samples: u64,
    /// Least, median, 99th percentile and largest latency.
    pub min_ns: u64,
    /// See `min_ns`.
    pub median_ns: u64,
    /// See `min_ns`.
    pub p99_ns: u64,
    /// See `min_ns`.
    pub max_ns: u64,
    /// The receiver's latency hint.
    pub latency_ns: u64,
    /// Every sample, in microseconds, sorted.
    pub all_us: Vec<f64>,
}

/// The `wakeup: samples=` report, with the sample lines after it.
pub fn wakeup_report(out: &Outcome) -> Option<WakeupReport> {
    let line = out.log.iter().find_map(|l| {
        let (_, text) = tagged(l)?;
        text.strip_prefix("wakeup: samples=").map(|_| text)
    })?;
    let n = numbers(line);
    let all_us = out
        .log
        .iter()
        .filter_map(|l| tagged(l)?.1.strip_prefix("wakeup: samples us:"))
        .flat_map(|rest| rest.split_whitespace().filter_map(|w| w.parse::<f64>().ok()))
        .collect();
    Some(WakeupReport {
        samples: *n.get("samples")?,
        min_ns: *n.get("min_ns")?,
        median_ns: *n.get("median_ns")?,
        p99_ns: *n.get("p99_ns")?,
        max_ns: *n.get("max_ns")?,
        latency_ns: *n.get("latency_ns")?,
        all_us,
    })
}

/// One completed CPU period of one domain, from a `sched period:` record (`trace=sched`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Period {
    /// The domain's index in the manifest.
    pub domain: usize,
    /// Start and end of the period, nanoseconds since boot.
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// Guaranteed and extra CPU time used in it.
    pub guaranteed: u64,
    /// See `guaranteed`.
    pub extra: u64,
    /// Whether it ended runnable with slice left.
    pub missed: bool,
}

impl crate::records::Account for Period {
    fn start(&self) -> u64 {
        self.start
    }
    fn end(&self) -> u64 {
        self.end
    }
    fn guaranteed(&self) -> u64 {
        self.guaranteed
    }
    fn extra(&self) -> u64 {
        self.extra
    }
    fn missed(&self) -> bool {
        self.missed
    }
}

/// The period record in `line`, if it is one.
pub fn period(line: &LogLine) -> Option<Period> {
    let text = line.message.strip_prefix("sched period: ")?;
    let n = numbers(text);
    Some(Period {
        domain: *n.get("domain")? as usize,
        start: *n.get("start")?,
        end: *n.get("end")?,
        guaranteed: *n.get("guaranteed")?,
        extra: *n.get("extra")?,
        missed: text.contains("missed=true"),
    })
}

/// Every period record of a boot.
pub fn periods(out: &Outcome) -> Vec<Period> {
    out.log.iter().filter_map(period).collect()
}

/// A domain's accounts from the run summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accounts {
    /// The domain's name.
    pub domain: String,
    /// CPU time on its slices and in slack time, microseconds.
    pub guaranteed_us: u64,
    /// See `guaranteed_us`.
    pub extra_us: u64,
    /// Completed periods and missed deadlines.
    pub periods: u64,
    /// See `periods`.
    pub missed: u64,
}

/// The `NAME: cpu G us guaranteed + X us extra, P periods of ..., M deadlines missed` lines of
/// the run summary.
pub fn summary_accounts(out: &Outcome) -> Vec<Accounts> {
    out.log
        .iter()
        .filter_map(|l| {
            let (name, rest) = l.message.trim_start().split_once(": cpu ")?;
            let words: Vec<&str> = rest.split_whitespace().collect();
            let num = |i: usize| words.get(i)?.trim_end_matches(',').parse::<u64>().ok();
            let periods_at = words.iter().position(|w| *w == "periods")?;
            let missed_at = words.iter().position(|w| *w == "deadlines")?;
            Some(Accounts {
                domain: name.to_string(),
                guaranteed_us: num(0)?,
                extra_us: num(4)?,
                periods: num(periods_at - 1)?,
                missed: num(missed_at - 1)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(message: &str) -> LogLine {
        LogLine {
            level: "INFO".into(),
            timestamp: Some("1.000000".into()),
            message: message.into(),
        }
    }

    fn outcome(lines: &[&str]) -> Outcome {
        Outcome {
            ending: crate::qemu::Ending::Kernel(0),
            log: lines.iter().map(|m| line(m)).collect(),
            stderr: String::new(),
            wall: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn reads_the_apps_and_the_kernels_figures() {
        let out = outcome(&[
            "[one] spin: report iterations=5 elapsed_ns=6 running_ns=1 windows=1 min_ns=2 max_ns=3 total_ns=4 period_ns=10 slice_ns=2",
            "[one] spin: iterations=10 elapsed_ns=20 running_ns=5 windows=2 min_ns=998 max_ns=1002 total_ns=3 period_ns=10000 slice_ns=1000",
            "[rx] wakeup: samples=3 min_ns=1 median_ns=2 p99_ns=3 max_ns=3 latency_ns=200000",
            "[rx] wakeup: samples us: 0.0 0.1 10.4",
            "sched period: domain=2 start=0 end=10000000 guaranteed=1000000 extra=5 missed=false",
            "  one: cpu 100144 us guaranteed + 7 us extra, 100 periods of 10000 us, 2 deadlines missed, 0 periods ended late (contract: slice 1000 us, extra false)",
        ]);
        let spin = spin_reports(&out);
        assert_eq!(spin.len(), 1);
        assert_eq!((spin[0].iterations, spin[0].windows), (10, 2));
        assert_eq!(spin[0].deviation_ns(), 2);
        let w = wakeup_report(&out).unwrap();
        assert_eq!((w.samples, w.max_ns, w.latency_ns), (3, 3, 200_000));
        assert_eq!(w.all_us, [0.0, 0.1, 10.4]);
        let p = periods(&out);
        assert_eq!(p.len(), 1);
        assert_eq!(
            (p[0].domain, p[0].guaranteed, p[0].extra, p[0].missed),
            (2, 1_000_000, 5, false)
        );
        let a = summary_accounts(&out);
        assert_eq!(
            a,
            [Accounts {
                domain: "one".into(),
                guaranteed_us: 100144,
                extra_us: 7,
                periods: 100,
                missed: 2
            }]
        );
    }
}
