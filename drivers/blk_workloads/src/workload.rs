//! A client's deterministic workload, and what the disk must hold after it: the same code
//! drives a client domain (the `blkbench` app) and checks the disk image on the host
//! afterwards (xtask), so that every block the client reports as written is verified from
//! outside.
//!
//! A workload is a seeded sequence of [`Transfer`]s inside the client's *region* of the disk
//! (`first`, `sectors`): reads and writes of 1 to [`MAX_SECTORS`] sectors at random places.
//! Write number `n` fills each sector `s` it covers with [`sector_bytes`]`(seed, n, s)`, so a
//! sector's contents name the write that put them there. The client never has two transfers
//! that overlap in flight at once, so the disk ends as if the transfers had run one after the
//! other: [`Expected`] replays them and says what each sector holds.

use alloc::vec;
use alloc::vec::Vec;

use crate::Rng;

/// Bytes in a sector of the workload (the disks' sector size).
pub const SECTOR: usize = 512;

/// The longest transfer, in sectors (64 KiB).
pub const MAX_SECTORS: u32 = 128;

/// One transfer of the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Its number in the workload, from 0.
    pub number: u64,
    /// A write (else a read).
    pub write: bool,
    /// The first sector (on the disk, inside the region).
    pub sector: u64,
    /// How many sectors, 1 to [`MAX_SECTORS`].
    pub count: u32,
}

impl Transfer {
    /// Whether it touches any sector `other` touches.
    pub fn overlaps(&self, other: &Transfer) -> bool {
        self.sector < other.sector + u64::from(other.count)
            && other.sector < self.sector + u64::from(self.count)
    }
}

/// Where a workload's transfers go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// At random places in the region (aligned to their size when the size is fixed).
    Random,
    /// One after the other from the region's start, starting again at the start when the next
    /// would pass its end.
    Sequential,
}

/// Which transfers a workload makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// Reads and writes, half each, at random.
    ReadWrite,
    /// Reads only.
    Read,
    /// Writes only.
    Write,
}

/// A workload's shape: where its transfers go, which they are, and their size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Where.
    pub pattern: Pattern,
    /// Which.
    pub mix: Mix,
    /// Sectors per transfer, 1 to [`MAX_SECTORS`]; `None`: each transfer's size at random in
    /// that range.
    pub count: Option<u32>,
}

impl Shape {
    /// Random reads and writes of random sizes: the shape of the driver tests.
    pub const MIXED: Shape = Shape { pattern: Pattern::Random, mix: Mix::ReadWrite, count: None };
}

/// The number of the first transfer of a region's prefill ([`Workload::prefill`]): far above
/// any workload's own numbers, so that a sector's contents say which wrote it.
pub const PREFILL_BASE: u64 = 1 << 48;

/// The seeded sequence of a client's transfers.
#[derive(Clone, Debug)]
pub struct Workload {
    rng: Rng,
    first: u64,
    sectors: u64,
    shape: Shape,
    /// The next sequential transfer's offset in the region.
    cursor: u64,
    next: u64,
}

impl Workload {
    /// The workload seeded `seed` over the region of `sectors` sectors from `first` (at least
    /// [`MAX_SECTORS`] of them), of shape [`Shape::MIXED`].
    pub fn new(seed: u64, first: u64, sectors: u64) -> Workload {
        Workload::shaped(seed, first, sectors, Shape::MIXED)
    }

    /// The workload of shape `shape` seeded `seed` over the region of `sectors` sectors from
    /// `first` (at least [`MAX_SECTORS`] of them).
    pub fn shaped(seed: u64, first: u64, sectors: u64, shape: Shape) -> Workload {
        assert!(sectors >= u64::from(MAX_SECTORS), "a region holds the longest transfer");
        assert!(
            shape.count.is_none_or(|c| (1..=MAX_SECTORS).contains(&c)),
            "a transfer is 1 to MAX_SECTORS sectors"
        );
        Workload { rng: Rng::new(seed), first, sectors, shape, cursor: 0, next: 0 }
    }

    /// The writes that fill the region once, in order, [`MAX_SECTORS`] at a time (the last may
    /// be shorter), numbered from [`PREFILL_BASE`]: so that a workload's reads find data, not
    /// zeros.
    pub fn prefill(first: u64, sectors: u64) -> impl Iterator<Item = Transfer> {
        let step = u64::from(MAX_SECTORS);
        (0..sectors.div_ceil(step)).map(move |i| Transfer {
            number: PREFILL_BASE + i,
            write: true,
            sector: first + i * step,
            count: (sectors - i * step).min(step) as u32,
        })
    }
}

impl Iterator for Workload {
    type Item = Transfer;

    fn next(&mut self) -> Option<Transfer> {
        let write = match self.shape.mix {
            Mix::ReadWrite => self.rng.below(2) == 0,
            Mix::Read => false,
            Mix::Write => true,
        };
        let count = match self.shape.count {
            Some(c) => c,
            None => 1 + self.rng.below(u64::from(MAX_SECTORS)) as u32,
        };
        let offset = match (self.shape.pattern, self.shape.count) {
            (Pattern::Random, None) => self.rng.below(self.sectors - u64::from(count) + 1),
            (Pattern::Random, Some(c)) => {
                self.rng.below(self.sectors / u64::from(c)) * u64::from(c)
            }
            (Pattern::Sequential, _) => {
                if self.cursor + u64::from(count) > self.sectors {
                    self.cursor = 0;
                }
                let at = self.cursor;
                self.cursor += u64::from(count);
                at
            }
        };
        let number = self.next;
        self.next += 1;
        Some(Transfer { number, write, sector: self.first + offset, count })
    }
}

/// What write number `write` of the workload seeded `seed` puts in sector `sector`.
pub fn sector_bytes(seed: u64, write: u64, sector: u64, out: &mut [u8]) {
    // One strong mix per sector names it (seed, write, sector); a xorshift step per word fills
    // it cheaply (the check of every block read must not cost more than the block path).
    let mut x = Rng::new(seed ^ write.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ sector.rotate_left(32))
        .next_u64()
        | 1;
    let mut step = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x.to_le_bytes()
    };
    let mut words = out.chunks_exact_mut(8);
    for chunk in &mut words {
        chunk.copy_from_slice(&step());
    }
    let rest = words.into_remainder();
    let len = rest.len();
    rest.copy_from_slice(&step()[..len]);
}

/// What each sector of a client's region holds after the first `n` transfers of its
/// workload: the number of the last write to it, if any.
#[derive(Clone, Debug)]
pub struct Expected {
    seed: u64,
    first: u64,
    last_write: Vec<Option<u64>>,
}

impl Expected {
    /// A region nothing has been written to yet.
    pub fn new(seed: u64, first: u64, sectors: u64) -> Expected {
        Expected { seed, first, last_write: vec![None; sectors as usize] }
    }

    /// After the first `n` transfers of the workload seeded `seed` over the region.
    pub fn after(seed: u64, first: u64, sectors: u64, n: u64) -> Expected {
        Expected::after_shaped(seed, first, sectors, Shape::MIXED, false, n)
    }

    /// After the region's prefill if `prefill`, then the first `n` transfers of the workload
    /// of shape `shape` seeded `seed` over the region.
    pub fn after_shaped(
        seed: u64,
        first: u64,
        sectors: u64,
        shape: Shape,
        prefill: bool,
        n: u64,
    ) -> Expected {
        let mut e = Expected::new(seed, first, sectors);
        if prefill {
            Workload::prefill(first, sectors).for_each(|t| e.apply(&t));
        }
        for t in Workload::shaped(seed, first, sectors, shape).take(n as usize) {
            e.apply(&t);
        }
        e
    }

    /// Records transfer `t` (a read changes nothing).
    pub fn apply(&mut self, t: &Transfer) {
        if t.write {
            for s in t.sector..t.sector + u64::from(t.count) {
                self.last_write[(s - self.first) as usize] = Some(t.number);
            }
        }
    }

    /// The bytes sector `sector` must hold (zero if never written).
    pub fn sector(&self, sector: u64, out: &mut [u8]) {
        match self.last_write[(sector - self.first) as usize] {
            Some(w) => sector_bytes(self.seed, w, sector, out),
            None => out.fill(0),
        }
    }

    /// How many sectors of the region were written at least once.
    pub fn written(&self) -> usize {
        self.last_write.iter().filter(|w| w.is_some()).count()
    }

    /// Checks `region` (the region's bytes as read from the disk): the first sector that
    /// differs from what it must hold, if any.
    pub fn first_mismatch(&self, region: &[u8]) -> Option<u64> {
        let mut want = [0u8; SECTOR];
        for (i, got) in region.chunks(SECTOR).enumerate() {
            let sector = self.first + i as u64;
            self.sector(sector, &mut want);
            if got != want {
                return Some(sector);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_size_shapes_stay_aligned_in_the_region() {
        let (first, sectors) = (64, 1000);
        let rand4k = Shape { pattern: Pattern::Random, mix: Mix::Read, count: Some(8) };
        let all: Vec<Transfer> = Workload::shaped(5, first, sectors, rand4k).take(2000).collect();
        assert!(all.iter().all(|t| !t.write && t.count == 8 && (t.sector - first) % 8 == 0));
        assert!(all.iter().all(|t| t.sector + 8 <= first + sectors));
        // Random: the 125 aligned places are all visited, in no fixed order.
        let mut places: Vec<u64> = all.iter().map(|t| t.sector).collect();
        assert_ne!(places[..10], [64, 72, 80, 88, 96, 104, 112, 120, 128, 136]);
        places.sort();
        places.dedup();
        assert_eq!(places.len(), 125);

        let seq64k = Shape { pattern: Pattern::Sequential, mix: Mix::Write, count: Some(128) };
        let all: Vec<Transfer> = Workload::shaped(5, first, sectors, seq64k).take(9).collect();
        let starts: Vec<u64> = all.iter().map(|t| t.sector - first).collect();
        // 1000 sectors hold seven 128-sector transfers; the eighth starts again at 0.
        assert_eq!(starts, [0, 128, 256, 384, 512, 640, 768, 0, 128]);
        assert!(all.iter().all(|t| t.write));
    }

    #[test]
    fn the_prefill_covers_the_region_once_and_reads_find_it() {
        let (seed, first, sectors) = (9, 100, 300);
        let fill: Vec<Transfer> = Workload::prefill(first, sectors).collect();
        assert_eq!(fill.iter().map(|t| u64::from(t.count)).sum::<u64>(), sectors);
        assert_eq!(fill.last().map(|t| (t.sector, t.count)), Some((356, 44)));
        let reads = Shape { pattern: Pattern::Random, mix: Mix::Read, count: Some(8) };
        let e = Expected::after_shaped(seed, first, sectors, reads, true, 50);
        assert_eq!(e.written(), sectors as usize);
        let mut want = [0u8; SECTOR];
        let mut direct = [0u8; SECTOR];
        e.sector(first + 130, &mut want);
        sector_bytes(seed, PREFILL_BASE + 1, first + 130, &mut direct);
        assert_eq!(want, direct);
    }

    #[test]
    fn transfers_stay_in_the_region_and_vary() {
        let (first, sectors) = (1000, 4096);
        let all: Vec<Transfer> = Workload::new(7, first, sectors).take(10_000).collect();
        assert!(all.iter().all(|t| t.sector >= first
            && t.sector + u64::from(t.count) <= first + sectors
            && (1..=MAX_SECTORS).contains(&t.count)));
        let writes = all.iter().filter(|t| t.write).count();
        assert!((4_000..6_000).contains(&writes));
        assert!(all.iter().any(|t| t.count == 1) && all.iter().any(|t| t.count == MAX_SECTORS));
        assert_eq!(all, Workload::new(7, first, sectors).take(10_000).collect::<Vec<_>>());
    }

    #[test]
    fn the_replay_names_each_sectors_last_write() {
        let (seed, first, sectors) = (3, 0, 256);
        let mut disk = vec![0u8; sectors as usize * SECTOR];
        for t in Workload::new(seed, first, sectors).take(500) {
            if t.write {
                for s in t.sector..t.sector + u64::from(t.count) {
                    let at = s as usize * SECTOR;
                    sector_bytes(seed, t.number, s, &mut disk[at..at + SECTOR]);
                }
            }
        }
        let e = Expected::after(seed, first, sectors, 500);
        assert_eq!(e.first_mismatch(&disk), None);
        assert!(e.written() > 200);
        // A sector from another write, or another seed, is caught.
        disk[SECTOR * 10] ^= 1;
        assert_eq!(e.first_mismatch(&disk), Some(10));
        assert_eq!(Expected::after(seed + 1, first, sectors, 500).first_mismatch(&disk), Some(0));
    }
}
