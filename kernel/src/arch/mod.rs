//! The arch interface: everything the portable kernel needs from a CPU architecture.
//!
//! Each architecture module (`riscv64`, `x86_64`) provides the same items, re-exported here.
//! Only `arch/` names an architecture in the kernel: the portable kernel reaches these items
//! without `#[cfg(target_arch)]` (checked on the host by `source_tree`'s
//! `arch_names::tests::no_architecture_named_outside_arch_files`).
//!
//!
//! | item | what it does |
//! |---|---|
//! | `NAME: &str` | the architecture's name in reports |
//! | boot entry | sets up a stack and the upper-half mapping, fills a [`crate::BootInfo`] and calls [`crate::kernel_main`] |
//! | `console::write(&[u8])` | raw bytes to the serial line (the defmt transport); usable from the first instruction of `kernel_main` |
//! | `interrupts::disable() -> bool`, `interrupts::restore(bool)` | a critical section on this CPU |
//! | `interrupts::allow_software()` | lets the software interrupts of [`crate::softint`]'s schedule through (RISC-V `sie.SSIE`; nothing on x86_64) |
//! | `time::now_ticks() -> u64`, `time::now_us() -> u64`, `time::frequency() -> u64` | monotonic time since boot, in ticks of the arch's clock (RISC-V `time`, x86_64 TSC) |
//! | `timer::set_handler(Option<Handler>)`, `timer::arm(u64)`, `timer::disarm()`, `timer::quiesce()` | one-shot timer interrupts at an absolute tick (RISC-V `stimecmp` or SBI, x86_64 local APIC) |
//! | `exit(ExitCode) -> !` | leaves QEMU with a status `cargo xtask` maps back to the code |
//! | `init_platform(&BootInfo)` | after the frame allocator and heap exist: kernel page tables, traps, timers, and every input of [`crate::boot_info::InterruptController`]s masked (RISC-V PLIC, x86_64 I/O APICs) |
//! | `phys_to_virt(u64) -> usize`, `virt_to_phys(usize) -> u64` | the kernel's direct map of physical memory (and its image) |
//! | `with_kernel_table(f)` | the kernel's page tables (`map`, `unmap`, `translate`; RISC-V `sv39`, x86_64 `paging`) |
//! | `layout::KERNEL_DYNAMIC_BASE` | where the kernel makes mappings at run time |
//! | `boot_stack() -> (usize, usize)` | the boot stack's guard page and top |
//! | `probe::{read_u64, read_u8, write_u64, write_u8, copy_words}` | accesses that report a fault instead of taking the kernel down (the wrappers are common, `probe_access`; each architecture provides the probe routines in assembly and their fix-ups) |
//! | `backtrace(&mut dyn FnMut(usize))` | calls back with each return address on the current stack (frame pointers) |
//! | `wait_for_interrupt()` | idles the CPU until the next interrupt |
//! | `tests::KERNEL_TESTS`, `tests::FAULTS` | the kernel tests and deliberate faults (`fault=KIND`) only this architecture has, which [`crate::tests`] adds to the portable ones |
//! | `tests::kernel_pages::{READ_WRITE, READ_ONLY, MapError, flush}` | the kernel page tables' rights and flush, for the portable `paging::` tests |
//!
//! To run domains an architecture also provides (see [`contract`], which states the portable
//! types and traits and checks every signature at compile time):
//!
//! | item | what it does |
//! |---|---|
//! | `UserContext: UserContextOps` | a domain's saved registers: system-call arguments, results and restart, activations |
//! | `AddressSpace: AddressSpaceOps` | a protection domain's page tables under a TLB tag |
//! | `Resume` | `contract::Resume<UserContext>`: what the trap path resumes |
//! | `FpState`, `save_fp`, `restore_fp` | a domain's floating-point state, saved and restored lazily |
//! | `enter_user(NonNull<UserContext>) -> !` | enters the first domain |
//! | `copy_from_user`, `copy_words_from_user`, `copy_to_user` | copies from and to the current address space, a fault turned into `Err` |
//! | the trap path | calls `domain::on_user_trap(UserTrap)` for each trap from user mode and resumes what it returns |
//!
//! Both architectures implement traps, timers, kernel page tables, `AddressSpace` and the
//! user-mode items (`UserContext`, the FP state, `enter_user`, the copies, the trap path), and
//! both run domains. Where the architectures differ in what the portable kernel asks of them,
//! the difference is an arch item: `interrupts::allow_software` and `interrupts::raise_software`
//! (for the command line's `softint=`, whose schedule [`crate::softint`] keeps) raise
//! supervisor software interrupts on RISC-V and self-IPIs on an unused vector on x86_64, each
//! taken in user mode.
//!
//! What both architectures would write alike is written once, here: the bookkeeping of lazy FP
//! switching (`fp_holder`), the probed accesses over each architecture's probe routines
//! (`probe_access`) and a batch's held-back TLB flushes (`flush_batch`); the `softint=`
//! schedule is the portable kernel's ([`crate::softint`]).

pub mod contract;
mod flush_batch;
mod fp_holder;
mod probe_access;
pub use contract::{AddressSpaceOps, UserContextOps, UserFault, UserTrap};

#[cfg(target_arch = "riscv64")]
mod riscv64;
#[cfg(target_arch = "riscv64")]
pub use riscv64::*;

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
pub use self::x86_64::*;

/// Interrupts off on this CPU for as long as the guard lives; restores the previous state.
pub struct InterruptGuard(bool);

impl InterruptGuard {
    /// Disables interrupts, remembering whether they were on.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        InterruptGuard(interrupts::disable())
    }
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        interrupts::restore(self.0);
    }
}
