//! Tessera's remote paging client (Heracles §10.4, the thesis's `RPPCInt`): a
//! [`pager::remote::RemoteStore`] that keeps pages in other nodes' spare memory, over one UDP
//! session of the network driver domain ([`net_client::Session`]) and the remote paging
//! protocol's engines (`rpp`).
//!
//! [`RemoteClient::connect`] creates the client's stream on each server it is given
//! ([`Config::servers`], the spec's `servers=`): a `CreateStream` with the stream's role
//! (primary or mirror), whether the client has a local disk, the pages it wants and the
//! server CPU and network time it asks for ([`Config::cpu`], [`Config::net`]). A server that
//! refuses or does not answer within the retries is not used; with no server at all the
//! client is not made ([`pager::remote::RemoteError::NoServer`]) and the caller pages locally.
//! When the static servers made no stream (or there are none) and the client has traders
//! ([`Config::traders`], the spec's `traders=`), it finds a server through them (module
//! `control`: a trader's candidates tried in turn, the trader asked once more, then none).
//!
//! # Placement
//! - Without mirroring, every server is a primary. With [`Config::spread`] a new page goes to
//!   the primaries in turn by its number (`page % primaries`), else to the first.
//! - With mirroring ([`Config::mirror`], the spec's `mirror=server`), the first half of the
//!   servers (rounded up) are primaries and the rest mirrors; a new page's mirror is chosen
//!   among the mirrors the same way. Every write goes to the page's primary and its mirror at
//!   once (both transfers in flight together) and succeeds when both acknowledged, or one if
//!   the other's server was lost meanwhile; reads come from the primary.
//! - A page stays where it was first written while its servers live: a client knows where
//!   the latest copy of every page is (the thesis's consistency rule), and no stale copy is
//!   left anywhere but on a server that is gone.
//!
//! # Failures
//! A server that does not answer within the protocol's retries (`rpp::client::Params`) is
//! **lost**: the client never sends to it again. Every page whose primary it was and which has a
//! mirror is promoted: the mirror becomes its primary (one `SwitchMirror` to each server so
//! promoted, counted in [`RemoteStats::failovers`]); the pages it held alone are gone
//! ([`RemoteStore::holds`] turns false and reads are [`RemoteError::NotHeld`]). A write whose
//! servers are all lost tries the living servers once more as a new page. When every server
//! is lost the client says so once ([`RemoteNotice::ServersLost`]) and answers every write
//! with [`RemoteError::NoServer`]: the backing store manager pages to its local disk, which
//! holds every page if it mirrored to it (`mirror=disk`). With traders, a write after that
//! looks for new servers (at most once per [`Config::requery_ns`]); the backing store manager
//! refills them from the disk. A loss that leaves pages with one copy makes the client find a
//! new mirror and refill it (module `control`), so that a second loss loses nothing.
//!
//! # Compressed pages on the wire
//! With [`Config::netc`] (the spec's `netc=yes`, the thesis's `netc`, §3.6) the client
//! compresses every page it writes with WKdm (`pager::cache::wkdm`, the compressed cache's
//! codec) and sends the compressed bytes, in fewer packets (a page compressed 2:1 is 2 data
//! packets instead of 3); a page that does not shrink goes whole. A compressed cache above
//! the client gives it its pages already compressed ([`RemoteStore::write_compressed`]); the
//! client sends them as they are, whatever `netc` says (the spec turns `netc` off under a
//! compressed cache, as the thesis ignores it there). The servers store the bytes they were
//! sent; a page read back shorter than a page is decompressed by the client. A page's bytes
//! are compressed exactly when they are shorter than a page, so nothing else marks them.
//!
//! # Control messages
//! Packets from a server that are not part of a transfer (a revocation notice, an offload's
//! end) are handed to [`RemoteClient::control`] and acted on between requests (module
//! `control`): a revoked client holds the pages while it finds a new server (or grows a
//! connected one), names it to the revoking one, writes its pages there while the old server
//! forwards the rest, and switches over at the offload's end; revoked in part, it moves the
//! pages wanted itself; with no new server, or revoked again by the new one, it raises
//! [`RemoteNotice::RevokedWithoutReplacement`]. Anything else is counted and dropped. What the
//! control plane did is [`RemoteClient::control_counts`].
//!
//! Time is the caller's clock (`fn() -> u64`, ns), the session's deadlines on the same clock.
//! The crate is `no_std` (with `alloc`), has no `unsafe`, and is tested on the host against
//! in-process servers (`remote_server`) over a simulated net that loses, duplicates and
//! reorders datagrams.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use net_client::{Session, Transport};
use net_interface::{Endpoint, NetError};
use pager::cache::wkdm::Scratch;
use pager::remote::{RemoteError, RemoteNotice, RemoteStats, RemoteStore};
use pager::{PAGE_SIZE, Page};
use rpp::client::{Outcome, Params, StreamKey, Transfer, Transfers};
use rpp::rtt::{RttConfig, RttEstimator};
use rpp::wire::{self, Header, Message, Packet, RefuseReason, Role};

/// A contract asked of a server's CPU or network ([`Config::cpu`], [`Config::net`]).
pub use rpp::wire::Qos;

mod control;
mod lend;

pub use control::ControlCounts;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;

/// The most servers a client uses.
pub const MAX_SERVERS: usize = 8;

/// A client's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// The servers to create streams on, in order (the spec's `servers=`).
    pub servers: Vec<Endpoint>,
    /// The traders to ask for servers when the static ones are not enough, and when a server
    /// revokes the client (the spec's `traders=`; module `control`).
    pub traders: Vec<Endpoint>,
    /// How long the client waits before asking a trader once more when every candidate of its
    /// first answer refused or it named none (servers may not have advertised yet).
    pub requery_ns: u64,
    /// Mirror every page to a second server (the spec's `mirror=server`).
    pub mirror: bool,
    /// Spread new pages over the servers (the spec's `spread=yes`).
    pub spread: bool,
    /// Compress pages with WKdm before sending them (the spec's `netc=yes`).
    pub netc: bool,
    /// Whether the client has a local disk to fall back to (told to the servers).
    pub local_disk: bool,
    /// Pages to reserve on each server.
    pub pages: u64,
    /// The server processing time the client asks for.
    pub cpu: Qos,
    /// The server's network time the client asks for.
    pub net: Qos,
    /// The protocol's chunk size and retries.
    pub params: Params,
    /// Round-trip timing's bounds.
    pub rtt: RttConfig,
}

impl Config {
    /// The defaults for `servers`: no mirror, spread, a local disk, 1 ms of every 10 ms of
    /// each server's CPU and network with their slack time (a pager spec's `svqos` and
    /// `netqos` when not given), the protocol's default retries and timing.
    pub fn new(servers: Vec<Endpoint>, pages: u64) -> Config {
        let qos = Qos { period_ns: 10_000_000, slice_ns: 1_000_000, extra: true };
        Config {
            servers,
            traders: Vec::new(),
            requery_ns: 2_000_000_000,
            mirror: false,
            spread: true,
            netc: false,
            local_disk: true,
            pages,
            cpu: qos,
            net: qos,
            params: Params::default(),
            rtt: RttConfig::LAN,
        }
    }
}

/// One server as the client sees it.
#[derive(Clone, Copy, Debug)]
struct Server {
    /// Where its control messages go (the address in the spec).
    control: Endpoint,
    /// Where its data path is (the port its `StreamCreated` named).
    data: Endpoint,
    key: StreamKey,
    role: Role,
    lost: bool,
    /// Pages it holds a copy of (primary or mirror).
    pages: u64,
    /// Pages reserved there (grown, or shrunk by a partial revocation).
    reserved: u64,
    /// It revoked the client, which moves its pages to this server ([`control`]): no new page
    /// goes to it, and a page written again goes to the new server.
    moving_to: Option<u8>,
}

/// Where a page's copies are: indices into the servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Placement {
    primary: u8,
    mirror: Option<u8>,
}

/// Why [`RemoteClient::connect`] made no client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectError {
    /// The configuration is unusable (no server, too many, mirroring with one server).
    BadConfig,
    /// The session failed (the network driver is gone).
    Net(NetError),
    /// No server created a stream: each refused (the last reason given) or did not answer.
    NoServer(Option<RefuseReason>),
}

/// The remote paging client: see the [crate] documentation.
pub struct RemoteClient<T: Transport> {
    session: Session<T>,
    clock: fn() -> u64,
    config: Config,
    servers: Vec<Server>,
    transfers: Transfers<u8>,
    pages: BTreeMap<u64, Placement>,
    next_request: u32,
    stats: RemoteStats,
    /// Packets of control messages sent and received outside transfers.
    control_sent: u64,
    control_received: u64,
    /// Control messages dropped (not the control plane's).
    control_ignored: u64,
    /// Datagrams from unknown senders or that did not decode.
    strays: u64,
    notice: Option<RemoteNotice>,
    told_lost: bool,
    buf: Vec<u8>,
    /// WKdm's working memory, once a page was compressed or decompressed.
    wkdm: Option<alloc::boxed::Box<Scratch>>,
    /// Revocations and servers found through traders ([`control`]).
    control: control::Control,
    /// Pages written from their frames ([`lend`]).
    lending: lend::Lending,
}

/// One server's answer to a control message, in [`RemoteClient::ask`].
enum Answer {
    Created { stream: u32, token: u64, data_port: u16 },
    Refused(RefuseReason),
    Ack,
}

impl<T: Transport> RemoteClient<T> {
    /// Creates the client's streams on `config.servers` over `session` (open), timing with
    /// `clock`: a client using every server that accepted, see the [crate] documentation.
    pub fn connect(
        session: Session<T>,
        clock: fn() -> u64,
        config: Config,
    ) -> Result<RemoteClient<T>, ConnectError> {
        let n = config.servers.len();
        let traders = !config.traders.is_empty();
        if (n == 0 && !traders) || n > MAX_SERVERS || (config.mirror && n < 2 && !traders) {
            return Err(ConnectError::BadConfig);
        }
        let primaries = if config.mirror { n.div_ceil(2) } else { n };
        let servers = config
            .servers
            .iter()
            .enumerate()
            .map(|(i, &addr)| Server {
                control: addr,
                data: addr,
                key: StreamKey::default(),
                role: if i < primaries { Role::Primary } else { Role::Mirror },
                lost: true,
                pages: 0,
                reserved: config.pages,
                moving_to: None,
            })
            .collect();
        let mut client = RemoteClient {
            session,
            clock,
            transfers: Transfers::new(config.rtt),
            config,
            servers,
            pages: BTreeMap::new(),
            next_request: 1,
            stats: RemoteStats::default(),
            control_sent: 0,
            control_received: 0,
            control_ignored: 0,
            strays: 0,
            notice: None,
            told_lost: false,
            buf: vec![0; wire::MAX_PACKET],
            wkdm: None,
            control: control::Control::default(),
            lending: lend::Lending::default(),
        };
        let mut refused = None;
        // Every server at once: the creations' answers are awaited together.
        let asks: Vec<(u8, Message<'static>)> = (0..n as u8)
            .map(|i| {
                let s = &client.servers[i as usize];
                let create = Message::CreateStream {
                    pages: client.config.pages,
                    page_size: PAGE_SIZE as u32,
                    role: s.role,
                    has_local_disk: client.config.local_disk,
                    cpu: client.config.cpu,
                    net: client.config.net,
                };
                (i, create)
            })
            .collect();
        let answers = match asks.is_empty() {
            true => Vec::new(),
            false => client.ask(&asks).map_err(ConnectError::Net)?,
        };
        for (i, answer) in answers.into_iter().enumerate() {
            let s = &mut client.servers[i];
            match answer {
                Some(Answer::Created { stream, token, data_port }) => {
                    s.key = StreamKey { stream, token };
                    if data_port != 0 {
                        s.data.port = data_port;
                    }
                    s.lost = false;
                }
                Some(Answer::Refused(why)) => refused = Some(why),
                _ => {}
            }
        }
        // Not enough static servers: the traders' (§10.4).
        if traders {
            client.acquire_initial().map_err(ConnectError::Net)?;
        }
        if client.live() == 0 {
            return Err(ConnectError::NoServer(refused));
        }
        // A mirrored client needs a living primary and a living mirror; else it runs
        // unmirrored on what it has.
        if client.config.mirror && client.live_with(Role::Mirror) == 0 {
            client.config.mirror = false;
        }
        if client.live_with(Role::Primary) == 0 {
            for s in client.servers.iter_mut() {
                s.role = Role::Primary;
            }
            client.config.mirror = false;
        }
        client.stats.servers = client.live() as u32;
        Ok(client)
    }

    /// The servers, as `(address, stream, role, lost, pages held)`, for reports.
    pub fn servers(&self) -> impl Iterator<Item = (Endpoint, u32, Role, bool, u64)> + '_ {
        self.servers.iter().map(|s| (s.control, s.key.stream, s.role, s.lost, s.pages))
    }

    /// Whether the client compresses the pages it writes ([`Config::netc`]).
    pub fn netc(&self) -> bool {
        self.config.netc
    }

    /// What the control plane did (module `control`).
    pub fn control_counts(&self) -> ControlCounts {
        self.control.counts()
    }

    /// Whether every write goes to a mirror too.
    pub fn mirrors(&self) -> bool {
        self.config.mirror
    }

    /// Datagrams that came from no server of this client or did not decode, and control
    /// messages it does not handle.
    pub fn strays(&self) -> (u64, u64) {
        (self.strays, self.control_ignored)
    }

    /// The session, e.g. to close it after [`RemoteStore::release`].
    pub fn session(&mut self) -> &mut Session<T> {
        &mut self.session
    }

    fn live(&self) -> usize {
        self.servers.iter().filter(|s| !s.lost).count()
    }

    fn live_with(&self, role: Role) -> usize {
        self.servers.iter().filter(|s| !s.lost && s.role == role).count()
    }

    fn request(&mut self) -> u32 {
        let r = self.next_request;
        self.next_request = self.next_request.wrapping_add(1).max(1);
        r
    }

    /// Sends one control message to each server named, each with its stream's header, again
    /// after each timeout (doubling from the initial one) until it answers or the retries are
    /// spent: each server's answer, `None` if none came.
    fn ask(&mut self, asks: &[(u8, Message<'_>)]) -> Result<Vec<Option<Answer>>, NetError> {
        let mut answers: Vec<Option<Answer>> = asks.iter().map(|_| None).collect();
        let requests: Vec<u32> = asks.iter().map(|_| self.request()).collect();
        let rtt = RttEstimator::new(self.config.rtt);
        let mut attempt = 0;
        while attempt <= self.config.params.retries && answers.iter().any(Option::is_none) {
            let now = (self.clock)();
            for (k, (i, message)) in asks.iter().enumerate() {
                if answers[k].is_some() {
                    continue;
                }
                let s = self.servers[*i as usize];
                let header =
                    Header { stream: s.key.stream, token: s.key.token, request: requests[k] };
                let to = if matches!(message, Message::CreateStream { .. }) {
                    s.control
                } else {
                    s.data
                };
                self.send_packet(to, &Packet { header, message: *message })?;
            }
            let deadline = now.saturating_add(rtt.rto_backoff(attempt));
            attempt += 1;
            while answers.iter().any(Option::is_none) {
                let Some((from, len)) = self.receive(deadline)? else { break };
                let bytes = self.buf[..len].to_vec();
                let Ok(p) = wire::decode(&bytes) else {
                    self.strays += 1;
                    continue;
                };
                let Some(k) = asks.iter().enumerate().position(|(k, (i, _))| {
                    let s = &self.servers[*i as usize];
                    (from == s.control || from == s.data) && p.header.request == requests[k]
                }) else {
                    self.control(from, &p);
                    continue;
                };
                self.control_received += 1;
                answers[k] = match p.message {
                    Message::StreamCreated { stream, token, data_port, .. } => {
                        Some(Answer::Created { stream, token, data_port })
                    }
                    Message::Refused { reason } => Some(Answer::Refused(reason)),
                    // Any other answer says the server heard (a BadToken NACK to a repeated
                    // Release: the first one closed the stream).
                    Message::Ack { .. } | Message::Nack { .. } | Message::Alive => {
                        Some(Answer::Ack)
                    }
                    _ => None,
                };
            }
        }
        Ok(answers)
    }

    fn send_packet(&mut self, to: Endpoint, packet: &Packet<'_>) -> Result<(), NetError> {
        let len = wire::encode(packet, &mut self.buf).map_err(|_| NetError::TooLarge)?;
        self.control_sent += 1;
        send(&mut self.session, to, &self.buf[..len])
    }

    /// The next datagram by `deadline`, copied into the buffer: its sender and length.
    fn receive(&mut self, deadline: u64) -> Result<Option<(Endpoint, usize)>, NetError> {
        let buf = &mut self.buf;
        self.session.receive_until(deadline, |d| {
            let len = d.payload.len().min(buf.len());
            buf[..len].copy_from_slice(&d.payload[..len]);
            (d.from, len)
        })
    }

    /// A packet from a server that no transfer or request took: a revocation notice, an
    /// offload's end, a late answer. The revocation protocol handles them here; today they
    /// are counted and dropped.
    pub fn control(&mut self, from: Endpoint, packet: &Packet<'_>) {
        if !self.take_control(from, packet) {
            self.control_ignored += 1;
        }
    }

    /// The server index of endpoint `from`.
    fn server_of(&self, from: Endpoint) -> Option<u8> {
        self.servers.iter().position(|s| s.data == from || s.control == from).map(|i| i as u8)
    }

    /// Runs `ops` (server index, transfer) to their ends, all in flight at once: each one's
    /// transfer, finished, in the order given.
    fn run(&mut self, ops: Vec<(u8, Transfer)>) -> Result<Vec<Transfer>, NetError> {
        self.run_lent(ops, None)
    }

    /// [`run`](Self::run), the first transmission of the first op (a page write) sent from
    /// the frame of the page at `lent`, if it can be ([`lend`]).
    fn run_lent(
        &mut self,
        ops: Vec<(u8, Transfer)>,
        mut lent: Option<usize>,
    ) -> Result<Vec<Transfer>, NetError> {
        let n = ops.len();
        let mut requests = Vec::with_capacity(n);
        let mut done: Vec<Option<Transfer>> = (0..n).map(|_| None).collect();
        let servers = self.servers.clone();
        let mut sends = Vec::new();
        let now = (self.clock)();
        for (i, t) in ops {
            requests.push((i, t.request()));
            let Some(va) = lent.take() else {
                self.transfers.start(now, i, t, &mut |p, b| sends.push((p, b.to_vec())));
                continue;
            };
            let mut page = Vec::new();
            self.transfers.start(now, i, t, &mut |p, b| page.push((p, b.to_vec())));
            let to = servers[i as usize].data;
            let chunk = self.config.params.chunk;
            if !self.lending.send_page(&mut self.session, to, &page, va, chunk)? {
                sends.extend(page);
            }
        }
        self.flush(&servers, &mut sends)?;
        loop {
            while let Some(f) = self.transfers.take_finished() {
                let k =
                    requests.iter().position(|&(i, r)| i == f.peer && r == f.transfer.request());
                if let Some(k) = k {
                    done[k] = Some(f.transfer);
                }
            }
            if done.iter().all(Option::is_some) {
                break;
            }
            let deadline = self.transfers.next_deadline().unwrap_or(u64::MAX);
            match self.receive(deadline)? {
                Some((from, len)) => {
                    let Some(i) = self.server_of(from) else {
                        self.strays += 1;
                        continue;
                    };
                    let bytes = self.buf[..len].to_vec();
                    let now = (self.clock)();
                    let control = self
                        .transfers
                        .on_packet(now, i, &bytes, &mut |p, b| sends.push((p, b.to_vec())));
                    if let Some(p) = control {
                        self.control(from, &p);
                    }
                }
                None => {
                    let now = (self.clock)();
                    self.transfers.poll_timeout(now, &mut |p, b| sends.push((p, b.to_vec())));
                }
            }
            self.flush(&servers, &mut sends)?;
        }
        Ok(done.into_iter().map(|t| t.expect("all done")).collect())
    }

    /// Sends the packets the transfers gave.
    fn flush(
        &mut self,
        servers: &[Server],
        sends: &mut Vec<(u8, Vec<u8>)>,
    ) -> Result<(), NetError> {
        for (i, bytes) in sends.drain(..) {
            send(&mut self.session, servers[i as usize].data, &bytes)?;
        }
        Ok(())
    }

    /// Server `i` stopped answering: it is lost, its pages promoted to their mirrors or gone.
    fn lose(&mut self, i: u8) {
        let s = &mut self.servers[i as usize];
        if s.lost {
            return;
        }
        s.lost = true;
        s.pages = 0;
        let mut promoted: Vec<u8> = Vec::new();
        let mut gone = Vec::new();
        for (page, p) in self.pages.iter_mut() {
            if p.mirror == Some(i) {
                p.mirror = None;
            } else if p.primary == i {
                match p.mirror.take() {
                    Some(m) => {
                        p.primary = m;
                        if !promoted.contains(&m) {
                            promoted.push(m);
                        }
                    }
                    None => gone.push(*page),
                }
            }
        }
        for page in gone {
            self.pages.remove(&page);
        }
        if self.control.mirror_to == Some(i) {
            self.control.mirror_to = None;
        }
        // Pages left with one copy get a new mirror (module `control`).
        if self.config.mirror && self.pages.values().any(|p| p.mirror.is_none()) {
            self.control.refill = true;
        }
        for m in promoted {
            self.stats.failovers += 1;
            self.servers[m as usize].role = Role::Primary;
            // The promoted server hears it is now primary; if it does not answer either, the
            // next transfer finds it lost.
            let _ = self.ask(&[(m, Message::SwitchMirror)]);
        }
        self.stats.servers = self.live() as u32;
        if self.live() == 0 && !self.told_lost {
            self.told_lost = true;
            self.notice = Some(RemoteNotice::ServersLost);
        }
    }

    /// The servers for a new page: `(primary, mirror)` among the living, `None` if none.
    fn place(&self, page: u64) -> Option<Placement> {
        let pick = |role: Role| -> Option<u8> {
            let live: Vec<u8> = (0..self.servers.len() as u8)
                .filter(|&i| {
                    let s = &self.servers[i as usize];
                    // A server that took part of its reservation back takes no more pages
                    // than are left of it.
                    let room = s.reserved >= self.config.pages || s.pages < s.reserved;
                    !s.lost && s.moving_to.is_none() && s.role == role && room
                })
                .collect();
            match (live.len(), self.config.spread) {
                (0, _) => None,
                (_, true) => Some(live[(page % live.len() as u64) as usize]),
                (_, false) => Some(live[0]),
            }
        };
        let primary = pick(Role::Primary).or_else(|| pick(Role::Mirror))?;
        let mirror = if self.config.mirror {
            pick(Role::Mirror).filter(|&m| m != primary).or_else(|| {
                // The mirrors are gone: another living primary keeps the second copy.
                (0..self.servers.len() as u8)
                    .find(|&i| i != primary && !self.servers[i as usize].lost)
            })
        } else {
            None
        };
        Some(Placement { primary, mirror })
    }

    fn transfer_write(&mut self, i: u8, page: u64, data: &[u8]) -> Transfer {
        let key = self.servers[i as usize].key;
        let r = self.request();
        Transfer::write(key, r, page, data.to_vec(), self.config.params).expect("a page fits")
    }

    fn scratch(&mut self) -> &mut Scratch {
        self.wkdm.get_or_insert_with(|| alloc::boxed::Box::new(Scratch::new()))
    }

    /// Stores `page` as `bytes`: the whole page, or its WKdm compression (shorter), on the
    /// page's servers; see [`RemoteStore::write`].
    fn write_bytes(&mut self, page: usize, bytes: &[u8]) -> Result<(), RemoteError> {
        self.handle_control();
        let vpn = page as u64;
        // Every server lost: look for new ones now and then (module `control`).
        if self.live() == 0 && !self.find_again() {
            return Err(RemoteError::NoServer);
        }
        let data = bytes;
        // Twice at most: where the page is, then (its servers lost meanwhile) a new place.
        for _ in 0..2 {
            let placement = match self.pages.get(&vpn) {
                Some(p) => {
                    let mut p = self.redirect(*p);
                    // Its mirror was lost: the new mirror takes this copy at once.
                    if p.mirror.is_none() && self.config.mirror {
                        p.mirror = self.place(vpn).and_then(|n| n.mirror).filter(|&m| {
                            m != p.primary && self.control.mirror_to.is_none_or(|t| t == m)
                        });
                    }
                    p
                }
                None => self.place(vpn).ok_or(RemoteError::NoServer)?,
            };
            let new_mirror = self.pages.get(&vpn).is_some_and(|p| p.mirror.is_none())
                && placement.mirror.is_some();
            let mut ops =
                vec![(placement.primary, self.transfer_write(placement.primary, vpn, data))];
            if let Some(m) = placement.mirror {
                ops.push((m, self.transfer_write(m, vpn, data)));
            }
            let targets: Vec<u8> = ops.iter().map(|(i, _)| *i).collect();
            // A whole page is in the pager's frame, which the driver may send from; a
            // compressed one is in the client's own buffer.
            let lent = (data.len() == PAGE_SIZE).then_some(data.as_ptr() as usize);
            let done = self.run_lent(ops, lent).map_err(|_| RemoteError::Unreachable)?;
            // The pager may change the page once this returns: the driver is done with it.
            self.lending.settle(&mut self.session);
            self.count();
            let mut stored = Vec::new();
            let mut full = false;
            for (i, t) in targets.iter().zip(&done) {
                match t.outcome() {
                    Some(Outcome::Done) => stored.push(*i),
                    Some(Outcome::Unreachable) => self.lose(*i),
                    Some(Outcome::Failed(wire::Code::Full)) => full = true,
                    _ => {}
                }
            }
            let was_new = !self.pages.contains_key(&vpn);
            // Where the latest copy now is: the servers that stored it, the primary first.
            let primary = stored.iter().copied().find(|&i| Some(i) == Some(placement.primary));
            let placed = match (primary, stored.as_slice()) {
                (Some(p), _) => {
                    Some(Placement { primary: p, mirror: stored.iter().copied().find(|&i| i != p) })
                }
                (None, [m, ..]) => Some(Placement { primary: *m, mirror: None }),
                (None, []) => None,
            };
            match placed {
                Some(p) => {
                    if was_new {
                        for i in stored.iter() {
                            self.servers[*i as usize].pages += 1;
                        }
                    } else if new_mirror && let Some(m) = p.mirror {
                        self.servers[m as usize].pages += 1;
                    }
                    let copies = stored.len() as u64;
                    self.stats.pages_written += copies;
                    self.stats.page_bytes_written += copies * data.len() as u64;
                    if data.len() < PAGE_SIZE {
                        self.stats.compressed_writes += copies;
                    }
                    self.pages.insert(vpn, p);
                    return Ok(());
                }
                None => {
                    // Nowhere: the old copy (if any) is on servers that failed it.
                    self.pages.remove(&vpn);
                    if full {
                        return Err(RemoteError::NoServer);
                    }
                    if self.live() == 0 {
                        return Err(RemoteError::Unreachable);
                    }
                }
            }
        }
        Err(RemoteError::Unreachable)
    }

    fn count(&mut self) {
        let c = self.transfers.stats();
        self.stats.packets_sent = c.packets_sent + self.control_sent;
        self.stats.packets_received = c.packets_received + self.control_received;
        self.stats.retransmits = c.retransmits;
    }
}

/// Sends refused `Busy` in a row after which a datagram is given up as lost: with the
/// transport's pause between them (20 µs on the target), some 20 ms, a few of the client's
/// network periods.
const BUSY_TRIES: u32 = 1000;

/// Sends one datagram, waiting a little while the driver's queue is full: the driver empties
/// it under the client's network contract, and the client pauses between tries rather than
/// asking again at once. A queue still full after [`BUSY_TRIES`] tries loses the datagram, as
/// the wire may: the protocol's timeouts send it again, so a send never waits forever.
fn send<T: Transport>(
    session: &mut Session<T>,
    to: Endpoint,
    bytes: &[u8],
) -> Result<(), NetError> {
    for _ in 0..BUSY_TRIES {
        match session.send(to, bytes) {
            Ok(()) => return Ok(()),
            Err(NetError::Busy) => session.transport().pause(),
            // Lost like a datagram on the wire: the protocol sends it again.
            Err(NetError::LinkDown) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl<T: Transport> RemoteStore for RemoteClient<T> {
    /// With `netc`, the page goes WKdm-compressed if that makes it shorter.
    fn write(&mut self, page: usize, data: &Page) -> Result<(), RemoteError> {
        if self.config.netc
            && let Some(bytes) = self.scratch().compress(data, PAGE_SIZE - 1)
        {
            let bytes = bytes.to_vec();
            return self.write_bytes(page, &bytes);
        }
        self.write_bytes(page, data)
    }

    /// Sent as they are, if shorter than a page (else the caller writes the page whole).
    fn write_compressed(&mut self, page: usize, wkdm: &[u8]) -> Result<bool, RemoteError> {
        if wkdm.is_empty() || wkdm.len() >= PAGE_SIZE {
            return Ok(false);
        }
        self.write_bytes(page, wkdm).map(|()| true)
    }

    fn read(&mut self, page: usize, buf: &mut Page) -> Result<(), RemoteError> {
        self.handle_control();
        let vpn = page as u64;
        loop {
            let mut p = *self.pages.get(&vpn).ok_or(RemoteError::NotHeld)?;
            // Doubly revoked: not from the first server; after its offload, from the second.
            if self.must_wait(p.primary) {
                self.await_offload(p.primary).map_err(|_| RemoteError::Unreachable)?;
                p = *self.pages.get(&vpn).ok_or(RemoteError::NotHeld)?;
            }
            let key = self.servers[p.primary as usize].key;
            let r = self.request();
            let t = Transfer::read(key, r, vpn, PAGE_SIZE as u32, self.config.params)
                .expect("a page fits");
            let mut done = self.run(vec![(p.primary, t)]).map_err(|_| RemoteError::Unreachable)?;
            self.count();
            let t = done.pop().expect("one transfer");
            match t.outcome() {
                Some(Outcome::Done) if t.page().len() == PAGE_SIZE => {
                    buf.copy_from_slice(t.page());
                    self.stats.pages_read += 1;
                    return Ok(());
                }
                // Shorter: the page compressed (by `netc` or a compressed cache).
                Some(Outcome::Done) if self.scratch().decompress(t.page(), buf).is_ok() => {
                    self.stats.pages_read += 1;
                    return Ok(());
                }
                // Promoted to its mirror, or gone: look again.
                Some(Outcome::Unreachable) => self.lose(p.primary),
                _ => {
                    self.pages.remove(&vpn);
                    return Err(RemoteError::NotHeld);
                }
            }
        }
    }

    fn holds(&self, page: usize) -> bool {
        self.pages.contains_key(&(page as u64))
    }

    fn free(&mut self, page: usize) {
        self.handle_control();
        let vpn = page as u64;
        let Some(p) = self.pages.remove(&vpn) else { return };
        let mut ops = Vec::new();
        for i in [Some(p.primary), p.mirror].into_iter().flatten() {
            let key = self.servers[i as usize].key;
            let r = self.request();
            if let Ok(t) = Transfer::free(key, r, vpn, self.config.params) {
                ops.push((i, t));
            }
            let s = &mut self.servers[i as usize];
            s.pages = s.pages.saturating_sub(1);
        }
        let targets: Vec<u8> = ops.iter().map(|(i, _)| *i).collect();
        if let Ok(done) = self.run(ops) {
            for (i, t) in targets.into_iter().zip(done) {
                if t.outcome() == Some(Outcome::Unreachable) {
                    self.lose(i);
                }
            }
        }
        self.count();
    }

    fn notice(&mut self) -> Option<RemoteNotice> {
        // What came meanwhile (control messages, late answers), without waiting.
        while let Ok(Some((from, len))) = self.receive(0) {
            let bytes = self.buf[..len].to_vec();
            match (self.server_of(from), wire::decode(&bytes)) {
                (Some(_), Ok(p)) => self.control(from, &p),
                _ => self.strays += 1,
            }
        }
        self.handle_control();
        self.notice.take()
    }

    fn release(&mut self) {
        let asks: Vec<(u8, Message<'static>)> = (0..self.servers.len() as u8)
            .filter(|&i| !self.servers[i as usize].lost)
            .map(|i| (i, Message::Release))
            .collect();
        let _ = self.ask(&asks);
        for s in self.servers.iter_mut() {
            s.lost = true;
            s.pages = 0;
        }
        self.pages.clear();
        self.stats.servers = 0;
        self.count();
    }

    fn stats(&self) -> RemoteStats {
        self.stats
    }
}

/// A [`RemoteStore`] shared between its owner (a paged driver, which takes a
/// `Box<dyn RemoteStore>`) and the application that made it, which keeps a clone to report
/// on the client and release its streams at the end. Single-threaded: each call borrows the
/// client for its length.
pub struct Shared<S>(pub alloc::rc::Rc<core::cell::RefCell<S>>);

impl<S> Clone for Shared<S> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<S: RemoteStore> RemoteStore for Shared<S> {
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
        self.0.borrow_mut().free(page)
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
