//! Address space as a contracted resource: the stretch region of the single address space,
//! cut into one share per domain ([`StretchRegion`]), from which everything the kernel places
//! for a domain at run time comes ([`AddressQuota`]).
//!
//! A domain's share has the size of its manifest's `memory.address_space` (without one, an equal
//! share of what the others leave, at most 1 GiB: `manifest::shared_address_space`);
//! shares are handed out in order of domain identifier and never overlap, so no domain can
//! deny address space to another. Within a share, a destroyed stretch's range is reused once
//! nothing maps it any more (guard pages kept).

use alloc::vec::Vec;

use abi::PAGE_SIZE;

/// The stretch region, `[abi::STRETCH_BASE, abi::USER_END)`, as it is cut into shares.
pub struct StretchRegion {
    /// Where the next share starts.
    next: usize,
}

impl Default for StretchRegion {
    fn default() -> Self {
        StretchRegion { next: abi::STRETCH_BASE }
    }
}

impl StretchRegion {
    /// The next `bytes` of the region, as a new domain's share; `None` if the region (or the
    /// kernel heap, for the share's list of freed ranges) has no room for it.
    pub fn share(&mut self, bytes: usize) -> Option<AddressQuota> {
        let end = self.next.checked_add(bytes).filter(|&e| e <= abi::USER_END)?;
        let quota = AddressQuota::new(self.next, bytes)?;
        self.next = end;
        Some(quota)
    }
}

/// Most freed ranges a domain's [`AddressQuota`] keeps apart (adjacent ones merge). A range
/// freed when the list is full and touches none of them is kept out of use until the domain
/// dies: only the domain's own quota shrinks.
pub const MAX_FREE_RANGES: usize = 64;

/// A domain's share of the stretch region, `[base, end)`: it hands out ranges for the domain's
/// stack, control block, channel stretches and run-time stretches, each with an unmapped guard
/// page below it, and takes them back when their stretch is destroyed (after it is unmapped from
/// every protection domain and flushed from the TLB), to hand them out again. No domain can use
/// another's share, so none can deny address space to another.
pub struct AddressQuota {
    base: usize,
    end: usize,
    /// Everything from here to `end` is unused.
    next: usize,
    /// Freed ranges below `next` (start, bytes; each starts with its guard page), sorted by
    /// start, never adjacent; the capacity is reserved when the quota is made.
    free: Vec<(usize, usize)>,
}

impl AddressQuota {
    /// The quota `[base, base + bytes)`, or `None` if the kernel heap cannot hold its list of
    /// freed ranges.
    pub fn new(base: usize, bytes: usize) -> Option<Self> {
        let mut free = Vec::new();
        free.try_reserve_exact(MAX_FREE_RANGES).ok()?;
        Some(AddressQuota { base, end: base.checked_add(bytes)?, next: base, free })
    }

    /// The addresses of the quota.
    #[inline]
    pub fn range(&self) -> core::ops::Range<usize> {
        self.base..self.end
    }

    /// A range of `pages` pages with a guard page below it (the first freed range large enough,
    /// else fresh space), or `None` if the quota has no room.
    pub fn take(&mut self, pages: usize) -> Option<usize> {
        let bytes = pages.checked_add(1)?.checked_mul(PAGE_SIZE)?;
        if let Some(i) = self.free.iter().position(|&(_, len)| len >= bytes) {
            let (start, len) = self.free[i];
            if len == bytes {
                self.free.remove(i);
            } else {
                self.free[i] = (start + bytes, len - bytes);
            }
            return Some(start + PAGE_SIZE);
        }
        let end = self.next.checked_add(bytes)?;
        if end > self.end {
            return None;
        }
        let start = self.next;
        self.next = end;
        Some(start + PAGE_SIZE)
    }

    /// Takes back the range of `pages` pages at `base` (and its guard page) that [`take`] handed
    /// out. The caller has made sure nothing maps it any more.
    ///
    /// [`take`]: AddressQuota::take
    pub fn give_back(&mut self, base: usize, pages: usize) {
        let (start, bytes) = (base - PAGE_SIZE, (pages + 1) * PAGE_SIZE);
        if !(self.base..self.next).contains(&start) {
            return;
        }
        let at = self.free.partition_point(|&(s, _)| s < start);
        let joins_before = at > 0 && {
            let (s, len) = self.free[at - 1];
            s + len == start
        };
        let joins_after = self.free.get(at).is_some_and(|&(s, _)| start + bytes == s);
        match (joins_before, joins_after) {
            (true, true) => {
                let (_, after) = self.free.remove(at);
                self.free[at - 1].1 += bytes + after;
            }
            (true, false) => self.free[at - 1].1 += bytes,
            (false, true) => self.free[at] = (start, bytes + self.free[at].1),
            (false, false) if self.free.len() < MAX_FREE_RANGES => {
                self.free.insert(at, (start, bytes))
            }
            (false, false) => return,
        }
        // A freed range that ends at `next` goes back to the unused space.
        if let Some(&(s, len)) = self.free.last()
            && s + len == self.next
        {
            self.next = s;
            self.free.pop();
        }
    }

    /// Bytes of the quota not handed out (fresh space and freed ranges).
    pub fn unused(&self) -> usize {
        self.end - self.next + self.free.iter().map(|&(_, len)| len).sum::<usize>()
    }
}
