//! The x86_64 architecture layer: QEMU `q35` (or `pc`, `microvm`) booted through PVH, run with
//! `-cpu max`.
//!
//! Implemented: the boot code ([`boot`]) enters long mode on boot page tables, maps the kernel
//! in the upper half and hands a [`crate::BootInfo`] to [`crate::kernel_main`]; the console is
//! COM1, time is the TSC, and the machine exits through QEMU's `isa-debug-exit` device.
//! [`init_platform`] then sets up:
//!
//! - a GDT with kernel and user segments and a TSS whose IST1 is the double-fault stack and
//!   whose RSP0 is the entry stack for traps from user mode ([`gdt`]);
//! - an IDT with an entry stub for all 256 vectors, a symbolized report for every CPU
//!   exception, probes that survive faults, and a way to run user code until its first trap
//!   ([`trap`], [`probe`]; the trap frame and the exceptions' names are in [`frame`], the
//!   vectors the kernel assigns in [`vectors`]);
//! - the kernel's own 4-level page tables ([`paging`]): the image with per-section rights
//!   (text read-execute, rodata read-only, data read-write no-execute), a guard page under the
//!   boot stack and under each interrupt stack, a direct map of all RAM the boot info reports
//!   (and of everything below 4 GiB) in 1 GiB pages where the CPU has them, 2 MiB otherwise;
//!   EFER.NXE, CR4.PGE, and CR4.SMEP and CR4.SMAP where CPUID reports them ([`cpu`]);
//! - the local APIC ([`apic`]) with one-shot timer interrupts through the IDT ([`timer`]), its
//!   rate and the TSC's frequency measured at boot ([`calibrate`], for [`time`]), the legacy
//!   PICs moved and masked, the PIT's channel 0 stopped ([`interrupts`]).
//!
//! - protection domains' address spaces ([`space`]): 4-level trees sharing the kernel half,
//!   under PCIDs only where CPUID reports them (never in QEMU's TCG);
//! - user mode for domains ([`user`]): their saved contexts, `syscall` (EFER.SCE, STAR,
//!   LSTAR, SFMASK) and traps from ring 3 saved into the current context and handed to a trap
//!   handler, resuming with `sysretq` or `iretq`, copies from user memory with SMAP opened;
//!   their FP and SSE state, restored lazily through CR0.TS and #NM ([`fp`]).
//!
//! Traps from ring 3 go to the portable kernel's domains (`domain::on_user_trap`), whose boot
//! image the boot code finds in PVH's module list.
//!
//! Not implemented yet: device interrupts (I/O APIC, MSI), more than one CPU. The layout is in
//! [`layout`].

mod acpi;
pub mod apic;
mod backtrace;
mod boot;
pub mod calibrate;
pub mod cpu;
mod exit;
pub mod fp;
pub mod frame;
pub mod gdt;
pub mod interrupts;
mod ioapic;
pub mod layout;
pub mod paging;
pub mod probe;
mod serial;
pub mod space;
pub mod tests;
pub mod time;
pub mod timer;
pub mod trap;
pub mod user;
pub mod vectors;

use ::x86_64::structures::paging::PageTableFlags as Flags;
use spin::Mutex;

pub use backtrace::backtrace;
pub use boot::boot_stack;
pub use fp::FpState;
use layout::{BOOT_MAP_BYTES, DIRECT_MAP_BASE, DIRECT_MAP_BYTES, KERNEL_VMA, LAPIC_VIRT};
use paging::{PageSize, PageTable};
pub use space::AddressSpace;
pub use user::{
    Resume, UserContext, copy_from_user, copy_to_user, copy_words_from_user, enter_user,
};

/// Ends the run: with interrupts off, logs how many times a domain's FP state was loaded on
/// first use and the unexpected interrupts taken, then leaves QEMU with `code`
/// ([`exit::leave`]).
pub fn exit(code: crate::ExitCode) -> ! {
    interrupts::disable();
    let loads = fp::loads();
    if loads > 0 {
        defmt::info!("fp: {=u64} floating-point state loads on first use", loads);
    }
    interrupts::report_unexpected();
    exit::leave(code)
}

/// Called when the domain that ran in `_ctx` stops running: saves its FP registers into `fp`
/// if it may have changed them ([`fp::save`]; the state is not in the context on x86_64).
#[inline(always)]
pub fn save_fp(_ctx: &mut UserContext, fp: &mut FpState) {
    fp::save(fp);
}

/// Called when the domain whose state is `fp` is about to resume with `_ctx`: it resumes with
/// its FP registers in place or loads them on first use ([`fp::restore`]).
#[inline(always)]
pub fn restore_fp(_ctx: &mut UserContext, fp: &FpState) {
    fp::restore(fp);
}

/// The architecture's name in reports.
pub const NAME: &str = "x86_64";

/// Raw bytes to the serial line (the defmt transport).
pub mod console {
    /// Writes `bytes` to COM1 unchanged (no newline translation), initialising it on first use.
    pub fn write(bytes: &[u8]) {
        super::serial::write(bytes);
    }
}

/// The kernel's page tables, once [`init_platform`] has built them.
static KERNEL_TABLE: Mutex<Option<PageTable>> = Mutex::new(None);

/// Runs `f` with the kernel page tables (interrupts off).
pub fn with_kernel_table<R>(f: impl FnOnce(&mut PageTable) -> R) -> R {
    let _guard = super::InterruptGuard::new();
    let mut t = KERNEL_TABLE.lock();
    f(t.as_mut().expect("kernel page tables used before init_platform"))
}

/// The physical memory the direct map covers: `[0, end)`, where `end` is at least 4 GiB and at
/// least the top of RAM, once `init_platform` has built the kernel's tables.
static DIRECT_MAP_END: spin::Once<u64> = spin::Once::new();

/// How many bytes of physical memory the direct map covers, from address 0: the boot tables'
/// 4 GiB until `init_platform` has run.
pub fn direct_map_bytes() -> u64 {
    DIRECT_MAP_END.get().copied().unwrap_or(BOOT_MAP_BYTES)
}

/// The direct map: the kernel virtual address of physical address `pa`.
pub fn phys_to_virt(pa: u64) -> usize {
    debug_assert!(pa < direct_map_bytes());
    (DIRECT_MAP_BASE + pa) as usize
}

/// The physical address of a kernel virtual address in the image or the direct map.
pub fn virt_to_phys(va: usize) -> u64 {
    let va = va as u64;
    if va >= KERNEL_VMA {
        va - KERNEL_VMA
    } else {
        debug_assert!((DIRECT_MAP_BASE..DIRECT_MAP_BASE + DIRECT_MAP_BYTES).contains(&va));
        va - DIRECT_MAP_BASE
    }
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

unsafe extern "C" {
    static __text_start: u8;
    static __rodata_start: u8;
    static __data_start: u8;
    static __kernel_virt_end: u8;
}

/// The kernel image's sections as the page tables map them: (start, end, flags), each start
/// page-aligned and each section ending where the next starts.
pub fn image_sections() -> [(u64, u64, Flags); 3] {
    let text = &raw const __text_start as u64;
    let rodata = &raw const __rodata_start as u64;
    let data = &raw const __data_start as u64;
    let end = &raw const __kernel_virt_end as u64;
    [
        (text, rodata, Flags::empty()),
        (rodata, data, Flags::NO_EXECUTE),
        (data, end, Flags::WRITABLE | Flags::NO_EXECUTE),
    ]
}

/// The guard pages the kernel's tables leave unmapped: under the boot stack, the double-fault
/// stack and the entry stack.
pub fn guard_pages() -> [usize; 3] {
    [boot_stack().0, gdt::double_fault_stack().0, gdt::entry_stack().0]
}

/// Sets up what the portable kernel needs beyond boot: the GDT and TSS, the IDT, the kernel's
/// page tables (replacing the boot tables), the local APIC and its timer; then turns
/// interrupts on.
pub fn init_platform(boot: &crate::BootInfo) {
    gdt::init();
    trap::init();
    user::init();
    let features = cpu::Features::read();
    cpu::enable_paging_features(&features);
    paging::set_no_execute(features.nx);

    let mut table =
        PageTable::new(frame_allocator::Owner::Kernel).expect("no frame for the kernel root table");
    let guards = guard_pages();
    for (start, end, flags) in image_sections() {
        for va in (start..end).step_by(4096) {
            if !guards.contains(&(va as usize)) {
                table.map(va, va - KERNEL_VMA, flags).expect("mapping the kernel image");
            }
        }
    }
    // Everything below 4 GiB (RAM, and the devices' registers, which the firmware's MTRRs make
    // uncached) and all RAM above.
    let top = boot.memory.iter().map(|r| r.end).max().unwrap_or(0);
    let end = top.max(4 << 30).next_multiple_of(PageSize::Size2M.bytes());
    let large = if features.page_1g { PageSize::Size1G } else { PageSize::Size2M };
    let mut pa = 0;
    while pa < end {
        let size = if pa.is_multiple_of(large.bytes()) && end - pa >= large.bytes() {
            large
        } else {
            PageSize::Size2M
        };
        table
            .map_sized(DIRECT_MAP_BASE + pa, pa, Flags::WRITABLE | Flags::NO_EXECUTE, size)
            .expect("mapping the direct map");
        pa += size.bytes();
    }
    let lapic = apic::phys_base();
    table
        .map(
            LAPIC_VIRT,
            lapic,
            Flags::WRITABLE | Flags::NO_EXECUTE | Flags::NO_CACHE | Flags::WRITE_THROUGH,
        )
        .expect("mapping the local APIC");
    // The tables' frames were zeroed and filled through the boot tables' direct map: the
    // allocator hands out the lowest free frames first, which lie in the first 4 GiB (a frame
    // above would fault there, and the IDT installed above would report it).
    // SAFETY: the new tables map the kernel image at its link addresses with at least the
    // rights the code needs (text executable, data and stacks writable), and the direct map at
    // the same addresses as the boot tables (which now covers all RAM, the frame tables and
    // heap included); only the identity map of the first 4 GiB, which nothing uses after the
    // trampoline, is gone.
    unsafe { table.activate() };
    DIRECT_MAP_END.call_once(|| end);
    let (smep, smap) = cpu::enable_protection(&features);
    *KERNEL_TABLE.lock() = Some(table);
    space::init_pcids(features.pcid);

    apic::init();
    calibrate::apic_rate_if_unknown();
    ioapic::init(boot);
    timer::init();
    interrupts::enable();
    let (apic_ticks, tsc_ticks) = apic::rate();
    defmt::info!(
        "x86_64: kernel tables active (direct map {=u64} MiB in {=str} pages, NX {=bool}, SMEP {=bool}, SMAP {=bool}), GDT, TSS and IDT loaded, interrupts on",
        end >> 20,
        if large == PageSize::Size1G { "1 GiB" } else { "2 MiB" },
        features.nx,
        smep,
        smap
    );
    defmt::info!(
        "x86_64: timer: local APIC {=str}, TSC {=u64} Hz, APIC timer {=u64} Hz",
        if timer::tsc_deadline_mode() { "TSC-deadline" } else { "one-shot" },
        time::frequency(),
        (u128::from(apic_ticks) * u128::from(time::frequency()) / u128::from(tsc_ticks.max(1)))
            as u64
    );
}
