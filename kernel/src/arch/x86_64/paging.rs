//! 4-level page tables (PML4, PDPT, PD, PT of 512 entries each): 4 KiB pages, 2 MiB and 1 GiB
//! leaves, and the TLB flushes that go with them.
//!
//! Table frames come from the frame allocator (charged to the tree's owner) and are reached
//! through the direct map; entries are the `x86_64` crate's [`PageTableEntry`] with its
//! [`PageTableFlags`]. Mapping never silently replaces a mapping: it fails with
//! [`MapError::AlreadyMapped`].
//!
//! Leaves in the upper (kernel) half are global and those in the lower half are not, whatever
//! the caller asks, as on RISC-V. Intermediate entries grant everything (present, writable, and
//! user-accessible in the lower half, never no-execute), so a leaf alone decides the rights of
//! its page. Tables of the kernel half that hang from the root are never freed once made (a
//! protection domain's tree will share them through its root), tables below them are freed
//! when they map nothing any more.
//!
//! The trees of protection domains ([`PageTable::new_sharing_kernel`]) share the kernel's root
//! entries of the upper half and have their own lower half; their tables are counted, made in
//! advance and pruned by range for [`super::space`], which also decides their TLB tags
//! (process-context identifiers).

use core::sync::atomic::{AtomicBool, Ordering};

use ::x86_64::PhysAddr;
use ::x86_64::structures::paging::PageTable as Table;
pub use ::x86_64::structures::paging::PageTableFlags;
use ::x86_64::structures::paging::page_table::PageTableEntry;
use frame_allocator::{FRAME_SIZE, Frame, FrameError, Owner};

use super::phys_to_virt;
use crate::memory;

/// Whether leaves may carry `NO_EXECUTE` (EFER.NXE is on); without it the bit is reserved.
static NX: AtomicBool = AtomicBool::new(false);

/// Says whether EFER.NXE is on; until it is, `NO_EXECUTE` is left out of every leaf.
pub fn set_no_execute(on: bool) {
    NX.store(on, Ordering::Relaxed);
}

/// Why a mapping request failed.
#[derive(Debug, PartialEq, Eq, defmt::Format)]
pub enum MapError {
    /// The address is not aligned to the page size asked for.
    Misaligned,
    /// The address is not canonical (bits 63..47 differ).
    NonCanonical,
    /// Something is already mapped there (a page, or a larger page covering it).
    AlreadyMapped,
    /// Nothing is mapped there.
    NotMapped,
    /// No frame for an intermediate table.
    OutOfFrames(FrameError),
    /// The rights asked for grant no access (a user leaf needs read, write or execute).
    NoAccess,
    /// The address lies in the kernel half, which a protection domain's tree shares and never
    /// changes.
    KernelHalf,
}

/// Page sizes a leaf can map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, defmt::Format)]
pub enum PageSize {
    /// 4 KiB, a page-table entry.
    Size4K,
    /// 2 MiB, a page-directory entry.
    Size2M,
    /// 1 GiB, a page-directory-pointer entry (needs CPUID's `Page1GB`).
    Size1G,
}

impl PageSize {
    /// Bytes in a page of this size.
    pub const fn bytes(self) -> u64 {
        match self {
            PageSize::Size4K => 1 << 12,
            PageSize::Size2M => 1 << 21,
            PageSize::Size1G => 1 << 30,
        }
    }

    /// The level whose entry is the leaf: 0 for the page table, 2 for the PDPT.
    const fn level(self) -> usize {
        match self {
            PageSize::Size4K => 0,
            PageSize::Size2M => 1,
            PageSize::Size1G => 2,
        }
    }
}

/// A tree of page tables, named by its root (PML4) frame. Its table frames are charged to
/// `owner`.
pub struct PageTable {
    root: Frame,
    owner: Owner,
}

/// The table in frame `pa`.
fn table(pa: u64) -> &'static mut Table {
    // SAFETY: `pa` is the physical address of a page-table frame allocated by this module (or
    // the root of a tree it made), which the direct map covers; `Table` is 4 KiB of entries,
    // valid for any bit pattern. Page tables are changed only with interrupts off on the one
    // CPU (callers hold the kernel table's lock or own the tree), so no two references to a
    // table are used at once.
    unsafe { &mut *(phys_to_virt(pa) as *mut Table) }
}

/// The index of `va` in the table at `level` (3 for the root, 0 for a page table).
fn index(va: u64, level: usize) -> usize {
    ((va >> (12 + 9 * level)) & 0x1ff) as usize
}

/// Whether `va` is canonical for 48-bit addresses.
fn canonical(va: u64) -> bool {
    let top = (va as i64) >> 47;
    top == 0 || top == -1
}

/// The span one page table covers: [`PageTable::populate`] and its kin go region by region.
const REGION: u64 = 2 << 20;

fn upper_half(va: u64) -> bool {
    (va as i64) < 0
}

/// The flags of an entry that points at a lower-level table.
fn table_flags(va: u64) -> PageTableFlags {
    let flags = PageTableFlags::PRESENT | PageTableFlags::WRITABLE;
    if upper_half(va) { flags } else { flags | PageTableFlags::USER_ACCESSIBLE }
}

/// The flags of a leaf for `flags` asked for at `va`: present, global as the half demands, the
/// large-page bit as `size` demands (for 4 KiB pages that bit is PAT, which stays clear), and
/// no-execute only if the CPU has it on.
fn leaf_flags(va: u64, flags: PageTableFlags, size: PageSize) -> PageTableFlags {
    let mut f = flags - (PageTableFlags::HUGE_PAGE | PageTableFlags::GLOBAL);
    f |= PageTableFlags::PRESENT;
    if !NX.load(Ordering::Relaxed) {
        f -= PageTableFlags::NO_EXECUTE;
    }
    if upper_half(va) {
        f |= PageTableFlags::GLOBAL;
    }
    if size != PageSize::Size4K {
        f |= PageTableFlags::HUGE_PAGE;
    }
    f
}

/// Whether `e`, met at a level above the page table, is a leaf (a large page).
fn is_large(e: &PageTableEntry) -> bool {
    e.flags().contains(PageTableFlags::PRESENT | PageTableFlags::HUGE_PAGE)
}

fn present(e: &PageTableEntry) -> bool {
    e.flags().contains(PageTableFlags::PRESENT)
}

impl PageTable {
    /// A new, empty tree whose frames are charged to `owner`.
    pub fn new(owner: Owner) -> Result<Self, MapError> {
        let root = memory::alloc_zeroed(owner).map_err(MapError::OutOfFrames)?;
        Ok(PageTable { root, owner })
    }

    /// The root (PML4) frame: what CR3 holds while this tree translates.
    pub fn root(&self) -> Frame {
        self.root
    }

    /// Maps the 4 KiB page at `va` to `pa` with `flags` (`WRITABLE`, `USER_ACCESSIBLE`,
    /// `NO_EXECUTE`, the caching bits; present and global are added), creating intermediate
    /// tables.
    pub fn map(&mut self, va: u64, pa: u64, flags: PageTableFlags) -> Result<(), MapError> {
        self.map_sized(va, pa, flags, PageSize::Size4K)
    }

    /// Maps the page of `size` at `va` to `pa` with `flags`, as [`PageTable::map`] does.
    pub fn map_sized(
        &mut self,
        va: u64,
        pa: u64,
        flags: PageTableFlags,
        size: PageSize,
    ) -> Result<(), MapError> {
        self.map_made(va, pa, flags, size).map(|_| ())
    }

    /// [`PageTable::map_sized`], which also says whether it created intermediate tables (a
    /// change of non-leaf entries, which a TLB flush of the page alone does not cover).
    pub fn map_made(
        &mut self,
        va: u64,
        pa: u64,
        flags: PageTableFlags,
        size: PageSize,
    ) -> Result<bool, MapError> {
        if !va.is_multiple_of(size.bytes()) || !pa.is_multiple_of(size.bytes()) {
            return Err(MapError::Misaligned);
        }
        if !canonical(va) {
            return Err(MapError::NonCanonical);
        }
        let mut at = self.root.addr();
        let mut made = false;
        for level in (size.level() + 1..=3).rev() {
            let e = &mut table(at)[index(va, level)];
            if !present(e) {
                let next = memory::alloc_zeroed(self.owner).map_err(MapError::OutOfFrames)?;
                e.set_addr(PhysAddr::new(next.addr()), table_flags(va));
                made = true;
            } else if level < 3 && is_large(e) {
                return Err(MapError::AlreadyMapped);
            }
            at = e.addr().as_u64();
        }
        let e = &mut table(at)[index(va, size.level())];
        if present(e) {
            return Err(MapError::AlreadyMapped);
        }
        e.set_addr(PhysAddr::new(pa), leaf_flags(va, flags, size));
        Ok(made)
    }

    /// The leaf entry that maps `va` and the level it sits at (0 for a 4 KiB page).
    fn leaf(&self, va: u64) -> Option<(&'static mut PageTableEntry, usize)> {
        if !canonical(va) {
            return None;
        }
        let mut at = self.root.addr();
        for level in (0..=3).rev() {
            let e = &mut table(at)[index(va, level)];
            if !present(e) {
                return None;
            }
            if level == 0 || (level < 3 && is_large(e)) {
                return Some((e, level));
            }
            at = e.addr().as_u64();
        }
        None
    }

    /// The physical address `va` translates to, if it is mapped.
    pub fn translate(&self, va: u64) -> Option<u64> {
        let (e, level) = self.leaf(va)?;
        let mask = (FRAME_SIZE << (9 * level)) - 1;
        Some((e.addr().as_u64() & !mask) + (va & mask))
    }

    /// The flags of the leaf that maps `va`, if it is mapped.
    pub fn flags(&self, va: u64) -> Option<PageTableFlags> {
        self.leaf(va).map(|(e, _)| e.flags())
    }

    /// Removes the 4 KiB mapping at `va`, returning the physical address it mapped, and frees
    /// the tables below the root's own that map nothing any more. The caller flushes the TLB
    /// ([`flush`]).
    pub fn unmap(&mut self, va: u64) -> Result<u64, MapError> {
        let pa = self.unmap_keeping_tables(va)?;
        self.prune(va);
        Ok(pa)
    }

    /// Removes the 4 KiB mapping at `va` like [`PageTable::unmap`] but keeps the tables on the
    /// way to it, even if they map nothing else.
    pub fn unmap_keeping_tables(&mut self, va: u64) -> Result<u64, MapError> {
        let (e, level) = self.leaf(va).ok_or(MapError::NotMapped)?;
        if level != 0 {
            return Err(MapError::Misaligned);
        }
        let pa = e.addr().as_u64();
        e.set_unused();
        Ok(pa)
    }

    /// Replaces the `flags` of the 4 KiB mapping at `va` (as [`PageTable::map`] takes them),
    /// keeping its frame and its accessed and dirty bits. The caller flushes the TLB.
    pub fn protect(&mut self, va: u64, flags: PageTableFlags) -> Result<(), MapError> {
        let (e, level) = self.leaf(va).ok_or(MapError::NotMapped)?;
        if level != 0 {
            return Err(MapError::Misaligned);
        }
        let pa = e.addr();
        let used = e.flags() & (PageTableFlags::ACCESSED | PageTableFlags::DIRTY);
        e.set_addr(pa, leaf_flags(va, flags, PageSize::Size4K) | used);
        Ok(())
    }

    /// Clears the flags of `bits` among `ACCESSED` and `DIRTY` in the 4 KiB mapping at `va`;
    /// returns whether the entry changed (then the caller flushes the TLB).
    pub fn clear_used(&mut self, va: u64, bits: PageTableFlags) -> bool {
        let Some((e, 0)) = self.leaf(va) else { return false };
        let bits = bits & (PageTableFlags::ACCESSED | PageTableFlags::DIRTY);
        let flags = e.flags();
        if !flags.intersects(bits) {
            return false;
        }
        let pa = e.addr();
        e.set_addr(pa, flags - bits);
        true
    }

    /// Frees the tables on the way to `va` (page table, page directory, and in the lower half
    /// the PDPT) that map nothing any more, from the lowest that exists upwards. In the upper
    /// half the PDPT stays (root entries of the kernel half are never cleared). Returns
    /// whether it freed any table.
    pub fn prune(&mut self, va: u64) -> bool {
        // The entries on the path that point at tables: (table holding the entry, index), for
        // the root's entry, the PDPT's and the page directory's, as far as they are present.
        let mut path = [(0u64, 0usize); 3];
        let mut depth = 0;
        let mut at = self.root.addr();
        for level in [3, 2, 1] {
            let e = &table(at)[index(va, level)];
            if !present(e) || (level < 3 && is_large(e)) {
                break;
            }
            path[depth] = (at, index(va, level));
            depth += 1;
            at = e.addr().as_u64();
        }
        // `at` is the lowest table reached; free upwards while the table is empty.
        let lowest = if upper_half(va) { 1 } else { 0 };
        let mut freed = false;
        while depth > lowest && table(at).iter().all(PageTableEntry::is_unused) {
            let (parent, i) = path[depth - 1];
            table(parent)[i].set_unused();
            let _ = memory::free(Frame::containing(at), self.owner);
            freed = true;
            at = parent;
            depth -= 1;
        }
        freed
    }

    /// Frees the tables of `[start, end)` that map nothing any more (see [`PageTable::prune`]);
    /// returns whether it freed any.
    pub fn prune_range(&mut self, start: u64, end: u64) -> bool {
        let mut freed = false;
        let mut va = start & !(REGION - 1);
        while va < end {
            freed |= self.prune(va);
            va += REGION;
        }
        freed
    }

    /// How many intermediate tables [`PageTable::map`] would have to create to map the 4 KiB
    /// page `va` (0 to 3).
    pub fn tables_needed(&self, va: u64) -> u64 {
        let mut at = self.root.addr();
        for level in [3, 2, 1] {
            let e = &table(at)[index(va, level)];
            if !present(e) {
                return level as u64;
            }
            at = e.addr().as_u64();
        }
        0
    }

    /// Visits the 2 MiB regions that `[start, end)` touches and, for each, whether its PDPT,
    /// page directory and page table exist; with `create`, makes the missing ones. Returns
    /// how many were missing (made, with `create`); a table shared by several regions counts
    /// once.
    fn tables_of_range(&mut self, start: u64, end: u64, create: bool) -> Result<u64, MapError> {
        let mut missing = 0;
        // The last table counted as missing at each level (by the part of the address that
        // names it), so that one shared by the following regions is not counted again.
        let mut counted = [None; 4];
        let mut va = start & !(REGION - 1);
        while va < end {
            if !canonical(va) {
                return Err(MapError::NonCanonical);
            }
            let mut at = self.root.addr();
            for level in [3, 2, 1] {
                let e = &mut table(at)[index(va, level)];
                if present(e) {
                    if level < 3 && is_large(e) {
                        return Err(MapError::AlreadyMapped);
                    }
                    at = e.addr().as_u64();
                } else if create {
                    let next = memory::alloc_zeroed(self.owner).map_err(MapError::OutOfFrames)?;
                    e.set_addr(PhysAddr::new(next.addr()), table_flags(va));
                    missing += 1;
                    at = next.addr();
                } else {
                    // This table and every one below it on the way to `va` are missing.
                    for below in (1..=level).rev() {
                        let name = va >> (12 + 9 * below);
                        if counted[below] != Some(name) {
                            counted[below] = Some(name);
                            missing += 1;
                        }
                    }
                    break;
                }
            }
            va += REGION;
        }
        Ok(missing)
    }

    /// How many intermediate tables mapping every 4 KiB page of `[start, end)` would need.
    pub fn tables_missing(&mut self, start: u64, end: u64) -> Result<u64, MapError> {
        self.tables_of_range(start, end, false)
    }

    /// Creates the intermediate tables of every 4 KiB page of `[start, end)`, so that mapping
    /// a page there never needs a frame; returns how many tables it made. On failure the
    /// tables made so far stay (they are freed by [`PageTable::prune_range`] or with the
    /// tree).
    pub fn populate(&mut self, start: u64, end: u64) -> Result<u64, MapError> {
        self.tables_of_range(start, end, true)
    }

    /// A new tree for a protection domain, its frames charged to `owner`: it shares the kernel
    /// half with `kernel` (the upper 256 root entries are copied, so every kernel table below
    /// them is the same) and has an empty lower half.
    pub fn new_sharing_kernel(kernel: &PageTable, owner: Owner) -> Result<Self, MapError> {
        let tree = PageTable::new(owner)?;
        let (src, dst) = (table(kernel.root.addr()), table(tree.root.addr()));
        for i in 256..512 {
            dst[i] = src[i].clone();
        }
        Ok(tree)
    }

    /// Frees every table frame of the lower half and the root of a tree made by
    /// [`PageTable::new_sharing_kernel`]. Leaf frames (the memory that was mapped) are not
    /// touched: they belong to stretches. Never for the kernel's own tree.
    pub fn destroy(self) {
        fn free_level(at: u64, level: usize, owner: Owner) {
            if level > 0 {
                for e in table(at).iter_mut() {
                    if present(e) && !(level < 3 && is_large(e)) {
                        free_level(e.addr().as_u64(), level - 1, owner);
                    }
                    e.set_unused();
                }
            }
            let _ = memory::free(Frame::containing(at), owner);
        }
        // The kernel half is shared: cleared first so that it is not walked.
        for e in table(self.root.addr()).iter_mut().skip(256) {
            e.set_unused();
        }
        free_level(self.root.addr(), 3, self.owner);
    }

    /// Makes this CPU translate with this tree (writes CR3, which flushes every non-global
    /// TLB entry).
    ///
    /// # Safety
    /// The tree must map the code, stack and data the CPU is using at the same addresses and
    /// with at least the rights the current tree gives them.
    pub unsafe fn activate(&self) {
        use ::x86_64::registers::control::{Cr3, Cr3Flags};
        use ::x86_64::structures::paging::PhysFrame;
        let frame = PhysFrame::containing_address(PhysAddr::new(self.root.addr()));
        // SAFETY: guaranteed by the caller: execution continues unaffected on the new tree.
        unsafe { Cr3::write(frame, Cr3Flags::empty()) };
    }
}

/// Flushes this CPU's TLB entry for `va` (global or not).
pub fn flush(va: u64) {
    ::x86_64::instructions::tlb::flush(::x86_64::VirtAddr::new_truncate(va));
}
