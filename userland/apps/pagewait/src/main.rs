//! `pagewait`: a thread keeps running while another thread's page fault waits in its stretch
//! driver.
//!
//! Usage: `pagewait [--pages N] [--wait-us US] [--contend]`.
//!
//! The driver resolves each fault like a demand-zero driver, but first waits `US`
//! microseconds (default 2,000) for a kernel timer event, as a driver waits for a disk or the
//! network. Thread T1 touches `N` pages (default 20) of its stretch; thread T2 counts while it
//! can. For every wait the driver notes whether T2's count moved meanwhile; the app prints
//! `pagewait: faults=F waits=W waits_with_progress=P t2_count=C` and exits 0 if every fault
//! waited and T2 moved during every wait (`F` = `W` = `P` = `N`).
//!
//! With `--contend`, a third thread T3 touches the same pages, last first, while T1 does:
//! its faults find the driver busy with T1's and must park until it is free, not spin. The
//! app prints `pagewait: contended pages=N faults=F waits_for_driver=W` and exits 0 if T3
//! waited at least once and at most once for each fault T1 or T3 took (`1 <= W <= F`); a
//! fault path that spun would count a wait at every turn of the other threads.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use core::ops::Range;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use stretch_driver::driver_core::fault_error;
use stretch_driver::{
    DriverCore, DriverError, Fault, FaultError, MemoryKernel, StretchDriver, StretchInfo,
};
use tessera::{Env, PAGE_SIZE, Rights, paging, println, syscall, thread};

tessera::main!(main);

/// T2's count.
static COUNT: AtomicU64 = AtomicU64::new(0);
/// T1 has finished.
static DONE: AtomicBool = AtomicBool::new(false);
/// The stretch T3 touches, and its pages.
static STRETCH: AtomicU64 = AtomicU64::new(0);
static PAGES: AtomicU64 = AtomicU64::new(0);

/// Demand-zero on guaranteed frames, after waiting for a timer event on every fault.
struct WaitingDriver {
    wait_ns: u64,
    timer: usize,
    /// The stretch and the frame of each page mapped.
    core: DriverCore,
    waits: u64,
    waits_with_progress: u64,
}

impl WaitingDriver {
    /// Waits for the timer event `wait_ns` from now, letting other threads run.
    fn wait(&mut self) -> Result<(), FaultError> {
        let slot = &tessera::dcb().events[self.timer];
        let past = slot.value.load(Ordering::Acquire);
        let now = tessera::time_ns();
        syscall::timer_set(self.timer, now + self.wait_ns).map_err(|_| FaultError::OutOfMemory)?;
        let before = COUNT.load(Ordering::Relaxed);
        let woken = thread::wait_event(self.timer, past, now + 100 * self.wait_ns);
        self.waits += u64::from(woken.is_ok());
        self.waits_with_progress += u64::from(COUNT.load(Ordering::Relaxed) > before);
        Ok(())
    }
}

impl StretchDriver for WaitingDriver {
    fn bind(&mut self, _k: &mut dyn MemoryKernel, s: StretchInfo) -> Result<(), DriverError> {
        self.core.bind(s)
    }

    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        let Some((s, index)) = self.core.begin_fault(&fault)? else { return Ok(()) };
        self.wait()?;
        self.core.map_new(k, index, s.page_rights()).map(|_| ()).map_err(fault_error)
    }

    fn lock(&mut self, _k: &mut dyn MemoryKernel, _r: Range<usize>) -> Result<(), DriverError> {
        Err(DriverError::OutOfMemory)
    }

    fn core(&self) -> &DriverCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut DriverCore {
        &mut self.core
    }
}

fn counter(_: usize) -> usize {
    while !DONE.load(Ordering::Relaxed) {
        COUNT.fetch_add(1, Ordering::Relaxed);
        thread::yield_now();
    }
    0
}

/// T3: touches the stretch's pages, last first.
fn contender(_: usize) -> usize {
    let (base, pages) = (STRETCH.load(Ordering::Relaxed), PAGES.load(Ordering::Relaxed));
    for page in (0..pages).rev() {
        let va = base as usize + page as usize * PAGE_SIZE;
        // SAFETY: a page of the managed stretch `main` bound, read-write for this domain; the
        // read faults (or not, if T1 got there first) and returns what is there.
        let _ = unsafe { (va as *const u64).read_volatile() };
    }
    0
}

fn main(env: Env) -> i32 {
    let (mut pages, mut wait_us) = (20usize, 2_000u64);
    let mut contend = false;
    let mut args = env.args;
    while let Some(arg) = args.next() {
        if arg == "--contend" {
            contend = true;
            continue;
        }
        let Some(n) = args.next().and_then(|v| v.parse::<u64>().ok()).filter(|&n| n > 0) else {
            println!("pagewait: usage: pagewait [--pages N] [--wait-us US] [--contend]");
            return 2;
        };
        match arg {
            "--pages" => pages = n as usize,
            "--wait-us" => wait_us = n,
            _ => {
                println!("pagewait: usage: pagewait [--pages N] [--wait-us US] [--contend]");
                return 2;
            }
        }
    }
    let Ok(timer) = syscall::timer_alloc() else {
        println!("pagewait: no timer endpoint");
        return 1;
    };
    let driver = Box::leak(Box::new(WaitingDriver {
        wait_ns: wait_us * 1000,
        timer,
        core: DriverCore::new(),
        waits: 0,
        waits_with_progress: 0,
    }));
    let info = match paging::bind(driver, pages * PAGE_SIZE, Rights::READ.union(Rights::WRITE)) {
        Ok(info) => info,
        Err(e) => {
            println!("pagewait: bind failed: {}", e);
            return 1;
        }
    };
    let Ok(t2) = thread::spawn(counter, 0) else {
        println!("pagewait: no thread");
        return 1;
    };
    STRETCH.store(info.base as u64, Ordering::Relaxed);
    PAGES.store(pages as u64, Ordering::Relaxed);
    let t3 = if contend {
        match thread::spawn(contender, 0) {
            Ok(t) => Some(t),
            Err(_) => {
                println!("pagewait: no thread");
                return 1;
            }
        }
    } else {
        None
    };
    for page in 0..pages {
        // SAFETY: a page of the managed stretch bound above, read-write for this domain; the
        // write faults, and the driver maps the page after its wait.
        unsafe { (info.page_addr(page) as *mut u64).write_volatile(page as u64) };
    }
    if let Some(t3) = t3 {
        thread::join(t3);
    }
    DONE.store(true, Ordering::Relaxed);
    thread::join(t2);
    let (faults, waits, progress) = paging::with_driver(info.base, |d: &mut WaitingDriver, _| {
        (d.core.stats.faults, d.waits, d.waits_with_progress)
    })
    .unwrap_or_default();
    if contend {
        let waited = paging::waits_for_driver();
        println!("pagewait: contended pages={pages} faults={faults} waits_for_driver={waited}");
        return if (1..=faults).contains(&waited) { 0 } else { 1 };
    }
    // ANCHOR: report
    println!(
        "pagewait: faults={} waits={} waits_with_progress={} t2_count={}",
        faults,
        waits,
        progress,
        COUNT.load(Ordering::Relaxed)
    );
    let n = pages as u64;
    if faults == n && waits == n && progress == n { 0 } else { 1 }
    // ANCHOR_END: report
}
