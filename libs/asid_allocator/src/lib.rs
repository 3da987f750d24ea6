//! Address-space identifiers handed out by generations, for TLBs that tag their entries.
//!
//! A TLB that tags its entries with an address-space identifier (RISC-V's ASID in `satp`,
//! x86_64's PCID in CR3) lets the kernel switch address spaces without flushing it. The
//! hardware has a fixed number of identifiers (RISC-V: `2^ASIDLEN`, at most 65,536; x86_64:
//! 4,096 PCIDs), which may be fewer than there are address spaces, so identifiers are recycled.
//! This crate decides which identifier an address space uses and when the TLB must be flushed;
//! the arch layer writes the registers and runs the flushes.
//!
//! The scheme (Linux's on arm64 and RISC-V, for one CPU): identifiers are handed out in
//! *generations*. Identifier 0 ([`KERNEL`]) belongs to the kernel's own tables, which map only
//! global (untagged) pages, and is never handed out. Each address space holds a [`Tag`]: the
//! generation and the identifier it was given.
//! - Switching to a space whose tag is of the current generation uses its identifier as it is,
//!   with no flush ([`Flush::None`]).
//! - A space without a tag, or with one of an older generation, gets the next unused identifier
//!   of the current generation. Nobody has run with that identifier since the TLB was last
//!   flushed whole, so it has no entries; the switch still fences it ([`Flush::Asid`]), which
//!   orders the space's page-table writes made while it had no live identifier (those were not
//!   flushed, see below) before the hardware walks its tables.
//! - When the generation has no unused identifier left, a new generation starts: every older
//!   tag becomes stale, and the whole TLB is flushed ([`Flush::All`]) before identifier 1 is
//!   used again.
//! - Hardware without identifiers (`count` 1) is the limit case: every switch to another space
//!   starts a generation and flushes everything.
//!
//! A change to a space's page tables (unmap, protect, remap) must reach the TLB only if the
//! space may have entries there, that is if its tag is live ([`AsidAllocator::live`]): the
//! arch layer then flushes that identifier and address. A stale tag's entries went with the
//! full flush that ended its generation, so changes to its space need no flush.
//!
//! Invariants (checked by the unit tests against a model TLB that caches every translation it
//! walks, present or not): no two live tags share an identifier; a space always sees its own
//! current mappings, never another space's or its own old ones.
//!
//! With more than one CPU, each CPU's active identifier would have to survive a new
//! generation (Linux reserves them); Tessera's guest is uniprocessor, so this crate does not.

#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

/// The identifier of the kernel's own tables; never handed out to an address space.
pub const KERNEL: u16 = 0;

/// The most identifiers any hardware has (RISC-V's 16 ASID bits).
pub const MAX_COUNT: u32 = 1 << 16;

/// An address space's hold on an identifier: the generation it was handed out in and its
/// value. [`Tag::NONE`] never had one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tag {
    generation: u64,
    asid: u16,
}

impl Tag {
    /// No identifier yet.
    pub const NONE: Tag = Tag { generation: 0, asid: 0 };

    /// The generation the identifier was handed out in (0: none).
    pub fn generation(self) -> u64 {
        self.generation
    }

    /// The identifier, whatever its generation (`None` for [`Tag::NONE`]).
    pub fn asid(self) -> Option<u16> {
        (self.generation != 0).then_some(self.asid)
    }
}

/// What the TLB needs when an address space is switched to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// Nothing: the identifier's entries are the space's own and current.
    None,
    /// Fence (flush) this identifier's entries, after the switch.
    Asid(u16),
    /// Flush every entry, of every identifier, global ones included, after the switch.
    All,
}

/// The outcome of [`AsidAllocator::switch_to`]: the identifier to run with and the flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switch {
    /// The identifier to put in the translation register.
    pub asid: u16,
    /// What to flush once the register is written.
    pub flush: Flush,
}

/// Hands out identifiers `1..count` by generations (see the crate documentation).
#[derive(Clone, Debug)]
pub struct AsidAllocator {
    count: u32,
    generation: u64,
    next: u32,
}

impl AsidAllocator {
    /// An allocator for hardware with `count` identifiers, the kernel's included (clamped to
    /// `1..=MAX_COUNT`; 1 means the hardware has none to spare).
    pub const fn new(count: u32) -> Self {
        let count = if count == 0 {
            1
        } else if count > MAX_COUNT {
            MAX_COUNT
        } else {
            count
        };
        AsidAllocator { count, generation: 1, next: 1 }
    }

    /// An allocator for hardware that keeps `bits` identifier bits (RISC-V's ASIDLEN: what
    /// remains set after writing all ones to `satp.ASID`).
    pub const fn from_bits(bits: u32) -> Self {
        let bits = if bits > 16 { 16 } else { bits };
        Self::new(1 << bits)
    }

    /// How many identifiers there are, the kernel's included.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The current generation (the first is 1).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The identifier of `tag` if it is of the current generation: the TLB may then hold
    /// entries of its space, and changes to the space must be flushed by this identifier.
    /// `None`: the TLB holds no entry of the space.
    pub fn live(&self, tag: Tag) -> Option<u16> {
        (tag.generation == self.generation).then_some(tag.asid)
    }

    /// Switches to the space holding `tag`: returns the identifier to run with and what to
    /// flush, and updates `tag` if the space gets a new identifier.
    pub fn switch_to(&mut self, tag: &mut Tag) -> Switch {
        if let Some(asid) = self.live(*tag) {
            return Switch { asid, flush: Flush::None };
        }
        if self.count == 1 {
            self.generation += 1;
            *tag = Tag { generation: self.generation, asid: KERNEL };
            return Switch { asid: KERNEL, flush: Flush::All };
        }
        let mut flush = Flush::Asid(self.next as u16);
        if self.next >= self.count {
            self.generation += 1;
            self.next = 1;
            flush = Flush::All;
        }
        let asid = self.next as u16;
        self.next += 1;
        *tag = Tag { generation: self.generation, asid };
        Switch { asid, flush }
    }

    /// Starts over with `count` identifiers (clamped as in [`AsidAllocator::new`]): a new
    /// generation, so every tag is stale. The caller flushes the whole TLB.
    pub fn restart(&mut self, count: u32) -> Flush {
        let generation = self.generation + 1;
        *self = AsidAllocator { generation, ..AsidAllocator::new(count) };
        Flush::All
    }
}

#[cfg(test)]
mod tests;
