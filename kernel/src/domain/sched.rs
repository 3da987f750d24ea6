//! Which domain runs: round robin with a time slice, blocking with deadlines, and the idle loop.
//!
//! Everything here runs in the trap handler with interrupts off. The CPU is never idle while a
//! domain can run; when every live domain is blocked, the kernel sleeps (`wfi`) until the
//! earliest deadline. If none has a deadline nothing can ever wake them, so each `block`
//! returns `WouldDeadlock`. With no live domain left the run summary ends the run.

use abi::SysError;

use super::syscall::{self, Next};
use super::{Ending, TIME_SLICE_US, WORLD, World, report_fault, summary};
use crate::arch::{self, UserContext, UserTrap};

fn ticks_from_us(us: u64) -> u64 {
    arch::time::frequency() * us / 1_000_000
}

/// Nanoseconds since boot to timer ticks (saturating: `u64::MAX` stays "never").
pub fn ticks_from_ns(ns: u64) -> u64 {
    if ns == u64::MAX {
        return u64::MAX;
    }
    ((ns as u128 * arch::time::frequency() as u128) / 1_000_000_000).min(u64::MAX as u128 - 1)
        as u64
}

impl World {
    /// Fires due timer endpoints and unblocks every domain whose deadline has passed.
    fn expire(&mut self, now: u64) {
        self.fire_timers(now);
        for d in self.domains.iter_mut().filter(|d| d.ending.is_none()) {
            if d.blocked.is_some_and(|deadline| deadline <= now) {
                d.blocked = None;
                if let Some(frame) = d.dcb {
                    crate::phys::dcb(frame)
                        .wakeups
                        .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
                }
            }
        }
    }

    /// The earliest deadline of a blocked domain or an armed timer endpoint.
    fn earliest_deadline(&self) -> Option<u64> {
        let blocked =
            self.domains.iter().filter_map(|d| d.blocked).filter(|&t| t != u64::MAX).min();
        match (blocked, self.earliest_timer()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Where the CPU goes after `frame`'s domain stops running: saves its context (if `save`),
/// then loads the next runnable domain's into `frame` and switches address spaces, idling until
/// a deadline if every domain is blocked.
fn switch(w: &mut World, frame: &mut UserContext, save: bool) {
    if save {
        let d = &mut w.domains[w.current];
        arch::save_fp(frame, &mut d.fp);
        d.ctx = frame.clone();
    }
    loop {
        let now = arch::time::now_ticks();
        w.expire(now);
        if let Some(next) = w.next_runnable() {
            w.current = next;
            let d = &mut w.domains[next];
            *frame = d.ctx.clone();
            arch::restore_fp(frame, &d.fp);
            upcall(d, frame);
            if let Some(space) = &d.space {
                space.activate();
            }
            let slice_end = now + ticks_from_us(TIME_SLICE_US);
            arch::timer::arm(w.earliest_deadline().map_or(slice_end, |t| t.min(slice_end)));
            return;
        }
        if w.domains.iter().all(|d| d.ending.is_some()) {
            summary(w);
            crate::shutdown(crate::ExitCode::Success);
        }
        match w.earliest_deadline() {
            Some(deadline) => {
                arch::timer::arm(deadline);
                while arch::time::now_ticks() < deadline {
                    arch::wait_for_interrupt();
                }
                arch::timer::disarm();
            }
            None => {
                for d in w.domains.iter_mut().filter(|d| d.blocked.is_some()) {
                    d.blocked = None;
                    d.ctx.set_result(SysError::WouldDeadlock as usize, 0);
                }
                defmt::warn!("every domain is blocked without a deadline: waking them all");
            }
        }
    }
}

/// If domain `d` has activations on and a handler, turns the context in `frame` (where it
/// stopped) into an activation: the context goes to the control block's `saved`, activations
/// go off, and `frame` enters the handler instead.
fn upcall(d: &mut super::Domain, frame: &mut UserContext) {
    let (Some((entry, stack)), Some(dcb_frame)) = (d.handler, d.dcb) else { return };
    let dcb = crate::phys::dcb(dcb_frame);
    if dcb.activations.load(core::sync::atomic::Ordering::Acquire) != 1 {
        return;
    }
    crate::phys::write_saved_context(dcb_frame, &frame.saved());
    dcb.activations.store(0, core::sync::atomic::Ordering::Release);
    dcb.upcalls.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    let mut reason = abi::activation::SCHEDULED;
    if core::mem::take(&mut d.pending) {
        reason |= abi::activation::EVENT;
    }
    frame.enter_handler(entry, stack, [reason as usize, d.dcb_va]);
}

/// Entry from the arch trap handler for every trap taken in U-mode.
pub fn on_user_trap(frame: &mut UserContext, trap: UserTrap) {
    let mut guard = WORLD.lock();
    let w = guard.as_mut().expect("user trap without domains");
    let id = w.current as u32;
    match trap {
        UserTrap::SystemCall { number, args } => match syscall::dispatch(w, id, number, args) {
            Next::Return(result) => match result {
                Ok(value) => frame.set_result(0, value),
                Err(e) => frame.set_result(e as usize, 0),
            },
            Next::Yield => {
                frame.set_result(0, 0);
                switch(w, frame, true);
            }
            Next::Resumed(ctx) => frame.load(&ctx),
            Next::Block(deadline) => {
                frame.set_result(0, 0);
                w.domains[id as usize].blocked = Some(deadline);
                switch(w, frame, true);
            }
            Next::Exit(code) => {
                w.kill(id, Ending::Exited(code));
                switch(w, frame, false);
            }
        },
        UserTrap::Timer => switch(w, frame, true),
        UserTrap::Fault { cause, addr } => {
            report_fault(w, id, cause, addr, frame.pc());
            w.kill(id, Ending::Terminated(cause));
            switch(w, frame, false);
        }
    }
}
