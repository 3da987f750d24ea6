//! Which domain runs: the [`atropos`] scheduler over the domains' CPU contracts, blocking with
//! deadlines, and the idle loop.
//!
//! The policy (EDF over `(period, slice, extra, latency)`, slack sharing, accounting) is the
//! host-tested `atropos` crate; this module is the mechanism around it. Every entry from user
//! mode that may change what should run (a timer interrupt, `yield`, `block`, `exit`, a fault,
//! a wake-up that should preempt) ends in [`switch`], which asks the scheduler and arms the one
//! one-shot timer for the earliest of: the scheduler's `until`, a blocked domain's deadline, an
//! armed timer endpoint, and the `stop=` instant. There is no periodic tick.
//!
//! Everything here runs in the trap handler with interrupts off. The CPU is never idle while a
//! domain can run; when none can, the kernel sleeps (`wfi`) until the earliest of those
//! instants, or a device's interrupt. If every live domain is blocked without a deadline and
//! nothing else can happen (no device interrupt is bound to a live domain), nothing could ever
//! wake them, so each `block` returns `WouldDeadlock`. With no live domain
//! left the run summary ends the run.

use crate::domain::DomainId;
use abi::SysError;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;

use super::clock::{now_ns, ns_from_ticks, ticks_from_ns_up};
use super::reports::report_fault;
use super::syscall::{self, Next};
use super::{Ending, World};
use crate::Platform;
use crate::contract::AddressSpaceOps as _;
use crate::contract::{Resume, UserContextOps, UserFault, UserTrap};

/// The kernel's side of CPU scheduling, owned by [`World`]: the Atropos policy over the
/// domains' contracts, the domain on the CPU, and the instants at which the kernel must look
/// at the domains again.
pub(super) struct Scheduler {
    /// The policy; its clients are the domains, by index.
    pub(super) policy: atropos::Atropos,
    /// The domain on the CPU, or the last one that was.
    pub(super) current: DomainId,
    /// A wake-up during the current system call should preempt the caller.
    pub(super) preempt: bool,
    /// When to end the run (`stop=`), in timer ticks.
    pub(super) stop_at: Option<u64>,
    /// The domains with something timed ahead (a blocked domain's deadline, an armed timer
    /// endpoint, a revocation deadline), each by the earliest such instant in timer ticks: a
    /// lower bound, since an instant that goes away (a timer disarmed, a domain woken early)
    /// leaves its entry until the domain's turn comes or the kernel idles
    /// ([`World::settle_instants`]). A switch reads only the head, and a pass of
    /// [`World::expire`] takes out only the domains due, so neither costs more with more
    /// domains.
    instants: indexed_heap::Heap,
    /// The head of `instants` (`u64::MAX`: empty), kept beside it so that the check on every
    /// switch reads one word.
    next: u64,
    /// While the kernel does work for other domains inside a switch or an interrupt (a pass of
    /// [`World::expire`], delivering interrupts): the instant the policy is told of the
    /// wake-ups it makes, in ns, so that it charges nobody before each piece of that work is
    /// charged to the domain it served ([`Scheduler::charge_since`]).
    frozen: Option<u64>,
    /// Time spent waiting for an interrupt with nothing to run, in timer ticks: the run
    /// summary reports it, and the disk benches count the busy time as the run's time less it.
    pub(super) idle_ticks: u64,
    /// With `trace=sched`: who the last `sched run` or `sched idle` record said has the CPU
    /// (`Some(index)` a domain, `None` idle or nothing yet), so that a record is printed only
    /// when that changes.
    on_cpu: Option<usize>,
}

impl Scheduler {
    /// No clients yet; domain 0 current.
    pub(super) fn new() -> Self {
        Scheduler {
            policy: atropos::Atropos::new(),
            current: DomainId::from_index(0),
            preempt: false,
            stop_at: None,
            instants: indexed_heap::Heap::new(),
            next: u64::MAX,
            frozen: None,
            idle_ticks: 0,
            on_cpu: None,
        }
    }

    /// Something will happen to domain `of` at `ticks` (its deadline as it blocks, its timer
    /// endpoint, its revocation deadline): [`World::expire`] must look at it by then. Costs
    /// `O(log N)` when it moves the domain's instant earlier, nothing otherwise.
    #[inline(always)]
    pub(super) fn note_instant(&mut self, ticks: u64, of: DomainId) {
        // A block without a deadline (`u64::MAX`), the common case, moves nothing.
        if ticks != u64::MAX {
            self.note_timed_instant(ticks, of.index());
        }
    }

    /// [`Scheduler::note_instant`] for an instant that may move the domain's.
    #[inline(never)]
    fn note_timed_instant(&mut self, ticks: u64, of: usize) {
        if ticks < self.instants.get(of).unwrap_or(u64::MAX) {
            self.instants.set(of, ticks);
            self.next = self.instants.first_instant();
        }
    }

    /// Charges the kernel's work from `from` (timer ticks) until now to domain `id`, rather
    /// than to the domain dispatched meanwhile (see [`atropos::Atropos::charge_to`]); returns
    /// now, in ticks.
    #[inline]
    pub(super) fn charge_since<P: Platform>(&mut self, id: DomainId, from: u64) -> u64 {
        let to = P::now_ticks();
        self.policy.charge_to(id.index(), ns_from_ticks::<P>(from), ns_from_ticks::<P>(to));
        to
    }

    /// The earliest deadline of a blocked domain, an armed timer endpoint, a revocation or the
    /// end of the run, in ticks (possibly earlier than needed, never later).
    #[inline]
    pub(super) fn earliest_deadline(&self) -> Option<u64> {
        let next = self.next_instant();
        let next = (next != u64::MAX).then_some(next);
        [next, self.stop_at].into_iter().flatten().min()
    }

    /// Whether `trace=sched` asked for the scheduler's and the faults' records.
    #[inline]
    pub(super) fn tracing(&self) -> bool {
        self.policy.tracing()
    }

    /// Logs the periods the scheduler completed since the last call (with `trace=sched`).
    pub(super) fn log_periods(&mut self) {
        if !self.policy.tracing() {
            return;
        }
        for r in self.policy.take_records() {
            info!(
                "sched period: domain={=usize} start={=u64} end={=u64} guaranteed={=u64} extra={=u64} missed={=bool}",
                r.client, r.start, r.end, r.guaranteed, r.extra, r.missed
            );
        }
    }

    /// With `trace=sched`, records that domain `client` (`None`: nobody, the CPU idles) has
    /// the CPU from `at_ns`, if it did not already: a `sched run` or `sched idle` record.
    #[inline(always)]
    fn note_on_cpu(&mut self, client: Option<usize>, at_ns: u64) {
        if self.policy.tracing() && self.on_cpu != client {
            self.log_on_cpu(client, at_ns);
        }
    }

    /// See [`Scheduler::note_on_cpu`]; out of line, off the untraced path.
    #[cold]
    #[inline(never)]
    fn log_on_cpu(&mut self, client: Option<usize>, at_ns: u64) {
        self.on_cpu = client;
        match client {
            Some(domain) => info!("sched run: domain={=usize} at={=u64}", domain, at_ns),
            None => info!("sched idle: at={=u64}", at_ns),
        }
    }

    /// With `trace=sched`: domain `client` was dispatched at `at_ns`, activated for `reason`
    /// ([`abi::activation`] bits; 0: not activated). Out of line, off the untraced path.
    #[cold]
    #[inline(never)]
    fn log_dispatch(&mut self, client: usize, reason: u64, at_ns: u64) {
        if self.on_cpu != Some(client) {
            self.log_on_cpu(Some(client), at_ns);
        }
        if reason != 0 {
            info!("activation: domain={=usize} reason={=u64} at={=u64}", client, reason, at_ns);
        }
    }

    /// Nothing timed happens before this instant, in timer ticks (`u64::MAX`: nothing).
    #[inline]
    pub(super) fn next_instant(&self) -> u64 {
        self.next
    }

    /// Makes room in the queue of instants for domains `0..domains`; `Err` if the heap cannot
    /// hold it.
    pub(super) fn grow(&mut self, domains: usize) -> Result<(), ()> {
        self.instants.grow(domains).map_err(|_| ())
    }

    /// Takes out the domain with the earliest instant if it is at or before `now`.
    #[inline]
    fn take_due(&mut self, now: u64) -> Option<DomainId> {
        let id = self.instants.pop_due(now)?;
        self.next = self.instants.first_instant();
        Some(client_id(id))
    }

    /// The earliest entry of the queue of instants: the instant and its domain.
    #[inline]
    fn first_instant(&self) -> Option<(u64, DomainId)> {
        self.instants.first().map(|(t, id)| (t, client_id(id)))
    }

    /// Puts domain `id` in the queue at `ticks` (or moves it there); `None` takes it out.
    #[inline]
    pub(super) fn set_instant(&mut self, id: DomainId, ticks: Option<u64>) {
        match ticks {
            Some(t) => self.instants.set(id.index(), t),
            None => self.instants.remove(id.index()),
        }
        self.next = self.instants.first_instant();
    }

    /// The instant to tell the policy of a wake-up or a death, in ns: the clock's, or while
    /// the kernel works for other domains the instant that work began ([`Scheduler::frozen`]).
    #[inline]
    pub(super) fn now_ns<P: Platform>(&self) -> u64 {
        self.frozen.unwrap_or_else(now_ns::<P>)
    }
}

/// The domain that is scheduler client `client`: the scheduler's clients and its queue of
/// instants are the domains, by index (each added with its domain), so every client it picks
/// or finds due is a domain. The one place the scheduler's numbers become identifiers.
#[inline(always)]
fn client_id(client: usize) -> DomainId {
    DomainId::from_index(client)
}

impl<P: Platform> World<P> {
    /// Fires due timer endpoints, enforces revocation deadlines and unblocks every domain whose
    /// deadline has passed, at `now` (timer ticks); returns the instant the work ends, from which
    /// the dispatched domain is charged: `now` if nothing was due. The work is charged to the
    /// domains it served ([`World::expire_pass`]). Only the domains whose instant has come are
    /// visited, so a switch does not cost more with more domains.
    #[inline]
    fn expire(&mut self, now: u64) -> u64 {
        if now >= self.sched.next_instant() {
            return self.expire_pass(now);
        }
        now
    }

    /// The pass of [`World::expire`], out of line so that the common case costs a comparison.
    /// The policy hears of its wake-ups at `now`; the domains whose instant has come are taken
    /// out of [`Scheduler::instants`] one at a time, served (their due timers fired, their
    /// revocation enforced, their deadline ended) and put back at their next instant, and the
    /// kernel's time for each, from the end of the previous one (from `now` for the first), is
    /// charged to it, even when nothing was due (it left an instant that went away). Returns the
    /// end of the pass. Cold: most switches find nothing due, and the path that does not call
    /// it stays as short as before.
    #[cold]
    #[inline(never)]
    fn expire_pass(&mut self, now: u64) -> u64 {
        let now_ns = ns_from_ticks::<P>(now);
        self.sched.frozen = Some(now_ns);
        let mut at = now;
        while let Some(id) = self.sched.take_due(now) {
            if self.domain(id).is_some() {
                self.fire_timers(id, now);
                self.enforce_revocation(id, now_ns);
                let d = &mut self.domains[id];
                if d.ending.is_none() && d.blocked.is_some_and(|deadline| deadline <= now) {
                    d.blocked = None;
                    if let Some(frame) = d.dcb {
                        P::dcb(frame).wakeups.fetch_add(1, Ordering::Relaxed);
                    }
                    self.sched.policy.wake(id.index(), now_ns);
                }
                if let Some(next) = self.domains.exact_instant(id) {
                    // Serving a domain ends what was due: an instant still due would be taken
                    // again, for ever, with interrupts off. Checked in the host tests, off the
                    // kernel's path.
                    #[cfg(test)]
                    assert!(
                        next > now,
                        "domain {id:?}: its next instant {next} is not after the pass's {now}: what was due was not served"
                    );
                    self.sched.set_instant(id, Some(next));
                }
            }
            at = self.sched.charge_since::<P>(id, at);
        }
        self.sched.frozen = None;
        at
    }

    /// Puts live domain `id` in [`Scheduler::instants`] at its exact next instant, or takes it
    /// out: after an instant of its went away (a timer disarmed or moved later, a deadline left
    /// by an early wake-up). Costs a look at its own endpoints and `O(log N)`.
    #[inline(never)]
    pub(super) fn refresh_instant(&mut self, id: DomainId) {
        let exact = self.domains.exact_instant(id);
        self.sched.set_instant(id, exact);
    }

    /// Makes the head of [`Scheduler::instants`] exact: while the earliest entry is earlier
    /// than its domain's real next instant (left by a timer disarmed, a domain woken early or
    /// dead), moves it there or takes it out. Each step settles one domain for good, so this
    /// ends; it runs when nothing can run, where the instant to wait for must be exact, or an
    /// instant left by a domain that has died (a timer armed far ahead) would hold off the
    /// deadlock's wake-up.
    #[cold]
    #[inline(never)]
    fn settle_instants(&mut self) {
        while let Some((t, id)) = self.sched.first_instant() {
            match self.domains.exact_instant(id) {
                Some(exact) if exact == t => return,
                exact => self.sched.set_instant(id, exact),
            }
        }
    }

    /// Every live domain is blocked and nothing timed can wake any of them: each `block`
    /// returns `WouldDeadlock`, and each memory call waiting for frames runs again (its
    /// arguments untouched; with no revocation under way it gets its frames, sends a new
    /// notice or fails with `NoMemory`).
    pub(super) fn break_deadlock(&mut self) {
        let now = now_ns::<P>();
        for (id, d) in self.domains.iter_mut() {
            if d.ending.is_some() || d.blocked.take().is_none() {
                continue;
            }
            if !core::mem::take(&mut d.waiting_for_frames) {
                d.ctx.set_result(SysError::WouldDeadlock as usize, 0);
            }
            self.sched.policy.wake(id.index(), now);
        }
    }

    /// Copies domain `id`'s accounts from the scheduler into its control block.
    fn publish_accounts(&self, id: DomainId) {
        let (Some(frame), Some((a, start))) =
            (self.domains[id].dcb, self.sched.policy.view(id.index()))
        else {
            return;
        };
        let cpu = &P::dcb(frame).cpu;
        cpu.period_start_ns.store(start, Ordering::Relaxed);
        cpu.guaranteed_ns.store(a.guaranteed, Ordering::Relaxed);
        cpu.extra_ns.store(a.extra, Ordering::Relaxed);
        cpu.periods.store(a.periods, Ordering::Relaxed);
        cpu.deadlines_missed.store(a.deadlines_missed, Ordering::Release);
    }
}

/// Where the CPU goes after the current domain stops running: saves its floating-point state
/// (if `save`: it is still alive), then makes the domain the scheduler picks the current one
/// and switches address spaces, idling until the next instant something can happen if none can
/// run. Contexts stay where they are, in their domains: the trap path saved the current one
/// there and resumes the one [`Scheduler::current`] names.
fn switch<P: Platform>(w: &mut World<P>, save: bool) {
    let previous = w.sched.current;
    if save {
        let d = &mut w.domains[previous];
        P::save_fp(&mut d.ctx, &mut d.fp);
    }
    loop {
        let now = P::now_ticks();
        if w.sched.stop_at.is_some_and(|t| t <= now) {
            info!("stop: the time given by stop= has come");
            if w.sched.tracing() {
                for id in w.domains.ids() {
                    w.log_events_received(id);
                }
            }
            w.reports.summary(&w.domains, w.sched.idle_ticks, &w.sched.policy);
            P::exit(crate::Exit::Success);
        }
        // After kernel work for other domains, charged to them, the dispatch is at its end.
        let at = w.expire(now);
        let at_ns = ns_from_ticks::<P>(at);
        let picked = w.sched.policy.dispatch(at_ns);
        w.publish_accounts(previous);
        w.sched.log_periods();
        if let Some(pick) = picked {
            let picked = client_id(pick.client);
            if w.domains[picked].job.is_some() {
                w.sched.note_on_cpu(Some(pick.client), at_ns);
                // Kernel work for it, in chunks, on its time: to the end of its dispatch or the
                // next timed event, then the scheduler is asked again.
                let until = ticks_from_ns_up::<P>(pick.until);
                let stop = w.sched.earliest_deadline().map_or(until, |t| t.min(until));
                w.run_job(picked, stop);
                continue;
            }
            w.sched.current = picked;
            w.publish_accounts(picked);
            let d = &mut w.domains[picked];
            P::restore_fp(&mut d.ctx, &d.fp);
            let reason = upcall(d);
            if let Some(space) = &d.space {
                space.activate();
            }
            // One test of the trace flag on the way to user mode.
            if w.sched.tracing() {
                w.sched.log_dispatch(pick.client, reason, at_ns);
            }
            let until = ticks_from_ns_up::<P>(pick.until);
            P::arm_timer(w.sched.earliest_deadline().map_or(until, |t| t.min(until)));
            return;
        }
        if w.domains.records().all(|d| d.ending.is_some()) && !w.domains.burying() {
            w.reports.summary(&w.domains, w.sched.idle_ticks, &w.sched.policy);
            P::exit(crate::Exit::Success);
        }
        w.sched.note_on_cpu(None, at_ns);
        if w.modelled_device_busy() {
            w.idle_for_modelled_device();
            continue;
        }
        // Nothing can run: the instant to wait for must be exact, or an instant left by a
        // domain that has died (a timer armed far ahead) would hold off the deadlock's wake-up.
        // Everything due by `now` has been expired above, so the exact one is later still.
        w.settle_instants();
        let replenish = w.sched.policy.next_event().map(ticks_from_ns_up::<P>);
        match [replenish, w.sched.earliest_deadline()].into_iter().flatten().min() {
            Some(deadline) => w.idle_until(deadline),
            None if w.devices.any_bound() => w.idle_until_interrupt(),
            None => {
                warn!("every domain is blocked without a deadline: waking them all");
                w.break_deadlock();
            }
        }
    }
}

impl<P: Platform> World<P> {
    /// Nothing to run until `deadline` (timer ticks): waits for it or a device's interrupt,
    /// counting the wait as idle time, then delivers any interrupt. Device interrupts are taken
    /// in user mode (and delivered on that trap's path) or here, while idle.
    #[cold]
    #[inline(never)]
    fn idle_until(&mut self, deadline: u64) {
        self.idle(|| {
            P::arm_timer(deadline);
            while P::now_ticks() < deadline && !super::device::interrupts_raised() {
                P::wait_for_interrupt();
            }
            P::disarm_timer();
        });
    }

    /// Runs `wait`, counting the time it takes as idle time, then delivers any interrupt.
    #[inline(always)]
    fn idle(&mut self, wait: impl FnOnce()) {
        let start = P::now_ticks();
        wait();
        self.sched.idle_ticks += P::now_ticks() - start;
        self.deliver_interrupts(None);
    }

    /// Nothing to run while a disk with a model has requests at its device: waits for an
    /// interrupt with no timer armed, counting the wait as idle time. Under `-icount` the
    /// clock then stands still while the host does the device's work, so the driver's model
    /// alone sets how long the disk takes; deadlines that fall meanwhile (real time, without
    /// `-icount`) are met late by the device's latency. A driver is trusted with its device
    /// (it is as trusted as the kernel without an IOMMU) and with this flag alike. Nothing
    /// but the driver, which cannot run meanwhile, lowers the flag: the interrupt ends the wait.
    #[cold]
    #[inline(never)]
    fn idle_for_modelled_device(&mut self) {
        self.idle(|| {
            P::quiesce_timer();
            while !super::device::interrupts_raised() {
                P::wait_for_interrupt();
            }
        });
    }

    /// Nothing to run and nothing timed, but a device's interrupt can still wake its driver
    /// domain, which may then wake the others: waits for one, counting the wait as idle time.
    /// The timer still wakes the CPU every millisecond, a backstop: the loop looks again even
    /// if no interrupt woke the CPU.
    #[cold]
    #[inline(never)]
    fn idle_until_interrupt(&mut self) {
        self.idle(|| {
            while !super::device::interrupts_raised() {
                let until = P::now_ticks() + super::clock::ticks_from_ns::<P>(1_000_000);
                P::arm_timer(until);
                while P::now_ticks() < until && !super::device::interrupts_raised() {
                    P::wait_for_interrupt();
                }
                P::disarm_timer();
            }
        });
    }
}

/// The system call domain `id` made, done.
#[inline(always)]
fn call<P: Platform>(w: &mut World<P>, id: DomainId) -> Next {
    let (number, args) = w.domains[id].ctx.call();
    syscall::dispatch(w, id, number, args)
}

/// The current domain's context, where the trap path resumes it.
fn current_context<P: Platform>(w: &mut World<P>) -> NonNull<P::Context> {
    NonNull::from(&mut *w.domains[w.sched.current].ctx)
}

/// The context of the first domain to run, once every domain is loaded: as after a switch
/// from nothing (ends the run if no domain could be created).
pub(super) fn first<P: Platform>(w: &mut World<P>) -> NonNull<P::Context> {
    switch(w, false);
    current_context(w)
}

/// If domain `d` has activations on and a handler, turns its context (where it stopped) into
/// an activation: the context goes to the control block's `saved`, activations go off, and the
/// context enters the handler instead. Returns the activation's reason bits
/// ([`abi::activation`]), 0 if there was none.
fn upcall<P: Platform>(d: &mut super::Domain<P>) -> u64 {
    let (Some((entry, stack)), Some(dcb_frame)) = (d.handler, d.dcb) else { return 0 };
    let dcb = P::dcb(dcb_frame);
    if dcb.activations.load(Ordering::Acquire) != 1 {
        return 0;
    }
    P::write_saved_context(dcb_frame, &d.ctx.saved());
    dcb.activations.store(0, Ordering::Release);
    dcb.upcalls.fetch_add(1, Ordering::Relaxed);
    let mut reason = abi::activation::SCHEDULED;
    // The event is reported, and stays pending for the next `block`: a domain that looked at
    // its endpoints just before it was preempted, and found nothing, then blocks; that block
    // must return at once, not sleep through the event the handler was told of.
    if d.pending {
        reason |= abi::activation::EVENT;
    }
    if d.revocation.is_some() {
        reason |= abi::activation::REVOKE;
    }
    d.ctx.enter_handler(entry, stack, [reason as usize, d.dcb_va]);
    reason
}

/// Entry from the arch trap handler (through the kernel, which holds the world `w`) for every
/// trap taken in U-mode, whose registers the trap path saved in the current domain's context; says what to resume: that context with a system
/// call's results, or the current domain's context (another domain's, or changed).
///
/// Hinted inline: x86_64 has one caller, and keeping the system-call path in it saves a call
/// and a frame on every system call (LLVM stopped inlining it unasked once the calls grew).
#[inline]
pub fn on_user_trap<P: Platform>(w: &mut World<P>, trap: UserTrap) -> Resume<P::Context> {
    let id = w.sched.current;
    match trap {
        UserTrap::SystemCall => match call(w, id) {
            Next::Return(result) => {
                let (status, value) = match result {
                    Ok(value) => (0, value),
                    Err(e) => (e as usize, 0),
                };
                // Unless the call woke a domain that should run before the caller.
                if !core::mem::take(&mut w.sched.preempt) {
                    return Resume::Results(status, value);
                }
                w.domains[id].ctx.set_result(status, value);
                switch(w, true);
            }
            Next::Yield => {
                w.domains[id].ctx.set_result(0, 0);
                w.sched.policy.yield_now(id.index(), now_ns::<P>());
                switch(w, true);
            }
            Next::Resumed => {}
            Next::Block(deadline) => {
                let d = &mut w.domains[id];
                d.ctx.set_result(0, 0);
                d.blocked = Some(deadline);
                w.sched.note_instant(deadline, id);
                w.sched.policy.block(id.index(), now_ns::<P>());
                switch(w, true);
            }
            rare => after_rare_call(w, id, rare),
        },
        UserTrap::Timer => on_timer(w),
        UserTrap::Device => on_device_interrupt(w),
        UserTrap::Fault(fault) => {
            if let Some(resume) = on_fault(w, id, fault) {
                return resume;
            }
        }
    }
    Resume::Context(current_context(w).as_ptr())
}

/// A timer interrupt taken in user mode: if it came for another domain's instant (a timer, a
/// deadline), the pass that serves it runs first, from the handler's first reading of the
/// clock, before the switch saves anything, so that the interrupted domain pays as little of
/// it as it can; then the scheduler decides what runs. Out of line, off the system calls'
/// path.
#[inline(never)]
fn on_timer<P: Platform>(w: &mut World<P>) {
    let entered = P::now_ticks();
    if entered >= w.sched.next_instant() {
        w.expire_pass(entered);
    }
    switch(w, true);
}

/// A device's interrupt taken in user mode: delivered to its driver, which pays for the
/// delivery rather than the interrupted domain; the interrupted domain goes on unless the
/// driver woken should run first. Out of line, off the system calls' path.
#[cold]
#[inline(never)]
fn on_device_interrupt<P: Platform>(w: &mut World<P>) {
    let entered = P::now_ticks();
    w.sched.frozen = Some(ns_from_ticks::<P>(entered));
    w.deliver_interrupts(Some(entered));
    w.sched.frozen = None;
    if core::mem::take(&mut w.sched.preempt) {
        switch(w, true);
    }
}

/// The calls that end in waiting for frames, a kernel job, death or an error with a value:
/// out of line, so that the common calls' path stays short.
#[cold]
#[inline(never)]
fn after_rare_call<P: Platform>(w: &mut World<P>, id: DomainId, next: Next) {
    match next {
        Next::WaitForFrames => {
            // The call runs again once a revocation has freed frames.
            let d = &mut w.domains[id];
            d.ctx.restart_call();
            d.blocked = Some(u64::MAX);
            d.waiting_for_frames = true;
            w.sched.policy.block(id.index(), now_ns::<P>());
            switch(w, true);
        }
        Next::Refused(e, value) => {
            w.domains[id].ctx.set_result(e as usize, value);
            // Unless the call woke a domain that should run before the caller.
            if core::mem::take(&mut w.sched.preempt) {
                switch(w, true);
            }
        }
        Next::Job(job) => {
            w.domains[id].job = Some(job);
            switch(w, true);
        }
        Next::Exit(code) => {
            w.begin_death(id, Ending::Exited(code));
            switch(w, false);
        }
        // Handled on the common path.
        Next::Return(_) | Next::Yield | Next::Resumed | Next::Block(_) => {}
    }
}

/// A fault of domain `id` in U-mode: delivered to its stretch driver (the context to resume
/// is returned), or the domain is terminated with a report and another runs (`None`).
#[inline(never)]
fn on_fault<P: Platform>(
    w: &mut World<P>,
    id: DomainId,
    fault: UserFault,
) -> Option<Resume<P::Context>> {
    let why = match fault {
        UserFault::Page { addr, access } => match w.deliver_fault(id, addr, access) {
            Ok(()) => return Some(Resume::Context(current_context(w).as_ptr())),
            Err(why) => Some((addr, why)),
        },
        _ => None,
    };
    let pc = w.domains[id].ctx.pc();
    report_fault(&w.domains, &w.stretches, id, fault, pc);
    if let Some((_, why)) = why.filter(|&(addr, _)| w.stretches.in_managed(id, addr)) {
        error!(
            "domain {=str}: the fault was not delivered to its stretch driver: {=str}",
            w.domains[id].name.as_str(),
            why
        );
    }
    w.begin_death(id, Ending::Terminated(super::Termination::Fault(fault)));
    switch(w, false);
    None
}
