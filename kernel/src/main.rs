//! # The Tessera microkernel
//!
//! Tessera is a single-address-space microkernel in the Nemesis tradition. The kernel provides
//! mechanism only: physical frames and who owns them, translation and protection, traps, timers,
//! domains, events, activations and the CPU scheduler. Policy (paging, disk scheduling, remote
//! memory) lives at user level, in the domains that pay for it.
//!
//! Design intent, in the order it matters:
//! 1. **Validate, never trust.** Every request that crosses into the kernel is checked; bad input
//!    yields an error, never a kernel panic.
//! 2. **One address space.** A virtual address means the same thing everywhere. The kernel lives
//!    in the upper half; the lower half is for domains.
//! 3. **A thin arch layer.** Everything architecture-specific sits under [`arch`] behind a small
//!    interface (boot information, console, exit, interrupts, time); the rest of this crate is
//!    portable, and the logic that can be is in host-tested crates under `libs/`.
//! 4. **Cheap, structured tracing.** All output is defmt frames on the serial line, decoded on
//!    the host by `cargo xtask`.
//!
//! What is implemented now: boot on RISC-V (QEMU `virt`, S-mode under SBI firmware) and on
//! x86_64 (QEMU `q35`, PVH), discovery of memory and devices (the device tree; PVH's start
//! info and ACPI's MCFG) and PCI enumeration, the frame allocator with its owner table, the
//! kernel heap, kernel page tables with a guard page under the boot stack (Sv39; 4-level on
//! x86_64), trap handling with symbolized reports, one-shot timer interrupts and an in-kernel
//! test runner on both, and on both domains (`domain`: protection domains, system calls, events
//! and activations, Atropos CPU contracts, self-paging) started from the boot image.

#![no_std]
#![no_main]

extern crate alloc;

pub mod arch;
mod arena;
mod boot_info;
mod cmdline;
mod domain;
mod heap;
mod ktest;
mod log;
mod memory;
mod panic;
mod pci;
mod phys;
mod softint;
mod tests;
mod virtio_mmio;

pub use boot_info::BootInfo;

/// How the kernel ends a run; `arch::exit` turns this into the machine's exit mechanism, and
/// `cargo xtask` turns the machine's exit status back into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, defmt::Format)]
#[repr(u8)]
pub enum ExitCode {
    /// Everything that was asked for ran and passed.
    Success = 0,
    /// A kernel test failed.
    TestFailure = 1,
    /// The kernel panicked or took an unexpected trap.
    Panic = 2,
    /// The boot image or its compiled manifest failed validation.
    BootImageRejected = 3,
}

/// The portable kernel entry point, called by the arch boot code once the console works and
/// the kernel runs at its linked (upper-half) addresses.
pub fn kernel_main(boot: BootInfo) -> ! {
    defmt::info!(
        "Tessera {=str} on {=str}, firmware: {=str}",
        env!("CARGO_PKG_VERSION"),
        arch::NAME,
        boot.firmware.as_str()
    );
    let args = cmdline::Args::parse(boot.cmdline.as_str());
    memory::init(&boot);
    arch::init_platform(&boot);
    softint::schedule(&args.softint_ns);
    boot.report();
    if let Some(host) = &boot.pci {
        pci::report(host);
    }
    if let Some(status) = tests::run(&args) {
        shutdown(status)
    }
    domain::start_from_boot_image(&boot, &args);
    shutdown(ExitCode::Success)
}

/// Logs the shutdown and leaves the machine with `code`.
pub fn shutdown(code: ExitCode) -> ! {
    defmt::info!("shutdown: {}", code);
    arch::exit(code)
}
