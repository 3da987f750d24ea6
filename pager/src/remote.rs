//! The remote paging client as the backing store manager sees it: [`RemoteStore`], pages kept
//! in other nodes' spare memory (Heracles §10, the thesis's `RPPCInt`).
//!
//! The trait is synchronous, like [`crate::disk::DiskManager`]: each call returns when the
//! page is stored on (or read from) the servers, or when the client has given up on them. How
//! pages reach the servers (the remote paging protocol over UDP, the trader, choosing and
//! spreading over servers, mirroring to a second server, moving pages when a server revokes)
//! is the implementation's; the backing store manager only routes pages between a local disk
//! manager and a remote store, and mirrors to the local disk when told to.
//!
//! Rules every implementation keeps (the thesis's consistency rules, §10.7):
//! - It knows where the latest copy of every page it holds is: a read never returns an older
//!   copy than the last write that succeeded.
//! - A write that fails leaves the page's previous remote copy (if any) readable or reports
//!   it gone ([`RemoteStore::holds`] turns false): never a silently stale copy.
//! - It never blocks forever: a server that does not answer within its retries is unreachable.

use core::fmt;

use crate::Page;

mod mem;
pub use mem::MemRemoteStore;

/// Why a remote store could not do what it was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteError {
    /// No server could be had for a new page: no trader answered, none knew a server with
    /// room, or every server refused. The caller pages locally.
    NoServer,
    /// The servers that held (or were to hold) the page stopped answering within the retries;
    /// their copies are lost to this client.
    Unreachable,
    /// No server holds the page (never written, freed, or lost with its servers).
    NotHeld,
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RemoteError::NoServer => "no remote paging server has room",
            RemoteError::Unreachable => "the remote paging servers stopped answering",
            RemoteError::NotHeld => "no remote paging server holds the page",
        })
    }
}

/// Something the remote store tells its owner between requests ([`RemoteStore::notice`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteNotice {
    /// A server revoked this client's memory and no other server could take its pages: the
    /// pages it holds must come back (to the local disk) or be dropped if a local mirror
    /// holds them; then [`RemoteStore::release`].
    RevokedWithoutReplacement,
    /// Every server this client had is lost: pages held only remotely are gone.
    ServersLost,
}

/// What a remote store has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RemoteStats {
    /// Pages written to servers (a mirrored page counts once per server).
    pub pages_written: u64,
    /// Pages read back from servers.
    pub pages_read: u64,
    /// Of the pages written, those sent compressed (WKdm: compressed by the client, `netc`, or
    /// by a compressed cache above it).
    pub compressed_writes: u64,
    /// Bytes of the pages written as sent (compressed or whole), each server's copy counted.
    pub page_bytes_written: u64,
    /// Packets sent (requests, payloads, acknowledgements).
    pub packets_sent: u64,
    /// Packets received.
    pub packets_received: u64,
    /// Packets sent again after a timeout or a negative acknowledgement.
    pub retransmits: u64,
    /// Servers currently used.
    pub servers: u32,
    /// Mirrors promoted to primary after their primary was lost.
    pub failovers: u32,
    /// Revocations answered (pages moved to another server or handed back).
    pub revocations: u32,
}

/// A remote paging client: stores pages under their page numbers on other nodes.
pub trait RemoteStore {
    /// Stores `page` on the servers (and on its mirror server, if the client mirrors).
    fn write(&mut self, page: usize, data: &Page) -> Result<(), RemoteError>;

    /// Stores `page` given as its WKdm-compressed bytes ([`crate::cache::wkdm`], as a compressed
    /// cache holds it): the compressed bytes go to the servers, which keep them, and a later
    /// [`RemoteStore::read`] gives the page back whole. `Ok(false)` if this store does not take
    /// compressed pages (the default): the caller decompresses and writes the page. Errors as
    /// for [`RemoteStore::write`].
    fn write_compressed(&mut self, page: usize, wkdm: &[u8]) -> Result<bool, RemoteError> {
        let _ = (page, wkdm);
        Ok(false)
    }

    /// Reads `page` into `buf` from the server that holds its latest copy.
    fn read(&mut self, page: usize, buf: &mut Page) -> Result<(), RemoteError>;

    /// Whether a server holds `page`.
    fn holds(&self, page: usize) -> bool;

    /// Forgets `page` on the servers.
    fn free(&mut self, page: usize);

    /// What happened since the last call, if anything the owner must act on. The client
    /// reads the network here too (revocations, a server's offload finishing), so the owner
    /// calls it at every request.
    fn notice(&mut self) -> Option<RemoteNotice>;

    /// Gives up remote paging: frees everything this client holds on its servers.
    fn release(&mut self);

    /// Counts of what the store has done.
    fn stats(&self) -> RemoteStats;
}
