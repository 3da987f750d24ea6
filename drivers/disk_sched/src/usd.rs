//! USD, the user-safe disk: client streams sharing the disk under `(period, slice, extra,
//! latency)` contracts of **disk time**, after the USD of Nemesis, with anticipation.
//!
//! - **Across streams, EDF by disk time**: the streams are the clients of an [`Atropos`]
//!   scheduler (the CPU's, over nanoseconds of disk time instead of CPU time), which picks the
//!   stream that holds the disk and charges it the service time of the stream's requests, and
//!   the time the disk stands idle waiting for the stream: each up to its end (the completion
//!   the caller reports, the wait's timeout), never the time the caller takes to come back
//!   after it ([`Atropos::stop`]), so a driver late on the CPU costs no stream its slice.
//!   Admission is Atropos's ([`atropos::admit`]).
//! - **Within a stream**: its own requests, shortest positioning time first.
//! - **Anticipation**: when the stream holding the disk has nothing pending (a synchronous
//!   client thinking), USD weighs keeping the disk for it, by the stream's think-time
//!   histogram and locality against the positioning the other streams' nearest request would
//!   cost ([`ClientStats::best_wait_ns`], Tessera's weighing); if it waits, the stream stays
//!   the holder and the idle time is charged to it, so a stream pays for its own locality out
//!   of its own contract and a neighbour never does. One timeout per wait, never extended; a
//!   stream with an earlier deadline that becomes ready ends the wait at once. Without
//!   anticipation the holder that runs dry is set aside and the next stream gets the disk:
//!   streams that each have one request at a time then interleave single requests, and lose
//!   their locality (the isolation bar of Argon).
//! - **Slices are not overrun**: in guaranteed time a request is started only if the
//!   caller's upper bound of its service time ([`ServiceBound`]) fits the stream's budget
//!   until Atropos must be asked again; otherwise the stream yields the rest of its slice for
//!   this period. So a stream with `extra = false` never receives more than its slice in a
//!   period, as long as the bound holds: the disk model's (below) covers where the read-ahead
//!   may have taken the arm and the revolution a request can lose at a zone boundary.
//!
//! One request is at the disk at a time (the disk time of each is then exact, and a
//! mechanical disk serves one at a time anyway). Not yet: several requests in flight, and writes
//! behind reads.

use alloc::vec::Vec;

use atropos::{Accounts, Atropos, Contract, Mode};

use crate::stats::ClientStats;
use crate::{Decision, Full, Pending, Policy, Positioning, Sptf, WaitEnd, WaitRecord, WaitTrace};

/// An upper bound of a request's service time, so that a slice is never overrun.
pub trait ServiceBound {
    /// At most how long the disk takes to serve `r` with the head at `head`.
    fn service_bound_ns(&self, head: u64, r: &Pending) -> u64;
}

/// One stream's state.
struct Stream<E: Positioning + Clone> {
    requests: Sptf<E>,
    stats: ClientStats,
    /// Whether it is runnable in Atropos.
    runnable: bool,
}

/// The user-safe disk.
pub struct Usd<E: Positioning + ServiceBound + Clone> {
    atropos: Atropos,
    streams: Vec<Stream<E>>,
    estimate: E,
    anticipate: bool,
    capacity: usize,
    head: u64,
    /// The request at the disk, and its stream.
    in_flight: Option<Pending>,
    /// The stream waited for, since, until.
    wait: Option<(usize, u64, u64)>,
    /// When the holder stops being charged, if the caller comes back later: its request's
    /// completion, or the end of the wait the caller was asked to come back at.
    charge_end: Option<u64>,
    trace: WaitTrace,
}

impl<E: Positioning + ServiceBound + Clone> Usd<E> {
    /// A disk with no streams yet, each to hold up to `capacity` pending requests, positioning
    /// estimated by `estimate`, anticipating if `anticipate`; the last `trace_capacity` waits
    /// are kept.
    pub fn new(estimate: E, anticipate: bool, capacity: usize, trace_capacity: usize) -> Self {
        Usd {
            atropos: Atropos::new(),
            streams: Vec::new(),
            estimate,
            anticipate,
            capacity,
            head: 0,
            in_flight: None,
            wait: None,
            charge_end: None,
            trace: WaitTrace::new(trace_capacity),
        }
    }

    /// Opens a stream under `contract` at `now_ns` (admission is the caller's, with
    /// [`atropos::admit`] over every stream's contract); its number.
    pub fn open(&mut self, contract: Contract, now_ns: u64) -> usize {
        let id = self.atropos.add(contract, now_ns);
        self.atropos.block(id, now_ns);
        self.streams.push(Stream {
            requests: Sptf::new(self.capacity, self.estimate.clone()),
            stats: ClientStats::default(),
            runnable: false,
        });
        id
    }

    /// Stream `s`'s accounts: disk time used, periods, deadlines missed.
    pub fn accounts(&self, s: usize) -> Option<Accounts> {
        self.atropos.accounts(s)
    }

    /// The waits recorded, oldest first.
    pub fn trace(&self) -> &WaitTrace {
        &self.trace
    }

    /// The underlying scheduler (period records with its trace on).
    pub fn atropos_mut(&mut self) -> &mut Atropos {
        &mut self.atropos
    }

    /// A request of stream `r.client` arrives at `now_ns`; [`Full`] if the stream holds its
    /// most pending.
    pub fn arrive(&mut self, r: Pending, now_ns: u64) -> Result<(), Full> {
        self.settle(now_ns);
        let s = &mut self.streams[r.client];
        s.requests.enqueue(r)?;
        let busy = s.requests.len() > 1 || self.in_flight.is_some_and(|f| f.client == r.client);
        if busy {
            s.stats.record_think(0);
        } else if let Some(finish) = s.stats.prev_finish_ns {
            s.stats.record_think(now_ns.saturating_sub(finish));
        }
        if let Some(end) = s.stats.prev_end {
            let ns = self.estimate.positioning_ns(end, r.lbn);
            s.stats.record_position(ns, r.lbn >= end);
        }
        s.stats.prev_end = Some(r.end());
        if !s.runnable {
            s.runnable = true;
            self.atropos.wake(r.client, now_ns);
        }
        Ok(())
    }

    /// Stops charging the holder at its charge's end if `now_ns` is past it: the time the
    /// caller took to come back after the disk finished, or after a wait's end, is no stream's.
    fn settle(&mut self, now_ns: u64) {
        if let Some(end) = self.charge_end
            && now_ns > end
        {
            self.atropos.stop(end);
            self.charge_end = None;
        }
    }

    /// Sets stream `s` aside if it has nothing pending (it is not waited for).
    fn set_aside(&mut self, s: usize, now_ns: u64) {
        if self.streams[s].runnable && self.streams[s].requests.is_empty() {
            self.streams[s].runnable = false;
            self.atropos.block(s, now_ns);
        }
    }

    /// Ends the current wait at `now_ns`, recording how.
    fn end_wait(&mut self, now_ns: u64, end: WaitEnd) {
        if let Some((client, since, until)) = self.wait.take() {
            self.trace.push(WaitRecord {
                client,
                since_ns: since,
                until_ns: until,
                ended_ns: now_ns,
                end,
            });
        }
    }

    /// The nearest pending request of any stream but `s`, by the estimate.
    fn others_nearest(&self, s: usize, now_ns: u64) -> Option<Pending> {
        self.streams
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != s)
            .filter_map(|(_, st)| st.requests.choose(self.head, now_ns))
            .min_by_key(|r| self.estimate.positioning_ns(self.head, r.lbn))
    }

    /// What to do at `now_ns`: called on every arrival, completion and expired wait.
    pub fn next(&mut self, now_ns: u64) -> Decision {
        if self.in_flight.is_some() {
            return Decision::Hold;
        }
        self.settle(now_ns);
        self.charge_end = None;
        // A wait whose timeout has come ends here, whatever the scheduler picks next.
        if let Some((c, _, until)) = self.wait
            && now_ns >= until
        {
            // It really ends now, however late the caller came back after its timer.
            self.end_wait(now_ns, WaitEnd::TimedOut);
            self.set_aside(c, now_ns);
        }
        // Each pass either dispatches, waits, or sets a stream aside (or makes it yield its
        // slice), so it ends within twice the number of streams.
        for _ in 0..=2 * self.streams.len() {
            let Some(d) = self.atropos.dispatch(now_ns) else {
                // No stream may use the disk now (those with requests have no slice left): a
                // wait for one of them is over, and the disk idles until a period ends.
                if let Some((c, _, _)) = self.wait {
                    self.end_wait(now_ns, WaitEnd::Abandoned);
                    self.set_aside(c, now_ns);
                }
                // Nothing pending anywhere: nothing to wait for either.
                if self.streams.iter().all(|s| s.requests.is_empty()) {
                    return Decision::Idle;
                }
                return match self.atropos.next_event() {
                    Some(t) => Decision::Wait { until_ns: t.max(now_ns + 1) },
                    None => Decision::Idle,
                };
            };
            let s = d.client;
            if let Some(r) = self.streams[s].requests.choose(self.head, now_ns) {
                let bound = self.estimate.service_bound_ns(self.head, &r);
                let remaining = self.atropos.remaining(s).unwrap_or(0);
                if d.mode == Mode::Guaranteed && bound > remaining {
                    // It would overrun the slice: the stream waits for its next period.
                    self.atropos.yield_now(s, now_ns);
                    continue;
                }
                let waited = self.wait.map(|(c, _, _)| c);
                if waited.is_some() {
                    let end =
                        if waited == Some(s) { WaitEnd::Anticipated } else { WaitEnd::Abandoned };
                    self.end_wait(now_ns, end);
                }
                let r = self.streams[s].requests.dequeue(r.id, now_ns).expect("chosen");
                self.head = r.end();
                self.in_flight = Some(r);
                return Decision::Dispatch(r);
            }
            // The holder has nothing pending: wait for it, or set it aside.
            if let Some((c, _, until)) = self.wait {
                if c == s && now_ns < until {
                    return self.wait_for_holder(until.min(d.until));
                }
                self.end_wait(now_ns, if c == s { WaitEnd::TimedOut } else { WaitEnd::Abandoned });
                self.set_aside(s, now_ns);
                continue;
            }
            let wait = self.anticipate.then(|| self.weigh(s, now_ns)).flatten();
            match wait {
                Some(wait_ns) => {
                    let until = now_ns + wait_ns;
                    self.wait = Some((s, now_ns, until));
                    return self.wait_for_holder(until.min(d.until));
                }
                None => self.set_aside(s, now_ns),
            }
        }
        Decision::Idle
    }

    /// Keeps the disk for the holder until `until_ns`, charging it until then at most.
    fn wait_for_holder(&mut self, until_ns: u64) -> Decision {
        self.charge_end = Some(until_ns);
        Decision::Wait { until_ns }
    }

    /// How long to keep the disk for stream `s`, which has nothing pending, at `now_ns`; `None`
    /// not to. Only worth it against another stream's request: the positioning that one needs
    /// beyond what `s`'s next is expected to.
    fn weigh(&self, s: usize, now_ns: u64) -> Option<u64> {
        let other = self.others_nearest(s, now_ns)?;
        let stats = &self.streams[s].stats;
        let finish = stats.prev_finish_ns?;
        let cost = self.estimate.positioning_ns(self.head, other.lbn);
        let benefit = cost.saturating_sub(stats.expected_positioning_ns());
        stats.best_wait_ns(benefit, now_ns.saturating_sub(finish))
    }

    /// The request at the disk completed at `now_ns`.
    pub fn complete(&mut self, now_ns: u64) {
        let Some(r) = self.in_flight.take() else { return };
        self.charge_end = Some(now_ns);
        let s = &mut self.streams[r.client];
        s.stats.prev_finish_ns = Some(now_ns);
        if s.requests.is_empty() && !self.anticipate {
            self.set_aside(r.client, now_ns);
        }
    }
}

/// The longest a request of `sectors` may take on `estimate` by its bound: from one end of the
/// disk to the other. A stream whose slice is shorter can never start one in guaranteed time.
pub fn longest_service_ns(estimate: &disk_model::DiskModel, sectors: u32) -> u64 {
    let cap = estimate.capacity();
    let far = Pending {
        id: 0,
        client: 0,
        lbn: cap.saturating_sub(u64::from(sectors)),
        sectors,
        read: true,
        arrival_ns: 0,
    };
    estimate.service_bound_ns(0, &far)
}

/// The mechanical model's bound: command overhead; the arm's move to the first sector's
/// cylinder from wherever it may be (on the track of the sector before `head`, or, the drive
/// reading ahead after a read, up to a segment further), or a head switch (a switch or a
/// single-cylinder seek for a request that starts at `head`); a whole revolution
/// of rotational wait; the transfer at the slowest zone's rate with a switch for every track it
/// may cross; and a revolution more for every zone boundary it crosses, where the skew does not
/// line up. It holds for a drive without a write cache, the models Tessera's manifests name
/// (with one, a request may first wait for the previous write to reach the media).
impl ServiceBound for disk_model::DiskModel {
    fn service_bound_ns(&self, head: u64, r: &Pending) -> u64 {
        let p = self.params();
        let g = self.geometry();
        let rev = self.revolution_ns();
        let slowest =
            p.zones.iter().map(|z| u64::from(z.sectors_per_track)).min().unwrap_or(1).max(1);
        let sectors = u64::from(r.sectors);
        let crossings = sectors / slowest + 1;
        let switch = p.head_switch_ns.max(p.single_cylinder_seek_ns) + rev / 100;
        let movement = if r.lbn == head {
            // Where the last request ended: after a write the arm is on that request's last
            // track, at most a head switch or a cylinder away; after a read the sector is in the
            // read-ahead segment, or the read-ahead is just moving on to its track.
            p.head_switch_ns.max(p.single_cylinder_seek_ns)
        } else {
            let ahead = if p.read_ahead { u64::from(p.segment_sectors) } else { 0 };
            let near = g.locate(head.saturating_sub(1)).cylinder;
            let last = head.saturating_add(ahead).min(self.capacity()).saturating_sub(1);
            let far = g.locate(last).cylinder;
            let to = g.locate(r.lbn).cylinder;
            let distance = to.abs_diff(near).max(to.abs_diff(far));
            let switch_only = if g.heads() > 1 { p.head_switch_ns } else { 0 };
            self.seek_curve().seek_ns(u64::from(distance)).max(switch_only)
        };
        let zones = g.zone_boundaries_in(r.lbn, r.end());
        p.command_overhead_ns
            + movement
            + rev
            + sectors * rev / slowest
            + crossings * switch
            + zones * rev
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::println;

    use atropos::MILLISECOND;

    use super::*;
    use crate::Anticipation;
    use crate::heuristics::SptfRule;
    use crate::sim::{self, Pattern, Reader};
    use disk_model::{DiskModel, DiskParams, ModelOp};

    const GB: u64 = 2 * 1024 * 1024;
    const RUN_NS: u64 = 10_000_000_000;

    fn deskstar() -> DiskModel {
        DiskModel::new(DiskParams::deskstar_34gxp())
    }

    /// A contract of `tenths` tenths of every second, no extra time, and no urgency on waking
    /// (a latency hint of the whole period): a synchronous stream with a short latency hint is
    /// served as soon as it wakes, by contract, and so interleaves with the others. A request
    /// is started only if its service surely fits the slice left, so a slice may go unused by
    /// up to one request's bound (about 15 ms here): long periods keep that small.
    fn contract(tenths: u64) -> Contract {
        Contract {
            period: 1000 * MILLISECOND,
            slice: tenths * 100 * MILLISECOND,
            extra: false,
            latency: 1000 * MILLISECOND,
        }
    }

    /// A sequential stream and a random-reading hog, both synchronous.
    fn readers() -> [Reader; 2] {
        [
            Reader { start: 0, sectors: 128, think_ns: 50_000, pattern: Pattern::Sequential },
            Reader {
                start: 10 * GB,
                sectors: 128,
                think_ns: 50_000,
                pattern: Pattern::Random { span: 20 * GB },
            },
        ]
    }

    /// The sequential stream contracted for half the disk time beside a hog contracted for
    /// 40%, anticipating or not: the outcome and the USD.
    fn shared(anticipate: bool) -> (sim::Outcome, Usd<DiskModel>) {
        shared_readers(anticipate, 0, &readers())
    }

    /// [`shared`] with `readers`, the wait's timer firing `late_ns` late.
    fn shared_readers(
        anticipate: bool,
        late_ns: u64,
        readers: &[Reader],
    ) -> (sim::Outcome, Usd<DiskModel>) {
        let mut usd = Usd::new(deskstar(), anticipate, 16, 4096);
        usd.atropos_mut().set_trace(true);
        assert!(atropos::admit(&[contract(5), contract(4)]).is_ok());
        usd.open(contract(5), 0);
        usd.open(contract(4), 0);
        let out = sim::run_with_late_timer(&mut usd, &mut deskstar(), readers, RUN_NS, 9, late_ns);
        (out, usd)
    }

    #[test]
    fn a_late_timer_makes_waits_end_past_their_timeout() {
        // The sequential stream pauses 20 ms after every 4 reads, so that waits for it time out.
        let mut r = readers();
        r[0].pattern = Pattern::Bursts { burst: 4, pause_ns: 20 * MILLISECOND };
        let (_, on_time) = shared_readers(true, 0, &r);
        let t = on_time.trace().totals();
        assert!(t.timed_out > 0, "{t:?}");
        assert_eq!((t.exceeded, t.late_max_ns), (0, 0), "{t:?}");
        // The caller back 2 ms after each timer: the waits that timed out end then.
        let (_, late) = shared_readers(true, 2 * MILLISECOND, &r);
        let t = late.trace().totals();
        assert!(t.exceeded > 0 && t.exceeded <= t.timed_out, "{t:?}");
        assert!(t.late_max_ns > crate::LATE_ALLOWANCE_NS, "{t:?}");
        assert!(t.late_max_ns <= 2 * MILLISECOND, "{t:?}");
    }

    #[test]
    fn a_stream_keeps_its_locality_beside_a_hog() {
        // Alone, on the whole disk.
        let policy = Sptf::new(16, deskstar());
        let mut alone = Anticipation::new(policy, SptfRule::new(deskstar()), 1, false, 0);
        let alone = sim::run(&mut alone, &mut deskstar(), &readers()[..1], RUN_NS, 9).mb_per_s();
        let (with, _) = shared(true);
        let (without, _) = shared(false);
        let f = 0.5;
        println!(
            "sequential stream, half the disk time, beside a random hog: {:.2} MB/s with anticipation, {:.2} without; alone {alone:.2}; the bar {:.2}",
            with.reader_mb_per_s(0),
            without.reader_mb_per_s(0),
            0.9 * f * alone
        );
        // Argon's bar: at least 0.9 of its share of what it gets alone.
        assert!(with.reader_mb_per_s(0) >= 0.9 * f * alone);
        // Interleaving single requests loses most of it.
        assert!(without.reader_mb_per_s(0) < 0.5 * f * alone);
    }

    #[test]
    fn no_stream_without_extra_time_gets_more_than_its_slice() {
        for anticipate in [true, false] {
            let (_, mut usd) = shared(anticipate);
            let records = usd.atropos_mut().take_records();
            assert!(records.len() > 10);
            for r in &records {
                let slice = if r.client == 0 { 500 } else { 400 } * MILLISECOND;
                assert!(r.guaranteed + r.extra <= slice, "{r:?}");
            }
            // Every wait ended by its timeout.
            assert!(usd.trace().iter().all(|w| w.ended_ns <= w.until_ns));
        }
    }

    /// The disk of the QEMU checks' scheduled runs: the Deskstar scaled to 17 MiB (one head,
    /// 116 cylinders in 8 zones).
    fn deskstar_17m() -> DiskModel {
        DiskModel::new(DiskParams::deskstar_34gxp().with_capacity(34_816))
    }

    /// The first LBN of each zone of `m` but the first.
    fn zone_starts(m: &DiskModel) -> Vec<u64> {
        let heads = u64::from(m.geometry().heads());
        let mut lbn = 0;
        let mut out = Vec::new();
        for z in m.geometry().zones() {
            if lbn > 0 {
                out.push(lbn);
            }
            lbn += u64::from(z.cylinders) * heads * u64::from(z.sectors_per_track);
        }
        out
    }

    #[test]
    fn the_bound_holds_for_every_request_the_model_serves() {
        // As the USD sees the disk: the head where its last request ended, then one request at
        // a time, each started when the previous completed or later. Reads leave the drive
        // reading ahead (its arm moving on past the head the USD knows), and requests that
        // cross a zone boundary meet a skew that does not line up.
        let models = [
            deskstar_17m(),
            deskstar(),
            DiskModel::new(DiskParams::cheetah_15k().with_capacity(1 << 17)),
        ];
        for (k, model) in models.into_iter().enumerate() {
            let cap = model.capacity();
            let starts = zone_starts(&model);
            let mut disk = model.clone();
            let mut rng = 0x5eed_u64 + k as u64;
            let mut next = move |n: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % n.max(1)
            };
            let (mut head, mut now, mut crossing) = (0u64, 0u64, 0u32);
            for id in 0..100_000 {
                let sectors = 1 + next(128) as u32;
                let lbn = match next(5) {
                    // Sequential, or a little way back or ahead.
                    0 => head,
                    1 => head.saturating_sub(next(2048)),
                    2 => head + next(2048),
                    // Across a zone boundary (perhaps).
                    3 => starts[next(starts.len() as u64) as usize].saturating_sub(next(128)),
                    _ => next(cap),
                }
                .min(cap - u64::from(sectors));
                let read = next(2) == 0;
                let r = Pending { id, client: 0, lbn, sectors, read, arrival_ns: now };
                let bound = model.service_bound_ns(head, &r);
                let op = if read { ModelOp::Read } else { ModelOp::Write };
                let s = disk.service(now, op, lbn, sectors);
                crossing += u32::from(model.geometry().zone_boundaries_in(lbn, r.end()) > 0);
                assert!(
                    s.end_ns - now <= bound,
                    "{} over {bound}: {r:?} from {head}: {s:?}",
                    s.end_ns - now
                );
                head = r.end();
                now = s.end_ns + next(3_000_000);
            }
            // The zone boundaries were met, so the bound was tried where it once failed.
            assert!(crossing > 1000, "{crossing} requests across a zone boundary");
        }
    }

    #[test]
    fn no_stream_gets_more_than_its_slice_across_zone_boundaries() {
        // The scheduled QEMU check's streams on its disk: beta (60 ms every 200 ms, no extra
        // time) beside alpha with extra time, each reading 62 KiB at random in its half, so
        // that many of beta's requests cross one of the zone boundaries in its half.
        let mut usd = Usd::new(deskstar_17m(), true, 16, 64);
        usd.atropos_mut().set_trace(true);
        let ms = MILLISECOND;
        let a = Contract { period: 200 * ms, slice: 100 * ms, extra: true, latency: 200 * ms };
        let b = Contract { period: 200 * ms, slice: 60 * ms, extra: false, latency: 200 * ms };
        assert!(atropos::admit(&[a, b]).is_ok());
        usd.open(a, 0);
        usd.open(b, 0);
        let alpha = Reader {
            start: 0,
            sectors: 124,
            think_ns: 50_000,
            pattern: Pattern::Random { span: 16_384 - 124 },
        };
        // beta reads at one of four places, the first across the boundary of zones 5 and 6.
        let boundary = zone_starts(&deskstar_17m())[4];
        let beta = Reader {
            start: boundary - 100,
            sectors: 124,
            think_ns: 50_000,
            pattern: Pattern::Random { span: 4 * 124 },
        };
        sim::run(&mut usd, &mut deskstar_17m(), &[alpha, beta], RUN_NS, 5);
        let records = usd.atropos_mut().take_records();
        let beta: Vec<_> = records.iter().filter(|r| r.client == 1).collect();
        assert!(beta.len() > 40, "{} periods", beta.len());
        for r in beta {
            assert!(r.guaranteed + r.extra <= 60 * ms, "{r:?}");
        }
    }

    #[test]
    fn a_late_caller_costs_no_stream_its_slice() {
        // The scheduled QEMU check's streams on its disk, the caller coming back 3 ms after
        // each of its timers (the disk's completions, the waits' ends), as a driver beside busy
        // clients may: a stream is charged its requests' service and its waits, never the time
        // the caller took to come back, so beta never gets more than its slice in a period.
        let ms = MILLISECOND;
        for anticipate in [true, false] {
            let mut usd = Usd::new(deskstar_17m(), anticipate, 16, 64);
            usd.atropos_mut().set_trace(true);
            let a = Contract { period: 200 * ms, slice: 100 * ms, extra: true, latency: 200 * ms };
            let b = Contract { period: 200 * ms, slice: 60 * ms, extra: false, latency: 200 * ms };
            usd.open(a, 0);
            usd.open(b, 0);
            let reader = |start| Reader {
                start,
                sectors: 64,
                think_ns: 50_000,
                pattern: Pattern::Bursts { burst: 4, pause_ns: 5 * ms },
            };
            let readers = [reader(0), reader(16_384)];
            sim::run_with_late_timer(&mut usd, &mut deskstar_17m(), &readers, RUN_NS, 5, 3 * ms);
            let records = usd.atropos_mut().take_records();
            let beta: Vec<_> = records.iter().filter(|r| r.client == 1).collect();
            assert!(beta.len() > 40, "{} periods", beta.len());
            for r in beta {
                assert!(r.guaranteed + r.extra <= 60 * ms, "anticipating {anticipate}: {r:?}");
            }
        }
    }

    #[test]
    fn slack_goes_to_streams_with_extra_time_and_every_nanosecond_is_charged() {
        // Both streams may use slack: the disk is never idle while one has a request, and the
        // streams' accounts (guaranteed plus extra) cover the whole run.
        let mut usd = Usd::new(deskstar(), true, 16, 64);
        let extra = |tenths| Contract { extra: true, ..contract(tenths) };
        usd.open(extra(2), 0);
        usd.open(extra(2), 0);
        let out = sim::run(&mut usd, &mut deskstar(), &readers(), RUN_NS, 9);
        let used: u64 = (0..2).map(|s| usd.accounts(s).map_or(0, |a| a.guaranteed + a.extra)).sum();
        println!(
            "two streams with extra time, 20% each guaranteed: {:.2} + {:.2} MB/s, {:.1}% of the run charged",
            out.reader_mb_per_s(0),
            out.reader_mb_per_s(1),
            used as f64 * 100.0 / RUN_NS as f64
        );
        assert!((RUN_NS * 98 / 100..=RUN_NS).contains(&used), "{used} ns charged");
        // More than their guarantees: each beyond 20% of its time.
        for s in 0..2 {
            let a = usd.accounts(s).unwrap();
            assert!(a.extra > 0 && a.guaranteed + a.extra > RUN_NS / 5, "{a:?}");
        }
    }
}
