//! The protocol's server side: a client's encoded requests turned into the stack's calls, and
//! its datagrams received turned into messages, so that a driver domain only moves messages
//! between the channels and [`NetStack::handle`] / [`NetStack::next_message`].
//!
//! A client's data area is laid out as [`Area`] says: the payloads of its sends before
//! `rx_offset`, its receive slots from there on. The stack's offsets of received datagrams are
//! from the first slot; on the wire they are from the area's start.

use net_interface::frame::MAX_UDP_PAYLOAD;
use net_interface::protocol::{RESPONSE_LEN, RX_SLOT, Received};
use net_interface::{
    Endpoint, NetContract, NetError, Nic, Op, Request, Response, ServerMessage, SessionInfo,
};

use crate::{ClientId, Instant, NetStack};

/// A client's data area, as the driver domain granted it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Area {
    /// Its address (the client's and the driver's: one address space).
    pub base: u64,
    /// Its length in bytes.
    pub len: u64,
    /// Where its receive slots start.
    pub rx_offset: u32,
}

/// One client's channel: its endpoint once opened, and its session as the Open answered it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Session {
    /// The client in the stack, while its endpoint is open.
    pub client: Option<ClientId>,
    /// What the Open answered (all zero before).
    pub info: SessionInfo,
}

impl<N: Nic, A: AsMut<[u8]> + AsRef<[u8]>> NetStack<N, A> {
    /// Handles the encoded request `msg` of the client on `session` at `now`: its contract is
    /// `contract`, its data area `area`, whose bytes before the receive slots are `tx` and
    /// whose receive slots `rx` gives (asked once, on a successful Open's way); a SendLoan's
    /// loan is checked by `loan`, asked once, after the request's own checks, with the loan's
    /// handle and the bytes of the frame the request reaches from its start: the frame's
    /// device address, or [`NetError::BadLoan`] if the loan is not the client's. A loan `loan`
    /// accepted is the stack's from then on: it comes back by [`NetStack::take_returned`],
    /// at once if the request is refused after all. The encoded response.
    #[allow(clippy::too_many_arguments)]
    pub fn handle(
        &mut self,
        session: &mut Session,
        msg: &[u8],
        contract: NetContract,
        area: Area,
        tx: &[u8],
        rx: impl FnOnce() -> A,
        loan: impl FnOnce(u64, u32) -> Result<u64, NetError>,
        now: Instant,
    ) -> [u8; RESPONSE_LEN] {
        let id = Request::id_of(msg);
        let response = match Request::decode(msg) {
            Err(e) => Response::plain(id, Err(e)),
            Ok(req) if req.op == Op::SendLoan => {
                Response::plain(id, self.request_lent(session, &req, tx, loan, now))
            }
            Ok(req) => self.request(session, req, contract, area, tx, rx, now),
        };
        ServerMessage::Response(response).encode()
    }

    /// A SendLoan of the client on `session` (see [`NetStack::handle`]).
    fn request_lent(
        &mut self,
        session: &Session,
        req: &Request,
        tx: &[u8],
        loan: impl FnOnce(u64, u32) -> Result<u64, NetError>,
        now: Instant,
    ) -> Result<(), NetError> {
        let c = session.client.ok_or(NetError::UnknownClient)?;
        let n = session.info.check_send_loan(req.remote, req.offset, req.len, req.lent)?;
        // Checked: the heads lie before the receive slots, within `tx`.
        let at = req.offset as usize;
        let heads = tx
            .get(at..at + n as usize * usize::from(req.lent.head))
            .ok_or(NetError::OutsideDataArea)?;
        if self.holds_loan(req.lent.loan) {
            // Lent for one request: a second would outlive the first's return.
            return Err(NetError::BadLoan);
        }
        let frame = loan(req.lent.loan, req.lent.at + req.len)?;
        let sent = self.send_lent(c, req.remote, heads, req.len, req.lent, frame, now);
        if sent.is_err() {
            self.give_back(req.lent.loan);
        }
        sent
    }

    #[allow(clippy::too_many_arguments)]
    fn request(
        &mut self,
        session: &mut Session,
        req: Request,
        contract: NetContract,
        area: Area,
        tx: &[u8],
        rx: impl FnOnce() -> A,
        now: Instant,
    ) -> Response {
        let id = req.id;
        let status = match (req.op, session.client) {
            (Op::Open, None) => {
                if u64::from(area.rx_offset) > area.len || tx.len() < area.rx_offset as usize {
                    Err(NetError::OutsideDataArea)
                } else {
                    let (c, port) = match self.open(req.remote.port, contract, rx(), now) {
                        Ok(opened) => opened,
                        Err(e) => return Response::plain(id, Err(e)),
                    };
                    let slots = self.rx_area(c).map_or(0, |a| a.len() / RX_SLOT);
                    let info = SessionInfo {
                        local: Endpoint { addr: self.config().addr, port },
                        area_base: area.base,
                        area_len: area.len,
                        rx_offset: area.rx_offset,
                        rx_slots: slots as u32,
                        max_payload: MAX_UDP_PAYLOAD as u32,
                        max_in_flight: self.config().tx_queue.min(usize::from(u16::MAX)) as u16,
                    };
                    *session = Session { client: Some(c), info };
                    return Response { id, status: Ok(()), info };
                }
            }
            (Op::Open, Some(_)) => Err(NetError::PortInUse),
            (_, None) => Err(NetError::UnknownClient),
            (Op::Send, Some(c)) => {
                session.info.check_send(req.remote, req.offset, req.len).and_then(|()| {
                    // Checked: the payload lies before the receive slots, within `tx`.
                    let at = req.offset as usize;
                    let payload =
                        tx.get(at..at + req.len as usize).ok_or(NetError::OutsideDataArea)?;
                    self.send(c, req.remote, payload, now)
                })
            }
            (Op::Release, Some(c)) => match session.info.slot_at(req.offset) {
                Some(slot) => self.release(c, u64::from(slot) * RX_SLOT as u64),
                None => Err(NetError::OutsideDataArea),
            },
            (Op::Close, Some(c)) => self.close(c, now).map(|_| *session = Session::default()),
            // Taken apart by `handle`.
            (Op::SendLoan, Some(_)) => Err(NetError::BadLoan),
        };
        Response::plain(id, status)
    }

    /// The next datagram received for the client on `session`, as the message to send it.
    pub fn next_message(&mut self, session: &Session) -> Option<[u8; RESPONSE_LEN]> {
        let r = self.next_received(session.client?)?;
        let offset = r.offset + u64::from(session.info.rx_offset);
        Some(ServerMessage::Received(Received { offset, ..r }).encode())
    }
}
