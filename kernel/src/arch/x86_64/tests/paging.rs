//! The x86_64 kernel page tables' rights: the kernel image's sections, no-execute, SMEP and
//! SMAP (`paging::image_rights`, `paging::smep_smap`).

use core::sync::atomic::{AtomicU8, Ordering};

use ::x86_64::registers::control::{Cr0, Cr0Flags, Cr4, Cr4Flags};
use ::x86_64::registers::model_specific::{Efer, EferFlags};
use frame_allocator::Owner;

use crate::arch::frame::{PF_INSTRUCTION, PF_PRESENT, PF_USER, PF_WRITE};
use crate::arch::paging::PageTableFlags as F;
use crate::arch::probe::{self, RET};
use crate::arch::{self, cpu, paging};
use crate::check;
use crate::ktest::{Failed, Outcome};
use crate::memory::{alloc_zeroed_kernel_frame, with_frames};

/// A `ret` in `.rodata` and one in `.data`: never executable.
static RET_RODATA: u8 = RET;
static RET_DATA: AtomicU8 = AtomicU8::new(RET);

/// Whether the last probe fault was a page fault whose error code has all of `bits`
/// and none of `absent`.
fn last_page_fault(bits: u64, absent: u64) -> bool {
    probe::last_fault()
        .is_some_and(|f| f.vector == 14 && f.error & bits == bits && f.error & absent == 0)
}

/// The kernel image has the rights its sections need and no more: text executes but cannot
/// be written, read-only data can be neither written nor executed, data can be written but
/// not executed, the direct map's alias of a text page cannot be executed, and the guard
/// pages under the boot, double-fault and entry stacks are not mapped. Each refused
/// access is a protection fault (the page is present), which shows the CPU enforces the
/// rights (EFER.NXE and CR0.WP on).
pub fn image_rights() -> Outcome {
    let features = cpu::Features::read();
    check!(features.nx, "the CPU reports no NX (QEMU -cpu max has it)");
    check!(Efer::read().contains(EferFlags::NO_EXECUTE_ENABLE), "EFER.NXE is off");
    check!(Cr0::read().contains(Cr0Flags::WRITE_PROTECT), "CR0.WP is off");
    check!(Cr4::read().contains(Cr4Flags::PAGE_GLOBAL), "CR4.PGE is off");

    let text = probe::ret_in_text();
    check!(probe::exec_ret(text) == Some(true), "a ret in .text does not run");
    check!(probe::read_u8(text) == Some(RET), "reading .text failed");
    let word = text & !7;
    let value = probe::read_u64(word).ok_or(Failed)?;
    check!(!probe::write_u64(word, value), "writing .text did not fault");
    check!(last_page_fault(PF_PRESENT | PF_WRITE, PF_USER), "{}", probe::last_fault());

    let rodata = &raw const RET_RODATA as usize;
    check!(probe::read_u8(rodata) == Some(RET), "reading .rodata failed");
    check!(probe::exec_ret(rodata) == Some(false), "a ret in .rodata ran");
    check!(last_page_fault(PF_PRESENT | PF_INSTRUCTION, PF_USER), "{}", probe::last_fault());
    let word = rodata & !7;
    let value = probe::read_u64(word).ok_or(Failed)?;
    check!(!probe::write_u64(word, value), "writing .rodata did not fault");
    check!(last_page_fault(PF_PRESENT | PF_WRITE, PF_USER), "{}", probe::last_fault());

    let data = RET_DATA.as_ptr() as usize;
    check!(RET_DATA.load(Ordering::Relaxed) == RET, ".data lost its contents");
    check!(probe::exec_ret(data) == Some(false), "a ret in .data ran");
    check!(last_page_fault(PF_PRESENT | PF_INSTRUCTION, PF_USER), "{}", probe::last_fault());
    let word = data & !7;
    let value = probe::read_u64(word).ok_or(Failed)?;
    check!(probe::write_u64(word, value), "writing .data faulted");

    let alias = arch::phys_to_virt(arch::virt_to_phys(text));
    check!(probe::read_u8(alias) == Some(RET), "the direct map's alias of .text differs");
    check!(probe::exec_ret(alias) == Some(false), "the direct map's alias of .text ran");
    check!(last_page_fault(PF_PRESENT | PF_INSTRUCTION, PF_USER), "{}", probe::last_fault());

    // The guard pages under the boot stack and the interrupt stacks are not mapped.
    for guard in arch::guard_pages() {
        check!(probe::read_u64(guard).is_none(), "guard page {=u64:#x} is mapped", guard as u64);
        check!(probe::read_u64(guard + 4096).is_some(), "the stack above {=u64:#x}", guard as u64);
    }

    // The entries say the same.
    let flags = |va: usize| arch::with_kernel_table(|t| t.flags(va as u64));
    let want = [
        (text, F::GLOBAL, F::WRITABLE | F::NO_EXECUTE | F::USER_ACCESSIBLE),
        (rodata, F::GLOBAL | F::NO_EXECUTE, F::WRITABLE | F::USER_ACCESSIBLE),
        (data, F::GLOBAL | F::WRITABLE | F::NO_EXECUTE, F::USER_ACCESSIBLE),
        (alias, F::GLOBAL | F::WRITABLE | F::NO_EXECUTE, F::USER_ACCESSIBLE),
    ];
    for (va, set, clear) in want {
        let f = flags(va).ok_or(Failed)?;
        check!(
            f.contains(set) && !f.intersects(clear),
            "entry of {=u64:#x} has flags {=u64:#x}",
            va as u64,
            f.bits()
        );
    }
    Ok(())
}

/// With SMEP and SMAP on (QEMU's `-cpu max` reports both), the kernel can neither execute
/// nor read a user page, while the same frame mapped as a kernel page is read and executed
/// (so the U bit is what refuses); with AC set (`stac`) the read succeeds. The test's
/// mappings and their tables are gone afterwards.
pub fn smep_smap() -> Outcome {
    let features = cpu::Features::read();
    check!(features.smep && features.smap, "the CPU does not report SMEP and SMAP");
    let cr4 = Cr4::read();
    check!(cr4.contains(Cr4Flags::SUPERVISOR_MODE_EXECUTION_PROTECTION), "CR4.SMEP is off");
    check!(cr4.contains(Cr4Flags::SUPERVISOR_MODE_ACCESS_PREVENTION), "CR4.SMAP is off");

    let user = 0x0000_4000_0000_0000u64;
    let kernel_view = 0x0000_4000_4000_0000u64;
    let free_before = with_frames(|fa| fa.free_count());
    let frame = alloc_zeroed_kernel_frame().map_err(|_| Failed)?;
    let direct = arch::phys_to_virt(frame.addr());
    check!(probe::write_u64(direct, u64::from(RET)), "writing the test frame faulted");
    let mapped = arch::with_kernel_table(|t| {
        t.map(user, frame.addr(), F::USER_ACCESSIBLE)?;
        t.map(kernel_view, frame.addr(), F::empty())
    });
    check!(mapped.is_ok(), "mapping the test pages failed: {}", mapped);

    let result = (|| {
        check!(probe::read_u64(user as usize).is_none(), "SMAP let the kernel read a user page");
        check!(last_page_fault(PF_PRESENT, PF_USER | PF_WRITE), "{}", probe::last_fault());
        check!(
            probe::read_u8_any(user as usize) == Some(RET),
            "with AC set the user page still cannot be read"
        );
        check!(
            probe::exec_ret(user as usize) == Some(false),
            "SMEP let the kernel run a user page"
        );
        check!(last_page_fault(PF_PRESENT | PF_INSTRUCTION, PF_USER), "{}", probe::last_fault());
        check!(
            probe::read_u64(kernel_view as usize) == Some(u64::from(RET)),
            "the kernel mapping of the frame cannot be read"
        );
        check!(
            probe::exec_ret(kernel_view as usize) == Some(true),
            "the kernel mapping of the frame cannot be executed"
        );
        Ok(())
    })();

    let unmapped = arch::with_kernel_table(|t| (t.unmap(user), t.unmap(kernel_view)));
    paging::flush(user);
    paging::flush(kernel_view);
    check!(
        unmapped == (Ok(frame.addr()), Ok(frame.addr())),
        "unmapping the test pages: {}",
        unmapped
    );
    check!(with_frames(|fa| fa.free(frame, Owner::Kernel)).is_ok(), "freeing the frame");
    let free_after = with_frames(|fa| fa.free_count());
    check!(
        free_after == free_before,
        "{=u64} frames free after the test, {=u64} before (tables not freed)",
        free_after,
        free_before
    );
    result
}
