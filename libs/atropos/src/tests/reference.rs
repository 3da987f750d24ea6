//! The scheduler as it was before its queues: every dispatch and replenishment a pass over the
//! clients. Kept, unchanged but for its name and the later [`Reference::charge_to`], as the
//! reference the queued [`crate::Atropos`] must agree with on random workloads
//! (`super::random`).

use std::vec::Vec;

use crate::{Accounts, Contract, Dispatch, EXTRA_QUANTUM, Mode, Nanos, PeriodRecord};

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
    /// Its position in [`Reference::ready`] while it is runnable.
    slot: usize,
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
/// Its cost does not grow with the number of blocked clients: the runnable ones are kept in
/// `ready` (what [`Reference::dispatch`] looks at), the runnable ones with
/// `extra = true` in the round-robin queue `extra_ready`, and every client is
/// visited only when one of their periods may have ended (`next_change`).
#[derive(Clone, Debug, Default)]
pub struct Reference {
    clients: Vec<Client>,
    /// The dispatched client, its mode and since when it is charged.
    running: Option<(usize, Mode, Nanos)>,
    /// The runnable clients, in no particular order.
    ready: Vec<usize>,
    /// The runnable clients with `extra = true`, in round-robin order from `turn`, whose turn
    /// it is.
    extra_ready: Vec<usize>,
    /// The position in `extra_ready` of the client whose extra turn it is.
    turn: usize,
    /// Extra time the client whose turn it is used in its current turn.
    turn_used: Nanos,
    /// No client's period ends and no urgent key lapses before this instant (a lower bound,
    /// exact after each pass over the clients).
    next_change: Nanos,
    trace: bool,
    records: Vec<PeriodRecord>,
}

impl Reference {
    /// A scheduler with no clients.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a runnable client whose first period starts at `now`; returns its index (clients
    /// are numbered in the order they are added). The contract should have passed [`crate::admit`]
    /// together with the others; this does not check it again.
    pub fn add(&mut self, contract: Contract, now: Nanos) -> usize {
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
            slot: 0,
        };
        c.start_period(now);
        self.clients.push(c);
        let id = self.clients.len() - 1;
        self.make_runnable(id);
        self.next_change = self.next_change.min(self.clients[id].next_change());
        id
    }

    /// Starts every client's current period afresh at `now`, with zeroed accounts: for a
    /// kernel that adds its clients one by one while it loads them and starts time for all of
    /// them together.
    pub fn restart(&mut self, now: Nanos) {
        for c in self.clients.iter_mut().filter(|c| c.state != State::Gone) {
            c.start_period(now);
            c.accounts = Accounts::default();
        }
        self.running = None;
        self.turn_used = 0;
        self.records.clear();
        self.next_change = self.earliest_change();
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
    /// right after [`Reference::dispatch`] before it starts, so as not to overrun the slice.
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

    /// Puts blocked client `id` in the ready set (and the extra queue if it takes slack).
    fn make_runnable(&mut self, id: usize) {
        let c = &mut self.clients[id];
        c.state = State::Runnable;
        c.slot = self.ready.len();
        self.ready.push(id);
        if c.contract.extra {
            self.extra_ready.push(id);
        }
    }

    /// Takes runnable client `id` out of the ready set and the extra queue; it becomes `to`.
    fn make_unrunnable(&mut self, id: usize, to: State) {
        let slot = self.clients[id].slot;
        self.ready.swap_remove(slot);
        if let Some(&moved) = self.ready.get(slot) {
            self.clients[moved].slot = slot;
        }
        if self.clients[id].contract.extra
            && let Some(at) = self.extra_ready.iter().position(|&e| e == id)
        {
            if at == self.turn {
                self.turn_used = 0;
            }
            // The last in line takes its place (the order of a round robin does not matter,
            // only that every turn comes); the turn stays with its client, or passes on.
            let last = self.extra_ready.len() - 1;
            self.extra_ready.swap_remove(at);
            if self.turn == last && at != last {
                self.turn = at;
            }
            if self.turn >= self.extra_ready.len() {
                self.turn = 0;
            }
        }
        let c = &mut self.clients[id];
        c.state = to;
        c.urgent = None;
        self.stop_if_running(id);
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
            }
            Mode::Extra => {
                c.accounts.extra += used;
                c.period_extra += used;
                self.turn_used += used;
            }
        }
        self.running = Some((id, mode, now));
    }

    /// The earliest [`Client::next_change`] of all clients.
    fn earliest_change(&self) -> Nanos {
        self.clients.iter().map(Client::next_change).min().unwrap_or(Nanos::MAX)
    }

    /// Ends the periods that are over at `now` (a pass over the clients only when one may be).
    #[inline]
    fn replenish(&mut self, now: Nanos) {
        if now >= self.next_change {
            self.replenish_pass(now);
        }
    }

    /// The pass of [`Reference::replenish`], kept out of line so that the common case costs a
    /// comparison.
    #[inline(never)]
    fn replenish_pass(&mut self, now: Nanos) {
        for (id, c) in self.clients.iter_mut().enumerate() {
            if c.state == State::Gone || c.lapsed {
                continue;
            }
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
        }
        self.next_change = self.earliest_change();
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

    /// [`crate::Atropos::charge_to`], over the pass-over-all-clients state (added with it).
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
        }
        if let Some((r, mode, _)) = self.running {
            self.running = Some((r, mode, to));
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
        if c.remain == 0 {
            self.next_change = self.next_change.min(c.next_change());
            return self.running.is_none();
        }
        c.urgent = Some(now.saturating_add(c.contract.latency));
        let key = c.key();
        self.next_change = self.next_change.min(c.next_change());
        match self.running {
            Some((r, Mode::Guaranteed, _)) => key < self.clients[r].key(),
            _ => true,
        }
    }

    /// Client `id` gives up the rest of its slice for this period (and of its extra turn).
    pub fn yield_now(&mut self, id: usize, now: Nanos) {
        self.advance(now);
        let Some(c) = self.clients.get_mut(id) else { return };
        c.remain = 0;
        c.urgent = None;
        if self.extra_ready.get(self.turn) == Some(&id) {
            self.end_turn();
        }
        self.stop_if_running(id);
    }

    /// Client `id` is gone for good (it exited or was terminated).
    pub fn remove(&mut self, id: usize, now: Nanos) {
        self.advance(now);
        match self.clients.get(id).map(|c| c.state) {
            Some(State::Runnable) => self.make_unrunnable(id, State::Gone),
            Some(State::Blocked) => self.clients[id].state = State::Gone,
            _ => {}
        }
    }

    /// Decides what runs from `now`: charges the time since the last call, ends finished
    /// periods, and picks by the rules in the crate documentation. `None` means nothing is
    /// runnable now; then [`Reference::next_event`] says when that may change by itself.
    pub fn dispatch(&mut self, now: Nanos) -> Option<Dispatch> {
        self.advance(now);
        self.running = None;
        let mut guaranteed: Option<(Nanos, usize)> = None;
        let mut change = Nanos::MAX;
        for &id in &self.ready {
            let c = &self.clients[id];
            change = change.min(c.next_change());
            if c.remain > 0 && guaranteed.is_none_or(|best| (c.key(), id) < best) {
                guaranteed = Some((c.key(), id));
            }
        }
        let (client, mode, budget) = match guaranteed {
            Some((_, id)) => (id, Mode::Guaranteed, self.clients[id].remain),
            None => {
                let id = self.next_extra()?;
                // Alone on slack time, a turn ends only when something else can run.
                let others = self.extra_ready.len() > 1;
                let budget = if others { EXTRA_QUANTUM - self.turn_used } else { Nanos::MAX };
                (id, Mode::Extra, budget)
            }
        };
        let until = change.min(now.saturating_add(budget)).max(now + 1);
        self.running = Some((client, mode, now));
        Some(Dispatch { client, mode, until })
    }

    /// Ends the extra turn of the head of the queue: it goes to the back.
    fn end_turn(&mut self) {
        self.turn += 1;
        if self.turn >= self.extra_ready.len() {
            self.turn = 0;
        }
        self.turn_used = 0;
    }

    /// The client whose extra turn it is, rotating past a finished turn.
    fn next_extra(&mut self) -> Option<usize> {
        if self.turn_used >= EXTRA_QUANTUM {
            self.end_turn();
        }
        self.extra_ready.get(self.turn).copied()
    }

    /// When nothing is runnable: the next instant at which a period ends for a runnable
    /// client (with its slice used up), after which [`Reference::dispatch`] may find work.
    pub fn next_event(&self) -> Option<Nanos> {
        self.ready.iter().map(|&id| self.clients[id].next_change()).min()
    }
}
