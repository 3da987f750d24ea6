//! The queued scheduler against the reference (the pass-over-all-clients scheduler it
//! replaced) on seeded random workloads: many clients under random admitted contracts, blocked,
//! woken, yielding, removed, added, charged for kernel work done for them and dispatched at
//! random instants, with time moving the way
//! a kernel moves it (to the dispatch's `until`, short of it, or far past it). At every step
//! both must give the same answers, accounts and period records.

use std::format;
use std::string::String;
use std::vec::Vec;

use super::reference::Reference;
use crate::*;

const MS: Nanos = MILLISECOND;

use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{Rng as _, SeedableRng};

/// SplitMix64 (`rand_xoshiro`'s), seeded: the state starts at the seed.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(SplitMix64::seed_from_u64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with `percent` percent probability.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}

/// A random contract that passes validation: periods from the shortest to 200 ms, mostly a
/// few milliseconds, shares mostly small so that dozens fit.
fn random_contract(rng: &mut Rng) -> Contract {
    if rng.chance(30) {
        // Round figures, so that deadlines and keys coincide and the ties are broken.
        let period = [MS, 2 * MS, 5 * MS, 10 * MS][rng.index(4)];
        let slice = [MIN_SLICE, 50 * MICROSECOND, 100 * MICROSECOND][rng.index(3)];
        let latency = [MIN_LATENCY, 100 * MICROSECOND, MS][rng.index(3)];
        return Contract { period, slice, extra: rng.chance(50), latency };
    }
    let period = match rng.below(4) {
        0 => MIN_PERIOD + rng.below(MS),
        1 | 2 => MS + rng.below(20 * MS),
        _ => MS + rng.below(200 * MS),
    };
    let most = (period / (2 + rng.below(40))).max(MIN_SLICE);
    let slice = MIN_SLICE + rng.below(most - MIN_SLICE + 1);
    let latency = MIN_LATENCY + rng.below(period);
    let c = Contract { period, slice, extra: rng.chance(50), latency };
    assert_eq!(c.validate(), Ok(()), "{c:?}");
    c
}

/// The two schedulers, driven alike.
struct Pair {
    new: Atropos,
    old: Reference,
    contracts: Vec<Contract>,
    now: Nanos,
    /// The `until` of the last dispatch, if any.
    until: Option<Nanos>,
    log: Vec<String>,
    /// The most the contracts may sum to, in parts per billion (up to the admission limit).
    load_ppb: u64,
    /// Time moves in steps of this (1 ns, or 10 µs so that instants coincide).
    grain: Nanos,
    /// Clients blocked lately: the wake-ups go mostly to them.
    blocked: Vec<usize>,
    /// Dispatches seen: guaranteed, extra, none.
    dispatches: [u64; 3],
    /// Intervals charged to a client other than the dispatched one, and to none that exists.
    charged_to: [u64; 2],
    /// The clients' missed deadlines, late ends, wake-ups and periods, summed over their
    /// accounts before each restart zeroed them.
    counted: [u64; 4],
}

impl Pair {
    /// Adds the clients' accounts to `counted`.
    fn count(&mut self) {
        for a in (0..self.contracts.len()).filter_map(|i| self.new.accounts(i)) {
            let add = [a.deadlines_missed, a.late_ends, a.wakeups, a.periods];
            for (c, x) in self.counted.iter_mut().zip(add) {
                *c += x;
            }
        }
    }

    /// Adds a random contract if it fits with the others (not counting removed ones: admission
    /// is over the set the kernel admitted, which only grows).
    fn try_add(&mut self, rng: &mut Rng) {
        let c = random_contract(rng);
        let mut all = self.contracts.clone();
        all.push(c);
        if admit(&all).is_ok_and(|total| total > self.load_ppb) || admit(&all).is_err() {
            return;
        }
        self.contracts.push(c);
        let a = self.new.add(c, self.now);
        let b = self.old.add(c, self.now);
        self.log.push(format!("{}: add {c:?} -> {a}", self.now));
        assert_eq!(a, b);
    }

    fn check(&mut self, seed: u64, step: usize) {
        let ctx = || {
            format!(
                "seed {seed} step {step}:\n{}",
                self.log[self.log.len().saturating_sub(30)..].join("\n")
            )
        };
        assert_eq!(self.new.running(), self.old.running(), "running, {}", ctx());
        assert_eq!(self.new.next_event(), self.old.next_event(), "next_event, {}", ctx());
        assert_eq!(self.new.tracing(), self.old.tracing(), "{}", ctx());
        for id in 0..=self.contracts.len() {
            assert_eq!(self.new.contract(id), self.old.contract(id), "client {id}, {}", ctx());
            assert_eq!(self.new.accounts(id), self.old.accounts(id), "client {id}, {}", ctx());
            assert_eq!(self.new.view(id), self.old.view(id), "client {id}, {}", ctx());
            assert_eq!(self.new.remaining(id), self.old.remaining(id), "client {id}, {}", ctx());
            assert_eq!(
                self.new.period_start(id),
                self.old.period_start(id),
                "client {id}, {}",
                ctx()
            );
        }
        let (a, b) = (self.new.take_records(), self.old.take_records());
        assert_eq!(a, b, "period records, {}", ctx());
    }

    /// Moves time on: not at all, to the last dispatch's `until` (or short of it), a little, or
    /// far (past many periods: the ends the scheduler sees late).
    fn advance(&mut self, rng: &mut Rng) {
        let by = match rng.below(10) {
            0 | 1 => 0,
            2..=5 => match self.until {
                Some(u) if u > self.now && u - self.now < 10 * MILLISECOND * 1000 => {
                    let to = u - self.now;
                    if rng.chance(70) { to } else { rng.below(to) + 1 }
                }
                _ => rng.below(MS),
            },
            6 | 7 => rng.below(100 * MICROSECOND),
            8 => rng.below(20 * MS),
            _ if rng.chance(5) => rng.below(200 * MS),
            _ => rng.below(3 * MS),
        };
        self.now = (self.now + by).next_multiple_of(self.grain);
    }

    /// A client index: mostly the running one, sometimes any, sometimes none that exists.
    fn pick(&mut self, rng: &mut Rng) -> usize {
        match (self.new.running(), rng.below(10)) {
            (Some((id, _)), 0..=4) => id,
            (_, 9) => self.contracts.len() + rng.index(3),
            _ => rng.index(self.contracts.len().max(1)),
        }
    }

    fn step(&mut self, rng: &mut Rng) {
        self.advance(rng);
        let now = self.now;
        match rng.below(100) {
            0..=39 => {
                let (a, b) = (self.new.dispatch(now), self.old.dispatch(now));
                self.log.push(format!("{now}: dispatch -> {a:?}"));
                assert_eq!(a, b, "dispatch at {now}");
                self.until = a.map(|d| d.until);
                self.dispatches[match a.map(|d| d.mode) {
                    Some(Mode::Guaranteed) => 0,
                    Some(Mode::Extra) => 1,
                    None => 2,
                }] += 1;
                if a.is_none() {
                    // Idle: the kernel waits for the next event (or an outside one).
                    if let Some(t) = self.new.next_event()
                        && rng.chance(60)
                        && t > now
                        && t - now < 1000 * MS
                    {
                        self.until = Some(t);
                    }
                }
            }
            40..=54 => {
                let id = self.pick(rng);
                self.log.push(format!("{now}: block {id}"));
                self.blocked.push(id);
                self.new.block(id, now);
                self.old.block(id, now);
            }
            55..=74 => {
                let id = if rng.chance(90) {
                    rng.index(self.contracts.len().max(1))
                } else {
                    self.pick(rng)
                };
                let (a, b) = (self.new.wake(id, now), self.old.wake(id, now));
                self.log.push(format!("{now}: wake {id} -> {a}"));
                assert_eq!(a, b, "wake {id} at {now}");
            }
            75..=89 => {
                let id = self.pick(rng);
                self.log.push(format!("{now}: yield {id}"));
                self.new.yield_now(id, now);
                self.old.yield_now(id, now);
            }
            90 if rng.chance(15) => {
                let id = self.pick(rng);
                self.log.push(format!("{now}: remove {id}"));
                self.new.remove(id, now);
                self.old.remove(id, now);
            }
            92..=95 => self.try_add(rng),
            96 if rng.chance(20) => {
                self.log.push(format!("{now}: restart"));
                self.count();
                self.new.restart(now);
                self.old.restart(now);
            }
            98 | 99 => {
                // Kernel work for a client: an interval that may start before the dispatched
                // client's last charge (or before any), ending now or later; time moves to its
                // end, as the kernel's clock has when it asks next.
                let id = self.pick(rng);
                let from = now.saturating_sub(if rng.chance(30) { 0 } else { rng.below(MS) });
                let to = now + rng.below(300 * MICROSECOND);
                self.log.push(format!("{now}: charge_to {id} {from}..{to}"));
                if self.new.running().is_some_and(|(r, _)| r != id) {
                    self.charged_to[usize::from(id >= self.contracts.len())] += 1;
                }
                self.new.charge_to(id, from, to);
                self.old.charge_to(id, from, to);
                self.now = to;
            }
            97 => {
                let on = !self.new.tracing();
                self.new.set_trace(on);
                self.old.set_trace(on);
            }
            _ => {}
        }
    }
}

/// What one workload exercised: dispatches (guaranteed, extra, none), then the sums of the
/// clients' missed deadlines, late ends, wake-ups and periods, then the intervals charged to
/// another client than the dispatched one (one that exists, one that does not).
type Exercised = [u64; 9];

fn run(seed: u64, steps: usize) -> Exercised {
    let mut rng = Rng::new(seed);
    let mut pair = Pair {
        new: Atropos::new(),
        old: Reference::new(),
        contracts: Vec::new(),
        now: rng.below(10 * MS),
        until: None,
        log: Vec::new(),
        load_ppb: CAPACITY_PPB / 10 * (1 + rng.below(10)),
        grain: if rng.chance(50) { 10 * MICROSECOND } else { 1 },
        blocked: Vec::new(),
        dispatches: [0; 3],
        charged_to: [0; 2],
        counted: [0; 4],
    };
    pair.new.set_trace(true);
    pair.old.set_trace(true);
    let clients = 1 + rng.index(64);
    for _ in 0..clients * 4 {
        if pair.contracts.len() < clients {
            pair.try_add(&mut rng);
        }
    }
    if rng.chance(50) {
        pair.new.restart(pair.now);
        pair.old.restart(pair.now);
    }
    pair.check(seed, 0);
    for step in 1..=steps {
        pair.step(&mut rng);
        pair.check(seed, step);
    }
    pair.count();
    let [g, e, n] = pair.dispatches;
    let [missed, late, wakeups, periods] = pair.counted;
    let [other, unknown] = pair.charged_to;
    [g, e, n, missed, late, wakeups, periods, other, unknown]
}

#[test]
fn queued_scheduler_matches_the_reference_on_random_workloads() {
    let mut total: Exercised = [0; 9];
    for seed in 0..200 {
        for (t, x) in total.iter_mut().zip(run(seed, 2500)) {
            *t += x;
        }
    }
    // The comparison is only as good as the workloads: they must reach every rule.
    let [guaranteed, extra, idle, missed, late, wakeups, periods, other, unknown] = total;
    std::println!("{total:?}");
    assert!(guaranteed > 10_000 && extra > 5_000 && idle > 5_000, "{total:?}");
    assert!(missed > 1000 && late > 100 && wakeups > 20_000 && periods > 10_000, "{total:?}");
    assert!(other > 1_000 && unknown > 100, "{total:?}");
}
