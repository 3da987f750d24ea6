//! System-call dispatch: decodes the call, validates every argument, and does the work.
//! The table of calls and their errors is in `docs/syscalls.md`; numbers and error codes are
//! in the `abi` crate.

use crate::domain::DomainId;
use abi::{Call, Rights, SysError};

mod domain_info;

use super::jobs::CHUNK_PAGES;
use super::paging::Shortage;
use super::stretch::Kind;
use super::{Filling, World, pages_for};
use crate::Platform;
use crate::contract::UserContextOps as _;
use crate::domain::Job;

/// Longest text one `console_write` takes.
pub const CONSOLE_MAX: usize = 1024;
/// Largest stretch one `stretch_create` makes.
pub const STRETCH_MAX: usize = 64 << 20;

/// What happens after a call.
pub enum Next {
    /// Return to the caller with this result.
    Return(Result<usize, SysError>),
    /// Return to the caller with this error and a value in the result register (the index of
    /// the refused entry of a batch).
    Refused(SysError, usize),
    /// Run another domain first (the caller sees `Ok(0)` when it resumes).
    Yield,
    /// Block the caller until an endpoint changes or the deadline (timer ticks) passes.
    Block(u64),
    /// Block the caller until a revocation frees memory, then run the call again.
    WaitForFrames,
    /// Continue in the context `resume` loaded into the caller's (no result registers are
    /// written).
    Resumed,
    /// The call goes on as a kernel job, in chunks on the caller's CPU time; the caller resumes
    /// with the job's result.
    Job(crate::domain::Job),
    /// The caller is gone.
    Exit(i32),
}

/// Runs call `number` for domain `id`.
#[inline(always)]
pub fn dispatch<P: Platform>(w: &mut World<P>, id: DomainId, number: usize, a: [usize; 6]) -> Next {
    let Some(call) = Call::from_number(number) else {
        return Next::Return(Err(SysError::NoSuchCall));
    };
    match call {
        Call::Null => Next::Return(Ok(0)),
        Call::Exit => Next::Exit(a[0] as i32),
        Call::Yield => Next::Yield,
        Call::Time => Next::Return(Ok(super::clock::now_ns::<P>() as usize)),
        Call::ConsoleWrite => Next::Return(console_write(w, id, a[0], a[1])),
        Call::StretchCreate => match stretch_create(w, id, a[0], a[1]) {
            Ok(Made::Now(base)) => Next::Return(Ok(base)),
            Ok(Made::Later(job)) => Next::Job(job),
            Err(e) => memory_call(Err(e)),
        },
        Call::StretchDestroy => match stretch_destroy(w, id, a[0]) {
            Ok(Some(job)) => Next::Job(job),
            Ok(None) => Next::Return(Ok(0)),
            Err(e) => Next::Return(Err(e)),
        },
        Call::StretchRights => Next::Return(stretch_rights(w, id, a[0], a[1], a[2])),
        Call::EventSend => {
            Next::Return(peer(w, a[0]).and_then(|to| w.send_event(id, to, a[1])).map(|()| 0))
        }
        Call::ActivationSet => Next::Return(activation_set(w, id, a[0], a[1])),
        Call::TimerAlloc => {
            Next::Return(w.alloc_endpoint(id, crate::domain::KERNEL).ok_or(SysError::NoMemory))
        }
        Call::TimerSet => {
            let deadline =
                (a[1] as u64 != u64::MAX).then(|| super::clock::ticks_from_ns::<P>(a[1] as u64));
            Next::Return(w.set_timer(id, a[0], deadline).map(|()| 0))
        }
        Call::Resume => match resume(w, id, a[0]) {
            Ok(()) => Next::Resumed,
            Err(e) => Next::Return(Err(e)),
        },
        Call::StretchCreateManaged => memory_call(w.create_managed_stretch(id, a[0], a[1])),
        Call::FrameAlloc => memory_call(w.frame_alloc(id, a[0])),
        Call::FrameFree => Next::Return(w.frame_free(id, a[0])),
        Call::Map => memory_call(w.map_page(id, a[0], a[1], a[2])),
        Call::Unmap => Next::Return(w.unmap_page(id, a[0])),
        Call::Protect => Next::Return(w.protect_page(id, a[0], a[1])),
        Call::DmaAlloc => memory_call(w.dma_alloc(id, a[0])),
        Call::DmaAddress => Next::Return(w.dma_address(id, a[0])),
        Call::IrqAck => Next::Return(w.irq_ack(id, a[0])),
        Call::Remap => memory_call(w.remap_page(id, a[0], a[1], a[2])),
        Call::MapBatch => match w.map_batch(id, a[0], a[1]) {
            Ok(v) => Next::Return(Ok(v)),
            Err((Shortage::Wait, _)) => Next::WaitForFrames,
            Err((Shortage::Fail(e), index)) => Next::Refused(e, index),
        },
        Call::PageState => Next::Return(w.page_state(id, a[0], a[1], a[2], a[3])),
        Call::FrameLend => Next::Return(w.frame_lend(id, a[0], a[1], a[2], a[3])),
        Call::LoanAddress => Next::Return(w.loan_address(id, a[0], a[1], a[2])),
        Call::FrameReturn => Next::Return(w.frame_return(id, a[0])),
        Call::DomainInfo => Next::Return(domain_info::domain_info(w, id, a[0], a[1])),
        Call::Block => {
            let d = &mut w.domains[id];
            if d.pending {
                d.pending = false;
                Next::Return(Ok(0))
            } else {
                Next::Block(super::clock::ticks_from_ns::<P>(a[0] as u64))
            }
        }
    }
}

/// The domain a call's argument `raw` names (`event_send`'s receiver, `stretch_rights`'
/// target): the one place a number from user space becomes a [`DomainId`]; `NotFound` if no
/// domain has it. Whether it is alive is the call's to check.
#[inline]
fn peer<P: Platform>(w: &World<P>, raw: usize) -> Result<DomainId, SysError> {
    let raw = u32::try_from(raw).map_err(|_| SysError::NotFound)?;
    w.domains.id(raw).ok_or(SysError::NotFound)
}

/// The outcome of a call that may have to wait for a revocation.
#[inline]
fn memory_call(result: Result<usize, Shortage>) -> Next {
    match result {
        Ok(v) => Next::Return(Ok(v)),
        Err(Shortage::Fail(e)) => Next::Return(Err(e)),
        Err(Shortage::Wait) => Next::WaitForFrames,
    }
}

// ANCHOR: console_write
fn console_write<P: Platform>(
    w: &World<P>,
    id: DomainId,
    ptr: usize,
    len: usize,
) -> Result<usize, SysError> {
    if len > CONSOLE_MAX {
        return Err(SysError::InvalidArgument);
    }
    if len == 0 {
        return Ok(0);
    }
    if !w.stretches.may_access(id, ptr, len, Rights::READ) {
        return Err(SysError::BadAddress);
    }
    let mut buf = [0u8; CONSOLE_MAX];
    P::copy_from_user(&mut buf[..len], ptr).map_err(|_| SysError::BadAddress)?;
    let text = core::str::from_utf8(&buf[..len]).map_err(|_| SysError::InvalidArgument)?;
    let name = w.domains[id].name.as_str();
    for line in text.split_terminator('\n') {
        info!("[{=str}] {=str}", name, line);
    }
    Ok(len)
}
// ANCHOR_END: console_write

fn activation_set<P: Platform>(
    w: &mut World<P>,
    id: DomainId,
    entry: usize,
    stack: usize,
) -> Result<usize, SysError> {
    if entry == 0 {
        w.domains[id].handler = None;
        return Ok(0);
    }
    if !entry.is_multiple_of(2) || !stack.is_multiple_of(16) {
        return Err(SysError::InvalidArgument);
    }
    let runnable = w.stretches.may_access(id, entry, 4, Rights::EXECUTE);
    let stack_ok = stack >= 256 && w.stretches.may_access(id, stack - 256, 256, Rights::WRITE);
    if !runnable || !stack_ok {
        return Err(SysError::BadAddress);
    }
    w.domains[id].handler = Some((entry, stack));
    Ok(0)
}

/// Loads the context at `ptr` (an `abi::SavedContext`) into domain `id`'s own and turns
/// activations on.
fn resume<P: Platform>(w: &mut World<P>, id: DomainId, ptr: usize) -> Result<(), SysError> {
    const WORDS: usize = abi::SavedContext::WORDS;
    if !ptr.is_multiple_of(8) {
        return Err(SysError::InvalidArgument);
    }
    if !w.stretches.may_access(id, ptr, WORDS * 8, Rights::READ) {
        return Err(SysError::BadAddress);
    }
    let mut words = [0u64; WORDS];
    P::copy_words_from_user(&mut words, ptr).map_err(|_| SysError::BadAddress)?;
    let d = &mut w.domains[id];
    d.ctx.load_words(&words);
    if let Some(frame) = d.dcb {
        P::dcb(frame).activations.store(1, core::sync::atomic::Ordering::Release);
    }
    if let Some((addr, access, start)) = d.fault_open.take() {
        info!(
            "fault served: domain={=usize} addr={=usize:#x} access={=u8} start={=u64} end={=u64}",
            id.index(),
            addr,
            access,
            start,
            super::clock::now_ns::<P>()
        );
    }
    Ok(())
}

/// A stretch made by `stretch_create`: at once (small), or by a kernel job.
enum Made {
    Now(usize),
    Later(Job),
}

fn stretch_create<P: Platform>(
    w: &mut World<P>,
    id: DomainId,
    bytes: usize,
    rights: usize,
) -> Result<Made, Shortage> {
    let rights = Rights::from_bits(rights).ok_or(SysError::InvalidArgument)?;
    if bytes == 0 || bytes > STRETCH_MAX {
        return Err(SysError::InvalidArgument.into());
    }
    let pages = pages_for(bytes);
    if !w.domains.within_contract(id, pages as u64) {
        return Err(SysError::NoMemory.into());
    }
    let base = w.domains[id].address.take(pages).ok_or(SysError::NoAddressSpace)?;
    // The owner always holds meta on what it creates.
    let rights = rights.union(Rights::META);
    let later = pages > CHUNK_PAGES;
    let filling = if later { Filling::Later } else { Filling::Now(&[]) };
    let made = w.create_stretch_or_wait(id, base, pages, rights, Kind::Dynamic, filling);
    if let Err(e) = made {
        w.domains[id].address.give_back(base, pages);
        return Err(e);
    }
    Ok(if later { Made::Later(Job::Fill { base, done: 0 }) } else { Made::Now(base) })
}

/// Destroys the stretch at `base` at once if it is small, or returns the job that will.
fn stretch_destroy<P: Platform>(
    w: &mut World<P>,
    id: DomainId,
    base: usize,
) -> Result<Option<Job>, SysError> {
    let s = w.stretches.get(&base).ok_or(SysError::NotFound)?;
    if !s.rights_of(id).contains(Rights::META) || s.owner != id || s.busy {
        return Err(SysError::PermissionDenied);
    }
    if s.kind == Kind::Managed && w.lent_within(id, s.base, s.end()) {
        // A frame of it is lent: it stays until the loan ends.
        return Err(SysError::InUse);
    }
    if !matches!(s.kind, Kind::Dynamic | Kind::Managed | Kind::Dma) {
        // Images and stacks live as long as their domain.
        return Err(SysError::PermissionDenied);
    }
    let pages = s.frames.len();
    if pages > CHUNK_PAGES {
        w.stretches.get_mut(&base).ok_or(SysError::NotFound)?.busy = true;
        return Ok(Some(Job::Empty { base, left: pages, result: Ok(0) }));
    }
    w.destroy_stretch(base);
    Ok(None)
}

fn stretch_rights<P: Platform>(
    w: &mut World<P>,
    id: DomainId,
    base: usize,
    target: usize,
    rights: usize,
) -> Result<usize, SysError> {
    let rights = Rights::from_bits(rights).ok_or(SysError::InvalidArgument)?;
    let target = peer(w, target)?;
    w.domain(target).ok_or(SysError::NotFound)?;
    let s = w.stretches.get(&base).ok_or(SysError::NotFound)?;
    if !s.rights_of(id).contains(Rights::META) || s.busy {
        return Err(SysError::PermissionDenied);
    }
    if matches!(s.kind, Kind::Managed | Kind::Device) {
        // Managed stretches are private to their owner, with the rights they were made with;
        // device registers are their driver domain's alone.
        return Err(SysError::PermissionDenied);
    }
    // Only the owner changes the owner's rights, and it always keeps meta.
    let rights = if target == s.owner {
        if id != s.owner {
            return Err(SysError::PermissionDenied);
        }
        rights.union(Rights::META)
    } else {
        rights
    };
    // Mapping may need page tables, charged to the target.
    if rights != Rights::NONE && !w.domains.within_contract(target, 0) {
        return Err(SysError::NoMemory);
    }
    w.set_stretch_rights(base, target, rights).map(|()| 0)
}
