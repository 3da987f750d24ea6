//! Memory shared with another domain: the ring of an IO channel, reached through raw pointers.
//!
//! Layout (see [`abi::ChannelSlot`]): a [`CHANNEL_HEADER`]-byte header with `head: u64` at
//! offset 0 (written only by the sender) and `tail: u64` at offset 8 (written only by the
//! receiver), then `slots` slots of `slot_size` bytes. Each slot starts with the message length
//! as a little-endian `u32` and 4 reserved bytes; the message follows at offset 8 (so it is
//! 8-byte aligned) and may fill the rest of the slot.
//!
//! `unsafe` here: the header's atomics and the slots' bytes. Nothing here trusts the other
//! domain: it can write any byte at any time, so every value read from the ring is checked by
//! the caller (`channel`) before it is used, and slot contents are only ever copied, never
//! referenced.

use core::sync::atomic::AtomicU64;

use abi::CHANNEL_HEADER;

/// Bytes at the start of each slot before the message: the `u32` length and 4 reserved bytes.
pub const SLOT_PREFIX: usize = 8;

/// One channel's ring in shared memory.
#[derive(Clone, Debug)]
pub(crate) struct Ring {
    /// Address of the header.
    base: usize,
    /// Number of slots, a power of two.
    slots: u64,
    /// Bytes per slot, a multiple of 8, more than [`SLOT_PREFIX`].
    slot_size: usize,
}

impl Ring {
    /// A ring of `slots` slots of `slot_size` bytes at `base`, or `None` if the shape is not one
    /// the protocol allows (`slots` a power of two, `slot_size` a multiple of 8 and at least
    /// [`SLOT_PREFIX`], `base` 8-byte aligned, the whole ring addressable).
    ///
    /// # Safety
    /// `CHANNEL_HEADER + slots * slot_size` bytes at `base` must stay mapped readable and
    /// writable for as long as any `Ring` made from them lives, and be accessed by Rust code
    /// only through `Ring`s (other domains may write them at any time).
    pub(crate) unsafe fn new(base: usize, slots: u64, slot_size: u64) -> Option<Ring> {
        let slot_size = usize::try_from(slot_size).ok()?;
        let slots_usize = usize::try_from(slots).ok()?;
        let ok_shape = slots.is_power_of_two()
            && slot_size >= SLOT_PREFIX
            && slot_size.is_multiple_of(8)
            && base.is_multiple_of(8)
            && base != 0;
        let end = slots_usize
            .checked_mul(slot_size)
            .and_then(|b| b.checked_add(CHANNEL_HEADER))
            .and_then(|b| b.checked_add(base))
            .filter(|&end| end <= isize::MAX as usize);
        (ok_shape && end.is_some()).then_some(Ring { base, slots, slot_size })
    }

    /// The ring of channel `index` of this domain's control block, if that slot describes a
    /// channel of an allowed shape.
    #[cfg(target_os = "none")]
    pub(crate) fn of_channel(index: usize) -> Option<Ring> {
        let c = crate::dcb().channels.get(index)?;
        let base = usize::try_from(c.base).ok()?;
        // SAFETY: the kernel's contract for control blocks: a channel described there is a
        // stretch of at least `CHANNEL_HEADER + slots * slot_size` bytes mapped read-write into
        // this domain until it dies (channel stretches cannot be destroyed, and a domain has no
        // meta right on them to change its own rights). The crate touches it only here.
        unsafe { Ring::new(base, u64::from(c.slots), u64::from(c.slot_size)) }
    }

    /// Number of slots.
    pub(crate) fn slots(&self) -> u64 {
        self.slots
    }

    /// The longest message a slot holds.
    pub(crate) fn max_message(&self) -> usize {
        self.slot_size - SLOT_PREFIX
    }

    /// Messages published so far (written by the sender).
    pub(crate) fn head(&self) -> &AtomicU64 {
        // SAFETY: `new`'s contract keeps the header mapped and 8-byte aligned for `self`'s
        // lifetime; `AtomicU64` has the size and alignment of `u64`, and any bits are valid.
        // Both domains access the word only atomically.
        unsafe { &*(self.base as *const AtomicU64) }
    }

    /// Messages consumed so far (written by the receiver).
    pub(crate) fn tail(&self) -> &AtomicU64 {
        // SAFETY: as for `head`, 8 bytes further on, inside the 64-byte header.
        unsafe { &*((self.base + 8) as *const AtomicU64) }
    }

    /// Address of the slot of message `n`.
    fn slot(&self, n: u64) -> *mut u8 {
        let index = (n & (self.slots - 1)) as usize;
        (self.base + CHANNEL_HEADER + index * self.slot_size) as *mut u8
    }

    /// Writes message `n` (its length and bytes) into its slot.
    ///
    /// # Panics
    /// If `msg` is longer than [`Ring::max_message`].
    pub(crate) fn write(&self, n: u64, msg: &[u8]) {
        assert!(msg.len() <= self.max_message(), "message longer than a slot");
        let slot = self.slot(n);
        // The prefix in one word: the length as a little-endian `u32`, then 4 zero bytes.
        let prefix = (msg.len() as u32 as u64).to_le();
        // SAFETY: the slot lies inside the ring (`index < slots`), which `new`'s contract keeps
        // mapped writable, and is 8-byte aligned (so is the base, the header is 64 bytes and
        // `slot_size` a multiple of 8); `msg` fits in it after the prefix (checked above); Rust
        // code holds no reference into the ring, so the writes alias nothing (the peer's
        // concurrent accesses, if it breaks the protocol, can only garble bytes it will itself
        // read).
        unsafe {
            core::ptr::write_volatile(slot as *mut u64, prefix);
            copy_message(msg.as_ptr(), slot.add(SLOT_PREFIX), msg.len());
        }
    }

    /// The length written in message `n`'s slot, unchecked: the peer wrote it.
    pub(crate) fn len(&self, n: u64) -> u32 {
        // SAFETY: the slot's first 4 bytes lie inside the mapped ring (`new`'s contract) and are
        // 4-byte aligned (slots are 8-byte aligned, see `write`); they are copied out, never
        // referenced.
        u32::from_le(unsafe { core::ptr::read_volatile(self.slot(n) as *const u32) })
    }

    /// Copies the first `buf.len()` message bytes of message `n`'s slot into `buf`.
    ///
    /// # Panics
    /// If `buf` is longer than [`Ring::max_message`].
    pub(crate) fn read(&self, n: u64, buf: &mut [u8]) {
        assert!(buf.len() <= self.max_message(), "read past the slot");
        // SAFETY: the bytes lie inside the slot (checked above), inside the mapped ring; `buf`
        // is our own memory, distinct from the ring (no Rust reference points into the ring).
        unsafe { copy_message(self.slot(n).add(SLOT_PREFIX), buf.as_mut_ptr(), buf.len()) };
    }
}

/// Longest message copied word by word rather than by `memcpy`.
const WORD_COPY_MAX: usize = 64;

/// Copies `len` bytes from `src` to `dst`: a small message of whole, aligned words (the common
/// case: sequence numbers, requests) word by word, without the cost of a call to `memcpy`;
/// anything else with `copy_nonoverlapping`.
///
/// # Safety
/// As for `copy_nonoverlapping`: `src` readable and `dst` writable for `len` bytes, not
/// overlapping.
unsafe fn copy_message(src: *const u8, dst: *mut u8, len: usize) {
    let words = (src as usize | dst as usize | len).is_multiple_of(8);
    if words && len <= WORD_COPY_MAX {
        for i in 0..len / 8 {
            // SAFETY: both are 8-byte aligned (checked above) and word `i` lies within the
            // `len` bytes the caller vouches for. Volatile: the ring is shared with the peer, and
            // the loop stays a loop.
            unsafe {
                let word = core::ptr::read_volatile((src as *const u64).add(i));
                core::ptr::write_volatile((dst as *mut u64).add(i), word);
            }
        }
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { core::ptr::copy_nonoverlapping(src, dst, len) };
}

/// A ring in leaked host memory for tests, with its header's `head` and `tail` both `start`.
#[cfg(test)]
pub(crate) fn leaked_ring(slots: u64, slot_size: u64, start: u64) -> Ring {
    let words = (CHANNEL_HEADER + slots as usize * slot_size as usize) / 8;
    let memory: &'static mut [u64] = std::vec![0u64; words].leak();
    memory[0] = start;
    memory[1] = start;
    // SAFETY: the memory is leaked, so it stays valid forever, and after this nothing but
    // `Ring`s reaches it (the `&mut` ends here).
    unsafe { Ring::new(memory.as_mut_ptr() as usize, slots, slot_size) }.expect("a valid shape")
}

#[cfg(test)]
impl Ring {
    /// Overwrites the length word of message `n`'s slot, as a misbehaving peer could.
    pub(crate) fn set_len(&self, n: u64, len: u32) {
        // SAFETY: the first 4 bytes of a slot inside the mapped ring; nothing references them.
        unsafe { core::ptr::copy_nonoverlapping(len.to_le_bytes().as_ptr(), self.slot(n), 4) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_checked() {
        let ok = |base, slots, size| {
            // SAFETY: nothing is accessed: only the shape is checked, and the ring is dropped.
            unsafe { Ring::new(base, slots, size) }.is_some()
        };
        assert!(ok(0x1000, 64, 64));
        assert!(ok(0x1000, 1, 8));
        assert!(!ok(0x1000, 0, 64), "no slots");
        assert!(!ok(0x1000, 48, 64), "not a power of two");
        assert!(!ok(0x1000, 64, 60), "unaligned slot size");
        assert!(!ok(0x1000, 64, 0), "empty slots");
        assert!(!ok(0x1004, 64, 64), "unaligned base");
        assert!(!ok(0, 64, 64), "null base");
        assert!(!ok(usize::MAX - 4095, 64, 64), "wraps around");
        assert!(!ok(0x1000, 1 << 62, 1 << 20), "too large");
    }

    #[test]
    fn slots_wrap_and_carry_lengths() {
        let ring = leaked_ring(4, 16, 0);
        assert_eq!(ring.max_message(), 8);
        for n in [0u64, 3, 4, 7, u64::MAX] {
            let msg = n.to_le_bytes();
            ring.write(n, &msg[..(n % 9) as usize]);
            assert_eq!(ring.len(n), (n % 9) as u32);
            let mut buf = [0u8; 8];
            let len = ring.len(n) as usize;
            ring.read(n, &mut buf[..len]);
            assert_eq!(buf[..len], msg[..len]);
        }
        // Message n and n + slots share a slot; n + 1 does not.
        ring.write(1, b"one");
        ring.write(5, b"five");
        ring.write(2, b"2");
        assert_eq!(ring.len(1), 4);
        assert_eq!(ring.len(2), 1);
    }
}
