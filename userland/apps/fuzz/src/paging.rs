//! The fuzzer's self-paging calls (`stretch_create_managed`, `frame_alloc`, `frame_free`,
//! `map`, `unmap`, `protect`, `remap`, `map_batch`, `page_state`): the managed stretches and
//! loose frames it holds, how it draws
//! arguments aimed at each documented error (keeping the other arguments valid so that the
//! kernel's earlier checks pass), the outcome its records say each call must have, and what it
//! checks after a call succeeds.
//!
//! The fuzzer never touches a page of a managed stretch except to read, right after a `map`
//! that allowed reading, the word at its start (a frame comes zero-filled and nothing writes
//! managed pages), so none of these calls can fault it: the kernel would deliver such a fault to
//! a domain with no stretch driver. So no page of a managed stretch is ever dirty: `page_state`
//! must report every page it maps as mapped and clean, and every other page as 0.
//!
//! `map` `NoMemory` needs a page table that is missing while the guarantee is full. The kernel
//! makes a managed stretch's tables when it creates it, but a table shared with a neighbouring
//! stretch goes when the neighbour is destroyed and nothing else in the table's 2 MiB is mapped.
//! [`squeeze`] sets that up with calls that are not counted: a 4 MiB managed stretch, a 2 MiB
//! one right after it (so the first page of the second shares a table only with the first),
//! the first destroyed, then the guarantee filled to its last frame with a nailed stretch and
//! guaranteed frames. The counted call is then a `map` at that first page, and [`release`]
//! gives back what filled the guarantee.

use core::sync::atomic::Ordering;

use abi::{
    Call, MAP_BATCH_MAX, PAGE_SIZE, PageOp, Rights, STRETCH_BASE, SysError, USER_END, page_op,
    page_state,
};

use crate::held::{MAX_FRAMES, MAX_MANAGED, Managed, Memory, STATES, STATES_ROOM, in_states};
use crate::own::{Created, Own};
use crate::pools::{self, Rng};
use crate::raw_calls;

/// The managed stretches the drawn calls keep at most: the last two places are left to
/// [`squeeze`] (as the last place for a loose frame is).
const POOL_MANAGED: usize = MAX_MANAGED - 2;
/// The largest managed stretch the kernel accepts (`docs/syscalls.md`: "over 256 MiB").
pub const MANAGED_MAX: usize = 256 << 20;
/// Read, write and execute.
const PAGE_RIGHTS: usize = 7;
/// What one page table maps.
const REGION: usize = 2 << 20;
/// The managed stretch [`squeeze`] destroys, and the one whose first page it maps.
const NEIGHBOUR_BYTES: usize = 2 * REGION;
const SQUEEZED_BYTES: usize = REGION;
/// The guaranteed frames [`squeeze`] takes at most after its nailed stretch (the three frames
/// of page tables `stretch_create` keeps room for, and the pages of a smaller stretch).
const MAX_EXTRA: usize = 16;
/// How many sizes [`squeeze`] tries for its nailed stretch, from the largest the account allows.
const FILL_TRIES: usize = 4;

/// What a call's outcome must be, by the fuzzer's records.
enum Want {
    /// Exactly this.
    Is(Result<(), SysError>),
    /// Success, or this error (which the records cannot predict).
    OkOr(SysError),
    /// One of these errors.
    AnyOf(&'static [SysError]),
}

impl Want {
    fn allows(&self, r: Result<usize, SysError>) -> bool {
        match (self, r) {
            (Want::Is(Ok(())), Ok(_)) | (Want::OkOr(_), Ok(_)) => true,
            (Want::Is(Err(w)), Err(e)) | (Want::OkOr(w), Err(e)) => *w == e,
            (Want::AnyOf(errors), Err(e)) => errors.contains(&e),
            _ => false,
        }
    }
}

/// Are `bits` page rights: at least one of read, write, execute, and no other bit?
fn page_rights(bits: usize) -> bool {
    (1..=PAGE_RIGHTS).contains(&bits)
}

impl Memory {
    fn unmapped_page(&self, rng: &mut Rng, m: &Managed) -> Option<usize> {
        let start = rng.below(m.pages);
        (0..m.pages)
            .map(|i| m.base + (start + i) % m.pages * PAGE_SIZE)
            .find(|&va| self.at(va).is_none())
    }

    fn mapped_page(&self, rng: &mut Rng) -> Option<usize> {
        let n = self.frames().iter().filter(|f| f.mapped.is_some()).count();
        let k = (n > 0).then(|| rng.below(n))?;
        self.frames().iter().filter_map(|f| f.mapped.map(|(va, _)| va)).nth(k)
    }

    fn frame_where(&self, rng: &mut Rng, mapped: bool) -> Option<usize> {
        let n = self.frames().iter().filter(|f| f.mapped.is_some() == mapped).count();
        if n == 0 {
            return None;
        }
        let k = rng.below(n);
        self.frames().iter().filter(|f| f.mapped.is_some() == mapped).nth(k).map(|f| f.number)
    }

    /// A page right the stretch `m` was not made with, if there is one.
    fn beyond(m: &Managed) -> Option<usize> {
        [Rights::READ.0, Rights::WRITE.0, Rights::EXECUTE.0]
            .into_iter()
            .map(usize::from)
            .find(|r| m.rights & r == 0)
    }

    /// Valid rights for a page of `m`: a non-empty subset of its rights.
    fn rights_within(rng: &mut Rng, m: &Managed) -> usize {
        loop {
            let r = rng.below(8) & m.rights;
            if r != 0 {
                return r;
            }
        }
    }

    /// Arguments for a call `c` of the self-paging kind, aimed at one of its outcomes.
    pub fn draw(&self, c: Call, rng: &mut Rng, own: &Own, a: &mut [usize; 6]) {
        let nailed = own.addrs[0] & !(PAGE_SIZE - 1);
        let foreign = pools::foreign(rng, own) & !(PAGE_SIZE - 1);
        let m = (!self.managed().is_empty()).then(|| rng.pick(self.managed()));
        match c {
            Call::StretchCreateManaged => {
                // Now and then with the meta bit, which the owner holds anyway.
                a[1] =
                    rng.below(8).max(1) | if rng.one_in(4) { Rights::META.0 as usize } else { 0 };
                a[0] = match rng.below(8) {
                    0 => 0,
                    1 => rng.pick(&[MANAGED_MAX + 1, usize::MAX, i64::MIN as usize]),
                    2 => MANAGED_MAX,
                    3 => {
                        a[1] = rng.pick(&[0, Rights::META.0 as usize, 0x10, 0x11, usize::MAX]);
                        PAGE_SIZE
                    }
                    _ if self.managed().len() >= POOL_MANAGED => {
                        pools::size(rng).max(MANAGED_MAX + 1)
                    }
                    _ => (1 + rng.below(8)) * PAGE_SIZE - rng.below(2),
                };
            }
            Call::FrameAlloc => {
                a[0] = match rng.below(6) {
                    0 => rng.pick(&[2, 7, usize::MAX]),
                    1 => 1,
                    _ if self.frames().len() >= MAX_FRAMES - 1 => 1,
                    _ => 0,
                };
            }
            Call::FrameFree => {
                a[0] = match rng.below(4) {
                    0 => rng.pick(&[0, 1, usize::MAX, 1 << 40, 1 << 52]),
                    1 => self.frame_where(rng, true).unwrap_or(0),
                    _ if self.frames().len() > MAX_FRAMES / 2 => {
                        self.frame_where(rng, false).unwrap_or(1)
                    }
                    _ => self.frame_where(rng, true).unwrap_or(usize::MAX),
                };
            }
            Call::Map | Call::Protect => {
                let Some(m) = m else {
                    a[0] = if rng.one_in(2) { nailed } else { foreign };
                    return;
                };
                let page = self.unmapped_page(rng, &m).unwrap_or(m.base);
                let mapped = self.mapped_page(rng);
                let valid = Self::rights_within(rng, &m);
                let (free, used) = (self.frame_where(rng, false), self.frame_where(rng, true));
                let (va, rights, frame) = match rng.below(10) {
                    0 => (m.base + 1 + rng.below(PAGE_SIZE - 1), valid, free),
                    1 => (nailed, valid, free),
                    2 => (foreign, valid, free),
                    3 => match Self::beyond(&m) {
                        Some(r) => (page, r, free),
                        None => (page, rng.pick(&[0, 8, 0x10]), free),
                    },
                    4 => (page, rng.pick(&[0, 8, 9, 0xf, 0x10, usize::MAX]), free),
                    5 if c == Call::Map => (page, valid, Some(rng.pick(&[0, 1, 1 << 40, 1 << 52]))),
                    6 if c == Call::Map => (page, valid, used.or(free)),
                    7 if c == Call::Map => (mapped.unwrap_or(page), valid, free),
                    5..=7 => (page, valid, free),
                    _ if c == Call::Protect => (mapped.unwrap_or(page), valid, free),
                    _ => (page, valid, free),
                };
                a[0] = va;
                if c == Call::Map {
                    a[1] = frame.unwrap_or(usize::MAX);
                    a[2] = rights;
                } else {
                    a[1] = rights;
                }
            }
            Call::Remap => {
                // From a mapped page (or a bad one) to an unmapped page of a managed stretch
                // (or a mapped, misaligned, foreign or nailed one), with rights aimed at each
                // error.
                let from = self.mapped_page(rng);
                let to = m.and_then(|m| self.unmapped_page(rng, &m));
                a[0] = match rng.below(8) {
                    0 => m.map_or(foreign, |m| m.base + 1 + rng.below(PAGE_SIZE - 1)),
                    1 => nailed,
                    2 => foreign,
                    3 => to.unwrap_or(foreign),
                    _ => from.or(to).unwrap_or(foreign),
                };
                a[1] = match rng.below(8) {
                    0 => to.map_or(foreign, |t| t + 8),
                    1 => nailed,
                    2 => foreign,
                    3 => self.mapped_page(rng).unwrap_or(foreign),
                    4 => a[0],
                    _ => to.unwrap_or(foreign),
                };
                let target = self.stretch_of(a[1]);
                a[2] = match (rng.below(6), target) {
                    (0, _) => rng.pick(&[0, 8, 0x10, usize::MAX]),
                    (1, Some(t)) => Self::beyond(t).unwrap_or(t.rights),
                    (_, Some(t)) => Self::rights_within(rng, t),
                    (_, None) => rng.below(7) + 1,
                };
            }
            Call::Unmap => {
                let page = m.and_then(|m| self.unmapped_page(rng, &m));
                a[0] = match rng.below(6) {
                    0 => m.map_or(foreign, |m| m.base + 1 + rng.below(PAGE_SIZE - 1)),
                    1 => nailed,
                    2 => foreign,
                    3 => page.unwrap_or(foreign),
                    _ => self.mapped_page(rng).or(page).unwrap_or(foreign),
                };
            }
            _ => {}
        }
    }

    /// What the outcome of call `c` with `a` must be, as far as the records tell.
    fn want(&self, c: Call, a: &[usize; 6]) -> Option<Want> {
        use SysError::*;
        let page = |va: usize| {
            if !va.is_multiple_of(PAGE_SIZE) {
                return Err(Want::Is(Err(InvalidArgument)));
            }
            // Not in a managed stretch: nailed memory of its own, or not its own.
            self.stretch_of(va).ok_or(Want::AnyOf(&[BadAddress, NotManaged]))
        };
        let rights = |m: &Managed, bits: usize| match bits {
            _ if !page_rights(bits) => Err(Want::Is(Err(InvalidArgument))),
            _ if bits & !m.rights != 0 => Err(Want::Is(Err(PermissionDenied))),
            _ => Ok(()),
        };
        let want = match c {
            // The meta bit is allowed (the owner holds it anyway).
            Call::StretchCreateManaged
                if a[0] == 0 || a[0] > MANAGED_MAX || !page_rights(a[1] & !8) =>
            {
                Want::Is(Err(InvalidArgument))
            }
            Call::FrameAlloc => match a[0] {
                0 => Want::OkOr(NoMemory),
                // The manifest gives the fuzzer no optimistic frames.
                1 => Want::Is(Err(NoMemory)),
                _ => Want::Is(Err(InvalidArgument)),
            },
            Call::FrameFree => match self.frame(a[0]) {
                Some(f) if f.mapped.is_some() => Want::Is(Err(InUse)),
                Some(_) => Want::Is(Ok(())),
                None => Want::Is(Err(NotFound)),
            },
            Call::Map => {
                let m = match page(a[0]) {
                    Ok(m) => m,
                    Err(w) => return Some(w),
                };
                if let Err(w) = rights(m, a[2]) {
                    return Some(w);
                }
                match self.frame(a[1]) {
                    None => Want::Is(Err(NotFound)),
                    Some(f) if f.mapped.is_some() => Want::Is(Err(InUse)),
                    Some(_) if self.at(a[0]).is_some() => Want::Is(Err(AlreadyMapped)),
                    // NoMemory if a table of the page went with a neighbour and the guarantee
                    // is full.
                    Some(_) => Want::OkOr(NoMemory),
                }
            }
            Call::Unmap => match page(a[0]) {
                Err(w) => w,
                Ok(_) if self.at(a[0]).is_some() => Want::Is(Ok(())),
                Ok(_) => Want::Is(Err(NotMapped)),
            },
            Call::Protect => {
                let m = match page(a[0]) {
                    Ok(m) => m,
                    Err(w) => return Some(w),
                };
                match rights(m, a[1]) {
                    Err(w) => w,
                    Ok(()) if self.at(a[0]).is_some() => Want::Is(Ok(())),
                    Ok(()) => Want::Is(Err(NotMapped)),
                }
            }
            // In the kernel's order: the same page twice, the source page, the target page,
            // the rights, then the mappings.
            Call::Remap => {
                if a[0] == a[1] {
                    return Some(Want::Is(Err(InvalidArgument)));
                }
                if let Err(w) = page(a[0]) {
                    return Some(w);
                }
                let t = match page(a[1]) {
                    Ok(t) => t,
                    Err(w) => return Some(w),
                };
                if let Err(w) = rights(t, a[2]) {
                    return Some(w);
                }
                match (self.at(a[0]), self.at(a[1])) {
                    (None, _) => Want::Is(Err(NotMapped)),
                    (Some(_), Some(_)) => Want::Is(Err(AlreadyMapped)),
                    (Some(_), None) => Want::OkOr(NoMemory),
                }
            }
            _ => return None,
        };
        Some(want)
    }

    /// Checks the outcome `r` of call `c` with arguments `a` against the records, then, if it
    /// succeeded, brings them up to date and checks what it made; returns what went wrong, if
    /// anything.
    pub fn after(
        &mut self,
        c: Call,
        a: [usize; 6],
        r: Result<usize, SysError>,
    ) -> Result<(), &'static str> {
        if self.want(c, &a).is_some_and(|w| !w.allows(r)) {
            return Err(match c {
                Call::StretchCreateManaged => "stretch_create_managed accepted invalid arguments",
                Call::FrameAlloc => "frame_alloc's outcome is not the one its kind allows",
                Call::FrameFree => "frame_free's outcome disagrees with the frames it holds",
                Call::Map => "map's outcome disagrees with the stretches and frames it holds",
                Call::Unmap => "unmap's outcome disagrees with the pages it mapped",
                Call::Remap => "remap's outcome disagrees with the pages it mapped",
                _ => "protect's outcome disagrees with the pages it mapped",
            });
        }
        let Ok(value) = r else { return Ok(()) };
        match c {
            Call::StretchCreateManaged => {
                let pages = a[0].div_ceil(PAGE_SIZE);
                let end = value.checked_add(pages * PAGE_SIZE);
                if !value.is_multiple_of(PAGE_SIZE)
                    || value < STRETCH_BASE
                    || end.is_none_or(|e| e > USER_END)
                {
                    return Err("stretch_create_managed returned a base outside the stretch range");
                }
                if self.stretch_of(value).is_some() {
                    return Err(
                        "stretch_create_managed returned a base inside another of its stretches",
                    );
                }
                let m = Managed { base: value, pages, rights: a[1] & PAGE_RIGHTS };
                if !self.add_managed(m) {
                    return Err("more managed stretches than the fuzzer keeps track of");
                }
            }
            Call::FrameAlloc => {
                if self.frame(value).is_some() {
                    return Err("frame_alloc handed out a frame the fuzzer already holds");
                }
                if !self.add_frame(value) {
                    return Err("more frames than the fuzzer keeps track of");
                }
            }
            Call::FrameFree => self.forget_frame(a[0]),
            Call::Map => {
                let (va, rights) = (a[0], a[2]);
                if let Some(f) = self.frame_mut(a[1]) {
                    f.mapped = Some((va, rights));
                }
                if rights & usize::from(Rights::READ.0 | Rights::WRITE.0) != 0 {
                    // SAFETY: the page was just mapped readable with a frame the fuzzer holds;
                    // nothing writes managed pages, and frames come zero-filled.
                    let word = unsafe { (va as *const u64).read_volatile() };
                    if word != 0 {
                        return Err("a freshly mapped frame does not read zero");
                    }
                }
            }
            Call::Unmap => {
                let number = self.at(a[0]).map_or(usize::MAX, |f| f.number);
                if number != value {
                    return Err("unmap returned another frame than the one mapped");
                }
                if let Some(f) = self.frame_mut(number) {
                    f.mapped = None;
                }
            }
            Call::Protect => {
                let number = self.at(a[0]).map_or(usize::MAX, |f| f.number);
                if let Some(f) = self.frame_mut(number) {
                    f.mapped = Some((a[0], a[1]));
                }
            }
            Call::Remap => {
                // The page's state as it left: mapped, perhaps read, never written (nothing
                // writes managed pages here).
                let clean = usize::from(page_state::MAPPED | page_state::ACCESSED);
                if value & usize::from(page_state::MAPPED) == 0 || value & !clean != 0 {
                    return Err("remap returned a state other than mapped and unwritten");
                }
                let number = self.at(a[0]).map_or(usize::MAX, |f| f.number);
                if let Some(f) = self.frame_mut(number) {
                    f.mapped = Some((a[1], a[2]));
                }
                if a[2] & usize::from(Rights::READ.0 | Rights::WRITE.0) != 0 {
                    // SAFETY: the frame was just moved to this page, readable; nothing writes
                    // managed pages, and frames come zero-filled.
                    let word = unsafe { (a[1] as *const u64).read_volatile() };
                    if word != 0 {
                        return Err("a remapped frame does not read zero");
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Room for the entries of a `map_batch` (one more than the kernel takes).
pub const BATCH_ROOM: usize = MAP_BATCH_MAX + 1;
/// The longest batch drawn to succeed (short, so that the records have pages and frames for
/// it).
const BATCH_DRAWN: usize = 6;

impl Memory {
    /// Arguments for a `map_batch` whose entries are written to `ops` (the fuzzer's own
    /// memory): a batch of valid maps (free frames at unmapped pages), unmaps and protects
    /// (mapped pages), one entry of which is often spoilt to aim at one of the errors; or a
    /// refused count or pointer.
    pub fn draw_batch(
        &self,
        rng: &mut Rng,
        own: &Own,
        ops: &mut [PageOp; BATCH_ROOM],
        a: &mut [usize; 6],
    ) {
        let nailed = own.addrs[0] & !(PAGE_SIZE - 1);
        let foreign = pools::foreign(rng, own) & !(PAGE_SIZE - 1);
        let m = (!self.managed().is_empty()).then(|| rng.pick(self.managed()));
        a[0] = ops.as_ptr() as usize;
        let mut n = 0;
        // Valid entries, on distinct pages with distinct frames.
        let want = 1 + rng.below(BATCH_DRAWN);
        let mut free = self.frames().iter().filter(|f| f.mapped.is_none());
        let skip = rng.below(4);
        let mut mapped = self.frames().iter().filter_map(|f| f.mapped).skip(skip);
        if let Some(m) = m {
            let start = rng.below(m.pages);
            let pages = (0..m.pages).map(|i| m.base + (start + i) % m.pages * PAGE_SIZE);
            for va in pages.filter(|&va| self.at(va).is_none()) {
                let Some(f) = free.next() else { break };
                if n >= want || rng.one_in(2) {
                    break;
                }
                let rights = Rights(Self::rights_within(rng, &m) as u8);
                ops[n] = PageOp::map(va, f.number, rights);
                n += 1;
            }
        }
        while n < want {
            let Some((va, _)) = mapped.next() else { break };
            let Some(s) = self.stretch_of(va) else { continue };
            ops[n] = if rng.one_in(2) {
                PageOp::unmap(va)
            } else {
                PageOp::protect(va, Rights(Self::rights_within(rng, s) as u8))
            };
            n += 1;
        }
        if n == 0 {
            ops[0] = PageOp::unmap(m.map_or(foreign, |m| m.base));
            n = 1;
        }
        a[1] = n;
        // Now and then one entry spoilt, or the batch itself.
        let i = rng.below(n);
        let e = &mut ops[i];
        let page = m.and_then(|m| self.unmapped_page(rng, &m));
        match rng.below(24) {
            0 => a[1] = rng.pick(&[0, MAP_BATCH_MAX + 1, usize::MAX]),
            1 => a[0] += rng.pick(&[1, 4]),
            2 => a[0] = foreign,
            3 => e.va += 1 + rng.below(PAGE_SIZE - 1) as u64,
            4 => e.va = nailed as u64,
            5 => e.va = foreign as u64,
            6 => e.op = rng.pick(&[3, 7, u64::MAX]),
            7 if e.op != page_op::UNMAP => e.rights = rng.pick(&[0, 8, 9, 0x10, u64::MAX]),
            8 => {
                let beyond = self.stretch_of(e.va as usize).and_then(Self::beyond);
                e.rights = beyond.unwrap_or(0x10) as u64;
                e.op = if e.op == page_op::UNMAP { page_op::PROTECT } else { e.op };
            }
            9 => *e = PageOp { op: page_op::MAP, frame: rng.pick(&[0, 1, 1 << 40, 1 << 52]), ..*e },
            10 => {
                let used = self.frame_where(rng, true).unwrap_or(usize::MAX);
                e.op = page_op::MAP;
                e.frame = used as u64;
            }
            11 => {
                // A map at a mapped page.
                let free = self.frame_where(rng, false).unwrap_or(usize::MAX);
                let at = self.mapped_page(rng).map_or(e.va, |v| v as u64);
                *e = PageOp { op: page_op::MAP, va: at, frame: free as u64, ..*e };
            }
            12 => {
                // An unmap or protect of an unmapped page.
                *e = PageOp { va: page.map_or(e.va, |v| v as u64), ..PageOp::unmap(0) };
                if rng.one_in(2) {
                    e.op = page_op::PROTECT;
                    e.rights = m.map_or(1, |m| Self::rights_within(rng, &m)) as u64;
                }
            }
            13 if n < BATCH_ROOM => {
                // The same page twice, or a frame mapped twice.
                ops[n] = ops[rng.below(n)];
                a[1] = n + 1;
            }
            _ => {}
        }
    }

    /// What the outcome of a `map_batch` of `ops` (as `a` names them) must be: the first
    /// entry's refusal, in the kernel's order (the entry as its single call, then against the
    /// entries before it), or success.
    fn want_batch(&self, ops: &[PageOp], a: &[usize; 6]) -> Want {
        use SysError::*;
        let (ptr, count) = (a[0], a[1]);
        if count == 0 || count > MAP_BATCH_MAX || !ptr.is_multiple_of(8) {
            return Want::Is(Err(InvalidArgument));
        }
        if ptr != ops.as_ptr() as usize || count > ops.len() {
            return Want::Is(Err(BadAddress));
        }
        let ops = &ops[..count];
        for (i, op) in ops.iter().enumerate() {
            let va = op.va as usize;
            if !va.is_multiple_of(PAGE_SIZE) {
                return Want::Is(Err(InvalidArgument));
            }
            let Some(m) = self.stretch_of(va) else {
                return Want::AnyOf(&[BadAddress, NotManaged]);
            };
            let rights = || match op.rights as usize {
                bits if !page_rights(bits) || op.rights > PAGE_RIGHTS as u64 => {
                    Err(Want::Is(Err(InvalidArgument)))
                }
                bits if bits & !m.rights != 0 => Err(Want::Is(Err(PermissionDenied))),
                _ => Ok(()),
            };
            let refused = match op.op {
                page_op::MAP => rights().err().or_else(|| match self.frame(op.frame as usize) {
                    _ if op.frame > usize::MAX as u64 / PAGE_SIZE as u64 => {
                        Some(Want::Is(Err(NotFound)))
                    }
                    None => Some(Want::Is(Err(NotFound))),
                    Some(f) if f.mapped.is_some() => Some(Want::Is(Err(InUse))),
                    Some(_) if self.at(va).is_some() => Some(Want::Is(Err(AlreadyMapped))),
                    Some(_) => None,
                }),
                page_op::UNMAP | page_op::PROTECT => {
                    let r = if op.op == page_op::PROTECT { rights().err() } else { None };
                    r.or_else(|| self.at(va).is_none().then_some(Want::Is(Err(NotMapped))))
                }
                _ => Some(Want::Is(Err(InvalidArgument))),
            };
            if let Some(w) = refused {
                return w;
            }
            for earlier in &ops[..i] {
                if earlier.va == op.va {
                    return Want::Is(Err(InvalidArgument));
                }
                if op.op == page_op::MAP && earlier.op == page_op::MAP && earlier.frame == op.frame
                {
                    return Want::Is(Err(InUse));
                }
            }
        }
        // NoMemory if a table of a page went with a neighbour and the guarantee is full.
        Want::OkOr(NoMemory)
    }

    /// Checks the outcome `r` of a `map_batch` of `ops` with arguments `a` against the
    /// records, then, if it succeeded, brings them up to date and reads each page it mapped.
    pub fn after_batch(
        &mut self,
        ops: &[PageOp],
        a: [usize; 6],
        r: Result<usize, SysError>,
    ) -> Result<(), &'static str> {
        if !self.want_batch(ops, &a).allows(r) {
            return Err("map_batch's outcome disagrees with the pages and frames it holds");
        }
        if r.is_err() {
            return Ok(());
        }
        for op in &ops[..a[1]] {
            let (va, rights) = (op.va as usize, op.rights as usize);
            let number = match op.op {
                page_op::MAP => op.frame as usize,
                _ => self.at(va).map_or(usize::MAX, |f| f.number),
            };
            let Some(f) = self.frame_mut(number) else { continue };
            match op.op {
                page_op::UNMAP => f.mapped = None,
                _ => f.mapped = Some((va, rights)),
            }
            if op.op == page_op::MAP && rights & usize::from(Rights::READ.0 | Rights::WRITE.0) != 0
            {
                // SAFETY: the page was just mapped readable with a frame the fuzzer holds;
                // nothing writes managed pages, and frames come zero-filled.
                let word = unsafe { (va as *const u64).read_volatile() };
                if word != 0 {
                    return Err("a frame mapped by map_batch does not read zero");
                }
            }
        }
        Ok(())
    }
}

/// The longest `page_state` drawn to succeed.
const STATES_DRAWN: usize = 8;

impl Memory {
    /// Is `out` the start of an unmapped page of a managed stretch the fuzzer holds (where
    /// `page_state` must refuse to write, and could not)?
    pub fn unmapped_managed(&self, out: usize) -> bool {
        out.is_multiple_of(PAGE_SIZE) && self.stretch_of(out).is_some() && self.at(out).is_none()
    }

    /// Arguments for a `page_state`: a run of pages of a managed stretch, [`STATES`] (or a
    /// place inside it) for the states, bits to clear; now and then one argument spoilt to aim
    /// at an error: the count, the page (misaligned, nailed, foreign, running off the
    /// stretch), the bits, or where the states go (foreign, an unmapped managed page).
    pub fn draw_state(&self, rng: &mut Rng, own: &Own, a: &mut [usize; 6]) {
        let nailed = own.addrs[0] & !(PAGE_SIZE - 1);
        let foreign = pools::foreign(rng, own) & !(PAGE_SIZE - 1);
        let m = (!self.managed().is_empty()).then(|| rng.pick(self.managed()));
        let count = 1 + rng.below(m.map_or(1, |m| m.pages.min(STATES_DRAWN)));
        a[0] = match m {
            Some(m) => m.base + rng.below(m.pages - count + 1) * PAGE_SIZE,
            None if rng.one_in(2) => nailed,
            None => foreign,
        };
        a[1] = count;
        a[2] = STATES.as_ptr() as usize + rng.below(STATES_ROOM - count + 1);
        a[3] = rng.pick(&[0, 0, 2, 4, 6]);
        let unmapped = m.and_then(|m| self.unmapped_page(rng, &m));
        let states = STATES.as_ptr() as usize;
        match (rng.below(16), m) {
            (0, _) => {
                // A count the kernel refuses, with room for it where it can have room.
                a[1] = rng.pick(&[0, MAP_BATCH_MAX + 1, usize::MAX]);
                a[2] = if a[1] == usize::MAX { foreign } else { states };
            }
            (1, _) => {
                a[1] = MAP_BATCH_MAX;
                a[2] = states;
            }
            (2, _) => a[0] += 1 + rng.below(PAGE_SIZE - 1),
            (3, _) => a[0] = nailed,
            (4, _) => a[0] = foreign,
            (5, _) => a[3] = rng.pick(&[1, 3, 7, 8, 0x80, usize::MAX]),
            (6, _) => a[2] = pools::foreign(rng, own),
            (7, _) => a[2] = unmapped.unwrap_or(foreign),
            (8, Some(m)) => {
                // The last page and the one past the stretch.
                a[0] = m.base + (m.pages - 1) * PAGE_SIZE;
                a[1] = 2;
                a[2] = states;
            }
            _ => {}
        }
    }

    /// What the outcome of a `page_state` with `a` must be, in the kernel's order: the count
    /// and the bits, each page, then where the states go.
    fn want_state(&self, a: &[usize; 6]) -> Want {
        use SysError::*;
        let (va, count, out, clear) = (a[0], a[1], a[2], a[3]);
        let clearable = usize::from(page_state::CLEARABLE);
        if count == 0 || count > MAP_BATCH_MAX || clear & !clearable != 0 {
            return Want::Is(Err(InvalidArgument));
        }
        if !va.is_multiple_of(PAGE_SIZE) {
            return Want::Is(Err(InvalidArgument));
        }
        for i in 0..count {
            let Some(page) = va.checked_add(i * PAGE_SIZE) else {
                return Want::Is(Err(BadAddress));
            };
            if self.stretch_of(page).is_none() {
                return Want::AnyOf(&[BadAddress, NotManaged]);
            }
        }
        if in_states(out, count) { Want::Is(Ok(())) } else { Want::Is(Err(BadAddress)) }
    }

    /// Checks the outcome `r` of a `page_state` with `a` against the records, then, if it
    /// succeeded, each state it wrote: mapped exactly where a frame is, never dirty (nothing
    /// writes managed pages), no bit beyond the three.
    pub fn after_state(
        &self,
        a: [usize; 6],
        r: Result<usize, SysError>,
    ) -> Result<(), &'static str> {
        if !self.want_state(&a).allows(r) {
            return Err("page_state's outcome disagrees with the pages it holds");
        }
        if r.is_err() {
            return Ok(());
        }
        let first = a[2] - STATES.as_ptr() as usize;
        for i in 0..a[1] {
            let state = STATES[first + i].load(Ordering::Relaxed);
            let mapped = self.at(a[0] + i * PAGE_SIZE).is_some();
            let known = page_state::MAPPED | page_state::ACCESSED | page_state::DIRTY;
            if state & !known != 0 {
                return Err("page_state reported unknown bits");
            }
            if (state & page_state::MAPPED != 0) != mapped {
                return Err("page_state's mapped bit disagrees with the pages it mapped");
            }
            if !mapped && state != 0 {
                return Err("page_state reported bits for an unmapped page");
            }
            if state & page_state::DIRTY != 0 {
                return Err("page_state reported dirty a page nothing wrote");
            }
        }
        Ok(())
    }
}

/// What [`squeeze`] holds to fill the guarantee until its `map` was made.
pub struct Squeeze {
    /// The nailed stretch (recorded in `Own` meanwhile, so that the gate lets it be
    /// destroyed).
    fill: Option<usize>,
    /// The guaranteed frames taken after it.
    extra: [usize; MAX_EXTRA],
    n_extra: usize,
}

/// One uncounted call through the gate.
fn call(own: &Own, c: Call, a: [usize; 3]) -> Result<usize, SysError> {
    let args = [a[0], a[1], a[2], 0, 0, 0];
    raw_calls::call(own, c as usize, args).unwrap_or(Err(SysError::PermissionDenied))
}

/// Prepares a `map` that needs a page table while the fuzzer's guarantee is full (module
/// documentation): `Ok(None)` if the set-up cannot be made now (no room in its records, the
/// guarantee too full already, or another domain's stretch came between the two managed
/// stretches), else the arguments of the `map` and what fills the guarantee, to give back with
/// [`release`] after the call. `Err` if a call the set-up relies on failed.
pub fn squeeze(own: &mut Own) -> Result<Option<([usize; 6], Squeeze)>, &'static str> {
    let r = Rights::READ.0 as usize;
    if own.mem.managed().len() > POOL_MANAGED || own.mem.frames().len() == MAX_FRAMES || own.full()
    {
        return Ok(None);
    }
    let Ok(neighbour) = call(own, Call::StretchCreateManaged, [NEIGHBOUR_BYTES, r, 0]) else {
        return Ok(None);
    };
    own.mem.add_managed(Managed { base: neighbour, pages: NEIGHBOUR_BYTES / PAGE_SIZE, rights: r });
    let second = call(own, Call::StretchCreateManaged, [SQUEEZED_BYTES, r, 0]);
    if let Ok(base) = second {
        own.mem.add_managed(Managed { base, pages: SQUEEZED_BYTES / PAGE_SIZE, rights: r });
    }
    // The neighbour goes, and with it the table its end shares with the second stretch.
    if call(own, Call::StretchDestroy, [neighbour, 0, 0]) != Ok(0) {
        return Err("squeeze: destroying a managed stretch failed");
    }
    own.mem.destroyed(neighbour);
    let Ok(page) = second else { return Ok(None) };
    if page & !(REGION - 1) >= neighbour + NEIGHBOUR_BYTES {
        return Ok(None);
    }
    // The frame to map; taking it also brings the control block's account up to date.
    let Ok(frame) = call(own, Call::FrameAlloc, [abi::frame_kind::GUARANTEED, 0, 0]) else {
        return Ok(None);
    };
    own.mem.add_frame(frame);
    let mut s = Squeeze { fill: None, extra: [0; MAX_EXTRA], n_extra: 0 };
    let account = &tessera::dcb().frames;
    let guaranteed = account.guaranteed.load(core::sync::atomic::Ordering::Acquire);
    let held = account.guaranteed_held.load(core::sync::atomic::Ordering::Acquire);
    // `stretch_create` keeps room for three frames of page tables.
    let most = guaranteed.saturating_sub(held + 3) as usize;
    let rw = (Rights::READ.0 | Rights::WRITE.0) as usize;
    for pages in (most.saturating_sub(FILL_TRIES - 1)..=most).rev().filter(|&p| p > 0) {
        if let Ok(base) = call(own, Call::StretchCreate, [pages * PAGE_SIZE, rw, 0]) {
            own.record(Created { base, pages, rights: rw as u8 | Rights::META.0, marker: 0 });
            s.fill = Some(base);
            break;
        }
    }
    while s.n_extra < MAX_EXTRA {
        match call(own, Call::FrameAlloc, [abi::frame_kind::GUARANTEED, 0, 0]) {
            Ok(f) => {
                s.extra[s.n_extra] = f;
                s.n_extra += 1;
            }
            Err(SysError::NoMemory) => return Ok(Some(([page, frame, r, 0, 0, 0], s))),
            Err(_) => break,
        }
    }
    release(own, s)?;
    Ok(None)
}

/// Gives back what filled the guarantee for a [`squeeze`].
pub fn release(own: &mut Own, s: Squeeze) -> Result<(), &'static str> {
    let mut ok = true;
    if let Some(base) = s.fill {
        ok &= call(own, Call::StretchDestroy, [base, 0, 0]) == Ok(0);
        own.forget(base);
    }
    for &f in &s.extra[..s.n_extra] {
        ok &= call(own, Call::FrameFree, [f, 0, 0]) == Ok(0);
    }
    if ok { Ok(()) } else { Err("squeeze: giving back what filled the guarantee failed") }
}
