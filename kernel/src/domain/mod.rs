//! Domains: the schedulable principals of Tessera, each with a protection domain, a saved
//! context, a memory contract and the stretches it owns.
//!
//! What is implemented: domains created from the boot image's manifest, nailed stretches
//! (images, stacks, run-time stretches) with per-domain rights, protection domains as
//! per-domain page tables over the one address space (with ASIDs), the first system calls
//! ([`syscall`]), events and activations, CPU contracts scheduled by Atropos ([`sched`]), and
//! domain death (exit or a fault) that unmaps the domain's stretches from every protection
//! domain, then frees their frames (zeroed when they are next allocated); self-paging ([`paging`]): managed stretches,
//! loose frames under guaranteed and optimistic contracts, page faults delivered to the
//! domain, and revocation.
//!
//! Invariants: every frame of a stretch is charged to the stretch's owner; a domain's frames
//! within its guarantee (nailed stretches, guaranteed loose frames, page tables, the records of
//! its managed stretches) never exceed its guaranteed frames, nor its optimistic loose frames
//! its optimistic allowance; a page is mapped in a
//! protection domain exactly when that domain holds rights on the stretch containing it.
//!
//! Everything here runs in trap handlers (interrupts off, one CPU) or at boot, under the one
//! [`WORLD`] lock.

mod address;
mod clock;
mod device;
mod events;
mod jobs;
mod kmem;
mod loader;
mod loose;
mod paging;
mod sched;
pub mod stretch;
mod syscall;

use alloc::string::String;
use alloc::vec::Vec;

use abi::{PAGE_SIZE, Rights, SysError};
use frame_allocator::{FRAME_SIZE, Frame, Owner};
use spin::Mutex;

use crate::arch::{self, AddressSpace, AddressSpaceOps, UserContext, UserContextOps};
use crate::arena::{Arena, ArenaAlloc};
use crate::memory::{self, with_frames};
use address::{AddressQuota, StretchRegion};
use stretch::{ArenaVec, Kind, Refused, Stretch, Stretches};

pub use device::raise_interrupt;
pub use loader::start_from_boot_image;
pub use sched::on_user_trap;

/// How a domain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, defmt::Format)]
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
    Fault(arch::UserFault),
    /// It kept optimistic frames past a revocation's deadline.
    RevocationIgnored,
    /// Its stretches, stack or control block could not be made at boot.
    NotCreated,
}

impl Termination {
    /// The reason in reports and in the run summary.
    pub fn name(self) -> &'static str {
        match self {
            Termination::Fault(fault) => fault.name(),
            Termination::RevocationIgnored => "did not release revoked frames by the deadline",
            Termination::NotCreated => "could not be created",
        }
    }
}

impl defmt::Format for Termination {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.name())
    }
}

/// One domain; its identifier is its index in the manifest (and in [`World`]), which is also
/// its frame-owner id.
pub struct Domain {
    /// Name from the manifest.
    pub name: String,
    /// Its registers: saved here by the trap path when it enters the kernel, and resumed from
    /// here (boxed, so that the address the trap path holds never moves).
    ctx: alloc::boxed::Box<UserContext>,
    /// Saved floating-point registers.
    fp: arch::FpState,
    /// Its protection domain; `None` once it is dead.
    space: Option<AddressSpace>,
    /// Frames it may hold at most (stretches and page tables).
    guaranteed_frames: u64,
    /// `None` while alive.
    pub ending: Option<Ending>,
    /// While blocked: the deadline in timer ticks (`u64::MAX`: none).
    blocked: Option<u64>,
    /// An endpoint changed since the domain last returned from `block`.
    pending: bool,
    /// Its event endpoints (in its arena).
    endpoints: ArenaVec<events::Endpoint>,
    /// The frame of its control block.
    dcb: Option<frame_allocator::Frame>,
    /// The control block's address in the domain.
    dcb_va: usize,
    /// The activation handler's entry and stack top, if registered.
    handler: Option<(usize, usize)>,
    /// Optimistic frames it may hold on top of its guarantee.
    optimistic_frames: u64,
    /// How many loose frames (`frame_alloc`, recorded in [`loose`]) it holds.
    loose_held: u64,
    /// How many of its loose frames are optimistic.
    optimistic_held: u64,
    /// Its disk-time contract `(period, slice)` in ns, if the manifest gives it one: a
    /// revocation notice then leaves it the disk time to write back what it releases.
    disk: Option<(u64, u64)>,
    /// The allocator of the kernel objects made for it, on its arena of frames charged to it
    /// (see [`kmem`]).
    arena: ArenaAlloc,
    /// Page faults delivered to it.
    faults: u64,
    /// The revocation notice it has to answer, if any.
    revocation: Option<paging::Revocation>,
    /// Blocked in a system call that needs memory a revocation is freeing; the call runs
    /// again when it is woken.
    waiting_for_frames: bool,
    /// Its share of the stretch region.
    address: AddressQuota,
    /// Kernel work under way for it, run in chunks on its CPU time (see [`jobs`]).
    job: Option<jobs::Job>,
    /// A driver domain: the manifest grants it devices (see [`device`]).
    driver: bool,
}

impl Domain {
    /// A live domain called `name` with protection domain `space`, allowed `guaranteed_frames`
    /// frames, its kernel objects in `arena`; its context, control block and endpoints are
    /// filled in by the loader.
    fn new(
        name: &str,
        space: AddressSpace,
        guaranteed_frames: u64,
        optimistic_frames: u64,
        address: AddressQuota,
        arena: ArenaAlloc,
    ) -> Self {
        Domain {
            name: name.into(),
            ctx: alloc::boxed::Box::new(UserContext::new_user(0, 0, [0; 4])),
            fp: arch::FpState::default(),
            space: Some(space),
            guaranteed_frames,
            ending: None,
            blocked: None,
            pending: false,
            endpoints: ArenaVec::new_in(arena),
            dcb: None,
            dcb_va: 0,
            handler: None,
            optimistic_frames,
            loose_held: 0,
            optimistic_held: 0,
            disk: None,
            arena,
            faults: 0,
            revocation: None,
            waiting_for_frames: false,
            address,
            job: None,
            driver: false,
        }
    }
}

/// The kernel's state: the domains, and the owners of what they share (the stretches, the
/// stretch region's address allocator, the scheduler). Its methods are the operations that
/// need more than one of them.
pub struct World {
    domains: Vec<Domain>,
    stretches: Stretches,
    /// The stretch region, cut into the domains' shares.
    region: StretchRegion,
    /// Free frames before the first domain was created.
    free_before: u64,
    /// Which domain runs, and when the kernel must look again (see [`sched`]).
    sched: sched::Scheduler,
    /// Bytes of the kernel heap in use once every domain was made (see [`kmem`]).
    boot_heap: usize,
    /// What driver domains were given: interrupt lines and PCI functions (see [`device`]).
    devices: device::Devices,
}

/// The kernel's domains and stretches.
pub static WORLD: Mutex<Option<World>> = Mutex::new(None);

impl World {
    fn new() -> Self {
        World {
            domains: Vec::new(),
            stretches: Stretches::default(),
            region: StretchRegion::default(),
            free_before: with_frames(|fa| fa.free_count()),
            sched: sched::Scheduler::new(),
            boot_heap: 0,
            devices: device::Devices::default(),
        }
    }

    /// Adds a domain called `name` with protection domain `space`, allowed `guaranteed` and
    /// `optimistic` frames, with `address` as its share of the stretch region; its identifier,
    /// or `None` if the kernel heap has no room for its records (boot-time state: its arena's
    /// header, its context, its table of stretches).
    fn add_domain(
        &mut self,
        name: &str,
        space: AddressSpace,
        guaranteed: u64,
        optimistic: u64,
        address: AddressQuota,
    ) -> Option<u32> {
        let id = u32::try_from(self.domains.len()).ok().filter(|&id| id <= loose::MAX_OWNER)?;
        let arena =
            ArenaAlloc::new(alloc::boxed::Box::leak(alloc::boxed::Box::new(Arena::new(id))));
        if !self.stretches.add_domain(address.range().start, arena) {
            return None;
        }
        self.domains.try_reserve(1).ok()?;
        self.sched.grow(id as usize + 1).ok()?;
        self.domains.push(Domain::new(name, space, guaranteed, optimistic, address, arena));
        Some(id)
    }

    fn domain(&self, id: u32) -> Option<&Domain> {
        self.domains.get(id as usize).filter(|d| d.ending.is_none())
    }

    /// The stretch containing `addr`.
    pub fn stretch_at(&self, addr: usize) -> Option<&Stretch> {
        self.stretches.containing(addr)
    }

    /// The stretch of domain `id` containing `addr`, with its slot in the domain's table.
    fn own_stretch_at(&self, id: u32, addr: usize) -> Option<(usize, &Stretch)> {
        self.stretches.of(id)?.containing(addr)
    }

    /// Is `addr` in a managed stretch of domain `id`?
    fn in_managed_stretch(&self, id: u32, addr: usize) -> bool {
        self.own_stretch_at(id, addr).is_some_and(|(_, s)| s.kind == Kind::Managed)
    }

    /// Does domain `id` hold `want` on every page of `[addr, addr + len)`?
    pub fn may_access(&self, id: u32, addr: usize, len: usize, want: Rights) -> bool {
        let Some(end) = addr.checked_add(len) else { return false };
        if addr < abi::USER_BASE || end > abi::USER_END {
            return false;
        }
        let mut a = addr;
        while a < end {
            match self.stretch_at(a) {
                Some(s) if !s.busy && s.rights_of(id).contains(want) => a = s.end(),
                _ => return false,
            }
        }
        true
    }

    /// Could domain `id` take `pages` more frames, plus the page-table frames mapping a page
    /// may need (one per level of the tree), within its guarantee?
    fn within_contract(&self, id: u32, pages: u64) -> bool {
        let tables = AddressSpace::LEVELS;
        self.domain(id)
            .is_some_and(|d| self.guaranteed_used(id) + pages + tables <= d.guaranteed_frames)
    }

    /// Frames domain `id` holds within its guarantee: all it is charged for (its arena's
    /// frames among them) but its optimistic frames.
    fn guaranteed_used(&self, id: u32) -> u64 {
        self.charged(id) - self.domains[id as usize].optimistic_held
    }

    /// Frames charged to domain `id` now.
    fn charged(&self, id: u32) -> u64 {
        with_frames(|fa| fa.owned_by(Owner::Domain(id)))
    }

    /// Creates a nailed stretch of `pages` pages at `base` owned by `owner`, with `rights` for the
    /// owner's protection domain, filled from `data` (the rest zero). Checks the owner's frames
    /// contract, counting the page tables the mapping needs.
    fn create_stretch(
        &mut self,
        owner: u32,
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
        owner: u32,
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
        let space = self.domains[owner as usize].space.as_mut().ok_or(SysError::NotFound)?;
        let tables = space.tables_missing(base, end).map_err(|_| SysError::InvalidArgument)?;
        let d = &self.domains[owner as usize];
        // Device registers are the device's pages, not frames of RAM.
        let frames = if matches!(filling, Filling::Device(_)) { 0 } else { pages as u64 };
        let needed = frames + tables + kmem::frames_for(kmem::stretch_record(pages, kind));
        if self.guaranteed_used(owner) + needed > d.guaranteed_frames {
            return Err(SysError::NoMemory.into());
        }
        self.reserve_frames(owner, needed)?;
        self.make_stretch(owner, base, pages, rights, kind, filling).map_err(paging::Shortage::Fail)
    }

    /// The rest of [`World::create_stretch_or_wait`], once the frames (the record's among them)
    /// are checked and reserved.
    fn make_stretch(
        &mut self,
        owner: u32,
        base: usize,
        pages: usize,
        rights: Rights,
        kind: Kind,
        filling: Filling<'_>,
    ) -> Result<(), SysError> {
        let alloc = self.domains[owner as usize].arena;
        let mut s = self.with_kmem(owner, |w| {
            let s = Stretch::new_in(base, pages, owner, kind, alloc)?;
            w.stretches.reserve_one(base)?;
            Ok(s)
        })?;
        s.set_rights(owner, rights).map_err(|_| SysError::NoMemory)?;
        let free_all = |s: &mut Stretch| {
            let device = s.kind == Kind::Device;
            s.frames.iter_mut().filter_map(Option::take).filter(|_| !device).for_each(|f| {
                let _ = memory::free(f, Owner::Domain(owner));
            })
        };
        let data = match filling {
            Filling::Now(data) => {
                for i in 0..pages {
                    match memory::alloc_zeroed(Owner::Domain(owner)) {
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
                let first = memory::alloc_zeroed_run(pages as u64, Owner::Domain(owner))
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
            crate::phys::write_frame(*frame, chunk);
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
        target: u32,
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
fn map_for(domains: &mut [Domain], s: &Stretch, id: u32, rights: Rights) -> Result<(), SysError> {
    let Some(space) = domains.get_mut(id as usize).and_then(|d| d.space.as_mut()) else {
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

/// Creates the world (before any domain exists).
pub fn init() {
    *WORLD.lock() = Some(World::new());
}

fn report_fault(w: &World, id: u32, fault: arch::UserFault, pc: usize) {
    let name = w.domains[id as usize].name.as_str();
    let cause = fault.name();
    let addr = match fault {
        arch::UserFault::IllegalInstruction { bits: Some(bits) } => {
            defmt::error!(
                "domain {=str}: {=str} (instruction bits {=u64:#x}), pc={=u64:#x}",
                name,
                cause,
                bits,
                pc as u64
            );
            return;
        }
        f => match f.addr() {
            Some(addr) => addr,
            None => {
                defmt::error!("domain {=str}: {=str}, pc={=u64:#x}", name, cause, pc as u64);
                return;
            }
        },
    };
    defmt::error!(
        "domain {=str}: {=str} at address {=u64:#x}, pc={=u64:#x}",
        name,
        cause,
        addr as u64,
        pc as u64
    );
    let guarded = w
        .stretch_at(addr.saturating_add(PAGE_SIZE))
        .filter(|s| s.kind == Kind::Stack && addr < s.base && w.stretch_at(addr).is_none());
    match (w.stretch_at(addr), guarded) {
        (Some(s), _) => defmt::error!(
            "domain {=str}: the address is in {=str} stretch {=u64:#x}..{=u64:#x} of domain {=str}, where it holds rights {=u8:#x}",
            name,
            s.kind.name(),
            s.base as u64,
            s.end() as u64,
            w.domains[s.owner as usize].name.as_str(),
            s.rights_of(id).0
        ),
        (None, Some(s)) => defmt::error!(
            "domain {=str}: the address is in the guard page below the stack {=u64:#x}..{=u64:#x} of domain {=str}",
            name,
            s.base as u64,
            s.end() as u64,
            w.domains[s.owner as usize].name.as_str()
        ),
        (None, None) if !(abi::USER_BASE..abi::USER_END).contains(&addr) => {
            defmt::error!("domain {=str}: the address is outside the user half", name)
        }
        (None, None) => defmt::error!("domain {=str}: no stretch contains the address", name),
    }
}

fn summary(w: &World) {
    defmt::info!("run summary: {=usize} domain(s)", w.domains.len());
    defmt::info!(
        "  kernel: idle {=u64} ns of {=u64} ns since boot",
        clock::ns_from_ticks(w.sched.idle_ticks),
        clock::ns_from_ticks(arch::time::now_ticks())
    );
    for d in &w.domains {
        match d.ending {
            Some(Ending::Exited(code)) => {
                defmt::info!("  {=str}: exited with status {=i32}", d.name.as_str(), code)
            }
            Some(Ending::Terminated(why)) => {
                defmt::info!("  {=str}: terminated ({=str})", d.name.as_str(), why.name())
            }
            None => defmt::info!("  {=str}: still running", d.name.as_str()),
        }
    }
    for (id, d) in w.domains.iter().enumerate() {
        let (Some(a), Some(c)) = (w.sched.policy.accounts(id), w.sched.policy.contract(id)) else {
            continue;
        };
        defmt::info!(
            "  {=str}: cpu {=u64} us guaranteed + {=u64} us extra, {=u64} periods of {=u64} us, {=u64} deadlines missed, {=u64} periods ended late (contract: slice {=u64} us, extra {=bool})",
            d.name.as_str(),
            a.guaranteed / 1000,
            a.extra / 1000,
            a.periods,
            c.period / 1000,
            a.deadlines_missed,
            a.late_ends,
            c.slice / 1000,
            c.extra
        );
    }
    for d in w.domains.iter().filter(|d| d.faults > 0) {
        defmt::info!(
            "  {=str}: {=u64} page faults delivered to its stretch drivers",
            d.name.as_str(),
            d.faults
        );
    }
    let free = with_frames(|fa| fa.free_count());
    defmt::info!(
        "frames: {=u64} free after all domains ended, {=u64} before they started",
        free,
        w.free_before
    );
    defmt::info!(
        "kernel heap: {=usize} bytes in use at the end, {=usize} once the domains were made",
        crate::heap::used(),
        w.boot_heap
    );
}

/// Frames needed for `bytes`, rounded up.
fn pages_for(bytes: usize) -> usize {
    bytes.div_ceil(FRAME_SIZE as usize)
}

/// Kernel tests of domain teardown (run with `test=domains::...`).
pub mod tests {
    use alloc::vec;

    use super::*;
    use crate::check;
    use crate::ktest::Outcome;

    /// A private world (not [`WORLD`]) with domain 0 called `name`, allowed `frames` frames.
    fn world_with_one_domain(name: &str, frames: u64) -> Result<World, crate::ktest::Failed> {
        let mut w = World::new();
        let space = AddressSpace::new(Owner::Domain(0)).map_err(|_| crate::ktest::Failed)?;
        let quota = w.region.share(1 << 30).ok_or(crate::ktest::Failed)?;
        w.add_domain(name, space, frames, 0, quota).ok_or(crate::ktest::Failed)?;
        Ok(w)
    }

    /// A dead domain's frames are back in the free pool (freeing does not write them), its page
    /// tables are freed too, and the next owner of its frames reads zeros: a frame is zeroed
    /// once, when it is allocated.
    pub fn scrub_on_death() -> Outcome {
        let free_before = with_frames(|fa| fa.free_count());
        let id = 0u32;
        let mut w = world_with_one_domain("scrub-test", 64)?;
        let pattern = vec![0xa5u8; 8 * PAGE_SIZE];
        let base = abi::STRETCH_BASE;
        let made = w.create_stretch(
            id,
            base,
            8,
            Rights::READ.union(Rights::WRITE),
            Kind::Dynamic,
            &pattern,
        );
        check!(made.is_ok(), "create_stretch failed: {}", made);
        let frames: Vec<frame_allocator::Frame> =
            w.stretches[&base].frames.iter().flatten().copied().collect();
        let charged = with_frames(|fa| fa.owned_by(Owner::Domain(id)));
        check!(charged > 8, "only {=u64} frames charged for 8 pages and tables", charged);
        let first = crate::phys::bytes(frames[0].addr(), PAGE_SIZE);
        check!(first.iter().all(|&b| b == 0xa5), "the stretch did not receive its contents");
        w.kill(id, Ending::Exited(0));
        check!(with_frames(|fa| fa.owned_by(Owner::Domain(id))) == 0, "frames still charged");
        check!(with_frames(|fa| fa.free_count()) == free_before, "frames not all returned");
        for f in &frames {
            check!(with_frames(|fa| fa.owner(*f)) == Ok(Owner::Free), "a frame is not free");
        }
        // The next owner: every frame it gets reads zero, the dead domain's among them (the
        // allocator hands frames out next-fit, so this may take every free frame).
        let mut next = Vec::new();
        while !frames.iter().all(|f| next.contains(f)) {
            match memory::alloc_zeroed(Owner::Kernel) {
                Ok(f) => next.push(f),
                Err(_) => break,
            }
        }
        let reused = frames.iter().filter(|f| next.contains(f)).count();
        let clean =
            next.iter().all(|f| crate::phys::bytes(f.addr(), PAGE_SIZE).iter().all(|&b| b == 0));
        next.into_iter().for_each(|f| {
            let _ = memory::free(f, Owner::Kernel);
        });
        check!(
            reused == frames.len(),
            "only {=usize} of the dead domain's frames came back",
            reused
        );
        check!(clean, "a reused frame still held the dead domain's data");
        check!(with_frames(|fa| fa.free_count()) == free_before, "frames not all returned");
        Ok(())
    }

    /// Page tables follow what they map: creating and destroying stretches in ever new regions
    /// of the address space (ranges are never reused) leaves the domain's charge where it was.
    pub fn tables_follow_mappings() -> Outcome {
        let mut w = world_with_one_domain("tables-test", 64)?;
        let rw = Rights::READ.union(Rights::WRITE);
        let first = w.domains[0].address.take(1).ok_or(crate::ktest::Failed)?;
        let made = w.create_stretch(0, first, 1, rw, Kind::Dynamic, &[]);
        check!(made.is_ok(), "the first stretch failed: {}", made);
        let baseline = w.charged(0);
        for i in 0..200usize {
            // 2 MiB apart: every stretch needs a fresh level-0 table, every 512 a level-1 one.
            let base = abi::STRETCH_BASE + (1 + i) * (2 << 20);
            let made = w.create_stretch(0, base, 1, rw, Kind::Dynamic, &[]);
            check!(made.is_ok(), "stretch {=usize} failed: {}", i, made);
            w.destroy_stretch(base);
        }
        let after = w.charged(0);
        check!(after == baseline, "charge grew from {=u64} to {=u64} frames", baseline, after);
        w.kill(0, Ending::Exited(0));
        Ok(())
    }

    /// Contract enforcement: a stretch larger than the guarantee is refused with `NoMemory`
    /// and leaves nothing behind; overlapping stretches are refused.
    pub fn contract_and_overlap() -> Outcome {
        let free_before = with_frames(|fa| fa.free_count());
        let mut w = world_with_one_domain("contract-test", 16)?;
        let rw = Rights::READ.union(Rights::WRITE);
        let base = abi::STRETCH_BASE;
        let big = w.create_stretch(0, base, 32, rw, Kind::Dynamic, &[]);
        check!(big == Err(SysError::NoMemory), "over-contract stretch gave {}", big);
        let ok = w.create_stretch(0, base, 4, rw, Kind::Dynamic, &[]);
        check!(ok.is_ok(), "a stretch within the contract failed: {}", ok);
        let overlap = w.create_stretch(0, base + PAGE_SIZE, 2, rw, Kind::Dynamic, &[]);
        check!(overlap == Err(SysError::InvalidArgument), "overlap gave {}", overlap);
        w.kill(0, Ending::Exited(0));
        check!(with_frames(|fa| fa.free_count()) == free_before, "frames not all returned");
        Ok(())
    }

    /// Kernel objects come from the domain's own frames: the record of a managed stretch
    /// (larger than a frame) is made in the domain's arena, charged to it, and never in the
    /// kernel heap; once the guarantee cannot hold another, the call fails with `NoMemory` and
    /// leaves nothing behind; at death the arena's frames come back.
    pub fn kernel_arena() -> Outcome {
        let free_before = with_frames(|fa| fa.free_count());
        let mut w = world_with_one_domain("arena-test", 64)?;
        let heap_before = crate::heap::used();
        let rw = Rights::READ.union(Rights::WRITE).0 as usize;
        // 4,096 pages: a record of about 68 KiB, 17 frames.
        let mut made = 0;
        let refused = loop {
            match w.create_managed_stretch(0, 4096 * PAGE_SIZE, rw) {
                Ok(_) => made += 1,
                Err(e) => break e,
            }
            check!(made < 8, "64 frames held the records of {=u32} managed stretches", made);
        };
        check!(made >= 2, "only {=u32} managed stretches of 4,096 pages in 64 frames", made);
        check!(
            matches!(refused, paging::Shortage::Fail(SysError::NoMemory)),
            "the stretch beyond the guarantee was not refused with NoMemory"
        );
        let arena = w.domains[0].arena.arena().frames();
        check!(arena >= 17 * made as u64, "{=u64} arena frames for {=u32} records", arena, made);
        let used = w.guaranteed_used(0);
        check!(used <= 64, "{=u64} frames held on a guarantee of 64", used);
        check!(crate::heap::used() == heap_before, "records went to the kernel heap");
        w.kill(0, Ending::Exited(0));
        check!(w.domains[0].arena.arena().frames() == 0, "the arena kept frames after death");
        check!(with_frames(|fa| fa.free_count()) == free_before, "frames not all returned");
        check!(crate::heap::used() == heap_before, "the kernel heap changed");
        Ok(())
    }

    /// A revocation's deadline leaves a victim its CPU contract's time to release frames, and
    /// a victim with a disk contract also the disk time to write them back, each bounded.
    pub fn revocation_window() -> Outcome {
        use paging::{REVOCATION_BOUND_NS, REVOCATION_DISK_BOUND_NS, revocation_window};
        let cpu = atropos::Contract {
            period: 10_000_000,
            slice: 2_000_000,
            extra: false,
            latency: 10_000_000,
        };
        // 100 frames, 1 ms of CPU: one slice, one period more.
        check!(revocation_window(Some(cpu), None, 100) == 20_000_000, "cpu window");
        check!(revocation_window(Some(cpu), None, 1500) == REVOCATION_BOUND_NS, "cpu bound");
        // 10 frames, 10 ms of a disk contract of 50 ms every 100 ms: 200 ms, more than the CPU's.
        let disk = Some((100_000_000, 50_000_000));
        check!(revocation_window(Some(cpu), disk, 10) == 200_000_000, "disk window");
        let slow = Some((1_000_000_000, 100_000_000));
        check!(revocation_window(Some(cpu), slow, 1000) == REVOCATION_DISK_BOUND_NS, "disk bound");
        // A disk contract never shortens the CPU's window.
        check!(revocation_window(Some(cpu), Some((1_000_000, 1_000_000)), 1) >= 20_000_000, "max");
        check!(revocation_window(Some(cpu), Some((1, 0)), 100) == 20_000_000, "zero slice");
        Ok(())
    }

    /// A domain blocked in a memory call that waits for frames, woken by an event: it keeps
    /// waiting for frames, and the event stays pending for its next `block` (which must not
    /// sleep through it).
    pub fn event_while_waiting_for_frames() -> Outcome {
        let mut w = world_with_one_domain("pending-test", 16)?;
        let d = &mut w.domains[0];
        d.blocked = Some(u64::MAX);
        d.waiting_for_frames = true;
        w.wake(0);
        let d = &w.domains[0];
        check!(d.pending, "the event was lost: pending is not set");
        check!(d.waiting_for_frames, "the memory call no longer waits for frames");
        check!(d.blocked == Some(u64::MAX), "the domain was unblocked by the event");
        w.kill(0, Ending::Exited(0));
        Ok(())
    }

    /// When every domain is blocked for good, a memory call waiting for frames runs again
    /// with its arguments untouched, while a `block` returns `WouldDeadlock`.
    pub fn deadlock_leaves_restarted_calls_alone() -> Outcome {
        let mut w = world_with_one_domain("deadlock-test", 16)?;
        let space = AddressSpace::new(Owner::Domain(1)).map_err(|_| crate::ktest::Failed)?;
        let quota = w.region.share(1 << 30).ok_or(crate::ktest::Failed)?;
        w.add_domain("blocker", space, 16, 0, quota).ok_or(crate::ktest::Failed)?;
        let args = [0x1234, 0x5678, 3, 4];
        for d in &mut w.domains {
            *d.ctx = UserContext::new_user(0x1000, 0x2000, args);
            d.blocked = Some(u64::MAX);
        }
        w.domains[0].waiting_for_frames = true;
        w.break_deadlock();
        let (waiter, blocker) = (w.domains[0].ctx.call().1, w.domains[1].ctx.results());
        check!(
            waiter[..2] == [0x1234, 0x5678],
            "the restarted call's arguments were overwritten: {=usize:#x}, {=usize:#x}",
            waiter[0],
            waiter[1]
        );
        check!(!w.domains[0].waiting_for_frames, "the memory call still waits for frames");
        check!(
            blocker.0 == SysError::WouldDeadlock as usize,
            "block did not return WouldDeadlock: status {=usize:#x}",
            blocker.0
        );
        check!(w.domains.iter().all(|d| d.blocked.is_none()), "a domain is still blocked");
        w.kill(1, Ending::Exited(0));
        w.kill(0, Ending::Exited(0));
        Ok(())
    }

    /// A domain's address space: ranges come with a guard page, are reused once given back
    /// (merging with their neighbours), and the quota is a hard limit.
    pub fn address_quota_reuse() -> Outcome {
        let mut q =
            AddressQuota::new(abi::STRETCH_BASE, 64 * PAGE_SIZE).ok_or(crate::ktest::Failed)?;
        let a = q.take(10).ok_or(crate::ktest::Failed)?;
        let b = q.take(10).ok_or(crate::ktest::Failed)?;
        check!(a == abi::STRETCH_BASE + PAGE_SIZE, "the first range has no guard page below");
        check!(b == a + 11 * PAGE_SIZE, "ranges are not packed with one guard page between");
        check!(q.take(50).is_none(), "the quota handed out more than it holds");
        q.give_back(a, 10);
        check!(q.take(10) == Some(a), "a freed range was not reused");
        for _ in 0..10_000 {
            let c = q.take(30).ok_or(crate::ktest::Failed)?;
            q.give_back(c, 30);
        }
        check!(
            q.unused() == 64 * PAGE_SIZE - 22 * PAGE_SIZE,
            "cycling leaked {=usize} bytes",
            42 * PAGE_SIZE - q.unused()
        );
        q.give_back(a, 10);
        q.give_back(b, 10);
        check!(
            q.unused() == 64 * PAGE_SIZE,
            "freed neighbours did not merge back: {=usize}",
            q.unused()
        );
        check!(q.take(63).is_some(), "the whole quota is not usable again");
        Ok(())
    }
}
