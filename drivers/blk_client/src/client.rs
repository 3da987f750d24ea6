//! The client side of the block protocol: request ids, the requests in flight (bounded), and
//! responses matched to them.
//!
//! A client builds each request with [`Client::open`], [`Client::read`], [`Client::write`],
//! [`Client::flush`] or [`Client::close`], sends its encoding over its request channel, and
//! hands every message from its response channel to [`Client::on_response`]. Transfers are
//! checked locally against the session (the same checks as the driver's) before they cost a
//! round trip. If the channel closes, [`Client::cancel_all`] fails what is in flight with
//! [`BlkError::Closed`].

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use blk_interface::protocol::{BlkError, Op, Request, Response, SessionInfo};

/// A response matched to its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The request's id.
    pub id: u64,
    /// The request's op.
    pub op: Op,
    /// Success, or why it failed.
    pub status: Result<(), BlkError>,
}

/// Why a response was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseError {
    /// The message does not decode.
    Malformed,
    /// No request with this id is in flight: never sent, or already answered (a duplicate).
    UnexpectedId(u64),
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseError::Malformed => f.write_str("malformed response"),
            ResponseError::UnexpectedId(id) => write!(f, "response to no request in flight: {id}"),
        }
    }
}

/// One client's view of its block session; see the [module](self).
#[derive(Clone, Debug)]
pub struct Client {
    /// The requests in flight: `(id, op)`, at most one per entry.
    pending: Vec<Option<(u64, Op)>>,
    count: usize,
    next_id: u64,
    info: Option<SessionInfo>,
}

impl Client {
    /// A client with at most `max_in_flight` requests in flight (further bounded, once open,
    /// by the session's [`SessionInfo::max_in_flight`]).
    ///
    /// # Panics
    /// If `max_in_flight` is zero.
    pub fn new(max_in_flight: usize) -> Client {
        assert!(max_in_flight > 0);
        Client { pending: vec![None; max_in_flight], count: 0, next_id: 1, info: None }
    }

    /// The session, once an Open has succeeded (and until a Close has, or the channel closed).
    pub fn session(&self) -> Option<SessionInfo> {
        self.info
    }

    /// How many requests are in flight.
    pub fn in_flight(&self) -> usize {
        self.count
    }

    /// How many more requests may be sent now.
    pub fn room(&self) -> usize {
        let cap = match self.info {
            Some(info) if info.max_in_flight > 0 => {
                self.pending.len().min(usize::from(info.max_in_flight))
            }
            _ => self.pending.len(),
        };
        cap.saturating_sub(self.count)
    }

    /// Is a request with this id in flight?
    pub fn is_pending(&self, id: u64) -> bool {
        self.pending.iter().flatten().any(|&(p, _)| p == id)
    }

    /// An Open request.
    pub fn open(&mut self) -> Result<Request, BlkError> {
        self.start(Request::control(0, Op::Open))
    }

    /// A request to read `len` bytes from `sector` on into the data area at `offset`.
    pub fn read(&mut self, sector: u64, offset: u64, len: u32) -> Result<Request, BlkError> {
        self.start(Request { id: 0, op: Op::Read, sector, offset, len })
    }

    /// A request to write `len` bytes from the data area at `offset` to `sector` on.
    pub fn write(&mut self, sector: u64, offset: u64, len: u32) -> Result<Request, BlkError> {
        self.start(Request { id: 0, op: Op::Write, sector, offset, len })
    }

    /// A request to read `len` bytes (at most a page) from `sector` on into the frame lent to
    /// the driver as `loan` (lent for the device to write it).
    pub fn read_loan(&mut self, sector: u64, loan: u64, len: u32) -> Result<Request, BlkError> {
        self.start(Request { id: 0, op: Op::ReadLoan, sector, offset: loan, len })
    }

    /// A request to write `len` bytes (at most a page) from the frame lent to the driver as
    /// `loan` (lent for the device to read it) to `sector` on.
    pub fn write_loan(&mut self, sector: u64, loan: u64, len: u32) -> Result<Request, BlkError> {
        self.start(Request { id: 0, op: Op::WriteLoan, sector, offset: loan, len })
    }

    /// A Flush request.
    pub fn flush(&mut self) -> Result<Request, BlkError> {
        self.start(Request::control(0, Op::Flush))
    }

    /// A Close request; refused with [`BlkError::Busy`] while other requests are in flight
    /// (the driver would forget them).
    pub fn close(&mut self) -> Result<Request, BlkError> {
        if self.count > 0 {
            return Err(BlkError::Busy);
        }
        self.start(Request::control(0, Op::Close))
    }

    /// Checks `req`, gives it an id and records it as in flight.
    fn start(&mut self, mut req: Request) -> Result<Request, BlkError> {
        if req.op != Op::Open {
            let info = self.info.ok_or(BlkError::UnknownClient)?;
            if req.op.lends() {
                info.check_loan_transfer(req.sector, req.len)?;
            } else if req.op.transfers() {
                info.check_transfer(req.sector, req.offset, req.len)?;
            }
        }
        if self.room() == 0 {
            return Err(BlkError::Busy);
        }
        let entry = self.pending.iter().position(Option::is_none).ok_or(BlkError::Busy)?;
        // Fewer than 2^64 - 1 ids are in flight, so this ends.
        let mut id = self.next_id;
        while id == 0 || self.is_pending(id) {
            id = id.wrapping_add(1);
        }
        self.next_id = id.wrapping_add(1);
        req.id = id;
        self.pending[entry] = Some((id, req.op));
        self.count += 1;
        Ok(req)
    }

    /// Matches a response message to its request and forgets the request.
    pub fn on_response(&mut self, msg: &[u8]) -> Result<Completion, ResponseError> {
        let response = Response::decode(msg).map_err(|_| ResponseError::Malformed)?;
        self.on_decoded(response)
    }

    /// [`Client::on_response`] for a response already decoded.
    pub fn on_decoded(&mut self, response: Response) -> Result<Completion, ResponseError> {
        let id = response.id;
        let entry = self
            .pending
            .iter_mut()
            .find(|e| matches!(e, Some((p, _)) if *p == id))
            .ok_or(ResponseError::UnexpectedId(id))?;
        let (_, op) = entry.take().ok_or(ResponseError::UnexpectedId(id))?;
        self.count -= 1;
        match (op, response.status) {
            (Op::Open, Ok(())) => self.info = Some(response.info),
            (Op::Close, Ok(())) => self.info = None,
            _ => {}
        }
        Ok(Completion { id, op, status: response.status })
    }

    /// The channel closed (or the driver died): every request in flight fails with
    /// [`BlkError::Closed`], returned here, and the session is gone.
    pub fn cancel_all(&mut self) -> impl Iterator<Item = Completion> + use<> {
        self.info = None;
        self.count = 0;
        let fresh = vec![None; self.pending.len()];
        let pending = core::mem::replace(&mut self.pending, fresh);
        pending.into_iter().flatten().map(|(id, op)| Completion {
            id,
            op,
            status: Err(BlkError::Closed),
        })
    }
}
