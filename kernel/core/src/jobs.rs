//! Long kernel work in bounded chunks, on the CPU time of the domain that caused it.
//!
//! Filling a large nailed stretch (`stretch_create`), emptying one (`stretch_destroy`) and
//! taking a dead domain apart cost time in proportion to their pages. None of them runs in one
//! piece: the work becomes the domain's [`Job`], and the scheduler loop ([`super::sched`]) runs
//! it in chunks of at most [`CHUNK_PAGES`] pages whenever it dispatches that domain, stopping at
//! the first chunk boundary after the dispatch's end (or the next timed event). The scheduler
//! charges the time to the domain as if it ran in user mode, so the work comes out of its own
//! slice (or slack time, with `extra`), and a dead domain's out of what is left of its contract;
//! every other contract is kept. While a domain has a job it does not run in user mode: the
//! system call that made the job returns when the job is done.
//!
//! Bound: one chunk is 32 pages of work: zeroing and mapping a frame, or unmapping and freeing
//! one, costs about 1 to 2 µs of virtual time, so a chunk stays under about 50 µs and no kernel
//! work keeps the CPU from a domain that is due for longer than that (plus the trap and switch
//! paths). Work that stays small (a stretch of at most [`CHUNK_PAGES`] pages) is done at once.
//!
//! Invariants: a stretch being filled or emptied is `busy` (no rights change, no second destroy,
//! no access checks pass on it); a dead domain keeps its scheduler client until its teardown is
//! done, and its revocation notice, if any, stays outstanding until then, so that no second
//! notice goes out while its frames are on their way back.

use crate::domain::{DomainId, Job};
use abi::{PAGE_SIZE, Rights, SysError};

use super::stretch::Kind;
use super::{Ending, World};
use crate::contract::{AddressSpaceOps as _, UserContextOps as _};
use crate::platform::KernelArena as _;
use crate::{Platform, frames};

/// Pages of work in one chunk.
pub const CHUNK_PAGES: usize = 32;

/// Words of the table of loose frames one chunk of a teardown looks at (a few instructions a
/// word: well within the time of freeing [`CHUNK_PAGES`] frames).
const LOOSE_SCAN: usize = 2048;

/// What a chunk of work found.
enum Step {
    /// More to do.
    More,
    /// The job is done; the call (if any) returns this.
    Done(Result<usize, SysError>),
}

impl<P: Platform> World<P> {
    /// Runs domain `id`'s job in chunks until it is done or the timer reaches `stop` (ticks).
    /// Returns whether it is done.
    pub(super) fn run_job(&mut self, id: DomainId, stop: u64) -> bool {
        loop {
            let Some(job) = self.domains[id].job else { return true };
            let step = match job {
                Job::Fill { base, done } => self.fill_chunk(id, base, done),
                Job::Empty { base, left, result } => match self.empty_chunk(base, left) {
                    None => Step::Done(result),
                    Some(left) => {
                        self.domains[id].job = Some(Job::Empty { base, left, result });
                        Step::More
                    }
                },
                Job::Teardown { emptying, loose_from } => {
                    self.teardown_chunk(id, emptying, loose_from)
                }
            };
            if let Step::Done(result) = step {
                self.domains[id].job = None;
                match job {
                    Job::Teardown { .. } => self.buried(id),
                    _ => {
                        let ctx = &mut self.domains[id].ctx;
                        match result {
                            Ok(v) => ctx.set_result(0, v),
                            Err(e) => ctx.set_result(e as usize, 0),
                        }
                        self.domains.publish_frames(id);
                    }
                }
                return true;
            }
            if P::now_ticks() >= stop {
                return false;
            }
        }
    }

    /// Gives the next [`CHUNK_PAGES`] pages of the stretch at `base` (owned by `id`) their zeroed
    /// frames and maps them for the owner.
    fn fill_chunk(&mut self, id: DomainId, base: usize, done: usize) -> Step {
        let Some(pages) = self.stretches.get(&base).map(|s| s.frames.len()) else {
            return Step::Done(Err(SysError::NotFound));
        };
        let rights = self.stretches[&base].rights_of(id);
        let end = (done + CHUNK_PAGES).min(pages);
        for i in done..end {
            let va = base + i * PAGE_SIZE;
            let mapped = frames::alloc_zeroed::<P>(id.owner()).ok().and_then(|f| {
                let space = self.domains[id].space.as_mut()?;
                match space.map(va, f.addr(), rights) {
                    Ok(()) => Some(f),
                    Err(_) => {
                        let _ = frames::free::<P>(f, id.owner());
                        None
                    }
                }
            });
            let Some(frame) = mapped else {
                // Memory ran out under the call (the check at its start counted what was free
                // then): undo what was done, in chunks too.
                self.domains[id].job =
                    Some(Job::Empty { base, left: i, result: Err(SysError::NoMemory) });
                return Step::More;
            };
            if let Some(s) = self.stretches.get_mut(&base) {
                s.frames[i] = Some(frame);
            }
        }
        if end == pages {
            if let Some(s) = self.stretches.get_mut(&base) {
                s.busy = false;
            }
            return Step::Done(Ok(base));
        }
        self.domains[id].job = Some(Job::Fill { base, done: end });
        Step::More
    }

    /// Unmaps (from every protection domain) and frees the pages of the stretch at `base` below
    /// page `left`, at most [`CHUNK_PAGES`] of them; once none is left, the stretch goes (with the
    /// page records and tables of a managed stretch, and its range back to its owner's address
    /// space). Returns the pages still left, or `None` when the stretch is gone.
    pub(super) fn empty_chunk(&mut self, base: usize, left: usize) -> Option<usize> {
        let s = self.stretches.get_mut(&base)?;
        s.busy = true;
        let keep = left.min(s.frames.len()).saturating_sub(CHUNK_PAGES);
        for i in (keep..left.min(s.frames.len())).rev() {
            let Some(frame) = s.frames[i].take() else { continue };
            let va = s.base + i * PAGE_SIZE;
            for &(holder, _) in &s.rights {
                if let Some(space) = self.domains[holder].space.as_mut() {
                    space.unmap(va);
                }
            }
            if s.kind == Kind::Managed {
                // A loose frame of the owner: it stays the owner's, unmapped.
                P::with_loose(|t| t.set_mapped(frame, false));
            } else if s.kind == Kind::Device {
                // The device's registers, not RAM.
            } else if let Err(e) = frames::free::<P>(frame, s.owner.owner()) {
                error!("stretch {=u64:#x}: freeing a frame failed: {}", base as u64, e);
            }
        }
        if keep > 0 {
            return Some(keep);
        }
        let s = self.stretches.remove(&base)?;
        if s.kind == Kind::Managed {
            self.release_managed_pages(&s);
        }
        self.domains[s.owner].address.give_back(s.base, s.frames.len());
        let owner = s.owner;
        drop(s);
        // The last channel stretch of an owner that died before its peer held its arena.
        self.release_arena(owner);
        None
    }

    /// One chunk of taking dead domain `id` apart: its rights on others' stretches, then the
    /// stretches it owns (those a live peer still uses stay until the peer is done), then its
    /// loose frames.
    fn teardown_chunk(
        &mut self,
        id: DomainId,
        emptying: Option<(usize, usize)>,
        loose_from: usize,
    ) -> Step {
        if let Some((base, left)) = emptying {
            let left = self.empty_chunk(base, left);
            self.domains[id].job =
                Some(Job::Teardown { emptying: left.map(|left| (base, left)), loose_from });
            return Step::More;
        }
        // Its rights first (only the entries: its protection domain goes whole at the end) on
        // every stretch that outlives it: others' and its channels a live peer still uses. An
        // orphaned channel stretch, whose owner died before, goes once nobody holds rights on it.
        let held = self
            .stretches
            .values()
            .filter(|s| s.rights_of(id) != Rights::NONE && !(s.owner == id && doomed(s, id)))
            .map(|s| s.base)
            .take(CHUNK_PAGES)
            .collect::<heapless::Vec<usize, CHUNK_PAGES>>();
        if !held.is_empty() {
            for base in held {
                let Some(s) = self.stretches.get_mut(&base) else { continue };
                let _ = s.set_rights(id, Rights::NONE);
                let (unused, owner) = (s.rights.is_empty(), s.owner);
                if unused && self.domain(owner).is_none() {
                    let pages = self.stretches[&base].frames.len();
                    self.domains[id].job =
                        Some(Job::Teardown { emptying: Some((base, pages)), loose_from });
                    return Step::More;
                }
            }
            return Step::More;
        }
        // Then the stretches it owns, but channels and data areas a live peer still uses.
        let doomed = self
            .stretches
            .of(id)
            .and_then(|t| t.iter().find(|s| doomed(s, id)))
            .map(|s| (s.base, s.frames.len()));
        if let Some(emptying) = doomed {
            self.domains[id].job = Some(Job::Teardown { emptying: Some(emptying), loose_from });
            return Step::More;
        }
        // Then its loose frames, found by a scan of the table in steps (none if it holds none).
        if self.domains[id].loose_held > 0 {
            let (batch, next) =
                P::with_loose(|t| t.owned_by::<CHUNK_PAGES>(id.raw(), loose_from, LOOSE_SCAN));
            for frame in batch {
                P::with_loose(|t| t.remove(frame));
                self.domains[id].loose_held -= 1;
                if let Err(e) = frames::free::<P>(frame, id.owner()) {
                    error!("freeing loose frame {=u64:#x} failed: {}", frame.addr(), e);
                }
            }
            let d = &mut self.domains[id];
            match next {
                Some(loose_from) if d.loose_held > 0 => {
                    d.job = Some(Job::Teardown { emptying: None, loose_from });
                    return Step::More;
                }
                _ if d.loose_held > 0 => {
                    error!(
                        "domain {=str}: {=u64} loose frames not found in the table",
                        d.name.as_str(),
                        d.loose_held
                    );
                }
                _ => {}
            }
        }
        Step::Done(Ok(0))
    }

    /// Ends domain `id`: from now on it never runs in user mode again; its endpoints' peers
    /// learn of it, and its teardown is its job, run in chunks on what is left of its contract
    /// (see the module documentation).
    pub(super) fn begin_death(&mut self, id: DomainId, ending: Ending) {
        if self.sched.tracing() {
            self.log_events_received(id);
        }
        self.close_endpoints_signalled_by(id);
        let stopped = self.devices.release_of::<P>(id);
        if stopped > 0 {
            info!(
                "domain {=str}: {=usize} device(s) stopped",
                self.domains[id].name.as_str(),
                stopped
            );
        }
        // Its devices are stopped: what was lent to it goes back; what it lent stays lent,
        // out of its teardown's reach.
        self.revoke_borrowed(id);
        self.orphan_loans(id);
        let now = self.sched.now_ns::<P>();
        let d = &mut self.domains[id];
        d.ending = Some(ending);
        d.dcb = None;
        d.waiting_for_frames = false;
        d.pending = false;
        // A stretch it was filling or emptying is taken apart with the rest.
        if let Some(Job::Fill { base, .. } | Job::Empty { base, .. }) = d.job
            && let Some(s) = self.stretches.get_mut(&base)
        {
            s.busy = false;
        }
        let d = &mut self.domains[id];
        d.job = Some(Job::Teardown { emptying: None, loose_from: 0 });
        // Its optimistic frames are all on their way back: no notice can ask for them.
        d.optimistic_held = 0;
        if d.blocked.take().is_some() {
            self.sched.policy.wake(id.index(), now);
        }
        let d = &self.domains[id];
        match ending {
            Ending::Exited(code) => {
                info!("domain {=str} exited with status {=i32}", d.name.as_str(), code)
            }
            Ending::Terminated(why) => {
                error!("domain {=str} terminated: {=str}", d.name.as_str(), why.name())
            }
        }
    }

    /// Dead domain `id` is taken apart: its page tables go, it leaves the scheduler, and
    /// domains waiting for memory try again.
    fn buried(&mut self, id: DomainId) {
        self.sched.policy.remove(id.index(), super::clock::now_ns::<P>());
        self.sched.set_instant(id, None);
        let d = &mut self.domains[id];
        if let Some(space) = d.space.take() {
            space.destroy();
        }
        self.release_arena(id);
        // What may stay: the frames of channel stretches a live peer still uses, and the arena
        // that holds their records.
        let lingering: u64 = self
            .stretches
            .of(id)
            .map_or(0, |t| t.iter().map(|s| s.frames.iter().flatten().count() as u64).sum())
            + self.frames_on_loan(id);
        let d = &mut self.domains[id];
        let held = P::with_frames(|fa| fa.owned_by(id.owner()));
        let left = held.saturating_sub(lingering + d.arena.frames());
        if left != 0 {
            error!("domain {=str}: {=u64} frames still charged after death", d.name.as_str(), left);
        }
        d.revocation = None;
        self.wake_frame_waiters();
    }

    /// Ends domain `id` and takes it apart at once (at boot, and in kernel tests).
    pub(super) fn kill(&mut self, id: DomainId, ending: Ending) {
        self.begin_death(id, ending);
        while !self.run_job(id, 0) {}
    }
}

/// Does stretch `s`, owned by dead domain `id`, go with it? All but a channel or a shared DMA
/// stretch that a peer still uses (that one goes when the last holder dies).
fn doomed<A: allocator_api2::alloc::Allocator>(s: &super::Stretch<A>, id: DomainId) -> bool {
    // A channel, or DMA memory a driver shared (a client's data area), stays while a live peer
    // holds rights on it: the peer learns of the death from its endpoints, not by a fault.
    !matches!(s.kind, Kind::Channel | Kind::Dma) || s.rights.iter().all(|(d, _)| *d == id)
}
