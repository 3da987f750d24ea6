//! # Tessera's M-mode SBI firmware for QEMU `virt` (RISC-V)
//!
//! This is what QEMU runs with `-bios`: it starts in M-mode at `0x8000_0000`, sets the machine
//! up for a supervisor (PMP open to S/U, interrupt and exception delegation, counters visible),
//! prints one text line on the UART and enters the kernel in S-mode with `a0 = hartid` and
//! `a1 = dtb`. The kernel's address comes from QEMU's `fw_dynamic_info` (passed in `a2`); when
//! that is missing or names no kernel, the firmware jumps to `0x8020_0000`. Afterwards it stays
//! resident as the SBI implementation: `ecall`s from S-mode and the machine timer interrupt trap
//! to M-mode, everything else is delegated to the kernel.
//!
//! The SBI is built on the [`rustsbi`] crate (0.4, impl id 4 "RustSBI", spec 2.0) with these
//! extensions: Base, Timer (`TIME`), Debug Console (`DBCN`: write, read, write byte) and System
//! Reset (`SRST`). The legacy v0.1 calls `set_timer` (0x00), `console_putchar` (0x01),
//! `console_getchar` (0x02, -1 when no byte waits) and `shutdown` (0x08) are handled by hand,
//! because rustsbi 0.4 has none; the other legacy calls return "not supported". Console bytes go
//! to the ns16550 UART unchanged (no `\n` to `\r\n` translation, so binary frames survive).
//!
//! Exit status convention (QEMU leaves through the `sifive_test` device):
//!
//! | SBI call | QEMU exit status |
//! |---|---|
//! | `SRST` shutdown, reason `NoReason` (0) | 0 |
//! | `SRST` shutdown, reason `SystemFailure` (1) | 1 |
//! | `SRST` shutdown, vendor reason `0xF000_0000 \| code` with `code` in 0..=255 | `code` |
//! | legacy `shutdown` (0x08) | 0 |
//! | unexpected in M-mode (an unhandled trap, a panic) | [`FIRMWARE_FAULT_EXIT`] (3) |
//!
//! A vendor code above 255 is refused with `SBI_ERR_INVALID_PARAM` (the host only sees the low
//! 8 bits of an exit status). Cold and warm reboot reset the machine through the same device.
//!
//! Not implemented (yet): more than one hart (only hart 0 boots, the others park in `wfi`, so no
//! HSM, IPI or remote-fence extensions), misaligned-access emulation (QEMU does not need it; the
//! traps are delegated to the kernel), PMU and suspend. `menvcfg.STCE` (Sstc) is set
//! ([`csr`]), so the kernel arms its timer with `stimecmp` itself; the SBI `TIME` extension
//! (through the CLINT) serves a kernel on a hart without Sstc. PMP is open to S/U, so the
//! firmware does not protect itself from the supervisor.
//!
//! All `unsafe` code sits in the modules named for the hardware it touches: [`entry`] (boot and
//! the jump to S-mode), [`trap`] (the trap vector, in assembly), [`csr`] (machine CSRs),
//! [`uart`], [`clint`], [`sifive_test`], [`fw_dynamic`] (QEMU's boot information), [`dtb`] and
//! [`phys_mem`] (the supervisor's buffers for the debug console).

#![no_std]
#![no_main]

mod clint;
mod csr;
mod dtb;
mod entry;
mod frame;
mod fw_dynamic;
mod phys_mem;
mod sbi;
mod sifive_test;
mod trap;
mod uart;

use core::fmt::Write;

/// QEMU's exit status when the firmware itself fails: an unexpected trap or a panic in M-mode.
pub const FIRMWARE_FAULT_EXIT: u8 = 3;

/// Where the kernel is entered when QEMU does not say (no valid `fw_dynamic_info`).
const DEFAULT_KERNEL_ENTRY: usize = 0x8020_0000;

/// The boot hart's Rust entry, called by [`entry`] on the M-mode stack with the registers QEMU's
/// reset vector set: `hartid`, the device tree and the `fw_dynamic_info` pointer.
fn firmware_main(hartid: usize, dtb: usize, fw_info: usize) -> ! {
    // QEMU resets `mtimecmp` to 0, which would raise a machine timer interrupt (and so a
    // spurious supervisor timer interrupt) as soon as the kernel runs.
    clint::disarm(hartid);
    csr::init_machine();
    phys_mem::init(dtb);
    let next = fw_dynamic::next_addr(fw_info).unwrap_or(DEFAULT_KERNEL_ENTRY);
    let _ = writeln!(
        uart::Writer,
        "Tessera firmware: RustSBI {}, jumping to {:#x}",
        rustsbi::VERSION,
        next
    );
    entry::enter_supervisor(next, hartid, dtb)
}

/// Prints a report and leaves QEMU with [`FIRMWARE_FAULT_EXIT`]; a fault while reporting exits at
/// once.
pub fn fatal(args: core::fmt::Arguments) -> ! {
    use core::sync::atomic::{AtomicBool, Ordering};
    static REPORTING: AtomicBool = AtomicBool::new(false);
    if !REPORTING.swap(true, Ordering::Relaxed) {
        let _ = writeln!(uart::Writer, "\nTessera firmware: FATAL: {args}");
    }
    sifive_test::exit(FIRMWARE_FAULT_EXIT)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    fatal(format_args!("panic in M-mode: {info}"))
}
