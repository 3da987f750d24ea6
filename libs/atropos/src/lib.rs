//! Atropos: Tessera's CPU scheduler, earliest deadline first over QoS contracts, after the
//! scheduler of Nemesis (Roscoe, 1995; Leslie et al., 1996).
//!
//! Each client (a domain) has a [`Contract`] `(period p, slice s, extra x, latency l)`. Time is
//! cut into periods of length `p` per client; in each period the client is owed `s` of CPU.
//! The scheduler is a pure state machine over nanoseconds: the kernel tells it what happened
//! ([`Atropos::block`], [`Atropos::wake`], [`Atropos::yield_now`], [`Atropos::remove`]) and asks
//! it what to run ([`Atropos::dispatch`]); the answer says until when, so the kernel arms a
//! one-shot timer for exactly that instant. There is no periodic tick.
//!
//! Its two policy decisions are in [`policy`], apart from the queues: which sets of contracts
//! are admitted ([`admit`]) and who runs on slack time (the course's lab `edf` has them
//! written by the student: `labs/edf/lab.toml`).
//!
//! # The rules
//!
//! - **Guaranteed time.** Among runnable clients with slice left, the one with the earliest
//!   *key* runs, where the key is the end of its current period (its deadline), or earlier
//!   while a wake-up is urgent (below). It runs until its slice is used up, or until another
//!   client's period ends (a replenishment may bring an earlier deadline), whichever is first.
//! - **Replenishment.** When a runnable client's period ends it starts the next one with a fresh
//!   slice; if it still had slice left at the end, that is a *missed deadline* (counted in its
//!   [`Accounts`]).
//! - **Extra time.** When no runnable client has slice left, the slack goes to runnable clients
//!   with `extra = true`, round robin in turns of [`EXTRA_QUANTUM`] of extra time each. A client
//!   with `extra = false` never runs beyond its slice.
//! - **Blocking and waking.** A client that blocks keeps its slice. If it is woken before its
//!   period ends with slice left, its key becomes `min(deadline, now + l)` until that instant
//!   passes or it blocks again, so it runs within `l` (see below). If it was blocked past the
//!   end of its period, it starts a fresh period at the wake-up: a new slice, a deadline of
//!   `now + p`, and the same urgent key `now + l`. (Atropos sets the deadline itself to
//!   `now + l`; keeping the period at `p` and only the key at `now + l` gives the same latency
//!   while never granting more than `s` in any period.)
//! - **Yielding.** A client that yields gives up the rest of its slice for this period (it is
//!   not a miss) and, if it was running on extra time, the rest of its turn.
//!
//! Why the latency bound holds: a woken client with slice left is overtaken only by clients
//! whose deadline is before `now + l`; an admitted set of contracts is EDF-feasible, so those
//! complete their slices by their deadlines, and the woken client runs by `now + l` plus the
//! cost of the switches. Moving one client's work earlier can, in a set loaded close to
//! capacity, make a later-deadline client miss; the kernel reserve ([`KERNEL_RESERVE_PERCENT`])
//! leaves room for this, and missed deadlines are counted, never hidden.
//!
//! # Accounting
//!
//! Each client's [`Accounts`] hold the guaranteed and extra time it used, its completed periods
//! and missed deadlines. All time between two scheduler calls is charged to the client that was
//! dispatched, so the kernel's trap and switch paths count against the running domain, except
//! for the intervals of kernel work the kernel hands to [`Atropos::charge_to`]: work done for
//! another client while this one was dispatched (its timer, its wake-up, its period's end),
//! which that client pays; and unless the caller stops the charge at an earlier instant
//! ([`Atropos::stop`]: the disk's USD does, for the time its driver takes to notice a
//! completion). With
//! [`Atropos::set_trace`] on, every completed period leaves a [`PeriodRecord`] to
//! [`Atropos::take_records`].
//!
//! # Queues and cost
//!
//! The scheduler keeps its clients in three indexed binary heaps ordered by `(instant, index)`:
//! the runnable clients with slice left by their key (the head is what runs), the runnable
//! clients by the next instant at which time alone changes them (their period ends or their
//! urgent key lapses; those out of slice wait here for their replenishment), and the blocked
//! clients by the end of their period. [`Atropos::dispatch`] reads the heads;
//! [`Atropos::block`], [`Atropos::wake`], [`Atropos::yield_now`] and [`Atropos::remove`] move
//! one client; replenishment takes out only the clients whose instant has come. Each of these
//! costs `O(log N)` in the number of clients `N` (plus `O(k log k)` for the `k` clients whose
//! periods end at once), never a pass over all clients; only [`Atropos::restart`] visits them
//! all. The slack time's round robin is a list of the runnable clients with `extra = true`,
//! each knowing its place in it, so joining and leaving it cost `O(1)`.
//!
//! **Allocation.** All storage is sized for a client when it is added
//! ([`Atropos::try_add`] reports when it cannot be), so no other call allocates, except the
//! per-period trace ([`Atropos::set_trace`]), whose records grow until they are taken.
//!
//! # Not implemented
//!
//! One CPU only (Tessera's guests are uniprocessor). Clients cannot change their contract after
//! they are added; renegotiation would be an [`admit`] over the new set followed by a replace.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod contract;
pub mod policy;

use alloc::collections::TryReserveError;
use alloc::vec::Vec;

use indexed_heap::Heap;

pub use contract::*;
pub use policy::admit;
use policy::{SlackTurn, takes_slack};

/// Extra (slack) time is shared round robin in turns of this much each (1 ms).
pub const EXTRA_QUANTUM: Nanos = MILLISECOND;

/// Whether a dispatched client runs on its guaranteed slice or on slack time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Mode {
    /// On its slice for the current period.
    Guaranteed,
    /// On slack time (only clients with `extra = true`).
    Extra,
}

/// The scheduler's answer: run `client` in `mode`, and call [`Atropos::dispatch`] again at
/// `until` at the latest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Dispatch {
    /// Index of the client to run.
    pub client: usize,
    /// Guaranteed or extra time.
    pub mode: Mode,
    /// When the scheduler must be asked again (slice or turn used up, or a period ends).
    pub until: Nanos,
}

/// What a client has received so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Accounts {
    /// CPU time used on its slices.
    pub guaranteed: Nanos,
    /// CPU time used on slack time.
    pub extra: Nanos,
    /// Periods completed.
    pub periods: u64,
    /// Periods that ended while it was runnable with slice left.
    pub deadlines_missed: u64,
    /// Periods whose end the scheduler saw, while the client was runnable, later than its
    /// deadline by more than its slice: the clock jumped (on QEMU, the host stalled the guest),
    /// so no schedule could have kept the contract.
    pub late_ends: u64,
    /// Times it was woken from blocking.
    pub wakeups: u64,
}

/// One completed period of one client (see [`Atropos::set_trace`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PeriodRecord {
    /// The client.
    pub client: usize,
    /// When the period started.
    pub start: Nanos,
    /// When it ended (its deadline; earlier than `start + period` never, later only when the
    /// client was blocked past it and the period is closed at the wake-up).
    pub end: Nanos,
    /// Guaranteed time used in it.
    pub guaranteed: Nanos,
    /// Extra time used in it.
    pub extra: Nanos,
    /// Whether it ended with slice left while the client was runnable.
    pub missed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Runnable,
    Blocked,
    Gone,
}

#[derive(Clone, Debug)]
struct Client {
    contract: Contract,
    state: State,
    /// Slice left in the current period.
    remain: Nanos,
    /// Start and end (deadline) of the current period.
    start: Nanos,
    deadline: Nanos,
    /// While a wake-up is urgent: the key until this instant.
    urgent: Option<Nanos>,
    /// Blocked past the end of its period: the next period starts at the wake-up.
    lapsed: bool,
    /// Time used in the current period.
    period_guaranteed: Nanos,
    period_extra: Nanos,
    accounts: Accounts,
    /// Its position in [`Atropos::extra_ready`] while it is runnable with `extra = true`.
    extra_slot: usize,
}

impl Client {
    fn key(&self) -> Nanos {
        self.urgent.map_or(self.deadline, |u| u.min(self.deadline))
    }

    fn start_period(&mut self, start: Nanos) {
        self.start = start;
        self.deadline = start.saturating_add(self.contract.period);
        self.remain = self.contract.slice;
        self.period_guaranteed = 0;
        self.period_extra = 0;
        self.lapsed = false;
    }

    /// The next instant at which time alone changes this client: its period ends, or its
    /// urgent key lapses (`MAX`: never, while it is gone or blocked past its period).
    fn next_change(&self) -> Nanos {
        match self.state {
            State::Gone => Nanos::MAX,
            _ if self.lapsed => Nanos::MAX,
            State::Blocked => self.deadline,
            State::Runnable => self.urgent.map_or(self.deadline, |u| u.min(self.deadline)),
        }
    }
}

/// The scheduler state for all clients of one CPU.
///
/// Its cost grows with the logarithm of the number of clients, runnable or blocked: the
/// runnable clients with slice left are in the heap `ready` by `(key, index)`, whose head is
/// what [`Atropos::dispatch`] runs; every runnable client is in `runnable_changes` by its next
/// change (the end of its period or the lapse of its urgent key), whose head bounds the
/// dispatch and is [`Atropos::next_event`]; every blocked client whose period has not ended is
/// in `blocked_changes` by its deadline. Replenishment takes from the two change heaps only the
/// clients whose instant has come. The runnable clients with `extra = true` are in the
/// round-robin list `extra_ready`. All of it is sized when a client is added: nothing else
/// allocates (but the trace's records).
#[derive(Clone, Debug, Default)]
pub struct Atropos {
    clients: Vec<Client>,
    /// The dispatched client, its mode and since when it is charged.
    running: Option<(usize, Mode, Nanos)>,
    /// The runnable clients with slice left, by key.
    ready: Heap,
    /// The runnable clients, by [`Client::next_change`].
    runnable_changes: Heap,
    /// The blocked clients whose period has not ended, by deadline.
    blocked_changes: Heap,
    /// The runnable clients that take slack ([`policy::takes_slack`]), in round-robin order
    /// from `slack.at`, whose turn it is.
    extra_ready: Vec<usize>,
    /// The position in `extra_ready` of the client whose extra turn it is, and the extra time
    /// it used in its current turn.
    slack: SlackTurn,
    /// Room for every client: the clients whose instant has come, during a replenishment.
    due: Vec<usize>,
    trace: bool,
    records: Vec<PeriodRecord>,
}

impl Atropos {
    /// A scheduler with no clients.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a runnable client whose first period starts at `now`; returns its index (clients
    /// are numbered in the order they are added). The contract should have passed [`admit`]
    /// together with the others; this does not check it again.
    ///
    /// # Panics
    ///
    /// If memory for the client cannot be allocated (see [`Atropos::try_add`]).
    pub fn add(&mut self, contract: Contract, now: Nanos) -> usize {
        self.try_add(contract, now).expect("memory for a scheduler client")
    }

    /// [`Atropos::add`], or an error, with nothing changed, when the memory the client needs
    /// cannot be allocated. This is the only call that allocates (but the trace's records).
    pub fn try_add(&mut self, contract: Contract, now: Nanos) -> Result<usize, TryReserveError> {
        let n = self.clients.len() + 1;
        self.clients.try_reserve(1)?;
        self.due.try_reserve(n.saturating_sub(self.due.len()))?;
        if takes_slack(&contract) {
            self.extra_ready.try_reserve(n.saturating_sub(self.extra_ready.len()))?;
        }
        self.ready.grow(n)?;
        self.runnable_changes.grow(n)?;
        self.blocked_changes.grow(n)?;
        let mut c = Client {
            contract,
            state: State::Blocked,
            remain: 0,
            start: 0,
            deadline: 0,
            urgent: None,
            lapsed: false,
            period_guaranteed: 0,
            period_extra: 0,
            accounts: Accounts::default(),
            extra_slot: 0,
        };
        c.start_period(now);
        self.clients.push(c);
        let id = n - 1;
        self.make_runnable(id);
        self.relink(id);
        Ok(id)
    }

    /// Starts every client's current period afresh at `now`, with zeroed accounts: for a
    /// kernel that adds its clients one by one while it loads them and starts time for all of
    /// them together.
    pub fn restart(&mut self, now: Nanos) {
        for id in 0..self.clients.len() {
            let c = &mut self.clients[id];
            if c.state != State::Gone {
                c.start_period(now);
                c.accounts = Accounts::default();
                self.relink(id);
            }
        }
        self.running = None;
        self.slack.used = 0;
        self.records.clear();
    }

    /// Client `id`'s contract.
    pub fn contract(&self, id: usize) -> Option<Contract> {
        self.clients.get(id).map(|c| c.contract)
    }

    /// Client `id`'s accounts (up to the last scheduler call).
    pub fn accounts(&self, id: usize) -> Option<Accounts> {
        self.clients.get(id).map(|c| c.accounts)
    }

    /// Client `id`'s accounts and the start of its current period, by reference (what a kernel
    /// publishes to the client on every switch).
    #[inline]
    pub fn view(&self, id: usize) -> Option<(&Accounts, Nanos)> {
        self.clients.get(id).map(|c| (&c.accounts, c.start))
    }

    /// The start of client `id`'s current period.
    pub fn period_start(&self, id: usize) -> Option<Nanos> {
        self.clients.get(id).map(|c| c.start)
    }

    /// The guaranteed time client `id` has left in its current period, as of the last call
    /// (time since is charged at the next): what a non-preemptible user (a disk request) checks
    /// right after [`Atropos::dispatch`] before it starts, so as not to overrun the slice.
    pub fn remaining(&self, id: usize) -> Option<Nanos> {
        self.clients.get(id).map(|c| c.remain)
    }

    /// The dispatched client and its mode, if any.
    pub fn running(&self) -> Option<(usize, Mode)> {
        self.running.map(|(id, mode, _)| (id, mode))
    }

    /// Turns the per-period trace on or off.
    pub fn set_trace(&mut self, on: bool) {
        self.trace = on;
    }

    /// Is the per-period trace on?
    pub fn tracing(&self) -> bool {
        self.trace
    }

    /// The periods completed since the last call (only while the trace is on).
    pub fn take_records(&mut self) -> Vec<PeriodRecord> {
        core::mem::take(&mut self.records)
    }

    /// Makes blocked client `id` runnable, in the extra queue if it takes slack (the caller
    /// then puts it in its heaps with [`Atropos::relink`]).
    fn make_runnable(&mut self, id: usize) {
        let c = &mut self.clients[id];
        c.state = State::Runnable;
        if takes_slack(&c.contract) {
            c.extra_slot = self.extra_ready.len();
            self.extra_ready.push(id);
        }
    }

    /// Takes runnable client `id` out of the ready heaps and the extra queue; it becomes `to`.
    fn make_unrunnable(&mut self, id: usize, to: State) {
        if takes_slack(&self.clients[id].contract) {
            let at = self.clients[id].extra_slot;
            if at == self.slack.at {
                self.slack.used = 0;
            }
            // The last in line takes its place (the order of a round robin does not matter,
            // only that every turn comes); the turn stays with its client, or passes on.
            let last = self.extra_ready.len() - 1;
            self.extra_ready.swap_remove(at);
            if let Some(&moved) = self.extra_ready.get(at) {
                self.clients[moved].extra_slot = at;
            }
            if self.slack.at == last && at != last {
                self.slack.at = at;
            }
            if self.slack.at >= self.extra_ready.len() {
                self.slack.at = 0;
            }
        }
        let c = &mut self.clients[id];
        c.state = to;
        c.urgent = None;
        // A runnable client is in `ready` only with slice left, and never blocked past its
        // period: what `relink` would do, without its checks (this is every block's path).
        if c.remain > 0 {
            self.ready.remove(id);
        }
        self.runnable_changes.remove(id);
        if to == State::Blocked {
            self.blocked_changes.set(id, c.deadline);
        }
        self.stop_if_running(id);
    }

    /// Puts client `id` in the heaps its state calls for, at its current instants, and takes
    /// it out of the others.
    #[inline]
    fn relink(&mut self, id: usize) {
        let c = &self.clients[id];
        match c.state {
            State::Runnable => {
                if c.remain > 0 {
                    self.ready.set(id, c.key());
                } else {
                    self.ready.remove(id);
                }
                self.runnable_changes.set(id, c.next_change());
                self.blocked_changes.remove(id);
            }
            State::Blocked => {
                self.ready.remove(id);
                self.runnable_changes.remove(id);
                if c.lapsed {
                    self.blocked_changes.remove(id);
                } else {
                    self.blocked_changes.set(id, c.deadline);
                }
            }
            State::Gone => {
                self.ready.remove(id);
                self.runnable_changes.remove(id);
                self.blocked_changes.remove(id);
            }
        }
    }

    /// Charges the time since the last call to the dispatched client.
    fn charge(&mut self, now: Nanos) {
        let Some((id, mode, since)) = self.running else { return };
        let used = now.saturating_sub(since);
        let c = &mut self.clients[id];
        match mode {
            Mode::Guaranteed => {
                c.remain = c.remain.saturating_sub(used);
                c.accounts.guaranteed += used;
                c.period_guaranteed += used;
                if c.remain == 0 {
                    self.ready.remove(id);
                }
            }
            Mode::Extra => {
                c.accounts.extra += used;
                c.period_extra += used;
                self.slack.used += used;
            }
        }
        self.running = Some((id, mode, now));
    }

    /// Ends the periods that are over at `now` (a pass over the clients whose instant has
    /// come, only when one has).
    #[inline]
    fn replenish(&mut self, now: Nanos) {
        if now >= self.runnable_changes.first_instant()
            || now >= self.blocked_changes.first_instant()
        {
            self.replenish_pass(now);
        }
    }

    /// The pass of [`Atropos::replenish`], kept out of line so that the common case costs two
    /// comparisons. The clients whose instant has come are handled in the order of their
    /// index, so the trace's records come in that order.
    #[inline(never)]
    fn replenish_pass(&mut self, now: Nanos) {
        self.due.clear();
        while let Some(id) = self.runnable_changes.pop_due(now) {
            self.due.push(id);
        }
        while let Some(id) = self.blocked_changes.pop_due(now) {
            self.due.push(id);
        }
        self.due.sort_unstable();
        for i in 0..self.due.len() {
            let id = self.due[i];
            let c = &mut self.clients[id];
            if c.urgent.is_some_and(|u| u <= now) {
                c.urgent = None;
            }
            while c.deadline <= now {
                let missed = c.state == State::Runnable && c.remain > 0;
                c.accounts.periods += 1;
                if missed {
                    c.accounts.deadlines_missed += 1;
                }
                if c.state == State::Runnable && now - c.deadline > c.contract.slice {
                    c.accounts.late_ends += 1;
                }
                if self.trace {
                    self.records.push(PeriodRecord {
                        client: id,
                        start: c.start,
                        end: c.deadline,
                        guaranteed: c.period_guaranteed,
                        extra: c.period_extra,
                        missed,
                    });
                }
                if c.state == State::Blocked {
                    // The next period starts when it wakes.
                    c.lapsed = true;
                    c.period_guaranteed = 0;
                    c.period_extra = 0;
                    break;
                }
                let next = c.deadline;
                c.start_period(next);
            }
            self.relink(id);
        }
    }

    /// Brings the state up to `now`: charges the running client, ends finished periods.
    #[inline]
    fn advance(&mut self, now: Nanos) {
        self.charge(now);
        self.replenish(now);
    }

    /// Stops charging `id` if it is the dispatched client.
    fn stop_if_running(&mut self, id: usize) {
        if self.running.is_some_and(|(r, _, _)| r == id) {
            self.running = None;
        }
    }

    /// Client `id` blocks at `now` (it keeps its slice).
    pub fn block(&mut self, id: usize, now: Nanos) {
        self.advance(now);
        if self.clients.get(id).is_some_and(|c| c.state == State::Runnable) {
            self.make_unrunnable(id, State::Blocked);
        }
    }

    /// Client `id` is woken at `now` (no effect unless it is blocked). Returns whether the
    /// wake-up should preempt the dispatched client: the woken one has slice left and an
    /// earlier key, or nothing guaranteed is running.
    pub fn wake(&mut self, id: usize, now: Nanos) -> bool {
        self.advance(now);
        if self.clients.get(id).is_none_or(|c| c.state != State::Blocked) {
            return false;
        }
        self.make_runnable(id);
        let c = &mut self.clients[id];
        c.accounts.wakeups += 1;
        if c.lapsed {
            c.start_period(now);
        }
        // What `relink` would do, without its checks (this is every wake-up's path).
        self.blocked_changes.remove(id);
        if c.remain == 0 {
            self.runnable_changes.set(id, c.next_change());
            return self.running.is_none();
        }
        c.urgent = Some(now.saturating_add(c.contract.latency));
        let key = c.key();
        self.ready.set(id, key);
        self.runnable_changes.set(id, key);
        match self.running {
            Some((r, Mode::Guaranteed, _)) => key < self.clients[r].key(),
            _ => true,
        }
    }

    /// Charges the dispatched client the time until `now` (none if that is earlier than the
    /// last call) and stops: nothing is charged to anyone until the next [`Atropos::dispatch`].
    /// For a user that knows when its client stopped using the resource and is only told later
    /// (a disk's completion, noticed late), so that the wait is charged to no one.
    pub fn stop(&mut self, now: Nanos) {
        self.advance(now);
        self.running = None;
    }

    /// Client `id` gives up the rest of its slice for this period (and of its extra turn).
    pub fn yield_now(&mut self, id: usize, now: Nanos) {
        self.advance(now);
        let Some(c) = self.clients.get_mut(id) else { return };
        // Only the slice and the urgent key change: its queues only if they were not already
        // spent (a client yielding on slack time, the common case, touches none).
        let moved = c.remain > 0 || c.urgent.is_some();
        c.remain = 0;
        c.urgent = None;
        if self.extra_ready.get(self.slack.at) == Some(&id) {
            self.slack.pass(self.extra_ready.len());
        }
        if moved {
            self.relink(id);
        }
        self.stop_if_running(id);
    }

    /// Client `id` is gone for good (it exited or was terminated).
    pub fn remove(&mut self, id: usize, now: Nanos) {
        self.advance(now);
        match self.clients.get(id).map(|c| c.state) {
            Some(State::Runnable) => self.make_unrunnable(id, State::Gone),
            Some(State::Blocked) => {
                self.clients[id].state = State::Gone;
                self.relink(id);
            }
            _ => {}
        }
    }

    /// Charges the interval `from..to` of kernel work done for client `id` (its timer, its
    /// wake-up, the end of its period, its teardown) to `id` instead of to the dispatched
    /// client: the dispatched client is charged up to `from` (and periods that ended by then
    /// are ended), `id` pays `to - from` out of its slice while any is left and as extra time
    /// beyond it, and the dispatched client's charge resumes at `to`, so it pays nothing of the
    /// interval. Time the dispatched client was charged already is not charged again (`from`
    /// counts from its last charge at the earliest). If `id` is the dispatched client it is
    /// charged as usual; a gone or unknown `id` pays nothing, and the dispatched client still
    /// does not. Moves `id` in its queues only when its slice runs out.
    pub fn charge_to(&mut self, id: usize, from: Nanos, to: Nanos) {
        let from = match self.running {
            Some((_, _, since)) => from.max(since),
            None => from,
        };
        if to <= from {
            return;
        }
        self.advance(from);
        if self.running.is_some_and(|(r, _, _)| r == id) {
            self.charge(to);
            return;
        }
        if let Some(c) = self.clients.get_mut(id).filter(|c| c.state != State::Gone) {
            let used = to - from;
            let guaranteed = used.min(c.remain);
            c.remain -= guaranteed;
            c.accounts.guaranteed += guaranteed;
            c.period_guaranteed += guaranteed;
            c.accounts.extra += used - guaranteed;
            c.period_extra += used - guaranteed;
            if guaranteed > 0 && c.remain == 0 {
                self.relink(id);
            }
        }
        if let Some((r, mode, _)) = self.running {
            self.running = Some((r, mode, to));
        }
    }

    /// Decides what runs from `now`: charges the time since the last call, ends finished
    /// periods, and picks by the rules in the crate documentation. `None` means nothing is
    /// runnable now; then [`Atropos::next_event`] says when that may change by itself.
    pub fn dispatch(&mut self, now: Nanos) -> Option<Dispatch> {
        self.advance(now);
        self.running = None;
        let guaranteed = self.ready.first();
        let change = self.runnable_changes.first_instant();
        let (client, mode, budget) = match guaranteed {
            Some((_, id)) => (id, Mode::Guaranteed, self.clients[id].remain),
            None => {
                // ANCHOR: slack_dispatch
                let (id, budget) = self.slack.pick(&self.extra_ready)?;
                // ANCHOR_END: slack_dispatch
                (id, Mode::Extra, budget)
            }
        };
        let until = change.min(now.saturating_add(budget)).max(now + 1);
        self.running = Some((client, mode, now));
        Some(Dispatch { client, mode, until })
    }

    /// When nothing is runnable: the next instant at which a period ends for a runnable
    /// client (with its slice used up), after which [`Atropos::dispatch`] may find work.
    pub fn next_event(&self) -> Option<Nanos> {
        self.runnable_changes.first().map(|(instant, _)| instant)
    }
}

#[cfg(test)]
mod tests;

/// The graded tests of the lab `edf` (`labs/edf/lab.toml`, docs/labs/edf.md).
#[cfg(test)]
#[path = "lab_edf_tests.rs"]
mod lab_edf;
