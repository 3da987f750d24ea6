//! What a run of `bench disk` measured ([`Measured`]), read from the lines of its boot's log:
//! each `diskread` client's summary, the driver's `disk period:` lines (per stream, per USD
//! period), its `disk waits:` summary and its `disk scheduler:` cost line. The host simulation
//! fills the same type, so the same figures and bars apply to both.

use qemu_run::log::field;

/// A client's `diskread NAME: done ...` line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientDone {
    /// Its channel's name.
    pub name: String,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// When its first request was issued and its last completed, ns by its clock.
    pub first_ns: u64,
    /// See `first_ns`.
    pub last_ns: u64,
    /// Its workload's length, ns.
    pub elapsed_ns: u64,
    /// Mean request latency, ns.
    pub mean_latency_ns: u64,
    /// Longest request latency, ns.
    pub max_latency_ns: u64,
}

/// A `disk period:` line: one stream's use of the disk in one USD period (the records
/// `cargo xtask run --disk-out` writes).
pub use qemu_run::disk_trace::DiskPeriod as Period;

/// The driver's `disk waits:` line: the totals of its anticipation waits, as the scheduler
/// keeps them.
pub use disk_sched::WaitTotals as Waits;

/// The driver's `disk scheduler:` line: its own time in scheduler calls.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchedCost {
    /// The policy.
    pub policy: String,
    /// Whether it anticipated.
    pub anticipation: bool,
    /// Requests scheduled.
    pub requests: u64,
    /// Time in scheduler calls, ns by the driver's clock (instructions under `-icount`).
    pub ns: u64,
    /// `ns` over `requests`.
    pub per_request_ns: u64,
}

/// Everything a run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    /// Each client's summary, in the order of their names.
    pub clients: Vec<ClientDone>,
    /// The USD periods, in the order printed.
    pub periods: Vec<Period>,
    /// The waits, if the driver said.
    pub waits: Option<Waits>,
    /// The scheduler's cost, if the driver said.
    pub sched: Option<SchedCost>,
}

/// The word after `key=` in `line` (up to the next space).
fn word<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let pattern = format!("{key}=");
    line.split(' ').find_map(|w| w.strip_prefix(pattern.as_str()))
}

fn flag(line: &str, key: &str) -> Option<bool> {
    match word(line, key)? {
        "true" | "on" => Some(true),
        "false" | "off" => Some(false),
        _ => None,
    }
}

/// The client summary in `line`, if it is one.
pub fn client_done(line: &str) -> Option<ClientDone> {
    let rest = &line[line.find("diskread ")? + "diskread ".len()..];
    let (name, fields) = rest.split_once(": done ")?;
    if name.is_empty() || name.contains(' ') {
        return None;
    }
    let f = |k| field(fields, k);
    Some(ClientDone {
        name: name.to_string(),
        reads: f("reads")?,
        writes: f("writes")?,
        bytes: f("bytes")?,
        first_ns: f("first_ns")?,
        last_ns: f("last_ns")?,
        elapsed_ns: f("elapsed_ns")?,
        mean_latency_ns: f("mean_latency_ns")?,
        max_latency_ns: f("max_latency_ns")?,
    })
}

/// The period record in `line`, if it is one.
pub fn period(line: &str) -> Option<Period> {
    qemu_run::disk_trace::period_in(line)
}

/// The waits summary in `line`, if it is one.
pub fn waits(line: &str) -> Option<Waits> {
    let rest = &line[line.find("disk waits: ")?..];
    let f = |k| field(rest, k);
    Some(Waits {
        count: f("count")?,
        anticipated: f("anticipated")?,
        timed_out: f("timed_out")?,
        abandoned: f("abandoned")?,
        exceeded: f("exceeded")?,
        late_max_ns: f("late_max_ns")?,
        longest_ns: f("longest_ns")?,
    })
}

/// The scheduler cost in `line`, if it is one.
pub fn sched_cost(line: &str) -> Option<SchedCost> {
    let rest = &line[line.find("disk scheduler: ")?..];
    Some(SchedCost {
        policy: word(rest, "policy")?.to_string(),
        anticipation: flag(rest, "anticipation")?,
        requests: field(rest, "requests")?,
        ns: field(rest, "ns")?,
        per_request_ns: field(rest, "per_request_ns")?,
    })
}

impl Measured {
    /// What the log `lines` say.
    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a str>) -> Measured {
        let mut m = Measured::default();
        for l in lines {
            if let Some(c) = client_done(l) {
                m.clients.push(c);
            } else if let Some(p) = period(l) {
                m.periods.push(p);
            } else if let Some(w) = waits(l) {
                m.waits = Some(w);
            } else if let Some(s) = sched_cost(l) {
                m.sched = Some(s);
            }
        }
        // r0, r1, ..., r10: by the number after the stem.
        m.clients.sort_by_key(|c| (c.name.len(), c.name.clone()));
        m
    }

    /// The window the clients read in: the first issue to the last completion, ns.
    pub fn window_ns(&self) -> u64 {
        let first = self.clients.iter().map(|c| c.first_ns).min().unwrap_or(0);
        let last = self.clients.iter().map(|c| c.last_ns).max().unwrap_or(0);
        last.saturating_sub(first).max(1)
    }

    /// All clients' MB/s over the window.
    pub fn total_mbps(&self) -> f64 {
        let bytes: u64 = self.clients.iter().map(|c| c.bytes).sum();
        bytes as f64 / (self.window_ns() as f64 / 1e9) / 1e6
    }

    /// Client `i`'s MB/s over the window, if it reported.
    pub fn client_mbps(&self, i: usize) -> Option<f64> {
        let c = self.clients.get(i)?;
        Some(c.bytes as f64 / (self.window_ns() as f64 / 1e9) / 1e6)
    }

    /// The periods of stream `name`.
    pub fn periods_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Period> + 'a {
        self.periods.iter().filter(move |p| p.stream == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
[r1] diskread r1: done reads=200 writes=0 bytes=13107200 first_ns=1000000 last_ns=3001000000 elapsed_ns=3000000000 mean_latency_ns=7000000 max_latency_ns=990000000
[r0] diskread r0: done reads=100 writes=0 bytes=6553600 first_ns=2000000 last_ns=3000000000 elapsed_ns=2998000000 mean_latency_ns=14000000 max_latency_ns=20000000
[blk] disk period: stream=r0 start=0 end=1000000000 guaranteed=499000000 extra=0 missed=false
[blk] disk period: stream=r1 start=0 end=1000000000 guaranteed=400000000 extra=12 missed=true
[blk] disk waits: count=10 anticipated=7 timed_out=2 abandoned=1 exceeded=0 late_max_ns=35000 longest_ns=16000000
[blk] disk scheduler: policy=aged-sptf anticipation=on requests=300 ns=6000000 per_request_ns=20000
kernel: idle 5 of 10 ns
";

    #[test]
    fn every_line_is_read() {
        let m = Measured::from_lines(LOG.lines());
        assert_eq!(m.clients.len(), 2);
        assert_eq!(m.clients[0].name, "r0", "sorted by name");
        assert_eq!(m.clients[1].reads, 200);
        assert_eq!(m.clients[1].max_latency_ns, 990_000_000);
        assert_eq!(m.window_ns(), 3_000_000_000);
        let total = m.total_mbps();
        assert!((total - 19_660_800.0 / 3.0 / 1e6).abs() < 1e-9, "{total}");
        assert_eq!(m.periods.len(), 2);
        assert_eq!(
            m.periods[1],
            Period {
                stream: "r1".into(),
                start: 0,
                end: 1_000_000_000,
                guaranteed: 400_000_000,
                extra: 12,
                missed: true
            }
        );
        assert_eq!(m.periods_of("r0").count(), 1);
        assert_eq!(
            m.waits,
            Some(Waits {
                count: 10,
                anticipated: 7,
                timed_out: 2,
                abandoned: 1,
                exceeded: 0,
                late_max_ns: 35_000,
                longest_ns: 16_000_000
            })
        );
        let s = m.sched.unwrap();
        assert_eq!(
            (s.policy.as_str(), s.anticipation, s.per_request_ns),
            ("aged-sptf", true, 20_000)
        );
    }

    #[test]
    fn malformed_lines_are_not_read() {
        assert_eq!(client_done("diskread r0: done reads=1"), None);
        assert_eq!(client_done("diskread : done reads=1 writes=0"), None);
        assert_eq!(
            period("disk period: stream=r0 start=0 end=1 guaranteed=1 extra=0 missed=maybe"),
            None
        );
        assert_eq!(waits("disk waits: count=1"), None);
        assert_eq!(
            sched_cost(
                "disk scheduler: policy=usd anticipation=yes requests=1 ns=1 per_request_ns=1"
            ),
            None
        );
        let m = Measured::from_lines(["nothing here", "diskread r0: started"]);
        assert_eq!(m, Measured::default());
        assert_eq!(m.window_ns(), 1);
    }

    #[test]
    fn ten_clients_sort_by_number() {
        let line = |i| {
            format!(
                "diskread r{i}: done reads=1 writes=0 bytes=1 first_ns=0 last_ns=1 elapsed_ns=1 \
                 mean_latency_ns=1 max_latency_ns=1"
            )
        };
        let lines: Vec<String> = [10, 2, 1].map(line).to_vec();
        let m = Measured::from_lines(lines.iter().map(String::as_str));
        let names: Vec<&str> = m.clients.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["r1", "r2", "r10"]);
    }
}
