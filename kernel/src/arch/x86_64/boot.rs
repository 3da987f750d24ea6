//! PVH boot: the ELF note QEMU looks for, the 32-bit trampoline into long mode and the upper
//! half, and the Rust entry that turns QEMU's `hvm_start_info` into a [`BootInfo`].
//!
//! QEMU's `-kernel` loader finds the `XEN_ELFNOTE_PHYS32_ENTRY` note and starts `pvh_entry32`
//! in 32-bit protected mode, paging off, with `ebx` = physical address of `hvm_start_info`.
//! The trampoline builds page tables with 2 MiB pages that map the first 4 GiB of physical
//! memory three times: at 0 (identity, so the trampoline survives turning paging on), at
//! `0xffff_8000_0000_0000` (the direct map) and, for the first 2 GiB, at `0xffff_ffff_8000_0000`
//! (the kernel image window the kernel is linked in). It then enters long mode, jumps to
//! `boot64_high` in the upper half, which reloads the GDT from there, zeroes `.bss`, switches to
//! the 64 KiB boot stack and calls [`tessera_x86_64_boot`]. The boot stack has a guard page
//! below it, which the kernel's own page tables leave unmapped (`init_platform`).
//!
//! These boot tables serve only until `init_platform` builds the kernel's: they map the first
//! 4 GiB, so the boot code reads the start info and the memory map from there, and the frame
//! allocator's tables and heap (taken from the lowest free RAM) lie there too.

use core::fmt::Write as _;

use ::x86_64::instructions::port::Port;

use super::layout::{BOOT_MAP_BYTES, DIRECT_MAP_BYTES};
use super::{apic, calibrate, exit, interrupts, phys_to_virt, serial};
use crate::BootInfo;
use crate::boot_info::{Device, PhysRange, fixed};

core::arch::global_asm!(
    r#"
    .set KERNEL_VMA, 0xffffffff80000000

    /* XEN_ELFNOTE_PHYS32_ENTRY: QEMU reads the descriptor as an ELF-class word (8 bytes). */
    .pushsection .note.Xen, "a", @note
    .balign 4
    .long 4
    .long 8
    .long 18
    .asciz "Xen"
    .balign 4
    .quad pvh_entry32
    .balign 4
    .popsection

    /* Boot page tables: PML4, low PDPT (identity and direct map), high PDPT (kernel window),
       four page directories of 2 MiB pages for 0..4 GiB. */
    .pushsection .boot32.bss, "aw", @nobits
    .balign 4096
boot_pml4:
    .skip 4096
boot_pdpt_low:
    .skip 4096
boot_pdpt_high:
    .skip 4096
boot_pd:
    .skip 4 * 4096
    .popsection

    .pushsection .boot32.data, "aw"
    .balign 8
boot_gdtr32:
    .word 3 * 8 - 1
    .long boot_gdt - KERNEL_VMA
    .popsection

    .pushsection .boot32.text, "ax"
    .code32
    .global pvh_entry32
pvh_entry32:
    cli
    cld
    /* Zero the tables (7 pages). ebx holds the start info pointer throughout. */
    movl $boot_pml4, %edi
    movl $(7 * 4096 / 4), %ecx
    xorl %eax, %eax
    rep stosl
    /* 2048 page-directory entries: present, writable, 2 MiB page. */
    xorl %ecx, %ecx
1:
    movl %ecx, %eax
    shll $21, %eax
    orl $0x83, %eax
    movl %eax, boot_pd(, %ecx, 8)
    incl %ecx
    cmpl $2048, %ecx
    jb 1b
    movl $(boot_pd + 0x0003), boot_pdpt_low
    movl $(boot_pd + 0x1003), boot_pdpt_low + 8
    movl $(boot_pd + 0x2003), boot_pdpt_low + 16
    movl $(boot_pd + 0x3003), boot_pdpt_low + 24
    movl $(boot_pd + 0x0003), boot_pdpt_high + 510 * 8
    movl $(boot_pd + 0x1003), boot_pdpt_high + 511 * 8
    movl $(boot_pdpt_low + 3), boot_pml4
    movl $(boot_pdpt_low + 3), boot_pml4 + 256 * 8
    movl $(boot_pdpt_high + 3), boot_pml4 + 511 * 8
    movl $boot_pml4, %eax
    movl %eax, %cr3
    movl %cr4, %eax
    orl $(1 << 5), %eax             /* PAE */
    movl %eax, %cr4
    movl $0xc0000080, %ecx          /* EFER */
    rdmsr
    orl $(1 << 8), %eax             /* LME */
    wrmsr
    movl %cr0, %eax
    orl $0x80010001, %eax           /* PG | WP | PE */
    movl %eax, %cr0
    lgdt boot_gdtr32
    ljmp $0x08, $long_mode_low

    .code64
long_mode_low:
    movabsq $boot64_high, %rax
    jmp *%rax
    .popsection

    .pushsection .text.boot64, "ax"
    .code64
boot64_high:
    leaq __boot_stack_top(%rip), %rsp
    lgdt boot_gdtr64(%rip)
    movl $0x10, %eax
    movl %eax, %ds
    movl %eax, %es
    movl %eax, %ss
    xorl %eax, %eax
    movl %eax, %fs
    movl %eax, %gs
    leaq 2f(%rip), %rax
    pushq $0x08
    pushq %rax
    lretq
2:
    leaq __bss_start(%rip), %rdi
    leaq __bss_end(%rip), %rcx
    subq %rdi, %rcx
    shrq $3, %rcx
    xorl %eax, %eax
    rep stosq
    leaq __boot_stack_top(%rip), %rsp
    xorl %ebp, %ebp
    movl %ebx, %edi
    call tessera_x86_64_boot
3:
    cli
    hlt
    jmp 3b
    .popsection

    .pushsection .rodata.boot_gdt, "a"
    .balign 16
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff        /* 0x08: 64-bit code */
    .quad 0x00cf92000000ffff        /* 0x10: data */
    .balign 8
    .skip 6
boot_gdtr64:
    .word 3 * 8 - 1
    .quad boot_gdt
    .popsection

    .pushsection .bss.boot_stack, "aw", @nobits
    .balign 4096
    .globl __boot_stack_guard
__boot_stack_guard:
    .skip 4096
boot_stack_bottom:
    .skip {boot_stack}
    .globl __boot_stack_top
__boot_stack_top:
    .popsection
"#,
    boot_stack = const BOOT_STACK_BYTES,
    options(att_syntax)
);

/// Bytes of boot stack.
pub const BOOT_STACK_BYTES: usize = 64 * 1024;

unsafe extern "C" {
    static __kernel_phys_start: u8;
    static __kernel_phys_end: u8;
    static __boot_stack_guard: u8;
    static __boot_stack_top: u8;
}

/// The guard page under the boot stack and the stack's top (virtual addresses).
pub fn boot_stack() -> (usize, usize) {
    (&raw const __boot_stack_guard as usize, &raw const __boot_stack_top as usize)
}

/// `hvm_start_info.magic`.
const PVH_MAGIC: u32 = 0x336e_c578;
/// E820 type of usable RAM.
const E820_RAM: u32 = 1;

/// The PVH start info (Xen `hvm_start_info`, version 1; version 0 ends after `rsdp_paddr`).
#[repr(C)]
#[derive(Clone, Copy)]
struct StartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    nr_modules: u32,
    modlist_paddr: u64,
    cmdline_paddr: u64,
    rsdp_paddr: u64,
    memmap_paddr: u64,
    memmap_entries: u32,
    reserved: u32,
}

/// One entry of the PVH memory map (E820 layout).
#[repr(C)]
#[derive(Clone, Copy)]
struct MemmapEntry {
    addr: u64,
    size: u64,
    kind: u32,
    reserved: u32,
}

/// One entry of the PVH module list (Xen `hvm_modlist_entry`): QEMU puts its `-initrd` there.
#[repr(C)]
#[derive(Clone, Copy)]
struct ModlistEntry {
    paddr: u64,
    size: u64,
    cmdline_paddr: u64,
    reserved: u64,
}

/// Reads a `T` at physical address `pa`, if the boot page tables' direct map covers it.
///
/// # Safety
/// The bytes at `pa` must be a valid `T` that nothing writes concurrently.
unsafe fn read_phys<T: Copy>(pa: u64) -> Option<T> {
    let end = pa.checked_add(size_of::<T>() as u64)?;
    if pa == 0 || end > BOOT_MAP_BYTES {
        return None;
    }
    // SAFETY: the range is inside the direct map (checked above) and the caller vouches for
    // its contents; `read_unaligned` needs no alignment.
    Some(unsafe { (phys_to_virt(pa) as *const T).read_unaligned() })
}

/// The 64-bit entry from the trampoline: runs on the boot stack in the upper half with
/// interrupts off. `start_info` is the physical address QEMU passed in `ebx`.
#[unsafe(no_mangle)]
extern "C" fn tessera_x86_64_boot(start_info: u64) -> ! {
    interrupts::quiet_legacy_devices();
    serial::init();
    apic::early_init();
    let (timebase_hz, source) = calibrate::init();
    match source {
        calibrate::Source::Guess => {
            defmt::warn!("x86_64 boot: TSC frequency unknown, assuming 1 GHz")
        }
        _ => defmt::debug!("x86_64 boot: TSC {=u64} Hz from {}", timebase_hz, source),
    }

    let mut boot = BootInfo::new();
    boot.timebase_hz = timebase_hz;

    // SAFETY: ebx pointed at the start info when QEMU jumped to us, and nothing has written to
    // low memory since; the magic check below rejects anything else.
    let info = unsafe { read_phys::<StartInfo>(start_info) }.filter(|i| i.magic == PVH_MAGIC);
    match info {
        Some(info) => read_start_info(&info, &mut boot),
        None => boot.firmware = fixed("unknown loader (no PVH start info)"),
    }

    let kernel = PhysRange {
        start: (&raw const __kernel_phys_start) as u64,
        end: (&raw const __kernel_phys_end) as u64,
    };
    let listed = [Some(PhysRange { start: 0, end: 0x10_0000 }), Some(kernel), boot.initrd];
    for r in listed.into_iter().flatten() {
        if boot.reserved.push(r).is_err() {
            defmt::warn!("x86_64 boot: reserved list full");
        }
    }
    let devices = [
        ("ns16550 (port 0x3f8)", serial::BASE, serial::END, Some(4)),
        ("isa-debug-exit (port 0xf4)", exit::PORT, exit::PORT + 4, None),
    ];
    for (kind, start, end, irq) in devices {
        let dev = Device {
            kind: fixed(kind),
            regs: PhysRange { start: start.into(), end: end.into() },
            irq,
        };
        if boot.devices.push(dev).is_err() {
            defmt::warn!("x86_64 boot: device list full");
        }
    }
    crate::kernel_main(boot)
}

/// Fills `boot` from a PVH start info: firmware name, memory map, command line.
fn read_start_info(info: &StartInfo, boot: &mut BootInfo) {
    let host = if fw_cfg_is_qemu() { "QEMU" } else { "unknown host" };
    // The string has room for this text; a cut-off name would still be correct.
    let _ = write!(boot.firmware, "PVH ({host}, hvm_start_info v{})", info.version);

    let entries = if info.version >= 1 { info.memmap_entries.min(128) } else { 0 };
    for i in 0..u64::from(entries) {
        let pa = info.memmap_paddr + i * size_of::<MemmapEntry>() as u64;
        // SAFETY: the start info says `memmap_entries` E820 entries sit at `memmap_paddr`.
        let Some(e) = (unsafe { read_phys::<MemmapEntry>(pa) }) else { break };
        if e.kind != E820_RAM || e.size == 0 {
            continue;
        }
        let start = e.addr;
        // RAM the kernel's direct map cannot reach is left out.
        let end = e.addr.saturating_add(e.size).min(DIRECT_MAP_BYTES);
        if end < e.addr.saturating_add(e.size) {
            defmt::warn!(
                "x86_64 boot: RAM {=u64:#x}..{=u64:#x} beyond the direct map (64 TiB) is left out",
                end.max(start),
                e.addr.saturating_add(e.size)
            );
        }
        if start >= end {
            continue;
        }
        if boot.memory.push(PhysRange { start, end }).is_err() {
            defmt::warn!(
                "x86_64 boot: memory list full, ignoring {=u64:#x}..{=u64:#x}",
                start,
                end
            );
        }
    }

    if info.cmdline_paddr != 0 {
        let mut buf = [0u8; crate::boot_info::CMDLINE_BYTES];
        let mut len = 0;
        while len < buf.len() {
            // SAFETY: the start info points at a NUL-terminated command line; reading stops at
            // the NUL (or after `CMDLINE_BYTES`), and `read_phys` refuses addresses off the map.
            match unsafe { read_phys::<u8>(info.cmdline_paddr + len as u64) } {
                Some(0) | None => break,
                Some(b) => buf[len] = b,
            }
            len += 1;
        }
        let text = match core::str::from_utf8(&buf[..len]) {
            Ok(s) => s,
            // Not UTF-8: keep the valid prefix.
            Err(e) => core::str::from_utf8(&buf[..e.valid_up_to()]).unwrap_or(""),
        };
        boot.cmdline = fixed(text);
    }
    boot.initrd = boot_image(info);
    if info.rsdp_paddr != 0 {
        super::acpi::read(info.rsdp_paddr, boot);
    }
}

/// The boot image: the first module of the start info's module list (where QEMU puts
/// `-initrd`), if there is one the boot tables' direct map reaches.
fn boot_image(info: &StartInfo) -> Option<PhysRange> {
    if info.nr_modules == 0 {
        return None;
    }
    if info.nr_modules > 1 {
        defmt::warn!(
            "x86_64 boot: {=u32} modules; only the first is the boot image",
            info.nr_modules
        );
    }
    // SAFETY: the start info says `nr_modules` module entries sit at `modlist_paddr`.
    let Some(m) = (unsafe { read_phys::<ModlistEntry>(info.modlist_paddr) }) else {
        defmt::warn!("x86_64 boot: the module list is out of reach; no boot image");
        return None;
    };
    let end = m.paddr.checked_add(m.size).filter(|e| m.size > 0 && *e <= BOOT_MAP_BYTES);
    let Some(end) = end else {
        defmt::warn!(
            "x86_64 boot: the boot image at {=u64:#x} ({=u64} bytes) is out of reach; ignored",
            m.paddr,
            m.size
        );
        return None;
    };
    Some(PhysRange { start: m.paddr, end })
}

/// Whether QEMU's fw_cfg interface answers with its `QEMU` signature.
fn fw_cfg_is_qemu() -> bool {
    let mut select = Port::<u16>::new(0x510);
    let mut data = Port::<u8>::new(0x511);
    let mut sig = [0u8; 4];
    // SAFETY: 0x510/0x511 are QEMU's fw_cfg selector and data ports on x86 PC machines;
    // selecting key 0 (the signature) and reading 4 bytes changes nothing. On other hosts the
    // ports read as 0xff and the comparison fails.
    unsafe {
        select.write(0);
        for b in &mut sig {
            *b = data.read();
        }
    }
    &sig == b"QEMU"
}
