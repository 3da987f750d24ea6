//! Self-paging, the kernel's part: managed stretches, frames contracts, the memory calls, the
//! delivery of page faults to the faulting domain, and the revocation of optimistic frames.
//!
//! The kernel holds the mechanism and checks every step; the policy (which frame backs which
//! page, what to evict, where pages go) belongs to the stretch drivers that run in each domain
//! (`stretch_drivers/`, libtessera's `paging`).
//!
//! - A domain's *frames contract* is `(guaranteed, optimistic)` frames from its manifest.
//!   Everything charged to it (nailed stretches, loose frames, page tables, and the kernel's
//!   per-page records of its managed stretches) counts against the guarantee, except the loose
//!   frames it took as optimistic, which count against the optimistic allowance.
//! - *Loose frames* are those a domain takes with `frame_alloc`: zero-filled, charged to it,
//!   mapped by `map` at most at one page of a stretch it manages, given back with `frame_free`.
//! - A *managed stretch* starts unmapped, with its page tables made (and charged to the
//!   guarantee) when it is created, so that `map` never needs memory; when a thread touches a page that is not mapped (or
//!   mapped without the access), the kernel saves the context and the fault in the control
//!   block and enters the domain's activation handler with [`abi::activation::FAULT`], on the
//!   domain's own CPU time. If the access exceeds the domain's rights on the stretch, or
//!   activations are off (a fault inside the domain's own fault handling), or the domain has no
//!   handler, the domain is terminated with a report instead.
//! - *Revocation*: a guaranteed allocation that finds too few free frames sends a notice to the
//!   domain holding the most optimistic frames (not the caller) and blocks the caller; its call
//!   runs again when frames come back. The notice names the frames wanted and a deadline
//!   ([`revocation_window`]): the time by which the victim's CPU contract guarantees it
//!   [`RELEASE_WORK_NS`] of CPU per frame asked for, but never more than
//!   [`REVOCATION_BOUND_NS`]; for a victim with a disk contract, at least the time by which that
//!   contract guarantees it [`WRITE_BACK_NS`] of disk time per frame (to write the pages back),
//!   up to [`REVOCATION_DISK_BOUND_NS`]. So a victim whose contracts let it comply is never forced,
//!   whatever its period, and a claimer waits at most the bound, whatever the victim's
//!   period. The victim's drivers release frames with `unmap` and `frame_free`; the kernel
//!   counts them and clears the notice once enough came back. At the deadline a victim that
//!   has not complied is terminated, which frees all its frames.
//! - *Accessed and dirty bits*: `map` (and `map_batch`'s maps) make a managed page's entry with
//!   the hardware's accessed and dirty bits clear, so the hardware sets them as the page is
//!   used; `remap` returns the old page's bits as it moves the frame (the new entry starts
//!   with both clear), `protect` keeps them, and `page_state` reads them for the driver (and
//!   clears them, with the TLB flushed).
//!   The kernel's own mappings and nailed stretches keep them as the architecture makes them.
//!
//! Invariants: a loose frame is mapped at most at one page, and a page of a managed stretch
//! maps only a loose frame of the stretch's owner; `Domain::optimistic_held` is the number of
//! its loose frames marked optimistic; at most one revocation notice is outstanding at a time.
//!
//! Not implemented: shared managed stretches (managed stretches are private to their owner),
//! revocation of guaranteed frames (never needed: admission keeps the guarantees within
//! memory).

use crate::domain::{DomainId, Revocation};
use core::sync::atomic::Ordering;

use abi::{
    Access, MAP_BATCH_MAX, PAGE_SIZE, PageOp, Rights, SysError, frame_kind, page_op, page_state,
};
use frame_allocator::Frame;

use super::clock::{now_ns, ticks_from_ns_up};
use super::kmem;
use super::loose::Loose;
use super::stretch::{Kind, Stretch};
use super::{Ending, World};
use crate::contract::{AddressSpaceOps as _, UserContextOps as _};
use crate::{Platform, frames};

/// Optimistic frames are granted only while more than this many frames stay free, so that page
/// tables and small guaranteed allocations rarely wait for a revocation.
pub const OPTIMISTIC_FLOOR: u64 = 32;
/// The longest a revocation notice runs: whatever the victim's contract, the domain waiting
/// for the frames has them this long after the notice (plus the time the kernel takes to free
/// them by force).
pub const REVOCATION_BOUND_NS: u64 = 50_000_000;
/// The CPU time a victim is allowed per frame it is asked for (a physical driver releases a
/// frame with one `unmap` and one `frame_free`, about 1 µs; the rest is slack for drivers that
/// do more).
pub const RELEASE_WORK_NS: u64 = 10_000;
/// The disk time a victim with a disk contract is allowed per frame it is asked for: time to
/// write the page back. A 4 KiB write on the Deskstar model takes 0.1 ms within a group and
/// about 9 ms after a seek; Heracles's pagers write evicted pages in groups, and the thesis
/// measured 1.4 ms per page on its IDE disk.
pub const WRITE_BACK_NS: u64 = 1_000_000;
/// The longest a notice to a victim with a disk contract runs: what it may need to write back
/// makes the claimer wait longer than [`REVOCATION_BOUND_NS`], but never more than this.
pub const REVOCATION_DISK_BOUND_NS: u64 = 2_000_000_000;

/// How long after a notice for `wanted` frames its deadline lies, for a victim with CPU
/// `contract`: the time by which the contract guarantees it `wanted × RELEASE_WORK_NS` of CPU
/// (whole slices, one period more for a notice that arrives mid-period), but at most
/// [`REVOCATION_BOUND_NS`]. So a victim whose contract gives it the time to comply is never
/// forced, and no claimer waits longer than the bound.
///
/// A victim with a disk contract `(period, slice)` (it pages to its own disk stream) may have
/// to write back what it releases: its window is at least the time by which that contract
/// guarantees it [`WRITE_BACK_NS`] of disk time per frame, the same way, but at most
/// [`REVOCATION_DISK_BOUND_NS`]. So a pager is not terminated for obeying its disk contract.
pub fn revocation_window(
    contract: Option<atropos::Contract>,
    disk: Option<(u64, u64)>,
    wanted: u64,
) -> u64 {
    let within = |per_frame: u64, period: u64, slice: u64| {
        let work = wanted.saturating_mul(per_frame);
        work.div_ceil(slice).saturating_add(1).saturating_mul(period)
    };
    let cpu = match contract {
        Some(c) if c.slice > 0 => within(RELEASE_WORK_NS, c.period, c.slice),
        _ => u64::MAX,
    }
    .min(REVOCATION_BOUND_NS);
    match disk {
        Some((period, slice)) if slice > 0 => {
            cpu.max(within(WRITE_BACK_NS, period, slice).min(REVOCATION_DISK_BOUND_NS))
        }
        _ => cpu,
    }
}
/// Largest managed stretch (its pages cost nothing until they are mapped).
pub const MANAGED_MAX: usize = 256 << 20;

/// Why a call that needs free frames cannot go on now.
pub enum Shortage {
    /// A revocation is under way: block the caller and run the call again later.
    Wait,
    /// The call fails with this error.
    Fail(SysError),
}

impl From<SysError> for Shortage {
    #[inline]
    fn from(e: SysError) -> Self {
        Shortage::Fail(e)
    }
}

/// A page of a managed stretch, as a memory call found it.
pub(super) struct ManagedPage {
    /// The stretch's slot in its owner's table (valid until the table changes).
    pub(super) slot: usize,
    /// The page's index in it.
    pub(super) index: usize,
    /// The caller's rights on the stretch.
    stretch_rights: Rights,
    /// A frame is mapped at the page.
    pub(super) mapped: bool,
}

impl ManagedPage {
    /// Page rights from a system-call argument, within the caller's rights on the stretch.
    #[inline]
    fn rights_within(&self, bits: usize) -> Result<Rights, SysError> {
        let rights = page_rights(bits)?;
        if !self.stretch_rights.contains(rights) {
            return Err(SysError::PermissionDenied);
        }
        Ok(rights)
    }
}

/// A frame number as the memory calls name frames (physical address / page size).
#[inline]
fn frame_number(frame: Frame) -> usize {
    (frame.addr() / PAGE_SIZE as u64) as usize
}

/// Page rights from a system-call argument: at least one of read, write, execute, and no
/// other bit.
#[inline]
fn page_rights(bits: usize) -> Result<Rights, SysError> {
    let r = Rights::from_bits(bits).ok_or(SysError::InvalidArgument)?;
    let page = Rights::READ.union(Rights::WRITE).union(Rights::EXECUTE);
    if r.contains(Rights::META) || r == Rights::NONE || !page.contains(r) {
        return Err(SysError::InvalidArgument);
    }
    Ok(r)
}

impl<P: Platform> World<P> {
    /// `stretch_create_managed`: a stretch of `bytes` owned by `id` with no page mapped. Its
    /// page tables are made now (charged to the guarantee with the kernel's records of its
    /// pages), so that mapping its pages never needs memory.
    pub(super) fn create_managed_stretch(
        &mut self,
        id: DomainId,
        bytes: usize,
        rights: usize,
    ) -> Result<usize, Shortage> {
        let rights = page_rights(rights & !(Rights::META.0 as usize))?;
        if bytes == 0 || bytes > MANAGED_MAX {
            return Err(SysError::InvalidArgument.into());
        }
        let pages = super::pages_for(bytes);
        let record = kmem::frames_for(kmem::stretch_record(pages, Kind::Managed));
        let base = self.domains[id].address.take(pages).ok_or(SysError::NoAddressSpace)?;
        let end = base + pages * PAGE_SIZE;
        let undo = |w: &mut World<P>| {
            if let Some(space) = w.domains[id].space.as_mut() {
                space.prune_range(base, end);
            }
            w.domains[id].address.give_back(base, pages);
        };
        if let Err(e) = self.populate_tables(id, base, end, record) {
            self.domains[id].address.give_back(base, pages);
            return Err(e);
        }
        let alloc = self.domains[id].arena;
        let made = self.with_kmem(id, |w| {
            let s = Stretch::new_in(base, pages, id, Kind::Managed, alloc)?;
            w.stretches.reserve_one(base)?;
            Ok(s)
        });
        let mut s = match made {
            Ok(s) => s,
            Err(e) => {
                undo(self);
                return Err(e.into());
            }
        };
        if s.set_rights(id, rights.union(Rights::META)).is_err() {
            undo(self);
            return Err(SysError::NoMemory.into());
        }
        self.stretches.insert(s);
        self.domains.publish_frames(id);
        Ok(base)
    }

    /// Makes the page tables of `[base, end)` in domain `id`'s protection domain, checking them
    /// and the `record` frames its kernel record will take against its guarantee.
    fn populate_tables(
        &mut self,
        id: DomainId,
        base: usize,
        end: usize,
        record: u64,
    ) -> Result<(), Shortage> {
        let space = self.domains[id].space.as_mut().ok_or(SysError::NotFound)?;
        let tables = space.tables_missing(base, end).map_err(|_| SysError::InvalidArgument)?;
        if !self.domains.within_contract(id, tables + record) {
            return Err(SysError::NoMemory.into());
        }
        self.reserve_frames(id, tables + record)?;
        let space = self.domains[id].space.as_mut().ok_or(SysError::NotFound)?;
        if space.populate(base, end).is_err() {
            space.prune_range(base, end);
            return Err(SysError::NoMemory.into());
        }
        Ok(())
    }

    /// The page tables of managed stretch `s` are freed (its pages are unmapped already, their
    /// frames back among its owner's loose frames).
    pub(super) fn release_managed_pages(&mut self, s: &Stretch<P::Arena>) {
        let d = &mut self.domains[s.owner];
        if let Some(space) = d.space.as_mut() {
            space.prune_range(s.base, s.end());
        }
    }

    /// Makes sure `needed` frames are free for a guaranteed allocation of domain `id`; if they
    /// are not, sends a revocation notice (unless one is outstanding) and answers
    /// [`Shortage::Wait`].
    pub(super) fn reserve_frames(&mut self, id: DomainId, needed: u64) -> Result<(), Shortage> {
        let free = P::with_frames(|fa| fa.free_count());
        if free >= needed {
            return Ok(());
        }
        // A notice is outstanding until its victim complied or, forced, is taken apart.
        if self
            .domains
            .records()
            .any(|d| d.revocation.is_some() && (d.ending.is_none() || d.job.is_some()))
        {
            return Err(Shortage::Wait);
        }
        let victim = self
            .domains
            .iter()
            .filter(|&(v, d)| v != id && d.is_alive() && d.optimistic_held > 0)
            .max_by_key(|&(v, d)| (d.optimistic_held, core::cmp::Reverse(v)))
            .map(|(v, _)| v);
        let Some(victim) = victim else { return Err(Shortage::Fail(SysError::NoMemory)) };
        let held = self.domains[victim].optimistic_held;
        self.send_revocation(victim, (needed - free).min(held), id);
        Err(Shortage::Wait)
    }

    /// Asks domain `victim` to release `wanted` optimistic frames (for domain `for_whom`).
    fn send_revocation(&mut self, victim: DomainId, wanted: u64, for_whom: DomainId) {
        let contract = self.sched.policy.contract(victim.index());
        let (period, slice) = contract.map_or((0, 0), |c| (c.period, c.slice));
        let sent_ns = now_ns::<P>();
        let disk = self.domains[victim].disk;
        let deadline_ns = sent_ns + revocation_window(contract, disk, wanted);
        let d = &mut self.domains[victim];
        let goal = d.optimistic_held - wanted;
        let deadline_ticks = ticks_from_ns_up::<P>(deadline_ns);
        d.revocation = Some(Revocation { wanted, goal, sent_ns, deadline_ns, deadline_ticks });
        self.sched.note_instant(deadline_ticks, victim);
        let d = &self.domains[victim];
        if let Some(frame) = d.dcb {
            let slot = &P::dcb(frame).revocation;
            slot.deadline_ns.store(deadline_ns, Ordering::Relaxed);
            slot.frames_wanted.store(wanted, Ordering::Relaxed);
            slot.notices.fetch_add(1, Ordering::Release);
        }
        info!(
            "revocation: domain {=str} (holding {=u64} optimistic frames, the most) asked to release {=u64} for domain {=str}: sent={=u64} us deadline={=u64} us period={=u64} us slice={=u64} us",
            d.name.as_str(),
            d.optimistic_held,
            wanted,
            self.domains[for_whom].name.as_str(),
            sent_ns / 1000,
            deadline_ns / 1000,
            period / 1000,
            slice / 1000
        );
        self.wake(victim);
    }

    /// Domain `id` gave back an optimistic frame: clears its notice once it is satisfied.
    fn revocation_progress(&mut self, id: DomainId) {
        let d = &mut self.domains[id];
        let Some(r) = &d.revocation else { return };
        let left = d.optimistic_held.saturating_sub(r.goal);
        if let Some(frame) = d.dcb {
            P::dcb(frame).revocation.frames_wanted.store(left, Ordering::Release);
        }
        if left > 0 {
            return;
        }
        info!(
            "revocation: domain {=str} released {=u64} optimistic frames in {=u64} us",
            d.name.as_str(),
            r.wanted,
            (now_ns::<P>() - r.sent_ns) / 1000
        );
        d.revocation = None;
        self.wake_frame_waiters();
    }

    /// Terminates domain `id` if its revocation deadline has passed, which frees its frames.
    pub(super) fn enforce_revocation(&mut self, id: DomainId, now_ns: u64) {
        {
            let d = &self.domains[id];
            let Some(r) = d.revocation.as_ref().filter(|_| d.ending.is_none()) else { return };
            if r.deadline_ns > now_ns {
                return;
            }
            error!(
                "domain {=str}: revocation: asked for {=u64} optimistic frames, still {=u64} to release at the deadline ({=u64} us): taking all its frames by force",
                d.name.as_str(),
                r.wanted,
                d.optimistic_held - r.goal,
                r.deadline_ns / 1000
            );
        }
        self.begin_death(id, Ending::Terminated(super::Termination::RevocationIgnored));
    }

    /// Wakes the domains blocked in a call that waits for frames; their calls run again.
    pub(super) fn wake_frame_waiters(&mut self) {
        let now = self.sched.now_ns::<P>();
        for (id, d) in self.domains.iter_mut() {
            if d.ending.is_none() && core::mem::take(&mut d.waiting_for_frames) {
                d.blocked = None;
                self.sched.policy.wake(id.index(), now);
            }
        }
    }

    /// `frame_alloc`: a zero-filled loose frame of `kind` for domain `id`; its frame number.
    pub(super) fn frame_alloc(&mut self, id: DomainId, kind: usize) -> Result<usize, Shortage> {
        let d = &self.domains[id];
        let optimistic = match kind {
            frame_kind::GUARANTEED => {
                if self.domains.guaranteed_used(id) + 1 > d.guaranteed_frames {
                    return Err(SysError::NoMemory.into());
                }
                self.reserve_frames(id, 1)?;
                false
            }
            frame_kind::OPTIMISTIC => {
                let free = P::with_frames(|fa| fa.free_count());
                if d.optimistic_held >= d.optimistic_frames
                    || free <= OPTIMISTIC_FLOOR
                    || d.revocation.is_some()
                {
                    return Err(SysError::NoMemory.into());
                }
                true
            }
            _ => return Err(SysError::InvalidArgument.into()),
        };
        let Ok(frame) = frames::alloc_zeroed::<P>(id.owner()) else {
            return Err(SysError::NoMemory.into());
        };
        P::with_loose(|t| t.insert(frame, Loose { owner: id.raw(), optimistic, mapped: false }));
        let d = &mut self.domains[id];
        d.loose_held += 1;
        d.optimistic_held += u64::from(optimistic);
        self.domains.publish_frames(id);
        Ok(frame_number(frame))
    }

    /// `frame_free`: domain `id` gives back loose frame `number`, which must not be mapped.
    pub(super) fn frame_free(&mut self, id: DomainId, number: usize) -> Result<usize, SysError> {
        let pa = (number as u64).checked_mul(PAGE_SIZE as u64).ok_or(SysError::NotFound)?;
        let frame = Frame::containing(pa);
        let optimistic = P::with_loose(|t| {
            let l = t.get_of(id.raw(), frame).ok_or(SysError::NotFound)?;
            if l.mapped {
                return Err(SysError::InUse);
            }
            t.remove(frame);
            Ok(l.optimistic)
        })?;
        let d = &mut self.domains[id];
        d.loose_held -= 1;
        if let Err(e) = frames::free::<P>(frame, id.owner()) {
            error!("frame_free: freeing frame {=u64:#x} failed: {}", pa, e);
        }
        if optimistic {
            d.optimistic_held -= 1;
            self.revocation_progress(id);
        }
        self.domains.publish_frames(id);
        Ok(0)
    }

    /// The stretch (by its slot in domain `id`'s table) and page index of `va` in a managed
    /// stretch of domain `id`.
    #[inline(always)]
    pub(super) fn managed_page(&self, id: DomainId, va: usize) -> Result<ManagedPage, SysError> {
        if !va.is_multiple_of(PAGE_SIZE) {
            return Err(SysError::InvalidArgument);
        }
        let (slot, s) = self
            .stretches
            .own_containing(id, va)
            .filter(|(_, s)| s.rights_of(id) != Rights::NONE && !s.busy)
            .ok_or(SysError::BadAddress)?;
        if s.kind != Kind::Managed {
            return Err(SysError::NotManaged);
        }
        let index = (va - s.base) / PAGE_SIZE;
        Ok(ManagedPage {
            slot,
            index,
            stretch_rights: s.rights_of(id),
            mapped: s.frames[index].is_some(),
        })
    }

    /// Reserves, from domain `id`'s guarantee, the page tables a mapping at `va` needs: the
    /// tables were made with the stretch, but they may have gone with a neighbouring stretch
    /// that shared them. How many.
    fn reserve_tables(&mut self, id: DomainId, va: usize) -> Result<u64, Shortage> {
        let d = &self.domains[id];
        let tables = d.space.as_ref().map_or(0, |s| s.tables_needed(va));
        if tables > 0 {
            if self.domains.guaranteed_used(id) + tables > d.guaranteed_frames {
                return Err(SysError::NoMemory.into());
            }
            self.reserve_frames(id, tables)?;
        }
        Ok(tables)
    }

    /// `map`: maps domain `id`'s loose frame `number` at page `va` of a stretch it manages.
    pub(super) fn map_page(
        &mut self,
        id: DomainId,
        va: usize,
        number: usize,
        rights: usize,
    ) -> Result<usize, Shortage> {
        let page = self.managed_page(id, va)?;
        let rights = page.rights_within(rights)?;
        let pa = (number as u64).checked_mul(PAGE_SIZE as u64).ok_or(SysError::NotFound)?;
        let frame = Frame::containing(pa);
        let loose = P::with_loose(|t| t.get_of(id.raw(), frame)).ok_or(SysError::NotFound)?;
        if loose.mapped {
            return Err(SysError::InUse.into());
        }
        if page.mapped {
            return Err(SysError::AlreadyMapped.into());
        }
        let tables = self.reserve_tables(id, va)?;
        let s = self.stretches.slot_mut(id, page.slot)?;
        let d = &mut self.domains[id];
        let space = d.space.as_mut().ok_or(SysError::NotFound)?;
        // Accessed and dirty clear: the hardware sets them as the page is used.
        space.map_tracked(va, pa, rights).map_err(|_| SysError::NoMemory)?;
        P::with_loose(|t| t.set_mapped(frame, true));
        s.frames[page.index] = Some(frame);
        s.page_rights[page.index] = rights;
        if tables > 0 {
            // Only new page tables change what the domain holds.
            self.domains.publish_frames(id);
        }
        Ok(0)
    }

    /// `unmap`: removes page `va` of a stretch domain `id` manages; the frame's number.
    pub(super) fn unmap_page(&mut self, id: DomainId, va: usize) -> Result<usize, SysError> {
        let page = self.managed_page(id, va)?;
        if self.is_lent(id, va) {
            return Err(SysError::InUse);
        }
        let s = self.stretches.slot_mut(id, page.slot)?;
        let frame = s.frames[page.index].take().ok_or(SysError::NotMapped)?;
        s.page_rights[page.index] = Rights::NONE;
        let d = &mut self.domains[id];
        if let Some(space) = d.space.as_mut() {
            space.unmap_keeping_tables(va);
        }
        P::with_loose(|t| t.set_mapped(frame, false));
        // What the domain holds is unchanged: the frame stays among its loose frames.
        Ok(frame_number(frame))
    }

    /// `remap`: moves the frame mapped at page `from` of a stretch domain `id` manages to its
    /// unmapped page `to`, with `rights`, and returns `from`'s state as it left it
    /// ([`page_state`] bits: mapped, and the hardware's accessed and dirty bits); the new entry
    /// starts with both bits clear. Everything is checked before anything changes, so a
    /// refused call leaves both pages as they were.
    pub(super) fn remap_page(
        &mut self,
        id: DomainId,
        from: usize,
        to: usize,
        rights: usize,
    ) -> Result<usize, Shortage> {
        if from == to {
            return Err(SysError::InvalidArgument.into());
        }
        let source = self.managed_page(id, from)?;
        let target = self.managed_page(id, to)?;
        let rights = target.rights_within(rights)?;
        if !source.mapped {
            return Err(SysError::NotMapped.into());
        }
        if target.mapped {
            return Err(SysError::AlreadyMapped.into());
        }
        if self.is_lent(id, from) {
            return Err(SysError::InUse.into());
        }
        let tables = self.reserve_tables(id, to)?;
        let frame = self.stretches.slot_mut(id, source.slot)?.frames[source.index]
            .ok_or(SysError::NotMapped)?;
        self.stretches.slot_mut(id, target.slot)?;
        let pa = frame.addr();
        let d = &mut self.domains[id];
        let space = d.space.as_mut().ok_or(SysError::NotFound)?;
        // The new mapping first, with both bits clear: if its table cannot be made, nothing
        // has moved. The old entry's bits are read as it goes: nothing runs in the domain
        // between the two, so no access is lost.
        let state = space.page_state(from);
        space.map_tracked(to, pa, rights).map_err(|_| SysError::NoMemory)?;
        space.unmap_keeping_tables(from);
        // Both stretches were found above: these cannot fail.
        self.stretches.set_page(id, source.slot, source.index, None, Rights::NONE)?;
        self.stretches.set_page(id, target.slot, target.index, Some(frame), rights)?;
        if tables > 0 {
            self.domains.publish_frames(id);
        }
        Ok(usize::from(state))
    }

    /// Checks one entry of a `map_batch` as its single call would check it, against the pages
    /// and frames as they are; for a map, the frame's physical address.
    fn check_page_op(&self, id: DomainId, op: &PageOp) -> Result<u64, SysError> {
        let page = self.managed_page(id, op.va as usize)?;
        match op.op {
            page_op::MAP => {
                page.rights_within(op.rights as usize)?;
                let pa = op.frame.checked_mul(PAGE_SIZE as u64).ok_or(SysError::NotFound)?;
                let loose = P::with_loose(|t| t.get_of(id.raw(), Frame::containing(pa)))
                    .ok_or(SysError::NotFound)?;
                if loose.mapped {
                    return Err(SysError::InUse);
                }
                if page.mapped {
                    return Err(SysError::AlreadyMapped);
                }
                Ok(pa)
            }
            page_op::UNMAP | page_op::PROTECT => {
                if op.op == page_op::PROTECT {
                    page.rights_within(op.rights as usize)?;
                }
                if !page.mapped {
                    return Err(SysError::NotMapped);
                }
                if self.is_lent(id, op.va as usize) {
                    return Err(SysError::InUse);
                }
                Ok(0)
            }
            _ => Err(SysError::InvalidArgument),
        }
    }

    /// `map_batch`: the `count` [`PageOp`]s at `ops` in domain `id`'s memory, applied with one
    /// TLB flush. Every entry is checked before anything changes (against the state before the
    /// call; two entries on one page, or two maps of one frame, are refused), so a refused
    /// call leaves every page as it was; its error comes with the index of the refused entry
    /// (`count` when `ops` or `count` is refused).
    pub(super) fn map_batch(
        &mut self,
        id: DomainId,
        ops: usize,
        count: usize,
    ) -> Result<usize, (Shortage, usize)> {
        let whole = |e: SysError| (Shortage::Fail(e), count);
        if count == 0 || count > MAP_BATCH_MAX || !ops.is_multiple_of(8) {
            return Err(whole(SysError::InvalidArgument));
        }
        let mut words = [0u64; MAP_BATCH_MAX * PageOp::WORDS];
        let words = &mut words[..count * PageOp::WORDS];
        if !self.stretches.may_access(id, ops, count * size_of::<PageOp>(), Rights::READ) {
            return Err(whole(SysError::BadAddress));
        }
        P::copy_words_from_user(words, ops).map_err(|_| whole(SysError::BadAddress))?;
        let entry = |i: usize| {
            let w = &words[i * PageOp::WORDS..][..PageOp::WORDS];
            PageOp::from_words([w[0], w[1], w[2], w[3]])
        };
        // Every entry first, each as its single call would be checked, then against the
        // entries before it.
        for i in 0..count {
            let op = entry(i);
            self.check_page_op(id, &op).map_err(|e| (Shortage::Fail(e), i))?;
            for j in 0..i {
                let earlier = entry(j);
                if earlier.va == op.va {
                    return Err((SysError::InvalidArgument.into(), i));
                }
                if op.op == page_op::MAP && earlier.op == page_op::MAP && earlier.frame == op.frame
                {
                    return Err((SysError::InUse.into(), i));
                }
            }
        }
        // Page tables gone with a neighbouring stretch, as for `map`: counted once for the maps
        // under one 2 MiB table (an upper table shared by two such regions counts twice, so
        // the count is a bound), reserved and made before any page changes.
        let space = self.domains[id].space.as_ref().ok_or(whole(SysError::NotFound))?;
        let mut tables = 0;
        let mut first_short = count;
        for i in (0..count).filter(|&i| entry(i).op == page_op::MAP) {
            let va = entry(i).va;
            let region = |v: u64| v >> 21;
            if (0..i).any(|j| entry(j).op == page_op::MAP && region(entry(j).va) == region(va)) {
                continue;
            }
            let needed = space.tables_needed(va as usize);
            if needed > 0 {
                tables += needed;
                first_short = first_short.min(i);
            }
        }
        if tables > 0 {
            let d = &self.domains[id];
            if self.domains.guaranteed_used(id) + tables > d.guaranteed_frames {
                return Err((SysError::NoMemory.into(), first_short));
            }
            self.reserve_frames(id, tables).map_err(|e| (e, first_short))?;
        }
        let space = self.domains[id].space.as_mut().ok_or(whole(SysError::NotFound))?;
        space.begin_batch();
        for i in (0..count).filter(|&i| entry(i).op == page_op::MAP) {
            let va = entry(i).va as usize;
            if space.tables_needed(va) > 0 && space.populate(va, va + PAGE_SIZE).is_err() {
                space.end_batch();
                self.domains.publish_frames(id);
                return Err((SysError::NoMemory.into(), i));
            }
        }
        // Now nothing can fail: the entries were checked, touch distinct pages and frames, and
        // every table a map needs is there.
        for i in 0..count {
            let op = entry(i);
            let va = op.va as usize;
            let Ok(page) = self.managed_page(id, va) else { continue };
            let space = self.domains[id].space.as_mut();
            let (Some(space), Ok(s)) = (space, self.stretches.slot_mut(id, page.slot)) else {
                continue;
            };
            match op.op {
                page_op::MAP => {
                    let rights = page.rights_within(op.rights as usize).unwrap_or(Rights::NONE);
                    let pa = op.frame * PAGE_SIZE as u64;
                    if space.map_tracked(va, pa, rights).is_err() {
                        error!("map_batch: mapping {=usize:#x} failed after its checks", va);
                        continue;
                    }
                    let frame = Frame::containing(pa);
                    P::with_loose(|t| t.set_mapped(frame, true));
                    s.frames[page.index] = Some(frame);
                    s.page_rights[page.index] = rights;
                }
                page_op::UNMAP => {
                    let Some(frame) = s.frames[page.index].take() else { continue };
                    s.page_rights[page.index] = Rights::NONE;
                    space.unmap_keeping_tables(va);
                    P::with_loose(|t| t.set_mapped(frame, false));
                }
                _ => {
                    let rights = page.rights_within(op.rights as usize).unwrap_or(Rights::NONE);
                    if space.protect(va, rights).is_ok() {
                        s.page_rights[page.index] = rights;
                    }
                }
            }
        }
        if let Some(space) = self.domains[id].space.as_mut() {
            space.end_batch();
        }
        if tables > 0 {
            self.domains.publish_frames(id);
        }
        Ok(0)
    }

    // ANCHOR: may_write_now
    /// Can domain `id` write every byte of `[addr, addr + len)` now, without a fault: does it
    /// hold write access on each page, and is each page of a managed stretch there mapped
    /// writable?
    pub(crate) fn may_write_now(&self, id: DomainId, addr: usize, len: usize) -> bool {
        if !self.stretches.may_access(id, addr, len, Rights::WRITE) {
            return false;
        }
        let first = addr & !(PAGE_SIZE - 1);
        (first..addr + len).step_by(PAGE_SIZE).all(|p| match self.stretches.own_containing(id, p) {
            Some((_, s)) if s.kind == Kind::Managed => {
                let i = (p - s.base) / PAGE_SIZE;
                s.frames[i].is_some() && s.page_rights[i].contains(Rights::WRITE)
            }
            _ => true,
        })
    }
    // ANCHOR_END: may_write_now

    /// `page_state`: writes the state of the `count` pages from `va` (pages of stretches
    /// domain `id` manages, mapped or not) to its memory at `out`, one byte a page
    /// ([`page_state`] bits), then clears the bits `clear` in their entries with one TLB
    /// flush. Every argument is checked before anything changes: `count` and `clear`, then
    /// each page as `protect` checks its address, then `out`.
    pub(super) fn page_state(
        &mut self,
        id: DomainId,
        va: usize,
        count: usize,
        out: usize,
        clear: usize,
    ) -> Result<usize, SysError> {
        if count == 0 || count > MAP_BATCH_MAX || clear & !(page_state::CLEARABLE as usize) != 0 {
            return Err(SysError::InvalidArgument);
        }
        let clear = clear as u8;
        let mut mapped = [false; MAP_BATCH_MAX];
        for (i, m) in mapped.iter_mut().enumerate().take(count) {
            let page = i.checked_mul(PAGE_SIZE).and_then(|o| va.checked_add(o));
            *m = self.managed_page(id, page.ok_or(SysError::BadAddress)?)?.mapped;
        }
        if !self.may_write_now(id, out, count) {
            return Err(SysError::BadAddress);
        }
        let space = self.domains[id].space.as_mut().ok_or(SysError::NotFound)?;
        let mut states = [0u8; MAP_BATCH_MAX];
        for i in (0..count).filter(|&i| mapped[i]) {
            states[i] = space.page_state(va + i * PAGE_SIZE);
        }
        P::copy_to_user(&states[..count], out).map_err(|_| SysError::BadAddress)?;
        if clear != 0 {
            space.begin_batch();
            // Every mapped page, even one whose bits were clear when read: the copy to `out`
            // may have set them since.
            for i in (0..count).filter(|&i| mapped[i]) {
                space.clear_page_state(va + i * PAGE_SIZE, clear);
            }
            space.end_batch();
        }
        Ok(0)
    }

    /// `protect`: changes the rights of the mapped page `va` of a stretch domain `id` manages.
    pub(super) fn protect_page(
        &mut self,
        id: DomainId,
        va: usize,
        rights: usize,
    ) -> Result<usize, SysError> {
        let page = self.managed_page(id, va)?;
        let rights = page.rights_within(rights)?;
        if !page.mapped {
            return Err(SysError::NotMapped);
        }
        if self.is_lent(id, va) {
            return Err(SysError::InUse);
        }
        let s = self.stretches.slot_mut(id, page.slot)?;
        let space = self.domains[id].space.as_mut().ok_or(SysError::NotFound)?;
        space.protect(va, rights).map_err(|_| SysError::NotMapped)?;
        s.page_rights[page.index] = rights;
        Ok(0)
    }

    /// Delivers a page fault at `addr` to domain `id`'s activation handler (`frame` then enters
    /// the handler), or says why it cannot be delivered (the domain is then terminated).
    pub(super) fn deliver_fault(
        &mut self,
        id: DomainId,
        addr: usize,
        access: Access,
    ) -> Result<(), &'static str> {
        let s = self.stretches.own_containing(id, addr).filter(|(_, s)| s.kind == Kind::Managed);
        let Some((_, s)) = s else { return Err("not in a stretch the domain manages") };
        if !access.allowed_by(s.rights_of(id)) {
            return Err("the domain's rights on the stretch do not allow the access");
        }
        let stretch = s.base;
        let d = &mut self.domains[id];
        let (Some((entry, stack)), Some(dcb_frame)) = (d.handler, d.dcb) else {
            return Err("the domain has no activation handler to take the fault");
        };
        let dcb = P::dcb(dcb_frame);
        if dcb.activations.load(Ordering::Acquire) != 1 {
            return Err(
                "the fault came with activations off (inside the domain's own fault handling)",
            );
        }
        P::write_saved_context(dcb_frame, &d.ctx.saved());
        dcb.fault.addr.store(addr as u64, Ordering::Relaxed);
        dcb.fault.access.store(access as u64, Ordering::Relaxed);
        dcb.fault.stretch.store(stretch as u64, Ordering::Relaxed);
        dcb.fault.pc.store(d.ctx.pc() as u64, Ordering::Relaxed);
        dcb.fault.count.fetch_add(1, Ordering::Relaxed);
        dcb.frames.faults.fetch_add(1, Ordering::Relaxed);
        dcb.activations.store(0, Ordering::Release);
        dcb.upcalls.fetch_add(1, Ordering::Relaxed);
        d.faults += 1;
        if self.sched.tracing() {
            d.fault_open = Some((addr, access as u8, now_ns::<P>()));
        }
        let mut reason = abi::activation::FAULT;
        if d.revocation.is_some() {
            reason |= abi::activation::REVOKE;
        }
        d.ctx.enter_handler(entry, stack, [reason as usize, d.dcb_va]);
        Ok(())
    }
}
