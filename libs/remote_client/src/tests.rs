//! Host tests of the client against in-process servers on a simulated net ([`crate::sim`]).

extern crate std;

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use net_client::Session;
use net_interface::{Endpoint, Ipv4Addr};
use pager::remote::{RemoteError, RemoteNotice, RemoteStats, RemoteStore};
use pager::{PAGE_SIZE, Page};
use remote_server::{ClientReport, Server};
use rpp::wire::RefuseReason;

use remote_control::service::TraderService;
use remote_control::trader::TraderTable;

use crate::sim::{self, Faults, Net, Peer, SharedNet, SimTransport};
use crate::{Config, ConnectError, RemoteClient};

const CLIENT: Ipv4Addr = Ipv4Addr([10, 0, 0, 1]);

fn server(n: u8) -> Endpoint {
    Endpoint { addr: Ipv4Addr([10, 0, 0, 1 + n]), port: 7100 }
}

/// A peer that answers every datagram with itself.
struct Echo;

impl Peer for Echo {
    fn datagram(
        &mut self,
        _: u64,
        from: Endpoint,
        payload: &[u8],
        out: &mut Vec<(Endpoint, Vec<u8>)>,
    ) {
        out.push((from, payload.to_vec()));
    }
    fn poll(&mut self, _: u64, _: &mut Vec<(Endpoint, Vec<u8>)>) {}
    fn next_poll(&self) -> Option<u64> {
        None
    }
    fn as_any(&mut self) -> &mut dyn core::any::Any {
        self
    }
}

#[test]
fn the_simulated_net_delivers_loses_and_duplicates_by_its_seed() {
    let faults =
        Faults { loss: 100, dup: 50, reorder: 200, latency_ns: 50_000, jitter_ns: 200_000 };
    let net = Net::new(7, faults);
    Net::add_peer(&net, server(1), Box::new(Echo));
    let mut s = Session::new(Net::transport(&net, CLIENT));
    s.open(5000).unwrap();
    let (mut answered, mut extra) = (0, 0);
    for i in 0..400u32 {
        s.send(server(1), &i.to_le_bytes()).unwrap();
        let deadline = sim::now() + 1_000_000;
        while let Some(got) = s.receive_until(deadline, |d| d.payload.to_vec()).unwrap() {
            if got == i.to_le_bytes() {
                answered += 1;
                break;
            }
            extra += 1;
        }
    }
    let n = net.borrow();
    // Each ping crosses the wire twice: about 81% come back.
    assert!((280..=360).contains(&answered), "{answered} answered");
    assert!(n.lost > 40 && n.duplicated > 10, "lost {} duplicated {}", n.lost, n.duplicated);
    assert!(extra > 0, "no late or duplicate answers");
    assert!(sim::now() > 400 * 100_000);
}

/// A paging server on the net: each datagram is taken and the queued work served at once,
/// each packet costing the server 2 µs by its clock, its replies sent as its link allows.
struct ServerPeer {
    server: Server,
    cpu: u64,
    /// When to revoke clients for this many bytes (a local domain starting up).
    revoke_at: Option<(u64, u64)>,
}

impl ServerPeer {
    fn run(&mut self, now: u64, out: &mut Vec<(Endpoint, Vec<u8>)>) {
        let cpu = &mut self.cpu;
        let mut clock = || {
            *cpu += 1_000;
            *cpu
        };
        while self.server.serve(now, &mut clock) {}
        self.server.transmit(now, &mut |to, b| out.push((to, b.to_vec())));
    }
}

impl Peer for ServerPeer {
    fn datagram(
        &mut self,
        now: u64,
        from: Endpoint,
        payload: &[u8],
        out: &mut Vec<(Endpoint, Vec<u8>)>,
    ) {
        let cpu = &mut self.cpu;
        let mut clock = || {
            *cpu += 1_000;
            *cpu
        };
        self.server
            .receive(now, &mut clock, from, payload, &mut |to, b| out.push((to, b.to_vec())));
        self.run(now, out);
    }
    fn poll(&mut self, now: u64, out: &mut Vec<(Endpoint, Vec<u8>)>) {
        if let Some((at, bytes)) = self.revoke_at
            && now >= at
        {
            self.revoke_at = None;
            self.server.revoke(now, bytes, &mut |to, b| out.push((to, b.to_vec())));
        }
        self.server.poll_revocations(now, &mut |to, b| out.push((to, b.to_vec())));
        self.run(now, out);
    }
    fn next_poll(&self) -> Option<u64> {
        let revoke = self.revoke_at.map(|(at, _)| at);
        [self.server.next_wakeup(), self.server.revocation_deadline(), revoke]
            .into_iter()
            .flatten()
            .min()
    }
    fn as_any(&mut self) -> &mut dyn core::any::Any {
        self
    }
}

/// A net with `servers` paging servers of `memory` bytes each.
fn net_with(seed: u64, faults: Faults, servers: u8, memory: u64) -> SharedNet {
    let net = Net::new(seed, faults);
    for n in 1..=servers {
        let peer =
            ServerPeer { server: Server::new(memory, u64::from(n)), cpu: 0, revoke_at: None };
        Net::add_peer(&net, server(n), Box::new(peer));
    }
    net
}

fn client(net: &SharedNet, config: Config) -> Result<RemoteClient<SimTransport>, ConnectError> {
    let mut s = Session::new(Net::transport(net, CLIENT));
    s.open(5000).unwrap();
    RemoteClient::connect(s, sim::now, config)
}

/// Page `page`'s contents at `version`.
fn contents(page: usize, version: u32) -> Box<Page> {
    let mut p = Box::new([0u8; PAGE_SIZE]);
    let mut x = (page as u64) << 32 | u64::from(version) | 1;
    for chunk in p.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    p
}

/// The reports of the server at `addr`.
fn reports(net: &SharedNet, addr: Endpoint) -> Vec<ClientReport> {
    let mut n = net.borrow_mut();
    let peer = n.peer(addr).expect("a server");
    // The peers are ServerPeers.
    let any: &mut dyn core::any::Any = peer.as_any();
    any.downcast_mut::<ServerPeer>().expect("a server peer").server.reports()
}

/// Writes `pages` pages (version 1), then rewrites every third (version 2), then reads every
/// page back and checks every byte: the versions written.
fn write_all_and_check<T: net_client::Transport>(
    c: &mut RemoteClient<T>,
    pages: usize,
) -> Vec<u32> {
    let mut versions = vec![0u32; pages];
    for (page, v) in versions.iter_mut().enumerate() {
        c.write(page, &contents(page, 1)).unwrap();
        *v = 1;
    }
    for page in (0..pages).step_by(3) {
        c.write(page, &contents(page, 2)).unwrap();
        versions[page] = 2;
    }
    check_all(c, &versions);
    versions
}

fn check_all<T: net_client::Transport>(c: &mut RemoteClient<T>, versions: &[u32]) {
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    for (page, &v) in versions.iter().enumerate() {
        assert!(c.holds(page), "page {page} not held");
        c.read(page, &mut buf).unwrap_or_else(|e| panic!("page {page}: {e}"));
        assert!(buf[..] == contents(page, v)[..], "page {page} differs from version {v}");
    }
}

#[test]
fn pages_are_spread_and_come_back_whole_under_loss_duplication_and_reordering() {
    let faults =
        Faults { loss: 100, dup: 50, reorder: 200, latency_ns: 50_000, jitter_ns: 300_000 };
    let net = net_with(11, faults, 2, 1 << 20);
    let mut c = client(&net, Config::new(vec![server(1), server(2)], 128)).unwrap();
    write_all_and_check(&mut c, 64);
    let st = c.stats();
    assert_eq!((st.servers, st.failovers), (2, 0));
    assert_eq!(st.pages_written, 64 + 22);
    assert_eq!(st.pages_read, 64);
    assert!(st.retransmits > 0, "10% loss and no retransmission: {st:?}");
    // Spread: each server holds half the pages.
    for n in [1, 2] {
        let r = reports(&net, server(n));
        assert_eq!(r.len(), 1);
        // Each page written whole once, a third again; read at least once (a read asked
        // again after a loss is served again).
        assert_eq!((r[0].pages, r[0].writes), (32, 32 + 11), "server {n}: {:?}", r[0]);
        assert!(r[0].reads >= 32, "server {n}: {:?}", r[0]);
    }
    // Freed pages are gone from the servers and the client.
    c.free(0);
    c.free(1);
    assert!(!c.holds(0) && !c.holds(1));
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    assert_eq!(c.read(0, &mut buf), Err(RemoteError::NotHeld));
    let held: u64 = [1, 2].iter().map(|&n| reports(&net, server(n))[0].pages).sum();
    assert_eq!(held, 62);
    // Release closes both streams.
    c.release();
    for n in [1, 2] {
        let r = reports(&net, server(n));
        assert!(r[0].released && r[0].pages == 0, "{:?}", r[0]);
        assert!(r[0].cpu_ns > 0);
    }
    assert!(net.borrow().lost > 0);
}

#[test]
fn a_mirrored_client_loses_nothing_when_its_primary_dies() {
    let faults = Faults { loss: 50, dup: 20, reorder: 100, latency_ns: 50_000, jitter_ns: 200_000 };
    let net = net_with(5, faults, 2, 1 << 20);
    let mut config = Config::new(vec![server(1), server(2)], 128);
    config.mirror = true;
    let mut c = client(&net, config).unwrap();
    let versions = write_all_and_check(&mut c, 48);
    // Every page on both servers.
    for n in [1, 2] {
        assert_eq!(reports(&net, server(n))[0].pages, 48);
    }
    assert_eq!(c.stats().pages_written, 2 * (48 + 16));
    net.borrow_mut().kill(server(1));
    // Every page reads back from the mirror, promoted.
    check_all(&mut c, &versions);
    let st = c.stats();
    assert_eq!((st.servers, st.failovers), (1, 1));
    let r = reports(&net, server(2));
    assert_eq!(r[0].role, rpp::wire::Role::Primary);
    // Writes go on to the survivor alone.
    c.write(3, &contents(3, 7)).unwrap();
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    c.read(3, &mut buf).unwrap();
    assert!(buf[..] == contents(3, 7)[..]);
    assert_eq!(c.notice(), None);
}

#[test]
fn a_client_whose_servers_all_vanish_says_so_and_refuses_writes() {
    let net = net_with(3, Faults::NONE, 2, 1 << 20);
    let mut c = client(&net, Config::new(vec![server(1), server(2)], 16)).unwrap();
    for page in 0..8 {
        c.write(page, &contents(page, 1)).unwrap();
    }
    net.borrow_mut().kill(server(1));
    net.borrow_mut().kill(server(2));
    // Page 0 was on server 1, page 1 on server 2: both reads find their servers gone.
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    assert_eq!(c.read(0, &mut buf), Err(RemoteError::NotHeld));
    assert_eq!(c.write(1, &contents(1, 2)), Err(RemoteError::Unreachable));
    assert_eq!(c.notice(), Some(RemoteNotice::ServersLost));
    assert_eq!(c.notice(), None);
    assert_eq!(c.write(2, &contents(2, 2)), Err(RemoteError::NoServer));
    assert!((0..8).all(|p| !c.holds(p)));
    assert_eq!(c.stats().servers, 0);
    // Giving up on unreachable servers took the retries' time, and no longer.
    assert!(sim::now() > 1_000_000_000 && sim::now() < 120_000_000_000, "{}", sim::now());
}

#[test]
fn servers_that_refuse_or_do_not_answer_are_not_used() {
    // Server 1 offers 16 pages' memory: a client of 128 pages is refused.
    let net = net_with(9, Faults::NONE, 1, 16 * PAGE_SIZE as u64);
    let r = client(&net, Config::new(vec![server(1)], 128)).err();
    assert_eq!(r, Some(ConnectError::NoServer(Some(RefuseReason::Memory))));
    // Server 3 does not exist: the client uses server 1 alone.
    let net = net_with(9, Faults::NONE, 1, 1 << 20);
    let mut c = client(&net, Config::new(vec![server(1), server(3)], 16)).unwrap();
    assert_eq!(c.stats().servers, 1);
    for page in 0..4 {
        c.write(page, &contents(page, 1)).unwrap();
    }
    check_all(&mut c, &[1; 4]);
    // Mirroring with one server is a bad configuration.
    let mut config = Config::new(vec![server(1)], 16);
    config.mirror = true;
    assert_eq!(client(&net, config).err(), Some(ConnectError::BadConfig));
}

/// A trader served in-process (`remote_control`'s [`TraderService`]).
struct TraderPeer(TraderService);

impl Peer for TraderPeer {
    fn datagram(
        &mut self,
        now: u64,
        from: Endpoint,
        payload: &[u8],
        out: &mut Vec<(Endpoint, Vec<u8>)>,
    ) {
        let mut buf = [0u8; rpp::wire::MAX_PACKET];
        if let (_, Some(n)) = self.0.handle(now, payload, &mut buf) {
            out.push((from, buf[..n].to_vec()));
        }
    }
    fn poll(&mut self, _: u64, _: &mut Vec<(Endpoint, Vec<u8>)>) {}
    fn next_poll(&self) -> Option<u64> {
        None
    }
    fn as_any(&mut self) -> &mut dyn core::any::Any {
        self
    }
}

fn trader(n: u8) -> Endpoint {
    Endpoint { addr: Ipv4Addr([10, 0, 0, 100 + n]), port: 7000 }
}

/// Adds trader `n` to `net`, holding adverts of `servers` (1 MiB each).
fn add_trader(net: &SharedNet, n: u8, servers: &[Endpoint]) {
    let mut t = TraderService::new(TraderTable::new(8, 1_000 * 1_000_000_000));
    for &s in servers {
        t.table().advert(0, s, 1 << 20);
    }
    Net::add_peer(net, trader(n), Box::new(TraderPeer(t)));
}

/// The server peer at `addr`.
fn with_server<R>(net: &SharedNet, addr: Endpoint, f: impl FnOnce(&mut ServerPeer) -> R) -> R {
    let mut n = net.borrow_mut();
    let peer = n.peer(addr).expect("a server");
    let any: &mut dyn core::any::Any = peer.as_any();
    f(any.downcast_mut::<ServerPeer>().expect("a server peer"))
}

#[test]
fn a_client_finds_its_server_through_a_trader() {
    let net = net_with(21, Faults::NONE, 2, 1 << 20);
    // Trader 1 does not exist (unreachable); trader 2 knows server 2 only.
    add_trader(&net, 2, &[server(2)]);
    let mut config = Config::new(vec![], 64);
    config.traders = vec![trader(1), trader(2)];
    let mut c = client(&net, config).unwrap();
    let servers: Vec<Endpoint> = c.servers().map(|s| s.0).collect();
    assert_eq!(servers, [server(2)]);
    write_all_and_check(&mut c, 16);
    assert_eq!(reports(&net, server(2))[0].pages, 16);
    assert!(reports(&net, server(1)).is_empty());
    // No trader knows a server: no client (the caller pages locally).
    let net = net_with(22, Faults::NONE, 1, 1 << 20);
    add_trader(&net, 1, &[]);
    let mut config = Config::new(vec![], 64);
    config.traders = vec![trader(1)];
    assert_eq!(client(&net, config).err(), Some(ConnectError::NoServer(None)));
}

#[test]
fn a_revoked_client_moves_its_pages_to_another_server_without_losing_any() {
    let faults = Faults { loss: 50, dup: 20, reorder: 100, latency_ns: 50_000, jitter_ns: 200_000 };
    let net = net_with(23, faults, 2, 1 << 20);
    add_trader(&net, 1, &[server(1), server(2)]);
    let mut config = Config::new(vec![server(1)], 64);
    config.traders = vec![trader(1)];
    let mut c = client(&net, config).unwrap();
    let mut versions = write_all_and_check(&mut c, 48);
    assert_eq!(reports(&net, server(1))[0].pages, 48);
    // Server 1 needs its memory back.
    with_server(&net, server(1), |p| p.revoke_at = Some((sim::now(), 1)));
    // The client goes on writing and reading while its pages move.
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    for round in 0..200u32 {
        let page = (round as usize * 7) % 48;
        if round % 3 == 0 {
            c.write(page, &contents(page, 10 + round)).unwrap();
            versions[page] = 10 + round;
        } else {
            c.read(page, &mut buf).unwrap();
            assert!(buf[..] == contents(page, versions[page])[..], "page {page}, round {round}");
        }
        if c.stats().revocations == 1 && round > 50 {
            break;
        }
    }
    assert_eq!(c.notice(), None);
    assert_eq!(c.stats().revocations, 1, "{:?}", c.stats());
    check_all(&mut c, &versions);
    // Every page is on server 2; server 1 freed the stream.
    let old = reports(&net, server(1));
    assert!(old[0].released && old[0].pages == 0, "{:?}", old[0]);
    assert_eq!(reports(&net, server(2))[0].pages, 48);
    let counts = with_server(&net, server(1), |p| p.server.revoke_counts());
    assert_eq!((counts.revoked, counts.moved), (1, 1), "{counts:?}");
    assert!(counts.pages_forwarded > 0 && counts.pages_forwarded <= 48, "{counts:?}");
    let servers: Vec<(Endpoint, bool)> = c.servers().map(|s| (s.0, s.3)).collect();
    assert_eq!(servers, [(server(1), true), (server(2), false)]);
}

#[test]
fn a_revoked_client_without_another_server_is_told_and_reads_its_pages_back() {
    let net = net_with(24, Faults::NONE, 1, 1 << 20);
    add_trader(&net, 1, &[server(1)]);
    let mut config = Config::new(vec![server(1)], 64);
    config.traders = vec![trader(1)];
    let mut c = client(&net, config).unwrap();
    let versions = write_all_and_check(&mut c, 24);
    with_server(&net, server(1), |p| p.revoke_at = Some((sim::now(), 1)));
    // The notice comes while the client waits for its next answer.
    let mut notice = None;
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    for page in 0..24 {
        c.read(page, &mut buf).unwrap();
        notice = notice.or(c.notice());
    }
    assert_eq!(notice, Some(RemoteNotice::RevokedWithoutReplacement));
    // Its pages are all still there to bring back, then it releases.
    check_all(&mut c, &versions);
    c.release();
    let r = reports(&net, server(1));
    assert!(r[0].released, "{:?}", r[0]);
    let counts = with_server(&net, server(1), |p| p.server.revoke_counts());
    assert_eq!((counts.revoked, counts.returned, counts.moved), (1, 1, 0), "{counts:?}");
}

mod control;

/// Page `page`'s contents at `version`, which WKdm compresses (small integers, a few runs of
/// zeros, some random words): about 2:1.
fn word_contents(page: usize, version: u32) -> Box<Page> {
    let random = contents(page, version);
    let mut p = Box::new([0u8; PAGE_SIZE]);
    for (i, w) in p.chunks_exact_mut(4).enumerate() {
        let word = match i % 16 {
            0 => u32::from_le_bytes(random[i * 4..i * 4 + 4].try_into().unwrap()),
            1..=3 => 0,
            _ => (page as u32 * 31 + version * 7 + i as u32) % 1000,
        };
        w.copy_from_slice(&word.to_le_bytes());
    }
    p
}

/// Writes compressible pages (version 1, every third again as version 2) and `raw` pages that
/// do not compress after them, and reads every one back, every byte checked. The client's
/// counts.
fn netc_run(seed: u64, faults: Faults, netc: bool, pages: usize, raw: usize) -> RemoteStats {
    let net = net_with(seed, faults, 2, 1 << 20);
    let mut config = Config::new(vec![server(1), server(2)], 128);
    config.netc = netc;
    let mut c = client(&net, config).unwrap();
    for page in 0..pages {
        c.write(page, &word_contents(page, 1)).unwrap();
    }
    for page in (0..pages).step_by(3) {
        c.write(page, &word_contents(page, 2)).unwrap();
    }
    for page in pages..pages + raw {
        c.write(page, &contents(page, 1)).unwrap();
    }
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    for page in 0..pages + raw {
        c.read(page, &mut buf).unwrap_or_else(|e| panic!("page {page}: {e}"));
        let want = match page < pages {
            true => word_contents(page, if page % 3 == 0 { 2 } else { 1 }),
            false => contents(page, 1),
        };
        assert!(buf[..] == want[..], "page {page} differs");
    }
    // The servers hold what was sent: compressed pages in fewer bytes.
    let held: u64 = [1, 2].iter().map(|&n| reports(&net, server(n))[0].bytes).sum();
    let whole = ((pages + raw) * PAGE_SIZE) as u64;
    if netc {
        assert!(held < whole - (pages * PAGE_SIZE / 3) as u64, "{held} of {whole}");
    } else {
        assert_eq!(held, whole);
    }
    c.stats()
}

#[test]
fn with_netc_pages_go_compressed_and_come_back_whole_under_loss_duplication_and_reordering() {
    let faults =
        Faults { loss: 100, dup: 50, reorder: 200, latency_ns: 50_000, jitter_ns: 300_000 };
    let (pages, raw) = (48, 8);
    let st = netc_run(21, faults, true, pages, raw);
    // Every compressible write went compressed; the pages that do not shrink went whole.
    let writes = (pages + pages.div_ceil(3) + raw) as u64;
    assert_eq!((st.pages_written, st.compressed_writes), (writes, writes - raw as u64));
    assert!(st.page_bytes_written < writes * PAGE_SIZE as u64 * 2 / 3, "{st:?}");
    assert!(st.retransmits > 0, "10% loss and no retransmission: {st:?}");
}

#[test]
fn compressed_pages_take_fewer_packets_than_whole_ones() {
    let clean = Faults { loss: 0, dup: 0, reorder: 0, latency_ns: 50_000, jitter_ns: 0 };
    let (pages, raw) = (48, 4);
    let netc = netc_run(22, clean, true, pages, raw);
    let whole = netc_run(22, clean, false, pages, raw);
    assert_eq!(whole.compressed_writes, 0);
    assert_eq!(whole.page_bytes_written, whole.pages_written * PAGE_SIZE as u64);
    // A page of these compresses to about half: 2 data packets instead of 3, each write
    // and each read of one.
    let saved =
        whole.packets_sent + whole.packets_received - netc.packets_sent - netc.packets_received;
    assert_eq!(saved, netc.compressed_writes + pages as u64, "{netc:?} against {whole:?}");
}

#[test]
fn a_page_given_compressed_is_sent_as_it_is_and_read_back_whole() {
    let clean = Faults { loss: 0, dup: 0, reorder: 0, latency_ns: 50_000, jitter_ns: 0 };
    let net = net_with(23, clean, 1, 1 << 20);
    let mut c = client(&net, Config::new(vec![server(1)], 16)).unwrap();
    let page = word_contents(3, 1);
    let mut scratch = pager::cache::wkdm::Scratch::new();
    let wkdm = scratch.compress(&page, PAGE_SIZE - 1).expect("it compresses").to_vec();
    assert_eq!(c.write_compressed(3, &wkdm), Ok(true));
    let r = reports(&net, server(1));
    assert_eq!((r[0].pages, r[0].bytes), (1, wkdm.len() as u64));
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    c.read(3, &mut buf).unwrap();
    assert!(buf[..] == page[..]);
    // Not shorter than a page: not taken (the caller writes the page whole).
    assert_eq!(c.write_compressed(4, &[0u8; PAGE_SIZE]), Ok(false));
    assert!(!c.holds(4));
    let st = c.stats();
    assert_eq!((st.compressed_writes, st.page_bytes_written), (1, wkdm.len() as u64));
}

/// A page at a page-aligned address, as the pager's window pages are.
#[repr(align(4096))]
struct Aligned(Page);

#[test]
fn a_page_written_from_a_lendable_frame_leaves_from_it_and_comes_back_intact() {
    let net = net_with(11, Faults::NONE, 2, 1 << 20);
    let mut config = Config::new(vec![server(1), server(2)], 64);
    config.mirror = true;
    let mut c = client(&net, config).unwrap();
    let mut frame = Box::new(Aligned([0; PAGE_SIZE]));
    for page in 0..16 {
        frame.0.copy_from_slice(&contents(page, 1)[..]);
        let va = frame.0.as_ptr() as usize;
        // Every other page is in a frame the client may lend.
        if page % 2 == 0 {
            Net::lendable(&net, 0, va, &frame.0);
        } else {
            Net::not_lendable(&net, 0, va);
        }
        c.write(page, &frame.0).unwrap();
    }
    // The primary's copy of each even page left from its frame (three datagrams each); the
    // mirror's, sent at once, went through the data area (a frame is lent for one request at
    // a time); the odd pages could not be lent. The servers checked every chunk's CRC.
    assert_eq!(Net::lent(&net, 0), (8, 24));
    assert_eq!((c.lending.sent, c.lending.copied), (8, 8));
    // Every datagram was right the first time: none was sent again.
    assert_eq!(c.stats().retransmits, 0);
    let stored: u64 =
        [server(1), server(2)].iter().flat_map(|s| reports(&net, *s)).map(|r| r.pages).sum();
    assert_eq!(stored, 32);
    check_all(&mut c, &[1; 16]);
}

#[test]
fn a_full_transmit_queue_is_waited_out_and_one_that_stays_full_loses_datagrams_not_the_client() {
    let net = net_with(12, Faults::NONE, 1, 1 << 20);
    let mut c = client(&net, Config::new(vec![server(1)], 64)).unwrap();
    let mut versions = write_all_and_check(&mut c, 16);
    // The driver's queue is full for the next 2 ms: the client waits it out, pausing between
    // tries (time passes only while it pauses or waits), and loses nothing.
    let t0 = sim::now();
    Net::busy_until(&net, 0, t0 + 2_000_000);
    for (page, v) in versions.iter_mut().enumerate() {
        c.write(page, &contents(page, 3)).unwrap();
        *v = 3;
    }
    let refused = Net::busy_refused(&net, 0);
    assert!(refused > 0 && refused <= 100, "{refused} sends refused");
    assert!(sim::now() >= t0 + 2_000_000);
    // At most a timeout that passed during the wait.
    assert!(c.stats().retransmits <= 2, "{:?}", c.stats());
    check_all(&mut c, &versions);
    // Full for 30 ms, past the tries of one datagram (some 20 ms): the first datagrams are
    // given up as lost and sent again by the protocol; the page gets through.
    let t1 = sim::now();
    Net::busy_until(&net, 0, t1 + 30_000_000);
    let before = c.stats().retransmits;
    c.write(0, &contents(0, 4)).unwrap();
    versions[0] = 4;
    assert!(c.stats().retransmits > before, "{:?}", c.stats());
    check_all(&mut c, &versions);
    assert_eq!(c.notice(), None);
}
