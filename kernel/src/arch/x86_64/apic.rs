//! The local APIC in xAPIC mode: its registers through a memory mapping (QEMU's TCG has no
//! x2APIC), its timer, and acknowledging interrupts.
//!
//! At boot ([`early_init`]) the APIC is reached through the boot page tables' direct map, is
//! software-enabled with every local interrupt masked, and its timer is started counting down
//! (masked) so that [`super::calibrate`] can measure its rate against the TSC over the same PIT
//! gate it uses for the TSC. [`init`] then maps the register page uncached at [`LAPIC_VIRT`] in the kernel's
//! tables and routes the timer to [`TIMER_VECTOR`], errors to their own vector, and LINT0 (the
//! legacy PIC's virtual wire) masked.
//!
//! The timer rate is kept as a ratio to the TSC (APIC ticks per TSC tick, as two counts), as
//! [`super::calibrate`] measured it ([`set_rate`]): over the boot gate or, when CPUID gave the
//! TSC's frequency and no gate ran, against the TSC alone. This module reads no clock itself.
//!
//! Not here: the I/O APIC ([`super::ioapic`]) and device interrupts ([`super::interrupts`]), inter-processor
//! interrupts other than to this CPU itself ([`send_self`], for tests), x2APIC.

use core::sync::atomic::{AtomicU64, Ordering};

use ::x86_64::registers::model_specific::Msr;

use super::layout::LAPIC_VIRT;
use super::phys_to_virt;
use super::vectors::{APIC_ERROR_VECTOR, SPURIOUS_VECTOR, TIMER_VECTOR};

/// IA32_APIC_BASE.
const APIC_BASE_MSR: u32 = 0x1b;

const ID: usize = 0x20;
const EOI: usize = 0xb0;
const SVR: usize = 0xf0;
const ISR: usize = 0x100;
const IRR: usize = 0x200;
const ESR: usize = 0x280;
const ICR_LOW: usize = 0x300;
const LVT_TIMER: usize = 0x320;
const LVT_LINT0: usize = 0x350;
const LVT_ERROR: usize = 0x370;
const TIMER_INITIAL: usize = 0x380;
const TIMER_CURRENT: usize = 0x390;
const TIMER_DIVIDE: usize = 0x3e0;

/// SVR: APIC software enable.
const SVR_ENABLE: u32 = 1 << 8;
/// LVT: masked.
const LVT_MASKED: u32 = 1 << 16;
/// LVT timer mode: TSC-deadline.
const LVT_TSC_DEADLINE: u32 = 0b10 << 17;
/// Timer divide configuration: divide by 1.
const DIVIDE_BY_1: u32 = 0b1011;

/// The virtual address of the register page.
static REGS: AtomicU64 = AtomicU64::new(0);
/// APIC timer ticks over TSC ticks, as measured: the two counts of one interval.
static RATE_APIC: AtomicU64 = AtomicU64::new(0);
static RATE_TSC: AtomicU64 = AtomicU64::new(0);

/// The APIC's physical register base, from IA32_APIC_BASE.
pub fn phys_base() -> u64 {
    // SAFETY: IA32_APIC_BASE exists on every x86_64 CPU; reading it has no side effect.
    let value = unsafe { Msr::new(APIC_BASE_MSR).read() };
    value & 0x000f_ffff_ffff_f000
}

fn read(reg: usize) -> u32 {
    let base = REGS.load(Ordering::Relaxed);
    debug_assert!(base != 0, "local APIC used before early_init");
    // SAFETY: `REGS` holds a mapping of the APIC's 4 KiB register page (the boot direct map,
    // then the uncached mapping `init` makes); `reg` is one of the 16-byte aligned register
    // offsets above, read as the 32-bit word the APIC requires.
    unsafe { ((base as usize + reg) as *const u32).read_volatile() }
}

fn write(reg: usize, value: u32) {
    let base = REGS.load(Ordering::Relaxed);
    debug_assert!(base != 0, "local APIC used before early_init");
    // SAFETY: as for `read`; writing a register changes only the APIC's state, which this
    // module owns.
    unsafe { ((base as usize + reg) as *mut u32).write_volatile(value) };
}

/// At boot, before the kernel's page tables: enables the APIC (IA32_APIC_BASE and the
/// spurious-vector register) with its timer, LINT0 and error interrupts masked, and starts its
/// timer counting down from `u32::MAX` at full rate, so that [`current_count`] can be sampled
/// while the TSC is calibrated.
pub(super) fn early_init() {
    let msr_value = {
        // SAFETY: as in `phys_base`.
        unsafe { Msr::new(APIC_BASE_MSR).read() }
    };
    if msr_value & (1 << 11) == 0 {
        // SAFETY: setting the global enable bit of IA32_APIC_BASE (keeping its base) turns on
        // the APIC the firmware left off; its local interrupts are all masked at reset.
        unsafe { Msr::new(APIC_BASE_MSR).write(msr_value | 1 << 11) };
    }
    REGS.store(phys_to_virt(phys_base()) as u64, Ordering::Relaxed);
    write(LVT_TIMER, LVT_MASKED | u32::from(TIMER_VECTOR));
    write(LVT_LINT0, LVT_MASKED);
    write(LVT_ERROR, LVT_MASKED | u32::from(APIC_ERROR_VECTOR));
    write(SVR, SVR_ENABLE | u32::from(SPURIOUS_VECTOR));
    write(TIMER_DIVIDE, DIVIDE_BY_1);
    write(TIMER_INITIAL, u32::MAX);
}

/// The timer's current count.
pub(super) fn current_count() -> u32 {
    read(TIMER_CURRENT)
}

/// Records that the APIC timer counted `apic` ticks while the TSC counted `tsc`.
pub(super) fn set_rate(apic: u64, tsc: u64) {
    RATE_APIC.store(apic, Ordering::Relaxed);
    RATE_TSC.store(tsc, Ordering::Relaxed);
}

/// The APIC timer's rate as (APIC ticks, TSC ticks) of one interval; (0, 0) until measured.
pub fn rate() -> (u64, u64) {
    (RATE_APIC.load(Ordering::Relaxed), RATE_TSC.load(Ordering::Relaxed))
}

/// Starts the timer counting down from `u32::MAX` at full rate, masked, for a measurement of
/// its rate; returns its local vector entry, for [`stop_free_run`] to restore.
pub(super) fn start_free_run() -> u32 {
    let saved = read(LVT_TIMER);
    write(LVT_TIMER, LVT_MASKED | u32::from(TIMER_VECTOR));
    write(TIMER_INITIAL, u32::MAX);
    saved
}

/// Stops the timer [`start_free_run`] started and restores its local vector entry `saved`.
pub(super) fn stop_free_run(saved: u32) {
    write(TIMER_INITIAL, 0);
    write(LVT_TIMER, saved);
}

/// After the kernel's page tables are active: uses the uncached mapping at [`LAPIC_VIRT`],
/// stops the timer, and unmasks the error interrupt; the timer's mode and vector are set by
/// [`set_timer_mode`].
pub(super) fn init() {
    REGS.store(LAPIC_VIRT, Ordering::Relaxed);
    write(TIMER_INITIAL, 0);
    write(LVT_ERROR, u32::from(APIC_ERROR_VECTOR));
    // Writing ESR latches the errors so far; they are then cleared by the next write.
    clear_errors();
}

/// Sets the timer's local vector: [`TIMER_VECTOR`], unmasked, one-shot or TSC-deadline.
pub(super) fn set_timer_mode(tsc_deadline: bool) {
    let mode = if tsc_deadline { LVT_TSC_DEADLINE } else { 0 };
    write(LVT_TIMER, mode | u32::from(TIMER_VECTOR));
}

/// Starts a one-shot count of `ticks` APIC timer ticks (0 stops the timer).
pub(super) fn start_one_shot(ticks: u32) {
    write(TIMER_INITIAL, ticks);
}

/// APIC timer ticks for `tsc_ticks` TSC ticks, rounded up.
pub(super) fn ticks_for(tsc_ticks: u64) -> u64 {
    let (apic, tsc) = rate();
    if tsc == 0 {
        return tsc_ticks;
    }
    (u128::from(tsc_ticks) * u128::from(apic)).div_ceil(u128::from(tsc)).min(u128::from(u64::MAX))
        as u64
}

/// This CPU's local APIC id (the destination of message-signalled interrupts for it).
pub fn id() -> u8 {
    (read(ID) >> 24) as u8
}

/// Signals the end of the interrupt in service.
pub fn end_of_interrupt() {
    write(EOI, 0);
}

/// Whether `vector` is in service (its ISR bit is set).
pub fn in_service(vector: u8) -> bool {
    let reg = ISR + 0x10 * (vector as usize / 32);
    read(reg) & (1 << (vector % 32)) != 0
}

/// Whether `vector` is pending (its IRR bit is set).
pub fn pending(vector: u8) -> bool {
    let reg = IRR + 0x10 * (vector as usize / 32);
    read(reg) & (1 << (vector % 32)) != 0
}

/// Sends this CPU an interrupt on `vector` (a fixed self-IPI), for tests of how the kernel
/// takes interrupts it does not expect.
pub fn send_self(vector: u8) {
    const SHORTHAND_SELF: u32 = 0b01 << 18;
    write(ICR_LOW, SHORTHAND_SELF | u32::from(vector));
}

/// Reads and clears the error status register; returns the errors it held.
pub(super) fn clear_errors() -> u32 {
    write(ESR, 0);
    let errors = read(ESR);
    write(ESR, 0);
    errors
}
