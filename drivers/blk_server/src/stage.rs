//! The dispatch stage of the block server: the disk scheduler, the requests it holds, and the
//! disk model that times the requests it dispatches.
//!
//! Every Read and Write the server validated is given a token (its place in a fixed table of
//! [`Stage::new`]'s `capacity`) and handed to the scheduler as a [`sched::Pending`]; so is every
//! flush when the scheduler serves in arrival order ([`Scheduler::in_order`]; one that
//! reorders has flushes go first, around it, through the server's ready queue). When the
//! scheduler dispatches one, the server submits it to the device and the stage notes when it
//! was started; with a model, it also asks the model when the request completes
//! ([`DiskModel::service`]), and the server keeps the device's completion until then. So the
//! disk's timing is the model's whatever the device's own, and the scheduler sees the model's
//! service time; without a model it sees the device's. A model times one request at a time,
//! so a stage with a model lets one request at the device ([`Stage::at_once`]).
//!
//! The server without a scheduler named runs [`FcfsQueue`]: arrival order, as many requests
//! at the device as it holds, no clock.
//!
//! The stage keeps what a study of the scheduler needs: how many requests it scheduled, and
//! the time spent in the scheduler's calls by the clock it is given, best a raw counter that
//! costs an instruction to read (on a QEMU run under `-icount shift=0`, one nanosecond is one
//! instruction).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use atropos::{Accounts, PeriodRecord};

use crate::{ClientId, Pending};
use blk_interface::device::{DeviceOp, DeviceRequest};
use disk_model::{DiskModel, ModelOp};
use disk_sched::{self as sched, Decision, FcfsQueue, Scheduler, WaitTrace};

/// A dispatched request at the device, as the stage knows it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dispatched {
    /// As the scheduler knows it.
    r: sched::Pending,
    /// When it was dispatched.
    start_ns: u64,
    /// When the model completes it, if the disk has a model.
    pub(crate) end_ns: Option<u64>,
}

impl Dispatched {
    /// As the scheduler knows it.
    pub(crate) fn r(&self) -> sched::Pending {
        self.r
    }
}

/// A request the disk served, from its arrival to its completion for its client, kept while
/// the stage traces ([`Stage::set_tracing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// As the scheduler knew it: its client, sectors, direction and arrival.
    pub r: sched::Pending,
    /// When it went to the device.
    pub dispatched_ns: u64,
    /// When it completed for its client (the model's time, if the disk has a model).
    pub done_ns: u64,
}

/// What the stage did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageStats {
    /// Requests the scheduler took.
    pub scheduled: u64,
    /// Requests dispatched to the device.
    pub dispatched: u64,
    /// Time spent in the scheduler's calls, in the units of the stage's clock (0 without one).
    pub scheduler_time: u64,
    /// Scheduler calls timed.
    pub scheduler_calls: u64,
}

/// The dispatch stage; see the [module](self).
pub struct Stage {
    scheduler: Box<dyn Scheduler>,
    model: Option<DiskModel>,
    /// How many of its requests the device may hold at once: the scheduler's
    /// ([`Scheduler::at_once`]), one with a model; asked once, as it never changes.
    at_once: usize,
    /// Whether the scheduler serves in arrival order ([`Scheduler::in_order`]); asked once.
    in_order: bool,
    /// By token: the request the scheduler holds, and whom it answers.
    waiting: Vec<Option<(Pending, DeviceRequest)>>,
    /// How many tokens are taken.
    held: usize,
    /// Until when the scheduler waits (anticipating, or for a stream's next period).
    wake_ns: Option<u64>,
    /// Whether anything the scheduler decides on changed (an arrival, a dispatch, a
    /// completion) since it was last asked: if not, its answer holds until `wake_ns`.
    changed: bool,
    clock: Option<fn() -> u64>,
    stats: StageStats,
    /// While tracing: the requests completed since they were last taken.
    traced: Option<Vec<RequestRecord>>,
}

impl core::fmt::Debug for Stage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Stage")
            .field("model", &self.model.is_some())
            .field("held", &self.held)
            .field("wake_ns", &self.wake_ns)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Stage {
    /// A stage over `scheduler`, timing the disk by `model` if given, holding at most
    /// `capacity` requests; `clock` (if given, in any unit) times the scheduler's calls.
    pub fn new(
        scheduler: Box<dyn Scheduler>,
        model: Option<DiskModel>,
        capacity: usize,
        clock: Option<fn() -> u64>,
    ) -> Stage {
        let at_once = if model.is_some() { 1 } else { scheduler.at_once() };
        let in_order = scheduler.in_order();
        Stage {
            scheduler,
            model,
            at_once,
            in_order,
            waiting: vec![None; capacity.max(1)],
            held: 0,
            wake_ns: None,
            changed: false,
            clock,
            stats: StageStats::default(),
            traced: None,
        }
    }

    /// Keeps a [`RequestRecord`] of every request completed from now on (`on`), or none.
    pub fn set_tracing(&mut self, on: bool) {
        self.traced = on.then(Vec::new);
    }

    /// The requests completed since the last call, while tracing.
    pub fn take_requests(&mut self) -> Vec<RequestRecord> {
        self.traced.as_mut().map(core::mem::take).unwrap_or_default()
    }

    /// First come, first served, as many at the device as it holds, for at most `capacity`
    /// waiting requests: the stage of a server with no scheduler named and no disk model.
    pub fn fcfs(capacity: usize) -> Stage {
        Stage::new(Box::new(FcfsQueue::new(capacity)), None, capacity, None)
    }

    /// What the stage did so far.
    pub fn stats(&self) -> StageStats {
        self.stats
    }

    /// The disk model, if the disk has one.
    pub fn model(&self) -> Option<&DiskModel> {
        self.model.as_ref()
    }

    /// Whether the stage decides by the clock (a scheduler that reorders or waits, or a disk
    /// model): then the app tells the server the time (`Server::set_now`), and the stage has
    /// waits, periods and a cost to report.
    #[inline]
    pub fn keeps_time(&self) -> bool {
        self.model.is_some() || !self.in_order
    }

    /// How many of its requests the device may hold at once: the scheduler's, and one with a
    /// model.
    #[inline]
    pub fn at_once(&self) -> usize {
        self.at_once
    }

    /// Whether flushes go through the scheduler (in their place among the other requests).
    #[inline]
    pub(crate) fn takes_flushes(&self) -> bool {
        self.in_order
    }

    /// How many requests the scheduler holds.
    pub fn held(&self) -> usize {
        self.held
    }

    /// The scheduler's waits, if it anticipates.
    pub fn trace(&self) -> Option<&WaitTrace> {
        self.scheduler.trace()
    }

    /// The streams' periods completed since the last call (USD).
    pub fn take_periods(&mut self) -> Vec<PeriodRecord> {
        self.scheduler.take_periods()
    }

    /// Client `c`'s disk-time accounts (USD).
    pub fn accounts(&self, c: ClientId) -> Option<Accounts> {
        self.scheduler.accounts(c)
    }

    /// When the scheduler's wait ends, if it waits.
    pub(crate) fn wake_ns(&self) -> Option<u64> {
        self.wake_ns
    }

    /// Runs `f` on the scheduler, timing it by the clock.
    fn timed<T>(&mut self, f: impl FnOnce(&mut dyn Scheduler) -> T) -> T {
        let Some(clock) = self.clock else { return f(&mut *self.scheduler) };
        let t0 = clock();
        let out = f(&mut *self.scheduler);
        self.stats.scheduler_time += clock().saturating_sub(t0);
        self.stats.scheduler_calls += 1;
        out
    }

    /// Takes `dreq` for `owner` at `now_ns`, its sectors `sector_size` bytes each; false if
    /// the stage or the client's share of the scheduler is full.
    #[inline]
    pub(crate) fn arrive(
        &mut self,
        owner: Pending,
        dreq: DeviceRequest,
        sector_size: u32,
        now_ns: u64,
    ) -> bool {
        let Some(token) = self.waiting.iter().position(Option::is_none) else { return false };
        let r = sched::Pending {
            id: token as u64,
            client: owner.client,
            lbn: dreq.sector,
            sectors: dreq.buffer.len / sector_size.max(1),
            read: dreq.op == DeviceOp::Read,
            arrival_ns: now_ns,
        };
        if self.timed(|s| s.arrive(r, now_ns)).is_err() {
            return false;
        }
        self.waiting[token] = Some((owner, dreq));
        self.held += 1;
        self.stats.scheduled += 1;
        self.changed = true;
        true
    }

    /// Forgets what the scheduler holds of `client`'s, if it can (see [`Scheduler::cancel`]).
    /// Each request forgotten goes to `forgotten`.
    pub(crate) fn cancel(&mut self, client: ClientId, forgotten: &mut dyn FnMut(Pending)) {
        let (waiting, held) = (&mut self.waiting, &mut self.held);
        self.scheduler.cancel(client, &mut |id| {
            if let Some((p, _)) = waiting.get_mut(id as usize).and_then(Option::take) {
                *held -= 1;
                forgotten(p);
            }
        });
    }

    /// Whether the scheduler may dispatch at `now_ns`: one that serves in arrival order when
    /// it holds a request; another when anything it decides on changed since it was last
    /// asked, or its wait is over (else it would give the same answer).
    #[inline]
    pub(crate) fn may_dispatch(&self, now_ns: u64) -> bool {
        if self.in_order {
            self.held > 0
        } else {
            self.changed || self.wake_ns.is_some_and(|w| now_ns >= w)
        }
    }

    /// The request the scheduler dispatches at `now_ns`, if it does; notes its wait
    /// otherwise. Asked only while the device has room.
    #[inline]
    pub(crate) fn next(&mut self, now_ns: u64) -> Option<(sched::Pending, Pending, DeviceRequest)> {
        if !self.may_dispatch(now_ns) {
            return None;
        }
        self.changed = false;
        self.wake_ns = None;
        match self.timed(|s| s.next(now_ns)) {
            Decision::Dispatch(r) => {
                let (owner, dreq) = self.waiting.get_mut(r.id as usize)?.take()?;
                self.held -= 1;
                // A scheduler that lets several at the device may dispatch again at once.
                self.changed = true;
                Some((r, owner, dreq))
            }
            Decision::Wait { until_ns } => {
                self.wake_ns = Some(until_ns);
                None
            }
            Decision::Hold | Decision::Idle => None,
        }
    }

    /// `r` went to the device at `now_ns`.
    #[inline]
    pub(crate) fn started(&mut self, r: sched::Pending, now_ns: u64) -> Dispatched {
        let end_ns = self.model.as_mut().map(|m| {
            let op = if r.read { ModelOp::Read } else { ModelOp::Write };
            m.service(now_ns, op, r.lbn, r.sectors).end_ns
        });
        self.stats.dispatched += 1;
        Dispatched { r, start_ns: now_ns, end_ns }
    }

    /// `r` was dispatched but never reached the disk (its client is gone, or the device
    /// refused it): the scheduler is told it completed at once.
    pub(crate) fn dropped(&mut self, r: sched::Pending, now_ns: u64) {
        self.timed(|s| s.complete(&r, 0, now_ns));
        self.changed = true;
    }

    /// `d` is complete for its client at `now_ns` (the device has finished it, and the
    /// model's time, if any, has come): the scheduler is told.
    #[inline]
    pub(crate) fn completed(&mut self, d: Dispatched, now_ns: u64) {
        let service = d.end_ns.map_or(now_ns, |end| end).saturating_sub(d.start_ns);
        let done_at = d.end_ns.unwrap_or(now_ns);
        self.timed(|s| s.complete(&d.r, service, done_at));
        self.changed = true;
        if let Some(t) = &mut self.traced {
            t.push(RequestRecord { r: d.r, dispatched_ns: d.start_ns, done_ns: done_at });
        }
    }
}
