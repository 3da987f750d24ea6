//! Physical memory: the global frame allocator and the kernel heap that lives on its frames.
//!
//! At boot the frame tables (the allocator's owner table, and a word per frame for the domains'
//! loose frames) are carved out of the first free RAM large enough to hold them past the
//! memory the owner table's first chunk covers (anywhere, if there is none there), so that
//! boot's own allocations find their frames in that one chunk whatever the size of RAM; neither
//! is written at boot: both are set up lazily, so boot time does not grow with RAM. Every
//! usable region is handed to the allocator, and every reserved region (firmware, the kernel
//! image, the device tree and every range it reserves, the boot image, the tables themselves) is
//! taken back out. The heap is then a contiguous
//! run of frames owned by [`Owner::Kernel`], reached through the arch direct map.

use frame_allocator::{FRAME_SIZE, Frame, FrameAllocator, FrameError, Owner};
use spin::Mutex;

use crate::boot_info::{PhysRange, VisitRanges};
use crate::{BootInfo, arch, phys};

/// Size of the kernel heap, taken from RAM at boot.
pub const HEAP_BYTES: u64 = 4 << 20;

static FRAMES: Mutex<Option<FrameAllocator<'static>>> = Mutex::new(None);

// Every domain a manifest may declare has its frames counted as they change hands, so that the
// frames-contract check on each allocation never scans the owner table.
const _: () = assert!(manifest::MAX_DOMAINS <= frame_allocator::COUNTED_DOMAINS);

/// The reserved ranges the boot code found ([`BootInfo::reserved`] and
/// [`BootInfo::reserved_elsewhere`]), kept for [`for_each_reserved`].
type Reserved = (heapless::Vec<PhysRange, 8>, Option<VisitRanges>);
static RESERVED: Mutex<Reserved> = Mutex::new((heapless::Vec::new(), None));

/// Calls `f` with every range of RAM the boot code found reserved (the frame allocator never
/// hands out a frame that touches one).
pub fn for_each_reserved(f: &mut dyn FnMut(PhysRange)) {
    let (listed, elsewhere) = RESERVED.lock().clone();
    listed.iter().copied().for_each(&mut *f);
    if let Some(elsewhere) = elsewhere {
        elsewhere(f);
    }
}

/// A word per frame of the allocator's window, for the kernel's table of loose frames: the
/// physical address of word 0's frame and the words (not zeroed: their user zeroes them as it
/// needs them, so that boot does not write a word per frame).
static FRAME_WORDS: Mutex<Option<(u64, &'static mut [u32])>> = Mutex::new(None);

/// Hands over the words per frame (see [`FRAME_WORDS`]), once. Panics if called before [`init`]
/// or twice.
pub fn take_frame_words() -> (u64, &'static mut [u32]) {
    FRAME_WORDS.lock().take().expect("frame words taken before memory::init, or twice")
}

/// Runs `f` with the global frame allocator. Panics if called before [`init`].
pub fn with_frames<R>(f: impl FnOnce(&mut FrameAllocator<'static>) -> R) -> R {
    let _guard = arch::InterruptGuard::new();
    let mut frames = FRAMES.lock();
    f(frames.as_mut().expect("frame allocator used before memory::init"))
}

/// Allocates one frame for the kernel and zeroes it.
pub fn alloc_zeroed_kernel_frame() -> Result<Frame, FrameError> {
    alloc_zeroed(Owner::Kernel)
}

/// Allocates one frame for `owner` and zeroes it.
pub fn alloc_zeroed(owner: Owner) -> Result<Frame, FrameError> {
    let frame = with_frames(|fa| fa.alloc(owner))?;
    phys::zero_frame(frame);
    Ok(frame)
}

/// Returns `frame`, held by `owner`, to the free pool as it is. A frame is zeroed once, when
/// it is allocated ([`alloc_zeroed`], the only way frames leave the pool after boot), so its
/// contents never reach the next owner; a free frame is mapped nowhere, so nobody reads it
/// meanwhile. Freeing is therefore cheap, and a dying domain's frames are not written twice.
pub fn free(frame: Frame, owner: Owner) -> Result<(), FrameError> {
    with_frames(|fa| fa.free(frame, owner))
}

/// Sets up the frame allocator and the heap from what the boot code found.
pub fn init(boot: &BootInfo) {
    let (lo, hi) = boot
        .memory
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), r| (lo.min(r.start & !(FRAME_SIZE - 1)), hi.max(r.end)));
    assert!(lo < hi, "no usable memory reported by the boot code");
    let entries = FrameAllocator::table_len(hi - lo);
    let owners_bytes = (entries as u64 * 4).next_multiple_of(FRAME_SIZE);
    let words_bytes = (entries as u64 * 4).next_multiple_of(FRAME_SIZE);
    let table_bytes = owners_bytes + words_bytes;
    // Past the first chunk of the owner table if there is room: boot's own allocations (the
    // heap, the kernel's page tables) then find free frames in the one chunk the allocator
    // sets up first, however large the tables are.
    let past_first_chunk = lo + frame_allocator::CHUNK as u64 * FRAME_SIZE;
    let table_at = find_free(boot, table_bytes, past_first_chunk)
        .or_else(|| find_free(boot, table_bytes, lo))
        .expect("no room for the frame tables");

    // SAFETY: `table_at` is free, frame-aligned RAM (inside a usable region, clear of every
    // reserved range) of `table_bytes` bytes, which holds both tables one after the other; it is
    // reserved in the allocator below, so nothing else will ever be handed this memory.
    let (table, words) = unsafe {
        (phys::claim_u32s(table_at, entries), phys::claim_u32s(table_at + owners_bytes, entries))
    };
    *FRAME_WORDS.lock() = Some((lo, words));
    let mut fa = FrameAllocator::new(lo, table).expect("RAM base is frame-aligned");
    for r in &boot.memory {
        fa.add_free(r.start, r.end);
    }
    boot.for_each_reserved(&mut |r| fa.reserve(r.start, r.end));
    *RESERVED.lock() = (boot.reserved.clone(), boot.reserved_elsewhere);
    fa.reserve(table_at, table_at + table_bytes);
    let free = fa.free_count();

    let heap = fa
        .alloc_contiguous(HEAP_BYTES / FRAME_SIZE, 1, Owner::Kernel)
        .expect("no room for the kernel heap");
    *FRAMES.lock() = Some(fa);
    crate::heap::init(arch::phys_to_virt(heap.addr()), HEAP_BYTES as usize);
    defmt::info!(
        "frames: {=u64} free of {=u64} ({=u64} KiB frame tables), heap {=u64} KiB",
        free,
        entries as u64,
        table_bytes >> 10,
        HEAP_BYTES >> 10
    );
}

/// The lowest frame-aligned free stretch of `bytes` at or above `from` inside usable RAM that
/// overlaps no reserved range.
fn find_free(boot: &BootInfo, bytes: u64, from: u64) -> Option<u64> {
    // The reserved range overlapping `[a, a + bytes)` that ends last.
    let overlaps = |a: u64| {
        let mut found: Option<PhysRange> = None;
        boot.for_each_reserved(&mut |r| {
            if a < r.end && r.start < a + bytes && found.is_none_or(|f| f.end < r.end) {
                found = Some(r);
            }
        });
        found
    };
    for region in &boot.memory {
        let mut a = region.start.max(from).next_multiple_of(FRAME_SIZE);
        while a + bytes <= region.end {
            match overlaps(a) {
                None => return Some(a),
                Some(r) => a = r.end.next_multiple_of(FRAME_SIZE),
            }
        }
    }
    None
}
