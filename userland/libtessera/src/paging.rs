//! Self-paging in the domain: binding stretch drivers to managed stretches and running them
//! when the kernel delivers a page fault or a revocation notice.
//!
//! [`bind`] creates a managed stretch (`stretch_create_managed`), binds the driver to it and
//! records the pair; it also turns activations on. From then on a touch of an unmapped page of
//! the stretch traps to the kernel, which enters the activation handler with
//! [`abi::activation::FAULT`] and the fault in the control block. The handler does not run the
//! driver itself (it runs with activations off, on the one activation stack): it builds an
//! *upcall record* on the faulting thread's own stack (the interrupted context and the fault),
//! moves to that stack and continues in [`upcall_entry`], which turns activations on. So the driver runs as the
//! faulting thread, on the domain's own CPU contract: if it waits (for an event, a disk, the
//! network) the thread package runs the domain's other threads meanwhile. When the driver has
//! mapped the page, the thread resumes the interrupted context and the access is retried.
//!
//! A fault the driver fails (for instance, no frame left in the contract) ends the faulting
//! thread with a report; the domain's first thread ending that way exits the domain with
//! [`EXIT_FAULT`]. So does a fault in a managed stretch no driver is bound to, and a fault on a
//! stretch whose driver is already running in the same thread (a driver touching its own
//! stretch). The kernel terminates the domain itself for faults it cannot deliver (activations
//! off, rights exceeded).
//!
//! Revocation: the kernel enters the handler with [`abi::activation::REVOKE`] while a notice is
//! outstanding; the interrupted thread then runs the bound drivers' `revoke` (in the order they
//! were bound, until the notice's frames are released) before it resumes.
//!
//! What a driver may do: a fault interrupts only code that touched a managed stretch, so
//! `fault` may wait, yield and allocate (see [`crate::heap`] for what growing the heap costs
//! there). `revoke` runs as the thread the notice interrupted, never inside the runtime's
//! critical code (the allocator holding the heap's lock, a switch between threads: a notice
//! that interrupts those is answered at a later activation), so it may allocate and wait; the
//! paged driver writes dirty pages back there. `docs/stretch-driver-tutorial.md` has the rules.
//!
//! Invariants: a binding's driver runs in one thread at a time (others wait their turn); the
//! registry is touched only by the domain's single flow of control (threads switch
//! cooperatively, and the activation handler only reads the control block).
//!
//! Not implemented: unbinding and destroying a bound stretch, and more than [`MAX_BINDINGS`]
//! bindings.

use core::any::TypeId;
use core::cell::UnsafeCell;
use core::sync::atomic::Ordering;

use abi::{
    Access, MAP_BATCH_MAX, PAGE_SIZE, PageOp, Rights, SavedContext, SysError, activation,
    frame_kind, page_op, page_state,
};
use stretch_driver::{
    DriverError, DriverStats, Fault, FaultError, Frame, FrameKind, MemError, MemoryKernel,
    StretchDriver, StretchInfo,
};

use crate::syscall;

/// Exit code of a domain whose first thread took a page fault that could not be resolved.
pub const EXIT_FAULT: i32 = 105;
/// What `join` returns for a thread ended by a page fault that could not be resolved.
pub const FAULT_FAILED: usize = usize::MAX - 1;
/// Most stretches bound at once.
pub const MAX_BINDINGS: usize = 16;

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

/// One bound stretch.
struct Binding {
    info: StretchInfo,
    driver: *mut dyn StretchDriver,
    /// The driver's concrete type, for [`with_driver`].
    type_id: TypeId,
    /// The thread running the driver now, if any.
    busy: Option<usize>,
    /// Faults the driver resolved.
    resolved: u64,
    /// Threads parked until the driver is free.
    waiters: u32,
}

struct Registry {
    bindings: [Option<Binding>; MAX_BINDINGS],
    revoking: bool,
    /// Times a fault found its stretch's driver busy with another thread's and waited.
    waits_for_driver: u64,
    /// A revocation notice came while this flow of control ran a driver: it is answered once
    /// that driver's fault is done.
    revoke_after_fault: bool,
}

struct Global(UnsafeCell<Registry>);

// SAFETY: only the domain's single flow of control touches the registry (threads switch
// cooperatively and never inside a borrow of it; the activation handler does not touch it).
unsafe impl Sync for Global {}

static REGISTRY: Global = Global(UnsafeCell::new(Registry {
    bindings: [const { None }; MAX_BINDINGS],
    revoking: false,
    waits_for_driver: 0,
    revoke_after_fault: false,
}));

fn registry() -> &'static mut Registry {
    // SAFETY: see `Global`; no reference to the registry is held across a thread switch.
    unsafe { &mut *REGISTRY.0.get() }
}

/// Why [`bind`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindError {
    /// The kernel refused to create the managed stretch.
    Kernel(SysError),
    /// The driver refused the stretch (it was destroyed again).
    Driver(DriverError),
    /// [`MAX_BINDINGS`] stretches are bound already.
    TooMany,
}

impl core::fmt::Display for BindError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BindError::Kernel(e) => {
                write!(f, "the kernel refused the stretch (error {})", *e as usize)
            }
            BindError::Driver(e) => write!(f, "the driver refused the stretch: {e}"),
            BindError::TooMany => f.write_str("too many bound stretches"),
        }
    }
}

/// Creates a managed stretch of `bytes` with `rights` and binds `driver` to it; returns the
/// stretch. Turns activations on, so that its faults reach the driver.
pub fn bind<D: StretchDriver + 'static>(
    driver: &'static mut D,
    bytes: usize,
    rights: Rights,
) -> Result<StretchInfo, BindError> {
    let slot = registry().bindings.iter().position(Option::is_none).ok_or(BindError::TooMany)?;
    let base = syscall::stretch_create_managed(bytes, rights).map_err(BindError::Kernel)?;
    let info = StretchInfo { base, pages: bytes.div_ceil(PAGE_SIZE), rights };
    if let Err(e) = driver.bind(&mut SysKernel, info) {
        let _ = syscall::stretch_destroy(base);
        return Err(BindError::Driver(e));
    }
    let type_id = TypeId::of::<D>();
    registry().bindings[slot] =
        Some(Binding { info, driver, type_id, busy: None, resolved: 0, waiters: 0 });
    crate::thread::init_activations();
    Ok(info)
}

/// Creates a driver's window: a managed stretch of `pages` pages, read-write, bound to no
/// driver, that only the driver maps and touches (it fills frames there before moving them
/// into its stretch with `remap`, and moves pages there to save them). A fault in it ends the
/// faulting thread like a fault in any unbound stretch.
pub fn create_window(pages: usize) -> Result<usize, SysError> {
    let rights = Rights(Rights::READ.0 | Rights::WRITE.0);
    syscall::stretch_create_managed(pages * PAGE_SIZE, rights)
}

/// What the driver bound to the stretch at `base` has done, and how many faults the runtime
/// saw it resolve; `None` if no driver is bound there or it is running now.
pub fn driver_stats(base: usize) -> Option<(DriverStats, u64)> {
    let b = registry().bindings.iter().flatten().find(|b| b.info.base == base)?;
    if b.busy.is_some() {
        return None;
    }
    // SAFETY: the driver is not running (`busy` is clear) and only the fault path, which
    // runs in this same flow of control, ever uses it; `stats` takes `&self`.
    let stats = unsafe { (*b.driver).stats() };
    Some((stats, b.resolved))
}

/// Runs `f` on the driver of type `D` bound to the stretch at `base` (to ask it what it
/// holds, or to `lock` pages); `None` if no driver of that type is bound there or it is
/// running now (in another thread's fault).
pub fn with_driver<D: StretchDriver + 'static, R>(
    base: usize,
    f: impl FnOnce(&mut D, &mut SysKernel) -> R,
) -> Option<R> {
    let index = registry().bindings.iter().position(|b| {
        b.as_ref().is_some_and(|b| b.info.base == base && b.type_id == TypeId::of::<D>())
    })?;
    let b = registry().bindings[index].as_mut().expect("found above");
    if b.busy.is_some() {
        return None;
    }
    b.busy = Some(crate::thread::current());
    let driver = b.driver as *mut D;
    // SAFETY: the binding's driver was handed over in `bind` as a `&'static mut D` (checked
    // by its type id), and `busy` makes this call its only user until it is cleared below.
    let result = f(unsafe { &mut *driver }, &mut SysKernel);
    release(index);
    Some(result)
}

/// What the activation handler leaves on the interrupted thread's stack for [`upcall_entry`].
#[repr(C)]
struct Upcall {
    saved: SavedContext,
    fault: Option<Fault>,
    revoke: bool,
}

/// The activation handler, which the architecture's entry (`arch::activation_entry`, set up by
/// `thread::init_activations`) calls: see [`on_activation`]. It lives here, beside the work it
/// does, so that the thread package, which page faults wait in, does not depend on paging.
pub(crate) extern "C" fn activated(reason: u64, dcb: *const abi::Dcb) -> ! {
    // SAFETY: the kernel passes the address of this domain's control block, mapped read-write
    // for the domain's lifetime.
    let dcb = unsafe { &*dcb };
    on_activation(reason, dcb)
}

/// The activation handler's work (activations off, on the activation stack): resumes the
/// interrupted context, or, for a fault or a revocation notice, continues the interrupted
/// thread in [`upcall_entry`] with an upcall record on its stack.
fn on_activation(reason: u64, dcb: &abi::Dcb) -> ! {
    let saved = dcb.saved;
    let fault = (reason & activation::FAULT != 0).then(|| Fault {
        stretch_base: dcb.fault.stretch.load(Ordering::Relaxed) as usize,
        addr: dcb.fault.addr.load(Ordering::Relaxed) as usize,
        access: Access::from_code(dcb.fault.access.load(Ordering::Relaxed)).unwrap_or(Access::Read),
    });
    let reg = registry();
    // A notice that interrupted the runtime's critical code (a thread switch, the heap's lock) is
    // answered at a later activation: the kernel enters the handler with it until it is met.
    let revoke = reason & activation::REVOKE != 0
        && dcb.revocation.frames_wanted.load(Ordering::Acquire) > 0
        && !reg.revoking
        && !reg.revoke_after_fault
        && !crate::thread::switching()
        && !crate::heap::locked();
    if fault.is_none() && !revoke {
        syscall::resume(&saved)
    }
    reg.revoking |= revoke;
    let sp = saved.sp() as usize;
    let at = (sp - core::mem::size_of::<Upcall>()) & !15;
    let record = Upcall { saved, fault, revoke };
    // SAFETY: the interrupted thread's stack is mapped read-write and everything below its
    // `sp` is free (no code of the domain keeps data below its stack pointer: there is no red
    // zone, see `arch`); the record is written there, 16-byte aligned, and the thread
    // continues with `sp` below it, so nothing else uses that memory. The activation stack is
    // left for good (the next activation starts it afresh).
    unsafe {
        (at as *mut Upcall).write(record);
        crate::arch::continue_on(at, upcall_entry)
    }
}

/// Runs the driver for an upcall record as the interrupted thread, then resumes the
/// interrupted context (or ends the thread if its fault could not be resolved). It starts on
/// the thread's stack with activations still off, and turns them on: from here on an
/// activation saves this thread's context, not the handler's.
extern "C" fn upcall_entry(record: usize) -> ! {
    crate::dcb().activations.store(1, Ordering::Release);
    // SAFETY: `on_activation` wrote the record at this address on this thread's stack, at
    // the stack pointer this function started with, so it stays intact while we run.
    let record = unsafe { &*(record as *const Upcall) };
    if record.revoke {
        revoke_all();
        registry().revoking = false;
    }
    if let Some(fault) = record.fault
        && let Err(why) = resolve(fault)
    {
        crate::println!(
            "tessera: page fault at {:#x} ({}) in stretch {:#x}, pc={:#x}: {}; the thread ends",
            fault.addr,
            fault.access.name(),
            fault.stretch_base,
            record.saved.pc(),
            why
        );
        crate::thread::end_current(FAULT_FAILED, EXIT_FAULT)
    }
    syscall::resume(&record.saved)
}

/// Why a fault could not be resolved.
enum Unresolved {
    Unbound,
    Recursive,
    Driver(FaultError),
}

impl core::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Unresolved::Unbound => f.write_str("no stretch driver is bound to the stretch"),
            Unresolved::Recursive => f.write_str("the fault is inside the stretch's own driver"),
            Unresolved::Driver(e) => write!(f, "the stretch driver failed the fault: {e}"),
        }
    }
}

/// Runs the driver of `fault`'s stretch, one thread at a time.
fn resolve(fault: Fault) -> Result<(), Unresolved> {
    let me = crate::thread::current();
    let index = loop {
        let reg = registry();
        let index = reg
            .bindings
            .iter()
            .position(|b| b.as_ref().is_some_and(|b| b.info.base == fault.stretch_base))
            .ok_or(Unresolved::Unbound)?;
        let b = reg.bindings[index].as_mut().expect("found above");
        match b.busy {
            None => {
                b.busy = Some(me);
                break index;
            }
            Some(t) if t == me => return Err(Unresolved::Recursive),
            // Another thread's fault is in the driver (waiting for a disk, say): park until it
            // is done, instead of spinning through the other threads.
            Some(_) => {
                reg.waits_for_driver += 1;
                park(index);
            }
        }
    };
    let driver = registry().bindings[index].as_ref().expect("bound").driver;
    // SAFETY: the driver was handed over as `&'static mut` in `bind`, and `busy` makes this
    // thread its only user until it is cleared below.
    let result = unsafe { (*driver).fault(&mut SysKernel, fault) };
    registry().bindings[index].as_mut().expect("bound").resolved += u64::from(result.is_ok());
    release(index);
    if registry().revoke_after_fault {
        registry().revoke_after_fault = false;
        registry().revoking = true;
        revoke_all();
        registry().revoking = false;
    }
    result.map_err(Unresolved::Driver)
}

/// What a thread waiting for binding `index`'s driver parks on: the binding's address.
fn driver_lock(index: usize) -> usize {
    &registry().bindings[index] as *const Option<Binding> as usize
}

/// Parks the running thread until binding `index`'s driver is released.
fn park(index: usize) {
    if let Some(b) = registry().bindings[index].as_mut() {
        b.waiters += 1;
    }
    crate::thread::wait_for(driver_lock(index));
    if let Some(b) = registry().bindings[index].as_mut() {
        b.waiters -= 1;
    }
}

/// Marks binding `index`'s driver free, and wakes a thread parked for it if there is one (the
/// fault path's common case has none, and pays nothing for the check).
fn release(index: usize) {
    let Some(b) = registry().bindings[index].as_mut() else { return };
    b.busy = None;
    if b.waiters > 0 {
        crate::thread::wake_one(driver_lock(index));
    }
}

/// How many times a fault found its stretch's driver busy with another thread's fault and
/// waited for it (parked, never spinning).
pub fn waits_for_driver() -> u64 {
    registry().waits_for_driver
}

/// Answers a revocation notice: asks the bound drivers, in the order they were bound, to
/// release frames until the notice is satisfied (or every driver has been asked). A driver
/// busy with another thread's fault is waited for (it may be writing back, or waiting for its
/// disk), not skipped; one busy with this thread's own (the notice came while this thread ran
/// the driver) is asked once that fault is done ([`resolve`]).
fn revoke_all() {
    let wanted = || crate::dcb().revocation.frames_wanted.load(Ordering::Acquire) as usize;
    let me = crate::thread::current();
    for index in 0..MAX_BINDINGS {
        let left = wanted();
        if left == 0 {
            return;
        }
        let Some(b) = registry().bindings[index].as_mut() else { continue };
        match b.busy {
            None => {}
            Some(t) if t == me => {
                registry().revoke_after_fault = true;
                continue;
            }
            Some(_) => {
                // Parked until the driver is free; then this binding is looked at again.
                park(index);
                let Some(b) = registry().bindings[index].as_mut() else { continue };
                if b.busy.is_some() {
                    continue;
                }
            }
        }
        let left = wanted();
        if left == 0 {
            return;
        }
        let b = registry().bindings[index].as_mut().expect("looked at above");
        b.busy = Some(me);
        let driver = b.driver;
        // SAFETY: as in `resolve`: `busy` makes this thread the driver's only user.
        unsafe { (*driver).revoke(&mut SysKernel, left) };
        release(index);
    }
}
