//! `libtessera` (crate name `tessera`): the runtime every Tessera app links.
//!
//! It provides the program entry (`_start`, see [Entry](crate#entry)), the system-call
//! wrappers of the ABI in `libs/abi` (`console_write`, `exit`, `yield_now`, `time_ns`, the
//! stretch calls, in module `syscall`), console printing ([`print!`], [`println!`]), the panic handler (prints
//! the message, exits with [`EXIT_PANIC`]) and the domain's arguments ([`Args`]). An app is a
//! `#![no_std] #![no_main]` binary that registers `fn main(env: Env) -> i32` with
//! [`main!`]; its return value becomes the domain's exit code.
//!
//! # Entry
//! The kernel starts a domain at its ELF entry `_start` with `a0` = the domain id, `a1` = the
//! address of the argument block, `a2` = its length, and `sp` = the 16-byte-aligned top of a
//! stack it set up; `gp` and `tp` are unspecified and unused. `_start` clears the frame pointer
//! and return address (ending backtraces), zeroes nothing (`.bss` is part of a segment's
//! `mem_size` and the kernel maps it zero-filled) and calls the Rust entry, which validates the
//! argument block, runs `main` and exits with its result. The argument block is `u32 argc`, then
//! for each argument `u32 len` and `len` bytes of UTF-8, packed and little-endian; it holds the
//! manifest's `args` only (no program name). It must stay mapped and unchanged for the
//! domain's lifetime, because [`Args`] hands out `&'static str`s into it. A malformed block
//! makes the domain print why and exit with [`EXIT_BAD_ARGS`].
//!
//! # Invariants
//! - `unsafe` lives only in `syscall` (the `ecall` instruction) and `entry` (`_start`, the
//!   argument block, the call into the app's `main`).
//! - Nothing here allocates; printing formats into a 256-byte stack buffer, flushed with one
//!   `console_write` each time it fills and at the end of each `print!`.
//!
//! The runtime parts exist only for `riscv64` bare metal (`target_os = "none"`); on other
//! targets the crate is just its portable logic ([`Args`], [`ChunkWriter`]), which is what its
//! host unit tests cover.
//!
//! Not implemented yet: activations and user-level threads, a heap, events and IO channels,
//! and an x86_64 port.

#![no_std]

#[cfg(test)]
extern crate std;

mod args;
mod print;

#[cfg(all(target_os = "none", not(target_arch = "riscv64")))]
compile_error!("libtessera's runtime supports only riscv64 so far");

#[cfg(all(target_arch = "riscv64", target_os = "none"))]
mod entry;
#[cfg(all(target_arch = "riscv64", target_os = "none"))]
mod panic;
#[cfg(all(target_arch = "riscv64", target_os = "none"))]
pub mod syscall;

pub use abi::{Rights, SysError};
pub use args::{Args, ArgsError};
#[cfg(all(target_arch = "riscv64", target_os = "none"))]
pub use print::_print;
pub use print::{BUFFER_SIZE, ChunkWriter};
#[cfg(all(target_arch = "riscv64", target_os = "none"))]
pub use syscall::{
    console_write, exit, null, stretch_create, stretch_destroy, stretch_rights, time_ns, yield_now,
};

/// Exit code of a domain whose code panicked.
pub const EXIT_PANIC: i32 = 101;
/// Exit code of a domain started with a malformed argument block.
pub const EXIT_BAD_ARGS: i32 = 102;

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
