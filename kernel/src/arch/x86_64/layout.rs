//! The x86_64 virtual address layout of the kernel (4-level paging, 48-bit addresses).
//!
//! | range | what |
//! |---|---|
//! | `0x0000_0000_0000_0000 .. 0x0000_8000_0000_0000` | lower half: unmapped in the kernel's tables (domains come with their port) |
//! | `0xffff_8000_0000_0000 .. +64 TiB` | direct map of physical memory (`DIRECT_MAP_BASE + pa`) |
//! | `0xffff_c000_0000_0000 .. +1 GiB` | kernel mappings made at run time (`KERNEL_DYNAMIC_BASE`): the local APIC's registers, tests |
//! | `0xffff_ffff_8000_0000 ..` | the kernel image (`KERNEL_VMA + pa`), loaded at 1 MiB |

/// Where the direct map of physical memory starts (root entry 256).
pub const DIRECT_MAP_BASE: u64 = 0xffff_8000_0000_0000;
/// The most physical memory the direct map can cover (root entries 256 to 383).
pub const DIRECT_MAP_BYTES: u64 = 64 << 40;
/// How much physical memory the boot page tables map at [`DIRECT_MAP_BASE`]: the first 4 GiB,
/// until `init_platform` replaces them.
pub const BOOT_MAP_BYTES: u64 = 4 << 30;
/// Kernel mappings made at run time (root entry 384).
pub const KERNEL_DYNAMIC_BASE: u64 = 0xffff_c000_0000_0000;
/// Where the local APIC's register page is mapped (uncached), the first page of the dynamic
/// range.
pub const LAPIC_VIRT: u64 = KERNEL_DYNAMIC_BASE;
/// Where the kernel image is linked: its virtual address is this plus its physical address.
pub const KERNEL_VMA: u64 = 0xffff_ffff_8000_0000;
