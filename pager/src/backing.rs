//! [`BackingStore`]: the backing store manager (Heracles §8.3, the thesis's `BSManager`). It
//! is a [`DiskManager`] to the caches above, so they are unchanged, and routes each page
//! between a local disk manager and a remote store ([`RemoteStore`], the remote paging client)
//! by its mode ([`Backing`]):
//! - local only: every page to the disk (a store with no remote store passes every call
//!   through);
//! - remote only, or remote mirrored to another server (the remote store mirrors itself, so
//!   the manager routes as for remote only): every page to the remote store;
//! - remote mirrored to the local disk: every page to both.
//!
//! # Where the latest copy is
//! The manager keeps, for every page stored below it, where its current copies are: remote,
//! local, or both ([`Copies`]). A copy it records is always current: when a page is written,
//! every older copy in a place the new contents did not reach is freed at once (a page
//! evicted locally after a remote copy is read from the disk, and its remote copy freed: the
//! thesis's rule that local evictions are newer than remote copies). A write that stores a
//! page nowhere changes nothing and is an error, as for a disk manager: the caller keeps the
//! page.
//!
//! # Failures
//! - A remote write that fails ([`RemoteError::NoServer`] or [`RemoteError::Unreachable`]) puts
//!   the page on the local disk instead (a *fallback*), and the manager pages locally from then
//!   on: after [`DEFAULT_RETRY_EVERY`] pages written locally it tries the remote store again
//!   ([`BackingStore::set_retry_every`]; 0 never), as the remote client may have found a
//!   server by then. No server at the start is the same: the store pages locally. With no
//!   local disk (a diskless client) the write fails ([`PagerError::Remote`]) and the page
//!   stays with the caller.
//! - [`RemoteNotice::ServersLost`]: pages whose only copy was remote are lost and reported so
//!   ([`PagerError::PageLost`], which the pager tells the application) at their next read;
//!   pages the local mirror holds are read from the disk, so with a local mirror nothing is
//!   lost; new pages go to the disk (and to the remote store again once it takes them).
//!   A remote read that fails is the same for its page.
//! - [`RemoteNotice::RevokedWithoutReplacement`]: the pages held remotely come back to the
//!   disk (*population*): each is read from the remote store and written to the disk, pages
//!   the local mirror holds are not fetched, and pages evicted meanwhile go to the disk (so
//!   an older remote copy never overwrites them); then the remote store is released
//!   ([`RemoteStore::release`]) and the store pages locally for good. Population is bounded:
//!   each call into the manager moves at most [`DEFAULT_POPULATE_PER_CALL`] pages
//!   ([`BackingStore::set_populate_per_call`]) and [`DiskManager::flush`] finishes it. Every
//!   call is inside a fault, which must not wait for the whole stretch to cross the network
//!   (the thesis forked a thread; a Tessera driver has none of its own in a fault, like the
//!   write-behind queue's). A diskless client ignores the notice and keeps paging remotely,
//!   as the thesis's diskless clients do.
//! - **Refilling.** After a fallback or the loss of every server, once the remote store takes
//!   a page again (the remote client found a server), the pages whose current copy is only on
//!   the disk go back to it (*refilling*, the thesis's "fill the new server from the disk"):
//!   each is read from the disk and written remotely; with a local mirror it is then in both
//!   places, without one its disk copy is freed. A page evicted meanwhile is not refilled
//!   (its newer copy went where the route sent it). Refilling is bounded like population
//!   ([`DEFAULT_POPULATE_PER_CALL`] pages a call); a remote write that fails stops it until
//!   the next time the remote store takes a page.
//!
//! The remote store's [`RemoteStore::notice`] is read at every call into the manager.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

pub use pager_spec::{Backing, Mirror};

use crate::PAGE_SIZE;
use crate::Page;
pub use crate::disk::StoreStats;
use crate::disk::{DiskManager, DiskStats, Location, Prefetched, SwapSpace};
use crate::error::PagerError;
use crate::remote::{RemoteError, RemoteNotice, RemoteStore};

/// Pages written locally after a fallback before the remote store is tried again.
pub const DEFAULT_RETRY_EVERY: u32 = 256;

/// Pages a call into the manager moves back from the remote store after a revocation.
pub const DEFAULT_POPULATE_PER_CALL: usize = 4;

/// Where a page's current copies are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copies {
    /// On the local disk only.
    Local,
    /// In the remote store only.
    Remote,
    /// In both (mirrored to the disk).
    Both,
    /// Its only copy was remote and is lost with its servers: reported at the next read.
    Lost,
}

/// Where new pages go now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To the remote store (and the local mirror, if any).
    Remote,
    /// To the local disk after a remote failure, until `writes_left` more pages are written.
    Fallback {
        /// Local page writes before the remote store is tried again (`u32::MAX`: never).
        writes_left: u32,
    },
    /// To the local disk while the remote pages come back to it after a revocation.
    Populating,
    /// To the local disk only: no remote store, or released.
    Local,
}

/// The backing store manager; see the [module](self).
pub struct BackingStore {
    backing: Backing,
    local: Option<Box<dyn DiskManager>>,
    remote: Option<Box<dyn RemoteStore>>,
    /// Where each page's current copies are (only with a remote store).
    copies: BTreeMap<usize, Copies>,
    route: Route,
    retry_every: u32,
    populate_per_call: usize,
    /// Pages still to bring back from the remote store, while populating.
    to_populate: Vec<usize>,
    /// Pages were kept on the disk alone (a fallback, every server lost): to refill to the
    /// remote store once it takes pages again.
    refill_pending: bool,
    /// Pages still to copy from the disk to the remote store, while refilling.
    to_refill: Vec<usize>,
    /// The last error population met (the disk full, or failing), for flush to report.
    populate_error: Option<PagerError>,
    buf: Option<Box<Page>>,
    /// The disk's device writes that brought pages back (not writes of evicted pages).
    populate_writes: u64,
    stats: StoreStats,
}

impl BackingStore {
    /// A manager routing by `backing` between `local` and `remote`. Without a remote store
    /// (or with [`Backing::Local`]) every page goes to `local`; without `local` there is no
    /// fallback. [`PagerError::BadConfig`] if it has neither.
    pub fn new(
        backing: Backing,
        local: Option<Box<dyn DiskManager>>,
        remote: Option<Box<dyn RemoteStore>>,
    ) -> Result<BackingStore, PagerError> {
        let remote = remote.filter(|_| backing.is_remote());
        if local.is_none() && remote.is_none() {
            return Err(PagerError::BadConfig("a backing store needs a disk or a remote store"));
        }
        let route = if remote.is_some() { Route::Remote } else { Route::Local };
        Ok(BackingStore {
            backing,
            local,
            remote,
            copies: BTreeMap::new(),
            route,
            retry_every: DEFAULT_RETRY_EVERY,
            populate_per_call: DEFAULT_POPULATE_PER_CALL,
            to_populate: Vec::new(),
            refill_pending: false,
            to_refill: Vec::new(),
            populate_error: None,
            buf: None,
            populate_writes: 0,
            stats: StoreStats { backing, ..StoreStats::default() },
        })
    }

    /// Pages written locally after a fallback before the remote store is tried again (0:
    /// never); a fallback under way waits no longer than that.
    pub fn set_retry_every(&mut self, pages: u32) {
        self.retry_every = pages;
        if let Route::Fallback { writes_left } = &mut self.route {
            *writes_left = if pages == 0 { u32::MAX } else { pages.min(*writes_left) };
        }
    }

    /// Pages each call moves back from the remote store after a revocation (at least 1).
    pub fn set_populate_per_call(&mut self, pages: usize) {
        self.populate_per_call = pages.max(1);
    }

    /// Where `page`'s current copies are, if it is stored.
    pub fn copies(&self, page: usize) -> Option<Copies> {
        if self.remote.is_none() {
            return self.local.as_ref()?.location(page).map(|_| Copies::Local);
        }
        self.copies.get(&page).copied()
    }

    /// Where new pages go now.
    pub fn route(&self) -> Route {
        self.route
    }

    /// The remote store, if any (its counts, or a test's look at it).
    pub fn remote(&self) -> Option<&dyn RemoteStore> {
        self.remote.as_deref()
    }

    /// The local disk manager, if any.
    pub fn local(&self) -> Option<&dyn DiskManager> {
        self.local.as_deref()
    }

    fn local_mut(&mut self) -> Result<&mut Box<dyn DiskManager>, PagerError> {
        self.local.as_mut().ok_or(PagerError::BadConfig("the backing store has no disk"))
    }

    /// Reads the remote store's notice and acts on it, then moves a bounded share of the
    /// pages still to come back after a revocation.
    fn poll(&mut self) {
        let Some(remote) = self.remote.as_mut() else { return };
        if self.route == Route::Local {
            return;
        }
        match remote.notice() {
            Some(RemoteNotice::ServersLost) => self.servers_lost(),
            Some(RemoteNotice::RevokedWithoutReplacement) => self.revoked(),
            None => {}
        }
        if self.route == Route::Populating {
            self.populate(self.populate_per_call);
        }
        if self.route == Route::Remote && !self.to_refill.is_empty() {
            self.refill(self.populate_per_call);
        }
    }

    /// Copies up to `most` pages whose only copy is on the disk to the remote store; a failed
    /// remote write falls back again and waits for the next time it takes a page.
    fn refill(&mut self, most: usize) {
        let mut moved = 0;
        while moved < most {
            let Some(&page) = self.to_refill.last() else { break };
            // Evicted or freed since: its copies are where they are.
            if self.copies.get(&page) != Some(&Copies::Local) {
                self.to_refill.pop();
                continue;
            }
            let (Some(remote), Some(local)) = (self.remote.as_mut(), self.local.as_mut()) else {
                break;
            };
            let buf = self.buf.get_or_insert_with(|| Box::new([0; PAGE_SIZE]));
            if local.read(page, buf, 1, &mut Vec::new()).is_err() {
                // The disk failed it: it stays where it is (read from there or reported lost).
                self.to_refill.pop();
                continue;
            }
            self.stats.refilled += 1;
            if remote.write(page, buf).is_err() {
                self.to_refill.clear();
                self.refill_pending = true;
                self.route = self.fallback_route();
                return;
            }
            self.to_refill.pop();
            moved += 1;
            if self.backing.mirror() == Mirror::Disk {
                self.copies.insert(page, Copies::Both);
            } else {
                self.copies.insert(page, Copies::Remote);
                local.free(page);
            }
        }
    }

    /// The remote store took a page after pages were kept on the disk alone: they go back to
    /// it, lowest first.
    fn start_refill(&mut self) {
        self.refill_pending = false;
        self.to_refill = self
            .copies
            .iter()
            .rev()
            .filter(|(_, c)| **c == Copies::Local)
            .map(|(&p, _)| p)
            .collect();
    }

    /// Every server is lost: remote-only pages are lost, mirrored ones stay on the disk.
    fn servers_lost(&mut self) {
        self.stats.servers_lost += 1;
        for c in self.copies.values_mut() {
            *c = match *c {
                Copies::Both | Copies::Local => Copies::Local,
                Copies::Remote | Copies::Lost => Copies::Lost,
            };
        }
        self.to_populate.clear();
        self.to_refill.clear();
        self.refill_pending = true;
        self.route = if self.route == Route::Populating {
            // The revocation is over: nothing is left to fetch.
            if let Some(r) = self.remote.as_mut() {
                r.release();
            }
            Route::Local
        } else {
            self.fallback_route()
        };
    }

    /// The remote store wants its memory back and no other server takes the pages: bring
    /// them back to the disk (a diskless client keeps paging remotely).
    fn revoked(&mut self) {
        self.stats.revocations += 1;
        if self.local.is_none() || self.route == Route::Populating {
            return;
        }
        self.to_populate.clear();
        self.to_refill.clear();
        self.refill_pending = false;
        for (&page, c) in self.copies.iter_mut() {
            match *c {
                // The local mirror holds it: its remote copy is just dropped.
                Copies::Both => *c = Copies::Local,
                Copies::Remote => self.to_populate.push(page),
                Copies::Local | Copies::Lost => {}
            }
        }
        // Brought back in ascending order: popped from the end.
        self.to_populate.reverse();
        self.route = Route::Populating;
    }

    /// Moves up to `most` pages back from the remote store to the disk; releases the remote
    /// store once none is left.
    fn populate(&mut self, most: usize) {
        let mut moved = 0;
        while moved < most {
            let Some(&page) = self.to_populate.last() else { break };
            // Evicted (to the disk) or freed since: nothing to fetch.
            if self.copies.get(&page) != Some(&Copies::Remote) {
                self.to_populate.pop();
                continue;
            }
            let (Some(remote), Some(local)) = (self.remote.as_mut(), self.local.as_mut()) else {
                break;
            };
            let buf = self.buf.get_or_insert_with(|| Box::new([0; PAGE_SIZE]));
            match remote.read(page, buf) {
                Ok(()) => self.stats.remote_reads += 1,
                Err(_) => {
                    self.to_populate.pop();
                    self.copies.insert(page, Copies::Lost);
                    continue;
                }
            }
            let writes = local.device_writes();
            let result = local.write_group(&[(page, &**buf)]);
            self.populate_writes += local.device_writes() - writes;
            match result {
                Ok(()) => {
                    self.to_populate.pop();
                    self.copies.insert(page, Copies::Local);
                    self.stats.local_writes += 1;
                    self.stats.populated += 1;
                    moved += 1;
                }
                Err(e) => {
                    // Kept remote, tried again at the next call; flush reports it.
                    self.populate_error = Some(e);
                    return;
                }
            }
        }
        if self.to_populate.is_empty() {
            if let Some(r) = self.remote.as_mut() {
                r.release();
            }
            // Nothing is remote any more.
            for c in self.copies.values_mut() {
                if *c == Copies::Both {
                    *c = Copies::Local;
                }
            }
            self.populate_error = None;
            self.route = Route::Local;
        }
    }

    fn fallback_route(&self) -> Route {
        let writes_left = if self.retry_every == 0 { u32::MAX } else { self.retry_every };
        Route::Fallback { writes_left }
    }

    /// Counts `n` pages written locally against a fallback's wait.
    fn count_local_writes(&mut self, n: usize) {
        if let Route::Fallback { writes_left } = &mut self.route
            && *writes_left != u32::MAX
        {
            *writes_left = writes_left.saturating_sub(n as u32);
            if *writes_left == 0 {
                self.route = Route::Remote;
            }
        }
    }

    /// Writes `pages` to the local disk; which of them it stored, and its error.
    fn write_local(&mut self, pages: &[(usize, &Page)]) -> (Vec<bool>, Option<PagerError>) {
        let Some(local) = self.local.as_mut() else {
            return (alloc::vec![false; pages.len()], None);
        };
        let result = local.write_group(pages);
        let stored = pages
            .iter()
            .map(|&(page, _)| match result {
                Ok(()) => true,
                // Those whose writes failed are forgotten by the disk; the others are held.
                Err(PagerError::WriteFailed { .. }) => local.location(page).is_some(),
                Err(_) => false,
            })
            .collect();
        (stored, result.err())
    }
}

impl DiskManager for BackingStore {
    fn write_group(&mut self, pages: &[(usize, &Page)]) -> Result<(), PagerError> {
        if self.remote.is_none() {
            return self.local_mut()?.write_group(pages);
        }
        self.poll();
        let n = pages.len();
        let to_remote = self.route == Route::Remote;
        let mirror = to_remote && self.backing.mirror() == Mirror::Disk;
        let (mut local, mut local_err) = (alloc::vec![false; n], None);
        if !to_remote || mirror {
            (local, local_err) = self.write_local(pages);
        }
        let mut remote = alloc::vec![false; n];
        let mut remote_err = None;
        if to_remote {
            let store = self.remote.as_mut().expect("a remote route has a remote store");
            let mut fallback = Vec::new();
            for (i, &(page, data)) in pages.iter().enumerate() {
                if remote_err.is_none() {
                    match store.write(page, data) {
                        Ok(()) => {
                            remote[i] = true;
                            continue;
                        }
                        Err(e) => remote_err = Some(e),
                    }
                }
                // The remote store failed this page or one before it: the disk takes it.
                fallback.push(i);
            }
            // With no disk to fall back to, the remote store is all there is.
            if remote_err.is_some() && self.local.is_some() {
                self.route = self.fallback_route();
                self.refill_pending = true;
                self.to_refill.clear();
            } else if self.refill_pending && remote.iter().any(|&r| r) {
                self.start_refill();
            }
            if !mirror && !fallback.is_empty() {
                let group: Vec<(usize, &Page)> = fallback.iter().map(|&i| pages[i]).collect();
                let (stored, e) = self.write_local(&group);
                for (&i, s) in fallback.iter().zip(stored) {
                    local[i] = s;
                }
                local_err = local_err.or(e);
            }
            self.stats.fallbacks += fallback.iter().filter(|&&i| local[i]).count() as u64;
        }
        let mut failed = None;
        let mut written_locally = 0;
        for (i, &(page, _)) in pages.iter().enumerate() {
            let new = match (local[i], remote[i]) {
                (true, true) => Copies::Both,
                (true, false) => Copies::Local,
                (false, true) => Copies::Remote,
                (false, false) => {
                    // Stored nowhere: the caller keeps it, and its older copies stay.
                    failed.get_or_insert(local_err.unwrap_or(PagerError::Remote {
                        page,
                        error: remote_err.unwrap_or(RemoteError::NoServer),
                    }));
                    continue;
                }
            };
            let old = self.copies.insert(page, new);
            if local[i] {
                written_locally += 1;
                self.stats.local_writes += 1;
                self.stats.mirror_writes += u64::from(remote[i]);
            } else if let Some(l) = self.local.as_mut()
                && l.location(page).is_some()
            {
                // An older local copy (or one a failed group write left): never read again.
                l.free(page);
                self.stats.stale_freed += 1;
            }
            if remote[i] {
                self.stats.remote_writes += 1;
            } else if matches!(old, Some(Copies::Remote | Copies::Both))
                && let Some(r) = self.remote.as_mut()
            {
                r.free(page);
                self.stats.stale_freed += 1;
            }
        }
        if !to_remote {
            self.count_local_writes(written_locally);
        }
        failed.map_or(Ok(()), Err)
    }

    /// A compressed page goes to the remote store as it is when the route is remote and the
    /// disk takes no copy (`mirror=none` or `server`); else, or if the remote store does not
    /// take compressed pages, `Ok(false)` and the caller writes it whole, as before. A remote
    /// failure starts a fallback (with a disk) and returns `Ok(false)`: the caller's whole
    /// page then goes to the disk.
    fn write_compressed(&mut self, page: usize, wkdm: &[u8]) -> Result<bool, PagerError> {
        if self.remote.is_none() {
            return Ok(false);
        }
        self.poll();
        if self.route != Route::Remote || self.backing.mirror() == Mirror::Disk {
            return Ok(false);
        }
        let store = self.remote.as_mut().expect("a remote route has a remote store");
        match store.write_compressed(page, wkdm) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(_) => {
                // The client has dropped its copy, if any; the disk takes the page.
                if self.local.is_some() {
                    self.route = self.fallback_route();
                    self.stats.fallbacks += 1;
                }
                if self.copies.get(&page) == Some(&Copies::Remote) {
                    self.copies.remove(&page);
                }
                return Ok(false);
            }
        }
        self.copies.insert(page, Copies::Remote);
        self.stats.remote_writes += 1;
        self.stats.compressed_writes += 1;
        if let Some(l) = self.local.as_mut()
            && l.location(page).is_some()
        {
            // An older local copy: never read again.
            l.free(page);
            self.stats.stale_freed += 1;
        }
        Ok(true)
    }

    fn read(
        &mut self,
        page: usize,
        buf: &mut Page,
        max_pages: usize,
        prefetched: &mut Prefetched,
    ) -> Result<(), PagerError> {
        if self.remote.is_none() {
            self.stats.local_reads += 1;
            return self.local_mut()?.read(page, buf, max_pages, prefetched);
        }
        self.poll();
        let copies = self.copies.get(&page).copied();
        if let Some(Copies::Remote | Copies::Both) = copies {
            let remote = self.remote.as_mut().expect("remote copies have a remote store");
            match remote.read(page, buf) {
                Ok(()) => {
                    self.stats.remote_reads += 1;
                    return Ok(());
                }
                Err(_) if copies == Some(Copies::Both) => {
                    // The mirror on the disk has it.
                    self.copies.insert(page, Copies::Local);
                }
                Err(_) => {
                    self.copies.insert(page, Copies::Lost);
                }
            }
        }
        match self.copies.get(&page) {
            Some(Copies::Lost) => {
                self.copies.remove(&page);
                self.stats.lost_remote += 1;
                Err(PagerError::PageLost { page })
            }
            Some(Copies::Local) => {
                self.stats.local_reads += 1;
                let local = self.local_mut()?;
                let r = local.read(page, buf, max_pages, prefetched);
                if let Err(PagerError::PageLost { .. }) = r {
                    self.copies.remove(&page);
                }
                r
            }
            _ => Err(PagerError::NotStored { page }),
        }
    }

    fn location(&self, page: usize) -> Option<Location> {
        let local = || self.local.as_ref().and_then(|l| l.location(page));
        if self.remote.is_none() {
            return local();
        }
        match self.copies.get(&page)? {
            Copies::Local | Copies::Both => local(),
            Copies::Remote => Some(Location::Remote),
            // Nothing holds it: a copy the caller still has must be written again.
            Copies::Lost => None,
        }
    }

    fn free(&mut self, page: usize) {
        if self.remote.is_none() {
            if let Some(l) = self.local.as_mut() {
                l.free(page);
            }
            return;
        }
        match self.copies.remove(&page) {
            Some(Copies::Local) => self.local.iter_mut().for_each(|l| l.free(page)),
            Some(Copies::Remote) => self.remote.iter_mut().for_each(|r| r.free(page)),
            Some(Copies::Both) => {
                self.local.iter_mut().for_each(|l| l.free(page));
                self.remote.iter_mut().for_each(|r| r.free(page));
            }
            Some(Copies::Lost) | None => {}
        }
    }

    fn flush(&mut self) -> Result<(), PagerError> {
        self.poll();
        if self.route == Route::Populating {
            self.populate(usize::MAX);
            if let Some(e) = self.populate_error.take() {
                return Err(e);
            }
        }
        match self.local.as_mut() {
            Some(l) => l.flush(),
            None => Ok(()),
        }
    }

    fn swap_space(&self) -> SwapSpace {
        self.local.as_ref().map(|l| l.swap_space()).unwrap_or_default()
    }

    fn stats(&self) -> DiskStats {
        self.local.as_ref().map(|l| l.stats()).unwrap_or_default()
    }

    /// The disk's device writes and the pages written to the remote store, but not the writes
    /// that brought pages back from it (not an eviction's).
    fn device_writes(&self) -> u64 {
        let local = self.local.as_ref().map_or(0, |l| l.device_writes());
        local - self.populate_writes + self.stats.remote_writes
    }

    fn store_stats(&self) -> StoreStats {
        let remote_pages =
            self.copies.values().filter(|c| matches!(c, Copies::Remote | Copies::Both)).count();
        // Passing every call through, the disk's own counts are the store's.
        let local_writes = match (&self.remote, &self.local) {
            (None, Some(l)) => l.stats().pages_written,
            _ => self.stats.local_writes,
        };
        StoreStats {
            remote_now: self.route == Route::Remote,
            local_writes,
            remote_pages,
            remote: self.remote.as_ref().map(|r| r.stats()).unwrap_or_default(),
            ..self.stats
        }
    }
}
