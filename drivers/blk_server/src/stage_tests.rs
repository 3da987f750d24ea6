//! Host tests of the scheduling stage: every scheduler keeps every byte, the model sets the
//! disk's time, and USD charges each stream its disk time.

extern crate std;

use std::vec::Vec;

use atropos::{Contract, MILLISECOND};

use crate::stage::Stage;
use crate::{ClientId, Config, DataArea, Server};
use blk_interface::protocol::{Op, Request, Response};
use blk_workloads::mem_disk::{DmaMemory, MemDisk, Rng};
use disk_model::{DiskModel, DiskParams, ModelOp};
use disk_sched::{PolicyName, scheduler};

const SS: u32 = 512;
const VIRT: u64 = 0x40_0000_0000;
const PHYS: u64 = 0x8000_0000;
const AREA: u64 = 256 << 10;
const SECTORS: u64 = 32 << 11;

fn model() -> DiskModel {
    DiskModel::new(DiskParams::deskstar_34gxp().with_capacity(SECTORS))
}

/// A scheduling server over a MemDisk for `clients` clients with these disk contracts.
fn server(policy: PolicyName, anticipate: bool, streams: &[Option<Contract>]) -> Server<MemDisk> {
    let clients = streams.len();
    let memory = DmaMemory::new(VIRT, PHYS, (AREA * clients as u64) as usize);
    let disk = MemDisk::new(SS, SECTORS, 8, 7, memory);
    let config = Config {
        max_clients: clients,
        max_in_flight_per_client: 9,
        queue_len: 32,
        max_transfer: 64 << 10,
    };
    let m = model();
    let sched = scheduler::build(policy, anticipate, &m, streams, 8, 0);
    let mut server =
        Server::with_scheduler(disk, config, Stage::new(sched, Some(m), 8 * clients, None));
    for c in 0..clients {
        let off = AREA * c as u64;
        server.open(c, DataArea { virt: VIRT + off, phys: PHYS + off, len: AREA }).unwrap();
        let open = Request { id: 0, op: Op::Open, sector: 0, offset: 0, len: 0 };
        assert!(server.request(c, &open.encode()).unwrap().status.is_ok());
    }
    server
}

/// Runs the server's clock forward from `*t` until nothing is left to do; every response.
fn settle(server: &mut Server<MemDisk>, t: &mut u64) -> Vec<(ClientId, Response, u64)> {
    let mut out = Vec::new();
    for _ in 0..100_000 {
        server.set_now(*t);
        while let Some((c, r)) = server.poll() {
            out.push((c, r, *t));
        }
        match server.next_event_ns() {
            Some(e) => *t = e.max(*t + 1),
            None => return out,
        }
    }
    panic!("the server never settled: {:?} at {t}", server.stage());
}

fn fill(server: &mut Server<MemDisk>, virt: u64, len: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let buf = server.device_mut().memory_mut().get_mut(virt, len).unwrap();
    for b in buf.iter_mut() {
        *b = rng.next_u64() as u8;
    }
}

#[test]
fn every_scheduler_keeps_every_byte() {
    for policy in PolicyName::ALL {
        for anticipate in [false, true] {
            let contract = Contract {
                period: 100 * MILLISECOND,
                slice: 30 * MILLISECOND,
                extra: true,
                latency: 100 * MILLISECOND,
            };
            let mut s = server(policy, anticipate, &[Some(contract), None]);
            let mut t = 0;
            let mut rng = Rng::new(policy as u64 + 1);
            // Each client writes 8 blocks of 4 KiB, twice, at random places in its half.
            let mut written: Vec<(ClientId, u64, u64)> = Vec::new();
            for round in 0..2u64 {
                for c in 0..2 {
                    for i in 0..8u64 {
                        let sector = c as u64 * SECTORS / 2 + rng.below(SECTORS / 2 / 8 - 1) * 8;
                        let offset = i * 4096;
                        let seed = round * 100 + c as u64 * 10 + i + 1;
                        fill(&mut s, VIRT + c as u64 * AREA + offset, 4096, seed);
                        let req = Request { id: i, op: Op::Write, sector, offset, len: 4096 };
                        assert!(s.request(c, &req.encode()).is_none(), "{policy:?}");
                        written.retain(|w| !(w.0 == c && w.1 == sector));
                        written.push((c, sector, seed));
                    }
                }
                // A flush among them: it waits for the device to be idle, and must not take
                // the tag of a request the model still holds.
                let flush = Request { id: 77, op: Op::Flush, sector: 0, offset: 0, len: 0 };
                s.set_now(t + 1);
                s.poll();
                let r = s.request(0, &flush.encode());
                assert!(r.is_none(), "{policy:?}: {r:?}");
                let done = settle(&mut s, &mut t);
                assert_eq!(done.len(), 17, "{policy:?} {anticipate}");
                assert!(done.iter().all(|(_, r, _)| r.status.is_ok()), "{policy:?}");
            }
            // Read each block back and compare it with what was written.
            for (c, sector, seed) in written {
                let req = Request { id: 99, op: Op::Read, sector, offset: 0, len: 4096 };
                assert!(s.request(c, &req.encode()).is_none());
                let done = settle(&mut s, &mut t);
                assert_eq!(done.len(), 1);
                fill(&mut s, VIRT + 2 * AREA - 4096, 4096, seed);
                let mem = s.device().memory();
                let want = mem.get(VIRT + 2 * AREA - 4096, 4096).unwrap().to_vec();
                let got = mem.get(VIRT + c as u64 * AREA, 4096).unwrap();
                assert!(got == &want[..], "{policy:?} {anticipate}: sector {sector} differs");
            }
        }
    }
}

#[test]
fn the_model_sets_when_a_request_completes() {
    let mut s = server(PolicyName::Sptf, false, &[None]);
    let req = Request { id: 1, op: Op::Read, sector: 1 << 14, offset: 0, len: 64 << 10 };
    let mut t = 1_000_000;
    s.set_now(t);
    assert!(s.request(0, &req.encode()).is_none());
    assert!(s.device_waiting() || s.next_event_ns().is_some());
    let done = settle(&mut s, &mut t);
    let want = model().service(1_000_000, ModelOp::Read, 1 << 14, 128).end_ns;
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].2, want, "completed at the model's time");
    assert!(!s.device_waiting());
}

#[test]
fn usd_charges_each_stream_its_disk_time() {
    // Slices longer than the longest request the model can take, so that each stream's
    // requests fit its slice.
    let c = |ms| Contract {
        period: 200 * MILLISECOND,
        slice: ms * MILLISECOND,
        extra: false,
        latency: 200 * MILLISECOND,
    };
    assert!(disk_sched::usd::longest_service_ns(&model(), 128) < 40 * MILLISECOND);
    let mut s = server(PolicyName::Usd, true, &[Some(c(80)), Some(c(40))]);
    let mut t = 0;
    let mut sector = [0u64, SECTORS / 2];
    for _ in 0..40 {
        for (client, next) in sector.iter_mut().enumerate() {
            let req = Request { id: 1, op: Op::Read, sector: *next, offset: 0, len: 64 << 10 };
            assert!(s.request(client, &req.encode()).is_none());
            *next += 128;
        }
        settle(&mut s, &mut t);
    }
    let stage = s.stage();
    let a = [stage.accounts(0).unwrap(), stage.accounts(1).unwrap()];
    assert!(a[0].guaranteed > 0 && a[1].guaranteed > 0, "{a:?}");
    assert_eq!(stage.stats().dispatched, 80);
    let periods: Vec<_> = s.stage_mut().take_periods();
    assert!(!periods.is_empty());
    for p in periods {
        assert!(p.guaranteed + p.extra <= if p.client == 0 { 80 } else { 40 } * MILLISECOND);
    }
}

#[test]
fn a_tracing_stage_keeps_every_request_it_completed() {
    let mut s = server(PolicyName::Sptf, false, &[None]);
    let mut t = 1_000_000;
    s.set_now(t);
    // Not traced: nothing kept.
    let req = |id, sector| Request { id, op: Op::Read, sector, offset: 0, len: 4096 };
    assert!(s.request(0, &req(1, 64).encode()).is_none());
    settle(&mut s, &mut t);
    assert!(s.stage_mut().take_requests().is_empty());
    s.stage_mut().set_tracing(true);
    let arrived = t;
    for (id, sector) in [(2, 1 << 14), (3, 8)] {
        assert!(s.request(0, &req(id, sector).encode()).is_none());
    }
    let done = settle(&mut s, &mut t);
    let kept = s.stage_mut().take_requests();
    assert_eq!(kept.len(), 2);
    for (k, (_, _, at)) in kept.iter().zip(&done) {
        assert!(k.r.read && k.r.sectors == 8 && k.r.arrival_ns == arrived, "{k:?}");
        assert!(k.r.arrival_ns <= k.dispatched_ns && k.dispatched_ns < k.done_ns, "{k:?}");
        assert_eq!(k.done_ns, *at, "completed when the model said");
    }
    // Taken: none left until the next completion.
    assert!(s.stage_mut().take_requests().is_empty());
}
