use super::*;
use alloc::collections::BTreeMap;

const MS: u64 = 1_000_000;

fn timers() -> Timers {
    Timers { retry_ns: 10 * MS, tries: 3, idle_ns: 100 * MS }
}

#[test]
fn the_notice_is_resent_then_a_silent_client_is_freed() {
    let mut s = ServerRevocation::<u32>::new(7, &[1, 2], 0, timers());
    assert_eq!(s.client(), 7);
    assert_eq!(s.poll(0), ServerAction::Notify);
    assert_eq!(s.poll(5 * MS), ServerAction::Wait);
    assert_eq!(s.poll(10 * MS), ServerAction::Notify);
    assert_eq!(s.poll(20 * MS), ServerAction::Notify);
    assert_eq!(s.poll(30 * MS), ServerAction::Free);
    assert!(s.is_freed());
    assert_eq!(s.poll(40 * MS), ServerAction::Wait);
}

#[test]
fn the_old_server_forwards_every_page_then_tells_the_client() {
    let mut s = ServerRevocation::new(1, &[30, 10, 20, 10], 0, timers());
    assert_eq!(s.poll(0), ServerAction::Notify);
    s.replied(MS, Some(9u32));
    assert_eq!(s.phase(), ServerPhase::Offloading(9));
    // Lowest first, one at a time, each re-sent until acknowledged.
    assert_eq!(s.poll(MS), ServerAction::Forward(10, 9));
    assert_eq!(s.poll(2 * MS), ServerAction::Wait);
    assert_eq!(s.poll(11 * MS), ServerAction::Forward(10, 9));
    s.acked(99); // not the page in flight: ignored
    s.acked(10);
    assert_eq!(s.poll(12 * MS), ServerAction::Forward(20, 9));
    // The client frees page 30 meanwhile: not forwarded.
    s.freed_page(30);
    s.acked(20);
    assert_eq!(s.forwarded(), 2);
    assert_eq!(s.poll(13 * MS), ServerAction::TellDone);
    assert_eq!(s.phase(), ServerPhase::Offloaded(9));
    assert_eq!(s.poll(14 * MS), ServerAction::Wait);
    assert_eq!(s.poll(23 * MS), ServerAction::TellDone);
    assert_eq!(s.released(), ServerAction::Free);
    assert!(s.is_freed());
}

#[test]
fn told_done_enough_times_the_old_server_frees() {
    let mut s = ServerRevocation::new(1, &[], 0, timers());
    s.poll(0);
    s.replied(0, Some(2u32));
    assert_eq!(s.poll(0), ServerAction::TellDone);
    assert_eq!(s.poll(10 * MS), ServerAction::TellDone);
    assert_eq!(s.poll(20 * MS), ServerAction::TellDone);
    assert_eq!(s.poll(30 * MS), ServerAction::Free);
}

#[test]
fn a_silent_new_server_leaves_the_pages_with_the_old() {
    let mut s = ServerRevocation::new(1, &[5], 0, timers());
    s.poll(0);
    s.replied(0, Some(2u32));
    assert_eq!(s.poll(0), ServerAction::Forward(5, 2));
    assert_eq!(s.poll(10 * MS), ServerAction::Forward(5, 2));
    assert_eq!(s.poll(20 * MS), ServerAction::Forward(5, 2));
    assert_eq!(s.poll(30 * MS), ServerAction::TellFailed);
    assert_eq!(s.phase(), ServerPhase::Returning);
}

#[test]
fn without_a_new_server_the_client_reads_back_then_releases() {
    let mut s = ServerRevocation::<u32>::new(1, &[5], 0, timers());
    s.poll(0);
    s.replied(MS, None);
    assert_eq!(s.phase(), ServerPhase::Returning);
    // Answers out of turn change nothing.
    s.replied(MS, Some(3));
    s.acked(5);
    assert_eq!(s.phase(), ServerPhase::Returning);
    // Reads keep the pages while the client brings them back.
    s.contact(90 * MS);
    assert_eq!(s.poll(150 * MS), ServerAction::Wait);
    assert_eq!(s.poll(190 * MS), ServerAction::Free);
    let mut s = ServerRevocation::<u32>::new(1, &[5], 0, timers());
    s.replied(0, None);
    assert_eq!(s.released(), ServerAction::Free);
}

#[test]
fn the_client_routes_by_tracked_pages() {
    let mut c = ClientRevocation::new(1u32);
    assert_eq!(c.write_target(4), Target::Old(1));
    assert_eq!(c.read_target(4), Target::Old(1));
    c.found(2);
    assert_eq!(c.phase(), ClientPhase::Moving(2));
    assert_eq!(c.write_target(4), Target::New(2));
    assert_eq!(c.read_target(4), Target::New(2));
    assert_eq!(c.read_target(5), Target::Old(1));
    c.free(4);
    assert_eq!(c.read_target(4), Target::Old(1));
    c.write_target(6);
    assert_eq!(c.tracked(), 1);
    assert_eq!(c.offload_done(), Some(2));
    assert_eq!(c.phase(), ClientPhase::Switched(2));
    assert_eq!(c.offload_done(), None);
    // Switched: the new server alone, untracked.
    assert_eq!((c.read_target(5), c.write_target(7)), (Target::New(2), Target::New(2)));
    assert_eq!(c.tracked(), 0);
}

#[test]
fn not_found_and_double_revocation() {
    let mut c = ClientRevocation::new(1u32);
    c.not_found();
    assert_eq!(c.phase(), ClientPhase::Returning);
    c.found(2); // too late: ignored
    assert_eq!(c.read_target(3), Target::Old(1));
    assert!(!c.revoked_by_new());

    let mut c = ClientRevocation::new(1u32);
    c.found(2);
    c.write_target(8);
    assert!(c.revoked_by_new());
    assert_eq!(c.phase(), ClientPhase::DoubleRevoked(2));
    // Never the first server again: tracked pages from the second, others wait for the offload.
    assert_eq!(c.read_target(8), Target::New(2));
    assert_eq!(c.read_target(9), Target::Wait);
    assert_eq!(c.offload_done(), None);
    assert_eq!(c.read_target(9), Target::New(2));
    c.released();
    assert_eq!(c.phase(), ClientPhase::Released);
}

#[test]
fn forwarded_copies_lose_to_the_clients() {
    let mut f = ForwardFilter::new();
    assert!(f.is_empty() && f.accept(1));
    f.from_client(1);
    assert!(!f.accept(1) && f.accept(2));
    assert_eq!(f.len(), 1);
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// How a simulated revocation ends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ending {
    /// The pages move to the new server.
    Moved,
    /// No new server: the pages come back to the client.
    NoServer,
    /// The new server revokes the client during the move.
    Double,
}

/// A client with `pages` pages on an old server that revokes it, the client writing, reading
/// and freeing pages all along, messages between the servers lost with the given percentage:
/// every read returns the latest copy, and at the end the pages are all where they should be.
fn simulate(seed: u64, pages: u64, loss: u64, ending: Ending) {
    let mut rng = Rng(seed);
    let (old_a, new_a) = (1u32, 2u32);
    let mut latest: BTreeMap<Vpn, u64> = (0..pages).map(|v| (v, 1)).collect();
    let mut old = latest.clone();
    let mut new: BTreeMap<Vpn, u64> = BTreeMap::new();
    let mut filter = ForwardFilter::new();
    let all: Vec<Vpn> = old.keys().copied().collect();
    let mut server = ServerRevocation::new(9, &all, 0, Timers { tries: 1000, ..timers() });
    let mut client = ClientRevocation::new(old_a);
    let mut version = 2;
    let mut now = 0;
    let mut switched = false;
    let mut reads = 0;
    let mut waits = 0;
    for step in 0..20_000u64 {
        now += MS;
        match rng.below(10) {
            // The client writes a page (an eviction).
            0..=2 => {
                let vpn = rng.below(pages + 4);
                version += 1;
                latest.insert(vpn, version);
                match client.write_target(vpn) {
                    Target::Old(_) => {
                        old.insert(vpn, version);
                        server.written(vpn);
                    }
                    Target::New(_) => {
                        new.insert(vpn, version);
                        filter.from_client(vpn);
                    }
                    Target::Wait => unreachable!(),
                }
            }
            // The client reads a page it holds (a fault).
            3..=5 => {
                let Some((&vpn, &want)) =
                    latest.iter().nth(rng.below(latest.len().max(1) as u64) as usize)
                else {
                    continue;
                };
                let got = match client.read_target(vpn) {
                    Target::Old(_) => {
                        server.contact(now);
                        old.get(&vpn)
                    }
                    Target::New(_) => new.get(&vpn),
                    Target::Wait => {
                        waits += 1;
                        continue;
                    }
                };
                assert_eq!(got, Some(&want), "seed {seed} step {step}: page {vpn}");
                reads += 1;
            }
            // The client frees a page.
            6 => {
                let vpn = rng.below(pages + 4);
                latest.remove(&vpn);
                client.free(vpn);
                old.remove(&vpn);
                server.freed_page(vpn);
                if matches!(
                    client.phase(),
                    ClientPhase::Moving(_)
                        | ClientPhase::DoubleRevoked(_)
                        | ClientPhase::Switched(_)
                ) {
                    new.remove(&vpn);
                    filter.from_client(vpn);
                }
            }
            // The old server works.
            _ => match server.poll(now) {
                ServerAction::Notify => {
                    if rng.below(100) < loss || client.phase() != ClientPhase::Searching {
                        continue;
                    }
                    // The client looks for a server, and answers (the answer may be lost).
                    match ending {
                        Ending::Moved | Ending::Double => client.found(new_a),
                        Ending::NoServer => client.not_found(),
                    }
                }
                ServerAction::Forward(vpn, to) => {
                    assert_eq!(to, new_a);
                    if rng.below(100) < loss {
                        continue;
                    }
                    if filter.accept(vpn)
                        && let Some(&v) = old.get(&vpn)
                    {
                        new.insert(vpn, v);
                    }
                    if rng.below(100) >= loss {
                        server.acked(vpn);
                    }
                }
                ServerAction::TellDone => {
                    if rng.below(100) < loss {
                        continue;
                    }
                    if client.offload_done() == Some(new_a) {
                        switched = true;
                    }
                    // The client releases the old server (its release may be lost too).
                    if rng.below(100) >= loss {
                        server.released();
                        old.clear();
                    }
                }
                ServerAction::TellFailed | ServerAction::Free => {
                    panic!("seed {seed}: the old server gave up ({:?})", server.phase())
                }
                ServerAction::Wait => {}
            },
        }
        // The client's answer to the notice reaches the server (unless lost).
        if server.phase() == ServerPhase::Notified
            && client.phase() != ClientPhase::Searching
            && rng.below(100) >= loss
        {
            let new = match client.phase() {
                ClientPhase::Moving(n) => Some(n),
                _ => None,
            };
            server.replied(now, new);
        }
        if ending == Ending::Double
            && matches!(client.phase(), ClientPhase::Moving(_))
            && server.forwarded() >= pages / 3
        {
            assert!(client.revoked_by_new());
        }
        if server.is_freed()
            || (ending == Ending::NoServer
                && server.phase() == ServerPhase::Returning
                && step > 5_000)
        {
            break;
        }
    }
    assert!(reads > 100, "seed {seed}: only {reads} reads");
    match ending {
        Ending::Moved => {
            assert!(switched && server.is_freed(), "seed {seed}: {:?}", server.phase());
            assert_eq!(new, latest, "seed {seed}: the new server holds every latest page");
        }
        Ending::NoServer => {
            assert_eq!(server.phase(), ServerPhase::Returning);
            // The client reads everything back from the old server, then releases it.
            for (vpn, want) in &latest {
                assert_eq!(client.read_target(*vpn), Target::Old(old_a));
                assert_eq!(old.get(vpn), Some(want), "seed {seed}: page {vpn}");
            }
            client.released();
            assert_eq!(server.released(), ServerAction::Free);
        }
        Ending::Double => {
            assert!(
                matches!(client.phase(), ClientPhase::DoubleRevoked(_)),
                "{:?}",
                client.phase()
            );
            assert!(waits > 0 || server.forwarded() == pages);
            // Once the first server's offload is done, every page comes back from the second.
            for (vpn, want) in &latest {
                assert_eq!(client.read_target(*vpn), Target::New(new_a));
                assert_eq!(new.get(vpn), Some(want), "seed {seed}: page {vpn}");
            }
        }
    }
}

#[test]
fn a_move_loses_no_page_and_returns_none_stale() {
    for seed in 1..=20 {
        simulate(seed * 7919, 500, 0, Ending::Moved);
        simulate(seed * 7919, 500, 10, Ending::Moved);
    }
}

#[test]
fn without_a_new_server_every_page_comes_back() {
    for seed in 1..=10 {
        simulate(seed * 104_729, 100, 10, Ending::NoServer);
    }
}

#[test]
fn a_double_revocation_takes_the_pages_from_the_second_server() {
    for seed in 1..=10 {
        simulate(seed * 15_485_863, 200, 10, Ending::Double);
    }
}

#[test]
fn pages_written_before_the_move_are_forwarded_too() {
    let mut s = ServerRevocation::new(1, &[4], 0, timers());
    s.poll(0);
    s.written(2);
    s.written(4);
    s.replied(0, Some(3u32));
    assert_eq!(s.poll(0), ServerAction::Forward(2, 3));
    s.acked(2);
    assert_eq!(s.poll(0), ServerAction::Forward(4, 3));
    s.acked(4);
    assert_eq!(s.poll(0), ServerAction::TellDone);
    assert_eq!(s.forwarded(), 2);
}

#[test]
fn a_client_that_holds_is_asked_back_until_it_names_a_server_or_holds_too_long() {
    let mut s = ServerRevocation::<u32>::new(7, &[1], 0, timers());
    assert_eq!(s.poll(0), ServerAction::Notify);
    // "Hold" without a server: asked back every retry, past the three tries...
    for k in 0..8 {
        let now = 5 * MS + k * 10 * MS;
        s.held(now);
        assert_eq!(s.poll(now + 9 * MS), ServerAction::Wait, "k {k}");
        assert_eq!(s.poll(now + 10 * MS), ServerAction::Notify, "k {k}");
    }
    // ...then it names the new server, and the offload starts.
    s.replied(90 * MS, Some(4));
    assert_eq!(s.poll(90 * MS), ServerAction::Forward(1, 4));
    // Holding forever is not allowed: after the idle time the holds count no more.
    let mut s = ServerRevocation::<u32>::new(7, &[1], 0, timers());
    s.poll(0);
    let mut now = 0;
    let freed = loop {
        now += 10 * MS;
        s.held(now);
        if s.poll(now) == ServerAction::Free {
            break now;
        }
        assert!(now < 500 * MS);
    };
    assert!((100 * MS..=140 * MS).contains(&freed), "{freed}");
}
