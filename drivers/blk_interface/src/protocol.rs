//! The block protocol's wire format: fixed-size little-endian messages that fit one IO-channel
//! slot's payload ([`MAX_PAYLOAD`] bytes for the default 64-byte slot).
//!
//! A [`Request`] is [`REQUEST_LEN`] bytes:
//!
//! | bytes  | field    | meaning                                                    |
//! |--------|----------|------------------------------------------------------------|
//! | 0..8   | `id`     | chosen by the client, echoed in the response               |
//! | 8      | `op`     | [`Op`] code                                                |
//! | 9..12  | reserved | zero                                                       |
//! | 12..16 | `len`    | bytes to transfer (Read, Write)                            |
//! | 16..24 | `sector` | first sector (Read, Write)                                 |
//! | 24..32 | `offset` | byte offset of the buffer in the client's data area, or for  |
//! |        |          | ReadLoan and WriteLoan the loan's handle                   |
//!
//! Open, Close and Flush carry zero `len`, `sector` and `offset`.
//!
//! **Loans.** ReadLoan and WriteLoan move data straight between the disk and a frame the client
//! lent the driver for the request (the kernel's `frame_lend`, for the device to write it for
//! a ReadLoan, to read it for a WriteLoan), not through the data area: `offset` names the loan,
//! and the transfer starts at the frame's first byte, at most [`LOAN_MAX`] bytes. The driver
//! checks the loan is the client's (the kernel's `loan_address`, which also gives the frame's
//! device address) and returns it once the device is done with the frame, before it answers,
//! whatever the answer: a request whose loan it accepted never leaves the loan out. A loan it
//! cannot use ([`BlkError::BadLoan`]) it leaves alone (the client takes it back). Clients that
//! lend nothing use Read and Write as before.
//!
//! A [`Response`] is [`RESPONSE_LEN`] bytes:
//!
//! | bytes  | field           | meaning                                              |
//! |--------|-----------------|------------------------------------------------------|
//! | 0..8   | `id`            | the request's id                                     |
//! | 8..10  | `status`        | 0 for success, else a [`BlkError`] code              |
//! | 10..12 | reserved        | zero                                                 |
//! | 12..14 | `max_in_flight` | per-client cap on requests in flight (Open only)     |
//! | 14..16 | reserved        | zero                                                 |
//! | 16..24 | `area_base`     | the data area's address (Open only)                  |
//! | 24..32 | `area_len`      | the data area's length in bytes (Open only)          |
//! | 32..40 | `capacity`      | the disk's capacity in sectors (Open only)           |
//! | 40..44 | `sector_size`   | bytes per sector (Open only)                         |
//! | 44..48 | `max_transfer`  | largest Read or Write in bytes (Open only)           |
//!
//! A stream's disk-time accounts ([`StreamAccounts`]) are not a message: the driver keeps
//! them in the page after the client's data area (at `area_base + area_len`), which the client
//! may read at any time, as [`ACCOUNT_WORDS`] little-endian words: a sequence number (odd
//! while the driver is writing), then guaranteed and extra disk time in nanoseconds, periods
//! completed and deadlines missed. A driver that does not schedule by contracts leaves them
//! zero.
//!
//! Decoding never panics: a message of the wrong length, an unknown op or status code, a
//! non-zero reserved byte or a field that must be zero and is not is [`BlkError::Malformed`].

use io_protocol::le::{is_zero, put_u16, put_u32, put_u64, u16_at, u32_at, u64_at};

/// The largest message an IO channel slot carries with the default slot size of 64 bytes (a
/// slot's first 8 bytes hold the message's length).
pub const MAX_PAYLOAD: usize = 64 - 8;

/// The length of an encoded [`Request`].
pub const REQUEST_LEN: usize = 32;

/// The length of an encoded [`Response`].
pub const RESPONSE_LEN: usize = 48;

const _: () = assert!(REQUEST_LEN <= MAX_PAYLOAD && RESPONSE_LEN <= MAX_PAYLOAD);

io_protocol::wire_codes! {
    /// What a request asks for.
    pub enum Op: u8 {
        /// Start the session: the response carries the data area and the disk's geometry.
        Open = 1,
        /// Read `len` bytes from `sector` on into the data area at `offset`.
        Read = 2,
        /// Write `len` bytes from the data area at `offset` to `sector` on.
        Write = 3,
        /// Make every write completed before the flush was submitted durable.
        Flush = 4,
        /// End the session: requests still in flight are forgotten (their responses never
        /// come).
        Close = 5,
        /// Read `len` bytes from `sector` on into the frame lent as loan `offset`.
        ReadLoan = 6,
        /// Write `len` bytes from the frame lent as loan `offset` to `sector` on.
        WriteLoan = 7,
    }
}

impl Op {
    /// Does the op move data (and so name a sector range and a buffer)?
    pub fn transfers(self) -> bool {
        matches!(self, Op::Read | Op::Write | Op::ReadLoan | Op::WriteLoan)
    }

    /// Does the op move data to or from a lent frame (its `offset` naming the loan)?
    pub fn lends(self) -> bool {
        matches!(self, Op::ReadLoan | Op::WriteLoan)
    }
}

/// The longest transfer to or from a lent frame: one page.
pub const LOAN_MAX: u32 = 4096;

io_protocol::wire_codes! {
    /// Why a block request failed. The numeric codes ([`BlkError::code`]) are part of the wire
    /// format and never change (0 means success).
    pub enum BlkError: u16 {
        /// The sector range goes beyond the disk's capacity (or overflows).
        OutOfRange = 1,
        /// The length or the data-area offset is not a multiple of the sector size.
        Misaligned = 2,
        /// A Read or Write of zero bytes.
        ZeroLength = 3,
        /// `offset + len` goes beyond the client's data area (or overflows).
        OutsideDataArea = 4,
        /// The client has no open session: the driver never opened one for it, or the client
        /// sent a request before Open or after Close.
        UnknownClient = 5,
        /// The transfer is longer than the driver's largest ([`SessionInfo::max_transfer`]).
        TooLarge = 6,
        /// The client already has its cap of requests in flight
        /// ([`SessionInfo::max_in_flight`]), or the driver's queue is full.
        Busy = 7,
        /// The device reported an error.
        Device = 8,
        /// The session or the driver is gone.
        Closed = 9,
        /// The message could not be decoded.
        Malformed = 10,
        /// The loan a ReadLoan or WriteLoan names is not one this client lent the driver, or
        /// the driver takes no loans: the client takes it back.
        BadLoan = 11,
    }
}

/// A client's request, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Chosen by the client, echoed in the response.
    pub id: u64,
    /// What is asked.
    pub op: Op,
    /// The first sector (Read, Write; else 0).
    pub sector: u64,
    /// The buffer's byte offset in the client's data area (Read, Write; else 0).
    pub offset: u64,
    /// Bytes to transfer (Read, Write; else 0).
    pub len: u32,
}

impl Request {
    /// A request without a transfer (Open, Flush, Close).
    pub fn control(id: u64, op: Op) -> Request {
        Request { id, op, sector: 0, offset: 0, len: 0 }
    }

    /// The request's wire form.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0; REQUEST_LEN];
        put_u64(&mut b, 0, self.id);
        b[8] = self.op.code();
        put_u32(&mut b, 12, self.len);
        put_u64(&mut b, 16, self.sector);
        put_u64(&mut b, 24, self.offset);
        b
    }

    /// Decodes a request; any deviation from the format is [`BlkError::Malformed`].
    pub fn decode(msg: &[u8]) -> Result<Request, BlkError> {
        let b: &[u8; REQUEST_LEN] = msg.try_into().map_err(|_| BlkError::Malformed)?;
        let op = Op::from_code(b[8]).ok_or(BlkError::Malformed)?;
        if !is_zero(&b[9..12]) {
            return Err(BlkError::Malformed);
        }
        let req = Request {
            id: u64_at(b, 0),
            op,
            len: u32_at(b, 12),
            sector: u64_at(b, 16),
            offset: u64_at(b, 24),
        };
        if !op.transfers() && (req.len != 0 || req.sector != 0 || req.offset != 0) {
            return Err(BlkError::Malformed);
        }
        Ok(req)
    }

    /// The id of a message that may not decode (its first 8 bytes, or 0 if it is shorter), so
    /// that a [`BlkError::Malformed`] response can still name it.
    pub fn id_of(msg: &[u8]) -> u64 {
        io_protocol::le::leading_id(msg)
    }
}

/// What a session offers, sent in the response to Open (all zero in other responses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// The data area's address. Tessera has one address space, so the driver's address of the
    /// area is the client's too.
    pub area_base: u64,
    /// The data area's length in bytes.
    pub area_len: u64,
    /// Bytes per sector.
    pub sector_size: u32,
    /// The disk's capacity in sectors.
    pub capacity: u64,
    /// The longest Read or Write in bytes.
    pub max_transfer: u32,
    /// How many requests the client may have in flight at once.
    pub max_in_flight: u16,
}

impl SessionInfo {
    /// Checks a transfer of `len` bytes at `sector` from or to the data area at `offset`,
    /// in the order the errors are reported: [`BlkError::ZeroLength`],
    /// [`BlkError::Misaligned`], [`BlkError::TooLarge`], [`BlkError::OutsideDataArea`],
    /// [`BlkError::OutOfRange`]. Overflow-safe.
    pub fn check_transfer(&self, sector: u64, offset: u64, len: u32) -> Result<(), BlkError> {
        if len == 0 {
            return Err(BlkError::ZeroLength);
        }
        let ss = u64::from(self.sector_size.max(1));
        let len = u64::from(len);
        if len % ss != 0 || !offset.is_multiple_of(ss) {
            return Err(BlkError::Misaligned);
        }
        if len > u64::from(self.max_transfer) {
            return Err(BlkError::TooLarge);
        }
        self.check_transfer_to(sector, offset, len, self.area_len)
    }

    /// Checks a transfer of `len` bytes at `sector` to or from a lent frame, as
    /// [`SessionInfo::check_transfer`] does with the frame for the data area:
    /// [`BlkError::OutsideDataArea`] if it is longer than [`LOAN_MAX`].
    pub fn check_loan_transfer(&self, sector: u64, len: u32) -> Result<(), BlkError> {
        if len == 0 {
            return Err(BlkError::ZeroLength);
        }
        let ss = u64::from(self.sector_size.max(1));
        if u64::from(len) % ss != 0 {
            return Err(BlkError::Misaligned);
        }
        if len > self.max_transfer {
            return Err(BlkError::TooLarge);
        }
        self.check_transfer_to(sector, 0, u64::from(len), u64::from(LOAN_MAX))
    }

    fn check_transfer_to(
        &self,
        sector: u64,
        offset: u64,
        len: u64,
        room: u64,
    ) -> Result<(), BlkError> {
        let ss = u64::from(self.sector_size.max(1));
        if offset.checked_add(len).is_none_or(|end| end > room) {
            return Err(BlkError::OutsideDataArea);
        }
        if sector.checked_add(len / ss).is_none_or(|end| end > self.capacity) {
            return Err(BlkError::OutOfRange);
        }
        Ok(())
    }
}

/// The driver's answer to one request, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// The request's id.
    pub id: u64,
    /// Success, or why the request failed.
    pub status: Result<(), BlkError>,
    /// For a successful Open, the session; otherwise all zero.
    pub info: SessionInfo,
}

impl Response {
    /// A response without session information (everything but a successful Open).
    pub fn plain(id: u64, status: Result<(), BlkError>) -> Response {
        Response { id, status, info: SessionInfo::default() }
    }

    /// The response's wire form.
    pub fn encode(&self) -> [u8; RESPONSE_LEN] {
        let mut b = [0; RESPONSE_LEN];
        let status = match self.status {
            Ok(()) => 0,
            Err(e) => e.code(),
        };
        put_u64(&mut b, 0, self.id);
        put_u16(&mut b, 8, status);
        put_u16(&mut b, 12, self.info.max_in_flight);
        put_u64(&mut b, 16, self.info.area_base);
        put_u64(&mut b, 24, self.info.area_len);
        put_u64(&mut b, 32, self.info.capacity);
        put_u32(&mut b, 40, self.info.sector_size);
        put_u32(&mut b, 44, self.info.max_transfer);
        b
    }

    /// Decodes a response; any deviation from the format is [`BlkError::Malformed`].
    pub fn decode(msg: &[u8]) -> Result<Response, BlkError> {
        let b: &[u8; RESPONSE_LEN] = msg.try_into().map_err(|_| BlkError::Malformed)?;
        if !is_zero(&b[10..12]) || !is_zero(&b[14..16]) {
            return Err(BlkError::Malformed);
        }
        let status = match u16_at(b, 8) {
            0 => Ok(()),
            code => Err(BlkError::from_code(code).ok_or(BlkError::Malformed)?),
        };
        let info = SessionInfo {
            max_in_flight: u16_at(b, 12),
            area_base: u64_at(b, 16),
            area_len: u64_at(b, 24),
            capacity: u64_at(b, 32),
            sector_size: u32_at(b, 40),
            max_transfer: u32_at(b, 44),
        };
        if status.is_err() && info != SessionInfo::default() {
            return Err(BlkError::Malformed);
        }
        Ok(Response { id: u64_at(b, 0), status, info })
    }
}

/// How many 64-bit words a stream's accounts take after its data area.
pub const ACCOUNT_WORDS: usize = 5;

/// A stream's disk-time accounts as its driver publishes them (see the [module](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamAccounts {
    /// Disk time used on its slices, in nanoseconds.
    pub guaranteed_ns: u64,
    /// Disk time used on slack time, in nanoseconds.
    pub extra_ns: u64,
    /// Periods completed.
    pub periods: u64,
    /// Periods that ended with slice left while it had requests.
    pub deadlines_missed: u64,
}

impl StreamAccounts {
    /// The accounts' words after the sequence number.
    pub fn words(&self) -> [u64; ACCOUNT_WORDS - 1] {
        [self.guaranteed_ns, self.extra_ns, self.periods, self.deadlines_missed]
    }

    /// The accounts from their words after the sequence number.
    pub fn from_words(w: [u64; ACCOUNT_WORDS - 1]) -> StreamAccounts {
        StreamAccounts {
            guaranteed_ns: w[0],
            extra_ns: w[1],
            periods: w[2],
            deadlines_missed: w[3],
        }
    }
}
