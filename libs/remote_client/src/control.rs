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
//! - **Revocation.** A server's `RevokeNotice` is taken between requests (never inside a
//!   transfer): the client looks for a new server (the revoking one excluded; spreading, the
//!   ones it has too), and replies `RevokeReply` naming the new server and its stream there.
//!   The revoking server stops taking new pages; a page written again goes to the new server
//!   and is recorded there (the page map is the tracking of §10.5: a fault on it goes to the
//!   new server, a fault on any other to the old). When the old server says `OffloadDone`,
//!   every page it held is the new server's: the client tells the new server, releases the old
//!   stream, and counts the revocation ([`pager::remote::RemoteStats::revocations`]).
//! - **No new server.** The client replies `NoServer` and raises
//!   [`RemoteNotice::RevokedWithoutReplacement`]: its owner brings the pages back (reading
//!   them from the servers that hold them) and releases. A revocation by the server that is
//!   taking a move's pages (a double revocation) is answered so too: the client backs off
//!   remote paging.

use alloc::vec::Vec;

use net_client::Transport;
use net_interface::{Endpoint, NetError};
use pager::PAGE_SIZE;
use pager::remote::RemoteNotice;
use remote_control::TraderAsk;
use remote_control::revoke::ClientRevocation;
use remote_control::select::{Selection, Step};
use rpp::wire::{self, Message, OffloadTarget, Packet, RevokeAnswer, Role};

use crate::{Placement, RemoteClient, Server};

/// How long a trader's first answer is awaited (doubling after each timeout).
const TRADER_RTO_NS: u64 = 100_000_000;
/// Queries sent again before a trader is unreachable (100 ms doubling: 12.7 s in all, for a
/// trader still starting, whose first answer also waits for addresses to resolve).
const TRADER_RETRIES: u32 = 6;

/// One revocation in progress: the old server's index and the machine.
struct Move {
    old: u8,
    machine: ClientRevocation<u8>,
    /// The answer given, sent again if the notice comes again.
    answer: RevokeAnswer,
}

/// The client's control state.
#[derive(Default)]
pub(crate) struct Control {
    /// Servers whose revocation notices came and are not taken yet.
    notices: Vec<u8>,
    /// Servers that said their offload is done.
    done: Vec<u8>,
    moves: Vec<Move>,
    /// Trader answers that came outside a query (late): dropped.
    pub(crate) late_answers: u64,
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
            Message::RevokeNotice { .. } => {
                if !self.control.notices.contains(&i) {
                    self.control.notices.push(i);
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
            let i = self.control.notices.remove(0);
            if self.servers[i as usize].lost {
                continue;
            }
            self.revoked_by(i);
        }
        while !self.control.done.is_empty() {
            let i = self.control.done.remove(0);
            self.offload_done(i);
        }
    }

    /// Server `i` revoked the client.
    fn revoked_by(&mut self, i: u8) {
        // Notified again: the answer was lost; give it again.
        if let Some(m) = self.control.moves.iter().find(|m| m.old == i) {
            let answer = m.answer;
            let _ = self.ask(&[(i, Message::RevokeReply { answer })]);
            return;
        }
        // The server taking a move's pages revokes too: a double revocation.
        if let Some(m) = self
            .control
            .moves
            .iter_mut()
            .find(|m| m.machine.old() != i && self.servers[m.old as usize].moving_to == Some(i))
        {
            m.machine.revoked_by_new();
            let _ = self.ask(&[(i, Message::RevokeReply { answer: RevokeAnswer::NoServer })]);
            self.notice = Some(RemoteNotice::RevokedWithoutReplacement);
            self.stats.revocations += 1;
            return;
        }
        let mut machine = ClientRevocation::new(i);
        let role = self.servers[i as usize].role;
        let mut exclude = alloc::vec![self.servers[i as usize].control];
        if self.config.spread {
            exclude.extend(self.servers.iter().filter(|s| !s.lost).map(|s| s.control));
        }
        let found = self.acquire(role, &exclude).ok().flatten();
        let answer = match found {
            Some(j) => {
                machine.found(j);
                let s = &self.servers[j as usize];
                let target =
                    OffloadTarget { server: s.data, stream: s.key.stream, token: s.key.token };
                self.servers[i as usize].moving_to = Some(j);
                RevokeAnswer::Hold(Some(target))
            }
            None => {
                machine.not_found();
                self.notice = Some(RemoteNotice::RevokedWithoutReplacement);
                self.stats.revocations += 1;
                RevokeAnswer::NoServer
            }
        };
        let _ = self.ask(&[(i, Message::RevokeReply { answer })]);
        self.control.moves.push(Move { old: i, machine, answer });
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
        if self.servers.len() >= crate::MAX_SERVERS {
            return Ok(None);
        }
        let traders = self.config.traders.clone();
        let connected: Vec<Endpoint> =
            self.servers.iter().filter(|s| !s.lost).map(|s| s.control).collect();
        // Growing an existing reservation is not needed here: each server reserves the whole
        // stretch, so a new server is always what is wanted.
        let mut sel = Selection::new(true, traders.len(), &[], &connected, exclude);
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
                Step::Grow(_) => sel.server_answered(false),
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
        let i = self.servers.len() as u8;
        self.servers.push(Server {
            control: addr,
            data: addr,
            key: Default::default(),
            role,
            lost: true,
            pages: 0,
            moving_to: None,
        });
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
                self.servers.pop();
                Ok(None)
            }
        }
    }
}
