//! `stretchstorm`: address space as a contracted resource, from the domains' side.
//!
//! Usage:
//!
//! - `stretchstorm --cycles N --bytes B [--managed] [--touch]`: creates a stretch of `B`
//!   bytes and destroys it again, `N` times: a managed stretch (`stretch_create_managed`) with
//!   `--managed`, otherwise a nailed one (`stretch_create`). It prints
//!   `stretchstorm: cycles=N failed=F first_error=NAME first_failed_cycle=C distinct_bases=D stale=S start_ns=T0 end_ns=T1`
//!   (`first_error` and `first_failed_cycle` are `none` when nothing failed; after a failed
//!   call it goes on with the next cycle) and exits 0 only if `F` = 0 and `S` = 0.
//!   `distinct_bases` counts the different base addresses among the first 64 cycles: a kernel
//!   that reuses the ranges of destroyed stretches hands out few, one that never does, 64.
//!   With `--touch` (managed only) it also maps one of two frames of its own at the first page
//!   of each new stretch, alternately, reads it and writes the cycle's stamp: the page must
//!   read what that frame was last given, never the other frame's stamp, which only a
//!   translation left over from the previous cycle's stretch (a range reused while a TLB still
//!   reached it) could show; `S` counts such reads.
//! - `stretchstorm --exhaust --bytes B [--hold MS]`: creates managed stretches of `B` bytes
//!   and keeps them until a call fails, then prints
//!   `stretchstorm: created=C error=NAME at_ns=T`, keeps them `MS` more milliseconds (default
//!   0) while its neighbours go on, and exits 0 if the failure was `NoAddressSpace`, 1
//!   otherwise.
//! - `stretchstorm --neighbour --every MS --for MS2 [--while-alive ID]`: every `MS`
//!   milliseconds (sleeping in between), for `MS2` milliseconds, creates a 64 KiB nailed
//!   stretch and a 1 MiB managed one and destroys both. With `--while-alive` it stops sooner,
//!   after the first round that finds domain `ID` dead (so its rounds cover that domain's whole
//!   life, however long it is): it asks with `event_send(ID, usize::MAX)`, which signals
//!   nothing (there is no such endpoint) and fails with `NotFound` only once no live domain
//!   has that id. It prints
//!   `stretchstorm: neighbour attempts=A failed=F rounds=R first_error=NAME first_ns=T0 last_ns=T1 stopped=WHY`
//!   (`A` counts the calls that create a stretch, two a round; `F` the create and destroy
//!   calls that failed; `T0` and `T1` when its first and last round started, by the kernel's
//!   clock; `WHY` is `time` or `dead`) and exits 0 only if `F` = 0.
//!
//! Times are the kernel's clock (`time_ns`), the same in every domain, so the host can lay the
//! neighbour's rounds beside the storm's cycles.

#![no_std]
#![no_main]

use tessera::syscall::{frame_alloc, map, stretch_create_managed};
use tessera::{
    Env, PAGE_SIZE, Rights, SysError, event_send, println, stretch_create, stretch_destroy,
};

tessera::main!(main);

/// What the neighbour's nailed stretch holds (64 KiB).
const NEIGHBOUR_NAILED: usize = 64 * 1024;
/// What the neighbour's managed stretch spans (1 MiB).
const NEIGHBOUR_MANAGED: usize = 1024 * 1024;
/// How many first cycles' bases are kept to count the distinct ones.
const BASES_KEPT: usize = 64;

enum Mode {
    Cycles { cycles: u64, bytes: usize, managed: bool, touch: bool },
    Exhaust { bytes: usize, hold_ms: u64 },
    Neighbour { every_ms: u64, for_ms: u64, while_alive: Option<usize> },
}

fn usage() -> i32 {
    println!(
        "stretchstorm: usage: stretchstorm --cycles N --bytes B [--managed] [--touch] | --exhaust --bytes B [--hold MS] | --neighbour --every MS --for MS [--while-alive ID]"
    );
    2
}

fn options(env: Env) -> Option<Mode> {
    let mut args = env.args;
    let (mut cycles, mut bytes, mut every, mut for_ms, mut hold) = (None, None, None, None, 0);
    let (mut managed, mut touch, mut exhaust, mut neighbour) = (false, false, false, false);
    let mut while_alive = None;
    while let Some(arg) = args.next() {
        match arg {
            "--while-alive" => while_alive = Some(args.next()?.parse().ok()?),
            "--managed" => managed = true,
            "--touch" => touch = true,
            "--exhaust" => exhaust = true,
            "--neighbour" => neighbour = true,
            _ => {
                let n: u64 = args.next()?.parse().ok()?;
                match arg {
                    "--cycles" => cycles = Some(n),
                    "--bytes" => bytes = Some(usize::try_from(n).ok().filter(|&b| b > 0)?),
                    "--every" => every = Some(n),
                    "--for" => for_ms = Some(n),
                    "--hold" => hold = n,
                    _ => return None,
                }
            }
        }
    }
    match (cycles, exhaust, neighbour) {
        _ if while_alive.is_some() && !neighbour => None,
        (Some(cycles), false, false) if every.is_none() && for_ms.is_none() => {
            (managed || !touch).then_some(Mode::Cycles { cycles, bytes: bytes?, managed, touch })
        }
        (None, true, false) if !touch && every.is_none() && for_ms.is_none() => {
            Some(Mode::Exhaust { bytes: bytes?, hold_ms: hold })
        }
        (None, false, true) if bytes.is_none() && !managed && !touch => {
            let every_ms = every.filter(|&e| e > 0)?;
            Some(Mode::Neighbour { every_ms, for_ms: for_ms?, while_alive })
        }
        _ => None,
    }
}

fn main(env: Env) -> i32 {
    match options(env) {
        Some(Mode::Cycles { cycles, bytes, managed, touch }) => {
            storm(cycles, bytes, managed, touch)
        }
        Some(Mode::Exhaust { bytes, hold_ms }) => exhaust(bytes, hold_ms),
        Some(Mode::Neighbour { every_ms, for_ms, while_alive }) => {
            neighbour(every_ms, for_ms, while_alive)
        }
        None => usage(),
    }
}

fn rw() -> Rights {
    Rights::READ.union(Rights::WRITE)
}

fn name(e: Option<SysError>) -> &'static str {
    e.map_or("none", SysError::name)
}

/// Two frames of the domain's own, mapped in turn at the first page of each new stretch.
struct Touch {
    frames: [usize; 2],
    /// The stamp each frame was last given (0: none yet; frames come zero-filled).
    stamps: [u64; 2],
    stale: u64,
}

impl Touch {
    fn new() -> Result<Touch, SysError> {
        let guaranteed = abi::frame_kind::GUARANTEED;
        Ok(Touch {
            frames: [frame_alloc(guaranteed)?, frame_alloc(guaranteed)?],
            stamps: [0; 2],
            stale: 0,
        })
    }

    /// Maps frame `cycle % 2` at `base`, checks what it reads and stamps it with `cycle + 1`.
    fn visit(&mut self, base: usize, cycle: u64) -> Result<(), SysError> {
        let i = (cycle % 2) as usize;
        map(base, self.frames[i], rw())?;
        let word = base as *mut u64;
        // SAFETY: `base` is the first page of a managed stretch of this domain, read-write,
        // and frame `i` (the domain's own) was just mapped there; nothing else refers to it.
        let seen = unsafe { word.read_volatile() };
        if seen != self.stamps[i] {
            if self.stale == 0 {
                println!(
                    "stretchstorm: cycle {} at {:#x}: read {:#x}, the frame holds {:#x} (the other frame holds {:#x})",
                    cycle,
                    base,
                    seen,
                    self.stamps[i],
                    self.stamps[1 - i]
                );
            }
            self.stale += 1;
        }
        // SAFETY: as above.
        unsafe { word.write_volatile(cycle + 1) };
        self.stamps[i] = cycle + 1;
        Ok(())
    }
}

fn storm(cycles: u64, bytes: usize, managed: bool, touch: bool) -> i32 {
    let mut touch = match touch.then(Touch::new).transpose() {
        Ok(t) => t,
        Err(e) => {
            println!("stretchstorm: no frames to touch with: {}", e.name());
            return 1;
        }
    };
    let start_ns = tessera::time_ns();
    let mut failed = 0u64;
    let mut first: Option<(u64, SysError)> = None;
    let mut bases = [0usize; BASES_KEPT];
    let mut kept = 0;
    for cycle in 0..cycles {
        let made =
            if managed { stretch_create_managed(bytes, rw()) } else { stretch_create(bytes, rw()) };
        let result = made.and_then(|base| {
            if kept < BASES_KEPT {
                bases[kept] = base;
                kept += 1;
            }
            let touched = touch.as_mut().map_or(Ok(()), |t| t.visit(base, cycle));
            let destroyed = stretch_destroy(base);
            touched.and(destroyed)
        });
        if let Err(e) = result {
            failed += 1;
            first.get_or_insert((cycle, e));
        }
    }
    let end_ns = tessera::time_ns();
    let bases = &mut bases[..kept];
    bases.sort_unstable();
    let distinct = bases.windows(2).filter(|w| w[0] != w[1]).count() + usize::from(kept > 0);
    let stale = touch.as_ref().map_or(0, |t| t.stale);
    let first_cycle = first.map(|(c, _)| c);
    println!(
        "stretchstorm: cycles={} failed={} first_error={} first_failed_cycle={} distinct_bases={} stale={} start_ns={} end_ns={}",
        cycles,
        failed,
        name(first.map(|(_, e)| e)),
        Maybe(first_cycle),
        distinct,
        stale,
        start_ns,
        end_ns
    );
    if failed == 0 && stale == 0 { 0 } else { 1 }
}

/// An optional number, printed as `none` when absent.
struct Maybe(Option<u64>);

impl core::fmt::Display for Maybe {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("none"),
        }
    }
}

fn exhaust(bytes: usize, hold_ms: u64) -> i32 {
    let mut created = 0u64;
    let error = loop {
        match stretch_create_managed(bytes, rw()) {
            Ok(_) => created += 1,
            Err(e) => break e,
        }
    };
    println!(
        "stretchstorm: created={} error={} at_ns={}",
        created,
        error.name(),
        tessera::time_ns()
    );
    tessera::thread::sleep(hold_ms * 1_000_000);
    if error == SysError::NoAddressSpace { 0 } else { 1 }
}

fn neighbour(every_ms: u64, for_ms: u64, while_alive: Option<usize>) -> i32 {
    // No domain has an endpoint usize::MAX: the call signals nothing, and says `NotFound` once
    // no live domain has the id.
    let dead = |id: usize| event_send(id, usize::MAX) == Err(SysError::NotFound);
    let start = tessera::time_ns();
    let end = start.saturating_add(for_ms * 1_000_000);
    let (mut attempts, mut failed, mut rounds) = (0u64, 0u64, 0u64);
    let mut first_error = None;
    let (mut first_ns, mut last_ns) = (None, 0);
    let mut next = start;
    let stopped = loop {
        let now = tessera::time_ns();
        if now >= end {
            break "time";
        }
        if now < next {
            tessera::thread::sleep(next - now);
            continue;
        }
        // Asked before the round, so that a round is made after the domain is gone.
        let gone = while_alive.is_some_and(dead);
        first_ns.get_or_insert(now);
        last_ns = now;
        rounds += 1;
        let mut note = |r: Result<(), SysError>| {
            if let Err(e) = r {
                failed += 1;
                first_error.get_or_insert(e);
            }
        };
        attempts += 1;
        note(stretch_create(NEIGHBOUR_NAILED, rw()).and_then(stretch_destroy));
        attempts += 1;
        note(stretch_create_managed(NEIGHBOUR_MANAGED, rw()).and_then(stretch_destroy));
        if gone {
            break "dead";
        }
        next = next.saturating_add(every_ms * 1_000_000).max(now);
    };
    println!(
        "stretchstorm: neighbour attempts={} failed={} rounds={} first_error={} first_ns={} last_ns={} stopped={}",
        attempts,
        failed,
        rounds,
        name(first_error),
        Maybe(first_ns),
        last_ns,
        stopped
    );
    if failed == 0 { 0 } else { 1 }
}

// The neighbour's stretches are whole pages.
const _: () = assert!(NEIGHBOUR_NAILED.is_multiple_of(PAGE_SIZE));
const _: () = assert!(NEIGHBOUR_MANAGED.is_multiple_of(PAGE_SIZE));
