//! Loose frames: the frames domains took with `frame_alloc`, recorded in a table with a word
//! per frame of RAM.
//!
//! The table is made at boot with the frame allocator's owner table and covers the same frames
//! (8 bytes a frame, about 0.2% of RAM), so recording a loose frame costs the kernel nothing at
//! run time: no domain makes the kernel allocate by taking frames, and finding a frame's record
//! (`map`, `unmap`, `frame_free`, faults) is an index, not a search. A word is 0 for a frame
//! that is not loose, else it holds the owner, whether the frame is optimistic, and the page it
//! is mapped at.
//!
//! Invariants: a word is non-zero exactly while its frame is a loose frame of the domain it
//! names (the frame allocator records the same owner); every domain's loose frames are found by
//! a scan of the table ([`LooseFrames::owned_by`]), which teardown runs in bounded steps.

use frame_allocator::{FRAME_SIZE, Frame};
use spin::Mutex;

/// One loose frame's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loose {
    /// The domain that took it.
    pub owner: u32,
    /// Taken from the optimistic allowance (revocable).
    pub optimistic: bool,
    /// The page it is mapped at, if any.
    pub mapped_at: Option<usize>,
}

/// Bits of a word: bit 0 marks a loose frame, bit 1 an optimistic one, bits 2 to 39 hold the
/// page number it is mapped at (0: none), bits 40 to 63 the owner.
const LOOSE: u64 = 1;
const OPTIMISTIC: u64 = 2;
const PAGE_SHIFT: u32 = 2;
const PAGE_BITS: u32 = 38;
const OWNER_SHIFT: u32 = 40;

/// The largest domain identifier a word can name.
pub const MAX_OWNER: u32 = (1 << (64 - OWNER_SHIFT)) - 1;

impl Loose {
    fn encode(self) -> u64 {
        let page = self.mapped_at.map_or(0, |va| (va as u64 / FRAME_SIZE) & ((1 << PAGE_BITS) - 1));
        LOOSE
            | if self.optimistic { OPTIMISTIC } else { 0 }
            | page << PAGE_SHIFT
            | u64::from(self.owner) << OWNER_SHIFT
    }

    fn decode(word: u64) -> Option<Loose> {
        if word & LOOSE == 0 {
            return None;
        }
        let page = (word >> PAGE_SHIFT) & ((1 << PAGE_BITS) - 1);
        Some(Loose {
            owner: (word >> OWNER_SHIFT) as u32,
            optimistic: word & OPTIMISTIC != 0,
            mapped_at: (page != 0).then(|| (page * FRAME_SIZE) as usize),
        })
    }
}

/// The table of loose frames.
pub struct LooseFrames {
    /// Physical address of the frame of word 0.
    base: u64,
    words: &'static mut [u64],
}

static TABLE: Mutex<Option<LooseFrames>> = Mutex::new(None);

/// Runs `f` with the table.
pub fn with<R>(f: impl FnOnce(&mut LooseFrames) -> R) -> R {
    let mut table = TABLE.lock();
    let table = table.get_or_insert_with(|| {
        let (base, words) = crate::memory::take_frame_words();
        LooseFrames { base, words }
    });
    f(table)
}

impl LooseFrames {
    fn index(&self, frame: Frame) -> Option<usize> {
        let i = frame.addr().checked_sub(self.base)? / FRAME_SIZE;
        usize::try_from(i).ok().filter(|&i| i < self.words.len())
    }

    /// The record of `frame`, if it is a loose frame.
    pub fn get(&self, frame: Frame) -> Option<Loose> {
        Loose::decode(self.words[self.index(frame)?])
    }

    /// The record of `frame`, if it is a loose frame of `owner`.
    pub fn get_of(&self, owner: u32, frame: Frame) -> Option<Loose> {
        self.get(frame).filter(|l| l.owner == owner)
    }

    /// Records `frame` as loose (`owner` at most [`MAX_OWNER`]).
    pub fn insert(&mut self, frame: Frame, loose: Loose) {
        debug_assert!(loose.owner <= MAX_OWNER);
        if let Some(i) = self.index(frame) {
            self.words[i] = loose.encode();
        }
    }

    /// Sets the page `frame` (a loose frame) is mapped at.
    pub fn set_mapped(&mut self, frame: Frame, at: Option<usize>) {
        if let Some(mut l) = self.get(frame) {
            l.mapped_at = at;
            self.insert(frame, l);
        }
    }

    /// Forgets `frame`'s record; what it was.
    pub fn remove(&mut self, frame: Frame) -> Option<Loose> {
        let i = self.index(frame)?;
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
        for i in from..end {
            if Loose::decode(self.words[i]).is_some_and(|l| l.owner == owner) {
                let frame = Frame::containing(self.base + i as u64 * FRAME_SIZE);
                if found.push(frame).is_err() {
                    return (found, Some(i));
                }
            }
        }
        (found, (end < self.words.len()).then_some(end))
    }
}
