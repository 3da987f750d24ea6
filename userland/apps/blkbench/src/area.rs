//! The data area the driver domain gave this client: its bytes, reached through the address
//! the Open response named (the driver granted this domain read-write rights on it).

/// The data area.
pub struct Area {
    base: usize,
    len: usize,
}

impl Area {
    /// The area at `base` of `len` bytes, as the Open response describes it.
    pub fn new(base: u64, len: u64) -> Area {
        Area { base: base as usize, len: len as usize }
    }

    /// Bytes `[offset, offset + len)` of the area.
    ///
    /// # Panics
    /// If the range leaves the area.
    pub fn bytes(&mut self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len), "outside the area");
        // SAFETY: the driver made the area a stretch of its own memory and gave this domain
        // read-write rights on all `len` bytes of it for as long as the session lasts; the
        // range is inside it (checked above); the `&mut self` borrow keeps this the only Rust
        // reference into it (the device writes a range only while a request on it is in
        // flight, and the client does not look at that range until the request completes).
        unsafe { core::slice::from_raw_parts_mut((self.base + offset) as *mut u8, len) }
    }
}
