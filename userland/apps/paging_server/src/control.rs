//! The paging server's control plane (Heracles §10.3.3, §10.5): its adverts to the traders by
//! the advertising threshold algorithm, the memory it offers to new clients, and revocation
//! when a local domain takes memory back.
//!
//! The node's memory for the server is `--memory BYTES`: it is `MAX_THRESHOLD`, and committed
//! memory is the local domains' (0, until `--reclaim-at MS:BYTES` says that from MS ms of the
//! server's clock they hold BYTES: a local domain starting up, or with a smaller BYTES one
//! ending; the option may be given several times) plus the clients' reservations. At
//! every poll (`--poll MS`, 10 s by default) `remote_control`'s [`AdvertLink`] runs Fig 10.4 on
//! that and sends the advert to the traders (`--traders A.B.C.D:P+...`, acknowledged, re-sent
//! to a trader that missed one); the memory offered to new clients is what keeps committed
//! memory under `THRESHOLD + 10%`; admitting a client backs the advert off at once; and when
//! committed memory passes `MAX_THRESHOLD` the server revokes clients for the excess
//! (`remote_server::Server::revoke`). Without `--traders` or `--reclaim-at` none of this runs
//! and the server offers its `--memory` as it is.

use alloc::vec::Vec;

use net_interface::Endpoint;
use remote_control::AdvertLink;
use remote_control::advertiser::{AdvertiserConfig, Decision, Sample};
use remote_server::Server;
use rpp::wire;
use tessera::println;

/// The control plane's settings.
pub struct Settings {
    /// The traders to advertise to.
    pub traders: Vec<Endpoint>,
    /// Nanoseconds between polls.
    pub poll_ns: u64,
    /// From when (ns after the start) the local domains hold how many bytes, in any order.
    pub reclaim: Vec<(u64, u64)>,
    /// When (ns after the start) to take back how many pages of the first client's
    /// reservation, in part (`--revoke-part`).
    pub partial: Option<(u64, u64)>,
}

/// The control plane of a server; see the [module](self) documentation.
pub struct Control {
    link: AdvertLink,
    memory: u64,
    local: u64,
    /// The local domains' changes still to come, the next last.
    reclaim: Vec<(u64, u64)>,
    /// The partial revocation still to come: when, how many pages.
    partial: Option<(u64, u64)>,
    created: u64,
    reserved: u64,
    revokes: u64,
}

impl Control {
    /// The control plane of a server at `me` offering `memory`, started at `now`; `None` when
    /// the settings ask for none.
    pub fn new(settings: Settings, me: Endpoint, memory: u64, now: u64) -> Option<Control> {
        if settings.traders.is_empty() && settings.reclaim.is_empty() && settings.partial.is_none()
        {
            return None;
        }
        let config =
            AdvertiserConfig { poll_ns: settings.poll_ns, ..AdvertiserConfig::new(memory, 1) };
        let link = AdvertLink::new(config, &settings.traders, me, now);
        let mut reclaim: Vec<(u64, u64)> =
            settings.reclaim.iter().map(|&(at, bytes)| (now.saturating_add(at), bytes)).collect();
        reclaim.sort_by_key(|&(at, _)| core::cmp::Reverse(at));
        let partial = settings.partial.map(|(at, pages)| (now.saturating_add(at), pages));
        Some(Control {
            link,
            memory,
            local: 0,
            reclaim,
            partial,
            created: 0,
            reserved: 0,
            revokes: 0,
        })
    }

    /// When it next has something to do.
    pub fn deadline(&self) -> u64 {
        let reclaim = self.reclaim.last().map_or(u64::MAX, |&(at, _)| at);
        let partial = self.partial.map_or(u64::MAX, |(at, _)| at);
        self.link.advertiser().next_poll().min(reclaim).min(partial)
    }

    /// A datagram from `from`: whether it was a trader's (taken here).
    pub fn on_datagram(&mut self, from: Endpoint, bytes: &[u8]) -> bool {
        if !self.link.traders().contains(&from) {
            return false;
        }
        if let Ok(p) = wire::decode(bytes) {
            self.link.on_packet(from, &p);
        }
        true
    }

    /// Moves on at `now`: the local domain's start, the poll when due (adverts, revocation),
    /// the offer to new clients, and a new client's admission.
    pub fn tick(&mut self, now: u64, server: &mut Server, out: &mut dyn FnMut(Endpoint, &[u8])) {
        while let Some(&(at, bytes)) = self.reclaim.last()
            && now >= at
        {
            self.reclaim.pop();
            match bytes > self.local {
                true => {
                    println!("paging-server: a local domain takes {} bytes", bytes - self.local)
                }
                false => println!(
                    "paging-server: a local domain gives back {} bytes",
                    self.local - bytes
                ),
            }
            self.local = bytes;
            // It is seen at once, not at the next poll.
            self.poll(now, server, out, true);
        }
        if let Some((at, pages)) = self.partial
            && now >= at
        {
            self.partial = None;
            // The first client still open, if its reservation is larger.
            let stream = server.reports().iter().find(|r| !r.released).map(|r| r.stream);
            let started = stream.is_some_and(|s| server.revoke_part(now, s, pages, out));
            match (stream, started) {
                (Some(s), true) => {
                    println!("paging-server: revoking {pages} pages of stream {s} in part")
                }
                _ => println!("paging-server: no client to revoke {pages} pages of in part"),
            }
        }
        let created = server.counts().created;
        let (_, reserved) = server.memory();
        if created > self.created {
            // A client admitted: the advert backs off at once, by what it reserved.
            self.created = created;
            self.link.admitted(reserved.saturating_sub(self.reserved), out);
        }
        self.reserved = reserved;
        if self.link.advertiser().due(now) {
            self.poll(now, server, out, false);
        }
        let (_, reserved) = server.memory();
        let committed = self.local.saturating_add(reserved);
        server.set_offer(reserved.saturating_add(self.link.advertiser().room(committed)));
    }

    fn poll(
        &mut self,
        now: u64,
        server: &mut Server,
        out: &mut dyn FnMut(Endpoint, &[u8]),
        force: bool,
    ) {
        let (_, reserved) = server.memory();
        let committed = self.local.saturating_add(reserved);
        let cpu_used = server.cpu_committed_ppm();
        let sample = Sample {
            committed,
            free: self.memory.saturating_sub(committed),
            cpu_committable: cpu_used < 1_000_000,
            cpu: 1_000_000u64.saturating_sub(cpu_used),
        };
        let decision = match force {
            // Revoke at once when a local domain's start passes MAX_THRESHOLD; the next
            // poll stays when it was.
            true if committed > self.memory => Decision::Revoke(committed - self.memory),
            true => return,
            false => match self.link.poll(now, sample, true, out) {
                Some(p) => p.decision,
                None => return,
            },
        };
        if let Decision::Revoke(bytes) = decision {
            let n = server.revoke(now, bytes, out);
            if n > 0 {
                self.revokes += n as u64;
                println!("paging-server: revoking {n} clients for {bytes} bytes");
            }
        }
    }

    /// Prints what it did.
    pub fn report(&self, server: &Server) {
        let c = self.link.counts();
        let r = server.revoke_counts();
        println!(
            "paging-server: adverts sent={} acked={} missed={} advert={} local={}; revocations revoked={} moved={} returned={} abandoned={} pages_forwarded={} held={} partial={} partial_done={} pages_given_back={}",
            c.sent,
            c.acked,
            c.missed,
            self.link.advertiser().advert(),
            self.local,
            r.revoked,
            r.moved,
            r.returned,
            r.abandoned,
            r.pages_forwarded,
            r.held,
            r.partial,
            r.partial_done,
            r.pages_given_back
        );
    }
}
