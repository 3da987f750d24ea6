//! RISC-V 64 (QEMU `virt`, S-mode under SBI firmware): boot, console, traps, timer, Sv39.
//!
//! CSRs are reached through the `riscv` crate's register modules (`sstatus`, `sie`, `sip`,
//! `satp`, `stvec`, `sscratch`, `scause`, `stval`, `scounteren`, `time`) and its `wfi` and
//! `sfence.vma` wrappers. Raw `asm!` is left only for what the crate lacks: `stimecmp` (Sstc,
//! `timer.rs` and the probe in `probe.rs`), `sfence.vma` with rs1 or rs2 = `zero` (`sv39.rs`),
//! the floating-point loads and stores (`fp.rs`), reading the frame pointer, and the code that
//! runs without a Rust stack or frame: `_start`, the trap vector and the probes.

pub mod console;
mod device_tree;
mod entry;
pub mod fp;
mod frame;
pub mod interrupts;
pub mod layout;
mod plic;
pub mod probe;
pub mod sbi;
pub mod sv39;
pub mod tests;
pub mod timer;
mod trap;
pub mod user;

use spin::Mutex;

use crate::{BootInfo, ExitCode};
use layout::{DIRECT_MAP_BASE, DIRECT_MAP_BYTES, KERNEL_PHYS, KERNEL_VIRT};
use sv39::{PTE_G, PTE_R, PTE_W, PTE_X, PageTable};

/// The architecture's name in reports.
pub const NAME: &str = "riscv64";

pub use entry::boot_stack;
pub use fp::{FpState, restore_fp, save_fp};
pub use user::{
    AddressSpace, Resume, UserContext, copy_from_user, copy_to_user, copy_words_from_user,
    enter_user,
};

/// The kernel's page tables, once [`init_platform`] has built them.
static KERNEL_TABLE: Mutex<Option<PageTable>> = Mutex::new(None);

/// Runs `f` with the kernel page tables (interrupts off).
pub fn with_kernel_table<R>(f: impl FnOnce(&mut PageTable) -> R) -> R {
    let _guard = super::InterruptGuard::new();
    let mut t = KERNEL_TABLE.lock();
    f(t.as_mut().expect("kernel page tables used before init_platform"))
}

/// Time from the `time` CSR.
pub mod time {
    use core::sync::atomic::{AtomicU64, Ordering};

    static HZ: AtomicU64 = AtomicU64::new(10_000_000);

    pub(super) fn set_frequency(hz: u64) {
        HZ.store(hz, Ordering::Relaxed);
    }

    /// Ticks per second.
    pub fn frequency() -> u64 {
        HZ.load(Ordering::Relaxed)
    }

    /// Ticks since the machine started.
    pub fn now_ticks() -> u64 {
        // The firmware lets S-mode read `time` (`mcounteren.TM`).
        riscv::register::time::read() as u64
    }

    /// Microseconds since the machine started.
    pub fn now_us() -> u64 {
        let hz = frequency();
        ((now_ticks() as u128 * 1_000_000) / hz as u128) as u64
    }
}

/// The direct map: the kernel virtual address of physical address `pa`.
pub fn phys_to_virt(pa: u64) -> usize {
    debug_assert!(pa < DIRECT_MAP_BYTES);
    (DIRECT_MAP_BASE + pa) as usize
}

/// The physical address of a kernel virtual address in the image or the direct map.
pub fn virt_to_phys(va: usize) -> u64 {
    let va = va as u64;
    if va >= KERNEL_VIRT { va - KERNEL_VIRT + KERNEL_PHYS } else { va - DIRECT_MAP_BASE }
}

/// Leaves QEMU through the `sifive_test` device: status 0 for success, else the code.
pub fn exit(code: ExitCode) -> ! {
    const SIFIVE_TEST: u64 = 0x10_0000;
    let value: u32 = match code {
        ExitCode::Success => 0x5555,
        other => ((other as u32) << 16) | 0x3333,
    };
    interrupts::disable();
    let loads = fp::loads();
    if loads > 0 {
        defmt::info!("fp: {=u64} floating-point state loads on first use", loads);
    }
    interrupts::report_unexpected();
    // SAFETY: QEMU virt's test device sits at 0x100000 (in the direct map); writing it ends the
    // machine, which is what we want here.
    unsafe { (phys_to_virt(SIFIVE_TEST) as *mut u32).write_volatile(value) };
    loop {
        wait_for_interrupt();
    }
}

/// Idles until an interrupt is pending. The kernel idles with interrupts off (`wfi` wakes on
/// a pending interrupt all the same), so a device's interrupt is taken here: its PLIC sources
/// are claimed and raised for delivery ([`interrupts::on_external`]).
pub fn wait_for_interrupt() {
    riscv::asm::wfi();
    if riscv::register::sip::read().sext() {
        interrupts::on_external();
    }
}

/// Calls `f` with each return address on the current stack.
pub fn backtrace(f: &mut dyn FnMut(usize)) {
    let fp: usize;
    // SAFETY: reading the frame pointer register.
    unsafe { core::arch::asm!("mv {0}, fp", out(reg) fp) };
    walk_frames(fp, f);
}

/// Walks frame-pointer records from `fp`: the return address is at `fp - 8`, the caller's frame
/// pointer at `fp - 16`. Stops at a null, misaligned or non-kernel frame pointer.
pub(crate) fn walk_frames(mut fp: usize, f: &mut dyn FnMut(usize)) {
    for _ in 0..32 {
        if fp == 0 || !fp.is_multiple_of(8) || (fp as u64) < DIRECT_MAP_BASE {
            return;
        }
        let (Some(ra), Some(prev)) = (probe::read_u64(fp - 8), probe::read_u64(fp - 16)) else {
            return;
        };
        if ra == 0 {
            return;
        }
        f(ra as usize);
        fp = prev as usize;
    }
}

unsafe extern "C" {
    static __kernel_start: u8;
    static __text_end: u8;
    static __rodata_end: u8;
    static __kernel_end: u8;
}

/// Builds the kernel page tables (image with per-section rights, guard page under the boot
/// stack left unmapped, direct map of all RAM and MMIO), switches to them, and starts traps and
/// the timer.
pub fn init_platform(boot: &BootInfo) {
    time::set_frequency(boot.timebase_hz);
    trap::init();
    // SAFETY: setting `scounteren.TM` only lets user mode read the `time` CSR (the same clock
    // every domain can ask for with the `time` call), so domains can timestamp without a trap.
    unsafe { riscv::register::scounteren::set_tm() };
    let mut table =
        PageTable::new(frame_allocator::Owner::Kernel).expect("no frame for the kernel root table");
    let text = &raw const __kernel_start as u64;
    let rodata = &raw const __text_end as u64;
    let data = &raw const __rodata_end as u64;
    let end = &raw const __kernel_end as u64;
    let (guard, _) = boot_stack();
    let mut va = text;
    while va < end {
        let flags = if va < rodata {
            PTE_R | PTE_X
        } else if va < data {
            PTE_R
        } else {
            PTE_R | PTE_W
        };
        if va != guard as u64 {
            table
                .map(va, va - KERNEL_VIRT + KERNEL_PHYS, flags | PTE_G)
                .expect("mapping the kernel");
        }
        va += 4096;
    }
    let top = boot.memory.iter().map(|r| r.end).max().unwrap_or(0).min(DIRECT_MAP_BYTES);
    let mut pa = 0;
    while pa < top {
        table
            .map_gigapage(DIRECT_MAP_BASE + pa, pa, PTE_R | PTE_W | PTE_G)
            .expect("mapping the direct map");
        pa += 1 << 30;
    }
    let asid_bits = sv39::probe_asid_bits(&table);
    user::init_asids(asid_bits);
    *KERNEL_TABLE.lock() = Some(table);
    plic::init(boot);
    timer::init();
    interrupts::enable();
    let dbcn = sbi::has_dbcn();
    defmt::info!(
        "riscv64: Sv39 kernel tables active ({=u32} ASID bits), traps on, timer {=u64} Hz, SBI console: {=str}",
        asid_bits,
        time::frequency(),
        if dbcn { "DBCN" } else { "legacy" }
    );
}
