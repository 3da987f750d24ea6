//! `libtessera` (crate name `tessera`): the runtime every Tessera app links.
//!
//! It provides the program entry (`_start`, see [Entry](crate#entry)), the system-call
//! wrappers of the ABI in `libs/abi` (`console_write`, `exit`, `yield_now`, `time_ns`, the
//! stretch calls, `event_send`, `block`, in module `syscall`), console printing ([`print!`],
//! [`println!`]), the panic handler (prints the message, exits with [`EXIT_PANIC`]), the
//! domain's arguments ([`Args`]), its control block (`dcb()`), event endpoints ([`events`]),
//! IO channels ([`channel`]) and checksummed records ([`record`]); on the targets, a driver
//! domain's clients and their data areas (`driver`). An app is a
//! `#![no_std] #![no_main]` binary that registers `fn main(env: Env) -> i32` with [`main!`];
//! its return value becomes the domain's exit code.
//!
//! # Entry
//! The kernel starts a domain at its ELF entry `_start` with four arguments in the registers
//! `abi::ENTRY_ARGUMENTS` names: the domain id, the address of the argument block, its length,
//! and the address of the domain's control block (`abi::Dcb`, one page mapped read-write); the
//! stack pointer is the top of a stack it set up (`docs/userland.md` gives the registers and
//! the alignment of each architecture). `_start` (module `arch`) clears the frame pointer and
//! return address (ending backtraces), zeroes nothing (`.bss` is part of a segment's
//! `mem_size` and the kernel maps it zero-filled) and calls the Rust entry, which records the
//! control block (a page-aligned user address, otherwise it prints why and exits with
//! [`EXIT_NO_CONTROL_BLOCK`]), validates the argument block, runs `main` and exits with its
//! result. The argument block is `u32 argc`, then for each argument `u32 len` and `len` bytes
//! of UTF-8, packed and little-endian; it holds the manifest's `args` only (no program name).
//! It must stay mapped and unchanged for the domain's lifetime, because [`Args`] hands out
//! `&'static str`s into it. A malformed block makes the domain print why and exit with
//! [`EXIT_BAD_ARGS`].
//!
//! # Invariants
//! - `unsafe` lives only in `arch` (the assembly of each architecture: the system-call
//!   instruction, the clock counter, `_start`, thread switches and the activation handler's
//!   entry), `syscall` (the calls that may unmap the caller's memory), `entry` (the argument
//!   block, the call into the app's `main`), `control_block` (the control block's address as
//!   a reference), `shared` (the memory of IO channels), `dma` (a DMA stretch's bytes as a slice), `heap` (handing stretches to the
//!   allocator), `activation` (the activation handler: the control block it is handed, the
//!   upcall record on a faulting thread's stack), `paging`'s system-call layer `paging::kernel`
//!   (the memory copies of its `MemoryKernel`) and `thread` (switching threads, and the cell
//!   that the paging registry is borrowed through). The paging registry, its fault dispatch and
//!   its application calls have none: a driver is lent out of its binding, not reached through
//!   a pointer.
//! - Only `arch` names an architecture: it has one module per architecture (riscv64, x86_64)
//!   behind one interface, and everything else is portable.
//! - The runtime itself never allocates (printing formats into a 256-byte stack buffer, flushed
//!   with one `console_write` each time it fills and at the end of each `print!`); apps and
//!   stretch drivers may, through the heap ([`heap`]), which lives in nailed stretches (a
//!   driver's `revoke` excepted: see [`heap`]).
//! - A domain runs one flow of control at a time (its user-level threads switch
//!   cooperatively): the statics here (the control block's address, the block count, the
//!   claimed channel ends) are atomics only to be `Sync`.
//!
//! The runtime parts exist only on bare metal (`target_os = "none"`); on other targets the
//! crate is just its portable logic ([`Args`], [`ChunkWriter`], [`record`], the
//! waiting logic of [`events`], the ring and name lookup of [`channel`], and the CPU time
//! meter of [`cpu_meter`]), which is what its host unit tests cover.
//!
//! User-level threads (`thread`: spawn, yield, sleep, wait for an event, mutex, join) run on
//! top of the kernel's activations; see that module for what is and is not implemented.
//!
//! Self-paging (`paging`): stretch drivers bound to managed stretches, run when the kernel
//! delivers a page fault or a revocation notice (through the activation handler,
//! `activation`); see `docs/memory.md`.

#![no_std]

#[cfg(test)]
extern crate std;

mod args;
pub mod channel;
pub mod cpu_meter;
pub mod events;
mod print;
pub mod record;
#[cfg_attr(
    not(target_os = "none"),
    allow(dead_code, reason = "used by the runtime's ends; on the host only by the tests")
)]
mod shared;

#[cfg(target_os = "none")]
mod activation;
#[cfg(any(target_os = "none", test))]
mod arch;
#[cfg(target_os = "none")]
pub mod clock;
#[cfg(target_os = "none")]
mod control_block;
#[cfg(target_os = "none")]
pub mod dma;
#[cfg(target_os = "none")]
pub mod driver;
#[cfg(target_os = "none")]
mod entry;
#[cfg(target_os = "none")]
pub mod fault;
#[cfg(target_os = "none")]
pub mod heap;
#[cfg(target_os = "none")]
pub mod paging;
#[cfg(target_os = "none")]
mod panic;
#[cfg(target_os = "none")]
pub mod syscall;
#[cfg(target_os = "none")]
pub mod thread;

pub use abi::{DomainInfo, PAGE_SIZE, Rights, SysError};
pub use args::{Args, ArgsError};
#[cfg(target_os = "none")]
pub use control_block::dcb;
#[cfg(target_os = "none")]
pub use print::_print;
pub use print::{BUFFER_SIZE, ChunkWriter};
#[cfg(target_os = "none")]
pub use syscall::{
    block, console_write, domain_info, event_send, exit, null, stretch_create, stretch_destroy,
    stretch_rights, time_ns, timer_alloc, timer_set, yield_now,
};

/// Exit code of a domain whose code panicked.
pub const EXIT_PANIC: i32 = 101;
/// Exit code of a domain started with a malformed argument block.
pub const EXIT_BAD_ARGS: i32 = 102;
/// Exit code of a domain started without a plausible control-block address.
pub const EXIT_NO_CONTROL_BLOCK: i32 = 103;
/// Exit code of a domain whose threads all wait for something that can never happen.
pub const EXIT_DEADLOCK: i32 = 104;

/// What an app's `main` receives.
#[derive(Clone, Debug)]
pub struct Env {
    /// The domain's id (as the kernel numbers domains; `stretch_rights` takes it).
    pub domain_id: usize,
    /// The domain's arguments from the manifest, without a program name.
    pub args: Args,
}

/// Registers the app's entry function: `tessera::main!(main);` where
/// `fn main(env: tessera::Env) -> i32`. The runtime calls it once, after validating the
/// arguments, and exits the domain with its return value.
#[macro_export]
macro_rules! main {
    ($path:path) => {
        /// The app's `main`, under the name the runtime's entry calls.
        #[doc(hidden)]
        #[unsafe(no_mangle)]
        pub fn __tessera_main(env: $crate::Env) -> i32 {
            let main: fn($crate::Env) -> i32 = $path;
            main(env)
        }
    };
}

/// Prints to the console (`console_write`), formatting into a 256-byte stack buffer.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::_print(::core::format_args!($($arg)*))
    };
}

/// Prints to the console with a newline at the end; see [`print!`].
#[macro_export]
macro_rules! println {
    () => {
        $crate::print!("\n")
    };
    ($($arg:tt)*) => {
        $crate::_print(::core::format_args!("{}\n", ::core::format_args!($($arg)*)))
    };
}
