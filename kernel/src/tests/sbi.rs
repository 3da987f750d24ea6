//! The firmware's console, as the kernel sees it.

use crate::arch::sbi;
use crate::ktest::Outcome;

/// Writes a line of text through the SBI console (DBCN when the firmware has it, the legacy
/// call otherwise). The zero bytes around it end any defmt frame, so the host shows the text as
/// a line of its own; `cargo xtask test` checks that it arrived.
pub fn console() -> Outcome {
    let path = sbi::console_write(b"\0SBI console check: written through the firmware\n\0");
    defmt::info!("sbi console: the check line went through the {=str} call", path);
    Ok(())
}
