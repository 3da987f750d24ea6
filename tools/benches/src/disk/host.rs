//! The host's side of `bench disk`: every run simulated in-process with the driver's own
//! scheduling code (`disk_sched`, `disk_sched::usd`) over the same mechanical model
//! (`disk_model`), giving the figure Tessera's QEMU run should be near; and the
//! scheduler's cost per request in host nanoseconds, each scheduler call timed with
//! [`Instant`] over a simulated workload.
//!
//! Each reader thinks 50 µs more than its `--think` in the simulation: the CPU time a
//! `diskread` client spends between a completion and its next request (the host tests of
//! `disk_sched` assume the same).

use std::time::Instant;

use disk_model::{DiskModel, DiskParams};
use disk_sched::heuristics::Weigh;
use disk_sched::scheduler::{self, BuildOptions};
use disk_sched::sim::{self, Reader, Scheduler as SimScheduler};
use disk_sched::{Decision, Full, Pending};

use super::experiments::{Client, GB, Pattern, READ_SECTORS, Run, Scheduler, client_name};
use super::lines::{ClientDone, Measured, Period};
use super::manifests::disk_bytes;

/// The CPU time a client spends between a completion and its next request, ns.
pub const CLIENT_CPU_NS: u64 = 50_000;
/// Pending requests each client may have at the driver (its sessions' cap).
const PER_CLIENT: usize = 8;
/// The seed of the random patterns.
const SEED: u64 = 11;

/// The model of the disk the QEMU runs have: the Deskstar at the manifest's size.
pub fn model() -> DiskModel {
    DiskModel::new(DiskParams::deskstar_34gxp().with_capacity(disk_bytes() / 512))
}

/// Client `c` as the simulation's reader.
fn reader(c: &Client) -> Reader {
    let pattern = match c.pattern {
        Pattern::Sequential => sim::Pattern::Sequential,
        Pattern::Alternate => sim::Pattern::Alternate,
        Pattern::Random { span } | Pattern::Hog { span } => sim::Pattern::Random { span },
        Pattern::Bursts { burst, pause_us } => {
            sim::Pattern::Bursts { burst, pause_ns: pause_us * 1000 + CLIENT_CPU_NS }
        }
    };
    Reader {
        start: c.start,
        sectors: READ_SECTORS,
        think_ns: c.think_us * 1000 + CLIENT_CPU_NS,
        pattern,
    }
}

/// The driver's scheduler for `clients` (their disk contracts as the kernel passes them), as
/// its `--scheduler` builds it: `disk_sched::scheduler`, the seek-reducing rules weighing as
/// `weigh` says.
fn built(
    s: Scheduler,
    anticipation: bool,
    clients: &[Client],
    weigh: Weigh,
) -> Box<dyn SimScheduler> {
    let streams: Vec<Option<atropos::Contract>> =
        clients.iter().map(|c| c.contract.is_some().then(|| contract(c))).collect();
    let options = BuildOptions { weigh, trace_capacity: 0 };
    scheduler::build_with(s, anticipation, &model(), &streams, PER_CLIENT, 0, options)
}

/// What a simulated run gave, as [`Measured`].
fn measured(out: &sim::Outcome, run_ns: u64) -> Measured {
    let clients = (0..out.sectors.len())
        .map(|i| ClientDone {
            name: client_name(i),
            reads: out.reads[i],
            writes: 0,
            bytes: out.sectors[i] * 512,
            first_ns: 0,
            last_ns: run_ns,
            elapsed_ns: run_ns,
            ..ClientDone::default()
        })
        .collect();
    Measured { clients, ..Measured::default() }
}

/// Runs `core` over `readers` for `run_ns` on the model.
fn go<S: SimScheduler + ?Sized>(core: &mut S, readers: &[Reader], run_ns: u64) -> sim::Outcome {
    sim::run(core, &mut model(), readers, run_ns, SEED)
}

/// `run` simulated on the host with the driver's scheduling code.
pub fn simulate(run: &Run) -> Measured {
    simulate_weighing(run, Weigh::ExpectedGain)
}

/// `run` simulated with the seek-reducing rules weighing a wait as `weigh` says: Tessera's
/// ([`Weigh::ExpectedGain`]) or the paper's ([`Weigh::Paper`], for comparison).
pub fn simulate_weighing(run: &Run, weigh: Weigh) -> Measured {
    let readers: Vec<Reader> = run.clients.iter().map(reader).collect();
    let run_ns = run.duration_ms * 1_000_000;
    let mut core = built(run.scheduler, run.anticipation, &run.clients, weigh);
    let out = go(&mut *core, &readers, run_ns);
    let periods = core
        .take_periods()
        .into_iter()
        .map(|r| Period {
            stream: client_name(r.client),
            start: r.start,
            end: r.end,
            guaranteed: r.guaranteed,
            extra: r.extra,
            missed: r.missed,
        })
        .collect();
    let waits = core.trace().map(|t| t.totals());
    Measured { periods, waits, ..measured(&out, run_ns) }
}

/// Client `c`'s disk contract for the USD (a best-effort 1% of each second without one).
fn contract(c: &Client) -> atropos::Contract {
    const MS: u64 = 1_000_000;
    match c.contract {
        Some(k) => atropos::Contract {
            period: k.period_ms * MS,
            slice: k.slice_ms * MS,
            extra: k.extra,
            latency: k.latency_ms * MS,
        },
        None => {
            atropos::Contract { period: 1000 * MS, slice: 10 * MS, extra: true, latency: 1000 * MS }
        }
    }
}

/// A scheduler with every call timed on the host's clock.
struct Timed {
    inner: Box<dyn SimScheduler>,
    ns: u128,
    completions: u64,
}

impl SimScheduler for Timed {
    fn arrive(&mut self, r: Pending, now_ns: u64) -> Result<(), Full> {
        let t = Instant::now();
        let out = self.inner.arrive(r, now_ns);
        self.ns += t.elapsed().as_nanos();
        out
    }

    fn next(&mut self, now_ns: u64) -> Decision {
        let t = Instant::now();
        let out = self.inner.next(now_ns);
        self.ns += t.elapsed().as_nanos();
        out
    }

    fn complete(&mut self, r: &Pending, service_ns: u64, now_ns: u64) {
        let t = Instant::now();
        self.inner.complete(r, service_ns, now_ns);
        self.ns += t.elapsed().as_nanos();
        self.completions += 1;
    }
}

/// The host's cost of one configuration: ns per request (timer overhead taken off), requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostCost {
    /// The policy.
    pub scheduler: Scheduler,
    /// Whether it anticipated.
    pub anticipation: bool,
    /// Scheduler time per completed request, ns.
    pub per_request_ns: f64,
    /// Requests completed in the timed run.
    pub requests: u64,
}

/// The simulated time the cost is timed over, ns.
pub const COST_NS: u64 = 10_000_000_000;

/// The workload the cost is timed on: two sequential and two random readers 1 GB apart, for
/// ten seconds of disk time (each scheduler sees waits, seeks and several clients).
fn cost_readers() -> Vec<Client> {
    let seq = |start| Client { pattern: Pattern::Sequential, start, think_us: 0, contract: None };
    let random = |start| Client {
        pattern: Pattern::Random { span: GB },
        start,
        think_us: 0,
        contract: None,
    };
    vec![seq(0), seq(GB), random(2 * GB), random(4 * GB)]
}

/// The cost of an empty timed call (two reads of the clock), ns.
fn timer_overhead_ns() -> f64 {
    let n = 100_000u32;
    let mut total = 0u128;
    for _ in 0..n {
        let t = Instant::now();
        total += t.elapsed().as_nanos();
    }
    total as f64 / f64::from(n)
}

/// Times `core` over the cost workload: ns a request, requests.
fn time(core: Box<dyn SimScheduler>) -> (f64, u64) {
    let readers: Vec<Reader> = cost_readers().iter().map(reader).collect();
    let mut timed = Timed { inner: core, ns: 0, completions: 0 };
    // Calls a request: its arrival, its completion, and the next after each event (about
    // three); the overhead is taken off per call counted here.
    go(&mut timed, &readers, COST_NS);
    (timed.ns as f64 / timed.completions.max(1) as f64, timed.completions)
}

/// The host cost of `scheduler` with or without anticipation: the least of `reps` timings.
pub fn cost(scheduler: Scheduler, anticipation: bool, reps: usize) -> HostCost {
    let overhead = timer_overhead_ns();
    let clients = cost_readers();
    let mut best: Option<(f64, u64)> = None;
    for _ in 0..reps.max(1) {
        let t = time(built(scheduler, anticipation, &clients, Weigh::ExpectedGain));
        if best.is_none_or(|b| t.0 < b.0) {
            best = Some(t);
        }
    }
    let (ns, requests) = best.expect("at least one timing");
    // About three timed calls a request.
    HostCost { scheduler, anticipation, per_request_ns: (ns - 3.0 * overhead).max(0.0), requests }
}

#[cfg(test)]
mod tests {
    use super::super::experiments::{Size, plan};
    use super::*;

    fn run(key: &str) -> Run {
        plan(Size::Quick).0.into_iter().find(|r| r.key == key).unwrap()
    }

    #[test]
    fn the_simulation_repeats_the_papers_first_experiment() {
        let alone = simulate(&run("a-alone")).total_mbps();
        let with = simulate(&run("a-two-with"));
        let without = simulate(&run("a-two-without")).total_mbps();
        assert!(with.total_mbps() > 3.0 * without, "{} with, {without} without", with.total_mbps());
        assert!(with.total_mbps() > 0.9 * alone, "{} with, {alone} alone", with.total_mbps());
        let w = with.waits.unwrap();
        assert!(w.count > 0 && w.exceeded == 0, "{w:?}");
        assert_eq!(with.clients.len(), 2);
    }

    #[test]
    fn the_usd_run_gives_periods_of_both_streams() {
        let m = simulate(&run("g-usd-with"));
        assert!(m.periods_of("r0").count() >= 3, "{:?}", m.periods);
        assert!(m.periods_of("r1").count() >= 3);
        // The stream with extra=false never beyond its 500 ms slice.
        assert!(m.periods_of("r0").all(|p| p.guaranteed + p.extra <= 500_000_000));
    }

    #[test]
    fn the_papers_rule_loses_to_the_adversary_where_tesseras_does_not() {
        let with = run("d-adversary-2-17ms-with");
        let without = simulate(&run("d-adversary-2-17ms-without")).total_mbps();
        let paper = simulate_weighing(&with, Weigh::Paper).total_mbps();
        let tessera = simulate(&with).total_mbps();
        assert!(paper < 0.9 * without, "the paper's rule: {paper:.2} against {without:.2}");
        assert!(tessera >= 0.9 * without, "Tessera's: {tessera:.2} against {without:.2}");
    }

    /// `m` as the driver domain and the clients print it (the interface of the boots).
    fn as_log(m: &Measured) -> Vec<String> {
        let mut lines: Vec<String> = m
            .clients
            .iter()
            .map(|c| {
                format!(
                    "[{0}] diskread {0}: done reads={1} writes={2} bytes={3} first_ns={4} \
                     last_ns={5} elapsed_ns={6} mean_latency_ns={7} max_latency_ns={8}",
                    c.name,
                    c.reads,
                    c.writes,
                    c.bytes,
                    c.first_ns,
                    c.last_ns,
                    c.elapsed_ns,
                    c.mean_latency_ns,
                    c.max_latency_ns
                )
            })
            .collect();
        for p in &m.periods {
            lines.push(format!(
                "[blk] disk period: stream={} start={} end={} guaranteed={} extra={} missed={}",
                p.stream, p.start, p.end, p.guaranteed, p.extra, p.missed
            ));
        }
        if let Some(w) = m.waits {
            lines.push(format!(
                "[blk] disk waits: count={} anticipated={} timed_out={} abandoned={} exceeded={} \
                 late_max_ns={} longest_ns={}",
                w.count,
                w.anticipated,
                w.timed_out,
                w.abandoned,
                w.exceeded,
                w.late_max_ns,
                w.longest_ns
            ));
        }
        lines.reverse();
        lines
    }

    #[test]
    fn a_simulated_run_reads_back_from_the_drivers_lines() {
        for key in ["g-usd-with", "d-adversary-2-17ms-with", "b-random-4gb-without"] {
            let m = simulate(&run(key));
            let log = as_log(&m);
            let mut back = Measured::from_lines(log.iter().map(String::as_str));
            back.periods.reverse();
            assert_eq!(back, m, "{key}");
        }
    }

    #[test]
    fn every_scheduler_is_timed() {
        for s in Scheduler::ALL {
            let c = cost(s, s != Scheduler::Fcfs, 1);
            assert!(c.requests > 100, "{s:?}: {c:?}");
            assert!(c.per_request_ns.is_finite() && c.per_request_ns < 1e6, "{s:?}: {c:?}");
        }
    }
}
