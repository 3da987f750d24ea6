//! Kernel memory made for domains: what each kernel object costs, and who pays.
//!
//! Every kernel object the kernel makes for a domain (the record of a stretch it owns, with a
//! word per page; the record of a loose frame it took; an event endpoint) is charged to that
//! domain in bytes ([`super::Domain::kmem`]). The bytes count against its guaranteed frames,
//! rounded up to whole frames, with its stretches, loose frames and page tables (except the
//! record of an optimistic frame, which goes when the frame is revoked: it counts with the
//! optimistic frame); and all of them count against its share of the kernel heap ([`World::kmem_share`]: three quarters of the heap left free once
//! every domain is loaded, split evenly among the domains). A call that would exceed either
//! fails with `NoMemory`, and since the shares add up to less than the free heap, an allocation
//! within a share always finds room: no domain can exhaust the heap for the others, and no
//! allocation on a system-call path fails for lack of it. At a domain's death every byte comes
//! back.
//!
//! Not implemented yet: the objects live in the shared kernel heap, not in frames of the
//! domain's own (a per-domain arena); the accounting above gives the same guarantees without
//! moving them. Rights entries on a stretch (one per protection domain that holds rights) are
//! bounded by the number of domains and charged with the stretch (two included).

use core::mem::size_of;

use abi::{PAGE_SIZE, Rights, SysError};
use frame_allocator::Frame;

use super::World;
use super::stretch::{Kind, Stretch};

/// Bytes of one loose frame's record (a node's share of the ordered map included).
pub const LOOSE_RECORD: usize = 64;

/// Bytes of the record of a stretch of `pages` pages of `kind`: its header with two rights
/// entries, a word per page, and for a managed stretch the rights of each page.
pub const fn stretch_record(pages: usize, kind: Kind) -> usize {
    let per_page = match kind {
        Kind::Managed => size_of::<Option<Frame>>() + size_of::<Rights>(),
        _ => size_of::<Option<Frame>>(),
    };
    size_of::<Stretch>() + 2 * size_of::<(u32, Rights)>() + pages * per_page
}

/// Whole frames `bytes` of kernel memory are charged as.
pub const fn frames_for(bytes: usize) -> u64 {
    bytes.div_ceil(PAGE_SIZE) as u64
}

impl World {
    /// Charges `bytes` of kernel memory to domain `id`, which is about to take `also` more
    /// frames within its guarantee: `NoMemory` (and nothing charged) if its guarantee or its
    /// share of the heap cannot hold them.
    pub(super) fn charge_kmem(&mut self, id: u32, bytes: usize, also: u64) -> Result<(), SysError> {
        let d = &self.domains[id as usize];
        let after = d.kmem_guaranteed.checked_add(bytes).ok_or(SysError::NoMemory)?;
        let more = frames_for(after) - frames_for(d.kmem_guaranteed);
        if self.guaranteed_used(id) + more + also > d.guaranteed_frames {
            return Err(SysError::NoMemory);
        }
        self.charge_share(id, bytes)?;
        self.domains[id as usize].kmem_guaranteed = after;
        Ok(())
    }

    /// Charges `bytes` of kernel memory to domain `id`'s share of the heap only (the record of
    /// an optimistic frame): `NoMemory` if the share cannot hold them.
    pub(super) fn charge_share(&mut self, id: u32, bytes: usize) -> Result<(), SysError> {
        let share = self.kmem_share;
        let d = &mut self.domains[id as usize];
        let after = d.kmem.checked_add(bytes).filter(|&a| a <= share);
        d.kmem = after.ok_or(SysError::NoMemory)?;
        Ok(())
    }

    /// Gives back `bytes` of domain `id`'s kernel memory (`guaranteed`: charged with
    /// [`World::charge_kmem`], else with [`World::charge_share`]).
    pub(super) fn release_kmem(&mut self, id: u32, bytes: usize, guaranteed: bool) {
        let d = &mut self.domains[id as usize];
        d.kmem = d.kmem.saturating_sub(bytes);
        if guaranteed {
            d.kmem_guaranteed = d.kmem_guaranteed.saturating_sub(bytes);
        }
    }

    /// Splits three quarters of the heap now free among the `domains` domains (called once
    /// they are loaded).
    pub(super) fn set_kmem_share(&mut self) {
        let free = crate::heap::free();
        self.kmem_share = free / 4 * 3 / self.domains.len().max(1);
        defmt::info!(
            "kernel memory: {=usize} KiB of heap free, {=usize} KiB for each domain's kernel objects",
            free >> 10,
            self.kmem_share >> 10
        );
    }
}

// The costs `docs/memory.md` gives (its table of kernel objects).
const _: () = assert!(stretch_record(0, Kind::Dynamic) == 104);
const _: () = assert!(stretch_record(1, Kind::Dynamic) - stretch_record(0, Kind::Dynamic) == 16);
const _: () = assert!(stretch_record(1, Kind::Managed) - stretch_record(0, Kind::Managed) == 17);
