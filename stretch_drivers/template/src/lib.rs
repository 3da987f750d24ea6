//! The template stretch driver: the smallest correct driver, to copy when writing a new one.
//!
//! It gives demand-zero pages on guaranteed frames only: nothing is mapped at bind, the first
//! touch of a page faults, and the fault maps a fresh guaranteed frame (which the kernel hands
//! out zero-filled). When the guarantee is used up, faults fail with
//! [`FaultError::OutOfMemory`]. Guaranteed frames are never revoked, so `revoke` releases
//! nothing and `lock` has nothing to do.
//!
//! To start a driver of your own: copy this directory, rename the package and the type, and
//! change `fault` (where the page comes from). A driver that holds optimistic frames also
//! writes `revoke` (what it gives back) and `lock`; those, `unlock`, `unbind` and `stats` are
//! provided by `StretchDriver` on the driver's core, and this one keeps them. The test at the
//! bottom runs the driver against the mock kernel; add yours next to it.
//!
//! Its state is a [`DriverCore`], which every driver shares: the stretch, the frame mapped at
//! each page, lock marks and stats, with the bookkeeping that goes with them (a new frame
//! mapped without leaking it when the kernel refuses, everything freed at unbind). What is
//! left here is the policy.
//!
//! # Invariants
//!
//! The core's page table has page `i` mapped exactly when page `i` is mapped, on a guaranteed
//! frame the domain holds.
//!
//! # Not implemented
//!
//! Optimistic frames, a backing store, eviction: see the physical driver for the first, and
//! the crate documentation of `stretch_driver` for how the pieces fit.

#![no_std]
#![forbid(unsafe_code)]

use stretch_driver::driver_core::fault_error;
use stretch_driver::{
    DriverCore, DriverError, Fault, FaultError, MemoryKernel, StretchDriver, StretchInfo,
};

// ANCHOR: state
/// The template driver. See the crate documentation.
#[derive(Debug, Default)]
pub struct TemplateDriver {
    /// The stretch we manage, the frame mapped at each of its pages, and our stats.
    core: DriverCore,
}
// ANCHOR_END: state

impl TemplateDriver {
    /// An unbound driver.
    pub fn new() -> Self {
        Self::default()
    }
}

impl StretchDriver for TemplateDriver {
    // ANCHOR: bind
    fn bind(&mut self, _k: &mut dyn MemoryKernel, stretch: StretchInfo) -> Result<(), DriverError> {
        // Must: refuse a second stretch and a malformed one, take what the driver needs up
        // front, and on failure give it all back. The kernel guarantees that the domain owns
        // the stretch and that it is now managed by this domain (`map` works inside it).
        // The core refuses, and sizes its page table; we take nothing up front.
        self.core.bind(stretch)
    }
    // ANCHOR_END: bind

    // ANCHOR: fault_find
    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        // Must: map the faulting page so that the access succeeds when the thread resumes, or
        // return an error (the thread gets it). The kernel guarantees that the fault is in a
        // stretch of this domain and that the domain's rights allow the access; it calls us
        // one fault at a time.
        // The core counts the fault, finds its page and checks the access against the
        // stretch's rights.
        let Some((stretch, index)) = self.core.begin_fault(&fault)? else {
            return Ok(()); // Another thread's fault on this page was resolved first.
        };
        // ANCHOR_END: fault_find
        // ANCHOR: fault_map
        // A new guaranteed frame (zero-filled), mapped with the domain's rights; if the
        // kernel refuses the mapping, the core frees the frame before failing.
        if let Err(e) = self.core.map_new(k, index, stretch.page_rights()) {
            self.core.stats.failures += 1;
            return Err(fault_error(e));
        }
        Ok(())
        // ANCHOR_END: fault_map
    }

    // ANCHOR: core
    // Must: lend the core to the calls `StretchDriver` provides on it, which the template
    // keeps: `lock` only checks the range (our frames are guaranteed, never revoked, so a page
    // stays once mapped), `unlock` clears the core's lock marks, `revoke` releases nothing
    // (we hold no optimistic frame), `unbind` unmaps every page and frees every frame, and
    // `stats` is the core's.
    fn core(&self) -> &DriverCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut DriverCore {
        &mut self.core
    }
    // ANCHOR_END: core
}

#[cfg(test)]
mod tests {
    use super::*;
    use stretch_driver::Access;
    use stretch_driver::Rights;
    use stretch_driver::mock::{MockKernel, Outcome};

    // ANCHOR: test
    #[test]
    fn pages_appear_on_first_touch() {
        // A domain with 2 guaranteed frames and a read-write stretch of 3 pages.
        let mut k = MockKernel::new(2, 0);
        let s = k.create_stretch(3, Rights(Rights::READ.0 | Rights::WRITE.0));
        let mut d = TemplateDriver::new();
        k.bind_driver(&mut d, s).unwrap();

        // The first touch faults and the driver maps a zeroed page; the second does not fault.
        assert_eq!(k.access(&mut d, &s, s.base, Access::Read), Outcome::Resolved);
        assert_eq!(k.load_u64(s.base), Ok(0));
        k.store_u64(s.base, 42).unwrap();
        assert_eq!(k.access(&mut d, &s, s.base, Access::Write), Outcome::Hit);
        assert_eq!(k.load_u64(s.base), Ok(42));

        // The third page finds the guarantee used up: the thread gets an error.
        k.access(&mut d, &s, s.page_addr(1), Access::Write);
        let third = k.access(&mut d, &s, s.page_addr(2), Access::Write);
        assert_eq!(third, Outcome::Failed(FaultError::OutOfMemory));
        assert_eq!(d.stats().faults, 3);

        // Unbinding gives everything back.
        assert_eq!(k.unbind_driver(&mut d, s), 0);
        assert_eq!(k.frames_held(), (0, 0));
    }
    // ANCHOR_END: test
}
