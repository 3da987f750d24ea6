//! The architecture layer: everything in libtessera that depends on the instruction set, one
//! module per architecture behind the same interface. The rest of the crate is portable and
//! reaches the machine only through these items:
//!
//! | item | what |
//! |---|---|
//! | `syscall(number, args) -> (status, value)` | the system-call instruction (`docs/syscalls.md`) |
//! | `resume(ctx) -> status` | the `resume` call, which returns only with an error status |
//! | `ticks()` | the clock counter the kernel lets user mode read, at `Dcb::timebase_hz` |
//! | `Context`, `Context::ZERO`, `Context::new(entry, arg, stack_top)` | the callee-saved registers of a user-level thread that is not running |
//! | `switch(save, load)` | saves the running thread's callee-saved registers, loads another's |
//! | `continue_on(stack, f)` | abandons the current stack for `f(stack)` on `stack` |
//! | `activation_entry()` | the activation handler's entry (assembly), which calls `activation::activated(reason, dcb)` |
//! | `_start` | the program entry (assembly), which calls `entry::start(domain, args, len, dcb)` |
//!
//! Each module documents its registers; `abi::ENTRY_ARGUMENTS` and `abi::SavedContext` give
//! the kernel's side. The signatures are checked below, so that both modules keep the same
//! interface (each is compiled by its target's build and clippy).
//!
//! `unsafe` here: the assembly (system calls, the clock, the entry, thread switches) and the
//! functions that wrap it.
//!
//! On an x86_64 host the x86_64 module is also compiled for the unit tests, without the entry
//! and the activation handler (which call into the runtime): its system-call stub, clock and
//! thread switch run there, under Linux, whose system calls take the same registers.

#![cfg_attr(not(target_os = "none"), allow(dead_code, reason = "the host runs only the tests"))]

#[cfg(all(target_arch = "riscv64", target_os = "none"))]
mod riscv64;
#[cfg(all(target_arch = "riscv64", target_os = "none"))]
pub(crate) use riscv64::*;

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(all(target_arch = "x86_64", target_os = "none"))]
pub(crate) use x86_64::*;

#[cfg(all(target_os = "none", not(any(target_arch = "riscv64", target_arch = "x86_64"))))]
compile_error!("libtessera's runtime supports riscv64 and x86_64");

/// Every architecture provides the same items with the same signatures.
#[cfg(target_os = "none")]
const _: () = {
    let _: unsafe fn(usize, [usize; 6]) -> (usize, usize) = syscall;
    let _: unsafe fn(*const abi::SavedContext) -> usize = resume;
    let _: fn() -> u64 = ticks;
    let _: Context = Context::ZERO;
    let _: fn(extern "C" fn(usize) -> !, usize, usize) -> Context = Context::new;
    let _: unsafe fn(*mut Context, *const Context) = switch;
    let _: unsafe fn(usize, extern "C" fn(usize) -> !) -> ! = continue_on;
    let _: fn() -> usize = activation_entry;
};
