//! `ahci`: the driver domain of a SATA disk on port 0 of an AHCI controller (q35's ICH9 AHCI).
//!
//! The manifest grants it the disk (`devices = [{ disk = "NAME" }]` of a disk on the `ahci`
//! bus, `driver = true`); the kernel maps the controller's registers (ABAR, BAR 5) into it,
//! routes its MSI to one of its endpoints and describes both in its control block
//! (`abi::DeviceSlot`). The driver resets the controller, brings port 0 up with DMA memory of
//! its own ([`port`]), asks the disk for its capacity and its command queue (IDENTIFY DEVICE),
//! and from then on waits for completions on the interrupt's endpoint, acknowledging each
//! interrupt with `irq_ack` once it has taken the completions: it never polls (only the
//! recovery from an error spins, for a bounded time, on the port's registers).
//!
//! What is implemented: port 0 only, a disk of 512-byte sectors, native command queuing when
//! offered ([`disk`]), FLUSH CACHE EXT, the recovery from a command's error that fails that
//! request alone and issues the others at the device again (the NCQ command error log when the
//! device has one, else each retried alone); with `--self-test N`, N transfers of random sizes at
//! random sectors, each written, read back and checked, one at a time, interrupt-driven; then
//! serving the client domains the manifest connects to it over the block protocol
//! (`blk_interface`; the loop of `blk_server::serve`, by way of `blk_domain::serve`).
//! `--no-ncq` keeps to non-queued commands, one at a time; `--die-after N` makes it fault once it has answered N requests (a test of its
//! clients). Not implemented: other ports, port multipliers, hot plug, power management, ATAPI
//! devices.

#![no_std]
#![no_main]

mod disk;
mod hba;
mod port;

use blk_domain::serve::{self, ServeOptions};
use blk_interface::device::BlockDevice;
use disk_sched::PolicyName;
use tessera::{Env, println};

use crate::disk::{AhciDisk, SECTOR_SIZE};
use crate::hba::Hba;
use crate::port::{Identity, Port};

tessera::main!(main);

/// Largest transfer of the self-test, and of a client's request.
const MAX_TRANSFER: usize = 64 << 10;

/// PCI class of an AHCI controller: mass storage, SATA, AHCI 1.0.
const CLASS_AHCI: u64 = 0x01_06_01;

/// PxSIG of a SATA disk.
const SIG_ATA: u32 = 0x101;

fn main(env: Env) -> i32 {
    let mut transfers = 0u64;
    let mut die_after = None;
    let (mut scheduler, mut anticipate) = (None, true);
    let mut queuing = true;
    let mut args = env.args;
    while let Some(a) = args.next() {
        match a {
            "--self-test" => transfers = args.next().and_then(|n| n.parse().ok()).unwrap_or(100),
            "--die-after" => die_after = args.next().and_then(|n| n.parse().ok()),
            "--scheduler" => match args.next().and_then(PolicyName::parse) {
                Some(p) => scheduler = Some(p),
                None => {
                    println!("ahci: {}", serve::SCHEDULER_USAGE);
                    return 2;
                }
            },
            "--no-anticipation" => anticipate = false,
            "--no-ncq" => queuing = false,
            _ => {
                println!("ahci: unknown option {a}");
                return 2;
            }
        }
    }
    let slot = tessera::dcb().devices[0];
    if slot.kind != abi::device_kind::PCI || slot.pci_class != CLASS_AHCI {
        println!("ahci: the granted device is no AHCI controller");
        return 1;
    }
    if slot.interrupt == abi::interrupt_kind::NONE {
        println!("ahci: the controller's interrupt is not routed to the domain");
        return 1;
    }
    let Some(hba) = Hba::of(&slot) else {
        println!("ahci: the controller's registers (BAR 5) are not mapped");
        return 1;
    };
    let (disk, id) = match bring_up(hba, queuing) {
        Ok(up) => up,
        Err(e) => {
            println!("ahci: the controller would not start: {e}");
            return 1;
        }
    };
    println!(
        "ahci: port 0: {}, {} sectors of {SECTOR_SIZE} bytes, NCQ depth {}, interrupt on endpoint {}",
        id.model(),
        disk.capacity(),
        disk.ncq_depth(),
        slot.event
    );
    let options = ServeOptions {
        driver: "ahci",
        device: 0,
        irq: slot.event as usize,
        die_after,
        max_transfer: MAX_TRANSFER as u32,
        scheduler,
        anticipate,
    };
    serve::run(disk, transfers, options)
}

/// Resets the controller, starts port 0 and identifies its disk: the disk, interrupts
/// enabled, and what it says of itself.
fn bring_up(hba: Hba, queuing: bool) -> Result<(AhciDisk, Identity), &'static str> {
    if hba.read(hba::host::PI) & 1 == 0 {
        return Err("port 0 is not implemented");
    }
    port::reset_controller(&hba)?;
    let mut p = Port::new(hba, 0)?;
    p.start()?;
    if p.signature() != SIG_ATA {
        return Err("the device on port 0 is not a SATA disk");
    }
    let id = p.identify()?;
    if id.sectors == 0 {
        return Err("the disk has no sectors");
    }
    Ok((AhciDisk::new(p, &id, queuing), id))
}
