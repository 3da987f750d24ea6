//! The server's CPU among its clients, and its link: an earliest-deadline-first scheduler over
//! each client's contract (`period`, `slice`, `extra`), charged with the time the server
//! measured serving it (for the CPU) or with its replies' link time (for the link; the
//! server keeps one scheduler for each).
//!
//! Each client has a budget of `slice` ns of the server's CPU in every `period` ns, its
//! periods counted from its admission. Work is taken from the client with budget left and work
//! queued whose period ends first; what its work cost (by the server's clock) is taken from the
//! budget, and may take it below zero by one packet's cost, which the next period pays back. A
//! client whose budget is spent waits for its next period, unless it has `extra` and no
//! client with budget left has work: then the server's slack time serves it (in EDF order too).
//! A client whose contract is zero (`slice == 0`) is served in slack time only.

use alloc::vec::Vec;

/// A client's contract with the server's CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Contract {
    /// The period, in ns (at least 1).
    pub period_ns: u64,
    /// The guaranteed time in each period, in ns.
    pub slice_ns: u64,
    /// Whether it may use the server's slack time beyond its slice.
    pub extra: bool,
}

impl Contract {
    /// The share of the server's CPU it guarantees, in parts per million.
    pub fn ppm(&self) -> u64 {
        self.slice_ns.saturating_mul(1_000_000) / self.period_ns.max(1)
    }
}

#[derive(Clone, Debug)]
struct Slot {
    contract: Contract,
    /// The end of its current period.
    deadline: u64,
    /// Budget left in the current period (negative: overdrawn by the last packet).
    budget: i64,
    /// Whether it has work queued.
    ready: bool,
    /// CPU charged to it in all, ns.
    charged: u64,
    /// CPU charged to it beyond its guarantee (slack time), ns.
    extra_ns: u64,
    /// Periods in which it had to wait for its next period with work queued.
    throttled: u64,
    throttled_now: bool,
}

/// The scheduler: clients by index (the server's stream numbers), see the [module](self).
#[derive(Clone, Debug, Default)]
pub struct Scheduler {
    slots: Vec<Option<Slot>>,
}

/// Why a client is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// Within its slice.
    Guaranteed,
    /// In slack time.
    Extra,
}

/// What the scheduler counted of a client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Charged {
    /// CPU charged, ns.
    pub cpu_ns: u64,
    /// Of which in slack time.
    pub extra_ns: u64,
    /// Periods in which it waited, its slice spent, with work queued.
    pub throttled: u64,
}

impl Scheduler {
    /// Adds client `i` at `now` under `contract` (its first period starts now).
    pub fn admit(&mut self, i: usize, contract: Contract, now: u64) {
        let contract = Contract { period_ns: contract.period_ns.max(1), ..contract };
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        self.slots[i] = Some(Slot {
            contract,
            deadline: now.saturating_add(contract.period_ns),
            budget: contract.slice_ns as i64,
            ready: false,
            charged: 0,
            extra_ns: 0,
            throttled: 0,
            throttled_now: false,
        });
    }

    /// Removes client `i`: what it was charged.
    pub fn remove(&mut self, i: usize) -> Option<Charged> {
        let s = self.slots.get_mut(i)?.take()?;
        Some(Charged { cpu_ns: s.charged, extra_ns: s.extra_ns, throttled: s.throttled })
    }

    /// What client `i` was charged so far.
    pub fn charged(&self, i: usize) -> Option<Charged> {
        let s = self.slots.get(i)?.as_ref()?;
        Some(Charged { cpu_ns: s.charged, extra_ns: s.extra_ns, throttled: s.throttled })
    }

    /// The sum of the admitted clients' guaranteed shares, in parts per million.
    pub fn committed_ppm(&self) -> u64 {
        self.slots.iter().flatten().map(|s| s.contract.ppm()).sum()
    }

    /// Says whether client `i` has work queued.
    pub fn set_ready(&mut self, i: usize, ready: bool) {
        if let Some(Some(s)) = self.slots.get_mut(i) {
            s.ready = ready;
        }
    }

    /// Starts the periods that ended by `now`, refilling budgets.
    fn refill(&mut self, now: u64) {
        for s in self.slots.iter_mut().flatten() {
            if s.deadline <= now {
                let p = s.contract.period_ns;
                let behind = (now - s.deadline) / p + 1;
                s.deadline = s.deadline.saturating_add(behind.saturating_mul(p));
                // An overdraft is paid back from the new slice; unused budget is not kept.
                s.budget =
                    (s.budget.min(0) + s.contract.slice_ns as i64).min(s.contract.slice_ns as i64);
                s.throttled_now = false;
            }
        }
    }

    /// The client to serve at `now`, and why; `None` if no client with work may run now (see
    /// [`Scheduler::next_start`]).
    pub fn pick(&mut self, now: u64) -> Option<(usize, Grant)> {
        self.refill(now);
        let mut best: Option<(usize, u64)> = None;
        let mut extra: Option<(usize, u64)> = None;
        for (i, s) in self.slots.iter_mut().enumerate() {
            let Some(s) = s else { continue };
            if !s.ready {
                continue;
            }
            if s.budget > 0 {
                if best.is_none_or(|(_, d)| s.deadline < d) {
                    best = Some((i, s.deadline));
                }
            } else {
                if !s.throttled_now && s.contract.slice_ns > 0 {
                    s.throttled_now = true;
                    s.throttled += 1;
                }
                if s.contract.extra && extra.is_none_or(|(_, d)| s.deadline < d) {
                    extra = Some((i, s.deadline));
                }
            }
        }
        match (best, extra) {
            (Some((i, _)), _) => Some((i, Grant::Guaranteed)),
            (None, Some((i, _))) => Some((i, Grant::Extra)),
            (None, None) => None,
        }
    }

    /// Charges client `i` `ns` of CPU, granted as `grant`.
    pub fn charge(&mut self, i: usize, ns: u64, grant: Grant) {
        if let Some(Some(s)) = self.slots.get_mut(i) {
            s.charged = s.charged.saturating_add(ns);
            match grant {
                Grant::Guaranteed => {
                    s.budget = s.budget.saturating_sub(ns.min(i64::MAX as u64) as i64)
                }
                Grant::Extra => s.extra_ns = s.extra_ns.saturating_add(ns),
            }
        }
    }

    /// Charges client `i` `ns` of work done outside [`Scheduler::pick`]'s turns (its packets'
    /// receive work): from its budget while it has some or has no claim on slack time, else
    /// as slack time.
    pub fn charge_work(&mut self, i: usize, ns: u64) {
        let Some(Some(s)) = self.slots.get(i) else { return };
        let grant =
            if s.budget > 0 || !s.contract.extra { Grant::Guaranteed } else { Grant::Extra };
        self.charge(i, ns, grant);
    }

    /// When a client with work queued and its slice spent (and no slack to use) may run again:
    /// the earliest end of such a client's period.
    pub fn next_start(&self) -> Option<u64> {
        self.slots.iter().flatten().filter(|s| s.ready && s.budget <= 0).map(|s| s.deadline).min()
    }
}
