//! The nailed stretch driver: every page of the stretch is mapped on a guaranteed frame when
//! the driver is bound, and stays mapped until it is unbound.
//!
//! A nailed stretch never faults, so it suits memory that must always be there: stacks,
//! memory shared with other domains (the kernel requires shared stretches to be nailed), the
//! stretch driver's own data, buffers a device writes into. It costs one guaranteed frame per
//! page from the start, whether the pages are used or not.
//!
//! # Invariants
//!
//! - While bound, every page is mapped, with the stretch's page rights, on a guaranteed frame
//!   the driver holds; no other frame is held.
//! - Unbound, it holds nothing: a `bind` that fails (the contract has too few guaranteed
//!   frames) unmaps and frees what it took before returning.
//! - Faults are never resolved: a fault in a nailed stretch is [`FaultError::Unexpected`].
//! - Nothing is revocable: guaranteed frames are the domain's to keep, so `revoke` releases
//!   nothing, and `lock` and `unlock` only check their range (every page is pinned already).
//!
//! # Not implemented
//!
//! Pages cannot be filled at bind (they start zeroed; the owner writes them); a stretch that
//! must be read-only with contents would be filled through a writable mapping and then
//! protected, which this driver does not offer.

#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

use stretch_driver::driver_core::driver_error;
use stretch_driver::{
    DriverCore, DriverError, Fault, FaultError, MemoryKernel, StretchDriver, StretchInfo,
};

/// The nailed driver. See the crate documentation.
#[derive(Debug, Default)]
pub struct NailedDriver {
    /// The stretch and the frame of every page, while bound.
    core: DriverCore,
}

impl NailedDriver {
    /// An unbound driver.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stretch it manages, if bound.
    pub fn stretch(&self) -> Option<StretchInfo> {
        self.core.stretch()
    }
}

/// `lock` only checks the range (every page is resident, and nothing is revocable), `revoke`
/// releases nothing, and `unbind` unmaps and frees every page: the core's provided methods.
impl StretchDriver for NailedDriver {
    /// Allocates a guaranteed frame for every page and maps it with the stretch's page rights.
    ///
    /// Errors: [`DriverError::OutOfMemory`] when the contract has too few guaranteed frames.
    fn bind(&mut self, k: &mut dyn MemoryKernel, stretch: StretchInfo) -> Result<(), DriverError> {
        self.core.bind(stretch)?;
        for i in 0..stretch.pages {
            if let Err(e) = self.core.map_new(k, i, stretch.page_rights()) {
                // Unmaps the pages mapped so far and frees their frames.
                self.core.unbind(k);
                return Err(driver_error(e));
            }
        }
        Ok(())
    }

    /// A nailed stretch never faults: every fault is an error.
    fn fault(&mut self, _k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        self.core.stats.faults += 1;
        self.core.stats.failures += 1;
        self.core.page_of(&fault)?;
        Err(FaultError::Unexpected)
    }

    fn core(&self) -> &DriverCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut DriverCore {
        &mut self.core
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stretch_driver::mock::{MockKernel, Outcome};
    use stretch_driver::{Access, FrameKind, PAGE_SIZE, Rights};

    const RW: Rights = Rights(Rights::READ.0 | Rights::WRITE.0);

    #[test]
    fn every_page_is_mapped_after_bind() {
        let mut k = MockKernel::new(16, 4);
        let s = k.create_stretch(16, RW);
        let mut d = NailedDriver::new();
        k.bind_driver(&mut d, s).unwrap();
        assert_eq!(k.mapped_pages(), 16);
        assert_eq!(k.frames_held(), (16, 0));
        for i in 0..16 {
            let (frame, rights) = k.mapping(s.page_addr(i)).unwrap();
            assert_eq!(rights, RW);
            assert_eq!(k.frame_kind(frame), Some(FrameKind::Guaranteed));
            assert_eq!(k.access(&mut d, &s, s.page_addr(i), Access::Write), Outcome::Hit);
        }
        let st = d.stats();
        assert_eq!((st.maps, st.frames_allocated, st.faults), (16, 16, 0));
        assert_eq!(d.stretch(), Some(s));
    }

    #[test]
    fn contents_survive() {
        let mut k = MockKernel::new(8, 0);
        let s = k.create_stretch(8, RW);
        let mut d = NailedDriver::new();
        k.bind_driver(&mut d, s).unwrap();
        for i in 0..8 {
            k.store_u64(s.page_addr(i) + 8 * i, i as u64 * 3 + 1).unwrap();
        }
        assert_eq!(d.revoke(&mut k, 8), 0, "nailed frames are not revocable");
        d.lock(&mut k, s.base..s.end()).unwrap();
        d.unlock(&mut k, s.base..s.end()).unwrap();
        for i in 0..8 {
            assert_eq!(k.load_u64(s.page_addr(i) + 8 * i), Ok(i as u64 * 3 + 1));
        }
        assert_eq!(k.frames_held(), (8, 0));
    }

    #[test]
    fn bind_fails_cleanly_when_the_contract_is_too_small() {
        let mut k = MockKernel::new(5, 100);
        let s = k.create_stretch(6, RW);
        let mut d = NailedDriver::new();
        assert_eq!(k.bind_driver(&mut d, s), Err(DriverError::OutOfMemory));
        assert_eq!(k.frames_held(), (0, 0), "it freed what it took");
        assert_eq!(k.mapped_pages(), 0);
        assert_eq!(k.calls().unmap, 5);
        assert_eq!(d.stretch(), None);
        let st = d.stats();
        assert_eq!((st.frames_allocated, st.frames_released), (5, 5));
        // A smaller stretch fits afterwards.
        let small = k.create_stretch(5, RW);
        k.bind_driver(&mut d, small).unwrap();
        assert_eq!(k.frames_held(), (5, 0));
    }

    #[test]
    fn faults_are_errors() {
        let mut k = MockKernel::new(1, 0);
        let s = k.create_stretch(1, Rights::READ);
        let mut d = NailedDriver::new();
        let f = Fault { stretch_base: s.base, addr: s.base, access: Access::Read };
        assert_eq!(d.fault(&mut k, f), Err(FaultError::NotBound));
        k.bind_driver(&mut d, s).unwrap();
        assert_eq!(d.fault(&mut k, f), Err(FaultError::Unexpected));
        let elsewhere = Fault { addr: s.end() + PAGE_SIZE, ..f };
        assert_eq!(d.fault(&mut k, elsewhere), Err(FaultError::WrongStretch));
        assert_eq!(d.stats().failures, 3);
        assert_eq!(d.lock(&mut k, s.base..s.end() + 1), Err(DriverError::OutOfRange));
        assert_eq!(d.bind(&mut k, s), Err(DriverError::AlreadyBound));
    }

    #[test]
    fn unbind_releases_everything() {
        let mut k = MockKernel::new(4, 0);
        let s = k.create_stretch(4, RW);
        let mut d = NailedDriver::new();
        k.bind_driver(&mut d, s).unwrap();
        assert_eq!(k.unbind_driver(&mut d, s), 0);
        assert_eq!(k.frames_held(), (0, 0));
        assert_eq!(d.stats().frames_released, 4);
        d.unbind(&mut k);
        assert_eq!(d.stretch(), None);
    }
}
