//! `hello`: the smallest Tessera app. It prints `hello from domain <id>`, then each argument
//! on its own line (`arg <i>: <text>`), and exits with 0.
//!
//! Nothing more to implement; it is the template for new apps.

// ANCHOR: app
#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use tessera::{Env, println};

tessera::main!(main);

fn main(env: Env) -> i32 {
    println!("hello from domain {}", env.domain_id);
    for (i, arg) in env.args.enumerate() {
        println!("arg {i}: {arg}");
    }
    0
}
// ANCHOR_END: app
