//! CPU features the kernel uses, from CPUID, and the control-register bits that turn them on.

use core::arch::x86_64::{__cpuid, __cpuid_count};

use ::x86_64::registers::control::{Cr4, Cr4Flags};
use ::x86_64::registers::model_specific::{Efer, EferFlags};

/// What CPUID reports of the features the kernel uses.
#[derive(Clone, Copy, Debug, defmt::Format)]
pub struct Features {
    /// Execute-disable pages (CPUID.80000001H:EDX[20]).
    pub nx: bool,
    /// 1 GiB pages (CPUID.80000001H:EDX[26]).
    pub page_1g: bool,
    /// Global pages (CPUID.01H:EDX[13]).
    pub global_pages: bool,
    /// Supervisor-mode execution prevention (CPUID.(07H,0):EBX[7]).
    pub smep: bool,
    /// Supervisor-mode access prevention (CPUID.(07H,0):EBX[20]).
    pub smap: bool,
    /// The local APIC timer's TSC-deadline mode (CPUID.01H:ECX[24]).
    pub tsc_deadline: bool,
    /// Process-context identifiers (CPUID.01H:ECX[17]); QEMU's TCG has none.
    pub pcid: bool,
}

impl Features {
    /// Reads the features from CPUID.
    pub fn read() -> Self {
        let max = __cpuid(0).eax;
        let max_ext = __cpuid(0x8000_0000).eax;
        let leaf1 = __cpuid(1);
        let ext = if max_ext >= 0x8000_0001 { __cpuid(0x8000_0001).edx } else { 0 };
        let leaf7 = if max >= 7 { __cpuid_count(7, 0).ebx } else { 0 };
        Features {
            nx: ext & (1 << 20) != 0,
            page_1g: ext & (1 << 26) != 0,
            global_pages: leaf1.edx & (1 << 13) != 0,
            smep: leaf7 & (1 << 7) != 0,
            smap: leaf7 & (1 << 20) != 0,
            tsc_deadline: leaf1.ecx & (1 << 24) != 0,
            pcid: leaf1.ecx & (1 << 17) != 0,
        }
    }
}

/// Turns on EFER.NXE (if `f.nx`) and CR4.PGE (if `f.global_pages`): what the kernel's page
/// tables use. Before the tables are active.
pub fn enable_paging_features(f: &Features) {
    if f.nx {
        // SAFETY: CPUID reports NX; with NXE set, bit 63 of a page-table entry means
        // no-execute instead of being reserved. The boot tables never set it.
        unsafe { Efer::update(|e| *e |= EferFlags::NO_EXECUTE_ENABLE) };
    }
    if f.global_pages {
        // SAFETY: CPUID reports global pages; PGE only lets TLB entries of global mappings
        // survive CR3 writes, and the kernel half, the only global part, is the same in every
        // tree.
        unsafe { Cr4::update(|c| *c |= Cr4Flags::PAGE_GLOBAL) };
    }
}

/// Turns on CR4.SMEP and CR4.SMAP where CPUID reports them: the kernel then faults if it
/// executes or touches a user page (it never means to; copies from domains will open SMAP
/// around themselves). Returns which it turned on.
pub fn enable_protection(f: &Features) -> (bool, bool) {
    let mut flags = Cr4Flags::empty();
    if f.smep {
        flags |= Cr4Flags::SUPERVISOR_MODE_EXECUTION_PROTECTION;
    }
    if f.smap {
        flags |= Cr4Flags::SUPERVISOR_MODE_ACCESS_PREVENTION;
    }
    // SAFETY: CPUID reports each bit set here. No user page is mapped when this runs, and the
    // kernel neither executes nor accesses user pages, so nothing that runs now faults.
    unsafe { Cr4::update(|c| *c |= flags) };
    let cr4 = Cr4::read();
    (
        cr4.contains(Cr4Flags::SUPERVISOR_MODE_EXECUTION_PROTECTION),
        cr4.contains(Cr4Flags::SUPERVISOR_MODE_ACCESS_PREVENTION),
    )
}
