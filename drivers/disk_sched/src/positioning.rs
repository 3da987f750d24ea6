//! Estimates of positioning time (seek plus rotation) between two places on the disk, which
//! the SPTF policies and the anticipation heuristics compare.
//!
//! The prototype of the anticipatory scheduler measured positioning time against LBN distance
//! at install time and fitted a curve (about 75% accurate, which its heuristics tolerate);
//! [`LbnCurve`] is such a curve, given by points. The mechanical disk model
//! (`disk_model::DiskModel`) gives a truer estimate through the same trait.

use alloc::vec::Vec;

/// An estimate of the time to move the head from one sector to another.
pub trait Positioning {
    /// Nanoseconds to position the head at `to` once it is at `from`.
    fn positioning_ns(&self, from: u64, to: u64) -> u64;
}

/// Positioning time as a function of LBN distance alone, interpolated linearly between
/// measured points (distance in sectors, time in ns), flat beyond the last.
#[derive(Clone, Debug, PartialEq)]
pub struct LbnCurve {
    points: Vec<(u64, u64)>,
}

impl LbnCurve {
    /// The curve through `points`, sorted by distance here; at least one point.
    pub fn new(points: &[(u64, u64)]) -> LbnCurve {
        assert!(!points.is_empty(), "a curve has a point");
        let mut points = points.to_vec();
        points.sort_unstable();
        LbnCurve { points }
    }

    /// The time for a move of `distance` sectors.
    pub fn at(&self, distance: u64) -> u64 {
        let p = &self.points;
        let after = p.iter().position(|&(d, _)| d >= distance);
        match after {
            None => p[p.len() - 1].1,
            Some(0) => p[0].1,
            Some(i) => {
                let ((d0, t0), (d1, t1)) = (p[i - 1], p[i]);
                let span = (d1 - d0).max(1);
                let t =
                    t0 as i128 + (t1 as i128 - t0 as i128) * (distance - d0) as i128 / span as i128;
                t as u64
            }
        }
    }
}

/// The mechanical model's estimate: the seek for the cylinder distance plus half a revolution
/// (a scheduler does not track the platter's angle).
impl Positioning for disk_model::DiskModel {
    fn positioning_ns(&self, from: u64, to: u64) -> u64 {
        self.positioning_estimate_ns(from, to)
    }
}

impl Positioning for LbnCurve {
    fn positioning_ns(&self, from: u64, to: u64) -> u64 {
        self.at(from.abs_diff(to))
    }
}
