//! A domain's end of a block session, over the channels its manifest names.

use core::fmt;

use crate::area::DataArea;
use crate::client::{Client, Completion, ResponseError};
use blk_interface::protocol::{BlkError, Request, Response, SessionInfo};
use tessera::channel::{self, Receiver, Sender};

/// Why a session step failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionError {
    /// The manifest gives this domain no channel of that name (`NAME-req` or `NAME-resp`).
    NoChannel,
    /// The channel name with its suffix is longer than [`MAX_NAME`].
    NameTooLong,
    /// The driver domain is gone: a channel closed.
    Gone(Closed),
    /// A response that does not decode or answers no request in flight.
    Response(ResponseError),
    /// The client side refused to make the request (not open, too many in flight, a
    /// transfer the session cannot carry).
    Refused(BlkError),
    /// The driver answered with an error.
    Failed(BlkError),
    /// A response to another request than the one waited for.
    OtherId,
    /// The driver accepted the Open but described no session.
    NoSession,
}

/// Which of a session's channels was found closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// `NAME-req`, on a send.
    Request,
    /// `NAME-resp`, on a receive.
    Response,
}

impl Closed {
    /// `request channel closed` or `response channel closed`.
    pub fn name(self) -> &'static str {
        match self {
            Closed::Request => "request channel closed",
            Closed::Response => "response channel closed",
        }
    }
}

impl SessionError {
    /// Whether the driver domain is gone.
    pub fn is_gone(&self) -> bool {
        matches!(self, SessionError::Gone(_))
    }
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::NoChannel => f.write_str("no such channel in the manifest"),
            SessionError::NameTooLong => f.write_str("channel name too long"),
            SessionError::Gone(c) => write!(f, "the driver is gone ({})", c.name()),
            SessionError::Response(e) => write!(f, "{e}"),
            SessionError::Refused(e) => write!(f, "the client refused the request: {}", e.name()),
            SessionError::Failed(e) => write!(f, "the driver answered {}", e.name()),
            SessionError::OtherId => f.write_str("a response to another request"),
            SessionError::NoSession => f.write_str("no session after the open"),
        }
    }
}

/// The longest channel name with its `-req` or `-resp` suffix.
pub const MAX_NAME: usize = 32;

/// A domain's session with a block driver domain; see the [crate](crate) documentation.
pub struct Session {
    tx: Sender,
    rx: Receiver,
    client: Client,
    area: Option<DataArea>,
}

impl Session {
    /// Opens the channels `NAME-req` and `NAME-resp` for a client of at most `depth`
    /// requests in flight. Sends nothing: [`Session::open`] starts the session.
    pub fn connect(name: &str, depth: usize) -> Result<Session, SessionError> {
        let tx = channel::open_sender(&suffixed(name, "-req")?).ok_or(SessionError::NoChannel)?;
        let rx =
            channel::open_receiver(&suffixed(name, "-resp")?).ok_or(SessionError::NoChannel)?;
        Ok(Session { tx, rx, client: Client::new(depth.max(1)), area: None })
    }

    /// The driver domain and its endpoint this session's requests signal: what names the
    /// driver to the kernel when a frame is lent to it (`frame_lend`).
    pub fn driver(&self) -> (usize, usize) {
        self.tx.peer()
    }

    /// The protocol state, which makes the requests.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Sends `req` (made by [`Session::client`], or by hand to see the driver refuse it).
    pub fn send(&mut self, req: &Request) -> Result<(), SessionError> {
        self.tx.send(&req.encode()).map_err(|_| SessionError::Gone(Closed::Request))
    }

    /// Waits for the next response, as it came: not matched to a request in flight, so a
    /// request made by hand can be answered without touching the client's state.
    pub fn response(&mut self) -> Result<Response, SessionError> {
        let mut buf = [0u8; 64];
        let n = self.recv(&mut buf)?;
        Response::decode(&buf[..n]).map_err(|_| SessionError::Response(ResponseError::Malformed))
    }

    /// Waits for the next response and matches it to its request in flight.
    pub fn completion(&mut self) -> Result<Completion, SessionError> {
        let mut buf = [0u8; 64];
        let n = self.recv(&mut buf)?;
        self.client.on_response(&buf[..n]).map_err(SessionError::Response)
    }

    /// Sends `req` and waits for its response, with nothing else in flight; its completion
    /// (the driver's error in its status).
    pub fn call(&mut self, req: Request) -> Result<Completion, SessionError> {
        self.send(&req)?;
        let done = self.completion()?;
        if done.id != req.id {
            return Err(SessionError::OtherId);
        }
        Ok(done)
    }

    /// Opens the session: what the driver granted, whose data area [`Session::area`] then
    /// reaches.
    pub fn open(&mut self) -> Result<SessionInfo, SessionError> {
        let open = self.client.open().map_err(SessionError::Refused)?;
        self.call(open)?.status.map_err(SessionError::Failed)?;
        let info = self.client.session().ok_or(SessionError::NoSession)?;
        self.area = Some(DataArea::new(info.area_base, info.area_len));
        Ok(info)
    }

    /// Flushes the disk's write cache (nothing else in flight).
    pub fn flush(&mut self) -> Result<(), SessionError> {
        let flush = self.client.flush().map_err(SessionError::Refused)?;
        self.call(flush)?.status.map_err(SessionError::Failed)
    }

    /// Ends the session (nothing in flight); its data area is not reached any more.
    pub fn close(&mut self) -> Result<(), SessionError> {
        let close = self.client.close().map_err(SessionError::Refused)?;
        self.area = None;
        self.call(close)?.status.map_err(SessionError::Failed)
    }

    /// The data area the driver granted at the Open (`None` before it, or after the close).
    pub fn area(&mut self) -> Option<&mut DataArea> {
        self.area.as_mut()
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, SessionError> {
        self.rx.recv(buf).map_err(|_| SessionError::Gone(Closed::Response))
    }
}

/// `name` with `suffix`, as the manifest names a session's channels.
fn suffixed(name: &str, suffix: &str) -> Result<heapless::String<MAX_NAME>, SessionError> {
    let mut s = heapless::String::new();
    s.push_str(name).and_then(|()| s.push_str(suffix)).map_err(|_| SessionError::NameTooLong)?;
    Ok(s)
}
