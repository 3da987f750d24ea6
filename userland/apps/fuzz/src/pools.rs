//! The seeded random source and the pools of boundary values arguments are drawn from.

use abi::{IMAGE_BASE, IMAGE_SLOT, PAGE_SIZE, STRETCH_BASE, USER_BASE, USER_END};

use crate::own::Own;
use crate::spec::{CONSOLE_MAX, STRETCH_MAX};

/// xorshift64, seeded through splitmix64 so that small seeds still start far apart.
pub struct Rng(u64);

impl Rng {
    /// The generator for `seed`: seeded with one splitmix64 step, written out here rather than
    /// taken from `rand_xoshiro` as elsewhere, because the crate's version moves the CPU canary's
    /// kept share beside the fuzzers (`cargo xtask bench canary`: 99.53% -> 99.32%).
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True once in `n` times.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// One element of `pool`.
    pub fn pick<T: Copy>(&mut self, pool: &[T]) -> T {
        pool[self.below(pool.len())]
    }
}

/// Plain boundary numbers.
pub const NUMBERS: [usize; 10] = [
    0,
    1,
    7,
    4095,
    4096,
    4097,
    u32::MAX as usize,
    usize::MAX,
    usize::MAX - 4095,
    i64::MIN as usize,
];

/// Kernel addresses: the kernel image, and the start of the kernel's direct map.
pub const KERNEL: [usize; 2] = [0xffff_ffff_c020_0000, 0xffff_ffc0_8000_0000];

/// The lower half below the user range: low pages, RAM's physical address, `USER_BASE`'s edge.
pub const LOWER: [usize; 5] = [0x10, 0x1000, 0x8020_0000, USER_BASE - PAGE_SIZE, USER_BASE - 1];

/// Around `USER_END`.
pub const AROUND_END: [usize; 5] =
    [USER_END - PAGE_SIZE, USER_END - 8, USER_END - 1, USER_END, USER_END + PAGE_SIZE];

/// Sizes and lengths.
pub const SIZES: [usize; 25] = [
    0,
    1,
    7,
    8,
    256,
    CONSOLE_MAX - 1,
    CONSOLE_MAX,
    CONSOLE_MAX + 1,
    4095,
    4096,
    4097,
    3 * 4096,
    64 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    STRETCH_MAX - 1,
    STRETCH_MAX,
    STRETCH_MAX + 1,
    u32::MAX as usize,
    1 << 32,
    usize::MAX,
    usize::MAX - 4095,
    i64::MIN as usize,
    i64::MAX as usize,
];

/// Small offsets added to an address now and then.
const JITTER: [isize; 6] = [-1, 1, -8, 8, -4096, 4096];

/// Domain ids beyond the manifest's: 32-bit edges, and ids that truncate to 0 and 1.
const HUGE_IDS: [usize; 6] = [64, 4096, u32::MAX as usize, 1 << 32, (1 << 32) + 1, usize::MAX];

/// Image slot `i`'s base.
pub fn slot(i: usize) -> usize {
    IMAGE_BASE + i * IMAGE_SLOT
}

/// An address from any pool.
pub fn addr(rng: &mut Rng, own: &Own) -> usize {
    let a = match rng.below(10) {
        0 => rng.pick(&NUMBERS),
        1 => rng.pick(&KERNEL),
        2 => rng.pick(&LOWER),
        3 => rng.pick(&AROUND_END),
        4 => slot(rng.below(4)) + rng.below(4) * PAGE_SIZE,
        5 => rng.pick(&own.addrs),
        6 => match own.created() {
            [] => STRETCH_BASE + rng.below(64) * PAGE_SIZE,
            created => {
                let c = rng.pick(created);
                let end = c.base + c.pages * PAGE_SIZE;
                rng.pick(&[c.base, c.base + PAGE_SIZE, end - 8, end])
            }
        },
        7 => rng.pick(&[own.dcb, own.channel.unwrap_or(STRETCH_BASE), STRETCH_BASE]),
        8 => USER_BASE + rng.below((USER_END - USER_BASE) / PAGE_SIZE) * PAGE_SIZE,
        _ => rng.next() as usize,
    };
    if rng.one_in(4) { a.wrapping_add_signed(rng.pick(&JITTER)) } else { a }
}

/// An address outside the fuzzer's own memory.
pub fn foreign(rng: &mut Rng, own: &Own) -> usize {
    loop {
        let a = match rng.below(5) {
            0 => rng.pick(&KERNEL),
            1 => rng.pick(&LOWER),
            2 => rng.pick(&AROUND_END),
            3 => slot(rng.below(4)) + rng.below(4) * PAGE_SIZE,
            _ => rng.pick(&NUMBERS),
        };
        if !own.may_be_own(a) {
            return a;
        }
    }
}

/// A stretch base: mostly addresses where stretches start (its own, its managed ones, other
/// domains').
pub fn base(rng: &mut Rng, own: &Own) -> usize {
    match rng.below(10) {
        0..=2 if !own.created().is_empty() => rng.pick(own.created()).base,
        3 if !own.mem.managed().is_empty() => rng.pick(own.mem.managed()).base,
        3 | 4 => slot(rng.below(4)) + rng.below(4) * PAGE_SIZE,
        5 | 6 => rng.pick(&[own.dcb, own.channel.unwrap_or(own.dcb), own.slot, slot(own.id + 1)]),
        _ => addr(rng, own),
    }
}

/// A size or length.
pub fn size(rng: &mut Rng) -> usize {
    let s = rng.pick(&SIZES);
    if rng.one_in(8) { s.wrapping_add_signed(rng.pick(&JITTER)) } else { s }
}

/// A rights value: valid ones (0..=0xf) half the time, else 0x10..=0x20 or a huge one.
pub fn rights(rng: &mut Rng) -> usize {
    match rng.below(8) {
        0..=3 => rng.below(0x10),
        4..=6 => rng.below(0x21),
        _ => rng.pick(&NUMBERS),
    }
}

/// A domain id: below `own.domains + 2` mostly (by default 0..=5: every domain of
/// `tests/manifests/fuzz.toml`, the full `--fill-then-wait` one among them, and ids no domain
/// has), sometimes a huge one.
pub fn domain(rng: &mut Rng, own: &Own) -> usize {
    if rng.one_in(4) { rng.pick(&HUGE_IDS) } else { rng.below(own.domains + 2) }
}

/// An endpoint number: 0..=3 (where the endpoints of a few channels are) half the time,
/// else 0..=40 or a huge one.
pub fn endpoint(rng: &mut Rng) -> usize {
    match rng.below(4) {
        0 | 1 => rng.below(4),
        2 => rng.below(41),
        _ => rng.pick(&[usize::MAX, 1 << 32, u32::MAX as usize, 1 << 63]),
    }
}

/// A value from any pool, for registers a call ignores.
pub fn any(rng: &mut Rng, own: &Own) -> usize {
    match rng.below(6) {
        0 => size(rng),
        1 => rights(rng),
        2 => domain(rng, own),
        3 => endpoint(rng),
        _ => addr(rng, own),
    }
}

/// A call number that is no call: 0, 11..=20, 999, `u64::MAX`, and numbers whose low 32 bits
/// name a call; whichever of them `abi::Call::from_number` knows are left out.
pub fn unknown_call(rng: &mut Rng) -> usize {
    const CANDIDATES: [usize; 17] = [
        0,
        11,
        12,
        13,
        14,
        15,
        16,
        17,
        18,
        19,
        20,
        999,
        usize::MAX,
        (1 << 32) | 1,
        (1 << 32) | 6,
        (1 << 63) | 8,
        usize::MAX - 9,
    ];
    loop {
        let n = rng.pick(&CANDIDATES);
        if abi::Call::from_number(n).is_none() {
            return n;
        }
    }
}
