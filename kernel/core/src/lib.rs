//! The kernel core: domains, the schedulable principals of Tessera, each with a protection
//! domain, a saved context, a memory contract and the stretches it owns; the system calls
//! that change them; and the scheduler that runs them. It is portable logic, generic over a
//! [`Platform`] (the arch contract's [`contract::AddressSpaceOps`] and
//! [`contract::UserContextOps`], plus the clock, the timer, device interrupts, copies from
//! and to user memory, frames, control blocks and FP state): the kernel binary instantiates it
//! once with the machine it runs on (static dispatch: no call goes through a table), and its
//! host tests (`cargo test -p kernel_core`) run it against a model of a machine (`mock`).
//!
//! What is implemented: domains created from the boot image's manifest, nailed stretches
//! (images, stacks, run-time stretches) with per-domain rights, protection domains as
//! per-domain page tables over the one address space, the system calls ([`syscall`]), events
//! and activations, CPU contracts scheduled by Atropos ([`sched`]), driver domains (DMA
//! memory, device registers, interrupts as events), and domain death (exit or a fault) that
//! unmaps the domain's stretches from every protection domain, then frees their frames
//! (zeroed when they are next allocated); self-paging ([`paging`]): managed stretches, loose
//! frames under guaranteed and optimistic contracts, page faults delivered to the domain, and
//! revocation; frame loans ([`loans`]): a managed page's frame lent to a driver domain for one
//! request. Not here: the trap paths, page-table formats, the frame allocator's memory,
//! the kernel arenas' heaps and PCI (the kernel's, behind [`Platform`]).
//!
//! Invariants: every frame of a stretch is charged to the stretch's owner; a domain's frames
//! within its guarantee (nailed stretches, guaranteed loose frames, page tables, the records of
//! its managed stretches) never exceed its guaranteed frames, nor its optimistic loose frames
//! its optimistic allowance; a page is mapped in a protection domain exactly when that domain
//! holds rights on the stretch containing it; bad arguments to a system call get an error
//! code, never a panic. No `unsafe`: whatever needs it is the platform's.
//!
//! The state is split into owners, each in its module with methods that touch only it: the
//! domains ([`Domains`], each named by a typed [`DomainId`]), the stretches
//! ([`stretch::Stretches`]), the scheduler (`sched::Scheduler`), what driver domains were given
//! (`device::Devices`) and what the run summary needs from boot on (`reports::Reports`).
//! [`World`] holds them; its methods are the operations that need more than one (the system
//! calls, death, revocation, the scheduler's mechanism). A raw domain number becomes a
//! [`DomainId`] only where it enters: [`Domains::id`] (checked) for a system call's argument and
//! a manifest's channel ends, the scheduler for the clients it picks, and the trap entry takes
//! the scheduler's current domain; on the wire (the ABI, the control block, the log's records,
//! frame owners) a domain stays its `u32`.
//!
//! Everything here runs in trap handlers (interrupts off, one CPU) or at boot, under the one
//! lock the kernel keeps its [`World`] under. Its reports are defmt records in the kernel
//! (feature `defmt`) and are dropped on the host ([`log`]).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

#[macro_use]
pub mod log;

mod address;
pub mod checks;
pub mod clock;
pub mod contract;
mod device;
mod domain;
mod domains;
mod events;
pub mod frames;
mod jobs;
mod kmem;
mod loader;
mod loans;
pub mod loose;
mod paging;
pub mod platform;
mod reports;
mod sched;
pub mod stretch;
mod syscall;
#[cfg(test)]
extern crate std;
#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;

use abi::{PAGE_SIZE, Rights, SysError};
use frame_allocator::{FRAME_SIZE, Frame};

use crate::contract::{AddressSpaceOps, UserFault};
use address::{AddressQuota, StretchRegion};
use platform::ArenaVec;
use stretch::{Kind, Refused, Stretch, Stretches};

pub use device::{interrupts_raised, raise_interrupt};
pub use domain::{Domain, DomainId};
pub use domains::Domains;
pub use loader::{BootOptions, enter_first, start_from_boot_image};
pub use platform::{Exit, Found, KernelArena, PhysRange, Platform, Routed};
pub use sched::on_user_trap;

/// How a domain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Ending {
    /// It called `exit` with this code.
    Exited(i32),
    /// The kernel terminated it, for this reason.
    Terminated(Termination),
}

/// Why the kernel terminated a domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// It took a fault nothing resolves (its stretch drivers included).
    Fault(UserFault),
    /// It kept optimistic frames past a revocation's deadline.
    RevocationIgnored,
    /// Its stretches, stack or control block could not be made at boot.
    NotCreated,
}

impl Termination {
    /// The reason in reports and in the run summary.
    #[inline]
    pub fn name(self) -> &'static str {
        match self {
            Termination::Fault(fault) => fault.name(),
            Termination::RevocationIgnored => "did not release revoked frames by the deadline",
            Termination::NotCreated => "could not be created",
        }
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Termination {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.name())
    }
}

/// The kernel's state: the owners of the domains, of what they share (the stretches, the
/// stretch region's address allocator, the scheduler, the devices) and of what is kept for
/// reports. Its methods are the operations that need more than one of them.
pub struct World<P: Platform> {
    domains: Domains<P>,
    stretches: Stretches<P::Arena>,
    /// The stretch region, cut into the domains' shares.
    region: StretchRegion,
    /// Which domain runs, and when the kernel must look again (see [`sched`]).
    sched: sched::Scheduler,
    /// What the run summary needs from boot on (see [`reports`]).
    reports: reports::Reports,
    /// What driver domains were given: interrupt lines and PCI functions (see [`device`]).
    devices: device::Devices<P::Function>,
}

impl<P: Platform> World<P> {
    /// The world before any domain exists.
    pub fn new() -> Self {
        World {
            domains: Domains::new(),
            stretches: Stretches::default(),
            region: StretchRegion::default(),
            sched: sched::Scheduler::new(),
            reports: reports::Reports::new(P::with_frames(|fa| fa.free_count())),
            devices: device::Devices::new(),
        }
    }

    /// Adds a domain called `name` with protection domain `space`, allowed `guaranteed` and
    /// `optimistic` frames, with `address` as its share of the stretch region; its identifier,
    /// or `None` if the kernel heap has no room for its records (boot-time state: its arena's
    /// header, its context, its table of stretches).
    fn add_domain(
        &mut self,
        name: &str,
        space: P::Space,
        guaranteed: u64,
        optimistic: u64,
        address: AddressQuota,
    ) -> Option<DomainId> {
        let id = self.domains.next_id()?;
        let arena = P::Arena::new_arena(id.raw());
        if !self.stretches.add_domain(address.range().start, arena) {
            return None;
        }
        if !self.domains.reserve_one() {
            return None;
        }
        self.sched.grow(id.index() + 1).ok()?;
        self.domains.push(Domain::new(name, space, guaranteed, optimistic, address, arena))
    }

    /// Domain `id` if it is alive.
    #[inline(always)]
    fn domain(&self, id: DomainId) -> Option<&Domain<P>> {
        self.domains.live(id)
    }

    /// Creates a nailed stretch of `pages` pages at `base` owned by `owner`, with `rights` for the
    /// owner's protection domain, filled from `data` (the rest zero). Checks the owner's frames
    /// contract, counting the page tables the mapping needs.
    fn create_stretch(
        &mut self,
        owner: DomainId,
        base: usize,
        pages: usize,
        rights: Rights,
        kind: Kind,
        data: &[u8],
    ) -> Result<(), SysError> {
        let filled = Filling::Now(data);
        self.create_stretch_or_wait(owner, base, pages, rights, kind, filled).map_err(|e| match e {
            paging::Shortage::Fail(e) => e,
            paging::Shortage::Wait => SysError::NoMemory,
        })
    }

    /// [`World::create_stretch`], which may find that a revocation must free memory first
    /// ([`paging::Shortage::Wait`]: nothing was done, try again later). With
    /// [`Filling::Later`] the stretch is made busy and empty, its frames checked and reserved
    /// but not taken: a [`jobs::Job::Fill`] gives them.
    fn create_stretch_or_wait(
        &mut self,
        owner: DomainId,
        base: usize,
        pages: usize,
        rights: Rights,
        kind: Kind,
        filling: Filling<'_>,
    ) -> Result<(), paging::Shortage> {
        self.domain(owner).ok_or(SysError::NotFound)?;
        let end = base.checked_add(pages * PAGE_SIZE).ok_or(SysError::InvalidArgument)?;
        if self.stretches.last_below(end).is_some_and(|s| s.end() > base) {
            return Err(SysError::InvalidArgument.into());
        }
        let space = self.domains[owner].space.as_mut().ok_or(SysError::NotFound)?;
        let tables = space.tables_missing(base, end).map_err(|_| SysError::InvalidArgument)?;
        let d = &self.domains[owner];
        // Device registers are the device's pages, not frames of RAM.
        let frames = if matches!(filling, Filling::Device(_)) { 0 } else { pages as u64 };
        let needed = frames + tables + kmem::frames_for(kmem::stretch_record(pages, kind));
        if self.domains.guaranteed_used(owner) + needed > d.guaranteed_frames {
            return Err(SysError::NoMemory.into());
        }
        self.reserve_frames(owner, needed)?;
        self.make_stretch(owner, base, pages, rights, kind, filling).map_err(paging::Shortage::Fail)
    }

    /// The rest of [`World::create_stretch_or_wait`], once the frames (the record's among them)
    /// are checked and reserved.
    fn make_stretch(
        &mut self,
        owner: DomainId,
        base: usize,
        pages: usize,
        rights: Rights,
        kind: Kind,
        filling: Filling<'_>,
    ) -> Result<(), SysError> {
        let alloc = self.domains[owner].arena;
        let mut s = self.with_kmem(owner, |w| {
            let s = Stretch::new_in(base, pages, owner, kind, alloc)?;
            w.stretches.reserve_one(base)?;
            Ok(s)
        })?;
        s.set_rights(owner, rights).map_err(|_| SysError::NoMemory)?;
        let free_all = |s: &mut Stretch<P::Arena>| {
            let device = s.kind == Kind::Device;
            s.frames.iter_mut().filter_map(Option::take).filter(|_| !device).for_each(|f| {
                let _ = frames::free::<P>(f, owner.owner());
            })
        };
        let data = match filling {
            Filling::Now(data) => {
                for i in 0..pages {
                    match frames::alloc_zeroed::<P>(owner.owner()) {
                        Ok(f) => s.frames[i] = Some(f),
                        Err(_) => {
                            free_all(&mut s);
                            return Err(SysError::NoMemory);
                        }
                    }
                }
                data
            }
            Filling::Contiguous => {
                let first = frames::alloc_zeroed_run::<P>(pages as u64, owner.owner())
                    .map_err(|_| SysError::NoMemory)?;
                for (i, f) in s.frames.iter_mut().enumerate() {
                    *f = Some(Frame::containing(first.addr() + (i * PAGE_SIZE) as u64));
                }
                &[]
            }
            Filling::Device(first) => {
                for (i, f) in s.frames.iter_mut().enumerate() {
                    *f = Some(Frame::containing(first + (i * PAGE_SIZE) as u64));
                }
                &[]
            }
            Filling::Later => {
                s.busy = true;
                self.stretches.insert(s);
                return Ok(());
            }
        };
        for (chunk, frame) in data.chunks(PAGE_SIZE).zip(s.frames.iter().flatten()) {
            P::write_frame(*frame, chunk);
        }
        if let Err(e) = map_for(&mut self.domains, &s, owner, rights) {
            let _ = map_for(&mut self.domains, &s, owner, Rights::NONE);
            free_all(&mut s);
            return Err(e);
        }
        self.stretches.insert(s);
        Ok(())
    }

    /// Gives domain `target` `rights` on the stretch at `base` (`NONE`: takes them away) and
    /// maps it accordingly; a new rights entry is made in the owner's arena.
    fn set_stretch_rights(
        &mut self,
        base: usize,
        target: DomainId,
        rights: Rights,
    ) -> Result<(), SysError> {
        let owner = self.stretches.get(&base).ok_or(SysError::NotFound)?.owner;
        self.with_kmem(owner, |w| {
            let s = w.stretches.get_mut(&base).ok_or(Refused)?;
            Ok(s.rights.try_reserve(1)?)
        })?;
        let s = self.stretches.get_mut(&base).ok_or(SysError::NotFound)?;
        s.set_rights(target, rights).map_err(|_| SysError::NoMemory)?;
        map_for(&mut self.domains, s, target, rights)
    }

    /// Unmaps the stretch at `base` from every protection domain, then frees its frames (a
    /// managed stretch's frames go back to its owner's loose frames instead), all at once (see
    /// [`jobs`] for the bounded way).
    fn destroy_stretch(&mut self, base: usize) {
        let mut left = self.stretches.get(&base).map(|s| s.frames.len());
        while let Some(l) = left {
            left = self.empty_chunk(base, l);
        }
    }
}

/// Maps (or, with `NONE`, unmaps) stretch `s` in domain `id`'s protection domain (a function
/// of the domains alone, so that a stretch in the table can be mapped where it lies).
fn map_for<P: Platform>(
    domains: &mut Domains<P>,
    s: &Stretch<P::Arena>,
    id: DomainId,
    rights: Rights,
) -> Result<(), SysError> {
    let Some(space) = domains.get_mut(id).and_then(|d| d.space.as_mut()) else {
        return Ok(());
    };
    for (i, f) in s.frames.iter().enumerate() {
        let Some(f) = f else { continue };
        let va = s.base + i * PAGE_SIZE;
        space.unmap(va);
        if rights == Rights::NONE {
            continue;
        }
        let mapped = if s.kind == Kind::Device {
            space.map_device(va, f.addr(), rights)
        } else {
            space.map(va, f.addr(), rights)
        };
        mapped.map_err(|_| SysError::NoMemory)?;
    }
    Ok(())
}

/// Where a new nailed stretch's frames come from.
enum Filling<'a> {
    /// Taken now, filled from these bytes (the rest zero).
    Now(&'a [u8]),
    /// Taken now as one physically contiguous run, zero-filled (DMA memory).
    Contiguous,
    /// None: the pages are a device's registers, from this physical address on.
    Device(u64),
    /// Taken later, page by page, by a [`jobs::Job::Fill`].
    Later,
}

impl<P: Platform> Default for World<P> {
    fn default() -> Self {
        Self::new()
    }
}

/// Frames needed for `bytes`, rounded up.
#[inline]
fn pages_for(bytes: usize) -> usize {
    bytes.div_ceil(FRAME_SIZE as usize)
}
