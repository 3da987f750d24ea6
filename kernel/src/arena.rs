//! Kernel arenas: the memory the kernel holds for one domain, made of that domain's own frames.
//!
//! Every kernel object made for a domain (the record of a stretch and of its pages, the table of
//! its stretches, its event endpoints) is allocated from the domain's [`Arena`] through an
//! [`ArenaAlloc`] (an `allocator_api2` allocator), so it sits in frames charged to the domain,
//! never in the kernel heap; the kernel heap keeps only what is made at boot for the whole
//! system (and, per domain, the arena's own header, its context and its scheduler entry).
//!
//! - An allocation of at most [`SMALL_MAX`] bytes comes from a buddy heap over whole frames the
//!   arena took one at a time. Each such frame starts with a link to the next ([`LINK`] bytes),
//!   so the arena can give them all back; they stay in the arena, for its next small objects,
//!   until it is released at the domain's death.
//! - A larger allocation is a run of contiguous frames of its own, given back as soon as it is
//!   freed.
//!
//! The arena never takes a frame on its own account: it takes frames only within an allowance
//! the kernel grants ([`Arena::allow`]) after checking the domain's frames contract. An
//! allocation that finds no room and no allowance fails (so the `try_` methods of the
//! collections report it) and the arena remembers what it needed ([`Arena::take_refused`]); the
//! kernel then checks the contract for that many frames, grants them and tries again, or fails
//! the system call with `NoMemory` (see `kernel_core`'s `kmem`).
//!
//! Invariants: every frame the arena holds is owned by its domain in the frame allocator (and
//! so counted against its guarantee); the allowance is zero outside the kernel's retry loop, and
//! within it the frames the arena holds plus its allowance never exceed what the kernel checked
//! against the guarantee; an arena is released only when nothing is allocated from it.

use core::alloc::Layout;
use core::ptr::NonNull;

use allocator_api2::alloc::{AllocError, Allocator};
use buddy_system_allocator::Heap;
use frame_allocator::{FRAME_SIZE, Frame, Owner};
use spin::Mutex;

use crate::{arch, memory};

/// The largest allocation served from the arena's small-object heap.
pub const SMALL_MAX: usize = 2048;

/// Bytes at the start of each small-object frame that link it to the next.
pub const LINK: usize = 16;

/// Blocks of the small-object heap: 2^0 to 2^11 bytes (no block spans two frames).
const ORDER: usize = 12;
const _: () = assert!(1 << (ORDER - 1) == SMALL_MAX);

/// One domain's kernel memory.
pub struct Arena {
    /// The domain whose frames it holds.
    owner: u32,
    inner: Mutex<Inner>,
}

struct Inner {
    /// Small objects, over the frames listed from `small_frames`.
    small: Heap<ORDER>,
    /// The physical address of the first small-object frame (each links to the next; 0 ends).
    small_frames: u64,
    /// How many small-object frames the arena holds.
    small_count: u64,
    /// Frames in large allocations now.
    large_frames: u64,
    /// Frames the arena may still take (granted by the kernel, see [`Arena::allow`]).
    allowance: u64,
    /// An allowance is open: frames of large allocations freed meanwhile go back to it.
    granting: bool,
    /// The last allocation that failed for want of frames.
    refused: Option<Layout>,
}

impl Inner {
    /// An arena that holds no frame.
    const EMPTY: Inner = Inner {
        small: Heap::empty(),
        small_frames: 0,
        small_count: 0,
        large_frames: 0,
        allowance: 0,
        granting: false,
        refused: None,
    };
}

/// Is `layout` served by the small-object heap?
fn is_small(layout: Layout) -> bool {
    layout.size().max(layout.align()) <= SMALL_MAX
}

/// Frames a large allocation of `layout` takes.
fn large_frames(layout: Layout) -> u64 {
    (layout.size() as u64).div_ceil(FRAME_SIZE).max(1)
}

impl Arena {
    /// An empty arena for domain `owner`.
    pub const fn new(owner: u32) -> Self {
        Arena { owner, inner: Mutex::new(Inner::EMPTY) }
    }

    /// Frames it would take to serve `layout` when no room is left.
    pub fn frames_needed(layout: Layout) -> u64 {
        if is_small(layout) { 1 } else { large_frames(layout) }
    }

    /// What the last allocation that failed for want of frames asked for (and forgets it).
    pub fn take_refused(&self) -> Option<Layout> {
        self.inner.lock().refused.take()
    }

    /// Lets the arena take up to `frames` more frames of its domain, on top of what it may take
    /// already; until [`Arena::end_allowance`], the frames of large allocations it frees go back
    /// to the allowance (a run that failed gives back what it took, for the next to take).
    pub fn allow(&self, frames: u64) {
        let mut inner = self.inner.lock();
        inner.allowance = inner.allowance.saturating_add(frames);
        inner.granting = true;
    }

    /// Ends the allowance: the arena takes no frame until the next [`Arena::allow`].
    pub fn end_allowance(&self) {
        let mut inner = self.inner.lock();
        inner.allowance = 0;
        inner.granting = false;
    }

    /// Frames the arena may still take.
    pub fn allowance(&self) -> u64 {
        self.inner.lock().allowance
    }

    /// Frames the arena holds now.
    pub fn frames(&self) -> u64 {
        let inner = self.inner.lock();
        inner.small_count + inner.large_frames
    }

    /// Gives every frame back to the free pool: the number of frames, or `Err` with the bytes
    /// still allocated (nothing is freed then).
    pub fn release(&self) -> Result<u64, usize> {
        let mut inner = self.inner.lock();
        let used = inner.small.stats_alloc_actual() + (inner.large_frames * FRAME_SIZE) as usize;
        if used != 0 {
            return Err(used);
        }
        let mut freed = 0;
        let mut next = inner.small_frames;
        while next != 0 {
            let frame = Frame::containing(next);
            // SAFETY: `next` is a small-object frame of this arena, owned by its domain and
            // mapped by the direct map; its first word is the link this arena wrote.
            next = unsafe { *(arch::phys_to_virt(next) as *const u64) };
            let _ = memory::free(frame, Owner::Domain(self.owner));
            freed += 1;
        }
        *inner = Inner::EMPTY;
        Ok(freed)
    }

    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        let mut inner = self.inner.lock();
        let refuse = |inner: &mut Inner| {
            inner.refused = Some(layout);
            Err(AllocError)
        };
        if is_small(layout) {
            loop {
                if let Ok(p) = inner.small.alloc(layout) {
                    return Ok(NonNull::slice_from_raw_parts(p, layout.size()));
                }
                if inner.allowance == 0 {
                    return refuse(&mut inner);
                }
                let Ok(frame) = memory::with_frames(|fa| fa.alloc(Owner::Domain(self.owner)))
                else {
                    return refuse(&mut inner);
                };
                inner.allowance -= 1;
                let va = arch::phys_to_virt(frame.addr());
                // SAFETY: the frame was just allocated to this arena's domain, nothing else
                // refers to it, and the direct map maps it read-write: its first `LINK` bytes
                // hold the link, the rest goes to the heap (and no heap block spans frames).
                unsafe {
                    *(va as *mut u64) = inner.small_frames;
                    inner.small.add_to_heap(va + LINK, va + FRAME_SIZE as usize);
                }
                inner.small_frames = frame.addr();
                inner.small_count += 1;
            }
        }
        let count = large_frames(layout);
        if inner.allowance < count {
            return refuse(&mut inner);
        }
        let align = (layout.align() as u64 / FRAME_SIZE).max(1);
        let Ok(first) =
            memory::with_frames(|fa| fa.alloc_contiguous(count, align, Owner::Domain(self.owner)))
        else {
            return refuse(&mut inner);
        };
        inner.allowance -= count;
        inner.large_frames += count;
        let p = arch::phys_to_virt(first.addr()) as *mut u8;
        let p = NonNull::new(p).ok_or(AllocError)?;
        Ok(NonNull::slice_from_raw_parts(p, layout.size()))
    }

    /// # Safety
    /// `ptr` and `layout` are those of a live allocation from this arena.
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        let mut inner = self.inner.lock();
        if is_small(layout) {
            // SAFETY: guaranteed by the caller: the block came from this heap with `layout`.
            unsafe { inner.small.dealloc(ptr, layout) };
            return;
        }
        let count = large_frames(layout);
        let first = Frame::containing(arch::virt_to_phys(ptr.as_ptr() as usize));
        let freed =
            memory::with_frames(|fa| fa.free_contiguous(first, count, Owner::Domain(self.owner)));
        if let Err(e) = freed {
            defmt::error!("arena of domain {=u32}: freeing a run failed: {}", self.owner, e);
        }
        inner.large_frames -= count;
        if inner.granting {
            inner.allowance += count;
        }
    }
}

/// The allocator of one domain's kernel objects: a handle on its [`Arena`].
#[derive(Clone, Copy)]
pub struct ArenaAlloc(&'static Arena);

impl ArenaAlloc {
    /// A handle on `arena`.
    pub fn new(arena: &'static Arena) -> Self {
        ArenaAlloc(arena)
    }

    /// The arena.
    pub fn arena(self) -> &'static Arena {
        self.0
    }
}

// SAFETY: blocks come from the arena's buddy heap or from frame runs it owns, stay valid until
// they are deallocated (the arena is released only when nothing is allocated from it), and a
// handle's clones all name the same arena, so any of them may free what another allocated.
unsafe impl Allocator for ArenaAlloc {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.0.allocate(layout)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: passed on from the caller.
        unsafe { self.0.deallocate(ptr, layout) }
    }
}
