//! [`StreamDisk`]: the pager's block device, a window of the disk reached through this
//! domain's own session of the block protocol, so every page the pager reads or writes is
//! scheduled (and charged) as this domain's disk stream. Synchronous: one request at a time,
//! each waited for (the faulting thread waits; the domain's other threads run meanwhile). A
//! request the driver fails is a [`DeviceError::Io`], which the pager retries after a sleep.
//!
//! **Pages without a copy.** A transfer of one whole page from or into a page of a managed
//! stretch of the domain's (the paged stretch driver's window page, where a page is filled
//! before it is mapped and read before it is written back) does not cross the data area: the
//! page's frame is lent to the driver for the request (`frame_lend`: for a read the page
//! leaves the domain's view until the driver returns the loan, for a write it stays
//! read-only), and a ReadLoan or WriteLoan names the loan, so the device reads or writes the
//! frame itself. Any other buffer, or a page the kernel will not lend, goes through the data
//! area by one copy, as does everything once the driver refuses a loan
//! ([`BlkError::BadLoan`]: it takes none).

use alloc::rc::Rc;
use core::cell::Cell;

use crate::session::{Session, SessionError};
use abi::{PAGE_SIZE, loan_access};
use blk_interface::protocol::{BlkError, Request, SessionInfo};
use pager::block::{DeviceError, SyncDisk};

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
    /// Nanoseconds slept before retries of failed requests, by this domain's clock.
    pub retry_wait_ns: u64,
    /// Requests that moved a lent frame (no copy through the data area).
    pub lent: u64,
}

/// A window of the disk over a block session; see the [module](self).
pub struct StreamDisk {
    session: Session,
    info: SessionInfo,
    /// The window's first sector and its length in sectors.
    first: u64,
    sectors: u64,
    counts: Rc<Cell<StreamCounts>>,
    /// Whether pages are lent to the driver (until it refuses a loan).
    lending: bool,
}

impl StreamDisk {
    /// Opens a session over the channels `NAME-req` and `NAME-resp` and takes the window of
    /// `len` bytes at byte `at` of the disk.
    pub fn open(name: &str, at: u64, len: u64) -> Result<StreamDisk, &'static str> {
        let mut session = Session::connect(name, 1).map_err(|e| match e {
            SessionError::NameTooLong => "name too long",
            _ => "no request or response channel in the manifest",
        })?;
        let info = session.open().map_err(|_| "the driver refused the open")?;
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
        Ok(StreamDisk {
            session,
            info,
            first: at / ss,
            sectors: len / ss,
            counts: Rc::default(),
            lending: true,
        })
    }

    /// The same, copying every page through the data area: no frame is lent to the driver
    /// (the copies the loans save, measured by `cargo xtask bench paging`).
    pub fn without_loans(mut self) -> StreamDisk {
        self.lending = false;
        self
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
        let done = self.session.call(req).map_err(|_| DeviceError::Io)?;
        let waited = tessera::time_ns().saturating_sub(start);
        self.count(|c| c.wait_ns += waited);
        done.status.map_err(|_| DeviceError::Io)
    }

    /// Moves the page at `va` (a whole page, page-aligned) to or from disk sector `at` through
    /// a loan of its frame: `None` if it could not be lent (the caller copies it through the
    /// data area instead).
    fn lent(&mut self, at: u64, va: usize, write: bool) -> Option<Result<(), DeviceError>> {
        if !self.lending || !va.is_multiple_of(PAGE_SIZE) {
            return None;
        }
        let (driver, endpoint) = self.session.driver();
        let access = if write { loan_access::DEVICE_READS } else { loan_access::DEVICE_WRITES };
        let loan = tessera::syscall::frame_lend(va, driver, endpoint, access).ok()?;
        let len = PAGE_SIZE as u32;
        let client = self.session.client();
        let req =
            if write { client.write_loan(at, loan, len) } else { client.read_loan(at, loan, len) };
        let start = tessera::time_ns();
        let done = match req {
            Ok(req) => self.session.call(req),
            Err(e) => Err(SessionError::Refused(e)),
        };
        let waited = tessera::time_ns().saturating_sub(start);
        self.count(|c| c.wait_ns += waited);
        match done.map(|d| d.status) {
            Ok(Ok(())) => {
                self.count(|c| c.lent += 1);
                Some(Ok(()))
            }
            Ok(Err(BlkError::BadLoan)) => {
                // The driver takes no loans: this one comes back, and the rest go by copy.
                let _ = tessera::syscall::frame_return(loan);
                self.lending = false;
                None
            }
            _ => {
                // The driver returned the loan with its answer if it took it; if it never did
                // (the request was refused first, or it is gone), it comes back here.
                let _ = tessera::syscall::frame_return(loan);
                Some(Err(DeviceError::Io))
            }
        }
    }

    /// Bytes `[0, len)` of the session's data area, where transfers go through.
    fn area(&mut self, len: usize) -> Result<&mut [u8], DeviceError> {
        Ok(self.session.area().ok_or(DeviceError::Io)?.bytes(0, len))
    }

    /// The longest transfer: the driver's limit and the data area, whole sectors.
    fn chunk(&self) -> usize {
        let ss = self.info.sector_size as usize;
        let most = (self.info.max_transfer as usize).min(self.info.area_len as usize);
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

impl SyncDisk for StreamDisk {
    fn sector_size(&self) -> usize {
        self.info.sector_size as usize
    }

    fn capacity(&self) -> u64 {
        self.sectors
    }

    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let mut at = self.place(sector, buf.len())?;
        if buf.len() == PAGE_SIZE
            && let Some(done) = self.lent(at, buf.as_mut_ptr() as usize, false)
        {
            if done.is_ok() {
                self.count(|c| {
                    c.reads += 1;
                    c.bytes += PAGE_SIZE as u64;
                });
            }
            return done;
        }
        let (chunk, ss) = (self.chunk(), self.info.sector_size as u64);
        for part in buf.chunks_mut(chunk) {
            let req = self.session.client().read(at, 0, part.len() as u32);
            self.call(req.map_err(|_| DeviceError::Io)?)?;
            part.copy_from_slice(self.area(part.len())?);
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
        if data.len() == PAGE_SIZE
            && let Some(done) = self.lent(at, data.as_ptr() as usize, true)
        {
            if done.is_ok() {
                self.count(|c| {
                    c.writes += 1;
                    c.bytes += PAGE_SIZE as u64;
                });
            }
            return done;
        }
        let (chunk, ss) = (self.chunk(), self.info.sector_size as u64);
        for part in data.chunks(chunk) {
            self.area(part.len())?.copy_from_slice(part);
            let req = self.session.client().write(at, 0, part.len() as u32);
            self.call(req.map_err(|_| DeviceError::Io)?)?;
            self.count(|c| {
                c.writes += 1;
                c.bytes += part.len() as u64;
            });
            at += part.len() as u64 / ss;
        }
        Ok(())
    }

    /// The faulting thread sleeps on the domain's clock (virtual time under `-icount`); the
    /// domain's other threads run meanwhile.
    fn wait(&mut self, ns: u64) {
        let start = tessera::time_ns();
        tessera::thread::sleep(ns);
        let slept = tessera::time_ns().saturating_sub(start);
        self.count(|c| c.retry_wait_ns += slept);
    }
}
