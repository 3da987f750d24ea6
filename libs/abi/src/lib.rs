//! Tessera's system-call ABI, shared by the kernel and `libtessera`: call numbers, the one error
//! enum, rights, and the user half of the single address space.
//!
//! Calling convention (RISC-V): `ecall` with the call number in `a7` and up to six arguments in
//! `a0..a5`. On return `a0` holds 0 for success or a [`SysError`] code, and `a1` the result
//! value. Every argument is validated by the kernel; a bad argument yields an error, never a
//! kernel panic. The table of calls, their arguments and their errors is in `docs/syscalls.md`.

#![no_std]
#![forbid(unsafe_code)]

/// System-call numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(usize)]
pub enum Call {
    /// `console_write(ptr, len) -> len`: prints UTF-8 text, tagged with the domain's name.
    ConsoleWrite = 1,
    /// `exit(code) -> !`: ends the calling domain with `code`.
    Exit = 2,
    /// `yield() -> 0`: gives up the rest of this turn on the CPU.
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
}

impl Call {
    /// Every call, in number order.
    pub const ALL: [Call; 8] = [
        Call::ConsoleWrite,
        Call::Exit,
        Call::Yield,
        Call::Time,
        Call::StretchCreate,
        Call::StretchDestroy,
        Call::StretchRights,
        Call::Null,
    ];

    /// The call with number `n`.
    pub fn from_number(n: usize) -> Option<Call> {
        Call::ALL.into_iter().find(|c| *c as usize == n)
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
}

impl SysError {
    /// Every error, in number order.
    pub const ALL: [SysError; 7] = [
        SysError::NoSuchCall,
        SysError::InvalidArgument,
        SysError::BadAddress,
        SysError::NoMemory,
        SysError::NotFound,
        SysError::PermissionDenied,
        SysError::NoAddressSpace,
    ];

    /// The error with code `n` (0 is success, not an error).
    pub fn from_code(n: usize) -> Option<SysError> {
        SysError::ALL.into_iter().find(|e| *e as usize == n)
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
/// The address-space slot reserved for each domain image.
pub const IMAGE_SLOT: usize = 0x4000_0000;
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
    fn rights_refuse_unknown_bits() {
        assert_eq!(Rights::from_bits(0xf), Some(Rights(0xf)));
        assert_eq!(Rights::from_bits(0x10), None);
        assert!(Rights(3).contains(Rights::READ));
        assert!(!Rights::READ.contains(Rights::WRITE));
        assert_eq!(Rights::READ.union(Rights::WRITE), Rights(3));
    }

    #[test]
    fn layout_is_ordered() {
        const { assert!(USER_BASE < STRETCH_BASE && STRETCH_BASE < USER_END) };
        const { assert!(IMAGE_BASE + 64 * IMAGE_SLOT <= STRETCH_BASE) };
    }
}
