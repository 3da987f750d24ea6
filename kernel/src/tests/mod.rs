//! The kernel's own tests, run by [`crate::ktest`] when the command line asks for them, and the
//! deliberate faults that show the trap report.
//!
//! The tests here are portable and run on both architectures; each architecture adds the tests
//! only it has (`arch::tests::KERNEL_TESTS`: on RISC-V the SBI and ASIDs; on x86_64 its
//! page-table rights, user mode through its GDT and TSS and for domains, mappings read through
//! a running address space and the PCID gate, its local APIC timer). The memory tests run
//! first, then the architecture's, then the domains and the timers. Both architectures count,
//! make and free an address space's tables through the arch contract.

use crate::cmdline::Args;
use crate::ktest::KernelTest;
use crate::{ExitCode, arch, ktest};

mod faults;
mod frames;
mod paging;
pub(crate) mod space;
mod timer;

/// The portable tests of memory: frames, the kernel's page tables, address spaces.
const MEMORY: &[KernelTest] = &[
    KernelTest { name: "frames::owner_table", run: frames::owner_table },
    KernelTest { name: "frames::heap", run: frames::heap },
    KernelTest {
        name: "frames::reserved_never_handed_out",
        run: frames::reserved_never_handed_out,
    },
    KernelTest { name: "paging::alias_and_unmap", run: paging::alias_and_unmap },
    KernelTest { name: "paging::stack_guard", run: paging::stack_guard },
    KernelTest { name: "paging::direct_map", run: paging::direct_map },
    KernelTest { name: "space::tables_counted", run: space::tables_counted },
    KernelTest { name: "space::tables_follow_mappings", run: space::tables_follow_mappings },
];

/// The portable tests of domains and timers, which run after the architecture's.
const DOMAINS_AND_TIMERS: &[KernelTest] = &[
    KernelTest { name: "domains::scrub_on_death", run: crate::domain::tests::scrub_on_death },
    KernelTest {
        name: "domains::tables_follow_mappings",
        run: crate::domain::tests::tables_follow_mappings,
    },
    KernelTest {
        name: "domains::contract_and_overlap",
        run: crate::domain::tests::contract_and_overlap,
    },
    KernelTest { name: "domains::revocation_window", run: crate::domain::tests::revocation_window },
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
];

/// Every kernel test of this architecture, in the order `test=all` runs them.
const ALL: &[&[KernelTest]] = &[MEMORY, arch::tests::KERNEL_TESTS, DOMAINS_AND_TIMERS];

/// Does what the command line asks after boot: commit a deliberate fault or run tests, and
/// returns the run's verdict; `None` if it asks for neither.
pub fn run(args: &Args<'_>) -> Option<ExitCode> {
    if let Some(kind) = args.fault {
        faults::commit(kind);
        return Some(ExitCode::TestFailure);
    }
    args.test.map(|selection| ktest::run(ALL, selection))
}
