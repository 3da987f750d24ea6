//! The half of the network driver domain that only a domain has, so that a NIC driver domain
//! (virtio-net) only builds its NIC and calls [`serve`]: the clients found in the control
//! block's channels (each receiving end `NAME-req` with its sending end `NAME-resp`, and the
//! client's domain), a data area for each (a DMA stretch of the driver's own, of which the
//! client is given read-write rights, its stream's accounts in the page after it; both by
//! `tessera::driver`, as for the block driver domains), and the kernel under [`NetDomain`]:
//! the clock, the interrupt's endpoint and its acknowledgement, `block`, the console. Built
//! for the targets only; no `unsafe` (the runtime's `dma` hands out the area's bytes and
//! words).
//!
//! The kernel's loan calls serve SendLoan: `loan_address` checks a loan is the client's domain's
//! and gives the frame's device address, `frame_return` gives it back once the NIC is done.
//!
//! A client's receive slots are lent to the stack at each Open and come back when the stack
//! drops them at the Close ([`Lent`]), so a client may close and open again.
//!
//! Each client's stream gets the link-time contract the manifest gives its domain (`net = {
//! ... }`, in the channel slot's `peer_net`), and its completed periods are printed; a client
//! whose domain has none gets [`DEFAULT_CONTRACT`], best effort, without period lines.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::Cell;
use core::sync::atomic::AtomicU64;

use net_interface::protocol::{ACCOUNT_WORDS, RX_SLOT};
use net_interface::{NetContract, NetError, Nic};
use net_stack::{Area, Config, Instant, NetStack};
use tessera::channel::{ChannelError, Receiver, Sender};
use tessera::{driver, events, println, syscall};

use crate::{Channels, Client, DataArea, Lent, NetDomain, NetServer, SendError, ServeOptions};

/// Each client's data area: its send bytes, then its receive slots.
pub const AREA_BYTES: usize = 16 << 10;

/// The send bytes before the receive slots (the largest payload, rounded up).
pub const TX_BYTES: usize = 2048;

/// The most clients served.
const MAX_CLIENTS: usize = 8;

/// The contract of a client whose domain's manifest names no `net`: 1 ms of link time in every
/// 10 ms, and slack time beyond (`manifest::NET_BEST_EFFORT`, at which the manifest's
/// admission counts such a client).
pub const DEFAULT_CONTRACT: NetContract =
    NetContract { period_ns: 10_000_000, slice_ns: 1_000_000, extra: true, latency_ns: 0 };

/// A client's channels.
pub struct Pair {
    rx: Receiver,
    tx: Sender,
}

impl Channels for Pair {
    type Error = ChannelError;

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ChannelError> {
        self.rx.try_recv(buf)
    }

    fn sender_gone(&self) -> bool {
        self.rx.is_closed()
    }

    fn try_send(&mut self, msg: &[u8]) -> Result<bool, SendError<ChannelError>> {
        self.tx.try_send(msg).map_err(|e| match e {
            ChannelError::Closed => SendError::Closed,
            e => SendError::Other(e),
        })
    }
}

/// A client's data area in the driver's DMA memory.
pub struct DomainArea {
    base: u64,
    tx: &'static [u8],
    rx: &'static Cell<Option<&'static mut [u8]>>,
    words: Option<&'static [AtomicU64]>,
}

impl DataArea for DomainArea {
    type Rx = Lent;

    fn area(&self) -> Area {
        Area { base: self.base, len: AREA_BYTES as u64, rx_offset: TX_BYTES as u32 }
    }

    fn tx(&self) -> &[u8] {
        self.tx
    }

    fn rx(&self) -> Lent {
        Lent::take(self.rx)
    }

    fn accounts(&self) -> Option<&[AtomicU64]> {
        self.words
    }
}

/// The kernel, as the loop sees it.
struct Domain {
    irq: usize,
}

impl NetDomain for Domain {
    fn now_ns(&self) -> u64 {
        tessera::clock::now_ns()
    }

    fn interrupts(&self) -> u64 {
        events::value(self.irq)
    }

    fn ack_interrupt(&mut self) {
        let _ = syscall::irq_ack(self.irq);
    }

    fn block(&mut self, until_ns: u64) {
        let _ = syscall::block(until_ns);
    }

    fn print(&mut self, line: core::fmt::Arguments<'_>) {
        println!("{line}");
    }

    fn die(&mut self) -> ! {
        tessera::fault::now()
    }

    fn loan_address(&mut self, lender: u32, loan: u64, len: u32) -> Result<u64, NetError> {
        syscall::loan_address(loan, lender, len as usize).map_err(|_| NetError::BadLoan)
    }

    fn loan_return(&mut self, loan: u64) {
        if let Err(e) = syscall::frame_return(loan) {
            println!("a loan could not be returned: {}", e.name());
        }
    }
}

/// A data area for the client in domain `peer` ([`driver::client_area`]): its send bytes,
/// then its receive slots.
fn area(peer: usize) -> Option<DomainArea> {
    let a = driver::client_area(peer, AREA_BYTES, ACCOUNT_WORDS).ok()?;
    let (tx, rx) = a.bytes.split_at_mut(TX_BYTES);
    let slots = rx.len() / RX_SLOT * RX_SLOT;
    Some(DomainArea {
        base: a.region.virt as u64,
        tx,
        rx: Box::leak(Box::new(Cell::new(Some(&mut rx[..slots])))),
        words: a.accounts,
    })
}

/// The clients named by the control block's channels ([`driver::clients`]), each with its
/// data area.
fn clients(driver: &str) -> Vec<Client<Pair, DomainArea>> {
    let mut out = Vec::new();
    for c in driver::clients() {
        if out.len() == MAX_CLIENTS {
            println!("{driver}: more than {MAX_CLIENTS} clients; the rest are not served");
            break;
        }
        let (name, peer) = (c.name, c.slot.peer_domain as usize);
        let Some(area) = area(peer) else {
            println!("{driver}: no data area for client {name}");
            continue;
        };
        let n = c.slot.peer_net;
        let own = (n.period_ns != 0).then_some(NetContract {
            period_ns: n.period_ns,
            slice_ns: n.slice_ns,
            extra: n.extra != 0,
            latency_ns: n.latency_ns,
        });
        let contract = own.unwrap_or(DEFAULT_CONTRACT);
        match own {
            Some(k) => println!(
                "{driver}: client {name} (domain {peer}) served, link time {} us every {} us{}",
                k.slice_ns / 1000,
                k.period_ns / 1000,
                if k.extra { " and slack" } else { "" }
            ),
            None => println!("{driver}: client {name} (domain {peer}) served"),
        }
        let pair = Pair { rx: c.rx, tx: c.tx };
        let client = Client::new(name, pair, area, contract).with_records(own.is_some());
        out.push(client.with_lender(peer as u32));
    }
    out
}

/// Serves the network on `nic` (its interrupt signalling endpoint `irq`) with the stack set
/// up as `config`, for the clients the manifest connects to this domain, as `driver`; the
/// exit status (see [`crate::serve`]).
pub fn serve<N: Nic>(
    driver: &'static str,
    nic: N,
    irq: usize,
    config: Config,
    options: ServeOptions,
) -> i32 {
    let clients = clients(driver);
    let stack = NetStack::new(nic, config, Instant(tessera::clock::now_ns()));
    let server = NetServer::new(driver, stack, clients);
    crate::serve(server, &mut Domain { irq }, options)
}
