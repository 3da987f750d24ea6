//! The swap driver's fault path and eviction: the file the swap lab's student writes
//! (`docs/labs/swap.md`).
//!
//! Three steps, each a method of [`SwapDriver`]:
//!
//! - `swap_fault` resolves a fault: it finds the faulting page (refusing a bad access) and
//!   brings the page in;
//! - `page_in` makes page `index` resident: a frame (a free one, else one freed by `evict`),
//!   mapped at the page with the stretch's rights, and filled: with the page's bytes from its
//!   slot, which is then free, or with zeros;
//! - `evict` frees a frame: the oldest resident page that is not locked is copied into a free
//!   slot and unmapped, and its frame is returned.
//!
//! The state they work on is [`SwapDriver`]'s (`src/lib.rs`): `core` (the stretch, the frame
//! of each resident page, the lock marks, the counts), `free` (frames no page maps), `fifo`
//! (resident pages, oldest first), `swapped` (each page's slot, if it has one), `area` (the
//! slots) and `swap_stats`.

use stretch_driver::{Fault, FaultError, Frame, MemoryKernel, StretchInfo};

use crate::SwapDriver;

// LAB(swap) BEGIN
use stretch_driver::driver_core::fault_error;
use stretch_driver::{FrameKind, Mapped, PAGE_SIZE};

/// A page of zeros, to fill a page that has no slot.
static ZEROS: [u8; PAGE_SIZE] = [0; PAGE_SIZE];
// LAB(swap) HANDOUT
// LAB(swap) END

impl SwapDriver {
    /// Resolves `fault`: maps its page with the stretch's rights and the page's contents, or
    /// fails it (a fault outside the stretch, an access the stretch does not allow, no frame
    /// or slot to be had).
    pub(crate) fn swap_fault(
        &mut self,
        k: &mut dyn MemoryKernel,
        fault: Fault,
    ) -> Result<(), FaultError> {
        // LAB(swap) BEGIN
        // The core counts the fault, refuses one outside the stretch or with an access the
        // stretch does not allow, and finds the page; `None`: it is resident already.
        let Some((stretch, index)) = self.core.begin_fault(&fault)? else {
            return Ok(());
        };
        self.page_in(k, stretch, index).inspect_err(|_| self.core.stats.failures += 1)
        // LAB(swap) HANDOUT
        // let _ = (k, fault);
        // todo!("lab swap: resolve the fault (find its page, then page_in); see docs/labs/swap.md")
        // LAB(swap) END
    }

    /// Makes page `index` of `stretch` resident, with its contents: from its slot (which is
    /// then free) or zeros. On an error the page is not resident and keeps its slot, and no
    /// frame of the budget is lost.
    pub(crate) fn page_in(
        &mut self,
        k: &mut dyn MemoryKernel,
        stretch: StretchInfo,
        index: usize,
    ) -> Result<(), FaultError> {
        // A free frame of the budget, else the frame of a page evicted for it.
        let frame = match self.free.pop() {
            Some(frame) => frame,
            None => self.evict(k, stretch)?,
        };
        // LAB(swap) BEGIN
        let mapped = Mapped { frame, kind: FrameKind::Guaranteed };
        if let Err(e) = self.core.map(k, index, mapped, stretch.page_rights()) {
            self.free.push(frame);
            return Err(fault_error(e));
        }
        // The frame may be a victim's, with its bytes: fill it whatever it held.
        let contents = match self.swapped[index] {
            Some(slot) => self.area.slot(slot),
            None => &ZEROS,
        };
        if let Err(e) = k.write(stretch.page_addr(index), contents) {
            if let Ok(mapped) = self.core.unmap(k, index) {
                self.free.push(mapped.frame);
            }
            return Err(fault_error(e));
        }
        if let Some(slot) = self.swapped[index].take() {
            self.area.give_back(slot);
            self.swap_stats.swap_ins += 1;
        }
        self.fifo.push_back(index);
        Ok(())
        // LAB(swap) HANDOUT
        // let _ = (k, index, frame);
        // todo!("lab swap: map the frame at the page and fill it; see docs/labs/swap.md")
        // LAB(swap) END
    }

    /// Frees a frame: copies the oldest resident page that is not locked into a free slot,
    /// unmaps it and returns its frame, which the driver still holds.
    ///
    /// Errors: [`FaultError::OutOfMemory`] (every resident page is locked),
    /// [`FaultError::Backing`] (no free slot); the kernel's, through `fault_error`. On an
    /// error nothing has changed.
    pub(crate) fn evict(
        &mut self,
        k: &mut dyn MemoryKernel,
        stretch: StretchInfo,
    ) -> Result<Frame, FaultError> {
        // LAB(swap) BEGIN
        let core = &self.core;
        let at = self.fifo.iter().position(|&i| !core.locked(i)).ok_or(FaultError::OutOfMemory)?;
        let victim = self.fifo[at];
        let slot = self.area.take().ok_or(FaultError::Backing("the swap area is full"))?;
        // Save the page while it is still mapped, then take it out.
        let saved = k.read(stretch.page_addr(victim), self.area.slot_mut(slot));
        let unmapped = saved.and_then(|()| self.core.unmap(k, victim));
        let mapped = match unmapped {
            Ok(mapped) => mapped,
            Err(e) => {
                self.area.give_back(slot);
                return Err(fault_error(e));
            }
        };
        self.fifo.remove(at);
        self.swapped[victim] = Some(slot);
        self.swap_stats.evictions += 1;
        Ok(mapped.frame)
        // LAB(swap) HANDOUT
        // let _ = (k, stretch);
        // todo!("lab swap: evict the oldest unlocked page to a slot; see docs/labs/swap.md")
        // LAB(swap) END
    }
}
