//! Sv39 page tables: three levels of 512 entries, 4 KiB pages, 2 MiB and 1 GiB leaves; and the
//! TLB: switching trees under an address-space identifier (ASID), and flushes.
//!
//! Table frames come from the frame allocator (owned by the kernel for kernel tables; charged
//! to the domain a protection domain's tables serve) and are reached through the direct map.
//! Mapping never silently replaces a mapping: it fails with [`MapError::AlreadyMapped`].
//!
//! Every mapping in the upper (kernel) half is global (`PTE_G`, set by [`PageTable::map`] and
//! [`PageTable::map_gigapage`] whatever the caller asks) and no mapping in the lower half is:
//! the kernel half is the same in every tree, so its TLB entries serve every ASID, while a
//! domain's entries are tagged with its ASID and survive switches to other domains. Which ASID
//! a tree runs under is decided by [`super::user`] (the [`asid_allocator`] crate); the kernel's
//! own tree runs under ASID 0 ([`asid_allocator::KERNEL`]) and maps nothing in the lower half,
//! so switching to it never needs a flush.

use asid_allocator::Flush;
use frame_allocator::{FRAME_SIZE, Frame, FrameError, Owner};
use riscv::register::satp;

use super::phys_to_virt;
use crate::memory;

/// Valid.
pub const PTE_V: u64 = 1 << 0;
/// Readable.
pub const PTE_R: u64 = 1 << 1;
/// Writable.
pub const PTE_W: u64 = 1 << 2;
/// Executable.
pub const PTE_X: u64 = 1 << 3;
/// User-accessible.
pub const PTE_U: u64 = 1 << 4;
/// Global (present in every address space).
pub const PTE_G: u64 = 1 << 5;
/// Accessed.
pub const PTE_A: u64 = 1 << 6;
/// Dirty.
pub const PTE_D: u64 = 1 << 7;

const LEAF: u64 = PTE_R | PTE_W | PTE_X;
const GIB: u64 = 1 << 30;

/// `flags` with the global bit as the half `va` lies in demands: set in the upper half, clear
/// in the lower.
fn global_by_half(va: u64, flags: u64) -> u64 {
    if (va as i64) < 0 { flags | PTE_G } else { flags & !PTE_G }
}

/// Why a mapping request failed.
#[derive(Debug, PartialEq, Eq, defmt::Format)]
pub enum MapError {
    /// The address is not aligned to the page size asked for.
    Misaligned,
    /// The address is not canonical for Sv39.
    NonCanonical,
    /// Something is already mapped there.
    AlreadyMapped,
    /// Nothing is mapped there.
    NotMapped,
    /// No frame for an intermediate table.
    OutOfFrames(FrameError),
    /// The rights asked for grant no access (a leaf needs read, write or execute).
    NoAccess,
}

/// A tree of Sv39 page tables, named by its root frame. Its table frames are charged to
/// `owner`.
pub struct PageTable {
    root: Frame,
    owner: Owner,
}

fn entries(table: u64) -> &'static mut [u64; 512] {
    // SAFETY: `table` is the physical address of a page-table frame allocated by this module
    // and owned by the kernel; the direct map covers it. Page tables are only modified with
    // interrupts off on a single CPU, so no two references are live at once.
    unsafe { &mut *(phys_to_virt(table) as *mut [u64; 512]) }
}

fn vpn(va: u64, level: usize) -> usize {
    ((va >> (12 + 9 * level)) & 0x1ff) as usize
}

fn canonical(va: u64) -> bool {
    let top = (va as i64) >> 38;
    top == 0 || top == -1
}

impl PageTable {
    /// A new, empty tree whose frames are charged to `owner`.
    pub fn new(owner: Owner) -> Result<Self, MapError> {
        let root = memory::alloc_zeroed(owner).map_err(MapError::OutOfFrames)?;
        Ok(PageTable { root, owner })
    }

    /// A new tree for a protection domain: it shares the kernel half (the upper 256 root
    /// entries, and through them every kernel table) with `kernel`, and has an empty user half.
    pub fn new_sharing_kernel(kernel: &PageTable, owner: Owner) -> Result<Self, MapError> {
        let table = PageTable::new(owner)?;
        let src = entries(kernel.root.addr());
        entries(table.root.addr())[256..].copy_from_slice(&src[256..]);
        Ok(table)
    }

    /// The value for `satp` that selects this tree (Sv39) under address-space identifier
    /// `asid`.
    pub fn satp(&self, asid: u16) -> usize {
        (8usize << 60) | ((asid as usize) << 44) | (self.root.addr() >> 12) as usize
    }

    /// Frees every table frame of the user half and the root. Leaf frames (the memory that was
    /// mapped) are not touched: they belong to stretches.
    pub fn destroy(self) {
        fn free_level(table: u64, level: usize, owner: Owner) {
            for e in entries(table).iter_mut() {
                if *e & PTE_V != 0 && *e & LEAF == 0 && level > 0 {
                    let next = (*e >> 10) << 12;
                    free_level(next, level - 1, owner);
                    *e = 0;
                }
            }
            let _ = memory::free(Frame::containing(table), owner);
        }
        // The kernel half is shared: clear it before freeing so it is not walked.
        entries(self.root.addr())[256..].fill(0);
        free_level(self.root.addr(), 2, self.owner);
    }

    /// The root frame.
    pub fn root(&self) -> Frame {
        self.root
    }

    /// Maps the 1 GiB page at `va` to `pa` with `flags` (R/W/X/U; G follows the half).
    pub fn map_gigapage(&mut self, va: u64, pa: u64, flags: u64) -> Result<(), MapError> {
        if !va.is_multiple_of(GIB) || !pa.is_multiple_of(GIB) {
            return Err(MapError::Misaligned);
        }
        if !canonical(va) {
            return Err(MapError::NonCanonical);
        }
        let e = &mut entries(self.root.addr())[vpn(va, 2)];
        if *e & PTE_V != 0 {
            return Err(MapError::AlreadyMapped);
        }
        *e = ((pa >> 12) << 10) | global_by_half(va, flags) | PTE_V | PTE_A | PTE_D;
        Ok(())
    }

    /// Maps the 4 KiB page at `va` to `pa` with `flags` (R/W/X/U; G follows the half),
    /// creating intermediate tables.
    pub fn map(&mut self, va: u64, pa: u64, flags: u64) -> Result<(), MapError> {
        self.map_page(va, pa, flags).map(|_| ())
    }

    /// [`PageTable::map`], which also says whether it created intermediate tables (a change
    /// of non-leaf entries, which a TLB flush of the page alone does not cover).
    pub fn map_page(&mut self, va: u64, pa: u64, flags: u64) -> Result<bool, MapError> {
        self.map_page_with(va, pa, flags, PTE_A | PTE_D)
    }

    /// [`PageTable::map_page`] with the accessed and dirty bits of the new entry as `used`
    /// has them ([`PTE_A`], [`PTE_D`]) instead of both set: the hardware sets the clear ones on
    /// the first access (QEMU's page walker does; a CPU that traps instead would need the
    /// fault path to set them).
    pub fn map_page_with(
        &mut self,
        va: u64,
        pa: u64,
        flags: u64,
        used: u64,
    ) -> Result<bool, MapError> {
        if !va.is_multiple_of(FRAME_SIZE) || !pa.is_multiple_of(FRAME_SIZE) {
            return Err(MapError::Misaligned);
        }
        if !canonical(va) {
            return Err(MapError::NonCanonical);
        }
        let mut table = self.root.addr();
        let mut made = false;
        for level in [2, 1] {
            let e = &mut entries(table)[vpn(va, level)];
            if *e & PTE_V == 0 {
                let next = memory::alloc_zeroed(self.owner).map_err(MapError::OutOfFrames)?;
                *e = ((next.addr() >> 12) << 10) | PTE_V;
                made = true;
            } else if *e & LEAF != 0 {
                return Err(MapError::AlreadyMapped);
            }
            table = (*e >> 10) << 12;
        }
        let e = &mut entries(table)[vpn(va, 0)];
        if *e & PTE_V != 0 {
            return Err(MapError::AlreadyMapped);
        }
        let used = used & (PTE_A | PTE_D);
        *e = ((pa >> 12) << 10) | global_by_half(va, flags) | PTE_V | used;
        Ok(made)
    }

    /// Visits the 2 MiB regions that `[start, end)` touches and, for each, whether its level-1
    /// and level-0 tables exist; with `create`, makes the missing ones. Returns how many were
    /// missing (made, with `create`).
    fn tables_of_range(&mut self, start: u64, end: u64, create: bool) -> Result<u64, MapError> {
        const REGION: u64 = 2 << 20;
        let mut missing = 0;
        let mut counted_l1 = None;
        let mut va = start & !(REGION - 1);
        while va < end {
            if !canonical(va) {
                return Err(MapError::NonCanonical);
            }
            let root = self.root.addr();
            let e2 = entries(root)[vpn(va, 2)];
            if e2 & PTE_V != 0 && e2 & LEAF != 0 {
                return Err(MapError::AlreadyMapped);
            }
            if e2 & PTE_V == 0 {
                if create {
                    let next = memory::alloc_zeroed(self.owner).map_err(MapError::OutOfFrames)?;
                    entries(root)[vpn(va, 2)] = ((next.addr() >> 12) << 10) | PTE_V;
                    missing += 1;
                } else if counted_l1 != Some(vpn(va, 2)) {
                    counted_l1 = Some(vpn(va, 2));
                    missing += 1;
                }
            }
            let e2 = entries(root)[vpn(va, 2)];
            let l0_present = e2 & PTE_V != 0 && entries((e2 >> 10) << 12)[vpn(va, 1)] & PTE_V != 0;
            if !l0_present {
                if create {
                    let l1 = (e2 >> 10) << 12;
                    let next = memory::alloc_zeroed(self.owner).map_err(MapError::OutOfFrames)?;
                    entries(l1)[vpn(va, 1)] = ((next.addr() >> 12) << 10) | PTE_V;
                }
                missing += 1;
            }
            va += REGION;
        }
        Ok(missing)
    }

    /// How many intermediate tables mapping every page of `[start, end)` would need.
    pub fn tables_missing(&mut self, start: u64, end: u64) -> Result<u64, MapError> {
        self.tables_of_range(start, end, false)
    }

    /// Creates the intermediate tables of every page of `[start, end)`, so that mapping a page
    /// there never needs a frame; returns how many tables it made. On failure the tables made
    /// so far stay (they are freed by [`PageTable::prune_range`] or with the tree).
    pub fn populate(&mut self, start: u64, end: u64) -> Result<u64, MapError> {
        self.tables_of_range(start, end, true)
    }

    /// Frees the tables of `[start, end)` that map nothing any more; returns whether it freed
    /// any.
    pub fn prune_range(&mut self, start: u64, end: u64) -> bool {
        const REGION: u64 = 2 << 20;
        let mut freed = false;
        let mut va = start & !(REGION - 1);
        while va < end {
            freed |= self.prune(va);
            va += REGION;
        }
        freed
    }

    /// Removes the 4 KiB mapping at `va` like [`PageTable::unmap`] but keeps the tables on the
    /// way to it, even if they map nothing else.
    pub fn unmap_keeping_tables(&mut self, va: u64) -> Result<u64, MapError> {
        let e = self.leaf(va).ok_or(MapError::NotMapped)?;
        let pa = (*e >> 10) << 12;
        *e = 0;
        Ok(pa)
    }

    /// How many intermediate tables [`PageTable::map`] would have to create to map `va` (0 to
    /// 2).
    pub fn tables_needed(&self, va: u64) -> u64 {
        let e2 = entries(self.root.addr())[vpn(va, 2)];
        if e2 & PTE_V == 0 {
            return 2;
        }
        let e1 = entries((e2 >> 10) << 12)[vpn(va, 1)];
        u64::from(e1 & PTE_V == 0)
    }

    /// Replaces the permission `flags` of the 4 KiB mapping at `va`, keeping its frame and its
    /// accessed and dirty bits. The caller flushes the TLB.
    pub fn protect(&mut self, va: u64, flags: u64) -> Result<(), MapError> {
        let e = self.leaf(va).ok_or(MapError::NotMapped)?;
        let pa = (*e >> 10) << 12;
        let used = *e & (PTE_A | PTE_D);
        *e = ((pa >> 12) << 10) | global_by_half(va, flags) | PTE_V | used;
        Ok(())
    }

    /// The accessed and dirty bits ([`PTE_A`], [`PTE_D`]) of the 4 KiB mapping at `va`, if it
    /// is mapped.
    pub fn used_bits(&self, va: u64) -> Option<u64> {
        self.leaf(va).map(|e| *e & (PTE_A | PTE_D))
    }

    /// Clears the bits of `bits` among [`PTE_A`] and [`PTE_D`] in the 4 KiB mapping at `va`;
    /// returns whether the entry changed (then the caller flushes the TLB).
    pub fn clear_used_bits(&mut self, va: u64, bits: u64) -> bool {
        let Some(e) = self.leaf(va) else { return false };
        let bits = bits & (PTE_A | PTE_D);
        let changed = *e & bits != 0;
        *e &= !bits;
        changed
    }

    /// Removes the 4 KiB mapping at `va`, returning the physical address it mapped, and frees
    /// the tables that map nothing any more. The caller flushes the TLB (for a kernel-half
    /// page, [`flush`]).
    pub fn unmap(&mut self, va: u64) -> Result<u64, MapError> {
        let pa = self.unmap_keeping_tables(va)?;
        self.prune(va);
        Ok(pa)
    }

    /// Frees the lower-level tables on the path to `va` that no longer map anything, so that a
    /// tree's frames follow what it maps (they are charged to its owner). The root stays.
    /// Returns whether it freed any (a change of non-leaf entries).
    pub fn prune(&mut self, va: u64) -> bool {
        let root = self.root.addr();
        let e2 = entries(root)[vpn(va, 2)];
        if e2 & PTE_V == 0 || e2 & LEAF != 0 {
            return false;
        }
        let mut freed = false;
        let l1 = (e2 >> 10) << 12;
        let e1 = entries(l1)[vpn(va, 1)];
        if e1 & PTE_V != 0 && e1 & LEAF == 0 {
            let l0 = (e1 >> 10) << 12;
            if entries(l0).iter().all(|e| *e & PTE_V == 0) {
                entries(l1)[vpn(va, 1)] = 0;
                let _ = memory::free(Frame::containing(l0), self.owner);
                freed = true;
            }
        }
        if entries(l1).iter().all(|e| *e & PTE_V == 0) {
            entries(root)[vpn(va, 2)] = 0;
            let _ = memory::free(Frame::containing(l1), self.owner);
            freed = true;
        }
        freed
    }

    /// The physical address `va` translates to, if it is mapped.
    pub fn translate(&self, va: u64) -> Option<u64> {
        let mut table = self.root.addr();
        for level in [2, 1, 0] {
            let e = entries(table)[vpn(va, level)];
            if e & PTE_V == 0 {
                return None;
            }
            let base = (e >> 10) << 12;
            if e & LEAF != 0 {
                let mask = (FRAME_SIZE << (9 * level)) - 1;
                return Some(base + (va & mask));
            }
            table = base;
        }
        None
    }

    fn leaf(&self, va: u64) -> Option<&'static mut u64> {
        if !canonical(va) {
            return None;
        }
        let mut table = self.root.addr();
        for level in [2, 1] {
            let e = entries(table)[vpn(va, level)];
            if e & PTE_V == 0 || e & LEAF != 0 {
                return None;
            }
            table = (e >> 10) << 12;
        }
        let e = &mut entries(table)[vpn(va, 0)];
        (*e & PTE_V != 0).then_some(e)
    }
}

/// Makes this CPU translate with `table` under address-space identifier `asid`, then runs
/// `flush` (see [`asid_allocator::Flush`]).
pub fn switch(table: &PageTable, asid: u16, flush: Flush) {
    write_satp(table.satp(asid));
    match flush {
        Flush::None => {}
        Flush::Asid(asid) => flush_asid(asid),
        Flush::All => flush_all(),
    }
}

/// Writes `satp` (a value of [`PageTable::satp`]) without a flush: the caller knows the TLB
/// holds nothing stale under its ASID.
#[inline]
pub fn write_satp(value: usize) {
    // SAFETY: every tree maps the kernel image, its stacks and the direct map at the same
    // addresses as the tree in use (they share the kernel half), so execution continues
    // unaffected; the caller's flush (or its knowledge that none is needed) keeps the TLB
    // consistent with the new tree.
    unsafe { satp::write(satp::Satp::from_bits(value)) };
}

/// How many ASID bits this hart keeps (ASIDLEN, 0 to 16): writes all ones to `satp.ASID` with
/// `table` selected and reads back, then leaves `table` selected under ASID 0 with the whole
/// TLB flushed. For the switch from the boot tables, whose identity map of the first 4 GiB is
/// global and must not outlive them.
pub fn probe_asid_bits(table: &PageTable) -> u32 {
    // SAFETY: as in `switch`; the ASID written first is whatever the hart keeps of all ones,
    // and no TLB entry made under it survives the full flush below.
    unsafe { satp::write(satp::Satp::from_bits(table.satp(u16::MAX))) };
    let kept = satp::read().asid();
    switch(table, asid_allocator::KERNEL, Flush::All);
    kept.count_ones()
}

/// Flushes this CPU's whole TLB, global entries included.
pub fn flush_all() {
    riscv::asm::sfence_vma_all();
}

/// Flushes this CPU's TLB entries for `va` in every address space, global entries included
/// (what a change in the kernel half needs).
pub fn flush(va: u64) {
    // SAFETY: `sfence.vma` only drops cached translations. The `riscv` crate's `sfence_vma`
    // always names an ASID register, which would spare global entries: rs2 must be `zero`.
    unsafe { core::arch::asm!("sfence.vma {0}, zero", in(reg) va, options(nostack)) };
}

/// Flushes this CPU's TLB entries for `va` in address space `asid` (global entries stay).
pub fn flush_page(va: u64, asid: u16) {
    riscv::asm::sfence_vma(asid as usize, va as usize);
}

/// Flushes this CPU's TLB entries of address space `asid`, at every address, non-leaf ones
/// included (global entries stay).
pub fn flush_asid(asid: u16) {
    // SAFETY: `sfence.vma` only drops cached translations. The `riscv` crate has no form with
    // rs1 = `zero` (every address).
    unsafe { core::arch::asm!("sfence.vma zero, {0}", in(reg) asid as usize, options(nostack)) };
}
