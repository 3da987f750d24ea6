//! The local APIC timer against the TSC (`timer::apic_calibration`).

use core::sync::atomic::{AtomicU64, Ordering};

use crate::arch::{calibrate, time, timer};
use crate::check;
use crate::ktest::Outcome;

/// The local APIC timer's rate measured against the TSC over 10 ms now (the way the kernel
/// measures it when CPUID states the TSC's frequency) agrees with the rate measured at boot
/// over the PIT gate to within 0.1%; and a one-shot interrupt armed 2 ms ahead comes no
/// earlier than its deadline and less than 1% of the wait after it (in virtual time, as the
/// suite runs kernel tests; on the host's clock QEMU may take the interrupt later).
pub fn apic_calibration() -> Outcome {
    use crate::arch::apic;
    let (boot_apic, boot_tsc) = apic::rate();
    check!(boot_tsc > 0, "no APIC timer rate was measured at boot");
    let hz = time::frequency();
    let (apic, tsc) = calibrate::apic_against_tsc(hz / 100);
    // Rates as APIC ticks per million TSC ticks.
    let at_boot = boot_apic as u128 * 1_000_000 / boot_tsc as u128;
    let now = apic as u128 * 1_000_000 / tsc as u128;
    defmt::info!(
        "timer: APIC ticks per million TSC ticks: {=u128} at boot, {=u128} now",
        at_boot,
        now
    );
    check!(
        at_boot.abs_diff(now) * 1000 <= at_boot,
        "rates differ by more than 0.1%: {=u128} and {=u128}",
        at_boot,
        now
    );

    static FIRED: AtomicU64 = AtomicU64::new(0);
    fn note(now: u64) {
        FIRED.store(now, Ordering::Relaxed);
    }
    FIRED.store(0, Ordering::Relaxed);
    timer::set_handler(Some(note));
    let wait = hz / 500;
    let deadline = time::now_ticks() + wait;
    timer::arm(deadline);
    while FIRED.load(Ordering::Relaxed) == 0 && time::now_ticks() < deadline + wait {
        core::hint::spin_loop();
    }
    timer::disarm();
    timer::set_handler(None);
    let fired = FIRED.load(Ordering::Relaxed);
    check!(fired != 0, "no interrupt within twice the wait");
    defmt::info!(
        "timer: one-shot interrupt {=i64} ticks after its deadline",
        fired as i64 - deadline as i64
    );
    check!(fired >= deadline, "the interrupt came {=u64} ticks early", deadline - fired);
    check!(
        (fired - deadline) * 100 < wait,
        "the interrupt came {=u64} ticks late after a wait of {=u64}",
        fired - deadline,
        wait
    );
    Ok(())
}
