//! `qemu::cluster::*`: `cargo xtask cluster` itself, as a user runs it: this xtask binary
//! started as a child process, judged by its exit status and its output. Each test also checks
//! that no process of the run survives it (no QEMU, `vde_switch` or `wirefilter` whose command
//! line names the run's socket folder) and that no node logged a kernel `ERROR` or `WARN` line.
//!
//! - `three_nodes`: `clusters/three.toml` (riscv64, x86_64, riscv64 in a line) exits 0, every
//!   log line names its node, each node's lines keep their own order, and every node shuts
//!   down.
//! - `nic_tolerated`: the default manifest and the virtio-blk driver's self-test on both
//!   architectures, each node with a virtio-net card, boot and end as without one (the x86_64
//!   node's PCI scan lists the card; the driver finds its disk where it was).
//! - `kill_reported`: the scenario kills node b when it first reports; the run exits
//!   [`NODE_FAILED`] naming b alone, and a and c finish after the kill.
//! - `kill_expected`: the same kill marked `expected = true` exits 0.
//! - `link_filters`: a link's loss and delay, then duplication set at the start, its cut,
//!   restore and change, each read back from the running wirefilter through its management
//!   socket.
//! - `timeout_reported`: a node still running at the cluster's timeout (4 s) is stopped then,
//!   not before, and named as failed (exit [`NODE_FAILED`]); the other finishes.
//! - `interrupt_stops_all`: Ctrl-C (SIGINT) while two nodes run forever stops every process of
//!   the run and exits [`INTERRUPTED`].
//! - `error_stops_all`: a link's wirefilter killed from outside while two nodes run forever
//!   is an error of the run: it exits 1 saying so, and every other process of the run is
//!   stopped.
//! - `bad_manifest`: a malformed cluster manifest exits 1 with `FILE:LINE: KEY: REASON`.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness::last_lines;
use qemu_cluster::{INTERRUPTED, NODE_FAILED, socket_dir, split_line};
use qemu_run::expected::check_log;
use qemu_run::log::LogLine;
use tool_base::util;

/// How long a cluster run may take before the harness stops it: the child builds the images
/// before its nodes start.
const GUARD: Duration = Duration::from_secs(900);

/// What a `cargo xtask cluster` child did.
struct ClusterRun {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

impl ClusterRun {
    fn describe(&self) -> String {
        format!(
            "exit status {:?}\n--- stdout (last lines)\n{}\n--- stderr\n{}",
            self.status,
            last_lines(&self.stdout, 30),
            last_lines(&self.stderr, 30)
        )
    }

    /// Node `name`'s decoded log lines, in the order shown.
    fn log_of(&self, name: &str) -> Vec<LogLine> {
        self.stdout
            .lines()
            .filter_map(split_line)
            .filter(|(n, _)| *n == name)
            .filter_map(|(_, text)| {
                let (timestamp, rest) = text.trim_start().split_once(' ')?;
                let level = rest.get(..5)?.trim().to_string();
                let message = rest.get(6..)?.to_string();
                Some(LogLine { level, timestamp: Some(timestamp.to_string()), message })
            })
            .collect()
    }

    /// The index in stdout of the first line containing `text`.
    fn position(&self, text: &str) -> Option<usize> {
        self.stdout.lines().position(|l| l.contains(text))
    }
}

/// A child `cargo xtask cluster FILE`, its stdout read as it comes.
struct Child {
    child: std::process::Child,
    stdout: Arc<Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
    stderr: std::thread::JoinHandle<String>,
}

impl Child {
    fn start(file: &str) -> Result<Child, String> {
        let exe = std::env::current_exe().map_err(|e| format!("no xtask binary: {e}"))?;
        let mut child = Command::new(exe)
            .current_dir(util::root())
            .args(["cluster", file])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not start xtask cluster: {e}"))?;
        let stdout = Arc::new(Mutex::new(String::new()));
        let out = stdout.clone();
        let pipe = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = out.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let mut err = child.stderr.take().expect("piped");
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Ok(Child { child, stdout, reader, stderr })
    }

    /// Waits until `seen` holds of stdout, or the child ends, or `limit` passes.
    fn wait_for(&mut self, seen: impl Fn(&str) -> bool, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if seen(&self.stdout.lock().unwrap()) {
                return true;
            }
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Waits for the end (stopping the child after `limit`).
    fn finish(mut self, limit: Duration) -> Result<ClusterRun, String> {
        let start = Instant::now();
        let status = loop {
            match self.child.try_wait().map_err(|e| format!("waiting for xtask cluster: {e}"))? {
                Some(status) => break Some(status),
                None if start.elapsed() > limit => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let _ = self.reader.join();
        let stdout = std::mem::take(&mut *self.stdout.lock().unwrap());
        let run = ClusterRun {
            status: status.and_then(|s| s.code()),
            stdout,
            stderr: self.stderr.join().unwrap_or_default(),
        };
        if status.is_none() {
            return Err(format!(
                "xtask cluster outlived {limit:?} and was stopped\n{}",
                run.describe()
            ));
        }
        Ok(run)
    }
}

/// Runs `cargo xtask cluster FILE` to its end and checks what every cluster test checks: no
/// process of the run left, no kernel ERROR or WARN line from any node.
fn cluster(file: &str, nodes: &[&str]) -> Result<ClusterRun, String> {
    let run = Child::start(file)?.finish(GUARD)?;
    common_checks(&run, nodes)?;
    Ok(run)
}

fn common_checks(run: &ClusterRun, nodes: &[&str]) -> Result<(), String> {
    let Some(dir) = socket_dir(&run.stdout) else {
        return Err(format!("the run names no socket folder\n{}", run.describe()));
    };
    let left = processes_naming(&dir);
    if !left.is_empty() {
        return Err(format!("processes of the run still there: {left:?}\n{}", run.describe()));
    }
    if dir.exists() {
        return Err(format!("the socket folder {} is still there", dir.display()));
    }
    for node in nodes {
        check_log(&format!("node {node}"), &run.log_of(node), &[])
            .map_err(|why| format!("{why}\n{}", run.describe()))?;
    }
    Ok(())
}

/// The processes whose command line names `dir` (the run's QEMUs and VDE processes do), as
/// `PID COMMAND`.
fn processes_naming(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|e| {
            let bytes = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&bytes).replace('\0', " ");
            cmdline
                .contains(&needle)
                .then(|| format!("{} {}", e.file_name().to_string_lossy(), cmdline.trim()))
        })
        .collect()
}

/// One test: a check that runs `cargo xtask cluster` itself.
type ClusterTest = fn() -> Result<(), String>;

/// The tests, by name.
pub(super) const CLUSTER_TESTS: &[(&str, ClusterTest)] = &[
    ("three_nodes", three_nodes),
    ("nic_tolerated", nic_tolerated),
    ("kill_reported", kill_reported),
    ("kill_expected", kill_expected),
    ("link_filters", link_filters),
    ("timeout_reported", timeout_reported),
    ("interrupt_stops_all", interrupt_stops_all),
    ("error_stops_all", error_stops_all),
    ("bad_manifest", bad_manifest),
];

fn three_nodes() -> Result<(), String> {
    let nodes = ["a", "b", "c"];
    let run = cluster("clusters/three.toml", &nodes)?;
    let fail = |why: String| Err(format!("{why}\n{}", run.describe()));
    if run.status != Some(0) || !run.stderr.contains("cluster: all 3 nodes finished") {
        return fail("want exit status 0 and `all 3 nodes finished`".into());
    }
    // Every line is the tool's own (`cluster: `) or a node's (`NAME | ...`).
    if let Some(stray) = run.stdout.lines().find(|l| {
        !l.starts_with("cluster: ") && !split_line(l).is_some_and(|(n, _)| nodes.contains(&n))
    }) {
        return fail(format!("a line names no node: `{stray}`"));
    }
    for (node, arch) in [("a", "riscv64"), ("b", "x86_64"), ("c", "riscv64")] {
        let log = run.log_of(node);
        if !log.iter().any(|l| l.message.starts_with(&format!("Tessera 0.1.0 on {arch}"))) {
            return fail(format!("node {node} did not say it boots {arch}"));
        }
        if log.last().is_none_or(|l| l.message != "shutdown: Success") {
            return fail(format!("node {node}'s last line is not `shutdown: Success`"));
        }
        // Its own lines in its own order: their timestamps never go back.
        let times: Vec<f64> =
            log.iter().filter_map(|l| l.timestamp.as_deref()?.parse().ok()).collect();
        if times.len() < 10 || times.windows(2).any(|w| w[1] < w[0]) {
            return fail(format!("node {node}'s lines are out of order or few: {times:?}"));
        }
    }
    Ok(())
}

fn nic_tolerated() -> Result<(), String> {
    let nodes = ["rv", "x86", "rv-blk", "x86-blk"];
    let run = cluster("tests/clusters/default-nic.toml", &nodes)?;
    let fail = |why: &str| Err(format!("{why}\n{}", run.describe()));
    if run.status != Some(0) {
        return fail("want exit status 0");
    }
    for node in nodes {
        if !run.log_of(node).iter().any(|l| l.message.starts_with("run summary: ")) {
            return fail(&format!("node {node} has no run summary"));
        }
    }
    // The disks where the driver looks for them, beside the card.
    for node in ["rv-blk", "x86-blk"] {
        let checked = "virtio-blk: self-test: 200 transfers written, read back and checked";
        if !run.log_of(node).iter().any(|l| l.message.contains(checked)) {
            return fail(&format!("node {node}'s driver did not pass its self-test"));
        }
    }
    // The card is there: QEMU's virtio-net PCI function (vendor 1af4, device 1000).
    if !run.log_of("x86").iter().any(|l| l.message.contains("1af4:1000 class 02.00.00 (network)")) {
        return fail("the x86_64 node's PCI scan lists no virtio-net card");
    }
    Ok(())
}

fn kill_reported() -> Result<(), String> {
    let run = cluster("tests/clusters/kill.toml", &["a", "b", "c"])?;
    let fail = |why: &str| Err(format!("{why}\n{}", run.describe()));
    if run.status != Some(NODE_FAILED.into()) {
        return fail(&format!("want exit status {NODE_FAILED}"));
    }
    if !run.stderr.contains("cluster: 1 of 3 nodes failed: b;") {
        return fail("the summary does not name b alone");
    }
    if !run.stderr.contains("cluster: node b: FAILED: killed by the event of line 29") {
        return fail("b is not reported killed by the scenario");
    }
    let Some(kill) = run.position("cluster: event of line 29") else {
        return fail("no line says the event happened");
    };
    if !run.stdout.lines().nth(kill).is_some_and(|l| l.ends_with(": killing node b")) {
        return fail("the event did not kill b");
    }
    // a and c went on after the kill and finished.
    for node in ["a", "c"] {
        let end = format!("{node} | ");
        let done = run
            .stdout
            .lines()
            .position(|l| l.starts_with(&end) && l.ends_with("shutdown: Success"));
        if done.is_none_or(|d| d <= kill) {
            return fail(&format!("node {node} did not finish after the kill"));
        }
        if !run.stderr.contains(&format!("cluster: node {node}: finished")) {
            return fail(&format!("node {node} is not reported finished"));
        }
    }
    Ok(())
}

fn kill_expected() -> Result<(), String> {
    let run = cluster("tests/clusters/kill-expected.toml", &["a", "b"])?;
    let fail = |why: &str| Err(format!("{why}\n{}", run.describe()));
    if run.status != Some(0) {
        return fail("want exit status 0: the kill is expected");
    }
    if !run.stderr.contains("cluster: node b: killed by the event of line 19") {
        return fail("b is not reported killed");
    }
    if !run.stderr.contains(", as expected") {
        return fail("the kill is not reported as expected");
    }
    Ok(())
}

fn link_filters() -> Result<(), String> {
    let run = cluster("tests/clusters/links.toml", &["a", "b"])?;
    let fail = |why: &str| Err(format!("{why}\n{}", run.describe()));
    if run.status != Some(0) {
        return fail("want exit status 0");
    }
    // As the wirefilter reports them (left to right / right to left).
    let steps = [
        "cluster: link a-b: wirefilter loss 10+0U/10+0U, delay 20+0U/20+0U, dup 0+0U/0+0U",
        ": link a-b set: wirefilter loss 10+0U/10+0U, delay 20+0U/20+0U, dup 5+0U/5+0U",
        ": link a-b cut: wirefilter loss 100+0U/100+0U, delay 20+0U/20+0U, dup 5+0U/5+0U",
        ": link a-b restored: wirefilter loss 10+0U/10+0U, delay 20+0U/20+0U, dup 5+0U/5+0U",
        ": link a-b set: wirefilter loss 30+0U/30+0U, delay 20+0U/20+0U, dup 0+0U/0+0U",
    ];
    let mut after = 0;
    for step in steps {
        match run.stdout.lines().skip(after).position(|l| l.contains(step)) {
            Some(i) => after += i + 1,
            None => return fail(&format!("no `{step}` after the step before")),
        }
    }
    Ok(())
}

fn timeout_reported() -> Result<(), String> {
    let start = Instant::now();
    let run = cluster("tests/clusters/timeout.toml", &["a", "b"])?;
    let wall = start.elapsed();
    let fail = |why: &str| Err(format!("{why}\n{}", run.describe()));
    if run.status != Some(NODE_FAILED.into()) {
        return fail(&format!("want exit status {NODE_FAILED}"));
    }
    if !run.stderr.contains("cluster: node b: FAILED: timed out: still running after ")
        || !run.stderr.contains("cluster: 1 of 2 nodes failed: b;")
        || !run.stderr.contains("cluster: node a: finished")
    {
        return fail("b is not named timed out alone, or a did not finish");
    }
    // b ran (it reported) and was stopped by the timeout, not before it.
    if !run.log_of("b").iter().any(|l| l.message.contains("[hog] spin: report")) {
        return fail("b never reported: it did not get going");
    }
    // Stopped at the timeout: b's QEMU lived 4 s, and not much longer (the loop that stops it
    // looks every 20 ms).
    let lived = run
        .stderr
        .split("timed out: still running after ")
        .nth(1)
        .and_then(|rest| rest.split("s (").next())
        .and_then(|s| s.parse::<f64>().ok());
    if !lived.is_some_and(|s| (4.0..6.0).contains(&s)) || wall < Duration::from_secs(4) {
        return fail(&format!("b lived {lived:?} s, the run {wall:.1?}: want 4 s to 6 s"));
    }
    Ok(())
}

fn interrupt_stops_all() -> Result<(), String> {
    let (child, running) = forever_running()?;
    let pid = child.child.id().to_string();
    let sent = Command::new("kill").args(["-INT", &pid]).status();
    let run = child.finish(Duration::from_secs(30))?;
    let fail = |why: &str| Err(format!("{why}\n{}", run.describe()));
    if !running {
        return fail("the nodes never both reported");
    }
    if !sent.is_ok_and(|s| s.success()) {
        return fail("could not send SIGINT");
    }
    if run.status != Some(INTERRUPTED.into()) || !run.stderr.contains("cluster: stopped (Ctrl-C)") {
        return fail(&format!("want exit status {INTERRUPTED} and `stopped (Ctrl-C)`"));
    }
    common_checks(&run, &["a", "b"])
}

/// Starts `tests/clusters/forever.toml` and waits until both its nodes have reported.
fn forever_running() -> Result<(Child, bool), String> {
    let mut child = Child::start("tests/clusters/forever.toml")?;
    let reported = |out: &str| {
        ["a", "b"].iter().all(|n| {
            out.lines().any(|l| l.starts_with(&format!("{n} | ")) && l.contains("[hog] spin"))
        })
    };
    let running = child.wait_for(reported, GUARD);
    Ok((child, running))
}

fn error_stops_all() -> Result<(), String> {
    let (child, running) = forever_running()?;
    let dir = socket_dir(&child.stdout.lock().unwrap());
    let wirefilter = dir
        .as_deref()
        .map(processes_naming)
        .and_then(|ps| ps.iter().find(|p| p.split(' ').nth(1) == Some("wirefilter")).cloned());
    let pid = wirefilter.as_deref().and_then(|p| p.split(' ').next()).unwrap_or("0").to_string();
    let sent = Command::new("kill").args(["-KILL", &pid]).status();
    let run = child.finish(Duration::from_secs(30))?;
    let fail = |why: &str| Err(format!("{why}\n{}", run.describe()));
    if !running || wirefilter.is_none() {
        return fail("the nodes never both reported, or no wirefilter ran");
    }
    if !sent.is_ok_and(|s| s.success()) {
        return fail("could not kill the wirefilter");
    }
    let want = "error: the wirefilter of link a-b exited";
    if run.status != Some(1) || !run.stderr.contains(want) {
        return fail(&format!("want exit status 1 and `{want}`"));
    }
    common_checks(&run, &["a", "b"])
}

fn bad_manifest() -> Result<(), String> {
    let file = "tests/clusters/bad/unknown-node.toml";
    let run = Child::start(file)?.finish(Duration::from_secs(120))?;
    let want = format!("error: {file}:13: link[0].between: unknown node \"d\" (nodes: a, b)");
    if run.status != Some(1) || !run.stderr.contains(&want) {
        return Err(format!("want exit status 1 and `{want}`\n{}", run.describe()));
    }
    Ok(())
}
