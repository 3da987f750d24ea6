//! Serving client domains over the block protocol (`drivers/blk`).
//!
//! A client is a pair of IO channels from the manifest: `NAME-req` from the client to the
//! driver and `NAME-resp` back. For each, the driver makes a data area (a DMA stretch of its
//! own) and gives the client read-write rights to it; the protocol's driver side
//! ([`blk::server::Server`]) does the rest. One loop serves every client and the device:
//! take the device's completions after its interrupt (acknowledging it), answer them, take
//! each client's requests, and when nothing moved, block until an endpoint changes (a
//! client's channel or the interrupt). Responses are sent without waiting: a client whose
//! response ring stays full (it does not read its responses) is closed, never waited for.
//! A client that dies is closed; its area is not given to anyone else. When every client is
//! gone and nothing is in flight, the driver exits, reporting how many requests it served and
//! the longest it took to see an interrupt after the kernel signalled it (its wake-up latency,
//! by its own clock against the kernel's stamp in the control block).

use core::sync::atomic::Ordering;

use abi::{ChannelRole, Rights};
use blk::device::BlockDevice;
use blk::server::{Config, DataArea, Server};
use tessera::channel::{self, ChannelError, Receiver, Sender};
use tessera::{dma, events, println, syscall};

/// Each client's data area.
pub const AREA_BYTES: usize = 512 << 10;

/// The most clients served.
const MAX_CLIENTS: usize = 4;

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
}

/// A client's channels.
struct Client {
    name: [u8; 32],
    rx: Receiver,
    tx: Sender,
    open: bool,
}

impl Client {
    fn name(&self) -> &str {
        let len = self.name.iter().position(|&b| b == 0).unwrap_or(32);
        core::str::from_utf8(&self.name[..len]).unwrap_or("?")
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
        let client = Client { name: slot.name, rx, tx, open: true };
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
    let ServeOptions { driver, device, irq, die_after, max_transfer } = options;
    let config = Config {
        max_clients: MAX_CLIENTS,
        max_in_flight_per_client: 8,
        queue_len: 32,
        max_transfer,
    };
    let mut server = Server::new(disk, config);
    let mut clients = clients(driver);
    for (i, (c, peer)) in clients.iter().enumerate() {
        let area = dma::alloc(AREA_BYTES).and_then(|r| {
            syscall::stretch_rights(r.virt, *peer as usize, Rights::READ.union(Rights::WRITE))?;
            Ok(DataArea { virt: r.virt as u64, phys: r.phys as u64, len: r.len as u64 })
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
        let now = events::value(irq);
        if now != irq_seen {
            irq_seen = now;
            interrupts += 1;
            let signalled = tessera::dcb().interrupt_ns[device].load(Ordering::Acquire);
            wake_max_ns = wake_max_ns.max(tessera::time_ns().saturating_sub(signalled));
            server.device_mut().interrupted();
            let _ = syscall::irq_ack(irq);
            moved = true;
        }
        while let Some((i, response)) = server.poll() {
            moved = true;
            send(driver, &mut server, &mut clients[i].0, i, &response.encode());
        }
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
            return 0;
        }
        if !moved {
            // Any endpoint that changed since the last `block` returned makes it return at
            // once: nothing signalled while the loop looked is missed.
            let _ = syscall::block(u64::MAX);
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
        Ok(true) => {}
        Ok(false) | Err(ChannelError::Closed) | Err(_) => {
            println!("{driver}: client {} does not read its responses: closed", c.name());
            server.close(i);
            c.open = false;
        }
    }
}
