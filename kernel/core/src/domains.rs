//! The domains, and their identifiers: the owner of every [`Domain`] record ([`Domains`]) and
//! the typed handle [`DomainId`] that names one.
//!
//! A domain's identifier is its index in the manifest, in [`Domains`] and in the scheduler's
//! clients, and its frame-owner id. Inside the core a domain is named only by a [`DomainId`]:
//! one is made when a domain is added ([`Domains::push`]), by the scheduler for the clients it
//! picks (its clients are the domains, by index), and from a raw number that comes from user
//! space ([`Domains::id`], checked against the table, at system-call dispatch). A `DomainId` is
//! never out of range of the [`Domains`] that made it (domains are never removed: a dead
//! domain keeps its record), so indexing by one ([`Domains`]' `Index`) cannot fail; whether
//! the domain is alive is a separate question ([`Domains::live`]). On the wire (the system-call
//! ABI, the control block, the log's records, the frame allocator's owners) a domain is still
//! its `u32`.

use alloc::vec::Vec;
use core::ops::{Index, IndexMut};
use core::sync::atomic::Ordering;

use frame_allocator::Owner;

use crate::address::AddressQuota;
use crate::contract::{AddressSpaceOps as _, UserContextOps as _};
use crate::jobs::Job;
use crate::stretch::ArenaVec;
use crate::{Ending, Platform, events, jobs, paging};

/// The largest identifier: a frame owner and a loose frame's record name it.
const MAX_ID: u32 = crate::loose::MAX_OWNER;

// `DomainId::index` widens with the sign.
const _: () = assert!(MAX_ID < 1 << 31);

/// A domain's identifier, for a domain that exists (alive or dead) in the [`Domains`] that
/// made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DomainId(u32);

impl DomainId {
    /// The identifier at `index` of the table (the table's and the scheduler's own indices,
    /// which are domains by construction).
    #[inline(always)]
    pub(crate) const fn from_index(index: usize) -> Self {
        DomainId(index as u32)
    }

    /// Its index in [`Domains`], in the stretch tables and among the scheduler's clients.
    ///
    /// Identifiers are at most [`crate::loose::MAX_OWNER`] (below 2^31), so widening the
    /// number with its sign gives the same index as without. It is widened so: RISC-V's calling
    /// convention passes a `u32` sign-extended, and one register then serves both as the index
    /// and as the argument of the calls the system-call path makes, where the two forms would
    /// cost a register and an instruction on every system call.
    #[inline(always)]
    pub const fn index(self) -> usize {
        self.0 as i32 as usize
    }

    /// The number on the wire: the system-call ABI, the control block, the log.
    #[inline(always)]
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// The frame allocator's owner for its frames.
    #[inline(always)]
    pub const fn owner(self) -> Owner {
        Owner::Domain(self.0)
    }
}

/// One domain; see [`DomainId`] for its identifier.
pub struct Domain<P: Platform> {
    /// Name from the manifest.
    pub name: alloc::string::String,
    /// Its registers: saved here by the trap path when it enters the kernel, and resumed from
    /// here (boxed, so that the address the trap path holds never moves).
    pub(crate) ctx: alloc::boxed::Box<P::Context>,
    /// Saved floating-point registers.
    pub(crate) fp: P::Fp,
    /// Its protection domain; `None` once it is dead.
    pub(crate) space: Option<P::Space>,
    /// Frames it may hold at most (stretches and page tables).
    pub(crate) guaranteed_frames: u64,
    /// `None` while alive.
    pub ending: Option<Ending>,
    /// While blocked: the deadline in timer ticks (`u64::MAX`: none).
    pub(crate) blocked: Option<u64>,
    /// An endpoint changed since the domain last returned from `block`.
    pub(crate) pending: bool,
    /// Its event endpoints (in its arena).
    pub(crate) endpoints: ArenaVec<events::Endpoint, P::Arena>,
    /// The frame of its control block.
    pub(crate) dcb: Option<frame_allocator::Frame>,
    /// The control block's address in the domain.
    pub(crate) dcb_va: usize,
    /// The activation handler's entry and stack top, if registered.
    pub(crate) handler: Option<(usize, usize)>,
    /// Optimistic frames it may hold on top of its guarantee.
    pub(crate) optimistic_frames: u64,
    /// How many loose frames (`frame_alloc`, recorded in [`crate::loose`]) it holds.
    pub(crate) loose_held: u64,
    /// How many of its loose frames are optimistic.
    pub(crate) optimistic_held: u64,
    /// Its disk-time contract `(period, slice)` in ns, if the manifest gives it one: a
    /// revocation notice then leaves it the disk time to write back what it releases.
    pub(crate) disk: Option<(u64, u64)>,
    /// The allocator of the kernel objects made for it, on its arena of frames charged to it
    /// (see [`crate::kmem`]).
    pub(crate) arena: P::Arena,
    /// Page faults delivered to it.
    pub(crate) faults: u64,
    /// The revocation notice it has to answer, if any.
    pub(crate) revocation: Option<paging::Revocation>,
    /// Blocked in a system call that needs memory a revocation is freeing; the call runs
    /// again when it is woken.
    pub(crate) waiting_for_frames: bool,
    /// Its share of the stretch region.
    pub(crate) address: AddressQuota,
    /// Kernel work under way for it, run in chunks on its CPU time (see [`crate::jobs`]).
    pub(crate) job: Option<jobs::Job>,
    /// A driver domain: the manifest grants it devices (see [`crate::device`]).
    pub(crate) driver: bool,
}

impl<P: Platform> Domain<P> {
    /// A live domain called `name` with protection domain `space`, allowed `guaranteed_frames`
    /// frames, its kernel objects in `arena`; its context, control block and endpoints are
    /// filled in by the loader.
    pub(crate) fn new(
        name: &str,
        space: P::Space,
        guaranteed_frames: u64,
        optimistic_frames: u64,
        address: AddressQuota,
        arena: P::Arena,
    ) -> Self {
        Domain {
            name: name.into(),
            ctx: alloc::boxed::Box::new(P::Context::new_user(0, 0, [0; 4])),
            fp: P::Fp::default(),
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

    /// Whether it is alive (it has not exited nor been terminated).
    #[inline(always)]
    pub fn is_alive(&self) -> bool {
        self.ending.is_none()
    }
}

/// Every domain made since boot, dead ones included (a dead domain keeps its record, so an
/// identifier stays valid for the whole run), by identifier.
pub struct Domains<P: Platform> {
    list: Vec<Domain<P>>,
}

impl<P: Platform> Domains<P> {
    /// No domain yet.
    pub const fn new() -> Self {
        Domains { list: Vec::new() }
    }

    /// How many domains were made.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether none was made.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The identifier the next domain added gets, if a frame owner can name it.
    #[inline]
    pub(crate) fn next_id(&self) -> Option<DomainId> {
        let raw = u32::try_from(self.list.len()).ok()?;
        (raw <= MAX_ID).then_some(DomainId(raw))
    }

    /// Makes room for one more domain; `false` if the kernel heap has none.
    #[inline]
    pub(crate) fn reserve_one(&mut self) -> bool {
        self.list.try_reserve(1).is_ok()
    }

    /// Adds `d` (in room made by [`Domains::reserve_one`]); its identifier.
    pub(crate) fn push(&mut self, d: Domain<P>) -> Option<DomainId> {
        let id = self.next_id()?;
        self.list.push(d);
        Some(id)
    }

    /// The identifier `raw` names (a number from user space or a manifest), if a domain has
    /// it: the one checked conversion of a raw number into a [`DomainId`].
    #[inline]
    pub fn id(&self, raw: u32) -> Option<DomainId> {
        ((raw as usize) < self.list.len()).then_some(DomainId(raw))
    }

    /// Domain `id`, alive or dead.
    #[inline(always)]
    pub fn get(&self, id: DomainId) -> Option<&Domain<P>> {
        self.list.get(id.index())
    }

    /// Domain `id`, alive or dead, to change.
    #[inline(always)]
    pub fn get_mut(&mut self, id: DomainId) -> Option<&mut Domain<P>> {
        self.list.get_mut(id.index())
    }

    /// Domain `id` if it is alive.
    #[inline(always)]
    pub fn live(&self, id: DomainId) -> Option<&Domain<P>> {
        self.get(id).filter(|d| d.is_alive())
    }

    /// Every domain with its identifier, in order.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = (DomainId, &Domain<P>)> {
        self.list.iter().enumerate().map(|(i, d)| (DomainId::from_index(i), d))
    }

    /// Every domain with its identifier, in order, to change.
    #[inline]
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (DomainId, &mut Domain<P>)> {
        self.list.iter_mut().enumerate().map(|(i, d)| (DomainId::from_index(i), d))
    }

    /// Every identifier, in order (the table may change between steps: each is looked up
    /// again).
    #[inline]
    pub fn ids(&self) -> impl Iterator<Item = DomainId> + use<P> {
        (0..self.list.len()).map(DomainId::from_index)
    }

    /// Every domain, in order.
    #[inline]
    pub fn records(&self) -> impl Iterator<Item = &Domain<P>> {
        self.list.iter()
    }

    /// Frames charged to domain `id` now.
    #[inline]
    pub(crate) fn charged(&self, id: DomainId) -> u64 {
        charged::<P>(id)
    }

    /// Frames domain `id` holds within its guarantee: all it is charged for (its arena's
    /// frames among them) but its optimistic frames.
    pub(crate) fn guaranteed_used(&self, id: DomainId) -> u64 {
        self.charged(id) - self[id].optimistic_held
    }

    /// Could domain `id` take `pages` more frames, plus the page-table frames mapping a page
    /// may need (one per level of the tree), within its guarantee?
    pub(crate) fn within_contract(&self, id: DomainId, pages: u64) -> bool {
        let tables = P::Space::LEVELS;
        self.live(id)
            .is_some_and(|d| self.guaranteed_used(id) + pages + tables <= d.guaranteed_frames)
    }

    /// Copies domain `id`'s frames contract and holdings into its control block.
    pub(crate) fn publish_frames(&self, id: DomainId) {
        let d = &self[id];
        let Some(frame) = d.dcb else { return };
        let account = &P::dcb(frame).frames;
        account.guaranteed.store(d.guaranteed_frames, Ordering::Relaxed);
        account.optimistic.store(d.optimistic_frames, Ordering::Relaxed);
        account.guaranteed_held.store(self.guaranteed_used(id), Ordering::Relaxed);
        account.optimistic_held.store(d.optimistic_held, Ordering::Release);
    }

    /// Is a dead domain still being taken apart?
    pub(crate) fn burying(&self) -> bool {
        self.records().any(|d| matches!(d.job, Some(Job::Teardown { .. })))
    }

    /// The earliest instant something timed happens to live domain `id` (its deadline if it is
    /// blocked with one, its earliest armed timer endpoint, its revocation deadline), in ticks.
    /// Its own endpoints are looked at, no other domain's.
    pub(crate) fn exact_instant(&self, id: DomainId) -> Option<u64> {
        let d = self.live(id)?;
        let blocked = d.blocked.filter(|&t| t != u64::MAX);
        let timer = d.endpoints.iter().filter_map(|e| e.deadline).min();
        let revocation = d.revocation.as_ref().map(|r| r.deadline_ticks);
        [blocked, timer, revocation].into_iter().flatten().min()
    }
}

/// Frames charged to domain `id` now.
#[inline]
fn charged<P: Platform>(id: DomainId) -> u64 {
    P::with_frames(|fa| fa.owned_by(id.owner()))
}

impl<P: Platform> Default for Domains<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Platform> Index<DomainId> for Domains<P> {
    type Output = Domain<P>;

    /// Domain `id` (an identifier this table made: always there).
    #[inline(always)]
    fn index(&self, id: DomainId) -> &Domain<P> {
        &self.list[id.index()]
    }
}

impl<P: Platform> IndexMut<DomainId> for Domains<P> {
    #[inline(always)]
    fn index_mut(&mut self, id: DomainId) -> &mut Domain<P> {
        &mut self.list[id.index()]
    }
}
