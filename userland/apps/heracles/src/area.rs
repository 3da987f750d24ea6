//! The memory this app reaches by address: the paged stretch, which its own driver pages.
#![allow(unsafe_code)]

/// `len` bytes at `base` as a mutable slice.
///
/// # Safety
/// The range must be memory this domain may read and write for as long as the slice lives
/// (mapped, or in a stretch whose driver maps it on a fault), and no other reference to it may
/// be used meanwhile.
unsafe fn bytes<'a>(base: usize, len: usize) -> &'a mut [u8] {
    // SAFETY: the caller's contract (above).
    unsafe { core::slice::from_raw_parts_mut(base as *mut u8, len) }
}

/// The paged stretch at `base` of `len` bytes, which this domain's paged driver is bound to.
///
/// # Safety
/// Call once per stretch: the slice is the only reference to it for the program's run.
pub unsafe fn stretch(base: usize, len: usize) -> &'static mut [u8] {
    // SAFETY: the stretch is this domain's, read-write, and its driver maps every page on
    // a fault (as the faulting thread), so every byte can be read and written; the caller
    // makes this the only reference.
    unsafe { bytes(base, len) }
}
