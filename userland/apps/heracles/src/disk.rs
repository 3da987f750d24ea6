//! [`StreamDisk`]: the pager's block device, a window of the disk reached through this
//! domain's own session of the block protocol, so every page the pager reads or writes is
//! scheduled (and charged) as this domain's disk stream. Synchronous: one request at a time,
//! each waited for (the faulting thread waits; the domain's other threads run meanwhile).

use alloc::rc::Rc;
use core::cell::Cell;

use blk::client::Client;
use blk::protocol::{Request, SessionInfo};
use tessera::channel::{self, Receiver, Sender};
use vmm::block::{BlockDevice, DeviceError};

use crate::area::DataArea;

/// What went through the session.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamCounts {
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Nanoseconds spent waiting for responses.
    pub wait_ns: u64,
}

/// A window of the disk over a block session; see the [module](self).
pub struct StreamDisk {
    tx: Sender,
    rx: Receiver,
    client: Client,
    info: SessionInfo,
    area: DataArea,
    /// The window's first sector and its length in sectors.
    first: u64,
    sectors: u64,
    counts: Rc<Cell<StreamCounts>>,
}

impl StreamDisk {
    /// Opens a session over the channels `NAME-req` and `NAME-resp` and takes the window of
    /// `len` bytes at byte `at` of the disk.
    pub fn open(name: &str, at: u64, len: u64) -> Result<StreamDisk, &'static str> {
        let mut req: heapless::String<32> = heapless::String::new();
        let mut resp: heapless::String<32> = heapless::String::new();
        for (s, suffix) in [(&mut req, "-req"), (&mut resp, "-resp")] {
            s.push_str(name).and_then(|()| s.push_str(suffix)).map_err(|_| "name too long")?;
        }
        let tx = channel::open_sender(&req).ok_or("no request channel in the manifest")?;
        let rx = channel::open_receiver(&resp).ok_or("no response channel in the manifest")?;
        let mut client = Client::new(1);
        let open = client.open().map_err(|_| "the client refused the open")?;
        let mut disk = StreamDisk {
            tx,
            rx,
            client,
            info: SessionInfo::default(),
            area: DataArea::new(0, 0),
            first: 0,
            sectors: 0,
            counts: Rc::default(),
        };
        disk.call(open).map_err(|_| "the driver refused the open")?;
        let info = disk.client.session().ok_or("no session after the open")?;
        let ss = u64::from(info.sector_size.max(1));
        if !at.is_multiple_of(ss) || !len.is_multiple_of(ss) {
            return Err("the swap area is not whole sectors");
        }
        if at.checked_add(len).is_none_or(|end| end > info.capacity * ss) {
            return Err("the swap area does not fit on the disk");
        }
        if info.area_len < u64::from(info.sector_size) {
            return Err("the data area is smaller than a sector");
        }
        disk.info = info;
        disk.area = DataArea::new(info.area_base, info.area_len);
        disk.first = at / ss;
        disk.sectors = len / ss;
        Ok(disk)
    }

    /// What went through the session, kept up to date (the pager owns the disk once bound,
    /// so the app keeps this handle to read them).
    pub fn counts(&self) -> Rc<Cell<StreamCounts>> {
        self.counts.clone()
    }

    fn count(&self, f: impl FnOnce(&mut StreamCounts)) {
        let mut c = self.counts.get();
        f(&mut c);
        self.counts.set(c);
    }

    /// Sends `req` and waits for its response.
    fn call(&mut self, req: Request) -> Result<(), DeviceError> {
        let start = tessera::time_ns();
        self.tx.send(&req.encode()).map_err(|_| DeviceError::Io)?;
        let mut buf = [0u8; 64];
        let n = self.rx.recv(&mut buf).map_err(|_| DeviceError::Io)?;
        let done = self.client.on_response(&buf[..n]).map_err(|_| DeviceError::Io)?;
        let waited = tessera::time_ns().saturating_sub(start);
        self.count(|c| c.wait_ns += waited);
        done.status.map_err(|_| DeviceError::Io)
    }

    /// The longest transfer: the driver's limit and the data area, whole sectors.
    fn chunk(&self) -> usize {
        let ss = self.info.sector_size as usize;
        let most = (self.info.max_transfer as usize).min(self.area.len());
        (most / ss).max(1) * ss
    }

    /// The disk sector of window sector `sector` for `len` bytes, if inside the window.
    fn place(&self, sector: u64, len: usize) -> Result<u64, DeviceError> {
        let ss = self.info.sector_size as usize;
        let count = (len / ss) as u64;
        if !len.is_multiple_of(ss) || sector.checked_add(count).is_none_or(|e| e > self.sectors) {
            return Err(DeviceError::OutOfRange);
        }
        Ok(self.first + sector)
    }
}

impl BlockDevice for StreamDisk {
    fn sector_size(&self) -> usize {
        self.info.sector_size as usize
    }

    fn capacity(&self) -> u64 {
        self.sectors
    }

    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let mut at = self.place(sector, buf.len())?;
        let (chunk, ss) = (self.chunk(), self.info.sector_size as u64);
        for part in buf.chunks_mut(chunk) {
            let req = self.client.read(at, 0, part.len() as u32).map_err(|_| DeviceError::Io)?;
            self.call(req)?;
            part.copy_from_slice(self.area.prefix(part.len()));
            self.count(|c| {
                c.reads += 1;
                c.bytes += part.len() as u64;
            });
            at += part.len() as u64 / ss;
        }
        Ok(())
    }

    fn write(&mut self, sector: u64, data: &[u8]) -> Result<(), DeviceError> {
        let mut at = self.place(sector, data.len())?;
        let (chunk, ss) = (self.chunk(), self.info.sector_size as u64);
        for part in data.chunks(chunk) {
            self.area.prefix(part.len()).copy_from_slice(part);
            let req = self.client.write(at, 0, part.len() as u32).map_err(|_| DeviceError::Io)?;
            self.call(req)?;
            self.count(|c| {
                c.writes += 1;
                c.bytes += part.len() as u64;
            });
            at += part.len() as u64 / ss;
        }
        Ok(())
    }
}
