//! Lines of (x, y) points on linear axes from zero, solid or dashed, with a legend: the curves
//! of the benches (`bench disk`'s throughput against think time, its streams' disk time per
//! period). The canvas, frame and colours are the [module](super)'s.

use std::fmt::Write;

use super::{BOTTOM, COLORS, LEFT, TOP, escape, frame, open};

/// The plotting area's right edge: the legend is wider than the period plots'.
const RIGHT: f64 = 760.0;

/// One line of a plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Its name in the legend.
    pub name: String,
    /// Its points, in drawing order.
    pub points: Vec<(f64, f64)>,
    /// Dashed (the host simulation's figures; a contract's slice).
    pub dashed: bool,
    /// Its colour's index (series of one thing share a colour).
    pub color: usize,
}

/// A round step (1, 2 or 5 times a power of ten) giving at most 8 ticks up to `max`.
pub(super) fn tick_step(max: f64) -> f64 {
    let mut step = 10f64.powf((max.max(1e-9) / 8.0).log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if max / (step * m) <= 8.0 {
            step *= m;
            break;
        }
    }
    step
}

/// A number for a tick label: no more decimals than it needs.
pub(super) fn label(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0');
    s.strip_suffix('.').unwrap_or(s).to_string()
}

/// The plot of `series` against axes from 0 to their largest x and y.
pub fn lines(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let all = series.iter().flat_map(|s| s.points.iter());
    let x_max = all.clone().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
    let y_top = all.map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.1;
    let (xs, ys) = (tick_step(x_max), tick_step(y_top));
    let (x_max, y_max) = ((x_max / xs).ceil() * xs, (y_top / ys).ceil() * ys);
    let x = |v: f64| LEFT + v / x_max * (RIGHT - LEFT);
    let y = |v: f64| BOTTOM - v / y_max * (BOTTOM - TOP);
    let mut svg = open(title, RIGHT);
    let _ = writeln!(svg, r##"<g id="axes" stroke="#000000">"##);
    let mut v = 0.0;
    while v <= y_max + ys / 2.0 {
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT:.2}" y1="{0:.2}" x2="{RIGHT:.2}" y2="{0:.2}" stroke="#dddddd"/>"##,
            y(v)
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.2}" y="{:.2}" text-anchor="end" stroke="none">{}</text>"#,
            LEFT - 8.0,
            y(v) + 4.0,
            label(v)
        );
        v += ys;
    }
    let mut v = 0.0;
    while v <= x_max + xs / 2.0 {
        let _ = writeln!(
            svg,
            r#"<line x1="{0:.2}" y1="{BOTTOM:.2}" x2="{0:.2}" y2="{1:.2}"/>"#,
            x(v),
            BOTTOM + 5.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.2}" y="{:.2}" text-anchor="middle" stroke="none">{}</text>"#,
            x(v),
            BOTTOM + 19.0,
            label(v)
        );
        v += xs;
    }
    frame(&mut svg, RIGHT, x_label, y_label);
    let (lx, mut ly) = (RIGHT + 20.0, TOP + 10.0);
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[s.color % COLORS.len()];
        let dash = if s.dashed { r#" stroke-dasharray="6 4""# } else { "" };
        let d: Vec<String> = s
            .points
            .iter()
            .enumerate()
            .map(|(j, p)| format!("{}{:.2},{:.2}", if j == 0 { "M" } else { "L" }, x(p.0), y(p.1)))
            .collect();
        let _ = writeln!(svg, r#"<g id="series-{i}">"#);
        if !d.is_empty() {
            let _ = writeln!(
                svg,
                r#"<path d="{}" fill="none" stroke="{color}" stroke-width="1.8"{dash}/>"#,
                d.join(" ")
            );
        }
        if s.points.len() <= 20 {
            for p in &s.points {
                let _ = writeln!(
                    svg,
                    r#"<circle cx="{:.2}" cy="{:.2}" r="2.5" fill="{color}"/>"#,
                    x(p.0),
                    y(p.1)
                );
            }
        }
        let _ = writeln!(
            svg,
            r#"<line x1="{lx:.2}" y1="{ly:.2}" x2="{:.2}" y2="{ly:.2}" stroke="{color}" stroke-width="2"{dash}/>"#,
            lx + 24.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.2}" y="{:.2}">{}</text>"#,
            lx + 30.0,
            ly + 4.0,
            escape(&s.name)
        );
        let _ = writeln!(svg, "</g>");
        ly += 20.0;
    }
    if series.iter().all(|s| s.points.is_empty()) {
        let _ = writeln!(
            svg,
            r##"<text x="{:.2}" y="{:.2}" text-anchor="middle" fill="#7f7f7f">no data</text>"##,
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
    fn the_plot_is_well_formed_and_deterministic() {
        let s = vec![
            Series {
                name: "with".into(),
                points: vec![(0.0, 20.0), (15.0, 4.7)],
                dashed: false,
                color: 0,
            },
            Series {
                name: "a<b".into(),
                points: vec![(0.0, 6.6), (15.0, 4.7)],
                dashed: true,
                color: 1,
            },
        ];
        let svg = lines("t & u", "think (ms)", "MB/s", &s);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<g").count(), svg.matches("</g>").count());
        assert!(svg.contains("t &amp; u") && svg.contains(">a&lt;b</text>"));
        assert!(svg.contains("stroke-dasharray"));
        // 0..16 on x (ticks of 2), 0..25 on y (ticks of 5): the first point at the left, 80%
        // of the way up.
        assert!(svg.contains(r#"d="M70.00,124.00 L"#), "{svg}");
        assert_eq!(svg, lines("t & u", "think (ms)", "MB/s", &s));
        assert!(lines("empty", "x", "y", &[]).contains("no data"));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(15.0), 2.0);
        assert_eq!(tick_step(22.0), 5.0);
        assert_eq!(tick_step(1.1), 0.2);
        assert_eq!(label(0.2), "0.2");
        assert_eq!(label(10.0), "10");
    }
}
