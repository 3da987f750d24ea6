//! Tessera's block server, the driver side of the block protocol (`blk_interface`):
//! sessions, validation, one dispatch route through a disk scheduler to the device's slots,
//! completions routed back to their clients, and the serving loop of a block driver domain
//! ([`serve`]). `no_std` (with `alloc`), no `unsafe` code, no system calls: tested on the host
//! over the in-memory disk of `blk_workloads` and mock channels.
//!
//! The driver app owns the channels and the memory; this is the logic between them. For each
//! client (a small integer, the index of its channel pair) the app takes a range of its own
//! DMA memory, grants the client read-write rights to it, and hands it to [`Server::open`] as
//! a [`DataArea`]. The client's Open message then starts the session and its response carries
//! the area and the disk's geometry. Every later message goes through [`Server::request`],
//! which answers at once (errors, Open, Close) or dispatches it; after the device's interrupt
//! the app calls [`Server::poll`] until it returns `None`, sending each response to its client.
//!
//! # One dispatch route
//! Every validated request goes to the dispatch [`stage`]'s scheduler ([`disk_sched::Scheduler`]),
//! and what it dispatches to the device; a ready queue in front of the device holds flushes
//! around a scheduler that reorders, and a request the device refused as full. The device *has
//! room* while fewer requests are there (or done there and held for the model's time) than the
//! stage lets it have at once ([`stage::Stage::at_once`]); while it has room the ready queue's
//! head is submitted, and when the ready queue is empty the scheduler is asked for the next
//! request, which goes straight to the device, if it may dispatch one (a scheduler that serves
//! in arrival order while it holds a request; another when anything it decides on changed or
//! its wait is over). A request the device refuses as full stays at the ready queue's head
//! until a completion.
//! - Made [`Server::new`], the scheduler is [`disk_sched::FcfsQueue`]: first come, first
//!   served, as many at the device as it holds, flushes in their place, no clock: a queue of
//!   [`Config::queue_len`] in front of the device.
//! - Made [`Server::with_scheduler`], the stage's scheduler is a base policy wrapped in
//!   anticipation, or USD: one request at the device at a time; flushes go around it (in the
//!   ready queue, first when the device is idle); and with a disk model ([`disk_model`]) each
//!   request completes, for its client and the scheduler, only once the model's service time
//!   has passed since it was dispatched, whenever the device itself finished. The app tells the
//!   server the time ([`Server::set_now`]), blocks no later than [`Server::next_event_ns`], and
//!   reads [`Server::device_waiting`] to tell the kernel when the device has a request whose
//!   completion the model times.
//!
//! # Invariants
//! - Bounded: the device's slots, the stage's table, the ready queue and the per-client counts
//!   are sized at creation and never grow; a client has at most
//!   [`Config::max_in_flight_per_client`] requests waiting or at the device (beyond,
//!   [`BlkError::Busy`], as when the scheduler is full).
//! - A request's buffer lies inside its client's data area, its sectors inside the disk, its
//!   length is a positive multiple of the sector size no larger than
//!   [`Config::max_transfer`]: the device never sees anything else.
//! - Every session has a generation, new at every [`Server::open`], [`Server::close`] and
//!   Close message. A completion is delivered only if its session's generation is still the
//!   current one: requests of a closed session are forgotten (dropped from the scheduler and
//!   the ready queue, their device completions discarded), never answered to a later session
//!   of the same client.
//! - Closing one client does not disturb the others.
//!
//! The device may still write into a closed session's area until its requests complete
//! ([`Server::outstanding`] counts them): the app reuses an area for another client only once
//! that count is zero.
//!
//! The server does not check request ids: it echoes them. Matching them is the client's job
//! (`blk_client::Client`). Not implemented: several requests at a modelled disk (the model
//! serves one at a time), and a scheduler that reorders flushes.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use blk_interface::device::{BlockDevice, Buffer, DeviceError, DeviceOp, DeviceRequest, Tag};
use blk_interface::protocol::{BlkError, Op, Request, Response, SessionInfo};

pub mod serve;
pub mod stage;

use disk_sched as sched;
use stage::{Dispatched, Stage};

/// A client's index (its channel pair, as numbered by the driver app), below
/// [`Config::max_clients`].
pub type ClientId = usize;

/// A client's data area: `len` bytes of the driver's DMA memory, at `virt` for the driver
/// (and, in the single address space, for the client) and at `phys` for the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataArea {
    /// The driver's (and client's) address of the first byte.
    pub virt: u64,
    /// The device-visible address of the first byte.
    pub phys: u64,
    /// Length in bytes.
    pub len: u64,
}

/// The server's fixed limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// How many clients (channel pairs) the driver serves; client ids are below this.
    pub max_clients: usize,
    /// How many requests one client may have queued or at the device at once.
    pub max_in_flight_per_client: u16,
    /// How many requests wait for the device when all its slots are taken.
    pub queue_len: usize,
    /// The longest Read or Write, in bytes (a multiple of the sector size).
    pub max_transfer: u32,
}

/// Counts of what the server did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Requests handed to the device.
    pub submitted: u64,
    /// Requests that waited in the queue.
    pub queued: u64,
    /// Responses for device requests delivered by [`Server::poll`].
    pub completed: u64,
    /// Device completions dropped because their session had closed.
    pub dropped: u64,
    /// Requests answered at once with an error.
    pub rejected: u64,
    /// The most requests in the queue at once.
    pub max_queued: usize,
    /// ReadLoan and WriteLoan requests whose loan was accepted (the device reached the lent
    /// frame, or the loan was returned unused).
    pub lent: u64,
}

/// Where a client is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// No area: every request is [`BlkError::UnknownClient`].
    Vacant,
    /// An area, but no Open message yet (or a Close since).
    Provisioned,
    /// Open: requests are served.
    Open,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    state: State,
    area: DataArea,
    generation: u64,
    /// Requests of the current generation queued or at the device.
    in_flight: usize,
}

/// Whom a device request answers.
#[derive(Clone, Copy, Debug)]
struct Pending {
    client: ClientId,
    generation: u64,
    id: u64,
    /// The loan whose frame the request reads or writes, returned once it is done.
    loan: Option<u64>,
}

/// A request at the device (or done there and held for the model's time).
#[derive(Clone, Copy, Debug)]
struct AtDevice {
    /// Whom it answers.
    owner: Pending,
    /// As the stage dispatched it (every request but a flush around a reordering scheduler).
    dispatched: Option<Dispatched>,
    /// The device's outcome, kept until the model's time comes.
    result: Option<Result<(), DeviceError>>,
}

/// A request bound for the device.
#[derive(Clone, Copy, Debug)]
struct Ready {
    owner: Pending,
    dreq: DeviceRequest,
    /// As the scheduler knows it, if it went through the scheduler.
    scheduled: Option<sched::Pending>,
}

/// The driver side of the block protocol over a device `D`; see the [module](self).
#[derive(Debug)]
pub struct Server<D: BlockDevice> {
    device: D,
    config: Config,
    clients: Vec<Slot>,
    /// Per device tag: the request it carries.
    tags: Vec<Option<AtDevice>>,
    /// Tags taken: requests at the device, or done there and held for the model's time.
    device_busy: usize,
    /// Requests bound for the device in this order, each as soon as it has room: what the
    /// scheduler dispatched, and flushes around a scheduler that reorders.
    ready: VecDeque<Ready>,
    /// Responses for requests the device refused when they were submitted.
    outbox: VecDeque<(ClientId, Response)>,
    next_generation: u64,
    stats: ServerStats,
    /// The dispatch stage: the scheduler (and the disk model).
    stage: Stage,
    /// The tag of the request at the device whose completion the disk model times.
    timed: Option<Tag>,
    /// The time, as the app last said.
    now_ns: u64,
    /// Loans of requests done with (answered, refused or forgotten), for the app to return
    /// before it sends anything ([`Server::take_returned_loan`]).
    loans_done: VecDeque<u64>,
}

impl<D: BlockDevice> Server<D> {
    /// A server for `device` with limits `config`, with no client open.
    ///
    /// # Panics
    /// If a limit is zero, `max_transfer` is not a multiple of the device's sector size, or the
    /// device holds more than 65536 requests.
    pub fn new(device: D, config: Config) -> Server<D> {
        let ss = device.sector_size();
        assert!(ss > 0 && config.max_transfer > 0 && config.max_transfer.is_multiple_of(ss));
        assert!(config.max_clients > 0 && config.max_in_flight_per_client > 0);
        assert!(config.queue_len > 0);
        let slots = device.max_in_flight();
        assert!(slots > 0 && slots <= 1 << 16);
        let vacant =
            Slot { state: State::Vacant, area: DataArea::default(), generation: 0, in_flight: 0 };
        Server {
            device,
            config,
            clients: vec![vacant; config.max_clients],
            tags: vec![None; slots],
            device_busy: 0,
            ready: VecDeque::with_capacity(config.queue_len),
            outbox: VecDeque::with_capacity(config.queue_len),
            next_generation: 1,
            stats: ServerStats::default(),
            stage: Stage::fcfs(config.queue_len),
            timed: None,
            now_ns: 0,
            loans_done: VecDeque::with_capacity(config.queue_len + slots),
        }
    }

    /// A server for `device` with limits `config` whose requests go through `stage`
    /// (see [Scheduling](self#scheduling)).
    pub fn with_scheduler(device: D, config: Config, stage: Stage) -> Server<D> {
        let mut server = Server::new(device, config);
        server.stage = stage;
        server
    }

    /// The dispatch stage.
    pub fn stage(&self) -> &Stage {
        &self.stage
    }

    /// The dispatch stage, writable.
    pub fn stage_mut(&mut self) -> &mut Stage {
        &mut self.stage
    }

    /// Tells the server the time (nanoseconds of the app's clock, never going back).
    pub fn set_now(&mut self, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The device, writable.
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// The limits.
    pub fn config(&self) -> Config {
        self.config
    }

    /// What the server did so far.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Gives `client` the data area `area` and makes it ready for its Open message. If the
    /// client had a session, it is closed first (as by [`Server::close`]).
    ///
    /// Errors: [`BlkError::UnknownClient`] for a client id beyond [`Config::max_clients`];
    /// [`BlkError::Misaligned`] if the area is empty or its addresses or length are not
    /// multiples of the sector size; [`BlkError::OutsideDataArea`] if it wraps around.
    pub fn open(&mut self, client: ClientId, area: DataArea) -> Result<(), BlkError> {
        if client >= self.clients.len() {
            return Err(BlkError::UnknownClient);
        }
        let ss = u64::from(self.device.sector_size());
        if area.len == 0
            || !area.len.is_multiple_of(ss)
            || !area.virt.is_multiple_of(ss)
            || !area.phys.is_multiple_of(ss)
        {
            return Err(BlkError::Misaligned);
        }
        if area.virt.checked_add(area.len).is_none() || area.phys.checked_add(area.len).is_none() {
            return Err(BlkError::OutsideDataArea);
        }
        self.close(client);
        let slot = &mut self.clients[client];
        slot.state = State::Provisioned;
        slot.area = area;
        Ok(())
    }

    /// Ends `client`'s session from the driver's side (its channel closed, its domain died):
    /// its queued requests are dropped and its requests at the device will be discarded when
    /// they complete; nothing more is answered to it. Returns how many requests were
    /// forgotten. A no-op for an unknown client.
    pub fn close(&mut self, client: ClientId) -> usize {
        let forgotten = self.cancel(client);
        if let Some(slot) = self.clients.get_mut(client) {
            slot.state = State::Vacant;
            slot.area = DataArea::default();
        }
        forgotten
    }

    /// Forgets `client`'s requests and starts a new generation; the count forgotten.
    fn cancel(&mut self, client: ClientId) -> usize {
        let Some(slot) = self.clients.get_mut(client) else { return 0 };
        let forgotten = slot.in_flight;
        slot.in_flight = 0;
        slot.generation = self.next_generation;
        self.next_generation += 1;
        let now = self.now_ns;
        let stage = &mut self.stage;
        let loans = &mut self.loans_done;
        self.ready.retain(|r| {
            let keep = r.owner.client != client;
            if !keep {
                loans.extend(r.owner.loan);
            }
            if let (false, Some(s)) = (keep, r.scheduled) {
                stage.dropped(s, now);
            }
            keep
        });
        self.stage.cancel(client, &mut |p| loans.extend(p.loan));
        self.outbox.retain(|(c, _)| *c != client);
        forgotten
    }

    /// The session `client` has (or would have, before its Open message), if it has an area.
    pub fn info(&self, client: ClientId) -> Option<SessionInfo> {
        let slot = self.clients.get(client)?;
        (slot.state != State::Vacant).then(|| SessionInfo {
            area_base: slot.area.virt,
            area_len: slot.area.len,
            sector_size: self.device.sector_size(),
            capacity: self.device.capacity(),
            max_transfer: self.config.max_transfer,
            max_in_flight: self.config.max_in_flight_per_client,
        })
    }

    /// How many of `client`'s current requests are queued or at the device.
    pub fn in_flight(&self, client: ClientId) -> usize {
        self.clients.get(client).map_or(0, |s| s.in_flight)
    }

    /// How many requests at the device were sent for `client`, in any session (including
    /// those of closed sessions, which may still write into the area).
    pub fn outstanding(&self, client: ClientId) -> usize {
        self.tags.iter().flatten().filter(|a| a.owner.client == client).count()
    }

    /// How many requests wait for the device (in the scheduler or bound for the device).
    pub fn queued(&self) -> usize {
        self.stage.held() + self.ready.len()
    }

    /// Handles one message from `client`. Returns the response to send at once, or `None`
    /// if the request went to the device (or its queue) and its response will come from
    /// [`Server::poll`].
    pub fn request(&mut self, client: ClientId, msg: &[u8]) -> Option<Response> {
        self.request_lending(client, msg, &mut |_, _| None)
    }

    /// [`Server::request`] for a driver that takes loans: `lend(loan, len)` is the device
    /// address of the frame `client` lent as `loan` for `len` bytes, or `None` if that is not
    /// a loan of its to this driver (the kernel's `loan_address`). A loan accepted is in
    /// [`Server::take_returned_loan`] once its request is done with, however it ends.
    pub fn request_lending(
        &mut self,
        client: ClientId,
        msg: &[u8],
        lend: &mut dyn FnMut(u64, u32) -> Option<u64>,
    ) -> Option<Response> {
        let answer = self.handle(client, msg, lend);
        if matches!(answer, Some(Response { status: Err(_), .. })) {
            self.stats.rejected += 1;
        }
        answer
    }

    /// The next loan to return to the kernel (its request is done with: its device transfer
    /// completed, or it never reached the device); the app returns each before it sends the
    /// responses that follow.
    pub fn take_returned_loan(&mut self) -> Option<u64> {
        self.loans_done.pop_front()
    }

    fn handle(
        &mut self,
        client: ClientId,
        msg: &[u8],
        lend: &mut dyn FnMut(u64, u32) -> Option<u64>,
    ) -> Option<Response> {
        let id = Request::id_of(msg);
        let Some(slot) = self.clients.get(client).copied() else {
            return Some(Response::plain(id, Err(BlkError::UnknownClient)));
        };
        let req = match Request::decode(msg) {
            Ok(req) => req,
            Err(e) => return Some(Response::plain(id, Err(e))),
        };
        match (slot.state, req.op) {
            (State::Vacant, _) => Some(Response::plain(id, Err(BlkError::UnknownClient))),
            (State::Provisioned | State::Open, Op::Open) => {
                self.clients[client].state = State::Open;
                let info = self.info(client).unwrap_or_default();
                Some(Response { id, status: Ok(()), info })
            }
            (State::Provisioned, _) => Some(Response::plain(id, Err(BlkError::UnknownClient))),
            (State::Open, Op::Close) => {
                self.cancel(client);
                self.clients[client].state = State::Provisioned;
                Some(Response::plain(id, Ok(())))
            }
            (State::Open, Op::Flush) => {
                let dreq =
                    DeviceRequest { op: DeviceOp::Flush, sector: 0, buffer: Buffer::default() };
                self.dispatch(client, slot, id, None, dreq)
            }
            (State::Open, Op::Read | Op::Write) => {
                let info = self.info(client).unwrap_or_default();
                if let Err(e) = info.check_transfer(req.sector, req.offset, req.len) {
                    return Some(Response::plain(id, Err(e)));
                }
                // Inside the area (checked above), so neither sum overflows.
                let buffer = Buffer {
                    phys: slot.area.phys + req.offset,
                    virt: slot.area.virt + req.offset,
                    len: req.len,
                };
                let op = if req.op == Op::Read { DeviceOp::Read } else { DeviceOp::Write };
                let dreq = DeviceRequest { op, sector: req.sector, buffer };
                self.dispatch(client, slot, id, None, dreq)
            }
            (State::Open, Op::ReadLoan | Op::WriteLoan) => {
                let info = self.info(client).unwrap_or_default();
                if let Err(e) = info.check_loan_transfer(req.sector, req.len) {
                    return Some(Response::plain(id, Err(e)));
                }
                // Not a loan of this client's: left alone, for the client to take back.
                let Some(phys) = lend(req.offset, req.len) else {
                    return Some(Response::plain(id, Err(BlkError::BadLoan)));
                };
                self.stats.lent += 1;
                // The driver has no mapping of the frame: the device reaches it at `phys`.
                let buffer = Buffer { phys, virt: 0, len: req.len };
                let op = if req.op == Op::ReadLoan { DeviceOp::Read } else { DeviceOp::Write };
                let dreq = DeviceRequest { op, sector: req.sector, buffer };
                self.dispatch(client, slot, id, Some(req.offset), dreq)
            }
        }
    }

    /// Hands a validated request to the stage (or, for a flush around a scheduler that
    /// reorders, to the ready queue) and dispatches what the device has room for; the
    /// response to send at once if the request is refused.
    fn dispatch(
        &mut self,
        client: ClientId,
        slot: Slot,
        id: u64,
        loan: Option<u64>,
        dreq: DeviceRequest,
    ) -> Option<Response> {
        let owner = Pending { client, generation: slot.generation, id, loan };
        let busy = |server: &mut Server<D>| {
            server.loans_done.extend(loan);
            Some(Response::plain(id, Err(BlkError::Busy)))
        };
        if slot.in_flight >= usize::from(self.config.max_in_flight_per_client) {
            return busy(self);
        }
        let before = self.queued();
        if dreq.op == DeviceOp::Flush && !self.stage.takes_flushes() {
            if self.ready.len() + self.outbox.len() >= self.config.queue_len {
                return busy(self);
            }
            self.ready.push_back(Ready { owner, dreq, scheduled: None });
        } else if !self.stage.arrive(owner, dreq, self.device.sector_size(), self.now_ns) {
            return busy(self);
        }
        self.clients[client].in_flight += 1;
        self.pump();
        let queued = self.queued();
        if queued > before {
            self.stats.queued += 1;
            self.stats.max_queued = self.stats.max_queued.max(queued);
        }
        // Refused by the device as it was submitted: answered at once.
        let refused = self.outbox.iter().rposition(|(c, r)| *c == client && r.id == id);
        refused.and_then(|i| self.outbox.remove(i)).map(|(_, r)| r)
    }

    /// Notes that the device took `owner`'s request, dispatched as `dispatched`, under `tag`;
    /// false if the tag is not a free slot (a device bug: the request is answered with
    /// [`BlkError::Device`]).
    fn record(&mut self, tag: Tag, owner: Pending, dispatched: Option<Dispatched>) -> bool {
        match self.tags.get_mut(usize::from(tag.0)) {
            Some(entry @ None) => {
                *entry = Some(AtDevice { owner, dispatched, result: None });
                self.device_busy += 1;
                self.stats.submitted += 1;
                if dispatched.is_some_and(|d| d.end_ns.is_some()) {
                    self.timed = Some(tag);
                }
                true
            }
            _ => false,
        }
    }

    /// Whether the device has room: fewer requests there (or held there for the model) than
    /// the stage lets it have at once.
    #[inline]
    fn device_has_room(&self) -> bool {
        self.device_busy < self.stage.at_once().min(self.tags.len())
    }

    /// The one dispatch route: while the device has room, submits the ready queue's head, and
    /// when that is empty asks the scheduler for the next request.
    #[inline]
    fn pump(&mut self) {
        // Nothing bound for the device and nothing the scheduler would dispatch (after most
        // completions, and on most passes of the serving loop): known without a call.
        if self.ready.is_empty() && !self.stage.may_dispatch(self.now_ns) {
            return;
        }
        self.pump_ready();
    }

    /// [`Server::pump`] when there may be something to submit: the ready queue's head, else
    /// what the scheduler dispatches, submitted straight to the device (it joins the ready
    /// queue only if the device refuses it as full).
    fn pump_ready(&mut self) {
        let now = self.now_ns;
        // Each pass submits, drops or stops, so it ends.
        while self.device_has_room() {
            let ready = match self.ready.pop_front() {
                Some(ready) => ready,
                None => {
                    if !self.stage.may_dispatch(now) {
                        return;
                    }
                    let Some((r, owner, dreq)) = self.stage.next(now) else { return };
                    if self.clients[owner.client].generation != owner.generation {
                        self.stage.dropped(r, now);
                        self.stats.dropped += 1;
                        self.loans_done.extend(owner.loan);
                        continue;
                    }
                    Ready { owner, dreq, scheduled: Some(r) }
                }
            };
            let failed = match self.device.submit(ready.dreq) {
                Ok(tag) => {
                    let dispatched = ready.scheduled.map(|r| self.stage.started(r, now));
                    let recorded = self.record(tag, ready.owner, dispatched);
                    if let (false, Some(d)) = (recorded, dispatched) {
                        self.stage.dropped(d.r(), now);
                    }
                    !recorded
                }
                Err(DeviceError::Full) => {
                    self.ready.push_front(ready);
                    return;
                }
                Err(_) => {
                    if let Some(r) = ready.scheduled {
                        self.stage.dropped(r, now);
                    }
                    true
                }
            };
            if failed {
                self.loans_done.extend(ready.owner.loan);
                self.clients[ready.owner.client].in_flight -= 1;
                let response = Response::plain(ready.owner.id, Err(BlkError::Device));
                self.outbox.push_back((ready.owner.client, response));
            }
        }
    }

    /// The next response to send after device completions, with its client, or `None` when
    /// the device has nothing more. Completions of closed sessions are dropped here; the
    /// device is given more as it has room.
    pub fn poll(&mut self) -> Option<(ClientId, Response)> {
        loop {
            if let Some(out) = self.outbox.pop_front() {
                return Some(out);
            }
            if let Some(out) = self.finish_timed() {
                return Some(out);
            }
            let Some((tag, result)) = self.device.complete() else {
                self.pump();
                return self.outbox.pop_front();
            };
            let index = usize::from(tag.0);
            if let Some(Some(a)) = self.tags.get_mut(index)
                && a.dispatched.is_some_and(|d| d.end_ns.is_some())
            {
                // Kept until the model completes it.
                a.result = Some(result);
                continue;
            }
            let at_device = self.tags.get_mut(index).and_then(Option::take);
            let Some(a) = at_device else {
                self.pump();
                continue;
            };
            self.device_busy -= 1;
            if let Some(d) = a.dispatched {
                self.stage.completed(d, self.now_ns);
            }
            self.pump();
            if let Some(response) = self.answer(a.owner, result) {
                return Some((a.owner.client, response));
            }
        }
    }

    /// The response of the request the model times, once the device has finished it and the
    /// model's time has come; the device is given more.
    fn finish_timed(&mut self) -> Option<(ClientId, Response)> {
        let tag = self.timed?;
        let index = usize::from(tag.0);
        let a = self.tags.get(index).copied().flatten()?;
        let (result, d) = (a.result?, a.dispatched?);
        if d.end_ns.is_some_and(|end| self.now_ns < end) {
            return None;
        }
        self.tags[index] = None;
        self.timed = None;
        self.device_busy -= 1;
        self.stage.completed(d, self.now_ns);
        let answer = self.answer(a.owner, result);
        self.pump();
        answer.map(|response| (a.owner.client, response))
    }

    /// When the server next has something to do by itself: the model's completion of the
    /// request at the device, or the end of the scheduler's wait.
    pub fn next_event_ns(&self) -> Option<u64> {
        let done = self.timed_request().and_then(|a| a.dispatched).and_then(|d| d.end_ns);
        match (done, self.stage.wake_ns()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the device has a request whose completion the disk model times.
    pub fn device_waiting(&self) -> bool {
        self.timed_request().is_some_and(|a| a.result.is_none())
    }

    fn timed_request(&self) -> Option<AtDevice> {
        self.tags.get(usize::from(self.timed?.0)).copied().flatten()
    }

    /// The response to a completed device request `p` with `result`, if its session is still
    /// the one that sent it (else it is dropped).
    fn answer(&mut self, p: Pending, result: Result<(), DeviceError>) -> Option<Response> {
        // The device is done with the frame, whoever hears of it.
        self.loans_done.extend(p.loan);
        let slot = &mut self.clients[p.client];
        if slot.generation != p.generation {
            self.stats.dropped += 1;
            return None;
        }
        slot.in_flight -= 1;
        self.stats.completed += 1;
        Some(Response::plain(p.id, result.map_err(|_| BlkError::Device)))
    }
}

#[cfg(test)]
mod serve_tests;
#[cfg(test)]
mod stage_tests;
#[cfg(test)]
mod tests;
