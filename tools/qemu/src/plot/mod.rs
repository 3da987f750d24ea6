//! Plots as self-contained SVG, written by hand: the output depends only on the input, byte for
//! byte, so plots can be compared and kept next to benchmark results. The per-period plots of
//! CPU and of disk time are one drawing ([`Kind`] holds the words that differ), with each
//! domain's contract if it is given ([`cpu_contract_svg`]); [`lines`] draws lines of points
//! (the benches' curves) and [`histogram`] histograms of latencies on a log scale. They all open
//! the canvas ([`open`]) and close the frame with the axes' labels ([`frame`]) alike.

pub mod histogram;
pub mod lines;

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::cpu::Period;
use crate::records::Account;
use crate::records::DiskPeriod;

/// Canvas size and the plotting area inside it, in SVG user units.
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 790.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 420.0;

/// Line colours, one per series in order (red is kept for missed deadlines).
const COLORS: [&str; 9] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
    "#17becf",
];
const MISSED: &str = "#d62728";
/// The dash of a contract's line: dots.
const CONTRACT_DASH: &str = "1.5 3";

/// What a plot of per-period accounts is of: the words that differ between kinds of records.
#[derive(Debug, PartialEq, Eq)]
pub struct Kind {
    /// The y axis's label.
    pub y_label: &'static str,
    /// The legend's words for the solid lines (guaranteed + extra).
    pub total: &'static str,
    /// The prefix of each series' SVG group id (`<prefix>-<i>`).
    pub id: &'static str,
}

/// Domains' CPU time ([`cpu_svg`]).
pub const CPU: Kind = Kind { y_label: "CPU per period (%)", total: "all CPU", id: "domain" };

/// Disk streams' disk time ([`disk_svg`]).
pub const DISK: Kind =
    Kind { y_label: "disk time per period (%)", total: "all disk time", id: "stream" };

/// Network transmit streams' link time ([`streams_svg`]).
pub const NET: Kind =
    Kind { y_label: "link time per period (%)", total: "all link time", id: "stream" };

/// One owner's line in a plot: its name and its periods, sorted by start.
pub struct Series<'a, A> {
    /// The name in the legend.
    pub name: String,
    /// Its periods (none: in the legend only).
    pub periods: Vec<&'a A>,
    /// Its contract's share of each period (slice / period), drawn as a dotted line.
    pub contract: Option<f64>,
}

/// A domain of [`cpu_contract_svg`]: its name and its contract's share of the CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Domain {
    /// The name in the legend.
    pub name: String,
    /// Its slice / period (none: no line).
    pub contract: Option<f64>,
}

/// Each domain's CPU per period over time: for every period, a step at the share of the period
/// the domain ran (guaranteed + extra, solid) and at its guaranteed share alone (dashed); red
/// dots on periods that missed their deadline. `names[i]` names domain `i` (domains beyond it
/// are called `#i`). The x axis is the kernel's time in ms, from the earliest period start to
/// the latest end; the y axis 0-100% of the period.
pub fn cpu_svg(title: &str, names: &[String], periods: &[Period]) -> String {
    let domains: Vec<Domain> =
        names.iter().map(|n| Domain { name: n.clone(), contract: None }).collect();
    cpu_contract_svg(title, &domains, periods)
}

/// [`cpu_svg`] with each domain's contract (`domains[i]` is domain `i`): a dotted line in its
/// colour at its slice's share of the period, over the time its periods span, to read each
/// period's CPU against.
pub fn cpu_contract_svg(title: &str, domains: &[Domain], periods: &[Period]) -> String {
    let mut by_domain: BTreeMap<usize, Vec<&Period>> = BTreeMap::new();
    for p in periods {
        by_domain.entry(p.domain).or_default().push(p);
    }
    // Every domain named or seen, in index order.
    let count = domains.len().max(by_domain.keys().next_back().map_or(0, |&d| d + 1));
    let series: Vec<Series<Period>> = (0..count)
        .map(|d| Series {
            name: domains.get(d).map_or_else(|| format!("#{d}"), |x| x.name.clone()),
            periods: by_domain.remove(&d).unwrap_or_default(),
            contract: domains.get(d).and_then(|x| x.contract),
        })
        .collect();
    periods_svg(&CPU, title, series)
}

/// Each disk stream's disk time per period over time, drawn as [`cpu_svg`] draws domains' CPU:
/// one series per stream, in order of name.
pub fn disk_svg(title: &str, periods: &[DiskPeriod]) -> String {
    streams_svg(&DISK, title, periods)
}

/// Each stream's time per period (disk time, [`DISK`], or link time, [`NET`]) over time, as
/// [`disk_svg`] draws the disk's.
pub fn streams_svg(kind: &Kind, title: &str, periods: &[DiskPeriod]) -> String {
    let mut by_stream: BTreeMap<&str, Vec<&DiskPeriod>> = BTreeMap::new();
    for p in periods {
        by_stream.entry(&p.stream).or_default().push(p);
    }
    let series = by_stream
        .into_iter()
        .map(|(name, periods)| Series { name: name.to_string(), periods, contract: None })
        .collect();
    periods_svg(kind, title, series)
}

/// The plot of `series` (each owner's periods): series `i` is group `<kind.id>-i` and takes the
/// `i`th colour; see [`cpu_svg`].
fn periods_svg<A: Account>(kind: &Kind, title: &str, mut series: Vec<Series<A>>) -> String {
    for s in &mut series {
        s.periods.sort_by_key(|p| (p.start(), p.end()));
    }
    let all = || series.iter().flat_map(|s| s.periods.iter());
    let t0 = all().map(|p| p.start()).min().unwrap_or(0);
    let t1 = all().map(|p| p.end()).max().unwrap_or(0).max(t0 + 1_000_000);
    let axes = Axes { t0, t1 };

    let mut svg = open(title, RIGHT);
    axes.draw(&mut svg, kind.y_label);

    let mut missed = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let list = &s.periods;
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(svg, r#"<g id="{}-{i}">"#, kind.id);
        let guaranteed = steps(&axes, list, |p| p.guaranteed());
        let _ = writeln!(
            svg,
            r#"<path d="{guaranteed}" fill="none" stroke="{color}" stroke-opacity="0.45" stroke-width="1.5" stroke-dasharray="5 3"/>"#
        );
        let total = steps(&axes, list, |p| p.guaranteed() + p.extra());
        let _ =
            writeln!(svg, r#"<path d="{total}" fill="none" stroke="{color}" stroke-width="1.5"/>"#);
        if let (Some(share), Some(first), Some(last)) = (s.contract, list.first(), list.last()) {
            let y = axes.y(share);
            let _ = writeln!(
                svg,
                r#"<path d="M{:.2},{y:.2}H{:.2}" fill="none" stroke="{color}" stroke-width="1.5" stroke-dasharray="{CONTRACT_DASH}"/>"#,
                axes.x(first.start()),
                axes.x(last.end())
            );
        }
        let _ = writeln!(svg, "</g>");
        missed.extend(list.iter().filter(|p| p.missed()).map(|p| {
            let x = axes.x(p.start() / 2 + p.end() / 2);
            let y = axes.y(p.share(p.guaranteed() + p.extra()));
            format!(r#"<circle cx="{x:.2}" cy="{y:.2}" r="3" fill="{MISSED}"/>"#)
        }));
    }
    if !missed.is_empty() {
        let _ = writeln!(svg, r#"<g id="missed">"#);
        for m in &missed {
            let _ = writeln!(svg, "{m}");
        }
        let _ = writeln!(svg, "</g>");
    }
    if all().next().is_none() {
        let _ = writeln!(
            svg,
            r##"<text x="{:.2}" y="{:.2}" text-anchor="middle" fill="#7f7f7f">no periods</text>"##,
            (LEFT + RIGHT) / 2.0,
            (TOP + BOTTOM) / 2.0
        );
    }

    // The legend, right of the plot.
    let _ = writeln!(svg, r#"<g id="legend">"#);
    let lx = RIGHT + 20.0;
    let mut ly = TOP + 10.0;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            svg,
            r#"<line x1="{lx:.2}" y1="{ly:.2}" x2="{:.2}" y2="{ly:.2}" stroke="{color}" stroke-width="2"/>"#,
            lx + 24.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.2}" y="{:.2}">{}</text>"#,
            lx + 30.0,
            ly + 4.0,
            escape(&s.name)
        );
        ly += 20.0;
    }
    ly += 10.0;
    let _ = writeln!(
        svg,
        r##"<line x1="{lx:.2}" y1="{ly:.2}" x2="{:.2}" y2="{ly:.2}" stroke="#000000" stroke-width="1.5"/>"##,
        lx + 24.0
    );
    let _ =
        writeln!(svg, r#"<text x="{:.2}" y="{:.2}">{}</text>"#, lx + 30.0, ly + 4.0, kind.total);
    ly += 20.0;
    let _ = writeln!(
        svg,
        r##"<line x1="{lx:.2}" y1="{ly:.2}" x2="{:.2}" y2="{ly:.2}" stroke="#000000" stroke-opacity="0.45" stroke-width="1.5" stroke-dasharray="5 3"/>"##,
        lx + 24.0
    );
    let _ = writeln!(svg, r#"<text x="{:.2}" y="{:.2}">guaranteed</text>"#, lx + 30.0, ly + 4.0);
    ly += 20.0;
    if series.iter().any(|s| s.contract.is_some()) {
        let _ = writeln!(
            svg,
            r##"<line x1="{lx:.2}" y1="{ly:.2}" x2="{:.2}" y2="{ly:.2}" stroke="#000000" stroke-width="1.5" stroke-dasharray="{CONTRACT_DASH}"/>"##,
            lx + 24.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.2}" y="{:.2}">contract (slice)</text>"#,
            lx + 30.0,
            ly + 4.0
        );
        ly += 20.0;
    }
    let _ = writeln!(svg, r#"<circle cx="{:.2}" cy="{ly:.2}" r="3" fill="{MISSED}"/>"#, lx + 12.0);
    let _ =
        writeln!(svg, r#"<text x="{:.2}" y="{:.2}">missed deadline</text>"#, lx + 30.0, ly + 4.0);
    let _ = writeln!(svg, "</g>");
    svg.push_str("</svg>\n");
    svg
}

/// A new plot: the `<svg>` element, a white canvas and `title` centred over the plotting area,
/// which ends at `right`.
fn open(title: &str, right: f64) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{:.2}" y="28" text-anchor="middle" font-size="16">{}</text>"#,
        (LEFT + right) / 2.0,
        escape(title)
    );
    svg
}

/// Closes the axes' group (opened by the caller, who drew the grid and ticks in it) with the
/// plotting area's frame (ending at `right`), then labels the axes.
fn frame(svg: &mut String, right: f64, x_label: &str, y_label: &str) {
    let _ = writeln!(
        svg,
        r#"<rect x="{LEFT:.2}" y="{TOP:.2}" width="{:.2}" height="{:.2}" fill="none"/>"#,
        right - LEFT,
        BOTTOM - TOP
    );
    let _ = writeln!(svg, "</g>");
    let _ = writeln!(
        svg,
        r#"<text x="{:.2}" y="{:.2}" text-anchor="middle">{}</text>"#,
        (LEFT + right) / 2.0,
        BOTTOM + 42.0,
        escape(x_label)
    );
    let (cx, cy) = (18.0, (TOP + BOTTOM) / 2.0);
    let _ = writeln!(
        svg,
        r#"<text x="{cx:.2}" y="{cy:.2}" text-anchor="middle" transform="rotate(-90 {cx:.2} {cy:.2})">{}</text>"#,
        escape(y_label)
    );
}

/// Maps kernel time and shares to the plotting area.
struct Axes {
    /// The time at the left and right edges, in ns.
    t0: u64,
    t1: u64,
}

impl Axes {
    fn x(&self, t: u64) -> f64 {
        LEFT + (t.saturating_sub(self.t0)) as f64 / (self.t1 - self.t0) as f64 * (RIGHT - LEFT)
    }

    fn y(&self, share: f64) -> f64 {
        BOTTOM - share.clamp(0.0, 1.0) * (BOTTOM - TOP)
    }

    /// The frame, grid lines, ticks and labels; `y_label` names the y axis.
    fn draw(&self, svg: &mut String, y_label: &str) {
        let _ = writeln!(svg, r##"<g id="axes" stroke="#000000">"##);
        for pct in (0..=100).step_by(20) {
            let y = self.y(pct as f64 / 100.0);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT:.2}" y1="{y:.2}" x2="{RIGHT:.2}" y2="{y:.2}" stroke="#dddddd"/>"##
            );
            let _ = writeln!(
                svg,
                r#"<line x1="{:.2}" y1="{y:.2}" x2="{LEFT:.2}" y2="{y:.2}"/>"#,
                LEFT - 5.0
            );
            let _ = writeln!(
                svg,
                r#"<text x="{:.2}" y="{:.2}" text-anchor="end" stroke="none">{pct}%</text>"#,
                LEFT - 8.0,
                y + 4.0
            );
        }
        let step = tick_step(self.t1 - self.t0);
        let mut t = self.t0.div_ceil(step) * step;
        while t <= self.t1 {
            let x = self.x(t);
            let _ = writeln!(
                svg,
                r#"<line x1="{x:.2}" y1="{BOTTOM:.2}" x2="{x:.2}" y2="{:.2}"/>"#,
                BOTTOM + 5.0
            );
            let _ = writeln!(
                svg,
                r#"<text x="{x:.2}" y="{:.2}" text-anchor="middle" stroke="none">{}</text>"#,
                BOTTOM + 19.0,
                ms_label(t)
            );
            t += step;
        }
        frame(svg, RIGHT, "time since boot (ms)", y_label);
    }
}

/// A step line over `periods` (sorted, of one owner) at `value(p) / length(p)`; periods that
/// do not follow on from the previous one (the owner was blocked or idle) start a new piece,
/// and runs of periods at the same height are one segment.
fn steps<A: Account>(axes: &Axes, periods: &[&A], value: impl Fn(&A) -> u64) -> String {
    let mut d = String::new();
    // The end and height of the segment being drawn, and its right edge (not written yet).
    let mut last: Option<(u64, String, f64)> = None;
    for p in periods {
        let y = format!("{:.2}", axes.y(p.share(value(p))));
        match &last {
            Some((end, last_y, _)) if *end == p.start() && *last_y == y => {}
            Some((end, _, x)) if *end == p.start() => {
                let _ = write!(d, "H{x:.2}V{y}");
            }
            Some((_, _, x)) => {
                let _ = write!(d, "H{x:.2} M{:.2},{y}", axes.x(p.start()));
            }
            None => {
                let _ = write!(d, "M{:.2},{y}", axes.x(p.start()));
            }
        }
        last = Some((p.end(), y, axes.x(p.end())));
    }
    if let Some((_, _, x)) = last {
        let _ = write!(d, "H{x:.2}");
    }
    d
}

/// A round tick spacing (1, 2 or 5 times a power of ten ms) giving 5 to 10 ticks over `span`.
fn tick_step(span: u64) -> u64 {
    let mut step = 1_000u64; // 1 us
    loop {
        for m in [1, 2, 5] {
            if span / (step * m) <= 10 {
                return step * m;
            }
        }
        step *= 10;
    }
}

/// `t` (ns) in ms, with as many decimals as it needs (at most 3).
fn ms_label(t: u64) -> String {
    let s = format!("{}.{:06}", t / 1_000_000, t % 1_000_000);
    let s = s.trim_end_matches('0');
    let s = s.strip_suffix('.').unwrap_or(s);
    s.chars().take(s.find('.').map_or(s.len(), |i| i + 4)).collect()
}

/// `s` with XML's special characters escaped.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period(domain: usize, start_ms: u64, guaranteed_ms: u64, missed: bool) -> Period {
        Period {
            domain,
            start: start_ms * 1_000_000,
            end: (start_ms + 10) * 1_000_000,
            guaranteed: guaranteed_ms * 1_000_000,
            extra: 0,
            missed,
        }
    }

    /// Checks that every tag is closed in order; returns the number of elements.
    fn balanced(svg: &str) -> usize {
        let mut stack = Vec::new();
        let mut elements = 0;
        let mut rest = svg;
        while let Some(open) = rest.find('<') {
            let close = rest[open..].find('>').expect("an unterminated tag") + open;
            let tag = &rest[open + 1..close];
            let name = |t: &str| t.split_whitespace().next().unwrap_or("").to_string();
            if let Some(end) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(end), "mismatched </{end}>");
            } else if tag.ends_with('/') {
                elements += 1;
            } else {
                stack.push(name(tag));
                elements += 1;
            }
            rest = &rest[close + 1..];
        }
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        elements
    }

    #[test]
    fn the_plot_is_well_formed_and_names_every_domain() {
        let names = vec!["one".to_string(), "a<b".to_string(), "idle".to_string()];
        let periods = [period(0, 0, 1, false), period(0, 10, 2, true), period(1, 0, 5, false)];
        let svg = cpu_svg("fixed & co", &names, &periods);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(balanced(&svg) > 20);
        assert!(svg.contains(">one</text>") && svg.contains(">a&lt;b</text>"));
        assert!(svg.contains(">idle</text>"), "a named domain without periods is in the legend");
        assert!(svg.contains("fixed &amp; co"));
        assert_eq!(svg.matches(&format!(r#"fill="{MISSED}""#)).count(), 2, "one marker + legend");
        // An empty plot is still a plot.
        let empty = cpu_svg("nothing", &[], &[]);
        assert!(balanced(&empty) > 10 && empty.contains("no periods"));
        // Deterministic.
        assert_eq!(svg, cpu_svg("fixed & co", &names, &periods));
    }

    #[test]
    fn steps_sit_at_the_share_of_each_period() {
        // 370 units of y for 0-100%, from 420 (0%) up.
        let periods = [
            period(0, 0, 1, false),
            period(0, 10, 5, false),
            period(0, 20, 5, false),
            period(0, 40, 2, false),
        ];
        let svg = cpu_svg("t", &["one".into()], &periods);
        // 10% of 0-10 ms, then 50% of 10-20 and 20-30 ms (one segment), then (after a gap)
        // 20% of 40-50 ms. The x axis spans 0-50 ms: 14.4 units per ms.
        assert!(
            svg.contains(r#"d="M70.00,383.00H214.00V235.00H502.00 M646.00,346.00H790.00""#),
            "{svg}"
        );
        assert!(svg.contains(r#">20</text>"#) && svg.contains(r#">50</text>"#), "ms ticks");
    }

    #[test]
    fn the_disk_plot_has_one_series_per_stream() {
        let disk = |stream: &str, start_ms: u64, guaranteed_ms: u64, extra_ms: u64| DiskPeriod {
            stream: stream.into(),
            start: start_ms * 1_000_000,
            end: (start_ms + 10) * 1_000_000,
            guaranteed: guaranteed_ms * 1_000_000,
            extra: extra_ms * 1_000_000,
            missed: false,
        };
        let mut missed = disk("alpha", 10, 1, 0);
        missed.missed = true;
        let periods = [
            disk("beta", 0, 2, 3),
            disk("alpha", 20, 5, 0),
            missed,
            disk("alpha", 0, 1, 0),
            disk("a&b", 0, 1, 1),
        ];
        let svg = disk_svg("disk time per period: usd.toml", &periods);
        assert!(balanced(&svg) > 20);
        // In order of name: `a&b`, `alpha`, `beta`; each a group of two lines.
        for (i, name) in ["a&amp;b", "alpha", "beta"].iter().enumerate() {
            assert!(svg.contains(&format!(r#"<g id="stream-{i}">"#)), "{svg}");
            assert!(svg.contains(&format!(">{name}</text>")));
        }
        assert_eq!(svg.matches(r#"<g id="stream-"#).count(), 3);
        assert_eq!(svg.matches("<path ").count(), 6);
        assert!(!svg.contains("domain-"));
        assert!(
            svg.contains(">disk time per period (%)</text>") && svg.contains(">all disk time<")
        );
        assert_eq!(svg.matches(&format!(r#"fill="{MISSED}""#)).count(), 2, "one marker + legend");
        // `alpha`'s periods are sorted and stacked: 10%, 10% (one segment), 50%; `beta`'s
        // guaranteed 20% (dashed) under its total 50%. The x axis spans 0-30 ms: 24 per ms.
        assert!(svg.contains(r#"d="M70.00,383.00H550.00V235.00H790.00""#), "{svg}");
        assert!(
            svg.contains(r#"d="M70.00,346.00H310.00""#)
                && svg.contains(r#"d="M70.00,235.00H310.00""#)
        );
        assert!(disk_svg("none", &[]).contains("no periods"));
        assert_eq!(svg, disk_svg("disk time per period: usd.toml", &periods));
    }

    #[test]
    fn contracts_are_dotted_lines_over_each_domains_periods() {
        let periods = [period(0, 0, 1, false), period(0, 10, 2, false), period(1, 10, 5, false)];
        let domains = [
            Domain { name: "one".into(), contract: Some(0.1) },
            Domain { name: "two".into(), contract: None },
        ];
        let svg = cpu_contract_svg("t", &domains, &periods);
        assert!(balanced(&svg) > 20);
        // `one`'s 10% over 0-20 ms (the whole axis): y = 420 - 0.1 * 370; `two` has none.
        assert!(
            svg.contains(r##"<path d="M70.00,383.00H790.00" fill="none" stroke="#1f77b4" stroke-width="1.5" stroke-dasharray="1.5 3"/>"##),
            "{svg}"
        );
        assert_eq!(svg.matches(CONTRACT_DASH).count(), 2, "one line and the legend's");
        assert!(svg.contains(">contract (slice)</text>"));
        // Without contracts the plot is cpu_svg's, and its legend has no contract.
        let names = ["one".to_string(), "two".to_string()];
        let plain = cpu_svg("t", &names, &periods);
        assert!(!plain.contains(CONTRACT_DASH) && !plain.contains("contract"));
        let none: Vec<Domain> =
            names.iter().map(|n| Domain { name: n.clone(), contract: None }).collect();
        assert_eq!(plain, cpu_contract_svg("t", &none, &periods));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(1_000_000_000), 100_000_000);
        assert_eq!(tick_step(50_000_000), 5_000_000);
        assert_eq!(tick_step(1_500_000_000), 200_000_000);
        assert_eq!(ms_label(1_500_000), "1.5");
        assert_eq!(ms_label(200_000_000), "200");
        assert_eq!(ms_label(1_234_567), "1.234");
    }
}
