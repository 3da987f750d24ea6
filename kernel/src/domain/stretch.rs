//! Stretches: page-aligned ranges of the single address space, owned by a domain, with rights
//! per protection domain.
//!
//! A stretch is either *nailed* or *managed*. A nailed stretch (images, stacks, control blocks,
//! channels, `stretch_create`) gets its frames when it is created, zeroed and charged to the
//! owner, and is mapped into every protection domain that holds rights on it; it never faults.
//! A managed stretch (`stretch_create_managed`) starts with no page mapped: its owner binds a
//! stretch driver to it, which maps frames the domain holds page by page (`map`, `unmap`,
//! `protect`), and its page faults are delivered to the owner (see `paging`). Managed
//! stretches are private to their owner: they cannot be shared.

use alloc::vec::Vec;

use abi::{PAGE_SIZE, Rights};
use frame_allocator::Frame;

/// What a stretch is for (reports and the run summary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A segment of a domain's program image.
    Image,
    /// A domain's stack (an unmapped guard page lies below it).
    Stack,
    /// Created at run time with `stretch_create`.
    Dynamic,
    /// A domain's control block (`abi::Dcb`).
    ControlBlock,
    /// The shared memory of an IO channel, owned (and paid for) by its sender.
    Channel,
    /// Paged by a stretch driver in its owner (`stretch_create_managed`).
    Managed,
}

impl Kind {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Image => "image",
            Kind::Stack => "stack",
            Kind::Dynamic => "dynamic",
            Kind::ControlBlock => "control block",
            Kind::Channel => "channel",
            Kind::Managed => "managed",
        }
    }
}

/// One stretch.
pub struct Stretch {
    /// First address.
    pub base: usize,
    /// The frame behind each page, in order (`None`: a page of a managed stretch that is not
    /// mapped). The frames of a nailed stretch belong to it; those mapped in a managed stretch
    /// belong to the owner's loose frames (`frame_alloc`) and outlive the mapping.
    pub frames: Vec<Option<Frame>>,
    /// The rights each page of a managed stretch is mapped with (empty for nailed stretches).
    pub page_rights: Vec<Rights>,
    /// The owning domain (charged for the frames).
    pub owner: u32,
    /// Rights per domain (protection domain), at most one entry per domain.
    pub rights: Vec<(u32, Rights)>,
    /// What it is for.
    pub kind: Kind,
}

impl Stretch {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.frames.len() * PAGE_SIZE
    }

    /// One past the last address.
    pub fn end(&self) -> usize {
        self.base + self.len()
    }

    /// Does the stretch contain `addr`?
    pub fn contains(&self, addr: usize) -> bool {
        (self.base..self.end()).contains(&addr)
    }

    /// The rights `domain` holds.
    pub fn rights_of(&self, domain: u32) -> Rights {
        self.rights.iter().find(|(d, _)| *d == domain).map_or(Rights::NONE, |(_, r)| *r)
    }

    /// Sets `domain`'s rights (`NONE` removes the entry).
    pub fn set_rights(&mut self, domain: u32, rights: Rights) {
        self.rights.retain(|(d, _)| *d != domain);
        if rights != Rights::NONE {
            self.rights.push((domain, rights));
        }
    }
}

/// Hands out virtual ranges for run-time stretches and stacks, from `abi::STRETCH_BASE` up,
/// leaving an unmapped guard page before each range. Ranges are never reused (the region is
/// 128 GiB), so a stale pointer into a destroyed stretch can never reach a new one.
pub struct VirtualAllocator {
    next: usize,
    end: usize,
}

impl VirtualAllocator {
    /// The allocator for `[start, end)`.
    pub const fn new(start: usize, end: usize) -> Self {
        VirtualAllocator { next: start, end }
    }

    /// Returns the range `take` just handed out at `base` (when creating the stretch failed),
    /// if nothing was taken after it.
    pub fn give_back(&mut self, base: usize, pages: usize) {
        if base + pages * PAGE_SIZE == self.next {
            self.next = base - PAGE_SIZE;
        }
    }

    /// A range of `pages` pages with a guard page below it.
    pub fn take(&mut self, pages: usize) -> Option<usize> {
        let bytes = pages.checked_mul(PAGE_SIZE)?;
        let base = self.next.checked_add(PAGE_SIZE)?;
        let end = base.checked_add(bytes)?;
        if end > self.end {
            return None;
        }
        self.next = end;
        Some(base)
    }
}
