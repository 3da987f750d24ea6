//! The fuzzer's only unsafe code: system calls with arbitrary arguments, and reads and writes of
//! the stretches it created.

use tessera::SysError;
use tessera::syscall::raw;

use crate::own::Own;

/// Makes call `n` with `args` if [`Own::harmless`] lets it through; `None` if not.
pub fn call(own: &Own, n: usize, args: [usize; 6]) -> Option<Result<usize, SysError>> {
    if !own.harmless(n, args) {
        return None;
    }
    // SAFETY: `raw` requires that the call does not unmap or remove access to memory Rust code
    // references. `Own::harmless` admits only calls that cannot, whatever the kernel does with
    // them: destroying or changing rights on stretches the fuzzer created (it never holds a
    // reference into them; `check_fresh` and `probe` use raw pointers during a single call),
    // or its channel (never touched), or on memory outside its own; rights for itself on its
    // own memory only with every bit set (adding access, never removing it); no `exit`,
    // `block`, or `resume` or `activation_set` with its own memory.
    Some(unsafe { raw(n, args) })
}

/// The word at `addr`, which must lie in a created stretch the fuzzer may read.
fn read(own: &Own, addr: usize) -> Option<u64> {
    let c = own.created().iter().find(|c| (c.base..c.base + c.pages * 4096).contains(&addr))?;
    if c.rights & 3 == 0 || !addr.is_multiple_of(8) {
        return None;
    }
    // SAFETY: `addr` is 8-aligned and inside a stretch the fuzzer created and has not destroyed,
    // on which its domain holds read or write rights (write implies read in the page tables),
    // as `Own` records after every successful `stretch_create` and `stretch_rights`. No Rust
    // reference to that memory exists.
    Some(unsafe { (addr as *const u64).read_volatile() })
}

/// Writes `value` at `addr`, which must lie in a created stretch the fuzzer may write.
fn write(own: &Own, addr: usize, value: u64) -> bool {
    let writable = own
        .created()
        .iter()
        .any(|c| (c.base..c.base + c.pages * 4096).contains(&addr) && c.rights & 2 != 0);
    if !writable || !addr.is_multiple_of(8) {
        return false;
    }
    // SAFETY: as in `read`, with write rights: the page is mapped writable, nothing else in the
    // fuzzer refers to it.
    unsafe { (addr as *mut u64).write_volatile(value) };
    true
}

/// The addresses of the first word of the first and of the last page of a stretch (one
/// address for a stretch of one page).
fn ends(base: usize, pages: usize) -> impl Iterator<Item = usize> {
    [base, base + (pages - 1) * 4096].into_iter().take(pages.min(2))
}

/// Checks a stretch just created at `base`: where readable, its first and last pages start
/// with zero; where writable, a marker written there reads back. Records the marker. False if
/// any check fails.
pub fn check_fresh(own: &mut Own, base: usize) -> bool {
    let Some(c) = own.find(base).copied() else { return false };
    let mut ok = true;
    for at in ends(c.base, c.pages) {
        if let Some(v) = read(own, at) {
            ok &= v == 0;
        }
        if write(own, at, base as u64) {
            ok &= read(own, at) == Some(base as u64);
        }
    }
    if c.rights & 2 != 0
        && let Some(c) = own.find_mut(base)
    {
        c.marker = base as u64;
    }
    ok
}

/// Re-reads the markers of every created stretch the fuzzer may read. False if one changed.
pub fn probe(own: &Own) -> bool {
    own.created().iter().all(|c| {
        ends(c.base, c.pages).all(|at| match read(own, at) {
            Some(v) => v == c.marker,
            None => true,
        })
    })
}
