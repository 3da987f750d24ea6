//! Host tests of the server's core.

use crate::sched::{Contract, Grant, Scheduler};

const MS: u64 = 1_000_000;

fn contract(period_ms: u64, slice_ms: u64, extra: bool) -> Contract {
    Contract { period_ns: period_ms * MS, slice_ns: slice_ms * MS, extra }
}

/// Serves whoever the scheduler picks, each packet costing `cost`, from 0 to `until`; each
/// client always has work. What each was given.
fn saturate(s: &mut Scheduler, clients: usize, cost: u64, until: u64) -> [u64; 3] {
    let mut got = [0u64; 3];
    for i in 0..clients {
        s.set_ready(i, true);
    }
    let mut now = 0;
    while now < until {
        match s.pick(now) {
            Some((i, grant)) => {
                s.charge(i, cost, grant);
                got[i] += cost;
                now += cost;
            }
            None => now = s.next_start().expect("a client waits for its period"),
        }
    }
    got
}

#[test]
fn clients_without_extra_get_their_slices_and_no_more() {
    let mut s = Scheduler::default();
    s.admit(0, contract(10, 1, false), 0);
    s.admit(1, contract(10, 3, false), 0);
    assert_eq!(s.committed_ppm(), 400_000);
    let got = saturate(&mut s, 2, MS / 10, 100 * MS);
    // 100 ms: ten periods of 1 ms and of 3 ms.
    assert_eq!(got[..2], [10 * MS, 30 * MS]);
    let c = s.charged(0).unwrap();
    assert_eq!((c.cpu_ns, c.extra_ns), (10 * MS, 0));
    // Each waited for its next period in every one of them (the last one's end is at 100 ms).
    assert!((9..=10).contains(&c.throttled), "{c:?}");
}

#[test]
fn slack_goes_to_clients_with_extra_and_earliest_deadline_first_within_slices() {
    let mut s = Scheduler::default();
    s.admit(0, contract(10, 1, false), 0);
    s.admit(1, contract(20, 2, true), 0);
    let got = saturate(&mut s, 2, MS / 10, 100 * MS);
    assert_eq!(got[0], 10 * MS);
    // The rest of the time is client 1's: its slices and the slack.
    assert_eq!(got[1], 90 * MS);
    let c = s.charged(1).unwrap();
    assert_eq!(c.extra_ns, 90 * MS - 10 * 2 * MS / 2);
    // Within its slice client 0 (deadline 10 ms) goes before client 1 (20 ms).
    let mut s = Scheduler::default();
    s.admit(1, contract(20, 2, true), 0);
    s.admit(0, contract(10, 1, false), 0);
    s.set_ready(0, true);
    s.set_ready(1, true);
    assert_eq!(s.pick(0), Some((0, Grant::Guaranteed)));
}

#[test]
fn an_overdraft_is_paid_back_from_the_next_slice_and_idle_clients_wait_for_nothing() {
    let mut s = Scheduler::default();
    s.admit(0, contract(10, 1, false), 0);
    assert_eq!(s.pick(0), None);
    assert_eq!(s.next_start(), None);
    s.set_ready(0, true);
    assert_eq!(s.pick(0), Some((0, Grant::Guaranteed)));
    // One packet of 1.5 ms: 0.5 ms over.
    s.charge(0, 3 * MS / 2, Grant::Guaranteed);
    assert_eq!(s.pick(2 * MS), None);
    assert_eq!(s.next_start(), Some(10 * MS));
    assert_eq!(s.pick(10 * MS), Some((0, Grant::Guaranteed)));
    s.charge(0, MS / 2, Grant::Guaranteed);
    // The new slice was 0.5 ms after the overdraft: spent.
    assert_eq!(s.pick(11 * MS), None);
    assert_eq!(s.remove(0).map(|c| c.cpu_ns), Some(2 * MS));
    assert_eq!(s.pick(30 * MS), None);
}

mod server {
    use alloc::vec;
    use alloc::vec::Vec;

    use net_interface::{Endpoint, Ipv4Addr};
    use rpp::wire::{
        self, Code, Data, DataFlags, Header, Message, Packet, Qos, RefuseReason, Role,
    };

    use alloc::collections::BTreeMap;

    use crate::link::Link;
    use crate::{ClientReport, Server};

    const MS: u64 = 1_000_000;
    const US: u64 = 1_000;

    const VICTIM: Endpoint = Endpoint { addr: Ipv4Addr([10, 0, 0, 1]), port: 5000 };
    const HOSTILE: Endpoint = Endpoint { addr: Ipv4Addr([10, 0, 0, 3]), port: 6000 };
    const PAGE: usize = 4096;

    fn packet(header: Header, message: Message<'_>) -> Vec<u8> {
        let mut b = vec![0; wire::MAX_PACKET];
        let n = wire::encode(&Packet { header, message }, &mut b).unwrap();
        b.truncate(n);
        b
    }

    /// Feeds `bytes` from `from` and serves every queued packet (each costing 1 µs):
    /// the answers.
    fn exchange(
        s: &mut Server,
        now: u64,
        from: Endpoint,
        bytes: &[u8],
    ) -> Vec<(Endpoint, Vec<u8>)> {
        let mut t = now;
        let mut cpu = move || {
            t += 1_000;
            t
        };
        let mut out = Vec::new();
        s.receive(now, &mut cpu, from, bytes, &mut |to, b| out.push((to, b.to_vec())));
        // Served and sent, the clock moved on while replies wait for the link.
        let mut now = now;
        loop {
            while s.serve(now, &mut cpu) {}
            s.transmit(now, &mut |to, b| out.push((to, b.to_vec())));
            if !s.has_work() {
                return out;
            }
            now = s.next_wakeup().expect("waiting work has a wake-up").max(now + 1);
        }
    }

    fn create(s: &mut Server, from: Endpoint, request: u32, pages: u64) -> Message<'static> {
        let create = Message::CreateStream {
            pages,
            page_size: PAGE as u32,
            role: Role::Primary,
            has_local_disk: true,
            cpu: Qos { period_ns: 10_000_000, slice_ns: 1_000_000, extra: true },
            net: Qos { period_ns: 10_000_000, slice_ns: 1_000_000, extra: true },
        };
        let out = exchange(s, 0, from, &packet(Header { request, ..Header::default() }, create));
        assert_eq!(out.len(), 1);
        let p = wire::decode(&out[0].1).unwrap();
        match p.message {
            Message::StreamCreated { stream, token, pages, data_port } => {
                Message::StreamCreated { stream, token, pages, data_port }
            }
            Message::Refused { reason } => Message::Refused { reason },
            m => panic!("{m:?}"),
        }
    }

    /// Writes `page` filled with `byte` on (stream, token): the answers' messages' codes.
    fn write(s: &mut Server, from: Endpoint, h: Header, vpn: u64, byte: u8) -> Vec<Code> {
        write_len(s, from, h, vpn, byte, PAGE)
    }

    /// Writes a page of `len` bytes (a compressed page when shorter than a page) filled with
    /// `byte`: the answers' codes.
    fn write_len(
        s: &mut Server,
        from: Endpoint,
        h: Header,
        vpn: u64,
        byte: u8,
        len: usize,
    ) -> Vec<Code> {
        let page = vec![byte; len];
        let tot = len.div_ceil(wire::MAX_CHUNK) as u16;
        let mut codes = Vec::new();
        for num in 0..tot {
            let off = num as usize * wire::MAX_CHUNK;
            let end = (off + wire::MAX_CHUNK).min(len);
            let data = Data {
                vpn,
                page_size: len as u32,
                off: off as u32,
                tot,
                num,
                flags: DataFlags::NONE,
                payload: &page[off..end],
            };
            for (_, b) in exchange(s, 0, from, &packet(h, Message::Data(data))) {
                match wire::decode(&b).unwrap().message {
                    Message::Ack { code, .. } | Message::Nack { code, .. } => codes.push(code),
                    m => panic!("{m:?}"),
                }
            }
        }
        codes
    }

    #[test]
    fn another_clients_stream_cannot_be_read_written_or_released() {
        let mut s = Server::new(1 << 20, 42);
        let Message::StreamCreated { stream: v, token: vt, .. } = create(&mut s, VICTIM, 1, 16)
        else {
            panic!()
        };
        let Message::StreamCreated { stream: h, token: ht, .. } = create(&mut s, HOSTILE, 1, 16)
        else {
            panic!()
        };
        assert_ne!((v, vt), (h, ht));
        let victim = Header { stream: v, token: vt, request: 7 };
        assert_eq!(write(&mut s, VICTIM, victim, 3, 0x11), [Code::None]);
        // The hostile client: the victim's stream with its own token, a guess, and its own
        // stream with a wrong token. Every packet refused with BadToken.
        let mut refused = 0;
        for (stream, token) in [(v, ht), (v, vt ^ 1), (h, ht ^ 1), (99, ht)] {
            let hdr = Header { stream, token, request: 9 };
            let codes = write(&mut s, HOSTILE, hdr, 3, 0x66);
            assert!(codes.iter().all(|&c| c == Code::BadToken), "{codes:?}");
            refused += 3;
            for m in [
                Message::Read { vpn: 3, page_size: PAGE as u32 },
                Message::Release,
                Message::SwitchMirror,
            ] {
                let out = exchange(&mut s, 0, HOSTILE, &packet(hdr, m));
                for (to, b) in out {
                    assert_eq!(to, HOSTILE);
                    let m = wire::decode(&b).unwrap().message;
                    assert!(
                        matches!(
                            m,
                            Message::Nack { code: Code::BadToken, .. }
                                | Message::Ack { code: Code::BadToken, .. }
                        ),
                        "{m:?}"
                    );
                }
                refused += 1;
            }
        }
        // The victim's page is intact and its stream open.
        let read = Header { request: 8, ..victim };
        let out = exchange(
            &mut s,
            0,
            VICTIM,
            &packet(read, Message::Read { vpn: 3, page_size: PAGE as u32 }),
        );
        let mut got = vec![0u8; PAGE];
        for (_, b) in &out {
            if let Message::Data(d) = wire::decode(b).unwrap().message {
                got[d.off as usize..][..d.payload.len()].copy_from_slice(d.payload);
            }
        }
        assert!(got.iter().all(|&b| b == 0x11));
        let c = s.counts();
        assert_eq!(c.bad_token, refused);
        let reports = s.reports();
        let vr = reports.iter().find(|r| r.stream == v).unwrap();
        // Of the refusals, those that named the victim's stream.
        assert_eq!((vr.refused, vr.writes, vr.pages, vr.released), (2 * 6, 1, 1, false));
        assert_eq!(reports.iter().find(|r| r.stream == h).unwrap().refused, 6);
    }

    /// Reads page `vpn`: the bytes of the chunks that came back, at the length they name.
    fn read(s: &mut Server, from: Endpoint, h: Header, vpn: u64) -> Vec<u8> {
        let out = exchange(s, 0, from, &packet(h, Message::Read { vpn, page_size: PAGE as u32 }));
        let mut got = Vec::new();
        for (_, b) in &out {
            if let Message::Data(d) = wire::decode(b).unwrap().message {
                got.resize(d.page_size as usize, 0);
                got[d.off as usize..][..d.payload.len()].copy_from_slice(d.payload);
            }
        }
        got
    }

    #[test]
    fn a_short_page_is_kept_and_read_back_at_its_length_and_counted_in_bytes() {
        let mut s = Server::new(32 * PAGE as u64, 3);
        let Message::StreamCreated { stream, token, .. } = create(&mut s, VICTIM, 1, 2) else {
            panic!()
        };
        let h = Header { stream, token, request: 10 };
        // 1,000 bytes (one chunk) and 2,000 (two): stored as sent, each a page of the
        // reservation.
        assert_eq!(write_len(&mut s, VICTIM, h, 0, 7, 1000), [Code::None]);
        assert_eq!(
            write_len(&mut s, VICTIM, Header { request: 11, ..h }, 1, 8, 2000),
            [Code::None]
        );
        assert_eq!(s.memory().0, 3000);
        assert_eq!(read(&mut s, VICTIM, Header { request: 12, ..h }, 0), vec![7u8; 1000]);
        assert_eq!(read(&mut s, VICTIM, Header { request: 13, ..h }, 1), vec![8u8; 2000]);
        // The reservation (2 pages) is full, whatever the bytes.
        let full = write_len(&mut s, VICTIM, Header { request: 14, ..h }, 2, 9, 10);
        assert_eq!(full, [Code::Full]);
        // Rewritten whole: its bytes grow.
        assert_eq!(write(&mut s, VICTIM, Header { request: 15, ..h }, 0, 5), [Code::None]);
        assert_eq!(s.memory().0, 2000 + PAGE as u64);
        assert_eq!(read(&mut s, VICTIM, Header { request: 16, ..h }, 0), vec![5u8; PAGE]);
        let r = s.reports();
        assert_eq!((r[0].bytes, r[0].bytes_written), (2000 + PAGE as u64, 3000 + PAGE as u64));
        // Longer than the stream's page: refused.
        let long = write_len(&mut s, VICTIM, Header { request: 17, ..h }, 1, 1, PAGE + 1);
        assert!(long.iter().all(|&c| c == Code::BadRequest), "{long:?}");
        assert_eq!(read(&mut s, VICTIM, Header { request: 18, ..h }, 1), vec![8u8; 2000]);
    }

    #[test]
    fn streams_are_admitted_within_the_memory_and_a_repeated_creation_is_answered_again() {
        let mut s = Server::new(32 * PAGE as u64, 1);
        let first = create(&mut s, VICTIM, 1, 24);
        // The same request again (its answer lost): the same stream, no second reservation.
        assert_eq!(create(&mut s, VICTIM, 1, 24), first);
        assert_eq!(s.memory(), (0, 24 * PAGE as u64));
        assert_eq!(
            create(&mut s, HOSTILE, 1, 16),
            Message::Refused { reason: RefuseReason::Memory }
        );
        let Message::StreamCreated { stream, token, .. } = create(&mut s, HOSTILE, 2, 8) else {
            panic!()
        };
        // A stream holds no more pages than it reserved.
        let h = Header { stream, token, request: 1 };
        for vpn in 0..8 {
            assert_eq!(
                write(&mut s, HOSTILE, Header { request: 10 + vpn as u32, ..h }, vpn, 1),
                [Code::None]
            );
        }
        assert_eq!(write(&mut s, HOSTILE, Header { request: 99, ..h }, 8, 1), [Code::Full]);
        assert_eq!(s.memory(), (8 * PAGE as u64, 32 * PAGE as u64));
        // Released: its memory and reservation return.
        let out =
            exchange(&mut s, 0, HOSTILE, &packet(Header { request: 100, ..h }, Message::Release));
        assert!(matches!(
            wire::decode(&out[0].1).unwrap().message,
            Message::Ack { code: Code::None, .. }
        ));
        assert_eq!(s.memory(), (0, 24 * PAGE as u64));
        assert_eq!(s.open_streams(), 1);
        let r = s.reports();
        assert!(r[0].released && r[0].writes == 8 && r[0].cpu_ns > 0, "{:?}", r[0]);
        assert_eq!(s.counts().refused_memory, 1);
    }

    /// A stream of `pages` pages for `from` under the contracts `cpu` and `net`: its header
    /// (request 0).
    fn open(s: &mut Server, from: Endpoint, pages: u64, cpu: Qos, net: Qos) -> Header {
        let create = Message::CreateStream {
            pages,
            page_size: PAGE as u32,
            role: Role::Primary,
            has_local_disk: true,
            cpu,
            net,
        };
        let out = exchange(s, 0, from, &packet(Header { request: 1, ..Header::default() }, create));
        match wire::decode(&out[0].1).unwrap().message {
            Message::StreamCreated { stream, token, .. } => Header { stream, token, request: 0 },
            m => panic!("{m:?}"),
        }
    }

    fn report(s: &Server, stream: u32) -> ClientReport {
        s.reports().into_iter().find(|r| r.stream == stream).expect("a report")
    }

    /// What a run of [`contend`] showed.
    struct Contended {
        /// Each of the victim's pages: from its request to its last chunk off the link, and
        /// the link time of its three chunks.
        victim: Vec<(u64, u64)>,
        /// The greedy client's report.
        greedy: ClientReport,
        /// The link time of a full chunk's reply.
        frame: u64,
    }

    /// The run's length (requests are made in it; replies are awaited 5 ms more).
    const RUN: u64 = 200 * MS;

    /// A greedy client (4 reads every 100 µs, 12 times the link) beside a victim (a read every
    /// millisecond, under a contract of 0.4 ms of link time per ms; its page takes 0.37 ms),
    /// for [`RUN`] of virtual time, the server's replies leaving over a FIFO link of the
    /// server's link model (the driver's queue and the wire).
    fn contend(greedy_net: Qos, window_ns: u64) -> Contended {
        let mut s = Server::new(1 << 20, 7);
        let link = Link { window_ns, ..Link::FAST_ETHERNET };
        s.set_link(link);
        let cpu = Qos { period_ns: MS, slice_ns: 100 * US, extra: true };
        let v =
            open(&mut s, VICTIM, 8, cpu, Qos { period_ns: MS, slice_ns: 400 * US, extra: false });
        let g = open(&mut s, HOSTILE, 8, cpu, greedy_net);
        for vpn in 0..8 {
            let request = 100 + vpn as u32;
            assert_eq!(write(&mut s, VICTIM, Header { request, ..v }, vpn, 1), [Code::None]);
            assert_eq!(write(&mut s, HOSTILE, Header { request, ..g }, vpn, 2), [Code::None]);
        }
        let t0 = 1_000 * MS;
        let mut clock = 0;
        let mut cpu = || {
            clock += US;
            clock
        };
        let (mut wire_free, mut request) = (t0, 1000u32);
        // The victim's requests: when asked, chunks seen, their link time.
        let mut asked: BTreeMap<u32, (u64, u32, u64)> = BTreeMap::new();
        let mut victim = Vec::new();
        let mut now = t0;
        while now < t0 + RUN + 5 * MS {
            let step = now - t0;
            let read = |h: Header, request: u32| {
                let vpn = u64::from(request % 8);
                packet(Header { request, ..h }, Message::Read { vpn, page_size: PAGE as u32 })
            };
            if step < RUN && step.is_multiple_of(100 * US) {
                for _ in 0..4 {
                    s.receive(now, &mut cpu, HOSTILE, &read(g, request), &mut |_, _| {});
                    request += 1;
                }
            }
            if step < RUN && step.is_multiple_of(MS) {
                s.receive(now, &mut cpu, VICTIM, &read(v, request), &mut |_, _| {});
                asked.insert(request, (now, 0, 0));
                request += 1;
            }
            while s.serve(now, &mut cpu) {}
            s.transmit(now, &mut |to, b| {
                let ns = link.frame_ns(b.len());
                wire_free = wire_free.max(now) + ns;
                let p = wire::decode(b).unwrap();
                if to != VICTIM {
                    return;
                }
                assert!(matches!(p.message, Message::Data(_)), "{:?}", p.message);
                let a = asked.get_mut(&p.header.request).expect("a page asked for");
                a.1 += 1;
                a.2 += ns;
                if a.1 == 3 {
                    victim.push((wire_free - a.0, a.2));
                }
            });
            now += 10 * US;
        }
        let frame = link.frame_ns(wire::MAX_PACKET);
        Contended { victim, greedy: report(&s, g.stream), frame }
    }

    #[test]
    fn a_greedy_client_cannot_push_another_clients_replies_beyond_its_contract() {
        let frame = Link::FAST_ETHERNET.frame_ns(wire::MAX_PACKET);
        let window = Link::FAST_ETHERNET.window_ns;
        let periods = RUN / MS + 5;
        for extra in [false, true] {
            let greedy = Qos { period_ns: MS, slice_ns: 200 * US, extra };
            let c = contend(greedy, window);
            assert_eq!(c.frame, frame);
            // Every page the victim asked for came, each no sooner than its three chunks'
            // link time and no later than that after the window of replies handed over
            // before it and a frame beyond the greedy client's slice (it may go first by
            // EDF within its slice) and the 10 µs step of the run.
            assert_eq!(c.victim.len() as u64, RUN / MS, "extra={extra}");
            for &(latency, own) in &c.victim {
                assert!(own > 2 * frame && own <= 3 * frame, "{own}");
                let most = own + window + 200 * US + frame + 10 * US;
                assert!((own..=most).contains(&latency), "extra={extra}: {latency} > {most}");
            }
            // The greedy client had its slice every period, and beyond it only the slack:
            // without extra, never more than its slice and one frame of overdraft per period.
            let g = c.greedy;
            let guaranteed = g.net_ns - g.net_extra_ns;
            assert!(
                (periods - 10) * 200 * US <= guaranteed
                    && guaranteed <= periods * (200 * US + frame),
                "extra={extra}: {g:?}"
            );
            match extra {
                false => assert_eq!(g.net_extra_ns, 0),
                // The slack: the link less the victim's 37% and the greedy's slice.
                true => assert!(g.net_extra_ns > RUN / 3 && g.net_ns <= RUN + 5 * MS, "{g:?}"),
            }
            assert!(g.net_throttled >= RUN / MS - 5, "{g:?}");
            // What its contract could not carry was dropped (its retransmissions ask again).
            assert!(g.send_drops > 0, "{g:?}");
        }
        // The same run with every reply handed to the driver at once (a server without
        // network scheduling): the victim's pages wait behind the greedy client's backlog.
        let greedy = Qos { period_ns: MS, slice_ns: 200 * US, extra: true };
        let c = contend(greedy, RUN);
        let worst = c.victim.iter().map(|&(l, _)| l).max().unwrap_or(u64::MAX);
        assert!(c.victim.len() < (RUN / MS) as usize || worst > 10 * MS, "{worst}");
    }

    #[test]
    fn receive_work_is_charged_to_the_client_it_was_for_and_the_rest_to_the_server() {
        let mut s = Server::new(1 << 20, 3);
        let qos = Qos { period_ns: 10 * MS, slice_ns: MS, extra: true };
        let v = open(&mut s, VICTIM, 8, qos, qos);
        let before = report(&s, v.stream);
        let counts = s.counts();
        // A clock that moves 1 µs at each reading: a receive reads it at its start and end.
        let mut t = 0;
        let mut cpu = move || {
            t += US;
            t
        };
        let read = Message::Read { vpn: 0, page_size: PAGE as u32 };
        for i in 0..10 {
            let p = packet(Header { request: 50 + i, ..v }, read);
            s.receive(MS, &mut cpu, VICTIM, &p, &mut |_, _| panic!("queued, not answered"));
        }
        let r = report(&s, v.stream);
        assert_eq!(r.receive_ns - before.receive_ns, 10 * US);
        assert_eq!(r.cpu_ns - before.cpu_ns, 10 * US);
        // Packets that name the victim's stream with a wrong token, and one that does not
        // decode: the server's own, counted, not the victim's.
        for i in 0..5 {
            let p = packet(Header { request: 70 + i, token: v.token ^ 1, ..v }, read);
            s.receive(MS, &mut cpu, HOSTILE, &p, &mut |_, _| {});
        }
        s.receive(MS, &mut cpu, HOSTILE, &[1, 2, 3], &mut |_, _| {});
        let r = report(&s, v.stream);
        assert_eq!(r.cpu_ns - before.cpu_ns, 10 * US);
        let c = s.counts();
        assert_eq!(c.unattributed_ns - counts.unattributed_ns, 6 * US);
        assert_eq!((c.bad_token - counts.bad_token, c.malformed - counts.malformed), (5, 1));
        // A receive that began earlier (the copy out of the driver's slot) is charged from
        // then: 5 µs before the clock's last reading.
        let start = cpu() - 5 * US;
        let p = packet(Header { request: 90, ..v }, read);
        s.receive_since(MS, start, &mut cpu, VICTIM, &p, &mut |_, _| {});
        assert_eq!(report(&s, v.stream).receive_ns - r.receive_ns, 6 * US);
    }
}
