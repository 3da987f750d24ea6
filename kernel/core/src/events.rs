//! Event endpoints: counters in a domain's control block that other domains (and later the
//! kernel: timers, interrupts, faults, revocation) signal.
//!
//! Each endpoint names the one domain allowed to signal it. Signalling increments the counter
//! in the owner's control block and wakes the owner if it is blocked. When the allowed sender
//! dies, the endpoint is *closed*: its `closed` flag is set and the owner is woken, so a domain
//! waiting on a dead peer learns of it instead of waiting forever.

use crate::domain::{DomainId, Endpoint, KERNEL};
use abi::{MAX_EVENTS, SysError};
use core::sync::atomic::Ordering;

use super::World;
use crate::Platform;

impl<P: Platform> World<P> {
    /// A new endpoint of domain `owner` that `sender` may signal; its index.
    pub(super) fn alloc_endpoint(&mut self, owner: DomainId, sender: u32) -> Option<usize> {
        if self.domains.get(owner)?.endpoints.len() >= MAX_EVENTS {
            return None;
        }
        let room = |w: &mut World<P>| Ok(w.domains[owner].endpoints.try_reserve(1)?);
        self.with_kmem(owner, room).ok()?;
        let d = &mut self.domains[owner];
        d.endpoints.push(Endpoint { sender, closed: false, deadline: None });
        Some(d.endpoints.len() - 1)
    }

    /// `event_send`: domain `from` signals endpoint `ep` of domain `to`.
    pub(super) fn send_event(
        &mut self,
        from: DomainId,
        to: DomainId,
        ep: usize,
    ) -> Result<(), SysError> {
        let d = self.domain(to).ok_or(SysError::NotFound)?;
        let endpoint = d.endpoints.get(ep).ok_or(SysError::InvalidArgument)?;
        if endpoint.sender != from.raw() {
            return Err(SysError::PermissionDenied);
        }
        self.signal(to, ep);
        if self.sched.tracing() {
            log_event_sent::<P>(from, to, ep);
        }
        Ok(())
    }

    /// With `trace=sched`: how many times each endpoint of domain `id` was signalled, an
    /// `events received` record per endpoint signalled at least once, while its control block
    /// still holds the counts (as it dies, or when the run stops with it alive).
    #[cold]
    #[inline(never)]
    pub(super) fn log_events_received(&self, id: DomainId) {
        let Some(d) = self.domain(id) else { return };
        let Some(frame) = d.dcb else { return };
        let dcb = P::dcb(frame);
        for ep in 0..d.endpoints.len() {
            let count = dcb.events[ep].value.load(Ordering::Acquire);
            if count > 0 {
                info!(
                    "events received: domain={=usize} ep={=usize} count={=u64}",
                    id.index(),
                    ep,
                    count
                );
            }
        }
    }

    /// `timer_set`: arms (or with `None` cancels) timer endpoint `ep` of domain `id`.
    pub(super) fn set_timer(
        &mut self,
        id: DomainId,
        ep: usize,
        deadline: Option<u64>,
    ) -> Result<(), SysError> {
        let d = &mut self.domains[id];
        let endpoint = d.endpoints.get_mut(ep).ok_or(SysError::NotFound)?;
        if endpoint.sender != KERNEL {
            return Err(SysError::PermissionDenied);
        }
        let was = core::mem::replace(&mut endpoint.deadline, deadline);
        match (was, deadline) {
            // Armed, or armed earlier: the domain's instant can only come sooner.
            (None, Some(t)) => self.sched.note_instant(t, id),
            (Some(old), Some(t)) if t <= old => self.sched.note_instant(t, id),
            // Disarmed or moved later: its instant in the queue is exact again, so that no
            // timer interrupt comes for a timer that no longer fires then.
            (Some(_), _) => self.refresh_instant(id),
            (None, None) => {}
        }
        Ok(())
    }

    /// Signals every armed timer endpoint of live domain `id` whose deadline is at or before
    /// `now` (its own endpoints only: the scheduler's queue of instants says which domains are
    /// due).
    pub(super) fn fire_timers(&mut self, id: DomainId, now: u64) {
        for ep in 0..self.domains[id].endpoints.len() {
            let e = &mut self.domains[id].endpoints[ep];
            if e.deadline.is_some_and(|t| t <= now) {
                e.deadline = None;
                self.signal(id, ep);
            }
        }
    }

    /// Increments endpoint `ep` of live domain `to` and wakes it.
    pub(super) fn signal(&mut self, to: DomainId, ep: usize) {
        let d = &mut self.domains[to];
        if let Some(frame) = d.dcb {
            P::dcb(frame).events[ep].value.fetch_add(1, Ordering::Release);
        }
        self.wake(to);
    }

    /// Wakes domain `id` because one of its endpoints changed: a domain blocked in `block`
    /// becomes runnable (its `block` returns); a running one, or one blocked in a memory call
    /// waiting for frames, finds `pending` set at its next `block`.
    /// If the scheduler says the woken domain should run before the current one, `preempt` is
    /// set and the current call ends in a switch.
    pub(super) fn wake(&mut self, id: DomainId) {
        let d = &mut self.domains[id];
        if d.waiting_for_frames {
            // Blocked inside a memory call, not in `block`: the call goes on waiting for
            // frames, and the event is kept for its next `block`.
            d.pending = true;
            return;
        }
        if let Some(deadline) = d.blocked.take() {
            d.pending = false;
            if let Some(frame) = d.dcb {
                P::dcb(frame).wakeups.fetch_add(1, Ordering::Relaxed);
            }
            if deadline != u64::MAX {
                // Woken before its deadline: its instant in the queue goes, so that no timer
                // interrupt comes for it.
                self.refresh_instant(id);
            }
            if self.sched.policy.wake(id.index(), self.sched.now_ns::<P>()) {
                self.sched.preempt = true;
            }
        } else {
            d.pending = true;
        }
    }

    /// Closes every endpoint that only `dead` could signal, waking their owners.
    pub(super) fn close_endpoints_signalled_by(&mut self, dead: DomainId) {
        for owner in self.domains.ids() {
            if owner == dead || self.domain(owner).is_none() {
                continue;
            }
            let mut woke = false;
            let d = &mut self.domains[owner];
            for (i, e) in d.endpoints.iter_mut().enumerate() {
                if e.sender == dead.raw() && !e.closed {
                    e.closed = true;
                    if let Some(frame) = d.dcb {
                        P::dcb(frame).events[i].closed.store(1, Ordering::Release);
                    }
                    woke = true;
                }
            }
            if woke {
                self.wake(owner);
            }
        }
    }
}

/// With `trace=sched`: domain `from` signalled endpoint `ep` of domain `to`, now. Out of line,
/// off the untraced path.
#[cold]
#[inline(never)]
fn log_event_sent<P: Platform>(from: DomainId, to: DomainId, ep: usize) {
    info!(
        "event sent: from={=usize} to={=usize} ep={=usize} at={=u64}",
        from.index(),
        to.index(),
        ep,
        super::clock::now_ns::<P>()
    );
}
