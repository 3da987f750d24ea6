//! Kernel panics: a report with the message, the location and a backtrace, then a failure exit.
//!
//! Return addresses are logged as `ret=0x...`; `cargo xtask` resolves them to symbols from the
//! kernel ELF when it decodes the log.

use crate::{ExitCode, arch};

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    arch::interrupts::disable();
    defmt::error!("panic: {}", defmt::Display2Format(info));
    backtrace();
    crate::shutdown(ExitCode::Panic)
}

/// Logs the return addresses on the current stack, innermost first.
pub fn backtrace() {
    defmt::error!("backtrace:");
    let mut depth = 0usize;
    arch::backtrace(&mut |pc| {
        defmt::error!("  #{=usize} ret={=u64:#x}", depth, pc as u64);
        depth += 1;
    });
}
