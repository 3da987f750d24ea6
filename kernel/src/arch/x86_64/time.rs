//! Time from the TSC. Its frequency comes from CPUID leaf 0x15 (or 0x16) when the CPU reports
//! it, and is otherwise measured once at boot against channel 2 of the 8254 PIT; the local
//! APIC's timer, started by `apic::early_init`, is sampled over the same gate, which gives its
//! rate relative to the TSC for free.

use core::arch::x86_64::{__cpuid, _rdtsc};
use core::sync::atomic::{AtomicU64, Ordering};

use ::x86_64::instructions::port::Port;

/// TSC ticks per second; 0 until [`init`] has run.
static TSC_HZ: AtomicU64 = AtomicU64::new(0);

/// The 8254's input clock.
const PIT_HZ: u64 = 1_193_182;
/// The calibration gate: about 10 ms of PIT ticks.
const PIT_GATE_TICKS: u16 = 11_932;

fn rdtsc() -> u64 {
    // SAFETY: RDTSC exists on every x86_64 CPU and only reads the time-stamp counter.
    unsafe { _rdtsc() }
}

/// Ticks (of the TSC) per second.
pub fn frequency() -> u64 {
    TSC_HZ.load(Ordering::Relaxed)
}

/// TSC ticks since the machine started: the same count a domain reads with `rdtsc` (which
/// CR4.TSD, left clear, lets ring 3 run), so that the kernel's clock and the domains' agree,
/// as the `time` CSR makes them agree on RISC-V.
pub fn now_ticks() -> u64 {
    rdtsc()
}

/// Microseconds since the machine started; 0 until the TSC frequency is known.
pub fn now_us() -> u64 {
    let hz = TSC_HZ.load(Ordering::Relaxed);
    if hz == 0 {
        return 0;
    }
    let t = now_ticks();
    t / hz * 1_000_000 + t % hz * 1_000_000 / hz
}

/// Finds the TSC frequency (which may take about 10 ms); returns it.
pub(super) fn init() -> (u64, Source) {
    let (hz, source) = match cpuid_hz() {
        Some(hz) => (hz, Source::Cpuid),
        None => match pit_calibrate() {
            Some(hz) => (hz, Source::Pit),
            None => (1_000_000_000, Source::Guess),
        },
    };
    TSC_HZ.store(hz, Ordering::Relaxed);
    (hz, source)
}

/// Where the TSC frequency came from.
#[derive(Clone, Copy, PartialEq, Eq, defmt::Format)]
pub(super) enum Source {
    /// CPUID leaf 0x15 or 0x16.
    Cpuid,
    /// Measured against PIT channel 2.
    Pit,
    /// Neither CPUID nor the PIT gave a frequency; 1 GHz assumed.
    Guess,
}

/// The TSC frequency as CPUID reports it, if it does.
fn cpuid_hz() -> Option<u64> {
    let max = __cpuid(0).eax;
    if max >= 0x15 {
        let l = __cpuid(0x15);
        // eax/ebx = TSC / crystal ratio, ecx = crystal frequency in Hz.
        if l.eax != 0 && l.ebx != 0 && l.ecx != 0 {
            return Some(u64::from(l.ecx) * u64::from(l.ebx) / u64::from(l.eax));
        }
    }
    if max >= 0x16 {
        // The processor base frequency in MHz, which the TSC runs at on CPUs that have leaf
        // 0x16 but do not report their crystal.
        let mhz = __cpuid(0x16).eax & 0xffff;
        if mhz != 0 {
            return Some(u64::from(mhz) * 1_000_000);
        }
    }
    None
}

/// Counts TSC ticks while PIT channel 2 counts down about 10 ms in mode 0 (its output, read
/// at port 0x61 bit 5, rises at the terminal count), and hands the local APIC timer's count
/// over the same gate to `apic::set_rate`. `None` if the output never rises.
fn pit_calibrate() -> Option<u64> {
    let mut ctrl = Port::<u8>::new(0x61);
    let mut mode = Port::<u8>::new(0x43);
    let mut ch2 = Port::<u8>::new(0x42);
    // SAFETY: ports 0x61 (system control port B), 0x43 (PIT mode) and 0x42 (PIT channel 2) are
    // fixed PC platform registers; channel 2 drives only the PC speaker, which stays off (bit 1
    // clear), and nothing else in the kernel uses them.
    let ticks = unsafe {
        let b = ctrl.read();
        ctrl.write((b & !0x02) | 0x01); // gate 2 on, speaker off
        mode.write(0b1011_0000); // channel 2, lobyte/hibyte, mode 0, binary
        let [lo, hi] = PIT_GATE_TICKS.to_le_bytes();
        // Mode 0 drives the output low until the count runs out; high already means there
        // is no PIT or no port B (QEMU `microvm` without its PIT reads 0xff here).
        if ctrl.read() & 0x20 != 0 {
            return None;
        }
        ch2.write(lo);
        ch2.write(hi);
        let start = rdtsc();
        let apic_start = super::apic::current_count();
        let mut spins = 0u32;
        while ctrl.read() & 0x20 == 0 {
            spins += 1;
            if spins > 50_000_000 {
                return None;
            }
        }
        let ticks = rdtsc() - start;
        let apic_end = super::apic::current_count();
        ctrl.write(b & !0x03);
        super::apic::set_rate(u64::from(apic_start.wrapping_sub(apic_end)), ticks);
        ticks
    };
    let hz = ticks * PIT_HZ / u64::from(PIT_GATE_TICKS);
    // No x86_64 CPU has a TSC below 100 MHz; a smaller result means the gate misbehaved.
    (hz >= 100_000_000).then_some(hz)
}
