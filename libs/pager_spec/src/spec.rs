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
//! - `loans`: `yes` (default) or `no`: whether a page moved to or from the disk lends its
//!   frame to the disk driver (no copy through the block session's data area) or is copied
//!   through the data area (to measure what the loans save: `cargo xtask bench paging`);
//! - `swap`: the swap area's bytes (default 32 MiB), `swap_at`: its byte offset on the disk
//!   (default 0), both whole pages;
//! - `store`: `local` (default) or `remote`: pages go below the caches to the local disk, or
//!   to other nodes' memory through the remote paging client, with the disk as fallback;
//!   `prefetching` and `prefetching-compressed` only with `local` (the thesis prefetches
//!   only from the local disk). With `store=remote` only:
//!   - `mirror`: `none` (default), `server` (the client mirrors each page to a second server)
//!     or `disk` (each page is written to the local disk too);
//!   - `net`: the network session's channel prefix (`NAME-req`, `NAME-resp`), required, not
//!     the same as `disk`;
//!   - `traders`: 1 to 3 traders, `A.B.C.D:PORT` each, `+` between;
//!   - `servers`: 1 to 4 servers tried before asking a trader, the same form (for tests);
//!     `traders` or `servers` or both must be given;
//!   - `spread`: `yes` (default) or `no`: spread pages over several servers, or grow one
//!     server's reservation;
//!   - `netc`: `no` (default) or `yes`: the client compresses each page with WKdm before
//!     sending it (the thesis's `netc`; a page that does not shrink goes whole). Ignored under
//!     a compressed cache, as in the thesis: a WKdm cache's pages go compressed anyway
//!     ([`PagerSpec::netc`]).
//!   - `svqos`, `netqos`: the contract asked of each server's CPU and of its link (the link
//!     time its replies take), `PERIOD/SLICE` or `PERIOD/SLICE/x` with `x` for the server's
//!     slack time beyond the slice, times with a unit `ns`, `us`, `ms` or `s` (default
//!     `10ms/1ms/x` each; [`crate::Qos`]); each server admits a client only within what it
//!     has left of both.
//!
//! `disk` stays required with `store=remote`: it is the fallback and the local mirror. The
//! ten hierarchies of the thesis (Heracles Fig 8.2) are the four `hierarchy` values with
//! `store=local`, and `local` and `compressed` with `store=remote` and each `mirror`
//! ([`crate::Combination`]).

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use abi::PAGE_SIZE;

use crate::store::{Endpoint, MAX_SERVERS, MAX_TRADERS, Mirror, Qos, RemoteSpec, Store};
use crate::{Codec, Combination, Hierarchy, PolicyKind};

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
    /// Whether pages moved to and from the disk lend their frames to the disk driver (else
    /// they are copied through the block session's data area).
    pub loans: bool,
    /// The backing store below the caches.
    pub store: Store,
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

fn yes_no(key: &str, value: &str) -> Result<bool, SpecError> {
    match value {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(err(key, "not yes or no")),
    }
}

fn err(key: &str, reason: &'static str) -> SpecError {
    SpecError { key: key.to_string(), reason }
}

/// Whether `value` is a channel prefix: 1 to 27 bytes of `[a-z0-9-]` (so `NAME-resp` fits a
/// channel name).
fn channel_prefix(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 27
        && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// `A.B.C.D:PORT` endpoints with `+` between, 1 to `most` of them, none twice, no port 0 and
/// no address 0.0.0.0.
fn endpoints(key: &str, value: &str, most: usize) -> Result<Vec<Endpoint>, SpecError> {
    let mut list: Vec<Endpoint> = Vec::new();
    for part in value.split('+') {
        let e = Endpoint::parse(part)
            .filter(|e| e.port != 0 && e.addr != net_interface::frame::Ipv4Addr::UNSPECIFIED)
            .ok_or_else(|| {
                err(key, "not A.B.C.D:PORT endpoints with '+' between (no port 0, no 0.0.0.0)")
            })?;
        if list.contains(&e) {
            return Err(err(key, "names an endpoint twice"));
        }
        list.push(e);
    }
    if list.len() > most {
        return Err(err(
            key,
            if most == MAX_TRADERS { "more than 3 traders" } else { "more than 4 servers" },
        ));
    }
    Ok(list)
}

fn write_endpoints(f: &mut fmt::Formatter<'_>, key: &str, list: &[Endpoint]) -> fmt::Result {
    if list.is_empty() {
        return Ok(());
    }
    write!(f, ",{key}=")?;
    for (i, e) in list.iter().enumerate() {
        if i > 0 {
            f.write_str("+")?;
        }
        write!(f, "{e}")?;
    }
    Ok(())
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
        let mut remote = false;
        let mut mirror = None;
        let mut net = None;
        let (mut traders, mut servers) = (Vec::new(), Vec::new());
        let mut spread = None;
        let mut loans = true;
        let mut netc = None;
        let (mut server_qos, mut net_qos) = (Qos::DEFAULT, Qos::DEFAULT);
        let mut seen: Vec<&str> = Vec::new();
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
                    if !channel_prefix(value) {
                        return Err(err(key, "not a channel prefix of 1 to 27 bytes of [a-z0-9-]"));
                    }
                    disk = Some(value.to_string());
                }
                "store" => {
                    remote = match value {
                        "local" => false,
                        "remote" => true,
                        _ => return Err(err(key, "not local or remote")),
                    }
                }
                "mirror" => {
                    mirror = Some(match value {
                        "none" => Mirror::None,
                        "server" => Mirror::Server,
                        "disk" => Mirror::Disk,
                        _ => return Err(err(key, "not none, server or disk")),
                    })
                }
                "net" => {
                    if !channel_prefix(value) {
                        return Err(err(key, "not a channel prefix of 1 to 27 bytes of [a-z0-9-]"));
                    }
                    net = Some(value.to_string());
                }
                "traders" => traders = endpoints(key, value, MAX_TRADERS)?,
                "servers" => servers = endpoints(key, value, MAX_SERVERS)?,
                "spread" => spread = Some(yes_no(key, value)?),
                "netc" => netc = Some(yes_no(key, value)?),
                "loans" => loans = yes_no(key, value)?,
                "svqos" => server_qos = Qos::parse(value).map_err(|reason| err(key, reason))?,
                "netqos" => net_qos = Qos::parse(value).map_err(|reason| err(key, reason))?,
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
        let store = if remote {
            if hierarchy.name().starts_with("prefetching") {
                return Err(err(
                    "store",
                    "a prefetching hierarchy pages only to the local disk (store=local)",
                ));
            }
            let net = net.ok_or_else(|| err("net", "missing: store=remote needs it"))?;
            if net == disk {
                return Err(err("net", "the same channel prefix as disk"));
            }
            if traders.is_empty() && servers.is_empty() {
                return Err(err("traders", "missing: store=remote needs traders or servers"));
            }
            let (mirror, spread) = (mirror.unwrap_or_default(), spread.unwrap_or(true));
            let netc = netc.unwrap_or(false);
            Store::Remote(RemoteSpec {
                mirror,
                net,
                traders,
                servers,
                spread,
                netc,
                server_qos,
                net_qos,
            })
        } else {
            let only_remote =
                ["mirror", "net", "traders", "servers", "spread", "netc", "svqos", "netqos"];
            if let Some(key) = only_remote.into_iter().find(|k| seen.contains(k)) {
                return Err(err(key, "only with store=remote"));
            }
            Store::Local
        };
        Ok(PagerSpec {
            hierarchy,
            policy,
            frames,
            disk,
            swap_at,
            swap,
            ahead,
            harvest,
            loans,
            store,
        })
    }

    /// Whether the remote paging client compresses the pages it sends itself: `netc=yes`
    /// over remote memory without a compressed cache (the thesis ignores `netc` under one).
    pub fn netc(&self) -> bool {
        match &self.store {
            Store::Remote(r) => r.netc && self.hierarchy.codec().is_none(),
            Store::Local => false,
        }
    }

    /// Which of the thesis's ten hierarchies this is (every spec that parses is one).
    pub fn combination(&self) -> Combination {
        Combination::of(&self.hierarchy, self.store.backing()).unwrap_or(Combination::LocalPaging)
    }
}

impl fmt::Display for PagerSpec {
    /// The spec in the form [`PagerSpec::parse`] reads, every key given but `codec`, `ahead`,
    /// `harvest`, `loans`, `store`, `mirror`, `spread`, `netc`, `svqos` and `netqos` when they
    /// are the default (and the remote keys with `store=local`).
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
        if !self.loans {
            f.write_str(",loans=no")?;
        }
        if let Store::Remote(r) = &self.store {
            f.write_str(",store=remote")?;
            if r.mirror != Mirror::None {
                write!(f, ",mirror={}", r.mirror.name())?;
            }
            write!(f, ",net={}", r.net)?;
            write_endpoints(f, "traders", &r.traders)?;
            write_endpoints(f, "servers", &r.servers)?;
            if !r.spread {
                f.write_str(",spread=no")?;
            }
            if r.netc {
                f.write_str(",netc=yes")?;
            }
            if r.server_qos != Qos::DEFAULT {
                write!(f, ",svqos={}", r.server_qos)?;
            }
            if r.net_qos != Qos::DEFAULT {
                write!(f, ",netqos={}", r.net_qos)?;
            }
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
        assert!(local.loans, "lend frames to the disk unless told not to");
        assert!(!local.to_string().contains("loans"));
        assert_eq!(PagerSpec::parse(&local.to_string()), Ok(local));
        let harvesting = PagerSpec::parse("hierarchy=local,frames=4,disk=d,harvest=16").unwrap();
        assert_eq!(harvesting.harvest, 16);
        assert_eq!(PagerSpec::parse(&harvesting.to_string()), Ok(harvesting));
        let e = PagerSpec::parse("hierarchy=local,frames=4,disk=d,harvest=2000000").unwrap_err();
        assert_eq!(e.key, "harvest");
        let copying = PagerSpec::parse("hierarchy=local,frames=4,disk=d,loans=no").unwrap();
        assert!(!copying.loans);
        assert!(copying.to_string().contains(",loans=no"), "{copying}");
        assert_eq!(PagerSpec::parse(&copying.to_string()), Ok(copying));
        let e = PagerSpec::parse("hierarchy=local,frames=4,disk=d,loans=off").unwrap_err();
        assert_eq!((e.key.as_str(), e.reason), ("loans", "not yes or no"));
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

    const REMOTE: &str = "disk=d,store=remote,net=n,traders=10.0.0.1:7000";

    #[test]
    fn each_of_the_ten_hierarchies_is_spelled_one_way_and_reads_back() {
        let mut seen = alloc::vec::Vec::new();
        for c in Combination::ALL {
            let remote = ",net=n,traders=10.0.0.1:7000+10.0.0.2:7001";
            let extra = if c.parts().1.is_remote() { remote } else { "" };
            let text = alloc::format!("{},frames=8,disk=d{extra}", c.keys());
            let s = PagerSpec::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.combination(), c, "{text}");
            assert_eq!(s.hierarchy.name(), c.parts().0);
            assert_eq!(s.store.backing(), c.parts().1);
            assert_eq!(PagerSpec::parse(&s.to_string()), Ok(s.clone()), "{s}");
            assert!(!seen.contains(&s.to_string()), "{s}");
            seen.push(s.to_string());
            assert_eq!(c.number(), seen.len());
        }
        assert_eq!(Combination::RemoteMirrorDiskCompressed.number(), 10);
        assert_eq!(
            Combination::LocalPrefetching.title(),
            "Local Paging with a Prefetching Non-Compressed Cache"
        );
    }

    #[test]
    fn a_remote_spec_keeps_its_endpoints_and_defaults() {
        let s = PagerSpec::parse(
            "hierarchy=compressed,frames=8,disk=d,store=remote,mirror=server,net=net0,\
             traders=10.0.2.1:7000+10.0.2.2:7000+10.0.2.3:7000,servers=10.0.2.9:7100,spread=no",
        )
        .unwrap();
        let r = s.store.remote().expect("remote");
        assert_eq!(r.mirror, Mirror::Server);
        assert_eq!(r.net, "net0");
        assert_eq!(r.traders.len(), 3);
        assert_eq!(r.traders[2], Endpoint::parse("10.0.2.3:7000").unwrap());
        assert_eq!(r.servers, [Endpoint::parse("10.0.2.9:7100").unwrap()]);
        assert!(!r.spread);
        assert_eq!(PagerSpec::parse(&s.to_string()), Ok(s.clone()));
        let d = PagerSpec::parse(&alloc::format!("hierarchy=local,frames=8,{REMOTE}")).unwrap();
        let r = d.store.remote().unwrap();
        assert_eq!((r.mirror, r.spread, r.servers.len()), (Mirror::None, true, 0));
        assert!(!d.to_string().contains("mirror") && !d.to_string().contains("spread"));
        assert!(!r.netc && !d.netc() && !d.to_string().contains("netc"));
        // netc: the client compresses, but not under a compressed cache (the thesis ignores
        // it there).
        let n = PagerSpec::parse(&alloc::format!("hierarchy=local,frames=8,{REMOTE},netc=yes"))
            .unwrap();
        assert!(n.store.remote().unwrap().netc && n.netc());
        assert!(n.to_string().ends_with(",netc=yes"), "{n}");
        assert_eq!(PagerSpec::parse(&n.to_string()), Ok(n.clone()));
        let text = alloc::format!("hierarchy=compressed,frames=8,{REMOTE},netc=yes");
        let under_cache = PagerSpec::parse(&text).unwrap();
        assert!(under_cache.store.remote().unwrap().netc && !under_cache.netc());
        let servers_only = PagerSpec::parse(
            "hierarchy=local,frames=8,disk=d,store=remote,net=n,servers=1.2.3.4:5",
        )
        .unwrap();
        assert_eq!(servers_only.store.remote().unwrap().traders.len(), 0);
        let local = PagerSpec::parse("hierarchy=local,frames=8,disk=d,store=local").unwrap();
        assert_eq!(local.store, Store::Local);
        assert!(!local.to_string().contains("store"));
    }

    #[test]
    fn a_remote_spec_carries_its_contracts_with_the_servers() {
        let s = PagerSpec::parse(&alloc::format!(
            "hierarchy=local,frames=8,{REMOTE},svqos=20ms/2ms,netqos=5000us/1500us/x"
        ))
        .unwrap();
        let r = s.store.remote().unwrap();
        assert_eq!(r.server_qos, Qos { period_ns: 20_000_000, slice_ns: 2_000_000, extra: false });
        assert_eq!(r.net_qos, Qos { period_ns: 5_000_000, slice_ns: 1_500_000, extra: true });
        assert!(s.to_string().contains(",svqos=20ms/2ms,netqos=5ms/1500us/x"), "{s}");
        assert_eq!(PagerSpec::parse(&s.to_string()), Ok(s.clone()));
        // Left out: the default, and not written back.
        let d = PagerSpec::parse(&alloc::format!("hierarchy=local,frames=8,{REMOTE}")).unwrap();
        let r = d.store.remote().unwrap();
        assert_eq!((r.server_qos, r.net_qos), (Qos::DEFAULT, Qos::DEFAULT));
        let given = alloc::format!("hierarchy=local,frames=8,{REMOTE},svqos=10ms/1ms/x");
        assert_eq!(PagerSpec::parse(&given).unwrap(), d);
        assert!(!d.to_string().contains("qos"));
        // Slack time only, and the edges.
        for (text, want) in [
            ("0ns/0ns/x", None),
            ("1us/0s/x", Some(Qos { period_ns: 1_000, slice_ns: 0, extra: true })),
            (
                "10s/10s",
                Some(Qos { period_ns: 10_000_000_000, slice_ns: 10_000_000_000, extra: false }),
            ),
            ("999ns/1ns", None),
            ("11s/1s", None),
        ] {
            assert_eq!(Qos::parse(text).ok(), want, "{text}");
        }
    }

    #[test]
    fn a_bad_remote_spec_names_its_key() {
        let bad = [
            // Prefetching only to the local disk.
            (alloc::format!("hierarchy=prefetching,frames=4,{REMOTE}"), "store"),
            (alloc::format!("hierarchy=prefetching-compressed,frames=4,{REMOTE}"), "store"),
            // Remote keys without a remote store.
            ("hierarchy=local,frames=4,disk=d,mirror=disk".into(), "mirror"),
            ("hierarchy=local,frames=4,disk=d,store=local,mirror=none".into(), "mirror"),
            ("hierarchy=local,frames=4,disk=d,net=n".into(), "net"),
            ("hierarchy=local,frames=4,disk=d,traders=1.2.3.4:5".into(), "traders"),
            ("hierarchy=local,frames=4,disk=d,servers=1.2.3.4:5".into(), "servers"),
            ("hierarchy=local,frames=4,disk=d,spread=no".into(), "spread"),
            ("hierarchy=local,frames=4,disk=d,netc=yes".into(), "netc"),
            // A remote store without its network or its traders and servers.
            ("hierarchy=local,frames=4,disk=d,store=remote,traders=1.2.3.4:5".into(), "net"),
            ("hierarchy=local,frames=4,disk=d,store=remote,net=n".into(), "traders"),
            ("hierarchy=local,frames=4,disk=d,store=remote,net=d,servers=1.2.3.4:5".into(), "net"),
            ("hierarchy=local,frames=4,store=remote,net=n,servers=1.2.3.4:5".into(), "disk"),
            // Bad values.
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},store=far"), "store"),
            ("hierarchy=local,frames=4,disk=d,store=far".into(), "store"),
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},mirror=tape"), "mirror"),
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},spread=maybe"), "spread"),
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},netc=lz4"), "netc"),
            ("hierarchy=local,frames=4,disk=d,svqos=10ms/1ms".into(), "svqos"),
            ("hierarchy=local,frames=4,disk=d,netqos=10ms/1ms".into(), "netqos"),
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},svqos=10ms"), "svqos"),
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},svqos=10/1"), "svqos"),
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},svqos=10ms/1ms/y"), "svqos"),
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},svqos=10ms/1ms/x/x"), "svqos"),
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},netqos=1ms/2ms"), "netqos"),
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},netqos=10ms/0ms"), "netqos"),
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},netqos=20s/1s/x"), "netqos"),
            (alloc::format!("hierarchy=local,frames=4,{REMOTE},netqos=-1ms/1ms"), "netqos"),
            ("hierarchy=local,frames=4,disk=d,store=remote,net=N,servers=1.2.3.4:5".into(), "net"),
            // Bad endpoints, and too many.
            (
                "hierarchy=local,frames=4,disk=d,store=remote,net=n,traders=1.2.3:5".into(),
                "traders",
            ),
            (
                "hierarchy=local,frames=4,disk=d,store=remote,net=n,traders=1.2.3.4".into(),
                "traders",
            ),
            (
                "hierarchy=local,frames=4,disk=d,store=remote,net=n,traders=1.2.3.4:0".into(),
                "traders",
            ),
            (
                "hierarchy=local,frames=4,disk=d,store=remote,net=n,traders=0.0.0.0:7".into(),
                "traders",
            ),
            (
                "hierarchy=local,frames=4,disk=d,store=remote,net=n,traders=1.2.3.256:7".into(),
                "traders",
            ),
            (
                "hierarchy=local,frames=4,disk=d,store=remote,net=n,traders=1.2.3.4:7+".into(),
                "traders",
            ),
            ("hierarchy=local,frames=4,disk=d,store=remote,net=n,traders=".into(), "traders"),
            (
                "hierarchy=local,frames=4,disk=d,store=remote,net=n,servers=1.1.1.1:1+1.1.1.1:1"
                    .into(),
                "servers",
            ),
            (
                "hierarchy=local,frames=4,disk=d,store=remote,net=n,\
                 traders=1.1.1.1:1+1.1.1.2:1+1.1.1.3:1+1.1.1.4:1"
                    .into(),
                "traders",
            ),
            (
                "hierarchy=local,frames=4,disk=d,store=remote,net=n,\
                 servers=1.1.1.1:1+1.1.1.2:1+1.1.1.3:1+1.1.1.4:1+1.1.1.5:1"
                    .into(),
                "servers",
            ),
        ];
        for (text, key) in bad {
            let e = PagerSpec::parse(&text).unwrap_err();
            assert_eq!(e.key, key, "{text}: {e}");
        }
        let e = PagerSpec::parse(&alloc::format!("hierarchy=prefetching,frames=4,{REMOTE}"));
        assert!(e.unwrap_err().reason.contains("local disk"));
        let e = PagerSpec::parse(
            "hierarchy=local,frames=4,disk=d,store=remote,net=n,\
             traders=1.1.1.1:1+1.1.1.2:1+1.1.1.3:1+1.1.1.4:1",
        );
        assert_eq!(e.unwrap_err().reason, "more than 3 traders");
    }
}
