//! Self-paging in the domain: binding stretch drivers to managed stretches and running them
//! when the kernel delivers a page fault or a revocation notice.
//!
//! [`bind`] creates a managed stretch (`stretch_create_managed`), binds the driver to it and
//! records the pair; it also turns activations on. From then on a touch of an unmapped page of
//! the stretch traps to the kernel, which enters the activation handler
//! ([`crate::activation`]) with [`abi::activation::FAULT`] and the fault in the control block.
//! The handler continues the faulting thread in the fault dispatch, which runs the stretch's
//! driver as that thread, on the domain's own CPU contract: if it waits (for an event, a disk,
//! the network) the thread package runs the domain's other threads meanwhile. When the driver
//! has mapped the page, the thread resumes the interrupted context and the access is retried.
//!
//! A fault the driver fails (for instance, no frame left in the contract) ends the faulting
//! thread with a report; the domain's first thread ending that way exits the domain with
//! [`EXIT_FAULT`]. So does a fault in a managed stretch no driver is bound to, and a fault on a
//! stretch whose driver is already running in the same thread (a driver touching its own
//! stretch). The kernel terminates the domain itself for faults it cannot deliver (activations
//! off, rights exceeded).
//!
//! Revocation: the kernel enters the handler with [`abi::activation::REVOKE`] while a notice is
//! outstanding; the interrupted thread then runs the bound drivers' `revoke` (in the order they
//! were bound, until the notice's frames are released) before it resumes.
//!
//! The parts, each with one owner:
//! - [`crate::activation`]: the handler entry, the one way in from the kernel;
//! - `registry`: the bound stretches and their drivers, each lent to one thread at a time and
//!   borrowed only for the length of a closure (its module documentation has the rules);
//! - `dispatch`: which driver runs for a fault or a notice, and when (waiting for a driver
//!   another thread has out, refusing a driver's fault in its own stretch);
//! - [`SysKernel`] (`kernel`): the kernel's memory calls as the drivers'
//!   [`stretch_driver::MemoryKernel`];
//! - this module: the calls an application makes ([`bind`], [`with_driver`], ...).
//!
//! What a driver may do: a fault interrupts only code that touched a managed stretch, so
//! `fault` may wait, yield and allocate (see [`crate::heap`] for what growing the heap costs
//! there). `revoke` runs as the thread the notice interrupted, never inside the runtime's
//! critical code (the allocator holding the heap's lock, a switch between threads: a notice
//! that interrupts those is answered at a later activation), so it may allocate and wait; the
//! paged driver writes dirty pages back there. `docs/stretch-driver-tutorial.md` has the rules.
//!
//! Invariants: a binding's driver runs in one thread at a time (others wait their turn); the
//! registry is touched only by the domain's single flow of control (threads switch
//! cooperatively, and the activation handler reads only the control block and atomics).
//!
//! Not implemented: unbinding and destroying a bound stretch, and more than [`MAX_BINDINGS`]
//! bindings.

pub(crate) mod dispatch;
mod kernel;
mod registry;

use core::any::TypeId;

use abi::{PAGE_SIZE, Rights, SysError};
use stretch_driver::{DriverError, DriverStats, StretchDriver, StretchInfo};

pub use kernel::SysKernel;
use registry::Taken;

use crate::syscall;

/// Exit code of a domain whose first thread took a page fault that could not be resolved.
pub const EXIT_FAULT: i32 = 105;
/// What `join` returns for a thread ended by a page fault that could not be resolved.
pub const FAULT_FAILED: usize = usize::MAX - 1;
/// Most stretches bound at once.
pub const MAX_BINDINGS: usize = 16;

/// Why [`bind`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindError {
    /// The kernel refused to create the managed stretch.
    Kernel(SysError),
    /// The driver refused the stretch (it was destroyed again).
    Driver(DriverError),
    /// [`MAX_BINDINGS`] stretches are bound already.
    TooMany,
}

impl core::fmt::Display for BindError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BindError::Kernel(e) => {
                write!(f, "the kernel refused the stretch (error {})", *e as usize)
            }
            BindError::Driver(e) => write!(f, "the driver refused the stretch: {e}"),
            BindError::TooMany => f.write_str("too many bound stretches"),
        }
    }
}

/// Creates a managed stretch of `bytes` with `rights` and binds `driver` to it; returns the
/// stretch. Turns activations on, so that its faults reach the driver.
pub fn bind<D: StretchDriver + 'static>(
    driver: &'static mut D,
    bytes: usize,
    rights: Rights,
) -> Result<StretchInfo, BindError> {
    if !registry::has_room() {
        return Err(BindError::TooMany);
    }
    let base = syscall::stretch_create_managed(bytes, rights).map_err(BindError::Kernel)?;
    let info = StretchInfo { base, pages: bytes.div_ceil(PAGE_SIZE), rights };
    if let Err(e) = driver.bind(&mut SysKernel, info) {
        let _ = syscall::stretch_destroy(base);
        return Err(BindError::Driver(e));
    }
    if !registry::insert(info, driver) {
        return Err(BindError::TooMany);
    }
    crate::thread::init_activations();
    Ok(info)
}

/// Creates a driver's window: a managed stretch of `pages` pages, read-write, bound to no
/// driver, that only the driver maps and touches (it fills frames there before moving them
/// into its stretch with `remap`, and moves pages there to save them). A fault in it ends the
/// faulting thread like a fault in any unbound stretch.
pub fn create_window(pages: usize) -> Result<usize, SysError> {
    let rights = Rights(Rights::READ.0 | Rights::WRITE.0);
    syscall::stretch_create_managed(pages * PAGE_SIZE, rights)
}

/// What the driver bound to the stretch at `base` has done, and how many faults the runtime
/// saw it resolve; `None` if no driver is bound there or it is running now.
pub fn driver_stats(base: usize) -> Option<(DriverStats, u64)> {
    let Taken::Lent(lent) = registry::take(base, None, crate::thread::current()) else {
        return None;
    };
    let (stats, index) = (lent.driver.stats(), lent.index());
    lent.give_back(false);
    Some((stats, registry::resolved(index)))
}

/// Runs `f` on the driver of type `D` bound to the stretch at `base` (to ask it what it
/// holds, or to `lock` pages); `None` if no driver of that type is bound there or it is
/// running now (in another thread's fault).
pub fn with_driver<D: StretchDriver + 'static, R>(
    base: usize,
    f: impl FnOnce(&mut D, &mut SysKernel) -> R,
) -> Option<R> {
    let of = Some(TypeId::of::<D>());
    let Taken::Lent(lent) = registry::take(base, of, crate::thread::current()) else {
        return None;
    };
    let driver: &mut dyn core::any::Any = &mut *lent.driver;
    let result = driver.downcast_mut::<D>().map(|d| f(d, &mut SysKernel));
    lent.give_back(false);
    result
}

/// How many times a fault found its stretch's driver busy with another thread's fault and
/// waited for it (parked, never spinning).
pub fn waits_for_driver() -> u64 {
    registry::waits_for_driver()
}
