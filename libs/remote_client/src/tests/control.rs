//! Host tests of the control plane (module `control`): reservations grown, `Hold(None)`
//! answers, double revocation, mirrors refilled after a loss, servers found again after
//! every one was lost.

use super::*;

/// Reads and rewrites pages of `versions` until `done` says so (at most `rounds` rounds),
/// checking every byte read: the rounds taken.
fn drive<T: net_client::Transport>(
    c: &mut RemoteClient<T>,
    versions: &mut [u32],
    rounds: u32,
    mut done: impl FnMut(&mut RemoteClient<T>) -> bool,
) -> u32 {
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    let n = versions.len();
    for round in 0..rounds {
        if done(c) {
            return round;
        }
        let page = (round as usize * 7) % n;
        if round % 3 == 0 {
            c.write(page, &contents(page, 100 + round)).unwrap();
            versions[page] = 100 + round;
        } else {
            c.read(page, &mut buf).unwrap();
            assert!(buf[..] == contents(page, versions[page])[..], "page {page}, round {round}");
        }
    }
    panic!("not done in {rounds} rounds: {:?} {:?}", c.stats(), c.control_counts());
}

#[test]
fn a_client_that_does_not_spread_grows_its_reservation_on_a_connected_server() {
    let net = net_with(31, Faults::NONE, 3, 1 << 20);
    add_trader(&net, 1, &[server(1), server(2), server(3)]);
    let mut config = Config::new(vec![server(1), server(2)], 64);
    config.traders = vec![trader(1)];
    config.spread = false;
    let mut c = client(&net, config).unwrap();
    let mut versions = write_all_and_check(&mut c, 32);
    // Not spreading: every page on the first server.
    assert_eq!(reports(&net, server(1))[0].pages, 32);
    assert_eq!(reports(&net, server(2))[0].pages, 0);
    with_server(&net, server(1), |p| p.revoke_at = Some((sim::now(), 1)));
    drive(&mut c, &mut versions, 400, |c| c.stats().revocations == 1);
    check_all(&mut c, &versions);
    // Server 2 grew the reservation (memory only) and holds every page; server 3, which the
    // trader knew, was never asked.
    let r = reports(&net, server(2));
    assert_eq!((r.len(), r[0].reserved, r[0].pages), (1, 128, 32), "{r:?}");
    assert!(reports(&net, server(3)).is_empty());
    assert_eq!(c.control_counts().grown, 1);
    let old = reports(&net, server(1));
    assert!(old[0].released && old[0].pages == 0, "{:?}", old[0]);
    // A server without room refuses to grow: the reservation stays as it was.
    let net = net_with(32, Faults::NONE, 2, 64 * PAGE_SIZE as u64);
    add_trader(&net, 1, &[]);
    let mut config = Config::new(vec![server(1), server(2)], 64);
    config.traders = vec![trader(1)];
    config.spread = false;
    let mut c = client(&net, config).unwrap();
    let versions = write_all_and_check(&mut c, 8);
    with_server(&net, server(1), |p| p.revoke_at = Some((sim::now(), 1)));
    let mut notice = None;
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    for page in 0..8 {
        c.read(page, &mut buf).unwrap();
        notice = notice.or(c.notice());
    }
    assert_eq!(notice, Some(RemoteNotice::RevokedWithoutReplacement));
    assert_eq!(reports(&net, server(2))[0].reserved, 64);
    assert_eq!(c.control_counts().grown, 0);
    check_all(&mut c, &versions);
}

#[test]
fn a_revoked_client_searching_long_holds_the_pages_and_grows_when_no_trader_answers() {
    let net = net_with(33, Faults::NONE, 2, 1 << 20);
    // Trader 1 does not exist: asking it takes its retries, 12.7 s, longer than the server
    // waits for an answer to its notice (20 tries, 500 ms apart).
    let mut config = Config::new(vec![server(1), server(2)], 64);
    config.traders = vec![trader(1)];
    let mut c = client(&net, config).unwrap();
    let mut versions = write_all_and_check(&mut c, 32);
    let start = sim::now();
    with_server(&net, server(1), |p| p.revoke_at = Some((sim::now(), 1)));
    drive(&mut c, &mut versions, 400, |c| c.stats().revocations == 1);
    // The search took the trader's retries; meanwhile the server asked back, and was told
    // to hold each time.
    assert!(sim::now() - start > 12_000_000_000, "{}", sim::now() - start);
    let counts = with_server(&net, server(1), |p| p.server.revoke_counts());
    assert_eq!((counts.revoked, counts.moved, counts.abandoned), (1, 1, 0), "{counts:?}");
    assert!(counts.held >= 10, "{counts:?}");
    let cc = c.control_counts();
    assert!(cc.holds >= 10 && cc.grown == 1, "{cc:?}");
    // Spreading, but no trader answered: the connected server grew and took every page.
    check_all(&mut c, &versions);
    let r = reports(&net, server(2));
    assert_eq!((r[0].reserved, r[0].pages), (128, 32), "{r:?}");
    assert!(reports(&net, server(1))[0].released);
}

#[test]
fn a_client_revoked_again_while_moving_takes_its_pages_from_the_second_server_only() {
    // 2 ms each way: forwarding 48 pages takes the old server some 200 ms.
    let faults = Faults { latency_ns: 2_000_000, ..Faults::NONE };
    let net = net_with(34, faults, 2, 1 << 20);
    add_trader(&net, 1, &[server(2)]);
    let mut config = Config::new(vec![server(1)], 64);
    config.traders = vec![trader(1)];
    let mut c = client(&net, config).unwrap();
    let versions = write_all_and_check(&mut c, 48);
    let t0 = sim::now();
    with_server(&net, server(1), |p| p.revoke_at = Some((t0, 1)));
    // Server 2 wants its memory back soon after the client moved there.
    with_server(&net, server(2), |p| p.revoke_at = Some((t0 + 60_000_000, 1)));
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    let mut notice = None;
    let mut reads_then = 0;
    for round in 0..400 {
        let page = (round * 5) % 48;
        c.read(page, &mut buf).unwrap();
        assert!(buf[..] == contents(page, versions[page])[..], "page {page}");
        if let Some(n) = c.notice() {
            notice = Some(n);
            reads_then = reports(&net, server(1))[0].reads;
            let fwd = with_server(&net, server(1), |p| p.server.revoke_counts().pages_forwarded);
            // The scenario: revoked again while the first server still forwards.
            assert!(fwd < 48, "{fwd} pages forwarded already");
            break;
        }
    }
    assert_eq!(notice, Some(RemoteNotice::RevokedWithoutReplacement));
    // Its pages come back (as the backing store manager brings them to the disk): every
    // one from server 2, none from server 1 any more; a page not yet forwarded waits for
    // server 1's offload.
    check_all(&mut c, &versions);
    assert_eq!(reports(&net, server(1))[0].reads, reads_then);
    assert_eq!(c.control_counts().waits, 1, "{:?}", c.control_counts());
    let s1 = with_server(&net, server(1), |p| p.server.revoke_counts());
    assert_eq!((s1.moved, s1.pages_forwarded), (1, 48), "{s1:?}");
    let s2 = with_server(&net, server(2), |p| p.server.revoke_counts());
    assert_eq!((s2.revoked, s2.returned), (1, 1), "{s2:?}");
    // Its notice came again or not, the revocation by the second server counts once.
    assert_eq!(c.stats().revocations, 1);
    c.release();
    assert!(reports(&net, server(2))[0].released);
}

#[test]
fn a_lost_mirror_is_refilled_on_a_new_server_so_a_second_loss_loses_nothing() {
    let faults = Faults { loss: 20, dup: 10, reorder: 50, latency_ns: 50_000, jitter_ns: 100_000 };
    let net = net_with(35, faults, 3, 1 << 20);
    add_trader(&net, 1, &[server(1), server(2), server(3)]);
    let mut config = Config::new(vec![server(1), server(2)], 64);
    config.mirror = true;
    config.traders = vec![trader(1)];
    let mut c = client(&net, config).unwrap();
    let mut versions = write_all_and_check(&mut c, 40);
    assert!(reports(&net, server(3)).is_empty());
    // The primary dies: the mirror is promoted, then a new mirror is found and refilled.
    net.borrow_mut().kill(server(1));
    drive(&mut c, &mut versions, 400, |c| {
        c.stats().failovers == 1 && !c.control.refill && c.control.mirror_to.is_some()
    });
    let r = reports(&net, server(3));
    assert_eq!((r.len(), r[0].role, r[0].pages), (1, rpp::wire::Role::Mirror, 40), "{r:?}");
    let cc = c.control_counts();
    // Every page with one copy was copied, but those rewritten meanwhile (written to both).
    assert!(cc.refilled > 0 && cc.refilled <= 40, "{cc:?}");
    // The second loss loses nothing.
    net.borrow_mut().kill(server(2));
    check_all(&mut c, &versions);
    assert_eq!(c.stats().failovers, 2);
    assert_eq!(c.notice(), None);
}

#[test]
fn a_client_whose_servers_were_all_lost_finds_a_new_one_through_its_trader() {
    let net = net_with(36, Faults::NONE, 3, 1 << 20);
    add_trader(&net, 1, &[server(3)]);
    let mut config = Config::new(vec![server(1), server(2)], 16);
    config.traders = vec![trader(1)];
    config.requery_ns = 1_000_000_000;
    let mut c = client(&net, config).unwrap();
    for page in 0..4 {
        c.write(page, &contents(page, 1)).unwrap();
    }
    net.borrow_mut().kill(server(1));
    net.borrow_mut().kill(server(2));
    assert_eq!(c.write(0, &contents(0, 2)), Err(RemoteError::Unreachable));
    // Not before its owner heard that every server was lost.
    assert_eq!(c.write(1, &contents(1, 2)), Err(RemoteError::NoServer));
    assert_eq!(c.notice(), Some(RemoteNotice::ServersLost));
    // The next write looks for a server: the trader names server 3.
    for page in 0..4 {
        c.write(page, &contents(page, 3)).unwrap();
    }
    check_all(&mut c, &[3; 4]);
    assert_eq!(reports(&net, server(3))[0].pages, 4);
    assert_eq!((c.control_counts().found_again, c.stats().servers), (1, 1));
    // Lost again, with no server left to find: refused at once, and looked for again only
    // after a while.
    net.borrow_mut().kill(server(3));
    assert_eq!(c.write(0, &contents(0, 4)), Err(RemoteError::Unreachable));
    assert_eq!(c.notice(), Some(RemoteNotice::ServersLost));
    // This write searches: the trader names server 3 again, which does not answer.
    assert_eq!(c.write(0, &contents(0, 4)), Err(RemoteError::NoServer));
    let t = sim::now();
    assert_eq!(c.write(0, &contents(0, 4)), Err(RemoteError::NoServer));
    assert_eq!(sim::now(), t, "searched again at once");
    assert_eq!(c.control_counts().found_again, 1);
}

/// Server `n` revokes `pages` pages of the reservation of its first client, now.
fn revoke_part(net: &SharedNet, n: u8, pages: u64) {
    let stream = reports(net, server(n))[0].stream;
    let mut out = Vec::new();
    let started = with_server(net, server(n), |p| {
        p.server.revoke_part(sim::now(), stream, pages, &mut |to, b| out.push((to, b.to_vec())))
    });
    assert!(started);
    for (to, b) in out {
        net.borrow_mut().put(server(n), to, b);
    }
}

#[test]
fn a_client_revoked_in_part_moves_only_the_pages_wanted() {
    let faults = Faults { loss: 20, dup: 10, reorder: 50, latency_ns: 50_000, jitter_ns: 100_000 };
    let net = net_with(37, faults, 2, 1 << 20);
    add_trader(&net, 1, &[server(2)]);
    let mut config = Config::new(vec![server(1)], 64);
    config.traders = vec![trader(1)];
    let mut c = client(&net, config).unwrap();
    let mut versions = write_all_and_check(&mut c, 32);
    // A whole reservation is no part of it.
    let stream = reports(&net, server(1))[0].stream;
    let whole =
        with_server(&net, server(1), |p| p.server.revoke_part(0, stream, 64, &mut |_, _| {}));
    assert!(!whole);
    revoke_part(&net, 1, 12);
    drive(&mut c, &mut versions, 400, |c| c.control_counts().partial == 1);
    // Twelve pages, the highest, moved to server 2; the rest stay on server 1, whose
    // reservation shrank by twelve.
    let (r1, r2) = (reports(&net, server(1)), reports(&net, server(2)));
    assert_eq!((r1[0].reserved, r1[0].pages, r1[0].released), (52, 20, false), "{r1:?}");
    assert_eq!(r2[0].pages, 12, "{r2:?}");
    let counts = with_server(&net, server(1), |p| p.server.revoke_counts());
    assert_eq!((counts.partial, counts.partial_done, counts.pages_given_back), (1, 1, 12));
    assert_eq!((counts.revoked, counts.pages_forwarded, counts.abandoned), (0, 0, 0));
    let cc = c.control_counts();
    assert_eq!(cc.pages_moved, 12, "{cc:?}");
    let held: Vec<(Endpoint, u64)> = c.servers().map(|s| (s.0, s.4)).collect();
    assert_eq!(held, [(server(1), 20), (server(2), 12)]);
    // Both servers in use, and counted so.
    assert_eq!((c.stats().servers, c.stats().revocations), (2, 1));
    check_all(&mut c, &versions);
    // New pages fill the rest of the stretch, none past server 1's smaller reservation.
    for page in 32..64 {
        c.write(page, &contents(page, 1)).unwrap();
    }
    versions.resize(64, 1);
    check_all(&mut c, &versions);
    let r1 = reports(&net, server(1));
    assert!(r1[0].pages <= 52 && r1[0].refused == 0, "{r1:?}");
    assert_eq!(c.notice(), None);
    assert_eq!(with_server(&net, server(1), |p| p.server.revoking()), 0);
}
