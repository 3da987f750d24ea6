//! What the fuzzer tests against: the (call, error) pairs of the table in `docs/syscalls.md`,
//! the pairs it does not expect to observe (and why), and the names it prints.

use abi::{Call, SysError};

/// Number of calls in the ABI.
pub const CALLS: usize = Call::ALL.len();
/// Kinds of fuzzed call: every `abi::Call` (by its index in `Call::ALL`) plus unknown numbers.
pub const KINDS: usize = CALLS + 1;
/// The kind index of unknown call numbers.
pub const UNKNOWN: usize = CALLS;
/// Outcomes: index 0 is `Ok`, index `e as usize` is error `e` (codes are 1..=12).
pub const OUTCOMES: usize = SysError::ALL.len() + 1;

/// Longest `console_write` (`docs/syscalls.md`: "len > 1024").
pub const CONSOLE_MAX: usize = 1024;
/// Largest `stretch_create` (`docs/syscalls.md`: "bytes 0 or over 64 MiB").
pub const STRETCH_MAX: usize = 64 << 20;

/// A documented pair: `None` stands for an unknown call number.
pub type Pair = (Option<Call>, SysError);

/// The `errors` column of the call table in `docs/syscalls.md`, plus its line "An unknown call
/// number returns `NoSuchCall`". Calls whose cell says "none" (`exit`, `yield`, `time`,
/// `null`) contribute no pair. A call added to `abi::Call` needs its name in [`kind_name`]
/// (the match is exhaustive) and its errors here, or the fuzzer reports them undocumented.
pub const DOCUMENTED: &[Pair] = {
    use Call::*;
    use SysError::*;
    &[
        (Some(ConsoleWrite), InvalidArgument),
        (Some(ConsoleWrite), BadAddress),
        (Some(StretchCreate), InvalidArgument),
        (Some(StretchCreate), NoMemory),
        (Some(StretchCreate), NoAddressSpace),
        (Some(StretchDestroy), NotFound),
        (Some(StretchDestroy), PermissionDenied),
        (Some(StretchDestroy), InUse),
        (Some(StretchRights), InvalidArgument),
        (Some(StretchRights), NotFound),
        (Some(StretchRights), PermissionDenied),
        (Some(StretchRights), NoMemory),
        (Some(EventSend), NotFound),
        (Some(EventSend), InvalidArgument),
        (Some(EventSend), PermissionDenied),
        (Some(Block), WouldDeadlock),
        (Some(ActivationSet), InvalidArgument),
        (Some(ActivationSet), BadAddress),
        (Some(Resume), InvalidArgument),
        (Some(Resume), BadAddress),
        (Some(TimerAlloc), NoMemory),
        (Some(TimerSet), NotFound),
        (Some(TimerSet), PermissionDenied),
        (Some(StretchCreateManaged), InvalidArgument),
        (Some(StretchCreateManaged), NoMemory),
        (Some(StretchCreateManaged), NoAddressSpace),
        (Some(FrameAlloc), InvalidArgument),
        (Some(FrameAlloc), NoMemory),
        (Some(FrameFree), NotFound),
        (Some(FrameFree), InUse),
        (Some(Map), InvalidArgument),
        (Some(Map), BadAddress),
        (Some(Map), NotManaged),
        (Some(Map), PermissionDenied),
        (Some(Map), NotFound),
        (Some(Map), InUse),
        (Some(Map), AlreadyMapped),
        (Some(Map), NoMemory),
        (Some(Unmap), InvalidArgument),
        (Some(Unmap), BadAddress),
        (Some(Unmap), NotManaged),
        (Some(Unmap), NotMapped),
        (Some(Unmap), InUse),
        (Some(Protect), InvalidArgument),
        (Some(Protect), BadAddress),
        (Some(Protect), NotManaged),
        (Some(Protect), PermissionDenied),
        (Some(Protect), NotMapped),
        (Some(Protect), InUse),
        (Some(Remap), InvalidArgument),
        (Some(Remap), BadAddress),
        (Some(Remap), NotManaged),
        (Some(Remap), PermissionDenied),
        (Some(Remap), NotMapped),
        (Some(Remap), AlreadyMapped),
        (Some(Remap), NoMemory),
        (Some(Remap), InUse),
        (Some(MapBatch), InvalidArgument),
        (Some(MapBatch), BadAddress),
        (Some(MapBatch), NotManaged),
        (Some(MapBatch), PermissionDenied),
        (Some(MapBatch), NotFound),
        (Some(MapBatch), InUse),
        (Some(MapBatch), AlreadyMapped),
        (Some(MapBatch), NotMapped),
        (Some(MapBatch), NoMemory),
        (Some(PageState), InvalidArgument),
        (Some(PageState), BadAddress),
        (Some(PageState), NotManaged),
        (Some(DomainInfo), InvalidArgument),
        (Some(DomainInfo), BadAddress),
        (Some(FrameLend), InvalidArgument),
        (Some(FrameLend), NotFound),
        (Some(FrameLend), PermissionDenied),
        (Some(FrameLend), BadAddress),
        (Some(FrameLend), NotManaged),
        (Some(FrameLend), NotMapped),
        (Some(FrameLend), InUse),
        (Some(FrameLend), NoMemory),
        (Some(LoanAddress), NotFound),
        (Some(LoanAddress), PermissionDenied),
        (Some(LoanAddress), InvalidArgument),
        (Some(FrameReturn), NotFound),
        (Some(FrameReturn), InUse),
        (Some(DmaAlloc), PermissionDenied),
        (Some(DmaAlloc), InvalidArgument),
        (Some(DmaAlloc), NoMemory),
        (Some(DmaAlloc), NoAddressSpace),
        (Some(DmaAddress), PermissionDenied),
        (Some(DmaAddress), NotFound),
        (Some(DmaAddress), InvalidArgument),
        (Some(IrqAck), NotFound),
        (Some(IrqAck), PermissionDenied),
        (None, NoSuchCall),
    ]
};

/// Documented pairs the fuzzer does not expect to observe, each with the reason (the crate
/// documentation explains them at length). They are not counted as missing.
pub const NOT_EXPECTED: &[(Pair, &str)] = &[
    (
        (Some(Call::StretchCreate), SysError::NoAddressSpace),
        "needs the 128 GiB stretch range exhausted for every domain",
    ),
    (
        (Some(Call::Block), SysError::WouldDeadlock),
        "the fuzzer never blocks; the `--block-once` domain shows it",
    ),
    (
        (Some(Call::StretchCreateManaged), SysError::NoAddressSpace),
        "needs the 128 GiB stretch range exhausted for every domain, as for stretch_create",
    ),
    (
        (Some(Call::Remap), SysError::NoMemory),
        "needs the target page's table gone with a neighbour while the guarantee is full, which \
         the fuzzer sets up for map only",
    ),
    (
        (Some(Call::MapBatch), SysError::NoMemory),
        "needs the table of a page it maps gone with a neighbour while the guarantee is full, which \
         the fuzzer sets up for map only",
    ),
    (
        (Some(Call::DmaAlloc), SysError::NoAddressSpace),
        "needs the 128 GiB stretch range exhausted for every domain, as for stretch_create",
    ),
    (
        (Some(Call::FrameLend), SysError::BadAddress),
        "needs a driver domain the fuzzer has a channel to, as the borrower is checked before \
         the page (the kernel's host tests and paging::lending show it)",
    ),
    (
        (Some(Call::FrameLend), SysError::NotManaged),
        "needs a driver domain the fuzzer has a channel to, as the borrower is checked before \
         the page (the kernel's host tests and paging::lending show it)",
    ),
    (
        (Some(Call::FrameLend), SysError::NotMapped),
        "needs a driver domain the fuzzer has a channel to, as the borrower is checked before \
         the page (the kernel's host tests and paging::lending show it)",
    ),
    (
        (Some(Call::FrameLend), SysError::InUse),
        "needs a driver domain the fuzzer has a channel to, as the borrower is checked before \
         the page (the kernel's host tests and paging::lending show it)",
    ),
    (
        (Some(Call::FrameLend), SysError::NoMemory),
        "needs a driver domain the fuzzer has a channel to, as the borrower is checked before \
         the page (the kernel's host tests and paging::lending show it)",
    ),
    (
        (Some(Call::LoanAddress), SysError::PermissionDenied),
        "needs a frame lent to the fuzzer, and no domain lends to it (paging::lending shows it)",
    ),
    (
        (Some(Call::LoanAddress), SysError::InvalidArgument),
        "needs a frame lent to the fuzzer, and no domain lends to it (paging::lending shows it)",
    ),
    (
        (Some(Call::StretchDestroy), SysError::InUse),
        "needs a page of the fuzzer's lent, and it lends nothing (the kernel's host tests show it)",
    ),
    (
        (Some(Call::Unmap), SysError::InUse),
        "needs a page of the fuzzer's lent, and it lends nothing (the kernel's host tests show it)",
    ),
    (
        (Some(Call::Protect), SysError::InUse),
        "needs a page of the fuzzer's lent, and it lends nothing (the kernel's host tests show it)",
    ),
    (
        (Some(Call::Remap), SysError::InUse),
        "needs a page of the fuzzer's lent, and it lends nothing (the kernel's host tests show it)",
    ),
    (
        (Some(Call::FrameReturn), SysError::InUse),
        "needs a loan of the fuzzer's that its borrower used, and it lends nothing",
    ),
];

/// Documented pairs only a driver domain observes (its calls get past the driver check).
pub const DRIVER_ONLY: &[Pair] = &[
    (Some(Call::DmaAlloc), SysError::InvalidArgument),
    (Some(Call::DmaAlloc), SysError::NoMemory),
    (Some(Call::DmaAddress), SysError::NotFound),
    (Some(Call::DmaAddress), SysError::InvalidArgument),
];

/// Documented pairs only a domain that is not a driver observes.
pub const NOT_DRIVER_ONLY: &[Pair] = &[
    (Some(Call::DmaAlloc), SysError::PermissionDenied),
    (Some(Call::DmaAddress), SysError::PermissionDenied),
];

/// Why a domain (a driver domain if `driver`) does not expect to observe `pair`, if it does not.
pub fn not_expected(pair: Pair, driver: bool) -> Option<&'static str> {
    if let Some((_, why)) = NOT_EXPECTED.iter().find(|(p, _)| *p == pair) {
        return Some(why);
    }
    match driver {
        false if DRIVER_ONLY.contains(&pair) => {
            Some("only a driver domain gets past the driver check (the driver fuzzer shows it)")
        }
        true if NOT_DRIVER_ONLY.contains(&pair) => {
            Some("a driver domain gets past the driver check (the other fuzzer shows it)")
        }
        _ => None,
    }
}

/// Is `(call, error)` in the table?
pub fn is_documented(pair: Pair) -> bool {
    DOCUMENTED.contains(&pair)
}

/// The call of kind index `k` (`None`: unknown numbers).
pub fn kind_call(k: usize) -> Option<Call> {
    Call::ALL.get(k).copied()
}

/// The index of `c` in `Call::ALL`.
pub fn kind_of(c: Call) -> usize {
    Call::ALL.iter().position(|x| *x == c).unwrap_or(UNKNOWN)
}

/// The name `docs/syscalls.md` gives a call kind.
pub fn kind_name(k: usize) -> &'static str {
    match kind_call(k) {
        None => "unknown",
        Some(Call::ConsoleWrite) => "console_write",
        Some(Call::Exit) => "exit",
        Some(Call::Yield) => "yield",
        Some(Call::Time) => "time",
        Some(Call::StretchCreate) => "stretch_create",
        Some(Call::StretchDestroy) => "stretch_destroy",
        Some(Call::StretchRights) => "stretch_rights",
        Some(Call::Null) => "null",
        Some(Call::EventSend) => "event_send",
        Some(Call::Block) => "block",
        Some(Call::ActivationSet) => "activation_set",
        Some(Call::Resume) => "resume",
        Some(Call::TimerAlloc) => "timer_alloc",
        Some(Call::TimerSet) => "timer_set",
        Some(Call::StretchCreateManaged) => "stretch_create_managed",
        Some(Call::FrameAlloc) => "frame_alloc",
        Some(Call::FrameFree) => "frame_free",
        Some(Call::Map) => "map",
        Some(Call::Unmap) => "unmap",
        Some(Call::Protect) => "protect",
        Some(Call::DmaAlloc) => "dma_alloc",
        Some(Call::DmaAddress) => "dma_address",
        Some(Call::IrqAck) => "irq_ack",
        Some(Call::Remap) => "remap",
        Some(Call::MapBatch) => "map_batch",
        Some(Call::PageState) => "page_state",
        Some(Call::FrameLend) => "frame_lend",
        Some(Call::LoanAddress) => "loan_address",
        Some(Call::FrameReturn) => "frame_return",
        Some(Call::DomainInfo) => "domain_info",
    }
}

/// The outcome index of a result.
pub fn outcome(r: Result<usize, SysError>) -> usize {
    match r {
        Ok(_) => 0,
        Err(e) => e as usize,
    }
}

/// The name of outcome index `o`.
pub fn outcome_name(o: usize) -> &'static str {
    SysError::from_code(o).map_or("Ok", SysError::name)
}
