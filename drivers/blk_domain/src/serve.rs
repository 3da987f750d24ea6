//! Serving client domains over the block protocol (`blk_interface`).
//!
//! A client is a pair of IO channels from the manifest: `NAME-req` from the client to the
//! driver and `NAME-resp` back. For each, the driver makes a data area (a DMA stretch of its
//! own) and gives the client read-write rights to it; the protocol's driver side
//! ([`blk_server::Server`]) does the rest. One loop serves every client and the device:
//! take the device's completions after its interrupt (acknowledging it), answer them, take
//! each client's requests, and when nothing moved, block until an endpoint changes (a
//! client's channel or the interrupt). Responses are sent without waiting: a client whose
//! response ring stays full (it does not read its responses) is closed, never waited for.
//! A client that dies is closed; its area is not given to anyone else. When every client is
//! gone and nothing is in flight, the driver exits, reporting how many requests it served and
//! the longest it took to see an interrupt after the kernel signalled it (its wake-up latency,
//! by its own clock against the kernel's stamp in the control block).
//!
//! **Scheduling.** With a disk model on the disk (the manifest's `model`, in the device's
//! control-block slot) or a `--scheduler` named, Reads and Writes go through a disk scheduler
//! (`disk_sched`: a policy wrapped in anticipation, or USD's streams, each client's stream
//! under the disk-time contract its manifest gives it), one at the device, and with a model
//! each completes at the model's time (`blk_server::stage`). The loop then also wakes when
//! the scheduler's wait ends or the model's completion is due, and raises the control block's
//! `device_busy` while the device has a request whose completion the model times (the kernel
//! then idles with no timer, so under `-icount` the model alone sets the disk's time). It
//! prints each stream's completed periods (`disk period: stream=NAME start= end= guaranteed=
//! extra= missed=`), publishes each stream's accounts after its data area
//! (`blk_interface::protocol::StreamAccounts`), and at the end the scheduler's waits (`disk waits:`)
//! and its own cost (`disk scheduler:`).

use core::sync::atomic::{AtomicU64, Ordering};

use abi::{ChannelRole, Rights};
use alloc::vec::Vec;
use atropos::Contract;
use blk_interface::device::BlockDevice;
use blk_interface::protocol::{ACCOUNT_WORDS, StreamAccounts};
use blk_server::stage::Stage;
use blk_server::{Config, DataArea, Server};
use disk_model::{DiskModel, DiskParams};
use disk_sched::{PolicyName, scheduler};
use tessera::channel::{self, ChannelError, Receiver, Sender};
use tessera::{PAGE_SIZE, dma, events, println, syscall};

/// Each client's data area.
pub const AREA_BYTES: usize = 512 << 10;

/// The most clients served.
const MAX_CLIENTS: usize = 8;

/// How the loop serves: the driver's name (for its messages), the device interrupt's endpoint,
/// and whether it dies on purpose.
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// The driver's name, prefixed to what it prints.
    pub driver: &'static str,
    /// The device's index in the control block's `devices`.
    pub device: usize,
    /// The endpoint the device's interrupt signals.
    pub irq: usize,
    /// With `Some(n)`, the driver faults (and the kernel kills it) once it has answered `n`
    /// requests from the device: a test of what its clients see.
    pub die_after: Option<u64>,
    /// The largest transfer one request may ask for, in bytes.
    pub max_transfer: u32,
    /// The disk scheduler named on the command line (`--scheduler`), if any: with none, the
    /// disk is scheduled by USD if it has a model, else not at all.
    pub scheduler: Option<PolicyName>,
    /// Whether the scheduler anticipates (`--no-anticipation` turns it off).
    pub anticipate: bool,
}

/// What `--scheduler` accepts.
pub const SCHEDULER_USAGE: &str = "--scheduler fcfs|sstf|sptf|aged-sptf|cscan|stride|usd";

/// A client's channels.
struct Client {
    name: [u8; 32],
    rx: Receiver,
    tx: Sender,
    open: bool,
    /// Its disk-time contract, from its manifest.
    contract: Option<Contract>,
    /// Where its stream's accounts are published (the words after its data area).
    accounts: Option<&'static [AtomicU64]>,
}

impl Client {
    fn name(&self) -> &str {
        let len = self.name.iter().position(|&b| b == 0).unwrap_or(32);
        core::str::from_utf8(&self.name[..len]).unwrap_or("?")
    }

    /// Its stream's name: its channels' (`NAME-req`, `NAME-resp`).
    fn stream(&self) -> &str {
        self.name().strip_suffix("-req").unwrap_or(self.name())
    }

    /// Publishes `a` where the client reads its accounts.
    fn publish(&self, a: StreamAccounts) {
        let Some(words) = self.accounts else { return };
        let seq = words[0].load(Ordering::Relaxed);
        words[0].store(seq + 1, Ordering::Release);
        for (w, v) in words[1..].iter().zip(a.words()) {
            w.store(v, Ordering::Relaxed);
        }
        words[0].store(seq + 2, Ordering::Release);
    }
}

/// The clients named by the control block's channels: each receiving end `NAME-req` with its
/// sending end `NAME-resp`, and the client's domain.
fn clients(driver: &str) -> heapless::Vec<(Client, u64), MAX_CLIENTS> {
    let mut out = heapless::Vec::new();
    for slot in tessera::dcb().channels.iter() {
        if slot.role != ChannelRole::Receiver as u64 {
            continue;
        }
        let len = slot.name.iter().position(|&b| b == 0).unwrap_or(32);
        let Ok(name) = core::str::from_utf8(&slot.name[..len]) else { continue };
        let Some(base) = name.strip_suffix("-req") else { continue };
        let mut resp = heapless::String::<32>::new();
        if resp.push_str(base).is_err() || resp.push_str("-resp").is_err() {
            continue;
        }
        let (Some(rx), Some(tx)) = (channel::open_receiver(name), channel::open_sender(&resp))
        else {
            continue;
        };
        let d = slot.peer_disk;
        let contract = (d.period_ns != 0).then_some(Contract {
            period: d.period_ns,
            slice: d.slice_ns,
            extra: d.extra != 0,
            latency: d.latency_ns,
        });
        let client = Client { name: slot.name, rx, tx, open: true, contract, accounts: None };
        if out.push((client, slot.peer_domain)).is_err() {
            println!("{driver}: more than {MAX_CLIENTS} clients; the rest are not served");
            break;
        }
    }
    out
}

/// A driver's life once its device is up: the self-test of `transfers` transfers if asked
/// (`self_test::check`; status 1 if it fails), then [`serve`]; the exit status.
pub fn run<D: BlockDevice>(mut disk: D, transfers: u64, options: ServeOptions) -> i32 {
    let max = options.max_transfer as usize;
    if transfers > 0
        && !crate::self_test::check(options.driver, &mut disk, options.irq, transfers, max)
    {
        return 1;
    }
    serve(disk, options)
}

/// Serves the clients until all are gone; the exit status.
pub fn serve<D: BlockDevice>(disk: D, options: ServeOptions) -> i32 {
    let ServeOptions { driver, device, irq, die_after, max_transfer, .. } = options;
    let config = Config {
        max_clients: MAX_CLIENTS,
        max_in_flight_per_client: 8,
        queue_len: 32,
        max_transfer,
    };
    let mut clients = clients(driver);
    let mut server = match stage(&disk, &options, &mut clients) {
        Some(stage) => Server::with_scheduler(disk, config, stage),
        None => Server::new(disk, config),
    };
    for (i, (c, peer)) in clients.iter_mut().enumerate() {
        let area = dma::alloc(AREA_BYTES + PAGE_SIZE).and_then(|r| {
            syscall::stretch_rights(r.virt, *peer as usize, Rights::READ.union(Rights::WRITE))?;
            c.accounts = dma::words(&r, AREA_BYTES, ACCOUNT_WORDS);
            let len = AREA_BYTES as u64;
            Ok(DataArea { virt: r.virt as u64, phys: r.phys as u64, len })
        });
        match area.map(|a| server.open(i, a)) {
            Ok(Ok(())) => println!("{driver}: client {} (domain {peer}) served", c.name()),
            _ => println!("{driver}: no data area for client {}", c.name()),
        }
    }
    let mut buf = [0u8; 64];
    let mut irq_seen = events::value(irq);
    let mut interrupts = 0u64;
    // The longest time from the kernel's signal of the interrupt to this loop seeing it.
    let mut wake_max_ns = 0u64;
    loop {
        let mut moved = false;
        if server.stage().keeps_time() {
            server.set_now(tessera::clock::now_ns());
        }
        let now = events::value(irq);
        if now != irq_seen {
            irq_seen = now;
            interrupts += 1;
            let signalled = tessera::dcb().interrupt_ns[device].load(Ordering::Acquire);
            wake_max_ns = wake_max_ns.max(tessera::clock::now_ns().saturating_sub(signalled));
            server.device_mut().interrupted();
            let _ = syscall::irq_ack(irq);
            moved = true;
        }
        let mut answered = false;
        while let Some((i, response)) = server.poll() {
            answered = true;
            send(driver, &mut server, &mut clients[i].0, i, &response.encode());
        }
        moved |= answered;
        account(&mut server, &clients, answered);
        if die_after.is_some_and(|n| server.stats().completed >= n) {
            println!("{driver}: dying on purpose, requests in flight");
            tessera::fault::now();
        }
        for (i, (c, _)) in clients.iter_mut().enumerate() {
            while c.open {
                match c.rx.try_recv(&mut buf) {
                    Ok(Some(n)) => {
                        moved = true;
                        if let Some(response) = server.request(i, &buf[..n]) {
                            send(driver, &mut server, c, i, &response.encode());
                        }
                    }
                    Ok(None) if !c.rx.is_closed() => break,
                    // Its sender died and everything it published has been taken, or its
                    // ring is unreadable.
                    Ok(None) | Err(_) => {
                        println!("{driver}: client {} gone", c.name());
                        server.close(i);
                        c.open = false;
                        moved = true;
                    }
                }
            }
        }
        let outstanding: usize = (0..clients.len()).map(|i| server.outstanding(i)).sum();
        if clients.iter().all(|(c, _)| !c.open) && outstanding == 0 {
            let s = server.stats();
            println!(
                "{driver}: every client gone: {} requests served, {} rejected, {interrupts} interrupts, wake-up latency at most {wake_max_ns} ns",
                s.completed, s.rejected
            );
            report(&server, &options);
            tessera::dcb().device_busy[device].store(0, Ordering::Release);
            return 0;
        }
        if !moved {
            // The kernel idles with no timer while the device has a request the model times.
            let busy = u64::from(server.device_waiting());
            tessera::dcb().device_busy[device].store(busy, Ordering::Release);
            // Any endpoint that changed since the last `block` returned makes it return at
            // once: nothing signalled while the loop looked is missed.
            let _ = syscall::block(server.next_event_ns().unwrap_or(u64::MAX));
        }
    }
}

/// Sends `msg` to client `i`, closing it if its response ring is full or gone.
fn send<D: BlockDevice>(
    driver: &str,
    server: &mut Server<D>,
    c: &mut Client,
    i: usize,
    msg: &[u8],
) {
    if !c.open {
        return;
    }
    match c.tx.try_send(msg) {
        Ok(true) => return,
        // The client died with requests in flight, before its request ring was seen closed.
        Err(ChannelError::Closed) => println!("{driver}: client {} gone", c.name()),
        Ok(false) => {
            println!("{driver}: client {} does not read its responses: closed", c.name())
        }
        Err(e) => println!("{driver}: client {} response ring unusable ({e:?}): closed", c.name()),
    }
    server.close(i);
    c.open = false;
}

/// The scheduling stage `options` and the disk's model ask for, with the clients' streams;
/// `None` to serve without one.
fn stage<D: BlockDevice>(
    disk: &D,
    options: &ServeOptions,
    clients: &mut [(Client, u64)],
) -> Option<Stage> {
    let driver = options.driver;
    let code = tessera::dcb().devices[options.device].model;
    let params = match code {
        abi::disk_model::DESKSTAR_34GXP => Some(DiskParams::deskstar_34gxp()),
        abi::disk_model::CHEETAH_15K => Some(DiskParams::cheetah_15k()),
        _ => None,
    };
    let policy = match (options.scheduler, &params) {
        (Some(p), _) => p,
        (None, Some(_)) => PolicyName::Usd,
        (None, None) => return None,
    };
    let sized = |p: DiskParams| {
        if p.capacity == disk.capacity() { p } else { p.with_capacity(disk.capacity()) }
    };
    let model = params.map(|p| DiskModel::new(sized(p)));
    // Without a model the policies still need a positioning estimate: the Deskstar's, scaled.
    let estimate =
        model.clone().unwrap_or_else(|| DiskModel::new(sized(DiskParams::deskstar_34gxp())));
    let longest =
        disk_sched::usd::longest_service_ns(&estimate, options.max_transfer / disk.sector_size());
    for (c, _) in clients.iter_mut() {
        if let Some(k) = c.contract
            && policy == PolicyName::Usd
            && k.slice < longest
        {
            println!(
                "{driver}: stream {}: its slice of {} us is shorter than the disk's longest request ({} us): served best effort",
                c.stream(),
                k.slice / 1000,
                longest / 1000
            );
            c.contract = None;
        }
    }
    let streams: Vec<Option<Contract>> = clients.iter().map(|(c, _)| c.contract).collect();
    let per_client = 8;
    let sched = scheduler::build(
        policy,
        options.anticipate,
        &estimate,
        &streams,
        per_client,
        tessera::clock::now_ns(),
    );
    println!(
        "{driver}: disk scheduled by {} (anticipation {}), model {}",
        policy.name(),
        if options.anticipate { "on" } else { "off" },
        match code {
            abi::disk_model::DESKSTAR_34GXP => "deskstar-34gxp",
            abi::disk_model::CHEETAH_15K => "cheetah-15k",
            _ => "none",
        }
    );
    // Timed in raw clock ticks (an instruction to read), turned into ns once at the end.
    let clock: fn() -> u64 = tessera::clock::ticks;
    Some(Stage::new(sched, model, per_client * clients.len().max(1), Some(clock)))
}

/// Prints the streams' completed periods and, when requests were answered or periods ended
/// (the only times the accounts change), publishes the streams' accounts.
fn account<D: BlockDevice>(server: &mut Server<D>, clients: &[(Client, u64)], answered: bool) {
    let stage = server.stage_mut();
    if !stage.keeps_time() {
        return;
    }
    let periods = stage.take_periods();
    for p in &periods {
        let name = clients.get(p.client).map_or("?", |(c, _)| c.stream());
        println!(
            "disk period: stream={name} start={} end={} guaranteed={} extra={} missed={}",
            p.start, p.end, p.guaranteed, p.extra, p.missed
        );
    }
    if periods.is_empty() && !answered {
        return;
    }
    for (i, (c, _)) in clients.iter().enumerate() {
        if let Some(a) = stage.accounts(i) {
            c.publish(StreamAccounts {
                guaranteed_ns: a.guaranteed,
                extra_ns: a.extra,
                periods: a.periods,
                deadlines_missed: a.deadlines_missed,
            });
        }
    }
}

/// Prints what the scheduler did: its waits, checked against their timeouts, and its cost.
fn report<D: BlockDevice>(server: &Server<D>, options: &ServeOptions) {
    let stage = server.stage();
    if !stage.keeps_time() {
        return;
    }
    if let Some(trace) = stage.trace() {
        let t = trace.totals();
        println!(
            "disk waits: count={} anticipated={} timed_out={} abandoned={} exceeded={} late_max_ns={} longest_ns={}",
            t.count,
            t.anticipated,
            t.timed_out,
            t.abandoned,
            t.exceeded,
            t.late_max_ns,
            t.longest_ns
        );
    }
    let s = stage.stats();
    let ns = tessera::clock::ns_from_ticks(s.scheduler_time);
    let policy = options.scheduler.unwrap_or(PolicyName::Usd);
    println!(
        "disk scheduler: policy={} anticipation={} requests={} calls={} ns={} per_request_ns={}",
        policy.name(),
        if options.anticipate { "on" } else { "off" },
        s.dispatched,
        s.scheduler_calls,
        ns,
        ns / s.dispatched.max(1)
    );
}
