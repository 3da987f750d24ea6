//! What the stack does with a received frame, decided before smoltcp sees it: every frame is
//! either given to smoltcp (ARP, ICMP), delivered to the client that owns its UDP port, or
//! dropped and counted under exactly one [`DropReason`].

use net_interface::frame::{ETH_HEADER, MAX_FRAME};
use net_interface::{Endpoint, Ipv4Addr, MacAddr};
use smoltcp::wire::{
    EthernetFrame, EthernetProtocol, Icmpv4Packet, IpAddress, IpProtocol, Ipv4Packet, UdpPacket,
};

/// Why a received frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Shorter than the headers it claims (Ethernet, ARP, IPv4's total length, UDP's length).
    Runt,
    /// Longer than the link's largest frame.
    Oversize,
    /// Addressed to another host (another MAC, or another IPv4 address).
    NotForUs,
    /// Neither ARP nor IPv4.
    UnknownEthertype,
    /// An IPv4 header that is not one (version, header length).
    MalformedIp,
    /// The IPv4 header checksum is wrong.
    BadIpChecksum,
    /// An IPv4 fragment (not reassembled).
    Fragment,
    /// Neither ICMP nor UDP.
    UnknownProtocol,
    /// The UDP checksum is wrong.
    BadUdpChecksum,
    /// The ICMP checksum is wrong.
    BadIcmpChecksum,
    /// No client holds the UDP destination port.
    NoSuchPort,
    /// The client's receive slots are all taken.
    RxFull,
}

impl DropReason {
    /// Every reason, in the order drops are listed ([`Drops`]' `Display`).
    pub const ALL: [DropReason; 12] = [
        DropReason::Runt,
        DropReason::Oversize,
        DropReason::NotForUs,
        DropReason::UnknownEthertype,
        DropReason::MalformedIp,
        DropReason::BadIpChecksum,
        DropReason::Fragment,
        DropReason::UnknownProtocol,
        DropReason::BadUdpChecksum,
        DropReason::BadIcmpChecksum,
        DropReason::NoSuchPort,
        DropReason::RxFull,
    ];

    /// The reason's words in a list of drops (`runt`, `other host`, `slots full`, ...).
    pub fn label(self) -> &'static str {
        match self {
            DropReason::Runt => "runt",
            DropReason::Oversize => "oversize",
            DropReason::NotForUs => "other host",
            DropReason::UnknownEthertype => "ethertype",
            DropReason::MalformedIp => "malformed IP",
            DropReason::BadIpChecksum => "IP checksum",
            DropReason::Fragment => "fragment",
            DropReason::UnknownProtocol => "protocol",
            DropReason::BadUdpChecksum => "UDP checksum",
            DropReason::BadIcmpChecksum => "ICMP checksum",
            DropReason::NoSuchPort => "no port",
            DropReason::RxFull => "slots full",
        }
    }
}

/// Frames dropped on receipt, by reason. Shown as `runt N, oversize N, ...`, every reason of
/// [`DropReason::ALL`] in order with its [`label`](DropReason::label).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops {
    /// [`DropReason::Runt`].
    pub runt: u64,
    /// [`DropReason::Oversize`].
    pub oversize: u64,
    /// [`DropReason::NotForUs`].
    pub not_for_us: u64,
    /// [`DropReason::UnknownEthertype`].
    pub unknown_ethertype: u64,
    /// [`DropReason::MalformedIp`].
    pub malformed_ip: u64,
    /// [`DropReason::BadIpChecksum`].
    pub bad_ip_checksum: u64,
    /// [`DropReason::Fragment`].
    pub fragment: u64,
    /// [`DropReason::UnknownProtocol`].
    pub unknown_protocol: u64,
    /// [`DropReason::BadUdpChecksum`].
    pub bad_udp_checksum: u64,
    /// [`DropReason::BadIcmpChecksum`].
    pub bad_icmp_checksum: u64,
    /// [`DropReason::NoSuchPort`].
    pub no_such_port: u64,
    /// [`DropReason::RxFull`].
    pub rx_full: u64,
}

impl Drops {
    /// The frames dropped for `r`.
    pub fn of(&self, r: DropReason) -> u64 {
        let mut d = *self;
        *d.counter(r)
    }

    /// Counts one frame dropped for `r`.
    pub fn count(&mut self, r: DropReason) {
        *self.counter(r) += 1;
    }

    fn counter(&mut self, r: DropReason) -> &mut u64 {
        match r {
            DropReason::Runt => &mut self.runt,
            DropReason::Oversize => &mut self.oversize,
            DropReason::NotForUs => &mut self.not_for_us,
            DropReason::UnknownEthertype => &mut self.unknown_ethertype,
            DropReason::MalformedIp => &mut self.malformed_ip,
            DropReason::BadIpChecksum => &mut self.bad_ip_checksum,
            DropReason::Fragment => &mut self.fragment,
            DropReason::UnknownProtocol => &mut self.unknown_protocol,
            DropReason::BadUdpChecksum => &mut self.bad_udp_checksum,
            DropReason::BadIcmpChecksum => &mut self.bad_icmp_checksum,
            DropReason::NoSuchPort => &mut self.no_such_port,
            DropReason::RxFull => &mut self.rx_full,
        }
    }

    /// Every frame dropped.
    pub fn total(&self) -> u64 {
        DropReason::ALL.iter().map(|&r| self.of(r)).sum()
    }
}

impl core::fmt::Display for Drops {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{} {}", r.label(), self.of(*r))?;
        }
        Ok(())
    }
}

/// What to do with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Give it to smoltcp (ARP, or ICMP for this host).
    Stack,
    /// A UDP datagram for this host: its source, destination port and the payload's range in
    /// the frame.
    Udp {
        /// The sender.
        from: Endpoint,
        /// The destination port.
        port: u16,
        /// Where the payload starts in the frame.
        start: usize,
        /// The payload's length.
        len: usize,
    },
    /// Drop it.
    Drop(DropReason),
}

/// Bytes of an ARP packet for IPv4 over Ethernet.
const ARP_LEN: usize = 28;

/// Classifies `frame` received by the host with MAC `mac` and address `ip`. Never panics.
pub fn classify(frame: &[u8], mac: MacAddr, ip: Ipv4Addr) -> Verdict {
    use DropReason::*;
    if frame.len() > MAX_FRAME {
        return Verdict::Drop(Oversize);
    }
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return Verdict::Drop(Runt);
    };
    let dst = eth.dst_addr().0;
    if dst != mac.0 && dst != MacAddr::BROADCAST.0 {
        return Verdict::Drop(NotForUs);
    }
    match eth.ethertype() {
        EthernetProtocol::Arp if frame.len() >= ETH_HEADER + ARP_LEN => Verdict::Stack,
        EthernetProtocol::Arp => Verdict::Drop(Runt),
        EthernetProtocol::Ipv4 => classify_ipv4(eth.payload(), ip),
        _ => Verdict::Drop(UnknownEthertype),
    }
}

fn classify_ipv4(packet: &[u8], ip: Ipv4Addr) -> Verdict {
    use DropReason::*;
    if packet.len() < 20 {
        return Verdict::Drop(Runt);
    }
    let version = packet[0] >> 4;
    let header_len = usize::from(packet[0] & 0xf) * 4;
    let total_len = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
    if version != 4 || header_len < 20 || total_len < header_len {
        return Verdict::Drop(MalformedIp);
    }
    if total_len > packet.len() {
        return Verdict::Drop(Runt);
    }
    let Ok(ipp) = Ipv4Packet::new_checked(packet) else {
        return Verdict::Drop(MalformedIp);
    };
    if !ipp.verify_checksum() {
        return Verdict::Drop(BadIpChecksum);
    }
    let dst = ipp.dst_addr().octets();
    if dst != ip.0 && dst != [255; 4] {
        return Verdict::Drop(NotForUs);
    }
    if ipp.more_frags() || ipp.frag_offset() != 0 {
        return Verdict::Drop(Fragment);
    }
    let payload = ipp.payload();
    match ipp.next_header() {
        IpProtocol::Icmp => match Icmpv4Packet::new_checked(payload) {
            Ok(p) if p.verify_checksum() => Verdict::Stack,
            Ok(_) => Verdict::Drop(BadIcmpChecksum),
            Err(_) => Verdict::Drop(Runt),
        },
        IpProtocol::Udp => {
            let Ok(udp) = UdpPacket::new_checked(payload) else {
                return Verdict::Drop(Runt);
            };
            let (src, dst) = (IpAddress::Ipv4(ipp.src_addr()), IpAddress::Ipv4(ipp.dst_addr()));
            if !udp.verify_checksum(&src, &dst) {
                return Verdict::Drop(BadUdpChecksum);
            }
            let from = Endpoint { addr: Ipv4Addr(ipp.src_addr().octets()), port: udp.src_port() };
            Verdict::Udp {
                from,
                port: udp.dst_port(),
                start: ETH_HEADER + header_len + 8,
                len: usize::from(udp.len()) - 8,
            }
        }
        _ => Verdict::Drop(UnknownProtocol),
    }
}
