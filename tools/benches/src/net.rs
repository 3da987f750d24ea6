//! `cargo xtask bench net`: the network path, a UDP round trip between two nodes and the
//! driver's idle cost, in instructions and virtual time under `-icount shift=0,sleep=off`.
//!
//! The two nodes are two virtio-net driver domains of one machine (10.0.0.1 and 10.0.0.2),
//! each on its own NIC of one QEMU hub, each serving one `netping` client through
//! `net_server` and `net_stack` (smoltcp): the pinger's datagram goes through its driver, over
//! the hub, through the other driver to the echoing client and back. Both sides run on the
//! one deterministic clock of that machine, so every part of a round trip (both drivers with
//! their stacks, both clients, the kernel between them) is counted in instructions, and the
//! kernel's per-domain CPU accounts (the run summary: a domain's own code and the system calls
//! it makes) split them. Runs of several machines joined by a switch (`cargo xtask cluster`)
//! have a clock each and are not measured here.
//!
//! - **Instructions per round trip**, for 64-byte and 1,472-byte payloads (`netping --size`):
//!   two boots differ only in the number of rounds ([`FEW`] and [`MANY`], two pings each), and
//!   each figure is the difference of the two boots' CPU over the difference of their pings,
//!   so boot, start-up, the pinger's start delay and shut-down cancel out. Kept: the four
//!   domains' CPU accounts together (both drivers and both clients); shown beside it: the
//!   drivers' part, the clients' part, the kernel's (the busy time, the run's virtual time less
//!   the kernel's idle time, less the four domains'), and the pinger's own clock per round
//!   trip. The pinger checks every byte of every answer, so the clients' part includes making
//!   and checking the payload.
//! - **The driver's idle CPU**: one driver serving one client that has opened a port and
//!   waits for a datagram that never comes, ended by the kernel at `stop=` after [`IDLE_SHORT`]
//!   and after [`IDLE_LONG`] of virtual time; the figure is the difference of the driver's CPU
//!   over the difference of the durations, in µs of CPU per second. An interrupt-driven driver
//!   that blocks with no deadline when nothing moves uses none; one that polls uses its
//!   polling's cost every time it wakes.
//! - **One stream's throughput**: a `netbench` sender sends [`STREAM_DATAGRAMS`] datagrams of
//!   1,472 bytes as fast as its driver takes them, under the best-effort contract (slack
//!   allowed), to a sink behind the other driver that checks every payload: payload Mbit/s by
//!   the sender's clock, bounded by the stack's link model.
//! - **Two streams under 1:2 contracts** ([`CONTRACTS_MANIFEST`], also a QEMU test's): 1 ms and
//!   2 ms of link time in every 10 ms, no slack, both saturated: the first's share of their
//!   link time (their stream accounts) minus a third, in percentage points.
//!
//! Every figure repeats exactly from boot to boot: in [`Mode::Full`] each pair of boots is
//! measured [`icount_runs`] times and the bench fails if they differ. For that the cards move
//! their frames at points of virtual time ([`qemu_run::qemu::NIC_VIRTUAL_TIME`]: QEMU's
//! transmit timer, 1 µs after the driver's notification); with QEMU's defaults, which move
//! them from its main loop when the host gets to it, the round trips moved by about 1% from
//! boot to boot.

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::by_arch::ByArch;
use super::figures;
use crate::baseline::Table;
use crate::measure::{Mode, icount_runs, table};
use qemu_run::qemu::{Ending, IcountBoot, Outcome};
use tool_base::{Arch, artifacts, util};

/// The rounds (two pings each) of the shorter and the longer round-trip boot.
pub const FEW: u64 = 100;
/// See [`FEW`].
pub const MANY: u64 = 600;

/// The payload sizes measured, in bytes of UDP payload: the smallest usual and the largest
/// that fits one Ethernet frame.
const SIZES: [u64; 2] = [64, 1472];

/// The virtual durations of the two idle boots, in milliseconds.
pub const IDLE_SHORT: u64 = 200;
/// See [`IDLE_SHORT`].
pub const IDLE_LONG: u64 = 1200;

/// When the kernel ends a round-trip boot, in milliseconds of virtual time: well after the
/// pinger's last answer (its 50 ms start delay and [`MANY`] rounds of 1,472 bytes take about
/// 200 ms). The echoing client waits for one datagram more than it is sent (the pinger's
/// first probe and its pings), so the boot ends at the same instant whatever the clients'
/// order of ending.
const PING_STOP: u64 = 1000;

/// The key of the kept figure of instructions per round trip of `size`-byte payloads.
pub fn round_trip_key(size: u64) -> String {
    format!("round_trip_{size}")
}

/// The key of the kept figure of the driver's idle CPU.
pub const IDLE_KEY: &str = "driver_idle_us_per_s";

/// A driver domain and its one client, on NIC `n` (0 or 1) of the hub: the address
/// `10.0.0.{n+1}`, the channels `n{n}-req`/`n{n}-resp`.
struct Node {
    driver: &'static str,
    client: &'static str,
    /// The client's program: `netping` or `netbench`.
    app: &'static str,
    client_args: Vec<String>,
}

/// The manifest of `nodes`, written under `target/bench/net/` as `name.toml`; its path
/// relative to the workspace. `what` heads it.
fn manifest(name: &str, what: &str, nodes: &[Node]) -> Result<String> {
    let mut text = format!("# `cargo xtask bench net`: {what}.\n[system]\nmemory = \"64M\"\n");
    for n in 0..nodes.len() {
        write!(text, "\n[[system.nic]]\nname = \"net-{n}\"\n")?;
    }
    for (n, node) in nodes.iter().enumerate() {
        let args = node.client_args.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>();
        write!(
            text,
            "\n[[domain]]\nname = \"{driver}\"\napp = \"virtio-net\"\nargs = [\"--ip\", \"10.0.0.{ip}/24\"]\n\
             memory = {{ guaranteed = \"2M\" }}\n\
             cpu = {{ period = \"10ms\", slice = \"2ms\", extra = true, latency = \"1ms\" }}\n\
             driver = true\ndevices = [{{ nic = \"net-{n}\" }}]\n\n\
             [[domain]]\nname = \"{client}\"\napp = \"{app}\"\nargs = [\"--net\", \"n{n}\", {args}]\n\
             memory = {{ guaranteed = \"1M\" }}\n\
             cpu = {{ period = \"10ms\", slice = \"1ms\", extra = true, latency = \"1ms\" }}\n\n\
             [[channel]]\nname = \"n{n}-req\"\nfrom = \"{client}\"\nto = \"{driver}\"\n\n\
             [[channel]]\nname = \"n{n}-resp\"\nfrom = \"{driver}\"\nto = \"{client}\"\n",
            driver = node.driver,
            client = node.client,
            app = node.app,
            ip = n + 1,
            args = args.join(", "),
        )?;
    }
    let rel = format!("target/bench/net/{name}.toml");
    let path = util::root().join(&rel);
    std::fs::create_dir_all(path.parent().expect("a file in a directory"))?;
    std::fs::write(&path, text)?;
    Ok(rel)
}

/// The round-trip manifest: `rounds` rounds of two `size`-byte pings from `pinger` (behind
/// `drv-a`) to `echo` (behind `drv-b`).
fn ping_manifest(size: u64, rounds: u64) -> Result<String> {
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // The probe netping sends until the echo answers, its pings, and one more.
    let pings = (2 * rounds + 2).to_string();
    manifest(
        &format!("ping-{size}-{rounds}"),
        &format!("{rounds} rounds of two {size}-byte UDP pings between two driver domains"),
        &[
            Node {
                driver: "drv-a",
                client: "pinger",
                app: "netping",
                client_args: args(&[
                    "--port",
                    "7000",
                    "--to",
                    "10.0.0.2:7001",
                    "--rounds",
                    &rounds.to_string(),
                    "--size",
                    &size.to_string(),
                ]),
            },
            Node {
                driver: "drv-b",
                client: "echo",
                app: "netping",
                client_args: args(&["--port", "7001", "--echo", &pings]),
            },
        ],
    )
}

/// The idle manifest: one driver, one client waiting on an open port for a datagram that
/// never comes (the kernel ends the run at `stop=`).
fn idle_manifest() -> Result<String> {
    let args = ["--port", "7001", "--echo", "1"].iter().map(|s| s.to_string()).collect();
    manifest(
        "idle",
        "one driver domain serving one client with an open port and no traffic",
        &[Node { driver: "driver", client: "client", app: "netping", client_args: args }],
    )
}

/// A boot of `manifest` under `-icount` with `append` on the kernel's command line, its NICs
/// moving frames at points of virtual time ([`qemu_run::qemu::NIC_VIRTUAL_TIME`]).
fn boot(a: &artifacts::Artifacts, manifest: &str, append: &str) -> Result<IcountBoot> {
    let mut b = IcountBoot::new(a, manifest, append)?;
    b.boot.nics_on_virtual_time = true;
    Ok(b)
}

/// The numbers of the log line containing `text`, in order (words that are whole numbers once
/// brackets and commas are trimmed): how a bench reads an app's summary line.
pub(crate) fn summary_numbers(out: &Outcome, text: &str) -> Option<Vec<u64>> {
    let line = out.line(text)?;
    Some(
        line.message
            .split_whitespace()
            .filter_map(|w| w.trim_matches(|c| matches!(c, '(' | ')' | ',')).parse().ok())
            .collect(),
    )
}

/// `(idle, total)` in ns from the run summary's `kernel: idle I ns of T ns since boot`.
fn idle_and_total(out: &Outcome) -> Option<(f64, f64)> {
    match summary_numbers(out, "kernel: idle ")?[..] {
        [idle, total] => Some((idle as f64, total as f64)),
        _ => None,
    }
}

/// Domain `name`'s CPU in ns, from the run summary's accounts (whole µs).
fn cpu_ns(out: &Outcome, name: &str) -> Option<f64> {
    crate::measure::cpu_ns(out, name).map(|ns| ns as f64)
}

/// What one round-trip boot's log says, in ns: the run's virtual time and the kernel's idle
/// time, the drivers' and the clients' CPU, and the pinger's own time over its pings.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct PingBoot {
    total: f64,
    idle: f64,
    drivers: f64,
    clients: f64,
    pinger_ns: f64,
    pings: u64,
}

/// Reads a round-trip boot of `manifest` (`rounds` rounds of `size` bytes): fails unless every
/// ping was answered intact.
fn read_ping_boot(out: &Outcome, manifest: &str, size: u64, rounds: u64) -> Result<PingBoot> {
    let failed = |what: &str| format!("{manifest}: {what}:\n{}", out.log_text());
    if out.ending != Ending::Kernel(0) {
        bail!(failed(&format!("the boot ended {:?}", out.ending)));
    }
    let summary =
        summary_numbers(out, "[pinger] netping: ").with_context(|| failed("no pinger summary"))?;
    // rounds, pings, the two sizes, answered, bytes, lost, duplicates, bad, time, late, not
    // sent, the timeout.
    let [r, pings, s1, s2, answered, bytes, lost, dups, bad, us, late, unsent, _] = summary[..]
    else {
        bail!(failed("an unreadable pinger summary"));
    };
    if (r, pings, s1, s2, answered, bytes, lost, dups, bad, late, unsent)
        != (rounds, 2 * rounds, size, size, 2 * rounds, 2 * rounds * size, 0, 0, 0, 0, 0)
    {
        bail!(failed("not every ping was answered intact"));
    }
    let (idle, total) = idle_and_total(out).with_context(|| failed("no idle line"))?;
    let cpu = |name: &str| {
        cpu_ns(out, name).with_context(|| failed(&format!("no CPU account of {name}")))
    };
    Ok(PingBoot {
        total,
        idle,
        drivers: cpu("drv-a")? + cpu("drv-b")?,
        clients: cpu("pinger")? + cpu("echo")?,
        pinger_ns: (us * 1000) as f64,
        pings,
    })
}

/// Instructions per round trip of one payload size, by difference of a [`MANY`]- and a
/// [`FEW`]-round boot: the four domains', split into the drivers' and the clients', the
/// kernel's rest, and the pinger's clock.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
struct RoundTrip {
    size: u64,
    /// Both drivers' and both clients' CPU (the kept figure).
    domains: f64,
    drivers: f64,
    clients: f64,
    /// The busy time less the domains'.
    kernel: f64,
    /// The pinger's own clock from its first ping to its last answer.
    pinger_ns: f64,
    /// Pairs of boots measured (all gave the same figures).
    runs: usize,
}

fn round_trip(a: &artifacts::Artifacts, size: u64, mode: Mode) -> Result<RoundTrip> {
    let (few_m, many_m) = (ping_manifest(size, FEW)?, ping_manifest(size, MANY)?);
    let stop = format!("stop={PING_STOP}ms");
    let (few_boot, many_boot) = (boot(a, &few_m, &stop)?, boot(a, &many_m, &stop)?);
    let mut measured: Vec<RoundTrip> = Vec::new();
    for _ in 0..icount_runs(mode) {
        let few = read_ping_boot(&few_boot.run(a)?, &few_m, size, FEW)?;
        let many = read_ping_boot(&many_boot.run(a)?, &many_m, size, MANY)?;
        let n = (many.pings - few.pings) as f64;
        let per = |f: fn(&PingBoot) -> f64| (f(&many) - f(&few)) / n;
        let (drivers, clients) = (per(|b| b.drivers), per(|b| b.clients));
        let busy = per(|b| b.total - b.idle);
        measured.push(RoundTrip {
            size,
            domains: drivers + clients,
            drivers,
            clients,
            kernel: busy - drivers - clients,
            pinger_ns: per(|b| b.pinger_ns),
            runs: 1,
        });
    }
    if measured.iter().any(|m| *m != measured[0]) {
        bail!(
            "{size}-byte round trips: the figures differ between boots under -icount: {measured:?}"
        );
    }
    Ok(RoundTrip { runs: measured.len(), ..measured[0] })
}

/// The driver's idle CPU: its CPU in each of the two boots and the figure.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
struct Idle {
    short_cpu_us: f64,
    long_cpu_us: f64,
    us_per_s: f64,
    runs: usize,
}

/// Reads an idle boot of `manifest` ended at `stop=`: the driver's CPU in µs; fails unless the
/// driver served its client and both were still there when the run was stopped.
fn read_idle_boot(out: &Outcome, manifest: &str) -> Result<f64> {
    let failed = |what: &str| format!("{manifest}: {what}:\n{}", out.log_text());
    if out.ending != Ending::Kernel(0) {
        bail!(failed(&format!("the boot ended {:?}", out.ending)));
    }
    if !out.has("stop: the time given by stop= has come") {
        bail!(failed("the run did not end at stop="));
    }
    out.line("[driver] virtio-net: client n0-req").with_context(|| failed("no client served"))?;
    for d in ["driver", "client"] {
        if !out.has(&format!("{d}: still running")) {
            bail!(failed(&format!("{d} was not running at the end")));
        }
    }
    Ok(cpu_ns(out, "driver").with_context(|| failed("no CPU account of the driver"))? / 1000.0)
}

fn idle(a: &artifacts::Artifacts, mode: Mode) -> Result<Idle> {
    let m = idle_manifest()?;
    let short = boot(a, &m, &format!("stop={IDLE_SHORT}ms"))?;
    let long = boot(a, &m, &format!("stop={IDLE_LONG}ms"))?;
    let mut measured = Vec::new();
    for _ in 0..icount_runs(mode) {
        let s = read_idle_boot(&short.run(a)?, &m)?;
        let l = read_idle_boot(&long.run(a)?, &m)?;
        let secs = (IDLE_LONG - IDLE_SHORT) as f64 / 1000.0;
        measured.push(Idle { short_cpu_us: s, long_cpu_us: l, us_per_s: (l - s) / secs, runs: 1 });
    }
    if measured.iter().any(|m| *m != measured[0]) {
        bail!("the idle driver: the figures differ between boots under -icount: {measured:?}");
    }
    Ok(Idle { runs: measured.len(), ..measured[0] })
}

/// The datagrams of the one-stream boot, 1,472 bytes each.
pub const STREAM_DATAGRAMS: u64 = 400;
/// The manifest of two streams under 1:2 link-time contracts (also a QEMU test's).
pub const CONTRACTS_MANIFEST: &str = "tests/manifests/drivers/virtio-net-contracts.toml";

/// The key of the kept figure of one stream's payload throughput.
pub const STREAM_KEY: &str = "stream_mbps";
/// The key of the kept figure of the 1:2 streams' share error.
pub const SHARE_KEY: &str = "share_error_points";

/// The one-stream manifest: `sender` (behind `drv-a`) sends [`STREAM_DATAGRAMS`] datagrams of
/// 1,472 bytes as fast as its driver takes them, under the best-effort contract (1 ms of link
/// time in 10 ms, with slack), to `sink` (behind `drv-b`), which checks every payload.
fn stream_manifest() -> Result<String> {
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let n = STREAM_DATAGRAMS.to_string();
    manifest(
        "stream",
        "one stream of 1,472-byte datagrams as fast as the driver takes them",
        &[
            Node {
                driver: "drv-a",
                client: "sender",
                app: "netbench",
                client_args: args(&[
                    "--port",
                    "7000",
                    "--to",
                    "10.0.0.2:7100",
                    "--size",
                    "1472",
                    "--rate",
                    "max",
                    "--count",
                    &n,
                ]),
            },
            Node {
                driver: "drv-b",
                client: "sink",
                app: "netbench",
                client_args: args(&["--port", "7100", "--sink", &n]),
            },
        ],
    )
}

/// A netbench sender's summary: `(datagrams, payload bytes, µs from its first send to its
/// last datagram leaving, link time in µs (guaranteed + extra))`.
fn sender_summary(out: &Outcome, name: &str) -> Option<(u64, u64, u64, u64)> {
    // count, size, bytes, time, busy, guaranteed, extra, periods, missed, errors.
    match summary_numbers(out, &format!("[{name}] netbench: sent "))?[..] {
        [count, _, bytes, us, _, guaranteed, extra, _, _, 0] => {
            Some((count, bytes, us, guaranteed + extra))
        }
        _ => None,
    }
}

/// Fails unless every one of `domains` exited 0 (a netbench sink exits 0 only if every
/// payload arrived intact, none lost, duplicated or reordered).
fn all_exited(out: &Outcome, manifest: &str, domains: &[&str]) -> Result<()> {
    for d in domains {
        if !out.has(&format!("domain {d} exited with status 0")) {
            bail!("{manifest}: {d} did not exit 0:\n{}", out.log_text());
        }
    }
    Ok(())
}

/// A row of the report's streams table: its label and how to show it from [`Streams`].
type StreamRow = (&'static str, fn(&Streams) -> String);

/// One stream's figures and the 1:2 streams' share.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
struct Streams {
    /// Payload Mbit/s of the one stream, by the sender's clock.
    stream_mbps: f64,
    /// The sender's and its driver's CPU per datagram, in instructions.
    stream_cpu_per_datagram: f64,
    /// The 1:2 streams' link time, µs.
    slow_link_us: u64,
    fast_link_us: u64,
    /// `slow`'s share of the two streams' link time minus a third, in points.
    share_error_points: f64,
    runs: usize,
}

fn streams(a: &artifacts::Artifacts, mode: Mode) -> Result<Streams> {
    let one = stream_manifest()?;
    let one_boot = boot(a, &one, "")?;
    let two_boot = boot(a, CONTRACTS_MANIFEST, "")?;
    let mut measured = Vec::new();
    for _ in 0..icount_runs(mode) {
        let out = one_boot.run(a)?;
        all_exited(&out, &one, &["sender", "sink"])?;
        let (count, bytes, us, _) = sender_summary(&out, "sender")
            .with_context(|| format!("{one}: no sender summary:\n{}", out.log_text()))?;
        if count != STREAM_DATAGRAMS || us == 0 {
            bail!("{one}: the sender sent {count} datagrams in {us} us");
        }
        let cpu = |name: &str| {
            cpu_ns(&out, name).with_context(|| format!("{one}: no CPU account of {name}"))
        };
        let per_datagram = (cpu("sender")? + cpu("drv-a")?) / count as f64;
        let out = two_boot.run(a)?;
        let m = CONTRACTS_MANIFEST;
        all_exited(&out, m, &["slow", "fast", "sink-slow", "sink-fast"])?;
        let link = |name: &str| {
            sender_summary(&out, name)
                .map(|s| s.3)
                .with_context(|| format!("{m}: no summary of {name}:\n{}", out.log_text()))
        };
        let (slow, fast) = (link("slow")?, link("fast")?);
        if slow + fast == 0 {
            bail!("{m}: no link time used");
        }
        measured.push(Streams {
            stream_mbps: bytes as f64 * 8.0 / us as f64,
            stream_cpu_per_datagram: per_datagram,
            slow_link_us: slow,
            fast_link_us: fast,
            share_error_points: (slow as f64 / (slow + fast) as f64 - 1.0 / 3.0) * 100.0,
            runs: 1,
        });
    }
    if measured.iter().any(|m| *m != measured[0]) {
        bail!("the streams: the figures differ between boots under -icount: {measured:?}");
    }
    Ok(Streams { runs: measured.len(), ..measured[0] })
}

/// What one architecture measured.
#[derive(Serialize)]
struct Measured {
    arch: &'static str,
    round_trips: Vec<RoundTrip>,
    idle: Idle,
    streams: Streams,
}

fn measure_on(arch: Arch, mode: Mode) -> Result<(Measured, Table)> {
    let a = artifacts::build(arch)?;
    let mut round_trips = Vec::new();
    for size in SIZES {
        eprintln!("bench net: {} round trips of {size} bytes", arch.name());
        round_trips.push(round_trip(&a, size, mode)?);
    }
    eprintln!("bench net: {} idle driver", arch.name());
    let idle = idle(&a, mode)?;
    eprintln!("bench net: {} one stream, and two under 1:2 contracts", arch.name());
    let streams = streams(&a, mode)?;
    let mut kept: Vec<(String, f64)> =
        round_trips.iter().map(|r| (round_trip_key(r.size), r.domains)).collect();
    kept.push((IDLE_KEY.to_string(), idle.us_per_s));
    kept.push((STREAM_KEY.to_string(), streams.stream_mbps));
    kept.push((SHARE_KEY.to_string(), streams.share_error_points));
    Ok((Measured { arch: arch.name(), round_trips, idle, streams }, table(arch, "net", kept)))
}

/// The report's markdown for what each of `arches` measured.
fn report(arches: &[Arch], measured: &[Measured]) -> Result<String> {
    let mut md = String::from("## A UDP round trip between two driver domains\n\n");
    let mut t = ByArch::new(
        &["payload"],
        arches,
        &["instr/round trip", "drivers", "clients", "kernel", "pinger's clock (ns)"],
        &["Linux 6.1"],
    );
    for size in SIZES {
        let groups: Vec<Vec<String>> = measured
            .iter()
            .map(|m| {
                m.round_trips.iter().find(|r| r.size == size).map_or_else(
                    || vec!["-".to_string(); 5],
                    |r| {
                        vec![
                            format!("{:.1}", r.domains),
                            format!("{:.1}", r.drivers),
                            format!("{:.1}", r.clients),
                            format!("{:.1}", r.kernel),
                            format!("{:.1}", r.pinger_ns),
                        ]
                    },
                )
            })
            .collect();
        let anchor = figures::lookup(arches[0].name(), "net", &round_trip_key(size))
            .map_or("", |s| s.anchor);
        t.row(&[format!("{size} B")], &groups, &[anchor.to_string()]);
    }
    md.push_str(&t.finish());
    writeln!(
        md,
        "\nInstructions per round trip (one ping and its answer): guest nanoseconds under `-icount \
         shift=0,sleep=off` in one machine, two virtio-net driver domains (10.0.0.1 and 10.0.0.2) \
         on two NICs of one QEMU hub, each serving one `netping` client; the difference of a \
         {MANY}-round and a {FEW}-round boot (two pings a round) over their {} pings, so start-up \
         and shut-down cancel out. `instr/round trip` (kept): both drivers' and both clients' CPU \
         accounts (their code, smoltcp in the drivers, and the system calls they make); \
         `drivers`, `clients`: its two parts (the clients make and check every payload byte); \
         `kernel`: the rest of the busy time (the run's time less the kernel's idle time): \
         interrupts, scheduling, switches; `pinger's clock`: the pinger's own time per round \
         trip. Every figure came out the same in each pair of boots.",
        2 * (MANY - FEW)
    )?;
    md.push_str("\n## The driver's idle CPU\n\n");
    let mut t = ByArch::new(
        &["figure"],
        arches,
        &[&format!("{IDLE_SHORT} ms"), &format!("{IDLE_LONG} ms"), "µs/s"],
        &[],
    );
    let groups: Vec<Vec<String>> = measured
        .iter()
        .map(|m| {
            vec![
                format!("{:.0}", m.idle.short_cpu_us),
                format!("{:.0}", m.idle.long_cpu_us),
                format!("{:.1}", m.idle.us_per_s),
            ]
        })
        .collect();
    t.row(&["driver CPU (µs)".to_string()], &groups, &[]);
    md.push_str(&t.finish());
    writeln!(
        md,
        "\nOne virtio-net driver domain serving one `netping` client that has opened a port and \
         waits for a datagram; nothing else on the hub. The kernel ends the run at `stop=` after \
         {IDLE_SHORT} ms and after {IDLE_LONG} ms of virtual time; µs/s (kept): the driver's CPU \
         accounts' difference over the {} ms between them. A driver that polled would spend its \
         polling's cost at every wake-up.",
        IDLE_LONG - IDLE_SHORT
    )?;
    md.push_str("\n## Streams\n\n");
    let mut t = ByArch::new(&["figure"], arches, &["value"], &[]);
    let rows: [StreamRow; 5] = [
        ("one stream, payload Mbit/s", |s| format!("{:.2}", s.stream_mbps)),
        ("one stream, sender + driver instructions per datagram", |s| {
            format!("{:.0}", s.stream_cpu_per_datagram)
        }),
        ("1:2 streams, slow's link time (µs)", |s| s.slow_link_us.to_string()),
        ("1:2 streams, fast's link time (µs)", |s| s.fast_link_us.to_string()),
        ("1:2 streams, slow's share error (points)", |s| format!("{:.3}", s.share_error_points)),
    ];
    for (label, f) in rows {
        let groups: Vec<Vec<String>> = measured.iter().map(|m| vec![f(&m.streams)]).collect();
        t.row(&[label.to_string()], &groups, &[]);
    }
    md.push_str(&t.finish());
    writeln!(
        md,
        "\nOne stream: a `netbench` sender behind one driver sends {STREAM_DATAGRAMS} datagrams of \
         1,472 bytes as fast as its driver takes them, under the best-effort link-time contract \
         (1 ms in 10 ms, with slack), to a sink behind the other driver that checks every \
         payload; Mbit/s (kept) is the payload over the sender's clock from its first send to \
         its last datagram leaving, bounded by the stack's link model (100 Mbit/s with \
         Ethernet's framing: at most 95.7 Mbit/s of 1,472-byte payloads). Two streams: \
         `{CONTRACTS_MANIFEST}`, 1 ms and 2 ms of link time in every 10 ms, no slack, each \
         saturated; the share error (kept) is `slow`'s part of their link time (the stream \
         accounts) minus a third, in percentage points."
    )?;
    Ok(md)
}

/// Runs the benchmark on each of `arches` and writes `target/bench/net.{md,json}` (not in
/// [`Mode::Check`]); returns its kept figures, a table per architecture.
pub fn run(mode: Mode, arches: &[Arch]) -> Result<Vec<Table>> {
    let (measured, kept) = crate::measure::on_each(arches, mode, measure_on)?;
    let json = serde_json::to_value(&measured)?;
    crate::measure::finish("net", mode, arches, kept, || report(arches, &measured), json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use qemu_run::log::LogLine;

    fn outcome(lines: &[&str]) -> Outcome {
        Outcome {
            ending: Ending::Kernel(0),
            log: lines
                .iter()
                .map(|m| LogLine {
                    level: "INFO".into(),
                    timestamp: Some("0.100000".into()),
                    message: m.to_string(),
                })
                .collect(),
            stderr: String::new(),
            wall: std::time::Duration::ZERO,
        }
    }

    fn account(name: &str, us: u64) -> String {
        format!(
            "  {name}: cpu {us} us guaranteed + 0 us extra, 9 periods of 10000 us, 0 deadlines missed, 0 periods ended late (contract: slice 1000 us, extra true)"
        )
    }

    fn ping_log(summary: &str) -> Outcome {
        let accounts = [account("drv-a", 300), account("drv-b", 200), account("pinger", 50)];
        let mut lines = vec![summary, "  kernel: idle 900000000 ns of 1000000000 ns since boot"];
        lines.extend(accounts.iter().map(String::as_str));
        let echo = account("echo", 40);
        lines.push(&echo);
        outcome(&lines)
    }

    #[test]
    fn a_ping_boot_is_read_only_if_every_ping_came_back_intact() {
        let good = "[pinger] netping: 3 rounds to 10.0.0.2:7001: 6 pings of 64 and 64 bytes, 6 answered (384 bytes), 0 lost, 0 duplicates, 0 bad, 420 us, 0 late, 0 not sent, timeout 200 ms";
        let b = read_ping_boot(&ping_log(good), "m", 64, 3).unwrap();
        assert_eq!(
            b,
            PingBoot {
                total: 1e9,
                idle: 9e8,
                drivers: 500_000.0,
                clients: 90_000.0,
                pinger_ns: 420_000.0,
                pings: 6
            }
        );
        let lost = good.replace("6 answered (384 bytes), 0 lost", "5 answered (320 bytes), 1 lost");
        assert!(read_ping_boot(&ping_log(&lost), "m", 64, 3).is_err());
        let bad = good.replace("0 bad", "1 bad");
        assert!(read_ping_boot(&ping_log(&bad), "m", 64, 3).is_err());
        let late = good.replace("0 late", "1 late");
        assert!(read_ping_boot(&ping_log(&late), "m", 64, 3).is_err());
        // Another size or another number of rounds than the manifest asked for.
        assert!(read_ping_boot(&ping_log(good), "m", 1472, 3).is_err());
        assert!(read_ping_boot(&ping_log(good), "m", 64, 4).is_err());
        let mut failed = ping_log(good);
        failed.ending = Ending::Kernel(1);
        assert!(read_ping_boot(&failed, "m", 64, 3).is_err());
    }

    #[test]
    fn an_idle_boot_is_read_only_if_it_was_stopped_with_its_client_served() {
        let driver = account("driver", 194);
        let lines = [
            "[driver] virtio-net: client n0-req (domain 1) served",
            "stop: the time given by stop= has come",
            "  driver: still running",
            "  client: still running",
            driver.as_str(),
        ];
        assert_eq!(read_idle_boot(&outcome(&lines), "m").unwrap(), 194.0);
        for left_out in 0..4 {
            let fewer: Vec<&str> =
                lines.iter().enumerate().filter(|(i, _)| *i != left_out).map(|l| *l.1).collect();
            assert!(read_idle_boot(&outcome(&fewer), "m").is_err(), "without {}", lines[left_out]);
        }
    }

    #[test]
    fn the_manifests_are_valid() {
        for m in
            [ping_manifest(64, FEW).unwrap(), idle_manifest().unwrap(), stream_manifest().unwrap()]
        {
            let text = std::fs::read_to_string(util::root().join(&m)).unwrap();
            let parsed = manifest::parse(&m, &text, &["virtio-net", "netping", "netbench"])
                .unwrap_or_else(|e| panic!("{m}: {e}"));
            assert!(parsed.domains.len() >= 2, "{m}");
        }
        let text =
            std::fs::read_to_string(util::root().join(ping_manifest(1472, 7).unwrap())).unwrap();
        assert!(text.contains(r#""--rounds", "7", "--size", "1472""#), "{text}");
        // The echo waits for one datagram more than the probe and the 14 pings: it never ends
        // first.
        assert!(text.contains(r#""--echo", "16""#), "{text}");
    }
}
