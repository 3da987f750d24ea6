//! The firmware's console, as the kernel sees it.

use crate::arch::sbi;
use crate::check;
use crate::ktest::Outcome;

/// Writes a line of text through the SBI console (DBCN when the firmware has it, the legacy
/// call otherwise). The zero bytes around it end any defmt frame, so the host shows the text as
/// a line of its own; `cargo xtask test` checks that it arrived. Here the kernel checks that
/// the firmware took every byte, through the call its probe says it has.
pub fn console() -> Outcome {
    let line = b"\0SBI console check: written through the firmware\n\0";
    let (path, accepted) = sbi::console_write(line);
    defmt::info!("sbi console: the check line went through the {=str} call", path);
    check!(
        accepted == line.len(),
        "the firmware took {=usize} of {=usize} bytes",
        accepted,
        line.len()
    );
    let expected = if sbi::has_dbcn() { "DBCN" } else { "legacy" };
    check!(path == expected, "used {=str} although the probe says {=str}", path, expected);
    Ok(())
}
