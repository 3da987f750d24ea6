//! A mechanical disk model: it says how long a disk of the anticipatory-scheduling paper's
//! generation would take to serve each request, so that QEMU's disks (which answer as fast as
//! the host does) can be made to behave like those drives, deterministically, and so that the
//! schedulers can be run against it on the host.
//!
//! The model is a single server serving requests first come, first served, in the order the
//! caller hands them over ([`DiskModel::service`]); the caller (the driver, or a test)
//! serialises. Its state is the arm's position, the platter's angle (a function of the model's
//! clock: nanoseconds since the model started, the platter turning at the spindle speed) and
//! the read-ahead segment. A request costs, in order:
//! 1. the **command overhead** (controller time);
//! 2. if the read-ahead segment holds its start, nothing more than the buffer transfer at
//!    interface rate for what is already there, and the media rate for the rest (the drive is
//!    still reading ahead);
//! 3. otherwise **positioning**: a seek ([`seek`]) or head switch to the first sector's track,
//!    then the **rotational wait** until that sector comes under the head, computed from the
//!    platter's angle, not averaged;
//! 4. the **transfer** at the zone's media rate, crossing tracks and cylinders as the skews
//!    ([`geometry`]) allow.
//!
//! After a read the drive goes on reading the following sectors into its segment while it is
//! idle ([`DiskParams::segment_sectors`] ahead of the last sector asked for), so a sequential
//! reader that comes back soon is served from the buffer. Writes end the read-ahead and empty
//! the segment. By default they are write-through: they complete when the media holds them.
//! With [`DiskParams::write_cache`] on, a write completes once its data is in the buffer, and
//! the drive writes it to the media straight away; the buffer holds one such write, so the
//! next request that needs the mechanism (any miss, or another write) waits until it is
//! done. Sequential writes then stream to the media without losing revolutions.
//!
//! Everything is integer nanoseconds except the seek curve's fit at construction (`f64`, with
//! correctly rounded operations only), so the same calls give the same results on every host
//! and architecture. Not modelled: command queueing in the drive (the model serves one request
//! at a time), a write cache holding more than one write, several segments, zero-latency (out-of-order) track reads, bus
//! contention, and errors.
//!
//! The crate is `no_std` (with `alloc`) and has no `unsafe` code; everything is tested on the
//! host. The block server times a disk by it ([`DiskModel::service`]) and the schedulers
//! (`disk_sched`) estimate positioning times with it.
//!
//! # Files
//! - [`geometry`]: zones, heads, cylinders, LBN mapping and skews.
//! - [`seek`]: the two-piece seek curve and its fit.
//! - [`params`]: [`DiskParams`], the Deskstar 34GXP and the Cheetah X15, and scaling down.
//! - `stream`: the media timeline of a sequential read (a request and its read-ahead).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod geometry;
pub mod params;
pub mod seek;
mod stream;

#[cfg(test)]
mod tests;

pub use geometry::{Chs, Geometry, Zone};
pub use params::{DiskParams, SECTOR_SIZE};
pub use seek::SeekCurve;

use stream::{Mechanics, Stream};

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelOp {
    /// Read sectors.
    Read,
    /// Write sectors (write-through unless the drive's write cache is on).
    Write,
}

/// How the model served one request. Times are nanoseconds on the model's clock;
/// `start_ns + overhead_ns + seek_ns + rotation_ns + transfer_ns == end_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Service {
    /// When the drive took the request: the later of its arrival and the previous completion.
    pub start_ns: u64,
    /// Controller time before anything else, and any wait for a cached write still going to
    /// the media.
    pub overhead_ns: u64,
    /// The arm's move (seek, or head switch on the same cylinder) to the first sector's track.
    pub seek_ns: u64,
    /// The rotational wait for the first sector once on its track.
    pub rotation_ns: u64,
    /// From the first sector's start to completion: the media transfer (with any track or
    /// cylinder crossings inside the request), or the buffer's interface transfer and the
    /// rest of the media read on a buffer hit.
    pub transfer_ns: u64,
    /// Sectors already in the read-ahead segment when the request was taken.
    pub buffered_sectors: u32,
    /// Sectors served: the request's count, cut at the end of the disk.
    pub sectors: u32,
    /// When the request completed.
    pub end_ns: u64,
}

impl Service {
    /// Seek plus rotational wait.
    pub fn positioning_ns(&self) -> u64 {
        self.seek_ns + self.rotation_ns
    }

    /// Whether the segment held all of the request (a full buffer hit).
    pub fn from_buffer(&self) -> bool {
        self.buffered_sectors == self.sectors
    }

    /// From taking the request to completing it.
    pub fn service_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// The model of one drive; see the [module](self).
#[derive(Clone, Debug)]
pub struct DiskModel {
    params: DiskParams,
    mech: Mechanics,
    /// When the previous request completed.
    busy_until: u64,
    /// When the mechanism is free: after the last media access (a cached write's media write
    /// may end after its completion).
    mech_free: u64,
    /// Where the arm rests when no stream is running: (cylinder, head).
    at: (u32, u32),
    /// The read in progress or the read-ahead after it, if any.
    stream: Option<Stream>,
}

impl DiskModel {
    /// A drive with `params`, its arm on cylinder 0, head 0, at time 0.
    ///
    /// # Panics
    /// If the parameters are inconsistent: no heads or zones, a capacity larger than the zones
    /// hold, or seek figures no increasing curve fits.
    pub fn new(params: DiskParams) -> DiskModel {
        let rev = params.revolution_ns();
        let geometry = Geometry::new(
            params.heads,
            &params.zones,
            rev,
            params.head_switch_ns,
            params.single_cylinder_seek_ns,
        );
        assert!(params.capacity > 0 && params.capacity <= geometry.sectors());
        let seek = SeekCurve::fit(
            geometry.cylinders(),
            params.single_cylinder_seek_ns,
            params.average_seek_ns,
            params.full_stroke_seek_ns,
            params.short_seek_fraction,
        );
        let mech = Mechanics { geometry, seek, rev_ns: rev, head_switch_ns: params.head_switch_ns };
        DiskModel { params, mech, busy_until: 0, mech_free: 0, at: (0, 0), stream: None }
    }

    /// The parameters the model was built from.
    pub fn params(&self) -> &DiskParams {
        &self.params
    }

    /// The layout.
    pub fn geometry(&self) -> &Geometry {
        &self.mech.geometry
    }

    /// The fitted seek curve.
    pub fn seek_curve(&self) -> &SeekCurve {
        &self.mech.seek
    }

    /// Sectors the model presents.
    pub fn capacity(&self) -> u64 {
        self.params.capacity
    }

    /// One revolution, in nanoseconds.
    pub fn revolution_ns(&self) -> u64 {
        self.mech.rev_ns
    }

    /// When the last request served completes (the drive is idle from then on).
    pub fn busy_until(&self) -> u64 {
        self.busy_until
    }

    /// The seek between the cylinders of `from_lbn` and `to_lbn` plus half a revolution: the
    /// positioning time a scheduler that does not track the platter's angle would expect; 0
    /// when `to_lbn` is `from_lbn` (the request goes on where the head is, as a measured
    /// LBN-distance curve also says: the sector is the next under the head, or in the
    /// read-ahead segment).
    pub fn positioning_estimate_ns(&self, from_lbn: u64, to_lbn: u64) -> u64 {
        if from_lbn == to_lbn {
            return 0;
        }
        let g = &self.mech.geometry;
        let (a, b) = (g.locate(from_lbn).cylinder, g.locate(to_lbn).cylinder);
        self.mech.seek.seek_ns(u64::from(a.abs_diff(b))) + self.mech.rev_ns / 2
    }

    /// The time to read or write `sectors` at `lbn`, the request arriving at `now_ns`; the
    /// arm, the platter and the segment move on. A request is taken when it arrives or when
    /// the previous one completes, whichever is later. A range running past the end of the
    /// disk is cut at the end (an LBN past the end is taken as the last sector); a request of
    /// no sectors costs only the command overhead.
    pub fn service(&mut self, now_ns: u64, op: ModelOp, lbn: u64, sectors: u32) -> Service {
        let cap = self.params.capacity;
        let start = now_ns.max(self.busy_until);
        let overhead = self.params.command_overhead_ns;
        let at = start + overhead;
        let lbn = lbn.min(cap - 1);
        let n = u64::from(sectors).min(cap - lbn);
        let mut s = Service {
            start_ns: start,
            overhead_ns: overhead,
            seek_ns: 0,
            rotation_ns: 0,
            transfer_ns: 0,
            buffered_sectors: 0,
            sectors: n as u32,
            end_ns: at,
        };
        if n == 0 {
            self.busy_until = at;
            return s;
        }
        let end = lbn + n;
        let ahead = if self.params.read_ahead { u64::from(self.params.segment_sectors) } else { 0 };
        let limit = (end + ahead).min(cap);
        if op == ModelOp::Read
            && self.params.read_ahead
            && let Some(done) = self.try_buffer(at, lbn, end, limit, &mut s)
        {
            s.transfer_ns = done - at;
            s.end_ns = done;
            self.busy_until = done;
            return s;
        }
        // A miss or a write: the arm goes from wherever it is once it is free (a cached write
        // may still be going to the media).
        let go = at.max(self.mech_free);
        s.overhead_ns += go - at;
        let from = match self.stream.take() {
            Some(mut st) => st.position_at(&self.mech, go),
            None => self.at,
        };
        let stream_limit = if op == ModelOp::Read { limit } else { end };
        let mut st = Stream::new(lbn, go, from, stream_limit);
        let first = st.peek(&self.mech);
        let done = st.done_time(&self.mech, end - 1);
        if op == ModelOp::Write && self.params.write_cache {
            // Acknowledged once the data is in the buffer; the media write goes on.
            s.transfer_ns = self.interface_ns(n);
            self.mech_free = done;
        } else {
            s.seek_ns = first.move_ns;
            s.rotation_ns = first.rotation_ns;
            s.transfer_ns = done - go - s.seek_ns - s.rotation_ns;
            self.mech_free = done;
        }
        s.end_ns = go + s.positioning_ns() + s.transfer_ns;
        self.busy_until = s.end_ns;
        if op == ModelOp::Read {
            self.stream = Some(st);
        } else {
            self.at = st.position_at(&self.mech, done);
        }
        s
    }

    /// The time `n` sectors take over the host interface.
    fn interface_ns(&self, n: u64) -> u64 {
        n * u64::from(SECTOR_SIZE) * 1_000_000_000 / self.params.interface_bytes_per_s
    }

    /// Serves `[lbn, end)` from the segment if it holds `lbn` at time `at` (and the drive is
    /// still reading towards the rest, or already has it); returns the completion time and
    /// records what the buffer held. The read-ahead then aims at `limit`.
    fn try_buffer(
        &mut self,
        at: u64,
        lbn: u64,
        end: u64,
        limit: u64,
        s: &mut Service,
    ) -> Option<u64> {
        let ifc_end = self.interface_ns(end - lbn);
        let mech = &self.mech;
        let st = self.stream.as_mut()?;
        st.advance(mech, at);
        let front = st.frontier(mech, at);
        let low = st.low().max(front.saturating_sub(u64::from(self.params.segment_sectors)));
        if lbn < low || lbn > front || (lbn == front && st.stopped()) {
            return None;
        }
        s.buffered_sectors = (front.min(end) - lbn) as u32;
        if end <= front {
            st.extend(at, limit);
            return Some(at + ifc_end);
        }
        st.extend(at, limit);
        let media = st.done_time(mech, end - 1);
        Some(media.max(at + ifc_end))
    }
}
