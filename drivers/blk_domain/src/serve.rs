//! Serving client domains over the block protocol: the domain's half of
//! [`blk_server::serve`], which has the loop itself.
//!
//! What stays here is what only a domain has: the clients found in the control block's
//! channels (each receiving end `NAME-req` with its sending end `NAME-resp`, and the client's
//! domain and disk-time contract) and a data area for each (a DMA stretch of the driver's own,
//! which the client is given read-write rights to, with its stream's accounts in the page
//! after it), both by `tessera::driver` as for the network driver domain; the disk model the
//! manifest gives the device (in its control-block slot); and the kernel under
//! [`blk_server::serve::DriverDomain`]: the clock, the interrupt's endpoint and its
//! acknowledgement, `block`, the control block's `device_busy`, the console, and the frames
//! clients lend for ReadLoan and WriteLoan (`loan_address`, `frame_return`).

use core::sync::atomic::Ordering;

use alloc::vec::Vec;
use atropos::Contract;
use blk_interface::device::BlockDevice;
use blk_interface::protocol::ACCOUNT_WORDS;
use blk_server::serve::{self as loop_, Channels, Client, DriverDomain, ModelChoice, SendError};
use blk_server::{Config, DataArea, Server};
use disk_model::DiskParams;
use disk_sched::PolicyName;
use tessera::channel::{ChannelError, Receiver, Sender};
use tessera::{driver, events, println, syscall};

pub use blk_server::serve::SCHEDULER_USAGE;

/// Each client's data area.
pub const AREA_BYTES: usize = 512 << 10;

/// The most clients served.
const MAX_CLIENTS: usize = 8;

/// How the loop serves: the driver's name (for its messages), the device interrupt's endpoint,
/// and whether it dies on purpose.
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// The driver's name, prefixed to what it prints.
    pub driver: &'static str,
    /// The device's index in the control block's `devices`.
    pub device: usize,
    /// The endpoint the device's interrupt signals.
    pub irq: usize,
    /// With `Some(n)`, the driver faults (and the kernel kills it) once it has answered `n`
    /// requests from the device: a test of what its clients see.
    pub die_after: Option<u64>,
    /// The largest transfer one request may ask for, in bytes.
    pub max_transfer: u32,
    /// The disk scheduler named on the command line (`--scheduler`), if any: with none, the
    /// disk is scheduled by USD if it has a model, else first come, first served with every
    /// slot of the device.
    pub scheduler: Option<PolicyName>,
    /// Whether the scheduler anticipates (`--no-anticipation` turns it off).
    pub anticipate: bool,
}

/// A client's channels.
struct Pair {
    rx: Receiver,
    tx: Sender,
}

impl Channels for Pair {
    type Error = ChannelError;

    #[inline]
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ChannelError> {
        self.rx.try_recv(buf)
    }

    #[inline]
    fn sender_gone(&self) -> bool {
        self.rx.is_closed()
    }

    #[inline]
    fn try_send(&mut self, msg: &[u8]) -> Result<bool, SendError<ChannelError>> {
        self.tx.try_send(msg).map_err(|e| match e {
            ChannelError::Closed => SendError::Closed,
            e => SendError::Other(e),
        })
    }

    #[inline]
    fn lender(&self) -> Option<u32> {
        Some(self.rx.peer_domain())
    }
}

/// The kernel, as the loop sees it.
struct Domain {
    device: usize,
    irq: usize,
}

impl DriverDomain for Domain {
    #[inline]
    fn now_ns(&self) -> u64 {
        tessera::clock::now_ns()
    }

    #[inline]
    fn interrupts(&self) -> u64 {
        events::value(self.irq)
    }

    #[inline]
    fn interrupt_signalled_ns(&self) -> u64 {
        tessera::dcb().interrupt_ns[self.device].load(Ordering::Acquire)
    }

    #[inline]
    fn ack_interrupt(&mut self) {
        let _ = syscall::irq_ack(self.irq);
    }

    #[inline]
    fn set_device_busy(&mut self, busy: bool) {
        tessera::dcb().device_busy[self.device].store(u64::from(busy), Ordering::Release);
    }

    #[inline]
    fn block(&mut self, until_ns: u64) {
        let _ = syscall::block(until_ns);
    }

    fn die(&mut self) -> ! {
        tessera::fault::now()
    }

    fn ns_from_ticks(&self, ticks: u64) -> u64 {
        tessera::clock::ns_from_ticks(ticks)
    }

    fn print(&mut self, line: core::fmt::Arguments<'_>) {
        println!("{line}");
    }

    #[inline]
    fn loan_address(&mut self, loan: u64, lender: u32, len: u32) -> Option<u64> {
        syscall::loan_address(loan, lender, len as usize).ok()
    }

    #[inline]
    fn loan_return(&mut self, loan: u64) {
        if let Err(e) = syscall::frame_return(loan) {
            println!("a loan could not be returned: {}", e.name());
        }
    }
}

/// The clients named by the control block's channels ([`driver::clients`]), with each
/// client's domain.
fn clients(driver: &str) -> (Vec<Client<Pair>>, Vec<u64>) {
    let (mut out, mut peers) = (Vec::new(), Vec::new());
    for c in driver::clients() {
        let d = c.slot.peer_disk;
        let contract = (d.period_ns != 0).then_some(Contract {
            period: d.period_ns,
            slice: d.slice_ns,
            extra: d.extra != 0,
            latency: d.latency_ns,
        });
        if out.len() == MAX_CLIENTS {
            println!("{driver}: more than {MAX_CLIENTS} clients; the rest are not served");
            break;
        }
        out.push(Client::new(c.slot.name, Pair { rx: c.rx, tx: c.tx }, contract));
        peers.push(u64::from(c.slot.peer_domain));
    }
    (out, peers)
}

/// A driver's life once its device is up: the self-test of `transfers` transfers if asked
/// (`self_test::check`; status 1 if it fails), then [`serve`]; the exit status.
pub fn run<D: BlockDevice>(mut disk: D, transfers: u64, options: ServeOptions) -> i32 {
    let max = options.max_transfer as usize;
    if transfers > 0
        && !crate::self_test::check(options.driver, &mut disk, options.irq, transfers, max)
    {
        return 1;
    }
    serve(disk, options)
}

/// Serves the clients until all are gone ([`blk_server::serve::serve`]); the exit status.
pub fn serve<D: BlockDevice>(disk: D, options: ServeOptions) -> i32 {
    let ServeOptions { driver, device, irq, die_after, max_transfer, scheduler, anticipate } =
        options;
    let config = Config {
        max_clients: MAX_CLIENTS,
        max_in_flight_per_client: 8,
        queue_len: 32,
        max_transfer,
    };
    // The kernel runs with `trace=sched`: the loop prints its requests and waits too.
    let trace = tessera::dcb().trace != 0;
    let loop_options = loop_::ServeOptions { driver, die_after, scheduler, anticipate, trace };
    let mut domain = Domain { device, irq };
    let (mut clients, peers) = clients(driver);
    let model = match tessera::dcb().devices[device].model {
        abi::disk_model::DESKSTAR_34GXP => {
            Some(ModelChoice { params: DiskParams::deskstar_34gxp(), name: "deskstar-34gxp" })
        }
        abi::disk_model::CHEETAH_15K => {
            Some(ModelChoice { params: DiskParams::cheetah_15k(), name: "cheetah-15k" })
        }
        _ => None,
    };
    // Timed in raw clock ticks (an instruction to read), turned into ns once at the end.
    let clock: fn() -> u64 = tessera::clock::ticks;
    let (capacity, sector_size) = (disk.capacity(), disk.sector_size());
    let stage = loop_::stage(
        &mut domain,
        &loop_options,
        model,
        capacity,
        sector_size,
        max_transfer,
        &mut clients,
        Some(clock),
    );
    let mut server = match stage {
        Some(stage) => Server::with_scheduler(disk, config, stage),
        None => Server::new(disk, config),
    };
    for (i, (c, peer)) in clients.iter_mut().zip(&peers).enumerate() {
        let area = driver::client_area(*peer as usize, AREA_BYTES, ACCOUNT_WORDS).map(|a| {
            c.accounts = a.accounts;
            let r = a.region;
            DataArea { virt: r.virt as u64, phys: r.phys as u64, len: AREA_BYTES as u64 }
        });
        match area.map(|a| server.open(i, a)) {
            Ok(Ok(())) => println!("{driver}: client {} (domain {peer}) served", c.name()),
            _ => println!("{driver}: no data area for client {}", c.name()),
        }
    }
    loop_::serve(server, &mut clients, &mut domain, &loop_options)
}
