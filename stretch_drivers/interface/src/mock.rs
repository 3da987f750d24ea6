//! A host model of the kernel's memory calls, for testing stretch drivers with `cargo test`.
//!
//! [`MockKernel`] plays one domain: its frames contract, the stretches it owns, its page table
//! and the contents of every frame it holds. It makes the checks the kernel makes (mapping only
//! inside stretches bound to a driver, frames only within the contract, no page mapped twice,
//! no frame mapped twice or freed while mapped, `unmap` returning the frame), counts every
//! call, and plays the CPU: [`MockKernel::touch`] says whether an access would fault (and, as
//! the hardware does, sets the page's accessed bit, and its dirty bit for a write), and
//! [`MockKernel::access`] runs the fault path (fault, call the driver, retry once, as the
//! kernel resumes the thread). The accessed and dirty bits follow the kernel's rules: `map`
//! clears them, `remap` returns the old page's and clears the new one's, `protect` keeps
//! them, `page_state` reads and clears them; every access through the mock (`touch`, `load_u64`, `store_u64`, `access`, and the
//! copies `read` and `write`) sets them.
//!
//! Frame numbers are never reused, so a driver that keeps a freed frame's handle gets
//! [`MemError::BadFrame`] when it uses it. Stretches are placed from [`abi::STRETCH_BASE`] up,
//! one unmapped page apart.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::cell::Cell;

use crate::{
    Access, DriverError, Fault, FaultError, Frame, FrameKind, MAP_BATCH_MAX, MemError,
    MemoryKernel, PAGE_RIGHTS, PAGE_SIZE, PageOp, Rights, StretchDriver, StretchInfo, page_op,
    page_state,
};

/// How many times each call was made (failed calls included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Calls {
    /// [`MemoryKernel::frame_alloc`].
    pub frame_alloc: u64,
    /// [`MemoryKernel::frame_free`].
    pub frame_free: u64,
    /// [`MemoryKernel::map`].
    pub map: u64,
    /// [`MemoryKernel::unmap`].
    pub unmap: u64,
    /// [`MemoryKernel::protect`].
    pub protect: u64,
    /// [`MemoryKernel::remap`].
    pub remap: u64,
    /// [`MemoryKernel::map_batch`] (non-empty batches: one system call each).
    pub map_batch: u64,
    /// [`MemoryKernel::page_state`].
    pub page_state: u64,
    /// [`MemoryKernel::write`].
    pub write: u64,
    /// [`MemoryKernel::read`].
    pub read: u64,
    /// Faults [`MockKernel::access`] delivered to a driver.
    pub faults: u64,
}

/// What happened to an access made with [`MockKernel::access`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The page was mapped with the access allowed: no fault.
    Hit,
    /// It faulted, the driver resolved the fault, and the retry succeeded.
    Resolved,
    /// It faulted and the driver failed the fault: the thread gets this error.
    Failed(FaultError),
    /// The driver said it resolved the fault, but the retry faulted again (a driver bug).
    Refaulted(Fault),
    /// The kernel would terminate the domain without calling a driver: the stretch is bound to
    /// no driver, or its rights do not allow the access.
    Terminated(Fault),
}

struct MockFrame {
    kind: FrameKind,
    data: Box<[u8]>,
    mapped_at: Option<usize>,
}

struct MockStretch {
    info: StretchInfo,
    managed: bool,
}

/// A model of the kernel's memory calls for one domain. See the module documentation.
pub struct MockKernel {
    guaranteed: usize,
    optimistic: usize,
    held: (usize, usize),
    peak: (usize, usize),
    frames: BTreeMap<u64, MockFrame>,
    next_frame: u64,
    stretches: Vec<MockStretch>,
    next_base: usize,
    pages: BTreeMap<usize, (Frame, Rights)>,
    /// The accessed and dirty bits ([`page_state`]) of each mapped page, set by accesses
    /// (which take `&self`, as the CPU's do not change the mappings).
    used: BTreeMap<usize, Cell<u8>>,
    calls: Calls,
}

/// The first frame number the mock hands out (the start of RAM on QEMU `virt`).
const FIRST_FRAME: u64 = 0x8_0000;

impl MockKernel {
    /// A domain with a frames contract of `guaranteed` plus `optimistic` frames, holding no
    /// frame and owning no stretch.
    pub fn new(guaranteed: usize, optimistic: usize) -> Self {
        MockKernel {
            guaranteed,
            optimistic,
            held: (0, 0),
            peak: (0, 0),
            frames: BTreeMap::new(),
            next_frame: FIRST_FRAME,
            stretches: Vec::new(),
            next_base: abi::STRETCH_BASE,
            pages: BTreeMap::new(),
            used: BTreeMap::new(),
            calls: Calls::default(),
        }
    }

    /// The frames contract: `(guaranteed, optimistic)`.
    pub fn contract(&self) -> (usize, usize) {
        (self.guaranteed, self.optimistic)
    }

    /// The most frames the domain ever held at once: `(guaranteed, optimistic)`, each counted
    /// on its own.
    pub fn peak_held(&self) -> (usize, usize) {
        self.peak
    }

    /// The calls made so far.
    pub fn calls(&self) -> Calls {
        self.calls
    }

    /// Creates a stretch of `pages` pages owned by the domain with `rights`, bound to no
    /// driver yet.
    ///
    /// # Panics
    ///
    /// If `pages` is 0.
    pub fn create_stretch(&mut self, pages: usize, rights: Rights) -> StretchInfo {
        assert!(pages > 0, "a stretch has at least one page");
        let info = StretchInfo { base: self.next_base, pages, rights };
        self.next_base = info.end() + PAGE_SIZE;
        self.stretches.push(MockStretch { info, managed: false });
        info
    }

    /// Creates a managed stretch of `pages` pages bound to no driver, as
    /// `stretch_create_managed` does: the domain maps its pages itself (a driver's window
    /// page, say), and a fault in it would terminate the domain.
    ///
    /// # Panics
    ///
    /// If `pages` is 0.
    pub fn create_managed_stretch(&mut self, pages: usize, rights: Rights) -> StretchInfo {
        let info = self.create_stretch(pages, rights);
        let i = self.stretch_of(info);
        self.stretches[i].managed = true;
        info
    }

    /// Binds `driver` to `stretch` (created by [`MockKernel::create_stretch`]): the stretch
    /// becomes managed by the domain, then the driver's `bind` runs. If it fails the stretch
    /// is unmanaged again.
    ///
    /// # Panics
    ///
    /// If the mock did not create `stretch`.
    pub fn bind_driver(
        &mut self,
        driver: &mut dyn StretchDriver,
        stretch: StretchInfo,
    ) -> Result<(), DriverError> {
        let i = self.stretch_of(stretch);
        self.stretches[i].managed = true;
        let r = driver.bind(self, stretch);
        if r.is_err() {
            self.stretches[i].managed = false;
        }
        r
    }

    /// Calls the driver's `unbind`, then marks `stretch` unmanaged; returns how many of its
    /// pages the driver left mapped (0 for a correct driver).
    ///
    /// # Panics
    ///
    /// If the mock did not create `stretch`.
    pub fn unbind_driver(&mut self, driver: &mut dyn StretchDriver, stretch: StretchInfo) -> usize {
        let i = self.stretch_of(stretch);
        driver.unbind(self);
        self.stretches[i].managed = false;
        self.pages.range(stretch.base..stretch.end()).count()
    }

    /// What the CPU would do on `access` at `va`: `Ok` if the page is mapped with the access
    /// allowed, else the fault it would raise. An access that succeeds sets the page's
    /// accessed bit, and a write its dirty bit too, as the hardware does (what
    /// [`MemoryKernel::page_state`] reports); one that faults sets nothing.
    ///
    /// # Panics
    ///
    /// If `va` is in no stretch of the domain (the kernel would terminate the domain).
    pub fn touch(&self, va: usize, access: Access) -> Result<(), Fault> {
        let stretch = self.find(va).unwrap_or_else(|| panic!("{va:#x} is in no stretch")).info;
        let page = va & !(PAGE_SIZE - 1);
        match self.pages.get(&page) {
            Some((_, rights)) if access.allowed_by(*rights) => {
                self.mark_used(page, access);
                Ok(())
            }
            _ => Err(Fault { stretch_base: stretch.base, addr: va, access }),
        }
    }

    /// The accessed and dirty bits of the mapped page of `va` ([`page_state`] bits, with
    /// [`page_state::MAPPED`]), or 0 if it is not mapped; without clearing them or counting a
    /// call.
    pub fn page_bits(&self, va: usize) -> u8 {
        self.used.get(&(va & !(PAGE_SIZE - 1))).map_or(0, |u| page_state::MAPPED | u.get())
    }

    /// Sets the bits an `access` to the mapped `page` sets.
    fn mark_used(&self, page: usize, access: Access) {
        if let Some(u) = self.used.get(&page) {
            let dirty = if access == Access::Write { page_state::DIRTY } else { 0 };
            u.set(u.get() | page_state::ACCESSED | dirty);
        }
    }

    /// Loads the `u64` at `va` through the page table, or returns the fault a load raises.
    ///
    /// # Panics
    ///
    /// If `va` is not 8-aligned or is in no stretch.
    pub fn load_u64(&self, va: usize) -> Result<u64, Fault> {
        assert!(va.is_multiple_of(8), "unaligned load at {va:#x}");
        self.touch(va, Access::Read)?;
        let data = self.page_data(va);
        let at = va % PAGE_SIZE;
        Ok(u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes")))
    }

    /// Stores `value` at `va` through the page table, or returns the fault a store raises.
    ///
    /// # Panics
    ///
    /// If `va` is not 8-aligned or is in no stretch.
    pub fn store_u64(&mut self, va: usize, value: u64) -> Result<(), Fault> {
        assert!(va.is_multiple_of(8), "unaligned store at {va:#x}");
        self.touch(va, Access::Write)?;
        let frame = self.pages[&(va & !(PAGE_SIZE - 1))].0;
        let at = va % PAGE_SIZE;
        let data = &mut self.frames.get_mut(&frame.0).expect("mapped frame is held").data;
        data[at..at + 8].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    /// Runs the fault path for `access` at `va` in `stretch`: touch; on a fault, call
    /// `driver.fault` (unless the kernel would terminate the domain) and retry once, as the
    /// kernel resumes the thread.
    ///
    /// # Panics
    ///
    /// If `va` is not in `stretch`, or the mock did not create `stretch`.
    pub fn access(
        &mut self,
        driver: &mut dyn StretchDriver,
        stretch: &StretchInfo,
        va: usize,
        access: Access,
    ) -> Outcome {
        assert!(stretch.contains(va), "{va:#x} is not in the stretch at {:#x}", stretch.base);
        let i = self.stretch_of(*stretch);
        let fault = match self.touch(va, access) {
            Ok(()) => return Outcome::Hit,
            Err(fault) => fault,
        };
        let s = &self.stretches[i];
        if !s.managed || !access.allowed_by(s.info.rights) {
            return Outcome::Terminated(fault);
        }
        self.calls.faults += 1;
        if let Err(e) = driver.fault(self, fault) {
            return Outcome::Failed(e);
        }
        match self.touch(va, access) {
            Ok(()) => Outcome::Resolved,
            Err(again) => Outcome::Refaulted(again),
        }
    }

    /// The frame mapped at the page of `va` and its rights, if any.
    pub fn mapping(&self, va: usize) -> Option<(Frame, Rights)> {
        self.pages.get(&(va & !(PAGE_SIZE - 1))).copied()
    }

    /// How many pages are mapped, over all stretches.
    pub fn mapped_pages(&self) -> usize {
        self.pages.len()
    }

    /// The kind of a frame the domain holds.
    pub fn frame_kind(&self, frame: Frame) -> Option<FrameKind> {
        self.frames.get(&frame.0).map(|f| f.kind)
    }

    fn stretch_of(&self, stretch: StretchInfo) -> usize {
        self.stretches
            .iter()
            .position(|s| s.info == stretch)
            .unwrap_or_else(|| panic!("the mock did not create the stretch at {:#x}", stretch.base))
    }

    fn find(&self, va: usize) -> Option<&MockStretch> {
        self.stretches.iter().find(|s| s.info.contains(va))
    }

    fn page_data(&self, va: usize) -> &[u8] {
        let frame = self.pages[&(va & !(PAGE_SIZE - 1))].0;
        &self.frames[&frame.0].data
    }

    /// The checks on the page address of `map`, `unmap` and `protect`; returns the stretch.
    fn managed_page(&self, va: usize) -> Result<StretchInfo, MemError> {
        if !va.is_multiple_of(PAGE_SIZE) {
            return Err(MemError::BadAddress);
        }
        let s = self.find(va).ok_or(MemError::NotOwned)?;
        if !s.managed {
            return Err(MemError::NotManaged);
        }
        Ok(s.info)
    }

    fn check_rights(stretch: &StretchInfo, rights: Rights) -> Result<(), MemError> {
        if rights == Rights::NONE || rights.0 & !PAGE_RIGHTS != 0 {
            return Err(MemError::BadRights);
        }
        if !stretch.page_rights().contains(rights) {
            return Err(MemError::Denied);
        }
        Ok(())
    }

    /// Checks one entry of a batch as its single call is checked, against the pages and
    /// frames as they are.
    fn check_op(&self, op: &PageOp) -> Result<(), MemError> {
        let va = usize::try_from(op.va).map_err(|_| MemError::BadAddress)?;
        let stretch = self.managed_page(va)?;
        let rights = || u8::try_from(op.rights).map(Rights).map_err(|_| MemError::BadRights);
        match op.op {
            page_op::MAP => {
                Self::check_rights(&stretch, rights()?)?;
                let f = self.frames.get(&op.frame).ok_or(MemError::BadFrame)?;
                if f.mapped_at.is_some() {
                    return Err(MemError::FrameInUse);
                }
                if self.pages.contains_key(&va) {
                    return Err(MemError::AlreadyMapped);
                }
            }
            page_op::UNMAP | page_op::PROTECT => {
                if op.op == page_op::PROTECT {
                    Self::check_rights(&stretch, rights()?)?;
                }
                if !self.pages.contains_key(&va) {
                    return Err(MemError::NotMapped);
                }
            }
            _ => return Err(MemError::BadBatch),
        }
        Ok(())
    }

    /// Sets the bits a copy of `len` bytes at `va` (checked) sets in the pages it touches.
    fn mark_copied(&self, va: usize, len: usize, access: Access) {
        if len == 0 {
            return;
        }
        let first = va & !(PAGE_SIZE - 1);
        for page in (first..va + len).step_by(PAGE_SIZE) {
            self.mark_used(page, access);
        }
    }

    /// The pages a copy of `len` bytes at `va` touches, each checked for `access`.
    fn copy_pages(&self, va: usize, len: usize, access: Access) -> Result<Vec<Frame>, MemError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let end = va.checked_add(len).ok_or(MemError::BadAddress)?;
        let first = va & !(PAGE_SIZE - 1);
        let mut frames = Vec::new();
        for page in (first..end).step_by(PAGE_SIZE) {
            let (frame, rights) = self.pages.get(&page).ok_or(MemError::NotMapped)?;
            if !access.allowed_by(*rights) {
                return Err(MemError::Denied);
            }
            frames.push(*frame);
        }
        Ok(frames)
    }
}

impl MemoryKernel for MockKernel {
    fn frame_alloc(&mut self, kind: FrameKind) -> Result<Frame, MemError> {
        self.calls.frame_alloc += 1;
        let (held, limit, peak) = match kind {
            FrameKind::Guaranteed => (&mut self.held.0, self.guaranteed, &mut self.peak.0),
            FrameKind::Optimistic => (&mut self.held.1, self.optimistic, &mut self.peak.1),
        };
        if *held >= limit {
            return Err(MemError::NoFrames);
        }
        *held += 1;
        *peak = (*peak).max(*held);
        let frame = Frame(self.next_frame);
        self.next_frame += 1;
        let data = alloc::vec![0u8; PAGE_SIZE].into_boxed_slice();
        self.frames.insert(frame.0, MockFrame { kind, data, mapped_at: None });
        Ok(frame)
    }

    fn frame_free(&mut self, frame: Frame) -> Result<(), MemError> {
        self.calls.frame_free += 1;
        let f = self.frames.get(&frame.0).ok_or(MemError::BadFrame)?;
        if f.mapped_at.is_some() {
            return Err(MemError::FrameInUse);
        }
        match f.kind {
            FrameKind::Guaranteed => self.held.0 -= 1,
            FrameKind::Optimistic => self.held.1 -= 1,
        }
        self.frames.remove(&frame.0);
        Ok(())
    }

    fn map(&mut self, va: usize, frame: Frame, rights: Rights) -> Result<(), MemError> {
        self.calls.map += 1;
        let stretch = self.managed_page(va)?;
        Self::check_rights(&stretch, rights)?;
        let f = self.frames.get_mut(&frame.0).ok_or(MemError::BadFrame)?;
        if f.mapped_at.is_some() {
            return Err(MemError::FrameInUse);
        }
        if self.pages.contains_key(&va) {
            return Err(MemError::AlreadyMapped);
        }
        f.mapped_at = Some(va);
        self.pages.insert(va, (frame, rights));
        self.used.insert(va, Cell::new(0));
        Ok(())
    }

    fn unmap(&mut self, va: usize) -> Result<Frame, MemError> {
        self.calls.unmap += 1;
        self.managed_page(va)?;
        let (frame, _) = self.pages.remove(&va).ok_or(MemError::NotMapped)?;
        self.used.remove(&va);
        self.frames.get_mut(&frame.0).expect("mapped frame is held").mapped_at = None;
        Ok(frame)
    }

    fn protect(&mut self, va: usize, rights: Rights) -> Result<(), MemError> {
        self.calls.protect += 1;
        let stretch = self.managed_page(va)?;
        Self::check_rights(&stretch, rights)?;
        let entry = self.pages.get_mut(&va).ok_or(MemError::NotMapped)?;
        entry.1 = rights;
        Ok(())
    }

    fn remap(&mut self, from: usize, to: usize, rights: Rights) -> Result<u8, MemError> {
        self.calls.remap += 1;
        if from == to {
            return Err(MemError::BadAddress);
        }
        self.managed_page(from)?;
        let target = self.managed_page(to)?;
        Self::check_rights(&target, rights)?;
        let (frame, _) = *self.pages.get(&from).ok_or(MemError::NotMapped)?;
        if self.pages.contains_key(&to) {
            return Err(MemError::AlreadyMapped);
        }
        // The old entry's state is returned; the new entry's bits start clear.
        let state = self.page_bits(from);
        self.pages.remove(&from);
        self.used.remove(&from);
        self.pages.insert(to, (frame, rights));
        self.used.insert(to, Cell::new(0));
        self.frames.get_mut(&frame.0).expect("mapped frame is held").mapped_at = Some(to);
        Ok(state)
    }

    /// As the kernel's `map_batch`: every entry checked first (as its single call, then
    /// against the entries before it), then all applied; a refused batch changes nothing.
    fn map_batch(&mut self, ops: &[PageOp]) -> Result<(), (usize, MemError)> {
        if ops.is_empty() {
            return Ok(());
        }
        self.calls.map_batch += 1;
        if ops.len() > MAP_BATCH_MAX {
            return Err((ops.len(), MemError::BadBatch));
        }
        for (i, op) in ops.iter().enumerate() {
            self.check_op(op).map_err(|e| (i, e))?;
            for earlier in &ops[..i] {
                if earlier.va == op.va {
                    return Err((i, MemError::BadBatch));
                }
                if op.op == page_op::MAP && earlier.op == page_op::MAP && earlier.frame == op.frame
                {
                    return Err((i, MemError::FrameInUse));
                }
            }
        }
        for op in ops {
            let va = op.va as usize;
            let rights = Rights(op.rights as u8);
            match op.op {
                page_op::MAP => {
                    let frame = Frame(op.frame);
                    self.frames.get_mut(&frame.0).expect("checked").mapped_at = Some(va);
                    self.pages.insert(va, (frame, rights));
                    self.used.insert(va, Cell::new(0));
                }
                page_op::UNMAP => {
                    let (frame, _) = self.pages.remove(&va).expect("checked");
                    self.used.remove(&va);
                    self.frames.get_mut(&frame.0).expect("mapped frame is held").mapped_at = None;
                }
                _ => self.pages.get_mut(&va).expect("checked").1 = rights,
            }
        }
        Ok(())
    }

    /// As the kernel's `page_state`: every argument checked first, then the bits read and
    /// cleared.
    fn page_state(&mut self, va: usize, states: &mut [u8], clear: u8) -> Result<(), MemError> {
        self.calls.page_state += 1;
        if states.is_empty() || states.len() > MAP_BATCH_MAX {
            return Err(MemError::BadBatch);
        }
        if clear & !page_state::CLEARABLE != 0 {
            return Err(MemError::BadBits);
        }
        for i in 0..states.len() {
            let page = i.checked_mul(PAGE_SIZE).and_then(|o| va.checked_add(o));
            self.managed_page(page.ok_or(MemError::BadAddress)?)?;
        }
        for (i, state) in states.iter_mut().enumerate() {
            let page = va + i * PAGE_SIZE;
            *state = self.page_bits(page);
            if let Some(u) = self.used.get(&page) {
                u.set(u.get() & !clear);
            }
        }
        Ok(())
    }

    fn write(&mut self, va: usize, data: &[u8]) -> Result<(), MemError> {
        self.calls.write += 1;
        let frames = self.copy_pages(va, data.len(), Access::Write)?;
        self.mark_copied(va, data.len(), Access::Write);
        let mut at = va % PAGE_SIZE;
        let mut rest = data;
        for frame in frames {
            let n = rest.len().min(PAGE_SIZE - at);
            let f = self.frames.get_mut(&frame.0).expect("mapped frame is held");
            f.data[at..at + n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            at = 0;
        }
        Ok(())
    }

    fn read(&mut self, va: usize, buf: &mut [u8]) -> Result<(), MemError> {
        self.calls.read += 1;
        let frames = self.copy_pages(va, buf.len(), Access::Read)?;
        self.mark_copied(va, buf.len(), Access::Read);
        let mut at = va % PAGE_SIZE;
        let mut rest = buf;
        for frame in frames {
            let n = rest.len().min(PAGE_SIZE - at);
            let (head, tail) = rest.split_at_mut(n);
            head.copy_from_slice(&self.frames[&frame.0].data[at..at + n]);
            rest = tail;
            at = 0;
        }
        Ok(())
    }

    fn frames_held(&self) -> (usize, usize) {
        self.held
    }
}
