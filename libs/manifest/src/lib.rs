//! Tessera's QoS manifests: which domains to start, with which programs, arguments and contracts.
//!
//! A manifest is written by a user as a TOML file under `manifests/`. The host tool (xtask)
//! parses and validates it before anything boots (`parse` and `parse_file`, feature `toml`),
//! with errors that name the file, the line and the key; then it [compiles](Manifest::compile)
//! the [`Manifest`] to a compact binary form that goes into the boot image. The kernel
//! [decodes](decode) that form and validates it again, so a corrupt or hand-made image is
//! rejected rather than trusted.
//!
//! # The model
//!
//! [`Manifest`] holds the guest's memory size, a list of [`DomainSpec`]s (name, app, args, the
//! memory contract `(guaranteed, optimistic)` in bytes, the address-space quota in bytes and
//! the CPU contract [`CpuSpec`]
//! `(period, slice, extra, latency)` in nanoseconds) and a list of [`ChannelSpec`]s (IO
//! channels: a name, the sending and the receiving domain as indices into the domains, and the
//! ring's geometry), a list of [`DiskSpec`]s (`[[system.disk]]`: name, size, [`DiskBus`], and
//! once the manifest is [placed](Manifest::place) for a [`Machine`] the [`DeviceAddress`] of the
//! disk's device), and per domain the devices granted to it ([`DeviceGrant`]s) and the
//! `driver` mark. [`Manifest::check`] holds the semantic rules, shared by the host and the
//! kernel:
//!
//! - at least one domain and at most [`MAX_DOMAINS`];
//! - domain names non-empty, at most [`MAX_NAME_LEN`] bytes of `[a-z0-9-]`, unique; app names the
//!   same charset and length;
//! - at most [`MAX_ARGS`] arguments per domain, each at most [`MAX_ARG_LEN`] bytes;
//! - `guaranteed` non-zero and a multiple of [`PAGE_SIZE`]; `optimistic` a multiple of
//!   [`PAGE_SIZE`] (zero allowed);
//! - `address_space` at least [`MIN_ADDRESS_SPACE`] (2 MiB) and a multiple of
//!   [`ADDRESS_SPACE_ALIGN`] (2 MiB);
//! - each CPU contract valid by itself ([`atropos::Contract::validate`]): period, slice and
//!   latency non-zero; the period from [`atropos::MIN_PERIOD`] (100 µs) to
//!   [`atropos::MAX_PERIOD`] (10 s); the slice at least [`atropos::MIN_SLICE`] (10 µs) and at
//!   most the period; the latency from [`atropos::MIN_LATENCY`] (10 µs) to 10 s;
//! - at most [`MAX_CHANNELS`] channels; channel names follow the domain-name rules and are
//!   unique among channels (a channel may share a name with a domain);
//! - a channel's `from` and `to` are indices of existing domains, and differ;
//! - `slots` a power of two in [`MIN_SLOTS`]`..=`[`MAX_SLOTS`]; `slot_size` a multiple of
//!   [`SLOT_ALIGN`] in [`MIN_SLOT_SIZE`]`..=`[`MAX_SLOT_SIZE`]; the channel's memory
//!   ([`ChannelSpec::bytes`]) at most [`MAX_CHANNEL_BYTES`] (1 MiB);
//! - every domain is an end (`from` or `to`) of at most [`MAX_CHANNELS_PER_DOMAIN`] channels;
//! - a channel's memory is charged to its sender: every domain that is the `from` of at least
//!   one channel must have
//!   `guaranteed >= DOMAIN_FIXED_FRAMES * PAGE_SIZE + sum of bytes() of the channels it sends on`
//!   (see [`DOMAIN_FIXED_FRAMES`]); domains that send on no channel are not held to this rule;
//! - a domain's address space holds the ranges the kernel places there when it creates the
//!   domain: every domain that is the `from` of at least one channel must have
//!   `address_space >= address_space_charged_to(index)` ([`Manifest::address_space_charged_to`]:
//!   its stack, its control block and every channel it sends on, each with a guard page);
//! - system memory a multiple of [`MEMORY_ALIGN`] (1 MiB), at least [`MIN_MEMORY`] (16 MiB)
//!   and at most [`MAX_MEMORY`] (62 GiB, what every [`Machine`] can give);
//! - the sum of all `guaranteed` plus [`KERNEL_RESERVE`] at most the system memory (channel
//!   memory is inside its sender's guarantee, so it is not counted again);
//! - the sum of all `address_space` at most [`STRETCH_REGION`] (128 GiB): each domain's quota
//!   is its own partition of the region; the first domain that does not fit is named;
//! - CPU admission ([`atropos::admit`], over the domains in order): the shares
//!   `slice / period` (each rounded up to a part per billion) sum to at most
//!   [`atropos::CAPACITY_PPB`], the 90% of the CPU left after the kernel's
//!   [`atropos::KERNEL_RESERVE_PERCENT`] (10%); the first domain that does not fit is named;
//! - each disk-time contract (`disk`) and link-time contract (`net`) valid by itself, as the
//!   CPU's; the disk-time contracts of each driver domain's clients (the domains with a
//!   channel to it) admitted together ([`atropos::admit`]), and the link-time contracts of
//!   each network driver's clients (the domains with a channel to a domain granted a NIC)
//!   likewise, a client without `net` counted at [`NET_BEST_EFFORT`] (10%); the first client
//!   that does not fit is named;
//! - at most [`MAX_DISKS`] disks; disk names follow the domain-name rules and are unique among
//!   disks; a disk's size a multiple of [`SECTOR_SIZE`] in
//!   [`MIN_DISK_SIZE`]`..=`[`MAX_DISK_SIZE`] (1 MiB to 64 GiB);
//! - at most [`MAX_NICS`] NICs; NIC names follow the domain-name rules and are unique among
//!   NICs; a NIC's MAC is unicast, not all zeros and unique among the NICs;
//! - a domain with devices is marked `driver` and a domain marked `driver` has devices (at most
//!   [`MAX_DEVICES_PER_DOMAIN`]); a `disk` grant names a disk of the manifest, a `nic` grant a
//!   NIC ([`NicSpec`]); a `compatible`
//!   string is 1 to [`MAX_COMPATIBLE_LEN`] bytes of printable ASCII without spaces; no device
//!   is granted twice (to one domain or two), grants compared by what they resolve to
//!   ([`Manifest::grant_target`]);
//! - on a manifest placed for a machine ([`Manifest::machine`]): every disk's bus is one the
//!   machine has (AHCI on `q35` only), every disk's address is [`Machine::disk_address`] of its
//!   index, every NIC's address [`Machine::nic_address`] of its index (on `virt` the NICs
//!   follow the disks on the eight virtio-mmio transports, which must hold both), and
//!   `compatible` grants only on `virt` (the machine with a device tree). A manifest not placed
//!   has no disk or NIC addresses.
//!
//! # Devices, disks and where they are
//!
//! The kernel finds a granted device by [`Manifest::grant_target`]: a `{ disk = ... }` grant is
//! found at its disk's address, which the host tool chose when it attached the disk to QEMU
//! ([`Machine::disk_address`]): disk `i` is on `virt` the virtio-mmio transport of unit `i`
//! (QEMU's `virtio-mmio-bus.i`, the `i`-th `virtio,mmio` node by address,
//! `0x1000_1000 + i * 0x1000`), and on `q35` the PCI function `00:(0x10 + i).0`, a
//! `virtio-blk-pci` or an AHCI controller of its own with the disk on port 0. A `{ nic = ... }`
//! grant is found at its NIC's address: NIC `i` of a manifest with `D` disks is the
//! virtio-mmio transport of unit `D + i` on `virt`, PCI `00:(0x18 + i).0` on `q35`. The other grants
//! name a PCI function by IDs or class and index, or a device-tree node by `compatible` and
//! unit, as the boot log lists them. Without an IOMMU a driver domain can make its device
//! write anywhere in memory, so driver domains are trusted, and a manifest marks them.
//!
//! # The compiled form
//!
//! [`Manifest::compile`] produces [`HEADER_LEN`] header bytes followed by the payload:
//!
//! | offset | size | content                                                |
//! |--------|------|--------------------------------------------------------|
//! | 0      | 4    | magic [`MAGIC`] (`b"TSMF"`)                            |
//! | 4      | 2    | format version, `u16` little-endian ([`FORMAT_VERSION`]) |
//! | 6      | 4    | payload length in bytes, `u32` little-endian           |
//! | 10     | 4    | CRC-32 (IEEE) of the payload, `u32` little-endian      |
//! | 14     | len  | the [`Manifest`], postcard-encoded                     |
//!
//! [`decode`] checks all of it (exact length, no trailing bytes) and then runs
//! [`Manifest::check`]; it never panics on any input. The kernel and the host tool are always
//! built together, so only the current version is accepted: version 2 added
//! [`Manifest::channels`], version 3 added each domain's CPU contract ([`DomainSpec::cpu`]),
//! version 4 its address-space quota ([`DomainSpec::address_space`]), version 5 the disks, the
//! machine, and each domain's driver mark and device grants, version 6 disk models and
//! disk-time contracts, version 7 the NICs, version 8 each domain's link-time contract
//! ([`DomainSpec::net`]); images of earlier versions are rejected.
//!
//! # The TOML schema (feature `toml`)
//!
//! ```toml
//! [system]
//! memory = "128M"            # guest RAM (QEMU -m)
//!
//! [[domain]]
//! name = "hello-a"           # unique
//! app = "hello"              # a program in userland/apps/
//! args = ["--count", "3"]    # optional, default []
//! cpu = { period = "10ms", slice = "2ms", extra = true, latency = "1ms" }   # optional
//! net = { period = "10ms", slice = "1ms" }   # optional: link time, on each network driver
//! memory = { guaranteed = "256K", optimistic = "0" }   # optimistic optional, default 0
//!
//! [[domain]]
//! name = "sink"
//! app = "counter"
//! memory = { guaranteed = "256K", address_space = "64M" }   # address_space: default a share, at most 1G
//!
//! [[channel]]
//! name = "numbers"           # unique among channels
//! from = "hello-a"           # the sending domain
//! to = "sink"                # the receiving domain (not the sender)
//! slots = 64                 # optional, default 64: a power of two, 2..=4096
//! slot_size = 64             # optional, default 64 bytes: a multiple of 8, 8..=4096
//!
//! [[system.disk]]             # 0 to 8 of them (written after `memory`, under [system])
//! name = "data"              # unique among disks
//! size = "64M"               # a multiple of 512 bytes, 1M to 64G
//! bus = "virtio"             # or "ahci" (x86_64 q35 only)
//!
//! [[system.nic]]              # 0 to 4 of them: virtio-net, all on one QEMU hub
//! name = "net0"              # unique among NICs
//! mac = "52:54:00:12:35:00"  # optional: unicast, unique; default 52:54:00:12:35:<index>
//!
//! [[domain]]
//! name = "blk"
//! app = "hello"
//! memory = { guaranteed = "256K" }
//! driver = true              # trusted: it drives devices (required with devices)
//! devices = [{ disk = "data" }, { pci = "1af4:1005", index = 0 }]
//! ```
//!
//! | key                          | type                   | unit  | default         |
//! |------------------------------|------------------------|-------|-----------------|
//! | `system.memory`              | size                   | bytes | required        |
//! | `domain[i].name`             | string, `[a-z0-9-]`    |       | required        |
//! | `domain[i].app`              | string, a known app    |       | required        |
//! | `domain[i].args`             | array of strings       |       | `[]`            |
//! | `domain[i].cpu`              | table                  |       | best effort     |
//! | `domain[i].cpu.period`       | duration               | time  | required        |
//! | `domain[i].cpu.slice`        | duration               | time  | required        |
//! | `domain[i].cpu.extra`        | boolean                |       | `false`         |
//! | `domain[i].cpu.latency`      | duration               | time  | the period      |
//! | `domain[i].disk`             | table, as `cpu`        | disk time | best effort |
//! | `domain[i].net`              | table, as `cpu`        | link time | [`NET_BEST_EFFORT`] |
//! | `domain[i].memory.guaranteed`| size                   | bytes | required        |
//! | `domain[i].memory.optimistic`| size                   | bytes | `0`             |
//! | `domain[i].memory.address_space` | size               | bytes | `1G` ([`DEFAULT_ADDRESS_SPACE`]) |
//! | `channel[i].name`            | string, `[a-z0-9-]`    |       | required        |
//! | `channel[i].from`            | string, a domain name  |       | required        |
//! | `channel[i].to`              | string, a domain name  |       | required        |
//! | `channel[i].slots`           | integer                | slots | `64`            |
//! | `channel[i].slot_size`       | size                   | bytes | `64`            |
//! | `system.disk[i].name`        | string, `[a-z0-9-]`    |       | required        |
//! | `system.disk[i].size`        | size                   | bytes | required        |
//! | `system.disk[i].bus`         | `"virtio"` or `"ahci"` |       | required        |
//! | `system.nic[i].name`         | string, `[a-z0-9-]`    |       | required        |
//! | `system.nic[i].mac`          | `"aa:bb:cc:dd:ee:ff"`  |       | [`default_mac`] |
//! | `domain[i].driver`           | boolean                |       | `false`         |
//! | `domain[i].devices`          | array of grants        |       | `[]`            |
//! | `domain[i].pager`            | table                  |       | none            |
//! | `domain[i].pager.hierarchy`  | string                 |       | required        |
//! | `domain[i].pager.frames`     | integer                | pages | required        |
//! | `domain[i].pager.cache`      | size                   | bytes | frames' bytes / 4 |
//! | `domain[i].pager.codec`      | `"lz4"` or `"wkdm"`    |       | `"lz4"`         |
//! | `domain[i].pager.evict`      | integer                | pages | `8`             |
//! | `domain[i].pager.fetch`      | integer                | pages | `8`             |
//! | `domain[i].pager.policy`     | `"clock"` or `"lru"`   |       | `"clock"`       |
//! | `domain[i].pager.disk`       | string, a channel prefix |     | required        |
//! | `domain[i].pager.swap`       | size                   | bytes | `32M`           |
//! | `domain[i].pager.swap_at`    | size                   | bytes | `0`             |
//! | `domain[i].pager.ahead`      | integer, 1 to 1024     | pages | `1`             |
//! | `domain[i].pager.harvest`    | integer, 0 to 1048576  | evictions | `0` (never) |
//!
//! A grant is one of `{ disk = "NAME" }`, `{ nic = "NAME" }`, `{ pci = "VVVV:DDDD", index = N }`,
//! `{ pci_class = "CC.SS", index = N }` (hex, as the boot log prints them) or
//! `{ compatible = "virtio,mmio", unit = N }` (RISC-V only); `index` and `unit` count from 0.
//!
//! `pager` configures the paged stretch driver of a domain that pages a stretch (the app
//! `heracles`):
//!
//! ```toml
//! [[domain]]
//! name = "pager"
//! app = "heracles"
//! args = ["--program", "random"]
//! memory = { guaranteed = "4M" }
//! pager = { hierarchy = "compressed", frames = 256, cache = "128K", policy = "clock", disk = "pg", swap = "32M" }
//! ```
//!
//! The front end renders the table to the text `pager_spec::PagerSpec::parse` reads and checks
//! it with that parser, the domain's own, so its errors name the key (`domain[1].pager.frames`);
//! it also refuses keys the hierarchy does not use (`cache` and `codec` with `local`, `evict`
//! and `fetch` without prefetching), frames (of [`PAGE_SIZE`] bytes) beyond the domain's
//! `guaranteed + optimistic`, and a `disk` without the block session's channels `DISK-req`
//! from the domain and `DISK-resp` to it (joining it to one domain), and, with
//! `store = "remote"`, a `net` without the network session's channels likewise. `traders` and
//! `servers` are arrays of `"A.B.C.D:PORT"` strings, joined by `+` in the spec; `spread` and
//! `netc` are booleans (`yes` or `no` in the spec). It then appends
//! `--pager` and the spec, every key written out, to the domain's `args`
//! (`hierarchy=compressed,frames=256,cache=131072,policy=clock,disk=pg,swap_at=0,swap=33554432`
//! here), within the limits of `args`: so the [`DomainSpec`] has no field of its own for it and
//! the kernel no rule.
//!
//! A *size* is a string of decimal digits with an optional binary unit `K` (1024), `M` (1024²)
//! or `G` (1024³), e.g. `"256K"`, or a plain number of bytes (a TOML integer or a string of
//! digits). Negative, fractional and overflowing sizes and other units are errors (see
//! [`parse_size`]).
//!
//! A *duration* is a string of decimal digits followed by a unit: `ns`, `us` (or `µs`), `ms` or
//! `s`, e.g. `"10ms"` or `"500us"`. The unit is required, so a bare TOML integer is an error;
//! so are negative, fractional (`"1.5ms"`: write `"1500us"`) and overflowing durations and
//! other units (see [`parse_duration`]).
//!
//! `address_space` is the domain's address-space quota: the size of its own partition of the
//! stretch region `[abi::STRETCH_BASE, abi::USER_END)` ([`STRETCH_REGION`], 128 GiB), from which
//! the kernel places everything it makes for the domain there (its stack, its control block,
//! the channels it sends on, the stretches it creates), each range with an unmapped guard page
//! below it. Partitions are assigned in manifest order. A domain without `address_space` gets
//! an equal share of what the given quotas leave of the region, at most
//! [`DEFAULT_ADDRESS_SPACE`] (1 GiB): with up to 128 domains and no quotas, 1 GiB each; with
//! 1,024, 128 MiB each ([`shared_address_space`]).
//!
//! A domain without `cpu` gets [`CpuSpec::BEST_EFFORT`] ([`atropos::Contract::BEST_EFFORT`]):
//! 1 ms every 100 ms, with slack time (`extra`) and a 10 ms latency hint. Up to 64 such domains
//! fit in the CPU's capacity.
//!
//! Unknown keys anywhere are errors, as are missing required keys, wrong types,
//! apps that are not in the list the caller knows, channel ends that name no domain, and every
//! rule of [`Manifest::check`]. Errors read `FILE:LINE: KEY: REASON`, e.g.
//! `manifests/bad/dup.toml:9: domain[1].name: duplicate domain name "a" (first at line 4)`.
//! A CPU contract's own problems name the field (`domain[2].cpu.slice`), admission names the
//! first domain that does not fit (`domain[2].cpu`) with the sum of the shares in percent.
//! `[[channel]]` tables may come before or after the `[[domain]]`s they name.
//!
//! # Not implemented yet
//!
//! - Stretches per domain (`[[domain.stretch]]`) come with a later issue; today they are an
//!   unknown key and rejected.
//!
//! # Features
//!
//! - `toml` (default): the TOML front end; needs `std`. The kernel uses
//!   `default-features = false` and gets the `no_std` + `alloc` core only.
//! - `std`: `std::error::Error` for the error types.
//! - `defmt`: `defmt::Format` for the model and the error types.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(any(test, feature = "std"))]
extern crate std;

mod check;
mod compiled;
mod duration;
#[cfg(feature = "toml")]
mod front;
mod size;

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

pub use check::{ChannelRef, DomainRef, Problem, ProblemKind};
pub use compiled::{CompiledError, FORMAT_VERSION, HEADER_LEN, MAGIC, decode};
pub use duration::{DurationError, Time, parse_duration};
#[cfg(feature = "toml")]
pub use front::{ManifestError, parse, parse_file, parse_file_for, parse_for};
pub use size::{Bytes, SizeError, parse_size};

/// The page size: `guaranteed` and `optimistic` memory are multiples of it.
pub const PAGE_SIZE: u64 = 4096;
/// One mebibyte.
pub const MIB: u64 = 1024 * 1024;
/// System memory is a multiple of this (1 MiB): QEMU's `-m` takes MiB.
pub const MEMORY_ALIGN: u64 = MIB;
/// The smallest system memory accepted (16 MiB).
pub const MIN_MEMORY: u64 = 16 * MIB;
/// One gibibyte.
pub const GIB: u64 = 1024 * MIB;
/// The largest system memory accepted (62 GiB): the least any [`Machine`] gives, so that a
/// manifest that passes boots on each of them.
pub const MAX_MEMORY: u64 = {
    let (a, b) = (Machine::RiscvVirt.max_memory(), Machine::Q35.max_memory());
    if a < b { a } else { b }
};

/// A machine model Tessera boots on: the guest RAM it can give ([`Machine::max_memory`]), the
/// disk buses it has ([`Machine::has_bus`]) and where the host tool attaches each disk
/// ([`Machine::disk_address`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Machine {
    /// QEMU's `virt` with a riscv64 hart.
    RiscvVirt,
    /// QEMU's `q35` with an x86_64 CPU.
    Q35,
}

impl Machine {
    /// Every machine.
    pub const ALL: [Machine; 2] = [Machine::RiscvVirt, Machine::Q35];

    /// The machine and its architecture, for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Machine::RiscvVirt => "QEMU virt (riscv64)",
            Machine::Q35 => "QEMU q35 (x86_64)",
        }
    }

    /// The most guest RAM (`-m`) the machine gives a Tessera kernel.
    ///
    /// - `virt`: RAM starts at physical address 2 GiB (`0x8000_0000`), and the riscv64
    ///   kernel's direct map covers physical addresses below 64 GiB
    ///   (`kernel/src/arch/riscv64/layout.rs`), so 62 GiB. QEMU's model itself takes far more
    ///   (tens of TiB).
    /// - `q35`: QEMU refuses more than 978 GiB with its default CPU ("phys-bits too low"):
    ///   with 40 physical address bits, the RAM above 4 GiB, the 64-bit PCI window and the
    ///   memory-hotplug area must all lie below 1 TiB (measured with QEMU 7.2). The x86_64
    ///   kernel uses the first 4 GiB and leaves the rest out with a warning.
    pub const fn max_memory(self) -> u64 {
        match self {
            Machine::RiscvVirt => 64 * GIB - 0x8000_0000,
            Machine::Q35 => 978 * GIB,
        }
    }

    /// Whether the machine can attach a disk on `bus`: virtio on both, AHCI on `q35` only.
    pub const fn has_bus(self, bus: DiskBus) -> bool {
        !matches!((self, bus), (Machine::RiscvVirt, DiskBus::Ahci))
    }

    /// Whether the machine has a device tree, so that `{ compatible = ..., unit = N }` grants
    /// mean something (`virt` only).
    pub const fn has_device_tree(self) -> bool {
        matches!(self, Machine::RiscvVirt)
    }

    /// Where the host tool attaches the `index`-th disk of a manifest (0-based, in manifest
    /// order) on `bus`, or `None` if the machine has no such bus or slot:
    ///
    /// - `virt`, virtio: the virtio-mmio transport of unit `index`, QEMU's
    ///   `virtio-mmio-bus.<index>`, at `0x1000_1000 + index * 0x1000` with PLIC interrupt
    ///   `1 + index` (the `index`-th `virtio,mmio` node of the device tree by address). xtask
    ///   names the bus explicitly: QEMU would otherwise plug the first device into the last
    ///   transport (unit 7).
    /// - `q35`, virtio or AHCI: the PCI function `00:(0x10 + index).0`
    ///   ([`FIRST_DISK_SLOT`]), given to QEMU with `addr=`; an AHCI disk has its own controller
    ///   there (not q35's built-in one at `00:1f.2`, which has the same IDs), disk on port 0.
    pub const fn disk_address(self, index: usize, bus: DiskBus) -> Option<DeviceAddress> {
        if index >= MAX_DISKS || !self.has_bus(bus) {
            return None;
        }
        Some(match self {
            Machine::RiscvVirt => DeviceAddress::Mmio { unit: index as u16 },
            Machine::Q35 => {
                DeviceAddress::Pci { bus: 0, slot: FIRST_DISK_SLOT + index as u8, function: 0 }
            }
        })
    }

    /// Where the host tool attaches the `index`-th NIC of a manifest with `disks` disks
    /// (0-based, in manifest order), or `None` if the machine has no room for it:
    ///
    /// - `virt`: the virtio-mmio transport of unit `disks + index` (the NICs follow the
    ///   disks; `virt` has [`VIRTIO_MMIO_UNITS`] transports for both), a `virtio-net-device`.
    /// - `q35`: the PCI function `00:(0x18 + index).0` ([`FIRST_NIC_SLOT`]), a
    ///   `virtio-net-pci` (transitional, `1af4:1000`, MSI-X).
    pub const fn nic_address(self, index: usize, disks: usize) -> Option<DeviceAddress> {
        if index >= MAX_NICS {
            return None;
        }
        match self {
            Machine::RiscvVirt if disks + index < VIRTIO_MMIO_UNITS => {
                Some(DeviceAddress::Mmio { unit: (disks + index) as u16 })
            }
            Machine::RiscvVirt => None,
            Machine::Q35 => {
                Some(DeviceAddress::Pci { bus: 0, slot: FIRST_NIC_SLOT + index as u8, function: 0 })
            }
        }
    }
}

/// The PCI slot (device number) on bus 0 of a `q35` machine where the host tool attaches the
/// first disk's device; disk `i` is at slot `FIRST_DISK_SLOT + i` ([`Machine::disk_address`]).
/// Slots `0x10..0x18` are free on q35 (it has its host bridge at 0, VGA at 1 and its ICH9
/// functions at `0x1f`).
pub const FIRST_DISK_SLOT: u8 = 0x10;
/// The PCI slot on bus 0 of a `q35` machine where the host tool attaches the first NIC; NIC
/// `i` is at slot `FIRST_NIC_SLOT + i` ([`Machine::nic_address`]), after the disks' slots.
pub const FIRST_NIC_SLOT: u8 = 0x18;
/// The most NICs a manifest may declare.
pub const MAX_NICS: usize = 4;
/// The number of virtio-mmio transports of QEMU's `virt` (units 0 to 7).
pub const VIRTIO_MMIO_UNITS: usize = 8;
/// The most disks a manifest may declare.
pub const MAX_DISKS: usize = 8;
/// A disk's size is a multiple of this many bytes (a sector).
pub const SECTOR_SIZE: u64 = 512;
/// The smallest disk accepted (1 MiB).
pub const MIN_DISK_SIZE: u64 = MIB;
/// The largest disk accepted (64 GiB).
pub const MAX_DISK_SIZE: u64 = 64 * GIB;
/// The most device grants one domain may have.
pub const MAX_DEVICES_PER_DOMAIN: usize = 4;
/// The longest `compatible` string of a grant, in bytes.
pub const MAX_COMPATIBLE_LEN: usize = 63;

const _: () = assert!(MAX_DISKS <= VIRTIO_MMIO_UNITS);
const _: () = assert!(FIRST_DISK_SLOT as usize + MAX_DISKS <= FIRST_NIC_SLOT as usize);
const _: () = assert!(FIRST_NIC_SLOT as usize + MAX_NICS <= 0x1f);
/// The stretch region, `[abi::STRETCH_BASE, abi::USER_END)`, in bytes (128 GiB): where the
/// kernel places stacks, control blocks, channels and the stretches domains create at run time.
/// Each domain has its own partition of it, of the size of its quota
/// ([`DomainSpec::address_space`]); the quotas together must fit in it.
pub const STRETCH_REGION: u64 = (abi::USER_END - abi::STRETCH_BASE) as u64;
/// A domain's address-space quota when its manifest does not give one and the stretch region
/// has room (1 GiB): up to 128 domains with the default fit; beyond that they share the region
/// ([`shared_address_space`]).
pub const DEFAULT_ADDRESS_SPACE: u64 = GIB;

/// The address-space quota of each domain whose manifest gives none, from every domain's
/// quota in the manifest (`None` where it gives none): an equal share of what the given
/// quotas leave of [`STRETCH_REGION`], rounded down to [`ADDRESS_SPACE_ALIGN`], at most
/// [`DEFAULT_ADDRESS_SPACE`]. So any number of domains up to [`MAX_DOMAINS`] fits without a
/// quota (1,024 get 128 MiB each). When the given quotas leave less than [`MIN_ADDRESS_SPACE`]
/// each, it is [`MIN_ADDRESS_SPACE`], and the manifest check reports the region over capacity.
pub fn shared_address_space(quotas: impl IntoIterator<Item = Option<u64>>) -> u64 {
    let (mut given, mut defaults) = (0u64, 0u64);
    for q in quotas {
        match q {
            Some(bytes) => given = given.saturating_add(bytes),
            None => defaults += 1,
        }
    }
    let share = STRETCH_REGION.saturating_sub(given) / defaults.max(1);
    (share - share % ADDRESS_SPACE_ALIGN).clamp(MIN_ADDRESS_SPACE, DEFAULT_ADDRESS_SPACE)
}
/// An address-space quota is a multiple of this (2 MiB, the span of one last-level page table
/// on RISC-V Sv39), so that no page table is shared by two domains' partitions.
pub const ADDRESS_SPACE_ALIGN: u64 = 2 * MIB;
/// The smallest address-space quota accepted (2 MiB).
pub const MIN_ADDRESS_SPACE: u64 = 2 * MIB;
/// The address space the kernel places around each range in the stretch region: one unmapped
/// guard page below it ([`PAGE_SIZE`]).
pub const GUARD_BYTES: u64 = PAGE_SIZE;

const _: () = assert!(STRETCH_REGION == 128 * GIB);
const _: () = assert!(STRETCH_REGION.is_multiple_of(ADDRESS_SPACE_ALIGN));
const _: () = assert!(DEFAULT_ADDRESS_SPACE.is_multiple_of(ADDRESS_SPACE_ALIGN));
const _: () = assert!(MIN_ADDRESS_SPACE.is_multiple_of(ADDRESS_SPACE_ALIGN));
// Any manifest whose domains all take the default fits in the region, each with at least 64 MiB.
const _: () = assert!(MAX_DOMAINS as u64 * 64 * MIB <= STRETCH_REGION);
// The smallest quota holds a domain's stack and control block with their guard pages.
const _: () = assert!(
    DOMAIN_FIXED_FRAMES * PAGE_SIZE + DOMAIN_FIXED_RANGES * GUARD_BYTES <= MIN_ADDRESS_SPACE
);

/// Memory the kernel keeps for itself (8 MiB): its image, heap and tables, and the firmware's
/// share. Domains' guarantees must fit in the rest.
pub const KERNEL_RESERVE: u64 = 8 * MIB;
/// The most domains a manifest may declare.
pub const MAX_DOMAINS: usize = 1024;
/// The longest domain or app name, in bytes.
pub const MAX_NAME_LEN: usize = 31;
/// The most arguments a domain may be given.
pub const MAX_ARGS: usize = 16;
/// The longest argument, in bytes (a pager's spec with a remote store's traders and servers
/// fits).
pub const MAX_ARG_LEN: usize = 256;

/// The most IO channels a manifest may declare.
pub const MAX_CHANNELS: usize = 64;
/// The most channels a domain may be an end of (as sender or receiver): the channel slots of
/// its control block, [`abi::MAX_CHANNELS`].
pub const MAX_CHANNELS_PER_DOMAIN: usize = 16;
/// The smallest number of slots of a channel.
pub const MIN_SLOTS: u32 = 2;
/// The largest number of slots of a channel.
pub const MAX_SLOTS: u32 = 4096;
/// The number of slots of a channel when the manifest does not say.
pub const DEFAULT_SLOTS: u32 = 64;
/// A channel's slot size is a multiple of this many bytes.
pub const SLOT_ALIGN: u32 = 8;
/// The smallest slot size, in bytes.
pub const MIN_SLOT_SIZE: u32 = 8;
/// The largest slot size, in bytes.
pub const MAX_SLOT_SIZE: u32 = 4096;
/// The slot size of a channel when the manifest does not say, in bytes.
pub const DEFAULT_SLOT_SIZE: u32 = 64;
/// The header at the start of a channel's memory (the sender's `head` and the receiver's
/// `tail` counters), in bytes: [`abi::CHANNEL_HEADER`].
pub const CHANNEL_HEADER: u64 = 64;
/// The most memory one channel may take ([`ChannelSpec::bytes`]): 1 MiB.
pub const MAX_CHANNEL_BYTES: u64 = MIB;
/// The frames every domain takes from its guarantee before anything else: 16 pages of stack
/// and 1 page of domain control block ([`abi::Dcb`]).
///
/// A domain that sends on channels must have
/// `guaranteed >= DOMAIN_FIXED_FRAMES * PAGE_SIZE + sum of bytes() of the channels it sends on`,
/// since the kernel charges each channel's memory to its sender.
pub const DOMAIN_FIXED_FRAMES: u64 = 17;
/// The ranges every domain takes from its address space before anything else: its stack and
/// its control block ([`DOMAIN_FIXED_FRAMES`] pages in all), each with a guard page below it
/// ([`GUARD_BYTES`]).
pub const DOMAIN_FIXED_RANGES: u64 = 2;

// The limits must agree with the kernel ABI that carries channels to domains.
const _: () = assert!(MAX_CHANNELS_PER_DOMAIN == abi::MAX_CHANNELS);
const _: () = assert!(CHANNEL_HEADER == abi::CHANNEL_HEADER as u64);
const _: () = assert!(PAGE_SIZE == abi::PAGE_SIZE as u64);
// A channel's name fits the ABI's NUL-padded name field with room for the NUL.
const _: () = assert!(MAX_NAME_LEN < 32);

/// A validated (or to-be-validated) manifest: the whole system's configuration.
///
/// Values built by `parse` and [`decode`] have passed [`Manifest::check`]; values built by
/// hand have not until you call it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Manifest {
    /// Guest RAM in bytes (QEMU's `-m`).
    pub memory: u64,
    /// The domains to create, in manifest order.
    pub domains: Vec<DomainSpec>,
    /// The IO channels to create between the domains, in manifest order.
    pub channels: Vec<ChannelSpec>,
    /// The disks the machine has (`[[system.disk]]`), in manifest order.
    pub disks: Vec<DiskSpec>,
    /// The network interfaces the machine has (`[[system.nic]]`), in manifest order.
    pub nics: Vec<NicSpec>,
    /// The machine the manifest is placed for ([`Manifest::place`]): `None` as parsed (valid
    /// on some machine), `Some` once every disk has its device address
    /// ([`DiskSpec::at`]) and every NIC its own ([`NicSpec::at`]). The host tool places a
    /// manifest before it compiles it, so the kernel always reads a placed one.
    pub machine: Option<Machine>,
}

/// One disk of a [`Manifest`]: a raw image the host tool creates and attaches for the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DiskSpec {
    /// The disk's unique name (`[a-z0-9-]`, at most [`MAX_NAME_LEN`] bytes).
    pub name: String,
    /// Its size in bytes: a multiple of [`SECTOR_SIZE`] in
    /// [`MIN_DISK_SIZE`]`..=`[`MAX_DISK_SIZE`].
    pub size: u64,
    /// The bus its device is on.
    pub bus: DiskBus,
    /// The mechanical disk its driver makes it behave like (`model = "deskstar-34gxp"`):
    /// every request completes after the model's service time, not when the device is done.
    pub model: Option<DiskModelName>,
    /// Where its device is: [`Machine::disk_address`] of the disk's index, set by
    /// [`Manifest::place`]; `None` while the manifest is not placed.
    pub at: Option<DeviceAddress>,
}

/// One network interface of a [`Manifest`] (`[[system.nic]]`): a virtio-net device the host
/// tool attaches for the run. In a run of one machine every NIC is a port of one QEMU hub, so
/// the NICs of a manifest reach each other and nothing else.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NicSpec {
    /// The NIC's unique name (`[a-z0-9-]`, at most [`MAX_NAME_LEN`] bytes).
    pub name: String,
    /// Its MAC address: a unicast address, unique among the manifest's NICs; when the
    /// manifest gives none, [`default_mac`] of its index.
    pub mac: [u8; 6],
    /// Where its device is: [`Machine::nic_address`] of the NIC's index, set by
    /// [`Manifest::place`]; `None` while the manifest is not placed.
    pub at: Option<DeviceAddress>,
}

/// The MAC address of NIC `index` of a manifest that gives it none: `52:54:00:12:35:II`,
/// QEMU's prefix with the index in the last byte (QEMU's own default, `52:54:00:12:34:56`,
/// is the same for every NIC, so a hub would not tell them apart).
pub const fn default_mac(index: usize) -> [u8; 6] {
    [0x52, 0x54, 0x00, 0x12, 0x35, index as u8]
}

/// A MAC address as `aa:bb:cc:dd:ee:ff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mac(pub [u8; 6]);

impl core::fmt::Display for Mac {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let m = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

/// A mechanical disk model a disk may be given ([`DiskSpec::model`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DiskModelName {
    /// The IBM Deskstar 34GXP (`deskstar-34gxp`), the drive of the anticipatory-scheduling
    /// paper.
    Deskstar34gxp,
    /// The Seagate Cheetah X15 (`cheetah-15k`).
    Cheetah15k,
}

impl DiskModelName {
    /// Its name in a manifest.
    pub const fn name(self) -> &'static str {
        match self {
            DiskModelName::Deskstar34gxp => "deskstar-34gxp",
            DiskModelName::Cheetah15k => "cheetah-15k",
        }
    }

    /// Its code in a device's control-block slot ([`abi::disk_model`]).
    pub const fn code(self) -> u64 {
        match self {
            DiskModelName::Deskstar34gxp => abi::disk_model::DESKSTAR_34GXP,
            DiskModelName::Cheetah15k => abi::disk_model::CHEETAH_15K,
        }
    }
}

/// The bus a disk is attached on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DiskBus {
    /// A virtio block device: virtio-mmio on `virt`, `virtio-blk-pci` (transitional,
    /// `1af4:1001`) on `q35`.
    Virtio,
    /// A SATA disk on port 0 of its own AHCI controller (`8086:2922`), `q35` only.
    Ahci,
}

impl DiskBus {
    /// Its name in a manifest (`virtio`, `ahci`).
    pub const fn name(self) -> &'static str {
        match self {
            DiskBus::Virtio => "virtio",
            DiskBus::Ahci => "ahci",
        }
    }
}

/// A device's place on a machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DeviceAddress {
    /// The PCI function `bus:slot.function` (as the boot log prints it, `BB:SS.F`).
    Pci {
        /// The bus number.
        bus: u8,
        /// The device (slot) number, below 32.
        slot: u8,
        /// The function number, below 8.
        function: u8,
    },
    /// The `unit`-th `virtio,mmio` node of the device tree, by address (RISC-V `virt`: at
    /// `0x1000_1000 + unit * 0x1000`).
    Mmio {
        /// The unit, from 0.
        unit: u16,
    },
}

impl DeviceAddress {
    /// What the kernel looks for to find the device at this address.
    pub const fn target(self) -> DeviceTarget<'static> {
        match self {
            DeviceAddress::Pci { bus, slot, function } => {
                DeviceTarget::PciAddress { bus, slot, function }
            }
            DeviceAddress::Mmio { unit } => {
                DeviceTarget::Node { compatible: VIRTIO_MMIO_COMPATIBLE, unit }
            }
        }
    }
}

/// A device granted to a driver domain (`domain.devices`): the domain may map its registers
/// and take its interrupts. Without an IOMMU such a domain can make its device write anywhere
/// in memory, so it must be marked trusted ([`DomainSpec::driver`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DeviceGrant {
    /// The device that serves a declared disk (an index into [`Manifest::disks`]); find it at
    /// that disk's [`DiskSpec::at`] ([`Manifest::grant_target`]).
    Disk {
        /// The disk's index.
        disk: usize,
    },
    /// The device of a declared NIC (an index into [`Manifest::nics`]); find it at that
    /// NIC's [`NicSpec::at`] ([`Manifest::grant_target`]).
    Nic {
        /// The NIC's index.
        nic: usize,
    },
    /// The `index`-th PCI function (0-based, in bus:device.function order) with these IDs.
    PciId {
        /// The vendor ID.
        vendor: u16,
        /// The device ID.
        device: u16,
        /// Which of the functions with these IDs.
        index: u16,
    },
    /// The `index`-th PCI function (0-based, in bus:device.function order) of this class and
    /// subclass.
    PciClass {
        /// The base class.
        class: u8,
        /// The subclass.
        subclass: u8,
        /// Which of the functions of this class.
        index: u16,
    },
    /// The `unit`-th device-tree node (0-based, by address) whose first `compatible` string
    /// is `compatible` (RISC-V `virt` only).
    Compatible {
        /// The `compatible` string, printable ASCII without spaces.
        compatible: String,
        /// Which of the nodes.
        unit: u16,
    },
}

/// What a kernel looks for to find a granted device ([`Manifest::grant_target`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DeviceTarget<'a> {
    /// The PCI function at this address.
    PciAddress {
        /// The bus number.
        bus: u8,
        /// The device (slot) number.
        slot: u8,
        /// The function number.
        function: u8,
    },
    /// The `index`-th PCI function with these IDs.
    PciId {
        /// The vendor ID.
        vendor: u16,
        /// The device ID.
        device: u16,
        /// Which one, from 0.
        index: u16,
    },
    /// The `index`-th PCI function of this class and subclass.
    PciClass {
        /// The base class.
        class: u8,
        /// The subclass.
        subclass: u8,
        /// Which one, from 0.
        index: u16,
    },
    /// The `unit`-th device-tree node with this first `compatible` string.
    Node {
        /// The `compatible` string.
        compatible: &'a str,
        /// Which one, from 0.
        unit: u16,
    },
}

/// The `compatible` string of QEMU `virt`'s virtio-mmio transports.
pub const VIRTIO_MMIO_COMPATIBLE: &str = "virtio,mmio";

/// One domain of a [`Manifest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DomainSpec {
    /// The domain's unique name (`[a-z0-9-]`, at most [`MAX_NAME_LEN`] bytes).
    pub name: String,
    /// The program it runs: an app in `userland/apps/`.
    pub app: String,
    /// The program's arguments (not including the program name).
    pub args: Vec<String>,
    /// Guaranteed memory in bytes: always available to the domain.
    pub guaranteed: u64,
    /// Optimistic memory in bytes: granted from unused memory, revocable.
    pub optimistic: u64,
    /// The address-space quota in bytes: the size of the domain's own partition of the stretch
    /// region ([`STRETCH_REGION`]), from which the kernel places its stack, control block,
    /// the channels it sends on and the stretches it creates, each with a guard page below.
    /// A multiple of [`ADDRESS_SPACE_ALIGN`], at least [`MIN_ADDRESS_SPACE`];
    /// [`DEFAULT_ADDRESS_SPACE`] when the manifest does not say.
    pub address_space: u64,
    /// The CPU contract.
    pub cpu: CpuSpec,
    /// The disk-time contract of the stream the domain opens on each block driver it has a
    /// channel to (`disk = { period, slice, extra, latency }`, the same shape as `cpu`);
    /// `None` for a best-effort stream. [`Manifest::check`] holds each to
    /// [`atropos::Contract::validate`] and those of each driver's clients together to
    /// [`atropos::admit`], as the CPU's.
    pub disk: Option<CpuSpec>,
    /// The link-time contract of the transmit stream the domain opens on each network driver
    /// it has a channel to (`net = { period, slice, extra, latency }`, the same shape as
    /// `cpu`); `None` for a best-effort stream, which the driver gives [`NET_BEST_EFFORT`].
    /// [`Manifest::check`] holds each to [`atropos::Contract::validate`] and those of each
    /// network driver's clients together (the best-effort ones at [`NET_BEST_EFFORT`]) to
    /// [`atropos::admit`].
    pub net: Option<CpuSpec>,
    /// Whether the domain is meant to fail (exit with a non-zero status or be terminated), as
    /// the fault demos do. Read by the host tool only: `cargo xtask run` does not count such a
    /// domain's failure against the run.
    pub expect_failure: bool,
    /// Whether the domain is a trusted driver domain (`driver = true`): exactly the domains
    /// with [`devices`](Self::devices) are. Without an IOMMU a device can write anywhere in
    /// memory, so a domain that drives one is as trusted as the kernel.
    pub driver: bool,
    /// The devices granted to the domain, in manifest order (at most
    /// [`MAX_DEVICES_PER_DOMAIN`]); a device is granted to at most one domain.
    pub devices: Vec<DeviceGrant>,
}

/// A domain's CPU contract as a manifest carries it: an [`atropos::Contract`] with its times in
/// nanoseconds. In every `period_ns` the domain receives `slice_ns` of CPU time; with `extra` it
/// may also run in slack time; `latency_ns` is how soon it should run after it is woken.
///
/// [`Manifest::check`] holds each to [`atropos::Contract::validate`] and all of them together
/// to [`atropos::admit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CpuSpec {
    /// The length of each period, in nanoseconds.
    pub period_ns: u64,
    /// The CPU time guaranteed in each period, in nanoseconds.
    pub slice_ns: u64,
    /// Whether the domain may use slack time beyond its slice.
    pub extra: bool,
    /// The latency hint, in nanoseconds.
    pub latency_ns: u64,
}

impl CpuSpec {
    /// The contract of a domain whose manifest names none: [`atropos::Contract::BEST_EFFORT`]
    /// (1 ms every 100 ms, slack time allowed, a 10 ms latency hint).
    pub const BEST_EFFORT: CpuSpec = CpuSpec {
        period_ns: atropos::Contract::BEST_EFFORT.period,
        slice_ns: atropos::Contract::BEST_EFFORT.slice,
        extra: atropos::Contract::BEST_EFFORT.extra,
        latency_ns: atropos::Contract::BEST_EFFORT.latency,
    };

    /// The scheduler's contract.
    pub fn contract(&self) -> atropos::Contract {
        atropos::Contract {
            period: self.period_ns,
            slice: self.slice_ns,
            extra: self.extra,
            latency: self.latency_ns,
        }
    }
}

/// The link-time contract a network driver gives the stream of a client whose manifest names
/// no `net` contract: 1 ms of link time in every 10 ms, and slack time beyond (the latency
/// hint the period). The manifest's admission of a network driver's clients counts each such
/// client at this contract, so that the driver's own admission takes every client the
/// manifest admitted.
pub const NET_BEST_EFFORT: CpuSpec =
    CpuSpec { period_ns: 10_000_000, slice_ns: 1_000_000, extra: true, latency_ns: 10_000_000 };

impl From<atropos::Contract> for CpuSpec {
    fn from(c: atropos::Contract) -> Self {
        CpuSpec { period_ns: c.period, slice_ns: c.slice, extra: c.extra, latency_ns: c.latency }
    }
}

/// One IO channel of a [`Manifest`]: a ring of `slots` slots of `slot_size` bytes in memory
/// shared by two domains, written by `from` and read by `to`.
///
/// The kernel gives each end one of its [`abi::ChannelSlot`]s; the channel's memory
/// ([`bytes`](Self::bytes)) is charged to the sender's guarantee.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ChannelSpec {
    /// The channel's unique name (`[a-z0-9-]`, at most [`MAX_NAME_LEN`] bytes).
    pub name: String,
    /// The sending domain: an index into [`Manifest::domains`].
    pub from: usize,
    /// The receiving domain: an index into [`Manifest::domains`], not `from`.
    pub to: usize,
    /// The number of slots: a power of two in [`MIN_SLOTS`]`..=`[`MAX_SLOTS`].
    pub slots: u32,
    /// Bytes per slot: a multiple of [`SLOT_ALIGN`] in [`MIN_SLOT_SIZE`]`..=`[`MAX_SLOT_SIZE`].
    pub slot_size: u32,
}

impl ChannelSpec {
    /// The channel's memory in bytes: [`CHANNEL_HEADER`] plus `slots * slot_size`, rounded up to
    /// a whole number of pages ([`PAGE_SIZE`]). Never overflows, whatever the field values.
    ///
    /// ```
    /// let c = manifest::ChannelSpec {
    ///     name: "numbers".into(),
    ///     from: 0,
    ///     to: 1,
    ///     slots: 64,
    ///     slot_size: 64,
    /// };
    /// assert_eq!(c.bytes(), 8192); // 64 + 64 * 64 = 4160 bytes, two pages
    /// ```
    pub fn bytes(&self) -> u64 {
        // At most (2^32 - 1)^2 + 64 + 4095 < 2^64: no overflow.
        let raw = CHANNEL_HEADER + u64::from(self.slots) * u64::from(self.slot_size);
        raw.div_ceil(PAGE_SIZE) * PAGE_SIZE
    }
}

impl Manifest {
    /// Places the manifest for `machine`: gives every disk and NIC its device address
    /// ([`Machine::disk_address`], [`Machine::nic_address`]) and records the machine, then checks it
    /// ([`Manifest::check`], which then also holds it to the machine's rules: AHCI disks on
    /// `q35` only, `compatible` grants on `virt` only).
    pub fn place(&mut self, machine: Machine) -> Result<(), Problem> {
        self.machine = Some(machine);
        for (i, d) in self.disks.iter_mut().enumerate() {
            d.at = machine.disk_address(i, d.bus);
        }
        let disks = self.disks.len();
        for (i, n) in self.nics.iter_mut().enumerate() {
            n.at = machine.nic_address(i, disks);
        }
        self.check()
    }

    /// What the kernel looks for to find the device of `grant`: a `{ disk = ... }` grant
    /// becomes its disk's [`DiskSpec::at`] (a PCI address, or the `virtio,mmio` node of its
    /// unit), a `{ nic = ... }` grant its NIC's [`NicSpec::at`]; `None` for such a grant of a
    /// manifest not placed (or a disk or NIC that does not exist). The other grants are as
    /// written.
    ///
    /// ```
    /// # use manifest::{DeviceGrant, DeviceTarget};
    /// # fn f(m: &manifest::Manifest) {
    /// for d in m.domains.iter().filter(|d| d.driver) {
    ///     for grant in &d.devices {
    ///         match m.grant_target(grant) {
    ///             Some(DeviceTarget::PciAddress { bus, slot, function }) => { /* ... */ }
    ///             _ => { /* ... */ }
    ///         }
    ///     }
    /// }
    /// # }
    /// ```
    pub fn grant_target<'a>(&'a self, grant: &'a DeviceGrant) -> Option<DeviceTarget<'a>> {
        Some(match grant {
            DeviceGrant::Disk { disk } => self.disks.get(*disk)?.at?.target(),
            DeviceGrant::Nic { nic } => self.nics.get(*nic)?.at?.target(),
            DeviceGrant::PciId { vendor, device, index } => {
                DeviceTarget::PciId { vendor: *vendor, device: *device, index: *index }
            }
            DeviceGrant::PciClass { class, subclass, index } => {
                DeviceTarget::PciClass { class: *class, subclass: *subclass, index: *index }
            }
            DeviceGrant::Compatible { compatible, unit } => {
                DeviceTarget::Node { compatible, unit: *unit }
            }
        })
    }

    /// The index of the domain the device of `disk` is granted to, if any (a disk no domain
    /// is granted stays masked).
    pub fn disk_owner(&self, disk: usize) -> Option<usize> {
        self.domains.iter().position(|d| d.devices.contains(&DeviceGrant::Disk { disk }))
    }

    /// The index of the domain the device of NIC `nic` is granted to, if any.
    pub fn nic_owner(&self, nic: usize) -> Option<usize> {
        self.domains.iter().position(|d| d.devices.contains(&DeviceGrant::Nic { nic }))
    }

    /// The sum of all domains' guaranteed memory in bytes (saturating).
    pub fn total_guaranteed(&self) -> u64 {
        self.domains.iter().fold(0u64, |sum, d| sum.saturating_add(d.guaranteed))
    }

    /// The memory the domain at `index` must have guaranteed for what the kernel charges to it:
    /// [`DOMAIN_FIXED_FRAMES`] pages plus the memory of every channel it sends on (saturating).
    ///
    /// [`Manifest::check`] holds every domain that sends on a channel to
    /// `guaranteed >= charged_to(index)`.
    pub fn charged_to(&self, index: usize) -> u64 {
        self.channels
            .iter()
            .filter(|c| c.from == index)
            .fold(DOMAIN_FIXED_FRAMES * PAGE_SIZE, |sum, c| sum.saturating_add(c.bytes()))
    }

    /// The sum of all domains' address-space quotas in bytes (saturating).
    pub fn total_address_space(&self) -> u64 {
        self.domains.iter().fold(0u64, |sum, d| sum.saturating_add(d.address_space))
    }

    /// The address space the kernel takes from the partition of the domain at `index` when it
    /// creates the domain: [`charged_to`](Self::charged_to) (its stack, control block and the
    /// channels it sends on) plus a guard page ([`GUARD_BYTES`]) below each of those ranges
    /// (saturating).
    ///
    /// [`Manifest::check`] holds every domain that sends on a channel to
    /// `address_space >= address_space_charged_to(index)`.
    pub fn address_space_charged_to(&self, index: usize) -> u64 {
        let ranges = self.channels.iter().filter(|c| c.from == index).count() as u64;
        self.charged_to(index)
            .saturating_add((DOMAIN_FIXED_RANGES + ranges).saturating_mul(GUARD_BYTES))
    }
}
