//! User mode on x86_64 as domains use it: contexts entered and resumed with `sysretq` or
//! `iretq`, `syscall` and traps from ring 3 saved into the current context and handed to a
//! trap handler, the lazily restored FP state, copies from user memory under SMAP.
//!
//! The tests map their pages user-accessible in the kernel's own tables (in the user half,
//! which they leave empty otherwise) and unmap them afterwards.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ptr::NonNull;

use abi::Access;
use frame_allocator::{Frame, Owner};
use spin::Mutex;

use crate::arch::Resume;
use crate::arch::contract::{UserContextOps, UserFault, UserTrap};
use crate::arch::paging::PageTableFlags as F;
use crate::arch::user::{self, UserContext, reg::*};
use crate::arch::{self, fp, paging, probe, time, timer};
use crate::check;
use crate::ktest::{Failed, Outcome};
use crate::memory::{alloc_zeroed_kernel_frame, with_frames};
use crate::phys;

/// The code page, in the user half below `abi::USER_END`; the stack and data pages follow,
/// then a page left unmapped.
const CODE: u64 = 0x0000_0030_0000_0000;
const STACK: u64 = CODE + 0x1000;
const DATA: u64 = CODE + 0x2000;
const UNMAPPED: u64 = CODE + 0x3000;

/// Offsets of the programs in the code page.
const SYSCALL_INT3: u64 = 0;
const INT3_INT3: u64 = 8;
const LOAD: u64 = 16;
const STORE: u64 = 20;
const UD2: u64 = 24;
const HLT: u64 = 26;
const SPIN: u64 = 28;
const FP_LOOP: u64 = 32;
const SET_AC: u64 = 48;

/// The user programs (every other byte is `int3`).
fn programs() -> [u8; 64] {
    let mut code = [0xccu8; 64];
    code[0..2].copy_from_slice(&[0x0f, 0x05]); // syscall; int3
    code[16..19].copy_from_slice(&[0x48, 0x8b, 0x03]); // mov (%rbx), %rax; int3
    code[20..23].copy_from_slice(&[0x48, 0x89, 0x03]); // mov %rax, (%rbx); int3
    code[24..26].copy_from_slice(&[0x0f, 0x0b]); // ud2
    code[26] = 0xf4; // hlt
    code[28..30].copy_from_slice(&[0xeb, 0xfe]); // jmp .
    // movq %rdi, %xmm0; 1: syscall; movq %xmm0, %rsi; jmp 1b
    code[32..46].copy_from_slice(&[
        0x66, 0x48, 0x0f, 0x6e, 0xc7, 0x0f, 0x05, 0x66, 0x48, 0x0f, 0x7e, 0xc6, 0xeb, 0xf7,
    ]);
    // pushfq; orl $0x40000, (%rsp); popfq; int3: sets RFLAGS.AC.
    code[48..57].copy_from_slice(&[0x9c, 0x81, 0x0c, 0x24, 0x00, 0x00, 0x04, 0x00, 0x9d]);
    code
}

/// The test's pages: code, stack and data, mapped while it lives.
struct Pages {
    frames: [Frame; 3],
    free_before: u64,
}

impl Pages {
    fn map() -> Result<Pages, Failed> {
        let free_before = with_frames(|fa| fa.free_count());
        let mut frames = Vec::new();
        for _ in 0..3 {
            frames.push(alloc_zeroed_kernel_frame().map_err(|_| Failed)?);
        }
        let frames: [Frame; 3] = frames.try_into().map_err(|_| Failed)?;
        phys::write_frame(frames[0], &programs());
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        phys::write_frame(frames[2], &data);
        let rw = F::USER_ACCESSIBLE | F::WRITABLE | F::NO_EXECUTE;
        let mapped = arch::with_kernel_table(|t| {
            t.map(CODE, frames[0].addr(), F::USER_ACCESSIBLE)?;
            t.map(STACK, frames[1].addr(), rw)?;
            t.map(DATA, frames[2].addr(), rw)
        });
        let pages = Pages { frames, free_before };
        check!(mapped.is_ok(), "mapping the user pages failed: {}", mapped);
        Ok(pages)
    }

    /// Unmaps and frees the pages; checks that every frame came back.
    fn unmap(self) -> Outcome {
        for (va, f) in [CODE, STACK, DATA].into_iter().zip(self.frames) {
            let unmapped = arch::with_kernel_table(|t| t.unmap(va));
            paging::flush(va);
            check!(unmapped == Ok(f.addr()), "unmapping {=u64:#x}: {}", va, unmapped);
            check!(with_frames(|fa| fa.free(f, Owner::Kernel)).is_ok(), "freeing a frame failed");
        }
        let free_after = with_frames(|fa| fa.free_count());
        check!(
            free_after == self.free_before,
            "{=u64} frames free, {=u64} before",
            free_after,
            self.free_before
        );
        Ok(())
    }
}

/// Maps the pages, runs `f`, unmaps them.
fn with_pages(f: impl FnOnce() -> Outcome) -> Outcome {
    let pages = Pages::map()?;
    let result = f();
    pages.unmap()?;
    result
}

/// What the handler saw: each trap with the context as it was then.
static LOG: Mutex<Vec<(UserTrap, UserContext)>> = Mutex::new(Vec::new());

/// What the handler does with the `n`th trap (from 0), the context at hand.
type Script = fn(n: usize, trap: UserTrap, ctx: &mut UserContext) -> Option<Resume>;
static SCRIPT: Mutex<Option<Script>> = Mutex::new(None);

/// The trap handler of these tests: logs the trap and follows the script.
fn logging_handler(trap: UserTrap) -> Option<Resume> {
    let script = (*SCRIPT.lock())?;
    user::with_current(|ctx| {
        let n = {
            let mut log = LOG.lock();
            log.push((trap, ctx.clone()));
            log.len() - 1
        };
        script(n, trap, ctx)
    })
    .flatten()
}

/// Runs `ctx` under `script` until the script returns `None`; returns the log.
fn run(ctx: &mut UserContext, script: Script) -> Vec<(UserTrap, UserContext)> {
    LOG.lock().clear();
    *SCRIPT.lock() = Some(script);
    user::run(NonNull::from(ctx), logging_handler);
    *SCRIPT.lock() = None;
    core::mem::take(&mut *LOG.lock())
}

/// A context at `CODE + offset` whose registers all hold distinct values.
fn context_at(offset: u64) -> UserContext {
    let mut c = UserContext::new_user((CODE + offset) as usize, (STACK + 4096) as usize, [0; 4]);
    for (i, r) in c.regs.iter_mut().enumerate() {
        if i != RSP {
            *r = 0x1111_0000_0000_0000 * (i as u64 + 1) + i as u64;
        }
    }
    c
}

/// A `syscall` with six arguments: the handler sees the number and the arguments, the user
/// code gets the status in `rax` and the value in `rdx` back (through `sysretq`), with `rcx`
/// and `r11` as the instruction left them and every other register preserved.
pub fn syscall_round_trip() -> Outcome {
    with_pages(|| {
        let mut ctx = context_at(SYSCALL_INT3);
        ctx.regs[RAX] = 0x2a;
        let before = ctx.clone();
        let (sysrets, _) = user::exits();
        let log = run(&mut ctx, |_, trap, _| match trap {
            UserTrap::SystemCall => Some(Resume::Results(7, 0x99)),
            _ => None,
        });
        check!(log.len() == 2, "{=usize} traps", log.len());
        let (trap, at_call) = &log[0];
        check!(matches!(trap, UserTrap::SystemCall), "first trap: not a system call");
        let r = &before.regs;
        let want = (0x2a, [r[RDI], r[RSI], r[RDX], r[R10], r[R8], r[R9]].map(|v| v as usize));
        let (number, args) = at_call.call();
        check!((number, args) == want, "call {=usize} with {=[?]}", number, &args[..]);
        check!(at_call.pc() == (CODE + 2) as usize, "pc at the call {=usize:#x}", at_call.pc());
        let (trap, after) = &log[1];
        check!(
            matches!(trap, UserTrap::Fault(UserFault::Breakpoint)),
            "second trap: not a breakpoint"
        );
        let (status, value) = after.results();
        check!((status, value) == (7, 0x99), "results {=usize}, {=usize:#x}", status, value);
        check!(after.rip == CODE + 3, "rip after int3 {=u64:#x}", after.rip);
        check!(after.regs[RCX] == CODE + 2, "rcx {=u64:#x}", after.regs[RCX]);
        check!(after.regs[R11] == at_call.rflags, "r11 {=u64:#x}", after.regs[R11]);
        for i in [RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R12, R13, R14, R15] {
            check!(
                after.regs[i] == before.regs[i],
                "register {=usize}: {=u64:#x}, was {=u64:#x}",
                i,
                after.regs[i],
                before.regs[i]
            );
        }
        check!(user::exits().0 == sysrets + 1, "the call did not return with sysretq");
        Ok(())
    })
}

/// `restart_call` makes the same `syscall` run again (through `iretq`), with the argument
/// registers as the handler left them.
pub fn restart_call() -> Outcome {
    with_pages(|| {
        let mut ctx = context_at(SYSCALL_INT3);
        let (_, irets) = user::exits();
        let log = run(&mut ctx, |n, trap, ctx| match (n, trap) {
            (0, UserTrap::SystemCall) => {
                ctx.restart_call();
                ctx.regs[RDI] = 0x5eed;
                Some(Resume::Context(ctx))
            }
            (1, UserTrap::SystemCall) => Some(Resume::Results(0, 1)),
            _ => None,
        });
        check!(log.len() == 3, "{=usize} traps", log.len());
        check!(matches!(log[1].0, UserTrap::SystemCall), "the call did not run again");
        let (_, again) = &log[1];
        check!(again.call().1[0] == 0x5eed, "first argument {=usize:#x}", again.call().1[0]);
        check!(again.pc() == (CODE + 2) as usize, "pc {=usize:#x}", again.pc());
        check!(log[2].1.results() == (0, 1), "results after the restart");
        check!(user::exits().1 > irets, "the restarted call was not resumed with iretq");
        Ok(())
    })
}

/// A context resumed after an exception (with `iretq`) gets `rcx` and `r11` back as saved,
/// like every other register.
pub fn iret_keeps_every_register() -> Outcome {
    with_pages(|| {
        let mut ctx = context_at(INT3_INT3);
        let before = ctx.clone();
        let log = run(&mut ctx, |n, _, ctx| (n == 0).then_some(Resume::Context(ctx)));
        check!(log.len() == 2, "{=usize} traps", log.len());
        let after = &log[1].1;
        check!(after.rip == CODE + INT3_INT3 + 2, "rip {=u64:#x}", after.rip);
        check!(after.regs == before.regs, "the registers changed across an iretq");
        Ok(())
    })
}

/// Whether the kernel could read the data page while handling a trap from ring 3.
static READ_IN_HANDLER: Mutex<Option<Option<u8>>> = Mutex::new(None);

/// A domain that sets RFLAGS.AC (which would open SMAP) does not open it for the kernel: a
/// trap handler still cannot read its pages; the domain's saved flags keep AC.
pub fn user_ac_does_not_open_smap() -> Outcome {
    with_pages(|| {
        *READ_IN_HANDLER.lock() = None;
        let log = run(&mut context_at(SET_AC), |_, _, _| {
            *READ_IN_HANDLER.lock() = Some(probe::read_u8(DATA as usize));
            None
        });
        check!(log.len() == 1, "{=usize} traps", log.len());
        check!(log[0].1.rflags & (1 << 18) != 0, "the domain's AC is not in its context");
        let read = READ_IN_HANDLER.lock().take();
        let smap = crate::arch::cpu::Features::read().smap;
        check!(read.is_some(), "the handler did not run");
        check!(!smap || read == Some(None), "the handler read a user page: {}", read);
        Ok(())
    })
}

/// Runs `ctx` until its first trap; returns the trap and the context then.
fn first_trap(mut ctx: UserContext) -> Result<(UserTrap, UserContext), Failed> {
    let mut log = run(&mut ctx, |_, _, _| None);
    check!(log.len() == 1, "{=usize} traps", log.len());
    Ok(log.remove(0))
}

/// Faults from ring 3 reach the handler in arch-neutral terms: page faults (load, store,
/// fetch; unmapped or a kernel page) with their address and access, `ud2` (with its opcode
/// bytes), `hlt` (a general protection fault), and the timer.
pub fn faults_and_timer() -> Outcome {
    use Access::{Execute, Read, Write};
    with_pages(|| {
        let kernel = probe::ret_in_text() as u64;
        let page = |addr: u64, access| UserFault::Page { addr: addr as usize, access };
        let cases = [
            (LOAD, UNMAPPED, page(UNMAPPED, Read)),
            (STORE, UNMAPPED + 8, page(UNMAPPED + 8, Write)),
            (LOAD, kernel, page(kernel, Read)),
            (UD2, 0, UserFault::IllegalInstruction { bits: Some(0x0b0f) }),
            (HLT, 0, UserFault::Refused { addr: 0, access: Read }),
        ];
        for (offset, rbx, want) in cases {
            let mut ctx = context_at(offset);
            ctx.regs[RBX] = rbx;
            let (trap, at) = first_trap(ctx)?;
            let got = match trap {
                UserTrap::Fault(f) => f,
                _ => UserFault::Other { name: "not a fault", code: 0 },
            };
            check!(got == want, "at {=u64:#x}: {=str} at {}", offset, got.name(), got.addr());
            check!(at.rip == CODE + offset, "rip {=u64:#x}", at.rip);
        }
        let mut ctx = context_at(0);
        ctx.rip = UNMAPPED;
        let (trap, _) = first_trap(ctx)?;
        check!(
            matches!(trap, UserTrap::Fault(f) if f == page(UNMAPPED, Execute)),
            "a fetch from an unmapped page"
        );

        timer::arm(time::now_ticks() + time::frequency() / 1000);
        let (trap, at) = first_trap(context_at(SPIN))?;
        check!(matches!(trap, UserTrap::Timer), "the spinning code was not stopped by the timer");
        check!(at.rip == CODE + SPIN, "rip {=u64:#x}", at.rip);
        Ok(())
    })
}

/// Two contexts and their FP states, switched on each system call.
struct FpTest {
    ctx: [Box<UserContext>; 2],
    fp: [fp::FpState; 2],
    /// Calls at which a context found another value in `xmm0` than its own.
    wrong: Vec<usize>,
}

static FP_TEST: Mutex<Option<FpTest>> = Mutex::new(None);

/// How many system calls the FP test makes.
const FP_CALLS: usize = 10;

/// The value each FP context keeps in `xmm0`.
const FP_VALUES: [u64; 2] = [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210];

/// On each system call: checks the caller's `rsi` (its `xmm0`, read back after the previous
/// switch), saves its FP state and switches to the other context, restoring its state lazily.
fn fp_handler(trap: UserTrap) -> Option<Resume> {
    let mut guard = FP_TEST.lock();
    let t = guard.as_mut()?;
    let current = user::current()?.as_ptr();
    let me = if core::ptr::eq(current as *const UserContext, &*t.ctx[0]) { 0 } else { 1 };
    let calls = LOG.lock().len();
    LOG.lock().push((trap, (*t.ctx[me]).clone()));
    if !matches!(trap, UserTrap::SystemCall) {
        return None;
    }
    if calls >= 2 && t.ctx[me].regs[RSI] != FP_VALUES[me] {
        t.wrong.push(calls);
    }
    let FpTest { ctx, fp, .. } = t;
    arch::save_fp(&mut ctx[me], &mut fp[me]);
    if calls + 1 == FP_CALLS {
        return None;
    }
    let other = 1 - me;
    arch::restore_fp(&mut ctx[other], &fp[other]);
    Some(Resume::Context(&mut *ctx[other]))
}

/// Two contexts keep different values in `xmm0` across switches: each resumes with its FP
/// unit off (CR0.TS) and has its state loaded on its first SSE instruction (one #NM per
/// switch); the saved states hold each value and the initial MXCSR.
pub fn fp_lazy_restore() -> Outcome {
    with_pages(|| {
        let mut ctx = [context_at(FP_LOOP), context_at(FP_LOOP)];
        for (c, v) in ctx.iter_mut().zip(FP_VALUES) {
            c.regs[RDI] = v;
            c.regs[RSI] = 0;
        }
        let [a, b] = ctx;
        *FP_TEST.lock() = Some(FpTest {
            ctx: [Box::new(a), Box::new(b)],
            fp: [fp::FpState::default(), fp::FpState::default()],
            wrong: Vec::new(),
        });
        LOG.lock().clear();
        let loads = fp::loads();
        let first = {
            let mut guard = FP_TEST.lock();
            let t = guard.as_mut().ok_or(Failed)?;
            let FpTest { ctx, fp, .. } = t;
            arch::restore_fp(&mut ctx[0], &fp[0]);
            NonNull::from(&mut *ctx[0])
        };
        user::run(first, fp_handler);
        let t = FP_TEST.lock().take().ok_or(Failed)?;
        let calls = LOG.lock().len();
        LOG.lock().clear();
        check!(calls == FP_CALLS, "{=usize} system calls", calls);
        check!(t.wrong.is_empty(), "wrong xmm0 at calls {=[?]}", &t.wrong[..]);
        let loaded = fp::loads() - loads;
        check!(loaded == FP_CALLS as u64, "{=u64} lazy loads for {=usize} calls", loaded, calls);
        for (i, f) in t.fp.iter().enumerate() {
            check!(f.xmm_low(0) == FP_VALUES[i], "saved xmm0 {=u64:#x}", f.xmm_low(0));
            check!(f.mxcsr() == fp::MXCSR_INITIAL, "saved mxcsr {=u32:#x}", f.mxcsr());
        }
        Ok(())
    })
}

/// Copies from user memory open SMAP around themselves: the kernel cannot read the data page
/// directly, the copies can; a copy that reaches an unmapped page or leaves the user half, or
/// a misaligned word copy, fails with the address.
pub fn copy_from_user() -> Outcome {
    with_pages(|| {
        let expect = |at: u64| ((at - DATA) as u32 * 7 + 3) as u8;
        let smap = crate::arch::cpu::Features::read().smap;
        check!(
            !smap || probe::read_u8(DATA as usize).is_none(),
            "the kernel reads a user page with SMAP closed"
        );
        let mut buf = [0u8; 100];
        let r = arch::copy_from_user(&mut buf, (DATA + 3) as usize);
        check!(r.is_ok(), "copy: {}", r);
        check!(buf.iter().enumerate().all(|(i, b)| *b == expect(DATA + 3 + i as u64)), "data");
        let r = arch::copy_from_user(&mut buf, (DATA + 4096 - 50) as usize);
        check!(r == Err(UNMAPPED as usize), "copy into the unmapped page: {}", r);
        let r = arch::copy_from_user(&mut buf, abi::USER_END);
        check!(r == Err(abi::USER_END), "copy out of the user half: {}", r);
        let kernel = probe::ret_in_text();
        let r = arch::copy_from_user(&mut buf, kernel);
        check!(r == Err(kernel), "copy from the kernel's text: {}", r);
        let r = arch::copy_words_from_user(&mut [0u64; 2], kernel & !7);
        check!(r == Err(kernel & !7), "word copy from the kernel's text: {}", r);

        let mut words = [0u64; 16];
        let r = arch::copy_words_from_user(&mut words, (DATA + 64) as usize);
        check!(r.is_ok(), "word copy: {}", r);
        let want = u64::from_le_bytes(core::array::from_fn(|i| expect(DATA + 64 + i as u64)));
        check!(words[0] == want, "first word {=u64:#x}", words[0]);
        let r = arch::copy_words_from_user(&mut words, (DATA + 4) as usize);
        check!(r == Err((DATA + 4) as usize), "misaligned word copy: {}", r);
        let r = arch::copy_words_from_user(&mut words, (DATA + 4096 - 64) as usize);
        check!(r == Err((DATA + 4096 - 64) as usize), "word copy into the unmapped page: {}", r);
        Ok(())
    })
}

/// `load_words` keeps the domain within bounds: only the arithmetic flags (and DF) come from
/// the words, IF is set and IOPL 0; a `rip` or `rsp` outside the user half becomes
/// `abi::USER_END`. `saved` gives back what was loaded.
pub fn load_words_sanitizes() -> Outcome {
    let mut words = [0u64; abi::SavedContext::WORDS];
    for (i, w) in words.iter_mut().enumerate() {
        *w = i as u64 * 0x100;
    }
    words[16] = 0x1000;
    words[17] = 0xffff_ffff_ffff_ffff;
    let mut ctx = UserContext::default();
    ctx.load_words(&words);
    check!(ctx.rflags == 0xcd5 | 0x202, "rflags {=u64:#x}", ctx.rflags);
    check!(ctx.saved().to_words()[..17] == words[..17], "the registers were not loaded");
    words[4] = 0xffff_8000_0000_0000;
    words[16] = 0x8000_0000_0000;
    ctx.load_words(&words);
    check!(ctx.regs[RSP] == abi::USER_END as u64, "rsp {=u64:#x}", ctx.regs[RSP]);
    check!(ctx.rip == abi::USER_END as u64, "rip {=u64:#x}", ctx.rip);
    let mut h = ctx.clone();
    h.enter_handler(0x4000, 0x8000, [1, 2]);
    check!(
        h.regs[RSP] == 0x8000 - 8 && h.regs[RDI] == 1 && h.regs[RSI] == 2 && h.rip == 0x4000,
        "enter_handler"
    );
    check!(h.regs.iter().filter(|r| **r != 0).count() == 3, "other registers not cleared");
    Ok(())
}
