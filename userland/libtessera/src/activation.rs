//! The activation handler: the one entry by which the kernel hands the domain a page fault, a
//! revocation notice, or the CPU back after preemption.
//!
//! The architecture's entry (`arch::activation_entry`, registered by
//! `thread::init_activations`) calls [`activated`] with activations off, on the one activation
//! stack. Without a fault or a notice to answer, it resumes the interrupted context at once.
//! Otherwise it does not run a driver there: it builds an *upcall record* on the interrupted
//! thread's own stack (the context and the fault), moves to that stack and continues in
//! [`upcall_entry`], which turns activations on and hands the work to the paging module's
//! dispatch (`paging::dispatch`): so the driver runs as the faulting thread, on the domain's
//! own CPU contract, and may wait while the domain's other threads run. When it is done the
//! thread resumes the interrupted context, and the access is retried; a fault that could not
//! be resolved ends the thread (the domain's first thread: the domain, with
//! [`crate::paging::EXIT_FAULT`]).
//!
//! A notice that interrupted the runtime's critical code (a thread switch, the heap's lock), or
//! that comes while one is being answered, is answered at a later activation: the kernel
//! enters the handler with it until it is met. The handler borrows no state of the runtime: it
//! reads the control block, the dispatch's flags (atomics) and the thread package's and heap's
//! flags.
//!
//! This module, the system-call layer (`syscall`, `paging::kernel`) and the thread package's
//! cell that the paging registry is borrowed through are where the runtime's paging uses
//! `unsafe`.

use core::sync::atomic::Ordering;

use abi::{Access, SavedContext, activation};
use stretch_driver::Fault;

use crate::paging::dispatch::{self, REVOKE_AFTER_FAULT, REVOKING};
use crate::paging::{EXIT_FAULT, FAULT_FAILED};
use crate::syscall;

/// What the activation handler leaves on the interrupted thread's stack for [`upcall_entry`].
#[repr(C)]
struct Upcall {
    /// The domain's control block, as the kernel passed it to the handler (the one
    /// `crate::dcb` finds, here without checking the address again).
    dcb: &'static abi::Dcb,
    saved: SavedContext,
    fault: Option<Fault>,
    revoke: bool,
}

/// The activation handler, which the architecture's entry calls: see [`on_activation`].
pub(crate) extern "C" fn activated(reason: u64, dcb: *const abi::Dcb) -> ! {
    // SAFETY: the kernel passes the address of this domain's control block, mapped read-write
    // for the domain's lifetime.
    let dcb: &'static abi::Dcb = unsafe { &*dcb };
    on_activation(reason, dcb)
}

/// The activation handler's work (activations off, on the activation stack): resumes the
/// interrupted context, or, for a fault or a revocation notice, continues the interrupted
/// thread in [`upcall_entry`] with an upcall record on its stack.
fn on_activation(reason: u64, dcb: &'static abi::Dcb) -> ! {
    let saved = dcb.saved;
    let fault = (reason & activation::FAULT != 0).then(|| Fault {
        stretch_base: dcb.fault.stretch.load(Ordering::Relaxed) as usize,
        addr: dcb.fault.addr.load(Ordering::Relaxed) as usize,
        access: Access::from_code(dcb.fault.access.load(Ordering::Relaxed)).unwrap_or(Access::Read),
    });
    // A notice that interrupted the runtime's critical code (a thread switch, the heap's lock) is
    // answered at a later activation: the kernel enters the handler with it until it is met.
    let revoke = reason & activation::REVOKE != 0
        && dcb.revocation.frames_wanted.load(Ordering::Acquire) > 0
        && !REVOKING.load(Ordering::Relaxed)
        && !REVOKE_AFTER_FAULT.load(Ordering::Relaxed)
        && !crate::thread::switching()
        && !crate::heap::locked();
    if fault.is_none() && !revoke {
        syscall::resume(&saved)
    }
    if revoke {
        REVOKING.store(true, Ordering::Relaxed);
    }
    let sp = saved.sp() as usize;
    let at = (sp - core::mem::size_of::<Upcall>()) & !15;
    let record = Upcall { dcb, saved, fault, revoke };
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
    // SAFETY: `on_activation` wrote the record at this address on this thread's stack, at
    // the stack pointer this function started with, so it stays intact while we run.
    let record = unsafe { &*(record as *const Upcall) };
    record.dcb.activations.store(1, Ordering::Release);
    if record.revoke {
        dispatch::revoke_all();
        REVOKING.store(false, Ordering::Relaxed);
    }
    // The fault is read in place (`resolve` copies it once, for the driver).
    if let Some(fault) = &record.fault
        && let Err(why) = dispatch::resolve(fault)
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
