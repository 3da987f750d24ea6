//! User-level threads: spawn, yield, sleep, wait on an event, mutex, join.
//!
//! Threads are scheduled by the domain itself, round robin, switching only at the calls below
//! (cooperatively). When no thread can run, the scheduler blocks the whole domain in the kernel
//! (`block`) until the earliest sleeper's deadline or an event, so a domain with one blocked
//! thread keeps running its others, and a domain whose threads all wait costs no CPU.
//!
//! Activations: the first [`spawn`] registers an activation handler and turns activations on.
//! When the kernel gives the domain the CPU again after preempting it, it enters the handler
//! with the interrupted context saved in the control block; the handler resumes that context
//! at once (the `resume` call turns activations back on in the same step). Switching threads
//! from inside the handler (preemptive user-level scheduling) is not implemented yet.
//!
//! All state lives in one static, touched only by the domain's single flow of control (threads
//! never run at the same time and the activation handler does not touch it).

use core::cell::UnsafeCell;

use abi::SysError;

use crate::arch::{self, Context};
use crate::syscall;

/// Most threads a domain can have at once (including the first).
pub const MAX_THREADS: usize = 16;
/// Stack bytes of each spawned thread (a stretch, with an unmapped guard page below).
pub const STACK_BYTES: usize = 16 * 1024;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Ready,
    Sleeping { until: u64 },
    Waiting { event: usize, past: u64, until: u64 },
    Joining { target: usize },
    Locking { mutex: usize },
    Done { result: usize },
}

#[derive(Clone, Copy)]
struct Thread {
    state: State,
    ctx: Context,
    stack: usize,
    entry: Option<fn(usize) -> usize>,
    arg: usize,
}

const NEW: Thread =
    Thread { state: State::Free, ctx: Context::ZERO, stack: 0, entry: None, arg: 0 };

struct Scheduler {
    threads: [Thread; MAX_THREADS],
    current: usize,
    started: bool,
}

struct Global(UnsafeCell<Scheduler>);

// SAFETY: a domain runs on one CPU at a time and its threads switch only cooperatively, so the
// scheduler is never touched by two flows of control at once; the activation handler does not
// touch it.
unsafe impl Sync for Global {}

static SCHED: Global =
    Global(UnsafeCell::new(Scheduler { threads: [NEW; MAX_THREADS], current: 0, started: false }));

static mut ACTIVATION_STACK: [u128; 256] = [0; 256];

fn sched() -> &'static mut Scheduler {
    // SAFETY: see `Global`: only one flow of control uses the scheduler, and no reference to
    // it is held across a thread switch (every function re-borrows after `switch` returns).
    unsafe { &mut *SCHED.0.get() }
}

/// A thread that can be joined.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct JoinHandle(usize);

impl JoinHandle {
    /// The thread's index.
    pub fn index(self) -> usize {
        self.0
    }
}

/// Registers the activation handler and turns activations on (once; [`spawn`] and
/// `paging::bind` do it). A domain with activations on takes its page faults in its stretch
/// drivers.
pub fn init_activations() {
    init();
}

fn init() {
    let s = sched();
    if s.started {
        return;
    }
    s.started = true;
    s.threads[0].state = State::Ready;
    let stack = (&raw mut ACTIVATION_STACK) as usize + core::mem::size_of::<[u128; 256]>();
    // The kernel refuses only an entry or a stack it cannot use: the runtime's own mistake.
    // Going on without a handler would end the domain at its first fault in a managed stretch,
    // with a report ("no activation handler") that hides why; stop here with the reason.
    let entry = arch::activation_entry();
    if let Err(e) = syscall::activation_set(entry, stack) {
        panic!("the kernel refused the activation handler at {entry:#x}: {e:?}");
    }
    crate::dcb().activations.store(1, core::sync::atomic::Ordering::Release);
}

extern "C" fn thread_main(index: usize) -> ! {
    // A new thread starts where another left `schedule`, in the middle of a switch.
    set_switching(false);
    let (f, arg) = {
        let t = &sched().threads[index];
        (t.entry.expect("a spawned thread has an entry"), t.arg)
    };
    let result = f(arg);
    finish(index, result)
}

/// Ends the running thread with `result` (what `join` returns). The domain's first thread
/// cannot end alone: ending it exits the domain with `exit_code`.
pub(crate) fn end_current(result: usize, exit_code: i32) -> ! {
    let s = sched();
    if !s.started || s.current == 0 {
        crate::exit(exit_code)
    }
    finish(s.current, result)
}

fn finish(index: usize, result: usize) -> ! {
    let s = sched();
    s.threads[index].state = State::Done { result };
    for t in s.threads.iter_mut() {
        if t.state == (State::Joining { target: index }) {
            t.state = State::Ready;
        }
    }
    schedule();
    unreachable!("a finished thread was resumed")
}

/// Starts `f(arg)` in a new thread.
pub fn spawn(f: fn(usize) -> usize, arg: usize) -> Result<JoinHandle, SysError> {
    init();
    let s = sched();
    let index = s.threads.iter().position(|t| t.state == State::Free).ok_or(SysError::NoMemory)?;
    let stack = match s.threads[index].stack {
        0 => syscall::stretch_create(STACK_BYTES, abi::Rights::READ.union(abi::Rights::WRITE))?,
        reused => reused,
    };
    let t = &mut s.threads[index];
    t.stack = stack;
    t.entry = Some(f);
    t.arg = arg;
    t.ctx = Context::new(thread_main, index, stack + STACK_BYTES);
    t.state = State::Ready;
    Ok(JoinHandle(index))
}

/// The running thread's index (0 is the domain's first thread).
pub fn current() -> usize {
    sched().current
}

/// Lets the other ready threads run; if there are none, lets other domains run.
pub fn yield_now() {
    // Threads whose sleep or wait is over are ready too.
    wake_due(crate::time_ns());
    if !others_ready() {
        crate::yield_now();
        return;
    }
    schedule();
}

fn others_ready() -> bool {
    let s = sched();
    s.threads.iter().enumerate().any(|(i, t)| i != s.current && t.state == State::Ready)
}

/// Sleeps for `ns` nanoseconds; other threads run meanwhile.
pub fn sleep(ns: u64) {
    init();
    let s = sched();
    let until = crate::time_ns().saturating_add(ns);
    s.threads[s.current].state = State::Sleeping { until };
    schedule();
}

/// Why waiting for an event ended without it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum WaitError {
    /// The deadline passed.
    Timeout,
    /// The only domain that could signal the endpoint died.
    Closed,
}

/// Waits until event endpoint `event` exceeds `past` (returns its value), the endpoint closes,
/// or `time_ns()` reaches `deadline_ns`; other threads run meanwhile.
pub fn wait_event(event: usize, past: u64, deadline_ns: u64) -> Result<u64, WaitError> {
    init();
    loop {
        let slot = crate::dcb().events.get(event).ok_or(WaitError::Closed)?;
        let value = slot.value.load(core::sync::atomic::Ordering::Acquire);
        if value > past {
            return Ok(value);
        }
        if slot.closed.load(core::sync::atomic::Ordering::Acquire) != 0 {
            return Err(WaitError::Closed);
        }
        if crate::time_ns() >= deadline_ns {
            return Err(WaitError::Timeout);
        }
        let s = sched();
        s.threads[s.current].state = State::Waiting { event, past, until: deadline_ns };
        schedule();
    }
}

/// Waits for thread `h` to finish and returns its result.
pub fn join(h: JoinHandle) -> usize {
    loop {
        let s = sched();
        if let State::Done { result } = s.threads[h.0].state {
            s.threads[h.0].state = State::Free;
            return result;
        }
        s.threads[s.current].state = State::Joining { target: h.0 };
        schedule();
    }
}

/// Makes ready every thread whose wait is over; returns the earliest remaining deadline.
fn wake_due(now: u64) -> u64 {
    let s = sched();
    let dcb = crate::dcb();
    let mut earliest = u64::MAX;
    for t in s.threads.iter_mut() {
        match t.state {
            State::Sleeping { until } if until <= now => t.state = State::Ready,
            State::Sleeping { until } => earliest = earliest.min(until),
            State::Waiting { event, past, until } => {
                let slot = dcb.events.get(event);
                let moved = slot.is_none_or(|e| {
                    e.value.load(core::sync::atomic::Ordering::Acquire) > past
                        || e.closed.load(core::sync::atomic::Ordering::Acquire) != 0
                });
                if moved || until <= now {
                    t.state = State::Ready;
                } else {
                    earliest = earliest.min(until);
                }
            }
            _ => {}
        }
    }
    earliest
}

/// Set while the running flow of control switches between threads: a revocation notice that
/// interrupts a switch is answered later, at the next activation outside
/// (the activation handler), since `revoke` may allocate and wait. (The heap's lock is the
/// other such place: `heap::locked`.) Switches never nest.
static SWITCHING: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Whether the interrupted code was switching between threads (see [`SWITCHING`]).
pub(crate) fn switching() -> bool {
    SWITCHING.load(core::sync::atomic::Ordering::Relaxed)
}

/// Marks a switch as under way, or over.
fn set_switching(on: bool) {
    SWITCHING.store(on, core::sync::atomic::Ordering::Relaxed);
}

/// Switches to the next ready thread, or blocks the domain until one is. The switch itself is
/// marked ([`SWITCHING`]): the thread that runs next clears the mark (returning here, or
/// starting in `thread_main`). Blocking is not: a notice that wakes the domain there is
/// answered by the waiting thread.
fn schedule() {
    loop {
        let earliest = wake_due(crate::time_ns());
        let s = sched();
        let n = MAX_THREADS;
        let from = s.current;
        let next = (1..=n).map(|k| (from + k) % n).find(|&i| s.threads[i].state == State::Ready);
        match next {
            Some(next) if next == from => return,
            Some(next) => {
                set_switching(true);
                s.current = next;
                let save = &raw mut s.threads[from].ctx;
                let load = &raw const s.threads[next].ctx;
                // SAFETY: `load` was saved by `switch` or made by `Context::new` with a live
                // stack stretch; thread `from` is not ready elsewhere, so its context slot stays
                // valid until it is switched back to.
                unsafe { arch::switch(save, load) };
                set_switching(false);
                return;
            }
            None => {
                if crate::syscall::block(earliest) == Err(SysError::WouldDeadlock) {
                    crate::println!("tessera: every thread waits and nothing can wake them");
                    crate::exit(crate::EXIT_DEADLOCK);
                }
            }
        }
    }
}

/// State owned by the domain's single flow of control (the paging registry), borrowed only for
/// the length of a closure: [`FlowCell::with`]. A closure must not switch threads, run code
/// that could borrow the same cell, or borrow it again (debug builds check the last: a second
/// borrow while one is held panics). The activation handler never borrows one.
pub(crate) struct FlowCell<T> {
    value: UnsafeCell<T>,
    #[cfg(debug_assertions)]
    borrowed: core::cell::Cell<bool>,
}

// SAFETY: threads of one domain never run at the same time and switch only cooperatively
// (never inside `with`, whose closures do not switch), the activation handler does not touch a
// `FlowCell`, and no closure passed to `with` borrows the cell again (the rule above, checked
// in debug builds): so one `&mut T` exists at a time.
unsafe impl<T> Sync for FlowCell<T> {}

impl<T> FlowCell<T> {
    /// A cell holding `value`.
    pub(crate) const fn new(value: T) -> Self {
        FlowCell {
            value: UnsafeCell::new(value),
            #[cfg(debug_assertions)]
            borrowed: core::cell::Cell::new(false),
        }
    }

    /// Runs `f` on the value, borrowed for the length of the call.
    ///
    /// # Panics
    ///
    /// In debug builds, if the cell is borrowed already (a closure that borrowed it again).
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(debug_assertions)]
        assert!(!self.borrowed.replace(true), "a FlowCell borrowed twice");
        // SAFETY: no other reference to the value exists while `f` runs: see the `Sync` impl
        // (a closure never borrows the cell again; debug builds check it above).
        let r = f(unsafe { &mut *self.value.get() });
        #[cfg(debug_assertions)]
        self.borrowed.set(false);
        r
    }
}

/// A lock for data shared by the threads of a domain.
pub struct Mutex<T> {
    locked: UnsafeCell<bool>,
    data: UnsafeCell<T>,
}

// SAFETY: threads of one domain never run at the same time (see the module documentation), and
// `lock` hands out the data to one holder at a time.
unsafe impl<T: Send> Sync for Mutex<T> {}

/// Access to a [`Mutex`]'s data; unlocks when dropped.
pub struct MutexGuard<'a, T> {
    mutex: &'a Mutex<T>,
}

impl<T> Mutex<T> {
    /// A new, unlocked mutex.
    pub const fn new(value: T) -> Self {
        Mutex { locked: UnsafeCell::new(false), data: UnsafeCell::new(value) }
    }

    fn id(&self) -> usize {
        self as *const Self as usize
    }

    /// Waits (letting other threads run) until the mutex is free, then takes it.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        loop {
            // SAFETY: only one thread runs at a time and none switches inside these lines.
            let locked = unsafe { &mut *self.locked.get() };
            if !*locked {
                *locked = true;
                return MutexGuard { mutex: self };
            }
            let s = sched();
            s.threads[s.current].state = State::Locking { mutex: self.id() };
            schedule();
        }
    }
}

impl<T> core::ops::Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference to the data exists.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T> core::ops::DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`; `&mut self` makes this the only access through the guard.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: only one thread runs at a time; the guard's holder is the one running.
        unsafe { *self.mutex.locked.get() = false };
        wake_one(self.mutex.id());
    }
}

/// Parks the running thread until [`wake_one`] names `id` (any number that names one thing
/// threads wait for, such as an address); other threads run meanwhile, and the domain blocks
/// if none can. The caller checks its condition again when this returns.
pub(crate) fn wait_for(id: usize) {
    init();
    let s = sched();
    s.threads[s.current].state = State::Locking { mutex: id };
    schedule();
}

/// Makes ready the first thread (by index) parked on `id` by [`wait_for`], if any.
pub(crate) fn wake_one(id: usize) {
    let s = sched();
    if let Some(t) = s.threads.iter_mut().find(|t| t.state == (State::Locking { mutex: id })) {
        t.state = State::Ready;
    }
}
