//! Revocation with the client's active participation (Heracles §4.2.7, §10.5): the server that
//! needs its memory back, the client that moves its pages, and the new server that receives
//! them from both.
//!
//! 1. The old server notifies the client ([`ServerRevocation`], re-sending the notice until
//!    the client answers, giving up on a silent client after its retries and freeing its
//!    memory: a silent client is a dead one, which round 1 of victim choice would take anyway).
//! 2. The client looks for a new server ([`crate::Selection`], the old one excluded) and
//!    replies with its address, or that it found none ([`ClientRevocation::found`],
//!    [`ClientRevocation::not_found`]).
//! 3. The old server offloads the client's pages to the new server one by one, each
//!    acknowledged, re-sent after a timeout; meanwhile the client sends every new eviction only
//!    to the new server and tracks those pages: a fault on a tracked page goes to the new
//!    server, any other to the old ([`ClientRevocation::write_target`],
//!    [`ClientRevocation::read_target`]).
//! 4. The new server keeps what the client sent over what the old server forwards: a forwarded
//!    page it already has from the client (or that the client freed there) is discarded
//!    ([`ForwardFilter`]).
//! 5. When every page is acknowledged the old server tells the client, which tells the new
//!    server and switches over completely; the old server frees the client's memory on the
//!    client's release (or after telling it its retries' worth of times).
//!
//! Without a new server the client's owner is told (the remote client raises
//! `RemoteNotice::RevokedWithoutReplacement`): its pages come back to the local disk (or are
//! dropped if a local mirror has them), read from the old server, which waits for the client's
//! release while the client keeps making contact. If the new server revokes the client while
//! the old one is still offloading to it (**double revocation**), the client backs off remote
//! paging too, but takes its pages back from the second server only, never the first: the
//! first keeps offloading to the second, and a fault on a page not yet forwarded waits for the
//! first's offload to finish ([`Target::Wait`]).

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use crate::{ClientId, Vpn};

/// The timers of a revocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    /// How long a notice, a forwarded page or the end of an offload waits for its answer
    /// before it is sent again.
    pub retry_ns: u64,
    /// How many times each is sent before the other side counts as gone.
    pub tries: u32,
    /// How long a client bringing its pages back may go without contact before the server
    /// frees them.
    pub idle_ns: u64,
}

impl Default for Timers {
    /// 200 ms between tries, ten tries, 10 s of silence.
    fn default() -> Timers {
        Timers { retry_ns: 200_000_000, tries: 10, idle_ns: 10 * crate::SECOND }
    }
}

/// Where the old server is in revoking one client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerPhase<A> {
    /// The client has been told and has not answered yet.
    Notified,
    /// Forwarding the client's pages to this new server.
    Offloading(A),
    /// Every page is at this new server; the client is being told.
    Offloaded(A),
    /// No new server: the client reads its pages back and then releases them.
    Returning,
    /// The client's memory is free (released, or the client or the new server went silent).
    Freed,
}

/// What the old server is to do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerAction<A> {
    /// Send (or send again) the revocation notice to the client.
    Notify,
    /// Send page `vpn` to the new server `to`.
    Forward(Vpn, A),
    /// Tell the client that every page is at the new server.
    TellDone,
    /// Tell the client the new server stopped answering (its pages stay here: it brings them
    /// back as without a new server).
    TellFailed,
    /// Free the client's memory and forget it.
    Free,
    /// Nothing until the next answer or timer.
    Wait,
}

/// A server revoking one client; see the [module](self) documentation.
#[derive(Clone, Debug)]
pub struct ServerRevocation<A> {
    client: ClientId,
    timers: Timers,
    phase: ServerPhase<A>,
    /// Pages still to forward, the lowest last (popped first).
    pages: Vec<Vpn>,
    /// The page forwarded and not yet acknowledged.
    unacked: Option<Vpn>,
    deadline: u64,
    tries: u32,
    /// Pages forwarded and acknowledged.
    forwarded: u64,
    /// When the client first said to hold the pages without naming a new server.
    held_since: Option<u64>,
}

impl<A: Copy + Eq> ServerRevocation<A> {
    /// Starts revoking `client`, which holds `pages`, at `now`: the first [`poll`] sends the
    /// notice.
    ///
    /// [`poll`]: ServerRevocation::poll
    pub fn new(client: ClientId, pages: &[Vpn], now: u64, timers: Timers) -> ServerRevocation<A> {
        let mut pages = pages.to_vec();
        pages.sort_unstable_by(|a, b| b.cmp(a));
        pages.dedup();
        ServerRevocation {
            client,
            timers,
            phase: ServerPhase::Notified,
            pages,
            unacked: None,
            deadline: now,
            tries: 0,
            forwarded: 0,
            held_since: None,
        }
    }

    /// The client revoked.
    pub fn client(&self) -> ClientId {
        self.client
    }

    /// Where it is.
    pub fn phase(&self) -> ServerPhase<A> {
        self.phase
    }

    /// Pages forwarded and acknowledged so far.
    pub fn forwarded(&self) -> u64 {
        self.forwarded
    }

    /// Whether the client's memory is free.
    pub fn is_freed(&self) -> bool {
        self.phase == ServerPhase::Freed
    }

    /// When the next [`poll`](ServerRevocation::poll) may have something to do.
    pub fn deadline(&self) -> u64 {
        self.deadline
    }

    /// Counts a try of something awaiting an answer: whether another try is allowed.
    fn retry(&mut self, now: u64) -> bool {
        if self.tries >= self.timers.tries {
            return false;
        }
        self.tries += 1;
        self.deadline = now.saturating_add(self.timers.retry_ns);
        true
    }

    /// What to do at `now`.
    pub fn poll(&mut self, now: u64) -> ServerAction<A> {
        match self.phase {
            ServerPhase::Notified if now >= self.deadline => {
                if self.retry(now) {
                    ServerAction::Notify
                } else {
                    self.phase = ServerPhase::Freed;
                    ServerAction::Free
                }
            }
            ServerPhase::Offloading(to) => match self.unacked {
                Some(vpn) if now >= self.deadline => {
                    if self.retry(now) {
                        ServerAction::Forward(vpn, to)
                    } else {
                        // The new server is gone: the pages stay here for the client.
                        self.unacked = None;
                        self.pages.clear();
                        self.phase = ServerPhase::Returning;
                        self.deadline = now.saturating_add(self.timers.idle_ns);
                        ServerAction::TellFailed
                    }
                }
                Some(_) => ServerAction::Wait,
                None => match self.pages.pop() {
                    Some(vpn) => {
                        self.unacked = Some(vpn);
                        self.tries = 0;
                        self.retry(now);
                        ServerAction::Forward(vpn, to)
                    }
                    None => {
                        self.phase = ServerPhase::Offloaded(to);
                        self.tries = 0;
                        self.retry(now);
                        ServerAction::TellDone
                    }
                },
            },
            ServerPhase::Offloaded(_) if now >= self.deadline => {
                if self.retry(now) {
                    ServerAction::TellDone
                } else {
                    // Told enough times: the pages are safe at the new server.
                    self.phase = ServerPhase::Freed;
                    ServerAction::Free
                }
            }
            ServerPhase::Returning if now >= self.deadline => {
                self.phase = ServerPhase::Freed;
                ServerAction::Free
            }
            _ => ServerAction::Wait,
        }
    }

    /// The client answered the notice at `now`: its new server, or `None` if it found none.
    pub fn replied(&mut self, now: u64, new: Option<A>) {
        if self.phase != ServerPhase::Notified {
            return;
        }
        self.tries = 0;
        match new {
            Some(to) => {
                self.phase = ServerPhase::Offloading(to);
                self.deadline = now;
            }
            None => {
                self.pages.clear();
                self.phase = ServerPhase::Returning;
                self.deadline = now.saturating_add(self.timers.idle_ns);
            }
        }
    }

    /// The client answered the notice at `now` with "hold the pages" but no new server yet
    /// (thesis step 3: the server asks the client back for the address). The notice is sent
    /// again every retry to ask, the client's answers keeping the pages held, for at most
    /// [`Timers::idle_ns`] from its first such answer: a client that never names a server
    /// then is dropped as a silent one.
    pub fn held(&mut self, now: u64) {
        if self.phase != ServerPhase::Notified {
            return;
        }
        let since = *self.held_since.get_or_insert(now);
        if now.saturating_sub(since) < self.timers.idle_ns {
            self.tries = 0;
            self.deadline = self.deadline.max(now.saturating_add(self.timers.retry_ns));
        }
    }

    /// The new server acknowledged forwarded page `vpn`.
    pub fn acked(&mut self, vpn: Vpn) {
        if matches!(self.phase, ServerPhase::Offloading(_)) && self.unacked == Some(vpn) {
            self.unacked = None;
            self.forwarded += 1;
        }
    }

    /// The client wrote `vpn` here (before it found a new server): it is forwarded too.
    pub fn written(&mut self, vpn: Vpn) {
        if matches!(self.phase, ServerPhase::Notified | ServerPhase::Offloading(_))
            && let Err(at) = self.pages.binary_search_by(|p| vpn.cmp(p))
        {
            self.pages.insert(at, vpn);
        }
    }

    /// The client freed `vpn` here: it is not forwarded.
    pub fn freed_page(&mut self, vpn: Vpn) {
        self.pages.retain(|&p| p != vpn);
    }

    /// The client made contact at `now` (a read while bringing its pages back keeps them).
    pub fn contact(&mut self, now: u64) {
        if self.phase == ServerPhase::Returning {
            self.deadline = self.deadline.max(now.saturating_add(self.timers.idle_ns));
        }
    }

    /// The client released its memory here: free it.
    pub fn released(&mut self) -> ServerAction<A> {
        self.phase = ServerPhase::Freed;
        ServerAction::Free
    }
}

/// Where the client sends a request during a revocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target<A> {
    /// The old (revoking) server.
    Old(A),
    /// The new server.
    New(A),
    /// Not yet: the page is on its way to the server that will answer (double revocation).
    Wait,
}

/// Where the client is in being revoked by one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientPhase<A> {
    /// Looking for a new server.
    Searching,
    /// The old server forwards the pages to this new one.
    Moving(A),
    /// Found none: the pages come back from the old server, then it is released.
    Returning,
    /// Revoked by the new server too while moving: the pages come back from the new one.
    DoubleRevoked(A),
    /// Every page is at this new server: the client uses it alone.
    Switched(A),
    /// The pages are back with the client (or dropped, a local mirror holding them) and the
    /// servers released.
    Released,
}

/// A client revoked by one server; see the [module](self) documentation.
#[derive(Clone, Debug)]
pub struct ClientRevocation<A> {
    old: A,
    phase: ClientPhase<A>,
    /// Pages written to the new server since the move began.
    tracked: BTreeSet<Vpn>,
    /// Whether the old server said its offload is complete.
    offloaded: bool,
}

impl<A: Copy + Eq> ClientRevocation<A> {
    /// The client was told by `old` that it is revoked.
    pub fn new(old: A) -> ClientRevocation<A> {
        ClientRevocation {
            old,
            phase: ClientPhase::Searching,
            tracked: BTreeSet::new(),
            offloaded: false,
        }
    }

    /// The revoking server.
    pub fn old(&self) -> A {
        self.old
    }

    /// Where it is.
    pub fn phase(&self) -> ClientPhase<A> {
        self.phase
    }

    /// Pages sent to the new server since the move began.
    pub fn tracked(&self) -> usize {
        self.tracked.len()
    }

    /// A new server `new` admitted the client: reply to the old server with it.
    pub fn found(&mut self, new: A) {
        if self.phase == ClientPhase::Searching {
            self.phase = ClientPhase::Moving(new);
        }
    }

    /// No new server could be had: reply so, and tell the owner (its pages must come back).
    pub fn not_found(&mut self) {
        if self.phase == ClientPhase::Searching {
            self.phase = ClientPhase::Returning;
        }
    }

    /// Where an eviction of `vpn` goes (and, while moving, the page is tracked as the new
    /// server's).
    pub fn write_target(&mut self, vpn: Vpn) -> Target<A> {
        match self.phase {
            ClientPhase::Moving(new) | ClientPhase::DoubleRevoked(new) => {
                self.tracked.insert(vpn);
                Target::New(new)
            }
            ClientPhase::Switched(new) => Target::New(new),
            // While searching, and while the pages come back, the old server still has them.
            ClientPhase::Searching | ClientPhase::Returning | ClientPhase::Released => {
                Target::Old(self.old)
            }
        }
    }

    /// Where a fault on `vpn` is sent.
    pub fn read_target(&self, vpn: Vpn) -> Target<A> {
        match self.phase {
            ClientPhase::Moving(new) if self.tracked.contains(&vpn) => Target::New(new),
            ClientPhase::Switched(new) => Target::New(new),
            ClientPhase::DoubleRevoked(new) => {
                if self.tracked.contains(&vpn) || self.offloaded {
                    Target::New(new)
                } else {
                    Target::Wait
                }
            }
            _ => Target::Old(self.old),
        }
    }

    /// The client freed `vpn`: no longer tracked (the caller frees it on every server that
    /// may hold it: both while moving).
    pub fn free(&mut self, vpn: Vpn) {
        self.tracked.remove(&vpn);
    }

    /// The old server said every page is at the new server: release the old one. In a plain
    /// move, switch over: the result is the new server, to tell and use alone from now on.
    pub fn offload_done(&mut self) -> Option<A> {
        self.offloaded = true;
        match self.phase {
            ClientPhase::Moving(new) => {
                self.phase = ClientPhase::Switched(new);
                self.tracked.clear();
                Some(new)
            }
            _ => None,
        }
    }

    /// The old server said the new one stopped answering: the pages it still had stay there
    /// and must come back as without a new server (pages sent to the new server are lost with
    /// it unless mirrored: the result is how many).
    pub fn offload_failed(&mut self) -> usize {
        if let ClientPhase::Moving(_) = self.phase {
            self.phase = ClientPhase::Returning;
        }
        core::mem::take(&mut self.tracked).len()
    }

    /// The new server revoked the client too. While moving, that is a double revocation: the
    /// client backs off remote paging and reads from the new server only (true); otherwise
    /// nothing changes here (false: the caller starts a revocation for that server).
    pub fn revoked_by_new(&mut self) -> bool {
        match self.phase {
            ClientPhase::Moving(new) => {
                self.phase = ClientPhase::DoubleRevoked(new);
                true
            }
            _ => false,
        }
    }

    /// The client has its pages back (or dropped them, a local mirror holding them) and
    /// released the servers.
    pub fn released(&mut self) {
        self.phase = ClientPhase::Released;
        self.tracked.clear();
    }
}

/// The new server's rule during a move: the client's own copies beat forwarded ones.
#[derive(Clone, Debug, Default)]
pub struct ForwardFilter {
    /// Pages the client wrote (or freed) here since the move began.
    from_client: BTreeSet<Vpn>,
}

impl ForwardFilter {
    /// A move begins: nothing from the client yet.
    pub fn new() -> ForwardFilter {
        ForwardFilter::default()
    }

    /// The client wrote or freed `vpn` here.
    pub fn from_client(&mut self, vpn: Vpn) {
        self.from_client.insert(vpn);
    }

    /// Whether a copy of `vpn` forwarded by the old server is to be stored (false: discard it,
    /// the client's is newer).
    pub fn accept(&self, vpn: Vpn) -> bool {
        !self.from_client.contains(&vpn)
    }

    /// Pages the client wrote or freed since the move began.
    pub fn len(&self) -> usize {
        self.from_client.len()
    }

    /// Whether the client wrote or freed nothing since the move began.
    pub fn is_empty(&self) -> bool {
        self.from_client.is_empty()
    }
}

#[cfg(test)]
mod tests;
