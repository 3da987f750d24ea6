//! [`PagerSpec`]: a paged stretch's hierarchy, policy, frames and swap area as one line of
//! `key=value` pairs, the form a manifest's `pager = { ... }` takes on its way to the domain
//! (`--pager` in the domain's arguments) and what an application may write itself. The host
//! checks a manifest's spec with the same parser the domain uses, so a bad key is reported
//! before anything boots.
//!
//! Keys (all optional but `hierarchy`, `frames` and `disk`):
//! - `hierarchy`: `local`, `compressed`, `prefetching-compressed` or `prefetching`;
//! - `frames`: frames to page into (guaranteed first, then optimistic);
//! - `cache`: the compressed pool's bytes (default a quarter of the frames' bytes);
//! - `codec`: the compressed pool's compressor, `lz4` (default) or `wkdm`; only for the
//!   hierarchies with a compressed pool;
//! - `evict`, `fetch`: the eviction and fetch areas' pages (default 8 each);
//! - `policy`: `clock` (default) or `lru`;
//! - `disk`: the block session's channel prefix (`NAME-req`, `NAME-resp`);
//! - `ahead`: pages evicted at once when no frame is free (default 1): the others' frames
//!   serve the next faults, which then skip eviction (and compression);
//! - `harvest`: evictions between two harvests of the hardware's accessed bits for the
//!   replacement policy (default 0, never: the policy hears of faults only, so the clock evicts
//!   nearly in FIFO order, as the thesis's did, and pages evicted together are the program's
//!   neighbours, which friends need);
//! - `swap`: the swap area's bytes (default 32 MiB), `swap_at`: its byte offset on the disk
//!   (default 0), both whole pages.

use alloc::string::{String, ToString};
use core::fmt;

use abi::PAGE_SIZE;

use crate::{Codec, Hierarchy, PolicyKind};

/// A paged stretch's configuration; see the [module](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PagerSpec {
    /// The hierarchy, with its sizes.
    pub hierarchy: Hierarchy,
    /// The replacement policy.
    pub policy: PolicyKind,
    /// Frames to page into.
    pub frames: usize,
    /// The block session's channel prefix.
    pub disk: String,
    /// The swap area's offset on the disk, bytes.
    pub swap_at: u64,
    /// The swap area's length, bytes.
    pub swap: u64,
    /// Pages evicted at once when no frame is free (the first takes the fault's frame, the
    /// others are freed ahead of the next faults).
    pub ahead: usize,
    /// Evictions between two harvests of the accessed bits (0: never).
    pub harvest: usize,
}

/// What is wrong with a spec: the key (or the pair, if it has no `=`) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// The key at fault.
    pub key: String,
    /// Why.
    pub reason: &'static str,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pager key `{}`: {}", self.key, self.reason)
    }
}

/// The default swap area: 32 MiB.
pub const DEFAULT_SWAP: u64 = 32 << 20;
/// The default eviction and fetch areas, pages.
pub const DEFAULT_AREA_PAGES: usize = 8;
/// The most frames a spec may ask for (4 GiB of pages).
pub const MAX_FRAMES: usize = 1 << 20;
/// The most pages an eviction or fetch area may have.
pub const MAX_AREA_PAGES: usize = 1024;

fn number(key: &str, value: &str) -> Result<u64, SpecError> {
    value.parse::<u64>().map_err(|_| SpecError {
        key: key.to_string(),
        reason: "not a whole number (bytes or pages, no unit)",
    })
}

fn err(key: &str, reason: &'static str) -> SpecError {
    SpecError { key: key.to_string(), reason }
}

impl PagerSpec {
    /// Parses `key=value` pairs separated by commas, checking every value.
    pub fn parse(text: &str) -> Result<PagerSpec, SpecError> {
        let mut hierarchy = None;
        let mut policy = PolicyKind::Clock;
        let mut frames = None;
        let mut cache = None;
        let mut codec = None;
        let (mut evict, mut fetch) = (DEFAULT_AREA_PAGES, DEFAULT_AREA_PAGES);
        let mut disk = None;
        let (mut swap_at, mut swap) = (0u64, DEFAULT_SWAP);
        let mut ahead = 1;
        let mut harvest = 0;
        let mut seen: alloc::vec::Vec<&str> = alloc::vec::Vec::new();
        for pair in text.split(',').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| err(pair, "not key=value"))?;
            if seen.contains(&key) {
                return Err(err(key, "given twice"));
            }
            seen.push(key);
            match key {
                "hierarchy" => {
                    hierarchy = Some(match value {
                        "local" | "compressed" | "prefetching-compressed" | "prefetching" => value,
                        _ => {
                            return Err(err(
                                key,
                                "not local, compressed, prefetching-compressed or prefetching",
                            ));
                        }
                    })
                }
                "policy" => {
                    policy = match value {
                        "clock" => PolicyKind::Clock,
                        "lru" => PolicyKind::Lru,
                        _ => return Err(err(key, "not clock or lru")),
                    }
                }
                "codec" => {
                    codec = Some(match value {
                        "lz4" => Codec::Lz4,
                        "wkdm" => Codec::Wkdm,
                        _ => return Err(err(key, "not lz4 or wkdm")),
                    })
                }
                "frames" => frames = Some(number(key, value)? as usize),
                "cache" => cache = Some(number(key, value)? as usize),
                "evict" => evict = number(key, value)? as usize,
                "fetch" => fetch = number(key, value)? as usize,
                "disk" => {
                    let ok = !value.is_empty()
                        && value.len() <= 27
                        && value
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
                    if !ok {
                        return Err(err(key, "not a channel prefix of 1 to 27 bytes of [a-z0-9-]"));
                    }
                    disk = Some(value.to_string());
                }
                "swap" => swap = number(key, value)?,
                "swap_at" => swap_at = number(key, value)?,
                "ahead" => ahead = number(key, value)? as usize,
                "harvest" => harvest = number(key, value)? as usize,
                _ => return Err(err(key, "unknown key")),
            }
        }
        let frames = frames.ok_or_else(|| err("frames", "missing"))?;
        if frames == 0 || frames > MAX_FRAMES {
            return Err(err("frames", "must be 1 to 1048576"));
        }
        for (key, pages) in [("evict", evict), ("fetch", fetch), ("ahead", ahead)] {
            if pages == 0 || pages > MAX_AREA_PAGES {
                return Err(err(key, "must be 1 to 1024 pages"));
            }
        }
        if harvest > MAX_FRAMES {
            return Err(err("harvest", "must be 0 (never) to 1048576 evictions"));
        }
        let cache = cache.unwrap_or(frames * PAGE_SIZE / 4);
        if cache < PAGE_SIZE {
            return Err(err("cache", "must be at least one page (4096 bytes)"));
        }
        let page = PAGE_SIZE as u64;
        if swap < page || !swap.is_multiple_of(page) {
            return Err(err("swap", "must be a non-zero multiple of 4096 bytes"));
        }
        if !swap_at.is_multiple_of(page) || swap_at.checked_add(swap).is_none() {
            return Err(err("swap_at", "must be a multiple of 4096 bytes"));
        }
        let hierarchy = hierarchy.ok_or_else(|| err("hierarchy", "missing"))?;
        if codec.is_some() && !hierarchy.contains("compressed") {
            return Err(err("codec", "only for a hierarchy with a compressed cache"));
        }
        let codec = codec.unwrap_or_default();
        let hierarchy = match hierarchy {
            "local" => Hierarchy::LocalPaging,
            "compressed" => Hierarchy::CompressedCache { pool_bytes: cache, codec },
            "prefetching-compressed" => Hierarchy::PrefetchingCompressedCache {
                pool_bytes: cache,
                codec,
                evict_pages: evict,
                fetch_pages: fetch,
            },
            _ => Hierarchy::PrefetchingCache { evict_pages: evict, fetch_pages: fetch },
        };
        let disk = disk.ok_or_else(|| err("disk", "missing"))?;
        Ok(PagerSpec { hierarchy, policy, frames, disk, swap_at, swap, ahead, harvest })
    }
}

impl fmt::Display for PagerSpec {
    /// The spec in the form [`PagerSpec::parse`] reads, every key given but `codec`, `ahead`
    /// and `harvest` when they are the default.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hierarchy={},frames={}", self.hierarchy.name(), self.frames)?;
        match self.hierarchy {
            Hierarchy::LocalPaging => {}
            Hierarchy::CompressedCache { pool_bytes, .. } => write!(f, ",cache={pool_bytes}")?,
            Hierarchy::PrefetchingCompressedCache {
                pool_bytes, evict_pages, fetch_pages, ..
            } => write!(f, ",cache={pool_bytes},evict={evict_pages},fetch={fetch_pages}")?,
            Hierarchy::PrefetchingCache { evict_pages, fetch_pages } => {
                write!(f, ",evict={evict_pages},fetch={fetch_pages}")?
            }
        }
        if let Some(codec) = self.hierarchy.codec().filter(|c| *c != Codec::default()) {
            write!(f, ",codec={}", codec.name())?;
        }
        let policy = match self.policy {
            PolicyKind::Clock => "clock",
            PolicyKind::Lru => "lru",
        };
        write!(
            f,
            ",policy={policy},disk={},swap_at={},swap={}",
            self.disk, self.swap_at, self.swap
        )?;
        if self.ahead != 1 {
            write!(f, ",ahead={}", self.ahead)?;
        }
        if self.harvest != 0 {
            write!(f, ",harvest={}", self.harvest)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_reads_back_what_it_writes() {
        let s =
            PagerSpec::parse("hierarchy=prefetching-compressed,frames=256,cache=131072,disk=swap")
                .unwrap();
        assert_eq!(
            s.hierarchy,
            Hierarchy::PrefetchingCompressedCache {
                pool_bytes: 131072,
                codec: Codec::Lz4,
                evict_pages: 8,
                fetch_pages: 8
            }
        );
        assert_eq!(PagerSpec::parse(&s.to_string()), Ok(s.clone()));
        assert!(!s.to_string().contains("codec"));
        let local = PagerSpec::parse("hierarchy=local,frames=4,disk=d,policy=lru").unwrap();
        assert_eq!((local.policy, local.swap), (PolicyKind::Lru, DEFAULT_SWAP));
        assert_eq!(local.harvest, 0, "never harvest unless asked");
        assert!(!local.to_string().contains("harvest"));
        assert_eq!(PagerSpec::parse(&local.to_string()), Ok(local));
        let harvesting = PagerSpec::parse("hierarchy=local,frames=4,disk=d,harvest=16").unwrap();
        assert_eq!(harvesting.harvest, 16);
        assert_eq!(PagerSpec::parse(&harvesting.to_string()), Ok(harvesting));
        let e = PagerSpec::parse("hierarchy=local,frames=4,disk=d,harvest=2000000").unwrap_err();
        assert_eq!(e.key, "harvest");
    }

    #[test]
    fn a_spec_chooses_the_codec() {
        for (text, want) in [
            ("hierarchy=compressed,frames=8,disk=d", Codec::Lz4),
            ("hierarchy=compressed,frames=8,disk=d,codec=lz4", Codec::Lz4),
            ("hierarchy=compressed,frames=8,disk=d,codec=wkdm", Codec::Wkdm),
            ("hierarchy=prefetching-compressed,frames=8,disk=d,codec=wkdm", Codec::Wkdm),
        ] {
            let s = PagerSpec::parse(text).unwrap();
            assert_eq!(s.hierarchy.codec(), Some(want), "{text}");
            assert_eq!(s.to_string().contains("codec=wkdm"), want == Codec::Wkdm, "{s}");
            assert_eq!(PagerSpec::parse(&s.to_string()), Ok(s));
        }
        let s = PagerSpec::parse("codec=wkdm,hierarchy=compressed,frames=8,disk=d").unwrap();
        assert_eq!(
            s.hierarchy,
            Hierarchy::CompressedCache { pool_bytes: 8192, codec: Codec::Wkdm }
        );
    }

    #[test]
    fn a_bad_spec_names_its_key() {
        let bad = [
            ("hierarchy=fast,frames=4,disk=d", "hierarchy"),
            ("hierarchy=local,disk=d", "frames"),
            ("hierarchy=local,frames=0,disk=d", "frames"),
            ("hierarchy=local,frames=4", "disk"),
            ("hierarchy=local,frames=4,disk=Swap", "disk"),
            ("hierarchy=local,frames=4,disk=d,size=3", "size"),
            ("hierarchy=local,frames=4,disk=d,frames=5", "frames"),
            ("hierarchy=local,frames=4,disk=d,swap=100", "swap"),
            ("hierarchy=local,frames=4,disk=d,swap_at=7", "swap_at"),
            ("hierarchy=compressed,frames=4,disk=d,cache=10", "cache"),
            ("hierarchy=prefetching,frames=4,disk=d,evict=0", "evict"),
            ("hierarchy=local,frames=4,disk=d,policy=random", "policy"),
            ("hierarchy=local,frames=4x,disk=d", "frames"),
            ("hierarchy=compressed,frames=4,disk=d,codec=zstd", "codec"),
            ("hierarchy=compressed,frames=4,disk=d,codec=", "codec"),
            ("hierarchy=local,frames=4,disk=d,codec=wkdm", "codec"),
            ("hierarchy=prefetching,frames=4,disk=d,codec=lz4", "codec"),
            ("hierarchy=compressed,frames=4,disk=d,codec=lz4,codec=wkdm", "codec"),
            ("hierarchy=local,frames,disk=d", "frames"),
        ];
        for (text, key) in bad {
            let e = PagerSpec::parse(text).unwrap_err();
            assert_eq!(e.key, key, "{text}: {e}");
        }
    }
}
