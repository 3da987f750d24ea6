//! [`SysKernel`]: the kernel's memory calls as a [`MemoryKernel`], for the stretch drivers of
//! this domain. This is the runtime's system-call layer for paging: each method is one system
//! call (`read`, `write` and `with_page` are plain copies in the domain), and the kernel's
//! [`SysError`]s become the interface's [`MemError`]s, those the kernel folds into
//! `InvalidArgument` named precisely here. It owns nothing: drivers get one for each call.

use core::sync::atomic::Ordering;

use abi::{MAP_BATCH_MAX, PAGE_SIZE, PageOp, Rights, SysError, frame_kind, page_op, page_state};
use stretch_driver::{Frame, FrameKind, MemError, MemoryKernel};

use crate::syscall;

/// The kernel's memory calls, for the stretch drivers of this domain.
pub struct SysKernel;

/// The error a memory call's [`SysError`] stands for.
fn mem_error(e: SysError) -> MemError {
    match e {
        SysError::NoMemory => MemError::NoFrames,
        SysError::BadAddress => MemError::NotOwned,
        SysError::NotManaged => MemError::NotManaged,
        SysError::AlreadyMapped => MemError::AlreadyMapped,
        SysError::NotMapped => MemError::NotMapped,
        SysError::PermissionDenied => MemError::Denied,
        SysError::NotFound => MemError::BadFrame,
        SysError::InUse => MemError::FrameInUse,
        _ => MemError::BadRights,
    }
}

/// Checks what the kernel would refuse with `InvalidArgument`, to name it precisely.
fn check_page(va: usize, rights: Option<Rights>) -> Result<(), MemError> {
    if !va.is_multiple_of(PAGE_SIZE) {
        return Err(MemError::BadAddress);
    }
    let page = Rights::READ.union(Rights::WRITE).union(Rights::EXECUTE);
    match rights {
        Some(r) if r == Rights::NONE || !page.contains(r) => Err(MemError::BadRights),
        _ => Ok(()),
    }
}

impl MemoryKernel for SysKernel {
    fn frame_alloc(&mut self, kind: FrameKind) -> Result<Frame, MemError> {
        let kind = match kind {
            FrameKind::Guaranteed => frame_kind::GUARANTEED,
            FrameKind::Optimistic => frame_kind::OPTIMISTIC,
        };
        syscall::frame_alloc(kind).map(|n| Frame(n as u64)).map_err(mem_error)
    }

    fn frame_free(&mut self, frame: Frame) -> Result<(), MemError> {
        syscall::frame_free(frame.0 as usize).map_err(mem_error)
    }

    fn map(&mut self, va: usize, frame: Frame, rights: Rights) -> Result<(), MemError> {
        check_page(va, Some(rights))?;
        syscall::map(va, frame.0 as usize, rights).map_err(mem_error)
    }

    fn unmap(&mut self, va: usize) -> Result<Frame, MemError> {
        check_page(va, None)?;
        syscall::unmap(va).map(|n| Frame(n as u64)).map_err(mem_error)
    }

    fn protect(&mut self, va: usize, rights: Rights) -> Result<(), MemError> {
        check_page(va, Some(rights))?;
        syscall::protect(va, rights).map_err(mem_error)
    }

    fn remap(&mut self, from: usize, to: usize, rights: Rights) -> Result<u8, MemError> {
        check_page(from, None)?;
        check_page(to, Some(rights))?;
        if from == to {
            return Err(MemError::BadAddress);
        }
        syscall::remap(from, to, rights).map_err(mem_error)
    }

    /// One `map_batch` call; the kernel's `InvalidArgument` is named from the refused entry
    /// (a misaligned page, an unknown operation, rights that are not page rights, or else a
    /// page an earlier entry touches).
    fn map_batch(&mut self, ops: &[PageOp]) -> Result<(), (usize, MemError)> {
        if ops.is_empty() {
            return Ok(());
        }
        syscall::map_batch(ops).map_err(|(i, e)| {
            let Some(op) = ops.get(i).filter(|_| e == SysError::InvalidArgument) else {
                let batch = i >= ops.len() && e == SysError::InvalidArgument;
                return (i, if batch { MemError::BadBatch } else { mem_error(e) });
            };
            let rights = u8::try_from(op.rights).map(Rights).unwrap_or(Rights(u8::MAX));
            let named = if !(op.va as usize).is_multiple_of(PAGE_SIZE) {
                MemError::BadAddress
            } else if !matches!(op.op, page_op::MAP | page_op::UNMAP | page_op::PROTECT) {
                MemError::BadBatch
            } else if op.op != page_op::UNMAP && check_page(0, Some(rights)).is_err() {
                MemError::BadRights
            } else {
                MemError::BadBatch
            };
            (i, named)
        })
    }

    /// One `page_state` call. What the kernel refuses with `InvalidArgument` is named here
    /// first (the count, the bits, an unaligned `va`); its `BadAddress` is then a page the
    /// domain does not own, `states` being the driver's own writable memory (its first and
    /// last byte are touched first, so a page of a managed stretch there is mapped).
    fn page_state(&mut self, va: usize, states: &mut [u8], clear: u8) -> Result<(), MemError> {
        if states.is_empty() || states.len() > MAP_BATCH_MAX {
            return Err(MemError::BadBatch);
        }
        if clear & !page_state::CLEARABLE != 0 {
            return Err(MemError::BadBits);
        }
        check_page(va, None)?;
        let last = states.len() - 1;
        for i in [0, last] {
            let byte = &raw mut states[i];
            // SAFETY: `byte` points into `states`, which this call borrows mutably; the byte
            // is written back unchanged, a write the compiler may not drop, so that a fault on
            // it reaches the driver here rather than inside the kernel's copy.
            unsafe { byte.write_volatile(byte.read_volatile()) };
        }
        syscall::page_state(va, states, clear).map_err(|e| match e {
            SysError::BadAddress if va.checked_add(last * PAGE_SIZE).is_none() => {
                MemError::BadAddress
            }
            e => mem_error(e),
        })
    }

    /// A plain copy: the driver must have mapped every page it writes with write access (a
    /// page it has not faults, and the fault fails as a fault inside the driver).
    fn write(&mut self, va: usize, data: &[u8]) -> Result<(), MemError> {
        va.checked_add(data.len()).ok_or(MemError::BadAddress)?;
        // SAFETY: the stretch driver calling this has mapped `[va, va + len)` writable (its
        // contract; a page it has not faults to the fault path instead of corrupting memory),
        // and no Rust reference covers a page of a managed stretch while its driver writes it.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), va as *mut u8, data.len()) };
        Ok(())
    }

    /// A plain copy, with the same contract as `write`.
    fn read(&mut self, va: usize, buf: &mut [u8]) -> Result<(), MemError> {
        va.checked_add(buf.len()).ok_or(MemError::BadAddress)?;
        // SAFETY: as for `write`, for a readable mapping.
        unsafe { core::ptr::copy_nonoverlapping(va as *const u8, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// The page itself, with the contract of `write` and `read`.
    fn with_page(
        &mut self,
        va: usize,
        f: &mut dyn FnMut(&mut [u8; PAGE_SIZE]),
    ) -> Result<(), MemError> {
        if !va.is_multiple_of(PAGE_SIZE) || va == 0 {
            return Err(MemError::BadAddress);
        }
        // SAFETY: `va` is page-aligned and not null; the stretch driver calling this has mapped
        // the page at `va` readable and writable (its contract, as for `write`; a page it has
        // not faults to the fault path), and nothing else touches that page while `f` runs (a
        // window page private to the driver), so this is the only reference to it.
        let page = unsafe { &mut *(va as *mut [u8; PAGE_SIZE]) };
        f(page);
        Ok(())
    }

    fn frames_held(&self) -> (usize, usize) {
        let f = &crate::dcb().frames;
        (
            f.guaranteed_held.load(Ordering::Acquire) as usize,
            f.optimistic_held.load(Ordering::Acquire) as usize,
        )
    }
}
