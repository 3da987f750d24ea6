//! The check every QEMU test of `cargo xtask test` gets on top of its own: a kernel log line
//! at `ERROR` or `WARN` fails the test unless the test's allow-list has a pattern for it.
//!
//! A test that provokes a fault, a termination or a refused request lists the `ERROR`/`WARN`
//! lines this causes; any other such line (a leak report, a failed free, an unexpected trap,
//! a warning of the scheduler) fails the test with the line itself, even when every figure the
//! test checks is right. A pattern matches a whole message and `*` stands for any text, even
//! none: `domain faulty terminated: *` allows one domain's termination whatever the cause, and
//! nothing about another domain.

use crate::log::LogLine;
use crate::qemu::Outcome;

// ANCHOR: expected
/// The `ERROR` and `WARN` lines a test expects, as patterns over the whole message (`*`
/// stands for any text). Empty for a test whose boot should log neither.
pub type Expected = &'static [&'static str];
// ANCHOR_END: expected

/// Is `line` one the kernel logged at `ERROR` or `WARN`?
pub fn is_alert(line: &LogLine) -> bool {
    matches!(line.level.as_str(), "ERROR" | "WARN")
}

/// Does `pattern` match all of `text`, each `*` standing for any run of characters?
pub fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The lines of `log` at `ERROR` or `WARN` that no pattern of `expected` matches.
pub fn unexpected<'a>(log: &'a [LogLine], expected: &[&str]) -> Vec<&'a LogLine> {
    log.iter()
        .filter(|l| is_alert(l))
        .filter(|l| !expected.iter().any(|p| glob(p, &l.message)))
        .collect()
}

/// How many unexpected lines a failure shows.
const SHOWN: usize = 10;

/// Fails, naming `test` and each line, if `log` has an `ERROR` or `WARN` line that `expected`
/// does not allow.
pub fn check_log(test: &str, log: &[LogLine], expected: &[&str]) -> Result<(), String> {
    let bad = unexpected(log, expected);
    if bad.is_empty() {
        return Ok(());
    }
    let mut why = format!(
        "{test}: {} kernel ERROR/WARN line(s) not in the test's allow-list (Expected):",
        bad.len()
    );
    for l in bad.iter().take(SHOWN) {
        why.push_str(&format!("\n{l}"));
    }
    if bad.len() > SHOWN {
        why.push_str(&format!("\n... and {} more", bad.len() - SHOWN));
    }
    Err(why)
}

/// A test's verdict: its own check's, and the allow-list's over every boot it made (both
/// failures are reported when both fail).
pub fn verdict(
    test: &str,
    own: Result<(), String>,
    boots: &[(&Outcome, Expected)],
) -> Result<(), String> {
    let mut why: Vec<String> = own.err().into_iter().collect();
    for (out, expected) in boots {
        if let Err(e) = check_log(test, &out.log, expected) {
            why.push(e);
        }
    }
    if why.is_empty() { Ok(()) } else { Err(why.join("\n")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(level: &str, message: &str) -> LogLine {
        LogLine { level: level.into(), timestamp: Some("1.000000".into()), message: message.into() }
    }

    #[test]
    fn globs_match_whole_messages() {
        assert!(glob("domain faulty terminated: *", "domain faulty terminated: store page fault"));
        assert!(glob("domain faulty terminated: *", "domain faulty terminated: "));
        assert!(!glob("domain faulty terminated: *", "domain other terminated: x"));
        assert!(!glob("terminated", "domain faulty terminated"));
        assert!(glob("exact", "exact"));
        assert!(!glob("exact", "exact and more"));
        assert!(glob("a*b*c", "a-b-b-c"));
        assert!(!glob("a*b*c", "a-c-b"));
        assert!(glob("*", "anything"));
        // The two ends may not overlap.
        assert!(!glob("ab*ba", "aba"));
        assert!(glob("  #* ret=0x*", "  #3 ret=0x80201234 <kernel::main+0x4>"));
    }

    #[test]
    fn only_error_and_warn_lines_outside_the_list_fail() {
        let log = vec![
            line("INFO", "domain faulty terminated: nothing wrong at INFO"),
            line("ERROR", "domain faulty terminated: store page fault"),
            line("WARN", "every domain is blocked without a deadline: waking them all"),
            line("TEXT", "ERROR from the firmware"),
        ];
        let expected: Expected = &["domain faulty terminated: *"];
        let bad = unexpected(&log, expected);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].message, "every domain is blocked without a deadline: waking them all");
        assert!(check_log("t", &log[..2], expected).is_ok());
        assert!(check_log("t", &log[..2], &[]).is_err());
    }

    #[test]
    fn a_failure_names_the_test_and_the_line() {
        let log = vec![line("ERROR", "domain a: 3 frames still charged after death")];
        let why = check_log("qemu::riscv64::x", &log, &[]).unwrap_err();
        assert!(why.starts_with("qemu::riscv64::x: 1 kernel ERROR/WARN line(s)"), "{why}");
        assert!(why.contains("ERROR domain a: 3 frames still charged after death"), "{why}");
        let many: Vec<_> = (0..15).map(|i| line("WARN", &format!("w{i}"))).collect();
        let why = check_log("t", &many, &[]).unwrap_err();
        assert!(why.contains("w9") && !why.contains("w10") && why.ends_with("... and 5 more"));
    }

    #[test]
    fn the_verdict_reports_both_failures() {
        let out = Outcome {
            ending: crate::qemu::Ending::Kernel(0),
            log: vec![line("ERROR", "surprise")],
            stderr: String::new(),
            wall: std::time::Duration::ZERO,
        };
        assert!(verdict("t", Ok(()), &[(&out, &["surprise"])]).is_ok());
        let why = verdict("t", Err("figure wrong".into()), &[(&out, &[])]).unwrap_err();
        assert!(why.contains("figure wrong") && why.contains("surprise"), "{why}");
    }
}
