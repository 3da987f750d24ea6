//! The compiled form of a manifest: a checked header and a postcard payload.

use alloc::vec::Vec;
use core::fmt;

use crate::{Manifest, Problem};

/// The first four bytes of a compiled manifest.
pub const MAGIC: [u8; 4] = *b"TSMF";
/// The compiled format's version; [`decode`] accepts only this one.
///
/// Version 2 added [`Manifest::channels`]; version 3 added each domain's CPU contract
/// ([`DomainSpec::cpu`](crate::DomainSpec::cpu)); version 4 its address-space quota
/// ([`DomainSpec::address_space`](crate::DomainSpec::address_space)); version 5 the disks
/// ([`Manifest::disks`], each with its device address), the machine the manifest is placed for
/// ([`Manifest::machine`]) and each domain's driver mark and device grants
/// ([`DomainSpec::driver`](crate::DomainSpec::driver),
/// [`DomainSpec::devices`](crate::DomainSpec::devices)). The kernel and the host tool are
/// built together, so there is no compatibility with older versions. Version 6 added each
/// disk's model ([`DiskSpec::model`](crate::DiskSpec::model)) and each domain's disk-time
/// contract ([`DomainSpec::disk`](crate::DomainSpec::disk)). Version 7 added the NICs
/// ([`Manifest::nics`]) and `{ nic = ... }` grants. Version 8 added each domain's link-time
/// contract ([`DomainSpec::net`](crate::DomainSpec::net)).
pub const FORMAT_VERSION: u16 = 8;
/// The length of the header before the payload: magic, version, length and CRC.
pub const HEADER_LEN: usize = 4 + 2 + 4 + 4;

/// Why [`decode`] rejected a compiled manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CompiledError {
    /// Shorter than the header.
    TooShort {
        /// How many bytes there are.
        len: usize,
    },
    /// The first four bytes are not [`MAGIC`].
    BadMagic,
    /// A format version other than [`FORMAT_VERSION`].
    UnsupportedVersion(u16),
    /// The header's payload length disagrees with the bytes that follow it.
    LengthMismatch {
        /// The length the header gives.
        header: u32,
        /// The number of bytes after the header.
        actual: usize,
    },
    /// The payload's CRC-32 is not the header's.
    Checksum {
        /// The CRC-32 the header gives.
        expected: u32,
        /// The CRC-32 of the payload.
        found: u32,
    },
    /// The payload does not decode as a manifest (or has bytes left over).
    Malformed,
    /// The manifest decodes but breaks a rule of [`Manifest::check`].
    Invalid(Problem),
}

impl fmt::Display for CompiledError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort { len } => {
                write!(f, "compiled manifest too short: {len} bytes, the header is {HEADER_LEN}")
            }
            Self::BadMagic => write!(f, "not a compiled manifest (bad magic)"),
            Self::UnsupportedVersion(v) => write!(
                f,
                "compiled manifest format version {v} is not supported (expected \
                 {FORMAT_VERSION})"
            ),
            Self::LengthMismatch { header, actual } => write!(
                f,
                "compiled manifest length mismatch: header says {header} payload bytes, \
                 {actual} follow"
            ),
            Self::Checksum { expected, found } => write!(
                f,
                "compiled manifest checksum mismatch: header says {expected:#010x}, payload \
                 has {found:#010x}"
            ),
            Self::Malformed => write!(f, "compiled manifest payload is malformed"),
            Self::Invalid(p) => write!(f, "invalid manifest: {p}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for CompiledError {}

fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

impl Manifest {
    /// Compiles the manifest to the binary form of the boot image (see the
    /// [crate documentation](crate)). It does not validate: call [`Manifest::check`] first
    /// (`parse` has); [`decode`] rejects an invalid manifest.
    ///
    /// # Panics
    ///
    /// If the payload is 4 GiB or more (impossible for a manifest that passes `check`).
    pub fn compile(&self) -> Vec<u8> {
        let payload = postcard::to_allocvec(self).expect("postcard encodes to a Vec");
        let len = u32::try_from(payload.len()).expect("manifest payload under 4 GiB");
        let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&crc32(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        out
    }
}

/// Decodes and validates a compiled manifest: header (magic, version, exact length, CRC-32),
/// then the postcard payload (with nothing left over), then [`Manifest::check`].
pub fn decode(bytes: &[u8]) -> Result<Manifest, CompiledError> {
    let Some((header, payload)) = bytes.split_first_chunk::<HEADER_LEN>() else {
        return Err(CompiledError::TooShort { len: bytes.len() });
    };
    let (magic, rest) = header.split_at(4);
    if magic != MAGIC {
        return Err(CompiledError::BadMagic);
    }
    let version = u16::from_le_bytes([rest[0], rest[1]]);
    if version != FORMAT_VERSION {
        return Err(CompiledError::UnsupportedVersion(version));
    }
    let len = u32::from_le_bytes([rest[2], rest[3], rest[4], rest[5]]);
    if usize::try_from(len).ok() != Some(payload.len()) {
        return Err(CompiledError::LengthMismatch { header: len, actual: payload.len() });
    }
    let expected = u32::from_le_bytes([rest[6], rest[7], rest[8], rest[9]]);
    let found = crc32(payload);
    if expected != found {
        return Err(CompiledError::Checksum { expected, found });
    }
    let manifest = match postcard::take_from_bytes::<Manifest>(payload) {
        Ok((manifest, [])) => manifest,
        _ => return Err(CompiledError::Malformed),
    };
    manifest.check().map_err(CompiledError::Invalid)?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        ChannelSpec, CpuSpec, DEFAULT_ADDRESS_SPACE, DeviceAddress, DeviceGrant, DeviceTarget,
        DiskBus, DiskSpec, DomainSpec, MIB, Machine, ProblemKind,
    };
    use alloc::string::ToString;
    use alloc::vec;

    fn manifest() -> Manifest {
        Manifest {
            memory: 128 * MIB,
            domains: vec![
                DomainSpec {
                    name: "hello".to_string(),
                    app: "hello".to_string(),
                    args: vec!["--count".to_string(), "3".to_string()],
                    guaranteed: 256 * 1024,
                    optimistic: 0,
                    address_space: DEFAULT_ADDRESS_SPACE,
                    cpu: CpuSpec::BEST_EFFORT,
                    disk: None,
                    net: None,
                    expect_failure: false,
                    driver: false,
                    devices: vec![],
                },
                DomainSpec {
                    name: "counter-a".to_string(),
                    app: "counter".to_string(),
                    args: vec![],
                    guaranteed: MIB,
                    optimistic: 4 * MIB,
                    address_space: 64 * MIB,
                    cpu: CpuSpec {
                        period_ns: 10_000_000,
                        slice_ns: 2_000_000,
                        extra: false,
                        latency_ns: 500_000,
                    },
                    disk: Some(CpuSpec {
                        period_ns: 1_000_000_000,
                        slice_ns: 200_000_000,
                        extra: false,
                        latency_ns: 1_000_000_000,
                    }),
                    net: Some(CpuSpec {
                        period_ns: 10_000_000,
                        slice_ns: 1_000_000,
                        extra: true,
                        latency_ns: 10_000_000,
                    }),
                    expect_failure: false,
                    driver: false,
                    devices: vec![],
                },
            ],
            channels: vec![
                ChannelSpec {
                    name: "numbers".to_string(),
                    from: 1,
                    to: 0,
                    slots: 64,
                    slot_size: 64,
                },
                ChannelSpec {
                    name: "replies".to_string(),
                    from: 0,
                    to: 1,
                    slots: 2,
                    slot_size: 4096,
                },
            ],
            disks: vec![],
            nics: vec![],
            machine: None,
        }
    }

    /// [`manifest`] with two disks, one granted to a driver domain, placed for `machine`.
    fn with_disks(machine: Machine) -> Manifest {
        let mut m = manifest();
        let bus = if machine == Machine::Q35 { DiskBus::Ahci } else { DiskBus::Virtio };
        m.disks = vec![
            DiskSpec {
                name: "data".to_string(),
                size: 64 * MIB,
                bus: DiskBus::Virtio,
                model: Some(crate::DiskModelName::Deskstar34gxp),
                at: None,
            },
            DiskSpec { name: "spare".to_string(), size: MIB, bus, model: None, at: None },
        ];
        m.domains[1].driver = true;
        m.domains[1].devices = vec![
            DeviceGrant::Disk { disk: 0 },
            DeviceGrant::PciClass { class: 2, subclass: 0, index: 1 },
        ];
        m.place(machine).unwrap();
        m
    }

    /// A compiled form with a valid header around any payload.
    fn wrap(payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32(payload).to_le_bytes());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn round_trip() {
        let m = manifest();
        let bytes = m.compile();
        assert_eq!(&bytes[..4], b"TSMF");
        assert_eq!(&bytes[4..6], &[8, 0]);
        assert_eq!(decode(&bytes), Ok(m));
    }

    #[test]
    fn header_layout() {
        let bytes = manifest().compile();
        let len = u32::from_le_bytes(bytes[6..10].try_into().unwrap()) as usize;
        assert_eq!(len, bytes.len() - HEADER_LEN);
        let crc = u32::from_le_bytes(bytes[10..14].try_into().unwrap());
        assert_eq!(crc, crc32(&bytes[HEADER_LEN..]));
        // The standard CRC-32 check value.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn every_single_byte_flip_is_rejected() {
        let bytes = manifest().compile();
        for i in 0..bytes.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[i] ^= flip;
                let err = decode(&bad).unwrap_err();
                let expected_kind = match i {
                    0..4 => matches!(err, CompiledError::BadMagic),
                    4..6 => matches!(err, CompiledError::UnsupportedVersion(_)),
                    6..10 => matches!(err, CompiledError::LengthMismatch { .. }),
                    _ => matches!(err, CompiledError::Checksum { .. }),
                };
                assert!(expected_kind, "byte {i} ^ {flip:#x}: {err:?}");
            }
        }
    }

    #[test]
    fn truncation_and_trailing_bytes_are_rejected() {
        let bytes = manifest().compile();
        for len in 0..HEADER_LEN {
            assert_eq!(decode(&bytes[..len]), Err(CompiledError::TooShort { len }));
        }
        for len in HEADER_LEN..bytes.len() {
            assert!(
                matches!(decode(&bytes[..len]), Err(CompiledError::LengthMismatch { .. })),
                "truncated to {len}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(
            decode(&long),
            Err(CompiledError::LengthMismatch {
                header: (bytes.len() - HEADER_LEN) as u32,
                actual: bytes.len() - HEADER_LEN + 1
            })
        );
    }

    #[test]
    fn payload_must_decode_exactly() {
        let payload = postcard::to_allocvec(&manifest()).unwrap();
        let mut extra = payload.clone();
        extra.push(0);
        assert_eq!(decode(&wrap(&extra)), Err(CompiledError::Malformed));
        assert_eq!(decode(&wrap(&payload[..payload.len() - 1])), Err(CompiledError::Malformed));
        assert_eq!(decode(&wrap(&[])), Err(CompiledError::Malformed));
        assert_eq!(decode(&wrap(&[0xff; 40])), Err(CompiledError::Malformed));
        assert_eq!(decode(&wrap(&payload)), Ok(manifest()));
    }

    #[test]
    fn decode_validates_again() {
        let mut m = manifest();
        m.domains[1].name = "hello".to_string();
        let err = decode(&m.compile()).unwrap_err();
        let CompiledError::Invalid(p) = &err else { panic!("{err:?}") };
        assert_eq!(p.kind, ProblemKind::DuplicateName { first: 0 });
        assert_eq!(
            err.to_string(),
            "invalid manifest: domain 1 (\"hello\"): duplicate domain name (first used by \
             domain 0)"
        );
    }

    #[test]
    fn version_1_is_rejected() {
        // A version-1 image: the same header layout, a payload without channels.
        #[derive(serde::Serialize)]
        struct V1<'a> {
            memory: u64,
            domains: &'a [DomainSpec],
        }
        let m = manifest();
        let payload = postcard::to_allocvec(&V1 { memory: m.memory, domains: &m.domains }).unwrap();
        let mut bytes = wrap(&payload);
        bytes[4..6].copy_from_slice(&1u16.to_le_bytes());
        assert_eq!(decode(&bytes), Err(CompiledError::UnsupportedVersion(1)));
    }

    #[test]
    fn version_2_is_rejected() {
        // A version-2 image: channels, but domains without CPU contracts.
        #[derive(serde::Serialize)]
        struct DomainV2<'a> {
            name: &'a str,
            app: &'a str,
            args: &'a [alloc::string::String],
            guaranteed: u64,
            optimistic: u64,
        }
        #[derive(serde::Serialize)]
        struct V2<'a> {
            memory: u64,
            domains: Vec<DomainV2<'a>>,
            channels: &'a [ChannelSpec],
        }
        let m = manifest();
        let domains = m
            .domains
            .iter()
            .map(|d| DomainV2 {
                name: &d.name,
                app: &d.app,
                args: &d.args,
                guaranteed: d.guaranteed,
                optimistic: d.optimistic,
            })
            .collect();
        let v2 = V2 { memory: m.memory, domains, channels: &m.channels };
        let payload = postcard::to_allocvec(&v2).unwrap();
        let mut bytes = wrap(&payload);
        bytes[4..6].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(decode(&bytes), Err(CompiledError::UnsupportedVersion(2)));
    }

    #[test]
    fn version_3_is_rejected() {
        // A version-3 image: CPU contracts, but domains without an address-space quota.
        #[derive(serde::Serialize)]
        struct DomainV3<'a> {
            name: &'a str,
            app: &'a str,
            args: &'a [alloc::string::String],
            guaranteed: u64,
            optimistic: u64,
            cpu: CpuSpec,
            expect_failure: bool,
        }
        #[derive(serde::Serialize)]
        struct V3<'a> {
            memory: u64,
            domains: Vec<DomainV3<'a>>,
            channels: &'a [ChannelSpec],
        }
        let m = manifest();
        let domains = m
            .domains
            .iter()
            .map(|d| DomainV3 {
                name: &d.name,
                app: &d.app,
                args: &d.args,
                guaranteed: d.guaranteed,
                optimistic: d.optimistic,
                cpu: d.cpu,
                expect_failure: d.expect_failure,
            })
            .collect();
        let v3 = V3 { memory: m.memory, domains, channels: &m.channels };
        let payload = postcard::to_allocvec(&v3).unwrap();
        let mut bytes = wrap(&payload);
        bytes[4..6].copy_from_slice(&3u16.to_le_bytes());
        assert_eq!(decode(&bytes), Err(CompiledError::UnsupportedVersion(3)));
        // Nor would its payload pass for the current version.
        bytes[4..6].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        assert!(decode(&bytes).is_err());
    }

    #[test]
    fn version_4_is_rejected() {
        // A version-4 image: address spaces, but no disks, machine or device grants.
        #[derive(serde::Serialize)]
        struct DomainV4<'a> {
            name: &'a str,
            app: &'a str,
            args: &'a [alloc::string::String],
            guaranteed: u64,
            optimistic: u64,
            address_space: u64,
            cpu: CpuSpec,
            expect_failure: bool,
        }
        #[derive(serde::Serialize)]
        struct V4<'a> {
            memory: u64,
            domains: Vec<DomainV4<'a>>,
            channels: &'a [ChannelSpec],
        }
        let m = manifest();
        let domains = m
            .domains
            .iter()
            .map(|d| DomainV4 {
                name: &d.name,
                app: &d.app,
                args: &d.args,
                guaranteed: d.guaranteed,
                optimistic: d.optimistic,
                address_space: d.address_space,
                cpu: d.cpu,
                expect_failure: d.expect_failure,
            })
            .collect();
        let payload =
            postcard::to_allocvec(&V4 { memory: m.memory, domains, channels: &m.channels })
                .unwrap();
        let mut bytes = wrap(&payload);
        bytes[4..6].copy_from_slice(&4u16.to_le_bytes());
        assert_eq!(decode(&bytes), Err(CompiledError::UnsupportedVersion(4)));
        bytes[4..6].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        assert!(decode(&bytes).is_err());
    }

    #[test]
    fn disks_and_grants_round_trip_on_both_machines() {
        for machine in Machine::ALL {
            let m = with_disks(machine);
            let decoded = decode(&m.compile()).unwrap();
            assert_eq!(decoded, m);
            assert_eq!(decoded.machine, Some(machine));
            assert_eq!(decoded.disks[1].size, MIB);
            assert!(decoded.domains[1].driver && !decoded.domains[0].driver);
            assert_eq!(decoded.disk_owner(0), Some(1));
            assert_eq!(decoded.disk_owner(1), None);
            let target = decoded.grant_target(&decoded.domains[1].devices[0]).unwrap();
            let other = decoded.grant_target(&decoded.domains[1].devices[1]).unwrap();
            assert_eq!(other, DeviceTarget::PciClass { class: 2, subclass: 0, index: 1 });
            match machine {
                Machine::RiscvVirt => {
                    assert_eq!(decoded.disks[0].at, Some(DeviceAddress::Mmio { unit: 0 }));
                    assert_eq!(decoded.disks[1].at, Some(DeviceAddress::Mmio { unit: 1 }));
                    assert_eq!(target, DeviceTarget::Node { compatible: "virtio,mmio", unit: 0 });
                }
                Machine::Q35 => {
                    let at = |slot| Some(DeviceAddress::Pci { bus: 0, slot, function: 0 });
                    assert_eq!(decoded.disks[0].at, at(0x10));
                    assert_eq!(decoded.disks[1].at, at(0x11));
                    assert_eq!(decoded.disks[1].bus, DiskBus::Ahci);
                    let t = DeviceTarget::PciAddress { bus: 0, slot: 0x10, function: 0 };
                    assert_eq!(target, t);
                }
            }
        }
    }

    #[test]
    fn nics_and_their_grants_round_trip_on_both_machines() {
        for machine in Machine::ALL {
            let mut m = with_disks(machine);
            m.nics = (0..2)
                .map(|i| crate::NicSpec {
                    name: alloc::format!("net{i}"),
                    mac: crate::default_mac(i),
                    at: None,
                })
                .collect();
            m.domains[1].devices.push(DeviceGrant::Nic { nic: 1 });
            m.place(machine).unwrap();
            let decoded = decode(&m.compile()).unwrap();
            assert_eq!(decoded, m);
            assert_eq!(decoded.nic_owner(1), Some(1));
            assert_eq!(decoded.nic_owner(0), None);
            assert_eq!(decoded.nics[1].mac, [0x52, 0x54, 0, 0x12, 0x35, 1]);
            let target = decoded.grant_target(&decoded.domains[1].devices[2]).unwrap();
            // The NICs follow the two disks: virtio-mmio unit 3, or PCI slot 0x19.
            let want = match machine {
                Machine::RiscvVirt => DeviceTarget::Node { compatible: "virtio,mmio", unit: 3 },
                Machine::Q35 => DeviceTarget::PciAddress { bus: 0, slot: 0x19, function: 0 },
            };
            assert_eq!(target, want);
            // A NIC moved away from where the host tool attaches it is refused.
            let mut moved = decoded.clone();
            moved.nics[0].at = moved.nics[1].at;
            let CompiledError::Invalid(p) = decode(&moved.compile()).unwrap_err() else { panic!() };
            assert_eq!(
                (p.nic, matches!(p.kind, ProblemKind::NicMisplaced { .. })),
                (Some(0), true)
            );
        }
    }

    #[test]
    fn disks_and_grants_are_validated_again() {
        // A disk moved away from where the host tool attaches it.
        let mut m = with_disks(Machine::Q35);
        m.disks[0].at = Some(DeviceAddress::Pci { bus: 0, slot: 3, function: 0 });
        let CompiledError::Invalid(p) = decode(&m.compile()).unwrap_err() else { panic!() };
        assert_eq!(p.disk, Some(0));
        assert!(matches!(p.kind, ProblemKind::DiskMisplaced { .. }));
        // An AHCI disk on RISC-V.
        let mut m = with_disks(Machine::RiscvVirt);
        m.disks[1].bus = DiskBus::Ahci;
        m.disks[1].at = None;
        let err = decode(&m.compile()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid manifest: disk 1: QEMU virt (riscv64) has no ahci bus: AHCI \
             disks are for QEMU q35 (x86_64) only (use bus = \"virtio\")"
        );
        // The driver mark taken away.
        let mut m = with_disks(Machine::RiscvVirt);
        m.domains[1].driver = false;
        let CompiledError::Invalid(p) = decode(&m.compile()).unwrap_err() else { panic!() };
        assert_eq!(p.kind, ProblemKind::DevicesWithoutDriver);
        // The disk granted to a second domain, by its node.
        let mut m = with_disks(Machine::RiscvVirt);
        m.domains[0].driver = true;
        m.domains[0].devices =
            vec![DeviceGrant::Compatible { compatible: "virtio,mmio".into(), unit: 0 }];
        let CompiledError::Invalid(p) = decode(&m.compile()).unwrap_err() else { panic!() };
        assert_eq!(p.domain.unwrap().index, 1);
        let kind = ProblemKind::DeviceGrantedTwice { grant: 0, first_domain: 0, first_grant: 0 };
        assert_eq!(p.kind, kind);
    }

    #[test]
    fn address_spaces_are_carried_and_validated_again() {
        let m = manifest();
        let decoded = decode(&m.compile()).unwrap();
        assert_eq!(decoded.domains[0].address_space, DEFAULT_ADDRESS_SPACE);
        assert_eq!(decoded.domains[1].address_space, 64 * MIB);
        let mut m = manifest();
        m.domains[1].address_space = 3 * MIB;
        let err = decode(&m.compile()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid manifest: domain 1 (\"counter-a\"): address space 3M is not a multiple of 2M"
        );
        let mut m = manifest();
        m.domains[0].address_space = 100 * 1024 * MIB;
        m.domains[1].address_space = 30 * 1024 * MIB;
        let CompiledError::Invalid(p) = decode(&m.compile()).unwrap_err() else { panic!() };
        assert_eq!(p.domain.unwrap().index, 1);
        assert_eq!(p.kind, ProblemKind::AddressSpaceOverCapacity { total: 130 * 1024 * MIB });
    }

    #[test]
    fn cpu_contracts_are_validated_again() {
        let mut m = manifest();
        m.domains[1].cpu.slice_ns = 20_000_000;
        let err = decode(&m.compile()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid manifest: domain 1 (\"counter-a\"): invalid CPU contract: slice is longer \
             than the period (slice 20ms, period 10ms)"
        );
        let mut m = manifest();
        m.domains[0].cpu.slice_ns = 8_000_000;
        m.domains[1].cpu.slice_ns = 9_000_000;
        let CompiledError::Invalid(p) = decode(&m.compile()).unwrap_err() else { panic!() };
        assert_eq!(p.domain.unwrap().index, 1);
        assert_eq!(p.kind, ProblemKind::CpuOverCapacity { total_ppb: 980_000_000 });
    }

    #[test]
    fn channels_are_validated_again() {
        let mut m = manifest();
        m.channels[1].to = 7;
        let err = decode(&m.compile()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid manifest: channel 1 (\"replies\"): receiving domain 7 does not exist \
             (there are 2 domains)"
        );
        let mut m = manifest();
        m.channels[0].slots = 48;
        let CompiledError::Invalid(p) = decode(&m.compile()).unwrap_err() else { panic!() };
        assert_eq!(p.kind, ProblemKind::SlotsInvalid { slots: 48 });
    }

    #[test]
    fn errors_display() {
        assert_eq!(
            decode(b"TSMF\x02\x00").unwrap_err().to_string(),
            "compiled manifest too short: 6 bytes, the header is 14"
        );
        let mut bytes = manifest().compile();
        bytes[4] = 1;
        assert_eq!(
            decode(&bytes).unwrap_err().to_string(),
            "compiled manifest format version 1 is not supported (expected 8)"
        );
    }
}
