//! `paging-server`: a remote paging server (Heracles §10.3) on a UDP port of the network
//! driver domain, or a hostile client of one.
//!
//! **Server** (`--net NAME --port P --memory BYTES [--clients N] [--idle MS]`): opens UDP port
//! P on the driver reached by the channels `NAME-req`/`NAME-resp` and serves the remote paging
//! protocol to any client, offering `BYTES` (`K`, `M` or `G` suffixes) of its heap to their
//! pages (`remote_server::Server`: streams admitted within that memory and the server's CPU,
//! every packet's stream and token checked, each client's work served by EDF over the CPU
//! contracts of their `CreateStream` and charged to it by this domain's clock). It ends once
//! N clients have created streams and released them all (`--clients`), or after MS ms of its
//! clock without a datagram (`--idle`, counted from the open and then from each datagram), and
//! prints a line per client,
//! `paging-server: client A.B.C.D:Q stream=S role=primary|mirror disk=yes|no reserved=R
//! pages=N peak=K reads=R writes=W frees=F cpu_ns=C extra_ns=E throttled=T refused=X
//! queue_drops=D bytes_written=B released=true|false` (`bytes_written`: the bytes of the pages
//! stored as they were sent, shorter than whole pages for a client that compresses), then its
//! totals,
//! `paging-server: served streams=N refused_memory=.. refused_cpu=.. refused_bad=..
//! bad_token=.. malformed=.. corrupted=.. unexpected=.. duplicates=.. chunks_resent=..
//! stale_writes=.. unattributed_ns=..` and `paging-server: ended: WHY`.
//!
//! **Control plane** (`--traders A.B.C.D:Q+...`, `--poll MS`, `--reclaim-at MS:BYTES`, module
//! `control`): the server advertises its spare memory to the traders by the advertising
//! threshold algorithm every poll (10 s by default), offers new clients only what keeps
//! committed memory under `THRESHOLD + 10%` of `--memory`, and revokes clients (moving their
//! pages to servers they choose) when a local domain starting up (`--reclaim-at MS:BYTES`: the
//! local domains hold BYTES from MS ms on; several changes may be given, joined by `+` or in
//! several options, a smaller BYTES a domain ending) pushes committed memory past `--memory`;
//! it then prints
//! `paging-server: adverts sent=.. acked=.. missed=.. advert=.. local=..; revocations
//! revoked=.. moved=.. returned=.. abandoned=.. pages_forwarded=.. held=.. partial=..
//! partial_done=.. pages_given_back=..` before its totals. `--revoke-part MS:PAGES` takes back
//! PAGES pages of the first open client's reservation at MS ms, in part
//! (`remote_server::Server::revoke_part`: the client moves that many pages elsewhere itself).
//!
//! **Hostile client** (`--net NAME --port P --hostile A.B.C.D:Q [--rounds N]`): creates a
//! stream of its own on the server at A.B.C.D:Q (for its token), then plays N rounds (default
//! 200), 50 ms apart: for every other stream number from 1 to 4 it asks for a page, writes a
//! page over one (every chunk), asks to switch its mirror and to release it, once with its
//! own token and once with a guessed one; and it uses its own stream's number with a wrong
//! token. It counts every answer: a page's chunk or a write acknowledged on a stream not its
//! own is a **breach**; a `BadToken` refusal is **refused**. It releases its own stream and
//! prints `paging-server: hostile: sent=N breaches=B refused=R other=O`, exiting 0 (its
//! attacks are the test; the verdict is read from outside), 1 if it could not create its
//! stream.
//!
//! Bad arguments exit 2.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;

mod control;

use net_client::{ChannelTransport, NetError, Session};
use net_interface::Endpoint;
use remote_server::Server;
use rpp::wire::{self, Code, Data, DataFlags, Header, Message, Packet, Qos, Role};
use tessera::{Env, println};

tessera::main!(main);

const USAGE: &str = "usage: paging-server --net NAME --port P (--memory BYTES [--clients N] \
                     [--idle MS] [--traders A.B.C.D:Q+...] [--poll MS] [--reclaim-at MS:BYTES[+...]] \
                     [--revoke-part MS:PAGES] \
                     | --hostile A.B.C.D:Q [--rounds N])";

/// The error of a bad `--reclaim-at`.
const RECLAIM: &str = "--reclaim-at takes MS:BYTES[+MS:BYTES...]";

/// What the domain is asked to do.
enum Role_ {
    Serve { memory: u64, clients: Option<u32>, idle_ns: Option<u64>, control: control::Settings },
    Hostile { server: Endpoint, rounds: u32 },
}

fn main(env: Env) -> i32 {
    match parse(env) {
        Ok((net, port, role)) => run(net, port, role),
        Err(why) => {
            println!("paging-server: {why}; {USAGE}");
            2
        }
    }
}

/// `BYTES` with an optional `K`, `M` or `G` suffix.
fn size(s: &str) -> Option<u64> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

fn parse(env: Env) -> Result<(&'static str, u16, Role_), &'static str> {
    let (mut net, mut port, mut memory, mut clients, mut idle) = (None, None, None, None, None);
    let (mut hostile, mut rounds) = (None, None);
    let mut settings = control::Settings {
        traders: Vec::new(),
        poll_ns: 10_000_000_000,
        reclaim: Vec::new(),
        partial: None,
    };
    let mut control_given = false;
    let mut args = env.args;
    while let Some(a) = args.next() {
        let v = args.next().ok_or("an option without its value")?;
        match a {
            "--net" => net = Some(v),
            "--port" => port = Some(v.parse::<u16>().map_err(|_| "--port takes 1 to 65535")?),
            "--memory" => memory = Some(size(v).ok_or("--memory takes BYTES, with K, M or G")?),
            "--clients" => clients = Some(v.parse::<u32>().map_err(|_| "--clients takes a count")?),
            "--idle" => idle = Some(v.parse::<u64>().map_err(|_| "--idle takes milliseconds")?),
            "--hostile" => {
                hostile = Some(Endpoint::parse(v).ok_or("--hostile takes A.B.C.D:PORT")?)
            }
            "--rounds" => rounds = Some(v.parse::<u32>().map_err(|_| "--rounds takes a count")?),
            "--traders" => {
                for t in v.split('+') {
                    let t = Endpoint::parse(t).ok_or("--traders takes A.B.C.D:PORT+...")?;
                    settings.traders.push(t);
                }
                if settings.traders.len() > 3 {
                    return Err("--traders takes 1 to 3 traders");
                }
                control_given = true;
            }
            "--poll" => {
                let ms = v
                    .parse::<u64>()
                    .ok()
                    .filter(|&ms| ms > 0)
                    .ok_or("--poll takes milliseconds")?;
                settings.poll_ns = ms.saturating_mul(1_000_000);
                control_given = true;
            }
            "--revoke-part" => {
                let bad = "--revoke-part takes MS:PAGES";
                let (ms, pages) = v.split_once(':').ok_or(bad)?;
                let ms = ms.parse::<u64>().map_err(|_| bad)?;
                let pages = pages.parse::<u64>().map_err(|_| bad)?;
                settings.partial = Some((ms.saturating_mul(1_000_000), pages));
                control_given = true;
            }
            "--reclaim-at" => {
                for change in v.split('+') {
                    let (ms, bytes) = change.split_once(':').ok_or(RECLAIM)?;
                    let ms = ms.parse::<u64>().map_err(|_| RECLAIM)?;
                    let bytes = size(bytes).ok_or(RECLAIM)?;
                    settings.reclaim.push((ms.saturating_mul(1_000_000), bytes));
                }
                control_given = true;
            }
            _ => return Err("unknown option"),
        }
    }
    let (Some(net), Some(port)) = (net, port) else {
        return Err("--net and --port are needed");
    };
    if port == 0 {
        return Err("--port takes 1 to 65535");
    }
    let role = match (memory, hostile) {
        (Some(memory), None) if rounds.is_none() => Role_::Serve {
            memory,
            clients,
            idle_ns: idle.map(|ms| ms.saturating_mul(1_000_000)),
            control: settings,
        },
        (None, Some(server)) if clients.is_none() && idle.is_none() && !control_given => {
            Role_::Hostile { server, rounds: rounds.unwrap_or(200) }
        }
        _ => return Err("either --memory (a server) or --hostile (a hostile client)"),
    };
    Ok((net, port, role))
}

fn run(net: &str, port: u16, role: Role_) -> i32 {
    let Some(transport) = ChannelTransport::connect(net) else {
        println!("paging-server: no channels {net}-req and {net}-resp");
        return 1;
    };
    let mut session = Session::new(transport);
    if let Err(e) = session.open(port) {
        println!("paging-server: open of port {port} failed: {e:?}");
        return 1;
    }
    let status = match role {
        Role_::Serve { memory, clients, idle_ns, control } => {
            serve(&mut session, memory, clients, idle_ns, control)
        }
        Role_::Hostile { server, rounds } => hostile(&mut session, server, rounds),
    };
    if let Err(e) = session.close() {
        println!("paging-server: close failed: {e:?}");
        return 1;
    }
    status
}

/// Sends one datagram, waiting while the driver's queue is full; other refusals are losses.
fn send(
    session: &mut Session<ChannelTransport>,
    to: Endpoint,
    bytes: &[u8],
) -> Result<(), NetError> {
    loop {
        match session.send(to, bytes) {
            Ok(()) => return Ok(()),
            Err(NetError::Busy) => tessera::yield_now(),
            Err(NetError::Closed) => return Err(NetError::Closed),
            Err(_) => return Ok(()),
        }
    }
}

/// The server's loop: see the [crate] documentation.
fn serve(
    session: &mut Session<ChannelTransport>,
    memory: u64,
    clients: Option<u32>,
    idle_ns: Option<u64>,
    settings: control::Settings,
) -> i32 {
    let local = session.info().map(|i| i.local).unwrap_or_default();
    println!("paging-server: serving on {local} with {memory} bytes for clients' pages");
    let mut server = Server::new(memory, tessera::time_ns() ^ u64::from(local.port) << 48);
    let mut control = control::Control::new(settings, local, memory, tessera::time_ns());
    let mut cpu = tessera::time_ns;
    let mut buf = vec![0u8; wire::MAX_PACKET];
    let mut outbox: Vec<(Endpoint, Vec<u8>)> = Vec::new();
    let mut last = tessera::time_ns();
    let why = loop {
        if let Some(n) = clients
            && server.counts().created >= u64::from(n)
            && server.open_streams() == 0
        {
            break "every client released its stream";
        }
        let now = tessera::time_ns();
        if let Some(c) = control.as_mut() {
            c.tick(now, &mut server, &mut |to, b| outbox.push((to, b.to_vec())));
        }
        server.poll_revocations(now, &mut |to, b| outbox.push((to, b.to_vec())));
        let served = server.serve(now, &mut cpu, &mut |to, b| outbox.push((to, b.to_vec())));
        for (to, b) in outbox.drain(..) {
            if send(session, to, &b).is_err() {
                println!("paging-server: the driver is gone");
                return 1;
            }
        }
        // With work that may run, only look for datagrams; else wait for one, for a
        // throttled client's next period, or for the idle limit.
        let idle_at = idle_ns.map_or(u64::MAX, |idle| last.saturating_add(idle));
        let deadline = match served {
            true => 0,
            false => server
                .next_wakeup()
                .unwrap_or(u64::MAX)
                .min(idle_at)
                .min(server.revocation_deadline().unwrap_or(u64::MAX))
                .min(control.as_ref().map_or(u64::MAX, |c| c.deadline())),
        };
        let got = session.receive_until(deadline, |d| {
            let len = d.payload.len().min(buf.len());
            buf[..len].copy_from_slice(&d.payload[..len]);
            (d.from, len)
        });
        match got {
            Ok(Some((from, len))) => {
                // A trader's answer is not a client's: it does not keep the server from idling.
                if control.as_mut().is_some_and(|c| c.on_datagram(from, &buf[..len])) {
                    continue;
                }
                last = tessera::time_ns();
                server.receive(last, &mut cpu, from, &buf[..len], &mut |to, b| {
                    outbox.push((to, b.to_vec()))
                });
            }
            Ok(None) if !served && tessera::time_ns() >= idle_at => break "idle",
            Ok(None) => {}
            Err(e) => {
                println!("paging-server: receive failed: {e:?}");
                return 1;
            }
        }
    };
    for r in server.reports() {
        let role = if r.role == Role::Primary { "primary" } else { "mirror" };
        println!(
            "paging-server: client {} stream={} role={role} disk={} reserved={} pages={} peak={} reads={} writes={} frees={} cpu_ns={} extra_ns={} throttled={} refused={} queue_drops={} bytes_written={} released={}",
            r.client,
            r.stream,
            if r.local_disk { "yes" } else { "no" },
            r.reserved,
            r.pages,
            r.peak,
            r.reads,
            r.writes,
            r.frees,
            r.cpu_ns,
            r.extra_ns,
            r.throttled,
            r.refused,
            r.queue_drops,
            r.bytes_written,
            r.released
        );
    }
    if let Some(c) = control.as_ref() {
        c.report(&server);
    }
    let c = server.counts();
    let d = server.data_stats();
    println!(
        "paging-server: served streams={} refused_memory={} refused_cpu={} refused_bad={} bad_token={} malformed={} corrupted={} unexpected={} duplicates={} chunks_resent={} stale_writes={} unattributed_ns={}",
        c.created,
        c.refused_memory,
        c.refused_cpu,
        c.refused_bad,
        c.bad_token,
        c.malformed,
        d.corrupted,
        c.unexpected,
        d.duplicates,
        d.chunks_resent,
        d.stale_writes,
        c.unattributed_ns
    );
    println!("paging-server: ended: {why}");
    0
}

/// The hostile client's counts.
#[derive(Default)]
struct Hostile {
    sent: u64,
    breaches: u64,
    refused: u64,
    other: u64,
}

impl Hostile {
    /// Reads what came by `deadline`, judging each answer (its own stream's are `own`).
    fn listen(
        &mut self,
        session: &mut Session<ChannelTransport>,
        own: u32,
        deadline: u64,
    ) -> Result<(), NetError> {
        let mut verdicts = Vec::new();
        while let Some(v) = session.receive_until(deadline, |d| judge(d.payload, own))? {
            verdicts.push(v);
        }
        for v in verdicts {
            match v {
                Judged::Breach => self.breaches += 1,
                Judged::Refused => self.refused += 1,
                Judged::Other => self.other += 1,
            }
        }
        Ok(())
    }
}

enum Judged {
    Breach,
    Refused,
    Other,
}

/// What an answer to the hostile client is.
fn judge(bytes: &[u8], own: u32) -> Judged {
    let Ok(p) = wire::decode(bytes) else { return Judged::Other };
    let other_stream = p.header.stream != own;
    match p.message {
        Message::Data(_) if other_stream => Judged::Breach,
        Message::Ack { code: Code::None, .. } if other_stream => Judged::Breach,
        Message::Nack { code: Code::BadToken, .. } | Message::Ack { code: Code::BadToken, .. } => {
            Judged::Refused
        }
        _ => Judged::Other,
    }
}

/// The hostile client: see the [crate] documentation.
fn hostile(session: &mut Session<ChannelTransport>, server: Endpoint, rounds: u32) -> i32 {
    let mut buf = vec![0u8; wire::MAX_PACKET];
    // Its own stream, asked for until the server answers (it may still be booting).
    let create = Message::CreateStream {
        pages: 4,
        page_size: 4096,
        role: Role::Primary,
        has_local_disk: false,
        cpu: Qos { period_ns: 10_000_000, slice_ns: 500_000 },
        net: Qos { period_ns: 10_000_000, slice_ns: 500_000 },
    };
    let header = Header { stream: 0, token: 0, request: 1 };
    let len = wire::encode(&Packet { header, message: create }, &mut buf).expect("fits");
    let request = buf[..len].to_vec();
    let end = tessera::time_ns().saturating_add(20_000_000_000);
    let mut own = None;
    while own.is_none() && tessera::time_ns() < end {
        if send(session, server, &request).is_err() {
            return 1;
        }
        let deadline = tessera::time_ns().saturating_add(200_000_000);
        loop {
            match session.receive_until(deadline, |d| match wire::decode(d.payload) {
                Ok(Packet { message: Message::StreamCreated { stream, token, .. }, .. }) => {
                    Some((stream, token))
                }
                _ => None,
            }) {
                Ok(Some(Some(key))) => {
                    own = Some(key);
                    break;
                }
                Ok(Some(None)) => {}
                Ok(None) => break,
                Err(_) => return 1,
            }
        }
    }
    let Some((stream, token)) = own else {
        println!("paging-server: hostile: the server at {server} created no stream");
        return 1;
    };
    println!("paging-server: hostile: own stream {stream} on {server}; attacking streams 1 to 4");
    let mut h = Hostile::default();
    let page = [0xa5u8; wire::MAX_CHUNK];
    let mut guess = token ^ 0x5555_5555_5555_5555;
    for round in 0..rounds {
        let mut packets: Vec<Vec<u8>> = Vec::new();
        let mut add = |header: Header, message: Message<'_>| {
            let mut b = vec![0u8; wire::MAX_PACKET];
            if let Ok(len) = wire::encode(&Packet { header, message }, &mut b) {
                b.truncate(len);
                packets.push(b);
            }
        };
        let vpn = u64::from(round % 128);
        for victim in (1..=4u32).filter(|&s| s != stream) {
            guess = guess.rotate_left(7).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            for t in [token, guess] {
                let header = Header { stream: victim, token: t, request: 1000 + round };
                add(header, Message::Read { vpn, page_size: 4096 });
                for num in 0..3u16 {
                    let off = u32::from(num) * wire::MAX_CHUNK as u32;
                    let size = (4096 - off as usize).min(wire::MAX_CHUNK);
                    let data = Data {
                        vpn,
                        page_size: 4096,
                        off,
                        tot: 3,
                        num,
                        flags: DataFlags::NONE,
                        payload: &page[..size],
                    };
                    add(header, Message::Data(data));
                }
                add(header, Message::SwitchMirror);
                add(header, Message::Release);
            }
        }
        // Its own stream's number with a wrong token.
        let header = Header { stream, token: token ^ 1, request: 1000 + round };
        add(header, Message::Read { vpn, page_size: 4096 });
        for p in &packets {
            if send(session, server, p).is_err() {
                return 1;
            }
            h.sent += 1;
        }
        let deadline = tessera::time_ns().saturating_add(50_000_000);
        if h.listen(session, stream, deadline).is_err() {
            return 1;
        }
    }
    // Its own stream released, answered or not.
    let header = Header { stream, token, request: 2 };
    if let Ok(len) = wire::encode(&Packet { header, message: Message::Release }, &mut buf) {
        for _ in 0..5 {
            let _ = send(session, server, &buf[..len]);
            let deadline = tessera::time_ns().saturating_add(100_000_000);
            if h.listen(session, stream, deadline).is_err() {
                break;
            }
        }
    }
    println!(
        "paging-server: hostile: sent={} breaches={} refused={} other={}",
        h.sent, h.breaches, h.refused, h.other
    );
    0
}
