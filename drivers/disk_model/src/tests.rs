//! Host tests of the disk model: the paper's figures for the Deskstar 34GXP and the Cheetah
//! X15, the read-ahead segment, rotation, skews, scaling down and determinism. Bandwidths are
//! MB/s with MB = 10^6 bytes.

extern crate std;

use std::vec::Vec;

use super::*;
use blk_workloads::Rng;

const KB64: u32 = 128;

fn mb_per_s(bytes: u64, ns: u64) -> f64 {
    bytes as f64 * 1000.0 / ns as f64
}

/// Bandwidth of `count` back-to-back 64 KB reads from LBN 0, each issued when the previous
/// completes plus `think_ns`.
fn sequential(model: &mut DiskModel, count: u64, think_ns: u64) -> f64 {
    let first = model.busy_until();
    let mut now = first;
    for i in 0..count {
        let s = model.service(now, ModelOp::Read, i * u64::from(KB64), KB64);
        now = s.end_ns + think_ns;
    }
    mb_per_s(count * 65536, now - think_ns - first)
}

/// Bandwidth of `count` back-to-back sequential 64 KB writes from LBN 0 on a drive with `p`.
fn writes(p: DiskParams, count: u64) -> f64 {
    let mut m = DiskModel::new(p);
    let mut now = 0;
    for i in 0..count {
        now = m.service(now, ModelOp::Write, i * u64::from(KB64), KB64).end_ns;
    }
    mb_per_s(count * 65536, now)
}

/// Bandwidth of two sequential 64 KB readers `apart` sectors apart, served alternately (each
/// issues its next read when its previous one completes, and the drive serves them in turn).
fn alternating(model: &mut DiskModel, count: u64, apart: u64) -> f64 {
    let t0 = model.busy_until();
    let mut now = t0;
    for i in 0..count {
        let base = if i % 2 == 0 { 0 } else { apart };
        now = model.service(now, ModelOp::Read, base + (i / 2) * u64::from(KB64), KB64).end_ns;
    }
    mb_per_s(count * 65536, now - t0)
}

/// Bandwidth of `count` 64 KB reads at random LBNs below `span`, back to back.
fn random(model: &mut DiskModel, count: u64, span: u64, seed: u64) -> f64 {
    let mut rng = Rng::new(seed);
    let mut now = model.busy_until();
    let t0 = now;
    for _ in 0..count {
        let lbn = rng.below(span - u64::from(KB64));
        now = model.service(now, ModelOp::Read, lbn, KB64).end_ns;
    }
    mb_per_s(count * 65536, now - t0)
}

/// The mean seek between random pairs of LBNs, in ms.
fn average_seek_ms(model: &DiskModel, pairs: u64) -> f64 {
    let mut rng = Rng::new(7);
    let g = model.geometry();
    let mut total = 0u64;
    for _ in 0..pairs {
        let a = g.locate(rng.below(model.capacity())).cylinder;
        let b = g.locate(rng.below(model.capacity())).cylinder;
        total += model.seek_curve().seek_ns(u64::from(a.abs_diff(b)));
    }
    total as f64 / pairs as f64 / 1e6
}

#[test]
fn deskstar_sequential_is_21_mb_per_s() {
    let bw = sequential(&mut DiskModel::new(DiskParams::deskstar_34gxp()), 1000, 0);
    assert!((18.9..=23.1).contains(&bw), "{bw} MB/s");
}

#[test]
fn deskstar_random_64k_over_the_full_span() {
    let mut m = DiskModel::new(DiskParams::deskstar_34gxp());
    let cap = m.capacity();
    let bw = random(&mut m, 2000, cap, 1);
    // 9 ms seek + 4.2 ms rotation + 3 ms transfer + overhead: about 4 MB/s (see the report).
    assert!((3.6..=4.5).contains(&bw), "{bw} MB/s");
}

#[test]
fn deskstar_random_64k_within_a_quarter_of_the_disk_is_5_mb_per_s() {
    // The paper's "about 5 MB/s for random 64 KB requests" needs seeks shorter than the
    // full-span average: its requests stayed within files of a few GB.
    let mut m = DiskModel::new(DiskParams::deskstar_34gxp());
    let bw = random(&mut m, 2000, 8_000_000_000 / 512, 2);
    assert!((4.5..=5.5).contains(&bw), "{bw} MB/s");
}

#[test]
fn deskstar_average_seek_is_9_ms() {
    let ms = average_seek_ms(&DiskModel::new(DiskParams::deskstar_34gxp()), 100_000);
    assert!((8.1..=9.9).contains(&ms), "{ms} ms");
}

#[test]
fn deskstar_64k_media_transfer_is_3_ms() {
    let mut m = DiskModel::new(DiskParams::deskstar_34gxp().with_read_ahead(false));
    // Inside one track (sector 0 of the first track of the outer zone) and in the middle zone.
    for lbn in [0, m.capacity() / 2] {
        let lbn = m.geometry().track_start(m.geometry().locate(lbn).cylinder, 0);
        let s = m.service(m.busy_until() + 50_000_000, ModelOp::Read, lbn, KB64);
        let ms = s.transfer_ns as f64 / 1e6;
        assert!((2.5..=3.5).contains(&ms), "{ms} ms at {lbn}");
    }
}

#[test]
fn read_ahead_serves_a_thinking_sequential_reader() {
    let on = sequential(&mut DiskModel::new(DiskParams::deskstar_34gxp()), 500, 1_000_000);
    let off = sequential(
        &mut DiskModel::new(DiskParams::deskstar_34gxp().with_read_ahead(false)),
        500,
        1_000_000,
    );
    let seq = sequential(&mut DiskModel::new(DiskParams::deskstar_34gxp()), 500, 0);
    assert!(on >= 0.9 * seq && on <= 1.01 * seq, "on {on}, sequential {seq}");
    assert!(off <= 0.5 * on && off > 0.0, "off {off}, on {on}");
}

#[test]
fn two_interleaved_streams_far_apart_lose_most_of_the_bandwidth() {
    let one = sequential(&mut DiskModel::new(DiskParams::deskstar_34gxp()), 500, 0);
    let mut m = DiskModel::new(DiskParams::deskstar_34gxp());
    let far = m.capacity() / 2;
    let two = alternating(&mut m, 500, far);
    assert!(two < one / 3.0 && two > 2.0, "two streams {two}, one {one}");
}

#[test]
fn the_sector_under_the_head_costs_less_than_the_one_just_passed() {
    let p = DiskParams::deskstar_34gxp().with_read_ahead(false);
    let overhead = p.command_overhead_ns;
    let mut m = DiskModel::new(p);
    m.service(0, ModelOp::Read, 0, 1);
    // Later, with the arm on track (0, 0): which sector arrives just after the overhead?
    let t = 100_000_000;
    let rev = m.revolution_ns();
    let spt = u64::from(m.geometry().sectors_per_track(0));
    let angle = (t + overhead) % rev;
    let coming = (angle * spt).div_ceil(rev) % spt; // slot coming under the head
    let passed = (coming + spt - 2) % spt; // the one just gone by
    let lbn_of = |slot: u64| (slot + spt - u64::from(m.geometry().slot(0, 0, 0))) % spt;
    let mut a = m.clone();
    let soon = a.service(t, ModelOp::Read, lbn_of(coming), 1);
    let late = m.service(t, ModelOp::Read, lbn_of(passed), 1);
    assert_eq!(soon.seek_ns, 0);
    assert!(soon.rotation_ns < rev / 50, "{soon:?}");
    assert!(late.rotation_ns > rev * 9 / 10, "{late:?}");
}

#[test]
fn crossing_a_track_or_cylinder_costs_a_switch_not_a_revolution() {
    let p = DiskParams::deskstar_34gxp().with_read_ahead(false);
    let (hs, single) = (p.head_switch_ns, p.single_cylinder_seek_ns);
    let mut m = DiskModel::new(p);
    let g = m.geometry().clone();
    let spt = u64::from(g.sectors_per_track(0));
    let per_sector = m.revolution_ns() / spt;
    // One request straddling head 0 -> head 1, one straddling the last head -> next cylinder.
    let last_head = g.track_start(1, 0) - 64;
    for (lbn, switch) in [(spt - 64, hs), (last_head, single)] {
        let s = m.service(m.busy_until() + 10_000_000, ModelOp::Read, lbn, KB64);
        let gap = s.transfer_ns - KB64 as u64 * m.revolution_ns() / spt;
        assert!(gap >= switch && gap <= switch + 2 * per_sector, "gap {gap} for {switch}");
    }
}

#[test]
fn the_same_calls_give_the_same_results() {
    let run = || {
        let mut m = DiskModel::new(DiskParams::deskstar_34gxp().with_capacity(1 << 17));
        let mut rng = Rng::new(99);
        let mut now = 0;
        let mut out = Vec::new();
        for _ in 0..2000 {
            let op = if rng.below(4) == 0 { ModelOp::Write } else { ModelOp::Read };
            if rng.below(50) == 0 {
                m = DiskModel::new(m.params().clone().with_write_cache(rng.below(2) == 0));
            }
            let s = m.service(now, op, rng.below(1 << 17), 1 + rng.below(256) as u32);
            assert!(s.start_ns >= now);
            let parts = s.overhead_ns + s.positioning_ns() + s.transfer_ns;
            assert_eq!(s.start_ns + parts, s.end_ns);
            now += rng.below(20_000_000);
            out.push(s);
        }
        out
    };
    assert_eq!(run(), run());
}

#[test]
fn any_size_and_any_requests_are_served_in_order() {
    let mut rng = Rng::new(0xd15c);
    for size in [1u64, 7, 100, 1000, 65_536, 200_003, 1 << 21] {
        for base in [DiskParams::deskstar_34gxp(), DiskParams::cheetah_15k()] {
            let p = base.with_capacity(size).with_read_ahead(rng.below(2) == 0);
            let mut m = DiskModel::new(p.with_write_cache(rng.below(2) == 0));
            assert_eq!(m.capacity(), size);
            assert!(m.geometry().sectors() >= size);
            let mut now = 0;
            let mut last_end = 0;
            for _ in 0..300 {
                let op = if rng.below(3) == 0 { ModelOp::Write } else { ModelOp::Read };
                let lbn = rng.below(size + 10);
                let s = m.service(now, op, lbn, rng.below(300) as u32);
                assert!(s.start_ns >= now && s.start_ns >= last_end && s.end_ns >= s.start_ns);
                assert!(s.buffered_sectors <= s.sectors);
                // Bounded: at worst a cached write's media write and then this request's own,
                // each a full-stroke seek, a revolution and a few tracks.
                assert!(s.end_ns - s.start_ns < 100_000_000, "{s:?}");
                last_end = s.end_ns;
                now += rng.below(5_000_000);
            }
        }
    }
}

#[test]
fn requests_are_served_one_at_a_time_in_order() {
    let mut m = DiskModel::new(DiskParams::deskstar_34gxp());
    let a = m.service(1_000, ModelOp::Read, 5_000_000, KB64);
    assert_eq!(a.start_ns, 1_000);
    assert!(a.end_ns > a.start_ns + 5_000_000, "a far request takes a seek: {a:?}");
    // Arriving before the first completes, the second waits for it.
    let b = m.service(2_000, ModelOp::Write, 9_000, 8);
    assert_eq!(b.start_ns, a.end_ns);
    assert_eq!(m.busy_until(), b.end_ns);
    // A range past the end is cut; no sectors cost the overhead alone.
    let cap = m.capacity();
    let c = m.service(0, ModelOp::Read, cap - 3, 64);
    assert_eq!(c.sectors, 3);
    let d = m.service(0, ModelOp::Read, 0, 0);
    assert_eq!(d.end_ns - d.start_ns, m.params().command_overhead_ns);
}

#[test]
fn a_write_cache_streams_sequential_writes() {
    let through = writes(DiskParams::deskstar_34gxp(), 300);
    let cached = writes(DiskParams::deskstar_34gxp().with_write_cache(true), 300);
    let read = sequential(&mut DiskModel::new(DiskParams::deskstar_34gxp()), 300, 0);
    // Write-through loses most of a revolution per request (the overhead lets the next
    // sector pass); the cache hides it.
    assert!(through > 3.0 && through < 0.4 * read, "write-through {through}, read {read}");
    assert!(cached > 0.9 * read && cached < 1.1 * read, "cached {cached}, read {read}");
    // A lone cached write completes after the overhead and the interface transfer, and a read
    // right after it waits for the media write.
    let mut m = DiskModel::new(DiskParams::deskstar_34gxp().with_write_cache(true));
    let w = m.service(0, ModelOp::Write, 10_000_000, KB64);
    assert_eq!(w.positioning_ns(), 0);
    assert!(w.service_ns() < 1_500_000, "{w:?}");
    let r = m.service(w.end_ns, ModelOp::Read, 0, 8);
    assert!(r.overhead_ns > 5_000_000, "the read waits for the seek and the write: {r:?}");
}

#[test]
fn the_positioning_estimate_is_seek_plus_half_a_revolution() {
    let mut m = DiskModel::new(DiskParams::deskstar_34gxp().with_read_ahead(false));
    let half = m.revolution_ns() / 2;
    assert_eq!(m.positioning_estimate_ns(0, 10), half);
    let far = m.positioning_estimate_ns(0, m.capacity() - 1);
    assert_eq!(far, m.params().full_stroke_seek_ns + half);
    // On average over random requests it matches what the model charges.
    let (mut rng, mut now, mut last) = (Rng::new(5), 0, 0);
    let (mut estimated, mut charged) = (0u64, 0u64);
    for _ in 0..5000 {
        let lbn = rng.below(m.capacity() - 8);
        estimated += m.positioning_estimate_ns(last, lbn);
        let s = m.service(now, ModelOp::Read, lbn, 8);
        charged += s.positioning_ns();
        (now, last) = (s.end_ns + rng.below(3_000_000), lbn + 8);
    }
    let ratio = charged as f64 / estimated as f64;
    assert!((0.93..=1.07).contains(&ratio), "charged / estimated = {ratio}");
}

#[test]
fn a_scaled_down_disk_keeps_the_average_seek() {
    let full = average_seek_ms(&DiskModel::new(DiskParams::deskstar_34gxp()), 50_000);
    for sectors in [1u64 << 16, 1 << 17, 1 << 20] {
        let m = DiskModel::new(DiskParams::deskstar_34gxp().with_capacity(sectors));
        assert_eq!(m.capacity(), sectors);
        let small = average_seek_ms(&m, 50_000);
        assert!((small / full - 1.0).abs() < 0.15, "{sectors}: {small} vs {full}");
    }
}

#[test]
fn cheetah_is_55_percent_faster_sequentially() {
    let d = sequential(&mut DiskModel::new(DiskParams::deskstar_34gxp()), 1000, 0);
    let c = sequential(&mut DiskModel::new(DiskParams::cheetah_15k()), 1000, 0);
    let ratio = c / d;
    assert!((1.45..=1.65).contains(&ratio), "{c} / {d} = {ratio}");
    let ms = average_seek_ms(&DiskModel::new(DiskParams::cheetah_15k()), 50_000);
    assert!((3.2..=4.0).contains(&ms), "{ms} ms");
}
