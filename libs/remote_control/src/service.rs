//! The trader's side of the protocol: a [`TraderTable`] behind the remote paging protocol's
//! trader messages (`rpp::wire`), bytes in and bytes out, for the `trader` domain.
//!
//! - `Advert` (a server offering `bytes`): kept, replacing the server's previous advert; an
//!   advert of zero bytes, or one saying the server cannot commit CPU or network time to a new
//!   client, withdraws it. Each advert is acknowledged with an `Ack` of page 0, code `None`,
//!   under the advert's header, so that the server re-sends to a trader that did not answer.
//! - `TraderQuery` (a client wanting `bytes`): answered with a `TraderAnswer` naming up to five
//!   servers advertising at least that much, the most first, under the query's header.
//! - Anything else, or bytes that do not decode, is counted as bad and not answered.

use net_interface::Endpoint;
use rpp::wire::{self, Candidate, Candidates, Code, Message, Packet};

use crate::trader::{Stored, TraderTable};

/// What a trader counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceCounts {
    /// Adverts received.
    pub adverts: u64,
    /// Queries answered.
    pub queries: u64,
    /// Queries answered with at least one server.
    pub answered_with_servers: u64,
    /// Datagrams that were not trader messages.
    pub bad: u64,
}

/// What one datagram did, for the trader's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// An advert from `server` of `bytes` (0 if it withdrew), and what the table did.
    Advert {
        /// The server advertising.
        server: Endpoint,
        /// The bytes kept (0: withdrawn).
        bytes: u64,
        /// What the table did.
        stored: Stored,
    },
    /// A query for `bytes`, answered with `servers` servers.
    Query {
        /// The bytes wanted.
        bytes: u64,
        /// How many servers the answer named.
        servers: usize,
    },
    /// Not a trader message.
    Bad,
}

/// A trader: its table and counts; see the [module](self) documentation.
#[derive(Clone, Debug)]
pub struct TraderService {
    table: TraderTable<Endpoint>,
    counts: ServiceCounts,
}

impl TraderService {
    /// A trader over `table`.
    pub fn new(table: TraderTable<Endpoint>) -> TraderService {
        TraderService { table, counts: ServiceCounts::default() }
    }

    /// Its table.
    pub fn table(&mut self) -> &mut TraderTable<Endpoint> {
        &mut self.table
    }

    /// Its counts.
    pub fn counts(&self) -> ServiceCounts {
        self.counts
    }

    /// Handles the datagram `bytes` that came at `now`: what happened, and the answer's length
    /// in `out` (to send back to the datagram's sender), if any.
    pub fn handle(&mut self, now: u64, bytes: &[u8], out: &mut [u8]) -> (Event, Option<usize>) {
        let Ok(packet) = wire::decode(bytes) else {
            self.counts.bad += 1;
            return (Event::Bad, None);
        };
        let header = packet.header;
        let (event, reply) = match packet.message {
            Message::Advert { server, bytes, cpu_committable, net_committable } => {
                self.counts.adverts += 1;
                let bytes = if cpu_committable && net_committable { bytes } else { 0 };
                let stored = self.table.advert(now, server, bytes);
                let ack = Message::Ack { vpn: 0, code: Code::None };
                (Event::Advert { server, bytes, stored }, ack)
            }
            Message::TraderQuery { bytes } => {
                self.counts.queries += 1;
                let mut servers = Candidates::new();
                for a in self.table.query(now, bytes) {
                    servers.push(Candidate { server: a.server, bytes: a.bytes });
                }
                let n = servers.as_slice().len();
                self.counts.answered_with_servers += u64::from(n > 0);
                (Event::Query { bytes, servers: n }, Message::TraderAnswer { servers })
            }
            _ => {
                self.counts.bad += 1;
                return (Event::Bad, None);
            }
        };
        (event, wire::encode(&Packet { header, message: reply }, out).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trader::DEFAULT_LIFETIME;
    use rpp::wire::Header;

    pub(crate) fn ep(last: u8, port: u16) -> Endpoint {
        Endpoint::parse(&alloc::format!("10.0.0.{last}:{port}")).unwrap()
    }

    fn packet(request: u32, message: Message<'_>) -> alloc::vec::Vec<u8> {
        let mut buf = [0u8; wire::MAX_PACKET];
        let n = wire::encode(
            &Packet { header: Header { request, ..Header::default() }, message },
            &mut buf,
        )
        .unwrap();
        buf[..n].to_vec()
    }

    fn advert(server: Endpoint, bytes: u64, committable: bool) -> Message<'static> {
        Message::Advert { server, bytes, cpu_committable: committable, net_committable: true }
    }

    #[test]
    fn adverts_are_kept_and_acknowledged_queries_answered() {
        let mut t = TraderService::new(TraderTable::new(8, DEFAULT_LIFETIME));
        let mut out = [0u8; wire::MAX_PACKET];
        let (e, n) = t.handle(0, &packet(7, advert(ep(2, 7100), 1 << 20, true)), &mut out);
        assert_eq!(e, Event::Advert { server: ep(2, 7100), bytes: 1 << 20, stored: Stored::Added });
        let reply = wire::decode(&out[..n.unwrap()]).unwrap();
        assert_eq!(reply.header.request, 7);
        assert_eq!(reply.message, Message::Ack { vpn: 0, code: Code::None });
        t.handle(1, &packet(8, advert(ep(3, 7100), 4 << 20, true)), &mut out);
        let (e, n) = t.handle(2, &packet(9, Message::TraderQuery { bytes: 1 << 20 }), &mut out);
        assert_eq!(e, Event::Query { bytes: 1 << 20, servers: 2 });
        let reply = wire::decode(&out[..n.unwrap()]).unwrap();
        assert_eq!(reply.header.request, 9);
        let Message::TraderAnswer { servers } = reply.message else { panic!("{reply:?}") };
        let got: alloc::vec::Vec<Endpoint> = servers.as_slice().iter().map(|c| c.server).collect();
        assert_eq!(got, [ep(3, 7100), ep(2, 7100)]);
        assert_eq!(
            t.counts(),
            ServiceCounts { adverts: 2, queries: 1, answered_with_servers: 1, bad: 0 }
        );
    }

    #[test]
    fn an_advert_without_cpu_withdraws() {
        let mut t = TraderService::new(TraderTable::new(8, DEFAULT_LIFETIME));
        let mut out = [0u8; wire::MAX_PACKET];
        t.handle(0, &packet(1, advert(ep(2, 7100), 1 << 20, true)), &mut out);
        let (e, _) = t.handle(1, &packet(2, advert(ep(2, 7100), 1 << 20, false)), &mut out);
        assert_eq!(e, Event::Advert { server: ep(2, 7100), bytes: 0, stored: Stored::Withdrawn });
        let (e, _) = t.handle(2, &packet(3, Message::TraderQuery { bytes: 1 }), &mut out);
        assert_eq!(e, Event::Query { bytes: 1, servers: 0 });
    }

    #[test]
    fn anything_else_is_bad_and_unanswered() {
        let mut t = TraderService::new(TraderTable::new(8, DEFAULT_LIFETIME));
        let mut out = [0u8; wire::MAX_PACKET];
        assert_eq!(t.handle(0, b"hello", &mut out), (Event::Bad, None));
        assert_eq!(t.handle(0, &packet(1, Message::Release), &mut out), (Event::Bad, None));
        let mut p = packet(1, Message::TraderQuery { bytes: 1 });
        p[30] ^= 1; // corrupted: the checksum fails
        assert_eq!(t.handle(0, &p, &mut out), (Event::Bad, None));
        assert_eq!(t.counts().bad, 3);
    }
}
