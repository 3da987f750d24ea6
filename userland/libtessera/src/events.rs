//! Event endpoints: counters in the domain's control block that another domain signals with
//! `event_send` (each endpoint accepts events from exactly one domain, set up by the kernel, for
//! instance the other end of an IO channel).
//!
//! The way to wait is: read the endpoint's `value`, decide from the shared state that there is
//! nothing to do yet, then `wait` for the value to move past what was read. No signal is lost
//! in between: a signal after the read either makes the value differ already or makes the
//! kernel's `block` return at once.
//!
//! When the endpoint's only sender dies the kernel *closes* it (its `closed` flag becomes 1) and
//! wakes the owner; `wait` then reports [`WaitError::Closed`] unless the value moved.
//!
//! The waiting logic itself ([`wait_on`]) is portable and takes the `block` call and the clock
//! as functions, so that it is tested on the host.

use core::fmt;
use core::sync::atomic::Ordering;

use abi::{EventSlot, SysError};

/// Why `wait` returned without the value moving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitError {
    /// The deadline passed.
    Timeout,
    /// The endpoint is closed (its sender died) and its value did not move past `past`.
    Closed,
    /// Every live domain is blocked without a deadline: nothing could ever signal.
    Deadlock,
    /// `block` failed in a way the ABI does not document for it.
    Sys(SysError),
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WaitError::Timeout => f.write_str("deadline passed"),
            WaitError::Closed => f.write_str("endpoint closed: its sender died"),
            WaitError::Deadlock => f.write_str("every domain is blocked without a deadline"),
            WaitError::Sys(e) => write!(f, "block failed with error {}", e as usize),
        }
    }
}

/// Waits until `slot`'s value exceeds `past`; returns the new value. `block(deadline_ns)` is the
/// kernel's `block`, `now()` its clock. The clock is read only when `deadline_ns` is not
/// `u64::MAX`. See `wait` (on the target) for the results.
pub fn wait_on(
    slot: &EventSlot,
    past: u64,
    deadline_ns: u64,
    mut block: impl FnMut(u64) -> Result<(), SysError>,
    now: impl Fn() -> u64,
) -> Result<u64, WaitError> {
    loop {
        let value = slot.value.load(Ordering::Acquire);
        if value > past {
            return Ok(value);
        }
        if slot.closed.load(Ordering::Acquire) != 0 {
            // The kernel closes an endpoint after its sender's last signal: read again, in case
            // that signal came between the two loads.
            let value = slot.value.load(Ordering::Acquire);
            return if value > past { Ok(value) } else { Err(WaitError::Closed) };
        }
        if deadline_ns != u64::MAX && now() >= deadline_ns {
            return Err(WaitError::Timeout);
        }
        match block(deadline_ns) {
            Ok(()) => {}
            Err(SysError::WouldDeadlock) => {
                let value = slot.value.load(Ordering::Acquire);
                return if value > past { Ok(value) } else { Err(WaitError::Deadlock) };
            }
            Err(e) => return Err(WaitError::Sys(e)),
        }
    }
}

#[cfg(target_os = "none")]
pub use runtime::{blocks, closed, value, wait, wakeups};
#[cfg(target_os = "none")]
pub(crate) use runtime::{slot, wait_slot};

/// The endpoints of this domain's control block and the real `block` call.
#[cfg(target_os = "none")]
mod runtime {
    use core::sync::atomic::{AtomicU64, Ordering};

    use abi::EventSlot;

    use super::{WaitError, wait_on};
    use crate::{dcb, syscall};

    /// How many times [`wait`] called `block`, in the whole domain.
    static BLOCKS: AtomicU64 = AtomicU64::new(0);

    /// Endpoint `ep` of this domain.
    ///
    /// # Panics
    /// If `ep` is not below [`abi::MAX_EVENTS`].
    pub(crate) fn slot(ep: usize) -> &'static EventSlot {
        match dcb().events.get(ep) {
            Some(slot) => slot,
            None => panic!("event endpoint {ep} does not exist"),
        }
    }

    /// The current value of endpoint `ep`: how many times it has been signalled.
    ///
    /// # Panics
    /// If `ep` is not below [`abi::MAX_EVENTS`].
    pub fn value(ep: usize) -> u64 {
        slot(ep).value.load(Ordering::Acquire)
    }

    /// Is endpoint `ep` closed (its only sender died, so its value will not move again)?
    ///
    /// # Panics
    /// If `ep` is not below [`abi::MAX_EVENTS`].
    pub fn closed(ep: usize) -> bool {
        slot(ep).closed.load(Ordering::Acquire) != 0
    }

    /// Waits until endpoint `ep`'s value exceeds `past` (typically a [`value`] read before
    /// checking the state the signals announce) and returns the new value, calling `block`
    /// as often as needed: other endpoints' signals wake the domain too. `deadline_ns` is a
    /// [`time_ns`](crate::time_ns) value, `u64::MAX` for none.
    ///
    /// Errors: [`WaitError::Closed`] if the endpoint is closed and the value did not move,
    /// [`WaitError::Timeout`] once the clock reaches the deadline, [`WaitError::Deadlock`] if
    /// every live domain is blocked without a deadline.
    ///
    /// # Panics
    /// If `ep` is not below [`abi::MAX_EVENTS`].
    pub fn wait(ep: usize, past: u64, deadline_ns: u64) -> Result<u64, WaitError> {
        wait_slot(slot(ep), past, deadline_ns)
    }

    /// [`wait`] on an endpoint already looked up with [`slot`] (for callers that wait on the
    /// same endpoint again and again, such as the ends of IO channels).
    #[inline]
    pub(crate) fn wait_slot(
        slot: &EventSlot,
        past: u64,
        deadline_ns: u64,
    ) -> Result<u64, WaitError> {
        let block = |deadline| {
            BLOCKS.fetch_add(1, Ordering::Relaxed);
            syscall::block(deadline)
        };
        wait_on(slot, past, deadline_ns, block, syscall::time_ns)
    }

    /// How many times [`wait`] called `block` in this domain so far (each call may return at
    /// once, if a signal was pending).
    pub fn blocks() -> u64 {
        BLOCKS.load(Ordering::Relaxed)
    }

    /// How many times the kernel woke this domain from `block` (by a signal or a deadline; a
    /// `block` that returned at once is not counted).
    pub fn wakeups() -> u64 {
        dcb().wakeups.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use core::cell::Cell;
    use core::sync::atomic::Ordering;
    use std::vec::Vec;

    use super::*;

    fn slot(value: u64, closed: bool) -> EventSlot {
        let s = EventSlot::default();
        s.value.store(value, Ordering::Relaxed);
        s.closed.store(u64::from(closed), Ordering::Relaxed);
        s
    }

    #[test]
    fn returns_at_once_when_the_value_already_moved() {
        let s = slot(5, false);
        let r = wait_on(&s, 4, u64::MAX, |_| panic!("must not block"), || panic!("no clock"));
        assert_eq!(r, Ok(5));
        // Moved, and closed too: the value wins.
        let s = slot(5, true);
        assert_eq!(wait_on(&s, 3, u64::MAX, |_| panic!("must not block"), || 0), Ok(5));
    }

    #[test]
    fn blocks_until_the_value_moves() {
        let s = slot(7, false);
        let mut calls = Vec::new();
        let r = wait_on(
            &s,
            7,
            u64::MAX,
            |deadline| {
                calls.push(deadline);
                // Two spurious wake-ups (another endpoint), then the signal.
                if calls.len() == 3 {
                    s.value.fetch_add(1, Ordering::Release);
                }
                Ok(())
            },
            || panic!("no deadline, no clock"),
        );
        assert_eq!(r, Ok(8));
        assert_eq!(calls, [u64::MAX; 3]);
    }

    #[test]
    fn closed_without_movement_is_an_error() {
        let s = slot(3, true);
        assert_eq!(
            wait_on(&s, 3, u64::MAX, |_| panic!("must not block"), || 0),
            Err(WaitError::Closed)
        );
        // Closed while blocked.
        let s = slot(3, false);
        let r = wait_on(
            &s,
            3,
            u64::MAX,
            |_| {
                s.closed.store(1, Ordering::Release);
                Ok(())
            },
            || 0,
        );
        assert_eq!(r, Err(WaitError::Closed));
        // The sender's last signal and the closing arrive together.
        let s = slot(3, false);
        let r = wait_on(
            &s,
            3,
            u64::MAX,
            |_| {
                s.value.fetch_add(1, Ordering::Release);
                s.closed.store(1, Ordering::Release);
                Ok(())
            },
            || 0,
        );
        assert_eq!(r, Ok(4));
    }

    #[test]
    fn deadlines_time_out() {
        let s = slot(0, false);
        let clock = Cell::new(100);
        let mut blocked = 0;
        let r = wait_on(
            &s,
            0,
            130,
            |deadline| {
                assert_eq!(deadline, 130);
                blocked += 1;
                clock.set(clock.get() + 20);
                Ok(())
            },
            || clock.get(),
        );
        assert_eq!(r, Err(WaitError::Timeout));
        assert_eq!(blocked, 2);
        // A deadline in the past never blocks.
        assert_eq!(
            wait_on(&s, 0, 50, |_| panic!("must not block"), || 60),
            Err(WaitError::Timeout)
        );
    }

    #[test]
    fn deadlock_and_other_errors() {
        let s = slot(0, false);
        let r = wait_on(&s, 0, u64::MAX, |_| Err(SysError::WouldDeadlock), || 0);
        assert_eq!(r, Err(WaitError::Deadlock));
        let r = wait_on(
            &s,
            0,
            u64::MAX,
            |_| {
                s.value.store(1, Ordering::Release);
                Err(SysError::WouldDeadlock)
            },
            || 0,
        );
        assert_eq!(r, Ok(1));
        let s = slot(0, false);
        let r = wait_on(&s, 0, u64::MAX, |_| Err(SysError::NoSuchCall), || 0);
        assert_eq!(r, Err(WaitError::Sys(SysError::NoSuchCall)));
    }

    #[test]
    fn errors_display() {
        use std::string::ToString;
        assert_eq!(WaitError::Sys(SysError::NoSuchCall).to_string(), "block failed with error 1");
        assert_eq!(WaitError::Closed.to_string(), "endpoint closed: its sender died");
    }
}
