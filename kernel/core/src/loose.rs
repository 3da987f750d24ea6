//! Loose frames: the frames domains took with `frame_alloc`, recorded in a table with a word
//! per frame of RAM.
//!
//! The table is made at boot with the frame allocator's owner table and covers the same frames
//! (4 bytes a frame, about 0.1% of RAM), so recording a loose frame costs the kernel nothing at
//! run time: no domain makes the kernel allocate by taking frames, and finding a frame's record
//! (`map`, `unmap`, `frame_free`, faults) is an index, not a search. A word is 0 for a frame
//! that is not loose, else it holds the owner, whether the frame is optimistic, and whether it
//! is mapped (the page it is mapped at is in the stretch's record).
//!
//! The table is zeroed lazily, so that boot does not write a word per frame of RAM: words from
//! `zeroed` on read as 0 (nothing there is loose), and recording a frame past `zeroed` zeroes
//! the words up to it first. A frame is recorded only once the frame allocator has handed it
//! out, which it does only from the part of its own table it has set up a chunk at a time, so
//! this zeroing is never more than the allocator has already done (bounded per step, amortised).
//!
//! Invariants: a word is non-zero exactly while its frame is a loose frame of the domain it
//! names (the frame allocator records the same owner); every domain's loose frames are found by
//! a scan of the table ([`LooseFrames::owned_by`]), which teardown runs in bounded steps.

use frame_allocator::{FRAME_SIZE, Frame};

/// One loose frame's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loose {
    /// The domain that took it.
    pub owner: u32,
    /// Taken from the optimistic allowance (revocable).
    pub optimistic: bool,
    /// Mapped at a page of one of its owner's managed stretches.
    pub mapped: bool,
}

/// Bits of a word: bit 0 marks a loose frame, bit 1 an optimistic one, bit 2 a mapped one, bits
/// 3 to 31 hold the owner.
const LOOSE: u32 = 1;
const OPTIMISTIC: u32 = 2;
const MAPPED: u32 = 4;
const OWNER_SHIFT: u32 = 3;

/// The largest domain identifier a word can name.
pub const MAX_OWNER: u32 = u32::MAX >> OWNER_SHIFT;

impl Loose {
    #[inline]
    fn encode(self) -> u32 {
        let flag = |on: bool, bit: u32| if on { bit } else { 0 };
        LOOSE
            | flag(self.optimistic, OPTIMISTIC)
            | flag(self.mapped, MAPPED)
            | self.owner << OWNER_SHIFT
    }

    #[inline]
    fn decode(word: u32) -> Option<Loose> {
        (word & LOOSE != 0).then_some(Loose {
            owner: word >> OWNER_SHIFT,
            optimistic: word & OPTIMISTIC != 0,
            mapped: word & MAPPED != 0,
        })
    }
}

/// The table of loose frames.
pub struct LooseFrames {
    /// Physical address of the frame of word 0.
    base: u64,
    words: &'static mut [u32],
    /// Words `0..zeroed` are valid; the rest read as 0 and hold anything.
    zeroed: usize,
}

impl LooseFrames {
    /// The table over `words`, one per frame from the frame at physical address `base` on
    /// (the words may hold anything: they are zeroed as the table grows into them).
    pub fn new(base: u64, words: &'static mut [u32]) -> Self {
        LooseFrames { base, words, zeroed: 0 }
    }

    #[inline]
    fn index(&self, frame: Frame) -> Option<usize> {
        let i = frame.addr().checked_sub(self.base)? / FRAME_SIZE;
        usize::try_from(i).ok().filter(|&i| i < self.words.len())
    }

    /// The record of `frame`, if it is a loose frame.
    #[inline]
    pub fn get(&self, frame: Frame) -> Option<Loose> {
        let i = self.index(frame)?;
        if i >= self.zeroed {
            return None;
        }
        Loose::decode(self.words[i])
    }

    /// The record of `frame`, if it is a loose frame of `owner`.
    #[inline]
    pub fn get_of(&self, owner: u32, frame: Frame) -> Option<Loose> {
        self.get(frame).filter(|l| l.owner == owner)
    }

    /// Records `frame` as loose (`owner` at most [`MAX_OWNER`]).
    #[inline]
    pub fn insert(&mut self, frame: Frame, loose: Loose) {
        debug_assert!(loose.owner <= MAX_OWNER);
        if let Some(i) = self.index(frame) {
            if i >= self.zeroed {
                self.words[self.zeroed..=i].fill(0);
                self.zeroed = i + 1;
            }
            self.words[i] = loose.encode();
        }
    }

    /// Records whether `frame` (a loose frame) is mapped.
    #[inline]
    pub fn set_mapped(&mut self, frame: Frame, mapped: bool) {
        if let Some(mut l) = self.get(frame) {
            l.mapped = mapped;
            self.insert(frame, l);
        }
    }

    /// Forgets `frame`'s record; what it was.
    #[inline]
    pub fn remove(&mut self, frame: Frame) -> Option<Loose> {
        let i = self.index(frame)?;
        if i >= self.zeroed {
            return None;
        }
        let l = Loose::decode(self.words[i]);
        self.words[i] = 0;
        l
    }

    /// Up to `N` loose frames of `owner` among the `scan` words from word `from` on, and the word
    /// where the next scan starts (`None`: the table is done).
    pub fn owned_by<const N: usize>(
        &self,
        owner: u32,
        from: usize,
        scan: usize,
    ) -> (heapless::Vec<Frame, N>, Option<usize>) {
        let mut found = heapless::Vec::new();
        let end = from.saturating_add(scan).min(self.words.len());
        let owned = |w: &u32| *w & LOOSE != 0 && *w >> OWNER_SHIFT == owner;
        let words = self.words.get(from..end.min(self.zeroed)).unwrap_or_default();
        for (i, _) in words.iter().enumerate().filter(|(_, w)| owned(w)) {
            let frame = Frame::containing(self.base + (from + i) as u64 * FRAME_SIZE);
            if found.push(frame).is_err() {
                return (found, Some(from + i));
            }
        }
        // Past `zeroed` nothing is loose, so the scan is done there.
        (found, (end < self.zeroed.min(self.words.len())).then_some(end))
    }
}
