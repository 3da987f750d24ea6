//! WKdm: Wilson and Kaplan's word-based compressor for memory pages ("The Case for Compressed
//! Caching in Virtual Memory Systems", USENIX 1999), the codec of the Heracles thesis's
//! compressed cache, for one 4096-byte page read as 1024 little-endian 32-bit words.
//!
//! Each word is compared with one entry of a 16-word direct-mapped dictionary of recently seen
//! words, chosen by bits 10..14 of the word (the lowest of its upper 22 bits, [`slot`]), and
//! given a 2-bit tag:
//! - `ZERO` (0): the word is 0; nothing else is stored.
//! - `EXACT` (1): the word equals its dictionary entry; the entry's 4-bit index is stored.
//! - `PARTIAL` (2): the word's upper 22 bits equal the entry's; the index and the word's low
//!   10 bits XOR the entry's are stored, and the word replaces the entry.
//! - `MISS` (3): anything else; the whole word is stored and replaces the entry.
//!
//! The dictionary starts all zero, so small integers (upper bits zero) are partial matches
//! from the first one on. The original hashed bits 10..18 through a fixed table; taking bits
//! 10..14 as they are costs two instructions a word and spreads small integers, pointers into
//! nearby objects and counters as well.
//!
//! # Format
//! All fields little-endian; every section is whole 32-bit words.
//! - Header, 8 bytes: the number of full words (`u16`), of indices (`u16`: exact and partial
//!   words), of low-bit values (`u16`: partial words), and `1u16` (the format's version).
//! - Tags, 256 bytes: 64 words of 16 tags, word `16g + j`'s tag in bits `2j..2j+2` of word `g`.
//! - One stream of words, in the order the decompressor needs them: each full word where its
//!   word comes, and each word of indices (8, the first in bits 28..32, the next below) or of
//!   low bits (3, the first in bits 20..30) where its first value comes.
//!
//! A page therefore takes at least 264 bytes, and a page of small integers about half a page.
//!
//! # Speed
//! WKdm reads and writes pages and compressed bytes as 32-bit words (`zerocopy` views them
//! so, safely, when they are 4-byte aligned, as pages and heap blocks are; others are copied
//! through a [`Scratch`] first), so even where misaligned accesses are split into bytes
//! (`riscv64gc`) every access is one load or store. Each group of 16 words is written out
//! word by word (a macro), so that tag shifts and offsets are constants; indices and low bits
//! pass through accumulators; the stream's order means no section is moved at the end. A page
//! of small integers takes about 22,000 instructions to compress and 24,000 to decompress
//! (`riscv64gc` and `x86_64` alike, counted under QEMU), half what byte-wise sections did. Nothing
//! allocates: a cache keeps one [`Scratch`] (16 KiB) for its life; [`compress`] and
//! [`decompress`] put one on the stack, for tests and one-off use.
//!
//! [`decompress`] checks every count and offset: on malformed input it returns an error,
//! never panics and never reads outside its input.

use zerocopy::{FromBytes, IntoBytes};

use crate::PAGE_SIZE;

const WORDS: usize = PAGE_SIZE / 4;
const GROUP: usize = 16;
const GROUPS: usize = WORDS / GROUP;
const HEADER: usize = 8;
const TAGS: usize = GROUPS * 4;
/// Where the stream starts.
const BODY: usize = HEADER + TAGS;
/// The format's version, the header's last field.
const VERSION: u16 = 1;

const EXACT: u32 = 1;
const PARTIAL: u32 = 2;
const MISS: u32 = 3;
const LOW_MASK: u32 = (1 << 10) - 1;

/// The smallest output WKdm produces: header and tags.
pub const MIN_SIZE: usize = BODY;
/// The largest: header, tags and every word in full.
pub const MAX_SIZE: usize = BODY + PAGE_SIZE;
/// Words of [`Scratch::out`]: a power of two above [`MAX_SIZE`] and a group's overshoot, so
/// that stream offsets masked with `OUT - 1` are in range without a check.
const OUT: usize = 2048;
const _: () = assert!(OUT.is_power_of_two() && OUT * 4 >= MAX_SIZE + 4 * GROUP * 3);

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

/// The dictionary slot of `word`: bits 10..14, the lowest of its upper 22 bits.
#[inline(always)]
pub fn slot(word: u32) -> usize {
    ((word >> 10) & 15) as usize
}

/// WKdm's working memory, about 16 KiB, aligned to 8: compressed words are built here, and
/// pages and compressed bytes that are not 4-byte aligned are copied here first, so that
/// both directions access them a word at a time.
#[repr(C, align(8))]
pub struct Scratch {
    out: [u32; OUT],
    page: [u32; WORDS],
    input: [u32; MAX_SIZE / 4],
}

impl Default for Scratch {
    fn default() -> Scratch {
        Scratch::new()
    }
}

impl Scratch {
    /// A zeroed scratch buffer.
    pub const fn new() -> Scratch {
        Scratch { out: [0; OUT], page: [0; WORDS], input: [0; MAX_SIZE / 4] }
    }

    /// Compresses `page` into this buffer, returning the compressed bytes, or `None` if they
    /// would be more than `limit` bytes: the page is incompressible at that size, which is
    /// known, and compression stops, as soon as the words so far pass `limit`.
    pub fn compress(&mut self, page: &[u8; PAGE_SIZE], limit: usize) -> Option<&[u8]> {
        let limit = limit.min(MAX_SIZE) / 4;
        if limit < BODY / 4 {
            return None;
        }
        let Scratch { out, page: copy, .. } = self;
        let words: &[u32; WORDS] = match <[u32; WORDS]>::ref_from_bytes(page) {
            Ok(words) => words,
            Err(_) => {
                copy.as_mut_bytes().copy_from_slice(page);
                copy
            }
        };
        const M: usize = OUT - 1;
        // Entries widened to 64 bits, so that comparisons need no sign extension.
        let mut dict = [0u64; 16];
        // The next stream word goes to `out[at]`.
        let mut at = BODY / 4;
        // Index and low-bit words being filled, at `out[index_at]` and `out[low_at]`, and how
        // many were begun. Values enter at the bottom of a 64-bit accumulator, above a 1 bit
        // that reaches bit 63 when the word is full, and the next value then begins a new
        // word. Index values are kept times 8 (dictionary offsets), so an index word's
        // nibbles are bits 3..35. Before the first word, both point at the header.
        const FULL: u64 = 1 << 63;
        let (mut index_acc, mut index_at, mut index_words) = (FULL, 0, 0);
        let (mut low_acc, mut low_at, mut low_words) = (FULL, 0, 0);
        for (g, group) in words.as_chunks::<GROUP>().0.iter().enumerate() {
            let mut tags = 0u32;
            // One word, `group[$j]`; written out 16 times, so that its tag's shift and its
            // place in the group are constants.
            macro_rules! word {
                ($j:expr) => {
                    let w = u32::from_le(group[$j]) as u64;
                    // 8 times the slot: the entry's byte offset.
                    let s8 = (w >> 7) as usize & 0x78;
                    let d = dict[s8 / 8];
                    macro_rules! push_index {
                        () => {
                            if index_acc & FULL != 0 {
                                out[index_at & M] = ((index_acc >> 3) as u32).to_le();
                                (index_acc, index_at) = (1 << 31, at);
                                at += 1;
                                index_words += 1;
                            }
                            index_acc = index_acc << 4 | s8 as u64;
                        };
                    }
                    if w == 0 {
                        // Tag 0, `ZERO`: nothing stored.
                    } else if w == d {
                        push_index!();
                        tags |= EXACT << (2 * $j);
                    } else if w ^ d <= LOW_MASK as u64 {
                        dict[s8 / 8] = w;
                        push_index!();
                        if low_acc & FULL != 0 {
                            out[low_at & M] = (low_acc as u32).to_le();
                            (low_acc, low_at) = (1 << 33, at);
                            at += 1;
                            low_words += 1;
                        }
                        low_acc = low_acc << 10 | (w ^ d);
                        tags |= PARTIAL << (2 * $j);
                    } else {
                        dict[s8 / 8] = w;
                        out[at & M] = (w as u32).to_le();
                        at += 1;
                        tags |= MISS << (2 * $j);
                    }
                };
            }
            word!(0);
            word!(1);
            word!(2);
            word!(3);
            word!(4);
            word!(5);
            word!(6);
            word!(7);
            word!(8);
            word!(9);
            word!(10);
            word!(11);
            word!(12);
            word!(13);
            word!(14);
            word!(15);
            out[(HEADER / 4 + g) & M] = tags.to_le();
            if at > limit {
                return None;
            }
        }
        // The last words, their values moved to the top as if full.
        let (mut index_left, mut low_left) = (0, 0);
        while index_acc & FULL == 0 {
            index_acc <<= 4;
            index_left += 1;
        }
        while low_acc & FULL == 0 {
            low_acc <<= 10;
            low_left += 1;
        }
        out[index_at & M] = ((index_acc >> 3) as u32).to_le();
        out[low_at & M] = (low_acc as u32).to_le();
        let n_idx = 8 * index_words - index_left;
        let n_low = 3 * low_words - low_left;
        let n_miss = at - BODY / 4 - index_words - low_words;
        out[0] = (n_miss as u32 | (n_idx as u32) << 16).to_le();
        out[1] = (n_low as u32 | (VERSION as u32) << 16).to_le();
        Some(out[..at].as_bytes())
    }

    /// Decompresses `input`, made by [`compress`], into `page`. Malformed input is an error
    /// (never a panic or a read outside `input`); on an error `page` holds unspecified bytes.
    pub fn decompress(
        &mut self,
        input: &[u8],
        page: &mut [u8; PAGE_SIZE],
    ) -> Result<(), WkdmError> {
        if input.len() < BODY || input.len() > MAX_SIZE || !input.len().is_multiple_of(4) {
            return Err(WkdmError::Length);
        }
        let Scratch { page: copy, input: input_copy, .. } = self;
        let stream: &[u32] = match <[u32]>::ref_from_bytes(input) {
            Ok(words) => words,
            Err(_) => {
                let words = &mut input_copy[..input.len() / 4];
                words.as_mut_bytes().copy_from_slice(input);
                words
            }
        };
        let (head, tag_words) = (u32::from_le(stream[0]), u32::from_le(stream[1]));
        let (n_miss, n_idx) = ((head & 0xffff) as usize, (head >> 16) as usize);
        let (n_low, version) = ((tag_words & 0xffff) as usize, tag_words >> 16);
        if version != VERSION as u32 {
            return Err(WkdmError::Version);
        }
        if n_miss + n_idx > WORDS || n_low > n_idx {
            return Err(WkdmError::Counts);
        }
        if stream.len() != BODY / 4 + n_miss + n_idx.div_ceil(8) + n_low.div_ceil(3) {
            return Err(WkdmError::Length);
        }
        let (tags, stream) = stream[HEADER / 4..].split_at(GROUPS);
        let mut at = 0usize;
        // Index and low-bit words being read, the next value at the top (low bits shifted
        // up by 2 to be so), and how many values are left in each.
        let (mut index_acc, mut index_left, mut low_acc, mut low_left) = (0u32, 0u32, 0u32, 0u32);
        let (mut index_words, mut low_words) = (0usize, 0usize);
        let mut dict = [0u32; 16];
        let aligned = <[u32; WORDS]>::mut_from_bytes(page).is_ok();
        let out: &mut [u32; WORDS] = match <[u32; WORDS]>::mut_from_bytes(page) {
            Ok(words) => words,
            Err(_) => copy,
        };
        for (dst, &t) in out.as_chunks_mut::<GROUP>().0.iter_mut().zip(tags) {
            let t = u32::from_le(t);
            if t == 0 {
                *dst = [0; GROUP];
                continue;
            }
            // One word, `dst[$j]`; written out 16 times, so that its tag's shift and its place
            // in the group are constants.
            macro_rules! word {
                ($j:expr) => {
                    // The tag's two bits, tested where they are.
                    let (high, low) = (t & (2 << (2 * $j)) != 0, t & (1 << (2 * $j)) != 0);
                    macro_rules! index {
                        () => {{
                            if index_left == 0 {
                                index_acc = u32::from_le(*stream.get(at).ok_or(WkdmError::Counts)?);
                                at += 1;
                                index_words += 1;
                                index_left = 8;
                            }
                            index_left -= 1;
                            let s = (index_acc >> 28) as usize;
                            index_acc <<= 4;
                            s
                        }};
                    }
                    // The likeliest first.
                    let w = if high && !low {
                        let s = index!();
                        if low_left == 0 {
                            let w = u32::from_le(*stream.get(at).ok_or(WkdmError::Counts)?);
                            at += 1;
                            low_words += 1;
                            low_acc = w << 2;
                            low_left = 3;
                        }
                        low_left -= 1;
                        let w = dict[s] ^ low_acc >> 22;
                        low_acc <<= 10;
                        dict[s] = w;
                        w
                    } else if !high {
                        if low { dict[index!()] } else { 0 }
                    } else {
                        let w = u32::from_le(*stream.get(at).ok_or(WkdmError::Counts)?);
                        at += 1;
                        dict[slot(w)] = w;
                        w
                    };
                    dst[$j] = w.to_le();
                };
            }
            word!(0);
            word!(1);
            word!(2);
            word!(3);
            word!(4);
            word!(5);
            word!(6);
            word!(7);
            word!(8);
            word!(9);
            word!(10);
            word!(11);
            word!(12);
            word!(13);
            word!(14);
            word!(15);
        }
        if !aligned {
            page.copy_from_slice(copy.as_bytes());
        }
        // The whole stream read, and as many indices and low bits as the header says (the
        // last word of each may be part padding).
        if at == stream.len()
            && index_words * 8 - index_left as usize == n_idx
            && low_words * 3 - low_left as usize == n_low
        {
            Ok(())
        } else {
            Err(WkdmError::Counts)
        }
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
