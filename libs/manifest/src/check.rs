//! The semantic rules of a manifest, shared by the host tool and the kernel.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use atropos::{AdmissionError, CAPACITY_PPB, ContractError, KERNEL_RESERVE_PERCENT, PPB};

use crate::{
    ADDRESS_SPACE_ALIGN, Bytes, CpuSpec, DEFAULT_ADDRESS_SPACE, DOMAIN_FIXED_FRAMES,
    DOMAIN_FIXED_RANGES, GUARD_BYTES, KERNEL_RESERVE, MAX_ARG_LEN, MAX_ARGS, MAX_CHANNEL_BYTES,
    MAX_CHANNELS, MAX_CHANNELS_PER_DOMAIN, MAX_DOMAINS, MAX_MEMORY, MAX_NAME_LEN, MAX_SLOT_SIZE,
    MAX_SLOTS, MEMORY_ALIGN, MIN_ADDRESS_SPACE, MIN_MEMORY, MIN_SLOT_SIZE, MIN_SLOTS, Machine,
    Manifest, PAGE_SIZE, SLOT_ALIGN, STRETCH_REGION, Time,
};
use crate::{
    DeviceAddress, DeviceGrant, DiskBus, MAX_COMPATIBLE_LEN, MAX_DEVICES_PER_DOMAIN, MAX_DISK_SIZE,
    MAX_DISKS, MAX_NICS, MIN_DISK_SIZE, SECTOR_SIZE, VIRTIO_MMIO_UNITS,
};

/// A rule of [`Manifest::check`] that a manifest breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Problem {
    /// The domain at fault, or `None` for the system as a whole or a channel alone.
    pub domain: Option<DomainRef>,
    /// The channel at fault, or `None` if the problem is not about a channel.
    pub channel: Option<ChannelRef>,
    /// The disk at fault (its position in [`Manifest::disks`], 0-based), or `None` if the
    /// problem is not about a disk. An index only, to keep the problem small: the front end
    /// names the disk by its key, `system.disk[i]`.
    pub disk: Option<u16>,
    /// The NIC at fault (its position in [`Manifest::nics`], 0-based), or `None` if the
    /// problem is not about a NIC; the front end names it `system.nic[i]`.
    pub nic: Option<u16>,
    /// What is wrong.
    pub kind: ProblemKind,
}

/// Which domain a [`Problem`] is about.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DomainRef {
    /// Its position in [`Manifest::domains`] (0-based).
    pub index: usize,
    /// Its name as written (possibly the invalid name the problem is about).
    pub name: String,
}

/// Which channel a [`Problem`] is about.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ChannelRef {
    /// Its position in [`Manifest::channels`] (0-based).
    pub index: usize,
    /// Its name as written (possibly the invalid name the problem is about).
    pub name: String,
}

/// What is wrong, for [`Problem`]. Its `Display` is the reason without naming the domain.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ProblemKind {
    /// The manifest declares no domain.
    NoDomains,
    /// More than [`MAX_DOMAINS`] domains.
    TooManyDomains {
        /// How many the manifest declares.
        count: usize,
    },
    /// System memory is not a multiple of [`MEMORY_ALIGN`].
    MemoryUnaligned {
        /// System memory in bytes.
        memory: u64,
    },
    /// System memory is above [`MAX_MEMORY`], more than some [`Machine`](crate::Machine)
    /// can give.
    MemoryTooLarge {
        /// System memory in bytes.
        memory: u64,
    },
    /// System memory is below [`MIN_MEMORY`].
    MemoryTooSmall {
        /// System memory in bytes.
        memory: u64,
    },
    /// The guarantees of the domains up to and including this one, plus [`KERNEL_RESERVE`],
    /// exceed system memory.
    OverCapacity {
        /// The sum of the guarantees up to and including this domain, in bytes (saturating).
        guaranteed: u64,
        /// System memory in bytes.
        memory: u64,
    },
    /// The domain's name is empty.
    NameEmpty,
    /// The domain's name is longer than [`MAX_NAME_LEN`] bytes.
    NameTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The domain's name has a character outside `[a-z0-9-]`.
    NameBadChar {
        /// The first such character.
        ch: char,
    },
    /// Another domain before this one has the same name.
    DuplicateName {
        /// The index of the first domain with this name.
        first: usize,
    },
    /// The app name is empty.
    AppEmpty,
    /// The app name is longer than [`MAX_NAME_LEN`] bytes.
    AppTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The app name has a character outside `[a-z0-9-]`.
    AppBadChar {
        /// The first such character.
        ch: char,
    },
    /// More than [`MAX_ARGS`] arguments.
    TooManyArgs {
        /// How many the domain has.
        count: usize,
    },
    /// An argument longer than [`MAX_ARG_LEN`] bytes.
    ArgTooLong {
        /// Which argument (0-based).
        arg: usize,
        /// Its length in bytes.
        len: usize,
    },
    /// `guaranteed` is zero.
    GuaranteedZero,
    /// `guaranteed` is not a multiple of [`PAGE_SIZE`].
    GuaranteedUnaligned {
        /// The value in bytes.
        bytes: u64,
    },
    /// `optimistic` is not a multiple of [`PAGE_SIZE`].
    OptimisticUnaligned {
        /// The value in bytes.
        bytes: u64,
    },
    /// `address_space` is below [`MIN_ADDRESS_SPACE`].
    AddressSpaceTooSmall {
        /// The value in bytes.
        bytes: u64,
    },
    /// `address_space` is not a multiple of [`ADDRESS_SPACE_ALIGN`].
    AddressSpaceUnaligned {
        /// The value in bytes.
        bytes: u64,
    },
    /// The address-space quotas of the domains up to and including this one exceed
    /// [`STRETCH_REGION`].
    AddressSpaceOverCapacity {
        /// The sum of the quotas up to and including this domain, in bytes (saturating).
        total: u64,
    },
    /// The problem's domain sends on channels whose ranges, with its stack and control block
    /// and a guard page below each, do not fit in its address space; the problem's channel is
    /// the first one that does not fit.
    SenderAddressSpaceTooSmall {
        /// The domain's address-space quota in bytes.
        address_space: u64,
        /// What it needs, in bytes (see [`Manifest::address_space_charged_to`]).
        needed: u64,
    },
    /// More than [`MAX_CHANNELS`] channels (the problem's channel is the first extra one).
    TooManyChannels {
        /// How many the manifest declares.
        count: usize,
    },
    /// The channel's name is empty.
    ChannelNameEmpty,
    /// The channel's name is longer than [`MAX_NAME_LEN`] bytes.
    ChannelNameTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The channel's name has a character outside `[a-z0-9-]`.
    ChannelNameBadChar {
        /// The first such character.
        ch: char,
    },
    /// Another channel before this one has the same name.
    DuplicateChannelName {
        /// The index of the first channel with this name.
        first: usize,
    },
    /// The channel's `from` is not the index of a domain.
    FromOutOfRange {
        /// The index.
        index: usize,
        /// How many domains there are.
        domains: usize,
    },
    /// The channel's `to` is not the index of a domain.
    ToOutOfRange {
        /// The index.
        index: usize,
        /// How many domains there are.
        domains: usize,
    },
    /// The channel's `from` and `to` are the same domain (the problem's domain).
    SameEnds,
    /// `slots` is not a power of two in [`MIN_SLOTS`]`..=`[`MAX_SLOTS`].
    SlotsInvalid {
        /// The value.
        slots: u32,
    },
    /// `slot_size` is not a multiple of [`SLOT_ALIGN`] in
    /// [`MIN_SLOT_SIZE`]`..=`[`MAX_SLOT_SIZE`].
    SlotSizeInvalid {
        /// The value in bytes.
        slot_size: u64,
    },
    /// The channel's memory ([`ChannelSpec::bytes`](crate::ChannelSpec::bytes)) exceeds
    /// [`MAX_CHANNEL_BYTES`].
    ChannelTooLarge {
        /// The channel's memory in bytes.
        bytes: u64,
    },
    /// The problem's domain is an end of more than [`MAX_CHANNELS_PER_DOMAIN`] channels; the
    /// problem's channel is the first one too many.
    TooManyChannelEnds {
        /// How many channels the domain is an end of.
        count: usize,
    },
    /// The problem's domain sends on channels whose memory, with the domain's fixed frames
    /// ([`DOMAIN_FIXED_FRAMES`]), does not fit in its guarantee; the problem's channel is the
    /// first one that does not fit.
    SenderGuaranteeTooSmall {
        /// The domain's guaranteed memory in bytes.
        guaranteed: u64,
        /// What it needs: [`DOMAIN_FIXED_FRAMES`] pages plus the memory of every channel it
        /// sends on, in bytes (see [`Manifest::charged_to`]).
        needed: u64,
    },
    /// The domain's CPU contract is invalid by itself ([`atropos::Contract::validate`]).
    CpuContractInvalid {
        /// The contract.
        cpu: CpuSpec,
        /// What is wrong with it.
        error: ContractError,
    },
    /// The CPU contracts of the domains up to and including this one sum to more than the CPU
    /// left after the kernel's reserve ([`atropos::admit`]).
    CpuOverCapacity {
        /// The sum of `slice / period` up to and including this domain, in parts per billion
        /// (each share rounded up, the sum saturating).
        total_ppb: u64,
    },
    /// The domain's disk-time contract is invalid by itself ([`atropos::Contract::validate`]).
    DiskContractInvalid {
        /// The contract.
        disk: CpuSpec,
        /// What is wrong with it.
        error: ContractError,
    },
    /// The disk-time contracts of a driver domain's clients (the domains with a channel to it
    /// and a `disk` contract), up to and including this one, sum to more than the disk time it
    /// can guarantee ([`atropos::admit`]: the rest is kept for best-effort streams).
    DiskOverCapacity {
        /// The driver domain's index.
        driver: usize,
        /// The sum of `slice / period`, in parts per billion.
        total_ppb: u64,
    },
    /// The domain's link-time contract is invalid by itself ([`atropos::Contract::validate`]).
    NetContractInvalid {
        /// The contract.
        net: CpuSpec,
        /// What is wrong with it.
        error: ContractError,
    },
    /// The link-time contracts of a network driver's clients (the domains with a channel to a
    /// domain granted a NIC; one without `net` counted at [`crate::NET_BEST_EFFORT`]), up to
    /// and including this one, sum to more than the link time the driver can guarantee
    /// ([`atropos::admit`]).
    NetOverCapacity {
        /// The driver domain's index.
        driver: usize,
        /// The sum of `slice / period`, in parts per billion.
        total_ppb: u64,
    },
    /// More than [`MAX_DISKS`] disks (the problem's disk is the first extra one).
    TooManyDisks {
        /// How many the manifest declares.
        count: usize,
    },
    /// The disk's name is empty.
    DiskNameEmpty,
    /// The disk's name is longer than [`MAX_NAME_LEN`] bytes.
    DiskNameTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The disk's name has a character outside `[a-z0-9-]`.
    DiskNameBadChar {
        /// The first such character.
        ch: char,
    },
    /// Another disk before this one has the same name.
    DuplicateDiskName {
        /// The index of the first disk with this name.
        first: usize,
    },
    /// The disk's size is not a multiple of [`SECTOR_SIZE`] in
    /// [`MIN_DISK_SIZE`]`..=`[`MAX_DISK_SIZE`].
    DiskSizeInvalid {
        /// The size in bytes.
        size: u64,
    },
    /// The manifest is placed for a machine without the disk's bus (AHCI on `virt`).
    BusNotOnMachine {
        /// The bus.
        bus: DiskBus,
        /// The machine.
        machine: Machine,
    },
    /// The disk's device address is not where the host tool attaches it on the manifest's
    /// machine ([`Machine::disk_address`]), or is set in a manifest not placed.
    DiskMisplaced {
        /// Its address.
        at: Option<DeviceAddress>,
        /// Where it should be.
        expected: Option<DeviceAddress>,
    },
    /// More than [`MAX_NICS`] NICs (the problem's NIC is the first extra one).
    TooManyNics {
        /// How many the manifest declares.
        count: usize,
    },
    /// The NIC's name is empty, too long or has a character outside `[a-z0-9-]`.
    NicNameInvalid,
    /// Another NIC before this one has the same name.
    DuplicateNicName {
        /// The index of the first NIC with this name.
        first: usize,
    },
    /// The NIC's MAC address is a multicast address (the low bit of its first byte set) or
    /// all zeros.
    NicMacInvalid,
    /// Another NIC before this one has the same MAC address.
    DuplicateNicMac {
        /// The index of the first NIC with this address.
        first: usize,
    },
    /// The manifest is placed for a machine with no room for the NIC: on `virt` the disks
    /// and NICs together take more than its [`VIRTIO_MMIO_UNITS`] virtio-mmio transports.
    NicNoRoom {
        /// How many disks the manifest declares.
        disks: usize,
        /// The machine.
        machine: Machine,
    },
    /// The NIC's device address is not where the host tool attaches it on the manifest's
    /// machine ([`Machine::nic_address`]), or is set in a manifest not placed.
    NicMisplaced {
        /// Its address.
        at: Option<DeviceAddress>,
        /// Where it should be.
        expected: Option<DeviceAddress>,
    },
    /// `driver = true` on a domain granted no device.
    DriverWithoutDevices,
    /// A domain granted devices without `driver = true`.
    DevicesWithoutDriver,
    /// More than [`MAX_DEVICES_PER_DOMAIN`] device grants in one domain.
    TooManyDevices {
        /// How many the domain has.
        count: usize,
    },
    /// A `{ disk = ... }` grant names no disk of the manifest.
    UnknownDisk {
        /// Which grant of the domain (0-based).
        grant: usize,
        /// The disk index.
        disk: usize,
        /// How many disks there are.
        disks: usize,
    },
    /// A `{ nic = ... }` grant names no NIC of the manifest.
    UnknownNic {
        /// Which grant of the domain (0-based).
        grant: usize,
        /// The NIC index.
        nic: usize,
        /// How many NICs there are.
        nics: usize,
    },
    /// A `{ compatible = ... }` grant's string is empty, longer than [`MAX_COMPATIBLE_LEN`]
    /// bytes, or not printable ASCII without spaces.
    CompatibleInvalid {
        /// Which grant of the domain (0-based).
        grant: usize,
    },
    /// The manifest is placed for a machine where the grant cannot name a device: a
    /// `compatible` grant on `q35`, which has no device tree.
    GrantNotOnMachine {
        /// Which grant of the domain (0-based).
        grant: usize,
        /// The machine.
        machine: Machine,
    },
    /// The grant's device is granted already, to this domain or an earlier one.
    DeviceGrantedTwice {
        /// Which grant of the domain (0-based).
        grant: usize,
        /// The domain of the first grant.
        first_domain: usize,
        /// Which grant of that domain.
        first_grant: usize,
    },
}

/// The part of a manifest a [`ProblemKind`] is about (for the front end's key paths).
#[cfg_attr(not(feature = "toml"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    /// The list of domains as a whole.
    Domains,
    /// `system.memory`.
    SystemMemory,
    /// `domain[i].name`.
    Name,
    /// `domain[i].app`.
    App,
    /// `domain[i].args`.
    Args,
    /// `domain[i].args[j]`.
    Arg(usize),
    /// `domain[i].memory.guaranteed`.
    Guaranteed,
    /// `domain[i].memory.optimistic`.
    Optimistic,
    /// `domain[i].memory.address_space`.
    AddressSpace,
    /// The list of channels as a whole, or one channel's table.
    Channels,
    /// `channel[i].name`.
    ChannelName,
    /// `channel[i].from`.
    ChannelFrom,
    /// `channel[i].to`.
    ChannelTo,
    /// `channel[i].from` or `channel[i].to`, whichever is the problem's domain.
    ChannelEnd,
    /// `channel[i].slots`.
    ChannelSlots,
    /// `channel[i].slot_size`.
    ChannelSlotSize,
    /// `domain[i].cpu` as a whole.
    Cpu,
    /// `domain[i].cpu.period`.
    CpuPeriod,
    /// `domain[i].cpu.slice`.
    CpuSlice,
    /// `domain[i].cpu.latency`.
    CpuLatency,
    /// `domain[i].disk` as a whole.
    DiskContract,
    /// `domain[i].disk.period`.
    DiskPeriod,
    /// `domain[i].disk.slice`.
    DiskSlice,
    /// `domain[i].disk.latency`.
    DiskLatency,
    /// `domain[i].net` as a whole.
    NetContract,
    /// `domain[i].net.period`.
    NetPeriod,
    /// `domain[i].net.slice`.
    NetSlice,
    /// `domain[i].net.latency`.
    NetLatency,
    /// `system.disk` as a whole.
    Disks,
    /// `system.disk[i]` (its table).
    Disk,
    /// `system.disk[i].name`.
    DiskName,
    /// `system.disk[i].size`.
    DiskSize,
    /// `system.disk[i].bus`.
    DiskBus,
    /// `system.nic` as a whole.
    Nics,
    /// `system.nic[i]` (its table).
    Nic,
    /// `system.nic[i].name`.
    NicName,
    /// `system.nic[i].mac` (or its table if it has none).
    NicMac,
    /// `domain[i].driver` (or the domain's table if it has none).
    Driver,
    /// `domain[i].devices` as a whole.
    Devices,
    /// `domain[i].devices[j]`.
    Device(usize),
}

impl ProblemKind {
    /// The part of the manifest at fault.
    #[cfg_attr(not(feature = "toml"), allow(dead_code))]
    pub(crate) fn field(&self) -> Field {
        match self {
            Self::NoDomains | Self::TooManyDomains { .. } => Field::Domains,
            Self::MemoryUnaligned { .. }
            | Self::MemoryTooSmall { .. }
            | Self::MemoryTooLarge { .. } => Field::SystemMemory,
            Self::NameEmpty
            | Self::NameTooLong { .. }
            | Self::NameBadChar { .. }
            | Self::DuplicateName { .. } => Field::Name,
            Self::AppEmpty | Self::AppTooLong { .. } | Self::AppBadChar { .. } => Field::App,
            Self::TooManyArgs { .. } => Field::Args,
            Self::ArgTooLong { arg, .. } => Field::Arg(*arg),
            Self::OverCapacity { .. }
            | Self::GuaranteedZero
            | Self::GuaranteedUnaligned { .. }
            | Self::SenderGuaranteeTooSmall { .. } => Field::Guaranteed,
            Self::OptimisticUnaligned { .. } => Field::Optimistic,
            Self::AddressSpaceTooSmall { .. }
            | Self::AddressSpaceUnaligned { .. }
            | Self::AddressSpaceOverCapacity { .. }
            | Self::SenderAddressSpaceTooSmall { .. } => Field::AddressSpace,
            Self::TooManyChannels { .. } | Self::ChannelTooLarge { .. } => Field::Channels,
            Self::ChannelNameEmpty
            | Self::ChannelNameTooLong { .. }
            | Self::ChannelNameBadChar { .. }
            | Self::DuplicateChannelName { .. } => Field::ChannelName,
            Self::FromOutOfRange { .. } => Field::ChannelFrom,
            Self::ToOutOfRange { .. } | Self::SameEnds => Field::ChannelTo,
            Self::TooManyChannelEnds { .. } => Field::ChannelEnd,
            Self::SlotsInvalid { .. } => Field::ChannelSlots,
            Self::SlotSizeInvalid { .. } => Field::ChannelSlotSize,
            Self::CpuContractInvalid { error, .. } => match error {
                ContractError::ZeroPeriod
                | ContractError::PeriodTooShort
                | ContractError::PeriodTooLong => Field::CpuPeriod,
                ContractError::ZeroSlice
                | ContractError::SliceTooShort
                | ContractError::SliceExceedsPeriod => Field::CpuSlice,
                ContractError::ZeroLatency
                | ContractError::LatencyTooShort
                | ContractError::LatencyTooLong => Field::CpuLatency,
            },
            Self::CpuOverCapacity { .. } => Field::Cpu,
            Self::DiskContractInvalid { error, .. } => match error {
                ContractError::ZeroPeriod
                | ContractError::PeriodTooShort
                | ContractError::PeriodTooLong => Field::DiskPeriod,
                ContractError::ZeroSlice
                | ContractError::SliceTooShort
                | ContractError::SliceExceedsPeriod => Field::DiskSlice,
                ContractError::ZeroLatency
                | ContractError::LatencyTooShort
                | ContractError::LatencyTooLong => Field::DiskLatency,
            },
            Self::DiskOverCapacity { .. } => Field::DiskContract,
            Self::NetContractInvalid { error, .. } => match error {
                ContractError::ZeroPeriod
                | ContractError::PeriodTooShort
                | ContractError::PeriodTooLong => Field::NetPeriod,
                ContractError::ZeroSlice
                | ContractError::SliceTooShort
                | ContractError::SliceExceedsPeriod => Field::NetSlice,
                ContractError::ZeroLatency
                | ContractError::LatencyTooShort
                | ContractError::LatencyTooLong => Field::NetLatency,
            },
            Self::NetOverCapacity { .. } => Field::NetContract,
            Self::TooManyDisks { .. } => Field::Disks,
            Self::DiskMisplaced { .. } => Field::Disk,
            Self::DiskNameEmpty
            | Self::DiskNameTooLong { .. }
            | Self::DiskNameBadChar { .. }
            | Self::DuplicateDiskName { .. } => Field::DiskName,
            Self::DiskSizeInvalid { .. } => Field::DiskSize,
            Self::BusNotOnMachine { .. } => Field::DiskBus,
            Self::DriverWithoutDevices => Field::Driver,
            Self::DevicesWithoutDriver | Self::TooManyDevices { .. } => Field::Devices,
            Self::TooManyNics { .. } => Field::Nics,
            Self::NicNameInvalid | Self::DuplicateNicName { .. } => Field::NicName,
            Self::NicMacInvalid | Self::DuplicateNicMac { .. } => Field::NicMac,
            Self::NicNoRoom { .. } | Self::NicMisplaced { .. } => Field::Nic,
            Self::UnknownDisk { grant, .. }
            | Self::UnknownNic { grant, .. }
            | Self::CompatibleInvalid { grant }
            | Self::GrantNotOnMachine { grant, .. }
            | Self::DeviceGrantedTwice { grant, .. } => Field::Device(*grant),
        }
    }
}

/// The values of a contract that an invalid-contract error is about, after its description.
fn describe_contract(
    f: &mut fmt::Formatter<'_>,
    c: &CpuSpec,
    error: &ContractError,
) -> fmt::Result {
    let (period, slice, latency) = (Time(c.period_ns), Time(c.slice_ns), Time(c.latency_ns));
    match error {
        ContractError::ZeroPeriod | ContractError::ZeroSlice | ContractError::ZeroLatency => Ok(()),
        ContractError::PeriodTooShort | ContractError::PeriodTooLong => {
            write!(f, " (period {period})")
        }
        ContractError::SliceTooShort => write!(f, " (slice {slice})"),
        ContractError::SliceExceedsPeriod => write!(f, " (slice {slice}, period {period})"),
        ContractError::LatencyTooShort | ContractError::LatencyTooLong => {
            write!(f, " (latency {latency})")
        }
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDomains => write!(f, "no domains: a manifest needs at least one [[domain]]"),
            Self::TooManyDomains { count } => {
                write!(f, "too many domains: {count} (at most {MAX_DOMAINS})")
            }
            Self::MemoryUnaligned { memory } => write!(
                f,
                "system memory {} is not a multiple of {}",
                Bytes(*memory),
                Bytes(MEMORY_ALIGN)
            ),
            Self::MemoryTooLarge { memory } => write!(
                f,
                "system memory {} is above the maximum of {}: {} gives a kernel at most {} \
                 (its RAM starts at 2G and the kernel's direct map ends at 64G), {} at most {}",
                Bytes(*memory),
                Bytes(MAX_MEMORY),
                Machine::RiscvVirt.name(),
                Bytes(Machine::RiscvVirt.max_memory()),
                Machine::Q35.name(),
                Bytes(Machine::Q35.max_memory())
            ),
            Self::MemoryTooSmall { memory } => write!(
                f,
                "system memory {} is below the minimum of {}",
                Bytes(*memory),
                Bytes(MIN_MEMORY)
            ),
            Self::OverCapacity { guaranteed, memory } => write!(
                f,
                "memory over capacity: the guarantees up to this domain total {}, plus the \
                 kernel reserve of {}, exceed the system memory of {}",
                Bytes(*guaranteed),
                Bytes(KERNEL_RESERVE),
                Bytes(*memory)
            ),
            Self::NameEmpty => write!(f, "empty domain name"),
            Self::NameTooLong { len } => {
                write!(f, "domain name is {len} bytes long (at most {MAX_NAME_LEN})")
            }
            Self::NameBadChar { ch } => {
                write!(f, "domain name contains {ch:?} (use only a-z, 0-9 and '-')")
            }
            Self::DuplicateName { first } => {
                write!(f, "duplicate domain name (first used by domain {first})")
            }
            Self::AppEmpty => write!(f, "empty app name"),
            Self::AppTooLong { len } => {
                write!(f, "app name is {len} bytes long (at most {MAX_NAME_LEN})")
            }
            Self::AppBadChar { ch } => {
                write!(f, "app name contains {ch:?} (use only a-z, 0-9 and '-')")
            }
            Self::TooManyArgs { count } => {
                write!(f, "too many args: {count} (at most {MAX_ARGS})")
            }
            Self::ArgTooLong { arg, len } => {
                write!(f, "arg {arg} is {len} bytes long (at most {MAX_ARG_LEN})")
            }
            Self::GuaranteedZero => write!(
                f,
                "guaranteed memory is 0 (a domain needs at least one page, {})",
                Bytes(PAGE_SIZE)
            ),
            Self::GuaranteedUnaligned { bytes } => write!(
                f,
                "guaranteed memory {} is not a multiple of the page size ({})",
                Bytes(*bytes),
                Bytes(PAGE_SIZE)
            ),
            Self::OptimisticUnaligned { bytes } => write!(
                f,
                "optimistic memory {} is not a multiple of the page size ({})",
                Bytes(*bytes),
                Bytes(PAGE_SIZE)
            ),
            Self::AddressSpaceTooSmall { bytes } => write!(
                f,
                "address space {} is below the minimum of {}",
                Bytes(*bytes),
                Bytes(MIN_ADDRESS_SPACE)
            ),
            Self::AddressSpaceUnaligned { bytes } => write!(
                f,
                "address space {} is not a multiple of {}",
                Bytes(*bytes),
                Bytes(ADDRESS_SPACE_ALIGN)
            ),
            Self::AddressSpaceOverCapacity { total } => write!(
                f,
                "address space over capacity: the quotas up to this domain total {}, more than \
                 the stretch region of {} (each domain has its own partition of it; a domain \
                 without a quota gets an equal share of what the others leave, at most {})",
                Bytes(*total),
                Bytes(STRETCH_REGION),
                Bytes(DEFAULT_ADDRESS_SPACE)
            ),
            Self::SenderAddressSpaceTooSmall { address_space, needed } => write!(
                f,
                "address space {} cannot hold the channels this domain sends on: it needs {} \
                 ({} of stack and control block, the channels' memory, and a guard page of {} \
                 below each)",
                Bytes(*address_space),
                Bytes(*needed),
                Bytes(DOMAIN_FIXED_FRAMES * PAGE_SIZE),
                Bytes(GUARD_BYTES)
            ),
            Self::TooManyChannels { count } => {
                write!(f, "too many channels: {count} (at most {MAX_CHANNELS})")
            }
            Self::ChannelNameEmpty => write!(f, "empty channel name"),
            Self::ChannelNameTooLong { len } => {
                write!(f, "channel name is {len} bytes long (at most {MAX_NAME_LEN})")
            }
            Self::ChannelNameBadChar { ch } => {
                write!(f, "channel name contains {ch:?} (use only a-z, 0-9 and '-')")
            }
            Self::DuplicateChannelName { first } => {
                write!(f, "duplicate channel name (first used by channel {first})")
            }
            Self::FromOutOfRange { index, domains } => {
                write!(f, "sending domain {index} does not exist (there are {domains} domains)")
            }
            Self::ToOutOfRange { index, domains } => {
                write!(f, "receiving domain {index} does not exist (there are {domains} domains)")
            }
            Self::SameEnds => write!(
                f,
                "a channel connects two different domains, but `from` and `to` are the same"
            ),
            Self::SlotsInvalid { slots } => {
                let what =
                    if slots.is_power_of_two() { "out of range" } else { "not a power of two" };
                write!(
                    f,
                    "slots {slots} is {what} (a power of two from {MIN_SLOTS} to {MAX_SLOTS})"
                )
            }
            Self::SlotSizeInvalid { slot_size } => {
                let what = if slot_size.is_multiple_of(u64::from(SLOT_ALIGN)) {
                    "out of range"
                } else {
                    "not a multiple of 8"
                };
                write!(
                    f,
                    "slot size {} is {what} (a multiple of {SLOT_ALIGN} bytes from \
                     {MIN_SLOT_SIZE} to {MAX_SLOT_SIZE})",
                    Bytes(*slot_size)
                )
            }
            Self::ChannelTooLarge { bytes } => write!(
                f,
                "channel memory {} (a 64-byte header plus slots × slot_size, in whole pages) \
                 exceeds the maximum of {}",
                Bytes(*bytes),
                Bytes(MAX_CHANNEL_BYTES)
            ),
            Self::TooManyChannelEnds { count } => write!(
                f,
                "the domain is an end of {count} channels (at most {MAX_CHANNELS_PER_DOMAIN})"
            ),
            Self::SenderGuaranteeTooSmall { guaranteed, needed } => write!(
                f,
                "guaranteed memory {} cannot hold the channels this domain sends on: it needs \
                 {} ({} of stack and control block plus the channels' memory)",
                Bytes(*guaranteed),
                Bytes(*needed),
                Bytes(DOMAIN_FIXED_FRAMES * PAGE_SIZE)
            ),
            Self::CpuContractInvalid { cpu, error } => {
                write!(f, "invalid CPU contract: {}", error.describe())?;
                describe_contract(f, cpu, error)
            }
            Self::DiskContractInvalid { disk, error } => {
                write!(f, "invalid disk-time contract: {}", error.describe())?;
                describe_contract(f, disk, error)
            }
            Self::DiskOverCapacity { total_ppb, .. } => {
                let tenths = total_ppb.div_ceil(PPB / 1000);
                write!(
                    f,
                    "disk-time contracts over capacity: with this domain the slices of the \
                     driver's clients sum to {}.{}% of the disk, more than the {}% it \
                     guarantees (the rest is kept for best-effort streams)",
                    tenths / 10,
                    tenths % 10,
                    CAPACITY_PPB / (PPB / 100),
                )
            }
            Self::NetContractInvalid { net, error } => {
                write!(f, "invalid link-time contract: {}", error.describe())?;
                describe_contract(f, net, error)
            }
            Self::NetOverCapacity { total_ppb, .. } => {
                let tenths = total_ppb.div_ceil(PPB / 1000);
                write!(
                    f,
                    "link-time contracts over capacity: with this domain the slices of the \
                     network driver's clients (best-effort ones at 1 ms every 10 ms) sum to \
                     {}.{}% of the link, more than the {}% it guarantees",
                    tenths / 10,
                    tenths % 10,
                    CAPACITY_PPB / (PPB / 100),
                )
            }
            Self::CpuOverCapacity { total_ppb } => {
                // Tenths of a percent, rounded up so that a sum just over the capacity never
                // reads as equal to it.
                let tenths = total_ppb.div_ceil(PPB / 1000);
                write!(
                    f,
                    "CPU contracts over capacity: with this domain the slices sum to {}.{}% of \
                     the CPU, more than the {}% left after the kernel's {}% reserve",
                    tenths / 10,
                    tenths % 10,
                    CAPACITY_PPB / (PPB / 100),
                    KERNEL_RESERVE_PERCENT
                )
            }
            Self::TooManyDisks { count } => {
                write!(f, "too many disks: {count} (at most {MAX_DISKS})")
            }
            Self::DiskNameEmpty => write!(f, "empty disk name"),
            Self::DiskNameTooLong { len } => {
                write!(f, "disk name is {len} bytes long (at most {MAX_NAME_LEN})")
            }
            Self::DiskNameBadChar { ch } => {
                write!(f, "disk name contains {ch:?} (use only a-z, 0-9 and '-')")
            }
            Self::DuplicateDiskName { first } => {
                write!(f, "duplicate disk name (first used by disk {first})")
            }
            Self::DiskSizeInvalid { size } => {
                let what = if size.is_multiple_of(SECTOR_SIZE) {
                    "out of range"
                } else {
                    "not a multiple of the 512-byte sector"
                };
                write!(
                    f,
                    "disk size {} is {what} (a multiple of {SECTOR_SIZE} bytes from {} to {})",
                    Bytes(*size),
                    Bytes(MIN_DISK_SIZE),
                    Bytes(MAX_DISK_SIZE)
                )
            }
            Self::BusNotOnMachine { bus, machine } => write!(
                f,
                "{machine} has no {} bus: AHCI disks are for {} only (use bus = \"virtio\")",
                bus.name(),
                Machine::Q35.name(),
                machine = machine.name()
            ),
            Self::DiskMisplaced { at, expected } => write!(
                f,
                "the disk's device address is {at:?}, but it is attached at {expected:?} on \
                 this machine"
            ),
            Self::DriverWithoutDevices => write!(
                f,
                "driver = true, but the domain is granted no device (driver marks a domain \
                 trusted because it drives devices; give it `devices` or leave driver out)"
            ),
            Self::DevicesWithoutDriver => write!(
                f,
                "the domain is granted devices but is not marked `driver = true`: without an \
                 IOMMU a device can write anywhere in memory, so a driver domain is trusted \
                 and the manifest must say so"
            ),
            Self::TooManyDevices { count } => {
                write!(f, "too many device grants: {count} (at most {MAX_DEVICES_PER_DOMAIN})")
            }
            Self::UnknownDisk { disk, disks, .. } => {
                write!(f, "disk {disk} does not exist (there are {disks} disks)")
            }
            Self::UnknownNic { nic, nics, .. } => {
                write!(f, "NIC {nic} does not exist (there are {nics} NICs)")
            }
            Self::TooManyNics { count } => {
                write!(f, "too many NICs: {count} (at most {MAX_NICS})")
            }
            Self::NicNameInvalid => {
                write!(f, "invalid NIC name (1 to {MAX_NAME_LEN} bytes of a-z, 0-9 and '-')")
            }
            Self::DuplicateNicName { first } => {
                write!(f, "duplicate NIC name (first used by NIC {first})")
            }
            Self::NicMacInvalid => write!(
                f,
                "the MAC address is not a unicast address (the low bit of its first byte must \
                 be 0, and it must not be all zeros)"
            ),
            Self::DuplicateNicMac { first } => {
                write!(f, "duplicate MAC address (first used by NIC {first})")
            }
            Self::NicNoRoom { disks, machine } => write!(
                f,
                "{} has {VIRTIO_MMIO_UNITS} virtio-mmio transports for disks and NICs \
                 together, and its {disks} disks and the NICs up to this one need more",
                machine.name()
            ),
            Self::NicMisplaced { at, expected } => write!(
                f,
                "the NIC's device address is {at:?}, but it is attached at {expected:?} on \
                 this machine"
            ),
            Self::CompatibleInvalid { .. } => write!(
                f,
                "invalid compatible string (1 to {MAX_COMPATIBLE_LEN} bytes of printable \
                 ASCII without spaces, e.g. \"virtio,mmio\")"
            ),
            Self::GrantNotOnMachine { machine, .. } => write!(
                f,
                "{} has no device tree: grant its devices by `disk`, `pci` or `pci_class`",
                machine.name()
            ),
            Self::DeviceGrantedTwice { first_domain, first_grant, .. } => write!(
                f,
                "the device is granted already (domain {first_domain}, grant {first_grant}): a \
                 device is granted to at most one domain"
            ),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = &self.domain {
            write!(f, "domain {} ({:?}): ", d.index, d.name)?;
        }
        if let Some(c) = &self.channel {
            write!(f, "channel {} ({:?}): ", c.index, c.name)?;
        }
        if let Some(d) = self.disk {
            write!(f, "disk {d}: ")?;
        }
        if let Some(n) = self.nic {
            write!(f, "NIC {n}: ")?;
        }
        write!(f, "{}", self.kind)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Problem {}

/// The first character of `s` outside `[a-z0-9-]`, if any.
fn bad_char(s: &str) -> Option<char> {
    s.chars().find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '-'))
}

/// Is `slots` a valid number of channel slots?
fn slots_valid(slots: u32) -> bool {
    slots.is_power_of_two() && (MIN_SLOTS..=MAX_SLOTS).contains(&slots)
}

/// Is `slot_size` a valid channel slot size?
fn slot_size_valid(slot_size: u32) -> bool {
    slot_size.is_multiple_of(SLOT_ALIGN) && (MIN_SLOT_SIZE..=MAX_SLOT_SIZE).contains(&slot_size)
}

impl Manifest {
    /// Checks the semantic rules (see the [crate documentation](crate)); returns the first
    /// problem found, in this order: system, each domain in turn, each channel in turn, channel
    /// ends per domain, senders' guarantees, senders' address spaces, memory capacity,
    /// address-space capacity, then CPU admission.
    pub fn check(&self) -> Result<(), Problem> {
        let system = |kind| Problem { domain: None, channel: None, disk: None, nic: None, kind };
        let domain_ref = |index: usize| {
            self.domains.get(index).map(|d| DomainRef { index, name: d.name.clone() })
        };
        let channel_ref = |index: usize| {
            self.channels.get(index).map(|c| ChannelRef { index, name: c.name.clone() })
        };
        if self.domains.is_empty() {
            return Err(system(ProblemKind::NoDomains));
        }
        if self.domains.len() > MAX_DOMAINS {
            let kind = ProblemKind::TooManyDomains { count: self.domains.len() };
            return Err(Problem {
                domain: domain_ref(MAX_DOMAINS),
                channel: None,
                disk: None,
                nic: None,
                kind,
            });
        }
        if !self.memory.is_multiple_of(MEMORY_ALIGN) {
            return Err(system(ProblemKind::MemoryUnaligned { memory: self.memory }));
        }
        if self.memory < MIN_MEMORY {
            return Err(system(ProblemKind::MemoryTooSmall { memory: self.memory }));
        }
        if self.memory > MAX_MEMORY {
            return Err(system(ProblemKind::MemoryTooLarge { memory: self.memory }));
        }
        self.check_disks()?;
        self.check_nics()?;
        for (index, d) in self.domains.iter().enumerate() {
            let problem = |kind| Problem {
                domain: domain_ref(index),
                channel: None,
                disk: None,
                nic: None,
                kind,
            };
            if d.name.is_empty() {
                return Err(problem(ProblemKind::NameEmpty));
            }
            if d.name.len() > MAX_NAME_LEN {
                return Err(problem(ProblemKind::NameTooLong { len: d.name.len() }));
            }
            if let Some(ch) = bad_char(&d.name) {
                return Err(problem(ProblemKind::NameBadChar { ch }));
            }
            if let Some(first) = self.domains[..index].iter().position(|e| e.name == d.name) {
                return Err(problem(ProblemKind::DuplicateName { first }));
            }
            if d.app.is_empty() {
                return Err(problem(ProblemKind::AppEmpty));
            }
            if d.app.len() > MAX_NAME_LEN {
                return Err(problem(ProblemKind::AppTooLong { len: d.app.len() }));
            }
            if let Some(ch) = bad_char(&d.app) {
                return Err(problem(ProblemKind::AppBadChar { ch }));
            }
            if d.args.len() > MAX_ARGS {
                return Err(problem(ProblemKind::TooManyArgs { count: d.args.len() }));
            }
            if let Some((arg, a)) = d.args.iter().enumerate().find(|(_, a)| a.len() > MAX_ARG_LEN) {
                return Err(problem(ProblemKind::ArgTooLong { arg, len: a.len() }));
            }
            if d.guaranteed == 0 {
                return Err(problem(ProblemKind::GuaranteedZero));
            }
            if !d.guaranteed.is_multiple_of(PAGE_SIZE) {
                return Err(problem(ProblemKind::GuaranteedUnaligned { bytes: d.guaranteed }));
            }
            if !d.optimistic.is_multiple_of(PAGE_SIZE) {
                return Err(problem(ProblemKind::OptimisticUnaligned { bytes: d.optimistic }));
            }
            if d.address_space < MIN_ADDRESS_SPACE {
                return Err(problem(ProblemKind::AddressSpaceTooSmall { bytes: d.address_space }));
            }
            if !d.address_space.is_multiple_of(ADDRESS_SPACE_ALIGN) {
                let bytes = d.address_space;
                return Err(problem(ProblemKind::AddressSpaceUnaligned { bytes }));
            }
            if let Err(error) = d.cpu.contract().validate() {
                return Err(problem(ProblemKind::CpuContractInvalid { cpu: d.cpu, error }));
            }
            if let Some(disk) = d.disk
                && let Err(error) = disk.contract().validate()
            {
                return Err(problem(ProblemKind::DiskContractInvalid { disk, error }));
            }
            if let Some(net) = d.net
                && let Err(error) = net.contract().validate()
            {
                return Err(problem(ProblemKind::NetContractInvalid { net, error }));
            }
            self.check_devices(index).map_err(problem)?;
        }
        if self.channels.len() > MAX_CHANNELS {
            let kind = ProblemKind::TooManyChannels { count: self.channels.len() };
            return Err(Problem {
                domain: None,
                channel: channel_ref(MAX_CHANNELS),
                disk: None,
                nic: None,
                kind,
            });
        }
        let domains = self.domains.len();
        for (index, c) in self.channels.iter().enumerate() {
            let problem = |kind| Problem {
                domain: None,
                channel: channel_ref(index),
                disk: None,
                nic: None,
                kind,
            };
            if c.name.is_empty() {
                return Err(problem(ProblemKind::ChannelNameEmpty));
            }
            if c.name.len() > MAX_NAME_LEN {
                return Err(problem(ProblemKind::ChannelNameTooLong { len: c.name.len() }));
            }
            if let Some(ch) = bad_char(&c.name) {
                return Err(problem(ProblemKind::ChannelNameBadChar { ch }));
            }
            if let Some(first) = self.channels[..index].iter().position(|e| e.name == c.name) {
                return Err(problem(ProblemKind::DuplicateChannelName { first }));
            }
            if c.from >= domains {
                return Err(problem(ProblemKind::FromOutOfRange { index: c.from, domains }));
            }
            if c.to >= domains {
                return Err(problem(ProblemKind::ToOutOfRange { index: c.to, domains }));
            }
            if c.from == c.to {
                let domain = domain_ref(c.from);
                return Err(Problem {
                    domain,
                    channel: channel_ref(index),
                    disk: None,
                    nic: None,
                    kind: ProblemKind::SameEnds,
                });
            }
            if !slots_valid(c.slots) {
                return Err(problem(ProblemKind::SlotsInvalid { slots: c.slots }));
            }
            if !slot_size_valid(c.slot_size) {
                let slot_size = u64::from(c.slot_size);
                return Err(problem(ProblemKind::SlotSizeInvalid { slot_size }));
            }
            if c.bytes() > MAX_CHANNEL_BYTES {
                return Err(problem(ProblemKind::ChannelTooLarge { bytes: c.bytes() }));
            }
        }
        // Every index is now in range and every channel at most 1 MiB. The tallies are sized by
        // the manifest's domains, not by MAX_DOMAINS, so that raising the limit costs nothing
        // here.
        let mut ends = alloc::vec![0usize; self.domains.len()];
        for c in &self.channels {
            ends[c.from] += 1;
            ends[c.to] += 1;
        }
        let mut seen = alloc::vec![0usize; self.domains.len()];
        for (index, c) in self.channels.iter().enumerate() {
            for end in [c.from, c.to] {
                seen[end] += 1;
                if seen[end] > MAX_CHANNELS_PER_DOMAIN {
                    return Err(Problem {
                        domain: domain_ref(end),
                        channel: channel_ref(index),
                        disk: None,
                        nic: None,
                        kind: ProblemKind::TooManyChannelEnds { count: ends[end] },
                    });
                }
            }
        }
        let mut charged = alloc::vec![DOMAIN_FIXED_FRAMES * PAGE_SIZE; self.domains.len()];
        for (index, c) in self.channels.iter().enumerate() {
            charged[c.from] += c.bytes();
            let guaranteed = self.domains[c.from].guaranteed;
            if charged[c.from] > guaranteed {
                return Err(Problem {
                    domain: domain_ref(c.from),
                    channel: channel_ref(index),
                    disk: None,
                    nic: None,
                    kind: ProblemKind::SenderGuaranteeTooSmall {
                        guaranteed,
                        needed: self.charged_to(c.from),
                    },
                });
            }
        }
        // Channels are at most 1 MiB each and at most 64, so these sums do not overflow.
        let mut placed = alloc::vec![
            DOMAIN_FIXED_FRAMES * PAGE_SIZE + DOMAIN_FIXED_RANGES * GUARD_BYTES;
            self.domains.len()
        ];
        for (index, c) in self.channels.iter().enumerate() {
            placed[c.from] += c.bytes() + GUARD_BYTES;
            let address_space = self.domains[c.from].address_space;
            if placed[c.from] > address_space {
                return Err(Problem {
                    domain: domain_ref(c.from),
                    channel: channel_ref(index),
                    disk: None,
                    nic: None,
                    kind: ProblemKind::SenderAddressSpaceTooSmall {
                        address_space,
                        needed: self.address_space_charged_to(c.from),
                    },
                });
            }
        }
        let mut guaranteed = 0u64;
        for (index, d) in self.domains.iter().enumerate() {
            guaranteed = guaranteed.saturating_add(d.guaranteed);
            if guaranteed.saturating_add(KERNEL_RESERVE) > self.memory {
                return Err(Problem {
                    domain: domain_ref(index),
                    channel: None,
                    disk: None,
                    nic: None,
                    kind: ProblemKind::OverCapacity { guaranteed, memory: self.memory },
                });
            }
        }
        let mut total = 0u64;
        for (index, d) in self.domains.iter().enumerate() {
            total = total.saturating_add(d.address_space);
            if total > STRETCH_REGION {
                return Err(Problem {
                    domain: domain_ref(index),
                    channel: None,
                    disk: None,
                    nic: None,
                    kind: ProblemKind::AddressSpaceOverCapacity { total },
                });
            }
        }
        self.admit_disk_streams().map_err(|(index, kind)| Problem {
            domain: domain_ref(index),
            channel: None,
            disk: None,
            nic: None,
            kind,
        })?;
        self.admit_net_streams().map_err(|(index, kind)| Problem {
            domain: domain_ref(index),
            channel: None,
            disk: None,
            nic: None,
            kind,
        })?;
        let contracts: Vec<_> = self.domains.iter().map(|d| d.cpu.contract()).collect();
        match atropos::admit(&contracts) {
            Ok(_) => Ok(()),
            Err(AdmissionError::Invalid { index, error }) => Err(Problem {
                domain: domain_ref(index),
                channel: None,
                disk: None,
                nic: None,
                kind: ProblemKind::CpuContractInvalid { cpu: self.domains[index].cpu, error },
            }),
            Err(AdmissionError::OverCapacity { index, total_ppb }) => Err(Problem {
                domain: domain_ref(index),
                channel: None,
                disk: None,
                nic: None,
                kind: ProblemKind::CpuOverCapacity { total_ppb },
            }),
        }
    }
}

impl Manifest {
    /// The disks' rules: count, names, sizes, and on a placed manifest buses and addresses.
    fn check_disks(&self) -> Result<(), Problem> {
        let disk_ref = |index: usize| (index < self.disks.len()).then_some(index as u16);
        let problem = |index, kind| Problem {
            domain: None,
            channel: None,
            disk: disk_ref(index),
            nic: None,
            kind,
        };
        if self.disks.len() > MAX_DISKS {
            return Err(problem(MAX_DISKS, ProblemKind::TooManyDisks { count: self.disks.len() }));
        }
        for (index, d) in self.disks.iter().enumerate() {
            if d.name.is_empty() {
                return Err(problem(index, ProblemKind::DiskNameEmpty));
            }
            if d.name.len() > MAX_NAME_LEN {
                return Err(problem(index, ProblemKind::DiskNameTooLong { len: d.name.len() }));
            }
            if let Some(ch) = bad_char(&d.name) {
                return Err(problem(index, ProblemKind::DiskNameBadChar { ch }));
            }
            if let Some(first) = self.disks[..index].iter().position(|e| e.name == d.name) {
                return Err(problem(index, ProblemKind::DuplicateDiskName { first }));
            }
            if !d.size.is_multiple_of(SECTOR_SIZE)
                || !(MIN_DISK_SIZE..=MAX_DISK_SIZE).contains(&d.size)
            {
                return Err(problem(index, ProblemKind::DiskSizeInvalid { size: d.size }));
            }
            if let Some(machine) = self.machine
                && !machine.has_bus(d.bus)
            {
                return Err(problem(index, ProblemKind::BusNotOnMachine { bus: d.bus, machine }));
            }
            let expected = self.machine.and_then(|m| m.disk_address(index, d.bus));
            if d.at != expected {
                return Err(problem(index, ProblemKind::DiskMisplaced { at: d.at, expected }));
            }
        }
        Ok(())
    }

    /// The NICs' rules: count, names, MAC addresses, and on a placed manifest their addresses.
    fn check_nics(&self) -> Result<(), Problem> {
        let nic_ref = |index: usize| (index < self.nics.len()).then_some(index as u16);
        let problem = |index, kind| Problem {
            domain: None,
            channel: None,
            disk: None,
            nic: nic_ref(index),
            kind,
        };
        if self.nics.len() > MAX_NICS {
            return Err(problem(MAX_NICS, ProblemKind::TooManyNics { count: self.nics.len() }));
        }
        for (index, n) in self.nics.iter().enumerate() {
            if n.name.is_empty() || n.name.len() > MAX_NAME_LEN || bad_char(&n.name).is_some() {
                return Err(problem(index, ProblemKind::NicNameInvalid));
            }
            if let Some(first) = self.nics[..index].iter().position(|e| e.name == n.name) {
                return Err(problem(index, ProblemKind::DuplicateNicName { first }));
            }
            if n.mac[0] & 1 != 0 || n.mac == [0; 6] {
                return Err(problem(index, ProblemKind::NicMacInvalid));
            }
            if let Some(first) = self.nics[..index].iter().position(|e| e.mac == n.mac) {
                return Err(problem(index, ProblemKind::DuplicateNicMac { first }));
            }
            let expected = self.machine.and_then(|m| m.nic_address(index, self.disks.len()));
            if let Some(machine) = self.machine
                && expected.is_none()
            {
                let disks = self.disks.len();
                return Err(problem(index, ProblemKind::NicNoRoom { disks, machine }));
            }
            if n.at != expected {
                return Err(problem(index, ProblemKind::NicMisplaced { at: n.at, expected }));
            }
        }
        Ok(())
    }

    /// The domains that are clients of driver domain `driver`: those with a channel to it,
    /// in manifest order.
    pub fn clients_of(&self, driver: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.domains.len())
            .filter(move |&i| self.channels.iter().any(|c| c.from == i && c.to == driver))
    }

    /// Admission of the disk-time contracts: for each driver domain, its clients' contracts
    /// together ([`atropos::admit`]); the client at fault and why.
    fn admit_disk_streams(&self) -> Result<(), (usize, ProblemKind)> {
        for driver in (0..self.domains.len()).filter(|&i| self.domains[i].driver) {
            let clients: Vec<usize> =
                self.clients_of(driver).filter(|&i| self.domains[i].disk.is_some()).collect();
            let contracts: Vec<_> = clients
                .iter()
                .filter_map(|&i| self.domains[i].disk)
                .map(|d| d.contract())
                .collect();
            match atropos::admit(&contracts) {
                Ok(_) => {}
                Err(AdmissionError::Invalid { index, error }) => {
                    let disk = contracts[index].into();
                    return Err((clients[index], ProblemKind::DiskContractInvalid { disk, error }));
                }
                Err(AdmissionError::OverCapacity { index, total_ppb }) => {
                    let kind = ProblemKind::DiskOverCapacity { driver, total_ppb };
                    return Err((clients[index], kind));
                }
            }
        }
        Ok(())
    }

    /// Admission of the link-time contracts: for each network driver (a domain granted a
    /// NIC), all its clients' contracts together ([`atropos::admit`]), a client without `net`
    /// at [`crate::NET_BEST_EFFORT`]; the client at fault and why.
    fn admit_net_streams(&self) -> Result<(), (usize, ProblemKind)> {
        let nic_driver =
            |d: &crate::DomainSpec| d.devices.iter().any(|g| matches!(g, DeviceGrant::Nic { .. }));
        for driver in (0..self.domains.len()).filter(|&i| nic_driver(&self.domains[i])) {
            let clients: Vec<usize> = self.clients_of(driver).collect();
            let contracts: Vec<_> = clients
                .iter()
                .map(|&i| self.domains[i].net.unwrap_or(crate::NET_BEST_EFFORT).contract())
                .collect();
            match atropos::admit(&contracts) {
                Ok(_) => {}
                Err(AdmissionError::Invalid { index, error }) => {
                    let net = contracts[index].into();
                    return Err((clients[index], ProblemKind::NetContractInvalid { net, error }));
                }
                Err(AdmissionError::OverCapacity { index, total_ppb }) => {
                    let kind = ProblemKind::NetOverCapacity { driver, total_ppb };
                    return Err((clients[index], kind));
                }
            }
        }
        Ok(())
    }

    /// The device rules of the domain at `index` (whose earlier domains passed): the driver
    /// mark, the grants' count and targets, and that no device is granted twice.
    fn check_devices(&self, index: usize) -> Result<(), ProblemKind> {
        let d = &self.domains[index];
        if d.driver && d.devices.is_empty() {
            return Err(ProblemKind::DriverWithoutDevices);
        }
        if !d.driver && !d.devices.is_empty() {
            return Err(ProblemKind::DevicesWithoutDriver);
        }
        if d.devices.len() > MAX_DEVICES_PER_DOMAIN {
            return Err(ProblemKind::TooManyDevices { count: d.devices.len() });
        }
        for (grant, g) in d.devices.iter().enumerate() {
            match g {
                DeviceGrant::Disk { disk } if *disk >= self.disks.len() => {
                    let disks = self.disks.len();
                    return Err(ProblemKind::UnknownDisk { grant, disk: *disk, disks });
                }
                DeviceGrant::Nic { nic } if *nic >= self.nics.len() => {
                    let nics = self.nics.len();
                    return Err(ProblemKind::UnknownNic { grant, nic: *nic, nics });
                }
                DeviceGrant::Compatible { compatible, .. } => {
                    let printable = compatible.bytes().all(|b| b.is_ascii_graphic());
                    if compatible.is_empty() || compatible.len() > MAX_COMPATIBLE_LEN || !printable
                    {
                        return Err(ProblemKind::CompatibleInvalid { grant });
                    }
                    if let Some(machine) = self.machine
                        && !machine.has_device_tree()
                    {
                        return Err(ProblemKind::GrantNotOnMachine { grant, machine });
                    }
                }
                _ => {}
            }
            let earlier = self.domains[..=index].iter().enumerate().flat_map(|(i, e)| {
                let n = if i == index { grant } else { e.devices.len() };
                e.devices[..n].iter().enumerate().map(move |(j, h)| (i, j, h))
            });
            for (first_domain, first_grant, h) in earlier {
                if self.same_device(g, h) {
                    return Err(ProblemKind::DeviceGrantedTwice {
                        grant,
                        first_domain,
                        first_grant,
                    });
                }
            }
        }
        Ok(())
    }

    /// Do grants `a` and `b` name the same device? Compared by what the kernel looks for
    /// ([`Manifest::grant_target`]) when both resolve, else as written.
    fn same_device(&self, a: &DeviceGrant, b: &DeviceGrant) -> bool {
        match (self.grant_target(a), self.grant_target(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChannelSpec, DomainSpec, MIB, shared_address_space};
    use alloc::string::ToString;
    use alloc::vec;
    use alloc::vec::Vec;

    fn domain(name: &str) -> DomainSpec {
        DomainSpec {
            name: name.to_string(),
            app: "hello".to_string(),
            args: Vec::new(),
            guaranteed: 256 * 1024,
            optimistic: 0,
            address_space: DEFAULT_ADDRESS_SPACE,
            cpu: CpuSpec::BEST_EFFORT,
            disk: None,
            net: None,
            expect_failure: false,
            driver: false,
            devices: vec![],
        }
    }

    fn manifest() -> Manifest {
        Manifest {
            memory: 128 * MIB,
            domains: vec![domain("a"), domain("b")],
            channels: vec![],
            disks: vec![],
            nics: vec![],
            machine: None,
        }
    }

    fn channel(name: &str, from: usize, to: usize) -> ChannelSpec {
        ChannelSpec { name: name.to_string(), from, to, slots: 64, slot_size: 64 }
    }

    /// Two domains with a channel each way.
    fn with_channels() -> Manifest {
        let mut m = manifest();
        m.channels = vec![channel("ab", 0, 1), channel("ba", 1, 0)];
        m
    }

    fn kind(m: &Manifest) -> ProblemKind {
        m.check().unwrap_err().kind
    }

    #[test]
    fn valid_manifest_passes() {
        manifest().check().unwrap();
    }

    #[test]
    fn domain_count_limits() {
        let mut m = manifest();
        m.domains.clear();
        assert_eq!(kind(&m), ProblemKind::NoDomains);
        // The most domains, each with the share of the region a default quota gives them and a
        // contract that lets them all fit.
        m.domains = (0..MAX_DOMAINS).map(|i| domain(&i.to_string())).collect();
        let share = shared_address_space(m.domains.iter().map(|_| None));
        assert_eq!(share, STRETCH_REGION / MAX_DOMAINS as u64);
        for d in &mut m.domains {
            d.guaranteed = PAGE_SIZE;
            d.address_space = share;
            d.cpu = CpuSpec { slice_ns: 10_000, ..CpuSpec::BEST_EFFORT };
        }
        m.check().unwrap();
        m.domains.push(domain("extra"));
        assert_eq!(kind(&m), ProblemKind::TooManyDomains { count: MAX_DOMAINS + 1 });
    }

    #[test]
    fn system_memory_rules() {
        let mut m = manifest();
        m.memory = 128 * MIB + 4096;
        assert_eq!(kind(&m), ProblemKind::MemoryUnaligned { memory: 128 * MIB + 4096 });
        m.memory = 15 * MIB;
        assert_eq!(kind(&m), ProblemKind::MemoryTooSmall { memory: 15 * MIB });
        m.memory = MIN_MEMORY;
        m.check().unwrap();
        m.memory = MAX_MEMORY;
        m.check().unwrap();
        m.memory = MAX_MEMORY + MIB;
        assert_eq!(kind(&m), ProblemKind::MemoryTooLarge { memory: MAX_MEMORY + MIB });
        m.memory = 99999 * 1024 * MIB;
        assert_eq!(kind(&m), ProblemKind::MemoryTooLarge { memory: 99999 * 1024 * MIB });
    }

    #[test]
    fn the_memory_bound_is_what_every_machine_gives() {
        assert_eq!(MAX_MEMORY, 62 * 1024 * MIB);
        let least = Machine::ALL.iter().map(|m| m.max_memory()).min();
        assert_eq!(least, Some(MAX_MEMORY));
        // virt's RAM starts at 2 GiB; the riscv64 kernel's direct map ends at 64 GiB.
        assert_eq!(Machine::RiscvVirt.max_memory() + 2 * 1024 * MIB, 64 * 1024 * MIB);
        assert_eq!(Machine::Q35.max_memory(), 978 * 1024 * MIB);
        assert!(MAX_MEMORY.is_multiple_of(MEMORY_ALIGN));
    }

    #[test]
    fn name_rules() {
        let mut m = manifest();
        m.domains[1].name = String::new();
        assert_eq!(kind(&m), ProblemKind::NameEmpty);
        m.domains[1].name = "x".repeat(MAX_NAME_LEN);
        m.check().unwrap();
        m.domains[1].name = "x".repeat(MAX_NAME_LEN + 1);
        assert_eq!(kind(&m), ProblemKind::NameTooLong { len: MAX_NAME_LEN + 1 });
        m.domains[1].name = "Hello".to_string();
        assert_eq!(kind(&m), ProblemKind::NameBadChar { ch: 'H' });
        m.domains[1].name = "a_b".to_string();
        assert_eq!(kind(&m), ProblemKind::NameBadChar { ch: '_' });
        m.domains[1].name = "a".to_string();
        let p = m.check().unwrap_err();
        assert_eq!(p.kind, ProblemKind::DuplicateName { first: 0 });
        assert_eq!(p.domain, Some(DomainRef { index: 1, name: "a".to_string() }));
        assert_eq!(
            p.to_string(),
            "domain 1 (\"a\"): duplicate domain name (first used by domain 0)"
        );
    }

    #[test]
    fn app_and_args_rules() {
        let mut m = manifest();
        m.domains[0].app = String::new();
        assert_eq!(kind(&m), ProblemKind::AppEmpty);
        m.domains[0].app = "a/b".to_string();
        assert_eq!(kind(&m), ProblemKind::AppBadChar { ch: '/' });
        m.domains[0].app = "y".repeat(MAX_NAME_LEN + 1);
        assert_eq!(kind(&m), ProblemKind::AppTooLong { len: MAX_NAME_LEN + 1 });
        m.domains[0].app = "hello".to_string();
        m.domains[0].args = vec!["z".to_string(); MAX_ARGS];
        m.check().unwrap();
        m.domains[0].args.push("z".to_string());
        assert_eq!(kind(&m), ProblemKind::TooManyArgs { count: MAX_ARGS + 1 });
        m.domains[0].args = vec![String::new(), "q".repeat(MAX_ARG_LEN + 1)];
        assert_eq!(kind(&m), ProblemKind::ArgTooLong { arg: 1, len: MAX_ARG_LEN + 1 });
    }

    #[test]
    fn memory_contract_rules() {
        let mut m = manifest();
        m.domains[0].guaranteed = 0;
        assert_eq!(kind(&m), ProblemKind::GuaranteedZero);
        m.domains[0].guaranteed = 1000;
        assert_eq!(kind(&m), ProblemKind::GuaranteedUnaligned { bytes: 1000 });
        m.domains[0].guaranteed = 4096;
        m.domains[0].optimistic = 100;
        assert_eq!(kind(&m), ProblemKind::OptimisticUnaligned { bytes: 100 });
        m.domains[0].optimistic = 1 << 40;
        m.check().unwrap();
    }

    #[test]
    fn address_space_default_and_limits() {
        assert_eq!(DEFAULT_ADDRESS_SPACE, 1024 * MIB);
        assert_eq!((MIN_ADDRESS_SPACE, ADDRESS_SPACE_ALIGN), (2 * MIB, 2 * MIB));
        // The region is the ABI's, [STRETCH_BASE, USER_END): 128 GiB.
        assert_eq!(STRETCH_REGION, (abi::USER_END - abi::STRETCH_BASE) as u64);
        assert_eq!(STRETCH_REGION, 128 * 1024 * MIB);
        let mut m = manifest();
        m.check().unwrap();
        for bytes in [MIN_ADDRESS_SPACE, 4 * MIB, 64 * MIB, 6 * 1024 * MIB] {
            m.domains[1].address_space = bytes;
            m.check().unwrap();
        }
    }

    #[test]
    fn address_space_rules() {
        let mut m = manifest();
        for bytes in [0, PAGE_SIZE, MIB, 2 * MIB - PAGE_SIZE] {
            m.domains[1].address_space = bytes;
            let p = m.check().unwrap_err();
            assert_eq!(p.kind, ProblemKind::AddressSpaceTooSmall { bytes }, "{bytes}");
            assert_eq!(p.kind.field(), Field::AddressSpace);
            assert_eq!(p.domain.unwrap().index, 1);
        }
        for bytes in [2 * MIB + PAGE_SIZE, 3 * MIB, 64 * MIB + MIB, 1024 * MIB - PAGE_SIZE] {
            m.domains[1].address_space = bytes;
            assert_eq!(kind(&m), ProblemKind::AddressSpaceUnaligned { bytes }, "{bytes}");
        }
        m.domains[1].address_space = MIB;
        assert_eq!(
            m.check().unwrap_err().to_string(),
            "domain 1 (\"b\"): address space 1M is below the minimum of 2M"
        );
        m.domains[1].address_space = 3 * MIB;
        assert_eq!(
            m.check().unwrap_err().to_string(),
            "domain 1 (\"b\"): address space 3M is not a multiple of 2M"
        );
        // The domain's own rules come before the channels'.
        let mut m = with_channels();
        m.channels[0].slots = 3;
        m.domains[1].address_space = 0;
        assert!(matches!(kind(&m), ProblemKind::AddressSpaceTooSmall { .. }));
    }

    #[test]
    fn address_space_capacity_is_exact() {
        let mut m = manifest();
        m.domains.push(domain("c"));
        m.domains[0].address_space = 64 * 1024 * MIB;
        m.domains[1].address_space = 62 * 1024 * MIB;
        m.domains[2].address_space = 2 * 1024 * MIB;
        assert_eq!(m.total_address_space(), STRETCH_REGION);
        m.check().unwrap();
        m.domains[2].address_space += ADDRESS_SPACE_ALIGN;
        let p = m.check().unwrap_err();
        assert_eq!(
            p.kind,
            ProblemKind::AddressSpaceOverCapacity { total: STRETCH_REGION + ADDRESS_SPACE_ALIGN }
        );
        assert_eq!(p.kind.field(), Field::AddressSpace);
        assert_eq!(p.domain, Some(DomainRef { index: 2, name: "c".into() }));
        assert_eq!(
            p.to_string(),
            "domain 2 (\"c\"): address space over capacity: the quotas up to this domain total \
             131074M, more than the stretch region of 128G (each domain has its own partition \
             of it; a domain without a quota gets an equal share of what the others leave, at \
             most 1G)"
        );
        // The first domain that does not fit is named, and sums saturate rather than wrap.
        m.domains[1].address_space = u64::MAX - (u64::MAX % ADDRESS_SPACE_ALIGN);
        let p = m.check().unwrap_err();
        assert_eq!(p.kind, ProblemKind::AddressSpaceOverCapacity { total: u64::MAX });
        assert_eq!(p.domain.unwrap().index, 1);
        // 128 domains with the largest default quota fill the region exactly.
        let mut m = manifest();
        m.memory = 1024 * MIB;
        m.domains = (0..128).map(|i| domain(&i.to_string())).collect();
        m.domains
            .iter_mut()
            .for_each(|d| d.cpu = CpuSpec { slice_ns: 10_000, ..CpuSpec::BEST_EFFORT });
        assert_eq!(shared_address_space(m.domains.iter().map(|_| None)), DEFAULT_ADDRESS_SPACE);
        m.check().unwrap();
        assert_eq!(m.total_address_space(), STRETCH_REGION);
        // Memory capacity is checked first, CPU admission after.
        let mut m = manifest();
        m.domains[0].address_space = STRETCH_REGION;
        m.domains[1].guaranteed = 128 * MIB;
        assert!(matches!(kind(&m), ProblemKind::OverCapacity { .. }));
        m.domains[1].guaranteed = PAGE_SIZE;
        m.domains[1].cpu = cpu(10, 10);
        assert!(matches!(kind(&m), ProblemKind::AddressSpaceOverCapacity { .. }));
    }

    #[test]
    fn sender_address_space_holds_its_channels() {
        let fixed = DOMAIN_FIXED_FRAMES * PAGE_SIZE + DOMAIN_FIXED_RANGES * GUARD_BYTES;
        assert_eq!(fixed, 19 * 4096);
        let mut m = with_channels();
        m.domains[0].guaranteed = 4 * MIB;
        // Two channels of 1 MiB (256 slots of 4088 bytes and the header: 256 pages) from
        // domain 0: it needs its stack and control block, both channels and three guard pages.
        (m.channels[0].slots, m.channels[0].slot_size) = (256, 4088);
        assert_eq!(m.channels[0].bytes(), MIB);
        m.channels.push(channel("ab2", 0, 1));
        (m.channels[2].slots, m.channels[2].slot_size) = (256, 4088);
        assert_eq!(m.address_space_charged_to(0), fixed + 2 * MIB + 2 * PAGE_SIZE);
        assert_eq!(m.address_space_charged_to(1), fixed + 8192 + PAGE_SIZE);
        m.domains[0].address_space = MIN_ADDRESS_SPACE;
        let p = m.check().unwrap_err();
        assert_eq!(
            p.kind,
            ProblemKind::SenderAddressSpaceTooSmall {
                address_space: 2 * MIB,
                needed: fixed + 2 * MIB + 2 * PAGE_SIZE
            }
        );
        assert_eq!(p.kind.field(), Field::AddressSpace);
        assert_eq!(p.domain.as_ref().unwrap().index, 0);
        // The channel named is the first that no longer fits: the second 1 MiB one.
        assert_eq!(p.channel.as_ref().unwrap().index, 2);
        assert_eq!(
            p.to_string(),
            "domain 0 (\"a\"): channel 2 (\"ab2\"): address space 2M cannot hold the channels \
             this domain sends on: it needs 2132K (68K of stack and control block, the \
             channels' memory, and a guard page of 4K below each)"
        );
        m.domains[0].address_space = 4 * MIB;
        m.check().unwrap();
        // Receivers are not charged, and senders' guarantees are checked first.
        m.domains[1].address_space = MIN_ADDRESS_SPACE;
        m.check().unwrap();
        m.domains[0].address_space = MIN_ADDRESS_SPACE;
        m.domains[0].guaranteed = PAGE_SIZE;
        assert!(matches!(kind(&m), ProblemKind::SenderGuaranteeTooSmall { .. }));
    }

    #[test]
    fn capacity_is_exact() {
        let mut m = manifest();
        m.memory = 16 * MIB;
        m.domains[0].guaranteed = 4 * MIB;
        m.domains[1].guaranteed = 4 * MIB;
        m.check().unwrap();
        m.domains[1].guaranteed += PAGE_SIZE;
        let p = m.check().unwrap_err();
        assert_eq!(
            p.kind,
            ProblemKind::OverCapacity { guaranteed: 8 * MIB + 4096, memory: 16 * MIB }
        );
        assert_eq!(p.domain.unwrap().index, 1);
        // Sums saturate rather than wrap.
        m.domains[0].guaranteed = u64::MAX - 4095;
        assert!(matches!(kind(&m), ProblemKind::OverCapacity { .. }));
    }

    #[test]
    fn channel_bytes() {
        let mut c = channel("c", 0, 1);
        assert_eq!(c.bytes(), 8192);
        (c.slots, c.slot_size) = (2, 8);
        assert_eq!(c.bytes(), 4096);
        (c.slots, c.slot_size) = (63, 64);
        assert_eq!(c.bytes(), 4096); // 64 + 4032 = exactly one page
        (c.slots, c.slot_size) = (256, 4096);
        assert_eq!(c.bytes(), MIB + 4096);
        (c.slots, c.slot_size) = (u32::MAX, u32::MAX);
        assert_eq!(c.bytes(), (u64::from(u32::MAX).pow(2) + 64).div_ceil(4096) * 4096);
    }

    #[test]
    fn channels_pass_and_are_optional() {
        manifest().check().unwrap();
        with_channels().check().unwrap();
    }

    #[test]
    fn channel_names() {
        let mut m = with_channels();
        m.channels[1].name = String::new();
        assert_eq!(kind(&m), ProblemKind::ChannelNameEmpty);
        m.channels[1].name = "c".repeat(MAX_NAME_LEN + 1);
        assert_eq!(kind(&m), ProblemKind::ChannelNameTooLong { len: MAX_NAME_LEN + 1 });
        m.channels[1].name = "a.b".to_string();
        assert_eq!(kind(&m), ProblemKind::ChannelNameBadChar { ch: '.' });
        // A channel may share a domain's name, but not another channel's.
        m.channels[1].name = "a".to_string();
        m.check().unwrap();
        m.channels[1].name = "ab".to_string();
        let p = m.check().unwrap_err();
        assert_eq!(p.kind, ProblemKind::DuplicateChannelName { first: 0 });
        assert_eq!(p.domain, None);
        assert_eq!(p.channel, Some(ChannelRef { index: 1, name: "ab".into() }));
        assert_eq!(
            p.to_string(),
            "channel 1 (\"ab\"): duplicate channel name (first used by channel 0)"
        );
    }

    #[test]
    fn channel_ends() {
        let mut m = with_channels();
        m.channels[0].from = 2;
        assert_eq!(kind(&m), ProblemKind::FromOutOfRange { index: 2, domains: 2 });
        m.channels[0].from = usize::MAX;
        assert_eq!(kind(&m), ProblemKind::FromOutOfRange { index: usize::MAX, domains: 2 });
        m.channels[0].from = 0;
        m.channels[0].to = 5;
        assert_eq!(kind(&m), ProblemKind::ToOutOfRange { index: 5, domains: 2 });
        m.channels[0].to = 0;
        let p = m.check().unwrap_err();
        assert_eq!(p.kind, ProblemKind::SameEnds);
        assert_eq!(p.domain, Some(DomainRef { index: 0, name: "a".into() }));
        assert_eq!(p.channel.unwrap().index, 0);
    }

    #[test]
    fn slot_rules() {
        let mut m = with_channels();
        m.domains[0].guaranteed = 4 * MIB;
        for slots in [0, 1, 3, 48, 8192, u32::MAX] {
            m.channels[0].slots = slots;
            assert_eq!(kind(&m), ProblemKind::SlotsInvalid { slots }, "{slots}");
        }
        for slots in [2, 4, 64, 1024] {
            m.channels[0].slots = slots;
            m.check().unwrap();
        }
        m.channels[0].slots = 64;
        for slot_size in [0, 4, 12, 4100, 8192] {
            m.channels[0].slot_size = slot_size;
            let expected = ProblemKind::SlotSizeInvalid { slot_size: u64::from(slot_size) };
            assert_eq!(kind(&m), expected, "{slot_size}");
        }
        for slot_size in [8, 24, 1000, 4096] {
            m.channels[0].slot_size = slot_size;
            m.check().unwrap();
        }
        assert_eq!(
            ProblemKind::SlotsInvalid { slots: 48 }.to_string(),
            "slots 48 is not a power of two (a power of two from 2 to 4096)"
        );
        assert_eq!(
            ProblemKind::SlotsInvalid { slots: 8192 }.to_string(),
            "slots 8192 is out of range (a power of two from 2 to 4096)"
        );
        assert_eq!(
            ProblemKind::SlotSizeInvalid { slot_size: 12 }.to_string(),
            "slot size 12 bytes is not a multiple of 8 (a multiple of 8 bytes from 8 to 4096)"
        );
    }

    #[test]
    fn channel_memory_limit() {
        let mut m = with_channels();
        m.domains[0].guaranteed = 4 * MIB;
        // The header makes 256 slots of 4K one page too many.
        (m.channels[0].slots, m.channels[0].slot_size) = (128, 4096);
        assert_eq!(m.channels[0].bytes(), MIB / 2 + 4096);
        m.check().unwrap();
        (m.channels[0].slots, m.channels[0].slot_size) = (256, 4096);
        assert_eq!(kind(&m), ProblemKind::ChannelTooLarge { bytes: MIB + 4096 });
        (m.channels[0].slots, m.channels[0].slot_size) = (4096, 248);
        assert_eq!(m.channels[0].bytes(), 4096 * 248 + 4096);
        m.check().unwrap();
    }

    #[test]
    fn channel_count_limits() {
        let mut m = manifest();
        m.memory = 1024 * MIB;
        m.domains = (0..MAX_CHANNELS).map(|i| domain(&i.to_string())).collect();
        m.domains.iter_mut().for_each(|d| d.guaranteed = MIB);
        m.channels = (0..MAX_CHANNELS)
            .map(|i| channel(&alloc::format!("c{i}"), i, (i + 1) % MAX_CHANNELS))
            .collect();
        m.check().unwrap();
        m.channels.push(channel("extra", 0, 2));
        let p = m.check().unwrap_err();
        assert_eq!(p.kind, ProblemKind::TooManyChannels { count: MAX_CHANNELS + 1 });
        assert_eq!(p.channel.unwrap().index, MAX_CHANNELS);
    }

    #[test]
    fn channel_ends_per_domain() {
        let mut m = manifest();
        m.domains = (0..18).map(|i| domain(&alloc::format!("d{i}"))).collect();
        m.domains[0].guaranteed = 8 * MIB;
        // Domain 0 sends on eight and receives on eight: sixteen ends.
        m.channels = (1..=8)
            .map(|i| channel(&alloc::format!("out{i}"), 0, i))
            .chain((9..=16).map(|i| channel(&alloc::format!("in{i}"), i, 0)))
            .collect();
        m.check().unwrap();
        m.channels.push(channel("in17", 17, 0));
        m.channels.push(channel("more", 17, 1));
        let p = m.check().unwrap_err();
        assert_eq!(p.kind, ProblemKind::TooManyChannelEnds { count: 17 });
        assert_eq!(p.domain, Some(DomainRef { index: 0, name: "d0".into() }));
        assert_eq!(p.channel, Some(ChannelRef { index: 16, name: "in17".into() }));
        assert_eq!(
            p.to_string(),
            "domain 0 (\"d0\"): channel 16 (\"in17\"): the domain is an end of 17 channels (at \
             most 16)"
        );
    }

    #[test]
    fn sender_guarantee_holds_its_channels() {
        let fixed = DOMAIN_FIXED_FRAMES * PAGE_SIZE;
        assert_eq!(fixed, 17 * 4096);
        let mut m = with_channels();
        m.channels.push(channel("ab2", 0, 1));
        // Domain 0 sends on two channels of 8K each: it needs 17 pages + 16K.
        assert_eq!(m.charged_to(0), fixed + 2 * 8192);
        assert_eq!(m.charged_to(1), fixed + 8192);
        m.domains[0].guaranteed = fixed + 2 * 8192;
        m.domains[1].guaranteed = fixed + 8192;
        m.check().unwrap();
        // Receiving costs nothing: a receiver only needs its guarantee to be non-zero.
        m.channels[1].from = 0;
        m.channels[1].to = 1;
        m.channels[1].name = "ab3".into();
        m.domains[1].guaranteed = PAGE_SIZE;
        let p = m.check().unwrap_err();
        assert_eq!(
            p.kind,
            ProblemKind::SenderGuaranteeTooSmall {
                guaranteed: fixed + 2 * 8192,
                needed: fixed + 3 * 8192
            }
        );
        assert_eq!(p.domain.as_ref().unwrap().index, 0);
        // The channel named is the first one that no longer fits.
        assert_eq!(p.channel.as_ref().unwrap().index, 2);
        m.domains[0].guaranteed = fixed + 3 * 8192;
        m.check().unwrap();
        // The fixed frames alone must fit, too.
        m.domains[0].guaranteed = fixed;
        let p = m.check().unwrap_err();
        assert_eq!(p.channel.as_ref().unwrap().index, 0);
        assert_eq!(
            p.to_string(),
            "domain 0 (\"a\"): channel 0 (\"ab\"): guaranteed memory 68K cannot hold the channels \
             this domain sends on: it needs 92K (68K of stack and control block plus the \
             channels' memory)"
        );
        // Domains that send nothing are not held to the fixed frames.
        m.channels.clear();
        m.check().unwrap();
    }

    fn cpu(period_ms: u64, slice_ms: u64) -> CpuSpec {
        CpuSpec {
            period_ns: period_ms * 1_000_000,
            slice_ns: slice_ms * 1_000_000,
            extra: false,
            latency_ns: period_ms * 1_000_000,
        }
    }

    #[test]
    fn cpu_spec_is_the_scheduler_contract() {
        let spec = CpuSpec { period_ns: 10, slice_ns: 2, extra: true, latency_ns: 1 };
        let c = spec.contract();
        assert_eq!((c.period, c.slice, c.extra, c.latency), (10, 2, true, 1));
        assert_eq!(CpuSpec::from(c), spec);
        assert_eq!(CpuSpec::BEST_EFFORT.contract(), atropos::Contract::BEST_EFFORT);
        assert_eq!(
            CpuSpec::BEST_EFFORT,
            CpuSpec {
                period_ns: 100_000_000,
                slice_ns: 1_000_000,
                extra: true,
                latency_ns: 10_000_000
            }
        );
    }

    #[test]
    fn cpu_contract_rules() {
        let mut m = manifest();
        m.domains[1].cpu = cpu(10, 2);
        m.check().unwrap();
        let cases = [
            (cpu(10, 20), ContractError::SliceExceedsPeriod, Field::CpuSlice),
            (cpu(0, 2), ContractError::ZeroPeriod, Field::CpuPeriod),
            (cpu(10, 0), ContractError::ZeroSlice, Field::CpuSlice),
            (
                CpuSpec { latency_ns: 0, ..cpu(10, 2) },
                ContractError::ZeroLatency,
                Field::CpuLatency,
            ),
            (
                CpuSpec { period_ns: 50_000, ..cpu(10, 0) },
                ContractError::ZeroSlice,
                Field::CpuSlice,
            ),
            (
                CpuSpec { period_ns: 99_999, slice_ns: 10_000, ..cpu(1, 0) },
                ContractError::PeriodTooShort,
                Field::CpuPeriod,
            ),
            (cpu(10_001, 2), ContractError::PeriodTooLong, Field::CpuPeriod),
            (
                CpuSpec { slice_ns: 9_999, ..cpu(10, 0) },
                ContractError::SliceTooShort,
                Field::CpuSlice,
            ),
            (
                CpuSpec { latency_ns: 9_999, ..cpu(10, 2) },
                ContractError::LatencyTooShort,
                Field::CpuLatency,
            ),
            (
                CpuSpec { latency_ns: 10_000_000_001, ..cpu(10, 2) },
                ContractError::LatencyTooLong,
                Field::CpuLatency,
            ),
        ];
        for (spec, error, field) in cases {
            m.domains[1].cpu = spec;
            let p = m.check().unwrap_err();
            assert_eq!(p.kind, ProblemKind::CpuContractInvalid { cpu: spec, error }, "{spec:?}");
            assert_eq!(p.kind.field(), field, "{spec:?}");
            assert_eq!(p.domain.unwrap().index, 1);
        }
        // The limits themselves are fine; a slice may fill its period.
        m.domains[1].cpu =
            CpuSpec { period_ns: 100_000, slice_ns: 10_000, extra: true, latency_ns: 10_000 };
        m.check().unwrap();
        m.domains[1].cpu = CpuSpec { latency_ns: 10_000_000_000, ..cpu(10_000, 5_000) };
        m.check().unwrap();
        m.domains[0].cpu = cpu(10, 5);
        m.domains[1].cpu = cpu(10, 4);
        m.check().unwrap();
        // Contracts are checked with their domain, before any channel.
        let mut m = with_channels();
        m.channels[0].slots = 3;
        m.domains[1].cpu = cpu(10, 20);
        assert!(matches!(kind(&m), ProblemKind::CpuContractInvalid { .. }));
    }

    #[test]
    fn cpu_contract_messages() {
        let invalid = |cpu, error| ProblemKind::CpuContractInvalid { cpu, error }.to_string();
        assert_eq!(
            invalid(cpu(10, 20), ContractError::SliceExceedsPeriod),
            "invalid CPU contract: slice is longer than the period (slice 20ms, period 10ms)"
        );
        assert_eq!(
            invalid(cpu(0, 2), ContractError::ZeroPeriod),
            "invalid CPU contract: period must be more than zero"
        );
        let short = CpuSpec { period_ns: 50_000, slice_ns: 10_000, ..cpu(1, 0) };
        assert_eq!(
            invalid(short, ContractError::PeriodTooShort),
            "invalid CPU contract: period is shorter than the minimum of 100us (period 50us)"
        );
        let thin = CpuSpec { slice_ns: 1_500, ..cpu(1, 0) };
        assert_eq!(
            invalid(thin, ContractError::SliceTooShort),
            "invalid CPU contract: slice is shorter than the minimum of 10us (slice 1500ns)"
        );
        let slow = CpuSpec { latency_ns: 11_000_000_000, ..cpu(1, 1) };
        assert_eq!(
            invalid(slow, ContractError::LatencyTooLong),
            "invalid CPU contract: latency is longer than the maximum of 10s (latency 11s)"
        );
    }

    #[test]
    fn cpu_admission() {
        let mut m = manifest();
        m.domains.push(domain("c"));
        m.domains[0].cpu = cpu(10, 5);
        m.domains[1].cpu = cpu(10, 3);
        m.domains[2].cpu = cpu(100, 10);
        m.check().unwrap();
        m.domains[2].cpu = cpu(100, 15);
        let p = m.check().unwrap_err();
        assert_eq!(p.kind, ProblemKind::CpuOverCapacity { total_ppb: 950_000_000 });
        assert_eq!(p.kind.field(), Field::Cpu);
        assert_eq!(p.domain, Some(DomainRef { index: 2, name: "c".into() }));
        assert_eq!(
            p.to_string(),
            "domain 2 (\"c\"): CPU contracts over capacity: with this domain the slices sum to \
             95.0% of the CPU, more than the 90% left after the kernel's 10% reserve"
        );
        // The first domain that does not fit is named, not the last.
        m.domains.push(domain("d"));
        assert_eq!(m.check().unwrap_err().domain.unwrap().index, 2);
        // A sum just over the capacity does not read as equal to it.
        let just_over = ProblemKind::CpuOverCapacity { total_ppb: 900_000_001 };
        assert!(just_over.to_string().contains(" 90.1% "), "{just_over}");
        let saturated = ProblemKind::CpuOverCapacity { total_ppb: u64::MAX };
        assert!(saturated.to_string().contains(" 1844674407371.0% "), "{saturated}");
        // Memory capacity is checked first.
        m.memory = 16 * MIB;
        m.domains[0].guaranteed = 8 * MIB;
        assert!(matches!(kind(&m), ProblemKind::OverCapacity { .. }));
    }

    #[test]
    fn best_effort_fills_the_cpu_with_64_domains() {
        let mut m = manifest();
        m.memory = 1024 * MIB;
        m.domains = (0..64).map(|i| domain(&i.to_string())).collect();
        m.check().unwrap();
        m.domains[0].cpu = cpu(10, 3);
        let p = m.check().unwrap_err();
        assert_eq!(p.kind, ProblemKind::CpuOverCapacity { total_ppb: 910_000_000 });
        assert_eq!(p.domain.unwrap().index, 61);
    }

    #[test]
    fn capacity_counts_guarantees_only() {
        let mut m = with_channels();
        m.memory = 16 * MIB;
        m.domains[0].guaranteed = 4 * MIB;
        m.domains[1].guaranteed = 4 * MIB;
        (m.channels[0].slots, m.channels[0].slot_size) = (128, 4096);
        m.check().unwrap();
        m.domains[1].guaranteed += PAGE_SIZE;
        assert!(matches!(kind(&m), ProblemKind::OverCapacity { .. }));
    }

    fn disk(name: &str, size: u64, bus: DiskBus) -> crate::DiskSpec {
        crate::DiskSpec { name: name.into(), size, bus, model: None, at: None }
    }

    #[test]
    fn disk_rules() {
        let mut m = manifest();
        m.disks = vec![disk("a", MIN_DISK_SIZE, DiskBus::Virtio)];
        assert_eq!(m.check(), Ok(()));
        for (size, ok) in [
            (MIN_DISK_SIZE - SECTOR_SIZE, false),
            (MIN_DISK_SIZE + SECTOR_SIZE, true),
            (MIN_DISK_SIZE + 1, false),
            (MAX_DISK_SIZE, true),
            (MAX_DISK_SIZE + SECTOR_SIZE, false),
        ] {
            m.disks[0].size = size;
            assert_eq!(m.check().is_ok(), ok, "{size}");
        }
        m.disks[0].size = MIB;
        m.disks.push(disk("a", MIB, DiskBus::Ahci));
        let p = m.check().unwrap_err();
        assert_eq!((p.disk, p.kind), (Some(1), ProblemKind::DuplicateDiskName { first: 0 }));
        m.disks[1].name = "b".into();
        // AHCI is fine until the manifest is placed on RISC-V.
        assert_eq!(m.check(), Ok(()));
        assert_eq!(m.clone().place(Machine::Q35), Ok(()));
        let p = m.clone().place(Machine::RiscvVirt).unwrap_err();
        let kind = ProblemKind::BusNotOnMachine { bus: DiskBus::Ahci, machine: Machine::RiscvVirt };
        assert_eq!((p.disk, p.kind), (Some(1), kind));
        // An address set without a machine is refused.
        m.disks[0].at = Some(DeviceAddress::Mmio { unit: 0 });
        assert!(matches!(m.check().unwrap_err().kind, ProblemKind::DiskMisplaced { .. }));
        m.disks =
            (0..=MAX_DISKS).map(|i| disk(&alloc::format!("d{i}"), MIB, DiskBus::Virtio)).collect();
        let p = m.check().unwrap_err();
        assert_eq!(
            (p.disk, p.kind),
            (Some(MAX_DISKS as u16), ProblemKind::TooManyDisks { count: 9 })
        );
    }

    fn nic(name: &str, index: usize) -> crate::NicSpec {
        crate::NicSpec { name: name.into(), mac: crate::default_mac(index), at: None }
    }

    #[test]
    fn nic_rules() {
        let mut m = manifest();
        m.nics = vec![nic("a", 0), nic("b", 1)];
        assert_eq!(m.check(), Ok(()));
        for bad in ["", "A", "a b", &"n".repeat(MAX_NAME_LEN + 1)] {
            m.nics[1].name = bad.into();
            let p = m.check().unwrap_err();
            assert_eq!((p.nic, p.kind), (Some(1), ProblemKind::NicNameInvalid));
        }
        m.nics[1].name = "a".into();
        let p = m.check().unwrap_err();
        assert_eq!((p.nic, p.kind), (Some(1), ProblemKind::DuplicateNicName { first: 0 }));
        m.nics[1].name = "b".into();
        m.nics[1].mac = m.nics[0].mac;
        let p = m.check().unwrap_err();
        assert_eq!((p.nic, p.kind), (Some(1), ProblemKind::DuplicateNicMac { first: 0 }));
        for bad in [[0u8; 6], [1, 0, 0, 0, 0, 1], [0xff; 6]] {
            m.nics[1].mac = bad;
            assert_eq!(m.check().unwrap_err().kind, ProblemKind::NicMacInvalid);
        }
        m.nics[1].mac = crate::default_mac(1);
        m.nics[0].at = Some(DeviceAddress::Mmio { unit: 0 });
        let kind = ProblemKind::NicMisplaced { at: m.nics[0].at, expected: None };
        assert_eq!(m.check().unwrap_err().kind, kind);
        m.nics = (0..=MAX_NICS).map(|i| nic(&alloc::format!("n{i}"), i)).collect();
        let p = m.check().unwrap_err();
        assert_eq!(
            (p.nic, p.kind),
            (Some(MAX_NICS as u16), ProblemKind::TooManyNics { count: MAX_NICS + 1 })
        );
        // Granted: by name resolved to an index, which must exist.
        m.nics.truncate(2);
        m.domains[1].driver = true;
        m.domains[1].devices = vec![DeviceGrant::Nic { nic: 2 }];
        assert_eq!(kind_of(&m), ProblemKind::UnknownNic { grant: 0, nic: 2, nics: 2 });
        m.domains[1].devices = vec![DeviceGrant::Nic { nic: 1 }];
        assert_eq!(m.check(), Ok(()));
        m.domains[0].driver = true;
        m.domains[0].devices = vec![DeviceGrant::Nic { nic: 1 }];
        let twice = ProblemKind::DeviceGrantedTwice { grant: 0, first_domain: 0, first_grant: 0 };
        assert_eq!(kind_of(&m), twice);
    }

    /// A network driver's clients' link-time contracts: each valid, and admitted together,
    /// a client without one at the best-effort contract; a block driver's clients are not
    /// counted.
    #[test]
    fn net_contracts() {
        let mut m = manifest();
        m.nics = vec![nic("a", 0)];
        m.domains.push(domain("c"));
        m.domains[0].driver = true;
        m.domains[0].devices = vec![DeviceGrant::Nic { nic: 0 }];
        m.channels = vec![channel("b-req", 1, 0), channel("c-req", 2, 0)];
        let net = |slice_100us: u64| CpuSpec {
            period_ns: 10_000_000,
            slice_ns: slice_100us * 100_000,
            extra: false,
            latency_ns: 10_000_000,
        };
        m.domains[1].net = Some(net(80));
        assert_eq!(m.check(), Ok(()));
        // With c at the best-effort 10%: 90%, the whole capacity.
        m.domains[1].net = Some(net(81));
        let p = m.check().unwrap_err();
        assert_eq!(p.domain.as_ref().map(|d| d.index), Some(2));
        assert!(matches!(p.kind, ProblemKind::NetOverCapacity { driver: 0, .. }), "{p:?}");
        assert_eq!(p.kind.field(), Field::NetContract);
        // Without the NIC the driver is no network driver: nothing to admit.
        m.domains[0].devices = vec![DeviceGrant::PciId { vendor: 1, device: 2, index: 0 }];
        assert_eq!(m.check(), Ok(()));
        m.domains[1].net = Some(net(11_000));
        let p = m.check().unwrap_err();
        let kind = ProblemKind::NetContractInvalid {
            net: net(11_000),
            error: ContractError::SliceExceedsPeriod,
        };
        assert_eq!(
            (p.domain.as_ref().map(|d| d.index), p.kind.field()),
            (Some(1), Field::NetSlice)
        );
        assert_eq!(p.kind, kind);
    }

    fn kind_of(m: &Manifest) -> ProblemKind {
        m.check().unwrap_err().kind
    }

    #[test]
    fn nics_follow_the_disks() {
        let mut m = manifest();
        m.disks = (0..6).map(|i| disk(&alloc::format!("d{i}"), MIB, DiskBus::Virtio)).collect();
        m.nics = vec![nic("a", 0), nic("b", 1)];
        m.place(Machine::RiscvVirt).unwrap();
        assert_eq!(m.nics[1].at, Some(DeviceAddress::Mmio { unit: 7 }));
        m.place(Machine::Q35).unwrap();
        assert_eq!(m.nics[1].at, Some(DeviceAddress::Pci { bus: 0, slot: 0x19, function: 0 }));
        // On virt, disks and NICs share its eight transports.
        m.nics.push(nic("c", 2));
        let p = m.place(Machine::RiscvVirt).unwrap_err();
        let kind = ProblemKind::NicNoRoom { disks: 6, machine: Machine::RiscvVirt };
        assert_eq!((p.nic, p.kind), (Some(2), kind));
        assert_eq!(Machine::Q35.nic_address(MAX_NICS, 0), None);
    }

    #[test]
    fn disks_are_placed_deterministically() {
        for i in 0..MAX_DISKS {
            assert_eq!(
                Machine::RiscvVirt.disk_address(i, DiskBus::Virtio),
                Some(DeviceAddress::Mmio { unit: i as u16 })
            );
            let pci = Some(DeviceAddress::Pci { bus: 0, slot: 0x10 + i as u8, function: 0 });
            assert_eq!(Machine::Q35.disk_address(i, DiskBus::Virtio), pci);
            assert_eq!(Machine::Q35.disk_address(i, DiskBus::Ahci), pci);
        }
        assert_eq!(Machine::RiscvVirt.disk_address(0, DiskBus::Ahci), None);
        assert_eq!(Machine::Q35.disk_address(MAX_DISKS, DiskBus::Virtio), None);
    }

    #[test]
    fn driver_domains_and_grants() {
        let mut m = manifest();
        m.domains[0].driver = true;
        assert_eq!(kind(&m), ProblemKind::DriverWithoutDevices);
        m.domains[0].devices =
            vec![DeviceGrant::PciId { vendor: 0x1af4, device: 0x1001, index: 0 }];
        assert_eq!(m.check(), Ok(()));
        m.domains[1].devices = m.domains[0].devices.clone();
        assert_eq!(kind(&m), ProblemKind::DevicesWithoutDriver);
        m.domains[1].driver = true;
        let twice = ProblemKind::DeviceGrantedTwice { grant: 0, first_domain: 0, first_grant: 0 };
        assert_eq!(kind(&m), twice);
        m.domains[1].devices = vec![DeviceGrant::Disk { disk: 0 }];
        assert_eq!(kind(&m), ProblemKind::UnknownDisk { grant: 0, disk: 0, disks: 0 });
        m.domains[1].devices = vec![DeviceGrant::PciClass { class: 1, subclass: 6, index: 0 }; 9];
        assert_eq!(kind(&m), ProblemKind::TooManyDevices { count: 9 });
        m.domains[1].devices = vec![DeviceGrant::Compatible { compatible: String::new(), unit: 0 }];
        assert_eq!(kind(&m), ProblemKind::CompatibleInvalid { grant: 0 });
    }
}
