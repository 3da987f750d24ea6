//! The records of what the fuzzer holds of self-paging: the managed stretches it created and
//! the loose frames it took, with where each frame is mapped. `paging` draws calls from them and
//! keeps them true after each call; `own` carries them with the rest of the fuzzer's memory.

use core::sync::atomic::AtomicU8;

use abi::{MAP_BATCH_MAX, PAGE_SIZE};

/// Room for the states of one `page_state`: one more than the kernel writes at most.
pub const STATES_ROOM: usize = MAP_BATCH_MAX + 1;

/// Where `page_state` writes the states it is drawn to succeed with: a static the fuzzer
/// holds, whose address the gate in `Own::harmless` knows.
pub static STATES: [AtomicU8; STATES_ROOM] = [const { AtomicU8::new(0) }; STATES_ROOM];

/// Does `[out, out + count)` lie inside [`STATES`]?
pub fn in_states(out: usize, count: usize) -> bool {
    let start = STATES.as_ptr() as usize;
    out >= start && out.checked_add(count).is_some_and(|end| end <= start + STATES_ROOM)
}

/// At most this many managed stretches exist at once.
pub const MAX_MANAGED: usize = 8;
/// At most this many loose frames are held at once.
pub const MAX_FRAMES: usize = 48;

/// A managed stretch the fuzzer created.
#[derive(Clone, Copy)]
pub struct Managed {
    /// Its base.
    pub base: usize,
    /// Its size in pages.
    pub pages: usize,
    /// The page rights it was made with.
    pub rights: usize,
}

/// A loose frame the fuzzer holds, and where it is mapped.
#[derive(Clone, Copy)]
pub struct Loose {
    /// Its frame number.
    pub number: usize,
    /// The page it is mapped at, and with which rights.
    pub mapped: Option<(usize, usize)>,
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

    /// Is `base` the base of a managed stretch it holds?
    pub fn is_managed(&self, base: usize) -> bool {
        self.managed().iter().any(|m| m.base == base)
    }

    pub fn frame(&self, number: usize) -> Option<&Loose> {
        self.frames().iter().find(|f| f.number == number)
    }

    pub fn frame_mut(&mut self, number: usize) -> Option<&mut Loose> {
        self.frames[..self.n_frames].iter_mut().find(|f| f.number == number)
    }

    /// The frame mapped at page `va`.
    pub fn at(&self, va: usize) -> Option<&Loose> {
        self.frames().iter().find(|f| f.mapped.is_some_and(|(p, _)| p == va))
    }

    /// The managed stretch containing `va`.
    pub fn stretch_of(&self, va: usize) -> Option<&Managed> {
        self.managed().iter().find(|m| (m.base..m.base + m.pages * PAGE_SIZE).contains(&va))
    }

    pub fn add_managed(&mut self, m: Managed) -> bool {
        if self.n_managed == MAX_MANAGED {
            return false;
        }
        self.managed[self.n_managed] = m;
        self.n_managed += 1;
        true
    }

    pub fn add_frame(&mut self, number: usize) -> bool {
        if self.n_frames == MAX_FRAMES {
            return false;
        }
        self.frames[self.n_frames] = Loose { number, mapped: None };
        self.n_frames += 1;
        true
    }

    /// Forgets frame `number` (after `frame_free`).
    pub fn forget_frame(&mut self, number: usize) {
        if let Some(i) = self.frames().iter().position(|f| f.number == number) {
            self.frames.copy_within(i + 1..self.n_frames, i);
            self.n_frames -= 1;
        }
    }

    /// Forgets the managed stretch at `base` after `stretch_destroy`: the frames mapped in it
    /// are unmapped and still held.
    pub fn destroyed(&mut self, base: usize) {
        let Some(i) = self.managed().iter().position(|m| m.base == base) else { return };
        let m = self.managed[i];
        let inside = |va: usize| (m.base..m.base + m.pages * PAGE_SIZE).contains(&va);
        for f in &mut self.frames[..self.n_frames] {
            if f.mapped.is_some_and(|(va, _)| inside(va)) {
                f.mapped = None;
            }
        }
        self.managed.copy_within(i + 1..self.n_managed, i);
        self.n_managed -= 1;
    }
}
