//! DMA memory of a driver domain: stretches from [`syscall::dma_alloc`], each physically
//! contiguous, registered here so that any address in one translates to the physical address
//! a device needs ([`phys`]) and back ([`virt`]).
//!
//! Every driver domain (virtio-blk, AHCI, and later the network drivers) makes its rings,
//! command tables and clients' data areas with [`alloc`] and hands devices the addresses
//! [`phys`] gives. A region is the domain's for its life: nothing here frees one.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::SysError;
use crate::syscall;

/// A physically contiguous DMA stretch: its address in the domain, its physical address, its
/// length in bytes (whole pages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaRegion {
    /// The stretch's base in the domain.
    pub virt: usize,
    /// The physical address of `virt`.
    pub phys: usize,
    /// Its length in bytes.
    pub len: usize,
}

impl DmaRegion {
    /// The physical address of `[virt, virt + len)` if it lies in this region.
    pub fn phys_of(&self, virt: usize, len: usize) -> Option<usize> {
        let end = virt.checked_add(len)?;
        (virt >= self.virt && end <= self.virt + self.len).then(|| self.phys + (virt - self.virt))
    }

    /// The domain's address of physical `[phys, phys + len)` if it lies in this region.
    pub fn virt_of(&self, phys: usize, len: usize) -> Option<usize> {
        let end = phys.checked_add(len)?;
        (phys >= self.phys && end <= self.phys + self.len).then(|| self.virt + (phys - self.phys))
    }
}

/// The most regions a domain registers.
pub const MAX_REGIONS: usize = 16;

/// The registered regions, `[0, COUNT)` of them, each as its address, physical address and
/// length. A domain runs one flow of control at a time (its threads switch cooperatively), so
/// a region is written whole before `COUNT` takes it in; the atomics only make the table
/// `Sync`.
static REGIONS: [[AtomicUsize; 3]; MAX_REGIONS] =
    [const { [const { AtomicUsize::new(0) }; 3] }; MAX_REGIONS];
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// The registered regions.
fn regions() -> impl Iterator<Item = DmaRegion> {
    REGIONS[..COUNT.load(Ordering::Acquire)].iter().map(|[virt, phys, len]| DmaRegion {
        virt: virt.load(Ordering::Relaxed),
        phys: phys.load(Ordering::Relaxed),
        len: len.load(Ordering::Relaxed),
    })
}

/// Makes a DMA stretch of `bytes` (rounded up to pages, zero-filled, charged to the domain's
/// guarantee) and registers it. [`SysError::NoMemory`] if [`MAX_REGIONS`] are registered
/// already (nothing is allocated then), or what `dma_alloc` and `dma_address` return.
pub fn alloc(bytes: usize) -> Result<DmaRegion, SysError> {
    let free = COUNT.load(Ordering::Acquire);
    let slot = REGIONS.get(free).ok_or(SysError::NoMemory)?;
    let virt = syscall::dma_alloc(bytes)?;
    let phys = syscall::dma_address(virt)?;
    let region = DmaRegion { virt, phys, len: bytes.next_multiple_of(crate::PAGE_SIZE) };
    slot[0].store(region.virt, Ordering::Relaxed);
    slot[1].store(region.phys, Ordering::Relaxed);
    slot[2].store(region.len, Ordering::Relaxed);
    COUNT.store(free + 1, Ordering::Release);
    Ok(region)
}

/// Makes a DMA stretch of `bytes` (as [`alloc`]) for the domain's own use as a buffer: its
/// bytes (zeroed) and the region. The slice is the only way to its memory the domain gets, and
/// a device writes it only for requests its holder submits, which it reads after they
/// complete.
pub fn alloc_buffer(bytes: usize) -> Result<(&'static mut [u8], DmaRegion), SysError> {
    let region = alloc(bytes)?;
    // SAFETY: the stretch was just made, read-write, of at least `bytes`, and is the domain's
    // for its life (nothing frees a region); nothing else refers to it, and this is its only
    // borrow.
    let mem = unsafe { core::slice::from_raw_parts_mut(region.virt as *mut u8, bytes) };
    Ok((mem, region))
}

/// `n` words at byte `offset` of `region` (8-byte aligned, inside it), as atomics: memory the
/// domain shares with another (given rights to the region) and that no device is asked to
/// touch, such as the accounts a driver publishes for a client. `None` if the range leaves
/// the region or is misaligned.
pub fn words(region: &DmaRegion, offset: usize, n: usize) -> Option<&'static [AtomicU64]> {
    let bytes = n.checked_mul(8)?;
    if !offset.is_multiple_of(8) || offset.checked_add(bytes)? > region.len {
        return None;
    }
    // SAFETY: the range lies inside a stretch of the domain's own (checked above), which
    // nothing frees, and is 8-byte aligned; atomics may alias other domains' accesses to the
    // same memory, and no plain Rust reference to it is made.
    Some(unsafe { core::slice::from_raw_parts((region.virt + offset) as *const AtomicU64, n) })
}

/// The physical address of `[virt, virt + len)` if it lies in one registered region.
pub fn phys(virt: usize, len: usize) -> Option<usize> {
    regions().find_map(|r| r.phys_of(virt, len))
}

/// The domain's address of physical `[phys, phys + len)` if it lies in one registered region.
pub fn virt(phys: usize, len: usize) -> Option<usize> {
    regions().find_map(|r| r.virt_of(phys, len))
}
