//! Address-space identifiers: six address spaces share three ASIDs, so every few switches the
//! ASIDs run out and are recycled; each space must still see only its own current mappings.
//!
//! QEMU ignores ASID tags (it drops its TLB whenever `satp` changes), so a missing flush would
//! not show here as a stale read; the reads check that the switches and changes are right, and
//! the checks of which ASID each space holds (in `satp` too) check the recycling itself. That
//! no flush is missing is shown on the host, against a model TLB (`libs/asid_allocator`).

use alloc::vec::Vec;

use abi::Rights;
use frame_allocator::{Frame, Owner};
use riscv::register::satp;

use crate::arch::AddressSpaceOps as _;
use crate::arch::{self, AddressSpace, user};
use crate::check;
use crate::ktest::{Failed, Outcome};
use crate::memory::{self, with_frames};

/// Address spaces in the test.
const SPACES: usize = 6;
/// ASIDs the test allows: the kernel's 0 and three for the six spaces.
const COUNT: u32 = 4;

/// The word frame `i` holds.
fn pattern(i: usize) -> u64 {
    0x6173_6964_2d74_6500 | i as u64
}

/// The word the running address space reads at `va`, or `None` if the read faults.
fn read(va: usize) -> Option<u64> {
    let mut word = [0u8; 8];
    arch::copy_from_user(&mut word, va).ok().map(|()| u64::from_le_bytes(word))
}

/// Runs space `i` and checks that it reads `want` at `va` under a live ASID that no other live
/// space holds and that `satp` carries; returns the ASID.
fn run(spaces: &[AddressSpace], i: usize, va: usize, want: Option<u64>) -> Result<u16, Failed> {
    spaces[i].activate();
    let got = read(va);
    check!(got == want, "space {=usize} read {} at {=usize:#x}, want {}", i, got, va, want);
    let asid = spaces[i].live_asid().ok_or(Failed)?;
    check!(
        usize::from(asid) == satp::read().asid(),
        "space {=usize} holds ASID {=u16} but satp carries {=usize}",
        i,
        asid,
        satp::read().asid()
    );
    check!((1..COUNT as u16).contains(&asid), "space {=usize} runs under ASID {=u16}", i, asid);
    let mut live: Vec<u16> = spaces.iter().filter_map(AddressSpace::live_asid).collect();
    let n = live.len();
    live.sort_unstable();
    live.dedup();
    check!(live.len() == n, "two live address spaces share an ASID: {}", live.as_slice());
    Ok(asid)
}

/// Six spaces map one address to six frames and run in turn under three ASIDs: each reads its
/// own frame, ASIDs are reused by other spaces in later generations, and unmapping or remapping
/// a page (in a space whose ASID went with an older generation, in the running space, in a
/// live space that does not run) is seen when the space next reads it.
pub fn recycling() -> Outcome {
    let free_before = with_frames(|fa| fa.free_count());
    let before = user::limit_asids(COUNT);
    let mut frames = Vec::new();
    let mut spaces = Vec::new();
    let outcome = recycle(&mut frames, &mut spaces);
    for space in spaces {
        space.destroy();
    }
    for f in frames {
        let _ = memory::free(f, Owner::Kernel);
    }
    user::limit_asids(before);
    outcome?;
    let free_after = with_frames(|fa| fa.free_count());
    check!(
        free_after == free_before,
        "frames: {=u64} free before, {=u64} after",
        free_before,
        free_after
    );
    Ok(())
}

fn recycle(frames: &mut Vec<Frame>, spaces: &mut Vec<AddressSpace>) -> Outcome {
    let va = abi::STRETCH_BASE;
    for i in 0..=SPACES {
        let f = memory::alloc_zeroed(Owner::Kernel).map_err(|_| Failed)?;
        crate::phys::write_frame(f, &pattern(i).to_le_bytes());
        frames.push(f);
    }
    for frame in frames.iter().take(SPACES) {
        let mut space = AddressSpace::new(Owner::Kernel).map_err(|_| Failed)?;
        check!(space.map(va, frame.addr(), Rights::READ).is_ok(), "mapping failed");
        spaces.push(space);
    }
    let first_generation = user::asid_generation();
    // Round robin, backwards, in strides: ASIDs run out every few switches.
    let mut holders: [Vec<usize>; COUNT as usize] = Default::default();
    for round in 0..4 {
        for k in 0..SPACES {
            let i = match round {
                0 => k,
                1 => SPACES - 1 - k,
                2 => (k * 5) % SPACES,
                _ => (k * 2) % SPACES + k / 3,
            };
            let asid = run(spaces, i, va, Some(pattern(i)))?;
            if !holders[asid as usize].contains(&i) {
                holders[asid as usize].push(i);
            }
        }
    }
    let generations = user::asid_generation() - first_generation;
    check!(generations >= 6, "only {=u64} ASID generations in 24 switches", generations);
    check!(holders[1].len() >= 2, "ASID 1 was never recycled: held by {}", holders[1].as_slice());

    // A space whose ASID went with an older generation: unmapped, then remapped, meanwhile.
    run(spaces, 0, va, Some(pattern(0)))?;
    for i in 1..=3 {
        run(spaces, i, va, Some(pattern(i)))?;
    }
    check!(spaces[0].live_asid().is_none(), "space 0 kept its ASID across a new generation");
    spaces[0].unmap(va);
    run(spaces, 0, va, None)?;
    for i in 1..=3 {
        run(spaces, i, va, Some(pattern(i)))?;
    }
    check!(spaces[0].map(va, frames[SPACES].addr(), Rights::READ).is_ok(), "remapping failed");
    run(spaces, 0, va, Some(pattern(SPACES)))?;

    // The running space: unmapped and remapped under a live ASID.
    run(spaces, 2, va, Some(pattern(2)))?;
    spaces[2].unmap(va);
    check!(read(va).is_none(), "the running space still reads an unmapped page");
    check!(spaces[2].map(va, frames[3].addr(), Rights::READ).is_ok(), "remapping failed");
    check!(read(va) == Some(pattern(3)), "the running space reads its old frame");

    // A live space that does not run: its change is flushed by its ASID. (A new generation
    // first, so that space 5 finds an ASID without ending space 4's.)
    user::limit_asids(COUNT);
    run(spaces, 4, va, Some(pattern(4)))?;
    run(spaces, 5, va, Some(pattern(5)))?;
    check!(spaces[4].live_asid().is_some(), "space 4 lost its ASID too early for the test");
    spaces[4].unmap(va);
    run(spaces, 4, va, None)?;
    Ok(())
}
