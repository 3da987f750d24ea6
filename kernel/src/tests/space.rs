//! Protection domains' address spaces through the arch contract (`AddressSpaceOps`): table
//! frames charged to the owner, counted in advance, made by `populate` and freed by
//! `prune_range`, `unmap` and `destroy`. The x86_64 tests that read through a running space
//! (`space::map_protect_unmap`, `space::switching`) are in that architecture's tests and use
//! [`OWNER`] and [`charged`] from here.

use abi::Rights;
use frame_allocator::Owner;

use crate::arch::{AddressSpace, AddressSpaceOps};
use crate::check;
use crate::ktest::{Failed, Outcome};
use crate::memory::with_frames;

/// The owner the tests charge their spaces' tables to: no domain exists while kernel tests
/// run, so none has this identifier.
pub(crate) const OWNER: Owner = Owner::Domain(Owner::MAX_DOMAIN - 1);

const REGION: usize = 2 << 20;
const GIB: usize = 1 << 30;

/// Frames charged to [`OWNER`].
pub(crate) fn charged() -> u64 {
    with_frames(|fa| fa.owned_by(OWNER))
}

/// A fresh space counts the tables a range needs (one per 2 MiB region, one per GiB, and on
/// x86_64 the PDPT), `populate` makes exactly that many, charged to the owner; after it nothing
/// is missing and mapping a page there takes no frame; `Rights::NONE` maps nothing and cannot
/// be a page's rights; `prune_range` frees what maps nothing and `destroy` the rest.
pub fn tables_counted() -> Outcome {
    let before = charged();
    check!(before == 0, "{=u64} frames already charged to the test's owner", before);
    let mut space = AddressSpace::new(OWNER).map_err(|_| Failed)?;
    check!(charged() == 1, "a new space holds {=u64} frames, not its root", charged());
    let outcome = counted(&mut space);
    space.destroy();
    check!(charged() == 0, "{=u64} frames still charged after destroy", charged());
    outcome
}

fn counted(space: &mut AddressSpace) -> Outcome {
    // Across two GiB boundaries: 1 + 512 + 2 regions in three GiB.
    let start = abi::STRETCH_BASE - REGION;
    let end = abi::STRETCH_BASE + GIB + 2 * REGION;
    let regions = ((end - start) / REGION) as u64;
    let want = regions + 3 + AddressSpace::LEVELS - 3;
    let page = abi::STRETCH_BASE + GIB + 4096;

    let needed = space.tables_needed(page);
    check!(needed == AddressSpace::LEVELS - 1, "a page of an empty space needs {=u64}", needed);
    let missing = space.tables_missing(start, end).map_err(|_| Failed)?;
    check!(missing == want, "{=u64} tables missing, want {=u64}", missing, want);
    check!(space.map(page, 0x1000, Rights::NONE).is_ok(), "mapping with no rights failed");
    check!(charged() == 1, "mapping with no rights made tables");
    check!(space.tables_needed(page) == needed, "mapping with no rights mapped");

    let made = space.populate(start, end).map_err(|_| Failed)?;
    check!(made == missing, "populate made {=u64} tables, {=u64} were missing", made, missing);
    check!(charged() == 1 + made, "{=u64} frames charged for {=u64} tables", charged(), made);
    let left = space.tables_missing(start, end).map_err(|_| Failed)?;
    check!(left == 0, "{=u64} tables still missing after populate", left);
    check!(space.tables_needed(page) == 0, "a populated page needs tables");
    check!(space.populate(start, end) == Ok(0), "a second populate made tables");

    let frame = crate::memory::alloc_zeroed(Owner::Kernel).map_err(|_| Failed)?;
    let mapped = space.map(page, frame.addr(), Rights::READ);
    let protected = space.protect(page, Rights::NONE);
    space.unmap_keeping_tables(page);
    let _ = crate::memory::free(frame, Owner::Kernel);
    check!(mapped.is_ok(), "mapping a populated page failed");
    check!(protected.is_err(), "a page's rights became none");
    check!(charged() == 1 + made, "mapping a populated page changed the charge");

    space.prune_range(start, end);
    check!(charged() == 1, "{=u64} frames charged after prune_range", charged());
    let again = space.tables_missing(start, end).map_err(|_| Failed)?;
    check!(again == want, "{=u64} tables missing after prune_range", again);
    Ok(())
}

/// Tables follow what they map: mapping and unmapping a page in ever new 2 MiB regions (across
/// a GiB boundary) leaves the owner's charge at the root alone; a page kept mapped keeps its
/// tables.
pub fn tables_follow_mappings() -> Outcome {
    let mut space = AddressSpace::new(OWNER).map_err(|_| Failed)?;
    let frame = crate::memory::alloc_zeroed(Owner::Kernel).map_err(|_| Failed)?;
    let outcome = follow(&mut space, frame.addr());
    space.destroy();
    let _ = crate::memory::free(frame, Owner::Kernel);
    check!(charged() == 0, "{=u64} frames still charged after destroy", charged());
    outcome
}

fn follow(space: &mut AddressSpace, pa: u64) -> Outcome {
    let rw = Rights::READ.union(Rights::WRITE);
    let kept = abi::STRETCH_BASE;
    check!(space.map(kept, pa, rw).is_ok(), "mapping the kept page failed");
    let baseline = charged();
    check!(baseline == AddressSpace::LEVELS, "{=u64} frames for one page", baseline);
    let first = abi::STRETCH_BASE + GIB - 100 * REGION;
    for i in 0..200usize {
        let va = first + i * REGION;
        check!(space.map(va, pa, rw).is_ok(), "mapping {=usize:#x} failed", va);
        space.unmap(va);
        let now = charged();
        check!(now == baseline, "charge {=u64} after page {=usize}, not {=u64}", now, i, baseline);
    }
    space.unmap(kept);
    check!(charged() == 1, "{=u64} frames charged with nothing mapped", charged());
    Ok(())
}
