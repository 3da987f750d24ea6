//! The control plane's messages between servers, traders and clients (`rpp::wire`), sans-IO:
//! the caller passes the time, hands in packets, and sends what the `out` callbacks give.
//!
//! - [`AdvertLink`]: a server's [`Advertiser`] speaking to its traders: at each poll the advert
//!   goes to the traders the poll names, each under a new request id; a trader that has not
//!   acknowledged (an `Ack` under that id, [`crate::service`]) by the next poll is marked
//!   unreachable, so it is sent the advert again even if unchanged.
//! - [`TraderAsk`]: a client's query to one trader, sent again after each timeout (doubling)
//!   until the answer comes or the retries are spent (the trader is unreachable: ask the next).

use alloc::vec::Vec;

use net_interface::Endpoint;
use rpp::wire::{self, Candidate, Header, Message, Packet};

use crate::advertiser::{Advertiser, AdvertiserConfig, MAX_TRADERS, Poll, Sample};

/// A server's advertising to its traders; see the [module](self) documentation.
#[derive(Clone, Debug)]
pub struct AdvertLink {
    advertiser: Advertiser,
    traders: Vec<Endpoint>,
    server: Endpoint,
    /// Per trader, the request id of an advert not acknowledged yet.
    pending: [Option<u32>; MAX_TRADERS],
    next_request: u32,
    /// Adverts sent, acknowledged, and found unacknowledged at the next poll.
    counts: LinkCounts,
}

/// What an [`AdvertLink`] counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounts {
    /// Adverts sent (one per trader).
    pub sent: u64,
    /// Adverts a trader acknowledged.
    pub acked: u64,
    /// Adverts not acknowledged by the next poll (their trader marked unreachable).
    pub missed: u64,
}

impl AdvertLink {
    /// A server at `server` (its control endpoint, as clients reach it) advertising to
    /// `traders` (the first [`MAX_TRADERS`]) by `config`, its first poll due at `now`.
    pub fn new(
        config: AdvertiserConfig,
        traders: &[Endpoint],
        server: Endpoint,
        now: u64,
    ) -> AdvertLink {
        let traders: Vec<Endpoint> = traders.iter().copied().take(MAX_TRADERS).collect();
        let config = AdvertiserConfig { traders: traders.len().max(1), ..config };
        AdvertLink {
            advertiser: Advertiser::new(config, now),
            traders,
            server,
            pending: [None; MAX_TRADERS],
            next_request: 1,
            counts: LinkCounts::default(),
        }
    }

    /// The advertising algorithm's state.
    pub fn advertiser(&self) -> &Advertiser {
        &self.advertiser
    }

    /// What it counted.
    pub fn counts(&self) -> LinkCounts {
        self.counts
    }

    /// The traders.
    pub fn traders(&self) -> &[Endpoint] {
        &self.traders
    }

    /// Polls if a poll is due at `now`: the poll (Fig 10.4 on `sample`), after sending its
    /// advert to the traders it names; `None` if not due. `net_committable` says whether the
    /// server could commit link time to a new client.
    pub fn poll(
        &mut self,
        now: u64,
        sample: Sample,
        net_committable: bool,
        out: &mut dyn FnMut(Endpoint, &[u8]),
    ) -> Option<Poll> {
        if !self.advertiser.due(now) {
            return None;
        }
        for i in 0..self.traders.len() {
            if self.pending[i].take().is_some() {
                self.counts.missed += 1;
                self.advertiser.unreachable(i);
            }
        }
        let poll = self.advertiser.poll(now, sample);
        self.send(&poll, sample.cpu_committable, net_committable, out);
        Some(poll)
    }

    /// The server admitted a client for `bytes`: the advert backs off and goes to every trader
    /// now.
    pub fn admitted(&mut self, bytes: u64, out: &mut dyn FnMut(Endpoint, &[u8])) -> Poll {
        let poll = self.advertiser.admitted(bytes);
        self.send(&poll, true, true, out);
        poll
    }

    fn send(&mut self, poll: &Poll, cpu: bool, net: bool, out: &mut dyn FnMut(Endpoint, &[u8])) {
        let mut buf = [0u8; 64];
        for (i, &trader) in self.traders.iter().enumerate() {
            if !poll.sends_to(i) {
                continue;
            }
            let request = self.next_request;
            self.next_request = self.next_request.wrapping_add(1).max(1);
            let message = Message::Advert {
                server: self.server,
                bytes: poll.advert,
                cpu_committable: cpu,
                net_committable: net,
            };
            let header = Header { request, ..Header::default() };
            if let Ok(n) = wire::encode(&Packet { header, message }, &mut buf) {
                self.pending[i] = Some(request);
                self.counts.sent += 1;
                out(trader, &buf[..n]);
            }
        }
    }

    /// A packet from `from`: whether it was a trader's (an acknowledgement of an advert, taken
    /// here, or anything else a trader sent, dropped).
    pub fn on_packet(&mut self, from: Endpoint, packet: &Packet<'_>) -> bool {
        let Some(i) = self.traders.iter().position(|&t| t == from) else {
            return false;
        };
        if matches!(packet.message, Message::Ack { .. })
            && self.pending[i] == Some(packet.header.request)
        {
            self.pending[i] = None;
            self.counts.acked += 1;
        }
        true
    }
}

/// One query to one trader; see the [module](self) documentation.
#[derive(Clone, Debug)]
pub struct TraderAsk {
    trader: Endpoint,
    bytes: u64,
    request: u32,
    rto_ns: u64,
    retries: u32,
    attempts: u32,
    deadline: u64,
}

impl TraderAsk {
    /// A query to `trader` for servers with `bytes`, under request id `request`, waiting
    /// `rto_ns` for the first answer (doubling after each timeout) and sending it at most
    /// `1 + retries` times.
    pub fn new(trader: Endpoint, bytes: u64, request: u32, rto_ns: u64, retries: u32) -> TraderAsk {
        TraderAsk { trader, bytes, request, rto_ns, retries, attempts: 0, deadline: 0 }
    }

    /// The trader asked.
    pub fn trader(&self) -> Endpoint {
        self.trader
    }

    /// When the answer is due.
    pub fn deadline(&self) -> u64 {
        self.deadline
    }

    /// Sends the query (again) at `now`.
    pub fn send(&mut self, now: u64, out: &mut dyn FnMut(Endpoint, &[u8])) {
        let mut buf = [0u8; 64];
        let header = Header { request: self.request, ..Header::default() };
        let message = Message::TraderQuery { bytes: self.bytes };
        if let Ok(n) = wire::encode(&Packet { header, message }, &mut buf) {
            out(self.trader, &buf[..n]);
        }
        let wait = self.rto_ns.checked_shl(self.attempts.min(16)).unwrap_or(u64::MAX);
        self.deadline = now.saturating_add(wait);
        self.attempts += 1;
    }

    /// A packet from `from`: the trader's candidates if it is the answer.
    pub fn on_packet(&self, from: Endpoint, packet: &Packet<'_>) -> Option<Vec<Candidate>> {
        match packet.message {
            Message::TraderAnswer { servers }
                if from == self.trader && packet.header.request == self.request =>
            {
                Some(servers.as_slice().to_vec())
            }
            _ => None,
        }
    }

    /// The deadline passed at `now`: sends the query again, or, with the retries spent,
    /// returns true (the trader is unreachable).
    pub fn timeout(&mut self, now: u64, out: &mut dyn FnMut(Endpoint, &[u8])) -> bool {
        if now < self.deadline {
            return false;
        }
        if self.attempts > self.retries {
            return true;
        }
        self.send(now, out);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::TraderService;
    use crate::trader::{DEFAULT_LIFETIME, TraderTable};
    use alloc::vec;

    const MIB: u64 = 1 << 20;
    const S: u64 = crate::SECOND;

    fn ep(last: u8, port: u16) -> Endpoint {
        Endpoint::parse(&alloc::format!("10.0.0.{last}:{port}")).unwrap()
    }

    fn sample(committed: u64) -> Sample {
        Sample { committed, free: 256 * MIB - committed, cpu_committable: true, cpu: 100 }
    }

    /// Delivers `sent` datagrams to the traders in `up` (by endpoint), their answers back to
    /// the link.
    fn deliver(
        link: &mut AdvertLink,
        traders: &mut [(Endpoint, TraderService)],
        up: &[Endpoint],
        now: u64,
        sent: Vec<(Endpoint, Vec<u8>)>,
    ) {
        let mut out = [0u8; wire::MAX_PACKET];
        for (to, bytes) in sent {
            let Some((ep, t)) = traders.iter_mut().find(|(e, _)| *e == to) else { continue };
            if !up.contains(ep) {
                continue;
            }
            let (_, n) = t.handle(now, &bytes, &mut out);
            let reply = wire::decode(&out[..n.unwrap()]).unwrap();
            assert!(link.on_packet(*ep, &reply));
        }
    }

    #[test]
    fn adverts_reach_the_traders_and_a_missed_one_is_sent_again() {
        let (t1, t2, server) = (ep(1, 7000), ep(3, 7000), ep(2, 7100));
        let mut traders = vec![
            (t1, TraderService::new(TraderTable::new(8, DEFAULT_LIFETIME))),
            (t2, TraderService::new(TraderTable::new(8, DEFAULT_LIFETIME))),
        ];
        let mut link = AdvertLink::new(AdvertiserConfig::new(100 * MIB, 3), &[t1, t2], server, 0);
        // The first poll is due at once: 10% of THRESHOLD to both.
        let mut sent = vec![];
        let p = link.poll(0, sample(0), true, &mut |to, b| sent.push((to, b.to_vec())));
        assert_eq!((p.unwrap().send, sent.len()), (0b11, 2));
        assert!(link.poll(S, sample(0), true, &mut |_, _| panic!("not due")).is_none());
        deliver(&mut link, &mut traders, &[t1, t2], 0, sent);
        // The advert grows at 10 s; only t1 is up: t2 misses it.
        let mut sent = vec![];
        link.poll(10 * S, sample(0), true, &mut |to, b| sent.push((to, b.to_vec())));
        deliver(&mut link, &mut traders, &[t1], 10 * S, sent);
        let advert = link.advertiser().advert();
        assert_eq!(traders[0].1.table().query(10 * S, 1)[0].bytes, advert);
        assert!(traders[1].1.table().query(10 * S, 1)[0].bytes < advert);
        // At 20 s nothing changes (the CPU is not committable, nothing fell): only t2, which
        // missed the last advert, is sent it again (saying the CPU is not committable: t2
        // withdraws it, t1 keeps what it had).
        let mut s = sample(60 * MIB);
        s.free = 256 * MIB;
        s.cpu_committable = false;
        let mut sent = vec![];
        let p = link.poll(20 * S, s, true, &mut |to, b| sent.push((to, b.to_vec()))).unwrap();
        assert_eq!((p.send, link.advertiser().advert()), (0b10, advert));
        deliver(&mut link, &mut traders, &[t1, t2], 20 * S, sent);
        assert!(traders[1].1.table().query(20 * S, 1).is_empty());
        assert_eq!(traders[0].1.table().query(20 * S, 1)[0].bytes, advert);
        // Unchanged and everyone acknowledged: nothing sent.
        let mut sent = vec![];
        let p = link.poll(30 * S, s, true, &mut |to, b| sent.push((to, b.to_vec()))).unwrap();
        assert_eq!((p.send, sent.len()), (0, 0));
        assert_eq!(link.counts(), LinkCounts { sent: 5, acked: 4, missed: 1 });
    }

    #[test]
    fn an_unacknowledged_trader_gets_the_unchanged_advert() {
        let (t1, server) = (ep(1, 7000), ep(2, 7100));
        let mut link = AdvertLink::new(AdvertiserConfig::new(100 * MIB, 1), &[t1], server, 0);
        let mut s = sample(95 * MIB);
        s.cpu_committable = false;
        let mut n = 0;
        link.poll(0, s, true, &mut |_, _| n += 1);
        assert_eq!(n, 0, "advert 0, unchanged: nothing to send");
        link.admitted(0, &mut |_, _| n += 1);
        assert_eq!(n, 1);
        // Not acknowledged: at the next poll it is sent again although unchanged.
        link.poll(10 * S, s, true, &mut |_, _| n += 1);
        assert_eq!((n, link.counts().missed), (2, 1));
        // Packets from others are not the link's.
        let p = Packet { header: Header::default(), message: Message::Alive };
        assert!(!link.on_packet(ep(9, 1), &p));
    }

    #[test]
    fn a_query_is_resent_then_its_trader_is_unreachable() {
        let t = ep(1, 7000);
        let mut ask = TraderAsk::new(t, MIB, 5, 100, 2);
        let mut sent = 0;
        ask.send(0, &mut |to, _| {
            assert_eq!(to, t);
            sent += 1
        });
        assert_eq!(ask.deadline(), 100);
        assert!(!ask.timeout(99, &mut |_, _| sent += 1));
        assert!(!ask.timeout(100, &mut |_, _| sent += 1));
        assert_eq!(ask.deadline(), 300);
        assert!(!ask.timeout(300, &mut |_, _| sent += 1));
        assert_eq!(ask.deadline(), 700);
        assert!(ask.timeout(700, &mut |_, _| sent += 1));
        assert_eq!(sent, 3);
    }

    #[test]
    fn a_query_answered_by_a_trader() {
        let (t, server) = (ep(1, 7000), ep(2, 7100));
        let mut trader = TraderService::new(TraderTable::new(8, DEFAULT_LIFETIME));
        let mut link = AdvertLink::new(AdvertiserConfig::new(100 * MIB, 1), &[t], server, 0);
        let mut out = [0u8; wire::MAX_PACKET];
        let mut sent = vec![];
        link.poll(0, sample(0), true, &mut |to, b| sent.push((to, b.to_vec())));
        for (_, b) in &sent {
            trader.handle(0, b, &mut out);
        }
        let mut ask = TraderAsk::new(t, MIB, 5, 100, 2);
        let mut query = vec![];
        ask.send(1, &mut |_, b| query = b.to_vec());
        let (_, n) = trader.handle(1, &query, &mut out);
        let answer = wire::decode(&out[..n.unwrap()]).unwrap();
        // Not from the trader, or another request: not the answer.
        assert!(ask.on_packet(ep(9, 7000), &answer).is_none());
        let other = Packet { header: Header { request: 6, ..answer.header }, ..answer };
        assert!(ask.on_packet(t, &other).is_none());
        let got = ask.on_packet(t, &answer).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].server, got[0].bytes), (server, link.advertiser().advert()));
    }
}
