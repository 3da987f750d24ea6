//! Host tests of the server's core.

use crate::sched::{Contract, Grant, Scheduler};

const MS: u64 = 1_000_000;

fn contract(period_ms: u64, slice_ms: u64, extra: bool) -> Contract {
    Contract { period_ns: period_ms * MS, slice_ns: slice_ms * MS, extra }
}

/// Serves whoever the scheduler picks, each packet costing `cost`, from 0 to `until`; each
/// client always has work. What each was given.
fn saturate(s: &mut Scheduler, clients: usize, cost: u64, until: u64) -> [u64; 3] {
    let mut got = [0u64; 3];
    for i in 0..clients {
        s.set_ready(i, true);
    }
    let mut now = 0;
    while now < until {
        match s.pick(now) {
            Some((i, grant)) => {
                s.charge(i, cost, grant);
                got[i] += cost;
                now += cost;
            }
            None => now = s.next_start().expect("a client waits for its period"),
        }
    }
    got
}

#[test]
fn clients_without_extra_get_their_slices_and_no_more() {
    let mut s = Scheduler::default();
    s.admit(0, contract(10, 1, false), 0);
    s.admit(1, contract(10, 3, false), 0);
    assert_eq!(s.committed_ppm(), 400_000);
    let got = saturate(&mut s, 2, MS / 10, 100 * MS);
    // 100 ms: ten periods of 1 ms and of 3 ms.
    assert_eq!(got[..2], [10 * MS, 30 * MS]);
    let c = s.charged(0).unwrap();
    assert_eq!((c.cpu_ns, c.extra_ns), (10 * MS, 0));
    // Each waited for its next period in every one of them (the last one's end is at 100 ms).
    assert!((9..=10).contains(&c.throttled), "{c:?}");
}

#[test]
fn slack_goes_to_clients_with_extra_and_earliest_deadline_first_within_slices() {
    let mut s = Scheduler::default();
    s.admit(0, contract(10, 1, false), 0);
    s.admit(1, contract(20, 2, true), 0);
    let got = saturate(&mut s, 2, MS / 10, 100 * MS);
    assert_eq!(got[0], 10 * MS);
    // The rest of the time is client 1's: its slices and the slack.
    assert_eq!(got[1], 90 * MS);
    let c = s.charged(1).unwrap();
    assert_eq!(c.extra_ns, 90 * MS - 10 * 2 * MS / 2);
    // Within its slice client 0 (deadline 10 ms) goes before client 1 (20 ms).
    let mut s = Scheduler::default();
    s.admit(1, contract(20, 2, true), 0);
    s.admit(0, contract(10, 1, false), 0);
    s.set_ready(0, true);
    s.set_ready(1, true);
    assert_eq!(s.pick(0), Some((0, Grant::Guaranteed)));
}

#[test]
fn an_overdraft_is_paid_back_from_the_next_slice_and_idle_clients_wait_for_nothing() {
    let mut s = Scheduler::default();
    s.admit(0, contract(10, 1, false), 0);
    assert_eq!(s.pick(0), None);
    assert_eq!(s.next_start(), None);
    s.set_ready(0, true);
    assert_eq!(s.pick(0), Some((0, Grant::Guaranteed)));
    // One packet of 1.5 ms: 0.5 ms over.
    s.charge(0, 3 * MS / 2, Grant::Guaranteed);
    assert_eq!(s.pick(2 * MS), None);
    assert_eq!(s.next_start(), Some(10 * MS));
    assert_eq!(s.pick(10 * MS), Some((0, Grant::Guaranteed)));
    s.charge(0, MS / 2, Grant::Guaranteed);
    // The new slice was 0.5 ms after the overdraft: spent.
    assert_eq!(s.pick(11 * MS), None);
    assert_eq!(s.remove(0).map(|c| c.cpu_ns), Some(2 * MS));
    assert_eq!(s.pick(30 * MS), None);
}
