//! `--self-test N`: two driver domains of one machine, each on its own NIC of the same hub,
//! move N Ethernet frames from one to the other, and the receiver checks every one.
//!
//! The receiver (`--receive`) broadcasts a READY frame every 10 ms until the first data frame
//! arrives; the sender (`--send`) waits for one, takes the receiver's MAC from it, and sends N
//! data frames to that MAC, taking each completion after the interrupt. After each batch of
//! frames it takes, the receiver acknowledges (an ACK frame with the count it has), and the
//! sender keeps at most [`WINDOW`] frames beyond the last acknowledgement: flow control, so
//! that the receiver never runs out of posted buffers (a NIC without one drops the frame). The
//! sender ends at the acknowledgement of the last frame, the receiver once that ACK is
//! transmitted: no frame is in flight when either driver exits. Frame `i` is [`frame_len`]`(i)` bytes (60 and 1,514 first, then sizes spread
//! over 60..=1,514), of EtherType [`ETHERTYPE`] (IEEE 802's local experimental one): a kind
//! byte, its sequence number, its length, a payload drawn from the sequence number, and an
//! FNV-1a checksum of all that. The receiver checks each frame's destination, length,
//! checksum and every payload byte, and that the sequence numbers come in order with none
//! missing; both print a summary, which a test reads.
//!
//! Neither side ever polls: each waits on its device's interrupt (the receiver's READY
//! timer aside, until the first frame). With `--pause K:MS` the sender sleeps MS ms after
//! every K frames, once they are all transmitted, so that the receiver has nothing to do
//! meanwhile (the idle check).

use tessera::events::{self, WaitError};
use tessera::{println, syscall};

use net_interface::frame::MAX_FRAME;
use net_interface::{MacAddr, Nic, NicError};

/// A MAC address's bytes.
type Mac = [u8; 6];

/// The shortest frame on the wire without its frame check sequence (shorter ones are padded
/// to it by real hardware; a virtio-net device leaves them as they are).
pub const MIN_FRAME: usize = 60;
/// The frames' EtherType: IEEE 802's "local experimental EtherType 1".
pub const ETHERTYPE: u16 = 0x88b5;
/// The kinds of frame.
const READY: u8 = 1;
const DATA: u8 = 2;
const ACK: u8 = 3;
/// The most data frames the sender has sent beyond the receiver's last acknowledgement: half
/// the receiver's buffers, so that it always has one posted for the next frame (a NIC out of
/// buffers drops frames, and QEMU's hub then holds them back instead).
const WINDOW: u32 = crate::device::RX_BUFFERS as u32 / 2;
/// How often the receiver repeats its READY frame until data arrives.
const READY_EVERY_NS: u64 = 10_000_000;
/// A data frame's fields: kind at 14, sequence number at 16, length at 20, payload from 22,
/// checksum in the last 4 bytes.
const SEQ: usize = 16;
const LEN: usize = 20;
const PAYLOAD: usize = 22;

/// The length of data frame `seq`: 60 and 1,514 bytes for the first two, then sizes spread
/// over `MIN_FRAME..=MAX_FRAME`.
pub fn frame_len(seq: u32) -> usize {
    match seq {
        0 => MIN_FRAME,
        1 => MAX_FRAME,
        _ => MIN_FRAME + (mix(seq) as usize) % (MAX_FRAME - MIN_FRAME + 1),
    }
}

/// A 32-bit mix of `x` (the finaliser of MurmurHash3).
fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x85eb_ca6b);
    x ^= x >> 13;
    x = x.wrapping_mul(0xc2b2_ae35);
    x ^ (x >> 16)
}

/// FNV-1a, 32 bits.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// The payload byte stream of frame `seq`.
fn payload(seq: u32) -> impl Iterator<Item = u8> {
    let mut x = mix(seq ^ 0x5bd1_e995);
    core::iter::repeat_with(move || {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (x >> 24) as u8
    })
}

/// Writes data frame `seq` from `src` to `dst` into `buf`, which is [`frame_len`]`(seq)`
/// bytes long.
fn data_frame(buf: &mut [u8], dst: Mac, src: Mac, seq: u32) {
    let len = buf.len();
    header(buf, dst, src, DATA);
    buf[SEQ..SEQ + 4].copy_from_slice(&seq.to_be_bytes());
    buf[LEN..LEN + 2].copy_from_slice(&(len as u16).to_be_bytes());
    for (b, p) in buf[PAYLOAD..len - 4].iter_mut().zip(payload(seq)) {
        *b = p;
    }
    let sum = fnv1a(&buf[14..len - 4]);
    buf[len - 4..len].copy_from_slice(&sum.to_be_bytes());
}

/// Writes the Ethernet header and kind of a frame of at least [`MIN_FRAME`] bytes (the rest
/// zeroed up to [`MIN_FRAME`]).
fn header(buf: &mut [u8], dst: Mac, src: Mac, kind: u8) {
    buf[..MIN_FRAME].fill(0);
    buf[..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    buf[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    buf[14] = kind;
}

/// What a received frame is.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// A data frame that passed every check, from this MAC.
    Data { seq: u32, src: Mac },
    /// A READY frame, from this MAC.
    Ready(Mac),
    /// An ACK frame: the receiver has this many frames.
    Ack(u32),
    /// A frame of another EtherType or kind (not the self-test's).
    Foreign,
    /// A data frame that failed a check, which, and its source MAC.
    Bad(&'static str, Mac),
}

/// Checks received frame `f`, on the NIC with MAC `me`.
fn inspect(f: &[u8], me: Mac) -> Seen {
    if f.len() < MIN_FRAME || f[12..14] != ETHERTYPE.to_be_bytes() {
        return Seen::Foreign;
    }
    let mut src = [0; 6];
    src.copy_from_slice(&f[6..12]);
    match f[14] {
        READY => return Seen::Ready(src),
        ACK => return Seen::Ack(u32::from_be_bytes([f[SEQ], f[SEQ + 1], f[SEQ + 2], f[SEQ + 3]])),
        DATA => {}
        _ => return Seen::Foreign,
    }
    if f[..6] != me {
        return Seen::Bad("a data frame for another MAC", src);
    }
    let seq = u32::from_be_bytes([f[SEQ], f[SEQ + 1], f[SEQ + 2], f[SEQ + 3]]);
    let len = usize::from(u16::from_be_bytes([f[LEN], f[LEN + 1]]));
    if len != f.len() || len != frame_len(seq) {
        return Seen::Bad("a data frame of the wrong length", src);
    }
    let sum = u32::from_be_bytes([f[len - 4], f[len - 3], f[len - 2], f[len - 1]]);
    if sum != fnv1a(&f[14..len - 4]) {
        return Seen::Bad("a data frame with a bad checksum", src);
    }
    if !f[PAYLOAD..len - 4].iter().copied().eq(payload(seq).take(len - 4 - PAYLOAD)) {
        return Seen::Bad("a data frame whose payload differs", src);
    }
    Seen::Data { seq, src }
}

/// The device's interrupt, as the self-test waits for it.
pub struct Interrupts {
    ep: usize,
    seen: u64,
    /// Interrupts taken.
    pub taken: u64,
}

impl Interrupts {
    /// Interrupts signalled on endpoint `ep` from now on (read before the device can
    /// interrupt).
    pub fn new(ep: usize) -> Self {
        Interrupts { ep, seen: events::value(ep), taken: 0 }
    }

    /// The interrupt's endpoint.
    pub fn endpoint(&self) -> usize {
        self.ep
    }

    /// Waits until the device interrupts (and acknowledges it: the device's status, then the
    /// kernel's line) or the clock reaches `deadline_ns`; whether it interrupted.
    pub(crate) fn wait<N: Nic>(
        &mut self,
        nic: &mut N,
        deadline_ns: u64,
    ) -> Result<bool, &'static str> {
        match events::wait(self.ep, self.seen, deadline_ns) {
            Ok(value) => {
                self.taken += value - self.seen;
                self.seen = value;
                nic.interrupted();
                syscall::irq_ack(self.ep).map_err(|_| "irq_ack failed")?;
                Ok(true)
            }
            Err(WaitError::Timeout) => Ok(false),
            Err(_) => Err("the interrupt's endpoint closed"),
        }
    }
}

/// Takes every finished transmission; how many.
pub(crate) fn take_transmitted<N: Nic>(nic: &mut N) -> u32 {
    let mut n = 0;
    while nic.poll_transmit() {
        n += 1;
    }
    n
}

/// The frames' sizes and bytes, for a summary.
#[derive(Default)]
struct Sizes {
    smallest: usize,
    largest: usize,
    bytes: u64,
}

impl Sizes {
    fn add(&mut self, len: usize) {
        self.smallest = if self.bytes == 0 { len } else { self.smallest.min(len) };
        self.largest = self.largest.max(len);
        self.bytes += len as u64;
    }
}

/// The sending side: waits for the receiver's READY, then sends `frames` data frames to it,
/// pausing `pause.1` ns after every `pause.0` if asked. Whether it succeeded.
pub fn send<N: Nic>(
    nic: &mut N,
    irq: &mut Interrupts,
    frames: u32,
    pause: Option<(u32, u64)>,
) -> bool {
    match sending(nic, irq, frames, pause) {
        Ok((peer, sizes)) => {
            println!(
                "virtio-net: self-test: sent {frames} frames of {} to {} bytes ({} bytes) to {}, {} interrupts",
                sizes.smallest,
                sizes.largest,
                sizes.bytes,
                MacAddr(peer),
                irq.taken
            );
            true
        }
        Err(e) => {
            println!("virtio-net: self-test FAILED: {e}");
            false
        }
    }
}

fn sending<N: Nic>(
    nic: &mut N,
    irq: &mut Interrupts,
    frames: u32,
    pause: Option<(u32, u64)>,
) -> Result<(Mac, Sizes), &'static str> {
    let me = nic.mac().0;
    let peer = 'ready: loop {
        while let Some(seen) = nic.receive(|f| inspect(f, me)) {
            if let Seen::Ready(peer) = seen {
                break 'ready peer;
            }
        }
        irq.wait(nic, u64::MAX)?;
    };
    let mut sizes = Sizes::default();
    let (mut sent, mut done, mut acked) = (0u32, 0u32, 0u32);
    let mut next_pause = pause.map_or(u32::MAX, |(every, _)| every.max(1));
    loop {
        while sent < frames.min(next_pause).min(acked + WINDOW) {
            let len = frame_len(sent);
            match nic.transmit(len, |buf| data_frame(buf, peer, me, sent)) {
                Ok(()) => {
                    sizes.add(len);
                    sent += 1;
                }
                Err(NicError::Full) => break,
                Err(_) => return Err("the device refused a frame"),
            }
        }
        done += take_transmitted(nic);
        // Acknowledgements; anything else (the receiver's READY again) is dropped.
        while let Some(seen) = nic.receive(|f| inspect(f, me)) {
            if let Seen::Ack(n) = seen {
                if n > sent {
                    return Err("an acknowledgement of frames not sent");
                }
                acked = acked.max(n);
            }
        }
        if done == frames && acked == frames {
            return Ok((peer, sizes));
        }
        // An acknowledgement opened the window, or a completion freed a buffer: send on.
        if sent < frames.min(next_pause).min(acked + WINDOW)
            && nic.tx_in_flight() < nic.tx_capacity()
        {
            continue;
        }
        if let Some((every, ns)) = pause
            && acked == sent
            && sent == next_pause
        {
            tessera::thread::sleep(ns);
            next_pause += every.max(1);
            continue;
        }
        irq.wait(nic, u64::MAX)?;
    }
}

/// The receiving side: announces itself until data comes, then receives and checks `frames`
/// data frames. Whether every one arrived, in order and intact.
pub fn receive<N: Nic>(nic: &mut N, irq: &mut Interrupts, frames: u32) -> bool {
    let mut report = Received::default();
    let result = receiving(nic, irq, frames, &mut report);
    let Received { sizes, good, lost, bad, .. } = &report;
    println!(
        "virtio-net: self-test: received {good} frames of {} to {} bytes ({} bytes) in order, {lost} lost, {bad} bad, {} interrupts",
        sizes.smallest, sizes.largest, sizes.bytes, irq.taken
    );
    match result {
        Ok(()) if *lost == 0 && *bad == 0 => true,
        Ok(()) => {
            println!(
                "virtio-net: self-test FAILED: {}",
                report.first_fault.unwrap_or("frames lost")
            );
            false
        }
        Err(e) => {
            println!("virtio-net: self-test FAILED: {e}");
            false
        }
    }
}

/// What the receiver saw.
#[derive(Default)]
struct Received {
    sizes: Sizes,
    /// Frames that passed every check, in order.
    good: u32,
    /// Sequence numbers skipped.
    lost: u32,
    /// Frames that failed a check, or came out of order.
    bad: u32,
    first_fault: Option<&'static str>,
}

fn receiving<N: Nic>(
    nic: &mut N,
    irq: &mut Interrupts,
    frames: u32,
    r: &mut Received,
) -> Result<(), &'static str> {
    let me = nic.mac().0;
    let mut next = 0u32;
    let mut ready_at = 0;
    // The sender's MAC (from its first data frame), what it was last told, and the
    // transmissions at the device.
    let (mut sender, mut acked, mut in_flight) = (None, 0u32, 0u32);
    loop {
        if next == 0 && tessera::time_ns() >= ready_at {
            match nic.transmit(MIN_FRAME, |buf| header(buf, [0xff; 6], me, READY)) {
                Ok(()) => in_flight += 1,
                Err(NicError::Full) => {}
                Err(_) => return Err("the device refused a READY frame"),
            }
            ready_at = tessera::time_ns() + READY_EVERY_NS;
        }
        in_flight -= take_transmitted(nic).min(in_flight);
        while let Some((seen, len)) = nic.receive(|f| (inspect(f, me), f.len())) {
            match seen {
                Seen::Data { seq, src } if seq == next => {
                    sender = Some(src);
                    r.good += 1;
                    r.sizes.add(len);
                    next += 1;
                }
                Seen::Data { seq, src } if seq > next && seq < frames => {
                    sender = Some(src);
                    r.lost += seq - next;
                    r.first_fault.get_or_insert("frames lost");
                    r.good += 1;
                    r.sizes.add(len);
                    next = seq + 1;
                }
                Seen::Data { .. } => {
                    r.bad += 1;
                    r.first_fault.get_or_insert("a data frame out of order");
                }
                Seen::Bad(why, src) => {
                    // Under flow control on a hub it can only be the next frame, damaged: it
                    // is counted, and the run goes on to its end (and fails).
                    sender = Some(src);
                    r.bad += 1;
                    r.first_fault.get_or_insert(why);
                    next += 1;
                }
                Seen::Ready(_) | Seen::Ack(_) | Seen::Foreign => {}
            }
        }
        // Every batch is acknowledged: the sender may be waiting for exactly these frames
        // (before a pause, or at the end).
        if let Some(to) = sender
            && next > acked
        {
            let ack = |buf: &mut [u8]| {
                header(buf, to, me, ACK);
                buf[SEQ..SEQ + 4].copy_from_slice(&next.to_be_bytes());
            };
            match nic.transmit(MIN_FRAME, ack) {
                Ok(()) => (acked, in_flight) = (next, in_flight + 1),
                // Again after a transmission completes.
                Err(NicError::Full) => {}
                Err(_) => return Err("the device refused an ACK frame"),
            }
        }
        if next >= frames && acked == next && in_flight == 0 {
            return Ok(());
        }
        let deadline = if next == 0 { ready_at } else { u64::MAX };
        irq.wait(nic, deadline)?;
    }
}
