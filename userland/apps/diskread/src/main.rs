//! `diskread`: the disk-scheduling benchmark client. A client domain of a block driver that
//! reads in one of the anticipation paper's patterns for a fixed time by its own clock and
//! reports what it got: requests, bytes, and the latency of each from issue to response.
//!
//! `diskread --channel NAME --pattern sequential|alternate|random|bursts|hog [--start SECTOR]
//! [--span SECTORS] [--size BYTES] [--think US] [--burst N --pause US] [--depth D]
//! [--duration MS] [--seed S] [--write-every K]`
//! opens a session over the channels `NAME-req` and `NAME-resp`, then issues requests of
//! `BYTES` (default 65536: a multiple of the sector size, at most the driver's largest
//! transfer) inside `[SECTOR, SECTOR + SECTORS)` (default: from sector 0 to the disk's end),
//! placed by `blk_workloads::reader::ReadCursor`:
//! - `sequential`: one after the other, again from the start when the next would pass the end;
//! - `alternate`: every other block (one request's length skipped after each);
//! - `random`: at random places aligned to the request size, seeded `S` (default 1);
//! - `bursts`: sequential, but after every `N` requests it pauses `--pause` microseconds
//!   instead of its think time (the paper's adversary; both `--burst` and `--pause` required);
//! - `hog`: random places, `D` requests (default 4) in flight at all times, no think time.
//!
//! The other patterns are synchronous readers: one request in flight, and `--think`
//! microseconds (default 0) from each completion to the next issue. Think times and pauses
//! block the domain until a deadline; they never spin. `--write-every K` makes every `K`-th
//! request a write of the buffer as it is (mixed streams); reads are not checked. Each request
//! in flight has its own buffer in the data area, at `slot * BYTES`.
//!
//! It stops issuing once `--duration` milliseconds (default 2000) have passed since its first
//! request, waits for those in flight, flushes if it wrote, closes the session and reports.
//! Output:
//! - `diskread NAME: pattern=P start=S span=N size=B think_us=T depth=D duration_ms=MS`, then
//!   `burst=N pause_us=U` for bursts, `seed=S` for the random patterns, `write_every=K` if set;
//! - `diskread NAME: disk accounts guaranteed_ns=G extra_ns=X periods=P missed=M`: its
//!   stream's disk time as the driver accounts it (read from the words the driver publishes
//!   after the data area, `blk_client::accounts`), if the driver schedules by contracts;
//! - `diskread NAME: done reads=R writes=W bytes=B first_ns=F last_ns=L elapsed_ns=E
//!   mean_latency_ns=M max_latency_ns=X`: `F` when the first request was issued, `L` when the
//!   last completed, `E = L - F`.
//!
//! Bad arguments: the reason and the usage, exit status 2 (also for those only the session
//! shows wrong: size, range, depth). An error from the driver: `diskread NAME: error ...`,
//! status 1. The driver gone (a channel closed): `diskread NAME: the driver is gone (...)`,
//! status 3.

#![no_std]
#![no_main]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use blk_client::{Session, SessionError};
use blk_interface::protocol::SessionInfo;
use blk_workloads::reader::{ReadCursor, ReadPattern, ReadTally, ReaderShape};
use tessera::{Env, println};

tessera::main!(main);

const USAGE: &str = "usage: diskread --channel NAME --pattern \
    sequential|alternate|random|bursts|hog [--start SECTOR] [--span SECTORS] [--size BYTES] \
    [--think US] [--burst N --pause US] [--depth D] [--duration MS] [--seed S] \
    [--write-every K]";

/// The pattern the command line names, before the session gives its geometry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sequential,
    Alternate,
    Random,
    Bursts,
    Hog,
}

/// What the command line asks for.
struct Options {
    channel: heapless::String<24>,
    kind: Kind,
    start: u64,
    span: Option<u64>,
    size: u32,
    think_us: u64,
    burst: u32,
    pause_us: u64,
    depth: usize,
    duration_ms: u64,
    seed: u64,
    write_every: Option<u64>,
}

fn options(env: Env) -> Result<Options, String> {
    let mut channel = heapless::String::new();
    let mut kind = None;
    let mut start: u64 = 0;
    let mut span: Option<u64> = None;
    let mut size: u32 = 65536;
    let mut think_us: Option<u64> = None;
    let mut burst: Option<u32> = None;
    let mut pause_us: Option<u64> = None;
    let mut depth: Option<usize> = None;
    let mut duration_ms: u64 = 2000;
    let mut seed: u64 = 1;
    let mut write_every: Option<u64> = None;
    let mut args = env.args;
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or("an option lacks its value");
        match a {
            "--channel" => channel.push_str(value()?).map_err(|_| "channel name too long")?,
            "--pattern" => {
                kind = Some(match value()? {
                    "sequential" => Kind::Sequential,
                    "alternate" => Kind::Alternate,
                    "random" => Kind::Random,
                    "bursts" => Kind::Bursts,
                    "hog" => Kind::Hog,
                    _ => return Err("--pattern sequential|alternate|random|bursts|hog".into()),
                })
            }
            "--start" => start = value()?.parse().map_err(|_| "bad --start")?,
            "--span" => span = Some(value()?.parse().map_err(|_| "bad --span")?),
            "--size" => size = value()?.parse().map_err(|_| "bad --size")?,
            "--think" => think_us = Some(value()?.parse().map_err(|_| "bad --think")?),
            "--burst" => burst = Some(value()?.parse().map_err(|_| "bad --burst")?),
            "--pause" => pause_us = Some(value()?.parse().map_err(|_| "bad --pause")?),
            "--depth" => depth = Some(value()?.parse().map_err(|_| "bad --depth")?),
            "--duration" => duration_ms = value()?.parse().map_err(|_| "bad --duration")?,
            "--seed" => seed = value()?.parse().map_err(|_| "bad --seed")?,
            "--write-every" => {
                write_every = Some(value()?.parse().map_err(|_| "bad --write-every")?)
            }
            _ => return Err(format!("unknown option {a}")),
        }
    }
    if channel.is_empty() {
        return Err("--channel is required".into());
    }
    let kind = kind.ok_or("--pattern is required")?;
    if size == 0 {
        return Err("--size is 0".into());
    }
    if span == Some(0) {
        return Err("--span is 0".into());
    }
    if duration_ms == 0 {
        return Err("--duration is 0".into());
    }
    if write_every == Some(0) {
        return Err("--write-every is 0".into());
    }
    if (kind == Kind::Bursts) != (burst.is_some() && pause_us.is_some()) {
        return Err("--burst N and --pause US go together, with --pattern bursts only".into());
    }
    if burst == Some(0) {
        return Err("--burst is 0".into());
    }
    if kind != Kind::Hog && depth.is_some() {
        return Err("--depth is for --pattern hog only (the others read synchronously)".into());
    }
    if kind == Kind::Hog && think_us.is_some() {
        return Err("--think does not apply to --pattern hog (it never thinks)".into());
    }
    let depth = depth.unwrap_or(if kind == Kind::Hog { 4 } else { 1 });
    if depth == 0 {
        return Err("--depth is 0".into());
    }
    if think_us.unwrap_or(0).checked_mul(1000).is_none()
        || pause_us.unwrap_or(0).checked_mul(1000).is_none()
        || duration_ms.checked_mul(1_000_000).is_none()
    {
        return Err("a time too long to count in nanoseconds".into());
    }
    Ok(Options {
        channel,
        kind,
        start,
        span,
        size,
        think_us: think_us.unwrap_or(0),
        burst: burst.unwrap_or(0),
        pause_us: pause_us.unwrap_or(0),
        depth,
        duration_ms,
        seed,
        write_every,
    })
}

/// Why the run ended early.
enum Failure {
    /// Arguments the session shows wrong (exit status 2).
    Usage(String),
    /// The driver answered with an error, or something it sent makes no sense (status 1).
    Error(String),
    /// A channel closed (status 3).
    Gone(&'static str),
}

fn main(env: Env) -> i32 {
    let o = match options(env) {
        Ok(o) => o,
        Err(e) => {
            println!("diskread: {e}");
            println!("diskread: {USAGE}");
            return 2;
        }
    };
    let name = o.channel.as_str();
    match run(&o) {
        Ok(()) => 0,
        Err(Failure::Usage(e)) => {
            println!("diskread {name}: {e}");
            println!("diskread {name}: {USAGE}");
            2
        }
        Err(Failure::Error(e)) => {
            println!("diskread {name}: error {e}");
            1
        }
        Err(Failure::Gone(why)) => {
            println!("diskread {name}: the driver is gone ({why})");
            3
        }
    }
}

impl From<SessionError> for Failure {
    fn from(e: SessionError) -> Failure {
        match e {
            SessionError::Gone(closed) => Failure::Gone(closed.name()),
            e => Failure::Error(format!("{e}")),
        }
    }
}

/// What `what` failing in the session makes this app report.
fn failed(what: &str) -> impl FnOnce(SessionError) -> Failure {
    move |e| match e {
        SessionError::Refused(e) | SessionError::Failed(e) => {
            Failure::Error(format!("{what} failed: {}", e.name()))
        }
        e => e.into(),
    }
}

fn run(o: &Options) -> Result<(), Failure> {
    let mut s = Session::connect(&o.channel, o.depth).map_err(|e| match e {
        SessionError::NoChannel | SessionError::NameTooLong => {
            Failure::Error(format!("no channels {0}-req and {0}-resp in the manifest", o.channel))
        }
        e => e.into(),
    })?;
    let info = s.open().map_err(failed("the open"))?;
    let shape = match shape(o, &info) {
        Ok(shape) => shape,
        Err(e) => {
            close(&mut s)?;
            return Err(Failure::Usage(e));
        }
    };
    let mut cursor = ReadCursor::new(shape).map_err(|e| Failure::Usage(e.message().into()))?;
    report_start(o, &shape);
    let tally = run_requests(&mut s, o, &mut cursor)?;
    if tally.writes > 0 {
        s.flush().map_err(failed("the flush"))?;
    }
    // The stream's disk time, as the driver accounts it (zero if the driver does not schedule
    // by contracts).
    if let Some(a) = blk_client::accounts::read(&info)
        && a != blk_interface::protocol::StreamAccounts::default()
    {
        println!(
            "diskread {}: disk accounts guaranteed_ns={} extra_ns={} periods={} missed={}",
            o.channel, a.guaranteed_ns, a.extra_ns, a.periods, a.deadlines_missed
        );
    }
    close(&mut s)?;
    println!(
        "diskread {}: done reads={} writes={} bytes={} first_ns={} last_ns={} elapsed_ns={} \
         mean_latency_ns={} max_latency_ns={}",
        o.channel,
        tally.reads,
        tally.writes,
        tally.bytes,
        tally.first_ns.unwrap_or(0),
        tally.last_ns,
        tally.elapsed_ns(),
        tally.mean_latency_ns(),
        tally.max_latency_ns
    );
    Ok(())
}

/// Ends the session.
fn close(s: &mut Session) -> Result<(), Failure> {
    s.close().map_err(failed("the close"))
}

/// The requests' shape, checked against the session: the size against the sector size, the
/// largest transfer and the data area; the range against the disk; the depth against the
/// driver's cap.
fn shape(o: &Options, info: &SessionInfo) -> Result<ReaderShape, String> {
    let sector = info.sector_size;
    if sector == 0 || !o.size.is_multiple_of(sector) {
        return Err(format!("--size {} is not a multiple of the sector size ({sector})", o.size));
    }
    if o.size > info.max_transfer {
        return Err(format!(
            "--size {} is more than the driver's largest transfer ({})",
            o.size, info.max_transfer
        ));
    }
    if info.max_in_flight > 0 && o.depth > usize::from(info.max_in_flight) {
        return Err(format!(
            "--depth {} is more than the driver allows in flight ({})",
            o.depth, info.max_in_flight
        ));
    }
    if (o.depth as u64).saturating_mul(u64::from(o.size)) > info.area_len {
        return Err(format!(
            "the data area ({} bytes) cannot hold {} buffers of {} bytes",
            info.area_len, o.depth, o.size
        ));
    }
    if o.start >= info.capacity {
        return Err(format!("--start {} is past the disk ({} sectors)", o.start, info.capacity));
    }
    let span = o.span.unwrap_or(info.capacity - o.start);
    if span > info.capacity - o.start {
        return Err(format!(
            "--start {} --span {span} passes the disk's end ({} sectors)",
            o.start, info.capacity
        ));
    }
    let sectors = o.size / sector;
    if span < u64::from(sectors) {
        return Err(format!("--span {span} is shorter than one request ({sectors} sectors)"));
    }
    let pattern = match o.kind {
        Kind::Sequential => ReadPattern::Sequential,
        Kind::Alternate => ReadPattern::Alternate,
        Kind::Random => ReadPattern::Random,
        Kind::Bursts => ReadPattern::Bursts { burst: o.burst, pause_ns: o.pause_us * 1000 },
        Kind::Hog => ReadPattern::Hog,
    };
    Ok(ReaderShape {
        start: o.start,
        span,
        sectors,
        think_ns: o.think_us * 1000,
        pattern,
        seed: o.seed,
        write_every: o.write_every,
    })
}

/// The start line: the run's parameters as `key=value` words.
fn report_start(o: &Options, shape: &ReaderShape) {
    let mut extra = String::new();
    if let ReadPattern::Bursts { burst, .. } = shape.pattern {
        extra.push_str(&format!(" burst={burst} pause_us={}", o.pause_us));
    }
    if shape.pattern.is_random() {
        extra.push_str(&format!(" seed={}", o.seed));
    }
    if let Some(k) = o.write_every {
        extra.push_str(&format!(" write_every={k}"));
    }
    println!(
        "diskread {}: pattern={} start={} span={} size={} think_us={} depth={} duration_ms={}{extra}",
        o.channel,
        shape.pattern.name(),
        shape.start,
        shape.span,
        o.size,
        o.think_us,
        o.depth,
        o.duration_ms
    );
}

/// A request in flight.
struct InFlight {
    id: u64,
    /// Its buffer: bytes `[slot * size, (slot + 1) * size)` of the data area.
    slot: usize,
    sector: u64,
    write: bool,
    issued_ns: u64,
    think_after_ns: u64,
}

/// Issues the cursor's requests, up to the depth in flight, each after the think time of the
/// one before, until the duration has passed since the first; then waits for those in flight.
fn run_requests(
    s: &mut Session,
    o: &Options,
    cursor: &mut ReadCursor,
) -> Result<ReadTally, Failure> {
    let size = o.size;
    let duration_ns = o.duration_ms * 1_000_000;
    let mut flight: Vec<InFlight> = Vec::with_capacity(o.depth);
    let mut free: Vec<usize> = (0..o.depth).rev().collect();
    let mut tally = ReadTally::default();
    // When issuing stops: the duration after the first issue.
    let mut end_ns: Option<u64> = None;
    // The next request's earliest issue: the last completion plus its think time.
    let mut ready_ns = 0;
    let mut stopping = false;
    loop {
        if !stopping && !free.is_empty() {
            let now = tessera::time_ns();
            if end_ns.is_some_and(|end| now >= end) {
                stopping = true;
                continue;
            }
            if now < ready_ns {
                if end_ns.is_some_and(|end| ready_ns >= end) {
                    // The next request would come after the end.
                    stopping = true;
                    continue;
                }
                if flight.is_empty() {
                    sleep_until(ready_ns);
                    continue;
                }
            } else {
                let r = cursor.next_request();
                let slot = free.pop().expect("checked");
                let offset = slot as u64 * u64::from(size);
                let req = if r.write {
                    s.client().write(r.sector, offset, size)
                } else {
                    s.client().read(r.sector, offset, size)
                }
                .map_err(|e| {
                    Failure::Error(format!("the client refuses sector {}: {}", r.sector, e.name()))
                })?;
                let issued_ns = tessera::time_ns();
                tally.issued(issued_ns);
                end_ns.get_or_insert(issued_ns.saturating_add(duration_ns));
                s.send(&req)?;
                flight.push(InFlight {
                    id: req.id,
                    slot,
                    sector: r.sector,
                    write: r.write,
                    issued_ns,
                    think_after_ns: r.think_after_ns,
                });
                continue;
            }
        }
        if flight.is_empty() {
            return Ok(tally);
        }
        let c = s.completion()?;
        let done_ns = tessera::time_ns();
        let at = flight
            .iter()
            .position(|f| f.id == c.id)
            .ok_or_else(|| Failure::Error(format!("a response to request {} not sent", c.id)))?;
        let f = flight.swap_remove(at);
        if let Err(e) = c.status {
            let what = if f.write { "write" } else { "read" };
            return Err(Failure::Error(format!(
                "{what} at sector {} failed: {}",
                f.sector,
                e.name()
            )));
        }
        tally.completed(f.write, u64::from(size), f.issued_ns, done_ns);
        free.push(f.slot);
        ready_ns = done_ns.saturating_add(f.think_after_ns);
    }
}

/// Blocks until the clock reaches `deadline_ns` (a wake-up before it, by an event, blocks
/// again).
fn sleep_until(deadline_ns: u64) {
    while tessera::time_ns() < deadline_ns {
        let _ = tessera::syscall::block(deadline_ns);
    }
}
