//! The wire encoding: every message round-trips, corruption is detected, decoding never
//! panics (and its fuzz target).

mod common;

use common::{KINDS, MemStore, Rng, header, message};
use rpp::client::{Params, StreamKey, Transfer, Transfers};
use rpp::wire::Header;
use rpp::wire::{
    DATA_FIXED, DecodeError, EncodeError, HEADER, MAX_CHUNK, MAX_PACKET, Message, Op, Packet,
    decode, encode, seal,
};
use rpp::{PageServer, RttConfig};

/// Every kind of message, many random ones each: encode, decode, compare; encode again,
/// compare the bytes.
#[test]
fn every_message_round_trips() {
    let mut r = Rng::new(1);
    let payload = r.bytes(MAX_CHUNK);
    let mut seen = [false; KINDS as usize];
    for i in 0..20_000 {
        let kind = i % KINDS;
        let packet = Packet { header: header(&mut r), message: message(&mut r, kind, &payload) };
        let mut buf = [0u8; MAX_PACKET];
        let n = encode(&packet, &mut buf).unwrap_or_else(|e| panic!("{packet:?}: {e}"));
        assert!((HEADER..=MAX_PACKET).contains(&n));
        let back = decode(&buf[..n]).unwrap_or_else(|e| panic!("{packet:?}: {e}"));
        assert_eq!(back, packet);
        let mut again = [0u8; MAX_PACKET];
        assert_eq!(encode(&back, &mut again), Ok(n));
        assert_eq!(buf[..n], again[..n]);
        seen[Op::ALL.iter().position(|&o| o == packet.message.op()).unwrap()] = true;
    }
    assert!(seen.iter().all(|&s| s), "every op generated: {seen:?}");
    assert_eq!(Op::ALL.len(), KINDS as usize);
}

/// A 4 KiB page is three data packets of at most 1,472 bytes (thesis §10.1, UDP over Ethernet).
#[test]
fn a_page_is_three_packets() {
    assert_eq!(MAX_PACKET, 1472);
    assert_eq!(MAX_CHUNK, MAX_PACKET - HEADER - DATA_FIXED);
    assert_eq!(4096usize.div_ceil(MAX_CHUNK), 3);
    let payload = [7u8; MAX_CHUNK];
    let data = rpp::Data {
        vpn: 1,
        page_size: 4096,
        off: 0,
        tot: 3,
        num: 0,
        flags: rpp::DataFlags::NONE,
        payload: &payload,
    };
    let packet = Packet { header: Default::default(), message: Message::Data(data) };
    let mut buf = [0u8; 2048];
    assert_eq!(encode(&packet, &mut buf), Ok(MAX_PACKET));
    // One byte more does not fit a datagram; a buffer one byte short is refused.
    let long = [7u8; MAX_CHUNK + 1];
    let too_long = Message::Data(rpp::Data { payload: &long, ..data });
    assert_eq!(
        encode(&Packet { header: Default::default(), message: too_long }, &mut buf),
        Err(EncodeError::Invalid)
    );
    assert_eq!(encode(&packet, &mut buf[..MAX_PACKET - 1]), Err(EncodeError::BufferTooSmall));
    assert_eq!(encode(&packet, &mut buf[..3]), Err(EncodeError::BufferTooSmall));
}

/// Invalid fields are refused by the encoder (so that whatever encodes decodes).
#[test]
fn invalid_messages_are_not_encoded() {
    let mut buf = [0u8; MAX_PACKET];
    let p = [0u8; 8];
    let base = rpp::Data {
        vpn: 1,
        page_size: 8,
        off: 0,
        tot: 1,
        num: 0,
        flags: rpp::DataFlags::NONE,
        payload: &p,
    };
    for bad in [
        rpp::Data { num: 1, ..base },
        rpp::Data { tot: 0, ..base },
        rpp::Data { tot: 257, num: 0, ..base },
        rpp::Data { off: 1, ..base },
        rpp::Data { page_size: 7, ..base },
        rpp::Data { flags: rpp::DataFlags(4), ..base },
    ] {
        let packet = Packet { header: Default::default(), message: Message::Data(bad) };
        assert_eq!(encode(&packet, &mut buf), Err(EncodeError::Invalid), "{bad:?}");
    }
    let mut missing = rpp::wire::ChunkSet::EMPTY;
    missing.insert(3);
    let nack = Message::Nack { vpn: 1, code: rpp::Code::NotHeld, missing };
    assert_eq!(
        encode(&Packet { header: Default::default(), message: nack }, &mut buf),
        Err(EncodeError::Invalid)
    );
}

/// Every single-bit error and every truncation of every kind of packet is caught (CRC-32
/// detects all single-bit errors); nothing panics.
#[test]
fn corruption_and_truncation_are_detected() {
    let mut r = Rng::new(2);
    let payload = r.bytes(MAX_CHUNK);
    for kind in 0..KINDS {
        let packet = Packet { header: header(&mut r), message: message(&mut r, kind, &payload) };
        let mut buf = [0u8; MAX_PACKET];
        let n = encode(&packet, &mut buf).unwrap();
        let bytes = &mut buf[..n];
        for bit in 0..n * 8 {
            bytes[bit / 8] ^= 1 << (bit % 8);
            let e = decode(bytes).unwrap_err();
            // A flipped length, magic or version byte is caught before the checksum.
            assert!(
                matches!(
                    e,
                    DecodeError::BadChecksum
                        | DecodeError::Truncated
                        | DecodeError::TrailingBytes
                        | DecodeError::BadMagic
                        | DecodeError::BadVersion
                ),
                "{e:?}"
            );
            bytes[bit / 8] ^= 1 << (bit % 8);
        }
        for len in 0..n {
            assert!(decode(&bytes[..len]).is_err());
        }
        assert_eq!(decode(bytes), Ok(packet));
    }
}

/// The stream of the client's operations in the fuzz target.
const FUZZ_KEY: StreamKey = StreamKey { stream: 3, token: 77 };

/// The fuzz target: a structure-aware mutator over valid encodings. Each input is a valid
/// packet of a random kind, changed by one to four mutations (a bit flipped, a byte set, bytes
/// inserted, removed, truncated, appended, spliced from another packet, a header field
/// rewritten), then (one time in two) given the right body length and (three times in four)
/// sealed with a fresh checksum so that the changes
/// reach the body's parser. Half the packets carry the stream, token and request ids of the
/// client's operations in flight. Checks: decode never panics; whatever decodes re-encodes to
/// the same bytes (the encoding is canonical); a page server given the input (with the input's
/// stream open under its token, so that it gets past the token check) and a client with up to
/// four operations in flight (reads, writes, exchanges, frees, chunk sizes 64 to the largest)
/// never panic and send only valid packets.
fn fuzz(seed: u64, mut more: impl FnMut(u64) -> bool) -> Fuzzed {
    let mut r = Rng::new(seed);
    let payload = r.bytes(MAX_CHUNK);
    let mut store = MemStore::new(64);
    let mut server = PageServer::new(64);
    let mut sent = 0u64;
    let mut count = 0;
    let mut decoded = 0;
    let mut client = Transfers::<u8>::new(RttConfig::LAN);
    let mut now = 0u64;
    while more(count) {
        count += 1;
        now += r.below(2_000_000);
        if client.in_flight() < 4 {
            let (request, vpn) = (1 + r.below(4) as u32, r.below(4));
            let p = Params { chunk: [64, 1000, MAX_CHUNK][r.below(3) as usize], retries: 3 };
            let page = vec![0u8; 4096];
            let t = match r.below(4) {
                0 => Transfer::read(FUZZ_KEY, request, vpn, 4096, p),
                1 => Transfer::write(FUZZ_KEY, request, vpn, page, p),
                2 => Transfer::exchange(FUZZ_KEY, request, vpn, page, r.below(4), 4096, p),
                _ => Transfer::free(FUZZ_KEY, request, vpn, p),
            };
            client.start(now, 0, t.unwrap(), &mut |_, b| {
                decode(b).expect("the client sends only valid packets");
            });
        }
        let mut bytes = valid(&mut r, &payload);
        let other = valid(&mut r, &payload);
        for _ in 0..1 + r.below(4) {
            mutate(&mut r, &mut bytes, &other);
        }
        if r.below(2) == 0 && bytes.len() >= HEADER {
            let body = (bytes.len() - HEADER).min(0xffff) as u16;
            bytes[4..6].copy_from_slice(&body.to_be_bytes());
        }
        if r.below(4) != 0 {
            seal(&mut bytes);
        }
        if let Ok(p) = decode(&bytes) {
            decoded += 1;
            let mut again = vec![0u8; MAX_PACKET];
            let n = encode(&p, &mut again)
                .unwrap_or_else(|e| panic!("{p:?} decoded, not re-encoded: {e}"));
            assert_eq!(again[..n], bytes[..], "{p:?}: decode∘encode not the identity");
            if r.below(2) == 0 {
                let page_size = [1, 64, 4096, 65536][r.below(4) as usize];
                server.open_stream(p.header.stream, p.header.token, page_size);
                // A new stream starts empty (a server domain frees a closed stream's pages).
                store.pages.retain(|&(stream, _), _| stream != p.header.stream);
            }
        }
        server.on_packet(&mut store, &bytes, &mut |b| {
            sent += 1;
            decode(b).expect("the server sends only valid packets");
        });
        let mut out = |_: u8, b: &[u8]| {
            decode(b).expect("the client sends only valid packets");
        };
        client.on_packet(now, 0, &bytes, &mut out);
        client.poll_timeout(now, &mut out);
        while client.take_finished().is_some() {}
        if store.pages.len() > 48 {
            store.pages.clear();
        }
    }
    let c = client.stats();
    Fuzzed { inputs: count, decoded, answers: sent, taken: c.packets_received - c.unmatched }
}

/// What a fuzz run did.
#[derive(Debug)]
struct Fuzzed {
    inputs: u64,
    /// Inputs that decoded.
    decoded: u64,
    /// Packets the server sent in answer.
    answers: u64,
    /// Packets the client's operations took.
    taken: u64,
}

/// A valid encoding of a random message.
fn valid(r: &mut Rng, payload: &[u8]) -> Vec<u8> {
    let kind = r.below(KINDS);
    let mut message = message(r, kind, payload);
    if let Message::Data(d) = &mut message
        && r.below(2) == 0
    {
        // Chunks that fit the server's streams, so that some writes complete.
        let page_size: u32 = [1, 64, 4096, 16384][r.below(4) as usize];
        let tot = page_size.div_ceil(64) as u16;
        let num = r.below(tot as u64) as u16;
        let off = num as u32 * 64;
        let size = (page_size - off).min(64);
        *d = rpp::Data { page_size, off, tot, num, payload: &payload[..size as usize], ..*d };
    }
    // Half the packets are for the client's stream and its operations in flight.
    let header = match r.below(2) {
        0 => Header {
            stream: FUZZ_KEY.stream,
            token: FUZZ_KEY.token,
            request: 1 + r.below(4) as u32,
        },
        _ => header(r),
    };
    let packet = Packet { header, message };
    let mut buf = vec![0u8; MAX_PACKET];
    let n = encode(&packet, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn mutate(r: &mut Rng, bytes: &mut Vec<u8>, other: &[u8]) {
    let len = bytes.len().max(1) as u64;
    // In-place changes (a bit, a byte) half the time: they keep the structure and reach the
    // fields' checks.
    let kind = if r.below(2) == 0 { r.below(2) } else { r.below(9) };
    match kind {
        0 if !bytes.is_empty() => {
            let i = r.below(len) as usize;
            bytes[i] ^= 1 << r.below(8);
        }
        1 if !bytes.is_empty() => {
            let i = r.below(len) as usize;
            bytes[i] = [0, 1, 0xff, 0x7f, 0x80, r.next() as u8][r.below(6) as usize];
        }
        2 => {
            let i = r.below(len + 1).min(bytes.len() as u64) as usize;
            for _ in 0..1 + r.below(8) {
                bytes.insert(i, r.next() as u8);
            }
        }
        3 if !bytes.is_empty() => {
            let i = r.below(len) as usize;
            let n = (1 + r.below(8) as usize).min(bytes.len() - i);
            bytes.drain(i..i + n);
        }
        4 => bytes.truncate(r.below(len + 1) as usize),
        5 => {
            let n = 1 + r.below(32) as usize;
            let extra = r.bytes(n);
            bytes.extend(extra);
        }
        6 if !other.is_empty() => {
            // Splice: our head, the other packet's tail.
            let i = r.below(len + 1).min(bytes.len() as u64) as usize;
            let j = r.below(other.len() as u64) as usize;
            bytes.truncate(i);
            bytes.extend_from_slice(&other[j..]);
        }
        7 if bytes.len() >= HEADER => {
            // The body length, fixed to the real one or off by a little.
            let body = (bytes.len() - HEADER) as i64 + [0, 0, 1, -1, 2][r.below(5) as usize];
            bytes[4..6].copy_from_slice(&(body.clamp(0, 0xffff) as u16).to_be_bytes());
        }
        _ if bytes.len() >= HEADER => {
            // The op byte.
            bytes[3] = r.below(40) as u8;
        }
        _ => {}
    }
}

/// The fuzz target in the suite: a bounded number of inputs (a few seconds in a debug build).
#[test]
fn fuzz_decoder_bounded() {
    let f = fuzz(0x5250_0001, |i| i < 300_000);
    assert_eq!(f.inputs, 300_000);
    // The mutations reach past the checksum and the parser, and into both state machines,
    // often enough to matter.
    let n = f.inputs;
    assert!(f.decoded > n / 10 && f.answers > n / 20 && f.taken > n / 1000, "{f:?}");
}

/// The fuzz target for longer: `RPP_FUZZ_SECONDS` (default 60) of inputs from seed
/// `RPP_FUZZ_SEED` (default 1):
/// `RPP_FUZZ_SECONDS=600 cargo test -p rpp --release --test wire fuzz_decoder_long -- --ignored --nocapture`.
#[test]
#[ignore]
fn fuzz_decoder_long() {
    let var = |name: &str, default: u64| {
        std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
    };
    let seconds = var("RPP_FUZZ_SECONDS", 60);
    let seed = var("RPP_FUZZ_SEED", 1);
    let start = std::time::Instant::now();
    let f = fuzz(seed, |_| start.elapsed().as_secs() < seconds);
    println!("rpp fuzz: {f:?} in {seconds} s from seed {seed}, no failure");
}
