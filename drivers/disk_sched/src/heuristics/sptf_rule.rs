//! The SPTF rule's decision, for the seek-reducing policies: when the disk could take the
//! policy's candidate, keep it idle a little longer for the last process (LP), whose next
//! request is expected soon and nearby, or dispatch the candidate now?
//!
//! It reads LP's statistics ([`ClientStats`](crate::stats::ClientStats), learnt from its
//! reads): its think time (the time from a completion to its next request: median and 95th
//! percentile, from a decaying histogram) and its expected positioning time (how far its
//! requests usually are from the end of its previous one, in time). Waiting *benefits* by the
//! positioning LP's request would save against the candidate's; it *costs* the time the disk
//! stands idle until LP's request comes. The answer is a wait in ns from now; 0 dispatches the
//! candidate.

use super::Weigh;
use crate::anticipation::Weighing;
use crate::positioning::Positioning;

// ANCHOR: expected_think
/// LP's median think time, if it is known and LP is expected within the histogram's range
/// (below [`MAX_THINK_NS`](crate::stats::MAX_THINK_NS): a median in the last bucket means "a
/// long time").
pub(super) fn expected_think(w: &Weighing<'_>) -> Option<u64> {
    // ANCHOR_END: expected_think
    // LAB(disk) BEGIN
    w.lp.median_think_ns().filter(|&m| m < crate::stats::MAX_THINK_NS)
    // LAB(disk) HANDOUT
    // // LP is never expected: nothing is ever waited for.
    // let _ = w;
    // None
    // LAB(disk) END
}

// ANCHOR: tail_wait
/// How long to wait for LP once waiting is worth it: the rest of its 95th-percentile think
/// time plus [`EXTRA_WAIT_NS`](super::EXTRA_WAIT_NS) (the time since its last completion,
/// `w.elapsed_ns`, already went by), or 0 if LP is not expected soon ([`expected_think`]).
pub(super) fn tail_wait(w: &Weighing<'_>) -> u64 {
    // ANCHOR_END: tail_wait
    // LAB(disk) BEGIN
    if expected_think(w).is_none() {
        return 0;
    }
    w.lp.p95_think_ns().map_or(0, |p95| (p95 + super::EXTRA_WAIT_NS).saturating_sub(w.elapsed_ns))
    // LAB(disk) HANDOUT
    // let _ = w;
    // 0
    // LAB(disk) END
}

// ANCHOR: benefit
/// The positioning LP's next request would save against the candidate, by the estimate `e`:
/// the candidate's positioning time from the head less LP's expected positioning time (0 if
/// LP's is the longer).
pub(super) fn benefit<E: Positioning>(e: &E, w: &Weighing<'_>) -> u64 {
    // ANCHOR_END: benefit
    // LAB(disk) BEGIN
    let candidate = e.positioning_ns(w.head, w.candidate.lbn);
    candidate.saturating_sub(w.lp.expected_positioning_ns())
    // LAB(disk) HANDOUT
    // let _ = (e, w);
    // 0
    // LAB(disk) END
}

// ANCHOR: paper_rule
/// The paper's rule (Iyer and Druschel, SOSP 2001): wait if the positioning saved
/// ([`benefit`]) is more than the expected rest of LP's think time (its median less the time
/// elapsed since its last completion), for [`tail_wait`]; dispatch at once otherwise, and on
/// a tie (waiting is a cost, so it must buy something), and when LP is not expected soon.
pub(super) fn paper_rule<E: Positioning>(e: &E, w: &Weighing<'_>) -> u64 {
    // ANCHOR_END: paper_rule
    // LAB(disk) BEGIN
    let Some(median) = expected_think(w) else { return 0 };
    let cost = median.saturating_sub(w.elapsed_ns);
    if benefit(e, w) > cost { tail_wait(w) } else { 0 }
    // LAB(disk) HANDOUT
    // let _ = (e, w);
    // 0
    // LAB(disk) END
}

/// The SPTF rule with the estimate `e`, weighed as `how` says: the paper's ([`paper_rule`]),
/// or Tessera's, the wait with the most expected gain over LP's whole think-time histogram
/// ([`ClientStats::best_wait_ns`](crate::stats::ClientStats::best_wait_ns)) for the same
/// [`benefit`], when LP is expected soon.
pub(super) fn sptf_rule<E: Positioning>(e: &E, how: Weigh, w: &Weighing<'_>) -> u64 {
    match how {
        Weigh::Paper => paper_rule(e, w),
        Weigh::ExpectedGain => {
            if expected_think(w).is_none() {
                return 0;
            }
            w.lp.best_wait_ns(benefit(e, w), w.elapsed_ns).unwrap_or(0)
        }
    }
}
