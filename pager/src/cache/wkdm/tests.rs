//! WKdm on the host: round trips of many kinds of page, sizes against lz4, and malformed
//! input, fuzzed with a seeded generator, that must be an error and never a panic.

extern crate std;

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use std::println;

use super::*;

use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{Rng as _, SeedableRng};

/// SplitMix64 (`rand_xoshiro`'s), seeded: the state starts at the seed.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(SplitMix64::seed_from_u64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

type Page = [u8; PAGE_SIZE];

fn from_words(f: impl FnMut(usize) -> u32) -> Box<Page> {
    let mut page = Box::new([0u8; PAGE_SIZE]);
    let mut f = f;
    for (i, c) in page.chunks_exact_mut(4).enumerate() {
        c.copy_from_slice(&f(i).to_le_bytes());
    }
    page
}

const TEXT: &[u8] = b"The compressed cache keeps recently evicted pages in memory, compressed, \
so that a fault on one costs a decompression instead of a disk read. ";

/// Named pages of many kinds.
fn pages() -> Vec<(&'static str, Box<Page>)> {
    let mut rng = Rng::new(42);
    let mut out = vec![
        ("zero", Box::new([0u8; PAGE_SIZE])),
        ("all equal", from_words(|_| 0xdead_beef)),
        ("small ints 1-10", from_words(|_| 1 + rng.below(10) as u32)),
        ("sequential ints", from_words(|i| i as u32)),
        ("pointers", from_words(|i| 0x8020_0000 + 8 * (i as u32 % 97))),
        ("one word", from_words(|i| if i == 1023 { 7 } else { 0 })),
    ];
    let mut text = Box::new([0u8; PAGE_SIZE]);
    for (b, t) in text.iter_mut().zip(TEXT.iter().cycle()) {
        *b = *t;
    }
    out.push(("text", text));
    let mut ramp = Box::new([0u8; PAGE_SIZE]);
    for (i, c) in ramp.chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&(1.5 + 0.25 * i as f64).to_le_bytes());
    }
    out.push(("f64 ramp", ramp));
    let mut random = Box::new([0u8; PAGE_SIZE]);
    random.iter_mut().for_each(|b| *b = rng.next() as u8);
    out.push(("random", random.clone()));
    let mut mixed = from_words(|i| if i % 3 == 0 { 0 } else { 1 + rng.below(10) as u32 });
    mixed[2048..3072].copy_from_slice(&random[..1024]);
    out.push(("mixed", mixed));
    let mut rng2 = Rng::new(9);
    out.push(("high bits shared", from_words(|_| 0x1234_0000 | rng2.below(1 << 10) as u32)));
    out
}

fn lz4_size(page: &Page) -> usize {
    let mut out = vec![0u8; lz4_flex::block::get_maximum_output_size(PAGE_SIZE)];
    lz4_flex::block::compress_into(page, &mut out).unwrap()
}

#[test]
fn every_kind_of_page_round_trips() {
    let mut scratch = Box::new(Scratch::new());
    for (name, page) in pages() {
        let bytes: Vec<u8> = scratch.compress(&page, MAX_SIZE).expect(name).into();
        assert!(bytes.len() >= MIN_SIZE && bytes.len().is_multiple_of(4), "{name}");
        let mut back = Box::new([0xa5u8; PAGE_SIZE]);
        scratch.decompress(&bytes, &mut back).expect(name);
        assert_eq!(&back[..], &page[..], "{name}");
        // The free functions agree.
        let mut out = vec![0u8; PAGE_SIZE - 512];
        match compress(&page, &mut out) {
            Some(n) => {
                assert_eq!(&out[..n], &bytes[..], "{name}");
                let mut again = Box::new([0u8; PAGE_SIZE]);
                decompress(&out[..n], &mut again).unwrap();
                assert_eq!(&again[..], &page[..], "{name}");
            }
            None => assert!(bytes.len() > PAGE_SIZE - 512, "{name}"),
        }
        println!("{name:>16}: wkdm {:>4} bytes, lz4 {:>4} bytes", bytes.len(), lz4_size(&page));
    }
}

#[test]
fn incompressible_pages_are_reported_and_limits_are_exact() {
    let pages = pages();
    let random = &pages.iter().find(|(n, _)| *n == "random").unwrap().1;
    let mut out = vec![0u8; PAGE_SIZE - 512];
    assert_eq!(compress(random, &mut out), None);
    let mut scratch = Box::new(Scratch::new());
    for (name, page) in &pages {
        let n = scratch.compress(page, MAX_SIZE).unwrap().len();
        assert_eq!(scratch.compress(page, n).map(<[u8]>::len), Some(n), "{name}");
        assert_eq!(scratch.compress(page, n - 1), None, "{name}");
        assert_eq!(compress(page, &mut vec![0u8; n - 1]), None, "{name}");
    }
    assert_eq!(compress(random, &mut [0u8; MIN_SIZE - 1]), None);
}

#[test]
fn word_data_compresses_better_than_with_lz4() {
    let pages = pages();
    for name in ["small ints 1-10", "high bits shared", "sequential ints", "mixed"] {
        let page = &pages.iter().find(|(n, _)| *n == name).unwrap().1;
        let wkdm = Scratch::new().compress(page, MAX_SIZE).unwrap().len();
        let lz4 = lz4_size(page);
        println!("{name}: wkdm {wkdm} lz4 {lz4}");
        assert!(wkdm < lz4, "{name}: wkdm {wkdm} lz4 {lz4}");
    }
}

fn no_panic(input: &[u8]) -> Result<(), WkdmError> {
    let mut page = Box::new([0u8; PAGE_SIZE]);
    decompress(input, &mut page)
}

#[test]
fn truncated_and_padded_input_is_an_error() {
    for (name, page) in pages() {
        let bytes: Vec<u8> = Scratch::new().compress(&page, MAX_SIZE).unwrap().into();
        for len in 0..bytes.len() {
            assert!(no_panic(&bytes[..len]).is_err(), "{name}: {len}");
        }
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0; 4]);
        assert_eq!(no_panic(&longer), Err(WkdmError::Length), "{name}");
        let mut version = bytes.clone();
        version[6..8].copy_from_slice(&(VERSION + 1).to_le_bytes());
        assert_eq!(no_panic(&version), Err(WkdmError::Version), "{name}");
    }
    assert_eq!(no_panic(&[]), Err(WkdmError::Length));
    assert_eq!(no_panic(&vec![0u8; MAX_SIZE + 4]), Err(WkdmError::Length));
}

#[test]
fn malformed_input_never_panics() {
    let mut rng = Rng::new(7);
    let valid: Vec<Vec<u8>> =
        pages().iter().map(|(_, p)| Scratch::new().compress(p, MAX_SIZE).unwrap().into()).collect();
    let mut scratch = Box::new(Scratch::new());
    let mut page = Box::new([0u8; PAGE_SIZE]);
    let (mut ok, mut errors) = (0, 0);
    for round in 0..6000 {
        let input: Vec<u8> = match round % 3 {
            // Pure garbage of any length.
            0 => {
                let len = rng.below(MAX_SIZE as u64 + 64) as usize;
                (0..len).map(|_| rng.next() as u8).collect()
            }
            // A header whose counts agree with the length, over random tags and sections.
            1 => {
                let n_miss = rng.below(1025) as usize;
                let n_idx = rng.below((1025 - n_miss) as u64) as usize;
                let n_low = rng.below(n_idx as u64 + 1) as usize;
                let len = BODY + 4 * (n_miss + n_idx.div_ceil(8) + n_low.div_ceil(3));
                let mut v: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                for (i, n) in [n_miss, n_idx, n_low, VERSION as usize].into_iter().enumerate() {
                    v[2 * i..2 * i + 2].copy_from_slice(&(n as u16).to_le_bytes());
                }
                v
            }
            // A valid stream with a few bytes changed.
            _ => {
                let mut v = valid[rng.below(valid.len() as u64) as usize].clone();
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(v.len() as u64) as usize;
                    v[i] ^= 1 << rng.below(8);
                }
                v
            }
        };
        match scratch.decompress(&input, &mut page) {
            Ok(()) => ok += 1,
            Err(_) => errors += 1,
        }
    }
    println!("malformed inputs: {ok} decoded to some page, {errors} refused");
    assert!(errors > 3000);
}

/// Host timing of both directions; run with `cargo test -p pager --release -- --ignored
/// --nocapture wkdm_host_speed`.
#[test]
#[ignore]
fn wkdm_host_speed() {
    use std::time::Instant;
    let mut scratch = Box::new(Scratch::new());
    let mut back = Box::new([0u8; PAGE_SIZE]);
    let mut lz4_out = vec![0u8; lz4_flex::block::get_maximum_output_size(PAGE_SIZE)];
    let rounds = 20_000u32;
    for (name, page) in pages() {
        let page = std::hint::black_box(page);
        let start = Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(scratch.compress(&page, MAX_SIZE));
        }
        let c = start.elapsed() / rounds;
        let bytes: Vec<u8> = scratch.compress(&page, MAX_SIZE).unwrap().into();
        let start = Instant::now();
        for _ in 0..rounds {
            scratch.decompress(std::hint::black_box(&bytes), &mut back).unwrap();
        }
        let d = start.elapsed() / rounds;
        let n = lz4_flex::block::compress_into(&page[..], &mut lz4_out).unwrap();
        let start = Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(lz4_flex::block::compress_into(&page[..], &mut lz4_out).unwrap());
        }
        let lc = start.elapsed() / rounds;
        let start = Instant::now();
        for _ in 0..rounds {
            lz4_flex::block::decompress_into(std::hint::black_box(&lz4_out[..n]), &mut back[..])
                .unwrap();
        }
        let ld = start.elapsed() / rounds;
        println!(
            "{name:>16}: wkdm {:>4} B comp {c:>8?} decomp {d:>8?} | lz4 {n:>4} B comp {lc:>8?} decomp {ld:>8?}",
            bytes.len()
        );
    }
}
