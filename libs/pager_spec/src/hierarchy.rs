//! [`Hierarchy`]: the cache part of the thesis's paging hierarchies (Heracles Fig 8.2: the
//! four local ones, and of those `local` and `compressed` over remote memory too, with the
//! [`crate::Store`] beside it) as plain data, with the compressed pool's [`Codec`] and the
//! replacement [`PolicyKind`], so a manifest key or a few lines of code choose one; the pager
//! builds them.

/// The compressor of a compressed cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Codec {
    /// lz4's block format (`lz4_flex`): finds repeats anywhere in the page, so it shrinks text
    /// and repeated structures well, at tens of thousands of instructions a page.
    #[default]
    Lz4,
    /// WKdm (Wilson and Kaplan's word-based compressor): word by word against 16 recent words,
    /// so it shrinks small integers and pointers (words sharing high bits) but not text, at a
    /// few instructions a word.
    Wkdm,
}

impl Codec {
    /// Its name, as a pager spec spells it.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Lz4 => "lz4",
            Codec::Wkdm => "wkdm",
        }
    }
}

/// Which built-in replacement policy to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PolicyKind {
    /// The second-chance FIFO clock.
    #[default]
    Clock,
    /// Least recently used.
    Lru,
}

/// A paging hierarchy's caches and disk manager, over whichever backing store
/// ([`crate::Backing`]) the spec chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    /// Local paging: no cache, a basic disk manager.
    LocalPaging,
    /// Local paging with a compressed cache of `pool_bytes`, a basic disk manager.
    CompressedCache {
        /// The compressed pool's size in bytes.
        pool_bytes: usize,
        /// The pool's compressor.
        codec: Codec,
    },
    /// Local paging with a prefetching compressed cache: the extended compressed cache over
    /// a prefetching disk manager.
    PrefetchingCompressedCache {
        /// The compressed pool's size in bytes.
        pool_bytes: usize,
        /// The pool's compressor.
        codec: Codec,
        /// Eviction area, pages (written as one group).
        evict_pages: usize,
        /// Fetch area, pages (read with a miss).
        fetch_pages: usize,
    },
    /// Local paging with a prefetching non-compressed cache: the basic cache's eviction and
    /// fetch areas over a prefetching disk manager.
    PrefetchingCache {
        /// Eviction area, pages.
        evict_pages: usize,
        /// Fetch area, pages.
        fetch_pages: usize,
    },
}

impl Hierarchy {
    /// The compressed pool's codec, if it has a compressed pool.
    pub fn codec(&self) -> Option<Codec> {
        match *self {
            Hierarchy::CompressedCache { codec, .. }
            | Hierarchy::PrefetchingCompressedCache { codec, .. } => Some(codec),
            Hierarchy::LocalPaging | Hierarchy::PrefetchingCache { .. } => None,
        }
    }

    /// Its name, as a manifest would spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Hierarchy::LocalPaging => "local",
            Hierarchy::CompressedCache { .. } => "compressed",
            Hierarchy::PrefetchingCompressedCache { .. } => "prefetching-compressed",
            Hierarchy::PrefetchingCache { .. } => "prefetching",
        }
    }
}
