use alloc::vec::Vec;

use super::*;

fn req(id: u64, client: usize, lbn: u64, arrival_ns: u64) -> Pending {
    Pending { id, client, lbn, sectors: 8, read: true, arrival_ns }
}

/// Serves everything pending, one at a time, each taking `service_ns`, the head moving to
/// each request's end; the ids in the order served.
fn drain(p: &mut impl Policy, mut head: u64, service_ns: u64) -> Vec<u64> {
    let mut now = 1_000;
    let mut order = Vec::new();
    while let Some(next) = p.choose(head, now) {
        let r = p.dequeue(next.id).expect("the chosen request is pending");
        now += service_ns;
        p.finish(&r, service_ns);
        head = r.end();
        order.push(r.id);
    }
    order
}

/// A positioning estimate where moving backwards costs ten times moving forwards.
struct Forward;

impl Positioning for Forward {
    fn positioning_ns(&self, from: u64, to: u64) -> u64 {
        if to >= from { to - from } else { 10 * (from - to) }
    }
}

#[test]
fn fcfs_serves_in_arrival_order() {
    let mut p = Fcfs::new(8);
    for (id, lbn) in [(1, 500), (2, 10), (3, 900)] {
        p.enqueue(req(id, 0, lbn, id)).unwrap();
    }
    assert_eq!(drain(&mut p, 0, 100), [1, 2, 3]);
}

#[test]
fn sstf_serves_the_nearest_and_the_oldest_of_equals() {
    let mut p = Sstf::new(8);
    for (id, lbn) in [(1, 1000), (2, 90), (3, 110), (4, 2000)] {
        p.enqueue(req(id, 0, lbn, id)).unwrap();
    }
    // From 100: 90 and 110 are equally near, 90 arrived first; then from 98, 110 (12 away).
    assert_eq!(drain(&mut p, 100, 100), [2, 3, 1, 4]);
}

#[test]
fn sptf_goes_by_the_estimate_not_the_distance() {
    let mut p = Sptf::new(8, Forward);
    p.enqueue(req(1, 0, 900, 1)).unwrap(); // 100 back: costs 1,000
    p.enqueue(req(2, 0, 1500, 2)).unwrap(); // 500 ahead: costs 500
    assert_eq!(p.choose(1000, 0).map(|r| r.id), Some(2));
    let mut s = Sstf::new(8);
    s.enqueue(req(1, 0, 900, 1)).unwrap();
    s.enqueue(req(2, 0, 1500, 2)).unwrap();
    assert_eq!(s.choose(1000, 0).map(|r| r.id), Some(1));
}

#[test]
fn aged_sptf_serves_a_request_past_its_bound_first() {
    let curve = LbnCurve::new(&[(0, 0), (1_000_000, 10_000_000)]);
    let mut p = AgedSptf::new(8, curve, 1_000_000_000);
    p.enqueue(req(1, 0, 1_000_000, 0)).unwrap(); // far, old
    p.enqueue(req(2, 0, 10, 500_000_000)).unwrap(); // near, young
    // Before the bound: SPTF's choice.
    assert_eq!(p.choose(0, 999_999_999).map(|r| r.id), Some(2));
    // At the bound the old one goes first, though SPTF would still pick the near one.
    assert_eq!(p.choose(0, 1_000_000_000).map(|r| r.id), Some(1));
    assert_eq!(p.sptf_choice(0).map(|r| r.id), Some(2));
}

#[test]
fn cscan_sweeps_up_then_starts_again_at_the_lowest() {
    let mut p = Cscan::new(8);
    for (id, lbn) in [(1, 50), (2, 700), (3, 300), (4, 10), (5, 500)] {
        p.enqueue(req(id, 0, lbn, id)).unwrap();
    }
    // From 400: 500, 700, then wrap to 10, 50, 300.
    assert_eq!(drain(&mut p, 400, 100), [5, 2, 4, 1, 3]);
}

#[test]
fn a_full_policy_refuses_and_changes_nothing() {
    let mut p = Sstf::new(2);
    p.enqueue(req(1, 0, 10, 0)).unwrap();
    p.enqueue(req(2, 0, 20, 0)).unwrap();
    assert_eq!(p.enqueue(req(3, 0, 0, 0)), Err(Full));
    assert_eq!(p.len(), 2);
    assert_eq!(p.choose(0, 0).map(|r| r.id), Some(1));
    assert_eq!(p.dequeue(99), None);
}

#[test]
fn stride_divides_service_time_by_weight() {
    // Two backlogged clients weighing 1 and 2, every request 1 ms of service: the second is
    // served twice as often.
    let mut p: Stride<LbnCurve> = Stride::new(64, &[1, 2]);
    let mut next_id = 0;
    let mut served = [0u32; 2];
    let mut now = 0;
    for c in 0..2 {
        for _ in 0..4 {
            p.enqueue(req(next_id, c, 0, now)).unwrap();
            next_id += 1;
        }
    }
    for _ in 0..300 {
        let r = p.choose(0, now).unwrap();
        let r = p.dequeue(r.id).unwrap();
        now += 1_000_000;
        p.finish(&r, 1_000_000);
        served[r.client] += 1;
        // Keep it backlogged.
        p.enqueue(req(next_id, r.client, 0, now)).unwrap();
        next_id += 1;
    }
    assert_eq!(served, [100, 200]);
    // Clocks in ns at weight 1: 100 ms / 1 and 200 ms / 2.
    assert_eq!((p.clock_ns(0), p.clock_ns(1)), (100_000_000, 100_000_000));
}

#[test]
fn stride_gives_no_credit_for_idling() {
    let mut p: Stride<LbnCurve> = Stride::new(64, &[1, 1]);
    // Client 0 alone for 50 requests of 1 ms.
    for id in 0..50 {
        p.enqueue(req(id, 0, 0, 0)).unwrap();
        let r = p.dequeue(id).unwrap();
        // Client 0 stays active: its next request is enqueued before this one finishes.
        if id < 49 {
            p.enqueue(req(id + 100, 0, 0, 0)).unwrap();
            p.dequeue(id + 100);
        }
        p.finish(&r, 1_000_000);
    }
    // Client 0 has one more pending; client 1 arrives: it starts at client 0's clock, not 0,
    // so it does not get 50 requests in a row.
    p.enqueue(req(1000, 0, 0, 0)).unwrap();
    p.enqueue(req(1001, 1, 0, 0)).unwrap();
    assert_eq!(p.clock_ns(1), p.clock_ns(0));
    let order = drain(&mut p, 0, 1_000_000);
    assert_eq!(order, [1000, 1001]);
}

#[test]
fn relaxed_stride_picks_the_nearest_within_the_window() {
    let curve = LbnCurve::new(&[(0, 0), (1_000_000, 10_000_000)]);
    // A window of 5 ms at weight 1.
    let mut p = Stride::relaxed(64, &[1, 1], 5_000_000, curve);
    // Client 0 is 3 ms ahead (within the window): its near request goes before client 1's far
    // one; at 6 ms ahead (beyond it) client 1's goes first.
    let warm = req(0, 0, 0, 0);
    p.enqueue(warm).unwrap();
    p.enqueue(req(9, 1, 500_000, 0)).unwrap();
    p.dequeue(0);
    p.finish(&warm, 3_000_000);
    p.enqueue(req(1, 0, 10, 0)).unwrap();
    assert_eq!(p.choose(0, 0).map(|r| r.id), Some(1));
    let one = p.dequeue(1).unwrap();
    p.finish(&one, 3_000_000);
    p.enqueue(req(2, 0, 10, 0)).unwrap();
    assert_eq!(p.choose(0, 0).map(|r| r.id), Some(9));
}

#[test]
fn the_lbn_curve_interpolates_and_is_flat_beyond_its_points() {
    let c = LbnCurve::new(&[(1000, 2_000_000), (0, 0), (100_000, 10_000_000)]);
    assert_eq!(c.at(0), 0);
    assert_eq!(c.at(500), 1_000_000);
    assert_eq!(c.at(1000), 2_000_000);
    assert_eq!(c.at(50_500), 6_000_000);
    assert_eq!(c.at(10_000_000), 10_000_000);
    assert_eq!(c.positioning_ns(5000, 4500), 1_000_000);
}
