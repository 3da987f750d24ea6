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
}

/// The server's revocations in progress.
pub(crate) struct Revocations {
    list: Vec<Revoking>,
    transfers: Transfers<u32>,
    timers: Timers,
    pub(crate) counts: RevokeCounts,
    next_request: u32,
}

impl Default for Revocations {
    fn default() -> Revocations {
        Revocations {
            list: Vec::new(),
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
    /// Whether `stream` is being revoked.
    pub(crate) fn contains(&self, stream: u32) -> bool {
        self.list.iter().any(|r| r.stream == stream)
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

    /// Moves the revocations on at `now`: notices, forwarded pages, ends.
    pub fn poll_revocations(&mut self, now: u64, out: &mut dyn FnMut(Endpoint, &[u8])) {
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
        let Some(s) = self.mem.streams.get(&stream) else { return };
        let (client, token) = (s.report.client, s.token);
        let request = self.revocations.request();
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
    }

    /// A revoked client released its stream.
    pub(crate) fn revoked_released(&mut self, stream: u32) {
        if let Some(i) = self.revocations.list.iter().position(|r| r.stream == stream) {
            self.revocations.list.remove(i);
            self.revocations.transfers.forget(stream);
        }
    }

    /// What the revocations did.
    pub fn revoke_counts(&self) -> RevokeCounts {
        self.revocations.counts
    }

    /// Clients being revoked now.
    pub fn revoking(&self) -> usize {
        self.revocations.pending()
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
        machines.chain(transfers).min()
    }
}
