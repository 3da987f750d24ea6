//! The anticipation core: the scheduler-independent waiting logic around a base policy.
//!
//! A work-conserving scheduler dispatches whenever the disk is free. Around a base [`Policy`],
//! the core adds a third state to IDLE and BUSY: WAIT, the disk kept idle with requests
//! pending, for the client whose request completed last (the *last process*, LP) to issue its
//! next, expected nearby or owed service. Whenever the disk could take a request ([`next`]):
//! 1. The policy chooses a candidate, without dequeuing it.
//! 2. Unless the wait has run out, or LP already has a read pending (it is blocked on the
//!    disk: nothing to wait for, the short-circuit), the policy's [`Heuristic`] weighs the
//!    candidate against LP's expected next request; only reads are weighed (a write candidate
//!    is dispatched at once).
//! 3. A positive answer while the disk is idle arms one timeout and enters WAIT; each arrival
//!    during WAIT chooses and weighs again; the timeout is **never re-armed or extended**, and
//!    when it expires the chosen request is dispatched without further weighing. While other
//!    requests are at the disk, a positive answer only holds back further dispatches.
//!
//! The core does not keep time: the caller passes its clock, arms the timer the core names in
//! [`Decision::Wait`] and calls [`next`] again when it fires, on every arrival and on every
//! completion. Every wait is recorded ([`WaitRecord`]) with the instant it really ended, the
//! caller's clock at the dispatch that ended it (a timer that fires late makes a timed-out
//! wait end after its timeout), so a test checks from outside that no wait outlived its
//! timeout by more than [`LATE_ALLOWANCE_NS`]. With anticipation off ([`Anticipation::new`]'s `enabled`) the
//! core is the work-conserving base policy, for comparison.
//!
//! [`next`]: Anticipation::next

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use super::policy::{Full, Pending, Policy};
use super::stats::ClientStats;

// ANCHOR: weighing
/// What the policy's heuristic sees when it weighs a candidate.
#[derive(Clone, Copy, Debug)]
pub struct Weighing<'a> {
    /// LP's statistics.
    pub lp: &'a ClientStats,
    /// LP's request that completed last.
    pub last: &'a Pending,
    /// The policy's candidate.
    pub candidate: &'a Pending,
    /// Where the head is (the sector after the last one served).
    pub head: u64,
    /// Now.
    pub now_ns: u64,
    /// Time since LP's last request completed.
    pub elapsed_ns: u64,
}
// ANCHOR_END: weighing

/// A policy-specific anticipation heuristic: how long to wait for LP rather than dispatch the
/// candidate.
pub trait Heuristic<P: Policy> {
    /// How long to keep the disk idle for LP, in ns from now; 0: dispatch the candidate.
    fn evaluate(&self, policy: &P, w: &Weighing<'_>) -> u64;

    /// The positioning-time estimate the heuristic reasons with (the core keeps each client's
    /// expected positioning time by it: from the end of its previous read to the start of its
    /// next, its own locality).
    fn positioning_ns(&self, from: u64, to: u64) -> u64;
}

/// What the caller should do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Give this request to the disk.
    Dispatch(Pending),
    /// Keep the disk idle until this instant, or an arrival; then call [`Anticipation::next`]
    /// again (at that instant, arm a timer for it).
    Wait {
        /// When the wait runs out.
        until_ns: u64,
    },
    /// Dispatch nothing more until a completion or an arrival (requests are at the disk and
    /// the heuristic would rather wait for LP).
    Hold,
    /// Nothing is pending.
    Idle,
}

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// LP's request came and was dispatched.
    Anticipated,
    /// Another client's request was dispatched before the timeout (the heuristic changed its
    /// mind on an arrival).
    Abandoned,
    /// The timeout ran out.
    TimedOut,
}

/// One wait, for the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitRecord {
    /// The client waited for.
    pub client: usize,
    /// When it began.
    pub since_ns: u64,
    /// The timeout armed.
    pub until_ns: u64,
    /// When it really ended: the caller's clock at the call that ended it (for a wait that
    /// timed out, when the caller came back after the timer, however late).
    pub ended_ns: u64,
    /// How.
    pub end: WaitEnd,
}

/// How long after its timeout a wait may end and still count as ending by it: the time the
/// caller takes to come back once its timer fires (the kernel's wake-up and the driver's loop,
/// a few tens of µs under `-icount`; see [`WaitTotals::late_max_ns`]). A timer late by more
/// makes the wait count in [`WaitTotals::exceeded`].
pub const LATE_ALLOWANCE_NS: u64 = 100_000;

/// Every wait of a scheduler, summed: what a driver reports, so that a test checks from outside
/// that no wait outlived its timeout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitTotals {
    /// Waits.
    pub count: u64,
    /// Those that ended with LP's request.
    pub anticipated: u64,
    /// Those that timed out.
    pub timed_out: u64,
    /// Those that another client's request ended.
    pub abandoned: u64,
    /// Those that ended more than [`LATE_ALLOWANCE_NS`] after their timeout (never, if the
    /// scheduler keeps its word and its caller's timer is on time).
    pub exceeded: u64,
    /// The most any wait ended after its timeout, in ns (0 if none did).
    pub late_max_ns: u64,
    /// The longest, in ns.
    pub longest_ns: u64,
}

/// The waits of a scheduler: the last few in full, at most a fixed number (the oldest dropped
/// first), and every one summed ([`WaitTotals`]).
#[derive(Clone, Debug)]
pub struct WaitTrace {
    records: VecDeque<WaitRecord>,
    capacity: usize,
    totals: WaitTotals,
}

impl WaitTrace {
    /// Keeps the last `capacity` waits (none with 0), its room allocated now.
    pub fn new(capacity: usize) -> WaitTrace {
        WaitTrace {
            records: VecDeque::with_capacity(capacity),
            capacity,
            totals: WaitTotals::default(),
        }
    }

    /// Every wait so far, summed.
    pub fn totals(&self) -> WaitTotals {
        self.totals
    }

    /// Records `w`, dropping the oldest if the trace is full.
    pub fn push(&mut self, w: WaitRecord) {
        let t = &mut self.totals;
        t.count += 1;
        match w.end {
            WaitEnd::Anticipated => t.anticipated += 1,
            WaitEnd::TimedOut => t.timed_out += 1,
            WaitEnd::Abandoned => t.abandoned += 1,
        }
        let late = w.ended_ns.saturating_sub(w.until_ns);
        t.exceeded += u64::from(late > LATE_ALLOWANCE_NS);
        t.late_max_ns = t.late_max_ns.max(late);
        t.longest_ns = t.longest_ns.max(w.ended_ns.saturating_sub(w.since_ns));
        if self.capacity == 0 {
            return;
        }
        if self.records.len() == self.capacity {
            self.records.pop_front();
        }
        self.records.push_back(w);
    }

    /// The waits kept, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &WaitRecord> {
        self.records.iter()
    }

    /// The latest wait kept.
    pub fn last(&self) -> Option<&WaitRecord> {
        self.records.back()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// A base policy wrapped in anticipation.
pub struct Anticipation<P: Policy, H: Heuristic<P>> {
    policy: P,
    heuristic: H,
    enabled: bool,
    clients: Vec<ClientStats>,
    head: u64,
    last: Option<Pending>,
    /// The current wait: since, until.
    wait: Option<(u64, u64)>,
    in_flight: u32,
    trace: WaitTrace,
}

impl<P: Policy, H: Heuristic<P>> Anticipation<P, H> {
    /// `policy` wrapped with `heuristic` for clients `0..clients`, anticipating if `enabled`;
    /// the last `trace_capacity` waits are kept.
    pub fn new(
        policy: P,
        heuristic: H,
        clients: usize,
        enabled: bool,
        trace_capacity: usize,
    ) -> Self {
        Anticipation {
            policy,
            heuristic,
            enabled,
            clients: vec![ClientStats::default(); clients],
            head: 0,
            last: None,
            wait: None,
            in_flight: 0,
            trace: WaitTrace::new(trace_capacity),
        }
    }

    /// The base policy.
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// Client `c`'s statistics.
    pub fn client(&self, c: usize) -> &ClientStats {
        &self.clients[c]
    }

    /// The waits recorded (at most the trace's capacity: the oldest are dropped).
    pub fn trace(&self) -> &WaitTrace {
        &self.trace
    }

    /// Whether the core is waiting for LP.
    pub fn waiting(&self) -> bool {
        self.wait.is_some()
    }

    /// A request arrives at `now_ns`: its client's think time is recorded (reads only) and
    /// the policy takes it; [`Full`] if it holds its most (nothing changes then).
    pub fn arrive(&mut self, r: Pending, now_ns: u64) -> Result<(), Full> {
        self.policy.enqueue(r)?;
        let s = &mut self.clients[r.client];
        if r.read {
            if s.pending_reads > 0 || s.in_flight > 0 {
                s.record_think(0);
            } else if let Some(finish) = s.prev_finish_ns {
                s.record_think(now_ns.saturating_sub(finish));
            }
            // Its locality: how far this request is from the end of its previous one.
            if let Some(end) = s.prev_end {
                let ns = self.heuristic.positioning_ns(end, r.lbn);
                s.record_position(ns, r.lbn >= end);
            }
            s.prev_end = Some(r.end());
            s.pending_reads += 1;
        }
        Ok(())
    }

    /// What to do at `now_ns`: called whenever the disk could take a request (a completion, an
    /// arrival, the wait's timer).
    pub fn next(&mut self, now_ns: u64) -> Decision {
        let Some(candidate) = self.policy.choose(self.head, now_ns) else {
            return Decision::Idle;
        };
        let timed_out = self.wait.is_some_and(|(_, until)| now_ns >= until);
        if self.enabled
            && !timed_out
            && candidate.read
            && let Some(last) = self.last
            // LP blocked on the disk (a read of its own pending): nothing to wait for.
            && self.clients[last.client].pending_reads == 0
        {
            let lp = &self.clients[last.client];
            let w = Weighing {
                lp,
                last: &last,
                candidate: &candidate,
                head: self.head,
                now_ns,
                elapsed_ns: lp.prev_finish_ns.map_or(0, |f| now_ns.saturating_sub(f)),
            };
            let wait_ns = self.heuristic.evaluate(&self.policy, &w);
            if wait_ns > 0 {
                if self.in_flight > 0 {
                    return Decision::Hold;
                }
                // One timeout per wait, never extended.
                let (_, until) = *self.wait.get_or_insert((now_ns, now_ns + wait_ns));
                return Decision::Wait { until_ns: until };
            }
        }
        self.dispatch(candidate, now_ns, timed_out)
    }

    fn dispatch(&mut self, r: Pending, now_ns: u64, timed_out: bool) -> Decision {
        let r = self.policy.dequeue(r.id, now_ns).expect("the policy's candidate is pending");
        if let Some((since, until)) = self.wait.take() {
            let client = self.last.map_or(r.client, |l| l.client);
            let end = if timed_out {
                WaitEnd::TimedOut
            } else if r.client == client {
                WaitEnd::Anticipated
            } else {
                WaitEnd::Abandoned
            };
            // The wait really ended now, however late the caller came back after its timer.
            self.trace.push(WaitRecord {
                client,
                since_ns: since,
                until_ns: until,
                ended_ns: now_ns,
                end,
            });
        }
        let s = &mut self.clients[r.client];
        if r.read {
            s.pending_reads -= 1;
        }
        s.in_flight += 1;
        self.head = r.end();
        self.in_flight += 1;
        Decision::Dispatch(r)
    }

    /// Request `r`, dispatched earlier, completed at `now_ns` after `service_ns` of disk time.
    pub fn complete(&mut self, r: &Pending, service_ns: u64, now_ns: u64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.policy.finish(r, service_ns, now_ns);
        let s = &mut self.clients[r.client];
        s.in_flight = s.in_flight.saturating_sub(1);
        s.prev_finish_ns = Some(now_ns);
        s.idle_at_last_finish = s.pending_reads == 0;
        self.last = Some(*r);
    }
}
