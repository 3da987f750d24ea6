//! The disk on port 0 as a [`BlockDevice`] of the block protocol's driver side: requests go
//! to the port without waiting, completions are taken after the interrupt.
//!
//! With native command queuing (the controller's CAP.SNCQ and the device's IDENTIFY word 76
//! bit 8) reads and writes are READ and WRITE FPDMA QUEUED, as many in flight as the smaller
//! of the device's queue depth and the controller's slots, each in the slot of its tag, its
//! bit set in PxSACT and PxCI. Without it they are READ and WRITE DMA EXT, one at a time
//! (several non-queued commands in PxCI would run one after the other anyway). A flush (FLUSH
//! CACHE EXT, a non-queued command, which may not be mixed with queued ones) goes to the
//! device only when nothing else is in flight; otherwise [`DeviceError::Full`], and the server
//! submits it again after a completion.
//!
//! A request is done when its slot's bit has left both PxSACT and PxCI. [`AhciDisk::interrupted`]
//! clears the interrupt status and notes which slots finished, which [`AhciDisk::complete`]
//! then returns one by one: nothing is polled. On an error (a task file error or a bus or
//! interface error in PxIS) the slots still active fail with [`DeviceError::Io`] and the port
//! is recovered ([`Port::recover`]: stopped, its link reset, started again).

use blk::device::{BlockDevice, DeviceError, DeviceOp, DeviceRequest, Tag};
use tessera::println;

use crate::hba::irq;
use crate::port::{Command, Data, Identity, MAX_PRD_BYTES, Port, ata};

/// Bytes per sector.
pub const SECTOR_SIZE: u32 = 512;

/// The most sectors one command moves.
const MAX_SECTORS: u32 = 65536;

/// The disk on an AHCI port, behind the block protocol.
pub struct AhciDisk {
    port: Port,
    sectors: u64,
    /// Reads and writes are native-queued.
    queued: bool,
    /// The slots used: tags are below this.
    depth: usize,
    /// The slots submitted and not yet returned by `complete`.
    in_flight: u32,
    /// Of those, the ones the device finished (seen at an interrupt), and the ones that failed.
    done: u32,
    failed: u32,
    /// A non-queued command (a flush, or any command without queuing) is at the device.
    unqueued: bool,
}

impl AhciDisk {
    /// The disk on `port`, started, as `identity` describes it; its commands native-queued if
    /// the device and the controller offer it and `allow_queuing`. Enables the port's
    /// interrupts.
    pub fn new(port: Port, identity: &Identity, allow_queuing: bool) -> AhciDisk {
        let depth = match identity.ncq_depth {
            Some(d) if allow_queuing && port.controller_queues() => {
                d.min(port.controller_slots()).max(1)
            }
            _ => 0,
        };
        port.enable_interrupts();
        AhciDisk {
            port,
            sectors: identity.sectors,
            queued: depth > 0,
            depth: depth.max(1),
            in_flight: 0,
            done: 0,
            failed: 0,
            unqueued: false,
        }
    }

    /// The native command queuing depth in use (0: none, one command at a time).
    pub fn ncq_depth(&self) -> usize {
        if self.queued { self.depth } else { 0 }
    }
}

impl BlockDevice for AhciDisk {
    fn sector_size(&self) -> u32 {
        SECTOR_SIZE
    }

    fn capacity(&self) -> u64 {
        self.sectors
    }

    fn max_in_flight(&self) -> usize {
        self.depth
    }

    fn submit(&mut self, req: DeviceRequest) -> Result<Tag, DeviceError> {
        let slot = (0..self.depth).find(|&s| self.in_flight & 1 << s == 0);
        let slot = slot.ok_or(DeviceError::Full)?;
        // Queued and non-queued commands never share the port.
        if self.unqueued || (req.op == DeviceOp::Flush && self.in_flight != 0) {
            return Err(DeviceError::Full);
        }
        let command = if req.op == DeviceOp::Flush {
            Command { ata: ata::FLUSH_EXT, lba: 0, sectors: 0, queued: false, data: None }
        } else {
            let len = req.buffer.len;
            let count = len / SECTOR_SIZE;
            let fits = req.sector.checked_add(u64::from(count)).is_some_and(|e| e <= self.sectors);
            let sized = len.is_multiple_of(SECTOR_SIZE) && len <= MAX_PRD_BYTES;
            if len == 0 || !sized || count > MAX_SECTORS || !fits {
                return Err(DeviceError::Invalid);
            }
            let write = req.op == DeviceOp::Write;
            let ata = match (self.queued, write) {
                (true, false) => ata::READ_FPDMA,
                (true, true) => ata::WRITE_FPDMA,
                (false, false) => ata::READ_DMA_EXT,
                (false, true) => ata::WRITE_DMA_EXT,
            };
            let data = Data { phys: req.buffer.phys, len, write };
            Command { ata, lba: req.sector, sectors: count, queued: self.queued, data: Some(data) }
        };
        self.unqueued = !command.queued;
        self.port.issue(slot, &command);
        self.in_flight |= 1 << slot;
        Ok(Tag(slot as u16))
    }

    fn complete(&mut self) -> Option<(Tag, Result<(), DeviceError>)> {
        let ready = self.done | self.failed;
        if ready == 0 {
            return None;
        }
        let slot = ready.trailing_zeros();
        let bit = 1 << slot;
        let result = if self.failed & bit != 0 { Err(DeviceError::Io) } else { Ok(()) };
        self.done &= !bit;
        self.failed &= !bit;
        self.in_flight &= !bit;
        if self.in_flight == 0 {
            self.unqueued = false;
        }
        Some((Tag(slot as u16), result))
    }

    fn interrupted(&mut self) {
        // Cleared first, then the slots read: a command finishing after the clear raises the
        // status (and the interrupt) again.
        let status = self.port.take_interrupt();
        let waiting = self.in_flight & !(self.done | self.failed);
        let active = self.port.active();
        self.done |= waiting & !active;
        if status & irq::ERRORS != 0 {
            let failing = waiting & active;
            self.failed |= failing;
            let task_file = self.port.task_file();
            let n = failing.count_ones();
            match self.port.recover() {
                Ok(()) => println!(
                    "ahci: port error (PxIS {status:#x}, PxTFD {task_file:#x}): {n} request(s) failed, port recovered"
                ),
                Err(e) => println!(
                    "ahci: port error (PxIS {status:#x}, PxTFD {task_file:#x}): {n} request(s) failed, and {e}"
                ),
            }
        }
    }
}
