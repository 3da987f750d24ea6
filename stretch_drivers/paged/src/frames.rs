//! [`KernelFrames`]: the pager's frames over the kernel's frames and page tables, built around
//! the [`MemoryKernel`] of one driver call: they do the frame operations the pager asks for
//! ([`pager::plan::FrameOp`], [`KernelFrames::run`]).
//!
//! A frame is filled out of view: it is mapped at one of the driver's *window pages* (a
//! managed stretch no other code touches), written there in place, and moved into the stretch
//! with one `remap`, so no thread sees a half-filled page. A page leaving the stretch moves to a
//! window page the same way before it is read for write-back, so no thread changes it while it
//! is saved. Frames the kernel handed out zeroed and that were never used are mapped in place
//! without a copy.
//!
//! The window has several pages ([`window_pages`]): a frame evicted stays at its window page
//! once saved, so the next fault that reuses it fills it there and moves it into place with
//! a single `remap`; when every window page holds a frame, one `map_batch` clears them all.
//! Evicting `ahead` pages at once thus costs one `remap` a page and one `map_batch`.
//!
//! When the pager gives a frame back (a revocation), the kernel wants optimistic frames: if the
//! frame given back is guaranteed while an optimistic one holds a page, the page is moved onto
//! the guaranteed frame (through two window pages) and the optimistic frame is freed.

use alloc::vec::Vec;

use pager::pager::Pager;
use pager::plan::{FrameOp, Outcome, Step};
use pager::{PAGE_SIZE, Page, PagerError};
use stretch_driver::{
    Frame, FrameKind, MAP_BATCH_MAX, MemError, MemoryKernel, PageOp, Rights, StretchInfo,
    page_state,
};

/// Where a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Held and mapped nowhere.
    Unmapped,
    /// Mapped at this window page.
    Window(usize),
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
    /// Its page was written before a move onto this frame (the dirty bit the move's `remap`
    /// returned), so it is dirty whatever the bit of its new entry says.
    pub written: bool,
}

/// The pages of the window of a driver that evicts `ahead` pages at once: one for each page
/// evicted (so a batch of evictions clears them with one call), and two more, the fewest a
/// page moved from one frame onto another needs; at most [`MAP_BATCH_MAX`].
pub fn window_pages(ahead: usize) -> usize {
    (ahead.max(1) + 2).min(MAP_BATCH_MAX)
}

/// The driver's frames and window, kept between calls.
#[derive(Debug)]
pub struct FrameTable {
    /// The frames, in the pager's numbering.
    pub slots: Vec<Slot>,
    /// The first window page.
    pub window: usize,
    /// Which frame (in the pager's numbering) is mapped at each window page.
    pub at_window: Vec<Option<usize>>,
    /// The last kernel error, behind a [`PagerError::Frames`].
    pub last_error: Option<MemError>,
    /// Frames filled through the window (pages fetched, or zeroed for reuse).
    pub fills: u64,
    /// Frames saved through the window (pages read for eviction).
    pub saves: u64,
    /// Pages moved off optimistic frames to give those back.
    pub moves: u64,
    /// Kernel calls made (map, unmap, remap, protect, map_batch, frame_free).
    pub kernel_calls: u64,
    /// Time spent in them, by the driver's clock.
    pub kernel_ns: u64,
}

impl FrameTable {
    /// A table with no frames, using the `pages` window pages from `window`.
    pub fn new(window: usize, pages: usize) -> FrameTable {
        FrameTable {
            slots: Vec::new(),
            window,
            at_window: alloc::vec![None; pages.max(2)],
            last_error: None,
            fills: 0,
            saves: 0,
            moves: 0,
            kernel_calls: 0,
            kernel_ns: 0,
        }
    }

    /// The address of window page `w`.
    pub fn window_page(&self, w: usize) -> usize {
        self.window + w * PAGE_SIZE
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
    ) -> Result<T, PagerError> {
        let now = || self.clock.map_or(0, |clock| clock());
        let start = now();
        let r = f(&mut *self.k);
        let spent = now() - start;
        self.table.kernel_ns += spent;
        self.table.kernel_calls += 1;
        r.map_err(|e| self.fail(e))
    }

    /// Records a kernel error and turns it into the pager's.
    fn fail(&mut self, e: MemError) -> PagerError {
        self.table.last_error = Some(e);
        PagerError::Frames
    }

    fn slot(&self, frame: usize) -> Result<Slot, PagerError> {
        match self.table.slots.get(frame) {
            Some(s) if s.place != Place::Released => Ok(*s),
            _ => Err(PagerError::Frames),
        }
    }

    /// A window page holding no frame, for a frame other than those in `keep`. If every one
    /// holds a frame, those not kept (free frames: evicted and saved, or never mapped in the
    /// stretch) are unmapped with one `map_batch`.
    fn free_window_page(&mut self, keep: &[usize]) -> Result<usize, PagerError> {
        if let Some(w) = self.table.at_window.iter().position(Option::is_none) {
            return Ok(w);
        }
        let mut ops = [PageOp::default(); MAP_BATCH_MAX];
        let mut n = 0;
        for (w, at) in self.table.at_window.iter().enumerate() {
            if at.is_some_and(|f| !keep.contains(&f)) {
                ops[n] = PageOp::unmap(self.table.window_page(w));
                n += 1;
            }
        }
        self.call(|k| k.map_batch(&ops[..n]).map_err(|(_, e)| e))?;
        for w in 0..self.table.at_window.len() {
            if let Some(f) = self.table.at_window[w].filter(|f| !keep.contains(f)) {
                self.table.slots[f].place = Place::Unmapped;
                self.table.at_window[w] = None;
            }
        }
        self.table.at_window.iter().position(Option::is_none).ok_or(PagerError::Frames)
    }

    /// Maps `frame` (unmapped, or at the window already) at a window page, and says which.
    fn place_at_window(&mut self, frame: usize) -> Result<usize, PagerError> {
        match self.slot(frame)?.place {
            Place::Window(w) => return Ok(w),
            Place::Unmapped => {}
            Place::Page(_) | Place::Released => return Err(PagerError::Frames),
        }
        let w = self.free_window_page(&[frame])?;
        let (f, va) = (self.table.slots[frame].frame, self.table.window_page(w));
        self.call(|k| k.map(va, f, WINDOW_RIGHTS))?;
        self.put_at_window(frame, w);
        Ok(w)
    }

    /// Records `frame` at window page `w`.
    fn put_at_window(&mut self, frame: usize, w: usize) {
        self.table.slots[frame].place = Place::Window(w);
        self.table.at_window[w] = Some(frame);
    }

    /// Records that `frame` left window page `w`.
    fn leave_window(&mut self, w: usize) {
        self.table.at_window[w] = None;
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
    fn move_onto(&mut self, from: usize, to: usize) -> Result<(), PagerError> {
        let Place::Page(page) = self.slot(from)?.place else { return Err(PagerError::Frames) };
        let va = self.stretch.page_addr(page);
        let rights = self.rights(self.table.slots[from].writable);
        // The guaranteed frame at one window page, the page out of view at another.
        let target = self.place_at_window(to)?;
        let out = self.free_window_page(&[to])?;
        let (target_va, out_va) = (self.table.window_page(target), self.table.window_page(out));
        let state = self.call(|k| k.remap(va, out_va, WINDOW_RIGHTS))?;
        let mut buf = [0u8; 512];
        for at in (0..PAGE_SIZE).step_by(buf.len()) {
            self.k.read(out_va + at, &mut buf).map_err(|e| self.fail(e))?;
            self.k.write(target_va + at, &buf).map_err(|e| self.fail(e))?;
        }
        self.call(|k| k.remap(target_va, va, rights))?;
        let slots = &mut self.table.slots;
        let (optimistic, kind) = (slots[from].frame, slots[from].kind);
        slots[from].frame = slots[to].frame;
        slots[from].kind = slots[to].kind;
        // The new entry starts clean: the page's dirty bit stays with the slot.
        slots[from].written |= state & page_state::DIRTY != 0;
        slots[to] = Slot {
            frame: optimistic,
            kind,
            place: Place::Unmapped,
            fresh: false,
            writable: false,
            written: false,
        };
        self.leave_window(target);
        self.put_at_window(to, out);
        self.table.moves += 1;
        Ok(())
    }
}

impl KernelFrames<'_> {
    /// Does the pager's `step`, and those that follow it, until the call is answered: the
    /// pager decides, these frames do what it asks and answer ([`Pager::resume`]).
    pub fn run(&mut self, pager: &mut Pager, step: Step) -> Result<Outcome, PagerError> {
        let mut step = step;
        loop {
            let answer = match step {
                Step::Done(done) => return done,
                Step::Do(FrameOp::Map { page, frame, writable }) => {
                    self.map(page, frame, writable).map(|()| false)
                }
                Step::Do(FrameOp::Evict { page, frame, keep, writable }) => {
                    self.evict(pager, page, frame, keep, writable)
                }
                Step::Do(FrameOp::Fill { page, frame }) => {
                    let mut writable = false;
                    let mut fill = |contents: &mut Page| {
                        writable = pager.fill(contents)?;
                        Ok(())
                    };
                    self.fill(frame, &mut fill)
                        .and_then(|()| self.map(page, frame, writable))
                        .map(|()| false)
                }
                Step::Do(FrameOp::Zero { page, frame, writable }) => {
                    self.zero(frame).and_then(|()| self.map(page, frame, writable)).map(|()| false)
                }
                Step::Do(FrameOp::Save { frame }) => {
                    self.save(frame, &mut |page| pager.save(page, false)).map(|()| false)
                }
                Step::Do(FrameOp::Harvest) => self.harvest(pager).map(|()| false),
                Step::Do(FrameOp::Release { frame }) => self.release(frame).map(|()| false),
            };
            step = pager.resume(answer);
        }
    }

    /// Fills `frame` out of view: runs `fill` on its contents (which it must overwrite whole),
    /// in place, so a page decompressed or read from disk is written once.
    fn fill(
        &mut self,
        frame: usize,
        fill: &mut dyn FnMut(&mut Page) -> Result<(), PagerError>,
    ) -> Result<(), PagerError> {
        let w = self.place_at_window(frame)?;
        let window = self.table.window_page(w);
        self.table.slots[frame].fresh = false;
        let mut filled = Ok(());
        self.k.with_page(window, &mut |page| filled = fill(page)).map_err(|e| self.fail(e))?;
        filled?;
        self.table.fills += 1;
        Ok(())
    }

    /// Fills `frame` with zeros.
    fn zero(&mut self, frame: usize) -> Result<(), PagerError> {
        if self.slot(frame)?.fresh {
            return Ok(()); // Zero already: `map` puts it in place directly.
        }
        self.fill(frame, &mut |page| {
            page.fill(0);
            Ok(())
        })
    }

    /// Runs `save` on the contents of `frame` (whose page is unmapped), in place.
    fn save(
        &mut self,
        frame: usize,
        save: &mut dyn FnMut(&Page) -> Result<(), PagerError>,
    ) -> Result<(), PagerError> {
        let Place::Window(w) = self.slot(frame)?.place else { return Err(PagerError::Frames) };
        let window = self.table.window_page(w);
        let mut saved = Ok(());
        self.k.with_page(window, &mut |page| saved = save(page)).map_err(|e| self.fail(e))?;
        saved?;
        self.table.saves += 1;
        Ok(())
    }

    /// Evicts `page` from `frame`: unmaps it to a window page and, if it was written or
    /// `keep`, has `pager` save the frame there; if the save fails, maps it back (`writable`),
    /// its dirty bit kept with the slot. Says whether it was written.
    fn evict(
        &mut self,
        pager: &mut Pager,
        page: usize,
        frame: usize,
        keep: bool,
        writable: bool,
    ) -> Result<bool, PagerError> {
        let written = self.unmap(page, frame)?;
        if (written || keep)
            && let Err(e) = self.save(frame, &mut |contents| pager.save(contents, written))
        {
            self.map(page, frame, writable)?;
            self.table.slots[frame].written |= written;
            return Err(e);
        }
        Ok(written)
    }

    /// Maps `page` of the stretch onto `frame`, writable or read-only.
    fn map(&mut self, page: usize, frame: usize, writable: bool) -> Result<(), PagerError> {
        let va = self.stretch.page_addr(page);
        let rights = self.rights(writable);
        let slot = self.slot(frame)?;
        match slot.place {
            Place::Page(p) if p == page => self.call(|k| k.protect(va, rights))?,
            Place::Window(w) => {
                let window = self.table.window_page(w);
                self.call(|k| k.remap(window, va, rights))?;
                self.leave_window(w);
            }
            Place::Unmapped => self.call(|k| k.map(va, slot.frame, rights))?,
            Place::Page(_) | Place::Released => return Err(PagerError::Frames),
        }
        let slot = &mut self.table.slots[frame];
        slot.place = Place::Page(page);
        slot.fresh &= !writable;
        slot.writable = writable;
        Ok(())
    }

    /// Unmaps `page`, which is mapped on `frame`, to a window page, and says whether it was
    /// written (the dirty bit the `remap` returns).
    fn unmap(&mut self, page: usize, frame: usize) -> Result<bool, PagerError> {
        if self.slot(frame)?.place != Place::Page(page) {
            return Err(PagerError::Frames);
        }
        let w = self.free_window_page(&[])?;
        let va = self.stretch.page_addr(page);
        let window = self.table.window_page(w);
        // Out of view and asked whether it was written, in one step.
        let state = self.call(|k| k.remap(va, window, WINDOW_RIGHTS))?;
        self.put_at_window(frame, w);
        let written = core::mem::take(&mut self.table.slots[frame].written);
        Ok(written || state & page_state::DIRTY != 0)
    }

    /// Gives `frame` (unmapped) back to the kernel, as an optimistic frame.
    fn release(&mut self, frame: usize) -> Result<(), PagerError> {
        let slot = self.slot(frame)?;
        if let Place::Page(_) = slot.place {
            return Err(PagerError::Frames);
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
                            Place::Unmapped | Place::Window(_) => free,
                            Place::Page(_) => !free,
                            Place::Released => false,
                        }
                })
            };
            if let Some(other) = optimistic(true) {
                self.table.slots.swap(frame, other);
                for f in [frame, other] {
                    if let Place::Window(w) = self.table.slots[f].place {
                        self.table.at_window[w] = Some(f);
                    }
                }
            } else if let Some(from) = optimistic(false) {
                self.move_onto(from, frame)?;
            }
        }
        let slot = self.table.slots[frame];
        if let Place::Window(w) = slot.place {
            let window = self.table.window_page(w);
            self.call(|k| k.unmap(window))?;
            self.leave_window(w);
        }
        self.call(|k| k.frame_free(slot.frame))?;
        self.table.slots[frame].place = Place::Released;
        Ok(())
    }

    /// Tells `pager` of the resident pages the hardware marked accessed, read and cleared with
    /// one `page_state` a run of up to [`MAP_BATCH_MAX`] pages of the stretch that holds
    /// resident ones.
    fn harvest(&mut self, pager: &mut Pager) -> Result<(), PagerError> {
        // The pages of a run (ascending, within MAP_BATCH_MAX of the first).
        let mut run = [0usize; MAP_BATCH_MAX];
        let mut states = [0u8; MAP_BATCH_MAX];
        let mut from = 0;
        loop {
            let mut len = 0;
            for page in pager.resident_pages_from(from) {
                if len > 0 && page >= run[0] + MAP_BATCH_MAX {
                    break;
                }
                run[len] = page;
                len += 1;
            }
            if len == 0 {
                return Ok(());
            }
            let (first, span) = (run[0], run[len - 1] - run[0] + 1);
            let va = self.stretch.page_addr(first);
            self.call(|k| k.page_state(va, &mut states[..span], page_state::ACCESSED))?;
            for &p in &run[..len] {
                if states[p - first] & page_state::ACCESSED != 0 {
                    pager.accessed(p);
                }
            }
            from = run[len - 1] + 1;
        }
    }
}
