//! Reads the RAM regions from the flattened device tree QEMU passes in `a1`.

/// Calls `f(start, size)` for every region in the `reg` of each `/memory` node. Returns `false`
/// if `dtb` does not point to a device tree.
pub fn ram_regions(dtb: usize, mut f: impl FnMut(usize, usize)) -> bool {
    if dtb == 0 || !dtb.is_multiple_of(8) {
        return false;
    }
    // SAFETY: QEMU's reset vector passes the address of the device tree it built in `a1`, and
    // the firmware forwards that register unchanged: it points to a complete flattened device
    // tree in RAM (`from_ptr` checks the header before reading `totalsize` bytes), and nothing
    // writes that memory while the firmware runs on the single boot hart before S-mode starts.
    let Ok(fdt) = (unsafe { fdt::Fdt::from_ptr(dtb as *const u8) }) else {
        return false;
    };
    let memory = fdt.all_nodes().filter(|n| n.name == "memory" || n.name.starts_with("memory@"));
    for region in memory.filter_map(|n| n.reg()).flatten() {
        f(region.starting_address as usize, region.size.unwrap_or(0));
    }
    true
}
