//! *Filter* (thesis App. G): a 3×3 sharpen filter over an RGB image held as three separate
//! channel buffers.
//!
//! The image is `width × height` bytes per channel, row-major. The thesis split a bitmap into
//! three RGB buffers and filtered them; to keep its footprint (three buffers for the given
//! memory) the filter here works *in place*, one channel after the other, saving the original
//! of the previous and the current row in two row buffers on the stack (at most
//! [`MAX_WIDTH`] bytes each). Every pixel becomes
//!
//! ```text
//! clamp(5·c − up − down − left − right, 0, 255)
//! ```
//!
//! with neighbours outside the image replaced by the nearest edge pixel.
//!
//! Region layout: the red, green and blue channels, each starting on a page boundary and
//! rounded up to whole pages.
//!
//! Phases and access pattern:
//! 1. *init*: the three channels are generated linearly, red then green then blue: smooth
//!    gradients (red across, green down, blue along the diagonal) plus noise of ±8 from one
//!    [`Prng`] stream, so the image compresses moderately.
//! 2. *sharpen*: each channel is swept once, row by row, reading one row ahead and writing
//!    each row back in place; so dirty pages are evicted linearly, as in the thesis.
//!
//! The checksum is FNV-1a over the three filtered channels' bytes, red, green, blue.

use crate::{Checksum, Prng, isqrt, round_up_to_page};

/// The thesis's physical memory for the filter (8 MB) at 1/16 scale: 512 KiB.
pub const DEFAULT_MEMORY: usize = 512 << 10;

/// The widest image the filter handles (the size of its two stack row buffers).
pub const MAX_WIDTH: usize = 1024;

/// The size of the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Pixels per row, `1..=MAX_WIDTH`.
    pub width: usize,
    /// Rows, at least 1.
    pub height: usize,
}

impl Params {
    /// The thesis's three 4 MB channels with 8 MB at 1/16 scale: three 512 × 512 channels
    /// (256 KiB each) for [`DEFAULT_MEMORY`].
    pub const DEFAULT: Params = Params::scaled(DEFAULT_MEMORY);

    /// A tiny image for tests: 40 × 30.
    pub const TEST: Params = Params { width: 40, height: 30 };

    /// The thesis's configuration scaled to `memory_bytes` of physical memory: each channel is
    /// half the memory (three channels, 1.5 times the memory, as 3 × 4 MB with 8 MB), as
    /// square as [`MAX_WIDTH`] allows (at least 1 × 1).
    pub const fn scaled(memory_bytes: usize) -> Params {
        let channel = memory_bytes / 2;
        let side = isqrt(channel);
        let width = if side > MAX_WIDTH {
            MAX_WIDTH
        } else if side == 0 {
            1
        } else {
            side
        };
        let height = channel / width;
        Params { width, height: if height == 0 { 1 } else { height } }
    }

    /// Bytes of one channel before rounding up to pages.
    const fn channel_bytes(&self) -> usize {
        self.width * self.height
    }

    /// The distance between the starts of two channels in the region.
    const fn channel_stride(&self) -> usize {
        round_up_to_page(self.channel_bytes())
    }

    /// The region size needed, in bytes: three channels, each rounded up to whole pages.
    pub const fn bytes_needed(&self) -> usize {
        3 * self.channel_stride()
    }
}

/// The result of one filter run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Report {
    /// FNV-1a over the filtered red, green and blue channels.
    pub checksum: u64,
}

/// Runs init and sharpen over `region` with `seed`.
///
/// # Panics
///
/// If `region` is shorter than [`Params::bytes_needed`], or the width is not in
/// `1..=MAX_WIDTH`, or the height is zero.
pub fn run(params: &Params, region: &mut [u8], seed: u64) -> Report {
    let Params { width, height } = *params;
    assert!((1..=MAX_WIDTH).contains(&width) && height > 0, "filter: bad image size");
    assert!(region.len() >= params.bytes_needed(), "filter: region too small");
    let stride = params.channel_stride();
    let n = params.channel_bytes();

    let mut rng = Prng::new(seed);
    for (index, channel) in region[..3 * stride].chunks_exact_mut(stride).enumerate() {
        generate(index, &mut channel[..n], width, height, &mut rng);
    }

    let mut sum = Checksum::new();
    for channel in region[..3 * stride].chunks_exact_mut(stride) {
        sharpen(&mut channel[..n], width, &mut sum);
    }
    Report { checksum: sum.finish() }
}

/// The smooth part of channel `index` at `(col, row)`, before noise.
fn gradient(index: usize, col: usize, row: usize, width: usize, height: usize) -> i32 {
    let v = match index {
        0 => col * 255 / width.max(2).saturating_sub(1),
        1 => row * 255 / height.max(2).saturating_sub(1),
        _ => (col + row) * 255 / (width + height).max(3).saturating_sub(2),
    };
    v.min(255) as i32
}

fn generate(index: usize, channel: &mut [u8], width: usize, height: usize, rng: &mut Prng) {
    for (row, line) in channel.chunks_exact_mut(width).enumerate() {
        for (col, px) in line.iter_mut().enumerate() {
            let noise = rng.below(17) as i32 - 8;
            *px = (gradient(index, col, row, width, height) + noise).clamp(0, 255) as u8;
        }
    }
}

/// One output pixel from the centre `c` and its four neighbours.
fn sharpen_pixel(c: u8, up: u8, down: u8, left: u8, right: u8) -> u8 {
    let v = 5 * i32::from(c) - i32::from(up) - i32::from(down) - i32::from(left) - i32::from(right);
    v.clamp(0, 255) as u8
}

/// Sharpens one channel in place, feeding each finished row to `sum`.
fn sharpen(channel: &mut [u8], width: usize, sum: &mut Checksum) {
    let height = channel.len() / width;
    let mut prev = [0u8; MAX_WIDTH];
    let mut cur = [0u8; MAX_WIDTH];
    for row in 0..height {
        cur[..width].copy_from_slice(&channel[row * width..][..width]);
        let (head, tail) = channel.split_at_mut((row + 1) * width);
        let line = &mut head[row * width..];
        let up = if row == 0 { &cur[..width] } else { &prev[..width] };
        let down = if row + 1 == height { &cur[..width] } else { &tail[..width] };
        for col in 0..width {
            let left = cur[col.saturating_sub(1)];
            let right = cur[(col + 1).min(width - 1)];
            line[col] = sharpen_pixel(cur[col], up[col], down[col], left, right);
        }
        sum.write(line);
        core::mem::swap(&mut prev, &mut cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// A straightforward reference: the image as `img[channel][row][col]`, the output in a
    /// separate image, neighbours through clamped signed coordinates.
    fn reference(p: &Params, seed: u64) -> (Vec<Vec<Vec<u8>>>, u64) {
        let (w, h) = (p.width, p.height);
        let mut rng = Prng::new(seed);
        let mut img = vec![vec![vec![0u8; w]; h]; 3];
        for (ch, plane) in img.iter_mut().enumerate() {
            for (y, line) in plane.iter_mut().enumerate() {
                for (x, px) in line.iter_mut().enumerate() {
                    // Written out independently of `gradient`.
                    let base = match ch {
                        0 if w > 1 => x * 255 / (w - 1),
                        1 if h > 1 => y * 255 / (h - 1),
                        2 if w + h > 2 => (x + y) * 255 / (w + h - 2),
                        _ => 0,
                    };
                    let noise = (rng.next_u64() >> 32) % 17;
                    *px = (base as i64 + noise as i64 - 8).clamp(0, 255) as u8;
                }
            }
        }
        let at = |plane: &Vec<Vec<u8>>, y: isize, x: isize| -> i64 {
            let y = y.clamp(0, h as isize - 1) as usize;
            let x = x.clamp(0, w as isize - 1) as usize;
            i64::from(plane[y][x])
        };
        let mut out = vec![vec![vec![0u8; w]; h]; 3];
        let mut sum = Checksum::new();
        for ch in 0..3 {
            for y in 0..h as isize {
                for x in 0..w as isize {
                    let p = &img[ch];
                    let v = 5 * at(p, y, x)
                        - at(p, y - 1, x)
                        - at(p, y + 1, x)
                        - at(p, y, x - 1)
                        - at(p, y, x + 1);
                    let v = v.clamp(0, 255) as u8;
                    out[ch][y as usize][x as usize] = v;
                    sum.write_u8(v);
                }
            }
        }
        (out, sum.finish())
    }

    #[test]
    fn matches_the_reference() {
        let sizes = [
            Params::TEST,
            Params { width: 1, height: 1 },
            Params { width: 1, height: 7 },
            Params { width: 9, height: 1 },
            Params { width: 2, height: 2 },
            Params { width: MAX_WIDTH, height: 3 },
            Params::DEFAULT,
        ];
        for (p, seed) in sizes.into_iter().zip(1..) {
            let mut region = vec![0x55u8; p.bytes_needed()];
            let report = run(&p, &mut region, seed);
            let (out, checksum) = reference(&p, seed);
            assert_eq!(report.checksum, checksum, "{p:?}");
            for (ch, plane) in out.iter().enumerate() {
                let got = &region[ch * p.channel_stride()..][..p.channel_bytes()];
                let want: Vec<u8> = plane.iter().flatten().copied().collect();
                assert_eq!(got, &want[..], "{p:?} channel {ch}");
            }
        }
    }

    #[test]
    fn deterministic_in_the_seed() {
        let p = Params::TEST;
        let mut region = vec![0u8; p.bytes_needed()];
        let a = run(&p, &mut region, 11);
        assert_eq!(run(&p, &mut region, 11), a);
        assert_ne!(run(&p, &mut region, 12), a);
    }

    #[test]
    fn default_matches_the_thesis_ratio() {
        assert_eq!(Params::DEFAULT, Params { width: 512, height: 512 });
        assert_eq!(Params::DEFAULT.bytes_needed(), 3 * (256 << 10));
        assert_eq!(Params::scaled(8 << 20), Params { width: 1024, height: 4096 });
        assert_eq!(Params::scaled(0), Params { width: 1, height: 1 });
    }
}
