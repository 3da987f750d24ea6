//! `virtio-blk`: the driver domain of a virtio-blk disk, on the `virtio-drivers` crate.
//!
//! The manifest grants it the disk (`devices = [{ disk = "NAME" }]`, `driver = true`); the
//! kernel maps the device's registers into it, binds the device's interrupt to one of its
//! endpoints and describes both in its control block (`abi::DeviceSlot`). The driver makes its
//! DMA memory with `dma_alloc`, brings the device up, and waits for completions on the
//! interrupt's endpoint, acknowledging each interrupt with `irq_ack` once it has taken the
//! completions: it never polls.
//!
//! What is implemented: the MMIO transport (RISC-V `virt`) and the PCI transport with MSI-X
//! (q35); with `--self-test N`, N transfers of random sizes at random sectors, each written,
//! read back and checked, one at a time, interrupt-driven; then serving the client domains the
//! manifest connects to it over the block protocol (`blk_interface`; the serving loop of
//! `blk_server::serve`, by way of `blk_domain::serve`), several requests in flight at the
//! device ([`disk`]). `--die-after N` makes it fault once it has
//! answered N requests (a test of its clients).

#![no_std]
#![no_main]

mod disk;

use blk_domain::serve::{self, ServeOptions};
use disk_sched::PolicyName;
use tessera::{Env, println};
use virtio_drivers::device::blk::{SECTOR_SIZE, VirtIOBlk};
use virtio_drivers::transport::Transport;
use virtio_hal::{dma, mmio, pci};

tessera::main!(main);

/// Largest transfer of the self-test.
const MAX_TRANSFER: usize = 64 << 10;

fn main(env: Env) -> i32 {
    let mut transfers = 0u64;
    let mut die_after = None;
    let (mut scheduler, mut anticipate) = (None, true);
    let mut args = env.args;
    while let Some(a) = args.next() {
        match a {
            "--self-test" => transfers = args.next().and_then(|n| n.parse().ok()).unwrap_or(100),
            "--die-after" => die_after = args.next().and_then(|n| n.parse().ok()),
            "--scheduler" => match args.next().and_then(PolicyName::parse) {
                Some(p) => scheduler = Some(p),
                None => {
                    println!("virtio-blk: {}", serve::SCHEDULER_USAGE);
                    return 2;
                }
            },
            "--no-anticipation" => anticipate = false,
            _ => {
                println!("virtio-blk: unknown option {a}");
                return 2;
            }
        }
    }
    let slot = tessera::dcb().devices[0];
    dma::set_device(slot);
    if let Err(e) = dma::init_pool(64 << 10) {
        println!("virtio-blk: no DMA memory: {e:?}");
        return 1;
    }
    match slot.kind {
        abi::device_kind::NODE => match mmio::transport(&slot) {
            Some(t) => run(t, &slot, transfers, die_after, (scheduler, anticipate)),
            None => {
                println!("virtio-blk: the granted window holds no virtio block device");
                1
            }
        },
        abi::device_kind::PCI => match pci::transport(&slot) {
            Some(t) => run(t, &slot, transfers, die_after, (scheduler, anticipate)),
            None => {
                println!("virtio-blk: the granted PCI function is no usable virtio device");
                1
            }
        },
        _ => {
            println!("virtio-blk: no device granted");
            1
        }
    }
}

/// Brings the device up over transport `t`, runs the self-test if asked, then serves the
/// clients the manifest connects (if any).
fn run<T: Transport>(
    t: T,
    slot: &abi::DeviceSlot,
    transfers: u64,
    die_after: Option<u64>,
    (scheduler, anticipate): (Option<PolicyName>, bool),
) -> i32 {
    let mut blk = match VirtIOBlk::<dma::TesseraHal, _>::new(t) {
        Ok(blk) => blk,
        Err(e) => {
            println!("virtio-blk: the device would not start: {e:?}");
            return 1;
        }
    };
    blk.enable_interrupts();
    println!(
        "virtio-blk: {} sectors of {} bytes, queue of {}, interrupt on endpoint {}",
        blk.capacity(),
        SECTOR_SIZE,
        blk.virt_queue_size(),
        slot.event
    );
    let disk = match disk::VirtioDisk::new(blk) {
        Ok(disk) => disk,
        Err(e) => {
            println!("virtio-blk: no DMA memory for request headers: {e:?}");
            return 1;
        }
    };
    let options = ServeOptions {
        driver: "virtio-blk",
        device: 0,
        irq: slot.event as usize,
        die_after,
        max_transfer: MAX_TRANSFER as u32,
        scheduler,
        anticipate,
    };
    serve::run(disk, transfers, options)
}
