//! The owner of every domain's record ([`Domains`]): the table of the domains made since boot,
//! by [`DomainId`] (see [`crate::domain`] for the record, the identifier and how one is made),
//! and what the kernel reads and publishes of a domain's frames.

use alloc::vec::Vec;
use core::ops::{Index, IndexMut};
use core::sync::atomic::Ordering;

use crate::Platform;
use crate::contract::AddressSpaceOps as _;
use crate::domain::{Domain, DomainId, Job, MAX_ID};

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
        (raw <= MAX_ID).then_some(DomainId::from_index(raw as usize))
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
        ((raw as usize) < self.list.len()).then_some(DomainId::from_index(raw as usize))
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
