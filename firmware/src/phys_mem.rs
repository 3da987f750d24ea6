//! The supervisor's physical memory, as far as the firmware touches it: buffers passed to the
//! debug console. The firmware runs with translation off, so a physical address is a pointer.
//!
//! A buffer is accepted only if it lies entirely in one RAM region of the device tree and does
//! not overlap the firmware's own image (its code, data and M-mode stack), so an SBI call with a
//! bad address fails with an error instead of faulting in M-mode or corrupting the firmware.

use core::sync::atomic::{AtomicUsize, Ordering};

/// How many RAM regions the firmware remembers (QEMU `virt` has one per NUMA node).
const MAX_REGIONS: usize = 8;

/// A RAM region `[start, end)`; `end == 0` marks an unused slot.
struct Region {
    /// First byte.
    start: AtomicUsize,
    /// One past the last byte.
    end: AtomicUsize,
}

/// The RAM regions, filled once at boot by [`init`].
static RAM: [Region; MAX_REGIONS] =
    [const { Region { start: AtomicUsize::new(0), end: AtomicUsize::new(0) } }; MAX_REGIONS];

unsafe extern "C" {
    /// The first byte of the firmware image (linker script).
    static __firmware_start: u8;
    /// One past the firmware image, including `.bss` and the M-mode stack (linker script).
    static __firmware_end: u8;
}

/// Records the RAM regions of the device tree at `dtb`; fatal if there are none.
pub fn init(dtb: usize) {
    let mut slot = 0;
    let parsed = crate::dtb::ram_regions(dtb, |start, size| {
        if slot < MAX_REGIONS && size > 0 {
            RAM[slot].start.store(start, Ordering::Relaxed);
            RAM[slot].end.store(start.saturating_add(size), Ordering::Relaxed);
            slot += 1;
        }
    });
    if !parsed || slot == 0 {
        crate::fatal(format_args!("no RAM found in the device tree at {dtb:#x}"));
    }
}

/// Whether `[addr, addr + len)` lies entirely in one RAM region.
pub fn is_ram(addr: usize, len: usize) -> bool {
    let Some(end) = addr.checked_add(len) else { return false };
    RAM.iter()
        .any(|r| r.start.load(Ordering::Relaxed) <= addr && end <= r.end.load(Ordering::Relaxed))
}

/// Whether `[addr, addr + len)` is RAM the supervisor may hand to the firmware.
fn is_supervisor_ram(addr: usize, len: usize) -> bool {
    let firmware = (&raw const __firmware_start as usize)..(&raw const __firmware_end as usize);
    is_ram(addr, len) && (addr + len <= firmware.start || firmware.end <= addr)
}

/// Runs `f` on the `len` bytes at physical address `addr`, or returns `None` if they are not
/// supervisor RAM.
pub fn with_bytes<R>(addr: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    if len == 0 {
        return Some(f(&[]));
    }
    if !is_supervisor_ram(addr, len) {
        return None;
    }
    // SAFETY: the range is RAM outside the firmware image (checked above), so it exists, is
    // readable in M-mode and no firmware object lives in it. The only other user is the
    // supervisor on this (single) hart, which is stopped in its `ecall` until `f` is done, so the
    // bytes do not change while borrowed; every byte pattern is a valid `u8`.
    Some(f(unsafe { core::slice::from_raw_parts(addr as *const u8, len) }))
}

/// Runs `f` on the `len` bytes at physical address `addr`, writable, or returns `None` if they
/// are not supervisor RAM.
pub fn with_bytes_mut<R>(addr: usize, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
    if len == 0 {
        return Some(f(&mut []));
    }
    if !is_supervisor_ram(addr, len) {
        return None;
    }
    // SAFETY: as in `with_bytes`: RAM outside the firmware image, not aliased by any firmware
    // reference, and the supervisor is stopped in its `ecall` while `f` writes the bytes.
    Some(f(unsafe { core::slice::from_raw_parts_mut(addr as *mut u8, len) }))
}
