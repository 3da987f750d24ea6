//! The first instructions after QEMU's reset vector, and the jump into the supervisor.
//!
//! QEMU starts every hart at `_start` (linked at `0x8000_0000`) in M-mode with `a0 = mhartid`,
//! `a1` = the device tree and `a2` = its `fw_dynamic_info`. Hart 0 zeroes `.bss`, takes the
//! M-mode stack, installs the trap vector and calls [`crate::firmware_main`]; every other hart
//! parks in `wfi` with its interrupts masked.

use core::arch::{asm, global_asm};

global_asm!(
    r#"
    .section .text.entry, "ax"
    .globl _start
_start:
    csrw    mie, zero
    csrr    t0, mhartid
    bnez    t0, 3f

    la      t0, __bss_start
    la      t1, __bss_end
1:  bgeu    t0, t1, 2f
    sd      zero, 0(t0)
    addi    t0, t0, 8
    j       1b

2:  la      sp, __stack_top
    /* mscratch = 0 tells the trap vector that a trap came from M-mode itself. */
    csrw    mscratch, zero
    la      t0, _trap_vector
    csrw    mtvec, t0
    /* a0, a1 and a2 still hold what QEMU passed. */
    call    {main}

3:  wfi
    j       3b
    "#,
    main = sym boot_hart_main,
);

/// The Rust side of `_start`, on the boot hart only.
extern "C" fn boot_hart_main(hartid: usize, dtb: usize, fw_info: usize) -> ! {
    crate::firmware_main(hartid, dtb, fw_info)
}

unsafe extern "C" {
    /// The top of the M-mode stack (linker script).
    static __stack_top: u8;
}

/// Enters the supervisor at `entry` in S-mode with `a0 = hartid` and `a1 = dtb`. The M-mode
/// stack is handed to the trap vector (through `mscratch`): the caller's frames are abandoned.
pub fn enter_supervisor(entry: usize, hartid: usize, dtb: usize) -> ! {
    crate::csr::prepare_mret_to_supervisor(entry);
    let stack_top = &raw const __stack_top as usize;
    // SAFETY: `mstatus.MPP = S` and `mepc = entry` were just set, so `mret` drops to S-mode at
    // the kernel's entry with the registers the SBI boot protocol promises. Nothing on the
    // M-mode stack is used again (this function never returns), so the trap vector may reuse it
    // from the top; no Rust state is left borrowed.
    unsafe {
        riscv::register::mscratch::write(stack_top);
        // The `riscv` crate has no `mret` that sets the argument registers.
        asm!("mret", in("a0") hartid, in("a1") dtb, options(noreturn, nostack))
    }
}
