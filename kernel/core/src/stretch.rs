//! Stretches: page-aligned ranges of the single address space, owned by a domain, with rights
//! per protection domain.
//!
//! A stretch is either *nailed* or *managed*. A nailed stretch (images, stacks, control blocks,
//! channels, `stretch_create`) gets its frames when it is created, zeroed and charged to the
//! owner, and is mapped into every protection domain that holds rights on it; it never faults.
//! A managed stretch (`stretch_create_managed`) starts with no page mapped: its owner binds a
//! stretch driver to it, which maps frames the domain holds page by page (`map`, `unmap`,
//! `protect`), and its page faults are delivered to the owner (see `paging`). Managed
//! stretches are private to their owner: they cannot be shared.

use crate::domain::DomainId;
use crate::platform::ArenaVec;
use alloc::vec::Vec;

use abi::{IMAGE_BASE, IMAGE_SLOT, PAGE_SIZE, Rights, SysError};
use allocator_api2::collections::TryReserveError;
use frame_allocator::Frame;

use allocator_api2::alloc::Allocator;

/// An allocation from a domain's arena found no room; the arena knows what it needed (see
/// `kmem::World::with_kmem`).
#[derive(Clone, Copy, Debug)]
pub struct Refused;

impl From<TryReserveError> for Refused {
    #[inline]
    fn from(_: TryReserveError) -> Self {
        Refused
    }
}

/// What a stretch is for (reports and the run summary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A segment of a domain's program image.
    Image,
    /// A domain's stack (an unmapped guard page lies below it).
    Stack,
    /// Created at run time with `stretch_create`.
    Dynamic,
    /// A domain's control block (`abi::Dcb`).
    ControlBlock,
    /// The shared memory of an IO channel, owned (and paid for) by its sender.
    Channel,
    /// Paged by a stretch driver in its owner (`stretch_create_managed`).
    Managed,
    /// Physically contiguous memory a driver domain's devices read and write (`dma_alloc`).
    Dma,
    /// A granted device's registers, mapped uncached into its driver domain alone; its pages
    /// are the device's, not frames of RAM, and are never freed.
    Device,
}

impl Kind {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Image => "image",
            Kind::Stack => "stack",
            Kind::Dynamic => "dynamic",
            Kind::ControlBlock => "control block",
            Kind::Channel => "channel",
            Kind::Managed => "managed",
            Kind::Dma => "DMA",
            Kind::Device => "device registers",
        }
    }
}

/// One stretch; its record lives in its owner's kernel arena.
pub struct Stretch<A: Allocator> {
    /// First address.
    pub base: usize,
    /// The frame behind each page, in order (`None`: a page not given its frame yet, or of a
    /// managed stretch not mapped). The frames of a nailed stretch belong to it; those mapped
    /// in a managed stretch belong to the owner's loose frames (`frame_alloc`) and outlive the
    /// mapping.
    pub frames: ArenaVec<Option<Frame>, A>,
    /// The rights each page of a managed stretch is mapped with (empty for nailed stretches).
    pub page_rights: ArenaVec<Rights, A>,
    /// The owning domain (charged for the frames and the record).
    pub owner: DomainId,
    /// Rights per domain (protection domain), at most one entry per domain.
    pub rights: ArenaVec<(DomainId, Rights), A>,
    /// What it is for.
    pub kind: Kind,
    /// Being filled or emptied by a kernel job (`jobs`): nobody may use it or change it.
    pub busy: bool,
}

impl<A: Allocator + Copy> Stretch<A> {
    /// The record of a stretch of `pages` pages at `base` owned by `owner`, no page with its
    /// frame yet, in `alloc` (its owner's arena): room for two rights entries, and for a managed
    /// stretch the rights of each page.
    pub fn new_in(
        base: usize,
        pages: usize,
        owner: DomainId,
        kind: Kind,
        alloc: A,
    ) -> Result<Self, Refused> {
        let mut frames = ArenaVec::new_in(alloc);
        frames.try_reserve_exact(pages)?;
        frames.resize(pages, None);
        let mut page_rights = ArenaVec::new_in(alloc);
        if kind == Kind::Managed {
            page_rights.try_reserve_exact(pages)?;
            page_rights.resize(pages, Rights::NONE);
        }
        let mut rights = ArenaVec::new_in(alloc);
        rights.try_reserve_exact(2)?;
        Ok(Stretch { base, frames, page_rights, owner, rights, kind, busy: false })
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.frames.len() * PAGE_SIZE
    }

    /// Whether it has no page.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// One past the last address.
    #[inline]
    pub fn end(&self) -> usize {
        self.base + self.len()
    }

    /// Does the stretch contain `addr`?
    #[inline]
    pub fn contains(&self, addr: usize) -> bool {
        (self.base..self.end()).contains(&addr)
    }

    /// The rights `domain` holds.
    #[inline]
    pub fn rights_of(&self, domain: DomainId) -> Rights {
        self.rights.iter().find(|(d, _)| *d == domain).map_or(Rights::NONE, |(_, r)| *r)
    }

    /// Sets `domain`'s rights (`NONE` removes the entry); `Err` if the owner's arena has no
    /// room for a new entry (nothing changed then).
    pub fn set_rights(&mut self, domain: DomainId, rights: Rights) -> Result<(), Refused> {
        if rights != Rights::NONE && self.rights.iter().all(|(d, _)| *d != domain) {
            self.rights.try_reserve(1)?;
        }
        self.rights.retain(|(d, _)| *d != domain);
        if rights != Rights::NONE {
            self.rights.push((domain, rights));
        }
        Ok(())
    }
}

/// The stretches of one domain, sorted by base address, in its arena: finding the stretch that
/// contains an address is a binary search, and making room for a new one can fail (the arena
/// then grows within the domain's guarantee, see `kmem`) instead of taking the kernel down
/// ([`Stretches::reserve_one`] before [`Stretches::insert`]).
pub struct StretchTable<A: Allocator> {
    list: ArenaVec<Stretch<A>, A>,
}

impl<A: Allocator + Copy> StretchTable<A> {
    /// An empty table in `alloc`.
    pub fn new_in(alloc: A) -> Self {
        StretchTable { list: ArenaVec::new_in(alloc) }
    }

    /// Where the stretch at `base` is, or would go.
    #[inline]
    fn find(&self, base: usize) -> Result<usize, usize> {
        self.list.binary_search_by_key(&base, |s| s.base)
    }

    /// The stretch with the highest base below `end`.
    #[inline]
    fn last_below(&self, end: usize) -> Option<&Stretch<A>> {
        let i = self.list.partition_point(|s| s.base < end);
        i.checked_sub(1).map(|i| &self.list[i])
    }

    /// Makes room for one more stretch.
    pub fn reserve_one(&mut self) -> Result<(), Refused> {
        Ok(self.list.try_reserve(1)?)
    }

    /// Takes the stretch at `base` out for good; an emptied table gives its room back to the
    /// arena.
    fn remove(&mut self, base: usize) -> Option<Stretch<A>> {
        let s = self.find(base).ok().map(|i| self.list.remove(i));
        if self.list.is_empty() {
            self.list = ArenaVec::new_in(*self.list.allocator());
        }
        s
    }

    /// The number of stretches.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether the table holds no stretch.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The stretch containing `addr`, and its slot in the table (valid until the table
    /// changes).
    #[inline]
    pub fn containing(&self, addr: usize) -> Option<(usize, &Stretch<A>)> {
        let slot = self.list.partition_point(|s| s.base <= addr).checked_sub(1)?;
        let s = &self.list[slot];
        s.contains(addr).then_some((slot, s))
    }

    /// The stretch in `slot` (from [`StretchTable::containing`]), to change.
    #[inline]
    pub fn at_mut(&mut self, slot: usize) -> Option<&mut Stretch<A>> {
        self.list.get_mut(slot)
    }

    /// Every stretch, by base address.
    pub fn iter(&self) -> core::slice::Iter<'_, Stretch<A>> {
        self.list.iter()
    }
}

/// Every stretch, in the tables of the domains whose part of the address space holds them: a
/// domain's image slot and its share of the stretch region (`address::AddressQuota`) are its own, so
/// the stretch at an address is looked for in one table only.
pub struct Stretches<A: Allocator> {
    /// Per domain (by identifier): its table, and the start of its share of the stretch region
    /// (shares are handed out in order of identifier, so these increase).
    tables: Vec<(usize, StretchTable<A>)>,
}

impl<A: Allocator> Default for Stretches<A> {
    fn default() -> Self {
        Stretches { tables: Vec::new() }
    }
}

impl<A: Allocator + Copy> Stretches<A> {
    /// Adds the table of the next domain, whose share of the stretch region starts at
    /// `share_start`; `false` if the kernel heap has no room for it.
    pub fn add_domain(&mut self, share_start: usize, alloc: A) -> bool {
        if self.tables.try_reserve(1).is_err() {
            return false;
        }
        self.tables.push((share_start, StretchTable::new_in(alloc)));
        true
    }

    /// The domain whose part of the address space holds `addr`.
    #[inline]
    fn domain_of(&self, addr: usize) -> Option<usize> {
        if (IMAGE_BASE..abi::STRETCH_BASE).contains(&addr) {
            let id = (addr - IMAGE_BASE) / IMAGE_SLOT;
            return (id < self.tables.len()).then_some(id);
        }
        self.tables.partition_point(|(start, _)| *start <= addr).checked_sub(1)
    }

    #[inline]
    fn table(&self, addr: usize) -> Option<&StretchTable<A>> {
        self.domain_of(addr).map(|id| &self.tables[id].1)
    }

    #[inline]
    fn table_mut(&mut self, addr: usize) -> Option<&mut StretchTable<A>> {
        self.domain_of(addr).map(|id| &mut self.tables[id].1)
    }

    /// Domain `id`'s table: the stretches it owns.
    #[inline]
    pub fn of(&self, id: DomainId) -> Option<&StretchTable<A>> {
        self.tables.get(id.index()).map(|(_, t)| t)
    }

    /// Domain `id`'s table, to change.
    #[inline]
    pub fn of_mut(&mut self, id: DomainId) -> Option<&mut StretchTable<A>> {
        self.tables.get_mut(id.index()).map(|(_, t)| t)
    }

    /// The stretch in `slot` of domain `id`'s table (from [`StretchTable::containing`]), to
    /// change; `NotFound` if there is none.
    #[inline]
    pub fn slot_mut(&mut self, id: DomainId, slot: usize) -> Result<&mut Stretch<A>, SysError> {
        self.of_mut(id).and_then(|t| t.at_mut(slot)).ok_or(SysError::NotFound)
    }

    /// Sets page `index` of the stretch in `slot` of domain `id`'s table: its frame and rights.
    #[inline]
    pub fn set_page(
        &mut self,
        id: DomainId,
        slot: usize,
        index: usize,
        frame: Option<Frame>,
        rights: Rights,
    ) -> Result<(), SysError> {
        let s = self.slot_mut(id, slot)?;
        *s.frames.get_mut(index).ok_or(SysError::NotFound)? = frame;
        *s.page_rights.get_mut(index).ok_or(SysError::NotFound)? = rights;
        Ok(())
    }

    /// The stretch at `base`.
    #[inline]
    pub fn get(&self, base: &usize) -> Option<&Stretch<A>> {
        let t = self.table(*base)?;
        t.find(*base).ok().map(|i| &t.list[i])
    }

    /// The stretch at `base`, to change.
    #[inline]
    pub fn get_mut(&mut self, base: &usize) -> Option<&mut Stretch<A>> {
        let t = self.table_mut(*base)?;
        t.find(*base).ok().map(|i| &mut t.list[i])
    }

    /// Takes the stretch at `base` out for good (it is being destroyed).
    pub fn remove(&mut self, base: &usize) -> Option<Stretch<A>> {
        self.table_mut(*base)?.remove(*base)
    }

    /// Makes room for one more stretch at `base` (in the table of the domain whose part of the
    /// address space holds it, which is the stretch's owner); `Err` if its arena has no room.
    pub fn reserve_one(&mut self, base: usize) -> Result<(), Refused> {
        self.table_mut(base).ok_or(Refused)?.reserve_one()
    }

    /// Adds `s` (whose range overlaps no other), in room made by [`Stretches::reserve_one`].
    pub fn insert(&mut self, s: Stretch<A>) {
        let Some(t) = self.table_mut(s.base) else { return };
        debug_assert!(t.list.len() < t.list.capacity(), "no room reserved");
        let at = t.find(s.base).unwrap_or_else(|i| i);
        t.list.insert(at, s);
    }

    /// The stretch with the highest base below `end` in the table that holds `end - 1`.
    pub fn last_below(&self, end: usize) -> Option<&Stretch<A>> {
        self.table(end.checked_sub(1)?)?.last_below(end)
    }

    /// The stretch containing `addr`.
    pub fn containing(&self, addr: usize) -> Option<&Stretch<A>> {
        self.table(addr)?.last_below(addr.checked_add(1)?).filter(|s| s.contains(addr))
    }

    /// The stretch of domain `id` containing `addr`, with its slot in the domain's table.
    pub fn own_containing(&self, id: DomainId, addr: usize) -> Option<(usize, &Stretch<A>)> {
        self.of(id)?.containing(addr)
    }

    /// Is `addr` in a managed stretch of domain `id`?
    pub fn in_managed(&self, id: DomainId, addr: usize) -> bool {
        self.own_containing(id, addr).is_some_and(|(_, s)| s.kind == Kind::Managed)
    }

    /// Does domain `id` hold `want` on every page of `[addr, addr + len)`?
    #[inline]
    pub fn may_access(&self, id: DomainId, addr: usize, len: usize, want: Rights) -> bool {
        let Some(end) = addr.checked_add(len) else { return false };
        if addr < abi::USER_BASE || end > abi::USER_END {
            return false;
        }
        let mut a = addr;
        while a < end {
            match self.containing(a) {
                Some(s) if !s.busy && s.rights_of(id).contains(want) => a = s.end(),
                _ => return false,
            }
        }
        true
    }

    /// Every stretch, by domain and then base address.
    pub fn values(&self) -> impl Iterator<Item = &Stretch<A>> {
        self.tables.iter().flat_map(|(_, t)| t.list.iter())
    }
}

impl<A: Allocator + Copy> core::ops::Index<&usize> for Stretches<A> {
    type Output = Stretch<A>;

    fn index(&self, base: &usize) -> &Stretch<A> {
        self.get(base).expect("a stretch at this base")
    }
}
