//! Histograms of latencies in virtual time on a log-scale axis: bins a quarter of a decade
//! wide from 1 µs (1, 1.78, 3.16, 5.62, 10, ... µs), each series (a kind of page fault, say)
//! drawn as the outline of its bars, its height the share of the series' samples in the bin.
//! The series are shown as shares so that a run of 2,000 faults and one of 200 sit on one
//! axis; the legend gives each series' count. The canvas, frame and colours are the
//! [module](super)'s.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::lines::{label, tick_step};
use super::{BOTTOM, COLORS, LEFT, TOP, escape, frame, open};

/// The plotting area's right edge: room for long names in the legend.
const RIGHT: f64 = 700.0;

/// Bins in a decade.
pub const PER_DECADE: usize = 4;

/// The bins' lower edges within a decade, in ns from 1 µs: 10^(k/4) µs, rounded.
const STEPS: [u64; PER_DECADE] = [1000, 1778, 3162, 5623];

/// The last bin (from 5.6 s up): every longer latency falls into it.
pub const LAST_BIN: usize = 7 * PER_DECADE - 1;

/// The lower edge of bin `k` in ns (bin 0 from 1 µs, each next a quarter decade higher).
pub fn edge(k: usize) -> u64 {
    let k = k.min(LAST_BIN + 1);
    10u64.pow((k / PER_DECADE) as u32) * STEPS[k % PER_DECADE]
}

/// The bin of a latency of `ns`: the last whose lower edge is at most `ns` (bin 0 holds every
/// latency under 1.78 µs, [`LAST_BIN`] every one from 5.6 s).
pub fn bin(ns: u64) -> usize {
    (1..=LAST_BIN).take_while(|&k| edge(k) <= ns).last().unwrap_or(0)
}

/// How many of `samples` (ns) fall into each bin, by bin; empty bins are left out.
pub fn counts(samples: impl IntoIterator<Item = u64>) -> BTreeMap<usize, u64> {
    let mut counts = BTreeMap::new();
    for ns in samples {
        *counts.entry(bin(ns)).or_insert(0) += 1;
    }
    counts
}

/// `ns` as a label: `1 µs`, `10 ms`, `1 s`.
fn time_label(ns: u64) -> String {
    match ns {
        n if n >= 1_000_000_000 => format!("{} s", n / 1_000_000_000),
        n if n >= 1_000_000 => format!("{} ms", n / 1_000_000),
        n => format!("{} µs", n / 1_000),
    }
}

/// One series of a histogram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    /// Its name in the legend.
    pub name: String,
    /// Its samples in each bin, by bin ([`counts`]).
    pub counts: BTreeMap<usize, u64>,
}

impl Series {
    fn total(&self) -> u64 {
        self.counts.values().sum()
    }
}

/// The histogram of `series`: the x axis whole decades of latency around every non-empty bin,
/// the y axis the share of each series' samples in a bin (%); `x_label` names what the
/// latency is of.
pub fn histogram(title: &str, x_label: &str, series: &[Series]) -> String {
    let bins = || series.iter().flat_map(|s| s.counts.iter().filter(|c| *c.1 > 0).map(|c| *c.0));
    let first = bins().min().unwrap_or(0) / PER_DECADE * PER_DECADE;
    let last = (bins().max().unwrap_or(0) / PER_DECADE + 1) * PER_DECADE;
    let share = |s: &Series, n: u64| n as f64 * 100.0 / s.total().max(1) as f64;
    let top = series
        .iter()
        .flat_map(|s| s.counts.values().map(move |&n| share(s, n)))
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;
    let step = tick_step(top);
    let y_max = (top / step).ceil() * step;
    let x = |k: usize| LEFT + (k - first) as f64 / (last - first) as f64 * (RIGHT - LEFT);
    let y = |v: f64| BOTTOM - v / y_max * (BOTTOM - TOP);

    let mut svg = open(title, RIGHT);
    let _ = writeln!(svg, r##"<g id="axes" stroke="#000000">"##);
    let mut v = 0.0;
    while v <= y_max + step / 2.0 {
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT:.2}" y1="{0:.2}" x2="{RIGHT:.2}" y2="{0:.2}" stroke="#dddddd"/>"##,
            y(v)
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.2}" y="{:.2}" text-anchor="end" stroke="none">{}%</text>"#,
            LEFT - 8.0,
            y(v) + 4.0,
            label(v)
        );
        v += step;
    }
    for k in first..=last {
        let long = k % PER_DECADE == 0;
        let _ = writeln!(
            svg,
            r#"<line x1="{0:.2}" y1="{BOTTOM:.2}" x2="{0:.2}" y2="{1:.2}"/>"#,
            x(k),
            BOTTOM + if long { 5.0 } else { 3.0 }
        );
        if long {
            let _ = writeln!(
                svg,
                r#"<text x="{:.2}" y="{:.2}" text-anchor="middle" stroke="none">{}</text>"#,
                x(k),
                BOTTOM + 19.0,
                time_label(edge(k))
            );
        }
    }
    frame(&mut svg, RIGHT, x_label, "share of the series' samples (%)");

    let (lx, mut ly) = (RIGHT + 20.0, TOP + 10.0);
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        // The outline of the bars, from the axis at the first bin to the axis after the last;
        // empty bins between are drawn at zero.
        let mut d = String::new();
        let used: Vec<usize> = s.counts.iter().filter(|c| *c.1 > 0).map(|c| *c.0).collect();
        if let (Some(&lo), Some(&hi)) = (used.first(), used.last()) {
            let _ = write!(d, "M{:.2},{:.2}", x(lo), y(0.0));
            for k in lo..=hi {
                let h = y(share(s, s.counts.get(&k).copied().unwrap_or(0)));
                let _ = write!(d, "V{h:.2}H{:.2}", x(k + 1));
            }
            let _ = write!(d, "V{:.2}Z", y(0.0));
        }
        let _ = writeln!(svg, r#"<g id="series-{i}">"#);
        if !d.is_empty() {
            let _ = writeln!(
                svg,
                r#"<path d="{d}" fill="{color}" fill-opacity="0.15" stroke="{color}" stroke-width="1.8"/>"#
            );
        }
        let _ = writeln!(
            svg,
            r#"<rect x="{lx:.2}" y="{:.2}" width="24" height="10" fill="{color}" fill-opacity="0.15" stroke="{color}" stroke-width="1.8"/>"#,
            ly - 5.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.2}" y="{:.2}">{}</text>"#,
            lx + 30.0,
            ly + 4.0,
            escape(&s.name)
        );
        let _ = writeln!(
            svg,
            r##"<text x="{:.2}" y="{:.2}" fill="#555555">{} samples</text>"##,
            lx + 30.0,
            ly + 18.0,
            s.total()
        );
        let _ = writeln!(svg, "</g>");
        ly += 36.0;
    }
    if series.iter().all(|s| s.total() == 0) {
        let _ = writeln!(
            svg,
            r##"<text x="{:.2}" y="{:.2}" text-anchor="middle" fill="#7f7f7f">no samples</text>"##,
            (LEFT + RIGHT) / 2.0,
            (TOP + BOTTOM) / 2.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_are_quarter_decades_from_one_microsecond() {
        assert_eq!([edge(0), edge(1), edge(2), edge(3), edge(4)], [1000, 1778, 3162, 5623, 10_000]);
        assert_eq!([edge(12), edge(24)], [1_000_000, 1_000_000_000]);
        assert_eq!(bin(0), 0, "under 1 µs: the first bin");
        assert_eq!(bin(1_777), 0);
        assert_eq!(bin(1_778), 1);
        assert_eq!(bin(9_999), 3);
        assert_eq!(bin(10_000), 4);
        assert_eq!(bin(25_000), 5, "25 µs is between 17.8 and 31.6 µs");
        assert_eq!(bin(3_000_000), 13, "3 ms: 1.78-3.16 ms");
        assert_eq!(bin(u64::MAX), LAST_BIN, "every long latency in the last bin");
        let c = counts([1_500, 2_000, 2_500, 12_000, 20_000_000]);
        assert_eq!(c, BTreeMap::from([(0, 1), (1, 2), (4, 1), (17, 1)]));
        assert_eq!(time_label(edge(8)), "100 µs");
        assert_eq!(time_label(edge(12)), "1 ms");
        assert_eq!(time_label(edge(24)), "1 s");
    }

    #[test]
    fn the_plot_is_well_formed_deterministic_and_spans_whole_decades() {
        let s = vec![
            Series { name: "zero".into(), counts: counts([1_500, 1_600, 2_000, 2_100]) },
            Series { name: "a<b".into(), counts: counts([20_000, 60_000]) },
        ];
        let svg = histogram("t & u", "fault latency", &s);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<g").count(), svg.matches("</g>").count());
        assert!(svg.contains("t &amp; u") && svg.contains(">a&lt;b</text>"));
        assert!(svg.contains(">4 samples</text>") && svg.contains(">2 samples</text>"));
        // Bins 0 to 6 used: the axis runs over the decades 1-10 and 10-100 µs (8 bins, 78.75
        // units each), labelled at 1, 10 and 100 µs.
        for l in ["1 µs", "10 µs", "100 µs"] {
            assert!(svg.contains(&format!(">{l}</text>")), "{svg}");
        }
        assert!(!svg.contains(">1 ms</text>"));
        // `zero`: half its samples in bin 0 and half in bin 1, 50% each: the top of the axis
        // is 60% (55% rounded up to ticks of 10), so 50% sits at 420 - 370 * 5 / 6.
        assert!(svg.contains(r#"d="M70.00,420.00V111.67H148.75V111.67H227.50V420.00Z""#), "{svg}");
        // `a<b`: bin 5 (17.8-31.6 µs), an empty bin 6 at zero, bin 7 (56.2-100 µs).
        assert!(
            svg.contains(r#"d="M463.75,420.00V111.67H542.50V420.00H621.25V111.67H700.00V420.00Z""#)
        );
        assert_eq!(svg, histogram("t & u", "fault latency", &s));
        assert!(histogram("none", "x", &[]).contains("no samples"));
    }
}
