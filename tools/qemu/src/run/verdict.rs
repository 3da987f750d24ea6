//! What `cargo xtask run` makes of a finished boot beyond the kernel's exit code: which domains
//! failed (exited with a non-zero status or were terminated) and whether the host stalled the
//! guest, both read from the kernel's run summary.
//!
//! The exit status of `cargo xtask run` is the kernel's (0 success, 1 a kernel test failed,
//! 2 panic or unexpected trap, 3 QEMU ended without a kernel exit code), and
//! [`DOMAIN_FAILED`] when the kernel succeeded but a domain failed whose manifest entry does
//! not say `expect_failure = true` (unless `--allow-failures`); [`TIMED_OUT`] when the run
//! outlived its `--timeout`, and 130 when it was stopped with Ctrl-C.

use manifest::Manifest;

use crate::log::LogLine;

/// The exit status of `cargo xtask run` when a domain failed that was not expected to.
pub const DOMAIN_FAILED: u8 = 4;

/// The exit status of `cargo xtask run` when the run had not ended by its `--timeout` and
/// QEMU was stopped.
pub const TIMED_OUT: u8 = 5;

/// How a domain ended, from the run summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DomainEnding {
    /// `NAME: exited with status N`.
    Exited(i32),
    /// `NAME: terminated (WHY)`.
    Terminated(String),
    /// `NAME: still running` (the run was stopped).
    Running,
}

/// Each domain's ending, from the `run summary:` lines of `log`.
pub fn endings(log: &[LogLine]) -> Vec<(String, DomainEnding)> {
    let Some(start) = log.iter().position(|l| l.message.starts_with("run summary: ")) else {
        return Vec::new();
    };
    log[start + 1..]
        .iter()
        .filter_map(|l| {
            let text = l.message.strip_prefix("  ")?;
            let (name, rest) = text.split_once(": ")?;
            let ending = if let Some(code) = rest.strip_prefix("exited with status ") {
                DomainEnding::Exited(code.trim().parse().ok()?)
            } else if let Some(why) = rest.strip_prefix("terminated (") {
                DomainEnding::Terminated(why.strip_suffix(')').unwrap_or(why).to_string())
            } else if rest == "still running" {
                DomainEnding::Running
            } else {
                return None;
            };
            Some((name.to_string(), ending))
        })
        .collect()
}

/// The domains that failed and were not expected to, each with how it ended.
pub fn unexpected_failures(log: &[LogLine], manifest: Option<&Manifest>) -> Vec<String> {
    let expected = |name: &str| {
        manifest.is_some_and(|m| m.domains.iter().any(|d| d.name == name && d.expect_failure))
    };
    endings(log)
        .into_iter()
        .filter_map(|(name, ending)| {
            let how = match ending {
                DomainEnding::Exited(0) | DomainEnding::Running => return None,
                DomainEnding::Exited(code) => format!("exited with status {code}"),
                DomainEnding::Terminated(why) => format!("terminated ({why})"),
            };
            (!expected(&name)).then(|| format!("{name} {how}"))
        })
        .collect()
}

/// Domains whose period ends the kernel saw late by more than their slice, with how many,
/// from the summary's `NAME: cpu ..., N periods ended late (...)` accounts. Under `-icount`
/// none are; on the host's clock they mean the host stalled the guest.
pub fn late_periods(log: &[LogLine]) -> Vec<(String, u64)> {
    log.iter()
        .filter_map(|l| {
            let (name, rest) = l.message.trim_start().split_once(": cpu ")?;
            let (before, _) = rest.split_once(" periods ended late")?;
            let n: u64 = before.rsplit(' ').next()?.parse().ok()?;
            (n > 0).then(|| (name.to_string(), n))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(message: &str) -> LogLine {
        LogLine { level: "INFO".into(), timestamp: None, message: message.into() }
    }

    fn summary() -> Vec<LogLine> {
        [
            "domain a exited with status 0",
            "run summary: 4 domain(s)",
            "  a: exited with status 0",
            "  faulty: terminated (store page fault)",
            "  bad: exited with status 1",
            "  busy: still running",
            "  a: cpu 250124 us guaranteed + 0 us extra, 50 periods of 10000 us, 0 deadlines missed, 0 periods ended late (contract: slice 5000 us, extra false)",
            "  busy: cpu 250124 us guaranteed + 0 us extra, 50 periods of 10000 us, 3 deadlines missed, 7 periods ended late (contract: slice 5000 us, extra false)",
        ]
        .iter()
        .map(|m| line(m))
        .collect()
    }

    #[test]
    fn endings_come_from_the_summary() {
        let e = endings(&summary());
        assert_eq!(e.len(), 4);
        assert_eq!(e[1], ("faulty".into(), DomainEnding::Terminated("store page fault".into())));
        assert_eq!(e[2], ("bad".into(), DomainEnding::Exited(1)));
        assert_eq!(e[3], ("busy".into(), DomainEnding::Running));
    }

    #[test]
    fn failures_name_the_domain_unless_expected() {
        assert_eq!(
            unexpected_failures(&summary(), None),
            ["faulty terminated (store page fault)", "bad exited with status 1"]
        );
        let text = "[system]\nmemory = \"64M\"\n\
                    [[domain]]\nname = \"faulty\"\napp = \"faulty\"\nexpect_failure = true\n\
                    memory = { guaranteed = \"256K\" }\n\
                    [[domain]]\nname = \"bad\"\napp = \"hello\"\nmemory = { guaranteed = \"256K\" }\n";
        let m = manifest::parse("t.toml", text, &["faulty", "hello"]).unwrap();
        assert_eq!(unexpected_failures(&summary(), Some(&m)), ["bad exited with status 1"]);
        assert!(unexpected_failures(&[line("no summary")], None).is_empty());
    }

    #[test]
    fn late_period_ends_are_read_per_domain() {
        assert_eq!(late_periods(&summary()), [("busy".to_string(), 7)]);
    }
}
