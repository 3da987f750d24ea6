//! The domain's control block (`abi::Dcb`): the page the kernel maps read-write into every
//! domain and whose address arrives as the fourth entry argument. It holds the event endpoints
//! (counters and `closed` flags the kernel writes), the count of wake-ups, and the description
//! of the IO channels the domain is an end of.
//!
//! `unsafe` here: turning the address the kernel passed into a `&'static Dcb`.

use core::sync::atomic::{AtomicUsize, Ordering};

use abi::{Dcb, PAGE_SIZE, USER_BASE, USER_END};

/// The control block's address, set once by the entry before `main` runs (0 until then).
static ADDRESS: AtomicUsize = AtomicUsize::new(0);

/// Is `addr` a plausible control-block address: a page-aligned user page?
pub(crate) fn plausible(addr: usize) -> bool {
    const { assert!(core::mem::size_of::<Dcb>() <= PAGE_SIZE) };
    addr.is_multiple_of(PAGE_SIZE) && (USER_BASE..=USER_END - PAGE_SIZE).contains(&addr)
}

/// Records the control block's address.
///
/// # Safety
/// `addr` must be the address the kernel passed as the fourth entry argument (the entry
/// contract): a page mapped read-write into this domain for its whole lifetime (the kernel
/// refuses to destroy it), in which the kernel changes only atomic fields once the domain runs.
pub(crate) unsafe fn set(addr: usize) {
    ADDRESS.store(addr, Ordering::Relaxed);
}

/// The domain's control block.
///
/// # Panics
/// Before the runtime's entry recorded it, which no app code can observe.
pub fn dcb() -> &'static Dcb {
    let addr = ADDRESS.load(Ordering::Relaxed);
    assert!(plausible(addr), "tessera: no control block");
    // SAFETY: `addr` was stored by `set`, whose contract makes it a page-aligned page mapped
    // for the domain's lifetime that holds a `Dcb` (`Dcb` fits in a page, and every bit
    // pattern is a valid `Dcb`: integers, atomics and a byte array). The kernel writes it
    // concurrently only through atomic fields, and Rust code here never gets a `&mut` to it.
    unsafe { &*(addr as *const Dcb) }
}
