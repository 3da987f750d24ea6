//! Sv39 kernel page tables: aliases, unmapping and the stack guard page.

use frame_allocator::Owner;

use crate::arch::layout::KERNEL_DYNAMIC_BASE;
use crate::arch::{self, probe, sv39};
use crate::check;
use crate::ktest::Outcome;
use crate::memory::{alloc_zeroed_kernel_frame, with_frames};

/// A page mapped by the kernel's tables is written through its new virtual address and read
/// back through the direct map (another mapping of the same frame), and the other way round;
/// after unmapping, an access through the address traps (caught by a probe).
pub fn alias_and_unmap() -> Outcome {
    let va = KERNEL_DYNAMIC_BASE as usize + 0x1234_5000;
    check!(
        probe::read_u64(va).is_none(),
        "test address {=u64:#x} is mapped before the test",
        va as u64
    );
    let frame = alloc_zeroed_kernel_frame().map_err(|_| crate::ktest::Failed)?;
    let alias = arch::phys_to_virt(frame.addr());
    let mapped =
        arch::with_kernel_table(|t| t.map(va as u64, frame.addr(), sv39::PTE_R | sv39::PTE_W));
    check!(mapped.is_ok(), "map failed: {}", mapped);
    let again = arch::with_kernel_table(|t| t.map(va as u64, frame.addr(), sv39::PTE_R));
    check!(again == Err(sv39::MapError::AlreadyMapped), "double map not refused: {}", again);
    let found = arch::with_kernel_table(|t| t.translate(va as u64 + 8));
    check!(found == Some(frame.addr() + 8), "translate gives {}", found);

    for i in 0..512usize {
        let pattern = 0x5445_5353_4552_4100 ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        check!(probe::write_u64(va + i * 8, pattern), "write through the new mapping faulted");
        let back = probe::read_u64(alias + i * 8);
        check!(back == Some(pattern), "alias read {} at word {=usize}", back, i);
    }
    check!(probe::write_u64(alias + 16, 0xfeed), "write through the direct map faulted");
    check!(probe::read_u64(va + 16) == Some(0xfeed), "mapping does not see the alias's write");

    let unmapped = arch::with_kernel_table(|t| t.unmap(va as u64));
    check!(unmapped == Ok(frame.addr()), "unmap returned {}", unmapped);
    sv39::flush(va as u64);
    check!(probe::read_u64(va).is_none(), "read after unmap did not trap");
    check!(!probe::write_u64(va, 1), "write after unmap did not trap");
    check!(probe::read_u64(alias + 16) == Some(0xfeed), "the frame lost its contents");
    check!(with_frames(|fa| fa.free(frame, Owner::Kernel)).is_ok(), "freeing the frame failed");
    Ok(())
}

/// The page under the boot stack is not mapped, while the stack itself is.
pub fn stack_guard() -> Outcome {
    let (guard, top) = arch::boot_stack();
    check!(probe::read_u64(guard).is_none(), "guard page {=u64:#x} is readable", guard as u64);
    check!(probe::read_u64(guard + 4088).is_none(), "guard page end is readable");
    check!(probe::read_u64(guard + 4096).is_some(), "stack bottom is not mapped");
    check!(probe::read_u64(top - 8).is_some(), "stack top is not mapped");
    Ok(())
}
