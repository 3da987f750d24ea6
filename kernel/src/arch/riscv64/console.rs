//! The serial console: the device tree's ns16550 UART, written directly (binary-safe, no
//! newline translation), reached through the direct map.

use core::sync::atomic::{AtomicU64, Ordering};

/// QEMU virt's UART, used until the device tree says otherwise.
static BASE: AtomicU64 = AtomicU64::new(0x1000_0000);

const THR: usize = 0;
const LSR: usize = 5;
const LSR_THR_EMPTY: u8 = 1 << 5;

/// Points the console at the UART whose registers start at physical address `base`.
pub fn set_base(base: u64) {
    BASE.store(base, Ordering::Relaxed);
}

/// Writes `bytes` to the UART, waiting for room before each byte.
pub fn write(bytes: &[u8]) {
    let regs = super::phys_to_virt(BASE.load(Ordering::Relaxed)) as *mut u8;
    for &b in bytes {
        // SAFETY: `regs` is the UART's register window in the direct map (the boot page table and
        // the kernel page tables both map all MMIO below 4 GiB); LSR and THR are byte registers,
        // and volatile accesses are how device registers must be touched.
        unsafe {
            while regs.add(LSR).read_volatile() & LSR_THR_EMPTY == 0 {}
            regs.add(THR).write_volatile(b);
        }
    }
}
