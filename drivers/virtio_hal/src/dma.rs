//! DMA memory for the device: the `virtio-drivers` [`Hal`] over stretches from `dma_alloc`.
//!
//! A driver domain's DMA stretches are physically contiguous and registered with
//! `tessera::dma`, which translates an address in one. A pool of pages of one stretch made at
//! start ([`init_pool`]) serves the crate's allocations (the virtqueues); buffers the device
//! reads or writes lie in a DMA stretch and [`Hal::share`] translates them.
//! The few the crate keeps on the stack (the header and status of a blocking flush) are
//! copied through a small bounce area of DMA memory, in and back out.
//!
//! **Per-request translation.** A request may carry a frame a client lent the driver (the
//! kernel's `frame_lend`) instead of a buffer of the driver's: the driver has no mapping of
//! it, only its device address for that request (`loan_address`). The crate wants a buffer
//! it can name, so the request is given a *stand-in*: a page of the driver's own memory
//! ([`init_stand_ins`], one per request the device holds at once) that [`lend_through`] binds
//! to the lent frame's address for that request alone, and [`Hal::share`] translates to it
//! instead of its own; [`end_lent`] unbinds it at completion. The device reads or writes the
//! lent frame, never the stand-in, and nothing is copied.

use core::ptr::NonNull;

use spin::Mutex;
use tessera::dma;
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

/// The page pool and the bounce slots.
struct State {
    /// The pool's next free byte and its end.
    next: usize,
    end: usize,
    /// The bounce slots (their addresses, [`BOUNCE_SLOT`] bytes each) and which are taken.
    bounce: usize,
    bounce_taken: [bool; BOUNCE_SLOTS],
}

/// Bounce slots, and the largest buffer one holds.
const BOUNCE_SLOTS: usize = 8;
const BOUNCE_SLOT: usize = 512;

static STATE: Mutex<State> =
    Mutex::new(State { next: 0, end: 0, bounce: 0, bounce_taken: [false; BOUNCE_SLOTS] });

/// The most requests with a lent frame at the device at once.
pub const STAND_INS: usize = 16;

/// The stand-in pages: where they start, how many, and the lent frame each stands for now
/// (its device address and length).
struct StandIns {
    base: usize,
    count: usize,
    bound: [Option<(u64, usize)>; STAND_INS],
}

static STAND: Mutex<StandIns> =
    Mutex::new(StandIns { base: 0, count: 0, bound: [None; STAND_INS] });

/// Makes `count` (at most [`STAND_INS`]) stand-in pages for requests that carry lent frames.
pub fn init_stand_ins(count: usize) -> Result<(), abi::SysError> {
    let count = count.min(STAND_INS);
    let pages = dma::alloc(count * abi::PAGE_SIZE)?;
    let mut s = STAND.lock();
    s.base = pages.virt;
    s.count = count;
    Ok(())
}

/// Binds stand-in `slot` to the lent frame at device address `phys` for a request of `len`
/// bytes (at most a page); the buffer to give the crate, whose `share` is `phys`. `None` if
/// there is no such stand-in or it is bound already.
pub fn lend_through(slot: usize, phys: u64, len: usize) -> Option<NonNull<[u8]>> {
    let mut s = STAND.lock();
    if slot >= s.count || len > abi::PAGE_SIZE || s.bound[slot].is_some() {
        return None;
    }
    s.bound[slot] = Some((phys, len));
    let at = NonNull::new((s.base + slot * abi::PAGE_SIZE) as *mut u8)?;
    Some(NonNull::slice_from_raw_parts(at, len))
}

/// Unbinds stand-in `slot`: its request is complete.
pub fn end_lent(slot: usize) {
    if let Some(b) = STAND.lock().bound.get_mut(slot) {
        *b = None;
    }
}

/// The lent frame's device address a stand-in buffer of `len` bytes at `virt` stands for,
/// if it is one.
fn lent_address(virt: usize, len: usize) -> Option<u64> {
    let s = STAND.lock();
    let offset = virt.checked_sub(s.base)?;
    let slot = offset / abi::PAGE_SIZE;
    if s.base == 0 || slot >= s.count {
        return None;
    }
    let (phys, bound) = s.bound[slot]?;
    let within = offset % abi::PAGE_SIZE;
    (within + len <= bound).then_some(phys + within as u64)
}

/// The granted device, whose register windows `mmio_phys_to_virt` translates into.
static DEVICE: Mutex<Option<abi::DeviceSlot>> = Mutex::new(None);

/// Records the granted device whose windows the transports may ask for.
pub fn set_device(slot: abi::DeviceSlot) {
    *DEVICE.lock() = Some(slot);
}

/// Makes the page pool the `Hal` allocates from (a DMA stretch of `bytes`) and the bounce
/// area.
pub fn init_pool(bytes: usize) -> Result<(), abi::SysError> {
    let pool = dma::alloc(bytes)?;
    let bounce = dma::alloc(BOUNCE_SLOTS * BOUNCE_SLOT)?;
    let mut s = STATE.lock();
    s.next = pool.virt;
    s.end = pool.virt + pool.len;
    s.bounce = bounce.virt;
    Ok(())
}

/// Takes a bounce slot for a buffer of `len` bytes; its address.
fn take_bounce(len: usize) -> Option<usize> {
    let mut s = STATE.lock();
    if len > BOUNCE_SLOT || s.bounce == 0 {
        return None;
    }
    let i = s.bounce_taken.iter().position(|t| !t)?;
    s.bounce_taken[i] = true;
    Some(s.bounce + i * BOUNCE_SLOT)
}

/// Gives back the bounce slot at `virt`, if it is one.
fn give_bounce(virt: usize) -> bool {
    let mut s = STATE.lock();
    let end = s.bounce + BOUNCE_SLOTS * BOUNCE_SLOT;
    if s.bounce == 0 || !(s.bounce..end).contains(&virt) {
        return false;
    }
    let i = (virt - s.bounce) / BOUNCE_SLOT;
    s.bounce_taken[i] = false;
    true
}

/// The `virtio-drivers` HAL of a Tessera driver domain.
pub struct TesseraHal;

// SAFETY: `dma_alloc` returns zeroed, physically contiguous pages of a DMA stretch the domain
// owns for its whole life (the pool is never given back), at the physical address the device
// needs; `share` returns a buffer's physical address if it lies in one such stretch, or else
// that of a bounce slot of DMA memory holding a copy, copied back by `unshare`, or for a
// stand-in bound to a lent frame that frame's address, which the kernel keeps the borrower's
// until the loan is returned at the request's completion; and
// `mmio_phys_to_virt` returns the address at which the kernel mapped those registers, uncached,
// for this domain's life.
unsafe impl Hal for TesseraHal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let bytes = pages * abi::PAGE_SIZE;
        let virt = {
            let mut s = STATE.lock();
            let virt = s.next;
            assert!(virt != 0 && virt + bytes <= s.end, "the DMA pool is exhausted");
            s.next += bytes;
            virt
        };
        let phys = dma::phys(virt, bytes).expect("the pool is a registered region");
        (phys as PhysAddr, NonNull::new(virt as *mut u8).expect("the pool is not at 0"))
    }

    unsafe fn dma_dealloc(_paddr: PhysAddr, _vaddr: NonNull<u8>, _pages: usize) -> i32 {
        // The pool's pages are the driver's for its life (virtqueues are made once).
        0
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, size: usize) -> NonNull<u8> {
        let slot = DEVICE.lock().expect("the device is recorded before a transport is made");
        window_virt(&slot, paddr as usize, size)
            .expect("the device's registers lie in a window the kernel mapped")
    }

    unsafe fn share(buffer: NonNull<[u8]>, direction: BufferDirection) -> PhysAddr {
        let (virt, len) = (buffer.as_ptr() as *mut u8 as usize, buffer.len());
        // A stand-in first (its page is DMA memory too): the device goes to the lent frame,
        // for this request only.
        if let Some(phys) = lent_address(virt, len) {
            return phys as PhysAddr;
        }
        if let Some(phys) = dma::phys(virt, len) {
            return phys as PhysAddr;
        }
        // Not DMA memory (the crate's own stack): through a bounce slot.
        let slot = take_bounce(len).expect("a buffer given to the device is not DMA memory");
        if direction != BufferDirection::DeviceToDriver {
            // SAFETY: the caller's buffer is valid for `len` bytes; the slot is ours, of at
            // least `len` bytes, and does not overlap it.
            unsafe { core::ptr::copy_nonoverlapping(virt as *const u8, slot as *mut u8, len) };
        }
        dma::phys(slot, len).expect("the bounce area is DMA memory") as PhysAddr
    }

    unsafe fn unshare(paddr: PhysAddr, buffer: NonNull<[u8]>, direction: BufferDirection) {
        let (virt, len) = (buffer.as_ptr() as *mut u8 as usize, buffer.len());
        if lent_address(virt, len).is_some() || dma::phys(virt, len).is_some() {
            return;
        }
        let Some(slot) = dma::virt(paddr as usize, len) else {
            return;
        };
        if direction != BufferDirection::DriverToDevice {
            // SAFETY: `slot` is the bounce slot `share` gave this buffer, holding what the
            // device wrote; the caller's buffer is valid for `len` bytes.
            unsafe { core::ptr::copy_nonoverlapping(slot as *const u8, virt as *mut u8, len) };
        }
        give_bounce(slot);
    }
}

/// The physical-to-virtual translation of the granted windows, for `Hal::mmio_phys_to_virt`.
fn window_virt(slot: &abi::DeviceSlot, phys: usize, size: usize) -> Option<NonNull<u8>> {
    slot.windows.iter().filter(|w| w.base != 0).find_map(|w| {
        let (start, end) = (w.phys as usize, (w.phys + w.len) as usize);
        (phys >= start && phys + size <= end)
            .then(|| NonNull::new((w.base as usize + (phys - start)) as *mut u8))
            .flatten()
    })
}
