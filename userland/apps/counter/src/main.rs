//! `counter`: shows that each domain instance has its own copy of the program's statics.
//!
//! Usage: `counter [--rounds N] [--name NAME]` (default 5 rounds, named by domain id). It first
//! checks that its initialized data arrived intact (a read-only table, a writable static with a
//! non-zero initial value, and a pointer that needed relocation), printing
//! `counter <name>: data ok, table sum <s>`, or exits with 1. Then, each round, it increments a
//! private `AtomicU64` (zero-initialized, so in `.bss`), prints
//! `counter <name>: round <i>, static at 0x<address>, value <v>` and yields. Two instances
//! print different addresses and each counts 1..=N on its own. Exits with 0; bad arguments
//! exit with 2.
//!
//! Not implemented: nothing planned; this is a demo and a loader test.

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use core::fmt;
use core::hint::black_box;
use core::sync::atomic::{AtomicU64, Ordering};

use tessera::{Env, println, yield_now};

tessera::main!(main);

/// Entries of the read-only table.
const TABLE_LEN: usize = 64;

/// Read-only initialized data (`.rodata`): `TABLE[i] = 7 * i + 3` (mod 256).
static TABLE: [u8; TABLE_LEN] = {
    let mut t = [0u8; TABLE_LEN];
    let mut i = 0;
    while i < TABLE_LEN {
        t[i] = (7 * i + 3) as u8;
        i += 1;
    }
    t
};

/// A pointer stored in the image: correct only if the loader applied the relocation.
static TABLE_REF: &[u8; TABLE_LEN] = &TABLE;

/// Writable initialized data (`.data`).
static GENERATION: AtomicU64 = AtomicU64::new(0x7e55_e7a0_c0ff_ee00);

/// The private counter: zero-initialized, so it lives in `.bss`.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// How the instance names itself in its output.
enum Label {
    Name(&'static str),
    Id(usize),
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Label::Name(name) => f.write_str(name),
            Label::Id(id) => write!(f, "{id}"),
        }
    }
}

fn main(env: Env) -> i32 {
    let mut rounds: u32 = 5;
    let mut label = Label::Id(env.domain_id);
    let mut args = env.args;
    while let Some(arg) = args.next() {
        match (arg, args.next()) {
            ("--rounds", Some(n)) => match n.parse() {
                Ok(n) => rounds = n,
                Err(_) => return usage(arg, n),
            },
            ("--name", Some(name)) => label = Label::Name(name),
            (arg, value) => return usage(arg, value.unwrap_or("")),
        }
    }

    // Read through `black_box` so the compiler cannot fold the checks into constants.
    let table: &[u8; TABLE_LEN] = black_box(TABLE_REF);
    let expected: u32 = (0..TABLE_LEN).map(|i| u32::from((7 * i + 3) as u8)).sum();
    let sum: u32 = table.iter().map(|&b| u32::from(b)).sum();
    let generation = black_box(&GENERATION).load(Ordering::Relaxed);
    if !core::ptr::eq(table, &TABLE) || sum != expected || generation != 0x7e55_e7a0_c0ff_ee00 {
        println!(
            "counter {label}: bad data: table at {:p} (expected {:p}), sum {sum} (expected \
             {expected}), generation {generation:#x}",
            table, &TABLE
        );
        return 1;
    }
    GENERATION.store(generation + 1, Ordering::Relaxed);
    println!("counter {label}: data ok, table sum {sum}");

    let at = &COUNTER as *const AtomicU64 as usize;
    for round in 1..=rounds {
        let value = COUNTER.fetch_add(1, Ordering::Relaxed) + 1;
        println!("counter {label}: round {round}, static at {at:#x}, value {value}");
        yield_now();
    }
    0
}

/// Reports a bad argument and returns the exit code for it.
fn usage(arg: &str, value: &str) -> i32 {
    println!("counter: bad argument `{arg} {value}`; usage: counter [--rounds N] [--name NAME]");
    2
}
