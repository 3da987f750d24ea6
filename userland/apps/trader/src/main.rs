//! `trader`: the remote paging trader (Heracles §10.2), a domain serving UDP through
//! `net_client`.
//!
//! `trader --net NAME --port P [--idle MS] [--lifetime MS] [--capacity N]` opens UDP port P on
//! the driver reached by the channels `NAME-req`/`NAME-resp` and serves the remote paging
//! protocol's trader messages (`rpp::wire`):
//!
//! - **Advert** (a server offering `bytes`): kept in a [`TraderTable`], replacing the server's
//!   previous advert; an advert of zero bytes, or one saying the server cannot commit CPU or
//!   network time to a new client, withdraws it. Each advert is acknowledged (an `Ack` of page
//!   0, code `None`, under the advert's request id), so the server knows the trader heard it
//!   and re-sends to a trader that did not answer.
//! - **TraderQuery** (a client wanting `bytes`): answered with a `TraderAnswer` naming up to
//!   five servers advertising at least that much, the most first, under the query's request id.
//!
//! The answers are `remote_control`'s [`TraderService`], tested on the host.
//!
//! Adverts expire `--lifetime MS` after they came (default 30 s, three of a server's polls);
//! the table holds `--capacity N` servers (default 64). Anything else that arrives is counted
//! as bad and not answered. The trader ends when nothing came for `--idle MS` (counted from
//! the open, then from each datagram; without it, it never ends) and then prints what it did
//! (adverts received, servers held, queries, those answered with at least one server, bad
//! datagrams) and a line per advert it holds, lines that tests read:
//!
//! ```text
//! trader: ended (idle): adverts=6 servers=2 queries=3 answered=3 bad=0
//! trader: holds 10.0.0.2:7100 offering 33554432 bytes, advertised at 5123 ms
//! ```
//!
//! Each advert that changes the table and each query is also printed as it comes
//! (`trader: advert from A:P: B bytes (added|replaced|withdrawn|not kept)`, `trader: query
//! from A:P for B bytes: N servers`). Exits 0 unless its session failed; bad arguments exit 2.

#![no_std]
#![no_main]

extern crate alloc;

use net_client::{ChannelTransport, NetError, Session};
use net_interface::frame::MAX_UDP_PAYLOAD;
use remote_control::service::{Event, TraderService};
use remote_control::trader::{DEFAULT_LIFETIME, Stored, TraderTable};
use tessera::{Env, println};

tessera::main!(main);

/// Servers the table holds by default.
const CAPACITY: usize = 64;

const USAGE: &str = "usage: trader --net NAME --port P [--idle MS] [--lifetime MS] [--capacity N]";

fn main(env: Env) -> i32 {
    let (mut net, mut port, mut idle, mut lifetime, mut capacity) = (None, None, None, None, None);
    let mut args = env.args;
    while let Some(a) = args.next() {
        let Some(v) = args.next() else {
            println!("trader: an option without its value; {USAGE}");
            return 2;
        };
        let ms = v.parse::<u64>().ok().map(|ms| ms.saturating_mul(1_000_000));
        let ok = match a {
            "--net" => {
                net = Some(v);
                true
            }
            "--port" => {
                port = v.parse::<u16>().ok();
                port.is_some()
            }
            "--idle" => {
                idle = ms;
                ms.is_some()
            }
            "--lifetime" => {
                lifetime = ms.filter(|&ns| ns > 0);
                lifetime.is_some()
            }
            "--capacity" => {
                capacity = v.parse::<usize>().ok().filter(|n| (1..=1024).contains(n));
                capacity.is_some()
            }
            _ => false,
        };
        if !ok {
            println!("trader: bad option {a} {v}; {USAGE}");
            return 2;
        }
    }
    let (Some(net), Some(port)) = (net, port) else {
        println!("trader: --net and --port are needed; {USAGE}");
        return 2;
    };
    let Some(transport) = ChannelTransport::connect(net) else {
        println!("trader: no channels {net}-req and {net}-resp");
        return 1;
    };
    let mut session = Session::new(transport);
    if let Err(e) = session.open(port) {
        println!("trader: open of port {port} failed: {e:?}");
        return 1;
    }
    let table =
        TraderTable::new(capacity.unwrap_or(CAPACITY), lifetime.unwrap_or(DEFAULT_LIFETIME));
    let status = serve(&mut session, TraderService::new(table), idle);
    if let Err(e) = session.close() {
        println!("trader: close failed: {e:?}");
        return 1;
    }
    status
}

/// Serves until nothing came for `idle` ns.
fn serve(
    session: &mut Session<ChannelTransport>,
    mut trader: TraderService,
    idle: Option<u64>,
) -> i32 {
    let mut buf = [0u8; MAX_UDP_PAYLOAD];
    let mut out = [0u8; MAX_UDP_PAYLOAD];
    let mut last = tessera::time_ns();
    loop {
        let deadline = idle.map_or(u64::MAX, |ns| last.saturating_add(ns));
        let got = session.receive_until(deadline, |d| {
            let len = d.payload.len().min(buf.len());
            buf[..len].copy_from_slice(&d.payload[..len]);
            (d.from, len)
        });
        let (from, len) = match got {
            Ok(Some(g)) => g,
            Ok(None) => break,
            Err(e) => {
                println!("trader: receive failed: {e:?}");
                return 1;
            }
        };
        let now = tessera::time_ns();
        last = now;
        let (event, reply) = trader.handle(now, &buf[..len], &mut out);
        match event {
            Event::Advert { server, bytes, stored } => println!(
                "trader: advert from {server}: {bytes} bytes ({})",
                match stored {
                    Stored::Added => "added",
                    Stored::Replaced => "replaced",
                    Stored::Withdrawn => "withdrawn",
                    Stored::Full => "not kept",
                }
            ),
            Event::Query { bytes, servers } => {
                println!("trader: query from {from} for {bytes} bytes: {servers} servers")
            }
            Event::Bad => {}
        }
        let Some(n) = reply else { continue };
        match session.send(from, &out[..n]) {
            Ok(()) => {}
            Err(NetError::Closed) => {
                println!("trader: send failed: the driver is gone");
                return 1;
            }
            // A refused send is a lost answer: the asker retries.
            Err(_) => {}
        }
    }
    let now = tessera::time_ns();
    let table = trader.table();
    table.expire(now);
    let servers = table.len();
    let c = trader.counts();
    println!(
        "trader: ended (idle): adverts={} servers={servers} queries={} answered={} bad={}",
        c.adverts, c.queries, c.answered_with_servers, c.bad
    );
    for a in trader.table().adverts() {
        println!(
            "trader: holds {} offering {} bytes, advertised at {} ms",
            a.server,
            a.bytes,
            a.at / 1_000_000
        );
    }
    0
}
