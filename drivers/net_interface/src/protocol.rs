//! The network protocol's wire format: fixed-size little-endian messages that fit one
//! IO-channel slot's payload ([`MAX_PAYLOAD`] bytes for the default 64-byte slot), laid out as
//! the block protocol's.
//!
//! A [`Request`] (client to driver) is [`REQUEST_LEN`] bytes:
//!
//! | bytes  | field    | meaning                                                          |
//! |--------|----------|------------------------------------------------------------------|
//! | 0..8   | `id`     | chosen by the client, echoed in the response                     |
//! | 8      | `op`     | [`Op`] code                                                      |
//! | 9..10  | reserved | zero                                                             |
//! | 10..12 | `port`   | Open: the local port (0: any free one); Send: the remote port    |
//! | 12..16 | `addr`   | Send: the remote IPv4 address                                    |
//! | 16..20 | `len`    | Send: the payload's length; SendLoan: the lent range's length    |
//! | 20..22 | `head`   | SendLoan: the bytes of each datagram's head in the data area     |
//! | 22..24 | `chunk`  | SendLoan: the most bytes of the lent range each datagram carries |
//! | 24..32 | `offset` | Send: the payload's offset in the data area; Release: the slot's;|
//! |        |          | SendLoan: the first head's offset in the data area               |
//! | 32..40 | `loan`   | SendLoan: the loan's handle (the kernel's `frame_lend`)          |
//! | 40..44 | `at`     | SendLoan: where the lent range starts in the frame               |
//! | 44..48 | reserved | zero                                                             |
//!
//! Fields an op does not use are zero. Open and Close carry only `id`, `op` (and Open `port`).
//!
//! **SendLoan** sends a payload without copying it through the data area: the client lends the
//! driver the frame behind a page of its own for the device to read (`frame_lend`) and names
//! the loan and a range of it (`at`, `len`, within [`LOAN_MAX`] bytes). The range is cut into
//! `ceil(len / chunk)` datagrams (at most [`MAX_LOAN_DATAGRAMS`]), all to `addr:port`;
//! datagram `i` is the `head` bytes at `offset + i * head` in the data area (a protocol's own
//! header, which the client writes there) followed by bytes `at + i * chunk ..` of the frame,
//! so the NIC gathers the payload straight from the lent frame. The driver checks the loan is
//! the client's (the kernel's `loan_address`) and returns it (`frame_return`) once every
//! datagram of the request has left the device, or at once if it refuses the request after
//! that check, whatever becomes of the client: a loan it accepted is never left out. A loan
//! it cannot use ([`NetError::BadLoan`]) it leaves alone (the client takes it back). Such a
//! datagram's UDP checksum is 0 ("none", which IPv4 allows): the driver never sees its bytes;
//! the protocol above checks its own payload end to end (RPP's CRC-32 does).
//!
//! A [`ServerMessage`] (driver to client) is [`RESPONSE_LEN`] bytes, a response to a request or
//! a datagram received:
//!
//! | bytes  | field           | Response                         | Received                  |
//! |--------|-----------------|----------------------------------|---------------------------|
//! | 0..8   | `id`            | the request's id                 | zero                      |
//! | 8      | `kind`          | 1                                | 2                         |
//! | 9      | reserved        | zero                             | zero                      |
//! | 10..12 | `status`        | 0, or a [`NetError`] code        | zero                      |
//! | 12..14 | `port`          | Open: the bound local port       | the sender's port         |
//! | 14..16 | `max_in_flight` | Open: the cap on queued sends    | zero                      |
//! | 16..20 | `addr`          | Open: the local IPv4 address     | the sender's address      |
//! | 20..24 | `len`           | Open: the largest payload        | the payload's length      |
//! | 24..32 | `offset`        | Open: the data area's address    | the slot's offset         |
//! | 32..40 | `area_len`      | Open: the data area's length     | zero                      |
//! | 40..44 | `rx_slots`      | Open: receive slots in the area  | zero                      |
//! | 44..48 | `rx_offset`     | Open: the first slot's offset    | zero                      |
//!
//! Received datagrams are in the client's data area, in receive slots of [`RX_SLOT`] bytes
//! from `rx_offset` on; the client reads one, then gives its slot back with Release. While
//! every slot is taken, datagrams for the client are dropped and counted. The rest of the area
//! (before `rx_offset`) holds the payloads of the client's sends.
//!
//! A stream's accounts ([`StreamAccounts`]) are not a message: the driver keeps them in the
//! page after the client's data area, as [`ACCOUNT_WORDS`] little-endian words: a sequence
//! number (odd while the driver is writing), then the words of [`StreamAccounts::words`].
//!
//! Decoding never panics: a message of the wrong length, an unknown op, kind or status code,
//! a non-zero reserved byte or a field that must be zero and is not is [`NetError::Malformed`].

use io_protocol::le::{is_zero, put_u16, put_u32, put_u64, u16_at, u32_at, u64_at};

use crate::frame::{Endpoint, Ipv4Addr, MAX_UDP_PAYLOAD};

/// The largest message an IO channel slot carries with the default slot size of 64 bytes.
pub const MAX_PAYLOAD: usize = 64 - 8;

/// The length of an encoded [`Request`].
pub const REQUEST_LEN: usize = 48;

/// The length of an encoded [`ServerMessage`].
pub const RESPONSE_LEN: usize = 48;

/// The size of a receive slot in a data area: the largest payload (a multiple of 64 bytes).
pub const RX_SLOT: usize = MAX_UDP_PAYLOAD;

const _: () = assert!(RX_SLOT.is_multiple_of(64));

/// The most bytes a SendLoan's range covers, and the frame's size: one page.
pub const LOAN_MAX: u32 = 4096;

/// The most datagrams one SendLoan sends.
pub const MAX_LOAN_DATAGRAMS: u32 = 4;

const _: () = assert!(REQUEST_LEN <= MAX_PAYLOAD && RESPONSE_LEN <= MAX_PAYLOAD);

io_protocol::wire_codes! {
    /// What a request asks for.
    pub enum Op: u8 {
        /// Open a UDP endpoint on `port` (0: any free port); the response carries the session.
        Open = 1,
        /// Send the `len` bytes at `offset` in the data area as one datagram to `addr:port`.
        Send = 2,
        /// The client has read the datagram in the receive slot at `offset`: the slot is free.
        Release = 3,
        /// Close the endpoint: datagrams still queued either way are dropped (and counted).
        Close = 4,
        /// Send the range `at .. at + len` of the frame lent as `loan`, in datagrams of `head`
        /// bytes of the data area from `offset` on and up to `chunk` bytes of the frame each,
        /// to `addr:port` (see the [module](self)).
        SendLoan = 5,
    }
}

io_protocol::wire_codes! {
    /// Why a network request failed. The codes ([`NetError::code`]) are on the wire and never
    /// change (0 means success).
    pub enum NetError: u16 {
        /// The message could not be decoded.
        Malformed = 1,
        /// The client has no open endpoint (before Open, after Close).
        UnknownClient = 2,
        /// Another client holds the port, or the client already has an endpoint.
        PortInUse = 3,
        /// No free port is left for an Open of port 0.
        NoFreePort = 4,
        /// The payload is longer than one frame carries ([`SessionInfo::max_payload`]).
        TooLarge = 5,
        /// `offset + len` goes beyond the client's data area (or overflows), or a Release
        /// names no slot the client holds.
        OutsideDataArea = 6,
        /// The client's transmit queue is full ([`SessionInfo::max_in_flight`]).
        Busy = 7,
        /// The endpoint or the driver is gone.
        Closed = 8,
        /// The destination is not a host address (0.0.0.0, a broadcast) or port 0.
        BadAddress = 9,
        /// The client's network contract was not admitted beside the others.
        NotAdmitted = 10,
        /// The link is down.
        LinkDown = 11,
        /// The loan a SendLoan names is not one this client lent the driver, its range goes
        /// beyond the frame, or the driver takes no loans: the client takes it back.
        BadLoan = 12,
        /// A SendLoan's destination is not on the link or its hardware address is not known
        /// yet (a Send through the data area resolves it): the client sends another way.
        Unresolved = 13,
    }
}

/// A client's request, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Chosen by the client, echoed in the response.
    pub id: u64,
    /// What is asked.
    pub op: Op,
    /// Open: the local port (0: any); Send: the destination (else zero).
    pub remote: Endpoint,
    /// Send: the payload's offset; Release: the slot's offset (else 0).
    pub offset: u64,
    /// Send: the payload's length; SendLoan: the lent range's (else 0).
    pub len: u32,
    /// SendLoan: the loan and how its range is cut (else all zero).
    pub lent: LoanSend,
}

/// What a SendLoan names besides the destination, the heads' offset and the range's length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoanSend {
    /// The loan's handle.
    pub loan: u64,
    /// Where the range starts in the lent frame.
    pub at: u32,
    /// Bytes of each datagram's head, from the data area.
    pub head: u16,
    /// The most bytes of the range each datagram carries.
    pub chunk: u16,
}

impl LoanSend {
    /// How many datagrams a range of `len` bytes is cut into.
    pub fn datagrams(&self, len: u32) -> u32 {
        if self.chunk == 0 { 0 } else { len.div_ceil(u32::from(self.chunk)) }
    }

    /// The range `(start, len)` in the frame of datagram `i` of a range of `len` bytes.
    pub fn piece(&self, len: u32, i: u32) -> (u32, u32) {
        let from = i * u32::from(self.chunk);
        (self.at + from, len.saturating_sub(from).min(u32::from(self.chunk)))
    }
}

impl Request {
    /// An Open of `port` (0: any free port).
    pub fn open(id: u64, port: u16) -> Request {
        let remote = Endpoint { addr: Ipv4Addr::UNSPECIFIED, port };
        Request { id, op: Op::Open, remote, offset: 0, len: 0, lent: LoanSend::default() }
    }

    /// A Send of the `len` bytes at `offset` to `to`.
    pub fn send(id: u64, to: Endpoint, offset: u64, len: u32) -> Request {
        Request { id, op: Op::Send, remote: to, offset, len, lent: LoanSend::default() }
    }

    /// A SendLoan of `len` bytes of the loan `lent` names to `to`, each datagram's head at
    /// `offset + i * lent.head` in the data area.
    pub fn send_loan(id: u64, to: Endpoint, offset: u64, len: u32, lent: LoanSend) -> Request {
        Request { id, op: Op::SendLoan, remote: to, offset, len, lent }
    }

    /// A Release of the receive slot at `offset`.
    pub fn release(id: u64, offset: u64) -> Request {
        let remote = Endpoint::default();
        Request { id, op: Op::Release, remote, offset, len: 0, lent: LoanSend::default() }
    }

    /// A Close.
    pub fn close(id: u64) -> Request {
        let (remote, lent) = (Endpoint::default(), LoanSend::default());
        Request { id, op: Op::Close, remote, offset: 0, len: 0, lent }
    }

    /// The request's wire form.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0; REQUEST_LEN];
        put_u64(&mut b, 0, self.id);
        b[8] = self.op.code();
        put_u16(&mut b, 10, self.remote.port);
        b[12..16].copy_from_slice(&self.remote.addr.0);
        put_u32(&mut b, 16, self.len);
        put_u16(&mut b, 20, self.lent.head);
        put_u16(&mut b, 22, self.lent.chunk);
        put_u64(&mut b, 24, self.offset);
        put_u64(&mut b, 32, self.lent.loan);
        put_u32(&mut b, 40, self.lent.at);
        b
    }

    /// Decodes a request; any deviation from the format is [`NetError::Malformed`].
    pub fn decode(msg: &[u8]) -> Result<Request, NetError> {
        let b: &[u8; REQUEST_LEN] = msg.try_into().map_err(|_| NetError::Malformed)?;
        let op = Op::from_code(b[8]).ok_or(NetError::Malformed)?;
        if b[9] != 0 || !is_zero(&b[44..48]) {
            return Err(NetError::Malformed);
        }
        let req = Request {
            id: u64_at(b, 0),
            op,
            remote: Endpoint { addr: Ipv4Addr([b[12], b[13], b[14], b[15]]), port: u16_at(b, 10) },
            len: u32_at(b, 16),
            offset: u64_at(b, 24),
            lent: LoanSend {
                loan: u64_at(b, 32),
                at: u32_at(b, 40),
                head: u16_at(b, 20),
                chunk: u16_at(b, 22),
            },
        };
        let no_loan = req.lent == LoanSend::default();
        let zero_addr = req.remote.addr == Ipv4Addr::UNSPECIFIED;
        let well_formed = match op {
            Op::Open => zero_addr && req.len == 0 && req.offset == 0 && no_loan,
            Op::Send => no_loan,
            Op::Release => req.remote == Endpoint::default() && req.len == 0 && no_loan,
            Op::Close => {
                req.remote == Endpoint::default() && req.len == 0 && req.offset == 0 && no_loan
            }
            Op::SendLoan => req.len > 0 && req.lent.chunk > 0,
        };
        if !well_formed {
            return Err(NetError::Malformed);
        }
        Ok(req)
    }

    /// The operation a message names (its ninth byte), without decoding the rest: a cheap look
    /// for a loop that treats one operation apart; `None` if it names none.
    pub fn op_of(msg: &[u8]) -> Option<Op> {
        msg.get(8).copied().and_then(Op::from_code)
    }

    /// The id of a message that may not decode (its first 8 bytes, or 0 if it is shorter), so
    /// that a [`NetError::Malformed`] response can still name it.
    pub fn id_of(msg: &[u8]) -> u64 {
        io_protocol::le::leading_id(msg)
    }
}

/// What a session offers, sent in the response to Open (all zero in other responses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// The endpoint opened: the node's address and the bound port.
    pub local: Endpoint,
    /// The data area's address (Tessera has one address space: the driver's is the client's).
    pub area_base: u64,
    /// The data area's length in bytes.
    pub area_len: u64,
    /// The offset of the first receive slot in the area.
    pub rx_offset: u32,
    /// How many receive slots of [`RX_SLOT`] bytes follow it.
    pub rx_slots: u32,
    /// The largest payload of a Send.
    pub max_payload: u32,
    /// How many sends the client may have queued at once.
    pub max_in_flight: u16,
}

impl SessionInfo {
    /// Checks a Send of `len` bytes at `offset` to `to`, in the order the errors are reported:
    /// [`NetError::BadAddress`], [`NetError::TooLarge`], [`NetError::OutsideDataArea`] (the
    /// payload must lie before the receive slots). Overflow-safe. An empty datagram is valid.
    pub fn check_send(&self, to: Endpoint, offset: u64, len: u32) -> Result<(), NetError> {
        let a = to.addr.0;
        if to.port == 0 || to.addr == Ipv4Addr::UNSPECIFIED || a == [255; 4] || a[0] >= 224 {
            return Err(NetError::BadAddress);
        }
        if len > self.max_payload {
            return Err(NetError::TooLarge);
        }
        let limit = u64::from(self.rx_offset).min(self.area_len);
        if offset.checked_add(u64::from(len)).is_none_or(|end| end > limit) {
            return Err(NetError::OutsideDataArea);
        }
        Ok(())
    }

    /// Checks a SendLoan of the `len` bytes of `lent`'s range, heads from `offset` on, to
    /// `to`, in the order the errors are reported: [`NetError::BadAddress`],
    /// [`NetError::TooLarge`] (a datagram's head and chunk beyond the largest payload, or more
    /// than [`MAX_LOAN_DATAGRAMS`] datagrams), [`NetError::BadLoan`] (the range beyond
    /// [`LOAN_MAX`]), [`NetError::OutsideDataArea`] (the heads beyond the send bytes). The
    /// number of datagrams. Overflow-safe. Whether the loan is the client's is the kernel's
    /// to say, to the driver.
    pub fn check_send_loan(
        &self,
        to: Endpoint,
        offset: u64,
        len: u32,
        lent: LoanSend,
    ) -> Result<u32, NetError> {
        self.check_send(to, 0, 0)?;
        let n = lent.datagrams(len);
        if u32::from(lent.head) + u32::from(lent.chunk) > self.max_payload
            || n == 0
            || n > MAX_LOAN_DATAGRAMS
        {
            return Err(NetError::TooLarge);
        }
        if lent.at.checked_add(len).is_none_or(|end| end > LOAN_MAX) {
            return Err(NetError::BadLoan);
        }
        let heads = u64::from(n) * u64::from(lent.head);
        let limit = u64::from(self.rx_offset).min(self.area_len);
        if offset.checked_add(heads).is_none_or(|end| end > limit) {
            return Err(NetError::OutsideDataArea);
        }
        Ok(n)
    }

    /// The receive slot at `offset` in the area, if it names one.
    pub fn slot_at(&self, offset: u64) -> Option<u32> {
        let rel = offset.checked_sub(u64::from(self.rx_offset))?;
        let slot = RX_SLOT as u64;
        (rel.is_multiple_of(slot) && rel / slot < u64::from(self.rx_slots))
            .then(|| (rel / slot) as u32)
    }
}

/// The driver's answer to one request, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// The request's id.
    pub id: u64,
    /// Success, or why the request failed.
    pub status: Result<(), NetError>,
    /// For a successful Open, the session; otherwise all zero.
    pub info: SessionInfo,
}

impl Response {
    /// A response without session information (everything but a successful Open).
    pub fn plain(id: u64, status: Result<(), NetError>) -> Response {
        Response { id, status, info: SessionInfo::default() }
    }
}

/// A datagram the driver has put in one of the client's receive slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Who sent it.
    pub from: Endpoint,
    /// The slot's offset in the data area.
    pub offset: u64,
    /// The payload's length.
    pub len: u32,
}

/// A message from the driver to a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerMessage {
    /// The answer to a request.
    Response(Response),
    /// A datagram arrived for the client's endpoint.
    Received(Received),
}

const KIND_RESPONSE: u8 = 1;
const KIND_RECEIVED: u8 = 2;

impl ServerMessage {
    /// The message's wire form.
    pub fn encode(&self) -> [u8; RESPONSE_LEN] {
        let mut b = [0; RESPONSE_LEN];
        match self {
            ServerMessage::Response(r) => {
                let status = match r.status {
                    Ok(()) => 0,
                    Err(e) => e.code(),
                };
                let i = &r.info;
                put_u64(&mut b, 0, r.id);
                b[8] = KIND_RESPONSE;
                put_u16(&mut b, 10, status);
                put_u16(&mut b, 12, i.local.port);
                put_u16(&mut b, 14, i.max_in_flight);
                b[16..20].copy_from_slice(&i.local.addr.0);
                put_u32(&mut b, 20, i.max_payload);
                put_u64(&mut b, 24, i.area_base);
                put_u64(&mut b, 32, i.area_len);
                put_u32(&mut b, 40, i.rx_slots);
                put_u32(&mut b, 44, i.rx_offset);
            }
            ServerMessage::Received(r) => {
                b[8] = KIND_RECEIVED;
                put_u16(&mut b, 12, r.from.port);
                b[16..20].copy_from_slice(&r.from.addr.0);
                put_u32(&mut b, 20, r.len);
                put_u64(&mut b, 24, r.offset);
            }
        }
        b
    }

    /// Decodes a message; any deviation from the format is [`NetError::Malformed`].
    pub fn decode(msg: &[u8]) -> Result<ServerMessage, NetError> {
        let b: &[u8; RESPONSE_LEN] = msg.try_into().map_err(|_| NetError::Malformed)?;
        if b[9] != 0 {
            return Err(NetError::Malformed);
        }
        let addr = Ipv4Addr([b[16], b[17], b[18], b[19]]);
        match b[8] {
            KIND_RESPONSE => {
                let status = match u16_at(b, 10) {
                    0 => Ok(()),
                    code => Err(NetError::from_code(code).ok_or(NetError::Malformed)?),
                };
                let info = SessionInfo {
                    local: Endpoint { addr, port: u16_at(b, 12) },
                    max_in_flight: u16_at(b, 14),
                    max_payload: u32_at(b, 20),
                    area_base: u64_at(b, 24),
                    area_len: u64_at(b, 32),
                    rx_slots: u32_at(b, 40),
                    rx_offset: u32_at(b, 44),
                };
                if status.is_err() && info != SessionInfo::default() {
                    return Err(NetError::Malformed);
                }
                Ok(ServerMessage::Response(Response { id: u64_at(b, 0), status, info }))
            }
            KIND_RECEIVED => {
                if b[0..12] != [0, 0, 0, 0, 0, 0, 0, 0, KIND_RECEIVED, 0, 0, 0]
                    || !is_zero(&b[14..16])
                    || !is_zero(&b[32..48])
                {
                    return Err(NetError::Malformed);
                }
                Ok(ServerMessage::Received(Received {
                    from: Endpoint { addr, port: u16_at(b, 12) },
                    len: u32_at(b, 20),
                    offset: u64_at(b, 24),
                }))
            }
            _ => Err(NetError::Malformed),
        }
    }
}

/// A client's network contract: in every `period_ns` its transmit stream is guaranteed
/// `slice_ns` of link time; with `extra` it may also use the link's slack; `latency_ns` is how
/// soon it should be served once it has a datagram queued. The same shape as the disk's
/// contract (`net = { period, slice, extra }` in a manifest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetContract {
    /// The period, in nanoseconds.
    pub period_ns: u64,
    /// The link time guaranteed in each period, in nanoseconds.
    pub slice_ns: u64,
    /// Whether the stream may use slack time.
    pub extra: bool,
    /// The latency hint, in nanoseconds.
    pub latency_ns: u64,
}

/// How many 64-bit words a stream's accounts take after its data area (the sequence number
/// first).
pub const ACCOUNT_WORDS: usize = 16;

/// A stream's accounts, as its driver publishes them (see the [module](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamAccounts {
    /// Datagrams handed to the NIC.
    pub packets_sent: u64,
    /// Their payload bytes.
    pub bytes_sent: u64,
    /// Datagrams put in the client's receive slots.
    pub packets_received: u64,
    /// Their payload bytes.
    pub bytes_received: u64,
    /// Sends refused because the transmit queue was full.
    pub dropped_tx_full: u64,
    /// Datagrams for the client dropped because every receive slot was taken.
    pub dropped_rx_full: u64,
    /// Datagrams queued to send when the endpoint closed.
    pub dropped_tx_closed: u64,
    /// Datagrams received but not released when the endpoint closed.
    pub dropped_rx_closed: u64,
    /// Datagrams the stack could not send (no route, NIC refused, its socket full, or waited
    /// too long for its neighbour's hardware address).
    pub dropped_tx_error: u64,
    /// Link time used on its slices, in nanoseconds.
    pub guaranteed_ns: u64,
    /// Link time used on slack time, in nanoseconds.
    pub extra_ns: u64,
    /// Periods completed.
    pub periods: u64,
    /// Periods that ended with slice left while it had datagrams queued.
    pub deadlines_missed: u64,
    /// Of the datagrams sent, those whose payload the NIC gathered from a lent frame
    /// (SendLoan).
    pub lent_sent: u64,
    /// SendLoans whose loan the driver is done with (returned, or about to be in the pass
    /// that publishes this): a client waits for this before it changes a page it lent.
    pub loans_done: u64,
}

impl StreamAccounts {
    /// The accounts' words after the sequence number.
    pub fn words(&self) -> [u64; ACCOUNT_WORDS - 1] {
        [
            self.packets_sent,
            self.bytes_sent,
            self.packets_received,
            self.bytes_received,
            self.dropped_tx_full,
            self.dropped_rx_full,
            self.dropped_tx_closed,
            self.dropped_rx_closed,
            self.dropped_tx_error,
            self.guaranteed_ns,
            self.extra_ns,
            self.periods,
            self.deadlines_missed,
            self.lent_sent,
            self.loans_done,
        ]
    }

    /// The accounts from their words after the sequence number.
    pub fn from_words(w: [u64; ACCOUNT_WORDS - 1]) -> StreamAccounts {
        StreamAccounts {
            packets_sent: w[0],
            bytes_sent: w[1],
            packets_received: w[2],
            bytes_received: w[3],
            dropped_tx_full: w[4],
            dropped_rx_full: w[5],
            dropped_tx_closed: w[6],
            dropped_rx_closed: w[7],
            dropped_tx_error: w[8],
            guaranteed_ns: w[9],
            extra_ns: w[10],
            periods: w[11],
            deadlines_missed: w[12],
            lent_sent: w[13],
            loans_done: w[14],
        }
    }
}
