//! Who holds the floating-point registers: the bookkeeping of lazy FP switching, shared by the
//! architectures (each saves and loads the registers its own way, and turns the unit off for a
//! domain whose state is not loaded: RISC-V `sstatus.FS`, x86_64 CR0.TS).
//!
//! The registers hold one domain's state at a time, the *loaded* block's. A switch to a domain
//! only notes it as *current*; its state is loaded when it first uses the unit. Blocks are named
//! by their heap address, which stays put while the portable kernel moves the `FpState` that
//! owns them; a block that goes away is forgotten, so no stale address is ever used.

use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// The loaded and the current block of an architecture's FP state type `T`.
pub struct FpHolder<T> {
    /// The block whose values the registers hold (null: nobody's, as at boot).
    loaded: AtomicPtr<T>,
    /// The block of the domain that runs (null: none).
    current: AtomicPtr<T>,
    /// How many times a current block was loaded on first use.
    loads: AtomicU64,
}

impl<T> FpHolder<T> {
    /// Nobody's state is loaded and no domain runs.
    pub const fn new() -> Self {
        FpHolder {
            loaded: AtomicPtr::new(core::ptr::null_mut()),
            current: AtomicPtr::new(core::ptr::null_mut()),
            loads: AtomicU64::new(0),
        }
    }

    /// The domain with `block` runs now; whether the registers hold its state already.
    pub fn switch_to(&self, block: *mut T) -> bool {
        self.current.store(block, Ordering::Relaxed);
        self.holds(block)
    }

    /// Do the registers hold `block`'s state?
    pub fn holds(&self, block: *mut T) -> bool {
        self.loaded.load(Ordering::Relaxed) == block
    }

    /// The running domain's block, if any.
    pub fn current(&self) -> Option<*mut T> {
        Some(self.current.load(Ordering::Relaxed)).filter(|p| !p.is_null())
    }

    /// The registers now hold `block`'s state (just loaded on first use).
    pub fn loaded(&self, block: *mut T) {
        self.loaded.store(block, Ordering::Relaxed);
        self.loads.fetch_add(1, Ordering::Relaxed);
    }

    /// `block` goes away: neither loaded nor current any more.
    pub fn forget(&self, block: *mut T) {
        let null = core::ptr::null_mut();
        let _ = self.loaded.compare_exchange(block, null, Ordering::Relaxed, Ordering::Relaxed);
        let _ = self.current.compare_exchange(block, null, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// How many times a domain's state was loaded on first use since boot.
    pub fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }
}
