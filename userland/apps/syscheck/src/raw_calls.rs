//! System calls with arguments the safe wrappers would not let through.

use tessera::SysError;
use tessera::syscall::raw;

/// Call number `n` with `args`.
pub fn call(n: usize, args: [usize; 6]) -> Result<usize, SysError> {
    // SAFETY: an unknown call number changes nothing.
    unsafe { raw(n, args) }
}

/// `console_write(ptr, len)` with any pointer.
pub fn console(ptr: usize, len: usize) -> Result<usize, SysError> {
    // SAFETY: console_write only reads, and the kernel checks the range.
    unsafe { raw(abi::Call::ConsoleWrite as usize, [ptr, len, 0, 0, 0, 0]) }
}

/// `domain_info(buf, len)` with any buffer.
pub fn domain_info(buf: usize, len: usize) -> Result<usize, SysError> {
    // SAFETY: the callers pass buffers the kernel must refuse (too short, read-only, the
    // kernel's), so it writes nothing.
    unsafe { tessera::syscall::domain_info_raw(buf, len) }
}

/// `stretch_create(bytes, rights)` with raw rights bits.
pub fn create(bytes: usize, rights: usize) -> Result<usize, SysError> {
    // SAFETY: creating a stretch takes nothing away from the caller.
    unsafe { raw(abi::Call::StretchCreate as usize, [bytes, rights, 0, 0, 0, 0]) }
}

/// `stretch_destroy(base)`; the caller keeps no reference into `base`.
pub fn destroy(base: usize) -> Result<usize, SysError> {
    // SAFETY: the callers pass addresses they hold no Rust references into.
    unsafe { raw(abi::Call::StretchDestroy as usize, [base, 0, 0, 0, 0, 0]) }
}

/// `stretch_rights(base, domain, rights)` with raw values.
pub fn rights(base: usize, domain: usize, rights: usize) -> Result<usize, SysError> {
    // SAFETY: the callers never lower their own rights on memory they reference.
    unsafe { raw(abi::Call::StretchRights as usize, [base, domain, rights, 0, 0, 0]) }
}

/// `map_batch(ops, count)` with any pointer and count.
pub fn map_batch(ops: usize, count: usize) -> Result<(), (usize, SysError)> {
    // SAFETY: the callers pass pointers to no entries, or entries the kernel refuses, so no
    // page changes.
    unsafe { tessera::syscall::map_batch_raw(ops, count) }
}

/// `page_state(va, count, out, clear)` with any arguments.
pub fn page_state(va: usize, count: usize, out: usize, clear: usize) -> Result<(), SysError> {
    // SAFETY: the callers pass arguments the kernel refuses, so it writes nothing; clearing
    // accessed and dirty bits would change no access anyway.
    unsafe { tessera::syscall::page_state_raw(va, count, out, clear) }
}

/// Sums `n` words at `words` (which must read as zero), then writes each word.
pub fn fill_and_sum(words: *mut u64, n: usize) -> u64 {
    let mut sum = 0;
    for i in 0..n {
        // SAFETY: `words` is a fresh read-write stretch of at least `n` words owned by us.
        unsafe {
            sum += words.add(i).read_volatile();
            words.add(i).write_volatile(i as u64);
        }
    }
    sum
}
