//! Tessera's system-call ABI, shared by the kernel and `libtessera`: call numbers, the one error
//! enum, rights, and the user half of the single address space.
//!
//! Calling conventions:
//! - RISC-V: `ecall` with the call number in `a7` and up to six arguments in `a0..a5`. On
//!   return `a0` holds 0 for success or a [`SysError`] code, and `a1` the result value.
//! - x86_64: `syscall` with the call number in `rax` and up to six arguments in `rdi`, `rsi`,
//!   `rdx`, `r10`, `r8`, `r9`. On return `rax` holds 0 or a [`SysError`] code, and `rdx` the
//!   result value; `rcx` and `r11` are clobbered (the instruction keeps the return address and
//!   the flags there), every other register is preserved.
//!
//! Every argument is validated by the kernel; a bad argument yields an error, never a kernel
//! panic. The table of calls, their arguments and their errors is in `docs/syscalls.md`; the
//! saved context and the entry-argument registers of each architecture are in [`arch`].

#![no_std]
#![forbid(unsafe_code)]

use core::sync::atomic::AtomicU64;

pub mod arch;
/// Where a domain's entry point and activation handler find their arguments (the C calling
/// convention's first four integer argument registers; per architecture in [`arch`]). At the
/// entry point they are the domain's identifier, the address and the length of its argument
/// block, and the control block's address; the stack pointer is the top of the domain's stack
/// (16-byte aligned; on x86_64 as after a `call`, 8 below a multiple of 16).
pub use arch::ENTRY_ARGUMENTS;
/// The user context the kernel saves for an activation handler (per architecture in
/// [`arch`]).
pub use arch::SavedContext;

/// System-call numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(usize)]
pub enum Call {
    /// `console_write(ptr, len) -> len`: prints UTF-8 text, tagged with the domain's name.
    ConsoleWrite = 1,
    /// `exit(code) -> !`: ends the calling domain with `code`.
    Exit = 2,
    /// `yield() -> 0`: gives up the rest of this period's slice (and of a turn on slack time).
    Yield = 3,
    /// `time() -> ns`: nanoseconds since boot.
    Time = 4,
    /// `stretch_create(bytes, rights) -> base`: a new nailed stretch owned by the caller.
    StretchCreate = 5,
    /// `stretch_destroy(base) -> 0`: destroys a stretch the caller owns.
    StretchDestroy = 6,
    /// `stretch_rights(base, domain, rights) -> 0`: sets what `domain`'s protection domain may
    /// do with a stretch the caller owns (needs the meta right on it).
    StretchRights = 7,
    /// `null() -> 0`: does nothing; measures the bare system-call path.
    Null = 8,
    /// `event_send(domain, endpoint) -> 0`: increments event endpoint `endpoint` of `domain`,
    /// which must have allowed the caller to send to it (channels from the manifest do).
    EventSend = 9,
    /// `block(deadline_ns) -> 0`: stops running until one of the caller's event endpoints
    /// changes or the clock reaches `deadline_ns` (`u64::MAX`: no deadline). Returns at once
    /// if an endpoint changed since the caller last ran.
    Block = 10,
    /// `activation_set(entry, stack_top) -> 0`: registers the caller's activation handler and
    /// the stack it runs on (`entry` 0 removes it). Activations take effect while
    /// `Dcb::activations` is 1.
    ActivationSet = 11,
    /// `resume(context) -> !`: loads the `SavedContext` at `context` and, in the same step,
    /// turns activations back on. The usual way out of an activation handler.
    Resume = 12,
    /// `timer_alloc() -> endpoint`: a new event endpoint of the caller that only the kernel's
    /// clock signals.
    TimerAlloc = 13,
    /// `timer_set(endpoint, deadline_ns) -> 0`: the kernel signals timer endpoint `endpoint`
    /// once the clock reaches `deadline_ns` (one shot; `u64::MAX` cancels).
    TimerSet = 14,
    /// `stretch_create_managed(bytes, rights) -> base`: a new stretch owned by the caller with
    /// no page mapped, whose pages the caller maps itself with `map` (it binds a stretch
    /// driver to it). Its faults are delivered to the caller's activation handler.
    StretchCreateManaged = 15,
    /// `frame_alloc(kind) -> frame`: a zero-filled frame from the caller's frames contract,
    /// [`frame_kind::GUARANTEED`] or [`frame_kind::OPTIMISTIC`]; the result is its frame number.
    FrameAlloc = 16,
    /// `frame_free(frame) -> 0`: gives back a frame the caller holds and has not mapped.
    FrameFree = 17,
    /// `map(va, frame, rights) -> 0`: maps a frame the caller holds at page `va` of a stretch
    /// it manages.
    Map = 18,
    /// `unmap(va) -> frame`: removes the mapping of page `va` of a stretch the caller manages;
    /// the frame stays the caller's.
    Unmap = 19,
    /// `protect(va, rights) -> 0`: changes the rights of the mapped page `va` of a stretch the
    /// caller manages.
    Protect = 20,
    /// `dma_alloc(bytes) -> base`: a new nailed stretch of physically contiguous, zero-filled
    /// frames from the caller's guarantee, read-write for the caller, for its devices to read
    /// and write. Only a driver domain (one the manifest grants a device) may make one.
    DmaAlloc = 21,
    /// `dma_address(va) -> pa`: the physical address of `va` in a DMA stretch the caller owns,
    /// to give to a device. Only a driver domain may learn it.
    DmaAddress = 22,
    /// `irq_ack(endpoint) -> 0`: the caller has served the device whose interrupt signals its
    /// endpoint `endpoint`; the device may interrupt again.
    IrqAck = 23,
    /// `remap(from, to, rights) -> state`: moves the frame mapped at page `from` of a stretch
    /// the caller manages to the unmapped page `to` of one it manages, with `rights`, in one
    /// step: no thread ever sees the page at both or at neither. Returns `from`'s
    /// [`page_state`] as it left it (mapped, and the hardware's accessed and dirty bits); the
    /// entry at `to` starts with both bits clear. A driver fills a frame through a private
    /// window page and moves it into place (the writes of the fill do not make the page
    /// dirty), and takes a page out of view before it reads it for write-back, learning in the
    /// same step whether it was written.
    Remap = 24,
    /// `map_batch(ops, count) -> 0`: applies `count` (1 to [`MAP_BATCH_MAX`]) [`PageOp`]s read
    /// from the caller's memory at `ops` (8-byte aligned) to pages of stretches the caller
    /// manages, with one TLB flush. Every entry is checked first, against the pages and frames
    /// as they are before the call; if one is refused nothing changes, and the call fails with
    /// that entry's error and its index in the result register (`count` when `ops` or `count`
    /// itself is refused).
    MapBatch = 25,
    /// `page_state(va, count, out, clear) -> 0`: for the `count` (1 to [`MAP_BATCH_MAX`])
    /// consecutive pages from the page-aligned `va`, pages of stretches the caller manages
    /// (mapped or not), writes one byte a page ([`page_state`] bits: mapped, and the hardware's
    /// accessed and dirty bits) to the caller's writable memory at `out`, then clears the bits
    /// `clear` ([`page_state::ACCESSED`], [`page_state::DIRTY`]) in the pages' entries, with
    /// one TLB flush. Every argument is checked first: a refused call changes nothing.
    PageState = 26,
    /// `frame_lend(va, domain, endpoint, access) -> loan`: lends the frame mapped at page `va`
    /// of a stretch the caller manages to driver domain `domain` for one request, naming it
    /// by an endpoint of `domain`'s the caller may signal (a channel's `peer_event`: only a
    /// driver the caller has a channel to can be lent to). `access` ([`loan_access`]) says
    /// what the driver's device does with the frame: with [`loan_access::DEVICE_READS`] the
    /// caller's page stays mapped read-only while the frame is lent; with
    /// [`loan_access::DEVICE_WRITES`] it is taken out of the caller's view (a touch faults to
    /// its handler as any unmapped page does). So the frame is never writable by both. While
    /// lent the page cannot be unmapped, remapped, protected or its stretch destroyed
    /// (`InUse`), nor lent again. Returns the loan's handle (never 0; its upper 32 bits are
    /// the caller's domain identifier). A domain has at most [`MAX_LOANS`] loans out, their
    /// records kernel objects charged to it.
    FrameLend = 27,
    /// `loan_address(loan, lender, len) -> pa`: for the driver domain a frame is lent to, the
    /// device address of the lent frame's first `len` bytes (1 to [`PAGE_SIZE`]), checked
    /// against the loan: the caller must be its borrower and `lender` (the domain the request
    /// came from) its lender. From this call on only the borrower may end the loan.
    LoanAddress = 28,
    /// `frame_return(loan) -> 0`: ends a loan. The borrower returns it once its device is done
    /// with the frame (at the request's completion, before it answers); the lender may take
    /// it back only while the borrower has not asked its address (`InUse` after). The
    /// lender's page gets its mapping and rights back. A loan ended (or never made) is
    /// `NotFound`. If the borrower dies, each loan it holds ends as if returned (its devices
    /// are stopped first); if the lender dies first, the frame is freed only when the loan
    /// ends.
    FrameReturn = 29,
    /// `domain_info(buf, len) -> bytes`: copies the caller's own record ([`DomainInfo`]: its
    /// identifier, its name from the manifest and its memory accounts) to the caller's
    /// writable memory at `buf`, which has room for `len` bytes (at least
    /// [`DomainInfo::SIZE`]); returns the bytes written, [`DomainInfo::SIZE`].
    DomainInfo = 30,
}

impl Call {
    /// Every call, in number order.
    pub const ALL: [Call; 30] = [
        Call::ConsoleWrite,
        Call::Exit,
        Call::Yield,
        Call::Time,
        Call::StretchCreate,
        Call::StretchDestroy,
        Call::StretchRights,
        Call::Null,
        Call::EventSend,
        Call::Block,
        Call::ActivationSet,
        Call::Resume,
        Call::TimerAlloc,
        Call::TimerSet,
        Call::StretchCreateManaged,
        Call::FrameAlloc,
        Call::FrameFree,
        Call::Map,
        Call::Unmap,
        Call::Protect,
        Call::DmaAlloc,
        Call::DmaAddress,
        Call::IrqAck,
        Call::Remap,
        Call::MapBatch,
        Call::PageState,
        Call::FrameLend,
        Call::LoanAddress,
        Call::FrameReturn,
        Call::DomainInfo,
    ];

    /// The call with number `n`.
    #[inline]
    pub fn from_number(n: usize) -> Option<Call> {
        Call::ALL.into_iter().find(|c| *c as usize == n)
    }
}

// ANCHOR: domain_info
/// A domain's own record as `domain_info` copies it: [`DomainInfo::SIZE`] bytes,
/// little-endian, in the order of the fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DomainInfo {
    /// The domain's identifier (its index in the manifest).
    pub id: u32,
    /// How many bytes of `name` hold the name.
    pub name_len: u32,
    /// Its name from the manifest, UTF-8, cut at [`DomainInfo::NAME_MAX`] bytes (at a
    /// character's boundary), zero-padded.
    pub name: [u8; DomainInfo::NAME_MAX],
    /// Frames its contract guarantees.
    pub guaranteed_frames: u64,
    /// Optimistic frames it may hold on top of them.
    pub optimistic_frames: u64,
    /// Frames charged to it now: its stretches, page tables, kernel objects and loose frames.
    pub frames_held: u64,
    /// Page faults delivered to it so far.
    pub faults: u64,
}
// ANCHOR_END: domain_info

impl DomainInfo {
    /// The longest name the record holds, in bytes.
    pub const NAME_MAX: usize = 32;
    /// The record's size in bytes.
    pub const SIZE: usize = 8 + Self::NAME_MAX + 4 * 8;

    /// A record with `name` cut to [`Self::NAME_MAX`] bytes at a character's boundary.
    pub fn new(
        id: u32,
        name: &str,
        guaranteed: u64,
        optimistic: u64,
        held: u64,
        faults: u64,
    ) -> Self {
        let mut len = name.len().min(Self::NAME_MAX);
        while !name.is_char_boundary(len) {
            len -= 1;
        }
        let mut bytes = [0; Self::NAME_MAX];
        bytes[..len].copy_from_slice(&name.as_bytes()[..len]);
        DomainInfo {
            id,
            name_len: len as u32,
            name: bytes,
            guaranteed_frames: guaranteed,
            optimistic_frames: optimistic,
            frames_held: held,
            faults,
        }
    }

    /// The name (empty if the bytes are not a valid name).
    pub fn name(&self) -> &str {
        let len = (self.name_len as usize).min(Self::NAME_MAX);
        core::str::from_utf8(&self.name[..len]).unwrap_or("")
    }

    /// The record as `domain_info` writes it.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0; Self::SIZE];
        b[0..4].copy_from_slice(&self.id.to_le_bytes());
        b[4..8].copy_from_slice(&self.name_len.to_le_bytes());
        b[8..8 + Self::NAME_MAX].copy_from_slice(&self.name);
        let words = [self.guaranteed_frames, self.optimistic_frames, self.frames_held, self.faults];
        for (i, w) in words.iter().enumerate() {
            let at = 8 + Self::NAME_MAX + i * 8;
            b[at..at + 8].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// The record `domain_info` wrote in `b`.
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let word = |i: usize| {
            let at = 8 + Self::NAME_MAX + i * 8;
            u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
        };
        let mut name = [0; Self::NAME_MAX];
        name.copy_from_slice(&b[8..8 + Self::NAME_MAX]);
        DomainInfo {
            id: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            name_len: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            name,
            guaranteed_frames: word(0),
            optimistic_frames: word(1),
            frames_held: word(2),
            faults: word(3),
        }
    }
}

/// Why a system call failed. The numeric values are the ABI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(usize)]
pub enum SysError {
    /// No such system call.
    NoSuchCall = 1,
    /// An argument is out of its allowed range (zero size, unknown rights bits, bad length).
    InvalidArgument = 2,
    /// A pointer argument does not point into memory the caller may access as required.
    BadAddress = 3,
    /// The caller's memory contract (or the machine) has no room.
    NoMemory = 4,
    /// No such object (stretch, domain).
    NotFound = 5,
    /// The object exists but the caller lacks the right.
    PermissionDenied = 6,
    /// The virtual address range for stretches is exhausted.
    NoAddressSpace = 7,
    /// The operation would wait forever: every domain is blocked without a deadline.
    WouldDeadlock = 8,
    /// The page is not mapped.
    NotMapped = 9,
    /// The page is mapped already.
    AlreadyMapped = 10,
    /// The frame is mapped, so it cannot be freed or mapped a second time.
    InUse = 11,
    /// The stretch is not managed by the caller (it is nailed: its pages are mapped by the
    /// kernel).
    NotManaged = 12,
}

impl SysError {
    /// Every error, in number order.
    pub const ALL: [SysError; 12] = [
        SysError::NoSuchCall,
        SysError::InvalidArgument,
        SysError::BadAddress,
        SysError::NoMemory,
        SysError::NotFound,
        SysError::PermissionDenied,
        SysError::NoAddressSpace,
        SysError::WouldDeadlock,
        SysError::NotMapped,
        SysError::AlreadyMapped,
        SysError::InUse,
        SysError::NotManaged,
    ];

    /// The error with code `n` (0 is success, not an error).
    pub fn from_code(n: usize) -> Option<SysError> {
        SysError::ALL.into_iter().find(|e| *e as usize == n)
    }

    /// Its name, as `docs/syscalls.md` writes it.
    pub const fn name(self) -> &'static str {
        match self {
            SysError::NoSuchCall => "NoSuchCall",
            SysError::InvalidArgument => "InvalidArgument",
            SysError::BadAddress => "BadAddress",
            SysError::NoMemory => "NoMemory",
            SysError::NotFound => "NotFound",
            SysError::PermissionDenied => "PermissionDenied",
            SysError::NoAddressSpace => "NoAddressSpace",
            SysError::WouldDeadlock => "WouldDeadlock",
            SysError::NotMapped => "NotMapped",
            SysError::AlreadyMapped => "AlreadyMapped",
            SysError::InUse => "InUse",
            SysError::NotManaged => "NotManaged",
        }
    }
}

/// Rights a protection domain holds on a stretch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Rights(pub u8);

impl Rights {
    /// No access.
    pub const NONE: Rights = Rights(0);
    /// Read.
    pub const READ: Rights = Rights(1);
    /// Write.
    pub const WRITE: Rights = Rights(2);
    /// Execute.
    pub const EXECUTE: Rights = Rights(4);
    /// Change the rights of others on the stretch, destroy it.
    pub const META: Rights = Rights(8);
    /// Every bit a rights value may have.
    pub const ALL_BITS: u8 = 0xf;

    /// Parses the raw bits of a system-call argument, refusing unknown bits.
    pub fn from_bits(bits: usize) -> Option<Rights> {
        (bits <= Self::ALL_BITS as usize).then_some(Rights(bits as u8))
    }
    /// Does `self` include every right in `other`?
    pub const fn contains(self, other: Rights) -> bool {
        self.0 & other.0 == other.0
    }
    /// Both sets together.
    pub const fn union(self, other: Rights) -> Rights {
        Rights(self.0 | other.0)
    }

    /// The rights in `self` that are not in `other`.
    pub const fn difference(self, other: Rights) -> Rights {
        Rights(self.0 & !other.0)
    }
}

/// The kind of access that faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u64)]
pub enum Access {
    /// A load.
    Read = 0,
    /// A store.
    Write = 1,
    /// An instruction fetch.
    Execute = 2,
}

impl Access {
    /// The access with code `n` (as in [`FaultSlot::access`]).
    pub const fn from_code(n: u64) -> Option<Access> {
        match n {
            0 => Some(Access::Read),
            1 => Some(Access::Write),
            2 => Some(Access::Execute),
            _ => None,
        }
    }

    /// Whether a page or stretch with `rights` allows this access (write implies read).
    pub const fn allowed_by(self, rights: Rights) -> bool {
        match self {
            Access::Read => rights.contains(Rights::READ) || rights.contains(Rights::WRITE),
            Access::Write => rights.contains(Rights::WRITE),
            Access::Execute => rights.contains(Rights::EXECUTE),
        }
    }

    /// Its name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Execute => "execute",
        }
    }
}

/// The kinds of frame `frame_alloc` takes from a frames contract.
pub mod frame_kind {
    /// Within the domain's guarantee: always available up to the contract, never revoked.
    pub const GUARANTEED: usize = 0;
    /// From memory nobody uses now, up to the contract's optimistic count; revocable.
    pub const OPTIMISTIC: usize = 1;
}

/// Most entries one `map_batch` takes (bounded kernel work: the kernel copies and checks them
/// all before it changes anything).
pub const MAP_BATCH_MAX: usize = 64;

/// What a [`PageOp`] does (its `op` field).
pub mod page_op {
    /// `map`: maps the loose frame `frame` at `va` with `rights`.
    pub const MAP: u64 = 0;
    /// `unmap`: removes the mapping of `va` (`frame` and `rights` are ignored; the frame stays
    /// the caller's, and the kernel does not write it back into the entry).
    pub const UNMAP: u64 = 1;
    /// `protect`: changes the rights of the mapped page `va` to `rights` (`frame` is ignored).
    pub const PROTECT: u64 = 2;
}

/// One entry of a `map_batch` call: a `map`, `unmap` or `protect` of one page of a managed
/// stretch, with the arguments the single call takes. 32 bytes, in the caller's memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PageOp {
    /// [`page_op::MAP`], [`page_op::UNMAP`] or [`page_op::PROTECT`].
    pub op: u64,
    /// The page (page-aligned).
    pub va: u64,
    /// For a map, the frame number (as `frame_alloc` returned it).
    pub frame: u64,
    /// For a map or protect, the page rights ([`Rights`] bits).
    pub rights: u64,
}

impl PageOp {
    /// Its size in words, as the kernel copies it.
    pub const WORDS: usize = 4;

    /// Maps frame number `frame` at `va` with `rights`.
    pub const fn map(va: usize, frame: usize, rights: Rights) -> PageOp {
        PageOp { op: page_op::MAP, va: va as u64, frame: frame as u64, rights: rights.0 as u64 }
    }

    /// Unmaps `va`.
    pub const fn unmap(va: usize) -> PageOp {
        PageOp { op: page_op::UNMAP, va: va as u64, frame: 0, rights: 0 }
    }

    /// Changes the rights of the mapped page `va` to `rights`.
    pub const fn protect(va: usize, rights: Rights) -> PageOp {
        PageOp { op: page_op::PROTECT, va: va as u64, frame: 0, rights: rights.0 as u64 }
    }

    /// The entry from its words, in field order.
    pub const fn from_words(w: [u64; 4]) -> PageOp {
        PageOp { op: w[0], va: w[1], frame: w[2], rights: w[3] }
    }
}

/// Bits of a page's state, as `page_state` reports them (one byte a page).
pub mod page_state {
    /// A frame is mapped at the page (the other bits are clear when it is not).
    pub const MAPPED: u8 = 1;
    /// The hardware's accessed bit: the page was read, written or executed since it was mapped
    /// or the bit was last cleared.
    pub const ACCESSED: u8 = 2;
    /// The hardware's dirty bit: the page was written since it was mapped or the bit was last
    /// cleared.
    pub const DIRTY: u8 = 4;
    /// The bits `page_state` may clear.
    pub const CLEARABLE: u8 = ACCESSED | DIRTY;
}

/// What a lent frame's borrower does with it ([`Call::FrameLend`]'s `access`).
pub mod loan_access {
    /// The borrower's device reads the frame (a disk write, a network send): the lender's
    /// page is read-only while it is lent.
    pub const DEVICE_READS: usize = 0;
    /// The borrower's device writes the frame (a disk read): the lender's page is out of its
    /// view while it is lent.
    pub const DEVICE_WRITES: usize = 1;
}

/// Most loans one domain has out at once ([`Call::FrameLend`]).
pub const MAX_LOANS: usize = 16;

/// The identifier of the domain that made `loan` (its upper 32 bits): a driver checks a
/// request's loan came from the client that sent it before it asks the kernel its address.
pub const fn loan_lender(loan: u64) -> u32 {
    (loan >> 32) as u32
}

/// Event endpoints per domain.
pub const MAX_EVENTS: usize = 32;
/// IO channels a domain can be an end of.
pub const MAX_CHANNELS: usize = 16;
/// Devices a driver domain may be granted.
pub const MAX_DEVICES: usize = 4;
/// Register windows of one granted device.
pub const MAX_WINDOWS: usize = 6;

/// What a granted device is, in [`DeviceSlot::kind`].
pub mod device_kind {
    /// An empty slot.
    pub const NONE: u64 = 0;
    /// A device-tree node (RISC-V `virt`'s virtio-mmio devices).
    pub const NODE: u64 = 1;
    /// A PCI function.
    pub const PCI: u64 = 2;
}

/// How a granted device's interrupt reaches its driver, in [`DeviceSlot::interrupt`].
pub mod interrupt_kind {
    /// No interrupt.
    pub const NONE: u64 = 0;
    /// A line of the platform's interrupt controller (RISC-V: a PLIC source).
    pub const LINE: u64 = 1;
    /// PCI MSI.
    pub const MSI: u64 = 2;
    /// PCI MSI-X: every entry of the table (which stays the kernel's) sends the same message.
    pub const MSIX: u64 = 3;
}

/// One register window of a granted device, mapped into its driver domain (uncached).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceWindow {
    /// Where it is mapped in the domain (0: no window).
    pub base: u64,
    /// Its length in bytes (whole pages).
    pub len: u64,
    /// The BAR it is (PCI), or the index of the node's `reg` entry.
    pub index: u64,
    /// Its physical address (what the device's configuration space says).
    pub phys: u64,
}

/// A device the manifest grants the domain, described by the kernel in its control block in
/// the order of the domain's `devices`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceSlot {
    /// [`device_kind`].
    pub kind: u64,
    /// PCI: vendor id << 16 | device id.
    pub pci_id: u64,
    /// PCI: bus << 16 | device << 8 | function.
    pub pci_location: u64,
    /// PCI: class << 16 | subclass << 8 | programming interface.
    pub pci_class: u64,
    /// PCI: the function's configuration space (4 KiB), mapped read-only (0: none).
    pub config: u64,
    /// [`interrupt_kind`].
    pub interrupt: u64,
    /// The endpoint (index into [`Dcb::events`]) its interrupt signals; `irq_ack` it once
    /// the device is served.
    pub event: u64,
    /// PCI MSI-X: the BAR that holds the table (not mapped: the kernel's).
    pub msix_bar: u64,
    /// Its register windows.
    pub windows: [DeviceWindow; MAX_WINDOWS],
    /// A disk: the mechanical model its driver times its requests by ([`disk_model`]).
    pub model: u64,
}

/// The mechanical disk models a manifest may put on a disk ([`DeviceSlot::model`]).
pub mod disk_model {
    /// None: requests complete when the device completes them.
    pub const NONE: u64 = 0;
    /// The IBM Deskstar 34GXP.
    pub const DESKSTAR_34GXP: u64 = 1;
    /// The Seagate Cheetah X15.
    pub const CHEETAH_15K: u64 = 2;
}

/// One event endpoint as the domain sees it in its control block. The kernel writes it; the
/// domain reads it.
#[repr(C)]
#[derive(Debug, Default)]
pub struct EventSlot {
    /// How many times the endpoint has been signalled.
    pub value: AtomicU64,
    /// Non-zero once the only domain allowed to signal it has died: no more increments will
    /// come.
    pub closed: AtomicU64,
}

/// Which end of an IO channel a domain holds.
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelRole {
    /// The slot is unused.
    None = 0,
    /// This domain writes messages.
    Sender = 1,
    /// This domain reads messages.
    Receiver = 2,
}

/// One IO channel end, described in the control block by the kernel at domain creation.
///
/// The channel's memory is a nailed stretch shared read-write by both ends: a 64-byte header
/// (`head: u64` written by the sender, then at offset 8 `tail: u64` written by the receiver)
/// followed by `slots` slots of `slot_size` bytes. Message `n` lives in slot `n % slots`; the
/// sender may write while `head - tail < slots`. After publishing (bumping `head`) the sender
/// signals the receiver's `data_event`; after consuming (bumping `tail`) the receiver signals
/// the sender's `space_event`. Each end waits on its own endpoint, `local_event`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ChannelSlot {
    /// `ChannelRole` as a number.
    pub role: u16,
    /// This end's event endpoint (index into `Dcb::events`), signalled by the peer.
    pub local_event: u16,
    /// The peer's endpoint this end signals.
    pub peer_event: u16,
    /// Bytes per slot (a multiple of 8, at most 4096).
    pub slot_size: u16,
    /// Number of slots (a power of two).
    pub slots: u32,
    /// The peer domain.
    pub peer_domain: u32,
    /// The channel's name from the manifest, NUL-padded.
    pub name: [u8; 32],
    /// The shared stretch's base address.
    pub base: u64,
    /// The peer domain's disk-time contract from its manifest (`disk = { ... }`), for a block
    /// driver serving it a stream; `period_ns` 0 when it has none.
    pub peer_disk: StreamContract,
    /// The peer domain's link-time contract from its manifest (`net = { ... }`), for a
    /// network driver serving it a transmit stream; `period_ns` 0 when it has none.
    pub peer_net: StreamContract,
}

/// A disk-time or link-time contract as the kernel passes it in a [`ChannelSlot`]: in every
/// `period_ns` the stream is guaranteed `slice_ns` of disk (or link) time; with `extra`
/// non-zero it may also use the slack; `latency_ns` is how soon it should be served once it
/// has a request. All zero: no contract.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamContract {
    /// The period, in nanoseconds (0: no contract).
    pub period_ns: u64,
    /// The disk time guaranteed in each period, in nanoseconds.
    pub slice_ns: u64,
    /// The latency hint, in nanoseconds.
    pub latency_ns: u64,
    /// Non-zero if the stream may use slack time.
    pub extra: u64,
}

/// Size of the channel header at the start of a channel's stretch.
pub const CHANNEL_HEADER: usize = 64;

/// Why the activation handler runs (bits of its first argument).
pub mod activation {
    /// The domain is being given the CPU again after it was preempted or yielded.
    pub const SCHEDULED: u64 = 1;
    /// One of its event endpoints changed since it last ran.
    pub const EVENT: u64 = 2;
    /// A thread touched a page of a stretch the domain manages that is not mapped (or is
    /// mapped without the access): [`Dcb::fault`](super::Dcb::fault) says where. `saved` is
    /// the faulting context, to be resumed once the page is mapped.
    pub const FAULT: u64 = 4;
    /// The kernel asks for optimistic frames back: see
    /// [`Dcb::revocation`](super::Dcb::revocation).
    pub const REVOKE: u64 = 8;
}

/// The last page fault delivered to the domain (written by the kernel before it enters the
/// activation handler with [`activation::FAULT`]).
#[repr(C)]
#[derive(Debug, Default)]
pub struct FaultSlot {
    /// The faulting address.
    pub addr: AtomicU64,
    /// [`Access`] as a number.
    pub access: AtomicU64,
    /// The base of the managed stretch the address lies in.
    pub stretch: AtomicU64,
    /// The faulting instruction's address.
    pub pc: AtomicU64,
    /// Faults delivered so far.
    pub count: AtomicU64,
}

/// A revocation notice (written by the kernel, which then wakes the domain and enters its
/// activation handler with [`activation::REVOKE`]).
///
/// The domain must release `frames_wanted` optimistic frames (unmap them and `frame_free`
/// them) before the clock reaches `deadline_ns`, three of its CPU periods after the notice.
/// The kernel counts the frames as they come back and clears `frames_wanted` to 0 when the
/// notice is satisfied. A domain that has not complied by the deadline loses its frames by
/// force and is terminated. The protocol is documented in `docs/memory.md`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct RevocationSlot {
    /// Optimistic frames still to release (0: no notice outstanding).
    pub frames_wanted: AtomicU64,
    /// When the notice expires.
    pub deadline_ns: AtomicU64,
    /// Notices received so far.
    pub notices: AtomicU64,
}

/// A domain's frames contract (from its manifest) and what it holds, in its control block.
/// The kernel updates the counts on every frame the domain takes or gives back.
#[repr(C)]
#[derive(Debug, Default)]
pub struct FramesAccount {
    /// Frames the domain may always hold: stretches, loose frames and its page tables.
    pub guaranteed: AtomicU64,
    /// Optimistic frames it may hold on top.
    pub optimistic: AtomicU64,
    /// Frames it holds within its guarantee (stretches, loose frames, page tables, the
    /// kernel's records of its managed stretches).
    pub guaranteed_held: AtomicU64,
    /// Optimistic frames it holds now.
    pub optimistic_held: AtomicU64,
    /// Page faults the kernel delivered to it.
    pub faults: AtomicU64,
}

/// The domain control block: one page shared between the kernel and the domain (a stretch
/// mapped read-write in the domain; its address arrives as the fourth argument at the entry
/// point, see [`ENTRY_ARGUMENTS`]).
///
/// Activations: while `activations` is 1 and a handler is registered, the kernel does not
/// resume the domain where it stopped: it stores that context in `saved`, sets `activations`
/// to 0 and enters the handler with two arguments (the reason bits from [`activation`], then
/// this block's address; in the registers [`ENTRY_ARGUMENTS`] names) on the handler's stack. While `activations` is 0 the domain is resumed where
/// it stopped. The handler leaves with the `resume` call, which turns activations on again.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Dcb {
    /// The domain's identifier.
    pub domain_id: u64,
    /// How many times the domain blocked and was woken (by an event or a deadline).
    pub wakeups: AtomicU64,
    /// 1 while activations are on (written by the domain and by the kernel).
    pub activations: AtomicU64,
    /// How many times the kernel entered the activation handler.
    pub upcalls: AtomicU64,
    /// The context interrupted by the last activation.
    pub saved: SavedContext,
    /// The event endpoints.
    pub events: [EventSlot; MAX_EVENTS],
    /// The IO channels this domain is an end of.
    pub channels: [ChannelSlot; MAX_CHANNELS],
    /// Ticks per second of the clock the domain reads directly (RISC-V: the `time` CSR, which
    /// the kernel lets user mode read; x86_64: the time-stamp counter). Written once, before
    /// the domain runs.
    pub timebase_hz: u64,
    /// The domain's CPU contract and what it has received.
    pub cpu: CpuAccount,
    /// The last page fault delivered.
    pub fault: FaultSlot,
    /// The outstanding revocation notice, if any.
    pub revocation: RevocationSlot,
    /// The frames contract and holdings.
    pub frames: FramesAccount,
    /// The devices the manifest grants the domain (a driver domain), in the order of its
    /// `devices`.
    pub devices: [DeviceSlot; MAX_DEVICES],
    /// When the kernel last signalled each granted device's interrupt endpoint
    /// (`devices[i].event`), in nanoseconds since boot: a driver woken by it measures its
    /// wake-up latency by its own clock.
    pub interrupt_ns: [AtomicU64; MAX_DEVICES],
    /// Written by the driver domain: non-zero while it has requests at granted device `i` whose
    /// completion it times by a disk model ([`DeviceSlot::model`]). While one is and nothing can
    /// run, the kernel idles with no timer armed, so that under `-icount` virtual time stands
    /// still while the host does the device's work, and the model alone sets the disk's time.
    pub device_busy: [AtomicU64; MAX_DEVICES],
    /// Non-zero when the kernel was booted with `trace=sched` (`cargo xtask run --trace`): the
    /// domain may print trace records of its own (a block driver prints its disk's requests and
    /// its scheduler's waits). Written once, before the domain runs.
    pub trace: u64,
}

/// A domain's CPU contract (from its manifest) and its accounts, in its control block.
///
/// The kernel writes the contract before the domain runs and the accounts every time the
/// scheduler dispatches the domain, so while it runs they are as of its last dispatch. Times
/// are nanoseconds (since boot for instants).
#[repr(C)]
#[derive(Debug, Default)]
pub struct CpuAccount {
    /// The contract's period.
    pub period_ns: AtomicU64,
    /// The contract's slice: CPU time guaranteed in each period.
    pub slice_ns: AtomicU64,
    /// The contract's latency hint.
    pub latency_ns: AtomicU64,
    /// 1 if the domain may run in slack time beyond its slice.
    pub extra: AtomicU64,
    /// When its current period started.
    pub period_start_ns: AtomicU64,
    /// CPU time it used on its slices.
    pub guaranteed_ns: AtomicU64,
    /// CPU time it used in slack time.
    pub extra_ns: AtomicU64,
    /// Periods completed.
    pub periods: AtomicU64,
    /// Periods that ended while it could run and still had slice left.
    pub deadlines_missed: AtomicU64,
}

/// The page size of every architecture Tessera supports.
pub const PAGE_SIZE: usize = 4096;

/// The lower (user) half of the single address space on RISC-V Sv39: domains' images, stacks
/// and stretches live in `[USER_BASE, USER_END)`.
pub const USER_BASE: usize = 0x0000_0001_0000_0000;
/// One past the last user address.
pub const USER_END: usize = 0x0000_0040_0000_0000;
/// Where xtask places domain images: instance `i` at `IMAGE_BASE + i * IMAGE_SLOT`.
pub const IMAGE_BASE: usize = USER_BASE;
/// The address-space slot reserved for each domain image (16 MiB, a multiple of the 2 MiB that
/// one last-level page table spans on both architectures, so no two images share one): the
/// image region `[IMAGE_BASE, STRETCH_BASE)` holds 7,936 of them.
pub const IMAGE_SLOT: usize = 0x100_0000;
/// Where the kernel allocates stacks and stretches created at run time.
pub const STRETCH_BASE: usize = 0x0000_0020_0000_0000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        for c in Call::ALL {
            assert_eq!(Call::from_number(c as usize), Some(c));
        }
        assert_eq!(Call::from_number(0), None);
        assert_eq!(Call::from_number(usize::MAX), None);
        for e in SysError::ALL {
            assert_eq!(SysError::from_code(e as usize), Some(e));
        }
        assert_eq!(SysError::from_code(0), None);
    }

    #[test]
    fn a_domain_record_round_trips_and_cuts_its_name_at_a_character() {
        let r = DomainInfo::new(3, "gold", 128, 16, 40, 7);
        assert_eq!(DomainInfo::SIZE, 72);
        assert_eq!(DomainInfo::from_bytes(&r.to_bytes()), r);
        assert_eq!(r.name(), "gold");
        assert_eq!(&r.to_bytes()[..12], &[3, 0, 0, 0, 4, 0, 0, 0, b'g', b'o', b'l', b'd']);
        // 31 ASCII bytes and a two-byte character: the character does not fit.
        let long = "a".repeat(31) + "é";
        assert_eq!(DomainInfo::new(0, &long, 0, 0, 0, 0).name(), "a".repeat(31));
    }

    #[test]
    fn rights_refuse_unknown_bits() {
        assert_eq!(Rights::from_bits(0xf), Some(Rights(0xf)));
        assert_eq!(Rights::from_bits(0x10), None);
        assert!(Rights(3).contains(Rights::READ));
        assert!(!Rights::READ.contains(Rights::WRITE));
        assert_eq!(Rights::READ.union(Rights::WRITE), Rights(3));
    }

    #[test]
    fn the_control_block_fits_a_page() {
        assert!(core::mem::size_of::<Dcb>() <= PAGE_SIZE);
        assert_eq!(core::mem::size_of::<EventSlot>(), 16);
        assert_eq!(core::mem::size_of::<PageOp>(), PageOp::WORDS * 8);
    }

    #[test]
    fn layout_is_ordered() {
        const { assert!(USER_BASE < STRETCH_BASE && STRETCH_BASE < USER_END) };
        // The image slots hold the most domains a manifest may declare (1,024).
        const { assert!(IMAGE_BASE + 1024 * IMAGE_SLOT <= STRETCH_BASE) };
        const { assert!(IMAGE_SLOT.is_multiple_of(2 << 20)) };
    }
}
