//! `cargo xtask run --trace FILE.json`: the records of a run as one timeline in the Chrome
//! trace event format (the JSON object `{"traceEvents": [...]}` that Perfetto and
//! `chrome://tracing` open), on the kernel's virtual clock.
//!
//! The records are those the other readers of this crate know, plus the kernel's fault
//! records, all printed with `trace=sched` (docs/debugging.md lists their formats):
//! - `sched period: domain=I start=NS end=NS guaranteed=NS extra=NS missed=B` ([`crate::cpu`]),
//! - `fault served: domain=I addr=0xA access=K start=NS end=NS` (a page fault delivered to the
//!   domain's activation handler at `start`, and the handler's `resume` at `end`),
//! - `disk period: stream=S ...` and `net period: stream=S ...` ([`crate::disk_trace`]),
//! - the kernel's `revocation: domain NAME ...` lines, taken at their log timestamp.
//!
//! The timeline has one process per domain (`pid` = its index + 1, named after it) with a
//! track for its CPU periods (an `X` event per period, its CPU time in `args`; an `i` event at
//! each missed deadline; a counter of its share of the CPU) and one for its memory (an `X`
//! event per page fault, from delivery to resume; an `i` event per revocation notice and
//! release). The disk's and the network's streams are processes of their own, one track per
//! stream, an `X` event per period. Every `ts` and `dur` is in microseconds (with fractions:
//! the records are in ns).
//!
//! [`check`] checks a timeline's structure (what a viewer needs); the suite and the tests use
//! it on real runs.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use crate::cpu::{self, Period};
use crate::cpu_trace::{self, DomainInfo, timestamp_ns};
use crate::disk_trace::{self, DISK, NET};
use crate::log::LogLine;
use crate::records::{DiskPeriod, write};

/// The words that start a kernel fault record.
pub const FAULT_MARK: &str = "fault served: ";

/// The `pid` of the disk's streams (domains are 1 up to the number of domains).
pub const DISK_PID: u64 = 100_000;
/// The `pid` of the network's streams.
pub const NET_PID: u64 = 100_001;
/// A domain's track of CPU periods (`tid` within its process).
pub const CPU_TID: u64 = 1;
/// A domain's track of page faults and revocations.
pub const MEMORY_TID: u64 = 2;

/// One page fault from its delivery to the domain's handler to the handler's resume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The domain's index.
    pub domain: usize,
    /// The faulting address.
    pub addr: u64,
    /// `abi::Access` as a number: 0 read, 1 write, 2 execute.
    pub access: u64,
    /// Delivery and resume, ns of the kernel's clock.
    pub start: u64,
    /// See `start`.
    pub end: u64,
}

/// The fault record in `line`, if it is one.
pub fn fault(line: &LogLine) -> Option<Fault> {
    let text = line.message.strip_prefix(FAULT_MARK)?;
    let n = cpu::numbers(text);
    let addr = text.split_whitespace().find_map(|w| w.strip_prefix("addr=0x"))?;
    Some(Fault {
        domain: *n.get("domain")? as usize,
        addr: u64::from_str_radix(addr, 16).ok()?,
        access: *n.get("access")?,
        start: *n.get("start")?,
        end: *n.get("end")?,
    })
}

/// The page faults each domain was delivered, by name, from the run summary's lines
/// `  NAME: N page faults delivered to its stretch drivers`.
pub fn reported_faults(log: &[LogLine]) -> BTreeMap<String, u64> {
    log.iter()
        .filter_map(|l| {
            let text = l.message.trim_start();
            let (name, rest) = text.split_once(": ")?;
            let n = rest.strip_suffix(" page faults delivered to its stretch drivers")?;
            Some((name.to_string(), n.parse().ok()?))
        })
        .collect()
}

/// `ns` in µs, as a JSON number.
fn us(ns: u64) -> Value {
    json!(ns as f64 / 1000.0)
}

fn meta(kind: &str, pid: u64, tid: u64, name: &str) -> Value {
    json!({"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
}

fn sort_index(kind: &str, pid: u64, tid: u64, index: u64) -> Value {
    json!({"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": index}})
}

/// The timeline of a run's `log`, whose domains are `domains` (from the manifest; domains
/// the records name but `domains` does not are named `#I`), as the JSON object written.
pub fn timeline(domains: &[DomainInfo], log: &[LogLine]) -> Value {
    let periods: Vec<Period> = log.iter().filter_map(cpu::period).collect();
    let faults: Vec<Fault> = log.iter().filter_map(fault).collect();
    let mut all = cpu_trace::complete(domains, &periods);
    if let Some(last) = faults.iter().map(|f| f.domain).max() {
        let marks: Vec<Period> = (0..=last)
            .map(|domain| Period {
                domain,
                start: 0,
                end: 0,
                guaranteed: 0,
                extra: 0,
                missed: false,
            })
            .collect();
        all = cpu_trace::complete(&all, &marks);
    }
    let pid = |domain: usize| domain as u64 + 1;
    let mut meta_events = Vec::new();
    for d in &all {
        let p = pid(d.index);
        meta_events.push(meta("process_name", p, 0, &d.name));
        meta_events.push(sort_index("process_sort_index", p, 0, p));
        meta_events.push(meta("thread_name", p, CPU_TID, "CPU periods"));
        meta_events.push(meta("thread_name", p, MEMORY_TID, "page faults, revocations"));
    }
    let mut events = Vec::new();
    for p in &periods {
        let len = p.end.saturating_sub(p.start);
        events.push(json!({
            "name": "period", "cat": "cpu", "ph": "X", "pid": pid(p.domain), "tid": CPU_TID,
            "ts": us(p.start), "dur": us(len),
            "args": {"guaranteed_us": us(p.guaranteed), "extra_us": us(p.extra), "missed": p.missed},
        }));
        let share = |ns: u64| ns as f64 * 100.0 / len.max(1) as f64;
        events.push(json!({
            "name": "CPU %", "cat": "cpu", "ph": "C", "pid": pid(p.domain), "tid": CPU_TID,
            "ts": us(p.start),
            "args": {"guaranteed": share(p.guaranteed), "extra": share(p.extra)},
        }));
        if p.missed {
            events.push(json!({
                "name": "deadline missed", "cat": "cpu", "ph": "i", "s": "t",
                "pid": pid(p.domain), "tid": CPU_TID, "ts": us(p.end),
            }));
        }
    }
    for f in &faults {
        let access = ["read", "write", "execute"].get(f.access as usize).copied().unwrap_or("?");
        events.push(json!({
            "name": "page fault", "cat": "memory", "ph": "X", "pid": pid(f.domain),
            "tid": MEMORY_TID, "ts": us(f.start), "dur": us(f.end.saturating_sub(f.start)),
            "args": {"addr": format!("{:#x}", f.addr), "access": access},
        }));
    }
    for line in log {
        let Some(rest) = line.message.strip_prefix("revocation: domain ") else { continue };
        let Some(at) = timestamp_ns(line) else { continue };
        let Some(d) = all
            .iter()
            .find(|d| rest.strip_prefix(d.name.as_str()).is_some_and(|r| r.starts_with(' ')))
        else {
            continue;
        };
        let name =
            if rest.contains(" released ") { "revocation released" } else { "revocation notice" };
        events.push(json!({
            "name": name, "cat": "memory", "ph": "i", "s": "t", "pid": pid(d.index),
            "tid": MEMORY_TID, "ts": us(at), "args": {"line": line.message},
        }));
    }
    for (trace, p, what) in [(DISK, DISK_PID, "disk streams"), (NET, NET_PID, "network streams")] {
        let records: Vec<DiskPeriod> = disk_trace::records(&trace, log);
        let streams = disk_trace::streams(&records);
        if streams.is_empty() {
            continue;
        }
        meta_events.push(meta("process_name", p, 0, what));
        meta_events.push(sort_index("process_sort_index", p, 0, p));
        for (i, s) in streams.iter().enumerate() {
            meta_events.push(meta("thread_name", p, i as u64 + 1, &s.name));
        }
        for r in &records {
            let tid = streams.iter().position(|s| s.name == r.stream).unwrap_or(0) as u64 + 1;
            events.push(json!({
                "name": "period", "cat": trace.name, "ph": "X", "pid": p, "tid": tid,
                "ts": us(r.start), "dur": us(r.end.saturating_sub(r.start)),
                "args": {"guaranteed_us": us(r.guaranteed), "extra_us": us(r.extra), "missed": r.missed},
            }));
        }
    }
    // By start, the longer first at the same start, so that every track reads in order.
    let key = |e: &Value| (e["ts"].as_f64().unwrap_or(0.0), -e["dur"].as_f64().unwrap_or(0.0));
    events.sort_by(|a, b| key(a).partial_cmp(&key(b)).unwrap_or(std::cmp::Ordering::Equal));
    meta_events.extend(events);
    json!({"traceEvents": meta_events, "displayTimeUnit": "ms"})
}

/// Writes the timeline of `log` to `path`; returns how many events it has.
pub fn save(path: &Path, domains: &[DomainInfo], log: &[LogLine]) -> Result<usize> {
    let t = timeline(domains, log);
    let n = t["traceEvents"].as_array().map_or(0, Vec::len);
    write(path, &format!("{t}\n"))?;
    Ok(n)
}

/// What [`check`] found in a timeline it accepted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Each process's name, by `pid`.
    pub processes: BTreeMap<u64, String>,
    /// How many `X` events of each name each process has: `(pid, name) -> count`.
    pub complete: BTreeMap<(u64, String), usize>,
}

impl Summary {
    /// The `pid` of the process named `name`.
    pub fn pid(&self, name: &str) -> Option<u64> {
        self.processes.iter().find(|(_, n)| *n == name).map(|(p, _)| *p)
    }

    /// How many `X` events named `event` the process named `process` has.
    pub fn count(&self, process: &str, event: &str) -> usize {
        self.pid(process)
            .and_then(|p| self.complete.get(&(p, event.to_string())))
            .copied()
            .unwrap_or(0)
    }
}

/// Checks that `text` is a timeline a viewer reads as meant: a JSON object with a
/// `traceEvents` array; every event with a string `name` and `ph` of `X`, `i`, `C` or `M`,
/// integer `pid` and `tid`; `ts` a number at least 0 (but on `M`), `dur` one on `X`, `s` one of
/// `g`, `p`, `t` on `i`, number `args` on `C`, `args.name` a string on the `M` events naming
/// processes and threads; every track (`pid`, `tid`) with an event named by a `thread_name`
/// and its process by a `process_name`; on each track, timestamps that never go back and `X`
/// events that nest (each ends before the one it starts in ends).
pub fn check(text: &str) -> Result<Summary> {
    let v: Value = serde_json::from_str(text)?;
    let Some(events) = v.get("traceEvents").and_then(Value::as_array) else {
        bail!("no traceEvents array at the top level");
    };
    let mut summary = Summary::default();
    let mut threads = BTreeMap::new();
    // Per track: the last start, and the ends of the X events open at it.
    let mut tracks: BTreeMap<(u64, u64), (f64, Vec<f64>)> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let err = |what: &str| anyhow::anyhow!("event {i} ({e}): {what}");
        let name = e.get("name").and_then(Value::as_str).ok_or_else(|| err("no string name"))?;
        let ph = e.get("ph").and_then(Value::as_str).ok_or_else(|| err("no string ph"))?;
        let pid = e.get("pid").and_then(Value::as_u64).ok_or_else(|| err("no integer pid"))?;
        let tid = e.get("tid").and_then(Value::as_u64).ok_or_else(|| err("no integer tid"))?;
        if ph == "M" {
            let arg = &e["args"];
            match name {
                "process_name" | "thread_name" => {
                    let n = arg["name"].as_str().ok_or_else(|| err("no string args.name"))?;
                    if name == "process_name" {
                        summary.processes.insert(pid, n.to_string());
                    } else {
                        threads.insert((pid, tid), n.to_string());
                    }
                }
                "process_sort_index" | "thread_sort_index" => {
                    arg["sort_index"].as_i64().ok_or_else(|| err("no integer sort_index"))?;
                }
                _ => bail!(err("an unknown metadata event")),
            }
            continue;
        }
        let ts = e.get("ts").and_then(Value::as_f64).ok_or_else(|| err("no number ts"))?;
        if ts < 0.0 {
            bail!(err("ts before 0"));
        }
        let (last, open) = tracks.entry((pid, tid)).or_insert((0.0, Vec::new()));
        if ts < *last {
            bail!(err(&format!("ts goes back on its track (after {last})")));
        }
        *last = ts;
        while open.last().is_some_and(|&end| end <= ts) {
            open.pop();
        }
        match ph {
            "X" => {
                let dur =
                    e.get("dur").and_then(Value::as_f64).ok_or_else(|| err("no number dur"))?;
                if dur < 0.0 {
                    bail!(err("dur below 0"));
                }
                let end = ts + dur;
                if let Some(&outer) = open.last()
                    && end > outer
                {
                    bail!(err(&format!(
                        "overlaps an event that ends at {outer} without nesting in it"
                    )));
                }
                open.push(end);
                *summary.complete.entry((pid, name.to_string())).or_default() += 1;
            }
            "i" => {
                if !matches!(e.get("s").and_then(Value::as_str), Some("g" | "p" | "t")) {
                    bail!(err("an instant event without s of g, p or t"));
                }
            }
            "C" => {
                let args =
                    e.get("args").and_then(Value::as_object).ok_or_else(|| err("no args"))?;
                if args.is_empty() || !args.values().all(Value::is_number) {
                    bail!(err("a counter's args are not all numbers"));
                }
            }
            _ => bail!(err("ph is not X, i, C or M")),
        }
    }
    for &(pid, tid) in tracks.keys() {
        if !threads.contains_key(&(pid, tid)) {
            bail!("track pid {pid} tid {tid} has no thread_name");
        }
        if !summary.processes.contains_key(&pid) {
            bail!("process {pid} has no process_name");
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: &str, message: &str) -> LogLine {
        LogLine { level: "INFO".into(), timestamp: Some(t.into()), message: message.into() }
    }

    /// Lines as a run of two domains prints them (with a pager's fault in `b`).
    fn log() -> Vec<LogLine> {
        [
            ("0.010000", "sched period: domain=0 start=0 end=10000000 guaranteed=5000000 extra=0 missed=false"),
            ("0.010000", "sched period: domain=1 start=0 end=10000000 guaranteed=2000000 extra=0 missed=true"),
            ("0.012000", "fault served: domain=1 addr=0x4001000 access=1 start=11000000 end=11500000"),
            ("0.013000", "revocation: domain b (holding 4 optimistic frames, the most) asked to release 2 for domain a: sent=13000 us deadline=15000 us period=10000 us slice=2000 us"),
            ("0.014000", "revocation: domain b released 2 optimistic frames in 1000 us"),
            ("0.020000", "sched period: domain=0 start=10000000 end=20000000 guaranteed=5000000 extra=1000 missed=false"),
            ("0.020000", "[blk] virtio-blk: disk period: stream=b start=0 end=20000000 guaranteed=300000 extra=0 missed=false"),
            ("0.021000", "  b: 1 page faults delivered to its stretch drivers"),
        ]
        .into_iter()
        .map(|(t, m)| line(t, m))
        .collect()
    }

    fn domains() -> Vec<DomainInfo> {
        ["a", "b"]
            .iter()
            .enumerate()
            .map(|(index, name)| DomainInfo {
                index,
                name: name.to_string(),
                period_ns: 10_000_000,
                slice_ns: 2_000_000,
                extra: false,
                latency_ns: 0,
            })
            .collect()
    }

    #[test]
    fn fault_records_and_the_summary_are_read() {
        let log = log();
        assert_eq!(
            fault(&log[2]),
            Some(Fault {
                domain: 1,
                addr: 0x400_1000,
                access: 1,
                start: 11_000_000,
                end: 11_500_000
            })
        );
        assert_eq!(fault(&log[0]), None);
        assert_eq!(reported_faults(&log), BTreeMap::from([("b".to_string(), 1)]));
    }

    #[test]
    fn a_run_becomes_a_timeline_with_every_record() {
        let text = timeline(&domains(), &log()).to_string();
        let s = check(&text).unwrap();
        assert_eq!(s.processes.get(&1).map(String::as_str), Some("a"));
        assert_eq!(s.count("a", "period"), 2);
        assert_eq!(s.count("b", "period"), 1);
        assert_eq!(s.count("b", "page fault"), 1);
        assert_eq!(s.count("disk streams", "period"), 1);
        let v: Value = serde_json::from_str(&text).unwrap();
        let events = v["traceEvents"].as_array().unwrap();
        let fault = events.iter().find(|e| e["name"] == "page fault").unwrap();
        assert_eq!(
            (fault["ts"].as_f64(), fault["dur"].as_f64(), fault["pid"].as_u64()),
            (Some(11_000.0), Some(500.0), Some(2))
        );
        assert_eq!(fault["args"]["access"], "write");
        let names = |n: &str| events.iter().filter(|e| e["name"] == n).count();
        assert_eq!(names("deadline missed"), 1);
        assert_eq!(names("revocation notice"), 1);
        assert_eq!(names("revocation released"), 1);
        assert_eq!(names("CPU %"), 3);
    }

    /// `text` with `change` made to the first event named `name`.
    fn changed(name: &str, change: impl FnOnce(&mut Value)) -> String {
        let mut v = timeline(&domains(), &log());
        let events = v["traceEvents"].as_array_mut().unwrap();
        change(events.iter_mut().find(|e| e["name"] == name).unwrap());
        v.to_string()
    }

    #[test]
    fn the_check_finds_what_a_viewer_would_misread() {
        let fails = |text: String, why: &str| {
            let e = check(&text).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        };
        fails(changed("page fault", |e| e["dur"] = Value::Null), "no number dur");
        fails(changed("page fault", |e| e["pid"] = json!("2")), "no integer pid");
        fails(changed("period", |e| e["ph"] = json!("B")), "ph is not");
        fails(changed("deadline missed", |e| e["s"] = json!("x")), "without s");
        fails(changed("CPU %", |e| e["args"]["extra"] = json!("1")), "not all numbers");
        fails(changed("process_name", |e| e["args"]["name"] = json!(1)), "no string args.name");
        // The first period of `a` made longer than its start's distance to the next.
        let mut v = timeline(&domains(), &log());
        let events = v["traceEvents"].as_array_mut().unwrap();
        let first = events.iter_mut().find(|e| e["name"] == "period" && e["pid"] == 1).unwrap();
        first["dur"] = json!(10_000.5);
        fails(v.to_string(), "without nesting");
        // A thread without a name.
        fails(
            changed("thread_name", |e| e["name"] = json!("thread_sort_index")),
            "no integer sort_index",
        );
        let mut v = timeline(&domains(), &log());
        let events = v["traceEvents"].as_array_mut().unwrap();
        events.retain(|e| !(e["name"] == "thread_name" && e["pid"] == 1 && e["tid"] == 1));
        fails(v.to_string(), "has no thread_name");
        // Events out of order on a track.
        let mut v = timeline(&domains(), &log());
        let events = v["traceEvents"].as_array_mut().unwrap();
        let at = events.iter().rposition(|e| e["name"] == "period" && e["pid"] == 1).unwrap();
        let late = events.remove(at);
        events.push(late.clone());
        events.push(json!({"name": "x", "ph": "i", "s": "t", "pid": 1, "tid": 1, "ts": 0.0}));
        fails(v.to_string(), "goes back");
        fails("{\"events\": []}".into(), "no traceEvents");
    }
}
