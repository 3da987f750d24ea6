//! The wire encoding of every RPP message: [`encode`] and [`decode`].
//!
//! A packet is one UDP payload: a fixed [`HEADER`]-byte header, then the body of its operation.
//! All fields are big-endian (network order). The layout is in the crate documentation.
//!
//! The encoding is canonical: [`decode`] accepts exactly the bytes [`encode`] produces (no
//! trailing bytes, reserved bits zero, a NACK's bitmap without trailing zero bytes), so
//! `encode(decode(b)) == b` for every `b` that decodes. [`decode`] never panics.

use core::fmt;

use net_interface::{Endpoint, Ipv4Addr};

/// The packet's first two bytes: "RP".
pub const MAGIC: [u8; 2] = *b"RP";

/// The protocol version this crate speaks.
pub const VERSION: u8 = 1;

/// Bytes of the fixed header.
pub const HEADER: usize = 28;

/// Offset of the checksum in the header.
const CHECKSUM_AT: usize = 8;

/// Bytes of a [`Message::Data`] body before its payload.
pub const DATA_FIXED: usize = 23;

/// The largest UDP payload that fits one Ethernet frame (1,472 bytes): the largest packet.
pub const MAX_PACKET: usize = net_interface::frame::MAX_UDP_PAYLOAD;

/// The largest payload of one data packet (the chunk of a page it carries): 1,421 bytes, so a
/// 4 KiB page takes 3 packets.
pub const MAX_CHUNK: usize = MAX_PACKET - HEADER - DATA_FIXED;

/// The most chunks one page may be split into (the NACK bitmap's width).
pub const MAX_CHUNKS: usize = 256;

/// The most servers a trader's answer names.
pub const MAX_CANDIDATES: usize = 5;

io_protocol::wire_codes! {
    /// The operation of a packet (the header's op byte).
    pub enum Op: u8 {
        /// [`Message::Read`].
        Read = 1,
        /// [`Message::Write`].
        Write = 2,
        /// [`Message::Exchange`].
        Exchange = 3,
        /// [`Message::Data`].
        Data = 4,
        /// [`Message::Ack`].
        Ack = 5,
        /// [`Message::Nack`].
        Nack = 6,
        /// [`Message::Free`].
        Free = 7,
        /// [`Message::Advert`].
        Advert = 16,
        /// [`Message::TraderQuery`].
        TraderQuery = 17,
        /// [`Message::TraderAnswer`].
        TraderAnswer = 18,
        /// [`Message::CreateStream`].
        CreateStream = 19,
        /// [`Message::StreamCreated`].
        StreamCreated = 20,
        /// [`Message::Refused`].
        Refused = 21,
        /// [`Message::AddResources`].
        AddResources = 22,
        /// [`Message::Release`].
        Release = 23,
        /// [`Message::RevokeNotice`].
        RevokeNotice = 24,
        /// [`Message::RevokeReply`].
        RevokeReply = 25,
        /// [`Message::OffloadStart`].
        OffloadStart = 26,
        /// [`Message::OffloadDone`].
        OffloadDone = 27,
        /// [`Message::SwitchMirror`].
        SwitchMirror = 28,
        /// [`Message::Heartbeat`].
        Heartbeat = 29,
        /// [`Message::Alive`].
        Alive = 30,
    }
}

io_protocol::wire_codes! {
    /// The status an [`Message::Ack`] or [`Message::Nack`] carries (the thesis's error code).
    pub enum Code: u16 {
        /// Success (an ACK's normal code).
        None = 0,
        /// Chunks are missing: a NACK's bitmap names them, the sender resends them.
        Missing = 1,
        /// The server holds no such page (a read of a page never written, or freed).
        NotHeld = 2,
        /// The server's store for the stream is full: the write is refused.
        Full = 3,
        /// The stream is unknown to the server or the token is wrong: nothing was touched.
        BadToken = 4,
        /// The request contradicts the stream (page size, chunk numbering): refused.
        BadRequest = 5,
    }
}

io_protocol::wire_codes! {
    /// Why a server refused to create a stream or add resources ([`Message::Refused`]).
    pub enum RefuseReason: u16 {
        /// Not enough memory under the server's threshold.
        Memory = 1,
        /// The server cannot commit the CPU time asked for.
        Cpu = 2,
        /// The server cannot commit the network time asked for.
        Net = 3,
        /// The server is at its capacity until its next advert (it just admitted a client).
        Busy = 4,
        /// The request was malformed (zero pages, an unsupported page size).
        BadRequest = 5,
    }
}

/// The fields every packet carries besides its message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Header {
    /// The client's stream at the server (0 before one exists: trader traffic, CreateStream).
    pub stream: u32,
    /// The stream's secret, given by the server at creation; checked on every packet.
    pub token: u64,
    /// The request id: the same on every packet of one operation and its retries, different
    /// for different operations of a stream (a client counts up, wrapping).
    pub request: u32,
}

/// A decoded packet: the header and the message, whose payload (if any) borrows the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Stream, token and request id.
    pub header: Header,
    /// The operation and its fields.
    pub message: Message<'a>,
}

/// Flags of a [`Data`] packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DataFlags(pub u8);

impl DataFlags {
    /// No flag.
    pub const NONE: DataFlags = DataFlags(0);
    /// The chunk also acknowledges the write of its exchange (the thesis's piggy-backed ACK).
    pub const WRITE_ACK: DataFlags = DataFlags(1);
    /// Server-to-server forwarding of a revoked client's page: the receiving server stores it
    /// only if it holds no copy the client sent itself.
    pub const OFFLOAD: DataFlags = DataFlags(2);
    /// Every defined flag.
    pub const ALL: DataFlags = DataFlags(3);

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: DataFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for DataFlags {
    type Output = DataFlags;
    fn bitor(self, rhs: DataFlags) -> DataFlags {
        DataFlags(self.0 | rhs.0)
    }
}

/// One chunk of a page ([`Message::Data`]), client to server for a write, server to client
/// for a read, server to server for an offload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Data<'a> {
    /// The page's number in the client's address space.
    pub vpn: u64,
    /// The client's page size in bytes (the server allocates this much on a first write).
    pub page_size: u32,
    /// The chunk's offset in the page.
    pub off: u32,
    /// The number of chunks of the page (`tot`, 1 to [`MAX_CHUNKS`]).
    pub tot: u16,
    /// This chunk's number (`num`, below `tot`).
    pub num: u16,
    /// [`DataFlags`].
    pub flags: DataFlags,
    /// The chunk's bytes (`size` on the wire is its length): `off + size <= page_size`.
    pub payload: &'a [u8],
}

/// A set of chunk numbers below [`MAX_CHUNKS`]: a NACK's bitmap of missing chunks.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ChunkSet([u64; MAX_CHUNKS / 64]);

impl ChunkSet {
    /// The empty set.
    pub const EMPTY: ChunkSet = ChunkSet([0; MAX_CHUNKS / 64]);

    /// The set `0..n` (`n` at most [`MAX_CHUNKS`]).
    pub fn first(n: usize) -> ChunkSet {
        let mut s = ChunkSet::EMPTY;
        for i in 0..n.min(MAX_CHUNKS) {
            s.insert(i);
        }
        s
    }

    /// Adds chunk `i` (ignored at or above [`MAX_CHUNKS`]).
    pub fn insert(&mut self, i: usize) {
        if i < MAX_CHUNKS {
            self.0[i / 64] |= 1 << (i % 64);
        }
    }

    /// Removes chunk `i`.
    pub fn remove(&mut self, i: usize) {
        if i < MAX_CHUNKS {
            self.0[i / 64] &= !(1 << (i % 64));
        }
    }

    /// Whether chunk `i` is in the set.
    pub fn contains(&self, i: usize) -> bool {
        i < MAX_CHUNKS && self.0[i / 64] & (1 << (i % 64)) != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    /// The number of chunks in the set.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The chunks in the set, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..MAX_CHUNKS).filter(move |&i| self.contains(i))
    }

    /// Bytes of the canonical bitmap: up to the byte of the highest chunk in the set.
    fn wire_len(&self) -> usize {
        (0..MAX_CHUNKS / 8).rev().find(|&b| self.byte(b) != 0).map_or(0, |b| b + 1)
    }

    /// Byte `b` of the bitmap (chunk `8b + i` is bit `i`).
    fn byte(&self, b: usize) -> u8 {
        (self.0[b / 8] >> (8 * (b % 8))) as u8
    }
}

impl fmt::Debug for ChunkSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// A server a trader knows: where it is and how many bytes it offers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// The server's control endpoint.
    pub server: Endpoint,
    /// The bytes it advertised.
    pub bytes: u64,
}

/// A trader's answer: up to [`MAX_CANDIDATES`] servers, most memory first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Candidates {
    len: u8,
    list: [Candidate; MAX_CANDIDATES],
}

impl Candidates {
    /// No candidate.
    pub const fn new() -> Candidates {
        Candidates {
            len: 0,
            list: [Candidate { server: Endpoint { addr: Ipv4Addr([0; 4]), port: 0 }, bytes: 0 };
                MAX_CANDIDATES],
        }
    }

    /// Adds `c`; false (and nothing added) when the list is full.
    pub fn push(&mut self, c: Candidate) -> bool {
        let Some(slot) = self.list.get_mut(self.len as usize) else { return false };
        *slot = c;
        self.len += 1;
        true
    }

    /// The candidates, in order.
    pub fn as_slice(&self) -> &[Candidate] {
        &self.list[..self.len as usize]
    }
}

/// Whether a client's stream at a server holds its primary copies or its mirror.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Role {
    /// The server the client reads from.
    #[default]
    Primary,
    /// The second server every page-out also goes to.
    Mirror,
}

/// A time contract: `slice_ns` of time every `period_ns` (slice 0: extra time only, no
/// guarantee, which makes the client a likelier victim of revocation), and with `extra` the
/// server's slack time beyond it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Qos {
    /// The period, in nanoseconds.
    pub period_ns: u64,
    /// The guaranteed time per period, in nanoseconds.
    pub slice_ns: u64,
    /// Whether the client may use the server's slack time beyond its slice.
    pub extra: bool,
}

/// Where a revoked client's pages go: a new server and the client's stream on it, so that
/// the old server can forward the pages into that stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OffloadTarget {
    /// The new server's data endpoint.
    pub server: Endpoint,
    /// The client's stream on the new server.
    pub stream: u32,
    /// That stream's token.
    pub token: u64,
}

/// A client's answer to a revocation ([`Message::RevokeReply`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RevokeAnswer {
    /// The client found a new server: hold the pages and forward them there (the target, if
    /// given; otherwise the server asks again, thesis step 3).
    Hold(Option<OffloadTarget>),
    /// The client found no new server: it takes its pages back itself, then releases.
    NoServer,
}

/// Every RPP message: the data path (thesis §10.1) and the control path (§10.2 to §10.7).
///
/// Who sends what: C client, S server, T trader. Data-path messages carry the client's stream
/// and token in the header; control messages before a stream exists carry stream 0, token 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// C→S: send page `vpn`. The server answers with its [`Data`] chunks, or a NACK
    /// ([`Code::NotHeld`]).
    Read {
        /// The page.
        vpn: u64,
        /// The client's page size.
        page_size: u32,
    },
    /// C→S: the write of request id `request` (the header's) of page `vpn`, in `tot` chunks,
    /// is under way. A client sends it when a write's acknowledgement is late; the server
    /// answers with an ACK if it has the whole page, else a NACK naming the missing chunks.
    Write {
        /// The page.
        vpn: u64,
        /// The client's page size.
        page_size: u32,
        /// The number of chunks of the write.
        tot: u16,
    },
    /// C→S: write page `vpn` (its chunks follow as [`Data`] under the same request id), then
    /// send page `read_vpn`; the read's chunks carry [`DataFlags::WRITE_ACK`] (the write's
    /// ACK piggy-backed). Sent first and again when the answer is late.
    Exchange {
        /// The page written.
        vpn: u64,
        /// The client's page size.
        page_size: u32,
        /// The number of chunks of the written page.
        tot: u16,
        /// The page to read once the write is complete.
        read_vpn: u64,
    },
    /// One chunk of a page.
    Data(Data<'a>),
    /// S→C: the whole write of `vpn` has arrived and is stored (code [`Code::None`]) or failed
    /// for good (another code). C→S: the whole read of `vpn` has arrived.
    Ack {
        /// The page.
        vpn: u64,
        /// [`Code::None`], or why the operation failed.
        code: Code,
    },
    /// The receiver of page `vpn` is missing chunks (`code` [`Code::Missing`], `missing`
    /// names every one of them: resend those only), or (S→C) the operation failed for good
    /// (`code` another, `missing` empty).
    Nack {
        /// The page.
        vpn: u64,
        /// Why.
        code: Code,
        /// The chunks to resend (empty unless `code` is [`Code::Missing`]).
        missing: ChunkSet,
    },
    /// C→S: forget page `vpn`. The server answers with an ACK.
    Free {
        /// The page.
        vpn: u64,
    },
    /// S→T: this server offers memory.
    Advert {
        /// The server's control endpoint.
        server: Endpoint,
        /// The bytes offered.
        bytes: u64,
        /// Whether the server can commit CPU time to a new client.
        cpu_committable: bool,
        /// Whether the server can commit network time to a new client.
        net_committable: bool,
    },
    /// C→T: which servers offer at least `bytes`?
    TraderQuery {
        /// The bytes wanted.
        bytes: u64,
    },
    /// T→C: up to five servers offering enough, most memory first.
    TraderAnswer {
        /// The servers.
        servers: Candidates,
    },
    /// C→S: create a stream for this client (the thesis's `CreateStream` with the remote QoS
    /// contract of §10.6). Answered by [`Message::StreamCreated`] or [`Message::Refused`].
    CreateStream {
        /// The pages to reserve.
        pages: u64,
        /// The client's page size in bytes.
        page_size: u32,
        /// Whether this server is the client's primary or its mirror.
        role: Role,
        /// Whether the client has a local disk to fall back to.
        has_local_disk: bool,
        /// The server processing time the client asks for.
        cpu: Qos,
        /// The server's network time the client asks for.
        net: Qos,
    },
    /// S→C: the stream exists (or, after [`Message::AddResources`], has grown).
    StreamCreated {
        /// The stream id, for every later packet's header.
        stream: u32,
        /// The stream's secret token, for every later packet's header.
        token: u64,
        /// The pages the stream may now hold in all.
        pages: u64,
        /// The server's data-path UDP port (0: the port this answer came from).
        data_port: u16,
    },
    /// S→C: the request was refused.
    Refused {
        /// Why.
        reason: RefuseReason,
    },
    /// C→S: reserve `pages` more pages for the stream (checked against memory only).
    AddResources {
        /// The pages.
        pages: u64,
    },
    /// C→S: free every page of the stream and close it.
    Release,
    /// S→C: the server needs `pages` pages of memory back from this client.
    RevokeNotice {
        /// The pages wanted back.
        pages: u64,
    },
    /// C→S: the client's answer to a revocation.
    RevokeReply {
        /// Hold for offloading, or no new server.
        answer: RevokeAnswer,
    },
    /// S→S (on the client's stream at the new server): `pages` pages of a revoked client
    /// follow as [`Data`] chunks flagged [`DataFlags::OFFLOAD`].
    OffloadStart {
        /// The pages to be forwarded.
        pages: u64,
    },
    /// S→C, then C→S (new server): the old server has forwarded every page.
    OffloadDone {
        /// The pages forwarded.
        pages: u64,
    },
    /// C→S: this server, the client's mirror, is now its primary (the primary is lost).
    SwitchMirror,
    /// Are you alive? (either way).
    Heartbeat,
    /// The answer to a [`Message::Heartbeat`].
    Alive,
}

impl Message<'_> {
    /// The message's operation.
    pub fn op(&self) -> Op {
        match self {
            Message::Read { .. } => Op::Read,
            Message::Write { .. } => Op::Write,
            Message::Exchange { .. } => Op::Exchange,
            Message::Data(_) => Op::Data,
            Message::Ack { .. } => Op::Ack,
            Message::Nack { .. } => Op::Nack,
            Message::Free { .. } => Op::Free,
            Message::Advert { .. } => Op::Advert,
            Message::TraderQuery { .. } => Op::TraderQuery,
            Message::TraderAnswer { .. } => Op::TraderAnswer,
            Message::CreateStream { .. } => Op::CreateStream,
            Message::StreamCreated { .. } => Op::StreamCreated,
            Message::Refused { .. } => Op::Refused,
            Message::AddResources { .. } => Op::AddResources,
            Message::Release => Op::Release,
            Message::RevokeNotice { .. } => Op::RevokeNotice,
            Message::RevokeReply { .. } => Op::RevokeReply,
            Message::OffloadStart { .. } => Op::OffloadStart,
            Message::OffloadDone { .. } => Op::OffloadDone,
            Message::SwitchMirror => Op::SwitchMirror,
            Message::Heartbeat => Op::Heartbeat,
            Message::Alive => Op::Alive,
        }
    }

    /// Whether the message belongs to the data path (read, write, exchange, data, ACK, NACK,
    /// free), which [`crate::server::PageServer`] and [`crate::client::Transfer`] handle.
    pub fn is_data_path(&self) -> bool {
        (self.op().code() as usize) < 16
    }
}

/// Why bytes are not a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodeError {
    /// Shorter than the header, or than the header's body length says.
    Truncated,
    /// Longer than the header's body length says.
    TrailingBytes,
    /// Not "RP".
    BadMagic,
    /// Another protocol version.
    BadVersion,
    /// The checksum does not match: the packet was corrupted.
    BadChecksum,
    /// An unknown op code.
    UnknownOp,
    /// A field out of its range (an unknown code, a chunk outside its page, a reserved bit).
    BadField,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DecodeError::Truncated => "truncated packet",
            DecodeError::TrailingBytes => "bytes after the packet's body",
            DecodeError::BadMagic => "not an RPP packet (magic)",
            DecodeError::BadVersion => "unsupported RPP version",
            DecodeError::BadChecksum => "checksum mismatch (corrupted packet)",
            DecodeError::UnknownOp => "unknown operation",
            DecodeError::BadField => "field out of range",
        })
    }
}

/// Why a message could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EncodeError {
    /// The buffer is shorter than the packet.
    BufferTooSmall,
    /// The packet would exceed [`MAX_PACKET`].
    TooLong,
    /// A field breaks the message's rules (`num >= tot`, a chunk outside its page, `tot`
    /// above [`MAX_CHUNKS`], a NACK's bitmap naming chunks with a code other than `Missing`).
    Invalid,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EncodeError::BufferTooSmall => "buffer too small for the packet",
            EncodeError::TooLong => "packet longer than one UDP datagram",
            EncodeError::Invalid => "message fields break its rules",
        })
    }
}

/// Writes `packet` into `buf`; returns the packet's length.
pub fn encode(packet: &Packet<'_>, buf: &mut [u8]) -> Result<usize, EncodeError> {
    if buf.len() < HEADER {
        return Err(EncodeError::BufferTooSmall);
    }
    let mut w = Writer { buf, at: HEADER, ok: true };
    encode_body(&packet.message, &mut w)?;
    if !w.ok {
        return Err(EncodeError::BufferTooSmall);
    }
    let len = w.at;
    if len > MAX_PACKET {
        return Err(EncodeError::TooLong);
    }
    let buf = w.buf;
    let h = &packet.header;
    buf[0..2].copy_from_slice(&MAGIC);
    buf[2] = VERSION;
    buf[3] = packet.message.op().code();
    buf[4..6].copy_from_slice(&((len - HEADER) as u16).to_be_bytes());
    buf[6..8].copy_from_slice(&[0, 0]);
    buf[12..16].copy_from_slice(&h.stream.to_be_bytes());
    buf[16..24].copy_from_slice(&h.token.to_be_bytes());
    buf[24..28].copy_from_slice(&h.request.to_be_bytes());
    seal(&mut buf[..len]);
    Ok(len)
}

/// Writes the checksum of `packet` (a whole encoded packet) into its header. [`encode`] does
/// this; tools that alter encoded packets on purpose (the fuzz tests) call it to get their
/// changes past the checksum. Does nothing to bytes shorter than a header.
pub fn seal(packet: &mut [u8]) {
    if packet.len() < HEADER {
        return;
    }
    let sum = checksum(packet);
    packet[CHECKSUM_AT..CHECKSUM_AT + 4].copy_from_slice(&sum.to_be_bytes());
}

/// The CRC-32 of a packet with its checksum field read as zero.
fn checksum(packet: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&packet[..CHECKSUM_AT]);
    h.update(&[0; 4]);
    h.update(&packet[CHECKSUM_AT + 4..]);
    h.finalize()
}

/// Reads the packet in `bytes` (one whole UDP payload). Never panics.
pub fn decode(bytes: &[u8]) -> Result<Packet<'_>, DecodeError> {
    if bytes.len() < HEADER {
        return Err(DecodeError::Truncated);
    }
    if bytes[0..2] != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    if bytes[2] != VERSION {
        return Err(DecodeError::BadVersion);
    }
    let body_len = u16::from_be_bytes([bytes[4], bytes[5]]) as usize;
    if bytes.len() < HEADER + body_len {
        return Err(DecodeError::Truncated);
    }
    if bytes.len() > HEADER + body_len {
        return Err(DecodeError::TrailingBytes);
    }
    let sum = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if checksum(bytes) != sum {
        return Err(DecodeError::BadChecksum);
    }
    if bytes[6..8] != [0, 0] {
        return Err(DecodeError::BadField);
    }
    let op = Op::from_code(bytes[3]).ok_or(DecodeError::UnknownOp)?;
    let mut r = Reader { bytes, at: 12 };
    let header = Header { stream: r.u32()?, token: r.u64()?, request: r.u32()? };
    let message = decode_body(op, &mut r)?;
    if r.at != bytes.len() {
        return Err(DecodeError::TrailingBytes);
    }
    Ok(Packet { header, message })
}

/// Whether a data chunk's fields are consistent (shared by encoder and decoder).
fn data_valid(d: &Data<'_>) -> bool {
    d.tot >= 1
        && d.tot as usize <= MAX_CHUNKS
        && d.num < d.tot
        && d.payload.len() <= MAX_CHUNK
        && d.off as u64 + d.payload.len() as u64 <= d.page_size as u64
        && d.flags.0 & !DataFlags::ALL.0 == 0
}

fn encode_body(m: &Message<'_>, w: &mut Writer<'_>) -> Result<(), EncodeError> {
    match *m {
        Message::Read { vpn, page_size } => {
            w.u64(vpn);
            w.u32(page_size);
        }
        Message::Write { vpn, page_size, tot } => {
            if tot == 0 || tot as usize > MAX_CHUNKS {
                return Err(EncodeError::Invalid);
            }
            w.u64(vpn);
            w.u32(page_size);
            w.u16(tot);
        }
        Message::Exchange { vpn, page_size, tot, read_vpn } => {
            if tot == 0 || tot as usize > MAX_CHUNKS {
                return Err(EncodeError::Invalid);
            }
            w.u64(vpn);
            w.u32(page_size);
            w.u16(tot);
            w.u64(read_vpn);
        }
        Message::Data(d) => {
            if !data_valid(&d) {
                return Err(EncodeError::Invalid);
            }
            w.u64(d.vpn);
            w.u32(d.page_size);
            w.u32(d.off);
            w.u16(d.payload.len() as u16);
            w.u16(d.tot);
            w.u16(d.num);
            w.u8(d.flags.0);
            w.bytes(d.payload);
        }
        Message::Ack { vpn, code } => {
            w.u64(vpn);
            w.u16(code.code());
        }
        Message::Nack { vpn, code, missing } => {
            if code != Code::Missing && !missing.is_empty() {
                return Err(EncodeError::Invalid);
            }
            w.u64(vpn);
            w.u16(code.code());
            let n = missing.wire_len();
            w.u8(n as u8);
            for b in 0..n {
                w.u8(missing.byte(b));
            }
        }
        Message::Free { vpn } => w.u64(vpn),
        Message::Advert { server, bytes, cpu_committable, net_committable } => {
            w.endpoint(server);
            w.u64(bytes);
            w.u8(cpu_committable as u8 | (net_committable as u8) << 1);
        }
        Message::TraderQuery { bytes } => w.u64(bytes),
        Message::TraderAnswer { servers } => {
            w.u8(servers.len);
            for c in servers.as_slice() {
                w.endpoint(c.server);
                w.u64(c.bytes);
            }
        }
        Message::CreateStream { pages, page_size, role, has_local_disk, cpu, net } => {
            w.u64(pages);
            w.u32(page_size);
            w.u8(match role {
                Role::Primary => 0,
                Role::Mirror => 1,
            });
            w.u8(has_local_disk as u8);
            for q in [cpu, net] {
                w.u64(q.period_ns);
                w.u64(q.slice_ns);
                w.u8(q.extra as u8);
            }
        }
        Message::StreamCreated { stream, token, pages, data_port } => {
            w.u32(stream);
            w.u64(token);
            w.u64(pages);
            w.u16(data_port);
        }
        Message::Refused { reason } => w.u16(reason.code()),
        Message::AddResources { pages } => w.u64(pages),
        Message::RevokeNotice { pages } => w.u64(pages),
        Message::RevokeReply { answer } => match answer {
            RevokeAnswer::NoServer => w.u8(0),
            RevokeAnswer::Hold(None) => w.u8(1),
            RevokeAnswer::Hold(Some(t)) => {
                w.u8(2);
                w.endpoint(t.server);
                w.u32(t.stream);
                w.u64(t.token);
            }
        },
        Message::OffloadStart { pages } => w.u64(pages),
        Message::OffloadDone { pages } => w.u64(pages),
        Message::Release | Message::SwitchMirror | Message::Heartbeat | Message::Alive => {}
    }
    Ok(())
}

fn decode_body<'a>(op: Op, r: &mut Reader<'a>) -> Result<Message<'a>, DecodeError> {
    Ok(match op {
        Op::Read => Message::Read { vpn: r.u64()?, page_size: r.u32()? },
        Op::Write => {
            let (vpn, page_size, tot) = (r.u64()?, r.u32()?, r.u16()?);
            if tot == 0 || tot as usize > MAX_CHUNKS {
                return Err(DecodeError::BadField);
            }
            Message::Write { vpn, page_size, tot }
        }
        Op::Exchange => {
            let (vpn, page_size, tot, read_vpn) = (r.u64()?, r.u32()?, r.u16()?, r.u64()?);
            if tot == 0 || tot as usize > MAX_CHUNKS {
                return Err(DecodeError::BadField);
            }
            Message::Exchange { vpn, page_size, tot, read_vpn }
        }
        Op::Data => {
            let (vpn, page_size, off, size) = (r.u64()?, r.u32()?, r.u32()?, r.u16()?);
            let (tot, num, flags) = (r.u16()?, r.u16()?, DataFlags(r.u8()?));
            let payload = r.bytes(size as usize)?;
            let d = Data { vpn, page_size, off, tot, num, flags, payload };
            if !data_valid(&d) {
                return Err(DecodeError::BadField);
            }
            Message::Data(d)
        }
        Op::Ack => Message::Ack { vpn: r.u64()?, code: r.code()? },
        Op::Nack => {
            let (vpn, code, n) = (r.u64()?, r.code()?, r.u8()? as usize);
            if n > MAX_CHUNKS / 8 {
                return Err(DecodeError::BadField);
            }
            let bits = r.bytes(n)?;
            let mut missing = ChunkSet::EMPTY;
            for (b, &byte) in bits.iter().enumerate() {
                missing.0[b / 8] |= (byte as u64) << (8 * (b % 8));
            }
            if bits.last() == Some(&0) || (code != Code::Missing && n != 0) {
                return Err(DecodeError::BadField);
            }
            Message::Nack { vpn, code, missing }
        }
        Op::Free => Message::Free { vpn: r.u64()? },
        Op::Advert => {
            let (server, bytes, flags) = (r.endpoint()?, r.u64()?, r.u8()?);
            if flags & !3 != 0 {
                return Err(DecodeError::BadField);
            }
            Message::Advert {
                server,
                bytes,
                cpu_committable: flags & 1 != 0,
                net_committable: flags & 2 != 0,
            }
        }
        Op::TraderQuery => Message::TraderQuery { bytes: r.u64()? },
        Op::TraderAnswer => {
            let n = r.u8()? as usize;
            if n > MAX_CANDIDATES {
                return Err(DecodeError::BadField);
            }
            let mut servers = Candidates::new();
            for _ in 0..n {
                servers.push(Candidate { server: r.endpoint()?, bytes: r.u64()? });
            }
            Message::TraderAnswer { servers }
        }
        Op::CreateStream => {
            let (pages, page_size) = (r.u64()?, r.u32()?);
            let role = match r.u8()? {
                0 => Role::Primary,
                1 => Role::Mirror,
                _ => return Err(DecodeError::BadField),
            };
            let has_local_disk = r.bool()?;
            let cpu = Qos { period_ns: r.u64()?, slice_ns: r.u64()?, extra: r.bool()? };
            let net = Qos { period_ns: r.u64()?, slice_ns: r.u64()?, extra: r.bool()? };
            Message::CreateStream { pages, page_size, role, has_local_disk, cpu, net }
        }
        Op::StreamCreated => Message::StreamCreated {
            stream: r.u32()?,
            token: r.u64()?,
            pages: r.u64()?,
            data_port: r.u16()?,
        },
        Op::Refused => Message::Refused {
            reason: RefuseReason::from_code(r.u16()?).ok_or(DecodeError::BadField)?,
        },
        Op::AddResources => Message::AddResources { pages: r.u64()? },
        Op::Release => Message::Release,
        Op::RevokeNotice => Message::RevokeNotice { pages: r.u64()? },
        Op::RevokeReply => {
            let answer = match r.u8()? {
                0 => RevokeAnswer::NoServer,
                1 => RevokeAnswer::Hold(None),
                2 => RevokeAnswer::Hold(Some(OffloadTarget {
                    server: r.endpoint()?,
                    stream: r.u32()?,
                    token: r.u64()?,
                })),
                _ => return Err(DecodeError::BadField),
            };
            Message::RevokeReply { answer }
        }
        Op::OffloadStart => Message::OffloadStart { pages: r.u64()? },
        Op::OffloadDone => Message::OffloadDone { pages: r.u64()? },
        Op::SwitchMirror => Message::SwitchMirror,
        Op::Heartbeat => Message::Heartbeat,
        Op::Alive => Message::Alive,
    })
}

/// Writes fields after the header; remembers (instead of panicking) a buffer too small.
struct Writer<'b> {
    buf: &'b mut [u8],
    at: usize,
    ok: bool,
}

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) {
        match self.buf.get_mut(self.at..self.at + b.len()) {
            Some(dst) if self.ok => dst.copy_from_slice(b),
            _ => self.ok = false,
        }
        self.at += b.len();
    }
    fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }
    fn u16(&mut self, v: u16) {
        self.bytes(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_be_bytes());
    }
    fn endpoint(&mut self, e: Endpoint) {
        self.bytes(&e.addr.0);
        self.u16(e.port);
    }
}

/// Reads fields; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let b = self.bytes.get(self.at..self.at.saturating_add(n)).ok_or(DecodeError::Truncated)?;
        self.at += n;
        Ok(b)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::BadField),
        }
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    fn code(&mut self) -> Result<Code, DecodeError> {
        Code::from_code(self.u16()?).ok_or(DecodeError::BadField)
    }
    fn endpoint(&mut self) -> Result<Endpoint, DecodeError> {
        Ok(Endpoint { addr: Ipv4Addr(self.array()?), port: self.u16()? })
    }
}
