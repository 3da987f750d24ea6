//! `qemu::cluster::remote_paging*`: remote paging across three nodes of both architectures
//! (`tests/clusters/remote*.toml`): heracles on node a (riscv64) pages a stretch of 128 pages
//! on 32 frames, 3,000 seeded steps of whole-page writes and reads, every byte checked, to
//! the paging servers of b (x86_64) and c (riscv64), on the paced clock. Every test reads the
//! client's and the servers' own counts from outside.
//!
//! - `remote_paging`: pages spread over both servers, no loss: every byte right; both servers
//!   stored and served pages (each server's whole pages stored add up to the client's pages
//!   written), nothing went to the local disk, no server was lost; each server charged the
//!   client CPU time, refused nothing, and ended when the client released its stream.
//! - `remote_paging_under_loss`: the same with 10% of frames lost each way on a-b: every byte
//!   right, the client retransmitted at least half what the loss must cause (a page written
//!   loses one of its four packets, three chunks and the ACK, with probability 1 - 0.9^4, a
//!   page read its request or last chunk with 1 - 0.9^2, and each such loss costs a
//!   retransmission: a lossless run retransmits only what a late reply on the paced clock
//!   costs, far fewer), and the servers still stored each page written once (a repeated chunk
//!   or write is not stored twice).
//! - `remote_paging_failover`: every page mirrored to the other server; b, the primary, killed
//!   at step 1,500: every byte right, one failover, one server left, no page lost and none
//!   paged to the disk; c's stream became primary, served the reads after the kill, and was
//!   released at the end.
//! - `remote_paging_servers_vanish`: every page mirrored to the local disk; both servers killed
//!   at step 1,500: every byte right, every server lost (told once), no page lost, every page
//!   written remotely mirrored to the disk and the pages written after the loss only there.
//! - `remote_paging_hostile_client`: a hostile client on c attacks the victim's stream on b
//!   with its own token, guessed tokens and wrong stream numbers: the victim's every byte is
//!   right, the hostile got no page and had no write acknowledged, and the server refused and
//!   counted every attack, the victim's report naming those against its stream.

use crate::cluster::{ClusterRun, ClusterTest, three_checked};
use crate::remote::get;

/// The tests, by name.
pub(super) const TESTS: &[(&str, ClusterTest)] = &[
    ("remote_paging", remote_paging),
    ("remote_paging_under_loss", remote_paging_under_loss),
    ("remote_paging_failover", remote_paging_failover),
    ("remote_paging_servers_vanish", remote_paging_servers_vanish),
    ("remote_paging_hostile_client", remote_paging_hostile_client),
];

/// Node a's heracles ran `steps` steps over its 128 pages with every byte right and every
/// page checked.
pub(crate) fn intact(run: &ClusterRun, steps: u64) -> Result<(), String> {
    let random = run.line_of("a", "[pager] heracles: random pages=")?;
    if get(&random, "pages")? != 128
        || get(&random, "steps")? != steps
        || get(&random, "mismatches")? != 0
        || get(&random, "checked")? < 128
    {
        return Err(format!("a's contents wrong or unchecked: {random}"));
    }
    Ok(())
}

/// Server `node`'s line of its client a (10.0.0.1).
pub(crate) fn served(run: &ClusterRun, node: &str) -> Result<String, String> {
    run.line_of(node, "[server] paging-server: client 10.0.0.1:")
}

/// Node a's client: every byte right, no page lost. Its remote line and its two store lines.
fn client(run: &ClusterRun, mirror: &str) -> Result<(String, String, String), String> {
    intact(run, 3000)?;
    let remote = run.line_of("a", "[pager] heracles: remote program=random")?;
    if !remote.contains(&format!(" mirror={mirror} ")) {
        return Err(format!("not mirror={mirror}: {remote}"));
    }
    let store = run.line_of("a", "[pager] heracles: store combination=")?;
    let events = run.line_of("a", "[pager] heracles: store events ")?;
    if get(&events, "lost_remote")? != 0 {
        return Err(format!("pages lost: {events}"));
    }
    Ok((remote, store, events))
}

/// The fewest retransmissions a client that wrote `written` pages and read `read` over a
/// link losing 10% of the frames each way makes: half those the losses must cause (a page
/// written loses one of its three chunks or its ACK with probability 1 - 0.9^4, a page read
/// its request or its last chunk with 1 - 0.9^2, and each costs at least one
/// retransmission), far above what a lossless run retransmits.
fn fewest_retransmits(written: u64, read: u64) -> u64 {
    let lossy = |packets: i32| 1.0 - 0.9f64.powi(packets);
    ((written as f64 * lossy(4) + read as f64 * lossy(2)) / 2.0) as u64
}

/// The plain and lossy runs: both servers used, nothing local, every write stored once.
fn spread(run: &ClusterRun, lossy: bool) -> Result<(), String> {
    run.finished(3)?;
    let (remote, store, events) = client(run, "none")?;
    let written = get(&remote, "pages_written")?;
    if get(&remote, "servers")? != 2 || get(&remote, "failovers")? != 0 || written < 96 {
        return Err(format!("a did not page to both servers: {remote}"));
    }
    let fewest = fewest_retransmits(written, get(&remote, "pages_read")?);
    if lossy && get(&remote, "retransmits")? < fewest {
        return Err(format!(
            "10% loss each way and fewer than {fewest} retransmissions (half what the loss \
             must cause): {remote}"
        ));
    }
    for (line, k) in [(&store, "local_writes"), (&store, "fallbacks"), (&events, "servers_lost")] {
        if get(line, k)? != 0 {
            return Err(format!("{k} should be 0: {line}"));
        }
    }
    let mut stored = 0;
    for node in ["b", "c"] {
        let s = served(run, node)?;
        if !s.contains(" role=primary ") || !s.ends_with("released=true") {
            return Err(format!("{node}: {s}"));
        }
        if get(&s, "writes")? == 0
            || get(&s, "reads")? == 0
            || get(&s, "cpu_ns")? == 0
            || get(&s, "refused")? != 0
        {
            return Err(format!("{node} did not serve a: {s}"));
        }
        stored += get(&s, "writes")?;
        run.line_of(node, "[server] paging-server: ended: every client released its stream")?;
    }
    if stored != written {
        return Err(format!("the servers stored {stored} pages, a wrote {written}: {remote}"));
    }
    Ok(())
}

pub(crate) fn remote_paging() -> Result<(), String> {
    three_checked("tests/clusters/remote.toml", |run| spread(run, false))
}

pub(crate) fn remote_paging_under_loss() -> Result<(), String> {
    three_checked("tests/clusters/remote-loss.toml", |run| spread(run, true))
}

/// The kill of `nodes`, expected, and node a finished.
fn killed(run: &ClusterRun, nodes: &[&str]) -> Result<(), String> {
    if run.status != Some(0) || !run.stderr.contains("cluster: node a: finished") {
        return Err("want exit status 0 and a finished".into());
    }
    for n in nodes {
        if !run.stderr.contains(&format!("cluster: node {n}: killed by the event of line")) {
            return Err(format!("node {n} is not reported killed"));
        }
    }
    Ok(())
}

fn failover(run: &ClusterRun) -> Result<(), String> {
    killed(run, &["b"])?;
    run.line_of("a", "[pager] heracles: step 1500")?;
    let (remote, store, events) = client(run, "server")?;
    if get(&remote, "failovers")? != 1 || get(&remote, "servers")? != 1 {
        return Err(format!("want one failover and one server left: {remote}"));
    }
    for (line, k) in [(&store, "local_writes"), (&store, "fallbacks"), (&events, "servers_lost")] {
        if get(line, k)? != 0 {
            return Err(format!("{k} should be 0 with the mirror alive: {line}"));
        }
    }
    let c = served(run, "c")?;
    // c's stream was the mirror: promoted, it served the reads after the kill.
    if !c.contains(" role=primary ") || !c.ends_with("released=true") || get(&c, "reads")? == 0 {
        return Err(format!("c was not promoted or served no read: {c}"));
    }
    Ok(())
}

pub(crate) fn remote_paging_failover() -> Result<(), String> {
    three_checked("tests/clusters/remote-failover.toml", failover)
}

fn vanish(run: &ClusterRun) -> Result<(), String> {
    killed(run, &["b", "c"])?;
    let (remote, store, events) = client(run, "disk")?;
    if get(&remote, "servers")? != 0 {
        return Err(format!("servers left after both were killed: {remote}"));
    }
    if get(&events, "servers_lost")? != 1
        || get(&store, "fallbacks")? == 0
        || !store.contains(" remote_now=false ")
        || get(&store, "local_writes")? <= get(&store, "mirror_writes")?
    {
        return Err(format!("the store did not fall back to the disk once: {store}"));
    }
    // Every remote write was mirrored to the disk.
    if get(&store, "mirror_writes")? < get(&store, "remote_writes")? {
        return Err(format!("remote writes not mirrored to the disk: {store}"));
    }
    Ok(())
}

pub(crate) fn remote_paging_servers_vanish() -> Result<(), String> {
    three_checked("tests/clusters/remote-vanish.toml", vanish)
}

fn hostile(run: &ClusterRun) -> Result<(), String> {
    run.finished(3)?;
    let (remote, _, _) = client(run, "none")?;
    if get(&remote, "servers")? != 1 {
        return Err(format!("a should page to b alone: {remote}"));
    }
    let h = run.line_of("c", "[hostile] paging-server: hostile: sent=")?;
    let sent = get(&h, "sent")?;
    let refused = get(&h, "refused")?;
    if get(&h, "breaches")? != 0 || sent < 1000 || refused == 0 {
        return Err(format!("the hostile client got through or was not refused: {h}"));
    }
    let victim = served(run, "b")?;
    if get(&victim, "refused")? == 0 || !victim.ends_with("released=true") {
        return Err(format!("the server counted no refusal against the victim's stream: {victim}"));
    }
    let total = run.line_of("b", "[server] paging-server: served streams=2 ")?;
    // Every refusal the hostile heard of, the server counted (the flood may lose some of
    // its packets at the server's driver, whose receive slots it fills).
    if get(&total, "bad_token")? < refused {
        return Err(format!(
            "the server counted fewer refusals than the hostile heard ({refused}): {total}"
        ));
    }
    Ok(())
}

pub(crate) fn remote_paging_hostile_client() -> Result<(), String> {
    three_checked("tests/clusters/remote-hostile.toml", hostile)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_must_cost_retransmissions() {
        // Half of 34.39% of the pages written and 19% of those read.
        assert_eq!(fewest_retransmits(1000, 0), 171);
        assert_eq!(fewest_retransmits(0, 1000), 94);
        // The lossy run that wrote 1,233 pages retransmitted 1,596 times, as many reads or
        // fewer beside them.
        assert!(fewest_retransmits(1233, 1233) < 1596);
    }
}
