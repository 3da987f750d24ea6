//! The TOML front end (feature `toml`): parse, validate and locate errors by line and key.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Visitor};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::check::Field;
use crate::duration::unit_of;
use crate::{
    Bytes, ChannelSpec, CpuSpec, DEFAULT_SLOT_SIZE, DEFAULT_SLOTS, DOMAIN_FIXED_FRAMES, DomainSpec,
    DurationError, GUARD_BYTES, MAX_CHANNELS_PER_DOMAIN, Manifest, PAGE_SIZE, Problem, ProblemKind,
    parse_duration, parse_size, shared_address_space,
};
use crate::{DeviceGrant, DiskBus, DiskModelName, DiskSpec, MAX_ARG_LEN, MAX_ARGS, Machine};
use crate::{NicSpec, default_mac};
use pager_spec::{Hierarchy, PagerSpec};

/// A manifest the front end rejected: where, and why.
///
/// Displays as `FILE:LINE: KEY: REASON`, leaving out the line or the key when it is not known
/// (an unreadable file has neither; a TOML syntax error has no key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    /// The file name as given to [`parse`] (or the path given to [`parse_file`]).
    pub file: String,
    /// The 1-based line of the offending key or value.
    pub line: Option<usize>,
    /// The key path, e.g. `domain[1].memory.guaranteed`.
    pub key: Option<String>,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ManifestError {}

impl ManifestError {
    /// An error about `key` of the manifest `text` (read from `file`), on the line where the
    /// key is written, for checks a caller makes beyond [`parse`]'s own (the host tool checks
    /// `system.memory` against the host's memory). `key` is a key path as in other errors:
    /// dotted keys, with `[i]` for the i-th table of an array (`domain[1].memory.guaranteed`).
    /// The line is left out if `text` does not hold the key.
    pub fn at_key(file: &str, text: &str, key: &str, reason: String) -> ManifestError {
        let at = DeTable::parse(text)
            .ok()
            .and_then(|doc| key_span(&DeValue::Table(doc.get_ref().clone()), key))
            .map(|span| span.start);
        ManifestError::at_offset(file, text, at, Some(key.to_owned()), reason)
    }

    /// An error at byte offset `at` of `text` (read from `file`; the line is left out without
    /// an offset), about `key` if known. Other TOML files of the project report their errors
    /// this way too (the host tool's benchmark baseline).
    pub fn at_offset(
        file: &str,
        text: &str,
        at: Option<usize>,
        key: Option<String>,
        reason: String,
    ) -> ManifestError {
        ManifestError { file: file.to_owned(), line: at.map(|at| line_of(text, at)), key, reason }
    }

    /// An error of serde's TOML deserializer (`toml::from_str`) over `text` (read from `file`),
    /// located as a manifest's own are: the line its span starts on and the key path written
    /// there, with the missing key appended when a required one is missing; a TOML syntax
    /// error says so. For the project's other TOML files read with serde (cluster manifests).
    pub fn from_toml(file: &str, text: &str, e: &toml::de::Error) -> ManifestError {
        let at = e.span().map(|s| s.start);
        let Ok(doc) = DeTable::parse(text) else {
            let reason = format!("TOML syntax error: {}", e.message());
            return ManifestError::at_offset(file, text, at, None, reason);
        };
        let root = DeValue::Table(doc.get_ref().clone());
        let mut key = at.map(|at| key_path(&root, at)).unwrap_or_default();
        if let Some(field) =
            e.message().strip_prefix("missing field `").and_then(|m| m.strip_suffix('`'))
        {
            push_key(&mut key, field);
        }
        let key = (!key.is_empty()).then_some(key);
        ManifestError::at_offset(file, text, at, key, e.message().to_owned())
    }
}

/// Where the key at `path` (as [`ManifestError::at_key`] takes it) is written in `root`.
fn key_span(root: &DeValue<'_>, path: &str) -> Option<Range<usize>> {
    let mut value = root;
    let mut span = None;
    for part in path.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((name, rest)) => (name, Some(rest.strip_suffix(']')?.parse::<usize>().ok()?)),
            None => (part, None),
        };
        let DeValue::Table(table) = value else { return None };
        let (k, v) = table.get_key_value(name)?;
        span = Some(k.span());
        value = v.get_ref();
        if let Some(i) = index {
            let DeValue::Array(array) = value else { return None };
            let item = array.get(i)?;
            span = Some(item.span());
            value = item.get_ref();
        }
    }
    span
}

/// Reads and parses the manifest at `path`; see [`parse`].
pub fn parse_file(path: &Path, known_apps: &[&str]) -> Result<Manifest, ManifestError> {
    parse_file_inner(path, known_apps, None)
}

/// Reads and parses the manifest at `path` and places it for `machine`; see [`parse_for`].
pub fn parse_file_for(
    path: &Path,
    known_apps: &[&str],
    machine: Machine,
) -> Result<Manifest, ManifestError> {
    parse_file_inner(path, known_apps, Some(machine))
}

fn parse_file_inner(
    path: &Path,
    known_apps: &[&str],
    machine: Option<Machine>,
) -> Result<Manifest, ManifestError> {
    let file = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            return Err(ManifestError { file, line: None, key: None, reason: format!("{e}") });
        }
    };
    match core::str::from_utf8(&bytes) {
        Ok(text) => parse_inner(&file, text, known_apps, machine),
        Err(e) => {
            let good = &bytes[..e.valid_up_to()];
            let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = good.len() - good.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            Err(ManifestError {
                file,
                line: Some(line),
                key: None,
                reason: format!(
                    "not valid UTF-8: byte {:#04x} at column {}",
                    bytes[e.valid_up_to()],
                    column + 1
                ),
            })
        }
    }
}

/// Parses and validates the TOML manifest `text` (named `file_name` in errors): the schema of
/// the [crate documentation](crate), then [`Manifest::check`] (with a channel's `from` or `to`
/// that names no domain reported as such), then that every domain's app is one of
/// `known_apps`. Returns the first error found.
///
/// The manifest is not placed for a machine ([`Manifest::machine`] is `None`): it is valid on
/// some machine. [`parse_for`] also places it for one.
pub fn parse(file_name: &str, text: &str, known_apps: &[&str]) -> Result<Manifest, ManifestError> {
    parse_inner(file_name, text, known_apps, None)
}

/// [`parse`], then [`Manifest::place`] for `machine`: every disk gets its device address, and
/// the machine's own rules apply (an AHCI disk on RISC-V `virt`, or a `compatible` grant on
/// x86_64 `q35`, is an error at its key).
pub fn parse_for(
    file_name: &str,
    text: &str,
    known_apps: &[&str],
    machine: Machine,
) -> Result<Manifest, ManifestError> {
    parse_inner(file_name, text, known_apps, Some(machine))
}

fn parse_inner(
    file_name: &str,
    text: &str,
    known_apps: &[&str],
    machine: Option<Machine>,
) -> Result<Manifest, ManifestError> {
    let at = |span: Option<Range<usize>>, key: Option<String>, reason: String| ManifestError {
        file: file_name.to_owned(),
        line: span.map(|s| line_of(text, s.start)),
        key,
        reason,
    };
    let doc = DeTable::parse(text).map_err(|e| {
        let mut reason = format!("TOML syntax error: {}", e.message());
        // Name the key a duplicate-key error points at.
        if e.message() == "duplicate key"
            && let Some(name) = e.span().and_then(|sp| text.get(sp)).map(str::trim)
            && !name.is_empty()
        {
            reason = format!("TOML syntax error: duplicate key `{name}`");
        }
        at(e.span(), None, reason)
    })?;
    let root = DeValue::Table(doc.get_ref().clone());
    let raw = RawManifest::deserialize(toml::de::Deserializer::from(doc)).map_err(|e| {
        let mut key = e.span().map(|s| key_path(&root, s.start)).unwrap_or_default();
        if let Some(field) =
            e.message().strip_prefix("missing field `").and_then(|m| m.strip_suffix('`'))
        {
            // `system` is the only required top-level key: when the document lacks it, it is
            // the key, whatever table the error's span points into.
            let top_missing = field == "system"
                && matches!(&root, DeValue::Table(t) if !t.contains_key("system"));
            if top_missing {
                key.clear();
            }
            push_key(&mut key, field);
        }
        at(e.span(), (!key.is_empty()).then_some(key), e.message().to_owned())
    })?;

    let (mut manifest, spans) =
        raw.lower(&root).map_err(|(span, key, reason)| at(Some(span), Some(key), reason))?;
    let checked = match machine {
        Some(machine) => manifest.place(machine),
        None => manifest.check(),
    };
    if let Err(problem) = checked {
        let (span, key) = spans.locate(&problem, &manifest);
        let reason = spans.reason(&problem, &manifest, text);
        return Err(at(Some(span), Some(key), reason));
    }
    for (i, d) in manifest.domains.iter().enumerate() {
        if !known_apps.contains(&d.app.as_str()) {
            let reason = format!("unknown app {:?} (known apps: {})", d.app, known_apps.join(", "));
            return Err(at(
                Some(spans.domains[i].app.clone()),
                Some(format!("domain[{i}].app")),
                reason,
            ));
        }
    }
    Ok(manifest)
}

/// The 1-based line of byte offset `pos` in `text`.
fn line_of(text: &str, pos: usize) -> usize {
    let pos = pos.min(text.len());
    text.as_bytes()[..pos].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Appends `key` to a dotted key path, quoting it unless it is a bare TOML key.
fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    let bare =
        !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        path.push_str(key);
    } else {
        path.push_str(&format!("{key:?}"));
    }
}

/// The path of the deepest key or value whose span contains `pos` (empty if none does).
///
/// Tables' spans cover only their headers, so every child is searched, not only those of
/// tables whose span contains `pos`.
fn key_path(root: &DeValue<'_>, pos: usize) -> String {
    fn contains(span: &Range<usize>, pos: usize) -> bool {
        span.contains(&pos) || (span.is_empty() && span.start == pos)
    }
    fn find(value: &DeValue<'_>, pos: usize, path: &mut String) -> bool {
        let len = path.len();
        match value {
            DeValue::Table(table) => {
                for (k, v) in table.iter() {
                    push_key(path, k.get_ref());
                    if find(v.get_ref(), pos, path)
                        || contains(&k.span(), pos)
                        || contains(&v.span(), pos)
                    {
                        return true;
                    }
                    path.truncate(len);
                }
            }
            DeValue::Array(array) => {
                for (i, v) in array.iter().enumerate() {
                    path.push_str(&format!("[{i}]"));
                    if find(v.get_ref(), pos, path) || contains(&v.span(), pos) {
                        return true;
                    }
                    path.truncate(len);
                }
            }
            _ => {}
        }
        false
    }
    let mut path = String::new();
    find(root, pos, &mut path);
    path
}

/// A size in bytes as written in TOML: `"256K"`, `"128M"`, `"1G"`, `"4096"` or `4096`.
struct Size(u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl Visitor<'_> for SizeVisitor {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"256K\", \"128M\", \"1G\" or a number of bytes")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Size, E> {
                parse_size(s).map(Size).map_err(|e| E::custom(format!("invalid size {s:?}: {e}")))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Size, E> {
                Ok(Size(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Size, E> {
                u64::try_from(n)
                    .map(Size)
                    .map_err(|_| E::custom(format!("invalid size {n}: negative size")))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Size, E> {
                Err(E::custom(format!(
                    "invalid size {n}: fractional size (write sizes as strings with a unit, \
                     e.g. \"1536K\" for 1.5M)"
                )))
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

/// A duration in nanoseconds as written in TOML: a string such as `"10ms"` or `"500us"`.
struct Duration(u64);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl Visitor<'_> for DurationVisitor {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"10ms\", \"500us\" or \"1s\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Duration, E> {
                parse_duration(s).map(Duration).map_err(|e| {
                    E::custom(match e {
                        DurationError::BadUnit => format!(
                            "invalid duration {s:?}: unknown unit {:?} (use ns, us, ms or s)",
                            unit_of(s)
                        ),
                        _ => format!("invalid duration {s:?}: {e}"),
                    })
                })
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Duration, E> {
                Err(E::custom(format!(
                    "invalid duration {n}: {} (write it as a string, e.g. \"{n}ms\")",
                    DurationError::MissingUnit
                )))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Duration, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => {
                        Err(E::custom(format!("invalid duration {n}: {}", DurationError::Negative)))
                    }
                }
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Duration, E> {
                let reason = if n < 0.0 {
                    DurationError::Negative.to_string()
                } else {
                    format!("{}, and no fraction", DurationError::MissingUnit)
                };
                Err(E::custom(format!(
                    "invalid duration {n}: {reason} (write it as a string, e.g. \"1500us\" for \
                     1.5ms)"
                )))
            }
        }
        deserializer.deserialize_any(DurationVisitor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    /// The machine: its memory, disks and NICs.
    system: Spanned<RawSystem>,
    #[serde(default)]
    /// The domains, `[[domain]]` once per domain (1 to 64), created in file order.
    domain: Vec<Spanned<RawDomain>>,
    #[serde(default)]
    /// The IO channels between domains, `[[channel]]` once per channel (0 to 64), before or after
    /// the domains they name.
    channel: Vec<Spanned<RawChannel>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table [system]")]
struct RawSystem {
    /// Guest RAM, QEMU's `-m`: 16M to 62G, and no more than the host has.
    memory: Spanned<Size>,
    #[serde(default)]
    /// The machine's disks, `[[system.disk]]` once per disk (at most 8), written after `memory`.
    /// Default: none.
    disk: Vec<Spanned<RawDisk>>,
    #[serde(default)]
    /// The machine's network interfaces, `[[system.nic]]` once per NIC (at most 4). Default: none.
    nic: Vec<Spanned<RawNic>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table [[system.nic]]")]
struct RawNic {
    /// The NIC's unique name among NICs, `[a-z0-9-]`, 1 to 31 bytes; a driver domain is granted it
    /// as `{ nic = "NAME" }`.
    name: Spanned<String>,
    /// Its MAC address, six pairs of hex digits (`"52:54:00:aa:bb:cc"`): unicast, unique among the
    /// NICs. Default: QEMU's prefix with the NIC's index last, `52:54:00:12:35:II`.
    mac: Option<Spanned<MacAddress>>,
}

/// A MAC address as written in a NIC: `"52:54:00:12:35:01"` (six pairs of hex digits).
struct MacAddress([u8; 6]);

impl<'de> Deserialize<'de> for MacAddress {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        let mut mac = [0u8; 6];
        let mut parts = s.split(':');
        let all = mac.iter_mut().all(|b| match parts.next().and_then(|p| hex(p, 2)) {
            Some(v) => {
                *b = v as u8;
                true
            }
            None => false,
        });
        if all && parts.next().is_none() {
            return Ok(MacAddress(mac));
        }
        Err(de::Error::custom(format!(
            "invalid MAC address {s:?}: write six pairs of hex digits separated by ':', e.g. \
             \"52:54:00:12:35:01\""
        )))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table [[system.disk]]")]
struct RawDisk {
    /// The disk's unique name, `[a-z0-9-]`, 1 to 31 bytes; its image is
    /// `target/disks/<arch>/<manifest>-<name>.img`.
    name: Spanned<String>,
    /// The disk's size: a multiple of 512 bytes, 1M to 64G.
    size: Spanned<Size>,
    /// How the machine attaches it: virtio-blk, or a SATA disk on an AHCI controller (x86_64 `q35`
    /// only).
    bus: Spanned<RawBus>,
    /// A mechanical drive the disk behaves like: its driver completes every request after the
    /// model's seek, rotation and transfer time, deterministically under `-icount`, scaled to the
    /// disk's size. Default: none, the disk's own speed.
    model: Option<Spanned<RawModel>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum RawModel {
    #[serde(rename = "deskstar-34gxp")]
    Deskstar34gxp,
    #[serde(rename = "cheetah-15k")]
    Cheetah15k,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawBus {
    Virtio,
    Ahci,
}

/// One entry of `devices`: exactly one of `disk`, `nic`, `pci` (with `index`), `pci_class`
/// (with `index`) or `compatible` (with `unit`).
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { disk = \"data\" }, { nic = \"net0\" }, \
                 { pci = \"1af4:1001\", index = 0 }, \
                 { pci_class = \"01.06\", index = 0 } or { compatible = \"virtio,mmio\", \
                 unit = 0 }"
)]
struct RawGrant {
    /// The device that serves disk NAME, wherever the machine has it (the usual form).
    disk: Option<Spanned<String>>,
    /// The device of NIC NAME.
    nic: Option<Spanned<String>>,
    /// The `index`-th PCI function (from 0, in bus:device.function order) with this vendor and
    /// device ID.
    pci: Option<Spanned<PciIds>>,
    /// The `index`-th PCI function of this class and subclass.
    pci_class: Option<Spanned<PciClass>>,
    /// The `unit`-th device-tree node (from 0, by address) with this first `compatible` string:
    /// RISC-V only.
    compatible: Option<Spanned<String>>,
    /// Which of the PCI functions `pci` or `pci_class` matches, from 0; only with them.
    index: Option<Spanned<u16>>,
    /// Which of the nodes `compatible` matches, from 0; only with it.
    unit: Option<Spanned<u16>>,
}

/// A PCI `vendor:device` pair as written in a grant: `"1af4:1001"` (four hex digits each).
struct PciIds(u16, u16);

/// A PCI `class.subclass` pair as written in a grant: `"01.06"` (two hex digits each), as the
/// boot log prints them.
struct PciClass(u8, u8);

/// Exactly `digits` hexadecimal digits as a number.
fn hex(s: &str, digits: usize) -> Option<u32> {
    (s.len() == digits && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u32::from_str_radix(s, 16).ok())
        .flatten()
}

impl<'de> Deserialize<'de> for PciIds {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.split_once(':')
            .and_then(|(v, d)| Some(PciIds(hex(v, 4)? as u16, hex(d, 4)? as u16)))
            .ok_or_else(|| {
                de::Error::custom(format!(
                    "invalid PCI IDs {s:?}: write vendor:device as four hex digits each, e.g. \
                     \"1af4:1001\""
                ))
            })
    }
}

impl<'de> Deserialize<'de> for PciClass {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.split_once('.')
            .and_then(|(c, sc)| Some(PciClass(hex(c, 2)? as u8, hex(sc, 2)? as u8)))
            .ok_or_else(|| {
                de::Error::custom(format!(
                    "invalid PCI class {s:?}: write class.subclass as two hex digits each, as \
                     the boot log prints them, e.g. \"01.06\""
                ))
            })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table [[domain]]")]
struct RawDomain {
    /// The domain's unique name, `[a-z0-9-]`, 1 to 31 bytes.
    name: Spanned<String>,
    /// The program it runs: an app in `userland/apps/` or a driver in `drivers/`.
    app: Spanned<String>,
    /// The program's arguments, at most 16 of at most 256 bytes each. Default: `[]`.
    args: Option<Spanned<Vec<Spanned<String>>>>,
    /// The CPU contract: in every `period` the domain is guaranteed `slice` of CPU time (Atropos,
    /// `docs/cpu.md`). Default: best effort, `{ period = "100ms", slice = "1ms", extra = true,
    /// latency = "10ms" }`.
    cpu: Option<Spanned<RawCpu>>,
    /// The disk-time contract of the stream the domain opens on each block driver it has a channel
    /// to, in disk time. One driver's clients' contracts are admitted together (at most 90% of the
    /// disk; the rest serves best-effort streams). Default: no guarantee, the disk's slack time.
    disk: Option<Spanned<RawCpu>>,
    /// The link-time contract of the transmit stream the domain opens on each network driver it has
    /// a channel to, in the driver's model of a 100 Mbit/s link. One driver's clients' contracts
    /// are admitted together, at most 90% of the link. Default: best effort, 1 ms of every 10 ms
    /// with slack time (`manifest::NET_BEST_EFFORT`).
    net: Option<Spanned<RawCpu>>,
    /// The memory contract: guaranteed and optimistic memory, and the address-space quota.
    memory: Spanned<RawMemory>,
    /// The domain is meant to fail (exit non-zero or be terminated): `cargo xtask run` does not
    /// count its failure. Default: `false`.
    expect_failure: Option<bool>,
    /// The domain is a trusted driver domain: `true` exactly when it has `devices` (without an
    /// IOMMU a device can write anywhere). Default: `false`.
    driver: Option<Spanned<bool>>,
    /// The devices granted to the domain, at most 4 (the control block describes 4); a device to at
    /// most one domain. Default: `[]`.
    devices: Option<Spanned<Vec<Spanned<RawGrant>>>>,
    /// The domain pages a stretch with the paged stretch driver: the hierarchy, frames and swap
    /// disk, checked with the paging domain's own parser and passed to it as `--pager SPEC`.
    /// Default: none.
    pager: Option<Spanned<RawPager>>,
}

/// A domain's `pager` table: the paged stretch's configuration, which the front end renders
/// to the text [`PagerSpec::parse`] reads and passes to the domain as `--pager SPEC`. Every
/// key is optional here: which are required is the spec parser's rule.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { hierarchy = \"compressed\", frames = 256, cache = \"128K\", \
                 policy = \"clock\", disk = \"pg\", swap = \"32M\" }"
)]
struct RawPager {
    /// The Heracles hierarchy: `"local"` (frames over the disk), `"compressed"` (a compressed pool
    /// between them), `"prefetching-compressed"` (the pool over eviction and fetch areas) or
    /// `"prefetching"` (eviction and fetch areas). Required.
    hierarchy: Option<Spanned<String>>,
    /// Frames to page into, 1 to 1048576: `frames` × 4K at most the domain's guaranteed plus
    /// optimistic memory (guaranteed frames are used first). Required.
    frames: Option<Spanned<u64>>,
    /// The compressed pool's bytes, at least 4K; only with `compressed` and
    /// `prefetching-compressed`. Default: a quarter of the frames' bytes.
    cache: Option<Spanned<Size>>,
    /// The compressed pool's compressor: `"lz4"` or `"wkdm"` (Wilson and Kaplan's word-based one);
    /// only with the hierarchies with a pool. Default: `"lz4"`.
    codec: Option<Spanned<String>>,
    /// The eviction area's pages, 1 to 1024; only with `prefetching` and `prefetching-compressed`.
    /// Default: `8`.
    evict: Option<Spanned<u64>>,
    /// The fetch area's pages, 1 to 1024; only with `prefetching` and `prefetching-compressed`.
    /// Default: `8`.
    fetch: Option<Spanned<u64>>,
    /// The replacement policy: `"clock"` (second-chance FIFO) or `"lru"`. Default: `"clock"`.
    policy: Option<Spanned<String>>,
    /// The block session's channel prefix, 1 to 27 bytes of `[a-z0-9-]`: the manifest must have a
    /// channel `DISK-req` from this domain and `DISK-resp` to it, both joining it to the same block
    /// driver domain. Required.
    disk: Option<Spanned<String>>,
    /// The swap area's length on the disk, a non-zero multiple of 4K. Default: `"32M"`.
    swap: Option<Spanned<Size>>,
    /// The swap area's offset on the disk, a multiple of 4K. Default: `0`.
    swap_at: Option<Spanned<Size>>,
    /// Pages evicted at once when no frame is free (1 to 1024): the next faults find free frames
    /// and skip eviction. Default: `1`.
    ahead: Option<Spanned<u64>>,
    /// Evictions between two readings of the hardware's accessed bits for the replacement policy (0
    /// to 1048576; 0: never, the policy hears of faults only). Harvesting makes the clock a true
    /// second-chance clock; without it the clock evicts nearly in FIFO order, as the thesis's did,
    /// which keeps the groups `prefetching` stores in the program's order (`cargo xtask bench
    /// paging` measures both). Default: `0`.
    harvest: Option<Spanned<u64>>,
    /// A page moved to or from the disk lends its frame to the disk driver for the request, so
    /// the device reads or writes it in place; `false` copies every page through the block
    /// session's data area instead (`cargo xtask bench paging` measures both). Default: `true`.
    loans: Option<Spanned<bool>>,
    /// The backing store below the caches: `"local"` (the disk) or `"remote"` (other nodes' memory
    /// through the remote paging client, the disk as fallback; only with `local` and `compressed`).
    /// Default: `"local"`.
    store: Option<Spanned<String>>,
    /// With `store = "remote"` only: `"none"`, `"server"` (each page on a second server too) or
    /// `"disk"` (each page on the disk too). Default: `"none"`.
    mirror: Option<Spanned<String>>,
    /// The network session's channel prefix, as `disk`'s (`NET-req` from this domain, `NET-resp` to
    /// it, both joining it to the network driver domain), not the same as `disk`. Required with
    /// `store = "remote"`.
    net: Option<Spanned<String>>,
    /// The traders to ask for servers, 1 to 3 endpoints `"A.B.C.D:PORT"` (no port 0, no 0.0.0.0,
    /// none twice); `store = "remote"` needs `traders` or `servers` or both.
    traders: Option<Spanned<Vec<String>>>,
    /// Servers to try before asking a trader, 1 to 4 endpoints of the same form (for tests and
    /// fixed clusters).
    servers: Option<Spanned<Vec<String>>>,
    /// Spread pages over several servers, or grow one server's reservation. Default: `true`.
    spread: Option<Spanned<bool>>,
    /// The remote client compresses every page it sends with WKdm (the thesis's `netc`): fewer
    /// bytes and packets on the wire for the client's CPU; a page that does not shrink goes
    /// whole. Ignored under a compressed cache (as in the thesis): a WKdm cache's pages go to
    /// the server compressed anyway. Only with `store = "remote"`. Default: `false`.
    netc: Option<Spanned<bool>>,
    /// The contract asked of each server's CPU (the thesis's `sv{p,s,x}`). Each server admits
    /// the client only within what its CPU has left, serves its packets by EDF over these
    /// contracts and charges it their CPU time, receive work included. Only with
    /// `store = "remote"`. Default: 1 ms of every 10 ms, with extra. In the spec:
    /// `svqos=10ms/1ms/x`.
    svqos: Option<Spanned<RawQos>>,
    /// The contract asked of each server's link (the thesis's `net{p,s,x}`): the link time its
    /// replies may take in every period (at 100 Mbit/s, a page's three packets take about
    /// 0.37 ms); each server admits the client only within what its link has left and sends
    /// its replies by EDF over these contracts. Only with `store = "remote"`. Default: 1 ms of
    /// every 10 ms, with extra. In the spec: `netqos=PERIOD/SLICE[/x]`.
    netqos: Option<Spanned<RawQos>>,
}

/// A `pager` table's contract with a remote server's CPU or link (`svqos`, `netqos`), spelled
/// in the spec as `PERIOD/SLICE[/x]`.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { period = \"10ms\", slice = \"1ms\", extra = true }"
)]
struct RawQos {
    /// The period, 1 µs to 10 s.
    period: Duration,
    /// The guaranteed time in each period, at most the period; 0 only with `extra`.
    slice: Duration,
    /// Whether the server's slack time may serve the client beyond its slice. Default:
    /// `false` when the table is written.
    extra: Option<bool>,
}

/// One key of a `pager` table as written: its name, its value in the spec's form, the value
/// as an error shows it, and where it is.
struct PagerKey {
    key: &'static str,
    value: String,
    shown: String,
    span: Range<usize>,
}

impl RawPager {
    /// The keys written, in the spec's order.
    fn keys(self) -> Vec<PagerKey> {
        fn text(key: &'static str, v: Option<Spanned<String>>) -> Option<PagerKey> {
            let span = v.as_ref()?.span();
            let value = v?.into_inner();
            Some(PagerKey { key, shown: format!("{value:?}"), value, span })
        }
        fn number(key: &'static str, v: Option<Spanned<u64>>) -> Option<PagerKey> {
            let span = v.as_ref()?.span();
            let n = v?.into_inner();
            Some(PagerKey { key, value: n.to_string(), shown: n.to_string(), span })
        }
        fn size(key: &'static str, v: Option<Spanned<Size>>) -> Option<PagerKey> {
            let span = v.as_ref()?.span();
            let n = v?.into_inner().0;
            Some(PagerKey { key, value: n.to_string(), shown: Bytes(n).to_string(), span })
        }
        // Endpoints, `+` between them in the spec.
        fn list(key: &'static str, v: Option<Spanned<Vec<String>>>) -> Option<PagerKey> {
            let span = v.as_ref()?.span();
            let items = v?.into_inner();
            Some(PagerKey { key, value: items.join("+"), shown: format!("{items:?}"), span })
        }
        fn qos(key: &'static str, v: Option<Spanned<RawQos>>) -> Option<PagerKey> {
            let span = v.as_ref()?.span();
            let q = v?.into_inner();
            let value = pager_spec::Qos {
                period_ns: q.period.0,
                slice_ns: q.slice.0,
                extra: q.extra.unwrap_or(false),
            }
            .to_string();
            Some(PagerKey { key, shown: value.clone(), value, span })
        }
        fn yes_no(key: &'static str, v: Option<Spanned<bool>>) -> Option<PagerKey> {
            let span = v.as_ref()?.span();
            let b = v?.into_inner();
            let value = if b { "yes" } else { "no" }.to_owned();
            Some(PagerKey { key, value, shown: b.to_string(), span })
        }
        [
            text("hierarchy", self.hierarchy),
            number("frames", self.frames),
            size("cache", self.cache),
            text("codec", self.codec),
            number("evict", self.evict),
            number("fetch", self.fetch),
            text("policy", self.policy),
            text("disk", self.disk),
            size("swap", self.swap),
            size("swap_at", self.swap_at),
            number("ahead", self.ahead),
            number("harvest", self.harvest),
            yes_no("loans", self.loans),
            text("store", self.store),
            text("mirror", self.mirror),
            text("net", self.net),
            list("traders", self.traders),
            list("servers", self.servers),
            yes_no("spread", self.spread),
            yes_no("netc", self.netc),
            qos("svqos", self.svqos),
            qos("netqos", self.netqos),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { period = \"10ms\", slice = \"2ms\", extra = true, \
                 latency = \"1ms\" }"
)]
struct RawCpu {
    /// The contract's period: 100us to 10s.
    period: Spanned<Duration>,
    /// The time guaranteed in every period: 10us up to the period.
    slice: Spanned<Duration>,
    /// The domain may also use slack time that no contract claims. Default: `false`.
    extra: Option<bool>,
    /// A hint: run within this long of a wake-up, 10us to 10s. Default: the period.
    latency: Option<Spanned<Duration>>,
}

impl RawCpu {
    /// The contract written (a `cpu` or a `disk` table): no extra time and a latency hint of
    /// the period unless it says otherwise.
    fn spec(self) -> CpuSpec {
        let period_ns = self.period.into_inner().0;
        CpuSpec {
            period_ns,
            slice_ns: self.slice.into_inner().0,
            extra: self.extra.unwrap_or(false),
            latency_ns: self.latency.map_or(period_ns, |l| l.into_inner().0),
        }
    }
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { guaranteed = \"256K\", optimistic = \"0\", \
                 address_space = \"1G\" }"
)]
struct RawMemory {
    /// Memory always available to the domain; its stack, control block, heap, page tables and the
    /// channels it sends on come out of it.
    guaranteed: Spanned<Size>,
    /// Memory granted when free, and revoked by notice. Default: `0`.
    optimistic: Option<Spanned<Size>>,
    /// The domain's partition of the 128G stretch region, which everything the kernel places for it
    /// at run time comes out of. Default: an equal share of what the given quotas leave, rounded
    /// down to 2M and at most 1G.
    address_space: Option<Spanned<Size>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table [[channel]]")]
struct RawChannel {
    /// The channel's unique name, `[a-z0-9-]`, 1 to 31 bytes.
    name: Spanned<String>,
    /// The name of the sending domain, which the channel's memory is charged to.
    from: Spanned<String>,
    /// The name of the receiving domain, not the sender.
    to: Spanned<String>,
    /// The ring's length: a power of two, 2 to 4096. Default: `64`.
    slots: Option<Spanned<u32>>,
    /// Bytes per message slot: a multiple of 8, 8 to 4096. Default: `64`.
    slot_size: Option<Spanned<SlotSize>>,
}

/// A slot size: a [`Size`] that fits in 32 bits (larger ones break the slot-size rule anyway).
struct SlotSize(u32);

impl<'de> Deserialize<'de> for SlotSize {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Size(n) = Size::deserialize(deserializer)?;
        u32::try_from(n).map(SlotSize).map_err(|_| {
            de::Error::custom(ProblemKind::SlotSizeInvalid { slot_size: n }.to_string())
        })
    }
}

/// Where each field of a parsed manifest was written, to point errors at it.
struct Spans {
    /// The `domain` key, or the start of the file if there is none.
    domain_key: Range<usize>,
    system_memory: Range<usize>,
    domains: Vec<DomainSpans>,
    /// The `channel` key, or the start of the file if there is none.
    channel_key: Range<usize>,
    channels: Vec<ChannelSpans>,
    /// The `disk` key of `[system]`, or the `system` key if there is none.
    disk_key: Range<usize>,
    disks: Vec<DiskSpans>,
    /// The `nic` key of `[system]`, or the `system` key if there is none.
    nic_key: Range<usize>,
    nics: Vec<NicSpans>,
}

struct NicSpans {
    table: Range<usize>,
    name: Range<usize>,
    /// The `mac` value, or the table if there is none.
    mac: Range<usize>,
}

struct DiskSpans {
    table: Range<usize>,
    name: Range<usize>,
    size: Range<usize>,
    bus: Range<usize>,
}

struct ChannelSpans {
    table: Range<usize>,
    name: Range<usize>,
    from: Range<usize>,
    /// The domain name `from` was written as (it may name no domain).
    from_name: String,
    to: Range<usize>,
    /// The domain name `to` was written as (it may name no domain).
    to_name: String,
    /// The `slots` value, or the table if there is none.
    slots: Range<usize>,
    /// The `slot_size` value, or the table if there is none.
    slot_size: Range<usize>,
}

struct DomainSpans {
    table: Range<usize>,
    name: Range<usize>,
    app: Range<usize>,
    /// The `args` value, or the table if there is none.
    args: Range<usize>,
    arg: Vec<Range<usize>>,
    guaranteed: Range<usize>,
    /// The `optimistic` value, or the `memory` table if there is none.
    optimistic: Range<usize>,
    /// The `address_space` value, or the `memory` table if there is none.
    address_space: Range<usize>,
    /// The `cpu` table, or the domain's table if there is none.
    cpu: Range<usize>,
    /// The `period` value, or the `cpu` span if there is none.
    cpu_period: Range<usize>,
    /// The `slice` value, or the `cpu` span if there is none.
    cpu_slice: Range<usize>,
    /// The `latency` value, or the `cpu` span if there is none.
    cpu_latency: Range<usize>,
    /// The `disk` contract's table and its `period`, `slice` and `latency` values (each the
    /// table if it is not written), or the domain's table if there is no `disk`.
    disk: [Range<usize>; 4],
    /// The `net` contract's, likewise.
    net: [Range<usize>; 4],
    /// The `driver` value, or the table if there is none.
    driver: Range<usize>,
    /// The `devices` value, or the table if there is none.
    devices: Range<usize>,
    device: Vec<Range<usize>>,
    /// The disk name each `{ disk = ... }` grant was written with (it may name no disk).
    device_disk: Vec<Option<String>>,
    /// The NIC name each `{ nic = ... }` grant was written with (it may name no NIC).
    device_nic: Vec<Option<String>>,
}

/// A grant as the model has it, and the disk or NIC name it was written with if it is a disk
/// or NIC grant; or the span and reason of why it is malformed.
fn lower_grant(
    g: Spanned<RawGrant>,
    disk_index: &dyn Fn(&str) -> usize,
    nic_index: &dyn Fn(&str) -> usize,
) -> Result<(DeviceGrant, Option<String>), (Range<usize>, String)> {
    let table = g.span();
    let g = g.into_inner();
    let forms = [
        g.disk.is_some(),
        g.nic.is_some(),
        g.pci.is_some(),
        g.pci_class.is_some(),
        g.compatible.is_some(),
    ];
    if forms.iter().filter(|&&f| f).count() != 1 {
        return Err((
            table,
            "a device grant names exactly one of `disk`, `nic`, `pci` (with `index`), \
             `pci_class` (with `index`) or `compatible` (with `unit`)"
                .to_owned(),
        ));
    }
    let no = |key: &str, v: &Option<Spanned<u16>>, with: &str| match v {
        Some(v) => Err((v.span(), format!("`{key}` does not go with `{with}`"))),
        None => Ok(()),
    };
    let need = |key: &str, v: Option<Spanned<u16>>, with: &str| match v {
        Some(v) => Ok(v.into_inner()),
        None => Err((table.clone(), format!("`{with}` needs `{key}` (0 for the first)"))),
    };
    if let Some(disk) = g.disk {
        no("index", &g.index, "disk")?;
        no("unit", &g.unit, "disk")?;
        let name = disk.into_inner();
        return Ok((DeviceGrant::Disk { disk: disk_index(&name) }, Some(name)));
    }
    if let Some(nic) = g.nic {
        no("index", &g.index, "nic")?;
        no("unit", &g.unit, "nic")?;
        let name = nic.into_inner();
        return Ok((DeviceGrant::Nic { nic: nic_index(&name) }, Some(name)));
    }
    if let Some(ids) = g.pci {
        no("unit", &g.unit, "pci")?;
        let PciIds(vendor, device) = ids.into_inner();
        let index = need("index", g.index, "pci")?;
        return Ok((DeviceGrant::PciId { vendor, device, index }, None));
    }
    if let Some(class) = g.pci_class {
        no("unit", &g.unit, "pci_class")?;
        let PciClass(class, subclass) = class.into_inner();
        let index = need("index", g.index, "pci_class")?;
        return Ok((DeviceGrant::PciClass { class, subclass, index }, None));
    }
    let compatible = g.compatible.map(Spanned::into_inner).unwrap_or_default();
    no("index", &g.index, "compatible")?;
    let unit = need("unit", g.unit, "compatible")?;
    Ok((DeviceGrant::Compatible { compatible, unit }, None))
}

/// Where a manifest that does not lower is wrong: the span, the key path and the reason.
type LowerError = (Range<usize>, String, String);

/// A paging domain's view of the manifest's channels, to check a session of it.
struct Session<'a> {
    domain: usize,
    name: &'a str,
    channels: &'a [ChannelSpec],
    channel_spans: &'a [ChannelSpans],
}

impl Session<'_> {
    /// Checks that the session named `prefix` (the pager's `key`, a `what` session) has its
    /// request channel `PREFIX-req` from this domain and its reply channel `PREFIX-resp` to
    /// it, both joining it to the same domain; errors are at `span` and `path`.
    fn check(
        &self,
        prefix: &str,
        key: &str,
        what: &str,
        span: Range<usize>,
        path: String,
    ) -> Result<(), LowerError> {
        let named = |name: &str| self.channels.iter().position(|c| c.name == name);
        let (req, resp) = (format!("{prefix}-req"), format!("{prefix}-resp"));
        let need = |name: &str| {
            let reason = format!(
                "the pager's {key} {prefix:?} needs channels {req:?} (from this domain) and \
                 {resp:?} (to this domain), and there is no channel {name:?}"
            );
            (span.clone(), path.clone(), reason)
        };
        let req_at = named(&req).ok_or_else(|| need(&req))?;
        let resp_at = named(&resp).ok_or_else(|| need(&resp))?;
        let (req_c, resp_c) = (&self.channels[req_at], &self.channels[resp_at]);
        let name = self.name;
        if req_c.from != self.domain {
            let from = &self.channel_spans[req_at].from_name;
            let reason = format!(
                "channel[{req_at}] {req:?} is from {from:?}, not from this domain {name:?}: the \
                 pager sends its {what} requests on it"
            );
            return Err((span, path, reason));
        }
        if resp_c.to != self.domain {
            let to = &self.channel_spans[resp_at].to_name;
            let reason = format!(
                "channel[{resp_at}] {resp:?} is to {to:?}, not to this domain {name:?}: the pager \
                 receives the replies to its {what} requests on it"
            );
            return Err((span, path, reason));
        }
        if req_c.to != resp_c.from {
            let (to, from) =
                (&self.channel_spans[req_at].to_name, &self.channel_spans[resp_at].from_name);
            let reason = format!(
                "channel {req:?} goes to {to:?} but channel {resp:?} comes from {from:?}: a \
                 {what} session's two channels join the same two domains"
            );
            return Err((span, path, reason));
        }
        Ok(())
    }
}

/// The `pager` table of domain `i` checked: by [`PagerSpec::parse`], the parser the domain
/// uses; for keys that the hierarchy would ignore; against the domain's memory contract; and
/// for the block session's channels. Returns the spec as the domain is to get it.
fn lower_pager(
    i: usize,
    pager: Spanned<RawPager>,
    domains: &[DomainSpec],
    channels: &[ChannelSpec],
    channel_spans: &[ChannelSpans],
) -> Result<String, LowerError> {
    let table = pager.span();
    let keys = pager.into_inner().keys();
    let at = |key: &str| keys.iter().find(|k| k.key == key);
    let path = |key: &str| format!("domain[{i}].pager.{key}");
    let text = keys.iter().map(|k| format!("{}={}", k.key, k.value)).collect::<Vec<_>>().join(",");
    // A `,` or `=` in a string would read as more pairs of the spec, a `+` in an endpoint as
    // more endpoints.
    if let Some(k) = keys.iter().find(|k| k.value.contains([',', '='])) {
        let reason = format!("invalid pager {} {}: contains ',' or '='", k.key, k.shown);
        return Err((k.span.clone(), path(k.key), reason));
    }
    let lists = ["traders", "servers"];
    if let Some(k) = keys.iter().find(|k| lists.contains(&k.key) && k.shown.contains('+')) {
        let reason = format!("invalid pager {} {}: an endpoint contains '+'", k.key, k.shown);
        return Err((k.span.clone(), path(k.key), reason));
    }
    let spec = PagerSpec::parse(&text).map_err(|e| match at(&e.key) {
        Some(k) => (
            k.span.clone(),
            path(k.key),
            format!("invalid pager {} {}: {}", k.key, k.shown, e.reason),
        ),
        None if e.reason.starts_with("missing") => {
            let why = e.reason.trim_start_matches("missing");
            (table.clone(), path(&e.key), format!("missing field `{}`{why}", e.key))
        }
        None => (table.clone(), format!("domain[{i}].pager"), e.to_string()),
    })?;

    // Keys the hierarchy has no use for are mistakes: the spec would drop them.
    let (pool, areas) = match spec.hierarchy {
        Hierarchy::LocalPaging => (false, false),
        Hierarchy::CompressedCache { .. } => (true, false),
        Hierarchy::PrefetchingCompressedCache { .. } => (true, true),
        Hierarchy::PrefetchingCache { .. } => (false, true),
    };
    let unused = [
        ("cache", pool, "compressed pool", "compressed and prefetching-compressed"),
        ("evict", areas, "eviction area", "prefetching and prefetching-compressed"),
        ("fetch", areas, "fetch area", "prefetching and prefetching-compressed"),
    ];
    for (key, used, what, hierarchies) in unused {
        if let Some(k) = at(key).filter(|_| !used) {
            let reason = format!(
                "hierarchy {:?} has no {what}: `{key}` is for {hierarchies} only",
                spec.hierarchy.name()
            );
            return Err((k.span.clone(), path(key), reason));
        }
    }

    let d = &domains[i];
    let contract = d.guaranteed.saturating_add(d.optimistic);
    let frame_bytes = (spec.frames as u64).saturating_mul(PAGE_SIZE);
    if frame_bytes > contract {
        let span = at("frames").map_or(table.clone(), |k| k.span.clone());
        let reason = format!(
            "{} frames ({}) are more than the domain's memory contract: guaranteed {} + \
             optimistic {} = {}",
            spec.frames,
            Bytes(frame_bytes),
            Bytes(d.guaranteed),
            Bytes(d.optimistic),
            Bytes(contract)
        );
        return Err((span, path("frames"), reason));
    }

    // The block session: requests on `DISK-req` from this domain, replies on `DISK-resp` to it;
    // the network session of a remote store likewise on `NET-req` and `NET-resp`.
    let disk = at("disk").map_or(table.clone(), |k| k.span.clone());
    let session = Session { domain: i, name: &d.name, channels, channel_spans };
    session.check(&spec.disk, "disk", "block", disk, path("disk"))?;
    if let Some(remote) = spec.store.remote() {
        let net = at("net").map_or(table, |k| k.span.clone());
        session.check(&remote.net, "net", "network", net, path("net"))?;
    }
    Ok(spec.to_string())
}

impl RawManifest {
    /// The model and the spans of its fields.
    fn lower(self, root: &DeValue<'_>) -> Result<(Manifest, Spans), LowerError> {
        let key_span = |key: &str| match root {
            DeValue::Table(t) => t.get_key_value(key).map(|(k, _)| k.span()),
            _ => None,
        };
        let disk_key = match root {
            DeValue::Table(t) => t.get("system").and_then(|s| match s.get_ref() {
                DeValue::Table(s) => s.get_key_value("disk").map(|(k, _)| k.span()),
                _ => None,
            }),
            _ => None,
        };
        let disk_key = disk_key.or_else(|| key_span("system")).unwrap_or(0..0);
        let nic_key = match root {
            DeValue::Table(t) => t.get("system").and_then(|s| match s.get_ref() {
                DeValue::Table(s) => s.get_key_value("nic").map(|(k, _)| k.span()),
                _ => None,
            }),
            _ => None,
        };
        let nic_key = nic_key.or_else(|| key_span("system")).unwrap_or(0..0);
        let mut spans = Spans {
            domain_key: key_span("domain").unwrap_or(0..0),
            system_memory: self.system.get_ref().memory.span(),
            domains: Vec::with_capacity(self.domain.len()),
            channel_key: key_span("channel").unwrap_or(0..0),
            channels: Vec::with_capacity(self.channel.len()),
            disk_key,
            disks: Vec::new(),
            nic_key,
            nics: Vec::new(),
        };
        let system = self.system.into_inner();
        let memory = system.memory.into_inner().0;
        let mut disks = Vec::with_capacity(system.disk.len());
        for d in system.disk {
            let table = d.span();
            let d = d.into_inner();
            spans.disks.push(DiskSpans {
                table,
                name: d.name.span(),
                size: d.size.span(),
                bus: d.bus.span(),
            });
            let bus = match d.bus.into_inner() {
                RawBus::Virtio => DiskBus::Virtio,
                RawBus::Ahci => DiskBus::Ahci,
            };
            disks.push(DiskSpec {
                name: d.name.into_inner(),
                size: d.size.into_inner().0,
                bus,
                model: d.model.map(|m| match m.into_inner() {
                    RawModel::Deskstar34gxp => DiskModelName::Deskstar34gxp,
                    RawModel::Cheetah15k => DiskModelName::Cheetah15k,
                }),
                at: None,
            });
        }
        let mut nics = Vec::with_capacity(system.nic.len());
        for (i, n) in system.nic.into_iter().enumerate() {
            let table = n.span();
            let n = n.into_inner();
            let mac_span = n.mac.as_ref().map_or(table.clone(), Spanned::span);
            spans.nics.push(NicSpans { table, name: n.name.span(), mac: mac_span });
            nics.push(NicSpec {
                name: n.name.into_inner(),
                mac: n.mac.map_or(default_mac(i), |m| m.into_inner().0),
                at: None,
            });
        }
        // A name that is no disk's (or NIC's) becomes an index out of range, which `check`
        // reports; `Spans::reason` words it as an unknown name.
        let disk_index =
            |name: &str| disks.iter().position(|d| d.name == name).unwrap_or(usize::MAX);
        let nic_index = |name: &str| nics.iter().position(|n| n.name == name).unwrap_or(usize::MAX);
        let domain_count = self.domain.len();
        let address_space_default =
            shared_address_space(self.domain.iter().map(|d| {
                d.get_ref().memory.get_ref().address_space.as_ref().map(|a| a.get_ref().0)
            }));
        let mut domains = Vec::with_capacity(domain_count);
        let mut pagers = Vec::with_capacity(domain_count);
        for (i, d) in self.domain.into_iter().enumerate() {
            let table = d.span();
            let d = d.into_inner();
            let (args_span, args) = match d.args {
                Some(a) => (a.span(), a.into_inner()),
                None => (table.clone(), Vec::new()),
            };
            let mem_span = d.memory.span();
            let mem = d.memory.into_inner();
            let (optimistic_span, optimistic) = match mem.optimistic {
                Some(o) => (o.span(), o.into_inner().0),
                None => (mem_span.clone(), 0),
            };
            let (address_space_span, address_space) = match mem.address_space {
                Some(a) => (a.span(), a.into_inner().0),
                None => (mem_span, address_space_default),
            };
            let (cpu_span, cpu) = match d.cpu {
                Some(c) => (c.span(), Some(c.into_inner())),
                None => (table.clone(), None),
            };
            let cpu_period = cpu.as_ref().map_or(cpu_span.clone(), |c| c.period.span());
            let cpu_slice = cpu.as_ref().map_or(cpu_span.clone(), |c| c.slice.span());
            let cpu_latency = cpu
                .as_ref()
                .and_then(|c| c.latency.as_ref().map(Spanned::span))
                .unwrap_or(cpu_span.clone());
            let cpu = cpu.map_or(CpuSpec::BEST_EFFORT, RawCpu::spec);
            let disk_span = d.disk.as_ref().map_or(table.clone(), Spanned::span);
            let disk_spans = match &d.disk {
                Some(c) => {
                    let c = c.get_ref();
                    let latency = c.latency.as_ref().map_or(disk_span.clone(), Spanned::span);
                    [disk_span.clone(), c.period.span(), c.slice.span(), latency]
                }
                None => [disk_span.clone(), disk_span.clone(), disk_span.clone(), disk_span],
            };
            let disk_contract = d.disk.map(|c| c.into_inner().spec());
            let net_span = d.net.as_ref().map_or(table.clone(), Spanned::span);
            let net_spans = match &d.net {
                Some(c) => {
                    let c = c.get_ref();
                    let latency = c.latency.as_ref().map_or(net_span.clone(), Spanned::span);
                    [net_span.clone(), c.period.span(), c.slice.span(), latency]
                }
                None => [net_span.clone(), net_span.clone(), net_span.clone(), net_span],
            };
            let net_contract = d.net.map(|c| c.into_inner().spec());
            let driver_span = d.driver.as_ref().map_or(table.clone(), Spanned::span);
            pagers.push(d.pager);
            let (devices_span, raw_devices) = match d.devices {
                Some(v) => (v.span(), v.into_inner()),
                None => (table.clone(), Vec::new()),
            };
            let mut device = Vec::with_capacity(raw_devices.len());
            let mut device_disk = Vec::with_capacity(raw_devices.len());
            let mut device_nic = Vec::with_capacity(raw_devices.len());
            let mut devices = Vec::with_capacity(raw_devices.len());
            for (j, g) in raw_devices.into_iter().enumerate() {
                device.push(g.span());
                let (grant, name) =
                    lower_grant(g, &disk_index, &nic_index).map_err(|(span, reason)| {
                        (span, format!("domain[{i}].devices[{j}]"), reason)
                    })?;
                let nic = matches!(grant, DeviceGrant::Nic { .. });
                devices.push(grant);
                device_disk.push(if nic { None } else { name.clone() });
                device_nic.push(if nic { name } else { None });
            }
            spans.domains.push(DomainSpans {
                driver: driver_span,
                devices: devices_span,
                device,
                device_disk,
                device_nic,
                table,
                name: d.name.span(),
                app: d.app.span(),
                args: args_span,
                arg: args.iter().map(Spanned::span).collect(),
                guaranteed: mem.guaranteed.span(),
                optimistic: optimistic_span,
                address_space: address_space_span,
                cpu: cpu_span,
                cpu_period,
                cpu_slice,
                cpu_latency,
                disk: disk_spans,
                net: net_spans,
            });
            domains.push(DomainSpec {
                name: d.name.into_inner(),
                app: d.app.into_inner(),
                args: args.into_iter().map(Spanned::into_inner).collect(),
                guaranteed: mem.guaranteed.into_inner().0,
                optimistic,
                address_space,
                cpu,
                disk: disk_contract,
                net: net_contract,
                expect_failure: d.expect_failure.unwrap_or(false),
                driver: d.driver.is_some_and(|v| *v.get_ref()),
                devices,
            });
        }
        // A name that is no domain's becomes an index out of range, which `check` reports
        // after the domains' own problems; `Spans::reason` words it as an unknown name.
        let index_of =
            |name: &str| domains.iter().position(|d| d.name == name).unwrap_or(usize::MAX);
        let mut channels = Vec::with_capacity(self.channel.len());
        for c in self.channel {
            let table = c.span();
            let c = c.into_inner();
            let (slots_span, slots) = match c.slots {
                Some(s) => (s.span(), s.into_inner()),
                None => (table.clone(), DEFAULT_SLOTS),
            };
            let (slot_size_span, slot_size) = match c.slot_size {
                Some(s) => (s.span(), s.into_inner().0),
                None => (table.clone(), DEFAULT_SLOT_SIZE),
            };
            let (from, to) = (index_of(c.from.get_ref()), index_of(c.to.get_ref()));
            spans.channels.push(ChannelSpans {
                table,
                name: c.name.span(),
                from: c.from.span(),
                from_name: c.from.into_inner(),
                to: c.to.span(),
                to_name: c.to.into_inner(),
                slots: slots_span,
                slot_size: slot_size_span,
            });
            channels.push(ChannelSpec { name: c.name.into_inner(), from, to, slots, slot_size });
        }
        // A pager is checked against the channels, so once they are all read; its spec goes
        // to the domain as two more arguments.
        for (i, pager) in pagers.into_iter().enumerate() {
            let Some(pager) = pager else { continue };
            let span = pager.span();
            let spec = lower_pager(i, pager, &domains, &channels, &spans.channels)?;
            let d = &mut domains[i];
            let key = format!("domain[{i}].pager");
            if d.args.iter().any(|a| a == "--pager") {
                let reason =
                    "`args` give `--pager` already: write the pager in `pager` only".into();
                return Err((span, key, reason));
            }
            if spec.len() > MAX_ARG_LEN {
                let reason = format!(
                    "the pager's spec {spec:?} is {} bytes long, more than an argument may be \
                     ({MAX_ARG_LEN} bytes)",
                    spec.len()
                );
                return Err((span, key, reason));
            }
            if d.args.len() <= MAX_ARGS && d.args.len() + 2 > MAX_ARGS {
                let reason = format!(
                    "`--pager` and its spec make {} args (at most {MAX_ARGS}): leave room for \
                     them in `args`",
                    d.args.len() + 2
                );
                return Err((span, key, reason));
            }
            d.args.push("--pager".to_owned());
            d.args.push(spec);
            spans.domains[i].arg.extend([span.clone(), span]);
        }
        Ok((Manifest { memory, domains, channels, disks, nics, machine: None }, spans))
    }
}

impl Spans {
    /// The span and key path of the field a problem is about.
    fn locate(&self, problem: &Problem, manifest: &Manifest) -> (Range<usize>, String) {
        let field = problem.kind.field();
        let channel_field = |s: &ChannelSpans| match field {
            Field::ChannelName => Some((s.name.clone(), ".name")),
            Field::ChannelFrom => Some((s.from.clone(), ".from")),
            Field::ChannelTo => Some((s.to.clone(), ".to")),
            Field::ChannelEnd => {
                let domain = problem.domain.as_ref().map(|d| d.index);
                let channel = problem.channel.as_ref().and_then(|c| manifest.channels.get(c.index));
                if channel.is_some_and(|c| Some(c.from) == domain) {
                    Some((s.from.clone(), ".from"))
                } else {
                    Some((s.to.clone(), ".to"))
                }
            }
            Field::ChannelSlots => Some((s.slots.clone(), ".slots")),
            Field::ChannelSlotSize => Some((s.slot_size.clone(), ".slot_size")),
            Field::Channels => Some((s.table.clone(), "")),
            _ => None,
        };
        if let Some(c) = &problem.channel
            && let Some(s) = self.channels.get(c.index)
            && let Some((span, suffix)) = channel_field(s)
        {
            return (span, format!("channel[{}]{suffix}", c.index));
        }
        if let Some(k) = problem.disk {
            let Some(s) = self.disks.get(usize::from(k)) else {
                return (self.disk_key.clone(), "system.disk".into());
            };
            let (span, suffix) = match field {
                Field::DiskName => (s.name.clone(), ".name"),
                Field::DiskSize => (s.size.clone(), ".size"),
                Field::DiskBus => (s.bus.clone(), ".bus"),
                _ => (s.table.clone(), ""),
            };
            return (span, format!("system.disk[{k}]{suffix}"));
        }
        if let Some(k) = problem.nic {
            let Some(s) = self.nics.get(usize::from(k)) else {
                return (self.nic_key.clone(), "system.nic".into());
            };
            let (span, suffix) = match field {
                Field::NicName => (s.name.clone(), ".name"),
                Field::NicMac => (s.mac.clone(), ".mac"),
                _ => (s.table.clone(), ""),
            };
            return (span, format!("system.nic[{k}]{suffix}"));
        }
        let Some(d) =
            problem.domain.as_ref().and_then(|d| Some((d.index, self.domains.get(d.index)?)))
        else {
            return match field {
                Field::SystemMemory => (self.system_memory.clone(), "system.memory".into()),
                Field::Domains => (self.domain_key.clone(), "domain".into()),
                _ => (self.channel_key.clone(), "channel".into()),
            };
        };
        let (i, s) = d;
        let (span, suffix) = match field {
            Field::SystemMemory => return (self.system_memory.clone(), "system.memory".into()),
            Field::Name => (s.name.clone(), ".name".into()),
            Field::App => (s.app.clone(), ".app".into()),
            Field::Args => (s.args.clone(), ".args".into()),
            Field::Arg(j) => (s.arg.get(j).unwrap_or(&s.args).clone(), format!(".args[{j}]")),
            Field::Guaranteed => (s.guaranteed.clone(), ".memory.guaranteed".into()),
            Field::Optimistic => (s.optimistic.clone(), ".memory.optimistic".into()),
            Field::AddressSpace => (s.address_space.clone(), ".memory.address_space".into()),
            Field::Cpu => (s.cpu.clone(), ".cpu".into()),
            Field::CpuPeriod => (s.cpu_period.clone(), ".cpu.period".into()),
            Field::CpuSlice => (s.cpu_slice.clone(), ".cpu.slice".into()),
            Field::CpuLatency => (s.cpu_latency.clone(), ".cpu.latency".into()),
            Field::DiskContract => (s.disk[0].clone(), ".disk".into()),
            Field::DiskPeriod => (s.disk[1].clone(), ".disk.period".into()),
            Field::DiskSlice => (s.disk[2].clone(), ".disk.slice".into()),
            Field::DiskLatency => (s.disk[3].clone(), ".disk.latency".into()),
            Field::NetContract => (s.net[0].clone(), ".net".into()),
            Field::NetPeriod => (s.net[1].clone(), ".net.period".into()),
            Field::NetSlice => (s.net[2].clone(), ".net.slice".into()),
            Field::NetLatency => (s.net[3].clone(), ".net.latency".into()),
            Field::Driver => (s.driver.clone(), ".driver".into()),
            Field::Devices => (s.devices.clone(), ".devices".into()),
            Field::Device(j) => {
                (s.device.get(j).unwrap_or(&s.devices).clone(), format!(".devices[{j}]"))
            }
            _ => (s.table.clone(), String::new()),
        };
        (span, format!("domain[{i}]{suffix}"))
    }

    /// The reason to give for a problem: its `Display`, or for some problems a wording with the
    /// names and lines of the manifest as written.
    fn reason(&self, problem: &Problem, manifest: &Manifest, text: &str) -> String {
        let channel = problem.channel.as_ref().and_then(|c| self.channels.get(c.index));
        let domain_names =
            || manifest.domains.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ");
        match (&problem.kind, channel) {
            (ProblemKind::DuplicateName { first }, _) => format!(
                "duplicate domain name {:?} (first at line {})",
                manifest.domains[*first].name,
                line_of(text, self.domains[*first].name.start)
            ),
            (ProblemKind::DuplicateDiskName { first }, _) => format!(
                "duplicate disk name {:?} (first at line {})",
                manifest.disks[*first].name,
                line_of(text, self.disks[*first].name.start)
            ),
            (ProblemKind::UnknownDisk { grant, .. }, _) => {
                let written = problem
                    .domain
                    .as_ref()
                    .and_then(|d| self.domains.get(d.index)?.device_disk.get(*grant)?.clone())
                    .unwrap_or_default();
                let names = manifest.disks.iter().map(|d| d.name.as_str()).collect::<Vec<_>>();
                if names.is_empty() {
                    format!("unknown disk {written:?} (the manifest declares no [[system.disk]])")
                } else {
                    format!("unknown disk {written:?} (disks: {})", names.join(", "))
                }
            }
            (ProblemKind::UnknownNic { grant, .. }, _) => {
                let written = problem
                    .domain
                    .as_ref()
                    .and_then(|d| self.domains.get(d.index)?.device_nic.get(*grant)?.clone())
                    .unwrap_or_default();
                let names = manifest.nics.iter().map(|n| n.name.as_str()).collect::<Vec<_>>();
                if names.is_empty() {
                    format!("unknown NIC {written:?} (the manifest declares no [[system.nic]])")
                } else {
                    format!("unknown NIC {written:?} (NICs: {})", names.join(", "))
                }
            }
            (ProblemKind::DuplicateNicName { first }, _) => format!(
                "duplicate NIC name {:?} (first at line {})",
                manifest.nics[*first].name,
                line_of(text, self.nics[*first].name.start)
            ),
            (ProblemKind::DuplicateNicMac { first }, _) => format!(
                "duplicate MAC address {} (first at line {}, NIC {:?})",
                crate::Mac(manifest.nics[*first].mac),
                line_of(text, self.nics[*first].mac.start),
                manifest.nics[*first].name
            ),
            (ProblemKind::DeviceGrantedTwice { first_domain, first_grant, .. }, _) => format!(
                "the device is granted already, to domain {:?} (line {}): a device is granted \
                 to at most one domain",
                manifest.domains[*first_domain].name,
                line_of(text, self.domains[*first_domain].device[*first_grant].start)
            ),
            (ProblemKind::DuplicateChannelName { first }, _) => format!(
                "duplicate channel name {:?} (first at line {})",
                manifest.channels[*first].name,
                line_of(text, self.channels[*first].name.start)
            ),
            (ProblemKind::FromOutOfRange { .. }, Some(c)) => {
                format!("unknown domain {:?} (domains: {})", c.from_name, domain_names())
            }
            (ProblemKind::ToOutOfRange { .. }, Some(c)) => {
                format!("unknown domain {:?} (domains: {})", c.to_name, domain_names())
            }
            (ProblemKind::SameEnds, Some(c)) => format!(
                "from and to are both {:?}: a channel connects two different domains",
                c.from_name
            ),
            (ProblemKind::TooManyChannelEnds { count }, _) => {
                let name = problem.domain.as_ref().map_or("?", |d| d.name.as_str());
                format!(
                    "domain {name:?} is an end of {count} channels (at most \
                     {MAX_CHANNELS_PER_DOMAIN})"
                )
            }
            (ProblemKind::SenderGuaranteeTooSmall { guaranteed, needed }, _) => {
                let c = problem.channel.as_ref().and_then(|c| manifest.channels.get(c.index));
                let (name, bytes) = c.map_or(("?", 0), |c| (c.name.as_str(), c.bytes()));
                format!(
                    "guaranteed memory {} cannot hold channel {name:?} ({}) that this domain \
                     sends on: it needs {} in all ({} of stack and control block plus the \
                     memory of every channel it sends on)",
                    Bytes(*guaranteed),
                    Bytes(bytes),
                    Bytes(*needed),
                    Bytes(DOMAIN_FIXED_FRAMES * PAGE_SIZE)
                )
            }
            (ProblemKind::SenderAddressSpaceTooSmall { address_space, needed }, _) => {
                let c = problem.channel.as_ref().and_then(|c| manifest.channels.get(c.index));
                let (name, bytes) = c.map_or(("?", 0), |c| (c.name.as_str(), c.bytes()));
                format!(
                    "address space {} cannot hold channel {name:?} ({}) that this domain sends \
                     on: it needs {} in all ({} of stack and control block, the memory of \
                     every channel it sends on, and a guard page of {} below each)",
                    Bytes(*address_space),
                    Bytes(bytes),
                    Bytes(*needed),
                    Bytes(DOMAIN_FIXED_FRAMES * PAGE_SIZE),
                    Bytes(GUARD_BYTES)
                )
            }
            (kind, _) => kind.to_string(),
        }
    }
}
