//! Host tests of the wire format: round trips, garbage, and the stable codes.

extern crate std;

use crate::protocol::{
    BlkError, MAX_PAYLOAD, Op, REQUEST_LEN, RESPONSE_LEN, Request, Response, SessionInfo,
};
use blk_workloads::Rng;

fn rw(id: u64, op: Op, sector: u64, offset: u64, len: u32) -> Request {
    Request { id, op, sector, offset, len }
}

fn random_request(rng: &mut Rng) -> Request {
    let op = Op::ALL[rng.below(Op::ALL.len() as u64) as usize];
    let id = rng.next_u64();
    if op.transfers() {
        Request {
            id,
            op,
            sector: rng.next_u64(),
            offset: rng.next_u64(),
            len: rng.next_u64() as u32,
        }
    } else {
        Request::control(id, op)
    }
}

fn random_response(rng: &mut Rng) -> Response {
    let id = rng.next_u64();
    match rng.below(3) {
        0 => Response::plain(id, Err(BlkError::ALL[rng.below(10) as usize])),
        1 => Response::plain(id, Ok(())),
        _ => Response {
            id,
            status: Ok(()),
            info: SessionInfo {
                area_base: rng.next_u64(),
                area_len: rng.next_u64(),
                sector_size: rng.next_u64() as u32,
                capacity: rng.next_u64(),
                max_transfer: rng.next_u64() as u32,
                max_in_flight: rng.next_u64() as u16,
            },
        },
    }
}

#[test]
fn messages_fit_a_default_slot() {
    assert_eq!(MAX_PAYLOAD, 56);
    assert_eq!((REQUEST_LEN, RESPONSE_LEN), (32, 48));
}

#[test]
fn requests_round_trip() {
    let mut rng = Rng::new(1);
    for _ in 0..10_000 {
        let req = random_request(&mut rng);
        let bytes = req.encode();
        assert_eq!(Request::decode(&bytes), Ok(req));
        assert_eq!(Request::id_of(&bytes), req.id);
    }
    // The layout, byte for byte.
    let bytes = rw(0x0102_0304_0506_0708, Op::Write, 0x1112, 0x2122, 0x3132).encode();
    assert_eq!(bytes[..8], 0x0102_0304_0506_0708u64.to_le_bytes());
    assert_eq!(bytes[8], 3);
    assert_eq!(bytes[12..16], 0x3132u32.to_le_bytes());
    assert_eq!(bytes[16..24], 0x1112u64.to_le_bytes());
    assert_eq!(bytes[24..32], 0x2122u64.to_le_bytes());
}

#[test]
fn responses_round_trip() {
    let mut rng = Rng::new(2);
    for _ in 0..10_000 {
        let resp = random_response(&mut rng);
        assert_eq!(Response::decode(&resp.encode()), Ok(resp));
    }
    let bytes = Response::plain(7, Err(BlkError::OutsideDataArea)).encode();
    assert_eq!(bytes[..8], 7u64.to_le_bytes());
    assert_eq!(bytes[8..10], 4u16.to_le_bytes());
    assert!(bytes[10..].iter().all(|&b| b == 0));
}

#[test]
fn garbage_never_panics_and_what_decodes_is_canonical() {
    let mut rng = Rng::new(3);
    let mut decoded = (0, 0);
    for round in 0..200_000 {
        // Random bytes of random length, or a valid message with a few bytes changed.
        let mut buf = [0u8; 64];
        let len = match round % 3 {
            0 => {
                buf.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
                rng.below(65) as usize
            }
            1 => {
                buf[..REQUEST_LEN].copy_from_slice(&random_request(&mut rng).encode());
                REQUEST_LEN
            }
            _ => {
                buf[..RESPONSE_LEN].copy_from_slice(&random_response(&mut rng).encode());
                RESPONSE_LEN
            }
        };
        for _ in 0..rng.below(3) {
            buf[rng.below(len.max(1) as u64) as usize] = rng.next_u64() as u8;
        }
        let msg = &buf[..len];
        let _ = Request::id_of(msg);
        match Request::decode(msg) {
            Ok(req) => {
                assert_eq!(&req.encode()[..], msg);
                decoded.0 += 1;
            }
            Err(e) => assert_eq!(e, BlkError::Malformed),
        }
        match Response::decode(msg) {
            Ok(resp) => {
                assert_eq!(&resp.encode()[..], msg);
                decoded.1 += 1;
            }
            Err(e) => assert_eq!(e, BlkError::Malformed),
        }
    }
    // Both decoders saw plenty of valid messages, not only rejections.
    assert!(decoded.0 > 10_000 && decoded.1 > 10_000, "{decoded:?}");
}

#[test]
fn unknown_ops_codes_and_stray_bytes_are_malformed() {
    let good = rw(1, Op::Read, 2, 512, 512).encode();
    for op in [0u8, 8, 9, 0x80, 0xff] {
        let mut b = good;
        b[8] = op;
        assert_eq!(Request::decode(&b), Err(BlkError::Malformed), "op {op}");
    }
    for at in 9..12 {
        let mut b = good;
        b[at] = 1;
        assert_eq!(Request::decode(&b), Err(BlkError::Malformed), "reserved byte {at}");
    }
    for len in [0, 1, REQUEST_LEN - 1, REQUEST_LEN + 1, MAX_PAYLOAD] {
        let mut b = [0u8; 64];
        b[..REQUEST_LEN].copy_from_slice(&good);
        assert_eq!(Request::decode(&b[..len]), Err(BlkError::Malformed), "length {len}");
        assert_eq!(Response::decode(&b[..len]), Err(BlkError::Malformed), "length {len}");
    }
    // Open, Flush and Close carry no range.
    for op in [Op::Open, Op::Flush, Op::Close] {
        for (sector, offset, len) in [(1, 0, 0), (0, 1, 0), (0, 0, 1)] {
            let b = rw(1, op, sector, offset, len).encode();
            assert_eq!(Request::decode(&b), Err(BlkError::Malformed), "{op:?}");
        }
    }
    let good = Response::plain(1, Ok(())).encode();
    for code in [12u16, 13, 0x100, 0xffff] {
        let mut b = good;
        b[8..10].copy_from_slice(&code.to_le_bytes());
        assert_eq!(Response::decode(&b), Err(BlkError::Malformed), "status {code}");
    }
    for at in [10, 11, 14, 15] {
        let mut b = good;
        b[at] = 1;
        assert_eq!(Response::decode(&b), Err(BlkError::Malformed), "reserved byte {at}");
    }
    // A failure carries no session.
    let mut b = Response::plain(1, Err(BlkError::Busy)).encode();
    b[20] = 1;
    assert_eq!(Response::decode(&b), Err(BlkError::Malformed));
}

#[test]
fn error_codes_and_names_are_stable() {
    let expected = [
        (BlkError::OutOfRange, 1, "OutOfRange"),
        (BlkError::Misaligned, 2, "Misaligned"),
        (BlkError::ZeroLength, 3, "ZeroLength"),
        (BlkError::OutsideDataArea, 4, "OutsideDataArea"),
        (BlkError::UnknownClient, 5, "UnknownClient"),
        (BlkError::TooLarge, 6, "TooLarge"),
        (BlkError::Busy, 7, "Busy"),
        (BlkError::Device, 8, "Device"),
        (BlkError::Closed, 9, "Closed"),
        (BlkError::Malformed, 10, "Malformed"),
        (BlkError::BadLoan, 11, "BadLoan"),
    ];
    assert_eq!(expected.len(), BlkError::ALL.len());
    for (e, code, name) in expected {
        assert_eq!((e.code(), e.name()), (code, name));
        assert_eq!(BlkError::from_code(code), Some(e));
        assert_eq!(std::format!("{e}"), std::format!("{name} ({code})"));
    }
    assert_eq!(BlkError::from_code(0), None);
    let ops = [
        (Op::Open, 1),
        (Op::Read, 2),
        (Op::Write, 3),
        (Op::Flush, 4),
        (Op::Close, 5),
        (Op::ReadLoan, 6),
        (Op::WriteLoan, 7),
    ];
    for (op, code) in ops {
        assert_eq!((op as u8, Op::from_code(code)), (code, Some(op)));
    }
}

#[test]
fn a_loan_transfer_is_at_most_a_page_whatever_the_data_area() {
    let info = SessionInfo {
        area_base: 0x1000,
        area_len: 512,
        sector_size: 512,
        capacity: 100,
        max_transfer: 64 * 1024,
        max_in_flight: 4,
    };
    assert_eq!(info.check_loan_transfer(0, 4096), Ok(()));
    assert_eq!(info.check_transfer(0, 0, 4096), Err(BlkError::OutsideDataArea));
    assert_eq!(info.check_loan_transfer(0, 8192), Err(BlkError::OutsideDataArea));
    assert_eq!(info.check_loan_transfer(0, 0), Err(BlkError::ZeroLength));
    assert_eq!(info.check_loan_transfer(0, 100), Err(BlkError::Misaligned));
    assert_eq!(info.check_loan_transfer(96, 4096), Err(BlkError::OutOfRange));
    assert_eq!(info.check_loan_transfer(u64::MAX, 512), Err(BlkError::OutOfRange));
    assert!(Op::ReadLoan.transfers() && Op::WriteLoan.lends() && !Op::Read.lends());
}
