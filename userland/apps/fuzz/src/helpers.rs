//! The helper modes, each run in a domain of its own next to the fuzzer: `--block-once` makes
//! the one valid `block` the fuzzer itself cannot make, `--fill-then-wait` is a domain whose
//! guarantee is full, for the fuzzer's `stretch_rights` to be refused with `NoMemory`, and
//! `--arm-timer-then-exit` dies leaving a timer armed far ahead, which must not hold off the
//! wake-up of a `--block-once` domain.

use abi::{PAGE_SIZE, Rights, SysError, frame_kind};
use tessera::{println, syscall};

use crate::spec;

/// How long `--fill-then-wait` blocks at a time (it yields in between).
const NAP_NS: u64 = 5_000_000;

/// The name of a result, as the fuzzer prints outcomes.
fn name(r: Result<usize, SysError>) -> &'static str {
    spec::outcome_name(spec::outcome(r))
}

/// `--block-once`: one `block(u64::MAX)`. It returns `WouldDeadlock` once every other live
/// domain is blocked without a deadline or gone (at the end of the run: the fuzzer never
/// blocks, the `--fill-then-wait` domain only with deadlines, and both exit). Exits 0 if it
/// did, 1 otherwise.
pub fn block_once() -> i32 {
    let r = tessera::block(u64::MAX);
    println!("fuzz: block -> {}", name(r.map(|()| 0)));
    if r == Err(SysError::WouldDeadlock) { 0 } else { 1 }
}

/// `--arm-timer-then-exit S`: arms a timer endpoint `S` seconds ahead, prints
/// `fuzz: timer armed S s ahead`, and exits 0 with it still armed (1 if a call failed).
pub fn arm_timer_then_exit(seconds: u64) -> i32 {
    let deadline = tessera::time_ns().saturating_add(seconds.saturating_mul(1_000_000_000));
    let armed = syscall::timer_alloc().and_then(|ep| syscall::timer_set(ep, deadline));
    match armed {
        Ok(()) => {
            println!("fuzz: timer armed {seconds} s ahead");
            0
        }
        Err(e) => {
            println!("fuzz: arming a timer -> {}", name(Err(e)));
            1
        }
    }
}

/// `--fill-then-wait MS`: fills its guarantee with one-page read-write stretches, prints
/// `fuzz: filled N pages`, then stays alive for `MS` milliseconds (yielding, and blocking only
/// with a deadline), so that the fuzzer's grants to it fail with `NoMemory`. Whenever it wakes
/// it fills up again, in case page tables of a grant made before it was full were freed since.
/// Exits 0, or 1 if a call failed in a way it did not expect or it could not leave its
/// guarantee full.
pub fn fill_then_wait(me: usize, ms: u64) -> i32 {
    let start = tessera::time_ns();
    let mut f = Filler { me, pages: 0, first: None, topped: 0 };
    if f.fill().is_err() {
        return 1;
    }
    println!("fuzz: filled {} pages", f.pages);
    if f.topped > 0 {
        println!("fuzz: took {} guaranteed frames to fill the last room", f.topped);
    }
    let filled = f.pages;

    let end = start.saturating_add(ms.saturating_mul(1_000_000));
    loop {
        let now = tessera::time_ns();
        if now >= end {
            break;
        }
        tessera::yield_now();
        if let Err(e) = tessera::block(now.saturating_add(NAP_NS).min(end)) {
            println!("fuzz: block with a deadline -> {}", name(Err(e)));
            return 1;
        }
        if f.fill().is_err() {
            return 1;
        }
    }
    println!("fuzz: waited {} ms, then held {} pages ({} at first)", ms, f.pages, filled);
    0
}

/// The stretches and loose frames of a `--fill-then-wait` domain.
struct Filler {
    /// Its domain id.
    me: usize,
    /// How many one-page stretches it holds.
    pages: usize,
    /// Its first stretch, which it asks for its own rights on.
    first: Option<usize>,
    /// How many guaranteed loose frames it took to top the guarantee up.
    topped: usize,
}

impl Filler {
    /// Creates pages until not even the three page-table frames a grant may need fit its
    /// guarantee. Prints what went wrong if it cannot.
    ///
    /// `stretch_create` of a page needs room for the page plus three page-table frames, while
    /// `stretch_rights` for the domain needs room for the three only: when the last page
    /// created fitted in page tables the domain already had, up to three frames of room may be
    /// left, and a grant would still succeed. The domain tells by asking for its own rights on
    /// its first stretch again (the same check, and nothing changes if it passes); while it
    /// passes, it takes one more guaranteed loose frame (`frame_alloc`, which needs room for
    /// that frame only).
    fn fill(&mut self) -> Result<(), ()> {
        let rw = Rights::READ.union(Rights::WRITE);
        loop {
            match tessera::stretch_create(PAGE_SIZE, rw) {
                Ok(base) => {
                    self.pages += 1;
                    self.first = self.first.or(Some(base));
                }
                Err(SysError::NoMemory) => break,
                Err(e) => {
                    println!("fuzz: filling: stretch_create -> {}", name(Err(e)));
                    return Err(());
                }
            }
        }
        let Some(probe) = self.first else {
            println!("fuzz: filling: not even one page fits the guarantee");
            return Err(());
        };
        for _ in 0..=3 {
            match tessera::stretch_rights(probe, self.me, rw) {
                Err(SysError::NoMemory) => return Ok(()),
                Ok(()) => {}
                Err(e) => {
                    println!("fuzz: filling: stretch_rights -> {}", name(Err(e)));
                    return Err(());
                }
            }
            if let Err(e) = syscall::frame_alloc(frame_kind::GUARANTEED) {
                println!("fuzz: filling: frame_alloc -> {}", name(Err(e)));
                return Err(());
            }
            self.topped += 1;
        }
        println!("fuzz: filling: could not leave the guarantee full");
        Err(())
    }
}
