//! `fuzz`: a seeded system-call fuzzer. It checks that every (call, error) pair of the table in
//! `docs/syscalls.md` is reachable, that the kernel returns no error the table does not list,
//! and that it survives the calls itself.
//!
//! Usage: `fuzz [--seed S] [--calls-per N] [--domains D]` (defaults 1, 1000 and 4; numbers in
//! decimal or `0x` hex), or `fuzz --block-once`, `fuzz --fill-then-wait MS` or `fuzz --arm-timer-then-exit S`
//! (the helper modes below). It first yields once, so that every other domain gets to run;
//! then, with a xorshift64 generator seeded by `S`, it makes exactly `N` calls of every kind,
//! in a random interleaving: each call of `abi::Call::ALL` except `exit` and `block`, and
//! unknown call numbers (0, 11..=20, 999, `u64::MAX`, and numbers whose low 32 bits name a call, leaving out
//! whichever `abi::Call::from_number` knows). Arguments come from boundary pools (`pools`): 0,
//! 1, 7, 4095, 4096, 4097, `u32::MAX`, `u64::MAX`, `u64::MAX - 4095`, `i64::MIN`; kernel
//! addresses; the lower half below `abi::USER_BASE`; `abi::USER_END` and around it; the first
//! four image slots (other domains' images, the canary's among them); the fuzzer's own code,
//! data, stack, arguments, control block and channel; the stretches it created (their bases,
//! insides and ends); sizes around 1024, a page, the fuzzer's guarantee and 64 MiB, and
//! overflowing ones; rights 0..=0x20 and huge values; domain ids below `D + 2` (by default
//! 0..=5: the manifest's four domains and two ids no domain has) and huge ones (some truncate to small ids); endpoints
//! 0..=40 and huge ones. Registers a call does not read get values from any pool. The
//! self-paging calls draw from what the fuzzer holds (managed stretches it created, loose
//! frames it took), aiming at each documented error in turn, and their outcomes are checked
//! against what its records say they must be; `stretch_destroy` and `stretch_rights` also get
//! the bases of its managed stretches (destroying one unmaps its pages, whose frames stay the
//! fuzzer's; `stretch_rights` must refuse them). `map_batch` gets short batches of valid maps,
//! unmaps and protects drawn from those records, written to a buffer of the fuzzer's own, with
//! one entry (or the count, or the pointer) often spoilt to aim at an error; its outcome is
//! checked against the records entry by entry, in the kernel's order. `page_state` gets runs of
//! pages of those stretches, with its states written to a buffer of the fuzzer's own and one
//! argument often spoilt; the states it writes must match the records (mapped where a frame
//! is, and never dirty, since nothing writes those pages). Now and then a `map` is
//! prepared so that it needs a page table while the guarantee is full (`NoMemory`); see
//! `paging`.
//!
//! Output: per (call, outcome) pair observed, `fuzz: <call> <outcome> <count>`; then
//! `fuzz: undocumented <call> <outcome> <count>` for each outcome the table does not allow (an
//! error it does not list for the call, or success of an unknown number), `fuzz: missing
//! <call> <error>` for each listed pair never observed, `fuzz: not expected <call> <error>:
//! <why>` for the excluded pairs below, and finally `fuzz: N calls, M pairs expected, K
//! missing` and `fuzz: U undocumented, F failures`. The exit status is `K + U`, or 100 if
//! `F > 0`.
//!
//! The manifest (`tests/manifests/fuzz.toml`) gives the fuzzer an IO channel to the canary:
//! its endpoint there accepts events only from the canary (`event_send` `PermissionDenied`),
//! and the channel's stretch is one it owns but may not destroy (`stretch_destroy`
//! `PermissionDenied` after the canary, and with it the canary's image, is gone). Next to them
//! run two helper domains of this app.
//!
//! # Helper modes
//! - `--block-once`: one valid `block(u64::MAX)`, then `fuzz: block -> <outcome>`; exits 0 if
//!   the outcome is `WouldDeadlock`, else 1. The kernel returns it when every live domain is
//!   blocked without a deadline, which happens once the others have exited: none of them
//!   blocks without a deadline. It has no event endpoint, so nothing can wake it before.
//! - `--fill-then-wait MS`: creates one-page read-write stretches until `stretch_create`
//!   fails with `NoMemory`, making sure (by asking for its own rights again) that not even
//!   the three page-table frames a grant may need are left, prints `fuzz: filled N pages`,
//!   then stays alive for `MS` ms of guest time, yielding and blocking only with deadlines,
//!   and exits 0. Each time it wakes it fills up again, in case the page tables of a grant
//!   made to it before it was full have been freed since. The manifest gives it a small
//!   guarantee and `MS` well beyond the fuzzer's run; its id is among the fuzzed domain ids,
//!   so the fuzzer's grants to it on stretches the fuzzer created are refused with
//!   `NoMemory`.
//! - `--arm-timer-then-exit S`: arms a timer endpoint `S` seconds ahead and exits with it
//!   armed. Next to a `--block-once` domain, the kernel must still see at once that every live
//!   domain is blocked without a deadline: the dead domain's timer does not count.
//!
//! # Not hurting itself
//! Every call first passes `Own::harmless` (the gate in `raw_calls`), which admits only calls
//! that cannot take away the fuzzer's access to its image, stack or control block, nor move
//! its control flow, even if the kernel carried them out instead of refusing them; the
//! argument drawing rewrites what would not pass, keeping the error it aims at:
//! `stretch_destroy` of its own image, stack or control block becomes its channel or a foreign
//! address (the fuzzer never touches the channel's memory); `stretch_rights` for itself on its
//! own memory gets all four rights bits (which only add access; refused anyway for lack of
//! meta), and on stretches it created keeps the meta bit (so that it can destroy them at the
//! end); `activation_set` never names its own code (entry 0, removing the handler, is its one
//! valid form), `resume` never its own memory. `console_write` never prints fuzzed text: a
//! readable buffer of its own becomes one of bytes that are not UTF-8, a straddle over the end
//! of a stretch it created, length 0, or (at most 8 times) a run of dots.
//!
//! # `exit` and `block`
//! Neither takes an argument the kernel could refuse: a fuzzed `exit` would end the run and a
//! fuzzed `block` stop it, so the fuzzer never makes them; its one `exit` is the last thing it
//! does. Their valid forms are covered elsewhere: every QEMU test's domains exit, `block` is
//! exercised by the channel tests (`chanpipe`), and its `WouldDeadlock` by the one valid call
//! of the `--block-once` domain, which the QEMU test checks.
//!
//! # Pairs not expected to be observed
//! - `stretch_create` `NoAddressSpace`: the caller's own share of the stretch range (its
//!   `memory.address_space` quota, 1 GiB by default) has no room. Destroyed stretches give
//!   their ranges back, and the fuzzer's 2 MiB guarantee runs out long before 1 GiB of live
//!   stretches; it is printed if seen.
//! - `block` `WouldDeadlock`: the fuzzer never calls `block` (above); the `--block-once`
//!   domain observes it instead.
//! - `stretch_create_managed` `NoAddressSpace`: the same quota (a managed stretch takes at
//!   most 256 MiB of it, and its page tables and records must fit the guarantee first).
//!
//! `stretch_rights` `NoMemory` (the target's guarantee has no room for the page tables a
//! mapping may need) is expected: the `--fill-then-wait` domain is such a target.
//!
//! # Health
//! Every 128 calls the fuzzer checks a static word, a pattern on its stack, and the words it
//! wrote into its stretches. Each stretch it creates is checked right away: zero where it may
//! read, and a marker written where it may write reads back. Calls that succeed where they must
//! not (destroying or changing the rights of a stretch it did not create, invalid arguments
//! accepted, time going backwards) count as failures, and so does any such check. At the end it
//! destroys every stretch it created (each must succeed, then be `NotFound`), destroys its
//! managed stretches and frees its loose frames (each must succeed: destroying a managed
//! stretch leaves its frames unmapped), so the kernel's run summary shows all frames returned,
//! and prints the largest stretch it could create before and after the run.

#![no_std]
#![no_main]

mod held;
mod helpers;
mod own;
mod paging;
mod pools;
mod raw_calls;
mod spec;

use core::hint::black_box;
use core::sync::atomic::{AtomicU64, Ordering};

use abi::{Call, ChannelRole, PAGE_SIZE, Rights, STRETCH_BASE, SysError, USER_END};
use tessera::{Env, println};

use own::{Created, Own};
use pools::Rng;
use spec::{KINDS, OUTCOMES, UNKNOWN};

tessera::main!(main);

/// A word in `.data` whose value must never change.
static SENTINEL: AtomicU64 = AtomicU64::new(0x5eed_f00d_cafe_b0b0);
/// What valid `console_write`s print.
static DOTS: [u8; 16] = [b'.'; 16];
/// Bytes that are not UTF-8 in any non-empty stretch of them.
static NOT_UTF8: [u8; 64] = [0xff; 64];
/// How many `console_write`s may print dots.
const MAX_PRINTS: u32 = 8;
/// Calls between health checks.
const HEALTH_EVERY: u64 = 128;
/// How many failures are described (all are counted).
const MAX_REPORTS: u32 = 10;
/// One `map` in this many is prepared to need a page table while the guarantee is full.
const SQUEEZE_ONE_IN: usize = 40;

fn main(env: Env) -> i32 {
    let mut seed = 1u64;
    let mut calls_per = 1000u64;
    let mut domains = 4usize;
    let mut helper = None;
    // An address in the argument block, which lies at the top of the stack.
    let args_at = env.args.clone().next().map_or(0, |a| a.as_ptr() as usize);
    let mut args = env.args;
    while let Some(arg) = args.next() {
        if arg == "--block-once" {
            helper = Some(Helper::BlockOnce);
            continue;
        }
        let value = args.next();
        match (arg, value.and_then(number)) {
            ("--seed", Some(n)) => seed = n,
            ("--calls-per", Some(n)) if n > 0 => calls_per = n,
            ("--domains", Some(n)) if (1..=4096).contains(&n) => domains = n as usize,
            ("--fill-then-wait", Some(ms)) => helper = Some(Helper::FillThenWait(ms)),
            ("--arm-timer-then-exit", Some(s)) => helper = Some(Helper::ArmTimerThenExit(s)),
            _ => {
                println!(
                    "fuzz: bad argument `{} {}`; usage: fuzz [--seed S] [--calls-per N] [--domains D] | \
                     --block-once | --fill-then-wait MS | --arm-timer-then-exit S",
                    arg,
                    value.unwrap_or("")
                );
                return 2;
            }
        }
    }
    match helper {
        Some(Helper::BlockOnce) => return helpers::block_once(),
        Some(Helper::FillThenWait(ms)) => return helpers::fill_then_wait(env.domain_id, ms),
        Some(Helper::ArmTimerThenExit(s)) => return helpers::arm_timer_then_exit(s),
        None => {}
    }

    let stack_pattern = [seed ^ 0xa5a5_5a5a_0f0f_f0f0; 16];
    let dcb = tessera::dcb();
    let channel = dcb.channels.iter().find(|c| c.role != ChannelRole::None as u16);
    let mut own = Own::new(
        env.domain_id,
        [
            main as fn(Env) -> i32 as usize,
            DOTS.as_ptr() as usize,
            &SENTINEL as *const AtomicU64 as usize,
            stack_pattern.as_ptr() as usize,
            args_at,
        ],
        dcb as *const abi::Dcb as usize,
        channel.map(|c| c.base as usize),
    );
    own.domains = domains;
    let mut f = Fuzzer {
        rng: Rng::new(seed),
        own,
        counts: [[0; OUTCOMES]; KINDS],
        prints: 0,
        failures: 0,
        last_time: 0,
        batch: [abi::PageOp::default(); paging::BATCH_ROOM],
    };
    println!(
        "fuzz: seed {}, {} calls per kind, domain {}, channel {}",
        seed,
        calls_per,
        env.domain_id,
        if channel.is_some() { "yes" } else { "no" }
    );
    // Every other domain runs first: a `--fill-then-wait` domain starts filling its guarantee
    // before the fuzzer's first grant could map something into it.
    tessera::yield_now();
    let before = f.largest_stretch();

    let fuzzed = |k: &usize| !matches!(spec::kind_call(*k), Some(Call::Exit | Call::Block));
    let mut done = [0u64; KINDS];
    let mut calls = 0u64;
    loop {
        let mut open = [0usize; KINDS];
        let mut n = 0;
        for k in (0..KINDS).filter(fuzzed).filter(|&k| done[k] < calls_per) {
            open[n] = k;
            n += 1;
        }
        if n == 0 {
            break;
        }
        let k = open[f.rng.below(n)];
        done[k] += 1;
        calls += 1;
        f.step(k);
        if calls.is_multiple_of(HEALTH_EVERY) {
            f.health(&stack_pattern, seed);
        }
    }
    f.health(&stack_pattern, seed);
    f.clean_up();
    let after = f.largest_stretch();
    println!("fuzz: largest stretch {} pages before the run, {} after", before, after);
    f.report(calls)
}

/// What a domain started in a helper mode does instead of fuzzing.
enum Helper {
    BlockOnce,
    FillThenWait(u64),
    ArmTimerThenExit(u64),
}

/// `s` as a number, decimal or `0x` hex.
fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

struct Fuzzer {
    rng: Rng,
    own: Own,
    /// Per kind, per outcome: how often it was seen.
    counts: [[u64; OUTCOMES]; KINDS],
    /// `console_write`s that printed.
    prints: u32,
    failures: u32,
    /// The last `time` result.
    last_time: u64,
    /// The entries of the `map_batch` being made.
    batch: [abi::PageOp; paging::BATCH_ROOM],
}

impl Fuzzer {
    /// Records a failure: the kernel (or the fuzzer) did something it must not.
    fn fail(&mut self, what: &str, a: [usize; 6]) {
        self.failures += 1;
        if self.failures <= MAX_REPORTS {
            println!("fuzz: FAILED {} (arguments {:#x} {:#x} {:#x})", what, a[0], a[1], a[2]);
        }
    }

    /// One fuzzed call of kind `k`.
    fn step(&mut self, k: usize) {
        let mut squeeze = None;
        if spec::kind_call(k) == Some(Call::Map) && self.rng.one_in(SQUEEZE_ONE_IN) {
            match paging::squeeze(&mut self.own) {
                Ok(s) => squeeze = s,
                Err(what) => self.fail(what, [0; 6]),
            }
        }
        let (n, a) = match &squeeze {
            Some((a, _)) => (Call::Map as usize, *a),
            None => self.draw(k),
        };
        let Some(r) = raw_calls::call(&self.own, n, a) else {
            self.fail("the fuzzer drew a call its gate refused", a);
            return;
        };
        self.counts[k][spec::outcome(r)] += 1;
        if let Some(c) = spec::kind_call(k) {
            self.after(c, a, r);
        }
        if let Some((_, s)) = squeeze
            && let Err(what) = paging::release(&mut self.own, s)
        {
            self.fail(what, a);
        }
    }

    /// The number and arguments of a call of kind `k`.
    fn draw(&mut self, k: usize) -> (usize, [usize; 6]) {
        let (rng, own) = (&mut self.rng, &self.own);
        let mut a: [usize; 6] = core::array::from_fn(|_| pools::any(rng, own));
        let Some(call) = spec::kind_call(k) else {
            for x in &mut a {
                if own.may_be_own(*x) {
                    *x = pools::foreign(rng, own);
                }
            }
            return (pools::unknown_call(rng), a);
        };
        match call {
            Call::ConsoleWrite => {
                a[0] = pools::addr(rng, own);
                a[1] =
                    if rng.one_in(3) { rng.below(spec::CONSOLE_MAX + 2) } else { pools::size(rng) };
                self.tame_console(&mut a);
            }
            Call::Exit | Call::Block | Call::Yield | Call::Time | Call::Null | Call::TimerAlloc => {
            }
            Call::StretchCreateManaged
            | Call::FrameAlloc
            | Call::FrameFree
            | Call::Map
            | Call::Unmap
            | Call::Protect
            | Call::Remap => own.mem.draw(call, rng, own, &mut a),
            Call::MapBatch => own.mem.draw_batch(rng, own, &mut self.batch, &mut a),
            Call::PageState => own.mem.draw_state(rng, own, &mut a),
            Call::TimerSet => {
                a[0] = pools::endpoint(rng);
                a[1] = if rng.one_in(4) {
                    u64::MAX as usize
                } else {
                    tessera::time_ns() as usize + pools::endpoint(rng) * 1000
                };
            }
            Call::StretchCreate => {
                a[0] = pools::size(rng);
                a[1] = pools::rights(rng);
                if own.full() {
                    a[0] = 0;
                }
            }
            Call::DmaAlloc => a[0] = pools::size(rng),
            Call::DmaAddress => a[0] = pools::addr(rng, own),
            Call::IrqAck => a[0] = pools::endpoint(rng),
            Call::StretchDestroy => {
                a[0] = pools::base(rng, own);
                if !own.harmless(call as usize, a) {
                    a[0] = match own.channel {
                        Some(c) if rng.one_in(2) => c,
                        _ => pools::foreign(rng, own),
                    };
                }
            }
            Call::StretchRights => {
                a[0] = pools::base(rng, own);
                a[1] = pools::domain(rng, own);
                a[2] = pools::rights(rng);
                if own.may_be_me(a[1]) {
                    if own.find(a[0]).is_some() {
                        if a[2] <= Rights::ALL_BITS as usize {
                            a[2] |= Rights::META.0 as usize;
                        }
                    } else if own.may_be_own(a[0]) {
                        a[2] |= Rights::ALL_BITS as usize;
                    }
                }
            }
            Call::EventSend => {
                a[0] = pools::domain(rng, own);
                a[1] = pools::endpoint(rng);
            }
            Call::FrameLend => {
                a[0] = pools::addr(rng, own);
                a[1] = pools::domain(rng, own);
                a[2] = pools::endpoint(rng);
                a[3] = rng.below(3);
            }
            Call::LoanAddress => {
                a[1] = pools::domain(rng, own);
                a[2] = pools::size(rng);
            }
            Call::FrameReturn => {}
            Call::DomainInfo => {
                // Into memory that is not the fuzzer's: a record written over its own would
                // change what it tracks.
                a[0] = pools::addr(rng, own);
                a[1] = pools::size(rng);
                if own.may_be_own(a[0]) {
                    a[0] = pools::foreign(rng, own);
                }
            }
            Call::ActivationSet => {
                a[0] = if rng.one_in(4) { 0 } else { pools::addr(rng, own) };
                a[1] = pools::addr(rng, own);
                if a[0] != 0 && own.may_be_own(a[0]) {
                    a[0] = pools::foreign(rng, own) | (a[0] & 1);
                }
            }
            Call::Resume => {
                a[0] = pools::addr(rng, own);
                let low = a[0] & 7;
                while !own.harmless(call as usize, a) {
                    a[0] = pools::foreign(rng, own) | low;
                }
            }
        }
        (call as usize, a)
    }

    /// Keeps `console_write` from printing what it reads: a non-empty buffer that might be the
    /// fuzzer's own readable memory is replaced (the kernel refuses every other buffer).
    fn tame_console(&mut self, a: &mut [usize; 6]) {
        let (ptr, len) = (a[0], a[1]);
        if len == 0 || len > spec::CONSOLE_MAX || !self.own.may_be_own(ptr) {
            return;
        }
        let rng = &mut self.rng;
        let not_utf8 = |rng: &mut Rng, a: &mut [usize; 6]| {
            let off = rng.below(NOT_UTF8.len());
            a[0] = NOT_UTF8.as_ptr() as usize + off;
            a[1] = len.min(NOT_UTF8.len() - off);
        };
        match rng.below(4) {
            0 => not_utf8(rng, a),
            1 if self.prints < MAX_PRINTS => {
                self.prints += 1;
                a[0] = DOTS.as_ptr() as usize;
                a[1] = len.min(DOTS.len());
            }
            2 if len >= 2 && !self.own.created().is_empty() => {
                // Over the end of a stretch: the page after it is never mapped.
                let c = rng.pick(self.own.created());
                a[0] = c.base + c.pages * PAGE_SIZE - (1 + rng.below(len - 1));
            }
            2 => not_utf8(rng, a),
            _ => a[1] = 0,
        }
    }

    /// Bookkeeping and checks after call `c` with arguments `a` returned `r`.
    fn after(&mut self, c: Call, a: [usize; 6], r: Result<usize, SysError>) {
        match (c, r) {
            (Call::StretchCreate, Ok(base)) => {
                let valid_args = a[0] != 0 && a[0] <= spec::STRETCH_MAX && a[1] <= 0xf;
                let valid_base = base.is_multiple_of(PAGE_SIZE)
                    && (STRETCH_BASE..USER_END).contains(&base)
                    && self
                        .own
                        .created()
                        .iter()
                        .all(|s| base + a[0] <= s.base || s.base + s.pages * PAGE_SIZE <= base);
                if !valid_args || !valid_base {
                    self.fail("stretch_create succeeded where it must not", a);
                    return;
                }
                let fresh = Created {
                    base,
                    pages: a[0].div_ceil(PAGE_SIZE),
                    rights: a[1] as u8 | Rights::META.0,
                    marker: 0,
                };
                if !self.own.record(fresh) {
                    self.fail("more stretches than the fuzzer keeps track of", a);
                } else if !raw_calls::check_fresh(&mut self.own, base) {
                    self.fail("a new stretch is not zeroed, or not writable", a);
                }
            }
            (Call::StretchDestroy, Ok(_)) => {
                if self.own.find(a[0]).is_some() {
                    self.own.forget(a[0]);
                } else if self.own.mem.is_managed(a[0]) {
                    self.own.mem.destroyed(a[0]);
                } else {
                    self.fail("stretch_destroy of a stretch it did not create succeeded", a);
                }
            }
            (Call::StretchDestroy, Err(_))
                if self.own.find(a[0]).is_some() || self.own.mem.is_managed(a[0]) =>
            {
                self.fail("stretch_destroy of a stretch it created failed", a);
            }
            (Call::StretchRights, Ok(_)) if self.own.mem.is_managed(a[0]) => {
                self.fail("stretch_rights on a managed stretch succeeded", a);
            }
            (Call::StretchRights, Ok(_)) => {
                let me = self.own.id;
                let Some(s) = self.own.find_mut(a[0]) else {
                    self.fail("stretch_rights on a stretch it did not create succeeded", a);
                    return;
                };
                if a[2] > 0xf || a[1] > u32::MAX as usize {
                    self.fail("stretch_rights accepted invalid arguments", a);
                } else if a[1] == me {
                    s.rights = a[2] as u8;
                    if !raw_calls::probe(&self.own) {
                        self.fail("a stretch changed after stretch_rights", a);
                    }
                }
            }
            (Call::MapBatch, r) => {
                if let Err(what) = self.own.mem.after_batch(&self.batch, a, r) {
                    self.fail(what, a);
                }
            }
            (Call::PageState, r) => {
                if let Err(what) = self.own.mem.after_state(a, r) {
                    self.fail(what, a);
                }
            }
            (
                Call::StretchCreateManaged
                | Call::FrameAlloc
                | Call::FrameFree
                | Call::Map
                | Call::Unmap
                | Call::Protect
                | Call::Remap,
                r,
            ) => {
                if let Err(what) = self.own.mem.after(c, a, r) {
                    self.fail(what, a);
                }
            }
            // Not tracked: given back at once, so the fuzzer's own stretches stay as known.
            (Call::DmaAlloc, Ok(base)) if tessera::syscall::stretch_destroy(base).is_err() => {
                self.fail("a DMA stretch could not be destroyed", a);
            }
            (Call::Time, Ok(t)) => {
                if (t as u64) < self.last_time {
                    self.fail("time went backwards", a);
                }
                self.last_time = t as u64;
            }
            _ => {}
        }
    }

    /// Checks the static word, the stack pattern and the stretches' markers.
    fn health(&mut self, stack: &[u64; 16], seed: u64) {
        let z = [0; 6];
        if black_box(&SENTINEL).load(Ordering::Relaxed) != 0x5eed_f00d_cafe_b0b0 {
            self.fail("health: the static word changed", z);
        }
        if black_box(stack).iter().any(|&w| w != seed ^ 0xa5a5_5a5a_0f0f_f0f0) {
            self.fail("health: the stack pattern changed", z);
        }
        if !raw_calls::probe(&self.own) {
            self.fail("health: a stretch's marker changed", z);
        }
    }

    /// Destroys every stretch it created (each must go, and then be gone) and removes any
    /// activation handler.
    fn clean_up(&mut self) {
        let z = [0; 6];
        if raw_calls::call(&self.own, Call::ActivationSet as usize, z) != Some(Ok(0)) {
            self.fail("activation_set(0) to remove the handler failed", z);
        }
        let mut destroyed = 0;
        while let Some(c) = self.own.created().first().copied() {
            let a = [c.base, 0, 0, 0, 0, 0];
            let r = raw_calls::call(&self.own, Call::StretchDestroy as usize, a);
            // Asked twice while still recorded (the gate lets only recorded stretches through).
            let again = raw_calls::call(&self.own, Call::StretchDestroy as usize, a);
            self.own.forget(c.base);
            if r != Some(Ok(0)) {
                self.fail("clean-up: destroying a stretch it created failed", a);
                continue;
            }
            destroyed += 1;
            if again != Some(Err(SysError::NotFound)) {
                self.fail("clean-up: a destroyed stretch is still there", a);
            }
        }
        println!("fuzz: destroyed the {} stretches left", destroyed);
        self.give_back_paging();
    }

    /// Destroys its managed stretches and then frees its loose frames; each must succeed (the
    /// frames are all unmapped once the stretches are gone).
    fn give_back_paging(&mut self) {
        let (mut stretches, mut frames) = (0, 0);
        while let Some(m) = self.own.mem.managed().first().copied() {
            let a = [m.base, 0, 0, 0, 0, 0];
            let r = raw_calls::call(&self.own, Call::StretchDestroy as usize, a);
            self.own.mem.destroyed(m.base);
            if r != Some(Ok(0)) {
                self.fail("clean-up: destroying a managed stretch failed", a);
            }
            stretches += 1;
        }
        while let Some(f) = self.own.mem.frames().first().copied() {
            let a = [f.number, 0, 0, 0, 0, 0];
            if raw_calls::call(&self.own, Call::FrameFree as usize, a) != Some(Ok(0)) {
                self.fail("clean-up: freeing a loose frame failed", a);
            }
            self.own.mem.forget_frame(f.number);
            frames += 1;
        }
        println!("fuzz: gave back {} managed stretches and {} frames", stretches, frames);
    }

    /// The largest stretch it can create now, in pages (created and destroyed at once).
    fn largest_stretch(&mut self) -> usize {
        let (mut lo, mut hi) = (0, spec::STRETCH_MAX / PAGE_SIZE + 1);
        let rw = (Rights::READ.0 | Rights::WRITE.0) as usize;
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            let a = [mid * PAGE_SIZE, rw, 0, 0, 0, 0];
            match raw_calls::call(&self.own, Call::StretchCreate as usize, a) {
                Some(Ok(base)) => {
                    // Recorded for the moment, so that the gate lets it be destroyed.
                    let d = [base, 0, 0, 0, 0, 0];
                    let probe = Created { base, pages: mid, rights: rw as u8, marker: 0 };
                    let gone = self.own.record(probe)
                        && raw_calls::call(&self.own, Call::StretchDestroy as usize, d)
                            == Some(Ok(0));
                    self.own.forget(base);
                    if !gone {
                        self.fail("destroying a probe stretch failed", d);
                    }
                    lo = mid;
                }
                _ => hi = mid,
            }
        }
        lo
    }

    /// Prints the table of outcomes and the verdict; returns the exit status.
    fn report(&self, calls: u64) -> i32 {
        for k in 0..KINDS {
            for o in 0..OUTCOMES {
                let n = self.counts[k][o];
                if n > 0 {
                    println!("fuzz: {} {} {}", spec::kind_name(k), spec::outcome_name(o), n);
                }
            }
        }
        let mut undocumented = 0;
        for k in 0..KINDS {
            let call = spec::kind_call(k);
            for o in 0..OUTCOMES {
                let n = self.counts[k][o];
                let listed = match SysError::from_code(o) {
                    None => k != UNKNOWN,
                    Some(e) => spec::is_documented((call, e)),
                };
                if n > 0 && !listed {
                    undocumented += 1;
                    println!(
                        "fuzz: undocumented {} {} {}",
                        spec::kind_name(k),
                        spec::outcome_name(o),
                        n
                    );
                }
            }
        }
        let (mut expected, mut missing) = (0, 0);
        let driver = tessera::dcb().devices[0].kind != abi::device_kind::NONE;
        for &(call, e) in spec::DOCUMENTED {
            let k = call.map_or(UNKNOWN, spec::kind_of);
            let seen = self.counts[k][e as usize];
            if let Some(why) = spec::not_expected((call, e), driver) {
                println!(
                    "fuzz: not expected {} {}: {} (seen {})",
                    spec::kind_name(k),
                    spec::outcome_name(e as usize),
                    why,
                    seen
                );
                continue;
            }
            expected += 1;
            if seen == 0 {
                missing += 1;
                println!("fuzz: missing {} {}", spec::kind_name(k), spec::outcome_name(e as usize));
            }
        }
        println!("fuzz: {} calls, {} pairs expected, {} missing", calls, expected, missing);
        println!("fuzz: {} undocumented, {} failures", undocumented, self.failures);
        if self.failures > 0 { 100 } else { missing + undocumented }
    }
}
