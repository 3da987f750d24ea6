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

use crate::mem_disk::Rng;

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

/// The seeded sequence of a client's transfers.
#[derive(Clone, Debug)]
pub struct Workload {
    rng: Rng,
    first: u64,
    sectors: u64,
    next: u64,
}

impl Workload {
    /// The workload seeded `seed` over the region of `sectors` sectors from `first` (at least
    /// [`MAX_SECTORS`] of them).
    pub fn new(seed: u64, first: u64, sectors: u64) -> Workload {
        assert!(sectors >= u64::from(MAX_SECTORS), "a region holds the longest transfer");
        Workload { rng: Rng::new(seed), first, sectors, next: 0 }
    }
}

impl Iterator for Workload {
    type Item = Transfer;

    fn next(&mut self) -> Option<Transfer> {
        let write = self.rng.below(2) == 0;
        let count = 1 + self.rng.below(u64::from(MAX_SECTORS)) as u32;
        let sector = self.first + self.rng.below(self.sectors - u64::from(count) + 1);
        let number = self.next;
        self.next += 1;
        Some(Transfer { number, write, sector, count })
    }
}

/// What write number `write` of the workload seeded `seed` puts in sector `sector`.
pub fn sector_bytes(seed: u64, write: u64, sector: u64, out: &mut [u8]) {
    let mut rng =
        Rng::new(seed ^ write.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ sector.rotate_left(32));
    for chunk in out.chunks_mut(8) {
        let word = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
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
        let mut e = Expected::new(seed, first, sectors);
        for t in Workload::new(seed, first, sectors).take(n as usize) {
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
