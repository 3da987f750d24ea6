//! *compress* (thesis App. G, after SPEC Int95 129.compress): three equal buffers, filled,
//! compressed, decompressed and compared.
//!
//! Region layout: buffers 1, 2 and 3, each [`Params::data_bytes`] rounded up to whole pages
//! and starting on a page boundary.
//!
//! Phases and access pattern (all linear, so dirty pages are evicted linearly, the best case
//! for buffered writes and prefetching and the worst for a compressed cache):
//! 1. *fill*: buffer 1 gets `data_bytes` of text-like data: words and stock phrases drawn by a
//!    [`Prng`] from fixed lists (skewed towards the front of each list), separated by spaces,
//!    commas and full stops with line breaks (see [`fill`]). It compresses about 2.5 : 1 here.
//! 2. *compress*: buffer 1 into buffer 2 with the LZ77 below. Matches look back at most
//!    [`WINDOW`] bytes (the last page or two of buffer 1); the match finder's hash table is a
//!    4 KiB array on the stack, never in the region.
//! 3. *decompress*: buffer 2 into buffer 3; matches copy from at most [`WINDOW`] bytes back in
//!    buffer 3.
//! 4. *compare*: buffers 1 and 3, side by side.
//!
//! The compressed format is a sequence of tokens, each starting with a control byte `c`:
//! - `c < 0x80`: a literal run: the next `c + 1` bytes are copied as they are;
//! - `c ≥ 0x80`: a match of `(c & 0x7F) + MIN_MATCH` bytes copied from `offset` bytes back in
//!   the output, where `offset` (`1..=WINDOW`) is the next two bytes, little-endian. A match
//!   may overlap its own output (offset < length), which repeats a pattern.
//!
//! The checksum is FNV-1a over the compressed stream (buffer 2's used bytes) followed by the
//! decompressed data (buffer 3's `data_bytes`), so it covers both the compressor's output and
//! the round trip.

use crate::{Checksum, Prng, round_up_to_page};

/// The thesis's physical memory for compress (16 MB) at 1/16 scale: 1 MiB.
pub const DEFAULT_MEMORY: usize = 1 << 20;

/// How far back a match may reach, in bytes.
pub const WINDOW: usize = 4096;

/// The shortest match the compressor emits.
pub const MIN_MATCH: usize = 4;

/// The longest match one token holds.
pub const MAX_MATCH: usize = MIN_MATCH + 0x7F;

/// The longest literal run one token holds.
pub const MAX_LITERALS: usize = 0x80;

/// log2 of the match finder's hash table entries (4 bytes each, on the stack).
const HASH_BITS: u32 = 10;

/// The size of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Bytes of data in buffer 1 (and, after the round trip, buffer 3); at least 1.
    pub data_bytes: usize,
}

impl Params {
    /// The thesis's three 14,160 KB buffers with 16 MB at 1/16 scale: three buffers of
    /// 885 KiB (222 pages each) for [`DEFAULT_MEMORY`].
    pub const DEFAULT: Params = Params::scaled(DEFAULT_MEMORY);

    /// A tiny run for tests: 10,000 bytes per buffer.
    pub const TEST: Params = Params { data_bytes: 10_000 };

    /// The thesis's configuration scaled to `memory_bytes` of physical memory: each buffer is
    /// 14,160 / 16,384 of the memory (at least 1 byte).
    pub const fn scaled(memory_bytes: usize) -> Params {
        let data = (memory_bytes as u128 * 14_160 / 16_384) as usize;
        Params { data_bytes: if data == 0 { 1 } else { data } }
    }

    /// The size of each buffer in the region: `data_bytes` rounded up to whole pages.
    pub const fn buffer_bytes(&self) -> usize {
        round_up_to_page(self.data_bytes)
    }

    /// The region size needed, in bytes: three buffers of [`Params::buffer_bytes`].
    pub const fn bytes_needed(&self) -> usize {
        3 * self.buffer_bytes()
    }
}

/// The result of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Report {
    /// Bytes of compressed data in buffer 2, or `None` if it did not fit (it always fits for
    /// the generated text; then phases 3 and 4 are skipped and `equal` is false).
    pub compressed_len: Option<usize>,
    /// Whether buffer 3 came out equal to buffer 1.
    pub equal: bool,
    /// FNV-1a over the compressed stream followed by the decompressed data.
    pub checksum: u64,
}

/// Runs the four phases over `region` with `seed`.
///
/// # Panics
///
/// If `region` is shorter than [`Params::bytes_needed`], `data_bytes` is zero, or
/// `data_bytes` does not fit in a `u32`.
pub fn run(params: &Params, region: &mut [u8], seed: u64) -> Report {
    let n = params.data_bytes;
    assert!(n > 0 && u32::try_from(n).is_ok(), "compress: bad data size");
    assert!(region.len() >= params.bytes_needed(), "compress: region too small");
    let size = params.buffer_bytes();
    let (one, rest) = region.split_at_mut(size);
    let (two, rest) = rest.split_at_mut(size);
    let three = &mut rest[..size];
    let one = &mut one[..n];

    fill(one, &mut Prng::new(seed));
    let mut sum = Checksum::new();
    let Some(compressed_len) = compress_into(one, two, &mut sum) else {
        return Report { compressed_len: None, equal: false, checksum: sum.finish() };
    };
    let decompressed = decompress_into(&two[..compressed_len], three);
    let mut equal = decompressed == Some(n);
    for (a, b) in one.iter().zip(three[..n].iter()) {
        equal &= a == b;
        sum.write_u8(*b);
    }
    Report { compressed_len: Some(compressed_len), equal, checksum: sum.finish() }
}

/// The words the text is made of, most frequent first.
pub const WORDS: [&str; 64] = [
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "had",
    "they",
    "you",
    "were",
    "their",
    "one",
    "all",
    "we",
    "can",
    "her",
    "has",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "memory",
    "page",
    "paging",
    "remote",
    "disk",
    "network",
    "compressed",
    "cache",
    "application",
    "resource",
    "physical",
    "virtual",
    "domain",
    "stretch",
    "frame",
    "fault",
];

/// Stock phrases that the text repeats, most frequent first.
pub const PHRASES: [&str; 16] = [
    "of the",
    "in the",
    "the page fault",
    "to the disk",
    "the compressed cache",
    "remote paging over the network",
    "each application pays for its own",
    "a stretch of virtual memory",
    "physical memory is a resource",
    "the frames of the domain",
    "it is not the case that",
    "which would have been",
    "when the cache is full",
    "from one host to another",
    "as well as",
    "at the same time",
];

/// Phase 1: fills `buf` with text, truncating the last word.
///
/// Each item is a stock phrase (one time in three) or a single word, each drawn as the
/// smaller of two uniform draws so that the front of each list is the most frequent, followed
/// by a space, a comma (1/16) or a full stop and a line break (1/32).
pub fn fill(buf: &mut [u8], rng: &mut Prng) {
    let mut out = 0;
    while out < buf.len() {
        let item = if rng.below(3) == 0 {
            PHRASES[rng.below(PHRASES.len() as u32).min(rng.below(PHRASES.len() as u32)) as usize]
        } else {
            WORDS[rng.below(WORDS.len() as u32).min(rng.below(WORDS.len() as u32)) as usize]
        };
        let sep: &[u8] = match rng.below(32) {
            0 | 1 => b", ",
            2 => b".\n",
            _ => b" ",
        };
        for &byte in item.as_bytes().iter().chain(sep) {
            if out == buf.len() {
                return;
            }
            buf[out] = byte;
            out += 1;
        }
    }
}

fn hash(bytes: &[u8]) -> usize {
    let v = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    (v.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize
}

/// Appends `bytes` to `dst` at `*out`, feeding them to `sum`; `None` if they do not fit.
fn emit(dst: &mut [u8], out: &mut usize, bytes: &[u8], sum: &mut Checksum) -> Option<()> {
    let to = dst.get_mut(*out..*out + bytes.len())?;
    to.copy_from_slice(bytes);
    sum.write(bytes);
    *out += bytes.len();
    Some(())
}

fn emit_literals(dst: &mut [u8], out: &mut usize, lits: &[u8], sum: &mut Checksum) -> Option<()> {
    for run in lits.chunks(MAX_LITERALS) {
        emit(dst, out, &[(run.len() - 1) as u8], sum)?;
        emit(dst, out, run, sum)?;
    }
    Some(())
}

/// Phase 2: compresses `src` into `dst`, feeding the output to `sum`. Returns the compressed
/// length, or `None` if it does not fit in `dst`. `src` must be shorter than 4 GiB.
pub fn compress_into(src: &[u8], dst: &mut [u8], sum: &mut Checksum) -> Option<usize> {
    // Each entry is 1 + the last position whose next four bytes hashed there; 0 is empty.
    let mut table = [0u32; 1 << HASH_BITS];
    let mut out = 0;
    let mut literals = 0; // start of the pending literal run
    let mut i = 0;
    while i + MIN_MATCH <= src.len() {
        let h = hash(&src[i..]);
        let candidate = table[h] as usize;
        table[h] = (i + 1) as u32;
        let mut len = 0;
        let mut offset = 0;
        if candidate != 0 && i - (candidate - 1) <= WINDOW {
            let from = candidate - 1;
            let max = (src.len() - i).min(MAX_MATCH);
            while len < max && src[from + len] == src[i + len] {
                len += 1;
            }
            offset = i - from;
        }
        if len < MIN_MATCH {
            i += 1;
            continue;
        }
        emit_literals(dst, &mut out, &src[literals..i], sum)?;
        let [lo, hi] = (offset as u16).to_le_bytes();
        emit(dst, &mut out, &[0x80 | (len - MIN_MATCH) as u8, lo, hi], sum)?;
        // Index the positions inside the match too, so later text finds them.
        for j in i + 1..(i + len).min(src.len() + 1 - MIN_MATCH) {
            table[hash(&src[j..])] = (j + 1) as u32;
        }
        i += len;
        literals = i;
    }
    emit_literals(dst, &mut out, &src[literals..], sum)?;
    Some(out)
}

/// Phase 3: decompresses `src` into `dst`. Returns the decompressed length, or `None` if `src`
/// is malformed or the output does not fit in `dst`.
pub fn decompress_into(src: &[u8], dst: &mut [u8]) -> Option<usize> {
    let mut i = 0;
    let mut out = 0;
    while i < src.len() {
        let c = src[i];
        i += 1;
        if c < 0x80 {
            let n = usize::from(c) + 1;
            dst.get_mut(out..out + n)?.copy_from_slice(src.get(i..i + n)?);
            i += n;
            out += n;
        } else {
            let len = usize::from(c & 0x7F) + MIN_MATCH;
            let offset = usize::from(u16::from_le_bytes(src.get(i..i + 2)?.try_into().ok()?));
            i += 2;
            if offset == 0 || offset > out || out + len > dst.len() {
                return None;
            }
            // Byte by byte, forwards: an overlapping match repeats its pattern.
            for k in out..out + len {
                dst[k] = dst[k - offset];
            }
            out += len;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec;
    use alloc::vec::Vec;

    /// The text, generated independently of `fill` (whole words, then cut).
    fn reference_text(n: usize, seed: u64) -> Vec<u8> {
        let mut rng = Prng::new(seed);
        let mut text = String::new();
        while text.len() < n {
            if rng.below(3) == 0 {
                let a = rng.below(16);
                let b = rng.below(16);
                text.push_str(PHRASES[a.min(b) as usize]);
            } else {
                let a = rng.below(64);
                let b = rng.below(64);
                text.push_str(WORDS[a.min(b) as usize]);
            }
            text.push_str(match rng.below(32) {
                0 | 1 => ", ",
                2 => ".\n",
                _ => " ",
            });
        }
        let mut bytes = text.into_bytes();
        bytes.truncate(n);
        bytes
    }

    /// A decoder for the documented format, written separately from `decompress_into`.
    fn reference_decode(stream: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut it = stream.iter().copied();
        while let Some(c) = it.next() {
            if c & 0x80 == 0 {
                for _ in 0..=c {
                    out.push(it.next().expect("truncated literals"));
                }
            } else {
                let len = (c & 0x7F) as usize + MIN_MATCH;
                let off = it.next().unwrap() as usize | (it.next().unwrap() as usize) << 8;
                assert!((1..=WINDOW).contains(&off) && off <= out.len(), "bad offset {off}");
                for _ in 0..len {
                    out.push(out[out.len() - off]);
                }
            }
        }
        out
    }

    fn check(p: Params, seed: u64) -> Report {
        let mut region = vec![0xEEu8; p.bytes_needed()];
        let report = run(&p, &mut region, seed);
        let text = reference_text(p.data_bytes, seed);
        let size = p.buffer_bytes();
        assert_eq!(&region[..p.data_bytes], &text[..], "fill");
        let len = report.compressed_len.expect("text compresses");
        let stream = &region[size..size + len];
        assert_eq!(reference_decode(stream), text, "round trip through the reference decoder");
        assert_eq!(&region[2 * size..2 * size + p.data_bytes], &text[..], "buffer 3");
        assert!(report.equal);
        let mut sum = Checksum::new();
        sum.write(stream);
        sum.write(&text);
        assert_eq!(report.checksum, sum.finish());
        report
    }

    #[test]
    fn round_trips_and_matches_the_reference() {
        let r = check(Params::TEST, 1);
        let len = r.compressed_len.unwrap();
        // Text-like: between 2 : 1 and 3.5 : 1.
        assert!(len * 2 < Params::TEST.data_bytes, "ratio too low: {len}");
        assert!(len * 7 > Params::TEST.data_bytes * 2, "ratio too high: {len}");
        for (n, seed) in [(1, 2), (3, 3), (4, 4), (5, 5), (129, 6), (4097, 7), (50_000, 8)] {
            check(Params { data_bytes: n }, seed);
        }
    }

    #[test]
    fn deterministic_in_the_seed() {
        let p = Params::TEST;
        let mut region = vec![0u8; p.bytes_needed()];
        let a = run(&p, &mut region, 21);
        assert_eq!(run(&p, &mut region, 21), a);
        assert_ne!(run(&p, &mut region, 22).checksum, a.checksum);
    }

    #[test]
    fn incompressible_data_does_not_overrun() {
        // Random bytes expand by 1/128; a destination of the same size overflows cleanly.
        let mut rng = Prng::new(5);
        let src: Vec<u8> = (0..8192).map(|_| rng.next_u64() as u8).collect();
        let mut dst = vec![0u8; 8192];
        assert_eq!(compress_into(&src, &mut dst, &mut Checksum::new()), None);
        let mut dst = vec![0u8; 8192 + 64];
        let len = compress_into(&src, &mut dst, &mut Checksum::new()).unwrap();
        let mut back = vec![0u8; 8192];
        assert_eq!(decompress_into(&dst[..len], &mut back), Some(8192));
        assert_eq!(back, src);
    }

    #[test]
    fn repeats_and_malformed_streams() {
        let src = [b'x'; 1000];
        let mut dst = [0u8; 64];
        let len = compress_into(&src, &mut dst, &mut Checksum::new()).unwrap();
        assert!(len < 40, "{len}");
        let mut back = [0u8; 1000];
        assert_eq!(decompress_into(&dst[..len], &mut back), Some(1000));
        assert_eq!(back, src);
        let mut out = [0u8; 16];
        assert_eq!(decompress_into(&[0x80, 1, 0], &mut out), None, "offset before start");
        assert_eq!(decompress_into(&[0x05, 1, 2], &mut out), None, "truncated literals");
        assert_eq!(decompress_into(&[0x00, 1, 0x80, 1], &mut out), None, "truncated offset");
    }

    #[test]
    fn default_matches_the_thesis_ratio() {
        assert_eq!(Params::DEFAULT.data_bytes, 885 << 10);
        assert_eq!(Params::DEFAULT.buffer_bytes(), 222 * crate::PAGE_SIZE);
        assert_eq!(Params::scaled(16 << 20).data_bytes, 14_160 << 10);
    }

    /// The full default run (885 KiB), as the OS runs it.
    #[test]
    fn default_round_trips() {
        let r = check(Params::DEFAULT, 1);
        let len = r.compressed_len.unwrap();
        assert!(len * 2 < Params::DEFAULT.data_bytes, "{len}");
    }
}
