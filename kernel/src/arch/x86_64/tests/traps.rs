//! Traps on x86_64: user mode, entered through the GDT's user segments, left through the IDT
//! onto the TSS's entry stack; and interrupts the kernel does not expect.

use frame_allocator::Owner;

use crate::arch::frame::{PF_PRESENT, PF_USER, PF_WRITE, TrapFrame};
use crate::arch::paging::PageTableFlags as F;
use crate::arch::trap::{self, UserExit};
use crate::arch::{self, gdt, paging, probe};
use crate::check;
use crate::ktest::{Failed, Outcome};
use crate::memory::{alloc_zeroed_kernel_frame, with_frames};
use crate::phys;

/// Where the test maps its user code and stack (the lower half, empty in the kernel's tables).
const CODE: u64 = 0x0000_4000_8000_0000;
const STACK: u64 = CODE + 0x10_0000;

/// The user programs, 16 bytes apart in the code page: `int3`; a load from `kernel` then
/// `int3`; `ud2`; `push $0x55` then `int3`.
fn programs(kernel: u64) -> [u8; 64] {
    let mut code = [0xccu8; 64];
    code[16..18].copy_from_slice(&[0x48, 0xa1]); // movabs (kernel), %rax
    code[18..26].copy_from_slice(&kernel.to_le_bytes());
    code[32..34].copy_from_slice(&[0x0f, 0x0b]); // ud2
    code[48..50].copy_from_slice(&[0x6a, 0x55]); // push $0x55
    code
}

/// Code runs in ring 3 with the user segments and traps back into the kernel on the entry
/// stack (TSS.RSP0): a breakpoint, a user load from a kernel page (a protection fault with the
/// user bit), an illegal instruction, and a push onto the user stack. After each, the kernel
/// resumes where it entered user mode. The test's mappings and their tables are gone
/// afterwards.
pub fn user_round_trip() -> Outcome {
    let free_before = with_frames(|fa| fa.free_count());
    let code = alloc_zeroed_kernel_frame().map_err(|_| Failed)?;
    let stack = alloc_zeroed_kernel_frame().map_err(|_| Failed)?;
    let kernel = probe::ret_in_text() as u64;
    phys::write_frame(code, &programs(kernel));
    let mapped = arch::with_kernel_table(|t| {
        t.map(CODE, code.addr(), F::USER_ACCESSIBLE)?;
        t.map(STACK, stack.addr(), F::USER_ACCESSIBLE | F::WRITABLE | F::NO_EXECUTE)
    });
    check!(mapped.is_ok(), "mapping the user pages failed: {}", mapped);

    let result = run_programs(kernel, stack.addr());

    let unmapped = arch::with_kernel_table(|t| (t.unmap(CODE), t.unmap(STACK)));
    paging::flush(CODE);
    paging::flush(STACK);
    check!(unmapped == (Ok(code.addr()), Ok(stack.addr())), "unmapping: {}", unmapped);
    for f in [code, stack] {
        check!(with_frames(|fa| fa.free(f, Owner::Kernel)).is_ok(), "freeing a frame failed");
    }
    let free_after = with_frames(|fa| fa.free_count());
    check!(free_after == free_before, "{=u64} frames free, {=u64} before", free_after, free_before);
    result
}

fn run_programs(kernel: u64, stack_pa: u64) -> Outcome {
    let top = STACK + 4096;
    let (guard, entry_top) = gdt::entry_stack();
    let on_entry_stack = |e: &UserExit| {
        (guard as u64 + 4096..entry_top as u64).contains(&e.frame_at)
            && e.frame_at + size_of::<TrapFrame>() as u64 == entry_top as u64
    };

    let e = trap::run_user(CODE, top);
    check!(e.vector == 3 && e.rip == CODE + 1, "int3: {}", e);
    check!(e.cs == u64::from(gdt::USER_CODE), "the trap came from cs {=u64:#x}", e.cs);
    check!(
        on_entry_stack(&e),
        "the trap frame at {=u64:#x} is not atop the entry stack",
        e.frame_at
    );

    let e = trap::run_user(CODE + 16, top);
    check!(e.vector == 14 && e.rip == CODE + 16 && e.cr2 == kernel, "kernel load: {}", e);
    check!(
        e.error & (PF_PRESENT | PF_USER | PF_WRITE) == PF_PRESENT | PF_USER,
        "kernel load: error {=u64:#x}",
        e.error
    );

    let e = trap::run_user(CODE + 32, top);
    check!(e.vector == 6 && e.rip == CODE + 32, "ud2: {}", e);

    let e = trap::run_user(CODE + 48, top);
    check!(e.vector == 3 && e.rip == CODE + 51, "push: {}", e);
    let pushed = probe::read_u64(arch::phys_to_virt(stack_pa) + 4088);
    check!(pushed == Some(0x55), "the user stack holds {}", pushed);
    Ok(())
}

/// An interrupt on a vector nobody uses (a self-IPI on 0x50), taken twice in the kernel, is
/// counted each time, acknowledged at the local APIC (nothing stays in service or pending),
/// and the kernel goes on; the first is logged once as a warning.
pub fn unexpected_interrupt() -> Outcome {
    use crate::arch::{apic, interrupts};
    const VECTOR: u8 = 0x50;
    let before = interrupts::unexpected_count(VECTOR);
    for n in 1..=2 {
        apic::send_self(VECTOR);
        // The IPI is taken as soon as interrupts are on, which they are while tests run.
        for _ in 0..1000 {
            if interrupts::unexpected_count(VECTOR) == before + n {
                break;
            }
            core::hint::spin_loop();
        }
        let count = interrupts::unexpected_count(VECTOR) - before;
        check!(count == n, "{=u64} interrupts counted after {=u64} sent", count, n);
    }
    check!(!apic::pending(VECTOR), "vector {=u8:#x} is still pending", VECTOR);
    check!(!apic::in_service(VECTOR), "vector {=u8:#x} is still in service", VECTOR);
    Ok(())
}
