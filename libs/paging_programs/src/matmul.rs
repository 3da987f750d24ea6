//! *MatMult* (thesis App. G): `C = A × B` for an `x × y` matrix `A` and a `y × x` matrix `B`
//! of pseudo-random values 1–10, giving an `x × x` matrix `C`.
//!
//! `A` and `C` are row-major; `B` is stored *column-contiguous* (column `j` is `y` consecutive
//! elements), as in the thesis, so that each dot product reads a row of `A` and a column of `B`
//! both linearly. Elements are `u32`, little-endian, and the arithmetic wraps.
//!
//! Region layout: `A` at offset 0, then `B`, then `C`, each starting on a page boundary and
//! rounded up to whole pages.
//!
//! Phases and access pattern:
//! 1. *init*: `A` filled row by row, then `B` column by column, from one [`Prng`] stream seeded
//!    with the run's seed (each value is `1 + below(10)`).
//! 2. *multiply*: for each row `i` of `A`, for each column `j` of `B`, `C[i][j]` is the dot
//!    product; so a row of `A` stays hot while all of `B` is swept once per row, and `C` is
//!    written linearly.
//!
//! The checksum is FNV-1a over `C`'s bytes in row-major order (each element little-endian).

use crate::{Checksum, PAGE_SIZE, Prng, isqrt, round_up_to_page};

/// The thesis's physical memory for matmul (16 MB) at 1/16 scale: 1 MiB.
pub const DEFAULT_MEMORY: usize = 1 << 20;

/// The size of one multiplication.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Rows of `A`, columns of `B`, and both dimensions of `C`.
    pub x: usize,
    /// Columns of `A` and rows of `B`.
    pub y: usize,
}

impl Params {
    /// The thesis's 1000 × 2000 at 1/16 of the memory: `x = 250`, `y = 500` (`A` and `B`
    /// 500,000 bytes each, `C` 250,000 bytes) for [`DEFAULT_MEMORY`].
    pub const DEFAULT: Params = Params::scaled(DEFAULT_MEMORY);

    /// A tiny multiplication for tests: 12 × 20 by 20 × 12.
    pub const TEST: Params = Params { x: 12, y: 20 };

    /// The thesis's configuration (x = 1000, y = 2000 with 16 MiB) scaled to `memory_bytes` of
    /// physical memory: `y = 2x` and the three matrices together (`20 x²` bytes) keep the
    /// thesis's ratio to memory, so `x = 1000 · √(memory / 16 MiB)` (at least 1).
    pub const fn scaled(memory_bytes: usize) -> Params {
        // 1000² · memory / 2^24 without overflow for any realistic memory size.
        let x2 = (memory_bytes as u128 * 1_000_000 / (16 << 20) as u128) as usize;
        let x = isqrt(x2);
        let x = if x == 0 { 1 } else { x };
        Params { x, y: 2 * x }
    }

    /// Bytes of `A` (and of `B`) before rounding up to pages.
    const fn operand_bytes(&self) -> usize {
        self.x * self.y * 4
    }

    /// Offset of `B` in the region.
    const fn b_offset(&self) -> usize {
        round_up_to_page(self.operand_bytes())
    }

    /// Offset of `C` in the region.
    const fn c_offset(&self) -> usize {
        2 * round_up_to_page(self.operand_bytes())
    }

    /// The region size needed, in bytes: `A`, `B` and `C` each rounded up to whole pages.
    pub const fn bytes_needed(&self) -> usize {
        self.c_offset() + round_up_to_page(self.x * self.x * 4)
    }
}

/// The result of one multiplication.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Report {
    /// FNV-1a over `C` (row-major, little-endian `u32`s).
    pub checksum: u64,
}

/// Runs init and multiply over `region` with `seed`.
///
/// # Panics
///
/// If `region` is shorter than [`Params::bytes_needed`], or `x` or `y` is zero.
pub fn run(params: &Params, region: &mut [u8], seed: u64) -> Report {
    let Params { x, y } = *params;
    assert!(x > 0 && y > 0, "matmul: empty matrices");
    assert!(region.len() >= params.bytes_needed(), "matmul: region too small");
    debug_assert_eq!(params.b_offset() % PAGE_SIZE, 0);

    let n = params.operand_bytes();
    let (a_buf, rest) = region.split_at_mut(params.b_offset());
    let (b_buf, rest) = rest.split_at_mut(params.c_offset() - params.b_offset());
    let a = &mut a_buf[..n];
    let b = &mut b_buf[..n];
    let c = &mut rest[..x * x * 4];

    // Init: A row by row, then B column by column; both are just linear sweeps.
    let mut rng = Prng::new(seed);
    for word in a.chunks_exact_mut(4).chain(b.chunks_exact_mut(4)) {
        word.copy_from_slice(&(1 + rng.below(10)).to_le_bytes());
    }

    // Multiply.
    let mut sum = Checksum::new();
    let mut out = c.chunks_exact_mut(4);
    for row in a.chunks_exact(y * 4) {
        for col in b.chunks_exact(y * 4) {
            let dot = row
                .chunks_exact(4)
                .zip(col.chunks_exact(4))
                .fold(0u32, |acc, (p, q)| acc.wrapping_add(word(p).wrapping_mul(word(q))));
            let bytes = dot.to_le_bytes();
            sum.write(&bytes);
            out.next().expect("C has x * x elements").copy_from_slice(&bytes);
        }
    }
    Report { checksum: sum.finish() }
}

fn word(bytes: &[u8]) -> u32 {
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Straightforward matrices and indexing, sharing only the PRNG's value stream.
    fn reference(p: &Params, seed: u64) -> (Vec<Vec<u32>>, u64) {
        let mut rng = Prng::new(seed);
        let mut a = vec![vec![0u32; p.y]; p.x];
        let mut b = vec![vec![0u32; p.x]; p.y]; // b[k][j], mathematical layout
        for row in a.iter_mut() {
            for v in row.iter_mut() {
                *v = 1 + rng.below(10);
            }
        }
        for j in 0..p.x {
            for row in b.iter_mut() {
                row[j] = 1 + rng.below(10);
            }
        }
        let mut c = vec![vec![0u32; p.x]; p.x];
        for i in 0..p.x {
            for j in 0..p.x {
                let mut s = 0u64;
                for k in 0..p.y {
                    s += u64::from(a[i][k]) * u64::from(b[k][j]);
                }
                c[i][j] = s as u32;
            }
        }
        let mut h = Checksum::new();
        for v in c.iter().flatten() {
            h.write(&v.to_le_bytes());
        }
        (c, h.finish())
    }

    fn check(p: Params, seed: u64) {
        let mut region = vec![0xAAu8; p.bytes_needed()];
        let report = run(&p, &mut region, seed);
        let (c, checksum) = reference(&p, seed);
        assert_eq!(report.checksum, checksum);
        let got: Vec<u32> =
            region[p.c_offset()..][..p.x * p.x * 4].chunks_exact(4).map(word).collect();
        let want: Vec<u32> = c.into_iter().flatten().collect();
        assert_eq!(got, want);
    }

    #[test]
    fn matches_the_reference() {
        let sizes = [(Params::TEST, 1), (Params::TEST, 99), (Params { x: 3, y: 1 }, 5)];
        for (p, seed) in sizes {
            check(p, seed);
        }
    }

    /// The default size (31 million multiply-adds, twice): seconds in a debug build, so only
    /// with `--release` or `--ignored`.
    #[test]
    #[cfg_attr(debug_assertions, ignore)]
    fn default_matches_the_reference() {
        check(Params::DEFAULT, 7);
    }

    #[test]
    fn deterministic_in_the_seed() {
        let p = Params::TEST;
        let mut region = vec![0u8; p.bytes_needed() + 100];
        let a = run(&p, &mut region, 3);
        assert_eq!(run(&p, &mut region, 3), a);
        assert_ne!(run(&p, &mut region, 4), a);
    }

    #[test]
    fn default_matches_the_thesis_ratio() {
        assert_eq!(Params::DEFAULT, Params { x: 250, y: 500 });
        assert_eq!(Params::scaled(16 << 20), Params { x: 1000, y: 2000 });
        let p = Params::DEFAULT;
        assert_eq!(p.bytes_needed(), 123 * PAGE_SIZE * 2 + 62 * PAGE_SIZE);
        assert_eq!(p.bytes_needed() % PAGE_SIZE, 0);
    }
}
