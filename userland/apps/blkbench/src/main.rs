//! `blkbench`: a client domain of a block driver, running a seeded workload of reads and
//! writes at chosen sizes, places and queue depths, and checking every block.
//!
//! `blkbench --channel NAME --transfers N --region FIRST:SECTORS [--seed S] [--depth D]
//! [--pattern random|sequential] [--mix rw|read|write] [--size BYTES] [--prefill] [--no-verify]
//! [--pause EVERY:MS] [--bad-sector SECTOR]`
//! opens a session over the channels `NAME-req` and `NAME-resp`, then runs the first `N`
//! transfers of the workload `blk_workloads::workload::Workload` seeded `S` over its region of the disk,
//! with up to `D` (default 8) in flight, never two that overlap. The workload's shape: random
//! places (default) or sequential; reads and writes (default), reads only or writes only; each
//! transfer `BYTES` long (a multiple of 512 up to 64 KiB), or by default 512 B to 64 KiB at
//! random. `--prefill` first writes the whole region in order, 64 KiB at a time, so that reads
//! find data. A write fills each sector with the bytes the workload gives it; a read checks
//! each sector against what the workload's replay says it holds. `--no-verify` leaves both out
//! (writes send whatever the buffer holds, reads are not looked at; the prefill still writes
//! its data): the block path alone, for the disk bench's instruction counts. `--pause
//! EVERY:MS` waits, after every `EVERY` transfers, for those in flight and then sleeps `MS`
//! milliseconds: the driver sits idle meanwhile (a test that it then uses no CPU). After the
//! workload it reports `blkbench: measured transfers=N bytes=B elapsed_ns=T verified=V` (the
//! workload alone, by its own clock); then it flushes, closes, and reports `blkbench: done ...` with its seed and
//! region, so that the host can replay the workload and check the disk image. Any error or
//! mismatch is reported and ends the domain with status 1.
//!
//! `--bad-requests SECTOR` first sends, before its Open, a write the driver must refuse as from
//! an unknown client, then after it one request of each other kind the driver must refuse (out
//! of range, past the end, misaligned, zero length, outside the data area), their writes aimed
//! at SECTOR, and checks each documented error; the host then finds SECTOR untouched.
//! `--bad-sector SECTOR` says that the disk cannot read SECTOR (the host makes every read of it
//! fail): each read that covers it must fail with [`BlkError::Device`], and every other transfer
//! must succeed and check out as usual. After the workload it reports `blkbench: bad sector
//! SECTOR: K reads of it failed with a device error, as they must`, and a read of it that
//! succeeds or fails otherwise is a failure of the run.
//! `--die-after N` makes it fault right after issuing transfer N, with transfers in flight
//! (a test of the driver). When the driver is gone, the client reports it and exits with
//! status 3.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;

use blk_client::{Closed, Session, SessionError};
use blk_interface::protocol::{BlkError, Op, Request};
use blk_workloads::workload::{
    Expected, MAX_SECTORS, Mix, Pattern, SECTOR, Shape, Transfer, Workload, sector_bytes,
};
use tessera::{Env, println};

tessera::main!(main);

/// The largest transfer, in bytes: one buffer slot of the area.
const SLOT: usize = MAX_SECTORS as usize * SECTOR;

/// What the command line asks for.
struct Options {
    channel: heapless::String<24>,
    transfers: u64,
    first: u64,
    sectors: u64,
    seed: u64,
    depth: usize,
    shape: Shape,
    prefill: bool,
    /// Make the data of every write and check that of every read (else the path alone).
    verify: bool,
    /// After every this many transfers, wait for those in flight and sleep `pause_ns`.
    pause_every: Option<u64>,
    pause_ns: u64,
    /// Send the bad requests, their writes aimed at this sector.
    bad_requests: Option<u64>,
    /// The sector the disk cannot read: every read covering it must fail with a device error.
    bad_sector: Option<u64>,
    die_after: Option<u64>,
}

fn options(env: Env) -> Result<Options, &'static str> {
    let mut o = Options {
        channel: heapless::String::new(),
        transfers: 1000,
        first: 0,
        sectors: 4096,
        seed: 1,
        depth: 8,
        shape: Shape::MIXED,
        prefill: false,
        verify: true,
        pause_every: None,
        pause_ns: 0,
        bad_requests: None,
        bad_sector: None,
        die_after: None,
    };
    let mut args = env.args;
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or("an option lacks its value");
        match a {
            "--channel" => o.channel.push_str(value()?).map_err(|_| "channel name too long")?,
            "--transfers" => o.transfers = value()?.parse().map_err(|_| "bad --transfers")?,
            "--seed" => o.seed = value()?.parse().map_err(|_| "bad --seed")?,
            "--depth" => o.depth = value()?.parse().map_err(|_| "bad --depth")?,
            "--region" => {
                let (f, s) = value()?.split_once(':').ok_or("--region FIRST:SECTORS")?;
                o.first = f.parse().map_err(|_| "bad region start")?;
                o.sectors = s.parse().map_err(|_| "bad region length")?;
            }
            "--pattern" => {
                o.shape.pattern = match value()? {
                    "random" => Pattern::Random,
                    "sequential" => Pattern::Sequential,
                    _ => return Err("--pattern random|sequential"),
                }
            }
            "--mix" => {
                o.shape.mix = match value()? {
                    "rw" => Mix::ReadWrite,
                    "read" => Mix::Read,
                    "write" => Mix::Write,
                    _ => return Err("--mix rw|read|write"),
                }
            }
            "--size" => {
                let bytes: usize = value()?.parse().map_err(|_| "bad --size")?;
                if bytes == 0 || !bytes.is_multiple_of(SECTOR) || bytes > SLOT {
                    return Err("--size is a multiple of 512 up to 65536");
                }
                o.shape.count = Some((bytes / SECTOR) as u32);
            }
            "--prefill" => o.prefill = true,
            "--no-verify" => o.verify = false,
            "--pause" => {
                let (every, ms) = value()?.split_once(':').ok_or("--pause EVERY:MILLISECONDS")?;
                o.pause_every = Some(every.parse().map_err(|_| "bad --pause count")?);
                o.pause_ns = ms.parse::<u64>().map_err(|_| "bad --pause time")? * 1_000_000;
            }
            "--bad-requests" => {
                o.bad_requests = Some(value()?.parse().map_err(|_| "bad --bad-requests")?)
            }
            "--bad-sector" => {
                o.bad_sector = Some(value()?.parse().map_err(|_| "bad --bad-sector")?)
            }
            "--die-after" => o.die_after = Some(value()?.parse().map_err(|_| "bad --die-after")?),
            _ => return Err("unknown option"),
        }
    }
    if o.channel.is_empty() || o.depth == 0 || o.sectors < u64::from(MAX_SECTORS) {
        return Err("usage: --channel NAME --transfers N --region FIRST:SECTORS");
    }
    Ok(o)
}

/// What a session step's failure makes this app report; the driver's departure starts with
/// `the driver is gone` (exit status 3).
fn failure(e: SessionError) -> &'static str {
    match e {
        SessionError::Gone(Closed::Request) => "the driver is gone (request channel closed)",
        SessionError::Gone(Closed::Response) => "the driver is gone (response channel closed)",
        SessionError::NoChannel | SessionError::NameTooLong => "no request or response channel",
        SessionError::Response(_) => "a response matched no request",
        SessionError::OtherId => "a response to another request",
        SessionError::Refused(_) => "a request the session refuses",
        SessionError::Failed(_) => "a request the driver failed",
        SessionError::NoSession => "no session after Open",
    }
}

/// The data area, once the session is open.
fn area(s: &mut Session) -> Result<&mut blk_client::DataArea, &'static str> {
    s.area().ok_or("no data area")
}

fn main(env: Env) -> i32 {
    let o = match options(env) {
        Ok(o) => o,
        Err(e) => {
            println!("blkbench: {e}");
            return 2;
        }
    };
    match run(&o) {
        Ok(()) => 0,
        Err(e) if e.starts_with("the driver is gone") => {
            println!("blkbench: {e}");
            3
        }
        Err(e) => {
            println!("blkbench: FAILED: {e}");
            1
        }
    }
}

fn run(o: &Options) -> Result<(), &'static str> {
    let mut s = Session::connect(&o.channel, o.depth).map_err(failure)?;
    if let Some(target) = o.bad_requests {
        // Before its Open, the driver does not know this client.
        let req = raw(Op::Write, target, 0, 512);
        refused(&mut s, "before open", req, BlkError::UnknownClient)?;
    }
    let info = s.open().map_err(|e| match e {
        SessionError::Failed(_) => "the driver refused the session",
        e => failure(e),
    })?;
    if info.area_len < (o.depth * SLOT) as u64 {
        return Err("the data area cannot hold a transfer per request in flight");
    }
    if o.first + o.sectors > info.capacity {
        return Err("the region is larger than the disk");
    }
    println!(
        "blkbench: session open: area {:#x} ({} KiB), disk {} sectors of {} bytes",
        info.area_base,
        info.area_len >> 10,
        info.capacity,
        info.sector_size
    );
    if let Some(target) = o.bad_requests {
        bad_requests(&mut s, info.capacity, target)?;
    }
    if o.prefill {
        let mut fill = Expected::new(o.seed, o.first, o.sectors);
        run_transfers(&mut s, o, true, &mut fill, Workload::prefill(o.first, o.sectors))?;
    }
    let mut model = Expected::after_shaped(o.seed, o.first, o.sectors, o.shape, o.prefill, 0);
    let transfers =
        Workload::shaped(o.seed, o.first, o.sectors, o.shape).take(o.transfers as usize);
    let start = tessera::time_ns();
    let moved = run_transfers(&mut s, o, o.verify, &mut model, transfers)?;
    let elapsed = tessera::time_ns() - start;
    println!(
        "blkbench: measured transfers={} bytes={} elapsed_ns={elapsed} verified={}",
        o.transfers, moved.bytes, o.verify
    );
    if let Some(bad) = o.bad_sector {
        println!(
            "blkbench: bad sector {bad}: {} reads of it failed with a device error, as they must",
            moved.bad_reads
        );
    }
    s.flush().map_err(|e| if e.is_gone() { failure(e) } else { "the flush failed" })?;
    s.close().map_err(|e| if e.is_gone() { failure(e) } else { "the close failed" })?;
    let written = model.written();
    println!(
        "blkbench: done transfers={} writes={} reads={} seed={} first={} sectors={} written_sectors={written}",
        o.transfers, moved.writes, moved.reads, o.seed, o.first, o.sectors
    );
    Ok(())
}

/// What a run of transfers did.
#[derive(Default)]
struct Moved {
    writes: u64,
    reads: u64,
    bytes: u64,
    /// Reads of the bad sector, each failed with a device error.
    bad_reads: u64,
}

/// Runs `transfers`, up to `depth` in flight, none overlapping another, keeping `model` (what
/// the region holds) up to date and, if `verify`, making every write's data and checking every
/// read against it.
fn run_transfers(
    s: &mut Session,
    o: &Options,
    verify: bool,
    model: &mut Expected,
    transfers: impl Iterator<Item = Transfer>,
) -> Result<Moved, &'static str> {
    // In flight: (request id, transfer, buffer slot).
    let mut flight: Vec<(u64, Transfer, usize)> = Vec::with_capacity(o.depth);
    let mut free: Vec<usize> = (0..o.depth).rev().collect();
    let mut moved = Moved::default();
    let mut want = [0u8; SECTOR];
    let mut pending = transfers.peekable();
    // The transfer number before which the last pause was taken.
    let mut paused_before = 0;
    while pending.peek().is_some() || !flight.is_empty() {
        let pause_due = pending.peek().is_some_and(|t| {
            o.pause_every.is_some_and(|k| t.number > 0 && t.number % k == 0)
                && t.number != paused_before
        });
        if pause_due && flight.is_empty() {
            // Everything issued has completed: the driver has nothing to do until the pause ends.
            paused_before = pending.peek().map_or(0, |t| t.number);
            let until = tessera::time_ns() + o.pause_ns;
            while tessera::time_ns() < until {
                let _ = tessera::syscall::block(until);
            }
            continue;
        }
        let can_issue = !pause_due
            && pending
                .peek()
                .is_some_and(|t| !free.is_empty() && !flight.iter().any(|(_, f, _)| f.overlaps(t)));
        if can_issue {
            let t = pending.next().expect("peeked");
            let slot = free.pop().expect("checked");
            let len = t.count as usize * SECTOR;
            let offset = (slot * SLOT) as u64;
            let req = if t.write {
                if verify {
                    let buf = area(s)?.bytes(slot * SLOT, len);
                    for (i, chunk) in buf.chunks_mut(SECTOR).enumerate() {
                        sector_bytes(o.seed, t.number, t.sector + i as u64, chunk);
                    }
                }
                model.apply(&t);
                s.client().write(t.sector, offset, len as u32)
            } else {
                s.client().read(t.sector, offset, len as u32)
            }
            .map_err(|_| "a transfer the session refuses")?;
            s.send(&req).map_err(failure)?;
            flight.push((req.id, t, slot));
            if o.die_after == Some(t.number + 1) {
                println!("blkbench: dying on purpose, {} transfers in flight", flight.len());
                tessera::fault::now();
            }
            continue;
        }
        let done = s.completion().map_err(failure)?;
        let (id, status) = (done.id, done.status);
        let at = flight.iter().position(|(i, _, _)| *i == id).ok_or("an unknown completion")?;
        let (_, t, slot) = flight.swap_remove(at);
        let covers = |s: u64| t.sector <= s && s < t.sector + u64::from(t.count);
        if !t.write && o.bad_sector.is_some_and(covers) {
            if status != Err(BlkError::Device) {
                println!(
                    "blkbench: transfer {} read the bad sector and got {:?}, not a device error",
                    t.number, status
                );
                return Err("a read of the bad sector did not fail with a device error");
            }
            moved.bad_reads += 1;
            free.push(slot);
            continue;
        }
        if status.is_err() {
            println!("blkbench: transfer {} failed: {:?}", t.number, status);
            return Err("a transfer failed");
        }
        moved.bytes += u64::from(t.count) * SECTOR as u64;
        if t.write {
            moved.writes += 1;
        } else if verify {
            moved.reads += 1;
            let buf = area(s)?.bytes(slot * SLOT, t.count as usize * SECTOR);
            for (i, got) in buf.chunks(SECTOR).enumerate() {
                model.sector(t.sector + i as u64, &mut want);
                if got != want {
                    println!(
                        "blkbench: sector {} read back wrong (transfer {})",
                        t.sector + i as u64,
                        t.number
                    );
                    return Err("a block read back differs from what was written");
                }
            }
        } else {
            moved.reads += 1;
        }
        free.push(slot);
    }
    Ok(moved)
}

/// Sends one request of each kind the driver must refuse, its writes aimed at sector
/// `target`, and checks each documented error.
fn bad_requests(s: &mut Session, capacity: u64, target: u64) -> Result<(), &'static str> {
    let cases: [(&str, Request, BlkError); 5] = [
        ("out of range", raw(Op::Read, capacity, 0, 512), BlkError::OutOfRange),
        ("past the end", raw(Op::Write, capacity - 1, 0, 1024), BlkError::OutOfRange),
        ("misaligned", raw(Op::Write, target, 0, 100), BlkError::Misaligned),
        ("zero length", raw(Op::Write, target, 0, 0), BlkError::ZeroLength),
        (
            "outside the area",
            raw(Op::Write, target, u64::MAX - 511, 512),
            BlkError::OutsideDataArea,
        ),
    ];
    for (what, req, want) in cases {
        refused(s, what, req, want)?;
    }
    Ok(())
}

/// Sends `req` and checks that the driver refuses it with `want`.
fn refused(s: &mut Session, what: &str, req: Request, want: BlkError) -> Result<(), &'static str> {
    s.send(&req).map_err(failure)?;
    let r =
        s.response().map_err(|e| if e.is_gone() { failure(e) } else { "a malformed response" })?;
    if r.id != req.id || r.status != Err(want) {
        println!("blkbench: {what}: got {:?}, want {:?}", r.status, want);
        return Err("a bad request did not get its documented error");
    }
    println!("blkbench: {what}: refused with {}", want.name());
    Ok(())
}

/// A request the client side would refuse to build, with a fresh id (not one of the
/// client's, so the client state is untouched).
fn raw(op: Op, sector: u64, offset: u64, len: u32) -> Request {
    static NEXT: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1 << 62);
    let id = NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    Request { id, op, sector, offset, len }
}
