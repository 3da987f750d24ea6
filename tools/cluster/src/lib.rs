//! `cargo xtask cluster FILE`: several Tessera nodes, each a QEMU booting a system manifest,
//! joined by VDE switches on Unix sockets, with a scenario that kills nodes and cuts, restores
//! or degrades links at chosen times ([`spec`], the cluster manifest; `clusters/README.md`).
//!
//! The network: every node has its own `vde_switch`, into which its QEMU's virtio-net card
//! plugs (`qemu_run::qemu::Nic`, MAC `52:54:00:12:34:NN` with `NN` the node's index + 1); a
//! link is a `wirefilter` between two nodes' switches, whose loss, duplication and delay are
//! changed through its management socket ([`vde`]). Links must form a tree: a loop of
//! switches would pass frames round forever. Nothing touches the host's interfaces.
//!
//! The run: each node's image is built as `cargo xtask run` builds it and booted with
//! `qemu_run`'s command line and log decoder; the nodes' decoded logs are shown interleaved as
//! they arrive, each line prefixed with its node's name. The run ends when every node has
//! ended, or at the cluster's timeout; every QEMU and VDE process is stopped then, on Ctrl-C and
//! on an error. A node fails when its kernel does not exit 0 (a panic exits 2), a domain fails
//! that its manifest does not expect to, it logs an `ERROR` line its `allow` patterns do not
//! match, it times out, or the scenario kills it without `expected = true`. The exit status is
//! 0 when no node failed, [`NODE_FAILED`] naming every failed node otherwise, [`INTERRUPTED`]
//! after Ctrl-C, and 1 for an error of the tool (a bad cluster manifest, a missing program).

#![forbid(unsafe_code)]

pub mod spec;
pub mod vde;

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use qemu_run::expected::glob;
use qemu_run::log::{Kernel, LogLine};
use qemu_run::qemu::{self, Boot, Ending, Nic, Outcome};
use qemu_run::run::verdict;
use spec::{Action, Clock, Cluster, Filter, When};
use system_image::system::{self, Spoil, System};
use tool_base::artifacts::{self, Artifacts};
use tool_base::{Arch, setup, util};

/// The exit status when a node failed.
pub const NODE_FAILED: u8 = 4;

/// The exit status after Ctrl-C.
pub const INTERRUPTED: u8 = 130;

/// What one node's thread tells the main loop.
enum Report {
    /// A decoded log line of node `.0`.
    Line(usize, LogLine),
    /// Node `.0`'s QEMU ended (or could not start).
    Done(usize, Result<Outcome>),
}

/// The node threads; dropping this stops every QEMU still running and waits for them.
struct Nodes {
    stops: Vec<Arc<AtomicBool>>,
    threads: Vec<JoinHandle<()>>,
}

impl Nodes {
    fn stop_all(&self) {
        for s in &self.stops {
            s.store(true, Ordering::Relaxed);
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        self.stop_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One node ready to boot.
struct Prepared {
    boot: Boot,
    artifacts: Artifacts,
    /// `(base address, app ELF)` per domain instance, for the log's symbols.
    instances: Vec<(u64, PathBuf)>,
    /// The system manifest, for the verdict (which domains may fail).
    manifest: manifest::Manifest,
}

/// A link's filter as set, and whether it is cut (loss 100% until restored).
struct LinkState {
    mgmt: vde::Mgmt,
    filter: Filter,
    cut: bool,
}

/// `cargo xtask cluster FILE`: runs the cluster of the manifest at `path`; returns the exit
/// status (see the [crate documentation](crate)).
pub fn run(path: &Path) -> Result<u8> {
    let file = util::resolve(path);
    let cluster = spec::parse_file(&file)?;
    let mut arches: Vec<Arch> = cluster.nodes.iter().map(|n| n.arch).collect();
    arches.sort_by_key(|a| a.name());
    arches.dedup();
    setup::ensure_for(&arches, setup::Needs { gdb: false, qemu: true, dtc: false, vde: true })?;
    let prepared = prepare(&cluster)?;

    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = interrupted.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C handler")?;

    let mut net = vde::Net::new()?;
    println!("cluster: sockets in {}", net.dir.display());
    println!("cluster: clock {}", cluster.clock.describe());
    let mut switches = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        switches.push(net.start_switch(i, &node.name)?);
    }
    let mut links = Vec::new();
    for (i, link) in cluster.links.iter().enumerate() {
        let ends = [switches[link.ends[0]].as_path(), switches[link.ends[1]].as_path()];
        let mut mgmt = net.start_wirefilter(i, &link.name, ends, link.filter)?;
        println!("cluster: link {}: wirefilter {}", link.name, mgmt.settings()?);
        links.push(LinkState { mgmt, filter: link.filter, cut: false });
    }

    let out = Output::new(&cluster);
    let manifests: Vec<manifest::Manifest> = prepared.iter().map(|p| p.manifest.clone()).collect();
    let (tx, rx) = mpsc::channel();
    let mut nodes = Nodes { stops: Vec::new(), threads: Vec::new() };
    for (i, (node, p)) in cluster.nodes.iter().zip(prepared).enumerate() {
        let mut boot = p.boot;
        boot.nic = Some(Nic { switch: switches[i].clone(), mac: Nic::mac_of(i as u8) });
        println!(
            "cluster: node {} ({}, {}, {} MiB, MAC {})",
            node.name,
            node.arch.name(),
            node.manifest.display(),
            boot.memory,
            boot.nic.as_ref().map(Nic::mac_text).unwrap_or_default()
        );
        let stop = Arc::new(AtomicBool::new(false));
        nodes.stops.push(stop.clone());
        let tx = tx.clone();
        let (artifacts, instances) = (p.artifacts, p.instances);
        nodes.threads.push(std::thread::spawn(move || {
            let result = Kernel::load(&artifacts.kernel)
                .and_then(|mut k| k.add_instances(&instances).map(|_| k))
                .and_then(|kernel| {
                    qemu::boot(&boot, &artifacts, &kernel, Some(&stop), &mut |line| {
                        let _ = tx.send(Report::Line(i, line.clone()));
                    })
                });
            let _ = tx.send(Report::Done(i, result));
        }));
    }
    drop(tx);
    let start = Instant::now();
    let count = cluster.nodes.len();
    let mut outcomes: Vec<Option<Result<Outcome>>> = (0..count).map(|_| None).collect();
    let mut killed: Vec<Option<(usize, bool)>> = vec![None; count];
    let mut fired = vec![false; cluster.events.len()];
    let mut stopping = false;
    while outcomes.iter().any(Option::is_none) {
        if interrupted.load(Ordering::Relaxed) && !stopping {
            println!("cluster: Ctrl-C: stopping every node");
            nodes.stop_all();
            stopping = true;
        }
        if !stopping && let Some(why) = net.exited() {
            bail!("{why}: the cluster's network is broken");
        }
        let mut due = Vec::new();
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Report::Line(i, line)) => {
                for (e, event) in cluster.events.iter().enumerate() {
                    if let When::Line { node, text } = &event.when
                        && *node == i
                        && !fired[e]
                        && line.message.contains(text.as_str())
                    {
                        due.push(e);
                    }
                }
                out.line(i, &line);
            }
            Ok(Report::Done(i, result)) => outcomes[i] = Some(result),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        for (e, event) in cluster.events.iter().enumerate() {
            if let When::At(at) = event.when
                && !fired[e]
                && start.elapsed() >= at
            {
                due.push(e);
            }
        }
        for e in due {
            fired[e] = true;
            if stopping {
                continue;
            }
            let event = &cluster.events[e];
            let at = format!("cluster: event of line {} at {:.2?}", event.line, start.elapsed());
            match event.action {
                Action::Kill { node, expected } => {
                    let name = &cluster.nodes[node].name;
                    if outcomes[node].is_some() {
                        println!("{at}: node {name} has ended already; not killed");
                    } else {
                        println!("{at}: killing node {name}");
                        killed[node] = Some((event.line, expected));
                        nodes.stops[node].store(true, Ordering::Relaxed);
                    }
                }
                Action::Cut(l) | Action::Restore(l) | Action::Set { link: l, .. } => {
                    let state = &mut links[l];
                    change_link(state, &event.action)?;
                    let settings = state.mgmt.settings()?;
                    let what = match event.action {
                        Action::Cut(_) => "cut",
                        Action::Restore(_) => "restored",
                        _ => "set",
                    };
                    println!("{at}: link {} {what}: wirefilter {settings}", cluster.links[l].name);
                }
            }
        }
    }
    drop(nodes);
    drop(links);
    drop(net);
    for (event, _) in cluster.events.iter().zip(&fired).filter(|(_, fired)| !**fired) {
        println!("cluster: the event of line {} never happened: its time did not come", event.line);
    }
    // A terminal's Ctrl-C also reaches the QEMUs, which may end before the flag is seen.
    let interrupted = stopping || interrupted.load(Ordering::Relaxed);
    let mut failed = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        let outcome = outcomes[i].take().unwrap_or_else(|| Err(anyhow::anyhow!("no outcome")));
        let (ok, what) = judge(node, &manifests[i], &outcome, killed[i], &cluster);
        let mark = if ok || interrupted { "" } else { "FAILED: " };
        eprintln!("cluster: node {}: {mark}{what}", node.name);
        if !ok {
            failed.push(node.name.clone());
        }
    }
    if interrupted {
        eprintln!("cluster: stopped (Ctrl-C)");
        return Ok(INTERRUPTED);
    }
    if failed.is_empty() {
        eprintln!("cluster: all {count} nodes finished");
        Ok(0)
    } else {
        eprintln!(
            "cluster: {} of {count} nodes failed: {}; exiting with status {NODE_FAILED}",
            failed.len(),
            failed.join(", ")
        );
        Ok(NODE_FAILED)
    }
}

/// Applies a cut, restore or set to a link.
fn change_link(state: &mut LinkState, action: &Action) -> Result<()> {
    match *action {
        Action::Cut(_) => {
            state.cut = true;
            state.mgmt.set_loss(100.0)
        }
        Action::Restore(_) => {
            state.cut = false;
            state.mgmt.set_loss(state.filter.loss)
        }
        Action::Set { loss, dup, delay_ms, .. } => {
            if let Some(loss) = loss {
                state.filter.loss = loss;
                if !state.cut {
                    state.mgmt.set_loss(loss)?;
                }
            }
            if let Some(dup) = dup {
                state.filter.dup = dup;
                state.mgmt.set_dup(dup)?;
            }
            if let Some(ms) = delay_ms {
                state.filter.delay_ms = ms;
                state.mgmt.set_delay(ms)?;
            }
            Ok(())
        }
        Action::Kill { .. } => Ok(()),
    }
}

/// Builds and packs every node's system (once per architecture and manifest) and its kernel.
fn prepare(cluster: &Cluster) -> Result<Vec<Prepared>> {
    let mut kernels: HashMap<&'static str, Artifacts> = HashMap::new();
    let mut systems: HashMap<(&'static str, PathBuf), (usize, System)> = HashMap::new();
    let mut out = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        let arch = node.arch;
        let path = util::resolve(&node.manifest);
        let key = (arch.name(), path.clone());
        if !systems.contains_key(&key) {
            // Images are kept by the manifest's file name: two manifests of one name would
            // overwrite each other's.
            let stem = path.file_stem();
            if let Some(((_, other), (first, _))) =
                systems.iter().find(|((a, p), _)| *a == arch.name() && p.file_stem() == stem)
            {
                bail!(
                    "nodes {} and {} boot different manifests of one file name on {} ({} and \
                     {}): their boot images would be one file; rename one",
                    cluster.nodes[*first].name,
                    node.name,
                    arch.name(),
                    other.display(),
                    path.display()
                );
            }
            let s = system::prepare_with(
                &path,
                Spoil::Nothing,
                system_image::apps::Build::Release,
                arch,
                false,
            )
            .with_context(|| format!("node {}: {}", node.name, node.manifest.display()))?;
            systems.insert(key.clone(), (i, s));
        } else if let Some((first, s)) = systems.get(&key)
            && !s.disks.is_empty()
        {
            bail!(
                "nodes {} and {} boot {} on {}, which has disks: they would share its disk \
                 images; give each node its own manifest",
                cluster.nodes[*first].name,
                node.name,
                node.manifest.display(),
                arch.name()
            );
        }
        if let std::collections::hash_map::Entry::Vacant(v) = kernels.entry(arch.name()) {
            v.insert(artifacts::build(arch)?);
        }
        let system = &systems[&key].1;
        let mut boot = Boot::new(arch);
        boot.attach(system)?;
        if let Some(mib) = node.memory_mib {
            boot.memory = mib;
        }
        boot.icount = cluster.clock != Clock::Host;
        boot.icount_sleep = cluster.clock == Clock::Paced;
        boot.timeout = cluster.timeout;
        out.push(Prepared {
            boot,
            artifacts: kernels[arch.name()].clone(),
            instances: system.instances.clone(),
            manifest: system.manifest.clone(),
        });
    }
    Ok(out)
}

/// How node `node` did: `(passed, what happened)`.
fn judge(
    node: &spec::Node,
    manifest: &manifest::Manifest,
    outcome: &Result<Outcome>,
    killed: Option<(usize, bool)>,
    cluster: &Cluster,
) -> (bool, String) {
    let out = match outcome {
        Ok(out) => out,
        Err(e) => return (false, format!("could not run: {e:#}")),
    };
    let wall = format!("after {:.2?}", out.wall);
    match (&out.ending, killed) {
        (Ending::Interrupted, Some((line, expected))) => {
            let what = format!("killed by the event of line {line} {wall}");
            return if expected { (true, format!("{what}, as expected")) } else { (false, what) };
        }
        // Only Ctrl-C stops a node the scenario did not kill.
        (Ending::Interrupted, None) => return (false, format!("stopped (Ctrl-C) {wall}")),
        (Ending::Timeout, _) => {
            let what = format!(
                "timed out: still running {wall} (the cluster's timeout is {:?})",
                cluster.timeout
            );
            return (false, what);
        }
        (Ending::Other(status), _) => {
            let stderr = out.stderr.trim();
            return (
                false,
                format!(
                    "QEMU exited with status {status:?} {wall} without a kernel exit code: {stderr}"
                ),
            );
        }
        (Ending::Kernel(0), _) => {}
        (Ending::Kernel(2), _) => {
            return (false, format!("the kernel panicked (exit code 2) {wall}"));
        }
        (Ending::Kernel(code), _) => {
            return (false, format!("the kernel exited with code {code} {wall}"));
        }
    }
    let failed = verdict::unexpected_failures(&out.log, Some(manifest));
    if !failed.is_empty() {
        return (false, format!("domains failed: {}", failed.join(", ")));
    }
    if let Some(line) = out
        .log
        .iter()
        .find(|l| l.level == "ERROR" && !node.allow.iter().any(|p| glob(p, &l.message)))
    {
        return (false, format!("logged ERROR: {}", line.message));
    }
    (true, format!("finished: kernel exit code 0 {wall}"))
}

/// The interleaved log: each line prefixed with its node's name, padded and, on a terminal,
/// coloured.
struct Output {
    prefixes: Vec<String>,
}

impl Output {
    fn new(cluster: &Cluster) -> Output {
        let width = cluster.nodes.iter().map(|n| n.name.len()).max().unwrap_or(0);
        let tty = std::io::stdout().is_terminal();
        const COLOURS: [u8; 6] = [36, 33, 35, 32, 34, 31];
        let prefixes = cluster
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let name = format!("{:<width$}", n.name);
                if tty {
                    format!("\x1b[1;{}m{name}\x1b[0m | ", COLOURS[i % COLOURS.len()])
                } else {
                    format!("{name} | ")
                }
            })
            .collect();
        Output { prefixes }
    }

    fn line(&self, node: usize, line: &LogLine) {
        if line.level == "RAW" {
            return;
        }
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{}{line}", self.prefixes[node]);
    }
}

/// The node of a log line as [`Output`] writes it without colour (`NAME | TEXT`, the name
/// padded): `(NAME, TEXT)`. For tests that read a run's output.
pub fn split_line(line: &str) -> Option<(&str, &str)> {
    let (name, text) = line.split_once(" | ")?;
    Some((name.trim_end(), text))
}

/// The socket folder a run's output names (`cluster: sockets in DIR`), whose path every QEMU
/// and VDE process of the run has on its command line.
pub fn socket_dir(output: &str) -> Option<PathBuf> {
    output.lines().find_map(|l| l.strip_prefix("cluster: sockets in ")).map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(level: &str, message: &str) -> LogLine {
        LogLine { level: level.into(), timestamp: Some("0.1".into()), message: message.into() }
    }

    fn outcome(ending: Ending, log: Vec<LogLine>) -> Result<Outcome> {
        Ok(Outcome { ending, log, stderr: String::new(), wall: Duration::from_millis(1500) })
    }

    /// Judges `outcome` of a node with `allow` patterns, in a cluster with a 9 s timeout.
    fn verdict(
        outcome: Result<Outcome>,
        killed: Option<(usize, bool)>,
        allow: &[&str],
    ) -> (bool, String) {
        let text = "[[node]]\nname = \"a\"\narch = \"riscv64\"\nmanifest = \"m.toml\"\n\
                    [cluster]\ntimeout = \"9s\"\n";
        let mut cluster = spec::parse("c.toml", text).unwrap();
        cluster.nodes[0].allow = allow.iter().map(|p| p.to_string()).collect();
        let manifest = manifest::parse(
            "m.toml",
            "[system]\nmemory = \"16M\"\n[[domain]]\nname = \"d\"\napp = \"hello\"\n\
             memory = { guaranteed = \"128K\" }\n",
            &["hello"],
        )
        .unwrap();
        judge(&cluster.nodes[0], &manifest, &outcome, killed, &cluster)
    }

    #[test]
    fn a_node_fails_on_a_bad_exit_a_domain_an_error_line_the_timeout_or_a_kill() {
        let ok = vec![
            line("INFO", "run summary: 1 domain(s)"),
            line("INFO", "  d: exited with status 0"),
        ];
        assert!(verdict(outcome(Ending::Kernel(0), ok.clone()), None, &[]).0);
        let (passed, why) = verdict(outcome(Ending::Kernel(2), ok.clone()), None, &[]);
        assert!(!passed && why.starts_with("the kernel panicked"), "{why}");
        let (passed, why) = verdict(outcome(Ending::Kernel(1), ok.clone()), None, &[]);
        assert!(!passed && why.starts_with("the kernel exited with code 1"), "{why}");
        let bad = vec![
            line("INFO", "run summary: 1 domain(s)"),
            line("INFO", "  d: exited with status 3"),
        ];
        let (passed, why) = verdict(outcome(Ending::Kernel(0), bad), None, &[]);
        assert!(!passed && why == "domains failed: d exited with status 3", "{why}");
        let mut error = ok.clone();
        error.push(line("ERROR", "leak: 3 frames"));
        let (passed, why) = verdict(outcome(Ending::Kernel(0), error.clone()), None, &[]);
        assert!(!passed && why == "logged ERROR: leak: 3 frames", "{why}");
        assert!(verdict(outcome(Ending::Kernel(0), error), None, &["leak: *"]).0);
        let (passed, why) = verdict(outcome(Ending::Timeout, ok.clone()), None, &[]);
        assert!(!passed && why.starts_with("timed out: still running after 1.50s"), "{why}");
        assert!(why.ends_with("(the cluster's timeout is 9s)"), "{why}");
        let (passed, why) =
            verdict(outcome(Ending::Interrupted, ok.clone()), Some((12, false)), &[]);
        assert!(!passed && why.starts_with("killed by the event of line 12"), "{why}");
        let (passed, why) =
            verdict(outcome(Ending::Interrupted, ok.clone()), Some((12, true)), &[]);
        assert!(passed && why.ends_with(", as expected"), "{why}");
        let (passed, why) = verdict(outcome(Ending::Other(Some(1)), ok), None, &[]);
        assert!(!passed && why.starts_with("QEMU exited with status Some(1)"), "{why}");
        let (passed, why) = verdict(Err(anyhow::anyhow!("no qemu")), None, &[]);
        assert!(!passed && why == "could not run: no qemu", "{why}");
    }
}
