//! [`CompressedCache`]: pages compressed with lz4 or WKdm in a bounded pool, over a lower
//! cache.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec;

use lz4_flex::block::{
    CompressTable, compress_into_with_table, decompress_into, get_maximum_output_size,
};

use super::expel::{Candidate, choose_victim};
use super::wkdm::Scratch;
use super::{BasicCache, CacheManager, CacheStats, Fetched};
use crate::disk::{DiskManager, DiskStats, SwapSpace};
use crate::error::PagerError;
use crate::plan::{Found, HitKind};
use crate::{PAGE_SIZE, Page};
pub use pager_spec::Codec;

/// The pool's unit of space: every entry takes a whole number of 512-byte sub-pages (the
/// thesis's sub-page size), so fragmentation is bounded and the accounting is exact.
pub const SUB_PAGE: usize = 512;

/// What the cache does with a page that does not compress well enough.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Incompressible {
    /// Keep it uncompressed in the pool (a whole page of space). The default: a fault on it
    /// then costs a copy, the cheapest fault there is, and the cache stays exclusive.
    #[default]
    StoreRaw,
    /// Pass it to the cache below (towards the backing store), keeping the pool for pages
    /// that compress.
    Bypass,
}

/// The compressed cache's settings.
#[derive(Clone, Copy, Debug)]
pub struct CompressedConfig {
    /// The pool's size in bytes.
    pub pool_bytes: usize,
    /// A page is *incompressible* when its compressed size, rounded up to sub-pages, is more
    /// than this; the default, `PAGE_SIZE - SUB_PAGE`, asks for a saving of a sub-page.
    pub max_compressed: usize,
    /// What to do with incompressible pages.
    pub incompressible: Incompressible,
    /// The compressor for the pages it stores.
    pub codec: Codec,
    /// A clock (nanoseconds, or instructions under `-icount`) to time compression and
    /// decompression with ([`CacheStats::codec_ns`]); none by default.
    pub clock: Option<fn() -> u64>,
}

impl CompressedConfig {
    /// A pool of `pool_bytes` with the default threshold and raw storage.
    pub fn new(pool_bytes: usize) -> CompressedConfig {
        CompressedConfig {
            pool_bytes,
            max_compressed: PAGE_SIZE - SUB_PAGE,
            incompressible: Incompressible::StoreRaw,
            codec: Codec::Lz4,
            clock: None,
        }
    }
}

/// How an entry's contents are kept.
#[derive(Debug)]
enum Stored {
    /// All zero: a mark, no bytes.
    Zero,
    /// Uncompressed.
    Raw(Box<Page>),
    /// lz4 block format.
    Lz4(Box<[u8]>),
    /// WKdm's format.
    Wkdm(Box<[u8]>),
}

impl Stored {
    /// The compressed bytes, if compressed.
    fn compressed(&self) -> Option<&[u8]> {
        match self {
            Stored::Lz4(bytes) | Stored::Wkdm(bytes) => Some(bytes),
            Stored::Zero | Stored::Raw(_) => None,
        }
    }
}

#[derive(Debug)]
struct Entry {
    stored: Stored,
    dirty: bool,
    /// Which of `order`'s entries for the page is live (older ones are stale).
    generation: u64,
    /// Pool bytes it takes (whole sub-pages).
    size: usize,
}

/// The compressed cache manager.
///
/// Every page put into it (clean ones too: the cache is exclusive, and a clean page in the
/// pool saves a disk read) is stored as a zero mark, compressed, or, when incompressible, as
/// [`Incompressible`] says. When the pool is full, entries are expelled to the lower cache,
/// *clean first*: the oldest clean entry (which the lower cache drops at no cost, the backing
/// store holding it), else the oldest entry ([`super::expel::choose_victim`], the
/// compressed-cache lab's file). A fetch that hits decompresses into the caller's
/// page and frees the entry; a miss goes to the lower cache.
///
/// Zero marks take no pool space, so they are never expelled to make room, only by a flush.
///
/// The cache compresses with one [`Codec`], its configuration's, for its life; each entry
/// records the codec that made it all the same, so an entry is always decompressed by its
/// own codec.
///
/// The pool's bytes live in the heap, one allocation per entry, and space is counted in
/// sub-pages against `pool_bytes`. The thesis's single contiguous cache stretch with an
/// address-ordered free list (so frames can be handed back one at a time) is not built: a
/// shrink expels entries until the rest fit.
pub struct CompressedCache {
    lower: Box<dyn CacheManager>,
    config: CompressedConfig,
    pool: BTreeMap<usize, Entry>,
    /// Pages in the pool, oldest first, with the generation of their entry: a page that leaves
    /// the pool other than from the front leaves a stale entry here, which the searches skip,
    /// so a hit costs no search.
    order: VecDeque<(usize, u64)>,
    generation: u64,
    used: usize,
    /// lz4's output buffer and hash table, allocated only for lz4.
    lz4: Option<(Box<[u8]>, Box<CompressTable>)>,
    /// WKdm's working memory, allocated only for WKdm.
    wkdm: Option<Box<Scratch>>,
    stats: CacheStats,
}

impl CompressedCache {
    /// A compressed cache over `lower`.
    pub fn new(lower: Box<dyn CacheManager>, config: CompressedConfig) -> CompressedCache {
        CompressedCache {
            lower,
            config,
            pool: BTreeMap::new(),
            order: VecDeque::new(),
            generation: 0,
            used: 0,
            lz4: (config.codec == Codec::Lz4).then(|| {
                let out = vec![0u8; get_maximum_output_size(PAGE_SIZE)].into_boxed_slice();
                (out, Box::new(CompressTable::small()))
            }),
            wkdm: (config.codec == Codec::Wkdm).then(|| Box::new(Scratch::new())),
            stats: CacheStats::default(),
        }
    }

    /// The extended compressed cache: a compressed working pool over a [`BasicCache`] whose
    /// eviction area (`evict_pages`) collects pages expelled from the pool and writes them as
    /// one group, and whose fetch area (`fetch_pages`, possibly 0) holds the pages read with a
    /// missed one. Areas 2 and 3 hold pages uncompressed, because the disk managers store
    /// whole pages.
    pub fn extended(
        disk: Box<dyn DiskManager>,
        config: CompressedConfig,
        evict_pages: usize,
        fetch_pages: usize,
    ) -> CompressedCache {
        CompressedCache::new(Box::new(BasicCache::new(disk, evict_pages, fetch_pages)), config)
    }

    /// Whether the pool itself (not a lower cache) holds `page`.
    pub fn in_pool(&self, page: usize) -> bool {
        self.pool.contains_key(&page)
    }

    /// Pages in the pool.
    pub fn pool_pages(&self) -> usize {
        self.pool.len()
    }

    fn remove(&mut self, page: usize) -> Option<Entry> {
        let entry = self.pool.remove(&page)?;
        // Stale entries at the front go, so the oldest live page is found at once.
        let pool = &self.pool;
        while self
            .order
            .front()
            .is_some_and(|(p, g)| pool.get(p).is_none_or(|e| e.generation != *g))
        {
            self.order.pop_front();
        }
        self.used -= entry.size;
        Some(entry)
    }

    /// The clock's time, or 0 without one.
    fn now(&self) -> u64 {
        self.config.clock.map_or(0, |clock| clock())
    }

    /// Writes `page`'s contents, held in `stored`, into `buf`.
    fn restore(
        wkdm: &mut Option<Box<Scratch>>,
        page: usize,
        stored: &Stored,
        buf: &mut Page,
    ) -> Result<(), PagerError> {
        match stored {
            Stored::Zero => buf.fill(0),
            Stored::Raw(data) => buf.copy_from_slice(&data[..]),
            Stored::Lz4(bytes) => match decompress_into(bytes, buf) {
                Ok(PAGE_SIZE) => {}
                _ => return Err(PagerError::Corrupt { page }),
            },
            Stored::Wkdm(bytes) => wkdm
                .get_or_insert_with(|| Box::new(Scratch::new()))
                .decompress(bytes, buf)
                .map_err(|_| PagerError::Corrupt { page })?,
        }
        Ok(())
    }

    /// `data` compressed with the configured codec, or `None` if that takes more than
    /// `limit` bytes.
    fn compress(&mut self, data: &Page, limit: usize) -> Option<Stored> {
        match self.config.codec {
            Codec::Lz4 => {
                let (out, table) = self.lz4.get_or_insert_with(|| {
                    let out = vec![0u8; get_maximum_output_size(PAGE_SIZE)].into_boxed_slice();
                    (out, Box::new(CompressTable::small()))
                });
                let len = compress_into_with_table(data, out, table)
                    .expect("the output buffer holds lz4's worst case");
                (len <= limit).then(|| Stored::Lz4(out[..len].into()))
            }
            Codec::Wkdm => {
                let scratch = self.wkdm.get_or_insert_with(|| Box::new(Scratch::new()));
                scratch.compress(data, limit).map(|bytes| Stored::Wkdm(bytes.into()))
            }
        }
    }

    /// Expels one entry to the lower cache, the one [`choose_victim`] chooses from the live
    /// entries, oldest first (the oldest clean one, else the oldest; to make room,
    /// `for_space`, only entries that take space). The entry leaves the pool only once the
    /// lower cache has taken it.
    fn expel_one(&mut self, for_space: bool) -> Result<(), PagerError> {
        let pool = &self.pool;
        let live = self.order.iter().filter_map(|&(page, generation)| {
            let entry = pool.get(&page).filter(|e| e.generation == generation)?;
            Some(Candidate { page, dirty: entry.dirty, size: entry.size })
        });
        let page = choose_victim(live, for_space)
            .ok_or(PagerError::BadConfig("the compressed pool is full of nothing"))?;
        // A choice that frees nothing would make `make_room` expel for ever.
        if !pool.get(&page).is_some_and(|e| !for_space || e.size > 0) {
            return Err(PagerError::BadConfig(
                "the expel policy chose a page that is not in the pool, or a zero mark to make room",
            ));
        }
        let entry = &self.pool[&page];
        // A WKdm page goes below as it is, if the layer below takes compressed pages (remote
        // memory): no decompression, and fewer bytes on the wire.
        if let Stored::Wkdm(bytes) = &entry.stored
            && self.lower.put_compressed(page, bytes, entry.dirty)?
        {
            self.remove(page);
            self.stats.expelled += 1;
            self.stats.expelled_compressed += 1;
            return Ok(());
        }
        let entry = &self.pool[&page];
        let mut buf = Box::new([0u8; PAGE_SIZE]);
        let start = self.now();
        Self::restore(&mut self.wkdm, page, &entry.stored, &mut buf)?;
        let dirty = entry.dirty;
        self.stats.codec_ns += self.now() - start;
        self.lower.put(page, &buf, dirty)?;
        self.remove(page);
        self.stats.expelled += 1;
        Ok(())
    }

    /// Expels entries until `size` more bytes fit.
    fn make_room(&mut self, size: usize) -> Result<(), PagerError> {
        while self.used + size > self.config.pool_bytes {
            self.expel_one(true)?;
        }
        Ok(())
    }
}

impl CacheManager for CompressedCache {
    fn put(&mut self, page: usize, data: &Page, dirty: bool) -> Result<(), PagerError> {
        self.stats.puts += 1;
        self.remove(page);
        let stored = if data.iter().all(|&b| b == 0) {
            Stored::Zero
        } else {
            let start = self.now();
            // The most bytes that round up to `max_compressed` or less.
            let limit = self.config.max_compressed / SUB_PAGE * SUB_PAGE;
            let compressed = self.compress(data, limit);
            self.stats.codec_ns += self.now() - start;
            if let Some(stored) = compressed {
                stored
            } else if self.config.incompressible == Incompressible::StoreRaw {
                Stored::Raw(Box::new(*data))
            } else {
                return self.lower.put(page, data, dirty);
            }
        };
        let size = match &stored {
            Stored::Zero => 0,
            Stored::Raw(_) => PAGE_SIZE,
            Stored::Lz4(bytes) | Stored::Wkdm(bytes) => bytes.len().next_multiple_of(SUB_PAGE),
        };
        if size > self.config.pool_bytes {
            return self.lower.put(page, data, dirty);
        }
        self.make_room(size)?;
        match &stored {
            Stored::Zero => self.stats.zero_pages += 1,
            Stored::Raw(_) => self.stats.raw_pages += 1,
            Stored::Lz4(_) | Stored::Wkdm(_) => {
                self.stats.compressed_pages += 1;
                self.stats.compressed_bytes += stored.compressed().map_or(0, <[u8]>::len) as u64;
            }
        }
        self.generation += 1;
        let generation = self.generation;
        self.pool.insert(page, Entry { stored, dirty, generation, size });
        self.stats.peak_pages = self.stats.peak_pages.max(self.pool.len());
        if self.order.len() > 2 * self.pool.len() + 16 {
            let pool = &self.pool;
            self.order.retain(|(p, g)| pool.get(p).is_some_and(|e| e.generation == *g));
        }
        self.order.push_back((page, generation));
        self.used += size;
        Ok(())
    }

    fn fetch(
        &mut self,
        page: usize,
        buf: &mut Page,
        skip: &dyn Fn(usize) -> bool,
    ) -> Result<Fetched, PagerError> {
        self.stats.fetches += 1;
        if let Some(entry) = self.pool.get(&page) {
            let start = self.now();
            Self::restore(&mut self.wkdm, page, &entry.stored, buf)?;
            self.stats.codec_ns += self.now() - start;
            let kind = match entry.stored {
                Stored::Zero => {
                    self.stats.zero_hits += 1;
                    HitKind::Zero
                }
                Stored::Raw(_) => {
                    self.stats.raw_hits += 1;
                    HitKind::Raw
                }
                Stored::Lz4(_) | Stored::Wkdm(_) => HitKind::Compressed,
            };
            let dirty = entry.dirty;
            self.remove(page);
            self.stats.hits += 1;
            return Ok(Fetched { hit: true, found: Found::Pool(kind), dirty });
        }
        self.stats.misses += 1;
        let pool = &self.pool;
        let found = self.lower.fetch(page, buf, &|p| skip(p) || pool.contains_key(&p))?;
        Ok(Fetched { hit: false, ..found })
    }

    fn holds(&self, page: usize) -> bool {
        self.pool.contains_key(&page) || self.lower.holds(page)
    }

    fn flush(&mut self) -> Result<(), PagerError> {
        while !self.pool.is_empty() {
            self.expel_one(false)?;
        }
        self.order.clear();
        self.lower.flush()
    }

    fn resize(&mut self, bytes: usize) -> Result<(), PagerError> {
        self.config.pool_bytes = bytes;
        self.make_room(0)
    }

    fn stats(&self) -> CacheStats {
        CacheStats { used_bytes: self.used, capacity_bytes: self.config.pool_bytes, ..self.stats }
    }

    fn lower(&self) -> Option<&dyn CacheManager> {
        Some(&*self.lower)
    }

    fn swap_space(&self) -> SwapSpace {
        self.lower.swap_space()
    }

    fn disk_stats(&self) -> DiskStats {
        self.lower.disk_stats()
    }

    fn device_writes(&self) -> u64 {
        self.lower.device_writes()
    }

    fn store_stats(&self) -> crate::disk::StoreStats {
        self.lower.store_stats()
    }
}
