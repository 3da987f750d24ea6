//! Loans: a domain lends the frame behind one page of a stretch it manages to a driver domain
//! for one request (`frame_lend`), the driver learns the frame's device address for that
//! request (`loan_address`) and returns it at completion (`frame_return`). So a page goes to a
//! disk or a network device straight from (or into) its frame, with no copy through a data
//! area.
//!
//! - *Whom to*: the borrower is named by the lender as `event_send` names a receiver, by a
//!   domain and an endpoint of its that the lender may signal (a channel's `peer_event`); it
//!   must be a driver domain. So a domain lends only to a driver it has a channel to.
//! - *Never writable by both*: a frame lent for the device to read stays mapped read-only at
//!   the lender's page; one lent for the device to write leaves the lender's view (its entry
//!   goes; the page's record keeps the frame, so a touch faults to the lender's handler as an
//!   unmapped page would). While lent, the page cannot be unmapped, remapped, protected or lent
//!   again, nor its stretch destroyed (`InUse`).
//! - *For one request*: `loan_address` checks the caller is the borrower and the request's
//!   lender the loan's, and the length within the page; from then on only the borrower may
//!   end the loan (the lender may take back a loan its borrower has not used, e.g. when the
//!   driver refused the request). Ending it restores the lender's entry with the rights it had
//!   (if a page table the entry needs went with a neighbouring stretch, the frame is left
//!   among the lender's loose frames, unmapped, as after `unmap`). A handle is the lender's
//!   identifier, a serial number and a slot: once ended it names nothing (`NotFound`).
//! - *Deaths*: when the borrower dies (its devices stopped first), every loan it holds ends as
//!   if returned. When the lender dies, each of its loans is detached from its stretch and its
//!   loose frames, so that its teardown does not free the frame under the device; the frame
//!   stays charged to it and is freed when the loan ends, and the dead lender's arena (which
//!   holds the records) goes only after its last loan.
//! - *Bounded and charged*: a domain has at most [`MAX_LOANS`] loans out; their records live
//!   in its kernel arena, charged to its guarantee ([`crate::kmem`]). A call's work is bounded
//!   by that number (a borrower's death by the domains times it).
//!
//! With no IOMMU the borrower is trusted (as every driver domain is): the kernel gives its
//! device the address, and nothing stops the device from going beyond it.

use crate::domain::DomainId;

use abi::{MAX_LOANS, PAGE_SIZE, Rights, SysError, loan_access};

use super::World;
use super::stretch::Kind;
use crate::contract::AddressSpaceOps as _;
use crate::{Platform, frames};

pub use crate::domain::Loan;

/// Bytes of one loan's record, in its lender's arena (see `docs/memory.md`).
pub const LOAN_RECORD: usize = core::mem::size_of::<Option<Loan>>();

/// The handle of the loan in `slot` of `lender`'s table with `serial`.
#[inline]
fn handle(lender: DomainId, serial: u32, slot: usize) -> usize {
    (u64::from(lender.raw()) << 32 | u64::from(serial & 0xff_ffff) << 8 | slot as u64) as usize
}

impl<P: Platform> World<P> {
    /// Whether page `va` of domain `id` is lent now (its page cannot change).
    #[inline]
    pub(super) fn is_lent(&self, id: DomainId, va: usize) -> bool {
        let d = &self.domains[id];
        d.loans_out > 0 && d.loans.iter().flatten().any(|l| l.va == va && !l.orphaned)
    }

    /// Whether a page of `[base, end)` of domain `id` is lent now.
    pub(super) fn lent_within(&self, id: DomainId, base: usize, end: usize) -> bool {
        let d = &self.domains[id];
        d.loans_out > 0 && d.loans.iter().flatten().any(|l| (base..end).contains(&l.va))
    }

    /// The loan `raw` names, if it is out: its lender and slot.
    fn find_loan(&self, raw: usize) -> Result<(DomainId, usize), SysError> {
        let raw = raw as u64;
        let lender = self.domains.id(abi::loan_lender(raw)).ok_or(SysError::NotFound)?;
        let slot = (raw & 0xff) as usize;
        let serial = ((raw >> 8) & 0xff_ffff) as u32;
        match self.domains[lender].loans.get(slot) {
            Some(Some(l)) if l.serial & 0xff_ffff == serial => Ok((lender, slot)),
            _ => Err(SysError::NotFound),
        }
    }

    /// `frame_lend`: domain `id` lends the frame at its managed page `va` to driver domain
    /// `to` (named with its endpoint `ep`, which `id` must be allowed to signal) for the
    /// borrower's device to read or write (`access`, [`loan_access`]); the loan's handle.
    pub(super) fn frame_lend(
        &mut self,
        id: DomainId,
        va: usize,
        to: usize,
        ep: usize,
        access: usize,
    ) -> Result<usize, SysError> {
        let device_writes = match access {
            loan_access::DEVICE_READS => false,
            loan_access::DEVICE_WRITES => true,
            _ => return Err(SysError::InvalidArgument),
        };
        let to = u32::try_from(to).ok().and_then(|raw| self.domains.id(raw));
        let borrower = to.ok_or(SysError::NotFound)?;
        let b = self.domain(borrower).ok_or(SysError::NotFound)?;
        let endpoint = b.endpoints.get(ep).ok_or(SysError::InvalidArgument)?;
        if endpoint.sender != id.raw() || !b.driver || borrower == id {
            return Err(SysError::PermissionDenied);
        }
        let page = self.managed_page(id, va)?;
        if !page.mapped {
            return Err(SysError::NotMapped);
        }
        if self.is_lent(id, va) {
            return Err(SysError::InUse);
        }
        let s = self.stretches.slot_mut(id, page.slot)?;
        let (frame, rights) =
            (s.frames[page.index].ok_or(SysError::NotMapped)?, s.page_rights[page.index]);
        if device_writes && !rights.contains(Rights::WRITE) {
            // The device would write a page its owner may only read.
            return Err(SysError::PermissionDenied);
        }
        // A slot in the lender's table, made (and charged) if none is free.
        let d = &self.domains[id];
        let slot = match d.loans.iter().position(Option::is_none) {
            Some(slot) => slot,
            None if d.loans.len() >= MAX_LOANS => return Err(SysError::NoMemory),
            None => {
                self.with_kmem(id, |w| Ok(w.domains[id].loans.try_reserve(1)?))?;
                let d = &mut self.domains[id];
                d.loans.push(None);
                d.loans.len() - 1
            }
        };
        let d = &mut self.domains[id];
        let space = d.space.as_mut().ok_or(SysError::NotFound)?;
        if device_writes {
            space.unmap_keeping_tables(va);
        } else {
            let read = Rights(rights.0 & !Rights::WRITE.0).union(Rights::READ);
            space.protect(va, read).map_err(|_| SysError::NotMapped)?;
        }
        d.loan_serial = d.loan_serial.wrapping_add(1) & 0xff_ffff;
        if d.loan_serial == 0 {
            d.loan_serial = 1;
        }
        let serial = d.loan_serial;
        d.loans[slot] = Some(Loan {
            serial,
            borrower,
            frame,
            va,
            rights,
            device_writes,
            taken: false,
            orphaned: false,
        });
        d.loans_out += 1;
        self.domains[borrower].borrowed += 1;
        Ok(handle(id, serial, slot))
    }

    /// `loan_address`: for driver domain `id`, the device address of the first `len` bytes of
    /// the frame lent as `loan` by domain `lender`.
    pub(super) fn loan_address(
        &mut self,
        id: DomainId,
        loan: usize,
        lender: usize,
        len: usize,
    ) -> Result<usize, SysError> {
        let (from, slot) = self.find_loan(loan)?;
        let Some(l) = self.domains[from].loans[slot].as_mut() else {
            return Err(SysError::NotFound);
        };
        if l.borrower != id {
            return Err(SysError::NotFound);
        }
        if lender != from.raw() as usize {
            return Err(SysError::PermissionDenied);
        }
        if len == 0 || len > PAGE_SIZE {
            return Err(SysError::InvalidArgument);
        }
        l.taken = true;
        Ok(l.frame.addr() as usize)
    }

    /// `frame_return`: domain `id` ends `loan`, as its borrower or (while unused) its lender.
    pub(super) fn frame_return(&mut self, id: DomainId, loan: usize) -> Result<usize, SysError> {
        let (lender, slot) = self.find_loan(loan)?;
        let Some(l) = self.domains[lender].loans[slot] else { return Err(SysError::NotFound) };
        if id == lender && id != l.borrower {
            if l.taken {
                return Err(SysError::InUse);
            }
        } else if id != l.borrower {
            return Err(SysError::NotFound);
        }
        self.end_loan(lender, slot);
        Ok(0)
    }

    /// Ends the loan in `slot` of `lender`'s table: the lender's page gets its frame back as it
    /// was, or (the lender dead) the frame is freed.
    fn end_loan(&mut self, lender: DomainId, slot: usize) {
        let Some(l) = self.domains[lender].loans.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.domains[lender].loans_out -= 1;
        let b = &mut self.domains[l.borrower];
        b.borrowed = b.borrowed.saturating_sub(1);
        if l.orphaned {
            if let Err(e) = frames::free::<P>(l.frame, lender.owner()) {
                error!("a lent frame {=u64:#x} could not be freed: {}", l.frame.addr(), e);
            }
            self.release_arena(lender);
            return;
        }
        let d = &mut self.domains[lender];
        let Some(space) = d.space.as_mut() else { return };
        let restored = if l.device_writes {
            space.map_tracked(l.va, l.frame.addr(), l.rights).is_ok()
        } else {
            space.protect(l.va, l.rights).is_ok()
        };
        if !restored {
            // The page table the entry needs went with a neighbouring stretch: the frame stays
            // the lender's, unmapped, as after `unmap`.
            if let Some((slot, s)) = self.stretches.own_containing(lender, l.va)
                && s.kind == Kind::Managed
            {
                let index = (l.va - s.base) / PAGE_SIZE;
                let _ = self.stretches.set_page(lender, slot, index, None, Rights::NONE);
            }
            P::with_loose(|t| t.set_mapped(l.frame, false));
        }
    }

    /// Lender `id` is dying: its loans are detached from its page and loose frames, so that
    /// its teardown leaves their frames alone; each is freed when its loan ends.
    pub(super) fn orphan_loans(&mut self, id: DomainId) {
        if self.domains[id].loans_out == 0 {
            return;
        }
        for slot in 0..self.domains[id].loans.len() {
            let Some(l) = self.domains[id].loans[slot].as_mut() else { continue };
            if l.orphaned {
                continue;
            }
            l.orphaned = true;
            let (va, frame) = (l.va, l.frame);
            if let Some((at, s)) = self.stretches.own_containing(id, va)
                && s.kind == Kind::Managed
            {
                let index = (va - s.base) / PAGE_SIZE;
                let _ = self.stretches.set_page(id, at, index, None, Rights::NONE);
            }
            if let Some(space) = self.domains[id].space.as_mut() {
                space.unmap_keeping_tables(va);
            }
            if P::with_loose(|t| t.remove(frame)).is_some() {
                let d = &mut self.domains[id];
                d.loose_held -= 1;
            }
        }
    }

    /// Borrower `id` is dying (its devices stopped): every loan it holds ends as if returned.
    pub(super) fn revoke_borrowed(&mut self, id: DomainId) {
        if self.domains[id].borrowed == 0 {
            return;
        }
        let mut ended = 0;
        for lender in 0..self.domains.len() {
            let lender = DomainId::from_index(lender);
            if self.domains[lender].loans_out == 0 {
                continue;
            }
            for slot in 0..self.domains[lender].loans.len() {
                if self.domains[lender].loans[slot].is_some_and(|l| l.borrower == id) {
                    self.end_loan(lender, slot);
                    ended += 1;
                }
            }
            if self.domains[id].borrowed == 0 {
                break;
            }
        }
        info!(
            "domain {=str}: {=u64} lent frame(s) back to their lenders",
            self.domains[id].name.as_str(),
            ended as u64
        );
    }

    /// Frames of dead domain `id` its loans still hold.
    pub(super) fn frames_on_loan(&self, id: DomainId) -> u64 {
        self.domains[id].loans_out
    }
}
// The cost `docs/memory.md` gives (its table of kernel objects).
const _: () = assert!(LOAN_RECORD == 32);
