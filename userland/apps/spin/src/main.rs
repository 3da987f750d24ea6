//! `spin`: CPU-bound work that measures, by its own clock, the CPU its domain receives.
//!
//! Usage: `spin [--for MS | --forever] [--every MS] [--report N] [--windows] [--fault-at MS]
//! [--exit-at MS [--status N]]`.
//!
//! It runs a loop of fixed work for `--for` milliseconds of the clock (default 1000, rounded up
//! to whole CPU periods, counted from the first period boundary after it starts), reading the
//! clock directly (no system call) on every iteration, and feeds the readings to a
//! [`CpuMeter`] whose windows are the domain's CPU periods, aligned with the period the kernel
//! says is current when it starts (from the control block). Steps of at most 2 µs between
//! readings count as running. At the end it prints
//!
//! `spin: iterations=I elapsed_ns=E running_ns=R windows=W min_ns=A max_ns=B total_ns=T period_ns=P slice_ns=S`
//!
//! where `I` is the work done (iterations of the loop), `R` the running time it saw, and `W`,
//! `A`, `B`, `T` summarize the complete periods (the first, partial one excluded, and every
//! period in which the app printed, since a console call's cost cannot be told apart from
//! being descheduled): the least,
//! the most and the total running time in one period. Comparing `I` with the iterations of the
//! same app alone on the CPU gives the share it received; `A` and `B` against `S` show whether
//! it got its slice in every period.
//!
//! `--every MS` prints the work done and the share of the clock it ran every MS milliseconds.
//! `--forever` never stops; it prints the summary line (labelled `spin: report`) every
//! `--report N` complete periods (default 100). `--windows` prints every complete period's
//! running time in microseconds, ten to a line. `--fault-at MS` stores to address 16 after MS
//! milliseconds (the kernel terminates the domain); `--exit-at MS` exits with status 0 then
//! (or `--status N`: a domain that fails on purpose, for `cargo xtask run`'s exit status).

#![no_std]
#![no_main]

use core::hint::black_box;

use tessera::cpu_meter::CpuMeter;
use tessera::{Env, clock, dcb, println};

tessera::main!(main);

/// Steps between clock readings up to this long count as running time.
const GAP_NS: u64 = 2_000;

struct Options {
    duration_ms: u64,
    forever: bool,
    every_ms: Option<u64>,
    report: u64,
    windows: bool,
    fault_at_ms: Option<u64>,
    exit_at_ms: Option<u64>,
    /// The exit status at `exit_at_ms`.
    status: i32,
}

fn options(env: Env) -> Option<Options> {
    let mut o = Options {
        duration_ms: 1000,
        forever: false,
        every_ms: None,
        report: 100,
        windows: false,
        fault_at_ms: None,
        exit_at_ms: None,
        status: 0,
    };
    let mut args = env.args;
    while let Some(arg) = args.next() {
        match arg {
            "--forever" => o.forever = true,
            "--windows" => o.windows = true,
            _ => {
                let n: u64 = args.next()?.parse().ok().filter(|&n| n > 0)?;
                match arg {
                    "--for" => o.duration_ms = n,
                    "--every" => o.every_ms = Some(n),
                    "--report" => o.report = n,
                    "--fault-at" => o.fault_at_ms = Some(n),
                    "--exit-at" => o.exit_at_ms = Some(n),
                    "--status" => o.status = i32::try_from(n).ok()?,
                    _ => return None,
                }
            }
        }
    }
    Some(o)
}

/// Converts between nanoseconds and clock ticks.
struct Scale {
    hz: u64,
}

impl Scale {
    fn ticks(&self, ns: u64) -> u64 {
        ((u128::from(ns) * u128::from(self.hz)) / 1_000_000_000) as u64
    }
    fn ns(&self, ticks: u64) -> u64 {
        clock::ns_from_ticks(ticks)
    }
}

fn main(env: Env) -> i32 {
    let Some(o) = options(env) else {
        println!(
            "spin: usage: spin [--for MS | --forever] [--every MS] [--report N] [--windows] [--fault-at MS] [--exit-at MS]"
        );
        return 2;
    };
    let cpu = &dcb().cpu;
    let period_ns = cpu.period_ns.load(core::sync::atomic::Ordering::Relaxed);
    let slice_ns = cpu.slice_ns.load(core::sync::atomic::Ordering::Relaxed);
    let epoch_ns = cpu.period_start_ns.load(core::sync::atomic::Ordering::Relaxed);
    let s = Scale { hz: clock::hz() };
    let booted = clock::ticks();
    let (epoch, period) = (s.ticks(epoch_ns), s.ticks(period_ns).max(1));
    let mut meter = CpuMeter::new(epoch, period, s.ticks(GAP_NS), booted);
    // Work is counted over whole periods: from the first period boundary after the start, for
    // the duration rounded up to whole periods (so no partial slice at either end skews it).
    let start = epoch + (booted.saturating_sub(epoch) / period + 1) * period;
    // Whole periods counted in nanoseconds: in ticks, a period's length is rounded down and
    // the duration's is not, so a clock whose rate is no multiple of the periods' (a measured
    // TSC rate) would add a period.
    let periods = match period_ns {
        0 => s.ticks(o.duration_ms * 1_000_000).div_ceil(period),
        p => (o.duration_ms * 1_000_000).div_ceil(p),
    };
    let end = start + periods * period;
    let every = o.every_ms.map(|ms| s.ticks(ms * 1_000_000));
    let fault_at = o.fault_at_ms.map(|ms| start + s.ticks(ms * 1_000_000));
    let exit_at = o.exit_at_ms.map(|ms| start + s.ticks(ms * 1_000_000));
    let mut next_progress = every.map(|e| start + e);
    let (mut progress_iterations, mut progress_running) = (0u64, 0u64);
    let mut iterations: u64 = 0;
    let mut reported = 0u64;
    let mut line = Line::default();
    let mut acc: u64 = 1;
    loop {
        // The fixed work of one iteration.
        for k in 0..8u64 {
            acc = black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(k));
        }
        let now = clock::ticks();
        if now < start {
            meter.observe(now);
            continue;
        }
        iterations += 1;
        if let Some(w) = meter.observe(now)
            && o.windows
            && line.push(s.ns(w.got))
        {
            meter.exclude_current();
        }
        if o.forever && meter.stats().count >= reported + o.report {
            reported = meter.stats().count;
            summary("spin: report", iterations, now - start, &meter, &s, period_ns, slice_ns);
            meter.exclude_current();
        }
        if let Some(at) = next_progress
            && now >= at
        {
            let ran = meter.running_total() - progress_running;
            let interval = every.unwrap_or(1);
            println!(
                "spin: {} iterations in the last {} ms, running {}.{}% of the time",
                iterations - progress_iterations,
                s.ns(interval) / 1_000_000,
                ran * 100 / interval,
                ran * 1000 / interval % 10
            );
            progress_iterations = iterations;
            progress_running = meter.running_total();
            meter.exclude_current();
            next_progress = Some(at + interval);
        }
        if fault_at.is_some_and(|t| now >= t) {
            println!("spin: storing to address 16 now");
            // SAFETY: this store is meant to fault: address 16 lies in no stretch, so the kernel
            // terminates the domain at the store, before any memory changes.
            unsafe { core::ptr::write_volatile(16 as *mut u64, acc) };
        }
        if exit_at.is_some_and(|t| now >= t) {
            println!("spin: exiting with status {} as asked", o.status);
            return o.status;
        }
        if !o.forever && now >= end {
            line.flush();
            summary("spin:", iterations, end - start, &meter, &s, period_ns, slice_ns);
            return 0;
        }
    }
}

fn summary(
    label: &str,
    iterations: u64,
    elapsed: u64,
    meter: &CpuMeter,
    s: &Scale,
    period_ns: u64,
    slice_ns: u64,
) {
    let w = meter.stats();
    println!(
        "{} iterations={} elapsed_ns={} running_ns={} windows={} min_ns={} max_ns={} total_ns={} period_ns={} slice_ns={}",
        label,
        iterations,
        s.ns(elapsed),
        s.ns(meter.running_total()),
        w.count,
        s.ns(w.min),
        s.ns(w.max),
        s.ns(w.total),
        period_ns,
        slice_ns
    );
}

/// Up to ten window figures, printed as one line when full.
#[derive(Default)]
struct Line {
    values: [u64; 10],
    len: usize,
}

impl Line {
    /// Adds a figure; returns whether that filled the line and printed it.
    fn push(&mut self, ns: u64) -> bool {
        self.values[self.len] = ns;
        self.len += 1;
        let full = self.len == self.values.len();
        if full {
            self.flush();
        }
        full
    }

    fn flush(&mut self) {
        if self.len > 0 {
            println!("spin: windows us:{}", self);
            self.len = 0;
        }
    }
}

impl core::fmt::Display for Line {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for v in &self.values[..self.len] {
            write!(f, " {}.{}", v / 1000, v % 1000 / 100)?;
        }
        Ok(())
    }
}
