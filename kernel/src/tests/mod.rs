//! The kernel's own tests, run by [`crate::ktest`] when the command line asks for them, and the
//! deliberate faults that show the trap report.
//!
//! Tests run on both architectures unless marked (the domain tests run on both): RISC-V alone
//! has the SBI and ASIDs; x86_64 alone has tests of its page-table rights (NX, SMEP, SMAP), of
//! user mode through its GDT and TSS, of its user mode for domains (`syscall`, contexts, lazy
//! FP state, copies from user memory), of its local APIC timer, and of mappings read through a
//! running address space and the PCID gate. Both count, make and free an address space's
//! tables through the arch contract.

use crate::cmdline::Args;
use crate::ktest::KernelTest;
use crate::{ExitCode, ktest};

#[cfg(target_arch = "riscv64")]
mod asid;
mod faults;
mod frames;
mod paging;
#[cfg(target_arch = "riscv64")]
mod sbi;
mod space;
mod timer;
#[cfg(target_arch = "x86_64")]
mod traps;
#[cfg(target_arch = "x86_64")]
mod user;

/// Every kernel test of this architecture.
const ALL: &[KernelTest] = &[
    KernelTest { name: "frames::owner_table", run: frames::owner_table },
    KernelTest { name: "frames::heap", run: frames::heap },
    KernelTest {
        name: "frames::reserved_never_handed_out",
        run: frames::reserved_never_handed_out,
    },
    KernelTest { name: "paging::alias_and_unmap", run: paging::alias_and_unmap },
    KernelTest { name: "paging::stack_guard", run: paging::stack_guard },
    KernelTest { name: "paging::direct_map", run: paging::direct_map },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "paging::image_rights", run: paging::image_rights },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "paging::smep_smap", run: paging::smep_smap },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "traps::user_round_trip", run: traps::user_round_trip },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "traps::unexpected_interrupt", run: traps::unexpected_interrupt },
    KernelTest { name: "space::tables_counted", run: space::tables_counted },
    KernelTest { name: "space::tables_follow_mappings", run: space::tables_follow_mappings },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "space::map_protect_unmap", run: space::map_protect_unmap },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "space::switching", run: space::switching },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "user::syscall_round_trip", run: user::syscall_round_trip },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "user::restart_call", run: user::restart_call },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "user::iret_keeps_every_register", run: user::iret_keeps_every_register },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "user::faults_and_timer", run: user::faults_and_timer },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "user::fp_lazy_restore", run: user::fp_lazy_restore },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "user::copy_from_user", run: user::copy_from_user },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "user::load_words_sanitizes", run: user::load_words_sanitizes },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "user::user_ac_does_not_open_smap", run: user::user_ac_does_not_open_smap },
    #[cfg(target_arch = "riscv64")]
    KernelTest { name: "paging::asid_recycling", run: asid::recycling },
    #[cfg(target_arch = "riscv64")]
    KernelTest { name: "sbi::console", run: sbi::console },
    KernelTest { name: "domains::scrub_on_death", run: crate::domain::tests::scrub_on_death },
    KernelTest {
        name: "domains::tables_follow_mappings",
        run: crate::domain::tests::tables_follow_mappings,
    },
    KernelTest {
        name: "domains::contract_and_overlap",
        run: crate::domain::tests::contract_and_overlap,
    },
    KernelTest {
        name: "domains::event_while_waiting_for_frames",
        run: crate::domain::tests::event_while_waiting_for_frames,
    },
    KernelTest {
        name: "domains::deadlock_leaves_restarted_calls_alone",
        run: crate::domain::tests::deadlock_leaves_restarted_calls_alone,
    },
    KernelTest { name: "domains::kernel_arena", run: crate::domain::tests::kernel_arena },
    KernelTest { name: "domains::address_quota", run: crate::domain::tests::address_quota_reuse },
    KernelTest { name: "timer::rate_busy", run: timer::rate_busy },
    KernelTest { name: "timer::rate_idle", run: timer::rate_idle },
    #[cfg(target_arch = "x86_64")]
    KernelTest { name: "timer::apic_calibration", run: timer::apic_calibration },
];

/// Does what the command line asks after boot: commit a deliberate fault or run tests, and
/// returns the run's verdict; `None` if it asks for neither.
pub fn run(args: &Args<'_>) -> Option<ExitCode> {
    if let Some(kind) = args.fault {
        faults::commit(kind);
        return Some(ExitCode::TestFailure);
    }
    args.test.map(|selection| ktest::run(ALL, selection))
}
