//! User mode: domains' saved contexts, their traps, entering them, and reaching their memory.
//!
//! A trap from U-mode lands on the trap stack like any other; [`on_trap`] classifies it and
//! hands it to the portable kernel ([`crate::domain::on_user_trap`]) together with the trap
//! frame, which *is* the interrupted domain's [`UserContext`]. The kernel may overwrite the frame
//! with another domain's context (and switch address spaces); the trap return path then resumes
//! that domain instead.

use core::arch::global_asm;
use core::cell::Cell;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use abi::{Rights, page_state};
use asid_allocator::{AsidAllocator, Flush, Tag};
use frame_allocator::Owner;
use riscv::register::sstatus;
use spin::Mutex;

use super::frame::{INTERRUPT, SUPERVISOR_TIMER, TrapFrame, exception_name};
use super::sv39::{self, MapError, PTE_A, PTE_D, PTE_R, PTE_U, PTE_W, PTE_X, PageTable};
use super::{fp, interrupts, probe, timer};
use crate::arch::contract::{AddressSpaceOps, UserContextOps, UserFault, UserTrap};
use crate::arch::flush_batch::FlushBatch;

/// `scause` of an illegal instruction.
const ILLEGAL_INSTRUCTION: usize = 2;
/// `scause` of an `ecall` from U-mode.
const ECALL_FROM_U: usize = 8;

/// A domain's saved registers (the trap frame layout).
pub type UserContext = TrapFrame;

const SSTATUS_SPIE: usize = 1 << 5;
const FS_INITIAL: usize = 1 << 13;

impl UserContextOps for TrapFrame {
    /// A context that starts at `entry` with stack pointer `sp` and arguments `a0..a3`, in
    /// U-mode with interrupts and the floating-point unit enabled (until [`super::restore_fp`]
    /// decides whether its state is loaded).
    fn new_user(entry: usize, sp: usize, args: [usize; 4]) -> Self {
        let mut regs = [0usize; 32];
        regs[2] = sp;
        regs[10..14].copy_from_slice(&args);
        TrapFrame { regs, sepc: entry, sstatus: SSTATUS_SPIE | FS_INITIAL }
    }

    /// The system call made at a trap: its number (`a7`) and six arguments (`a0..a5`).
    #[inline(always)]
    fn call(&self) -> (usize, [usize; 6]) {
        let r = &self.regs;
        (r[17], [r[10], r[11], r[12], r[13], r[14], r[15]])
    }

    /// What a system call returns, as set by [`TrapFrame::set_result`]: status, value.
    fn results(&self) -> (usize, usize) {
        (self.regs[10], self.regs[11])
    }

    /// The interrupted program counter.
    fn pc(&self) -> usize {
        self.sepc
    }

    /// The user registers and PC, as an activation handler sees them.
    fn saved(&self) -> abi::SavedContext {
        let mut regs = [0u64; 32];
        for (r, v) in regs.iter_mut().zip(&self.regs) {
            *r = *v as u64;
        }
        regs[0] = 0;
        abi::SavedContext { regs, pc: self.sepc as u64 }
    }

    /// Loads user registers and PC from the words of an `abi::SavedContext` (`x0` ignored;
    /// the mode and interrupt bits stay the kernel's).
    fn load_words(&mut self, words: &[u64; abi::SavedContext::WORDS]) {
        for (r, v) in self.regs.iter_mut().zip(words).skip(1) {
            *r = *v as usize;
        }
        self.sepc = words[32] as usize;
    }

    /// Enters an activation handler at `entry` on stack `stack` with `a0`, `a1` = `args`; other
    /// registers are cleared.
    fn enter_handler(&mut self, entry: usize, stack: usize, args: [usize; 2]) {
        self.regs = [0; 32];
        self.regs[2] = stack;
        self.regs[10] = args[0];
        self.regs[11] = args[1];
        self.sepc = entry;
    }

    /// Sets a system call's results: `a0` = status (0 or an error code), `a1` = value.
    fn set_result(&mut self, status: usize, value: usize) {
        self.regs[10] = status;
        self.regs[11] = value;
    }

    /// Makes the system call that trapped here run again when the context resumes (the PC goes
    /// back to its `ecall`; the arguments are still in their registers).
    fn restart_call(&mut self) {
        self.sepc -= 4;
    }
}

/// What the trap path resumes after the portable kernel handled a trap from U-mode.
pub type Resume = crate::arch::contract::Resume<UserContext>;

/// A trap from U-mode, the registers saved in the current domain's context at `ctx`; returns
/// the context to resume.
#[inline(always)]
pub(super) fn on_trap(ctx: *mut TrapFrame, scause: usize, stval: usize) -> *mut TrapFrame {
    if scause == ECALL_FROM_U {
        // SAFETY: `ctx` is the current domain's context, just saved by the trap entry; nothing
        // else refers to it until the portable kernel is called, after this borrow ends.
        unsafe { (*ctx).sepc += 4 };
        return resume(ctx, crate::domain::on_user_trap(UserTrap::SystemCall));
    }
    // Off the system call's path (a switch follows anyway).
    core::hint::cold_path();
    if scause == SUPERVISOR_TIMER {
        timer::disarm();
        if crate::softint::due() {
            interrupts::raise_software();
        }
        return resume(ctx, crate::domain::on_user_trap(UserTrap::Timer));
    }
    on_other_trap(ctx, scause, stval)
}

/// [`on_trap`] for anything but a system call or the timer.
#[inline(never)]
fn on_other_trap(ctx: *mut TrapFrame, scause: usize, stval: usize) -> *mut TrapFrame {
    if scause == INTERRUPT | interrupts::EXTERNAL {
        interrupts::on_external();
        return resume(ctx, crate::domain::on_user_trap(UserTrap::Device));
    }
    if scause & INTERRUPT != 0 {
        // The kernel's business, not the domain's: counted and silenced, and the domain
        // resumes where it was interrupted.
        interrupts::unexpected(scause & !INTERRUPT, true);
        return ctx;
    }
    // SAFETY: as in `on_trap`: the current domain's context, referred to by nothing else here.
    if scause == ILLEGAL_INSTRUCTION && fp::on_first_use(unsafe { &mut *ctx }) {
        // The domain's floating-point state is loaded now: its instruction runs again.
        return ctx;
    }
    resume(ctx, crate::domain::on_user_trap(UserTrap::Fault(user_fault(scause, stval))))
}

/// The arch-neutral form of exception `scause` with `stval`.
fn user_fault(scause: usize, stval: usize) -> UserFault {
    use abi::Access::{Execute, Read, Write};
    let addr = stval;
    match scause {
        0 => UserFault::Misaligned { addr, access: Execute },
        1 => UserFault::Refused { addr, access: Execute },
        ILLEGAL_INSTRUCTION => UserFault::IllegalInstruction { bits: Some(stval as u64) },
        3 => UserFault::Breakpoint,
        4 => UserFault::Misaligned { addr, access: Read },
        5 => UserFault::Refused { addr, access: Read },
        6 => UserFault::Misaligned { addr, access: Write },
        7 => UserFault::Refused { addr, access: Write },
        12 => UserFault::Page { addr, access: Execute },
        13 => UserFault::Page { addr, access: Read },
        15 => UserFault::Page { addr, access: Write },
        code => UserFault::Other { name: exception_name(code), code },
    }
}

/// The context to resume after `ctx` trapped, as `what` says.
#[inline(always)]
fn resume(ctx: *mut TrapFrame, what: Resume) -> *mut TrapFrame {
    match what {
        Resume::Results(status, value) => {
            // SAFETY: `ctx` is the current domain's context; the portable kernel, which had it,
            // has returned, so nothing else refers to it.
            unsafe { (*ctx).set_result(status, value) };
            ctx
        }
        Resume::Context(other) => other,
    }
}

global_asm!(
    r#"
    .section .text
    .globl __enter_user
__enter_user:
    j       __user_resume
    "#
);

unsafe extern "C" {
    fn __enter_user(ctx: *mut TrapFrame) -> !;
}

/// Leaves the kernel's boot context for good and runs the context at `ctx` (a domain's, which
/// stays where it is for as long as the domain exists) in U-mode, in the address space the
/// caller activated. From here on the kernel runs only in trap handlers.
pub fn enter_user(ctx: core::ptr::NonNull<UserContext>) -> ! {
    super::interrupts::disable();
    // SAFETY: `ctx` is a domain's context, boxed in the kernel's world and never freed;
    // `__enter_user` restores every register from it and returns to U-mode with `sscratch`
    // holding it, where the next trap saves the domain's registers.
    unsafe { __enter_user(ctx.as_ptr()) }
}

/// The address-space identifiers of this hart: how many there are is found at boot
/// ([`init_asids`]); [`AddressSpace::activate`] takes them from here. No interrupt handler
/// touches it (they never switch address spaces), so taking the lock with interrupts on cannot
/// deadlock on this single hart.
static ASIDS: Mutex<AsidAllocator> = Mutex::new(AsidAllocator::new(1));

/// The generation of [`ASIDS`], copied there whenever it changes (under the lock), so that the
/// common case of a switch, to a space whose ASID is live, takes no lock.
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// Runs `f` on the allocator and keeps [`GENERATION`] in step.
fn with_asids<R>(f: impl FnOnce(&mut AsidAllocator) -> R) -> R {
    let mut asids = ASIDS.lock();
    let r = f(&mut asids);
    GENERATION.store(asids.generation(), Ordering::Relaxed);
    r
}

/// How many ASIDs the hart has (the kernel's included), as found at boot.
static HART_ASIDS: AtomicU32 = AtomicU32::new(1);

/// Sets the number of ASIDs from the hart's ASIDLEN (found by [`sv39::probe_asid_bits`]), before
/// any address space runs.
pub(super) fn init_asids(bits: u32) {
    let count = 1 << bits.min(16);
    HART_ASIDS.store(count, Ordering::Relaxed);
    with_asids(|a| a.restart(count));
}

/// Uses at most `count` ASIDs from now on (the kernel's 0 included; never more than the hart
/// has, at least 1), for tests that make recycling happen; returns the number used before. The
/// CPU moves to the kernel's own tables, and the TLB is flushed: every address space gets a
/// fresh ASID when it next runs.
pub fn limit_asids(count: u32) -> u32 {
    let before = with_asids(|a| {
        let before = a.count();
        a.restart(count.clamp(1, HART_ASIDS.load(Ordering::Relaxed)));
        before
    });
    super::with_kernel_table(|k| sv39::switch(k, asid_allocator::KERNEL, Flush::All));
    before
}

/// The current ASID generation (it grows by one each time the ASIDs run out and are recycled).
pub fn asid_generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// A protection domain's view of the single address space: one Sv39 tree that shares the
/// kernel half and maps, in the user half, exactly the stretches the domain may access, with
/// its rights.
///
/// It runs under an ASID the arch hands out ([`asid_allocator`]: by generations, recycled when
/// there are fewer ASIDs than spaces), so switching to it writes `satp` without flushing the
/// TLB; every change of its mappings (map, unmap, protect, tables made or freed) is flushed by
/// its ASID, and by address where only a leaf changed, if its ASID is live (otherwise the TLB
/// holds nothing of it).
pub struct AddressSpace {
    table: PageTable,
    tag: Cell<Tag>,
    /// `satp` for the tree under the ASID of `tag`.
    satp: Cell<usize>,
    /// In a batch of changes: their flushes are held back.
    batch: FlushBatch,
}

impl AddressSpace {
    /// The ASID under which the TLB may hold this space's translations, if any.
    pub fn live_asid(&self) -> Option<u16> {
        let tag = self.tag.get();
        if tag.generation() == GENERATION.load(Ordering::Relaxed) { tag.asid() } else { None }
    }

    /// Makes a change to the page at `va` reach the TLB: flushes the page in this space's ASID
    /// (with `tables`, the whole ASID: non-leaf entries changed), if the ASID is live.
    fn flush_change(&self, va: usize, tables: bool) {
        if self.batch.defer(va, tables) {
            return;
        }
        match self.live_asid() {
            Some(asid) if tables => sv39::flush_asid(asid),
            Some(asid) => sv39::flush_page(va as u64, asid),
            None => {}
        }
    }

    /// [`AddressSpace::activate`] for a space whose ASID is not live.
    #[cold]
    #[inline(never)]
    fn activate_with_new_asid(&self) {
        let mut tag = self.tag.get();
        let switch = with_asids(|a| a.switch_to(&mut tag));
        self.tag.set(tag);
        self.satp.set(self.table.satp(switch.asid));
        sv39::switch(&self.table, switch.asid, switch.flush);
    }
}

impl AddressSpaceOps for AddressSpace {
    const LEVELS: u64 = 3;
    type Error = MapError;

    /// An empty user half, its tables charged to `owner`. It gets an ASID when it first runs.
    fn new(owner: Owner) -> Result<Self, MapError> {
        let table = super::with_kernel_table(|k| PageTable::new_sharing_kernel(k, owner))?;
        Ok(AddressSpace {
            table,
            tag: Cell::new(Tag::NONE),
            satp: Cell::new(0),
            batch: FlushBatch::new(),
        })
    }

    /// Maps the user page `va` to frame `pa` with `rights` (write implies read: Sv39 has no
    /// write-only pages). `Rights::NONE` maps nothing.
    fn map(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), MapError> {
        let Some(flags) = leaf_flags(rights) else { return Ok(()) };
        // Flushed although the page was invalid: the TLB may cache the absence of a mapping.
        let tables = self.table.map_page(va as u64, pa, flags)?;
        self.flush_change(va, tables);
        Ok(())
    }

    /// [`AddressSpaceOps::map`] with the entry's accessed and dirty bits clear: QEMU 7.2's
    /// Sv39 page walker sets them itself on the first access (a load sets A; a store, A and
    /// D), as `syscheck` checks, so no fault path is needed for them.
    fn map_tracked(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), MapError> {
        let Some(flags) = leaf_flags(rights) else { return Ok(()) };
        let tables = self.table.map_page_with(va as u64, pa, flags, 0)?;
        self.flush_change(va, tables);
        Ok(())
    }

    fn page_state(&self, va: usize) -> u8 {
        let Some(used) = self.table.used_bits(va as u64) else { return 0 };
        let mut state = page_state::MAPPED;
        if used & PTE_A != 0 {
            state |= page_state::ACCESSED;
        }
        if used & PTE_D != 0 {
            state |= page_state::DIRTY;
        }
        state
    }

    fn clear_page_state(&mut self, va: usize, clear: u8) {
        if self.table.clear_used_bits(va as u64, pte_used(clear)) {
            self.flush_change(va, false);
        }
    }

    /// Device registers: QEMU `virt`'s PMAs make every device region I/O memory (uncached,
    /// strongly ordered) whatever the page table says, so this is [`AddressSpaceOps::map`].
    fn map_device(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), MapError> {
        self.map(va, pa, rights)
    }

    /// How many page-table frames mapping every page of `[start, end)` would take now.
    fn tables_missing(&mut self, start: usize, end: usize) -> Result<u64, MapError> {
        self.table.tables_missing(start as u64, end as u64)
    }

    /// Creates the page tables of every page of `[start, end)` (see [`PageTable::populate`]).
    fn populate(&mut self, start: usize, end: usize) -> Result<u64, MapError> {
        let made = self.table.populate(start as u64, end as u64);
        // Made tables change non-leaf entries, even when a later one failed.
        self.flush_change(start, true);
        made
    }

    /// Frees the page tables of `[start, end)` that map nothing.
    fn prune_range(&mut self, start: usize, end: usize) {
        if self.table.prune_range(start as u64, end as u64) {
            self.flush_change(start, true);
        }
    }

    /// Removes the mapping of `va`, if any, keeping its page tables, and flushes it.
    fn unmap_keeping_tables(&mut self, va: usize) {
        if self.table.unmap_keeping_tables(va as u64).is_ok() {
            self.flush_change(va, false);
        }
    }

    /// How many page-table frames mapping the page `va` would take now (0 to 2).
    fn tables_needed(&self, va: usize) -> u64 {
        self.table.tables_needed(va as u64)
    }

    /// Changes the rights of the mapped page `va` (at least one of read, write, execute) and
    /// flushes it.
    fn protect(&mut self, va: usize, rights: Rights) -> Result<(), MapError> {
        let flags = leaf_flags(rights).ok_or(MapError::NoAccess)?;
        self.table.protect(va as u64, flags)?;
        self.flush_change(va, false);
        Ok(())
    }

    /// Removes the mapping of `va`, if any, and flushes it (with the tables it frees).
    fn unmap(&mut self, va: usize) {
        if self.table.unmap_keeping_tables(va as u64).is_ok() {
            let freed = self.table.prune(va as u64);
            self.flush_change(va, freed);
        }
    }

    fn begin_batch(&mut self) {
        self.batch.begin();
    }

    /// Flushes the batch's pages in this space's ASID one `sfence.vma` each, or the whole ASID
    /// with one, if the ASID is live.
    fn end_batch(&mut self) {
        let Some(batch) = self.batch.end() else { return };
        let Some(asid) = self.live_asid() else { return };
        match batch.pages() {
            Some(pages) => pages.iter().for_each(|&va| sv39::flush_page(va as u64, asid)),
            None => sv39::flush_asid(asid),
        }
    }

    /// Makes this the current address space: `satp` selects its tree under its ASID, which it
    /// gets first if it has none of the current generation (then the TLB is flushed of that
    /// ASID, or whole when the ASIDs ran out and a new generation began).
    #[inline]
    fn activate(&self) {
        if self.tag.get().generation() == GENERATION.load(Ordering::Relaxed) {
            sv39::write_satp(self.satp.get());
        } else {
            self.activate_with_new_asid();
        }
    }

    /// Frees the tables (not the mapped frames) and forgets cached translations. The CPU moves
    /// to the kernel's own tables first, in case this space is the current one.
    fn destroy(self) {
        super::with_kernel_table(|k| sv39::switch(k, asid_allocator::KERNEL, Flush::None));
        if let Some(asid) = self.live_asid() {
            sv39::flush_asid(asid);
        }
        self.table.destroy();
    }
}

/// The entry bits ([`PTE_A`], [`PTE_D`]) of `abi::page_state` bits `used`.
fn pte_used(used: u8) -> u64 {
    let mut bits = 0;
    if used & page_state::ACCESSED != 0 {
        bits |= PTE_A;
    }
    if used & page_state::DIRTY != 0 {
        bits |= PTE_D;
    }
    bits
}

/// The leaf flags of a user page with `rights` (write implies read), or `None` if they grant
/// no access.
fn leaf_flags(rights: Rights) -> Option<u64> {
    let mut flags = PTE_U;
    if rights.contains(Rights::READ) || rights.contains(Rights::WRITE) {
        flags |= PTE_R;
    }
    if rights.contains(Rights::WRITE) {
        flags |= PTE_W;
    }
    if rights.contains(Rights::EXECUTE) {
        flags |= PTE_X;
    }
    (flags != PTE_U).then_some(flags)
}

/// Copies `dst.len()` words from the 8-byte aligned user address `src` of the current address
/// space into `dst`, in one probed loop. The caller has checked that the domain may read the
/// range; a fault on the way (or a misaligned `src`) yields `Err(src)` instead of a kernel
/// trap.
pub fn copy_words_from_user(dst: &mut [u64], src: usize) -> Result<(), usize> {
    if !src.is_multiple_of(8) {
        return Err(src);
    }
    // SAFETY: setting SUM lets S-mode loads reach U pages; it is cleared again below, and every
    // load goes through the probe loop, so an unmapped page yields an error, not a trap.
    unsafe { sstatus::set_sum() };
    let copied = probe::copy_words(dst, src);
    // SAFETY: clears SUM again.
    unsafe { sstatus::clear_sum() };
    if copied { Ok(()) } else { Err(src) }
}

/// Copies `dst.len()` bytes from the user address `src` of the current address space into
/// `dst`. The caller has checked that the domain may read the range; a fault on the way (the
/// check notwithstanding) yields `Err(faulting address)` instead of a kernel trap.
pub fn copy_from_user(dst: &mut [u8], src: usize) -> Result<(), usize> {
    // SAFETY: setting SUM lets S-mode loads reach U pages; it is cleared again below, and every
    // load goes through a probe, so an unmapped page yields an error, not a trap.
    unsafe { sstatus::set_sum() };
    // Whole aligned words where possible (one probe each), single bytes at the edges.
    let mut result = Ok(());
    let mut i = 0;
    while i < dst.len() {
        let at = src + i;
        if at.is_multiple_of(8) && dst.len() - i >= 8 {
            match probe::read_u64(at) {
                Some(w) => dst[i..i + 8].copy_from_slice(&w.to_le_bytes()),
                None => {
                    result = Err(at);
                    break;
                }
            }
            i += 8;
        } else {
            match probe::read_u8(at) {
                Some(b) => dst[i] = b,
                None => {
                    result = Err(at);
                    break;
                }
            }
            i += 1;
        }
    }
    // SAFETY: clears SUM again: U pages are out of S-mode's reach as before.
    unsafe { sstatus::clear_sum() };
    result
}

/// Copies `src` to the user address `dst` of the current address space, byte by byte. The
/// caller has checked that the domain may write the range; a fault on the way (the check
/// notwithstanding) yields `Err(faulting address)` instead of a kernel trap, with the bytes
/// before it written.
pub fn copy_to_user(src: &[u8], dst: usize) -> Result<(), usize> {
    // SAFETY: setting SUM lets S-mode stores reach U pages; it is cleared again below, and
    // every store goes through a probe, so an unmapped or read-only page yields an error.
    unsafe { sstatus::set_sum() };
    let mut result = Ok(());
    for (i, &b) in src.iter().enumerate() {
        let at = dst.wrapping_add(i);
        if !probe::write_u8(at, b) {
            result = Err(at);
            break;
        }
    }
    // SAFETY: clears SUM again: U pages are out of S-mode's reach as before.
    unsafe { sstatus::clear_sum() };
    result
}
