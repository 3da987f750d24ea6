//! Host tests of the backing store manager: each of the thesis's ten hierarchies (built from
//! its spec's keys) keeps every byte of a seeded random run; every server lost with a disk
//! mirror, or a mirror server, loses nothing; without a mirror exactly the pages held only
//! remotely are lost; a revocation with no replacement brings the pages back to the disk and
//! loses nothing; with no server the store pages locally; a stale copy is never read.

use alloc::boxed::Box;
use alloc::collections::BTreeSet;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;

use super::{FRAMES, LostPages, PAGES, Paged, Rng, checksum, contents, pattern, verify_all};
use crate::backing::{
    Backing, BackingStore, Copies, DEFAULT_POPULATE_PER_CALL, DEFAULT_RETRY_EVERY, Mirror, Route,
};
use crate::block::MemBlockDevice;
use crate::cache::Codec;
use crate::disk::{BasicDisk, DiskManager, Location};
use crate::error::PagerError;
use crate::frames::MemFrames;
use crate::hierarchy::{Below, BuildHierarchy, Combination, Hierarchy};
use crate::remote::{MemRemoteStore, RemoteError, RemoteNotice, RemoteStats, RemoteStore};
use crate::replace::{BuildPolicy, PolicyKind};
use crate::spec::PagerSpec;
use crate::{PAGE_SIZE, Page};

/// A remote store the test keeps a handle on, to inject faults and look inside while a pager
/// owns it. `keep_freed` makes it ignore frees, so stale copies stay for a read to find.
#[derive(Clone)]
struct Shared(Rc<RefCell<MemRemoteStore>>, Rc<core::cell::Cell<bool>>);

impl Shared {
    fn new(store: MemRemoteStore) -> Shared {
        Shared(Rc::new(RefCell::new(store)), Rc::default())
    }

    fn holds(&self, page: usize) -> bool {
        self.0.borrow().holds(page)
    }
}

impl RemoteStore for Shared {
    fn write(&mut self, page: usize, data: &Page) -> Result<(), RemoteError> {
        self.0.borrow_mut().write(page, data)
    }
    fn write_compressed(&mut self, page: usize, wkdm: &[u8]) -> Result<bool, RemoteError> {
        self.0.borrow_mut().write_compressed(page, wkdm)
    }
    fn read(&mut self, page: usize, buf: &mut Page) -> Result<(), RemoteError> {
        self.0.borrow_mut().read(page, buf)
    }
    fn holds(&self, page: usize) -> bool {
        self.0.borrow().holds(page)
    }
    fn free(&mut self, page: usize) {
        if !self.1.get() {
            self.0.borrow_mut().free(page)
        }
    }
    fn notice(&mut self) -> Option<RemoteNotice> {
        self.0.borrow_mut().notice()
    }
    fn release(&mut self) {
        self.0.borrow_mut().release()
    }
    fn stats(&self) -> RemoteStats {
        self.0.borrow().stats()
    }
}

/// The spec of combination `c`: its keys, with the sizes the other tests use.
fn spec_of(c: Combination) -> PagerSpec {
    let remote = if c.parts().1.is_remote() { ",net=n,servers=10.0.0.2:7000" } else { "" };
    let text = alloc::format!(
        "{},frames={FRAMES},cache={},evict=4,fetch=4,disk=d{remote}",
        c.keys(),
        8 * PAGE_SIZE
    );
    let text = match c.parts().0 {
        "local" => text.replace(&alloc::format!(",cache={}", 8 * PAGE_SIZE), ""),
        _ => text,
    };
    let text = match c.parts().0 {
        "local" | "compressed" => text.replace(",evict=4,fetch=4", ""),
        _ => text,
    };
    let spec = PagerSpec::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(spec.combination(), c);
    spec
}

/// A remote store for a spec's backing: mirrored to a second server with `mirror=server`.
fn store_for(backing: Backing) -> MemRemoteStore {
    match backing.mirror() {
        Mirror::Server => MemRemoteStore::mirrored(),
        Mirror::None | Mirror::Disk => MemRemoteStore::new(),
    }
}

/// A pager for combination `c` over `remote` (for a remote one) and a swap area of twice the
/// stretch.
fn pager_of(c: Combination, remote: &Shared, app: Option<LostPages>) -> Paged<MemFrames> {
    let spec = spec_of(c);
    let backing = spec.store.backing();
    let below = match backing {
        Backing::Local => Below::local(),
        _ => Below::remote(backing, Some(Box::new(remote.clone()))),
    };
    let app: Box<dyn crate::app::AppHandler> = match app {
        Some(a) => Box::new(a),
        None => Box::new(crate::app::NoAppHandler),
    };
    let pager = spec
        .hierarchy
        .build_over(
            FRAMES,
            MemBlockDevice::with_pages(2 * PAGES),
            below,
            PAGES,
            PolicyKind::Clock.build(),
            app,
        )
        .expect("pager");
    Paged::new(pager, MemFrames::new(FRAMES))
}

/// The remote combinations, with the compressed ones.
fn remote_combinations() -> impl Iterator<Item = Combination> {
    Combination::ALL.into_iter().filter(|c| c.parts().1.is_remote())
}

/// `steps` seeded reads and writes on `shadow`, checking every byte read.
fn run(p: &mut Paged<MemFrames>, shadow: &mut [Box<Page>], seed: u64, steps: usize) {
    let mut rng = Rng::new(seed);
    for _ in 0..steps {
        let page =
            if rng.below(4) == 0 { rng.below(PAGES) } else { (rng.below(FRAMES * 2)) % PAGES };
        let write = rng.below(3) == 0;
        let frame = p.fault(page, write).expect("fault");
        if write {
            contents(&mut rng, &mut shadow[page]);
            p.frames_mut().frame_mut(frame).copy_from_slice(&shadow[page][..]);
        } else {
            let got = checksum(p.frames().frame(frame));
            assert_eq!(got, checksum(&shadow[page][..]), "page {page}");
        }
    }
}

fn zeroed_shadow() -> Vec<Box<Page>> {
    (0..PAGES).map(|_| Box::new([0u8; PAGE_SIZE])).collect()
}

#[test]
fn each_of_the_ten_hierarchies_keeps_every_byte() {
    for c in Combination::ALL {
        let spec = spec_of(c);
        let remote = Shared::new(store_for(spec.store.backing()));
        let mut p = pager_of(c, &remote, None);
        let mut shadow = zeroed_shadow();
        run(&mut p, &mut shadow, 11, 4000);
        verify_all(&mut p, &shadow);
        p.flush_cache().expect("flush");
        verify_all(&mut p, &shadow);
        let s = p.stats();
        let st = s.store;
        let name = c.title();
        assert!(s.evictions > 0 && s.lost_pages == 0, "{name}: {s:?}");
        match spec.store.backing() {
            Backing::Local => {
                assert_eq!((st.remote_writes, st.remote_reads), (0, 0), "{name}: {st:?}");
                assert!(s.disk.device_writes > 0 && s.disk.device_reads > 0, "{name}: {s:?}");
            }
            Backing::Remote { mirror } => {
                assert!(st.remote_writes > 0 && st.remote_reads > 0, "{name}: {st:?}");
                assert_eq!((st.fallbacks, st.lost_remote), (0, 0), "{name}: {st:?}");
                assert!(st.remote_now, "{name}: {st:?}");
                // Nothing is read from the disk; it is written only as the mirror.
                assert_eq!((s.disk.device_reads, st.local_reads), (0, 0), "{name}: {s:?}");
                let r = remote.0.borrow().stats();
                assert_eq!(r.pages_read, st.remote_reads, "{name}");
                match mirror {
                    Mirror::Disk => {
                        assert_eq!(st.mirror_writes, st.remote_writes, "{name}: {st:?}");
                        assert_eq!(s.disk.pages_written, st.remote_writes, "{name}: {s:?}");
                    }
                    Mirror::None | Mirror::Server => {
                        assert_eq!(s.disk.device_writes, 0, "{name}: {s:?}");
                    }
                }
                // A mirror server holds a second copy of every page written.
                let copies = if mirror == Mirror::Server { 2 } else { 1 };
                assert_eq!(r.pages_written, copies * st.remote_writes, "{name}");
            }
        }
    }
}

/// A WKdm compressed cache over remote memory that takes compressed pages: its dirty pages go
/// below compressed, never decompressed first (every one the pool expelled dirty, but with
/// `mirror=disk`, where the disk needs whole pages), and every byte comes back.
#[test]
fn a_wkdm_cache_over_remote_memory_sends_its_pages_compressed_and_keeps_every_byte() {
    for c in remote_combinations().filter(|c| c.parts().0 == "compressed") {
        let mut spec = spec_of(c);
        let Hierarchy::CompressedCache { codec, .. } = &mut spec.hierarchy else { panic!() };
        *codec = Codec::Wkdm;
        let backing = spec.store.backing();
        let remote = Shared::new(store_for(backing).taking_compressed());
        let below = Below::remote(backing, Some(Box::new(remote.clone())));
        let pager = spec
            .hierarchy
            .build_over(
                FRAMES,
                MemBlockDevice::with_pages(2 * PAGES),
                below,
                PAGES,
                PolicyKind::Clock.build(),
                Box::new(crate::app::NoAppHandler),
            )
            .expect("pager");
        let mut p = Paged::new(pager, MemFrames::new(FRAMES));
        let mut shadow = zeroed_shadow();
        run(&mut p, &mut shadow, 12, 4000);
        verify_all(&mut p, &shadow);
        p.flush_cache().expect("flush");
        verify_all(&mut p, &shadow);
        let s = p.stats();
        let (st, r, name) = (s.store, remote.0.borrow().stats(), c.title());
        assert_eq!((s.lost_pages, st.fallbacks), (0, 0), "{name}: {s:?}");
        assert_eq!(r.compressed_writes, st.compressed_writes, "{name}: {st:?}");
        assert_eq!(s.cache.expelled_compressed, st.compressed_writes, "{name}: {s:?}");
        if backing.mirror() == Mirror::Disk {
            assert_eq!(st.compressed_writes, 0, "{name}: {st:?}");
        } else {
            // The pages the pool expelled compressed went so (the others it held raw).
            assert!(st.compressed_writes > 0, "{name}: {s:?}");
            assert!(r.page_bytes_written < r.pages_written * PAGE_SIZE as u64, "{name}: {r:?}");
        }
    }
}

/// A compressed page the remote store fails goes to the disk whole, and nothing is lost.
#[test]
fn a_compressed_page_the_remote_store_fails_goes_to_the_disk_whole() {
    let remote = Shared::new(MemRemoteStore::new().taking_compressed());
    let mut s = store(Mirror::None, &remote);
    // Small integers: WKdm's partial matches.
    let mut page = Box::new([0u8; PAGE_SIZE]);
    for (i, w) in page.chunks_exact_mut(4).enumerate() {
        w.copy_from_slice(&(i as u32 % 700).to_le_bytes());
    }
    let mut scratch = crate::cache::wkdm::Scratch::new();
    let wkdm = scratch.compress(&page, PAGE_SIZE - 1).expect("a pattern compresses").to_vec();
    assert_eq!(s.write_compressed(5, &wkdm), Ok(true));
    assert_eq!((s.copies(5), s.store_stats().compressed_writes), (Some(Copies::Remote), 1));
    assert!(read(&mut s, 5).unwrap() == page);
    remote.0.borrow_mut().fail_writes(1, RemoteError::Unreachable);
    // Refused, so the caller writes the page whole: to the disk, the route falling back.
    assert_eq!(s.write_compressed(5, &wkdm), Ok(false));
    assert!(matches!(s.route(), Route::Fallback { .. }));
    s.write_group(&[(5, &page)]).unwrap();
    assert_eq!(s.copies(5), Some(Copies::Local));
    assert!(read(&mut s, 5).unwrap() == page);
    // While falling back, compressed pages are refused (the disk takes whole pages).
    assert_eq!(s.write_compressed(6, &wkdm), Ok(false));
    assert_eq!(s.store_stats().fallbacks, 1);
}

#[test]
fn every_server_lost_with_a_mirror_loses_nothing() {
    for c in remote_combinations().filter(|c| c.parts().1.mirror() != Mirror::None) {
        let spec = spec_of(c);
        let remote = Shared::new(store_for(spec.store.backing()));
        let mut p = pager_of(c, &remote, None);
        let mut shadow = zeroed_shadow();
        run(&mut p, &mut shadow, 3, 2000);
        let remote_reads = p.stats().store.remote_reads;
        let mirror = spec.store.backing().mirror();
        match mirror {
            Mirror::Disk => remote.0.borrow_mut().lose_servers_after(0),
            _ => remote.0.borrow_mut().lose_primary_after(0),
        }
        run(&mut p, &mut shadow, 4, 2000);
        verify_all(&mut p, &shadow);
        p.flush_cache().expect("flush");
        verify_all(&mut p, &shadow);
        let s = p.stats();
        assert_eq!(s.lost_pages, 0, "{}: {s:?}", c.title());
        assert!(p.lost_pages().is_empty());
        if mirror == Mirror::Disk {
            // Every page comes from the disk since, new ones go there.
            assert_eq!(s.store.servers_lost, 1, "{}: {:?}", c.title(), s.store);
            assert!(s.disk.device_reads > 0 && s.store.local_reads > 0, "{}", c.title());
            assert!(!s.store.remote_now, "{:?}", s.store);
            assert!(s.store.remote_reads <= remote_reads + 1, "{:?}", s.store);
        } else {
            // The mirror server was promoted: still remote.
            assert_eq!(s.store.remote.failovers, 1, "{}: {:?}", c.title(), s.store);
            assert!(s.store.remote_reads > remote_reads && s.store.remote_now);
            assert_eq!(s.disk.device_writes, 0);
        }
    }
}

#[test]
fn every_server_lost_without_a_mirror_loses_exactly_the_pages_held_only_remotely() {
    for c in [Combination::Remote, Combination::RemoteCompressed, Combination::RemoteMirrorServer] {
        let remote = Shared::new(MemRemoteStore::new());
        let lost = Rc::new(RefCell::new(Vec::new()));
        let mut p = pager_of(c, &remote, Some(LostPages(lost.clone())));
        let mut shadow = zeroed_shadow();
        run(&mut p, &mut shadow, 5, 3000);
        p.flush_cache().expect("flush");
        assert_eq!(p.stats().store.fallbacks, 0);
        // Held only remotely: every page the servers hold but the frames (none is cached).
        let expected: BTreeSet<usize> =
            (0..PAGES).filter(|&q| remote.holds(q) && p.resident(q).is_none()).collect();
        assert!(expected.len() > PAGES / 2, "{}: {expected:?}", c.title());
        remote.0.borrow_mut().lose_servers_after(0);
        for (page, want) in shadow.iter_mut().enumerate() {
            let frame = p.fault(page, false).expect("a lost page is no failed fault");
            let got = p.frames().frame(frame);
            if expected.contains(&page) {
                assert!(got.iter().all(|&b| b == 0), "{}: page {page} reads zeros", c.title());
                want.fill(0);
            } else {
                assert_eq!(checksum(got), checksum(&want[..]), "{}: page {page}", c.title());
            }
        }
        let reported: BTreeSet<usize> = p.lost_pages().iter().copied().collect();
        assert_eq!(reported, expected, "{}", c.title());
        assert_eq!(*lost.borrow(), p.lost_pages(), "{}", c.title());
        let s = p.stats();
        assert_eq!(s.store.lost_remote, expected.len() as u64, "{:?}", s.store);
        assert_eq!(s.store.servers_lost, 1);
        // New evictions go to the disk, and nothing more is lost.
        run(&mut p, &mut shadow, 6, 2000);
        verify_all(&mut p, &shadow);
        let s = p.stats();
        assert_eq!(s.lost_pages, expected.len() as u64, "{}: {s:?}", c.title());
        assert!(s.disk.device_writes > 0 && !s.store.remote_now, "{:?}", s.store);
    }
}

#[test]
fn a_revocation_without_replacement_brings_the_pages_to_the_disk_and_loses_nothing() {
    for c in remote_combinations() {
        let spec = spec_of(c);
        let remote = Shared::new(store_for(spec.store.backing()));
        let mut p = pager_of(c, &remote, None);
        let mut shadow = zeroed_shadow();
        run(&mut p, &mut shadow, 8, 2000);
        let before = p.stats().store;
        let held = before.remote_pages;
        assert!(held > PAGES / 2, "{}: {before:?}", c.title());
        remote.0.borrow_mut().revoke_after(0);
        // One fault that reads from the store: a bounded share comes back.
        let page = (0..PAGES).find(|&q| p.resident(q).is_none() && !p.cache().holds(q)).unwrap();
        let frame = p.fault(page, false).unwrap();
        assert_eq!(checksum(p.frames().frame(frame)), checksum(&shadow[page][..]));
        let after_one = p.stats().store;
        let mirror = spec.store.backing().mirror();
        assert_eq!(after_one.revocations, 1, "{}: {after_one:?}", c.title());
        if mirror != Mirror::Disk {
            assert!(after_one.populated >= DEFAULT_POPULATE_PER_CALL as u64, "{after_one:?}");
            assert!(after_one.populated < held as u64, "{}: {after_one:?}", c.title());
            assert!(!remote.0.borrow().released(), "{}", c.title());
        }
        run(&mut p, &mut shadow, 9, 300);
        p.flush_cache().expect("flush finishes the population");
        verify_all(&mut p, &shadow);
        let s = p.stats();
        let st = s.store;
        assert_eq!(s.lost_pages, 0, "{}: {s:?}", c.title());
        assert!(remote.0.borrow().released(), "{}", c.title());
        assert_eq!(remote.0.borrow().held().count(), 0);
        assert_eq!((st.remote_pages, st.remote_now), (0, false), "{}: {st:?}", c.title());
        // Pages evicted after the revocation went to the disk, never to the servers.
        assert_eq!(st.remote_writes, after_one.remote_writes, "{}: {st:?}", c.title());
        if mirror == Mirror::Disk {
            // The mirror held every page: none was fetched.
            assert_eq!(st.populated, 0, "{}: {st:?}", c.title());
        } else {
            assert!(st.populated > 0 && st.populated <= held as u64, "{}: {st:?}", c.title());
        }
        // And it goes on paging to the disk.
        run(&mut p, &mut shadow, 10, 1000);
        verify_all(&mut p, &shadow);
        assert_eq!(p.stats().store.remote_writes, st.remote_writes);
    }
}

#[test]
fn with_no_server_the_store_pages_locally_and_tries_again_now_and_then() {
    for c in remote_combinations() {
        let remote = Shared::new(MemRemoteStore::no_server());
        let mut p = pager_of(c, &remote, None);
        let mut shadow = zeroed_shadow();
        run(&mut p, &mut shadow, 12, 3000);
        verify_all(&mut p, &shadow);
        let st = p.stats().store;
        assert_eq!((st.remote_writes, st.lost_remote), (0, 0), "{}: {st:?}", c.title());
        assert!(st.fallbacks > 0 && st.local_writes >= st.fallbacks, "{}: {st:?}", c.title());
        // One try at first, then one every so many pages written locally.
        let tries = remote.0.borrow().write_calls;
        let most = 1 + st.local_writes / u64::from(DEFAULT_RETRY_EVERY);
        assert!(tries >= 1 && tries <= most, "{}: {tries} tries, {st:?}", c.title());
        assert_eq!(tries, st.fallbacks, "{}: each try fell back", c.title());
        // A server appears: the next try pages remotely again.
        remote.0.borrow_mut().heal();
        run(&mut p, &mut shadow, 13, 6000);
        verify_all(&mut p, &shadow);
        p.flush_cache().unwrap();
        verify_all(&mut p, &shadow);
        let st = p.stats().store;
        assert!(st.remote_writes > 0 && st.remote_now, "{}: {st:?}", c.title());
        assert_eq!(p.stats().lost_pages, 0);
    }
}

/// A backing store over a disk of `PAGES` pages and `remote`, mirrored as `mirror`.
fn store(mirror: Mirror, remote: &Shared) -> BackingStore {
    let disk = Box::new(BasicDisk::new(MemBlockDevice::with_pages(PAGES)).unwrap());
    let remote: Box<dyn RemoteStore> = Box::new(remote.clone());
    BackingStore::new(Backing::Remote { mirror }, Some(disk), Some(remote)).unwrap()
}

fn read(s: &mut BackingStore, page: usize) -> Result<Box<Page>, PagerError> {
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    s.read(page, &mut buf, 1, &mut Vec::new())?;
    Ok(buf)
}

#[test]
fn a_page_written_locally_after_a_remote_copy_is_read_locally_and_the_stale_copy_freed() {
    let (v1, v2, v3) = (pattern(1), pattern(2), pattern(3));
    for keep_freed in [false, true] {
        let remote = Shared::new(MemRemoteStore::new());
        // A store that keeps what it is told to free: the stale copy stays for a read to find.
        remote.1.set(keep_freed);
        let mut s = store(Mirror::None, &remote);
        s.write_group(&[(1, &v1), (2, &v1)]).unwrap();
        assert_eq!(s.copies(1), Some(Copies::Remote));
        assert_eq!(s.location(1), Some(Location::Remote));
        // The servers vanish for one write: the disk takes it, and the next ones.
        remote.0.borrow_mut().fail_writes(1, RemoteError::Unreachable);
        s.write_group(&[(5, &v1)]).unwrap();
        assert!(matches!(s.route(), Route::Fallback { .. }));
        s.write_group(&[(1, &v2)]).unwrap();
        assert_eq!(s.copies(1), Some(Copies::Local));
        assert!(matches!(s.location(1), Some(Location::Slot(_))));
        assert_eq!(remote.holds(1), keep_freed, "the stale remote copy is freed");
        assert_eq!(*read(&mut s, 1).unwrap(), *v2, "the local copy is the one read");
        // Back to the remote store: the newer copy goes there and the local one is freed.
        s.set_retry_every(1);
        s.write_group(&[(6, &v1)]).unwrap();
        assert_eq!(s.route(), Route::Remote);
        s.write_group(&[(1, &v3)]).unwrap();
        assert_eq!(s.copies(1), Some(Copies::Remote));
        assert!(s.local().unwrap().location(1).is_none(), "the stale local copy is freed");
        assert_eq!(*read(&mut s, 1).unwrap(), *v3);
        assert_eq!(*read(&mut s, 2).unwrap(), *v1);
        let st = s.store_stats();
        assert_eq!((st.fallbacks, st.stale_freed), (1, 2), "{st:?}");
    }
}

#[test]
fn population_never_overwrites_a_page_evicted_since_with_its_older_remote_copy() {
    let remote = Shared::new(MemRemoteStore::new());
    let mut s = store(Mirror::None, &remote);
    s.set_populate_per_call(1);
    for page in 0..8 {
        s.write_group(&[(page, &pattern(page))]).unwrap();
    }
    remote.0.borrow_mut().revoke_after(0);
    // The next call hears of the revocation and brings back one page (the lowest).
    assert_eq!(*read(&mut s, 7).unwrap(), *pattern(7));
    assert_eq!(s.route(), Route::Populating);
    assert_eq!(s.copies(0), Some(Copies::Local));
    assert_eq!(s.copies(1), Some(Copies::Remote), "one page a call");
    assert_eq!(s.copies(7), Some(Copies::Remote), "not brought back yet");
    // Page 7 is evicted again, newer: it goes to the disk, and is not fetched.
    s.write_group(&[(7, &pattern(70))]).unwrap();
    assert_eq!(s.copies(7), Some(Copies::Local));
    assert!(remote.holds(1), "pages still to come back stay on the server");
    s.flush().unwrap();
    assert_eq!(s.route(), Route::Local);
    assert!(remote.0.borrow().released());
    assert_eq!(*read(&mut s, 7).unwrap(), *pattern(70));
    for page in 0..7 {
        assert_eq!(*read(&mut s, page).unwrap(), *pattern(page), "page {page}");
    }
    let st = s.store_stats();
    // Pages 0 to 6 came back; 7 was evicted locally first.
    assert_eq!((st.populated, st.remote_pages, st.lost_remote), (7, 0, 0), "{st:?}");
}

#[test]
fn a_diskless_store_with_no_server_refuses_the_page_and_keeps_nothing_stale() {
    let remote: Box<dyn RemoteStore> = Box::new(MemRemoteStore::no_server());
    let backing = Backing::Remote { mirror: Mirror::None };
    let mut s = BackingStore::new(backing, None, Some(remote)).unwrap();
    let e = s.write_group(&[(3, &pattern(3))]).unwrap_err();
    assert_eq!(e, PagerError::Remote { page: 3, error: RemoteError::NoServer });
    assert_eq!(s.location(3), None);
    assert_eq!(s.route(), Route::Remote, "nowhere else to go");
    assert!(BackingStore::new(backing, None, None).is_err());
}

#[test]
fn a_remote_mode_over_the_prefetching_hierarchies_is_refused() {
    let h = Hierarchy::PrefetchingCache { evict_pages: 4, fetch_pages: 4 };
    let below = Below::remote(Backing::Remote { mirror: Mirror::None }, None);
    let r = h.cache_over(MemBlockDevice::with_pages(8), None, below);
    assert!(matches!(r, Err(PagerError::BadConfig(_))));
}

#[test]
fn pages_kept_on_the_disk_alone_are_refilled_to_the_remote_store_once_it_takes_pages() {
    for mirror in [Mirror::Disk, Mirror::None] {
        let remote = Shared::new(MemRemoteStore::new());
        let mut s = store(mirror, &remote);
        s.set_populate_per_call(2);
        let v = |page: usize, version: usize| pattern(page * 16 + version);
        for page in 0..8 {
            s.write_group(&[(page, &v(page, 1))]).unwrap();
        }
        // Every server lost: the pages are the disk's alone (a disk mirror holds them; without
        // one, the pages written from now on go to the disk).
        remote.0.borrow_mut().lose_servers_after(0);
        for page in 8..14 {
            s.write_group(&[(page, &v(page, 1))]).unwrap();
        }
        assert!(matches!(s.route(), Route::Fallback { .. }));
        // A server is found: after the next local write the store tries the remote store
        // again; once it took a page the disk's pages follow, two a call, but the one written
        // again meanwhile (its newer copy went remote).
        remote.0.borrow_mut().heal();
        s.set_retry_every(1);
        s.write_group(&[(20, &v(20, 1))]).unwrap();
        assert_eq!(s.route(), Route::Remote);
        assert_eq!(s.copies(20), Some(Copies::Local));
        s.write_group(&[(9, &v(9, 2))]).unwrap();
        for _ in 0..20 {
            read(&mut s, 20).unwrap();
        }
        let mut held: Vec<usize> = match mirror {
            Mirror::Disk => (0..14).collect(),
            _ => (8..14).collect(),
        };
        held.push(20);
        let st = s.store_stats();
        assert_eq!(st.refilled, held.len() as u64 - 1, "{mirror:?}: {st:?}");
        for &page in &held {
            let want = v(page, if page == 9 { 2 } else { 1 });
            let copies = if mirror == Mirror::Disk { Copies::Both } else { Copies::Remote };
            assert_eq!(s.copies(page), Some(copies), "{mirror:?}: page {page}");
            // The remote copy is the page's own.
            let mut buf = Box::new([0u8; PAGE_SIZE]);
            remote.0.borrow_mut().read(page, &mut buf).unwrap();
            assert_eq!(*buf, *want, "{mirror:?}: page {page}");
            assert_eq!(*read(&mut s, page).unwrap(), *want, "{mirror:?}: page {page}");
            // Without a mirror the disk's copy is freed.
            let local = s.local().unwrap().location(page).is_some();
            assert_eq!(local, mirror == Mirror::Disk, "{mirror:?}: page {page}");
        }
    }
}
