//! The RISC-V (Sv39) virtual address layout of the single address space.
//!
//! | range | what |
//! |---|---|
//! | `0x0000_0000_0000_0000 .. 0x0000_0040_0000_0000` | domains (lower half, 256 GiB) |
//! | `0xffff_ffc0_0000_0000 .. +64 GiB` | direct map of physical memory (`DIRECT_MAP_BASE + pa`) |
//! | `0xffff_ffe0_0000_0000 .. +1 GiB` | kernel dynamic mappings (`KERNEL_DYNAMIC_BASE`) |
//! | `0xffff_ffff_c020_0000 ..` | the kernel image (`KERNEL_VIRT`, loaded at `KERNEL_PHYS`) |

/// Where the direct map of physical memory starts.
pub const DIRECT_MAP_BASE: u64 = 0xffff_ffc0_0000_0000;
/// Largest physical address the direct map covers.
pub const DIRECT_MAP_BYTES: u64 = 64 << 30;
/// Kernel mappings made at run time (tests, later device windows).
pub const KERNEL_DYNAMIC_BASE: u64 = 0xffff_ffe0_0000_0000;
/// The kernel image's link address.
pub const KERNEL_VIRT: u64 = 0xffff_ffff_c020_0000;
/// The kernel image's load address.
pub const KERNEL_PHYS: u64 = 0x8020_0000;
