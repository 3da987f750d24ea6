//! The program entry: the Rust `start` that the architecture's `_start` (assembly, in
//! `arch`) calls, which records the control block, validates the argument block, runs
//! the app's `main` (registered with [`main!`](crate::main!)) and exits.
//!
//! `unsafe` here: turning the kernel's argument block address and length into a slice, handing
//! the control block's address to the control-block module, and the call into the app's
//! `__tessera_main`.

use crate::{Args, EXIT_BAD_ARGS, EXIT_NO_CONTROL_BLOCK, Env, control_block, exit, println};

unsafe extern "Rust" {
    /// The app's `main`, defined by the [`main!`](crate::main!) macro in the app crate.
    fn __tessera_main(env: Env) -> i32;
}

/// The Rust entry, called once by `_start` with the kernel's four entry arguments
/// (`abi::ENTRY_ARGUMENTS`): the domain id, the argument block's address and length, the
/// control block's address.
pub(crate) extern "C" fn start(
    domain_id: usize,
    args_ptr: *const u8,
    args_len: usize,
    dcb: usize,
) -> ! {
    if !control_block::plausible(dcb) {
        println!("tessera: control block address {dcb:#x} is not a user page");
        exit(EXIT_NO_CONTROL_BLOCK)
    }
    // SAFETY: `dcb` is the kernel's fourth entry argument, the control block's address (entry
    // contract), and this is the only call of `set`.
    unsafe { control_block::set(dcb) };
    let plausible = args_len <= isize::MAX as usize
        && !args_ptr.is_null()
        && (args_ptr as usize).checked_add(args_len).is_some();
    let block: &'static [u8] = if args_len == 0 {
        &[]
    } else if plausible {
        // SAFETY: the entry contract (crate documentation): the kernel passes a block of
        // `args_len` readable bytes at `args_ptr` that stays mapped and unchanged for the
        // domain's lifetime, above the initial stack pointer so the stack never overwrites
        // it. The length and address checks above cover `from_raw_parts`'s size rules.
        unsafe { core::slice::from_raw_parts(args_ptr, args_len) }
    } else {
        println!("tessera: argument block at {args_ptr:p} of {args_len} bytes is not addressable");
        exit(EXIT_BAD_ARGS)
    };
    let args = match Args::parse(block) {
        Ok(args) => args,
        Err(e) => {
            println!("tessera: malformed argument block: {e}");
            exit(EXIT_BAD_ARGS)
        }
    };
    // SAFETY: `__tessera_main` is defined only by `tessera::main!`, with exactly this
    // signature (the macro checks the app's function against `fn(Env) -> i32`); an app without
    // the macro fails to link.
    let code = unsafe { __tessera_main(Env { domain_id, args }) };
    exit(code)
}
