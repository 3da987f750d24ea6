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

    use crate::Server;

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
        while s.serve(now, &mut cpu, &mut |to, b| out.push((to, b.to_vec()))) {}
        out
    }

    fn create(s: &mut Server, from: Endpoint, request: u32, pages: u64) -> Message<'static> {
        let create = Message::CreateStream {
            pages,
            page_size: PAGE as u32,
            role: Role::Primary,
            has_local_disk: true,
            cpu: Qos { period_ns: 10_000_000, slice_ns: 1_000_000 },
            net: Qos { period_ns: 10_000_000, slice_ns: 1_000_000 },
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
}
