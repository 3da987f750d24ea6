//! Host tests of the serving loop over mock channels and a mock domain: every client is
//! answered, a client that does not read its responses is closed without disturbing the
//! other, and the loop ends once every client is gone.

extern crate std;

use std::collections::VecDeque;
use std::string::{String, ToString};
use std::vec::Vec;

use blk_interface::protocol::{Op, Request, Response};
use blk_workloads::mem_disk::{DmaMemory, MemDisk};

use crate::serve::{self, Channels, Client, DriverDomain, SendError, ServeOptions};
use crate::{Config, DataArea, Server};

const VIRT: u64 = 0x40_0000_0000;
const PHYS: u64 = 0x8000_0000;
const AREA: u64 = 64 << 10;

/// A client that sends all its requests at once and exits once it has every response; its
/// responses go to a ring of `room` slots that it never empties.
struct Mock {
    requests: VecDeque<Vec<u8>>,
    responses: Vec<Response>,
    room: usize,
    expected: usize,
}

impl Channels for Mock {
    type Error = ();

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ()> {
        Ok(self.requests.pop_front().map(|m| {
            buf[..m.len()].copy_from_slice(&m);
            m.len()
        }))
    }

    fn sender_gone(&self) -> bool {
        self.requests.is_empty() && self.responses.len() == self.expected
    }

    fn try_send(&mut self, msg: &[u8]) -> Result<bool, SendError<()>> {
        if self.responses.len() == self.room {
            return Ok(false);
        }
        self.responses.push(Response::decode(msg).map_err(|_| SendError::Other(()))?);
        Ok(true)
    }
}

#[derive(Default)]
struct Domain {
    lines: Vec<String>,
    blocks: u32,
    now: u64,
}

impl DriverDomain for Domain {
    fn now_ns(&self) -> u64 {
        self.now
    }
    fn interrupts(&self) -> u64 {
        0
    }
    fn interrupt_signalled_ns(&self) -> u64 {
        0
    }
    fn ack_interrupt(&mut self) {}
    fn set_device_busy(&mut self, _busy: bool) {}
    fn block(&mut self, _until_ns: u64) {
        self.blocks += 1;
        self.now += 1_000;
        assert!(self.blocks < 1_000, "the loop does not end");
    }
    fn die(&mut self) -> ! {
        panic!("died")
    }
    fn ns_from_ticks(&self, ticks: u64) -> u64 {
        ticks
    }
    fn print(&mut self, line: core::fmt::Arguments<'_>) {
        self.lines.push(line.to_string());
    }
}

fn name(s: &str) -> [u8; 32] {
    let mut n = [0; 32];
    n[..s.len()].copy_from_slice(s.as_bytes());
    n
}

/// A client sending an Open and `reads` one-sector reads, with `room` response slots.
fn client(n: &str, reads: u64, room: usize) -> Client<Mock> {
    let mut requests: VecDeque<_> = [Request::control(0, Op::Open).encode().to_vec()].into();
    for id in 1..=reads {
        let r = Request { id, op: Op::Read, sector: id, offset: 0, len: 512 };
        requests.push_back(r.encode().to_vec());
    }
    Client::new(
        name(n),
        Mock { requests, responses: Vec::new(), room, expected: reads as usize + 1 },
        None,
    )
}

/// Serves `clients` over a MemDisk with 4 slots; what the domain printed.
fn run(clients: &mut [Client<Mock>]) -> (i32, Vec<String>) {
    let n = clients.len() as u64;
    let disk = MemDisk::new(512, 1024, 4, 3, DmaMemory::new(VIRT, PHYS, (AREA * n) as usize));
    let config =
        Config { max_clients: 2, max_in_flight_per_client: 8, queue_len: 32, max_transfer: 4096 };
    let mut server = Server::new(disk, config);
    for c in 0..n {
        let area = DataArea { virt: VIRT + c * AREA, phys: PHYS + c * AREA, len: AREA };
        server.open(c as usize, area).unwrap();
    }
    let mut domain = Domain::default();
    let options = ServeOptions {
        driver: "test",
        die_after: None,
        scheduler: None,
        anticipate: true,
        trace: false,
    };
    let status = serve::serve(server, clients, &mut domain, &options);
    (status, domain.lines)
}

#[test]
fn every_client_is_answered_and_the_loop_ends_when_all_are_gone() {
    let mut clients = [client("a-req", 6, 64), client("b-req", 6, 64)];
    let (status, lines) = run(&mut clients);
    assert_eq!(status, 0);
    for c in &clients {
        let mut ids: Vec<_> = c.channels().responses.iter().map(|r| r.id).collect();
        ids.sort();
        assert_eq!(ids, [0, 1, 2, 3, 4, 5, 6], "{}", c.name());
        assert!(c.channels().responses.iter().all(|r| r.status.is_ok()));
        assert!(!c.is_open());
    }
    let last = lines.last().unwrap();
    assert!(last.starts_with("test: every client gone: 12 requests served, 0 rejected"), "{last}");
    assert!(lines.iter().any(|l| l == "test: client a-req gone"), "{lines:?}");
}

#[test]
fn a_client_that_does_not_read_its_responses_is_closed_and_the_other_served() {
    let mut clients = [client("slow-req", 6, 2), client("fast-req", 6, 64)];
    let (status, lines) = run(&mut clients);
    assert_eq!(status, 0);
    assert_eq!(clients[0].channels().responses.len(), 2);
    assert_eq!(clients[1].channels().responses.len(), 7);
    assert!(
        lines.iter().any(|l| l == "test: client slow-req does not read its responses: closed"),
        "{lines:?}"
    );
}
