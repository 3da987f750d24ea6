//! A client domain's UDP endpoint over a [`Transport`].

use alloc::collections::VecDeque;

use net_interface::protocol::{RX_SLOT, Received};
use net_interface::{
    Endpoint, LoanSend, NetError, Request, Response, ServerMessage, SessionInfo, StreamAccounts,
};

/// What a session needs of its channels and its data area.
pub trait Transport {
    /// Sends the encoded request `msg`, waiting while the request ring is full;
    /// [`NetError::Closed`] if the driver is gone.
    fn send(&mut self, msg: &[u8]) -> Result<(), NetError>;
    /// Waits for the next message into `buf`: its length; [`NetError::Closed`] if the driver
    /// is gone.
    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, NetError>;
    /// [`recv`](Transport::recv) with a deadline: waits until the transport's clock reaches
    /// `deadline_ns` (`u64::MAX`: never), then returns `Ok(None)` if no message came.
    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> Result<Option<usize>, NetError>;
    /// Writes `bytes` at `offset` of the data area `info` describes (the session checked that
    /// they lie inside it).
    fn write(&mut self, info: &SessionInfo, offset: u64, bytes: &[u8]);
    /// Lets `read` look at the `len` bytes at `offset` of the data area `info` describes (the
    /// session checked that they lie inside it).
    fn read<R>(
        &mut self,
        info: &SessionInfo,
        offset: u64,
        len: u32,
        read: impl FnOnce(&[u8]) -> R,
    ) -> R;
    /// The stream's accounts as the driver last published them for the session `info`
    /// describes, if a consistent copy could be read.
    fn accounts(&mut self, info: &SessionInfo) -> Option<StreamAccounts>;
    /// Lends the driver the frame behind this domain's page at `va` (page-aligned, of a
    /// stretch the domain manages) for its device to read, for one SendLoan: the loan's
    /// handle, or `None` if it cannot be lent (the default: a transport that lends nothing).
    fn lend(&mut self, va: usize) -> Option<u64> {
        let _ = va;
        None
    }
    /// Takes back loan `loan` after its SendLoan was refused (a loan the driver returned
    /// already, or never took, is no harm).
    fn take_back(&mut self, loan: u64) {
        let _ = loan;
    }
    /// Waits a little: the client waits for the driver to be done with its loans.
    fn pause(&mut self) {}
}

/// A datagram received, read in place in its receive slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// Who sent it.
    pub from: Endpoint,
    /// Its payload, in the slot.
    pub payload: &'a [u8],
}

/// One UDP endpoint of a client domain; see the [crate] documentation.
pub struct Session<T> {
    transport: T,
    info: Option<SessionInfo>,
    next_id: u64,
    /// Datagrams received while a response was awaited, in order.
    inbox: VecDeque<Received>,
}

impl<T: Transport> Session<T> {
    /// A session over `transport`, not open yet.
    pub fn new(transport: T) -> Session<T> {
        Session { transport, info: None, next_id: 1, inbox: VecDeque::new() }
    }

    /// Its transport.
    pub fn transport(&mut self) -> &mut T {
        &mut self.transport
    }

    /// What the Open granted, while the endpoint is open.
    pub fn info(&self) -> Option<SessionInfo> {
        self.info
    }

    /// Datagrams received and not yet taken by [`Session::receive`].
    pub fn waiting(&self) -> usize {
        self.inbox.len()
    }

    /// Sends `req` as it is (its id replaced by the session's next one) and waits for its
    /// response, keeping datagrams that arrive meanwhile. For requests the session does not
    /// make itself, such as ones with bad arguments.
    pub fn call(&mut self, mut req: Request) -> Result<Response, NetError> {
        req.id = self.next_id;
        self.next_id += 1;
        self.transport.send(&req.encode())?;
        let mut buf = [0u8; 64];
        loop {
            let n = self.transport.recv(&mut buf)?;
            match ServerMessage::decode(&buf[..n.min(buf.len())])? {
                ServerMessage::Received(r) => self.inbox.push_back(r),
                ServerMessage::Response(r) if r.id == req.id => return Ok(r),
                ServerMessage::Response(_) => return Err(NetError::Malformed),
            }
        }
    }

    /// Opens a UDP endpoint on `port` (0: any free port): what the driver granted.
    pub fn open(&mut self, port: u16) -> Result<SessionInfo, NetError> {
        if self.info.is_some() {
            return Err(NetError::PortInUse);
        }
        let r = self.call(Request::open(0, port))?;
        r.status?;
        self.info = Some(r.info);
        Ok(r.info)
    }

    /// Sends `payload` to `to` as one datagram (written at the start of the data area, then
    /// the Send; the driver has copied it once the response came).
    pub fn send(&mut self, to: Endpoint, payload: &[u8]) -> Result<(), NetError> {
        let info = self.info.ok_or(NetError::UnknownClient)?;
        let len = u32::try_from(payload.len()).map_err(|_| NetError::TooLarge)?;
        info.check_send(to, 0, len)?;
        self.transport.write(&info, 0, payload);
        self.call(Request::send(0, to, 0, len))?.status
    }

    /// Sends the `len` bytes of the range of a frame this domain has lent the driver that
    /// `lent` names (the loan's handle, where the range starts, how it is cut), to `to`, in
    /// datagrams whose heads are `heads` (`lent.head` bytes each, in order; written at the
    /// start of the data area), then the SendLoan: the payloads leave from the frame itself,
    /// never copied (see `net_interface::protocol`). Once the response came, the driver holds
    /// the loan if it said Ok (and returns it when its device is done) and has returned or
    /// never taken it otherwise: after [`NetError::BadLoan`] the client takes it back itself.
    pub fn send_lent(
        &mut self,
        to: Endpoint,
        heads: &[u8],
        len: u32,
        lent: LoanSend,
    ) -> Result<(), NetError> {
        let info = self.info.ok_or(NetError::UnknownClient)?;
        let n = info.check_send_loan(to, 0, len, lent)?;
        if heads.len() != n as usize * usize::from(lent.head) {
            return Err(NetError::TooLarge);
        }
        self.transport.write(&info, 0, heads);
        self.call(Request::send_loan(0, to, 0, len, lent))?.status
    }

    /// Waits until the driver is done with `n` of the session's SendLoans (its published
    /// [`StreamAccounts::loans_done`]), pausing between looks at most `pauses` times: whether
    /// it is. A page lent for a SendLoan is changed only after this, or the kernel refuses
    /// the change while the loan is out.
    pub fn wait_loans_done(&mut self, n: u64, pauses: u32) -> bool {
        for _ in 0..=pauses {
            if self.accounts().is_some_and(|a| a.loans_done >= n) {
                return true;
            }
            self.transport.pause();
        }
        false
    }

    /// Waits for the next datagram, lets `read` look at it in its receive slot, then gives
    /// the slot back: `read`'s result.
    pub fn receive<R>(&mut self, read: impl FnOnce(Datagram<'_>) -> R) -> Result<R, NetError> {
        match self.receive_until(u64::MAX, read)? {
            Some(value) => Ok(value),
            // Without a deadline the transport returns only with a message or an error.
            None => Err(NetError::Malformed),
        }
    }

    /// [`receive`](Session::receive) with a deadline: waits for the next datagram until the
    /// transport's clock (the domain's, on the target) reaches `deadline_ns` (`u64::MAX`:
    /// never); `Ok(None)` if none came by then. A datagram already received (during a call)
    /// is taken at once, whatever the deadline.
    pub fn receive_until<R>(
        &mut self,
        deadline_ns: u64,
        read: impl FnOnce(Datagram<'_>) -> R,
    ) -> Result<Option<R>, NetError> {
        let info = self.info.ok_or(NetError::UnknownClient)?;
        let r = match self.inbox.pop_front() {
            Some(r) => r,
            None => {
                let mut buf = [0u8; 64];
                let Some(n) = self.transport.recv_until(&mut buf, deadline_ns)? else {
                    return Ok(None);
                };
                match ServerMessage::decode(&buf[..n.min(buf.len())])? {
                    ServerMessage::Received(r) => r,
                    // Nothing is in flight: no response is due.
                    ServerMessage::Response(_) => return Err(NetError::Malformed),
                }
            }
        };
        if info.slot_at(r.offset).is_none() || r.len as usize > RX_SLOT {
            return Err(NetError::Malformed);
        }
        let value = self
            .transport
            .read(&info, r.offset, r.len, |payload| read(Datagram { from: r.from, payload }));
        self.call(Request::release(0, r.offset))?.status?;
        Ok(Some(value))
    }

    /// Closes the endpoint: datagrams not taken yet are dropped (the driver counts them).
    pub fn close(&mut self) -> Result<(), NetError> {
        self.info.ok_or(NetError::UnknownClient)?;
        let r = self.call(Request::close(0));
        self.info = None;
        self.inbox.clear();
        r?.status
    }

    /// The stream's accounts as the driver last published them.
    pub fn accounts(&mut self) -> Option<StreamAccounts> {
        let info = self.info?;
        self.transport.accounts(&info)
    }
}
