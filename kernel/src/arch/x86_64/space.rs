//! Protection domains' address spaces: a 4-level tree each, sharing the kernel half, under a
//! TLB tag where the CPU has one.
//!
//! A space's tree ([`PageTable::new_sharing_kernel`]) copies the kernel's upper 256 root
//! entries, so every kernel table below them is shared and a kernel mapping made later in an
//! existing root entry is seen by every space; its lower half (where `abi::USER_BASE` to
//! `abi::USER_END` lies) is its own, and its table frames are charged to its owner.
//!
//! TLB tags: where CPUID reports process-context identifiers, CR4.PCIDE is turned on at boot
//! ([`init_pcids`]) and each space runs under a PCID handed out by generations
//! ([`asid_allocator`], 4,096 PCIDs, 0 the kernel's), so switching to a space whose PCID is live
//! writes CR3 with its no-flush bit; a change to a space that runs is flushed with `invlpg` (or
//! a CR3 write without the no-flush bit, which drops the PCID's entries, when tables changed);
//! a change to a live space that does not run gives up its PCID (there is no `invpcid` to flush
//! another PCID with in general), so that it takes a fresh, flushed one when it next runs; a new
//! generation flushes every PCID by toggling CR4.PGE. Where CPUID reports no PCIDs (QEMU's TCG,
//! whose CR3 writes with the no-flush bit hang the guest), neither CR4.PCIDE nor that bit is
//! ever set: every [`AddressSpace::activate`] is a plain CR3 write, which drops every
//! non-global entry, and a change is flushed with `invlpg` (or a CR3 write when tables changed)
//! only if the space is the one that runs, since no other space has entries then.
//!
//! Not here: the user-mode entry and contexts, and copies from user memory (which the trap and
//! system-call path provide). The PCID path is not run by QEMU's TCG, so the kernel tests check
//! only that it stays off there.

use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use ::x86_64::registers::control::{Cr4, Cr4Flags};
use abi::{Rights, page_state};
use asid_allocator::{AsidAllocator, Flush, Tag};
use frame_allocator::Owner;
use spin::Mutex;

use super::paging::{self, MapError, PageSize, PageTable, PageTableFlags as F};
use crate::arch::contract::AddressSpaceOps;
use crate::arch::flush_batch::FlushBatch;

/// CR3's no-flush bit: the TLB keeps the new PCID's entries (only with CR4.PCIDE on).
const CR3_NOFLUSH: u64 = 1 << 63;

/// How many PCIDs the architecture has.
const PCID_COUNT: u32 = 1 << 12;

/// Whether CR4.PCIDE is on: set once at boot, from CPUID alone.
static PCIDS_ON: AtomicBool = AtomicBool::new(false);

/// The PCIDs of this CPU ([`init_pcids`] says how many); [`AddressSpace::activate`] takes them
/// from here. No interrupt handler touches it (they never switch address spaces), so taking the
/// lock with interrupts on cannot deadlock on the one CPU.
static PCIDS: Mutex<AsidAllocator> = Mutex::new(AsidAllocator::new(1));

/// The generation of [`PCIDS`], copied there whenever it changes (under the lock), so that a
/// switch to a space whose PCID is live takes no lock.
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// How many PCIDs the CPU has (the kernel's included): 1 without PCIDs.
static CPU_PCIDS: AtomicU32 = AtomicU32::new(1);

/// Runs `f` on the allocator and keeps [`GENERATION`] in step.
fn with_pcids<R>(f: impl FnOnce(&mut AsidAllocator) -> R) -> R {
    let mut pcids = PCIDS.lock();
    let r = f(&mut pcids);
    GENERATION.store(pcids.generation(), Ordering::Relaxed);
    r
}

/// Turns on CR4.PCIDE if CPUID reports PCIDs (`cpuid_pcid`), with the kernel's tables active
/// under PCID 0, before any address space runs; returns whether it did.
pub(super) fn init_pcids(cpuid_pcid: bool) -> bool {
    if !cpuid_pcid {
        return false;
    }
    // CR4.PCIDE may be set only while CR3's low 12 bits are 0: the kernel's tables, PCID 0.
    let cr3 = read_cr3();
    if cr3 & 0xfff != 0 {
        return false;
    }
    // SAFETY: CPUID reports PCIDs and CR3's PCID is 0, as the architecture requires; with
    // PCIDE on, CR3's low bits name the PCID (0 for the kernel's tables, which run on) and the
    // TLB tags entries with it, which this module accounts for from now on.
    unsafe { Cr4::update(|c| *c |= Cr4Flags::PCID) };
    PCIDS_ON.store(true, Ordering::Relaxed);
    CPU_PCIDS.store(PCID_COUNT, Ordering::Relaxed);
    with_pcids(|a| a.restart(PCID_COUNT));
    true
}

/// Whether address spaces run under PCIDs (CPUID reports them and CR4.PCIDE is on).
pub fn pcids_enabled() -> bool {
    PCIDS_ON.load(Ordering::Relaxed)
}

/// Uses at most `count` PCIDs from now on (the kernel's 0 included; never more than the CPU
/// has, at least 1), for tests that make recycling happen; returns the number used before. The
/// CPU moves to the kernel's own tables and the TLB is flushed: every address space gets a
/// fresh PCID when it next runs. Without PCIDs there is only the kernel's, and this changes
/// nothing but the tables.
pub fn limit_asids(count: u32) -> u32 {
    let before = with_pcids(|a| {
        let before = a.count();
        a.restart(count.clamp(1, CPU_PCIDS.load(Ordering::Relaxed)));
        before
    });
    switch_to_kernel(Flush::All);
    before
}

/// The current PCID generation (it grows by one each time the PCIDs run out and are recycled;
/// it stays 1 without PCIDs).
pub fn asid_generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// CR3 as it is.
fn read_cr3() -> u64 {
    let value: u64;
    // SAFETY: reading CR3 has no side effect.
    unsafe {
        core::arch::asm!("mov {}, cr3", out(reg) value, options(nomem, nostack, preserves_flags))
    };
    value
}

/// Writes CR3 (a root frame's address, with a PCID and the no-flush bit only where PCIDs are
/// on).
fn write_cr3(value: u64) {
    debug_assert!(pcids_enabled() || value & (CR3_NOFLUSH | 0xfff) == 0);
    // SAFETY: every tree this module writes shares the kernel half with the kernel's own (the
    // root entries are copies), so the kernel's code, stacks and data stay mapped at the same
    // addresses with the same rights; the value carries a PCID and the no-flush bit only with
    // CR4.PCIDE on (CPUID reports PCIDs), and the caller's flush keeps the TLB consistent.
    unsafe { core::arch::asm!("mov cr3, {}", in(reg) value, options(nostack, preserves_flags)) };
}

/// Flushes every TLB entry of every PCID, global ones included: a toggle of CR4.PGE.
fn flush_everything() {
    let cr4 = Cr4::read();
    // SAFETY: toggling PGE and restoring it changes no translation; it only drops every cached
    // one, of every PCID, which the architecture guarantees for any change of PGE.
    unsafe {
        Cr4::write(cr4 ^ Cr4Flags::PAGE_GLOBAL);
        Cr4::write(cr4);
    }
}

/// Moves the CPU to the kernel's own tables (PCID 0, which maps nothing of any domain), then
/// runs `flush`.
fn switch_to_kernel(flush: Flush) {
    let root = super::with_kernel_table(|k| k.root().addr());
    if pcids_enabled() {
        write_cr3(root | CR3_NOFLUSH);
        if flush == Flush::All {
            flush_everything();
        }
    } else {
        // A plain CR3 write drops every non-global entry: all a domain can have left.
        write_cr3(root);
    }
}

/// A protection domain's view of the single address space: one 4-level tree that shares the
/// kernel half and maps, in the lower half, exactly the pages the domain may access, with its
/// rights; under a PCID where the CPU has them (see the module documentation).
pub struct AddressSpace {
    table: PageTable,
    tag: Cell<Tag>,
    /// CR3 for the tree under the PCID of `tag`, no-flush bit included (PCIDs on only).
    cr3: Cell<u64>,
    /// In a batch of changes: their flushes are held back.
    batch: FlushBatch,
}

impl AddressSpace {
    /// The PCID under which the TLB may hold this space's translations, if PCIDs are on and
    /// it holds one of the current generation.
    pub fn live_asid(&self) -> Option<u16> {
        let tag = self.tag.get();
        if pcids_enabled() && tag.generation() == GENERATION.load(Ordering::Relaxed) {
            tag.asid()
        } else {
            None
        }
    }

    /// Whether this space's tree is the one the CPU translates with.
    pub fn is_current(&self) -> bool {
        read_cr3() & !(CR3_NOFLUSH | 0xfff) == self.table.root().addr()
    }

    /// The root (PML4) frame's physical address.
    pub fn root(&self) -> u64 {
        self.table.root().addr()
    }

    /// The flags of the leaf that maps `va`, if it is mapped.
    pub fn flags(&self, va: usize) -> Option<F> {
        self.table.flags(va as u64)
    }

    /// The physical address `va` translates to in this space, if it is mapped.
    pub fn translate(&self, va: usize) -> Option<u64> {
        self.table.translate(va as u64)
    }

    /// Makes a change to the page at `va` reach the TLB (with `tables`, a change of non-leaf
    /// entries): see the module documentation.
    fn flush_change(&self, va: usize, tables: bool) {
        if self.batch.defer(va, tables) {
            return;
        }
        if self.is_current() {
            if tables {
                // Without the no-flush bit: the current PCID's (or, without PCIDs, every
                // non-global) entries and cached table entries go.
                write_cr3(read_cr3() & !CR3_NOFLUSH);
            } else {
                paging::flush(va as u64);
            }
        } else if self.live_asid().is_some() {
            // Its entries stay under its PCID, which no other space gets in this generation:
            // it takes a fresh one when it next runs.
            self.tag.set(Tag::NONE);
        }
    }

    /// [`AddressSpace::activate`] with PCIDs, for a space whose PCID is not live.
    #[cold]
    #[inline(never)]
    fn activate_with_new_pcid(&self) {
        let mut tag = self.tag.get();
        let switch = with_pcids(|a| a.switch_to(&mut tag));
        self.tag.set(tag);
        let root = self.table.root().addr() | u64::from(switch.asid);
        self.cr3.set(root | CR3_NOFLUSH);
        // Without the no-flush bit: the PCID's entries go (`Flush::Asid`, and what
        // `Flush::None` would keep is nothing of this space's).
        write_cr3(root);
        if switch.flush == Flush::All {
            flush_everything();
        }
    }

    /// Refuses an address of the kernel half, which every space shares.
    fn user(va: usize) -> Result<(), MapError> {
        if (va as i64) < 0 { Err(MapError::KernelHalf) } else { Ok(()) }
    }
}

impl AddressSpaceOps for AddressSpace {
    const LEVELS: u64 = 4;
    type Error = MapError;

    /// An empty lower half, its tables charged to `owner`. It gets a PCID (where there are
    /// any) when it first runs.
    fn new(owner: Owner) -> Result<Self, MapError> {
        let table = super::with_kernel_table(|k| PageTable::new_sharing_kernel(k, owner))?;
        Ok(AddressSpace {
            table,
            tag: Cell::new(Tag::NONE),
            cr3: Cell::new(0),
            batch: FlushBatch::new(),
        })
    }

    /// Maps the user page `va` to frame `pa` with `rights` (a present page is readable, so
    /// write and execute imply read; no execute means no-execute). `Rights::NONE` maps
    /// nothing.
    fn map(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), MapError> {
        Self::user(va)?;
        let Some(flags) = leaf_flags(rights) else { return Ok(()) };
        // Flushed although the page was not present: the TLB may cache table entries on the
        // way to it.
        let tables = self.table.map_made(va as u64, pa, flags, PageSize::Size4K)?;
        self.flush_change(va, tables);
        Ok(())
    }

    /// [`AddressSpaceOps::map`], which leaves the accessed and dirty bits clear as well: the
    /// CPU sets them on the first access.
    fn map_tracked(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), MapError> {
        self.map(va, pa, rights)
    }

    fn page_state(&self, va: usize) -> u8 {
        if Self::user(va).is_err() {
            return 0;
        }
        let Some(flags) = self.table.flags(va as u64) else { return 0 };
        let mut state = page_state::MAPPED;
        if flags.contains(F::ACCESSED) {
            state |= page_state::ACCESSED;
        }
        if flags.contains(F::DIRTY) {
            state |= page_state::DIRTY;
        }
        state
    }

    fn clear_page_state(&mut self, va: usize, clear: u8) {
        if Self::user(va).is_ok() && self.table.clear_used(va as u64, used_flags(clear)) {
            self.flush_change(va, false);
        }
    }

    /// Maps `va` to the device registers at `pa`, uncached (PCD, PWT), and flushes it.
    fn map_device(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), MapError> {
        Self::user(va)?;
        let Some(flags) = leaf_flags(rights) else { return Ok(()) };
        let flags = flags | F::NO_CACHE | F::WRITE_THROUGH;
        let tables = self.table.map_made(va as u64, pa, flags, PageSize::Size4K)?;
        self.flush_change(va, tables);
        Ok(())
    }

    /// Changes the rights of the mapped page `va` (at least one of read, write, execute) and
    /// flushes it.
    fn protect(&mut self, va: usize, rights: Rights) -> Result<(), MapError> {
        Self::user(va)?;
        let flags = leaf_flags(rights).ok_or(MapError::NoAccess)?;
        self.table.protect(va as u64, flags)?;
        self.flush_change(va, false);
        Ok(())
    }

    /// Removes the mapping of `va`, if any, and flushes it (with the tables it frees).
    fn unmap(&mut self, va: usize) {
        if Self::user(va).is_ok() && self.table.unmap_keeping_tables(va as u64).is_ok() {
            let freed = self.table.prune(va as u64);
            self.flush_change(va, freed);
        }
    }

    /// Removes the mapping of `va`, if any, keeping its page tables, and flushes it.
    fn unmap_keeping_tables(&mut self, va: usize) {
        if Self::user(va).is_ok() && self.table.unmap_keeping_tables(va as u64).is_ok() {
            self.flush_change(va, false);
        }
    }

    /// How many page-table frames mapping every page of `[start, end)` would take now.
    fn tables_missing(&mut self, start: usize, end: usize) -> Result<u64, MapError> {
        Self::user(end.saturating_sub(1))?;
        self.table.tables_missing(start as u64, end as u64)
    }

    /// How many page-table frames mapping the page `va` would take now (0 to 3).
    fn tables_needed(&self, va: usize) -> u64 {
        self.table.tables_needed(va as u64)
    }

    /// Creates the page tables of every page of `[start, end)` (see [`PageTable::populate`]).
    fn populate(&mut self, start: usize, end: usize) -> Result<u64, MapError> {
        Self::user(end.saturating_sub(1))?;
        let made = self.table.populate(start as u64, end as u64);
        // Made tables change non-leaf entries, even when a later one failed.
        self.flush_change(start, true);
        made
    }

    /// Frees the page tables of `[start, end)` that map nothing.
    fn prune_range(&mut self, start: usize, end: usize) {
        if Self::user(end.saturating_sub(1)).is_ok()
            && self.table.prune_range(start as u64, end as u64)
        {
            self.flush_change(start, true);
        }
    }

    fn begin_batch(&mut self) {
        self.batch.begin();
    }

    /// Flushes the batch's pages with one `invlpg` each, or the whole tag with one CR3 write,
    /// if this space runs; a live space that does not run gives up its PCID, as for one change.
    fn end_batch(&mut self) {
        let Some(batch) = self.batch.end() else { return };
        match batch.pages() {
            Some([]) => {}
            Some(pages) if self.is_current() => {
                pages.iter().for_each(|&va| paging::flush(va as u64));
            }
            _ => self.flush_change(0, true),
        }
    }

    /// Makes this the current address space: a plain CR3 write without PCIDs; with them, CR3
    /// selects its tree under its PCID without a flush, or under a fresh PCID, flushed, if it
    /// has none of the current generation.
    #[inline]
    fn activate(&self) {
        if !pcids_enabled() {
            write_cr3(self.table.root().addr());
        } else if self.tag.get().generation() == GENERATION.load(Ordering::Relaxed) {
            write_cr3(self.cr3.get());
        } else {
            self.activate_with_new_pcid();
        }
    }

    /// Frees the tables (not the mapped frames) and forgets cached translations. The CPU moves
    /// to the kernel's own tables first, in case this space is the current one.
    fn destroy(self) {
        if let Some(pcid) = self.live_asid() {
            // Drops the PCID's entries (a CR3 write without the no-flush bit), while the tree
            // still exists.
            write_cr3(self.table.root().addr() | u64::from(pcid));
        }
        switch_to_kernel(Flush::None);
        self.table.destroy();
    }
}

/// The entry flags (`ACCESSED`, `DIRTY`) of `abi::page_state` bits `used`.
fn used_flags(used: u8) -> F {
    let mut flags = F::empty();
    if used & page_state::ACCESSED != 0 {
        flags |= F::ACCESSED;
    }
    if used & page_state::DIRTY != 0 {
        flags |= F::DIRTY;
    }
    flags
}

/// The leaf flags of a user page with `rights`, or `None` if they grant no access.
fn leaf_flags(rights: Rights) -> Option<F> {
    if ![Rights::READ, Rights::WRITE, Rights::EXECUTE].iter().any(|&r| rights.contains(r)) {
        return None;
    }
    let mut flags = F::USER_ACCESSIBLE;
    if rights.contains(Rights::WRITE) {
        flags |= F::WRITABLE;
    }
    if !rights.contains(Rights::EXECUTE) {
        flags |= F::NO_EXECUTE;
    }
    Some(flags)
}
