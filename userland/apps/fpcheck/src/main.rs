//! `fpcheck`: checks that the floating-point registers survive switches to other domains.
//!
//! Usage: `fpcheck [--rounds N]` (default 200). Each round loads every floating-point register
//! (RISC-V's 32 `f` registers; x86_64's 16 `xmm` registers, two words each) with 32 words
//! unique to this domain and round, yields to the other domains (in the same assembly block,
//! so nothing in between can touch them), stores them again and compares. It also keeps
//! a running floating-point sum across yields. Prints `fpcheck: N rounds, M mismatches, sum S`
//! and exits with 1 if anything differed.

#![no_std]
#![no_main]

mod arch;

use tessera::{Env, println};

tessera::main!(main);

fn main(env: Env) -> i32 {
    let mut rounds: u64 = 200;
    let mut args = env.args;
    while let Some(arg) = args.next() {
        match (arg, args.next().map(str::parse)) {
            ("--rounds", Some(Ok(n))) => rounds = n,
            _ => {
                println!("fpcheck: usage: fpcheck [--rounds N]");
                return 2;
            }
        }
    }
    let mut mismatches = 0u64;
    let mut sum = 0.0f64;
    let seed = (env.domain_id as u64 + 1) << 40;
    for round in 0..rounds {
        let mut values = [0u64; 32];
        for (i, v) in values.iter_mut().enumerate() {
            *v = f64::to_bits((seed + round * 64 + i as u64) as f64 + 0.5);
        }
        let back = arch::load_yield_store(&values);
        mismatches += values.iter().zip(&back).filter(|(a, b)| a != b).count() as u64;
        sum += 1.0 / ((round + 1) as f64 * (round + 1) as f64);
    }
    // The sum of 1/k^2 for k = 1..=200 is 1.6399465785675...; print it to 6 places.
    let micro = (sum * 1e6) as u64;
    println!(
        "fpcheck: {} rounds, {} mismatches, sum {}.{:06}",
        rounds,
        mismatches,
        micro / 1_000_000,
        micro % 1_000_000
    );
    i32::from(mismatches != 0)
}
