//! Where a logical block lives on the platters: zones (bands of cylinders with the same number
//! of sectors per track, outer zones denser), heads (one per recording surface) and cylinders,
//! and the mapping from a logical block number (LBN) to (cylinder, head, sector in track) with
//! **track skew** and **cylinder skew**. LBNs fill a track, then the next head of the same
//! cylinder, then the next cylinder inwards. Each track's sector 0 sits a few sector slots
//! further round than the previous track's ([`Geometry::slot`]): the track skew covers a head
//! switch and the cylinder skew a single-cylinder seek, so a sequential stream crossing a track
//! boundary waits only that long and does not lose a revolution.
//!
//! Not modelled: spare sectors and remapped defects, servo wedges, recording-density changes
//! inside a zone, and the different skew a real drive uses at a zone boundary (crossing one
//! costs up to a revolution here, once per zone).

use alloc::vec::Vec;

/// A band of cylinders with the same number of sectors per track, as the parameters give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Zone {
    /// How many cylinders the zone holds.
    pub cylinders: u32,
    /// Sectors on each track of the zone.
    pub sectors_per_track: u32,
}

/// A physical address: cylinder (0 is the outermost), head (surface), sector within the track
/// (in LBN order, before skew).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chs {
    /// The cylinder, 0 outermost.
    pub cylinder: u32,
    /// The head (recording surface).
    pub head: u32,
    /// The sector's index within its track, in LBN order.
    pub sector: u32,
}

/// A zone as laid out: its first cylinder, first LBN and skews.
#[derive(Clone, Copy, Debug)]
struct Band {
    first_cylinder: u32,
    cylinders: u32,
    spt: u32,
    first_lbn: u64,
    track_skew: u32,
    cylinder_skew: u32,
}

/// The disk's layout: zones, heads, cylinders and skews; see the [module](self).
#[derive(Clone, Debug)]
pub struct Geometry {
    heads: u32,
    bands: Vec<Band>,
    cylinders: u32,
    sectors: u64,
}

/// `ceil(time_ns * spt / rev_ns)`: how many sector slots pass in `time_ns`.
fn slots_in(time_ns: u64, spt: u32, rev_ns: u64) -> u32 {
    (time_ns * u64::from(spt)).div_ceil(rev_ns) as u32
}

impl Geometry {
    /// The layout of `zones` (outermost first) on `heads` surfaces, for a platter turning once
    /// every `rev_ns`, with skews sized for a head switch of `head_switch_ns` and a
    /// single-cylinder seek of `single_cylinder_ns`. Empty zones are skipped.
    ///
    /// # Panics
    /// If there are no heads, no non-empty zone, or a zone has no sectors per track.
    pub fn new(
        heads: u32,
        zones: &[Zone],
        rev_ns: u64,
        head_switch_ns: u64,
        single_cylinder_ns: u64,
    ) -> Geometry {
        assert!(heads > 0 && rev_ns > 0);
        let mut bands = Vec::with_capacity(zones.len());
        let (mut cylinder, mut lbn) = (0u32, 0u64);
        for z in zones.iter().filter(|z| z.cylinders > 0) {
            assert!(z.sectors_per_track > 0);
            let spt = z.sectors_per_track;
            bands.push(Band {
                first_cylinder: cylinder,
                cylinders: z.cylinders,
                spt,
                first_lbn: lbn,
                track_skew: slots_in(head_switch_ns, spt, rev_ns) % spt,
                cylinder_skew: slots_in(single_cylinder_ns, spt, rev_ns) % spt,
            });
            cylinder += z.cylinders;
            lbn += u64::from(z.cylinders) * u64::from(heads) * u64::from(spt);
        }
        assert!(!bands.is_empty(), "a geometry needs a non-empty zone");
        Geometry { heads, bands, cylinders: cylinder, sectors: lbn }
    }

    /// Heads (recording surfaces).
    pub fn heads(&self) -> u32 {
        self.heads
    }

    /// Cylinders, all zones together.
    pub fn cylinders(&self) -> u32 {
        self.cylinders
    }

    /// Sectors the layout holds.
    pub fn sectors(&self) -> u64 {
        self.sectors
    }

    /// The zones as laid out, outermost first.
    pub fn zones(&self) -> impl Iterator<Item = Zone> + '_ {
        self.bands.iter().map(|b| Zone { cylinders: b.cylinders, sectors_per_track: b.spt })
    }

    /// The band holding `cylinder` (the last one past the end).
    fn band_of_cylinder(&self, cylinder: u32) -> &Band {
        let i = self.bands.partition_point(|b| b.first_cylinder <= cylinder);
        &self.bands[i.max(1) - 1]
    }

    /// Sectors per track on `cylinder`.
    pub fn sectors_per_track(&self, cylinder: u32) -> u32 {
        self.band_of_cylinder(cylinder).spt
    }

    /// Where `lbn` lives; an LBN past the end maps to the last sector.
    pub fn locate(&self, lbn: u64) -> Chs {
        let lbn = lbn.min(self.sectors - 1);
        let i = self.bands.partition_point(|b| b.first_lbn <= lbn);
        let b = &self.bands[i.max(1) - 1];
        let rel = lbn - b.first_lbn;
        let spt = u64::from(b.spt);
        let track = rel / spt;
        Chs {
            cylinder: b.first_cylinder + (track / u64::from(self.heads)) as u32,
            head: (track % u64::from(self.heads)) as u32,
            sector: (rel % spt) as u32,
        }
    }

    /// How many zone boundaries the sectors `[lbn, end)` cross: the zones they run into after
    /// the first sector's.
    pub fn zone_boundaries_in(&self, lbn: u64, end: u64) -> u64 {
        if end <= lbn.saturating_add(1) {
            return 0;
        }
        let zone = |x: u64| self.bands.partition_point(|b| b.first_lbn <= x.min(self.sectors - 1));
        (zone(end - 1) - zone(lbn)) as u64
    }

    /// The first LBN of the track `(cylinder, head)`.
    pub fn track_start(&self, cylinder: u32, head: u32) -> u64 {
        let b = self.band_of_cylinder(cylinder);
        let track =
            u64::from(cylinder - b.first_cylinder) * u64::from(self.heads) + u64::from(head);
        b.first_lbn + track * u64::from(b.spt)
    }

    /// The angular slot (0 at the index mark, in sector widths) where sector `sector` of track
    /// `(cylinder, head)` begins: its index plus the skew accumulated over the zone's earlier
    /// tracks (a track skew per head switch, a cylinder skew per cylinder switch).
    pub fn slot(&self, cylinder: u32, head: u32, sector: u32) -> u32 {
        let b = self.band_of_cylinder(cylinder);
        let spt = u64::from(b.spt);
        let c = u64::from(cylinder - b.first_cylinder);
        let per_cylinder =
            u64::from(self.heads - 1) * u64::from(b.track_skew) + u64::from(b.cylinder_skew);
        let skew = c * per_cylinder + u64::from(head) * u64::from(b.track_skew);
        ((u64::from(sector) + skew) % spt) as u32
    }
}
