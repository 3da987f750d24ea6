//! The graded tests of the lab `edf` (docs/labs/edf.md): admission control over hand-made
//! contract sets at, just under and just over the bound, and the slack-time policy on a
//! simulated CPU. Each checks only the scheduler's public interface, from outside.

use std::vec::Vec;

use crate::policy::share_ppb;
use crate::{
    AdmissionError, Atropos, CAPACITY_PPB, Contract, ContractError, EXTRA_QUANTUM, MICROSECOND,
    MILLISECOND, Mode, Nanos, PPB, PeriodRecord, admit,
};

const MS: Nanos = MILLISECOND;
const US: Nanos = MICROSECOND;
const SECOND: Nanos = 1_000 * MS;

fn contract(period: Nanos, slice: Nanos, extra: bool) -> Contract {
    Contract { period, slice, extra, latency: period }
}

/// A contract without slack time.
fn fixed(period: Nanos, slice: Nanos) -> Contract {
    contract(period, slice, false)
}

// ---------------------------------------------------------------------------------------------
// Admission.

#[test]
fn shares_round_up() {
    let cases = [
        (fixed(10 * MS, MS), 100_000_000, "1 ms of 10 ms"),
        (fixed(300 * US, 100 * US), 333_333_334, "100 us of 300 us (a third, rounded up)"),
        (fixed(300 * US, 200 * US), 666_666_667, "200 us of 300 us (two thirds, rounded up)"),
        (fixed(10 * MS, 10 * MS), PPB, "a slice that fills its period"),
        (fixed(SECOND, 10 * US), 10_000, "10 us of 1 s"),
        (fixed(7 * MS, 3 * MS), 428_571_429, "3 ms of 7 ms (rounded up)"),
    ];
    for (c, want, what) in cases {
        assert_eq!(
            share_ppb(&c),
            want,
            "the share of {what} should be {want} parts per billion (slice / period, rounded up)"
        );
    }
    assert_eq!(
        share_ppb(&Contract { period: 0, ..fixed(MS, MS) }),
        0,
        "a contract with a zero period has a share of 0 (admission refuses it as invalid)"
    );
}

#[test]
fn a_set_at_or_just_under_the_bound_is_admitted() {
    let cases: [(&[Contract], u64, &str); 5] = [
        (&[], 0, "no contracts at all"),
        (
            &[fixed(10 * MS, 5 * MS), fixed(10 * MS, 4 * MS)],
            CAPACITY_PPB,
            "50% + 40%, exactly at the bound",
        ),
        (
            &[fixed(10 * MS, 5 * MS), fixed(10 * SECOND, 3_999_990 * US)],
            899_999_000,
            "50% + 39.9999%, just under the bound",
        ),
        (
            &[fixed(300 * US, 100 * US), fixed(300 * US, 100 * US), fixed(SECOND, 233_333_332)],
            CAPACITY_PPB,
            "two thirds (each rounded up) + 233,333,332 ns of 1 s, exactly at the bound",
        ),
        (
            &[fixed(5 * MS, MS), fixed(100 * MS, 10 * MS), fixed(50 * MS, 15 * MS)],
            600_000_000,
            "1 ms of 5 ms + 10 ms of 100 ms + 15 ms of 50 ms",
        ),
    ];
    for (set, total, what) in cases {
        assert_eq!(
            admit(set),
            Ok(total),
            "{what}: the set fits within the {CAPACITY_PPB} ppb left after the kernel's reserve, \
             so admit must return Ok(the sum of the shares, {total} ppb)"
        );
    }
    let many = [Contract::BEST_EFFORT; 64];
    assert_eq!(
        admit(&many),
        Ok(640_000_000),
        "64 best-effort contracts (1% each) must be admitted, with a total of 64%"
    );
}

#[test]
fn a_set_just_over_the_bound_is_refused_at_the_first_that_does_not_fit() {
    let cases: [(&[Contract], AdmissionError, &str); 4] = [
        (
            &[fixed(10 * MS, 5 * MS), fixed(10 * MS, 4 * MS), fixed(10 * SECOND, 10 * US)],
            AdmissionError::OverCapacity { index: 2, total_ppb: 900_001_000 },
            "50% + 40% + 10 us of 10 s (0.0001%): just over the bound",
        ),
        (
            &[fixed(300 * US, 100 * US), fixed(300 * US, 100 * US), fixed(SECOND, 233_333_333)],
            AdmissionError::OverCapacity { index: 2, total_ppb: 900_000_001 },
            "two thirds (each share rounded up to 333,333,334 ppb) + 233,333,333 ns of 1 s: one \
             part per billion over the bound once the shares are rounded up",
        ),
        (
            &[fixed(10 * MS, 6 * MS), fixed(10 * MS, 4 * MS), fixed(100 * MS, MS)],
            AdmissionError::OverCapacity { index: 1, total_ppb: PPB },
            "60% + 40% + 1%: the second already takes the sum over the bound",
        ),
        (
            &[fixed(10 * MS, 6 * MS), fixed(10 * MS, 4 * MS), fixed(10 * MS, 20 * MS)],
            AdmissionError::OverCapacity { index: 1, total_ppb: PPB },
            "60% + 40% + an invalid contract: the second is the first, in list order, that is \
             refused",
        ),
    ];
    for (set, error, what) in cases {
        assert_eq!(
            admit(set),
            Err(error),
            "{what}: admit must refuse the set, naming the first contract (in list order) whose \
             share takes the sum over {CAPACITY_PPB} ppb and the sum up to and including it"
        );
    }
}

#[test]
fn an_invalid_contract_is_refused_by_its_index_and_reason() {
    let cases: [(&[Contract], AdmissionError, &str); 3] = [
        (
            &[fixed(10 * MS, MS), fixed(10 * MS, 20 * MS)],
            AdmissionError::Invalid { index: 1, error: ContractError::SliceExceedsPeriod },
            "the second contract's slice is longer than its period",
        ),
        (
            &[
                fixed(10 * MS, 6 * MS),
                Contract { period: 0, ..fixed(MS, MS) },
                fixed(10 * MS, 4 * MS),
            ],
            AdmissionError::Invalid { index: 1, error: ContractError::ZeroPeriod },
            "the second contract has a zero period (the third would take the sum over the bound, \
             but the second is refused first)",
        ),
        (
            &[Contract { latency: 0, ..fixed(10 * MS, MS) }],
            AdmissionError::Invalid { index: 0, error: ContractError::ZeroLatency },
            "the only contract has a zero latency",
        ),
    ];
    for (set, error, what) in cases {
        assert_eq!(
            admit(set),
            Err(error),
            "{what}: admit must check each contract (Contract::validate) and name the first \
             invalid one with its reason"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// A simulated CPU: every client always wants to run; the simulation asks the scheduler what to
// run, runs it until the answer's `until`, and asks again, as the kernel does.

/// One stretch of CPU: who ran, in which mode, from when to when.
#[derive(Clone, Copy, Debug)]
struct Run {
    client: usize,
    mode: Mode,
    from: Nanos,
    to: Nanos,
}

struct Sim {
    s: Atropos,
    runs: Vec<Run>,
    periods: Vec<PeriodRecord>,
    idle: Nanos,
}

impl Sim {
    /// `contracts`, always runnable, from 0 to `end`.
    fn run(contracts: &[Contract], end: Nanos) -> Sim {
        let mut s = Atropos::new();
        s.set_trace(true);
        for c in contracts {
            s.add(*c, 0);
        }
        let (mut now, mut runs, mut idle) = (0, Vec::new(), 0);
        while now < end {
            match s.dispatch(now) {
                Some(d) => {
                    assert!(
                        d.until > now,
                        "the scheduler answered a dispatch until {} at {now}",
                        d.until
                    );
                    let to = d.until.min(end);
                    runs.push(Run { client: d.client, mode: d.mode, from: now, to });
                    now = to;
                }
                None => {
                    let to = s.next_event().unwrap_or(end).clamp(now + 1, end);
                    idle += to - now;
                    now = to;
                }
            }
        }
        s.dispatch(end);
        let periods = s.take_records();
        Sim { s, runs, periods, idle }
    }

    fn extra(&self, client: usize) -> Nanos {
        self.s.accounts(client).expect("a client").extra
    }

    fn guaranteed(&self, client: usize) -> Nanos {
        self.s.accounts(client).expect("a client").guaranteed
    }
}

fn ms(t: Nanos) -> f64 {
    t as f64 / MS as f64
}

#[test]
fn an_admitted_set_gets_its_slice_in_every_period() {
    let set = [
        fixed(5 * MS, MS),
        contract(100 * MS, 10 * MS, true),
        fixed(50 * MS, 15 * MS),
        contract(20 * MS, 12 * MS, true),
    ];
    assert_eq!(
        admit(&set),
        Err(AdmissionError::OverCapacity { index: 3, total_ppb: 1_200_000_000 }),
        "20% + 10% + 30% + 60% is more than the CPU: admit must refuse the fourth contract"
    );
    let admitted = &set[..3];
    let sim = Sim::run(admitted, SECOND);
    for (id, c) in admitted.iter().enumerate() {
        let periods: Vec<_> = sim.periods.iter().filter(|p| p.client == id).collect();
        let want = SECOND / c.period;
        assert_eq!(
            periods.len() as u64,
            want,
            "domain {id} (slice {} ms of {} ms) should have completed {want} periods in 1 s",
            ms(c.slice),
            ms(c.period)
        );
        for p in periods {
            assert!(
                p.guaranteed == c.slice && !p.missed,
                "domain {id} got {} ms of guaranteed time in its period from {} ms to {} ms; \
                 an admitted domain gets exactly its slice of {} ms in every period",
                ms(p.guaranteed),
                ms(p.start),
                ms(p.end),
                ms(c.slice)
            );
        }
    }
}

/// Two domains with slack and one without, 80% of the CPU guaranteed: the slack, 20%, is
/// shared by the two with `extra` alone.
#[test]
fn slack_is_shared_evenly_by_the_extra_domains() {
    let set =
        [contract(10 * MS, MS, true), contract(10 * MS, 2 * MS, true), fixed(10 * MS, 5 * MS)];
    let sim = Sim::run(&set, SECOND);
    let slack = SECOND - 800 * MS;
    for id in 0..2 {
        let got = sim.extra(id);
        assert!(
            got.abs_diff(slack / 2) <= 2 * MS,
            "domain {id} (extra = true) got {} ms of slack time in 1 s; the 200 ms of slack \
             should be split evenly between the two domains with extra = true: 100 ms each, \
             within 2 ms",
            ms(got)
        );
    }
    assert!(
        sim.idle <= MS,
        "the CPU stood idle for {} ms of 1 s while domains with extra = true could run; slack \
         time should go to them",
        ms(sim.idle)
    );
    for (id, c) in set.iter().enumerate() {
        assert_eq!(
            sim.guaranteed(id),
            100 * c.slice,
            "domain {id} should get exactly its slice in each of its 100 periods"
        );
    }
}

#[test]
fn slack_never_goes_to_a_domain_without_extra() {
    // One domain with extra among two without: it gets all the slack, they none.
    let set = [fixed(10 * MS, 2 * MS), contract(20 * MS, 2 * MS, true), fixed(5 * MS, MS)];
    let sim = Sim::run(&set, SECOND);
    for id in [0, 2] {
        assert_eq!(
            sim.extra(id),
            0,
            "domain {id} (extra = false) got {} ms of slack time; a domain without extra never \
             runs beyond its slice",
            ms(sim.extra(id))
        );
        let over = sim.periods.iter().find(|p| p.client == id && p.extra > 0);
        assert!(
            over.is_none(),
            "domain {id} (extra = false) ran on slack time in a period: {over:?}"
        );
    }
    let slack = SECOND - 500 * MS;
    assert!(
        sim.extra(1).abs_diff(slack) <= MS,
        "domain 1, the only one with extra = true, got {} ms of slack time in 1 s; it should get \
         all the slack, {} ms",
        ms(sim.extra(1)),
        ms(slack)
    );
    // Nobody with extra: the CPU idles once the slices are used.
    let set = [fixed(10 * MS, 2 * MS), fixed(5 * MS, MS)];
    let sim = Sim::run(&set, SECOND);
    for id in 0..2 {
        assert_eq!(
            sim.extra(id),
            0,
            "domain {id} (extra = false) got {} ms of slack time while no domain had \
             extra = true; the CPU should idle instead",
            ms(sim.extra(id))
        );
    }
    assert_eq!(
        sim.idle,
        600 * MS,
        "with 40% of the CPU contracted and no domain with extra = true, the CPU should idle 600 \
         ms of 1 s"
    );
}

#[test]
fn slack_turns_last_one_quantum_in_the_order_the_domains_came() {
    // Both use their slices in the first 2 ms; then 98 ms of slack until their periods end.
    let set = [contract(100 * MS, MS, true), contract(100 * MS, MS, true), fixed(100 * MS, MS)];
    let sim = Sim::run(&set, 100 * MS);
    let turns: Vec<Run> = sim.runs.iter().filter(|r| r.mode == Mode::Extra).copied().collect();
    assert!(
        !turns.is_empty(),
        "nobody ran on slack time; domains 0 and 1 (extra = true) should take turns on it once \
         their slices are used"
    );
    assert_eq!(
        turns[0].from,
        3 * MS,
        "slack time should start at 3 ms, when all three slices of 1 ms are used: {:?}",
        turns[0]
    );
    for (i, t) in turns.iter().enumerate() {
        assert_eq!(
            t.client,
            i % 2,
            "slack turn {i} (from {} ms) went to domain {}; the turns should go to the domains \
             with extra = true in the order they came (0, 1, 0, 1, ...)",
            ms(t.from),
            t.client
        );
        if t.to < 100 * MS {
            assert_eq!(
                t.to - t.from,
                EXTRA_QUANTUM,
                "slack turn {i} of domain {} lasted from {} ms to {} ms; with another domain \
                 waiting for slack, a turn lasts one quantum ({} ms)",
                t.client,
                ms(t.from),
                ms(t.to),
                ms(EXTRA_QUANTUM)
            );
        }
    }
    assert_eq!(turns.len(), 97, "97 turns of 1 ms should fill the slack from 3 ms to 100 ms");
}

#[test]
fn a_lone_extra_domain_keeps_the_slack_until_a_period_ends() {
    let set = [contract(100 * MS, MS, true), fixed(50 * MS, MS)];
    let sim = Sim::run(&set, 100 * MS);
    let turns: Vec<Run> = sim.runs.iter().filter(|r| r.mode == Mode::Extra).copied().collect();
    let first = turns.first().unwrap_or_else(|| {
        panic!("nobody ran on slack time; domain 0 (extra = true) should get it after 2 ms")
    });
    assert_eq!(
        (first.client, first.from, first.to),
        (0, 2 * MS, 50 * MS),
        "domain 0, alone on slack time, ran on it from {} ms to {} ms; it should keep the CPU \
         from 2 ms until domain 1's period ends at 50 ms, without being interrupted every quantum",
        ms(first.from),
        ms(first.to)
    );
    assert_eq!(sim.extra(0), 100 * MS - 3 * MS, "domain 0 should get all 97 ms of slack");
}
