//! The scheduler a block driver runs, behind one interface ([`Scheduler`]): a base policy
//! wrapped in the anticipation core, or USD's streams; chosen by name ([`PolicyName`]) and
//! built for the driver's clients by [`build`].
//!
//! | name        | policy                                   | anticipation rule                  |
//! |-------------|------------------------------------------|------------------------------------|
//! | `fcfs`      | [`Fcfs`]                                 | none: FCFS never waits             |
//! | `sstf`      | [`Sstf`]                                 | [`SptfRule`]                       |
//! | `sptf`      | [`Sptf`]                                 | [`SptfRule`]                       |
//! | `aged-sptf` | [`AgedSptf`], 1 s bound, 500 ms turns    | [`AgedSptfRule`]                   |
//! | `cscan`     | [`Cscan`] (C-LOOK)                       | [`CscanRule`]                      |
//! | `stride`    | [`Stride`] by the streams' shares; relaxed by a 100 ms window when anticipating | [`StrideRule`], or [`CombinedRule`] when relaxed |
//! | `usd`       | [`Usd`]: EDF across streams by disk time, SPTF within | USD's own weighing    |
//!
//! Besides the table, [`FcfsQueue`] (first come, first served, as many requests at the disk as
//! it holds, never waiting) is what the block server runs when no scheduler is named and the
//! disk has no model.
//!
//! A client's share, for Stride, is its disk-time contract's slice over its period (in
//! thousandths, at least 1; a client without a contract counts as 1%), the shares reduced by
//! their greatest common divisor; relaxed Stride's window is 100 ms of the lightest client's
//! service. Under USD a client
//! without a contract gets a best-effort stream ([`Contract::BEST_EFFORT`]: slack time only,
//! in practice).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use atropos::{Accounts, Contract, PeriodRecord};

use super::anticipation::{Anticipation, Decision, Heuristic, Weighing};
use super::heuristics::{AgedSptfRule, CombinedRule, CscanRule, SptfRule, StrideRule, Weigh};
use super::policy::{Full, Pending, Policy};
use super::positioning::Positioning;
use super::{AgedSptf, Cscan, Fcfs, Sptf, Sstf, Stride, WaitTrace};
use crate::usd::{ServiceBound, Usd};
use disk_model::DiskModel;

/// What a block driver's scheduling stage does with requests: it takes arrivals and
/// completions and says what the disk does next. At most [`Scheduler::at_once`] of its requests
/// are at the disk at a time (one, but for [`FcfsQueue`]).
pub trait Scheduler {
    /// How many of its requests the disk may hold at once: the server dispatches only while
    /// fewer are at the device. One for every scheduler that reorders or times the disk. A
    /// property of the scheduler, never changing: the block server asks once.
    fn at_once(&self) -> usize {
        1
    }
    /// Whether it serves in arrival order with no regard to time or place: then it needs no
    /// clock, it dispatches whenever it holds a request (so the block server asks it for the
    /// next only then), and a flush takes its place among the other requests (a scheduler
    /// that reorders has flushes go first, around it). A property of the scheduler, never
    /// changing: the block server asks once.
    fn in_order(&self) -> bool {
        false
    }
    /// Client `client`'s session ended: forgets what it holds of the client's, calling
    /// `forget` with each request's id, if it can; the default keeps them, and the server
    /// drops each when it is dispatched.
    fn cancel(&mut self, client: usize, forget: &mut dyn FnMut(u64)) {
        let _ = (client, forget);
    }
    /// A request arrives at `now_ns`; [`Full`] if its client holds its most pending.
    fn arrive(&mut self, r: Pending, now_ns: u64) -> Result<(), Full>;
    /// What the disk does now: dispatch a request, wait (until a time), hold (a request is at
    /// the disk) or idle (nothing pending).
    fn next(&mut self, now_ns: u64) -> Decision;
    /// The request at the disk, `r`, completed after `service_ns`, at `now_ns`.
    fn complete(&mut self, r: &Pending, service_ns: u64, now_ns: u64);
    /// The waits recorded, if the scheduler anticipates.
    fn trace(&self) -> Option<&WaitTrace> {
        None
    }
    /// The streams' periods completed since the last call (USD), oldest first.
    fn take_periods(&mut self) -> Vec<PeriodRecord> {
        Vec::new()
    }
    /// Client `c`'s disk-time accounts (USD).
    fn accounts(&self, _c: usize) -> Option<Accounts> {
        None
    }
}

impl<P: Policy, H: Heuristic<P>> Scheduler for Anticipation<P, H> {
    fn arrive(&mut self, r: Pending, now_ns: u64) -> Result<(), Full> {
        Anticipation::arrive(self, r, now_ns)
    }

    fn next(&mut self, now_ns: u64) -> Decision {
        Anticipation::next(self, now_ns)
    }

    fn complete(&mut self, r: &Pending, service_ns: u64, now_ns: u64) {
        Anticipation::complete(self, r, service_ns, now_ns)
    }

    fn trace(&self) -> Option<&WaitTrace> {
        Some(Anticipation::trace(self))
    }
}

impl<E: Positioning + ServiceBound + Clone> Scheduler for Usd<E> {
    fn arrive(&mut self, r: Pending, now_ns: u64) -> Result<(), Full> {
        Usd::arrive(self, r, now_ns)
    }

    fn next(&mut self, now_ns: u64) -> Decision {
        Usd::next(self, now_ns)
    }

    fn complete(&mut self, _r: &Pending, _service_ns: u64, now_ns: u64) {
        Usd::complete(self, now_ns)
    }

    fn trace(&self) -> Option<&WaitTrace> {
        Some(Usd::trace(self))
    }

    fn take_periods(&mut self) -> Vec<PeriodRecord> {
        self.atropos_mut().take_records()
    }

    fn accounts(&self, c: usize) -> Option<Accounts> {
        Usd::accounts(self, c)
    }
}

/// First come, first served with as many requests at the disk as it holds: the block server's
/// scheduler when none is named and the disk has no model. It neither reorders nor waits, so
/// it needs no clock and no completions; it holds at most `capacity` requests in all.
#[derive(Clone, Debug)]
pub struct FcfsQueue {
    queue: VecDeque<Pending>,
    capacity: usize,
}

impl FcfsQueue {
    /// For at most `capacity` pending requests (at least one).
    pub fn new(capacity: usize) -> FcfsQueue {
        let capacity = capacity.max(1);
        FcfsQueue { queue: VecDeque::with_capacity(capacity), capacity }
    }
}

impl Scheduler for FcfsQueue {
    fn at_once(&self) -> usize {
        usize::MAX
    }

    fn in_order(&self) -> bool {
        true
    }

    fn cancel(&mut self, client: usize, forget: &mut dyn FnMut(u64)) {
        self.queue.retain(|r| {
            let keep = r.client != client;
            if !keep {
                forget(r.id);
            }
            keep
        });
    }

    fn arrive(&mut self, r: Pending, _now_ns: u64) -> Result<(), Full> {
        if self.queue.len() >= self.capacity {
            return Err(Full);
        }
        self.queue.push_back(r);
        Ok(())
    }

    fn next(&mut self, _now_ns: u64) -> Decision {
        self.queue.pop_front().map_or(Decision::Idle, Decision::Dispatch)
    }

    fn complete(&mut self, _r: &Pending, _service_ns: u64, _now_ns: u64) {}
}

/// The rule of a policy that never waits (FCFS serves in arrival order, so nothing a client
/// does next can change what is best now).
#[derive(Clone, Debug)]
pub struct NeverWait<E: Positioning>(pub E);

impl<P: Policy, E: Positioning> Heuristic<P> for NeverWait<E> {
    fn evaluate(&self, _policy: &P, _w: &Weighing<'_>) -> u64 {
        0
    }

    fn positioning_ns(&self, from: u64, to: u64) -> u64 {
        self.0.positioning_ns(from, to)
    }
}

/// A scheduler by name, as a driver's `--scheduler` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyName {
    /// First come, first served.
    Fcfs,
    /// Shortest seek first.
    Sstf,
    /// Shortest positioning time first.
    Sptf,
    /// SPTF with a bound on every request's wait.
    AgedSptf,
    /// Circular scan (C-LOOK).
    Cscan,
    /// Proportional share of disk time by the streams' contracts.
    Stride,
    /// The user-safe disk: streams under disk-time contracts.
    Usd,
}

impl PolicyName {
    /// Every name, in the table's order.
    pub const ALL: [PolicyName; 7] = [
        PolicyName::Fcfs,
        PolicyName::Sstf,
        PolicyName::Sptf,
        PolicyName::AgedSptf,
        PolicyName::Cscan,
        PolicyName::Stride,
        PolicyName::Usd,
    ];

    /// Its name on a command line.
    pub const fn name(self) -> &'static str {
        match self {
            PolicyName::Fcfs => "fcfs",
            PolicyName::Sstf => "sstf",
            PolicyName::Sptf => "sptf",
            PolicyName::AgedSptf => "aged-sptf",
            PolicyName::Cscan => "cscan",
            PolicyName::Stride => "stride",
            PolicyName::Usd => "usd",
        }
    }

    /// The scheduler named `s`, if any.
    pub fn parse(s: &str) -> Option<PolicyName> {
        PolicyName::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Aged-SPTF's bound on a request's wait.
pub const AGED_BOUND_NS: u64 = 1_000_000_000;
/// Aged-SPTF's turn: how long the oldest reader keeps the disk once its bound is reached.
pub const AGED_TURN_NS: u64 = 500_000_000;
/// Relaxed Stride's window, in service time.
pub const STRIDE_WINDOW_NS: u64 = 100_000_000;
/// How many waits the scheduler's trace keeps.
pub const TRACE_CAPACITY: usize = 256;

/// The clients' Stride weights: each share in thousandths (10 without a contract), reduced by
/// their greatest common divisor, so that a 1:2 contract weighs 1 and 2.
fn weights(streams: &[Option<Contract>]) -> Vec<u32> {
    let shares: Vec<u32> = streams
        .iter()
        .map(|c| {
            c.map_or(10, |c| (c.slice.saturating_mul(1000) / c.period.max(1)).clamp(1, 1000) as u32)
        })
        .collect();
    let g = shares.iter().copied().fold(0, gcd).max(1);
    shares.iter().map(|s| s / g).collect()
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// How [`build_with`] builds beyond the policy: how the seek-reducing rules weigh a wait, and
/// how many waits the trace keeps in full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildOptions {
    /// Tessera's weighing or the paper's.
    pub weigh: Weigh,
    /// Waits kept in full (every one is summed anyway).
    pub trace_capacity: usize,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions { weigh: Weigh::ExpectedGain, trace_capacity: TRACE_CAPACITY }
    }
}

/// The scheduler `policy` for clients `0..streams.len()` (each with its disk-time contract or
/// none), positioning by `model`, anticipating if `anticipate`, each client holding at most
/// `per_client` pending requests, at `now_ns`: [`build_with`] the default options.
pub fn build(
    policy: PolicyName,
    anticipate: bool,
    model: &DiskModel,
    streams: &[Option<Contract>],
    per_client: usize,
    now_ns: u64,
) -> Box<dyn Scheduler> {
    build_with(policy, anticipate, model, streams, per_client, now_ns, BuildOptions::default())
}

/// [`build`] with `options`.
pub fn build_with(
    policy: PolicyName,
    anticipate: bool,
    model: &DiskModel,
    streams: &[Option<Contract>],
    per_client: usize,
    now_ns: u64,
    options: BuildOptions,
) -> Box<dyn Scheduler> {
    let n = streams.len().max(1);
    let cap = per_client.max(1) * n;
    let m = || model.clone();
    let rule = || SptfRule { estimate: model.clone(), weigh: options.weigh };
    let trace = options.trace_capacity;
    match policy {
        PolicyName::Fcfs => {
            Box::new(Anticipation::new(Fcfs::new(cap), NeverWait(m()), n, anticipate, trace))
        }
        PolicyName::Sstf => {
            Box::new(Anticipation::new(Sstf::new(cap), rule(), n, anticipate, trace))
        }
        PolicyName::Sptf => {
            Box::new(Anticipation::new(Sptf::new(cap, m()), rule(), n, anticipate, trace))
        }
        PolicyName::AgedSptf => Box::new(Anticipation::new(
            AgedSptf::with_turns(cap, m(), AGED_BOUND_NS, AGED_TURN_NS),
            AgedSptfRule(rule()),
            n,
            anticipate,
            trace,
        )),
        PolicyName::Cscan => {
            Box::new(Anticipation::new(Cscan::new(cap), CscanRule(rule()), n, anticipate, trace))
        }
        PolicyName::Stride => {
            let weights = weights(streams);
            if anticipate {
                // The window in service of the lightest client (clocks move by service over
                // weight).
                let lightest = u64::from(weights.iter().copied().min().unwrap_or(1).max(1));
                let p = Stride::relaxed(cap, &weights, STRIDE_WINDOW_NS / lightest, m());
                Box::new(Anticipation::new(p, CombinedRule(rule()), n, true, trace))
            } else {
                let p: Stride<DiskModel> = Stride::new(cap, &weights);
                Box::new(Anticipation::new(p, StrideRule(m()), n, false, trace))
            }
        }
        PolicyName::Usd => {
            let mut usd = Usd::new(m(), anticipate, per_client.max(1), trace);
            usd.atropos_mut().set_trace(true);
            for c in streams {
                usd.open(c.unwrap_or(Contract::BEST_EFFORT), now_ns);
            }
            Box::new(usd)
        }
    }
}

#[cfg(test)]
mod tests {
    use atropos::MILLISECOND;

    use super::*;

    #[test]
    fn stride_weights_are_the_shares_reduced() {
        let c = |ms| {
            Some(Contract {
                period: 1000 * MILLISECOND,
                slice: ms * MILLISECOND,
                extra: true,
                latency: 1000 * MILLISECOND,
            })
        };
        assert_eq!(weights(&[c(300), c(600)]), [1, 2]);
        assert_eq!(weights(&[None, None, c(100)]), [1, 1, 10]);
        assert_eq!(weights(&[c(333), c(667)]), [333, 667]);
    }

    #[test]
    fn every_name_parses_back() {
        for p in PolicyName::ALL {
            assert_eq!(PolicyName::parse(p.name()), Some(p));
        }
        assert_eq!(PolicyName::parse("noop"), None);
    }
}
