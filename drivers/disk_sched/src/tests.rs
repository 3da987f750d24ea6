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
        let r = p.dequeue(next.id, now).expect("the chosen request is pending");
        now += service_ns;
        p.finish(&r, service_ns, now);
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
    assert_eq!(p.dequeue(99, 0), None);
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
        let r = p.dequeue(r.id, now).unwrap();
        now += 1_000_000;
        p.finish(&r, 1_000_000, now);
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
    let now = 0;
    for id in 0..50 {
        p.enqueue(req(id, 0, 0, 0)).unwrap();
        let r = p.dequeue(id, now).unwrap();
        // Client 0 stays active: its next request is enqueued before this one finishes.
        if id < 49 {
            p.enqueue(req(id + 100, 0, 0, 0)).unwrap();
            p.dequeue(id + 100, now);
        }
        p.finish(&r, 1_000_000, now);
    }
    // Client 0 has one more pending; client 1 arrives, having had nothing to do for longer
    // than LEAVE_AFTER_NS: it starts at client 0's clock, not 0, so it does not get 50
    // requests in a row.
    p.enqueue(req(1000, 0, 0, 0)).unwrap();
    p.enqueue(req(1001, 1, 0, stride::LEAVE_AFTER_NS)).unwrap();
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
    p.dequeue(0, 0);
    p.finish(&warm, 3_000_000, 3_000_000);
    p.enqueue(req(1, 0, 10, 0)).unwrap();
    assert_eq!(p.choose(0, 0).map(|r| r.id), Some(1));
    let one = p.dequeue(1, 3_000_000).unwrap();
    p.finish(&one, 3_000_000, 6_000_000);
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

// The anticipation core, against a small simulated disk: service time is the positioning
// estimate from the head plus 24 µs a sector (about 21 MB/s, the paper's IDE disk), requests
// of 64 KiB, clients that issue their next read a think time after the last completes.

mod anticipation {
    use alloc::vec::Vec;

    use super::super::heuristics::{AgedSptfRule, CombinedRule, SptfRule, StrideRule};
    use super::super::sim::{self, CurveDisk, Pattern, Reader};
    use super::super::stats::ClientStats;
    use super::super::*;

    const SECTOR_NS: u64 = 24_400;
    const REQUEST: u32 = 128;

    /// About the paper's disk: a sequential request needs no positioning, a short move about
    /// 1.5 ms (rotation), a stroke across the disk about 15 ms.
    fn curve() -> LbnCurve {
        LbnCurve::new(&[(0, 0), (1, 1_500_000), (100_000, 6_000_000), (10_000_000, 15_000_000)])
    }

    /// A synchronous reader of 64 KiB requests.
    fn reader(start: u64, think_ns: u64, pattern: Pattern) -> Reader {
        Reader { start, sectors: REQUEST, think_ns, pattern }
    }

    /// What a simulated run gave, with the core.
    struct Run<P: Policy, H: Heuristic<P>> {
        sectors: Vec<u64>,
        disk_ns: Vec<u64>,
        core: Anticipation<P, H>,
    }

    fn simulate<P: Policy, H: Heuristic<P>>(
        mut core: Anticipation<P, H>,
        readers: &[Reader],
        run_ns: u64,
    ) -> Run<P, H> {
        let mut disk = CurveDisk::new(curve(), SECTOR_NS);
        let out = sim::run(&mut core, &mut disk, readers, run_ns, 0x2545_f491_4f6c_dd1d);
        Run { sectors: out.sectors, disk_ns: out.disk_ns, core }
    }

    fn sptf(enabled: bool, clients: usize) -> Anticipation<Sptf<LbnCurve>, SptfRule<LbnCurve>> {
        Anticipation::new(Sptf::new(64, curve()), SptfRule::new(curve()), clients, enabled, 4096)
    }

    /// MB/s of a run of `run_ns` that read `sectors`.
    fn mb_per_s(sectors: u64, run_ns: u64) -> f64 {
        (sectors * 512) as f64 / (run_ns as f64 / 1e9) / 1e6
    }

    const RUN_NS: u64 = 5_000_000_000;

    #[test]
    fn two_sequential_readers_get_near_sequential_bandwidth_with_anticipation() {
        let far = [
            reader(0, 100_000, Pattern::Sequential),
            reader(5_000_000, 100_000, Pattern::Sequential),
        ];
        // Aged-SPTF with the prototype's one-second bound: plain SPTF with anticipation would
        // serve one reader for ever (its next request is always the nearest).
        let aged = |enabled, clients| {
            Anticipation::new(
                AgedSptf::new(64, curve(), 1_000_000_000),
                AgedSptfRule(SptfRule::new(curve())),
                clients,
                enabled,
                4096,
            )
        };
        let one = simulate(aged(false, 1), &far[..1], RUN_NS);
        let without = simulate(aged(false, 2), &far, RUN_NS);
        let with = simulate(aged(true, 2), &far, RUN_NS);
        let alone = mb_per_s(one.sectors[0], RUN_NS);
        let base = mb_per_s(without.sectors.iter().sum(), RUN_NS);
        let antic = mb_per_s(with.sectors.iter().sum(), RUN_NS);
        // The paper: about 4 times the work-conserving scheduler, within 6% of one reader.
        assert!(antic > 3.0 * base, "{antic:.1} MB/s with, {base:.1} without");
        assert!(antic > 0.9 * alone && antic <= alone * 1.001, "{antic:.1} MB/s, {alone:.1} alone");
        // Neither reader starves: each gets at least a third of the total.
        let (a, b) = (with.sectors[0], with.sectors[1]);
        assert!(a.min(b) * 3 > a + b, "{a} and {b} sectors");
        // Every wait ended by its timeout, and none was armed for more than 16.5 ms.
        let trace = with.core.trace();
        assert!(!trace.is_empty());
        assert!(
            trace.iter().all(|w| w.ended_ns <= w.until_ns && w.until_ns - w.since_ns <= 16_500_000)
        );
        let totals = trace.totals();
        assert_eq!((totals.exceeded, totals.late_max_ns), (0, 0), "{totals:?}");
    }

    #[test]
    fn a_late_timer_makes_waits_end_past_their_timeout() {
        // Sequential readers that pause 20 ms after every 4 reads, so that waits for them time
        // out; the caller comes back 1 ms after each wait's timer: the waits that timed out
        // are recorded as ending when it did, past the allowance.
        let bursts = Pattern::Bursts { burst: 4, pause_ns: 20_000_000 };
        let far = [reader(0, 100_000, bursts), reader(5_000_000, 100_000, bursts)];
        const LATE_NS: u64 = 1_000_000;
        let late = |late_ns| {
            let mut core = Anticipation::new(
                AgedSptf::new(64, curve(), 1_000_000_000),
                AgedSptfRule(SptfRule::new(curve())),
                2,
                true,
                4096,
            );
            let mut disk = CurveDisk::new(curve(), SECTOR_NS);
            sim::run_with_late_timer(&mut core, &mut disk, &far, RUN_NS, 3, late_ns);
            core.trace().totals()
        };
        let on_time = late(0);
        assert!(on_time.timed_out > 0, "{on_time:?}");
        assert_eq!((on_time.exceeded, on_time.late_max_ns), (0, 0), "{on_time:?}");
        let t = late(LATE_NS);
        const { assert!(LATE_NS > LATE_ALLOWANCE_NS) };
        assert!(t.timed_out > 0 && t.exceeded > 0, "{t:?}");
        assert!(t.exceeded <= t.timed_out, "only waits that timed out end late: {t:?}");
        // None ends later than the timer (an arrival in between ends it sooner).
        assert!(t.late_max_ns > LATE_ALLOWANCE_NS && t.late_max_ns <= LATE_NS, "{t:?}");
        // A timer late by less than the allowance counts none.
        let slight = late(LATE_ALLOWANCE_NS / 2);
        assert_eq!(slight.exceeded, 0, "{slight:?}");
        assert!(slight.late_max_ns > 0 && slight.late_max_ns <= LATE_ALLOWANCE_NS / 2);
    }

    #[test]
    fn long_think_times_are_not_waited_for() {
        // Readers that think 20 ms, longer than any seek: waiting buys nothing, and the rule
        // (whose histogram caps at 15 ms) does not wait.
        let slow = [
            reader(0, 20_000_000, Pattern::Sequential),
            reader(5_000_000, 20_000_000, Pattern::Sequential),
        ];
        let with = simulate(sptf(true, 2), &slow, RUN_NS);
        let without = simulate(sptf(false, 2), &slow, RUN_NS);
        let (w, wo) = (with.sectors.iter().sum::<u64>(), without.sectors.iter().sum::<u64>());
        assert!(w * 100 >= wo * 98, "{w} sectors with, {wo} without");
    }

    #[test]
    fn stride_holds_a_one_to_two_contract_only_with_anticipation() {
        // Two synchronous sequential readers weighing 1 and 2: without anticipation each is
        // served whenever it has a request, about 1:1; waiting for the owed one gives 1:2.
        let readers = [
            reader(0, 200_000, Pattern::Sequential),
            reader(5_000_000, 200_000, Pattern::Sequential),
        ];
        let make = |enabled| {
            Anticipation::new(Stride::new(64, &[1, 2]), StrideRule(curve()), 2, enabled, 4096)
        };
        let without = simulate(make(false), &readers, RUN_NS);
        let with = simulate(make(true), &readers, RUN_NS);
        let ratio = |r: &[u64]| r[1] as f64 / r[0] as f64;
        assert!((0.8..1.25).contains(&ratio(&without.disk_ns)), "{:.2}", ratio(&without.disk_ns));
        assert!((1.8..2.2).contains(&ratio(&with.disk_ns)), "{:.2}", ratio(&with.disk_ns));
        // The combination keeps the contract at more throughput (it also waits for seek
        // reduction within the window).
        let combined = simulate(
            Anticipation::new(
                Stride::relaxed(64, &[1, 2], 1_000_000_000, curve()),
                CombinedRule(SptfRule::new(curve())),
                2,
                true,
                4096,
            ),
            &readers,
            RUN_NS,
        );
        let (c, w) = (combined.sectors.iter().sum::<u64>(), with.sectors.iter().sum::<u64>());
        assert!(c >= w, "{c} sectors combined, {w} with the Stride rule alone");
    }

    #[test]
    fn random_readers_gain_little_and_lose_nothing() {
        let readers = [
            reader(0, 100_000, Pattern::Random { span: 200_000 }),
            reader(5_000_000, 100_000, Pattern::Random { span: 200_000 }),
        ];
        let with = simulate(sptf(true, 2), &readers, RUN_NS);
        let without = simulate(sptf(false, 2), &readers, RUN_NS);
        let (w, wo) = (with.sectors.iter().sum::<u64>(), without.sectors.iter().sum::<u64>());
        // Each reader's next read is near (within its own file), the other's far: waiting pays.
        assert!(w > wo, "{w} sectors with, {wo} without");
    }

    /// Teaches client 0 a short think time on `core`: three reads, each 1 ms after the last
    /// completed; returns when its last read completed.
    fn teach(core: &mut Anticipation<Sptf<LbnCurve>, SptfRule<LbnCurve>>) -> u64 {
        let mut t = 0;
        for i in 0..3u64 {
            let r = Pending {
                id: 100 + i,
                client: 0,
                lbn: i * 128,
                sectors: 128,
                read: true,
                arrival_ns: t,
            };
            core.arrive(r, t).unwrap();
            assert_eq!(core.next(t), Decision::Dispatch(r));
            t += 3_000_000;
            core.complete(&r, 3_000_000, t);
            t += 1_000_000;
        }
        t - 1_000_000
    }

    #[test]
    fn writes_are_dispatched_without_weighing() {
        let mut core = sptf(true, 2);
        let done = teach(&mut core);
        // A far read of client 1 is waited against; a far write is not.
        let read = Pending {
            id: 1,
            client: 1,
            lbn: 9_000_000,
            sectors: 128,
            read: true,
            arrival_ns: done,
        };
        core.arrive(read, done).unwrap();
        assert!(matches!(core.next(done), Decision::Wait { .. }));
        let mut core = sptf(true, 2);
        let done = teach(&mut core);
        let write = Pending { read: false, ..read };
        core.arrive(write, done).unwrap();
        assert_eq!(core.next(done), Decision::Dispatch(write));
    }

    #[test]
    fn a_busy_disk_holds_instead_of_waiting() {
        let mut core = sptf(true, 3);
        let done = teach(&mut core);
        // Client 2's request is at the disk (dispatched before client 0's last completed)...
        let busy =
            Pending { id: 7, client: 2, lbn: 384, sectors: 128, read: false, arrival_ns: done };
        core.arrive(busy, done).unwrap();
        assert_eq!(core.next(done), Decision::Dispatch(busy));
        // ... so a far read of client 1 is held back for client 0, without arming a wait.
        let far = Pending {
            id: 8,
            client: 1,
            lbn: 9_000_000,
            sectors: 128,
            read: true,
            arrival_ns: done,
        };
        core.arrive(far, done).unwrap();
        assert_eq!(core.next(done), Decision::Hold);
        assert!(!core.waiting());
    }

    #[test]
    fn think_time_quantiles_follow_the_histogram() {
        // Think times uniform on [0, 10 ms]: the median about 5 ms, the 95th percentile about
        // 9.5 ms, to a bucket (500 µs).
        // The histogram forgets fast (0.9 a sample, about ten samples' memory): at every point
        // of a long run the estimates stay within a few buckets of the distribution's.
        let mut s = ClientStats::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20 {
            for _ in 0..200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                s.record_think(x % 10_000_000);
            }
            let (m, p) = (s.median_think_ns().unwrap(), s.p95_think_ns().unwrap());
            assert!((2_000_000..=8_000_000).contains(&m), "median {m}");
            assert!((7_000_000..=10_000_000).contains(&p), "p95 {p}");
        }
        // Recent samples dominate: after 60 samples of 1 ms, both quantiles are near 1 ms.
        for _ in 0..60 {
            s.record_think(1_000_000);
        }
        assert_eq!(s.median_think_ns(), Some(1_250_000));
        assert_eq!(s.p95_think_ns(), Some(1_250_000));
        assert_eq!(ClientStats::default().median_think_ns(), None);
    }

    #[test]
    fn a_blocked_last_client_is_not_waited_for() {
        let mut core = sptf(true, 2);
        let r0 = Pending { id: 0, client: 0, lbn: 0, sectors: 128, read: true, arrival_ns: 0 };
        core.arrive(r0, 0).unwrap();
        assert_eq!(core.next(0), Decision::Dispatch(r0));
        core.complete(&r0, 3_000_000, 3_000_000);
        // Client 0 has learnt a short think time.
        for t in [4_000_000, 8_000_000] {
            let r = Pending { id: t, client: 0, lbn: 128, sectors: 128, read: true, arrival_ns: t };
            core.arrive(r, t).unwrap();
            assert_eq!(core.next(t), Decision::Dispatch(r));
            core.complete(&r, 3_000_000, t + 3_000_000);
        }
        // A far request of client 1 arrives: the core waits for client 0 ...
        let far = Pending {
            id: 9,
            client: 1,
            lbn: 9_000_000,
            sectors: 128,
            read: true,
            arrival_ns: 11_000_100,
        };
        core.arrive(far, 11_000_100).unwrap();
        let Decision::Wait { until_ns } = core.next(11_000_100) else { panic!("no wait") };
        // ... and a second evaluation does not extend the timeout.
        assert_eq!(core.next(11_000_200), Decision::Wait { until_ns });
        // Client 0's read arrives: it is blocked on the disk now, its request is chosen.
        let near = Pending {
            id: 10,
            client: 0,
            lbn: 384,
            sectors: 128,
            read: true,
            arrival_ns: 11_000_300,
        };
        core.arrive(near, 11_000_300).unwrap();
        assert_eq!(core.next(11_000_300), Decision::Dispatch(near));
        assert_eq!(core.trace().last().map(|w| w.end), Some(WaitEnd::Anticipated));
        // At the timeout, a wait dispatches without weighing.
        core.complete(&near, 3_000_000, 14_000_300);
        let Decision::Wait { until_ns } = core.next(14_000_400) else { panic!("no wait") };
        assert_eq!(core.next(until_ns), Decision::Dispatch(far));
        assert_eq!(core.trace().last().map(|w| w.end), Some(WaitEnd::TimedOut));
    }
}

/// The paper's adversary: two sequential readers that each make `n` quick reads, then pause
/// (2 to 17 ms, the longest just past the longest wait), on the curve disk, with Aged-SPTF,
/// anticipation off and on, weighed the paper's way and Tessera's. The table prints with
/// `--nocapture`. With the paper's rule the worst case loses about a third (n = 2, 17 ms
/// pauses: half the think times LP shows are long, so its 95th percentile says wait the
/// longest, and every burst's end costs a full wait; the paper measured at most about 20%).
/// Tessera's rule waits only as long as the quick requests take: it loses at most 10%.
mod adversary {
    extern crate std;
    use std::println;

    use super::super::heuristics::{AgedSptfRule, SptfRule, Weigh};
    use super::super::sim::{self, CurveDisk, Pattern, Reader};
    use super::super::*;

    /// The worst ratio, anticipation on over off, over the adversary's settings.
    fn worst(weigh: Weigh) -> f64 {
        let curve = || {
            LbnCurve::new(&[(0, 0), (1, 1_500_000), (100_000, 6_000_000), (10_000_000, 15_000_000)])
        };
        let mut worst = f64::MAX;
        for n in 0..=4u32 {
            for pause in [2_000_000u64, 5_000_000, 10_000_000, 17_000_000] {
                let pattern = if n == 0 {
                    Pattern::Sequential
                } else {
                    Pattern::Bursts { burst: n, pause_ns: pause }
                };
                let readers = [0, 5_000_000].map(|start| Reader {
                    start,
                    sectors: 128,
                    think_ns: 100_000,
                    pattern,
                });
                let mut mb = [0.0; 2];
                for (i, enabled) in [false, true].into_iter().enumerate() {
                    let policy = AgedSptf::new(64, curve(), 1_000_000_000);
                    let rule = AgedSptfRule(SptfRule { estimate: curve(), weigh });
                    let mut core = Anticipation::new(policy, rule, 2, enabled, 16);
                    let mut disk = CurveDisk::new(curve(), 24_400);
                    mb[i] = sim::run(&mut core, &mut disk, &readers, 2_000_000_000, 7).mb_per_s();
                }
                let ratio = mb[1] / mb[0];
                println!(
                    "{weigh:?} n={n} pause={:>2} ms: {:.1} MB/s without, {:.1} with, {ratio:.2}",
                    pause / 1_000_000,
                    mb[0],
                    mb[1]
                );
                if n == 0 {
                    assert!(ratio > 3.5, "{ratio:.2} without pauses");
                }
                worst = worst.min(ratio);
            }
        }
        worst
    }

    #[test]
    fn the_paper_rule_loses_a_third_tesseras_at_most_a_tenth() {
        let paper = worst(Weigh::Paper);
        assert!((0.6..0.9).contains(&paper), "the paper's rule: worst {paper:.2}");
        let tessera = worst(Weigh::ExpectedGain);
        assert!(tessera >= 0.9, "Tessera's rule: worst {tessera:.2}");
    }
}

/// The paper's microbenchmarks on the mechanical model of its disk (the IBM Deskstar 34GXP),
/// Aged-SPTF with a one-second bound, anticipation off and on; the figures print with
/// `--nocapture`.
mod paper {
    extern crate std;
    use std::println;

    use super::super::heuristics::{AgedSptfRule, CombinedRule, SptfRule, StrideRule};
    use super::super::sim::{self, Pattern, Reader};
    use super::super::*;
    use disk_model::{DiskModel, DiskParams};

    /// A gigabyte, in sectors: the readers' files lie this far apart.
    const GB: u64 = 2 * 1024 * 1024;
    const RUN_NS: u64 = 10_000_000_000;

    fn deskstar() -> DiskModel {
        DiskModel::new(DiskParams::deskstar_34gxp())
    }

    /// MB/s without and with anticipation for `readers`.
    fn both(readers: &[Reader]) -> (f64, f64) {
        let mut mb = [0.0; 2];
        for (i, enabled) in [false, true].into_iter().enumerate() {
            let policy = AgedSptf::new(64, deskstar(), 1_000_000_000);
            let mut core = Anticipation::new(
                policy,
                AgedSptfRule(SptfRule::new(deskstar())),
                readers.len(),
                enabled,
                16,
            );
            mb[i] = sim::run(&mut core, &mut deskstar(), readers, RUN_NS, 11).mb_per_s();
        }
        (mb[0], mb[1])
    }

    fn readers(think_ns: u64, pattern: Pattern) -> [Reader; 2] {
        [0, GB].map(|start| Reader { start, sectors: 128, think_ns, pattern })
    }

    #[test]
    fn two_sequential_readers() {
        let (without, with) = both(&readers(50_000, Pattern::Sequential));
        let (_, alone) = both(&readers(50_000, Pattern::Sequential)[..1]);
        println!(
            "two sequential readers: {without:.1} MB/s without, {with:.1} with, one alone {alone:.1}"
        );
        // The paper: about 4x, within 6% of one reader.
        assert!(with > 3.0 * without, "{with:.1} with, {without:.1} without");
        assert!(with > 0.9 * alone, "{with:.1} with, {alone:.1} alone");
    }

    /// Better than the paper: with 2 to 8 synchronous sequential readers, anticipation keeps
    /// at least 95% of one reader's bandwidth and starves nobody (each reader at least half
    /// its fair share over the run). Aged-SPTF's one-second bound hands the disk from reader
    /// to reader, in turns of half a second (without turns, readers past the bound together
    /// get one request each in turn, seeking at every request: 94% at seven readers, the least
    /// served at 0.6 of its share); the paper's CSCAN heuristic starved readers instead.
    #[test]
    fn many_sequential_readers_share_without_losing_bandwidth() {
        let one = |n: usize| -> std::vec::Vec<Reader> {
            (0..n as u64)
                .map(|i| Reader {
                    start: i * GB,
                    sectors: 128,
                    think_ns: 50_000,
                    pattern: Pattern::Sequential,
                })
                .collect()
        };
        let (_, alone) = both(&one(1));
        for n in 2..=8 {
            let readers = one(n);
            let policy = AgedSptf::with_turns(64, deskstar(), 1_000_000_000, 500_000_000);
            let rule = AgedSptfRule(SptfRule::new(deskstar()));
            let mut core = Anticipation::new(policy, rule, n, true, 16);
            let out = sim::run(&mut core, &mut deskstar(), &readers, RUN_NS, 3);
            let total = out.mb_per_s();
            let fair = total / n as f64;
            let least = (0..n).map(|i| out.reader_mb_per_s(i)).fold(f64::MAX, f64::min);
            println!(
                "{n} readers: {total:.1} MB/s ({:.0}% of one alone), the least served {least:.2} MB/s of a fair {fair:.2}",
                total / alone * 100.0
            );
            assert!(total >= 0.95 * alone, "{n} readers: {total:.1} MB/s, {alone:.1} alone");
            assert!(
                least >= 0.5 * fair,
                "{n} readers: one got {least:.2} MB/s of a fair {fair:.2}"
            );
        }
    }

    /// A 1:2 contract of disk time between two synchronous sequential readers: not held on
    /// Stride without anticipation (each is served whenever it has a request), 1:2 with the
    /// combined rule on relaxed Stride (a window of 100 ms; the paper's one second lets the
    /// seek-reducing half run the ratio to 2.27 over ten seconds), at the throughput of
    /// anticipation on Aged-SPTF.
    #[test]
    fn a_one_to_two_contract() {
        let readers = readers(50_000, Pattern::Sequential);
        let without = {
            let mut core =
                Anticipation::new(Stride::new(64, &[1, 2]), StrideRule(deskstar()), 2, false, 16);
            sim::run(&mut core, &mut deskstar(), &readers, RUN_NS, 5)
        };
        let with = {
            // A window of 100 ms of service: the contract holds to within it.
            let policy = Stride::relaxed(64, &[1, 2], 100_000_000, deskstar());
            let mut core =
                Anticipation::new(policy, CombinedRule(SptfRule::new(deskstar())), 2, true, 16);
            sim::run(&mut core, &mut deskstar(), &readers, RUN_NS, 5)
        };
        let ratio = |o: &sim::Outcome| o.disk_ns[1] as f64 / o.disk_ns[0] as f64;
        let (_, seek_reducing) = both(&readers);
        println!(
            "1:2 contract: {:.2} without anticipation at {:.1} MB/s, {:.2} with at {:.1} MB/s; Aged-SPTF with anticipation {seek_reducing:.1} MB/s",
            ratio(&without),
            without.mb_per_s(),
            ratio(&with),
            with.mb_per_s()
        );
        // Without anticipation the readers alternate: as many requests each (the paper: about
        // 1:1). Their disk times differ (here 1.76) only because in lockstep one reader's
        // requests always meet the platter at a worse angle.
        assert_eq!(without.reads[0].abs_diff(without.reads[1]), 0, "{:?}", without.reads);
        assert!(ratio(&without) < 1.9, "{:.2}", ratio(&without));
        assert!((1.9..2.1).contains(&ratio(&with)), "{:.2}", ratio(&with));
        assert!(with.mb_per_s() >= 0.95 * seek_reducing);
    }

    /// Random readers, each within its own 1 GB file. The gain depends on how far apart the
    /// files lie, which the paper does not say (+28 to +30%): +9% when they are adjacent,
    /// +36% 4 GB apart (their own seeks against the seek between them).
    #[test]
    fn random_readers_in_separate_files() {
        for (apart, least_gain) in [(1u64, 0.05), (4, 0.25)] {
            let readers = [0, apart * GB].map(|start| Reader {
                start,
                sectors: 128,
                think_ns: 50_000,
                pattern: Pattern::Random { span: GB },
            });
            let (without, with) = both(&readers);
            let gain = with / without - 1.0;
            println!(
                "random readers {apart} GB apart: {without:.2} MB/s without, {with:.2} with ({:+.0}%)",
                gain * 100.0
            );
            assert!(gain > least_gain, "{apart} GB apart: {with:.2} with, {without:.2} without");
        }
    }

    #[test]
    fn think_time_sweep() {
        let mut gains = std::vec::Vec::new();
        for ms in [0u64, 2, 4, 6, 8, 10, 12, 15] {
            let (without, with) = both(&readers(ms * 1_000_000 + 50_000, Pattern::Sequential));
            println!(
                "think {ms:>2} ms: {without:.1} MB/s without, {with:.1} with, {:.2}",
                with / without
            );
            gains.push(with / without);
        }
        // Anticipation wins big without think time, the gain vanishes around the positioning
        // time it saves (the paper: about 8 ms), and it never loses more than a little.
        assert!(gains[0] > 3.0, "{gains:?}");
        assert!(gains[2] > 1.5 && gains[3] > 1.2 && gains[4] < 1.1, "{gains:?}");
        assert!(gains.iter().all(|&g| g > 0.9), "{gains:?}");
    }
}
