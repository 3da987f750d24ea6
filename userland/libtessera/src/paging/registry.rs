//! The registry: the stretches bound in this domain and their drivers, lent to one thread at a
//! time.
//!
//! A binding holds its driver as the `&'static mut` that [`super::bind`] was given. A thread
//! that runs a driver (for a fault, a revocation notice, or [`super::with_driver`]) *takes it
//! out* of its binding ([`take`]), which marks the binding busy with that thread, runs it with
//! no borrow of the registry held, and puts it back ([`Lent::give_back`]), which wakes a thread
//! parked for it. So the driver has one user at a time by construction, and no code reaches it
//! through a pointer.
//!
//! Borrow rules: the registry itself is borrowed only inside this module, for the length of one
//! closure passed to the domain's cell ([`crate::thread::FlowCell::with`]), and such a
//! closure never runs a driver, never switches threads (parking and waking are outside it) and
//! never borrows the registry again (debug builds check the last). The activation handler never borrows it: what it reads
//! (whether a notice is being answered) lives in [`super::dispatch`]'s flags.

use core::any::{Any, TypeId};

use stretch_driver::{StretchDriver, StretchInfo};

use super::MAX_BINDINGS;
use crate::thread::FlowCell;

/// A driver the registry can lend out and, for [`super::with_driver`], name by its type.
pub(super) trait Driver: StretchDriver + Any {}

impl<T: StretchDriver + Any> Driver for T {}

/// One bound stretch.
struct Binding {
    info: StretchInfo,
    /// The driver, while no thread has it out.
    driver: Option<&'static mut dyn Driver>,
    /// The driver's concrete type, for [`super::with_driver`].
    type_id: TypeId,
    /// The thread that has the driver out, if any.
    busy: Option<usize>,
    /// Faults the driver resolved.
    resolved: u64,
    /// Threads parked until the driver is back.
    waiters: u32,
}

struct Registry {
    bindings: [Option<Binding>; MAX_BINDINGS],
    /// Times a fault found its stretch's driver out with another thread and waited.
    waits_for_driver: u64,
}

static REGISTRY: FlowCell<Registry> =
    FlowCell::new(Registry { bindings: [const { None }; MAX_BINDINGS], waits_for_driver: 0 });

/// Whether another stretch can be bound.
pub(super) fn has_room() -> bool {
    REGISTRY.with(|r| r.bindings.iter().any(Option::is_none))
}

/// Records `driver`, bound to `info`; `false` if [`MAX_BINDINGS`] stretches are bound already.
pub(super) fn insert<D: Driver>(info: StretchInfo, driver: &'static mut D) -> bool {
    let type_id = TypeId::of::<D>();
    REGISTRY.with(|r| match r.bindings.iter_mut().find(|b| b.is_none()) {
        Some(slot) => {
            *slot = Some(Binding {
                info,
                driver: Some(driver),
                type_id,
                busy: None,
                resolved: 0,
                waiters: 0,
            });
            true
        }
        None => false,
    })
}

/// Whether `b` binds the stretch at `base` to a driver of type `of` (or of any type).
#[inline]
fn matches(b: &Option<Binding>, base: usize, of: Option<TypeId>) -> bool {
    b.as_ref().is_some_and(|b| b.info.base == base && of.is_none_or(|t| b.type_id == t))
}

/// What [`take`] found.
pub(super) enum Taken {
    /// The driver, now out with the caller.
    Lent(Lent),
    /// No binding there.
    Unbound,
    /// The caller has the driver out already.
    Mine,
    /// Another thread has it out: the binding to park on.
    Busy(usize),
}

/// A driver out of its binding with the thread that took it: its only user until
/// [`Lent::give_back`].
pub(super) struct Lent {
    index: usize,
    /// The driver.
    pub(super) driver: &'static mut dyn Driver,
}

/// Takes the driver bound to the stretch at `base` (of type `of`, or of any type) out for
/// thread `me`, in one borrow.
#[inline]
pub(super) fn take(base: usize, of: Option<TypeId>, me: usize) -> Taken {
    REGISTRY.with(|r| match r.bindings.iter().position(|b| matches(b, base, of)) {
        Some(index) => lend(&mut r.bindings[index], index, me),
        None => Taken::Unbound,
    })
}

/// Takes binding `index`'s driver out for thread `me`.
#[inline]
pub(super) fn take_at(index: usize, me: usize) -> Taken {
    REGISTRY.with(|r| match r.bindings.get_mut(index) {
        Some(b) => lend(b, index, me),
        None => Taken::Unbound,
    })
}

/// Lends binding `index` (`b`)'s driver to thread `me`, if no thread has it out.
#[inline]
fn lend(b: &mut Option<Binding>, index: usize, me: usize) -> Taken {
    let Some(b) = b.as_mut() else { return Taken::Unbound };
    match b.busy {
        None => match b.driver.take() {
            Some(driver) => {
                b.busy = Some(me);
                Taken::Lent(Lent { index, driver })
            }
            None => Taken::Unbound,
        },
        Some(t) if t == me => Taken::Mine,
        Some(_) => Taken::Busy(index),
    }
}

impl Lent {
    /// Its binding.
    pub(super) fn index(&self) -> usize {
        self.index
    }

    /// Puts the driver back, counting a resolved fault if `resolved`, and wakes a thread
    /// parked for it if there is one (the fault path's common case has none, and pays nothing
    /// for the check).
    #[inline]
    pub(super) fn give_back(self, resolved: bool) {
        let Lent { index, driver } = self;
        let waiters = REGISTRY.with(|r| {
            let Some(b) = r.bindings[index].as_mut() else { return 0 };
            b.driver = Some(driver);
            b.busy = None;
            b.resolved += u64::from(resolved);
            b.waiters
        });
        if waiters > 0 {
            crate::thread::wake_one(lock_id(index));
        }
    }
}

/// What a thread waiting for binding `index`'s driver parks on: the binding's address.
#[inline]
fn lock_id(index: usize) -> usize {
    REGISTRY.with(|r| &r.bindings[index] as *const Option<Binding> as usize)
}

/// Parks the running thread until binding `index`'s driver is given back; counts the wait
/// with `count`.
pub(super) fn park(index: usize, count: bool) {
    REGISTRY.with(|r| {
        r.waits_for_driver += u64::from(count);
        if let Some(b) = r.bindings[index].as_mut() {
            b.waiters += 1;
        }
    });
    crate::thread::wait_for(lock_id(index));
    REGISTRY.with(|r| {
        if let Some(b) = r.bindings[index].as_mut() {
            b.waiters -= 1;
        }
    });
}

/// Faults binding `index`'s driver resolved.
pub(super) fn resolved(index: usize) -> u64 {
    REGISTRY.with(|r| r.bindings[index].as_ref().map_or(0, |b| b.resolved))
}

/// Times a fault waited for a driver out with another thread.
pub(super) fn waits_for_driver() -> u64 {
    REGISTRY.with(|r| r.waits_for_driver)
}
