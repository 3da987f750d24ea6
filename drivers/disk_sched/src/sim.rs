//! A discrete-event simulation of clients, the scheduler and a disk, on the host (or anywhere:
//! it is portable and keeps no time of its own), for the scheduler's tests and experiments.
//!
//! Clients are synchronous readers: each issues its next read a think time after its last
//! completes, in a [`Pattern`]. The disk serves one request at a time, its service time given
//! by a [`SimDisk`]: [`CurveDisk`] (a positioning curve plus a transfer rate), or the
//! mechanical disk model ([`DiskModel`]). The scheduler is an [`Anticipation`](crate::Anticipation) core (with
//! anticipation on or off), whose waits the simulation honours to the nanosecond.

use alloc::vec;
use alloc::vec::Vec;

use super::anticipation::Decision;
use super::policy::Pending;
use super::positioning::{LbnCurve, Positioning};
use disk_model::{DiskModel, ModelOp};

/// A disk's service time for a request.
pub trait SimDisk {
    /// The time the disk takes to serve `r`, starting at `now_ns` (positioning, transfer,
    /// overhead), its state moving on as the request is served.
    fn service_ns(&mut self, now_ns: u64, r: &Pending) -> u64;
}

/// A disk whose service time is the positioning curve's estimate from the head, plus a fixed
/// time per sector.
#[derive(Clone, Debug)]
pub struct CurveDisk {
    curve: LbnCurve,
    sector_ns: u64,
    head: u64,
}

impl CurveDisk {
    /// Positioning by `curve`, transfer at `sector_ns` a sector.
    pub fn new(curve: LbnCurve, sector_ns: u64) -> CurveDisk {
        CurveDisk { curve, sector_ns, head: 0 }
    }
}

impl SimDisk for CurveDisk {
    fn service_ns(&mut self, _now_ns: u64, r: &Pending) -> u64 {
        let t = self.curve.positioning_ns(self.head, r.lbn) + u64::from(r.sectors) * self.sector_ns;
        self.head = r.end();
        t
    }
}

impl SimDisk for DiskModel {
    fn service_ns(&mut self, now_ns: u64, r: &Pending) -> u64 {
        let op = if r.read { ModelOp::Read } else { ModelOp::Write };
        let s = self.service(now_ns, op, r.lbn, r.sectors);
        // The simulation dispatches only to an idle disk, so the request starts at once.
        s.end_ns - now_ns
    }
}

/// Where a reader's reads go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// One after the other from its start.
    Sequential,
    /// At random places (aligned to the request size) in `[start, start + span)` sectors.
    Random {
        /// The span, in sectors.
        span: u64,
    },
    /// Every other block: a request, then one request's length skipped.
    Alternate,
    /// Sequential, but after every `burst` reads it thinks `pause_ns` instead of its think
    /// time (the paper's adversary: a few quick reads, then a pause just past the wait).
    Bursts {
        /// Reads per burst.
        burst: u32,
        /// The pause after a burst.
        pause_ns: u64,
    },
}

/// A synchronous reader.
#[derive(Clone, Copy, Debug)]
pub struct Reader {
    /// Its first sector.
    pub start: u64,
    /// Sectors per read.
    pub sectors: u32,
    /// Time from a read's completion to the next read's issue.
    pub think_ns: u64,
    /// Where its reads go.
    pub pattern: Pattern,
}

/// What a simulated run gave.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Sectors read, per reader.
    pub sectors: Vec<u64>,
    /// Disk time spent on each reader's requests.
    pub disk_ns: Vec<u64>,
    /// Reads completed, per reader.
    pub reads: Vec<u64>,
    /// The run's length.
    pub run_ns: u64,
}

impl Outcome {
    /// All readers' throughput, MB/s.
    pub fn mb_per_s(&self) -> f64 {
        (self.sectors.iter().sum::<u64>() * 512) as f64 / (self.run_ns as f64 / 1e9) / 1e6
    }

    /// Reader `i`'s throughput, MB/s.
    pub fn reader_mb_per_s(&self, i: usize) -> f64 {
        (self.sectors[i] * 512) as f64 / (self.run_ns as f64 / 1e9) / 1e6
    }
}

pub use super::scheduler::Scheduler;

/// Runs `readers` against `disk` through `core` for `run_ns`; `seed` drives the random
/// patterns. The wait's timer fires on time.
pub fn run<S: Scheduler + ?Sized, D: SimDisk>(
    core: &mut S,
    disk: &mut D,
    readers: &[Reader],
    run_ns: u64,
    seed: u64,
) -> Outcome {
    run_with_late_timer(core, disk, readers, run_ns, seed, 0)
}

/// [`run`] with the caller's timers firing `late_ns` after their instant, as a slow wake-up
/// would: the wait's (an arrival in between still calls the scheduler at once), and the one
/// for the disk's completion, which the scheduler is told happened when it did.
pub fn run_with_late_timer<S: Scheduler + ?Sized, D: SimDisk>(
    core: &mut S,
    disk: &mut D,
    readers: &[Reader],
    run_ns: u64,
    seed: u64,
    late_ns: u64,
) -> Outcome {
    let n = readers.len();
    let mut next_arrival: Vec<Option<u64>> = vec![Some(0); n];
    let mut position: Vec<u64> = readers.iter().map(|r| r.start).collect();
    let mut rng = seed | 1;
    let mut out = Outcome { sectors: vec![0; n], disk_ns: vec![0; n], reads: vec![0; n], run_ns };
    let mut busy: Option<(u64, Pending, u64)> = None;
    let mut wait_until: Option<u64> = None;
    let mut id = 0;
    let mut now = 0;
    while now < run_ns {
        for c in 0..n {
            if next_arrival[c].is_some_and(|t| t <= now) {
                next_arrival[c] = None;
                let r = readers[c];
                let lbn = match r.pattern {
                    Pattern::Random { span } => {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let places = (span / u64::from(r.sectors)).max(1);
                        r.start + rng % places * u64::from(r.sectors)
                    }
                    _ => position[c],
                };
                let p =
                    Pending { id, client: c, lbn, sectors: r.sectors, read: true, arrival_ns: now };
                id += 1;
                // A full scheduler refuses; the reader tries again after its think time.
                if core.arrive(p, now).is_err() {
                    next_arrival[c] = Some(now + r.think_ns.max(1));
                }
            }
        }
        if busy.is_none() {
            match core.next(now) {
                Decision::Dispatch(r) => {
                    let service = disk.service_ns(now, &r);
                    busy = Some((now + service, r, service));
                    wait_until = None;
                }
                Decision::Wait { until_ns } => wait_until = Some(until_ns + late_ns),
                Decision::Hold | Decision::Idle => wait_until = None,
            }
        }
        let seen = busy.map(|(end, _, _)| end + late_ns);
        let t = [seen, wait_until, next_arrival.iter().flatten().copied().min()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = t else { break };
        now = t;
        if let Some((end, r, service)) = busy
            && end + late_ns <= now
        {
            busy = None;
            core.complete(&r, service, end);
            let c = r.client;
            out.sectors[c] += u64::from(r.sectors);
            out.disk_ns[c] += service;
            out.reads[c] += 1;
            let reader = readers[c];
            position[c] = match reader.pattern {
                Pattern::Alternate => r.end() + u64::from(r.sectors),
                _ => r.end(),
            };
            let think = match reader.pattern {
                Pattern::Bursts { burst, pause_ns }
                    if out.reads[c].is_multiple_of(u64::from(burst.max(1))) =>
                {
                    pause_ns
                }
                _ => reader.think_ns,
            };
            next_arrival[c] = Some(now + think);
        }
    }
    out
}
