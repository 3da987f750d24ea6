//! `cargo xtask run --trace FILE.json`: the records of a run as one timeline in the Chrome
//! trace event format (the JSON object `{"traceEvents": [...]}` that Perfetto and
//! `chrome://tracing` open), on the kernel's virtual clock.
//!
//! The records are those the other readers of this crate know, plus the kernel's fault,
//! scheduling and event records and a block driver's request and wait records, all printed with
//! `trace=sched` (docs/timelines.md lists their formats):
//! - `sched period: domain=I start=NS end=NS guaranteed=NS extra=NS missed=B` ([`crate::cpu`]),
//! - `fault served: domain=I addr=0xA access=K start=NS end=NS` (a page fault delivered to the
//!   domain's activation handler at `start`, and the handler's `resume` at `end`),
//! - `disk period: stream=S ...` and `net period: stream=S ...` ([`crate::disk_trace`]),
//! - the kernel's `revocation: domain NAME ...` lines, taken at their log timestamp;
//! - `sched run: domain=I at=NS` and `sched idle: at=NS` (who has the CPU from then),
//!   `activation: domain=I reason=BITS at=NS`, `event sent: from=I to=J ep=E at=NS`,
//!   `event channel: name=NAME from=I to=J data=E space=F` and `events received: domain=I ep=E
//!   count=N` (the kernel's);
//! - `disk request: stream=S sector=N sectors=N op=read|write arrived=NS dispatched=NS done=NS`
//!   and `disk wait: stream=S since=NS until=NS ended=NS end=anticipated|timed_out|abandoned`
//!   (a block driver's, with `blk_server::serve::ServeOptions::trace`).
//!
//! The timeline has one process per domain (`pid` = its index + 1, named after it) with a
//! track for its CPU periods (an `X` event per period, its CPU time in `args`; an `i` event at
//! each missed deadline; a counter of its share of the CPU) and one for its memory (an `X`
//! event per page fault, from delivery to resume; an `i` event per revocation notice and
//! release), and one for the times it ran (an `X` event per slice of the CPU it had; an `i`
//! event per activation, with its reason; a flow, `s` to `f`, per event it sent, to the
//! receiver's next slice, named after the channel). A process `CPU` has one track of who ran
//! when (an `X` event per slice, named after the domain or `idle`). The disk is a process of its
//! own: its requests from submission to completion and at the device (as many tracks as they
//! overlap), its scheduler's anticipation waits (named by how they ended), and a track per
//! stream with an `X` event per period; the network's streams likewise. Every `ts` and `dur` is
//! in microseconds (with fractions: the records are in ns).
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

/// The words that start the kernel's record of the domain it switched in (`sched run:
/// domain=I at=NS`) and of the CPU going idle (`sched idle: at=NS`).
pub const RUN_MARK: &str = "sched run: ";
/// See [`RUN_MARK`].
pub const IDLE_MARK: &str = "sched idle: ";
/// The words that start the kernel's record of an activation (`activation: domain=I
/// reason=BITS at=NS`, the bits of `abi::activation`).
pub const ACTIVATION_MARK: &str = "activation: ";
/// The words that start the kernel's record of an event sent (`event sent: from=I to=J
/// ep=E at=NS`).
pub const EVENT_MARK: &str = "event sent: ";
/// The words that start the kernel's record of an IO channel's endpoints (`event channel:
/// name=NAME from=I to=J data=E space=F`).
pub const CHANNEL_MARK: &str = "event channel: ";
/// The words that start the kernel's count of the events an endpoint received (`events
/// received: domain=I ep=E count=N`), as its domain dies or the run stops.
pub const RECEIVED_MARK: &str = "events received: ";
/// The words that start a block driver's record of a request the disk served (`disk request:
/// stream=NAME sector=N sectors=N op=read|write arrived=NS dispatched=NS done=NS`).
pub const REQUEST_MARK: &str = "disk request: ";
/// The words that start a block driver's record of an anticipation wait (`disk wait:
/// stream=NAME since=NS until=NS ended=NS end=anticipated|timed_out|abandoned`).
pub const WAIT_MARK: &str = "disk wait: ";

/// The `pid` of the CPU's process: one track, who ran when.
pub const CPU_PID: u64 = 99_999;
/// A domain's track of the times it ran, its activations and its events' flows.
pub const RUNNING_TID: u64 = 3;
/// The disk's track of anticipation waits (`tid` within [`DISK_PID`]; the streams' periods
/// are `1..`).
pub const WAIT_TID: u64 = 1_000;
/// The disk's first track of requests at the device (more if they overlap).
pub const SERVICE_TID: u64 = 2_000;
/// The disk's first track of requests from their submission to their completion.
pub const REQUEST_TID: u64 = 3_000;

/// Who has the CPU from `at` (ns): a domain, by index, or nobody (`None`: idle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnCpu {
    /// The domain switched in, `None` when the CPU idles.
    pub domain: Option<usize>,
    /// From when, ns of the kernel's clock.
    pub at: u64,
}

/// The `sched run` or `sched idle` record in `line`, if it is one.
pub fn on_cpu(line: &LogLine) -> Option<OnCpu> {
    if let Some(text) = line.message.strip_prefix(RUN_MARK) {
        let n = cpu::numbers(text);
        return Some(OnCpu { domain: Some(*n.get("domain")? as usize), at: *n.get("at")? });
    }
    let text = line.message.strip_prefix(IDLE_MARK)?;
    Some(OnCpu { domain: None, at: *cpu::numbers(text).get("at")? })
}

/// An activation of a domain: the kernel entered its activation handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Activation {
    /// The domain's index.
    pub domain: usize,
    /// Why: `abi::activation` bits (1 scheduled, 2 event, 4 fault, 8 revocation).
    pub reason: u64,
    /// When, ns of the kernel's clock.
    pub at: u64,
}

/// The activation record in `line`, if it is one.
pub fn activation(line: &LogLine) -> Option<Activation> {
    let n = cpu::numbers(line.message.strip_prefix(ACTIVATION_MARK)?);
    Some(Activation {
        domain: *n.get("domain")? as usize,
        reason: *n.get("reason")?,
        at: *n.get("at")?,
    })
}

/// The reason bits of an activation, in words (`scheduled, event`).
pub fn reason_words(reason: u64) -> String {
    let words: Vec<&str> = [(1, "scheduled"), (2, "event"), (4, "fault"), (8, "revocation")]
        .into_iter()
        .filter(|(bit, _)| reason & bit != 0)
        .map(|(_, w)| w)
        .collect();
    words.join(", ")
}

/// An event one domain sent another (`event_send`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventSent {
    /// The sender's index.
    pub from: usize,
    /// The receiver's index.
    pub to: usize,
    /// The receiver's endpoint.
    pub ep: usize,
    /// When, ns of the kernel's clock.
    pub at: u64,
}

/// The event record in `line`, if it is one.
pub fn event_sent(line: &LogLine) -> Option<EventSent> {
    let n = cpu::numbers(line.message.strip_prefix(EVENT_MARK)?);
    Some(EventSent {
        from: *n.get("from")? as usize,
        to: *n.get("to")? as usize,
        ep: *n.get("ep")? as usize,
        at: *n.get("at")?,
    })
}

/// An IO channel's endpoints: the receiver's `data` (signalled by the sender as it publishes)
/// and the sender's `space` (signalled by the receiver as it consumes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Channel {
    /// Its name in the manifest.
    pub name: String,
    /// The sender's index.
    pub from: usize,
    /// The receiver's index.
    pub to: usize,
    /// The receiver's endpoint.
    pub data: usize,
    /// The sender's endpoint.
    pub space: usize,
}

/// The value of `key=VALUE` among the words of `text`.
fn word<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// The channel record in `line`, if it is one.
pub fn channel(line: &LogLine) -> Option<Channel> {
    let text = line.message.strip_prefix(CHANNEL_MARK)?;
    let n = cpu::numbers(text);
    Some(Channel {
        name: word(text, "name")?.to_string(),
        from: *n.get("from")? as usize,
        to: *n.get("to")? as usize,
        data: *n.get("data")? as usize,
        space: *n.get("space")? as usize,
    })
}

/// How many events endpoint `ep` of domain `domain` received, by the kernel's count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// The domain's index.
    pub domain: usize,
    /// Its endpoint.
    pub ep: usize,
    /// The endpoint's count.
    pub count: u64,
}

/// The count record in `line`, if it is one.
pub fn received(line: &LogLine) -> Option<Received> {
    let n = cpu::numbers(line.message.strip_prefix(RECEIVED_MARK)?);
    Some(Received {
        domain: *n.get("domain")? as usize,
        ep: *n.get("ep")? as usize,
        count: *n.get("count")?,
    })
}

/// A request a block driver's disk served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskRequest {
    /// Its stream (its client's channels' name).
    pub stream: String,
    /// Its first sector.
    pub sector: u64,
    /// Its length in sectors.
    pub sectors: u64,
    /// A read (else a write).
    pub read: bool,
    /// Its submission (its arrival at the driver), dispatch to the device and completion,
    /// ns of the driver's clock (the kernel's).
    pub arrived: u64,
    /// See `arrived`.
    pub dispatched: u64,
    /// See `arrived`.
    pub done: u64,
}

/// The text after `mark` in a line a domain printed (`[NAME] ...`).
fn printed<'a>(line: &'a LogLine, mark: &str) -> Option<&'a str> {
    if !line.message.starts_with('[') {
        return None;
    }
    let at = line.message.find(mark)?;
    Some(&line.message[at + mark.len()..])
}

/// The disk request record in `line`, if it is one.
pub fn disk_request(line: &LogLine) -> Option<DiskRequest> {
    let text = printed(line, REQUEST_MARK)?;
    let n = cpu::numbers(text);
    Some(DiskRequest {
        stream: word(text, "stream")?.to_string(),
        sector: *n.get("sector")?,
        sectors: *n.get("sectors")?,
        read: word(text, "op")? == "read",
        arrived: *n.get("arrived")?,
        dispatched: *n.get("dispatched")?,
        done: *n.get("done")?,
    })
}

/// A wait of a block driver's scheduler for a stream's next request (anticipation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskWait {
    /// The stream waited for.
    pub stream: String,
    /// When the wait began, the timeout it had, and when it ended, ns of the driver's clock.
    pub since: u64,
    /// See `since`.
    pub until: u64,
    /// See `since`.
    pub ended: u64,
    /// How it ended: `anticipated` (the request came), `timed_out`, `abandoned` (another
    /// stream's request went first).
    pub end: String,
}

/// The disk wait record in `line`, if it is one.
pub fn disk_wait(line: &LogLine) -> Option<DiskWait> {
    let text = printed(line, WAIT_MARK)?;
    let n = cpu::numbers(text);
    Some(DiskWait {
        stream: word(text, "stream")?.to_string(),
        since: *n.get("since")?,
        until: *n.get("until")?,
        ended: *n.get("ended")?,
        end: word(text, "end")?.to_string(),
    })
}

/// The name of a wait's slice, by how it ended.
pub fn wait_name(end: &str) -> &'static str {
    match end {
        "anticipated" => "wait: came",
        "timed_out" => "wait: timed out",
        "abandoned" => "wait: abandoned",
        _ => "wait: ?",
    }
}

/// Whether `line` is one of the records only the timeline reads, so many in a run that the log
/// shown leaves them out (who ran, activations, events sent, disk requests and waits).
pub fn hidden(line: &LogLine) -> bool {
    let m = &line.message;
    [RUN_MARK, IDLE_MARK, ACTIVATION_MARK, EVENT_MARK].iter().any(|k| m.starts_with(k))
        || printed(line, REQUEST_MARK).is_some()
        || printed(line, WAIT_MARK).is_some()
}

/// Puts each of `slices` (start and end, in order of start) on the first of the lanes whose
/// last slice has ended by its start, opening a lane when none has: the lane of each.
fn lanes(slices: &[(u64, u64)]) -> Vec<usize> {
    let mut ends: Vec<u64> = Vec::new();
    slices
        .iter()
        .map(|&(start, end)| match ends.iter().position(|&e| e <= start) {
            Some(i) => {
                ends[i] = end;
                i
            }
            None => {
                ends.push(end);
                ends.len() - 1
            }
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
    let runs: Vec<OnCpu> = log.iter().filter_map(on_cpu).collect();
    let activations: Vec<Activation> = log.iter().filter_map(activation).collect();
    let sent: Vec<EventSent> = log.iter().filter_map(event_sent).collect();
    let channels: Vec<Channel> = log.iter().filter_map(channel).collect();
    let mut all = cpu_trace::complete(domains, &periods);
    let named = faults
        .iter()
        .map(|f| f.domain)
        .chain(runs.iter().filter_map(|r| r.domain))
        .chain(activations.iter().map(|a| a.domain))
        .chain(sent.iter().flat_map(|e| [e.from, e.to]))
        .max();
    if let Some(last) = named {
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
        meta_events.push(meta("thread_name", p, RUNNING_TID, "running, activations, events"));
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
    // Who ran when: from each record to the next, the last to the run summary (the end of the
    // run), or to the end of the log without one.
    let log_end = log
        .iter()
        .find(|l| l.message.starts_with("run summary: "))
        .and_then(timestamp_ns)
        .or_else(|| log.iter().filter_map(timestamp_ns).max())
        .unwrap_or(0);
    let name_of = |domain: usize| {
        all.iter()
            .find(|d| d.index == domain)
            .map_or_else(|| format!("#{domain}"), |d| d.name.clone())
    };
    // Each domain's running slices, `(start, end)` in order.
    let mut running: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        let end = runs.get(i + 1).map_or(log_end.max(r.at), |next| next.at);
        if end <= r.at {
            continue;
        }
        let name = r.domain.map_or_else(|| "idle".to_string(), name_of);
        events.push(json!({
            "name": name, "cat": "sched", "ph": "X", "pid": CPU_PID, "tid": CPU_TID,
            "ts": us(r.at), "dur": us(end - r.at),
        }));
        if let Some(d) = r.domain {
            running.entry(d).or_default().push((r.at, end));
            events.push(json!({
                "name": "running", "cat": "sched", "ph": "X", "pid": pid(d), "tid": RUNNING_TID,
                "ts": us(r.at), "dur": us(end - r.at),
            }));
        }
    }
    if !runs.is_empty() {
        meta_events.push(meta("process_name", CPU_PID, 0, "CPU"));
        meta_events.push(sort_index("process_sort_index", CPU_PID, 0, 0));
        meta_events.push(meta("thread_name", CPU_PID, CPU_TID, "who ran"));
    }
    for a in &activations {
        events.push(json!({
            "name": "activation", "cat": "sched", "ph": "i", "s": "t", "pid": pid(a.domain),
            "tid": RUNNING_TID, "ts": us(a.at), "args": {"reason": reason_words(a.reason)},
        }));
    }
    // Events between domains: a flow from the send, in the sender's running slice, to the
    // start of the receiver's next one (when it runs to see it), named after the channel.
    for (id, e) in sent.iter().enumerate() {
        let Some(to) = running.get(&e.to).and_then(|s| s.iter().find(|(start, _)| *start >= e.at))
        else {
            continue;
        };
        let name = channels
            .iter()
            .find_map(|c| {
                if (c.to, c.data) == (e.to, e.ep) {
                    Some(c.name.clone())
                } else if (c.from, c.space) == (e.to, e.ep) {
                    Some(format!("{} (space)", c.name))
                } else {
                    None
                }
            })
            .unwrap_or_else(|| format!("event {}", e.ep));
        events.push(json!({
            "name": name, "cat": "event", "ph": "s", "id": id, "pid": pid(e.from),
            "tid": RUNNING_TID, "ts": us(e.at),
        }));
        events.push(json!({
            "name": name, "cat": "event", "ph": "f", "bp": "e", "id": id, "pid": pid(e.to),
            "tid": RUNNING_TID, "ts": us(to.0),
        }));
    }
    for f in &faults {
        let access = ["read", "write", "execute"].get(f.access as usize).copied().unwrap_or("?");
        events.push(json!({
            "name": "page fault", "cat": "memory", "ph": "X", "pid": pid(f.domain),
            "tid": MEMORY_TID, "ts": us(f.start), "dur": us(f.end.saturating_sub(f.start)),
            "args": {"addr": format!("{:#x}", f.addr), "access": access},
        }));
        if !runs.is_empty() {
            events.push(json!({
                "name": "activation", "cat": "sched", "ph": "i", "s": "t", "pid": pid(f.domain),
                "tid": RUNNING_TID, "ts": us(f.start), "args": {"reason": "fault"},
            }));
        }
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
    let disk = disk_events(log, &mut meta_events, &mut events);
    for (trace, p, what) in [(DISK, DISK_PID, "disk"), (NET, NET_PID, "network streams")] {
        let records: Vec<DiskPeriod> = disk_trace::records(&trace, log);
        let streams = disk_trace::streams(&records);
        if streams.is_empty() {
            continue;
        }
        if p != DISK_PID || !disk {
            meta_events.push(meta("process_name", p, 0, what));
            meta_events.push(sort_index("process_sort_index", p, 0, p));
        }
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
    // By start, the longer first at the same start, so that every track reads in order (and a
    // flow's end comes after the slice it binds to).
    let key = |e: &Value| (e["ts"].as_f64().unwrap_or(0.0), -e["dur"].as_f64().unwrap_or(0.0));
    events.sort_by(|a, b| key(a).partial_cmp(&key(b)).unwrap_or(std::cmp::Ordering::Equal));
    meta_events.extend(events);
    json!({"traceEvents": meta_events, "displayTimeUnit": "ms"})
}

/// The disk's requests and anticipation waits in `log`, as events of the disk's process
/// ([`DISK_PID`], named here if there are any: whether there are).
fn disk_events(log: &[LogLine], meta_events: &mut Vec<Value>, events: &mut Vec<Value>) -> bool {
    let mut requests: Vec<DiskRequest> = log.iter().filter_map(disk_request).collect();
    let waits: Vec<DiskWait> = log.iter().filter_map(disk_wait).collect();
    if requests.is_empty() && waits.is_empty() {
        return false;
    }
    meta_events.push(meta("process_name", DISK_PID, 0, "disk"));
    meta_events.push(sort_index("process_sort_index", DISK_PID, 0, DISK_PID));
    // From submission to completion, on as many tracks as overlap.
    requests.sort_by_key(|r| (r.arrived, r.dispatched));
    let spans: Vec<(u64, u64)> = requests.iter().map(|r| (r.arrived, r.done)).collect();
    let submitted = lanes(&spans);
    // At the device, from dispatch to completion.
    let mut by_dispatch: Vec<usize> = (0..requests.len()).collect();
    by_dispatch.sort_by_key(|&i| requests[i].dispatched);
    let spans: Vec<(u64, u64)> =
        by_dispatch.iter().map(|&i| (requests[i].dispatched, requests[i].done)).collect();
    let served = lanes(&spans);
    let track = |base: u64, what: &str, lane: usize, meta_events: &mut Vec<Value>| {
        let tid = base + lane as u64;
        let name = if lane == 0 { what.to_string() } else { format!("{what} {}", lane + 1) };
        meta_events.push(meta("thread_name", DISK_PID, tid, &name));
        meta_events.push(sort_index("thread_sort_index", DISK_PID, tid, tid));
        tid
    };
    let args = |r: &DiskRequest| {
        json!({
            "stream": r.stream, "sector": r.sector, "sectors": r.sectors,
            "op": if r.read { "read" } else { "write" },
            "queued_us": us(r.dispatched.saturating_sub(r.arrived)),
            "service_us": us(r.done.saturating_sub(r.dispatched)),
        })
    };
    for lane in 0..submitted.iter().max().map_or(0, |m| m + 1) {
        track(REQUEST_TID, "requests", lane, meta_events);
    }
    for lane in 0..served.iter().max().map_or(0, |m| m + 1) {
        track(SERVICE_TID, "at the device", lane, meta_events);
    }
    for (r, lane) in requests.iter().zip(&submitted) {
        events.push(json!({
            "name": "request", "cat": "disk", "ph": "X", "pid": DISK_PID,
            "tid": REQUEST_TID + *lane as u64, "ts": us(r.arrived),
            "dur": us(r.done.saturating_sub(r.arrived)), "args": args(r),
        }));
    }
    for (&i, lane) in by_dispatch.iter().zip(&served) {
        let r = &requests[i];
        events.push(json!({
            "name": r.stream, "cat": "disk", "ph": "X", "pid": DISK_PID,
            "tid": SERVICE_TID + *lane as u64, "ts": us(r.dispatched),
            "dur": us(r.done.saturating_sub(r.dispatched)), "args": args(r),
        }));
    }
    if !waits.is_empty() {
        track(WAIT_TID, "anticipation waits", 0, meta_events);
    }
    for w in &waits {
        events.push(json!({
            "name": wait_name(&w.end), "cat": "disk", "ph": "X", "pid": DISK_PID,
            "tid": WAIT_TID, "ts": us(w.since), "dur": us(w.ended.saturating_sub(w.since)),
            "args": {"stream": w.stream, "timeout_us": us(w.until.saturating_sub(w.since))},
        }));
    }
    true
}

/// Writes the timeline of `log` to `path`; returns how many events it has.
pub fn save(path: &Path, domains: &[DomainInfo], log: &[LogLine]) -> Result<usize> {
    let t = timeline(domains, log);
    let n = t["traceEvents"].as_array().map_or(0, Vec::len);
    write(path, &format!("{t}\n"))?;
    Ok(n)
}

/// A flow's start and finish `ts`, as [`check`] finds them.
type FlowEnds = (Option<f64>, Option<f64>);

/// How far apart two times in µs may be and still be one: half the records' resolution (1 ns),
/// far more than the rounding of a time in µs as a JSON number (`ts + dur` of a slice that ends
/// where the next starts may differ from that start in the last bits).
const ROUNDING_US: f64 = 0.0005;

/// What [`check`] found in a timeline it accepted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Each process's name, by `pid`.
    pub processes: BTreeMap<u64, String>,
    /// How many `X` events of each name each process has: `(pid, name) -> count`.
    pub complete: BTreeMap<(u64, String), usize>,
    /// Their durations summed, in µs: `(pid, name) -> µs`.
    pub durations: BTreeMap<(u64, String), f64>,
    /// How many `i` events of each name each process has: `(pid, name) -> count`.
    pub instants: BTreeMap<(u64, String), usize>,
    /// How many flows (a start matched with its finish) of each name there are.
    pub flows: BTreeMap<String, usize>,
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

    /// The durations of the `X` events named `event` of the process named `process`, summed,
    /// in µs.
    pub fn duration_us(&self, process: &str, event: &str) -> f64 {
        self.pid(process)
            .and_then(|p| self.durations.get(&(p, event.to_string())))
            .copied()
            .unwrap_or(0.0)
    }

    /// How many `i` events named `event` the process named `process` has.
    pub fn instant_count(&self, process: &str, event: &str) -> usize {
        self.pid(process)
            .and_then(|p| self.instants.get(&(p, event.to_string())))
            .copied()
            .unwrap_or(0)
    }
}

/// Checks that `text` is a timeline a viewer reads as meant: a JSON object with a
/// `traceEvents` array; every event with a string `name` and `ph` of `X`, `i`, `C`, `M`, `s`
/// or `f`, integer `pid` and `tid`; `ts` a number at least 0 (but on `M`), `dur` one on `X`,
/// `s` one of `g`, `p`, `t` on `i`, number `args` on `C`, `args.name` a string on the `M`
/// events naming processes and threads; every track (`pid`, `tid`) with an event named by a
/// `thread_name` and its process by a `process_name`; on each track, timestamps that never go
/// back and `X` events that nest (each ends before the one it starts in ends). Flows (`s` and
/// `f`, a string `cat` and an integer `id`): each `s` in an `X` event of its track (the slice
/// it leaves from), each `f` binding to the enclosing slice (`bp` `e`) and in one, and each
/// `(cat, name, id)` one start and one finish no earlier. A disk request (`X` named
/// `request`, `cat` `disk`) ends after it starts.
pub fn check(text: &str) -> Result<Summary> {
    let v: Value = serde_json::from_str(text)?;
    let Some(events) = v.get("traceEvents").and_then(Value::as_array) else {
        bail!("no traceEvents array at the top level");
    };
    let mut summary = Summary::default();
    let mut threads = BTreeMap::new();
    // Per flow `(cat, name, id)`: the start's `ts` and the finish's, as seen.
    let mut flows: BTreeMap<(String, String, u64), FlowEnds> = BTreeMap::new();
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
        while open.last().is_some_and(|&end| end <= ts + ROUNDING_US) {
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
                    && end > outer + ROUNDING_US
                {
                    bail!(err(&format!(
                        "overlaps an event that ends at {outer} without nesting in it"
                    )));
                }
                if name == "request" && e["cat"] == "disk" && dur <= 0.0 {
                    bail!(err("a disk request that does not end after it starts"));
                }
                open.push(end);
                *summary.complete.entry((pid, name.to_string())).or_default() += 1;
                *summary.durations.entry((pid, name.to_string())).or_default() += dur;
            }
            "i" => {
                if !matches!(e.get("s").and_then(Value::as_str), Some("g" | "p" | "t")) {
                    bail!(err("an instant event without s of g, p or t"));
                }
                *summary.instants.entry((pid, name.to_string())).or_default() += 1;
            }
            "s" | "f" => {
                let cat =
                    e.get("cat").and_then(Value::as_str).ok_or_else(|| err("no string cat"))?;
                let id = e.get("id").and_then(Value::as_u64).ok_or_else(|| err("no integer id"))?;
                if ph == "f" && e.get("bp").and_then(Value::as_str) != Some("e") {
                    bail!(err("a flow's finish that does not bind to its enclosing slice (bp e)"));
                }
                if open.is_empty() {
                    bail!(err("a flow event in no slice of its track"));
                }
                let (start, finish) =
                    flows.entry((cat.to_string(), name.to_string(), id)).or_default();
                let seen = if ph == "s" { start } else { finish };
                if seen.replace(ts).is_some() {
                    bail!(err("a second flow event of the same kind with this id"));
                }
            }
            "C" => {
                let args =
                    e.get("args").and_then(Value::as_object).ok_or_else(|| err("no args"))?;
                if args.is_empty() || !args.values().all(Value::is_number) {
                    bail!(err("a counter's args are not all numbers"));
                }
            }
            _ => bail!(err("ph is not X, i, C, M, s or f")),
        }
    }
    for ((_, name, id), ends) in flows {
        match ends {
            (Some(start), Some(finish)) if finish >= start => {
                *summary.flows.entry(name).or_default() += 1;
            }
            (Some(start), Some(finish)) => {
                bail!("flow {name} {id} finishes at {finish}, before its start at {start}")
            }
            (None, _) => bail!("flow {name} {id} has no start"),
            (_, None) => bail!("flow {name} {id} has no finish"),
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

    /// [`log`] with who ran when, an activation, an event over a channel and two disk requests
    /// and a wait: `a` runs 0-5 ms and sends `b` an event at 1 ms, `b` runs 5-9 ms (activated
    /// at 5 ms), the CPU idles 9-10 ms, `a` runs from 10 ms to the end of the log (21 ms).
    fn full_log() -> Vec<LogLine> {
        let mut all: Vec<LogLine> = [
            ("0.000000", "event channel: name=numbers from=0 to=1 data=0 space=0"),
            ("0.000000", "sched run: domain=0 at=0"),
            ("0.001000", "event sent: from=0 to=1 ep=0 at=1000000"),
            ("0.001000", "[b] disk request: stream=b sector=8 sectors=128 op=read arrived=1000000 dispatched=2000000 done=3000000"),
            ("0.004000", "[b] disk request: stream=b sector=136 sectors=8 op=write arrived=1500000 dispatched=3000000 done=4000000"),
            ("0.004500", "[b] disk wait: stream=b since=4000000 until=5000000 ended=4500000 end=anticipated"),
            ("0.005000", "sched run: domain=1 at=5000000"),
            ("0.005000", "activation: domain=1 reason=3 at=5000000"),
            ("0.009000", "sched idle: at=9000000"),
            ("0.010000", "sched run: domain=0 at=10000000"),
            ("0.020500", "events received: domain=1 ep=0 count=1"),
        ]
        .into_iter()
        .map(|(t, m)| line(t, m))
        .collect();
        all.extend(log());
        all
    }

    #[test]
    fn scheduler_event_and_disk_records_are_read() {
        let log = full_log();
        let find = |mark: &str| log.iter().find(|l| l.message.contains(mark)).unwrap();
        assert_eq!(on_cpu(find("sched run")), Some(OnCpu { domain: Some(0), at: 0 }));
        assert_eq!(on_cpu(find("sched idle")), Some(OnCpu { domain: None, at: 9_000_000 }));
        assert_eq!(
            activation(find("activation:")),
            Some(Activation { domain: 1, reason: 3, at: 5_000_000 })
        );
        assert_eq!(reason_words(3), "scheduled, event");
        assert_eq!(
            event_sent(find("event sent")),
            Some(EventSent { from: 0, to: 1, ep: 0, at: 1_000_000 })
        );
        assert_eq!(
            channel(find("event channel")),
            Some(Channel { name: "numbers".into(), from: 0, to: 1, data: 0, space: 0 })
        );
        assert_eq!(
            received(find("events received")),
            Some(Received { domain: 1, ep: 0, count: 1 })
        );
        assert_eq!(
            disk_request(find("disk request")),
            Some(DiskRequest {
                stream: "b".into(),
                sector: 8,
                sectors: 128,
                read: true,
                arrived: 1_000_000,
                dispatched: 2_000_000,
                done: 3_000_000
            })
        );
        let w = disk_wait(find("disk wait")).unwrap();
        assert_eq!(
            (w.stream.as_str(), w.since, w.ended, w.end.as_str()),
            ("b", 4_000_000, 4_500_000, "anticipated")
        );
        // Only the records the log shown leaves out; a disk record only as a domain prints it.
        let hidden_count = log.iter().filter(|l| hidden(l)).count();
        assert_eq!(hidden_count, 9);
        assert_eq!(
            disk_request(&line(
                "0",
                "disk request: stream=b sector=1 sectors=1 op=read arrived=1 dispatched=1 done=2"
            )),
            None
        );
    }

    #[test]
    fn who_ran_activations_events_and_the_disk_are_in_the_timeline() {
        let text = timeline(&domains(), &full_log()).to_string();
        let s = check(&text).unwrap();
        // The CPU's track: a 0-5, b 5-9, idle 9-10, a 10-21 (the log's end).
        assert_eq!((s.count("CPU", "a"), s.count("CPU", "b"), s.count("CPU", "idle")), (2, 1, 1));
        assert_eq!(s.duration_us("a", "running"), 16_000.0);
        assert_eq!(s.duration_us("b", "running"), 4_000.0);
        assert_eq!(s.duration_us("CPU", "idle"), 1_000.0);
        // Its activation at 5 ms and its fault's at 11 ms.
        assert_eq!(s.instant_count("b", "activation"), 2);
        assert_eq!(s.flows, BTreeMap::from([("numbers".to_string(), 1)]));
        assert_eq!(s.count("disk", "request"), 2);
        assert_eq!(s.count("disk", "wait: came"), 1);
        assert_eq!(s.count("disk", "period"), 1);
        let v: Value = serde_json::from_str(&text).unwrap();
        let events = v["traceEvents"].as_array().unwrap();
        let finish = events.iter().find(|e| e["ph"] == "f").unwrap();
        // The flow ends where b next runs, on its track.
        assert_eq!((finish["ts"].as_f64(), finish["pid"].as_u64()), (Some(5_000.0), Some(2)));
        // The two requests overlap from submission to completion: two tracks.
        let tids: Vec<u64> = events
            .iter()
            .filter(|e| e["name"] == "request")
            .filter_map(|e| e["tid"].as_u64())
            .collect();
        assert_eq!(tids, [REQUEST_TID, REQUEST_TID + 1]);
    }

    #[test]
    fn the_check_finds_broken_flows_and_requests() {
        let fails = |text: String, why: &str| {
            let e = check(&text).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        };
        let edit = |change: &dyn Fn(&mut Vec<Value>)| {
            let mut v = timeline(&domains(), &full_log());
            change(v["traceEvents"].as_array_mut().unwrap());
            v.to_string()
        };
        fails(edit(&|e| e.retain(|e| e["ph"] != "f")), "has no finish");
        fails(edit(&|e| e.retain(|e| e["ph"] != "s")), "has no start");
        fails(
            edit(&|e| {
                let f = e.iter_mut().find(|e| e["ph"] == "f").unwrap();
                f["bp"] = Value::Null;
            }),
            "bp e",
        );
        // A send while its sender was not running (the CPU idled from 9 ms to 10 ms).
        fails(
            edit(&|e| {
                let at = e.iter().position(|e| e["ph"] == "s").unwrap();
                let mut s = e.remove(at);
                s["ts"] = json!(9_500.0);
                let to = e.iter().position(|e| e["ts"].as_f64() > Some(9_500.0)).unwrap();
                e.insert(to, s);
            }),
            "in no slice",
        );
        fails(
            edit(&|e| {
                let f = e.iter_mut().find(|e| e["ph"] == "f").unwrap();
                f["id"] = json!("x");
            }),
            "no integer id",
        );
        fails(
            edit(&|e| {
                let r = e.iter_mut().find(|e| e["name"] == "request").unwrap();
                r["dur"] = json!(0.0);
            }),
            "does not end after it starts",
        );
        // Two domains on the CPU at once.
        fails(
            edit(&|e| {
                let a = e.iter_mut().find(|e| e["pid"] == CPU_PID && e["name"] == "a").unwrap();
                a["dur"] = json!(5_000.5);
            }),
            "without nesting",
        );
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
        assert_eq!(s.count("disk", "period"), 1);
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
