//! Remote paging's pages moving between servers after a loss.
//!
//! - `remote_paging_refill`: the remote client's control plane across four nodes
//!   of both architectures (`tests/clusters/remote-refill.toml`): heracles on node a (riscv64)
//!   pages a stretch of 128 pages on 32 frames, 4,500 seeded steps of whole-page writes and
//!   reads, every byte checked, mirrored over the paging servers of b (x86_64) and c (riscv64),
//!   with the trader of d (x86_64) to find more. b is killed at step 1,500 and c at step 3,500:
//!   every byte right, no page lost and none paged to the disk; two failovers and one server
//!   left; the client refilled a new mirror (d's server, found through the trader) with the pages
//!   the first loss left with one copy, so the second loss lost nothing; d's stream was made a
//!   mirror, became primary, served reads and was released at the end.

use crate::cluster::{ClusterRun, ClusterTest, cluster};
use crate::remote::get;

/// The tests, by name.
pub(super) const TESTS: &[(&str, ClusterTest)] = &[("remote_paging_refill", remote_paging_refill)];

/// The message of node `node`'s first line containing `text`.
fn line_of(run: &ClusterRun, node: &str, text: &str) -> Result<String, String> {
    run.log_of(node)
        .into_iter()
        .find(|l| l.message.contains(text))
        .map(|l| l.message)
        .ok_or(format!("node {node} logged no line containing `{text}`"))
}

fn refill(run: &ClusterRun) -> Result<(), String> {
    if run.status != Some(0) || !run.stderr.contains("cluster: node a: finished") {
        return Err("want exit status 0 and a finished".into());
    }
    for n in ["b", "c"] {
        if !run.stderr.contains(&format!("cluster: node {n}: killed by the event of line")) {
            return Err(format!("node {n} is not reported killed"));
        }
    }
    line_of(run, "a", "[pager] heracles: step 3500")?;
    let random = line_of(run, "a", "[pager] heracles: random pages=")?;
    if get(&random, "pages")? != 128
        || get(&random, "steps")? != 4500
        || get(&random, "mismatches")? != 0
        || get(&random, "checked")? < 128
    {
        return Err(format!("a's contents wrong or unchecked: {random}"));
    }
    let remote = line_of(run, "a", "[pager] heracles: remote program=random")?;
    if get(&remote, "failovers")? != 2 || get(&remote, "servers")? != 1 {
        return Err(format!("want two failovers and one server left: {remote}"));
    }
    let control = line_of(run, "a", "[pager] heracles: remote control ")?;
    // Every page with one copy after the first loss, but those written again meanwhile (to
    // both at once), was copied to the new mirror.
    let refilled = get(&control, "refilled")?;
    if refilled == 0 || refilled > 128 {
        return Err(format!("no mirror refilled: {control}"));
    }
    let store = line_of(run, "a", "[pager] heracles: store combination=")?;
    let events = line_of(run, "a", "[pager] heracles: store events ")?;
    for (line, k) in [
        (&store, "local_writes"),
        (&store, "fallbacks"),
        (&events, "servers_lost"),
        (&events, "lost_remote"),
    ] {
        if get(line, k)? != 0 {
            return Err(format!("{k} should be 0 with a mirror refilled: {line}"));
        }
    }
    // d's stream: made a mirror, promoted at the second loss, served the reads after it.
    let d = line_of(run, "d", "[server] paging-server: client 10.0.0.1:")?;
    if !d.contains(" role=primary ") || !d.ends_with("released=true") || get(&d, "reads")? == 0 {
        return Err(format!("d was not promoted or served no read: {d}"));
    }
    if get(&d, "writes")? < refilled {
        return Err(format!("d stored fewer pages than were refilled ({refilled}): {d}"));
    }
    Ok(())
}

pub(crate) fn remote_paging_refill() -> Result<(), String> {
    let run = cluster("tests/clusters/remote-refill.toml", &["a", "b", "c", "d"])?;
    refill(&run).map_err(|why| format!("{why}\n{}", run.describe()))
}
