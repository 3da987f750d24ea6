//! QEMU's `fw_dynamic_info`: the record its reset vector passes in `a2`, telling the firmware
//! where the kernel (`-kernel`) was loaded and in which mode to enter it.

use crate::phys_mem;

/// The record, as OpenSBI's `fw_dynamic` defines it (all fields are XLEN wide).
#[repr(C)]
struct FwDynamicInfo {
    /// [`MAGIC`] when the record is valid.
    magic: usize,
    /// Version of the record (QEMU 7.2 writes 2).
    version: usize,
    /// Where to enter the next stage; 0 when QEMU was given no kernel.
    next_addr: usize,
    /// Privilege mode of the next stage ([`NEXT_MODE_S`]).
    next_mode: usize,
    /// OpenSBI options; unused here.
    options: usize,
    /// The preferred boot hart (version 2); QEMU writes 0, which is the hart that boots here.
    boot_hart: usize,
}

/// `"OSBI"` in little-endian bytes.
const MAGIC: usize = 0x4942_534f;
/// `next_mode` for S-mode.
const NEXT_MODE_S: usize = 1;
/// QEMU `virt`'s mask ROM, where the reset vector and the record live.
const MROM: core::ops::Range<usize> = 0x1000..0x1_0000;

/// Where QEMU loaded the kernel, if `info` points to a valid record that names an S-mode
/// kernel.
pub fn next_addr(info: usize) -> Option<usize> {
    let size = core::mem::size_of::<FwDynamicInfo>();
    let in_mrom = MROM.start <= info && info.checked_add(size)? <= MROM.end;
    if !info.is_multiple_of(8) || !(in_mrom || phys_mem::is_ram(info, size)) {
        return None;
    }
    // SAFETY: `info` is aligned and the whole record lies in memory that exists (QEMU's mask
    // ROM or RAM), so the read cannot fault; any bit pattern is a valid `FwDynamicInfo`, and the
    // magic number is checked before the contents are believed.
    let record = unsafe { (info as *const FwDynamicInfo).read_volatile() };
    (record.magic == MAGIC && record.next_mode == NEXT_MODE_S && record.next_addr != 0)
        .then_some(record.next_addr)
}
