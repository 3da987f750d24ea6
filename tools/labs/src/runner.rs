//! Running a lab's tests: host tests grouped into one `cargo test -p PACKAGE` per package
//! (libtest's output read test by test; a build that fails fails every test of the package
//! with the compiler's first errors), QEMU tests through `cargo xtask test NAME --arch ARCH`
//! (its `test NAME ... ok|FAILED` line and the failure's text), each run killed when its
//! tests' time is up.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::journal;
use crate::running;
use crate::spec::{Run, Test};

/// How a test ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It passed.
    Passed,
    /// It failed; why, as its output says.
    Failed(String),
    /// Its package did not build; the compiler's first errors.
    BuildFailed(String),
}

/// A test's verdict and how long its run took (shared by the tests of one run).
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The verdict.
    pub verdict: Verdict,
    /// The run's wall-clock time.
    pub seconds: f64,
}

/// What runs a lab's tests: the real one runs cargo; tests of the grader give their own.
pub trait Runner {
    /// The outcome of each of `tests`, in order, for architecture `arch`.
    fn run(&mut self, root: &Path, tests: &[&Test], arch: &str) -> Vec<Outcome>;
}

/// Runs tests with cargo in the tree.
pub struct Cargo;

impl Runner for Cargo {
    fn run(&mut self, root: &Path, tests: &[&Test], arch: &str) -> Vec<Outcome> {
        let mut outcomes: Vec<Option<Outcome>> = vec![None; tests.len()];
        // Host tests, a run per package, in the order they first appear.
        let mut packages: Vec<&str> = Vec::new();
        for t in tests {
            if let Run::Host { package, .. } = &t.run
                && !packages.contains(&package.as_str())
            {
                packages.push(package);
            }
        }
        for package in packages {
            let group: Vec<usize> = (0..tests.len())
                .filter(|&i| matches!(&tests[i].run, Run::Host { package: p, .. } if p == package))
                .collect();
            let names: Vec<&str> = group
                .iter()
                .map(|&i| match &tests[i].run {
                    Run::Host { test, .. } => test.as_str(),
                    Run::Qemu { .. } => unreachable!(),
                })
                .collect();
            let limit = group.iter().map(|&i| tests[i].timeout_s).sum();
            let mut cmd = cargo(root);
            cmd.args(["test", "-p", package, "--", "--exact", "--test-threads", "1"]).args(&names);
            let ran = run_bounded(cmd, Duration::from_secs(limit));
            for (&i, name) in group.iter().zip(&names) {
                outcomes[i] = Some(host_verdict(&ran, name, limit));
            }
        }
        for (i, t) in tests.iter().enumerate() {
            if let Run::Qemu { .. } = &t.run {
                let full = t.run.full_name(arch);
                let mut cmd = xtask(root);
                cmd.args(["test", &full, "--arch", arch]);
                let ran = run_bounded(cmd, Duration::from_secs(t.timeout_s));
                outcomes[i] = Some(suite_verdict(&ran, &full, t.timeout_s));
            }
        }
        outcomes.into_iter().map(|o| o.expect("every test has run")).collect()
    }
}

/// `cargo` in the tree at `root`, for commands that must leave the grader's overlay alone.
fn cargo(root: &Path) -> Command {
    let mut cmd = tool_base::util::cargo();
    // A failed assertion's message is what the student reads, not a backtrace.
    cmd.current_dir(root)
        .env(journal::OWNER_ENV, std::process::id().to_string())
        .env("RUST_BACKTRACE", "0");
    cmd
}

/// This very xtask binary, in the tree at `root`, for the QEMU tests. Not `cargo xtask`: a
/// hand-out or a submission changes crates that xtask links, and cargo would rebuild xtask and
/// replace the binary under the running `cargo xtask test` that checks the labs, whose later
/// tests start it again. The QEMU tests' kernels and apps are built from the tree as it is.
fn xtask(root: &Path) -> Command {
    let mut cmd = match std::env::current_exe() {
        Ok(exe) => Command::new(exe),
        Err(_) => {
            let mut cmd = tool_base::util::cargo();
            cmd.arg("xtask");
            cmd
        }
    };
    cmd.current_dir(root)
        .env(journal::OWNER_ENV, std::process::id().to_string())
        .env("RUST_BACKTRACE", "0");
    cmd
}

/// What a bounded command did.
pub struct Ran {
    /// Its exit status: `None` if it was killed when its time was up or could not start.
    pub success: Option<bool>,
    /// Standard output.
    pub stdout: String,
    /// Standard error (or why it could not start).
    pub stderr: String,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Runs `cmd`, killing it (and what it started: it leads its own process group) after
/// `limit`.
fn run_bounded(mut cmd: Command, limit: Duration) -> Ran {
    use std::os::unix::process::CommandExt as _;
    journal::on_interrupt();
    let start = Instant::now();
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null()).process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Ran {
                success: None,
                stdout: String::new(),
                stderr: format!("could not start {cmd:?}: {e}"),
                seconds: 0.0,
            };
        }
    };
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    running::started(child.id());
    let out = read(Box::new(child.stdout.take().expect("piped")));
    let err = read(Box::new(child.stderr.take().expect("piped")));
    let success = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status.success()),
            Ok(None) if start.elapsed() >= limit => {
                // The whole group: cargo and the test binary or QEMU it started.
                running::kill_group(child.id());
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(_) => break None,
        }
    };
    running::ended();
    Ran {
        success,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// Each `test NAME ... VERDICT` line of libtest's (or `cargo xtask test`'s) output.
pub fn verdicts(stdout: &str) -> Vec<(&str, &str)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("test ")?.rsplit_once(" ... "))
        .map(|(name, verdict)| (name.trim(), verdict.trim()))
        .collect()
}

/// The `---- NAME stdout ----` section libtest prints for a failed test.
pub fn failure_section(stdout: &str, name: &str) -> Option<String> {
    let head = format!("---- {name} stdout ----");
    let mut lines = stdout.lines().skip_while(|l| l.trim() != head);
    lines.next()?;
    let body: Vec<&str> =
        lines.take_while(|l| !l.starts_with("---- ") && l.trim() != "failures:").collect();
    Some(body.join("\n").trim().to_string())
}

/// The compiler's first errors in cargo's `stderr` (from the first `error` line on).
pub fn first_errors(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    let from = lines.iter().position(|l| l.starts_with("error")).unwrap_or(0);
    lines[from..].iter().take(40).copied().collect::<Vec<_>>().join("\n")
}

fn timed_out(limit: u64) -> String {
    format!("timed out: no verdict within {limit} s (the test's timeout_s, its build included)")
}

/// The verdict of host test `name` in a `cargo test` run.
fn host_verdict(ran: &Ran, name: &str, limit: u64) -> Outcome {
    let verdict = match verdicts(&ran.stdout).into_iter().find(|(n, _)| *n == name) {
        Some((_, "ok")) => Verdict::Passed,
        Some((_, v)) if v.starts_with("ignored") => {
            Verdict::Failed("the test is marked #[ignore]: it did not run".into())
        }
        Some((_, v)) => Verdict::Failed(
            failure_section(&ran.stdout, name)
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("libtest says `{v}`")),
        ),
        None if ran.success.is_none() && ran.seconds > 0.0 => Verdict::Failed(timed_out(limit)),
        None if verdicts(&ran.stdout).is_empty() && ran.success != Some(true) => {
            Verdict::BuildFailed(first_errors(&ran.stderr))
        }
        None => Verdict::Failed(format!(
            "no such test: `cargo test` ran no test named `{name}` (was it renamed?)"
        )),
    };
    Outcome { verdict, seconds: ran.seconds }
}

/// The verdict of the suite's test `full` in a `cargo xtask test` run.
fn suite_verdict(ran: &Ran, full: &str, limit: u64) -> Outcome {
    let lines: Vec<&str> = ran.stdout.lines().collect();
    let at = lines.iter().position(|l| {
        l.strip_prefix("test ").and_then(|r| r.rsplit_once(" ... ")).is_some_and(|(n, _)| n == full)
    });
    let verdict = match at {
        Some(i) if lines[i].ends_with(" ... ok") => Verdict::Passed,
        Some(i) => {
            let why: Vec<&str> = lines[i + 1..]
                .iter()
                .take_while(|l| l.starts_with("    "))
                .map(|l| &l[4..])
                .collect();
            Verdict::Failed(why.join("\n"))
        }
        None if ran.success.is_none() && ran.seconds > 0.0 => Verdict::Failed(timed_out(limit)),
        None => {
            // A build of the kernel or the apps that failed is the suite's `...::build` test.
            let build = lines.iter().position(|l| l.contains("::build ... FAILED"));
            match build {
                Some(i) => Verdict::BuildFailed(
                    lines[i + 1..]
                        .iter()
                        .take_while(|l| l.starts_with("    "))
                        .map(|l| &l[4..])
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
                None if ran.success == Some(false) && lines.is_empty() => {
                    Verdict::BuildFailed(first_errors(&ran.stderr))
                }
                None => Verdict::Failed(format!("`cargo xtask test` has no test named `{full}`")),
            }
        }
    };
    Outcome { verdict, seconds: ran.seconds }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIBTEST: &str = "
running 3 tests
test tests::lab::good ... ok
test tests::lab::bad ... FAILED
test tests::lab::quiet ... FAILED

failures:

---- tests::lab::bad stdout ----

thread 'tests::lab::bad' panicked at src/lab.rs:10:5:
assertion `left == right` failed: a read-only buffer must give BadAddress
  left: Ok(48)
 right: Err(BadAddress)
---- tests::lab::quiet stdout ----

failures:
    tests::lab::bad
    tests::lab::quiet

test result: FAILED. 1 passed; 2 failed; 0 ignored
";

    fn ran(stdout: &str, stderr: &str, success: Option<bool>) -> Ran {
        Ran { success, stdout: stdout.into(), stderr: stderr.into(), seconds: 1.0 }
    }

    #[test]
    fn libtest_verdicts_and_failure_text_per_test() {
        let r = ran(LIBTEST, "", Some(false));
        assert_eq!(host_verdict(&r, "tests::lab::good", 9).verdict, Verdict::Passed);
        let Verdict::Failed(why) = host_verdict(&r, "tests::lab::bad", 9).verdict else { panic!() };
        assert!(why.starts_with("thread 'tests::lab::bad' panicked"), "{why}");
        assert!(why.ends_with("right: Err(BadAddress)"), "{why}");
        assert_eq!(
            host_verdict(&r, "tests::lab::quiet", 9).verdict,
            Verdict::Failed("libtest says `FAILED`".into())
        );
        assert!(matches!(
            host_verdict(&r, "tests::lab::gone", 9).verdict,
            Verdict::Failed(w) if w.starts_with("no such test")
        ));
    }

    #[test]
    fn a_build_failure_fails_with_the_first_errors_and_a_kill_with_the_timeout() {
        let stderr = "   Compiling kernel_core v0.1.0\nerror[E0425]: cannot find value `x`\n --> src/a.rs:1:1\n";
        let r = ran("", stderr, Some(false));
        assert_eq!(
            host_verdict(&r, "a", 9).verdict,
            Verdict::BuildFailed("error[E0425]: cannot find value `x`\n --> src/a.rs:1:1".into())
        );
        let killed = ran("running 1 test\n", "", None);
        assert!(matches!(
            host_verdict(&killed, "a", 9).verdict,
            Verdict::Failed(w) if w.starts_with("timed out: no verdict within 9 s")
        ));
    }

    #[test]
    fn suite_verdicts_and_their_indented_reasons() {
        let out = "test qemu::riscv64::lab_x ... FAILED\n    the app printed 0 bytes\n    want 48\ntest qemu::riscv64::lab_xy ... ok\n";
        let r = ran(out, "", Some(false));
        assert_eq!(
            suite_verdict(&r, "qemu::riscv64::lab_x", 9).verdict,
            Verdict::Failed("the app printed 0 bytes\nwant 48".into())
        );
        assert_eq!(suite_verdict(&r, "qemu::riscv64::lab_xy", 9).verdict, Verdict::Passed);
        let build = "test qemu::riscv64::build ... FAILED\n    kernel build failed\n";
        assert_eq!(
            suite_verdict(&ran(build, "", Some(false)), "qemu::riscv64::lab_x", 9).verdict,
            Verdict::BuildFailed("kernel build failed".into())
        );
    }

    #[test]
    fn a_command_is_killed_when_its_time_is_up() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; sleep 30"]);
        let r = run_bounded(cmd, Duration::from_millis(300));
        assert_eq!(r.success, None);
        assert_eq!(r.stdout, "started\n");
        assert!(r.seconds < 10.0, "{}", r.seconds);
    }
}
