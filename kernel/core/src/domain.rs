//! One domain's record ([`Domain`]), its identifier ([`DomainId`]), and the records the kernel
//! keeps for it: its event endpoints ([`Endpoint`]), the revocation notice it has to answer
//! ([`Revocation`]) and the kernel work under way for it ([`Job`]). Only the types live here;
//! what the kernel does with them lives with the operations ([`crate::events`],
//! [`crate::paging`], [`crate::jobs`]) and the owner of every record is [`crate::domains`].
//!
//! A domain's identifier is its index in the manifest, in [`crate::Domains`] and in the
//! scheduler's clients, and its frame-owner id. Inside the core a domain is named only by a
//! [`DomainId`]: one is made when a domain is added ([`crate::Domains::push`]), by the scheduler
//! for the clients it picks (its clients are the domains, by index), and from a raw number that
//! comes from user space ([`crate::Domains::id`], checked against the table, at system-call
//! dispatch). A `DomainId` is never out of range of the [`crate::Domains`] that made it (domains
//! are never removed: a dead domain keeps its record), so indexing by one cannot fail; whether
//! the domain is alive is a separate question ([`crate::Domains::live`]). On the wire (the
//! system-call ABI, the control block, the log's records, the frame allocator's owners) a domain
//! is still its `u32`.

use abi::{Rights, SysError};
use frame_allocator::{Frame, Owner};

use crate::Ending;
use crate::address::AddressQuota;
use crate::contract::UserContextOps as _;
use crate::platform::{ArenaVec, Platform};

/// The largest identifier: a frame owner and a loose frame's record name it.
pub(crate) const MAX_ID: u32 = crate::loose::MAX_OWNER;

// `DomainId::index` widens with the sign.
const _: () = assert!(MAX_ID < 1 << 31);

/// A domain's identifier, for a domain that exists (alive or dead) in the [`Domains`] that
/// made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DomainId(u32);

impl DomainId {
    /// The identifier at `index` of the table (the table's and the scheduler's own indices,
    /// which are domains by construction).
    #[inline(always)]
    pub(crate) const fn from_index(index: usize) -> Self {
        DomainId(index as u32)
    }

    /// Its index in [`Domains`], in the stretch tables and among the scheduler's clients.
    ///
    /// Identifiers are at most [`crate::loose::MAX_OWNER`] (below 2^31), so widening the
    /// number with its sign gives the same index as without. It is widened so: RISC-V's calling
    /// convention passes a `u32` sign-extended, and one register then serves both as the index
    /// and as the argument of the calls the system-call path makes, where the two forms would
    /// cost a register and an instruction on every system call.
    #[inline(always)]
    pub const fn index(self) -> usize {
        self.0 as i32 as usize
    }

    /// The number on the wire: the system-call ABI, the control block, the log.
    #[inline(always)]
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// The frame allocator's owner for its frames.
    #[inline(always)]
    pub const fn owner(self) -> Owner {
        Owner::Domain(self.0)
    }
}

/// One domain; see [`DomainId`] for its identifier.
pub struct Domain<P: Platform> {
    /// Name from the manifest.
    pub name: alloc::string::String,
    /// Its registers: saved here by the trap path when it enters the kernel, and resumed from
    /// here (boxed, so that the address the trap path holds never moves).
    pub(crate) ctx: alloc::boxed::Box<P::Context>,
    /// Saved floating-point registers.
    pub(crate) fp: P::Fp,
    /// Its protection domain; `None` once it is dead.
    pub(crate) space: Option<P::Space>,
    /// Frames it may hold at most (stretches and page tables).
    pub(crate) guaranteed_frames: u64,
    /// `None` while alive.
    pub ending: Option<Ending>,
    /// While blocked: the deadline in timer ticks (`u64::MAX`: none).
    pub(crate) blocked: Option<u64>,
    /// An endpoint changed since the domain last returned from `block`.
    pub(crate) pending: bool,
    /// Its event endpoints (in its arena).
    pub(crate) endpoints: ArenaVec<Endpoint, P::Arena>,
    /// The frame of its control block.
    pub(crate) dcb: Option<frame_allocator::Frame>,
    /// The control block's address in the domain.
    pub(crate) dcb_va: usize,
    /// The activation handler's entry and stack top, if registered.
    pub(crate) handler: Option<(usize, usize)>,
    /// Optimistic frames it may hold on top of its guarantee.
    pub(crate) optimistic_frames: u64,
    /// How many loose frames (`frame_alloc`, recorded in [`crate::loose`]) it holds.
    pub(crate) loose_held: u64,
    /// How many of its loose frames are optimistic.
    pub(crate) optimistic_held: u64,
    /// Its disk-time contract `(period, slice)` in ns, if the manifest gives it one: a
    /// revocation notice then leaves it the disk time to write back what it releases.
    pub(crate) disk: Option<(u64, u64)>,
    /// The allocator of the kernel objects made for it, on its arena of frames charged to it
    /// (see [`crate::kmem`]).
    pub(crate) arena: P::Arena,
    /// Page faults delivered to it.
    pub(crate) faults: u64,
    /// With `trace=sched`: the fault its activation handler is serving, `(address, access,
    /// when it was delivered in ns)`, logged as a `fault served` record when the handler
    /// resumes (see [`crate::paging`]).
    pub(crate) fault_open: Option<(usize, u8, u64)>,
    /// The revocation notice it has to answer, if any.
    pub(crate) revocation: Option<Revocation>,
    /// Blocked in a system call that needs memory a revocation is freeing; the call runs
    /// again when it is woken.
    pub(crate) waiting_for_frames: bool,
    /// Its share of the stretch region.
    pub(crate) address: AddressQuota,
    /// Kernel work under way for it, run in chunks on its CPU time (see [`crate::jobs`]).
    pub(crate) job: Option<Job>,
    /// A driver domain: the manifest grants it devices (see [`crate::device`]).
    pub(crate) driver: bool,
    /// The frames it lent, by slot (in its arena; see [`crate::loans`]).
    pub(crate) loans: ArenaVec<Option<Loan>, P::Arena>,
    /// How many of `loans` are out.
    pub(crate) loans_out: u64,
    /// The serial number of its last loan.
    pub(crate) loan_serial: u32,
    /// How many loans it holds as a borrower.
    pub(crate) borrowed: u64,
}

impl<P: Platform> Domain<P> {
    /// A live domain called `name` with protection domain `space`, allowed `guaranteed_frames`
    /// frames, its kernel objects in `arena`; its context, control block and endpoints are
    /// filled in by the loader.
    pub(crate) fn new(
        name: &str,
        space: P::Space,
        guaranteed_frames: u64,
        optimistic_frames: u64,
        address: AddressQuota,
        arena: P::Arena,
    ) -> Self {
        Domain {
            name: name.into(),
            ctx: alloc::boxed::Box::new(P::Context::new_user(0, 0, [0; 4])),
            fp: P::Fp::default(),
            space: Some(space),
            guaranteed_frames,
            ending: None,
            blocked: None,
            pending: false,
            endpoints: ArenaVec::new_in(arena),
            dcb: None,
            dcb_va: 0,
            handler: None,
            optimistic_frames,
            loose_held: 0,
            optimistic_held: 0,
            disk: None,
            arena,
            faults: 0,
            fault_open: None,
            revocation: None,
            waiting_for_frames: false,
            address,
            job: None,
            driver: false,
            loans: ArenaVec::new_in(arena),
            loans_out: 0,
            loan_serial: 0,
            borrowed: 0,
        }
    }

    /// Whether it is alive (it has not exited nor been terminated).
    #[inline(always)]
    pub fn is_alive(&self) -> bool {
        self.ending.is_none()
    }
}

/// The `sender` of endpoints only the kernel signals (timers).
pub const KERNEL: u32 = u32::MAX;

/// Bytes of one endpoint's record, in its owner's arena (see `kmem`).
pub const ENDPOINT_RECORD: usize = core::mem::size_of::<Endpoint>();

// The cost `docs/memory.md` gives (its table of kernel objects).
const _: () = assert!(ENDPOINT_RECORD == 24);

/// Kernel-side state of one endpoint (its value lives in the control block).
pub struct Endpoint {
    /// The only domain that may signal it, or [`KERNEL`].
    pub sender: u32,
    /// Its sender died.
    pub closed: bool,
    /// For a timer endpoint: when the kernel signals it next (timer ticks).
    pub deadline: Option<u64>,
}

/// An outstanding revocation notice.
pub struct Revocation {
    /// Optimistic frames asked for.
    pub wanted: u64,
    /// The notice is satisfied once the domain holds at most this many optimistic frames.
    pub goal: u64,
    /// When it was sent (ns since boot).
    pub sent_ns: u64,
    /// When it expires (ns since boot).
    pub deadline_ns: u64,
    /// The first timer tick at or after the deadline: the domain's instant, at which
    /// `World::enforce_revocation` finds the deadline passed on any clock.
    pub deadline_ticks: u64,
}

/// Kernel work under way for a domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    /// `stretch_create`: frames for the pages of the stretch at `base` from page `done` on; the
    /// call returns `base`.
    Fill {
        /// The stretch.
        base: usize,
        /// Pages filled so far.
        done: usize,
    },
    /// `stretch_destroy` (or a fill that failed): the pages of the stretch at `base` go, from
    /// page `left` down; the call returns `result`.
    Empty {
        /// The stretch.
        base: usize,
        /// Pages not yet looked at (those from `left` on are gone).
        left: usize,
        /// What the call returns when the stretch is gone.
        result: Result<usize, SysError>,
    },
    /// The domain is dead: its rights, stretches and loose frames go back; `emptying` is the
    /// stretch (base, pages left) being emptied.
    Teardown {
        /// The stretch being emptied, if any.
        emptying: Option<(usize, usize)>,
        /// The word of the table of loose frames where the search for its loose frames goes
        /// on (they go last).
        loose_from: usize,
    },
}

/// One frame lent, in its lender's table of loans (the loans themselves: [`crate::loans`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loan {
    /// Its serial number among the lender's loans (part of the handle).
    pub serial: u32,
    /// The driver domain it is lent to.
    pub borrower: DomainId,
    /// The frame.
    pub frame: Frame,
    /// The lender's page it was mapped at.
    pub va: usize,
    /// The page's rights before the loan, restored when it ends.
    pub rights: Rights,
    /// The borrower's device writes it (the page left the lender's view).
    pub device_writes: bool,
    /// The borrower asked its address: only the borrower may end it now.
    pub taken: bool,
    /// The lender died: the frame is no longer at its page, and is freed when the loan ends.
    pub orphaned: bool,
}
