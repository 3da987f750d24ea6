//! `virtio-net`: the driver domain of a virtio-net NIC, on the `virtio-drivers` crate. It
//! implements the network path's one NIC trait, `net_interface::Nic` ([`device`]), on which
//! the network stack (`net_stack`, smoltcp) sits, and its self-test runs over that trait.
//!
//! The manifest grants it the NIC (`devices = [{ nic = "NAME" }]`, `driver = true`); the
//! kernel maps the device's registers into it, binds the device's interrupt to one of its
//! endpoints and describes both in its control block (`abi::DeviceSlot`). The driver makes its
//! DMA memory with `dma_alloc` (the virtqueues from a page pool, its frame buffers in one
//! stretch), brings the device up on its two queues ([`raw`], over the crate's `VirtQueue`;
//! MMIO on RISC-V `virt`, PCI with MSI-X on q35; the transports and the HAL are
//! `virtio_hal`'s, shared with `virtio-blk`), posts
//! all its receive buffers, and takes transmit and receive completions only after the
//! interrupt, acknowledging each with `irq_ack`: it never polls ([`device`]). A frame to send
//! is written straight into a free DMA transmit buffer; a received one is read in place and
//! its buffer posted again.
//!
//! What is implemented: with `--self-test N --send` or `--self-test N --receive` (two driver
//! domains on two NICs of one hub), N frames of 60 to 1,514 bytes sent by one and checked by
//! the other, in order and byte for byte ([`self_test`]); `--pause K:MS` makes the sender
//! sleep MS ms after every K frames. With `--ip A.B.C.D/N` the driver serves the network on
//! that address and prefix to the clients the manifest connects to it (`NAME-req`/`NAME-resp`
//! channels), through `net_server::domain::serve` (smoltcp, UDP endpoints, ARP and ICMP echo),
//! until every client is gone; `--die-after N` makes it fault once it has answered N requests,
//! its clients' sessions open (a test of what they and the other domains see). With
//! `--hostile N` beside `--ip` it serves nobody but plays a hostile node on the hub at that
//! address: crafted malformed frames of every kind and a flood of N datagrams at the first
//! client that says HELLO to it ([`hostile`]). With none of these, it brings its device up,
//! reports it and exits.

#![no_std]
#![no_main]

extern crate alloc;

mod device;
mod hostile;
mod raw;
mod self_test;

use net_interface::{Ipv4Addr, LinkState, Nic};
use net_server::ServeOptions;
use net_stack::{Config, LinkModel};
use tessera::{Env, println};
use virtio_drivers::transport::Transport;
use virtio_hal::{dma, mmio, pci};

tessera::main!(main);

/// What the domain is asked to do.
#[derive(Clone, Copy)]
enum Role {
    /// Bring the device up and report it.
    Report,
    /// Serve the clients on this address and prefix length.
    Serve(Ipv4Addr, u8),
    /// Send the self-test's frames.
    Send,
    /// Receive and check them.
    Receive,
    /// Play the hostile sender at this address, with a flood of this many datagrams.
    Hostile(Ipv4Addr, u32),
}

/// The self-test's request.
#[derive(Clone, Copy)]
struct Options {
    role: Role,
    frames: u32,
    pause: Option<(u32, u64)>,
    /// Serving, die once this many requests are answered.
    die_after: Option<u64>,
}

const USAGE: &str = "usage: virtio-net [--self-test N (--send [--pause K:MS] | --receive) | --ip A.B.C.D/N [--die-after N | --hostile N]]";

/// `A.B.C.D/N`, with N at most 32.
fn parse_cidr(s: &str) -> Option<(Ipv4Addr, u8)> {
    let (addr, len) = s.split_once('/')?;
    let len: u8 = len.parse().ok()?;
    (len <= 32).then_some((Ipv4Addr::parse(addr)?, len))
}

fn main(env: Env) -> i32 {
    let mut o = Options { role: Role::Report, frames: 0, pause: None, die_after: None };
    let mut self_test = false;
    let mut hostile = None;
    let mut args = env.args;
    while let Some(a) = args.next() {
        match a {
            "--self-test" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => (self_test, o.frames) = (true, n),
                None => return usage("--self-test needs a number of frames"),
            },
            "--ip" => match args.next().and_then(parse_cidr) {
                Some((addr, len)) => o.role = Role::Serve(addr, len),
                None => return usage("--ip takes an address and prefix length, A.B.C.D/N"),
            },
            "--die-after" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => o.die_after = Some(n),
                None => return usage("--die-after needs a number of requests"),
            },
            "--hostile" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => hostile = Some(n),
                None => return usage("--hostile needs a number of datagrams to flood with"),
            },
            "--send" => o.role = Role::Send,
            "--receive" => o.role = Role::Receive,
            "--pause" => {
                let pause = args.next().and_then(|p| p.split_once(':')).and_then(|(k, ms)| {
                    Some((k.parse::<u32>().ok()?, ms.parse::<u64>().ok()?.checked_mul(1_000_000)?))
                });
                match pause {
                    Some(p) => o.pause = Some(p),
                    None => return usage("--pause takes K:MS"),
                }
            }
            _ => return usage("unknown option"),
        }
    }
    if self_test != matches!(o.role, Role::Send | Role::Receive) {
        return usage("--self-test goes with exactly one of --send and --receive, not --ip");
    }
    match (hostile, o.role, o.die_after) {
        (Some(n), Role::Serve(addr, _), None) => o.role = Role::Hostile(addr, n),
        (Some(_), ..) => return usage("--hostile goes with --ip (its address), not --die-after"),
        (None, Role::Serve(..), _) | (None, _, None) => {}
        (None, ..) => return usage("--die-after goes with --ip"),
    }
    let slot = tessera::dcb().devices[0];
    dma::set_device(slot);
    if let Err(e) = dma::init_pool(64 << 10) {
        println!("virtio-net: no DMA memory: {e:?}");
        return 1;
    }
    match slot.kind {
        abi::device_kind::NODE => match mmio::transport(&slot) {
            Some(t) => run(t, &slot, o),
            None => {
                println!("virtio-net: the granted window holds no virtio device");
                1
            }
        },
        abi::device_kind::PCI => match pci::transport(&slot) {
            Some(t) => run(t, &slot, o),
            None => {
                println!("virtio-net: the granted PCI function is no usable virtio device");
                1
            }
        },
        _ => {
            println!("virtio-net: no device granted");
            1
        }
    }
}

fn usage(why: &str) -> i32 {
    println!("virtio-net: {why}; {USAGE}");
    2
}

/// Brings the device up over transport `t` and does what `o` asks.
fn run<T: Transport>(t: T, slot: &abi::DeviceSlot, o: Options) -> i32 {
    let mut irq = self_test::Interrupts::new(slot.event as usize);
    let mut nic = match device::VirtioNic::new(t) {
        Ok(nic) => nic,
        Err(e) => {
            println!("virtio-net: {e}");
            return 1;
        }
    };
    let (tx, rx) = (nic.tx_capacity(), nic.rx_capacity());
    println!(
        "virtio-net: MAC {}, MTU {}, link {}, {tx} transmit and {rx} receive buffers, interrupt on endpoint {}",
        nic.mac(),
        nic.mtu(),
        if nic.link() == LinkState::Up { "up" } else { "down" },
        slot.event
    );
    let passed = match o.role {
        Role::Report => true,
        Role::Serve(addr, prefix_len) => {
            let config = Config {
                addr,
                prefix_len,
                link: LinkModel::FAST_ETHERNET,
                tx_queue: 16,
                rx_budget: 64,
            };
            let options = ServeOptions { end_when_clients_gone: true, die_after: o.die_after };
            return net_server::domain::serve("virtio-net", nic, irq.endpoint(), config, options);
        }
        Role::Hostile(addr, flood) => hostile::run(&mut nic, &mut irq, addr, flood),
        Role::Send => self_test::send(&mut nic, &mut irq, o.frames, o.pause),
        Role::Receive => self_test::receive(&mut nic, &mut irq, o.frames),
    };
    // A frame the device failed is lost without the trait's knowing: it fails the run.
    if nic.faults() > 0 {
        println!(
            "virtio-net: FAILED: {} transmissions or receives failed by the device",
            nic.faults()
        );
        return 1;
    }
    if passed { 0 } else { 1 }
}
