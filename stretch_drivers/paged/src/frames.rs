//! [`KernelFrames`]: the pager's frames ([`vmm::frames::Frames`]) over the kernel's frames and
//! page tables, built around the [`MemoryKernel`] of one driver call.
//!
//! A frame is filled out of view: it is mapped at the driver's *window page* (a managed page
//! no other code touches), written there, and moved into the stretch with one `remap`, so no
//! thread sees a half-filled page. A page leaving the stretch moves back to the window the same
//! way before it is read for write-back, so no thread changes it while it is saved. Frames the
//! kernel handed out zeroed and that were never used are mapped in place without a copy.
//!
//! When the pager gives a frame back (a revocation), the kernel wants optimistic frames: if the
//! frame given back is guaranteed while an optimistic one holds a page, the page is moved onto
//! the guaranteed frame (through a second window page) and the optimistic frame is freed.

use alloc::vec::Vec;

use stretch_driver::{Frame, FrameKind, MemError, MemoryKernel, Rights, StretchInfo};
use vmm::frames::Frames;
use vmm::{PAGE_SIZE, Page, VmmError};

/// Where a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Held and mapped nowhere.
    Unmapped,
    /// Mapped at the window page.
    Window,
    /// Mapped at this page of the stretch.
    Page(usize),
    /// Given back to the kernel.
    Released,
}

/// One frame the driver holds.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// The kernel's frame.
    pub frame: Frame,
    /// Guaranteed or optimistic.
    pub kind: FrameKind,
    /// Where it is mapped.
    pub place: Place,
    /// Zero since the kernel handed it out (never written through the window or the stretch).
    pub fresh: bool,
    /// Mapped writable (at its page).
    pub writable: bool,
}

/// The driver's frames and window, kept between calls.
#[derive(Debug)]
pub struct FrameTable {
    /// The frames, in the pager's numbering.
    pub slots: Vec<Slot>,
    /// Two window pages: a frame is filled or saved at the first; the second is the target
    /// of a page moved from an optimistic frame onto a guaranteed one.
    pub window: usize,
    /// The last kernel error, behind a [`VmmError::Frames`].
    pub last_error: Option<MemError>,
    /// Frames filled through the window (copies of a page in).
    pub fills: u64,
    /// Frames saved through the window (copies of a page out).
    pub saves: u64,
    /// Pages moved off optimistic frames to give those back.
    pub moves: u64,
    /// Kernel calls made (map, unmap, remap, protect, frame_free).
    pub kernel_calls: u64,
    /// Time spent in them, by the driver's clock.
    pub kernel_ns: u64,
}

impl FrameTable {
    /// A table with no frames, using the two pages at `window`.
    pub fn new(window: usize) -> FrameTable {
        FrameTable {
            slots: Vec::new(),
            window,
            last_error: None,
            fills: 0,
            saves: 0,
            moves: 0,
            kernel_calls: 0,
            kernel_ns: 0,
        }
    }

    /// The frame at the window, if any.
    fn at_window(&self) -> Option<usize> {
        self.slots.iter().position(|s| s.place == Place::Window)
    }
}

/// The window's rights: the driver reads and writes frames there.
const WINDOW_RIGHTS: Rights = Rights(Rights::READ.0 | Rights::WRITE.0);

/// The frames of one call: the table, the stretch, and the kernel of the call.
pub struct KernelFrames<'a> {
    /// The kernel of this call.
    pub k: &'a mut dyn MemoryKernel,
    /// The driver's frames.
    pub table: &'a mut FrameTable,
    /// The stretch the pages are in.
    pub stretch: StretchInfo,
    /// The clock that times kernel calls, if any.
    pub clock: Option<fn() -> u64>,
}

impl KernelFrames<'_> {
    /// Makes a kernel call, timing it with the driver's clock (if any), and records its error.
    fn call<T>(
        &mut self,
        f: impl FnOnce(&mut dyn MemoryKernel) -> Result<T, MemError>,
    ) -> Result<T, VmmError> {
        let now = || self.clock.map_or(0, |clock| clock());
        let start = now();
        let r = f(&mut *self.k);
        let spent = now() - start;
        self.table.kernel_ns += spent;
        self.table.kernel_calls += 1;
        r.map_err(|e| self.fail(e))
    }

    /// Records a kernel error and turns it into the pager's.
    fn fail(&mut self, e: MemError) -> VmmError {
        self.table.last_error = Some(e);
        VmmError::Frames
    }

    fn slot(&self, frame: usize) -> Result<Slot, VmmError> {
        match self.table.slots.get(frame) {
            Some(s) if s.place != Place::Released => Ok(*s),
            _ => Err(VmmError::Frames),
        }
    }

    /// Maps `frame` at the window, unmapping whichever frame was there.
    fn place_at_window(&mut self, frame: usize) -> Result<(), VmmError> {
        match self.slot(frame)?.place {
            Place::Window => return Ok(()),
            Place::Unmapped => {}
            Place::Page(_) | Place::Released => return Err(VmmError::Frames),
        }
        self.clear_window()?;
        let f = self.table.slots[frame].frame;
        let window = self.table.window;
        self.call(|k| k.map(window, f, WINDOW_RIGHTS))?;
        self.table.slots[frame].place = Place::Window;
        Ok(())
    }

    /// Unmaps the frame at the window, if any.
    fn clear_window(&mut self) -> Result<(), VmmError> {
        if let Some(other) = self.table.at_window() {
            let window = self.table.window;
            self.call(|k| k.unmap(window))?;
            self.table.slots[other].place = Place::Unmapped;
        }
        Ok(())
    }

    /// The rights to map a page with.
    fn rights(&self, writable: bool) -> Rights {
        let r = self.stretch.page_rights();
        if writable { r } else { Rights(r.0 & !Rights::WRITE.0) }
    }

    /// Moves the page on optimistic frame `from` onto guaranteed frame `to` (which the pager
    /// is giving back), so that the optimistic frame is the one freed: the pager's numbering
    /// stays (slot `from` still holds its page), the kernel frames behind the two slots swap,
    /// and slot `to` is left holding the optimistic frame at the window.
    fn move_onto(&mut self, from: usize, to: usize) -> Result<(), VmmError> {
        let Place::Page(page) = self.slot(from)?.place else { return Err(VmmError::Frames) };
        let va = self.stretch.page_addr(page);
        let rights = self.rights(self.table.slots[from].writable);
        let window = self.table.window;
        let second = window + PAGE_SIZE;
        // The guaranteed frame at the second window page, the page out of view at the first.
        self.clear_window()?;
        let guaranteed = self.table.slots[to].frame;
        self.call(|k| k.map(second, guaranteed, WINDOW_RIGHTS))?;
        self.call(|k| k.remap(va, window, WINDOW_RIGHTS))?;
        let mut buf = [0u8; 512];
        for at in (0..PAGE_SIZE).step_by(buf.len()) {
            self.k.read(window + at, &mut buf).map_err(|e| self.fail(e))?;
            self.k.write(second + at, &buf).map_err(|e| self.fail(e))?;
        }
        self.call(|k| k.remap(second, va, rights))?;
        let slots = &mut self.table.slots;
        let (optimistic, kind) = (slots[from].frame, slots[from].kind);
        slots[from].frame = guaranteed;
        slots[from].kind = slots[to].kind;
        slots[to] =
            Slot { frame: optimistic, kind, place: Place::Window, fresh: false, writable: false };
        self.table.moves += 1;
        Ok(())
    }
}

impl Frames for KernelFrames<'_> {
    fn fill(
        &mut self,
        frame: usize,
        fill: &mut dyn FnMut(&mut Page) -> Result<(), VmmError>,
    ) -> Result<(), VmmError> {
        self.place_at_window(frame)?;
        let window = self.table.window;
        self.table.slots[frame].fresh = false;
        let mut filled = Ok(());
        self.k.with_page(window, &mut |page| filled = fill(page)).map_err(|e| self.fail(e))?;
        filled?;
        self.table.fills += 1;
        Ok(())
    }

    fn zero(&mut self, frame: usize) -> Result<(), VmmError> {
        if self.slot(frame)?.fresh {
            return Ok(()); // Zero already: `map` puts it in place directly.
        }
        self.fill(frame, &mut |page| {
            page.fill(0);
            Ok(())
        })
    }

    fn save(
        &mut self,
        frame: usize,
        save: &mut dyn FnMut(&Page) -> Result<(), VmmError>,
    ) -> Result<(), VmmError> {
        if self.slot(frame)?.place != Place::Window {
            return Err(VmmError::Frames);
        }
        let window = self.table.window;
        let mut saved = Ok(());
        self.k.with_page(window, &mut |page| saved = save(page)).map_err(|e| self.fail(e))?;
        saved?;
        self.table.saves += 1;
        Ok(())
    }

    fn map(&mut self, page: usize, frame: usize, writable: bool) -> Result<(), VmmError> {
        let va = self.stretch.page_addr(page);
        let rights = self.rights(writable);
        let slot = self.slot(frame)?;
        let window = self.table.window;
        match slot.place {
            Place::Page(p) if p == page => self.call(|k| k.protect(va, rights))?,
            Place::Window => self.call(|k| k.remap(window, va, rights))?,
            Place::Unmapped => self.call(|k| k.map(va, slot.frame, rights))?,
            Place::Page(_) | Place::Released => return Err(VmmError::Frames),
        }
        let slot = &mut self.table.slots[frame];
        slot.place = Place::Page(page);
        slot.fresh &= !writable;
        slot.writable = writable;
        Ok(())
    }

    fn unmap(&mut self, page: usize, frame: usize) -> Result<bool, VmmError> {
        if self.slot(frame)?.place != Place::Page(page) {
            return Err(VmmError::Frames);
        }
        self.clear_window()?;
        let va = self.stretch.page_addr(page);
        let window = self.table.window;
        self.call(|k| k.remap(va, window, WINDOW_RIGHTS))?;
        self.table.slots[frame].place = Place::Window;
        Ok(false)
    }

    fn release(&mut self, frame: usize) -> Result<(), VmmError> {
        let slot = self.slot(frame)?;
        if let Place::Page(_) = slot.place {
            return Err(VmmError::Frames);
        }
        if slot.kind == FrameKind::Guaranteed {
            // The kernel counts optimistic frames only: give one of those back instead. A free
            // one (unmapped, or at the window, holding no page) simply trades places with this
            // one in the numbering; one holding a page first moves its page onto this frame.
            let slots = &self.table.slots;
            let optimistic = |free: bool| {
                slots.iter().enumerate().position(|(i, s)| {
                    i != frame
                        && s.kind == FrameKind::Optimistic
                        && match s.place {
                            Place::Unmapped | Place::Window => free,
                            Place::Page(_) => !free,
                            Place::Released => false,
                        }
                })
            };
            if let Some(other) = optimistic(true) {
                self.table.slots.swap(frame, other);
            } else if let Some(from) = optimistic(false) {
                self.move_onto(from, frame)?;
            }
        }
        let slot = self.table.slots[frame];
        if slot.place == Place::Window {
            let window = self.table.window;
            self.call(|k| k.unmap(window))?;
        }
        self.call(|k| k.frame_free(slot.frame))?;
        self.table.slots[frame].place = Place::Released;
        Ok(())
    }
}
