//! `--hostile N --ip A.B.C.D/P`: a hostile sender on the hub, a test of the network domain's
//! defences. It has no stack: it answers ARP for its own address, waits for a UDP datagram to
//! it whose payload starts with [`HELLO`] (a victim client announcing itself: its MAC, address
//! and port come from that frame), then sends the victim's MAC, one after another, a known
//! number of crafted frames of every kind the victim's classifier drops ([`KINDS`]: runts,
//! oversize frames, frames for other hosts, unknown EtherTypes, malformed IPv4 headers, bad IP,
//! UDP and ICMP checksums, fragments, unknown IP protocols, datagrams for a closed port), and
//! then floods the victim's port with N valid UDP datagrams of [`FLOOD_PAYLOAD`] bytes as
//! fast as its NIC takes them (each payload its sequence number and bytes drawn from it,
//! [`flood_byte`], which the victim checks). It prints what it sent, kind by kind, in the
//! words and order of the driver's line of drops (`net_server`), which a test compares.
//!
//! What the device cannot carry: a frame longer than a receive buffer holds behind the
//! device's header (2,036 bytes) is dropped by QEMU's virtio-net before the guest sees it (no
//! mergeable receive buffers), so the oversize frames are 1,515 and 2,036 bytes long; and the
//! runts are as short as 13 bytes (a virtio-net device carries a frame of any length, and does
//! not pad short ones to 60 bytes as real hardware does).

use net_interface::frame::{ETH_HEADER, MAX_FRAME};
use net_interface::{Ipv4Addr, MacAddr, Nic, NicError};
use net_stack::DropReason as Kind;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    Icmpv4Message, Icmpv4Packet, IpAddress, IpProtocol, Ipv4Packet, UdpPacket,
};
use tessera::println;
use virtio_drivers::transport::Transport;

use crate::device::VirtioNic;
use crate::self_test::{Interrupts, take_transmitted};

/// The start of the payload with which a victim client announces itself.
pub const HELLO: &[u8] = b"HELLO";
/// The flood's datagrams' payload bytes.
pub const FLOOD_PAYLOAD: usize = 200;
/// The port the crafted datagrams for a closed port go to (nobody opens it).
const CLOSED_PORT: u16 = 9;
/// The hostile's own UDP source port.
const SOURCE_PORT: u16 = 6666;
/// A MAC on the hub that nobody has.
const OTHER_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x35, 0x77];

/// Each kind of crafted frame, named by the victim's reason to drop it, and how many of it are
/// sent (each a different variant), in the order of the driver's drop line.
const KINDS: [(Kind, u8); 11] = [
    (Kind::Runt, 4),
    (Kind::Oversize, 2),
    (Kind::NotForUs, 3),
    (Kind::UnknownEthertype, 2),
    (Kind::MalformedIp, 2),
    (Kind::BadIpChecksum, 3),
    (Kind::Fragment, 2),
    (Kind::UnknownProtocol, 2),
    (Kind::BadUdpChecksum, 3),
    (Kind::BadIcmpChecksum, 2),
    (Kind::NoSuchPort, 5),
];

/// Who the hostile is and whom it attacks.
#[derive(Clone, Copy)]
struct Hosts {
    me: [u8; 6],
    my_ip: [u8; 4],
    mac: [u8; 6],
    ip: [u8; 4],
    port: u16,
}

/// Byte `i` of the payload of flood datagram `seq`, after its 4-byte sequence number.
pub fn flood_byte(seq: u32, i: usize) -> u8 {
    (seq.wrapping_mul(0x9e37_79b9) >> 24) as u8 ^ (i as u8).wrapping_mul(61) ^ 0xa5
}

/// Writes an Ethernet header into `f`.
fn ethernet(f: &mut [u8], dst: [u8; 6], src: [u8; 6], ethertype: EthernetProtocol) {
    let mut eth = EthernetFrame::new_unchecked(f);
    eth.set_dst_addr(EthernetAddress(dst));
    eth.set_src_addr(EthernetAddress(src));
    eth.set_ethertype(ethertype);
}

/// Writes an IPv4 header (20 bytes, checksum filled) of a packet of `payload` bytes of
/// `protocol` from `src` to `dst` at the start of `p`.
fn ipv4(p: &mut [u8], src: [u8; 4], dst: [u8; 4], protocol: IpProtocol, payload: usize) {
    let mut ip = Ipv4Packet::new_unchecked(p);
    ip.set_version(4);
    ip.set_header_len(20);
    ip.set_dscp(0);
    ip.set_ecn(0);
    ip.set_total_len((20 + payload) as u16);
    ip.set_ident(0x1234);
    ip.clear_flags();
    ip.set_frag_offset(0);
    ip.set_hop_limit(64);
    ip.set_next_header(protocol);
    ip.set_src_addr(src.into());
    ip.set_dst_addr(dst.into());
    ip.fill_checksum();
}

/// Writes a valid UDP datagram from the hostile to `dst` (MAC, address), `port`, with
/// `payload` bytes of zeros, into `f`; the frame's length.
fn udp(f: &mut [u8], h: &Hosts, dst: ([u8; 6], [u8; 4]), port: u16, payload: usize) -> usize {
    let len = ETH_HEADER + 28 + payload;
    ethernet(f, dst.0, h.me, EthernetProtocol::Ipv4);
    ipv4(&mut f[ETH_HEADER..len], h.my_ip, dst.1, IpProtocol::Udp, 8 + payload);
    let mut u = UdpPacket::new_unchecked(&mut f[ETH_HEADER + 20..len]);
    u.set_src_port(SOURCE_PORT);
    u.set_dst_port(port);
    u.set_len((8 + payload) as u16);
    u.fill_checksum(&IpAddress::Ipv4(h.my_ip.into()), &IpAddress::Ipv4(dst.1.into()));
    len
}

/// Fills the `len` bytes of `f` from `from` with a counting pattern.
fn pattern(f: &mut [u8], from: usize, len: usize) {
    for (i, b) in f[from..from + len].iter_mut().enumerate() {
        *b = i as u8;
    }
}

/// Writes variant `v` of a frame of `kind` into `f` (zeroed, as long as a buffer); its
/// length. `max` is the longest frame the device carries.
fn craft(f: &mut [u8], kind: Kind, v: u8, h: &Hosts, max: usize) -> usize {
    let victim = (h.mac, h.ip);
    let ip_at = ETH_HEADER;
    let udp_at = ETH_HEADER + 20;
    match kind {
        Kind::Runt => match v {
            // Shorter than an Ethernet header.
            0 => {
                ethernet(&mut f[..14], h.mac, h.me, EthernetProtocol::Ipv4);
                13
            }
            // An ARP packet cut short.
            1 => {
                ethernet(f, h.mac, h.me, EthernetProtocol::Arp);
                30
            }
            // An IPv4 header claiming more bytes than the frame holds.
            2 => {
                let len = udp(f, h, victim, h.port, 32);
                Ipv4Packet::new_unchecked(&mut f[ip_at..len]).set_total_len(200);
                Ipv4Packet::new_unchecked(&mut f[ip_at..len]).fill_checksum();
                len
            }
            // A UDP length beyond the IP payload.
            _ => {
                let len = udp(f, h, victim, h.port, 16);
                UdpPacket::new_unchecked(&mut f[udp_at..len]).set_len(300);
                len
            }
        },
        Kind::Oversize => {
            let len = if v == 0 { MAX_FRAME + 1 } else { max };
            ethernet(f, h.mac, h.me, EthernetProtocol::Ipv4);
            len
        }
        Kind::NotForUs => match v {
            // Another MAC.
            0 | 1 => udp(f, h, (OTHER_MAC, h.ip), h.port, 64),
            // The victim's MAC, another address of its network.
            _ => {
                let mut other = h.ip;
                other[3] = other[3].wrapping_add(97);
                udp(f, h, (h.mac, other), h.port, 64)
            }
        },
        Kind::UnknownEthertype => {
            let ethertype =
                if v == 0 { EthernetProtocol::Ipv6 } else { EthernetProtocol::Unknown(0x88b5) };
            ethernet(f, h.mac, h.me, ethertype);
            pattern(f, ETH_HEADER, 46);
            ETH_HEADER + 46
        }
        Kind::MalformedIp => {
            let len = udp(f, h, victim, h.port, 32);
            let mut ip = Ipv4Packet::new_unchecked(&mut f[ip_at..len]);
            if v == 0 {
                ip.set_version(6);
            } else {
                ip.set_header_len(16);
            }
            ip.fill_checksum();
            len
        }
        Kind::BadIpChecksum => {
            let len = udp(f, h, victim, h.port, 32 + usize::from(v));
            let mut ip = Ipv4Packet::new_unchecked(&mut f[ip_at..len]);
            let sum = ip.checksum();
            ip.set_checksum(sum ^ (0x0101 << v));
            len
        }
        Kind::Fragment => {
            let len = udp(f, h, victim, h.port, 32);
            let mut ip = Ipv4Packet::new_unchecked(&mut f[ip_at..len]);
            if v == 0 {
                ip.set_more_frags(true);
            } else {
                ip.set_frag_offset(185 * 8);
            }
            ip.fill_checksum();
            len
        }
        Kind::UnknownProtocol => {
            let protocol = if v == 0 { IpProtocol::Tcp } else { IpProtocol::Unknown(47) };
            let len = ETH_HEADER + 20 + 40;
            ethernet(f, h.mac, h.me, EthernetProtocol::Ipv4);
            ipv4(&mut f[ip_at..len], h.my_ip, h.ip, protocol, 40);
            pattern(f, udp_at, 40);
            len
        }
        Kind::BadUdpChecksum => {
            let len = udp(f, h, victim, h.port, 48);
            let mut u = UdpPacket::new_unchecked(&mut f[udp_at..len]);
            let sum = u.checksum() ^ (0x0f0f << v);
            // A zero UDP checksum over IPv4 means none, which is valid.
            u.set_checksum(if sum == 0 { 1 } else { sum });
            len
        }
        Kind::BadIcmpChecksum => {
            let len = ETH_HEADER + 20 + 8 + 32;
            ethernet(f, h.mac, h.me, EthernetProtocol::Ipv4);
            ipv4(&mut f[ip_at..len], h.my_ip, h.ip, IpProtocol::Icmp, 40);
            let mut icmp = Icmpv4Packet::new_unchecked(&mut f[udp_at..len]);
            icmp.set_msg_type(Icmpv4Message::EchoRequest);
            icmp.set_msg_code(0);
            icmp.set_echo_ident(0x4242);
            icmp.set_echo_seq_no(u16::from(v));
            icmp.fill_checksum();
            let sum = icmp.checksum();
            icmp.set_checksum(sum ^ 0x00ff);
            len
        }
        Kind::NoSuchPort => udp(f, h, victim, CLOSED_PORT, 20 + usize::from(v)),
        // Full receive slots are the victim client's state, not a frame's: never crafted
        // (not in KINDS); the flood makes them.
        Kind::RxFull => 0,
    }
}

/// What a received frame is to the hostile.
enum Seen {
    /// An ARP request for its address, from this MAC and address.
    ArpFor([u8; 6], [u8; 4]),
    /// A victim's HELLO: its MAC, address and port.
    Hello([u8; 6], [u8; 4], u16),
    Other,
}

fn look(f: &[u8], me: [u8; 6], my_ip: [u8; 4]) -> Seen {
    let Ok(eth) = EthernetFrame::new_checked(f) else { return Seen::Other };
    match eth.ethertype() {
        EthernetProtocol::Arp => {
            let parsed = ArpPacket::new_checked(eth.payload()).and_then(|p| ArpRepr::parse(&p));
            match parsed {
                Ok(ArpRepr::EthernetIpv4 {
                    operation: ArpOperation::Request,
                    source_hardware_addr,
                    source_protocol_addr,
                    target_protocol_addr,
                    ..
                }) if target_protocol_addr.octets() == my_ip => {
                    Seen::ArpFor(source_hardware_addr.0, source_protocol_addr.octets())
                }
                _ => Seen::Other,
            }
        }
        EthernetProtocol::Ipv4 if eth.dst_addr().0 == me => {
            let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else { return Seen::Other };
            if ip.dst_addr().octets() != my_ip || ip.next_header() != IpProtocol::Udp {
                return Seen::Other;
            }
            let Ok(u) = UdpPacket::new_checked(ip.payload()) else { return Seen::Other };
            if !u.payload().starts_with(HELLO) {
                return Seen::Other;
            }
            Seen::Hello(eth.src_addr().0, ip.src_addr().octets(), u.src_port())
        }
        _ => Seen::Other,
    }
}

/// Sends the `len` bytes of `frame`, waiting for a free transmit buffer.
fn put<T: Transport>(
    nic: &mut VirtioNic<T>,
    irq: &mut Interrupts,
    frame: &[u8],
) -> Result<(), &'static str> {
    loop {
        take_transmitted(nic);
        match nic.transmit_any(frame.len(), |b| b.copy_from_slice(frame)) {
            Ok(()) => return Ok(()),
            Err(NicError::Full) => {
                irq.wait(nic, u64::MAX)?;
            }
            Err(_) => return Err("the device refused a frame"),
        }
    }
}

/// Writes an ARP reply from the hostile to `to` into `f`; its length.
fn arp_reply(f: &mut [u8], h: &Hosts, to: ([u8; 6], [u8; 4])) -> usize {
    let len = ETH_HEADER + 28;
    ethernet(f, to.0, h.me, EthernetProtocol::Arp);
    let repr = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Reply,
        source_hardware_addr: EthernetAddress(h.me),
        source_protocol_addr: h.my_ip.into(),
        target_hardware_addr: EthernetAddress(to.0),
        target_protocol_addr: to.1.into(),
    };
    repr.emit(&mut ArpPacket::new_unchecked(&mut f[ETH_HEADER..len]));
    len
}

/// Plays the hostile sender at address `my_ip` with a flood of `flood` datagrams; whether it
/// did all it meant to.
pub fn run<T: Transport>(
    nic: &mut VirtioNic<T>,
    irq: &mut Interrupts,
    my_ip: Ipv4Addr,
    flood: u32,
) -> bool {
    match attack(nic, irq, my_ip.0, flood) {
        Ok(()) => true,
        Err(e) => {
            println!("virtio-net: hostile: FAILED: {e}");
            false
        }
    }
}

fn attack<T: Transport>(
    nic: &mut VirtioNic<T>,
    irq: &mut Interrupts,
    my_ip: [u8; 4],
    flood: u32,
) -> Result<(), &'static str> {
    let me = nic.mac().0;
    let mut h = Hosts { me, my_ip, mac: [0; 6], ip: [0; 4], port: 0 };
    let mut f = [0u8; crate::device::BUFFER];
    // Answer ARP until a victim says HELLO.
    'hello: loop {
        while let Some(seen) = nic.receive(|frame| look(frame, me, my_ip)) {
            match seen {
                Seen::ArpFor(mac, ip) => {
                    f.fill(0);
                    let len = arp_reply(&mut f, &h, (mac, ip));
                    put(nic, irq, &f[..len])?;
                }
                Seen::Hello(mac, ip, port) => {
                    (h.mac, h.ip, h.port) = (mac, ip, port);
                    break 'hello;
                }
                Seen::Other => {}
            }
        }
        irq.wait(nic, u64::MAX)?;
    }
    let max = nic.max_frame_any();
    let mut sent = [0u32; KINDS.len()];
    for (k, &(kind, n)) in KINDS.iter().enumerate() {
        for v in 0..n {
            f.fill(0);
            let len = craft(&mut f, kind, v, &h, max);
            put(nic, irq, &f[..len])?;
            sent[k] += 1;
        }
    }
    println!(
        "virtio-net: hostile: crafted frames: runt {}, oversize {}, other host {}, ethertype {}, malformed IP {}, IP checksum {}, fragment {}, protocol {}, UDP checksum {}, ICMP checksum {}, no port {}",
        sent[0],
        sent[1],
        sent[2],
        sent[3],
        sent[4],
        sent[5],
        sent[6],
        sent[7],
        sent[8],
        sent[9],
        sent[10]
    );
    let start = tessera::time_ns();
    for seq in 0..flood {
        f.fill(0);
        let len = udp(&mut f, &h, (h.mac, h.ip), h.port, FLOOD_PAYLOAD);
        let at = ETH_HEADER + 28;
        f[at..at + 4].copy_from_slice(&seq.to_be_bytes());
        for (i, b) in f[at + 4..len].iter_mut().enumerate() {
            *b = flood_byte(seq, i);
        }
        let mut u = UdpPacket::new_unchecked(&mut f[ETH_HEADER + 20..len]);
        u.fill_checksum(&IpAddress::Ipv4(my_ip.into()), &IpAddress::Ipv4(h.ip.into()));
        put(nic, irq, &f[..len])?;
    }
    while nic.tx_in_flight() > 0 {
        if take_transmitted(nic) == 0 {
            irq.wait(nic, u64::MAX)?;
        }
    }
    println!(
        "virtio-net: hostile: flooded {} {}.{}.{}.{} port {} with {flood} datagrams of {FLOOD_PAYLOAD} bytes in {} us",
        MacAddr(h.mac),
        h.ip[0],
        h.ip[1],
        h.ip[2],
        h.ip[3],
        h.port,
        (tessera::time_ns() - start) / 1000
    );
    Ok(())
}
