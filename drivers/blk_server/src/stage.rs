//! The scheduling stage of the block server: the disk scheduler, the requests it holds, the
//! one request at the device, and the disk model that times it.
//!
//! Flushes do not go through the scheduler: they wait in the server's queue for the device to
//! be idle, and go before the next scheduled request.
//!
//! A Read or Write the server validated is given a token (its place in a fixed table of
//! [`Stage::new`]'s `capacity`) and handed to the scheduler as a [`sched::Pending`]. When the
//! scheduler dispatches one, the server submits it to the device and the stage notes when it
//! was started; with a model, it also asks the model when the request completes
//! ([`DiskModel::service`]). The device's completion is kept until then. So the disk's timing
//! is the model's whatever the device's own, and the scheduler sees the model's service time;
//! without a model it sees the device's.
//!
//! The stage keeps what a study of the scheduler needs: how many requests it scheduled, and
//! the time spent in the scheduler's calls by the clock it is given, best a raw counter that
//! costs an instruction to read (on a QEMU run under `-icount shift=0`, one nanosecond is one
//! instruction).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use atropos::{Accounts, PeriodRecord};

use crate::{BlockDevice, ClientId, Pending, Server};
use blk_interface::device::{DeviceError, DeviceOp, DeviceRequest, Tag};
use blk_interface::protocol::{BlkError, Response};
use disk_model::{DiskModel, ModelOp};
use disk_sched::{self as sched, Decision, Scheduler, WaitTrace};

/// The request at the device.
#[derive(Clone, Copy, Debug)]
struct AtDevice {
    /// As the scheduler knows it.
    r: sched::Pending,
    /// Whom it answers.
    owner: Pending,
    /// The device's tag.
    tag: Tag,
    /// When it was dispatched.
    start_ns: u64,
    /// When the model completes it, if the disk has a model.
    end_ns: Option<u64>,
    /// The device's outcome, once it has completed.
    result: Option<Result<(), DeviceError>>,
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

/// The scheduling stage; see the [module](self).
pub struct Stage {
    scheduler: Box<dyn Scheduler>,
    model: Option<DiskModel>,
    /// By token: the request the scheduler holds, and whom it answers.
    waiting: Vec<Option<(Pending, DeviceRequest)>>,
    at_device: Option<AtDevice>,
    /// Until when the scheduler waits (anticipating, or for a stream's next period).
    wake_ns: Option<u64>,
    /// Whether anything the scheduler decides on changed (an arrival, a completion) since it
    /// was last asked: if not, its answer holds until `wake_ns`.
    changed: bool,
    clock: Option<fn() -> u64>,
    stats: StageStats,
}

impl core::fmt::Debug for Stage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Stage")
            .field("model", &self.model.is_some())
            .field("at_device", &self.at_device)
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
        Stage {
            scheduler,
            model,
            waiting: vec![None; capacity.max(1)],
            at_device: None,
            wake_ns: None,
            changed: false,
            clock,
            stats: StageStats::default(),
        }
    }

    /// What the stage did so far.
    pub fn stats(&self) -> StageStats {
        self.stats
    }

    /// The disk model, if the disk has one.
    pub fn model(&self) -> Option<&DiskModel> {
        self.model.as_ref()
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

    /// Whether the device has the scheduled request and has not completed it.
    pub fn device_waiting(&self) -> bool {
        self.at_device.is_some_and(|a| a.result.is_none())
    }

    /// When the stage next has something to do by itself: the model's completion of the
    /// request at the device, or the end of the scheduler's wait.
    pub fn next_event_ns(&self) -> Option<u64> {
        let done = self.at_device.and_then(|a| a.end_ns);
        match (done, self.wake_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
    fn arrive(
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
        self.stats.scheduled += 1;
        self.changed = true;
        true
    }

    /// The request the scheduler dispatches at `now_ns`, if it does (with nothing at the
    /// device); notes its wait otherwise.
    fn next(&mut self, now_ns: u64) -> Option<(sched::Pending, Pending, DeviceRequest)> {
        if self.at_device.is_some() {
            return None;
        }
        // Nothing changed and the wait (or idleness) is not over: the same answer.
        if !self.changed && self.wake_ns.is_none_or(|w| now_ns < w) {
            return None;
        }
        self.changed = false;
        self.wake_ns = None;
        match self.timed(|s| s.next(now_ns)) {
            Decision::Dispatch(r) => {
                let (owner, dreq) = self.waiting.get_mut(r.id as usize)?.take()?;
                Some((r, owner, dreq))
            }
            Decision::Wait { until_ns } => {
                self.wake_ns = Some(until_ns);
                None
            }
            Decision::Hold | Decision::Idle => None,
        }
    }

    /// `r` went to the device under `tag` at `now_ns`.
    fn started(&mut self, r: sched::Pending, owner: Pending, tag: Tag, now_ns: u64) {
        let end_ns = self.model.as_mut().map(|m| {
            let op = if r.read { ModelOp::Read } else { ModelOp::Write };
            m.service(now_ns, op, r.lbn, r.sectors).end_ns
        });
        self.at_device = Some(AtDevice { r, owner, tag, start_ns: now_ns, end_ns, result: None });
        self.stats.dispatched += 1;
    }

    /// `r` was dispatched but never reached the disk (its client is gone, or the device
    /// refused it): the scheduler is told it completed at once.
    fn dropped(&mut self, r: sched::Pending, now_ns: u64) {
        self.timed(|s| s.complete(&r, 0, now_ns));
        self.changed = true;
    }

    /// The device completed `tag` with `result`: true if it is the scheduled request (kept
    /// until the model completes it).
    pub(crate) fn device_done(&mut self, tag: Tag, result: Result<(), DeviceError>) -> bool {
        match &mut self.at_device {
            Some(a) if a.tag == tag && a.result.is_none() => {
                a.result = Some(result);
                true
            }
            _ => false,
        }
    }

    /// The scheduled request, if it is complete for its client at `now_ns`: the device has
    /// finished it and the model's time has come.
    fn take_done(&mut self, now_ns: u64) -> Option<(Pending, Tag, Result<(), DeviceError>)> {
        let a = self.at_device?;
        let result = a.result?;
        if a.end_ns.is_some_and(|end| now_ns < end) {
            return None;
        }
        self.at_device = None;
        let service = a.end_ns.map_or(now_ns, |end| end).saturating_sub(a.start_ns);
        let done_at = a.end_ns.unwrap_or(now_ns);
        self.timed(|s| s.complete(&a.r, service, done_at));
        self.changed = true;
        Some((a.owner, a.tag, result))
    }
}

impl<D: BlockDevice> Server<D> {
    /// Hands a validated Read or Write to the scheduler; the response to send at once if it
    /// cannot take it.
    pub(crate) fn schedule(&mut self, owner: Pending, dreq: DeviceRequest) -> Option<Response> {
        let (now, ss) = (self.now_ns, self.device.sector_size());
        let stage = self.stage.as_mut()?;
        if !stage.arrive(owner, dreq, ss, now) {
            return Some(Response::plain(owner.id, Err(BlkError::Busy)));
        }
        self.stats.queued += 1;
        self.clients[owner.client].in_flight += 1;
        self.pump_scheduled();
        None
    }

    /// Asks the scheduler what the disk does next while nothing is at the device, submitting
    /// what it dispatches.
    pub(crate) fn pump_scheduled(&mut self) {
        if self.stage.is_none() {
            return;
        }
        let now = self.now_ns;
        // Each pass dispatches (and stops) or drops a request, so it ends.
        loop {
            // Flushes, which devices take only when idle, go first; a scheduled request goes
            // only to an idle device.
            self.pump();
            if !self.queue.is_empty() || self.device_busy > 0 {
                return;
            }
            let Some(stage) = self.stage.as_mut() else { return };
            let Some((r, owner, dreq)) = stage.next(now) else { return };
            if self.clients[owner.client].generation != owner.generation {
                stage.dropped(r, now);
                self.stats.dropped += 1;
                continue;
            }
            match self.device.submit(dreq) {
                Ok(tag) if self.record(tag, owner) => {
                    if let Some(stage) = self.stage.as_mut() {
                        stage.started(r, owner, tag, now);
                    }
                    return;
                }
                _ => {
                    if let Some(stage) = self.stage.as_mut() {
                        stage.dropped(r, now);
                    }
                    self.clients[owner.client].in_flight -= 1;
                    let response = Response::plain(owner.id, Err(BlkError::Device));
                    self.outbox.push_back((owner.client, response));
                }
            }
        }
    }

    /// The scheduled request's response, once it is complete for its client; the next one is
    /// dispatched.
    pub(crate) fn finish_scheduled(&mut self) -> Option<(ClientId, Response)> {
        loop {
            let now = self.now_ns;
            let (owner, tag, result) = self.stage.as_mut()?.take_done(now)?;
            if self.tags.get_mut(usize::from(tag.0)).and_then(Option::take).is_some() {
                self.device_busy -= 1;
            }
            let answer = self.answer(owner, result);
            self.pump_scheduled();
            if let Some(response) = answer {
                return Some((owner.client, response));
            }
        }
    }

    /// When the server next has something to do by itself (see [`Stage::next_event_ns`]).
    pub fn next_event_ns(&self) -> Option<u64> {
        self.stage.as_ref()?.next_event_ns()
    }

    /// Whether the device has a scheduled request whose completion the disk model times.
    pub fn device_waiting(&self) -> bool {
        self.stage.as_ref().is_some_and(|s| s.model.is_some() && s.device_waiting())
    }
}
