//! `qemu::cluster::remote_trader`, `remote_revoke`, `remote_revoke_alone`,
//! `remote_paging_partial_revocation`: remote paging's control plane across three nodes of both
//! architectures (`tests/clusters/remote-trader.toml`, `remote-revoke.toml`,
//! `remote-revoke-alone.toml`, `remote-revoke-part.toml`): heracles on node a (riscv64) has no
//! static server and pages a stretch of 128 pages on 32 frames, 6,000 seeded steps of
//! whole-page writes and reads, every byte checked, to a server it finds through the trader on
//! b (x86_64), to which the paging servers of b (4M) and c (riscv64) advertise. Every test
//! reads the client's, the servers' and the trader's own counts from outside.
//!
//! - `remote_trader`: every byte right, every page remote (nothing to the local disk, nothing
//!   lost); the trader heard both servers' adverts, acknowledged them (none missed at b, on the
//!   trader's own node, all acknowledged but perhaps the one sent as b ended) and answered the
//!   client's query with servers; the server a used served it and ended when it released its
//!   stream.
//! - `remote_revoke`: b's local domain takes 3,900K at 7 s and b revokes a (one revocation on
//!   both sides); a finds c through the trader; b forwards every page it held (128) to c,
//!   counts the client moved, and ends at its release; c serves a to its end; every byte right,
//!   nothing to the local disk, nothing lost.
//! - `remote_revoke_alone`: the same revocation with c too small to be offered: a finds no
//!   other server, is told, and its pages come back to its local disk (populated, pages written
//!   locally afterwards), nothing lost, every byte right; b counts the client returned, not
//!   moved; c served no one.
//! - `remote_paging_partial_revocation` (`tests/clusters/remote-revoke-part.toml`): b takes
//!   back 48 pages of a's reservation of 128 at 8 s (`--revoke-part 8000:48`); a holds, finds
//!   c through the trader, moves exactly 48 pages there itself (read from b, written to c,
//!   freed on b) and tells b; b counts the partial revocation done and 48 pages given back,
//!   forwards nothing and keeps a's other 80 pages to its release with a reservation of 80;
//!   c took exactly the 48; every byte right, nothing to the local disk, nothing lost.

use crate::cluster::{ClusterRun, ClusterTest, three_checked};
use crate::cluster_remote::{intact, served};
use crate::remote::get;

/// The tests, by name.
pub(super) const TESTS: &[(&str, ClusterTest)] = &[
    ("remote_trader", remote_trader),
    ("remote_revoke", remote_revoke),
    ("remote_revoke_alone", remote_revoke_alone),
    ("remote_paging_partial_revocation", remote_paging_partial_revocation),
];

/// Node a's client: every byte right, a server found through the trader. Its remote line and
/// the backing store's line.
fn client(run: &ClusterRun) -> Result<(String, String), String> {
    intact(run, 6000)?;
    run.line_of("a", "[pager] heracles: remote: server 10.0.0.")?;
    let remote = run.line_of("a", "[pager] heracles: remote program=random")?;
    // The backing store's counts: one line, or two (`store ...` and `store events ...`).
    let mut store = run.line_of("a", "[pager] heracles: store combination=")?;
    if let Ok(events) = run.line_of("a", "[pager] heracles: store events ") {
        store = format!("{store} {events}");
    }
    if get(&store, "lost_remote")? != 0 || get(&store, "servers_lost")? != 0 {
        return Err(format!("pages or servers lost: {store}"));
    }
    Ok((remote, store))
}

/// Server `node`'s line of its adverts and revocations.
fn control(run: &ClusterRun, node: &str) -> Result<String, String> {
    run.line_of(node, "[server] paging-server: adverts sent=")
}

/// Every page stayed remote.
fn all_remote(store: &str) -> Result<(), String> {
    for k in ["local_writes", "fallbacks", "populated"] {
        if get(store, k)? != 0 {
            return Err(format!("{k} should be 0: {store}"));
        }
    }
    Ok(())
}

fn trader(run: &ClusterRun) -> Result<(), String> {
    run.finished(3)?;
    let (remote, store) = client(run)?;
    all_remote(&store)?;
    if get(&remote, "servers")? != 1 || get(&remote, "revocations")? != 0 {
        return Err(format!("want one server, no revocation: {remote}"));
    }
    let t = run.line_of("b", "[trader] trader: ended (idle): ")?;
    if get(&t, "servers")? != 2 || get(&t, "answered")? == 0 || get(&t, "bad")? != 0 {
        return Err(format!("the trader did not hold both servers or answer with one: {t}"));
    }
    let b = control(run, "b")?;
    // Every advert acknowledged but perhaps the last, sent as the server ended.
    let (sent, acked) = (get(&b, "sent")?, get(&b, "acked")?);
    if sent == 0 || get(&b, "missed")? != 0 || acked + 1 < sent {
        return Err(format!("b's adverts to the trader on its node not all acknowledged: {b}"));
    }
    let c = control(run, "c")?;
    if get(&c, "acked")? == 0 {
        return Err(format!("c's adverts never acknowledged: {c}"));
    }
    // The server a used (either) served it to its release.
    let used: Vec<String> = ["b", "c"].iter().filter_map(|n| served(run, n).ok()).collect();
    let [s] = &used[..] else {
        return Err(format!("want exactly one server to serve a, got {used:?}"));
    };
    if get(s, "writes")? == 0 || get(s, "reads")? == 0 || !s.ends_with("released=true") {
        return Err(format!("the server did not serve a to its release: {s}"));
    }
    Ok(())
}

pub(crate) fn remote_trader() -> Result<(), String> {
    three_checked("tests/clusters/remote-trader.toml", trader)
}

fn revoke(run: &ClusterRun) -> Result<(), String> {
    run.finished(3)?;
    let (remote, store) = client(run)?;
    all_remote(&store)?;
    if get(&remote, "revocations")? != 1 || get(&remote, "servers")? != 1 {
        return Err(format!("want one revocation and one server at the end: {remote}"));
    }
    run.line_of("a", "[pager] heracles: remote: server 10.0.0.2:7100")?;
    run.line_of("b", "[server] paging-server: revoking 1 clients for ")?;
    let b = control(run, "b")?;
    let forwarded = get(&b, "pages_forwarded")?;
    if get(&b, "revoked")? != 1
        || get(&b, "moved")? != 1
        || get(&b, "returned")? != 0
        || get(&b, "abandoned")? != 0
        || forwarded != 128
    {
        return Err(format!("b did not move the client's 128 pages: {b}"));
    }
    let old = served(run, "b")?;
    if !old.ends_with("released=true") || get(&old, "pages")? != 0 {
        return Err(format!("b's stream of a not released: {old}"));
    }
    run.line_of("b", "ended: every client released its stream")?;
    let new = served(run, "c")?;
    if get(&new, "reads")? == 0 || !new.ends_with("released=true") || get(&new, "peak")? != 128 {
        return Err(format!("c did not take a's 128 pages and serve it: {new}"));
    }
    // c stored every page forwarded but those a had written there itself meanwhile.
    let total = run.line_of("c", "[server] paging-server: served streams=1 ")?;
    if get(&total, "stale_writes")? > forwarded {
        return Err(format!("c discarded more forwarded pages than came: {total}"));
    }
    Ok(())
}

pub(crate) fn remote_revoke() -> Result<(), String> {
    three_checked("tests/clusters/remote-revoke.toml", revoke)
}

fn revoke_alone(run: &ClusterRun) -> Result<(), String> {
    run.finished(3)?;
    let (remote, store) = client(run)?;
    if get(&remote, "revocations")? != 1 || get(&remote, "servers")? != 0 {
        return Err(format!("want one revocation and no server left: {remote}"));
    }
    if get(&store, "revocations")? != 1
        || !store.contains(" remote_now=false ")
        || get(&store, "populated")? == 0
        || get(&store, "local_writes")? == 0
    {
        return Err(format!("the pages did not come back to the disk: {store}"));
    }
    let b = control(run, "b")?;
    if get(&b, "revoked")? != 1 || get(&b, "returned")? != 1 || get(&b, "moved")? != 0 {
        return Err(format!("b did not count the client returned: {b}"));
    }
    if !served(run, "b")?.ends_with("released=true") {
        return Err("b's stream of a not released".into());
    }
    run.line_of("c", "[server] paging-server: served streams=0 ")?;
    Ok(())
}

pub(crate) fn remote_revoke_alone() -> Result<(), String> {
    three_checked("tests/clusters/remote-revoke-alone.toml", revoke_alone)
}

fn partial(run: &ClusterRun) -> Result<(), String> {
    run.finished(3)?;
    let (remote, store) = client(run)?;
    all_remote(&store)?;
    // The partial revocation counts as one; both servers still hold pages at the end.
    if get(&remote, "revocations")? != 1 || get(&remote, "servers")? != 2 {
        return Err(format!("want one revocation and two servers at the end: {remote}"));
    }
    let cc = run.line_of("a", "[pager] heracles: remote control ")?;
    if get(&cc, "partial")? != 1 || get(&cc, "pages_moved")? != 48 {
        return Err(format!("a did not move exactly 48 pages for one partial revocation: {cc}"));
    }
    run.line_of("b", "[server] paging-server: revoking 48 pages of stream 1 in part")?;
    let b = control(run, "b")?;
    if get(&b, "partial")? != 1
        || get(&b, "partial_done")? != 1
        || get(&b, "pages_given_back")? != 48
        || get(&b, "revoked")? != 0
        || get(&b, "abandoned")? != 0
        || get(&b, "pages_forwarded")? != 0
    {
        return Err(format!("b did not end its partial revocation with 48 pages back: {b}"));
    }
    // b kept a's other 80 pages to the end, under a reservation of 80; the pages it freed are
    // the 48 moved (heracles frees none itself).
    let old = served(run, "b")?;
    if get(&old, "reserved")? != 80
        || get(&old, "peak")? != 128
        || get(&old, "frees")? != 48
        || !old.ends_with("released=true")
    {
        return Err(format!("b's stream of a did not shrink to 80 pages: {old}"));
    }
    // c took exactly the 48 pages moved, and a's rewrites of them.
    let new = served(run, "c")?;
    if get(&new, "peak")? != 48 || get(&new, "reads")? == 0 || !new.ends_with("released=true") {
        return Err(format!("c did not take exactly a's 48 moved pages and serve them: {new}"));
    }
    Ok(())
}

pub(crate) fn remote_paging_partial_revocation() -> Result<(), String> {
    three_checked("tests/clusters/remote-revoke-part.toml", partial)
}
