//! System calls: safe wrappers for each call of `libs/abi` (see `docs/syscalls.md` for
//! arguments and errors) over the architecture's system-call instruction (`arch`).
//!
//! Every call takes a number and up to six arguments and returns a status, 0 or a
//! [`SysError`] code (an unknown code reads as [`SysError::NoSuchCall`]), and a value; the
//! registers of each architecture are in `docs/syscalls.md`.
//!
//! Stretch addresses are plain numbers here. Destroying a stretch, or taking rights away from
//! the caller's own domain, invalidates every pointer into it: code that made a reference to
//! stretch memory (which needs `unsafe`) must keep the stretch alive and accessible for as
//! long as the reference lives.

use abi::{Call, DomainInfo, MAP_BATCH_MAX, PageOp, Rights, SysError};

use crate::arch;

/// The longest text one `console_write` accepts (`docs/syscalls.md`).
pub const CONSOLE_WRITE_MAX: usize = 1024;

/// Makes system call `number` with arguments `args` and decodes the result.
///
/// # Safety
/// The kernel validates every argument, so no call can harm the kernel or another domain, but
/// some calls change the caller's own memory: the caller must ensure the call does not unmap
/// or remove access to memory that Rust code still references (`stretch_destroy`, or
/// `stretch_rights` on the caller's own domain).
#[inline]
pub unsafe fn raw(number: usize, args: [usize; 6]) -> Result<usize, SysError> {
    // SAFETY: this function's contract is `arch::syscall`'s.
    let (status, value) = unsafe { arch::syscall(number, args) };
    match status {
        0 => Ok(value),
        code => Err(SysError::from_code(code).unwrap_or(SysError::NoSuchCall)),
    }
}

/// A call that cannot invalidate the caller's memory.
#[inline]
fn call(c: Call, args: [usize; 6]) -> Result<usize, SysError> {
    debug_assert!(!matches!(c, Call::StretchDestroy | Call::StretchRights));
    // SAFETY: every call but `stretch_destroy` and `stretch_rights` leaves the caller's
    // existing memory and rights as they are; those two are documented hazards of their safe
    // wrappers (see the module documentation) and go through `raw` directly.
    unsafe { raw(c as usize, args) }
}

/// Prints `text` on the console, tagged with the domain's name; long text is sent in pieces of
/// at most [`CONSOLE_WRITE_MAX`] bytes, split between characters.
pub fn console_write(text: &str) -> Result<(), SysError> {
    let mut rest = text;
    while !rest.is_empty() {
        let piece = &rest[..rest.floor_char_boundary(CONSOLE_WRITE_MAX)];
        let written = call(Call::ConsoleWrite, [piece.as_ptr() as usize, piece.len(), 0, 0, 0, 0])?;
        // The kernel writes whole pieces; anything else ends the write rather than looping.
        match rest.get(written..) {
            Some(tail) if written > 0 => rest = tail,
            _ => break,
        }
    }
    Ok(())
}

/// Ends the calling domain with `code` (sign-extended to a register's width).
pub fn exit(code: i32) -> ! {
    let _ = call(Call::Exit, [code as isize as usize, 0, 0, 0, 0, 0]);
    // `exit` does not return; should a kernel bug let it, give the CPU away forever.
    loop {
        yield_now();
    }
}

/// Gives up the rest of this turn on the CPU.
pub fn yield_now() {
    let _ = call(Call::Yield, [0; 6]);
}

/// Nanoseconds since boot (0 if the kernel does not provide the call).
pub fn time_ns() -> u64 {
    call(Call::Time, [0; 6]).map_or(0, |ns| ns as u64)
}

/// The calling domain's own record: its identifier, its name from the manifest and its memory
/// accounts (`domain_info`).
pub fn domain_info() -> Result<DomainInfo, SysError> {
    let mut bytes = [0u8; DomainInfo::SIZE];
    // SAFETY: the kernel writes at most `bytes.len()` bytes at `bytes`, which this function
    // owns and no reference reads while the call runs.
    unsafe { domain_info_raw(bytes.as_mut_ptr() as usize, bytes.len()) }?;
    Ok(DomainInfo::from_bytes(&bytes))
}

/// `domain_info` with any buffer: the record written at `buf` if `len` holds it.
///
/// # Safety
/// As for [`raw`]; the kernel writes up to [`DomainInfo::SIZE`] bytes at `buf` if it accepts
/// the call: no Rust reference may be live to them.
#[inline]
pub unsafe fn domain_info_raw(buf: usize, len: usize) -> Result<usize, SysError> {
    // SAFETY: this function's contract is `raw`'s, and the caller's for `buf`.
    unsafe { raw(Call::DomainInfo as usize, [buf, len, 0, 0, 0, 0]) }
}

/// The empty system call, for measuring the bare call path.
pub fn null() -> Result<(), SysError> {
    call(Call::Null, [0; 6]).map(|_| ())
}

/// Increments event endpoint `endpoint` of domain `domain`, waking it if it is blocked. Only
/// the domain the kernel allowed may signal an endpoint (each end of an IO channel may signal
/// the other end's endpoint); errors: `NotFound` (no such live domain), `InvalidArgument` (no
/// such endpoint), `PermissionDenied` (the endpoint does not accept events from the caller).
pub fn event_send(domain: usize, endpoint: usize) -> Result<(), SysError> {
    call(Call::EventSend, [domain, endpoint, 0, 0, 0, 0]).map(|_| ())
}

/// Stops the domain until one of its event endpoints changes or [`time_ns`] reaches
/// `deadline_ns` (`u64::MAX`: no deadline). Returns at once if an endpoint changed since the
/// domain last returned from `block`, so reading a counter, deciding to wait and then blocking
/// loses no signal. `Ok` says nothing about which: callers check their counters and the clock
/// again (see [`events::wait`](crate::events::wait)). Fails with
/// [`SysError::WouldDeadlock`] when every live domain is blocked without a deadline.
pub fn block(deadline_ns: u64) -> Result<(), SysError> {
    call(Call::Block, [deadline_ns as usize, 0, 0, 0, 0, 0]).map(|_| ())
}

/// Creates a nailed stretch of `bytes` (rounded up to pages) with `rights` for the caller, who
/// also holds the meta right; returns its base address.
pub fn stretch_create(bytes: usize, rights: Rights) -> Result<usize, SysError> {
    call(Call::StretchCreate, [bytes, rights.0 as usize, 0, 0, 0, 0])
}

/// Destroys the stretch at `base`, which the caller owns. Every pointer into it becomes
/// invalid (see the module documentation).
pub fn stretch_destroy(base: usize) -> Result<(), SysError> {
    // SAFETY: no reference into the stretch can exist without `unsafe` code that took on
    // keeping it alive (module documentation); this call itself touches no Rust memory.
    unsafe { raw(Call::StretchDestroy as usize, [base, 0, 0, 0, 0, 0]) }.map(|_| ())
}

/// Sets what domain `domain_id` may do with the stretch at `base` (the caller needs the meta
/// right on it). Taking rights from the caller itself invalidates its own pointers into it.
pub fn stretch_rights(base: usize, domain_id: usize, rights: Rights) -> Result<(), SysError> {
    let args = [base, domain_id, rights.0 as usize, 0, 0, 0];
    // SAFETY: as for `stretch_destroy`: references into stretch memory are the business of
    // the `unsafe` code that made them (module documentation).
    unsafe { raw(Call::StretchRights as usize, args) }.map(|_| ())
}

/// Registers the activation handler `entry` and the stack it runs on (top, 16-byte aligned).
pub fn activation_set(entry: usize, stack_top: usize) -> Result<(), SysError> {
    call(Call::ActivationSet, [entry, stack_top, 0, 0, 0, 0]).map(|_| ())
}

/// Continues in `ctx` and turns activations back on, in one step (the way out of an
/// activation handler). Returns only if the kernel refuses `ctx`'s address, by exiting.
pub fn resume(ctx: &abi::SavedContext) -> ! {
    // SAFETY: `ctx` is a live reference to a context, readable as `arch::resume` requires.
    let status = unsafe { arch::resume(ctx) };
    crate::println!("tessera: the kernel refused to resume a context (error {})", status);
    exit(crate::EXIT_PANIC)
}

/// A new event endpoint of this domain that only the kernel's clock signals (see
/// [`timer_set`]).
pub fn timer_alloc() -> Result<usize, SysError> {
    call(Call::TimerAlloc, [0; 6])
}

/// Has the kernel signal timer endpoint `endpoint` once `time_ns()` reaches `deadline_ns`
/// (one shot; `u64::MAX` cancels).
pub fn timer_set(endpoint: usize, deadline_ns: u64) -> Result<(), SysError> {
    call(Call::TimerSet, [endpoint, deadline_ns as usize, 0, 0, 0, 0]).map(|_| ())
}

/// Creates a managed stretch of `bytes` (rounded up to pages) with `rights` for the caller (who
/// also holds the meta right): no page is mapped; the caller maps them with [`map`], and its
/// faults come to the activation handler. Returns its base address. Use
/// [`crate::paging::bind`], which also binds a stretch driver to it.
pub fn stretch_create_managed(bytes: usize, rights: Rights) -> Result<usize, SysError> {
    call(Call::StretchCreateManaged, [bytes, rights.0 as usize, 0, 0, 0, 0])
}

/// Takes a zero-filled frame of `kind` (`abi::frame_kind`) from the frames contract; returns
/// its frame number.
#[inline]
pub fn frame_alloc(kind: usize) -> Result<usize, SysError> {
    call(Call::FrameAlloc, [kind, 0, 0, 0, 0, 0])
}

/// Gives back frame `frame`, which must not be mapped.
#[inline]
pub fn frame_free(frame: usize) -> Result<(), SysError> {
    call(Call::FrameFree, [frame, 0, 0, 0, 0, 0]).map(|_| ())
}

/// Maps frame `frame` at page `va` of a managed stretch with `rights`.
#[inline]
pub fn map(va: usize, frame: usize, rights: Rights) -> Result<(), SysError> {
    call(Call::Map, [va, frame, rights.0 as usize, 0, 0, 0]).map(|_| ())
}

/// Removes the mapping of page `va` of a managed stretch; returns the frame that was mapped.
/// Every pointer into the page becomes invalid until it is mapped again (the next access
/// faults to the stretch's driver).
#[inline]
pub fn unmap(va: usize) -> Result<usize, SysError> {
    // SAFETY: as for `stretch_destroy`: a page of a managed stretch is reached only through
    // its driver's contract; an access after `unmap` faults to the driver instead of reading
    // freed memory.
    unsafe { raw(Call::Unmap as usize, [va, 0, 0, 0, 0, 0]) }
}

/// Moves the frame mapped at page `from` of a managed stretch to the unmapped page `to` of one,
/// with `rights`, in one step, and returns `from`'s `page_state` bits as it left it (the new
/// entry's accessed and dirty bits start clear). Every pointer into `from` becomes invalid (the
/// next access faults to its stretch's driver).
#[inline]
pub fn remap(from: usize, to: usize, rights: Rights) -> Result<u8, SysError> {
    // SAFETY: as for `unmap`: an access to `from` after the call faults to its driver.
    unsafe { raw(Call::Remap as usize, [from, to, rights.0 as usize, 0, 0, 0]) }
        .map(|state| state as u8)
}

/// Changes the rights of the mapped page `va` of a managed stretch.
#[inline]
pub fn protect(va: usize, rights: Rights) -> Result<(), SysError> {
    // SAFETY: as for `unmap`: an access the new rights refuse faults to the stretch's driver.
    unsafe { raw(Call::Protect as usize, [va, rights.0 as usize, 0, 0, 0, 0]) }.map(|_| ())
}

/// Applies the page operations `ops` (1 to [`MAP_BATCH_MAX`] maps, unmaps and protects of
/// pages of managed stretches) with one call and one TLB flush. The kernel checks every entry
/// first; if it refuses one, nothing changes and the error comes with the entry's index
/// (`ops.len()` when the batch itself is refused: empty, too long). Every pointer into an
/// unmapped page becomes invalid (the next access faults to its stretch's driver).
#[inline]
pub fn map_batch(ops: &[PageOp]) -> Result<(), (usize, SysError)> {
    if ops.is_empty() || ops.len() > MAP_BATCH_MAX {
        return Err((ops.len(), SysError::InvalidArgument));
    }
    // SAFETY: as for `unmap` and `protect`: an access a changed page refuses faults to its
    // stretch's driver; `ops` is `ops.len()` entries the kernel may read.
    unsafe { map_batch_raw(ops.as_ptr() as usize, ops.len()) }
}

/// `map_batch` with any pointer and count: `count` entries at `ops`.
///
/// # Safety
/// As for [`raw`]: the entries the kernel applies must not unmap or take access away from
/// memory Rust code still references.
#[inline]
pub unsafe fn map_batch_raw(ops: usize, count: usize) -> Result<(), (usize, SysError)> {
    // SAFETY: this function's contract is `arch::syscall`'s.
    let (status, index) =
        unsafe { arch::syscall(Call::MapBatch as usize, [ops, count, 0, 0, 0, 0]) };
    match status {
        0 => Ok(()),
        code => Err((index, SysError::from_code(code).unwrap_or(SysError::NoSuchCall))),
    }
}

/// Reads the state of the `states.len()` (1 to [`MAP_BATCH_MAX`]) pages from the
/// page-aligned `va`, pages of managed stretches the caller manages (mapped or not), into
/// `states`, one byte a page (`abi::page_state` bits: mapped, accessed, dirty), then clears
/// the bits `clear` (`ACCESSED | DIRTY` at most) in their entries with one TLB flush. The
/// kernel checks every argument first; a refused call changes nothing.
#[inline]
pub fn page_state(va: usize, states: &mut [u8], clear: u8) -> Result<(), SysError> {
    if states.is_empty() || states.len() > MAP_BATCH_MAX {
        return Err(SysError::InvalidArgument);
    }
    // SAFETY: the call changes no mapping (clearing accessed and dirty bits changes no
    // access), and the kernel writes only the `states.len()` bytes of `states`, which this
    // function borrows mutably.
    unsafe { page_state_raw(va, states.len(), states.as_mut_ptr() as usize, clear as usize) }
}

/// `page_state` with any arguments: `count` bytes written at `out`.
///
/// # Safety
/// As for [`raw`]; the kernel writes `count` bytes at `out` if it accepts the call: no Rust
/// reference may be live to them.
#[inline]
pub unsafe fn page_state_raw(
    va: usize,
    count: usize,
    out: usize,
    clear: usize,
) -> Result<(), SysError> {
    // SAFETY: this function's contract is `raw`'s, and the caller's for `out`.
    unsafe { raw(Call::PageState as usize, [va, count, out, clear, 0, 0]) }.map(|_| ())
}

/// Makes a stretch of `bytes` (rounded up to pages) of physically contiguous, zero-filled
/// memory from the guarantee, read-write, for the caller's devices to read and write (driver
/// domains only); returns its base address.
pub fn dma_alloc(bytes: usize) -> Result<usize, SysError> {
    call(Call::DmaAlloc, [bytes, 0, 0, 0, 0, 0])
}

/// The physical address of `va` in a DMA stretch the caller owns (driver domains only), for a
/// device.
pub fn dma_address(va: usize) -> Result<usize, SysError> {
    call(Call::DmaAddress, [va, 0, 0, 0, 0, 0])
}

/// Lends the frame mapped at page `va` of a managed stretch to the driver domain `domain`,
/// named by its endpoint `endpoint` that this domain may signal (a channel's peer end), for one
/// request whose device reads the frame (`abi::loan_access::DEVICE_READS`: the page stays
/// mapped read-only meanwhile) or writes it (`DEVICE_WRITES`: the page leaves this domain's
/// view meanwhile; an access faults to its stretch's driver); returns the loan's handle. The
/// driver returns the loan when its device is done, which maps the page back as it was.
#[inline]
pub fn frame_lend(
    va: usize,
    domain: usize,
    endpoint: usize,
    access: usize,
) -> Result<u64, SysError> {
    // SAFETY: as for `unmap`: while lent, a write to `va` (any access, lent for the device to
    // write) faults to its stretch's driver.
    unsafe { raw(Call::FrameLend as usize, [va, domain, endpoint, access, 0, 0]) }
        .map(|loan| loan as u64)
}

/// The device address of the first `len` bytes of the frame `lender` lent this driver domain
/// as `loan`, for one request; from now on only this domain may end the loan.
#[inline]
pub fn loan_address(loan: u64, lender: u32, len: usize) -> Result<u64, SysError> {
    call(Call::LoanAddress, [loan as usize, lender as usize, len, 0, 0, 0]).map(|pa| pa as u64)
}

/// Ends loan `loan`: as its borrower once the device is done with the frame, or as its lender
/// while the borrower has not used it. The lender's page is mapped back as it was.
#[inline]
pub fn frame_return(loan: u64) -> Result<(), SysError> {
    // SAFETY: the call changes only the lender's page back to what the lender had mapped there.
    unsafe { raw(Call::FrameReturn as usize, [loan as usize, 0, 0, 0, 0, 0]) }.map(|_| ())
}

/// Acknowledges the device interrupt that signals endpoint `endpoint` (driver domains): the
/// device was served and may interrupt again.
pub fn irq_ack(endpoint: usize) -> Result<(), SysError> {
    call(Call::IrqAck, [endpoint, 0, 0, 0, 0, 0]).map(|_| ())
}
