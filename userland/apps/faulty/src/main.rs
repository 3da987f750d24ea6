//! `faulty`: misbehaves on purpose, so tests can check that the kernel contains a bad domain.
//!
//! Usage: `faulty --kind KIND [--target 0xADDR]`. It first prints `faulty: will <what>`, then:
//! - `illegal`: executes an illegal instruction (`unimp` on RISC-V, `ud2` on x86_64);
//! - `jump`: jumps to ADDR (meant: another domain's code);
//! - `write`: writes a word to ADDR (meant: another domain's stretch);
//! - `read`: reads a word from ADDR;
//! - `guard`: recurses with 4 KiB frames until it runs off its stack into the guard page;
//! - `kernel`: reads a kernel address (its image: `0xffffffffc0200000` on RISC-V,
//!   `0xffffffff80100000` on x86_64);
//! - `panic`: panics (libtessera's handler prints the message and exits with 101);
//! - `ok`: exits with 0.
//!
//! If the misbehaviour does not end the domain it prints `faulty: survived <kind>` and exits
//! with 1. Bad arguments exit with 2. The unsafe code is all in `arch`, with a module per
//! architecture.
//!
//! Not implemented: faults inside the domain's own fault handling (activations come later).

#![no_std]
#![no_main]

mod arch;

use core::fmt;
use core::hint::black_box;

use arch::KERNEL_ADDRESS;
use tessera::{Env, println};

tessera::main!(main);

fn main(env: Env) -> i32 {
    let mut kind = None;
    let mut target = None;
    let mut args = env.args;
    while let Some(arg) = args.next() {
        match (arg, args.next()) {
            ("--kind", Some(k)) => kind = Some(k),
            ("--target", Some(t)) => match parse_hex(t) {
                Some(addr) => target = Some(addr),
                None => return usage(format_args!("bad address `{t}` (want 0x and hex digits)")),
            },
            (arg, _) => return usage(format_args!("unexpected argument `{arg}`")),
        }
    }
    let Some(kind) = kind else { return usage(format_args!("--kind is missing")) };
    let needs_target = |what: &str| -> Result<usize, i32> {
        target.ok_or_else(|| usage(format_args!("--kind {what} needs --target 0xADDR")))
    };
    match kind {
        "ok" => {
            println!("faulty: will exit cleanly");
            return 0;
        }
        "illegal" => {
            println!("faulty: will execute an illegal instruction");
            arch::illegal_instruction();
        }
        "jump" => {
            let addr = match needs_target(kind) {
                Ok(a) => a,
                Err(code) => return code,
            };
            println!("faulty: will jump to {addr:#x}");
            arch::jump(addr);
        }
        "write" => {
            let addr = match needs_target(kind) {
                Ok(a) => a,
                Err(code) => return code,
            };
            println!("faulty: will write to {addr:#x}");
            arch::write(addr);
        }
        "read" => {
            let addr = match needs_target(kind) {
                Ok(a) => a,
                Err(code) => return code,
            };
            println!("faulty: will read from {addr:#x}");
            let value = arch::read(addr);
            println!("faulty: read {value:#x}");
        }
        "guard" => {
            let sp = arch::stack_pointer();
            println!("faulty: will overflow the stack from sp {sp:#x} into its guard page");
            let sum = recurse(0);
            println!("faulty: recursion returned {sum}");
        }
        "kernel" => {
            println!("faulty: will read the kernel address {KERNEL_ADDRESS:#x}");
            let value = arch::read(KERNEL_ADDRESS);
            println!("faulty: read {value:#x}");
        }
        "panic" => {
            println!("faulty: will panic");
            panic!("deliberate panic (--kind panic)");
        }
        other => return usage(format_args!("unknown kind `{other}`")),
    }
    println!("faulty: survived {kind}, which should have faulted");
    1
}

/// Parses `0x` followed by hexadecimal digits.
fn parse_hex(text: &str) -> Option<usize> {
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"))?;
    usize::from_str_radix(digits, 16).ok()
}

/// Prints why the arguments are wrong and the usage; returns the exit code for it.
fn usage(why: fmt::Arguments<'_>) -> i32 {
    println!("faulty: {why}");
    println!(
        "usage: faulty --kind illegal|jump|write|read|guard|kernel|panic|ok [--target 0xADDR]"
    );
    2
}

/// Recurses with a 4 KiB frame per level until the stack runs into its guard page (the depth
/// limit is never reached; it only keeps the recursion from being unconditional).
#[inline(never)]
pub fn recurse(depth: u64) -> u64 {
    let mut frame = [0u8; 4096];
    // The compiler must assume the frame is written and read, so every level stores into it.
    black_box(&mut frame);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1).wrapping_add(u64::from(frame[(depth % 4096) as usize]))
}
