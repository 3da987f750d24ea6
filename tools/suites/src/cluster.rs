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
//! - `frames_cross_the_link`: a riscv64 node's virtio-net driver sends 200 raw frames of 60 to
//!   1,514 bytes to an x86_64 node's, through both nodes' VDE switches and the link between
//!   them (`tests/clusters/frames.toml`): the sender addressed the receiver's cluster MAC, and
//!   the receiver got all 200 in order, every byte checked, none lost or bad.
//! - `mesh_without_loss`: `clusters/mesh.toml`, three nodes (riscv64, x86_64, riscv64) each
//!   with its own address, a virtio-net driver serving UDP, an echo and a `netping` pinger to
//!   each other node: every one of the six pairs' 200 pings is answered and checked, none lost
//!   on the wire, none damaged or answered twice, and each echo's count of what it received
//!   from a pinger lies between that pinger's answers and its sends. On the paced clock (the
//!   cluster's default) a ping's timeout is host time while its node waits, so a host that
//!   stalls a QEMU past it makes the answer late: allowed, as long as it comes (at most 5% of
//!   a pair's pings), since lost on the wire means never answered.
//! - `mesh_counts_losses`: the same with 10% loss each way on the link b-c
//!   (`tests/clusters/mesh-loss.toml`): the four pairs across it count their losses, which
//!   must lie within the binomial distribution's bounds for 200 pings each answered with
//!   probability 0.9 * 0.9 (outside them with a probability below 10^-6 either way), with
//!   `answered + lost == pings` and the echoes' counts consistent; a and b lose nothing.
//! - `mesh_survives_a_kill`: node c is killed, expectedly, when b sends its ping 20 to c
//!   (`tests/clusters/mesh-kill.toml`): a and b report c unreachable after ten pings in a row
//!   unanswered, counting every ping to c after that lost, finish their own exchange without
//!   loss, and the run exits 0 with c reported killed as expected.
//! - `remote_paging`, `remote_paging_under_loss`, `remote_paging_failover`,
//!   `remote_paging_servers_vanish`, `remote_paging_hostile_client`: remote paging across the
//!   nodes ([`crate::cluster_remote`]).
//! - `remote_trader`, `remote_revoke`, `remote_revoke_alone`,
//!   `remote_paging_partial_revocation`: remote paging's control plane (servers found through
//!   a trader, revocation with and without another server, revocation of part of a
//!   reservation) ([`crate::cluster_control`]).
//! - `remote_paging_refill`: a lost mirror refilled on a server found through a trader, so
//!   that a second loss loses nothing ([`crate::cluster_moves`]).
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
pub(crate) struct ClusterRun {
    pub(crate) status: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl ClusterRun {
    pub(crate) fn describe(&self) -> String {
        format!(
            "exit status {:?}\n--- stdout (last lines)\n{}\n--- stderr\n{}",
            self.status,
            last_lines(&self.stdout, 30),
            last_lines(&self.stderr, 30)
        )
    }

    /// Node `name`'s decoded log lines, in the order shown.
    pub(crate) fn log_of(&self, name: &str) -> Vec<LogLine> {
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

    /// The message of node `node`'s first line containing `text`.
    pub(crate) fn line_of(&self, node: &str, text: &str) -> Result<String, String> {
        self.log_of(node)
            .into_iter()
            .find(|l| l.message.contains(text))
            .map(|l| l.message)
            .ok_or(format!("node {node} logged no line containing `{text}`"))
    }

    /// Every one of the run's `nodes` nodes finished and none failed: exit status 0 and
    /// `all N nodes finished`.
    pub(crate) fn finished(&self, nodes: usize) -> Result<(), String> {
        let all = format!("cluster: all {nodes} nodes finished");
        if self.status != Some(0) || !self.stderr.contains(&all) {
            return Err(format!("want exit status 0 and `{all}`"));
        }
        Ok(())
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
pub(crate) fn cluster(file: &str, nodes: &[&str]) -> Result<ClusterRun, String> {
    let run = Child::start(file)?.finish(GUARD)?;
    common_checks(&run, nodes)?;
    Ok(run)
}

/// [`cluster`] on nodes a, b and c, then `check` of the run; its error comes with the run
/// described.
pub(crate) fn three_checked(
    file: &str,
    check: impl FnOnce(&ClusterRun) -> Result<(), String>,
) -> Result<(), String> {
    let run = cluster(file, &["a", "b", "c"])?;
    check(&run).map_err(|why| format!("{why}\n{}", run.describe()))
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
pub(crate) type ClusterTest = fn() -> Result<(), String>;

/// The tests, by name (with those of [`crate::cluster_remote`] and [`crate::cluster_control`],
/// which list their own).
pub(super) const CLUSTER_TESTS: &[(&str, ClusterTest)] = &[
    ("three_nodes", three_nodes),
    ("nic_tolerated", nic_tolerated),
    ("kill_reported", kill_reported),
    ("kill_expected", kill_expected),
    ("link_filters", link_filters),
    ("timeout_reported", timeout_reported),
    ("interrupt_stops_all", interrupt_stops_all),
    ("error_stops_all", error_stops_all),
    ("frames_cross_the_link", frames_cross_the_link),
    ("mesh_without_loss", mesh_without_loss),
    ("mesh_counts_losses", mesh_counts_losses),
    ("mesh_survives_a_kill", mesh_survives_a_kill),
    ("bad_manifest", bad_manifest),
];

fn three_nodes() -> Result<(), String> {
    let nodes = ["a", "b", "c"];
    let run = cluster("clusters/three.toml", &nodes)?;
    let fail = |why: String| Err(format!("{why}\n{}", run.describe()));
    if let Err(why) = run.finished(3) {
        return fail(why);
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

fn frames_cross_the_link() -> Result<(), String> {
    let run = cluster("tests/clusters/frames.toml", &["tx", "rx"])?;
    let fail = |why: &str| Err(format!("{why}\n{}", run.describe()));
    if run.status != Some(0) {
        return fail("want exit status 0");
    }
    let said = |node: &str, text: &str| run.log_of(node).iter().any(|l| l.message.contains(text));
    // The receiver is the cluster's second node: its card has the second cluster MAC.
    if !said("tx", "self-test: sent 200 frames of 60 to 1514 bytes")
        || !said("tx", "to 52:54:00:12:34:02")
    {
        return fail("tx did not send its 200 frames to rx's MAC 52:54:00:12:34:02");
    }
    if !said("rx", "self-test: received 200 frames of 60 to 1514 bytes")
        || !said("rx", "in order, 0 lost, 0 bad")
    {
        return fail("rx did not receive all 200 frames in order, intact");
    }
    Ok(())
}

/// The mesh's nodes, their addresses' last byte, and the pings of each pair.
const MESH: [(&str, u16); 3] = [("a", 1), ("b", 2), ("c", 3)];
const MESH_PINGS: u64 = 200;
/// The mesh pinger's timeout, in ms, as its manifests give it.
const MESH_TIMEOUT_MS: u64 = 300;

/// A pinger's summary line: `netping: R rounds to A:P: N pings of S and S bytes, N answered
/// (B bytes), N lost, N duplicates, N bad, T us, N late, N not sent, timeout MS ms`.
#[derive(Debug)]
struct Pinged {
    pings: u64,
    answered: u64,
    lost: u64,
    duplicates: u64,
    bad: u64,
    late: u64,
    unsent: u64,
}

/// The numbers of a log line's words, in order (`(`, `)` and `,` around them ignored).
fn numbers_of(message: &str) -> Vec<u64> {
    message
        .split_whitespace()
        .filter_map(|w| w.trim_matches(|c| matches!(c, '(' | ')' | ',')).parse().ok())
        .collect()
}

/// The summary of node `from`'s pinger to node `to` of the mesh.
fn pinged(run: &ClusterRun, from: &str, to: (&str, u16)) -> Result<Pinged, String> {
    let head = format!("[to-{}] netping: ", to.0);
    let peer = format!(" rounds to 10.0.0.{}:7000: ", to.1);
    let log = run.log_of(from);
    let Some(line) = log.iter().find(|l| l.message.starts_with(&head) && l.message.contains(&peer))
    else {
        return Err(format!("node {from} has no summary of its pings to {}", to.0));
    };
    match numbers_of(&line.message)[..] {
        [_, pings, _, _, answered, _, lost, duplicates, bad, _, late, unsent, timeout]
            if timeout == MESH_TIMEOUT_MS =>
        {
            Ok(Pinged { pings, answered, lost, duplicates, bad, late, unsent })
        }
        _ => Err(format!("node {from}: unreadable summary `{}`", line.message)),
    }
}

/// What node `at`'s echo counted of the datagrams from `from`'s pinger to it: `(received,
/// answered)` pings.
fn echoed(run: &ClusterRun, at: (&str, u16), from: u16) -> Result<(u64, u64), String> {
    let head = format!("[echo] netping: echo: from 10.0.0.{from}:{}: ", 7000 + at.1);
    let log = run.log_of(at.0);
    let Some(line) = log.iter().find(|l| l.message.starts_with(&head)) else {
        return Err(format!("node {}'s echo has no line `{head}`", at.0));
    };
    match numbers_of(&line.message)[..] {
        [received, _, answered, _, 0] => Ok((received, answered)),
        _ => Err(format!("node {}: unreadable or unanswered: `{}`", at.0, line.message)),
    }
}

/// Checks what holds of every pair that ran to its end: every ping answered or lost, none
/// damaged or answered twice, and the echo received at least every ping answered (in time or
/// late) and at most every ping sent. Returns the pinger's summary.
fn pair(run: &ClusterRun, from: (&str, u16), to: (&str, u16)) -> Result<Pinged, String> {
    let p = pinged(run, from.0, to)?;
    let name = format!("{} to {}", from.0, to.0);
    if p.pings != MESH_PINGS || p.answered + p.lost != p.pings {
        return Err(format!("{name}: answered + lost is not {MESH_PINGS} pings: {p:?}"));
    }
    if p.bad != 0 || p.duplicates != 0 || p.late > p.lost {
        return Err(format!("{name}: damaged, duplicated or more late than lost: {p:?}"));
    }
    let (received, answered) = echoed(run, to, from.1)?;
    let sent = p.pings - p.unsent;
    if received < p.answered + p.late || received > sent || answered != received {
        return Err(format!(
            "{name}: the echo received {received} and answered {answered} pings: want between \
             the {} answered in time or late and the {sent} sent ({p:?})",
            p.answered + p.late
        ));
    }
    Ok(p)
}

/// A pair that lost nothing on the wire: every ping answered, in time or (a host stall) late.
fn lossless(run: &ClusterRun, from: (&str, u16), to: (&str, u16)) -> Result<(), String> {
    let p = pair(run, from, to)?;
    if p.lost != p.late || p.late > MESH_PINGS / 20 || p.unsent != 0 {
        return Err(format!(
            "{} to {}: pings lost on the wire, or over 5% late: {p:?}",
            from.0, to.0
        ));
    }
    Ok(())
}

/// The bounds `(lo, hi)` such that a binomial count of `n` trials of probability `p` lies
/// below `lo` with a probability of at most `tail`, and above `hi` likewise.
fn binomial_bounds(n: u64, p: f64, tail: f64) -> (u64, u64) {
    // ln of each probability, from ln P(0) = n ln(1 - p) by the ratio of neighbours.
    let mut ln = vec![n as f64 * (1.0 - p).ln()];
    for k in 0..n {
        let ratio = ((n - k) as f64 / (k + 1) as f64) * (p / (1.0 - p));
        ln.push(ln[k as usize] + ratio.ln());
    }
    let pmf: Vec<f64> = ln.iter().map(|l| l.exp()).collect();
    let (mut lo, mut below) = (0, 0.0);
    while below + pmf[lo as usize] <= tail {
        below += pmf[lo as usize];
        lo += 1;
    }
    let (mut hi, mut above) = (n, 0.0);
    while above + pmf[hi as usize] <= tail {
        above += pmf[hi as usize];
        hi -= 1;
    }
    (lo, hi)
}

fn mesh_without_loss() -> Result<(), String> {
    let run = cluster("clusters/mesh.toml", &["a", "b", "c"])?;
    let fail = |why: String| Err(format!("{why}\n{}", run.describe()));
    if let Err(why) = run.finished(3) {
        return fail(why);
    }
    if !run.stdout.contains("cluster: clock paced (-icount shift=0,sleep=on)") {
        return fail("the run does not say it ran on the paced clock".into());
    }
    for from in MESH {
        for to in MESH.iter().filter(|t| t.0 != from.0) {
            if let Err(why) = lossless(&run, from, *to) {
                return fail(why);
            }
        }
    }
    Ok(())
}

fn mesh_counts_losses() -> Result<(), String> {
    let run = cluster("tests/clusters/mesh-loss.toml", &["a", "b", "c"])?;
    let fail = |why: String| Err(format!("{why}\n{}", run.describe()));
    if run.status != Some(0) {
        return fail("want exit status 0: every pinger accepts up to 50% loss".into());
    }
    // A ping is answered when neither it nor its answer is lost on b-c.
    let lost = 1.0 - 0.9 * 0.9;
    let (lo, hi) = binomial_bounds(MESH_PINGS, lost, 1e-6);
    let [a, b, c] = MESH;
    for (from, to) in [(a, c), (c, a), (b, c), (c, b)] {
        let p = match pair(&run, from, to) {
            Ok(p) => p,
            Err(why) => return fail(why),
        };
        // Lost on the wire: not answered in time, and not late either.
        let wire = p.lost - p.late;
        if !(lo..=hi).contains(&wire) || p.unsent != 0 {
            return fail(format!(
                "{} to {}: {wire} pings lost on the wire, want {lo} to {hi} ({p:?})",
                from.0, to.0
            ));
        }
    }
    for (from, to) in [(a, b), (b, a)] {
        if let Err(why) = lossless(&run, from, to) {
            return fail(why);
        }
    }
    Ok(())
}

fn mesh_survives_a_kill() -> Result<(), String> {
    let run = cluster("tests/clusters/mesh-kill.toml", &["a", "b", "c"])?;
    let fail = |why: String| Err(format!("{why}\n{}", run.describe()));
    if run.status != Some(0) {
        return fail("want exit status 0: the kill is expected".into());
    }
    if !run.stderr.contains("cluster: node c: killed by the event of line ")
        || !run.stderr.contains(", as expected")
        || !run.stderr.contains("cluster: node a: finished")
        || !run.stderr.contains("cluster: node b: finished")
    {
        return fail("c is not reported killed as expected, or a or b did not finish".into());
    }
    let [a, b, c] = MESH;
    for from in [a, b] {
        let p = match pinged(&run, from.0, c) {
            Ok(p) => p,
            Err(why) => return fail(why),
        };
        let head = "[to-c] netping: peer 10.0.0.3:7000 unreachable after ping ";
        let log = run.log_of(from.0);
        let Some(line) = log.iter().find(|l| l.message.starts_with(head)) else {
            return fail(format!("{} does not report c unreachable", from.0));
        };
        // unreachable after ping S (the last 10 unanswered): L lost, U of them not sent.
        let [after, 10, lost, unsent] = numbers_of(&line.message)[..] else {
            return fail(format!("{}: unreadable `{}`", from.0, line.message));
        };
        // b's ping 20 went out before the kill, and c answered every ping until it.
        let answered = p.answered + p.late;
        if p.answered + p.lost != MESH_PINGS
            || lost != p.lost
            || unsent != p.unsent
            || unsent != MESH_PINGS - 1 - after
            || (from.0 == "b" && (after < 20 || answered < 20))
            || answered + 10 < after + 1
            || p.bad != 0
            || p.duplicates != 0
        {
            return fail(format!("{} to c: {p:?} and `{}`", from.0, line.message));
        }
    }
    for (from, to) in [(a, b), (b, a)] {
        if let Err(why) = lossless(&run, from, to) {
            return fail(why);
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

#[cfg(test)]
mod tests {
    #[test]
    fn binomial_bounds_leave_at_most_the_tail_out_either_side() {
        // P(X = 0) = 1/1024 of 10 fair coins is within a tail of 1/1000, P(X <= 1) is not.
        assert_eq!(super::binomial_bounds(10, 0.5, 1e-3), (1, 9));
        // The lossy mesh's pairs: 200 pings answered with probability 0.81.
        assert_eq!(super::binomial_bounds(200, 0.19, 1e-6), (14, 66));
    }
}
