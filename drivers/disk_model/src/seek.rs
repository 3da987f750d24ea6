//! The seek curve: how long the arm takes to move `d` cylinders, in the usual two-piece form
//! (Ruemmler and Wilkes, "An introduction to disk drive modeling", 1994):
//! `a + b·sqrt(x)` for short seeks, where the arm accelerates for half the way and decelerates
//! for the other half, and `c + e·x` for long ones, where it coasts at top speed. Here `x` is
//! the distance as a **fraction of the full stroke**, `d / (cylinders - 1)`, so a disk scaled
//! down to fewer cylinders ([`super::DiskParams::with_capacity`]) keeps the same seek times
//! across its span. A one-cylinder move always costs the single-cylinder seek, whatever the
//! scale: adjacent cylinders are adjacent, and sequential streams rely on it.
//!
//! [`SeekCurve::fit`] takes the drive's figures (single-cylinder, average, full-stroke seek and
//! where the short piece ends) and solves for `b`, `c` and `e` with `a` the single-cylinder
//! time: the pieces meet at the boundary, the long piece reaches the full-stroke time at
//! `x = 1`, and the average over random pairs of positions (distance density `2(1 - x)`) is the
//! drive's average seek. Settling is inside the curve.
//!
//! Not modelled: the difference between read and write settling (writes settle longer on real
//! drives), seek direction, and seek-time variance between drives or runs.

/// A fitted seek curve; see the [module](self). All times in nanoseconds.
#[derive(Clone, Copy, Debug)]
pub struct SeekCurve {
    max_distance: u64,
    boundary: u64,
    single: u64,
    a: i64,
    b: i64,
    c: i64,
    e: i64,
    full: i64,
}

/// `sqrt(v)` by Newton's method on `f64` (`core` has no `sqrt`); deterministic, since it uses
/// only correctly rounded operations.
fn sqrt(v: f64) -> f64 {
    if v <= 0.0 {
        return 0.0;
    }
    let mut r = if v > 1.0 { v } else { 1.0 };
    for _ in 0..64 {
        let next = 0.5 * (r + v / r);
        if next >= r {
            break;
        }
        r = next;
    }
    r
}

impl SeekCurve {
    /// The curve over `cylinders` cylinders whose single-cylinder, average (over random pairs)
    /// and full-stroke seeks are the given times, with the square-root piece covering distances
    /// below `short_fraction` of the stroke.
    ///
    /// # Panics
    /// If the figures admit no increasing curve (the fitted `b` or `e` would be negative), or
    /// `short_fraction` is not inside `(0, 1)`.
    pub fn fit(
        cylinders: u32,
        single_ns: u64,
        average_ns: u64,
        full_ns: u64,
        short_fraction: f64,
    ) -> SeekCurve {
        let x0 = short_fraction;
        assert!(x0 > 0.0 && x0 < 1.0, "the short-seek fraction must be inside (0, 1)");
        let (a, avg, full) = (single_ns as f64, average_ns as f64, full_ns as f64);
        let s0 = sqrt(x0);
        // Integrals of the distance density 2(1 - x) times 1, sqrt(x) (over [0, x0]), and 1, x
        // (over [x0, 1]).
        let i0 = 2.0 * x0 - x0 * x0;
        let ib = 2.0 * (2.0 / 3.0 * x0 * s0 - 2.0 / 5.0 * x0 * x0 * s0);
        let ic = (1.0 - x0) * (1.0 - x0);
        let ie = 1.0 / 3.0 - x0 * x0 + 2.0 / 3.0 * x0 * x0 * x0;
        // b = b0 - b1·e (the pieces meet at x0, with c = full - e).
        let (b0, b1) = ((full - a) / s0, (1.0 - x0) / s0);
        let e = (avg - a * i0 - b0 * ib - full * ic) / (ie - ic - b1 * ib);
        let b = b0 - b1 * e;
        let c = full - e;
        assert!(b >= 0.0 && e >= 0.0, "seek figures admit no increasing two-piece curve");
        let max_distance = u64::from(cylinders.max(2) - 1);
        SeekCurve {
            max_distance,
            boundary: (x0 * max_distance as f64) as u64,
            single: single_ns,
            a: a as i64,
            b: b as i64,
            c: c as i64,
            e: e as i64,
            full: full_ns as i64,
        }
    }

    /// The time to move `distance` cylinders: 0 for none, the single-cylinder seek for one,
    /// the curve at `distance / (cylinders - 1)` of the stroke beyond (never less than the
    /// single-cylinder seek).
    pub fn seek_ns(&self, distance: u64) -> u64 {
        match distance {
            0 => 0,
            1 => self.single,
            d => {
                let d = d.min(self.max_distance);
                // In 64 bits while the stroke has fewer than 2^23 cylinders (every real
                // drive's): a scheduler asks this for every pending request it weighs, and
                // 128-bit division and square roots are library calls on 64-bit targets.
                let narrow = self.max_distance < 1 << 23;
                let t = if d < self.boundary {
                    // sqrt(d / max) in 2^-20 units.
                    let root = if narrow {
                        ((d << 40) / self.max_distance).isqrt() as i64
                    } else {
                        ((u128::from(d) << 40) / u128::from(self.max_distance)).isqrt() as i64
                    };
                    self.a + ((self.b as i128 * root as i128) >> 20) as i64
                } else {
                    // c + e·x, written from the full-stroke end (c + e = full) so that it is
                    // exact there.
                    let rest = self.max_distance - d;
                    let part = match (self.e as u64).checked_mul(rest) {
                        Some(p) if self.e >= 0 => (p / self.max_distance) as i64,
                        _ => (self.e as i128 * rest as i128 / self.max_distance as i128) as i64,
                    };
                    self.full - part
                };
                (t.max(0) as u64).max(self.single)
            }
        }
    }

    /// The fitted `(a, b, c, e)` in nanoseconds: `a + b·sqrt(x)` below the boundary, `c + e·x`
    /// above it, `x` the fraction of the stroke.
    pub fn coefficients_ns(&self) -> (i64, i64, i64, i64) {
        (self.a, self.b, self.c, self.e)
    }

    /// Where the square-root piece ends, in cylinders.
    pub fn boundary(&self) -> u64 {
        self.boundary
    }

    /// The longest distance, `cylinders - 1`.
    pub fn max_distance(&self) -> u64 {
        self.max_distance
    }
}
