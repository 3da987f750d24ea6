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
//! then returns one by one: nothing is polled.
//!
//! An error (a task file error or a bus or interface error in PxIS) fails only the request it
//! belongs to; the others still at the device are issued again. The slots whose bits left
//! PxSACT and PxCI before it are done; of those still there (the outstanding ones):
//! - one non-queued command, or a single queued one: it failed. It completes with
//!   [`DeviceError::Io`] and the port is recovered ([`Port::recover`]: stopped, its link
//!   reset, started again).
//! - several queued commands: the device's NCQ command error log names the one that failed
//!   ([`Port::read_ncq_error_log`]); the port is recovered, that request fails and the others
//!   are issued again, all at once, in their slots. When the log cannot be read (QEMU's disk
//!   has none), names no outstanding queued command, or the error was the controller's (bus,
//!   interface, overflow), the port is recovered and the outstanding commands are retried
//!   one at a time, each alone at the device: one that fails alone fails, the others complete.
//!   Meanwhile the disk takes no new request ([`DeviceError::Full`]).
//!
//! Each request is retried at most once and each recovery is a bounded number of bounded
//! spins. If the port cannot be recovered every request outstanding or waiting to be retried
//! fails, and so does every later one.

use blk_interface::device::{BlockDevice, DeviceError, DeviceOp, DeviceRequest, Tag};
use tessera::println;

use crate::hba::irq;
use crate::port::{Command, Data, Identity, MAX_PRD_BYTES, Port, SLOTS, ata};

/// The port's registers at an error, as its messages show them.
struct Registers {
    status: u32,
    task_file: u32,
}

impl core::fmt::Display for Registers {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PxIS {:#x}, PxTFD {:#x}", self.status, self.task_file)
    }
}

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
    /// The command each slot in flight was issued, to issue it again after an error.
    commands: [Option<Command>; SLOTS],
    /// Slots in flight whose commands wait to be retried alone after an error the device did
    /// not attribute; they are not at the device.
    retry: u32,
    /// A retried command is at the device, alone.
    alone: bool,
    /// The port could not be recovered: every request fails.
    broken: bool,
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
            commands: [None; SLOTS],
            retry: 0,
            alone: false,
            broken: false,
        }
    }

    /// The native command queuing depth in use (0: none, one command at a time).
    pub fn ncq_depth(&self) -> usize {
        if self.queued { self.depth } else { 0 }
    }

    /// Handles an error the port raised (`status`, PxIS) while the slots `outstanding` were
    /// still at the device (see the module's documentation).
    fn port_error(&mut self, status: u32, outstanding: u32) {
        let why = Registers { status, task_file: self.port.task_file() };
        let queued = outstanding != 0
            && (0..SLOTS)
                .filter(|&s| outstanding & 1 << s != 0)
                .all(|s| self.commands[s].is_some_and(|c| c.queued));
        if outstanding.count_ones() <= 1 || !queued {
            // One command at the device (several non-queued ones never are): it failed.
            let recovered = self.port.recover();
            if outstanding == 0 {
                println!("ahci: a port error with no request at the device ({why})");
            }
            for s in (0..SLOTS).filter(|&s| outstanding & 1 << s != 0) {
                println!("ahci: the request in slot {s} failed ({why})");
            }
            self.failed |= outstanding;
            self.recovered(recovered);
            return;
        }
        // Several queued commands: which one failed? Only a device error (TFES) is in the log.
        let log = if status & irq::TFES != 0 {
            self.port.read_ncq_error_log()
        } else {
            Err("the controller's error, not the device's")
        };
        let recovered = self.port.recover();
        match log {
            Ok(Some(tag)) if outstanding & 1 << tag != 0 => {
                println!(
                    "ahci: the request in slot {tag} failed ({why}; named by the NCQ error log): {} other request(s) issued again",
                    outstanding.count_ones() - 1
                );
                self.failed |= 1 << tag;
                // On a port that did not recover they fail instead (`recovered`).
                if recovered.is_ok() {
                    for s in (0..SLOTS).filter(|&s| s != tag && outstanding & 1 << s != 0) {
                        if let Some(c) = self.commands[s] {
                            self.port.issue(s, &c);
                        }
                    }
                }
            }
            other => {
                let reason = match other {
                    Ok(_) => "the NCQ error log names no request at the device",
                    Err(e) => e,
                };
                println!(
                    "ahci: an error with {} requests at the device ({why}), and {reason}: each is retried alone",
                    outstanding.count_ones()
                );
                self.retry |= outstanding;
            }
        }
        self.recovered(recovered);
    }

    /// After a recovery: if it failed, the disk is broken and every request at or waiting for
    /// the device fails.
    fn recovered(&mut self, recovery: Result<(), &'static str>) {
        if let Err(e) = recovery {
            let lost = self.in_flight & !(self.done | self.failed);
            println!(
                "ahci: the port could not be recovered ({e}): {} request(s) fail, and every later one",
                lost.count_ones()
            );
            self.failed |= lost;
            self.retry = 0;
            self.alone = false;
            self.broken = true;
        }
    }

    /// Issues the next command waiting to be retried, alone, if nothing is at the device.
    fn retry_next(&mut self) {
        let at_device = self.in_flight & !(self.done | self.failed | self.retry);
        if at_device != 0 || self.retry == 0 {
            return;
        }
        let slot = self.retry.trailing_zeros() as usize;
        self.retry &= !(1 << slot);
        match self.commands[slot] {
            Some(c) => {
                self.port.issue(slot, &c);
                self.alone = true;
            }
            None => self.failed |= 1 << slot,
        }
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
        if self.broken {
            return Err(DeviceError::Io);
        }
        let slot = (0..self.depth).find(|&s| self.in_flight & 1 << s == 0);
        let slot = slot.ok_or(DeviceError::Full)?;
        // Queued and non-queued commands never share the port; nothing joins a command
        // retried alone.
        let retrying = self.alone || self.retry != 0;
        if retrying || self.unqueued || (req.op == DeviceOp::Flush && self.in_flight != 0) {
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
        self.commands[slot] = Some(command);
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
        self.commands[slot as usize] = None;
        if self.in_flight == 0 {
            self.unqueued = false;
        }
        Some((Tag(slot as u16), result))
    }

    fn interrupted(&mut self) {
        // Cleared first, then the slots read: a command finishing after the clear raises the
        // status (and the interrupt) again.
        let status = self.port.take_interrupt();
        // The slots at the device: in flight, not yet seen finished, not waiting for a retry.
        let waiting = self.in_flight & !(self.done | self.failed | self.retry);
        let active = self.port.active();
        self.done |= waiting & !active;
        if waiting & !active != 0 {
            self.alone = false;
        }
        if status & irq::ERRORS != 0 {
            self.alone = false;
            self.port_error(status, waiting & active);
        }
        self.retry_next();
    }
}
