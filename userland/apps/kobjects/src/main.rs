//! `kobjects`: makes one kind of kernel object until the kernel refuses, to show that what a
//! domain makes the kernel hold is charged to it.
//!
//! Usage: `kobjects --kind KIND [--hold MS]`, where `KIND` is
//! - `stretch`: one-page nailed stretches (`stretch_create`), each a stretch record and a frame;
//! - `managed`: 64 KiB managed stretches (`stretch_create_managed`), each a stretch record with
//!   a word per page, and page tables;
//! - `frame`: guaranteed loose frames (`frame_alloc`), each a frame and its record;
//! - `optimistic`: optimistic loose frames, each a frame and its record;
//! - `timer`: timer endpoints (`timer_alloc`), each an endpoint record.
//!
//! It makes them until a call fails, prints `kobjects: kind=KIND made=N error=NAME`, keeps them
//! `MS` milliseconds more (default 0) and exits holding them (the kernel takes them apart). It
//! exits 0 if the failure was `NoMemory` (the contract or the kernel's share for the domain is
//! used up), 1 otherwise.

#![no_std]
#![no_main]

use tessera::{Env, PAGE_SIZE, Rights, SysError, println, syscall, thread};

tessera::main!(main);

/// Gives up after this many objects (a kernel that never says no).
const MAX_OBJECTS: usize = 1 << 20;

fn main(env: Env) -> i32 {
    let mut args = env.args;
    let (mut kind, mut hold) = (None, 0u64);
    while let Some(arg) = args.next() {
        match (arg, args.next()) {
            ("--kind", Some(k)) => kind = Some(k),
            ("--hold", Some(ms)) => match ms.parse() {
                Ok(ms) => hold = ms,
                Err(_) => return usage(),
            },
            _ => return usage(),
        }
    }
    let rw = Rights::READ.union(Rights::WRITE);
    let make: fn(Rights) -> Result<usize, SysError> = match kind {
        Some("stretch") => |rw| tessera::stretch_create(PAGE_SIZE, rw),
        Some("managed") => |rw| syscall::stretch_create_managed(64 << 10, rw),
        Some("frame") => |_| syscall::frame_alloc(abi::frame_kind::GUARANTEED),
        Some("optimistic") => |_| syscall::frame_alloc(abi::frame_kind::OPTIMISTIC),
        Some("timer") => |_| syscall::timer_alloc(),
        _ => return usage(),
    };
    let mut made = 0;
    let error = loop {
        if made == MAX_OBJECTS {
            break None;
        }
        match make(rw) {
            Ok(_) => made += 1,
            Err(e) => break Some(e),
        }
    };
    let name = error.map_or("none", |e| e.name());
    println!("kobjects: kind={} made={} error={}", kind.unwrap_or(""), made, name);
    thread::sleep(hold * 1_000_000);
    if error == Some(SysError::NoMemory) { 0 } else { 1 }
}

fn usage() -> i32 {
    println!("kobjects: usage: kobjects --kind stretch|managed|frame|optimistic|timer [--hold MS]");
    2
}
