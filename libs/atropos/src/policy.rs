//! The scheduler's two policy decisions, kept apart from its queues: which sets of contracts
//! are admitted ([`admit`], over each contract's share of the CPU, [`share_ppb`]), and who runs
//! on slack time when no runnable client has slice left ([`takes_slack`], and `SlackTurn::pick`
//! for whose turn it is).
//!
//! **Admission.** A contract's share is `slice / period`, in parts per billion
//! ([`PPB`](crate::PPB)), rounded **up**, so that rounding never admits a set that does not fit.
//! A set is admitted if every contract is valid by itself ([`Contract::validate`]) and the
//! shares sum to at most [`CAPACITY_PPB`](crate::CAPACITY_PPB): the whole CPU less the kernel's
//! reserve ([`KERNEL_RESERVE_PERCENT`](crate::KERNEL_RESERVE_PERCENT)), which pays for time
//! charged to nobody and for the latency hints. An admitted set is EDF-feasible with room to
//! spare, which is what lets the scheduler promise every client its slice in every period.
//!
//! **Slack time.** Only clients with `extra = true` run beyond their slice. The runnable ones
//! wait for slack in a list, in the order they became runnable (one that leaves the list is
//! replaced by the last in line); they take turns of [`EXTRA_QUANTUM`](crate::EXTRA_QUANTUM) of
//! slack each, in list order, starting over at the front. A client alone in the list keeps the
//! slack without a turn's limit, so that it is not interrupted every quantum for nothing.

use crate::{AdmissionError, Contract, Nanos};

// ANCHOR: share
/// `contract`'s share of the CPU, `slice / period` in parts per billion
/// ([`PPB`](crate::PPB)), rounded up (0 for a zero period).
pub fn share_ppb(contract: &Contract) -> u64 {
    // ANCHOR_END: share
    // LAB(edf) BEGIN
    if contract.period == 0 {
        return 0;
    }
    let share =
        (u128::from(contract.slice) * u128::from(crate::PPB)).div_ceil(u128::from(contract.period));
    u64::try_from(share).unwrap_or(u64::MAX)
    // LAB(edf) HANDOUT
    // let _ = contract;
    // todo!("lab edf: slice / period in ppb, rounded up (docs/labs/edf.md)")
    // LAB(edf) END
}

// ANCHOR: admit
/// Admission control: checks every contract ([`Contract::validate`]) and that their shares
/// ([`share_ppb`]) sum to at most [`CAPACITY_PPB`](crate::CAPACITY_PPB) (1 minus
/// [`KERNEL_RESERVE_PERCENT`](crate::KERNEL_RESERVE_PERCENT)). Returns the total share in
/// parts per billion; on failure names the first contract, in list order, that is invalid
/// ([`AdmissionError::Invalid`]) or takes the sum over the capacity
/// ([`AdmissionError::OverCapacity`], with the sum up to and including it).
pub fn admit<'a>(contracts: impl IntoIterator<Item = &'a Contract>) -> Result<u64, AdmissionError> {
    // ANCHOR_END: admit
    // LAB(edf) BEGIN
    let mut total = 0u64;
    for (index, c) in contracts.into_iter().enumerate() {
        c.validate().map_err(|error| AdmissionError::Invalid { index, error })?;
        total = total.saturating_add(share_ppb(c));
        if total > crate::CAPACITY_PPB {
            return Err(AdmissionError::OverCapacity { index, total_ppb: total });
        }
    }
    Ok(total)
    // LAB(edf) HANDOUT
    // let _ = contracts;
    // todo!("lab edf: admission up to CAPACITY_PPB (docs/labs/edf.md)")
    // LAB(edf) END
}

// ANCHOR: takes_slack
/// Whether a client under `contract` may run on slack time, beyond its slice: only those
/// whose contract says `extra = true` (the scheduler puts a runnable client in the slack list
/// when this says so).
#[inline]
pub fn takes_slack(contract: &Contract) -> bool {
    // ANCHOR_END: takes_slack
    // LAB(edf) BEGIN
    contract.extra
    // LAB(edf) HANDOUT
    // // Everyone may use the slack.
    // let _ = contract;
    // true
    // LAB(edf) END
}

// ANCHOR: slack_turn
/// Whose turn it is on slack time, and how much of it that client has used. The list of the
/// clients waiting for slack (the runnable ones that [`takes_slack`] admits) is the
/// scheduler's, and passed in; the scheduler keeps `at` within it when a client leaves, and
/// adds to `used` the slack time the client whose turn it is runs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SlackTurn {
    /// The position, in the list of clients waiting for slack, of the one whose turn it is.
    pub(crate) at: usize,
    /// The slack time it has used in this turn.
    pub(crate) used: Nanos,
}
// ANCHOR_END: slack_turn

impl SlackTurn {
    // ANCHOR: pass
    /// Ends the current turn: the next in the list (the first after the last) has the next,
    /// with nothing used yet. `waiting` is the length of the list.
    #[inline]
    pub(crate) fn pass(&mut self, waiting: usize) {
        self.at += 1;
        if self.at >= waiting {
            self.at = 0;
        }
        self.used = 0;
    }
    // ANCHOR_END: pass

    // ANCHOR: pick
    /// Who runs on slack time now, and for how much of it at most (the scheduler is asked
    /// again by then): the client whose turn it is, from `waiting` (the clients waiting for
    /// slack, in turn order). `None` when nobody may run on slack: the CPU idles until the
    /// next period begins.
    #[inline]
    pub(crate) fn pick(&mut self, waiting: &[usize]) -> Option<(usize, Nanos)> {
        // ANCHOR_END: pick
        // LAB(edf) BEGIN
        if self.used >= crate::EXTRA_QUANTUM {
            self.pass(waiting.len());
        }
        let client = *waiting.get(self.at)?;
        // Alone on slack time, a turn ends only when something else can run.
        let budget = if waiting.len() > 1 { crate::EXTRA_QUANTUM - self.used } else { Nanos::MAX };
        Some((client, budget))
        // LAB(edf) HANDOUT
        // // Nobody runs on slack time: the CPU idles until the next period begins.
        // let _ = waiting;
        // None
        // LAB(edf) END
    }
}
