//! `bench/baseline.toml`: the kept figures, and how a run is compared with them.
//!
//! The file has one table per architecture and bench, each with the commit its figures were
//! measured at and one number per figure:
//!
//! ```toml
//! [riscv64.ipc]
//! commit = "51c31e0"
//! null_call = 275.0
//! domain_switch = 1862.0
//! ```
//!
//! Every figure must be known to [`super::figures::lookup`], which gives its unit, which way
//! is better and its tolerance. [`parse`] rejects anything else with the file, line and key.
//! [`compare`] judges a run's table against the baseline's, figure by figure; [`Table::toml`]
//! writes a table back.

use std::ops::Range;

use toml::de::{DeTable, DeValue};

use super::figures::{self, Better, Spec};

/// Where the baseline lives, relative to the repository's root.
pub const PATH: &str = "bench/baseline.toml";

/// One architecture's figures from one bench.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// `riscv64` or `x86_64`.
    pub arch: String,
    /// The bench: `boot`, `ipc`, `sched`, `fault`.
    pub bench: String,
    /// The commit the figures were measured at.
    pub commit: String,
    /// The figures by key, in the order they were measured.
    pub figures: Vec<(String, f64)>,
}

impl Table {
    /// The value of figure `key`, if the table has it.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.figures.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
    }

    /// The table as TOML (a header, the commit, a line per figure).
    pub fn toml(&self) -> String {
        let mut s = format!("[{}.{}]\ncommit = \"{}\"\n", self.arch, self.bench, self.commit);
        for (key, value) in &self.figures {
            s.push_str(&format!("{key} = {}\n", number(*value)));
        }
        s
    }
}

/// `value` as a TOML float, with no more digits than it needs.
fn number(value: f64) -> String {
    let s = format!("{value:?}");
    if s.contains(['.', 'e', 'E', 'i', 'N']) { s } else { format!("{s}.0") }
}

/// The whole baseline.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Baseline {
    /// Its tables, in the file's order.
    pub tables: Vec<Table>,
}

impl Baseline {
    /// The table of `bench` on `arch`, if there is one.
    pub fn table(&self, arch: &str, bench: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.arch == arch && t.bench == bench)
    }

    /// Puts `table` in place of the table of the same architecture and bench, or adds it.
    pub fn replace(&mut self, table: Table) {
        match self.tables.iter_mut().find(|t| t.arch == table.arch && t.bench == table.bench) {
            Some(t) => *t = table,
            None => self.tables.push(table),
        }
    }

    /// The file's text: a header and every table.
    pub fn toml(&self) -> String {
        let mut s = String::from(
            "# Tessera's kept benchmark figures: deterministic ones only (instructions and virtual\n\
             # time under -icount shift=0,sleep=off, shares, deviations, counts). Written by\n\
             # `cargo xtask bench all --update-baseline`, checked by `cargo xtask bench check`.\n\
             # What each figure is, which way is better and its tolerance: tools/benches/src/figures.rs.\n\
             # docs/performance.md is generated from this file.\n",
        );
        for t in &self.tables {
            s.push('\n');
            s.push_str(&t.toml());
        }
        s
    }
}

/// A baseline that could not be read: where, and why. The baseline is TOML like a manifest and
/// reports its errors the same way, `FILE:LINE: KEY: REASON`.
pub type BaselineError = manifest::ManifestError;

/// The architectures a baseline may have tables for.
const ARCHES: [&str; 2] = ["riscv64", "x86_64"];
/// The benches a baseline may have tables for.
const BENCHES: [&str; 10] =
    ["boot", "ipc", "sched", "canary", "fault", "disk_raw", "net", "disk", "paging", "remote"];

/// Whether figures may be kept from a tree whose `git status --porcelain` says `status`: only
/// from a committed tree (a kept table names the commit its figures were measured at, which a
/// change not committed makes a lie); the error names the files changed.
pub fn refuse_dirty(status: &str) -> Result<(), String> {
    let files: Vec<&str> = status.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if files.is_empty() {
        return Ok(());
    }
    Err(format!(
        "--update-baseline keeps figures only from a committed tree; commit or stash first: {}",
        files.join(", ")
    ))
}

/// Whether the kept figures `first` and `again`, two measurements of the same benches, agree
/// exactly, or within the few figures' [`figures::repeat_spread`] (those of deterministic
/// benches must: a figure that moves between boots cannot be checked with a tolerance of its
/// own); the error names each figure that differs.
pub fn agree(first: &[Table], again: &[Table]) -> Result<(), String> {
    let mut differ = Vec::new();
    for t in first {
        let other = again.iter().find(|a| a.arch == t.arch && a.bench == t.bench);
        for (key, value) in &t.figures {
            let v = other.and_then(|o| o.get(key));
            let spread = figures::repeat_spread(&t.bench, key) * value.abs();
            if v.is_none_or(|v| (v - value).abs() > spread) {
                let now = v.map_or("not measured".into(), |v| v.to_string());
                differ.push(format!("{}.{}.{key}: {value} then {now}", t.arch, t.bench));
            }
        }
    }
    if differ.is_empty() {
        return Ok(());
    }
    Err(format!("the figure differs between boots: {}", differ.join("; ")))
}

/// Parses the baseline `text` (named `file` in errors).
pub fn parse(file: &str, text: &str) -> Result<Baseline, BaselineError> {
    let err = |span: Option<Range<usize>>, key: Option<String>, reason: String| {
        BaselineError::at_offset(file, text, span.map(|s| s.start), key, reason)
    };
    let doc = DeTable::parse(text)
        .map_err(|e| err(e.span(), None, format!("TOML syntax error: {}", e.message())))?;
    let mut baseline = Baseline::default();
    for (arch, value) in doc.get_ref() {
        let arch_name = arch.get_ref().to_string();
        if !ARCHES.contains(&arch_name.as_str()) {
            return Err(err(
                Some(arch.span()),
                Some(arch_name),
                format!("not an architecture (one of {})", ARCHES.join(", ")),
            ));
        }
        let DeValue::Table(benches) = value.get_ref() else {
            return Err(err(Some(value.span()), Some(arch_name), "expected a table".into()));
        };
        for (bench, value) in benches {
            let bench_name = bench.get_ref().to_string();
            let path = format!("{arch_name}.{bench_name}");
            if !BENCHES.contains(&bench_name.as_str()) {
                return Err(err(
                    Some(bench.span()),
                    Some(path),
                    format!("not a bench (one of {})", BENCHES.join(", ")),
                ));
            }
            let DeValue::Table(entries) = value.get_ref() else {
                return Err(err(Some(value.span()), Some(path), "expected a table".into()));
            };
            let mut table = Table {
                arch: arch_name.clone(),
                bench: bench_name.clone(),
                commit: String::new(),
                figures: Vec::new(),
            };
            let mut commit = false;
            for (key, value) in entries {
                let key_name = key.get_ref().to_string();
                let path = format!("{path}.{key_name}");
                let at = Some(value.span());
                if key_name == "commit" {
                    match value.get_ref() {
                        DeValue::String(s) => table.commit = s.to_string(),
                        _ => return Err(err(at, Some(path), "expected a string".into())),
                    }
                    commit = true;
                    continue;
                }
                if figures::lookup(&arch_name, &bench_name, &key_name).is_none() {
                    return Err(err(
                        Some(key.span()),
                        Some(path),
                        "no such figure (tools/benches/src/figures.rs lists them)".into(),
                    ));
                }
                let number = match value.get_ref() {
                    DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
                    DeValue::Integer(i) => {
                        i64::from_str_radix(i.as_str(), i.radix()).ok().map(|i| i as f64)
                    }
                    _ => return Err(err(at, Some(path), "expected a number".into())),
                };
                match number {
                    Some(n) if n.is_finite() => table.figures.push((key_name, n)),
                    _ => return Err(err(at, Some(path), "expected a finite number".into())),
                }
            }
            if !commit {
                return Err(err(
                    Some(bench.span()),
                    Some(format!("{arch_name}.{bench_name}.commit")),
                    "missing: the commit the figures were measured at".into(),
                ));
            }
            baseline.tables.push(table);
        }
    }
    Ok(baseline)
}

/// How one figure of a run compares with the baseline.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// No change beyond the figure's tolerance.
    Within,
    /// Worse than the baseline by more than the tolerance: the check fails.
    Worse,
    /// Better than the baseline by more than the tolerance: time to update the baseline.
    Better,
    /// The run measured a figure the baseline lacks: the check fails.
    NotInBaseline,
    /// The baseline has a figure the run did not measure: the check fails.
    NotMeasured,
}

/// One figure's comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The figure's key.
    pub key: String,
    /// What it is.
    pub spec: Spec,
    /// Its value in the baseline.
    pub baseline: Option<f64>,
    /// Its value in the run.
    pub now: Option<f64>,
    /// The judgement.
    pub verdict: Verdict,
}

impl Comparison {
    /// Whether this figure fails the check.
    pub fn fails(&self) -> bool {
        matches!(self.verdict, Verdict::Worse | Verdict::NotInBaseline | Verdict::NotMeasured)
    }

    /// The change from the baseline, in the figure's unit, when both sides have it.
    pub fn change(&self) -> Option<f64> {
        Some(self.now? - self.baseline?)
    }

    /// One line for people: the figure, baseline, value, change and tolerance.
    pub fn describe(&self, arch: &str, bench: &str) -> String {
        let name = format!("{arch}.{bench}.{}", self.key);
        let (label, unit) = (&self.spec.label, self.spec.unit);
        match (self.baseline, self.now) {
            (Some(b), Some(n)) => format!(
                "{name} ({label}): baseline {} {unit}, now {} {unit}, change {}{} {unit}; tolerance {} ({} {unit}), {} is better",
                short(b),
                short(n),
                if n >= b { "+" } else { "" },
                short(n - b),
                self.spec.tolerance,
                short(self.spec.tolerance.amount(b)),
                match self.spec.better {
                    Better::Lower => "lower".to_string(),
                    Better::Higher => "higher".to_string(),
                    Better::Toward(t) => format!("closer to {}", short(t)),
                },
            ),
            (None, Some(n)) => {
                format!("{name} ({label}): measured {} {unit} but not in the baseline", short(n))
            }
            (Some(b), None) => {
                format!("{name} ({label}): in the baseline ({} {unit}) but not measured", short(b))
            }
            (None, None) => format!("{name}: on neither side"),
        }
    }
}

/// `v` with at most three decimals and no trailing zeros.
pub fn short(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// Judges `now` against `base` (the same architecture and bench; `None` if the baseline has no
/// such table), using `lookup` for each figure's spec. Figures come in the baseline's order,
/// then those only the run has. A figure `lookup` does not know is judged `NotInBaseline`
/// with a spec that says so.
pub fn compare(
    base: Option<&Table>,
    now: &Table,
    lookup: impl Fn(&str) -> Option<Spec>,
) -> Vec<Comparison> {
    let mut keys: Vec<&str> =
        base.map(|b| b.figures.iter().map(|(k, _)| k.as_str()).collect()).unwrap_or_default();
    for (k, _) in &now.figures {
        if !keys.contains(&k.as_str()) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .map(|key| {
            let b = base.and_then(|t| t.get(key));
            let n = now.get(key);
            let known = lookup(key);
            let verdict = match (&known, b, n) {
                (Some(spec), Some(b), Some(n)) => judge(spec, b, n),
                (None, _, _) | (_, None, _) => Verdict::NotInBaseline,
                (_, Some(_), None) => Verdict::NotMeasured,
            };
            let spec = known.unwrap_or_else(|| Spec {
                label: "unknown figure".into(),
                unit: "",
                better: Better::Lower,
                tolerance: figures::Tolerance::Absolute(0.0),
                anchor: "",
                goal: "",
            });
            Comparison { key: key.to_string(), spec, baseline: b, now: n, verdict }
        })
        .collect()
}

/// Whether `now` is worse or better than `base` beyond the tolerance of `spec`.
fn judge(spec: &Spec, base: f64, now: f64) -> Verdict {
    let tol = spec.tolerance.amount(base);
    // How much worse `now` is than `base` (negative: better).
    let worse_by = match spec.better {
        Better::Lower => now - base,
        Better::Higher => base - now,
        Better::Toward(t) => (now - t).abs() - (base - t).abs(),
    };
    // A small epsilon keeps values printed equal from being judged apart by float rounding.
    let eps = 1e-9 * base.abs().max(1.0);
    if worse_by > tol + eps {
        Verdict::Worse
    } else if -worse_by > tol + eps {
        Verdict::Better
    } else {
        Verdict::Within
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::Tolerance;

    fn table(figures: &[(&str, f64)]) -> Table {
        Table {
            arch: "riscv64".into(),
            bench: "ipc".into(),
            commit: "abc".into(),
            figures: figures.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
        }
    }

    fn lookup(key: &str) -> Option<Spec> {
        figures::lookup("riscv64", "ipc", key)
    }

    fn verdict(base: f64, now: f64) -> Verdict {
        compare(Some(&table(&[("null_call", base)])), &table(&[("null_call", now)]), lookup)[0]
            .verdict
            .clone()
    }

    #[test]
    fn instruction_counts_within_and_beyond_one_percent() {
        assert_eq!(verdict(1000.0, 1000.0), Verdict::Within);
        assert_eq!(verdict(1000.0, 1010.0), Verdict::Within);
        assert_eq!(verdict(1000.0, 1010.5), Verdict::Worse);
        assert_eq!(verdict(1000.0, 990.0), Verdict::Within);
        assert_eq!(verdict(1000.0, 989.0), Verdict::Better);
        // The done-when case: a baseline that claims 10% less than the truth.
        assert_eq!(verdict(900.0, 1000.0), Verdict::Worse);
    }

    #[test]
    fn worse_fails_better_does_not() {
        let c = compare(
            Some(&table(&[("null_call", 275.0), ("domain_switch", 1862.0)])),
            &table(&[("null_call", 300.0), ("domain_switch", 1000.0)]),
            lookup,
        );
        assert!(c[0].fails());
        assert_eq!(c[1].verdict, Verdict::Better);
        assert!(!c[1].fails());
        let text = c[0].describe("riscv64", "ipc");
        assert!(text.contains("riscv64.ipc.null_call"), "{text}");
        assert!(text.contains("baseline 275"), "{text}");
        assert!(text.contains("now 300"), "{text}");
        assert!(
            text.contains("change +25 instructions; tolerance 1% (2.75 instructions)"),
            "{text}"
        );
    }

    #[test]
    fn higher_and_toward() {
        let rate = |b, n| {
            compare(
                Some(&Table { bench: "fault".into(), ..table(&[("fault_rate", b)]) }),
                &Table { bench: "fault".into(), ..table(&[("fault_rate", n)]) },
                |k| figures::lookup("riscv64", "fault", k),
            )[0]
            .verdict
            .clone()
        };
        assert_eq!(rate(1000.0, 980.0), Verdict::Worse);
        assert_eq!(rate(1000.0, 1020.0), Verdict::Better);
        let ratio = |b, n| {
            let spec = Spec {
                label: "ratio".into(),
                unit: "",
                better: Better::Toward(2.0),
                tolerance: Tolerance::Absolute(0.01),
                anchor: "",
                goal: "",
            };
            judge(&spec, b, n)
        };
        assert_eq!(ratio(2.0, 1.98), Verdict::Worse);
        assert_eq!(ratio(2.0, 2.02), Verdict::Worse);
        assert_eq!(ratio(1.97, 2.03), Verdict::Within);
        assert_eq!(ratio(1.95, 2.0), Verdict::Better);
    }

    #[test]
    fn added_and_removed_figures_fail() {
        let c = compare(
            Some(&table(&[("null_call", 275.0)])),
            &table(&[("domain_switch", 1862.0)]),
            lookup,
        );
        assert_eq!(c[0].verdict, Verdict::NotMeasured);
        assert_eq!(c[1].verdict, Verdict::NotInBaseline);
        assert!(c.iter().all(Comparison::fails));
        let c = compare(None, &table(&[("null_call", 275.0)]), lookup);
        assert_eq!(c[0].verdict, Verdict::NotInBaseline);
    }

    #[test]
    fn an_unknown_figure_fails_even_on_both_sides() {
        let t = table(&[("mystery", 1.0)]);
        let c = compare(Some(&t), &t, lookup);
        assert_eq!(c[0].verdict, Verdict::NotInBaseline);
        assert!(c[0].fails());
    }

    #[test]
    fn round_trip_through_text() {
        let mut b = Baseline::default();
        b.replace(table(&[("null_call", 275.0), ("domain_switch", 1862.25)]));
        let text = b.toml();
        assert_eq!(parse("b.toml", &text).unwrap(), b);
        b.replace(table(&[("null_call", 270.0)]));
        assert_eq!(b.tables.len(), 1);
        assert_eq!(b.table("riscv64", "ipc").unwrap().get("null_call"), Some(270.0));
    }

    fn error(text: &str) -> String {
        parse("bench/baseline.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn malformed_baselines_name_file_line_and_key() {
        assert_eq!(
            error("[riscv64.ipc]\ncommit = \"a\"\nnull_call = \"fast\"\n"),
            "bench/baseline.toml:3: riscv64.ipc.null_call: expected a number"
        );
        assert_eq!(
            error("[riscv64.ipc]\ncommit = \"a\"\n\nnul_call = 3\n"),
            "bench/baseline.toml:4: riscv64.ipc.nul_call: no such figure (tools/benches/src/figures.rs lists them)"
        );
        assert_eq!(
            error("[riscv64.ipc]\nnull_call = 3\n"),
            "bench/baseline.toml:1: riscv64.ipc.commit: missing: the commit the figures were measured at"
        );
        assert_eq!(
            error("[riscv64.ipcs]\ncommit = \"a\"\n"),
            "bench/baseline.toml:1: riscv64.ipcs: not a bench (one of boot, ipc, sched, canary, fault, disk_raw, net, disk, paging, remote)"
        );
        assert_eq!(
            error("[arm.ipc]\ncommit = \"a\"\n"),
            "bench/baseline.toml:1: arm: not an architecture (one of riscv64, x86_64)"
        );
        assert!(error("[riscv64.ipc\n").starts_with("bench/baseline.toml:1: TOML syntax error"));
        assert!(
            error("[riscv64.ipc]\ncommit = \"a\"\nnull_call = 1\nnull_call = 2\n")
                .starts_with("bench/baseline.toml:4: TOML syntax error: duplicate key")
        );
    }

    #[test]
    fn figures_are_kept_only_from_a_committed_tree() {
        assert_eq!(refuse_dirty(""), Ok(()));
        assert_eq!(refuse_dirty("\n"), Ok(()));
        let e = refuse_dirty(" M tools/benches/src/lib.rs\n?? notes.txt\n").unwrap_err();
        assert!(e.contains("committed tree"), "{e}");
        assert!(e.contains("M tools/benches/src/lib.rs, ?? notes.txt"), "{e}");
    }

    #[test]
    fn figures_measured_twice_must_agree() {
        let t = table(&[("a", 1.0), ("b", 2.0)]);
        assert_eq!(agree(std::slice::from_ref(&t), std::slice::from_ref(&t)), Ok(()));
        let moved = table(&[("a", 1.0), ("b", 2.5)]);
        let e = agree(std::slice::from_ref(&t), &[moved]).unwrap_err();
        assert!(e.contains("differs between boots") && e.contains("b: 2 then 2.5"), "{e}");
        let missing = table(&[("a", 1.0)]);
        let e = agree(&[t], &[missing]).unwrap_err();
        assert!(e.contains("b: 2 then not measured"), "{e}");
        // The disk schedulers' instructions may move by half a percent, no more.
        let usd = |v: f64| Table {
            bench: "disk".into(),
            ..table(&[
                ("scheduler_instructions_usd", v),
                ("scheduler_instructions_aged_sptf", 4245.0),
            ])
        };
        assert_eq!(agree(&[usd(4174.0)], &[usd(4171.0)]), Ok(()));
        let e = agree(&[usd(4174.0)], &[usd(4200.0)]).unwrap_err();
        assert!(e.contains("scheduler_instructions_usd: 4174 then 4200"), "{e}");
        let mut sptf = usd(4174.0);
        sptf.figures[1].1 = 4290.0;
        assert!(agree(&[usd(4174.0)], &[sptf]).is_err());
        // Any other figure must repeat exactly.
        let e = agree(&[table(&[("a", 4174.0)])], &[table(&[("a", 4173.0)])]).unwrap_err();
        assert!(e.contains("a: 4174 then 4173"), "{e}");
    }
}
