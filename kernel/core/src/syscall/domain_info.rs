//! `domain_info(buf, len)`: the caller's own record ([`abi::DomainInfo`]: its identifier, its
//! name from the manifest, its memory accounts) copied to a buffer in its memory.
//!
//! This body is the course lab `syscall` (`docs/labs/syscall.md`): a system call that takes a
//! pointer from user space must check every argument before it writes a byte, and copy only
//! through the platform's user-memory access ([`Platform::copy_to_user`]).

// LAB(syscall) BEGIN
use abi::DomainInfo;
// LAB(syscall) END
use abi::SysError;

use crate::domain::DomainId;
use crate::{Platform, World};

/// `domain_info`: copies domain `id`'s record to its memory at `buf`, which has room for `len`
/// bytes; returns the bytes written. A refused call writes nothing: `InvalidArgument` if `len`
/// is shorter than the record, `BadAddress` if some byte of the record's place is not the
/// caller's to write now.
pub(super) fn domain_info<P: Platform>(
    w: &World<P>,
    id: DomainId,
    buf: usize,
    len: usize,
) -> Result<usize, SysError> {
    // LAB(syscall) BEGIN
    // The buffer must hold the whole record.
    if len < DomainInfo::SIZE {
        return Err(SysError::InvalidArgument);
    }
    // Every byte must be the caller's to write now: in stretches it holds write rights on
    // (which rules out a range that wraps or leaves the user half) and, in a stretch it pages
    // itself, on pages mapped writable. Checked before the copy: a copy refused half-way
    // would have written part of the record.
    if !w.may_write_now(id, buf, DomainInfo::SIZE) {
        return Err(SysError::BadAddress);
    }
    let d = &w.domains[id];
    let record = DomainInfo::new(
        id.raw(),
        &d.name,
        d.guaranteed_frames,
        d.optimistic_frames,
        w.domains.charged(id),
        d.faults,
    );
    P::copy_to_user(&record.to_bytes(), buf).map_err(|_| SysError::BadAddress)?;
    Ok(DomainInfo::SIZE)
    // LAB(syscall) HANDOUT
    // // Check `len`, then that the caller may write the record's bytes at `buf` now, then
    // // fill an `abi::DomainInfo` from the domain's record (`w.domains[id]`) and copy its
    // // bytes out with `P::copy_to_user`. docs/labs/syscall.md tells where to look.
    // let _ = (w, id, buf, len);
    // Err(SysError::NoSuchCall)
    // LAB(syscall) END
}
