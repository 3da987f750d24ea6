//! The protocol's rules, packet by packet: NACKs name exactly the missing chunks and only
//! those are resent; duplicates and late writes never overwrite newer pages; forwarded pages
//! never replace the client's own; a full store refuses; the round-trip estimator.

mod common;

use common::{MemStore, Rng};
use rpp::client::{Params, StreamKey, Transfer};
use rpp::server::{FREES_REMEMBERED, RECENT_WRITES};
use rpp::wire::{Code, DataFlags, Message, decode};
use rpp::{Outcome, PageServer, RttConfig, RttEstimator};

const PAGE: usize = 4096;
const KEY: StreamKey = StreamKey { stream: 3, token: 77 };

fn params(chunk: usize) -> Params {
    Params { chunk, retries: 4 }
}

fn server(chunk: usize, capacity: usize) -> (PageServer, MemStore) {
    let mut s = PageServer::new(chunk);
    s.open_stream(KEY.stream, KEY.token, PAGE as u32);
    (s, MemStore::new(capacity))
}

/// Packets a call sent.
fn sent(f: impl FnOnce(&mut dyn FnMut(&[u8]))) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    f(&mut |b| v.push(b.to_vec()));
    v
}

/// Gives `packets` to the server; returns its answers.
fn to_server(s: &mut (PageServer, MemStore), packets: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for p in packets {
        s.0.on_packet(&mut s.1, p, &mut |b| v.push(b.to_vec()));
    }
    v
}

/// Gives `packets` to the transfer; returns its answers.
fn to_client(
    t: &mut Transfer,
    now: u64,
    rtt: &mut RttEstimator,
    packets: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for p in packets {
        t.on_packet(now, &decode(p).unwrap(), rtt, &mut |b| v.push(b.to_vec()));
    }
    v
}

fn messages(packets: &[Vec<u8>]) -> Vec<Message<'_>> {
    packets.iter().map(|p| decode(p).unwrap().message).collect()
}

fn chunk_nums(packets: &[Vec<u8>]) -> Vec<u16> {
    messages(packets)
        .iter()
        .map(|m| match m {
            Message::Data(d) => d.num,
            m => panic!("not data: {m:?}"),
        })
        .collect()
}

/// A write of 8 chunks loses chunks 1, 3 and 6: the last chunk's arrival makes the server NACK
/// exactly {1, 3, 6}, the client resends exactly those, the server ACKs once.
#[test]
fn a_write_nack_names_every_missing_chunk_and_only_those_are_resent() {
    let mut s = server(512, 10);
    let mut rtt = RttEstimator::new(RttConfig::LAN);
    let page = Rng::new(1).bytes(PAGE);
    let mut t = Transfer::write(KEY, 9, 42, page.clone(), params(512)).unwrap();
    let first = sent(|out| t.start(0, &rtt, out));
    assert_eq!(chunk_nums(&first), [0, 1, 2, 3, 4, 5, 6, 7]);
    let arrived: Vec<Vec<u8>> = first
        .iter()
        .enumerate()
        .filter(|(i, _)| ![1, 3, 6].contains(i))
        .map(|(_, p)| p.clone())
        .collect();
    let nack = to_server(&mut s, &arrived);
    match messages(&nack)[..] {
        [Message::Nack { vpn: 42, code: Code::Missing, missing }] => {
            assert_eq!(missing.iter().collect::<Vec<_>>(), [1, 3, 6])
        }
        ref m => panic!("{m:?}"),
    }
    let resent = to_client(&mut t, 1_000, &mut rtt, &nack);
    assert_eq!(chunk_nums(&resent), [1, 3, 6]);
    assert_eq!(t.stats().retransmits, 3);
    let ack = to_server(&mut s, &resent);
    assert_eq!(messages(&ack), [Message::Ack { vpn: 42, code: Code::None }]);
    assert!(to_client(&mut t, 2_000, &mut rtt, &ack).is_empty());
    assert_eq!(t.outcome(), Some(Outcome::Done));
    assert_eq!(s.1.pages[&(3, 42)], page);
    // Karn: a retransmitted write gives no round-trip sample.
    assert_eq!(rtt.srtt(), None);
}

/// A read of 5 chunks loses chunks 2 and 4... and 4 is the last: nothing is NACKed until the
/// timeout, whose NACK names {2, 4}; the server resends exactly those; the client ACKs once.
/// With only chunk 2 lost, the last chunk's arrival NACKs {2} at once.
#[test]
fn a_read_nack_names_every_missing_chunk() {
    let mut s = server(1000, 10);
    let page = Rng::new(2).bytes(PAGE);
    s.1.pages.insert((3, 7), page.clone());
    for (lost, nacked_at_once) in [(&[2usize, 4][..], false), (&[2][..], true)] {
        let mut rtt = RttEstimator::new(RttConfig::LAN);
        let mut t = Transfer::read(KEY, 11, 7, PAGE as u32, params(512)).unwrap();
        let req = sent(|out| t.start(0, &rtt, out));
        let chunks = to_server(&mut s, &req);
        assert_eq!(chunk_nums(&chunks), [0, 1, 2, 3, 4]);
        let arrived: Vec<Vec<u8>> = chunks
            .iter()
            .enumerate()
            .filter(|(i, _)| !lost.contains(i))
            .map(|(_, p)| p.clone())
            .collect();
        let mut nack = to_client(&mut t, 1_000, &mut rtt, &arrived);
        if !nacked_at_once {
            assert!(nack.is_empty());
            let deadline = t.next_deadline().unwrap();
            assert_eq!(deadline, RttConfig::LAN.initial_rto_ns);
            assert!(sent(|out| t.poll_timeout(deadline - 1, &rtt, out)).is_empty());
            nack = sent(|out| t.poll_timeout(deadline, &rtt, out));
        }
        match messages(&nack)[..] {
            [Message::Nack { vpn: 7, code: Code::Missing, missing }] => {
                assert_eq!(missing.iter().collect::<Vec<_>>(), lost)
            }
            ref m => panic!("{m:?}"),
        }
        let resent = to_server(&mut s, &nack);
        assert_eq!(chunk_nums(&resent), lost.iter().map(|&i| i as u16).collect::<Vec<_>>());
        let ack = to_client(&mut t, 2_000, &mut rtt, &resent);
        assert_eq!(messages(&ack), [Message::Ack { vpn: 7, code: Code::None }]);
        assert_eq!(t.outcome(), Some(Outcome::Done));
        assert!(t.page() == page);
    }
}

/// Without loss, an exchange is its request, the written chunks, the read chunks (flagged as
/// acknowledging the write: no separate ACK) and the client's one ACK; a page that never
/// retransmitted gives the estimator its sample.
#[test]
fn an_exchange_piggybacks_the_write_ack() {
    let mut s = server(1421, 10);
    let mut r = Rng::new(3);
    let (old, new) = (r.bytes(PAGE), r.bytes(PAGE));
    s.1.pages.insert((3, 2), old.clone());
    let mut rtt = RttEstimator::new(RttConfig::LAN);
    let mut t = Transfer::exchange(KEY, 12, 1, new.clone(), 2, PAGE as u32, params(1421)).unwrap();
    let out = sent(|out| t.start(100, &rtt, out));
    assert!(matches!(messages(&out)[0], Message::Exchange { vpn: 1, read_vpn: 2, tot: 3, .. }));
    assert_eq!(chunk_nums(&out[1..]), [0, 1, 2]);
    let back = to_server(&mut s, &out);
    for m in messages(&back) {
        assert!(
            matches!(m, Message::Data(d) if d.vpn == 2 && d.flags.contains(DataFlags::WRITE_ACK)),
            "{m:?}"
        );
    }
    assert_eq!(back.len(), 3);
    let ack = to_client(&mut t, 5_100, &mut rtt, &back);
    assert_eq!(messages(&ack), [Message::Ack { vpn: 2, code: Code::None }]);
    assert_eq!((t.outcome(), t.write_acked()), (Some(Outcome::Done), true));
    assert!(t.page() == old);
    assert_eq!(s.1.pages[&(3, 1)], new);
    assert_eq!(rtt.srtt(), Some(5_000));
    // An exchange whose read page is not held stores the write and fails the read.
    let mut t = Transfer::exchange(KEY, 13, 1, new.clone(), 99, PAGE as u32, params(1421)).unwrap();
    let out = sent(|out| t.start(0, &rtt, out));
    let back = to_server(&mut s, &out);
    assert_eq!(
        messages(&back),
        [Message::Nack { vpn: 99, code: Code::NotHeld, missing: Default::default() }]
    );
    to_client(&mut t, 1, &mut rtt, &back);
    assert_eq!((t.outcome(), t.write_acked()), (Some(Outcome::Failed(Code::NotHeld)), true));
}

/// A late copy of an older write never overwrites a newer one: replayed at once (the server
/// remembers the finished write and ACKs again) or after 300 other writes (it knows the page's
/// last request id); and not after a free either.
#[test]
fn late_duplicates_never_overwrite_newer_pages() {
    let mut s = server(1421, 1000);
    let mut r = Rng::new(4);
    let (a, b) = (r.bytes(PAGE), r.bytes(PAGE));
    let rtt = RttEstimator::new(RttConfig::LAN);
    let write = |req: u32, vpn: u64, page: &[u8]| {
        let mut t = Transfer::write(KEY, req, vpn, page.to_vec(), params(1421)).unwrap();
        sent(|out| t.start(0, &rtt, out))
    };
    let old = write(10, 5, &a);
    to_server(&mut s, &old);
    to_server(&mut s, &write(11, 5, &b));
    let again = to_server(&mut s, &old);
    assert_eq!(messages(&again), vec![Message::Ack { vpn: 5, code: Code::None }; 3]);
    assert_eq!(s.1.pages[&(3, 5)], b);
    for i in 0..300 {
        to_server(&mut s, &write(100 + i, 1000 + i as u64, &a));
    }
    let stale = s.0.stats().stale_writes;
    let again = to_server(&mut s, &old);
    assert_eq!(messages(&again).len(), 1, "the first chunk starts a write; the last ACKs");
    assert_eq!(s.1.pages[&(3, 5)], b);
    assert_eq!(s.0.stats().stale_writes, stale + 1);
    // Freed by request 500: the write of request 11 replayed does not bring the page back.
    let mut f = Transfer::free(KEY, 500, 5, params(1421)).unwrap();
    to_server(&mut s, &sent(|out| f.start(0, &rtt, out)));
    assert!(!s.1.pages.contains_key(&(3, 5)));
    to_server(&mut s, &write(11, 5, &b));
    assert!(!s.1.pages.contains_key(&(3, 5)));
}

/// Pages forwarded by a revoking server are stored only where the client has not written (or
/// freed) the page itself; the client's later writes replace forwarded ones.
#[test]
fn forwarded_pages_never_replace_the_clients_own() {
    let mut s = server(1421, 1000);
    let mut r = Rng::new(5);
    let (mine, forwarded, later) = (r.bytes(PAGE), r.bytes(PAGE), r.bytes(PAGE));
    let rtt = RttEstimator::new(RttConfig::LAN);
    let mut t = Transfer::write(KEY, 1, 5, mine.clone(), params(1421)).unwrap();
    to_server(&mut s, &sent(|out| t.start(0, &rtt, out)));
    for (req, vpn) in [(900, 5), (901, 6)] {
        let mut o = Transfer::offload(KEY, req, vpn, forwarded.clone(), params(1421)).unwrap();
        let out = sent(|out| o.start(0, &rtt, out));
        assert!(
            messages(&out)
                .iter()
                .all(|m| matches!(m, Message::Data(d) if d.flags.contains(DataFlags::OFFLOAD)))
        );
        let ack = to_server(&mut s, &out);
        assert_eq!(messages(&ack), [Message::Ack { vpn, code: Code::None }]);
    }
    assert_eq!(s.1.pages[&(3, 5)], mine);
    assert_eq!(s.1.pages[&(3, 6)], forwarded);
    let mut t = Transfer::write(KEY, 2, 6, later.clone(), params(1421)).unwrap();
    to_server(&mut s, &sent(|out| t.start(0, &rtt, out)));
    assert_eq!(s.1.pages[&(3, 6)], later);
}

/// A full store refuses a new page ([`Code::Full`]) and still replaces a held one.
#[test]
fn a_full_store_refuses_new_pages() {
    let mut s = server(1421, 2);
    let mut rtt = RttEstimator::new(RttConfig::LAN);
    for (req, vpn, want) in [
        (1, 1, Outcome::Done),
        (2, 2, Outcome::Done),
        (3, 3, Outcome::Failed(Code::Full)),
        (4, 1, Outcome::Done),
    ] {
        let mut t = Transfer::write(KEY, req, vpn, vec![vpn as u8; PAGE], params(1421)).unwrap();
        let out = sent(|out| t.start(0, &rtt, out));
        let back = to_server(&mut s, &out);
        to_client(&mut t, 10, &mut rtt, &back);
        assert_eq!(t.outcome(), Some(want), "write {req}");
    }
    assert_eq!(s.1.pages.len(), 2);
}

/// Jacobson/Karels: the first sample R gives SRTT R, RTTVAR R/2, RTO 3R; steady samples
/// bring the RTO down to the sample (bounded below by the minimum); backoff doubles up to the
/// maximum.
#[test]
fn round_trip_estimator() {
    let cfg = RttConfig { initial_rto_ns: 1_000_000, min_rto_ns: 200_000, max_rto_ns: 8_000_000 };
    let mut e = RttEstimator::new(cfg);
    assert_eq!((e.srtt(), e.rto()), (None, 1_000_000));
    assert_eq!(e.rto_backoff(1), 2_000_000);
    assert_eq!(e.rto_backoff(3), 8_000_000);
    assert_eq!(e.rto_backoff(60), 8_000_000);
    e.sample(400_000);
    assert_eq!((e.srtt(), e.rttvar(), e.rto()), (Some(400_000), Some(200_000), 1_200_000));
    e.sample(800_000);
    // RTTVAR = 3/4 200,000 + 1/4 400,000; SRTT = 7/8 400,000 + 1/8 800,000.
    assert_eq!((e.srtt(), e.rttvar()), (Some(450_000), Some(250_000)));
    assert_eq!(e.rto(), 1_450_000);
    for _ in 0..200 {
        e.sample(100_000);
    }
    assert_eq!(e.rto(), 200_000, "clamped to the minimum");
    for _ in 0..200 {
        e.sample(50_000_000);
    }
    assert_eq!(e.rto(), 8_000_000, "clamped to the maximum");
    assert_eq!(e.rto_backoff(5), 8_000_000);
}

/// Karn's rule through a timeout: a write whose ACK was lost and that was probed again gives
/// no sample; the next clean one does.
#[test]
fn karn_no_sample_from_a_retransmitted_operation() {
    let mut s = server(1421, 10);
    let mut rtt = RttEstimator::new(RttConfig::LAN);
    let mut t = Transfer::write(KEY, 1, 1, vec![1; PAGE], params(1421)).unwrap();
    let out = sent(|out| t.start(0, &rtt, out));
    let _lost_ack = to_server(&mut s, &out);
    let d = t.next_deadline().unwrap();
    let probe = sent(|out| t.poll_timeout(d, &rtt, out));
    assert!(matches!(messages(&probe)[..], [Message::Write { vpn: 1, tot: 3, .. }]));
    let ack = to_server(&mut s, &probe);
    to_client(&mut t, d + 1_000, &mut rtt, &ack);
    assert_eq!(t.outcome(), Some(Outcome::Done));
    assert_eq!(rtt.srtt(), None);
    let mut t = Transfer::write(KEY, 2, 1, vec![2; PAGE], params(1421)).unwrap();
    let out = sent(|out| t.start(10, &rtt, out));
    let ack = to_server(&mut s, &out);
    to_client(&mut t, 3_010, &mut rtt, &ack);
    assert_eq!(rtt.srtt(), Some(3_000));
}

/// What a server remembers of freed pages is bounded: freeing pages never written leaves
/// nothing; of 2,000 pages written and freed, the last 1,024 frees are remembered (a late write
/// older than one does not bring its page back) and the older ones forgotten.
#[test]
fn remembered_frees_are_bounded() {
    let mut s = server(1421, 10);
    let rtt = RttEstimator::new(RttConfig::LAN);
    let mut req = 0;
    let op = |s: &mut (PageServer, MemStore), t: &mut Transfer| {
        to_server(s, &sent(|out| t.start(0, &rtt, out)))
    };
    let mut writes = Vec::new();
    for vpn in 0..2_000u64 {
        req += 1;
        let mut w = Transfer::write(KEY, req, vpn, vec![vpn as u8; PAGE], params(1421)).unwrap();
        let packets = sent(|out| w.start(0, &rtt, out));
        to_server(&mut s, &packets);
        writes.push(packets);
        req += 1;
        op(&mut s, &mut Transfer::free(KEY, req, vpn, params(1421)).unwrap());
    }
    // Frees of pages never written are not remembered (they would push the others out).
    for vpn in 0..2_000 {
        req += 1;
        op(&mut s, &mut Transfer::free(KEY, req, 1_000_000 + vpn, params(1421)).unwrap());
    }
    assert!(s.1.pages.is_empty());
    // The oldest free remembered keeps its page freed when the page's write comes again (long
    // after the server forgot the write itself); the one before it is forgotten.
    let oldest = 2_000 - FREES_REMEMBERED;
    assert!(oldest + RECENT_WRITES < 2_000);
    to_server(&mut s, &writes[oldest]);
    assert!(s.1.pages.is_empty());
    to_server(&mut s, &writes[oldest - 1]);
    assert_eq!(s.1.pages.keys().copied().collect::<Vec<_>>(), [(3, oldest as u64 - 1)]);
}
