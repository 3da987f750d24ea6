//! The three workloads of the Heracles evaluation (McDonald, 2001, ch. 12 and App. G), scaled
//! down for Tessera's paged stretches: a stand-in for SPEC Int95 *compress* ([`compress`]), a
//! matrix multiplication with the second matrix stored column-contiguous ([`matmul`]), and a
//! sharpen filter over an image split into three colour channels ([`filter`]).
//!
//! Each program is a pure function over memory the caller gives it as one `&mut [u8]` region.
//! In the OS that region lies in a paged stretch, so any access may fault; what matters is the
//! *access pattern*, and each program keeps the thesis's: every buffer is filled, read and
//! written in linear sweeps, and dirty pages are therefore evicted linearly. The programs never
//! allocate: their only private state is a few KiB on the stack (the compressor's hash table,
//! the filter's two saved rows), so every large access goes to the caller's region.
//!
//! # Invariants
//!
//! - Each module has a `Params` with `DEFAULT` (the thesis's configuration at 1/16 scale, next
//!   to a `DEFAULT_MEMORY` that is the thesis's physical memory at the same scale), `TEST` (tiny,
//!   for host tests) and a `scaled(memory_bytes)` that keeps the thesis's ratio of working set
//!   to physical memory.
//! - `Params::bytes_needed` is a whole number of [`PAGE_SIZE`] pages: each buffer starts at a
//!   page-multiple offset in the region and is rounded up to whole pages. The region may be
//!   longer; the programs use its first `bytes_needed` bytes. No alignment is required (words
//!   are read and written through `from_le_bytes`/`to_le_bytes`), but a page-aligned region
//!   gives page-aligned buffers, which is what the thesis's layout assumes.
//! - Every run is deterministic in its `Params` and its `seed`; the [`Checksum`] it reports
//!   covers its whole output and is computed while the output is produced (no extra sweep).
//!   Host tests compare it with straightforward reference implementations.
//!
//! # Not implemented
//!
//! The real SPEC compress (LZW over a file) is replaced by a small LZ77 over generated text;
//! the thesis's bitmap is replaced by a generated image. Phases cannot be run separately, and
//! nothing here measures time or faults: that is the caller's job.

#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod compress;
pub mod filter;
pub mod matmul;

/// The page size that buffers are aligned to and rounded up to, in bytes.
pub const PAGE_SIZE: usize = 4096;

/// `bytes` rounded up to a whole number of [`PAGE_SIZE`] pages.
pub const fn round_up_to_page(bytes: usize) -> usize {
    bytes.div_ceil(PAGE_SIZE) * PAGE_SIZE
}

/// The largest `r` with `r * r <= n`.
pub(crate) const fn isqrt(n: usize) -> usize {
    if n < 2 {
        return n;
    }
    // Newton's method from above: the iterates decrease monotonically to the floor root.
    let mut x = n;
    let mut y = x.div_ceil(2);
    while y < x {
        x = y;
        y = (x + n / x) / 2;
    }
    x
}

/// The programs' pseudo-random number generator: xorshift64* (Vigna, 2016). Small, fast and
/// fully determined by its seed, which is all the workloads need.
#[derive(Clone, Debug)]
pub struct Prng {
    state: u64,
}

impl Prng {
    /// A generator from `seed`. Any seed is valid: it is mixed (SplitMix64) first, so that
    /// nearby seeds give unrelated sequences and seed 0 does not give the all-zero state.
    pub const fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Prng { state: if z == 0 { 1 } else { z } }
    }

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A pseudo-random value in `0..n` (`n > 0`); the tiny modulo bias does not matter here.
    pub fn below(&mut self, n: u32) -> u32 {
        ((self.next_u64() >> 32) % u64::from(n)) as u32
    }
}

/// The checksum every program reports: 64-bit FNV-1a over the bytes of its output, in the order
/// the program documents.
#[derive(Clone, Debug)]
pub struct Checksum {
    hash: u64,
}

impl Checksum {
    const OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01B3;

    /// An empty checksum.
    pub const fn new() -> Self {
        Checksum { hash: Self::OFFSET }
    }

    /// Feeds one byte.
    pub fn write_u8(&mut self, byte: u8) {
        self.hash = (self.hash ^ u64::from(byte)).wrapping_mul(Self::PRIME);
    }

    /// Feeds `bytes` in order.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u8(b);
        }
    }

    /// The checksum of everything fed so far.
    pub const fn finish(&self) -> u64 {
        self.hash
    }
}

impl Default for Checksum {
    fn default() -> Self {
        Self::new()
    }
}

/// The size at which [`Program`] runs a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// The tiny `TEST` parameters, for host tests and smoke runs.
    Test,
    /// The `DEFAULT` parameters: the thesis's configuration at 1/16 scale.
    Default,
    /// `scaled(bytes)`: the thesis's ratio of working set to physical memory, for a physical
    /// memory of `bytes` bytes.
    Memory(usize),
}

/// What [`Program::run`] reports, common to the three programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The program's output checksum.
    pub checksum: u64,
    /// Whether the program's own check passed. Only [`compress`] checks itself (decompressed
    /// data equal to the original); the others always report `true`.
    pub ok: bool,
}

/// One of the three workloads, for callers that choose it by name (an app's command line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    /// [`compress`]: fill, compress, decompress, compare three equal buffers.
    Compress,
    /// [`matmul`]: `C = A × B` with `B` stored column-contiguous.
    Matmul,
    /// [`filter`]: a 3×3 sharpen filter over three colour channels, in place.
    Filter,
}

impl Program {
    /// All three programs, in the thesis's order.
    pub const ALL: [Program; 3] = [Program::Compress, Program::Matmul, Program::Filter];

    /// The program's name: `"compress"`, `"matmul"` or `"filter"`.
    pub const fn name(self) -> &'static str {
        match self {
            Program::Compress => "compress",
            Program::Matmul => "matmul",
            Program::Filter => "filter",
        }
    }

    /// The program called `name` (as [`Program::name`] spells it), if any.
    pub fn from_name(name: &str) -> Option<Program> {
        Program::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The physical memory, in bytes, that the thesis gave the program, at the same 1/16 scale
    /// as [`Scale::Default`].
    pub const fn default_memory(self) -> usize {
        match self {
            Program::Compress => compress::DEFAULT_MEMORY,
            Program::Matmul => matmul::DEFAULT_MEMORY,
            Program::Filter => filter::DEFAULT_MEMORY,
        }
    }

    /// The region size, in bytes (whole pages), that [`Program::run`] needs at `scale`.
    pub fn bytes_needed(self, scale: Scale) -> usize {
        match self {
            Program::Compress => compress_params(scale).bytes_needed(),
            Program::Matmul => matmul_params(scale).bytes_needed(),
            Program::Filter => filter_params(scale).bytes_needed(),
        }
    }

    /// Runs the program at `scale` over `region` with `seed`.
    ///
    /// # Panics
    ///
    /// If `region` is shorter than [`Program::bytes_needed`], or if the scale's parameters are
    /// invalid (see each module's `run`).
    pub fn run(self, scale: Scale, region: &mut [u8], seed: u64) -> Summary {
        match self {
            Program::Compress => {
                let r = compress::run(&compress_params(scale), region, seed);
                Summary { checksum: r.checksum, ok: r.equal }
            }
            Program::Matmul => {
                let r = matmul::run(&matmul_params(scale), region, seed);
                Summary { checksum: r.checksum, ok: true }
            }
            Program::Filter => {
                let r = filter::run(&filter_params(scale), region, seed);
                Summary { checksum: r.checksum, ok: true }
            }
        }
    }
}

fn compress_params(scale: Scale) -> compress::Params {
    match scale {
        Scale::Test => compress::Params::TEST,
        Scale::Default => compress::Params::DEFAULT,
        Scale::Memory(bytes) => compress::Params::scaled(bytes),
    }
}

fn matmul_params(scale: Scale) -> matmul::Params {
    match scale {
        Scale::Test => matmul::Params::TEST,
        Scale::Default => matmul::Params::DEFAULT,
        Scale::Memory(bytes) => matmul::Params::scaled(bytes),
    }
}

fn filter_params(scale: Scale) -> filter::Params {
    match scale {
        Scale::Test => filter::Params::TEST,
        Scale::Default => filter::Params::DEFAULT,
        Scale::Memory(bytes) => filter::Params::scaled(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn isqrt_is_the_floor_root() {
        for n in 0..10_000usize {
            let r = isqrt(n);
            assert!(r * r <= n && (r + 1) * (r + 1) > n, "isqrt({n}) = {r}");
        }
        assert_eq!(isqrt(62_500), 250);
        assert_eq!(isqrt(usize::MAX), (1usize << (usize::BITS / 2)) - 1);
    }

    #[test]
    fn prng_depends_on_the_seed() {
        let a: [u64; 4] = core::array::from_fn({
            let mut p = Prng::new(1);
            move |_| p.next_u64()
        });
        let b: [u64; 4] = core::array::from_fn({
            let mut p = Prng::new(1);
            move |_| p.next_u64()
        });
        let c: [u64; 4] = core::array::from_fn({
            let mut p = Prng::new(2);
            move |_| p.next_u64()
        });
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut p = Prng::new(0);
        assert!((0..1000).all(|_| p.below(10) < 10));
    }

    #[test]
    fn checksum_is_fnv1a() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(Checksum::new().finish(), 0xCBF2_9CE4_8422_2325);
        let mut c = Checksum::new();
        c.write(b"a");
        assert_eq!(c.finish(), 0xAF63_DC4C_8601_EC8C);
        let mut c = Checksum::new();
        c.write(b"foobar");
        assert_eq!(c.finish(), 0x8594_4171_F739_67E8);
    }

    #[test]
    fn names_round_trip() {
        for p in Program::ALL {
            assert_eq!(Program::from_name(p.name()), Some(p));
        }
        assert_eq!(Program::from_name("gcc"), None);
    }

    #[test]
    fn regions_are_whole_pages() {
        for p in Program::ALL {
            for scale in [
                Scale::Test,
                Scale::Default,
                Scale::Memory(p.default_memory()),
                Scale::Memory(3 << 20),
                Scale::Memory(16 << 20),
            ] {
                let n = p.bytes_needed(scale);
                assert!(n > 0 && n % PAGE_SIZE == 0, "{} at {scale:?}: {n}", p.name());
            }
            assert_eq!(
                p.bytes_needed(Scale::Default),
                p.bytes_needed(Scale::Memory(p.default_memory()))
            );
        }
    }

    #[test]
    fn every_program_runs_by_name() {
        for p in Program::ALL {
            let mut region = vec![0u8; p.bytes_needed(Scale::Test)];
            let a = p.run(Scale::Test, &mut region, 7);
            let b = p.run(Scale::Test, &mut region, 7);
            let c = p.run(Scale::Test, &mut region, 8);
            assert!(a.ok && c.ok, "{}", p.name());
            assert_eq!(a, b, "{}", p.name());
            assert_ne!(a.checksum, c.checksum, "{}", p.name());
        }
    }
}
