//! Probed accesses: loads, stores and word copies that report a fault instead of taking the
//! kernel down, the same on both architectures.
//!
//! Each architecture's `probe` module defines, in assembly, the probe routines these wrap (the
//! symbols below, each a single probed instruction with a fix-up) and the table its trap
//! handler consults to resume a faulting probe at its fix-up; it re-exports these functions as
//! its own. The routines share one calling convention: a read returns the value and a
//! "faulted" word, a write or copy returns "faulted".

#[repr(C)]
struct ReadResult {
    value: u64,
    faulted: u64,
}

unsafe extern "C" {
    fn __probe_read_u64(addr: usize) -> ReadResult;
    fn __probe_write_u64(addr: usize, value: u64) -> u64;
    fn __probe_read_u8(addr: usize) -> ReadResult;
    fn __probe_write_u8(addr: usize, value: u8) -> u64;
    fn __probe_copy_words(dst: *mut u64, src: usize, words: usize) -> u64;
}

/// Reads the `u64` at `addr`, or `None` if the access faults.
pub fn read_u64(addr: usize) -> Option<u64> {
    // SAFETY: the probe performs one load; a fault is caught by the trap handler and turned
    // into `faulted = 1`, so no address can harm the kernel. Reading device registers is the
    // caller's concern, hence the function is only used on memory.
    let r = unsafe { __probe_read_u64(addr) };
    (r.faulted == 0).then_some(r.value)
}

/// Reads the byte at `addr`, or `None` if the access faults.
pub fn read_u8(addr: usize) -> Option<u8> {
    // SAFETY: as for `read_u64`: one load, a fault is caught and reported.
    let r = unsafe { __probe_read_u8(addr) };
    (r.faulted == 0).then_some(r.value as u8)
}

/// Writes `value` to `addr`; `false` if the access faults.
pub fn write_u64(addr: usize, value: u64) -> bool {
    // SAFETY: as for `read_u64`; the caller chooses an address it is entitled to write (the
    // tests only write their own mappings), and a fault is caught.
    unsafe { __probe_write_u64(addr, value) == 0 }
}

/// Writes the byte `value` to `addr`; `false` if the access faults.
pub fn write_u8(addr: usize, value: u8) -> bool {
    // SAFETY: as for `write_u64`: one store, a fault is caught and reported; the caller
    // chooses an address it is entitled to write.
    unsafe { __probe_write_u8(addr, value) == 0 }
}

/// Copies `dst.len()` words from the address `src` (aligned) into `dst`, one probed load
/// each; `false` if a load faults (`dst` is then partly written).
pub fn copy_words(dst: &mut [u64], src: usize) -> bool {
    // SAFETY: the loop loads from `src` only through the probe instruction (a fault is caught
    // and reported) and stores only into `dst`, which it may write, `dst.len()` words.
    unsafe { __probe_copy_words(dst.as_mut_ptr(), src, dst.len()) == 0 }
}
