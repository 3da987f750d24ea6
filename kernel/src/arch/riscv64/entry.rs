//! Boot entry: from the firmware's jump (physical addresses, no paging) to `kernel_main`
//! running in the upper half.
//!
//! The firmware enters `_start` in S-mode at the kernel's load address with `a0` = hart id and
//! `a1` = the device tree's physical address. A static boot page table maps, with 1 GiB pages:
//! the first 4 GiB identically (so the instruction after `satp` is written still fetches), the
//! same 4 GiB at the direct map base, and the kernel's gigabyte at `KERNEL_VIRT`. `_start`
//! enables it, jumps to the upper half, zeroes `.bss`, takes the boot stack (with an unmapped
//! guard page below it once the kernel page tables are built) and calls [`rust_start`].

use core::arch::global_asm;

use super::layout::{DIRECT_MAP_BASE, KERNEL_PHYS, KERNEL_VIRT};
use super::sv39::{PTE_A, PTE_D, PTE_G, PTE_R, PTE_V, PTE_W, PTE_X};

/// Bytes of boot stack.
pub const BOOT_STACK_BYTES: usize = 64 * 1024;

#[repr(C, align(4096))]
struct BootPageTable([u64; 512]);

const fn boot_page_table() -> BootPageTable {
    const GIB: u64 = 1 << 30;
    const FLAGS: u64 = PTE_V | PTE_R | PTE_W | PTE_X | PTE_A | PTE_D | PTE_G;
    let mut t = [0u64; 512];
    let mut i = 0;
    while i < 4 {
        let pa = i as u64 * GIB;
        t[i] = ((pa >> 12) << 10) | FLAGS;
        t[((DIRECT_MAP_BASE >> 30) & 0x1ff) as usize + i] = ((pa >> 12) << 10) | FLAGS;
        i += 1;
    }
    let kernel_gib = KERNEL_PHYS & !(GIB - 1);
    t[((KERNEL_VIRT >> 30) & 0x1ff) as usize] = ((kernel_gib >> 12) << 10) | FLAGS;
    BootPageTable(t)
}

#[unsafe(link_section = ".data.boot_page_table")]
static BOOT_PAGE_TABLE: BootPageTable = boot_page_table();

global_asm!(
    r#"
    .section .bss.stack, "aw", @nobits
    .balign 4096
    .globl __boot_stack_guard
__boot_stack_guard:
    .space 4096
    .globl __boot_stack_bottom
__boot_stack_bottom:
    .space {stack_bytes}
    .globl __boot_stack_top
__boot_stack_top:

    .section .text.entry, "ax", @progbits
    .globl _start
_start:
    lla     t0, {boot_pt}
    srli    t0, t0, 12
    li      t1, 8 << 60
    or      t0, t0, t1
    csrw    satp, t0
    sfence.vma
    li      t1, {offset}
    lla     t2, 1f
    add     t2, t2, t1
    jr      t2
1:
    lla     sp, __boot_stack_top
    lla     t0, __bss_start
    lla     t1, __bss_end
2:
    bgeu    t0, t1, 3f
    sd      zero, 0(t0)
    addi    t0, t0, 8
    j       2b
3:
    li      fp, 0
    li      ra, 0
    call    {rust_start}
4:
    wfi
    j       4b
    "#,
    boot_pt = sym BOOT_PAGE_TABLE,
    offset = const (KERNEL_VIRT - KERNEL_PHYS) as i64,
    stack_bytes = const BOOT_STACK_BYTES,
    rust_start = sym rust_start,
);

unsafe extern "C" {
    static __boot_stack_guard: u8;
    static __boot_stack_top: u8;
}

/// The guard page under the boot stack and the stack's top (virtual addresses).
pub fn boot_stack() -> (usize, usize) {
    (&raw const __boot_stack_guard as usize, &raw const __boot_stack_top as usize)
}

/// First Rust code: discovers the machine and enters the portable kernel.
extern "C" fn rust_start(hart: usize, dtb: usize) -> ! {
    super::plic::set_hart(hart);
    let boot = super::device_tree::boot_info(hart, dtb as u64);
    crate::kernel_main(boot)
}
