//! A driver's check of its device before it serves anyone: transfers of random sizes at random
//! sectors, each written, read back and compared, one at a time, each completion awaited on the
//! interrupt's endpoint.
//!
//! Then [`past_the_end`] checks that the device refuses a read past the end of the disk (the
//! server never sends one) with a device error, and that the driver recovers from it.
//!
//! Each request interrupts once: the check waits for that interrupt even when the completion
//! is already visible, takes the completion only after it, and acknowledges every interrupt
//! (`BlockDevice::interrupted`, then `irq_ack`), so the line is never left claimed and the count
//! of interrupts it returns is exact: a test holds it to two per transfer.

use blk_interface::device::{BlockDevice, Buffer, DeviceError, DeviceOp, DeviceRequest};
use tessera::{dma, events, println, syscall};

/// Runs the whole check on `disk`, whose interrupt signals `ep`, and reports it as driver
/// `driver`: [`run`] with `transfers` transfers of up to `max_transfer` bytes, then
/// [`past_the_end`]. Whether it passed (a failure is reported as `self-test FAILED`).
pub fn check<D: BlockDevice>(
    driver: &str,
    disk: &mut D,
    ep: usize,
    transfers: u64,
    max_transfer: usize,
) -> bool {
    let result = run(disk, ep, transfers, max_transfer).and_then(|interrupts| {
        println!(
            "{driver}: self-test: {transfers} transfers written, read back and checked, {interrupts} interrupts"
        );
        past_the_end(disk, ep)
    });
    match result {
        Ok((error, interrupts)) => {
            let plural = if interrupts == 1 { "" } else { "s" };
            println!(
                "{driver}: self-test: a read past the end failed ({error}, {interrupts} interrupt{plural}), and the disk serves again"
            );
            true
        }
        Err(e) => {
            println!("{driver}: self-test FAILED: {e}");
            false
        }
    }
}

/// Writes, reads back and checks `transfers` transfers of 1 sector to `max_transfer` bytes at
/// random sectors of `disk`, whose interrupt signals endpoint `ep`; the interrupts taken.
pub fn run<D: BlockDevice>(
    disk: &mut D,
    ep: usize,
    transfers: u64,
    max_transfer: usize,
) -> Result<u64, &'static str> {
    let (mem, region) = dma::alloc_buffer(max_transfer * 2).map_err(|_| "no DMA buffers")?;
    let (out, back) = mem.split_at_mut(max_transfer);
    let out_buf = Buffer { phys: region.phys as u64, virt: region.virt as u64, len: 0 };
    let back_buf = Buffer {
        phys: (region.phys + max_transfer) as u64,
        virt: (region.virt + max_transfer) as u64,
        len: 0,
    };
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ tessera::time_ns();
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let sector_size = disk.sector_size() as usize;
    let sectors = disk.capacity();
    let mut interrupts = 0;
    for _ in 0..transfers {
        let count = 1 + (next() % (max_transfer / sector_size) as u64) as usize;
        let len = count * sector_size;
        let sector = next() % (sectors - count as u64);
        for b in out[..len].iter_mut() {
            *b = next() as u8;
        }
        back[..len].fill(0);
        let buffer = Buffer { len: len as u32, ..out_buf };
        interrupts += done(io(disk, ep, DeviceRequest { op: DeviceOp::Write, sector, buffer })?)?;
        let buffer = Buffer { len: len as u32, ..back_buf };
        interrupts += done(io(disk, ep, DeviceRequest { op: DeviceOp::Read, sector, buffer })?)?;
        if out[..len] != back[..len] {
            return Err("a block read back differs from what was written");
        }
    }
    Ok(interrupts)
}

/// Sends a read of the sector just past the end of `disk` (whose interrupt signals `ep`)
/// straight to the device, which the block server never does: it must fail with a device
/// error (at once, if the driver checks the range itself, or at completion), and a transfer
/// after it (written, read back and checked) must succeed, the driver having recovered. The
/// error, and the interrupts the failed read took.
pub fn past_the_end<D: BlockDevice>(
    disk: &mut D,
    ep: usize,
) -> Result<(DeviceError, u64), &'static str> {
    let bytes = disk.sector_size() as usize;
    let (mem, region) = tessera::dma::alloc_buffer(2 * bytes).map_err(|_| "no DMA buffers")?;
    let buffer = Buffer { phys: region.phys as u64, virt: region.virt as u64, len: bytes as u32 };
    let past = DeviceRequest { op: DeviceOp::Read, sector: disk.capacity(), buffer };
    let (interrupts, result) = io(disk, ep, past)?;
    let Err(error) = result else {
        return Err("a read past the end of the disk succeeded");
    };
    // The device serves again: a sector written and read back.
    let (out, back) = mem.split_at_mut(bytes);
    out.fill(0x5a);
    let last = disk.capacity() - 1;
    done(io(disk, ep, DeviceRequest { op: DeviceOp::Write, sector: last, buffer })?)?;
    let back_buf =
        Buffer { phys: buffer.phys + bytes as u64, virt: buffer.virt + bytes as u64, ..buffer };
    done(io(disk, ep, DeviceRequest { op: DeviceOp::Read, sector: last, buffer: back_buf })?)?;
    if out != back {
        return Err("after the failed read, a sector read back differs from what was written");
    }
    Ok((error, interrupts))
}

/// The interrupts a request took, if it succeeded.
fn done((taken, result): (u64, Result<(), DeviceError>)) -> Result<u64, &'static str> {
    result.map_err(|_| "the device failed a request")?;
    Ok(taken)
}

/// One request, submitted and awaited on endpoint `ep`; the interrupts it took, and its
/// outcome (an error with no interrupt if the device refused it at once).
fn io<D: BlockDevice>(
    disk: &mut D,
    ep: usize,
    req: DeviceRequest,
) -> Result<(u64, Result<(), DeviceError>), &'static str> {
    let before = events::value(ep);
    let tag = match disk.submit(req) {
        Ok(tag) => tag,
        Err(e) => return Ok((0, Err(e))),
    };
    let mut taken = 0;
    let mut seen = before;
    loop {
        seen = events::wait(ep, seen, u64::MAX).map_err(|_| "the interrupt's endpoint closed")?;
        taken += 1;
        disk.interrupted();
        syscall::irq_ack(ep).map_err(|_| "irq_ack failed")?;
        if let Some((done, result)) = disk.complete() {
            if done != tag {
                return Err("a request completed that was not submitted");
            }
            return Ok((taken, result));
        }
    }
}
