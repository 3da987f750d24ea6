//! Host tests: every error with its code, the client against the server, and
//! the driver side under load with out-of-order completion.

extern crate std;

use std::collections::HashMap;
use std::vec;
use std::vec::Vec;

use crate::{ClientId, Config, DataArea, Server};
use blk_client::client::{Client, Completion, ResponseError};
use blk_interface::device::{BlockDevice, DeviceError, DeviceRequest};
use blk_interface::protocol::{BlkError, Op, Request, Response, SessionInfo};
use blk_workloads::mem_disk::{DmaMemory, MemDisk, Rng};

const SS: u32 = 512;
const VIRT: u64 = 0x40_0000_0000;
const PHYS: u64 = 0x8000_0000;

/// A server over a MemDisk of `sectors` sectors with `slots` device slots, and one data area
/// of `area` bytes per client, opened (by the driver) for every client.
fn setup(clients: usize, area: u64, sectors: u64, slots: usize, config: Config) -> Server<MemDisk> {
    let memory = DmaMemory::new(VIRT, PHYS, (area * clients as u64) as usize);
    let disk = MemDisk::new(SS, sectors, slots, 0x5eed, memory);
    let mut server = Server::new(disk, Config { max_clients: clients, ..config });
    for c in 0..clients {
        let off = area * c as u64;
        server.open(c, DataArea { virt: VIRT + off, phys: PHYS + off, len: area }).unwrap();
    }
    server
}

fn config() -> Config {
    Config { max_clients: 1, max_in_flight_per_client: 16, queue_len: 32, max_transfer: 64 << 10 }
}

/// Sends `req` from `client` through the wire.
fn send(server: &mut Server<MemDisk>, client: ClientId, req: Request) -> Option<Response> {
    server.request(client, &req.encode()).map(|r| Response::decode(&r.encode()).unwrap())
}

/// Opens `client`'s session and returns the Client that holds it.
fn open(server: &mut Server<MemDisk>, c: ClientId) -> Client {
    let mut client = Client::new(64);
    let req = client.open().unwrap();
    let resp = server.request(c, &req.encode()).unwrap();
    let done = client.on_response(&resp.encode()).unwrap();
    assert_eq!(done, Completion { id: req.id, op: Op::Open, status: Ok(()) });
    client
}

/// Polls until the device is idle; every response, by client.
fn drain(server: &mut Server<MemDisk>) -> Vec<(ClientId, Response)> {
    core::iter::from_fn(|| server.poll()).collect()
}

/// The status a request gets at once, after a trip through the wire.
fn status_of(server: &mut Server<MemDisk>, c: ClientId, req: Request) -> Result<(), BlkError> {
    send(server, c, req).expect("an immediate response").status
}

fn rw(id: u64, op: Op, sector: u64, offset: u64, len: u32) -> Request {
    Request { id, op, sector, offset, len }
}

// --- Each error, from the driver, with its code on the wire. ---

/// One client, open, 64 KiB area, a disk of 1024 sectors.
fn one_client() -> (Server<MemDisk>, Client) {
    let mut server = setup(1, 64 << 10, 1024, 4, config());
    let client = open(&mut server, 0);
    (server, client)
}

/// The wire code a request gets at once.
fn code_of(server: &mut Server<MemDisk>, c: ClientId, req: Request) -> u16 {
    let resp = server.request(c, &req.encode()).expect("an immediate response");
    u16::from_le_bytes(resp.encode()[8..10].try_into().unwrap())
}

#[test]
fn open_returns_the_area_and_the_geometry() {
    let mut server = setup(2, 64 << 10, 1024, 4, config());
    let resp = send(&mut server, 1, Request::control(9, Op::Open)).unwrap();
    let info = SessionInfo {
        area_base: VIRT + (64 << 10),
        area_len: 64 << 10,
        sector_size: SS,
        capacity: 1024,
        max_transfer: 64 << 10,
        max_in_flight: 16,
    };
    assert_eq!(resp, Response { id: 9, status: Ok(()), info });
    let client = open(&mut server, 1);
    assert_eq!(client.session(), Some(info));
}

#[test]
fn error_out_of_range() {
    let (mut s, _) = one_client();
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Read, 1024, 0, 512)), 1);
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Write, 1023, 0, 1024)), 1);
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Read, u64::MAX, 0, 512)), 1);
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Read, u64::MAX - 1, 0, 4096)), 1);
    // The last sector is fine.
    assert_eq!(send(&mut s, 0, rw(1, Op::Read, 1023, 0, 512)), None);
}

#[test]
fn error_misaligned() {
    let (mut s, _) = one_client();
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Read, 0, 0, 100)), 2);
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Read, 0, 256, 512)), 2);
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Write, 0, 1, 1024)), 2);
}

#[test]
fn error_zero_length() {
    let (mut s, _) = one_client();
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Read, 0, 0, 0)), 3);
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Write, 5, 512, 0)), 3);
}

#[test]
fn error_outside_data_area() {
    let (mut s, _) = one_client();
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Read, 0, 64 << 10, 512)), 4);
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Read, 0, (64 << 10) - 512, 1024)), 4);
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Write, 0, u64::MAX - 511, 1024)), 4);
    // The area's last sector is fine.
    assert_eq!(send(&mut s, 0, rw(1, Op::Read, 0, (64 << 10) - 512, 512)), None);
}

#[test]
fn error_unknown_client() {
    let mut s = setup(2, 64 << 10, 1024, 4, config());
    // No such client.
    assert_eq!(code_of(&mut s, 2, Request::control(1, Op::Open)), 5);
    assert_eq!(code_of(&mut s, usize::MAX, rw(1, Op::Read, 0, 0, 512)), 5);
    // A request before Open.
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Read, 0, 0, 512)), 5);
    assert_eq!(code_of(&mut s, 0, Request::control(1, Op::Flush)), 5);
    // The driver never gave client 1 an area (closed it), so it cannot even open.
    s.close(1);
    assert_eq!(code_of(&mut s, 1, Request::control(1, Op::Open)), 5);
    assert_eq!(
        s.open(7, DataArea { virt: VIRT, phys: PHYS, len: 512 }),
        Err(BlkError::UnknownClient)
    );
    // After Close.
    let _ = open(&mut s, 0);
    assert_eq!(send(&mut s, 0, Request::control(2, Op::Close)), Some(Response::plain(2, Ok(()))));
    assert_eq!(code_of(&mut s, 0, rw(3, Op::Read, 0, 0, 512)), 5);
}

#[test]
fn error_too_large() {
    let mut s = setup(1, 256 << 10, 1024, 4, config());
    let _ = open(&mut s, 0);
    assert_eq!(code_of(&mut s, 0, rw(1, Op::Read, 0, 0, (64 << 10) + 512)), 6);
    assert_eq!(send(&mut s, 0, rw(1, Op::Read, 0, 0, 64 << 10)), None);
}

#[test]
fn error_busy_at_the_per_client_cap() {
    let mut s = setup(2, 64 << 10, 1024, 4, Config { max_in_flight_per_client: 3, ..config() });
    let _ = open(&mut s, 0);
    let _ = open(&mut s, 1);
    for id in 0..3 {
        assert_eq!(send(&mut s, 0, rw(id, Op::Read, 0, 0, 512)), None);
    }
    assert_eq!(code_of(&mut s, 0, rw(3, Op::Read, 0, 0, 512)), 7);
    assert_eq!(code_of(&mut s, 0, Request::control(4, Op::Flush)), 7);
    // The cap is per client.
    assert_eq!(send(&mut s, 1, rw(0, Op::Read, 0, 0, 512)), None);
    // A completion makes room again.
    let (c, _) = s.poll().unwrap();
    if c == 0 {
        assert_eq!(send(&mut s, 0, rw(5, Op::Read, 0, 0, 512)), None);
    }
    assert_eq!(drain(&mut s).len(), if c == 0 { 4 } else { 3 });
    assert_eq!((s.in_flight(0), s.in_flight(1)), (0, 0));
}

#[test]
fn error_device_is_propagated_and_the_rest_served() {
    let (mut s, mut client) = one_client();
    s.device_mut().fail_sector(100);
    let bad = client.read(96, 0, 8 * SS).unwrap();
    let good = client.write(0, 4096, 4096).unwrap();
    let flush = client.flush().unwrap();
    for req in [bad, good, flush] {
        assert_eq!(send(&mut s, 0, req), None);
    }
    let mut seen = HashMap::new();
    for (c, resp) in drain(&mut s) {
        assert_eq!(c, 0);
        assert_eq!(resp.encode()[8..10], [if resp.id == bad.id { 8 } else { 0 }, 0]);
        let done = client.on_response(&resp.encode()).unwrap();
        seen.insert(done.id, done.status);
    }
    assert_eq!(seen[&bad.id], Err(BlkError::Device));
    assert_eq!(seen[&good.id], Ok(()));
    assert_eq!(seen[&flush.id], Ok(()));
    assert_eq!(s.device().stats().errors, 1);
    // A flush touches no sector, so a bad sector does not fail it; after healing, reads work.
    s.device_mut().heal();
    let again = client.read(96, 0, 8 * SS).unwrap();
    assert_eq!(send(&mut s, 0, again), None);
    assert_eq!(drain(&mut s), [(0, Response::plain(again.id, Ok(())))]);
}

#[test]
fn error_device_at_submission() {
    /// A device that refuses every request outright.
    struct Refusing;
    impl BlockDevice for Refusing {
        fn sector_size(&self) -> u32 {
            SS
        }
        fn capacity(&self) -> u64 {
            64
        }
        fn max_in_flight(&self) -> usize {
            1
        }
        fn submit(&mut self, _: DeviceRequest) -> Result<blk_interface::Tag, DeviceError> {
            Err(DeviceError::Io)
        }
        fn complete(&mut self) -> Option<(blk_interface::Tag, Result<(), DeviceError>)> {
            None
        }
    }
    let mut s = Server::new(Refusing, config());
    s.open(0, DataArea { virt: VIRT, phys: PHYS, len: 4096 }).unwrap();
    let _ = s.request(0, &Request::control(1, Op::Open).encode()).unwrap();
    let resp = s.request(0, &rw(2, Op::Write, 0, 0, 512).encode()).unwrap();
    assert_eq!(resp, Response::plain(2, Err(BlkError::Device)));
    assert_eq!(s.in_flight(0), 0);
}

#[test]
fn error_closed_when_the_channel_goes() {
    let (mut s, mut client) = one_client();
    let a = client.read(0, 0, 512).unwrap();
    let b = client.flush().unwrap();
    for req in [a, b] {
        assert_eq!(send(&mut s, 0, req), None);
    }
    let mut failed: Vec<Completion> = client.cancel_all().collect();
    failed.sort_by_key(|c| c.id);
    assert_eq!(
        failed,
        [
            Completion { id: a.id, op: Op::Read, status: Err(BlkError::Closed) },
            Completion { id: b.id, op: Op::Flush, status: Err(BlkError::Closed) },
        ]
    );
    assert_eq!(BlkError::Closed.code(), 9);
    assert_eq!((client.in_flight(), client.session()), (0, None));
    assert_eq!(client.read(0, 0, 512), Err(BlkError::UnknownClient));
}

#[test]
fn error_malformed() {
    let (mut s, _) = one_client();
    let mut b = rw(0x77, Op::Read, 0, 0, 512).encode();
    b[8] = 42;
    let resp = s.request(0, &b).unwrap();
    assert_eq!(resp, Response::plain(0x77, Err(BlkError::Malformed)));
    assert_eq!(resp.encode()[8..10], [10, 0]);
    assert_eq!(s.request(0, &[1, 2, 3]), Some(Response::plain(0, Err(BlkError::Malformed))));
    assert_eq!(s.request(0, &[]), Some(Response::plain(0, Err(BlkError::Malformed))));
    assert_eq!(s.stats().rejected, 3);
}

#[test]
fn bad_areas_are_refused() {
    let mut s = setup(1, 4096, 64, 2, config());
    let area = |virt, phys, len| DataArea { virt, phys, len };
    assert_eq!(s.open(0, area(VIRT, PHYS, 0)), Err(BlkError::Misaligned));
    assert_eq!(s.open(0, area(VIRT + 1, PHYS, 4096)), Err(BlkError::Misaligned));
    assert_eq!(s.open(0, area(VIRT, PHYS + 8, 4096)), Err(BlkError::Misaligned));
    assert_eq!(s.open(0, area(VIRT, PHYS, 1000)), Err(BlkError::Misaligned));
    assert_eq!(s.open(0, area(u64::MAX - 511, PHYS, 1024)), Err(BlkError::OutsideDataArea));
}

// --- Sessions and the queue. ---

#[test]
fn close_message_forgets_in_flight_and_a_new_session_gets_nothing_stale() {
    let mut s = setup(1, 64 << 10, 1024, 2, config());
    let _ = open(&mut s, 0);
    for id in 0..6 {
        assert_eq!(send(&mut s, 0, rw(id, Op::Read, id, 0, 512)), None);
    }
    assert_eq!((s.in_flight(0), s.queued(), s.outstanding(0)), (6, 4, 2));
    // The client's Close (a raw Client refuses Close with requests in flight).
    assert_eq!(
        send(&mut s, 0, Request::control(100, Op::Close)),
        Some(Response::plain(100, Ok(())))
    );
    assert_eq!((s.in_flight(0), s.queued(), s.outstanding(0)), (0, 0, 2));
    // A new session: the old requests' completions are dropped, its own are delivered.
    let mut client = open(&mut s, 0);
    let req = client.read(0, 0, 512).unwrap();
    assert_eq!(send(&mut s, 0, req), None);
    let out = drain(&mut s);
    assert_eq!(out, [(0, Response::plain(req.id, Ok(())))]);
    assert_eq!(s.stats().dropped, 2);
    assert_eq!(s.outstanding(0), 0);
}

#[test]
fn queue_full_is_busy_and_the_queue_drains_in_order() {
    let cfg = Config { max_in_flight_per_client: 64, queue_len: 3, ..config() };
    let mut s = setup(1, 64 << 10, 1024, 2, cfg);
    let _ = open(&mut s, 0);
    // Two at the device, three queued, then Busy.
    for id in 0..5 {
        assert_eq!(send(&mut s, 0, rw(id, Op::Write, id, id * 512, 512)), None, "{id}");
    }
    assert_eq!(s.queued(), 3);
    assert_eq!(status_of(&mut s, 0, rw(5, Op::Read, 0, 0, 512)), Err(BlkError::Busy));
    assert_eq!(s.in_flight(0), 5);
    // Each completion refills the device from the queue's head.
    let mut done = Vec::new();
    while let Some((_, resp)) = s.poll() {
        assert_eq!(resp.status, Ok(()));
        done.push(resp.id);
        assert!(s.queued() <= 3 && s.device().in_flight() <= 2);
        // Room again: another request is accepted once the queue has space.
        if done.len() == 1 {
            assert_eq!(send(&mut s, 0, rw(6, Op::Read, 0, 0, 512)), None);
        }
    }
    done.sort();
    assert_eq!(done, [0, 1, 2, 3, 4, 6]);
    assert_eq!(s.stats().max_queued, 3);
    assert_eq!(s.device().stats().max_depth, 2);
    assert_eq!((s.in_flight(0), s.queued()), (0, 0));
}

#[test]
fn flush_goes_through_the_device() {
    let (mut s, mut client) = one_client();
    let req = client.flush().unwrap();
    assert_eq!(send(&mut s, 0, req), None);
    let (c, resp) = s.poll().unwrap();
    assert_eq!(
        client.on_response(&resp.encode()),
        Ok(Completion { id: req.id, op: Op::Flush, status: Ok(()) })
    );
    assert_eq!((c, s.device().stats().flushes), (0, 1));
}

// --- The client. ---

#[test]
fn client_rejects_unexpected_and_duplicate_responses() {
    let (mut s, mut client) = one_client();
    let req = client.read(0, 0, 512).unwrap();
    assert_eq!(send(&mut s, 0, req), None);
    let (_, resp) = s.poll().unwrap();
    let bytes = resp.encode();
    assert_eq!(client.on_response(&bytes).map(|c| c.id), Ok(req.id));
    assert_eq!(client.on_response(&bytes), Err(ResponseError::UnexpectedId(req.id)));
    let stranger = Response::plain(12345, Ok(())).encode();
    assert_eq!(client.on_response(&stranger), Err(ResponseError::UnexpectedId(12345)));
    assert_eq!(client.on_response(&bytes[..10]), Err(ResponseError::Malformed));
    assert_eq!(client.in_flight(), 0);
}

#[test]
fn client_ids_are_unique_and_in_flight_is_bounded() {
    let mut server =
        setup(1, 64 << 10, 1024, 4, Config { max_in_flight_per_client: 8, ..config() });
    let mut client = open(&mut server, 0);
    assert_eq!(client.room(), 8);
    let reqs: Vec<_> = (0..8).map(|i| client.read(i, 0, 512).unwrap()).collect();
    let mut ids: Vec<_> = reqs.iter().map(|r| r.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8);
    assert!(!ids.contains(&0));
    assert_eq!(client.read(0, 0, 512), Err(BlkError::Busy));
    assert_eq!(client.close(), Err(BlkError::Busy));
    // Answer one: room for exactly one more, with a fresh id.
    let done = client.on_decoded(Response::plain(reqs[3].id, Ok(()))).unwrap();
    assert_eq!(done.op, Op::Read);
    let next = client.write(0, 0, 512).unwrap();
    assert!(ids.iter().filter(|&&id| id != reqs[3].id).all(|&id| id != next.id));
    assert!(client.is_pending(next.id));
    assert_eq!(client.read(0, 0, 512), Err(BlkError::Busy));
}

#[test]
fn client_checks_transfers_before_sending() {
    let mut client = Client::new(4);
    assert_eq!(client.read(0, 0, 512), Err(BlkError::UnknownClient));
    assert_eq!(client.flush(), Err(BlkError::UnknownClient));
    let (_, mut client) = one_client();
    assert_eq!(client.read(0, 0, 0), Err(BlkError::ZeroLength));
    assert_eq!(client.read(0, 0, 100), Err(BlkError::Misaligned));
    assert_eq!(client.read(0, 0, 128 << 10), Err(BlkError::TooLarge));
    assert_eq!(client.read(0, 64 << 10, 512), Err(BlkError::OutsideDataArea));
    assert_eq!(client.read(1024, 0, 512), Err(BlkError::OutOfRange));
    assert_eq!(client.in_flight(), 0);
    // Close ends the session.
    let req = client.close().unwrap();
    client.on_decoded(Response::plain(req.id, Ok(()))).unwrap();
    assert_eq!(client.session(), None);
}

// --- Under load: the model. ---

/// FNV-1a over 8-byte words: a sector's checksum.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.chunks_exact(8).fold(0xcbf2_9ce4_8422_2325, |h, w| {
        (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A request of the harness in flight.
struct Sent {
    op: Op,
    sector: u64,
    slot: u64,
    len: u32,
    /// For a write, the checksum of each sector written.
    sums: Vec<u64>,
}

/// One client of the harness.
struct Peer {
    client: Client,
    /// Free 64 KiB slots of the data area (offsets).
    free: Vec<u64>,
    sent: HashMap<u64, Sent>,
    /// The sectors this peer uses.
    sectors: core::ops::Range<u64>,
    done: u64,
}

/// Clients doing random reads and writes against a model of the disk's sector checksums.
struct Harness {
    server: Server<MemDisk>,
    peers: Vec<Peer>,
    model: Vec<u64>,
    rng: Rng,
    writes: u64,
}

const SLOT: u64 = 64 << 10;

impl Harness {
    fn new(clients: usize, sectors: u64, ranges: &[core::ops::Range<u64>], seed: u64) -> Harness {
        let cfg = Config {
            max_clients: clients,
            max_in_flight_per_client: 16,
            queue_len: 32,
            max_transfer: 64 << 10,
        };
        let mut server = setup(clients, 16 * SLOT, sectors, 8, cfg);
        let peers = (0..clients)
            .map(|c| Peer {
                client: open(&mut server, c),
                free: (0..16).map(|i| i * SLOT).collect(),
                sent: HashMap::new(),
                sectors: ranges[c].clone(),
                done: 0,
            })
            .collect();
        let zero = checksum(&[0; SS as usize]);
        Harness {
            server,
            peers,
            model: vec![zero; sectors as usize],
            rng: Rng::new(seed),
            writes: 0,
        }
    }

    /// Sends one random request from peer `c`, if it has room.
    fn issue(&mut self, c: ClientId) -> bool {
        let peer = &mut self.peers[c];
        if peer.client.room() == 0 || peer.free.is_empty() {
            return false;
        }
        let slot = peer.free.pop().unwrap();
        let count = 1 + self.rng.below(128);
        let span = peer.sectors.end - peer.sectors.start;
        let sector = peer.sectors.start + self.rng.below(span - count + 1);
        let len = (count * u64::from(SS)) as u32;
        let info = peer.client.session().unwrap();
        let (req, sent) = match self.rng.below(100) {
            0 => (
                peer.client.flush().unwrap(),
                Sent { op: Op::Flush, sector, slot, len: 0, sums: vec![] },
            ),
            1..50 => {
                let req = peer.client.read(sector, slot, len).unwrap();
                (req, Sent { op: Op::Read, sector, slot, len, sums: vec![] })
            }
            _ => {
                // Fresh contents in the slot, one checksum per sector.
                self.writes += 1;
                let stamp = self.rng.next_u64();
                let area = self.server.device_mut().memory_mut();
                let bytes = area.get_mut(info.area_base + slot, len as usize).unwrap();
                let mut sums = Vec::with_capacity(count as usize);
                for (i, sector_bytes) in bytes.chunks_exact_mut(SS as usize).enumerate() {
                    for (j, w) in sector_bytes.chunks_exact_mut(8).enumerate() {
                        let v = stamp
                            ^ ((i as u64) << 32 | j as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                        w.copy_from_slice(&v.to_le_bytes());
                    }
                    sums.push(checksum(sector_bytes));
                }
                let req = peer.client.write(sector, slot, len).unwrap();
                (req, Sent { op: Op::Write, sector, slot, len, sums })
            }
        };
        let peer = &mut self.peers[c];
        peer.sent.insert(req.id, sent);
        assert_eq!(self.server.request(c, &req.encode()), None, "request refused");
        true
    }

    /// Takes one response and checks it against the model; false if the device is idle.
    fn poll(&mut self) -> bool {
        let Some((c, resp)) = self.server.poll() else { return false };
        let peer = &mut self.peers[c];
        let done =
            peer.client.on_response(&resp.encode()).expect("a response to a request in flight");
        assert_eq!(done.status, Ok(()), "{done:?}");
        let sent = peer.sent.remove(&done.id).unwrap();
        assert_eq!(sent.op, done.op);
        peer.free.push(sent.slot);
        peer.done += 1;
        let base = peer.client.session().unwrap().area_base + sent.slot;
        match sent.op {
            Op::Write => {
                for (i, sum) in sent.sums.iter().enumerate() {
                    self.model[sent.sector as usize + i] = *sum;
                }
            }
            Op::Read => {
                let bytes = self.server.device().memory().get(base, sent.len as usize).unwrap();
                for (i, sector_bytes) in bytes.chunks_exact(SS as usize).enumerate() {
                    let sector = sent.sector as usize + i;
                    assert_eq!(checksum(sector_bytes), self.model[sector], "sector {sector}");
                }
            }
            _ => {}
        }
        true
    }

    /// Checks every sector of `sectors` on the disk against the model.
    fn verify(&self, sectors: core::ops::Range<u64>) {
        let disk = self.server.device().contents();
        for sector in sectors {
            let at = (sector * u64::from(SS)) as usize;
            let bytes = &disk[at..at + SS as usize];
            assert_eq!(checksum(bytes), self.model[sector as usize], "sector {sector} on disk");
        }
    }

    /// Takes the disk's contents of `sectors` as the model (after writes nobody tracked).
    fn resync(&mut self, sectors: core::ops::Range<u64>) {
        for sector in sectors {
            let at = (sector * u64::from(SS)) as usize;
            let sum = checksum(&self.server.device().contents()[at..at + SS as usize]);
            self.model[sector as usize] = sum;
        }
    }

    /// Runs peers `active` until they have issued `ops` requests more between them, then
    /// until everything in flight is answered.
    fn run(&mut self, active: &[ClientId], ops: u64) {
        let mut issued = 0;
        loop {
            let c = active[self.rng.below(active.len() as u64) as usize];
            if issued < ops && self.rng.below(3) != 0 && self.issue(c) {
                issued += 1;
                continue;
            }
            if !self.poll() && issued >= ops {
                break;
            }
        }
        for &c in active {
            assert_eq!(self.peers[c].client.in_flight(), 0);
            assert!(self.peers[c].sent.is_empty());
        }
    }
}

#[test]
fn stress_two_clients_20000_random_transfers_out_of_order() {
    const SECTORS: u64 = 8192; // 4 MiB, shared: the clients' requests overlap.
    let mut h = Harness::new(2, SECTORS, &[0..SECTORS, 0..SECTORS], 0xb10c);
    h.run(&[0, 1], 20_000);
    h.verify(0..SECTORS);
    let (disk, server) = (h.server.device().stats(), h.server.stats());
    assert_eq!(h.peers[0].done + h.peers[1].done, 20_000);
    assert!(h.peers[0].done > 8_000 && h.peers[1].done > 8_000);
    assert_eq!(disk.reads + disk.writes + disk.flushes, 20_000);
    assert_eq!(disk.errors, 0);
    assert!(disk.writes > 8_000 && disk.reads > 8_000 && disk.flushes > 0, "{disk:?}");
    assert!(disk.out_of_order > 5_000, "{disk:?}");
    assert_eq!(disk.max_depth, 8);
    assert!(server.queued > 1_000 && server.max_queued > 8, "{server:?}");
    assert_eq!((server.completed, server.dropped, server.rejected), (20_000, 0, 0));
}

#[test]
fn a_client_killed_mid_stream_leaves_the_other_served() {
    const SECTORS: u64 = 4096;
    let (first, second) = (0..SECTORS / 2, SECTORS / 2..SECTORS);
    let mut h = Harness::new(2, SECTORS, &[first.clone(), second.clone()], 0xdead);
    h.run(&[0, 1], 2_000);
    // Fill client 0's pipeline, then kill it with requests queued and at the device.
    while h.issue(0) {}
    while h.issue(1) {}
    assert!(h.server.outstanding(0) > 0 && h.server.in_flight(0) > h.server.outstanding(0));
    let in_flight = h.server.in_flight(0);
    assert_eq!(h.server.close(0), in_flight);
    let failed: Vec<_> = h.peers[0].client.cancel_all().collect();
    assert_eq!(failed.len(), in_flight);
    assert!(failed.iter().all(|c| c.status == Err(BlkError::Closed)));
    h.peers[0].sent.clear();
    assert_eq!(
        status_of(&mut h.server, 0, Request::control(1, Op::Open)),
        Err(BlkError::UnknownClient)
    );
    // Client 1 carries on; nothing of client 0's is ever delivered (`poll` would panic on an
    // id its Client does not expect, and client 0's Client has none).
    let before = h.peers[1].done;
    h.run(&[1], 3_000);
    assert_eq!(h.peers[1].done - before, 3_000 + 16);
    assert!(h.server.stats().dropped > 0);
    assert_eq!(h.server.outstanding(0), 0);
    h.verify(second);
    // Client 0 comes back with a fresh session on the same area and is served again.
    h.server.open(0, DataArea { virt: VIRT, phys: PHYS, len: 16 * SLOT }).unwrap();
    h.peers[0].client = open(&mut h.server, 0);
    h.peers[0].free = (0..16).map(|i| i * SLOT).collect();
    h.resync(first.clone());
    h.run(&[0, 1], 2_000);
    h.verify(0..SECTORS);
}

/// Sends `req` from `client` to a driver that takes the loans in `loans` (handle, device
/// address), noting the loans it asked about.
fn send_lending(
    server: &mut Server<MemDisk>,
    client: ClientId,
    req: Request,
    loans: &[(u64, u64)],
    asked: &mut Vec<u64>,
) -> Option<Response> {
    let mut lend = |loan: u64, len: u32| {
        asked.push(loan);
        assert!(len <= 4096);
        loans.iter().find(|(l, _)| *l == loan).map(|(_, pa)| *pa)
    };
    server.request_lending(client, &req.encode(), &mut lend)
}

#[test]
fn loans_move_data_straight_to_and_from_the_frame_and_every_accepted_loan_comes_back() {
    // Two clients' areas of 4 KiB, and two "lent frames" beyond them in the same memory.
    let mut server = setup(1, 4096, 64, 4, config());
    let mut client = open(&mut server, 0);
    let memory = DmaMemory::new(VIRT, PHYS, 3 * 4096);
    *server.device_mut().memory_mut() = memory;
    let (frame_a, frame_b) = (PHYS + 4096, PHYS + 2 * 4096);
    let loans = [(0x1_0000_0101, frame_a), (0x1_0000_0202, frame_b)];
    server.device_mut().memory_mut().get_mut(VIRT + 4096, 4096).unwrap().fill(0xa5);
    let mut asked = Vec::new();
    // A page written from frame A, read back into frame B.
    let w = client.write_loan(8, loans[0].0, 4096).unwrap();
    assert!(send_lending(&mut server, 0, w, &loans, &mut asked).is_none());
    let done = drain(&mut server);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].1.status, Ok(()));
    assert_eq!(server.take_returned_loan(), Some(loans[0].0));
    let r = client.read_loan(8, loans[1].0, 4096).unwrap();
    assert!(send_lending(&mut server, 0, r, &loans, &mut asked).is_none());
    assert_eq!(server.take_returned_loan(), None, "returned before the device is done");
    assert_eq!(drain(&mut server)[0].1.status, Ok(()));
    assert_eq!(server.take_returned_loan(), Some(loans[1].0));
    let b = server.device_mut().memory_mut().get(VIRT + 2 * 4096, 4096).unwrap();
    assert!(b.iter().all(|&x| x == 0xa5), "the page did not land in the lent frame");
    // A loan that is not the client's: refused, left alone (not returned).
    let bad = Request { id: 9, op: Op::ReadLoan, sector: 0, offset: 0x2_0000_0101, len: 4096 };
    let answer = send_lending(&mut server, 0, bad, &loans, &mut asked).unwrap();
    assert_eq!(answer.status, Err(BlkError::BadLoan));
    assert_eq!(server.take_returned_loan(), None);
    // Longer than a page: refused before the loan is looked at.
    let long = Request { id: 10, op: Op::ReadLoan, sector: 0, offset: loans[0].0, len: 8192 };
    let asked_before = asked.len();
    assert_eq!(
        send_lending(&mut server, 0, long, &loans, &mut asked).unwrap().status,
        Err(BlkError::OutsideDataArea)
    );
    assert_eq!(asked.len(), asked_before);
    // A driver that takes no loans refuses them all.
    let plain = Request { id: 11, op: Op::WriteLoan, sector: 0, offset: loans[0].0, len: 512 };
    assert_eq!(status_of(&mut server, 0, plain), Err(BlkError::BadLoan));
    // Accepted, then forgotten by a close before the device saw it: returned all the same.
    for (i, &(loan, _)) in loans.iter().enumerate() {
        let req =
            Request { id: 20 + i as u64, op: Op::ReadLoan, sector: 0, offset: loan, len: 512 };
        let _ = send_lending(&mut server, 0, req, &loans, &mut asked);
    }
    server.close(0);
    let _ = drain(&mut server);
    let mut back: Vec<u64> = core::iter::from_fn(|| server.take_returned_loan()).collect();
    back.sort_unstable();
    assert_eq!(back, [loans[0].0, loans[1].0], "an accepted loan was not returned");
}
