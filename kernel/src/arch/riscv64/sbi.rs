//! The Supervisor Binary Interface: identifying the firmware, timers and a fallback console.
//!
//! Tessera runs on its own RustSBI firmware or on QEMU's bundled OpenSBI 1.1. The two differ:
//! RustSBI offers the debug console extension (DBCN) but not the legacy calls' console, OpenSBI
//! 1.1 only the legacy console, so [`console_write`] probes DBCN and falls back.

use heapless::String;
use sbi_rt::Physical;

/// Human-readable firmware identification, e.g. `RustSBI 0.4.1 (SBI 2.0)`.
pub fn describe_firmware() -> String<64> {
    use core::fmt::Write;
    let spec = sbi_rt::get_spec_version();
    let id = sbi_rt::get_sbi_impl_id();
    let v = sbi_rt::get_sbi_impl_version();
    let name = match id {
        0 => "Berkeley BBL",
        1 => "OpenSBI",
        2 => "Xvisor",
        3 => "KVM",
        4 => "RustSBI",
        5 => "Diosix",
        6 => "Coffer",
        _ => "unknown SBI",
    };
    let mut s = String::new();
    let _ = match id {
        // OpenSBI encodes its version as major << 16 | minor.
        1 => write!(s, "{name} {}.{}", v >> 16, v & 0xffff),
        // RustSBI encodes major << 16 | minor << 8 | patch.
        4 => write!(s, "{name} {}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff),
        _ => write!(s, "{name} version {v:#x}"),
    };
    let _ = write!(s, " (SBI {}.{})", spec.major(), spec.minor());
    s
}

/// Is the debug console extension there?
pub fn has_dbcn() -> bool {
    sbi_rt::probe_extension(sbi_rt::Console).is_available()
}

/// Writes text through the firmware's console: DBCN when present, else the legacy call.
/// Returns which path was used and how many bytes the firmware accepted. For use before the UART is known and for checking the
/// firmware, not for the defmt stream.
pub fn console_write(text: &[u8]) -> (&'static str, usize) {
    if has_dbcn() {
        let phys = super::virt_to_phys(text.as_ptr() as usize);
        let mut done = 0;
        while done < text.len() {
            let ret =
                sbi_rt::console_write(Physical::new(text.len() - done, phys as usize + done, 0));
            match ret.into_result() {
                Ok(n) if n > 0 => done += n,
                _ => break,
            }
        }
        ("DBCN", done)
    } else {
        #[allow(deprecated)]
        let accepted =
            text.iter().filter(|&&b| sbi_rt::legacy::console_putchar(b as usize) == 0).count();
        ("legacy", accepted)
    }
}

/// Programs the next timer interrupt at absolute time `deadline` (in timebase ticks);
/// `u64::MAX` disarms it.
pub fn set_timer(deadline: u64) {
    let _ = sbi_rt::set_timer(deadline);
}
