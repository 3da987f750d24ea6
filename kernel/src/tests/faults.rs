//! Deliberate faults (`fault=KIND` on the command line), to show and test the trap report:
//! `load` (from an unmapped address), `stack-overflow` (into the boot stack's guard page),
//! `panic`, and on x86_64 `illegal-instruction` (`ud2`) and `breakpoint` (`int3`).

/// The kinds this architecture knows.
#[cfg(target_arch = "x86_64")]
const KINDS: &str = "load, stack-overflow, illegal-instruction, breakpoint, panic";
#[cfg(not(target_arch = "x86_64"))]
const KINDS: &str = "load, stack-overflow, panic";

/// Commits the fault named `kind`; returns only if the kind is unknown or needs trap handling
/// that this architecture does not have yet. Never inlined: the panic report's backtrace names
/// it, which `fault::panic` checks.
#[inline(never)]
pub fn commit(kind: &str) {
    let needs_traps = matches!(kind, "load" | "stack-overflow");
    if needs_traps && !crate::arch::HANDLES_TRAPS {
        defmt::error!(
            "fault={=str}: {=str} does not catch CPU exceptions yet",
            kind,
            crate::arch::NAME
        );
        return;
    }
    match kind {
        "load" => {
            deliberate_bad_access();
        }
        "stack-overflow" => {
            defmt::info!("fault: recursing until the boot stack overflows");
            recurse(0);
        }
        "panic" => panic!("deliberate panic requested on the command line"),
        #[cfg(target_arch = "x86_64")]
        "illegal-instruction" => crate::arch::trap::illegal_instruction(),
        #[cfg(target_arch = "x86_64")]
        "breakpoint" => crate::arch::trap::breakpoint(),
        other => defmt::error!("fault={=str}: unknown kind ({=str})", other, KINDS),
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
