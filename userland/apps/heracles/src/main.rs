//! `heracles`: a stretch paged by the Heracles hierarchy to this domain's own disk stream.
//!
//! Usage: `heracles --pager SPEC --program random|compress|matmul|filter [--scale test|default]
//! [--pages N] [--steps N] [--seed S] [--fill] [--lock N] [--duration MS]
//! [--resize-at STEP:BYTES] [--mark STEP]`.
//!
//! `SPEC` is a [`pager::spec::PagerSpec`] (a manifest's `pager = { ... }` arrives as
//! `--pager SPEC`): the hierarchy, the frames, the replacement policy and the block session to
//! page to. With `store=remote` the app also opens a UDP session on the network
//! driver of the spec's `net=` channels and makes a remote paging client
//! ([`remote_client::RemoteClient`]) on the spec's `servers=` (`mirror=server` mirrors every
//! page to a second server; `netc=yes` compresses every page it sends, but under a compressed
//! cache, whose WKdm pages go compressed anyway), printing `heracles: remote: server A.B.C.D:P stream S role
//! Primary|Mirror` for each server that made a stream, and hands it to the driver beside the
//! disk; with no static server, or none that made a stream, it says so and pages to the
//! disk. At the end it prints `heracles: remote program=... mirror=... servers=N
//! pages_written=.. pages_read=.. packets_sent=.. packets_received=.. retransmits=..
//! failovers=.. revocations=.. strays=.. control_ignored=..` and `heracles: remote wire
//! netc=yes|no compressed_writes=.. page_bytes_written=..` (the client's counts) and
//! `heracles: remote control grown=.. holds=.. waits=.. refilled=.. found_again=.. partial=..
//! pages_moved=..` (its control plane's, `remote_client::ControlCounts`) and `heracles: remote
//! session sent=.. received=.. dropped_tx_full=.. dropped_tx_error=.. dropped_rx_full=..
//! lent_sent=..` (the network driver's accounts of its session), then releases its streams
//! (`heracles: remote: released, ...`). The app opens that session, makes the
//! driver's window, binds a paged stretch
//! driver ([`paged_driver::PagedDriver`]) to a stretch as large as the program needs, and runs
//! the program in it:
//! - `random`: `N` pages (default 64), `STEPS` seeded steps (default 2,000), after writing
//!   every page once in order with `--fill`: each step writes a
//!   whole page (zero, compressible or incompressible contents, by a hash of the page and its
//!   version) or reads one and checks every byte; then every page is checked once more. It
//!   prints `heracles: random pages=N steps=S checked=C mismatches=M`.
//!   `--lock N` locks the stretch's first `N` pages before the steps (and reports how many are
//!   still resident after them: `heracles: locked pages=N resident=R`). `--duration MS` stops the steps after `MS` milliseconds of its clock (before the final
//!   check). `--resize-at STEP:BYTES` resizes the cache (the compressed pool or the eviction area) to
//!   `BYTES` before step `STEP`, through the driver, and prints the result. `--mark STEP`
//!   prints `heracles: step STEP` as the workload reaches that step, a line a cluster scenario
//!   can act on (kill a server mid-run); it may be given more than once.
//! - `compress`, `matmul`, `filter`: the thesis's programs (`paging_programs`), at the
//!   default (1/16 of the thesis) or the test scale. They print their checksum.
//!
//! Then it prints `heracles: done program=... hierarchy=... frames=F elapsed_ns=T faults=...`:
//! the run's virtual time by its own clock and the pager's counts (faults, zero fills, fetches,
//! evictions, cache hits and misses, compressed pages, device reads and writes, prefetched
//! pages, the session's requests and the time spent waiting for them), and
//! `heracles: reuse refetches=N min=.. max=.. sum=.. pool_peak_pages=P`: the reuse distance of
//! the pages fetched back (the evictions between a page's own and its fetch) beside the most
//! pages the compressed pool held, and
//! `heracles: cost ...`: where the driver's time went by this domain's clock (in faults, in
//! kernel calls, in the compressed cache's codec, waiting for the disk), and `heracles: hit
//! ...`: the distribution of the driver's time in faults its cache answered without the disk,
//! all of them and then by how the page was stored (`kind=zero|raw|compressed`), and
//! `heracles: disk errors ...` (transfers retried, swap slots retired, writes and evictions
//! failed, pages lost, and the time slept before retries by its clock), `heracles: store
//! combination=K store=local|remote mirror=none|server|disk ...` and `heracles: store events
//! ...` (which of the thesis's ten hierarchies, 1 to 10, and the backing store manager's
//! counts: pages written and read remotely and locally, mirror copies, fallbacks to the disk,
//! pages brought back after a revocation, pages lost with their servers, and the remote
//! store's servers, failovers and retransmissions; all zero over the local disk alone, which
//! has no backing store manager and whose pages the disk line counts),
//! `heracles: lost pages=N handler_told=M` and a line
//! `heracles: lost page=P va=0x... handler_told=true|false` for each page the pager lost (the
//! disk kept failing the read of its only copy), by the driver's report, and whether this
//! app's handler heard of it. The random workload expects zeros in a page lost by the access
//! that reads it (`heracles: page P was lost; it reads zeros`). Exit status 0
//! when the program's result is right, 1 on a mismatch or error, 2 on bad arguments.

#![no_std]
#![no_main]
#![deny(unsafe_code)]

extern crate alloc;

mod area;

use alloc::boxed::Box;
use alloc::vec;

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use paged_driver::{FaultSource, HitKind, PagedConfig, PagedDriver};
use pager::app::{AppHandler, GuaranteeChange};
use pager::spec::PagerSpec;
use paging_programs::{Program, Scale};
use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{Rng as _, SeedableRng};
use stretch_driver::StretchDriver;
use tessera::{Env, PAGE_SIZE, Rights, paging, println};

use alloc::rc::Rc;
use blk_client::{StreamCounts, StreamDisk};
use core::cell::RefCell;
use net_client::{ChannelTransport, Session};
use pager::backing::Mirror;
use pager::remote::RemoteStore;
use pager_spec::RemoteSpec;
use remote_client::{Config, Qos, RemoteClient, Shared};

tessera::main!(main);

const USAGE: &str = "usage: heracles --pager SPEC --program random|compress|matmul|filter \
                     [--scale test|default] [--pages N] [--steps N] [--seed S] [--fill] \
                     [--lock N] [--duration MS] [--resize-at STEP:BYTES] [--mark STEP]";

/// What to run.
enum Work {
    Random { pages: usize, steps: usize },
    Thesis { program: Program, scale: Scale },
}

impl Work {
    fn name(&self) -> &'static str {
        match self {
            Work::Random { .. } => "random",
            Work::Thesis { program, .. } => program.name(),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Work::Random { pages, .. } => pages * PAGE_SIZE,
            Work::Thesis { program, scale } => program.bytes_needed(*scale),
        }
    }
}

struct Options {
    spec: PagerSpec,
    work: Work,
    /// `--resize-at STEP:BYTES`: resize the cache at this step of the random workload.
    resize_at: Option<(usize, usize)>,
    /// `--fill`: the random workload first writes every page once, in order.
    fill: bool,
    /// `--duration MS`: the random workload stops after this long (by its own clock), or
    /// after its steps.
    duration_ms: Option<u64>,
    /// `--lock N`: lock the stretch's first `N` pages before the run.
    lock: usize,
    /// `--mark STEP` (repeatable): print `heracles: step STEP` as the random workload
    /// reaches each.
    mark: alloc::vec::Vec<usize>,
    seed: u64,
}

fn options(env: Env) -> Result<Options, alloc::string::String> {
    let mut spec = None;
    let mut program = None;
    let mut scale = Scale::Default;
    let (mut pages, mut steps, mut seed) = (64usize, 2000usize, 1u64);
    let mut resize_at = None;
    let mut fill = false;
    let mut duration_ms = None;
    let mut lock = 0;
    let mut mark = alloc::vec::Vec::new();
    let mut args = env.args;
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or("an option lacks its value");
        match a {
            "--pager" => {
                spec = Some(PagerSpec::parse(value()?).map_err(|e| alloc::format!("{e}"))?)
            }
            "--program" => program = Some(value()?),
            "--scale" => {
                scale = match value()? {
                    "test" => Scale::Test,
                    "default" => Scale::Default,
                    _ => return Err("--scale test|default".into()),
                }
            }
            "--pages" => pages = value()?.parse().map_err(|_| "bad --pages")?,
            "--steps" => steps = value()?.parse().map_err(|_| "bad --steps")?,
            "--seed" => seed = value()?.parse().map_err(|_| "bad --seed")?,
            "--fill" => fill = true,
            "--lock" => lock = value()?.parse().map_err(|_| "bad --lock")?,
            "--mark" => mark.push(value()?.parse().map_err(|_| "bad --mark")?),
            "--duration" => duration_ms = Some(value()?.parse().map_err(|_| "bad --duration")?),
            "--resize-at" => {
                let bad = "--resize-at STEP:BYTES";
                let (step, bytes) = value()?.split_once(':').ok_or(bad)?;
                resize_at = Some((step.parse().map_err(|_| bad)?, bytes.parse().map_err(|_| bad)?));
            }
            _ => return Err(alloc::format!("unknown argument {a}")),
        }
    }
    let spec = spec.ok_or("--pager is required")?;
    let work = match program.ok_or("--program is required")? {
        "random" if pages > 0 => Work::Random { pages, steps },
        "random" => return Err("--pages must be at least 1".into()),
        name => Work::Thesis {
            program: Program::from_name(name).ok_or("--program random|compress|matmul|filter")?,
            scale,
        },
    };
    Ok(Options { spec, work, seed, resize_at, fill, duration_ms, lock, mark })
}

fn main(env: Env) -> i32 {
    let o = match options(env) {
        Ok(o) => o,
        Err(e) => {
            println!("heracles: {e}");
            println!("heracles: {USAGE}");
            return 2;
        }
    };
    match run(&o) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            println!("heracles: error {e}");
            1
        }
    }
}

/// The driver type this app binds.
type Driver = PagedDriver<StreamDisk>;

/// Revocations heard of, and frames released to them.
static REVOCATIONS: AtomicU64 = AtomicU64::new(0);
static RELEASED: AtomicU64 = AtomicU64::new(0);

/// Pages the pager lost (their numbers in the stretch, the first [`LOST_KEPT`]), as its
/// handler heard, and how many.
const LOST_KEPT: usize = 32;
static LOST: [AtomicUsize; LOST_KEPT] = [const { AtomicUsize::new(0) }; LOST_KEPT];
static LOST_COUNT: AtomicUsize = AtomicUsize::new(0);

/// The app's handler: it counts revocations (it runs inside one, so it only notes them) and
/// keeps its cache as it is, and notes the pages the pager lost (the random workload then
/// expects zeros where it lost them).
struct Handler;

impl AppHandler for Handler {
    fn guarantees_changed(&mut self, change: GuaranteeChange) -> Option<usize> {
        let GuaranteeChange::FramesRevoked { released, .. } = change;
        REVOCATIONS.fetch_add(1, Ordering::Relaxed);
        RELEASED.fetch_add(released as u64, Ordering::Relaxed);
        None
    }

    fn page_lost(&mut self, page: usize) {
        let n = LOST_COUNT.fetch_add(1, Ordering::Relaxed);
        if let Some(slot) = LOST.get(n) {
            slot.store(page, Ordering::Relaxed);
        }
    }
}

/// The pages lost from the `seen`-th on (those the handler kept).
fn lost_since(seen: usize) -> impl Iterator<Item = usize> {
    let n = LOST_COUNT.load(Ordering::Relaxed).min(LOST_KEPT);
    (seen.min(n)..n).map(|i| LOST[i].load(Ordering::Relaxed))
}

fn run(o: &Options) -> Result<bool, alloc::string::String> {
    let spec = &o.spec;
    let disk = StreamDisk::open(&spec.disk, spec.swap_at, spec.swap)?;
    let disk = if spec.loans { disk } else { disk.without_loans() };
    let counts = disk.counts();
    let config = PagedConfig {
        hierarchy: spec.hierarchy,
        policy: spec.policy,
        frames: spec.frames,
        ahead: spec.ahead,
        harvest: spec.harvest,
    };
    let window = paging::create_window(config.window_pages())
        .map_err(|e| alloc::format!("window: {e:?}"))?;
    let bytes = o.work.bytes();
    let remote = match spec.store.remote() {
        Some(r) => connect_remote(r, spec.netc(), bytes.div_ceil(PAGE_SIZE) as u64),
        None => None,
    };
    let store: Option<Box<dyn RemoteStore>> =
        remote.clone().map(|r| Box::new(r) as Box<dyn RemoteStore>);
    let driver = PagedDriver::new(config, disk, window)
        .with_clock(tessera::time_ns)
        .with_app(Box::new(Handler))
        .with_store(spec.store.backing(), store);
    let driver: &'static mut Driver = Box::leak(Box::new(driver));
    let rights = Rights(Rights::READ.0 | Rights::WRITE.0);
    let info = paging::bind(driver, bytes, rights).map_err(|e| alloc::format!("bind: {e}"))?;
    let held =
        paging::with_driver::<Driver, _>(info.base, |d, _| d.frames_held()).unwrap_or((0, 0));
    println!(
        "heracles: program={} hierarchy={} frames={}+{} stretch_pages={} pager {}",
        o.work.name(),
        spec.hierarchy.name(),
        held.0,
        held.1,
        info.pages,
        spec
    );
    #[allow(unsafe_code)]
    // SAFETY: the stretch was just created and bound, read-write, and this is the only
    // reference to it (the app never touches it otherwise).
    let region = unsafe { area::stretch(info.base, info.bytes()) };
    let locked = info.base..info.base + o.lock.min(info.pages) * PAGE_SIZE;
    if o.lock > 0 {
        let r = paging::with_driver::<Driver, _>(info.base, |d, k| d.lock(k, locked.clone()));
        println!("heracles: lock of {} pages: {r:?}", o.lock.min(info.pages));
    }
    let start = tessera::time_ns();
    let ok = match o.work {
        Work::Random { pages, steps } => {
            let until = o.duration_ms.map(|ms| start.saturating_add(ms.saturating_mul(1_000_000)));
            let mut at_step = |step: usize| {
                if until.is_some_and(|until| tessera::time_ns() >= until) {
                    return false;
                }
                if o.mark.contains(&step) {
                    println!("heracles: step {step}");
                }
                if let Some((at, bytes)) = o.resize_at
                    && at == step
                {
                    let r =
                        paging::with_driver::<Driver, _>(info.base, |d, _| d.resize_cache(bytes));
                    println!("heracles: cache resized to {bytes} bytes at step {step}: {r:?}");
                }
                true
            };
            random(region, pages, steps, o.seed, o.fill, &mut at_step)
        }
        Work::Thesis { program, scale } => {
            let summary = program.run(scale, region, o.seed);
            println!(
                "heracles: {} checksum={:#018x} ok={}",
                program.name(),
                summary.checksum,
                summary.ok
            );
            summary.ok
        }
    };
    let elapsed = tessera::time_ns().saturating_sub(start);
    if o.lock > 0 {
        let pages = o.lock.min(info.pages);
        let resident = paging::with_driver::<Driver, _>(info.base, |d, _| {
            (0..pages).filter(|p| d.resident(*p)).count()
        });
        println!("heracles: locked pages={pages} resident={}", resident.unwrap_or(0));
    }
    report(o, info.base, elapsed, counts.get())?;
    if let Some(remote) = remote {
        report_remote(o, &remote)?;
    }
    Ok(ok)
}

/// The remote paging client this app made and shares with its driver.
type Remote = Shared<RemoteClient<ChannelTransport>>;

/// The remote paging client of `r` (the spec's `net=`, `servers=`, `traders=`, `mirror=`,
/// `spread=`, and the contracts `svqos=` and `netqos=` it asks of each server), compressing
/// the pages it sends if `netc` ([`pager_spec::PagerSpec::netc`]), for a stretch of `pages`
/// pages: `None` (and a line saying why) if it has neither
/// static servers nor traders, or no server made a stream, so that the driver pages to the
/// local disk.
fn connect_remote(r: &RemoteSpec, netc: bool, pages: u64) -> Option<Remote> {
    if r.servers.is_empty() && r.traders.is_empty() {
        println!("heracles: remote: no servers or traders; paging to the local disk");
        return None;
    }
    let Some(transport) = ChannelTransport::connect(&r.net) else {
        println!(
            "heracles: remote: no channels {0}-req and {0}-resp; paging to the local disk",
            r.net
        );
        return None;
    };
    let mut session = Session::new(transport);
    if let Err(e) = session.open(0) {
        println!(
            "heracles: remote: the open of a UDP port failed: {e:?}; paging to the local disk"
        );
        return None;
    }
    let mut config = Config::new(r.servers.clone(), pages);
    config.mirror = r.mirror == Mirror::Server;
    config.spread = r.spread;
    config.netc = netc;
    config.traders = r.traders.clone();
    config.local_disk = true;
    let qos =
        |q: pager_spec::Qos| Qos { period_ns: q.period_ns, slice_ns: q.slice_ns, extra: q.extra };
    config.cpu = qos(r.server_qos);
    config.net = qos(r.net_qos);
    match RemoteClient::connect(session, tessera::time_ns, config) {
        Ok(client) => {
            for (addr, stream, role, _, _) in client.servers() {
                println!("heracles: remote: server {addr} stream {stream} role {role:?}");
            }
            Some(Shared(Rc::new(RefCell::new(client))))
        }
        Err(e) => {
            println!("heracles: remote: no server made a stream ({e:?}); paging to the local disk");
            None
        }
    }
}

/// Prints what the remote paging client did (the backing store's counts are on the
/// `heracles: store` line), then releases the client's streams on its servers (so that they
/// can end) and closes its session.
fn report_remote(o: &Options, remote: &Remote) -> Result<(), &'static str> {
    let mut client = remote.0.borrow_mut();
    let r = client.stats();
    let (strays, ignored) = client.strays();
    println!(
        "heracles: remote program={} mirror={} servers={} pages_written={} pages_read={} \
         packets_sent={} packets_received={} retransmits={} failovers={} revocations={} \
         strays={} control_ignored={}",
        o.work.name(),
        o.spec.store.backing().mirror().name(),
        r.servers,
        r.pages_written,
        r.pages_read,
        r.packets_sent,
        r.packets_received,
        r.retransmits,
        r.failovers,
        r.revocations,
        strays,
        ignored,
    );
    // A line of its own: the one above is near the log's line length.
    println!(
        "heracles: remote wire netc={} compressed_writes={} page_bytes_written={}",
        if client.netc() { "yes" } else { "no" },
        r.compressed_writes,
        r.page_bytes_written,
    );
    let c = client.control_counts();
    println!(
        "heracles: remote control grown={} holds={} waits={} refilled={} found_again={} \
         partial={} pages_moved={}",
        c.grown, c.holds, c.waits, c.refilled, c.found_again, c.partial, c.pages_moved,
    );
    // The driver's accounts of the client's session, before its release: what left and
    // what the driver dropped.
    if let Some(a) = client.session().accounts() {
        println!(
            "heracles: remote session sent={} received={} dropped_tx_full={} \
             dropped_tx_error={} dropped_rx_full={} lent_sent={}",
            a.packets_sent,
            a.packets_received,
            a.dropped_tx_full,
            a.dropped_tx_error,
            a.dropped_rx_full,
            a.lent_sent,
        );
    }
    client.release();
    let closed = client.session().close();
    println!("heracles: remote: released, session closed: {closed:?}");
    Ok(())
}

/// Prints the run's counts.
fn report(
    o: &Options,
    base: usize,
    elapsed_ns: u64,
    stream: StreamCounts,
) -> Result<(), &'static str> {
    let (s, costs, held, hits, by_kind, lost, latencies) =
        paging::with_driver::<Driver, _>(base, |d, _| {
            let by_kind = HitKind::ALL.map(|k| d.hit_costs_of(k).clone());
            let lost: alloc::vec::Vec<usize> = d.lost_pages().collect();
            let latencies = *d.fault_latencies();
            (
                d.pager_stats(),
                d.costs(),
                d.frames_held(),
                d.hit_costs().clone(),
                by_kind,
                lost,
                latencies,
            )
        })
        .ok_or("the driver is busy")?;
    let s = s.ok_or("the driver is not bound")?;
    println!(
        "heracles: done program={} hierarchy={} frames={} elapsed_ns={} faults={} zero_fills={} \
         fetches={} evictions={} dirty_evictions={}",
        o.work.name(),
        o.spec.hierarchy.name(),
        o.spec.frames,
        elapsed_ns,
        s.faults,
        s.zero_fills,
        s.fetches,
        s.evictions,
        s.dirty_evictions,
    );
    let c = s.cache;
    println!(
        "heracles: cache hits={} misses={} hit_permille={} prefetch_hits={} compressed_pages={} \
         compressed_bytes={} raw_pages={} zero_pages={}",
        c.hits,
        c.misses,
        c.hit_permille(),
        c.prefetch_hits,
        c.compressed_pages,
        c.compressed_bytes,
        c.raw_pages,
        c.zero_pages,
    );
    println!(
        "heracles: disk device_reads={} device_writes={} pages_read={} pages_written={} \
         prefetched={} requests={} lent={} wait_ns={}",
        s.disk.device_reads,
        s.disk.device_writes,
        s.disk.pages_read,
        s.disk.pages_written,
        s.disk.prefetched,
        stream.reads + stream.writes,
        stream.lent,
        stream.wait_ns,
    );
    println!(
        "heracles: disk errors retries={} retired_slots={} write_failures={} failed_evictions={} \
         lost_pages={} retry_wait_ns={}",
        s.disk.retries,
        s.disk.retired_slots,
        s.disk.write_failures,
        s.failed_evictions,
        s.lost_pages,
        stream.retry_wait_ns,
    );
    let st = s.store;
    // Two lines: a log record holds 256 bytes.
    println!(
        "heracles: store combination={} store={} mirror={} remote_now={} remote_writes={} \
         remote_reads={} local_writes={} local_reads={} mirror_writes={} fallbacks={}",
        o.spec.combination().number(),
        if st.backing.is_remote() { "remote" } else { "local" },
        st.backing.mirror().name(),
        st.remote_now,
        st.remote_writes,
        st.remote_reads,
        st.local_writes,
        st.local_reads,
        st.mirror_writes,
        st.fallbacks,
    );
    println!(
        "heracles: store events populated={} lost_remote={} stale_freed={} revocations={} \
         servers_lost={} remote_pages={} servers={} failovers={} retransmits={}",
        st.populated,
        st.lost_remote,
        st.stale_freed,
        st.revocations,
        st.servers_lost,
        st.remote_pages,
        st.remote.servers,
        st.remote.failovers,
        st.remote.retransmits,
    );
    println!(
        "heracles: reuse refetches={} min={} max={} sum={} pool_peak_pages={}",
        s.refetches, s.reuse_min, s.reuse_max, s.reuse_sum, c.peak_pages,
    );
    // The driver names each page lost by address; the handler heard of each by number.
    let heard: alloc::vec::Vec<usize> = lost_since(0).collect();
    println!(
        "heracles: lost pages={} handler_told={}",
        lost.len(),
        LOST_COUNT.load(Ordering::Relaxed)
    );
    for (i, va) in lost.iter().enumerate() {
        let page = (va - base) / PAGE_SIZE;
        let told = heard.get(i) == Some(&page);
        println!("heracles: lost page={page} va={va:#x} handler_told={told}");
    }
    let p = |permille| hits.percentile_ns(permille).unwrap_or(0);
    println!(
        "heracles: hit faults={} p50_ns={} p90_ns={} p99_ns={} max_ns={}",
        hits.count(),
        p(500),
        p(900),
        p(990),
        hits.max_ns()
    );
    for (kind, hits) in HitKind::ALL.iter().zip(&by_kind) {
        let p = |permille| hits.percentile_ns(permille).unwrap_or(0);
        println!(
            "heracles: hit kind={} faults={} p50_ns={} p90_ns={} max_ns={}",
            kind.name(),
            hits.count(),
            p(500),
            p(900),
            hits.max_ns()
        );
    }
    // Each fault's time in the driver by where its page came from, as `BIN=FAULTS` for the
    // bins that have any (quarter decades from 1 µs: `cargo xtask bench report` draws them).
    for source in FaultSource::ALL {
        let mut line = alloc::format!("heracles: latency source={}", source.name());
        for (bin, n) in latencies[source as usize].iter().enumerate().filter(|(_, n)| **n > 0) {
            line.push_str(&alloc::format!(" {bin}={n}"));
        }
        println!("{line}");
    }
    println!(
        "heracles: frames guaranteed={} optimistic={} revocations={} released={} revoked={}",
        held.0,
        held.1,
        REVOCATIONS.load(Ordering::Relaxed),
        RELEASED.load(Ordering::Relaxed),
        s.frames_revoked,
    );
    println!(
        "heracles: cost faults={} fault_ns={} kernel_calls={} kernel_ns={} codec_ns={} disk_ns={}",
        costs.faults,
        costs.fault_ns,
        costs.kernel_calls,
        costs.kernel_ns,
        costs.codec_ns,
        stream.wait_ns,
    );
    Ok(())
}

/// The contents of `page` at `version`: zero, compressible or incompressible.
fn contents(page: usize, version: u32, out: &mut [u8]) {
    let mut rng = SplitMix64::seed_from_u64((page as u64) << 32 | u64::from(version));
    let mut next = || rng.next_u64();
    match (version, next() % 3) {
        (0, _) | (_, 0) => out.fill(0),
        (_, 1) => {
            let base = next() as u8;
            for (i, b) in out.iter_mut().enumerate() {
                *b = base.wrapping_add((i / 64) as u8);
            }
        }
        _ => {
            for chunk in out.chunks_mut(8) {
                chunk.copy_from_slice(&next().to_le_bytes()[..chunk.len()]);
            }
        }
    }
}

/// The random workload's checks: pages read against the versions written, and losses the
/// pager's handler heard of.
struct Checker {
    versions: alloc::vec::Vec<u32>,
    want: [u8; PAGE_SIZE],
    /// Losses taken into account so far.
    seen: usize,
    checked: u64,
    mismatches: u64,
}

impl Checker {
    /// Takes the losses heard of since the last call into account: a lost page reads zeros
    /// (version 0) until written again. Whether `page` is among them.
    fn losses(&mut self, page: usize) -> bool {
        let mut hit = false;
        for lost in lost_since(self.seen) {
            if let Some(v) = self.versions.get_mut(lost) {
                *v = 0;
            }
            hit |= lost == page;
        }
        self.seen = LOST_COUNT.load(Ordering::Relaxed);
        hit
    }

    /// Checks every byte of `page`: its version's contents, or zeros if reading it lost it.
    fn check(&mut self, region: &[u8], page: usize) {
        contents(page, self.versions[page], &mut self.want);
        let got = &region[page * PAGE_SIZE..(page + 1) * PAGE_SIZE];
        let mut differs = got != &self.want[..];
        if self.losses(page) {
            println!("heracles: page {page} was lost; it reads zeros");
            differs = got.iter().any(|&b| b != 0);
        }
        if differs {
            if self.mismatches < 4 {
                println!("heracles: page {page} version {} differs", self.versions[page]);
            }
            self.mismatches += 1;
        }
        self.checked += 1;
    }

    /// Writes `page`'s next version.
    fn write(&mut self, region: &mut [u8], page: usize) {
        let version = self.versions[page] + 1;
        contents(page, version, &mut region[page * PAGE_SIZE..(page + 1) * PAGE_SIZE]);
        // A page lost by this write's fault is whole again: it was written over.
        self.losses(page);
        self.versions[page] = version;
    }
}

/// The checked random workload; true if every byte read was right.
fn random(
    region: &mut [u8],
    pages: usize,
    steps: usize,
    seed: u64,
    fill: bool,
    at_step: &mut dyn FnMut(usize) -> bool,
) -> bool {
    let mut c = Checker {
        versions: vec![0u32; pages],
        want: [0; PAGE_SIZE],
        seen: LOST_COUNT.load(Ordering::Relaxed),
        checked: 0,
        mismatches: 0,
    };
    if fill {
        for page in 0..pages {
            c.write(region, page);
        }
    }
    let mut rng = paging_programs::Prng::new(seed);
    let mut done = 0;
    for step in 0..steps {
        if !at_step(step) {
            break;
        }
        done += 1;
        let page = rng.below(pages as u32) as usize;
        if rng.below(5) < 2 {
            c.write(region, page);
        } else {
            c.check(region, page);
        }
    }
    for page in 0..pages {
        c.check(region, page);
    }
    let (checked, mismatches) = (c.checked, c.mismatches);
    println!(
        "heracles: random pages={pages} steps={done} checked={checked} mismatches={mismatches}"
    );
    mismatches == 0
}
