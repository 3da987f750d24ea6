//! What the anticipation heuristics know of each client, learnt online from its reads.
//!
//! - **Think time**: from the completion of the client's previous request to the arrival of its
//!   next, capped at 15 ms, and 0 when the client already had a read pending (the new one is
//!   then asynchronous). Kept as a decaying histogram of 30 buckets of 500 µs over 0-15 ms:
//!   on each sample every bucket is multiplied by 0.9, then the sample's bucket gains 1. The
//!   median and the 95th percentile are read from it, as the middle of the bucket where the
//!   cumulative weight reaches half and 95% of the total, except that the last bucket holds
//!   every think time from 14.5 ms on and reads as [`MAX_THINK_NS`]: a client whose median is
//!   that long is not expected soon, and no rule waits for it (the paper's cap at 15 ms would
//!   otherwise make a 20 ms thinker look like one worth a 15 ms wait). (The appendix's
//!   pseudo-code has 31 entries, `[0..N]`.)
//! - **Positioning time**: the decayed mean of the positioning time from the end of each of
//!   its reads to the start of its next (its own locality, by the scheduler's estimate: the
//!   appendix's expected seek distance converted to time), an EWMA of factor 0.74 so that
//!   95% of the old value is forgotten after ten requests. (The appendix's update,
//!   `x = 0.74 x + sample`, is an unnormalised sum that settles near 3.85 times the mean; this
//!   is the normalised form, which the direction thresholds need.)
//! - **Seek direction**: the same EWMA of 1 for a request beyond the client's previous one, 0
//!   for one before it: near 1, the client reads forwards.
//!
//! Fixed point throughout (weights in 1/65536), so the module needs no floating point.

/// Histogram buckets, and the span of one.
pub const BUCKETS: usize = 30;
/// See [`BUCKETS`].
pub const BUCKET_NS: u64 = 500_000;
/// The longest thinktime recorded as such.
pub const MAX_THINK_NS: u64 = BUCKETS as u64 * BUCKET_NS;

/// One in fixed point.
const ONE: u64 = 1 << 16;
/// The histogram's decay per sample, 0.9.
const HIST_DECAY: u64 = ONE * 9 / 10;
/// The positioning and direction EWMA's weight of the old value, 0.74.
const EWMA_OLD: u64 = ONE * 74 / 100;

/// A client's learnt behaviour.
#[derive(Clone, Debug)]
pub struct ClientStats {
    buckets: [u64; BUCKETS],
    samples: u64,
    /// Decayed mean positioning time, ns.
    positioning_ns: u64,
    /// Decayed fraction of forward requests, in 1/65536.
    forward: u64,
    /// When its last request completed, if one has.
    pub prev_finish_ns: Option<u64>,
    /// Where its last read ended (the sector after it), if it made one.
    pub prev_end: Option<u64>,
    /// Its reads pending at the scheduler (not yet at the disk).
    pub pending_reads: u32,
    /// Its requests at the disk.
    pub in_flight: u32,
    /// Whether it had no request pending when its last one completed.
    pub idle_at_last_finish: bool,
}

impl Default for ClientStats {
    fn default() -> ClientStats {
        ClientStats {
            buckets: [0; BUCKETS],
            samples: 0,
            positioning_ns: 0,
            forward: ONE / 2,
            prev_finish_ns: None,
            prev_end: None,
            pending_reads: 0,
            in_flight: 0,
            idle_at_last_finish: true,
        }
    }
}

impl ClientStats {
    /// Records a think time of `ns` (capped at [`MAX_THINK_NS`]).
    pub fn record_think(&mut self, ns: u64) {
        for b in self.buckets.iter_mut() {
            *b = *b * HIST_DECAY / ONE;
        }
        let i = ((ns.min(MAX_THINK_NS) / BUCKET_NS) as usize).min(BUCKETS - 1);
        self.buckets[i] += ONE;
        self.samples += 1;
    }

    /// The think time below which `per_mille` thousandths of the (decayed) samples lie: the
    /// middle of the bucket where the cumulative weight reaches it; `None` before any sample.
    pub fn think_quantile_ns(&self, per_mille: u64) -> Option<u64> {
        if self.samples == 0 {
            return None;
        }
        let total: u64 = self.buckets.iter().sum();
        let mut seen = 0;
        for (i, b) in self.buckets[..BUCKETS - 1].iter().enumerate() {
            seen += b;
            if seen * 1000 >= total * per_mille {
                return Some(i as u64 * BUCKET_NS + BUCKET_NS / 2);
            }
        }
        // The last bucket holds every think time from 14.5 ms on: "long".
        Some(MAX_THINK_NS)
    }

    /// The median think time.
    pub fn median_think_ns(&self) -> Option<u64> {
        self.think_quantile_ns(500)
    }

    /// The 95th-percentile think time.
    pub fn p95_think_ns(&self) -> Option<u64> {
        self.think_quantile_ns(950)
    }

    /// The wait for the client's next request with the most expected gain, if any gains:
    /// `elapsed_ns` after its last completion, when a request arriving within the wait saves
    /// `benefit_ns` of positioning. Over the think-time histogram, conditioned on the request
    /// not having come yet, each candidate wait `w` (to the end of a bucket, plus half a
    /// bucket's margin for the histogram's resolution) is worth
    /// `P(T <= w) * benefit - E[min(T, w)]`: the positioning it saves when the request comes in
    /// time, less the time the disk stands idle (all of it when the request does not come).
    /// The best positive one is returned, as the rest of the wait in ns from now; `None` if no
    /// wait is worth it, nothing is known, or the client is not expected within the
    /// histogram's range.
    pub fn best_wait_ns(&self, benefit_ns: u64, elapsed_ns: u64) -> Option<u64> {
        if self.samples == 0 {
            return None;
        }
        // Buckets that can still come: those ending after `elapsed_ns`; the last bucket (14.5 ms
        // and more) counts as "not coming" but weighs in the total.
        let first = (elapsed_ns / BUCKET_NS) as usize;
        if first >= BUCKETS - 1 {
            return None;
        }
        let total: u64 = self.buckets[first..].iter().sum();
        if total == 0 {
            return None;
        }
        let benefit = i128::from(benefit_ns);
        // Gains are compared times `total` (the same for every candidate), so the loop has no
        // division: a scheduler weighs this at every decision.
        let mut best: Option<(i128, u64)> = None;
        // Weight that arrived by the end of each candidate bucket, and its summed arrival time
        // (weight * ns).
        let (mut arrived, mut arrived_time) = (0i128, 0i128);
        for i in first..BUCKETS - 1 {
            let weight = i128::from(self.buckets[i]);
            let mid = (i as u64 * BUCKET_NS + BUCKET_NS / 2).max(elapsed_ns);
            arrived += weight;
            arrived_time += weight * i128::from(mid - elapsed_ns);
            let wait = (i as u64 + 1) * BUCKET_NS + BUCKET_NS / 2 - elapsed_ns;
            let late = i128::from(total) - arrived;
            let gain = benefit * arrived - (arrived_time + late * i128::from(wait));
            if gain > 0 && best.is_none_or(|(g, _)| gain > g) {
                best = Some((gain, wait));
            }
        }
        best.map(|(_, wait)| wait)
    }

    /// Records a request's positioning time (`ns`) and whether it went forwards.
    pub fn record_position(&mut self, ns: u64, forward: bool) {
        self.positioning_ns = if self.samples <= 1 && self.positioning_ns == 0 {
            ns
        } else {
            (self.positioning_ns * EWMA_OLD + ns * (ONE - EWMA_OLD)) / ONE
        };
        let sample = if forward { ONE } else { 0 };
        self.forward = (self.forward * EWMA_OLD + sample * (ONE - EWMA_OLD)) / ONE;
    }

    /// Its expected positioning time, ns.
    pub fn expected_positioning_ns(&self) -> u64 {
        self.positioning_ns
    }

    /// The decayed fraction of its requests that went forwards, in thousandths.
    pub fn forward_per_mille(&self) -> u64 {
        self.forward * 1000 / ONE
    }
}
