//! Kernel memory made for domains: what each kernel object costs, and who pays.
//!
//! Every kernel object the kernel makes for a domain lives in that domain's kernel arena
//! ([`crate::arena`]), made of frames charged to it and counted against its guarantee with its
//! stretches, loose frames and page tables: the record of each stretch it owns (a header, a
//! word per page, for a managed stretch the rights of each page, its rights entries), its table
//! of stretches, and its event endpoints. Page tables are frames of its own already. The
//! record of a loose frame costs nothing at run time: it is a word of a table made at boot for
//! every frame of RAM ([`super::loose`]).
//!
//! A call that needs kernel memory runs its allocations under [`World::with_kmem`]: when the
//! arena has no room, the frames it asks for are checked against the domain's guarantee and
//! granted, and the allocations run again; when the guarantee cannot cover them the call fails
//! with `NoMemory`. No allocation on a system-call path touches the kernel heap, which keeps
//! only what is made at boot for the whole system (per domain: its arena's header, its context,
//! its entry in the tables of domains and stretches), so no domain can exhaust it, and none can
//! make the kernel panic by making objects. At a domain's death its objects go, and then its
//! arena's frames; the record of a channel stretch that a live peer still uses stays in the
//! dead owner's arena until the peer lets go.

use crate::domain::DomainId;
use core::mem::size_of;

use abi::{PAGE_SIZE, Rights, SysError};
use frame_allocator::Frame;

use super::World;
use super::stretch::{Kind, Refused, Stretch};
use crate::platform::{KernelArena as _, Platform};

/// Most times a call's allocations run before it fails: each run but the last grows the arena.
const MAX_TRIES: usize = 8;

/// Bytes of the record of a stretch of `pages` pages of `kind`: its header in its owner's
/// table, two rights entries, a word per page, and for a managed stretch the rights of each
/// page (allocations of the arena round these up, see `docs/memory.md`). The header is counted
/// with a one-word arena handle, as the kernel's are, whatever the platform's arena.
#[inline]
pub const fn stretch_record(pages: usize, kind: Kind) -> usize {
    let per_page = match kind {
        Kind::Managed => size_of::<Option<Frame>>() + size_of::<Rights>(),
        _ => size_of::<Option<Frame>>(),
    };
    size_of::<Stretch<&'static allocator_api2::alloc::Global>>()
        + 2 * size_of::<(u32, Rights)>()
        + pages * per_page
}

/// Whole frames `bytes` of kernel memory are counted as when a call checks its contract.
#[inline]
pub const fn frames_for(bytes: usize) -> u64 {
    bytes.div_ceil(PAGE_SIZE) as u64
}

impl<P: Platform> World<P> {
    /// Runs `make`, whose allocations come from domain `id`'s arena, until they find room:
    /// after each refusal, the frames the arena asked for are checked (with those granted
    /// before and not taken) against the domain's guarantee and granted, and `make` runs again (it must undo what a failed run did, or
    /// make each run repeat it harmlessly). `NoMemory` when the guarantee (or the free pool)
    /// cannot cover them.
    pub(super) fn with_kmem<R>(
        &mut self,
        id: DomainId,
        mut make: impl FnMut(&mut World<P>) -> Result<R, Refused>,
    ) -> Result<R, SysError> {
        let arena = self.domains[id].arena;
        let mut result = Err(SysError::NoMemory);
        for _ in 0..MAX_TRIES {
            if let Ok(r) = make(self) {
                result = Ok(r);
                break;
            }
            // What a run took and let go is back in the pool; the allowance left stands, and
            // the guarantee must cover it with what the arena asks for now.
            let Some(needed) = arena.take_refused().map(P::Arena::frames_needed) else { break };
            let granted = arena.allowance() + needed;
            let free = P::with_frames(|fa| fa.free_count());
            let d = &self.domains[id];
            if self.domains.guaranteed_used(id) + granted > d.guaranteed_frames || free < granted {
                break;
            }
            arena.allow(needed);
        }
        arena.end_allowance();
        result
    }

    /// Gives dead domain `id`'s arena back once nothing of it is left (its endpoints have
    /// gone; a channel stretch a live peer uses keeps its record, and so the arena, until the
    /// peer lets go): its frames return to the free pool.
    pub(super) fn release_arena(&mut self, id: DomainId) {
        let lingering = self.stretches.of(id).map_or(0, |t| t.len());
        let d = &mut self.domains[id];
        if d.ending.is_none() || d.job.is_some() || lingering > 0 || d.loans_out > 0 {
            return;
        }
        d.endpoints = super::ArenaVec::new_in(d.arena);
        d.loans = super::ArenaVec::new_in(d.arena);
        if let Err(bytes) = d.arena.release() {
            error!(
                "domain {=str}: {=usize} bytes of kernel objects left after death",
                d.name.as_str(),
                bytes
            );
        }
    }
}

// The costs `docs/memory.md` gives (its table of kernel objects).
const _: () = assert!(stretch_record(0, Kind::Dynamic) == 128);
const _: () = assert!(stretch_record(1, Kind::Dynamic) - stretch_record(0, Kind::Dynamic) == 16);
const _: () = assert!(stretch_record(1, Kind::Managed) - stretch_record(0, Kind::Managed) == 17);
