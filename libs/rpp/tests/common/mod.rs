//! What the RPP tests share: a seeded random source, random messages, and a page store in
//! memory.

#![allow(dead_code)]

use std::collections::BTreeMap;

use net_interface::{Endpoint, Ipv4Addr};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng as _, SeedableRng};
use rpp::wire::{
    Candidate, Candidates, ChunkSet, Code, Data, DataFlags, Header, MAX_CHUNK, MAX_CHUNKS, Message,
    OffloadTarget, Qos, RefuseReason, RevokeAnswer, Role,
};
use rpp::{PageStore, StoreError};

/// Xoshiro256++ from a fixed seed.
pub struct Rng(Xoshiro256PlusPlus);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }
    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    /// A field value: often small or extreme, otherwise any.
    pub fn field(&mut self) -> u64 {
        match self.below(4) {
            0 => self.below(4),
            1 => u64::MAX - self.below(4),
            _ => self.next(),
        }
    }
}

fn endpoint(r: &mut Rng) -> Endpoint {
    let a = r.next().to_be_bytes();
    Endpoint { addr: Ipv4Addr([a[0], a[1], a[2], a[3]]), port: r.next() as u16 }
}

fn qos(r: &mut Rng) -> Qos {
    Qos { period_ns: r.field(), slice_ns: r.field() }
}

/// The number of message kinds [`message`] makes (every op).
pub const KINDS: u64 = 22;

/// A random valid header.
pub fn header(r: &mut Rng) -> Header {
    Header { stream: r.field() as u32, token: r.field(), request: r.field() as u32 }
}

/// A random valid message of kind `kind` (0 to [`KINDS`]−1); a data payload borrows `buf`
/// (at least [`MAX_CHUNK`] bytes).
pub fn message<'a>(r: &mut Rng, kind: u64, buf: &'a [u8]) -> Message<'a> {
    let code = |r: &mut Rng| Code::ALL[r.below(Code::ALL.len() as u64) as usize];
    match kind {
        0 => Message::Read { vpn: r.field(), page_size: r.field() as u32 },
        1 => Message::Write { vpn: r.field(), page_size: r.field() as u32, tot: tot(r) },
        2 => Message::Exchange {
            vpn: r.field(),
            page_size: r.field() as u32,
            tot: tot(r),
            read_vpn: r.field(),
        },
        3 => {
            let size = r.below(MAX_CHUNK as u64 + 1) as usize;
            let page_size = (size as u64 + r.below(1 << 20)).min(u32::MAX as u64) as u32;
            let off = r.below(page_size as u64 - size as u64 + 1) as u32;
            let tot = tot(r);
            Message::Data(Data {
                vpn: r.field(),
                page_size,
                off,
                tot,
                num: r.below(tot as u64) as u16,
                flags: DataFlags(r.below(DataFlags::ALL.0 as u64 + 1) as u8),
                payload: &buf[..size],
            })
        }
        4 => Message::Ack { vpn: r.field(), code: code(r) },
        5 => {
            let c = code(r);
            let mut missing = ChunkSet::EMPTY;
            if c == Code::Missing {
                for _ in 0..r.below(12) {
                    missing.insert(r.below(MAX_CHUNKS as u64) as usize);
                }
                if r.chance(0.2) {
                    missing = ChunkSet::first(r.below(MAX_CHUNKS as u64 + 1) as usize);
                }
            }
            Message::Nack { vpn: r.field(), code: c, missing }
        }
        6 => Message::Free { vpn: r.field() },
        7 => Message::Advert {
            server: endpoint(r),
            bytes: r.field(),
            cpu_committable: r.chance(0.5),
            net_committable: r.chance(0.5),
        },
        8 => Message::TraderQuery { bytes: r.field() },
        9 => {
            let mut servers = Candidates::new();
            for _ in 0..r.below(6) {
                assert!(servers.push(Candidate { server: endpoint(r), bytes: r.field() }));
            }
            Message::TraderAnswer { servers }
        }
        10 => Message::CreateStream {
            pages: r.field(),
            page_size: r.field() as u32,
            role: if r.chance(0.5) { Role::Primary } else { Role::Mirror },
            has_local_disk: r.chance(0.5),
            cpu: qos(r),
            net: qos(r),
        },
        11 => Message::StreamCreated {
            stream: r.field() as u32,
            token: r.field(),
            pages: r.field(),
            data_port: r.field() as u16,
        },
        12 => Message::Refused {
            reason: RefuseReason::ALL[r.below(RefuseReason::ALL.len() as u64) as usize],
        },
        13 => Message::AddResources { pages: r.field() },
        14 => Message::Release,
        15 => Message::RevokeNotice { pages: r.field() },
        16 => Message::RevokeReply {
            answer: match r.below(3) {
                0 => RevokeAnswer::NoServer,
                1 => RevokeAnswer::Hold(None),
                _ => RevokeAnswer::Hold(Some(OffloadTarget {
                    server: endpoint(r),
                    stream: r.field() as u32,
                    token: r.field(),
                })),
            },
        },
        17 => Message::OffloadStart { pages: r.field() },
        18 => Message::OffloadDone { pages: r.field() },
        19 => Message::SwitchMirror,
        20 => Message::Heartbeat,
        _ => Message::Alive,
    }
}

fn tot(r: &mut Rng) -> u16 {
    match r.below(3) {
        0 => 1,
        1 => MAX_CHUNKS as u16,
        _ => 1 + r.below(MAX_CHUNKS as u64) as u16,
    }
}

/// A server's memory: pages per (stream, page), at most `capacity` of them.
#[derive(Default)]
pub struct MemStore {
    pub pages: BTreeMap<(u32, u64), Vec<u8>>,
    pub capacity: usize,
    pub puts: u64,
    pub gets: u64,
}

impl MemStore {
    pub fn new(capacity: usize) -> MemStore {
        MemStore { capacity, ..MemStore::default() }
    }
}

impl PageStore for MemStore {
    fn get(&mut self, stream: u32, vpn: u64, buf: &mut [u8]) -> Result<usize, StoreError> {
        let page = self.pages.get(&(stream, vpn)).ok_or(StoreError::NotHeld)?;
        buf[..page.len()].copy_from_slice(page);
        self.gets += 1;
        Ok(page.len())
    }
    fn put(&mut self, stream: u32, vpn: u64, data: &[u8]) -> Result<(), StoreError> {
        if !self.pages.contains_key(&(stream, vpn)) && self.pages.len() >= self.capacity {
            return Err(StoreError::Full);
        }
        self.pages.insert((stream, vpn), data.to_vec());
        self.puts += 1;
        Ok(())
    }
    fn free(&mut self, stream: u32, vpn: u64) {
        self.pages.remove(&(stream, vpn));
    }
    fn holds(&self, stream: u32, vpn: u64) -> bool {
        self.pages.contains_key(&(stream, vpn))
    }
}
