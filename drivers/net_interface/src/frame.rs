//! Ethernet frames and addresses: the sizes every part of the network path agrees on.

use core::fmt;

/// Bytes of an Ethernet header (destination, source, ethertype; no VLAN tag).
pub const ETH_HEADER: usize = 14;

/// The IP MTU of every Tessera link (standard Ethernet).
pub const MTU: usize = 1500;

/// The longest frame, header included (no frame check sequence: NICs strip and add it).
pub const MAX_FRAME: usize = ETH_HEADER + MTU;

/// Bytes of an IPv4 header without options plus a UDP header.
pub const IPV4_UDP_HEADERS: usize = 20 + 8;

/// The largest UDP payload that fits one frame (no fragments): 1,472 bytes.
pub const MAX_UDP_PAYLOAD: usize = MTU - IPV4_UDP_HEADERS;

/// An Ethernet (MAC) address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

/// An IPv4 address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Addr(pub [u8; 4]);

impl Ipv4Addr {
    /// 0.0.0.0, which names no host.
    pub const UNSPECIFIED: Ipv4Addr = Ipv4Addr([0; 4]);
}

impl Ipv4Addr {
    /// Parses the dotted quad `A.B.C.D` (each part 0 to 255); `None` for anything else.
    pub fn parse(s: &str) -> Option<Ipv4Addr> {
        let mut octets = [0u8; 4];
        let mut parts = s.split('.');
        for o in &mut octets {
            *o = parts.next()?.parse().ok()?;
        }
        parts.next().is_none().then_some(Ipv4Addr(octets))
    }
}

impl fmt::Display for Ipv4Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.0;
        write!(f, "{}.{}.{}.{}", a[0], a[1], a[2], a[3])
    }
}

/// A UDP endpoint: an address and a port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    /// The host.
    pub addr: Ipv4Addr,
    /// The port.
    pub port: u16,
}

impl Endpoint {
    /// Parses `A.B.C.D:Q` (a dotted quad and a port); `None` for anything else.
    pub fn parse(s: &str) -> Option<Endpoint> {
        let (addr, port) = s.split_once(':')?;
        Some(Endpoint { addr: Ipv4Addr::parse(addr)?, port: port.parse().ok()? })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.addr, self.port)
    }
}
