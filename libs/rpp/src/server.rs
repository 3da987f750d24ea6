//! The server side of the data path: [`PageServer`], over the server domain's memory
//! ([`PageStore`]).
//!
//! The server only reacts (no clock): each packet it is given produces zero or more packets
//! back to its sender. It checks the stream's token on every packet (a wrong one is counted
//! and refused with [`Code::BadToken`]; nothing is read or touched); reassembles a write's
//! chunks in a buffer and stores the page only once it is whole, then ACKs it; NACKs the
//! missing chunks of a write when its last chunk arrives with gaps or when the client asks
//! ([`crate::wire::Message::Write`]); sends a read's chunks, and again the chunks a client's
//! NACK names. Writes are idempotent by request id: a duplicate chunk of a stored write is
//! answered with the ACK again, and a write older (by request id) than the last write or free
//! of its page is acknowledged but not stored, so a late duplicate never overwrites newer data.
//! A forwarded page ([`crate::wire::DataFlags::OFFLOAD`]) is stored only if the client has
//! not written or freed that page on this server itself (the client's copy is the newer).
//!
//! Pages may be shorter than the stream's page size: a client that compresses sends the
//! compressed bytes (fewer chunks), the store keeps what it was sent, and a read is answered
//! at the stored length (its data chunks' `page_size`). What the bytes mean is the client's.
//!
//! What a server keeps per stream besides the pages is bounded: up to
//! [`MAX_PARTIAL_WRITES`] writes in reassembly (a page buffer each), the last
//! [`RECENT_WRITES`] finished writes, the last request id of each page held, and the last
//! [`FREES_REMEMBERED`] frees. A write older than a free forgotten since could bring its page
//! back: only a duplicate delayed past that many frees.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec;
use alloc::vec::Vec;

use crate::wire::{
    ChunkSet, Code, Data, DataFlags, DecodeError, Header, MAX_CHUNK, MAX_CHUNKS, MAX_PACKET,
    Message, Packet, decode, encode,
};

/// Why a store refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreError {
    /// No such page.
    NotHeld,
    /// No room for another page.
    Full,
}

/// The server domain's memory for its clients' pages, per (stream, page number).
///
/// A page is stored as it was sent: the stream's page size, or fewer bytes (a page the client
/// compressed), and read back at that length.
pub trait PageStore {
    /// Copies page `vpn` of `stream` into the start of `buf` (its length is the stream's page
    /// size): the page's stored length (1 to `buf.len()`).
    fn get(&mut self, stream: u32, vpn: u64, buf: &mut [u8]) -> Result<usize, StoreError>;
    /// Stores `data` (1 byte to the stream's page size) as page `vpn` of `stream`, replacing
    /// any copy.
    fn put(&mut self, stream: u32, vpn: u64, data: &[u8]) -> Result<(), StoreError>;
    /// Forgets page `vpn` of `stream` (nothing if not held).
    fn free(&mut self, stream: u32, vpn: u64);
    /// Whether page `vpn` of `stream` is held.
    fn holds(&self, stream: u32, vpn: u64) -> bool;
}

/// What became of a packet given to [`PageServer::on_packet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// A data-path packet, handled (answers, if any, went out).
    Handled,
    /// A control message for the server domain: `authenticated` when its header names an
    /// open stream with its right token (stream 0 messages, such as a CreateStream, are not).
    Control {
        /// The packet.
        packet: Packet<'a>,
        /// Whether the header's stream and token were checked and right.
        authenticated: bool,
    },
    /// Dropped, counted.
    Dropped(DropReason),
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// It did not decode (a bad checksum is a corrupted packet).
    Malformed(DecodeError),
    /// Unknown stream or wrong token (refused with [`Code::BadToken`]).
    BadToken,
    /// A message a server does not take (a TraderAnswer, an Alive on the data path).
    Unexpected,
}

/// A server's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Packets given to the server.
    pub packets_received: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Packets dropped for a bad checksum (corrupted).
    pub corrupted: u64,
    /// Packets dropped as malformed otherwise.
    pub malformed: u64,
    /// Packets refused for an unknown stream or a wrong token.
    pub bad_token: u64,
    /// Pages stored (whole writes).
    pub pages_written: u64,
    /// Pages sent for reads (chunks resent for a NACK not counted).
    pub pages_read: u64,
    /// Chunks sent again for a client's NACK.
    pub chunks_resent: u64,
    /// Data chunks that were duplicates (of a chunk held, or of a stored write).
    pub duplicates: u64,
    /// Writes acknowledged but not stored as older than the page's last write or free, and
    /// forwarded pages not stored as the client's own copy was there.
    pub stale_writes: u64,
}

/// Writes in progress kept per stream; a new one beyond this drops the oldest.
pub const MAX_PARTIAL_WRITES: usize = 64;

/// Finished writes remembered per stream (to answer their duplicates and retries).
pub const RECENT_WRITES: usize = 256;

/// Frees of pages remembered per stream (a late write older than a remembered free does not
/// bring its page back). With the pages held, this bounds what a server keeps per stream.
pub const FREES_REMEMBERED: usize = 1024;

/// A write being reassembled (`buf` is as long as the page sent).
#[derive(Debug)]
struct Partial {
    vpn: u64,
    tot: u16,
    have: ChunkSet,
    bytes: usize,
    buf: Vec<u8>,
    /// The exchange's page to send once the write is stored.
    dest: Option<u64>,
    /// When it began (the stream's packet count), to drop the oldest.
    born: u64,
}

/// A finished write.
#[derive(Clone, Copy, Debug)]
struct Finished {
    request: u32,
    offload: bool,
    vpn: u64,
    code: Code,
    dest: Option<u64>,
}

/// An open stream.
#[derive(Debug)]
struct Stream {
    token: u64,
    page_size: u32,
    /// Writes in progress by (request id, forwarded).
    partial: BTreeMap<(u32, bool), Partial>,
    recent: VecDeque<Finished>,
    /// Per page, the request id of its last write or free, and whether the client sent it
    /// (or the page was forwarded by another server).
    last: BTreeMap<u64, (u32, bool)>,
    /// The last frees remembered in `last`, oldest first: (page, request id).
    freed: VecDeque<(u64, u32)>,
    packets: u64,
}

/// `a` is before `b` in request-id order (serial number arithmetic: ids wrap).
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// Encodes and sends answers under one packet's header.
struct Reply<'o> {
    header: Header,
    out: &'o mut dyn FnMut(&[u8]),
    sent: u64,
}

impl Reply<'_> {
    fn send(&mut self, message: Message<'_>) {
        let mut buf = [0u8; MAX_PACKET];
        if let Ok(n) = encode(&Packet { header: self.header, message }, &mut buf) {
            self.sent += 1;
            (self.out)(&buf[..n]);
        }
    }
    fn ack(&mut self, vpn: u64, code: Code) {
        self.send(Message::Ack { vpn, code });
    }
    fn nack(&mut self, vpn: u64, code: Code) {
        self.send(Message::Nack { vpn, code, missing: ChunkSet::EMPTY });
    }
}

/// The data path of one server: see the module documentation.
#[derive(Debug)]
pub struct PageServer {
    chunk: usize,
    streams: BTreeMap<u32, Stream>,
    /// A page read from the store, to send.
    page: Vec<u8>,
    stats: ServerStats,
}

impl PageServer {
    /// A server sending chunks of `chunk` bytes (clamped to 1 to [`crate::wire::MAX_CHUNK`]),
    /// with no stream open.
    pub fn new(chunk: usize) -> PageServer {
        PageServer {
            chunk: chunk.clamp(1, MAX_CHUNK),
            streams: BTreeMap::new(),
            page: Vec::new(),
            stats: ServerStats::default(),
        }
    }

    /// Opens `stream` with its `token` and page size (after the control path admitted it).
    /// Replaces any stream of that id. A page size of 0, or one that needs more than
    /// [`crate::wire::MAX_CHUNKS`] chunks, makes every data request of the stream refused
    /// ([`Code::BadRequest`]).
    pub fn open_stream(&mut self, stream: u32, token: u64, page_size: u32) {
        self.streams.insert(
            stream,
            Stream {
                token,
                page_size,
                partial: BTreeMap::new(),
                recent: VecDeque::new(),
                last: BTreeMap::new(),
                freed: VecDeque::new(),
                packets: 0,
            },
        );
    }

    /// Closes `stream`: its writes in progress are dropped. The pages in the store are the
    /// caller's to free.
    pub fn close_stream(&mut self, stream: u32) {
        self.streams.remove(&stream);
    }

    /// Whether `stream` is open with `token`.
    pub fn authenticates(&self, stream: u32, token: u64) -> bool {
        self.streams.get(&stream).is_some_and(|s| s.token == token)
    }

    /// Takes one received UDP payload; answers go to `out` (to the packet's sender).
    pub fn on_packet<'a, S: PageStore + ?Sized>(
        &mut self,
        store: &mut S,
        bytes: &'a [u8],
        out: &mut dyn FnMut(&[u8]),
    ) -> Verdict<'a> {
        self.stats.packets_received += 1;
        let packet = match decode(bytes) {
            Ok(p) => p,
            Err(e) => {
                match e {
                    DecodeError::BadChecksum => self.stats.corrupted += 1,
                    _ => self.stats.malformed += 1,
                }
                return Verdict::Dropped(DropReason::Malformed(e));
            }
        };
        let h = packet.header;
        let mut reply = Reply { header: h, out, sent: 0 };
        let verdict = self.dispatch(store, packet, &mut reply);
        self.stats.packets_sent += reply.sent;
        verdict
    }

    fn dispatch<'a, S: PageStore + ?Sized>(
        &mut self,
        store: &mut S,
        packet: Packet<'a>,
        reply: &mut Reply<'_>,
    ) -> Verdict<'a> {
        let h = packet.header;
        let authentic = self.authenticates(h.stream, h.token);
        let m = packet.message;
        if !m.is_data_path() {
            if h.stream == 0 || authentic {
                return Verdict::Control { packet, authenticated: authentic };
            }
            self.stats.bad_token += 1;
            reply.nack(0, Code::BadToken);
            return Verdict::Dropped(DropReason::BadToken);
        }
        let vpn = match m {
            Message::Read { vpn, .. }
            | Message::Write { vpn, .. }
            | Message::Exchange { vpn, .. }
            | Message::Ack { vpn, .. }
            | Message::Nack { vpn, .. }
            | Message::Free { vpn } => vpn,
            Message::Data(d) => d.vpn,
            _ => 0,
        };
        if !authentic {
            self.stats.bad_token += 1;
            reply.nack(vpn, Code::BadToken);
            return Verdict::Dropped(DropReason::BadToken);
        }
        let PageServer { chunk, streams, page, stats } = self;
        let Some(st) = streams.get_mut(&h.stream) else { return Verdict::Handled };
        st.packets += 1;
        let mut ctx = Ctx { chunk: *chunk, stream: h.stream, request: h.request, st, page, stats };
        // A page written may be shorter than the stream's page size (compressed); a read
        // names the stream's page size, and is answered with the page's stored length.
        let max = ctx.st.page_size;
        let size_ok = max > 0 && (max as usize).div_ceil(ctx.chunk) <= MAX_CHUNKS;
        let page_ok = |ps: u32| size_ok && ps == max;
        let sent_ok = |ps: u32| size_ok && (1..=max).contains(&ps);
        match m {
            Message::Read { vpn, page_size } => {
                if !page_ok(page_size) {
                    reply.nack(vpn, Code::BadRequest);
                } else {
                    ctx.stats.pages_read += 1;
                    ctx.send_page(store, vpn, DataFlags::NONE, None, reply);
                }
            }
            Message::Write { vpn, page_size, tot } => {
                if !sent_ok(page_size) {
                    reply.nack(vpn, Code::BadRequest);
                } else {
                    ctx.write_probe(store, vpn, tot, reply);
                }
            }
            Message::Exchange { vpn, page_size, tot, read_vpn } => {
                if !sent_ok(page_size) {
                    reply.nack(vpn, Code::BadRequest);
                } else {
                    ctx.exchange(store, vpn, page_size, tot, read_vpn, reply);
                }
            }
            Message::Data(d) => {
                if !sent_ok(d.page_size) {
                    reply.nack(vpn, Code::BadRequest);
                } else {
                    ctx.data(store, &d, reply);
                }
            }
            Message::Nack { vpn, code: Code::Missing, missing } => {
                if size_ok {
                    ctx.stats.chunks_resent += missing.len() as u64;
                    ctx.send_page(store, vpn, DataFlags::NONE, Some(&missing), reply);
                }
            }
            Message::Free { vpn } => {
                ctx.free(store, vpn);
                reply.ack(vpn, Code::None);
            }
            // A client's ACK of a whole read, or a NACK that only reports: nothing to do.
            Message::Ack { .. } | Message::Nack { .. } => {}
            _ => return Verdict::Dropped(DropReason::Unexpected),
        }
        Verdict::Handled
    }

    /// The counts.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }
}

/// One data-path packet's view of its server and stream.
struct Ctx<'s> {
    chunk: usize,
    stream: u32,
    request: u32,
    st: &'s mut Stream,
    page: &'s mut Vec<u8>,
    stats: &'s mut ServerStats,
}

impl Ctx<'_> {
    /// Sends page `vpn`'s chunks (those in `only`, if given) at its stored length, or a NACK
    /// if it is not held.
    fn send_page<S: PageStore + ?Sized>(
        &mut self,
        store: &mut S,
        vpn: u64,
        flags: DataFlags,
        only: Option<&ChunkSet>,
        reply: &mut Reply<'_>,
    ) {
        self.page.resize(self.st.page_size as usize, 0);
        let size = match store.get(self.stream, vpn, self.page) {
            Ok(n) if (1..=self.page.len()).contains(&n) => n,
            Ok(_) | Err(StoreError::Full) => {
                reply.nack(vpn, Code::BadRequest);
                return;
            }
            Err(StoreError::NotHeld) => {
                reply.nack(vpn, Code::NotHeld);
                return;
            }
        };
        let tot = size.div_ceil(self.chunk);
        for num in 0..tot {
            if only.is_some_and(|o| !o.contains(num)) {
                continue;
            }
            let off = num * self.chunk;
            let end = (off + self.chunk).min(size);
            reply.send(Message::Data(Data {
                vpn,
                page_size: size as u32,
                off: off as u32,
                tot: tot as u16,
                num: num as u16,
                flags,
                payload: &self.page[off..end],
            }));
        }
    }

    /// The finished write of this request, if remembered.
    fn finished(&mut self, offload: bool) -> Option<&mut Finished> {
        let request = self.request;
        self.st.recent.iter_mut().rev().find(|f| f.request == request && f.offload == offload)
    }

    /// Frees page `vpn`, unless a newer write of the client's replaced it; the free is
    /// remembered (for late writes older than it) if the page was known, among the last
    /// [`FREES_REMEMBERED`] frees.
    fn free<S: PageStore + ?Sized>(&mut self, store: &mut S, vpn: u64) {
        let known = match self.st.last.get(&vpn) {
            Some(&(r, true)) if before(self.request, r) => {
                self.stats.stale_writes += 1;
                return;
            }
            Some(_) => true,
            None => store.holds(self.stream, vpn),
        };
        store.free(self.stream, vpn);
        if !known {
            return;
        }
        self.st.last.insert(vpn, (self.request, true));
        self.st.freed.push_back((vpn, self.request));
        if self.st.freed.len() > FREES_REMEMBERED
            && let Some((v, r)) = self.st.freed.pop_front()
            && self.st.last.get(&v) == Some(&(r, true))
        {
            self.st.last.remove(&v);
        }
    }

    /// Whether a client write of `vpn` with this request id is older than the page's last
    /// write or free by the client.
    fn stale(&self, vpn: u64) -> bool {
        matches!(self.st.last.get(&vpn), Some(&(r, true)) if before(self.request, r))
    }

    /// Answers a finished write: the exchange's page, or the ACK.
    fn answer<S: PageStore + ?Sized>(
        &mut self,
        store: &mut S,
        vpn: u64,
        code: Code,
        dest: Option<u64>,
        reply: &mut Reply<'_>,
    ) {
        match dest {
            Some(read_vpn) if code == Code::None => {
                self.stats.pages_read += 1;
                self.send_page(store, read_vpn, DataFlags::WRITE_ACK, None, reply);
            }
            _ => reply.ack(vpn, code),
        }
    }

    /// A client asks how its write is going.
    fn write_probe<S: PageStore + ?Sized>(
        &mut self,
        store: &mut S,
        vpn: u64,
        tot: u16,
        reply: &mut Reply<'_>,
    ) {
        if let Some(p) = self.st.partial.get(&(self.request, false)) {
            let mut missing = ChunkSet::first(p.tot as usize);
            for i in p.have.iter() {
                missing.remove(i);
            }
            reply.send(Message::Nack { vpn: p.vpn, code: Code::Missing, missing });
        } else if let Some(f) = self.finished(false).copied() {
            self.answer(store, f.vpn, f.code, f.dest, reply);
        } else if self.stale(vpn) {
            reply.ack(vpn, Code::None);
        } else {
            let missing = ChunkSet::first(tot as usize);
            reply.send(Message::Nack { vpn, code: Code::Missing, missing });
        }
    }

    /// A client's exchange: remember the page to send back, or send it if the write is done.
    fn exchange<S: PageStore + ?Sized>(
        &mut self,
        store: &mut S,
        vpn: u64,
        size: u32,
        tot: u16,
        read_vpn: u64,
        reply: &mut Reply<'_>,
    ) {
        if let Some(p) = self.st.partial.get_mut(&(self.request, false)) {
            p.dest = Some(read_vpn);
        } else if let Some(f) = self.finished(false) {
            f.dest = Some(read_vpn);
            let f = *f;
            self.answer(store, f.vpn, f.code, f.dest, reply);
        } else if self.stale(vpn) {
            self.answer(store, vpn, Code::None, Some(read_vpn), reply);
        } else {
            self.begin(vpn, size, tot, false).dest = Some(read_vpn);
        }
    }

    /// Starts reassembling a write of `size` bytes in `tot` chunks (the client's, or a
    /// forwarded one if `offload`), dropping the oldest one in progress if there are too many.
    fn begin(&mut self, vpn: u64, size: u32, tot: u16, offload: bool) -> &mut Partial {
        if self.st.partial.len() >= MAX_PARTIAL_WRITES
            && let Some(oldest) =
                self.st.partial.iter().min_by_key(|(_, p)| p.born).map(|(&k, _)| k)
        {
            self.st.partial.remove(&oldest);
        }
        let born = self.st.packets;
        let size = size as usize;
        self.st.partial.entry((self.request, offload)).or_insert_with(|| Partial {
            vpn,
            tot,
            have: ChunkSet::EMPTY,
            bytes: 0,
            buf: vec![0; size],
            dest: None,
            born,
        })
    }

    /// One chunk of a write.
    fn data<S: PageStore + ?Sized>(&mut self, store: &mut S, d: &Data<'_>, reply: &mut Reply<'_>) {
        let offload = d.flags.contains(DataFlags::OFFLOAD);
        let key = (self.request, offload);
        if !self.st.partial.contains_key(&key)
            && let Some(f) = self.finished(offload).copied()
        {
            self.stats.duplicates += 1;
            reply.ack(f.vpn, f.code);
            return;
        }
        let p = self.begin(d.vpn, d.page_size, d.tot, offload);
        if p.vpn != d.vpn || p.tot != d.tot || p.buf.len() != d.page_size as usize {
            // Contradicts the write's earlier packets: ignored.
            return;
        }
        let num = d.num as usize;
        let duplicate = p.have.contains(num);
        if !duplicate {
            p.have.insert(num);
            p.bytes += d.payload.len();
            let off = d.off as usize;
            p.buf[off..off + d.payload.len()].copy_from_slice(d.payload);
        }
        if p.have.len() < p.tot as usize {
            self.stats.duplicates += duplicate as u64;
            let Some(p) = self.st.partial.get(&key) else { return };
            if num + 1 == p.tot as usize {
                // The last chunk came with gaps before it: name them all at once.
                let mut missing = ChunkSet::first(p.tot as usize);
                for i in p.have.iter() {
                    missing.remove(i);
                }
                reply.send(Message::Nack { vpn: d.vpn, code: Code::Missing, missing });
            }
            return;
        }
        let Some(p) = self.st.partial.remove(&key) else { return };
        let code = self.store(store, &p, offload);
        self.st.recent.push_back(Finished {
            request: self.request,
            offload,
            vpn: p.vpn,
            code,
            dest: p.dest,
        });
        if self.st.recent.len() > RECENT_WRITES {
            self.st.recent.pop_front();
        }
        self.answer(store, p.vpn, code, p.dest, reply);
    }

    /// Stores a whole write, unless it is stale; its code.
    fn store<S: PageStore + ?Sized>(&mut self, store: &mut S, p: &Partial, offload: bool) -> Code {
        if p.bytes != p.buf.len() {
            return Code::BadRequest;
        }
        let last = self.st.last.get(&p.vpn).copied();
        let stale = match last {
            // The client's own copy (or free) is newer than anything forwarded.
            Some((_, true)) if offload => true,
            Some((r, true)) => before(self.request, r),
            _ => false,
        };
        if stale {
            self.stats.stale_writes += 1;
            return Code::None;
        }
        match store.put(self.stream, p.vpn, &p.buf) {
            Ok(()) => {
                self.stats.pages_written += 1;
                self.st.last.insert(p.vpn, (self.request, !offload));
                Code::None
            }
            Err(StoreError::Full) => Code::Full,
            Err(StoreError::NotHeld) => Code::BadRequest,
        }
    }
}
