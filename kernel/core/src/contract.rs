//! The arch contract: what the portable kernel needs from an architecture to run domains, in
//! arch-neutral terms.
//!
//! The kernel core names no architecture. It sees a
//! domain's registers only through [`UserContextOps`], a protection domain only through
//! [`AddressSpaceOps`], and a trap from user mode as a [`UserTrap`], its faults typed as
//! [`UserFault`]; it tells the trap path what to resume with a [`Resume`]. Each architecture
//! module of the kernel implements the traits for its `UserContext` and `AddressSpace`, and the
//! kernel's platform ([`crate::Platform`]) names them; the kernel's `arch::contract` holds every
//! architecture to the same free items.
//!
//! What is implemented: RISC-V (Sv39 with ASIDs, `ecall`, the `sstatus` FP state, the SBI
//! timer) and x86_64 (4-level tables with PCIDs where CPUID reports them, `UserContext` with
//! `syscall`, `sysretq` and `iretq`, the lazily restored FXSAVE state, copies from user memory
//! under SMAP, the local APIC timer); both run domains.

use abi::{Access, Rights};
use frame_allocator::Owner;

/// What the trap path resumes after the portable kernel handled a trap from user mode.
pub enum Resume<C> {
    /// The same context, with a system call's results (status: 0 or an error code; value).
    Results(usize, usize),
    /// This context (the current domain's, which may be another one now, or the same one
    /// changed).
    Context(*mut C),
}

/// Why a domain entered the kernel.
#[derive(Clone, Copy, Debug)]
pub enum UserTrap {
    /// A system call (the context's PC already points past the instruction): the call's number
    /// and arguments are in the context ([`UserContextOps::call`]).
    SystemCall,
    /// The timer interrupt armed by the scheduler.
    Timer,
    /// A device's interrupt, raised ([`crate::raise_interrupt`]) for delivery to the
    /// driver domain it is bound to.
    Device,
    /// A fault the kernel does not resolve for the domain by itself.
    Fault(UserFault),
}

/// A fault a domain took in user mode, in terms every architecture maps its own onto.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserFault {
    /// An access to `addr` that the domain's protection domain does not map with the rights
    /// it needs (RISC-V page faults, x86 #PF): the one fault a stretch driver can resolve.
    Page {
        /// The address.
        addr: usize,
        /// The access.
        access: Access,
    },
    /// An access the memory system refused whatever the mappings (RISC-V access faults; an
    /// x86 #GP on a non-canonical address).
    Refused {
        /// The address (0 where the architecture does not report it).
        addr: usize,
        /// The access.
        access: Access,
    },
    /// A misaligned access the architecture does not perform.
    Misaligned {
        /// The address.
        addr: usize,
        /// The access.
        access: Access,
    },
    /// An instruction the CPU does not know, or that user mode may not run.
    IllegalInstruction {
        /// Its bits, where the architecture reports them (RISC-V `stval`).
        bits: Option<u64>,
    },
    /// A breakpoint instruction.
    Breakpoint,
    /// Anything else the architecture raises, by its own name and number.
    Other {
        /// The architecture's name for it.
        name: &'static str,
        /// Its exception number.
        code: usize,
    },
}

impl UserFault {
    /// Its name in reports and in the domain's ending.
    #[inline]
    pub fn name(&self) -> &'static str {
        use Access::{Execute, Read, Write};
        match *self {
            UserFault::Page { access: Read, .. } => "load page fault",
            UserFault::Page { access: Write, .. } => "store page fault",
            UserFault::Page { access: Execute, .. } => "instruction page fault",
            UserFault::Refused { access: Read, .. } => "load access fault",
            UserFault::Refused { access: Write, .. } => "store access fault",
            UserFault::Refused { access: Execute, .. } => "instruction access fault",
            UserFault::Misaligned { access: Read, .. } => "load address misaligned",
            UserFault::Misaligned { access: Write, .. } => "store address misaligned",
            UserFault::Misaligned { access: Execute, .. } => "instruction address misaligned",
            UserFault::IllegalInstruction { .. } => "illegal instruction",
            UserFault::Breakpoint => "breakpoint",
            UserFault::Other { name, .. } => name,
        }
    }

    /// The address the fault is about, if it is about one.
    #[inline]
    pub fn addr(&self) -> Option<usize> {
        match *self {
            UserFault::Page { addr, .. }
            | UserFault::Refused { addr, .. }
            | UserFault::Misaligned { addr, .. } => Some(addr),
            _ => None,
        }
    }
}

/// A domain's registers as the kernel keeps them while it does not run: made by the loader,
/// read and written by the system-call path, copied to and from `abi::SavedContext` for
/// activations.
pub trait UserContextOps: Sized {
    /// A context that starts at `entry` with stack pointer `sp` and the four entry arguments
    /// (`abi::ENTRY_ARGUMENTS`), in user mode with interrupts enabled.
    fn new_user(entry: usize, sp: usize, args: [usize; 4]) -> Self;
    /// The system call made at a trap: its number and six arguments.
    fn call(&self) -> (usize, [usize; 6]);
    /// Sets a system call's results: status (0 or an error code) and value.
    fn set_result(&mut self, status: usize, value: usize);
    /// The results [`UserContextOps::set_result`] set.
    fn results(&self) -> (usize, usize);
    /// Makes the system call that trapped here run again when the context resumes (the PC
    /// goes back to its instruction; the arguments are still in their registers).
    fn restart_call(&mut self);
    /// The interrupted program counter.
    fn pc(&self) -> usize;
    /// The registers as an activation handler sees them.
    fn saved(&self) -> abi::SavedContext;
    /// Loads the registers from the words of an `abi::SavedContext` written by the domain (the
    /// privileged state stays the kernel's).
    fn load_words(&mut self, words: &[u64; abi::SavedContext::WORDS]);
    /// Enters an activation handler at `entry` on stack `stack` with two arguments; the other
    /// registers are cleared.
    fn enter_handler(&mut self, entry: usize, stack: usize, args: [usize; 2]);
}

/// Most pages a batch of changes ([`AddressSpaceOps::begin_batch`]) flushes one by one (`sfence.vma`
/// with an address, `invlpg`); a larger batch flushes its space's whole tag with one
/// instruction, which costs less than that many single flushes plus the refills it causes
/// only past about this size.
pub const BATCH_PAGE_FLUSHES: usize = 16;

/// The flushes a batch of changes has held back (see [`AddressSpaceOps::begin_batch`]).
#[derive(Clone, Copy)]
pub struct DeferredFlush {
    /// Non-leaf entries changed: the whole tag must go.
    tables: bool,
    /// Pages changed (those past [`BATCH_PAGE_FLUSHES`] not recorded).
    count: usize,
    pages: [usize; BATCH_PAGE_FLUSHES],
}

impl DeferredFlush {
    /// Nothing held back yet.
    #[inline]
    pub const fn new() -> Self {
        DeferredFlush { tables: false, count: 0, pages: [0; BATCH_PAGE_FLUSHES] }
    }

    /// Records a change at the page `va` (with `tables`, of non-leaf entries).
    #[inline]
    pub fn note(&mut self, va: usize, tables: bool) {
        self.tables |= tables;
        if let Some(slot) = self.pages.get_mut(self.count) {
            *slot = va;
        }
        self.count = self.count.saturating_add(1);
    }

    /// What to flush: `Some(pages)` page by page (perhaps none), `None` the whole tag.
    #[inline]
    pub fn pages(&self) -> Option<&[usize]> {
        if self.tables { None } else { self.pages.get(..self.count) }
    }
}

impl Default for DeferredFlush {
    fn default() -> Self {
        Self::new()
    }
}

/// The flushes held back by the batch that runs, kernel-wide: one CPU runs one system call at
/// a time and no user code runs inside a batch, so at most one batch is under way. An address
/// space keeps only a flag that it is in it, so the space stays small and its common paths
/// read one word.
pub static DEFERRED: spin::Mutex<DeferredFlush> = spin::Mutex::new(DeferredFlush::new());

/// A protection domain's view of the single address space: its own page tables, which share
/// the kernel half and map, in the user half, exactly the pages the domain may access, under a
/// TLB tag (ASID, PCID) so that switching to it needs no flush. Its table frames are charged to
/// its owner; every change reaches the TLB before the call returns.
pub trait AddressSpaceOps: Sized {
    /// Levels of the page-table tree (Sv39: 3; x86_64: 4): a bound on the table frames that
    /// mapping one page takes, used where a call cannot count them exactly in advance.
    const LEVELS: u64;
    /// Why a mapping request failed.
    type Error: core::fmt::Debug + crate::log::Report;

    /// An empty user half, its tables charged to `owner`.
    fn new(owner: Owner) -> Result<Self, Self::Error>;
    /// Maps the user page `va` to frame `pa` with `rights`.
    fn map(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), Self::Error>;
    /// Maps the user page `va` to the device registers at `pa` with `rights`, uncached and
    /// strongly ordered (x86_64: PCD and PWT; RISC-V: the platform's PMAs already make device
    /// regions I/O memory, so it is [`AddressSpaceOps::map`]).
    fn map_device(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), Self::Error>;
    /// Maps the user page `va` of a managed stretch to frame `pa` with `rights`, with the
    /// hardware's accessed and dirty bits clear, so that the hardware sets them on the first
    /// access (QEMU's page walkers do on both architectures). [`AddressSpaceOps::map`] makes
    /// its entries as before (RISC-V presets both bits).
    fn map_tracked(&mut self, va: usize, pa: u64, rights: Rights) -> Result<(), Self::Error>;
    /// The state of the user page `va` in `abi::page_state` bits: `MAPPED`, with `ACCESSED`
    /// and `DIRTY` as its entry holds them; 0 if nothing is mapped there.
    fn page_state(&self, va: usize) -> u8;
    /// Clears the bits of `clear` among `abi::page_state::ACCESSED` and `DIRTY` in the entry
    /// of the mapped page `va`, and flushes the page if the entry changed (held back within a
    /// batch, like any other change).
    fn clear_page_state(&mut self, va: usize, clear: u8);
    /// Changes the rights of the mapped page `va`, keeping its accessed and dirty bits.
    fn protect(&mut self, va: usize, rights: Rights) -> Result<(), Self::Error>;
    /// Removes the mapping of `va`, if any (with the tables it frees).
    fn unmap(&mut self, va: usize);
    /// Removes the mapping of `va`, if any, keeping its tables.
    fn unmap_keeping_tables(&mut self, va: usize);
    /// How many table frames mapping every page of `[start, end)` would take now.
    fn tables_missing(&mut self, start: usize, end: usize) -> Result<u64, Self::Error>;
    /// How many table frames mapping the page `va` would take now.
    fn tables_needed(&self, va: usize) -> u64;
    /// Makes the tables of every page of `[start, end)`; how many it made.
    fn populate(&mut self, start: usize, end: usize) -> Result<u64, Self::Error>;
    /// Frees the tables of `[start, end)` that map nothing.
    fn prune_range(&mut self, start: usize, end: usize);
    /// Holds back the TLB flushes of the changes that follow (map, unmap, protect, tables made)
    /// until [`AddressSpaceOps::end_batch`]; no user code may run in between. A batch already
    /// begun goes on.
    fn begin_batch(&mut self);
    /// Makes every change since [`AddressSpaceOps::begin_batch`] reach the TLB in one step:
    /// page by page for at most [`BATCH_PAGE_FLUSHES`] pages of leaf changes, else (or when
    /// tables changed) every entry of the space's tag (ASID, PCID) at once.
    fn end_batch(&mut self);
    /// Makes this the current address space.
    fn activate(&self);
    /// Frees the tables (not the mapped frames) and forgets cached translations.
    fn destroy(self);
}
