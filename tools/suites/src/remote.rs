//! Remote paging on one machine (`qemu::<arch>::remote::...`): the client and its servers on
//! two network driver domains of one QEMU hub, under `-icount shift=0,sleep=off`, so that the
//! whole exchange runs in the guest's virtual time. The three-node scenarios are in
//! [`crate::cluster`].
//!
//! - `remote::one_node`: heracles pages 128 pages on 32 frames to two paging servers behind
//!   the other driver, every page mirrored to the other server
//!   (`tests/manifests/remote/one-node.toml`). From outside: every byte checked (no mismatch,
//!   every page checked at the end); the client created a primary stream on one server and a
//!   mirror stream on the other and lost neither; every page it wrote went to both (its count
//!   even, each server's count of whole pages stored half of it); reads came from the primary
//!   alone; the backing store wrote nothing to the local disk and fell back for no page; each
//!   server served one client, charged it CPU time with its packets' receive work in it and
//!   the link time of its replies (between a shortest and a longest frame's each), refused
//!   nothing, refused no more tokens than the client resent packets (a resent packet that
//!   arrives after its stream's release is refused), and ended when the client released its
//!   stream; each write's copy to its primary left from the page's frame lent to
//!   the client's driver (a SendLoan: as many loans taken as remote writes of whole pages;
//!   with `netc` a compressed page leaves from the client's buffer), and the driver
//!   returned every loan it took; every domain exited 0; the run's virtual time is bounded on both
//!   sides. Every page went whole: the client's page bytes are 4,096 per page written, and
//!   each server stored half of them.
//! - `remote::one_node_netc`: the same with `netc = true`
//!   (`tests/manifests/remote/one-node-netc.toml`): the same checks, every byte included, and
//!   the client compressed some pages but not all (the workload's random pages do not
//!   shrink), its page bytes between what WKdm's smallest output (264 bytes) and one byte
//!   short of a page per compressed page allow, and each server stored exactly half the bytes
//!   the client sent (what it was sent, not whole pages).

use std::time::Duration;

use crate::harness::{QemuTest, expect_ending, expect_exit, expect_line};
use qemu_run::log::field;
use qemu_run::qemu::{Boot, Ending, Outcome};
use system_image::system::Spoil;
use tool_base::Arch;

/// The message of the first line containing `text`.
pub(crate) fn line_with<'a>(out: &'a Outcome, text: &str) -> Result<&'a str, String> {
    out.line(text).map(|l| l.message.as_str()).ok_or(format!("no log line contains `{text}`"))
}

/// The value of `key=` in `line`.
pub(crate) fn get(line: &str, key: &str) -> Result<u64, String> {
    field(line, key).ok_or(format!("no `{key}=` in `{line}`"))
}

/// The number just before `text` in `line`.
pub(crate) fn count_before(line: &str, text: &str) -> Result<u64, String> {
    let at = line.find(text).ok_or(format!("no `{text}` in `{line}`"))?;
    line[..at]
        .rsplit(' ')
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or(format!("no number before `{text}` in `{line}`"))
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

fn one_node(out: &Outcome) -> Result<(), String> {
    one_node_with(out, false)
}

fn one_node_netc(out: &Outcome) -> Result<(), String> {
    one_node_with(out, true)
}

/// The smallest WKdm page (its header and tags).
const WKDM_MIN: u64 = 264;

/// The client's page bytes from its `remote wire` line, checked against `netc` and the pages
/// written.
fn check_netc(remote: &str, netc: bool, written: u64) -> Result<u64, String> {
    let compressed = get(remote, "compressed_writes")?;
    let bytes = get(remote, "page_bytes_written")?;
    let whole = (written - compressed.min(written)) * 4096;
    let ok = if netc {
        remote.contains(" netc=yes ")
            && compressed > 0
            && compressed < written
            && compressed % 2 == 0
            && (whole + compressed * WKDM_MIN..=whole + compressed * 4095).contains(&bytes)
    } else {
        remote.contains(" netc=no ") && compressed == 0 && bytes == written * 4096
    };
    if !ok {
        return Err(format!("page bytes do not fit netc={netc}: {remote}"));
    }
    Ok(bytes)
}

fn one_node_with(out: &Outcome, netc: bool) -> Result<(), String> {
    expect_ending(out, Ending::Kernel(0))?;
    for d in ["pager", "srv-1", "srv-2", "drv-a", "drv-b", "blk"] {
        expect_exit(out, d, 0)?;
    }
    let random = line_with(out, "heracles: random pages=")?;
    if get(random, "pages")? != 128
        || get(random, "mismatches")? != 0
        || get(random, "checked")? < 128
    {
        return Err(format!("contents wrong or pages unchecked: {random}"));
    }
    expect_line(out, "heracles: remote: server 10.0.0.2:7100 stream 1 role Primary")?;
    expect_line(out, "heracles: remote: server 10.0.0.2:7101 stream 1 role Mirror")?;
    let remote = line_with(out, "heracles: remote program=random")?;
    let written = get(remote, "pages_written")?;
    let read = get(remote, "pages_read")?;
    if !remote.contains("mirror=server")
        || get(remote, "servers")? != 2
        || get(remote, "failovers")? != 0
        || written < 2 * 96
        || written % 2 != 0
        || read < 96
    {
        return Err(format!("the client did not page to both servers, mirrored: {remote}"));
    }
    let wire = line_with(out, "heracles: remote wire ")?;
    let page_bytes = check_netc(wire, netc, written)?;
    let store = line_with(out, "heracles: store combination=")?;
    let events = line_with(out, "heracles: store events ")?;
    for (line, k) in [
        (store, "local_writes"),
        (store, "fallbacks"),
        (events, "lost_remote"),
        (events, "servers_lost"),
    ] {
        if get(line, k)? != 0 {
            return Err(format!("{k} should be 0 with two servers answering: {line}"));
        }
    }
    if get(store, "remote_writes")? * 2 != written {
        return Err(format!("each remote write should be two pages written: {store} / {remote}"));
    }
    // Each whole page's copy to its primary left from the page's frame, lent to drv-a
    // (SendLoan), and drv-a returned every loan it took. A compressed page leaves from the
    // client's buffer (`compressed_writes` counts both servers' copies).
    let gone = line_with(out, "[drv-a] virtio-net: every client gone: ")?;
    let (taken, returned) = (count_before(gone, " loans taken")?, count_before(gone, " returned")?);
    let whole_writes = get(store, "remote_writes")? - get(wire, "compressed_writes")? / 2;
    if taken != whole_writes || returned != taken {
        return Err(format!("every page write should leave from its lent frame: {gone} / {store}"));
    }
    for (srv, role, reads_from) in [("srv-1", "primary", true), ("srv-2", "mirror", false)] {
        let client = line_with(out, &format!("[{srv}] paging-server: client 10.0.0.1:"))?;
        if !client.contains(&format!(" role={role} disk=yes reserved=128 "))
            || !client.ends_with("released=true")
        {
            return Err(format!("{srv}: {client}"));
        }
        if get(client, "writes")? * 2 != written
            || get(client, "bytes_written")? * 2 != page_bytes
            || get(client, "refused")? != 0
            || get(client, "cpu_ns")? == 0
        {
            return Err(format!("{srv} should have stored half the pages written: {client}"));
        }
        // Its packets' receive work is part of its charge, and its replies' link time is
        // between a shortest and a longest Ethernet frame's each at 100 Mbit/s (84 and 1,538
        // bytes on the wire).
        let charged = line_with(out, &format!("[{srv}] paging-server: charged 10.0.0.1:"))?;
        let (cpu, receive) = (get(client, "cpu_ns")?, get(charged, "receive_ns")?);
        let (sent, net) = (get(charged, "sent")?, get(charged, "net_ns")?);
        if receive == 0
            || receive >= cpu
            || sent == 0
            || !(sent * 6_720..=sent * 123_040).contains(&net)
        {
            return Err(format!(
                "{srv}: receive work or link time not charged: {client} {charged}"
            ));
        }
        let reads = get(client, "reads")?;
        if reads_from != (reads >= read) || (!reads_from && reads != 0) {
            return Err(format!("reads should come from the primary alone: {client}"));
        }
        // A packet with a bad token can only be one of the client's own sent again that
        // arrived after its stream was released: never more than the client resent.
        let served = line_with(out, &format!("[{srv}] paging-server: served streams=1 "))?;
        if get(served, "bad_token")? > get(remote, "retransmits")? {
            return Err(format!("{srv}: more refused tokens than resent packets: {served}"));
        }
        expect_line(
            out,
            &format!("[{srv}] paging-server: ended: every client released its stream"),
        )?;
    }
    // Under -icount an instruction is a nanosecond: the 2,000 steps' faults each cost a
    // round trip through four domains.
    let ns = run_ns(out)?;
    if !(100_000_000..=60_000_000_000).contains(&ns) {
        return Err(format!("the run lasted {ns} ns (want 100 ms to 60 s)"));
    }
    Ok(())
}

/// The suite's tests on `arch`.
pub(super) fn remote_tests(p: &str, arch: Arch) -> Vec<QemuTest> {
    let mut boot = Boot::new(arch);
    boot.icount = true;
    boot.timeout = Duration::from_secs(300);
    vec![
        QemuTest {
            name: format!("{p}remote::one_node"),
            boot: boot.clone(),
            system: Some(("tests/manifests/remote/one-node.toml".into(), Spoil::Nothing)),
            expected: &[],
            check: Box::new(one_node),
        },
        QemuTest {
            name: format!("{p}remote::one_node_netc"),
            boot,
            system: Some(("tests/manifests/remote/one-node-netc.toml".into(), Spoil::Nothing)),
            expected: &[],
            check: Box::new(one_node_netc),
        },
    ]
}
