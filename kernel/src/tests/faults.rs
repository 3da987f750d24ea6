//! Deliberate faults (`fault=KIND` on the command line), to show and test the trap report:
//! `load` (from an unmapped address), `stack-overflow` (into the boot stack's guard page),
//! `panic`, and those of the architecture's `arch::tests::FAULTS` (on x86_64
//! `illegal-instruction`, `ud2`, and `breakpoint`, `int3`).

use crate::arch;

/// Commits the fault named `kind`; returns only if the kind is unknown. Never inlined: the panic report's backtrace names
/// it, which `fault::panic` checks.
#[inline(never)]
pub fn commit(kind: &str) {
    match kind {
        "load" => {
            deliberate_bad_access();
        }
        "stack-overflow" => {
            defmt::info!("fault: recursing until the boot stack overflows");
            recurse(0);
        }
        "panic" => panic!("deliberate panic requested on the command line"),
        other => match arch::tests::FAULTS.iter().find(|(k, _)| *k == other) {
            Some((_, fault)) => {
                fault();
                // Not reached; the call after it keeps this frame in the trap's backtrace.
                defmt::error!("fault={=str}: the fault returned", other);
            }
            None => {
                defmt::error!("fault={=str}: unknown kind (load, stack-overflow, panic)", other);
                for (k, _) in arch::tests::FAULTS {
                    defmt::error!("fault: {=str} is a kind of this architecture too", k);
                }
            }
        },
    }
}

/// Loads from an address nothing maps (the lower half is empty until domains exist).
#[inline(never)]
fn deliberate_bad_access() -> u64 {
    let bad = core::hint::black_box(0x0000_0012_3456_7000usize) as *const u64;
    defmt::info!("fault: loading from {=u64:#x}", bad as u64);
    // SAFETY: deliberately unsound: this load faults, and the trap handler must report it.
    unsafe { bad.read_volatile() }
}

/// Recurses until the stack runs into its guard page (the bound is never reached: 64 KiB of
/// stack hold far fewer than a million 512-byte frames).
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let pad = core::hint::black_box([depth; 64]);
    if depth > 1_000_000 { pad[0] } else { pad[1] + recurse(depth + 1) }
}
