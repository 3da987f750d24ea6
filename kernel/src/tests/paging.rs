//! Kernel page tables: aliases, unmapping, the stack guard page and the direct map, with the
//! rights and flush of the arch's `tests::kernel_pages`. The x86_64 tests of the kernel
//! image's rights, no-execute, SMEP and SMAP are in that architecture's tests.

use frame_allocator::{FRAME_SIZE, Frame, Owner};

use crate::arch::layout::KERNEL_DYNAMIC_BASE;
use crate::arch::tests::kernel_pages::{MapError, READ_ONLY, READ_WRITE, flush};
use crate::arch::{self, probe};
use crate::check;
use crate::ktest::{Failed, Outcome};
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
    let frame = alloc_zeroed_kernel_frame().map_err(|_| Failed)?;
    let alias = arch::phys_to_virt(frame.addr());
    let mapped = arch::with_kernel_table(|t| t.map(va as u64, frame.addr(), READ_WRITE));
    check!(mapped.is_ok(), "map failed: {}", mapped);
    let again = arch::with_kernel_table(|t| t.map(va as u64, frame.addr(), READ_ONLY));
    check!(again == Err(MapError::AlreadyMapped), "double map not refused: {}", again);
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
    flush(va as u64);
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

/// The owner the direct-map test gives the frames it takes: no domain exists while kernel
/// tests run, so none has this identifier.
const TAKEN: Owner = Owner::Domain(Owner::MAX_DOMAIN);

/// Every free frame is reachable through the direct map at the address `phys_to_virt` gives,
/// however high: the test takes every free frame; checks, for the lowest, the highest and one
/// in every 2 MiB, that the kernel's tables translate its direct-map address back to it (and
/// `virt_to_phys` too); for the lowest, the highest and one in every GiB, writes a pattern
/// through the direct map and reads it back through a second mapping of the frame made for
/// the test; and gives every frame back.
pub fn direct_map() -> Outcome {
    // A page next to the test's window keeps the window's tables in place while no frame is
    // left to make them.
    let keeper = alloc_zeroed_kernel_frame().map_err(|_| Failed)?;
    let kept =
        arch::with_kernel_table(|t| t.map(WINDOW as u64 + FRAME_SIZE, keeper.addr(), READ_ONLY));
    check!(kept.is_ok(), "mapping the page next to the window failed: {}", kept);
    let result = take_and_check_all();
    let unmapped = arch::with_kernel_table(|t| t.unmap(WINDOW as u64 + FRAME_SIZE));
    flush(WINDOW as u64 + FRAME_SIZE);
    check!(unmapped == Ok(keeper.addr()), "unmapping the page next to the window: {}", unmapped);
    check!(with_frames(|fa| fa.free(keeper, Owner::Kernel)).is_ok(), "freeing a frame failed");
    result
}

/// Where [`direct_map`] maps the frames it checks a second time.
const WINDOW: usize = KERNEL_DYNAMIC_BASE as usize + 0x2345_6000;

fn take_and_check_all() -> Outcome {
    let free_before = with_frames(|fa| fa.free_count());
    let (count, lowest, highest) = with_frames(|fa| {
        let (mut count, mut lowest, mut highest) = (0u64, u64::MAX, 0u64);
        while let Ok(f) = fa.alloc(TAKEN) {
            count += 1;
            lowest = lowest.min(f.addr());
            highest = highest.max(f.addr());
        }
        (count, lowest, highest)
    });
    let checked = check_direct_map(lowest, highest);
    let freed = with_frames(|fa| {
        let taken = (lowest..=highest).step_by(FRAME_SIZE as usize).map(Frame::containing);
        taken.filter(|&f| fa.owner(f) == Ok(TAKEN) && fa.free(f, TAKEN).is_ok()).count() as u64
    });
    check!(count == free_before, "took {=u64} frames of {=u64} free", count, free_before);
    check!(freed == count, "gave back {=u64} frames of {=u64}", freed, count);
    let sampled = checked?;
    defmt::info!(
        "direct map: {=u64} free frames from {=u64:#x} to {=u64:#x}, {=u64} of them written and read back through a second mapping",
        count,
        lowest,
        highest,
        sampled
    );
    Ok(())
}

/// The checks of [`direct_map`] on the frames it took between `lowest` and `highest`: the
/// lowest, the highest and those at a 2 MiB boundary are translated, and the lowest, the
/// highest and those at a 1 GiB boundary are also written and read back (few, so that the host
/// need not back all of the guest's memory); returns how many were written.
fn check_direct_map(lowest: u64, highest: u64) -> Result<u64, Failed> {
    const STEP: u64 = 2 << 20;
    let samples = core::iter::once(lowest)
        .chain((lowest.next_multiple_of(STEP)..highest).step_by(STEP as usize))
        .chain(core::iter::once(highest));
    let mut written = 0u64;
    let mut last = None;
    for pa in samples {
        if last == Some(pa) || with_frames(|fa| fa.owner(Frame::containing(pa))) != Ok(TAKEN) {
            continue;
        }
        last = Some(pa);
        let va = arch::phys_to_virt(pa);
        let found = arch::with_kernel_table(|t| t.translate(va as u64));
        check!(found == Some(pa), "direct map of {=u64:#x} translates to {}", pa, found);
        check!(arch::virt_to_phys(va) == pa, "virt_to_phys of {=u64:#x}", va as u64);
        if !(pa == lowest || pa == highest || pa.is_multiple_of(1 << 30)) {
            continue;
        }
        let pattern = 0x6469_7265_6374_0000 ^ pa;
        check!(probe::write_u64(va + 8, pattern), "write to {=u64:#x} faulted", pa);
        let mapped = arch::with_kernel_table(|t| t.map(WINDOW as u64, pa, READ_ONLY));
        check!(mapped.is_ok(), "mapping {=u64:#x} failed: {}", pa, mapped);
        let back = probe::read_u64(WINDOW + 8);
        let unmapped = arch::with_kernel_table(|t| t.unmap(WINDOW as u64));
        flush(WINDOW as u64);
        check!(unmapped == Ok(pa), "unmap returned {}", unmapped);
        check!(
            back == Some(pattern),
            "frame {=u64:#x} reads {} through a second mapping",
            pa,
            back
        );
        written += 1;
    }
    Ok(written)
}
