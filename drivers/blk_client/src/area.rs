//! The data area of a block session: memory of the driver domain, granted read-write to the
//! client for the session, which the device reads and writes for the client's transfers.
#![allow(unsafe_code)]

/// The data area the driver granted at the Open.
pub struct DataArea {
    base: usize,
    len: usize,
}

impl DataArea {
    /// The area at `base` of `len` bytes, as the Open response describes it.
    pub(crate) fn new(base: u64, len: u64) -> DataArea {
        DataArea { base: base as usize, len: len as usize }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes `[offset, offset + len)` of the area, for a transfer at that offset that is not in
    /// flight.
    ///
    /// # Panics
    /// If the range leaves the area.
    pub fn bytes(&mut self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len), "outside the area");
        // SAFETY: the driver made the area a stretch of its own memory and gave this domain
        // read-write rights on all `len` bytes of it for as long as the session lasts (the
        // session forgets the area at its close); the range is inside it (checked above); the
        // `&mut self` borrow keeps this the only Rust reference into it, and the device writes
        // a range only while a request on it is in flight, which the caller does not look at
        // until the request completes.
        unsafe { core::slice::from_raw_parts_mut((self.base + offset) as *mut u8, len) }
    }
}
