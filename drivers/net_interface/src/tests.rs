//! Host tests of the wire format (round trips, garbage, stable codes, the send check) and of
//! the in-memory NIC pair.

extern crate std;

use alloc::boxed::Box;
use alloc::vec::Vec;
use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{Rng as _, SeedableRng};

use crate::frame::{Endpoint, Ipv4Addr, MAX_UDP_PAYLOAD, MacAddr};
use crate::mem::{self, Direction};
use crate::nic::{DeviceRange, Nic, NicError};
use crate::protocol::{
    LOAN_MAX, LoanSend, MAX_LOAN_DATAGRAMS, MAX_PAYLOAD, NetError, Op, REQUEST_LEN, RESPONSE_LEN,
    RX_SLOT, Received, Request, Response, ServerMessage, SessionInfo, StreamAccounts,
};

/// SplitMix64 (`rand_xoshiro`'s), seeded: the state starts at the seed (fixed seeds: the tests
/// are deterministic).
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(SplitMix64::seed_from_u64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn endpoint(rng: &mut Rng) -> Endpoint {
    Endpoint { addr: Ipv4Addr((rng.next() as u32).to_le_bytes()), port: rng.next() as u16 }
}

fn random_request(rng: &mut Rng) -> Request {
    let id = rng.next();
    match Op::ALL[rng.below(5) as usize] {
        Op::Open => Request::open(id, rng.next() as u16),
        Op::SendLoan => {
            let lent = LoanSend {
                loan: rng.next(),
                at: rng.next() as u32,
                head: rng.next() as u16,
                chunk: rng.next() as u16 | 1,
            };
            Request::send_loan(id, endpoint(rng), rng.next(), rng.next() as u32 | 1, lent)
        }
        Op::Send => Request::send(id, endpoint(rng), rng.next(), rng.next() as u32),
        Op::Release => Request::release(id, rng.next()),
        Op::Close => Request::close(id),
    }
}

fn random_message(rng: &mut Rng) -> ServerMessage {
    let id = rng.next();
    match rng.below(4) {
        0 => {
            ServerMessage::Response(Response::plain(id, Err(NetError::ALL[rng.below(13) as usize])))
        }
        1 => ServerMessage::Response(Response::plain(id, Ok(()))),
        2 => ServerMessage::Response(Response {
            id,
            status: Ok(()),
            info: SessionInfo {
                local: endpoint(rng),
                area_base: rng.next(),
                area_len: rng.next(),
                rx_offset: rng.next() as u32,
                rx_slots: rng.next() as u32,
                max_payload: rng.next() as u32,
                max_in_flight: rng.next() as u16,
            },
        }),
        _ => ServerMessage::Received(Received {
            from: endpoint(rng),
            offset: rng.next(),
            len: rng.next() as u32,
        }),
    }
}

#[test]
fn messages_fit_a_default_slot() {
    assert_eq!(MAX_PAYLOAD, 56);
    assert_eq!((REQUEST_LEN, RESPONSE_LEN), (48, 48));
    assert_eq!((MAX_UDP_PAYLOAD, RX_SLOT), (1472, 1472));
}

#[test]
fn requests_and_messages_round_trip() {
    let mut rng = Rng::new(1);
    for _ in 0..10_000 {
        let req = random_request(&mut rng);
        assert_eq!(Request::decode(&req.encode()), Ok(req));
        let msg = random_message(&mut rng);
        assert_eq!(ServerMessage::decode(&msg.encode()), Ok(msg), "{msg:?}");
    }
}

#[test]
fn garbage_never_panics_and_what_decodes_re_encodes_the_same() {
    let mut rng = Rng::new(2);
    let (mut requests, mut messages) = (0, 0);
    for _ in 0..200_000 {
        let len = rng.below(64) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        // Mostly well-sized, with small codes, so that some decode.
        if rng.below(2) == 0 {
            b.resize(if rng.below(2) == 0 { REQUEST_LEN } else { RESPONSE_LEN }, 0);
            b[8] = rng.below(6) as u8;
            for i in [9, 20, 21, 22, 23, 32, 33, 40, 44, 45, 46, 47] {
                if rng.below(4) != 0 {
                    b[i] = 0;
                }
            }
        }
        if let Ok(r) = Request::decode(&b) {
            assert_eq!(&r.encode()[..], &b[..]);
            requests += 1;
        }
        if let Ok(m) = ServerMessage::decode(&b) {
            assert_eq!(&m.encode()[..], &b[..]);
            messages += 1;
        }
        assert_eq!(
            Request::id_of(&b),
            b.get(..8).map_or(0, |w| u64::from_le_bytes(w.try_into().unwrap()))
        );
    }
    assert!(requests > 1000 && messages > 0, "{requests} {messages}");
}

#[test]
fn codes_are_stable() {
    let codes: Vec<(u16, &str)> = NetError::ALL.iter().map(|e| (e.code(), e.name())).collect();
    assert_eq!(
        codes,
        [
            (1, "Malformed"),
            (2, "UnknownClient"),
            (3, "PortInUse"),
            (4, "NoFreePort"),
            (5, "TooLarge"),
            (6, "OutsideDataArea"),
            (7, "Busy"),
            (8, "Closed"),
            (9, "BadAddress"),
            (10, "NotAdmitted"),
            (11, "LinkDown"),
            (12, "BadLoan"),
            (13, "Unresolved"),
        ]
    );
    for e in NetError::ALL {
        assert_eq!(NetError::from_code(e.code()), Some(e));
    }
    assert_eq!(NetError::from_code(0), None);
    let ops: Vec<u8> = Op::ALL.iter().map(|o| *o as u8).collect();
    assert_eq!(ops, [1, 2, 3, 4, 5]);
}

#[test]
fn a_send_is_checked_before_it_is_queued() {
    let info = SessionInfo {
        local: Endpoint { addr: Ipv4Addr([10, 0, 0, 1]), port: 7 },
        area_base: 0x1000_0000,
        area_len: 16 * 4096,
        rx_offset: 8 * 4096,
        rx_slots: 5,
        max_payload: MAX_UDP_PAYLOAD as u32,
        max_in_flight: 8,
    };
    let to = Endpoint { addr: Ipv4Addr([10, 0, 0, 2]), port: 9 };
    assert_eq!(info.check_send(to, 0, 1472), Ok(()));
    assert_eq!(info.check_send(to, 0, 0), Ok(()));
    assert_eq!(info.check_send(to, 8 * 4096 - 1472, 1472), Ok(()));
    assert_eq!(info.check_send(to, 8 * 4096 - 1471, 1472), Err(NetError::OutsideDataArea));
    assert_eq!(info.check_send(to, u64::MAX, 2), Err(NetError::OutsideDataArea));
    assert_eq!(info.check_send(to, 0, 1473), Err(NetError::TooLarge));
    for bad in [
        Endpoint { port: 0, ..to },
        Endpoint { addr: Ipv4Addr::UNSPECIFIED, ..to },
        Endpoint { addr: Ipv4Addr([255; 4]), ..to },
        Endpoint { addr: Ipv4Addr([224, 0, 0, 1]), ..to },
    ] {
        assert_eq!(info.check_send(bad, 0, 1), Err(NetError::BadAddress), "{bad}");
    }
    let rx = u64::from(info.rx_offset);
    assert_eq!(info.slot_at(rx), Some(0));
    assert_eq!(info.slot_at(rx + 4 * RX_SLOT as u64), Some(4));
    assert_eq!(info.slot_at(rx + 5 * RX_SLOT as u64), None);
    assert_eq!(info.slot_at(rx + 1), None);
    assert_eq!(info.slot_at(rx - 1), None);
}

#[test]
fn a_send_loan_is_checked_before_the_loan_is_touched() {
    let info = SessionInfo {
        local: Endpoint { addr: Ipv4Addr([10, 0, 0, 1]), port: 7 },
        area_base: 0x1000_0000,
        area_len: 16 * 4096,
        rx_offset: 2048,
        rx_slots: 5,
        max_payload: MAX_UDP_PAYLOAD as u32,
        max_in_flight: 8,
    };
    let to = Endpoint { addr: Ipv4Addr([10, 0, 0, 2]), port: 9 };
    // A page in RPP's chunks: three datagrams of a 28-byte head and up to 1,421 bytes.
    let page = LoanSend { loan: 0x5_0000_0102, at: 0, head: 28, chunk: 1421 };
    assert_eq!(info.check_send_loan(to, 0, 4096, page), Ok(3));
    assert_eq!((page.piece(4096, 0), page.piece(4096, 2)), ((0, 1421), (2842, 1254)));
    assert_eq!(info.check_send_loan(to, 2048 - 84, 4096, page), Ok(3));
    assert_eq!(info.check_send_loan(to, 2048 - 83, 4096, page), Err(NetError::OutsideDataArea));
    assert_eq!(info.check_send_loan(to, u64::MAX - 10, 4096, page), Err(NetError::OutsideDataArea));
    // The range stays within the frame.
    let late = LoanSend { at: 1, ..page };
    assert_eq!(info.check_send_loan(to, 0, 4096, late), Err(NetError::BadLoan));
    let wraps = LoanSend { at: u32::MAX, ..page };
    assert_eq!(info.check_send_loan(to, 0, 2, wraps), Err(NetError::BadLoan));
    assert_eq!(info.check_send_loan(to, 0, LOAN_MAX - 100, LoanSend { at: 100, ..page }), Ok(3));
    // A datagram fits a frame; a request sends a few.
    let big = LoanSend { head: 52, ..page };
    assert_eq!(info.check_send_loan(to, 0, 4096, big), Err(NetError::TooLarge));
    let small = LoanSend { chunk: 1000, ..page };
    assert_eq!(info.check_send_loan(to, 0, 4096, small), Err(NetError::TooLarge));
    assert_eq!(small.datagrams(4096), MAX_LOAN_DATAGRAMS + 1);
    let bad = Endpoint { port: 0, ..to };
    assert_eq!(info.check_send_loan(bad, 0, 4096, page), Err(NetError::BadAddress));
    // An empty range or chunk, or loan fields on another op, do not decode.
    let mut b = Request::send_loan(1, to, 0, 4096, page).encode();
    assert_eq!(Request::decode(&b).map(|r| r.lent), Ok(page));
    b[22..24].fill(0);
    assert_eq!(Request::decode(&b), Err(NetError::Malformed));
    let mut b = Request::send_loan(1, to, 0, 0, page).encode();
    assert_eq!(Request::decode(&b), Err(NetError::Malformed));
    b = Request::send(1, to, 0, 100).encode();
    b[32] = 1;
    assert_eq!(Request::decode(&b), Err(NetError::Malformed));
    b = Request::send(1, to, 0, 100).encode();
    b[20] = 1;
    assert_eq!(Request::decode(&b), Err(NetError::Malformed));
}

#[test]
fn a_mem_nic_gathers_a_tail_from_device_memory_and_says_when_it_is_done() {
    let (mut a, mut b, _wire) =
        mem::pair(MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]), 2, 4);
    let page: Vec<u8> = (0..4096).map(|i| i as u8).collect();
    a.set_memory(0x8000_0000, &page);
    let tail = DeviceRange { addr: 0x8000_0000 + 100, len: 1000 };
    assert_eq!(a.transmit_lent(42, |h| h.fill(7), tail, 5), Ok(()));
    // Nothing at that address: the device fails it, and nothing is in flight.
    let nowhere = DeviceRange { addr: 0x9000_0000, len: 10 };
    assert_eq!(a.transmit_lent(42, |_| (), nowhere, 6), Err(NicError::Io));
    let long = DeviceRange { len: 1473, ..tail };
    assert_eq!(a.transmit_lent(42, |_| (), long, 6), Err(NicError::BadLength));
    assert_eq!(a.tx_in_flight(), 1);
    assert_eq!(a.lent_done(), None);
    assert!(a.poll_transmit());
    assert_eq!((a.lent_done(), a.lent_done()), (Some(5), None));
    let frame = b.receive(|f| f.to_vec()).unwrap();
    assert_eq!(frame.len(), 1042);
    assert!(frame[..42].iter().all(|&x| x == 7));
    assert_eq!(&frame[42..], &page[100..1100]);
    assert_eq!((a.transmitted, a.gathered), (1, 1));
}

#[test]
fn accounts_round_trip_through_their_words() {
    let mut rng = Rng::new(3);
    let mut w = [0; 15];
    for x in w.iter_mut() {
        *x = rng.next();
    }
    assert_eq!(StreamAccounts::from_words(w).words(), w);
}

#[test]
fn a_mem_pair_carries_loses_and_overruns() {
    let (mut a, mut b, wire) =
        mem::pair(MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]), 2, 4);
    // Two frames in flight at most, until their transmission is reported.
    assert_eq!(a.transmit(60, |f| f.fill(1)), Ok(()));
    assert_eq!(a.transmit(60, |f| f.fill(2)), Ok(()));
    assert_eq!(a.transmit(60, |f| f.fill(3)), Err(NicError::Full));
    assert_eq!(a.transmit(0, |_| ()), Err(NicError::BadLength));
    assert_eq!(a.transmit(1515, |_| ()), Err(NicError::BadLength));
    assert!(a.poll_transmit() && a.poll_transmit() && !a.poll_transmit());
    // Every other frame lost.
    let mut n = 0;
    wire.set_filter(Some(Box::new(move |dir, _| {
        assert_eq!(dir, Direction::AtoB);
        n += 1;
        n % 2 == 0
    })));
    for k in 3..7 {
        assert_eq!(a.transmit(60, |f| f.fill(k)), Ok(()));
        assert!(a.poll_transmit());
    }
    let got: Vec<u8> = core::iter::from_fn(|| b.receive(|f| f[0])).collect();
    assert_eq!(got, [1, 2, 4, 6]);
    let c = wire.counts(Direction::AtoB);
    assert_eq!((c.delivered, c.lost, c.overruns), (4, 2, 0));
    // A full receive ring overruns.
    wire.set_filter(None);
    for _ in 0..5 {
        assert_eq!(a.transmit(60, |_| ()), Ok(()));
        assert!(a.poll_transmit());
    }
    assert_eq!(wire.counts(Direction::AtoB).overruns, 1);
    assert_eq!(wire.pending(Direction::AtoB), 4);
    assert!(wire.inject(Direction::BtoA, &[9; 20]));
    assert_eq!(a.receive(|f| f.len()), Some(20));
}

#[test]
fn addresses_and_endpoints_parse_from_their_written_forms_and_nothing_else() {
    assert_eq!(Ipv4Addr::parse("10.0.0.2"), Some(Ipv4Addr([10, 0, 0, 2])));
    assert_eq!(
        Endpoint::parse("10.0.0.2:7001"),
        Some(Endpoint { addr: Ipv4Addr([10, 0, 0, 2]), port: 7001 })
    );
    let e = Endpoint { addr: Ipv4Addr([192, 168, 1, 254]), port: 65535 };
    assert_eq!(Endpoint::parse(&alloc::format!("{e}")), Some(e));
    for bad in ["10.0.0", "10.0.0.2.1", "10.0.0.256", "10.0.0.x", "", "10..0.2"] {
        assert_eq!(Ipv4Addr::parse(bad), None, "{bad}");
    }
    for bad in ["10.0.0.2", "10.0.0.2:", "10.0.0.2:65536", ":7001", "10.0.0:7001", "10.0.0.2:7:1"] {
        assert_eq!(Endpoint::parse(bad), None, "{bad}");
    }
}
