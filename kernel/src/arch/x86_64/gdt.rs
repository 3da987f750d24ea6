//! The global descriptor table, the task state segment and the kernel's interrupt stacks.
//!
//! The GDT holds the null descriptor, the kernel's code and data segments, the user data and
//! code segments (in the order `SYSRET` expects: user data at STAR's base + 8, user 64-bit
//! code at + 16) and the TSS. The TSS gives two stacks, each a 16 KiB stack in `.bss` with an
//! unmapped guard page below it once the kernel's page tables are in use:
//!
//! - IST1, the **double-fault stack**: the double fault's gate switches to it, so that a
//!   kernel stack overflow (a page fault that cannot push its frame) is still reported;
//! - RSP0, the **entry stack**: where the CPU puts the frame of an interrupt or exception
//!   taken in user mode, and where `syscall`'s entry moves ([`super::user`]); the kernel tests
//!   `traps::user_round_trip` and `user::*` exercise them.
//!
//! Not here: `SYSCALL`/`SYSRET`, set up by [`super::user`] (STAR names these segments);
//! `SWAPGS`, per-CPU data and a GDT and TSS per CPU when there is more than one.

use ::x86_64::VirtAddr;
use ::x86_64::instructions::segmentation::{CS, DS, ES, SS, Segment};
use ::x86_64::instructions::tables::load_tss;
use ::x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use ::x86_64::structures::tss::TaskStateSegment;
use spin::Once;

/// The kernel's code segment selector.
pub const KERNEL_CODE: u16 = 0x08;
/// The kernel's data (and stack) segment selector.
pub const KERNEL_DATA: u16 = 0x10;
/// The user data (and stack) segment selector, RPL 3.
pub const USER_DATA: u16 = 0x18 | 3;
/// The user 64-bit code segment selector, RPL 3.
pub const USER_CODE: u16 = 0x20 | 3;
/// The TSS selector.
pub const TSS: u16 = 0x28;

/// The double fault's entry in the interrupt stack table (IST1, index 0).
pub const DOUBLE_FAULT_IST: u16 = 0;

/// Bytes of each interrupt stack.
pub const STACK_BYTES: usize = 16 * 1024;

core::arch::global_asm!(
    r#"
    .pushsection .bss.interrupt_stacks, "aw", @nobits
    .balign 4096
    .globl __double_fault_stack_guard
__double_fault_stack_guard:
    .skip 4096
    .skip {stack}
    .globl __double_fault_stack_top
__double_fault_stack_top:
    .globl __entry_stack_guard
__entry_stack_guard:
    .skip 4096
    .skip {stack}
    .globl __entry_stack_top
__entry_stack_top:
    .popsection
    "#,
    stack = const STACK_BYTES,
);

unsafe extern "C" {
    static __double_fault_stack_guard: u8;
    static __double_fault_stack_top: u8;
    static __entry_stack_guard: u8;
    static __entry_stack_top: u8;
}

/// The double-fault stack: its guard page and its top.
pub fn double_fault_stack() -> (usize, usize) {
    (&raw const __double_fault_stack_guard as usize, &raw const __double_fault_stack_top as usize)
}

/// The entry stack (TSS.RSP0): its guard page and its top.
pub fn entry_stack() -> (usize, usize) {
    (&raw const __entry_stack_guard as usize, &raw const __entry_stack_top as usize)
}

static TSS_ONCE: Once<TaskStateSegment> = Once::new();
static GDT: Once<GlobalDescriptorTable> = Once::new();

/// Builds the TSS and the GDT, loads the GDT, reloads every segment register from it and
/// loads the task register.
pub fn init() {
    let tss = TSS_ONCE.call_once(|| {
        let mut tss = TaskStateSegment::new();
        tss.interrupt_stack_table[DOUBLE_FAULT_IST as usize] =
            VirtAddr::new(double_fault_stack().1 as u64);
        tss.privilege_stack_table[0] = VirtAddr::new(entry_stack().1 as u64);
        tss
    });
    let gdt = GDT.call_once(|| {
        let mut gdt = GlobalDescriptorTable::new();
        let selectors = [
            gdt.append(Descriptor::kernel_code_segment()),
            gdt.append(Descriptor::kernel_data_segment()),
            gdt.append(Descriptor::user_data_segment()),
            gdt.append(Descriptor::user_code_segment()),
            gdt.append(Descriptor::tss_segment(tss)),
        ];
        let want = [KERNEL_CODE, KERNEL_DATA, USER_DATA, USER_CODE, TSS];
        assert!(selectors.iter().map(|s| s.0).eq(want), "GDT selectors out of order");
        gdt
    });
    gdt.load();
    // SAFETY: the GDT just loaded has a 64-bit kernel code segment at KERNEL_CODE and a kernel
    // data segment at KERNEL_DATA, so reloading CS (by a far return), SS, DS and ES keeps the
    // kernel running with the same flat segments; the TSS descriptor at TSS describes a
    // 'static TSS whose stacks are mapped, and is loaded once (loading marks it busy).
    unsafe {
        CS::set_reg(SegmentSelector(KERNEL_CODE));
        SS::set_reg(SegmentSelector(KERNEL_DATA));
        DS::set_reg(SegmentSelector(KERNEL_DATA));
        ES::set_reg(SegmentSelector(KERNEL_DATA));
        load_tss(SegmentSelector(TSS));
    }
}
