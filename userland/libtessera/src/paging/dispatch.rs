//! Fault dispatch: which driver runs for a fault or a revocation notice, and when.
//!
//! [`resolve`] runs the driver of a fault's stretch as the faulting thread: a driver another
//! thread has out is waited for (parked, not spun), and a fault in a stretch whose driver this
//! very thread is running (a driver touching its own stretch) fails as recursive.
//! [`revoke_all`] asks the bound drivers, in the order they were bound, to release frames
//! until the kernel's notice is met. This module owns the two flags that say a notice is being
//! answered or is due once this thread's fault is done; the activation handler reads them
//! (they are atomics, so it borrows nothing) to leave a notice for later while one is in hand.

use core::sync::atomic::{AtomicBool, Ordering};

use stretch_driver::{Fault, FaultError};

use super::kernel::SysKernel;
use super::registry::{self, Taken};
use super::{MAX_BINDINGS, registry::Lent};

/// A revocation notice is being answered.
pub(crate) static REVOKING: AtomicBool = AtomicBool::new(false);
/// A notice came while this flow of control ran a driver: it is answered once that driver's
/// fault is done.
pub(crate) static REVOKE_AFTER_FAULT: AtomicBool = AtomicBool::new(false);

/// Why a fault could not be resolved.
pub(crate) enum Unresolved {
    Unbound,
    Recursive,
    Driver(FaultError),
}

impl core::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Unresolved::Unbound => f.write_str("no stretch driver is bound to the stretch"),
            Unresolved::Recursive => f.write_str("the fault is inside the stretch's own driver"),
            Unresolved::Driver(e) => write!(f, "the stretch driver failed the fault: {e}"),
        }
    }
}

/// Runs the driver of `fault`'s stretch, one thread at a time.
#[inline]
pub(crate) fn resolve(fault: &Fault) -> Result<(), Unresolved> {
    let me = crate::thread::current();
    let lent = loop {
        match registry::take(fault.stretch_base, None, me) {
            Taken::Lent(lent) => break lent,
            Taken::Unbound => return Err(Unresolved::Unbound),
            Taken::Mine => return Err(Unresolved::Recursive),
            // Another thread's fault is in the driver (waiting for a disk, say): park until it
            // is done, instead of spinning through the other threads.
            Taken::Busy(index) => registry::park(index, true),
        }
    };
    let result = lent.driver.fault(&mut SysKernel, *fault);
    lent.give_back(result.is_ok());
    if REVOKE_AFTER_FAULT.load(Ordering::Relaxed) {
        REVOKE_AFTER_FAULT.store(false, Ordering::Relaxed);
        REVOKING.store(true, Ordering::Relaxed);
        revoke_all();
        REVOKING.store(false, Ordering::Relaxed);
    }
    result.map_err(Unresolved::Driver)
}

/// Answers a revocation notice: asks the bound drivers, in the order they were bound, to
/// release frames until the notice is satisfied (or every driver has been asked). A driver
/// another thread has out is waited for (it may be writing back, or waiting for its disk), not
/// skipped; one this thread has out (the notice came while this thread ran the driver) is
/// asked once that fault is done ([`resolve`]).
pub(crate) fn revoke_all() {
    let wanted = || crate::dcb().revocation.frames_wanted.load(Ordering::Acquire) as usize;
    let me = crate::thread::current();
    for index in 0..MAX_BINDINGS {
        if wanted() == 0 {
            return;
        }
        let lent: Lent = match registry::take_at(index, me) {
            Taken::Lent(lent) => lent,
            Taken::Unbound => continue,
            Taken::Mine => {
                REVOKE_AFTER_FAULT.store(true, Ordering::Relaxed);
                continue;
            }
            Taken::Busy(_) => {
                // Parked until the driver is back; then this binding is looked at again.
                registry::park(index, false);
                match registry::take_at(index, me) {
                    Taken::Lent(lent) => lent,
                    _ => continue,
                }
            }
        };
        let left = wanted();
        if left > 0 {
            lent.driver.revoke(&mut SysKernel, left);
        }
        lent.give_back(false);
        if left == 0 {
            return;
        }
    }
}
