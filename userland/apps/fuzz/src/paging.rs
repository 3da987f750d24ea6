//! The fuzzer's self-paging calls (`stretch_create_managed`, `frame_alloc`, `frame_free`,
//! `map`, `unmap`, `protect`): the managed stretches and loose frames it holds, how it draws
//! arguments aimed at each documented error (keeping the other arguments valid so that the
//! kernel's earlier checks pass), and what it checks after a call succeeds.
//!
//! The fuzzer never touches a page of a managed stretch except to read, right after a `map`
//! that allowed reading, the word at its start (a frame comes zero-filled and nothing writes
//! managed pages), so none of these calls can fault it: the kernel would deliver such a fault to
//! a domain with no stretch driver.

use abi::{Call, PAGE_SIZE, Rights, STRETCH_BASE, USER_END};

use crate::own::Own;
use crate::pools::{self, Rng};

/// At most this many managed stretches exist at once.
const MAX_MANAGED: usize = 6;
/// At most this many loose frames are held at once.
const MAX_FRAMES: usize = 48;
/// The largest managed stretch the kernel accepts (`docs/syscalls.md`: "over 256 MiB").
pub const MANAGED_MAX: usize = 256 << 20;
/// Read, write and execute.
const PAGE_RIGHTS: u8 = 7;

/// A managed stretch the fuzzer created.
#[derive(Clone, Copy)]
pub struct Managed {
    /// Its base.
    pub base: usize,
    /// Its size in pages.
    pub pages: usize,
    /// The page rights it was made with.
    pub rights: u8,
}

/// A loose frame the fuzzer holds, and where it is mapped.
#[derive(Clone, Copy)]
pub struct Loose {
    /// Its frame number.
    pub number: usize,
    /// The page it is mapped at, and with which rights.
    pub mapped: Option<(usize, u8)>,
}

/// What the fuzzer holds of self-paging.
pub struct Memory {
    managed: [Managed; MAX_MANAGED],
    n_managed: usize,
    frames: [Loose; MAX_FRAMES],
    n_frames: usize,
}

impl Memory {
    /// Nothing held.
    pub const fn new() -> Memory {
        Memory {
            managed: [Managed { base: 0, pages: 0, rights: 0 }; MAX_MANAGED],
            n_managed: 0,
            frames: [Loose { number: 0, mapped: None }; MAX_FRAMES],
            n_frames: 0,
        }
    }

    /// The managed stretches.
    pub fn managed(&self) -> &[Managed] {
        &self.managed[..self.n_managed]
    }

    /// The loose frames.
    pub fn frames(&self) -> &[Loose] {
        &self.frames[..self.n_frames]
    }

    fn frame_mut(&mut self, number: usize) -> Option<&mut Loose> {
        self.frames[..self.n_frames].iter_mut().find(|f| f.number == number)
    }

    /// The frame mapped at page `va`.
    fn at(&self, va: usize) -> Option<&Loose> {
        self.frames().iter().find(|f| f.mapped.is_some_and(|(p, _)| p == va))
    }

    /// The managed stretch containing `va`.
    fn stretch_of(&self, va: usize) -> Option<&Managed> {
        self.managed().iter().find(|m| (m.base..m.base + m.pages * PAGE_SIZE).contains(&va))
    }

    /// Everything held, which the fuzzer now forgets (to give it back).
    pub fn take_all(&mut self) -> Memory {
        core::mem::replace(self, Memory::new())
    }

    fn unmapped_page(&self, rng: &mut Rng, m: &Managed) -> Option<usize> {
        let start = rng.below(m.pages);
        (0..m.pages)
            .map(|i| m.base + (start + i) % m.pages * PAGE_SIZE)
            .find(|&va| self.at(va).is_none())
    }

    fn mapped_page(&self, rng: &mut Rng) -> Option<usize> {
        let mapped: Option<usize> = {
            let n = self.frames().iter().filter(|f| f.mapped.is_some()).count();
            (n > 0).then(|| rng.below(n))
        };
        let k = mapped?;
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
            .find(|r| m.rights & r == 0)
            .map(|r| r as usize)
    }

    /// Valid rights for a page of `m`: a non-empty subset of its rights.
    fn rights_within(rng: &mut Rng, m: &Managed) -> usize {
        loop {
            let r = (rng.below(8) as u8) & m.rights;
            if r != 0 {
                return r as usize;
            }
        }
    }

    /// Arguments for a call `c` of the self-paging kind, aimed at one of its outcomes.
    pub fn draw(&self, c: Call, rng: &mut Rng, own: &Own, a: &mut [usize; 6]) {
        let nailed = own.addrs[0] & !(PAGE_SIZE - 1);
        let foreign = pools::foreign(rng, own) & !(PAGE_SIZE - 1);
        let m = (self.n_managed > 0).then(|| rng.pick(self.managed()));
        match c {
            Call::StretchCreateManaged => {
                a[1] = rng.below(8).max(1);
                a[0] = match rng.below(8) {
                    0 => 0,
                    1 => MANAGED_MAX + 1,
                    2 => MANAGED_MAX,
                    3 => {
                        a[1] = rng.pick(&[0, Rights::META.0 as usize, 0x10, usize::MAX]);
                        PAGE_SIZE
                    }
                    _ if self.n_managed == MAX_MANAGED => pools::size(rng).max(MANAGED_MAX + 1),
                    _ => (1 + rng.below(8)) * PAGE_SIZE,
                };
            }
            Call::FrameAlloc => {
                a[0] = match rng.below(6) {
                    0 => rng.pick(&[2, 7, usize::MAX]),
                    1 => 1,
                    _ if self.n_frames == MAX_FRAMES => 1,
                    _ => 0,
                };
            }
            Call::FrameFree => {
                a[0] = match rng.below(4) {
                    0 => rng.pick(&[0, 1, usize::MAX, 1 << 40]),
                    1 => self.frame_where(rng, true).unwrap_or(0),
                    _ if self.n_frames > MAX_FRAMES / 2 => {
                        self.frame_where(rng, false).unwrap_or(1)
                    }
                    _ => self.frame_where(rng, true).unwrap_or(usize::MAX),
                };
            }
            Call::Map | Call::Protect => {
                let Some(m) = m else {
                    a[0] = foreign;
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
                    4 => (page, rng.pick(&[0, 8, 9, 0x10, usize::MAX]), free),
                    5 if c == Call::Map => (page, valid, Some(rng.pick(&[0, 1, 1 << 40]))),
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

    /// Bookkeeping and checks after call `c` with arguments `a` succeeded with `value`;
    /// returns what went wrong, if anything.
    pub fn after(&mut self, c: Call, a: [usize; 6], value: usize) -> Result<(), &'static str> {
        match c {
            Call::StretchCreateManaged => {
                let valid = a[0] != 0 && a[0] <= MANAGED_MAX && a[1] & !(PAGE_RIGHTS as usize) == 0;
                if !valid || !value.is_multiple_of(PAGE_SIZE) {
                    return Err("stretch_create_managed succeeded where it must not");
                }
                if !(STRETCH_BASE..USER_END).contains(&value) {
                    return Err("stretch_create_managed returned a base outside the stretch range");
                }
                if self.n_managed == MAX_MANAGED {
                    return Err("more managed stretches than the fuzzer keeps track of");
                }
                let pages = a[0].div_ceil(PAGE_SIZE);
                self.managed[self.n_managed] = Managed { base: value, pages, rights: a[1] as u8 };
                self.n_managed += 1;
            }
            Call::FrameAlloc => {
                if a[0] != 0 {
                    return Err(
                        "frame_alloc of an optimistic frame (none in the contract) or of an unknown kind succeeded",
                    );
                }
                if self.frame_mut(value).is_some() {
                    return Err("frame_alloc handed out a frame the fuzzer already holds");
                }
                if self.n_frames == MAX_FRAMES {
                    return Err("more frames than the fuzzer keeps track of");
                }
                self.frames[self.n_frames] = Loose { number: value, mapped: None };
                self.n_frames += 1;
            }
            Call::FrameFree => {
                let i = self.frames().iter().position(|f| f.number == a[0]);
                let Some(i) = i.filter(|&i| self.frames[i].mapped.is_none()) else {
                    return Err("frame_free of a frame not held, or mapped, succeeded");
                };
                self.frames.copy_within(i + 1..self.n_frames, i);
                self.n_frames -= 1;
            }
            Call::Map => {
                let (va, rights) = (a[0], a[2]);
                let page_ok = va.is_multiple_of(PAGE_SIZE)
                    && self.stretch_of(va).is_some_and(|m| {
                        rights != 0 && rights as u8 & !m.rights == 0 && rights <= 7
                    })
                    && self.at(va).is_none();
                let Some(f) = self.frame_mut(a[1]).filter(|f| f.mapped.is_none()) else {
                    return Err("map of a frame not held, or mapped elsewhere, succeeded");
                };
                if !page_ok {
                    return Err("map succeeded where it must not");
                }
                f.mapped = Some((va, rights as u8));
                if rights & (Rights::READ.0 | Rights::WRITE.0) as usize != 0 {
                    // SAFETY: the page was just mapped readable with a frame the fuzzer holds;
                    // nothing writes managed pages, and frames come zero-filled.
                    let word = unsafe { (va as *const u64).read_volatile() };
                    if word != 0 {
                        return Err("a freshly mapped frame does not read zero");
                    }
                }
            }
            Call::Unmap => {
                let Some(number) = self.at(a[0]).map(|f| f.number) else {
                    return Err("unmap of a page that was not mapped succeeded");
                };
                if number != value {
                    return Err("unmap returned another frame than the one mapped");
                }
                if let Some(f) = self.frame_mut(number) {
                    f.mapped = None;
                }
            }
            Call::Protect => {
                let ok = self
                    .stretch_of(a[0])
                    .is_some_and(|m| a[1] != 0 && a[1] <= 7 && a[1] as u8 & !m.rights == 0);
                let Some(number) = self.at(a[0]).map(|f| f.number).filter(|_| ok) else {
                    return Err("protect succeeded where it must not");
                };
                if let Some(f) = self.frame_mut(number) {
                    f.mapped = Some((a[0], a[1] as u8));
                }
            }
            _ => {}
        }
        Ok(())
    }
}
