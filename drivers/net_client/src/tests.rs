//! Host tests of the session against a scripted driver (the end-to-end tests against the
//! serving loop are in `net_server`).

extern crate std;

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use net_interface::protocol::{RX_SLOT, Received};
use net_interface::{
    Endpoint, Ipv4Addr, NetError, Op, Request, Response, ServerMessage, SessionInfo, StreamAccounts,
};

use crate::{Session, Transport};

/// A driver that answers every request with `Ok` (Open with `INFO`) after delivering the
/// messages queued in `before`; `gone` once its script runs out when a message is awaited.
#[derive(Default)]
struct Script {
    sent: Vec<Request>,
    inbox: VecDeque<Vec<u8>>,
    /// Messages delivered before the next response.
    before: VecDeque<ServerMessage>,
    /// Answer the next request with this id instead of its own.
    wrong_id: Option<u64>,
    area: Vec<u8>,
    reads: usize,
    /// The transport's clock, in ns: it moves only when a receive waits.
    now: u64,
    /// Messages that arrive at a given instant of the clock, in order.
    later: VecDeque<(u64, Vec<u8>)>,
}

const INFO: SessionInfo = SessionInfo {
    local: Endpoint { addr: Ipv4Addr([10, 0, 0, 1]), port: 5000 },
    area_base: 0,
    area_len: 2048 + 2 * RX_SLOT as u64,
    rx_offset: 2048,
    rx_slots: 2,
    max_payload: 1472,
    max_in_flight: 8,
};

const PEER: Endpoint = Endpoint { addr: Ipv4Addr([10, 0, 0, 2]), port: 7000 };

impl Transport for Script {
    fn send(&mut self, msg: &[u8]) -> Result<(), NetError> {
        let req = Request::decode(msg)?;
        self.sent.push(req);
        for m in self.before.drain(..) {
            self.inbox.push_back(m.encode().to_vec());
        }
        let info = if req.op == Op::Open { INFO } else { SessionInfo::default() };
        let id = self.wrong_id.take().unwrap_or(req.id);
        let r = ServerMessage::Response(Response { id, status: Ok(()), info });
        self.inbox.push_back(r.encode().to_vec());
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, NetError> {
        self.recv_until(buf, u64::MAX)?.ok_or(NetError::Closed)
    }

    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> Result<Option<usize>, NetError> {
        let m = match self.inbox.pop_front() {
            Some(m) => m,
            None => match self.later.front() {
                Some(&(at, _)) if at <= deadline_ns => {
                    self.now = self.now.max(at);
                    self.later.pop_front().expect("looked at").1
                }
                // Nothing more will come: the driver is gone.
                None if deadline_ns == u64::MAX => return Err(NetError::Closed),
                _ => {
                    self.now = self.now.max(deadline_ns);
                    return Ok(None);
                }
            },
        };
        buf[..m.len()].copy_from_slice(&m);
        Ok(Some(m.len()))
    }

    fn write(&mut self, _: &SessionInfo, offset: u64, bytes: &[u8]) {
        self.area[offset as usize..][..bytes.len()].copy_from_slice(bytes);
    }

    fn read<R>(&mut self, _: &SessionInfo, offset: u64, len: u32, f: impl FnOnce(&[u8]) -> R) -> R {
        self.reads += 1;
        f(&self.area[offset as usize..][..len as usize])
    }

    fn accounts(&mut self, _: &SessionInfo) -> Option<StreamAccounts> {
        None
    }
}

fn opened() -> Session<Script> {
    let script = Script { area: vec![0; INFO.area_len as usize], ..Script::default() };
    let mut s = Session::new(script);
    assert_eq!(s.open(5000), Ok(INFO));
    s
}

fn received(slot: u64, len: u32) -> ServerMessage {
    ServerMessage::Received(Received { from: PEER, offset: 2048 + slot * RX_SLOT as u64, len })
}

#[test]
fn datagrams_that_arrive_during_a_call_are_received_in_order_then_released() {
    let mut s = opened();
    s.transport().area[2048 + RX_SLOT..][..3].copy_from_slice(b"two");
    s.transport().area[2048..][..3].copy_from_slice(b"one");
    s.transport().before.extend([received(0, 3), received(1, 3)]);
    s.send(PEER, b"ping").unwrap();
    assert_eq!(&s.transport().area[..4], b"ping");
    assert_eq!(s.waiting(), 2);
    for (want, slot) in [(b"one", 0u64), (b"two", 1)] {
        let got = s.receive(|d| (d.from, d.payload.to_vec())).unwrap();
        assert_eq!(got, (PEER, want.to_vec()));
        let release = *s.transport().sent.last().unwrap();
        assert_eq!(release, Request::release(release.id, 2048 + slot * RX_SLOT as u64));
    }
    // The script has nothing more: the driver is gone.
    assert_eq!(s.receive(|_| ()), Err(NetError::Closed));
}

#[test]
fn bad_messages_and_bad_sends_are_errors_that_cost_no_request() {
    let mut s = opened();
    // A slot outside the receive slots is not read and not released.
    s.transport().inbox.push_back(received(2, 3).encode().to_vec());
    let sent = s.transport().sent.len();
    assert_eq!(s.receive(|_| ()), Err(NetError::Malformed));
    assert_eq!((s.transport().reads, s.transport().sent.len()), (0, sent));
    // Sends the session refuses before a round trip.
    assert_eq!(s.send(PEER, &[0; 1473]), Err(NetError::TooLarge));
    assert_eq!(s.send(Endpoint { port: 0, ..PEER }, b"x"), Err(NetError::BadAddress));
    assert_eq!(s.open(0), Err(NetError::PortInUse));
    assert_eq!(s.transport().sent.len(), sent);
    // A response to another request.
    s.transport().wrong_id = Some(999);
    assert_eq!(s.send(PEER, b"x"), Err(NetError::Malformed));
    // After the close nothing is sent.
    s.close().unwrap();
    let sent = s.transport().sent.len();
    assert_eq!(s.send(PEER, b"x"), Err(NetError::UnknownClient));
    assert_eq!(s.receive(|_| ()), Err(NetError::UnknownClient));
    assert_eq!(s.transport().sent.len(), sent);
}

#[test]
fn a_receive_with_a_deadline_returns_none_at_the_deadline_and_the_datagram_after_it() {
    let mut s = opened();
    s.transport().area[2048..][..4].copy_from_slice(b"late");
    s.transport().later.push_back((5_000, received(0, 4).encode().to_vec()));
    let sent = s.transport().sent.len();
    // Nothing by 3,000 ns: no datagram, no request, and the wait lasted to the deadline.
    assert_eq!(s.receive_until(3_000, |d| d.payload.to_vec()), Ok(None));
    assert_eq!(
        (s.transport().now, s.transport().sent.len(), s.transport().reads),
        (3_000, sent, 0)
    );
    // The datagram comes at 5,000 ns, before the next deadline.
    let got = s.receive_until(10_000, |d| (d.from, d.payload.to_vec())).unwrap();
    assert_eq!(got, Some((PEER, b"late".to_vec())));
    assert_eq!(s.transport().now, 5_000);
    let release = *s.transport().sent.last().unwrap();
    assert_eq!(release, Request::release(release.id, 2048));
    // One that came during a call is taken at once, even with a deadline already past.
    s.transport().before.push_back(received(1, 0));
    s.send(PEER, b"x").unwrap();
    assert_eq!(s.receive_until(0, |d| d.payload.len()), Ok(Some(0)));
    assert_eq!(s.receive_until(7_000, |_| ()), Ok(None));
    assert_eq!(s.transport().now, 7_000);
}
