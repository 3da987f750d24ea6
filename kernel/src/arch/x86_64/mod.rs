//! The x86_64 architecture layer: QEMU `q35` (or `pc`, `microvm`) booted through PVH, run with
//! `-cpu max`.
//!
//! The boot code ([`boot`]) enters long mode, maps the kernel in the upper half and hands a
//! [`crate::BootInfo`] to [`crate::kernel_main`]. The console is COM1, time is the TSC, and the
//! machine exits through QEMU's `isa-debug-exit` device. [`init_platform`] loads a GDT with
//! kernel and user segments and a TSS with a double-fault stack ([`gdt`]), and an IDT with an
//! entry stub for all 256 vectors that reports every CPU exception and lets probes survive
//! faults ([`trap`], [`probe`]). Kernel page tables of its own and timers come next; until then
//! the boot page tables stay in use and interrupts stay off.

mod acpi;
mod backtrace;
mod boot;
mod exit;
pub mod gdt;
pub mod interrupts;
pub mod probe;
mod serial;
pub mod time;
pub mod trap;

pub use backtrace::backtrace;
pub use exit::exit;

/// The architecture's name in reports.
pub const NAME: &str = "x86_64";

/// Whether this architecture catches CPU exceptions (and so can report a bad access).
pub const HANDLES_TRAPS: bool = true;

/// Where the boot page tables map physical address 0 for the kernel (the direct map).
const DIRECT_MAP_BASE: usize = 0xffff_8000_0000_0000;

/// How much physical memory the direct map covers (the boot page tables map 4 GiB).
const DIRECT_MAP_SIZE: u64 = 4 << 30;

/// Raw bytes to the serial line (the defmt transport).
pub mod console {
    /// Writes `bytes` to COM1 unchanged (no newline translation), initialising it on first use.
    pub fn write(bytes: &[u8]) {
        super::serial::write(bytes);
    }
}

/// Sets up what the portable kernel needs beyond boot: the GDT and TSS, then the IDT. Kernel
/// page tables and timers are not implemented on x86_64 yet.
pub fn init_platform(_boot: &crate::BootInfo) {
    gdt::init();
    trap::init();
    defmt::info!(
        "x86_64: GDT, TSS and IDT loaded; no kernel page tables (boot tables in use) or timer yet"
    );
}

/// The kernel's virtual address for physical address `pa`, through the direct map (which covers
/// the first 4 GiB of physical memory).
pub fn phys_to_virt(pa: u64) -> usize {
    DIRECT_MAP_BASE + pa as usize
}

/// Idles the CPU until the next interrupt, leaving the interrupt flag as it was.
pub fn wait_for_interrupt() {
    if ::x86_64::instructions::interrupts::are_enabled() {
        ::x86_64::instructions::hlt();
    } else {
        // `sti; hlt` takes an interrupt that is pending or arrives while halted; `cli` then
        // restores the caller's state.
        ::x86_64::instructions::interrupts::enable_and_hlt();
        ::x86_64::instructions::interrupts::disable();
    }
}
