//! Host tests: a small simulator drives the scheduler the way the kernel does (dispatch, run
//! until the answer's `until` or the next outside event, repeat) and checks the rules.

use std::vec;
use std::vec::Vec;

use super::*;

const MS: Nanos = MILLISECOND;
const US: Nanos = MICROSECOND;

fn contract(period: Nanos, slice: Nanos, extra: bool) -> Contract {
    Contract { period, slice, extra, latency: MS }
}

/// What a simulated client does.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Always runnable.
    Spin,
    /// Runs `run` of CPU, then blocks for `sleep` of wall time, forever.
    Burst { run: Nanos, sleep: Nanos },
    /// Spins until `at`, then is removed.
    DieAt(Nanos),
}

struct Sim {
    s: Atropos,
    now: Nanos,
    behaviour: Vec<Behaviour>,
    /// CPU received per client, as the simulation saw it.
    got: Vec<Nanos>,
    /// For bursting clients: CPU left in the current burst, or the wake-up time while asleep.
    burst_left: Vec<Nanos>,
    wake_at: Vec<Option<Nanos>>,
    /// Every stretch of CPU a client got: (client, from, to).
    runs: Vec<(usize, Nanos, Nanos)>,
    /// Cost charged to nobody between dispatches (a kernel's switch cost), per dispatch.
    overhead: Nanos,
}

impl Sim {
    fn new(clients: &[(Contract, Behaviour)]) -> Sim {
        let mut s = Atropos::new();
        s.set_trace(true);
        for (c, _) in clients {
            s.add(*c, 0);
        }
        let behaviour: Vec<_> = clients.iter().map(|(_, b)| *b).collect();
        let burst_left = behaviour
            .iter()
            .map(|b| match b {
                Behaviour::Burst { run, .. } => *run,
                _ => 0,
            })
            .collect();
        Sim {
            s,
            now: 0,
            got: vec![0; clients.len()],
            burst_left,
            wake_at: vec![None; clients.len()],
            behaviour,
            runs: Vec::new(),
            overhead: 0,
        }
    }

    fn next_outside_event(&self) -> Option<Nanos> {
        let wakes = self.wake_at.iter().flatten().copied();
        let deaths = self.behaviour.iter().enumerate().filter_map(|(i, b)| match b {
            Behaviour::DieAt(t) if self.wake_at[i].is_none() && *t > self.now => Some(*t),
            _ => None,
        });
        wakes.chain(deaths).min()
    }

    fn outside_events(&mut self) {
        for i in 0..self.behaviour.len() {
            if self.wake_at[i].is_some_and(|t| t <= self.now) {
                self.wake_at[i] = None;
                if let Behaviour::Burst { run, .. } = self.behaviour[i] {
                    self.burst_left[i] = run;
                }
                self.s.wake(i, self.now);
            }
            if let Behaviour::DieAt(t) = self.behaviour[i]
                && t <= self.now
            {
                self.behaviour[i] = Behaviour::Spin;
                self.wake_at[i] = None;
                self.s.remove(i, self.now);
            }
        }
    }

    fn run_until(&mut self, end: Nanos) {
        while self.now < end {
            self.outside_events();
            let outside = self.next_outside_event().unwrap_or(end).min(end);
            match self.s.dispatch(self.now) {
                None => {
                    let next = self.s.next_event().unwrap_or(end).min(outside);
                    assert!(next > self.now, "idle without progress at {}", self.now);
                    self.now = next;
                }
                Some(d) => {
                    assert!(d.until > self.now);
                    let mut stop = d.until.min(outside);
                    if let Behaviour::Burst { .. } = self.behaviour[d.client] {
                        stop = stop.min(self.now + self.burst_left[d.client]);
                    }
                    let from = self.now;
                    self.got[d.client] += stop - from;
                    self.runs.push((d.client, from, stop));
                    self.now = stop + self.overhead;
                    if let Behaviour::Burst { sleep, .. } = self.behaviour[d.client] {
                        self.burst_left[d.client] -= stop - from;
                        if self.burst_left[d.client] == 0 {
                            self.s.block(d.client, stop);
                            self.wake_at[d.client] = Some(stop + sleep);
                        }
                    }
                }
            }
        }
        self.s.dispatch(self.now);
    }

    /// CPU client `id` got in `[from, to)`.
    fn got_between(&self, id: usize, from: Nanos, to: Nanos) -> Nanos {
        self.runs
            .iter()
            .filter(|(c, _, _)| *c == id)
            .map(|&(_, a, b)| b.min(to).saturating_sub(a.max(from)))
            .sum()
    }
}

fn percent(part: Nanos, whole: Nanos) -> f64 {
    part as f64 * 100.0 / whole as f64
}

#[test]
fn three_fixed_contracts_get_exactly_their_slices() {
    let slices = [MS, 2 * MS, 5 * MS];
    let clients: Vec<_> =
        slices.iter().map(|&s| (contract(10 * MS, s, false), Behaviour::Spin)).collect();
    let mut sim = Sim::new(&clients);
    sim.run_until(1000 * MS);
    for (i, &s) in slices.iter().enumerate() {
        assert_eq!(sim.got[i], 100 * s, "client {i} over one second");
        for w in 0..100 {
            let got = sim.got_between(i, w * 10 * MS, (w + 1) * 10 * MS);
            assert_eq!(got, s, "client {i} in window {w}");
        }
        let a = sim.s.accounts(i).unwrap();
        assert_eq!(a.guaranteed, 100 * s);
        assert_eq!(a.extra, 0);
        assert_eq!(a.deadlines_missed, 0);
        assert_eq!(a.periods, 100);
    }
}

#[test]
fn mixed_periods_meet_every_deadline() {
    let clients = [
        (contract(5 * MS, MS, false), Behaviour::Spin),
        (contract(100 * MS, 10 * MS, false), Behaviour::Spin),
        (contract(50 * MS, 15 * MS, false), Behaviour::Spin),
    ];
    let mut sim = Sim::new(&clients);
    sim.overhead = US;
    sim.run_until(1000 * MS);
    for (i, (c, _)) in clients.iter().enumerate() {
        let a = sim.s.accounts(i).unwrap();
        assert_eq!(a.deadlines_missed, 0, "client {i}");
        assert_eq!(a.late_ends, 0, "client {i}: a period end seen late");
        let periods = 1000 * MS / c.period;
        assert_eq!(a.periods, periods, "client {i}");
        for k in 0..periods {
            let got = sim.got_between(i, k * c.period, (k + 1) * c.period);
            assert!(c.slice - got <= 10 * US, "client {i} period {k}: {got} of {}", c.slice);
        }
    }
    let records = sim.s.take_records();
    assert_eq!(records.len(), 200 + 10 + 20);
    for r in &records {
        let slice = clients[r.client].0.slice;
        assert!(!r.missed && r.guaranteed >= slice && r.guaranteed - slice <= 10 * US, "{r:?}");
    }
}

#[test]
fn slack_is_split_evenly_between_extra_clients() {
    let clients = [
        (contract(10 * MS, MS, true), Behaviour::Spin),
        (contract(10 * MS, 2 * MS, true), Behaviour::Spin),
        (contract(10 * MS, 5 * MS, false), Behaviour::Spin),
    ];
    let mut sim = Sim::new(&clients);
    sim.run_until(1000 * MS);
    let total = 1000 * MS;
    let a = sim.s.accounts(0).unwrap();
    let b = sim.s.accounts(1).unwrap();
    assert_eq!(sim.s.accounts(2).unwrap().extra, 0);
    assert_eq!(sim.got[2], 500 * MS, "the extra = false client gets exactly its contract");
    assert_eq!(a.guaranteed, 100 * MS);
    assert_eq!(b.guaranteed, 200 * MS);
    assert!(a.extra.abs_diff(b.extra) <= EXTRA_QUANTUM, "{} vs {}", a.extra, b.extra);
    assert_eq!(sim.got[0] + sim.got[1] + sim.got[2], total, "the CPU is never idle");
    assert!((percent(sim.got[0], total) - 20.0).abs() < 0.2);
    assert!((percent(sim.got[1], total) - 30.0).abs() < 0.2);
}

#[test]
fn without_extra_a_client_never_exceeds_its_slice() {
    let clients = [(contract(10 * MS, 3 * MS, false), Behaviour::Spin)];
    let mut sim = Sim::new(&clients);
    sim.run_until(500 * MS);
    assert_eq!(sim.got[0], 150 * MS);
    for w in 0..50 {
        assert_eq!(sim.got_between(0, w * 10 * MS, (w + 1) * 10 * MS), 3 * MS);
    }
}

#[test]
fn a_lone_extra_client_gets_the_whole_cpu() {
    let clients = [(contract(10 * MS, MS, true), Behaviour::Spin)];
    let mut sim = Sim::new(&clients);
    sim.run_until(100 * MS);
    assert_eq!(sim.got[0], 100 * MS);
    // Alone on slack time, it is interrupted only when its periods end.
    let mut s = Atropos::new();
    let c = s.add(contract(10 * MS, MS, true), 0);
    assert_eq!(s.dispatch(0).unwrap().until, MS);
    let d = s.dispatch(MS).unwrap();
    assert_eq!((d.client, d.mode, d.until), (c, Mode::Extra, 10 * MS));
}

#[test]
fn woken_client_with_slice_left_runs_within_its_latency() {
    // Client 0 wakes every 3.3 ms for 100 µs of work; the others spin on long periods.
    let clients = vec![
        (
            Contract { period: 10 * MS, slice: 2 * MS, extra: false, latency: 500 * US },
            Behaviour::Burst { run: 100 * US, sleep: 3300 * US },
        ),
        (contract(20 * MS, 8 * MS, true), Behaviour::Spin),
        (contract(40 * MS, 20 * MS, false), Behaviour::Spin),
    ];
    let mut sim = Sim::new(&clients);
    sim.overhead = US;
    // Record wake-ups: when each sleep ended, when the client next ran.
    let mut worst = 0;
    let mut wakeups = 0;
    while sim.now < 1000 * MS {
        let before = sim.wake_at[0];
        let target = sim.now + 50 * US;
        sim.run_until(target);
        if let (Some(t), None) = (before, sim.wake_at[0]) {
            let first = sim.runs.iter().filter(|(c, a, _)| *c == 0 && *a >= t).map(|r| r.1).min();
            if let Some(first) = first {
                worst = worst.max(first - t);
                wakeups += 1;
            }
        }
    }
    assert!(wakeups > 200, "{wakeups} wake-ups");
    assert!(worst <= 500 * US + 10 * US, "worst wake-up latency {worst} ns");
    for i in 1..3 {
        assert_eq!(sim.s.accounts(i).unwrap().deadlines_missed, 0, "client {i}");
        assert_eq!(sim.s.accounts(i).unwrap().late_ends, 0, "client {i}");
    }
}

#[test]
fn blocked_past_deadline_starts_a_fresh_period_at_wake_up() {
    let mut s = Atropos::new();
    let c = s.add(contract(10 * MS, 2 * MS, false), 0);
    let d = s.dispatch(0).unwrap();
    assert_eq!((d.client, d.mode, d.until), (c, Mode::Guaranteed, 2 * MS));
    s.block(c, MS);
    assert_eq!(s.dispatch(MS), None);
    assert_eq!(s.next_event(), None, "a blocked client has no events of its own");
    assert!(s.wake(c, 25 * MS));
    assert_eq!(s.period_start(c), Some(25 * MS));
    let d = s.dispatch(25 * MS).unwrap();
    assert_eq!(d.until, 26 * MS, "the urgent key ends at now + latency");
    let d = s.dispatch(26 * MS).unwrap();
    assert_eq!(d.until, 27 * MS, "a fresh 2 ms slice");
    assert_eq!(s.dispatch(27 * MS), None);
    assert_eq!(s.next_event(), Some(35 * MS), "the period is p long from the wake-up");
    let a = s.accounts(c).unwrap();
    assert_eq!(a.deadlines_missed, 0, "blocking is not missing");
    assert_eq!(a.periods, 1);
    assert_eq!(a.wakeups, 1);
    assert_eq!(a.guaranteed, 3 * MS);
}

#[test]
fn wake_preempts_only_a_later_key() {
    let mut s = Atropos::new();
    let spinner = s.add(contract(10 * MS, 5 * MS, false), 0);
    let sleeper = s.add(Contract { latency: 100 * US, ..contract(20 * MS, MS, false) }, 0);
    let d = s.dispatch(0).unwrap();
    assert_eq!(d.client, spinner);
    // The spinner has the earlier deadline and runs; the sleeper blocks at once.
    s.block(sleeper, 0);
    let d = s.dispatch(0).unwrap();
    assert_eq!(d.client, spinner);
    assert!(s.wake(sleeper, MS), "now + 100 µs is before the spinner's 10 ms deadline");
    let d = s.dispatch(MS).unwrap();
    assert_eq!(d.client, sleeper);
    s.block(sleeper, MS + 10 * US);
    // A client without slice left does not preempt guaranteed work.
    let d = s.dispatch(MS + 10 * US).unwrap();
    assert_eq!(d.client, spinner);
    s.yield_now(sleeper, MS + 10 * US);
    assert!(!s.wake(sleeper, 2 * MS));
}

#[test]
fn yield_gives_up_the_slice_and_the_turn() {
    let mut s = Atropos::new();
    let a = s.add(contract(10 * MS, MS, true), 0);
    let b = s.add(contract(10 * MS, MS, true), 0);
    assert_eq!(s.dispatch(0).unwrap().client, a);
    s.yield_now(a, 10 * US);
    assert_eq!(s.dispatch(10 * US).unwrap().client, b);
    s.yield_now(b, 20 * US);
    // Both forfeited their slices: they alternate on extra time, turn by turn.
    let mut order = Vec::new();
    let mut now = 20 * US;
    for _ in 0..6 {
        let d = s.dispatch(now).unwrap();
        assert_eq!(d.mode, Mode::Extra);
        order.push(d.client);
        now += US;
        s.yield_now(d.client, now);
    }
    assert_eq!(order, vec![a, b, a, b, a, b]);
    let acc = s.accounts(a).unwrap();
    assert_eq!(acc.deadlines_missed, 0);
}

#[test]
fn a_dying_client_leaves_the_others_shares_unchanged() {
    let base = [
        (contract(10 * MS, MS, false), Behaviour::Spin),
        (contract(10 * MS, 2 * MS, false), Behaviour::Spin),
        (contract(10 * MS, 5 * MS, false), Behaviour::Spin),
    ];
    let mut with_death = base.to_vec();
    with_death.push((contract(10 * MS, MS, true), Behaviour::DieAt(333 * MS + 17)));
    let mut a = Sim::new(&base);
    let mut b = Sim::new(&with_death);
    a.run_until(1000 * MS);
    b.run_until(1000 * MS);
    for i in 0..3 {
        assert_eq!(a.got[i], b.got[i], "client {i}");
    }
    assert!(b.got[3] > 0);
}

#[test]
fn idle_until_the_next_period() {
    let mut s = Atropos::new();
    let c = s.add(contract(10 * MS, 2 * MS, false), 0);
    assert_eq!(s.dispatch(0).unwrap().until, 2 * MS);
    assert_eq!(s.dispatch(2 * MS), None);
    assert_eq!(s.next_event(), Some(10 * MS));
    let d = s.dispatch(10 * MS).unwrap();
    assert_eq!((d.client, d.until), (c, 12 * MS));
}

#[test]
fn an_overrun_is_charged_and_a_starved_period_is_a_miss() {
    let mut s = Atropos::new();
    let hog = s.add(contract(10 * MS, 10 * MS, false), 0);
    let other = s.add(contract(10 * MS, MS, false), 0);
    // Dispatch the hog and then only come back after both deadlines: the other missed.
    let d = s.dispatch(0).unwrap();
    assert_eq!(d.client, hog);
    let _ = s.dispatch(12 * MS);
    assert_eq!(s.accounts(other).unwrap().deadlines_missed, 1);
    assert_eq!(s.accounts(hog).unwrap().guaranteed, 12 * MS);
    assert_eq!(s.accounts(hog).unwrap().deadlines_missed, 0);
    // The scheduler saw the other's deadline 2 ms late, more than its 1 ms slice: a late end;
    // the hog's lateness is within its slice.
    assert_eq!(s.accounts(other).unwrap().late_ends, 1);
    assert_eq!(s.accounts(hog).unwrap().late_ends, 0);
}

#[test]
fn removed_and_unknown_clients_are_ignored() {
    let mut s = Atropos::new();
    let a = s.add(contract(10 * MS, MS, true), 0);
    s.remove(a, 0);
    assert_eq!(s.dispatch(0), None);
    assert_eq!(s.next_event(), None);
    s.block(7, 0);
    assert!(!s.wake(7, 0));
    s.yield_now(7, 0);
    s.remove(7, 0);
    assert_eq!(s.accounts(7), None);
}

#[test]
fn restart_aligns_periods_and_clears_accounts() {
    let mut s = Atropos::new();
    let a = s.add(contract(10 * MS, MS, false), 0);
    let _ = s.dispatch(0);
    let b = s.add(contract(10 * MS, MS, false), 3 * MS);
    s.restart(5 * MS);
    assert_eq!(s.period_start(a), Some(5 * MS));
    assert_eq!(s.period_start(b), Some(5 * MS));
    assert_eq!(s.accounts(a), Some(Accounts::default()));
    assert_eq!(s.running(), None);
    let d = s.dispatch(5 * MS).unwrap();
    assert_eq!((d.client, d.until), (a, 6 * MS));
}

mod random;
mod reference;

/// Kernel work for another client, charged with `charge_to`, comes out of that client's slice
/// and not out of the dispatched client's: the dispatched one pays only the rest.
#[test]
fn charge_to_moves_an_interval_off_the_dispatched_client() {
    let mut s = Atropos::new();
    let a = s.add(contract(10 * MS, 5 * MS, false), 0);
    let b = s.add(contract(10 * MS, 5 * MS, false), 0);
    let d = s.dispatch(0).unwrap();
    let (run, other) = (d.client, if d.client == a { b } else { a });
    // 300 us of kernel work for `other` inside `run`'s 1 ms.
    s.charge_to(other, 200 * US, 500 * US);
    s.block(run, MS);
    assert_eq!(s.accounts(run).unwrap().guaranteed, 700 * US);
    assert_eq!(s.remaining(run), Some(5 * MS - 700 * US));
    assert_eq!(s.accounts(other).unwrap().guaranteed, 300 * US);
    assert_eq!(s.remaining(other), Some(5 * MS - 300 * US));
    // Beyond its slice, the client pays as extra time; an empty or reversed interval is free.
    s.charge_to(other, MS, 6 * MS);
    s.charge_to(other, 7 * MS, 7 * MS);
    s.charge_to(other, 7 * MS, 6 * MS);
    assert_eq!(s.remaining(other), Some(0));
    assert_eq!(s.accounts(other).unwrap().extra, 300 * US);
    // Out of slice, it no longer runs on guaranteed time: the woken client does.
    s.wake(run, 7 * MS);
    assert_eq!(s.dispatch(7 * MS).map(|d| (d.client, d.mode)), Some((run, Mode::Guaranteed)));
    // Time the dispatched client was charged already is not charged again: the interval
    // counts from its last charge.
    s.charge_to(other, 6 * MS, 7 * MS + 100 * US);
    assert_eq!(s.accounts(other).unwrap().extra, 400 * US);
    // A gone client pays nothing and the dispatched one still does not.
    s.remove(other, 7 * MS + 100 * US);
    s.charge_to(other, 7 * MS + 100 * US, 7 * MS + 200 * US);
    s.block(run, 8 * MS);
    assert_eq!(s.accounts(run).unwrap().guaranteed, 700 * US + 800 * US);
    // The dispatched client itself pays as usual.
    s.wake(run, 8 * MS);
    assert_eq!(s.dispatch(8 * MS).map(|d| d.client), Some(run));
    s.charge_to(run, 8 * MS, 8 * MS + 100 * US);
    s.block(run, 8 * MS + 300 * US);
    assert_eq!(s.accounts(run).unwrap().guaranteed, 1500 * US + 300 * US);
}

#[test]
fn stop_charges_until_then_and_nothing_after() {
    let mut s = Atropos::new();
    let a = s.add(contract(10 * MS, 5 * MS, false), 0);
    assert_eq!(s.dispatch(0).map(|d| d.client), Some(a));
    // Told at 3 ms that the client stopped at 2 ms: charged 2 ms, then nothing until the next
    // dispatch, however late that comes.
    s.stop(2 * MS);
    s.wake(a, 3 * MS);
    assert_eq!(s.remaining(a), Some(3 * MS));
    assert_eq!(s.dispatch(4 * MS).map(|d| d.client), Some(a));
    assert_eq!(s.remaining(a), Some(3 * MS));
    s.block(a, 5 * MS);
    assert_eq!(s.accounts(a).map(|x| x.guaranteed), Some(3 * MS));
    // An instant before the last call charges nothing.
    assert_eq!(s.dispatch(5 * MS), None);
    s.wake(a, 6 * MS);
    assert_eq!(s.dispatch(6 * MS).map(|d| d.client), Some(a));
    s.wake(a, 7 * MS);
    s.stop(6 * MS + 500 * US);
    assert_eq!(s.remaining(a), Some(MS));
}
