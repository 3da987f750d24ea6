//! The serving loop of a block driver domain: one loop serving every client and the device,
//! over the channels and the kernel a [`DriverDomain`] stands for, so that it runs (and is
//! tested) on the host as it runs in a domain.
//!
//! A client is a pair of IO channels from the manifest: `NAME-req` from the client to the
//! driver and `NAME-resp` back ([`Channels`]). The loop takes the device's completions after
//! its interrupt (acknowledging it), answers them, takes each client's requests, and when
//! nothing moved, blocks until an endpoint changes (a client's channel or the interrupt), or
//! until the stage's next event (the scheduler's wait ends, the model's completion is due).
//! Responses are sent without waiting: a client whose response ring stays full (it does not
//! read its responses) is closed, never waited for. A client that dies is closed; its area is
//! not given to anyone else. When every client is gone and nothing is in flight, the loop
//! ends, reporting how many requests it served and the longest it took to see an interrupt
//! after the kernel signalled it (its wake-up latency, by its own clock against the kernel's
//! stamp).
//!
//! **Scheduling.** When the stage keeps time ([`Stage::keeps_time`]: a scheduler named or a
//! disk model), the loop tells the server the time on every pass, raises the domain's
//! `device_busy` while the device has a request whose completion the model times (the kernel
//! then idles with no timer, so under `-icount` the model alone sets the disk's time), prints
//! each stream's completed periods (`disk period: stream=NAME start= end= guaranteed= extra=
//! missed=`), publishes each stream's accounts after its data area
//! ([`blk_interface::protocol::StreamAccounts`]), and at the end the scheduler's waits
//! (`disk waits:`) and its own cost (`disk scheduler:`). [`stage`] builds that stage from the
//! disk's model and the scheduler named. Asked to trace ([`ServeOptions::trace`]), it also
//! prints each request the disk served as it completes (`disk request: stream=NAME sector=
//! sectors= op=read|write arrived= dispatched= done=`) and each wait of the scheduler as it
//! ends (`disk wait: stream=NAME since= until= ended= end=anticipated|timed_out|abandoned`),
//! all times in ns of the domain's clock.

use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::AtomicU64;

use atropos::Contract;
use blk_interface::device::BlockDevice;
use blk_interface::protocol::StreamAccounts;
use disk_model::{DiskModel, DiskParams};
use disk_sched::{PolicyName, WaitEnd, scheduler};

use crate::Server;
use crate::stage::Stage;

/// Why a send did not go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError<E> {
    /// The receiving end is gone.
    Closed,
    /// The ring is unusable.
    Other(E),
}

/// One client's pair of channels, as the loop uses them: never waiting.
pub trait Channels {
    /// Why a ring is unusable.
    type Error: fmt::Debug;

    /// The next request into `buf`: its length, or `None` if there is none now.
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, Self::Error>;

    /// Whether the client's end of the request channel is gone (its domain died).
    fn sender_gone(&self) -> bool;

    /// Sends `msg` as a response: false if the ring is full.
    fn try_send(&mut self, msg: &[u8]) -> Result<bool, SendError<Self::Error>>;

    /// The client's domain, which lends the frames its ReadLoan and WriteLoan requests name
    /// (`None`: its loans are refused).
    fn lender(&self) -> Option<u32> {
        None
    }
}

/// What the loop asks of the driver's domain: its clock, the device's interrupt, blocking, and
/// its console.
pub trait DriverDomain {
    /// The domain's clock, in nanoseconds.
    fn now_ns(&self) -> u64;
    /// The interrupt's event count (it changes at every interrupt).
    fn interrupts(&self) -> u64;
    /// When the kernel signalled the last interrupt, by the domain's clock.
    fn interrupt_signalled_ns(&self) -> u64;
    /// Acknowledges the interrupt, so that the line may interrupt again.
    fn ack_interrupt(&mut self);
    /// Tells the kernel whether the device has a request whose completion the model times.
    fn set_device_busy(&mut self, busy: bool);
    /// Blocks until an endpoint changes or `until_ns` (by the domain's clock).
    fn block(&mut self, until_ns: u64);
    /// Dies on purpose (a fault the kernel kills the domain for).
    fn die(&mut self) -> !;
    /// Nanoseconds of `ticks` of the clock that timed the scheduler.
    fn ns_from_ticks(&self, ticks: u64) -> u64;
    /// Prints a line.
    fn print(&mut self, line: fmt::Arguments<'_>);
    /// The device address of the first `len` bytes of the frame domain `lender` lent this
    /// driver as `loan` (the kernel's `loan_address`), or `None` if it did not (a driver that
    /// takes no loans refuses them all).
    fn loan_address(&mut self, _loan: u64, _lender: u32, _len: u32) -> Option<u64> {
        None
    }
    /// Returns `loan` (the kernel's `frame_return`): the device is done with its frame.
    fn loan_return(&mut self, _loan: u64) {}
}

/// A client the loop serves.
pub struct Client<C> {
    name: [u8; 32],
    channels: C,
    open: bool,
    /// Its disk-time contract, from its manifest.
    pub contract: Option<Contract>,
    /// Where its stream's accounts are published (the words after its data area).
    pub accounts: Option<&'static [AtomicU64]>,
}

impl<C: Channels> Client<C> {
    /// The client whose request channel is `name` (`NAME-req`), over `channels`, under
    /// `contract`.
    pub fn new(name: [u8; 32], channels: C, contract: Option<Contract>) -> Client<C> {
        Client { name, channels, open: true, contract, accounts: None }
    }

    /// Its request channel's name.
    pub fn name(&self) -> &str {
        let len = self.name.iter().position(|&b| b == 0).unwrap_or(32);
        core::str::from_utf8(&self.name[..len]).unwrap_or("?")
    }

    /// Its stream's name: its channels' (`NAME-req`, `NAME-resp`).
    pub fn stream(&self) -> &str {
        self.name().strip_suffix("-req").unwrap_or(self.name())
    }

    /// Its channels.
    pub fn channels(&self) -> &C {
        &self.channels
    }

    /// Whether it is still served.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Publishes `a` where the client reads its accounts.
    fn publish(&self, a: StreamAccounts) {
        if let Some(words) = self.accounts {
            io_protocol::published::publish(words, &a.words());
        }
    }
}

/// How the loop serves.
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// The driver's name, prefixed to what it prints.
    pub driver: &'static str,
    /// With `Some(n)`, the driver dies once it has answered `n` requests from the device: a
    /// test of what its clients see.
    pub die_after: Option<u64>,
    /// The scheduler named on the command line, if any (for the report).
    pub scheduler: Option<PolicyName>,
    /// Whether the scheduler anticipates (for the report).
    pub anticipate: bool,
    /// Whether to print a record of every request the disk served and every wait of the
    /// scheduler, as they end (`disk request:`, `disk wait:`; the kernel runs with
    /// `trace=sched`). Only a stage that keeps time has them.
    pub trace: bool,
}

/// What `--scheduler` accepts.
pub const SCHEDULER_USAGE: &str = "--scheduler fcfs|sstf|sptf|aged-sptf|cscan|stride|usd";

/// Serves `clients` (client `i` is the server's client `i`) until all are gone; the exit
/// status.
pub fn serve<D: BlockDevice, P: DriverDomain, C: Channels>(
    mut server: Server<D>,
    clients: &mut [Client<C>],
    domain: &mut P,
    options: &ServeOptions,
) -> i32 {
    let ServeOptions { driver, die_after, .. } = *options;
    let mut buf = [0u8; 64];
    let mut irq_seen = domain.interrupts();
    let mut interrupts = 0u64;
    // The longest time from the kernel's signal of the interrupt to this loop seeing it.
    let mut wake_max_ns = 0u64;
    // Loans returned to the kernel.
    let mut returned = 0u64;
    // The scheduler's waits printed so far (tracing).
    let mut waits_printed = 0u64;
    let tracing = options.trace && server.stage().keeps_time();
    server.stage_mut().set_tracing(tracing);
    loop {
        let mut moved = false;
        if server.stage().keeps_time() {
            server.set_now(domain.now_ns());
        }
        let now = domain.interrupts();
        if now != irq_seen {
            irq_seen = now;
            interrupts += 1;
            let signalled = domain.interrupt_signalled_ns();
            wake_max_ns = wake_max_ns.max(domain.now_ns().saturating_sub(signalled));
            server.device_mut().interrupted();
            domain.ack_interrupt();
            moved = true;
        }
        let mut answered = false;
        while let Some((i, response)) = server.poll() {
            answered = true;
            return_loans(&mut server, domain, &mut returned);
            send(driver, domain, &mut server, &mut clients[i], i, &response.encode());
        }
        return_loans(&mut server, domain, &mut returned);
        moved |= answered;
        account(domain, &mut server, clients, answered);
        if tracing {
            trace(domain, &mut server, clients, &mut waits_printed);
        }
        if die_after.is_some_and(|n| server.stats().completed >= n) {
            domain.print(format_args!("{driver}: dying on purpose, requests in flight"));
            domain.die();
        }
        for (i, c) in clients.iter_mut().enumerate() {
            while c.open {
                match c.channels.try_recv(&mut buf) {
                    Ok(Some(n)) => {
                        moved = true;
                        let lender = c.channels.lender();
                        let mut lend = |loan: u64, len: u32| {
                            lender.and_then(|from| domain.loan_address(loan, from, len))
                        };
                        let answer = server.request_lending(i, &buf[..n], &mut lend);
                        return_loans(&mut server, domain, &mut returned);
                        if let Some(response) = answer {
                            send(driver, domain, &mut server, c, i, &response.encode());
                        }
                    }
                    Ok(None) if !c.channels.sender_gone() => break,
                    // Its sender died and everything it published has been taken, or its
                    // ring is unreadable.
                    Ok(None) | Err(_) => {
                        domain.print(format_args!("{driver}: client {} gone", c.name()));
                        server.close(i);
                        return_loans(&mut server, domain, &mut returned);
                        c.open = false;
                        moved = true;
                    }
                }
            }
        }
        // Those of clients closed while their responses were sent.
        return_loans(&mut server, domain, &mut returned);
        let outstanding: usize = (0..clients.len()).map(|i| server.outstanding(i)).sum();
        if clients.iter().all(|c| !c.open) && outstanding == 0 {
            let s = server.stats();
            domain.print(format_args!(
                "{driver}: every client gone: {} requests served, {} rejected, {interrupts} interrupts, wake-up latency at most {wake_max_ns} ns",
                s.completed, s.rejected
            ));
            if s.lent > 0 {
                domain.print(format_args!(
                    "{driver}: lent frames: requests={} returned={returned}",
                    s.lent
                ));
            }
            report(domain, &server, options);
            domain.set_device_busy(false);
            return 0;
        }
        if !moved {
            // The kernel idles with no timer while the device has a request the model times.
            domain.set_device_busy(server.device_waiting());
            // Any endpoint that changed since the last `block` returned makes it return at
            // once: nothing signalled while the loop looked is missed.
            domain.block(server.next_event_ns().unwrap_or(u64::MAX));
        }
    }
}

/// Returns the loans of the requests the server is done with, before anything is sent: a
/// client that hears of its request finds its page mapped again.
/// Counts them in `returned`.
fn return_loans<D: BlockDevice, P: DriverDomain>(
    server: &mut Server<D>,
    domain: &mut P,
    returned: &mut u64,
) {
    while let Some(loan) = server.take_returned_loan() {
        domain.loan_return(loan);
        *returned += 1;
    }
}

/// Sends `msg` to client `i`, closing it if its response ring is full or gone.
fn send<D: BlockDevice, P: DriverDomain, C: Channels>(
    driver: &str,
    domain: &mut P,
    server: &mut Server<D>,
    c: &mut Client<C>,
    i: usize,
    msg: &[u8],
) {
    if !c.open {
        return;
    }
    match c.channels.try_send(msg) {
        Ok(true) => return,
        // The client died with requests in flight, before its request ring was seen closed.
        Err(SendError::Closed) => domain.print(format_args!("{driver}: client {} gone", c.name())),
        Ok(false) => domain.print(format_args!(
            "{driver}: client {} does not read its responses: closed",
            c.name()
        )),
        Err(SendError::Other(e)) => domain.print(format_args!(
            "{driver}: client {} response ring unusable ({e:?}): closed",
            c.name()
        )),
    }
    server.close(i);
    c.open = false;
}

/// The disk model a driver's disk has: its parameters and its name.
#[derive(Clone, Debug)]
pub struct ModelChoice {
    /// The drive modelled.
    pub params: DiskParams,
    /// Its name, as printed.
    pub name: &'static str,
}

/// The stage of a disk of `capacity` sectors of `sector_size` bytes taking transfers of up to
/// `max_transfer` bytes, with `model` (if the disk has one), scheduled by `options.scheduler`
/// (with none named: USD if the disk has a model, else first come, first served), for
/// `clients`, at `now_ns`; `clock` times the scheduler's calls. A client whose slice is
/// shorter than the disk's longest request is served best effort (said on the console).
#[allow(clippy::too_many_arguments)]
pub fn stage<P: DriverDomain, C: Channels>(
    domain: &mut P,
    options: &ServeOptions,
    model: Option<ModelChoice>,
    capacity: u64,
    sector_size: u32,
    max_transfer: u32,
    clients: &mut [Client<C>],
    clock: Option<fn() -> u64>,
) -> Option<Stage> {
    let driver = options.driver;
    let policy = match (options.scheduler, &model) {
        (Some(p), _) => p,
        (None, Some(_)) => PolicyName::Usd,
        (None, None) => return None,
    };
    let sized = |p: DiskParams| if p.capacity == capacity { p } else { p.with_capacity(capacity) };
    let model_name = model.as_ref().map_or("none", |m| m.name);
    let model = model.map(|m| DiskModel::new(sized(m.params)));
    // Without a model the policies still need a positioning estimate: the Deskstar's, scaled.
    let estimate =
        model.clone().unwrap_or_else(|| DiskModel::new(sized(DiskParams::deskstar_34gxp())));
    let longest = disk_sched::usd::longest_service_ns(&estimate, max_transfer / sector_size);
    for c in clients.iter_mut() {
        if let Some(k) = c.contract
            && policy == PolicyName::Usd
            && k.slice < longest
        {
            domain.print(format_args!(
                "{driver}: stream {}: its slice of {} us is shorter than the disk's longest request ({} us): served best effort",
                c.stream(),
                k.slice / 1000,
                longest / 1000
            ));
            c.contract = None;
        }
    }
    let streams: Vec<Option<Contract>> = clients.iter().map(|c| c.contract).collect();
    let per_client = 8;
    let sched = scheduler::build(
        policy,
        options.anticipate,
        &estimate,
        &streams,
        per_client,
        domain.now_ns(),
    );
    domain.print(format_args!(
        "{driver}: disk scheduled by {} (anticipation {}), model {model_name}",
        policy.name(),
        if options.anticipate { "on" } else { "off" },
    ));
    Some(Stage::new(sched, model, per_client * clients.len().max(1), clock))
}

/// Prints a `disk request:` record of each request completed since the last call, and a
/// `disk wait:` record of each of the scheduler's waits that ended since (`printed` of them
/// were printed before; a wait the scheduler's trace no longer keeps is not printed, and the
/// count in `disk waits:` tells).
fn trace<D: BlockDevice, P: DriverDomain, C: Channels>(
    domain: &mut P,
    server: &mut Server<D>,
    clients: &[Client<C>],
    printed: &mut u64,
) {
    let stage = server.stage_mut();
    let stream = |c: usize| clients.get(c).map_or("?", |c| c.stream());
    for q in stage.take_requests() {
        domain.print(format_args!(
            "disk request: stream={} sector={} sectors={} op={} arrived={} dispatched={} done={}",
            stream(q.r.client),
            q.r.lbn,
            q.r.sectors,
            if q.r.read { "read" } else { "write" },
            q.r.arrival_ns,
            q.dispatched_ns,
            q.done_ns
        ));
    }
    let Some(waits) = stage.trace() else { return };
    let ended = waits.totals().count;
    let new = ended.saturating_sub(*printed) as usize;
    *printed = ended;
    let kept = waits.iter().count();
    for w in waits.iter().skip(kept.saturating_sub(new)) {
        let end = match w.end {
            WaitEnd::Anticipated => "anticipated",
            WaitEnd::TimedOut => "timed_out",
            WaitEnd::Abandoned => "abandoned",
        };
        domain.print(format_args!(
            "disk wait: stream={} since={} until={} ended={} end={end}",
            stream(w.client),
            w.since_ns,
            w.until_ns,
            w.ended_ns
        ));
    }
}

/// Prints the streams' completed periods and, when requests were answered or periods ended
/// (the only times the accounts change), publishes the streams' accounts.
fn account<D: BlockDevice, P: DriverDomain, C: Channels>(
    domain: &mut P,
    server: &mut Server<D>,
    clients: &[Client<C>],
    answered: bool,
) {
    let stage = server.stage_mut();
    if !stage.keeps_time() {
        return;
    }
    let periods = stage.take_periods();
    for p in &periods {
        let name = clients.get(p.client).map_or("?", |c| c.stream());
        domain.print(format_args!(
            "disk period: stream={name} start={} end={} guaranteed={} extra={} missed={}",
            p.start, p.end, p.guaranteed, p.extra, p.missed
        ));
    }
    if periods.is_empty() && !answered {
        return;
    }
    for (i, c) in clients.iter().enumerate() {
        if let Some(a) = stage.accounts(i) {
            c.publish(StreamAccounts {
                guaranteed_ns: a.guaranteed,
                extra_ns: a.extra,
                periods: a.periods,
                deadlines_missed: a.deadlines_missed,
            });
        }
    }
}

/// Prints what the scheduler did: its waits, checked against their timeouts, and its cost.
fn report<D: BlockDevice, P: DriverDomain>(
    domain: &mut P,
    server: &Server<D>,
    options: &ServeOptions,
) {
    let stage = server.stage();
    if !stage.keeps_time() {
        return;
    }
    if let Some(trace) = stage.trace() {
        let t = trace.totals();
        domain.print(format_args!(
            "disk waits: count={} anticipated={} timed_out={} abandoned={} exceeded={} late_max_ns={} longest_ns={}",
            t.count,
            t.anticipated,
            t.timed_out,
            t.abandoned,
            t.exceeded,
            t.late_max_ns,
            t.longest_ns
        ));
    }
    let s = stage.stats();
    let ns = domain.ns_from_ticks(s.scheduler_time);
    let policy = options.scheduler.unwrap_or(PolicyName::Usd);
    domain.print(format_args!(
        "disk scheduler: policy={} anticipation={} requests={} calls={} ns={} per_request_ns={}",
        policy.name(),
        if options.anticipate { "on" } else { "off" },
        s.dispatched,
        s.scheduler_calls,
        ns,
        ns / s.dispatched.max(1)
    ));
}
