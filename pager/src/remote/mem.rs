//! [`MemRemoteStore`]: remote memory in memory, for tests, with faults injected: no server at
//! all, every server lost (now or after so many operations), a primary lost with its mirror
//! promoted, a revocation with no replacement, failed writes; and counts.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;

use super::{RemoteError, RemoteNotice, RemoteStats, RemoteStore};
use crate::{PAGE_SIZE, Page};

/// An in-memory remote store for tests, with faults injected: no server at all, every
/// server lost (now or after so many operations), a primary lost with its mirror promoted, a
/// revocation with no replacement, failed writes; and counts.
///
/// "Operations" are the calls that reach a server: [`RemoteStore::write`] and
/// [`RemoteStore::read`]. A fault set to happen after `n` of them happens at the first call
/// after the `n`-th (a [`RemoteStore::notice`] included, which then reports it).
#[derive(Debug, Default)]
pub struct MemRemoteStore {
    pages: BTreeMap<usize, Box<Page>>,
    /// The most pages the servers take (`None`: no limit); a write past it is `NoServer`.
    capacity: Option<usize>,
    /// A second server holds a copy of every page.
    mirrored: bool,
    /// No server can be had: writes fail with `NoServer`, reads with `NotHeld`.
    no_server: bool,
    /// Operations so far.
    ops: u64,
    /// Every server is lost when this many operations are done.
    lose_at: Option<u64>,
    /// The primary server is lost (its mirror promoted) when this many operations are done.
    lose_primary_at: Option<u64>,
    /// A revocation with no replacement is noticed when this many operations are done.
    revoke_at: Option<u64>,
    /// Writes still to fail, and how.
    failing_writes: u32,
    fail_with: Option<RemoteError>,
    notice: Option<RemoteNotice>,
    released: bool,
    /// It takes compressed pages ([`RemoteStore::write_compressed`]).
    compressed: bool,
    /// Writes that reached a server (including failed ones).
    pub write_calls: u64,
    stats: RemoteStats,
}

impl MemRemoteStore {
    /// A store with one server and no limit.
    pub fn new() -> MemRemoteStore {
        MemRemoteStore::default()
    }

    /// A store whose every page has a second copy on a mirror server (`mirror=server`).
    pub fn mirrored() -> MemRemoteStore {
        MemRemoteStore { mirrored: true, ..MemRemoteStore::default() }
    }

    /// Takes compressed pages ([`RemoteStore::write_compressed`]), as the remote paging client
    /// does: each is decompressed here and counted in [`RemoteStats::compressed_writes`].
    pub fn taking_compressed(mut self) -> MemRemoteStore {
        self.compressed = true;
        self
    }

    /// A store that can find no server: every write is `NoServer`.
    pub fn no_server() -> MemRemoteStore {
        MemRemoteStore { no_server: true, ..MemRemoteStore::default() }
    }

    /// Limits the servers to `pages` pages: a write of a new page past them is `NoServer`.
    pub fn with_capacity(mut self, pages: usize) -> MemRemoteStore {
        self.capacity = Some(pages);
        self
    }

    /// Loses every server once `ops` more operations are done (0: at the next).
    pub fn lose_servers_after(&mut self, ops: u64) {
        self.lose_at = Some(self.ops + ops);
    }

    /// Loses the primary server once `ops` more operations are done: with a mirror, the
    /// mirror is promoted and nothing is lost; without one, it is every server.
    pub fn lose_primary_after(&mut self, ops: u64) {
        self.lose_primary_at = Some(self.ops + ops);
    }

    /// Revokes this client's memory with no replacement once `ops` more operations are done.
    pub fn revoke_after(&mut self, ops: u64) {
        self.revoke_at = Some(self.ops + ops);
    }

    /// Fails the next `writes` writes with `error` (`Unreachable` or `NoServer`): the page's
    /// earlier copy is dropped, as the trait allows.
    pub fn fail_writes(&mut self, writes: u32, error: RemoteError) {
        self.failing_writes = writes;
        self.fail_with = Some(error);
    }

    /// Servers are to be had again (after a loss, or none at the start).
    pub fn heal(&mut self) {
        self.no_server = false;
    }

    /// The pages held now.
    pub fn held(&self) -> impl Iterator<Item = usize> + '_ {
        self.pages.keys().copied()
    }

    /// Whether [`RemoteStore::release`] was called.
    pub fn released(&self) -> bool {
        self.released
    }

    /// Operations so far.
    pub fn ops(&self) -> u64 {
        self.ops
    }

    fn lose_all(&mut self) {
        self.pages.clear();
        self.no_server = true;
        self.stats.servers = 0;
        self.notice = Some(RemoteNotice::ServersLost);
    }

    /// Counts an operation, after letting the faults due happen.
    fn operation(&mut self) {
        self.due();
        self.ops += 1;
    }

    /// Lets the faults due happen.
    fn due(&mut self) {
        let due = |at: &mut Option<u64>, ops| {
            let hit = at.is_some_and(|at| ops >= at);
            if hit {
                *at = None;
            }
            hit
        };
        if due(&mut self.lose_at, self.ops) {
            self.lose_all();
        }
        if due(&mut self.lose_primary_at, self.ops) {
            if self.mirrored && !self.no_server {
                self.mirrored = false;
                self.stats.failovers += 1;
                self.stats.servers = 1;
            } else {
                self.lose_all();
            }
        }
        if due(&mut self.revoke_at, self.ops) {
            self.notice = Some(RemoteNotice::RevokedWithoutReplacement);
            self.stats.revocations += 1;
        }
    }

    fn servers(&self) -> u32 {
        if self.no_server || self.pages.is_empty() { 0 } else { 1 + u32::from(self.mirrored) }
    }
}

impl MemRemoteStore {
    /// A write of `data`, sent as `sent` bytes.
    fn store(&mut self, page: usize, data: &Page, sent: usize) -> Result<(), RemoteError> {
        self.operation();
        self.write_calls += 1;
        if self.no_server {
            return Err(RemoteError::NoServer);
        }
        if self.failing_writes > 0 {
            self.failing_writes -= 1;
            self.pages.remove(&page);
            return Err(self.fail_with.unwrap_or(RemoteError::Unreachable));
        }
        if !self.pages.contains_key(&page) && self.capacity.is_some_and(|c| self.pages.len() >= c) {
            return Err(RemoteError::NoServer);
        }
        match self.pages.get_mut(&page) {
            Some(p) => p.copy_from_slice(data),
            None => {
                self.pages.insert(page, Box::new(*data));
            }
        }
        let copies = 1 + u64::from(self.mirrored);
        self.stats.pages_written += copies;
        self.stats.page_bytes_written += sent as u64 * copies;
        self.stats.packets_sent += sent.div_ceil(1421) as u64 * copies;
        self.stats.packets_received += 1 + u64::from(self.mirrored);
        self.stats.servers = self.servers();
        Ok(())
    }
}

impl RemoteStore for MemRemoteStore {
    fn write(&mut self, page: usize, data: &Page) -> Result<(), RemoteError> {
        self.store(page, data, PAGE_SIZE)
    }

    fn write_compressed(&mut self, page: usize, wkdm: &[u8]) -> Result<bool, RemoteError> {
        if !self.compressed {
            return Ok(false);
        }
        let mut data = Box::new([0u8; PAGE_SIZE]);
        // Bytes that do not decompress never reach a server.
        crate::cache::wkdm::decompress(wkdm, &mut data).map_err(|_| RemoteError::Unreachable)?;
        self.store(page, &data, wkdm.len())?;
        self.stats.compressed_writes += 1;
        Ok(true)
    }

    fn read(&mut self, page: usize, buf: &mut Page) -> Result<(), RemoteError> {
        self.operation();
        if self.no_server && self.pages.is_empty() {
            return Err(RemoteError::Unreachable);
        }
        let p = self.pages.get(&page).ok_or(RemoteError::NotHeld)?;
        buf.copy_from_slice(&p[..]);
        self.stats.pages_read += 1;
        self.stats.packets_sent += 1;
        self.stats.packets_received += 3;
        Ok(())
    }

    fn holds(&self, page: usize) -> bool {
        self.pages.contains_key(&page)
    }

    fn free(&mut self, page: usize) {
        self.pages.remove(&page);
        self.stats.servers = self.servers();
    }

    fn notice(&mut self) -> Option<RemoteNotice> {
        self.due();
        self.notice.take()
    }

    fn release(&mut self) {
        self.pages.clear();
        self.released = true;
        self.stats.servers = 0;
    }

    fn stats(&self) -> RemoteStats {
        self.stats
    }
}
