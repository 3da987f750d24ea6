//! Address spaces read through while they run, with x86_64's probes and page-table flags
//! (`space::map_protect_unmap`, `space::switching`): mappings with their rights, the shared
//! kernel half, switching between spaces and the PCID gate.

use ::x86_64::registers::control::{Cr4, Cr4Flags};
use abi::Rights;
use frame_allocator::{Frame, Owner};

use crate::arch::layout::KERNEL_DYNAMIC_BASE;
use crate::arch::paging::{self, PageTableFlags as F};
use crate::arch::{self, AddressSpace, AddressSpaceOps, cpu, probe, space};
use crate::check;
use crate::ktest::{Failed, Outcome};
use crate::memory;
use crate::tests::space::{OWNER, charged};

/// The word frame `i` holds.
fn pattern(i: usize) -> u64 {
    0x7370_6163_652d_7400 | i as u64
}

/// A kernel frame holding [`pattern`]`(i)`.
fn frame(i: usize) -> Result<Frame, Failed> {
    let f = memory::alloc_zeroed(Owner::Kernel).map_err(|_| Failed)?;
    crate::phys::write_frame(f, &pattern(i).to_le_bytes());
    Ok(f)
}

/// The word the running address space holds at `va` as the kernel reads it with SMAP open,
/// or `None` if a read faults.
fn read(va: usize) -> Option<u64> {
    let mut word = [0u8; 8];
    for (i, b) in word.iter_mut().enumerate() {
        *b = probe::read_u8_any(va + i)?;
    }
    Some(u64::from_le_bytes(word))
}

fn kernel_root() -> u64 {
    arch::with_kernel_table(|k| k.root().addr())
}

/// A user page mapped read-only, then read-write, then executable, is read through the
/// space once it runs, with the entry's flags as the rights demand (user, writable only
/// with write, no-execute unless execute); unmapped, it is gone at once (the TLB was
/// flushed), and remapped to another frame it shows that frame. While the space runs the
/// kernel half is the kernel's: the same root entries, the direct map, and a kernel page
/// mapped meanwhile. The kernel's own tables never see the user page.
pub fn map_protect_unmap() -> Outcome {
    let frames = [frame(0)?, frame(1)?];
    let mut space = AddressSpace::new(OWNER).map_err(|_| Failed)?;
    let outcome = map_protect_unmap_in(&mut space, &frames);
    space.destroy();
    let destroyed = read_cr3_root() == kernel_root();
    for f in frames {
        let _ = memory::free(f, Owner::Kernel);
    }
    check!(destroyed, "destroy left the CPU on the space's tables");
    check!(charged() == 0, "{=u64} frames still charged after destroy", charged());
    outcome
}

fn read_cr3_root() -> u64 {
    ::x86_64::registers::control::Cr3::read().0.start_address().as_u64()
}

fn map_protect_unmap_in(space: &mut AddressSpace, frames: &[Frame; 2]) -> Outcome {
    let va = abi::STRETCH_BASE + 0x5000;
    let user_flags = |space: &AddressSpace| space.flags(va).unwrap_or(F::empty());
    check!(space.map(va, frames[0].addr(), Rights::READ).is_ok(), "mapping failed");
    let f = user_flags(space);
    check!(
        f.contains(F::PRESENT | F::USER_ACCESSIBLE | F::NO_EXECUTE)
            && !f.intersects(F::WRITABLE | F::GLOBAL),
        "read-only page has flags {=u64:#x}",
        f.bits()
    );
    check!(space.translate(va + 8) == Some(frames[0].addr() + 8), "translation differs");
    check!(charged() == 4, "{=u64} frames charged for one page", charged());
    check!(read(va).is_none(), "the kernel's tables map the user page");

    space.activate();
    check!(space.is_current(), "CR3 does not hold the space's root");
    check!(read(va) == Some(pattern(0)), "the running space reads {}", read(va));

    // The kernel half is shared.
    let (ours, kernel) = (arch::phys_to_virt(space.root()), arch::phys_to_virt(kernel_root()));
    for i in 256..512 {
        let (a, b) = (probe::read_u64(ours + i * 8), probe::read_u64(kernel + i * 8));
        check!(a.is_some() && a == b, "root entry {=usize} differs from the kernel's", i);
    }
    for i in 0..256 {
        let e = probe::read_u64(ours + i * 8);
        check!(e == Some(0) || i == 0, "lower-half root entry {=usize} is {}", i, e);
    }
    let direct = arch::phys_to_virt(frames[1].addr());
    check!(probe::read_u64(direct) == Some(pattern(1)), "the direct map is not there");
    let kva = KERNEL_DYNAMIC_BASE + 0x3456_7000;
    let mapped = arch::with_kernel_table(|t| t.map(kva, frames[1].addr(), F::NO_EXECUTE));
    let seen = probe::read_u64(kva as usize);
    let unmapped = arch::with_kernel_table(|t| t.unmap(kva));
    paging::flush(kva);
    check!(mapped.is_ok() && unmapped.is_ok(), "kernel mapping {} {}", mapped, unmapped);
    check!(seen == Some(pattern(1)), "a kernel page mapped meanwhile reads {}", seen);
    check!(probe::read_u64(kva as usize).is_none(), "the kernel page is still mapped");

    // Rights change, the page stays.
    let rw = Rights::READ.union(Rights::WRITE);
    check!(space.protect(va, rw).is_ok(), "protect failed");
    let f = user_flags(space);
    check!(f.contains(F::WRITABLE | F::NO_EXECUTE), "read-write flags {=u64:#x}", f.bits());
    check!(space.protect(va, Rights::EXECUTE).is_ok(), "protect failed");
    let f = user_flags(space);
    check!(
        f.contains(F::USER_ACCESSIBLE) && !f.intersects(F::WRITABLE | F::NO_EXECUTE),
        "execute-only flags {=u64:#x}",
        f.bits()
    );
    check!(space.protect(va, Rights::NONE).is_err(), "rights none accepted");
    check!(read(va) == Some(pattern(0)), "after protect the space reads {}", read(va));
    check!(
        space.map(va, frames[1].addr(), Rights::READ).is_err(),
        "a mapped page was mapped again"
    );
    check!(
        space.map(KERNEL_DYNAMIC_BASE as usize, frames[1].addr(), Rights::READ).is_err(),
        "a kernel-half page was mapped in the space"
    );

    // Unmapped while the space runs: gone at once, tables freed.
    space.unmap(va);
    check!(read(va).is_none(), "the running space still reads an unmapped page");
    check!(charged() == 1, "{=u64} frames charged after unmap", charged());
    check!(space.map(va, frames[1].addr(), Rights::READ).is_ok(), "remapping failed");
    check!(read(va) == Some(pattern(1)), "the remapped page reads {}", read(va));
    // Kept tables, then another frame.
    space.unmap_keeping_tables(va);
    check!(read(va).is_none(), "unmap_keeping_tables left the page readable");
    check!(charged() == 4, "unmap_keeping_tables changed the charge to {=u64}", charged());
    check!(space.map(va, frames[0].addr(), Rights::READ).is_ok(), "remapping failed");
    check!(read(va) == Some(pattern(0)), "the remapped page reads {}", read(va));
    space.unmap(va);
    Ok(())
}

/// Three spaces map one address to three frames and run in turn: each reads its own frame;
/// a page unmapped in a space that does not run is gone when it runs, one remapped in the
/// running space shows the new frame. PCIDs are used exactly when CPUID reports them (never
/// in QEMU's TCG, whose CR3 writes with the no-flush bit hang): without them CR4.PCIDE is
/// off, CR3 carries no PCID and no space holds one.
pub fn switching() -> Outcome {
    let pcid = cpu::Features::read().pcid;
    check!(space::pcids_enabled() == pcid, "PCIDs used: {=bool}", space::pcids_enabled());
    check!(Cr4::read().contains(Cr4Flags::PCID) == pcid, "CR4.PCIDE differs from CPUID");
    let frames = [frame(0)?, frame(1)?, frame(2)?, frame(3)?];
    let mut spaces = alloc::vec::Vec::new();
    let outcome = switch_between(&mut spaces, &frames, pcid);
    for s in spaces {
        s.destroy();
    }
    for f in frames {
        let _ = memory::free(f, Owner::Kernel);
    }
    check!(charged() == 0, "{=u64} frames still charged after destroy", charged());
    outcome
}

fn run(spaces: &[AddressSpace], i: usize, va: usize, want: Option<u64>, pcid: bool) -> Outcome {
    spaces[i].activate();
    let got = read(va);
    check!(got == want, "space {=usize} read {} at {=usize:#x}, want {}", i, got, va, want);
    let cr3 = ::x86_64::registers::control::Cr3::read_raw().1;
    if !pcid {
        check!(cr3 == 0, "CR3's low bits are {=u16:#x} without PCIDs", cr3);
        check!(spaces[i].live_asid().is_none(), "space {=usize} holds a PCID", i);
    } else {
        check!(spaces[i].live_asid() == Some(cr3 & 0xfff), "CR3 carries another PCID");
    }
    Ok(())
}

fn switch_between(
    spaces: &mut alloc::vec::Vec<AddressSpace>,
    frames: &[Frame; 4],
    pcid: bool,
) -> Outcome {
    let va = abi::STRETCH_BASE;
    for f in &frames[..3] {
        let mut s = AddressSpace::new(OWNER).map_err(|_| Failed)?;
        check!(s.map(va, f.addr(), Rights::READ).is_ok(), "mapping failed");
        spaces.push(s);
    }
    for round in 0..3 {
        for k in 0..3 {
            let i = (k + round) % 3;
            run(spaces, i, va, Some(pattern(i)), pcid)?;
        }
    }
    // Space 1 does not run (space 0 does) when its page goes.
    run(spaces, 0, va, Some(pattern(0)), pcid)?;
    spaces[1].unmap(va);
    check!(read(va) == Some(pattern(0)), "space 0 lost its page with space 1's");
    run(spaces, 1, va, None, pcid)?;
    run(spaces, 2, va, Some(pattern(2)), pcid)?;
    // The running space remaps its page.
    spaces[2].unmap(va);
    check!(spaces[2].map(va, frames[3].addr(), Rights::READ).is_ok(), "remapping failed");
    check!(read(va) == Some(pattern(3)), "the running space reads its old frame");
    run(spaces, 0, va, Some(pattern(0)), pcid)?;
    run(spaces, 2, va, Some(pattern(3)), pcid)?;
    check!(spaces[1].map(va, frames[1].addr(), Rights::READ).is_ok(), "remapping failed");
    run(spaces, 1, va, Some(pattern(1)), pcid)?;
    Ok(())
}
