//! Revocation with the client's active participation (Heracles §10.5) in the server: the
//! victims chosen by `remote_control`'s five rounds, each revoked by its
//! [`ServerRevocation`], and the client's pages offloaded to the new server it names.
//!
//! - [`Server::revoke`] picks clients (not already being revoked) until their reservations
//!   cover the bytes wanted back ([`remote_control::choose_victims`]: silent too long,
//!   diskless last, mirrors first, extra-time-only first, the most memory), and starts a
//!   revocation for each: a `RevokeNotice` to the client (where its `CreateStream` came from),
//!   sent again until it answers.
//! - The client's `RevokeReply` names its new server and its stream there
//!   (`RevokeAnswer::Hold(Some(target))`): the server forwards every page of the stream to it,
//!   one at a time, each a write flagged `OFFLOAD` (the new server keeps the client's own copy
//!   if it has one), and when all are acknowledged tells the client `OffloadDone`; the client
//!   releases the stream and its memory is free. `RevokeAnswer::Hold(None)`: the client holds
//!   the pages and is still looking for a new server; the server asks back (the notice again,
//!   every retry) until it names one, for at most the revocation's idle time. `RevokeAnswer::NoServer`: the client reads its
//!   pages back and releases the stream; the server keeps it while the client makes contact.
//! - A client that never answers the notice is dropped after its retries (its memory freed:
//!   a silent client is a dead one).
//! - [`Server::revoke_part`] takes back part of one client's reservation: the notice names the
//!   pages wanted, the client moves that many pages to another server itself (the server
//!   forwards nothing), frees them here and says `OffloadDone` on its own stream; the
//!   reservation then shrinks. `Hold` answers keep it waiting, `NoServer` makes it wait for
//!   the client's release as in a whole revocation.
//!
//! The answers of the new server to the forwarded writes come to this server's port under the
//! new server's stream and token: [`Server::receive`] gives them to the offload's transfers
//! before checking a packet against its own streams.

use alloc::vec::Vec;

use net_interface::Endpoint;
use remote_control::revoke::{ServerAction, ServerPhase, ServerRevocation, Timers};
use remote_control::{Candidate, choose_victims};
use rpp::client::{Outcome, Params, StreamKey, Transfer, Transfers};
use rpp::rtt::RttConfig;
use rpp::wire::{Header, Message, OffloadTarget, Packet, RevokeAnswer, Role};

use crate::Server;

/// One client being revoked.
pub(crate) struct Revoking {
    stream: u32,
    machine: ServerRevocation<OffloadTarget>,
    /// The page whose forwarding transfer is in flight.
    in_flight: Option<u64>,
    /// Whether the client was told the offload is done (counted as moved).
    told: bool,
    /// Whether the client answered the notice.
    answered: bool,
}

/// Part of one client's reservation being revoked: the client moves that many pages off
/// this server itself, then says so (`OffloadDone` on its stream) and the reservation shrinks.
pub(crate) struct Partial {
    stream: u32,
    /// Pages of the reservation wanted back.
    pages: u64,
    /// The request id of every notice of this revocation (a late copy is the same question).
    request: u32,
    deadline: u64,
    tries: u32,
    /// When the client first said to hold (it moves the pages meanwhile).
    held_since: Option<u64>,
    /// The client found no server: it takes every page back and releases the stream.
    returning: bool,
}

/// What the server's revocations did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RevokeCounts {
    /// Clients revoked.
    pub revoked: u64,
    /// Of them, moved to a new server (every page forwarded).
    pub moved: u64,
    /// Of them, that found no new server and took their pages back.
    pub returned: u64,
    /// Of them, dropped: they never answered, or their new server stopped answering.
    pub abandoned: u64,
    /// Pages forwarded and acknowledged.
    pub pages_forwarded: u64,
    /// "Hold the pages" answers without a new server yet (each one asked back later).
    pub held: u64,
    /// Partial revocations started ([`Server::revoke_part`]).
    pub partial: u64,
    /// Of them, ended by the client moving the pages: the reservation shrank.
    pub partial_done: u64,
    /// Pages of reservations given back by partial revocations.
    pub pages_given_back: u64,
}

/// The server's revocations in progress.
pub(crate) struct Revocations {
    list: Vec<Revoking>,
    partials: Vec<Partial>,
    transfers: Transfers<u32>,
    timers: Timers,
    pub(crate) counts: RevokeCounts,
    next_request: u32,
}

impl Default for Revocations {
    fn default() -> Revocations {
        Revocations {
            list: Vec::new(),
            partials: Vec::new(),
            transfers: Transfers::new(RttConfig::LAN),
            // Forwarded pages are retried by their transfers; the machine's own retry only
            // re-issues a page whose transfer gave up.
            timers: Timers { retry_ns: 500_000_000, tries: 20, idle_ns: 20_000_000_000 },
            counts: RevokeCounts::default(),
            next_request: 1,
        }
    }
}

impl Revocations {
    /// Whether `stream` is being revoked, whole or in part.
    pub(crate) fn contains(&self, stream: u32) -> bool {
        self.list.iter().any(|r| r.stream == stream)
            || self.partials.iter().any(|p| p.stream == stream)
    }

    fn get(&mut self, stream: u32) -> Option<&mut Revoking> {
        self.list.iter_mut().find(|r| r.stream == stream)
    }

    /// The stream whose offload goes to `from` under the new server's `stream`.
    fn offloading_to(&self, from: Endpoint, stream: u32) -> Option<u32> {
        self.list.iter().find_map(|r| match r.machine.phase() {
            ServerPhase::Offloading(t) if t.server == from && t.stream == stream => Some(r.stream),
            _ => None,
        })
    }

    fn request(&mut self) -> u32 {
        let r = self.next_request;
        self.next_request = self.next_request.wrapping_add(1).max(1);
        r
    }

    /// Bytes of the reservations being revoked.
    pub(crate) fn pending(&self) -> usize {
        self.list.len()
    }
}

impl Server {
    /// Revokes clients at `now` until `bytes` of their reservations come back (clients already
    /// being revoked count towards them): how many clients were newly revoked.
    pub fn revoke(&mut self, now: u64, bytes: u64, out: &mut dyn FnMut(Endpoint, &[u8])) -> usize {
        let already: u64 = self
            .mem
            .streams
            .values()
            .filter(|s| self.revocations.contains(s.report.stream))
            .map(|s| s.report.reserved * u64::from(s.page_size))
            .sum();
        let need = bytes.saturating_sub(already);
        if need == 0 {
            return 0;
        }
        let candidates: Vec<Candidate> = self
            .mem
            .streams
            .values()
            .filter(|s| !self.revocations.contains(s.report.stream))
            .map(|s| Candidate {
                id: u64::from(s.report.stream),
                memory: s.report.reserved * u64::from(s.page_size),
                has_disk: s.report.local_disk,
                mirror: s.report.role == Role::Mirror,
                extra_only: s.report.cpu.slice_ns == 0,
                last_contact: s.last_contact,
            })
            .collect();
        let victims = choose_victims(&candidates, now, need);
        for v in &victims {
            let stream = v.id as u32;
            let pages: Vec<u64> = self
                .mem
                .streams
                .get(&stream)
                .map_or(Vec::new(), |s| s.pages.keys().copied().collect());
            let timers = self.revocations.timers;
            self.revocations.list.push(Revoking {
                stream,
                machine: ServerRevocation::new(u64::from(stream), &pages, now, timers),
                in_flight: None,
                told: false,
                answered: false,
            });
            self.revocations.counts.revoked += 1;
        }
        self.poll_revocations(now, out);
        victims.len()
    }

    /// Revokes `pages` pages of `stream`'s reservation at `now`, less than all of it: the
    /// client is told (`RevokeNotice` with the pages wanted, sent again every retry until it
    /// answers), moves that many of its pages to another server itself, frees them here and
    /// says so (`OffloadDone` on its stream); the reservation then shrinks by `pages`. A client
    /// that finds no server takes every page back and releases the stream; one that stays
    /// silent is dropped as in a whole revocation. False (nothing done) for a stream that is
    /// not open, is being revoked already, or whose whole reservation that would be.
    pub fn revoke_part(
        &mut self,
        now: u64,
        stream: u32,
        pages: u64,
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) -> bool {
        let Some(s) = self.mem.streams.get(&stream) else { return false };
        if pages == 0 || pages >= s.report.reserved || self.revocations.contains(stream) {
            return false;
        }
        let request = self.revocations.request();
        self.revocations.partials.push(Partial {
            stream,
            pages,
            request,
            deadline: now,
            tries: 0,
            held_since: None,
            returning: false,
        });
        self.revocations.counts.partial += 1;
        self.poll_revocations(now, out);
        true
    }

    /// Moves the partial revocations on at `now`: notices sent again, silent clients dropped.
    fn poll_partials(&mut self, now: u64, out: &mut dyn FnMut(Endpoint, &[u8])) {
        let timers = self.revocations.timers;
        let mut k = 0;
        while k < self.revocations.partials.len() {
            let p = &mut self.revocations.partials[k];
            if now < p.deadline {
                k += 1;
                continue;
            }
            if p.returning || p.tries >= timers.tries {
                // Silent, or taking its pages back too long: its memory is freed.
                let stream = p.stream;
                self.revocations.partials.remove(k);
                self.revocations.counts.abandoned += 1;
                self.close(stream);
                continue;
            }
            p.tries += 1;
            p.deadline = now.saturating_add(timers.retry_ns);
            let (stream, pages, request) = (p.stream, p.pages, p.request);
            self.tell_as(stream, request, Message::RevokeNotice { pages }, out);
            k += 1;
        }
    }

    /// The client of `stream` says it moved `pages` pages off this server (`OffloadDone` on
    /// its own stream): a partial revocation ends and the reservation shrinks by the pages
    /// wanted. False if no partial revocation of `stream` is under way.
    pub(crate) fn partial_moved(&mut self, stream: u32) -> bool {
        let Some(k) = self.revocations.partials.iter().position(|p| p.stream == stream) else {
            return false;
        };
        let p = self.revocations.partials.remove(k);
        if let Some(s) = self.mem.streams.get_mut(&stream) {
            let give = p.pages.min(s.report.reserved);
            s.report.reserved -= give;
            self.reserved_bytes = self.reserved_bytes.saturating_sub(give * u64::from(s.page_size));
            self.revocations.counts.pages_given_back += give;
        }
        self.revocations.counts.partial_done += 1;
        true
    }

    /// Moves the revocations on at `now`: notices, forwarded pages, ends.
    pub fn poll_revocations(&mut self, now: u64, out: &mut dyn FnMut(Endpoint, &[u8])) {
        self.poll_partials(now, out);
        // The forwarding transfers: timeouts, then ends.
        let targets: Vec<(u32, Endpoint)> = self
            .revocations
            .list
            .iter()
            .filter_map(|r| match r.machine.phase() {
                ServerPhase::Offloading(t) => Some((r.stream, t.server)),
                _ => None,
            })
            .collect();
        let to = |peer: u32| targets.iter().find(|(s, _)| *s == peer).map(|(_, e)| *e);
        self.revocations.transfers.poll_timeout(now, &mut |peer, b| {
            if let Some(e) = to(peer) {
                out(e, b)
            }
        });
        self.finish_transfers();
        let mut i = 0;
        while i < self.revocations.list.len() {
            let stream = self.revocations.list[i].stream;
            loop {
                let action = self.revocations.list[i].machine.poll(now);
                match action {
                    ServerAction::Wait => break,
                    ServerAction::Notify => {
                        let pages = self.mem.streams.get(&stream).map_or(0, |s| s.report.reserved);
                        self.tell(stream, Message::RevokeNotice { pages }, out);
                        break;
                    }
                    ServerAction::Forward(vpn, target) => {
                        if self.revocations.list[i].in_flight == Some(vpn) {
                            break;
                        }
                        let page = self.mem.streams.get(&stream).and_then(|s| s.pages.get(&vpn));
                        let Some(page) = page.cloned() else {
                            // Freed meanwhile: nothing to forward.
                            self.revocations.list[i].machine.acked(vpn);
                            continue;
                        };
                        let key = StreamKey { stream: target.stream, token: target.token };
                        let request = self.revocations.request();
                        let Ok(t) = Transfer::offload(key, request, vpn, page, Params::default())
                        else {
                            self.revocations.list[i].machine.acked(vpn);
                            continue;
                        };
                        self.revocations.list[i].in_flight = Some(vpn);
                        self.revocations
                            .transfers
                            .start(now, stream, t, &mut |_, b| out(target.server, b));
                        break;
                    }
                    ServerAction::TellDone => {
                        let r = &mut self.revocations.list[i];
                        if !r.told {
                            r.told = true;
                            self.revocations.counts.moved += 1;
                        }
                        let pages = self.revocations.list[i].machine.forwarded();
                        self.tell(stream, Message::OffloadDone { pages }, out);
                        break;
                    }
                    ServerAction::TellFailed => {
                        // The new server is gone: the client hears the notice again and
                        // finds another, or takes its pages back.
                        self.revocations.counts.abandoned += 1;
                        break;
                    }
                    ServerAction::Free => {
                        if !self.revocations.list[i].answered {
                            self.revocations.counts.abandoned += 1;
                        }
                        self.close(stream);
                        break;
                    }
                }
            }
            if self.revocations.list[i].machine.is_freed() {
                let r = self.revocations.list.remove(i);
                self.revocations.transfers.forget(r.stream);
            } else {
                i += 1;
            }
        }
    }

    /// Takes the forwarding transfers that ended.
    fn finish_transfers(&mut self) {
        while let Some(f) = self.revocations.transfers.take_finished() {
            let Some(r) = self.revocations.get(f.peer) else { continue };
            if r.in_flight == Some(f.transfer.vpn()) {
                r.in_flight = None;
                if f.transfer.outcome() == Some(Outcome::Done) {
                    r.machine.acked(f.transfer.vpn());
                    self.revocations.counts.pages_forwarded += 1;
                }
            }
        }
    }

    /// Sends `message` to `stream`'s client under its stream's header.
    fn tell(&mut self, stream: u32, message: Message<'_>, out: &mut dyn FnMut(Endpoint, &[u8])) {
        let request = self.revocations.request();
        self.tell_as(stream, request, message, out);
    }

    /// Sends `message` to `stream`'s client under its stream's header and `request`.
    fn tell_as(
        &mut self,
        stream: u32,
        request: u32,
        message: Message<'_>,
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) {
        let Some(s) = self.mem.streams.get(&stream) else { return };
        let (client, token) = (s.report.client, s.token);
        let header = Header { stream, token, request };
        if let Ok(len) = rpp::wire::encode(&Packet { header, message }, &mut self.buf) {
            out(client, &self.buf[..len]);
        }
    }

    /// A packet from `from` that answers a forwarded page (it names the new server's stream):
    /// taken by the offload's transfers (true), or not one (false).
    pub(crate) fn offload_answer(
        &mut self,
        now: u64,
        from: Endpoint,
        bytes: &[u8],
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) -> bool {
        let Ok(p) = rpp::wire::decode(bytes) else { return false };
        let Some(stream) = self.revocations.offloading_to(from, p.header.stream) else {
            return false;
        };
        self.revocations.transfers.on_packet(now, stream, bytes, &mut |_, b| out(from, b));
        self.finish_transfers();
        self.poll_revocations(now, out);
        true
    }

    /// A revoked client's answer on its stream, at `now`.
    pub(crate) fn revoke_reply(&mut self, now: u64, stream: u32, answer: RevokeAnswer) {
        let timers = self.revocations.timers;
        if let Some(p) = self.revocations.partials.iter_mut().find(|p| p.stream == stream) {
            match answer {
                // Moving the pages (a partial revocation is never forwarded by the server):
                // asked back every retry, for at most the idle time.
                RevokeAnswer::Hold(_) => {
                    let since = *p.held_since.get_or_insert(now);
                    if now.saturating_sub(since) < timers.idle_ns {
                        p.tries = 0;
                        p.deadline = p.deadline.max(now.saturating_add(timers.retry_ns));
                    }
                    self.revocations.counts.held += 1;
                }
                RevokeAnswer::NoServer => {
                    if !p.returning {
                        p.returning = true;
                        p.deadline = now.saturating_add(timers.idle_ns);
                        self.revocations.counts.returned += 1;
                    }
                }
            }
            return;
        }
        let Some(r) = self.revocations.get(stream) else { return };
        r.answered = true;
        match answer {
            RevokeAnswer::Hold(Some(target)) => r.machine.replied(now, Some(target)),
            // Held, without the new server's address yet: the notice is sent again to ask
            // for it (the client still searching answers "hold" again), for at most the
            // machine's idle time.
            RevokeAnswer::Hold(None) => {
                r.machine.held(now);
                self.revocations.counts.held += 1;
            }
            RevokeAnswer::NoServer => {
                let first = r.machine.phase() == ServerPhase::Notified;
                r.machine.replied(now, None);
                if first {
                    self.revocations.counts.returned += 1;
                }
            }
        }
    }

    /// A packet of a revoked client bringing its pages back: it keeps them.
    pub(crate) fn revoked_contact(&mut self, now: u64, stream: u32) {
        if let Some(r) = self.revocations.get(stream) {
            r.machine.contact(now);
        }
        let idle = self.revocations.timers.idle_ns;
        if let Some(p) = self.revocations.partials.iter_mut().find(|p| p.stream == stream)
            && p.returning
        {
            p.deadline = p.deadline.max(now.saturating_add(idle));
        }
    }

    /// A revoked client released its stream.
    pub(crate) fn revoked_released(&mut self, stream: u32) {
        self.revocations.partials.retain(|p| p.stream != stream);
        if let Some(i) = self.revocations.list.iter().position(|r| r.stream == stream) {
            self.revocations.list.remove(i);
            self.revocations.transfers.forget(stream);
        }
    }

    /// What the revocations did.
    pub fn revoke_counts(&self) -> RevokeCounts {
        self.revocations.counts
    }

    /// Clients being revoked now, whole or in part.
    pub fn revoking(&self) -> usize {
        self.revocations.pending() + self.revocations.partials.len()
    }
}

impl Server {
    /// When the revocations next want [`Server::poll_revocations`] (a notice or a page to send
    /// again), if ever.
    pub fn revocation_deadline(&self) -> Option<u64> {
        let machines = self
            .revocations
            .list
            .iter()
            .filter(|r| !r.machine.is_freed())
            .map(|r| r.machine.deadline());
        let transfers = self.revocations.transfers.next_deadline();
        let partials = self.revocations.partials.iter().map(|p| p.deadline);
        machines.chain(transfers).chain(partials).min()
    }
}
