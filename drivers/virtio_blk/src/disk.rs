//! The virtio-blk device as a [`BlockDevice`] of the block protocol's driver side: requests
//! go to the virtqueue without waiting (`read_blocks_nb`, `write_blocks_nb`), completions are
//! taken after the interrupt.
//!
//! Each request uses three descriptors (header, data, status), so as many requests are in
//! flight as a third of the queue holds; their headers live in DMA memory, one pair per tag.
//! A flush goes to the device only when nothing else is in flight (else the server queues it
//! and submits it again after a completion); `virtio-drivers` offers no non-blocking flush,
//! so it is waited for at once, and completed on the next [`BlockDevice::complete`].

use blk_interface::device::{BlockDevice, DeviceError, DeviceOp, DeviceRequest, Tag};
use virtio_drivers::device::blk::{BlkReq, BlkResp, SECTOR_SIZE, VirtIOBlk};
use virtio_drivers::transport::Transport;

use tessera::dma;

use virtio_hal::dma::TesseraHal;

/// A request at the device.
#[derive(Clone, Copy)]
struct InFlight {
    token: u16,
    op: DeviceOp,
    virt: u64,
    len: u32,
    /// The buffer is the tag's stand-in for a lent frame (see `virtio_hal::dma`).
    lent: bool,
}

/// One tag's request header and status, in DMA memory.
#[repr(C, align(64))]
struct Headers {
    req: BlkReq,
    resp: BlkResp,
}

/// The most requests in flight at once (the server's slots).
pub const MAX_TAGS: usize = 16;

/// A virtio-blk device behind the block protocol.
pub struct VirtioDisk<T: Transport> {
    blk: VirtIOBlk<TesseraHal, T>,
    tags: [Option<InFlight>; MAX_TAGS],
    slots: usize,
    headers: *mut Headers,
    /// A flush done, to report on the next `complete`.
    flushed: Option<(Tag, Result<(), DeviceError>)>,
}

impl<T: Transport> VirtioDisk<T> {
    /// Wraps `blk`, whose interrupts are enabled, with headers for its requests in DMA memory.
    pub fn new(mut blk: VirtIOBlk<TesseraHal, T>) -> Result<Self, abi::SysError> {
        blk.enable_interrupts();
        let slots = (usize::from(blk.virt_queue_size()) / 3).clamp(1, MAX_TAGS);
        virtio_hal::dma::init_stand_ins(slots)?;
        let headers = dma::alloc(slots * size_of::<Headers>())?.virt as *mut Headers;
        for i in 0..slots {
            // SAFETY: the DMA stretch just made holds `slots` zeroed, aligned `Headers`; nothing
            // else refers to it.
            unsafe {
                headers.add(i).write(Headers { req: BlkReq::default(), resp: BlkResp::default() })
            };
        }
        Ok(VirtioDisk { blk, tags: [None; MAX_TAGS], slots, headers, flushed: None })
    }

    /// The request header and status of `tag`.
    fn headers(&mut self, tag: usize) -> (&mut BlkReq, &mut BlkResp) {
        // SAFETY: `tag` is below `slots`; each tag's headers are used by one request at a
        // time, and only through this borrow of the disk.
        let h = unsafe { &mut *self.headers.add(tag) };
        (&mut h.req, &mut h.resp)
    }
}

/// The data buffer of a request: the client's data area, in the driver's DMA memory, or the
/// tag's stand-in page for a lent frame.
///
/// # Safety
/// `virt` and `len` name memory of the driver that stays mapped and is not otherwise
/// borrowed while the request is at the device (the server checked the range lies in a data
/// area; a stand-in is its tag's alone).
unsafe fn buffer<'a>(virt: u64, len: u32) -> &'a mut [u8] {
    // SAFETY: as the function's contract says.
    unsafe { core::slice::from_raw_parts_mut(virt as *mut u8, len as usize) }
}

impl<T: Transport> BlockDevice for VirtioDisk<T> {
    fn sector_size(&self) -> u32 {
        SECTOR_SIZE as u32
    }

    fn capacity(&self) -> u64 {
        self.blk.capacity()
    }

    fn max_in_flight(&self) -> usize {
        self.slots
    }

    fn submit(&mut self, req: DeviceRequest) -> Result<Tag, DeviceError> {
        // A flush done but not yet reported holds its tag until `complete` gives it back (the
        // server still has it in flight): no other request may take it meanwhile.
        let flushing = self.flushed.map(|(t, _)| usize::from(t.0));
        let tag = (0..self.slots)
            .find(|&t| self.tags[t].is_none() && Some(t) != flushing)
            .ok_or(DeviceError::Full)?;
        if req.op == DeviceOp::Flush {
            if self.tags.iter().any(Option::is_some) || self.flushed.is_some() {
                return Err(DeviceError::Full);
            }
            let result = self.blk.flush().map_err(|_| DeviceError::Io);
            self.flushed = Some((Tag(tag as u16), result));
            return Ok(Tag(tag as u16));
        }
        let (mut virt, len) = (req.buffer.virt, req.buffer.len);
        // A lent frame (the driver has no mapping of it, `virt` 0): through the tag's stand-in,
        // which the DMA layer translates to the frame's address for this request.
        let lent = virt == 0;
        if lent {
            let standin = virtio_hal::dma::lend_through(tag, req.buffer.phys, len as usize);
            virt = standin.ok_or(DeviceError::Invalid)?.as_ptr() as *mut u8 as u64;
        }
        let sector = req.sector as usize;
        let (r, s) = self.headers(tag);
        let (r, s): (*mut BlkReq, *mut BlkResp) = (r, s);
        // SAFETY: the headers of a free tag and a buffer in a client's data area (DMA memory)
        // or the tag's stand-in for a lent frame, all untouched until the request completes in
        // `complete`.
        let token = unsafe {
            let buf = buffer(virt, len);
            match req.op {
                DeviceOp::Read => self.blk.read_blocks_nb(sector, &mut *r, buf, &mut *s),
                _ => self.blk.write_blocks_nb(sector, &mut *r, buf, &mut *s),
            }
        }
        .map_err(|_| {
            if lent {
                virtio_hal::dma::end_lent(tag);
            }
            DeviceError::Invalid
        })?;
        self.tags[tag] = Some(InFlight { token, op: req.op, virt, len, lent });
        Ok(Tag(tag as u16))
    }

    fn complete(&mut self) -> Option<(Tag, Result<(), DeviceError>)> {
        if let Some(done) = self.flushed.take() {
            return Some(done);
        }
        let token = self.blk.peek_used()?;
        let tag = (0..self.slots).find(|&t| self.tags[t].is_some_and(|f| f.token == token))?;
        let f = self.tags[tag].take()?;
        let (r, s) = self.headers(tag);
        let (r, s): (*mut BlkReq, *mut BlkResp) = (r, s);
        // SAFETY: the same headers and buffer as submitted with this token.
        let result = unsafe {
            let buf = buffer(f.virt, f.len);
            match f.op {
                DeviceOp::Read => self.blk.complete_read_blocks(token, &*r, buf, &mut *s),
                _ => self.blk.complete_write_blocks(token, &*r, buf, &mut *s),
            }
        };
        if f.lent {
            virtio_hal::dma::end_lent(tag);
        }
        Some((Tag(tag as u16), result.map_err(|_| DeviceError::Io)))
    }

    fn interrupted(&mut self) {
        // Reads and clears the interrupt status (the MMIO transport needs it; on PCI with
        // MSI-X it is a harmless read).
        self.blk.ack_interrupt();
    }
}
