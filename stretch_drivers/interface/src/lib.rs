//! The stretch-driver interface: how a domain pages its own memory in Tessera.
//!
//! Memory comes as *stretches*, page-aligned ranges of the one address space. Each stretch is
//! bound to a *stretch driver* that runs inside the domain that owns it (self-paging): when a
//! thread touches a page of the stretch that is not mapped, the kernel activates the domain,
//! and the driver resolves the fault with the domain's own frames (take a frame within the
//! domain's frames contract, fill it, ask the kernel to map it); then the thread resumes. This
//! crate holds the two sides of that conversation and a stand-in for the kernel:
//!
//! - [`MemoryKernel`]: what a driver may ask of the kernel. Each method is one system call
//!   (`frame_alloc`, `frame_free`, `map`, `unmap`, `protect`, `remap`, `map_batch`,
//!   `page_state`, and `frames_held`, which the runtime may also read from the control block),
//!   except [`MemoryKernel::read`] and [`MemoryKernel::write`], which are plain memory copies
//!   in the domain.
//! - [`StretchDriver`]: what the runtime asks of a driver: bind, fault, lock, unlock, revoke,
//!   unbind, stats. A driver writes `bind` and `fault` and lends its [`DriverCore`]; the
//!   others are provided on the core, and a driver overrides those its policy changes.
//! - [`DriverCore`]: what every driver keeps and does the same way (the bound stretch, its
//!   page table, lock marks, stats, frames taken with rollback), so that a driver holds only
//!   its policy; every driver in `stretch_drivers/` and the template are built on it.
//! - [`mock::MockKernel`] (feature `mock`, on by default): a host model of the kernel's memory
//!   calls with the same checks, plus helpers that play the CPU and the fault path, so drivers
//!   are tested with `cargo test`.
//!
//! # Life cycle of a driver
//!
//! One driver value manages one stretch at a time. The runtime calls its methods one at a time
//! (they take `&mut self`), never from inside another of them.
//!
//! ```text
//!            new()
//!              |
//!              v
//!        +-----------+    bind(stretch) ok     +---------+
//!   +--> |  Unbound  | ----------------------> |  Bound  | <--+  fault, lock, unlock,
//!   |    +-----------+ <---------------------- +---------+ ---+  revoke, stats
//!   |        |             unbind()
//!   +--------+
//!   bind fails: it holds nothing, stays Unbound
//! ```
//!
//! - `bind` takes what the driver needs up front (all pages for a nailed driver, a pool of
//!   frames for others) and checks the stretch; if it fails it has released all it took.
//! - `fault` resolves one fault in the stretch by mapping the page, or fails it; a failed fault
//!   becomes an error for the faulting thread, and the domain lives on.
//! - `lock` makes pages resident on frames that revocation never takes; `unlock` lets them go.
//! - `revoke` answers the kernel's revocation notice: release up to the frames asked for,
//!   optimistic ones first, and say how many were released.
//! - `unbind` unmaps every page and frees every frame; the driver may be bound again.
//!
//! # What the kernel guarantees a driver
//!
//! Frames come zero-filled. A frame handed out is the domain's until it frees it, except
//! optimistic frames, which a revocation notice may ask back (and which the kernel takes by
//! force, terminating the domain, if the domain does not comply in time). A fault reaches the
//! driver only for its own bound stretch and for an access the domain's rights allow; any
//! other fault terminates the domain before a driver runs. The kernel validates every call:
//! a driver cannot map outside the stretches its domain manages, map a frame it does not
//! hold, or exceed its frames contract; a bad call returns a [`MemError`].
//!
//! # Compared with Nemesis and Zircon
//!
//! Nemesis's stretch drivers offer bind, fault, map, lock, unlock and revoke. Here `bind`,
//! `fault`, `lock`, `unlock` and `revoke` keep their meaning; mapping is a kernel call a
//! driver makes ([`MemoryKernel::map`]) rather than a driver operation, and `lock` makes pages
//! resident, which covers Nemesis's mapping on request. Zircon's pager is the reverse
//! arrangement: a separate pager process answers page requests on a VMO with `supply` (hand
//! over filled pages), `fail` (the faulting thread gets an error) and `writeback` begin and end
//! (track dirty pages while they are saved), and the kernel evicts pages by its own policy.
//! Tessera's `fault` returning `Ok` corresponds to `supply`, a [`FaultError`] to `fail`;
//! eviction is the driver's own, through `revoke`, and a driver with a backing store saves a
//! page through [`MemoryKernel::read`] before it unmaps it.
//!
//! # Invariants
//!
//! - A page is mapped at most once, and a frame is mapped at most at one address.
//! - `unmap` returns the frame that was mapped, which stays the domain's until `frame_free`.
//! - A driver never holds more frames than its domain's contract allows: the kernel refuses.
//! - Write implies read in the page tables (Sv39 has no write-only pages), so a page mapped
//!   with [`Rights::WRITE`] can be read.
//!
//! # Not implemented
//!
//! In a domain, libtessera's `paging` module implements [`MemoryKernel`] over the kernel's
//! memory calls and runs drivers on faults and revocation notices (`docs/memory.md`).
//! Dirty and referenced bits are not reported to drivers, so a driver with a backing store
//! saves every page it evicts. A driver manages a single stretch. The rights a driver maps
//! with are those of the stretch when it was bound; a later change of rights is not passed on.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod driver_core;
#[cfg(feature = "mock")]
pub mod mock;

pub use driver_core::{DriverCore, Mapped};

use core::fmt;
use core::ops::Range;

pub use abi::{Access, MAP_BATCH_MAX, PAGE_SIZE, PageOp, Rights, page_op, page_state};

/// A physical frame as the kernel hands it out: its frame number (physical address divided by
/// [`PAGE_SIZE`]). Drivers treat it as an opaque handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Frame(pub u64);

/// A page fault as the kernel reports it to the domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The base of the stretch the address lies in, which names the driver to call.
    pub stretch_base: usize,
    /// The faulting address (not rounded to its page).
    pub addr: usize,
    /// What the thread tried to do.
    pub access: Access,
}

impl Fault {
    /// The address of the faulting page.
    pub const fn page(&self) -> usize {
        self.addr & !(PAGE_SIZE - 1)
    }
}

/// A stretch as its driver sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StretchInfo {
    /// The first address (page-aligned).
    pub base: usize,
    /// Its length in pages.
    pub pages: usize,
    /// The rights the owning domain holds on it.
    pub rights: Rights,
}

/// The page rights: read, write, execute.
const PAGE_RIGHTS: u8 = Rights::READ.0 | Rights::WRITE.0 | Rights::EXECUTE.0;

impl StretchInfo {
    /// Its length in bytes.
    pub const fn bytes(&self) -> usize {
        self.pages * PAGE_SIZE
    }

    /// One past its last address.
    pub const fn end(&self) -> usize {
        self.base + self.bytes()
    }

    /// Whether `addr` lies in it.
    pub const fn contains(&self, addr: usize) -> bool {
        addr >= self.base && addr - self.base < self.bytes()
    }

    /// The index of the page `addr` lies in, if it lies in the stretch.
    pub const fn page_index(&self, addr: usize) -> Option<usize> {
        if self.contains(addr) { Some((addr - self.base) / PAGE_SIZE) } else { None }
    }

    /// The address of page `index`.
    pub const fn page_addr(&self, index: usize) -> usize {
        self.base + index * PAGE_SIZE
    }

    /// The rights to map its pages with: the stretch's rights without [`Rights::META`].
    pub const fn page_rights(&self) -> Rights {
        Rights(self.rights.0 & PAGE_RIGHTS)
    }

    /// Checks what a driver relies on: a page-aligned base, at least one page, an end that
    /// does not wrap, and at least one page right.
    pub fn check(&self) -> Result<(), DriverError> {
        let fits = self.pages.checked_mul(PAGE_SIZE).and_then(|b| self.base.checked_add(b));
        if !self.base.is_multiple_of(PAGE_SIZE)
            || self.pages == 0
            || fits.is_none()
            || self.page_rights() == Rights::NONE
        {
            return Err(DriverError::BadStretch);
        }
        Ok(())
    }

    /// The indices of the pages an address range covers (whole pages: the start rounded down,
    /// the end rounded up). An empty range covers no page. Fails with
    /// [`DriverError::OutOfRange`] unless the range lies inside the stretch.
    pub fn pages_in(&self, range: Range<usize>) -> Result<Range<usize>, DriverError> {
        if range.start > range.end || range.start < self.base || range.end > self.end() {
            return Err(DriverError::OutOfRange);
        }
        let first = (range.start - self.base) / PAGE_SIZE;
        let last = (range.end - self.base).div_ceil(PAGE_SIZE);
        Ok(first..last.max(first))
    }
}

/// Which part of the frames contract a frame is taken from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// Within the domain's guarantee: always available up to the contract, never revoked.
    Guaranteed,
    /// From memory nobody uses at the moment, up to the contract's optimistic count; the kernel
    /// may ask for it back with a revocation notice.
    Optimistic,
}

/// Why a [`MemoryKernel`] call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemError {
    /// No frame of the kind asked for: the contract's count of that kind is used up, or (for
    /// optimistic frames) no memory is free.
    NoFrames,
    /// The address is not in a stretch the domain owns.
    NotOwned,
    /// The address is in a stretch the domain owns but that is not bound to one of its
    /// drivers, so the domain does not manage its mappings.
    NotManaged,
    /// The page is mapped already.
    AlreadyMapped,
    /// The page is not mapped (or, for `read` and `write`, some page of the range is not).
    NotMapped,
    /// The address is not page-aligned, or the range wraps around the address space.
    BadAddress,
    /// The rights are not page rights: none of read, write or execute, or other bits.
    BadRights,
    /// The rights exceed what the domain holds on the stretch, or (for `read` and `write`) the
    /// mapping does not allow the copy.
    Denied,
    /// The frame is not one the domain holds.
    BadFrame,
    /// The frame is mapped: it cannot be freed, or mapped at a second address.
    FrameInUse,
    /// A `map_batch` has more than [`MAP_BATCH_MAX`] entries, an entry names no operation, or
    /// two entries touch one page; or a `page_state` asks for no page or more than
    /// [`MAP_BATCH_MAX`].
    BadBatch,
    /// A `page_state` asks to clear bits other than [`page_state::ACCESSED`] and
    /// [`page_state::DIRTY`].
    BadBits,
}

impl MemError {
    /// A short description.
    pub const fn describe(self) -> &'static str {
        match self {
            MemError::NoFrames => "no frame left in the contract",
            MemError::NotOwned => "address is not in a stretch the domain owns",
            MemError::NotManaged => "stretch is not managed by the domain (no driver bound)",
            MemError::AlreadyMapped => "page is mapped already",
            MemError::NotMapped => "page is not mapped",
            MemError::BadAddress => "address is not page-aligned or the range wraps",
            MemError::BadRights => "rights are not page rights",
            MemError::Denied => "rights exceed what the domain holds",
            MemError::BadFrame => "frame is not held by the domain",
            MemError::FrameInUse => "frame is mapped",
            MemError::BadBatch => {
                "batch empty or too long, unknown operation, or a page twice in it"
            }
            MemError::BadBits => "only the accessed and dirty bits can be cleared",
        }
    }
}

impl fmt::Display for MemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

impl core::error::Error for MemError {}

/// What a stretch driver may ask of the kernel, for the domain it runs in. Each method but
/// `read` and `write` is one system call; all are checked by the kernel.
pub trait MemoryKernel {
    /// Takes a frame of `kind` from the domain's frames contract. The frame comes zero-filled
    /// and stays the domain's until it is freed (or, if optimistic, revoked).
    ///
    /// Errors: [`MemError::NoFrames`].
    fn frame_alloc(&mut self, kind: FrameKind) -> Result<Frame, MemError>;

    /// Gives a frame back to the kernel.
    ///
    /// Errors: [`MemError::BadFrame`] (not held by the domain), [`MemError::FrameInUse`]
    /// (still mapped; unmap it first).
    fn frame_free(&mut self, frame: Frame) -> Result<(), MemError>;

    /// Maps `frame` at the page `va` with `rights`.
    ///
    /// Errors: [`MemError::BadAddress`] (`va` not page-aligned), [`MemError::NotOwned`],
    /// [`MemError::NotManaged`], [`MemError::BadRights`], [`MemError::Denied`] (rights beyond
    /// the domain's on the stretch), [`MemError::BadFrame`], [`MemError::FrameInUse`] (the
    /// frame is mapped elsewhere), [`MemError::AlreadyMapped`].
    fn map(&mut self, va: usize, frame: Frame, rights: Rights) -> Result<(), MemError>;

    /// Removes the mapping of the page `va` and returns its frame, which the domain still
    /// holds.
    ///
    /// Errors: [`MemError::BadAddress`], [`MemError::NotOwned`], [`MemError::NotManaged`],
    /// [`MemError::NotMapped`].
    fn unmap(&mut self, va: usize) -> Result<Frame, MemError>;

    /// Changes the rights of the mapped page `va`.
    ///
    /// Errors: those of `map` that concern the address and rights, and
    /// [`MemError::NotMapped`].
    fn protect(&mut self, va: usize, rights: Rights) -> Result<(), MemError>;

    /// Moves the frame mapped at the page `from` to the unmapped page `to` with `rights`, in
    /// one step: no thread sees the page at both or at neither. Returns `from`'s state as it
    /// left it, in [`page_state`] bits ([`page_state::MAPPED`], and the hardware's
    /// [`page_state::ACCESSED`] and [`page_state::DIRTY`] bits); the entry at `to` starts with
    /// both bits clear. A driver fills a frame through a window page of its own before moving
    /// it into place (the fill's writes do not make the page dirty), and takes a page out of
    /// view the same way before it reads it for write-back, learning in the same step whether
    /// it was written.
    ///
    /// Errors: [`MemError::BadAddress`] (either page not page-aligned, or the same page twice),
    /// those of `map` that concern `to` and the rights, those of `unmap` that concern `from`
    /// ([`MemError::NotMapped`]), and [`MemError::AlreadyMapped`] (`to` is mapped). Nothing
    /// moves if the call fails.
    fn remap(&mut self, from: usize, to: usize, rights: Rights) -> Result<u8, MemError>;

    /// Applies the [`PageOp`]s in `ops` (maps, unmaps and protects of pages of managed
    /// stretches, at most [`MAP_BATCH_MAX`]) in one call, with one TLB flush: a driver that
    /// maps ahead, evicts several pages or write-protects a range pays one kernel entry for all
    /// of them. An unmapped frame is not written back into its entry: the driver knows it (it
    /// mapped it), and the domain still holds it. An empty batch does nothing.
    ///
    /// The kernel's call checks every entry before it changes anything, as its single call
    /// would check it and against the pages and frames as they are before the batch, so a
    /// batch that unmaps a frame cannot map it again elsewhere; if one entry is refused,
    /// nothing changes. Errors: `(i, e)`, entry `i` refused with the error `e` its single call
    /// would return, or [`MemError::BadBatch`] (an unknown operation, or a page an earlier
    /// entry touches), or [`MemError::FrameInUse`] (a frame an earlier entry maps);
    /// `(ops.len(), MemError::BadBatch)` for more than [`MAP_BATCH_MAX`] entries.
    ///
    /// The default implementation makes the single calls in order and stops at the first
    /// refused one, leaving the entries before it applied, for kernels without the batch
    /// call; libtessera's `SysKernel` and the mock override it with the all-or-nothing call.
    fn map_batch(&mut self, ops: &[PageOp]) -> Result<(), (usize, MemError)> {
        if ops.len() > MAP_BATCH_MAX {
            return Err((ops.len(), MemError::BadBatch));
        }
        for (i, op) in ops.iter().enumerate() {
            let va = op.va as usize;
            let rights = u8::try_from(op.rights).map(Rights).map_err(|_| MemError::BadRights);
            match op.op {
                page_op::MAP => rights.and_then(|r| self.map(va, Frame(op.frame), r)),
                page_op::UNMAP => self.unmap(va).map(|_| ()),
                page_op::PROTECT => rights.and_then(|r| self.protect(va, r)),
                _ => Err(MemError::BadBatch),
            }
            .map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// Reads the state of the `states.len()` consecutive pages from `va` (pages of managed
    /// stretches, mapped or not) into `states`, one byte a page in [`page_state`] bits:
    /// [`page_state::MAPPED`], and the hardware's [`page_state::ACCESSED`] and
    /// [`page_state::DIRTY`] bits (0 for an unmapped page); then clears the bits `clear` (of
    /// `ACCESSED | DIRTY`) in the mapped pages' entries, with one TLB flush, so that the next
    /// access sets them again. `map` makes a page with both bits clear, `remap` returns the
    /// old page's bits and makes the new one with both clear, and `protect` keeps them; a
    /// replacement policy harvests the accessed bits of its resident pages with this call. One
    /// system call for up to [`MAP_BATCH_MAX`] pages.
    ///
    /// Errors: [`MemError::BadBatch`] (no page, or more than [`MAP_BATCH_MAX`]),
    /// [`MemError::BadBits`] (`clear` names other bits), [`MemError::BadAddress`] (`va` not
    /// page-aligned, or the range wraps), [`MemError::NotOwned`] and [`MemError::NotManaged`]
    /// (for any page of the range). Nothing changes if the call fails.
    fn page_state(&mut self, va: usize, states: &mut [u8], clear: u8) -> Result<(), MemError>;

    /// Copies `data` to memory at `va` through the domain's mappings (any alignment and length;
    /// every page touched must be mapped with [`Rights::WRITE`]). In a domain this is a plain
    /// memory copy.
    ///
    /// Errors: [`MemError::BadAddress`] (the range wraps), [`MemError::NotMapped`],
    /// [`MemError::Denied`]. Nothing is written if the call fails.
    fn write(&mut self, va: usize, data: &[u8]) -> Result<(), MemError>;

    /// Runs `f` on the page at `va` in place (page-aligned; mapped readable and writable, and
    /// touched by nothing else while `f` runs, as a driver's private window page is): a driver
    /// decompresses or reads a page straight into a frame at its window, and compresses or
    /// writes one back from there, with no copy through a buffer. In a domain `f` works on the
    /// memory itself.
    ///
    /// The default reads the page into a buffer, runs `f` on it and writes it back, for
    /// kernels that only copy.
    ///
    /// Errors: [`MemError::BadAddress`] (`va` not page-aligned), and those of `read` and
    /// `write`.
    fn with_page(
        &mut self,
        va: usize,
        f: &mut dyn FnMut(&mut [u8; PAGE_SIZE]),
    ) -> Result<(), MemError> {
        if !va.is_multiple_of(PAGE_SIZE) {
            return Err(MemError::BadAddress);
        }
        let mut page = [0u8; PAGE_SIZE];
        self.read(va, &mut page)?;
        f(&mut page);
        self.write(va, &page)
    }

    /// Copies memory at `va` into `buf` through the domain's mappings (every page touched must
    /// be mapped readable). In a domain this is a plain memory copy.
    ///
    /// Errors: [`MemError::BadAddress`], [`MemError::NotMapped`], [`MemError::Denied`].
    fn read(&mut self, va: usize, buf: &mut [u8]) -> Result<(), MemError>;

    /// The frames the domain holds now: `(guaranteed, optimistic)`.
    fn frames_held(&self) -> (usize, usize);
}

/// Why `bind`, `lock` or `unlock` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverError {
    /// `bind` on a driver that already manages a stretch.
    AlreadyBound,
    /// The driver manages no stretch.
    NotBound,
    /// The stretch is not page-aligned, is empty, wraps, or grants no page right.
    BadStretch,
    /// The address range does not lie inside the stretch.
    OutOfRange,
    /// The frames contract has no frame left for what the call needs.
    OutOfMemory,
    /// The kernel refused a call the driver made.
    Kernel(MemError),
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::AlreadyBound => f.write_str("driver already manages a stretch"),
            DriverError::NotBound => f.write_str("driver manages no stretch"),
            DriverError::BadStretch => f.write_str("stretch is unaligned, empty, or has no rights"),
            DriverError::OutOfRange => f.write_str("address range is not inside the stretch"),
            DriverError::OutOfMemory => f.write_str("out of frames"),
            DriverError::Kernel(e) => write!(f, "kernel refused: {e}"),
        }
    }
}

impl core::error::Error for DriverError {}

/// Why a fault could not be resolved. The faulting thread gets the error; the domain goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultError {
    /// The driver manages no stretch.
    NotBound,
    /// The fault is not in the driver's stretch.
    WrongStretch,
    /// The stretch's rights do not allow the access.
    Denied,
    /// No frame could be found for the page.
    OutOfMemory,
    /// The driver's stretches never fault (a nailed stretch).
    Unexpected,
    /// The kernel refused a call the driver made.
    Kernel(MemError),
    /// The driver's backing store could not give or take the page (a disk error, a full swap
    /// area): the reason. What it stored before is not lost.
    Backing(&'static str),
    /// No frame could be freed: the disk kept failing the write-back of the page at `addr`
    /// (the last of the victims tried, not the faulting page), which stays in memory.
    WriteBack {
        /// The page whose write-back failed.
        addr: usize,
    },
}

impl fmt::Display for FaultError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultError::NotBound => f.write_str("driver manages no stretch"),
            FaultError::WrongStretch => f.write_str("fault is not in the driver's stretch"),
            FaultError::Denied => f.write_str("access not allowed by the stretch's rights"),
            FaultError::OutOfMemory => f.write_str("out of frames"),
            FaultError::Unexpected => f.write_str("fault in a stretch that never faults"),
            FaultError::Kernel(e) => write!(f, "kernel refused: {e}"),
            FaultError::Backing(why) => write!(f, "backing store failed: {why}"),
            FaultError::WriteBack { addr } => write!(
                f,
                "the disk kept failing the write-back of the page at {addr:#x} (kept in memory)"
            ),
        }
    }
}

impl core::error::Error for FaultError {}

/// What a driver has done since it was created (bindings do not reset it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Faults delivered to it.
    pub faults: u64,
    /// Pages it mapped.
    pub maps: u64,
    /// Frames it allocated.
    pub frames_allocated: u64,
    /// Frames it freed (on revocation, unbind, or after a failure).
    pub frames_released: u64,
    /// Faults it failed.
    pub failures: u64,
}

/// A stretch driver: manages the pages of one stretch with its domain's frames. See the crate
/// documentation for the life cycle.
///
/// A driver keeps its stretch, pages and stats in a [`DriverCore`] and lends it through
/// [`StretchDriver::core`] and [`StretchDriver::core_mut`]; it writes `bind` and `fault`, its
/// policy, and the other methods are provided on the core: they suit a driver whose pages,
/// once mapped, stay mapped until `unbind` (on guaranteed frames, which the kernel never asks
/// back) and which keeps nothing besides its core. A driver that gives frames back, or keeps
/// frames or state of its own, overrides those its policy changes.
pub trait StretchDriver {
    /// The driver's core, which the provided methods read.
    fn core(&self) -> &DriverCore;

    /// The driver's core, which the provided methods change.
    fn core_mut(&mut self) -> &mut DriverCore;

    /// Starts managing `stretch`. On failure the driver holds nothing and is still unbound.
    ///
    /// Errors: [`DriverError::AlreadyBound`], [`DriverError::BadStretch`],
    /// [`DriverError::OutOfMemory`], [`DriverError::Kernel`].
    fn bind(&mut self, k: &mut dyn MemoryKernel, stretch: StretchInfo) -> Result<(), DriverError>;

    /// Resolves `fault` by mapping its page with the access allowed, or fails it (the faulting
    /// thread then gets the error). A fault on a page already mapped with the access allowed
    /// is resolved without doing anything (another thread's fault got there first).
    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError>;

    /// Makes the pages of `range` resident on frames that `revoke` never takes, and keeps them
    /// so until `unlock`. Locks do not nest.
    ///
    /// Provided: only checks the range, for a driver whose `revoke` takes no page (a page it
    /// maps stays until `unbind`). A driver that gives pages back overrides it, usually with
    /// [`DriverCore::lock`].
    ///
    /// Errors: [`DriverError::NotBound`], [`DriverError::OutOfRange`],
    /// [`DriverError::OutOfMemory`] (no guaranteed frame for some page; the call then leaves
    /// no page of the range locked that was not locked before), [`DriverError::Kernel`].
    fn lock(&mut self, _k: &mut dyn MemoryKernel, range: Range<usize>) -> Result<(), DriverError> {
        self.core().pages_in(range).map(|_| ())
    }

    /// Lets `revoke` take the pages of `range` again. Pages that were not locked are left
    /// alone.
    ///
    /// Provided: clears the core's lock marks ([`DriverCore::unlock`]).
    ///
    /// Errors: [`DriverError::NotBound`], [`DriverError::OutOfRange`].
    fn unlock(
        &mut self,
        _k: &mut dyn MemoryKernel,
        range: Range<usize>,
    ) -> Result<(), DriverError> {
        self.core_mut().unlock(range, |_| ())
    }

    /// Releases up to `frames_wanted` frames to the kernel, optimistic ones first, never a
    /// locked page's; returns how many were released. The kernel's revocation notice calls
    /// this.
    ///
    /// Provided: releases nothing, for a driver that holds guaranteed frames only (the kernel
    /// asks for optimistic frames back).
    fn revoke(&mut self, _k: &mut dyn MemoryKernel, _frames_wanted: usize) -> usize {
        0
    }

    /// Unmaps every page and frees every frame; the driver is unbound afterwards. Unbinding an
    /// unbound driver does nothing.
    ///
    /// Provided: the core's [`DriverCore::unbind`]; a driver holding frames elsewhere (a pool)
    /// overrides it to free those too.
    fn unbind(&mut self, k: &mut dyn MemoryKernel) {
        self.core_mut().unbind(k);
    }

    /// What the driver has done so far.
    ///
    /// Provided: the core's stats.
    fn stats(&self) -> DriverStats {
        self.core().stats
    }
}

#[cfg(test)]
mod tests;
