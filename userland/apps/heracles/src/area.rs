//! The memory this app reaches by address: the block session's data area (which the driver
//! domain granted it) and the paged stretch (which its own driver pages).
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

/// The data area of a block session.
pub struct DataArea {
    base: usize,
    len: usize,
}

impl DataArea {
    /// The area the Open response described.
    pub fn new(base: u64, len: u64) -> DataArea {
        DataArea { base: base as usize, len: len as usize }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes `[0, len)` of the area.
    ///
    /// # Panics
    /// If `len` exceeds the area.
    pub fn prefix(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.len, "outside the data area");
        // SAFETY: the driver made the area a stretch of its own memory and gave this domain
        // read-write rights on all of it for the session; the range is inside it (checked
        // above); the `&mut self` borrow keeps this the only reference, and the device writes
        // the area only while a request is in flight, which the session never has while it
        // looks at the area (it sends one request and waits for its response).
        unsafe { bytes(self.base, len) }
    }
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
