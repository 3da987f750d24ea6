//! WKdm: Wilson and Kaplan's word-based compressor for memory pages ("The Case for Compressed
//! Caching in Virtual Memory Systems", USENIX 1999), the codec of the Heracles thesis's
//! compressed cache, for one 4096-byte page read as 1024 little-endian 32-bit words.
//!
//! Each word is compared with one entry of a 16-word direct-mapped dictionary of recently seen
//! words, chosen by a hash of the word's upper 22 bits, and given a 2-bit tag:
//! - `ZERO` (0): the word is 0; nothing else is stored.
//! - `EXACT` (1): the word equals its dictionary entry; the entry's 4-bit index is stored.
//! - `PARTIAL` (2): the word's upper 22 bits equal the entry's; the index and the word's low
//!   10 bits are stored, and the word replaces the entry.
//! - `MISS` (3): anything else; the whole word is stored and replaces the entry.
//!
//! The dictionary starts all zero, so small integers (upper bits zero) are partial matches
//! from the first one on. The hash is Fibonacci hashing of the upper 22 bits,
//! `((w >> 10) * 0x9e37_79b1) >> 28` in 32-bit wrapping arithmetic ([`slot`]); the original
//! used a fixed table from high bits to slots, which any cheap deterministic hash replaces.
//!
//! # Format
//! All fields little-endian; every section is whole 32-bit words.
//! - Header, 8 bytes: the number of full words (`u16`), of indices (`u16`: exact and partial
//!   words), of low-bit values (`u16`: partial words), and `0u16` (the format's version).
//! - Tags, 256 bytes: 64 words of 16 tags, word `16g + j`'s tag in bits `2j..2j+2` of word `g`.
//! - Full words, in page order.
//! - Indices, 8 per word (bits `4k..4k+4`), in page order.
//! - Low bits, 3 per word (bits `10k..10k+10`), in page order.
//!
//! A page therefore takes at least 264 bytes, and a page of small integers about half a page.
//!
//! # Speed
//! Pages and compressed bytes pass through buffers aligned to 8 bytes (a copy of the page and
//! the compressed bytes in a [`Scratch`], a group of 16 decompressed words on the stack),
//! each copied whole by `memcpy`, so the compiler loads and stores whole words even where
//! misaligned accesses are split into bytes (`riscv64gc`), whatever the alignment of the
//! caller's buffers. Nothing allocates: a cache keeps one [`Scratch`] (10 KiB) for its life;
//! [`compress`] and [`decompress`] put one on the stack, for tests and one-off use.
//!
//! [`decompress`] checks every count and offset: on malformed input it returns an error,
//! never panics and never reads outside its input.

use crate::PAGE_SIZE;

const WORDS: usize = PAGE_SIZE / 4;
const GROUP: usize = 16;
const GROUPS: usize = WORDS / GROUP;
const HEADER: usize = 8;
const TAGS: usize = GROUPS * 4;
/// Where the full words start.
const BODY: usize = HEADER + TAGS;
/// The format's version, the header's last field.
const VERSION: u16 = 0;

const ZERO: u32 = 0;
const EXACT: u32 = 1;
const PARTIAL: u32 = 2;
const MISS: u32 = 3;
const LOW_MASK: u32 = (1 << 10) - 1;

/// The smallest output WKdm produces: header and tags.
pub const MIN_SIZE: usize = BODY;
/// The largest: header, tags and every word in full.
pub const MAX_SIZE: usize = BODY + PAGE_SIZE;

/// Why WKdm input could not be decompressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WkdmError {
    /// Shorter than a header and tags, or not as long as its header says.
    Length,
    /// The header's counts are impossible, or do not match the tags.
    Counts,
    /// An unknown format version.
    Version,
}

/// The dictionary slot of `word`: Fibonacci hashing of its upper 22 bits into 4 bits.
#[inline(always)]
pub fn slot(word: u32) -> usize {
    ((word >> 10).wrapping_mul(0x9e37_79b1) >> 28) as usize
}

/// 64 bytes (one group of words) aligned so that word accesses to it are aligned.
#[repr(C, align(8))]
struct Group([u8; GROUP * 4]);

/// Word `i` of `bytes`: with `bytes` aligned, the compiler sees an aligned load.
#[inline(always)]
fn word_at(bytes: &[u8], i: usize) -> u32 {
    let w: &[u8; 4] = bytes[4 * i..4 * i + 4].try_into().expect("4 bytes");
    u32::from_le_bytes(*w)
}

#[inline(always)]
fn set_word(bytes: &mut [u8], i: usize, w: u32) {
    bytes[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
}

/// WKdm's working memory, [`MAX_SIZE`] bytes aligned to 8: compressed bytes are built here
/// and read from here, so that both directions access them a word at a time.
#[repr(C, align(8))]
pub struct Scratch {
    bytes: [u8; MAX_SIZE],
    page: [u8; PAGE_SIZE],
    indices: [u32; WORDS / 8],
    lows: [u32; WORDS.div_ceil(3)],
}

impl Default for Scratch {
    fn default() -> Scratch {
        Scratch::new()
    }
}

impl Scratch {
    /// A zeroed scratch buffer.
    pub const fn new() -> Scratch {
        Scratch {
            bytes: [0; MAX_SIZE],
            page: [0; PAGE_SIZE],
            indices: [0; WORDS / 8],
            lows: [0; WORDS.div_ceil(3)],
        }
    }

    /// Compresses `page` into this buffer, returning the compressed bytes, or `None` if they
    /// would be more than `limit` bytes: the page is incompressible at that size, which is
    /// known, and compression stops, as soon as its full words alone pass `limit`.
    pub fn compress(&mut self, page: &[u8; PAGE_SIZE], limit: usize) -> Option<&[u8]> {
        let limit = limit.min(MAX_SIZE) / 4;
        if limit < BODY / 4 {
            return None;
        }
        let Scratch { bytes: buf, page: copy, indices, lows } = self;
        let (mut n_idx, mut n_low) = (0usize, 0usize);
        let (mut index_acc, mut index_shift) = (0u32, 0u32);
        let (mut low_acc, mut low_shift) = (0u32, 0u32);
        let mut dict = [0u32; 16];
        // Word offsets in `buf`: the next full word goes here.
        let mut miss_at = BODY / 4;
        // One copy (by `memcpy`, which aligns itself) so that every word is an aligned load.
        copy.copy_from_slice(page);
        for g in 0..GROUPS {
            let mut tags = 0u32;
            for j in 0..GROUP {
                let w = word_at(copy, GROUP * g + j);
                let tag = if w == 0 {
                    ZERO
                } else {
                    let s = slot(w);
                    let d = dict[s];
                    if d == w {
                        EXACT
                    } else if (d ^ w) >> 10 == 0 {
                        dict[s] = w;
                        low_acc |= (w & LOW_MASK) << low_shift;
                        low_shift += 10;
                        if low_shift == 30 {
                            lows[n_low / 3] = low_acc;
                            (low_acc, low_shift) = (0, 0);
                        }
                        n_low += 1;
                        PARTIAL
                    } else {
                        dict[s] = w;
                        if miss_at == limit {
                            return None;
                        }
                        set_word(buf, miss_at, w);
                        miss_at += 1;
                        MISS
                    }
                };
                if tag == EXACT || tag == PARTIAL {
                    index_acc |= (slot(w) as u32) << index_shift;
                    index_shift += 4;
                    if index_shift == 32 {
                        indices[n_idx / 8] = index_acc;
                        (index_acc, index_shift) = (0, 0);
                    }
                    n_idx += 1;
                }
                tags |= tag << (2 * j);
            }
            set_word(buf, HEADER / 4 + g, tags);
        }
        if index_shift != 0 {
            indices[n_idx / 8] = index_acc;
        }
        if low_shift != 0 {
            lows[n_low / 3] = low_acc;
        }
        let n_miss = miss_at - BODY / 4;
        let packed = n_idx.div_ceil(8) + n_low.div_ceil(3);
        if miss_at + packed > limit {
            return None;
        }
        let mut at = miss_at;
        for &w in indices[..n_idx.div_ceil(8)].iter().chain(&lows[..n_low.div_ceil(3)]) {
            set_word(buf, at, w);
            at += 1;
        }
        for (i, n) in [n_miss as u16, n_idx as u16, n_low as u16, VERSION].into_iter().enumerate() {
            buf[2 * i..2 * i + 2].copy_from_slice(&n.to_le_bytes());
        }
        Some(&buf[..4 * at])
    }

    /// Decompresses `input`, made by [`compress`], into `page`. Malformed input is an error
    /// (never a panic or a read outside `input`); on an error `page` holds unspecified bytes.
    pub fn decompress(
        &mut self,
        input: &[u8],
        page: &mut [u8; PAGE_SIZE],
    ) -> Result<(), WkdmError> {
        if input.len() < BODY || input.len() > MAX_SIZE {
            return Err(WkdmError::Length);
        }
        let field = |i: usize| u16::from_le_bytes([input[2 * i], input[2 * i + 1]]) as usize;
        let (n_miss, n_idx, n_low) = (field(0), field(1), field(2));
        if field(3) != VERSION as usize {
            return Err(WkdmError::Version);
        }
        if n_miss + n_idx > WORDS || n_low > n_idx {
            return Err(WkdmError::Counts);
        }
        // Word offsets of the sections' ends.
        let miss_end = BODY / 4 + n_miss;
        let idx_end = miss_end + n_idx.div_ceil(8);
        let end = idx_end + n_low.div_ceil(3);
        if input.len() != 4 * end {
            return Err(WkdmError::Length);
        }
        let buf = &mut self.bytes[..input.len()];
        buf.copy_from_slice(input);
        let buf = &*buf;
        let mut misses = Words { at: BODY / 4, end: miss_end };
        let mut indices = Words { at: miss_end, end: idx_end };
        let mut lows = Words { at: idx_end, end };
        let (mut index_acc, mut index_left) = (0u32, 0u32);
        let (mut low_acc, mut low_left) = (0u32, 0u32);
        let mut dict = [0u32; 16];
        let mut group = Group([0; GROUP * 4]);
        for (g, dst) in page.chunks_exact_mut(GROUP * 4).enumerate() {
            let mut t = word_at(buf, HEADER / 4 + g);
            if t == 0 {
                dst.fill(0);
                continue;
            }
            for j in 0..GROUP {
                let w = match t & 3 {
                    ZERO => 0,
                    MISS => {
                        let w = misses.next(buf)?;
                        dict[slot(w)] = w;
                        w
                    }
                    tag => {
                        if index_left == 0 {
                            (index_acc, index_left) = (indices.next(buf)?, 8);
                        }
                        let s = (index_acc & 15) as usize;
                        index_acc >>= 4;
                        index_left -= 1;
                        if tag == EXACT {
                            dict[s]
                        } else {
                            if low_left == 0 {
                                (low_acc, low_left) = (lows.next(buf)?, 3);
                            }
                            let w = (dict[s] & !LOW_MASK) | (low_acc & LOW_MASK);
                            low_acc >>= 10;
                            low_left -= 1;
                            dict[s] = w;
                            w
                        }
                    }
                };
                set_word(&mut group.0, j, w);
                t >>= 2;
            }
            dst.copy_from_slice(&group.0);
        }
        // Every section read to its end, and no more indices or low bits than the header says
        // (the last word of each may be part padding).
        let index_pad = (n_idx.div_ceil(8) * 8 - n_idx) as u32;
        let low_pad = (n_low.div_ceil(3) * 3 - n_low) as u32;
        if misses.done()
            && indices.done()
            && lows.done()
            && index_left == index_pad
            && low_left == low_pad
        {
            Ok(())
        } else {
            Err(WkdmError::Counts)
        }
    }
}

/// A section of the scratch buffer, word offsets `at..end`, read in order.
struct Words {
    at: usize,
    end: usize,
}

impl Words {
    #[inline(always)]
    fn next(&mut self, buf: &[u8]) -> Result<u32, WkdmError> {
        if self.at == self.end {
            return Err(WkdmError::Counts);
        }
        let w = word_at(buf, self.at);
        self.at += 1;
        Ok(w)
    }

    fn done(&self) -> bool {
        self.at == self.end
    }
}

/// Compresses `page` into `out`, returning the compressed length, or `None` if it does not
/// fit in `out` (give `out` the most a compressed page may take: a page that does not fit is
/// incompressible at that size). Uses a [`Scratch`] on the stack.
pub fn compress(page: &[u8; PAGE_SIZE], out: &mut [u8]) -> Option<usize> {
    let mut scratch = Scratch::new();
    let bytes = scratch.compress(page, out.len())?;
    out[..bytes.len()].copy_from_slice(bytes);
    Some(bytes.len())
}

/// Decompresses `input`, made by [`compress`], into `page`, with a [`Scratch`] on the stack.
/// Malformed input is an error (never a panic or a read outside `input`); on an error `page`
/// holds unspecified bytes.
pub fn decompress(input: &[u8], page: &mut [u8; PAGE_SIZE]) -> Result<(), WkdmError> {
    Scratch::new().decompress(input, page)
}

#[cfg(test)]
mod tests;
