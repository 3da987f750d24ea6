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
//! manifest connects to it over the block protocol (`drivers/blk`, `blk_domain::serve`), several
//! requests in flight at the device ([`disk`]). `--die-after N` makes it fault once it has
//! answered N requests (a test of its clients).

#![no_std]
#![no_main]

mod disk;
mod dma;
mod mmio;
mod pci;

use blk_domain::serve::{self, ServeOptions};
use tessera::{Env, events, println, syscall};
use virtio_drivers::device::blk::{BlkReq, BlkResp, SECTOR_SIZE, VirtIOBlk};
use virtio_drivers::transport::Transport;

tessera::main!(main);

/// Largest transfer of the self-test.
const MAX_TRANSFER: usize = 64 << 10;

fn main(env: Env) -> i32 {
    let mut transfers = 0u64;
    let mut die_after = None;
    let mut args = env.args;
    while let Some(a) = args.next() {
        match a {
            "--self-test" => transfers = args.next().and_then(|n| n.parse().ok()).unwrap_or(100),
            "--die-after" => die_after = args.next().and_then(|n| n.parse().ok()),
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
            Some(t) => run(t, &slot, transfers, die_after),
            None => {
                println!("virtio-blk: the granted window holds no virtio block device");
                1
            }
        },
        abi::device_kind::PCI => match pci::transport(&slot) {
            Some(t) => run(t, &slot, transfers, die_after),
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
fn run<T: Transport>(t: T, slot: &abi::DeviceSlot, transfers: u64, die_after: Option<u64>) -> i32 {
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
    if transfers > 0 {
        match self_test(&mut blk, slot.event as usize, transfers) {
            Ok(interrupts) => println!(
                "virtio-blk: self-test: {transfers} transfers written, read back and checked, {interrupts} interrupts"
            ),
            Err(e) => {
                println!("virtio-blk: self-test FAILED: {e}");
                return 1;
            }
        }
    }
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
    };
    serve::serve(disk, options)
}

/// Writes, reads back and checks `transfers` transfers of random sizes at random sectors,
/// one at a time, each completion awaited on the interrupt's endpoint `ep`; the interrupts
/// taken.
fn self_test<T: Transport>(
    blk: &mut VirtIOBlk<dma::TesseraHal, T>,
    ep: usize,
    transfers: u64,
) -> Result<u64, &'static str> {
    let buf_va = tessera::dma::alloc(MAX_TRANSFER * 2 + 4096).map_err(|_| "no DMA buffers")?.virt;
    // SAFETY: the DMA stretch was just made for this test, read-write, of this length; nothing
    // else refers to it.
    let mem =
        unsafe { core::slice::from_raw_parts_mut(buf_va as *mut u8, MAX_TRANSFER * 2 + 4096) };
    let (out, rest) = mem.split_at_mut(MAX_TRANSFER);
    let (back, hdr) = rest.split_at_mut(MAX_TRANSFER);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ tessera::time_ns();
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let sectors = blk.capacity();
    let mut interrupts = 0;
    for _ in 0..transfers {
        let count = 1 + (next() % (MAX_TRANSFER / SECTOR_SIZE) as u64) as usize;
        let len = count * SECTOR_SIZE;
        let sector = next() % (sectors - count as u64);
        for b in out[..len].iter_mut() {
            *b = next() as u8;
        }
        interrupts += io(blk, ep, hdr, true, sector as usize, &mut out[..len])?;
        interrupts += io(blk, ep, hdr, false, sector as usize, &mut back[..len])?;
        if out[..len] != back[..len] {
            return Err("a block read back differs from what was written");
        }
    }
    Ok(interrupts)
}

/// One request, submitted and awaited on endpoint `ep`; the interrupts it took (0 if the
/// completion was there before the wait).
fn io<T: Transport>(
    blk: &mut VirtIOBlk<dma::TesseraHal, T>,
    ep: usize,
    hdr: &mut [u8],
    write: bool,
    sector: usize,
    buf: &mut [u8],
) -> Result<u64, &'static str> {
    let (req_bytes, resp_bytes) = hdr.split_at_mut(64);
    // SAFETY: `BlkReq` and `BlkResp` are plain structures the device reads and writes; both
    // live in DMA memory that stays alive and untouched by anything else until the request
    // completes below.
    let (req, resp) = unsafe {
        (
            &mut *(req_bytes.as_mut_ptr() as *mut BlkReq),
            &mut *(resp_bytes.as_mut_ptr() as *mut BlkResp),
        )
    };
    let before = events::value(ep);
    // SAFETY: `req`, `buf` and `resp` stay valid and unmoved until the completion is taken.
    let token = unsafe {
        if write {
            blk.write_blocks_nb(sector, req, buf, resp)
        } else {
            blk.read_blocks_nb(sector, req, buf, resp)
        }
    }
    .map_err(|_| "the device refused a request")?;
    // Each request interrupts once: wait for that interrupt even if the completion is already
    // visible (it may have been delivered before the wait), and acknowledge every one, so the
    // line is never left claimed.
    let mut taken = 0;
    let mut seen = before;
    loop {
        seen = events::wait(ep, seen, u64::MAX).map_err(|_| "the interrupt's endpoint closed")?;
        taken += 1;
        blk.ack_interrupt();
        syscall::irq_ack(ep).map_err(|_| "irq_ack failed")?;
        if blk.peek_used() == Some(token) {
            break;
        }
    }
    // SAFETY: the same buffers as submitted, and the token the device returned.
    unsafe {
        if write {
            blk.complete_write_blocks(token, req, buf, resp)
        } else {
            blk.complete_read_blocks(token, req, buf, resp)
        }
    }
    .map_err(|_| "the device failed a request")?;
    Ok(taken)
}
