//! One AHCI port: bringing it up, its DMA structures, and issuing commands to its device.
//!
//! Start-up ([`reset_controller`], [`Port::start`]): the controller is reset (GHC.HR) and put
//! in AHCI mode (GHC.AE); the port's command list engine (PxCMD.ST) and FIS receive engine
//! (PxCMD.FRE) are stopped and awaited (PxCMD.CR and FR clear); the command list and the
//! received-FIS area are pointed at DMA memory (PxCLB, PxFB); PxSERR and PxIS are cleared,
//! power-saving transitions disabled (PxSCTL.IPM);
//! FIS receive is switched on; once the device is present (PxSSTS.DET = 3) and idle (neither
//! BSY nor DRQ in PxTFD) the command list engine is started. Each of these waits is a
//! bounded spin on a register bit, with an error naming it if the bound passes.
//!
//! The DMA memory (one stretch of [`DMA_BYTES`]): the command list of 32 headers at 0, the
//! received-FIS area at 0x400, the IDENTIFY buffer at 0x600, the log buffer at 0x800 (one
//! sector of READ LOG EXT), and from 0x1000 one command
//! table per slot ([`TABLE_BYTES`] each: the command FIS, the ATAPI command, and a physical
//! region descriptor table of one entry, the buffers being physically contiguous).
//!
//! [`Port::identify`] runs IDENTIFY DEVICE before interrupts are enabled (a bounded spin on
//! PxCI); it gives the capacity (words 100-103 with LBA48, else 60-61) and native command
//! queuing (word 76 bit 8) with its depth (word 75). Afterwards every command completes by
//! interrupt: [`Port::issue`] writes a slot's header and table and sets its bit in PxSACT (a
//! queued command) and PxCI; [`Port::take_interrupt`] reads and clears PxIS and then the
//! controller's IS; [`Port::active`] says which slots are still at the device. After an error
//! [`Port::read_ncq_error_log`] stops and restarts the command list engine and reads which
//! queued command failed from the device's NCQ command error log (READ LOG EXT, log 10h), and
//! [`Port::recover`] resets the link (COMRESET) and starts the port again. Both keep the
//! port's interrupts masked (PxIE) while they run and clear what they raised.
//!
//! All of the driver's `unsafe` besides the register accesses of [`crate::hba`] is here: the
//! DMA structures are written and read with volatile accesses through raw pointers.

use core::sync::atomic::{Ordering, fence};

use crate::hba::{self, Hba, cmd, ghc, host, irq, port, tfd};

/// The command slots of a port (AHCI's most; the controller may have fewer).
pub const SLOTS: usize = 32;

/// Bytes of a command table: the command FIS (64), the ATAPI command (16), reserved (48), and
/// a physical region descriptor table of one 16-byte entry, rounded up to keep tables
/// 128-byte aligned.
pub const TABLE_BYTES: usize = 0x100;

/// Offsets in the port's DMA stretch.
const LIST: usize = 0;
const RECEIVED: usize = 0x400;
const IDENTIFY_BUF: usize = 0x600;
const LOG_BUF: usize = 0x800;
const TABLES: usize = 0x1000;

/// Bytes of the port's DMA stretch.
pub const DMA_BYTES: usize = TABLES + SLOTS * TABLE_BYTES;

/// The largest buffer one physical region descriptor covers.
pub const MAX_PRD_BYTES: u32 = 4 << 20;

/// How long a start-up or recovery wait may spin, in nanoseconds.
const SPIN_NS: u64 = 1_000_000_000;

/// How long a link reset holds PxSCTL.DET at 1 (AHCI asks for at least a millisecond).
const COMRESET_NS: u64 = 1_000_000;

/// ATA commands the driver sends.
pub mod ata {
    /// IDENTIFY DEVICE.
    pub const IDENTIFY: u8 = 0xec;
    /// READ DMA EXT.
    pub const READ_DMA_EXT: u8 = 0x25;
    /// WRITE DMA EXT.
    pub const WRITE_DMA_EXT: u8 = 0x35;
    /// READ FPDMA QUEUED (native command queuing).
    pub const READ_FPDMA: u8 = 0x60;
    /// WRITE FPDMA QUEUED (native command queuing).
    pub const WRITE_FPDMA: u8 = 0x61;
    /// FLUSH CACHE EXT.
    pub const FLUSH_EXT: u8 = 0xea;
    /// READ LOG EXT (PIO data-in): the log whose address is in LBA bits 7:0, from the page in
    /// bits 15:8, as many pages (sectors) as the count.
    pub const READ_LOG_EXT: u8 = 0x2f;
    /// The address of the NCQ command error log: its first byte says which queued command
    /// failed (bits 4:0 its tag; bit 7, NQ, that the error was in a non-queued command).
    pub const NCQ_ERROR_LOG: u64 = 0x10;
}

/// Spins until `done` holds, for at most [`SPIN_NS`]; `what` names the wait in the error.
fn spin(what: &'static str, mut done: impl FnMut() -> bool) -> Result<(), &'static str> {
    let deadline = tessera::time_ns().saturating_add(SPIN_NS);
    loop {
        if done() {
            return Ok(());
        }
        if tessera::time_ns() > deadline {
            return Err(what);
        }
        core::hint::spin_loop();
    }
}

/// Resets the controller (GHC.HR, awaited) and puts it in AHCI mode (GHC.AE), its interrupt
/// off.
pub fn reset_controller(hba: &Hba) -> Result<(), &'static str> {
    hba.write(host::GHC, ghc::AE);
    hba.write(host::GHC, ghc::AE | ghc::HR);
    spin("the controller did not finish its reset (GHC.HR stayed set)", || {
        hba.read(host::GHC) & ghc::HR == 0
    })?;
    hba.write(host::GHC, ghc::AE);
    Ok(())
}

/// What IDENTIFY DEVICE says of the device.
#[derive(Clone, Copy, Debug)]
pub struct Identity {
    /// Capacity in sectors of 512 bytes.
    pub sectors: u64,
    /// The queue depth of native command queuing, if the device offers it.
    pub ncq_depth: Option<usize>,
    /// The model string (words 27-46), space-padded ASCII.
    pub model: [u8; 40],
}

impl Identity {
    /// The model, without its padding.
    pub fn model(&self) -> &str {
        core::str::from_utf8(&self.model).unwrap_or("?").trim()
    }
}

/// The data of a command: a physically contiguous buffer and its direction.
#[derive(Clone, Copy, Debug)]
pub struct Data {
    /// Its physical address.
    pub phys: u64,
    /// Its length in bytes (even, at most [`MAX_PRD_BYTES`]).
    pub len: u32,
    /// Memory to device.
    pub write: bool,
}

/// One ATA command for a slot.
#[derive(Clone, Copy, Debug)]
pub struct Command {
    /// The command code (one of [`ata`]).
    pub ata: u8,
    /// The first sector.
    pub lba: u64,
    /// The sectors (at most 65536; 65536 is sent as 0).
    pub sectors: u32,
    /// A native-queued command: its tag (the slot) goes in the FIS and the slot's bit in
    /// PxSACT.
    pub queued: bool,
    /// Its data, if it moves any.
    pub data: Option<Data>,
}

/// A port whose DMA structures are set up.
pub struct Port {
    hba: Hba,
    n: usize,
    /// The DMA stretch's address in the domain, and its physical address.
    virt: usize,
    phys: u64,
    /// The controller's capabilities.
    cap: u32,
}

impl Port {
    /// Port `n` of `hba`, its command list and tables made in DMA memory (every header
    /// pointing at its slot's table); not started.
    pub fn new(hba: Hba, n: usize) -> Result<Port, &'static str> {
        let region = tessera::dma::alloc(DMA_BYTES).map_err(|_| "no DMA memory for the port")?;
        let cap = hba.read(host::CAP);
        if cap & hba::cap::S64A == 0 && (region.phys + region.len) as u64 > 1 << 32 {
            return Err("the controller reaches only 4 GiB and the DMA memory lies above");
        }
        let port = Port { hba, n, virt: region.virt, phys: region.phys as u64, cap };
        for slot in 0..SLOTS {
            let table = port.phys + (TABLES + slot * TABLE_BYTES) as u64;
            port.header_write(slot, 2, table as u32);
            port.header_write(slot, 3, (table >> 32) as u32);
        }
        Ok(port)
    }

    /// Reads register `offset` of the port.
    fn read(&self, offset: usize) -> u32 {
        self.hba.port_read(self.n, offset)
    }

    /// Writes register `offset` of the port.
    fn write(&self, offset: usize, value: u32) {
        self.hba.port_write(self.n, offset, value)
    }

    /// Writes word `word` (below 8) of slot `slot`'s command header.
    fn header_write(&self, slot: usize, word: usize, value: u32) {
        assert!(slot < SLOTS && word < 8);
        let at = self.virt + LIST + slot * 32 + word * 4;
        // SAFETY: the command list (32 headers of 32 bytes at `LIST`) lies in the port's DMA
        // stretch, which is the domain's for its life and only this port writes; `slot` and
        // `word` are in bounds (asserted), so `at` is an aligned word of it.
        unsafe { (at as *mut u32).write_volatile(value) }
    }

    /// Writes byte `offset` (below `TABLE_BYTES`) of slot `slot`'s command table.
    fn table_write(&self, slot: usize, offset: usize, value: u32) {
        assert!(slot < SLOTS && offset < TABLE_BYTES && offset.is_multiple_of(4));
        let at = self.virt + TABLES + slot * TABLE_BYTES + offset;
        // SAFETY: the tables (`SLOTS` of `TABLE_BYTES` from `TABLES`) lie in the port's DMA
        // stretch, the domain's for its life and written only here; the word is in bounds and
        // aligned (asserted).
        unsafe { (at as *mut u32).write_volatile(value) }
    }

    /// Stops the command list engine (PxCMD.ST cleared, CR awaited): the controller forgets
    /// the commands in PxCI and PxSACT.
    fn stop_engine(&self) -> Result<(), &'static str> {
        let c = self.read(port::CMD);
        self.write(port::CMD, c & !cmd::ST);
        spin("the command list engine did not stop (PxCMD.CR stayed set)", || {
            self.read(port::CMD) & cmd::CR == 0
        })
    }

    /// Stops the command list engine and then the FIS receive engine, awaiting each.
    fn stop(&self) -> Result<(), &'static str> {
        self.stop_engine()?;
        let c = self.read(port::CMD);
        self.write(port::CMD, c & !cmd::FRE);
        spin("FIS receive did not stop (PxCMD.FR stayed set)", || {
            self.read(port::CMD) & cmd::FR == 0
        })
    }

    /// Brings the port up (see the module's documentation): afterwards it takes commands.
    pub fn start(&mut self) -> Result<(), &'static str> {
        self.stop()?;
        let list = self.phys + LIST as u64;
        let received = self.phys + RECEIVED as u64;
        self.write(port::CLB, list as u32);
        self.write(port::CLBU, (list >> 32) as u32);
        self.write(port::FB, received as u32);
        self.write(port::FBU, (received >> 32) as u32);
        self.write(port::SERR, u32::MAX);
        self.write(port::IS, u32::MAX);
        self.write(port::IE, 0);
        self.write(port::SCTL, hba::SCTL_NO_POWER_SAVING);
        let c = self.read(port::CMD);
        self.write(port::CMD, c | cmd::FRE | cmd::SUD | cmd::POD);
        spin("no device on the port (PxSSTS.DET is not 3)", || {
            self.read(port::SSTS) & 0xf == hba::SSTS_DET_PRESENT
        })?;
        spin("the device stays busy (BSY or DRQ in PxTFD)", || {
            self.read(port::TFD) & (tfd::BSY | tfd::DRQ) == 0
        })?;
        self.write(port::SERR, u32::MAX);
        let c = self.read(port::CMD);
        self.write(port::CMD, c | cmd::ST);
        Ok(())
    }

    /// The device's signature (PxSIG: 0x101 for a SATA disk).
    pub fn signature(&self) -> u32 {
        self.read(port::SIG)
    }

    /// Writes `command` into slot `slot` and issues it. The slot must be free (its bit clear
    /// in [`Port::active`]) and its data buffer must stay untouched until it completes.
    pub fn issue(&mut self, slot: usize, command: &Command) {
        let mut fis = [0u8; 20];
        fis[0] = 0x27; // Register FIS, host to device.
        fis[1] = 0x80; // A command (not a control update).
        fis[2] = command.ata;
        fis[7] = 0x40; // LBA addressing.
        let lba = command.lba.to_le_bytes();
        fis[4..7].copy_from_slice(&lba[0..3]);
        fis[8..11].copy_from_slice(&lba[3..6]);
        let count = (command.sectors as u16).to_le_bytes();
        if command.queued {
            // The sector count goes in the features, the tag in the count's bits 7:3.
            (fis[3], fis[11]) = (count[0], count[1]);
            fis[12] = (slot as u8) << 3;
        } else {
            (fis[12], fis[13]) = (count[0], count[1]);
        }
        for (i, w) in fis.chunks_exact(4).enumerate() {
            self.table_write(slot, 4 * i, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
        }
        let mut flags = 5; // The FIS's length in words.
        let mut prds = 0;
        if let Some(d) = command.data {
            self.table_write(slot, 0x80, d.phys as u32);
            self.table_write(slot, 0x84, (d.phys >> 32) as u32);
            self.table_write(slot, 0x88, 0);
            self.table_write(slot, 0x8c, d.len - 1);
            prds = 1;
            if d.write {
                flags |= 1 << 6;
            }
        }
        self.header_write(slot, 0, flags | prds << 16);
        self.header_write(slot, 1, 0);
        // The header and table reach memory before the controller is told of them.
        fence(Ordering::SeqCst);
        if command.queued {
            self.write(port::SACT, 1 << slot);
        }
        self.write(port::CI, 1 << slot);
    }

    /// The slots whose commands are still at the device (PxSACT | PxCI).
    pub fn active(&self) -> u32 {
        self.read(port::SACT) | self.read(port::CI)
    }

    /// The task file (PxTFD): status in bits 7:0, error in 15:8.
    pub fn task_file(&self) -> u32 {
        self.read(port::TFD)
    }

    /// Reads and clears the port's interrupt status, then its bit in the controller's, and
    /// returns what the port's said. Statuses raised after the read stay set and interrupt
    /// again.
    pub fn take_interrupt(&self) -> u32 {
        let is = self.read(port::IS);
        self.write(port::IS, is);
        self.hba.write(host::IS, 1 << self.n);
        is
    }

    /// Enables the port's interrupts ([`irq::ENABLED`]) and the controller's.
    pub fn enable_interrupts(&self) {
        self.write(port::IE, irq::ENABLED);
        let g = self.hba.read(host::GHC);
        self.hba.write(host::GHC, g | ghc::IE);
    }

    /// Runs IDENTIFY DEVICE in slot 0 before interrupts are enabled (a bounded spin on PxCI)
    /// and reads what the device says of itself.
    pub fn identify(&mut self) -> Result<Identity, &'static str> {
        let buf = self.phys + IDENTIFY_BUF as u64;
        let command = Command {
            ata: ata::IDENTIFY,
            lba: 0,
            sectors: 0,
            queued: false,
            data: Some(Data { phys: buf, len: 512, write: false }),
        };
        self.issue(0, &command);
        spin("IDENTIFY DEVICE did not complete", || {
            self.read(port::CI) & 1 == 0 && self.read(port::TFD) & tfd::BSY == 0
        })?;
        let status = self.take_interrupt();
        if self.read(port::TFD) & tfd::ERR != 0 || status & irq::ERRORS != 0 {
            return Err("IDENTIFY DEVICE failed");
        }
        fence(Ordering::SeqCst);
        let word = |i: usize| -> u16 {
            assert!(i < 256);
            let at = self.virt + IDENTIFY_BUF + 2 * i;
            // SAFETY: the IDENTIFY buffer (512 bytes at `IDENTIFY_BUF`) lies in the port's DMA
            // stretch; the device has written it and is done (PxCI clear); `i` is below 256.
            unsafe { (at as *const u16).read_volatile() }
        };
        // Word 106, when valid (bits 15:14 = 01), says with bit 12 that logical sectors are
        // longer than 512 bytes: not supported.
        let w106 = word(106);
        if w106 & 0xc000 == 0x4000 && w106 & 1 << 12 != 0 {
            return Err("the disk's sectors are longer than 512 bytes");
        }
        let lba48 = word(83) & 1 << 10 != 0;
        let sectors = if lba48 {
            (0..4).fold(0u64, |s, i| s | u64::from(word(100 + i)) << (16 * i))
        } else {
            u64::from(word(60)) | u64::from(word(61)) << 16
        };
        let ncq_depth = (word(76) & 1 << 8 != 0).then(|| usize::from(word(75) & 0x1f) + 1);
        let mut model = [b' '; 40];
        for i in 0..20 {
            let [hi, lo] = word(27 + i).to_be_bytes();
            model[2 * i] = if hi.is_ascii_graphic() { hi } else { b' ' };
            model[2 * i + 1] = if lo.is_ascii_graphic() { lo } else { b' ' };
        }
        Ok(Identity { sectors, ncq_depth, model })
    }

    /// The controller offers native command queuing (CAP.SNCQ).
    pub fn controller_queues(&self) -> bool {
        self.cap & hba::cap::SNCQ != 0
    }

    /// The command slots the controller has per port.
    pub fn controller_slots(&self) -> usize {
        hba::cap::slots(self.cap).min(SLOTS)
    }

    /// After a queued command's error, asks the device which command failed (AHCI 1.3
    /// §6.2.2.1 and SATA's NCQ error handling): the command list engine is stopped (the
    /// controller forgets PxCI and PxSACT), PxSERR and PxIS are cleared, the engine is started
    /// again on an idle device (BSY or DRQ in PxTFD is an error here: only a link reset helps
    /// then), and READ LOG EXT reads the first page of the NCQ command error log into the log
    /// buffer, in slot 0, by a bounded spin with the port's interrupts masked. The tag of the
    /// queued command that failed, or `None` if the log says the error was in a non-queued
    /// command (NQ); an error if the device refuses the command (QEMU's disk does: its IDE
    /// core has no READ LOG EXT) or the page's checksum is wrong. Slot 0's command table is
    /// overwritten: a command that was there must be written again before it is reissued.
    pub fn read_ncq_error_log(&mut self) -> Result<Option<usize>, &'static str> {
        let enabled = self.read(port::IE);
        self.write(port::IE, 0);
        let read = self.read_log_masked();
        self.take_interrupt();
        self.write(port::IE, enabled);
        read
    }

    /// [`Port::read_ncq_error_log`] with the port's interrupts masked.
    fn read_log_masked(&mut self) -> Result<Option<usize>, &'static str> {
        self.stop_engine()?;
        self.write(port::SERR, u32::MAX);
        self.take_interrupt();
        if self.read(port::TFD) & (tfd::BSY | tfd::DRQ) != 0 {
            return Err("the device is busy (BSY or DRQ in PxTFD)");
        }
        let c = self.read(port::CMD);
        self.write(port::CMD, c | cmd::ST);
        let command = Command {
            ata: ata::READ_LOG_EXT,
            lba: ata::NCQ_ERROR_LOG,
            sectors: 1,
            queued: false,
            data: Some(Data { phys: self.phys + LOG_BUF as u64, len: 512, write: false }),
        };
        self.issue(0, &command);
        spin("READ LOG EXT did not complete", || {
            let busy = self.read(port::TFD) & tfd::BSY != 0;
            (self.read(port::CI) & 1 == 0 && !busy) || self.read(port::IS) & irq::ERRORS != 0
        })?;
        if self.read(port::IS) & irq::ERRORS != 0 || self.read(port::TFD) & tfd::ERR != 0 {
            return Err("the device refused READ LOG EXT");
        }
        fence(Ordering::SeqCst);
        let mut page = [0u8; 512];
        for (i, b) in page.iter_mut().enumerate() {
            let at = self.virt + LOG_BUF + i;
            // SAFETY: the log buffer (512 bytes at `LOG_BUF`) lies in the port's DMA stretch;
            // the device has written it and is done (PxCI clear, no error); `i` is below 512.
            *b = unsafe { (at as *const u8).read_volatile() };
        }
        if page.iter().fold(0u8, |sum, b| sum.wrapping_add(*b)) != 0 {
            return Err("the NCQ command error log's checksum is wrong");
        }
        Ok((page[0] & 0x80 == 0).then_some(usize::from(page[0] & 0x1f)))
    }

    /// Recovers the port after an error: the command list engine is stopped, the link reset
    /// (COMRESET: PxSCTL.DET = 1 for a millisecond, then 0), which resets the device and drops
    /// every command at the port, queued or not, and clears a queued command's error state
    /// (which would otherwise fail every later queued command); once the device is present and
    /// idle again PxSERR and PxIS are cleared and the engine is started. The port's interrupts
    /// are masked meanwhile: what the reset raises is cleared, not delivered.
    pub fn recover(&mut self) -> Result<(), &'static str> {
        let enabled = self.read(port::IE);
        self.write(port::IE, 0);
        let reset = self.reset_link();
        self.take_interrupt();
        self.write(port::IE, enabled);
        reset
    }

    /// [`Port::recover`] with the port's interrupts masked.
    fn reset_link(&mut self) -> Result<(), &'static str> {
        self.stop_engine()?;
        self.write(port::SCTL, hba::SCTL_NO_POWER_SAVING | hba::SCTL_DET_RESET);
        let held = tessera::time_ns().saturating_add(COMRESET_NS);
        spin("the clock stopped during a link reset", || tessera::time_ns() >= held)?;
        self.write(port::SCTL, hba::SCTL_NO_POWER_SAVING);
        spin("no device on the port after a link reset (PxSSTS.DET is not 3)", || {
            self.read(port::SSTS) & 0xf == hba::SSTS_DET_PRESENT
        })?;
        spin("the device stays busy after a link reset (BSY or DRQ in PxTFD)", || {
            self.read(port::TFD) & (tfd::BSY | tfd::DRQ) == 0
        })?;
        self.write(port::SERR, u32::MAX);
        self.take_interrupt();
        let c = self.read(port::CMD);
        self.write(port::CMD, c | cmd::ST);
        Ok(())
    }
}
