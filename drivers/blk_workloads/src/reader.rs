//! The access patterns of a disk-scheduling benchmark client, the `diskread` app: where each
//! request goes, whether it is a write, and how long the client thinks after it completes. They
//! are the readers of the host simulation (`disk_sched::sim::Pattern`)
//! made real: a synchronous reader that reads sequentially, every other block, at random places
//! or in bursts with pauses (the anticipation paper's adversary), and the disk hog, which keeps
//! several random reads in flight with no think time. The app supplies the clock and the
//! channels; everything here is portable and tested on the host.
//!
//! A [`ReadCursor`] walks one client's requests over its *range* of the disk, `[start, start +
//! span)` sectors, each request `sectors` long: sequential and alternate patterns start again
//! at `start` when the next request would pass the range's end; random places are aligned to
//! the request size (counted from `start`) and drawn from a SplitMix64 generator seeded by the
//! client, so a run is reproducible.

use crate::Rng;

/// Where a client's requests go, and when it pauses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPattern {
    /// One after the other from the range's start.
    Sequential,
    /// Every other block: a request, then one request's length skipped.
    Alternate,
    /// At random places aligned to the request size.
    Random,
    /// Sequential, but after every `burst` requests it pauses `pause_ns` instead of its think
    /// time: a few quick reads, then a pause just past the scheduler's wait.
    Bursts {
        /// Requests per burst (at least 1).
        burst: u32,
        /// The pause after a burst.
        pause_ns: u64,
    },
    /// At random places aligned to the request size, never thinking: the disk hog, which the
    /// client runs with several requests in flight.
    Hog,
}

impl ReadPattern {
    /// The pattern's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            ReadPattern::Sequential => "sequential",
            ReadPattern::Alternate => "alternate",
            ReadPattern::Random => "random",
            ReadPattern::Bursts { .. } => "bursts",
            ReadPattern::Hog => "hog",
        }
    }

    /// Are its places drawn at random (and so depend on the seed)?
    pub fn is_random(self) -> bool {
        matches!(self, ReadPattern::Random | ReadPattern::Hog)
    }
}

/// A client's requests: its range, request size, think time, pattern and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderShape {
    /// The range's first sector.
    pub start: u64,
    /// The range's length in sectors (at least `sectors`).
    pub span: u64,
    /// Sectors per request (at least 1).
    pub sectors: u32,
    /// Time from a request's completion to the next one's issue (0 for [`ReadPattern::Hog`],
    /// whatever this says).
    pub think_ns: u64,
    /// Where the requests go.
    pub pattern: ReadPattern,
    /// The seed of the random places.
    pub seed: u64,
    /// Every this many requests, one is a write (request number `k`, `2k`, ... counting from
    /// 1); `None`: reads only.
    pub write_every: Option<u64>,
}

/// Why a [`ReaderShape`] cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// A request of zero sectors.
    NoSectors,
    /// The range is shorter than one request.
    SpanTooShort,
    /// The range passes sector `u64::MAX`.
    RangeOverflows,
    /// [`ReadPattern::Bursts`] with a burst of zero requests.
    EmptyBurst,
    /// `write_every` of zero.
    ZeroWriteEvery,
}

impl ShapeError {
    /// What is wrong, for people.
    pub fn message(self) -> &'static str {
        match self {
            ShapeError::NoSectors => "a request of zero sectors",
            ShapeError::SpanTooShort => "the span is shorter than one request",
            ShapeError::RangeOverflows => "start + span overflows",
            ShapeError::EmptyBurst => "a burst of zero requests",
            ShapeError::ZeroWriteEvery => "--write-every 0",
        }
    }
}

/// One request a cursor gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextRequest {
    /// Its first sector.
    pub sector: u64,
    /// A write of the client's buffer (else a read).
    pub write: bool,
    /// How long the client waits, once the request has completed, before issuing the next.
    pub think_after_ns: u64,
}

/// The walk of one client's requests; see the [module](self).
#[derive(Clone, Debug)]
pub struct ReadCursor {
    shape: ReaderShape,
    /// The next sequential place.
    position: u64,
    /// Requests given so far.
    issued: u64,
    rng: Rng,
}

impl ReadCursor {
    /// A cursor at the start of `shape`'s range, or why the shape cannot run.
    pub fn new(shape: ReaderShape) -> Result<ReadCursor, ShapeError> {
        if shape.sectors == 0 {
            return Err(ShapeError::NoSectors);
        }
        if shape.span < u64::from(shape.sectors) {
            return Err(ShapeError::SpanTooShort);
        }
        if shape.start.checked_add(shape.span).is_none() {
            return Err(ShapeError::RangeOverflows);
        }
        if matches!(shape.pattern, ReadPattern::Bursts { burst: 0, .. }) {
            return Err(ShapeError::EmptyBurst);
        }
        if shape.write_every == Some(0) {
            return Err(ShapeError::ZeroWriteEvery);
        }
        Ok(ReadCursor { shape, position: shape.start, issued: 0, rng: Rng::new(shape.seed) })
    }

    /// The shape it walks.
    pub fn shape(&self) -> ReaderShape {
        self.shape
    }

    /// Requests given so far.
    pub fn issued(&self) -> u64 {
        self.issued
    }

    /// The next request: where, whether it writes, and the think time after it.
    pub fn next_request(&mut self) -> NextRequest {
        let s = self.shape;
        let len = u64::from(s.sectors);
        let end = s.start + s.span;
        let sector = match s.pattern {
            ReadPattern::Random | ReadPattern::Hog => {
                let places = s.span / len;
                s.start + self.rng.below(places) * len
            }
            ReadPattern::Sequential | ReadPattern::Alternate | ReadPattern::Bursts { .. } => {
                if self.position.checked_add(len).is_none_or(|e| e > end) {
                    self.position = s.start;
                }
                let sector = self.position;
                let step = if s.pattern == ReadPattern::Alternate { 2 * len } else { len };
                // Past the end (or at it) wraps at the next request.
                self.position = self.position.saturating_add(step);
                sector
            }
        };
        self.issued += 1;
        let n = self.issued;
        let write = s.write_every.is_some_and(|k| n.is_multiple_of(k));
        let think_after_ns = match s.pattern {
            ReadPattern::Hog => 0,
            ReadPattern::Bursts { burst, pause_ns } if n.is_multiple_of(u64::from(burst)) => {
                pause_ns
            }
            _ => s.think_ns,
        };
        NextRequest { sector, write, think_after_ns }
    }
}

impl Iterator for ReadCursor {
    type Item = NextRequest;

    /// [`ReadCursor::next_request`]: the walk never ends.
    fn next(&mut self) -> Option<NextRequest> {
        Some(self.next_request())
    }
}

/// What a client's completed requests add up to: counts, bytes and latencies (issue to
/// response), and the first issue and last completion times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadTally {
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// When the first request was issued (`None` before any was).
    pub first_ns: Option<u64>,
    /// When the last request completed (0 before any did).
    pub last_ns: u64,
    /// The sum of the latencies.
    pub total_latency_ns: u64,
    /// The longest latency.
    pub max_latency_ns: u64,
}

impl ReadTally {
    /// A request was issued at `now_ns` (only the first one's time is kept).
    pub fn issued(&mut self, now_ns: u64) {
        self.first_ns.get_or_insert(now_ns);
    }

    /// A request of `bytes`, a write or a read, issued at `issued_ns`, completed at `done_ns`.
    pub fn completed(&mut self, write: bool, bytes: u64, issued_ns: u64, done_ns: u64) {
        if write {
            self.writes += 1;
        } else {
            self.reads += 1;
        }
        self.bytes += bytes;
        let latency = done_ns.saturating_sub(issued_ns);
        self.total_latency_ns += latency;
        self.max_latency_ns = self.max_latency_ns.max(latency);
        self.last_ns = self.last_ns.max(done_ns);
    }

    /// Requests completed.
    pub fn requests(&self) -> u64 {
        self.reads + self.writes
    }

    /// From the first issue to the last completion (0 before any completed).
    pub fn elapsed_ns(&self) -> u64 {
        self.first_ns.map_or(0, |first| self.last_ns.saturating_sub(first))
    }

    /// The mean latency, rounded down (0 before any completed).
    pub fn mean_latency_ns(&self) -> u64 {
        self.total_latency_ns.checked_div(self.requests()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::*;

    fn shape(pattern: ReadPattern) -> ReaderShape {
        ReaderShape {
            start: 1000,
            span: 1024,
            sectors: 128,
            think_ns: 7,
            pattern,
            seed: 5,
            write_every: None,
        }
    }

    fn sectors(shape: ReaderShape, n: usize) -> Vec<u64> {
        ReadCursor::new(shape).unwrap().take(n).map(|r| r.sector).collect()
    }

    #[test]
    fn sequential_reads_in_order_and_wraps_at_the_span() {
        let s = shape(ReadPattern::Sequential);
        let want: Vec<u64> = (0..8).chain(0..3).map(|i| 1000 + i * 128).collect();
        assert_eq!(sectors(s, 11), want);
        let r: Vec<NextRequest> = ReadCursor::new(s).unwrap().take(20).collect();
        assert!(r.iter().all(|r| !r.write && r.think_after_ns == 7));
    }

    #[test]
    fn a_span_not_a_multiple_of_the_size_wraps_before_passing_its_end() {
        let s = ReaderShape { span: 300, ..shape(ReadPattern::Sequential) };
        assert_eq!(sectors(s, 4), [1000, 1128, 1000, 1128]);
    }

    #[test]
    fn alternate_skips_a_request_length_after_each() {
        let s = shape(ReadPattern::Alternate);
        assert_eq!(sectors(s, 6), [1000, 1256, 1512, 1768, 1000, 1256]);
        // A span of three requests: the second would pass the end, so it wraps.
        let s = ReaderShape { span: 384, ..s };
        assert_eq!(sectors(s, 3), [1000, 1256, 1000]);
        let s = ReaderShape { span: 128, ..s };
        assert_eq!(sectors(s, 3), [1000, 1000, 1000]);
    }

    #[test]
    fn random_places_are_aligned_inside_the_range_and_seeded() {
        for pattern in [ReadPattern::Random, ReadPattern::Hog] {
            let s = shape(pattern);
            let got = sectors(s, 2000);
            assert!(got.iter().all(|&x| (1000..1000 + 1024 - 127).contains(&x)), "{got:?}");
            assert!(got.iter().all(|&x| (x - 1000) % 128 == 0));
            // Every one of the 8 places is reached.
            for place in 0..8 {
                assert!(got.contains(&(1000 + place * 128)), "place {place}");
            }
            assert_eq!(got, sectors(s, 2000), "same seed, same places");
            assert_ne!(got, sectors(ReaderShape { seed: 6, ..s }, 2000), "another seed");
        }
    }

    #[test]
    fn the_hog_never_thinks() {
        let r: Vec<NextRequest> =
            ReadCursor::new(shape(ReadPattern::Hog)).unwrap().take(50).collect();
        assert!(r.iter().all(|r| r.think_after_ns == 0 && !r.write));
    }

    #[test]
    fn bursts_pause_after_every_burst_instead_of_thinking() {
        let s = shape(ReadPattern::Bursts { burst: 3, pause_ns: 9000 });
        let r: Vec<NextRequest> = ReadCursor::new(s).unwrap().take(9).collect();
        let thinks: Vec<u64> = r.iter().map(|r| r.think_after_ns).collect();
        assert_eq!(thinks, [7, 7, 9000, 7, 7, 9000, 7, 7, 9000]);
        // The places are sequential's.
        let seq = sectors(shape(ReadPattern::Sequential), 9);
        assert_eq!(r.iter().map(|r| r.sector).collect::<Vec<_>>(), seq);
        let one = shape(ReadPattern::Bursts { burst: 1, pause_ns: 4 });
        assert!(ReadCursor::new(one).unwrap().take(5).all(|r| r.think_after_ns == 4));
    }

    #[test]
    fn every_kth_request_writes() {
        let s = ReaderShape { write_every: Some(3), ..shape(ReadPattern::Random) };
        let writes: Vec<bool> = ReadCursor::new(s).unwrap().take(7).map(|r| r.write).collect();
        assert_eq!(writes, [false, false, true, false, false, true, false]);
        let all = ReaderShape { write_every: Some(1), ..s };
        assert!(ReadCursor::new(all).unwrap().take(5).all(|r| r.write));
        // The writes do not move the places.
        assert_eq!(sectors(s, 100), sectors(shape(ReadPattern::Random), 100));
    }

    #[test]
    fn bad_shapes_are_refused() {
        let s = shape(ReadPattern::Sequential);
        let err = |s| ReadCursor::new(s).unwrap_err();
        assert_eq!(err(ReaderShape { sectors: 0, ..s }), ShapeError::NoSectors);
        assert_eq!(err(ReaderShape { span: 127, ..s }), ShapeError::SpanTooShort);
        assert_eq!(err(ReaderShape { start: u64::MAX - 10, ..s }), ShapeError::RangeOverflows);
        let b = ReadPattern::Bursts { burst: 0, pause_ns: 1 };
        assert_eq!(err(ReaderShape { pattern: b, ..s }), ShapeError::EmptyBurst);
        assert_eq!(err(ReaderShape { write_every: Some(0), ..s }), ShapeError::ZeroWriteEvery);
        // The last range that fits.
        assert!(ReadCursor::new(ReaderShape { start: u64::MAX - 1024, ..s }).is_ok());
    }

    #[test]
    fn a_range_at_the_top_of_the_sector_space_wraps_without_overflow() {
        let s = ReaderShape { start: u64::MAX - 256, span: 256, ..shape(ReadPattern::Alternate) };
        assert_eq!(sectors(s, 3), [u64::MAX - 256, u64::MAX - 256, u64::MAX - 256]);
        let s = ReaderShape { pattern: ReadPattern::Sequential, ..s };
        assert_eq!(sectors(s, 3), [u64::MAX - 256, u64::MAX - 128, u64::MAX - 256]);
    }

    #[test]
    fn names_and_randomness() {
        let b = ReadPattern::Bursts { burst: 2, pause_ns: 3 };
        let all = [ReadPattern::Sequential, ReadPattern::Alternate, ReadPattern::Random, b];
        let names: Vec<&str> = all.iter().chain(&[ReadPattern::Hog]).map(|p| p.name()).collect();
        assert_eq!(names, ["sequential", "alternate", "random", "bursts", "hog"]);
        assert!(ReadPattern::Random.is_random() && ReadPattern::Hog.is_random());
        assert!(!ReadPattern::Sequential.is_random() && !b.is_random());
    }

    #[test]
    fn the_tally_adds_up() {
        let mut t = ReadTally::default();
        assert_eq!((t.elapsed_ns(), t.mean_latency_ns()), (0, 0));
        t.issued(100);
        t.issued(150);
        t.completed(false, 512, 100, 400);
        t.completed(true, 1024, 150, 250);
        assert_eq!((t.reads, t.writes, t.bytes, t.requests()), (1, 1, 1536, 2));
        assert_eq!((t.first_ns, t.last_ns, t.elapsed_ns()), (Some(100), 400, 300));
        assert_eq!((t.mean_latency_ns(), t.max_latency_ns), (200, 300));
    }
}
