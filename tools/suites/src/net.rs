//! The QEMU suite of the network driver domain (`drivers/virtio_net`), on both architectures
//! (virtio-net on virtio-mmio on RISC-V `virt`, virtio-net-pci with MSI-X on q35); manifests
//! in `tests/manifests/drivers/virtio-net-CHECK.toml`. Two driver domains of one machine, each
//! granted its own NIC; the NICs are ports of one QEMU hub, so nothing leaves QEMU.
//!
//! - `drivers::virtio_net_self_test`: the receiver announces itself, the sender sends it 200
//!   frames of 60 to 1,514 bytes under flow control, and the receiver checks every one (order,
//!   length, checksum, every byte). From outside: each driver's start-up line names the MAC
//!   the manifest gave its NIC; both summaries count 200 frames, the smallest 60 and the
//!   largest 1,514 bytes, and as many bytes as the frames' sizes add up to (computed here from
//!   the sizes' rule); none lost, none bad; the sender sent to the receiver's MAC; each took at
//!   least one interrupt and at most two per frame; a third NIC granted to nobody says nothing
//!   (no unexpected WARN or ERROR); and the run's virtual time is bounded on both sides.
//! - `drivers::virtio_net_idle`: interrupt-driven, not polling: the sender pauses 20 ms after
//!   every 8 frames (7 pauses) beside a CPU-bound neighbour; the receiver, which may run in
//!   slack time, uses at most 2 ms of CPU in the whole run (the kernel's accounts).
//! - `drivers::virtio_net_netping`: two driver domains serve UDP (`--ip`, 10.0.0.1 and
//!   10.0.0.2 inside the hub) through `net_server`, each to one `netping` client; the pinger
//!   plays 50 rounds of a 64-byte and a 1,472-byte ping with the echoing client of the other
//!   driver. From outside: the pinger's summary counts 100 pings, all answered with 76,800
//!   bytes, none lost, duplicated or damaged; the echo answered 100 datagrams of as many bytes;
//!   each driver served its client (100 datagrams delivered, no frame dropped) and every domain
//!   exited 0; the run's virtual time is bounded on both sides.
//! - `drivers::virtio_net_hostile`: a hostile node (`virtio-net --hostile 2000`, no stack)
//!   sends drv-b crafted frames of 11 kinds and floods the port of drv-b's `netfault --sink`
//!   client with 2,000 datagrams, while a netping pair plays across drv-a and drv-b. From
//!   outside: drv-b's drops, reason by reason, are exactly what the hostile says it sent; its
//!   slots-full drops are the sink's, and with the datagrams the sink took intact (every payload
//!   checked) they make the flood; it delivered the echo's 100 and the sink's; drv-a drops
//!   nothing for its own ports; the pings, under way during the flood, all come back intact.
//! - `drivers::virtio_net_client_dies`: a `netfault --die` client of drv-a faults with 4
//!   answers unread and sends queued; drv-a's line of its closing counts the 4 unread and
//!   sends dropped plus sends that left equal to those it made; drv-b's closed port got exactly
//!   the sends that left; the pinger on drv-a, under way at the death, loses nothing.
//! - `drivers::virtio_net_driver_dies`: drv-a (`--die-after 30`) faults with two clients'
//!   sessions open; the kernel reports it; the talker reports `Closed` after its 28 answered
//!   sends, the listener while waiting, both exit 0; a netping pair on drv-b and drv-c, under
//!   way at the death, loses nothing; a CPU-bound neighbour runs its 300 ms; every frame comes
//!   back; the kernel stopped its NIC (the PCI function at the bus, the virtio-mmio transport
//!   by a reset).
//! - `drivers::virtio_net_contracts`: two streams keep their 1:2 link-time contracts. Driver
//!   A serves two `netbench` senders of 1,472-byte datagrams as fast as it takes them, "slow"
//!   under `net = 1 ms of 10 ms` and "fast" under 2 ms of 10 ms, neither with slack time;
//!   driver B serves two sinks that check every payload. From outside: each sink received all
//!   its sender's datagrams (200 and 400, their bytes), none lost, duplicated, reordered or
//!   damaged; each sender sent them all with no extra link time; in the driver's
//!   `net period:` records, every period of the window where both streams are saturated gave
//!   each stream its slice and no more (to within one 1,514-byte frame below, none above) and
//!   no extra time, and over that window the fast stream had 2 times the slow one's link time
//!   (within 2%); both senders took the same virtual time (within 10%: with equal contracts
//!   the fast one would take twice as long); every domain exited 0; the run's virtual time is
//!   bounded on both sides.

use std::time::Duration;

use crate::harness::{QemuTest, expect_ending, expect_exit, expect_line, expect_terminated};
use qemu_run::expected::Expected;
use qemu_run::qemu::{Boot, Ending, Outcome};
use system_image::system::Spoil;
use tool_base::Arch;

/// The self-test's frames, as its manifest gives them.
const FRAMES: u64 = 200;
/// The MACs the manifest gives the NICs (none written: the default of NICs 0 and 1).
const SENDER_MAC: &str = "52:54:00:12:35:00";
const RECEIVER_MAC: &str = "52:54:00:12:35:01";

/// The length of data frame `seq`, by the rule of the driver's self-test
/// (`drivers/virtio_net/src/self_test.rs`): 60 and 1,514 bytes first, then sizes spread over
/// 60..=1,514 by a MurmurHash3 finaliser of the sequence number.
fn frame_len(seq: u32) -> u64 {
    let mix = |mut x: u32| {
        x ^= x >> 16;
        x = x.wrapping_mul(0x85eb_ca6b);
        x ^= x >> 13;
        x = x.wrapping_mul(0xc2b2_ae35);
        x ^ (x >> 16)
    };
    match seq {
        0 => 60,
        1 => 1514,
        _ => 60 + u64::from(mix(seq)) % (1514 - 60 + 1),
    }
}

/// The numbers of the summary line containing `text`.
fn numbers(out: &Outcome, text: &str) -> Result<Vec<u64>, String> {
    let line = out.line(text).ok_or(format!("no line like `{text}`"))?;
    Ok(line
        .message
        .split_whitespace()
        .filter_map(|w| w.trim_matches(|c| matches!(c, '(' | ')' | ',')).parse().ok())
        .collect())
}

/// The run's length in ns, from the kernel's idle line of the run summary.
fn run_ns(out: &Outcome) -> Result<u64, String> {
    let idle = out.line("kernel: idle ").ok_or("no idle line in the run summary")?;
    idle.message
        .split_whitespace()
        .filter_map(|w| w.parse::<u64>().ok())
        .nth(1)
        .ok_or("an unreadable idle line".into())
}

fn self_test(arch: Arch, out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    let interrupt = if arch == Arch::Riscv64 { "line" } else { "MSI-X" };
    for d in ["receiver", "sender"] {
        expect_line(
            out,
            &format!("domain {d}: device 0 granted: 1 register window(s), interrupt {interrupt}"),
        )?;
    }
    expect_line(out, &format!("[receiver] virtio-net: MAC {RECEIVER_MAC}, MTU 1500, link up"))?;
    expect_line(out, &format!("[sender] virtio-net: MAC {SENDER_MAC}, MTU 1500, link up"))?;
    let bytes: u64 = (0..FRAMES as u32).map(frame_len).sum();
    let sent_text = "virtio-net: self-test: sent ";
    let sent = numbers(out, sent_text)?;
    let [frames, smallest, largest, total, interrupts] = sent[..] else {
        return Err(format!("unreadable sender summary: {sent:?}"));
    };
    if (frames, smallest, largest, total) != (FRAMES, 60, 1514, bytes) {
        return Err(format!(
            "the sender sent {frames} frames of {smallest} to {largest} bytes ({total} bytes), want {FRAMES} of 60 to 1514 ({bytes} bytes)"
        ));
    }
    if interrupts == 0 || interrupts > 2 * FRAMES {
        return Err(format!("the sender took {interrupts} interrupts for {FRAMES} frames"));
    }
    expect_line(out, &format!("bytes) to {RECEIVER_MAC}, "))?;
    let received = numbers(out, "virtio-net: self-test: received ")?;
    let [frames, smallest, largest, total, lost, bad, interrupts] = received[..] else {
        return Err(format!("unreadable receiver summary: {received:?}"));
    };
    if (frames, smallest, largest, total, lost, bad) != (FRAMES, 60, 1514, bytes, 0, 0) {
        return Err(format!(
            "the receiver got {frames} frames of {smallest} to {largest} bytes ({total} bytes), {lost} lost, {bad} bad; want {FRAMES} of 60 to 1514 ({bytes} bytes), none lost or bad"
        ));
    }
    if interrupts == 0 || interrupts > 2 * FRAMES {
        return Err(format!("the receiver took {interrupts} interrupts for {FRAMES} frames"));
    }
    expect_exit(out, "receiver", 0)?;
    expect_exit(out, "sender", 0)?;
    // Under -icount shift=0 an instruction is a nanosecond: the receiver reads every byte
    // of the frames at least once, and the whole exchange (start-up, the receiver's 10 ms
    // READY timer, 200 frames) takes about 18 ms.
    let ns = run_ns(out)?;
    if ns < bytes || ns > 200_000_000 {
        return Err(format!("the run lasted {ns} ns (want {bytes} ns to 200 ms)"));
    }
    Ok(())
}

/// The idle check: the sender's pauses (as its manifest gives them) and the most CPU the
/// receiver may use. A receiver that polled would have its 2 ms slice in each of the 14
/// periods of the pauses, and slack beside.
const IDLE_FRAMES: u64 = 64;
const IDLE_PAUSED_NS: u64 = 7 * 20_000_000;
const IDLE_RECEIVER_CPU_US: u64 = 2_000;

fn idle(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    for d in ["receiver", "sender", "busy"] {
        expect_exit(out, d, 0)?;
    }
    let received = numbers(out, "virtio-net: self-test: received ")?;
    if received.first() != Some(&IDLE_FRAMES) || received.get(4..6) != Some(&[0, 0]) {
        return Err(format!("the receiver's summary: {received:?}"));
    }
    let ns = run_ns(out)?;
    if ns < IDLE_PAUSED_NS {
        return Err(format!("the run lasted {ns} ns, less than the sender's pauses"));
    }
    let accounts = qemu_run::cpu::summary_accounts(out);
    let receiver =
        accounts.iter().find(|a| a.domain == "receiver").ok_or("no account of the receiver")?;
    let cpu_us = receiver.guaranteed_us + receiver.extra_us;
    if cpu_us == 0 || cpu_us > IDLE_RECEIVER_CPU_US {
        return Err(format!(
            "the receiver used {cpu_us} us of CPU in a run of {} ms, {} of them idle for it (at most {IDLE_RECEIVER_CPU_US} us)",
            ns / 1_000_000,
            IDLE_PAUSED_NS / 1_000_000
        ));
    }
    Ok(())
}

/// The netping run, as its manifest gives it: rounds, and the bytes of a round's two pings.
const PING_ROUNDS: u64 = 50;
const PING_ROUND_BYTES: u64 = 64 + 1472;

fn netping(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    for d in ["drv-a", "drv-b", "pinger", "echo"] {
        expect_exit(out, d, 0)?;
    }
    let pings = 2 * PING_ROUNDS;
    let bytes = PING_ROUNDS * PING_ROUND_BYTES;
    let summary = numbers(out, "[pinger] netping: ")?;
    // rounds, pings, the two sizes, answered, bytes, lost, duplicates, bad, time, late, not
    // sent, the timeout.
    let [rounds, sent, small, large, answered, total, lost, dups, bad, us, late, unsent, _] =
        summary[..]
    else {
        return Err(format!("unreadable pinger summary: {summary:?}"));
    };
    if (rounds, sent, small, large, answered, total, lost, dups, bad, late, unsent)
        != (PING_ROUNDS, pings, 64, 1472, pings, bytes, 0, 0, 0, 0, 0)
    {
        return Err(format!("the pinger's summary: {summary:?}"));
    }
    expect_line(out, "10.0.0.2:7001: ")?;
    expect_line(out, &format!("[echo] netping: echo: answered {pings} datagrams ({bytes} bytes)"))?;
    expect_line(out, &format!("[echo] netping: echo: from 10.0.0.1:7000: {pings} received"))?;
    for d in ["drv-a", "drv-b"] {
        expect_line(out, &format!("[{d}] virtio-net: client "))?;
        let served = numbers(out, &format!("[{d}] virtio-net: every client gone: "))?;
        // requests, rejected, delivered (every ping and the pinger's one probe, which the
        // deterministic run answers at once), interrupts, dropped, and the closed clients'
        // drops.
        if served.get(1..3) != Some(&[0, pings + 1]) || served.get(4..7) != Some(&[0, 0, 0]) {
            return Err(format!("{d}'s summary: {served:?}"));
        }
    }
    // Each round trip moves every ping's bytes through four domains; 100 of them take
    // about 10 ms after the pinger's 50 ms start.
    if us == 0 || us > 1_000_000 {
        return Err(format!("the pings took {us} us (want 1 us to 1 s)"));
    }
    let ns = run_ns(out)?;
    if !(50_000_000..=2_000_000_000).contains(&ns) {
        return Err(format!("the run lasted {ns} ns (want 50 ms to 2 s)"));
    }
    Ok(())
}

/// The counts of a line of drops by reason (`net_server`'s `frames dropped: runt N, ...`, or
/// the hostile sender's `crafted frames: ...` in the same words and order): each reason and
/// its count, in order.
fn by_reason(out: &Outcome, text: &str) -> Result<Vec<(String, u64)>, String> {
    let line = out.line(text).ok_or(format!("no line like `{text}`"))?;
    let (_, list) = line.message.split_once(text).ok_or("unreadable line")?;
    list.split(", ")
        .map(|item| {
            let (reason, n) = item.rsplit_once(' ').ok_or(format!("unreadable `{item}`"))?;
            let n = n.parse().map_err(|_| format!("unreadable count in `{item}`"))?;
            Ok((reason.to_string(), n))
        })
        .collect()
}

/// The instant of the first line containing `text`, in µs of the kernel's clock.
fn at_us(out: &Outcome, text: &str) -> Result<u64, String> {
    let line = out.line(text).ok_or(format!("no line like `{text}`"))?;
    let t = line.timestamp.as_deref().ok_or(format!("no timestamp on `{text}`"))?;
    let s: f64 = t.trim().parse().map_err(|_| format!("unreadable timestamp `{t}`"))?;
    Ok((s * 1e6).round() as u64)
}

/// The pinger `name`'s netping summary: every one of its 100 pings answered intact, none lost
/// or duplicated; the interval its pings took, in µs of the kernel's clock.
fn pings_intact(out: &Outcome, name: &str) -> Result<(u64, u64), String> {
    let pings = 2 * PING_ROUNDS;
    let text = format!("[{name}] netping: ");
    let summary = numbers(out, &text)?;
    let [_, sent, _, _, answered, total, lost, dups, bad, us, late, unsent, _] = summary[..] else {
        return Err(format!("unreadable pinger summary: {summary:?}"));
    };
    if (sent, answered, total, lost, dups, bad, late, unsent)
        != (pings, pings, PING_ROUNDS * PING_ROUND_BYTES, 0, 0, 0, 0, 0)
    {
        return Err(format!("the pinger's summary: {summary:?}"));
    }
    let end = at_us(out, &text)?;
    if us == 0 || us > end {
        return Err(format!("the pings took {us} us, ending at {end} us"));
    }
    Ok((end - us, end))
}

/// The hostile run, as its manifest gives it: the flood's datagrams, the victim's MAC,
/// address and port.
const FLOOD: u64 = 2000;
const VICTIM: &str = "52:54:00:12:35:01 10.0.0.2 port 7100";

fn hostile(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    for d in ["drv-a", "drv-b", "hostile", "pinger", "echo", "sink"] {
        expect_exit(out, d, 0)?;
    }
    // What the hostile says it sent, kind by kind, and what the victim's driver counted.
    let crafted = by_reason(out, "[hostile] virtio-net: hostile: crafted frames: ")?;
    let victim = by_reason(out, "[drv-b] virtio-net: frames dropped: ")?;
    if crafted.len() != 11 || crafted.iter().any(|(_, n)| *n == 0) {
        return Err(format!("the hostile's frames: {crafted:?}"));
    }
    if victim.len() != crafted.len() + 1 || victim[..crafted.len()] != crafted[..] {
        return Err(format!("the victim counted {victim:?}, the hostile sent {crafted:?}"));
    }
    expect_line(out, &format!("hostile: flooded {VICTIM} with {FLOOD} datagrams of 200 bytes"))?;
    // The sink: every datagram it took intact, the rest dropped with its slots full, as its
    // driver counted them.
    let sink = numbers(out, "[sink] netfault: sink: a flood of ")?;
    let [flood, intact, dropped, dups, bad] = sink[..] else {
        return Err(format!("unreadable sink summary: {sink:?}"));
    };
    if flood != FLOOD || intact + dropped != FLOOD || intact == 0 || dropped == 0 || dups + bad > 0
    {
        return Err(format!("the sink's summary: {sink:?}"));
    }
    if victim[11] != ("slots full".to_string(), dropped) {
        return Err(format!(
            "the victim's slots-full drops {:?}, the sink's {dropped}",
            victim[11]
        ));
    }
    // The victim's driver delivered the echo's 100 pings (and the pinger's probe) and the
    // sink's datagrams, dropped exactly the crafted frames and the flood's excess, and closed
    // nobody.
    let crafted_total: u64 = crafted.iter().map(|(_, n)| n).sum();
    let served = numbers(out, "[drv-b] virtio-net: every client gone: ")?;
    let want = [2 * PING_ROUNDS + 1 + intact, crafted_total + dropped, 0, 0];
    // (Its last two numbers are the loans taken and returned: none on this path.)
    if served.len() != 9
        || [served[2], served[4], served[5], served[6]] != want
        || served[7..] != [0, 0]
    {
        return Err(format!("drv-b's summary: {served:?} (want delivered, dropped: {want:?})"));
    }
    // The other driver saw every frame on the hub, the flood included, and dropped it: none
    // for its own ports, none with its client's slots full.
    let other = by_reason(out, "[drv-a] virtio-net: frames dropped: ")?;
    let other_total: u64 = other.iter().map(|(_, n)| n).sum();
    if other.len() != 12 || other[10].1 + other[11].1 > 0 || other_total < FLOOD + crafted_total {
        return Err(format!("drv-a's drops: {other:?}"));
    }
    expect_line(out, &format!("[echo] netping: echo: answered {} datagrams", 2 * PING_ROUNDS))?;
    let (ping_start, ping_end) = pings_intact(out, "pinger")?;
    // The flood came while the pings were under way.
    let (flood_start, flood_end) =
        (at_us(out, "hostile: crafted frames: ")?, at_us(out, "hostile: flooded ")?);
    if flood_start >= ping_end || flood_end <= ping_start {
        return Err(format!(
            "the flood ({flood_start} to {flood_end} us) missed the pings ({ping_start} to {ping_end} us)"
        ));
    }
    let ns = run_ns(out)?;
    if !(50_000_000..=2_000_000_000).contains(&ns) {
        return Err(format!("the run lasted {ns} ns (want 50 ms to 2 s)"));
    }
    Ok(())
}

/// The dying client's fault, which the kernel reports.
const DIER_FAULT: Expected = &[
    "domain dier: store page fault at address 0x10, *",
    "domain dier: the address is outside the user half",
    "domain dier terminated: store page fault",
];
/// The dying client's answers unread and sends made, as its manifest gives them.
const DIER_ANSWERS: u64 = 4;
const DIER_SENDS: u64 = DIER_ANSWERS + 12;

fn client_dies(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    expect_terminated(out, "dier", "store page fault")?;
    for d in ["drv-a", "drv-b", "pinger", "echo", "echo2"] {
        expect_exit(out, d, 0)?;
    }
    let dier = numbers(out, "[dier] netfault: die: dying with ")?;
    let [unread, made, seen_sent] = dier[..] else {
        return Err(format!("unreadable dier line: {dier:?}"));
    };
    if (unread, made) != (DIER_ANSWERS, DIER_SENDS) {
        return Err(format!("the dier's line: {dier:?}"));
    }
    // Its driver closed it: every send it made either left or was dropped from its queue, and
    // the answers waiting in its slots were dropped.
    let gone = numbers(out, "[drv-a] virtio-net: client nd-req gone: dropped ")?;
    let [dropped_tx, dropped_rx, sent, received] = gone[..] else {
        return Err(format!("unreadable line of the dier's closing: {gone:?}"));
    };
    if dropped_tx == 0
        || dropped_tx + sent != DIER_SENDS
        || sent < seen_sent.max(DIER_ANSWERS)
        || (dropped_rx, received) != (DIER_ANSWERS, DIER_ANSWERS)
    {
        return Err(format!("the dier's closing: {gone:?} (it had made {DIER_SENDS} sends)"));
    }
    // The queued sends that left before it died reached drv-b's closed port, no more.
    let b = by_reason(out, "[drv-b] virtio-net: frames dropped: ")?;
    let b_total: u64 = b.iter().map(|(_, n)| n).sum();
    if b.get(10) != Some(&("no port".to_string(), sent - DIER_ANSWERS)) || b_total != b[10].1 {
        return Err(format!("drv-b's drops: {b:?} (want no port {})", sent - DIER_ANSWERS));
    }
    let served = numbers(out, "[drv-a] virtio-net: every client gone: ")?;
    // Delivered: the pinger's answers (and its probe's) and the dier's answers.
    if served.get(2) != Some(&(2 * PING_ROUNDS + 1 + DIER_ANSWERS))
        || served.get(4..7) != Some(&[0, dropped_tx, DIER_ANSWERS])
    {
        return Err(format!("drv-a's summary: {served:?}"));
    }
    // The pinger, the other client of the same driver, was under way when the dier died and
    // lost nothing.
    let (ping_start, ping_end) = pings_intact(out, "pinger")?;
    let died = at_us(out, "domain dier terminated")?;
    if !(ping_start..ping_end).contains(&died) {
        return Err(format!(
            "the dier died at {died} us, not during the pings ({ping_start} to {ping_end} us)"
        ));
    }
    let ns = run_ns(out)?;
    if !(50_000_000..=2_000_000_000).contains(&ns) {
        return Err(format!("the run lasted {ns} ns (want 50 ms to 2 s)"));
    }
    Ok(())
}

/// The dying driver's fault, which the kernel reports.
const DRIVER_FAULT: Expected = &[
    "domain drv-a: store page fault at address 0x10, *",
    "domain drv-a: the address is outside the user half",
    "domain drv-a terminated: store page fault",
];
/// The requests the dying driver answers (its manifest's `--die-after`): the talker's and the
/// listener's Opens, and the talker's sends.
const DRIVER_REQUESTS: u64 = 30;

fn driver_dies(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    expect_terminated(out, "drv-a", "store page fault")?;
    expect_line(
        out,
        &format!("[drv-a] virtio-net: dying on purpose after {DRIVER_REQUESTS} requests"),
    )?;
    // Its NIC was stopped: a virtio-net-pci function at the bus, a virtio-mmio transport by
    // a reset, so that it writes no more frames into the memory the kernel took back.
    expect_line(out, "domain drv-a: 1 device(s) stopped")?;
    for d in ["talker", "listener", "drv-b", "drv-c", "echo", "pinger", "busy"] {
        expect_exit(out, d, 0)?;
    }
    // Both clients learnt it from their sessions: the talker after every send it was
    // answered, the listener while it waited.
    let sends = DRIVER_REQUESTS - 2;
    expect_line(
        out,
        &format!("[talker] netfault: the driver is gone (Closed) after {sends} datagrams sent"),
    )?;
    expect_line(
        out,
        "[listener] netfault: the driver is gone (Closed) after 0 datagrams received",
    )?;
    // The talker's datagrams that left reached drv-b's closed port: no more than it sent.
    let b = by_reason(out, "[drv-b] virtio-net: frames dropped: ")?;
    let no_port = b.get(10).filter(|(r, _)| r == "no port").map_or(0, |(_, n)| *n);
    if no_port == 0 || no_port > sends {
        return Err(format!("drv-b's drops: {b:?} (want no port 1 to {sends})"));
    }
    // The other drivers and their clients went on: the pings, under way at the death, all
    // answered; and the CPU-bound neighbour ran its 300 ms to the end.
    let (ping_start, ping_end) = pings_intact(out, "pinger")?;
    let died = at_us(out, "domain drv-a terminated")?;
    if !(ping_start..ping_end).contains(&died) {
        return Err(format!(
            "drv-a died at {died} us, not during the pings ({ping_start} to {ping_end} us)"
        ));
    }
    for d in ["drv-b", "drv-c"] {
        let served = numbers(out, &format!("[{d}] virtio-net: every client gone: "))?;
        // The pings and the pinger's probe.
        if served.get(1..3) != Some(&[0, 2 * PING_ROUNDS + 1]) {
            return Err(format!("{d}'s summary: {served:?}"));
        }
    }
    let spin = out.line("[busy] spin: iterations=").ok_or("no summary of the busy neighbour")?;
    let elapsed = spin
        .message
        .split_whitespace()
        .find_map(|w| w.strip_prefix("elapsed_ns=")?.parse::<u64>().ok())
        .ok_or("no elapsed_ns in the busy neighbour's summary")?;
    // 300 ms by its clock (x86_64's, from the TSC, may fall a few ns short).
    if !(299_000_000..=301_000_000).contains(&elapsed) {
        return Err(format!("the busy neighbour ran {elapsed} ns, not its 300 ms"));
    }
    crate::domains::frames_returned(out)?;
    let ns = run_ns(out)?;
    if !(300_000_000..=2_000_000_000).contains(&ns) {
        return Err(format!("the run lasted {ns} ns (want 300 ms to 2 s)"));
    }
    Ok(())
}

/// The contracts run, as its manifest gives it: each stream's datagrams and slice of link
/// time in every 10 ms; the datagrams' payload.
const STREAMS: [(&str, u64, u64); 2] = [("slow", 200, 1_000_000), ("fast", 400, 2_000_000)];
const STREAM_PAYLOAD: u64 = 1472;
const STREAM_PERIOD_NS: u64 = 10_000_000;
/// A 1,514-byte frame's time on the modelled 100 Mbit/s link, with Ethernet's 24 bytes of
/// preamble, check sequence and gap: the most a period's guaranteed time may fall short.
const FRAME_NS: u64 = (1514 + 24) * 8 * 10;

fn contracts(out: &Outcome) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    for d in ["drv-a", "drv-b", "slow", "fast", "sink-slow", "sink-fast"] {
        expect_exit(out, d, 0)?;
    }
    let mut sent_us = Vec::new();
    for (name, count, _) in STREAMS {
        let bytes = count * STREAM_PAYLOAD;
        let sink = numbers(out, &format!("[sink-{name}] netbench: sink: received "))?;
        // received, bytes, time, lost, duplicates, reordered, damaged (the sender's address
        // is no number).
        let [received, total, _, lost, dups, reordered, damaged] = sink[..] else {
            return Err(format!("unreadable summary of sink-{name}: {sink:?}"));
        };
        if (received, total, lost, dups, reordered, damaged) != (count, bytes, 0, 0, 0, 0) {
            return Err(format!("sink-{name}'s summary: {sink:?}"));
        }
        expect_line(
            out,
            &format!(
                "[sink-{name}] netbench: sink: received {count} datagrams ({bytes} bytes) from 10.0.0.1:"
            ),
        )?;
        let sent = numbers(out, &format!("[{name}] netbench: sent "))?;
        // count, size, bytes, time, busy, guaranteed, extra, periods, missed, errors.
        let [n, size, total, us, _, _, extra, _, _, errors] = sent[..] else {
            return Err(format!("unreadable summary of {name}: {sent:?}"));
        };
        if (n, size, total, extra, errors) != (count, STREAM_PAYLOAD, bytes, 0, 0) {
            return Err(format!("{name}'s summary: {sent:?}"));
        }
        sent_us.push(us);
    }
    let periods = qemu_run::disk_trace::records(&qemu_run::disk_trace::NET, &out.log);
    let busy = |name: &str| {
        let mine = periods.iter().filter(|p| p.stream == name && p.guaranteed > 0);
        let first = mine.clone().map(|p| p.start).min().unwrap_or(0);
        (first, mine.map(|p| p.end).max().unwrap_or(0))
    };
    let (s0, e0) = busy("slow");
    let (s1, e1) = busy("fast");
    // Periods wholly inside the window both streams were sending in, but for its first and
    // last period (the streams start and finish in them).
    let (from, to) = (s0.max(s1) + STREAM_PERIOD_NS, e0.min(e1) - STREAM_PERIOD_NS);
    let mut link = [0u64; 2];
    for (k, (name, _, slice)) in STREAMS.into_iter().enumerate() {
        let window: Vec<_> =
            periods.iter().filter(|p| p.stream == name && p.start >= from && p.end <= to).collect();
        if window.len() < 15 {
            return Err(format!(
                "{name}: {} periods in the window {from}..{to} ns where both streams were saturated (want at least 15)",
                window.len()
            ));
        }
        for p in &window {
            let fits = p.guaranteed <= slice && p.guaranteed + FRAME_NS >= slice;
            if !fits || p.extra != 0 || p.end - p.start != STREAM_PERIOD_NS {
                return Err(format!(
                    "{name}: a period of {} ns with {} ns guaranteed and {} ns extra, want {slice} ns minus at most one frame ({FRAME_NS} ns) and no extra: {p:?}",
                    p.end - p.start,
                    p.guaranteed,
                    p.extra
                ));
            }
            link[k] += p.guaranteed;
        }
    }
    let ratio = link[1] as f64 / link[0] as f64;
    if !(1.96..=2.04).contains(&ratio) {
        return Err(format!("link time fast : slow = {ratio:.3} over the window (want 2)"));
    }
    let time_ratio = sent_us[1] as f64 / sent_us[0] as f64;
    if !(0.9..=1.1).contains(&time_ratio) {
        return Err(format!(
            "the senders took {} and {} us (want the same within 10%)",
            sent_us[0], sent_us[1]
        ));
    }
    // 200 datagrams at 8 frames of every 10 ms: 250 ms after the senders' 50 ms start.
    let ns = run_ns(out)?;
    if !(300_000_000..=2_000_000_000).contains(&ns) {
        return Err(format!("the run lasted {ns} ns (want 300 ms to 2 s)"));
    }
    Ok(())
}

/// The suite's tests on `arch`.
pub(super) fn net_tests(p: &str, arch: Arch) -> Vec<QemuTest> {
    let test_expecting = |check: &str, expected: Expected, f: crate::harness::Check| {
        let mut boot = Boot::new(arch);
        boot.icount = true;
        boot.timeout = Duration::from_secs(120);
        QemuTest {
            name: format!("{p}drivers::virtio_net_{}", check.replace('-', "_")),
            boot,
            system: Some((
                format!("tests/manifests/drivers/virtio-net-{check}.toml"),
                Spoil::Nothing,
            )),
            expected,
            check: f,
        }
    };
    let test = |check: &str, f: crate::harness::Check| test_expecting(check, &[], f);
    vec![
        test("self-test", Box::new(move |out| self_test(arch, out))),
        test("idle", Box::new(idle)),
        test("netping", Box::new(netping)),
        test("hostile", Box::new(hostile)),
        test_expecting("client-dies", DIER_FAULT, Box::new(client_dies)),
        test_expecting("driver-dies", DRIVER_FAULT, Box::new(driver_dies)),
        test("contracts", Box::new(contracts)),
    ]
}
