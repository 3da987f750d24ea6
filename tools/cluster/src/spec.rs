//! The cluster manifest: its TOML form, read with serde, and the checked [`Cluster`] it
//! becomes. Errors name the file, the line and the key ([`ClusterError`], the system
//! manifests' error type), e.g. `clusters/bad.toml:7: link[0].between: unknown node "d"
//! (nodes: a, b, c)`. The format is described in `clusters/README.md`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use tool_base::Arch;

/// Where a cluster manifest is wrong: `FILE:LINE: KEY: REASON`.
pub type ClusterError = manifest::ManifestError;

/// How long a cluster may run when its manifest gives no `timeout`, in seconds.
pub const DEFAULT_TIMEOUT_S: u64 = 300;

/// A checked cluster manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    /// Each node's clock ([`Clock`]).
    pub clock: Clock,
    /// The whole run's limit on the host's clock: every node still running then is stopped and
    /// fails ("timed out").
    pub timeout: Duration,
    /// The nodes, in the order written; a node's index gives its MAC.
    pub nodes: Vec<Node>,
    /// The links between nodes' switches.
    pub links: Vec<Link>,
    /// The scenario, in the order written.
    pub events: Vec<Event>,
}

/// The clock each node's QEMU runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// `-icount shift=0,sleep=on` (the default): while a node runs, its clock counts its
    /// instructions, one a nanosecond, as under `Virtual` (CPU accounts stay instruction
    /// counts); while it is idle, its clock follows the host's, so a timeout waiting for
    /// another node's reply lasts as long as it says.
    Paced,
    /// `-icount shift=0,sleep=off`: each node's own deterministic virtual time. The nodes'
    /// clocks are not related to one another or to the host's, and an idle node jumps to its
    /// next timer: a node waiting for another's reply times out at once.
    Virtual,
    /// The host's clock: time passes for every node alike, not deterministically.
    Host,
}

impl Clock {
    /// How the tool describes it on its first lines.
    pub fn describe(self) -> &'static str {
        match self {
            Clock::Paced => {
                "paced (-icount shift=0,sleep=on): each node's clock counts its instructions \
                 while it runs and follows the host's while it is idle"
            }
            Clock::Virtual => {
                "virtual (-icount shift=0,sleep=off): each node's own deterministic clock, \
                 unrelated to the others'; an idle node jumps to its next timer"
            }
            Clock::Host => "host (no -icount): every node on the host's clock",
        }
    }
}

/// One node: a QEMU booting a system manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its name, the prefix of its log lines.
    pub name: String,
    /// Its architecture.
    pub arch: Arch,
    /// The system manifest it boots (relative to the workspace root, as written).
    pub manifest: PathBuf,
    /// Guest memory in MiB; `None`: the manifest's.
    pub memory_mib: Option<u32>,
    /// Patterns of the kernel `ERROR` lines the node may log without failing (`*` stands for
    /// any text, as in the test suites' allow-lists).
    pub allow: Vec<String>,
}

/// A link: a `wirefilter` between the switches of two nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// Its name (`A-B` unless the manifest names it).
    pub name: String,
    /// The indices of the two nodes it joins.
    pub ends: [usize; 2],
    /// What it does to frames at the start.
    pub filter: Filter,
}

/// What a link does to frames, both ways.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Filter {
    /// Percentage of frames lost (0 to 100).
    pub loss: f64,
    /// Percentage of frames duplicated (0 to 100).
    pub dup: f64,
    /// Delay added to every frame, in milliseconds.
    pub delay_ms: u64,
}

/// A scenario entry: at a time, do something.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// When.
    pub when: When,
    /// What.
    pub action: Action,
    /// Its line in the manifest, for messages.
    pub line: usize,
}

/// When an event happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum When {
    /// This long after every node's QEMU was started, on the host's clock.
    At(Duration),
    /// When node `node` logs a line whose message contains `text` (the first such line).
    Line {
        /// The node's index.
        node: usize,
        /// The text to look for.
        text: String,
    },
}

/// What an event does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Stop the node's QEMU at once. The node fails, unless `expected`.
    Kill {
        /// The node's index.
        node: usize,
        /// The scenario means the node to end so: it does not count as failed.
        expected: bool,
    },
    /// Lose every frame on the link (loss 100%) until it is restored.
    Cut(usize),
    /// Give a cut link back its loss.
    Restore(usize),
    /// Change the link's filter; `None` leaves a setting as it is.
    Set {
        /// The link's index.
        link: usize,
        /// New loss percentage.
        loss: Option<f64>,
        /// New duplication percentage.
        dup: Option<f64>,
        /// New delay in milliseconds.
        delay_ms: Option<u64>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    #[serde(default)]
    cluster: RawSettings,
    #[serde(default)]
    node: Vec<RawNode>,
    #[serde(default)]
    link: Vec<RawLink>,
    #[serde(default)]
    event: Vec<RawEvent>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    clock: Option<Clock>,
    timeout: Option<String>,
}

#[derive(Clone, Copy, Deserialize)]
enum RawArch {
    #[serde(rename = "riscv64")]
    Riscv64,
    #[serde(rename = "x86_64")]
    X86_64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: String,
    arch: RawArch,
    manifest: String,
    memory: Option<String>,
    #[serde(default)]
    allow: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    name: Option<String>,
    between: Vec<String>,
    loss: Option<f64>,
    dup: Option<f64>,
    delay: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWhen {
    node: String,
    line: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    at: Option<String>,
    when: Option<RawWhen>,
    kill: Option<String>,
    expected: Option<bool>,
    cut: Option<String>,
    restore: Option<String>,
    set: Option<String>,
    loss: Option<f64>,
    dup: Option<f64>,
    delay: Option<String>,
}

/// Reads and checks the cluster manifest at `path`.
pub fn parse_file(path: &Path) -> Result<Cluster, ClusterError> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&file, &text),
        Err(e) => Err(ClusterError::at_offset(&file, "", None, None, e.to_string())),
    }
}

/// Checks the cluster manifest `text` (named `file` in errors); returns the first error.
pub fn parse(file: &str, text: &str) -> Result<Cluster, ClusterError> {
    let raw: RawCluster =
        toml::from_str(text).map_err(|e| ClusterError::from_toml(file, text, &e))?;
    let err = |key: String, reason: String| ClusterError::at_key(file, text, &key, reason);

    let clock = raw.cluster.clock.unwrap_or(Clock::Paced);
    let timeout = match &raw.cluster.timeout {
        Some(t) => duration(t).map_err(|r| err("cluster.timeout".into(), r))?,
        None => Duration::from_secs(DEFAULT_TIMEOUT_S),
    };
    if timeout.is_zero() {
        return Err(err("cluster.timeout".into(), "a timeout of zero ends the run at once".into()));
    }

    if raw.node.is_empty() {
        return Err(err("node".into(), "a cluster needs at least one [[node]]".into()));
    }
    if raw.node.len() > usize::from(u8::MAX) {
        return Err(err("node".into(), format!("{} nodes, at most 255", raw.node.len())));
    }
    let mut nodes: Vec<Node> = Vec::new();
    for (i, n) in raw.node.into_iter().enumerate() {
        let key = |k: &str| format!("node[{i}].{k}");
        check_name(&n.name).map_err(|r| err(key("name"), r))?;
        if let Some(first) = nodes.iter().position(|m| m.name == n.name) {
            return Err(err(
                key("name"),
                format!("duplicate node name {:?} (node[{first}])", n.name),
            ));
        }
        let memory_mib = match &n.memory {
            Some(m) => Some(memory(m).map_err(|r| err(key("memory"), r))?),
            None => None,
        };
        if n.manifest.is_empty() {
            return Err(err(key("manifest"), "empty path".into()));
        }
        let arch = match n.arch {
            RawArch::Riscv64 => Arch::Riscv64,
            RawArch::X86_64 => Arch::X86_64,
        };
        nodes.push(Node {
            name: n.name,
            arch,
            manifest: n.manifest.into(),
            memory_mib,
            allow: n.allow,
        });
    }
    let node_of = |name: &str, key: String| {
        nodes.iter().position(|n| n.name == name).ok_or_else(|| {
            let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            err(key, format!("unknown node {name:?} (nodes: {})", names.join(", ")))
        })
    };

    let mut links: Vec<Link> = Vec::new();
    // Which tree of links each node is in: a link within one tree would close a loop.
    let mut tree: Vec<usize> = (0..nodes.len()).collect();
    for (i, l) in raw.link.into_iter().enumerate() {
        let key = |k: &str| format!("link[{i}].{k}");
        let [a, b] = l.between.as_slice() else {
            return Err(err(
                key("between"),
                format!("a link joins two nodes, not {}", l.between.len()),
            ));
        };
        let ends = [node_of(a, key("between"))?, node_of(b, key("between"))?];
        if ends[0] == ends[1] {
            return Err(err(key("between"), format!("both ends are {a:?}")));
        }
        let name = l.name.clone().unwrap_or_else(|| format!("{a}-{b}"));
        check_name(&name).map_err(|r| err(key("name"), r))?;
        if let Some(first) = links.iter().position(|m| m.name == name) {
            return Err(err(key("name"), format!("duplicate link name {name:?} (link[{first}])")));
        }
        let (ta, tb) = (tree[ends[0]], tree[ends[1]]);
        if ta == tb {
            return Err(err(
                key("between"),
                format!(
                    "{a:?} and {b:?} are joined already through other links: this link would \
                     close a loop, around which the switches would pass frames forever (the \
                     links must form a tree)"
                ),
            ));
        }
        for t in tree.iter_mut().filter(|t| **t == tb) {
            *t = ta;
        }
        let filter = Filter {
            loss: percent(l.loss).map_err(|r| err(key("loss"), r))?.unwrap_or(0.0),
            dup: percent(l.dup).map_err(|r| err(key("dup"), r))?.unwrap_or(0.0),
            delay_ms: delay(l.delay.as_deref()).map_err(|r| err(key("delay"), r))?.unwrap_or(0),
        };
        links.push(Link { name, ends, filter });
    }
    let link_of = |name: &str, key: String| {
        links.iter().position(|l| l.name == name).ok_or_else(|| {
            let names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
            let known = if names.is_empty() { "none".into() } else { names.join(", ") };
            err(key, format!("unknown link {name:?} (links: {known})"))
        })
    };

    let mut events = Vec::new();
    for (i, e) in raw.event.into_iter().enumerate() {
        let key = |k: &str| format!("event[{i}].{k}");
        let line = err(format!("event[{i}]"), String::new()).line.unwrap_or(0);
        let when = match (&e.at, &e.when) {
            (Some(at), None) => When::At(duration(at).map_err(|r| err(key("at"), r))?),
            (None, Some(w)) => {
                if w.line.is_empty() {
                    return Err(err(key("when.line"), "empty text: give some to look for".into()));
                }
                When::Line { node: node_of(&w.node, key("when.node"))?, text: w.line.clone() }
            }
            (Some(_), Some(_)) => {
                return Err(err(key("when"), "give `at` or `when`, not both".into()));
            }
            (None, None) => {
                return Err(err(
                    format!("event[{i}]"),
                    "no time: give `at = \"2s\"` (host time after the start) or `when = { node \
                     = \"a\", line = \"text\" }`"
                        .into(),
                ));
            }
        };
        let actions =
            [("kill", &e.kill), ("cut", &e.cut), ("restore", &e.restore), ("set", &e.set)];
        let given: Vec<_> = actions.iter().filter(|(_, v)| v.is_some()).collect();
        let [(what, Some(target))] = given.as_slice() else {
            let reason = if given.is_empty() {
                "no action: give one of `kill`, `cut`, `restore` or `set`".into()
            } else {
                let names: Vec<&str> = given.iter().map(|(n, _)| *n).collect();
                format!("one action per event, not {}", names.join(" and "))
            };
            return Err(err(format!("event[{i}]"), reason));
        };
        let (what, target) = (*what, target.as_str());
        if e.expected.is_some() && what != "kill" {
            return Err(err(key("expected"), "only a `kill` can be expected".into()));
        }
        if what != "set" {
            for (name, given) in
                [("loss", e.loss.is_some()), ("dup", e.dup.is_some()), ("delay", e.delay.is_some())]
            {
                if given {
                    return Err(err(key(name), format!("only `set` changes a link, not `{what}`")));
                }
            }
        }
        let action = match what {
            "kill" => Action::Kill {
                node: node_of(target, key("kill"))?,
                expected: e.expected.unwrap_or(false),
            },
            "cut" => Action::Cut(link_of(target, key("cut"))?),
            "restore" => Action::Restore(link_of(target, key("restore"))?),
            _ => {
                let link = link_of(target, key("set"))?;
                let loss = percent(e.loss).map_err(|r| err(key("loss"), r))?;
                let dup = percent(e.dup).map_err(|r| err(key("dup"), r))?;
                let delay_ms = delay(e.delay.as_deref()).map_err(|r| err(key("delay"), r))?;
                if loss.is_none() && dup.is_none() && delay_ms.is_none() {
                    return Err(err(
                        key("set"),
                        "nothing to set: give `loss`, `dup` or `delay`".into(),
                    ));
                }
                Action::Set { link, loss, dup, delay_ms }
            }
        };
        events.push(Event { when, action, line });
    }
    Ok(Cluster { clock, timeout, nodes, links, events })
}

/// A node's or link's name: what log prefixes and messages show.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid name {name:?}: 1 to 32 letters, digits, `-` or `_` (it prefixes log lines)"
        ))
    }
}

fn duration(text: &str) -> Result<Duration, String> {
    manifest::parse_duration(text)
        .map(Duration::from_nanos)
        .map_err(|e| format!("invalid duration {text:?}: {e}"))
}

fn memory(text: &str) -> Result<u32, String> {
    let bytes = manifest::parse_size(text).map_err(|e| format!("invalid size {text:?}: {e}"))?;
    const MIB: u64 = 1 << 20;
    if bytes % MIB != 0 || bytes == 0 {
        return Err(format!("{text:?} is not a whole number of MiB"));
    }
    u32::try_from(bytes / MIB).map_err(|_| format!("{text:?} is too large"))
}

fn percent(value: Option<f64>) -> Result<Option<f64>, String> {
    match value {
        Some(p) if !(0.0..=100.0).contains(&p) => {
            Err(format!("{p} is not a percentage (0 to 100)"))
        }
        other => Ok(other),
    }
}

/// A link's delay: whole milliseconds, as `wirefilter` takes it.
fn delay(text: Option<&str>) -> Result<Option<u64>, String> {
    let Some(text) = text else { return Ok(None) };
    let d = duration(text)?;
    if d.subsec_nanos() % 1_000_000 != 0 {
        return Err(format!("{text:?} is not a whole number of milliseconds (wirefilter's unit)"));
    }
    Ok(Some(d.as_millis() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[cluster]
clock = "host"
timeout = "90s"

[[node]]
name = "a"
arch = "riscv64"
manifest = "manifests/minimal.toml"

[[node]]
name = "b"
arch = "x86_64"
manifest = "manifests/minimal.toml"
memory = "64M"

[[node]]
name = "c"
arch = "riscv64"
manifest = "manifests/minimal.toml"

[[link]]
between = ["a", "b"]
loss = 10

[[link]]
name = "bc"
between = ["b", "c"]
delay = "20ms"
dup = 2.5

[[event]]
when = { node = "a", line = "shutdown" }
kill = "c"
expected = true

[[event]]
at = "2s"
set = "a-b"
loss = 50

[[event]]
at = "3s"
cut = "bc"
"#;

    #[test]
    fn a_good_cluster_is_read_whole() {
        let c = parse("good.toml", GOOD).unwrap();
        assert_eq!(c.clock, Clock::Host);
        assert_eq!(c.timeout, Duration::from_secs(90));
        assert_eq!(c.nodes.len(), 3);
        assert_eq!(c.nodes[1].arch, Arch::X86_64);
        assert_eq!(c.nodes[1].memory_mib, Some(64));
        assert_eq!(c.nodes[0].memory_mib, None);
        assert_eq!(c.links[0].name, "a-b");
        assert_eq!(c.links[0].ends, [0, 1]);
        assert_eq!(c.links[0].filter, Filter { loss: 10.0, dup: 0.0, delay_ms: 0 });
        assert_eq!(c.links[1].filter, Filter { loss: 0.0, dup: 2.5, delay_ms: 20 });
        assert_eq!(c.events[0].when, When::Line { node: 0, text: "shutdown".into() });
        assert_eq!(c.events[0].action, Action::Kill { node: 2, expected: true });
        assert_eq!(c.events[0].line, 32);
        assert_eq!(c.events[1].when, When::At(Duration::from_secs(2)));
        assert_eq!(
            c.events[1].action,
            Action::Set { link: 0, loss: Some(50.0), dup: None, delay_ms: None }
        );
        assert_eq!(c.events[2].action, Action::Cut(1));
    }

    #[test]
    fn the_clock_is_paced_unless_the_manifest_says_otherwise() {
        let node = "[[node]]\nname = \"a\"\narch = \"riscv64\"\nmanifest = \"m.toml\"\n";
        assert_eq!(parse("c.toml", node).unwrap().clock, Clock::Paced);
        for (word, clock) in [("paced", Clock::Paced), ("virtual", Clock::Virtual)] {
            let text = format!("[cluster]\nclock = \"{word}\"\n{node}");
            assert_eq!(parse("c.toml", &text).unwrap().clock, clock);
        }
        let e = parse("c.toml", &format!("[cluster]\nclock = \"wall\"\n{node}")).unwrap_err();
        assert!(e.to_string().starts_with("c.toml:2:"), "{e}");
    }

    /// Every example under `clusters/` and every test cluster is a good cluster manifest.
    #[test]
    fn the_examples_are_good() {
        let root = tool_base::util::root();
        let mut n = 0;
        for dir in ["clusters", "tests/clusters"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "toml") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    if let Err(e) = parse(&path.display().to_string(), &text) {
                        panic!("{e}");
                    }
                    n += 1;
                }
            }
        }
        assert!(n >= 7, "only {n} clusters");
    }

    /// Every `tests/clusters/bad/*.toml` fails with the message of its `# expect: ` line.
    #[test]
    fn every_bad_cluster_fails_where_it_says() {
        let dir = tool_base::util::root().join("tests/clusters/bad");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        assert!(files.len() >= 10, "only {} bad clusters in {}", files.len(), dir.display());
        let mut wrong = Vec::new();
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let want = text
                .lines()
                .find_map(|l| l.strip_prefix("# expect: "))
                .unwrap_or_else(|| panic!("{}: no `# expect: ` line", path.display()));
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            match parse(&name, &text) {
                Ok(_) => wrong.push(format!("{name}: accepted, want `{want}`")),
                Err(e) => {
                    let got = e.to_string();
                    if !got.starts_with(&name) || !got.contains(want) {
                        wrong.push(format!("{name}: got `{got}`, want `{want}`"));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
