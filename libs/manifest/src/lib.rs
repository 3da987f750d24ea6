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
//! [`Manifest`] holds the guest's memory size and a list of [`DomainSpec`]s (name, app, args and
//! the memory contract `(guaranteed, optimistic)` in bytes). [`Manifest::check`] holds the
//! semantic rules, shared by the host and the kernel:
//!
//! - at least one domain and at most [`MAX_DOMAINS`];
//! - domain names non-empty, at most [`MAX_NAME_LEN`] bytes of `[a-z0-9-]`, unique; app names the
//!   same charset and length;
//! - at most [`MAX_ARGS`] arguments per domain, each at most [`MAX_ARG_LEN`] bytes;
//! - `guaranteed` non-zero and a multiple of [`PAGE_SIZE`]; `optimistic` a multiple of
//!   [`PAGE_SIZE`] (zero allowed);
//! - system memory a multiple of [`MEMORY_ALIGN`] (1 MiB) and at least [`MIN_MEMORY`] (16 MiB);
//! - the sum of all `guaranteed` plus [`KERNEL_RESERVE`] at most the system memory.
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
//! [`Manifest::check`]; it never panics on any input.
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
//! memory = { guaranteed = "256K", optimistic = "0" }   # optimistic optional, default 0
//! ```
//!
//! | key                          | type                   | unit  | default  |
//! |------------------------------|------------------------|-------|----------|
//! | `system.memory`              | size                   | bytes | required |
//! | `domain[i].name`             | string, `[a-z0-9-]`    |       | required |
//! | `domain[i].app`              | string, a known app    |       | required |
//! | `domain[i].args`             | array of strings       |       | `[]`     |
//! | `domain[i].memory.guaranteed`| size                   | bytes | required |
//! | `domain[i].memory.optimistic`| size                   | bytes | `0`      |
//!
//! A *size* is a string of decimal digits with an optional binary unit `K` (1024), `M` (1024²)
//! or `G` (1024³), e.g. `"256K"`, or a plain number of bytes (a TOML integer or a string of
//! digits). Negative, fractional and overflowing sizes and other units are errors (see
//! [`parse_size`]). Unknown keys anywhere are errors, as are missing required keys, wrong types,
//! apps that are not in the list the caller knows, and every rule of [`Manifest::check`]. Errors
//! read `FILE:LINE: KEY: REASON`, e.g.
//! `manifests/bad/dup.toml:9: domain[1].name: duplicate domain name "a" (first at line 4)`.
//!
//! # Not implemented yet
//!
//! - CPU contracts (`cpu = { period, slice, extra, latency }`), disk contracts, the `[system]`
//!   disk, and stretches per domain (`[[domain.stretch]]`) come with later issues; today they are
//!   unknown keys and rejected.
//! - `optimistic` memory is parsed, validated and carried to the kernel, but the kernel grants
//!   optimistic frames only from a later issue; until then a domain gets its `guaranteed`
//!   frames only.
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
#[cfg(feature = "toml")]
mod front;
mod size;

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

pub use check::{DomainRef, Problem, ProblemKind};
pub use compiled::{CompiledError, FORMAT_VERSION, HEADER_LEN, MAGIC, decode};
#[cfg(feature = "toml")]
pub use front::{ManifestError, parse, parse_file};
pub use size::{Bytes, SizeError, parse_size};

/// The page size: `guaranteed` and `optimistic` memory are multiples of it.
pub const PAGE_SIZE: u64 = 4096;
/// One mebibyte.
pub const MIB: u64 = 1024 * 1024;
/// System memory is a multiple of this (1 MiB): QEMU's `-m` takes MiB.
pub const MEMORY_ALIGN: u64 = MIB;
/// The smallest system memory accepted (16 MiB).
pub const MIN_MEMORY: u64 = 16 * MIB;
/// Memory the kernel keeps for itself (8 MiB): its image, heap and tables, and the firmware's
/// share. Domains' guarantees must fit in the rest.
pub const KERNEL_RESERVE: u64 = 8 * MIB;
/// The most domains a manifest may declare.
pub const MAX_DOMAINS: usize = 64;
/// The longest domain or app name, in bytes.
pub const MAX_NAME_LEN: usize = 31;
/// The most arguments a domain may be given.
pub const MAX_ARGS: usize = 16;
/// The longest argument, in bytes.
pub const MAX_ARG_LEN: usize = 128;

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
}

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
}

impl Manifest {
    /// The sum of all domains' guaranteed memory in bytes (saturating).
    pub fn total_guaranteed(&self) -> u64 {
        self.domains.iter().fold(0u64, |sum, d| sum.saturating_add(d.guaranteed))
    }
}
