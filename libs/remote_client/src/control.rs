//! The client's part of the control plane: servers found through traders, and revocation
//! answered with the client's active participation (Heracles §10.4, §10.5), by
//! `remote_control`'s [`Selection`] and [`ClientRevocation`].
//!
//! - **Traders.** With traders in its [`crate::Config`], a client whose static servers made
//!   no stream (or that has none) asks them: a trader's candidates are tried in turn with a
//!   `CreateStream` until one admits it; if all refuse the trader is asked once more, then the
//!   client gives up (no server: the backing store manager pages locally). An unreachable
//!   trader (no answer within its retries, [`TraderAsk`]) is passed over for the next. A
//!   mirroring client then finds its mirror the same way, its primary excluded. The second
//!   question waits [`crate::Config::requery_ns`] (2 s by default) after the first answer,
//!   so that servers still starting have advertised.
//! - **Growing.** Not spreading (`spread=no`), the servers the client is connected to are
//!   asked first to grow its reservation (`AddResources`, judged by the server against memory
//!   only); spreading, only when no trader answers ([`Selection`], §10.4 steps 1 and 4).
//! - **Revocation.** A server's `RevokeNotice` is taken between requests (never inside a
//!   transfer): the client answers `Hold(None)` (hold the pages), looks for a new server (the
//!   revoking one excluded), and replies `RevokeReply` naming the new server and its stream
//!   there. The server asks back meanwhile (its notice again): while the search goes on each
//!   question is answered `Hold(None)` at once, from inside the search's waits.
//!   The revoking server stops taking new pages; a page written again goes to the new server
//!   and is recorded there (the page map is the tracking of §10.5: a fault on it goes to the
//!   new server, a fault on any other to the old). When the old server says `OffloadDone`,
//!   every page it held is the new server's: the client tells the new server, releases the old
//!   stream, and counts the revocation ([`pager::remote::RemoteStats::revocations`]).
//! - **No new server.** The client replies `NoServer` and raises
//!   [`RemoteNotice::RevokedWithoutReplacement`]: its owner brings the pages back (reading
//!   them from the servers that hold them) and releases. A revocation by the server that is
//!   taking a move's pages (a double revocation) is answered so too: the client backs off
//!   remote paging, taking its pages back from the second server only; a read of a page the
//!   first has not forwarded yet waits for its offload to end.
//! - **Partial revocation.** A notice that wants fewer pages than the server's reservation:
//!   the client moves that many pages itself to another server (found as above, never one
//!   holding another copy of them) and says `OffloadDone` on the old stream, whose reservation
//!   shrinks; it places no more pages there than are left of it.
//! - **Refilling.** A loss that leaves pages with one copy: the client finds a new mirror (a
//!   server it neither uses nor lost) and copies them to it, a few between requests; with every
//!   server lost, a write looks for new ones now and then (`find_again`).

use alloc::vec::Vec;

use net_client::Transport;
use net_interface::{Endpoint, NetError};
use pager::PAGE_SIZE;
use pager::remote::RemoteNotice;
use remote_control::TraderAsk;
use remote_control::revoke::ClientRevocation;
use remote_control::select::{Selection, Step};
use rpp::client::{Outcome, Transfer};
use rpp::wire::{self, Message, OffloadTarget, Packet, RevokeAnswer, Role};

use crate::{Placement, RemoteClient, Server};

/// How long a trader's first answer is awaited (doubling after each timeout).
const TRADER_RTO_NS: u64 = 100_000_000;
/// Queries sent again before a trader is unreachable (100 ms doubling: 12.7 s in all, for a
/// trader still starting, whose first answer also waits for addresses to resolve).
const TRADER_RETRIES: u32 = 6;

/// Pages a call copies to a new mirror after a loss (between requests, so that no fault waits
/// for the whole stretch to cross the network).
const REFILL_PER_CALL: usize = 8;

/// How long a read waits for the first server of a double revocation to finish offloading
/// before it reads from that server after all (it may be gone).
const OFFLOAD_WAIT_NS: u64 = 10_000_000_000;

/// One revocation in progress: the old server's index and the machine.
struct Move {
    old: u8,
    machine: ClientRevocation<u8>,
    /// The answer given, sent again if the notice comes again.
    answer: RevokeAnswer,
}

/// What a client's control plane did, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControlCounts {
    /// Reservations grown on a connected server (`AddResources`) instead of a new server.
    pub grown: u32,
    /// `Hold(None)` answers to a revoking server that asked back while the client searched.
    pub holds: u32,
    /// Reads that waited for a double revocation's first server to finish offloading.
    pub waits: u32,
    /// Pages copied to a new mirror server after a loss left them with one copy.
    pub refilled: u64,
    /// Times the client found a server again after every server was lost.
    pub found_again: u32,
    /// Trader answers that came late (outside a query), dropped.
    pub late_answers: u64,
    /// Partial revocations answered by moving the pages wanted.
    pub partial: u32,
    /// Pages the client moved itself for partial revocations.
    pub pages_moved: u64,
}

/// The client's control state.
#[derive(Default)]
pub(crate) struct Control {
    /// Revocation notices that came and are not taken yet: the server, the pages it wants
    /// back, the notice's request id.
    notices: Vec<(u8, u64, u32)>,
    /// Partial revocations answered (server, the notice's request id): a late copy of their
    /// notice is not a new revocation.
    partials_done: Vec<(u8, u32)>,
    /// Servers that said their offload is done.
    done: Vec<u8>,
    moves: Vec<Move>,
    /// Trader answers that came outside a query (late): dropped.
    pub(crate) late_answers: u64,
    /// Reservations grown on a connected server (`AddResources`) instead of a new one taken.
    pub(crate) grown: u32,
    /// A loss left pages with one copy: the mirror is to be refilled.
    pub(crate) refill: bool,
    /// The server the lost mirror's copies are refilled to, once found.
    pub(crate) mirror_to: Option<u8>,
    /// No server for the refill, or for a client whose servers were all lost: when to look
    /// again (the client's clock).
    pub(crate) search_at: u64,
    /// `Hold(None)` answers given to a revoking server that asked back during a search.
    pub(crate) holds: u32,
    /// Reads that waited for a double revocation's first offload to finish.
    pub(crate) waits: u32,
    /// Pages copied to a new mirror after a loss left them with one copy.
    pub(crate) refilled: u64,
    /// Times the client found a server again after every server was lost.
    pub(crate) found_again: u32,
    /// Partial revocations answered by moving the pages wanted.
    pub(crate) partial: u32,
    /// Pages the client moved itself for partial revocations.
    pub(crate) pages_moved: u64,
}

impl Control {
    pub(crate) fn counts(&self) -> ControlCounts {
        ControlCounts {
            grown: self.grown,
            holds: self.holds,
            waits: self.waits,
            refilled: self.refilled,
            found_again: self.found_again,
            late_answers: self.late_answers,
            partial: self.partial,
            pages_moved: self.pages_moved,
        }
    }
}

impl<T: Transport> RemoteClient<T> {
    /// A control message from a server, taken for later (inside a transfer nothing is done):
    /// whether it was one of the control plane's.
    pub(crate) fn take_control(&mut self, from: Endpoint, packet: &Packet<'_>) -> bool {
        let Some(i) = self.server_of(from) else {
            if matches!(packet.message, Message::TraderAnswer { .. }) {
                self.control.late_answers += 1;
                return true;
            }
            return false;
        };
        match packet.message {
            Message::RevokeNotice { pages } => {
                let request = packet.header.request;
                if self.control.partials_done.contains(&(i, request)) || self.hold_still(i) {
                    return true;
                }
                if !self.control.notices.iter().any(|n| n.0 == i) {
                    self.control.notices.push((i, pages, request));
                }
                true
            }
            Message::OffloadDone { .. } => {
                if !self.control.done.contains(&i) {
                    self.control.done.push(i);
                }
                true
            }
            _ => false,
        }
    }

    /// Where a page placed at `p` is written now: a server that revoked the client gives way
    /// to the server its pages move to.
    pub(crate) fn redirect(&self, p: Placement) -> Placement {
        let to = |i: u8| self.servers[i as usize].moving_to.unwrap_or(i);
        Placement { primary: to(p.primary), mirror: p.mirror.map(to) }
    }

    /// Takes the notices and offload ends that came: see the [module](self) documentation.
    pub(crate) fn handle_control(&mut self) {
        while !self.control.notices.is_empty() {
            let (i, pages, request) = self.control.notices.remove(0);
            if self.servers[i as usize].lost || self.control.partials_done.contains(&(i, request)) {
                continue;
            }
            let part = pages > 0 && pages < self.servers[i as usize].reserved;
            if part && !self.control.moves.iter().any(|m| m.old == i) {
                self.revoked_in_part(i, pages, request);
            } else {
                self.revoked_by(i);
            }
        }
        while !self.control.done.is_empty() {
            let i = self.control.done.remove(0);
            self.offload_done(i);
        }
        if self.control.refill {
            let _ = self.refill_mirror(REFILL_PER_CALL);
        }
    }

    /// A loss left pages with one copy (their mirror lost, or their primary lost and the
    /// mirror promoted): copies up to `most` of them to a new mirror server, found first
    /// through the traders (never a server the client already uses: it holds the only
    /// copies). Page-ins go on coming from the surviving copy meanwhile, and a page written
    /// meanwhile is written to both, so that the refill only copies what nobody rewrote.
    /// Once every page has two copies again, a second loss loses nothing.
    pub(crate) fn refill_mirror(&mut self, most: usize) -> Result<(), NetError> {
        if !self.control.refill || self.live() == 0 {
            self.control.refill = false;
            return Ok(());
        }
        let target = self.control.mirror_to.filter(|&m| !self.servers[m as usize].lost);
        let m = match target {
            Some(m) => m,
            None => {
                let now = (self.clock)();
                if now < self.control.search_at || self.config.traders.is_empty() {
                    return Ok(());
                }
                // Not a server it uses (it holds the only copies), nor one it lost (the
                // trader may still name it).
                let exclude: Vec<Endpoint> = self.servers.iter().map(|s| s.control).collect();
                match self.acquire(Role::Mirror, &exclude)? {
                    Some(m) => {
                        self.control.mirror_to = Some(m);
                        self.config.mirror = true;
                        self.stats.servers = self.live() as u32;
                        m
                    }
                    None => {
                        self.control.search_at =
                            (self.clock)().saturating_add(self.config.requery_ns);
                        return Ok(());
                    }
                }
            }
        };
        let single: Vec<(u64, u8)> = self
            .pages
            .iter()
            .filter(|(_, p)| p.mirror.is_none() && p.primary != m)
            .take(most)
            .map(|(&vpn, p)| (vpn, p.primary))
            .collect();
        if single.is_empty() {
            self.control.refill = false;
            return Ok(());
        }
        for (vpn, from) in single {
            let key = self.servers[from as usize].key;
            let r = self.request();
            let read = Transfer::read(key, r, vpn, PAGE_SIZE as u32, self.config.params)
                .expect("a page fits");
            let t = self.run(alloc::vec![(from, read)])?.pop().expect("one transfer");
            let data = match t.outcome() {
                Some(Outcome::Done) if t.page().len() == PAGE_SIZE => t.page().to_vec(),
                Some(Outcome::Unreachable) => {
                    self.lose(from);
                    continue;
                }
                _ => continue,
            };
            let key = self.servers[m as usize].key;
            let r = self.request();
            let write =
                Transfer::write(key, r, vpn, data, self.config.params).expect("a page fits");
            let t = self.run(alloc::vec![(m, write)])?.pop().expect("one transfer");
            match t.outcome() {
                Some(Outcome::Done) => {
                    // Unless rewritten or freed meanwhile (then it has its copies already).
                    if let Some(p) = self.pages.get_mut(&vpn)
                        && p.primary == from
                        && p.mirror.is_none()
                    {
                        p.mirror = Some(m);
                        self.servers[m as usize].pages += 1;
                        self.stats.pages_written += 1;
                        self.control.refilled += 1;
                    }
                }
                Some(Outcome::Unreachable) => {
                    self.lose(m);
                    self.control.mirror_to = None;
                    return Ok(());
                }
                _ => {}
            }
        }
        self.count();
        Ok(())
    }

    /// Server `i` revoked the client.
    fn revoked_by(&mut self, i: u8) {
        // Notified again: the answer was lost; give it again.
        if let Some(m) = self.control.moves.iter().find(|m| m.old == i) {
            let answer = m.answer;
            let _ = self.ask(&[(i, Message::RevokeReply { answer })]);
            return;
        }
        // The server taking a move's pages revokes too: a double revocation. The client backs
        // off remote paging and takes its pages back from this (the second) server only; the
        // first keeps offloading to it ([`RemoteClient::await_offload`]).
        if let Some(m) = self
            .control
            .moves
            .iter_mut()
            .find(|m| m.machine.old() != i && self.servers[m.old as usize].moving_to == Some(i))
        {
            // Revoked again by it (its notice came again): the same answer, counted once.
            if m.machine.revoked_by_new() {
                self.notice = Some(RemoteNotice::RevokedWithoutReplacement);
                self.stats.revocations += 1;
            }
            let _ = self.ask(&[(i, Message::RevokeReply { answer: RevokeAnswer::NoServer })]);
            return;
        }
        // Hold the pages (thesis step 2): the server keeps them, and asks back for the new
        // server's address until the search below ends; each time it is told to hold still.
        let hold = RevokeAnswer::Hold(None);
        self.control.moves.push(Move { old: i, machine: ClientRevocation::new(i), answer: hold });
        let _ = self.ask(&[(i, Message::RevokeReply { answer: hold })]);
        let role = self.servers[i as usize].role;
        // Spreading, the servers the client has are not taken for a new stream but grown as
        // a last resort, when no trader answers ([`Selection`]).
        let exclude = alloc::vec![self.servers[i as usize].control];
        let found = self.acquire(role, &exclude).ok().flatten();
        let Some(k) = self.control.moves.iter().position(|m| m.old == i) else { return };
        let answer = match found {
            Some(j) => {
                self.control.moves[k].machine.found(j);
                let s = &self.servers[j as usize];
                let target =
                    OffloadTarget { server: s.data, stream: s.key.stream, token: s.key.token };
                self.servers[i as usize].moving_to = Some(j);
                RevokeAnswer::Hold(Some(target))
            }
            None => {
                self.control.moves[k].machine.not_found();
                self.notice = Some(RemoteNotice::RevokedWithoutReplacement);
                self.stats.revocations += 1;
                RevokeAnswer::NoServer
            }
        };
        self.control.moves[k].answer = answer;
        let _ = self.ask(&[(i, Message::RevokeReply { answer })]);
    }

    /// Server `i` wants `want` pages of its reservation back, less than all (a partial
    /// revocation): the client holds (answers `Hold(None)`), finds another server (growing a
    /// connected one, or a new one through the traders; never one holding another copy of
    /// the pages moved), moves that many of its pages there itself, the highest-numbered
    /// first (read from `i`, written to the new server, freed on `i`), and tells `i` it is
    /// done (`OffloadDone`): `i`'s reservation shrinks and the client places no more pages
    /// there than are left of it. With no other server it answers `NoServer` and backs off
    /// remote paging, as for a whole revocation.
    fn revoked_in_part(&mut self, i: u8, want: u64, request: u32) {
        let hold = RevokeAnswer::Hold(None);
        self.control.moves.push(Move { old: i, machine: ClientRevocation::new(i), answer: hold });
        let _ = self.ask(&[(i, Message::RevokeReply { answer: hold })]);
        let chosen: Vec<u64> = self
            .pages
            .iter()
            .rev()
            .filter(|(_, p)| p.primary == i || p.mirror == Some(i))
            .take(want as usize)
            .map(|(&vpn, _)| vpn)
            .collect();
        let mut exclude = alloc::vec![self.servers[i as usize].control];
        for vpn in &chosen {
            let p = self.pages[vpn];
            for k in [Some(p.primary), p.mirror].into_iter().flatten().filter(|&k| k != i) {
                let a = self.servers[k as usize].control;
                if !exclude.contains(&a) {
                    exclude.push(a);
                }
            }
        }
        let role = self.servers[i as usize].role;
        let found = self.acquire(role, &exclude).ok().flatten();
        // The new server is one more in use (the old one keeps the rest of the pages).
        self.stats.servers = self.live() as u32;
        let moved = match found {
            Some(j) => self.move_pages(i, j, &chosen).ok(),
            None => None,
        };
        let Some(k) = self.control.moves.iter().position(|m| m.old == i) else { return };
        if moved.is_none() {
            // Nowhere to move them: back off remote paging, as for a whole revocation.
            self.control.moves[k].machine.not_found();
            self.control.moves[k].answer = RevokeAnswer::NoServer;
            self.notice = Some(RemoteNotice::RevokedWithoutReplacement);
            self.stats.revocations += 1;
            let _ = self.ask(&[(i, Message::RevokeReply { answer: RevokeAnswer::NoServer })]);
            return;
        }
        self.control.moves.remove(k);
        self.control.partials_done.push((i, request));
        if self.control.partials_done.len() > 16 {
            self.control.partials_done.remove(0);
        }
        let _ = self.ask(&[(i, Message::OffloadDone { pages: want })]);
        let s = &mut self.servers[i as usize];
        s.reserved = s.reserved.saturating_sub(want);
        self.control.partial += 1;
        self.stats.revocations += 1;
    }

    /// Moves `pages` from server `i` to server `j`: each read from `i`, written to `j` and
    /// freed on `i`. An error (`Err(())`) if `i` or `j` failed one; the pages moved before
    /// stay moved.
    fn move_pages(&mut self, i: u8, j: u8, pages: &[u64]) -> Result<(), ()> {
        for &vpn in pages {
            let Some(&p) = self.pages.get(&vpn) else { continue };
            let key = self.servers[i as usize].key;
            let r = self.request();
            let read = Transfer::read(key, r, vpn, PAGE_SIZE as u32, self.config.params)
                .expect("a page fits");
            let t = self.run(alloc::vec![(i, read)]).map_err(|_| ())?.pop().expect("one");
            let data = match t.outcome() {
                Some(Outcome::Done) if t.page().len() == PAGE_SIZE => t.page().to_vec(),
                Some(Outcome::Unreachable) => {
                    self.lose(i);
                    return Err(());
                }
                _ => return Err(()),
            };
            let key = self.servers[j as usize].key;
            let r = self.request();
            let write =
                Transfer::write(key, r, vpn, data, self.config.params).expect("a page fits");
            let t = self.run(alloc::vec![(j, write)]).map_err(|_| ())?.pop().expect("one");
            match t.outcome() {
                Some(Outcome::Done) => {}
                Some(Outcome::Unreachable) => {
                    self.lose(j);
                    return Err(());
                }
                _ => return Err(()),
            }
            // The copy on `j` is the page's now; the one on `i` goes.
            let moved = Placement {
                primary: if p.primary == i { j } else { p.primary },
                mirror: p.mirror.map(|m| if m == i { j } else { m }),
            };
            self.pages.insert(vpn, moved);
            self.servers[j as usize].pages += 1;
            let s = &mut self.servers[i as usize];
            s.pages = s.pages.saturating_sub(1);
            self.stats.pages_written += 1;
            let key = self.servers[i as usize].key;
            let r = self.request();
            if let Ok(free) = Transfer::free(key, r, vpn, self.config.params) {
                let t = self.run(alloc::vec![(i, free)]).map_err(|_| ())?;
                if t[0].outcome() == Some(Outcome::Unreachable) {
                    self.lose(i);
                }
            }
            self.control.pages_moved += 1;
        }
        self.count();
        Ok(())
    }

    /// A revoking server asked back while the client still looks for a new server: it is
    /// told at once to hold the pages (`RevokeReply` with `Hold(None)`), without waiting for
    /// the search. Whether it was such a question.
    fn hold_still(&mut self, i: u8) -> bool {
        let searching = self.control.moves.iter().any(|m| {
            m.old == i && m.machine.phase() == remote_control::revoke::ClientPhase::Searching
        });
        if searching {
            let s = self.servers[i as usize];
            let request = self.request();
            let header = wire::Header { stream: s.key.stream, token: s.key.token, request };
            let reply = Message::RevokeReply { answer: RevokeAnswer::Hold(None) };
            let _ = self.send_packet(s.data, &Packet { header, message: reply });
            self.control.holds += 1;
        }
        searching
    }

    /// Whether a read of a page whose latest copy is on server `i` must wait: `i` revoked
    /// the client, which moves its pages to a server that revoked it too (a double
    /// revocation). The pages come back from that second server only, so a page not yet
    /// forwarded waits for the first server's offload to finish.
    pub(crate) fn must_wait(&self, i: u8) -> bool {
        self.control.moves.iter().any(|m| {
            m.old == i
                && matches!(
                    m.machine.phase(),
                    remote_control::revoke::ClientPhase::DoubleRevoked(_)
                )
        })
    }

    /// Waits (at most [`OFFLOAD_WAIT_NS`]) for server `i` to finish offloading to the second
    /// server of a double revocation, then switches the pages over: whether it finished.
    pub(crate) fn await_offload(&mut self, i: u8) -> Result<bool, NetError> {
        let until = (self.clock)().saturating_add(OFFLOAD_WAIT_NS);
        self.control.waits += 1;
        while !self.control.done.contains(&i) {
            let Some((from, len)) = self.receive(until)? else { break };
            let bytes = self.buf[..len].to_vec();
            match (self.server_of(from), wire::decode(&bytes)) {
                (Some(_), Ok(p)) => self.control(from, &p),
                _ => self.strays += 1,
            }
        }
        let finished = self.control.done.contains(&i);
        self.handle_control();
        Ok(finished)
    }

    /// Server `i` forwarded every page to the new server: switch over, release `i`.
    fn offload_done(&mut self, i: u8) {
        let Some(k) = self.control.moves.iter().position(|m| m.old == i) else { return };
        let mut m = self.control.moves.remove(k);
        let switched = m.machine.offload_done();
        let Some(j) = self.servers[i as usize].moving_to else { return };
        for p in self.pages.values_mut() {
            if p.primary == i {
                p.primary = j;
            }
            if p.mirror == Some(i) {
                p.mirror = Some(j);
            }
        }
        let moved = self.servers[i as usize].pages;
        self.servers[j as usize].pages += moved;
        let pages = moved;
        let _ = self.ask(&[(j, Message::OffloadDone { pages })]);
        let _ = self.ask(&[(i, Message::Release)]);
        let s = &mut self.servers[i as usize];
        s.lost = true;
        s.pages = 0;
        s.moving_to = None;
        if switched.is_some() {
            self.stats.revocations += 1;
        }
        self.stats.servers = self.servers.iter().filter(|s| !s.lost).count() as u32;
    }

    /// Every server was lost: looks for new ones through the traders, at most once every
    /// [`crate::Config::requery_ns`]. Whether the client has a server again; its pages come
    /// back to it as its owner writes them (the backing store manager refills the new server
    /// from the disk).
    pub(crate) fn find_again(&mut self) -> bool {
        let now = (self.clock)();
        // Not before the owner heard that the servers were lost (its pages with them).
        let untold = self.notice == Some(RemoteNotice::ServersLost);
        if self.config.traders.is_empty() || now < self.control.search_at || untold {
            return false;
        }
        let _ = self.acquire_initial();
        if self.live() == 0 {
            self.control.search_at = (self.clock)().saturating_add(self.config.requery_ns);
            return false;
        }
        self.told_lost = false;
        self.control.found_again += 1;
        true
    }

    /// Finds the client's first servers through its traders when its static servers made no
    /// stream: a primary, and a mirror if it mirrors.
    pub(crate) fn acquire_initial(&mut self) -> Result<(), NetError> {
        if self.live() == 0 {
            let Some(p) = self.acquire(Role::Primary, &[])? else { return Ok(()) };
            if self.config.mirror {
                let exclude = alloc::vec![self.servers[p as usize].control];
                if self.acquire(Role::Mirror, &exclude)?.is_none() {
                    self.config.mirror = false;
                }
            }
        } else if self.config.mirror && self.live_with(Role::Mirror) == 0 {
            let exclude: Vec<Endpoint> =
                self.servers.iter().filter(|s| !s.lost).map(|s| s.control).collect();
            if self.acquire(Role::Mirror, &exclude)?.is_some() {
                self.config.mirror = true;
            }
        }
        self.stats.servers = self.live() as u32;
        Ok(())
    }

    /// Finds a server with room for the client's pages in `role` by [`Selection`] over the
    /// traders, never one of `exclude`: its index, with a stream made, or `None`.
    pub(crate) fn acquire(
        &mut self,
        role: Role,
        exclude: &[Endpoint],
    ) -> Result<Option<u8>, NetError> {
        let traders = self.config.traders.clone();
        let connected: Vec<Endpoint> =
            self.servers.iter().filter(|s| !s.lost).map(|s| s.control).collect();
        // Not spreading, a connected server is asked to grow first; spreading, only when no
        // trader answers (§10.4 steps 1 and 4).
        let mut sel = Selection::new(self.config.spread, traders.len(), &[], &connected, exclude);
        let bytes = self.config.pages.saturating_mul(PAGE_SIZE as u64);
        let mut answered = false;
        for _ in 0..64 {
            match sel.step() {
                Step::AskTrader(t) => {
                    if answered {
                        // Asked once more: after a while, for servers to advertise.
                        self.pause(self.config.requery_ns)?;
                    }
                    let answer = self.query(traders[t], bytes)?;
                    answered |= answer.is_some();
                    sel.trader_answered(answer.as_deref());
                }
                Step::Create(a) => {
                    let made = self.create_on(a, role)?;
                    sel.server_answered(made.is_some());
                }
                Step::Grow(a) => {
                    let grown = self.grow_on(a)?;
                    sel.server_answered(grown);
                }
                Step::Done(a) => {
                    return Ok(self
                        .servers
                        .iter()
                        .position(|s| s.control == a && !s.lost)
                        .map(|i| i as u8));
                }
                Step::GiveUp => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Waits `ns`, taking what comes meanwhile.
    fn pause(&mut self, ns: u64) -> Result<(), NetError> {
        let until = (self.clock)().saturating_add(ns);
        while let Some((from, len)) = self.receive(until)? {
            let bytes = self.buf[..len].to_vec();
            match (self.server_of(from), wire::decode(&bytes)) {
                (Some(_), Ok(p)) => self.control(from, &p),
                (None, Ok(p)) if matches!(p.message, Message::TraderAnswer { .. }) => {
                    self.control.late_answers += 1
                }
                _ => self.strays += 1,
            }
        }
        Ok(())
    }

    /// Asks `trader` for servers with `bytes`: their endpoints, or `None` if it did not answer.
    fn query(&mut self, trader: Endpoint, bytes: u64) -> Result<Option<Vec<Endpoint>>, NetError> {
        let request = self.request();
        let mut ask = TraderAsk::new(trader, bytes, request, TRADER_RTO_NS, TRADER_RETRIES);
        let mut sends: Vec<(Endpoint, Vec<u8>)> = Vec::new();
        ask.send((self.clock)(), &mut |to, b| sends.push((to, b.to_vec())));
        loop {
            for (to, b) in sends.drain(..) {
                self.control_sent += 1;
                crate::send(&mut self.session, to, &b)?;
            }
            match self.receive(ask.deadline())? {
                Some((from, len)) => {
                    let bytes = self.buf[..len].to_vec();
                    let Ok(p) = wire::decode(&bytes) else {
                        self.strays += 1;
                        continue;
                    };
                    if let Some(c) = ask.on_packet(from, &p) {
                        self.control_received += 1;
                        return Ok(Some(c.iter().map(|c| c.server).collect()));
                    }
                    if self.server_of(from).is_some() {
                        self.control(from, &p);
                    } else {
                        self.strays += 1;
                    }
                }
                None => {
                    let now = (self.clock)();
                    if ask.timeout(now, &mut |to, b| sends.push((to, b.to_vec()))) {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Creates the client's stream on `addr` in `role`: the new server's index, or `None` if
    /// it refused or did not answer.
    fn create_on(&mut self, addr: Endpoint, role: Role) -> Result<Option<u8>, NetError> {
        let fresh = Server {
            control: addr,
            data: addr,
            key: Default::default(),
            role,
            lost: true,
            pages: 0,
            reserved: self.config.pages,
            moving_to: None,
        };
        // A lost server's slot that nothing names any more is taken again.
        let free = (0..self.servers.len() as u8).find(|&k| {
            let s = &self.servers[k as usize];
            s.lost
                && s.moving_to.is_none()
                && self.servers.iter().all(|o| o.moving_to != Some(k))
                && self.control.moves.iter().all(|m| m.old != k)
                && self.control.mirror_to != Some(k)
                && self.pages.values().all(|p| p.primary != k && p.mirror != Some(k))
        });
        let (i, reused) = match free {
            Some(k) => (k, Some(core::mem::replace(&mut self.servers[k as usize], fresh))),
            None if self.servers.len() < crate::MAX_SERVERS => {
                self.servers.push(fresh);
                (self.servers.len() as u8 - 1, None)
            }
            None => return Ok(None),
        };
        let create = Message::CreateStream {
            pages: self.config.pages,
            page_size: PAGE_SIZE as u32,
            role,
            has_local_disk: self.config.local_disk,
            cpu: self.config.cpu,
            net: self.config.net,
        };
        let answers = self.ask(&[(i, create)])?;
        match answers.into_iter().next().flatten() {
            Some(crate::Answer::Created { stream, token, data_port }) => {
                let s = &mut self.servers[i as usize];
                s.key = rpp::client::StreamKey { stream, token };
                if data_port != 0 {
                    s.data.port = data_port;
                }
                s.lost = false;
                Ok(Some(i))
            }
            _ => {
                match reused {
                    Some(old) => self.servers[i as usize] = old,
                    None => {
                        self.servers.pop();
                    }
                }
                Ok(None)
            }
        }
    }

    /// Asks connected server `addr` to grow the client's reservation there by the client's
    /// pages (`AddResources`, checked by the server against memory only): whether it did.
    fn grow_on(&mut self, addr: Endpoint) -> Result<bool, NetError> {
        let Some(i) = self.servers.iter().position(|s| s.control == addr && !s.lost) else {
            return Ok(false);
        };
        let grow = Message::AddResources { pages: self.config.pages };
        let answers = self.ask(&[(i as u8, grow)])?;
        let grown = matches!(answers.first(), Some(Some(crate::Answer::Created { .. })));
        if grown {
            self.control.grown += 1;
            self.servers[i].reserved += self.config.pages;
        }
        Ok(grown)
    }
}
