//! Host tests of the in-memory disk.

extern crate std;

use std::vec::Vec;

use blk_interface::device::{BlockDevice, Buffer, DeviceError, DeviceOp, DeviceRequest};

use crate::mem_disk::{DmaMemory, MemDisk, Rng};

const SS: u32 = 512;
const VIRT: u64 = 0x40_0000_0000;
const PHYS: u64 = 0x8000_0000;

// --- The in-memory disk. ---

#[test]
fn mem_disk_completes_out_of_order_and_deterministically() {
    let order = |seed| {
        let mut d = MemDisk::new(SS, 64, 8, seed, DmaMemory::new(VIRT, PHYS, 8 * 512));
        let tags: Vec<_> = (0..8u64)
            .map(|i| {
                let buffer = Buffer { virt: VIRT + i * 512, phys: PHYS + i * 512, len: 512 };
                d.submit(DeviceRequest { op: DeviceOp::Read, sector: i, buffer }).unwrap()
            })
            .collect();
        let flush = DeviceRequest { op: DeviceOp::Flush, sector: 0, buffer: Buffer::default() };
        assert_eq!(d.submit(flush), Err(DeviceError::Full));
        let done: Vec<_> =
            core::iter::from_fn(|| d.complete()).map(|(t, r)| (t, r.is_ok())).collect();
        assert_eq!(done.len(), tags.len());
        assert!(d.stats().out_of_order > 0);
        done
    };
    assert_eq!(order(1), order(1));
    assert_ne!(order(1), order(2));
}

#[test]
fn mem_disk_refuses_inconsistent_buffers() {
    let mut d = MemDisk::new(SS, 64, 4, 1, DmaMemory::new(VIRT, PHYS, 4096));
    let bad = [
        Buffer { virt: VIRT, phys: PHYS + 512, len: 512 }, // addresses disagree
        Buffer { virt: VIRT + 4096, phys: PHYS + 4096, len: 512 }, // outside the memory
        Buffer { virt: VIRT - 512, phys: PHYS - 512, len: 512 },
    ];
    for buffer in bad {
        let tag = d.submit(DeviceRequest { op: DeviceOp::Write, sector: 0, buffer }).unwrap();
        assert_eq!(d.complete(), Some((tag, Err(DeviceError::Invalid))));
    }
    let buffer = Buffer { virt: VIRT, phys: PHYS, len: 512 };
    let tag = d.submit(DeviceRequest { op: DeviceOp::Read, sector: 64, buffer }).unwrap();
    assert_eq!(d.complete(), Some((tag, Err(DeviceError::Invalid))));
    let odd = Buffer { len: 100, ..buffer };
    assert_eq!(
        d.submit(DeviceRequest { op: DeviceOp::Read, sector: 0, buffer: odd }),
        Err(DeviceError::Invalid)
    );
}

#[test]
fn the_generator_is_splitmix64() {
    // The sequences that apps wrote to disk and that the host replays: SplitMix64 with its
    // state starting at the seed (the reference's outputs for seeds 0 and 1234567).
    let first = |seed| {
        let mut rng = Rng::new(seed);
        [rng.next_u64(), rng.next_u64(), rng.next_u64()]
    };
    assert_eq!(first(0), [0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4, 0x06c4_5d18_8009_454f]);
    assert_eq!(
        first(1_234_567),
        [0x599e_d017_fb08_fc85, 0x2c73_f084_5854_0fa5, 0x883e_bce5_a3f2_7c77]
    );
}
