//! The report of `bench disk`: for each experiment a table (each configuration measured on
//! every device in QEMU and in the host simulation, next to the paper's figure and the reason
//! Tessera's differs), its bars checked (pass/FAIL), the scheduler's cost per request, and
//! the SVG plots (throughput against think time; each stream's disk time per USD period).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::experiments::{Bar, Experiment, Metric, Row, Run, Scheduler, client_name};
use super::host::HostCost;
use super::lines::Measured;
use qemu_run::plot::lines::{self as svg, Series};

/// What one source measured, run by run: a device in QEMU, or the host simulation.
pub struct Source<'a> {
    /// Its name in tables (`riscv64 virtio`, `host sim`).
    pub name: String,
    /// Its runs' measurements, by run key (a run that failed is missing).
    pub runs: &'a BTreeMap<String, Measured>,
    /// Whether Tessera's bars apply to it (not to the paper's rule, shown for comparison);
    /// a source that is not checked shows only the rows it has.
    pub checked: bool,
}

/// `metric` of `m`.
pub fn value(metric: Metric, m: &Measured) -> Option<f64> {
    if m.clients.is_empty() {
        return None;
    }
    match metric {
        Metric::TotalMbps => Some(m.total_mbps()),
        Metric::ClientMbps(i) => m.client_mbps(i),
        Metric::BytesRatio { num, den } => {
            let (n, d) = (m.clients.get(num)?.bytes, m.clients.get(den)?.bytes);
            (d > 0).then(|| n as f64 / d as f64)
        }
    }
}

/// A bar's verdict on one source: passed, and the figure that decided, for people.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Whether the bar holds.
    pub pass: bool,
    /// The deciding figure.
    pub detail: String,
}

/// The rows' `(with, without)` measurements in `runs`.
fn pairs<'a>(
    e: &Experiment,
    runs: &'a BTreeMap<String, Measured>,
) -> Vec<(Option<&'a Measured>, Option<&'a Measured>)> {
    e.rows
        .iter()
        .map(|r| {
            (
                r.with.as_ref().and_then(|k| runs.get(k)),
                r.without.as_ref().and_then(|k| runs.get(k)),
            )
        })
        .collect()
}

/// The worst of `figures` (the least when `least`), `None` if one is missing or there are none.
fn worst(figures: Vec<Option<f64>>, least: bool) -> Option<f64> {
    let all: Option<Vec<f64>> = figures.into_iter().collect();
    let all = all?;
    let pick = if least { f64::min } else { f64::max };
    all.into_iter().reduce(pick)
}

/// Checks `bar` of `e` on `runs` (`plan` gives the runs' contracts); `None` if a run it needs
/// was not measured.
pub fn check(
    bar: &Bar,
    e: &Experiment,
    plan: &[Run],
    runs: &BTreeMap<String, Measured>,
) -> Option<Verdict> {
    let rows = pairs(e, runs);
    let with_rows = || rows.iter().zip(&e.rows).filter(|(_, r)| r.with.is_some()).map(|(p, _)| p.0);
    let verdict = |pass: bool, detail: String| Some(Verdict { pass, detail });
    match bar {
        Bar::RatioAtLeast { min } => {
            let ratios = rows
                .iter()
                .zip(&e.rows)
                .filter(|(_, r)| r.with.is_some() && r.without.is_some())
                .map(|((w, wo), _)| Some(value(e.metric, (*w)?)? / value(e.metric, (*wo)?)?))
                .collect();
            let w = worst(ratios, true)?;
            verdict(w >= *min, format!("worst {w:.2}"))
        }
        Bar::WithIn { lo, hi } => {
            let vals: Option<Vec<f64>> = with_rows().map(|m| value(e.metric, m?)).collect();
            let vals = vals?;
            let pass = vals.iter().all(|v| (*lo..=*hi).contains(v));
            let shown: Vec<String> = vals.iter().map(|v| format!("{v:.2}")).collect();
            verdict(pass, shown.join(", "))
        }
        Bar::TotalAtLeastOf { frac, reference } => {
            let base = runs.get(reference)?.total_mbps();
            let w = worst(with_rows().map(|m| Some(m?.total_mbps() / base)).collect(), true)?;
            verdict(w >= *frac, format!("least {:.1}% of {base:.2} MB/s", w * 100.0))
        }
        Bar::LeastAtLeastFair { frac } => {
            let shares = with_rows()
                .map(|m| {
                    let m = m?;
                    let fair = m.total_mbps() / m.clients.len() as f64;
                    let least = (0..m.clients.len())
                        .filter_map(|i| m.client_mbps(i))
                        .fold(f64::MAX, f64::min);
                    Some(least / fair)
                })
                .collect();
            let w = worst(shares, true)?;
            verdict(w >= *frac, format!("least reader {:.0}% of its fair share", w * 100.0))
        }
        Bar::StreamAtLeastOf { frac, reference } => {
            let alone = runs.get(reference)?.client_mbps(0)?;
            let w = worst(with_rows().map(|m| m?.client_mbps(0)).collect(), true)?;
            verdict(
                w >= frac * alone,
                format!("{w:.2} MB/s, bar {:.2} ({frac:.2} × {alone:.2})", frac * alone),
            )
        }
        Bar::SlicesKept => {
            let mut over = 0;
            let mut periods = 0;
            for key in e.rows.iter().flat_map(|r| r.with.iter().chain(&r.without)) {
                let m = runs.get(key)?;
                let run = plan.iter().find(|r| &r.key == key)?;
                for (i, c) in run.clients.iter().enumerate() {
                    let Some(k) = c.contract.filter(|k| !k.extra) else { continue };
                    for p in m.periods_of(&client_name(i)) {
                        periods += 1;
                        over += u32::from(p.guaranteed + p.extra > k.slice_ms * 1_000_000);
                    }
                }
            }
            if periods == 0 {
                return verdict(false, "no `disk period:` lines".into());
            }
            verdict(over == 0, format!("{over} of {periods} periods beyond the slice"))
        }
        Bar::NoWaitExceeded => {
            let mut exceeded = 0;
            let mut count = 0;
            for key in e.rows.iter().flat_map(|r| r.with.iter().chain(&r.without)) {
                let w = runs.get(key)?.waits?;
                exceeded += w.exceeded;
                count += w.count;
            }
            verdict(exceeded == 0, format!("{exceeded} of {count} waits beyond their timeout"))
        }
    }
}

/// The source whose figures fill the notes' placeholders: the host simulation, which every
/// run of the bench has (`--host-only` too).
pub const NOTE_SOURCE: &str = "host sim";

/// `template` (a row's note) with its placeholders (see [`super::experiments::Row::note`])
/// filled from `source`'s runs, `-` where a run is missing; an unknown placeholder is kept as
/// written, braces and all.
pub fn note(template: &str, row: &Row, metric: Metric, source: Option<&Source<'_>>) -> String {
    let get =
        |key: Option<&String>| key.and_then(|k| source?.runs.get(k)).and_then(|m| value(metric, m));
    let (w, wo) = (get(row.with.as_ref()), get(row.without.as_ref()));
    let ratio = match (w, wo) {
        (Some(w), Some(wo)) if wo > 0.0 => Some(w / wo),
        _ => None,
    };
    let fill = |name: &str| -> Option<String> {
        let dash = || "-".to_string();
        Some(match name {
            "with" => show(w),
            "without" => show(wo),
            "ratio" => show(ratio),
            "gain" => ratio.map_or_else(dash, |r| format!("{:+.0}%", (r - 1.0) * 100.0)),
            "seek_1gb" => {
                let model = super::host::model();
                let cylinder = |lbn| model.geometry().locate(lbn).cylinder;
                let distance = cylinder(super::experiments::GB).abs_diff(cylinder(0));
                format!("{:.1}", model.seek_curve().seek_ns(u64::from(distance)) as f64 / 1e6)
            }
            "stride_window_ms" => {
                format!("{}", disk_sched::scheduler::STRIDE_WINDOW_NS / 1_000_000)
            }
            _ => {
                let key = name.strip_prefix("with_vs:")?.to_string();
                match (w, get(Some(&key))) {
                    (Some(w), Some(of)) if of > 0.0 => format!("{:.0}%", w / of * 100.0),
                    _ => dash(),
                }
            }
        })
    };
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else { break };
        let name = &rest[open + 1..open + close];
        match fill(name) {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[open..=open + close]),
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

fn show(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"))
}

/// Experiment `e`'s table and bars over `sources`; whether every bar that could be checked
/// passed.
pub fn experiment(md: &mut String, e: &Experiment, plan: &[Run], sources: &[Source<'_>]) -> bool {
    let _ = writeln!(md, "\n## {}\n", e.title);
    let _ = writeln!(
        md,
        "| configuration | measured on | with | without | with/without | paper | why Tessera differs |\n\
         |---|---|---:|---:|---:|---|---|"
    );
    for row in &e.rows {
        for (i, s) in sources.iter().enumerate() {
            let get = |k: &Option<String>| {
                k.as_ref().and_then(|k| s.runs.get(k)).and_then(|m| value(e.metric, m))
            };
            let (w, wo) = (get(&row.with), get(&row.without));
            if !s.checked && w.is_none() && wo.is_none() {
                continue;
            }
            let ratio = match (w, wo) {
                (Some(w), Some(wo)) if wo > 0.0 => Some(w / wo),
                _ => None,
            };
            let (label, paper, note) = if i == 0 {
                let host = sources.iter().find(|s| s.name == NOTE_SOURCE);
                (row.label.as_str(), row.paper, note(row.note, row, e.metric, host))
            } else {
                ("", "", String::new())
            };
            let _ = writeln!(
                md,
                "| {label} | {} | {} | {} | {} | {paper} | {note} |",
                s.name,
                show(w),
                show(wo),
                show(ratio)
            );
        }
    }
    let _ = writeln!(md, "\n{} ({}). {}", e.metric.unit(), e.key, e.comment);
    let mut ok = true;
    for bar in &e.bars {
        let verdicts: Vec<String> = sources
            .iter()
            .filter(|s| s.checked)
            .map(|s| match check(bar, e, plan, s.runs) {
                Some(v) => {
                    ok &= v.pass;
                    format!("{}: {} ({})", s.name, if v.pass { "pass" } else { "FAIL" }, v.detail)
                }
                None => format!("{}: not measured", s.name),
            })
            .collect();
        let _ = writeln!(md, "- bar: {} — {}", bar.describe(), verdicts.join(" · "));
    }
    ok
}

/// The scheduler-cost table: the driver's own figure per request on each device (instructions
/// under `-icount`: the median over its runs of that policy), and the host's ns per request.
pub fn costs(md: &mut String, plan: &[Run], sources: &[Source<'_>], host: &[HostCost]) {
    let _ = writeln!(md, "\n## h. The scheduler's cost per request\n");
    let devices: Vec<&Source<'_>> =
        sources.iter().filter(|s| !s.name.starts_with("host")).collect();
    let mut head = "| policy | anticipation |".to_string();
    let mut rule = "|---|---|".to_string();
    for d in &devices {
        let _ = write!(head, " {} (instr) |", d.name);
        rule.push_str("---:|");
    }
    let _ = writeln!(md, "{head} host (ns) |\n{rule}---:|");
    for s in Scheduler::ALL {
        for on in [true, false] {
            let host_ns = host
                .iter()
                .find(|h| h.scheduler == s && h.anticipation == on)
                .map(|h| format!("{:.0}", h.per_request_ns));
            let mut cells = Vec::new();
            for d in &devices {
                let mut figures: Vec<u64> = plan
                    .iter()
                    .filter(|r| r.scheduler == s && r.anticipation == on)
                    .filter_map(|r| d.runs.get(&r.key)?.sched.as_ref().map(|c| c.per_request_ns))
                    .collect();
                figures.sort_unstable();
                cells.push(figures.get(figures.len() / 2).map_or("-".into(), |v| v.to_string()));
            }
            if host_ns.is_none() && cells.iter().all(|c| c == "-") {
                continue;
            }
            let mut row = vec![s.name().to_string(), if on { "on" } else { "off" }.to_string()];
            row.extend(cells);
            row.push(host_ns.unwrap_or_else(|| "-".into()));
            let _ = writeln!(md, "| {} |", row.join(" | "));
        }
    }
    let _ = writeln!(
        md,
        "\nQEMU: the driver's own time in scheduler calls per request by its clock, which under \
         `-icount shift=0` counts instructions (median over the runs of that policy). Host: ns \
         per completed request of the same scheduling code (arrive, next, complete) on this \
         machine over {} simulated seconds of two sequential and two random readers, the \
         clock's own cost taken off. For scale, Linux's BFQ documents about 1.9 µs per request \
         on a laptop core (its documentation's figure, not measured here).",
        super::host::COST_NS / 1_000_000_000
    );
}

/// Every run's waits on each source: none may outlive its timeout (the driver's
/// `disk waits:` lines); whether none did.
pub fn waits(md: &mut String, sources: &[Source<'_>]) -> bool {
    let _ = writeln!(md, "\n## Anticipation's waits over every run\n");
    let mut ok = true;
    for s in sources.iter().filter(|s| s.checked) {
        let all: Vec<_> = s.runs.values().filter_map(|m| m.waits).collect();
        let (count, exceeded) = all.iter().fold((0, 0), |(c, x), w| (c + w.count, x + w.exceeded));
        let longest = all.iter().map(|w| w.longest_ns).max().unwrap_or(0);
        let missing = s.runs.len() - all.len();
        ok &= exceeded == 0;
        let _ = writeln!(
            md,
            "- {}: {} — {exceeded} of {count} waits beyond their timeout, the longest {:.1} ms{}",
            s.name,
            if exceeded == 0 { "pass" } else { "FAIL" },
            longest as f64 / 1e6,
            if missing > 0 {
                format!(" ({missing} runs without a `disk waits:` line)")
            } else {
                String::new()
            }
        );
    }
    ok
}

/// The title of the throughput against think time.
pub const THINK_TITLE: &str =
    "Two sequential readers: throughput against think time, with and without anticipation";

/// One point of the throughput against think time: a source's total throughput, with
/// anticipation or without, at one think time.
#[derive(Clone, Debug, PartialEq)]
pub struct ThinkPoint {
    /// The source's name (`riscv64 virtio`, `host sim`).
    pub source: String,
    /// With anticipation.
    pub with: bool,
    /// The readers' think time, ms.
    pub think_ms: f64,
    /// Both readers' bytes over the run, MB/s.
    pub mbps: f64,
}

/// The points of the throughput against think time of experiment `e` on each of `sources`,
/// in drawing order: each source with then without anticipation (without only once: for a
/// source that is not checked the weighing does not matter without), by think time.
pub fn think_points(e: &Experiment, sources: &[Source<'_>]) -> Vec<ThinkPoint> {
    let mut points = Vec::new();
    for s in sources {
        for with in [true, false] {
            if !with && !s.checked {
                continue;
            }
            points.extend(e.rows.iter().filter_map(|r| {
                let k = if with { r.with.as_ref() } else { r.without.as_ref() }?;
                let mbps = value(e.metric, s.runs.get(k)?)?;
                Some(ThinkPoint { source: s.name.clone(), with, think_ms: r.x, mbps })
            }));
        }
    }
    points
}

/// The plot of `points` ([`think_points`]): a line per source and anticipation in the order
/// they first appear, a colour pair per source (with, without), the host's dashed.
pub fn think_svg(title: &str, points: &[ThinkPoint]) -> String {
    let mut sources: Vec<&str> = Vec::new();
    let mut series: Vec<(usize, bool, Series)> = Vec::new();
    for p in points {
        let i = sources.iter().position(|s| *s == p.source).unwrap_or_else(|| {
            sources.push(&p.source);
            sources.len() - 1
        });
        let at = match series.iter().position(|(j, w, _)| *j == i && *w == p.with) {
            Some(at) => at,
            None => {
                series.push((
                    i,
                    p.with,
                    Series {
                        name: format!("{}, {}", p.source, if p.with { "with" } else { "without" }),
                        points: Vec::new(),
                        dashed: p.source.starts_with("host"),
                        color: 2 * i + usize::from(!p.with),
                    },
                ));
                series.len() - 1
            }
        };
        series[at].2.points.push((p.think_ms, p.mbps));
    }
    let series: Vec<Series> = series.into_iter().map(|(_, _, s)| s).collect();
    svg::lines(title, "think time (ms)", "MB/s", &series)
}

/// The throughput against think time of experiment `e`: with and without, for each source
/// (the host's dashed).
pub fn think_plot(e: &Experiment, sources: &[Source<'_>]) -> String {
    think_svg(THINK_TITLE, &think_points(e, sources))
}

/// Each stream's disk time per USD period in `m` (as a share of the period, against time),
/// with its slice dashed; `run` gives the contracts.
pub fn periods_plot(title: &str, run: &Run, m: &Measured) -> String {
    let t0 = m.periods.iter().map(|p| p.start).min().unwrap_or(0);
    let secs = |ns: u64| (ns - t0) as f64 / 1e9;
    let mut series = Vec::new();
    for (i, c) in run.clients.iter().enumerate() {
        let name = client_name(i);
        let mut points = Vec::new();
        let mut list: Vec<_> = m.periods_of(&name).collect();
        list.sort_by_key(|p| p.start);
        for p in &list {
            let share =
                (p.guaranteed + p.extra) as f64 / p.end.saturating_sub(p.start).max(1) as f64;
            points.push((secs(p.start), share * 100.0));
            points.push((secs(p.end), share * 100.0));
        }
        let what = match c.pattern {
            super::experiments::Pattern::Hog { .. } => "hog",
            _ => "sequential stream",
        };
        series.push(Series { name: format!("{name} ({what})"), points, dashed: false, color: i });
        if let (Some(k), Some(first), Some(last)) = (c.contract, list.first(), list.last()) {
            let pct = k.share() * 100.0;
            series.push(Series {
                name: format!("{name} slice"),
                points: vec![(secs(first.start), pct), (secs(last.end), pct)],
                dashed: true,
                color: i,
            });
        }
    }
    svg::lines(title, "time (s)", "disk time per period (%)", &series)
}

#[cfg(test)]
mod tests {
    use super::super::experiments::{Size, plan};
    use super::super::lines::{ClientDone, Period, Waits};
    use super::*;

    fn client(i: usize, bytes: u64) -> ClientDone {
        ClientDone {
            name: client_name(i),
            bytes,
            first_ns: 0,
            last_ns: 1_000_000_000,
            ..Default::default()
        }
    }

    fn measured(bytes: &[u64]) -> Measured {
        Measured {
            clients: bytes.iter().enumerate().map(|(i, &b)| client(i, b)).collect(),
            waits: Some(Waits { count: 3, ..Default::default() }),
            ..Default::default()
        }
    }

    fn experiment_of(key: &str) -> (Vec<Run>, Experiment) {
        let (runs, es) = plan(Size::Quick);
        (runs, es.into_iter().find(|e| e.key == key).unwrap())
    }

    #[test]
    fn the_adversary_bar_takes_the_worst_row() {
        let (plan, e) = experiment_of("d-adversary");
        let mut runs = BTreeMap::new();
        for r in &e.rows {
            runs.insert(r.with.clone().unwrap(), measured(&[10_000_000, 10_000_000]));
            runs.insert(r.without.clone().unwrap(), measured(&[10_000_000, 10_000_000]));
        }
        let bar = &e.bars[0];
        assert!(check(bar, &e, &plan, &runs).unwrap().pass);
        // One row 20% worse with anticipation fails it.
        let k = e.rows[2].with.clone().unwrap();
        runs.insert(k, measured(&[6_000_000, 10_000_000]));
        let v = check(bar, &e, &plan, &runs).unwrap();
        assert!(!v.pass && v.detail == "worst 0.80", "{v:?}");
        // A missing run: not measured.
        runs.remove(e.rows[1].without.as_ref().unwrap());
        assert_eq!(check(bar, &e, &plan, &runs), None);
        assert!(check(&Bar::NoWaitExceeded, &e, &plan, &runs).is_none());
    }

    #[test]
    fn many_readers_are_checked_against_one_and_their_fair_share() {
        let (plan, e) = experiment_of("f-many");
        let mut runs = BTreeMap::new();
        runs.insert("a-alone".to_string(), measured(&[21_000_000]));
        for r in &e.rows {
            let n = plan.iter().find(|p| Some(&p.key) == r.with.as_ref()).unwrap().clients.len();
            runs.insert(r.with.clone().unwrap(), measured(&vec![20_500_000 / n as u64; n]));
        }
        for bar in &e.bars {
            assert!(check(bar, &e, &plan, &runs).unwrap().pass, "{bar:?}");
        }
        // One of eight readers at a third of its share.
        let k = e.rows.last().unwrap().with.clone().unwrap();
        let mut starved = vec![2_600_000; 8];
        starved[7] = 850_000;
        runs.insert(k, measured(&starved));
        let v = check(&e.bars[1], &e, &plan, &runs).unwrap();
        assert!(!v.pass, "{v:?}");
    }

    #[test]
    fn slices_are_checked_only_for_streams_without_extra_time() {
        let (plan, e) = experiment_of("g-isolation");
        let mut runs = BTreeMap::new();
        let period = |stream: &str, used| Period {
            stream: stream.into(),
            start: 0,
            end: 1_000_000_000,
            guaranteed: used,
            extra: 0,
            missed: false,
        };
        for k in ["g-usd-with", "g-usd-without"] {
            let mut m = measured(&[10_000_000, 3_000_000]);
            m.periods = vec![period("r0", 500_000_000), period("r1", 400_000_000)];
            runs.insert(k.to_string(), m);
        }
        assert!(check(&Bar::SlicesKept, &e, &plan, &runs).unwrap().pass);
        runs.get_mut("g-usd-with").unwrap().periods.push(period("r1", 400_000_001));
        let v = check(&Bar::SlicesKept, &e, &plan, &runs).unwrap();
        assert_eq!(v.detail, "1 of 5 periods beyond the slice");
        runs.insert("a-alone".to_string(), measured(&[21_000_000]));
        // 10 MB/s against 0.45 × 21.
        assert!(check(&e.bars[0], &e, &plan, &runs).unwrap().pass);
        let svg = periods_plot(
            "t",
            &plan[plan.iter().position(|r| r.key == "g-usd-with").unwrap()],
            &runs["g-usd-with"],
        );
        assert!(svg.contains("r0 (sequential stream)") && svg.contains("r1 slice"));
    }

    #[test]
    fn the_table_shows_every_source_and_the_paper_once() {
        let (plan, e) = experiment_of("a-sequential");
        let mut runs = BTreeMap::new();
        runs.insert("a-alone".to_string(), measured(&[21_000_000]));
        let empty = BTreeMap::new();
        let sources = [
            Source { name: "riscv64 virtio".into(), runs: &empty, checked: true },
            Source { name: "host sim".into(), runs: &runs, checked: true },
            Source { name: "paper's rule".into(), runs: &empty, checked: false },
        ];
        let mut md = String::new();
        assert!(experiment(&mut md, &e, &plan, &sources));
        assert!(
            md.contains("| one sequential reader alone | riscv64 virtio | - | - | - | ≈21 MB/s |"),
            "{md}"
        );
        assert!(md.contains("|  | host sim | 21.00 | - | - |  |  |"), "{md}");
        assert!(!md.contains("paper's rule"), "a source for comparison shows only its rows");
    }

    /// Every run of `plan`, each figure drawn from `seed`.
    fn fabricated(seed: u64, plan: &[Run]) -> BTreeMap<String, Measured> {
        let mut rng = paging_programs::Prng::new(seed);
        let mut n = |lo: u32, hi: u32| u64::from(lo + rng.below(hi - lo));
        plan.iter()
            .map(|r| {
                let clients = (0..r.clients.len())
                    .map(|i| ClientDone { bytes: n(1_000_000, 90_000_000), ..client(i, 0) })
                    .collect();
                let m = Measured {
                    clients,
                    waits: Some(Waits {
                        count: n(10, 9_000),
                        longest_ns: n(1_000_000, 20_000_000),
                        ..Default::default()
                    }),
                    sched: Some(super::super::lines::SchedCost {
                        per_request_ns: n(1_000, 20_000),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                (r.key.clone(), m)
            })
            .collect()
    }

    /// `md`'s numbers, in order ([`crate::measure::report_numbers`]).
    fn numbers(md: &str) -> Vec<String> {
        crate::measure::report_numbers(md)
    }

    /// The tables, notes and bars of every experiment, the costs and the waits, from `seed`.
    fn render(seed: u64) -> String {
        let (plan, experiments) = plan(Size::Full);
        let device = fabricated(seed, &plan);
        let host = fabricated(seed + 100, &plan);
        let sources = [
            Source { name: "riscv64 virtio".into(), runs: &device, checked: true },
            Source { name: NOTE_SOURCE.into(), runs: &host, checked: true },
        ];
        let mut md = String::new();
        for e in &experiments {
            experiment(&mut md, e, &plan, &sources);
        }
        let host_costs: Vec<HostCost> = Scheduler::ALL
            .iter()
            .enumerate()
            .map(|(i, &scheduler)| HostCost {
                scheduler,
                anticipation: true,
                per_request_ns: (seed * 1000 + i as u64 * 37) as f64,
                requests: 1,
            })
            .collect();
        costs(&mut md, &plan, &sources, &host_costs);
        waits(&mut md, &sources);
        md
    }

    #[test]
    fn every_number_in_the_tables_and_notes_comes_from_the_run_or_is_named() {
        let renders: Vec<String> = (1..=4).map(render).collect();
        let lists: Vec<Vec<String>> = renders.iter().map(|r| numbers(r)).collect();
        assert!(lists.iter().all(|l| l.len() == lists[0].len()), "the renders differ in shape");
        // Numbers that do not change with the measurements must be the configuration's (the
        // experiments' titles, labels, bars, the sources' names), the paper's (its column, and
        // the phrases below that quote it), or the model's and the driver's (computed).
        let (_, experiments) = plan(Size::Full);
        let mut named = String::from(" riscv64 virtio ");
        for e in &experiments {
            named.push_str(&format!(" {} {} ", e.title, e.key));
            for r in &e.rows {
                named.push_str(&format!(" {} {} ", r.label, r.paper));
            }
            for b in &e.bars {
                named.push_str(&format!(" {} ", b.describe()));
            }
        }
        let quoted = [
            "the paper's 9 ms average",
            "the paper idles 6%",
            "the paper's +28% to +30%",
            "(the paper: about 8 ms on its disk)",
            "a window of the paper's 1 s",
            "its 95th percentile",
            "1.9 µs per request on a laptop core (its documentation's figure",
            "1 GB apart",
            "4 GB apart",
            "its 95th percentile plus 1 ms",
            "The paper's B14",
        ];
        for q in quoted {
            assert!(renders[0].contains(q), "the report no longer says `{q}`");
            named.push_str(&format!(" {q} "));
        }
        let model = super::super::host::model();
        let cylinder = |lbn| model.geometry().locate(lbn).cylinder;
        let seek = model
            .seek_curve()
            .seek_ns(u64::from(cylinder(super::super::experiments::GB).abs_diff(cylinder(0))));
        named.push_str(&format!(
            " {:.1} {} {} ",
            seek as f64 / 1e6,
            disk_sched::scheduler::STRIDE_WINDOW_NS / 1_000_000,
            super::super::host::COST_NS / 1_000_000_000
        ));
        let allowed = numbers(&named);
        let fixed: Vec<&String> = (0..lists[0].len())
            .filter(|&i| lists.iter().all(|l| l[i] == lists[0][i]))
            .map(|i| &lists[0][i])
            .filter(|n| !allowed.contains(n))
            .collect();
        assert!(
            fixed.is_empty(),
            "numbers that do not follow the measurements: {fixed:?}\n{}",
            renders[0]
        );
    }

    #[test]
    fn notes_take_their_figures_from_the_host_simulation() {
        let (plan, e) = experiment_of("a-sequential");
        let mut runs = BTreeMap::new();
        runs.insert("a-alone".to_string(), measured(&[20_000_000]));
        runs.insert("a-two-with".to_string(), measured(&[9_900_000, 9_900_000]));
        runs.insert("a-two-without".to_string(), measured(&[3_300_000, 3_300_000]));
        let empty = BTreeMap::new();
        let sources = [
            Source { name: "riscv64 virtio".into(), runs: &empty, checked: true },
            Source { name: NOTE_SOURCE.into(), runs: &runs, checked: true },
        ];
        let mut md = String::new();
        experiment(&mut md, &e, &plan, &sources);
        assert!(
            md.contains("alternation keeps 6.60 MB/s and the gain is 3.00× in the host simulation; with: 99% of one reader"),
            "{md}"
        );
        assert!(!md.contains('{'), "a placeholder left: {md}");
    }
}
