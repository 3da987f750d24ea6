//! Measuring the clocks at boot: the TSC's frequency and the local APIC timer's rate relative
//! to the TSC, in one place, so that neither [`super::time`] nor [`super::apic`] needs the
//! other.
//!
//! The TSC's frequency comes from CPUID leaf 0x15 (or 0x16) when the CPU reports it, and is
//! otherwise measured once at boot against channel 2 of the 8254 PIT ([`init`]); the local
//! APIC's timer, started by `apic::early_init`, is sampled over the same gate, which gives its
//! rate relative to the TSC for free. When no gate ran, the rate is measured against the TSC
//! alone once the APIC is mapped ([`apic_rate_if_unknown`], [`apic_against_tsc`]). The results
//! go to [`time::set_frequency`] and [`apic::set_rate`].

use core::arch::x86_64::__cpuid;

use ::x86_64::instructions::port::Port;

use super::{apic, time};

/// The 8254's input clock.
const PIT_HZ: u64 = 1_193_182;
/// The calibration gate: about 10 ms of PIT ticks.
const PIT_GATE_TICKS: u16 = 11_932;

/// Finds the TSC frequency (which may take about 10 ms); returns it.
pub(super) fn init() -> (u64, Source) {
    let (hz, source) = match cpuid_hz() {
        Some(hz) => (hz, Source::Cpuid),
        None => match pit_calibrate() {
            Some(hz) => (hz, Source::Pit),
            None => (1_000_000_000, Source::Guess),
        },
    };
    time::set_frequency(hz);
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
/// over the same gate to [`apic::set_rate`]. `None` if the output never rises.
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
        let start = time::now_ticks();
        let apic_start = apic::current_count();
        let mut spins = 0u32;
        while ctrl.read() & 0x20 == 0 {
            spins += 1;
            if spins > 50_000_000 {
                return None;
            }
        }
        let ticks = time::now_ticks() - start;
        let apic_end = apic::current_count();
        ctrl.write(b & !0x03);
        apic::set_rate(u64::from(apic_start.wrapping_sub(apic_end)), ticks);
        ticks
    };
    let hz = ticks * PIT_HZ / u64::from(PIT_GATE_TICKS);
    // No x86_64 CPU has a TSC below 100 MHz; a smaller result means the gate misbehaved.
    (hz >= 100_000_000).then_some(hz)
}

/// After [`apic::init`]: if no PIT gate measured the APIC timer's rate at boot, measures it
/// against the TSC over 10 ms and records it.
pub(super) fn apic_rate_if_unknown() {
    if apic::rate().0 == 0 {
        let hz = time::frequency();
        let (apic, tsc) = apic_against_tsc(hz / 100);
        apic::set_rate(apic, tsc);
    }
}

/// Measures the APIC timer against the TSC over `tsc_ticks` TSC ticks; returns the counts
/// (APIC ticks, TSC ticks). Leaves the timer stopped.
pub fn apic_against_tsc(tsc_ticks: u64) -> (u64, u64) {
    let _interrupts = super::super::InterruptGuard::new();
    let saved = apic::start_free_run();
    let start_count = apic::current_count();
    let start = time::now_ticks();
    let mut now = start;
    while now - start < tsc_ticks {
        core::hint::spin_loop();
        now = time::now_ticks();
    }
    let end_count = apic::current_count();
    let tsc = time::now_ticks() - start;
    apic::stop_free_run(saved);
    (u64::from(start_count - end_count), tsc)
}
