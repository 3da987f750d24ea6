//! The media timeline of a sequential read: from a time and an arm position, the drive moves
//! to the first sector's track, waits for the sector to come round, reads to the end of the
//! track, switches head or cylinder, waits for the next track's (skewed) first sector, and so
//! on up to a limit. A request that misses the buffer starts a stream at its first sector; the
//! read-ahead is the same stream carrying on past the request's last sector. The platter's
//! angle is the model's clock modulo a revolution; slot `p` of a track with `spt` sectors
//! starts at angle `floor(p · rev / spt)` nanoseconds.
//!
//! Not modelled: reading a track out of order (zero-latency reads), and the arm moving while
//! the controller is still busy with a command.

use super::geometry::Geometry;
use super::seek::SeekCurve;

/// What the timeline needs of the drive.
#[derive(Clone, Debug)]
pub(super) struct Mechanics {
    pub(super) geometry: Geometry,
    pub(super) seek: SeekCurve,
    pub(super) rev_ns: u64,
    pub(super) head_switch_ns: u64,
}

/// One track's part of a stream.
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    /// When the first sector starts passing under the head.
    pub(super) begin: u64,
    /// When the last sector has passed.
    pub(super) end: u64,
    /// The track: (cylinder, head).
    pub(super) to: (u32, u32),
    /// The LBNs read, `[lo, hi)`.
    pub(super) lo: u64,
    pub(super) hi: u64,
    /// The first sector's slot and the track's sectors.
    slot: u64,
    spt: u64,
    /// The arm's move and the rotational wait before `begin`.
    pub(super) move_ns: u64,
    pub(super) rotation_ns: u64,
}

impl Mechanics {
    /// The start of (unwrapped) slot `q` after the index mark of a track with `spt` sectors.
    fn slot_ns(&self, spt: u64, q: u64) -> u64 {
        q * self.rev_ns / spt
    }

    /// The run that reads from `next` to the end of its track (or `limit`), the arm leaving
    /// `from` at `t`.
    fn run(&self, t: u64, from: (u32, u32), next: u64, limit: u64) -> Run {
        let g = &self.geometry;
        let chs = g.locate(next);
        let to = (chs.cylinder, chs.head);
        let move_ns = if to.0 != from.0 {
            self.seek.seek_ns(u64::from(to.0.abs_diff(from.0)))
        } else if to.1 != from.1 {
            self.head_switch_ns
        } else {
            0
        };
        let arrive = t + move_ns;
        let spt = u64::from(g.sectors_per_track(to.0));
        let slot = u64::from(g.slot(to.0, to.1, chs.sector));
        let rev = self.rev_ns;
        let rotation_ns = (self.slot_ns(spt, slot) + rev - arrive % rev) % rev;
        let begin = arrive + rotation_ns;
        let hi = (g.track_start(to.0, to.1) + spt).min(limit);
        let end = begin + self.slot_ns(spt, slot + (hi - next)) - self.slot_ns(spt, slot);
        Run { begin, end, to, lo: next, hi, slot, spt, move_ns, rotation_ns }
    }
}

/// A sequential read in progress: at `at_ns` the arm is free at `pos`, the sectors
/// `[low, next)` are in the buffer, and the drive reads on towards `limit`.
#[derive(Clone, Debug)]
pub(super) struct Stream {
    low: u64,
    at_ns: u64,
    pos: (u32, u32),
    next: u64,
    limit: u64,
}

impl Stream {
    /// A stream reading `[lbn, limit)`, the arm leaving `from` at `at_ns`.
    pub(super) fn new(lbn: u64, at_ns: u64, from: (u32, u32), limit: u64) -> Stream {
        Stream { low: lbn, at_ns, pos: from, next: lbn, limit }
    }

    /// The first sector the stream read.
    pub(super) fn low(&self) -> u64 {
        self.low
    }

    /// Whether the stream has read everything up to its limit.
    pub(super) fn stopped(&self) -> bool {
        self.next >= self.limit
    }

    /// The run the stream is in or about to start (the stream must not have stopped).
    pub(super) fn peek(&self, m: &Mechanics) -> Run {
        m.run(self.at_ns, self.pos, self.next, self.limit)
    }

    /// Moves past every run finished by `t`.
    pub(super) fn advance(&mut self, m: &Mechanics, t: u64) {
        while !self.stopped() {
            let r = self.peek(m);
            if r.end > t {
                break;
            }
            self.at_ns = r.end;
            self.pos = r.to;
            self.next = r.hi;
        }
    }

    /// The first sector not yet read at `t` (after [`Stream::advance`] to `t`).
    pub(super) fn frontier(&self, m: &Mechanics, t: u64) -> u64 {
        if self.stopped() {
            return self.next;
        }
        let r = self.peek(m);
        if t < r.begin {
            return self.next;
        }
        // The last slot boundary q with slot_ns(q) <= t - begin + slot_ns(slot).
        let v = t - r.begin + m.slot_ns(r.spt, r.slot);
        let q = ((v + 1) * r.spt - 1) / m.rev_ns;
        (self.next + q.saturating_sub(r.slot)).min(r.hi)
    }

    /// When sector `x` (`next <= x < limit`) will have been read.
    pub(super) fn done_time(&self, m: &Mechanics, x: u64) -> u64 {
        let mut s = self.clone();
        while !s.stopped() {
            let r = s.peek(m);
            if x < r.hi {
                let k = x - r.lo + 1;
                return r.begin + m.slot_ns(r.spt, r.slot + k) - m.slot_ns(r.spt, r.slot);
            }
            s.at_ns = r.end;
            s.pos = r.to;
            s.next = r.hi;
        }
        s.at_ns
    }

    /// Reads on to `limit` (if further); a stream that had stopped resumes at `at`, where the
    /// arm waits for the next sector to come round.
    pub(super) fn extend(&mut self, at: u64, limit: u64) {
        if self.stopped() && limit > self.limit {
            self.at_ns = self.at_ns.max(at);
        }
        self.limit = self.limit.max(limit);
    }

    /// Where the arm is at `t`: on the track it reads (or waits on), or, while it is still
    /// moving, on the track it left.
    pub(super) fn position_at(&mut self, m: &Mechanics, t: u64) -> (u32, u32) {
        self.advance(m, t);
        if self.stopped() {
            return self.pos;
        }
        let r = self.peek(m);
        if t + r.rotation_ns >= r.begin { r.to } else { self.pos }
    }
}
